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

# quack_cpp: (re)install when it is not importable or was built from other sources than these
# (a content hash of what the wheel is built from, kept beside the wheel's build tree).
stamp_file=build-py/.run_demo_installed
stamp="$( { python3 -c 'import sys; print(sys.prefix)'
            find src include python cmake CMakeLists.txt pyproject.toml -type f \
              ! -name '*.pyc' -print0 | sort -z | xargs -0 sha1sum; } | sha1sum | cut -d' ' -f1)"
if [ "${QUACK_DEMO_REINSTALL:-0}" != 1 ] && [ -f "$stamp_file" ] &&
   [ "$(cat "$stamp_file")" = "$stamp" ] &&
   python3 -c 'import quack_cpp' 2>/dev/null; then
  echo "run_demo: quack_cpp $(python3 -c 'import quack_cpp; print(quack_cpp.__version__)') is installed from these sources"
else
  bash scripts/setup_deps.sh
  echo "run_demo: building and installing quack_cpp (pip install .; a first build takes minutes)"
  t0=$(date +%s)
  python3 -m pip install -q --no-build-isolation --no-deps .
  mkdir -p build-py && echo "$stamp" > "$stamp_file"
  echo "run_demo: installed in $(( $(date +%s) - t0 )) s"
fi
exec python3 demo/train_lm.py "$@"
