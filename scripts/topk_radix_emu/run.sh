#!/bin/bash
# Host emulation of the top-k radix-select kernel (src/topk/topk_radix_kernel.cuh), for checking
# it on a machine without a GPU: the kernel's own code, compiled by g++ with the CUDA device API
# mocked (cuda_mock.h: each CTA's threads as ucontext fibers that switch only at barriers and
# warp collectives, in a random order between them; shared memory poisoned per CTA; a barrier
# mismatch aborts as a deadlock), against the float64 reference of the tests
# (tests/cpp/reference/topk_ref.h). The device-only inline asm is replaced: PRMT by its
# definition, the empty register barriers (topk_opaque) removed, MUFU math by libm. Says
# nothing about speed, and its arithmetic of the softmax is libm's, not the MUFU's.
#
# Usage: scripts/topk_radix_emu/run.sh [level]   (0: every case, ~1 min on 2 cores; 2: a few)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(cd "$HERE/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/include/common" "$T/include/row" "$T/src/topk" "$T/src/common"
cp "$HERE/launch_mock.h" "$T/include/common/launch.h"
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
patch(T + '/src/topk/topk_bitonic_kernel.cuh',
      [('asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));',
        'd = ::emu::prmt(a, b, sel, true);')])
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
# row_reduce.cuh: RedVal, OnlineMaxSum, RedIsOnline and warp_allreduce_red only (the rest needs
# clusters).
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
g++ -std=c++17 -O1 -w -I "$HERE" -I "$T/include" -I "$T/src" -I "$W/src" -I "$W/include" -I "$W/tests/cpp" \
  "$HERE/harness.cpp" "$W/src/topk/topk_plan.cpp" -o "$T/harness"
"$T/harness" "${1:-0}"
