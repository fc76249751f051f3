#!/usr/bin/env bash
# The long form of the chaos test (tests/e2e/chaos_kill_test.cpp,
# docs/reliability.md): kiln train killed with SIGKILL at N seeded random
# moments (default 200), resumed after each, in chains over a ZeRO-1 run and
# a LoRA run; every chain must end with an uninterrupted run's checkpoints,
# adapters and losses bit for bit, no temporary file and a clean cache.
#
#   scripts/chaos.sh [N] [SEED]        e.g. scripts/chaos.sh 200
#
# Uses the build in ./build (KILN_BUILD_DIR to change it); prints the kills
# by what they interrupted, the time taken and the machine.
set -euo pipefail
cd "$(dirname "$0")/.."

kills="${1:-200}"
seed="${2:-20261204}"
build="${KILN_BUILD_DIR:-build}"
cmake --build "$build" --target kiln e2e_tests >/dev/null

start=$(date +%s)
status=0
KILN_CHAOS_KILLS="$kills" KILN_CHAOS_SEED="$seed" \
  "$build/tests/e2e_tests" --gtest_filter='ChaosKill.TwentyRandomKillsLoseNothing' \
  >"$build/chaos.log" 2>&1 || status=$?
end=$(date +%s)

grep -E '^chaos:' "$build/chaos.log" || true
echo "chaos: $((end - start)) s wall on $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; commit $(git rev-parse --short HEAD)"
if [ "$status" -ne 0 ]; then
  grep -E 'Failure|seed .*chain|error' "$build/chaos.log" | head -40
  echo "chaos: FAILED (full log: $build/chaos.log)"
  exit 1
fi
echo "chaos: passed (full log: $build/chaos.log)"
