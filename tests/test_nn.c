/*
 * test_nn.c — softmax/log_softmax, layer and RMS norm, the cross
 * entropies, attention (every mask kind, fully masked rows, and the fused
 * kernel against the composite it replaced), rope, conv1d/conv2d, the
 * transposed convolutions and the pools, each against its formula written as plain double loops
 * here, plus the argument checks of every function.
 */
#include "harness.h"

/* ------------------------------------------------------------ helpers */

static double *rnd(int64_t n, double lo, double hi)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = test_uniform(lo, hi);
    return v;
}

static rlx_tensor *mk(rlx_dtype dt, int rank, const int64_t *shape, const double *v)
{
    return rlx_cast(tf64(rank, shape, v), dt);
}

/* Softmax of each row of x [rows, n] in double, shifted by the row max. */
static void ref_softmax(const double *x, int64_t rows, int64_t n, double *out, bool logp)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *row = x + r * n;
        double m = -INFINITY, s = 0;
        for (int64_t i = 0; i < n; i++)
            m = fmax(m, row[i]);
        for (int64_t i = 0; i < n; i++)
            s += exp(row[i] - m);
        for (int64_t i = 0; i < n; i++)
            out[r * n + i] = logp ? row[i] - m - log(s) : exp(row[i] - m) / s;
    }
}

/* ----------------------------------------------------------- softmax */

TEST(softmax_values)
{
    int64_t s3[1] = {3};
    double x[3] = {1, 2, 3}, want[3];
    ref_softmax(x, 1, 3, want, false);
    CHECK_NEAR(want[0], 0.09003057317038046, 1e-15); /* the reference itself is right */
    EXPECT(rlx_softmax(tf64(1, s3, x), 0), RLX_F64, 1, s3, want, 1e-14);
    ref_softmax(x, 1, 3, want, true);
    EXPECT(rlx_log_softmax(tf64(1, s3, x), -1), RLX_F64, 1, s3, want, 1e-14);
    /* Integers compute in f32. */
    int32_t xi[3] = {1, 2, 3};
    ref_softmax(x, 1, 3, want, false);
    EXPECT(rlx_softmax(ti32(1, s3, xi), 0), RLX_F32, 1, s3, want, 1e-6);
    /* Large inputs do not overflow; -inf entries get probability 0. */
    double big[3] = {1000, 1001, 1002};
    ref_softmax(big, 1, 3, want, false);
    EXPECT(rlx_softmax(tf32(1, s3, (float[]){1000, 1001, 1002}), 0), RLX_F32, 1, s3, want, 1e-6);
    ref_softmax(big, 1, 3, want, true);
    EXPECT(rlx_log_softmax(tf64(1, s3, big), 0), RLX_F64, 1, s3, want, 1e-12);
    double neg[3] = {-1000, -1001, -1002};
    ref_softmax(neg, 1, 3, want, false);
    EXPECT(rlx_softmax(tf64(1, s3, neg), 0), RLX_F64, 1, s3, want, 1e-12);
    double ninf[3] = {-INFINITY, 0, 0}, half[3] = {0, 0.5, 0.5}, lhalf[3] = {-INFINITY, -log(2), -log(2)};
    EXPECT(rlx_softmax(tf64(1, s3, ninf), 0), RLX_F64, 1, s3, half, 1e-15);
    EXPECT(rlx_log_softmax(tf64(1, s3, ninf), 0), RLX_F64, 1, s3, lhalf, 1e-15);
}

TEST(softmax_rows_sum_to_one)
{
    int64_t s[3] = {3, 4, 7};
    double *x = rnd(84, -5, 5), want[84], xt[84];
    rlx_tensor *t = mk(RLX_F32, 3, s, x);
    /* Last axis against the reference. */
    ref_softmax(x, 12, 7, want, false);
    EXPECT(rlx_softmax(t, -1), RLX_F32, 3, s, want, 1e-6);
    ref_softmax(x, 12, 7, want, true);
    EXPECT(rlx_log_softmax(t, 2), RLX_F32, 3, s, want, 1e-5);
    /* Middle axis: the reference on the transposed data, moved back. */
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 7; c++)
                xt[(a * 7 + c) * 4 + b] = x[(a * 4 + b) * 7 + c];
    double wt[84];
    ref_softmax(xt, 21, 4, wt, false);
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 7; c++)
                want[(a * 4 + b) * 7 + c] = wt[(a * 7 + c) * 4 + b];
    rlx_tensor *p = rlx_softmax(t, 1);
    EXPECT(p, RLX_F32, 3, s, want, 1e-6);
    int ax = 1;
    int64_t s37[2] = {3, 7};
    double ones[21];
    for (int i = 0; i < 21; i++)
        ones[i] = 1;
    EXPECT(rlx_sum(p, &ax, 1, false), RLX_F32, 2, s37, ones, 1e-6);
    free(x);
}

/* ------------------------------------------------------------- norms */

TEST(layer_norm_and_rms_norm)
{
    int64_t rows = 6, d = 5;
    int64_t s[2] = {rows, d}, sd[1] = {d};
    double *x = rnd(rows * d, -3, 3), *g = rnd(d, 0.5, 2), *b = rnd(d, -1, 1);
    double ln[30], lng[30], lngb[30], rms[30], rmsg[30], eps = 1e-5;
    for (int64_t r = 0; r < rows; r++) {
        double mean = 0, var = 0, sq = 0;
        for (int64_t i = 0; i < d; i++)
            mean += x[r * d + i] / (double)d;
        for (int64_t i = 0; i < d; i++) {
            var += (x[r * d + i] - mean) * (x[r * d + i] - mean) / (double)d;
            sq += x[r * d + i] * x[r * d + i] / (double)d;
        }
        for (int64_t i = 0; i < d; i++) {
            double v = (x[r * d + i] - mean) / sqrt(var + eps);
            ln[r * d + i] = v;
            lng[r * d + i] = v * g[i];
            lngb[r * d + i] = v * g[i] + b[i];
            rms[r * d + i] = x[r * d + i] / sqrt(sq + eps);
            rmsg[r * d + i] = rms[r * d + i] * g[i];
        }
    }
    rlx_tensor *tx = mk(RLX_F64, 2, s, x), *tg = mk(RLX_F64, 1, sd, g), *tb = mk(RLX_F64, 1, sd, b);
    EXPECT(rlx_layer_norm(tx, NULL, NULL, eps), RLX_F64, 2, s, ln, 1e-12);
    EXPECT(rlx_layer_norm(tx, tg, NULL, eps), RLX_F64, 2, s, lng, 1e-12);
    EXPECT(rlx_layer_norm(tx, tg, tb, eps), RLX_F64, 2, s, lngb, 1e-12);
    EXPECT(rlx_layer_norm(mk(RLX_F32, 2, s, x), mk(RLX_F32, 1, sd, g), mk(RLX_F32, 1, sd, b), eps), RLX_F32, 2, s,
           lngb, 1e-5);
    EXPECT(rlx_rms_norm(tx, NULL, eps), RLX_F64, 2, s, rms, 1e-12);
    EXPECT(rlx_rms_norm(tx, tg, eps), RLX_F64, 2, s, rmsg, 1e-12);
    /* eps matters: a constant row normalizes to 0, not NaN. */
    int64_t s4[1] = {4};
    double c[4] = {2, 2, 2, 2}, z[4] = {0}, r1[4];
    for (int i = 0; i < 4; i++)
        r1[i] = 2 / sqrt(4 + 0.5);
    EXPECT(rlx_layer_norm(tf64(1, s4, c), NULL, NULL, 1e-5), RLX_F64, 1, s4, z, 0);
    EXPECT(rlx_rms_norm(tf64(1, s4, c), NULL, 0.5), RLX_F64, 1, s4, r1, 1e-14);
    /* Integers compute in f32. */
    int32_t ci[4] = {1, 2, 3, 4};
    double lni[4] = {-1.3416407864998738, -0.4472135954999579, 0.4472135954999579, 1.3416407864998738};
    EXPECT(rlx_layer_norm(ti32(1, s4, ci), NULL, NULL, 0), RLX_F32, 1, s4, lni, 1e-6);
    free(x);
    free(g);
    free(b);
}

/* ---------------------------------------------------- cross entropy */

TEST(cross_entropies)
{
    int64_t n = 4, c = 5;
    int64_t s[2] = {n, c}, sn[1] = {n};
    double *x = rnd(n * c, -3, 3), *p = rnd(n * c, 0, 1), ls[20], want[4];
    for (int64_t r = 0; r < n; r++) { /* rows of probabilities */
        double t = 0;
        for (int64_t i = 0; i < c; i++)
            t += p[r * c + i];
        for (int64_t i = 0; i < c; i++)
            p[r * c + i] /= t;
    }
    ref_softmax(x, n, c, ls, true);
    for (int64_t r = 0; r < n; r++) {
        want[r] = 0;
        for (int64_t i = 0; i < c; i++)
            want[r] -= p[r * c + i] * ls[r * c + i];
    }
    rlx_tensor *tx = mk(RLX_F64, 2, s, x);
    EXPECT(rlx_cross_entropy(tx, mk(RLX_F64, 2, s, p)), RLX_F64, 1, sn, want, 1e-12);
    EXPECT(rlx_cross_entropy(mk(RLX_F32, 2, s, x), mk(RLX_F32, 2, s, p)), RLX_F32, 1, sn, want, 1e-5);
    /* A zero probability on a -inf logit contributes 0, not NaN. */
    int64_t s2[1] = {2};
    double lx[2] = {-INFINITY, 0}, lp[2] = {0, 1}, zero[1] = {0};
    EXPECT(rlx_cross_entropy(tf64(1, s2, lx), tf64(1, s2, lp)), RLX_F64, 0, NULL, zero, 0);

    /* Labels: integer and float-coded (truncated). */
    int32_t lab[4] = {0, 4, 2, 1};
    double flab[4] = {0.2, 4.9, 2.5, 1.0};
    for (int64_t r = 0; r < n; r++)
        want[r] = -ls[r * c + lab[r]];
    EXPECT(rlx_softmax_cross_entropy_with_logits(tx, ti32(1, sn, lab)), RLX_F64, 1, sn, want, 1e-12);
    EXPECT(rlx_softmax_cross_entropy_with_logits(tx, mk(RLX_I64, 1, sn, (double[]){0, 4, 2, 1})), RLX_F64, 1, sn,
           want, 1e-12);
    EXPECT(rlx_softmax_cross_entropy_with_logits(tx, tf64(1, sn, flab)), RLX_F64, 1, sn, want, 1e-12);
    EXPECT(rlx_softmax_cross_entropy_with_logits(mk(RLX_F32, 2, s, x), mk(RLX_F32, 1, sn, flab)), RLX_F32, 1, sn,
           want, 1e-5);
    /* Out-of-range labels fail at realization, never reading another row. */
    int32_t bad_hi[4] = {0, 5, 0, 0}, bad_neg[4] = {0, 0, -1, 0};
    double bad_nan[4] = {0, 0, 0, NAN};
    rlx_tensor *bads[3] = {ti32(1, sn, bad_hi), ti32(1, sn, bad_neg), tf64(1, sn, bad_nan)};
    for (int i = 0; i < 3; i++) {
        rlx_tensor *l = rlx_softmax_cross_entropy_with_logits(tx, bads[i]);
        CHECK(l != NULL);
        rlx_clear_error();
        CHECK_EQ_INT(rlx_realize(l), RLX_E_ARG);
        CHECK(strstr(rlx_last_error(), "out of range") != NULL);
        rlx_clear_error();
    }
    free(x);
    free(p);
}

/* --------------------------------------------------------- attention */

/* Attention in double: q [B, Sq, H*D], k/v [B, Sk, H*D]; visible(b, i, j)
 * from the mask kind (or the key mask when km is set). */
