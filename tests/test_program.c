/*
 * test_program.c — compiled programs with dynamic (-1) dims: one program
 * run at many bound sizes gives what the same expression built over the
 * bound values gives on the reference backend; shapes that do not fit are
 * errors, never crashes.
 */
#include <pthread.h>

#include "harness.h"
#include "tensor/ts.h" /* white-box: ts_node, the detached-node count */

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

/* A reduction over an axis bound empty, read by a non-empty node in the
 * same kernel (here a cat): its result is the reduction's identity, not
 * whatever the output buffer held (the fused loop ran over the empty
 * source and stored nothing). */
TEST(dynamic_empty_reduction_in_cat)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, 3}), *y = rlx_input("y", RLX_F32, 2, (int64_t[]){-1, 3});
    rlx_tensor *xy = rlx_mul(rlx_unsqueeze(x, 1), rlx_unsqueeze(y, 0)); /* [nx, ny, 3] */
    rlx_tensor *outs[2] = {rlx_cat((rlx_tensor *[]){x, rlx_add_s(rlx_sum(xy, (int[]){0}, 1, false), 1)}, 2, 0),
                           rlx_cat((rlx_tensor *[]){x, rlx_max(xy, (int[]){0}, 1, false)}, 2, 0)};
    rlx_program *p = rlx_compile(outs, 2);
    CHECK(p != NULL);
    int64_t sizes[][2] = {{1, 1}, {0, 2}, {2, 3}, {0, 3}, {3, 0}, {0, 2}};
    for (int k = 0; p && k < 6; k++) {
        int64_t nx = sizes[k][0], ny = sizes[k][1];
        rlx_binding b[2] = {{"x", rlx_full(RLX_F32, 2, (int64_t[]){nx, 3}, 0.5)},
                            {"y", rlx_full(RLX_F32, 2, (int64_t[]){ny, 3}, 0.25)}};
        rlx_tensor *got[2];
        CHECK_EQ_INT(rlx_program_run(p, b, 2, got), RLX_OK);
        double want_sum[30], want_max[30];
        for (int64_t i = 0; i < 3 * (nx + ny); i++) {
            bool from_x = i < 3 * nx;
            want_sum[i] = from_x ? 0.5 : 1 + 0.125 * (double)nx;
            want_max[i] = from_x ? 0.5 : nx ? 0.125 : -INFINITY;
        }
        EXPECT(got[0], RLX_F32, 2, ((int64_t[]){nx + ny, 3}), want_sum, 0);
        EXPECT(got[1], RLX_F32, 2, ((int64_t[]){nx + ny, 3}), want_max, 0);
    }
    rlx_program_free(p);
}

/* argmax/argmin over a dynamic axis bound to 0: RLX_E_SHAPE naming the op
 * and the bound shape (as rlx_argmax refuses an empty axis while
 * tracing), on both backends; an empty axis off the reduced one is fine,
 * and so is the next run at other sizes. */
TEST(dynamic_argmax_of_an_empty_axis)
{
    EACH_BACKEND(be)
    {
        rlx_tensor *x = rlx_input("x", RLX_F64, 2, (int64_t[]){-2, -3});
        rlx_tensor *outs[2] = {rlx_argmax(x, 1, false), rlx_argmin(x, 0, true)};
        rlx_program *p = rlx_compile(outs, 2);
        CHECK(p != NULL);
        const int64_t sizes[][2] = {{2, 3}, {2, 0}, {0, 2}, {0, 0}, {3, 2}};
        const char *want[] = {NULL, "'argmax' over axis 1 of [2,0]", "'argmin' over axis 0 of [0,2]", "[0,0]", NULL};
        for (int k = 0; p && k < 5; k++) {
            int64_t b = sizes[k][0], s = sizes[k][1];
            rlx_tensor *xv = trand(RLX_F64, 2, (int64_t[]){b, s}, -1, 1), *got[2] = {NULL, NULL};
            rlx_status st = rlx_program_run(p, (rlx_binding[]){{"x", xv}}, 1, got);
            if (want[k]) {
                CHECK_EQ_INT(st, RLX_E_SHAPE);
                CHECK(strstr(rlx_last_error(), "rlx_program_run") && strstr(rlx_last_error(), want[k]));
                CHECK(got[0] == NULL && got[1] == NULL);
                rlx_clear_error();
                continue;
            }
            CHECK_EQ_INT(st, RLX_OK);
            EXPECT_SAME(got[0], rlx_argmax(xv, 1, false), 0);
            EXPECT_SAME(got[1], rlx_argmin(xv, 0, true), 0);
        }
        rlx_program_free(p);
    }
}

/* softmax_cross_entropy_with_logits over a dynamic count of rows and of
 * classes (it once compared the labels with the traced -1 classes and
 * failed every run): loss and gradient against the static graph on both
 * backends, at sizes with 1 and several classes; a label >= the bound
 * class count, or negative, is RLX_E_ARG at the run. */
TEST(dynamic_cross_entropy_classes)
{
    EACH_BACKEND(be)
    {
        rlx_tensor *x = rlx_input("x", RLX_F64, 2, (int64_t[]){-2, -3}), *l = rlx_input("l", RLX_I32, 1, (int64_t[]){-2});
        rlx_tensor *outs[2] = {rlx_softmax_cross_entropy_with_logits(rlx_tanh(x), l), NULL};
        CHECK_EQ_INT(rlx_grad(rlx_sum(outs[0], NULL, 0, false), &x, 1, &outs[1]), RLX_OK);
        rlx_program *p = rlx_compile(outs, 2);
        CHECK(p != NULL);
        const int64_t sizes[][2] = {{3, 5}, {2, 1}, {0, 4}, {4, 3}, {1, 7}, {3, 5}};
        for (int k = 0; p && k < 6; k++) {
            int64_t n = sizes[k][0], c = sizes[k][1];
            int32_t lab[4];
            for (int64_t i = 0; i < n; i++)
                lab[i] = (int32_t)((i * 2 + k) % c);
            rlx_tensor *xv = trand(RLX_F64, 2, (int64_t[]){n, c}, -2, 2), *lv = rlx_from_data(RLX_I32, 1, &n, lab);
            rlx_tensor *got[2] = {NULL, NULL};
            CHECK_EQ_INT(rlx_program_run(p, (rlx_binding[]){{"x", xv}, {"l", lv}}, 2, got), RLX_OK);
            rlx_tensor *want = rlx_softmax_cross_entropy_with_logits(rlx_tanh(xv), lv), *gw = NULL;
            CHECK_EQ_INT(rlx_grad(rlx_sum(want, NULL, 0, false), &xv, 1, &gw), RLX_OK);
            EXPECT_SAME(got[0], want, 1e-12);
            EXPECT_SAME(got[1], gw, 1e-12);
            for (int bad = 0; n > 0 && bad < 2; bad++) {
                lab[n - 1] = bad ? -1 : (int32_t)c;
                rlx_tensor *lb = rlx_from_data(RLX_I32, 1, &n, lab), *none[2] = {NULL, NULL};
                CHECK_ERR(rlx_program_run(p, (rlx_binding[]){{"x", xv}, {"l", lb}}, 2, none), RLX_E_ARG,
                          "rlx_program_run");
                CHECK(none[0] == NULL);
            }
        }
        rlx_program_free(p);
    }
}

/* rope with positions over a table of dynamic length: a negative position
 * is RLX_E_ARG at the run (it once read the table's last row, as a gather
 * counts from the end), as one past the bound length is. */
TEST(dynamic_rope_table_positions)
{
    rlx_tensor *x = rlx_input("x", RLX_F64, 3, (int64_t[]){1, -3, 4}), *p = rlx_input("p", RLX_I64, 1, (int64_t[]){-3});
    rlx_tensor *c = rlx_input("c", RLX_F64, 2, (int64_t[]){-4, 2}), *s = rlx_input("s", RLX_F64, 2, (int64_t[]){-4, 2});
    rlx_rope_opts o = {.positions = p};
    rlx_tensor *y = rlx_rope_ex(x, c, s, 4, &o);
    rlx_program *prog = rlx_compile(&y, 1);
    CHECK(prog != NULL);
    rlx_tensor *xv = trand(RLX_F64, 3, (int64_t[]){1, 3, 4}, -1, 1), *cv = trand(RLX_F64, 2, (int64_t[]){6, 2}, -1, 1),
               *sv = trand(RLX_F64, 2, (int64_t[]){6, 2}, -1, 1);
    const int64_t at[3][3] = {{5, 0, 2}, {0, -1, 2}, {0, 6, 1}};
    for (int k = 0; prog && k < 3; k++) {
        rlx_tensor *pv = rlx_from_data(RLX_I64, 1, (int64_t[]){3}, at[k]), *got = NULL;
        rlx_status st = rlx_program_run(prog, (rlx_binding[]){{"x", xv}, {"p", pv}, {"c", cv}, {"s", sv}}, 4, &got);
        if (k == 0) {
            CHECK_EQ_INT(st, RLX_OK);
            EXPECT_SAME(got, rlx_rope_ex(xv, cv, sv, 4, &(rlx_rope_opts){.positions = pv}), 0);
        } else {
            CHECK_EQ_INT(st, RLX_E_ARG);
            CHECK(got == NULL);
            rlx_clear_error();
        }
    }
    rlx_program_free(prog);
}

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

