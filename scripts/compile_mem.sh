#!/usr/bin/env bash
# Wall time and peak memory of each GEMM instance TU's compile (the budget of DESIGN.md §4:
# ≤ 60 s and ≤ 3 GB per GEMM TU on the 2-core build machine): each TU's nvcc command from the
# Ninja build, without the ccache launcher, under /usr/bin/time, JOBS at a time (default 2).
#   scripts/compile_mem.sh [build-dir, default build] [regex of TUs, default gemm_([a-z]+_)?sm90_]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"; PAT="${2:-gemm_([a-z]+_)?sm90_}"; JOBS="${JOBS:-2}"
TMP=$(mktemp -d)
ninja -C "$BUILD" -t commands | grep -E "nvcc.*${PAT}[^ ]*\.cu\.o" | grep -v "^ *$" > "$TMP/cmds"
i=0
while read -r cmd; do
  i=$((i + 1))
  cmd="${cmd#*ccache }"  # no compiler cache: a real compile
  tu=$(echo "$cmd" | grep -oE "${PAT}[A-Za-z0-9_]*\.cu\.o" | head -1)
  out="$TMP/$i.o"
  ( cd "$BUILD" && /usr/bin/time -f "%e %M" -o "$TMP/$i.time" bash -c "${cmd% -o *} -o $out" > /dev/null 2>&1
    read -r s kb < "$TMP/$i.time"
    awk -v tu="$tu" -v s="$s" -v kb="$kb" 'BEGIN { printf "%-46s %6.1f s %6.2f GiB %6.2f GB\n", tu, s, kb / 1048576, kb * 1024 / 1e9 }' ) &
  [ $((i % JOBS)) = 0 ] && wait
done < "$TMP/cmds"
wait
rm -rf "$TMP"
