/*
 * test_q8.c — int8 weights with per-channel scales: rlx_linear_q8 against
 * a double loop written here (every activation dtype, i8 and u8, with and
 * without zero points and bias, odd, empty, batched and strided shapes, on
 * both backends: the reference evaluator's double loop and the JIT's
 * f32-panel kernel), rlx_quantize_per_channel against the f32 arithmetic
 * it documents (rounding ties to even, saturation, zero channels), the
 * gradient with respect to x against finite differences, and every
 * documented error.
 *
 * Nodes are hash-consed, so a graph built twice from the same inputs is
 * the same (already realized) node: each backend gets inputs of its own.
 */
#include "harness.h"

enum { ZP_NONE, ZP_SAME, ZP_I32 };

typedef struct {
    int64_t m, k, n;
} mkn;

/* Integer codes of wdt's full range as doubles. */
static void fill_codes(double *v, int64_t n, rlx_dtype wdt)
{
    double lo = wdt == RLX_I8 ? -128 : 0;
    for (int64_t i = 0; i < n; i++)
        v[i] = floor(test_uniform(lo, lo + 256));
}

/* out[r, j] = sum_i x[r, i] (w[j, i] - zp[j]) s[j] + b[j] in double, and
 * mag[r, j] = sum_i |x[r, i] (w[j, i] - zp[j]) s[j]| (the rounding scale). */
static void ref_linear(const double *x, const double *w, const double *s, const double *zp, const double *b,
                       int64_t m, int64_t k, int64_t n, double *out, double *mag)
{
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0, a = 0;
            for (int64_t i = 0; i < k; i++) {
                double t = x[r * k + i] * (w[j * k + i] - (zp ? zp[j] : 0)) * s[j];
                acc += t;
                a += fabs(t);
            }
            out[r * n + j] = acc + (b ? b[j] : 0);
            mag[r * n + j] = a + (b ? fabs(b[j]) : 0);
        }
}

static double ulp_of(rlx_dtype dt)
{
    return dt == RLX_BF16 ? 0x1p-8 : dt == RLX_F16 ? 0x1p-11 : dt == RLX_F32 ? 0x1p-24 : 0x1p-53;
}

/* got against want within the dtype's rounding of each value plus the
 * accumulation error (f32 sums: 1e-5 of the magnitude, f64 1e-13). */
static void expect_close(const char *what, rlx_tensor *got, rlx_dtype dt, int rank, const int64_t *shape,
                         const double *want, const double *mag, int64_t count)
{
    if (!got) {
        test_fail(__FILE__, __LINE__, "%s: %s", what, rlx_last_error());
        rlx_clear_error();
        return;
    }
    int64_t sh[8];
    if (rlx_dtype_of(got) != dt || rlx_shape(got, sh, 8) != rank || memcmp(sh, shape, (size_t)rank * 8) != 0) {
        test_fail(__FILE__, __LINE__, "%s: got %s %s, want %s %s", what, rlx_dtype_name(rlx_dtype_of(got)),
                  test_dims(rlx_rank(got), sh), rlx_dtype_name(dt), test_dims(rank, shape));
        return;
    }
    int64_t n = 0;
    double *v = test_values(got, &n);
    double acc = dt == RLX_F64 ? 1e-13 : 1e-5;
    for (int64_t i = 0; v && i < count; i++)
        if (!(fabs(v[i] - want[i]) <= 2 * ulp_of(dt) * fabs(want[i]) + acc * mag[i])) {
            test_fail(__FILE__, __LINE__, "%s [%lld]: %.9g, want %.9g (magnitude %g)", what, (long long)i, v[i],
                      want[i], mag[i]);
            break;
        }
    free(v);
}

/* x [m, k] of dt as some view of a fresh buffer made from the source
 * values t (up to m * (k + 5) of them); xv gets the values x holds. */
typedef rlx_tensor *(*x_maker)(rlx_dtype dt, int64_t m, int64_t k, double *t, double *xv);

static rlx_tensor *plain_x(rlx_dtype dt, int64_t m, int64_t k, double *t, double *xv)
{
    int64_t s[2] = {m, k};
    rlx_tensor *x = test_tensor(dt, 2, s, t);
    memcpy(xv, t, (size_t)(m * k) * 8);
    return x;
}

/* One rlx_linear_q8 over x [m, k] of xdt (made by mk_x), random codes of
 * wdt, scales, zero points as zpm says and a bias if bias, on both
 * backends. */
