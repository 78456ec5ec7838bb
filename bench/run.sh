#!/usr/bin/env bash
# servetune's own benchmarks, run by `make bench`. Prints figures and
# ratios with the exact commands; asserts nothing (timing depends on the machine).
#   (a) raw request rate on a tiny non-streaming endpoint: servetune vs `wrk -t1`, same
#       concurrency, same server, same client core
#   (b) streaming: token events/s and concurrently open streams on one client core, client
#       lag p99, memory per open stream (peak RSS difference / streams)
#   (c) timing truth: client-measured first-token time minus the time the server wrote the
#       first token (same monotonic clock), p50/p99, at half of the (b) load
# Environment: BUILD (default build), CLIENT_CORE (0), SERVER_CORE (1), BENCH_SECONDS (5),
# STREAMS (5000), ITL_MS (25), WRK_CONNS (64).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$BUILD/servetune
SRV=$BUILD/bench/stream_server
JGET=$BUILD/bench/jget
CC_=${CLIENT_CORE:-0}
SC_=${SERVER_CORE:-1}
SECS=${BENCH_SECONDS:-5}
STREAMS=${STREAMS:-5000}
ITL_MS=${ITL_MS:-25}
CONNS=${WRK_CONNS:-64}
tmp=$(mktemp -d)
SRV_PID=
cleanup() { [ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
[ -x "$BIN" ] && [ -x "$SRV" ] && [ -x "$JGET" ] || { echo "build first: make bench"; exit 1; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null

start_server() { # args for stream_server
  taskset -c "$SC_" "$SRV" --port 0 "$@" >"$tmp/srv.out" 2>"$tmp/srv.err" &
  SRV_PID=$!
  for _ in $(seq 100); do grep -q '^port ' "$tmp/srv.out" 2>/dev/null && break; sleep 0.05; done
  PORT=$(awk '/^port /{print $2}' "$tmp/srv.out")
  [ -n "$PORT" ] || { echo "stream_server did not start"; cat "$tmp/srv.err"; exit 1; }
}
stop_server() { kill -INT "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null; SRV_PID=; }
j() { "$JGET" "$1" "$2"; }   # j FILE dotted.path
run_client() { # output-json, args... ; prints the peak RSS in kB
  # The peak RSS comes from /usr/bin/time (the kernel's maxrss at exit): sampling /proc from a
  # script would put a process on the client's core and show up as client lag.
  local js=$1; shift
  /usr/bin/time -f "%M" -o "$tmp/rss" taskset -c "$CC_" "$BIN" bench --quiet --json "$js" "$@" >"$tmp/client.out" 2>&1
  echo "exit $?" >>"$tmp/client.out"
  cat "$tmp/rss"
}

echo "servetune bench figures ($(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "client on core $CC_, server (bench/stream_server) on core $SC_"
echo

# ---- (a) raw request rate vs wrk ----
# Alternating rounds (the machine may be shared): the median of each side, and the CPU time
# each client used per request (user+sys, from /usr/bin/time), which load affects less.
ROUNDS=${ROUNDS:-3}
start_server
wrk_r=(); st_r=(); wrk_cpu=(); st_cpu=()
tcpu() { awk '/^cpu /{print $2+$3}' "$1"; }
for r in $(seq "$ROUNDS"); do
  if command -v wrk >/dev/null; then
    /usr/bin/time -f "cpu %U %S" -o "$tmp/wt" taskset -c "$CC_" wrk -t1 -c"$CONNS" -d"${SECS}s" "http://127.0.0.1:$PORT/tiny" >"$tmp/wrk.out" 2>&1
    w=$(awk '/Requests\/sec/{print $2}' "$tmp/wrk.out"); tot=$(awk '/requests in/{print $1}' "$tmp/wrk.out")
    wrk_r+=("$w"); wrk_cpu+=("$(awk -v c="$(tcpu "$tmp/wt")" -v n="$tot" 'BEGIN{printf "%.2f", c*1e6/n}')")
  fi
  n=$(awk -v r="${w:-20000}" -v s="$SECS" 'BEGIN{printf "%d", r*s}')
  /usr/bin/time -f "cpu %U %S" -o "$tmp/st" taskset -c "$CC_" "$BIN" bench --api raw \
    --url "http://127.0.0.1:$PORT/tiny" --rate inf --max-concurrency "$CONNS" --num-requests "$n" >"$tmp/a.txt" 2>&1
  st_r+=("$(awk '/^Request throughput:/{print $3}' "$tmp/a.txt")")
  st_cpu+=("$(awk -v c="$(tcpu "$tmp/st")" -v n="$n" 'BEGIN{printf "%.2f", c*1e6/n}')")
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
if [ ${#wrk_r[@]} -gt 0 ]; then
  echo "(a) wrk:       ${wrk_r[*]} req/s (median $(med "${wrk_r[@]}")); CPU per request ${wrk_cpu[*]} us"
  echo "    [taskset -c $CC_ wrk -t1 -c$CONNS -d${SECS}s http://127.0.0.1:PORT/tiny]"
else
  echo "(a) wrk is not installed (apt-get install wrk): no comparison"
fi
echo "(a) servetune: ${st_r[*]} req/s (median $(med "${st_r[@]}")); CPU per request ${st_cpu[*]} us (whole process, table output, no JSON)"
echo "    [taskset -c $CC_ $BIN bench --api raw --url http://127.0.0.1:PORT/tiny --rate inf --max-concurrency $CONNS --num-requests N]"
[ ${#wrk_r[@]} -gt 0 ] && awk -v a="$(med "${st_r[@]}")" -v b="$(med "${wrk_r[@]}")" -v c="$(med "${wrk_cpu[@]}")" -v d="$(med "${st_cpu[@]}")" \
  'BEGIN{printf "(a) ratio servetune/wrk: rate %.3f (target >= 0.8); CPU per request %.2f\n", a/b, d/c}'
echo "    (both: one client thread, $CONNS keep-alive connections, closed loop against the same one-core server;"
echo "     servetune also keeps a full per-request record)"
stop_server
echo

# ---- (b) streaming capacity on one core ----
tok=$(awk -v s="$SECS" -v i="$ITL_MS" 'BEGIN{printf "%d", s*1000/i}')
rate=$(awk -v n="$STREAMS" 'BEGIN{printf "%d", n/2}')   # all streams open within 2 s
start_server --itl-us $((ITL_MS * 1000))
args=(--url "http://127.0.0.1:$PORT" --model bench --input-tokens 16 --output-tokens "$tok" --num-requests "$STREAMS" --rate "$rate" --arrival constant --timeout 120)
echo "(b) $STREAMS streams, $tok tokens each at ${ITL_MS} ms ITL (offered $(awk -v n="$STREAMS" -v i="$ITL_MS" 'BEGIN{printf "%d", n*1000/i}') events/s at full overlap)"
echo "    [taskset -c $CC_ $BIN bench ${args[*]}]"
rss_big=$(run_client "$tmp/b.json" "${args[@]}")
tail -1 "$tmp/client.out" | sed 's/^/    servetune /'
echo "    completed $(j "$tmp/b.json" summary.requests.completed)/$STREAMS, max open streams $(j "$tmp/b.json" self_check.max_in_flight), connections opened $(j "$tmp/b.json" self_check.connections_opened)"
echo "    token events/s: whole run $(j "$tmp/b.json" summary.throughput.output_tokens_per_s), steady window $(j "$tmp/b.json" summary.steady_state.throughput.output_tokens_per_s)"
echo "    while all $STREAMS streams were open: $("$JGET" "$tmp/b.json" --overlap-events | awk '{printf "%d events in %.2f s = %d events/s", $1, $2, $3}')"
echo "    client lag (sent - scheduled) p99 $(j "$tmp/b.json" summary.latency_ms.client_lag.p99) ms; dispatch lag p99 $(j "$tmp/b.json" self_check.dispatch_lag_ms.p99) ms; event-loop delay p99 $(j "$tmp/b.json" self_check.loop_delay_ms.p99) ms"
echo "    ITL p50 $(j "$tmp/b.json" summary.latency_ms.itl.p50) ms p99 $(j "$tmp/b.json" summary.latency_ms.itl.p99) ms (server sends every ${ITL_MS} ms)"
stop_server
start_server --itl-us $((ITL_MS * 1000))
small=10
rss_small=$(run_client "$tmp/b0.json" --url "http://127.0.0.1:$PORT" --model bench --input-tokens 16 --output-tokens "$tok" --num-requests $small --rate 5 --arrival constant --timeout 120)
stop_server
awk -v b="$rss_big" -v s="$rss_small" -v n="$STREAMS" -v m="$small" 'BEGIN{printf "    memory: peak RSS %d kB with %d streams, %d kB with %d: %.1f kB per open stream (records with all token times included)\n", b, n, s, m, (b-s)/(n-m)}'
echo

# ---- (b2) the same offered events/s, 4 events per write ----
# One event per TCP segment makes (b) a measure of the kernel's per-segment cost on both sides
# as much as of the client. Here the server writes 4 events at a time every 4 x ITL_MS (as an
# engine does when several tokens are ready together): 5 events per write every 4 x ITL_MS,
# so 25 % more events than (b) in a fifth of the segments, and the client's own per-event
# work shows.
start_server --itl-us $((ITL_MS * 4000)) --burst 5
args=(--url "http://127.0.0.1:$PORT" --model bench --input-tokens 16 --output-tokens "$tok" --num-requests "$STREAMS" --rate "$rate" --arrival constant --timeout 120)
echo "(b2) $STREAMS streams, $tok tokens each, 5 events per write every $((ITL_MS * 4)) ms (offered $(awk -v n="$STREAMS" -v i="$ITL_MS" 'BEGIN{printf "%d", n*1250/i}') events/s at full overlap)"
echo "    [server: stream_server --burst 5; client: taskset -c $CC_ $BIN bench ${args[*]}]"
run_client "$tmp/b2.json" "${args[@]}" >/dev/null
tail -1 "$tmp/client.out" | sed 's/^/    servetune /'
echo "    completed $(j "$tmp/b2.json" summary.requests.completed)/$STREAMS, max open streams $(j "$tmp/b2.json" self_check.max_in_flight)"
echo "    token events/s: whole run $(j "$tmp/b2.json" summary.throughput.output_tokens_per_s), steady window $(j "$tmp/b2.json" summary.steady_state.throughput.output_tokens_per_s)"
echo "    while all $STREAMS streams were open: $("$JGET" "$tmp/b2.json" --overlap-events | awk '{printf "%d events in %.2f s = %d events/s", $1, $2, $3}')"
echo "    client lag p99 $(j "$tmp/b2.json" summary.latency_ms.client_lag.p99) ms; dispatch lag p99 $(j "$tmp/b2.json" self_check.dispatch_lag_ms.p99) ms; event-loop delay p99 $(j "$tmp/b2.json" self_check.loop_delay_ms.p99) ms"
stop_server
echo

# ---- (c) timing truth at half the load (b) actually delivered ----
# (b) offers STREAMS x 1000/ITL_MS events/s; what the pair delivered (its steady-state token
# events/s) is the maximum load here, and (c) keeps half of it in flight.
ach=$(j "$tmp/b.json" summary.steady_state.throughput.output_tokens_per_s)
half=$(awk -v a="$ach" -v i="$ITL_MS" -v n="$STREAMS" 'BEGIN{h=int(a*i/1000/2); if (h<10 || h>n/2) h=int(n/2); print h}')
rate=$half   # opened over about 2 s, as in (b)
truth() { # label, extra client args...
  local label=$1; shift
  start_server --itl-us $((ITL_MS * 1000)) --record "$tmp/first.txt"
  args=(--url "http://127.0.0.1:$PORT" --model bench --input-tokens 16 --output-tokens "$tok" --num-requests "$half" --rate "$((rate / 2))" --arrival poisson --timeout 120 "$@")
  echo "    $label [taskset -c $CC_ $BIN bench ${args[*]}]"
  run_client "$tmp/c.json" "${args[@]}" >/dev/null
  stop_server
  t0=$("$JGET" "$tmp/c.json" t0_mono_ns)
  "$JGET" "$tmp/c.json" --first-tokens >"$tmp/client_ft.txt"
  awk -v t0="$t0" 'NR==FNR{srv[$1]=$2; next} ($1 in srv){printf "%.3f\n", (t0 + $2 - srv[$1]) / 1000.0}' "$tmp/first.txt" "$tmp/client_ft.txt" | sort -n >"$tmp/diff.txt"
  cnt=$(wc -l <"$tmp/diff.txt")
  if [ "$cnt" -gt 0 ]; then
    pct() { awk -v p="$1" -v n="$cnt" 'BEGIN{k=int((n-1)*p/100)+1} NR==k{print; exit}' "$tmp/diff.txt"; }
    echo "      $cnt requests: p50 $(pct 50) us, p90 $(pct 90) us, p99 $(pct 99) us, max $(tail -1 "$tmp/diff.txt") us (target p99 <= 200 us)"
    echo "      client lag p99 $(j "$tmp/c.json" summary.latency_ms.client_lag.p99) ms, event-loop delay p99 $(j "$tmp/c.json" self_check.loop_delay_ms.p99) ms"
  else
    echo "      no matching records"
  fi
}
echo "(c) $half streams (half of the $ach events/s delivered in (b)), Poisson arrivals: client first-token read time minus server first-token write time"
truth "sleeping in epoll between events (default):"
# With --spin-us at or above the 5 ms self-check probe period the client never sleeps: the
# read timestamps no longer include the wake-up latency of an idle CPU (large on VMs).
truth "busy-polling (--spin-us 6000):" --spin-us 6000
