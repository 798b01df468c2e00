/*
 * jit_exec.c — walks a schedule (passes/schedule.c): LOOP kernels run as
 * compiled code (codegen_llvm, cached), REF kernels through the reference
 * evaluator's rt_eval_* function of their op, VIEW kernels publish a root
 * as a view. Outputs of at least 1 MiB come from the recycling buffer
 * pool (bufpool.c), smaller ones from malloc; intermediates are freed
 * (returned) after their last reader (the arena planner is future work);
 * results are published exactly as rt_ref_realize publishes them.
 *
 * A kernel with enough work splits its loop dim 0 over the thread pool
 * (pool.c) in chunks of about CHUNK_WORK loop iterations.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "runtime/jit_exec.h"

/* Loop iterations per chunk: large enough that a chunk costs far more than
 * taking it, small enough to balance two busy cores. Below two chunks a
 * kernel runs inline. */
enum { CHUNK_WORK = 32768 };


typedef struct {
    rt_ctx *ctx;
    rt_jit_stats *stats;
    int nthreads;
    sched_schedule s;
    ir_map produced; /* node -> index of the kernel that computes it */
    rt_view *vals;   /* contiguous result of each kernel (st NULL when none) */
    long *last;      /* last kernel reading each kernel's result */
} exec;

static long producer(const exec *e, const ir_node *n) { return ir_map_get(&e->produced, n); }

/* A contiguous view of a realized or computed value; false if n is neither. */
static bool base_view(exec *e, const ir_node *n, rt_view *out)
{
    memset(out, 0, sizeof *out);
    ir_storage *st = ir_node_storage(n);
    if (st) {
        out->off = (int64_t)(n->offset / ir_dtype_size(n->dtype));
    } else {
        long p = producer(e, n);
        if (p < 0 || !e->vals[p].st)
            return false;
        st = e->vals[p].st;
        out->off = e->vals[p].off;
    }
    ir_storage_retain(st);
    out->st = st;
    rt_contiguous_strides(n->rank, n->shape, out->strides);
    return true;
}

/* The strided view of n, a chain of movement ops over a value (the way the
 * reference evaluator computes views). */
static rlx_status chain_view(exec *e, const ir_node *n, rt_view *out)
{
    if (base_view(e, n, out))
        return RLX_OK;
    if (ir_ops[n->op].cls != IR_CLS_MOVEMENT)
        return rt_fail(e->ctx, RLX_E_INTERNAL, "jit: %s is read before it is computed", ir_ops[n->op].name);
    rt_view in;
    if (chain_view(e, n->src[0], &in))
        return e->ctx->status;
    rlx_status st = rt_eval_movement(e->ctx, n, &in, out);
    ir_storage_release(in.st);
    return st;
}

static const ir_node *chain_bottom(const exec *e, const ir_node *n)
{
    while (!ir_node_storage(n) && producer(e, n) < 0 && ir_ops[n->op].cls == IR_CLS_MOVEMENT)
        n = n->src[0];
    return n;
}

/* A fresh contiguous output for n, as rt_alloc_out, with large buffers
 * from the recycling pool (bufpool.c). */
static rlx_status alloc_out(rt_ctx *ctx, const ir_node *n, rt_view *out)
{
    size_t bytes = ir_node_bytes(n);
    if (bytes < RT_BUFPOOL_MIN)
        return rt_alloc_out(ctx, n, out, false);
    memset(out, 0, sizeof *out);
    if (!(out->st = rt_bufpool_storage(bytes)))
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory allocating %zu bytes for %s", bytes, ir_ops[n->op].name);
    rt_contiguous_strides(n->rank, n->shape, out->strides);
    ctx->live_bytes += bytes;
    if (ctx->live_bytes > ctx->peak_bytes)
        ctx->peak_bytes = ctx->live_bytes;
    return RLX_OK;
}

static rlx_status run_loop(exec *e, long i)
{
    const sched_kernel *k = &e->s.k[i];
    rt_ctx *ctx = e->ctx;
    void *stack[16], **bufs = k->nargs <= 16 ? stack : ir_alloc((size_t)k->nargs * sizeof *bufs);
    double cstack[16], *consts = k->nconsts <= 16 ? cstack : ir_alloc((size_t)k->nconsts * sizeof *consts);
    if (!bufs || !consts) {
        if (bufs != stack)
            ir_free(bufs);
        if (consts != cstack)
            ir_free(consts);
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory");
    }
    sched_kernel_consts(k, consts);
    rt_view *out = &e->vals[i];
    if (alloc_out(ctx, k->node, out))
        goto done;
    bufs[0] = out->st->data;
    for (int a = 1; a < k->nargs; a++) {
        rt_view v;
        if (!base_view(e, k->args[a], &v)) {
            rt_fail(ctx, RLX_E_INTERNAL, "jit: input %d of a %s kernel is missing", a, ir_ops[k->node->op].name);
            goto done;
        }
        bufs[a] = rt_base(&v, k->args[a]->dtype);
        ir_storage_release(v.st); /* still held by its node or by vals */
    }
    cg_kernel_fn fn;
    cg_stats cs = {0};
    char msg[sizeof ctx->msg];
    rlx_status st = cg_kernel_get(k, &fn, &cs, msg, sizeof msg);
    e->stats->kernels_compiled += cs.compiled;
    e->stats->cache_hits += cs.hits;
    e->stats->cache_misses += cs.misses;
    e->stats->compile_seconds += cs.seconds;
    if (st != RLX_OK) {
        rt_fail(ctx, st, "%s", msg);
        goto done;
    }
    if (ir_node_numel(k->node) > 0) {
        int64_t inner = 1;
        for (int d = 1; d < k->rank; d++)
            inner *= k->shape[d];
        int64_t chunk = inner >= CHUNK_WORK ? 1 : CHUNK_WORK / (inner ? inner : 1);
        rt_pool_run(fn, bufs, consts, k->shape[0], chunk, e->nthreads);
    }
    e->stats->kernels_run++;
    ctx->nodes_run++;
done:
    if (bufs != stack)
        ir_free(bufs);
    if (consts != cstack)
        ir_free(consts);
    return ctx->status;
}

