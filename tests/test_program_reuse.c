/*
 * test_program_reuse.c — a new binding of a program with dynamic dims is
 * planned from a kept one (rlx_program_reuses) when every dynamic dim
 * keeps its size class (0, 1, more): the values stay those of the
 * reference evaluator over static shapes, the counter says which
 * bindings reused a plan and which were planned afresh, kernels the new
 * sizes leave alone read the new binding, threads add and run plans at
 * once, and the arenas grow only with a larger binding.
 */
#include <pthread.h>

#include "harness.h"

enum { W = 8 };

/* The values of t (a new tensor over a program's or the oracle's result). */
static void expect_like(rlx_tensor *got, rlx_tensor *want, rlx_dtype dt)
{
    EXPECT_SAME(got, want, dt == RLX_F32 ? 2e-5 : 1e-12);
}

/* A value of the reference backend: f's graph over realized inputs. */
static void set_backend(const char *b) { CHECK_EQ_INT(rlx_set_option("backend", b), RLX_OK); }

typedef struct {
    rlx_tensor *w1, *b1, *w2, *g, *be;
} params;

static void make_params(rlx_dtype dt, params *q)
{
    int64_t ws[2] = {W, W}, bs[1] = {W};
    q->w1 = rlx_randn(dt, 2, ws, 1);
    q->w2 = rlx_mul_s(rlx_randn(dt, 2, ws, 2), 0.5);
    q->b1 = rlx_randn(dt, 1, bs, 3);
    q->g = rlx_add_s(rlx_rand(dt, 1, bs, 4), 0.5);
    q->be = rlx_randn(dt, 1, bs, 5);
    rlx_realize_many((rlx_tensor *[]){q->w1, q->w2, q->b1, q->g, q->be}, 5);
}

/* Outputs over x [n, W] (dynamic n) and z [3, W] (static): the MLP
 * softmax(x + linear(gelu_tanh(linear(layer_norm(x))))), x's centered
 * squares summed over the dynamic axis (a reduction over it), x flipped
 * along it, and a value of z alone
 * (kernels no binding of n changes: copied onto each new plan, they must
 * read the new z). */
static void outputs(const params *q, rlx_tensor *x, rlx_tensor *z, rlx_tensor **out)
{
    rlx_tensor *h = rlx_gelu_tanh(rlx_linear(rlx_layer_norm(x, q->g, q->be, 1e-5), q->w1, q->b1));
    out[0] = rlx_softmax(rlx_add(x, rlx_linear(h, q->w2, NULL)), -1);
    rlx_tensor *c = rlx_sub(x, rlx_mean(x, (int[]){0}, 1, true));
    out[1] = rlx_sum(rlx_mul(c, c), (int[]){0}, 1, false);
    out[2] = rlx_add(rlx_mul_s(rlx_flip(x, 0), 2), x);
    out[3] = rlx_add(rlx_mul_s(rlx_exp(rlx_mul_s(z, 0.25)), 2), rlx_sum(z, NULL, 0, true));
}

static rlx_tensor *data(rlx_dtype dt, int64_t n, int64_t w, uint64_t seed)
{
    rlx_tensor *t = rlx_randn(dt, 2, (int64_t[]){n, w}, seed);
    CHECK(rlx_realize(t) == RLX_OK);
    return t;
}

