#!/usr/bin/env bash
# Qwen training throughput, kiln vs PyTorch, side by side in one run: the
# same model (CONFIG, default examples/qwen-tiny), the same initial weights
# (kiln init), the same batches (kiln's sampling reproduced in Python), the
# same AdamW, f32.
#   bench/train_vs_pytorch.sh [CASES]     e.g. "8x32 8x64" (the default)
#   CONFIG=examples/qwen-small/config.json DEVICES=1 BF16=1 STEPS=30 WARMUP=5 \
#     bench/train_vs_pytorch.sh 4x256     (hidden 512, 4 layers, vocab 4096)
# Environment: CONFIG, DEVICES kiln runs with (list, "1 8"), BF16=1 to add a
# kiln run on one device under allow_mix_precision_bf16 (bf16 matmuls on
# the host's bf16 units where it has them; its losses are checked against
# PyTorch f32 within 1e-2) and, beside it, PyTorch eager under
# torch.autocast("cpu", dtype=torch.bfloat16) on the first thread count
# (TORCH_BF16=0 leaves that run out), ROUNDS (3), STEPS per run (150), WARMUP steps skipped (20),
# LR (1e-3), KILN_FLAGS (more kiln train flags for every kiln run, e.g.
# "--disable-pass FlashAttentionFusionPass"), TORCH_THREADS ("2 1": PyTorch runs once per thread count; the
# ratios are against the first, all cores of this 2-core machine), QUIET_WAIT
# seconds to wait for an idle machine (300), KEEP=DIR to keep the logs there,
# RT=1 to run every timed process under SCHED_FIFO (chrt -f 1, root): on a
# machine that other jobs keep busy this gives both sides the cores, close to
# an idle machine (the kernel's RT throttling still leaves the others 5%).
# Under RT=1 PyTorch runs with OMP_WAIT_POLICY=PASSIVE (TORCH_OMP_WAIT_POLICY
# overrides): libgomp's spinning threads would use up the RT budget and be
# throttled for 50 ms a second.
# Needs a built ./build; installs Debian's python3-torch if it is missing.
# The PyTorch side and the loss check: bench/train_vs_pytorch.py. Results:
# docs/notes/train-vs-pytorch.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
kiln=${KILN:-$root/build/tools/kiln/kiln}
py=/usr/bin/python3 # Debian's python, where python3-torch lives
bench=$root/bench/train_vs_pytorch.py
config=${CONFIG:-examples/qwen-tiny/config.json}
devices=(${DEVICES:-1 8})
kiln_runs=()
for d in "${devices[@]}"; do kiln_runs+=("kiln$d"); done
[ "${BF16:-0}" = 1 ] && kiln_runs+=("kiln1bf16")
cases=(${1:-8x32 8x64})
rounds=${ROUNDS:-3}
steps=${STEPS:-150}
warmup=${WARMUP:-20}
lr=${LR:-1e-3}
threads=(${TORCH_THREADS:-2 1})
torch_bf16=0
[ "${BF16:-0}" = 1 ] && torch_bf16=${TORCH_BF16:-1}
torch_runs=()
for th in "${threads[@]}"; do torch_runs+=("$th"); done
[ "$torch_bf16" = 1 ] && torch_runs+=("${threads[0]}bf16")
quiet_wait=${QUIET_WAIT:-300}
prio=()
omp_env=()
if [ "${RT:-0}" = 1 ]; then
  prio=(chrt -f 1)
  omp_env=(OMP_WAIT_POLICY=${TORCH_OMP_WAIT_POLICY:-PASSIVE})
fi
[ -n "${TORCH_OMP_WAIT_POLICY:-}" ] && omp_env=(OMP_WAIT_POLICY=$TORCH_OMP_WAIT_POLICY)

if [ ! -x "$kiln" ]; then
  echo "train_vs_pytorch: $kiln not found; run scripts/setup.sh first" >&2
  exit 1
fi
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "train_vs_pytorch: installing python3-torch"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-torch
fi

if [ -n "${KEEP:-}" ]; then
  work=$KEEP
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

# "busy-jiffies total-jiffies" of the whole machine, and the CPU ticks of
# this script's finished children (our own runs).
machine_ticks() { awk '/^cpu /{b=$2+$3+$4+$7+$8+$9; print b, b+$5+$6}' /proc/stat; }
our_ticks() { sed 's/.*) //' /proc/$$/stat | awk '{print $14 + $15}'; }
# Percent of the machine busy over the next N seconds.
busy_pct() {
  local a b
  a=($(machine_ticks)); sleep "$1"; b=($(machine_ticks))
  awk -v b="$((b[0] - a[0]))" -v t="$((b[1] - a[1]))" 'BEGIN {printf "%.0f", t ? 100 * b / t : 0}'
}

ncpu=$(nproc)
cpu_field() { lscpu | sed -n "s/^$1: *//p" | head -1; }
echo "machine: $(cpu_field 'Model name') (family $(cpu_field 'CPU family') model" \
  "$(cpu_field Model)), $ncpu cores, kernel $(uname -r)"
