#!/usr/bin/env bash
# Sets up, builds and runs the main job. Until the runtime lands this compiles
# the bundled GPT-2-style fixture and prints its raised IR.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
"${BUILD_DIR:-build}/bin/qcc" test/models/gpt2.onnx --emit=mlir
