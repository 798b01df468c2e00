/*
 * test_attention_kv.c — rlx_attention_kv (attention over keys and values
 * given in two pieces, the past rows and new ones, read in place): values
 * against attention written as plain double loops over the concatenated
 * rows, on both backends, f32 and f64, random shapes (empty pieces, one
 * row, grouped kv heads, every positional mask, bool and additive mask
 * tensors broadcast over the scores), the past a view of the first rows
 * of a larger cache buffer (as a decoder binds it); a compiled program
 * over a dynamic past length at many lengths; gradients of all five
 * inputs against central differences; every documented error.
 */
#include "harness.h"

typedef struct {
    int64_t B, sq, l, sn, cap; /* cap >= l: the past is rows [0, l) of a [B, cap, Hkv*D] buffer */
    int h, hk, d;
    rlx_mask kind;
    int window;
    int mrank; /* -1: no mask tensor; else broadcast from the right to [B, H, Sq, L + Sn] */
    int64_t mshape[4];
    bool additive;
} kvcase;

/* Attention in double over keys k [B, Sk, Hkv*D] (Sk = l + sn, already
 * concatenated here), the mask m read through its broadcast. */
static void ref_attention(const kvcase *c, const double *q, const double *k, const double *v, const double *m,
                          double *out)
{
    int64_t sk = c->l + c->sn, ms[4] = {1, 1, 1, 1};
    for (int i = 0; i < c->mrank; i++)
        ms[4 - c->mrank + i] = c->mshape[i];
    int64_t hd = (int64_t)c->h * c->d, kd = (int64_t)c->hk * c->d, g = c->h / c->hk;
    double scale = 1 / sqrt((double)c->d), *sc = malloc((size_t)(sk ? sk : 1) * sizeof *sc);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t hh = 0; hh < c->h; hh++)
            for (int64_t i = 0; i < c->sq; i++) {
                int64_t pos = sk - c->sq + i, kh = hh / g;
                double mx = -INFINITY, den = 0;
                for (int64_t j = 0; j < sk; j++) {
                    bool vis = c->kind == RLX_MASK_NONE     ? true
                               : c->kind == RLX_MASK_CAUSAL ? j <= pos
                                                            : j <= pos && j > pos - c->window;
                    double s = 0;
                    for (int e = 0; e < c->d; e++)
                        s += q[(b * c->sq + i) * hd + hh * c->d + e] * k[(b * sk + j) * kd + kh * c->d + e];
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
                for (int64_t j = 0; j < sk; j++) {
                    sc[j] = sc[j] == -INFINITY ? 0 : exp(sc[j] - mx);
                    den += sc[j];
                }
                for (int e = 0; e < c->d; e++) {
                    double o = 0;
                    for (int64_t j = 0; j < sk; j++)
                        o += den > 0 ? sc[j] / den * v[(b * sk + j) * kd + kh * c->d + e] : 0;
                    out[(b * c->sq + i) * hd + hh * c->d + e] = o;
                }
            }
    free(sc);
}

static double *rnd(int64_t n, double lo, double hi)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = test_uniform(lo, hi);
    return v;
}

/* The past piece: rows [0, l) of a [B, cap, kd] tensor of random values
 * (a view when cap > l); past[] gets those rows as dt stores them, packed
 * [B, l, kd], at rows [0, l) of each batch of all[] ([B, l + sn, kd]). */
static rlx_tensor *past_piece(const kvcase *c, rlx_dtype dt, double *all)
{
    int64_t kd = (int64_t)c->hk * c->d, sk = c->l + c->sn, bs[3] = {c->B, c->cap, kd};
    double *buf = rnd(c->B * c->cap * kd, -2, 2);
    rlx_tensor *t = test_tensor(dt, 3, bs, buf);
    for (int64_t b = 0; b < c->B; b++)
        memcpy(all + b * sk * kd, buf + b * c->cap * kd, (size_t)(c->l * kd) * sizeof *all);
    free(buf);
    return c->cap > c->l ? rlx_narrow(t, 1, 0, c->l) : t;
}

