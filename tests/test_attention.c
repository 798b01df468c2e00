/*
 * test_attention.c — rlx_attention_ex (grouped kv heads, bool and additive
 * mask tensors of every broadcast shape, positional masks with Sq != Sk,
 * scale) and rlx_rope_ex (offsets, position tensors, both pair layouts,
 * partial rotary dims), each against its formula written as plain double
 * loops here, on both backends, f32 and f64, with strided operands, plus
 * every documented error. Gradients are checked against finite
 * differences in test_grad.c.
 */
#include "harness.h"

static double *rnd(int64_t n, double lo, double hi)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = test_uniform(lo, hi);
    return v;
}

/* ------------------------------------------------------------ attention */

/* One case: shapes, heads, the positional mask, and an optional mask
 * tensor given as mrank/mshape (broadcast from the right to [B, H, Sq, Sk]). */
typedef struct {
    int64_t B, sq, sk;
    int h, hk, d;
    rlx_mask kind;
    int window;
    double scale;  /* 0: 1/sqrt(D) */
    int mrank;     /* -1: no mask tensor */
    int64_t mshape[4];
    bool additive; /* float mask (else bool) */
    bool fused;    /* q, k, v narrowed out of one [B, S, (H + 2 Hkv) D] tensor (Sq = Sk) */
    bool mask_t;   /* the mask tensor is a transposed view */
} acase;

/* Attention in double straight from the definition: query head hh reads kv
 * head hh / (H/Hkv); the mask tensor m is indexed through its broadcast
 * (dims of 1 read index 0). */
static void ref_attention(const acase *c, const double *q, const double *k, const double *v, const double *m,
                          double *out)
{
    int64_t ms[4] = {1, 1, 1, 1};
    for (int i = 0; i < c->mrank; i++)
        ms[4 - c->mrank + i] = c->mshape[i];
    int64_t hd = (int64_t)c->h * c->d, kd = (int64_t)c->hk * c->d, g = c->h / c->hk;
    double scale = c->scale ? c->scale : 1 / sqrt((double)c->d);
    double *sc = malloc((size_t)(c->sk ? c->sk : 1) * sizeof *sc);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t hh = 0; hh < c->h; hh++)
            for (int64_t i = 0; i < c->sq; i++) {
                int64_t pos = c->sk - c->sq + i, kh = hh / g;
                double mx = -INFINITY, den = 0;
                for (int64_t j = 0; j < c->sk; j++) {
                    bool vis = c->kind == RLX_MASK_NONE     ? true
                               : c->kind == RLX_MASK_CAUSAL ? j <= pos
                                                            : j <= pos && j > pos - c->window;
                    double s = 0;
                    for (int e = 0; e < c->d; e++)
                        s += q[(b * c->sq + i) * hd + hh * c->d + e] * k[(b * c->sk + j) * kd + kh * c->d + e];
                    s *= scale;
                    if (m) {
                        int64_t idx[4] = {b, hh, i, j}, off = 0;
                        for (int a = 0; a < 4; a++)
                            off = off * ms[a] + (ms[a] == 1 ? 0 : idx[a]);
                        if (c->additive)
                            s += m[off];
                        else
                            vis = vis && m[off] != 0;
                    }
                    sc[j] = vis ? s : -INFINITY;
                    mx = fmax(mx, sc[j]);
                }
                for (int64_t j = 0; j < c->sk; j++) {
                    sc[j] = sc[j] == -INFINITY ? 0 : exp(sc[j] - mx);
                    den += sc[j];
                }
                for (int e = 0; e < c->d; e++) {
                    double o = 0;
                    for (int64_t j = 0; j < c->sk; j++)
                        o += den > 0 ? sc[j] / den * v[(b * c->sk + j) * kd + kh * c->d + e] : 0;
                    out[(b * c->sq + i) * hd + hh * c->d + e] = o;
                }
            }
    free(sc);
}

/* x [rows, cols] of doubles as a dt tensor, or with transposed a view of
 * the transposed data (strides (1, rows)). */
static rlx_tensor *matrix_view(rlx_dtype dt, int rank, const int64_t *shape, double *x, bool transposed)
{
    if (!transposed || rank < 2)
        return test_tensor(dt, rank, shape, x);
    int64_t n = test_numel(rank, shape), r = shape[rank - 2], c = shape[rank - 1], lead = r * c != 0 ? n / (r * c) : 0;
    double *xt = malloc((size_t)(n ? n : 1) * sizeof *xt);
    int64_t ts[4];
    memcpy(ts, shape, (size_t)rank * sizeof *ts);
    ts[rank - 2] = c;
    ts[rank - 1] = r;
    for (int64_t l = 0; l < lead; l++)
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++)
                xt[(l * c + j) * r + i] = x[(l * r + i) * c + j];
    rlx_tensor *t = test_tensor(dt, rank, ts, xt);
    for (int64_t l = 0; l < lead; l++) /* back, as dt stored it */
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++)
                x[(l * r + i) * c + j] = xt[(l * c + j) * r + i];
    free(xt);
    int perm[4] = {0, 1, 2, 3};
    perm[rank - 2] = rank - 1;
    perm[rank - 1] = rank - 2;
    return rlx_transpose(t, rank, perm);
}

/* Mask values: bool keeps with probability 0.6, additive in [-2, 2] with a
 * fifth -inf; the first mask row drops every key (a fully masked row). */
