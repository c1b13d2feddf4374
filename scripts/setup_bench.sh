#!/usr/bin/env bash
# Creates .venv-bench: the peers of bench/bench_cpu.py (onnxruntime, and
# llama.cpp through llama-cpp-python, which pip builds from source: several
# minutes on two cores; with its server for bench/bench_serve.py) plus gguf and
# sentencepiece to write the demo model's GGUF with its vocabulary, and
# matplotlib for the plots. A separate
# venv, so that the project's .venv stays small. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv-bench/bin/python ]; then
  echo "setup_bench: creating .venv-bench"
  "$PY" -m venv .venv-bench
fi
if ! .venv-bench/bin/python -c "import onnx, onnxruntime, numpy, gguf, llama_cpp, llama_cpp.server.app, matplotlib, sentencepiece" 2>/dev/null; then
  echo "setup_bench: installing packages into .venv-bench (llama-cpp-python compiles llama.cpp)"
  # llama.cpp for this CPU (GGML_NATIVE, llama-cpp-python's default), with
  # its OpenAI server (bench/bench_serve.py's peer) and matplotlib (plots);
  # cap the compile at the machine's cores.
  export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
  .venv-bench/bin/pip install -q --disable-pip-version-check \
    numpy==2.4.6 onnx==1.23.2 onnxruntime==1.32.0 gguf==0.19.0 'llama-cpp-python[server]==0.3.36' matplotlib \
    sentencepiece
fi
echo "setup_bench: done"
