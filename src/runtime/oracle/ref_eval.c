/*
 * ref_eval.c — the reference evaluator's driver: order the graph, compute
 * one primitive at a time, free each value after its last use, and publish
 * the roots' payloads.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/scratch.h"
#include "passes/passes.h"
#include "runtime/exec/pool.h"
#include "runtime/rt.h"

rlx_status rt_fail(rt_ctx *ctx, rlx_status st, const char *fmt, ...)
{
    if (ctx->status != RLX_OK)
        return ctx->status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
    va_end(ap);
    ctx->status = st;
    return st;
}

void rt_contiguous_strides(int rank, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        /* candidate fix: wraps only for an empty tensor with huge other
         * dims, whose strides are never used */
        s = (int64_t)((uint64_t)s * (uint64_t)(shape[i] > 0 ? shape[i] : 1));
    }
}

bool rt_view_is_contiguous(const ir_node *n, const rt_view *v)
{
    if (ir_node_numel(n) == 0)
        return true; /* no element to misplace */
    int64_t s = 1;
    for (int i = n->rank - 1; i >= 0; i--) {
        if (n->shape[i] != 1 && v->strides[i] != s)
            return false;
        s *= n->shape[i];
    }
    return true;
}

void rt_iter_init(rt_iter *it, int rank, const int64_t *shape, int nv, const int64_t *const *strides)
{
    memset(it, 0, sizeof *it);
    it->rank = rank;
    it->nv = nv;
    memcpy(it->shape, shape, (size_t)rank * sizeof *shape);
    for (int k = 0; k < nv; k++)
        memcpy(it->strides[k], strides[k], (size_t)rank * sizeof *shape);
}

rlx_status rt_alloc_out(rt_ctx *ctx, const ir_node *n, rt_view *out, bool zero)
{
    size_t bytes = ir_node_bytes(n);
    memset(out, 0, sizeof *out);
    /* large payloads come from the recycling pool: a fresh buffer's first
     * touch costs a page fault per 4 KiB, more than most kernels writing it */
    bool pooled = bytes >= RT_BUFPOOL_MIN;
    out->st = pooled ? rt_bufpool_storage(bytes) : rt_storage_alloc(bytes, zero);
    if (!out->st)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory allocating %zu bytes for %s", bytes, ir_ops[n->op].name);
    if (pooled && zero)
        memset(out->st->data, 0, bytes);
    rt_contiguous_strides(n->rank, n->shape, out->strides);
    ctx->live_bytes += bytes;
    if (ctx->live_bytes > ctx->peak_bytes)
        ctx->peak_bytes = ctx->live_bytes;
    return RLX_OK;
}

rlx_status rt_materialize(rt_ctx *ctx, const ir_node *n, const rt_view *v, rt_view *out)
{
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    size_t es = ir_dtype_size(n->dtype);
    int64_t numel = ir_node_numel(n);
    rt_count_copy((uint64_t)numel * es);
    const char *src = (const char *)v->st->data;
    char *dst = out->st->data;
    const int64_t *strides[1] = {v->strides};
    rt_iter it;
    rt_iter_init(&it, n->rank, n->shape, 1, strides);
    it.off[0] = v->off;
    for (int64_t i = 0; i < numel; i++, rt_iter_next(&it))
        memcpy(dst + i * (int64_t)es, src + it.off[0] * (int64_t)es, es);
    return RLX_OK;
}

