"""The mocked source tree of the top-k host emulations (run.sh of scripts/topk_radix_emu and
scripts/topk_bitonic_emu): copies src/topk and src/common/vec.cuh into T, stands the CUDA headers
and common/launch.h in for the mock, and replaces the device-only inline asm: PRMT and HSET2's
NaN masks by their definitions, the empty register barriers (topk_opaque) removed, the L2
prefetch dropped, MUFU math by libm; row_reduce.cuh cut to what top-k uses (no clusters).

    python3 prepare_tree.py W T [EXTRA]

EXTRA: a Python file defining EXTRA = {path under T: [(old, new), ...]}, more replacements (a
harness's counters), applied after these."""
import glob
import os
import runpy
import shutil
import sys

W, T = sys.argv[1], sys.argv[2]
MOCK = os.path.dirname(os.path.abspath(__file__))
for d in ("include/common", "include/row", "src/topk", "src/common"):
    os.makedirs(os.path.join(T, d), exist_ok=True)
shutil.copy(os.path.join(MOCK, "launch_mock.h"), os.path.join(T, "include/common/launch.h"))
for f in ("cuda_bf16.h", "cuda_fp16.h", "cuda_runtime.h", "cuda_runtime_api.h"):
    with open(os.path.join(T, "include", f), "w") as out:
        out.write('#pragma once\n#include "cuda_mock.h"\n')
for f in glob.glob(os.path.join(W, "src/topk/*.cuh")) + glob.glob(os.path.join(W, "src/topk/*.h")):
    shutil.copy(f, os.path.join(T, "src/topk"))
shutil.copy(os.path.join(W, "src/common/vec.cuh"), os.path.join(T, "src/common"))


def patch(path, pairs):
    s = open(path).read()
    for a, b in pairs:
        assert a in s, (path, a)
        s = s.replace(a, b)
    open(path, "w").write(s)


patch(T + "/src/topk/topk_bitonic_kernel.cuh",
      [('asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));',
        'd = ::emu::prmt(a, b, sel, true);'),
       ('asm("set.nan.u32.bf16x2 %0, %1, %1;" : "=r"(d) : "r"(w));',
        'd = ::emu::set_nan2(w, 0x7f80u);'),
       ('asm("set.nan.u32.f16x2 %0, %1, %1;" : "=r"(d) : "r"(w));',
        'd = ::emu::set_nan2(w, 0x7c00u);'),
       ('asm("shr.s32 %0, %1, %2;" : "=r"(s) : "r"(w), "r"(sh));',  # PTX clamps the shift to 32
        's = static_cast<uint32_t>(static_cast<int32_t>(w) >> (sh > 31u ? 31u : sh));'),
       ('asm volatile("xor.b32 %0, %0, 0x80000000;" : "+r"(w));', 'w ^= 0x80000000u;'),
       ('asm("{\\n\\t.reg .pred p;\\n\\tsetp.ge.f32 p, %1, %2;\\n\\t@p or.b32 %0, %0, %3;\\n\\t}"\n'
        '      : "+r"(c)\n      : "f"(x), "f"(t), "r"(bit));', 'if (x >= t) c |= bit;'),
       ('asm volatile("" : "+l"(p));', '')])
patch(T + "/src/topk/topk_queue_kernel.cuh",
      [('asm volatile("" : "+r"(v));', ''), ('asm volatile("" : "+l"(v));', ''),
       ('asm volatile("" : "+r"(v.word[0].x), "+r"(v.word[0].y), "+r"(v.word[0].z), '
        '"+r"(v.word[0].w));', '')])
patch(T + "/src/common/vec.cuh",
      [('asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");',
        '(void)p; (void)bytes;')])
s = open(W + "/src/row/row_math.cuh").read()
for a, b in [('asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));', 'y = std::exp2(x);'),
             ('asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));', 'y = std::log2(x);'),
             ('asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));', 'y = 1.f / x;')]:
    assert a in s
    s = s.replace(a, b)
open(T + "/include/row/row_math.cuh", "w").write(
    s.replace("#pragma once", '#pragma once\n#include "cuda_mock.h"', 1))
# row_reduce.cuh: RedVal, OnlineMaxSum, RedIsOnline and warp_allreduce_red only (the rest needs
# clusters).
r = open(W + "/src/row/row_reduce.cuh").read()
body = r[r.index("template <int K>\nstruct RedVal"):r.index("struct RedSum")]
body += r[r.index("/// Online softmax statistics"):r.index(
    "// ---------------------------------------------------------------------- all-reduces")]
a = r.index("template <class R>\n__device__ __forceinline__ typename R::Val warp_allreduce_red")
body += r[a:r.index("\n}\n", a) + 3]
open(T + "/include/row/row_reduce.cuh", "w").write(
    '#pragma once\n#include "cuda_mock.h"\n#include "row/row_math.cuh"\n#include <cstdint>\n'
    "#include <type_traits>\nnamespace quack::detail {\n" + body + "\n}  // namespace quack::detail\n")
if len(sys.argv) > 3:
    for rel, pairs in runpy.run_path(sys.argv[3])["EXTRA"].items():
        patch(os.path.join(T, rel), pairs)
