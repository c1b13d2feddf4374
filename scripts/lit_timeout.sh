#!/usr/bin/env bash
# lit with a deadline, for scripts/test.sh and scripts/sanitize.sh: a test
# that hangs would otherwise hold the run until CI's own limit stops it with
# nothing said (lit's per-test timeout needs psutil, which Debian's lit
# lacks). Prints what `lit -s` prints (failures and the summary); the full
# per-test log goes to LOG. When SECONDS pass, lit and every process it
# started (one process group: timeout's) are stopped, the tests without a
# result are named, and the exit status is 1.
#
#   scripts/lit_timeout.sh SECONDS LOG LIT_ARGS...
set -uo pipefail
cd "$(dirname "$0")/.."
secs=$1 log=$2
shift 2
LIT=${LLVM_LIT:-/usr/lib/llvm-22/bin/lit}
PYTHONUNBUFFERED=1 timeout -k 30 "$secs" "$LIT" --print-result-after=all "$@" > "$log" 2>&1 &
pid=$!
# timeout's own process group takes lit out of the terminal's: an interrupt
# is passed on to it (timeout stops the group), not left to finish alone.
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; exit 130' INT TERM
wait "$pid"
rc=$?
trap - INT TERM
# Results that need no attention stay in the log.
grep -vE '^(PASS|UNSUPPORTED|XFAIL): ' "$log"
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  unfinished=$("$LIT" --show-tests "$@" 2>/dev/null | sed -nE 's/^  (.* :: .*)$/\1/p' |
    while IFS= read -r t; do
      grep -qF ": $t (" "$log" || echo "$t"
    done)
  echo "lit: stopped after $secs s; no result for: $(echo "$unfinished" | sed 's/^.* :: //' | paste -sd' ')" >&2
  exit 1
fi
exit $rc
