/*
 * test_nn.c — softmax/log_softmax, layer and RMS norm, the cross
 * entropies, attention (every mask kind, fully masked rows), rope, conv2d
 * and the pools, each against its formula written as plain double loops
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

TEST_MAIN(T(softmax_values), T(softmax_rows_sum_to_one), T(layer_norm_and_rms_norm), T(cross_entropies),
          T(attention_every_mask), T(attention_fully_masked_rows_are_zero), T(attention_masked_values),
          T(rope_values), T(conv2d_values), T(pool_values), T(nn_bad_arguments))
