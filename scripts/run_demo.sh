#!/usr/bin/env bash
# The main job: trains a small Llama-style LM (8 layers, d = 1024) on the King James Bible
# twice from one seed, with torch.nn.RMSNorm and with quack_cpp.nn.RMSNorm (plus a second
# torch seed as the noise yardstick), and prints loss agreement, step times and tokens/s.
#   scripts/run_demo.sh [--quick] [--steps N] [...]   (arguments go to demo/train_lm.py)
# Needs a Hopper GPU and PyTorch. Offline: .data/ (corpus, from scripts/prepare_corpus.sh) and
# .whl/ (wheels) are used when present.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "run_demo: needs a CUDA GPU (Hopper) and PyTorch; none found"
  exit 2
fi
[ -f .data/train.bin ] || bash scripts/prepare_corpus.sh
bash scripts/setup_deps.sh
python3 -m pip install -q --no-build-isolation --no-deps .
exec python3 demo/train_lm.py "$@"
