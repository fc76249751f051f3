#!/usr/bin/env bash
# Where a training step's time goes, from kiln's own profiler (--profile):
# trains STEPS steps of CONFIG on one device, skips the first WARMUP, and
# prints per OP Type its time per step, its share of the step and the median
# GFLOP/s and Roofline % of its launches, and the step against its GEMM floor
# (its matmuls' FLOPs at the host's best GEMM rate per dtype) with the share
# of the step that is not GEMMs (docs/profiling.md).
#   bench/step_profile.sh [BATCHxSEQ]       default 4x256
# Environment: CONFIG (examples/qwen-small/config.json), STEPS (8), WARMUP
# (3), TOP (12 rows), KILN (the binary, ./build/tools/kiln/kiln), EXTRA
# (more kiln train flags, e.g. "--precision-mode allow_mix_precision_bf16"),
# KEEP=DIR to keep the profile.
set -euo pipefail
cd "$(dirname "$0")/.."
kiln=${KILN:-$(pwd)/build/tools/kiln/kiln}
config=${CONFIG:-examples/qwen-small/config.json}
case=${1:-4x256}
steps=${STEPS:-8}
warmup=${WARMUP:-3}
py=/usr/bin/python3
work=${KEEP:-$(mktemp -d)}
mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT

source bench/bench_util.sh
"$kiln" init "$config" -o "$work/w.safetensors" --seed 0 >/dev/null
bench_tokens "$config" "$work/train.bin" 200000
echo "machine: $(bench_machine)"
echo "kiln:    $kiln"
# shellcheck disable=SC2086
"$kiln" train "$config" --data "$work/train.bin" --steps "$steps" --batch "${case%x*}" \
  --seq "${case#*x}" --devices 1 --weights "$work/w.safetensors" --seed 0 --loss-scale none \
  --lr 1e-3 --schedule constant --profile "$work/prof" ${EXTRA:-} >"$work/train.log"
"$py" - "$work/prof" "$warmup" "${TOP:-12}" <<'PY'
import csv, statistics, sys
prof, warmup, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steps = [r for r in csv.DictReader(open(prof + "/step_trace.csv")) if int(r["Step Id"]) > warmup]
rows = [r for r in csv.DictReader(open(prof + "/op_summary.csv")) if int(r["Step Id"]) > warmup]
n = len(steps)
step_ms = statistics.median(float(s["Step Time(us)"]) / 1e3 for s in steps)
print("steps %d-%d: median step %.0f ms, kernels and host work cover %.1f%% of it"
      % (warmup + 1, warmup + n, step_ms,
         statistics.median(float(s["Covered(%)"]) for s in steps)))
# Weights, moments and inputs are shared with the executor, not copied: each
# weight is stored once per device (docs/notes/decisions.md).
print("tensor bytes copied per step: %d (largest of the steps)"
      % max(int(s["Copied(bytes)"]) for s in steps))
# Every value a kernel writes lies in a device arena reused from step to
# step: after the warm-up a step allocates its inputs only.
print("host bytes allocated per step: %d (largest of the steps)"
      % max(int(s["Allocated(bytes)"]) for s in steps))
kernel_ms = statistics.median((float(s["Kernel Time(us)"]) + float(s["Host Time(us)"])) / 1e3
                              for s in steps)
# A kiln built before the GEMM floor columns: the matmul (AI_CORE) rows alone.
gemm_ms = (statistics.median(float(s["GEMM Time(us)"]) / 1e3 for s in steps)
           if "GEMM Time(us)" in steps[0] else
           sum(float(r["Task Duration(us)"]) for r in rows if r["Task Type"] == "AI_CORE") / n / 1e3)
print("GEMM kernels %.0f ms (%.1f%% of the rows), the rest %.0f ms (%.1f%%)"
      % (gemm_ms, 100 * gemm_ms / kernel_ms, kernel_ms - gemm_ms,
         100 * (kernel_ms - gemm_ms) / kernel_ms), end="")
if "GEMM Floor(us)" in steps[0]:
    floor_ms = statistics.median(float(s["GEMM Floor(us)"]) / 1e3 for s in steps)
    print("; GEMM floor %.0f ms: step / floor %.2f"
          % (floor_ms, step_ms / floor_ms if floor_ms else float("nan")), end="")
print()
by = {}
for r in rows:
    by.setdefault(r["OP Type"], []).append(r)
total = sum(float(r["Task Duration(us)"]) for r in rows) / n / 1e3
print("%-24s %6s %9s %7s %9s %10s" % ("OP Type", "count", "ms/step", "share", "GFLOP/s", "roofline %"))
for op, rs in sorted(by.items(), key=lambda kv: -sum(float(r["Task Duration(us)"]) for r in kv[1]))[:top]:
    ms = sum(float(r["Task Duration(us)"]) for r in rs) / n / 1e3
    gf = [float(r["GFLOP/s"]) for r in rs if r["GFLOP/s"]]
    rf = [float(r["Roofline %"]) for r in rs if r["Roofline %"]]
    print("%-24s %6d %9.1f %6.1f%% %9s %10s"
          % (op[:24], len(rs) // n, ms, 100 * ms / total,
             "%.1f" % statistics.median(gf) if gf else "-",
             "%.1f" % statistics.median(rf) if rf else "-"))
PY
