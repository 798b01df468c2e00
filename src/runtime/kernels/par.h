/*
 * par.h — parallel loops of the library evaluators (fft, conv2d, pools)
 * over the thread pool (pool.c), each chunk with a private scratch slot.
 *
 * The pool runs at most nthreads chunks at once (its workers plus the
 * caller), so nthreads slots, allocated by the caller before the loop,
 * always leave one free: a chunk claims the first free slot with an atomic
 * exchange and frees it when done. Nothing is allocated inside the loop, so
 * an out-of-memory failure is reported by the caller, never by a worker.
 * Items only write their own outputs, so results do not depend on the
 * thread count.
 */
#ifndef RLX_RT_PAR_H
#define RLX_RT_PAR_H

#include <stdatomic.h>

#include "runtime/exec/pool.h"

enum { RT_PAR_MAX = 65 }; /* pool.c's 64 workers and the caller */

/* RT_SIMD: vector clones of a hot loop for the hosts that have them (the
 * library is built for the baseline ISA), chosen once by an ifunc. Not
 * under sanitizers: their runtime is not ready when ifunc resolvers run. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define RT_NO_CLONES 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RT_NO_CLONES 1
#endif
#if defined(__GNUC__) && defined(__x86_64__) && defined(__has_attribute) && !defined(RT_NO_CLONES)
#if __has_attribute(target_clones)
#define RT_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef RT_SIMD
#define RT_SIMD
#endif

typedef void (*rt_par_fn)(const void *task, int64_t begin, int64_t end, void *scratch);

typedef struct {
    rt_par_fn fn;
    const void *task;
    char *scratch;     /* nslots * slot_bytes */
    size_t slot_bytes;
    int nslots;
    atomic_int busy[RT_PAR_MAX];
} rt_par;

/* How many slots (and threads) a loop of nitems items in chunks of chunk
 * should use: the realization's thread count, capped by the chunks there are. */
static inline int rt_par_slots(const rt_ctx *ctx, int64_t nitems, int64_t chunk)
{
    int64_t nchunks = chunk > 0 ? (nitems + chunk - 1) / chunk : 1;
    int t = rt_threads(ctx);
    if (t > RT_PAR_MAX)
        t = RT_PAR_MAX;
    if (nchunks < t)
        t = nchunks > 0 ? (int)nchunks : 1;
    return t;
}

static inline void rt_par_chunk(void *const *bufs, const double *consts, int64_t begin, int64_t end)
{
    rt_par *p = bufs[0];
    (void)consts;
    int s = 0;
    while (atomic_exchange(&p->busy[s], 1))
        s = s + 1 < p->nslots ? s + 1 : 0;
    p->fn(p->task, begin, end, p->scratch + (size_t)s * p->slot_bytes);
    atomic_store(&p->busy[s], 0);
}

/* Runs fn(task, b, e, scratch) over [0, nitems) in chunks of chunk items
 * on nslots threads; scratch holds nslots slots of slot_bytes each. */
static inline void rt_par_run(rt_par_fn fn, const void *task, int64_t nitems, int64_t chunk, void *scratch,
                              size_t slot_bytes, int nslots)
{
    rt_par p = {.fn = fn, .task = task, .scratch = scratch, .slot_bytes = slot_bytes, .nslots = nslots};
    for (int s = 0; s < RT_PAR_MAX; s++)
        atomic_init(&p.busy[s], 0);
    void *bufs[1] = {&p};
    rt_pool_run(rt_par_chunk, bufs, NULL, nitems, chunk, nslots);
}

#endif
