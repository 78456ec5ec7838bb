#!/usr/bin/env bash
# Figures of servetune audit across a cluster (docs/cluster.md), on this machine:
#   (a) wall time of an audit spec run serially (servetune audit SPEC -o DIR) and through a
#       one-node Slurm cluster (scripts/slurm-local, GPUS fake GPUs: GPUS array tasks at once)
#       with --slurm --wait, and their ratio; both audits' capacities side by side
#   (b) the merge of the cluster run's shards (servetune audit --merge DIR), timed alone
# Asserts nothing. Needs root, Slurm and munge (scripts/install-deps). Only one test cluster
# runs at a time on a machine (the same lock as tests/integration/test_slurm.c).
# Usage: bench/cluster_figures.sh [SPEC]   (default examples/qwen3-8b-h100.yaml)
# Environment: BUILD (build), GPUS (2), CPUS (4).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$PWD/$BUILD/servetune
SPEC=${1:-examples/qwen3-8b-h100.yaml}
GPUS=${GPUS:-2}
CPUS=${CPUS:-4}
[ -x "$BIN" ] || { echo "build first: make"; exit 1; }
tmp=$(mktemp -d /tmp/st_cluster_bench.XXXXXX)
cluster=$tmp/slurm
cleanup() { scripts/slurm-local stop "$cluster" >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT
exec 9>/tmp/servetune-slurm-test.lock
flock -w 600 9 || { echo "another test cluster holds /tmp/servetune-slurm-test.lock"; exit 1; }
scripts/slurm-local start "$cluster" --cpus "$CPUS" --gpus "$GPUS" >/dev/null
export SLURM_CONF=$cluster/slurm.conf

now() { date +%s.%N; }
JGET=$BUILD/bench/jget
[ -x "$JGET" ] || { echo "build first: make bench (bench/jget)"; exit 1; }

echo "spec: $SPEC"
echo "(a) serial: $BIN audit $SPEC -o DIR --quiet"
t0=$(now); "$BIN" audit "$SPEC" -o "$tmp/serial" --quiet >/dev/null || true; t1=$(now)
serial=$(echo "$t1 - $t0" | bc -l)
printf '    %.1f s wall\n' "$serial"
echo "    through Slurm ($GPUS fake GPUs, $CPUS CPUs, one node): $BIN audit $SPEC -o DIR --slurm --wait"
t0=$(now); "$BIN" audit "$SPEC" -o "$tmp/cluster" --slurm --wait >/dev/null 2>&1 || true; t1=$(now)
clus=$(echo "$t1 - $t0" | bc -l)
printf '    %.1f s wall (submission to merged reports); serial / cluster = %.2f\n' "$clus" "$(echo "$serial / $clus" | bc -l)"
echo "    capacity (req/s at the SLO) per configuration: serial, cluster"
cap_of() { # FILE NAME: the configuration's capacity in report.json
  local n j
  for j in $(seq 0 63); do
    n=$("$JGET" "$1" "configurations.$j.name")
    [ "$n" = null ] && { echo "-"; return; }
    [ "$n" = "$2" ] && { "$JGET" "$1" "configurations.$j.capacity.rps"; return; }
  done
}
for i in $(seq 0 63); do
  name=$("$JGET" "$tmp/serial/report.json" "configurations.$i.name")
  [ "$name" = null ] && break
  printf '      %-18s %8s %8s\n' "$name" "$(cap_of "$tmp/serial/report.json" "$name")" \
    "$(cap_of "$tmp/cluster/report.json" "$name")"
done
echo "(b) merge of $(ls "$tmp/cluster/shards" | grep -c '\.sqlite$') shards ($(du -sh "$tmp/cluster/shards" | cut -f1)): $BIN audit --merge DIR"
for i in 1 2 3; do
  t0=$(now); m=$("$BIN" audit --merge "$tmp/cluster" 2>&1 | grep -o 'in [0-9.]* s' | head -1 || true); t1=$(now)
  printf '    run %d: %.3f s wall with the four reports; the merge into results.sqlite alone: %s\n' "$i" \
    "$(echo "$t1 - $t0" | bc -l)" "${m#in }"
done
