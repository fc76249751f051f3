#!/usr/bin/env bash
# Qwen-14B's per-device plan for the layouts of docs/training.md beside the
# literature's figure for the same layout (ZeRO's model states, Korthikanti
# et al.'s activations): what `kiln train --compile-only` prints, as a table.
#   bench/memory_plan.sh
# Environment: CONFIG (examples/qwen-14b/config.json), SEQ (2048), KILN (the
# binary, ./build/tools/kiln/kiln). Plans only: nothing is trained, and the
# numbers do not depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
kiln=${KILN:-$(pwd)/build/tools/kiln/kiln}
config=${CONFIG:-examples/qwen-14b/config.json}
seq=${SEQ:-2048}

layouts=(
  "ascend910 32GiB|--tp 1 --zero 1 --batch 8"
  "ascend910 32GiB|--tp 1 --zero 2 --batch 8 --recompute full"
  "ascend910 32GiB|--tp 1 --zero 3 --batch 8 --recompute full"
  "ascend910b 64GiB|--tp 1 --zero 3 --batch 8 --recompute full"
  "ascend910 32GiB|--tp 4 --zero 1 --batch 2"
  "ascend910 32GiB|--tp 4 --zero 2 --batch 2 --recompute full"
  "ascend910 32GiB|--tp 8"
  "ascend910 32GiB|--tp 8 --recompute selective"
  "ascend910 32GiB|--tp 8 --recompute full"
  "ascend910b 64GiB|--tp 8 --recompute full"
  "ascend910 32GiB|--tp 2 --pp 4 --batch 16 --micro-batches 16 --recompute full"
  "ascend910 32GiB|--tp 8 --lora-rank 64 --lora-alpha 16"
)
printf '%-58s | %-10s | %-10s | %-10s | %s\n' "layout (8 devices, seq $seq, f16)" \
  "plan" "formula" "plan/form." "fits"
for entry in "${layouts[@]}"; do
  target=${entry%%|*}
  flags=${entry#*|}
  # shellcheck disable=SC2086
  out=$("$kiln" train "$config" --compile-only --seq "$seq" --dtype f16 --devices 8 \
    --target "${target% *}" --device-memory "${target#* }" $flags 2>&1) || true
  plan=$(sed -n 's/^  per device: peak \([0-9.]* [KMG]*i*B\).*/\1/p' <<<"$out")
  formula=$(sed -n 's/^  the formula for this layout.* = \([0-9.]* [KMG]*i*B\)$/\1/p' <<<"$out")
  fits=$(sed -n 's/^  device [0-9.]* [KMG]*i*B: \(fits\|does NOT fit\).*/\1/p' <<<"$out")
  ratio=$(/usr/bin/python3 -c '
import sys
def b(t):
    v, u = t.split()
    return float(v) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[u]
print(f"{b(sys.argv[1]) / b(sys.argv[2]):.2f}")' "$plan" "$formula")
  printf '%-58s | %-10s | %-10s | %-10s | %s\n' "$flags (${target})" "$plan" "$formula" \
    "$ratio" "$fits"
done
