# Sourced by the device scripts: peers, wheels, PYTHONPATH, staged package.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/results/device}  # the device sets it; elsewhere (your own Hopper machine) results/device
R=$OUT/r; mkdir -p "$R"
# Each carried folder is optional (a PREBUILT call may carry .prebuilt alone).
for t in .peers/cutlass-include.tar.xz .prebuilt-lib/cutlass-include.tar.xz; do
  if [ ! -d .deps/cutlass/include ] && [ -f $t ]; then mkdir -p .deps && tar -xJf $t -C .deps; fi
done
export QUACK_CUTLASS_INCLUDE=$PWD/.deps/cutlass/include
if [ ! -d /tmp/qp/quack ] && [ -f .peers/quack-0.2.0-site.tar.xz ]; then mkdir -p /tmp/qp && tar -xJf .peers/quack-0.2.0-site.tar.xz -C /tmp/qp; fi
if [ ! -d /tmp/site/liger_kernel ] && ls .whl/*.whl > /dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1; fi
# stage [BUILD [DEST]]: the package (python/ and BUILD's extension modules; default build/d) as
# DEST/quack_cpp (default /tmp/s, PYTHONPATH's first entry).
stage() {
  local b=${1:-build/d} d=${2:-/tmp/s}
  rm -rf $d && mkdir -p $d/quack_cpp && cp python/quack_cpp/*.py $d/quack_cpp/ \
    && cp $b/python/_C*.so $d/quack_cpp/ && cp $b/python/_torch*.so $d/quack_cpp/ 2>/dev/null
}
export PYTHONPATH=/tmp/s:/tmp/site:/tmp/qp:/tmp/qp/nvidia_cutlass_dsl/python_packages
say() { echo "[$(date +%T)] $*"; }
# build: the A/B build into build/d (a warm machine keeps it; a fresh one builds, ~260 s;
# AB_INSTANCES=OFF leaves the candidate tiles of instances_ab.txt out).
build() {
  # PREBUILT=1: the binaries of .prebuilt/ (scripts/device/prebuild.sh) where its stamp is this
  # tree's and the A/B switch matches; no Python extension then (stage() finds none).
  if [ "${PREBUILT:-0}" = 1 ] && [ -f .prebuilt/bin.tar.xz ] &&
     [ "$(cat .prebuilt/stamp 2>/dev/null)" = "$(bash scripts/device/stamp.sh) ab=${AB_INSTANCES:-ON}" ]; then
    mkdir -p build/d && tar -xJf .prebuilt/bin.tar.xz -C build/d && echo "prebuilt binaries" >> $R/build.log && return 0
  fi
  [ "${PREBUILT:-0}" = 1 ] && echo "PREBUILT=1 but .prebuilt/ is missing or for another tree: building" | tee -a $R/build.log
  # PREBUILT_LIB=1: link .prebuilt-lib's libquack.a (scripts/device/prebuild_lib.sh) where its
  # stamp is this tree's library stamp and the A/B switch matches; the rest builds as usual.
  local lib=""
  # Without AB_INSTANCES, a prebuilt library's own A/B switch (a call that forgot it rebuilt
  # the whole library: ~280 s).
  if [ "${PREBUILT_LIB:-0}" = 1 ] && [ -z "${AB_INSTANCES:-}" ]; then
    for st in .prebuilt-lib/stamp build/lib/stamp; do
      [ -f $st ] && AB_INSTANCES=$(sed -n 's/.* ab=//p' $st) && break
    done
  fi
  if [ "${PREBUILT_LIB:-0}" = 1 ]; then
    local want="$(bash scripts/device/stamp.sh lib) ab=${AB_INSTANCES:-ON}"
    if [ -f build/lib/libquack.a ] && [ "$(cat build/lib/stamp 2>/dev/null)" = "$want" ]; then
      # A warm machine's copy from an earlier call (kept as is: a new copy would relink all).
      lib=$PWD/build/lib/libquack.a && echo "prebuilt libquack.a (this machine's copy)" | tee -a $R/build.log
    elif [ -f .prebuilt-lib/libquack.a.xz ] && [ "$(cat .prebuilt-lib/stamp 2>/dev/null)" = "$want" ]; then
      mkdir -p build/lib && rm -f build/lib/stamp && xz -dc .prebuilt-lib/libquack.a.xz > build/lib/libquack.a \
        && echo "$want" > build/lib/stamp \
        && lib=$PWD/build/lib/libquack.a && echo "prebuilt libquack.a" | tee -a $R/build.log
    else
      echo "PREBUILT_LIB=1 but .prebuilt-lib/ is missing or for another tree: building the library" | tee -a $R/build.log
    fi
  fi
  cmake -S . -B build/d -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUACK_BUILD_PYTHON=ON \
    -DQUACK_GEMM_AB_INSTANCES=${AB_INSTANCES:-ON} -DQUACK_PREBUILT_LIBRARY=$lib > $R/cmake.log 2>&1 \
    && ninja -C build/d -k 0 -j "$(nproc)" >> $R/build.log 2>&1  # -k 0: one failing TU spares the rest
}
# run_examples: the C++ examples against the library this call linked (.prebuilt-lib's copy in
# build/lib, else build/d's): scripts/run_examples.sh.
run_examples() {
  local lib=build/lib/libquack.a; [ -f build/d/libquack.a ] && lib=build/d/libquack.a
  bash scripts/run_examples.sh $lib $R
}
# Calls 2 and 3 on a machine that went cold in between: build first (their budget then shrinks).
ensure_built() { ls build/d/python/_C*.so > /dev/null 2>&1 || { say "no build/d here: building"; build || { tail -30 $R/build.log; echo BUILD FAILED; }; }; }
# test_summary LOG...: gtest OK count and FAILED lines over the gtest logs, the timed-out logs
# (with the test they were in), each pytest file's last line and its FAILED / ERROR lines.
test_summary() {
  echo "gtest OK: $(cat "$@" 2>/dev/null | grep -c '^\[       OK \]')  FAILED lines:"
  cat "$@" 2>/dev/null | grep -E '^\[  FAILED  \] [A-Za-z]' | sort -u | head -30
  for f in $(grep -l "^rc=124" $R/*.log); do echo "TIMEOUT $(basename $f) in: $(grep '^\[ RUN' $f | tail -1)"; done
  for f in $R/py_*.log; do [ -f "$f" ] && echo "$(basename $f): $(grep -vE '^rc=' $f | tail -1) $(grep '^rc=' $f)"; done
  grep -hE "^(FAILED|ERROR)" $R/py_*.log 2>/dev/null | head -30
}
# items_and_tables: the bench items of $ITEMS (default bench_items.sh; needs common_run.sh),
# then the tail of each item's table.
items_and_tables() {
  source "${ITEMS:-scripts/device/bench_items.sh}"
  say "tables"
  for f in $R/*.txt; do echo "=== $(basename $f)"; grep -vE "^\s*$" $f | tail -${TAIL:-${1:-30}}; done
}