static void check_linear(mkn d, rlx_dtype xdt, rlx_dtype wdt, int zpm, bool bias, x_maker mk_x)
{
    int64_t m = d.m, k = d.k, n = d.n;
    double *xt = malloc((size_t)(m * (k + 5) + 1) * 8), *xv = malloc((size_t)(m * k + 1) * 8);
    double *wv = malloc((size_t)(n * k + 1) * 8), *sv = malloc((size_t)(n + 1) * 8);
    double *zv = malloc((size_t)(n + 1) * 8), *bv = malloc((size_t)(n + 1) * 8);
    double *want = malloc((size_t)(m * n + 1) * 8), *mag = malloc((size_t)(m * n + 1) * 8);
    for (int64_t i = 0; i < m * (k + 5); i++)
        xt[i] = test_uniform(-2, 2);
    fill_codes(wv, n * k, wdt);
    for (int64_t j = 0; j < n; j++) {
        sv[j] = test_uniform(0.001, 0.05);
        zv[j] = wdt == RLX_I8 ? floor(test_uniform(-20, 20)) : floor(test_uniform(100, 156));
        bv[j] = test_uniform(-1, 1);
    }
    int64_t ws[2] = {n, k}, cs[1] = {n}, os[2] = {m, n};
    char what[128];
    EACH_BACKEND(be) {
        rlx_tensor *x = mk_x(xdt, m, k, xt, xv);
        rlx_tensor *w = test_tensor(wdt, 2, ws, wv), *s = test_tensor(RLX_F32, 1, cs, sv);
        rlx_tensor *z = zpm == ZP_NONE ? NULL : test_tensor(zpm == ZP_SAME ? wdt : RLX_I32, 1, cs, zv);
        rlx_tensor *b = bias ? test_tensor(RLX_F32, 1, cs, bv) : NULL;
        ref_linear(xv, wv, sv, z ? zv : NULL, b ? bv : NULL, m, k, n, want, mag);
        snprintf(what, sizeof what, "linear_q8 [%lld,%lld]x[%lld,%lld] %s x %s zp %d bias %d (%s)", (long long)m,
                 (long long)k, (long long)n, (long long)k, rlx_dtype_name(xdt), rlx_dtype_name(wdt), zpm, bias,
                 be ? "jit" : "ref");
        expect_close(what, rlx_linear_q8(x, w, s, z, b), xdt, 2, os, want, mag, m * n);
    }
    free(xt), free(xv), free(wv), free(sv), free(zv), free(bv), free(want), free(mag);
}

static const mkn SHAPES[] = {
    {1, 7, 1},    /* N = 1 */
    {3, 70, 5},   /* K not a multiple of the vector width */
    {8, 600, 70}, /* K past one 512 panel, N past one 64-row block, decode rows */
    {20, 33, 9},  /* enough rows for the gemm path */
    {0, 5, 3},    /* M = 0: empty */
    {2, 0, 3},    /* K = 0: the empty sum is 0 (plus bias) */
    {4, 16, 0},   /* N = 0 */
};
static const rlx_dtype XDTS[4] = {RLX_F32, RLX_BF16, RLX_F16, RLX_F64};

TEST(linear_q8_values)
{
    int ns = (int)(sizeof SHAPES / sizeof *SHAPES), i = 0;
    for (int si = 0; si < ns; si++)
        for (int wi = 0; wi < 2; wi++)
            for (int zpm = ZP_NONE; zpm <= ZP_I32; zpm++, i++)
                check_linear(SHAPES[si], XDTS[i % 4], wi ? RLX_U8 : RLX_I8, zpm, (si + zpm) % 2 == 1, plain_x);
}

TEST(linear_q8_every_activation_dtype_on_both_paths)
{
    for (int d = 0; d < 4; d++)
        for (int wi = 0; wi < 2; wi++) {
            check_linear((mkn){3, 1100, 130}, XDTS[d], wi ? RLX_U8 : RLX_I8, wi ? ZP_SAME : ZP_NONE, d % 2, plain_x);
            check_linear((mkn){17, 520, 66}, XDTS[d], wi ? RLX_U8 : RLX_I8, ZP_I32, d % 2 == 0, plain_x);
        }
    /* several 256-row gemm items and 64-row dot items, a partial last one */
    check_linear((mkn){18, 530, 300}, RLX_F32, RLX_I8, ZP_SAME, true, plain_x);
    check_linear((mkn){5, 530, 300}, RLX_BF16, RLX_U8, ZP_SAME, false, plain_x);
}

