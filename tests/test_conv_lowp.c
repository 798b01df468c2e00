/*
 * test_conv_lowp.c — conv2d on bf16 operands: oneDNN's bf16 convolution
 * (knob half_kernels 0, where the build has oneDNN and the CPU
 * AVX512-BF16), the kernel's own fallback that widens inside the kernel
 * (knob 2), and the tensor layer's widening (knob 1): values against
 * conv2d computed in double here on the same values, padding, strides
 * (an output that leaves input columns unread), dilation, groups, 1x1,
 * a strided view of x, a bias; gradients of x, w and b against the f64
 * gradient on the same values; f16 (always widened) the same way.
 */
#include <math.h>

#include "harness.h"

typedef struct {
    int64_t n, c, h, w, o, kh, kw;
    int stride, pad, dil, groups;
    bool bias, view;
} ccase;

static const ccase cases[] = {
    {2, 3, 9, 11, 4, 3, 3, 1, 1, 1, 1, false, false},
    {1, 4, 10, 7, 6, 3, 3, 2, 0, 1, 1, false, false}, /* stride 2: the last row and column unread */
    {2, 4, 12, 12, 4, 3, 3, 1, 2, 2, 2, false, true}, /* dilated, grouped, x a transposed view */
    {1, 16, 5, 5, 8, 1, 1, 1, 0, 1, 1, true, false},  /* 1x1 */
    {1, 8, 14, 14, 16, 5, 5, 2, 2, 1, 4, false, false},
    {2, 3, 9, 11, 4, 3, 3, 1, 1, 1, 1, true, true},   /* a bias (widened), x a view */
    {1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, false, false},   /* one element */
};
enum { NCASES = sizeof cases / sizeof *cases };

static int64_t outdim(int64_t in, int64_t k, const ccase *c)
{
    return (in + 2 * c->pad - (int64_t)c->dil * (k - 1) - 1) / c->stride + 1;
}

typedef struct {
    double *x, *w, *b, *r; /* r: the cotangent for the gradients */
    int64_t nx, nw, ny;
} cdata;

static double *draw_n(int64_t n, rlx_dtype dt)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = test_quantize(dt, test_uniform(-2, 2));
    return v;
}

static cdata draw(const ccase *c, rlx_dtype dt)
{
    cdata d;
    d.nx = c->n * c->c * c->h * c->w;
    d.nw = c->o * (c->c / c->groups) * c->kh * c->kw;
    d.ny = c->n * c->o * outdim(c->h, c->kh, c) * outdim(c->w, c->kw, c);
    d.x = draw_n(d.nx, dt);
    d.w = draw_n(d.nw, dt);
    d.b = draw_n(c->o, dt);
    d.r = draw_n(d.ny, dt);
    return d;
}

static void cdata_free(cdata *d)
{
    free(d->x);
    free(d->w);
    free(d->b);
    free(d->r);
}

typedef struct {
    rlx_tensor *x, *w, *b;
} cin;

static cin inputs(const ccase *c, rlx_dtype dt, const cdata *d)
{
    cin in;
    int64_t xs[4] = {c->n, c->c, c->h, c->w}, ws[4] = {c->o, c->c / c->groups, c->kh, c->kw}, bs[1] = {c->o};
    if (c->view) { /* stored [N, C, W, H], read transposed */
        int64_t ts[4] = {c->n, c->c, c->w, c->h};
        double *t = malloc((size_t)d->nx * sizeof *t);
        for (int64_t p = 0; p < c->n * c->c; p++)
            for (int64_t i = 0; i < c->h; i++)
                for (int64_t j = 0; j < c->w; j++)
                    t[(p * c->w + j) * c->h + i] = d->x[(p * c->h + i) * c->w + j];
        static const int perm[4] = {0, 1, 3, 2};
        in.x = rlx_transpose(rlx_cast(tf64(4, ts, t), dt), 4, perm);
        free(t);
    } else {
        in.x = rlx_cast(tf64(4, xs, d->x), dt);
    }
    in.w = rlx_cast(tf64(4, ws, d->w), dt);
    in.b = c->bias ? rlx_cast(tf64(1, bs, d->b), dt) : NULL;
    return in;
}

static rlx_tensor *conv(const ccase *c, const cin *in)
{
    int s[2] = {c->stride, c->stride}, p[2] = {c->pad, c->pad}, dl[2] = {c->dil, c->dil};
    return rlx_conv2d(in->x, in->w, in->b, s, p, dl, c->groups);
}

/* conv2d in double from the values themselves. */
static double *conv_double(const ccase *c, const cdata *d)
{
    int64_t oh = outdim(c->h, c->kh, c), ow = outdim(c->w, c->kw, c), cg = c->c / c->groups, og = c->o / c->groups;
    double *y = malloc((size_t)(d->ny ? d->ny : 1) * sizeof *y);
    for (int64_t b = 0; b < c->n; b++)
        for (int64_t o = 0; o < c->o; o++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double acc = c->bias ? d->b[o] : 0;
                    int64_t g = o / og;
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t u = 0; u < c->kh; u++)
                            for (int64_t v = 0; v < c->kw; v++) {
                                int64_t hi = i * c->stride - c->pad + u * c->dil, wi = j * c->stride - c->pad + v * c->dil;
                                if (hi < 0 || hi >= c->h || wi < 0 || wi >= c->w)
                                    continue;
                                acc += d->x[((b * c->c + g * cg + ci) * c->h + hi) * c->w + wi] *
                                       d->w[((o * cg + ci) * c->kh + u) * c->kw + v];
                            }
                    y[((b * c->o + o) * oh + i) * ow + j] = acc;
                }
    return y;
}

