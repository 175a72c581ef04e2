#!/usr/bin/env bash
# Nsight Compute summary of one kernel launch (device only; clocks left alone): duration, DRAM
# throughput and bytes, occupancy and its limiters, launch geometry, the top warp stall reasons.
#   scripts/ncu_kernel.sh NAME KERNEL_REGEX COMMAND...   (e.g. rmsnorm_bwd regex:row_.*_kernel
#   build/gpu/bench/quack-bench rmsnorm --dir bwd --dtype bf16 --shapes 16384x4096 --ms 1)
# Profiles the 3rd matching launch (after warm-up), writes $OUT/ncu_NAME.txt and prints it.
# KBASE=demangled matches KERNEL_REGEX against the demangled name with its template arguments
# (e.g. 'regex:CrossEntropyFwd<(true|\(bool\)1)' for the fwd+dx instance where two instances
# share a kernel: demanglers spell a bool argument true or (bool)1).
set -uo pipefail
cd "$(dirname "$0")/.."
NAME="$1"; KREGEX="$2"; shift 2
REP=/tmp/ncu_$NAME; TXT="${OUT:-results}/ncu_$NAME.txt"; mkdir -p "$(dirname "$TXT")"
timeout 240 ncu --clock-control none --kernel-name-base "${KBASE:-function}" -k "$KREGEX" -s 2 -c 1 --set full -f -o "$REP" "$@" > "$REP.log" 2>&1 \
  || echo "ncu exit $?"
[ -f "$REP.ncu-rep" ] || { echo "no report; ncu said:"; grep -E '==(ERROR|WARNING)==' "$REP.log" | tail -8; }
ncu -i "$REP.ncu-rep" --page raw --csv > "$REP.raw.csv" 2>/dev/null
python3 - "$REP.raw.csv" "$NAME" <<'PY' | tee "$TXT"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) < 3:
    print(sys.argv[2], ": no ncu data", rows[:2]); sys.exit(0)
head, vals = rows[0], rows[2]
d = dict(zip(head, vals))
def num(v):
    try: return float(v.replace(",", ""))
    except (ValueError, AttributeError): return 0.0
print(f"== {sys.argv[2]}: {d.get('Kernel Name', '?')[:100]}")
for k in ("gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
          "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sector_hit_rate.pct",
          "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
          "launch__grid_size", "launch__block_size", "launch__cluster_size" , "launch__registers_per_thread",
          "launch__shared_mem_per_block_dynamic", "launch__occupancy_limit_registers",
          "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_warps", "launch__occupancy_limit_blocks",
          "launch__waves_per_multiprocessor", "smsp__inst_executed.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"):
    if k in d: print(f"  {k:60s} {d[k]}")
import re
pipes = [(h, v) for h, v in d.items()
         if re.fullmatch(r"sm__inst_executed_pipe_[a-z_]+\.avg\.pct_of_peak_sustained_active", h)
         and num(v) >= 5.0]
print("  pipes (% of peak issue, >= 5 %):")
for h, v in sorted(pipes, key=lambda x: -num(x[1])):
    print(f"    {h.replace('sm__inst_executed_pipe_', '').replace('.avg.pct_of_peak_sustained_active', ''):40s} {v}")
for k in ("sm__cycles_elapsed.avg.per_second", "smsp__issue_active.avg.pct_of_peak_sustained_active"):
    if k in d: print(f"  {k:60s} {d[k]}")
st = [(h, v) for h, v in d.items() if "warps_issue_stalled" in h and (h.endswith("_per_warp_active.pct") or h.endswith("_per_issue_active.ratio"))]
print("  stall reasons (% of active warp cycles, top 8):")
for h, v in sorted(st, key=lambda x: -num(x[1]))[:8]:
    print(f"    {h.replace('smsp__average_warps_issue_stalled_', '').replace('_per_warp_active.pct', ''):40s} {v}")
PY
