#!/usr/bin/env bash
# QuACK 0.2.0's dense GEMM (GemmSm90, 128x192 pingpong, 2x1 cluster, bf16, static persistent
# schedule, alpha = 1, no C: quack.gemm_interface.gemm(A, B, tuned=False)'s kernel) compiled on a
# machine without a GPU, its cubin and SASS written to $1 (default /tmp/quack_sass): for SASS
# comparisons with our instances (cuobjdump -sass). Needs python3.12 (pyenv), gcc, cuobjdump (scripts/fetch_sass_tools.sh), and
# .peers/quack-0.2.0-site.tar.xz (or $QUACK_SITE_TAR); installs numpy, typing-extensions and cuda-python 12.x into a
# venv under $1. torch is replaced by a stub (quack's GEMM module only names its types) and
# libcuda by a stub library that the DSL's host JIT links against (nothing is launched).
#   scripts/quack_sass_cpu.sh [outdir] [km|kk]   (km: B MN-major, the bench's rr; default km)
set -euo pipefail
OUT=${1:-/tmp/quack_sass}; MAJ=${2:-km}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY312:-/root/.pyenv/versions/3.12.1/bin/python3}
mkdir -p "$OUT" && cd "$OUT"
[ -d site ] || { mkdir site && tar xJf "${QUACK_SITE_TAR:-$ROOT/.peers/quack-0.2.0-site.tar.xz}" -C site; }
[ -x venv/bin/python ] || { "$PY" -m venv venv && venv/bin/pip install -q numpy typing-extensions "cuda-python>=12.8,<13"; }
mkdir -p stub/torch fakecuda
cat > stub/torch/__init__.py <<'PYEOF'
class _Dummy:
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return _Dummy()
    def __getattr__(self, n): return _Dummy()
class Tensor(_Dummy): pass
class dtype(_Dummy): pass
class device(_Dummy): pass
def __getattr__(name):
    if name.startswith('__'): raise AttributeError(name)
    return _Dummy()
PYEOF
for s in $(nm -D --undefined-only site/nvidia_cutlass_dsl/lib/libmlir_cuda_runtime.so | awk '$2 ~ /^cu/ {print $2}'); do
  echo "int $s(){return 999;}"; done > fakecuda/fake.c
gcc -shared -fPIC -o fakecuda/libcuda.so.1 fakecuda/fake.c
cat > compile.py <<'PYEOF'
import sys, site, types, os
os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
here = os.getcwd()
sys.path.insert(0, os.path.join(here, 'stub'))
site.addsitedir(os.path.join(here, 'site'))
m = types.ModuleType('quack'); m.__path__ = [os.path.join(here, 'site', 'quack')]; sys.modules['quack'] = m
import numpy as np
import cutlass, cutlass.cute as cute
from cutlass import Int32
from cutlass.cute.runtime import from_dlpack
import cutlass.base_dsl.runtime.cuda as ch
out, maj = sys.argv[1], sys.argv[2]
def save(cubin):
    open(out, 'wb').write(cubin); return object()
ch.load_cubin_module_data = save  # the JIT hands us the cubin instead of loading it
ch.get_kernel_function = lambda *a, **k: types.SimpleNamespace(getPtr=lambda: 0)
ch.set_kernel_attribute = lambda *a, **k: None
ch.get_driver_version = lambda: 12080
ch.unload_cubin_module = lambda *a, **k: None
import cuda.bindings.driver as cuda
import quack.dense_gemm_sm90 as dg
from quack.tile_scheduler import TileSchedulerOptions
M = N = K = 8192
u = np.zeros(M * K + 64, dtype=np.uint16)
def mk(shape, strides, lead):
    t = from_dlpack(np.lib.stride_tricks.as_strided(u, shape=shape, strides=tuple(2 * s for s in strides)), assumed_align=16)
    t.element_type = cutlass.BFloat16
    return t.mark_layout_dynamic(leading_dim=lead)
A = mk((M, K, 1), (K, 1, M * K), 1)
B = mk((N, K, 1), (K, 1, N * K), 1) if maj == 'kk' else mk((N, K, 1), (1, N, N * K), 0)
D = mk((M, N, 1), (N, 1, M * N), 1)
g = dg.GemmSm90(cutlass.Float32, cutlass.BFloat16, (128, 192), (2, 1, 1), pingpong=True, is_persistent=True)
cute.compile(g, A, B, D, None, dg.GemmSm90.EpilogueArguments(None, None),
             TileSchedulerOptions(Int32(66), tile_count_semaphore=None), None, None, cuda.CUstream(0))
PYEOF
LD_LIBRARY_PATH="$OUT/fakecuda" venv/bin/python compile.py "quack_gemm_$MAJ.cubin" "$MAJ"
cuobjdump -sass "quack_gemm_$MAJ.cubin" > "quack_gemm_$MAJ.sass"
cuobjdump -res-usage "quack_gemm_$MAJ.cubin" | grep -i reg || true
echo "$OUT/quack_gemm_$MAJ.sass: $(grep -c '/\*[0-9a-f]\{4,\}\*/' "quack_gemm_$MAJ.sass") instructions"
