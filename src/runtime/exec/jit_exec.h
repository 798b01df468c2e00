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
    uint64_t arena_bytes;      /* the largest arena of the runs (bytes) */
} rt_jit_stats;

/* A realization prepared once: schedule, memory plan (passes/memplan.c)
 * and the compiled function of every LOOP kernel. slots[0..nslots) are
 * realized placeholder leaves of the graph whose payload a run takes from
 * binds[j] (realized nodes of the same dtype and shape). Kernels missing
 * from the caches compile on up to nthreads threads. The plan borrows
 * roots and slots: they must outlive it. Thread-safe to run concurrently. */
typedef struct rt_jit_plan rt_jit_plan;
rlx_status rt_jit_plan_build(ir_node *const *roots, int nroots, ir_node *const *slots, int nslots, int nthreads,
                             rt_ctx *ctx, rt_jit_stats *stats, rt_jit_plan **out);
/* Runs p; out[r] gets a view (one reference) of root r's value, which may
 * be strided (a root published as a view) or share a binding's storage;
 * every out[r].st is NULL on failure. consts: the constant array to run
 * with (rt_jit_plan_consts' layout), NULL for the plan's own. */
rlx_status rt_jit_plan_run(const rt_jit_plan *p, ir_node *const *binds, const double *consts, int nthreads,
                           rt_ctx *ctx, rt_jit_stats *stats, rt_view *out);
void rt_jit_plan_free(rt_jit_plan *p); /* NULL is a no-op */
size_t rt_jit_plan_arena_bytes(const rt_jit_plan *p);
/* The plan's constant array: *n entries, every LOOP kernel's CONST slots
 * (sched_kernel_consts) in kernel order. */
const double *rt_jit_plan_consts(const rt_jit_plan *p, long *n);
long rt_jit_plan_loops(const rt_jit_plan *p); /* its LOOP kernels */

/* plan_cache.c: realizes every root like rt_ref_realize (realized roots
 * are skipped; a root that is a view of a materialized value shares its
 * storage). Large kernels split their loop dim 0 over nthreads threads
 * (results do not depend on nthreads). A structure realized before runs
 * its cached plan on the new payloads and constants. */
rlx_status rt_jit_realize(ir_node *const *roots, int nroots, int nthreads, rt_ctx *ctx, rt_jit_stats *stats);

/* The plan cache's counters since the process started, and what it holds. */
typedef struct {
    uint64_t hits, misses, built, evicted;
    long entries, nodes; /* held now: entries and their template nodes */
} rt_plan_cache_counts;
void rt_plan_cache_counts_get(rt_plan_cache_counts *out);
/* Drops every entry (a run in progress keeps its own until it ends). */
void rt_plan_cache_clear(void);

/* pool.c: runs fn(bufs, consts, ...) over [0, n) of loop dim 0 in chunks
 * of chunk rows on up to nthreads threads (the caller included), then
 * returns. */
void rt_pool_run(cg_kernel_fn fn, void *const *bufs, const double *consts, int64_t n, int64_t chunk, int nthreads);

/* bufpool.c: payload buffers of at least RT_BUFPOOL_MIN bytes for kernel
 * outputs: 2 MiB-aligned, huge-page advised, recycled (not unmapped) when
 * their storage dies. NULL when out of memory. */
#define RT_BUFPOOL_MIN ((size_t)1 << 20)
ir_storage *rt_bufpool_storage(size_t bytes);

/* The pool's counters since the process started (tests, debugging). */
typedef struct {
    uint64_t mapped, mapped_bytes; /* blocks taken from the OS */
    uint64_t reused;               /* requests served from the free list */
    uint64_t unmapped;             /* blocks given back to the OS */
    uint64_t live_bytes;           /* held by storages now */
    uint64_t cached_bytes;         /* on the free list now */
} rt_bufpool_counts;
void rt_bufpool_counts_get(rt_bufpool_counts *out);
/* Bytes the pool has asked the OS for since the process started (its
 * mapped_bytes): a repeated realization must not make it grow. */
uint64_t rt_bufpool_fresh_bytes(void);

#endif
