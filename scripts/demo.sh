#!/usr/bin/env bash
# Sets up, builds and shows what qcc is for, on the bundled Austen demo model
# (examples/austen: ONNX + SentencePiece tokenizer): compiles it as float32, as
# W8A8 SmoothQuant and as W8A8 with 2:4 sparse linears pruned by SparseGPT
# (calibrated on the Austen train split), prints one table
# (artifact size, held-out perplexity, prefill and decode tokens/s; made by
# bench/demo_table.py, which ctest demo-table also runs), then generates a
# continuation of a prompt from each (CPU backend when there is no GPU).
# Under a minute on 2 cores after the build; progress lines on stderr when it
# is a terminal. PROMPT and MAX_NEW_TOKENS override the generation's.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
BUILD="${BUILD_DIR:-build}"
BIN="$BUILD/bin"
OUT="$BUILD/demo"
progress() { if [ -t 2 ]; then echo "== $*" >&2; fi; }

progress "float32, W8A8 SmoothQuant, W8A8 + 2:4 SparseGPT: compile, held-out perplexity, tokens/s"
echo
.venv/bin/python bench/demo_table.py --qcc "$BIN/qcc" --qrun "$BIN/qrun" --out-dir "$OUT"

# Sampling as llama.cpp users know it: temperature, top-k, top-p and a
# repetition penalty (llama.cpp's, over the last 64 tokens), with a fixed seed
# so that the text is the same on every run. --temperature 0 is greedy (the
# most likely token every time) and --repeat-penalty 1 turns the penalty off:
# greedy alone makes this small model loop ("I am sure I am sure ...").
SAMPLING=(--temperature 0.5 --top-k 40 --top-p 0.9 --repeat-penalty 1.2 --seed 2)
for v in float32 w8a8 w8a8-sparse; do
  progress "$v: generate"
  echo
  echo "$v: qrun $OUT/$v.qpkg ${SAMPLING[*]}"
  "$BIN/qrun" "$OUT/$v.qpkg" \
    --prompt "${PROMPT:-It is a truth universally acknowledged, that}" \
    --max-new-tokens "${MAX_NEW_TOKENS:-60}" "${SAMPLING[@]}" 2> "$OUT/$v.generate.log" ||
    { cat "$OUT/$v.generate.log" >&2; exit 1; }
done
