/*
 * test_program.c — compiled programs with dynamic (-1) dims: one program
 * run at many bound sizes gives what the same expression built over the
 * bound values gives on the reference backend; shapes that do not fit are
 * errors, never crashes.
 */
#include <pthread.h>

#include "harness.h"

/* An expression over x and fixed parameters; built once over an rlx_input
 * (traced) and once over each concrete value (the expectation). */
typedef rlx_tensor *(*expr_fn)(rlx_tensor *x, rlx_tensor *const *par);

enum { C = 5 }; /* the static (feature) dim of the [-1, C] inputs */

static const int ax0[] = {0}, ax1[] = {1};

static rlx_tensor *e_affine(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_add_s(rlx_mul_s(x, 2), 1); }
static rlx_tensor *e_relu_linear(rlx_tensor *x, rlx_tensor *const *par) { return rlx_relu(rlx_linear(x, par[0], par[1])); }
static rlx_tensor *e_matmul_bias(rlx_tensor *x, rlx_tensor *const *par)
{
    return rlx_tanh(rlx_add(rlx_matmul(x, rlx_transpose(par[0], 0, NULL)), par[1]));
}
static rlx_tensor *e_softmax(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_softmax(x, -1); }
static rlx_tensor *e_log_softmax0(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_log_softmax(x, 0); }
static rlx_tensor *e_layer_norm(rlx_tensor *x, rlx_tensor *const *par) { return rlx_layer_norm(x, par[2], par[3], 1e-5); }
static rlx_tensor *e_mean0(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_mean(x, ax0, 1, false); }
static rlx_tensor *e_var0_keep(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_var(x, ax0, 1, true); }
static rlx_tensor *e_std_all(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_std(x, NULL, 0, false); }
static rlx_tensor *e_center0(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_sub(x, rlx_mean(x, ax0, 1, true)); }
static rlx_tensor *e_sum1(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_sum(x, ax1, 1, false); }
static rlx_tensor *e_max0(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_max(x, ax0, 1, true); }
static rlx_tensor *e_zeros_like(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    return rlx_add(rlx_full_like(x, 3), rlx_ones_like(x));
}
static rlx_tensor *e_where(rlx_tensor *x, rlx_tensor *const *par)
{
    return rlx_where(rlx_gt(x, par[4]), x, rlx_mul(x, par[4]));
}
static rlx_tensor *e_flatten(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_exp(rlx_flatten(x)); }
static rlx_tensor *e_reshape(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    return rlx_sum(rlx_reshape(x, 3, (int64_t[]){-1, 1, C}), ax1, 1, false);
}
static rlx_tensor *e_transpose(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    return rlx_sqrt(rlx_abs(rlx_transpose(x, 0, NULL)));
}
static rlx_tensor *e_unsqueeze(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    return rlx_mul(rlx_unsqueeze(x, 0), rlx_unsqueeze(x, 1));
}
static rlx_tensor *e_logsumexp(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_logsumexp(x, 0, false); }
static rlx_tensor *e_cast(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_cast(rlx_gt_s(x, 0), RLX_I32); }

/* over x [-1, 3, C] */
static rlx_tensor *e3_matmul(rlx_tensor *x, rlx_tensor *const *par) { return rlx_matmul(x, rlx_transpose(par[0], 0, NULL)); }
static rlx_tensor *e3_bmm(rlx_tensor *x, rlx_tensor *const *par)
{
    return rlx_matmul(par[0], rlx_transpose(x, 3, (int[]){0, 2, 1}));
}
static rlx_tensor *e3_linear(rlx_tensor *x, rlx_tensor *const *par) { return rlx_gelu(rlx_linear(x, par[0], par[1])); }
static rlx_tensor *e3_attention(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    return rlx_attention(x, x, x, 1, C, RLX_MASK_CAUSAL, 0);
}
static rlx_tensor *e3_solve(rlx_tensor *x, rlx_tensor *const *par)
{
    rlx_tensor *a = rlx_add(rlx_eye(rlx_dtype_of(x), 3), rlx_mul_s(rlx_ones(rlx_dtype_of(x), 2, (int64_t[]){3, 3}), 0.25));
    (void)par;
    return rlx_solve(a, x);
}
static rlx_tensor *e3_norm(rlx_tensor *x, rlx_tensor *const *par) { return rlx_rms_norm(x, par[2], 1e-6); }

