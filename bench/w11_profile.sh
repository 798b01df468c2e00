#!/usr/bin/env bash
# Splits a W11 decode token by where its samples fall (perf): the gemv
# (librlx's row kernel, or OpenBLAS under the knob gemv 1), the attention
# kernel (src/runtime/kernels/attention.c), the planner's own passes (a new binding: instantiate, schedule, memory plan;
# the node and hash-table work they call counts in the rest), the JIT's
# fused kernels, and the rest (runtime, libc, kernel).
#   bench/w11_profile.sh build/bench/rlx-bench-w11 [bucket] [rounds]
set -euo pipefail
bin=${1:?usage: w11_profile.sh path/to/rlx-bench-w11 [bucket] [rounds]}
bucket=${2:-32}
rounds=${3:-10}
data=$(mktemp /tmp/w11prof.XXXXXX)
trap 'rm -f "$data" "$data.old"' EXIT
perf record -q -o "$data" "$bin" --profile "$bucket" --rounds "$rounds"
perf report -i "$data" --no-children --sort dso,sym --percent-limit 0 2>/dev/null | awk '
  /^#/ || !/%/ { next }
  { pct = $1; sub(/%/, "", pct); dso = $2; sym = $NF }
  sym == "llama_init" || dso ~ /^ld-linux/ || dso ~ /libLLVM/ { setup += pct; next }
  dso ~ /openblas/ { c["gemv (OpenBLAS)"] += pct; next }
  sym ~ /^gemv_rows/ { c["gemv (librlx)"] += pct; next }
  sym ~ /^(dot_rows_f32|axpy_rows_f32|mm_f32|mm_f64|max_row_f32|scale_row_f32|exp_row_f32|max_row_f64|exp_row_f64|gemm|fold_row|mask_keeps|block_visible|mask_row|mask_cols|run_item|run_chunk|operand_of|rt_eval_attention)/ { c["attention"] += pct; next }
  sym ~ /^(instantiate|sched_|schedule|plan_|memplan|lower|rowplan|liveness|simplify)/ { c["planning"] += pct; next }
  dso ~ /JIT/ { c["fused JIT kernels"] += pct; next }
  { c["rest (runtime, libc, kernel, bench)"] += pct }
  END {
    total = 0; for (k in c) total += c[k]
    for (k in c) printf "  %-38s %5.1f%%\n", k, 100 * c[k] / total
    printf "  (setup samples left out: %.1f%%)\n", setup
  }'