/* x as views the kernel must read through strides or pack. */
static rlx_tensor *transposed_x(rlx_dtype dt, int64_t m, int64_t k, double *t, double *xv)
{
    int64_t s[2] = {k, m};
    rlx_tensor *x = rlx_t(test_tensor(dt, 2, s, t));
    for (int64_t r = 0; r < m; r++)
        for (int64_t i = 0; i < k; i++)
            xv[r * k + i] = t[i * m + r];
    return x;
}
static rlx_tensor *column_slice_x(rlx_dtype dt, int64_t m, int64_t k, double *t, double *xv)
{
    int64_t s[2] = {m, k + 5};
    rlx_tensor *x = rlx_narrow(test_tensor(dt, 2, s, t), 1, 3, k); /* rows k + 5 apart */
    for (int64_t r = 0; r < m; r++)
        for (int64_t i = 0; i < k; i++)
            xv[r * k + i] = t[r * (k + 5) + 3 + i];
    return x;
}
static rlx_tensor *broadcast_x(rlx_dtype dt, int64_t m, int64_t k, double *t, double *xv)
{
    int64_t s[2] = {1, k}, full[2] = {m, k};
    rlx_tensor *x = rlx_broadcast_to(test_tensor(dt, 2, s, t), 2, full); /* row stride 0 */
    for (int64_t r = 0; r < m; r++)
        memcpy(xv + r * k, t, (size_t)k * 8);
    return x;
}

TEST(linear_q8_strided_x)
{
    x_maker makers[3] = {transposed_x, column_slice_x, broadcast_x};
    for (int i = 0; i < 3; i++) {
        check_linear((mkn){5, 37, 11}, RLX_F32, RLX_I8, ZP_NONE, true, makers[i]);
        check_linear((mkn){18, 70, 3}, RLX_F32, RLX_U8, ZP_SAME, false, makers[i]);
        check_linear((mkn){2, 9, 4}, RLX_BF16, RLX_I8, ZP_I32, true, makers[i]);
    }
}

/* x [2, 3, K] (rank 3) and a transposed weight view [N, K] of a [K, N]
 * code tensor (the kernel dequantizes through its strides). */
TEST(linear_q8_batched_x_and_strided_weights)
{
    const int64_t k = 45, n = 6, xs[3] = {2, 3, 45}, wts[2] = {45, 6}, cs[1] = {6}, os[3] = {2, 3, 6};
    double xv[2 * 3 * 45], wt[45 * 6], wv[6 * 45], sv[6], zv[6], want[36], mag[36];
    for (int i = 0; i < 2 * 3 * 45; i++)
        xv[i] = test_uniform(-1, 1);
    fill_codes(wt, k * n, RLX_U8);
    for (int j = 0; j < n; j++) {
        sv[j] = test_uniform(0.01, 0.1);
        zv[j] = 128 + j;
        for (int i = 0; i < k; i++)
            wv[j * k + i] = wt[i * n + j];
    }
    ref_linear(xv, wv, sv, zv, NULL, 6, k, n, want, mag);
    EACH_BACKEND(be) {
        rlx_tensor *x = test_tensor(RLX_F32, 3, xs, xv), *w = rlx_t(test_tensor(RLX_U8, 2, wts, wt));
        rlx_tensor *s = test_tensor(RLX_F32, 1, cs, sv), *z = test_tensor(RLX_U8, 1, cs, zv);
        expect_close(be ? "rank 3 (jit)" : "rank 3 (ref)", rlx_linear_q8(x, w, s, z, NULL), RLX_F32, 3, os, want,
                     mag, 36);
    }
}

/* Exact small case written out: codes, zero points and scales that are
 * powers of two make every product exact. */
TEST(linear_q8_exact_small)
{
    const int64_t xs[2] = {2, 3}, ws[2] = {2, 3}, cs[1] = {2}, os[2] = {2, 2};
    const float xv[6] = {1, 2, 3, -1, 0.5f, 4};
    const int8_t wv[6] = {1, -2, 3, 127, -128, 0};
    const int8_t zv[2] = {1, -1};
    const float sv[2] = {0.5f, 0.25f}, bv[2] = {10, -10};
    /* W = [[0, -3, 2] * .5, [128, -127, 1] * .25] = [[0, -1.5, 1], [32, -31.75, 0.25]] */
    const double want[4] = {0 - 3 + 3 + 10, 32 - 63.5 + 0.75 - 10, 0 - 0.75 + 4 + 10, -32 - 15.875 + 1 - 10};
    EACH_BACKEND(be) {
        rlx_tensor *x = tf32(2, xs, xv), *s = tf32(1, cs, sv), *b = tf32(1, cs, bv);
        rlx_tensor *w = rlx_from_data(RLX_I8, 2, ws, wv), *z = rlx_from_data(RLX_I8, 1, cs, zv);
        EXPECT(rlx_linear_q8(x, w, s, z, b), RLX_F32, 2, os, want, 0);
        /* a rank-1 x [in] gives [out] */
        EXPECT(rlx_linear_q8(tf32(1, (const int64_t[]){3}, xv), w, s, z, b), RLX_F32, 1, cs, want, 0);
    }
}