static void ref_attention(const double *q, const double *k, const double *v, int64_t B, int64_t sq, int64_t sk,
                          int h, int d, rlx_mask mask, int window, const double *km, double *out)
{
    int64_t hd = (int64_t)h * d;
    double *sc = malloc((size_t)(sk ? sk : 1) * sizeof *sc);
    for (int64_t b = 0; b < B; b++)
        for (int hh = 0; hh < h; hh++)
            for (int64_t i = 0; i < sq; i++) {
                int64_t pos = sk - sq + i;
                double m = -INFINITY, den = 0;
                for (int64_t j = 0; j < sk; j++) {
                    bool vis = km ? km[b * sk + j] != 0
                               : mask == RLX_MASK_NONE ? true
                               : mask == RLX_MASK_CAUSAL ? j <= pos
                                                         : j <= pos && j > pos - window;
                    double s = 0;
                    for (int e = 0; e < d; e++)
                        s += q[(b * sq + i) * hd + hh * d + e] * k[(b * sk + j) * hd + hh * d + e];
                    sc[j] = vis ? s / sqrt((double)d) : -INFINITY;
                    m = fmax(m, sc[j]);
                }
                for (int64_t j = 0; j < sk; j++) {
                    sc[j] = sc[j] == -INFINITY ? 0 : exp(sc[j] - m);
                    den += sc[j];
                }
                for (int e = 0; e < d; e++) {
                    double o = 0;
                    for (int64_t j = 0; j < sk; j++)
                        o += den > 0 ? sc[j] / den * v[(b * sk + j) * hd + hh * d + e] : 0;
                    out[(b * sq + i) * hd + hh * d + e] = o;
                }
            }
    free(sc);
}

static void check_attention(int64_t B, int64_t sq, int64_t sk, int h, int d, rlx_mask mask, int window,
                            rlx_dtype dt)
{
    int64_t hd = (int64_t)h * d;
    int64_t s_q[3] = {B, sq, hd}, s_k[3] = {B, sk, hd};
    double *q = rnd(B * sq * hd, -2, 2), *k = rnd(B * sk * hd, -2, 2), *v = rnd(B * sk * hd, -2, 2);
    double *want = malloc((size_t)(B * sq * hd + 1) * sizeof *want);
    ref_attention(q, k, v, B, sq, sk, h, d, mask, window, NULL, want);
    rlx_tensor *o = rlx_attention(mk(dt, 3, s_q, q), mk(dt, 3, s_k, k), mk(dt, 3, s_k, v), h, d, mask, window);
    EXPECT(o, dt, 3, s_q, want, dt == RLX_F32 ? 1e-5 : 1e-12);
    free(q);
    free(k);
    free(v);
    free(want);
}

TEST(attention_every_mask)
{
    check_attention(2, 5, 5, 2, 3, RLX_MASK_NONE, 0, RLX_F64);
    check_attention(2, 3, 6, 3, 4, RLX_MASK_NONE, 0, RLX_F32);
    check_attention(2, 5, 5, 2, 3, RLX_MASK_CAUSAL, 0, RLX_F64);
    check_attention(1, 3, 7, 2, 2, RLX_MASK_CAUSAL, 0, RLX_F64); /* queries at the end of the keys */
    check_attention(2, 6, 6, 2, 3, RLX_MASK_SLIDING, 2, RLX_F64);
    check_attention(2, 4, 7, 1, 4, RLX_MASK_SLIDING, 3, RLX_F32);
    check_attention(1, 4, 4, 2, 2, RLX_MASK_SLIDING, 1, RLX_F64); /* sees itself only */
    check_attention(1, 1, 1, 1, 1, RLX_MASK_NONE, 0, RLX_F64);
}

/* The window convention of rlx.h, by hand: with q = 0 every visible key
 * weighs the same, so each output is the mean of the visible keys' v
 * (v_j = 10^j). window 2 sees the query's own key and the one before. */
TEST(attention_sliding_window_sees_window_keys)
{
    const int64_t s[3] = {1, 4, 1};
    const double vv[4] = {1, 10, 100, 1000};
    rlx_tensor *q = rlx_zeros(RLX_F64, 3, s), *v = mk(RLX_F64, 3, s, vv);
    const double w1[4] = {1, 10, 100, 1000}, w2[4] = {1, 5.5, 55, 550}, w3[4] = {1, 5.5, 37, 370};
    EXPECT(rlx_attention(q, q, v, 1, 1, RLX_MASK_SLIDING, 1), RLX_F64, 3, s, w1, 1e-15);
    EXPECT(rlx_attention(q, q, v, 1, 1, RLX_MASK_SLIDING, 2), RLX_F64, 3, s, w2, 1e-15);
    EXPECT(rlx_attention(q, q, v, 1, 1, RLX_MASK_SLIDING, 3), RLX_F64, 3, s, w3, 1e-15);
}

TEST(attention_fully_masked_rows_are_zero)
{
    /* Sq > Sk: the first Sq - Sk queries sit before every key. */
    check_attention(1, 5, 3, 2, 2, RLX_MASK_CAUSAL, 0, RLX_F64);
    check_attention(2, 6, 2, 1, 3, RLX_MASK_SLIDING, 2, RLX_F32);
    int64_t s_q[3] = {1, 4, 2}, s_k[3] = {1, 2, 2};
    double *q = rnd(8, -1, 1), *k = rnd(4, -1, 1), *v = rnd(4, -1, 1), got[8];
    rlx_tensor *o = rlx_attention(mk(RLX_F64, 3, s_q, q), mk(RLX_F64, 3, s_k, k), mk(RLX_F64, 3, s_k, v), 1, 2,
                                  RLX_MASK_CAUSAL, 0);
    CHECK_EQ_INT(rlx_read_f64(o, got, 8), RLX_OK);
    for (int i = 0; i < 4; i++) /* queries 0 and 1 see nothing */
        CHECK(got[i] == 0);
    CHECK(got[4] != 0 || got[5] != 0);
    /* Empty keys: every row is zero. */
    int64_t s_e[3] = {1, 0, 2};
    double z8[8] = {0};
    EXPECT(rlx_attention(mk(RLX_F64, 3, s_q, q), rlx_zeros(RLX_F64, 3, s_e), rlx_zeros(RLX_F64, 3, s_e), 1, 2,
                         RLX_MASK_NONE, 0),
           RLX_F64, 3, s_q, z8, 0);
    free(q);
    free(k);
    free(v);
}

TEST(attention_masked_values)
{
    int64_t B = 3, sq = 4, sk = 5;
    int h = 2, d = 3, hd = 6;
    int64_t s_q[3] = {B, sq, hd}, s_k[3] = {B, sk, hd}, s_m[2] = {B, sk};
    double *q = rnd(B * sq * hd, -2, 2), *k = rnd(B * sk * hd, -2, 2), *v = rnd(B * sk * hd, -2, 2);
    /* Batch 1 keeps nothing: its rows must be zeros. */
    double km[15] = {1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0.5, 1, 0, 0, 1}, want[72];
    ref_attention(q, k, v, B, sq, sk, h, d, RLX_MASK_NONE, 0, km, want);
    for (int i = 0; i < sq * hd; i++)
        CHECK(want[sq * hd + i] == 0);
    rlx_tensor *tq = mk(RLX_F64, 3, s_q, q), *tk = mk(RLX_F64, 3, s_k, k), *tv = mk(RLX_F64, 3, s_k, v);
    EXPECT(rlx_attention_masked(tq, tk, tv, tf64(2, s_m, km), h, d), RLX_F64, 3, s_q, want, 1e-12);
    unsigned char kb[15];
    for (int i = 0; i < 15; i++)
        kb[i] = km[i] != 0;
    EXPECT(rlx_attention_masked(tq, tk, tv, tbool(2, s_m, kb), h, d), RLX_F64, 3, s_q, want, 1e-12);
    /* An all-ones mask equals unmasked attention. */
    EXPECT_SAME(rlx_attention_masked(tq, tk, tv, rlx_ones(RLX_I32, 2, s_m), h, d),
                rlx_attention(tq, tk, tv, h, d, RLX_MASK_NONE, 0), 1e-14);
    free(q);
    free(k);
    free(v);
}

/* The composite rlx_attention was before it became one fused primitive,
 * rebuilt here from public calls: the fused kernel must give its values on
 * every case. km (nonzero keeps, [B, Sk]) may be NULL. */
static rlx_tensor *heads_of(rlx_tensor *x, int h, int d)
{
    int64_t shape[4] = {rlx_dim(x, 0), rlx_dim(x, 1), h, d};
    static const int perm[4] = {0, 2, 1, 3};
    return rlx_transpose(rlx_reshape(x, 4, shape), 4, perm);
}

static rlx_tensor *composite_attention(rlx_tensor *q, rlx_tensor *k, rlx_tensor *v, int h, int d, rlx_mask mask,
                                       int window, rlx_tensor *km)
{
    rlx_dtype dt = rlx_dtype_of(q);
    double sq = (double)rlx_dim(q, 1), sk = (double)rlx_dim(k, 1);
    rlx_tensor *qh = heads_of(q, h, d), *kh = heads_of(k, h, d), *vh = heads_of(v, h, d);
    rlx_tensor *s = rlx_mul_s(rlx_matmul_t(qh, kh), 1.0 / sqrt((double)d)), *keep = NULL;
    if (mask != RLX_MASK_NONE) {
        rlx_tensor *qpos = rlx_unsqueeze(rlx_arange(RLX_I64, sk - sq, sk, 1), 1);
        rlx_tensor *kpos = rlx_arange(RLX_I64, 0, sk, 1);
        keep = rlx_le(kpos, qpos);
        if (mask == RLX_MASK_SLIDING)
            keep = rlx_logical_and(keep, rlx_gt(kpos, rlx_sub_s(qpos, window)));
    }
    if (km) {
        int64_t ms[4] = {rlx_dim(km, 0), 1, 1, rlx_dim(km, 1)};
        keep = rlx_reshape(rlx_ne_s(km, 0), 4, ms);
    }
    int ax = -1;
    rlx_tensor *zero = rlx_zeros(dt, 0, NULL);
    rlx_tensor *sm = keep ? rlx_where(keep, s, rlx_full(dt, 0, NULL, -INFINITY)) : s;
    rlx_tensor *m = rlx_max(sm, &ax, 1, true);
    rlx_tensor *e = rlx_exp(rlx_sub(s, rlx_where(rlx_gt_s(m, -INFINITY), m, zero)));
    if (keep)
        e = rlx_where(keep, e, zero);
    rlx_tensor *den = rlx_sum(e, &ax, 1, true);
    rlx_tensor *p = rlx_div(e, rlx_where(rlx_eq_s(den, 0), rlx_ones(dt, 0, NULL), den));
    static const int perm[4] = {0, 2, 1, 3};
    int64_t shape[3] = {rlx_dim(q, 0), rlx_dim(q, 1), (int64_t)h * d};
    return rlx_reshape(rlx_transpose(rlx_matmul(p, vh), 4, perm), 3, shape);
}

/* A [B, S, HD] operand in one of four layouts: 0 contiguous, 1 a transpose
 * (last stride S: the kernel copies it), 2 a narrowed view (rows HD+3
 * apart, read in place), 3 one batch broadcast (batch stride 0). */
static rlx_tensor *operand_in(rlx_dtype dt, int64_t B, int64_t S, int64_t hd, int layout)
{
    switch (layout) {
    case 1: {
        static const int perm[3] = {0, 2, 1};
        return rlx_transpose(trand(dt, 3, (int64_t[]){B, hd, S}, -2, 2), 3, perm);
    }
    case 2: return rlx_narrow(trand(dt, 3, (int64_t[]){B, S, hd + 3}, -2, 2), 2, 1, hd);
    case 3: return rlx_broadcast_to(trand(dt, 3, (int64_t[]){1, S, hd}, -2, 2), 3, (int64_t[]){B, S, hd});
    default: return trand(dt, 3, (int64_t[]){B, S, hd}, -2, 2);
    }
}

