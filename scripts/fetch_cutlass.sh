#!/usr/bin/env bash
# Copies the CUTLASS/CuTe 4.2 headers (from the pip package nvidia-cutlass==4.2.0.0, installed
# when missing) into the git-ignored .deps/cutlass/include, for machines without internet (the
# GPU machine: carry ".deps" with the call; scripts/gpu_check.sh then sets QUACK_CUTLASS_INCLUDE).
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.deps/cutlass/include
if [ -f "$dest/cute/tensor.hpp" ]; then echo "fetch_cutlass: $dest already there"; exit 0; fi
python3 -c 'import cutlass_library' 2>/dev/null || python3 -m pip install -q --no-deps nvidia-cutlass==4.2.0.0
src=$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))')
mkdir -p "$dest"
cp -r "$src"/. "$dest"/
echo "fetch_cutlass: copied $(du -sh "$dest" | cut -f1) of headers to $dest"
