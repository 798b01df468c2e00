/*
 * scatter.c — the SCATTER primitive (ops.def, LIB): base with src added
 * to, or stored at, the positions an index names along an axis. Both
 * backends run this kernel (the gradient of gather, index_select and the
 * cross-entropies' label pick is one scatter-add): a plain loop in index
 * order, so duplicates accumulate in the same order at any thread count,
 * floats in double with one rounding per element.
 */
#include "runtime/exec/pool.h"
#include "runtime/rt.h"

/* An odometer over every dim of n but the last, each row's offset in
 * off[k]: rows_of(n) rows of n->shape[rank-1] elements. */
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
    if (x->dtype == RLX_F32 && rt_view_is_contiguous(x, in)) { /* the gradients' case, without the generic loads */
        const float *b = (const float *)in->st->data + in->off;
        for (int64_t i = 0, n = ir_node_numel(x); i < n; i++)
            acc[i].f = b[i];
        return;
    }
    bool one = true; /* a broadcast value (the gradients' zeros): one load */
    for (int d = 0; d < x->rank; d++)
        one = one && (in->strides[d] == 0 || x->shape[d] == 1);
    if (one) {
        scatter_acc a;
        if (fdom)
            a.f = rt_ld_f(in->st->data, x->dtype, in->off);
        else
            a.i = rt_ld_i(in->st->data, x->dtype, in->off);
        for (int64_t i = 0, n = ir_node_numel(x); i < n; i++)
            acc[i] = a;
        return;
    }
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

/* a[j * sa] += v[j * sv] for j < n, a and v disjoint (the accumulators
 * are scatter's own buffer): the unit-stride case vectorizes. */
static void scatter_add_row(double *restrict a, int64_t sa, const float *restrict v, int64_t sv, int64_t n)
{
    if (sa == 1 && sv == 1) {
        for (int64_t j = 0; j < n; j++)
            a[j] += v[j];
        return;
    }
    for (int64_t j = 0; j < n; j++)
        a[j * sa] += v[j * sv];
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
    if (fdom && !set && v->dtype == RLX_F32 && (idx->dtype == RLX_I64 || idx->dtype == RLX_I32)) {
        /* a float scatter-add (the gradients'): the same loop, the loads typed */
        const float *vs = in[2].st->data;
        bool i64 = idx->dtype == RLX_I64;
        for (int64_t r = 0, rows = rows_of(idx); r < rows; r++, rt_iter_next(&it)) {
            const int64_t *i8 = (const int64_t *)in[1].st->data + it.off[0];
            const int32_t *i4 = (const int32_t *)in[1].st->data + it.off[0];
            if (si == 0 && cols > 0) { /* one target row per index row (an embedding's gradient): a vector loop */
                int64_t k = i64 ? i8[0] : i4[0];
                scatter_add_row(&acc[it.off[2] + (k < 0 ? k + len : k) * bax].f, sb, vs + it.off[1], sv, cols);
                continue;
            }
            for (int64_t j = 0; j < cols; j++) {
                int64_t k = i64 ? i8[j * si] : i4[j * si];
                acc[it.off[2] + j * sb + (k < 0 ? k + len : k) * bax].f += vs[it.off[1] + j * sv];
            }
        }
        return;
    }
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
    if (si == 0) /* an index broadcast along its last dim: one value per row */
        cols = cols ? 1 : 0;
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
    /* from the buffer pool, whose memory stays mapped: a fresh heap block
     * this large is a fresh mmap, ~200 page faults (~8 ms) for the GPT
     * step's label-pick gradient on every first run */
    size_t accb = (size_t)numel * sizeof(scatter_acc);
    ir_storage *accst = accb >= RT_BUFPOOL_MIN ? rt_bufpool_storage(accb) : NULL;
    scatter_acc *acc = accst ? accst->data : accb < RT_BUFPOOL_MIN ? ir_alloc(accb) : NULL;
    if (!acc)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory allocating scatter's accumulators");
    scatter_load_base(n->src[0], &in[0], fdom, acc);
    if (ir_node_numel(n->src[1]) > 0)
        scatter_apply(n, in, fdom, acc);
    if (n->dtype == RLX_F32) {
        float *o = out->st->data;
        for (int64_t i = 0; i < numel; i++)
            o[i] = (float)acc[i].f;
        numel = 0;
    }
    for (int64_t i = 0; i < numel; i++) {
        if (fdom)
            rt_st_f(out->st->data, n->dtype, i, acc[i].f);
        else
            rt_st_i(out->st->data, n->dtype, i, acc[i].i);
    }
    if (accst)
        ir_storage_release(accst);
    else
        ir_free(acc);
    return RLX_OK;
}
