/* test_threads.c — what the executor promises about threads and memory:
 * a large matmul split over the pool (kernels/blas.c, mm_item_split) gives
 * bitwise the values of one call at 1, 2 and 3 threads, and a compiled
 * program fed its own outputs takes no fresh memory from the OS once warm
 * (exec/bufpool.c: small outputs too, not only those of 1 MiB and more);
 * and long f32 sums (blocked in f32, cg_kernel.c) give the same bits at
 * any thread count. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>

#include "harness.h"
#include "runtime/exec/pool.h"

uint64_t rt_bufpool_fresh_bytes(void);

static void use(const char *backend) { CHECK(rlx_set_option("backend", backend) == RLX_OK); }

/* a @ b on the JIT at threads 1, 2, 3: identical bits; and near the
 * reference backend. */
static void check_split(const char *what, rlx_tensor *a, rlx_tensor *b, rlx_dtype dt)
{
    double *got[3] = {NULL, NULL, NULL}, *want = NULL;
    int64_t n = 0;
    use("ref");
    rlx_scope_begin();
    want = test_values(rlx_matmul(a, b), &n);
    rlx_scope_end();
    use("jit");
    for (int t = 1; t <= 3; t++) {
        rlx_set_num_threads(t);
        rlx_scope_begin();
        got[t - 1] = test_values(rlx_matmul(a, b), &n);
        rlx_scope_end();
    }
    rlx_set_num_threads(0);
    if (!want || !got[0] || !got[1] || !got[2])
        goto out;
    for (int t = 2; t <= 3; t++)
        if (memcmp(got[0], got[t - 1], (size_t)n * sizeof(double)) != 0)
            test_fail(__FILE__, __LINE__, "%s %s: %d threads differ from 1", what, rlx_dtype_name(dt), t);
    double tol = dt == RLX_F32 ? 1e-4 : 1e-11, worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(got[0][i] - want[i]) / (1 + fabs(want[i]));
        worst = d > worst || d != d ? d : worst;
    }
    if (!(worst <= tol))
        test_fail(__FILE__, __LINE__, "%s %s: error %g against the reference", what, rlx_dtype_name(dt), worst);
out:
    free(want);
    for (int t = 0; t < 3; t++)
        free(got[t]);
    use("ref");
}

TEST(matmul_split_is_thread_count_free)
{
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F64 : RLX_F32;
        /* rows split (m not a multiple of the block alignment) */
        check_split("rows", trand(dt, 2, (int64_t[]){1001, 300}, -1, 1), trand(dt, 2, (int64_t[]){300, 200}, -1, 1),
                    dt);
        /* columns split: n > m */
        check_split("columns", trand(dt, 2, (int64_t[]){120, 700}, -1, 1),
                    trand(dt, 2, (int64_t[]){700, 905}, -1, 1), dt);
        /* transposed operands: CblasTrans with leading dimensions */
        check_split("a^T b^T rows", rlx_t(trand(dt, 2, (int64_t[]){300, 1001}, -1, 1)),
                    rlx_t(trand(dt, 2, (int64_t[]){200, 300}, -1, 1)), dt);
        check_split("a^T b^T columns", rlx_t(trand(dt, 2, (int64_t[]){700, 120}, -1, 1)),
                    rlx_t(trand(dt, 2, (int64_t[]){905, 700}, -1, 1)), dt);
        /* three large items: not an even share for the pool, each split */
        check_split("batch of 3", trand(dt, 3, (int64_t[]){3, 400, 200}, -1, 1),
                    trand(dt, 3, (int64_t[]){3, 200, 300}, -1, 1), dt);
    }
}

static long minflt(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
}

/* The pool itself (pool.c): every chunk of every job runs exactly once,
 * with the waits spinning or sleeping at once, at 2 to 4 threads, for jobs
 * back to back (a worker still leaving one job while the next opens) and
 * from two callers at once (the second runs inline). */
