#!/bin/bash
# Host emulation of the top-k register (bitonic) kernel (src/topk/topk_bitonic_kernel.cuh), for
# checking it on a machine without a GPU, above all the fp32 path's truncated entries and its
# exactness fix-up: the kernel's own code (every fp32 instance: lists 8 / 16 / 32, E = 16..128,
# fit and generic; a few 16-bit ones beside), compiled by g++ against the CUDA mock of
# scripts/topk_radix_emu (cuda_mock.h, launch_mock.h: each CTA's threads as fibers switching at
# warp collectives; a group-masked shuffle meets the group's lanes only), checked against the
# float64 reference of the tests (tests/cpp/reference/topk_ref.h). PRMT by its definition, the
# empty register barriers removed, MUFU math by libm. Says nothing about speed.
#
# Usage: scripts/topk_bitonic_emu/run.sh [level]   (0: every case; 1: fewer)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
MOCK=$(cd "$HERE/../topk_radix_emu" && pwd)
W=$(cd "$HERE/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/include/common" "$T/include/row" "$T/src/topk" "$T/src/common"
cp "$MOCK/launch_mock.h" "$T/include/common/launch.h"
for f in cuda_bf16.h cuda_fp16.h cuda_runtime.h cuda_runtime_api.h; do
  printf '#pragma once\n#include "cuda_mock.h"\n' > "$T/include/$f"
done
cp "$W"/src/topk/*.cuh "$W"/src/topk/*.h "$T/src/topk/"
cp "$W/src/common/vec.cuh" "$T/src/common/"
W="$W" T="$T" python3 - <<'PY'
import os
W, T = os.environ['W'], os.environ['T']
def patch(path, pairs):
    s = open(path).read()
    for a, b in pairs:
        assert a in s, (path, a)
        s = s.replace(a, b)
    open(path, 'w').write(s)
# Counters of the fp32 fix-up's branches (emu_stats, printed by the harness: each must be hit).
patch(T + '/src/topk/topk_bitonic_kernel.cuh',
      [('asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));',
        'd = ::emu::prmt(a, b, sel, true);'),
       ('  if (max_out <= min_in) return;', '  ++emu_stats[0];\n  if (max_out <= min_in) return;\n  ++emu_stats[1];'),
       ('      if (tie) {', '      if (tie) {\n        ++emu_stats[2];'),
       ('namespace quack::detail {', 'namespace quack::detail {\ninline long emu_stats[3];', )])
patch(T + '/src/topk/topk_queue_kernel.cuh',
      [('asm volatile("" : "+r"(v));', ''), ('asm volatile("" : "+l"(v));', ''),
       ('asm volatile("" : "+r"(v.word[0].x), "+r"(v.word[0].y), "+r"(v.word[0].z), '
        '"+r"(v.word[0].w));', '')])
patch(T + '/src/common/vec.cuh',
      [('asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");',
        '(void)p; (void)bytes;')])
s = open(W + '/src/row/row_math.cuh').read()
for a, b in [('asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));', 'y = std::exp2(x);'),
             ('asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));', 'y = std::log2(x);'),
             ('asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));', 'y = 1.f / x;')]:
    assert a in s
    s = s.replace(a, b)
open(T + '/include/row/row_math.cuh', 'w').write(
    s.replace('#pragma once', '#pragma once\n#include "cuda_mock.h"', 1))
r = open(W + '/src/row/row_reduce.cuh').read()
body = r[r.index('template <int K>\nstruct RedVal'):r.index('struct RedSum')]
body += r[r.index('/// Online softmax statistics'):r.index(
    '// ---------------------------------------------------------------------- all-reduces')]
a = r.index('template <class R>\n__device__ __forceinline__ typename R::Val warp_allreduce_red')
body += r[a:r.index('\n}\n', a) + 3]
open(T + '/include/row/row_reduce.cuh', 'w').write(
    '#pragma once\n#include "cuda_mock.h"\n#include "row/row_math.cuh"\n#include <cstdint>\n'
    '#include <type_traits>\nnamespace quack::detail {\n' + body + '\n}  // namespace quack::detail\n')
PY
g++ -std=c++17 -O1 -w -I "$MOCK" -I "$T/include" -I "$T/src" -I "$W/src" -I "$W/include" -I "$W/tests/cpp" \
  "$HERE/harness.cpp" "$W/src/topk/topk_plan.cpp" -o "$T/harness"
"$T/harness" "${1:-0}"
