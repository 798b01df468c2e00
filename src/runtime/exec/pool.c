/*
 * pool.c — a persistent pthreads pool that runs a compiled kernel over
 * fixed-size chunks of its loop dim 0.
 *
 * Determinism: chunk boundaries depend only on the kernel, and loop dim 0
 * is never a reduced dim (passes/schedule.c), so every output element is
 * computed by one call in one fixed order: results are bitwise identical
 * for any thread count. Workers take chunks from an atomic counter, so a
 * core that another process holds simply takes fewer chunks (no barrier
 * waits for the slowest thread). One kernel runs on the pool at a time; a
 * second caller (another thread realizing concurrently) runs its kernel
 * inline.
 *
 * Waiting: a training step is many short kernels (W10a: 110 split jobs
 * in a step of ~35 ms), and waking a thread asleep on a condition variable
 * (a futex wake, then the sleeping core's wake-up) can take as long as a
 * small kernel's share. So an idle worker first spins (with a pause
 * instruction) watching for the next job, and so does the caller waiting
 * for the workers still in a job; only then do they sleep. Each spin is
 * bounded and adapts (spin_until), so that an idle pool, or one on
 * oversubscribed cores, gives its core back. GEMMs run OpenBLAS at one
 * thread on this pool (kernels/blas.c), so no OpenBLAS thread of ours
 * spins against it. Spin 0 (env RLX_POOL_SPIN=0) is the old behaviour:
 * sleep at once.
 *
 * The job lives in P (not on the caller's stack) and one atomic word holds
 * its generation, its thread limit and the workers inside it: a worker
 * joins with a compare-and-swap that checks all three, so it can never
 * join a job that has closed or one that is full; the caller closes the
 * job (odd generation to even) only when no worker is inside.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/exec/pool.h"

enum { POOL_MAX = 64 };

/* The longest spin before sleeping: well above the gaps between the split
 * kernels of a step (a few small inline kernels, ~20 us on average in
 * W10a), short enough that an idle pool soon stops using a core.
 * bench/bench_threads.c compares it with spin 0 (--spins for others). */
enum { SPIN_NS_DEFAULT = 200000 };

/* state: gen << 16 | max << 8 | active. A job is open while gen is odd. */
#define ST_ACTIVE(s) ((int)((s)&0xff))
#define ST_MAX(s) ((int)(((s) >> 8) & 0xff))
#define ST_GEN(s) ((s) >> 16)

typedef struct {
    rt_pool_fn fn;
    void *const *bufs;
    const double *consts;
    int64_t n, chunk;
    long nchunks;
    atomic_long next;
} job;

static struct {
    pthread_mutex_t busy, lock;
    pthread_cond_t wake, finished;
    job j;                        /* written by the caller only while the job is closed */
    _Atomic uint64_t state;
    atomic_int sleepers;          /* workers asleep (or about to be) on wake */
    atomic_int caller_waits;      /* the caller asleep (or about to be) on finished */
    atomic_long spin_ns;          /* < 0: not read from the environment yet */
    long caller_spin;             /* the caller's spin budget (spin_until), guarded by busy */
    atomic_ulong jobs, joins;     /* counters (rt_pool_counts) */
    int nworkers;                 /* guarded by lock */
} P = {.busy = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
       .finished = PTHREAD_COND_INITIALIZER, .spin_ns = -1};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static long spin_ns(void)
{
    long s = atomic_load_explicit(&P.spin_ns, memory_order_relaxed);
    if (s < 0) {
        const char *env = getenv("RLX_POOL_SPIN"); /* microseconds */
        char *end;
        long us = env && *env ? strtol(env, &end, 10) : -1;
        s = us >= 0 && us <= 1000000 && !*end ? us * 1000 : SPIN_NS_DEFAULT;
        atomic_store(&P.spin_ns, s);
    }
    return s;
}

void rt_pool_set_spin_us(long us) { atomic_store(&P.spin_ns, us < 0 ? -1 : us * 1000); }

void rt_pool_counts(uint64_t *jobs, uint64_t *joins)
{
    *jobs = atomic_load_explicit(&P.jobs, memory_order_relaxed);
    *joins = atomic_load_explicit(&P.joins, memory_order_relaxed);
}

/* A gap this long between two looks at the clock while spinning means the
 * spinner lost its core: the machine has more runnable threads than cores,
 * and spinning on would only take time from the thread it waits for. */
enum { PREEMPTED_NS = 30000, SPIN_MIN_NS = 2000 };

/* Spins until done(arg), true if it became so, for at most *budget ns
 * (within [SPIN_MIN_NS, spin_ns()]), which adapts to what spinning got:
 * a spin that ended in time doubles it, one that timed out or was
 * preempted halves it. So where jobs follow each other closely (many
 * short kernels) the waits stay spins, and where they are far apart or
 * the cores are oversubscribed they become sleeps at once. */
static bool spin_until(bool (*done)(const void *), const void *arg, long *budget)
{
    long limit = spin_ns();
    if (limit <= 0)
        return done(arg);
    long b = *budget <= 0 || *budget > limit ? limit : *budget < SPIN_MIN_NS ? SPIN_MIN_NS : *budget;
    int64_t t0 = now_ns(), last = t0;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (done(arg)) {
                *budget = 2 * b;
                return true;
            }
            cpu_relax();
        }
        int64_t t = now_ns();
        if (t - t0 >= b || t - last >= PREEMPTED_NS) {
            *budget = b / 2;
            return done(arg);
        }
        last = t;
    }
}