static const struct {
    const char *name;
    expr_fn f;
} exprs3[] = {{"matmul3", e3_matmul}, {"bmm", e3_bmm},     {"linear3", e3_linear},
              {"attention", e3_attention}, {"solve3", e3_solve}, {"rms_norm3", e3_norm}};

static const struct {
    const char *name;
    expr_fn f;
} exprs[] = {
    {"affine", e_affine},       {"relu_linear", e_relu_linear}, {"matmul_bias", e_matmul_bias},
    {"softmax", e_softmax},     {"log_softmax0", e_log_softmax0}, {"layer_norm", e_layer_norm},
    {"mean0", e_mean0},         {"var0_keep", e_var0_keep},   {"std_all", e_std_all},
    {"center0", e_center0},     {"sum1", e_sum1},             {"max0", e_max0},
    {"full_like", e_zeros_like}, {"where", e_where},          {"flatten", e_flatten},
    {"reshape", e_reshape},     {"transpose", e_transpose},   {"unsqueeze", e_unsqueeze},
    {"logsumexp", e_logsumexp}, {"cast", e_cast},
};

static void params(rlx_dtype dt, rlx_tensor **par)
{
    par[0] = trand(dt, 2, (int64_t[]){4, C}, -1, 1); /* w [4, C] */
    par[1] = trand(dt, 1, (int64_t[]){4}, -1, 1);    /* b [4] */
    par[2] = trand(dt, 1, (int64_t[]){C}, 0.5, 2);   /* gamma [C] */
    par[3] = trand(dt, 1, (int64_t[]){C}, -1, 1);    /* beta [C] */
    par[4] = trand(dt, 1, (int64_t[]){C}, -0.5, 0.5);
}

/* f(x) on the reference backend, for the bound value xv. */
static rlx_tensor *expected(expr_fn f, rlx_tensor *xv, rlx_tensor *const *par)
{
    char backend[16];
    CHECK_EQ_INT(rlx_get_option("backend", backend, sizeof backend), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
    rlx_tensor *want = f(xv, par);
    CHECK(want != NULL && rlx_realize(want) == RLX_OK);
    CHECK_EQ_INT(rlx_set_option("backend", backend), RLX_OK);
    return want;
}

/* Compiles f over x [-1, C] (under the backend selected now) and runs it
 * at batch sizes 1, 3, 0, 17 and 3 again; each result must equal the
 * reference evaluation of f over the bound value. */
static void check_expr(const char *name, expr_fn f, rlx_dtype dt, int rank)
{
    rlx_tensor *par[5];
    params(dt, par);
    int64_t traced[3] = {-1, rank == 3 ? 3 : C, C}, bound[3];
    memcpy(bound, traced, sizeof bound);
    rlx_tensor *x = rlx_input("x", dt, rank, traced);
    rlx_tensor *y = f(x, par);
    if (!y) {
        test_fail(__FILE__, __LINE__, "%s: tracing over a dynamic dim failed: %s", name, rlx_last_error());
        return;
    }
    rlx_program *p = rlx_compile(&y, 1);
    if (!p) {
        test_fail(__FILE__, __LINE__, "%s: rlx_compile: %s", name, rlx_last_error());
        return;
    }
    const int64_t batches[] = {1, 3, 0, 17, 3};
    double tol = dt == RLX_F32 ? 2e-5 : 1e-12;
    for (size_t k = 0; k < sizeof batches / sizeof *batches; k++) {
        bound[0] = batches[k];
        rlx_tensor *xv = trand(dt, rank, bound, -2, 2);
        rlx_tensor *got = NULL;
        rlx_binding b = {"x", xv};
        rlx_status st = rlx_program_run(p, &b, 1, &got);
        if (st != RLX_OK) {
            test_fail(__FILE__, __LINE__, "%s at batch %lld: %s", name, (long long)batches[k], rlx_last_error());
            continue;
        }
        rlx_tensor *want = expected(f, xv, par);
        CHECK_EQ_INT(rlx_rank(got), rlx_rank(want));
        for (int d = 0; d < rlx_rank(want); d++)
            CHECK_EQ_INT(rlx_dim(got, d), rlx_dim(want, d));
        EXPECT_SAME(got, want, tol);
    }
    rlx_program_free(p);
}

TEST(dynamic_batch_matches_reference)
{
    char backend[16];
    CHECK_EQ_INT(rlx_get_option("backend", backend, sizeof backend), RLX_OK);
    const char *backends[] = {"jit", "ref"};
    for (int be = 0; be < 2; be++) {
        CHECK_EQ_INT(rlx_set_option("backend", backends[be]), RLX_OK);
        for (size_t i = 0; i < sizeof exprs / sizeof *exprs; i++) {
            check_expr(exprs[i].name, exprs[i].f, RLX_F32, 2);
            check_expr(exprs[i].name, exprs[i].f, RLX_F64, 2);
        }
        for (size_t i = 0; i < sizeof exprs3 / sizeof *exprs3; i++) {
            check_expr(exprs3[i].name, exprs3[i].f, RLX_F32, 3);
            check_expr(exprs3[i].name, exprs3[i].f, RLX_F64, 3);
        }
    }
    CHECK_EQ_INT(rlx_set_option("backend", backend), RLX_OK);
}

TEST(dynamic_introspection)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, 3});
    CHECK_EQ_INT(rlx_dim(x, 0), -1);
    CHECK_EQ_INT(rlx_dim(x, 1), 3);
    CHECK_EQ_INT(rlx_numel(x), -1);
    rlx_tensor *s = rlx_sum(x, ax1, 1, false);
    CHECK_EQ_INT(rlx_dim(s, 0), -1);
    rlx_tensor *m = rlx_mean(x, ax0, 1, false);
    CHECK_EQ_INT(rlx_dim(m, 0), 3);
    CHECK_EQ_INT(rlx_numel(m), 3);
    CHECK_ERR(rlx_realize(s), RLX_E_ARG, "rlx_realize"); /* an unbound input */
}

