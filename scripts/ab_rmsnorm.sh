#!/usr/bin/env bash
# A/B of RMSNorm (forward and backward) between a base commit and this working tree, in one
# device call: the README table's shapes, both trees' quack-bench in the same process order,
# printing new/base per shape.
#
#   scripts/ab_rmsnorm.sh --save BASE_SHA   (here, with git: packs the base's build inputs into
#                                            .dev/ab_base/BASE_SHA.tar.gz, git-ignored)
#   scripts/ab_rmsnorm.sh BASE_SHA          (on the GPU machine: carry .dev/ab_base with the
#                                            call; without the tarball it uses `git archive`)
#
# Both trees are built from copies (src include bench cmake CMakeLists.txt) in .dev/ab_build/
# with the GEMM instance list cut to its first line (quack-bench links the GEMM; RMSNorm does
# not use it) and no tests, in parallel; the build directories stay under .dev/ab_build/ so a
# second call on the same machine rebuilds nothing. Then `quack-bench rmsnorm` runs for each
# dtype and tree in the order base, new, new, base (two rounds; the figure is the mean of a
# tree's two rounds), fwd and bwd with an fp32 weight (bwd with dweight), as the README table.
# Env: ROUNDS (default 2), MS (time budget per timing, default 100), JOBS (default nproc).
# Output: the table on stdout; raw JSON lines in $OUT (or .dev/ab_build/) as ab_rmsnorm.jsonl.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$ROOT/.dev/ab_build
PACK_DIR=$ROOT/.dev/ab_base
PARTS="src include bench cmake CMakeLists.txt"

if [ "${1:-}" = "--save" ]; then
  sha=${2:?usage: ab_rmsnorm.sh --save BASE_SHA}
  mkdir -p "$PACK_DIR"
  git archive --format=tar.gz -o "$PACK_DIR/$sha.tar.gz" "$sha" $PARTS \
    && echo "saved $PACK_DIR/$sha.tar.gz ($(du -h "$PACK_DIR/$sha.tar.gz" | cut -f1))"
  exit $?
fi
BASE=${1:?usage: ab_rmsnorm.sh BASE_SHA (or --save BASE_SHA)}
ROUNDS=${ROUNDS:-2}
MS=${MS:-100}
JOBS=${JOBS:-$(nproc)}
RES=${OUT:-$WORK}
mkdir -p "$WORK" "$RES"

# CUTLASS headers (the GEMM's; gpu_check.sh's lookup).
if [ ! -d .deps/cutlass/include ] && [ -f .peers/cutlass-include.tar.xz ]; then
  mkdir -p .deps && tar -xJf .peers/cutlass-include.tar.xz -C .deps
fi
[ -d .deps/cutlass/include ] && export QUACK_CUTLASS_INCLUDE="${QUACK_CUTLASS_INCLUDE:-$ROOT/.deps/cutlass/include}"

# The two source trees.
rm -rf "$WORK/base_src" "$WORK/new_src"
mkdir -p "$WORK/base_src" "$WORK/new_src"
if [ -f "$PACK_DIR/$BASE.tar.gz" ]; then
  tar -xzf "$PACK_DIR/$BASE.tar.gz" -C "$WORK/base_src"
elif git rev-parse --verify -q "$BASE^{commit}" >/dev/null 2>&1; then
  git archive --format=tar "$BASE" $PARTS | tar -x -C "$WORK/base_src"
else
  echo "ab_rmsnorm: no $PACK_DIR/$BASE.tar.gz and no git commit $BASE (run --save here first)" >&2
  exit 2
fi
tar -cf - $PARTS | tar -xf - -C "$WORK/new_src"
for t in base new; do
  list="$WORK/${t}_src/src/gemm/sm90/instances.txt"
  [ -f "$list" ] && { grep '^#' "$list"; grep -v '^#' "$list" | grep -v '^[[:space:]]*$' | head -1; } \
    > "$list.cut" && mv "$list.cut" "$list"
done

# Build both quack-bench binaries in parallel (half the cores each).
t0=$(date +%s)
for t in base new; do
  ( cmake -S "$WORK/${t}_src" -B "$WORK/${t}_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DQUACK_BUILD_TESTS=OFF -DQUACK_BUILD_PYTHON=OFF >"$WORK/${t}_build.log" 2>&1 \
    && ninja -C "$WORK/${t}_build" -j $(( (JOBS + 1) / 2 )) quack-bench >>"$WORK/${t}_build.log" 2>&1 \
    || { echo "ab_rmsnorm: build of $t FAILED"; tail -20 "$WORK/${t}_build.log"; } ) &
done
wait
echo "ab_rmsnorm: builds took $(( $(date +%s) - t0 )) s"
for t in base new; do
  [ -x "$WORK/${t}_build/bench/quack-bench" ] || { echo "ab_rmsnorm: no $t quack-bench" >&2; exit 1; }
done

# The README table's shapes.
BF16="16384x1024,16384x4096,16384x8192,16384x32768,16384x65536,16384x131072,8192x262144"
F32="16384x1024,16384x8192,16384x32768,16384x65536,16384x131072"
JSONL="$RES/ab_rmsnorm.jsonl"
: > "$JSONL"
run() {  # tree round dtype shapes
  "$WORK/$1_build/bench/quack-bench" rmsnorm --dtype "$3" --shapes "$4" --dir both --ms "$MS" \
    | python3 -c "
import json, sys
for l in sys.stdin:
    l = l.strip()
    if l.startswith('{'):
        d = json.loads(l); d['tree'] = '$1'; d['round'] = $2; print(json.dumps(d))" >> "$JSONL"
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for t in $order; do
    run "$t" "$r" bf16 "$BF16"
    run "$t" "$r" fp32 "$F32"
  done
done

python3 - "$JSONL" <<'EOF'
import json, sys
from collections import defaultdict
tb = defaultdict(list)
for l in open(sys.argv[1]):
    d = json.loads(l)
    tb[(d["op"], d["dtype"], d["M"], d["N"], d["tree"])].append(d["tbps"])
keys = sorted({k[:4] for k in tb}, key=lambda k: (k[0], k[1] != "bfloat16", k[3]))
print(f"{'op':12} {'dtype':9} {'M x N':>15} {'base TB/s':>10} {'new TB/s':>9} {'new/base':>9}")
worst = 9.0
for k in keys:
    b, n = tb.get(k + ("base",), []), tb.get(k + ("new",), [])
    if not b or not n:
        continue
    mb, mn = sum(b) / len(b), sum(n) / len(n)
    worst = min(worst, mn / mb)
    flag = "  <-- below 0.98" if mn / mb < 0.98 else ""
    print(f"{k[0]:12} {k[1]:9} {f'{k[2]} x {k[3]}':>15} {mb:10.3f} {mn:9.3f} {mn / mb:9.3f}{flag}")
print(f"worst new/base: {worst:.3f}")
EOF
