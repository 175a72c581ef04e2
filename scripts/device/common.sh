# Sourced by the device scripts: peers, wheels, PYTHONPATH, staged package.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p "$R"
if [ ! -d .deps/cutlass/include ]; then mkdir -p .deps && tar -xJf .peers/cutlass-include.tar.xz -C .deps; fi
export QUACK_CUTLASS_INCLUDE=$PWD/.deps/cutlass/include
if [ ! -d /tmp/qp/quack ]; then mkdir -p /tmp/qp && tar -xJf .peers/quack-0.2.0-site.tar.xz -C /tmp/qp; fi
if [ ! -d /tmp/site/liger_kernel ]; then python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1; fi
stage() {
  rm -rf /tmp/s && mkdir -p /tmp/s/quack_cpp && cp python/quack_cpp/*.py /tmp/s/quack_cpp/ \
    && cp build/d/python/_C*.so /tmp/s/quack_cpp/ && cp build/d/python/_torch*.so /tmp/s/quack_cpp/ 2>/dev/null
}
export PYTHONPATH=/tmp/s:/tmp/site:/tmp/qp:/tmp/qp/nvidia_cutlass_dsl/python_packages
say() { echo "[$(date +%T)] $*"; }
# build: the A/B build into build/d (a warm machine keeps it; a fresh one builds, ~260 s).
build() {
  cmake -S . -B build/d -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUACK_BUILD_PYTHON=ON -DQUACK_GEMM_AB_INSTANCES=ON > $R/cmake.log 2>&1 \
    && ninja -C build/d -j "$(nproc)" > $R/build.log 2>&1
}
# Calls 2 and 3 on a machine that went cold in between: build first (their budget then shrinks).
ensure_built() { ls build/d/python/_C*.so > /dev/null 2>&1 || { say "no build/d here: building"; build || { tail -30 $R/build.log; echo BUILD FAILED; }; }; }
