/*
 * test_attention_lowp.c — attention on bf16 and f16 operands read as they
 * are (no widened copies; knob half_kernels 0) and through the widening
 * path (knob 1; the default widens attention): forward against the f32 kernel on the same values rounded
 * once, and against attention computed in double here; gradients against
 * the f32 kernel's and the f64 kernel's on the same values; masks, grouped
 * kv heads, odd head dims, one-row and 100-row sequences, strided views,
 * the two-piece (KV cache) form.
 */
#include <math.h>

#include "harness.h"

typedef struct {
    int64_t B, sq, sk;
    int h, hk, d;
    rlx_mask kind;
    int window;
    int mask;  /* 0 none, 1 bool [B, 1, Sq, Sk], 2 additive [Sk] */
    bool view; /* q a transposed view */
} lcase;

static const lcase cases[] = {
    {2, 17, 17, 2, 2, 24, RLX_MASK_CAUSAL, 0, 0, false},
    {1, 100, 100, 4, 2, 40, RLX_MASK_CAUSAL, 0, 0, false}, /* two query blocks, grouped, D not a multiple of 16 */
    {2, 1, 1, 2, 1, 8, RLX_MASK_NONE, 0, 0, false},        /* one row */
    {1, 1, 100, 4, 4, 72, RLX_MASK_CAUSAL, 0, 0, false},   /* one query over many keys (decoding) */
    {2, 17, 100, 2, 1, 20, RLX_MASK_SLIDING, 9, 0, true},  /* Sq < Sk, MQA, q a view */
    {1, 100, 100, 2, 2, 64, RLX_MASK_SLIDING, 30, 0, false},
    {2, 9, 13, 4, 2, 12, RLX_MASK_NONE, 0, 1, false},      /* bool mask tensor */
    {2, 9, 13, 2, 2, 12, RLX_MASK_CAUSAL, 0, 2, false},    /* additive mask */
    {1, 13, 6, 2, 2, 5, RLX_MASK_CAUSAL, 0, 0, false},     /* Sq > Sk: first rows see no key */
};
enum { NCASES = sizeof cases / sizeof *cases };

static const rlx_dtype HALF[2] = {RLX_BF16, RLX_F16};

/* Random values of one case, rounded to dt (so every dtype sees the same
 * numbers): q (stored [B, H*D, Sq] when a view), k, v, w, mask. */
typedef struct {
    double *x[5];
    int64_t n[5];
} ldata;

static ldata draw(const lcase *c, rlx_dtype dt)
{
    ldata d;
    int64_t hd = (int64_t)c->h * c->d, kd = (int64_t)c->hk * c->d;
    d.n[0] = d.n[3] = c->B * c->sq * hd;
    d.n[1] = d.n[2] = c->B * c->sk * kd;
    d.n[4] = c->mask == 1 ? c->B * c->sq * c->sk : c->sk;
    for (int i = 0; i < 5; i++) {
        d.x[i] = malloc((size_t)(d.n[i] ? d.n[i] : 1) * sizeof(double));
        for (int64_t e = 0; e < d.n[i]; e++) {
            double v = i < 4 ? test_uniform(-2, 2) : c->mask == 1 ? (double)(test_uniform(0, 1) < 0.7)
                                                                   : test_uniform(-2, 1);
            d.x[i][e] = test_quantize(dt, v);
        }
    }
    return d;
}

static void ldata_free(ldata *d)
{
    for (int i = 0; i < 5; i++)
        free(d->x[i]);
}

static rlx_tensor *tdt(rlx_dtype dt, int rank, const int64_t *shape, const double *v)
{
    return rlx_cast(tf64(rank, shape, v), dt);
}

typedef struct {
    rlx_tensor *q, *k, *v, *w, *m;
} linputs;

