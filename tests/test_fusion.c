/*
 * test_fusion.c — the training step's fusion decisions (issue 14, item 4):
 * each one's values against the reference evaluator or a double loop, and
 * the property of the schedule it establishes (through sched_build on the
 * simplified graph, as a realization schedules it).
 *
 *  - a pad guard fixed along the innermost loop (the q/k/v gradient slices
 *    of attention summed into one [B, S, 3W] gradient) loads plainly;
 *  - the gradient of a transposed matmul operand (a linear layer's weight)
 *    is one GEMM in the operand's own layout;
 *  - small elementwise clusters over one stored value are recomputed by
 *    each reader (tanh-GELU's pieces), sums of two stored values are not,
 *    nor a polynomial into a reduction, nor a cluster of leaves alone;
 *  - float scatter-add (the gradients of gather) on its typed loops.
 */
#include "harness.h"
#include "passes/passes.h"
#include "tensor/ts.h"

/* The schedule of roots as a realization builds it; the caller frees it. */
static bool schedule_of(rlx_tensor *const *roots, int n, sched_schedule *s, ir_node **simp)
{
    ir_node *r[8];
    sched_ctx c = {0};
    for (int i = 0; i < n; i++)
        r[i] = ts_node(roots[i]);
    if (simp_run(&c, r, n, ts_simp_fold, simp) != RLX_OK || sched_build(&c, simp, n, s) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "scheduling failed: %s", c.msg);
        return false;
    }
    return true;
}

/* Its kernels that compute a value (LOOP and REF; a VIEW only publishes). */
static long computed(const sched_schedule *s)
{
    long c = 0;
    for (long k = 0; k < s->count; k++)
        c += s->k[k].kind != SCHED_VIEW;
    return c;
}

static void schedule_free(sched_schedule *s, ir_node **simp, int n)
{
    sched_free(s);
    for (int i = 0; i < n; i++)
        ir_release(simp[i]);
}

/* JIT and reference values of t agree within tol. */
static void same_on_backends(const char *what, rlx_tensor *t, double tol)
{
    int64_t n[2];
    double *v[2] = {NULL, NULL};
    EACH_BACKEND(b)
    {
        rlx_tensor *c = rlx_contiguous(t); /* a fresh node per backend */
        v[b] = test_values(c, &n[b]);
    }
    if (v[0] && v[1] && n[0] == n[1])
        for (int64_t i = 0; i < n[0]; i++)
            if (!test_close(v[1][i], v[0][i], tol, tol)) {
                test_fail(__FILE__, __LINE__, "%s [%lld]: jit %.17g, reference %.17g", what, (long long)i, v[1][i],
                          v[0][i]);
                break;
            }
    free(v[0]);
    free(v[1]);
}

/* --------------------------------------------------- blockwise guards */

/* Three [B, H, S, D] gradients, each read as [B, S, H*D] and padded into
 * its third of [B, S, 3*H*D], summed: attention's q/k/v gradient. */
static rlx_tensor *qkv_sum(rlx_dtype dt, int64_t B, int64_t H, int64_t S, int64_t D, bool strided)
{
    rlx_tensor *acc = NULL;
    for (int i = 0; i < 3; i++) {
        int64_t sh[4] = {B, H, S, strided ? 2 * D : D};
        rlx_tensor *g = trand(dt, 4, sh, -4, 4);
        if (strided) /* every other column: a non-contiguous source */
            g = rlx_slice(g, 3, 0, RLX_END, 2);
        rlx_tensor *t = rlx_reshape(rlx_transpose(g, 4, (int[]){0, 2, 1, 3}), 3, (int64_t[]){B, S, H * D});
        t = rlx_pad(t, 2, i * H * D, (2 - i) * H * D, 0);
        acc = acc ? rlx_add(acc, t) : t;
    }
    return acc;
}

TEST(blockwise_pad_guards_match_reference)
{
    const int64_t shapes[][4] = {{2, 3, 5, 4}, {1, 2, 7, 8}, {3, 4, 16, 32}, {2, 8, 9, 32}, {1, 1, 1, 1}, {2, 3, 0, 4}};
    const rlx_dtype dts[] = {RLX_F32, RLX_F64, RLX_I32};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
            for (int strided = 0; strided < 2; strided++) {
                const int64_t *q = shapes[s];
                char what[96];
                snprintf(what, sizeof what, "%s %s%s", rlx_dtype_name(dts[d]), test_dims(4, q),
                         strided ? " strided" : "");
                same_on_backends(what, qkv_sum(dts[d], q[0], q[1], q[2], q[3], strided != 0), 0);
            }
}