/* Each output is one item's dot products: the same bits on 1, 2 and 3
 * threads, on the dot-loop path (5 rows) and the gemm path (40). */
TEST(linear_q8_same_bits_on_any_thread_count)
{
    const int64_t ws[2] = {200, 700}, cs[1] = {200};
    rlx_tensor *w = trand(RLX_I8, 2, ws, -128, 127), *s = trand(RLX_F32, 1, cs, 0.01, 0.02);
    for (int mi = 0; mi < 2; mi++) {
        int64_t xs[2] = {mi ? 40 : 5, 700};
        rlx_tensor *x = trand(RLX_F32, 2, xs, -1, 1);
        double *got[3] = {NULL, NULL, NULL};
        int64_t n = 0;
        for (int t = 1; t <= 3; t++) {
            rlx_set_num_threads(t);
            rlx_scope_begin();
            got[t - 1] = test_values(rlx_linear_q8(x, w, s, NULL, NULL), &n);
            rlx_scope_end();
        }
        rlx_set_num_threads(0);
        for (int t = 2; t <= 3; t++)
            if (got[0] && got[t - 1] && memcmp(got[0], got[t - 1], (size_t)n * sizeof(double)) != 0)
                test_fail(__FILE__, __LINE__, "%lld rows: %d threads differ from 1", (long long)xs[0], t);
        for (int t = 0; t < 3; t++)
            free(got[t]);
    }
}

/* Traced over a dynamic batch, compiled once, run on several batches
 * (empty included): the values of the direct call. */
TEST(linear_q8_in_a_program_with_a_dynamic_batch)
{
    const int64_t traced[2] = {-1, 30}, ws[2] = {7, 30}, cs[1] = {7};
    rlx_tensor *w = trand(RLX_U8, 2, ws, 0, 255), *s = trand(RLX_F32, 1, cs, 0.01, 0.02);
    rlx_tensor *z = trand(RLX_U8, 1, cs, 100, 150), *b = trand(RLX_F32, 1, cs, -1, 1);
    rlx_tensor *y = rlx_linear_q8(rlx_input("x", RLX_F32, 2, traced), w, s, z, b);
    CHECK(y && rlx_dim(y, 0) == -1 && rlx_dim(y, 1) == 7);
    rlx_program *p = y ? rlx_compile(&y, 1) : NULL;
    CHECK(p != NULL);
    const int64_t batches[4] = {1, 3, 0, 17};
    for (int i = 0; p && i < 4; i++) {
        int64_t xs[2] = {batches[i], 30};
        rlx_tensor *x = trand(RLX_F32, 2, xs, -1, 1), *got = NULL;
        rlx_binding bind = {"x", x};
        CHECK_EQ_INT(rlx_program_run(p, &bind, 1, &got), RLX_OK);
        if (got) {
            rlx_scope_begin();
            EXPECT_SAME(got, rlx_linear_q8(x, w, s, z, b), 0);
            rlx_scope_end();
        }
    }
    rlx_program_free(p);
}

/* ---------------------------------------------------- quantization */

/* Round half to even, as the library's rlx_round. */
static double rne(double v) { return nearbyint(v); }
static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

/* v rounded as the compute dtype stores it: f32, or f64 when f64. */
static double rd(double v, bool f64) { return f64 ? v : (double)(float)v; }

/* What rlx_quantize_per_channel documents, in f32 arithmetic (f64 for an
 * f64 w), for w [C, L] with channels along axis 0. */
static void ref_quantize(const double *w, int64_t c, int64_t l, bool u8, bool f64, double *q, double *s, double *zp)
{
    for (int64_t j = 0; j < c; j++) {
        double lo = 0, hi = 0, amax = 0;
        for (int64_t i = 0; i < l; i++) {
            double v = w[j * l + i];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            amax = fabs(v) > amax ? fabs(v) : amax;
        }
        double range = u8 ? rd(hi - lo, f64) : amax;
        s[j] = range > 0 ? (float)rd(range / (u8 ? 255 : 127), f64) : 1;
        zp[j] = u8 ? clampd(rne(rd(-lo / s[j], f64)), 0, 255) : 0;
        for (int64_t i = 0; i < l; i++) {
            double r = rne(rd(w[j * l + i] / s[j], f64));
            q[j * l + i] = u8 ? clampd(r + zp[j], 0, 255) : clampd(r, -127, 127);
        }
    }
}

