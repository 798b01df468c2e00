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
 * A second workload realizes the library kernels (fused attention with
 * every mask, FFT of power-of-two and other lengths, conv2d, pooling) the
 * same way, and runs one shared compiled attention program; its JIT
 * phases go through the disk cache (a temporary RLX_CACHE_DIR set before
 * the first compile): threads compile and store the same kernels at once,
 * then, with the in-memory cache emptied, load them at once.
 *
 * Worker threads never call the harness's CHECK (its counters are not
 * thread-safe): they record failures in their own slot, and the main
 * thread reports them. All library work runs on threads of this file,
 * whose scope stacks start empty (the main thread's holds the harness's
 * scope, into which rlx_escape would move handles). */
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#include "codegen_llvm/cg.h"

long ir_live_nodes(void);
void rt_plan_cache_clear(void); /* internal: runtime/exec/jit_exec.h */

enum { NT = 4, ITER = 8, NOUT = 1024, NX = 32, NI = 24, NO = 16, NB = 8 };

typedef struct {
    rlx_tensor *X, *W, *B; /* realized, shared by every thread */
    rlx_tensor *V;         /* unrealized, shared, only ever realized inside larger graphs */
    rlx_tensor *S[ITER];   /* unrealized, shared: every thread realizes S[i] in its iteration i */
    rlx_program *prog;     /* compiled once, run by every thread */
    /* the library-kernel workload (lib_phase): realized and shared */
    rlx_tensor *Q, *K, *KV, *KM, *IMG, *CW, *CB, *SIG;
} shared;

/* Which workload the phases run: work() or work_lib(). */
static bool lib_phase;
enum { AB = 2, ASQ = 8, ASK = 12, AH = 2, AD = 8, CN = 2, CC = 4, CHW = 10, CO = 6, FR = 3, FN = 24 };

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
    if (lib_phase) {
        sh->Q = rlx_escape(data(3, (int64_t[]){AB, ASQ, AH * AD}, 21));
        sh->K = rlx_escape(data(3, (int64_t[]){AB, ASK, AH * AD}, 22));
        sh->KV = rlx_escape(data(3, (int64_t[]){AB, ASK, AH * AD}, 23));
        unsigned char km[AB * ASK];
        for (int k = 0; k < AB * ASK; k++)
            km[k] = (k * 7 + 3) % 5 != 0;
        km[ASK] = km[ASK + 1] = 1; /* not every key of the second batch dropped */
        sh->KM = rlx_escape(rlx_from_data(RLX_BOOL, 2, (int64_t[]){AB, ASK}, km));
        sh->IMG = rlx_escape(data(4, (int64_t[]){CN, CC, CHW, CHW}, 24));
        sh->CW = rlx_escape(data(4, (int64_t[]){CO, CC, 3, 3}, 25));
        sh->CB = rlx_escape(data(1, (int64_t[]){CO}, 26));
        sh->SIG = rlx_escape(data(2, (int64_t[]){FR, 2 * FN}, 27));
        /* the shared program: causal attention of the bound queries, the
         * spectrum of the bound signal, a strided conv of the bound image */
        rlx_tensor *q = rlx_input("q", RLX_F32, 3, (int64_t[]){AB, ASQ, AH * AD});
        rlx_tensor *sg = rlx_input("s", RLX_F32, 2, (int64_t[]){FR, 2 * FN});
        rlx_tensor *im = rlx_input("im", RLX_F32, 4, (int64_t[]){CN, CC, CHW, CHW});
        rlx_tensor *outs[3] = {rlx_attention(q, sh->K, sh->KV, AH, AD, RLX_MASK_CAUSAL, 0), rlx_fft(sg),
                               rlx_conv2d(im, sh->CW, sh->CB, (int[]){2, 2}, (int[]){1, 1}, NULL, 1)};
        sh->prog = rlx_compile(outs, 3);
    } else {
        rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){NB, NI});
        rlx_tensor *outs[2] = {rlx_softmax(rlx_linear(x, sh->W, sh->B), -1), rlx_sum_all(rlx_mul(x, rlx_tanh(x)))};
        sh->prog = rlx_compile(outs, 2);
    }
    rlx_scope_end();
    return NULL;
}