/* Pads whose guards do move along the innermost loop, or sit on an outer
 * dim of a small source (an inner extent past the source's size keeps
 * the masked load): the same values on both backends. */
TEST(other_pad_guards_match_reference)
{
    rlx_tensor *a = trand(RLX_F32, 2, (int64_t[]){5, 7}, -1, 1);
    same_on_backends("inner pad", rlx_add_s(rlx_pad(a, 1, 3, 2, 0), 1), 0);
    same_on_backends("outer pad", rlx_add_s(rlx_pad(a, 0, 2, 1, 0), 1), 0);
    rlx_tensor *r = trand(RLX_F32, 2, (int64_t[]){1, 3}, -1, 1);
    same_on_backends("row padded", rlx_mul_s(rlx_pad(rlx_broadcast_to(r, 2, (int64_t[]){4, 3}), 0, 1, 2, 0), 2), 0);
    rlx_tensor *c = trand(RLX_F64, 2, (int64_t[]){3, 1}, -1, 1);
    same_on_backends("column broadcast", rlx_add_s(rlx_pad(rlx_broadcast_to(c, 2, (int64_t[]){3, 40}), 0, 2, 2, 0), 1),
                     0);
    rlx_tensor *v = trand(RLX_F32, 1, (int64_t[]){4}, -1, 1);
    same_on_backends("rank 1", rlx_add_s(rlx_pad(v, 0, 4, 4, 0), 1), 0);
    /* flat [n, 2*w] blocks padded at a non-multiple of the inner extent */
    rlx_tensor *m = trand(RLX_F32, 3, (int64_t[]){3, 2, 4}, -1, 1);
    same_on_backends("unaligned block",
                     rlx_add_s(rlx_pad(rlx_reshape(m, 2, (int64_t[]){3, 8}), 1, 2, 6, 0), 1), 0);
}

/* ----------------------------------------- weight gradients, one GEMM */

/* d sum(y * c) / d w for y = x w^T + b, c fixed: c^T x in double. */
static void linear_grad_ref(const double *x, const double *c, int64_t n, int64_t in, int64_t out, double *gw)
{
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++) {
            double s = 0;
            for (int64_t r = 0; r < n; r++)
                s += c[r * out + o] * x[r * in + i];
            gw[o * in + i] = s;
        }
}

TEST(weight_gradient_is_one_gemm_in_its_layout)
{
    const int64_t sizes[][3] = {{6, 5, 3}, {33, 17, 9}, {1, 4, 4}, {64, 48, 80}};
    const rlx_dtype dts[] = {RLX_F32, RLX_F64};
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
        for (size_t d = 0; d < 2; d++) {
            int64_t n = sizes[z][0], in = sizes[z][1], out = sizes[z][2];
            rlx_dtype dt = dts[d];
            double *xv = malloc((size_t)(n * in) * sizeof *xv), *cv = malloc((size_t)(n * out) * sizeof *cv),
                   *wv = malloc((size_t)(out * in) * sizeof *wv), *gw = malloc((size_t)(out * in) * sizeof *gw);
            for (int64_t i = 0; i < n * in; i++)
                xv[i] = test_uniform(-1, 1);
            for (int64_t i = 0; i < n * out; i++)
                cv[i] = test_uniform(-1, 1);
            for (int64_t i = 0; i < out * in; i++)
                wv[i] = test_uniform(-1, 1);
            rlx_tensor *x = test_tensor(dt, 2, (int64_t[]){n, in}, xv), *c = test_tensor(dt, 2, (int64_t[]){n, out}, cv);
            rlx_tensor *w = test_tensor(dt, 2, (int64_t[]){out, in}, wv), *b = trand(dt, 1, &out, -1, 1);
            linear_grad_ref(xv, cv, n, in, out, gw);
            rlx_tensor *loss = rlx_sum_all(rlx_mul(rlx_linear(x, w, b), c)), *g[2];
            CHECK_EQ_INT(rlx_grad(loss, (rlx_tensor *[]){w, x}, 2, g), RLX_OK);
            EACH_BACKEND(be)
            {
                rlx_tensor *gc = rlx_contiguous(g[0]);
                EXPECT_V(be ? "gw jit" : "gw ref", gc, dt, 2, ((int64_t[]){out, in}), gw, dt == RLX_F32 ? 1e-5 : 1e-12,
                         dt == RLX_F32 ? 1e-5 : 1e-12);
            }
            same_on_backends("gx", g[1], dt == RLX_F32 ? 1e-5 : 1e-12);
            /* the plan: w's gradient is the GEMM's own output [out, in] */
            sched_schedule s;
            ir_node *simp[1];
            if (schedule_of(&g[0], 1, &s, simp)) {
                long gemms = 0, in_layout = 0, after = 0;
                for (long k = 0; k < s.count; k++) {
                    const ir_node *m = s.k[k].node;
                    if (s.k[k].kind != SCHED_REF || m->op != IR_OP_MATMUL) {
                        after += gemms > 0; /* nothing transposes it after */
                        continue;
                    }
                    gemms++;
                    in_layout += m->rank == 2 && m->shape[0] == out && m->shape[1] == in;
                }
                CHECK_EQ_INT(gemms, 1);
                CHECK_EQ_INT(in_layout, 1);
                CHECK_EQ_INT(after, 0);
                schedule_free(&s, simp, 1);
            }
            free(xv);
            free(cv);
            free(wv);
            free(gw);
        }
}