static void check_quantize(rlx_dtype wdt, bool u8, int64_t c, int64_t l, bool zero_channel)
{
    int64_t ws[2] = {c, l}, cs[1] = {c};
    double *w = malloc((size_t)(c * l + 1) * 8), *q = malloc((size_t)(c * l + 1) * 8);
    double s[64], zp[64];
    for (int64_t i = 0; i < c * l; i++)
        w[i] = test_uniform(-3, 2) * (1 + (double)(i / l)); /* channels of different ranges */
    for (int64_t i = 0; zero_channel && i < l; i++)
        w[i] = 0;
    test_tensor(wdt, 2, ws, w); /* w now holds what wdt stores */
    ref_quantize(w, c, l, u8, wdt == RLX_F64, q, s, zp);
    EACH_BACKEND(be) {
        rlx_tensor *wt = test_tensor(wdt, 2, ws, w);
        rlx_tensor *wq = NULL, *sc = NULL, *z = NULL;
        CHECK(rlx_quantize_per_channel(wt, u8 ? RLX_U8 : RLX_I8, 0, &wq, &sc, &z) == RLX_OK);
        EXPECT(wq, u8 ? RLX_U8 : RLX_I8, 2, ws, q, 0);
        EXPECT(sc, RLX_F32, 1, cs, s, 0);
        if (u8)
            EXPECT(z, RLX_U8, 1, cs, zp, 0);
        else
            CHECK(z == NULL);
        /* the channel axis last: the same numbers, transposed */
        rlx_tensor *wq1 = NULL, *sc1 = NULL, *z1 = NULL;
        CHECK(rlx_quantize_per_channel(rlx_t(wt), u8 ? RLX_U8 : RLX_I8, -1, &wq1, &sc1, u8 ? &z1 : NULL) == RLX_OK);
        EXPECT_SAME(wq1, rlx_t(wq), 0);
        EXPECT_SAME(sc1, sc, 0);
        if (u8)
            EXPECT_SAME(z1, z, 0);
    }
    free(w), free(q);
}

TEST(quantize_per_channel_values)
{
    for (int u8 = 0; u8 < 2; u8++) {
        check_quantize(RLX_F32, u8, 5, 33, true);
        check_quantize(RLX_F64, u8, 3, 17, false);
        check_quantize(RLX_BF16, u8, 4, 9, true);
        check_quantize(RLX_F32, u8, 1, 1, false);
    }
}

/* Ties round to even; u8 codes saturate where both roundings go up. */
TEST(quantize_rounding_and_saturation)
{
    const int64_t s16[2] = {1, 6}, c1[1] = {1};
    /* amax 127: scale 1, so codes are round-half-even of the values */
    const float a[6] = {127, 0.5f, 1.5f, 2.5f, -2.5f, -0.5f};
    const double qa[6] = {127, 0, 2, 2, -2, 0}, one[1] = {1};
    /* range 63.75 = 255 / 4: scale 0.25 exactly; -lo / s = 127.5 -> zero
     * point 128; hi / s = 127.5 -> 128 + 128 = 256, saturated to 255 */
    const float b[6] = {-31.875f, 31.875f, 0, 0.125f, 0.375f, -0.125f};
    const double qb[6] = {0, 255, 128, 128, 130, 128}, sb[1] = {0.25}, zb[1] = {128};
    /* an all-zero channel: scale 1, codes 0 (u8: zero point 0) */
    const float zeros[6] = {0, 0, 0, 0, 0, 0};
    const double q0[6] = {0, 0, 0, 0, 0, 0}, z0[1] = {0};
    EACH_BACKEND(be) {
        rlx_tensor *q = NULL, *s = NULL, *z = NULL;
        CHECK(rlx_quantize_per_channel(tf32(2, s16, a), RLX_I8, 0, &q, &s, NULL) == RLX_OK);
        EXPECT(q, RLX_I8, 2, s16, qa, 0);
        EXPECT(s, RLX_F32, 1, c1, one, 0);
        CHECK(rlx_quantize_per_channel(tf32(2, s16, b), RLX_U8, 0, &q, &s, &z) == RLX_OK);
        EXPECT(q, RLX_U8, 2, s16, qb, 0);
        EXPECT(s, RLX_F32, 1, c1, sb, 0);
        EXPECT(z, RLX_U8, 1, c1, zb, 0);
        for (int u8 = 0; u8 < 2; u8++) {
            CHECK(rlx_quantize_per_channel(tf32(2, s16, zeros), u8 ? RLX_U8 : RLX_I8, 0, &q, &s, &z) == RLX_OK);
            EXPECT(q, u8 ? RLX_U8 : RLX_I8, 2, s16, q0, 0);
            EXPECT(s, RLX_F32, 1, c1, one, 0);
            if (u8)
                EXPECT(z, RLX_U8, 1, c1, z0, 0);
        }
    }
}

