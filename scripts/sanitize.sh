#!/usr/bin/env bash
# The sanitizer step of scripts/test.sh (docs/THREAT_MODEL.md):
#  1. build-asan/: the artifact format and the runtime (QCC_WITH_COMPILER=OFF)
#     with gcc's -fsanitize=address,undefined (any report is fatal), then
#     ctest there: the runtime's unit tests (qcc-runtime-tests), qserve's
#     (qcc-serve-tests) and the fuzz replays (fuzz-replay-*: seeds and
#     test/fuzz-regressions/); then test/serve's suite against this qserve;
#  2. when clang is there, build-fuzz/ (clang, ASan+UBSan, the compiler
#     included): scripts/fuzz.sh runs every libFuzzer target for FUZZ_SECONDS
#     (default 30) each, the ONNX importer's among them, after replaying its
#     seeds and regressions; then the lit suite runs there, so qcc, qcc-opt,
#     qrun and qcc-calib run every lit test under the sanitizers.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"  # cache hits across clones
BUILD=${ASAN_BUILD_DIR:-build-asan}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# Each part's start, minutes into the run (scripts/test.sh sets the start).
start=${QCC_TEST_START:-$(date +%s)}
part() { echo "sanitize: [$(( ($(date +%s) - start) / 60 )) min] $1"; }

if [ ! -f "$BUILD/build.ninja" ]; then
  mkdir -p "$BUILD"
  cmake -G Ninja -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DQCC_WITH_COMPILER=OFF \
    -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_C_FLAGS="$FLAGS" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit > "$BUILD/configure.log" 2>&1 ||
    { cat "$BUILD/configure.log" >&2; exit 1; }
fi
part "build-asan: build"
cmake --build "$BUILD" > "$BUILD/build.log" 2>&1 || { tail -40 "$BUILD/build.log" >&2; exit 1; }
# Leaks are left to the fuzz targets (libFuzzer checks each input); the
# unit tests hold one-time pools (OpenMP, OpenBLAS) that are not bugs.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
part "build-asan: ctest"
ctest --test-dir "$BUILD" --output-on-failure -j2 > "$BUILD/ctest.out" 2>&1 || status=$?
tail -3 "$BUILD/ctest.out"
if [ $status -ne 0 ]; then
  grep -E "Failed|\*\*\*" "$BUILD/ctest.out" >&2 || true
  exit $status
fi
# qserve under the sanitizers: test/serve's suite (hostile bodies, disconnects,
# 64 concurrent streams) against this build's qserve, the artifacts compiled
# by the main build's qcc.
MAIN_BIN=${MAIN_BIN_DIR:-build/bin}
if [ -x .venv/bin/python ] && [ -x "$MAIN_BIN/qcc" ]; then
  part "qserve's suite"
  QCC_BIN_DIR="$MAIN_BIN" QCC_QSERVE="$BUILD/bin/qserve" PYTHONDONTWRITEBYTECODE=1 \
    .venv/bin/python -m pytest -q -p no:cacheprovider test/serve > "$BUILD/serve.out" 2>&1 || {
    status=1
    tail -30 "$BUILD/serve.out" >&2
  }
  tail -1 "$BUILD/serve.out" | sed 's/^/qserve under ASan+UBSan: /'
else
  echo "sanitize: no .venv or $MAIN_BIN/qcc: qserve's suite under the sanitizers was not run" >&2
fi
if ! command -v "${FUZZ_CXX:-clang++}" > /dev/null; then
  echo "sanitize: no clang: the libFuzzer targets and the lit suite under the sanitizers were not run" >&2
  exit 0
fi
part "build-fuzz: fuzz targets"
./scripts/fuzz.sh "$FUZZ_SECONDS" || status=$?
# Leaks are off here too (qcc's MLIRContext and NVRTC's state live until
# exit); allow_user_poisoning=0 as in scripts/fuzz.sh.
FUZZ_BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
part "build-fuzz: lit"
cmake --build "$FUZZ_BUILD" --target qcc-lit-depends > "$FUZZ_BUILD/lit-build.log" 2>&1 ||
  { tail -40 "$FUZZ_BUILD/lit-build.log" >&2; exit 1; }
ASAN_OPTIONS="$ASAN_OPTIONS:allow_user_poisoning=0" ./scripts/lit_timeout.sh \
  "${LIT_TIMEOUT:-1200}" "$FUZZ_BUILD/lit.out" -v "$FUZZ_BUILD/test" > /dev/null 2> "$FUZZ_BUILD/lit.err" || {
  status=1
  grep -E "^(FAIL|UNRESOLVED|TIMEOUT)|ERROR: AddressSanitizer|runtime error:" "$FUZZ_BUILD/lit.out" | head -20 >&2
  cat "$FUZZ_BUILD/lit.err" >&2
}
grep -E "^ *(Passed|Failed|Unsupported|Expectedly Failed|Unresolved|Timed Out) *:" "$FUZZ_BUILD/lit.out" |
  sed 's/^ */lit under ASan+UBSan: /' || true
exit $status