/* Each binding against the oracle; which bindings reuse a kept plan. */
TEST(reuse_matches_reference)
{
    const rlx_dtype dts[] = {RLX_F32, RLX_F64};
    /* 5 plans afresh, then 0 and 1 (their own size class) too; 2..9 reuse
     * a plan of class "more" (9 evicts 5: 8 kept); 5 again reuses one; 1
     * is still kept; 0 was evicted and no plan of class 0 is kept:
     * afresh */
    const int64_t sizes[] = {5, 0, 1, 2, 3, 4, 6, 7, 9, 5, 1, 0};
    for (int t = 0; t < 2; t++) {
        rlx_dtype dt = dts[t];
        params q;
        make_params(dt, &q);
        rlx_tensor *x = rlx_input("x", dt, 2, (int64_t[]){-1, W}), *z = rlx_input("z", dt, 2, (int64_t[]){3, W});
        rlx_tensor *o[4];
        outputs(&q, x, z, o);
        rlx_program *p = rlx_compile(o, 4);
        CHECK(p != NULL);
        if (!p)
            continue;
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            int64_t n = sizes[k];
            rlx_tensor *xv = data(dt, n, W, 100 + k), *zv = data(dt, 3, W, 200 + k), *got[4] = {0}, *want[4];
            rlx_binding b[2] = {{"x", xv}, {"z", zv}};
            CHECK_EQ_INT(rlx_program_run(p, b, 2, got), RLX_OK);
            set_backend("ref");
            outputs(&q, xv, zv, want);
            for (int i = 0; i < 4; i++) {
                if (got[i])
                    expect_like(got[i], want[i], dt);
                else
                    test_fail(__FILE__, __LINE__, "n = %lld: output %d missing: %s", (long long)n, i,
                              rlx_last_error());
            }
            set_backend("jit");
        }
        int kept;
        int64_t made, reused = -1;
        CHECK_EQ_INT(rlx_program_specs(p, &kept, &made), RLX_OK);
        CHECK_EQ_INT(rlx_program_reuses(p, &reused), RLX_OK);
        CHECK_EQ_INT(kept, 8);
        CHECK_EQ_INT(made, 11);
        CHECK_EQ_INT(reused, 7);
        CHECK_ERR(rlx_program_reuses(NULL, &reused), RLX_E_ARG, "rlx_program_reuses");
        rlx_program_free(p);
    }
}

/* Two symbols meeting in a broadcast (x [a, 1] * y [1, b]): a binding
 * that moves b between 1 and more changes the class (the loops over b
 * drop out), so it is planned afresh, never made from the other plan. */
TEST(reuse_needs_same_size_class)
{
    rlx_tensor *x = rlx_input("x", RLX_F64, 2, (int64_t[]){-2, 1}), *y = rlx_input("y", RLX_F64, 2, (int64_t[]){1, -3});
    rlx_tensor *o[2];
    o[0] = rlx_tanh(rlx_mul(x, y));
    o[1] = rlx_sum(rlx_add(x, rlx_exp(y)), (int[]){1}, 1, false);
    rlx_program *p = rlx_compile(o, 2);
    CHECK(p != NULL);
    if (!p)
        return;
    static const struct {
        int64_t a, b;
        int reused; /* the counter after the run */
    } runs[] = {{4, 5, 0}, {6, 7, 1}, {3, 1, 1}, {5, 1, 2}, {1, 1, 2}, {1, 9, 2}, {2, 9, 3}, {7, 2, 4}};
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        rlx_tensor *xv = data(RLX_F64, runs[k].a, 1, 300 + k), *yv = data(RLX_F64, 1, runs[k].b, 400 + k);
        rlx_tensor *got[2] = {0}, *want[2];
        CHECK_EQ_INT(rlx_program_run(p, (rlx_binding[]){{"x", xv}, {"y", yv}}, 2, got), RLX_OK);
        set_backend("ref");
        want[0] = rlx_tanh(rlx_mul(xv, yv));
        want[1] = rlx_sum(rlx_add(xv, rlx_exp(yv)), (int[]){1}, 1, false);
        for (int i = 0; i < 2; i++)
            if (got[i])
                expect_like(got[i], want[i], RLX_F64);
        set_backend("jit");
        int64_t reused = -1;
        CHECK_EQ_INT(rlx_program_reuses(p, &reused), RLX_OK);
        if (reused != runs[k].reused)
            test_fail(__FILE__, __LINE__, "run %zu (a %lld, b %lld): %lld reused, expected %d", k,
                      (long long)runs[k].a, (long long)runs[k].b, (long long)reused, runs[k].reused);
    }
    rlx_program_free(p);
}

/* A gradient program over a dynamic batch: each new batch size reuses
 * the plan and its gradients equal rlx_grad's over static shapes. */
