#!/usr/bin/env bash
# Cold and warm `kiln compile` of the Qwen-14B training step (seq 2048,
# ascend910b, f16): the whole process and the kernel phase, median of N runs.
#   bench/compile_cache.sh [RUNS]     (default 3; needs a built ./build)
set -euo pipefail
cd "$(dirname "$0")/.."
kiln=build/tools/kiln/kiln
runs=${1:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(compile examples/qwen-14b/config.json --training --seq 2048 --batch 1 --target ascend910b)

# Prints "<wall seconds> <kernel ms> <compiled> <cache hits>" for one compile.
measure() {
  local start end line
  start=$(date +%s.%N)
  line=$("$kiln" "${args[@]}" --cache-dir "$1" | grep '^  kernels:')
  end=$(date +%s.%N)
  # "  kernels: 4117 (88 unique), 88 compiled, 0 from the cache DIR, 2745 ms"
  echo "$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f", b - a}') $(echo "$line" | sed -E 's/.* ([0-9]+) ms$/\1/') \
$(echo "$line" | sed -E 's/.*, ([0-9]+) compiled, ([0-9]+) from.*/\1 \2/')"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

: >"$work/cold"
: >"$work/warm"
for i in $(seq "$runs"); do
  measure "$work/cache$i" >>"$work/cold"
  measure "$work/cache$i" >>"$work/warm"
done
printf '%-6s %12s %12s %9s %11s\n' run "process (s)" "kernels (ms)" compiled "cache hits"
for kind in cold warm; do
  printf '%-6s %12s %12s %9s %11s\n' "$kind" \
    "$(cut -d' ' -f1 "$work/$kind" | median)" "$(cut -d' ' -f2 "$work/$kind" | median)" \
    "$(cut -d' ' -f3 "$work/$kind" | head -1)" "$(cut -d' ' -f4 "$work/$kind" | head -1)"
done