enum { POOL_N = 4099 };

typedef struct {
    atomic_int hits[POOL_N];
} pool_marks;

static void pool_mark(void *const *bufs, const double *consts, int64_t b, int64_t e)
{
    pool_marks *m = bufs[0];
    (void)consts;
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add_explicit(&m->hits[i], 1, memory_order_relaxed);
}

/* Runs jobs of every size below POOL_N (in steps) at threads t; false if an
 * index was missed or run twice. */
static bool pool_jobs(pool_marks *m, int t, int reps)
{
    bool ok = true;
    for (int r = 0; r < reps; r++)
        for (int64_t n = 1; n < POOL_N; n += 37 + r) {
            for (int64_t i = 0; i < n; i++)
                atomic_store_explicit(&m->hits[i], 0, memory_order_relaxed);
            void *bufs[1] = {m};
            rt_pool_run(pool_mark, bufs, NULL, n, 1 + n % 97, t);
            for (int64_t i = 0; i < n; i++)
                ok &= atomic_load_explicit(&m->hits[i], memory_order_relaxed) == 1;
        }
    return ok;
}

static void *pool_second_caller(void *arg)
{
    static pool_marks m;
    *(bool *)arg = pool_jobs(&m, 3, 2);
    return NULL;
}

TEST(pool_runs_each_chunk_once)
{
    static pool_marks m;
    const long spins[2] = {0, -1}; /* sleep at once; the default spin */
    for (int s = 0; s < 2; s++) {
        rt_pool_set_spin_us(spins[s]);
        for (int t = 2; t <= 4; t++) {
            uint64_t j0, n0, j1, n1;
            rt_pool_counts(&j0, &n0);
            if (!pool_jobs(&m, t, 2))
                test_fail(__FILE__, __LINE__, "spin %ld, %d threads: a chunk ran twice or never", spins[s], t);
            rt_pool_counts(&j1, &n1);
            CHECK(j1 > j0 && n1 - n0 <= (j1 - j0) * (uint64_t)(t - 1)); /* a join per worker per job */
        }
        pthread_t th;
        bool other = false;
        CHECK(pthread_create(&th, NULL, pool_second_caller, &other) == 0);
        CHECK(pool_jobs(&m, 2, 2));
        CHECK(pthread_join(th, NULL) == 0);
        CHECK(other);
    }
    rt_pool_set_spin_us(-1);
}

/* Parameters of 4 KiB to 1 MiB (the size classes) and one above, updated
 * by a compiled step whose outputs are the next run's inputs: after the
 * first runs nothing more comes from the OS, and (a loose check, not a
 * timing) hardly a page is faulted in per run. */
enum { NPAR = 7 };

TEST(program_outputs_stay_mapped)
{
    static const int64_t rows[NPAR] = {16, 100, 128, 300, 512, 700, 1000}, cols = 256; /* 1000: the 1 MiB class */
    use("jit");
    rlx_tensor *in[NPAR], *out[NPAR];
    rlx_binding bind[NPAR];
    char names[NPAR][8];
    for (int i = 0; i < NPAR; i++) {
        snprintf(names[i], sizeof names[i], "p%d", i);
        in[i] = rlx_input(names[i], RLX_F32, 2, (int64_t[]){rows[i], cols});
        /* an intermediate of the same size lives in the arena */
        out[i] = rlx_sub(in[i], rlx_mul_s(rlx_tanh(rlx_mul(in[i], in[i])), 0.01));
    }
    rlx_program *p = rlx_compile(out, NPAR);
    CHECK(p != NULL);
    rlx_tensor *state[NPAR];
    for (int i = 0; i < NPAR; i++)
        state[i] = rlx_escape(trand(RLX_F32, 2, (int64_t[]){rows[i], cols}, -1, 1));
    uint64_t fresh = 0;
    long faults = 0;
    for (int r = 0; p && r < 8; r++) {
        for (int i = 0; i < NPAR; i++)
            bind[i] = (rlx_binding){names[i], state[i]};
        rlx_tensor *next[NPAR];
        long f0 = minflt();
        CHECK(rlx_program_run(p, bind, NPAR, next) == RLX_OK);
        if (r >= 3)
            faults += minflt() - f0;
        for (int i = 0; i < NPAR; i++) {
            rlx_release(state[i]);
            state[i] = rlx_escape(next[i]);
        }
        if (r == 2)
            fresh = rt_bufpool_fresh_bytes();
        else if (r > 2)
            CHECK_EQ_INT(rt_bufpool_fresh_bytes(), fresh);
    }
    /* ~4.6 MiB of outputs per run, 1200 pages if they were fresh */
    if (faults > 5 * 64)
        test_fail(__FILE__, __LINE__, "%ld page faults in 5 warm runs", faults);
    for (int i = 0; i < NPAR; i++)
        rlx_release(state[i]);
    rlx_program_free(p);
    use("ref");
}

