/* test_stress.c — four threads build, realize and release graphs at once:
 * sharing realized inputs and unrealized nodes (the same node realized by
 * several threads at the same time), building the same expression (one
 * hash-consed node) and different ones (same and different JIT kernel
 * cache entries), inside nested scopes with escapes, running one shared
 * compiled program and compiling their own, taking gradients, and making
 * errors that must stay on their own thread. On each backend the values
 * must be bitwise those of the same work done on one thread; a third phase
 * switches the backend while the threads run (values then within the
 * JIT's tolerance). Run under ThreadSanitizer by `make test-tsan`.
 *
 * Worker threads never call the harness's CHECK (its counters are not
 * thread-safe): they record failures in their own slot, and the main
 * thread reports them. All library work runs on threads of this file,
 * whose scope stacks start empty (the main thread's holds the harness's
 * scope, into which rlx_escape would move handles). */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "harness.h"

long ir_live_nodes(void);

enum { NT = 4, ITER = 8, NOUT = 1024, NX = 32, NI = 24, NO = 16, NB = 8 };

typedef struct {
    rlx_tensor *X, *W, *B; /* realized, shared by every thread */
    rlx_tensor *V;         /* unrealized, shared, only ever realized inside larger graphs */
    rlx_tensor *S[ITER];   /* unrealized, shared: every thread realizes S[i] in its iteration i */
    rlx_program *prog;     /* compiled once, run by every thread */
} shared;

typedef struct {
    double v[NOUT];
    int n;
} outbuf;

typedef struct {
    shared *sh;
    int t;
    pthread_barrier_t *start;
    outbuf out[ITER];
    char fail[256]; /* the first failure of this thread, "" when none */
} worker;

/* ------------------------------------------------------------- helpers */

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

/* A realized f32 tensor of deterministic values in [-1, 1). */
static rlx_tensor *data(int rank, const int64_t *shape, uint64_t seed)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((double)lcg(&seed) * 0x1p-52 - 1);
    rlx_tensor *t = rlx_from_data(RLX_F32, rank, shape, v);
    free(v);
    return t;
}

static void fail(worker *w, const char *what, int i)
{
    if (!w->fail[0])
        snprintf(w->fail, sizeof w->fail, "thread %d, iteration %d: %s (%s)", w->t, i, what, rlx_last_error());
}

/* Appends the values of t (all of them up to 64, else the sum and the
 * first 16) to out. */
static void append(worker *w, int i, rlx_tensor *t)
{
    outbuf *o = &w->out[i];
    int64_t n = t ? rlx_numel(t) : -1;
    if (n < 0) {
        fail(w, "a result is NULL", i);
        return;
    }
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (rlx_read_f64(t, v, (size_t)n) != RLX_OK) {
        fail(w, "read failed", i);
        free(v);
        return;
    }
    if (n > 64) {
        double s = 0;
        for (int64_t k = 0; k < n; k++)
            s += v[k];
        if (o->n < NOUT)
            o->v[o->n++] = s;
        n = 16;
    }
    for (int64_t k = 0; k < n && o->n < NOUT; k++)
        o->v[o->n++] = v[k];
    free(v);
}

/* Runs fn(arg) on a new thread and waits for it. */
static void on_thread(void *(*fn)(void *), void *arg)
{
    pthread_t th;
    CHECK(pthread_create(&th, NULL, fn, arg) == 0);
    pthread_join(th, NULL);
}

/* On a thread with no scope: rlx_escape hands the handles to the caller. */
static void *make_shared_main(void *arg)
{
    shared *sh = arg;
    rlx_scope_begin();
    sh->X = rlx_escape(data(2, (int64_t[]){NX, NI}, 11));
    sh->W = rlx_escape(data(2, (int64_t[]){NO, NI}, 12));
    sh->B = rlx_escape(data(1, (int64_t[]){NO}, 13));
    sh->V = rlx_escape(rlx_exp(rlx_neg(rlx_mul(sh->X, sh->X))));
    for (int i = 0; i < ITER; i++)
        sh->S[i] = rlx_escape(rlx_add(rlx_sin(rlx_mul_s(sh->X, i + 1)), rlx_cos(sh->X)));
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){NB, NI});
    rlx_tensor *outs[2] = {rlx_softmax(rlx_linear(x, sh->W, sh->B), -1), rlx_sum_all(rlx_mul(x, rlx_tanh(x)))};
    sh->prog = rlx_compile(outs, 2);
    rlx_scope_end();
    return NULL;
}

static void make_shared(shared *sh)
{
    on_thread(make_shared_main, sh);
    CHECK(sh->X && sh->W && sh->B && sh->V && sh->S[ITER - 1] && sh->prog);
}

