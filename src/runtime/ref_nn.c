/*
 * ref_nn.c — reference evaluators of CONV2D and POOL2D: direct loops over
 * strided views, accumulating in double. Convolution zero-pads, supports
 * stride, dilation and groups; max pooling treats padding as -inf and
 * propagates NaN; average pooling counts the padding (divides by KH*KW).
 * Padded taps are skipped, never read, so nothing is read out of bounds.
 */
#include <math.h>

#include "runtime/rt.h"

rlx_status rt_eval_conv2d(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0], *w = n->src[1];
    rlx_dtype dt = n->dtype;
    const int64_t *xs = in[0].strides, *ws = in[1].strides;
    const void *xp = in[0].st->data, *wp = in[1].st->data;
    int64_t nb = x->shape[0], hin = x->shape[2], win = x->shape[3];
    int64_t oc = n->shape[1], oh = n->shape[2], ow = n->shape[3];
    int64_t cg = w->shape[1], kh = w->shape[2], kw = w->shape[3];
    int64_t og = oc / n->attr.conv.groups; /* output channels per group */
    const int *s = n->attr.conv.stride, *p = n->attr.conv.pad, *d = n->attr.conv.dil;
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    void *dst = out->st->data;
    int64_t o = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t c = 0; c < oc; c++) {
            int64_t cbase = (c / og) * cg; /* first input channel of c's group */
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double acc = 0;
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t u = 0; u < kh; u++) {
                            int64_t y = i * s[0] - p[0] + u * d[0];
                            if (y < 0 || y >= hin)
                                continue;
                            for (int64_t v = 0; v < kw; v++) {
                                int64_t z = j * s[1] - p[1] + v * d[1];
                                if (z < 0 || z >= win)
                                    continue;
                                acc += rt_ld_f(xp, dt, in[0].off + b * xs[0] + (cbase + ci) * xs[1] + y * xs[2] + z * xs[3]) *
                                       rt_ld_f(wp, dt, in[1].off + c * ws[0] + ci * ws[1] + u * ws[2] + v * ws[3]);
                            }
                        }
                    rt_st_f(dst, dt, o++, acc);
                }
        }
    return RLX_OK;
}

rlx_status rt_eval_pool2d(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0];
    rlx_dtype dt = n->dtype;
    const int64_t *xs = in[0].strides;
    const void *xp = in[0].st->data;
    int64_t hin = x->shape[2], win = x->shape[3];
    int64_t oh = n->shape[2], ow = n->shape[3];
    const int *k = n->attr.pool.kernel, *s = n->attr.pool.stride, *p = n->attr.pool.pad;
    bool avg = n->attr.pool.kind == IR_POOL_AVG;
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    void *dst = out->st->data;
    int64_t o = 0;
    for (int64_t b = 0; b < n->shape[0]; b++)
        for (int64_t c = 0; c < n->shape[1]; c++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    /* Padding adds 0 to the sum and -inf to the max: skipping it does both. */
                    double acc = avg ? 0 : -INFINITY;
                    for (int64_t u = 0; u < k[0]; u++) {
                        int64_t y = i * s[0] - p[0] + u;
                        if (y < 0 || y >= hin)
                            continue;
                        for (int64_t v = 0; v < k[1]; v++) {
                            int64_t z = j * s[1] - p[1] + v;
                            if (z < 0 || z >= win)
                                continue;
                            double e = rt_ld_f(xp, dt, in[0].off + b * xs[0] + c * xs[1] + y * xs[2] + z * xs[3]);
                            if (avg)
                                acc += e;
                            else if (e != e || (acc == acc && e > acc))
                                acc = e; /* NaN, once seen, stays */
                        }
                    }
                    rt_st_f(dst, dt, o++, avg ? acc / ((double)k[0] * k[1]) : acc);
                }
    return RLX_OK;
}