static void make_shared(shared *sh)
{
    on_thread(make_shared_main, sh);
    CHECK(sh->X && sh->W && sh->B && sh->V && sh->S[ITER - 1] && sh->prog);
    if (lib_phase)
        CHECK(sh->Q && sh->K && sh->KV && sh->KM && sh->IMG && sh->CW && sh->CB && sh->SIG);
}

static void free_shared(shared *sh)
{
    rlx_tensor *lib[] = {sh->Q, sh->K, sh->KV, sh->KM, sh->IMG, sh->CW, sh->CB, sh->SIG};
    for (size_t k = 0; k < sizeof lib / sizeof *lib; k++)
        rlx_release(lib[k]); /* NULL outside lib_phase: a no-op */
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

/* Iteration i of thread t in the library-kernel workload: expressions the
 * same in every thread (one node, one kernel), the same structure with
 * other constants, and shapes of this thread's own (other kernels). */
static void work_lib(worker *w, int i)
{
    shared *sh = w->sh;
    int t = w->t;
    w->out[i].n = 0;
    rlx_scope_begin();
    rlx_clear_error();
    rlx_mask kinds[3] = {RLX_MASK_NONE, RLX_MASK_CAUSAL, RLX_MASK_SLIDING};
    /* attention: shared, per-iteration mask and window, this thread's
     * query count, and a key mask */
    rlx_tensor *a1 = rlx_attention(sh->Q, sh->K, sh->KV, AH, AD, RLX_MASK_CAUSAL, 0);
    rlx_tensor *a2 = rlx_attention(rlx_mul_s(sh->Q, 1 + 0.25 * (i % 3)), sh->K, sh->KV, AH, AD, kinds[i % 3],
                                   1 + (t + i) % 4);
    rlx_tensor *a3 = rlx_attention(rlx_narrow(sh->Q, 1, t, ASQ - t), rlx_add_s(sh->K, 0.5 * t), sh->KV, AH, AD,
                                   kinds[(i + t) % 3], 2 + t);
    rlx_tensor *a4 = rlx_attention_masked(sh->Q, sh->K, rlx_mul_s(sh->KV, t + 1), sh->KM, AH, AD);
    /* FFT: shared, and of this thread's length (2N: 24, 16 or 30 points) */
    static const int64_t lens[4] = {FN, 8, FN, 15};
    rlx_tensor *f1 = rlx_ifft(rlx_fft(sh->SIG));
    rlx_tensor *sig = rlx_narrow(sh->SIG, 1, 0, 2 * lens[t % 4]);
    rlx_tensor *f2 = rlx_fft(rlx_add_s(sig, 0.125 * i));
    rlx_tensor *f3 = rlx_fft_axis(rlx_transpose(sh->SIG, 0, NULL), 0, (i + t) % 2 == 1);
    /* conv2d and pooling: shared, and with this thread's stride, padding,
     * dilation and groups */
    rlx_tensor *c1 = rlx_conv2d(sh->IMG, sh->CW, sh->CB, NULL, (int[]){1, 1}, NULL, 1);
    int st[2] = {1 + t % 2, 1 + i % 2}, pd[2] = {t % 2, i % 2}, dl[2] = {1 + (t + i) % 2, 1};
    rlx_tensor *c2 = rlx_conv2d(sh->IMG, sh->CW, NULL, st, pd, dl, 1);
    rlx_tensor *c3 = rlx_conv2d(sh->IMG, rlx_narrow(sh->CW, 1, 0, CC / 2), sh->CB, NULL, NULL, NULL, 2);
    rlx_tensor *p1 = rlx_max_pool2d(c1, (int[]){2 + t % 2, 2}, NULL, (int[]){1, 0});
    rlx_tensor *p2 = rlx_avg_pool2d(sh->IMG, (int[]){3, 2}, (int[]){1 + i % 2, 2}, NULL);
    rlx_tensor *ys[12] = {a1, a2, a3, a4, f1, f2, f3, c1, c2, c3, p1, p2};
    if (rlx_realize_many(ys, 12) != RLX_OK)
        fail(w, "realize_many of the library ops", i);
    for (int k = 0; k < 12; k++)
        append(w, i, ys[k]);
    /* the shared program on this thread's inputs */
    rlx_binding b[3] = {{"q", rlx_mul_s(sh->Q, 1 + 0.5 * t)},
                        {"s", rlx_add_s(sh->SIG, i)},
                        {"im", rlx_neg(sh->IMG)}};
    rlx_tensor *outs[3] = {NULL, NULL, NULL};
    if (rlx_program_run(sh->prog, b, 3, outs) != RLX_OK)
        fail(w, "program_run of the library program", i);
    for (int k = 0; k < 3; k++)
        append(w, i, outs[k]);
    /* gradients through attention and conv2d */
    rlx_tensor *loss = rlx_add(rlx_sum_all(rlx_mul(a2, a2)), rlx_sum_all(rlx_tanh(c2)));
    rlx_tensor *wrt[2] = {sh->Q, sh->CW}, *g[2] = {NULL, NULL};
    if (rlx_grad(loss, wrt, 2, g) != RLX_OK || rlx_realize_many(g, 2) != RLX_OK)
        fail(w, "grad through attention and conv2d", i);
    append(w, i, g[0]);
    append(w, i, g[1]);
    if (rlx_last_status() != RLX_OK)
        fail(w, "an error was recorded", i);
    rlx_scope_end();
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int i = 0; i < ITER; i++)
        (lib_phase ? work_lib : work)(w, i);
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

/* -------------------------------------------- library ops, disk cache */

static char cache_base[64];

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    return remove(path);
}

