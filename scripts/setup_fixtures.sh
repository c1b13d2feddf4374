#!/usr/bin/env bash
# Creates .venv-fixtures: the heavy Python environment (torch, transformers,
# optimum ONNX exporter, onnxscript, onnx, onnxruntime, sentencepiece, peft) used
# ONLY to regenerate the model zoo fixtures under test/models/zoo (see
# test/models/zoo/README.md) and the LoRA adapter fixtures under test/models/lora
# (test/models/lora/README.md), and to train the demo models (examples/austen).
# qcc's build, tests and run path never need it. Safe to run again: it only
# installs what is missing.
#
#   scripts/setup_fixtures.sh            # create / complete .venv-fixtures
#   WITH_GENAI=0 scripts/setup_fixtures.sh   # skip onnxruntime-genai (model builder exports)
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=.venv-fixtures
WITH_GENAI=${WITH_GENAI:-1}

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup_fixtures: creating $VENV with $("$PY" --version 2>&1)"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)

# torch from PyPI (the default wheel; CPU is all the generator uses).
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  echo "setup_fixtures: installing torch"
  "${PIP[@]}" torch
fi

# optimum's ONNX exporter moved to the optimum-onnx package (optimum >= 2);
# installing optimum-onnx pulls a compatible optimum and transformers (4.57.x:
# optimum-onnx 0.1.0 wants transformers < 4.58).
# onnxruntime-genai: its model builder imports transformers 5 classes from 0.16
# on, so it is pinned to the last release that works with transformers 4.57.
GENAI_PIN=onnxruntime-genai==0.15.2
PKGS=(numpy onnx onnxruntime onnxscript transformers optimum-onnx sentencepiece peft)
if [ "$WITH_GENAI" = 1 ]; then PKGS+=("$GENAI_PIN"); fi
if ! "$VENV/bin/python" - "$WITH_GENAI" "${GENAI_PIN#*==}" <<'EOF' 2>/dev/null
import sys, importlib.metadata as md
import numpy, onnx, onnxruntime, onnxscript, transformers, sentencepiece, peft
import optimum.exporters.onnx
if sys.argv[1] == "1":
    import onnxruntime_genai
    assert md.version("onnxruntime-genai") == sys.argv[2]
EOF
then
  echo "setup_fixtures: installing ${PKGS[*]}"
  "${PIP[@]}" "${PKGS[@]}"
fi

"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
names = ["torch", "transformers", "optimum", "optimum-onnx", "onnx", "onnxruntime",
         "onnxscript", "onnxruntime-genai", "sentencepiece", "peft", "numpy"]
vs = []
for n in names:
    try:
        vs.append(f"{n} {md.version(n)}")
    except md.PackageNotFoundError:
        vs.append(f"{n} (absent)")
print("setup_fixtures: " + ", ".join(vs))
EOF
echo "setup_fixtures: done"