static double *mask_values(const acase *c)
{
    int64_t n = test_numel(c->mrank, c->mshape), sk = c->mrank ? c->mshape[c->mrank - 1] : 1;
    double *m = malloc((size_t)(n ? n : 1) * sizeof *m);
    for (int64_t i = 0; i < n; i++) {
        double u = test_uniform(0, 1);
        m[i] = c->additive ? (u < 0.2 ? -INFINITY : test_uniform(-2, 2)) : u < 0.6;
        if (c->mrank >= 2 && i < sk) /* the first row of the mask drops every key */
            m[i] = c->additive ? -INFINITY : 0;
    }
    return m;
}

static void check_case(const acase *c, rlx_dtype dt)
{
    rlx_scope_begin();
    int64_t hd = (int64_t)c->h * c->d, kd = (int64_t)c->hk * c->d;
    int64_t sq3[3] = {c->B, c->sq, hd}, sk3[3] = {c->B, c->sk, kd};
    double *q = malloc((size_t)(c->B * c->sq * hd + 1) * sizeof *q);
    double *k = malloc((size_t)(c->B * c->sk * kd + 1) * sizeof *k);
    double *v = malloc((size_t)(c->B * c->sk * kd + 1) * sizeof *v);
    rlx_tensor *tq, *tk, *tv;
    if (c->fused) { /* one [B, S, (H + 2 Hkv) D] tensor, as a fused qkv linear gives */
        int64_t w = hd + 2 * kd, fs[3] = {c->B, c->sq, w};
        double *f = rnd(c->B * c->sq * w, -2, 2);
        rlx_tensor *tf = test_tensor(dt, 3, fs, f);
        tq = rlx_narrow(tf, 2, 0, hd);
        tk = rlx_narrow(tf, 2, hd, kd);
        tv = rlx_narrow(tf, 2, hd + kd, kd);
        for (int64_t r = 0; r < c->B * c->sq; r++) {
            memcpy(q + r * hd, f + r * w, (size_t)hd * sizeof *q);
            memcpy(k + r * kd, f + r * w + hd, (size_t)kd * sizeof *k);
            memcpy(v + r * kd, f + r * w + hd + kd, (size_t)kd * sizeof *v);
        }
        free(f);
    } else {
        for (int64_t i = 0; i < c->B * c->sq * hd; i++)
            q[i] = test_uniform(-2, 2);
        for (int64_t i = 0; i < c->B * c->sk * kd; i++) {
            k[i] = test_uniform(-2, 2);
            v[i] = test_uniform(-2, 2);
        }
        tq = test_tensor(dt, 3, sq3, q);
        tk = test_tensor(dt, 3, sk3, k);
        tv = test_tensor(dt, 3, sk3, v);
    }
    double *m = NULL;
    rlx_tensor *tm = NULL;
    if (c->mrank >= 0) {
        m = mask_values(c);
        tm = matrix_view(c->additive ? dt : RLX_BOOL, c->mrank, c->mshape, m, c->mask_t);
    }
    double *want = malloc((size_t)(c->B * c->sq * hd + 1) * sizeof *want);
    ref_attention(c, q, k, v, m, want);
    rlx_attention_opts o = {c->hk, c->kind, c->window, tm, c->scale};
    char what[200];
    snprintf(what, sizeof what, "B%lld Sq%lld Sk%lld H%d Hkv%d D%d kind %d window %d mask %s %s%s%s %s",
             (long long)c->B, (long long)c->sq, (long long)c->sk, c->h, c->hk, c->d, (int)c->kind, c->window,
             c->mrank < 0 ? "-" : test_dims(c->mrank, c->mshape), c->additive ? "additive" : "bool",
             c->fused ? " fused" : "", c->mask_t ? " transposed" : "", rlx_dtype_name(dt));
    double tol = dt == RLX_F32 ? 2e-5 : 1e-12;
    EACH_BACKEND(b) EXPECT_V(what, rlx_attention_ex(tq, tk, tv, c->h, c->d, &o), dt, 3, sq3, want, tol, tol);
    free(q);
    free(k);
    free(v);
    free(m);
    free(want);
    rlx_scope_end();
}

static void check_both(const acase *c)
{
    check_case(c, RLX_F64);
    check_case(c, RLX_F32);
}

