#!/usr/bin/env bash
# Data parallelism on one host: the same global batch on one device and on
# DEVICES simulated data-parallel devices (batch / DEVICES each), side by
# side, ROUNDS rounds interleaved; prints each run's median tokens/s over
# steps WARMUP+1..STEPS and the DP / one-device ratio of the medians.
#   bench/data_parallel.sh [BATCHxSEQ]      default 8x256
# Environment: CONFIG (examples/qwen-small/config.json), DEVICES (8), STEPS
# (8), WARMUP (3), ROUNDS (2), KILN (./build/tools/kiln/kiln), BEFORE (a
# second kiln binary run beside it, e.g. the kiln before a change), EXTRA
# (more kiln train flags for every run), RT=1 to run under SCHED_FIFO
# (chrt -f 1, root). Results: docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
kiln=${KILN:-$(pwd)/build/tools/kiln/kiln}
config=${CONFIG:-examples/qwen-small/config.json}
case=${1:-8x256}
devices=${DEVICES:-8}
steps=${STEPS:-8}
warmup=${WARMUP:-3}
rounds=${ROUNDS:-2}
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prio=()
[ "${RT:-0}" = 1 ] && prio=(chrt -f 1)
binaries=("$kiln")
[ -n "${BEFORE:-}" ] && binaries+=("$BEFORE")

source bench/bench_util.sh
"$kiln" init "$config" -o "$work/w.safetensors" --seed 0 >/dev/null
bench_tokens "$config" "$work/train.bin" 200000
echo "machine: $(bench_machine); load $(cut -d' ' -f1-3 /proc/loadavg)"

# The median tokens/s of the steps after the warm-up in a --log-json file.
median() {
  "$py" - "$1" "$warmup" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("%.0f" % statistics.median(r["tokens_per_s"] for r in recs if r["step"] > int(sys.argv[2])))
PY
}

for round in $(seq "$rounds"); do
  for b in "${!binaries[@]}"; do
    for d in 1 "$devices"; do
      log="$work/b$b-d$d-r$round.jsonl"
      # shellcheck disable=SC2086
      "${prio[@]}" "${binaries[$b]}" train "$config" --data "$work/train.bin" --steps "$steps" \
        --batch "${case%x*}" --seq "${case#*x}" --devices "$d" --weights "$work/w.safetensors" \
        --seed 0 --loss-scale none --lr 1e-3 --schedule constant --log-json "$log" \
        ${EXTRA:-} >/dev/null
      echo "round $round, ${binaries[$b]}, $d device(s): $(median "$log") tokens/s"
    done
  done
done
for b in "${!binaries[@]}"; do
  "$py" - "$work" "$b" "$devices" "$rounds" "$warmup" "${binaries[$b]}" <<'PY'
import glob, json, statistics, sys
work, b, devices, rounds, warmup, name = sys.argv[1:7]
def med(d):
    per_round = []
    for r in range(1, int(rounds) + 1):
        recs = [json.loads(l) for l in open("%s/b%s-d%s-r%d.jsonl" % (work, b, d, r)) if l.strip()]
        per_round.append(statistics.median(x["tokens_per_s"] for x in recs if x["step"] > int(warmup)))
    return statistics.median(per_round)
one, many = med(1), med(devices)
print("%s: 1 device %.0f tokens/s, %s devices %.0f: %.0f%%" % (name, one, devices, many, 100 * many / one))
PY
done
