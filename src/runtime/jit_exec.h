/*
 * jit_exec.h — the JIT backend's executor (selected by RLX_BACKEND=jit
 * until it covers every op): schedule, compile (cached), run, publish.
 */
#ifndef RLX_JIT_EXEC_H
#define RLX_JIT_EXEC_H

#include "codegen_llvm/cg.h"
#include "runtime/rt.h"

/* What one realization did, for rlx_stats. */
typedef struct {
    uint64_t kernels_run;      /* LOOP kernels and REF (reference) kernels run */
    uint64_t kernels_compiled; /* compiled now (cache misses that succeeded) */
    uint64_t cache_hits, cache_misses;
    double compile_seconds;
} rt_jit_stats;

/* Realizes every root like rt_ref_realize (realized roots are skipped; a
 * root that is a view of a materialized value shares its storage). Large
 * kernels split their loop dim 0 over nthreads threads (results do not
 * depend on nthreads). */
rlx_status rt_jit_realize(ir_node *const *roots, int nroots, int nthreads, rt_ctx *ctx, rt_jit_stats *stats);

/* pool.c: runs fn over [0, n) of loop dim 0 in chunks of chunk rows on up
 * to nthreads threads (the caller included), then returns. */
void rt_pool_run(cg_kernel_fn fn, void *const *bufs, int64_t n, int64_t chunk, int nthreads);

/* True when env RLX_BACKEND selects the JIT. */

#endif
