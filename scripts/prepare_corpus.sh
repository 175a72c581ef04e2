#!/usr/bin/env bash
# Prepare the demo LM corpus once into .data/ (git-ignored) at the repo root.
#
# Source: Debian's `bible-kjv-text` package (the King James Version, 1611 —
# public domain). Its text ships in a compressed random-access format, so the
# reader program from Debian's `bible-kjv` package (same source, downloaded and
# unpacked too, never installed) dumps it to plain text, one verse per line.
# Then a byte-level BPE (HuggingFace `tokenizers`, GPT-2 style: merges stay
# inside a word, asked for a vocabulary of 32768) is trained on the training part
# and the text is written as uint16 token arrays:
#   .data/train.bin   first 95% of the text (cut at a line boundary)
#   .data/val.bin     last 5%
#   .data/tokenizer.json, .data/meta.json, .data/kjv.txt.gz (the plain text)
# The KJV has fewer distinct words than 32768: the trainer stops when no pair
# occurs twice (~14.5k tokens, ~1.0M train tokens). meta.json's vocab_size is
# the tokenizer's; the demo's model keeps its embedding and head at 32768 rows
# (bpe_vocab_target), the ids above vocab_size never occur in the data.
# Idempotent: if .data/train.bin exists and meta.json records this script's
# bpe_vocab_target it says so and exits 0. A .data/ made for another target
# is re-tokenized from its own .data/kjv.txt.gz (no download: works offline).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATA="$ROOT/.data"
VOCAB=32768

have_target() {  # meta.json's bpe_vocab_target (0 when absent)
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("bpe_vocab_target", 0))' \
    "$DATA/meta.json" 2> /dev/null || echo 0
}
if [[ -f "$DATA/train.bin" ]]; then
  if [[ "$(have_target)" == "$VOCAB" ]]; then
    echo "prepare_corpus: $DATA/train.bin already exists (BPE target $VOCAB); nothing to do"
    exit 0
  fi
  echo "prepare_corpus: $DATA holds a corpus for BPE target $(have_target), not $VOCAB; re-tokenizing"
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
chmod 755 "$TMP"   # so apt's sandbox user may write the .deb files here
cd "$TMP"

if [[ -f "$DATA/kjv.txt.gz" && -f "$DATA/meta.json" ]]; then
  # The plain text of an earlier run: no download (offline machines).
  gzip -dc "$DATA/kjv.txt.gz" > kjv.txt
  PKG_VERSION="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("source_version", "unknown"))' "$DATA/meta.json")"
  echo "prepare_corpus: plain text from $DATA/kjv.txt.gz (bible-kjv-text $PKG_VERSION), $(wc -c < kjv.txt) bytes"
else
for tool in apt-get dpkg dpkg-deb; do
  command -v "$tool" > /dev/null || { echo "prepare_corpus: needs $tool" >&2; exit 1; }
done

fetch() {
  apt-get download bible-kjv-text bible-kjv > apt.log 2>&1
}
if ! fetch; then
  echo "prepare_corpus: apt-get download failed; running apt-get update first"
  apt-get update -qq
  fetch || { cat apt.log >&2; exit 1; }
fi

TEXT_DEB="$(ls bible-kjv-text_*.deb)"
READER_DEB="$(ls bible-kjv_*.deb)"
PKG_VERSION="$(dpkg-deb -f "$TEXT_DEB" Version)"
dpkg -x "$TEXT_DEB" pkg
dpkg -x "$READER_DEB" pkg
DATA_FILE="$(find pkg -type f -name bible.data | head -n 1)"
[[ -n "$DATA_FILE" ]] || { echo "prepare_corpus: bible.data not found in $TEXT_DEB" >&2; exit 1; }
echo "prepare_corpus: bible-kjv-text $PKG_VERSION -> $DATA_FILE"

# The reader needs libreadline8 (present on Debian images as a rule).
if ldd pkg/usr/bin/bible | grep -q 'not found'; then
  echo "prepare_corpus: installing the reader's shared libraries (libreadline8)"
  apt-get install -y -qq libreadline8 > /dev/null
fi
# -l 100000: pretty-printed (book/chapter headings, numbered verses) but no
# line wrapping, so each verse is one line.
pkg/usr/bin/bible -l 100000 -p "$TMP/$(dirname "$DATA_FILE")" Gen1:1-Rev22:21 > kjv.txt
echo "prepare_corpus: plain text $(wc -c < kjv.txt) bytes, $(wc -l < kjv.txt) lines"
fi

if ! python3 -c 'import tokenizers, numpy' 2> /dev/null; then
  echo "prepare_corpus: installing tokenizers/numpy with pip"
  python3 -m pip install -q tokenizers numpy
fi

mkdir -p "$TMP/out"
python3 - "$TMP/kjv.txt" "$TMP/out" "$VOCAB" "$PKG_VERSION" <<'EOF'
import gzip, json, sys
import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

src, out, vocab, version = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
text = open(src, encoding="utf-8").read().lstrip("\n")
# Last 5% of the text is validation; cut at a line boundary.
cut = text.rfind("\n", 0, int(len(text) * 0.95)) + 1
train_text, val_text = text[:cut], text[cut:]

tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(
    vocab_size=vocab, min_frequency=2, show_progress=False,
    special_tokens=["<|endoftext|>"],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tok.train_from_iterator(train_text.splitlines(keepends=True), trainer)
tok.save(f"{out}/tokenizer.json")

def encode(t):
    ids = [i for e in tok.encode_batch(t.splitlines(keepends=True)) for i in e.ids]
    return np.asarray(ids, dtype=np.uint16)

train_ids, val_ids = encode(train_text), encode(val_text)
assert tok.get_vocab_size() <= 65536
assert tok.decode(val_ids[:200].tolist()) == val_text[:len(tok.decode(val_ids[:200].tolist()))]
val_ids.tofile(f"{out}/val.bin")
train_ids.tofile(f"{out}/train.bin")
with gzip.open(f"{out}/kjv.txt.gz", "wt", encoding="utf-8") as f:
    f.write(text)
meta = {
    "vocab_size": tok.get_vocab_size(),
    "bpe_vocab_target": vocab,
    "dtype": "uint16",
    "train_tokens": int(train_ids.size),
    "val_tokens": int(val_ids.size),
    "train_chars": len(train_text),
    "val_chars": len(val_text),
    "val_split": "last 5% of the text, cut at a line boundary",
    "tokenizers_version": __import__("tokenizers").__version__,
    "tokenizer": "byte-level BPE (HuggingFace tokenizers, GPT-2 style pre-tokenization: merges "
                 "stay inside a word), min_frequency 2, trained on the train split; asked for "
                 "bpe_vocab_target tokens, it stops at vocab_size when no pair occurs twice",
    "source_package": "bible-kjv-text",
    "source_version": version,
    "source": "Debian package bible-kjv-text, dumped with the reader from Debian package bible-kjv",
    "licence": "The King James Version text (1611) is public domain; Debian's copyright "
               "file states its copyright has expired.",
}
with open(f"{out}/meta.json", "w") as f:
    json.dump(meta, f, indent=2)
print(f"prepare_corpus: vocab {meta['vocab_size']} (target {vocab}), train {meta['train_tokens']} tokens, "
      f"val {meta['val_tokens']} tokens")
EOF

# Move into place; train.bin last, as it marks a finished corpus.
mkdir -p "$DATA"
for f in tokenizer.json val.bin meta.json kjv.txt.gz train.bin; do
  mv -f "$TMP/out/$f" "$DATA/$f"
done
echo "prepare_corpus: wrote $DATA ($(du -sh "$DATA" | cut -f1))"