/* The same for a transposed first operand and batched operands: values
 * against the reference evaluator. */
TEST(transposed_operand_gradients_match_reference)
{
    rlx_tensor *a = trand(RLX_F32, 2, (int64_t[]){7, 5}, -1, 1), *b = trand(RLX_F32, 2, (int64_t[]){7, 3}, -1, 1);
    rlx_tensor *c = trand(RLX_F32, 2, (int64_t[]){5, 3}, -1, 1), *g[2];
    CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(rlx_matmul(rlx_t(a), b), c)), (rlx_tensor *[]){a, b}, 2, g), RLX_OK);
    same_on_backends("t(a) @ b: da", g[0], 1e-5);
    same_on_backends("t(a) @ b: db", g[1], 1e-5);
    rlx_tensor *x = trand(RLX_F64, 3, (int64_t[]){2, 4, 6}, -1, 1), *y = trand(RLX_F64, 3, (int64_t[]){2, 5, 6}, -1, 1);
    rlx_tensor *e = trand(RLX_F64, 3, (int64_t[]){2, 4, 5}, -1, 1);
    CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(rlx_matmul_t(x, y), e)), (rlx_tensor *[]){x, y}, 2, g), RLX_OK);
    same_on_backends("batched x @ y^T: dx", g[0], 1e-12);
    same_on_backends("batched x @ y^T: dy", g[1], 1e-12);
    rlx_tensor *v = trand(RLX_F64, 3, (int64_t[]){2, 6, 4}, -1, 1), *u = trand(RLX_F64, 3, (int64_t[]){2, 5, 6}, -1, 1);
    CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_tanh(rlx_matmul(rlx_transpose(v, 3, (int[]){0, 2, 1}), rlx_t(u)))),
                          (rlx_tensor *[]){v, u}, 2, g),
                 RLX_OK);
    same_on_backends("batched v^T @ u^T: dv", g[0], 1e-12);
    same_on_backends("batched v^T @ u^T: du", g[1], 1e-12);
}

/* ---------------------------------------------------- recomputation */

/* Materialized kernels of the schedule whose node has shape [n, m]. */
static long stored_of_shape(const sched_schedule *s, int64_t n, int64_t m, long *tanh_kernels)
{
    long c = 0;
    *tanh_kernels = 0;
    for (long k = 0; k < s->count; k++) {
        const ir_node *v = s->k[k].node;
        if (s->k[k].kind == SCHED_LOOP && v->op == IR_OP_TANH)
            ++*tanh_kernels;
        c += s->k[k].kind == SCHED_LOOP && v->rank == 2 && v->shape[0] == n && v->shape[1] == m;
    }
    return c;
}

