#!/usr/bin/env bash
# The sanitizer step of scripts/test.sh (docs/THREAT_MODEL.md):
#  1. build-asan/: the artifact format and the runtime (QCC_WITH_COMPILER=OFF)
#     with gcc's -fsanitize=address,undefined (any report is fatal), then
#     ctest there: the runtime's unit tests (qcc-runtime-tests) and the fuzz
#     replays (fuzz-replay-*: seeds and test/fuzz-regressions/);
#  2. scripts/fuzz.sh: every libFuzzer target for FUZZ_SECONDS (default 30)
#     each, when clang is there.
# SANITIZE_COMPILER=1 also builds the compiler, qcc and the lit suite with
# the sanitizers and runs the whole ctest suite there (an hour or more cold on
# 2 cores: not part of scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${ASAN_BUILD_DIR:-build-asan}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
WITH_COMPILER=OFF
if [ "${SANITIZE_COMPILER:-0}" = 1 ]; then WITH_COMPILER=ON; fi
FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"

if [ ! -f "$BUILD/build.ninja" ]; then
  mkdir -p "$BUILD"
  cmake -G Ninja -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DQCC_WITH_COMPILER=$WITH_COMPILER \
    -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_C_FLAGS="$FLAGS" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit > "$BUILD/configure.log" 2>&1 ||
    { cat "$BUILD/configure.log" >&2; exit 1; }
fi
cmake --build "$BUILD" > "$BUILD/build.log" 2>&1 || { tail -40 "$BUILD/build.log" >&2; exit 1; }
# Leaks are left to the fuzz targets (libFuzzer checks each input); the
# unit tests hold one-time pools (OpenMP, OpenBLAS) that are not bugs.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
ctest --test-dir "$BUILD" --output-on-failure -j2 > "$BUILD/ctest.out" 2>&1 || status=$?
tail -3 "$BUILD/ctest.out"
if [ $status -ne 0 ]; then
  grep -E "Failed|\*\*\*" "$BUILD/ctest.out" >&2 || true
  exit $status
fi
if command -v "${FUZZ_CXX:-clang++}" > /dev/null; then
  ./scripts/fuzz.sh "$FUZZ_SECONDS"
else
  echo "sanitize: no clang: the libFuzzer targets were not run" >&2
fi
