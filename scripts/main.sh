#!/usr/bin/env bash
# Sets everything up, builds kiln and runs its main job: the Qwen-14B training
# graph summary, then one training step of a tiny Qwen on the reference
# interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
kiln=build/tools/kiln/kiln

echo "== Qwen-14B training step (seq 2048, batch 1): graph summary"
"$kiln" graph examples/qwen-14b/config.json --training --seq 2048 --batch 1 --format stats

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== Qwen-14B training step: compile for ascend910b (f16) with the default passes"
"$kiln" compile examples/qwen-14b/config.json --training --seq 2048 --batch 1 \
  --target ascend910b --report "$work/report.json"
echo "== the same job with TbeMatmulFixPipeFusionPass switched off for this job only"
"$kiln" compile examples/qwen-14b/config.json --training --seq 2048 --batch 1 \
  --target ascend910b --disable-pass TbeMatmulFixPipeFusionPass --report "$work/report_off.json"
echo "== tiny Qwen: init, then forward + backward on the reference interpreter"
"$kiln" init examples/qwen-tiny/config.json -o "$work/weights.safetensors" --seed 0
"$kiln" make-inputs examples/qwen-tiny/config.json --batch 2 --seq 16 --seed 1 -o "$work/inputs.safetensors"
"$kiln" run examples/qwen-tiny/config.json --weights "$work/weights.safetensors" \
  --inputs "$work/inputs.safetensors" --outputs "$work/outputs.safetensors" --training

echo "== examples/overflow: QK^T past fp16's 65504, without and with AttentionFp32CastPass"
cfg=examples/overflow/config.json
"$kiln" init "$cfg" -o "$work/ow.safetensors" --scale 'transformer.h.*.attn.c_attn.weight=2000'
"$kiln" make-inputs "$cfg" --batch 2 --seq 16 -o "$work/oi.safetensors"
overflow_run() {
  "$kiln" run "$cfg" --weights "$work/ow.safetensors" --inputs "$work/oi.safetensors" \
    --outputs "$work/oo.safetensors" --training "$@" | tr '\n' ' '
  echo
}
echo -n "force_fp32 (reference):                  "; overflow_run --precision-mode force_fp32
echo -n "allow_mix_precision, pass off:           "
overflow_run --precision-mode allow_mix_precision --disable-pass AttentionFp32CastPass
echo -n "allow_mix_precision, pass on (default):  "; overflow_run --precision-mode allow_mix_precision