/* The defaults and the old entry points are the same computation. */
TEST(attention_ex_defaults_are_plain_attention)
{
    int64_t s[3] = {2, 5, 12};
    rlx_tensor *q = trand(RLX_F64, 3, s, -2, 2), *k = trand(RLX_F64, 3, s, -2, 2), *v = trand(RLX_F64, 3, s, -2, 2);
    rlx_attention_opts zero = {0}, causal = {.mask = RLX_MASK_CAUSAL};
    rlx_attention_opts sliding = {.mask = RLX_MASK_SLIDING, .window = 2};
    EXPECT_SAME(rlx_attention_ex(q, k, v, 3, 4, NULL), rlx_attention(q, k, v, 3, 4, RLX_MASK_NONE, 0), 0);
    EXPECT_SAME(rlx_attention_ex(q, k, v, 3, 4, &zero), rlx_attention(q, k, v, 3, 4, RLX_MASK_NONE, 0), 0);
    EXPECT_SAME(rlx_attention_ex(q, k, v, 3, 4, &causal), rlx_attention(q, k, v, 3, 4, RLX_MASK_CAUSAL, 0), 0);
    EXPECT_SAME(rlx_attention_ex(q, k, v, 3, 4, &sliding), rlx_attention(q, k, v, 3, 4, RLX_MASK_SLIDING, 2), 0);
    /* a [B, 1, 1, Sk] bool mask is rlx_attention_masked's key mask */
    int64_t sm[2] = {2, 5}, sm4[4] = {2, 1, 1, 5};
    const unsigned char km[10] = {1, 0, 1, 1, 0, 0, 1, 1, 1, 0};
    rlx_tensor *keep = tbool(2, sm, km);
    rlx_attention_opts masked = {.attn_mask = rlx_reshape(keep, 4, sm4)};
    EXPECT_SAME(rlx_attention_ex(q, k, v, 3, 4, &masked), rlx_attention_masked(q, k, v, keep, 3, 4), 0);
    /* scale: 1 instead of 1/2 is q scaled by 2 */
    rlx_attention_opts one = {.scale = 1};
    EXPECT_SAME(rlx_attention_ex(q, k, v, 3, 4, &one), rlx_attention(rlx_mul_s(q, 2), k, v, 3, 4, RLX_MASK_NONE, 0),
                1e-14);
}

/* A hand-checked case: with q = 0 every visible key weighs exp(mask), so
 * the output is the mask-weighted mean of v. */
TEST(attention_ex_additive_mask_by_hand)
{
    const int64_t s[3] = {1, 2, 1}, sm[2] = {2, 2};
    const double vv[2] = {1, 3}, add[4] = {0, log(3.0), -INFINITY, 0};
    rlx_tensor *q = rlx_zeros(RLX_F64, 3, s), *v = tf64(3, s, vv);
    rlx_attention_opts o = {.attn_mask = tf64(2, sm, add)};
    /* row 0: weights 1, 3 -> (1 + 9) / 4; row 1: only key 1 */
    const double want[2] = {2.5, 3};
    EACH_BACKEND(b) EXPECT(rlx_attention_ex(q, q, v, 1, 1, &o), RLX_F64, 3, s, want, 1e-15);
    /* every key dropped: zeros (PyTorch gives NaN) */
    const double drop[4] = {-INFINITY, -INFINITY, 0, 0}, want0[2] = {0, 2};
    o.attn_mask = tf64(2, sm, drop);
    EACH_BACKEND(b) EXPECT(rlx_attention_ex(q, q, v, 1, 1, &o), RLX_F64, 3, s, want0, 1e-15);
}

/* Causal with Sq != Sk is aligned bottom right: query i sees keys
 * j <= i + Sk - Sq (by hand with q = 0: the mean of the visible v). */
TEST(attention_ex_causal_bottom_right)
{
    const int64_t sq[3] = {1, 2, 1}, sk[3] = {1, 4, 1};
    const double vv[4] = {1, 10, 100, 1000};
    rlx_tensor *q = rlx_zeros(RLX_F64, 3, sq), *k = rlx_zeros(RLX_F64, 3, sk), *v = tf64(3, sk, vv);
    rlx_attention_opts o = {.mask = RLX_MASK_CAUSAL};
    const double want[2] = {111.0 / 3, 1111.0 / 4}; /* positions 2 and 3 */
    EACH_BACKEND(b) EXPECT(rlx_attention_ex(q, k, v, 1, 1, &o), RLX_F64, 3, sq, want, 1e-14);
    /* one query (a decoding step) sees every key */
    const int64_t s1[3] = {1, 1, 1};
    const double want1[1] = {1111.0 / 4};
    EACH_BACKEND(b) EXPECT(rlx_attention_ex(rlx_zeros(RLX_F64, 3, s1), k, v, 1, 1, &o), RLX_F64, 3, s1, want1, 1e-14);
}

TEST(attention_ex_grouped_kv_heads)
{
    acase c = {.B = 2, .sq = 5, .sk = 7, .h = 4, .hk = 2, .d = 3, .mrank = -1};
    check_both(&c); /* two groups of two */
    c.hk = 1;       /* MQA */
    check_both(&c);
    c.hk = 4;       /* plain */
    check_both(&c);
    c.hk = 2;
    c.kind = RLX_MASK_CAUSAL;
    check_both(&c);
    c.kind = RLX_MASK_SLIDING;
    c.window = 3;
    check_both(&c);
    /* across the kernel's blocks (64 query rows, key blocks) */
    acase big = {.B = 1, .sq = 70, .sk = 150, .h = 6, .hk = 2, .d = 8, .kind = RLX_MASK_CAUSAL, .mrank = -1};
    check_both(&big);
    /* q, k, v narrowed out of one fused projection */
    acase fused = {.B = 2, .sq = 6, .sk = 6, .h = 4, .hk = 1, .d = 4, .kind = RLX_MASK_CAUSAL, .mrank = -1,
                   .fused = true};
    check_both(&fused);
    fused.hk = 2;
    check_both(&fused);
}

/* Every broadcast shape of a mask tensor, bool and additive, alone and
 * with the positional masks, with plain and grouped heads. */