/* Ops over a dynamic axis (axis 0 of x [-1, C]): traced once, run at
 * many sizes, each result equal to the same op over the bound value
 * (static shapes) on the reference backend; a size an op cannot take (a
 * narrow past the end) is RLX_E_SHAPE naming the slice. */
static rlx_tensor *d_slice_step(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_slice(x, 0, 1, RLX_END, 2); }
static rlx_tensor *d_slice_tail(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_slice(x, 0, -3, RLX_END, 1); }
static rlx_tensor *d_slice_mid(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_slice(x, 0, 2, -1, 1); }
static rlx_tensor *d_slice_back(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_slice(x, 0, -2, 0, -2); }
static rlx_tensor *d_flip(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_flip(x, 0); }
static rlx_tensor *d_roll(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_roll(x, 0, 2); }
static rlx_tensor *d_roll_neg(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_roll(x, 0, -7); }
static rlx_tensor *d_narrow(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_narrow(x, 0, 1, 2); }
static rlx_tensor *d_narrow_end(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_narrow(x, 0, -2, 2); }
static rlx_tensor *d_select(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_select(x, 0, -1); }
static rlx_tensor *d_split(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    rlx_tensor *p[3];
    if (rlx_split(x, 0, 3, (int64_t[]){1, -1, 1}, p) != RLX_OK)
        return NULL;
    return rlx_cat((rlx_tensor *[]){rlx_mul_s(p[2], 3), p[0], rlx_mul_s(p[1], 2)}, 3, 0);
}
static rlx_tensor *d_chunk(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    rlx_tensor *p[3];
    if (rlx_chunk(x, 0, 3, p) != RLX_OK)
        return NULL;
    return rlx_cat((rlx_tensor *[]){rlx_mul_s(p[2], 3), p[0], rlx_mul_s(p[1], 2)}, 3, 0);
}
static rlx_tensor *d_mean(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_mean(x, ax0, 1, false); }
static rlx_tensor *d_var(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_var(x, ax0, 1, true); }
static rlx_tensor *d_std(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_std(x, NULL, 0, false); }
static rlx_tensor *d_reshape(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par; /* [n, C] -> [n*C] -> [n, C] (one -1 each), and back through a flatten */
    rlx_tensor *f = rlx_reshape(x, 1, (int64_t[]){-1});
    return rlx_add(rlx_reshape(f, 2, (int64_t[]){-1, C}), rlx_reshape(rlx_exp(f), 2, (int64_t[]){-1, C}));
}
static rlx_tensor *d_pad(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_pad(x, 0, 2, 1, -0.5); }
static rlx_tensor *d_reflect(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    return rlx_pad_mode(x, 0, 2, 1, RLX_PAD_REFLECT);
}
static rlx_tensor *d_replicate(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    return rlx_pad_mode(x, 0, 1, 3, RLX_PAD_REPLICATE);
}
static rlx_tensor *d_pad_static_axis(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par; /* the static axis 1 padded (a tile, a flip) while axis 0 is dynamic */
    return rlx_add(rlx_pad_mode(x, 1, 2, 1, RLX_PAD_REPLICATE), rlx_pad_mode(x, 1, 1, 2, RLX_PAD_REFLECT));
}
static rlx_tensor *d_reflect_back(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par; /* a padded dynamic axis meets a slice of itself, and is reduced */
    rlx_tensor *p = rlx_pad_mode(x, 0, 0, 2, RLX_PAD_REFLECT);
    return rlx_add(rlx_slice(p, 0, 1, RLX_END, 1), rlx_sum(p, ax0, 1, true));
}
static rlx_tensor *d_slice_sum(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par; /* x[1:] - x[:-1]: two dynamic slices meeting elementwise */
    return rlx_sub(rlx_slice(x, 0, 1, RLX_END, 1), rlx_slice(x, 0, 0, -1, 1));
}

TEST(dynamic_axis_ops_match_static)
{
    static const struct {
        const char *name;
        expr_fn f;
        int64_t min; /* smallest size the op takes */
    } ops[] = {{"slice_step", d_slice_step, 0}, {"slice_tail", d_slice_tail, 0}, {"slice_mid", d_slice_mid, 0},
               {"slice_back", d_slice_back, 0}, {"flip", d_flip, 0},             {"roll", d_roll, 0},
               {"roll_neg", d_roll_neg, 0},     {"narrow", d_narrow, 3},         {"narrow_end", d_narrow_end, 2},
               {"select", d_select, 1},         {"split", d_split, 2},           {"chunk", d_chunk, 0},
               {"mean", d_mean, 0},             {"var", d_var, 0},               {"std", d_std, 0},
               {"reshape", d_reshape, 0},       {"slice_sub", d_slice_sum, 0},   {"pad", d_pad, 0},
               {"reflect", d_reflect, 3},       {"replicate", d_replicate, 1},   {"reflect_back", d_reflect_back, 3},
               {"pad_static_axis", d_pad_static_axis, 0}};
    char backend[16];
    CHECK_EQ_INT(rlx_get_option("backend", backend, sizeof backend), RLX_OK);
    const char *backends[] = {"jit", "ref"};
    const rlx_dtype dts[] = {RLX_F32, RLX_F64};
    const int64_t sizes[] = {0, 1, 2, 3, 7, 2, 12};
    for (int be = 0; be < 2; be++) {
        CHECK_EQ_INT(rlx_set_option("backend", backends[be]), RLX_OK);
        for (int t = 0; t < 2; t++) {
            for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
                rlx_tensor *x = rlx_input("x", dts[t], 2, (int64_t[]){-1, C});
                rlx_tensor *y = ops[i].f(x, NULL);
                if (!y) {
                    test_fail(__FILE__, __LINE__, "%s: tracing failed: %s", ops[i].name, rlx_last_error());
                    continue;
                }
                rlx_program *p = rlx_compile(&y, 1);
                CHECK(p != NULL);
                for (size_t k = 0; p && k < sizeof sizes / sizeof *sizes; k++) {
                    int64_t n = sizes[k];
                    rlx_tensor *xv = trand(dts[t], 2, (int64_t[]){n, C}, -2, 2), *got = NULL;
                    rlx_status st = rlx_program_run(p, &(rlx_binding){"x", xv}, 1, &got);
                    if (n < ops[i].min) {
                        if (st != RLX_E_SHAPE)
                            test_fail(__FILE__, __LINE__, "%s at %lld: status %d", ops[i].name, (long long)n, st);
                        CHECK(got == NULL && strstr(rlx_last_error(), "rlx_program_run"));
                        continue;
                    }
                    if (st != RLX_OK) {
                        test_fail(__FILE__, __LINE__, "%s (%s, %s) at %lld: %s", ops[i].name, backends[be],
                                  rlx_dtype_name(dts[t]), (long long)n, rlx_last_error());
                        continue;
                    }
                    rlx_tensor *want = expected(ops[i].f, xv, NULL);
                    CHECK_EQ_INT(rlx_rank(got), rlx_rank(want));
                    for (int d = 0; d < rlx_rank(want); d++)
                        CHECK_EQ_INT(rlx_dim(got, d), rlx_dim(want, d));
                    EXPECT_SAME(got, want, dts[t] == RLX_F32 ? 2e-5 : 1e-12);
                }
                rlx_program_free(p);
            }
        }
    }
    CHECK_EQ_INT(rlx_set_option("backend", backend), RLX_OK);
    /* fixed sizes on a dynamic axis trace (checked when bound: test_dynamic_ops.c) */
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, C}), *p3[2];
    CHECK_EQ_INT(rlx_split(x, 0, 2, (int64_t[]){1, 2}, p3), RLX_OK);
    CHECK(p3[0] != NULL && p3[1] != NULL);
}

/* Symbols: dims <= -2 of one value are one size; anonymous -1 dims that an
 * elementwise op joins must be bound equal too: never a silent broadcast. */
