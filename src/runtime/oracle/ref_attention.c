/*
 * ref_attention.c — the reference semantics of ATTENTION_BWD: per batch,
 * head and query row, the whole row of scores in double (positional mask,
 * mask tensor), its softmax, dP = g . v, dS = P (dP - g . o), and dq, dk,
 * dv summed in double, rounded once on store.
 *
 * This is the oracle the library kernel (kernels/attention.c: row blocks,
 * BLAS) is checked against, so it shares no code with it: every operand is
 * read through its strides, no blocking.
 */
#include <math.h>

#include "runtime/rt.h"

/* Element (b, s, c) of source i. */
static double ld3(const rt_view *v, const ir_node *x, int64_t b, int64_t s, int64_t c)
{
    return rt_ld_f(rt_base(v, x->dtype), x->dtype, b * v->strides[0] + s * v->strides[1] + c * v->strides[2]);
}

rlx_status rt_eval_attention_bwd_ref(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *q = n->src[0], *k = n->src[1], *m = n->nsrc == 6 ? n->src[5] : NULL;
    int64_t nb = q->shape[0], sq = q->shape[1], sk = k->shape[1];
    int64_t h = n->attr.attn.heads, hk = n->attr.attn.kv_heads, d = n->attr.attn.head_dim, g = h / hk;
    int kind = n->attr.attn.mask, win = n->attr.attn.window;
    double scale = n->attr.attn.scale;
    int64_t nq = nb * sq * h * d, nk = nb * sk * hk * d;
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    double *acc = ir_calloc((size_t)(nq + 2 * nk > 0 ? nq + 2 * nk : 1), sizeof *acc);
    double *p = ir_alloc((size_t)(2 * sk + 1) * sizeof *p), *ds = p + sk;
    if (!acc || !p) {
        ir_free(acc);
        ir_free(p);
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for the attention_bwd reference");
    }
    double *dq = acc, *dk = acc + nq, *dv = dk + nk;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t hh = 0; hh < h; hh++) {
            int64_t kh = hh / g;
            for (int64_t i = 0; i < sq; i++) {
                int64_t pos = sk - sq + i; /* query i at key position pos */
                double mx = -INFINITY;
                for (int64_t jj = 0; jj < sk; jj++) {
                    double s = 0;
                    for (int64_t e = 0; e < d; e++)
                        s += ld3(&in[0], q, b, i, hh * d + e) * ld3(&in[1], k, b, jj, kh * d + e);
                    s *= scale;
                    bool keep = kind == RLX_MASK_NONE || (jj <= pos && (kind != RLX_MASK_SLIDING || jj > pos - win));
                    if (m) {
                        int64_t idx[4] = {b, hh, i, jj}, off = 0;
                        for (int a = 0; a < 4; a++)
                            off += (m->shape[a] == 1 ? 0 : idx[a]) * in[5].strides[a];
                        const char *mb = rt_base(&in[5], m->dtype);
                        if (m->dtype == RLX_BOOL)
                            keep = keep && ((const unsigned char *)mb)[off];
                        else
                            s += rt_ld_f(mb, m->dtype, off);
                    }
                    p[jj] = keep ? s : -INFINITY;
                    mx = p[jj] > mx ? p[jj] : mx;
                }
                double sum = 0;
                for (int64_t jj = 0; jj < sk; jj++) {
                    p[jj] = mx == -INFINITY ? 0 : exp(p[jj] - mx);
                    sum += p[jj];
                }
                double rs = 0;
                for (int64_t e = 0; e < d; e++)
                    rs += ld3(&in[4], n->src[4], b, i, hh * d + e) * ld3(&in[3], n->src[3], b, i, hh * d + e);
                for (int64_t jj = 0; jj < sk; jj++) {
                    p[jj] = sum > 0 ? p[jj] / sum : 0;
                    double dp = 0;
                    for (int64_t e = 0; e < d; e++)
                        dp += ld3(&in[4], n->src[4], b, i, hh * d + e) * ld3(&in[2], n->src[2], b, jj, kh * d + e);
                    ds[jj] = p[jj] * (dp - rs);
                }
                for (int64_t jj = 0; jj < sk; jj++)
                    for (int64_t e = 0; e < d; e++) {
                        int64_t kv = (b * sk + jj) * hk * d + kh * d + e;
                        dq[(b * sq + i) * h * d + hh * d + e] += scale * ds[jj] * ld3(&in[1], k, b, jj, kh * d + e);
                        dk[kv] += scale * ds[jj] * ld3(&in[0], q, b, i, hh * d + e);
                        dv[kv] += p[jj] * ld3(&in[4], n->src[4], b, i, hh * d + e);
                    }
            }
        }
    char *ob = rt_base(out, n->dtype);
    for (int64_t x = 0; x < nq + 2 * nk; x++)
        rt_st_f(ob, n->dtype, x, acc[x]);
    ir_free(acc);
    ir_free(p);
    return RLX_OK;
}
