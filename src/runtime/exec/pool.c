/*
 * pool.c — a persistent pthreads pool that runs a compiled kernel over
 * fixed-size chunks of its loop dim 0.
 *
 * Determinism: chunk boundaries depend only on the kernel, and loop dim 0
 * is never a reduced dim (passes/schedule.c), so every output element is
 * computed by one call in one fixed order: results are bitwise identical
 * for any thread count. Workers take chunks from an atomic counter, so a
 * core that another process holds simply takes fewer chunks (no barrier
 * waits for the slowest thread). Idle workers sleep on a condition
 * variable. One kernel runs on the pool at a time; a second caller (another
 * thread realizing concurrently) runs its kernel inline.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "runtime/exec/pool.h"

enum { POOL_MAX = 64 };

typedef struct {
    rt_pool_fn fn;
    void *const *bufs;
    const double *consts;
    int64_t n, chunk;
    long nchunks;
    atomic_long next, done;
    int active, max_active; /* workers inside the job, guarded by P.lock */
} job;

static struct {
    pthread_mutex_t lock, busy;
    pthread_cond_t wake, finished;
    job *cur;           /* guarded by lock */
    unsigned long gen;  /* bumped per job, guarded by lock */
    int nworkers;       /* guarded by lock */
} P = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
       NULL, 0, 0};

static void run_chunks(job *j)
{
    for (;;) {
        long c = atomic_fetch_add(&j->next, 1);
        if (c >= j->nchunks)
            return;
        int64_t lo = c * j->chunk, hi = lo + j->chunk < j->n ? lo + j->chunk : j->n;
        j->fn(j->bufs, j->consts, lo, hi);
        if (atomic_fetch_add(&j->done, 1) + 1 == j->nchunks) {
            pthread_mutex_lock(&P.lock);
            pthread_cond_broadcast(&P.finished);
            pthread_mutex_unlock(&P.lock);
        }
    }
}

static void *worker(void *arg)
{
    (void)arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&P.lock);
    for (;;) {
        while (P.gen == seen || !P.cur) {
            seen = P.gen;
            pthread_cond_wait(&P.wake, &P.lock);
        }
        seen = P.gen;
        job *j = P.cur;
        if (j->active >= j->max_active)
            continue; /* the thread count asked for is reached */
        j->active++;
        pthread_mutex_unlock(&P.lock);
        run_chunks(j);
        pthread_mutex_lock(&P.lock);
        if (--j->active == 0)
            pthread_cond_broadcast(&P.finished);
    }
    return NULL;
}

/* Starts workers up to want (lock held); keeps what it could start. */
static void grow(int want)
{
    while (P.nworkers < want && P.nworkers < POOL_MAX) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &at, worker, NULL);
        pthread_attr_destroy(&at);
        if (rc != 0)
            return;
        P.nworkers++;
    }
}

void rt_pool_run(rt_pool_fn fn, void *const *bufs, const double *consts, int64_t n, int64_t chunk, int nthreads)
{
    long nchunks = chunk > 0 ? (long)((n + chunk - 1) / chunk) : 1;
    if (nthreads <= 1 || nchunks <= 1 || pthread_mutex_trylock(&P.busy) != 0) {
        fn(bufs, consts, 0, n); /* same values as any split: dim 0 is never reduced */
        return;
    }
    job j = {.fn = fn, .bufs = bufs, .consts = consts, .n = n, .chunk = chunk, .nchunks = nchunks, .max_active = nthreads - 1};
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    pthread_mutex_lock(&P.lock);
    grow(nthreads - 1);
    P.cur = &j;
    P.gen++;
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.lock);
    run_chunks(&j); /* the caller works too */
    pthread_mutex_lock(&P.lock);
    while (atomic_load(&j.done) < nchunks || j.active > 0)
        pthread_cond_wait(&P.finished, &P.lock);
    P.cur = NULL; /* late workers find no job: j may leave the stack */
    pthread_mutex_unlock(&P.lock);
    pthread_mutex_unlock(&P.busy);
}