TEST(dynamic_symbols)
{
    const int64_t B = -2;
    rlx_tensor *x = rlx_input("x", RLX_F64, 2, (int64_t[]){B, 2});
    rlx_tensor *m = rlx_input("m", RLX_F64, 1, (int64_t[]){B});
    rlx_tensor *y = rlx_mul(x, rlx_unsqueeze(m, 1));
    rlx_program *p = rlx_compile(&y, 1);
    CHECK(p != NULL);
    for (int64_t n = 0; n < 4; n++) {
        double xd[8], md[4], want[8];
        for (int i = 0; i < 2 * n; i++)
            xd[i] = i - 1.5;
        for (int i = 0; i < n; i++)
            md[i] = i + 0.5;
        for (int i = 0; i < 2 * n; i++)
            want[i] = xd[i] * md[i / 2];
        rlx_binding b[2] = {{"x", tf64(2, (int64_t[]){n, 2}, xd)}, {"m", tf64(1, (int64_t[]){n}, md)}};
        rlx_tensor *got;
        CHECK_EQ_INT(rlx_program_run(p, b, 2, &got), RLX_OK);
        EXPECT(got, RLX_F64, 2, ((int64_t[]){n, 2}), want, 1e-15);
    }
    rlx_tensor *got = NULL;
    rlx_binding bad[2] = {{"x", rlx_zeros(RLX_F64, 2, (int64_t[]){3, 2})}, {"m", rlx_zeros(RLX_F64, 1, (int64_t[]){1})}};
    CHECK_EQ_INT(rlx_program_run(p, bad, 2, &got), RLX_E_SHAPE);
    const char *e = rlx_last_error();
    CHECK(got == NULL && strstr(e, "rlx_program_run") && strstr(e, "symbol -2") && strstr(e, "'x'") &&
          strstr(e, "'m'") && strstr(e, " 3 ") && strstr(e, " 1 "));
    rlx_program_free(p);
    /* anonymous dims joined by add: [1, 2] with [4, 2] is an error, not a broadcast */
    rlx_tensor *a = rlx_input("a", RLX_F32, 2, (int64_t[]){-1, 2}), *b = rlx_input("b", RLX_F32, 2, (int64_t[]){-1, 2});
    rlx_tensor *s = rlx_add(a, b);
    rlx_program *q = rlx_compile(&s, 1);
    CHECK(q != NULL);
    char backend[16];
    CHECK_EQ_INT(rlx_get_option("backend", backend, sizeof backend), RLX_OK);
    const char *backends[] = {"jit", "ref"};
    for (int be = 0; be < 2; be++) {
        CHECK_EQ_INT(rlx_set_option("backend", backends[be]), RLX_OK);
        rlx_program *r = rlx_compile(&s, 1);
        rlx_binding ab[2] = {{"a", rlx_ones(RLX_F32, 2, (int64_t[]){1, 2})}, {"b", rlx_ones(RLX_F32, 2, (int64_t[]){4, 2})}};
        CHECK_EQ_INT(rlx_program_run(r, ab, 2, &got), RLX_E_SHAPE);
        CHECK(got == NULL && strstr(rlx_last_error(), "'add'") && strstr(rlx_last_error(), "[1,2]") &&
              strstr(rlx_last_error(), "[4,2]"));
        rlx_program_free(r);
    }
    CHECK_EQ_INT(rlx_set_option("backend", backend), RLX_OK);
    rlx_program_free(q);
    /* a dynamic dim joined with a static 5 is refused while tracing */
    rlx_clear_error();
    CHECK(rlx_add(a, rlx_ones(RLX_F32, 2, (int64_t[]){5, 2})) == NULL && rlx_last_status() == RLX_E_SHAPE);
    /* one name, two symbol lists: two inputs, refused */
    rlx_tensor *u = rlx_add(rlx_input("u", RLX_F32, 1, (int64_t[]){-3}), rlx_input("u", RLX_F32, 1, (int64_t[]){-4}));
    CHECK(u != NULL);
    rlx_clear_error();
    CHECK(rlx_compile(&u, 1) == NULL && rlx_last_status() == RLX_E_ARG && strstr(rlx_last_error(), "'u'"));
    CHECK_NULL_ERR(rlx_input("v", RLX_F32, 1, NULL), RLX_E_ARG, "rlx_input");
}

/* The kept specializations: the most recent 8; more sizes stay right, a
 * size still kept prepares nothing, an evicted one is prepared again. */
TEST(dynamic_spec_lru)
{
    rlx_tensor *x = rlx_input("x", RLX_F64, 2, (int64_t[]){-1, 2});
    rlx_tensor *y = rlx_add_s(rlx_sub(x, rlx_mean(x, ax0, 1, true)), 1);
    rlx_program *p = rlx_compile(&y, 1);
    CHECK(p != NULL);
    int kept;
    int64_t made = 99, before;
    CHECK_EQ_INT(rlx_program_specs(p, &kept, &made), RLX_OK);
    CHECK_EQ_INT(kept, 0);
    CHECK(made == 0);
    for (int64_t n = 1; n <= 12; n++) {
        for (int rep = 0; rep < 2; rep++) {
            double xd[24];
            for (int i = 0; i < 2 * n; i++)
                xd[i] = 0.5 * i;
            rlx_tensor *got;
            CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", tf64(2, (int64_t[]){n, 2}, xd)}, 1, &got), RLX_OK);
            double v[24];
            CHECK_EQ_INT(rlx_read_f64(got, v, (size_t)(2 * n)), RLX_OK);
            for (int i = 0; i < 2 * n; i++)
                CHECK(fabs(v[i] - (xd[i] - (xd[i % 2] + 0.5 * (n - 1)) + 1)) < 1e-12);
        }
    }
    CHECK_EQ_INT(rlx_program_specs(p, &kept, &made), RLX_OK);
    CHECK_EQ_INT(kept, 8);
    CHECK(made == 12);
    rlx_tensor *got;
    CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", rlx_ones(RLX_F64, 2, (int64_t[]){12, 2})}, 1, &got), RLX_OK);
    CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", rlx_ones(RLX_F64, 2, (int64_t[]){5, 2})}, 1, &got), RLX_OK);
    CHECK_EQ_INT(rlx_program_specs(p, NULL, &before), RLX_OK);
    CHECK(before == 12); /* 12 and 5 are among the last 8 */
    CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", rlx_ones(RLX_F64, 2, (int64_t[]){1, 2})}, 1, &got), RLX_OK);
    CHECK_EQ_INT(rlx_program_specs(p, NULL, &made), RLX_OK);
    CHECK(made == 13); /* 1 was evicted */
    CHECK_ERR(rlx_program_specs(NULL, &kept, &made), RLX_E_ARG, "rlx_program_specs");
    rlx_program_free(p);
}

/* Gradients through dynamic dims: loss(x, par) traced over x [-1, C],
 * the program outputs loss and d loss / d (x, w, gamma); each run equals
 * rlx_grad of the same loss built over the bound value (static shapes) on
 * the reference backend, and a finite difference checks one entry. */
static rlx_tensor *l_mlp(rlx_tensor *x, rlx_tensor *const *par)
{
    rlx_tensor *h = rlx_gelu_tanh(rlx_linear(rlx_layer_norm(x, par[2], par[3], 1e-5), par[0], par[1]));
    return rlx_mean(rlx_mul(rlx_softmax(h, -1), h), NULL, 0, false);
}
static rlx_tensor *l_diff(rlx_tensor *x, rlx_tensor *const *par)
{
    rlx_tensor *d = rlx_sub(rlx_slice(x, 0, 1, RLX_END, 1), rlx_slice(x, 0, 0, -1, 1));
    return rlx_sum(rlx_mul(rlx_mul(d, d), par[2]), NULL, 0, false);
}
static rlx_tensor *l_pieces(rlx_tensor *x, rlx_tensor *const *par)
{
    rlx_tensor *p[3], *q[2];
    if (rlx_split(x, 0, 3, (int64_t[]){1, -1, 1}, p) != RLX_OK || rlx_chunk(x, 0, 2, q) != RLX_OK)
        return NULL;
    rlx_tensor *t = rlx_add(rlx_sum(rlx_mul_s(p[0], 3), NULL, 0, false), rlx_sum(rlx_exp(p[1]), NULL, 0, false));
    t = rlx_add(t, rlx_sum(rlx_mul(p[2], par[2]), NULL, 0, false));
    t = rlx_add(t, rlx_sum(rlx_mul(rlx_flip(q[0], 0), rlx_narrow(x, 0, -1, 1)), NULL, 0, false));
    return rlx_add(t, rlx_sum(rlx_mul_s(rlx_sin(q[1]), 2), NULL, 0, false));
}
static rlx_tensor *l_cat_reshape(rlx_tensor *x, rlx_tensor *const *par)
{
    rlx_tensor *c = rlx_cat((rlx_tensor *[]){rlx_unsqueeze(par[2], 0), x, rlx_unsqueeze(par[3], 0)}, 3, 0);
    rlx_tensor *f = rlx_reshape(rlx_tanh(c), 1, (int64_t[]){-1});
    rlx_tensor *back = rlx_reshape(rlx_mul(f, f), 2, (int64_t[]){-1, C});
    return rlx_add(rlx_sum(rlx_matmul(back, rlx_transpose(par[0], 0, NULL)), NULL, 0, false),
                   rlx_sum(rlx_std(x, ax0, 1, false), NULL, 0, false));
}
static rlx_tensor *l_pad(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    rlx_tensor *p = rlx_pad(rlx_exp(x), 1, 1, 2, 0.5);
    return rlx_sum(rlx_mul(p, rlx_slice(rlx_pad(x, 1, 0, 3, 0), 1, RLX_END, RLX_END, -1)), NULL, 0, false);
}

