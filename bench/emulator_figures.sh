#!/usr/bin/env bash
# The emulator's own figures, server pinned to core 0, client to core 1:
#  1. --no-model: 5,000 concurrent streams, token events/s
#  2. model on (Qwen3-8B / H100): token emission jitter against the model's schedule
# Usage: bench/emulator_figures.sh [BUILD]   (default build/)
set -u
B=${1:-build}
cd "$(dirname "$0")/.."
run() { # port, client args..., server args...
  local port=$1; shift
  local cargs=$1; shift
  taskset -c 0 "$B/servetune" emulate serve "$@" --host 127.0.0.1 --port "$port" --quiet >/tmp/st-emu-fig.log 2>&1 &
  local pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.05; done
  taskset -c 1 "$B/bench/emu_load" "$port" $cargs
  kill -INT $pid; wait $pid 2>/dev/null
  cat /tmp/st-emu-fig.log
}
echo "== 1. model off, 5000 concurrent streams x 100 tokens, 10000 requests"
run 18701 "5000 10000 100" meta-llama/Meta-Llama-3-8B --gpu H200 --kv-cache-dtype fp8 \
  --max-num-seqs 8192 --max-num-batched-tokens 65536 --no-model --print-jitter
for c in 32 100 500; do
  echo "== 2. model on, Qwen3-8B/H100, $c streams x 200 tokens, jitter"
  run $((18710 + c)) "$c $((c * 2)) 200" Qwen/Qwen3-8B --gpu H100 --print-jitter
done