TEST(gelu_pieces_are_recomputed_not_stored)
{
    const int64_t sizes[][3] = {{8, 6, 10}, {37, 16, 24}, {1, 3, 1}};
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
        for (int f64 = 0; f64 < 2; f64++) {
            rlx_dtype dt = f64 ? RLX_F64 : RLX_F32;
            int64_t n = sizes[z][0], in = sizes[z][1], out = sizes[z][2];
            rlx_tensor *x = trand(dt, 2, (int64_t[]){n, in}, -2, 2), *w = trand(dt, 2, (int64_t[]){out, in}, -1, 1);
            rlx_tensor *b = trand(dt, 1, &out, -1, 1), *c = trand(dt, 2, (int64_t[]){n, out}, -1, 1);
            rlx_tensor *y = rlx_gelu_tanh(rlx_linear(x, w, b)), *g[3];
            CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(y, c)), (rlx_tensor *[]){x, w, b}, 3, g), RLX_OK);
            double tol = f64 ? 1e-12 : 2e-5;
            same_on_backends("y", y, tol);
            same_on_backends("gx", g[0], tol);
            same_on_backends("gw", g[1], tol);
            same_on_backends("gb", g[2], tol);
            /* the plan of y and its gradients: of [n, out], only the
             * pre-activation (the GEMM's epilogue), y and the gradient at
             * the pre-activation are stored; tanh is never a kernel's value */
            rlx_tensor *roots[4] = {y, g[0], g[1], g[2]};
            sched_schedule s;
            ir_node *simp[4];
            if (!schedule_of(roots, 4, &s, simp))
                continue;
            long tanhs, stored = stored_of_shape(&s, n, out, &tanhs);
            if (n != out && n != in) {
                CHECK(stored <= 3);
                CHECK_EQ_INT(tanhs, 0);
            }
            schedule_free(&s, simp, 4);
        }
}

/* A value that is the sum of two stored values, read by two kernels, is
 * stored once: recomputing it would make each reader load both. */
TEST(sum_of_two_stored_values_is_stored)
{
    rlx_tensor *x = trand(RLX_F32, 2, (int64_t[]){16, 24}, -1, 1), *y = trand(RLX_F32, 2, (int64_t[]){16, 24}, -1, 1);
    rlx_tensor *a = rlx_add(x, y), *r[2] = {rlx_exp(a), rlx_sum(a, (int[]){1}, 1, false)};
    same_on_backends("exp(x + y)", r[0], 1e-6);
    same_on_backends("sum(x + y)", r[1], 1e-5);
    sched_schedule s;
    ir_node *simp[2];
    if (!schedule_of(r, 2, &s, simp))
        return;
    CHECK_EQ_INT(computed(&s), 3);
    schedule_free(&s, simp, 2);
    /* one stored value of its size per recomputed cluster: exp(x) * 2 + 1
     * read by two elementwise kernels is recomputed by each */
    rlx_tensor *e = rlx_add_s(rlx_mul_s(rlx_exp(x), 2), 1), *q[2] = {rlx_neg(e), rlx_mul(e, y)};
    same_on_backends("-(2 exp(x) + 1)", q[0], 1e-6);
    same_on_backends("(2 exp(x) + 1) y", q[1], 1e-6);
    if (!schedule_of(q, 2, &s, simp))
        return;
    CHECK_EQ_INT(computed(&s), 2);
    schedule_free(&s, simp, 2);
    /* but not into a reduction when it holds a polynomial (exp): stored */
    rlx_tensor *u[2] = {rlx_neg(e), rlx_sum(e, (int[]){0}, 1, false)};
    same_on_backends("sum(2 exp(x) + 1)", u[1], 1e-5);
    if (!schedule_of(u, 2, &s, simp))
        return;
    CHECK_EQ_INT(computed(&s), 3);
    schedule_free(&s, simp, 2);
    /* a cluster of leaves alone (a causal mask of iotas) is stored */
    rlx_tensor *ar = rlx_arange(RLX_F32, 0, 16, 1);
    rlx_tensor *mask = rlx_le(rlx_reshape(ar, 2, (int64_t[]){1, 16}), rlx_reshape(ar, 2, (int64_t[]){16, 1}));
    rlx_tensor *sq = rlx_narrow(x, 1, 0, 16), *mk[2] = {rlx_where(mask, sq, rlx_zeros_like(sq)), rlx_where(mask, rlx_zeros_like(sq), sq)};
    same_on_backends("where(mask, x, 0)", mk[0], 0);
    same_on_backends("where(mask, 0, x)", mk[1], 0);
    if (!schedule_of(mk, 2, &s, simp))
        return;
    CHECK_EQ_INT(computed(&s), 3);
    schedule_free(&s, simp, 2);
    /* a cluster without one is recomputed there too: 2 x + 1 */
    rlx_tensor *l = rlx_add_s(rlx_mul_s(x, 2), 1), *w[2] = {rlx_neg(l), rlx_sum(l, (int[]){0}, 1, false)};
    same_on_backends("sum(2 x + 1)", w[1], 1e-5);
    if (!schedule_of(w, 2, &s, simp))
        return;
    CHECK_EQ_INT(computed(&s), 2);
    schedule_free(&s, simp, 2);
}