/* The evaluator of each primitive; BUFFER has none (it is always realized). */
static const rt_eval_fn ref_fns[IR_OP_COUNT] = {
    [IR_OP_CONST] = rt_eval_leaf, [IR_OP_IOTA] = rt_eval_leaf, [IR_OP_RAND] = rt_eval_leaf,
    [IR_OP_INPUT] = rt_eval_leaf, /* reports the unbound input */
    [IR_OP_EXP] = rt_eval_elementwise, [IR_OP_EXPM1] = rt_eval_elementwise, [IR_OP_LOG] = rt_eval_elementwise,
    [IR_OP_LOG1P] = rt_eval_elementwise, [IR_OP_SIN] = rt_eval_elementwise, [IR_OP_COS] = rt_eval_elementwise,
    [IR_OP_TAN] = rt_eval_elementwise, [IR_OP_ATAN] = rt_eval_elementwise, [IR_OP_SQRT] = rt_eval_elementwise,
    [IR_OP_RSQRT] = rt_eval_elementwise, [IR_OP_RECIP] = rt_eval_elementwise, [IR_OP_TANH] = rt_eval_elementwise,
    [IR_OP_ERF] = rt_eval_elementwise, [IR_OP_SIGMOID] = rt_eval_elementwise, [IR_OP_NEG] = rt_eval_elementwise,
    [IR_OP_ABS] = rt_eval_elementwise, [IR_OP_SIGN] = rt_eval_elementwise, [IR_OP_ROUND] = rt_eval_elementwise,
    [IR_OP_FLOOR] = rt_eval_elementwise, [IR_OP_CEIL] = rt_eval_elementwise, [IR_OP_NOT] = rt_eval_elementwise,
    [IR_OP_CAST] = rt_eval_elementwise, [IR_OP_CONTIGUOUS] = rt_eval_elementwise,
    [IR_OP_STOP_GRAD] = rt_eval_elementwise,
    [IR_OP_ADD] = rt_eval_elementwise, [IR_OP_SUB] = rt_eval_elementwise, [IR_OP_MUL] = rt_eval_elementwise,
    [IR_OP_DIV] = rt_eval_elementwise, [IR_OP_POW] = rt_eval_elementwise, [IR_OP_MAX] = rt_eval_elementwise,
    [IR_OP_MIN] = rt_eval_elementwise, [IR_OP_ATAN2] = rt_eval_elementwise, [IR_OP_REM] = rt_eval_elementwise,
    [IR_OP_EQ] = rt_eval_elementwise, [IR_OP_NE] = rt_eval_elementwise, [IR_OP_LT] = rt_eval_elementwise,
    [IR_OP_LE] = rt_eval_elementwise, [IR_OP_GT] = rt_eval_elementwise, [IR_OP_GE] = rt_eval_elementwise,
    [IR_OP_AND] = rt_eval_elementwise, [IR_OP_OR] = rt_eval_elementwise, [IR_OP_WHERE] = rt_eval_elementwise,
    [IR_OP_SUM] = rt_eval_reduce, [IR_OP_PROD] = rt_eval_reduce, [IR_OP_RMAX] = rt_eval_reduce,
    [IR_OP_RMIN] = rt_eval_reduce, [IR_OP_ARGMAX] = rt_eval_reduce, [IR_OP_ARGMIN] = rt_eval_reduce,
    [IR_OP_RESHAPE] = rt_eval_movement, [IR_OP_PERMUTE] = rt_eval_movement, [IR_OP_EXPAND] = rt_eval_movement,
    [IR_OP_PAD] = rt_eval_movement, [IR_OP_SLICE] = rt_eval_movement,
    [IR_OP_CAT] = rt_eval_cat, [IR_OP_GATHER] = rt_eval_gather,
    [IR_OP_SCATTER] = rt_eval_scatter, [IR_OP_CUMSUM] = rt_eval_cumsum,
    [IR_OP_MATMUL] = rt_eval_matmul, [IR_OP_SOLVE] = rt_eval_solve, [IR_OP_FFT] = rt_eval_fft,
    [IR_OP_CONV2D] = rt_eval_conv2d, [IR_OP_POOL2D] = rt_eval_pool2d, [IR_OP_MXQUANT] = rt_eval_mxquant,
    [IR_OP_ATTENTION] = rt_eval_attention, [IR_OP_ATTENTION_BWD] = rt_eval_attention_bwd_ref,
    [IR_OP_ARGSORT] = rt_eval_argsort, [IR_OP_MULTINOMIAL] = rt_eval_multinomial,
    [IR_OP_RAND_SEEDED] = rt_eval_rand_seeded,
    [IR_OP_CONJ] = rt_eval_elementwise, [IR_OP_IMAG] = rt_eval_elementwise, [IR_OP_COMPLEX] = rt_eval_elementwise,
    [IR_OP_QMATMUL] = rt_eval_qmatmul_ref,
};

rt_eval_fn rt_ref_eval_fn(ir_op op) { return op >= 0 && op < IR_OP_COUNT ? ref_fns[op] : NULL; }

rt_eval_fn rt_lib_eval_fn(ir_op op)
{
    return op == IR_OP_QMATMUL ? rt_eval_qmatmul : op == IR_OP_ATTENTION_BWD ? rt_eval_attention_bwd : rt_ref_eval_fn(op);
}