static void remove_cache(void)
{
    if (cache_base[0])
        nftw(cache_base, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Before main, so before the first compile: every JIT phase of this file
 * stores its kernels in a fresh disk cache, from several threads at once. */
__attribute__((constructor)) static void temp_cache_dir(void)
{
    snprintf(cache_base, sizeof cache_base, "/tmp/rlx-test-stress-XXXXXX");
    if (!mkdtemp(cache_base)) {
        cache_base[0] = 0;
        return;
    }
    char d[128];
    snprintf(d, sizeof d, "%s/cache", cache_base);
    setenv("RLX_CACHE_DIR", d, 1);
    atexit(remove_cache);
}

static worker lib_ref[NT];

TEST(four_threads_library_ops_disk_cache)
{
    CHECK(cache_base[0] != 0);
    char dir[256];
    CHECK_EQ_INT(rlx_get_option("cache_dir", dir, sizeof dir), RLX_OK);
    CHECK(strncmp(dir, cache_base, strlen(cache_base)) == 0);
    lib_phase = true;
    long live = ir_live_nodes();
    rlx_set_num_threads(4);
    /* the reference, alone and on four threads */
    rlx_set_option("backend", "ref");
    run_phase(lib_ref, false);
    run_phase(together, true);
    compare(together, lib_ref, 0, "library ops, reference");
    /* the JIT from an empty memory cache: threads compile the same and
     * different kernels at once and store them */
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
    rt_plan_cache_clear(); /* and the plans holding its kernels */
    cg_cache_reset_for_tests();
    cg_disk_counts c0, c1, c2;
    cg_disk_counters(&c0);
    run_phase(together, true);
    cg_disk_counters(&c1);
    CHECK(c1.stores > c0.stores);
    CHECK_EQ_INT(c1.store_failures, c0.store_failures);
    run_phase(alone, false);
    compare(together, alone, 0, "library ops, jit");
    compare(alone, lib_ref, 1e-4, "library ops, jit against the reference");
    /* again with the memory cache emptied: every thread loads from disk */
    rt_plan_cache_clear(); /* and the plans holding its kernels */
    cg_cache_reset_for_tests();
    run_phase(together, true);
    cg_disk_counters(&c2);
    CHECK(c2.loads > c1.loads);
    CHECK_EQ_INT(c2.rejects, c0.rejects);
    compare(together, alone, 0, "library ops, jit from the disk cache");
    rlx_set_option("backend", "ref");
    rlx_set_num_threads(0);
    lib_phase = false;
    CHECK_EQ_INT(ir_live_nodes(), live);
}

TEST_MAIN(T(four_threads_reference), T(four_threads_jit), T(four_threads_while_the_backend_changes),
          T(four_threads_library_ops_disk_cache))