/* ------------------------------------------------------ scatter-add */

TEST(float_scatter_add_typed_loops_match_double_loop)
{
    const int64_t rows = 9, cols = 5, n = 40;
    for (int i64 = 0; i64 < 2; i64++) {
        double bv[9 * 5], sv[40 * 5], want[9 * 5];
        int64_t iv[40 * 5];
        int32_t iw[40 * 5];
        for (int64_t i = 0; i < rows * cols; i++)
            want[i] = bv[i] = (float)test_uniform(-1, 1);
        for (int64_t p = 0; p < n * cols; p++) {
            sv[p] = (float)test_uniform(-1, 1);
            iv[p] = (int64_t)test_uniform(-rows, rows); /* duplicates and negative indices */
            if (iv[p] >= rows)
                iv[p] = rows - 1;
            iw[p] = (int32_t)iv[p];
        }
        /* floats add in double, one rounding per element */
        for (int64_t p = 0; p < n * cols; p++) {
            int64_t k = iv[p] < 0 ? iv[p] + rows : iv[p];
            want[k * cols + p % cols] += sv[p];
        }
        for (int64_t i = 0; i < rows * cols; i++)
            want[i] = (float)want[i];
        rlx_tensor *base = test_tensor(RLX_F32, 2, (int64_t[]){rows, cols}, bv);
        rlx_tensor *src = test_tensor(RLX_F32, 2, (int64_t[]){n, cols}, sv);
        rlx_tensor *idx = i64 ? ti64(2, (int64_t[]){n, cols}, iv) : ti32(2, (int64_t[]){n, cols}, iw);
        EACH_BACKEND(b)
        {
            rlx_tensor *r = rlx_scatter_add(base, 0, idx, src);
            EXPECT_V(b ? "jit" : "ref", r, RLX_F32, 2, ((int64_t[]){rows, cols}), want, 0, 0);
            /* a transposed (non-contiguous) base takes the generic loads */
            rlx_tensor *bt = rlx_t(rlx_contiguous(rlx_t(base)));
            EXPECT_V(b ? "jit, strided base" : "ref, strided base", rlx_scatter_add(bt, 0, idx, src), RLX_F32, 2,
                     ((int64_t[]){rows, cols}), want, 0, 0);
        }
    }
    /* the gradient of index_select: rows gathered twice add up */
    rlx_tensor *w = trand(RLX_F32, 2, (int64_t[]){6, 4}, -1, 1), *g;
    rlx_tensor *ix = ti32(1, (int64_t[]){7}, (int32_t[]){0, 5, 5, -1, 2, 0, 3});
    CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul_s(rlx_index_select(w, 0, ix), 3)), &w, 1, &g), RLX_OK);
    EXPECT(g, RLX_F32, 2, ((int64_t[]){6, 4}),
           ((double[]){6, 6, 6, 6, 0, 0, 0, 0, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0, 0, 0, 9, 9, 9, 9}), 0);
}

TEST_MAIN(T(blockwise_pad_guards_match_reference), T(other_pad_guards_match_reference),
          T(weight_gradient_is_one_gemm_in_its_layout), T(transposed_operand_gradients_match_reference),
          T(gelu_pieces_are_recomputed_not_stored), T(sum_of_two_stored_values_is_stored),
          T(float_scatter_add_typed_loops_match_double_loop))