/* got within ulps of dt of want, relative to |want| plus floor times the
 * largest |want| (the f32 sums' order; in gradients, the cotangent's and
 * the forward's rounding). */
static void expect_close(const char *what, const ccase *c, rlx_dtype dt, int knob, const double *got,
                         const double *want, int64_t n, double ulps, double floor)
{
    double ulp = dt == RLX_BF16 ? 0x1p-8 : 0x1p-11, scale = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= ulps * ulp * fabs(want[i]) + floor * scale)) {
            test_fail(__FILE__, __LINE__,
                      "%s %s (half_kernels %d) case N%lld C%lld %lldx%lld O%lld k%lld s%d p%d d%d g%d [%lld]: %.6g, want %.6g",
                      what, rlx_dtype_name(dt), knob, (long long)c->n, (long long)c->c, (long long)c->h,
                      (long long)c->w, (long long)c->o, (long long)c->kh, c->stride, c->pad, c->dil, c->groups,
                      (long long)i, got[i], want[i]);
            return;
        }
}

static const char *const KNOB[3] = {"0", "1", "2"};

/* Forward: within an ulp of the double convolution (f32 sums); bf16
 * without a bias under knob 0 or 2 has no f32 node in its graph (with a
 * bias it is widened: product and bias round once together). */
TEST(conv_half_forward)
{
    static const rlx_dtype dts[2] = {RLX_BF16, RLX_F16};
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < NCASES; i++) {
            const ccase *c = &cases[i];
            cdata d = draw(c, dts[t]);
            double *ref = conv_double(c, &d);
            for (int k = 0; k < 3; k++) {
                CHECK(rlx_set_option("half_kernels", KNOB[k]) == RLX_OK);
                EACH_BACKEND(b)
                {
                    cin in = inputs(c, dts[t], &d);
                    rlx_tensor *y = conv(c, &in);
                    CHECK(y && rlx_dtype_of(y) == dts[t]);
                    bool native = dts[t] == RLX_BF16 && k != 1 && !c->bias;
                    if (!c->bias && test_graph_names(y, "f32") == native)
                        test_fail(__FILE__, __LINE__, "%s conv2d (half_kernels %d): an f32 node %s", rlx_dtype_name(dts[t]),
                                  k, native ? "in the native graph" : "missing from the widened graph");
                    int64_t n = 0;
                    double *got = test_values(y, &n);
                    if (got && n == d.ny)
                        expect_close("forward vs double", c, dts[t], k, got, ref, n, 1, 1e-5);
                    free(got);
                }
            }
            CHECK(rlx_set_option("half_kernels", "default") == RLX_OK);
            free(ref);
            cdata_free(&d);
        }
}

/* Gradients of sum(conv2d(x, w, b) * r) in x, w, b on bf16: in bf16,
 * against the f64 gradient on the same values (each is a bf16 conv of
 * bf16 operands, rounded once; the cotangent and the forward's rounding
 * enter, hence a few ulps of the largest). */
TEST(conv_half_gradients)
{
    for (int i = 0; i < NCASES; i++) {
        const ccase *c = &cases[i];
        cdata d = draw(c, RLX_BF16);
        for (int k = 0; k < 3; k++) {
            CHECK(rlx_set_option("half_kernels", KNOB[k]) == RLX_OK);
            EACH_BACKEND(b)
            {
                cin in = inputs(c, RLX_BF16, &d), in64 = inputs(c, RLX_F64, &d);
                int64_t ys[1] = {d.ny};
                rlx_tensor *r = rlx_cast(tf64(1, ys, d.r), RLX_BF16), *r64 = tf64(1, ys, d.r);
                rlx_tensor *wrt[3] = {in.x, in.w, in.b}, *wrt64[3] = {in64.x, in64.w, in64.b}, *g[3], *g64[3];
                int nw = c->bias ? 3 : 2;
                rlx_tensor *y = conv(c, &in), *y64 = conv(c, &in64);
                CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(rlx_reshape(y, 1, ys), r)), wrt, nw, g), RLX_OK);
                CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(rlx_reshape(y64, 1, ys), r64)), wrt64, nw, g64), RLX_OK);
                for (int j = 0; j < nw; j++) {
                    CHECK(rlx_dtype_of(g[j]) == RLX_BF16);
                    int64_t n = 0, n64 = 0;
                    double *gv = test_values(g[j], &n), *rv = test_values(g64[j], &n64);
                    if (gv && rv && n == n64)
                        expect_close(j == 0 ? "dx" : j == 1 ? "dw" : "db", c, RLX_BF16, k, gv, rv, n, 2, 2 * 0x1p-8);
                    free(gv);
                    free(rv);
                }
            }
        }
        CHECK(rlx_set_option("half_kernels", "default") == RLX_OK);
        cdata_free(&d);
    }
}

TEST_MAIN(T(conv_half_forward), T(conv_half_gradients))
