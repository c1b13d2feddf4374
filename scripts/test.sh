#!/usr/bin/env bash
# Sets up, builds and runs every test: the lit suite and the unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
# lit's own summary first (ctest shows it only on failure), then everything.
/usr/lib/llvm-22/bin/lit -s "${BUILD_DIR:-build}/test"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure
