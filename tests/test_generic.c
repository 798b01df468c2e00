/*
 * test_generic.c — size-generic kernels (knob generic_kernels; issue #15):
 * a kernel that reads its extents, strides, offsets and guard bounds from
 * its parameter array serves every size of its structure.
 *
 * Values: many graph forms realized at several sizes (empty and size-1
 * dims among them) with generic_kernels=2 against the reference backend
 * and against the specialized kernels (generic_kernels=0). Compiles: with
 * 2 the sizes after the first compile nothing; with 1 (auto) the first
 * size compiles specialized kernels, the second the generic ones, the
 * third nothing. Disk: a generic kernel loaded in a fresh cache state
 * gives the same values. Programs over dynamic dims use generic kernels.
 */
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#include "codegen_llvm/cg.h"
#include "passes/passes.h"
#include "runtime/exec/jit_exec.h"

static rlx_stats_t stats_now(void)
{
    rlx_stats_t s;
    rlx_stats(&s);
    return s;
}

static void set_generic(const char *v) { CHECK_EQ_INT(rlx_set_option("generic_kernels", v), RLX_OK); }

static void fresh_process(void)
{
    rt_plan_cache_clear();
    cg_cache_reset_for_tests();
}

/* ---------------------------------------------------------------- forms */

/* A graph of x [n, m] and y [m] (both of the form's dtype). */
typedef rlx_tensor *(*form_fn)(rlx_tensor *x, rlx_tensor *y);

static rlx_tensor *f_bcast(rlx_tensor *x, rlx_tensor *y) { return rlx_gelu_tanh(rlx_add_s(rlx_mul(x, y), 0.5)); }
static rlx_tensor *f_int(rlx_tensor *x, rlx_tensor *y) { return rlx_add(rlx_mul(x, y), rlx_rem_s(x, 3)); }
static rlx_tensor *f_transpose(rlx_tensor *x, rlx_tensor *y)
{
    (void)y;
    return rlx_sub_s(rlx_mul_s(rlx_t(x), 2), 1);
}
static rlx_tensor *f_flip(rlx_tensor *x, rlx_tensor *y)
{
    return rlx_add(rlx_mul(rlx_flip(x, 1), rlx_flip(x, 0)), rlx_slice(y, 0, RLX_END, RLX_END, -1));
}
static rlx_tensor *f_step(rlx_tensor *x, rlx_tensor *y)
{
    (void)y;
    return rlx_exp(rlx_slice(rlx_slice(x, 0, 0, RLX_END, 2), 1, 1, RLX_END, 3));
}
static rlx_tensor *f_pad(rlx_tensor *x, rlx_tensor *y)
{
    (void)y;
    return rlx_exp(rlx_pad(rlx_pad(x, 1, 2, 1, -1.0), 0, 1, 3, 0.5));
}
static rlx_tensor *f_sum0(rlx_tensor *x, rlx_tensor *y)
{
    int ax = 0;
    return rlx_sum(rlx_mul(x, y), &ax, 1, false);
}
static rlx_tensor *f_sum1(rlx_tensor *x, rlx_tensor *y)
{
    int ax = 1;
    return rlx_sum(rlx_add(x, y), &ax, 1, true);
}
static rlx_tensor *f_sum_all(rlx_tensor *x, rlx_tensor *y)
{
    (void)y;
    return rlx_sum_all(rlx_abs(x));
}
static rlx_tensor *f_max1(rlx_tensor *x, rlx_tensor *y)
{
    (void)y;
    int ax = 1;
    return rlx_max(rlx_t(x), &ax, 1, false); /* over the rows of the transpose: a leading axis of x */
}
static rlx_tensor *f_softmax(rlx_tensor *x, rlx_tensor *y)
{
    (void)y;
    return rlx_softmax(x, 1);
}
static rlx_tensor *f_log_softmax(rlx_tensor *x, rlx_tensor *y) { return rlx_log_softmax(rlx_mul(x, y), 1); }
static rlx_tensor *f_logsumexp(rlx_tensor *x, rlx_tensor *y)
{
    (void)y;
    return rlx_logsumexp(x, 1, false);
}
static rlx_tensor *f_layer_norm(rlx_tensor *x, rlx_tensor *y) { return rlx_gelu(rlx_layer_norm(x, y, y, 1e-5)); }
/* exp(sin x) is needed by both passes: stashed in a row buffer, sized at run time */
static rlx_tensor *f_stash(rlx_tensor *x, rlx_tensor *y) { return rlx_softmax(rlx_mul(rlx_exp(rlx_sin(x)), y), 1); }
static rlx_tensor *f_cumsum(rlx_tensor *x, rlx_tensor *y)
{
    (void)y;
    return rlx_cumsum(x, 1, false);
}
/* iota, where, casts: x > 0 ? x : -x, truncated to i32, plus arange(m) */
static rlx_tensor *f_iota_where(rlx_tensor *x, rlx_tensor *y)
{
    int64_t m = rlx_dim(y, 0);
    rlx_tensor *a = rlx_cast(rlx_where(rlx_gt_s(x, 0), rlx_mul_s(x, 5), rlx_neg(x)), RLX_I32);
    return rlx_cast(rlx_add(a, rlx_arange(RLX_I32, 3, 3 + 2 * (double)m, 2)), RLX_F32);
}

typedef struct {
    const char *name;
    form_fn f;
    rlx_dtype dt;
    double tol;   /* against the reference */
    bool exact;   /* the generic kernel's values are the specialized one's bit for bit */
    bool nonempty; /* the form needs n, m >= 1 */
} form;

static const form forms[] = {
    {"bcast", f_bcast, RLX_F32, 2e-6, true, false},
    {"bcast_f64", f_bcast, RLX_F64, 1e-13, true, false},
    {"bcast_f16", f_bcast, RLX_F16, 2e-3, true, false},
    {"int", f_int, RLX_I32, 0, true, false},
    {"int_i64", f_int, RLX_I64, 0, true, false},
    {"transpose", f_transpose, RLX_F32, 0, true, false},
    {"flip", f_flip, RLX_F32, 1e-6, true, false},
    {"flip_i8", f_flip, RLX_I8, 0, true, false},
    {"step", f_step, RLX_F32, 2e-6, true, false},
    {"pad", f_pad, RLX_F32, 2e-6, true, false},
    {"sum0", f_sum0, RLX_F32, 1e-5, false, false},
    {"sum0_i32", f_sum0, RLX_I32, 0, true, false},
    {"sum1", f_sum1, RLX_F32, 1e-5, false, false},
    {"sum1_bf16", f_sum1, RLX_BF16, 1e-2, false, false},
    {"sum_all", f_sum_all, RLX_F64, 1e-12, false, false},
    {"max1", f_max1, RLX_F32, 0, true, true},
    {"max1_u8", f_max1, RLX_U8, 0, true, true},
    {"softmax", f_softmax, RLX_F32, 2e-6, false, false},
    {"softmax_f16", f_softmax, RLX_F16, 2e-3, false, false},
    {"log_softmax", f_log_softmax, RLX_F32, 2e-5, false, false},
    {"logsumexp", f_logsumexp, RLX_F32, 1e-5, false, true},
    {"layer_norm", f_layer_norm, RLX_F32, 2e-5, false, false},
    {"layer_norm_f64", f_layer_norm, RLX_F64, 1e-11, false, false},
    {"cumsum", f_cumsum, RLX_F32, 1e-5, false, false},
    {"stash", f_stash, RLX_F32, 2e-6, false, false},
    {"iota_where", f_iota_where, RLX_F32, 0, true, false},
};

/* (n, m): sizes of one structure, then the edge ones */
static const int64_t sizes[][2] = {{3, 5}, {7, 33}, {16, 64}, {1, 17}, {9, 1}, {65, 300}, {0, 4}, {4, 0}, {2, 1024}};
enum { NSIZES = sizeof sizes / sizeof *sizes };

/* Realizes form fm over x, y under the backend and generic mode given. */
static rlx_tensor *realize_as(const form *fm, rlx_tensor *x, rlx_tensor *y, const char *backend, const char *gen)
{
    CHECK_EQ_INT(rlx_set_option("backend", backend), RLX_OK);
    set_generic(gen);
    rlx_tensor *r = fm->f(x, y);
    if (!r || rlx_realize(r) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "%s: %s", fm->name, rlx_last_error());
        return NULL;
    }
    return r;
}

static void check_form(const form *fm)
{
    for (int s = 0; s < NSIZES; s++) {
        int64_t n = sizes[s][0], m = sizes[s][1], xs[2] = {n, m};
        if (fm->nonempty && (n == 0 || m == 0))
            continue;
        bool is_int = !(fm->dt == RLX_F32 || fm->dt == RLX_F64 || fm->dt == RLX_F16 || fm->dt == RLX_BF16);
        rlx_tensor *x = trand(fm->dt, 2, xs, is_int ? -9 : -2, is_int ? 9 : 2);
        rlx_tensor *y = trand(fm->dt, 1, &m, is_int ? 1 : 0.5, is_int ? 5 : 1.5);
        rlx_tensor *want = realize_as(fm, x, y, "ref", "default");
        rlx_tensor *gen = realize_as(fm, x, y, "jit", "2");
        rlx_tensor *spec = realize_as(fm, x, y, "jit", "0");
        if (!want || !gen || !spec)
            continue;
        test_expect_same(__FILE__, __LINE__, gen, want, fm->tol, fm->tol);
        test_expect_same(__FILE__, __LINE__, gen, spec, fm->exact ? 0 : 1e-6, fm->exact ? 0 : 1e-6);
        if (test_failures)
            fprintf(stderr, "  (form %s at [%lld, %lld])\n", fm->name, (long long)n, (long long)m);
    }
    set_generic("default");
}

TEST(generic_values_elementwise)
{
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++)
        if (forms[i].f == f_bcast || forms[i].f == f_int || forms[i].f == f_transpose || forms[i].f == f_flip ||
            forms[i].f == f_step || forms[i].f == f_pad || forms[i].f == f_iota_where)
            check_form(&forms[i]);
}

TEST(generic_values_reductions)
{
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++)
        if (forms[i].f == f_sum0 || forms[i].f == f_sum1 || forms[i].f == f_sum_all || forms[i].f == f_max1)
            check_form(&forms[i]);
}

TEST(generic_values_rows)
{
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++)
        if (forms[i].f == f_softmax || forms[i].f == f_log_softmax || forms[i].f == f_logsumexp ||
            forms[i].f == f_layer_norm || forms[i].f == f_cumsum || forms[i].f == f_stash)
            check_form(&forms[i]);
}

/* A reduction keeping a trailing run (accumulators over the tail dims,
 * sized at run time) and a rank-3 permute, at several sizes. */
TEST(generic_values_rank3)
{
    static const int64_t s3[][3] = {{2, 3, 4}, {5, 7, 3}, {1, 9, 16}, {4, 1, 5}, {3, 6, 0}};
    for (size_t s = 0; s < sizeof s3 / sizeof *s3; s++) {
        rlx_tensor *x = trand(RLX_F32, 3, s3[s], -1, 1);
        rlx_tensor *r[3][2];
        const char *be[3] = {"ref", "jit", "jit"}, *gm[3] = {"default", "2", "0"};
        for (int b = 0; b < 3; b++) {
            CHECK_EQ_INT(rlx_set_option("backend", be[b]), RLX_OK);
            set_generic(gm[b]);
            int ax = 1, perm[3] = {2, 0, 1};
            r[b][0] = rlx_sum(rlx_exp(x), &ax, 1, false); /* kept leading and trailing dims */
            r[b][1] = rlx_mul_s(rlx_transpose(x, 3, perm), 3);
            CHECK_EQ_INT(rlx_realize_many(r[b], 2), RLX_OK);
        }
        for (int j = 0; j < 2; j++) {
            EXPECT_SAME(r[1][j], r[0][j], 2e-6);
            EXPECT_SAME(r[1][j], r[2][j], 1e-6);
        }
    }
    set_generic("default");
}

/* ----------------------------------------------------------------- keys */

/* The key of the last LOOP kernel of t's schedule (t unrealized). */
static size_t key_of(rlx_tensor *t, bool generic, uint64_t *buf, size_t cap, int64_t *params, int *np)
{
    ir_node *root = (ir_node *)t;
    sched_schedule s;
    sched_ctx sc = {0};
    size_t n = 0;
    if (sched_build(&sc, &root, 1, &s) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "sched_build: %s", sc.msg);
        return 0;
    }
    for (long i = 0; i < s.count; i++) {
        if (s.k[i].kind != SCHED_LOOP)
            continue;
        n = sched_kernel_key(&s.k[i], generic, buf, cap);
        if (params && sched_kernel_param_layout(&s.k[i], NULL) <= 64) {
            *np = sched_kernel_param_layout(&s.k[i], NULL);
            sched_kernel_params(&s.k[i], params);
        }
    }
    sched_free(&s);
    CHECK(n > 0 && n <= cap);
    return n;
}

static bool same_key(rlx_tensor *a, rlx_tensor *b, bool generic)
{
    uint64_t ka[512], kb[512];
    size_t na = key_of(a, generic, ka, 512, NULL, NULL), nb = key_of(b, generic, kb, 512, NULL, NULL);
    return na == nb && memcmp(ka, kb, na * sizeof *ka) == 0;
}

/* Generic keys are equal over the sizes of one structure and differ where
 * the code must (a transposed, reversed or broadcast access; a row stash
 * that no longer fits); the parameters are the kernel's numbers. */
TEST(generic_keys)
{
    int64_t a[2] = {5, 7}, b[2] = {9, 300}, m = 300;
    rlx_tensor *xa = trand(RLX_F32, 2, a, -1, 1), *xb = trand(RLX_F32, 2, b, -1, 1);
    rlx_tensor *xt = trand(RLX_F32, 2, (int64_t[]){300, 9}, -1, 1), *y = trand(RLX_F32, 1, &m, -1, 1);
    CHECK(same_key(rlx_exp(xa), rlx_exp(xb), true));
    CHECK(!same_key(rlx_exp(xa), rlx_exp(xb), false));
    CHECK(!same_key(rlx_exp(xb), rlx_exp(rlx_t(xt)), true));  /* strided innermost */
    CHECK(!same_key(rlx_exp(xb), rlx_exp(rlx_flip(xb, 1)), true)); /* reversed innermost */
    CHECK(same_key(rlx_exp(rlx_flip(xa, 1)), rlx_exp(rlx_flip(xb, 1)), true));
    CHECK(!same_key(rlx_add(xb, xb), rlx_add(xb, y), true)); /* a broadcast (zero stride) */
    CHECK(same_key(rlx_softmax(xa, 1), rlx_softmax(xb, 1), true));
    CHECK(same_key(rlx_exp(rlx_pad(xa, 1, 1, 2, 0)), rlx_exp(rlx_pad(xb, 1, 1, 2, 0)), true));
    /* softmax(exp(sin x)): exp(sin x) is stashed in a row buffer while
     * the row fits SCHED_ROW_STASH_BYTES, recomputed beyond */
    int64_t s1[2] = {2, 1000}, s2[2] = {2, 200000};
    rlx_tensor *l1 = trand(RLX_F32, 2, s1, -1, 1), *l2 = trand(RLX_F32, 2, s2, -1, 1);
    rlx_tensor *f1 = rlx_softmax(rlx_exp(rlx_sin(l1)), 1), *f2 = rlx_softmax(rlx_exp(rlx_sin(l2)), 1);
    uint64_t k1[512], k2[512];
    size_t n1 = key_of(f1, true, k1, 512, NULL, NULL), n2 = key_of(f2, true, k2, 512, NULL, NULL);
    CHECK(n1 == n2); /* the same words, other stash choices */
    CHECK(memcmp(k1, k2, n1 * sizeof *k1) != 0);
    /* the parameters: extents, the output's offset and strides, the
     * load's (a transpose: dims that do not merge) */
    int64_t p[64];
    int np = 0;
    uint64_t kk[512];
    key_of(rlx_exp(rlx_t(xt)), true, kk, 512, p, &np);
    static const int64_t want[8] = {9, 300, 0, 300, 1, 0, 1, 9};
    CHECK_EQ_INT(np, 8);
    for (int i = 0; i < 8 && np == 8; i++)
        CHECK_EQ_INT((int)p[i], (int)want[i]);
}

/* ------------------------------------------------------------- compiles */

/* layer_norm + gelu over [n, 256] (and a padded, flipped elementwise
 * kernel): kernels compiled realizing it at n rows. */
static uint64_t compiles_at(int64_t n, int64_t m)
{
    int64_t xs[2] = {n, m};
    rlx_tensor *x = trand(RLX_F32, 2, xs, -2, 2), *g = trand(RLX_F32, 1, &m, 0.5, 1.5);
    rlx_stats_t s0 = stats_now();
    rlx_tensor *r[2] = {rlx_gelu(rlx_layer_norm(x, g, g, 1e-5)), rlx_exp(rlx_pad(rlx_flip(x, 1), 0, 1, 2, 0.25))};
    CHECK_EQ_INT(rlx_realize_many(r, 2), RLX_OK);
    uint64_t c = stats_now().kernels_compiled - s0.kernels_compiled;
    /* values: against the reference */
    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
    rlx_tensor *w[2] = {rlx_gelu(rlx_layer_norm(x, g, g, 1e-5)), rlx_exp(rlx_pad(rlx_flip(x, 1), 0, 1, 2, 0.25))};
    CHECK_EQ_INT(rlx_realize_many(w, 2), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    EXPECT_SAME(r[0], w[0], 2e-5);
    EXPECT_SAME(r[1], w[1], 2e-6);
    return c;
}

TEST(generic_always_compiles_once)
{
    CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("cache_dir", ""), RLX_OK);
    set_generic("2");
    fresh_process();
    CHECK(compiles_at(5, 256) > 0);
    for (int64_t n = 6; n < 40; n += 5)
        CHECK_EQ_INT((int)compiles_at(n, 256), 0);
    CHECK_EQ_INT((int)compiles_at(7, 40), 0); /* other rows too */
    /* one row: the scheduler drops size-1 dims, another structure, which
     * compiles once too */
    compiles_at(1, 256);
    CHECK_EQ_INT((int)compiles_at(1, 40), 0);
    set_generic("default");
}

TEST(generic_auto_policy)
{
    CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("cache_dir", ""), RLX_OK);
    set_generic("1");
    fresh_process();
    uint64_t first = compiles_at(12, 256); /* specialized */
    CHECK(first > 0);
    CHECK_EQ_INT((int)compiles_at(12, 256), 0); /* the same size: the specialized kernels */
    CHECK_EQ_INT((int)compiles_at(13, 256), (int)first); /* a second size: the generic ones */
    for (int64_t n = 14; n < 30; n += 3)
        CHECK_EQ_INT((int)compiles_at(n, 256), 0); /* every later size */
    CHECK_EQ_INT((int)compiles_at(12, 256), 0);
    /* never: every size compiles */
    set_generic("0");
    CHECK(compiles_at(31, 256) > 0);
    CHECK(compiles_at(32, 256) > 0);
    set_generic("default");
}

/* Threads realizing one structure at different sizes at once, under
 * auto: the generic kernel is chosen and compiled concurrently; every
 * result equals softmax computed here in double. */
typedef struct {
    int64_t n;
    int bad;
} thread_job;

static void *softmax_rows(void *arg)
{
    thread_job *j = arg;
    enum { M = 96 };
    int64_t sh[2] = {j->n, M};
    float *x = malloc((size_t)(j->n * M) * sizeof *x), *got = malloc((size_t)(j->n * M) * sizeof *got);
    for (int64_t i = 0; i < j->n * M; i++)
        x[i] = (float)((i * 7919 + j->n * 31) % 1000) / 250.0f - 2.0f;
    rlx_scope_begin();
    for (int rep = 0; rep < 3; rep++) {
        rlx_tensor *r = rlx_softmax(rlx_mul_s(rlx_from_data(RLX_F32, 2, sh, x), 1.5), 1);
        if (!r || rlx_read_f32(r, got, (size_t)(j->n * M)) != RLX_OK) {
            j->bad++;
            break;
        }
        for (int64_t row = 0; row < j->n; row++) {
            double mx = -INFINITY, sum = 0;
            for (int c = 0; c < M; c++)
                mx = fmax(mx, 1.5 * (double)x[row * M + c]);
            for (int c = 0; c < M; c++)
                sum += exp(1.5 * (double)x[row * M + c] - mx);
            for (int c = 0; c < M; c++)
                if (!test_close(got[row * M + c], exp(1.5 * (double)x[row * M + c] - mx) / sum, 2e-6, 1e-9))
                    j->bad++;
        }
    }
    rlx_scope_end();
    free(x);
    free(got);
    return NULL;
}

TEST(generic_threads)
{
    CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("cache_dir", ""), RLX_OK);
    set_generic("1");
    fresh_process();
    enum { NT = 6 };
    pthread_t t[NT];
    thread_job jobs[NT];
    for (int i = 0; i < NT; i++) {
        jobs[i] = (thread_job){.n = 3 + 5 * i};
        CHECK(pthread_create(&t[i], NULL, softmax_rows, &jobs[i]) == 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ_INT(jobs[i].bad, 0);
    }
    rlx_stats_t s0 = stats_now();
    thread_job late = {.n = 77};
    softmax_rows(&late); /* a later size: the generic kernel, compiled by now */
    CHECK_EQ_INT(late.bad, 0);
    CHECK_EQ_INT((int)(stats_now().kernels_compiled - s0.kernels_compiled), 0);
    set_generic("default");
}

