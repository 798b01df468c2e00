/*
 * ref_movement.c — views (reshape, permute, expand, slice) as stride
 * arithmetic over the source's storage, and the ops that must move data:
 * pad, cat, gather (with bounds checks), cumsum.
 */
#include <string.h>

#include "runtime/rt.h"

static void view_of(const rt_view *in, rt_view *out)
{
    *out = *in;
    ir_storage_retain(out->st);
}

/* The reshape of view in to n's shape as strides over the same storage,
 * when each run of source dims that merges or splits into target dims
 * steps through memory as one dim (a split of a narrowed row, the q/k/v
 * heads of a fused projection); false when it needs a copy. */
static bool reshape_strides(const ir_node *x, const rt_view *in, const ir_node *n, int64_t *st)
{
    int64_t os[IR_MAX_RANK], ost[IR_MAX_RANK];
    int orank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (x->shape[d] == 0)
            return false; /* empty: the contiguous copy costs nothing */
        if (x->shape[d] != 1) {
            os[orank] = x->shape[d];
            ost[orank++] = in->strides[d];
        }
    }
    int oi = 0, ni = 0;
    while (oi < orank && ni < n->rank) {
        int oj = oi + 1, nj = ni + 1;
        int64_t op = os[oi], np = n->shape[ni];
        while (op != np) {
            if (np < op) {
                if (nj == n->rank)
                    return false;
                np *= n->shape[nj++];
            } else {
                if (oj == orank)
                    return false;
                op *= os[oj++];
            }
        }
        for (int k = oi; k + 1 < oj; k++)
            if (ost[k] != ost[k + 1] * os[k + 1])
                return false;
        st[nj - 1] = ost[oj - 1];
        for (int k = nj - 1; k > ni; k--)
            st[k - 1] = st[k] * n->shape[k];
        oi = oj;
        ni = nj;
    }
    for (; ni < n->rank; ni++)
        st[ni] = 1; /* trailing dims of extent 1 */
    return oi == orank;
}

/* A contiguous view of the source: in itself when it is contiguous. */
static rlx_status contiguous_src(rt_ctx *ctx, const ir_node *src, const rt_view *in, rt_view *out)
{
    if (rt_view_is_contiguous(src, in)) {
        view_of(in, out);
        rt_contiguous_strides(src->rank, src->shape, out->strides);
        return RLX_OK;
    }
    return rt_materialize(ctx, src, in, out);
}

static rlx_status eval_pad(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0];
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    int64_t numel = ir_node_numel(n), xn = ir_node_numel(x);
    for (int64_t i = 0; i < numel; i++)
        rt_st_f(out->st->data, n->dtype, i, n->attr.pad.value);
    int64_t off = 0;
    for (int d = 0; d < n->rank; d++)
        off += n->attr.pad.before[d] * out->strides[d];
    const int64_t *strides[2] = {in->strides, out->strides};
    rt_iter it;
    rt_iter_init(&it, x->rank, x->shape, 2, strides);
    it.off[0] = in->off;
    it.off[1] = off;
    size_t es = ir_dtype_size(n->dtype);
    for (int64_t i = 0; i < xn; i++, rt_iter_next(&it))
        memcpy((char *)out->st->data + it.off[1] * (int64_t)es, (const char *)in->st->data + it.off[0] * (int64_t)es, es);
    return RLX_OK;
}

rlx_status rt_eval_movement(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0];
    const ir_attrs *a = &n->attr;
    switch (n->op) {
    case IR_OP_RESHAPE:
        if (!rt_view_is_contiguous(x, in) && reshape_strides(x, in, n, out->strides)) {
            int64_t st[IR_MAX_RANK];
            memcpy(st, out->strides, sizeof st);
            view_of(in, out);
            memcpy(out->strides, st, sizeof st);
            return RLX_OK;
        }
        if (contiguous_src(ctx, x, in, out))
            return ctx->status;
        rt_contiguous_strides(n->rank, n->shape, out->strides);
        return RLX_OK;
    case IR_OP_PERMUTE:
        view_of(in, out);
        for (int i = 0; i < n->rank; i++)
            out->strides[i] = in->strides[a->perm.perm[i]];
        return RLX_OK;
    case IR_OP_EXPAND:
        view_of(in, out);
        for (int i = 0; i < n->rank; i++)
            if (x->shape[i] != n->shape[i])
                out->strides[i] = 0;
        return RLX_OK;
    case IR_OP_SLICE:
        view_of(in, out);
        for (int i = 0; i < n->rank; i++) {
            if (a->slice.len[i] > 0)
                out->off += a->slice.start[i] * in->strides[i];
            out->strides[i] = in->strides[i] * a->slice.step[i];
        }
        return RLX_OK;
    case IR_OP_PAD:
        return eval_pad(ctx, n, in, out);
    default:
        return rt_fail(ctx, RLX_E_INTERNAL, "%s is not a movement op", ir_ops[n->op].name);
    }
}