/* Two inputs sharing a dynamic dim, a static one, more bound shapes than
 * the program keeps specializations for, and the error cases. */
TEST(dynamic_bindings)
{
    rlx_tensor *x = rlx_input("x", RLX_F64, 2, (int64_t[]){-1, 2});
    rlx_tensor *y = rlx_input("y", RLX_F64, 2, (int64_t[]){-1, 2});
    rlx_tensor *z = rlx_input("z", RLX_F64, 1, (int64_t[]){2});
    rlx_tensor *outs[2] = {rlx_add(rlx_mul(x, y), z), rlx_sum(rlx_sub(x, y), NULL, 0, false)};
    rlx_program *p = rlx_compile(outs, 2);
    CHECK(p != NULL);
    rlx_tensor *zv = tf64(1, (int64_t[]){2}, (double[]){10, 20});
    for (int64_t n = 0; n < 20; n++) { /* 20 shapes: beyond the kept specializations */
        double xd[40], yd[40], want0[40], want1 = 0;
        for (int i = 0; i < 2 * n; i++) {
            xd[i] = i + 1;
            yd[i] = 0.5 * i;
            want0[i] = xd[i] * yd[i] + (i % 2 ? 20 : 10);
            want1 += xd[i] - yd[i];
        }
        rlx_binding b[3] = {{"x", tf64(2, (int64_t[]){n, 2}, xd)}, {"y", tf64(2, (int64_t[]){n, 2}, yd)}, {"z", zv}};
        rlx_tensor *res[2];
        CHECK_EQ_INT(rlx_program_run(p, b, 3, res), RLX_OK);
        EXPECT(res[0], RLX_F64, 2, ((int64_t[]){n, 2}), want0, 1e-15);
        EXPECT(res[1], RLX_F64, 0, NULL, (&want1), 1e-15);
    }
    rlx_tensor *res[2];
    rlx_binding mismatch[3] = {{"x", rlx_zeros(RLX_F64, 2, (int64_t[]){3, 2})},
                               {"y", rlx_zeros(RLX_F64, 2, (int64_t[]){4, 2})}, {"z", zv}};
    CHECK_EQ_INT(rlx_program_run(p, mismatch, 3, res), RLX_E_SHAPE);
    CHECK(res[0] == NULL && res[1] == NULL);
    CHECK(strstr(rlx_last_error(), "rlx_program_run") && strstr(rlx_last_error(), "[3,2]") && strstr(rlx_last_error(), "[4,2]"));
    rlx_binding static_dim[3] = {{"x", rlx_zeros(RLX_F64, 2, (int64_t[]){3, 3})},
                                 {"y", rlx_zeros(RLX_F64, 2, (int64_t[]){3, 3})}, {"z", zv}};
    CHECK_EQ_INT(rlx_program_run(p, static_dim, 3, res), RLX_E_SHAPE);
    CHECK(strstr(rlx_last_error(), "'x'") && strstr(rlx_last_error(), "[-1,2]"));
    rlx_binding rank[3] = {{"x", rlx_zeros(RLX_F64, 1, (int64_t[]){2})}, {"y", rlx_zeros(RLX_F64, 2, (int64_t[]){1, 2})},
                           {"z", zv}};
    CHECK_ERR(rlx_program_run(p, rank, 3, res), RLX_E_SHAPE, "rlx_program_run");
    rlx_binding dtype[3] = {{"x", rlx_zeros(RLX_F32, 2, (int64_t[]){1, 2})},
                            {"y", rlx_zeros(RLX_F64, 2, (int64_t[]){1, 2})}, {"z", zv}};
    CHECK_ERR(rlx_program_run(p, dtype, 3, res), RLX_E_DTYPE, "rlx_program_run");
    rlx_program_free(p);
}