TEST(attention_ex_mask_shapes)
{
    enum { B = 2, H = 4, SQ = 5, SK = 7 };
    static const struct {
        int rank;
        int64_t shape[4];
    } shapes[] = {
        {2, {SQ, SK}},        {4, {B, 1, SQ, SK}}, {4, {B, H, SQ, SK}}, {4, {B, 1, 1, SK}}, {1, {SK}},
        {3, {H, SQ, SK}},     {4, {1, H, 1, SK}},  {4, {B, H, SQ, 1}},  {0, {0}},
    };
    static const rlx_mask kinds[3] = {RLX_MASK_NONE, RLX_MASK_CAUSAL, RLX_MASK_SLIDING};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int add = 0; add < 2; add++)
            for (int kd = 0; kd < 3; kd++) {
                acase c = {.B = B, .sq = SQ, .sk = SK, .h = H, .hk = kd == 1 ? 2 : H, .d = 3, .kind = kinds[kd],
                           .window = 3, .mrank = shapes[i].rank, .additive = add, .mask_t = kd == 2};
                memcpy(c.mshape, shapes[i].shape, sizeof c.mshape);
                check_both(&c);
            }
    /* Sq > Sk with causal and a padding mask: early rows see nothing */
    acase pad = {.B = 2, .sq = 6, .sk = 3, .h = 2, .hk = 1, .d = 2, .kind = RLX_MASK_CAUSAL, .mrank = 4,
                 .mshape = {2, 1, 1, 3}};
    check_both(&pad);
    pad.additive = true;
    check_both(&pad);
}

/* Masks over the kernel's blocks: 64 query rows and 64 or more keys per
 * block, so whole key blocks are skipped for some rows and not others. */
TEST(attention_ex_masks_across_blocks)
{
    acase c = {.B = 2, .sq = 70, .sk = 150, .h = 2, .hk = 1, .d = 16, .kind = RLX_MASK_CAUSAL, .mrank = 4,
               .mshape = {2, 1, 70, 150}};
    check_both(&c);
    c.additive = true;
    c.mshape[1] = 2;
    check_both(&c);
    acase pad = {.B = 3, .sq = 130, .sk = 300, .h = 2, .hk = 2, .d = 8, .mrank = 4, .mshape = {3, 1, 1, 300}};
    check_both(&pad);
}

/* A key-padding mask in which batch 0 keeps only keys in the last block
 * and batch 1 only keys in the first: the other blocks are skipped. */
TEST(attention_ex_padding_skips_blocks)
{
    int64_t B = 2, sq = 3, sk = 300, sm[4] = {2, 1, 1, 300}, s_q[3] = {B, sq, 8}, s_k[3] = {B, sk, 4};
    double *q = rnd(B * sq * 8, -1, 1), *k = rnd(B * sk * 4, -1, 1), *v = rnd(B * sk * 4, -1, 1), m[600], want[48];
    for (int j = 0; j < 300; j++) {
        m[j] = j >= 290 ? 0 : -INFINITY;
        m[300 + j] = j < 3 ? 0.5 : -INFINITY;
    }
    acase c = {.B = B, .sq = sq, .sk = sk, .h = 2, .hk = 1, .d = 4, .mrank = 4, .mshape = {2, 1, 1, 300},
               .additive = true};
    ref_attention(&c, q, k, v, m, want);
    rlx_attention_opts o = {.num_kv_heads = 1, .attn_mask = tf64(4, sm, m)};
    EACH_BACKEND(b)
    EXPECT(rlx_attention_ex(tf64(3, s_q, q), tf64(3, s_k, k), tf64(3, s_k, v), 2, 4, &o), RLX_F64, 3, s_q, want,
           1e-12);
    free(q);
    free(k);
    free(v);
}

/* Value of a gradient of attention_ex against the gradient of the same
 * attention with kv heads repeated by hand (repeat_interleave): the
 * grouped rule sums over each group. */
TEST(attention_ex_grouped_gradient_is_repeated_heads)
{
    int64_t B = 2, S = 5, H = 4, HK = 2, D = 3;
    int64_t sq[3] = {B, S, H * D}, sk[3] = {B, S, HK * D}, sk5[4] = {B, S, HK, D};
    rlx_tensor *q = trand(RLX_F64, 3, sq, -1, 1), *k = trand(RLX_F64, 3, sk, -1, 1), *v = trand(RLX_F64, 3, sk, -1, 1);
    rlx_tensor *w = trand(RLX_F64, 3, sq, -1, 1);
    /* [B, S, Hkv, D] -> [B, S, Hkv, G, D] -> [B, S, H*D]: kv head h / G */
    int64_t rep[5] = {B, S, HK, H / HK, D};
    rlx_tensor *kr = rlx_reshape(rlx_broadcast_to(rlx_unsqueeze(rlx_reshape(k, 4, sk5), 3), 5, rep), 3, sq);
    rlx_tensor *vr = rlx_reshape(rlx_broadcast_to(rlx_unsqueeze(rlx_reshape(v, 4, sk5), 3), 5, rep), 3, sq);
    rlx_attention_opts o = {.num_kv_heads = (int)HK, .mask = RLX_MASK_CAUSAL};
    rlx_tensor *wrt[3] = {q, k, v}, *g[3], *gr[3];
    EACH_BACKEND(b)
    {
        CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(rlx_attention_ex(q, k, v, (int)H, (int)D, &o), w)), wrt, 3, g),
                     RLX_OK);
        CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(rlx_attention(q, kr, vr, (int)H, (int)D, RLX_MASK_CAUSAL, 0), w)),
                              wrt, 3, gr),
                     RLX_OK);
        for (int i = 0; i < 3; i++)
            EXPECT_SAME(g[i], gr[i], 1e-12);
    }
}