static void view_release(rt_ctx *ctx, const ir_node *n, rt_view *v, bool owned_payload)
{
    if (!v->st)
        return;
    if (owned_payload && ctx->live_bytes >= ir_node_bytes(n))
        ctx->live_bytes -= ir_node_bytes(n);
    ir_storage_release(v->st);
    v->st = NULL;
}

rlx_status rt_publish(rt_ctx *ctx, ir_node *root, const rt_view *v)
{
    if (ir_node_storage(root))
        return RLX_OK; /* realized meanwhile (another thread, or a repeated root) */
    rt_view tmp = {0};
    const rt_view *src = v;
    if (!rt_view_is_contiguous(root, v)) {
        if (rt_materialize(ctx, root, v, &tmp))
            return ctx->status;
        src = &tmp;
    }
    ir_storage_retain(src->st);
    ir_node_set_storage(root, src->st, (size_t)src->off * ir_dtype_size(root->dtype));
    ir_storage_release(tmp.st);
    return RLX_OK;
}

rlx_status rt_ref_realize(ir_node *const *roots, int nroots, rt_ctx *ctx)
{
    sched_liveness lv;
    if (!sched_liveness_build(roots, nroots, &lv))
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory ordering the graph");
    rt_view *views = ir_calloc((size_t)lv.count, sizeof *views);
    bool *fresh = ir_calloc((size_t)lv.count, sizeof *fresh);
    rt_view in[IR_MAX_RANK + 8];
    ir_scratch in_mem = IR_SCRATCH(in);
    rt_view *inputs = in;
    if (!views || !fresh) {
        rt_fail(ctx, RLX_E_NOMEM, "out of memory for the evaluation state");
        goto out;
    }
    for (long i = 0; i < lv.count && ctx->status == RLX_OK; i++) {
        ir_node *n = lv.order[i];
        ir_storage *st = ir_node_storage(n);
        if (st) {
            ir_storage_retain(st);
            views[i].st = st;
            views[i].off = (int64_t)(n->offset / ir_dtype_size(n->dtype));
            rt_contiguous_strides(n->rank, n->shape, views[i].strides);
            continue;
        }
        long ns = lv.src_start[i + 1] - lv.src_start[i];
        if (!(inputs = ir_scratch_get(&in_mem, (size_t)ns * sizeof *inputs))) {
            inputs = in;
            rt_fail(ctx, RLX_E_NOMEM, "out of memory");
            break;
        }
        for (long k = 0; k < ns; k++)
            inputs[k] = views[lv.src_index[lv.src_start[i] + k]];
        rt_eval_fn fn = rt_ref_eval_fn(n->op);
        if (!fn) {
            rt_fail(ctx, RLX_E_INTERNAL, "no reference evaluator for %s", ir_ops[n->op].name);
            break;
        }
        if (ir_node_numel(n) == 0 && ir_ops[n->op].cls != IR_CLS_MOVEMENT && n->op != IR_OP_INPUT) {
            /* candidate fix: nothing to compute (loops over the other dims
             * of an empty tensor may be 2^62 long) */
            if (rt_alloc_out(ctx, n, &views[i], false))
                break;
        } else if (fn(ctx, n, inputs, &views[i]) != RLX_OK)
            break;
        ctx->nodes_run++;
        /* Movement ops return a view of their source's storage; only fresh
         * buffers count as live intermediate memory. */
        fresh[i] = ns == 0 || views[i].st != inputs[0].st;
        for (long k = 0; k < ns; k++) {
            long j = lv.src_index[lv.src_start[i] + k];
            if (--lv.uses[j] == 0)
                view_release(ctx, lv.order[j], &views[j], fresh[j]);
        }
    }
    for (int r = 0; r < nroots && ctx->status == RLX_OK; r++) {
        ir_node *root = roots[r];
        if (ir_node_storage(root) && root->op != IR_OP_CONTIGUOUS)
            continue;
        for (long i = 0; i < lv.count; i++)
            if (lv.order[i] == root && views[i].st && !ir_node_storage(root))
                rt_publish(ctx, root, &views[i]);
    }
out:
    ir_scratch_free(&in_mem);
    for (long i = 0; views && i < lv.count; i++)
        view_release(ctx, lv.order[i], &views[i], fresh && fresh[i]);
    ir_free(views);
    ir_free(fresh);
    sched_liveness_free(&lv);
    return ctx->status;
}