static rlx_status run_ref(exec *e, long i)
{
    const ir_node *n = e->s.k[i].node;
    rt_ctx *ctx = e->ctx;
    rt_view in[IR_MAX_RANK + 8], *inputs = in;
    int ns = n->nsrc, got = 0;
    rt_eval_fn fn = rt_ref_eval_fn(n->op);
    if (!fn)
        return rt_fail(ctx, RLX_E_INTERNAL, "no reference evaluator for %s", ir_ops[n->op].name);
    if (ns > (int)(sizeof in / sizeof *in) && !(inputs = ir_alloc((size_t)ns * sizeof *inputs)))
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory");
    for (; got < ns; got++)
        if (chain_view(e, n->src[got], &inputs[got]))
            goto done;
    rt_view out;
    memset(&out, 0, sizeof out);
    if (ir_node_numel(n) == 0 && ir_ops[n->op].cls != IR_CLS_MOVEMENT) { /* candidate fix: nothing to compute */
        if (rt_alloc_out(ctx, n, &out, false))
            goto done;
    } else if (fn(ctx, n, inputs, &out) != RLX_OK) {
        ir_storage_release(out.st); /* an evaluator may fail after allocating */
        goto done;
    }
    if (!rt_view_is_contiguous(n, &out)) {
        rt_view c;
        rt_materialize(ctx, n, &out, &c);
        ir_storage_release(out.st);
        out = c;
        if (ctx->status)
            goto done;
    }
    e->vals[i] = out;
    e->stats->kernels_run++;
    ctx->nodes_run++;
done:
    for (int k = 0; k < got; k++)
        ir_storage_release(inputs[k].st);
    if (inputs != in)
        ir_free(inputs);
    return ctx->status;
}

static void note_use(exec *e, const ir_node *n, long at)
{
    long p = producer(e, chain_bottom(e, n));
    if (p >= 0 && e->last[p] < at)
        e->last[p] = at;
}

static void release_dead(exec *e, long i)
{
    for (long j = 0; j <= i; j++) {
        if (e->vals[j].st && e->last[j] == i) {
            size_t b = ir_node_bytes(e->s.k[j].node);
            e->ctx->live_bytes -= e->ctx->live_bytes >= b ? b : e->ctx->live_bytes;
            ir_storage_release(e->vals[j].st);
            e->vals[j].st = NULL;
        }
    }
}

rlx_status rt_jit_realize(ir_node *const *roots, int nroots, int nthreads, rt_ctx *ctx, rt_jit_stats *stats)
{
    exec e;
    memset(&e, 0, sizeof e);
    e.nthreads = nthreads;
    e.ctx = ctx;
    e.stats = stats;
    char err[256];
    if (!sched_build(roots, nroots, &e.s, err, sizeof err))
        return rt_fail(ctx, RLX_E_NOMEM, "%s", err);
    long nk = e.s.count;
    e.vals = ir_calloc((size_t)(nk ? nk : 1), sizeof *e.vals);
    e.last = ir_alloc((size_t)(nk ? nk : 1) * sizeof *e.last);
    if (!e.vals || !e.last) {
        rt_fail(ctx, RLX_E_NOMEM, "out of memory for the schedule");
        goto out;
    }
    for (long i = 0; i < nk; i++) {
        e.last[i] = i;
        if (e.s.k[i].kind != SCHED_VIEW && ir_map_put(&e.produced, e.s.k[i].node, i) < 0) {
            rt_fail(ctx, RLX_E_NOMEM, "out of memory for the schedule");
            goto out;
        }
    }
    for (long i = 0; i < nk; i++) {
        const sched_kernel *k = &e.s.k[i];
        if (k->kind == SCHED_LOOP)
            for (int a = 1; a < k->nargs; a++)
                note_use(&e, k->args[a], i);
        else if (k->kind == SCHED_REF)
            for (int s = 0; s < k->node->nsrc; s++)
                note_use(&e, k->node->src[s], i);
        else
            note_use(&e, k->node, i);
    }
    for (long i = 0; i < nk && ctx->status == RLX_OK; i++) {
        sched_kernel *k = &e.s.k[i];
        if (k->kind == SCHED_LOOP) {
            run_loop(&e, i);
        } else if (k->kind == SCHED_REF) {
            run_ref(&e, i);
        } else {
            rt_view v;
            if (chain_view(&e, k->node, &v) == RLX_OK) {
                rt_publish(ctx, k->node, &v);
                ir_storage_release(v.st);
            }
        }
        /* roots are published as soon as they exist */
        for (int r = 0; r < nroots && ctx->status == RLX_OK && k->kind != SCHED_VIEW; r++)
            if (roots[r] == k->node && e.vals[i].st)
                rt_publish(ctx, roots[r], &e.vals[i]);
        release_dead(&e, i);
    }
out:
    for (long i = 0; e.vals && i < nk; i++)
        ir_storage_release(e.vals[i].st);
    ir_free(e.vals);
    ir_free(e.last);
    ir_map_free(&e.produced);
    sched_free(&e.s);
    return ctx->status;
}