rlx_status rt_eval_cat(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    int ax = n->attr.ax.axis;
    size_t es = ir_dtype_size(n->dtype);
    int64_t at = 0;
    for (int s = 0; s < n->nsrc; s++) {
        const ir_node *x = n->src[s];
        const int64_t *strides[2] = {in[s].strides, out->strides};
        rt_iter it;
        rt_iter_init(&it, x->rank, x->shape, 2, strides);
        it.off[0] = in[s].off;
        it.off[1] = at * out->strides[ax];
        int64_t xn = ir_node_numel(x);
        for (int64_t i = 0; i < xn; i++, rt_iter_next(&it))
            memcpy((char *)out->st->data + it.off[1] * (int64_t)es,
                   (const char *)in[s].st->data + it.off[0] * (int64_t)es, es);
        at += x->shape[ax];
    }
    return RLX_OK;
}

rlx_status rt_eval_gather(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0], *idx = n->src[1];
    int ax = n->attr.ax.axis;
    rt_view xc = {0}, ic = {0};
    if (contiguous_src(ctx, x, &in[0], &xc) || contiguous_src(ctx, idx, &in[1], &ic) ||
        rt_alloc_out(ctx, n, out, false))
        goto out;
    int64_t outer = 1, inner = 1, len = x->shape[ax], ni = ir_node_numel(idx);
    for (int d = 0; d < ax; d++)
        outer *= x->shape[d];
    for (int d = ax + 1; d < x->rank; d++)
        inner *= x->shape[d];
    size_t es = ir_dtype_size(n->dtype);
    const char *xs = rt_base(&xc, x->dtype);
    const void *is = rt_base(&ic, idx->dtype);
    char *dst = out->st->data;
    for (int64_t j = 0; j < ni; j++) {
        int64_t k = rt_ld_i(is, idx->dtype, j);
        if (k < -len || k >= len) {
            rt_fail(ctx, RLX_E_ARG, "gather: index %lld out of range for axis %d of size %lld", (long long)k, ax,
                    (long long)len);
            goto out;
        }
    }
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < ni; j++) {
            int64_t k = rt_ld_i(is, idx->dtype, j);
            k += k < 0 ? len : 0;
            memcpy(dst + ((o * ni + j) * inner) * (int64_t)es, xs + ((o * len + k) * inner) * (int64_t)es,
                   (size_t)inner * es);
        }
    }
out:
    ir_storage_release(xc.st);
    ir_storage_release(ic.st);
    return ctx->status;
}

rlx_status rt_eval_cumsum(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0];
    rt_view xc = {0};
    if (contiguous_src(ctx, x, in, &xc) || rt_alloc_out(ctx, n, out, false)) {
        ir_storage_release(xc.st);
        return ctx->status;
    }
    int ax = n->attr.scan.axis;
    bool excl = n->attr.scan.exclusive, fdom = ir_dtype_is_float(n->dtype);
    int64_t outer = 1, inner = 1, len = x->shape[ax];
    for (int d = 0; d < ax; d++)
        outer *= x->shape[d];
    for (int d = ax + 1; d < x->rank; d++)
        inner *= x->shape[d];
    const void *src = rt_base(&xc, x->dtype);
    void *dst = out->st->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            double fs = 0;
            int64_t is = 0;
            for (int64_t k = 0; k < len; k++) {
                int64_t at = (o * len + k) * inner + i;
                if (fdom) {
                    double v = rt_ld_f(src, x->dtype, at);
                    rt_st_f(dst, n->dtype, at, excl ? fs : fs + v);
                    fs += v;
                } else {
                    int64_t v = rt_ld_i(src, x->dtype, at);
                    rt_st_i(dst, n->dtype, at, excl ? is : (int64_t)((uint64_t)is + (uint64_t)v));
                    is = (int64_t)((uint64_t)is + (uint64_t)v);
                }
            }
        }
    }
    ir_storage_release(xc.st);
    return RLX_OK;
}