/* Building and realizing attention_ex with a grouped head, an additive
 * mask and its gradient under every allocation failure in turn. */
static int attention_ex_workload(void)
{
    rlx_scope_begin();
    int64_t sq[3] = {1, 4, 4}, sk[3] = {1, 4, 2}, sm[2] = {4, 4};
    double x[16], mv[16];
    for (int i = 0; i < 16; i++) {
        x[i] = sin(i);
        mv[i] = i % 5 == 0 ? -INFINITY : cos(i);
    }
    rlx_tensor *q = rlx_from_data(RLX_F64, 3, sq, x), *k = rlx_from_data(RLX_F64, 3, sk, x);
    rlx_tensor *m = rlx_from_data(RLX_F64, 2, sm, mv), *g[2] = {NULL, NULL};
    rlx_attention_opts o = {.num_kv_heads = 1, .mask = RLX_MASK_CAUSAL, .attn_mask = m};
    rlx_tensor *y = rlx_attention_ex(q, k, k, 2, 2, &o), *wrt[2] = {k, m};
    rlx_status st = y ? rlx_grad(rlx_sum_all(rlx_mul(y, y)), wrt, 2, g) : RLX_E_NOMEM;
    rlx_tensor *outs[3] = {y, g[0], g[1]};
    int ok = y && st == RLX_OK && rlx_realize_many(outs, 3) == RLX_OK;
    rlx_scope_end();
    return ok;
}

TEST(attention_ex_allocation_failures)
{
    EACH_BACKEND(b) ALLOC_WALK(attention_ex_workload, 20);
}

TEST(attention_ex_bad_arguments)
{
    const char *fn = "rlx_attention_ex";
    int64_t sq[3] = {2, 3, 8}, sk[3] = {2, 5, 4}, s2[2] = {3, 5}, s4[4] = {2, 4, 3, 5};
    rlx_tensor *q = rlx_ones(RLX_F32, 3, sq), *k = rlx_ones(RLX_F32, 3, sk);
    rlx_attention_opts o = {.num_kv_heads = 2};
    CHECK(rlx_attention_ex(q, k, k, 4, 2, &o) != NULL);
    CHECK(rlx_attention_ex(q, rlx_ones(RLX_F32, 3, sk), k, 2, 4, &(rlx_attention_opts){.num_kv_heads = 1}) != NULL);
    CHECK_NULL_ERR(rlx_attention_ex(NULL, k, k, 4, 2, &o), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_attention_ex(q, NULL, k, 4, 2, &o), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_attention_ex(q, k, NULL, 4, 2, &o), RLX_E_ARG, fn);
    /* H % Hkv != 0 */
    rlx_tensor *k6 = rlx_ones(RLX_F32, 3, (int64_t[]){2, 5, 6});
    CHECK_NULL_ERR(rlx_attention_ex(q, k6, k6, 4, 2, &(rlx_attention_opts){.num_kv_heads = 3}), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, &(rlx_attention_opts){.num_kv_heads = -1}), RLX_E_ARG, fn);
    /* k, v not [B, Sk, Hkv*D] */
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, NULL), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_attention_ex(q, k, rlx_ones(RLX_F32, 3, sq), 4, 2, &o), RLX_E_SHAPE, fn);
    /* positional mask kind, window, scale */
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, &(rlx_attention_opts){2, (rlx_mask)7, 0, NULL, 0}), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, &(rlx_attention_opts){2, RLX_MASK_SLIDING, 0, NULL, 0}), RLX_E_ARG,
                   fn);
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, &(rlx_attention_opts){2, RLX_MASK_NONE, 0, NULL, NAN}), RLX_E_ARG,
                   fn);
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, &(rlx_attention_opts){2, RLX_MASK_NONE, 0, NULL, INFINITY}),
                   RLX_E_ARG, fn);
    /* mask tensors: shapes that do not broadcast, integer dtypes, rank 5 */
    o.attn_mask = rlx_ones(RLX_BOOL, 2, s2);
    CHECK(rlx_attention_ex(q, k, k, 4, 2, &o) != NULL);
    o.attn_mask = rlx_ones(RLX_F64, 4, s4);
    CHECK(rlx_attention_ex(q, k, k, 4, 2, &o) != NULL);
    o.attn_mask = rlx_ones(RLX_BOOL, 2, (int64_t[]){3, 4});
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, &o), RLX_E_SHAPE, fn);
    o.attn_mask = rlx_ones(RLX_BOOL, 4, (int64_t[]){2, 2, 3, 5}); /* heads of the mask are query heads, not kv */
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, &o), RLX_E_SHAPE, fn);
    o.attn_mask = rlx_ones(RLX_BOOL, 4, (int64_t[]){3, 1, 1, 5});
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, &o), RLX_E_SHAPE, fn);
    o.attn_mask = rlx_ones(RLX_BOOL, 5, (int64_t[]){1, 2, 4, 3, 5});
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, &o), RLX_E_SHAPE, fn);
    o.attn_mask = rlx_ones(RLX_I32, 2, s2);
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, &o), RLX_E_DTYPE, fn);
    o.attn_mask = rlx_ones(RLX_I64, 2, s2);
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, &o), RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_attention_ex(rlx_ones(RLX_BOOL, 3, sq), k, k, 4, 2, &o), RLX_E_DTYPE, fn);
    /* extremes */
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, 4, 2, &(rlx_attention_opts){.num_kv_heads = INT32_MIN}), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_attention_ex(q, k, k, INT32_MAX, INT32_MAX, NULL), RLX_E_SHAPE, fn);
    /* NULL propagates and keeps the first error */
    rlx_clear_error();
    CHECK(rlx_reshape(q, 1, (int64_t[]){5}) == NULL);
    CHECK(rlx_attention_ex(NULL, k, k, 4, 2, NULL) == NULL);
    CHECK(strstr(rlx_last_error(), "rlx_reshape") != NULL);
    rlx_clear_error();
}

