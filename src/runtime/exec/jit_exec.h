/*
 * jit_exec.h — the JIT backend's executor (the default backend;
 * RLX_BACKEND=ref selects the oracle): the plan's stages (schedule, memory
 * plan, compile, run), the plan cache, the pool, and the realize pipeline
 * that sequences them (pipeline.c).
 */
#ifndef RLX_JIT_EXEC_H
#define RLX_JIT_EXEC_H

#include "codegen_llvm/cg.h"
#include "runtime/exec/pool.h"
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
 * and the compiled function of every LOOP kernel, made in three stages
 * that the pipeline (pipeline.c) sequences. slots[0..nslots) are realized
 * placeholder leaves of the graph whose payload a run takes from binds[j]
 * (realized nodes of the same dtype and shape). The plan borrows roots and
 * slots: they must outlive it. Thread-safe to run concurrently. Every
 * stage takes the realization's context (options: threads, knobs) and
 * records its failure there. */
typedef struct rt_jit_plan rt_jit_plan;
/* The plan of roots with its schedule (passes/schedule.c); keep: it keeps
 * the schedule's decisions, so that plans of graphs of the same structure
 * with other sizes can be made from it. like[0..nlike) (plans that kept
 * them, most preferred first): the schedule is made from the first whose
 * graph has this one's structure (sched_rebuild; rt_jit_plan_like tells),
 * its unchanged kernels taking that plan's compiled code (it must outlive
 * rt_jit_plan_compile); afresh when none has. */
rlx_status rt_jit_plan_new(rt_ctx *ctx, ir_node *const *roots, int nroots, const rt_jit_plan *const *like,
                           int nlike, bool keep, rt_jit_plan **out);
/* Whether p was made from another plan's decisions (rt_jit_plan_new's like). */
bool rt_jit_plan_like(const rt_jit_plan *p);
const sched_schedule *rt_jit_plan_schedule(const rt_jit_plan *p);
/* The memory plan and the run's tables. */
rlx_status rt_jit_plan_layout(rt_ctx *ctx, rt_jit_plan *p, ir_node *const *slots, int nslots);
/* Every LOOP kernel's function: kernels missing from the caches compile
 * on up to the context's thread count. */
rlx_status rt_jit_plan_compile(rt_ctx *ctx, rt_jit_plan *p, rt_jit_stats *stats);
/* Runs p; out[r] gets a view (one reference) of root r's value, which may
 * be strided (a root published as a view) or share a binding's storage;
 * every out[r].st is NULL on failure. consts: the constant array to run
 * with (rt_jit_plan_consts' layout), NULL for the plan's own. arena: the
 * storage (borrowed, at least rt_jit_plan_arena_bytes, used by no other
 * run meanwhile) its intermediates live in, NULL: the run takes its own.
 * Large kernels split their loop dim 0 over the context's threads
 * (results do not depend on the count). */
rlx_status rt_jit_plan_run(rt_ctx *ctx, const rt_jit_plan *p, ir_node *const *binds, const unsigned char *donate,
                           const double *consts, ir_storage *arena, rt_jit_stats *stats, rt_view *out);
void rt_jit_plan_free(rt_jit_plan *p); /* NULL is a no-op */
/* A profiler (white-box tools only, bench/w10_plan.c --profile): called on
 * the running thread after kernel i of a run of p (with_next: kernel i+1,
 * its GEMM epilogue, ran with it), with the wall and the calling thread's
 * CPU nanoseconds it took. NULL (the default) turns it off; set it while no
 * run is in progress. */
typedef void (*rt_jit_prof_fn)(void *arg, const rt_jit_plan *p, long i, bool with_next, int64_t wall_ns,
                               int64_t cpu_ns);
void rt_jit_set_profiler(rt_jit_prof_fn fn, void *arg);
size_t rt_jit_plan_arena_bytes(const rt_jit_plan *p);
/* The plan's constant array: *n entries, every LOOP kernel's CONST slots
 * (sched_kernel_consts) in kernel order; *from (when from is not NULL) the
 * CONST node of the graph each entry was read from. */
const double *rt_jit_plan_consts(const rt_jit_plan *p, long *n, const ir_node *const **from);
long rt_jit_plan_loops(const rt_jit_plan *p); /* its LOOP kernels */

/* plan_cache.c: plans kept by the structure of the graph (the key), each
 * over a detached template of the graph. The pipeline looks a graph's key
 * up; a structure seen before and not cached gets an entry whose template
 * the plan is then built over (rt_plan_entry_adopt inserts it); a run of
 * an entry binds the graph's realized leaves and CONST values. */
typedef struct rt_plan_entry rt_plan_entry;
typedef struct {
    ir_node **order;
    long count;
    ir_map pos;       /* only above RT_KEY_SMALL nodes */
    unsigned char *kind;
    uint64_t *w;
    size_t n, cap;
    long nconst;
    uint64_t h;
    unsigned char kind_small[32];
    uint64_t w_small[256];
} rt_plan_key;
/* The key of roots under knob epoch; false when the graph is not cached
 * (too large, an unbound input, out of memory). Free it in any case. */
bool rt_plan_key_build(rt_plan_key *k, ir_node *const *roots, int nroots, unsigned long epoch);
void rt_plan_key_free(rt_plan_key *k);
/* The entry of k (retained), or NULL; a miss seen before sets *build. */
rt_plan_entry *rt_plan_cache_find(const rt_plan_key *k, bool *build);
/* A new entry for k: its template, whose roots and slots the plan is built
 * over (*roots, *slots, *nslots). NULL when out of memory (the caller then
 * realizes without the cache). */
rt_plan_entry *rt_plan_entry_new(const rt_plan_key *k, ir_node *const *roots, int nroots, ir_node *const **troots,
                                 ir_node *const **slots, int *nslots);
/* Gives p (taken) to e, maps its constants to the template's CONSTs and
 * inserts e; false when out of memory (e keeps p: release e). */
bool rt_plan_entry_adopt(rt_plan_entry *e, rt_jit_plan *p);
const rt_jit_plan *rt_plan_entry_plan(const rt_plan_entry *e);
/* Sizes of a run's bindings and constants. */
void rt_plan_entry_sizes(const rt_plan_entry *e, int *nslots, long *nconsts);
/* The bindings and constant values of a run of e on k's graph. */
void rt_plan_entry_bind(const rt_plan_entry *e, const rt_plan_key *k, ir_node **binds, double *consts);
void rt_plan_entry_release(rt_plan_entry *e); /* NULL is a no-op */

/* The plan cache's counters since the process started, and what it holds. */
typedef struct {
    uint64_t hits, misses, built, evicted;
    long entries, nodes; /* held now: entries and their template nodes */
} rt_plan_cache_counts;
void rt_plan_cache_counts_get(rt_plan_cache_counts *out);
/* The bytes the plan cache holds now (estimated: plan_cache.c entry_bytes). */
size_t rt_plan_cache_bytes(void);
/* Drops every entry (a run in progress keeps its own until it ends). */
void rt_plan_cache_clear(void);

#endif