/* Runs chunks until none is left; how many it ran. */
static long run_chunks(job *j)
{
    for (long ran = 0;; ran++) {
        long c = atomic_fetch_add(&j->next, 1);
        if (c >= j->nchunks)
            return ran;
        int64_t lo = c * j->chunk, hi = lo + j->chunk < j->n ? lo + j->chunk : j->n;
        j->fn(j->bufs, j->consts, lo, hi);
    }
}

/* A job this worker has not seen is open. Sequentially consistent, as in
 * no_worker_inside: a thread going to sleep stores its flag (sleepers,
 * caller_waits) then reads the state, the other side changes the state
 * then reads the flag, so one of the two sees the other. */
static bool job_after(const void *seen)
{
    uint64_t g = ST_GEN(atomic_load(&P.state));
    return g != *(const uint64_t *)seen && (g & 1);
}

static void *worker(void *arg)
{
    (void)arg;
    uint64_t seen = 0; /* generations are odd while open: 0 is none */
    long budget = 0;   /* this worker's spin (spin_until) */
    for (;;) {
        if (!spin_until(job_after, &seen, &budget)) {
            pthread_mutex_lock(&P.lock);
            atomic_fetch_add(&P.sleepers, 1); /* then the state is read: pairs with rt_pool_run's order */
            while (!job_after(&seen))
                pthread_cond_wait(&P.wake, &P.lock);
            atomic_fetch_sub(&P.sleepers, 1);
            pthread_mutex_unlock(&P.lock);
        }
        uint64_t s = atomic_load(&P.state);
        seen = ST_GEN(s);
        while (ST_GEN(s) == seen && ST_ACTIVE(s) < ST_MAX(s)) {
            if (atomic_compare_exchange_weak(&P.state, &s, s + 1)) {
                if (run_chunks(&P.j) > 0)
                    atomic_fetch_add_explicit(&P.joins, 1, memory_order_relaxed);
                uint64_t prev = atomic_fetch_sub(&P.state, 1); /* then caller_waits is read */
                if (ST_ACTIVE(prev) == 1 && atomic_load(&P.caller_waits)) {
                    pthread_mutex_lock(&P.lock);
                    pthread_cond_broadcast(&P.finished);
                    pthread_mutex_unlock(&P.lock);
                }
                break;
            }
        }
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

static bool no_worker_inside(const void *arg)
{
    (void)arg;
    return ST_ACTIVE(atomic_load(&P.state)) == 0;
}

void rt_pool_run(rt_pool_fn fn, void *const *bufs, const double *consts, int64_t n, int64_t chunk, int nthreads)
{
    long nchunks = chunk > 0 ? (long)((n + chunk - 1) / chunk) : 1;
    if (nthreads <= 1 || nchunks <= 1 || pthread_mutex_trylock(&P.busy) != 0) {
        fn(bufs, consts, 0, n); /* same values as any split: dim 0 is never reduced */
        return;
    }
    int helpers = nthreads - 1 < POOL_MAX ? nthreads - 1 : POOL_MAX;
    if (helpers > nchunks - 1)
        helpers = (int)(nchunks - 1); /* the caller takes a chunk too */
    pthread_mutex_lock(&P.lock);
    grow(helpers);
    pthread_mutex_unlock(&P.lock);
    /* the job is closed (even generation, no worker inside): ours to fill */
    P.j = (job){.fn = fn, .bufs = bufs, .consts = consts, .n = n, .chunk = chunk, .nchunks = nchunks};
    atomic_init(&P.j.next, 0);
    uint64_t s = atomic_load(&P.state), gen = ST_GEN(s) + 1;
    atomic_store(&P.state, gen << 16 | (uint64_t)helpers << 8); /* open; then sleepers is read */
    atomic_fetch_add_explicit(&P.jobs, 1, memory_order_relaxed);
    if (atomic_load(&P.sleepers) > 0) {
        pthread_mutex_lock(&P.lock);
        pthread_cond_broadcast(&P.wake);
        pthread_mutex_unlock(&P.lock);
    }
    run_chunks(&P.j); /* the caller works too; when it returns every chunk is taken */
    /* close: once no worker is inside (a late one may still join an
     * exhausted job and leave at once) */
    uint64_t open = gen << 16 | (uint64_t)helpers << 8;
    while (!atomic_compare_exchange_strong(&P.state, &open, (gen + 1) << 16)) {
        open = gen << 16 | (uint64_t)helpers << 8;
        if (spin_until(no_worker_inside, NULL, &P.caller_spin))
            continue;
        pthread_mutex_lock(&P.lock);
        atomic_store(&P.caller_waits, 1); /* then the state is read: pairs with the worker's order */
        while (!no_worker_inside(NULL))
            pthread_cond_wait(&P.finished, &P.lock);
        atomic_store(&P.caller_waits, 0);
        pthread_mutex_unlock(&P.lock);
    }
    pthread_mutex_unlock(&P.busy);
}