/* The new piece [B, sn, kd], its values at rows [l, l + sn) of all[]. */
static rlx_tensor *new_piece(const kvcase *c, rlx_dtype dt, double *all)
{
    int64_t kd = (int64_t)c->hk * c->d, sk = c->l + c->sn, ns[3] = {c->B, c->sn, kd};
    double *x = rnd(c->B * c->sn * kd, -2, 2);
    rlx_tensor *t = test_tensor(dt, 3, ns, x);
    for (int64_t b = 0; b < c->B; b++)
        memcpy(all + (b * sk + c->l) * kd, x + b * c->sn * kd, (size_t)(c->sn * kd) * sizeof *all);
    free(x);
    return t;
}

static void check_case(const kvcase *c, rlx_dtype dt)
{
    rlx_scope_begin();
    int64_t hd = (int64_t)c->h * c->d, kd = (int64_t)c->hk * c->d, sk = c->l + c->sn;
    int64_t sq3[3] = {c->B, c->sq, hd};
    double *q = rnd(c->B * c->sq * hd, -2, 2);
    double *k = malloc((size_t)(c->B * sk * kd + 1) * sizeof *k), *v = malloc((size_t)(c->B * sk * kd + 1) * sizeof *v);
    rlx_tensor *tq = test_tensor(dt, 3, sq3, q);
    rlx_tensor *tk = past_piece(c, dt, k), *tv = past_piece(c, dt, v);
    rlx_tensor *tk2 = new_piece(c, dt, k), *tv2 = new_piece(c, dt, v);
    double *m = NULL;
    rlx_tensor *tm = NULL;
    if (c->mrank >= 0) {
        int64_t n = test_numel(c->mrank, c->mshape);
        m = malloc((size_t)(n ? n : 1) * sizeof *m);
        for (int64_t i = 0; i < n; i++) {
            double u = test_uniform(0, 1);
            m[i] = c->additive ? (u < 0.2 ? -INFINITY : test_uniform(-2, 2)) : u < 0.6;
        }
        tm = test_tensor(c->additive ? dt : RLX_BOOL, c->mrank, c->mshape, m);
    }
    double *want = malloc((size_t)(c->B * c->sq * hd + 1) * sizeof *want);
    ref_attention(c, q, k, v, m, want);
    rlx_attention_opts o = {c->hk, c->kind, c->window, tm, 0};
    char what[200];
    snprintf(what, sizeof what, "B%lld Sq%lld L%lld (of %lld) Sn%lld H%d Hkv%d D%d kind %d window %d mask %s %s %s",
             (long long)c->B, (long long)c->sq, (long long)c->l, (long long)c->cap, (long long)c->sn, c->h, c->hk,
             c->d, (int)c->kind, c->window, c->mrank < 0 ? "-" : test_dims(c->mrank, c->mshape),
             c->additive ? "additive" : "bool", rlx_dtype_name(dt));
    double tol = dt == RLX_F32 ? 2e-5 : 1e-12;
    EACH_BACKEND(b)
    EXPECT_V(what, rlx_attention_kv(tq, tk, tv, tk2, tv2, c->h, c->d, &o), dt, 3, sq3, want, tol, tol);
    free(q);
    free(k);
    free(v);
    free(m);
    free(want);
    rlx_scope_end();
}

static int64_t pick(const int64_t *from, int n) { return from[(int)test_uniform(0, n)]; }

/* Random cases: key pieces that fall inside, across and exactly at the
 * kernel's key blocks (80-256 rows), empty pieces, one query or several. */
