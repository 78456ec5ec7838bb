#!/usr/bin/env bash
# The trace readers' speed and memory: `servetune trace stats` over a synthetic trace of
# TRACE_MB (default 1024) in each format (bench/trace_gen), with /usr/bin/time's wall time and
# peak RSS. Prints MB/s and the peak RSS next to the file size: memory must not grow with the
# file. Asserts nothing. Environment: BUILD (default build), TRACE_MB, FORMATS, CORE (0).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$BUILD/servetune
GEN=$BUILD/bench/trace_gen
MB=${TRACE_MB:-1024}
CORE=${CORE:-0}
FORMATS=${FORMATS:-"mooncake azure burstgpt litellm"}
[ -x "$BIN" ] && [ -x "$GEN" ] || { echo "build first: make bench"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %10s %10s %10s %12s %14s\n' format "file MB" rows "wall s" "MB/s" "peak RSS MB"
for f in $FORMATS; do
  "$GEN" "$f" "$MB" >"$tmp/t.$f"
  size=$(stat -c %s "$tmp/t.$f")
  rm -f "$tmp/s.json"
  /usr/bin/time -f '%e %M' -o "$tmp/time" taskset -c "$CORE" "$BIN" trace stats "$tmp/t.$f" \
      --json "$tmp/s.json" >"$tmp/out" 2>&1 || { echo "$f: trace stats failed"; cat "$tmp/out"; rm -f "$tmp/t.$f"; continue; }
  read -r wall rss <"$tmp/time"
  rows=$(grep -o '"kept": [0-9]*' "$tmp/s.json" | head -1 | grep -o '[0-9]*')
  awk -v f="$f" -v s="$size" -v w="$wall" -v r="$rss" -v n="$rows" \
      'BEGIN { printf "%-10s %10.0f %10d %10.2f %12.1f %14.1f\n", f, s/1048576, n, w, (w > 0 ? s/1048576/w : 0), r/1024 }'
  rm -f "$tmp/t.$f"
done
