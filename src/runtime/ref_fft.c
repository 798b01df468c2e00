/*
 * ref_fft.c — the FFT primitive of the reference evaluator.
 *
 * A line along attr.fft.axis of length 2N holds N real parts, then N
 * imaginary parts. Each line is gathered into double scratch, transformed
 * unnormalized (exp(-2 pi i jk/N) forward, exp(+...) inverse) and scattered
 * into the contiguous output. Power-of-two N uses an iterative radix-2
 * transform; any other N uses Bluestein's chirp-z algorithm, a circular
 * convolution done with power-of-two transforms of length M >= 2N - 1.
 * Twiddles come straight from cos/sin of exact angles (no recurrences), so
 * the error stays near the double epsilon times log N.
 */
#include <math.h>
#include <string.h>

#include "runtime/rt.h"

/* Everything one node's lines share, computed once per evaluation. */
typedef struct {
    size_t n;        /* transform length N */
    size_t m;        /* power-of-two length of the radix-2 transforms */
    double *cs, *sn; /* m/2 twiddles: cos, sin of 2 pi k / m */
    double *re, *im; /* the line, length n */
    /* Bluestein only (n not a power of two): */
    double *wr, *wi; /* chirp exp(-i pi k^2 / n), length n */
    double *br, *bi; /* transform of the conjugate chirp, length m */
    double *ar, *ai; /* convolution scratch, length m */
    double *block;   /* owns every array above */
} fft_plan;

static bool is_pow2(size_t n) { return n && !(n & (n - 1)); }

/* In-place radix-2 transform of length p->m (or len, a power of two that
 * divides m), sign -1 forward, +1 inverse, unnormalized. */
static void radix2(const fft_plan *p, double *re, double *im, size_t len, int sign)
{
    for (size_t i = 1, j = 0; i < len; i++) { /* bit-reversal permutation */
        size_t bit = len >> 1;
        for (; j & bit; bit >>= 1)
            j ^= bit;
        j |= bit;
        if (i < j) {
            double t = re[i]; re[i] = re[j]; re[j] = t;
            t = im[i]; im[i] = im[j]; im[j] = t;
        }
    }
    for (size_t half = 1; half < len; half <<= 1) {
        size_t step = p->m / (2 * half);
        for (size_t i = 0; i < len; i += 2 * half) {
            for (size_t k = 0; k < half; k++) {
                double wr = p->cs[k * step], wi = sign * p->sn[k * step];
                size_t a = i + k, b = a + half;
                double vr = re[b] * wr - im[b] * wi, vi = re[b] * wi + im[b] * wr;
                re[b] = re[a] - vr;
                im[b] = im[a] - vi;
                re[a] += vr;
                im[a] += vi;
            }
        }
    }
}

/* Forward Bluestein transform of p->re/im in place:
 * X_k = w_k sum_j (x_j w_j) conj(w_{k-j}), w_k = exp(-i pi k^2 / n). */
static void bluestein(const fft_plan *p)
{
    size_t n = p->n, m = p->m;
    for (size_t k = 0; k < n; k++) {
        p->ar[k] = p->re[k] * p->wr[k] - p->im[k] * p->wi[k];
        p->ai[k] = p->re[k] * p->wi[k] + p->im[k] * p->wr[k];
    }
    memset(p->ar + n, 0, (m - n) * sizeof *p->ar);
    memset(p->ai + n, 0, (m - n) * sizeof *p->ai);
    radix2(p, p->ar, p->ai, m, -1);
    for (size_t k = 0; k < m; k++) {
        double r = p->ar[k] * p->br[k] - p->ai[k] * p->bi[k];
        p->ai[k] = p->ar[k] * p->bi[k] + p->ai[k] * p->br[k];
        p->ar[k] = r;
    }
    radix2(p, p->ar, p->ai, m, +1);
    double inv_m = 1.0 / (double)m; /* exact: m is a power of two */
    for (size_t k = 0; k < n; k++) {
        double cr = p->ar[k] * inv_m, ci = p->ai[k] * inv_m;
        p->re[k] = cr * p->wr[k] - ci * p->wi[k];
        p->im[k] = cr * p->wi[k] + ci * p->wr[k];
    }
}

