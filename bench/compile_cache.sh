#!/usr/bin/env bash
# Cold and warm `kiln compile` of the Qwen-14B training step (seq 2048,
# ascend910b, f16): the whole process and the kernel phase, median of N runs,
# without and with writing an artifact (-o). Three states of the cache:
#   cold      an empty cache: every kernel compiled by LLVM
#   kernels   every kernel in the cache, the program entry removed: the graph
#             is built, the passes run and the kernels are planned and read
#   warm      the whole program in the cache: read back, nothing rebuilt
#   bench/compile_cache.sh [RUNS]     (default 3; needs a built ./build)
set -euo pipefail
cd "$(dirname "$0")/.."
kiln=build/tools/kiln/kiln
runs=${1:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(compile examples/qwen-14b/config.json --training --seq 2048 --batch 1 --target ascend910b)

# Prints "<wall seconds> <kernel ms> <compiled> <cache hits> <program hit>" for
# one compile into cache $1, with the extra arguments after it.
measure() {
  local cache=$1 start end out line
  shift
  start=$(date +%s.%N)
  out=$("$kiln" "${args[@]}" --cache-dir "$cache" "$@")
  end=$(date +%s.%N)
  # "  kernels: 4117 (88 unique), 88 compiled, 0 from the cache DIR, 2745 ms"
  line=$(echo "$out" | grep '^  kernels:')
  echo "$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.3f", b - a}') \
$(echo "$line" | sed -E 's/.* ([0-9]+) ms$/\1/') \
$(echo "$line" | sed -E 's/.*, ([0-9]+) compiled, ([0-9]+) from.*/\1 \2/') \
$(echo "$out" | grep -q '^  program: from the cache' && echo yes || echo no)"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
drop_programs() { find "$1/entries" -name '*.kpe' -delete; }

kinds=(cold kernels warm cold-o kernels-o warm-o)
for kind in "${kinds[@]}"; do : >"$work/$kind"; done
for i in $(seq "$runs"); do
  for o in "" -o; do
    extra=()
    [ -n "$o" ] && extra=(-o "$work/out$i.kiln")
    cache="$work/cache$i$o"
    measure "$cache" "${extra[@]}" >>"$work/cold$o"
    drop_programs "$cache"
    measure "$cache" "${extra[@]}" >>"$work/kernels$o"
    measure "$cache" "${extra[@]}" >>"$work/warm$o"
  done
done
printf '%-10s %12s %12s %9s %11s %8s %9s\n' run "process (s)" "kernels (ms)" compiled \
  "cache hits" program "vs cold"
for kind in "${kinds[@]}"; do
  case $kind in
  *-o) base=$(cut -d' ' -f1 "$work/cold-o" | median) ;;
  *) base=$(cut -d' ' -f1 "$work/cold" | median) ;;
  esac
  wall=$(cut -d' ' -f1 "$work/$kind" | median)
  printf '%-10s %12s %12s %9s %11s %8s %8.1fx\n' "$kind" "$wall" \
    "$(cut -d' ' -f2 "$work/$kind" | median)" "$(cut -d' ' -f3 "$work/$kind" | head -1)" \
    "$(cut -d' ' -f4 "$work/$kind" | head -1)" "$(cut -d' ' -f5 "$work/$kind" | head -1)" \
    "$(awk -v a="$base" -v b="$wall" 'BEGIN {print a / b}')"
done