static rlx_tensor *l_pad_dyn(rlx_tensor *x, rlx_tensor *const *par)
{
    /* padding the dynamic axis 0: constant, reflect and replicate */
    rlx_tensor *a = rlx_pad(rlx_tanh(x), 0, 1, 2, 0.25);
    rlx_tensor *b = rlx_pad_mode(rlx_mul(x, par[2]), 0, 2, 1, RLX_PAD_REFLECT);
    rlx_tensor *c = rlx_pad_mode(x, 0, 1, 2, RLX_PAD_REPLICATE);
    return rlx_sum(rlx_add(rlx_mul(a, b), rlx_mul(c, c)), NULL, 0, false);
}

static void grads_of(expr_fn f, rlx_tensor *x, rlx_tensor *const *par, rlx_tensor **out)
{
    out[0] = f(x, par);
    rlx_tensor *wrt[3] = {x, par[0], par[2]};
    CHECK(out[0] != NULL);
    if (out[0])
        CHECK_EQ_INT(rlx_grad(out[0], wrt, 3, out + 1), RLX_OK);
}

TEST(dynamic_gradients_match_static)
{
    static const struct {
        const char *name;
        expr_fn f;
        int64_t min;
    } ls[] = {{"mlp", l_mlp, 1}, {"diff", l_diff, 0}, {"pieces", l_pieces, 2}, {"cat_reshape", l_cat_reshape, 1},
              {"pad", l_pad, 0}, {"pad_dyn", l_pad_dyn, 3}};
    char backend[16];
    CHECK_EQ_INT(rlx_get_option("backend", backend, sizeof backend), RLX_OK);
    const char *backends[] = {"jit", "ref"};
    const rlx_dtype dts[] = {RLX_F32, RLX_F64};
    const int64_t sizes[] = {0, 1, 2, 3, 6, 1, 11};
    for (int be = 0; be < 2; be++) {
        CHECK_EQ_INT(rlx_set_option("backend", backends[be]), RLX_OK);
        for (int t = 0; t < 2; t++) {
            rlx_tensor *par[5];
            params(dts[t], par);
            for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) {
                rlx_tensor *x = rlx_input("x", dts[t], 2, (int64_t[]){-1, C}), *outs[4];
                grads_of(ls[i].f, x, par, outs);
                rlx_program *p = outs[0] && outs[1] ? rlx_compile(outs, 4) : NULL;
                if (!p) {
                    test_fail(__FILE__, __LINE__, "%s: %s", ls[i].name, rlx_last_error());
                    continue;
                }
                for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
                    int64_t n = sizes[k];
                    if (n < ls[i].min)
                        continue;
                    rlx_tensor *xv = trand(dts[t], 2, (int64_t[]){n, C}, -1, 1), *got[4] = {0};
                    if (rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got) != RLX_OK) {
                        test_fail(__FILE__, __LINE__, "%s (%s, %s) at %lld: %s", ls[i].name, backends[be],
                                  rlx_dtype_name(dts[t]), (long long)n, rlx_last_error());
                        continue;
                    }
                    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
                    rlx_tensor *want[4];
                    grads_of(ls[i].f, xv, par, want);
                    for (int o = 0; o < 4; o++) {
                        CHECK_EQ_INT(rlx_rank(got[o]), rlx_rank(want[o]));
                        for (int d = 0; d < rlx_rank(want[o]); d++)
                            CHECK_EQ_INT(rlx_dim(got[o], d), rlx_dim(want[o], d));
                        EXPECT_SAME(got[o], want[o], dts[t] == RLX_F32 ? 1e-4 : 1e-10);
                    }
                    if (dts[t] == RLX_F64 && n > 0) { /* a central difference at x[n-1, 1] */
                        double xd[11 * C], h = 1e-6, lp, lm, g[11 * C];
                        CHECK_EQ_INT(rlx_read_f64(xv, xd, (size_t)(n * C)), RLX_OK);
                        xd[(n - 1) * C + 1] += h;
                        CHECK_EQ_INT(rlx_read_f64(ls[i].f(tf64(2, (int64_t[]){n, C}, xd), par), &lp, 1), RLX_OK);
                        xd[(n - 1) * C + 1] -= 2 * h;
                        CHECK_EQ_INT(rlx_read_f64(ls[i].f(tf64(2, (int64_t[]){n, C}, xd), par), &lm, 1), RLX_OK);
                        CHECK_EQ_INT(rlx_read_f64(got[1], g, (size_t)(n * C)), RLX_OK);
                        double fd = (lp - lm) / (2 * h);
                        if (fabs(fd - g[(n - 1) * C + 1]) > 1e-5 * (1 + fabs(fd)))
                            test_fail(__FILE__, __LINE__, "%s at %lld: finite difference %g, gradient %g", ls[i].name,
                                      (long long)n, fd, g[(n - 1) * C + 1]);
                    }
                    CHECK_EQ_INT(rlx_set_option("backend", backends[be]), RLX_OK);
                }
                rlx_program_free(p);
            }
        }
    }
    CHECK_EQ_INT(rlx_set_option("backend", backend), RLX_OK);
}

/* Attention over a dynamic sequence length (x [2, -1, 2*4], 2 heads),
 * causal and sliding, its value and its gradients, against the same graph
 * over the bound value on the reference backend. */
TEST(dynamic_attention_sequence)
{
    char backend[16];
    CHECK_EQ_INT(rlx_get_option("backend", backend, sizeof backend), RLX_OK);
    const char *backends[] = {"jit", "ref"};
    const rlx_mask masks[] = {RLX_MASK_CAUSAL, RLX_MASK_SLIDING, RLX_MASK_NONE};
    const int64_t lens[] = {1, 4, 0, 9, 4};
    for (int be = 0; be < 2; be++) {
        for (int m = 0; m < 3; m++) {
            for (int t = 0; t < 2; t++) {
                rlx_dtype dt = t ? RLX_F64 : RLX_F32;
                CHECK_EQ_INT(rlx_set_option("backend", backends[be]), RLX_OK);
                rlx_tensor *w = trand(dt, 2, (int64_t[]){8, 8}, -0.5, 0.5);
                rlx_tensor *x = rlx_input("x", dt, 3, (int64_t[]){2, -1, 8}), *outs[3];
                rlx_tensor *a = rlx_attention(rlx_matmul(x, w), x, x, 2, 4, masks[m], 3);
                outs[0] = rlx_sum(rlx_mul(a, a), NULL, 0, false);
                rlx_tensor *wrt[2] = {x, w};
                CHECK_EQ_INT(rlx_grad(outs[0], wrt, 2, outs + 1), RLX_OK);
                rlx_tensor *both[4] = {outs[0], outs[1], outs[2], a};
                rlx_program *p = rlx_compile(both, 4);
                CHECK(p != NULL);
                for (size_t k = 0; p && k < sizeof lens / sizeof *lens; k++) {
                    rlx_tensor *xv = trand(dt, 3, (int64_t[]){2, lens[k], 8}, -1, 1), *got[4];
                    if (rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got) != RLX_OK) {
                        test_fail(__FILE__, __LINE__, "mask %d at %lld: %s", masks[m], (long long)lens[k],
                                  rlx_last_error());
                        continue;
                    }
                    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
                    rlx_tensor *av = rlx_attention(rlx_matmul(xv, w), xv, xv, 2, 4, masks[m], 3), *want[4];
                    want[0] = rlx_sum(rlx_mul(av, av), NULL, 0, false);
                    want[3] = av;
                    CHECK_EQ_INT(rlx_grad(want[0], (rlx_tensor *[]){xv, w}, 2, want + 1), RLX_OK);
                    for (int o = 0; o < 4; o++) {
                        CHECK_EQ_INT(rlx_rank(got[o]), rlx_rank(want[o]));
                        EXPECT_SAME(got[o], want[o], t ? 1e-10 : 2e-4);
                    }
                    CHECK_EQ_INT(rlx_set_option("backend", backends[be]), RLX_OK);
                }
                rlx_program_free(p);
            }
        }
    }
    CHECK_EQ_INT(rlx_set_option("backend", backend), RLX_OK);
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