static void free_shared(shared *sh)
{
    rlx_program_free(sh->prog);
    for (int i = 0; i < ITER; i++)
        rlx_release(sh->S[i]);
    rlx_release(sh->V);
    rlx_release(sh->B);
    rlx_release(sh->W);
    rlx_release(sh->X);
}

/* ------------------------------------------------------------ workload */

/* Iteration i of thread t. Everything it returns is recorded in its own
 * scope; the values it reads go to w->out[i]. */
static void work(worker *w, int i)
{
    shared *sh = w->sh;
    int t = w->t;
    int ax1 = 1, ax0 = 0;
    w->out[i].n = 0;
    rlx_scope_begin();
    rlx_clear_error();
    /* the same unrealized node, realized by every thread at about once */
    if (rlx_realize(sh->S[i]) != RLX_OK)
        fail(w, "realizing a shared node", i);
    /* the same expression in every thread: one node */
    rlx_tensor *y1 = rlx_sum(rlx_relu(rlx_linear(sh->X, sh->W, sh->B)), &ax1, 1, false);
    /* this thread's own expression over shared realized and unrealized nodes */
    double c = 0.1 * (t + 1) + 0.01 * i;
    rlx_tensor *y2 = rlx_mean(rlx_add(rlx_sub(rlx_exp(rlx_mul_s(sh->X, c)), sh->V), sh->S[i]), &ax0, 1, false);
    /* the same for the same i in every thread, from the shared unrealized V */
    rlx_tensor *y3 = rlx_sum_all(rlx_mul(sh->V, sh->S[i]));
    rlx_tensor *ys[3] = {y1, y2, y3};
    if (rlx_realize_many(ys, 3) != RLX_OK)
        fail(w, "realize_many", i);
    append(w, i, y1);
    append(w, i, y2);
    append(w, i, y3);
    /* a nested scope: one handle escapes to the outer scope, the rest go */
    rlx_scope_begin();
    rlx_tensor *z = rlx_escape(rlx_tanh(rlx_add_s(rlx_mul(y2, y2), t)));
    rlx_tensor *dropped = rlx_cumsum(sh->X, 1, false);
    (void)dropped;
    rlx_scope_end();
    append(w, i, z);
    /* a handle escaped twice (to the iteration's scope, then to this
     * thread, which has no other scope) and released by hand */
    rlx_scope_begin();
    rlx_tensor *own = rlx_escape(rlx_max(sh->S[i], &ax1, 1, true));
    rlx_scope_end();
    own = rlx_escape(own);
    append(w, i, own);
    /* the shared program on this thread's rows */
    rlx_tensor *rows = rlx_narrow(sh->X, 0, (t * 8 + i) % (NX - NB), NB);
    rlx_tensor *outs[2] = {NULL, NULL};
    if (rlx_program_run(sh->prog, &(rlx_binding){"x", rows}, 1, outs) != RLX_OK)
        fail(w, "program_run", i);
    append(w, i, outs[0]);
    append(w, i, outs[1]);
    /* a program of its own, compiled, run and freed */
    if (i % 3 == t % 3) {
        rlx_tensor *in = rlx_input("v", RLX_F32, 1, (int64_t[]){NI});
        rlx_tensor *po = rlx_add_s(rlx_mul_s(rlx_relu(in), 2 + t), i);
        rlx_program *p = rlx_compile(&po, 1);
        rlx_tensor *res = NULL;
        if (!p || rlx_program_run(p, &(rlx_binding){"v", rlx_select(sh->S[i], 0, t)}, 1, &res) != RLX_OK)
            fail(w, "own program", i);
        append(w, i, res);
        rlx_program_free(p);
    }
    /* a gradient through shared weights */
    rlx_tensor *loss = rlx_sum_all(rlx_tanh(rlx_linear(rows, sh->W, NULL)));
    rlx_tensor *g = NULL;
    rlx_tensor *wrt[1] = {sh->W};
    if (rlx_grad(loss, wrt, 1, &g) != RLX_OK)
        fail(w, "grad", i);
    append(w, i, g);
    /* an error stays on this thread */
    if (rlx_last_status() != RLX_OK)
        fail(w, "an error was recorded", i);
    rlx_tensor *bad = rlx_add(sh->X, sh->W);
    if (bad || rlx_last_status() != RLX_E_SHAPE || strncmp(rlx_last_error(), "rlx_add:", 8) != 0)
        fail(w, "the error of rlx_add(X, W)", i);
    rlx_clear_error();
    rlx_scope_end();
    rlx_release(own);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int i = 0; i < ITER; i++)
        work(w, i);
    return NULL;
}

/* Runs the workload of every thread: one after another, each on a thread
 * of its own (threads = false), or on NT threads at once. */