/* ----------------------------------------------------------------- rope */

/* Rope in double: x [B, S, H*D], tables c, s [rows, R/2]; token (b, t) at
 * position pos[b*S + t] (or pos[t] when pos_b is false). */
static void ref_rope(const double *x, int64_t B, int64_t S, int64_t H, int64_t D, int64_t R, bool interleaved,
                     const double *c, const double *s, const int64_t *pos, bool pos_b, double *out)
{
    int64_t half = R / 2;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < S; t++) {
            int64_t p = pos[pos_b ? b * S + t : t];
            for (int64_t h = 0; h < H; h++) {
                const double *xi = x + ((b * S + t) * H + h) * D;
                double *yo = out + ((b * S + t) * H + h) * D;
                memcpy(yo, xi, (size_t)D * sizeof *yo);
                for (int64_t i = 0; i < half; i++) {
                    int64_t ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + half;
                    double cc = c[p * half + i], ss = s[p * half + i];
                    yo[ia] = xi[ia] * cc - xi[ib] * ss;
                    yo[ib] = xi[ib] * cc + xi[ia] * ss;
                }
            }
        }
}

/* Tables of rows positions for rotary dim R (base 10000). */
static void rope_tables(int64_t rows, int64_t R, double *c, double *s)
{
    for (int64_t p = 0; p < rows; p++)
        for (int64_t i = 0; i < R / 2; i++) {
            double ang = (double)p / pow(10000, 2.0 * (double)i / (double)R);
            c[p * (R / 2) + i] = cos(ang);
            s[p * (R / 2) + i] = sin(ang);
        }
}

TEST(rope_ex_layouts_offsets_positions)
{
    enum { B = 2, S = 3, H = 2, D = 8, ROWS = 10 };
    static const rlx_dtype dts[2] = {RLX_F64, RLX_F32};
    for (int t = 0; t < 2; t++)
        for (int inter = 0; inter < 2; inter++)
            for (int rdim = 2; rdim <= D; rdim += 2)
                for (int how = 0; how < 4; how++) { /* offset 0, offset 5, positions [S], positions [B, S] */
                    rlx_scope_begin();
                    int64_t R = rdim, sx[3] = {B, S, H * D}, st[2] = {ROWS, R / 2};
                    double x[B * S * H * D], c[ROWS * D / 2], s[ROWS * D / 2], want[B * S * H * D];
                    int64_t pos[B * S];
                    for (int i = 0; i < B * S * H * D; i++)
                        x[i] = test_uniform(-1, 1);
                    rope_tables(ROWS, R, c, s);
                    rlx_rope_opts o = {.rotary_dim = rdim == D && how == 0 ? 0 : rdim, .interleaved = inter};
                    for (int i = 0; i < B * S; i++)
                        pos[i] = how == 1 ? 5 + i % S : how == 3 ? (i * 7 + 3) % ROWS : how == 2 ? 9 - i : i % S;
                    if (how == 1)
                        o.offset = 5;
                    if (how >= 2)
                        o.positions = how == 2 ? ti64(1, (int64_t[]){S}, pos)
                                               : rlx_cast(ti64(2, (int64_t[]){B, S}, pos), RLX_I32);
                    rlx_tensor *tx = test_tensor(dts[t], 3, sx, x), *tc = test_tensor(dts[t], 2, st, c);
                    rlx_tensor *ts = test_tensor(dts[t], 2, st, s);
                    ref_rope(x, B, S, H, D, R, inter, c, s, pos, how == 3, want);
                    char what[80];
                    snprintf(what, sizeof what, "rope %s interleaved %d rotary %d how %d", rlx_dtype_name(dts[t]),
                             inter, rdim, how);
                    double tol = t ? 1e-6 : 1e-14;
                    EACH_BACKEND(b) EXPECT_V(what, rlx_rope_ex(tx, tc, ts, D, &o), dts[t], 3, sx, want, tol, tol);
                    rlx_scope_end();
                }
}

/* The default options are rlx_rope; a strided x (a narrow of a fused
 * projection) reads right. */
