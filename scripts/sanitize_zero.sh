#!/usr/bin/env bash
# The ZeRO update under AddressSanitizer and UndefinedBehaviorSanitizer, many
# times, under load (docs/reliability.md, "The ZeRO update under a
# sanitizer"): the tiny Qwen trained 2-way tensor parallel with ZeRO-1, -2
# and -3 in turn, two runs at once with a busy process beside them, ROUNDS
# times (default 50). Every run must exit 0 with no sanitizer report and the
# same losses as the first run of its ZeRO stage.
#
#   scripts/sanitize_zero.sh [ROUNDS]
#
# Uses kiln from the sanitizer build (KILN_ASAN_BUILD_DIR, default
# build-asan, which scripts/sanitize.sh makes; KILN_SANITIZE_TARGETS=kiln
# builds kiln alone).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds="${1:-50}"
build="${KILN_ASAN_BUILD_DIR:-build-asan}"
kiln="$build/tools/kiln/kiln"
[ -x "$kiln" ] || { echo "sanitize_zero: no $kiln: build it with scripts/sanitize.sh" >&2; exit 1; }
work=$(mktemp -d)
busy=""
trap 'rm -rf "$work"; [ -z "$busy" ] || kill "$busy" 2>/dev/null || true' EXIT
export KILN_CACHE_DIR="$work/cache"
cfg=examples/qwen-tiny/config.json
"$kiln" make-inputs "$cfg" --tokens 20000 -o "$work/train.bin" >/dev/null 2>&1

# One run: its losses on stdout's step lines, its stderr kept for reports.
train() { # zero round slot
  "$kiln" train "$cfg" --data "$work/train.bin" --steps 4 --batch 8 --seq 16 --devices 4 --tp 2 \
    --zero "$1" --dtype f16 --loss-scale dynamic --lr 3e-3 >"$work/out.$2.$3" 2>"$work/err.$2.$3"
}
losses() { grep -oE '^step [0-9]+/[0-9]+ +loss [0-9.e+-]+' "$1" | sed 's/.* //' | tr '\n' ' '; }

# A busy core beside the runs.
(while :; do :; done) &
busy=$!
start=$(date +%s)
failures=0
for round in $(seq "$rounds"); do
  zero=$(((round - 1) % 3 + 1))
  train "$zero" "$round" a &
  a=$!
  train "$zero" "$round" b &
  b=$!
  for slot in a b; do
    pid=$a
    [ "$slot" = a ] || pid=$b
    rc=0
    wait "$pid" || rc=$?
    reference="$work/losses.$zero"
    [ -f "$reference" ] || losses "$work/out.$round.$slot" >"$reference"
    if [ "$rc" -ne 0 ] || grep -qE 'AddressSanitizer|UndefinedBehaviorSanitizer|runtime error' \
      "$work/err.$round.$slot" || [ "$(losses "$work/out.$round.$slot")" != "$(cat "$reference")" ]; then
      failures=$((failures + 1))
      echo "round $round zero $zero run $slot: exit $rc" >&2
      grep -E -A12 'Sanitizer|runtime error' "$work/err.$round.$slot" | head -40 >&2 || true
    fi
  done
done
end=$(date +%s)
echo "sanitize_zero: $rounds rounds x 2 runs (ZeRO-1, -2, -3 in turn, tp2), $failures failed," \
  "$((end - start)) s on $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores;" \
  "kiln of commit $(git -C "$build/.." rev-parse --short HEAD)"
for z in 1 2 3; do echo "ZeRO-$z losses: $(cat "$work/losses.$z" 2>/dev/null)"; done
[ "$failures" -eq 0 ]