static void transform(const fft_plan *p, bool inverse)
{
    if (p->n <= 1)
        return;
    if (is_pow2(p->n)) {
        radix2(p, p->re, p->im, p->n, inverse ? +1 : -1);
        return;
    }
    /* Bluestein is written forward; inverse(x) = conj(forward(conj(x))). */
    if (inverse)
        for (size_t k = 0; k < p->n; k++)
            p->im[k] = -p->im[k];
    bluestein(p);
    if (inverse)
        for (size_t k = 0; k < p->n; k++)
            p->im[k] = -p->im[k];
}

static bool plan_init(fft_plan *p, size_t n)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    bool blue = n > 1 && !is_pow2(n);
    size_t m = 1;
    while (m < (blue ? 2 * n - 1 : n))
        m <<= 1;
    p->m = m;
    size_t half = m / 2 ? m / 2 : 1;
    size_t total = 2 * half + 2 * n + (blue ? 2 * n + 4 * m : 0);
    if (total > SIZE_MAX / sizeof(double) || !(p->block = ir_alloc(total * sizeof(double))))
        return false;
    double *q = p->block;
    p->cs = q, q += half;
    p->sn = q, q += half;
    p->re = q, q += n;
    p->im = q, q += n;
    for (size_t k = 0; k < m / 2; k++) {
        double ang = 2 * M_PI * (double)k / (double)m;
        p->cs[k] = cos(ang);
        p->sn[k] = sin(ang);
    }
    if (!blue)
        return true;
    p->wr = q, q += n;
    p->wi = q, q += n;
    p->br = q, q += m;
    p->bi = q, q += m;
    p->ar = q, q += m;
    p->ai = q;
    for (size_t k = 0; k < n; k++) {
        /* k^2 mod 2n keeps the angle small and exact: the chirp has period 2n in k^2. */
        double ang = M_PI * (double)((uint64_t)k * k % (2 * (uint64_t)n)) / (double)n;
        p->wr[k] = cos(ang);
        p->wi[k] = -sin(ang);
    }
    memset(p->br, 0, m * sizeof *p->br);
    memset(p->bi, 0, m * sizeof *p->bi);
    for (size_t k = 0; k < n; k++) { /* conj(w_k) at k and at -k (mod m) */
        p->br[k] = p->wr[k];
        p->bi[k] = -p->wi[k];
        if (k) {
            p->br[m - k] = p->wr[k];
            p->bi[m - k] = -p->wi[k];
        }
    }
    radix2(p, p->br, p->bi, m, -1);
    return true;
}

rlx_status rt_eval_fft(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0];
    int axis = n->attr.fft.axis;
    bool inverse = n->attr.fft.inverse != 0;
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    int64_t numel = ir_node_numel(n), len = n->shape[axis];
    if (numel == 0)
        return RLX_OK;
    size_t half = (size_t)(len / 2);
    fft_plan p;
    if (!plan_init(&p, half))
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory planning an fft of length %zu", half);
    /* Walk the lines: an odometer over the shape with the axis folded, over
     * the source view and the contiguous output at once. */
    int64_t lshape[IR_MAX_RANK];
    memcpy(lshape, n->shape, (size_t)n->rank * sizeof *lshape);
    lshape[axis] = 1;
    const int64_t *strides[2] = {in[0].strides, out->strides};
    rt_iter it;
    rt_iter_init(&it, n->rank, lshape, 2, strides);
    it.off[0] = in[0].off;
    int64_t is = in[0].strides[axis], os = out->strides[axis], h = (int64_t)half;
    const char *src = in[0].st->data;
    char *dst = out->st->data;
    rlx_dtype dt = x->dtype;
    for (int64_t line = 0, lines = numel / len; line < lines; line++, rt_iter_next(&it)) {
        for (int64_t k = 0; k < h; k++) {
            p.re[k] = rt_ld_f(src, dt, it.off[0] + k * is);
            p.im[k] = rt_ld_f(src, dt, it.off[0] + (h + k) * is);
        }
        transform(&p, inverse);
        for (int64_t k = 0; k < h; k++) {
            rt_st_f(dst, n->dtype, it.off[1] + k * os, p.re[k]);
            rt_st_f(dst, n->dtype, it.off[1] + (h + k) * os, p.im[k]);
        }
    }
    ir_free(p.block);
    return RLX_OK;
}
