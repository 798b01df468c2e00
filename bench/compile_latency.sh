#!/usr/bin/env bash
# Median latency of the first realization of W2 in a fresh process
# (bench_compile.c), over RUNS processes each (default 11):
#   cold: an empty disk cache (LLJIT start + compile + store);
#   warm: the kernel in the disk cache (LLJIT start + load);
#   off:  the disk cache disabled (RLX_CACHE_DIR=), for reference.
#   bench/compile_latency.sh [path/to/rlx-bench-compile]
set -euo pipefail
bin=${1:-build/bench/rlx-bench-compile}
runs=${RUNS:-11}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
cold=$(for _ in $(seq "$runs"); do rm -rf "$dir/c"; RLX_CACHE_DIR=$dir/c "$bin" | cut -d' ' -f1; done | median)
RLX_CACHE_DIR=$dir/c "$bin" >/dev/null
warm=$(for _ in $(seq "$runs"); do RLX_CACHE_DIR=$dir/c "$bin" | cut -d' ' -f1; done | median)
off=$(for _ in $(seq "$runs"); do RLX_CACHE_DIR= "$bin" | cut -d' ' -f1; done | median)
echo "W2 first realization, median of $runs processes: cold ${cold} ms, warm (disk cache) ${warm} ms, cache off ${off} ms"
