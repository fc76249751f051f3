#!/usr/bin/env bash
# Sets everything up, builds kiln and runs the whole test suite under CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