TEST(attention_kv_random_cases)
{
    static const int64_t lens[] = {0, 1, 2, 7, 31, 79, 80, 81, 200, 257}, news[] = {0, 1, 1, 1, 2, 5};
    static const int hks[][2] = {{1, 1}, {2, 2}, {4, 2}, {6, 6}, {3, 1}};
    for (int it = 0; it < 40; it++) {
        kvcase c = {0};
        c.B = it % 5 == 4 ? 2 : 1;
        c.l = pick(lens, 10);
        c.sn = pick(news, 6);
        c.sq = it % 3 == 0 && c.l + c.sn > 0 ? 1 + (int64_t)test_uniform(0, (double)(c.l + c.sn < 70 ? c.l + c.sn : 70))
                                            : 1;
        c.cap = c.l + (it % 2 ? (int64_t)test_uniform(1, 40) : 0);
        const int *hk = hks[it % 5];
        c.h = hk[0];
        c.hk = hk[1];
        c.d = it % 4 == 0 ? 16 : it % 4 == 1 ? 8 : it % 4 == 2 ? 48 : 4;
        c.kind = (rlx_mask)(it % 3);
        c.window = c.kind == RLX_MASK_SLIDING ? 1 + (int)test_uniform(0, 20) : 0;
        int64_t full[4] = {c.B, c.h, c.sq, c.l + c.sn};
        c.mrank = it % 4 == 3 ? -1 : 1 + it % 4;
        for (int i = 0; i < c.mrank; i++) { /* each dim full or broadcast */
            int64_t f = full[4 - c.mrank + i];
            c.mshape[i] = test_uniform(0, 1) < 0.5 ? f : 1;
        }
        c.additive = it % 7 == 2;
        check_case(&c, it % 2 ? RLX_F32 : RLX_F64);
    }
}

/* The decoder's shape: one query, the past masked by a [1, 1, 1, L + 1]
 * bool row, 6 heads of 48, both dtypes. */
TEST(attention_kv_decode_shape)
{
    for (int64_t l = 0; l < 140; l += 23) {
        kvcase c = {.B = 1, .sq = 1, .l = l, .sn = 1, .cap = 256, .h = 6, .hk = 6, .d = 48, .kind = RLX_MASK_CAUSAL,
                    .mrank = 4, .mshape = {1, 1, 1, l + 1}};
        check_case(&c, RLX_F32);
        check_case(&c, RLX_F64);
    }
}

/* f32 query rows that run alone (one query; 65 queries: the last block of
 * 64 holds one) take the kernel's in-place row products: head sizes with
 * whole 16-lane vectors and a partial one (20, 40), or only a partial one
 * (7), keys across blocks and pieces, grouped kv heads, every positional
 * mask, a bool mask tensor. */
TEST(attention_kv_one_row_head_sizes)
{
    static const int ds[] = {20, 40, 7};
    static const int64_t lens[] = {0, 1, 79, 100, 257};
    for (int di = 0; di < 3; di++)
        for (int li = 0; li < 5; li++)
            for (int kind = 0; kind < 3; kind++) {
                int64_t l = lens[li], sq = li % 2 && l + 1 >= 65 ? 65 : 1;
                kvcase c = {.B = 1, .sq = sq, .l = l, .sn = 1, .cap = l + 3, .h = 4, .hk = 2, .d = ds[di],
                            .kind = (rlx_mask)kind, .window = kind == RLX_MASK_SLIDING ? 50 : 0, .mrank = 4,
                            .mshape = {1, 1, sq, l + 1}};
                check_case(&c, RLX_F32);
            }
}

/* A realized f64 tensor of random values in [-2, 2). */
static rlx_tensor *data(int rank, const int64_t *shape)
{
    double *x = rnd(test_numel(rank, shape), -2, 2);
    rlx_tensor *t = tf64(rank, shape, x);
    free(x);
    return t;
}

/* A program over a dynamic past length (a named symbol shared by k and
 * v): one compile serves every length, 0 and 1 included, with the values
 * of rlx_attention_ex over the concatenated rows on the reference backend. */