static linputs inputs(const lcase *c, rlx_dtype dt, const ldata *d)
{
    linputs in;
    int64_t sq[3] = {c->B, c->sq, (int64_t)c->h * c->d}, sk[3] = {c->B, c->sk, (int64_t)c->hk * c->d};
    if (c->view) {
        int64_t st[3] = {c->B, sq[2], c->sq};
        static const int perm[3] = {0, 2, 1};
        /* the stored layout holds x[0] read as [B, Sq, H*D] transposed */
        double *t = malloc((size_t)(d->n[0] ? d->n[0] : 1) * sizeof *t);
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t i = 0; i < c->sq; i++)
                for (int64_t e = 0; e < sq[2]; e++)
                    t[(b * sq[2] + e) * c->sq + i] = d->x[0][(b * c->sq + i) * sq[2] + e];
        in.q = rlx_transpose(tdt(dt, 3, st, t), 3, perm);
        free(t);
    } else {
        in.q = tdt(dt, 3, sq, d->x[0]);
    }
    in.k = tdt(dt, 3, sk, d->x[1]);
    in.v = tdt(dt, 3, sk, d->x[2]);
    in.w = tdt(dt, 3, sq, d->x[3]);
    in.m = NULL;
    if (c->mask == 1) {
        int64_t ms[4] = {c->B, 1, c->sq, c->sk};
        in.m = rlx_cast(tf64(4, ms, d->x[4]), RLX_BOOL);
    } else if (c->mask == 2) {
        int64_t ms[1] = {c->sk};
        in.m = tdt(dt, 1, ms, d->x[4]);
    }
    return in;
}

static rlx_tensor *attn(const lcase *c, const linputs *in)
{
    rlx_attention_opts o = {.num_kv_heads = c->hk, .mask = c->kind, .window = c->window, .attn_mask = in->m};
    return rlx_attention_ex(in->q, in->k, in->v, c->h, c->d, &o);
}

/* Attention of the case in double, from the values themselves: [B, Sq, H*D]. */
static double *attn_double(const lcase *c, const ldata *d)
{
    int64_t hd = (int64_t)c->h * c->d, kd = (int64_t)c->hk * c->d;
    double *out = calloc((size_t)(d->n[0] ? d->n[0] : 1), sizeof *out);
    double *p = malloc((size_t)(c->sk ? c->sk : 1) * sizeof *p);
    double scale = 1 / sqrt((double)c->d);
    for (int64_t b = 0; b < c->B; b++)
        for (int hh = 0; hh < c->h; hh++) {
            int kh = hh / (c->h / c->hk);
            for (int64_t i = 0; i < c->sq; i++) {
                int64_t pos = c->sk - c->sq + i;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < c->sk; j++) {
                    bool keep = c->kind == RLX_MASK_NONE ||
                                (j <= pos && (c->kind != RLX_MASK_SLIDING || j > pos - c->window));
                    double s = 0;
                    for (int e = 0; e < c->d; e++)
                        s += d->x[0][(b * c->sq + i) * hd + hh * c->d + e] * d->x[1][(b * c->sk + j) * kd + kh * c->d + e];
                    s *= scale;
                    if (c->mask == 1)
                        keep = keep && d->x[4][(b * c->sq + i) * c->sk + j] != 0;
                    else if (c->mask == 2)
                        s += d->x[4][j];
                    p[j] = keep ? s : -INFINITY;
                    mx = fmax(mx, p[j]);
                }
                for (int64_t j = 0; j < c->sk; j++)
                    sum += p[j] = mx == -INFINITY ? 0 : exp(p[j] - mx);
                for (int e = 0; e < c->d && sum > 0; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < c->sk; j++)
                        acc += p[j] * d->x[2][(b * c->sk + j) * kd + kh * c->d + e];
                    out[(b * c->sq + i) * hd + hh * c->d + e] = acc / sum;
                }
            }
        }
    free(p);
    return out;
}

static double max_abs(const double *v, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(v[i]));
    return m;
}

/* got within ulps of dt of want, element by element, relative to |want|
 * plus the largest |want| plus floor (gradients that are 0 in exact
 * arithmetic, as dq with one key, come out as rounding noise of o and g). */
static void expect_close(const char *what, const lcase *c, rlx_dtype dt, const double *got, const double *want,
                         int64_t n, double ulps, double floor)
{
    double ulp = dt == RLX_BF16 ? 0x1p-8 : 0x1p-11, scale = max_abs(want, n) + floor; /* half the spacing above 1 */
    for (int64_t e = 0; e < n; e++)
        if (!(fabs(got[e] - want[e]) <= ulps * ulp * (fabs(want[e]) + scale))) {
            test_fail(__FILE__, __LINE__, "%s on %s, case B%lld Sq%lld Sk%lld H%d/%d D%d mask %d/%d [%lld]: %.6g, want %.6g",
                      what, rlx_dtype_name(dt), (long long)c->B, (long long)c->sq, (long long)c->sk, c->h, c->hk,
                      c->d, (int)c->kind, c->mask, (long long)e, got[e], want[e]);
            return;
        }
}

