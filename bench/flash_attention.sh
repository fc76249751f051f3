#!/usr/bin/env bash
# The training step with and without FlashAttentionFusionPass, side by side:
# the small Qwen (hidden 512, 8 heads, 4 layers; max_position_embeddings
# raised to 4096) at batch 1 and each sequence length, on one device, in f32
# and bf16 mixed precision. Prints the median step time over steps
# WARMUP+1..STEPS of each run and the fused/unfused ratio.
#   bench/flash_attention.sh [SEQ...]        default 512 1024 2048 4096
# Environment: STEPS (5), WARMUP (1), KILN (./build/tools/kiln/kiln).
set -euo pipefail
cd "$(dirname "$0")/.."
kiln=${KILN:-$(pwd)/build/tools/kiln/kiln}
steps=${STEPS:-5}
warmup=${WARMUP:-1}
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export KILN_CACHE_DIR="$work/cache"
seqs=("$@")
[ ${#seqs[@]} -gt 0 ] || seqs=(512 1024 2048 4096)

"$py" - "$work/config.json" <<'PY'
import json, sys
c = json.load(open("examples/qwen-small/config.json"))
c["max_position_embeddings"] = 4096
json.dump(c, open(sys.argv[1], "w"))
PY
"$kiln" make-inputs "$work/config.json" --tokens 200000 -o "$work/train.bin" >/dev/null

# The median seconds of the steps after the warm-up in a --log-json file.
median() {
  "$py" - "$1" "$warmup" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]):]
print(f"{statistics.median(r['seconds'] for r in rows):.3f}")
PY
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
printf '%-6s %-5s %12s %12s %8s\n' seq dtype unfused_s fused_s ratio
for seq in "${seqs[@]}"; do
  for mode in f32 bf16; do
    extra=""
    [ "$mode" = bf16 ] && extra="--precision-mode allow_mix_precision_bf16"
    times=()
    for pass in "--disable-pass FlashAttentionFusionPass" ""; do
      # shellcheck disable=SC2086
      "$kiln" train "$work/config.json" --data "$work/train.bin" --steps "$steps" --batch 1 \
        --seq "$seq" --devices 1 --lr 1e-4 --log-json "$work/log.jsonl" $extra $pass >/dev/null
      times+=("$(median "$work/log.jsonl")")
    done
    ratio=$("$py" -c "print(f'{${times[0]} / ${times[1]}:.2f}x')")
    printf '%-6s %-5s %12s %12s %8s\n' "$seq" "$mode" "${times[0]}" "${times[1]}" "$ratio"
  done
done