TEST(attention_kv_program_over_dynamic_length)
{
    const int h = 2, d = 8, kd = h * d;
    int64_t qs[3] = {1, 1, kd}, ps[3] = {1, -2, kd};
    rlx_tensor *q = rlx_input("q", RLX_F64, 3, qs), *k = rlx_input("k", RLX_F64, 3, ps),
               *v = rlx_input("v", RLX_F64, 3, ps), *kn = rlx_input("kn", RLX_F64, 3, qs),
               *vn = rlx_input("vn", RLX_F64, 3, qs);
    rlx_attention_opts o = {.mask = RLX_MASK_CAUSAL};
    rlx_tensor *y = rlx_attention_kv(q, k, v, kn, vn, h, d, &o);
    CHECK(y != NULL);
    rlx_program *p = y ? rlx_compile(&y, 1) : NULL;
    CHECK(p != NULL);
    rlx_stats_t s0, s1;
    static const int64_t lens[] = {0, 1, 2, 5, 80, 81, 3, 1, 0, 300};
    for (int i = 0; p && i < 10; i++) {
        int64_t ls[3] = {1, lens[i], kd};
        /* (data tensors: realizing them compiles nothing) */
        rlx_tensor *tq = data(3, qs), *tk = data(3, ls), *tv = data(3, ls), *tkn = data(3, qs), *tvn = data(3, qs);
        rlx_binding bind[5] = {{"q", tq}, {"k", tk}, {"v", tv}, {"kn", tkn}, {"vn", tvn}};
        rlx_tensor *out = NULL, *want = NULL;
        if (i == 1)
            rlx_stats(&s0);
        CHECK_EQ_INT(rlx_program_run(p, bind, 5, &out), RLX_OK);
        rlx_tensor *ks[2] = {tk, tkn}, *vs[2] = {tv, tvn};
        EACH_BACKEND(b)
        {
            if (b == 0) { /* the reference evaluator, on the concatenated rows */
                want = rlx_attention_ex(tq, rlx_cat(ks, 2, 1), rlx_cat(vs, 2, 1), h, d, &o);
                CHECK_EQ_INT(rlx_realize(want), RLX_OK);
            }
        }
        if (out && want)
            EXPECT_SAME(out, want, 1e-12);
    }
    rlx_stats(&s1);
    CHECK_EQ_INT(s1.kernels_compiled - s0.kernels_compiled, 0);
    rlx_program_free(p);
}

/* sum(w * attention_kv(...)) differentiated with respect to all five
 * inputs and the additive mask, against central differences (f64). */
TEST(attention_kv_gradients_match_differences)
{
    const int h = 2, hk = 1, d = 3;
    const int64_t B = 1, sq = 2, l = 3, sn = 2, hd = h * d, kd = hk * d;
    int64_t qs[3] = {B, sq, hd}, ls[3] = {B, l, kd}, ns[3] = {B, sn, kd}, ms[2] = {sq, l + sn};
    rlx_tensor *x[6] = {trand(RLX_F64, 3, qs, -1, 1), trand(RLX_F64, 3, ls, -1, 1), trand(RLX_F64, 3, ls, -1, 1),
                        trand(RLX_F64, 3, ns, -1, 1), trand(RLX_F64, 3, ns, -1, 1), trand(RLX_F64, 2, ms, -1, 1)};
    rlx_tensor *w = trand(RLX_F64, 3, qs, -1, 1);
    EACH_BACKEND(b)
    {
        rlx_attention_opts o = {.num_kv_heads = hk, .mask = RLX_MASK_CAUSAL, .attn_mask = x[5]};
        rlx_tensor *loss = rlx_sum(rlx_mul(w, rlx_attention_kv(x[0], x[1], x[2], x[3], x[4], h, d, &o)), NULL, 0, false);
        rlx_tensor *g[6] = {NULL};
        CHECK_EQ_INT(rlx_grad(loss, x, 6, g), RLX_OK);
        for (int i = 0; i < 6 && g[0]; i++) {
            int64_t n = 0, ng = 0;
            double *xv = test_values(x[i], &n), *gv = test_values(g[i], &ng);
            CHECK_EQ_INT(ng, n);
            for (int64_t e = 0; e < n && gv; e++) {
                double f[2], eps = 1e-6;
                for (int sgn = 0; sgn < 2; sgn++) {
                    double *xp = malloc((size_t)n * sizeof *xp);
                    memcpy(xp, xv, (size_t)n * sizeof *xp);
                    xp[e] += sgn ? -eps : eps;
                    int rank = rlx_rank(x[i]);
                    int64_t shp[4];
                    for (int a = 0; a < rank; a++)
                        shp[a] = rlx_dim(x[i], a);
                    rlx_tensor *xs[6];
                    memcpy(xs, x, sizeof xs);
                    xs[i] = tf64(rank, shp, xp);
                    rlx_attention_opts op = o;
                    op.attn_mask = xs[5];
                    rlx_tensor *lf = rlx_sum(rlx_mul(w, rlx_attention_kv(xs[0], xs[1], xs[2], xs[3], xs[4], h, d, &op)),
                                             NULL, 0, false);
                    int64_t one = 0;
                    double *lv = test_values(lf, &one);
                    f[sgn] = lv ? lv[0] : NAN;
                    free(lv);
                    free(xp);
                }
                CHECK_NEAR(gv[e], (f[0] - f[1]) / (2 * eps), 1e-6);
            }
            free(xv);
            free(gv);
        }
    }
}

