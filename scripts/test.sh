#!/usr/bin/env bash
# Sets up, builds and runs every test: the lit suite and the unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure
