#!/usr/bin/env bash
# Installs everything qcc needs on a fresh Debian 12 machine, then creates the
# project's Python virtual environment (.venv) for test fixtures and reference
# checks. Safe to run again: apt and pip skip what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

APT_PACKAGES=(
  cmake ninja-build ccache g++ pkg-config
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libonnx-dev libonnx-testdata protobuf-compiler libprotobuf-dev
  libfmt-dev libgtest-dev libsentencepiece-dev libicu-dev libopenblas-dev libdnnl-dev
  nlohmann-json3-dev libcli11-dev zlib1g-dev libcpp-httplib-dev
  clang libclang-rt-14-dev
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: system packages present"
fi

if [ ! -x /usr/local/cuda/bin/nvcc ] && [ ! -f /usr/local/cuda/include/nvrtc.h ]; then
  echo "setup: warning: no CUDA toolkit in /usr/local/cuda; kernel compile tests will be skipped" >&2
fi

# Python is for fixtures and reference checks only (never in the compile or run path).
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import onnx, onnxruntime, numpy, nanobind, scikit_build_core, pytest, openai" 2>/dev/null; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements.txt
fi
# Ray Serve, for qserve's replicas (deploy/ray) and their test, in its own
# environment (about 500 MB).
if [ ! -x .venv-ray/bin/python ]; then
  echo "setup: creating .venv-ray"
  "$PY" -m venv .venv-ray
fi
if ! .venv-ray/bin/python -c "import ray.serve, aiohttp, openai, pytest, yaml" 2>/dev/null; then
  echo "setup: installing Ray Serve into .venv-ray"
  .venv-ray/bin/pip install -q --disable-pip-version-check -r scripts/requirements-ray.txt
fi
echo "setup: done"
