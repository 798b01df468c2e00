/*
 * ref_movement.c — views (reshape, permute, expand, slice) as stride
 * arithmetic over the source's storage, and the ops that must move data:
 * pad, cat, gather and scatter (with bounds checks), cumsum.
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

/* The rows of a view of n's shape: rt_iter over all dims but the last,
 * whose length and stride the caller's inner loop uses. */
static void rows_init(rt_iter *it, const ir_node *n, int nv, const int64_t *const *strides, const int64_t *offs)
{
    rt_iter_init(it, n->rank - 1, n->shape, nv, strides);
    for (int k = 0; k < nv; k++)
        it->off[k] = offs[k];
}

static int64_t rows_of(const ir_node *n) { return n->rank ? ir_numel(n->rank - 1, n->shape) : 0; }

/* SCATTER's accumulators: base's elements in row-major order, floats in
 * double (one rounding when stored), the others in 64-bit integers. */
typedef union {
    double f;
    int64_t i;
} scatter_acc;

static void scatter_load_base(const ir_node *x, const rt_view *in, bool fdom, scatter_acc *acc)
{
    int64_t len = x->shape[x->rank - 1], st = in->strides[x->rank - 1], rows = rows_of(x);
    const int64_t *strides[1] = {in->strides};
    rt_iter it;
    rows_init(&it, x, 1, strides, &in->off);
    for (int64_t r = 0, at = 0; r < rows; r++, rt_iter_next(&it))
        for (int64_t j = 0; j < len; j++, at++) {
            if (fdom)
                acc[at].f = rt_ld_f(in->st->data, x->dtype, it.off[0] + j * st);
            else
                acc[at].i = rt_ld_i(in->st->data, x->dtype, it.off[0] + j * st);
        }
}

/* Adds (or stores) every src element at its target, in index order. */
static void scatter_apply(const ir_node *n, const rt_view *in, bool fdom, scatter_acc *acc)
{
    const ir_node *idx = n->src[1], *v = n->src[2];
    int ax = n->attr.scatter.axis, last = idx->rank - 1;
    bool set = n->attr.scatter.mode == IR_SCATTER_SET;
    int64_t bst[IR_MAX_RANK], len = n->shape[ax];
    rt_contiguous_strides(n->rank, n->shape, bst);
    int64_t bax = bst[ax];
    bst[ax] = 0; /* the axis position comes from the index */
    int64_t cols = idx->shape[last], si = in[1].strides[last], sv = in[2].strides[last], sb = bst[last];
    const int64_t *strides[3] = {in[1].strides, in[2].strides, bst}, offs[3] = {in[1].off, in[2].off, 0};
    rt_iter it;
    rows_init(&it, idx, 3, strides, offs);
    for (int64_t r = 0, rows = rows_of(idx); r < rows; r++, rt_iter_next(&it))
        for (int64_t j = 0; j < cols; j++) {
            int64_t k = rt_ld_i(in[1].st->data, idx->dtype, it.off[0] + j * si);
            int64_t t = it.off[2] + j * sb + (k < 0 ? k + len : k) * bax, at = it.off[1] + j * sv;
            if (fdom) {
                double e = rt_ld_f(in[2].st->data, v->dtype, at);
                acc[t].f = set ? e : acc[t].f + e;
            } else {
                int64_t e = rt_ld_i(in[2].st->data, v->dtype, at);
                acc[t].i = set ? e : (int64_t)((uint64_t)acc[t].i + (uint64_t)e);
            }
        }
}

/* The first index outside [-len, len) along the axis, if any. */
static bool scatter_index_bad(const ir_node *n, const rt_view *vi, int64_t *bad)
{
    const ir_node *idx = n->src[1];
    int64_t len = n->shape[n->attr.scatter.axis], cols = idx->shape[idx->rank - 1], si = vi->strides[idx->rank - 1];
    const int64_t *strides[1] = {vi->strides};
    rt_iter it;
    rows_init(&it, idx, 1, strides, &vi->off);
    for (int64_t r = 0, rows = rows_of(idx); r < rows; r++, rt_iter_next(&it))
        for (int64_t j = 0; j < cols; j++) {
            int64_t k = rt_ld_i(vi->st->data, idx->dtype, it.off[0] + j * si);
            if (k < -len || k >= len) {
                *bad = k;
                return true;
            }
        }
    return false;
}

/* SCATTER (ops.def): base with src[p] added to, or stored at, its element
 * p with the axis coordinate replaced by index[p] (negative counts from
 * the end). Positions are visited in row-major order of the index, which
 * is index order for every target: duplicates add up in that order, or
 * the last one wins. Any index out of range fails before anything is
 * written; no thread count changes a bit. */
rlx_status rt_eval_scatter(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    int64_t numel = ir_node_numel(n), bad = 0;
    bool fdom = ir_dtype_is_float(n->dtype);
    if (ir_node_numel(n->src[1]) > 0 && scatter_index_bad(n, &in[1], &bad))
        return rt_fail(ctx, RLX_E_ARG, "scatter: index %lld out of range for axis %d of size %lld", (long long)bad,
                       n->attr.scatter.axis, (long long)n->shape[n->attr.scatter.axis]);
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    if (numel == 0)
        return RLX_OK;
    scatter_acc *acc = ir_alloc((size_t)numel * sizeof *acc);
    if (!acc)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory allocating scatter's accumulators");
    scatter_load_base(n->src[0], &in[0], fdom, acc);
    if (ir_node_numel(n->src[1]) > 0)
        scatter_apply(n, in, fdom, acc);
    for (int64_t i = 0; i < numel; i++) {
        if (fdom)
            rt_st_f(out->st->data, n->dtype, i, acc[i].f);
        else
            rt_st_i(out->st->data, n->dtype, i, acc[i].i);
    }
    ir_free(acc);
    return RLX_OK;
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