static void loss_and_grads(rlx_tensor *x, rlx_tensor *w, rlx_tensor **out)
{
    rlx_tensor *h = rlx_gelu_tanh(rlx_matmul(x, w));
    out[0] = rlx_mean(rlx_mul(rlx_softmax(h, -1), rlx_sub(h, rlx_narrow(x, 0, 0, 1))), NULL, 0, false);
    CHECK_EQ_INT(rlx_grad(out[0], (rlx_tensor *[]){x, w}, 2, out + 1), RLX_OK);
}

TEST(reuse_gradient_program)
{
    const rlx_dtype dts[] = {RLX_F32, RLX_F64};
    const int64_t sizes[] = {3, 5, 8, 1, 2, 12, 1};
    for (int t = 0; t < 2; t++) {
        rlx_dtype dt = dts[t];
        rlx_tensor *w = rlx_randn(dt, 2, (int64_t[]){W, W}, 7), *x = rlx_input("x", dt, 2, (int64_t[]){-1, W});
        CHECK(rlx_realize(w) == RLX_OK);
        rlx_tensor *o[3];
        loss_and_grads(x, w, o);
        rlx_program *p = rlx_compile(o, 3);
        CHECK(p != NULL);
        if (!p)
            continue;
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            rlx_tensor *xv = data(dt, sizes[k], W, 500 + k), *got[3] = {0}, *want[3];
            CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got), RLX_OK);
            set_backend("ref");
            loss_and_grads(xv, w, want);
            for (int i = 0; i < 3; i++)
                if (got[i])
                    expect_like(got[i], want[i], dt);
            set_backend("jit");
        }
        int64_t made, reused;
        CHECK_EQ_INT(rlx_program_specs(p, NULL, &made), RLX_OK);
        CHECK_EQ_INT(rlx_program_reuses(p, &reused), RLX_OK);
        CHECK_EQ_INT(made, 6); /* 1 is kept the second time */
        /* 5, 8 and 12 from 3's plan; 2 afresh: there the gradient of
         * narrow pads n - 1 = 1 rows, a derived dim of 1 that gives
         * another graph, which the structure check finds */
        CHECK_EQ_INT(reused, 3);
        rlx_program_free(p);
    }
}

/* Threads running one program at once at their own sizes (past the 8
 * kept), adding plans made from each other's while others run them. */
typedef struct {
    rlx_program *p;
    int id, bad;
} runner;

static void *run_sizes(void *arg)
{
    runner *r = arg;
    rlx_scope_begin();
    for (int k = 0; k < 30; k++) {
        int64_t n = 2 + (r->id * 7 + 3 * k) % 17;
        double xd[20 * 3];
        for (int i = 0; i < 3 * n; i++)
            xd[i] = r->id - 0.125 * i;
        rlx_tensor *xv = rlx_from_data(RLX_F64, 2, (int64_t[]){n, 3}, xd), *got[2] = {0};
        double v[20 * 3], s[3];
        if (!xv || rlx_program_run(r->p, &(rlx_binding){"x", xv}, 1, got) != RLX_OK ||
            rlx_read_f64(got[0], v, (size_t)(3 * n)) != RLX_OK || rlx_read_f64(got[1], s, 3) != RLX_OK) {
            r->bad++;
            continue;
        }
        for (int c = 0; c < 3; c++) {
            double sum = 0;
            for (int i = 0; i < n; i++)
                sum += xd[3 * i + c] * xd[3 * i + c];
            r->bad += fabs(s[c] - sum) > 1e-9 * (1 + fabs(sum));
        }
        for (int i = 0; i < 3 * n; i++) /* 2x + the last row */
            r->bad += fabs(v[i] - (2 * xd[i] + xd[3 * (n - 1) + i % 3])) > 1e-12;
    }
    rlx_scope_end();
    return NULL;
}