static void check_vs_composite(int64_t B, int64_t sq, int64_t sk, int h, int d, rlx_mask mask, int window)
{
    static const rlx_dtype dts[2] = {RLX_F64, RLX_F32};
    for (int t = 0; t < 2; t++)
        for (int layout = 0; layout < 4; layout++) {
            rlx_scope_begin();
            int64_t hd = (int64_t)h * d;
            rlx_tensor *q = operand_in(dts[t], B, sq, hd, layout), *k = operand_in(dts[t], B, sk, hd, 3 - layout);
            rlx_tensor *v = operand_in(dts[t], B, sk, hd, (layout + 2) % 4);
            char what[160];
            snprintf(what, sizeof what, "attention B%lld Sq%lld Sk%lld H%d D%d mask %d window %d %s layout %d",
                     (long long)B, (long long)sq, (long long)sk, h, d, (int)mask, window, rlx_dtype_name(dts[t]),
                     layout);
            rlx_tensor *want = composite_attention(q, k, v, h, d, mask, window, NULL);
            int64_t n, shape[3] = {B, sq, hd};
            double *w = test_values(want, &n);
            if (w)
                EXPECT_V(what, rlx_attention(q, k, v, h, d, mask, window), dts[t], 3, shape, w,
                         t ? 2e-5 : 1e-12, t ? 2e-5 : 1e-12);
            free(w);
            rlx_scope_end();
        }
}

TEST(attention_fused_matches_composite)
{
    /* Sizes cross the kernel's blocks: 64 query rows, 64 keys at D = 64
     * (256 at D <= 16); causal and sliding rows skip whole key blocks. */
    check_vs_composite(2, 5, 5, 2, 3, RLX_MASK_NONE, 0);
    check_vs_composite(2, 70, 130, 2, 4, RLX_MASK_NONE, 0);
    check_vs_composite(1, 130, 300, 2, 4, RLX_MASK_CAUSAL, 0);   /* Sq < Sk */
    check_vs_composite(2, 150, 150, 1, 64, RLX_MASK_CAUSAL, 0);
    check_vs_composite(1, 200, 70, 2, 8, RLX_MASK_CAUSAL, 0);    /* the first 130 rows see nothing */
    check_vs_composite(2, 1, 9, 3, 2, RLX_MASK_CAUSAL, 0);       /* one query: the last position */
    check_vs_composite(1, 1, 1, 1, 1, RLX_MASK_CAUSAL, 0);
    check_vs_composite(2, 6, 7, 4, 1, RLX_MASK_SLIDING, 3);      /* head_dim 1 */
    check_vs_composite(1, 100, 100, 2, 32, RLX_MASK_SLIDING, 1); /* each row sees itself */
    check_vs_composite(1, 150, 150, 2, 64, RLX_MASK_SLIDING, 17);
    check_vs_composite(1, 70, 200, 1, 64, RLX_MASK_SLIDING, 100);
    check_vs_composite(2, 10, 6, 2, 3, RLX_MASK_SLIDING, 50);    /* window > Sk: causal */
    check_vs_composite(1, 9, 4, 1, 2, RLX_MASK_SLIDING, 2);      /* Sq > Sk */
    check_vs_composite(1, 3, 2, 1, 70, RLX_MASK_NONE, 0);        /* head_dim > 64: smaller key blocks */
}

TEST(attention_fused_key_masks_match_composite)
{
    int64_t B = 3, sq = 70, sk = 150;
    int h = 2, d = 8;
    int64_t sm[2] = {B, sk};
    double *km = malloc((size_t)(B * sk) * sizeof *km);
    for (int64_t j = 0; j < sk; j++) {
        km[j] = test_uniform(0, 1) < 0.5;      /* scattered */
        km[sk + j] = 0;                        /* batch 1 keeps nothing: zeros */
        km[2 * sk + j] = j >= 140 ? 2.5 : 0;   /* only the last block: the others are skipped */
    }
    static const rlx_dtype dts[2] = {RLX_F64, RLX_F32};
    for (int t = 0; t < 2; t++) {
        rlx_tensor *q = operand_in(dts[t], B, sq, h * d, t), *k = operand_in(dts[t], B, sk, h * d, 2);
        rlx_tensor *v = operand_in(dts[t], B, sk, h * d, 0);
        rlx_tensor *masks[3] = {tf64(2, sm, km), rlx_ne_s(tf64(2, sm, km), 0), rlx_cast(tf64(2, sm, km), RLX_I32)};
        for (int i = 0; i < 3; i++) {
            rlx_tensor *want = composite_attention(q, k, v, h, d, RLX_MASK_NONE, 0, masks[i]);
            EXPECT_SAME(rlx_attention_masked(q, k, v, masks[i], h, d), want, t ? 2e-5 : 1e-12);
        }
        /* batch 1 is exactly zero */
        float got[70 * 16];
        rlx_tensor *o = rlx_attention_masked(q, k, v, masks[0], h, d);
        CHECK_EQ_INT(rlx_read_f32(rlx_select(o, 0, 1), got, sizeof got / sizeof *got), RLX_OK);
        for (int i = 0; i < 70 * 16; i++)
            if (got[i] != 0) {
                test_fail(__FILE__, __LINE__, "fully masked row element %d = %g", i, got[i]);
                break;
            }
    }
    free(km);
}

/* Values are the same bits on one thread, on two, and on the JIT backend
 * (which runs the primitive as a reference kernel). */
TEST(attention_fused_same_bits_any_threads_and_backend)
{
    int64_t B = 2, sq = 200, sk = 200;
    int h = 3, d = 16;
    int64_t s3[3] = {B, sq, h * d};
    double *q = rnd(B * sq * h * d, -2, 2), *k = rnd(B * sk * h * d, -2, 2), *v = rnd(B * sk * h * d, -2, 2);
    for (int t = 0; t < 2; t++) {
        rlx_dtype dt = t ? RLX_F32 : RLX_F64;
        double *first = NULL;
        for (int run = 0; run < 3; run++) {
            rlx_set_num_threads(run == 0 ? 1 : 2);
            CHECK(rlx_set_option("backend", run == 2 ? "jit" : "ref") == RLX_OK);
            /* new leaves each run, so nothing is realized already */
            rlx_tensor *o = rlx_attention(mk(dt, 3, s3, q), mk(dt, 3, s3, k), mk(dt, 3, s3, v), h, d,
                                          RLX_MASK_CAUSAL, 0);
            if (!first) {
                int64_t n;
                first = test_values(o, &n);
            } else if (first) {
                EXPECT_V(run == 1 ? "two threads" : "jit", o, dt, 3, s3, first, 0, 0);
            }
        }
        free(first);
    }
    rlx_set_num_threads(0);
    CHECK(rlx_set_option("backend", "ref") == RLX_OK);
    free(q);
    free(k);
    free(v);
}

/* Building and realizing fused attention (a copied transposed operand, a
 * key mask and a gradient) under every allocation failure in turn, on both
 * backends. */
static int attention_workload(void)
{
    rlx_scope_begin();
    int64_t s3[3] = {2, 5, 4}, st[3] = {2, 4, 5}, sm[2] = {2, 5};
    static const int perm[3] = {0, 2, 1};
    static const unsigned char km[10] = {1, 1, 0, 1, 0, 0, 0, 0, 0, 0};
    double v[40];
    for (int i = 0; i < 40; i++)
        v[i] = sin(i);
    rlx_tensor *q = rlx_from_data(RLX_F64, 3, s3, v), *k = rlx_transpose(rlx_from_data(RLX_F64, 3, st, v), 3, perm);
    rlx_tensor *o = rlx_attention_masked(q, k, q, rlx_from_data(RLX_BOOL, 2, sm, km), 2, 2);
    rlx_tensor *c = rlx_attention(q, k, q, 1, 4, RLX_MASK_SLIDING, 2), *g = NULL;
    rlx_status st_g = c ? rlx_grad(rlx_sum_all(rlx_mul(c, c)), &q, 1, &g) : RLX_E_NOMEM;
    rlx_tensor *outs[3] = {o, c, g};
    int ok = o && c && st_g == RLX_OK && rlx_realize_many(outs, 3) == RLX_OK;
    rlx_scope_end();
    return ok;
}

TEST(attention_fused_allocation_failures)
{
    ALLOC_WALK(attention_workload, 20);
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
    ALLOC_WALK(attention_workload, 20);
    CHECK(rlx_set_option("backend", "ref") == RLX_OK);
}

/* -------------------------------------------------------------- rope */

TEST(rope_values)
{
    int64_t B = 2, S = 3, H = 2, D = 4, half = 2;
    int64_t sx[3] = {B, S, H * D}, sc[2] = {S, half};
    double *x = rnd(B * S * H * D, -1, 1), c[6], s[6], want[48];
    for (int64_t p = 0; p < S; p++)
        for (int64_t i = 0; i < half; i++) {
            double ang = (double)p / pow(10000, 2.0 * (double)i / (double)D);
            c[p * half + i] = cos(ang);
            s[p * half + i] = sin(ang);
        }
    for (int64_t b = 0; b < B; b++)
        for (int64_t p = 0; p < S; p++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < half; i++) {
                    int64_t base = (b * S + p) * H * D + h * D;
                    double x1 = x[base + i], x2 = x[base + half + i];
                    double cc = c[p * half + i], ss = s[p * half + i];
                    want[base + i] = x1 * cc - x2 * ss;
                    want[base + half + i] = x2 * cc + x1 * ss;
                }
    EXPECT(rlx_rope(mk(RLX_F64, 3, sx, x), tf64(2, sc, c), tf64(2, sc, s), (int)D), RLX_F64, 3, sx, want, 1e-14);
    EXPECT(rlx_rope(mk(RLX_F32, 3, sx, x), mk(RLX_F32, 2, sc, c), mk(RLX_F32, 2, sc, s), (int)D), RLX_F32, 3, sx,
           want, 1e-6);
    free(x);
}

/* ------------------------------------------------------- conv & pool */

static void ref_conv(const double *x, const double *w, const double *b, const int64_t *xs, const int64_t *ws,
                     const int *st, const int *pd, const int *dl, int g, int64_t *os, double *out)
{
    int64_t N = xs[0], H = xs[2], W = xs[3], O = ws[0], cg = ws[1], KH = ws[2], KW = ws[3], C = xs[1];
    int64_t OH = (H + 2 * pd[0] - dl[0] * (KH - 1) - 1) / st[0] + 1;
    int64_t OW = (W + 2 * pd[1] - dl[1] * (KW - 1) - 1) / st[1] + 1;
    os[0] = N;
    os[1] = O;
    os[2] = OH;
    os[3] = OW;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    double acc = b ? b[o] : 0;
                    int64_t grp = o / (O / g);
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t u = 0; u < KH; u++)
                            for (int64_t v = 0; v < KW; v++) {
                                int64_t y = i * st[0] - pd[0] + u * dl[0], z = j * st[1] - pd[1] + v * dl[1];
                                if (y >= 0 && y < H && z >= 0 && z < W)
                                    acc += x[((n * C + grp * cg + c) * H + y) * W + z] *
                                           w[((o * cg + c) * KH + u) * KW + v];
                            }
                    out[((n * O + o) * OH + i) * OW + j] = acc;
                }
}