/* rlx_arange_of: a plain range over static axes (every dtype it takes);
 * over a dynamic axis a program makes it in each bound size, on both
 * backends, 0 and 1 included; it reads no value of t and has no gradient. */
TEST(arange_of_values)
{
    const rlx_dtype dts[4] = {RLX_I32, RLX_I64, RLX_F32, RLX_F64};
    rlx_tensor *t = rlx_zeros(RLX_F32, 3, (int64_t[]){3, 0, 5});
    for (int k = 0; k < 4; k++)
        for (int ax = -3; ax < 3; ax++) {
            rlx_tensor *r = rlx_arange_of(t, ax, dts[k]);
            int64_t n = rlx_dim(t, ax);
            double v[5] = {-1, -1, -1, -1, -1};
            CHECK(r != NULL && rlx_dtype_of(r) == dts[k] && rlx_rank(r) == 1 && rlx_dim(r, 0) == n);
            CHECK_EQ_INT(rlx_read_f64(r, v, (size_t)n), RLX_OK);
            for (int64_t i = 0; i < n; i++)
                CHECK_EQ_INT((long long)v[i], (long long)i);
        }
    EACH_BACKEND(b)
    {
        /* x [2, -1, 3]: y = x * pos[axis 1] + pos[axis 0]; a strided view of x */
        rlx_tensor *x = rlx_input("x", RLX_F64, 3, (int64_t[]){2, -1, 3});
        rlx_tensor *xt = rlx_transpose(x, 3, (int[]){1, 0, 2}); /* [-1, 2, 3] */
        rlx_tensor *pos = rlx_arange_of(xt, 0, RLX_F64), *p0 = rlx_arange_of(x, 0, RLX_I32);
        rlx_tensor *y = rlx_add(rlx_mul(x, rlx_reshape(pos, 3, (int64_t[]){1, -1, 1})),
                                rlx_reshape(rlx_cast(p0, RLX_F64), 3, (int64_t[]){2, 1, 1}));
        rlx_tensor *outs[2] = {y, rlx_arange_of(x, -2, RLX_I64)};
        rlx_program *p = rlx_compile(outs, 2);
        CHECK(p != NULL);
        const int64_t sizes[6] = {0, 1, 4, 9, 2, 17};
        for (int k = 0; p && k < 6; k++) {
            int64_t n = sizes[k];
            rlx_tensor *xv = rlx_randn(RLX_F64, 3, (int64_t[]){2, n, 3}, (uint64_t)k), *got[2];
            double g[2 * 17 * 3], xd[2 * 17 * 3];
            int64_t gi[17];
            CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got), RLX_OK);
            CHECK_EQ_INT(rlx_dim(got[1], 0), n);
            CHECK_EQ_INT(rlx_read_f64(xv, xd, (size_t)(6 * n)), RLX_OK);
            CHECK_EQ_INT(rlx_read_f64(got[0], g, (size_t)(6 * n)), RLX_OK);
            CHECK_EQ_INT(rlx_read(got[1], gi, sizeof gi[0] * (size_t)n), RLX_OK);
            for (int64_t i = 0; i < 2 * n * 3; i++) {
                int64_t r = i / (n * 3), s = i / 3 % n;
                if (g[i] != xd[i] * (double)s + (double)r)
                    test_fail(__FILE__, __LINE__, "backend %d n %lld: y[%lld] = %g", b, (long long)n, (long long)i, g[i]);
            }
            for (int64_t i = 0; i < n; i++)
                CHECK_EQ_INT(gi[i], i);
        }
        rlx_program_free(p);
    }
    /* no gradient: d sum(arange_of(w) * w) / dw = arange */
    rlx_tensor *w = rlx_randn(RLX_F64, 1, (int64_t[]){4}, 5), *g = NULL;
    CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(rlx_arange_of(w, 0, RLX_F64), w)), &w, 1, &g), RLX_OK);
    double gv[4];
    CHECK_EQ_INT(rlx_read_f64(g, gv, 4), RLX_OK);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT((long long)gv[i], i);
}

TEST(arange_of_errors)
{
    rlx_tensor *t = rlx_zeros(RLX_F32, 2, (int64_t[]){2, 3});
    CHECK_NULL_ERR(rlx_arange_of(NULL, 0, RLX_I64), RLX_E_ARG, "rlx_arange_of");
    CHECK_NULL_ERR(rlx_arange_of(t, 2, RLX_I64), RLX_E_ARG, "rlx_arange_of");
    CHECK_NULL_ERR(rlx_arange_of(t, -3, RLX_I64), RLX_E_ARG, "rlx_arange_of");
    CHECK_NULL_ERR(rlx_arange_of(rlx_scalar(RLX_F32, 1), 0, RLX_I64), RLX_E_ARG, "rlx_arange_of");
    CHECK_NULL_ERR(rlx_arange_of(t, 0, RLX_BOOL), RLX_E_DTYPE, "rlx_arange_of");
    CHECK_NULL_ERR(rlx_arange_of(t, 0, (rlx_dtype)99), -1, "rlx_arange_of");
    rlx_tensor *x = rlx_input("x", RLX_F32, 1, (int64_t[]){-1});
    CHECK_NULL_ERR(rlx_arange_of(x, 0, RLX_BOOL), RLX_E_DTYPE, "rlx_arange_of");
    /* a position past a table's end fails when run, never reads out of bounds */
    rlx_tensor *tab = rlx_arange(RLX_F32, 0, 4, 1);
    rlx_tensor *y = rlx_index_select(tab, 0, rlx_arange_of(x, 0, RLX_I32));
    rlx_program *p = rlx_compile(&y, 1);
    CHECK(p != NULL);
    rlx_tensor *got = NULL;
    CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", rlx_zeros(RLX_F32, 1, (int64_t[]){4})}, 1, &got), RLX_OK);
    CHECK(rlx_program_run(p, &(rlx_binding){"x", rlx_zeros(RLX_F32, 1, (int64_t[]){5})}, 1, &got) != RLX_OK);
    rlx_program_free(p);
}

/* A two-layer MLP over x [-1, C]: its [n, 64] hidden values live in the
 * arena. */
static rlx_tensor *e_mlp(rlx_tensor *x, rlx_tensor *const *par)
{
    rlx_tensor *h = rlx_tanh(rlx_linear(x, par[0], par[1]));
    rlx_tensor *z = rlx_tanh(rlx_add(rlx_matmul(h, par[2]), h));
    return rlx_sum(rlx_mul(z, rlx_sigmoid(rlx_matmul(z, par[2]))), ax1, 1, true);
}

/* Fills par and compiles e_mlp over x [-1, C]. */
static rlx_program *mlp_program(rlx_tensor **par)
{
    par[0] = rlx_randn(RLX_F64, 2, (int64_t[]){64, C}, 11);
    par[1] = rlx_randn(RLX_F64, 1, (int64_t[]){64}, 12);
    par[2] = rlx_mul_s(rlx_randn(RLX_F64, 2, (int64_t[]){64, 64}, 13), 0.125);
    rlx_tensor *y = e_mlp(rlx_input("x", RLX_F64, 2, (int64_t[]){-1, C}), par);
    return rlx_compile(&y, 1);
}

/* The program's value at x (n rows) against the expression realized
 * eagerly (no program, no shared arena); the number of wrong entries. */
static int mlp_check(rlx_program *p, rlx_tensor *const *par, int64_t n, int seed)
{
    rlx_tensor *xv = rlx_randn(RLX_F64, 2, (int64_t[]){n, C}, (uint64_t)seed), *got = NULL;
    if (!xv || rlx_program_run(p, &(rlx_binding){"x", xv}, 1, &got) != RLX_OK)
        return 1;
    rlx_tensor *want = e_mlp(xv, par);
    double g[64], w[64];
    if (rlx_read_f64(got, g, (size_t)n) != RLX_OK || rlx_read_f64(want, w, (size_t)n) != RLX_OK)
        return 1;
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += !(fabs(g[i] - w[i]) <= 1e-12 * (1 + fabs(w[i])));
    return bad;
}

