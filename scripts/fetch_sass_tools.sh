#!/usr/bin/env bash
# cuobjdump and nvdisasm (CUDA 13.5, NVIDIA's PyPI wheels nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm) into the git-ignored .deps/sass-tools/bin, for reading SASS on a machine
# whose CUDA toolkit lacks them (this project's CPU machines: nvcc only). Then:
#   export PATH=$PWD/.deps/sass-tools/bin:$PATH; cuobjdump -sass build/CMakeFiles/quack.dir/generated/gemm/<TU>.cu.o
# (QuACK's SASS beside ours: scripts/quack_sass_cpu.sh). Idempotent; needs internet once.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.deps/sass-tools
if [ -x "$dest/bin/cuobjdump" ] && [ -x "$dest/bin/nvdisasm" ]; then echo "fetch_sass_tools: $dest/bin already there"; exit 0; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps -d "$tmp" "nvidia-cuda-cuobjdump==13.5.*" "nvidia-cuda-nvdisasm==13.5.*"
mkdir -p "$dest/bin"
for w in "$tmp"/*.whl; do python3 -m zipfile -e "$w" "$tmp/x"; done
cp "$tmp"/x/nvidia/cu13/bin/cuobjdump "$tmp"/x/nvidia/cu13/bin/nvdisasm "$dest/bin/"
chmod +x "$dest/bin/"*
echo "fetch_sass_tools: cuobjdump and nvdisasm in $dest/bin"