/* The gradient program over a dynamic past length: the gradients of all
 * five inputs at lengths 0, 1, 2, 9, from one compile, equal those of
 * rlx_attention_ex over the concatenated rows on the reference backend. */
TEST(attention_kv_gradient_program_over_dynamic_length)
{
    const int h = 2, hk = 1, d = 4;
    int64_t qs[3] = {1, 2, h * d}, ps[3] = {1, -2, hk * d}, ns[3] = {1, 2, hk * d};
    rlx_tensor *x[5] = {rlx_input("q", RLX_F64, 3, qs), rlx_input("k", RLX_F64, 3, ps), rlx_input("v", RLX_F64, 3, ps),
                        rlx_input("kn", RLX_F64, 3, ns), rlx_input("vn", RLX_F64, 3, ns)};
    rlx_tensor *w = rlx_input("w", RLX_F64, 3, qs);
    rlx_attention_opts o = {.num_kv_heads = hk, .mask = RLX_MASK_CAUSAL};
    rlx_tensor *loss = rlx_sum(rlx_mul(w, rlx_attention_kv(x[0], x[1], x[2], x[3], x[4], h, d, &o)), NULL, 0, false);
    rlx_tensor *g[5] = {NULL};
    CHECK_EQ_INT(rlx_grad(loss, x, 5, g), RLX_OK);
    rlx_program *p = g[0] ? rlx_compile(g, 5) : NULL;
    CHECK(p != NULL);
    static const int64_t lens[] = {0, 1, 2, 9};
    static const char *names[5] = {"q", "k", "v", "kn", "vn"};
    for (int i = 0; p && i < 4; i++) {
        int64_t ls[3] = {1, lens[i], hk * d};
        rlx_tensor *v[5] = {data(3, qs), data(3, ls), data(3, ls), data(3, ns), data(3, ns)}, *tw = data(3, qs);
        rlx_binding bind[6] = {{"w", tw}};
        for (int j = 0; j < 5; j++)
            bind[1 + j] = (rlx_binding){names[j], v[j]};
        rlx_tensor *out[5] = {NULL}, *want[5] = {NULL};
        CHECK_EQ_INT(rlx_program_run(p, bind, 6, out), RLX_OK);
        EACH_BACKEND(b)
        {
            if (b)
                continue; /* the reference evaluator, over the concatenated rows */
            rlx_tensor *ks[2] = {v[1], v[3]}, *vs[2] = {v[2], v[4]}, *kc = rlx_cat(ks, 2, 1), *vc = rlx_cat(vs, 2, 1);
            rlx_tensor *l = rlx_sum(rlx_mul(tw, rlx_attention_ex(v[0], kc, vc, h, d, &o)), NULL, 0, false);
            rlx_tensor *wrt[3] = {v[0], kc, vc}, *gw[3] = {NULL};
            CHECK_EQ_INT(rlx_grad(l, wrt, 3, gw), RLX_OK);
            if (gw[0]) {
                want[0] = gw[0];
                want[1] = rlx_narrow(gw[1], 1, 0, lens[i]);
                want[2] = rlx_narrow(gw[2], 1, 0, lens[i]);
                want[3] = rlx_narrow(gw[1], 1, lens[i], 2);
                want[4] = rlx_narrow(gw[2], 1, lens[i], 2);
                for (int j = 0; j < 5; j++)
                    CHECK_EQ_INT(rlx_realize(want[j]), RLX_OK);
            }
        }
        for (int j = 0; j < 5; j++)
            if (out[j] && want[j])
                EXPECT_SAME(out[j], want[j], 1e-12);
    }
    rlx_program_free(p);
}