/* The arena grows only: a program's specs share its arena, grown to the
 * largest plan run, reused by smaller bindings (not one arena per spec). */
TEST(dynamic_arena_grows_only)
{
    rlx_tensor *par[3];
    rlx_program *p = mlp_program(par);
    CHECK(p != NULL);
    int count = -1;
    int64_t bytes = 1;
    size_t need[65] = {0};
    CHECK_EQ_INT(rlx_program_arenas(p, &count, &bytes), RLX_OK);
    CHECK_EQ_INT(count, 0);
    CHECK_EQ_INT((long long)bytes, 0);
    const int64_t sizes[4] = {8, 64, 8, 16};
    for (int k = 0; k < 4; k++) {
        rlx_stats_t st;
        rlx_stats_reset();
        CHECK_EQ_INT(mlp_check(p, par, sizes[k], k), 0);
        rlx_stats(&st);
        need[sizes[k]] = st.arena_bytes; /* the plan's need (the eager check's own arena is smaller or equal) */
        CHECK_EQ_INT(rlx_program_arenas(p, &count, &bytes), RLX_OK);
        CHECK_EQ_INT(count, 1);
        if (k == 0)
            CHECK(bytes > 0 && (size_t)bytes >= need[8]);
        else
            CHECK_EQ_INT((long long)bytes, (long long)need[64]);
    }
    CHECK(need[64] > need[16] && need[16] > need[8]);
    int kept = 0;
    CHECK_EQ_INT(rlx_program_specs(p, &kept, NULL), RLX_OK);
    CHECK_EQ_INT(kept, 3); /* three specs, one arena */
    CHECK_EQ_INT(rlx_program_arenas(NULL, &count, &bytes), RLX_E_ARG);
    CHECK(strstr(rlx_last_error(), "rlx_program_arenas") != NULL);
    CHECK_EQ_INT(rlx_program_arenas(p, NULL, NULL), RLX_OK);
    rlx_program_free(p);
}

/* Threads running one program at different sizes at once: each run takes
 * an arena of its own from the program's pool (grown on demand), so the
 * values stay right; the pool keeps at most one per run in flight. */
typedef struct {
    rlx_program *p;
    rlx_tensor *const *par;
    int id, bad;
} mlp_runner;

static void *mlp_sizes(void *arg)
{
    mlp_runner *r = arg;
    rlx_scope_begin();
    for (int k = 0; k < 16; k++)
        r->bad += mlp_check(r->p, r->par, 1 + (r->id * 7 + k * 13) % 64, r->id * 100 + k);
    rlx_scope_end();
    return NULL;
}

