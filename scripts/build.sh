#!/usr/bin/env bash
# Configures and builds qcc into build/ (tools in build/bin). Assumes setup.sh ran.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# ccache keys on paths relative to the clone, so a second clone reuses the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
cmake --build "$BUILD_DIR"
