/*
 * ref_quant.c — the reference semantics of QMATMUL (rlx_linear_q8): each
 * weight dequantized in double, W[n,k] = (wq[n,k] - zp[n]) * scale[n], and
 * a plain double dot product per output, rounded once on store.
 *
 * This is the oracle the JIT's library kernel (kernels/q8gemm.c, f32 panels
 * and sgemm) is checked against, so it shares no code with it: no BLAS, no
 * blocking, every operand read through its strides.
 */
#include "runtime/rt.h"

rlx_status rt_eval_qmatmul_ref(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0], *w = n->src[1], *s = n->src[2], *z = n->nsrc > 3 ? n->src[3] : NULL;
    int64_t nout = w->shape[0], k = w->shape[1], rows = ir_numel(x->rank - 1, x->shape);
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    double *wd = ir_alloc((size_t)(nout * k > 0 ? nout * k : 1) * sizeof *wd);
    if (!wd)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for a dequantized [%lld,%lld] weight", (long long)nout,
                       (long long)k);
    const char *wb = rt_base(&in[1], w->dtype), *sb = rt_base(&in[2], s->dtype);
    const char *zb = z ? rt_base(&in[3], z->dtype) : NULL;
    for (int64_t j = 0; j < nout; j++) {
        double zp = z ? (double)rt_ld_i(zb, z->dtype, j * in[3].strides[0]) : 0;
        double sc = rt_ld_f(sb, s->dtype, j * in[2].strides[0]);
        for (int64_t i = 0; i < k; i++)
            wd[j * k + i] = ((double)rt_ld_i(wb, w->dtype, j * in[1].strides[0] + i * in[1].strides[1]) - zp) * sc;
    }
    const char *xb = rt_base(&in[0], x->dtype);
    char *ob = rt_base(out, n->dtype);
    int64_t xk = in[0].strides[x->rank - 1];
    rt_iter it;
    rt_iter_init(&it, x->rank - 1, x->shape, 1, (const int64_t *const[]){in[0].strides});
    for (int64_t r = 0; r < rows; r++, rt_iter_next(&it))
        for (int64_t j = 0; j < nout; j++) {
            double acc = 0;
            for (int64_t i = 0; i < k; i++)
                acc += rt_ld_f(xb, x->dtype, it.off[0] + i * xk) * wd[j * k + i];
            rt_st_f(ob, n->dtype, r * nout + j, acc);
        }
    ir_free(wd);
    return RLX_OK;
}