TEST(dynamic_arena_threads)
{
    rlx_tensor *par[3];
    rlx_program *p = mlp_program(par);
    CHECK(p != NULL);
    rlx_set_num_threads(1); /* the runs overlap; each one runs on its own thread */
    pthread_t th[4];
    mlp_runner r[4];
    for (int t = 0; t < 4; t++) {
        r[t] = (mlp_runner){p, par, t, 0};
        CHECK_EQ_INT(pthread_create(&th[t], NULL, mlp_sizes, &r[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CHECK_EQ_INT(r[t].bad, 0);
    }
    rlx_set_num_threads(0);
    int count = 0;
    int64_t bytes = 0;
    CHECK_EQ_INT(rlx_program_arenas(p, &count, &bytes), RLX_OK);
    CHECK(count >= 1 && count <= 4 && bytes > 0);
    rlx_program_free(p);
}

/* Allocation failures while compiling and specializing: NOMEM, no leak. */
/* A spec's graph is private to its program (never hash-consed with the
 * user's graph, counted among the detached nodes): re-bound runs over
 * sizes 0, 1 and past the kept specs give the reference values, a part
 * of the graph that reads no input (exp(w) summed) is computed by each
 * spec and leaves the user's node unrealized, and freeing the program
 * frees every spec node. */
static rlx_tensor *e_private(rlx_tensor *x, rlx_tensor *const *par)
{
    rlx_tensor *wsum = rlx_sum(rlx_exp(par[4]), NULL, 0, false);
    return rlx_add(rlx_softmax(rlx_linear(x, par[0], par[1]), -1), wsum);
}

TEST(dynamic_spec_graph_private)
{
    rlx_tensor *par[5];
    params(RLX_F64, par);
    rlx_tensor *y = e_private(rlx_input("x", RLX_F64, 2, (int64_t[]){-1, C}), par);
    rlx_program *p = rlx_compile(&y, 1);
    CHECK(p != NULL);
    const int64_t sizes[] = {0, 1, 2, 7, 1, 0, 3, 4, 5, 6, 8, 9, 10, 11, 2, 33};
    enum { NS = sizeof sizes / sizeof *sizes };
    rlx_tensor *xv[NS], *want[NS];
    for (int k = 0; k < NS; k++) { /* values and expectations first: they may use the plan cache's detached nodes */
        xv[k] = trand(RLX_F64, 2, (int64_t[]){sizes[k], C}, -2, 2);
        want[k] = expected(e_private, xv[k], par);
    }
    long detached = ir_detached_nodes();
    for (int k = 0; k < NS; k++) {
        rlx_tensor *got = NULL;
        CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", xv[k]}, 1, &got), RLX_OK);
        if (got)
            EXPECT_SAME(got, want[k], 1e-12);
    }
    CHECK(ir_detached_nodes() > detached); /* the kept specs' graphs */
    CHECK(ir_node_storage(ts_node(y)->src[1]) == NULL); /* the user's wsum: not realized by a run */
    int64_t made = 0;
    CHECK_EQ_INT(rlx_program_specs(p, NULL, &made), RLX_OK);
    CHECK(made > 8);
    rlx_program_free(p);
    CHECK_EQ_INT(ir_detached_nodes(), detached);
}

/* A new size compiles nothing: once sizes 0, 1 and 2 have run (a size-1
 * dim has a zero stride, which a generic kernel compiles in), 40 more
 * sizes (new specs, evicting) reuse the kernels, values right. */
TEST(dynamic_new_sizes_compile_nothing)
{
    rlx_tensor *par[3];
    rlx_program *p = mlp_program(par);
    CHECK(p != NULL);
    for (int64_t n = 0; n <= 2; n++)
        CHECK_EQ_INT(mlp_check(p, par, n, (int)n), 0);
    rlx_stats_t a, b;
    rlx_stats(&a);
    int bad = 0;
    for (int64_t n = 3; n <= 42; n++) {
        rlx_tensor *xv = rlx_randn(RLX_F64, 2, (int64_t[]){n, C}, (uint64_t)n), *got = NULL;
        bad += !xv || rlx_program_run(p, &(rlx_binding){"x", xv}, 1, &got) != RLX_OK;
    }
    rlx_stats(&b);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT((long long)(b.kernels_compiled - a.kernels_compiled), 0);
    for (int64_t n = 43; n <= 64; n += 7) /* and the values of new sizes after them */
        CHECK_EQ_INT(mlp_check(p, par, n, (int)n), 0);
    rlx_program_free(p);
}

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

/* A binding that is an unrealized constant is realized by the run, on the
 * node hash-consing shares with an equal constant inside the program. The
 * kernels of later bindings must not change with that (they did: the
 * constant became a load, and the second size compiled new kernels). */
TEST(dynamic_constant_binding_compiles_once)
{
    EACH_BACKEND(b)
    {
        rlx_tensor *x = rlx_input("x", RLX_F32, 1, (int64_t[]){-1});
        rlx_tensor *c = rlx_input("c", RLX_F32, 1, (int64_t[]){1});
        rlx_tensor *k = rlx_full(RLX_F32, 1, (int64_t[]){1}, 0.375);
        rlx_tensor *y = rlx_mul(rlx_sub(rlx_sqrt(rlx_abs(x)), k), c);
        rlx_program *p = rlx_compile(&y, 1);
        CHECK(p != NULL);
        for (int64_t n = 3; n <= 9; n += 3) {
            float xd[9];
            for (int i = 0; i < n; i++)
                xd[i] = 0.25f * (float)i - 1;
            rlx_stats_t s0, s1;
            rlx_stats(&s0);
            rlx_tensor *got;
            rlx_binding in[2] = {{"x", rlx_from_data(RLX_F32, 1, &n, xd)},
                                 {"c", rlx_full(RLX_F32, 1, (int64_t[]){1}, 0.375)}};
            CHECK_EQ_INT(rlx_program_run(p, in, 2, &got), RLX_OK);
            rlx_stats(&s1);
            if (b == 1 && n > 3)
                CHECK_EQ_INT((int)(s1.kernels_compiled - s0.kernels_compiled), 0);
            float v[9];
            CHECK_EQ_INT(rlx_read_f32(got, v, (size_t)n), RLX_OK);
            for (int i = 0; i < n; i++)
                CHECK(fabs(v[i] - (sqrt(fabs((double)xd[i])) - 0.375) * 0.375) < 1e-6);
        }
        rlx_program_free(p);
    }
}

/* conv2d and the pools over a dynamic batch N: one program (the output
 * and the weight's gradient) against the same ops over each bound value on
 * the reference backend; a dynamic H or W is refused while tracing,
 * naming the axis (it read as -1 in the size checks before). */
TEST(dynamic_batch_conv_pool)
{
    rlx_tensor *w = trand(RLX_F64, 4, (int64_t[]){4, 3, 3, 3}, -1, 1);
    rlx_tensor *x = rlx_input("x", RLX_F64, 4, (int64_t[]){-1, 3, 7, 6});
    rlx_tensor *y = rlx_avg_pool2d(rlx_max_pool2d(rlx_tanh(rlx_conv2d(x, w, NULL, (int[]){2, 1}, (int[]){1, 1},
                                                                      NULL, 1)),
                                                  (int[]){2, 2}, (int[]){1, 1}, NULL),
                                   (int[]){2, 2}, NULL, (int[]){1, 1});
    rlx_tensor *g, *outs[2] = {y, NULL};
    CHECK_EQ_INT(rlx_grad(rlx_sum(rlx_mul(y, y), NULL, 0, false), &w, 1, &g), RLX_OK);
    outs[1] = g;
    rlx_program *p = rlx_compile(outs, 2);
    CHECK(p != NULL);
    for (int64_t n = 0; n <= 5; n += 2 + (n == 0)) {
        rlx_tensor *xv = trand(RLX_F64, 4, (int64_t[]){n, 3, 7, 6}, -2, 2), *got[2];
        CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got), RLX_OK);
        rlx_tensor *wy = rlx_avg_pool2d(
            rlx_max_pool2d(rlx_tanh(rlx_conv2d(xv, w, NULL, (int[]){2, 1}, (int[]){1, 1}, NULL, 1)), (int[]){2, 2},
                           (int[]){1, 1}, NULL),
            (int[]){2, 2}, NULL, (int[]){1, 1});
        rlx_tensor *wg;
        CHECK_EQ_INT(rlx_grad(rlx_sum(rlx_mul(wy, wy), NULL, 0, false), &w, 1, &wg), RLX_OK);
        EXPECT_SAME(got[0], wy, 1e-12);
        EXPECT_SAME(got[1], wg, 1e-12);
    }
    rlx_program_free(p);
    /* a dynamic H or W traces too (values: test_dynamic_conv.c) */
    static const int64_t dyn_hw[2][4] = {{2, 3, -1, 6}, {-1, 3, 7, -2}};
    rlx_tensor *wt = trand(RLX_F64, 4, (int64_t[]){3, 2, 3, 3}, -1, 1);
    for (int k = 0; k < 2; k++) {
        rlx_tensor *xb = rlx_input("xb", RLX_F64, 4, dyn_hw[k]);
        CHECK(rlx_conv2d(xb, w, NULL, NULL, NULL, NULL, 1) != NULL);
        CHECK(rlx_max_pool2d(xb, (int[]){2, 2}, NULL, NULL) != NULL);
        CHECK(rlx_conv_transpose2d(xb, wt, NULL, NULL, NULL, NULL, NULL, 1) != NULL);
    }
}

TEST(dynamic_allocation_failures) { ALLOC_WALK(dynamic_workload, 20); }

/* ------------------------------------------- einsum and dropout over -1 */

/* einsum expressions over x (its -1 dims dynamic); par[0] is w [C, 4],
 * par[1] a [1, C] row (a size-1 dim that broadcasts). */
static rlx_tensor *es(const char *eq, rlx_tensor *a, rlx_tensor *b)
{
    rlx_tensor *xs[2] = {a, b};
    return rlx_einsum(eq, xs, b ? 2 : 1);
}
static rlx_tensor *n_mm(rlx_tensor *x, rlx_tensor *const *par) { return es("ij,jk->ik", x, par[0]); }
static rlx_tensor *n_colsum(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return es("ij->j", x, NULL); }
static rlx_tensor *n_gram(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return es("ij,kj->ik", x, x); }
static rlx_tensor *n_contract(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return es("ij,ij->j", x, x); }
static rlx_tensor *n_bcast(rlx_tensor *x, rlx_tensor *const *par) { return es("ij,ij->ij", x, par[1]); }
static rlx_tensor *n_outer(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par;
    return es("ij,k->ijk", x, rlx_select(x, 1, 0));
}
static rlx_tensor *n_merge_m(rlx_tensor *x, rlx_tensor *const *par) { return es("bij,jk->bik", x, par[0]); }
static rlx_tensor *n_bmm(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return es("bij,bkj->bik", x, x); }
static rlx_tensor *n_ell(rlx_tensor *x, rlx_tensor *const *par) { return es("...j,jk->...k", x, par[0]); }
static rlx_tensor *n_kmerge(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return es("bij,bij->j", x, x); }
static rlx_tensor *n_nmulti(rlx_tensor *x, rlx_tensor *const *par) { return es("jk,bij->kbi", par[0], x); }
static rlx_tensor *n_diag(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return es("ii->i", x, NULL); }
static rlx_tensor *n_trace(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return es("ii", x, NULL); }
static rlx_tensor *n_diag_mm(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return es("ij,jj->ij", x, x); }
static rlx_tensor *n_drop(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_dropout(x, 0.3, 77); }
static rlx_tensor *n_drop_mul(rlx_tensor *x, rlx_tensor *const *par)
{
    (void)par; /* the mask meets x's own values: the gradient is mask / 0.6 times the incoming one */
    return rlx_mul(rlx_dropout(rlx_tanh(x), 0.4, 5), x);
}
static rlx_tensor *n_drop_all(rlx_tensor *x, rlx_tensor *const *par) { (void)par; return rlx_dropout(x, 1, 9); }

/* Each expression compiled over its traced shape, run at several sizes
 * (every -1 bound to n) on both backends in f32 and f64: the value and
 * the gradients of sum(y * y) (wrt x and, when it is used, w) equal those
 * of the same graph over the bound value on the reference backend. */
TEST(dynamic_einsum_dropout_match_static)
{
    static const struct {
        const char *name;
        expr_fn f;
        int rank;
        int64_t shape[3];
        bool uses_w;
    } cs[] = {{"mm", n_mm, 2, {-1, C}, true},
              {"colsum", n_colsum, 2, {-1, C}, false},
              {"gram", n_gram, 2, {-1, C}, false},
              {"contract", n_contract, 2, {-1, C}, false},
              {"bcast", n_bcast, 2, {-1, C}, true},
              {"outer", n_outer, 2, {-1, C}, false},
              {"merge_m", n_merge_m, 3, {-1, 3, C}, true},
              {"merge_m_inner", n_merge_m, 3, {2, -1, C}, true},
              {"bmm", n_bmm, 3, {-1, 3, C}, false},
              {"bmm_dyn2", n_bmm, 3, {-1, -1, C}, false},
              {"n_multi", n_nmulti, 3, {-1, 2, C}, true},
              {"ell", n_ell, 3, {-1, 2, C}, true},
              {"kmerge", n_kmerge, 3, {-1, 2, C}, false},
              {"diag", n_diag, 2, {-1, -1}, false},
              {"trace", n_trace, 2, {-1, -1}, false},
              {"diag_mm", n_diag_mm, 2, {-1, -1}, false},
              {"dropout", n_drop, 2, {-1, C}, false},
              {"dropout3", n_drop, 3, {2, -1, 3}, false},
              {"dropout_mul", n_drop_mul, 2, {-1, C}, false},
              {"dropout_all", n_drop_all, 2, {-1, C}, false}};
    char backend[16];
    CHECK_EQ_INT(rlx_get_option("backend", backend, sizeof backend), RLX_OK);
    const char *backends[] = {"jit", "ref"};
    const rlx_dtype dts[] = {RLX_F32, RLX_F64};
    const int64_t sizes[] = {0, 1, 2, 5, 1, 9};
    for (int be = 0; be < 2; be++) {
        for (int t = 0; t < 2; t++) {
            CHECK_EQ_INT(rlx_set_option("backend", backends[be]), RLX_OK);
            rlx_dtype dt = dts[t];
            rlx_tensor *par[2] = {trand(dt, 2, (int64_t[]){C, 4}, -1, 1), trand(dt, 2, (int64_t[]){1, C}, -1, 1)};
            for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
                rlx_tensor *x = rlx_input("x", dt, cs[i].rank, cs[i].shape), *outs[3] = {0};
                rlx_tensor *wrt[2] = {x, par[0]};
                int nw = cs[i].uses_w ? 2 : 1;
                outs[0] = cs[i].f(x, par);
                if (!outs[0] || rlx_grad(rlx_sum(rlx_mul(outs[0], outs[0]), NULL, 0, false), wrt, nw, outs + 1)) {
                    test_fail(__FILE__, __LINE__, "%s: tracing: %s", cs[i].name, rlx_last_error());
                    continue;
                }
                rlx_program *p = rlx_compile(outs, 1 + nw);
                if (!p) {
                    test_fail(__FILE__, __LINE__, "%s: rlx_compile: %s", cs[i].name, rlx_last_error());
                    continue;
                }
                for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
                    int64_t bound[3];
                    for (int d = 0; d < cs[i].rank; d++)
                        bound[d] = cs[i].shape[d] < 0 ? sizes[k] : cs[i].shape[d];
                    rlx_tensor *xv = trand(dt, cs[i].rank, bound, -1, 1), *got[3] = {0}, *want[3] = {0};
                    if (rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got) != RLX_OK) {
                        test_fail(__FILE__, __LINE__, "%s (%s, %s) at %lld: %s", cs[i].name, backends[be],
                                  rlx_dtype_name(dt), (long long)sizes[k], rlx_last_error());
                        continue;
                    }
                    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
                    rlx_tensor *vw[2] = {xv, par[0]};
                    want[0] = cs[i].f(xv, par);
                    CHECK_EQ_INT(rlx_grad(rlx_sum(rlx_mul(want[0], want[0]), NULL, 0, false), vw, nw, want + 1),
                                 RLX_OK);
                    for (int o = 0; o <= nw; o++) {
                        CHECK_EQ_INT(rlx_rank(got[o]), rlx_rank(want[o]));
                        for (int d = 0; d < rlx_rank(want[o]); d++)
                            CHECK_EQ_INT(rlx_dim(got[o], d), rlx_dim(want[o], d));
                        EXPECT_SAME(got[o], want[o], dt == RLX_F32 ? 1e-4 : 1e-11);
                    }
                    CHECK_EQ_INT(rlx_set_option("backend", backends[be]), RLX_OK);
                }
                rlx_program_free(p);
            }
        }
    }
    CHECK_EQ_INT(rlx_set_option("backend", backend), RLX_OK);
}