echo "kiln:    $kiln (built $(date -u -r "$kiln" "+%F %T UTC"))"
echo "torch:   $("$py" -c 'import torch; print(torch.__version__)') (Debian python3-torch" \
  "$(dpkg-query -W -f='${Version}' python3-torch 2>/dev/null))," \
  "torch.set_num_threads: ${threads[*]}"

# Wait (bounded) for a quiet machine: other builds skew both sides.
waited=0
while :; do
  busy=$(busy_pct 5)
  waited=$((waited + 5))
  [ "$busy" -le 15 ] && break
  if [ "$waited" -ge "$quiet_wait" ]; then
    echo "note: the machine is still ${busy}% busy after ${waited}s of waiting; measuring anyway"
    break
  fi
done
[ ${#prio[@]} -gt 0 ] && echo "RT=1:    the timed runs are under ${prio[*]} (SCHED_FIFO)"
[ ${#omp_env[@]} -gt 0 ] && echo "torch:   ${omp_env[*]}"
echo "before:  ${busy}% of the CPUs busy (5 s sample)," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"

"$kiln" init "$config" -o "$work/w.safetensors" --seed 0 >/dev/null
vocab=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$config")
"$py" "$bench" data "$work/train.bin" --tokens 200000 --seed 1234 --vocab "$vocab"

m0=($(machine_ticks)); o0=$(our_ticks)
results="$work/results.json"
{
  echo "{\"config\": \"$config\", \"steps\": $steps, \"warmup\": $warmup, \"rounds\": $rounds,"
  echo " \"torch_threads\": [$(IFS=,; echo "${threads[*]}")], \"torch_bf16\": $([ "$torch_bf16" = 1 ] && echo true || echo false),"
  echo " \"kiln_runs\": [$(printf '"%s",' "${kiln_runs[@]}" | sed 's/,$//')], \"cases\": ["
  first_case=true
  for c in "${cases[@]}"; do
    b=${c%x*} s=${c#*x}
    $first_case || echo ","
    first_case=false
    declare -A tl=() kl=()
    for r in $(seq "$rounds"); do
      for run in "${kiln_runs[@]}"; do
        d=${run#kiln} extra=()
        if [ "$d" = 1bf16 ]; then d=1 extra=(--precision-mode allow_mix_precision_bf16); fi
        log="$work/$run-${b}x$s-$r.jsonl"
        echo "kiln  --devices $d ${extra[*]} batch $b seq $s  round $r" >&2
        "${prio[@]}" "$kiln" train "$config" --data "$work/train.bin" --steps "$steps" \
          --batch "$b" --seq "$s" --devices "$d" --weights "$work/w.safetensors" --seed 0 \
          --log-json "$log" --loss-scale none --lr "$lr" --schedule constant "${extra[@]}" \
          ${KILN_FLAGS:-} \
          >"$log.out"
        kl[$run]="${kl[$run]:+${kl[$run]},}\"$log\""
      done
      for run in "${torch_runs[@]}"; do
        th=${run%bf16} extra=()
        [ "$run" != "$th" ] && extra=(--autocast-bf16)
        log="$work/torch$run-${b}x$s-$r.jsonl"
        echo "torch threads $th ${extra[*]} batch $b seq $s  round $r" >&2
        env OMP_NUM_THREADS="$th" "${omp_env[@]}" "${prio[@]}" "$py" "$bench" train "$config" \
          --weights "$work/w.safetensors" --data "$work/train.bin" --batch "$b" --seq "$s" \
          --steps "$steps" --lr "$lr" --seed 0 --threads "$th" "${extra[@]}" --log-json "$log" \
          >"$log.out"
        tl[$run]="${tl[$run]:+${tl[$run]},}\"$log\""
      done
    done
    echo -n "{\"batch\": $b, \"seq\": $s, \"logs\": {"
    for run in "${kiln_runs[@]}"; do echo -n "\"$run\": [${kl[$run]}], "; done
    first_torch=true
    for run in "${torch_runs[@]}"; do
      $first_torch || echo -n ", "
      first_torch=false
      echo -n "\"torch$run\": [${tl[$run]}]"
    done
    echo "}}"
  done
  echo "]}"
} >"$results"
m1=($(machine_ticks)); o1=$(our_ticks)

status=0
"$py" "$bench" report "$results" --summary "$work/summary.json" || status=$?
busy_total=$((m1[0] - m0[0])) all=$((m1[1] - m0[1])) ours=$((o1 - o0))
echo
awk -v b="$busy_total" -v a="$all" -v o="$ours" 'BEGIN {
  printf "during the runs: %.0f%% of the CPUs busy, %.0f%% of them from other processes\n",
         100 * b / a, 100 * (b - o) / a }'
echo "after:   load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "${KEEP:-}" ] && echo "logs in $work"
exit $status