TEST(rope_ex_defaults_and_views)
{
    int64_t sx[3] = {2, 4, 8}, sf[3] = {2, 4, 24}, st[2] = {4, 2}, sl[2] = {9, 2};
    rlx_tensor *x = trand(RLX_F32, 3, sx, -1, 1), *c = trand(RLX_F32, 2, st, -1, 1), *s = trand(RLX_F32, 2, st, -1, 1);
    EXPECT_SAME(rlx_rope_ex(x, c, s, 4, NULL), rlx_rope(x, c, s, 4), 0);
    rlx_rope_opts zero = {0};
    EXPECT_SAME(rlx_rope_ex(x, c, s, 4, &zero), rlx_rope(x, c, s, 4), 0);
    /* a longer table: its first S rows */
    rlx_tensor *cl = trand(RLX_F32, 2, sl, -1, 1), *sn = trand(RLX_F32, 2, sl, -1, 1);
    EXPECT_SAME(rlx_rope_ex(x, cl, sn, 4, NULL), rlx_rope(x, rlx_narrow(cl, 0, 0, 4), rlx_narrow(sn, 0, 0, 4), 4), 0);
    rlx_tensor *f = trand(RLX_F64, 3, sf, -1, 1), *xv = rlx_narrow(f, 2, 8, 8);
    rlx_rope_opts gptj = {.interleaved = true, .rotary_dim = 4};
    EACH_BACKEND(b)
    EXPECT_SAME(rlx_rope_ex(xv, cl, sn, 8, &gptj), rlx_rope_ex(rlx_contiguous(xv), cl, sn, 8, &gptj), 1e-15);
}

/* A sequence rotated in one call equals the same tokens rotated one at a
 * time, with offsets and with position tensors. */
TEST(rope_ex_decoding_matches_prefill)
{
    enum { S = 6, ROWS = 8 };
    int64_t sx[3] = {1, S, 12}, st[2] = {ROWS, 2};
    double c[ROWS * 3], s[ROWS * 3];
    rope_tables(ROWS, 4, c, s);
    rlx_tensor *x = trand(RLX_F64, 3, sx, -1, 1), *tc = tf64(2, st, c), *ts = tf64(2, st, s);
    for (int inter = 0; inter < 2; inter++) {
        rlx_rope_opts o = {.rotary_dim = 4, .interleaved = inter};
        rlx_tensor *all = rlx_rope_ex(x, tc, ts, 6, &o);
        EACH_BACKEND(b)
        for (int t = 0; t < S; t++) {
            rlx_tensor *tok = rlx_narrow(x, 1, t, 1);
            rlx_rope_opts at = o, byp = o;
            at.offset = t;
            int32_t p = t;
            byp.positions = ti32(1, (int64_t[]){1}, &p);
            EXPECT_SAME(rlx_rope_ex(tok, tc, ts, 6, &at), rlx_narrow(all, 1, t, 1), 1e-15);
            EXPECT_SAME(rlx_rope_ex(tok, tc, ts, 6, &byp), rlx_narrow(all, 1, t, 1), 1e-15);
        }
    }
}

/* One compiled program serves every decoding step: the position is an
 * input. */
TEST(rope_ex_positions_in_a_program)
{
    int64_t sx[3] = {1, 1, 4}, st[2] = {5, 2}, one[1] = {1};
    double c[10], s[10];
    rope_tables(5, 4, c, s);
    rlx_tensor *tc = tf64(2, st, c), *ts = tf64(2, st, s);
    rlx_tensor *x = rlx_input("x", RLX_F64, 3, sx), *pos = rlx_input("pos", RLX_I64, 1, one);
    rlx_rope_opts o = {.positions = pos};
    rlx_tensor *y = rlx_rope_ex(x, tc, ts, 4, &o);
    rlx_program *p = rlx_compile(&y, 1);
    CHECK(p != NULL);
    double xv[4] = {0.5, -1, 2, 0.25};
    rlx_tensor *bx = tf64(3, sx, xv);
    for (int64_t t = 0; p && t < 5; t++) {
        rlx_binding bind[2] = {{"x", bx}, {"pos", ti64(1, one, &t)}};
        rlx_tensor *out = NULL;
        CHECK_EQ_INT(rlx_program_run(p, bind, 2, &out), RLX_OK);
        double want[4];
        ref_rope(xv, 1, 1, 1, 4, 4, false, c, s, &t, false, want);
        EXPECT(out, RLX_F64, 3, sx, want, 1e-15);
    }
    /* out of the table: an error at run, never a wrong value */
    int64_t bad = 5;
    rlx_binding bind[2] = {{"x", bx}, {"pos", ti64(1, one, &bad)}};
    rlx_tensor *out = NULL;
    if (p)
        CHECK(rlx_program_run(p, bind, 2, &out) != RLX_OK && out == NULL);
    rlx_clear_error();
    rlx_program_free(p);
}