/* A dropout mask over a dynamic dim is the static one of the bound shape,
 * bit for bit (one counter-based stream), and it drops about p; what
 * einsum cannot resolve per binding, and mismatched sizes, say so. */
TEST(dynamic_einsum_dropout_edges)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, 64});
    rlx_tensor *y = rlx_dropout(x, 0.25, 1234);
    rlx_program *p = rlx_compile(&y, 1);
    CHECK(p != NULL);
    for (int64_t n = 1; p && n <= 40; n += 13) {
        rlx_tensor *xv = rlx_ones(RLX_F32, 2, (int64_t[]){n, 64}), *got = NULL;
        CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", xv}, 1, &got), RLX_OK);
        EXPECT_SAME(got, rlx_dropout(xv, 0.25, 1234), 0);
        double kept = 0;
        CHECK_EQ_INT(rlx_read_f64(rlx_mean(rlx_ne_s(got, 0), NULL, 0, false), &kept, 1), RLX_OK);
        if (n == 40 && fabs(kept - 0.75) > 0.05)
            test_fail(__FILE__, __LINE__, "kept %g of the elements, expected about 0.75", kept);
    }
    rlx_program_free(p);
    /* the seed a tensor read at run time (rlx_dropout_seeded): the mask of
     * the bound shape for each seed, and its gradient the same mask */
    rlx_tensor *seed = rlx_input("seed", RLX_I64, 0, NULL);
    rlx_tensor *ys = rlx_dropout_seeded(x, 0.25, seed), *gs = NULL;
    CHECK(ys != NULL);
    CHECK_EQ_INT(rlx_grad(rlx_sum(rlx_mul(ys, x), NULL, 0, false), &x, 1, &gs), RLX_OK);
    rlx_program *ps = rlx_compile((rlx_tensor *[]){ys, gs}, 2);
    CHECK(ps != NULL);
    for (int64_t n = 0; ps && n <= 40; n += 10) {
        rlx_tensor *xv = trand(RLX_F32, 2, (int64_t[]){n, 64}, -1, 1), *got[2] = {NULL, NULL};
        for (int64_t sd = 3; sd < 6; sd += 2) {
            rlx_tensor *sv = rlx_scalar(RLX_I64, (double)sd);
            rlx_binding b[2] = {{"x", xv}, {"seed", sv}};
            CHECK_EQ_INT(rlx_program_run(ps, b, 2, got), RLX_OK);
            rlx_tensor *want = rlx_dropout_seeded(xv, 0.25, sv);
            EXPECT_SAME(got[0], want, 0);
            EXPECT_SAME(got[1], rlx_mul_s(want, 2), 1e-6); /* d(sum(m x x))/dx = 2 m x */
        }
    }
    rlx_program_free(ps);
    /* integers stay integer over a dynamic dim, wrapping as NumPy does */
    rlx_tensor *xi = rlx_input("xi", RLX_I32, 2, (int64_t[]){-1, 3});
    rlx_tensor *wi = rlx_cast(trand(RLX_F32, 2, (int64_t[]){3, 2}, -50000, 50000), RLX_I32);
    rlx_tensor *yi = es("ij,jk->ik", xi, wi);
    rlx_program *pi = rlx_compile(&yi, 1);
    CHECK(pi != NULL && rlx_dtype_of(yi) == RLX_I32);
    for (int64_t n = 0; pi && n < 9; n += 4) {
        rlx_tensor *xv = rlx_cast(trand(RLX_F32, 2, (int64_t[]){n, 3}, -50000, 50000), RLX_I32), *gi = NULL;
        CHECK_EQ_INT(rlx_program_run(pi, &(rlx_binding){"xi", xv}, 1, &gi), RLX_OK);
        EXPECT_SAME(gi, es("ij,jk->ik", xv, wi), 0);
    }
    rlx_program_free(pi);
    /* merges of several dynamic labels (M and K, or M and N) take a
     * broadcast multiply instead: test_dynamic_ops.c checks their values */
    rlx_tensor *w = rlx_ones(RLX_F32, 2, (int64_t[]){4, 3});
    /* a dynamic label meeting a static size other than 1 */
    CHECK_NULL_ERR(es("ij,jk->ik", rlx_input("a", RLX_F32, 2, (int64_t[]){3, -1}), w), RLX_E_SHAPE, "rlx_einsum");
    CHECK_NULL_ERR(es("ii->i", rlx_input("a", RLX_F32, 2, (int64_t[]){3, -1}), NULL), RLX_E_SHAPE, "rlx_einsum");
    /* a diagonal of two dynamic dims bound differently fails at the run */
    rlx_tensor *sq = rlx_input("sq", RLX_F64, 2, (int64_t[]){-1, -1});
    rlx_tensor *d = es("ii->i", sq, NULL);
    rlx_program *pd = rlx_compile(&d, 1);
    CHECK(pd != NULL);
    rlx_tensor *got = NULL;
    if (pd)
        CHECK_EQ_INT(rlx_program_run(pd, &(rlx_binding){"sq", trand(RLX_F64, 2, (int64_t[]){3, 4}, -1, 1)}, 1, &got),
                     RLX_E_SHAPE);
    CHECK(got == NULL);
    rlx_program_free(pd);
}

TEST_MAIN(T(dynamic_batch_matches_reference), T(dynamic_argmax_of_an_empty_axis), T(dynamic_cross_entropy_classes), T(dynamic_rope_table_positions), T(dynamic_introspection), T(dynamic_bindings),
          T(dynamic_empty_reduction_in_cat), T(dynamic_ops_never_wrong),
          T(dynamic_program_shared_by_threads), T(dynamic_allocation_failures), T(dynamic_axis_ops_match_static),
          T(dynamic_symbols), T(dynamic_spec_lru), T(dynamic_gradients_match_static),
          T(dynamic_attention_sequence), T(dynamic_arena_grows_only), T(dynamic_arena_threads),
          T(arange_of_values), T(arange_of_errors), T(dynamic_constant_binding_compiles_once),
          T(dynamic_spec_graph_private), T(dynamic_new_sizes_compile_nothing), T(dynamic_batch_conv_pool),
          T(dynamic_einsum_dropout_match_static), T(dynamic_einsum_dropout_edges))