TEST(reuse_shared_by_threads)
{
    rlx_tensor *x = rlx_input("x", RLX_F64, 2, (int64_t[]){-1, 3}), *o[2];
    o[0] = rlx_add(rlx_mul_s(x, 2), rlx_narrow(x, 0, -1, 1));
    o[1] = rlx_sum(rlx_mul(x, x), (int[]){0}, 1, false);
    rlx_program *p = rlx_compile(o, 2);
    CHECK(p != NULL);
    if (!p)
        return;
    pthread_t th[4];
    runner r[4];
    for (int t = 0; t < 4; t++) {
        r[t] = (runner){p, t, 0};
        CHECK_EQ_INT(pthread_create(&th[t], NULL, run_sizes, &r[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CHECK_EQ_INT(r[t].bad, 0);
    }
    int64_t made, reused;
    CHECK_EQ_INT(rlx_program_specs(p, NULL, &made), RLX_OK);
    CHECK_EQ_INT(rlx_program_reuses(p, &reused), RLX_OK);
    CHECK(made > 8);
    CHECK_EQ_INT(reused, made - 1); /* every size is of class "more": one plan afresh */
    rlx_program_free(p);
}

/* The arena: a plan made from another resolves its own offsets; the
 * program's arena grows only when a larger binding comes. v (a residual
 * sum two kernels read) lives in it. */
static void arena_graph(rlx_tensor *x, rlx_tensor **o)
{
    rlx_tensor *v = rlx_add(rlx_matmul(x, rlx_ones(RLX_F32, 2, (int64_t[]){64, 64})), x);
    o[0] = rlx_softmax(v, -1);
    o[1] = rlx_sum(rlx_mul(v, v), (int[]){0}, 1, false);
}

TEST(reuse_arena_grows_only_for_larger)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, 64}), *o[2];
    arena_graph(x, o);
    rlx_program *p = rlx_compile(o, 2);
    CHECK(p != NULL);
    if (!p)
        return;
    const int64_t sizes[] = {32, 8, 16, 31, 64, 2};
    int64_t bytes[6];
    for (int k = 0; k < 6; k++) {
        rlx_tensor *xv = data(RLX_F32, sizes[k], 64, 600 + (uint64_t)k), *got[2] = {0}, *want[2];
        CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got), RLX_OK);
        set_backend("ref");
        arena_graph(xv, want);
        for (int i = 0; i < 2; i++)
            if (got[i])
                expect_like(got[i], want[i], RLX_F32);
        set_backend("jit");
        int count;
        CHECK_EQ_INT(rlx_program_arenas(p, &count, &bytes[k]), RLX_OK);
        CHECK_EQ_INT(count, 1);
    }
    CHECK(bytes[0] >= 32 * 64 * 4);
    CHECK(bytes[1] == bytes[0] && bytes[2] == bytes[0] && bytes[3] == bytes[0]); /* smaller: the same arena */
    CHECK(bytes[4] >= 64 * 64 * 4);                                               /* larger: grown */
    CHECK(bytes[5] == bytes[4]);
    int64_t reused;
    CHECK_EQ_INT(rlx_program_reuses(p, &reused), RLX_OK);
    CHECK_EQ_INT(reused, 5);
    rlx_program_free(p);
}

/* One-input programs of the tests below: p runs f over xv (its value
 * against f over xv on the oracle), then p keeps `kept` specs, has made
 * `made` and reused `reused` plans. */
typedef rlx_tensor *(*expr1)(rlx_tensor *x);

static void run_counted(rlx_program *p, expr1 f, rlx_tensor *xv, int kept, int64_t made, int64_t reused)
{
    rlx_tensor *got = NULL;
    CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", xv}, 1, &got), RLX_OK);
    set_backend("ref");
    rlx_tensor *want = f(xv);
    if (got)
        expect_like(got, want, RLX_F32);
    set_backend("jit");
    int k;
    int64_t m, r;
    CHECK_EQ_INT(rlx_program_specs(p, &k, &m), RLX_OK);
    CHECK_EQ_INT(rlx_program_reuses(p, &r), RLX_OK);
    CHECK_EQ_INT(k, kept);
    CHECK_EQ_INT(m, made);
    CHECK_EQ_INT(r, reused);
}

