/*
 * test_attention_bwd.c — the ATTENTION_BWD kernel that attention's
 * gradient uses (knob attention_bwd = 1): gradients of q, k, v against the
 * composite rule (knob 0) on both backends, f32 and f64, over random shapes
 * with Sq != Sk, grouped kv heads, every positional mask, bool and additive
 * mask tensors, strided operands, empty and one-row sequences; against
 * central differences (f64); bitwise identical at 1, 2 and 3 threads.
 */

#include "harness.h"

typedef struct {
    int64_t B, sq, sk;
    int h, hk, d;
    rlx_mask kind;
    int window;
    int mask;  /* 0 none, 1 bool [B, 1, Sq, Sk], 2 additive [Sk] (no gradient wanted) */
    bool view; /* q a transposed view */
} bcase;

/* q, k, v, the mask and the weights of one case (in the test's scope). */
typedef struct {
    rlx_tensor *q, *k, *v, *m, *w;
} binputs;

/* Their values, drawn once: every backend and thread count gets new
 * tensors of them (graph nodes are shared by equal calls, so reusing the
 * tensors would reuse the first realization). */
typedef struct {
    double *x[5]; /* q (as stored: [B, H*D, Sq] when a view), k, v, w, mask */
} bdata;

static int64_t numel3(int64_t a, int64_t b, int64_t c) { return a * b * c; }

static bdata draw(const bcase *c)
{
    bdata d;
    int64_t n[5] = {numel3(c->B, c->sq, (int64_t)c->h * c->d), numel3(c->B, c->sk, (int64_t)c->hk * c->d), 0, 0,
                    c->mask == 1 ? numel3(c->B, c->sq, c->sk) : c->sk};
    n[2] = n[1];
    n[3] = n[0];
    for (int i = 0; i < 5; i++) {
        d.x[i] = malloc((size_t)(n[i] ? n[i] : 1) * sizeof(double));
        for (int64_t e = 0; e < n[i]; e++)
            d.x[i][e] = i < 4 ? test_uniform(-1, 1) : c->mask == 1 ? (double)(test_uniform(0, 1) < 0.7)
                                                                    : test_uniform(-2, 1);
    }
    return d;
}

static void bdata_free(bdata *d)
{
    for (int i = 0; i < 5; i++)
        free(d->x[i]);
}

static rlx_tensor *tdt(rlx_dtype dt, int rank, const int64_t *shape, const double *v)
{
    return rlx_cast(tf64(rank, shape, v), dt);
}