static void run_phase(worker *ws, bool threads)
{
    shared sh;
    memset(&sh, 0, sizeof sh);
    make_shared(&sh);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, threads ? NT : 1);
    for (int t = 0; t < NT; t++) {
        memset(&ws[t], 0, sizeof ws[t]);
        ws[t].sh = &sh;
        ws[t].t = t;
        ws[t].start = &start;
    }
    if (threads) {
        pthread_t th[NT];
        for (int t = 0; t < NT; t++)
            CHECK(pthread_create(&th[t], NULL, worker_main, &ws[t]) == 0);
        for (int t = 0; t < NT; t++)
            pthread_join(th[t], NULL);
    } else {
        for (int t = 0; t < NT; t++)
            on_thread(worker_main, &ws[t]);
    }
    pthread_barrier_destroy(&start);
    for (int t = 0; t < NT; t++)
        if (ws[t].fail[0])
            test_fail(__FILE__, __LINE__, "%s", ws[t].fail);
    free_shared(&sh);
}

/* want and got hold the same values: bitwise, or within rtol of the
 * largest magnitude of want. */
static void compare(const worker *got, const worker *want, double rtol, const char *what)
{
    for (int t = 0; t < NT; t++) {
        for (int i = 0; i < ITER; i++) {
            const outbuf *a = &got[t].out[i], *b = &want[t].out[i];
            if (a->n != b->n) {
                test_fail(__FILE__, __LINE__, "%s: thread %d iteration %d read %d values, alone %d", what, t, i, a->n,
                          b->n);
                return;
            }
            double scale = 0;
            for (int k = 0; k < b->n; k++)
                scale = fmax(scale, fabs(b->v[k]));
            for (int k = 0; k < a->n; k++) {
                bool ok = rtol == 0 ? memcmp(&a->v[k], &b->v[k], sizeof a->v[k]) == 0
                                    : test_close(a->v[k], b->v[k], 0, rtol * (scale > 1 ? scale : 1));
                if (!ok) {
                    test_fail(__FILE__, __LINE__, "%s: thread %d iteration %d value %d is %.17g, alone %.17g", what, t,
                              i, k, a->v[k], b->v[k]);
                    return;
                }
            }
        }
    }
}

static worker alone[NT], together[NT], ref_alone[NT];
static bool have_ref_alone;

static void backend_phase(const char *backend)
{
    CHECK(rlx_set_option("backend", backend) == RLX_OK);
    long live = ir_live_nodes();
    /* the threads first: on the JIT this also races its first compiles;
     * RLX_STRESS_REPEAT=n runs the threaded phase n times (more
     * interleavings for the sanitizer) */
    const char *rep = getenv("RLX_STRESS_REPEAT");
    int repeat = rep && atoi(rep) > 0 ? atoi(rep) : 1;
    run_phase(together, true);
    run_phase(alone, false);
    compare(together, alone, 0, backend);
    for (int r = 1; r < repeat; r++) {
        run_phase(together, true);
        compare(together, alone, 0, backend);
    }
    CHECK_EQ_INT(ir_live_nodes(), live);
    rlx_set_option("backend", "ref");
}

TEST(four_threads_reference)
{
    rlx_set_num_threads(4);
    backend_phase("ref");
    memcpy(ref_alone, alone, sizeof alone);
    have_ref_alone = true;
    rlx_set_num_threads(0);
}

static void need_ref_alone(void)
{
    if (have_ref_alone)
        return;
    rlx_set_option("backend", "ref");
    run_phase(ref_alone, false);
    have_ref_alone = true;
}

TEST(four_threads_jit)
{
    need_ref_alone();
    rlx_set_num_threads(4);
    rlx_stats_reset();
    backend_phase("jit");
    rlx_stats_t st;
    rlx_stats(&st);
    CHECK(st.kernels_compiled > 0 && st.cache_hits > 0); /* the JIT ran, and shared its cache */
    compare(alone, ref_alone, 1e-4, "jit against the reference");
    rlx_set_num_threads(0);
}

static atomic_int stop_toggling;

static void *toggler(void *arg)
{
    (void)arg;
    for (int k = 0; !atomic_load(&stop_toggling); k++) {
        rlx_set_option("backend", k & 1 ? "jit" : "ref");
        rlx_set_num_threads(1 + k % 4);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

TEST(four_threads_while_the_backend_changes)
{
    need_ref_alone();
    long live = ir_live_nodes();
    atomic_store(&stop_toggling, 0);
    pthread_t tog;
    CHECK(pthread_create(&tog, NULL, toggler, NULL) == 0);
    run_phase(together, true);
    atomic_store(&stop_toggling, 1);
    pthread_join(tog, NULL);
    rlx_set_option("backend", "ref");
    rlx_set_num_threads(0);
    compare(together, ref_alone, 1e-4, "mixed backends");
    CHECK_EQ_INT(ir_live_nodes(), live);
}

TEST_MAIN(T(four_threads_reference), T(four_threads_jit), T(four_threads_while_the_backend_changes))