/* Every op that reads a dynamic dim while tracing either refuses at trace
 * time, or refuses at run time, or matches the reference: never a wrong
 * value or a crash. */
static rlx_tensor *o_slice(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_slice(x, 0, 1, RLX_END, 2); }
static rlx_tensor *o_slice1(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_slice(x, 1, 1, 4, 1); }
static rlx_tensor *o_cat(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    return rlx_cat((rlx_tensor *[]){x, x}, 2, 0);
}
static rlx_tensor *o_cat1(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    return rlx_cat((rlx_tensor *[]){x, x}, 2, 1);
}
static rlx_tensor *o_cumsum(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_cumsum(x, 0, false); }
static rlx_tensor *o_argmax(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_argmax(x, 0, false); }
static rlx_tensor *o_broadcast(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    return rlx_broadcast_to(rlx_sum(x, ax0, 1, true), 2, (int64_t[]){4, C});
}
static rlx_tensor *o_sum_ones(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    return rlx_sum(rlx_ones_like(x), NULL, 0, false);
}
static rlx_tensor *o_flip(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_slice(x, 0, RLX_END, RLX_END, -1); }
static rlx_tensor *o_roll(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_roll(x, 0, 1); }
static rlx_tensor *o_roll0(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_roll(x, 0, 0); }
static rlx_tensor *o_rms(rlx_tensor *x, rlx_tensor *const *par) { return rlx_rms_norm(x, par[2], 1e-6); }

TEST(dynamic_ops_never_wrong)
{
    static const struct {
        const char *name;
        expr_fn f;
    } ops[] = {{"slice0", o_slice},   {"slice1", o_slice1}, {"cat0", o_cat},           {"cat1", o_cat1},
               {"cumsum", o_cumsum},  {"argmax", o_argmax}, {"broadcast", o_broadcast}, {"sum_ones", o_sum_ones},
               {"flip", o_flip},      {"rms_norm", o_rms},  {"roll", o_roll},          {"roll0", o_roll0}};
    rlx_tensor *par[5];
    params(RLX_F32, par);
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, C});
        rlx_clear_error();
        rlx_tensor *y = ops[i].f(x, par);
        if (!y) {
            CHECK(rlx_last_status() != RLX_OK);
            continue;
        }
        rlx_program *p = rlx_compile(&y, 1);
        if (!p) {
            CHECK(rlx_last_status() != RLX_OK);
            continue;
        }
        for (int64_t n = 1; n <= 4; n += 3) {
            rlx_tensor *xv = trand(RLX_F32, 2, (int64_t[]){n, C}, -2, 2), *got = NULL;
            rlx_binding b = {"x", xv};
            if (rlx_program_run(p, &b, 1, &got) != RLX_OK) {
                CHECK(got == NULL && rlx_last_status() != RLX_OK);
                continue;
            }
            rlx_tensor *want = ops[i].f(xv, par);
            if (!want || rlx_rank(got) != rlx_rank(want) || rlx_numel(got) != rlx_numel(want)) {
                test_fail(__FILE__, __LINE__, "%s at batch %lld: ran but does not match", ops[i].name, (long long)n);
            } else {
                EXPECT_SAME(got, want, 1e-5);
            }
        }
        rlx_program_free(p);
    }
    rlx_clear_error();
}

