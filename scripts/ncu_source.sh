#!/usr/bin/env bash
# Nsight Compute, source level, on one of our GEMM launches (device only; clocks left alone):
# the warp stall reasons of the whole kernel and the SASS lines with the most stall samples.
#   scripts/ncu_source.sh [MxNxK, default 8192x8192x128] [QUACK_GEMM_TILE_N value, default auto]
# Writes $OUT/ncu_<shape>_<tile>.txt (the summary) and prints it.
set -uo pipefail
cd "$(dirname "$0")/.."
SHAPE="${1:-8192x8192x128}"; TILE="${2:-auto}"
REP=/tmp/ncu_${SHAPE}_${TILE}; TXT="${OUT:-results}/ncu_${SHAPE}_${TILE}.txt"; mkdir -p "$(dirname "$TXT")"
QUACK_GEMM_TILE_N=$TILE timeout 240 ncu --clock-control none -k regex:gemm_kernel -c 1 --set full \
  --import-source no -f -o "$REP" build/gpu/bench/quack-bench gemm --shapes "$SHAPE" --ms 1 > /dev/null 2>&1
ncu -i "$REP.ncu-rep" --page raw --csv > "$REP.raw.csv" 2>/dev/null
ncu -i "$REP.ncu-rep" --page source --csv --print-source sass > "$REP.sass.csv" 2>/dev/null
python3 - "$REP.raw.csv" "$REP.sass.csv" <<'PY' | tee "$TXT"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) >= 3:
    head, units, vals = rows[0], rows[1], rows[2]
    keep = [(h, v) for h, v in zip(head, vals) if "warps_issue_stalled" in h and h.endswith("_per_warp_active.pct")]
    if not keep:
        keep = [(h, v) for h, v in zip(head, vals) if "warps_issue_stalled" in h and "ratio" in h]
    def num(v):
        try: return float(v.replace(",", ""))
        except ValueError: return 0.0
    print("stall reasons (top 12):")
    for h, v in sorted(keep, key=lambda x: -num(x[1]))[:12]:
        print(f"  {h:90s} {v}")
    for h, v in zip(head, vals):
        if h in ("gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                 "sm__throughput.avg.pct_of_peak_sustained_elapsed", "launch__registers_per_thread"):
            print(f"  {h} = {v}")
else:
    print("no raw page:", rows[:2])
try:
    src = list(csv.reader(open(sys.argv[2])))
except Exception as e:
    src = []
# ncu's source page starts with a "Kernel Name" row; the column header row is the first that
# names the stall-sampling column.
hi = next((i for i, r in enumerate(src) if any(h.startswith("Warp Stall Sampling (All") for h in r)), None)
if src and hi is not None:
    head, src = src[hi], src[hi:]
    col = next((i for i, h in enumerate(head) if h.startswith("Warp Stall Sampling (All")), None)
    srccol = next((i for i, h in enumerate(head) if h == "Source"), 1)
    if col is not None:
        def n(r):
            try: return float(r[col].replace(",", ""))
            except (ValueError, IndexError): return 0.0
        body = [r for r in src[1:] if len(r) > col]
        total = sum(n(r) for r in body) or 1.0
        print(f"SASS lines by stall samples (total {total:.0f}), top 30:")
        for r in sorted(body, key=n, reverse=True)[:30]:
            print(f"  {100 * n(r) / total:5.1f}%  {r[0]:>6}  {r[srccol][:110]}")
    else:
        print("source page columns:", head[:12])
else:
    print("no stall-sampling column in the source page; first rows:", [r[:3] for r in src[:3]])
PY