TEST(conv2d_values)
{
    /* Hand value: a 3x3 input, 2x2 kernel of ones, no padding. */
    int64_t sx1[4] = {1, 1, 3, 3}, sw1[4] = {1, 1, 2, 2}, so1[4] = {1, 1, 2, 2};
    double x1[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w1[4] = {1, 1, 1, 1}, o1[4] = {12, 16, 24, 28};
    EXPECT(rlx_conv2d(tf64(4, sx1, x1), tf64(4, sw1, w1), NULL, NULL, NULL, NULL, 1), RLX_F64, 4, so1, o1, 0);
    static const struct {
        int64_t x[4], w[4];
        int st[2], pd[2], dl[2], g;
        bool bias;
    } cases[] = {
        {{2, 3, 7, 6}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, false},
        {{2, 3, 7, 6}, {4, 3, 3, 2}, {2, 1}, {1, 2}, {1, 1}, 1, true},
        {{1, 4, 9, 9}, {6, 2, 3, 3}, {2, 2}, {1, 1}, {2, 2}, 2, true},
        {{1, 4, 5, 5}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4, false}, /* depthwise */
        {{1, 2, 4, 4}, {3, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},  /* 1x1 */
        {{1, 1, 3, 3}, {1, 1, 3, 3}, {3, 3}, {2, 2}, {1, 1}, 1, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int64_t nx = cases[c].x[0] * cases[c].x[1] * cases[c].x[2] * cases[c].x[3];
        int64_t nw = cases[c].w[0] * cases[c].w[1] * cases[c].w[2] * cases[c].w[3];
        double *x = rnd(nx, -1, 1), *w = rnd(nw, -1, 1), *b = rnd(cases[c].w[0], -1, 1);
        double *want = malloc(4096 * sizeof *want);
        int64_t so[4], sb[1] = {cases[c].w[0]};
        ref_conv(x, w, cases[c].bias ? b : NULL, cases[c].x, cases[c].w, cases[c].st, cases[c].pd, cases[c].dl,
                 cases[c].g, so, want);
        rlx_tensor *tb = cases[c].bias ? tf64(1, sb, b) : NULL;
        EXPECT(rlx_conv2d(tf64(4, cases[c].x, x), tf64(4, cases[c].w, w), tb, cases[c].st, cases[c].pd, cases[c].dl,
                          cases[c].g),
               RLX_F64, 4, so, want, 1e-12);
        EXPECT(rlx_conv2d(mk(RLX_F32, 4, cases[c].x, x), mk(RLX_F32, 4, cases[c].w, w),
                          cases[c].bias ? mk(RLX_F32, 1, sb, b) : NULL, cases[c].st, cases[c].pd, cases[c].dl,
                          cases[c].g),
               RLX_F32, 4, so, want, 1e-5);
        free(x);
        free(w);
        free(b);
        free(want);
    }
    /* A non-contiguous input (a transposed view) and integers in f32. */
    int64_t sxt[4] = {1, 1, 3, 3};
    double x1t[9] = {1, 4, 7, 2, 5, 8, 3, 6, 9};
    static const int perm[4] = {0, 1, 3, 2};
    EXPECT(rlx_conv2d(rlx_transpose(tf64(4, sxt, x1t), 4, perm), tf64(4, sw1, w1), NULL, NULL, NULL, NULL, 1),
           RLX_F64, 4, so1, o1, 0);
    int32_t x1i[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w1i[4] = {1, 1, 1, 1};
    EXPECT(rlx_conv2d(ti32(4, sx1, x1i), ti32(4, sw1, w1i), NULL, NULL, NULL, NULL, 1), RLX_F32, 4, so1, o1, 0);
}

static void ref_pool(const double *x, const int64_t *xs, const int *k, const int *st, const int *pd, bool avg,
                     int64_t *os, double *out)
{
    int64_t H = xs[2], W = xs[3];
    int64_t OH = (H + 2 * pd[0] - k[0]) / st[0] + 1, OW = (W + 2 * pd[1] - k[1]) / st[1] + 1;
    os[0] = xs[0];
    os[1] = xs[1];
    os[2] = OH;
    os[3] = OW;
    for (int64_t nc = 0; nc < xs[0] * xs[1]; nc++)
        for (int64_t i = 0; i < OH; i++)
            for (int64_t j = 0; j < OW; j++) {
                double acc = avg ? 0 : -INFINITY;
                bool nan = false;
                for (int u = 0; u < k[0]; u++)
                    for (int v = 0; v < k[1]; v++) {
                        int64_t y = i * st[0] - pd[0] + u, z = j * st[1] - pd[1] + v;
                        double e = y >= 0 && y < H && z >= 0 && z < W ? x[(nc * H + y) * W + z]
                                   : avg                              ? 0
                                                                      : -INFINITY;
                        nan |= isnan(e);
                        acc = avg ? acc + e : fmax(acc, e);
                    }
                out[(nc * OH + i) * OW + j] = nan ? NAN : avg ? acc / (k[0] * k[1]) : acc;
            }
}

TEST(pool_values)
{
    int64_t sx1[4] = {1, 1, 4, 4}, so1[4] = {1, 1, 2, 2};
    double x1[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    double mx[4] = {6, 8, 14, 16}, av[4] = {3.5, 5.5, 11.5, 13.5};
    int k2[2] = {2, 2};
    EXPECT(rlx_max_pool2d(tf64(4, sx1, x1), k2, NULL, NULL), RLX_F64, 4, so1, mx, 0);
    EXPECT(rlx_avg_pool2d(tf64(4, sx1, x1), k2, NULL, NULL), RLX_F64, 4, so1, av, 0);
    static const struct {
        int64_t x[4];
        int k[2], st[2], pd[2];
    } cases[] = {
        {{2, 3, 7, 6}, {3, 3}, {1, 1}, {0, 0}},
        {{2, 3, 7, 6}, {3, 2}, {2, 1}, {1, 1}},
        {{1, 2, 5, 5}, {2, 2}, {2, 2}, {1, 1}},
        {{1, 1, 3, 3}, {3, 3}, {1, 1}, {1, 1}},
        {{1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int64_t nx = cases[c].x[0] * cases[c].x[1] * cases[c].x[2] * cases[c].x[3], so[4];
        double *x = rnd(nx, -5, 5), *want = malloc(2048 * sizeof *want);
        for (int avg = 0; avg < 2; avg++) {
            ref_pool(x, cases[c].x, cases[c].k, cases[c].st, cases[c].pd, avg, so, want);
            rlx_tensor *t = tf64(4, cases[c].x, x);
            EXPECT(avg ? rlx_avg_pool2d(t, cases[c].k, cases[c].st, cases[c].pd)
                       : rlx_max_pool2d(t, cases[c].k, cases[c].st, cases[c].pd),
                   RLX_F64, 4, so, want, 1e-12);
            EXPECT(avg ? rlx_avg_pool2d(rlx_cast(t, RLX_F32), cases[c].k, cases[c].st, cases[c].pd)
                       : rlx_max_pool2d(rlx_cast(t, RLX_F32), cases[c].k, cases[c].st, cases[c].pd),
                   RLX_F32, 4, so, want, 1e-5);
        }
        free(x);
        free(want);
    }
    /* Max padding is -inf (all-negative input keeps its max); NaN wins. */
    double neg[16], nanx[16];
    for (int i = 0; i < 16; i++) {
        neg[i] = -1 - i;
        nanx[i] = x1[i];
    }
    nanx[5] = NAN;
    int p1[2] = {1, 1}, s2[2] = {2, 2};
    int64_t so3[4] = {1, 1, 3, 3};
    double want[9];
    int64_t so[4];
    ref_pool(neg, sx1, k2, s2, p1, false, so, want);
    CHECK(want[0] == -1);
    EXPECT(rlx_max_pool2d(tf64(4, sx1, neg), k2, s2, p1), RLX_F64, 4, so3, want, 0);
    ref_pool(nanx, sx1, k2, s2, p1, false, so, want);
    EXPECT(rlx_max_pool2d(tf64(4, sx1, nanx), k2, s2, p1), RLX_F64, 4, so3, want, 0);
    CHECK(isnan(want[4]));
    /* Avg counts the padding: the corner window holds one element of four. */
    ref_pool(x1, sx1, k2, s2, p1, true, so, want);
    CHECK(want[0] == 0.25);
    EXPECT(rlx_avg_pool2d(tf64(4, sx1, x1), k2, s2, p1), RLX_F64, 4, so3, want, 0);
    /* Integers compute in f32. */
    int32_t xi[16];
    for (int i = 0; i < 16; i++)
        xi[i] = i + 1;
    EXPECT(rlx_max_pool2d(ti32(4, sx1, xi), k2, NULL, NULL), RLX_F32, 4, so1, mx, 0);
}

static int rnd_int(int lo, int hi) { return lo + (int)(test_uniform(0, 1) * (hi - lo + 1)) % (hi - lo + 1); }

/* x [N, C, H, W] as a non-contiguous view holding the same values: a
 * permuted copy transposed back, or a narrowed slice of a wider tensor. */
static rlx_tensor *strided_nchw(rlx_dtype dt, const int64_t *s, const double *x, int how)
{
    int64_t n = s[0] * s[1] * s[2] * s[3];
    double *t = malloc((size_t)(n + s[0] * s[1] * s[2] + 1) * sizeof *t);
    rlx_tensor *r;
    if (how == 0) { /* stored [N, C, W, H], viewed transposed: column stride H */
        for (int64_t a = 0; a < s[0] * s[1]; a++)
            for (int64_t i = 0; i < s[2]; i++)
                for (int64_t j = 0; j < s[3]; j++)
                    t[(a * s[3] + j) * s[2] + i] = x[(a * s[2] + i) * s[3] + j];
        int64_t st[4] = {s[0], s[1], s[3], s[2]};
        static const int perm[4] = {0, 1, 3, 2};
        r = rlx_transpose(mk(dt, 4, st, t), 4, perm);
    } else { /* stored [N, C, H, W + 1], narrowed to columns 1..W */
        for (int64_t a = 0; a < s[0] * s[1] * s[2]; a++) {
            t[a * (s[3] + 1)] = 1e300; /* must never be read */
            for (int64_t j = 0; j < s[3]; j++)
                t[a * (s[3] + 1) + 1 + j] = x[a * s[3] + j];
        }
        int64_t st[4] = {s[0], s[1], s[2], s[3] + 1};
        r = rlx_narrow(mk(dt, 4, st, t), 3, 1, s[3]);
    }
    free(t);
    return r;
}

TEST(conv2d_random_shapes)
{
    /* Random geometry against the double loop: groups, stride, padding,
     * dilation, 1x1 kernels, output channels that do not fill a register
     * tile, planes larger than one packed block, strided views. */
    for (int it = 0; it < 40; it++) {
        int g = rnd_int(1, 3), cg = rnd_int(1, 4), og = it % 5 == 0 ? 9 : rnd_int(1, 5);
        int kh = it % 4 == 0 ? 1 : rnd_int(1, 3), kw = it % 4 == 0 ? 1 : rnd_int(1, 4);
        int st[2] = {rnd_int(1, 2), rnd_int(1, 3)}, dl[2] = {rnd_int(1, 2), rnd_int(1, 2)};
        int pd[2] = {rnd_int(0, 2), rnd_int(0, 2)};
        if (it % 4 == 0 && it % 8 == 0)
            st[0] = st[1] = 1, pd[0] = pd[1] = 0; /* the unpacked 1x1 path */
        int64_t H = rnd_int(dl[0] * (kh - 1) + 1, 12), W = rnd_int(dl[1] * (kw - 1) + 1, 40);
        if (it == 7)
            H = 50, W = 60; /* several pixel blocks and a partial last one */
        int64_t sx[4] = {rnd_int(1, 3), (int64_t)g * cg, H, W}, sw[4] = {(int64_t)g * og, cg, kh, kw};
        int64_t nx = sx[0] * sx[1] * sx[2] * sx[3], nw = sw[0] * sw[1] * sw[2] * sw[3], so[4], sb[1] = {sw[0]};
        double *x = rnd(nx, -1, 1), *w = rnd(nw, -1, 1), *b = rnd(sw[0], -1, 1);
        double *want = malloc((size_t)(sx[0] * sw[0] * (H + 4) * (W + 4)) * sizeof *want);
        bool bias = it % 3 == 0;
        ref_conv(x, w, bias ? b : NULL, sx, sw, st, pd, dl, g, so, want);
        for (int d = 0; d < 2; d++) {
            rlx_dtype dt = d ? RLX_F64 : RLX_F32;
            double tol = d ? 1e-12 : 2e-5;
            int how = it % 3; /* 0, 1: strided views; 2: contiguous */
            rlx_tensor *tx = how < 2 ? strided_nchw(dt, sx, x, how) : mk(dt, 4, sx, x);
            rlx_tensor *tw = mk(dt, 4, sw, w);
            if (it % 5 == 1) { /* weights as a non-contiguous view too */
                int64_t swt[4] = {sw[1], sw[0], sw[2], sw[3]};
                double *wt = malloc((size_t)nw * sizeof *wt);
                for (int64_t o = 0; o < sw[0]; o++)
                    for (int64_t r = 0; r < sw[1] * kh * kw; r++)
                        wt[(r / (kh * kw) * sw[0] + o) * kh * kw + r % (kh * kw)] = w[o * sw[1] * kh * kw + r];
                static const int perm[4] = {1, 0, 2, 3};
                tw = rlx_transpose(mk(dt, 4, swt, wt), 4, perm);
                free(wt);
            }
            char what[160];
            snprintf(what, sizeof what, "conv %s x %s g%d st %d,%d pd %d,%d dl %d,%d view %d %s", test_dims(4, sx),
                     test_dims(4, sw), g, st[0], st[1], pd[0], pd[1], dl[0], dl[1], how, rlx_dtype_name(dt));
            EXPECT_V(what, rlx_conv2d(tx, tw, bias ? mk(dt, 1, sb, b) : NULL, st, pd, dl, g), dt, 4, so, want, tol,
                     tol);
        }
        free(x);
        free(w);
        free(b);
        free(want);
    }
}

/* conv_transpose2d as its definition: every input element scatters
 * x * w into the outputs its taps reach. w is [C_in, C_out/g, KH, KW]. */
static void ref_conv_t(const double *x, const double *w, const double *b, const int64_t *xs, const int64_t *ws,
                       const int *st, const int *pd, const int *op, const int *dl, int g, int64_t *os, double *out)
{
    int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], og = ws[1], KH = ws[2], KW = ws[3], O = og * g;
    int64_t OH = (H - 1) * st[0] - 2 * pd[0] + dl[0] * (KH - 1) + op[0] + 1;
    int64_t OW = (W - 1) * st[1] - 2 * pd[1] + dl[1] * (KW - 1) + op[1] + 1;
    int64_t shape[4] = {N, O, OH, OW};
    memcpy(os, shape, sizeof shape);
    for (int64_t i = 0; i < N * O * OH * OW; i++)
        out[i] = b ? b[i / (OH * OW) % O] : 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < H; i++)
                for (int64_t j = 0; j < W; j++)
                    for (int64_t o = 0; o < og; o++)
                        for (int64_t u = 0; u < KH; u++)
                            for (int64_t v = 0; v < KW; v++) {
                                int64_t y = i * st[0] - pd[0] + u * dl[0], z = j * st[1] - pd[1] + v * dl[1];
                                int64_t oc = c / (C / g) * og + o;
                                if (y >= 0 && y < OH && z >= 0 && z < OW)
                                    out[((n * O + oc) * OH + y) * OW + z] +=
                                        x[((n * C + c) * H + i) * W + j] * w[((c * og + o) * KH + u) * KW + v];
                            }
}

TEST(conv_transpose_values)
{
    /* Hand values: [[1,2],[3,4]] through a 2x2 kernel of ones, stride 1
     * (overlapping sums) and stride 2 (each value fills its own block). */
    int64_t sx[4] = {1, 1, 2, 2}, s3[4] = {1, 1, 3, 3}, s4[4] = {1, 1, 4, 4};
    double x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, o3[9] = {1, 3, 2, 4, 10, 6, 3, 7, 4};
    double o4[16] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    static const int two[2] = {2, 2};
    static const char *backends[2] = {"ref", "jit"};
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        EXPECT(rlx_conv_transpose2d(tf64(4, sx, x), tf64(4, sx, w), NULL, NULL, NULL, NULL, NULL, 1), RLX_F64, 4, s3,
               o3, 0);
        EXPECT(rlx_conv_transpose2d(tf64(4, sx, x), tf64(4, sx, w), NULL, two, NULL, NULL, NULL, 1), RLX_F64, 4, s4,
               o4, 0);
        int32_t xi[4] = {1, 2, 3, 4}, wi[4] = {1, 1, 1, 1}; /* integers compute in f32 */
        EXPECT(rlx_conv_transpose2d(ti32(4, sx, xi), ti32(4, sx, wi), NULL, two, NULL, NULL, NULL, 1), RLX_F32, 4, s4,
               o4, 0);
        /* Random geometry against the scatter loop: groups, stride,
         * padding beyond the kernel (a crop), output padding below the
         * stride or the dilation, strided views. */
        for (int it = 0; it < 30; it++) {
            int g = rnd_int(1, 3), cg = rnd_int(1, 3), og = rnd_int(1, 4), kh = rnd_int(1, 3), kw = rnd_int(1, 4);
            int st[2] = {rnd_int(1, 3), rnd_int(1, 2)}, dl[2] = {rnd_int(1, 2), rnd_int(1, 3)};
            int pd[2] = {rnd_int(0, 3), rnd_int(0, 2)}, op[2] = {0, 0};
            for (int a = 0; a < 2; a++) {
                int lim = st[a] > dl[a] ? st[a] : dl[a];
                op[a] = rnd_int(0, lim - 1);
            }
            int64_t xs[4] = {rnd_int(1, 2), (int64_t)g * cg, rnd_int(1, 6), rnd_int(1, 7)};
            int64_t ws[4] = {xs[1], og, kh, kw}, sb[1] = {(int64_t)g * og}, os[4];
            int64_t oh = (xs[2] - 1) * st[0] - 2 * pd[0] + dl[0] * (kh - 1) + op[0] + 1;
            int64_t ow = (xs[3] - 1) * st[1] - 2 * pd[1] + dl[1] * (kw - 1) + op[1] + 1;
            if (oh < 1 || ow < 1)
                continue;
            int64_t nx = test_numel(4, xs), nw = test_numel(4, ws);
            double *xv = rnd(nx, -1, 1), *wv = rnd(nw, -1, 1), *bv = rnd(sb[0], -1, 1);
            double *want = malloc((size_t)(xs[0] * sb[0] * oh * ow) * sizeof *want);
            bool bias = it % 2 == 0;
            ref_conv_t(xv, wv, bias ? bv : NULL, xs, ws, st, pd, op, dl, g, os, want);
            for (int d = 0; d < 2; d++) {
                rlx_dtype dt = d ? RLX_F64 : RLX_F32;
                double tol = d ? 1e-12 : 2e-5;
                rlx_tensor *tx = it % 3 < 2 ? strided_nchw(dt, xs, xv, it % 3) : mk(dt, 4, xs, xv);
                char what[200];
                snprintf(what, sizeof what, "conv_t %s x %s g%d st %d,%d pd %d,%d op %d,%d dl %d,%d %s %s",
                         test_dims(4, xs), test_dims(4, ws), g, st[0], st[1], pd[0], pd[1], op[0], op[1], dl[0],
                         dl[1], rlx_dtype_name(dt), backends[be]);
                EXPECT_V(what, rlx_conv_transpose2d(tx, mk(dt, 4, ws, wv), bias ? mk(dt, 1, sb, bv) : NULL, st, pd, op,
                                                    dl, g),
                         dt, 4, os, want, tol, tol);
                /* The same geometry on one row, as the 1-D functions. */
                int64_t xs1[4] = {xs[0], xs[1], 1, xs[3]}, ws1[4] = {ws[0], ws[1], 1, ws[3]}, os1[4];
                int st1[2] = {1, st[1]}, pd1[2] = {0, pd[1]}, op1[2] = {0, op[1]}, dl1[2] = {1, dl[1]};
                ref_conv_t(xv, wv, bias ? bv : NULL, xs1, ws1, st1, pd1, op1, dl1, g, os1, want);
                int64_t xs3[3] = {xs[0], xs[1], xs[3]}, ws3[3] = {ws[0], ws[1], ws[3]}, os3[3] = {os1[0], os1[1], os1[3]};
                EXPECT_V(what, rlx_conv_transpose1d(mk(dt, 3, xs3, xv), mk(dt, 3, ws3, wv), bias ? mk(dt, 1, sb, bv) : NULL,
                                                    st[1], pd[1], op[1], dl[1], g),
                         dt, 3, os3, want, tol, tol);
                ref_conv_t(xv, wv, bias ? bv : NULL, xs, ws, st, pd, op, dl, g, os, want);
            }
            free(xv);
            free(wv);
            free(bv);
            free(want);
        }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}

TEST(conv1d_values)
{
    /* Hand value: [1,2,3,4,5] with kernel [1,-1] (differences), padding 1. */
    int64_t sx[3] = {1, 1, 5}, sw[3] = {1, 1, 2}, so[3] = {1, 1, 6};
    double x[5] = {1, 2, 3, 4, 5}, w[2] = {1, -1}, o[6] = {-1, -1, -1, -1, -1, 5};
    static const char *backends[2] = {"ref", "jit"};
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        EXPECT(rlx_conv1d(tf64(3, sx, x), tf64(3, sw, w), NULL, 1, 1, 1, 1), RLX_F64, 3, so, o, 0);
        for (int it = 0; it < 20; it++) {
            int g = rnd_int(1, 3), cg = rnd_int(1, 3), og = rnd_int(1, 4), k = rnd_int(1, 4);
            int st[2] = {1, rnd_int(1, 3)}, pd[2] = {0, rnd_int(0, 2)}, dl[2] = {1, rnd_int(1, 2)};
            int64_t L = rnd_int(dl[1] * (k - 1) + 1, 20);
            int64_t xs[4] = {rnd_int(1, 3), (int64_t)g * cg, 1, L}, ws[4] = {(int64_t)g * og, cg, 1, k}, os[4];
            int64_t sb[1] = {ws[0]}, nx = test_numel(4, xs), nw = test_numel(4, ws);
            double *xv = rnd(nx, -1, 1), *wv = rnd(nw, -1, 1), *bv = rnd(sb[0], -1, 1);
            double *want = malloc((size_t)(xs[0] * ws[0] * (L + 4)) * sizeof *want);
            ref_conv(xv, wv, it % 2 ? bv : NULL, xs, ws, st, pd, dl, g, os, want);
            int64_t xs3[3] = {xs[0], xs[1], L}, ws3[3] = {ws[0], cg, k}, os3[3] = {os[0], os[1], os[3]};
            for (int d = 0; d < 2; d++) {
                rlx_dtype dt = d ? RLX_F64 : RLX_F32;
                double tol = d ? 1e-12 : 2e-5;
                rlx_tensor *tx = mk(dt, 3, xs3, xv);
                if (it % 3 == 0) { /* a non-contiguous view: every other element of a longer row */
                    int64_t xl[3] = {xs3[0], xs3[1], 2 * L};
                    double *wide = calloc((size_t)(2 * nx), sizeof *wide);
                    for (int64_t i = 0; i < nx; i++)
                        wide[2 * i] = xv[i];
                    tx = rlx_slice(mk(dt, 3, xl, wide), 2, 0, RLX_END, 2);
                    free(wide);
                }
                char what[160];
                snprintf(what, sizeof what, "conv1d %s x %s g%d st %d pd %d dl %d %s %s", test_dims(3, xs3),
                         test_dims(3, ws3), g, st[1], pd[1], dl[1], rlx_dtype_name(dt), backends[be]);
                EXPECT_V(what, rlx_conv1d(tx, mk(dt, 3, ws3, wv), it % 2 ? mk(dt, 1, sb, bv) : NULL, st[1], pd[1], dl[1],
                                          g),
                         dt, 3, os3, want, tol, tol);
            }
            free(xv);
            free(wv);
            free(bv);
            free(want);
        }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}

/* Realizes y() with 1 and with 2 threads: the values must be bitwise equal. */
static void same_bits_any_threads(const char *what, rlx_tensor *(*y)(void))
{
    double *v[2] = {NULL, NULL};
    int64_t n[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        rlx_set_num_threads(t + 1);
        v[t] = test_values(y(), &n[t]);
    }
    rlx_set_num_threads(0);
    CHECK(v[0] && v[1] && n[0] == n[1]);
    if (v[0] && v[1] && n[0] == n[1] && memcmp(v[0], v[1], (size_t)n[0] * sizeof *v[0]) != 0)
        test_fail(__FILE__, __LINE__, "%s differs between 1 and 2 threads", what);
    free(v[0]);
    free(v[1]);
}

static rlx_tensor *big_conv(void)
{
    int64_t sx[4] = {4, 16, 30, 30}, sw[4] = {12, 16, 3, 3};
    int p1[2] = {1, 1};
    /* seeded RAND leaves: the same values on every call, computed anew */
    return rlx_conv2d(rlx_rand(RLX_F32, 4, sx, 11), rlx_rand(RLX_F32, 4, sw, 12), NULL, NULL, p1, NULL, 1);
}

static rlx_tensor *big_pool(void)
{
    int64_t sx[4] = {4, 16, 30, 30};
    int k3[2] = {3, 3}, s2[2] = {2, 2}, p1[2] = {1, 1};
    return rlx_avg_pool2d(rlx_rand(RLX_F32, 4, sx, 13), k3, s2, p1);
}

/* A conv2d with transposed (packed) weights and both pools, in a scope of
 * their own; true when every step worked and the values are right. */
static int conv_pool_workload(void)
{
    rlx_scope_begin();
    int64_t sx[4] = {1, 2, 5, 5}, sw[4] = {2, 3, 3, 3}; /* w stored [C, O, KH, KW] */
    double x[50], w[54];
    for (int i = 0; i < 50; i++)
        x[i] = 1;
    for (int i = 0; i < 54; i++)
        w[i] = 1;
    static const int perm[4] = {1, 0, 2, 3};
    int p1[2] = {1, 1}, k2[2] = {2, 2};
    rlx_tensor *tx = rlx_from_data(RLX_F64, 4, sx, x);
    rlx_tensor *c = rlx_conv2d(tx, rlx_transpose(rlx_from_data(RLX_F64, 4, sw, w), 4, perm), NULL, NULL, p1, NULL, 1);
    rlx_tensor *m = rlx_max_pool2d(c, k2, NULL, NULL), *a = rlx_avg_pool2d(tx, k2, NULL, NULL);
    double vc[75] = {0}, vm[12] = {0}, va[8] = {0};
    /* centre pixel: 2 channels x 9 taps of ones; a 2x2 max holds a centre pixel */
    int ok = m && a && rlx_read_f64(c, vc, 75) == RLX_OK && rlx_read_f64(m, vm, 12) == RLX_OK &&
             rlx_read_f64(a, va, 8) == RLX_OK && vc[12] == 18 && vc[0] == 8 && vm[0] == 18 && va[0] == 1;
    rlx_scope_end();
    return ok;
}

TEST(conv2d_pool_allocation_failures) { ALLOC_WALK(conv_pool_workload, 3); }

TEST(conv2d_pool_same_bits_any_threads)
{
    same_bits_any_threads("conv2d", big_conv);
    same_bits_any_threads("avg_pool2d", big_pool);
}

TEST(pool_random_shapes)
{
    for (int it = 0; it < 40; it++) {
        int k[2] = {rnd_int(1, 4), rnd_int(1, 4)}, st[2] = {rnd_int(1, 3), rnd_int(1, 3)};
        int pd[2] = {rnd_int(0, k[0] / 2), rnd_int(0, k[1] / 2)};
        int64_t sx[4] = {rnd_int(1, 3), rnd_int(1, 4), rnd_int(k[0], 13), rnd_int(k[1], 37)}, so[4];
        int64_t nx = sx[0] * sx[1] * sx[2] * sx[3];
        double *x = rnd(nx, -5, 5), *want = malloc((size_t)nx * 4 * sizeof *want);
        for (int64_t i = 0; i < nx; i++)
            x[i] = (float)x[i]; /* exact in both dtypes: max must match exactly */
        if (it % 4 == 3)
            x[rnd_int(0, (int)nx - 1)] = NAN;
        for (int avg = 0; avg < 2; avg++) {
            ref_pool(x, sx, k, st, pd, avg, so, want);
            for (int d = 0; d < 2; d++) {
                rlx_dtype dt = d ? RLX_F64 : RLX_F32;
                int how = it % 3;
                rlx_tensor *tx = how < 2 ? strided_nchw(dt, sx, x, how) : mk(dt, 4, sx, x);
                char what[128];
                snprintf(what, sizeof what, "%s %s k %d,%d st %d,%d pd %d,%d view %d %s", avg ? "avg" : "max",
                         test_dims(4, sx), k[0], k[1], st[0], st[1], pd[0], pd[1], how, rlx_dtype_name(dt));
                double tol = avg ? (d ? 1e-13 : 1e-6) : 0; /* max is exact */
                EXPECT_V(what, avg ? rlx_avg_pool2d(tx, k, st, pd) : rlx_max_pool2d(tx, k, st, pd), dt, 4, so, want,
                         tol, tol);
            }
        }
        free(x);
        free(want);
    }
}

/* ------------------------------------------------------------ errors */

TEST(nn_bad_arguments)
{
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s2[1] = {2};
    rlx_tensor *x = rlx_ones(RLX_F32, 2, s23), *xb = rlx_ones(RLX_BOOL, 2, s23), *sc = rlx_scalar(RLX_F32, 1);
    rlx_tensor *g3 = rlx_ones(RLX_F32, 1, s3), *g2 = rlx_ones(RLX_F32, 1, s2);

    CHECK_NULL_ERR(rlx_softmax(NULL, 0), RLX_E_ARG, "rlx_softmax");
    CHECK_NULL_ERR(rlx_softmax(x, 2), RLX_E_ARG, "rlx_softmax");
    CHECK_NULL_ERR(rlx_softmax(x, -3), RLX_E_ARG, "rlx_softmax");
    CHECK_NULL_ERR(rlx_softmax(xb, 0), RLX_E_DTYPE, "rlx_softmax");
    CHECK_NULL_ERR(rlx_softmax(sc, 0), RLX_E_ARG, "rlx_softmax");
    CHECK_NULL_ERR(rlx_log_softmax(NULL, 0), RLX_E_ARG, "rlx_log_softmax");
    CHECK_NULL_ERR(rlx_log_softmax(x, 5), RLX_E_ARG, "rlx_log_softmax");
    CHECK_NULL_ERR(rlx_log_softmax(xb, 0), RLX_E_DTYPE, "rlx_log_softmax");

    CHECK_NULL_ERR(rlx_layer_norm(NULL, g3, g3, 1e-5), RLX_E_ARG, "rlx_layer_norm");
    CHECK_NULL_ERR(rlx_layer_norm(x, g2, NULL, 1e-5), RLX_E_SHAPE, "rlx_layer_norm");
    CHECK_NULL_ERR(rlx_layer_norm(x, g3, g2, 1e-5), RLX_E_SHAPE, "rlx_layer_norm");
    CHECK_NULL_ERR(rlx_layer_norm(x, x, NULL, 1e-5), RLX_E_SHAPE, "rlx_layer_norm");
    CHECK_NULL_ERR(rlx_layer_norm(sc, NULL, NULL, 1e-5), RLX_E_SHAPE, "rlx_layer_norm");
    CHECK_NULL_ERR(rlx_layer_norm(xb, NULL, NULL, 1e-5), RLX_E_DTYPE, "rlx_layer_norm");
    CHECK_NULL_ERR(rlx_layer_norm(x, rlx_ones(RLX_BOOL, 1, s3), NULL, 1e-5), RLX_E_DTYPE, "rlx_layer_norm");
    CHECK_NULL_ERR(rlx_layer_norm(x, NULL, NULL, -1), RLX_E_ARG, "rlx_layer_norm");
    CHECK_NULL_ERR(rlx_layer_norm(x, NULL, NULL, NAN), RLX_E_ARG, "rlx_layer_norm");
    CHECK_NULL_ERR(rlx_rms_norm(NULL, g3, 1e-5), RLX_E_ARG, "rlx_rms_norm");
    CHECK_NULL_ERR(rlx_rms_norm(x, g2, 1e-5), RLX_E_SHAPE, "rlx_rms_norm");
    CHECK_NULL_ERR(rlx_rms_norm(sc, NULL, 1e-5), RLX_E_SHAPE, "rlx_rms_norm");
    CHECK_NULL_ERR(rlx_rms_norm(xb, NULL, 1e-5), RLX_E_DTYPE, "rlx_rms_norm");
    CHECK_NULL_ERR(rlx_rms_norm(x, NULL, INFINITY), RLX_E_ARG, "rlx_rms_norm");

    CHECK_NULL_ERR(rlx_cross_entropy(NULL, x), RLX_E_ARG, "rlx_cross_entropy");
    CHECK_NULL_ERR(rlx_cross_entropy(x, NULL), RLX_E_ARG, "rlx_cross_entropy");
    CHECK_NULL_ERR(rlx_cross_entropy(x, g3), RLX_E_SHAPE, "rlx_cross_entropy");
    CHECK_NULL_ERR(rlx_cross_entropy(sc, sc), RLX_E_SHAPE, "rlx_cross_entropy");
    CHECK_NULL_ERR(rlx_cross_entropy(xb, x), RLX_E_DTYPE, "rlx_cross_entropy");
    const char *sce = "rlx_softmax_cross_entropy_with_logits";
    rlx_tensor *lab = rlx_zeros(RLX_I32, 1, s2);
    CHECK(rlx_softmax_cross_entropy_with_logits(x, lab) != NULL);
    CHECK_NULL_ERR(rlx_softmax_cross_entropy_with_logits(NULL, lab), RLX_E_ARG, sce);
    CHECK_NULL_ERR(rlx_softmax_cross_entropy_with_logits(x, NULL), RLX_E_ARG, sce);
    CHECK_NULL_ERR(rlx_softmax_cross_entropy_with_logits(x, rlx_zeros(RLX_I32, 1, s3)), RLX_E_SHAPE, sce);
    CHECK_NULL_ERR(rlx_softmax_cross_entropy_with_logits(x, rlx_zeros(RLX_I32, 2, s23)), RLX_E_SHAPE, sce);
    CHECK_NULL_ERR(rlx_softmax_cross_entropy_with_logits(g3, lab), RLX_E_SHAPE, sce);
    CHECK_NULL_ERR(rlx_softmax_cross_entropy_with_logits(x, rlx_zeros(RLX_BOOL, 1, s2)), RLX_E_DTYPE, sce);
    CHECK_NULL_ERR(rlx_softmax_cross_entropy_with_logits(xb, lab), RLX_E_DTYPE, sce);

    /* attention: q [B, Sq, H*D], k/v [B, Sk, H*D]. */
    int64_t sq[3] = {2, 3, 8}, sk[3] = {2, 5, 8}, sk2[3] = {2, 4, 8}, sb[3] = {1, 5, 8}, s6[3] = {2, 5, 6};
    rlx_tensor *q = rlx_ones(RLX_F32, 3, sq), *k = rlx_ones(RLX_F32, 3, sk);
    const char *at = "rlx_attention";
    CHECK(rlx_attention(q, k, k, 2, 4, RLX_MASK_SLIDING, 1) != NULL);
    CHECK_NULL_ERR(rlx_attention(NULL, k, k, 2, 4, RLX_MASK_NONE, 0), RLX_E_ARG, at);
    CHECK_NULL_ERR(rlx_attention(q, NULL, k, 2, 4, RLX_MASK_NONE, 0), RLX_E_ARG, at);
    CHECK_NULL_ERR(rlx_attention(q, k, NULL, 2, 4, RLX_MASK_NONE, 0), RLX_E_ARG, at);
    CHECK_NULL_ERR(rlx_attention(q, k, k, 3, 4, RLX_MASK_NONE, 0), RLX_E_SHAPE, at);
    CHECK_NULL_ERR(rlx_attention(q, k, k, 0, 8, RLX_MASK_NONE, 0), RLX_E_ARG, at);
    CHECK_NULL_ERR(rlx_attention(q, k, k, 8, -1, RLX_MASK_NONE, 0), RLX_E_ARG, at);
    CHECK_NULL_ERR(rlx_attention(q, k, rlx_ones(RLX_F32, 3, sk2), 2, 4, RLX_MASK_NONE, 0), RLX_E_SHAPE, at);
    CHECK_NULL_ERR(rlx_attention(q, rlx_ones(RLX_F32, 3, sb), rlx_ones(RLX_F32, 3, sb), 2, 4, RLX_MASK_NONE, 0),
                   RLX_E_SHAPE, at);
    CHECK_NULL_ERR(rlx_attention(q, k, rlx_ones(RLX_F32, 3, s6), 2, 4, RLX_MASK_NONE, 0), RLX_E_SHAPE, at);
    CHECK_NULL_ERR(rlx_attention(x, k, k, 2, 4, RLX_MASK_NONE, 0), RLX_E_SHAPE, at);
    CHECK_NULL_ERR(rlx_attention(q, k, k, 2, 4, (rlx_mask)3, 0), RLX_E_ARG, at);
    CHECK_NULL_ERR(rlx_attention(q, k, k, 2, 4, RLX_MASK_SLIDING, 0), RLX_E_ARG, at);
    CHECK_NULL_ERR(rlx_attention(q, k, k, 2, 4, RLX_MASK_SLIDING, -2), RLX_E_ARG, at);
    CHECK_NULL_ERR(rlx_attention(rlx_ones(RLX_BOOL, 3, sq), k, k, 2, 4, RLX_MASK_NONE, 0), RLX_E_DTYPE, at);
    const char *am = "rlx_attention_masked";
    int64_t sm[2] = {2, 5}, sm2[2] = {2, 4};
    rlx_tensor *m = rlx_ones(RLX_BOOL, 2, sm);
    CHECK(rlx_attention_masked(q, k, k, m, 2, 4) != NULL);
    CHECK_NULL_ERR(rlx_attention_masked(q, k, k, NULL, 2, 4), RLX_E_ARG, am);
    CHECK_NULL_ERR(rlx_attention_masked(NULL, k, k, m, 2, 4), RLX_E_ARG, am);
    CHECK_NULL_ERR(rlx_attention_masked(q, k, k, rlx_ones(RLX_BOOL, 2, sm2), 2, 4), RLX_E_SHAPE, am);
    CHECK_NULL_ERR(rlx_attention_masked(q, k, k, rlx_ones(RLX_BOOL, 1, s2), 2, 4), RLX_E_SHAPE, am);
    CHECK_NULL_ERR(rlx_attention_masked(q, k, k, m, 4, 4), RLX_E_SHAPE, am);
    CHECK_NULL_ERR(rlx_attention_masked(q, k, k, m, 2, 0), RLX_E_ARG, am);
    CHECK_NULL_ERR(rlx_attention_masked(q, rlx_ones(RLX_BOOL, 3, sk), k, m, 2, 4), RLX_E_DTYPE, am);

    /* rope: x [B, S, H*D], cos/sin [S, D/2]. */
    int64_t sx[3] = {2, 3, 8}, scs[2] = {3, 2}, scs2[2] = {4, 2};
    rlx_tensor *rx = rlx_ones(RLX_F32, 3, sx), *cs = rlx_ones(RLX_F32, 2, scs);
    CHECK(rlx_rope(rx, cs, cs, 4) != NULL);
    CHECK_NULL_ERR(rlx_rope(NULL, cs, cs, 4), RLX_E_ARG, "rlx_rope");
    CHECK_NULL_ERR(rlx_rope(rx, NULL, cs, 4), RLX_E_ARG, "rlx_rope");
    CHECK_NULL_ERR(rlx_rope(rx, cs, NULL, 4), RLX_E_ARG, "rlx_rope");
    CHECK_NULL_ERR(rlx_rope(rx, cs, cs, 3), RLX_E_ARG, "rlx_rope");
    CHECK_NULL_ERR(rlx_rope(rx, cs, cs, 0), RLX_E_ARG, "rlx_rope");
    CHECK_NULL_ERR(rlx_rope(rx, cs, cs, 16), RLX_E_SHAPE, "rlx_rope");
    CHECK_NULL_ERR(rlx_rope(rx, cs, cs, 8), RLX_E_SHAPE, "rlx_rope"); /* cos must be [3, 4] then */
    CHECK_NULL_ERR(rlx_rope(rx, rlx_ones(RLX_F32, 2, scs2), cs, 4), RLX_E_SHAPE, "rlx_rope");
    CHECK_NULL_ERR(rlx_rope(rx, cs, rlx_ones(RLX_F32, 2, scs2), 4), RLX_E_SHAPE, "rlx_rope");
    CHECK_NULL_ERR(rlx_rope(x, cs, cs, 4), RLX_E_SHAPE, "rlx_rope");
    CHECK_NULL_ERR(rlx_rope(rlx_ones(RLX_BOOL, 3, sx), cs, cs, 4), RLX_E_DTYPE, "rlx_rope");

    /* conv2d */
    int64_t cx[4] = {1, 4, 5, 5}, cw[4] = {6, 2, 3, 3}, cw3[4] = {6, 3, 3, 3}, cwbig[4] = {6, 2, 7, 3}, cb[1] = {6};
    rlx_tensor *tx = rlx_ones(RLX_F32, 4, cx), *tw = rlx_ones(RLX_F32, 4, cw), *tb = rlx_ones(RLX_F32, 1, cb);
    const char *cv = "rlx_conv2d";
    int one[2] = {1, 1}, zero2[2] = {0, 0}, neg[2] = {-1, 0}, d3[2] = {3, 3};
    CHECK(rlx_conv2d(tx, tw, tb, one, zero2, one, 2) != NULL);
    CHECK_NULL_ERR(rlx_conv2d(NULL, tw, tb, NULL, NULL, NULL, 2), RLX_E_ARG, cv);
    CHECK_NULL_ERR(rlx_conv2d(tx, NULL, tb, NULL, NULL, NULL, 2), RLX_E_ARG, cv);
    CHECK_NULL_ERR(rlx_conv2d(tx, tw, tb, NULL, NULL, NULL, 0), RLX_E_ARG, cv);
    CHECK_NULL_ERR(rlx_conv2d(tx, tw, tb, NULL, NULL, NULL, 1), RLX_E_SHAPE, cv);  /* C/groups != 2 */
    CHECK_NULL_ERR(rlx_conv2d(tx, tw, tb, NULL, NULL, NULL, 3), RLX_E_SHAPE, cv);  /* 3 does not divide 4 */
    CHECK_NULL_ERR(rlx_conv2d(tx, rlx_ones(RLX_F32, 4, cw3), NULL, NULL, NULL, NULL, 2), RLX_E_SHAPE, cv);
    int64_t cw5[4] = {5, 2, 3, 3};
    CHECK_NULL_ERR(rlx_conv2d(tx, rlx_ones(RLX_F32, 4, cw5), NULL, NULL, NULL, NULL, 2), RLX_E_SHAPE, cv); /* O */
    CHECK_NULL_ERR(rlx_conv2d(tx, tw, tb, zero2, NULL, NULL, 2), RLX_E_ARG, cv);
    CHECK_NULL_ERR(rlx_conv2d(tx, tw, tb, NULL, neg, NULL, 2), RLX_E_ARG, cv);
    CHECK_NULL_ERR(rlx_conv2d(tx, tw, tb, NULL, NULL, zero2, 2), RLX_E_ARG, cv);
    CHECK_NULL_ERR(rlx_conv2d(tx, rlx_ones(RLX_F32, 4, cwbig), NULL, NULL, NULL, NULL, 2), RLX_E_SHAPE, cv);
    CHECK(rlx_conv2d(tx, rlx_ones(RLX_F32, 4, cwbig), NULL, NULL, one, NULL, 2) != NULL); /* padding makes it fit */
    CHECK_NULL_ERR(rlx_conv2d(tx, tw, NULL, NULL, NULL, d3, 2), RLX_E_SHAPE, cv); /* dilated span 7 > 5 */
    CHECK_NULL_ERR(rlx_conv2d(tx, tw, rlx_ones(RLX_F32, 1, s3), NULL, NULL, NULL, 2), RLX_E_SHAPE, cv);
    CHECK_NULL_ERR(rlx_conv2d(tx, tw, rlx_ones(RLX_BOOL, 1, cb), NULL, NULL, NULL, 2), RLX_E_DTYPE, cv);
    CHECK_NULL_ERR(rlx_conv2d(rlx_ones(RLX_BOOL, 4, cx), tw, NULL, NULL, NULL, NULL, 2), RLX_E_DTYPE, cv);
    CHECK_NULL_ERR(rlx_conv2d(x, tw, NULL, NULL, NULL, NULL, 2), RLX_E_SHAPE, cv);
    CHECK_NULL_ERR(rlx_conv2d(tx, rlx_ones(RLX_F32, 1, cb), NULL, NULL, NULL, NULL, 2), RLX_E_SHAPE, cv);

    /* conv1d: x [N, C, L], w [O, C/groups, K]. */
    const char *c1 = "rlx_conv1d";
    int64_t s1x[3] = {2, 4, 9}, s1w[3] = {6, 2, 3}, s1b[1] = {6};
    rlx_tensor *x1 = rlx_ones(RLX_F32, 3, s1x), *w1 = rlx_ones(RLX_F32, 3, s1w);
    CHECK(rlx_conv1d(x1, w1, rlx_ones(RLX_F32, 1, s1b), 2, 1, 2, 2) != NULL);
    CHECK_NULL_ERR(rlx_conv1d(NULL, w1, NULL, 1, 0, 1, 2), RLX_E_ARG, c1);
    CHECK_NULL_ERR(rlx_conv1d(x1, NULL, NULL, 1, 0, 1, 2), RLX_E_ARG, c1);
    CHECK_NULL_ERR(rlx_conv1d(tx, w1, NULL, 1, 0, 1, 2), RLX_E_SHAPE, c1);
    CHECK_NULL_ERR(rlx_conv1d(x1, tw, NULL, 1, 0, 1, 2), RLX_E_SHAPE, c1);
    CHECK_NULL_ERR(rlx_conv1d(x1, w1, NULL, 0, 0, 1, 2), RLX_E_ARG, c1);
    CHECK_NULL_ERR(rlx_conv1d(x1, w1, NULL, 1, -1, 1, 2), RLX_E_ARG, c1);
    CHECK_NULL_ERR(rlx_conv1d(x1, w1, NULL, 1, 0, 0, 2), RLX_E_ARG, c1);
    CHECK_NULL_ERR(rlx_conv1d(x1, w1, NULL, 1, 0, 1, 0), RLX_E_ARG, c1);
    CHECK_NULL_ERR(rlx_conv1d(x1, w1, NULL, 1, 0, 1, 1), RLX_E_SHAPE, c1); /* C/groups is 4, w has 2 */
    CHECK_NULL_ERR(rlx_conv1d(x1, w1, NULL, 1, 0, 5, 2), RLX_E_SHAPE, c1); /* dilated kernel 11 > 9 */
    CHECK_NULL_ERR(rlx_conv1d(x1, w1, rlx_ones(RLX_F32, 1, s1x), 1, 0, 1, 2), RLX_E_SHAPE, c1);
    CHECK_NULL_ERR(rlx_conv1d(rlx_ones(RLX_BOOL, 3, s1x), w1, NULL, 1, 0, 1, 2), RLX_E_DTYPE, c1);

    /* conv_transpose2d: x [N, C_in, H, W], w [C_in, C_out/groups, KH, KW]. */
    const char *ct = "rlx_conv_transpose2d", *ct1 = "rlx_conv_transpose1d";
    int64_t stx[4] = {1, 4, 3, 3}, stw[4] = {4, 3, 2, 2}, stb[1] = {6};
    rlx_tensor *xt = rlx_ones(RLX_F32, 4, stx), *wt = rlx_ones(RLX_F32, 4, stw);
    int st2[2] = {2, 2}, o1[2] = {1, 1}, o2[2] = {2, 0}, big[2] = {9, 0}, sneg[2] = {-1, 1};
    CHECK(rlx_conv_transpose2d(xt, wt, rlx_ones(RLX_F32, 1, stb), st2, one, o1, NULL, 2) != NULL);
    CHECK_NULL_ERR(rlx_conv_transpose2d(NULL, wt, NULL, NULL, NULL, NULL, NULL, 1), RLX_E_ARG, ct);
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, NULL, NULL, NULL, NULL, NULL, NULL, 1), RLX_E_ARG, ct);
    CHECK_NULL_ERR(rlx_conv_transpose2d(x1, wt, NULL, NULL, NULL, NULL, NULL, 1), RLX_E_SHAPE, ct);
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, w1, NULL, NULL, NULL, NULL, NULL, 1), RLX_E_SHAPE, ct);
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, tw, NULL, NULL, NULL, NULL, NULL, 1), RLX_E_SHAPE, ct); /* w's C_in is 6 */
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, wt, NULL, NULL, NULL, NULL, NULL, 3), RLX_E_SHAPE, ct);
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, wt, NULL, NULL, NULL, NULL, NULL, 0), RLX_E_ARG, ct);
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, wt, NULL, zero2, NULL, NULL, NULL, 1), RLX_E_ARG, ct);
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, wt, NULL, NULL, sneg, NULL, NULL, 1), RLX_E_ARG, ct);
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, wt, NULL, NULL, NULL, sneg, NULL, 1), RLX_E_ARG, ct);
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, wt, NULL, NULL, NULL, NULL, zero2, 1), RLX_E_ARG, ct);
    /* output_padding must be below the stride or the dilation (PyTorch) */
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, wt, NULL, NULL, NULL, o1, NULL, 1), RLX_E_ARG, ct);
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, wt, NULL, st2, NULL, o2, NULL, 1), RLX_E_ARG, ct);
    CHECK(rlx_conv_transpose2d(xt, wt, NULL, NULL, NULL, o1, st2, 1) != NULL); /* below the dilation */
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, wt, NULL, NULL, big, NULL, NULL, 1), RLX_E_SHAPE, ct); /* size < 1 */
    int64_t s0x[4] = {1, 4, 0, 3};
    CHECK_NULL_ERR(rlx_conv_transpose2d(rlx_ones(RLX_F32, 4, s0x), wt, NULL, NULL, NULL, NULL, NULL, 1), RLX_E_SHAPE,
                   ct);
    CHECK_NULL_ERR(rlx_conv_transpose2d(xt, wt, rlx_ones(RLX_F32, 1, s1x), NULL, NULL, NULL, NULL, 1), RLX_E_SHAPE,
                   ct);
    CHECK_NULL_ERR(rlx_conv_transpose2d(rlx_ones(RLX_BOOL, 4, stx), wt, NULL, NULL, NULL, NULL, NULL, 1),
                   RLX_E_DTYPE, ct);
    int64_t s1t[3] = {4, 3, 2};
    rlx_tensor *w1t = rlx_ones(RLX_F32, 3, s1t);
    CHECK(rlx_conv_transpose1d(x1, w1t, NULL, 2, 1, 1, 1, 1) != NULL);
    CHECK_NULL_ERR(rlx_conv_transpose1d(NULL, w1t, NULL, 1, 0, 0, 1, 1), RLX_E_ARG, ct1);
    CHECK_NULL_ERR(rlx_conv_transpose1d(x1, NULL, NULL, 1, 0, 0, 1, 1), RLX_E_ARG, ct1);
    CHECK_NULL_ERR(rlx_conv_transpose1d(xt, w1t, NULL, 1, 0, 0, 1, 1), RLX_E_SHAPE, ct1);
    CHECK_NULL_ERR(rlx_conv_transpose1d(x1, wt, NULL, 1, 0, 0, 1, 1), RLX_E_SHAPE, ct1);
    CHECK_NULL_ERR(rlx_conv_transpose1d(x1, w1t, NULL, 2, 0, 2, 1, 1), RLX_E_ARG, ct1);
    CHECK_NULL_ERR(rlx_conv_transpose1d(x1, w1t, NULL, 0, 0, 0, 1, 1), RLX_E_ARG, ct1);
    CHECK_NULL_ERR(rlx_conv_transpose1d(x1, w1t, NULL, 1, 0, 0, 1, 3), RLX_E_SHAPE, ct1);

    /* pools */
    int k3[2] = {3, 3}, k0[2] = {0, 3}, k6[2] = {6, 1}, p3[2] = {2, 0};
    const char *fns[2] = {"rlx_max_pool2d", "rlx_avg_pool2d"};
    rlx_tensor *(*pools[2])(rlx_tensor *, const int *, const int *, const int *) = {rlx_max_pool2d, rlx_avg_pool2d};
    for (int i = 0; i < 2; i++) {
        CHECK(pools[i](tx, k3, NULL, one) != NULL);
        CHECK_NULL_ERR(pools[i](NULL, k3, NULL, NULL), RLX_E_ARG, fns[i]);
        CHECK_NULL_ERR(pools[i](tx, NULL, NULL, NULL), RLX_E_ARG, fns[i]);
        CHECK_NULL_ERR(pools[i](tx, k0, NULL, NULL), RLX_E_ARG, fns[i]);
        CHECK_NULL_ERR(pools[i](tx, k3, zero2, NULL), RLX_E_ARG, fns[i]);
        CHECK_NULL_ERR(pools[i](tx, k3, NULL, neg), RLX_E_ARG, fns[i]);
        CHECK_NULL_ERR(pools[i](tx, k3, NULL, p3), RLX_E_ARG, fns[i]); /* more than half the kernel */
        CHECK_NULL_ERR(pools[i](tx, k6, NULL, NULL), RLX_E_SHAPE, fns[i]);
        CHECK_NULL_ERR(pools[i](x, k3, NULL, NULL), RLX_E_SHAPE, fns[i]);
        CHECK_NULL_ERR(pools[i](rlx_ones(RLX_BOOL, 4, cx), k3, NULL, NULL), RLX_E_DTYPE, fns[i]);
    }
    CHECK(rlx_last_status() == RLX_OK);
}