static binputs make_inputs(const bcase *c, rlx_dtype dt, const bdata *d)
{
    binputs in;
    int64_t sq[3] = {c->B, c->sq, (int64_t)c->h * c->d}, sk[3] = {c->B, c->sk, (int64_t)c->hk * c->d};
    if (c->view) { /* [B, H*D, Sq] transposed */
        int64_t st[3] = {c->B, sq[2], c->sq};
        static const int perm[3] = {0, 2, 1};
        in.q = rlx_transpose(tdt(dt, 3, st, d->x[0]), 3, perm);
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

static rlx_tensor *loss_of(const bcase *c, const binputs *in)
{
    rlx_attention_opts o = {.num_kv_heads = c->hk, .mask = c->kind, .window = c->window, .attn_mask = in->m};
    return rlx_sum_all(rlx_mul(rlx_attention_ex(in->q, in->k, in->v, c->h, c->d, &o), in->w));
}

/* d loss / d (q, k, v) with the knob at fused (1) or composite (0). */
static bool grads(const bcase *c, const binputs *in, int fused, rlx_tensor **g)
{
    rlx_set_option("attention_bwd", fused ? "1" : "0");
    rlx_tensor *wrt[3] = {in->q, in->k, in->v};
    rlx_status st = rlx_grad(loss_of(c, in), wrt, 3, g);
    rlx_set_option("attention_bwd", "default");
    CHECK_EQ_INT(st, RLX_OK);
    if (st != RLX_OK)
        return false;
    bool empty = c->B * c->sq * c->sk == 0;
    if (!empty && test_graph_names(g[0], "attention_bwd") != (fused != 0))
        test_fail(__FILE__, __LINE__, "knob attention_bwd=%d: attention_bwd node %s in the gradient graph", fused,
                  fused ? "missing" : "present");
    return true;
}

static const bcase cases[] = {
    {2, 5, 7, 2, 2, 3, RLX_MASK_NONE, 0, 0, false},
    {1, 70, 70, 4, 2, 8, RLX_MASK_CAUSAL, 0, 0, false},   /* two query blocks, grouped */
    {2, 9, 13, 4, 1, 4, RLX_MASK_CAUSAL, 0, 0, true},     /* Sq < Sk, MQA, q a view */
    {1, 13, 6, 2, 2, 5, RLX_MASK_CAUSAL, 0, 0, false},    /* Sq > Sk: first rows see no key */
    {2, 11, 11, 3, 3, 4, RLX_MASK_SLIDING, 3, 0, false},
    {1, 80, 90, 2, 1, 16, RLX_MASK_SLIDING, 20, 0, false},
    {2, 6, 8, 4, 2, 3, RLX_MASK_NONE, 0, 1, false},       /* bool mask tensor */
    {2, 6, 8, 4, 2, 3, RLX_MASK_CAUSAL, 0, 2, false},     /* additive mask, no gradient wanted */
    {1, 1, 1, 2, 1, 4, RLX_MASK_NONE, 0, 0, false},       /* one row */
    {1, 1, 9, 2, 2, 4, RLX_MASK_SLIDING, 2, 0, false},    /* one query (decoding) */
    {2, 0, 5, 2, 2, 3, RLX_MASK_NONE, 0, 0, false},       /* no queries */
    {2, 4, 0, 2, 2, 3, RLX_MASK_NONE, 0, 0, false},       /* no keys */
    {0, 4, 4, 2, 2, 3, RLX_MASK_CAUSAL, 0, 0, false},     /* no batch */
};
enum { NCASES = sizeof cases / sizeof *cases };

TEST(attention_bwd_matches_composite)
{
    static const rlx_dtype dts[2] = {RLX_F64, RLX_F32};
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < NCASES; i++) {
            const bcase *c = &cases[i];
            bdata dd = draw(c);
            EACH_BACKEND(b)
            {
                binputs in = make_inputs(c, dts[t], &dd);
                rlx_tensor *gf[3], *gc[3];
                if (!grads(c, &in, 1, gf) || !grads(c, &in, 0, gc))
                    continue;
                for (int k = 0; k < 3; k++)
                    EXPECT_SAME(gf[k], gc[k], dts[t] == RLX_F64 ? 1e-11 : 2e-5);
            }
            bdata_free(&dd);
        }
}

/* Every element of the fused gradient against central differences of the
 * loss, f64, on the JIT (the kernel) and the reference (the oracle). */
TEST(attention_bwd_matches_differences)
{
    static const bcase fd[] = {
        {1, 3, 5, 4, 2, 2, RLX_MASK_CAUSAL, 0, 0, false},
        {2, 4, 3, 2, 1, 3, RLX_MASK_SLIDING, 2, 1, false},
        {1, 4, 4, 2, 2, 2, RLX_MASK_NONE, 0, 2, true},
    };
    for (int i = 0; i < 3; i++) {
        const bcase *c = &fd[i];
        bdata dd = draw(c);
        EACH_BACKEND(b)
        {
            binputs in = make_inputs(c, RLX_F64, &dd);
            rlx_tensor *x[3] = {rlx_contiguous(in.q), in.k, in.v};
            in.q = x[0];
            rlx_tensor *g[3];
            if (!grads(c, &in, 1, g))
                continue;
            for (int k = 0; k < 3; k++) {
                int64_t n = 0, nn = 0;
                double *gv = test_values(g[k], &n), *xv = test_values(x[k], &nn);
                for (int64_t e = 0; gv && xv && e < n; e++) {
                    double h = 1e-6, x0 = xv[e], l[2];
                    for (int s = 0; s < 2; s++) {
                        xv[e] = x0 + (s ? -h : h);
                        int64_t sh[3]; /* the perturbed input, same shape */
                        int rank = rlx_shape(x[k], sh, 3);
                        rlx_tensor *xs = tf64(rank, sh, xv);
                        binputs p = in;
                        if (k == 0)
                            p.q = xs;
                        else if (k == 1)
                            p.k = xs;
                        else
                            p.v = xs;
                        double *lv = test_values(loss_of(c, &p), &nn);
                        l[s] = lv ? lv[0] : NAN;
                        free(lv);
                    }
                    xv[e] = x0;
                    double want = (l[0] - l[1]) / (2 * h);
                    if (!test_close(gv[e], want, 1e-5, 1e-7)) {
                        test_fail(__FILE__, __LINE__, "case %d input %d [%lld] = %.12g, difference %.12g", i, k,
                                  (long long)e, gv[e], want);
                        break;
                    }
                }
                free(gv);
                free(xv);
            }
        }
        bdata_free(&dd);
    }
}

/* Second derivatives through the kernel's rule (the gradient of the
 * composite it stands for): H u with the knob at 1 against the composite. */
TEST(attention_bwd_second_derivatives_match_composite)
{
    static const bcase sc[] = {
        {2, 5, 7, 4, 2, 3, RLX_MASK_CAUSAL, 0, 1, false},
        {1, 6, 6, 2, 1, 4, RLX_MASK_SLIDING, 3, 2, true},
    };
    for (int i = 0; i < 2; i++) {
        bdata dd = draw(&sc[i]);
        EACH_BACKEND(b)
        {
            rlx_tensor *h[2][3];
            for (int f = 0; f < 2; f++) {
                binputs in = make_inputs(&sc[i], RLX_F64, &dd);
                rlx_tensor *g[3], *wrt[3] = {in.q, in.k, in.v};
                if (!grads(&sc[i], &in, f == 0, g))
                    break;
                rlx_tensor *dot = NULL;
                for (int k = 0; k < 3; k++) { /* u = sin of the input: fixed and non-uniform */
                    rlx_tensor *t = rlx_sum_all(rlx_mul(g[k], rlx_sin(wrt[k])));
                    dot = dot ? rlx_add(dot, t) : t;
                }
                rlx_set_option("attention_bwd", f == 0 ? "1" : "0");
                CHECK_EQ_INT(rlx_grad(dot, wrt, 3, h[f]), RLX_OK);
                rlx_set_option("attention_bwd", "default");
            }
            for (int k = 0; k < 3; k++)
                EXPECT_SAME(h[0][k], h[1][k], 1e-10);
        }
        bdata_free(&dd);
    }
}

/* The kernel's gradients at 1, 2 and 3 threads: the same bits. */
TEST(attention_bwd_bitwise_across_threads)
{
    static const bcase tc[] = {
        {3, 100, 100, 4, 2, 16, RLX_MASK_CAUSAL, 0, 0, false},
        {2, 70, 90, 6, 3, 8, RLX_MASK_SLIDING, 33, 1, false},
    };
    static const rlx_dtype dts[2] = {RLX_F32, RLX_F64};
    int before = rlx_get_num_threads();
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 2; i++) {
            bdata dd = draw(&tc[i]);
            double *first[3] = {NULL, NULL, NULL};
            for (int nt = 1; nt <= 3; nt++) {
                rlx_set_num_threads(nt);
                binputs in = make_inputs(&tc[i], dts[t], &dd);
                rlx_tensor *g[3];
                if (!grads(&tc[i], &in, 1, g))
                    break;
                for (int k = 0; k < 3; k++) {
                    int64_t n = 0;
                    double *v = test_values(g[k], &n);
                    if (!first[k])
                        first[k] = v;
                    else {
                        if (v && memcmp(v, first[k], (size_t)n * sizeof *v))
                            test_fail(__FILE__, __LINE__, "case %d %s input %d differs at %d threads", i,
                                      rlx_dtype_name(dts[t]), k, nt);
                        free(v);
                    }
                }
            }
            for (int k = 0; k < 3; k++)
                free(first[k]);
            bdata_free(&dd);
        }
    rlx_set_num_threads(before);
}

TEST_MAIN(T(attention_bwd_matches_composite), T(attention_bwd_matches_differences),
          T(attention_bwd_second_derivatives_match_composite), T(attention_bwd_bitwise_across_threads))