static rlx_tensor *softmax_of_rows(rlx_tensor *x)
{
    return rlx_softmax(rlx_add(rlx_mul_s(x, 3), rlx_sum(x, (int[]){0}, 1, true)), -1);
}

/* With 8 specs kept, a new binding evicts the least recently used before
 * it is planned, but never the plan it is made from: here the oldest
 * spec, (1, 5), is the only one of (1, more)'s size classes, and (1, 6)
 * is still planned from it (freeing it first would plan (1, 6) afresh);
 * the next oldest, (2, 2), is evicted instead. Binding (2, 2) again
 * plans it again (from another (more, more) spec), now evicting (1, 5),
 * still the least recently run; (1, 5) again is planned from (1, 6). */
TEST(reuse_evicts_but_the_plan_reused)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, -1}), *o = softmax_of_rows(x);
    rlx_program *p = rlx_compile(&o, 1);
    CHECK(p != NULL);
    if (!p)
        return;
    const int64_t rows[] = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 1}, cols[] = {5, 2, 2, 2, 2, 2, 2, 2, 6, 2, 5};
    /* after each binding: specs made and plans reused so far */
    const int64_t made_after[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    const int64_t reused_after[] = {0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    for (int k = 0; k < 11; k++)
        run_counted(p, softmax_of_rows, data(RLX_F32, rows[k], cols[k], 300 + (uint64_t)k), k < 8 ? k + 1 : 8,
                    made_after[k], reused_after[k]);
    rlx_program_free(p);
}

/* Option program_specs: how many specializations a program keeps. 20
 * kept, 20 sizes run twice prepare 20; lowered to 2, the next new size
 * evicts down to it (planned from a kept spec); at 1, a new size is
 * still planned from the one kept, which is evicted after; bad values
 * are refused and change nothing; 0 is the default again. */
TEST(reuse_program_specs_option)
{
    char v[32];
    CHECK_EQ_INT(rlx_get_option("program_specs", v, sizeof v), RLX_OK);
    CHECK(strcmp(v, "8") == 0);
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, 3}), *o = softmax_of_rows(x);
    rlx_program *p = rlx_compile(&o, 1);
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK_EQ_INT(rlx_set_option("program_specs", "20"), RLX_OK);
    for (int rep = 0; rep < 2; rep++)
        for (int64_t n = 2; n < 22; n++)
            run_counted(p, softmax_of_rows, data(RLX_F32, n, 3, 400 + (uint64_t)n), rep ? 20 : (int)n - 1,
                        rep ? 20 : n - 1, rep ? 19 : n - 2); /* the second time, every size is kept */
    CHECK_EQ_INT(rlx_set_option("program_specs", "2"), RLX_OK);
    run_counted(p, softmax_of_rows, data(RLX_F32, 30, 3, 7), 2, 21, 20);
    CHECK_EQ_INT(rlx_set_option("program_specs", "1"), RLX_OK);
    run_counted(p, softmax_of_rows, data(RLX_F32, 31, 3, 8), 1, 22, 21);
    const char *bad[] = {"-1", "4097", "x", "", "2.5"};
    for (int i = 0; i < 5; i++)
        CHECK_ERR(rlx_set_option("program_specs", bad[i]), RLX_E_ARG, "rlx_set_option");
    CHECK_EQ_INT(rlx_get_option("program_specs", v, sizeof v), RLX_OK);
    CHECK(strcmp(v, "1") == 0);
    CHECK_EQ_INT(rlx_set_option("program_specs", "0"), RLX_OK);
    CHECK_EQ_INT(rlx_get_option("program_specs", v, sizeof v), RLX_OK);
    CHECK(strcmp(v, "8") == 0);
    rlx_program_free(p);
}

TEST_MAIN(T(reuse_matches_reference), T(reuse_needs_same_size_class), T(reuse_gradient_program),
          T(reuse_shared_by_threads), T(reuse_arena_grows_only_for_larger), T(reuse_evicts_but_the_plan_reused),
          T(reuse_program_specs_option))
