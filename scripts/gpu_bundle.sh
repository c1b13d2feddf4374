#!/usr/bin/env bash
# Packs what a GPU machine without LLVM or a package registry (the device
# tool's) needs to run the CUDA backend's checks: qrun and the shared
# libraries it uses beyond the base system, the demo artifacts compiled here
# (test/e2e/check_gpu.py's set) and that script. Writes .gpu-bundle/
# (git-ignored), one compressed archive plus run.sh.
#
#   ./scripts/gpu_bundle.sh               # here, after ./scripts/build.sh
#   .gpu-bundle/run.sh [--no-reference]   # there: check_gpu.py's table, profiles,
#                                         # then bench/gpu_reference.py
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD_DIR:-build}"
OUT=.gpu-bundle
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/qcc-gpu/lib" "$STAGE/qcc-gpu/artifacts" "$STAGE/qcc-gpu/test/e2e"
cp "$BUILD/bin/qrun" "$STAGE/qcc-gpu/"
# Libraries a CUDA/PyTorch image may lack; glibc and libstdc++ are there.
ldd "$BUILD/bin/qrun" | awk '/=> \//{print $3}' |
  grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libdl|libpthread|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$STAGE/qcc-gpu/lib/"; done
# ICU's 31 MB data library would push the bundle past the device tool's
# 64 MiB: a stub with the same soname stands in. Only HfTokenizer
# (tokenizer.json) asks ICU for data, and the demo artifacts use
# SentencePiece; a tokenizer.json artifact there gets ICU's error, not garbage.
if [ -f "$STAGE/qcc-gpu/lib/libicudata.so.72" ]; then
  printf 'const char icudt72_dat[64] = {0};\n' > "$STAGE/icudata.c"
  cc -shared -fPIC -Wl,-soname,libicudata.so.72 -o "$STAGE/qcc-gpu/lib/libicudata.so.72" "$STAGE/icudata.c"
fi
MODEL=examples/austen/model.onnx
STATS=test/codegen/Inputs/austen-stats.json
A="$STAGE/qcc-gpu/artifacts"
echo "gpu_bundle: compiling the demo artifacts"
"$BUILD/bin/qcc" $MODEL -o "$A/f32.qpkg"
"$BUILD/bin/qcc" $MODEL --quant=w8a8 --kv-dtype=i8 --calib-stats=$STATS -o "$A/w8a8.qpkg"
"$BUILD/bin/qcc" $MODEL --quant=w8a8 --kv-dtype=i8 --kv-scales=kivi --calib-stats=$STATS -o "$A/w8a8-kivi.qpkg"
"$BUILD/bin/qcc" $MODEL --quant=w8a8 --kv-cache=contiguous --calib-stats=$STATS -o "$A/w8a8-contig.qpkg"
"$BUILD/bin/qcc" $MODEL --quant=w4a16 --w4-method=rtn -o "$A/w4a16.qpkg" 2> /dev/null
# A Hugging Face LLaMA export (check_gpu.py's MODELS).
LLAMA=test/models/llama-gpu
"$BUILD/bin/qcc" $LLAMA/model.onnx --tokenizer=examples/austen/tokenizer.model -o "$A/llama-f32.qpkg"
"$BUILD/bin/qcc" $LLAMA/model.onnx --tokenizer=examples/austen/tokenizer.model --quant=w8a8 --kv-dtype=i8 --calib-stats=$LLAMA/stats.json -o "$A/llama-w8a8.qpkg"
# The 2:4 sparse kinds (check_gpu.py's SPARSE_ARTIFACTS).
"$BUILD/bin/qcc-sparse-fixture" $MODEL "$A/f32-sparse.qpkg" > /dev/null
"$BUILD/bin/qcc-sparse-fixture" $MODEL "$A/w8a8-sparse.qpkg" --quant=w8a8 --kv-dtype=i8 --calib-stats=$STATS > /dev/null
cp test/e2e/check_gpu.py "$STAGE/qcc-gpu/test/e2e/"
mkdir -p "$STAGE/qcc-gpu/examples/austen"
head -c 16000 examples/austen/heldout.txt > "$STAGE/qcc-gpu/examples/austen/heldout.txt"
cp bench/gpu_reference.py "$STAGE/qcc-gpu/"
# The int8 mma.sp layout probe, built here (the CUDA runtime links
# statically; the GPU machine's nvcc would do as well).
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ -x "$NVCC" ]; then
  "$NVCC" -std=c++17 -O2 -arch=sm_90 -I. test/e2e/mma_sp_layout.cu -o "$STAGE/qcc-gpu/mma_sp_layout"
fi
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
"$Q" --devices
status=0
if [ -x "$DEST/qcc-gpu/mma_sp_layout" ]; then
  "$DEST/qcc-gpu/mma_sp_layout" || status=1
fi
"${PYTHON:-python3}" "$DEST/qcc-gpu/test/e2e/check_gpu.py" --qrun "$Q" --work "$DEST/qcc-gpu/artifacts" || status=$?
# Per-kernel timings (CUDA events) of each artifact, whatever the checks
# said: the table on stdout, JSON under $OUT when the device tool gives one.
for a in "$DEST"/qcc-gpu/artifacts/*.qpkg; do
  name=$(basename "$a" .qpkg)
  echo "== profile: $name (--bench-generate 8 128 32)"
  "$Q" "$a" --backend=cuda --bench-generate 8 128 32 --profile \
    --profile-json "${OUT:-/tmp}/profile-$name.json" || echo "profile of $name failed"
done
# PyTorch's f16 figures and the machine's ceilings (issue 12's reference
# column), unless --no-reference.
if [ "${1:-}" != --no-reference ]; then
  "${PYTHON:-python3}" "$DEST/qcc-gpu/gpu_reference.py" --json "${OUT:-/tmp}/torch-reference.json" || echo "gpu_reference.py failed"
fi
exit $status
RUN
chmod +x "$OUT/run.sh"
du -sh "$OUT"
