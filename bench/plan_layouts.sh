#!/usr/bin/env bash
# The layout questions of docs/training.md#planning-a-layout-kiln-plan: which
# layout of a cluster trains Qwen-14B (kiln plan, with the time the search
# takes on this machine), and the cost model's tokens/s per device for
# MindFormers' two published Qwen-14B runs on 8 x 910B beside the published
# figures.
#   bench/plan_layouts.sh
# Environment: CONFIG (examples/qwen-14b/config.json), KILN (the binary,
# ./build/tools/kiln/kiln). Plans only: nothing is trained; only the search
# time depends on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
kiln=${KILN:-$(pwd)/build/tools/kiln/kiln}
config=${CONFIG:-examples/qwen-14b/config.json}

clusters=(
  "--devices 8 --target ascend910 --device-memory 32GiB"
  "--devices 16 --target ascend910 --device-memory 32GiB"
  "--devices 8 --target ascend910b --device-memory 64GiB"
)
echo "kiln plan, seq 2048, global batch 16, f16"
for cluster in "${clusters[@]}"; do
  # shellcheck disable=SC2086
  out=$("$kiln" plan "$config" $cluster --seq 2048 --global-batch 16 --dtype f16 \
    --format json) || true
  # The plan on stdin: 16 devices' candidates outgrow an argument.
  /usr/bin/python3 -c '
import json, sys
plan = json.loads(sys.stdin.read())
candidates, best = plan["candidates"], plan["recommended"]
fit = sum(c["fits"] for c in candidates)
head = "%-52s %3d layouts, %2d fit, %5.1f s" % (sys.argv[1], len(candidates), fit, plan["seconds"])
if best:
    print("%s: %s, %.1f GiB, %.0f tokens/s/device" % (head, best["flags"],
          best["peak_bytes"] / 2**30, best["tokens_per_s_per_device"]))
else:
    print("%s: nothing fits; would: %s" % (head, plan["would_fit"]))' "$cluster" <<<"$out"
done

echo
echo "MindFormers' Qwen-14B on 8 x 910B: published vs predicted tokens/s per device"
runs=(
  "911|--dtype f16 --seq 8192 --tp 8 --recompute full --batch 1"
  "1106|--dtype bf16 --seq 2048 --zero 2 --recompute full --batch 8"
)
for run in "${runs[@]}"; do
  published=${run%%|*}
  flags=${run#*|}
  # shellcheck disable=SC2086
  out=$("$kiln" train "$config" --compile-only --devices 8 --target ascend910b \
    --device-memory 64GiB $flags 2>&1) || true
  predicted=$(sed -n 's/.*: \([0-9]*\) tokens\/s per device.*/\1/p' <<<"$out")
  printf '%-62s published %5s  predicted %5s\n' "$flags" "$published" "$predicted"
done
