#!/usr/bin/env bash
# Prepares an overlay for scripts/ab_overlay.sh: the files under src/ and tests/ that differ
# between HEAD and REV, as they are in REV, copied to .dev/ov/NAME/ (git-ignored; name .dev in the device
# call's carry). Run it here, before the device call (the device's copy has no git history).
#   scripts/make_overlay.sh NAME REV        e.g. scripts/make_overlay.sh v8 fwd-v8
set -euo pipefail
cd "$(dirname "$0")/.."
NAME="$1"; REV="$2"
rm -rf ".dev/ov/$NAME"
files=$(git diff --name-only HEAD "$REV" -- src tests)
[ -n "$files" ] || { echo "make_overlay: no src/ or tests/ difference between HEAD and $REV" >&2; exit 1; }
for f in $files; do
  mkdir -p ".dev/ov/$NAME/$(dirname "$f")"
  git show "$REV:$f" > ".dev/ov/$NAME/$f"
done
echo "make_overlay: .dev/ov/$NAME <- $REV:"; echo "$files" | sed 's/^/  /'
