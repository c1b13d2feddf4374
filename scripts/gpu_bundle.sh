#!/usr/bin/env bash
# Packs what a GPU machine without LLVM or a package registry (the device
# tool's) needs to run the CUDA backend's checks: qrun and the shared
# libraries it uses beyond the base system, the demo artifacts compiled here
# (test/e2e/check_gpu.py's set) and that script. Writes .gpu-bundle/
# (git-ignored), one compressed archive plus run.sh.
#
#   ./scripts/gpu_bundle.sh               # here, after ./scripts/build.sh
#   .gpu-bundle/run.sh [--keep DIR]       # there: prints check_gpu.py's table
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
MODEL=examples/austen/model.onnx
STATS=test/codegen/Inputs/austen-stats.json
A="$STAGE/qcc-gpu/artifacts"
echo "gpu_bundle: compiling the demo artifacts"
"$BUILD/bin/qcc" $MODEL -o "$A/f32.qpkg"
"$BUILD/bin/qcc" $MODEL --quant=w8a8 --kv-dtype=i8 --calib-stats=$STATS -o "$A/w8a8.qpkg"
"$BUILD/bin/qcc" $MODEL --quant=w8a8 --kv-dtype=i8 --kv-scales=kivi --calib-stats=$STATS -o "$A/w8a8-kivi.qpkg"
"$BUILD/bin/qcc" $MODEL --quant=w8a8 --kv-cache=contiguous --calib-stats=$STATS -o "$A/w8a8-contig.qpkg"
# The 2:4 sparse kinds (check_gpu.py's SPARSE_ARTIFACTS).
"$BUILD/bin/qcc-sparse-fixture" $MODEL "$A/f32-sparse.qpkg" > /dev/null
"$BUILD/bin/qcc-sparse-fixture" $MODEL "$A/w8a8-sparse.qpkg" --quant=w8a8 --kv-dtype=i8 --calib-stats=$STATS > /dev/null
cp test/e2e/check_gpu.py "$STAGE/qcc-gpu/test/e2e/"
# check_gpu.py finds the model and stats relative to the repo root; it only
# reads them when it compiles (--qcc), which it does not do there.
rm -rf "$OUT"
mkdir -p "$OUT"
tar -C "$STAGE" -cJf "$OUT/qcc-gpu.tar.xz" qcc-gpu
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
"${PYTHON:-python3}" "$DEST/qcc-gpu/test/e2e/check_gpu.py" --qrun "$Q" --work "$DEST/qcc-gpu/artifacts" "$@" || status=$?
# Per-kernel timings (CUDA events) of each artifact, whatever the checks
# said: the table on stdout, JSON under $OUT when the device tool gives one.
for a in "$DEST"/qcc-gpu/artifacts/*.qpkg; do
  name=$(basename "$a" .qpkg)
  echo "== profile: $name (--bench-generate 8 128 32)"
  "$Q" "$a" --backend=cuda --bench-generate 8 128 32 --profile \
    --profile-json "${OUT:-/tmp}/profile-$name.json" || echo "profile of $name failed"
done
exit $status
RUN
chmod +x "$OUT/run.sh"
du -sh "$OUT"
