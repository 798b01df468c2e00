/*
 * quant.c — minifloat rounding and the MXQUANT primitive of the
 * reference evaluator.
 *
 * MXQUANT quantizes along the last axis in blocks of attr.quant.block
 * elements (0: the whole tensor is one block) the OCP MX way: each block
 * shares the power-of-two scale 2^(floor(log2(amax)) - emax), elements are
 * rounded to the minifloat grid of value/scale (nearest-even, saturating
 * at the largest finite value) and multiplied back, so the node holds the
 * dequantized values as f32. The scale is kept exact (not clamped to the
 * E8M0 range), since the result is dequantized anyway.
 *
 * Non-finite values: NaN stays NaN; +-inf saturates to +-max * scale.
 * Both are left out of amax, so one bad element does not wipe its block.
 */
#include <math.h>
#include <string.h>

#include "runtime/rt.h"

typedef struct {
    int mbits;  /* stored mantissa bits */
    int emin;   /* exponent of the smallest normal (1 - bias) */
    int emax;   /* exponent of the largest normal */
    double max; /* largest finite magnitude */
} minifloat;

/* Indexed by rlx_minifloat. E4M3 has no infinity and gives its top
 * mantissa code to NaN, hence 1.75 * 2^8 = 448 rather than 480. */
static const minifloat formats[] = {
    [RLX_FP8_E4M3] = {3, 1 - 7, 8, 448.0},
    [RLX_FP8_E5M2] = {2, 1 - 15, 15, 57344.0},
    [RLX_FP6_E2M3] = {3, 1 - 1, 2, 7.5},
    [RLX_FP6_E3M2] = {2, 1 - 3, 4, 28.0},
    [RLX_FP4_E2M1] = {1, 1 - 1, 2, 6.0},
};

static bool fmt_valid(int fmt) { return fmt >= 0 && fmt < (int)(sizeof formats / sizeof *formats); }

int rt_minifloat_emax(int fmt) { return fmt_valid(fmt) ? formats[fmt].emax : 0; }

double rt_minifloat_round(double v, int fmt)
{
    if (!fmt_valid(fmt) || v != v)
        return NAN;
    const minifloat *f = &formats[fmt];
    double a = fabs(v);
    if (a >= f->max)
        return copysign(f->max, v);
    if (a == 0)
        return v; /* keeps the sign of zero */
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1): floor(log2 a) = e - 1 */
    e -= 1;
    if (e < f->emin)
        e = f->emin; /* subnormals share the smallest normal's spacing */
    double q = ldexp(1.0, e - f->mbits);
    /* a/q and r*q are exact (q is a power of two); nearbyint rounds half
     * to even in the default rounding mode. max is a grid point and a < max,
     * so the result never passes max. */
    return copysign(nearbyint(a / q) * q, v);
}

/* The shared scale of a block whose largest finite magnitude is amax. */
static double block_scale(double amax, int emax)
{
    if (!(amax > 0) || isinf(amax))
        return 1;
    int e;
    frexp(amax, &e);
    return ldexp(1.0, e - 1 - emax);
}

static double quantize(double v, double scale, int fmt)
{
    return rt_minifloat_round(v / scale, fmt) * scale;
}

static double finite_abs(double v) { return isfinite(v) ? fabs(v) : 0; }

rlx_status rt_eval_mxquant(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0];
    int fmt = n->attr.quant.fmt, emax = rt_minifloat_emax(fmt);
    int64_t block = n->attr.quant.block, numel = ir_node_numel(x);
    if (!fmt_valid(fmt) || block < 0)
        return rt_fail(ctx, RLX_E_INTERNAL, "mxquant: bad format %d or block %lld", fmt, (long long)block);
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    if (numel == 0)
        return RLX_OK;
    int64_t cols = x->shape[x->rank - 1], rows = numel / cols;
    double *row = ir_alloc((size_t)cols * sizeof *row);
    if (!row)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for a mxquant row of %lld elements", (long long)cols);
    /* Walk the rows: an odometer over the shape with the last axis folded. */
    int64_t rshape[IR_MAX_RANK];
    memcpy(rshape, x->shape, (size_t)x->rank * sizeof *rshape);
    rshape[x->rank - 1] = 1;
    const int64_t *strides[1] = {in[0].strides};
    int64_t cstride = in[0].strides[x->rank - 1];
    const char *src = in[0].st->data;
    rlx_dtype dt = x->dtype;
    double whole = 1; /* block 0: one scale from the whole tensor */
    rt_iter it;
    if (block == 0) {
        double amax = 0;
        rt_iter_init(&it, x->rank, rshape, 1, strides);
        it.off[0] = in[0].off;
        for (int64_t r = 0; r < rows; r++, rt_iter_next(&it))
            for (int64_t c = 0; c < cols; c++)
                amax = fmax(amax, finite_abs(rt_ld_f(src, dt, it.off[0] + c * cstride)));
        whole = block_scale(amax, emax);
    }
    rt_iter_init(&it, x->rank, rshape, 1, strides);
    it.off[0] = in[0].off;
    float *dst = out->st->data;
    int64_t bl = block ? block : cols;
    for (int64_t r = 0; r < rows; r++, rt_iter_next(&it)) {
        for (int64_t c = 0; c < cols; c++)
            row[c] = rt_ld_f(src, dt, it.off[0] + c * cstride);
        for (int64_t b0 = 0; b0 < cols; b0 += bl) {
            int64_t b1 = cols - b0 < bl ? cols : b0 + bl; /* a last partial block has its own scale */
            double scale = whole;
            if (block) {
                double amax = 0;
                for (int64_t c = b0; c < b1; c++)
                    amax = fmax(amax, finite_abs(row[c]));
                scale = block_scale(amax, emax);
            }
            for (int64_t c = b0; c < b1; c++)
                dst[r * cols + c] = (float)quantize(row[c], scale, fmt);
        }
    }
    ir_free(row);
    return RLX_OK;
}