/* Long f32 sums on the JIT at 1, 2 and 3 threads (the pool splitting
 * rows): identical bits, the block order fixed by the kernel's shape,
 * for a whole-tensor sum, row sums, column sums, row kernels' phases
 * (softmax, layer_norm, a large softmax summing in chunks) and f16; with
 * reduce_acc_f64 on and off. */
TEST(long_f32_sums_are_thread_count_free)
{
    use("jit");
    rlx_tensor *x = trand(RLX_F32, 2, (int64_t[]){48, 100003}, -1, 2);
    rlx_tensor *big = trand(RLX_F32, 1, (int64_t[]){3000017}, 0, 1);
    rlx_tensor *cols = trand(RLX_F32, 2, (int64_t[]){100003, 48}, -1, 2);
    rlx_tensor *wide = trand(RLX_F32, 2, (int64_t[]){8, 1 << 18}, -4, 4); /* softmax in chunks (rowplan.c) */
    for (int f64 = 0; f64 < 2; f64++) {
        CHECK(rlx_set_option("reduce_acc_f64", f64 ? "1" : "0") == RLX_OK);
        for (int w = 0; w < 7; w++) {
            double *got[3] = {NULL, NULL, NULL};
            int64_t n[3] = {0, 0, 0};
            for (int t = 1; t <= 3; t++) {
                rlx_set_num_threads(t);
                rlx_scope_begin();
                rlx_tensor *r = w == 0   ? rlx_sum_all(big)
                                : w == 1 ? rlx_sum(x, (const int[]){1}, 1, false)
                                : w == 2 ? rlx_sum(cols, (const int[]){0}, 1, false)
                                : w == 3 ? rlx_softmax(x, -1)
                                : w == 4 ? rlx_sum(rlx_cast(x, RLX_F16), (const int[]){1}, 1, false)
                                : w == 5 ? rlx_layer_norm(x, NULL, NULL, 1e-5)
                                         : rlx_softmax(wide, -1);
                got[t - 1] = test_values(r, &n[t - 1]);
                rlx_scope_end();
            }
            rlx_set_num_threads(0);
            for (int t = 2; t <= 3; t++)
                if (got[0] && got[t - 1] && (n[0] != n[t - 1] || memcmp(got[0], got[t - 1], (size_t)n[0] * sizeof(double))))
                    test_fail(__FILE__, __LINE__, "case %d (reduce_acc_f64=%d): %d threads differ from 1", w, f64, t);
            for (int t = 0; t < 3; t++)
                free(got[t]);
        }
    }
    CHECK(rlx_set_option("reduce_acc_f64", "default") == RLX_OK);
    use("ref");
}

TEST_MAIN(T(pool_runs_each_chunk_once), T(matmul_split_is_thread_count_free), T(program_outputs_stay_mapped),
          T(long_f32_sums_are_thread_count_free))
