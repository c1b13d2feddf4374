#!/usr/bin/env bash
# Sets up, builds and runs the main job: compiles the bundled Austen demo model
# (examples/austen: ONNX + SentencePiece tokenizer) into an artifact and
# generates a continuation of a prompt (CPU backend when there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
BIN="${BUILD_DIR:-build}/bin"
"$BIN/qcc" examples/austen/model.onnx -o "${BUILD_DIR:-build}/austen.qpkg"
echo "compiled examples/austen/model.onnx -> ${BUILD_DIR:-build}/austen.qpkg"
"$BIN/qrun" "${BUILD_DIR:-build}/austen.qpkg" \
  --prompt "${PROMPT:-It is a truth universally acknowledged, that}" \
  --max-new-tokens "${MAX_NEW_TOKENS:-60}"
