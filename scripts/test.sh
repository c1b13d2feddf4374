#!/usr/bin/env bash
# Sets up, builds and runs every test: the lit suite, the unit tests, the ONNX
# node conformance suite and the fixtures-vs-onnxruntime oracle (all in ctest),
# then the sanitizer step (scripts/sanitize.sh: the runtime under ASan+UBSan,
# the fuzz replays, each fuzz target for FUZZ_SECONDS; SANITIZE=0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's start, minutes into the run, on its own line: when CI stops a
# run at its time limit, the last lines it kept say which step was running.
# The closing 'steps:' line adds each step's minutes up.
export QCC_TEST_START=${QCC_TEST_START:-$(date +%s)} # scripts/sanitize.sh's too
steps=""
step_start=$SECONDS
step_name=""
step() {
  [ -n "$step_name" ] && steps="$steps $step_name $(( (SECONDS - step_start + 30) / 60 ))m"
  step_name=$1
  step_start=$SECONDS
  [ -n "$step_name" ] && echo "--- [$(( ($(date +%s) - QCC_TEST_START) / 60 )) min] $step_name"
  return 0
}
step setup
./scripts/setup.sh
step build
./scripts/build.sh
BUILD="${BUILD_DIR:-build}"
# lit's own summary (ctest shows a test's output only when it fails); a
# test that hangs is stopped and named (scripts/lit_timeout.sh).
step lit
status=0
./scripts/lit_timeout.sh "${LIT_TIMEOUT:-1200}" "$BUILD/lit.out" -v "$BUILD/test" || status=$?
# ctest's `lit` entry is the suite that just ran: left out here. Two tests
# at a time: most wait on process start-up and Python imports (a cold run's
# ctest 8 min -> 3 on 2 cores).
step ctest
ctest --test-dir "$BUILD" --output-on-failure -j "${CTEST_JOBS:-2}" -E '^lit$' 2>&1 |
  tee "$BUILD/ctest.out" || status=$?
# The reports of the Python-driven checks, and why any test skipped (the GPU
# tests without a GPU), from ctest's log.
echo "--- ONNX node conformance, fixtures vs onnxruntime, skipped tests"
grep -hE '^conformance: |^zoo: |^kv-cache: |: FAIL|(PASS|FAIL) *$|^SKIP: |Skipped$|no GPU: ' "$BUILD/Testing/Temporary/LastTest.log" || true
# One closing line in the plain 'N passed, N failed, N skipped' form: ctest
# counts a skipped test (exit 77, the GPU tests without a GPU) as not failed,
# so it is taken out of the passed ones and counted on its own.
total=$(sed -nE 's/.*tests failed out of ([0-9]+).*/\1/p' "$BUILD/ctest.out" | tail -1)
failed=$(sed -nE 's/.* ([0-9]+) tests failed out of.*/\1/p' "$BUILD/ctest.out" | tail -1)
skipped=$(grep -cE '^[[:space:]]*[0-9]+ - .*\(Skipped\)$' "$BUILD/ctest.out" || true)
echo "ctest: $(( ${total:-0} - ${failed:-0} - ${skipped:-0} )) passed, ${failed:-0} failed, ${skipped:-0} skipped"
if [ "${SANITIZE:-1}" = 1 ]; then
  step sanitizers # build-asan: runtime tests and fuzz replays; fuzz targets; lit
  ./scripts/sanitize.sh || status=$?
fi
step ""
echo "steps:$steps; $(( ($(date +%s) - QCC_TEST_START) / 60 )) min in all"
exit $status