/* A trained layer quantized and run: within half a step of each weight
 * (sum |x| * scale / 2 per output) of the float layer. */
TEST(quantized_layer_approximates_the_float_one)
{
    const int64_t ws[2] = {40, 300}, xs[3] = {2, 5, 300}, bs[1] = {40};
    static float wv[12000], xv[3000], bv[40];
    CHECK(rlx_read_f32(trand(RLX_F32, 2, ws, -0.2, 0.2), wv, 12000) == RLX_OK);
    CHECK(rlx_read_f32(trand(RLX_F32, 3, xs, -1, 1), xv, 3000) == RLX_OK);
    CHECK(rlx_read_f32(trand(RLX_F32, 1, bs, -1, 1), bv, 40) == RLX_OK);
    double sumx[10];
    for (int r = 0; r < 10; r++) {
        sumx[r] = 0;
        for (int i = 0; i < 300; i++)
            sumx[r] += fabs(xv[r * 300 + i]);
    }
    double ref[400];
    CHECK(rlx_read_f64(rlx_linear(tf32(3, xs, xv), tf32(2, ws, wv), tf32(1, bs, bv)), ref, 400) == RLX_OK);
    for (int u8 = 0; u8 < 2; u8++)
        EACH_BACKEND(be) {
            rlx_tensor *w = tf32(2, ws, wv), *x = tf32(3, xs, xv), *b = tf32(1, bs, bv);
            rlx_tensor *q = NULL, *s = NULL, *z = NULL;
            CHECK(rlx_quantize_per_channel(w, u8 ? RLX_U8 : RLX_I8, 0, &q, &s, &z) == RLX_OK);
            double got[400], sv[40];
            CHECK(rlx_read_f64(rlx_linear_q8(x, q, s, z, b), got, 400) == RLX_OK);
            CHECK(rlx_read_f64(s, sv, 40) == RLX_OK);
            for (int i = 0; i < 400; i++) {
                double bound = sumx[i / 40] * sv[i % 40] * 0.5 * 1.001 + 1e-5;
                if (!(fabs(got[i] - ref[i]) <= bound)) {
                    test_fail(__FILE__, __LINE__, "u8 %d [%d]: %g vs float %g, bound %g", u8, i, got[i], ref[i],
                              bound);
                    break;
                }
            }
        }
}

/* ---------------------------------------------------------- autodiff */

/* d sum(c * linear_q8(x)) / dx against central differences in f64 (the
 * product is linear in x, so differences are exact up to rounding), and
 * f32's gradient against the f64 one; b gets sum(c); scale gets zeros;
 * wq (an integer) is refused as wrt. */
