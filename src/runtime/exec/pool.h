/*
 * pool.h — the threads and the large buffers every part of the runtime
 * shares: the persistent thread pool (pool.c) and the recycling buffer
 * pool (bufpool.c). The oracle and the library kernels include this
 * header only, never the executor's (jit_exec.h).
 */
#ifndef RLX_POOL_H
#define RLX_POOL_H

#include "runtime/rt.h"

/* A loop body over [begin, end) of loop dim 0: a compiled kernel
 * (cg_kernel_fn has this signature) or a library kernel's chunk. */
typedef void (*rt_pool_fn)(void *const *bufs, const double *consts, int64_t begin, int64_t end);

/* pool.c: runs fn(bufs, consts, ...) over [0, n) of loop dim 0 in chunks
 * of chunk rows on up to nthreads threads (the caller included), then
 * returns. */
void rt_pool_run(rt_pool_fn fn, void *const *bufs, const double *consts, int64_t n, int64_t chunk, int nthreads);
/* How long an idle worker, or the caller waiting for workers, spins before
 * it sleeps (pool.c); 0: sleep at once (the old pool), < 0: the default
 * or env RLX_POOL_SPIN (microseconds). For benchmarks and tests. */
void rt_pool_set_spin_us(long us);
/* Split jobs run so far, and the joins of a worker that took a chunk of
 * one (one per worker and job: at 2 threads, the jobs a worker helped). */
void rt_pool_counts(uint64_t *jobs, uint64_t *joins);

/* bufpool.c: payload buffers of at least RT_BUFPOOL_MIN bytes for kernel
 * outputs, arenas and scratch, recycled (not given back to the OS) when
 * their storage dies, so a repeated run faults no page in: from 1 MiB
 * 2 MiB-aligned and huge-page advised, below that in size classes (at
 * most 25% over the request). 64-byte aligned. NULL when out of memory. */
#define RT_BUFPOOL_MIN ((size_t)4 << 10)
ir_storage *rt_bufpool_storage(size_t bytes);
/* Whether rt_bufpool_storage made st. */
bool rt_bufpool_made(const ir_storage *st);

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
