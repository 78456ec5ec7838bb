#!/usr/bin/env bash
# Runs every test binary of the build (unit, then integration) with TAP output and
# prints the totals as the closing line "N passed, N failed".
# Usage: BUILD=build-asan tests/run.sh [FILTER]
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-asan}
export SERVETUNE_BIN="$PWD/$BUILD/servetune"
export CMOCKA_MESSAGE_OUTPUT=TAP
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
filter=${1:-}
passed=0; failed=0; skipped=0; broken=()
for t in "$BUILD"/tests/unit/test_* "$BUILD"/tests/integration/test_*; do
  [ -x "$t" ] || continue
  case "$t" in *.d|*.o) continue;; esac
  [ -n "$filter" ] && [[ "$t" != *"$filter"* ]] && continue
  name=${t#"$BUILD"/tests/}
  log=$(mktemp)
  start=$(date +%s)
  timeout --kill-after=10 600 "$t" >"$log" 2>&1
  rc=$?
  # cmocka's TAP marks a skipped test "not ok N # SKIP": counted apart, not as a failure
  p=$(grep -cE '^ok [0-9]+' "$log"); f=$(grep -E '^not ok [0-9]+' "$log" | grep -cv '# SKIP')
  k=$(grep -cE '^not ok [0-9]+ # SKIP' "$log")
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + k))
  secs=$(( $(date +%s) - start ))
  if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
    echo "FAIL $name (exit $rc, $p passed, $f failed, ${secs}s)"
    # which check failed first: a sanitizer's report after it (leaks left by the failed test's
    # early return) may be longer than the tail shown below
    grep -nE '^not ok [0-9]+|Failure!|[Ee]rror: |ERROR:' "$log" | grep -v '# SKIP' | head -20 | sed 's/^/  > /'
    sed 's/^/    /' "$log" | tail -60
    broken+=("$name")
    # A binary that died before reporting counts as one failure.
    [ "$f" -eq 0 ] && failed=$((failed + 1))
  else
    echo "ok   $name ($p tests${k:+, $k skipped}, ${secs}s)" | sed 's/, 0 skipped//'
    [ "$k" -gt 0 ] && grep -E '^# .*skipped' "$log" | sort -u | sed 's/^/    /'
  fi
  rm -f "$log"
done
echo
[ ${#broken[@]} -gt 0 ] && echo "failing: ${broken[*]}"
[ "$skipped" -gt 0 ] && echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
