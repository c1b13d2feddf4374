#!/usr/bin/env bash
# Packs what a GPU machine without LLVM or a package registry (the device
# tool's) needs to run the CUDA backend's checks: qrun and the shared
# libraries it uses beyond the base system, the demo artifacts compiled here
# (test/e2e/check_gpu.py's set) and that script. Writes .gpu-bundle/
# (git-ignored), one compressed archive plus run.sh. With nvcc here it also
# builds the mma.sp layout probe and the GEMV benchmark (bench/gemv_bench.cu),
# which run.sh runs before check_gpu.py.
#
#   ./scripts/gpu_bundle.sh [--bench]     # here, after ./scripts/build.sh
#   .gpu-bundle/run.sh [--no-reference] [--bench-only] [--no-profiles] [--no-gemv]
#                                         # there: check_gpu.py's table, profiles,
#                                         # then bench/gpu_reference.py (and with
#                                         # --bench, bench/gpu_bench.py's table and
#                                         # programmatic launch on / off)
#
# --bench also packs issue 12's 1B LLaMA (bench/llama_1b.py; reused from
# $LLAMA_DIR, default build/llama1b, else written there with .venv-real)
# compiled three ways with qcc --synthetic-weights (weights expanded by qrun
# at load, so each artifact is a few MB): f16, W8A8 (SmoothQuant O1, int8 KV)
# and 2:4 W8A8; run.sh then runs bench/gpu_bench.py after gpu_reference.py
# (docs/GPU_BENCH.md). run.sh --bench-only skips check_gpu.py and the profiles.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD_DIR:-build}"
OUT=.gpu-bundle
BENCH=0
for arg in "$@"; do
  case "$arg" in
    --bench) BENCH=1 ;;
    *) echo "gpu_bundle.sh: unknown option '$arg' (--bench)" >&2; exit 1 ;;
  esac
done
# (qcc --help-hidden does not list hidden options: ask whether the flag parses.)
if [ $BENCH = 1 ] && "$BUILD/bin/qcc" --synthetic-weights 2>&1 | grep -q 'Unknown command line argument'; then
  echo "gpu_bundle.sh: --bench needs qcc --synthetic-weights, which $BUILD/bin/qcc lacks (rebuild it)" >&2
  exit 1
fi
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/qcc-gpu/lib" "$STAGE/qcc-gpu/artifacts" "$STAGE/qcc-gpu/test/e2e"
cp "$BUILD/bin/qrun" "$STAGE/qcc-gpu/"
# Libraries a CUDA/PyTorch image may lack; glibc (libmvec included) and
# libstdc++ are there.
ldd "$BUILD/bin/qrun" | awk '/=> \//{print $3}' |
  grep -Ev '/(libc|libm|libmvec|libstdc\+\+|libgcc_s|libdl|libpthread|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$STAGE/qcc-gpu/lib/"; done
# ICU's 31 MB data library would push the bundle past the device tool's
# 64 MiB: a stub with the same soname stands in. Only HfTokenizer
# (tokenizer.json) asks ICU for data, and the demo artifacts use
# SentencePiece; a tokenizer.json artifact there gets ICU's error, not garbage.
if [ -f "$STAGE/qcc-gpu/lib/libicudata.so.72" ]; then
  printf 'const char icudt72_dat[64] = {0};\n' > "$STAGE/icudata.c"
  cc -shared -fPIC -Wl,-soname,libicudata.so.72 -o "$STAGE/qcc-gpu/lib/libicudata.so.72" "$STAGE/icudata.c"
fi
A="$STAGE/qcc-gpu/artifacts"
echo "gpu_bundle: compiling check_gpu.py's artifacts"
.venv/bin/python test/e2e/check_gpu.py --compile-only --qcc "$BUILD/bin/qcc" \
  --qrun "$BUILD/bin/qrun" --work "$A" > /dev/null
