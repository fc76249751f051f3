#!/usr/bin/env bash
# The host heap a training step allocates, counted by glibc's libmemusage
# (every malloc and operator new, kiln's tensors and everything else): two
# runs of the same job, SHORT and LONG steps, and the difference per step.
# Give several kiln binaries to compare builds side by side (a build before
# a change and after it); the kernel cache is warmed first so neither run
# compiles.
#   bench/host_allocations.sh [KILN...]     default ./build/tools/kiln/kiln
# Environment: CONFIG (examples/qwen-tiny/config.json), BATCH (4), SEQ (16),
# DEVICES (1), SHORT (3), LONG (8), EXTRA (more kiln train flags).
set -euo pipefail
cd "$(dirname "$0")/.."
config=${CONFIG:-examples/qwen-tiny/config.json}
short=${SHORT:-3}
long=${LONG:-8}
memusage=$(ls /usr/lib/x86_64-linux-gnu/libmemusage.so /lib/*/libmemusage.so 2>/dev/null | head -1)
[ -n "$memusage" ] || { echo "libmemusage.so (glibc) not found" >&2; exit 1; }
[ $# -gt 0 ] || set -- "$(pwd)/build/tools/kiln/kiln"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source bench/bench_util.sh
bench_tokens "$config" "$work/train.bin" 20000

# heap total of `kiln train` for $2 steps with binary $1
heap() {
  # shellcheck disable=SC2086
  LD_PRELOAD=$memusage "$1" train "$config" --data "$work/train.bin" --batch "${BATCH:-4}" \
    --seq "${SEQ:-16}" --devices "${DEVICES:-1}" --steps "$2" --seed 0 ${EXTRA:-} 2>&1 \
    >/dev/null | sed 's/\x1b\[[0-9;]*m//g' |
    sed -n 's/.*heap total: \([0-9]*\), heap peak: \([0-9]*\).*/\1 \2/p'
}

echo "machine: $(bench_machine)"
echo "job: $config, batch ${BATCH:-4}, seq ${SEQ:-16}, ${DEVICES:-1} device(s)"
printf '%-48s | %16s | %14s\n' "kiln" "heap bytes/step" "heap peak"
for kiln in "$@"; do
  heap "$kiln" 1 >/dev/null # the kernel cache, warm
  read -r a _ <<<"$(heap "$kiln" "$short")"
  read -r b peak <<<"$(heap "$kiln" "$long")"
  printf '%-48s | %16d | %14d\n' "$kiln" $(((b - a) / (long - short))) "$peak"
done