/* The forward on bf16/f16, both paths and backends: exactly the f32
 * kernel's values on the same inputs rounded once; within an ulp of
 * attention in double; the native path's graph holds no f32 node. */
TEST(attention_half_forward)
{
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < NCASES; i++) {
            const lcase *c = &cases[i];
            rlx_dtype dt = HALF[t];
            ldata dd = draw(c, dt);
            double *ref = attn_double(c, &dd);
            for (int widen = 0; widen < 2; widen++) {
                CHECK(rlx_set_option("half_kernels", widen ? "1" : "0") == RLX_OK);
                EACH_BACKEND(b)
                {
                    linputs in = inputs(c, dt, &dd), in32 = inputs(c, RLX_F32, &dd);
                    rlx_tensor *y = attn(c, &in), *y32 = rlx_cast(attn(c, &in32), dt);
                    CHECK(y && rlx_dtype_of(y) == dt);
                    if (!widen && test_graph_names(y, "f32"))
                        test_fail(__FILE__, __LINE__, "native %s attention: an f32 node in its graph",
                                  rlx_dtype_name(dt));
                    if (widen && !test_graph_names(y, "f32"))
                        test_fail(__FILE__, __LINE__, "half_kernels=1: no f32 node in the graph");
                    EXPECT_SAME(y, y32, 0);
                    int64_t n = 0;
                    double *got = test_values(y, &n);
                    if (got && n == dd.n[0])
                        expect_close("forward vs double", c, dt, got, ref, n, 1, 0);
                    free(got);
                }
            }
            CHECK(rlx_set_option("half_kernels", "default") == RLX_OK);
            free(ref);
            ldata_free(&dd);
        }
}

/* The two-piece form (past keys and a step's new ones, as in decoding
 * with a KV cache) reads both bf16 pieces in place. */
TEST(attention_half_kv_pieces)
{
    for (int t = 0; t < 2; t++) {
        rlx_dtype dt = HALF[t];
        int64_t qs[3] = {2, 3, 4 * 20}, ks[3] = {2, 37, 2 * 20}, ns[3] = {2, 3, 2 * 20};
        rlx_tensor *q = rlx_cast(trand(RLX_F32, 3, qs, -2, 2), dt), *k = rlx_cast(trand(RLX_F32, 3, ks, -2, 2), dt);
        rlx_tensor *v = rlx_cast(trand(RLX_F32, 3, ks, -2, 2), dt), *kn = rlx_cast(trand(RLX_F32, 3, ns, -2, 2), dt);
        rlx_tensor *vn = rlx_cast(trand(RLX_F32, 3, ns, -2, 2), dt);
        rlx_attention_opts o = {.num_kv_heads = 2, .mask = RLX_MASK_CAUSAL};
        EACH_BACKEND(b)
        {
            rlx_tensor *y = rlx_attention_kv(q, k, v, kn, vn, 4, 20, &o);
            rlx_tensor *y32 = rlx_attention_kv(rlx_cast(q, RLX_F32), rlx_cast(k, RLX_F32), rlx_cast(v, RLX_F32),
                                               rlx_cast(kn, RLX_F32), rlx_cast(vn, RLX_F32), 4, 20, &o);
            CHECK(y && rlx_dtype_of(y) == dt);
            EXPECT_SAME(y, rlx_cast(y32, dt), 0);
        }
    }
}

/* d sum(attention * w) / d (q, k, v), wrt the given tensors. */
static bool grads(const lcase *c, const linputs *in, rlx_tensor **g)
{
    rlx_tensor *wrt[3] = {in->q, in->k, in->v};
    rlx_status st = rlx_grad(rlx_sum_all(rlx_mul(attn(c, in), in->w)), wrt, 3, g);
    CHECK_EQ_INT(st, RLX_OK);
    return st == RLX_OK;
}

