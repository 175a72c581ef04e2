#!/usr/bin/env bash
# The main job: trains the demo LLM (12 layers, d 2048, vocab 32768, 16384 tokens a step; ~751 M
# parameters) on the King James Bible five times on the same batches: (a) torch eager, (b)
# torch.compile, (c) our kernels, (d) ours under torch.compile, (e) torch with a second seed;
# prints tokens/s, peak memory, loss parity and a table, writes a plot and a JSON record
# ($OUT when set, else results/), and after (c) the trained model writes a few lines.
#   scripts/run_demo.sh [--quick] [--runs a,c] [--ours rmsnorm,linear] [...]
#                      (arguments go to demo/train_lm.py; --help lists them)
# Needs a Hopper GPU and PyTorch (--cpu-smoke: neither; a toy model on the CPU). Builds and
# installs quack_cpp when the installed one is missing or was built from other sources
# (QUACK_DEMO_REINSTALL=1 forces it). Offline: .data/ (corpus, scripts/prepare_corpus.sh),
# .whl/ (wheels) and QUACK_CUTLASS_INCLUDE or .deps/cutlass/include are used when present.
set -euo pipefail
cd "$(dirname "$0")/.."

smoke=0
for a in "$@"; do
  case "$a" in
    --cpu-smoke) smoke=1 ;;
  esac
done

# One line naming what is missing: PyTorch, or a GPU it can see.
python3 - "$smoke" <<'EOF' || exit 2
import sys
try:
    import torch
except ImportError:
    print(f"run_demo: needs PyTorch: {sys.executable} cannot import torch")
    sys.exit(2)
if sys.argv[1] != "1" and not torch.cuda.is_available():
    print(f"run_demo: needs a CUDA GPU (Hopper): torch {torch.__version__} sees none "
          "(--cpu-smoke runs a toy model on the CPU)")
    sys.exit(2)
EOF

bash scripts/prepare_corpus.sh   # a no-op when .data/ holds the corpus for vocab 32768
if [ "$smoke" = 1 ]; then
  exec python3 demo/train_lm.py "$@"
fi

# quack_cpp: (re)installed where it does not import or was built from other sources
# (scripts/install_package.sh: linking build/'s library, which it brings up to date first;
# QUACK_DEMO_REINSTALL=1 installs anyway).
t0=$(date +%s)
QUACK_REINSTALL=${QUACK_DEMO_REINSTALL:-0} bash scripts/install_package.sh python3 py \
  || { echo "run_demo: installing quack_cpp FAILED"; exit 1; }
echo "run_demo: quack_cpp $(python3 -c 'import quack_cpp; print(quack_cpp.__version__)') ready in $(( $(date +%s) - t0 )) s"
exec python3 demo/train_lm.py "$@"