/* Threads running one dynamic program at once, each at its own batch
 * sizes, so they add specializations concurrently and run them while
 * others are added: every result must be right. */
typedef struct {
    rlx_program *p;
    int id;
    int bad;
} runner;

static void *run_sizes(void *arg)
{
    runner *r = arg;
    rlx_scope_begin();
    for (int k = 0; k < 24; k++) {
        int64_t n = 1 + (r->id * 5 + k) % 12; /* 12 shapes: past the kept 8 */
        double xd[12 * 2];
        for (int i = 0; i < 2 * n; i++)
            xd[i] = r->id + 0.25 * i;
        rlx_tensor *xv = rlx_from_data(RLX_F64, 2, (int64_t[]){n, 2}, xd), *got = NULL;
        double v[12 * 2];
        if (!xv || rlx_program_run(r->p, &(rlx_binding){"x", xv}, 1, &got) != RLX_OK ||
            rlx_read_f64(got, v, (size_t)(2 * n)) != RLX_OK) {
            r->bad++;
            continue;
        }
        for (int i = 0; i < 2 * n; i++) /* x - mean over the batch, + 1 */
            r->bad += fabs(v[i] - (xd[i] - (xd[i % 2] + 0.25 * (n - 1)) + 1)) > 1e-12;
    }
    rlx_scope_end();
    return NULL;
}

TEST(dynamic_program_shared_by_threads)
{
    rlx_tensor *x = rlx_input("x", RLX_F64, 2, (int64_t[]){-1, 2});
    rlx_tensor *y = rlx_add_s(rlx_sub(x, rlx_mean(x, ax0, 1, true)), 1);
    rlx_program *p = rlx_compile(&y, 1);
    CHECK(p != NULL);
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
    rlx_program_free(p);
}

/* Allocation failures while compiling and specializing: NOMEM, no leak. */
static int dynamic_workload(void)
{
    rlx_scope_begin();
    rlx_tensor *par[5] = {rlx_ones(RLX_F32, 2, (int64_t[]){4, C}), rlx_ones(RLX_F32, 1, (int64_t[]){4})};
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, C});
    rlx_tensor *outs[2] = {x && par[0] && par[1] ? e_relu_linear(x, par) : NULL, x ? e_center0(x, par) : NULL};
    rlx_program *p = outs[0] && outs[1] ? rlx_compile(outs, 2) : NULL;
    int ok = p != NULL;
    for (int64_t n = 2; n <= 3 && ok; n++) {
        rlx_tensor *xv = rlx_ones(RLX_F32, 2, (int64_t[]){n, C}), *got[2];
        double v[4 * 3];
        ok = xv && rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got) == RLX_OK &&
             rlx_read_f64(got[0], v, (size_t)(4 * n)) == RLX_OK;
        if (ok && v[4 * n - 1] != C + 1)
            test_fail(__FILE__, __LINE__, "dynamic walk: %g", v[4 * n - 1]);
    }
    rlx_program_free(p);
    rlx_scope_end();
    return ok;
}

TEST(dynamic_allocation_failures) { ALLOC_WALK(dynamic_workload, 20); }

TEST_MAIN(T(dynamic_batch_matches_reference), T(dynamic_introspection), T(dynamic_bindings), T(dynamic_ops_never_wrong),
          T(dynamic_program_shared_by_threads), T(dynamic_allocation_failures))