static const rlx_dtype NARROW_FLOATS[2] = {RLX_BF16, RLX_F16};

static rlx_tensor *nf_conv2d(rlx_tensor *const *in)
{
    return rlx_conv2d(in[0], in[1], in[2], (const int[]){1, 2}, (const int[]){1, 1}, NULL, 1);
}
static rlx_tensor *nf_conv_t(rlx_tensor *const *in)
{
    return rlx_conv_transpose2d(in[0], in[1], NULL, (const int[]){2, 2}, NULL, NULL, NULL, 1);
}
static rlx_tensor *nf_max_pool(rlx_tensor *const *in) { return rlx_max_pool2d(in[0], (const int[]){2, 2}, NULL, NULL); }
static rlx_tensor *nf_avg_pool(rlx_tensor *const *in)
{
    return rlx_avg_pool2d(in[0], (const int[]){3, 3}, (const int[]){1, 1}, (const int[]){1, 1});
}
static rlx_tensor *nf_softmax(rlx_tensor *const *in) { return rlx_softmax(in[0], -1); }
static rlx_tensor *nf_layer_norm(rlx_tensor *const *in) { return rlx_layer_norm(in[0], in[1], in[2], 1e-5); }
static rlx_tensor *nf_gelu(rlx_tensor *const *in) { return rlx_gelu(in[0]); }