TEST(attention_kv_bad_arguments)
{
    int64_t qs[3] = {1, 2, 8}, ks[3] = {1, 3, 8}, ns[3] = {1, 1, 8}, bad[3] = {1, 1, 4}, bb[3] = {2, 1, 8};
    rlx_tensor *q = rlx_zeros(RLX_F32, 3, qs), *k = rlx_zeros(RLX_F32, 3, ks), *kn = rlx_zeros(RLX_F32, 3, ns);
    CHECK_NULL_ERR(rlx_attention_kv(NULL, k, k, kn, kn, 2, 4, NULL), RLX_E_ARG, "rlx_attention_kv");
    CHECK_NULL_ERR(rlx_attention_kv(q, k, k, NULL, kn, 2, 4, NULL), RLX_E_ARG, "rlx_attention_kv");
    CHECK_NULL_ERR(rlx_attention_kv(q, k, k, kn, NULL, 2, 4, NULL), RLX_E_ARG, "rlx_attention_kv");
    CHECK_NULL_ERR(rlx_attention_kv(q, k, k, rlx_zeros(RLX_F32, 3, bad), kn, 2, 4, NULL), RLX_E_SHAPE,
                   "rlx_attention_kv");
    CHECK_NULL_ERR(rlx_attention_kv(q, k, k, kn, rlx_zeros(RLX_F32, 3, bb), 2, 4, NULL), RLX_E_SHAPE,
                   "rlx_attention_kv");
    CHECK_NULL_ERR(rlx_attention_kv(q, k, k, kn, rlx_zeros(RLX_F32, 3, ks), 2, 4, NULL), RLX_E_SHAPE,
                   "rlx_attention_kv");
    CHECK_NULL_ERR(rlx_attention_kv(q, k, k, kn, kn, 0, 4, NULL), RLX_E_ARG, "rlx_attention_kv");
    CHECK_NULL_ERR(rlx_attention_kv(q, k, k, kn, kn, 3, 4, &(rlx_attention_opts){.num_kv_heads = 2}), RLX_E_SHAPE,
                   "rlx_attention_kv");
    CHECK_NULL_ERR(rlx_attention_kv(q, k, k, rlx_zeros(RLX_BOOL, 3, ns), kn, 2, 4, NULL), RLX_E_DTYPE,
                   "rlx_attention_kv");
    CHECK_NULL_ERR(rlx_attention_kv(q, k, k, kn, kn, 2, 4, &(rlx_attention_opts){.mask = (rlx_mask)7}), RLX_E_ARG,
                   "rlx_attention_kv");
    CHECK_NULL_ERR(rlx_attention_kv(q, k, k, kn, kn, 2, 4, &(rlx_attention_opts){.scale = INFINITY}), RLX_E_ARG,
                   "rlx_attention_kv");
    /* the mask spans L + Sn = 4 keys: one of 3 (k's length alone) does not broadcast */
    int64_t m3[2] = {2, 3};
    CHECK_NULL_ERR(rlx_attention_kv(q, k, k, kn, kn, 2, 4,
                                    &(rlx_attention_opts){.attn_mask = rlx_zeros(RLX_BOOL, 2, m3)}),
                   RLX_E_SHAPE, "rlx_attention_kv");
    CHECK_NULL_ERR(rlx_attention_kv(q, k, k, kn, kn, 2, 4,
                                    &(rlx_attention_opts){.attn_mask = rlx_zeros(RLX_I32, 2, m3)}),
                   RLX_E_DTYPE, "rlx_attention_kv");
}

TEST_MAIN(T(attention_kv_random_cases), T(attention_kv_decode_shape), T(attention_kv_one_row_head_sizes), T(attention_kv_program_over_dynamic_length),
          T(attention_kv_gradients_match_differences), T(attention_kv_gradient_program_over_dynamic_length),
          T(attention_kv_bad_arguments))