# What compiling them needed (the outlier model, calibration text and
# statistics) stays here: the device tool carries at most 64 MiB.
rm -rf "$A/outliers" "$A/calib-train.txt" "$A"/*.json "$A"/*.json.*
cp test/e2e/check_gpu.py "$STAGE/qcc-gpu/test/e2e/"
mkdir -p "$STAGE/qcc-gpu/examples/austen"
head -c 16000 examples/austen/heldout.txt > "$STAGE/qcc-gpu/examples/austen/heldout.txt"
cp bench/gpu_reference.py "$STAGE/qcc-gpu/"
# The int8 mma.sp layout probe, built here (the CUDA runtime links
# statically; the GPU machine's nvcc would do as well).
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ -x "$NVCC" ]; then
  "$NVCC" -std=c++17 -O2 -arch=sm_90 -I. test/e2e/mma_sp_layout.cu -o "$STAGE/qcc-gpu/mma_sp_layout"
  # The decode GEMV's configs side by side (bench/gemv_bench.cu); the kernel
  # headers include each other as qcc/<name>, as NVRTC sees them:
  # codegen/kernels and format/device side by side.
  mkdir -p "$STAGE/include/qcc"
  ln -s "$PWD"/codegen/kernels/* "$PWD"/format/device/* "$STAGE/include/qcc/"
  "$NVCC" -std=c++17 -O3 -arch=sm_90 -I"$STAGE/include" -I. bench/gemv_bench.cu -o "$STAGE/qcc-gpu/gemv_bench"
fi
if [ $BENCH = 1 ]; then
  # Issue 12's 1B LLaMA, compiled one at a time (each takes ~13 GB of memory).
  LLAMA="${LLAMA_DIR:-build/llama1b}"
  if [ ! -f "$LLAMA/model.onnx" ] || [ ! -f "$LLAMA/model.onnx.data" ] || [ ! -d "$LLAMA/calib" ]; then
    echo "gpu_bundle: writing the 1B LLaMA into $LLAMA (bench/llama_1b.py)"
    "${PYTHON_REAL:-.venv-real/bin/python}" bench/llama_1b.py --out "$LLAMA"
  fi
  B="$STAGE/qcc-gpu/bench"
  mkdir -p "$B"
  # The calibration statistics are saved on the first W8A8 compile and reused.
  W8A8="--quant=w8a8 --kv-dtype=i8 --calib=$LLAMA/calib --calib-samples=8 --calib-stats=$LLAMA/stats.json"
  for spec in "f16:" "w8a8:$W8A8" "w8a8-sparse:$W8A8 --sparsity=2:4 --prune=magnitude"; do
    name=${spec%%:*}
    echo "gpu_bundle: compiling the 1B LLaMA: $name"
    # shellcheck disable=SC2086 # the flags are words
    # --max-positions: the HF config's max_position_embeddings; the rotary
    # cos/sin become tables, so a decode step has no host work (KV_CACHE.md).
    "$BUILD/bin/qcc" "$LLAMA/model.onnx" --quiet --synthetic-weights --max-positions=4096 ${spec#*:} -o "$B/$name.qpkg"
  done
  # Llama-3.2-1B's shape (bench/llama_1b.py --shape llama32-1b: FFN 8192,
  # vocab 128256, tied embeddings), f16 and W8A8, for the comparison with
  # published batch-1 decode figures of that model (issue 34).
  L32="${LLAMA32_DIR:-build/llama32-1b}"
  if [ ! -f "$L32/model.onnx" ] || [ ! -f "$L32/model.onnx.data" ] || [ ! -d "$L32/calib" ]; then
    echo "gpu_bundle: writing the Llama-3.2-1B-shaped model into $L32 (bench/llama_1b.py --shape llama32-1b)"
    "${PYTHON_REAL:-.venv-real/bin/python}" bench/llama_1b.py --shape llama32-1b --out "$L32"
  fi
  B32="$STAGE/qcc-gpu/bench-l32"
  mkdir -p "$B32"
  W8A8_32="--quant=w8a8 --kv-dtype=i8 --calib=$L32/calib --calib-samples=8 --calib-stats=$L32/stats.json"
  for spec in "f16:" "w8a8:$W8A8_32"; do
    name=${spec%%:*}
    echo "gpu_bundle: compiling the Llama-3.2-1B-shaped model: $name"
    # shellcheck disable=SC2086 # the flags are words
    "$BUILD/bin/qcc" "$L32/model.onnx" --quiet --synthetic-weights --max-positions=4096 ${spec#*:} -o "$B32/$name.qpkg"
  done
  cp bench/gpu_bench.py bench/measure.py "$STAGE/qcc-gpu/"
  ls -l "$B" "$B32"
fi
# Artifacts left out to stay under the device tool's 64 MiB (names under
# artifacts/, space-separated); check_gpu.py then skips them, saying so.
for name in ${GPU_BUNDLE_DROP:-}; do
  rm -f "$A/$name"
  echo "$name" >> "$STAGE/qcc-gpu/dropped.txt"
done
# check_gpu.py finds the model and stats relative to the repo root; it only
# reads them when it compiles (--qcc), which it does not do there.
rm -rf "$OUT"
mkdir -p "$OUT"
XZ_OPT="-9 -T0" tar -C "$STAGE" -cJf "$OUT/qcc-gpu.tar.xz" qcc-gpu
cat > "$OUT/run.sh" <<'RUN'
#!/usr/bin/env bash
# Unpacks the bundle into /tmp and runs the CUDA backend's checks there.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DEST=/tmp/qcc-gpu-run
rm -rf "$DEST" && mkdir -p "$DEST"
tar -C "$DEST" -xJf "$HERE/qcc-gpu.tar.xz"
export LD_LIBRARY_PATH="$DEST/qcc-gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
Q="$DEST/qcc-gpu/qrun"
REFERENCE=1
CHECKS=1
PROFILES=1
GEMV=1
mkdir -p "$DEST/profiles"
for arg in "$@"; do
  case "$arg" in
    --no-reference) REFERENCE=0 ;;
    --bench-only) CHECKS=0 ;;
    --no-profiles) PROFILES=0 ;;
    --no-gemv) GEMV=0 ;;
    *) echo "run.sh: unknown option '$arg' (--no-reference, --bench-only, --no-profiles, --no-gemv)" >&2; exit 1 ;;
  esac
done
LOG="${OUT:-/tmp}"
"$Q" --devices
status=0
if [ $CHECKS = 1 ]; then
  if [ -x "$DEST/qcc-gpu/mma_sp_layout" ]; then
    "$DEST/qcc-gpu/mma_sp_layout" || status=1
  fi
  if [ $GEMV = 1 ] && [ -x "$DEST/qcc-gpu/gemv_bench" ]; then
    # The whole log (with the tuning CSV lines, "tune,...") under $OUT; the
    # rest here.
    "$DEST/qcc-gpu/gemv_bench" > "$LOG/gemv.log" 2>&1 || status=1
    grep -v '^tune,' "$LOG/gemv.log" || true
  fi
  SKIP=()
  if [ -f "$DEST/qcc-gpu/dropped.txt" ]; then
    while read -r name; do SKIP+=(--skip "$name"); done < "$DEST/qcc-gpu/dropped.txt"
  fi
  "${PYTHON:-python3}" "$DEST/qcc-gpu/test/e2e/check_gpu.py" --qrun "$Q" --work "$DEST/qcc-gpu/artifacts" "${SKIP[@]}" || status=$?
  # Per-kernel timings (CUDA events) of each artifact, whatever the checks
  # said: the table on stdout, JSON under $OUT when the device tool gives one.
  [ $PROFILES = 1 ] && for a in "$DEST"/qcc-gpu/artifacts/*.qpkg; do
    name=$(basename "$a" .qpkg)
    echo "== profile: $name (--bench-generate 8 128 32)"
    "$Q" "$a" --backend=cuda --bench-generate 8 128 32 --profile \
      --profile-json "$DEST/profiles/profile-$name.json" || echo "profile of $name failed"
  done
fi
if [ -d "$DEST/qcc-gpu/bench" ]; then
  # Programmatic dependent launch on and off (QCC_CUDA_PDL), one after the other,
  # on the same artifacts: decode tok/s.
  for round in 1; do
    for name in f16 w8a8; do
      a="$DEST/qcc-gpu/bench/$name.qpkg"
      [ -f "$a" ] || continue
      for b in 1 8 32; do
        for pdl in 1 0; do
          r=$(QCC_CUDA_PDL=$pdl timeout 60 "$Q" "$a" --backend=cuda --bench-generate "$b" 512 64 2>&1 |
            grep -o 'decode [0-9.]* tokens/s' || echo "failed")
          echo "pdl-ab round $round $name b$b pdl=$pdl: $r"
        done
      done
    done
  done | tee "$LOG/pdl-ab.log"
fi
# PyTorch's f16 figures and the machine's ceilings (issue 12's reference
# column), unless --no-reference.
REF="${OUT:-/tmp}/torch-reference.json"
rm -f "$REF" # never an older run's figures
if [ $REFERENCE = 1 ]; then
  "${PYTHON:-python3}" "$DEST/qcc-gpu/gpu_reference.py" --json "$REF" || echo "gpu_reference.py failed"
fi
# Issue 12's table (a bundle made with gpu_bundle.sh --bench): it needs the
# reference JSON of this run.
if [ -d "$DEST/qcc-gpu/bench" ]; then
  if [ $REFERENCE = 1 ] && [ -f "$REF" ]; then
    "${PYTHON:-python3}" "$DEST/qcc-gpu/gpu_bench.py" --qrun "$Q" --artifacts "$DEST/qcc-gpu/bench" \
      --reference "$REF" --json "${OUT:-/tmp}/gpu-bench.json" --profile-dir "$DEST/profiles" || status=1
  else
    echo "gpu_bench.py skipped: it needs gpu_reference.py's JSON of this run"
  fi
  # Where a W8A8 decode step's time goes (eager, an event per node).
  if [ -f "$DEST/qcc-gpu/bench/w8a8.qpkg" ]; then
    echo "== profile: 1B w8a8 decode (--bench-generate 1 512 16)"
    "$Q" "$DEST/qcc-gpu/bench/w8a8.qpkg" --backend=cuda --bench-generate 1 512 16 --profile \
      --profile-json "${OUT:-/tmp}/profile-1b-w8a8-decode.json" || echo "profile failed"
  fi
fi
# The Llama-3.2-1B-shaped rows: PyTorch's lean CUDA-graph decode of that
# shape and qrun's, in a table of their own.
if [ -d "$DEST/qcc-gpu/bench-l32" ] && [ $REFERENCE = 1 ]; then
  REF32="${OUT:-/tmp}/torch-reference-l32.json"
  rm -f "$REF32"
  "${PYTHON:-python3}" "$DEST/qcc-gpu/gpu_reference.py" --shape llama32-1b --lean-graph-only \
    --json "$REF32" > /dev/null || echo "gpu_reference.py --shape llama32-1b failed"
  if [ -f "$REF32" ]; then
    "${PYTHON:-python3}" "$DEST/qcc-gpu/gpu_bench.py" --qrun "$Q" --artifacts "$DEST/qcc-gpu/bench-l32" \
      --reference "$REF32" --json "${OUT:-/tmp}/gpu-bench-l32.json" --profile-dir "$DEST/profiles" \
      --offload none || status=1
  fi
fi
# The profiles in one file: the device tool brings back at most 8 files.
if [ -n "${OUT:-}" ] && [ -n "$(ls "$DEST/profiles")" ]; then
  tar -C "$DEST" -czf "$OUT/profiles.tgz" profiles
fi
exit $status
RUN
chmod +x "$OUT/run.sh"
du -sh "$OUT"