TEST(linear_q8_gradient)
{
    const int64_t xs[2] = {3, 10}, ws[2] = {4, 10}, cs[1] = {4}, os[2] = {3, 4};
    double xv[30], wv[40], sv[4], zv[4], cv[12];
    for (int i = 0; i < 30; i++)
        xv[i] = test_uniform(-1, 1);
    fill_codes(wv, 40, RLX_U8);
    for (int j = 0; j < 4; j++)
        sv[j] = test_uniform(0.01, 0.02), zv[j] = 120 + j;
    for (int i = 0; i < 12; i++)
        cv[i] = test_uniform(-1, 1);
    rlx_tensor *w = test_tensor(RLX_U8, 2, ws, wv), *s = test_tensor(RLX_F32, 1, cs, sv);
    rlx_tensor *z = test_tensor(RLX_U8, 1, cs, zv), *c = test_tensor(RLX_F64, 2, os, cv);
    rlx_tensor *b = test_tensor(RLX_F64, 1, cs, (double[]){0.5, -0.5, 1, 2});
    EACH_BACKEND(be) {
        rlx_tensor *x = test_tensor(RLX_F64, 2, xs, xv);
        rlx_tensor *loss = rlx_sum_all(rlx_mul(rlx_linear_q8(x, w, s, z, b), c));
        rlx_tensor *g[3] = {NULL, NULL, NULL};
        CHECK(rlx_grad(loss, (rlx_tensor *[]){x, b, s}, 3, g) == RLX_OK);
        double gx[30], fd[30];
        CHECK(rlx_read_f64(g[0], gx, 30) == RLX_OK);
        for (int i = 0; i < 30; i++) {
            double h = 1e-3, xp[30], lp, lm;
            memcpy(xp, xv, sizeof xp);
            xp[i] = xv[i] + h;
            CHECK(rlx_item(rlx_sum_all(rlx_mul(rlx_linear_q8(tf64(2, xs, xp), w, s, z, b), c)), &lp) == RLX_OK);
            xp[i] = xv[i] - h;
            CHECK(rlx_item(rlx_sum_all(rlx_mul(rlx_linear_q8(tf64(2, xs, xp), w, s, z, b), c)), &lm) == RLX_OK);
            fd[i] = (lp - lm) / (2 * h);
        }
        EXPECT(g[0], RLX_F64, 2, xs, fd, 1e-8);
        double gb[4] = {0, 0, 0, 0}, zero4[4] = {0, 0, 0, 0};
        for (int i = 0; i < 12; i++)
            gb[i % 4] += cv[i];
        EXPECT(g[1], RLX_F64, 1, cs, gb, 1e-12);
        EXPECT(g[2], RLX_F32, 1, cs, zero4, 0);
        /* f32 x: the same gradient, rounded */
        rlx_tensor *x32 = test_tensor(RLX_F32, 2, xs, (double[30]){0});
        rlx_tensor *g32 = NULL;
        CHECK(rlx_grad(rlx_sum_all(rlx_mul(rlx_linear_q8(x32, w, s, z, NULL), rlx_cast(c, RLX_F32))), &x32, 1,
                       &g32) == RLX_OK);
        EXPECT(g32, RLX_F32, 2, xs, fd, 1e-5);
        rlx_tensor *gw = NULL;
        CHECK_ERR(rlx_grad(loss, &w, 1, &gw), RLX_E_DTYPE, "rlx_grad");
        CHECK(gw == NULL);
    }
}

/* ------------------------------------------------------------ errors */

/* The call gave NULL (or status st) with st recorded and a message that
 * names fn and each of the words (NULL ends the list). */
static void expect_msg(int line, bool failed, rlx_status st, const char *fn, const char *w1, const char *w2)
{
    const char *msg = rlx_last_error();
    if (!failed || rlx_last_status() != st || !strstr(msg, fn) || (w1 && !strstr(msg, w1)) || (w2 && !strstr(msg, w2)))
        test_fail(__FILE__, line, "want status %d naming %s, %s, %s; got status %d: %s", (int)st, fn, w1 ? w1 : "",
                  w2 ? w2 : "", (int)rlx_last_status(), msg);
    rlx_clear_error();
}
#define MSG(call, st, fn, w1, w2) (rlx_clear_error(), expect_msg(__LINE__, (call) == NULL, (st), (fn), (w1), (w2)))
#define MSG_ST(call, st, fn, w1, w2) (rlx_clear_error(), expect_msg(__LINE__, (call) == (st), (st), (fn), (w1), (w2)))