/* Gradients of bf16/f16 q, k, v come back in their dtype, from the
 * ATTENTION_BWD kernel at any length (the f32 kernel is the rule for f32
 * from 128 keys), computed in f32: against the f64 kernel's gradient on
 * the same values (the forward output and the cotangent are rounded to
 * the half dtype on the native path, hence a few ulps), and against the
 * widening path (knob half_kernels 1, and by default). On the reference backend the
 * gradient is the double oracle of ATTENTION_BWD. */
TEST(attention_half_gradients)
{
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < NCASES; i++) {
            const lcase *c = &cases[i];
            rlx_dtype dt = HALF[t];
            ldata dd = draw(c, dt);
            EACH_BACKEND(b)
            {
                linputs in = inputs(c, dt, &dd), in64 = inputs(c, RLX_F64, &dd);
                rlx_tensor *g[3], *g64[3], *gw[3];
                CHECK(rlx_set_option("attention_bwd", "1") == RLX_OK);
                bool ok = grads(c, &in64, g64);
                CHECK(rlx_set_option("attention_bwd", "default") == RLX_OK);
                CHECK(rlx_set_option("half_kernels", "0") == RLX_OK); /* the half kernels, not the default copies */
                ok = ok && grads(c, &in, g);
                CHECK(rlx_set_option("half_kernels", "default") == RLX_OK);
                if (!ok)
                    continue;
                if (c->B * c->sq * c->sk != 0 && !test_graph_names(g[0], "attention_bwd"))
                    test_fail(__FILE__, __LINE__, "%s gradient without the attention_bwd kernel", rlx_dtype_name(dt));
                CHECK(rlx_set_option("half_kernels", "1") == RLX_OK);
                linputs inw = inputs(c, dt, &dd);
                ok = grads(c, &inw, gw);
                CHECK(rlx_set_option("half_kernels", "default") == RLX_OK);
                for (int k = 0; k < 3 && ok; k++) {
                    CHECK(rlx_dtype_of(g[k]) == dt && rlx_dtype_of(gw[k]) == dt);
                    int64_t n = 0, n64 = 0, nw = 0;
                    double *gv = test_values(g[k], &n), *rv = test_values(g64[k], &n64), *wv = test_values(gw[k], &nw);
                    if (gv && rv && wv && n == n64 && n == nw) {
                        expect_close("gradient vs f64", c, dt, gv, rv, n, 6, 1);
                        expect_close("widened gradient vs f64", c, dt, wv, rv, n, 6, 1);
                    }
                    free(gv);
                    free(rv);
                    free(wv);
                }
            }
            ldata_free(&dd);
        }
}

/* The gradient in bf16 with the forward in f32 rounded: the same kernel
 * on f32 operands of the same values, its result rounded, differs from
 * the native one only by the rounding of o and g (f32 here: none), so on
 * f32 cotangents and outputs the two agree to an ulp. */
TEST(attention_half_gradient_vs_f32_kernel)
{
    const lcase c = {2, 40, 40, 4, 2, 24, RLX_MASK_CAUSAL, 0, 0, false};
    ldata dd = draw(&c, RLX_BF16);
    linputs in = inputs(&c, RLX_BF16, &dd), in32 = inputs(&c, RLX_F32, &dd);
    rlx_tensor *g[3], *g32[3];
    CHECK(rlx_set_option("attention_bwd", "1") == RLX_OK);
    bool ok = grads(&c, &in, g) && grads(&c, &in32, g32);
    CHECK(rlx_set_option("attention_bwd", "default") == RLX_OK);
    for (int k = 0; k < 3 && ok; k++) {
        int64_t n = 0, n32 = 0;
        double *gv = test_values(g[k], &n), *rv = test_values(rlx_cast(g32[k], RLX_BF16), &n32);
        if (gv && rv && n == n32)
            expect_close("bf16 gradient vs f32 kernel", &c, RLX_BF16, gv, rv, n, 4, 0);
        free(gv);
        free(rv);
    }
    ldata_free(&dd);
}

TEST_MAIN(T(attention_half_forward), T(attention_half_kv_pieces), T(attention_half_gradients),
          T(attention_half_gradient_vs_f32_kernel))
