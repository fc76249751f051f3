#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (one per file reader) in
# ./build-fuzz with clang-19, ASan and UBSan, and runs each for SECONDS
# (default 10), one after the other on one core. Prints executions and
# coverage per target; exits non-zero when any target crashes, leaks, hangs or
# runs out of memory (the input is kept in build-fuzz/crashes/).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      e.g. scripts/fuzz.sh 600 safetensors
#
# The corpus each run grows is kept in build-fuzz/corpus/TARGET; the seeds
# (examples/, test data and files kiln writes) are rebuilt in build-fuzz/seeds.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-10}"
[ $# -gt 0 ] && shift
scripts/setup.sh --deps-only clang-19 libclang-rt-19-dev

build=build-fuzz
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$build" -G Ninja -DKILN_BUILD_FUZZERS=ON \
    -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCH=OFF -DKILN_WERROR=OFF >/dev/null
fi
cmake --build "$build" -j"${KILN_FUZZ_BUILD_JOBS:-$(nproc)}" --target kiln_fuzzers

rm -rf "$build/seeds"
"$build/tests/fuzz/fuzz_seeds" . "$build/seeds"

if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in "$build"/tests/fuzz/*_fuzzer; do
    name=$(basename "$f")
    targets+=("${name%_fuzzer}")
  done
fi

mkdir -p "$build/crashes" "$build/logs"
failed=()
printf '%-16s %10s %8s %8s %6s  %s\n' target execs cov ft secs result
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t" "$build/seeds/$t"
  log="$build/logs/$t.log"
  start=$(date +%s)
  rc=0
  # -rss_limit_mb and -malloc_limit_mb: a reader that allocates what a header
  # claims is a bug, found here as an out-of-memory.
  "$build/tests/fuzz/${t}_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$build/crashes/$t-" \
    "$build/corpus/$t" "$build/seeds/$t" >"$log" 2>&1 || rc=$?
  secs=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  result=ok
  if [ "$rc" -ne 0 ]; then
    result="FAILED (exit $rc, see $log)"
    failed+=("$t")
  fi
  printf '%-16s %10s %8s %8s %6s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$secs" "$result"
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
  for t in "${failed[@]}"; do
    grep -m1 -E 'ERROR: |runtime error|fuzz property violated' "$build/logs/$t.log" >&2 || true
  done
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${seconds}s each without a crash"