TEST(linear_q8_errors)
{
    const int64_t s23[2] = {2, 3}, s33[2] = {3, 3}, s3[1] = {3}, s2[1] = {2}, s4[1] = {4}, s234[3] = {2, 3, 4};
    rlx_tensor *x = trand(RLX_F32, 2, s23, -1, 1), *w8 = rlx_zeros(RLX_I8, 2, s33);
    rlx_tensor *s = rlx_ones(RLX_F32, 1, s3);
    const char *fn = "rlx_linear_q8";
    CHECK_NULL_ERR(rlx_linear_q8(NULL, w8, s, NULL, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_linear_q8(x, NULL, s, NULL, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_linear_q8(x, w8, NULL, NULL, NULL), RLX_E_ARG, fn);
    /* dtypes */
    MSG(rlx_linear_q8(x, rlx_zeros(RLX_I32, 2, s33), s, NULL, NULL), RLX_E_DTYPE, fn, "wq", "i32");
    CHECK_NULL_ERR(rlx_linear_q8(x, rlx_zeros(RLX_F32, 2, s33), s, NULL, NULL), RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_linear_q8(rlx_zeros(RLX_I32, 2, s23), w8, s, NULL, NULL), RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_linear_q8(x, w8, rlx_ones(RLX_I32, 1, s3), NULL, NULL), RLX_E_DTYPE, fn);
    MSG(rlx_linear_q8(x, w8, s, rlx_zeros(RLX_U8, 1, s3), NULL), RLX_E_DTYPE, fn, "zero_point", "u8");
    CHECK_NULL_ERR(rlx_linear_q8(x, w8, s, rlx_zeros(RLX_F32, 1, s3), NULL), RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_linear_q8(x, w8, s, NULL, rlx_zeros(RLX_I64, 1, s3)), RLX_E_DTYPE, fn);
    /* shapes: K mismatch, wq rank, per-channel lengths */
    MSG(rlx_linear_q8(trand(RLX_F32, 2, (int64_t[]){2, 4}, 0, 1), w8, s, NULL, NULL), RLX_E_SHAPE, fn, "[2,4]", "[3,3]");
    CHECK_NULL_ERR(rlx_linear_q8(rlx_scalar(RLX_F32, 1), w8, s, NULL, NULL), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_linear_q8(x, rlx_zeros(RLX_I8, 3, s234), s, NULL, NULL), RLX_E_SHAPE, fn);
    MSG(rlx_linear_q8(x, w8, rlx_ones(RLX_F32, 1, s4), NULL, NULL), RLX_E_SHAPE, fn, "scale", "[4]");
    CHECK_NULL_ERR(rlx_linear_q8(x, w8, rlx_ones(RLX_F32, 2, s23), NULL, NULL), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_linear_q8(x, w8, s, rlx_zeros(RLX_I8, 1, s2), NULL), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_linear_q8(x, w8, s, NULL, rlx_zeros(RLX_F32, 1, s2)), RLX_E_SHAPE, fn);
    rlx_clear_error();
}

TEST(quantize_per_channel_errors)
{
    const int64_t s23[2] = {2, 3};
    const char *fn = "rlx_quantize_per_channel";
    rlx_tensor *w = trand(RLX_F32, 2, s23, -1, 1), *q = NULL, *s = NULL, *z = NULL;
    CHECK_ERR(rlx_quantize_per_channel(NULL, RLX_I8, 0, &q, &s, &z), RLX_E_ARG, fn);
    CHECK_ERR(rlx_quantize_per_channel(w, RLX_I8, 0, NULL, &s, &z), RLX_E_ARG, fn);
    CHECK_ERR(rlx_quantize_per_channel(w, RLX_U8, 0, &q, &s, NULL), RLX_E_ARG, fn);
    CHECK(q == NULL && s == NULL);
    MSG_ST(rlx_quantize_per_channel(w, RLX_I32, 0, &q, &s, &z), RLX_E_DTYPE, fn, "dtype", "i32");
    MSG_ST(rlx_quantize_per_channel(rlx_zeros(RLX_I64, 2, s23), RLX_I8, 0, &q, &s, &z), RLX_E_DTYPE, fn, "w", "i64");
    CHECK_ERR(rlx_quantize_per_channel(w, RLX_I8, 2, &q, &s, &z), RLX_E_ARG, fn);
    CHECK_ERR(rlx_quantize_per_channel(rlx_scalar(RLX_F32, 1), RLX_I8, 0, &q, &s, &z), RLX_E_SHAPE, fn);
    CHECK(q == NULL && s == NULL && z == NULL);
    rlx_clear_error();
}

/* Every allocation of quantizing a layer and running it fails in turn:
 * RLX_E_NOMEM (or success), no node left alive. */
static int q8_workload(void)
{
    rlx_scope_begin();
    const int64_t ws[2] = {5, 40}, xs[2] = {3, 40};
    rlx_tensor *w = rlx_full(RLX_F32, 2, ws, 0.25), *x = rlx_full(RLX_F32, 2, xs, 1), *q = NULL, *s = NULL, *z = NULL;
    int ok = rlx_quantize_per_channel(w, RLX_U8, 0, &q, &s, &z) == RLX_OK;
    rlx_tensor *y = ok ? rlx_linear_q8(x, q, s, z, NULL) : NULL;
    ok = y && rlx_realize(y) == RLX_OK;
    rlx_scope_end();
    return ok;
}

TEST(allocation_failures) { ALLOC_WALK(q8_workload, 20); }

TEST_MAIN(T(linear_q8_values), T(linear_q8_every_activation_dtype_on_both_paths), T(linear_q8_strided_x),
          T(linear_q8_batched_x_and_strided_weights), T(linear_q8_exact_small), T(linear_q8_same_bits_on_any_thread_count),
          T(linear_q8_in_a_program_with_a_dynamic_batch), T(quantize_per_channel_values),
          T(quantize_rounding_and_saturation), T(quantized_layer_approximates_the_float_one), T(linear_q8_gradient),
          T(linear_q8_errors), T(quantize_per_channel_errors), T(allocation_failures))