/* conv2d (bias added in f32), the transposed conv, the pools and the
 * composites on f16/bf16: f32 on the same rounded values, rounded once. */
TEST(conv_pool_norm_narrow_floats_match_f32)
{
    const int64_t x[4] = {2, 3, 6, 7}, w[4] = {4, 3, 3, 3}, b[1] = {4}, wt[4] = {3, 2, 2, 2}, r[2] = {5, 9},
                  d[1] = {9};
    for (int i = 0; i < 2; i++) {
        rlx_dtype dt = NARROW_FLOATS[i];
        EXPECT_NARROW(nf_conv2d, dt, 3, ((int[]){4, 4, 1}), ((const int64_t *const[]){x, w, b}), -1, 1, 1);
        EXPECT_NARROW(nf_conv_t, dt, 2, ((int[]){4, 4}), ((const int64_t *const[]){x, wt}), -1, 1, 1);
        EXPECT_NARROW(nf_max_pool, dt, 1, ((int[]){4}), ((const int64_t *const[]){x}), -1, 1, 0);
        EXPECT_NARROW(nf_avg_pool, dt, 1, ((int[]){4}), ((const int64_t *const[]){x}), -1, 1, 1);
        EXPECT_NARROW(nf_softmax, dt, 1, ((int[]){2}), ((const int64_t *const[]){r}), -3, 3, 1);
        EXPECT_NARROW(nf_layer_norm, dt, 3, ((int[]){2, 1, 1}), ((const int64_t *const[]){r, d, d}), -3, 3, 1);
        EXPECT_NARROW(nf_gelu, dt, 1, ((int[]){2}), ((const int64_t *const[]){r}), -3, 3, 1);
    }
}

TEST_MAIN(T(softmax_values), T(softmax_rows_sum_to_one), T(layer_norm_and_rms_norm), T(cross_entropies),
          T(attention_every_mask), T(attention_sliding_window_sees_window_keys),
          T(attention_fully_masked_rows_are_zero), T(attention_masked_values),
          T(attention_fused_matches_composite), T(attention_fused_key_masks_match_composite),
          T(attention_fused_same_bits_any_threads_and_backend), T(attention_fused_allocation_failures),
          T(rope_values), T(conv2d_values), T(pool_values), T(conv2d_random_shapes), T(pool_random_shapes),
          T(conv_transpose_values), T(conv1d_values),
          T(conv2d_pool_same_bits_any_threads), T(conv2d_pool_allocation_failures), T(nn_bad_arguments),
          T(conv_pool_norm_narrow_floats_match_f32))