/* -------------------------------------------------------------- disk */

static char base[64];

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    return remove(path);
}

static void cleanup(void)
{
    if (base[0])
        nftw(base, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TEST(generic_from_disk)
{
    snprintf(base, sizeof base, "/tmp/rlx-test-generic-XXXXXX");
    CHECK(mkdtemp(base) != NULL);
    atexit(cleanup);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/cache", base);
    CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("cache_dir", dir), RLX_OK);
    set_generic("2");
    fresh_process();
    cg_disk_counts d0;
    cg_disk_counters(&d0);
    CHECK(compiles_at(9, 128) > 0); /* compiled and stored */
    cg_disk_counts d1;
    cg_disk_counters(&d1);
    CHECK(d1.stores > d0.stores);
    fresh_process(); /* a new process: nothing in memory */
    rlx_stats_t s0 = stats_now();
    CHECK_EQ_INT((int)compiles_at(21, 128), 0); /* another size, from the disk */
    cg_disk_counts d2;
    cg_disk_counters(&d2);
    CHECK(d2.loads > d1.loads);
    CHECK(stats_now().cache_hits > s0.cache_hits);
    /* a specialized variant is another file: compiled */
    set_generic("0");
    CHECK(compiles_at(21, 128) > 0);
    set_generic("default");
    CHECK_EQ_INT(rlx_set_option("cache_dir", ""), RLX_OK);
}

/* -------------------------------------------------------------- programs */

/* A program over a dynamic batch dim: its kernels compile once (the first
 * binding), every later size compiles nothing, values against the
 * reference at each size. */
TEST(generic_program_dynamic)
{
    CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("cache_dir", ""), RLX_OK);
    fresh_process();
    int64_t shape[2] = {-1, 48}, m = 48;
    rlx_tensor *in = rlx_input("x", RLX_F32, 2, shape);
    rlx_tensor *g = trand(RLX_F32, 1, &m, 0.5, 1.5);
    rlx_tensor *out = rlx_softmax(rlx_gelu(rlx_layer_norm(in, g, g, 1e-5)), 1);
    rlx_program *p = rlx_compile(&out, 1);
    CHECK(p != NULL);
    /* (8 sizes: the plans a program keeps; size 1 would be another structure) */
    for (int64_t n = 2; p && n < 40; n += 5) {
        int64_t xs[2] = {n, m};
        rlx_tensor *x = trand(RLX_F32, 2, xs, -2, 2), *got = NULL;
        rlx_binding b = {"x", x};
        rlx_stats_t s0 = stats_now();
        CHECK_EQ_INT(rlx_program_run(p, &b, 1, &got), RLX_OK);
        if (n > 2)
            CHECK_EQ_INT((int)(stats_now().kernels_compiled - s0.kernels_compiled), 0);
        CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
        rlx_tensor *want = rlx_softmax(rlx_gelu(rlx_layer_norm(x, g, g, 1e-5)), 1);
        EXPECT_SAME(got, want, 2e-5);
        CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    }
    rlx_program_free(p);
}

/* ------------------------------------------------------------ bad input */

TEST(generic_knob_values)
{
    char buf[16];
    CHECK_EQ_INT(rlx_get_option("generic_kernels", buf, sizeof buf), RLX_OK);
    CHECK(strcmp(buf, "1") == 0); /* auto, the default */
    CHECK_EQ_INT(rlx_set_option("generic_kernels", "3"), RLX_E_ARG);
    CHECK_EQ_INT(rlx_set_option("generic_kernels", "-1"), RLX_E_ARG);
    CHECK_EQ_INT(rlx_set_option("generic_kernels", "x"), RLX_E_ARG);
    CHECK_EQ_INT(rlx_get_option("generic_kernels", buf, sizeof buf), RLX_OK);
    CHECK(strcmp(buf, "1") == 0); /* a refused value changes nothing */
    rlx_clear_error();
}

TEST_MAIN(T(generic_keys), T(generic_values_elementwise), T(generic_values_reductions), T(generic_values_rows),
          T(generic_values_rank3), T(generic_always_compiles_once), T(generic_auto_policy), T(generic_threads),
          T(generic_from_disk), T(generic_program_dynamic), T(generic_knob_values))