TEST(rope_ex_bad_arguments)
{
    const char *fn = "rlx_rope_ex";
    int64_t sx[3] = {2, 3, 8}, st[2] = {5, 2}, s1[1] = {3}, s2[2] = {2, 3};
    rlx_tensor *x = rlx_ones(RLX_F32, 3, sx), *c = rlx_ones(RLX_F32, 2, st);
    rlx_rope_opts o = {.rotary_dim = 4};
    CHECK(rlx_rope_ex(x, c, c, 8, &o) != NULL);
    CHECK_NULL_ERR(rlx_rope_ex(NULL, c, c, 8, &o), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, NULL, c, 8, &o), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, NULL, 8, &o), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 3, &o), RLX_E_ARG, fn);
    /* rotary_dim odd, too large, negative */
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = 3}), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = 10}), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = -2}), RLX_E_ARG, fn);
    /* tables: not [S_max, R/2], different shapes, too short for offset + S */
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8, NULL), RLX_E_SHAPE, fn); /* R = 8 needs 4 columns */
    CHECK_NULL_ERR(rlx_rope_ex(x, c, rlx_ones(RLX_F32, 2, (int64_t[]){4, 2}), 8, &o), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, rlx_ones(RLX_F32, 1, (int64_t[]){10}), c, 8, &o), RLX_E_SHAPE, fn);
    CHECK(rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = 4, .offset = 2}) != NULL);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = 4, .offset = 3}), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = 4, .offset = -1}), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = 4, .offset = INT64_MAX}), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = INT32_MIN}), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, INT32_MAX, &o), RLX_E_ARG, fn);
    /* positions: dtype, shape, with an offset */
    int64_t pv[6] = {0, 1, 2, 0, 1, 2};
    CHECK(rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = 4, .positions = ti64(2, s2, pv)}) != NULL);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = 4, .positions = rlx_ones(RLX_F32, 1, s1)}),
                   RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = 4, .positions = rlx_ones(RLX_BOOL, 1, s1)}),
                   RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = 4, .positions = ti64(1, (int64_t[]){2}, pv)}),
                   RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8,
                               &(rlx_rope_opts){.rotary_dim = 4, .positions = ti64(2, (int64_t[]){3, 2}, pv)}),
                   RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_rope_ex(x, c, c, 8,
                               &(rlx_rope_opts){.rotary_dim = 4, .offset = 1, .positions = ti64(1, s1, pv)}),
                   RLX_E_ARG, fn);
    /* positions outside the table: an error at realize, never a wrong value */
    const int64_t past[3] = {0, 5, 1}, neg[3] = {0, -1, 1};
    EACH_BACKEND(b)
    {
        rlx_tensor *y = rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = 4, .positions = ti64(1, s1, past)});
        CHECK(y != NULL);
        CHECK_EQ_INT(rlx_realize(y), RLX_E_ARG);
        rlx_clear_error();
        y = rlx_rope_ex(x, c, c, 8, &(rlx_rope_opts){.rotary_dim = 4, .positions = ti64(1, s1, neg)});
        CHECK(y != NULL);
        CHECK_EQ_INT(rlx_realize(y), RLX_E_ARG);
        rlx_clear_error();
    }
}

static const rlx_dtype NARROW_FLOATS[2] = {RLX_BF16, RLX_F16};

static rlx_tensor *nf_attention(rlx_tensor *const *in) { return rlx_attention(in[0], in[1], in[2], 2, 4, RLX_MASK_CAUSAL, 0); }
static rlx_tensor *nf_attention_mask(rlx_tensor *const *in)
{
    rlx_attention_opts o = {0};
    o.attn_mask = in[3]; /* additive, of the operands' dtype */
    return rlx_attention_ex(in[0], in[1], in[2], 2, 4, &o);
}

/* Attention on f16/bf16 (q, k, v and an additive mask of that dtype):
 * computed in f32 and rounded once. */
TEST(attention_narrow_floats_match_f32)
{
    const int64_t q[3] = {2, 5, 8}, kv[3] = {2, 6, 8}, m[4] = {1, 2, 5, 6};
    for (int i = 0; i < 2; i++) {
        EXPECT_NARROW(nf_attention, NARROW_FLOATS[i], 3, ((int[]){3, 3, 3}), ((const int64_t *const[]){q, kv, kv}),
                      -2, 2, 1);
        EXPECT_NARROW(nf_attention_mask, NARROW_FLOATS[i], 4, ((int[]){3, 3, 3, 4}),
                      ((const int64_t *const[]){q, kv, kv, m}), -2, 2, 1);
    }
}


static rlx_tensor *nf_rope(rlx_tensor *const *in) { return rlx_rope(in[0], in[1], in[2], 4); }

/* rope on f16/bf16 x and tables: computed in f32, rounded once. */
TEST(rope_narrow_floats_match_f32)
{
    const int64_t x[3] = {2, 3, 8}, t[2] = {3, 2};
    const rlx_dtype dts[2] = {RLX_BF16, RLX_F16};
    for (int i = 0; i < 2; i++)
        EXPECT_NARROW(nf_rope, dts[i], 3, ((int[]){3, 2, 2}), ((const int64_t *const[]){x, t, t}), -1, 1, 1);
}

TEST_MAIN(T(attention_ex_defaults_are_plain_attention), T(attention_ex_additive_mask_by_hand),
          T(attention_ex_causal_bottom_right), T(attention_ex_grouped_kv_heads), T(attention_ex_mask_shapes),
          T(attention_ex_masks_across_blocks), T(attention_ex_padding_skips_blocks),
          T(attention_ex_grouped_gradient_is_repeated_heads), T(attention_ex_allocation_failures),
          T(attention_ex_bad_arguments), T(rope_ex_layouts_offsets_positions), T(rope_ex_defaults_and_views),
          T(rope_ex_decoding_matches_prefill), T(rope_ex_positions_in_a_program), T(rope_ex_bad_arguments),
          T(attention_narrow_floats_match_f32), T(rope_narrow_floats_match_f32))
