#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, -fsanitize=fuzzer,address,
# undefined; build dir build-fuzz/, configured with the compiler so that the
# ONNX importer's target is there too, and with the lit suite, which
# scripts/sanitize.sh runs in the same build) and runs each for SECONDS (default 60),
# one after the other. Each target keeps its growing corpus in
# build-fuzz/corpus/NAME (seeded from fuzz/corpus/NAME and the regressions).
# An input that crashes, hangs or trips a sanitizer is copied to
# test/fuzz-regressions/NAME/, which ctest's fuzz-replay-NAME replays in every
# build; the script then exits 1. One summary line per target: executions,
# coverage (cov: edges, ft: features) and findings.
#
#   scripts/fuzz.sh [SECONDS]
#   FUZZ_TARGETS="npy artifact" scripts/fuzz.sh 600   # some targets
#   FUZZ_CMAKE_ARGS: more configure arguments
#   FUZZ_RUNS=1000000 FUZZ_TARGETS=artifact scripts/fuzz.sh   # a campaign:
#     stop after that many executions instead of SECONDS
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
CC_FUZZ=${FUZZ_CC:-clang}
CXX_FUZZ=${FUZZ_CXX:-clang++}

# Configured every time (quick once done), so an older build dir gets the
# current options. FUZZ_CMAKE_ARGS=-DQCC_WITH_COMPILER=OFF leaves the
# importer out (no LLVM/MLIR needed).
mkdir -p "$BUILD"
# shellcheck disable=SC2086
CC=$CC_FUZZ CXX=$CXX_FUZZ cmake -G Ninja -S . -B "$BUILD" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQCC_FUZZ=ON -DQCC_WITH_COMPILER=ON \
  -DQCC_BUILD_TESTS=ON -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
  ${FUZZ_CMAKE_ARGS:-} > "$BUILD/configure.log" 2>&1 ||
  { cat "$BUILD/configure.log" >&2; exit 1; }
cmake --build "$BUILD" --target qcc-fuzzers > "$BUILD/build.log" 2>&1 ||
  { tail -40 "$BUILD/build.log" >&2; exit 1; }

# Debian's LLVM is not instrumented: the allocator poisoning that LLVM's
# headers compile into our files would flag its own uninstrumented
# allocations (fuzz/README.md).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allow_user_poisoning=0"
targets=${FUZZ_TARGETS:-$(cd "$BUILD/bin" && ls qcc-fuzz-* | sed 's/^qcc-fuzz-//')}
found=0
for name in $targets; do
  bin="$BUILD/bin/qcc-fuzz-$name"
  [ -x "$bin" ] || { echo "fuzz: no target $name" >&2; exit 1; }
  corpus="$BUILD/corpus/$name"
  crashes="$BUILD/crashes/$name"
  log="$BUILD/logs/$name.log"
  mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
  seeds=()
  for d in "fuzz/corpus/$name" "test/fuzz-regressions/$name"; do
    [ -d "$d" ] && seeds+=("$d")
  done
  limit=(-max_total_time="$SECONDS_PER_TARGET")
  [ -n "${FUZZ_RUNS:-}" ] && limit=(-runs="$FUZZ_RUNS")
  start=$(date +%s)
  dict=()
  [ -f "fuzz/$name.dict" ] && dict=("-dict=fuzz/$name.dict")
  # New inputs go to the first directory only (the build's, not the repo's).
  set +e
  "$bin" "$corpus" "${seeds[@]}" "${dict[@]}" \
    "${limit[@]}" -timeout=10 -rss_limit_mb=4096 \
    -artifact_prefix="$crashes/" -print_final_stats=1 > "$log" 2>&1
  set -e
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  new=0
  for f in "$crashes"/*; do
    [ -f "$f" ] || continue
    mkdir -p "test/fuzz-regressions/$name"
    cp "$f" "test/fuzz-regressions/$name/"
    new=$((new + 1))
    rm "$f"
  done
  found=$((found + new))
  echo "fuzz: $name: ${runs:-?} executions in $(( $(date +%s) - start )) s, ${cov:-cov: ?}, $new finding(s)$([ "$new" -gt 0 ] && echo " (log: $log)")"
  if [ "$new" -gt 0 ]; then
    grep -m1 -E 'ERROR: |runtime error:|terminate called|deadly signal' "$log" >&2 || true
  fi
done
if [ "$found" -gt 0 ]; then
  echo "fuzz: $found finding(s) copied to test/fuzz-regressions/: fix them, keep them as regressions" >&2
  exit 1
fi
