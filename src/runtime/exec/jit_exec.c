/*
 * jit_exec.c — walks a schedule (passes/schedule.c): LOOP kernels run as
 * compiled code (codegen_llvm, cached), REF kernels through the reference
 * evaluator's rt_eval_* function of their op, VIEW kernels publish a root
 * as a view.
 *
 * A plan (rt_jit_plan) is the schedule, its memory plan (passes/memplan.c)
 * and the compiled function of every LOOP kernel, made once; a run needs
 * only the bound inputs. The plan holds a reference on each of its
 * kernels (cg_kernel), so the kernel cache never evicts code a plan may
 * run; rt_jit_plan_free releases them. Intermediates live in one arena per run (from
 * the recycling buffer pool when large, so a repeated run maps nothing);
 * roots and REF outputs get storage of their own (outputs of at least
 * 1 MiB from the buffer pool, smaller ones from malloc) and the others are
 * released after their last reader. The pipeline (pipeline.c) sequences
 * a plan's stages (rt_jit_plan_new: schedule; _layout: memory plan and
 * tables; _compile; _run), runs a plan cached for the graph's structure
 * (plan_cache.c) or builds one, and publishes the roots exactly as
 * rt_ref_realize publishes them; compiled programs (tensor/program.c)
 * keep their plan and run it again. Threads and knobs come from the
 * context's options, never from a global setting.
 *
 * A kernel with enough work splits its loop dim 0 over the thread pool
 * (pool.c) in chunks of about CHUNK_WORK loop iterations.
 *
 * GEMM epilogues: a float MATMUL (a REF kernel) whose value dies in the
 * elementwise LOOP kernel right after it, read there only at the element
 * being written (bias, activation, residual, scaling: linear, linear_act),
 * runs as one kernel with it: the GEMM writes the loop's output buffer
 * when the dtypes agree (no second buffer, the loop then works in place)
 * and the loop runs over each block of GEMM rows once the block is done
 * (knob gemm_block; auto: one block, see EPI_BLOCK_AUTO).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/passes.h"
#include "runtime/exec/jit_exec.h"
#include "passes/knobs.h"

/* Loop iterations per chunk: large enough that a chunk costs far more than
 * taking it, small enough to balance two busy cores. Below two chunks a
 * kernel runs inline. */
enum { CHUNK_WORK = 32768 };

/* Where a LOOP kernel's input comes from: a kernel (>= 0), a realized node
 * (ARG_REALIZED) or bound slot j (ARG_SLOT - j). */
enum { ARG_REALIZED = -1, ARG_SLOT = -2 };

/* gemm_block auto: all rows in one GEMM call, then the epilogue in place.
 * Measured (4096x1024 @ 1024x4096 f32, OpenBLAS Cooperlake, 1 thread, cpu
 * time): each row-block call repacks the whole of b, so blocks of 2048,
 * 1024, 512, 256, 128 rows cost the GEMM +0-4%, +3-5%, +9-11%, +16-20%,
 * +30-35%, while the separate in-place pass over the 64 MiB output they
 * would save costs 2%. */
enum { EPI_BLOCK_AUTO = 0 };

struct rt_jit_plan {
    sched_schedule s;
    sched_memplan mp;
    ir_map produced;    /* node -> index of the kernel that computes it */
    ir_map slot;        /* placeholder node -> bound slot */
    int nslots, nroots;
    ir_node **roots;    /* borrows */
    cg_kernel_fn *fn;   /* per kernel (LOOP only) */
    cg_kernel **kref;   /* per kernel: the reference that keeps fn[i] mapped (LOOP only) */
    double *consts;     /* every LOOP kernel's constants, from const_at[i] */
    const ir_node **const_src; /* per constant: the CONST node it was read from (borrowed) */
    long nconsts, nloops;
    long *const_at;
    int64_t *dims;      /* every LOOP kernel's parameters (sched_kernel_params), from dims_at[i]: */
    long *dims_at;      /* what a size-generic kernel reads for its numbers (buffers[nargs]) */
    long *argsrc;       /* per LOOP kernel input (args 1..), from arg_at[i] */
    long *arg_at;
    long *die, *die_at; /* die[die_at[i] .. die_at[i+1]): values dead after kernel i */
    unsigned char *epi; /* per kernel: 1 when a MATMUL runs with kernel i+1 as its epilogue */
    long *donor;        /* per kernel: the slot whose buffer a donating run lets it write over, or -1 */
    sched_decisions dec; /* kept for plans of the same structure (rt_jit_plan_new's keep or like) */
    const rt_jit_plan *like; /* until compiled: the plan whose kernels kept[i] are reused (borrowed) */
    unsigned char *kept;
};

typedef struct {
    const rt_jit_plan *p;
    rt_ctx *ctx;
    rt_jit_stats *stats;
    int nthreads;
    int64_t grain;        /* loop iterations per chunk (knob grain; CHUNK_WORK unless tuned) */
    ir_node *const *binds;
    const unsigned char *donate; /* per slot: its binding's buffer is the run's to write over (or NULL) */
    const double *consts; /* the plan's, or the run's own values */
    ir_storage *arena;
    rt_view *vals; /* contiguous result of each kernel (st NULL when none) */
} exec;

static long producer(const exec *e, const ir_node *n) { return ir_map_get(&e->p->produced, n); }

/* The realized node that supplies n: its binding when n is a slot. */
static const ir_node *bound(const exec *e, const ir_node *n)
{
    if (e->p->nslots) {
        long j = ir_map_get(&e->p->slot, n);
        if (j >= 0)
            return e->binds[j];
    }
    return n;
}

/* A contiguous view of a realized or computed value; false if n is neither. */
static bool base_view(exec *e, const ir_node *n, rt_view *out)
{
    memset(out, 0, sizeof *out);
    const ir_node *b = bound(e, n);
    ir_storage *st = ir_node_storage(b);
    if (st) {
        out->off = (int64_t)(b->offset / ir_dtype_size(b->dtype));
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
 * reference evaluator computes views). Iterative: chains may be 100,000
 * views deep. */
static rlx_status chain_view(exec *e, const ir_node *n, rt_view *out)
{
    if (base_view(e, n, out))
        return RLX_OK;
    const ir_node *stack[32], **chain = stack;
    long depth = 0, cap = 32;
    for (const ir_node *c = n; !base_view(e, c, out); c = c->src[0]) {
        if (ir_ops[c->op].cls != IR_CLS_MOVEMENT) {
            if (chain != stack)
                ir_free(chain);
            return rt_fail(e->ctx, RLX_E_INTERNAL, "jit: %s is read before it is computed", ir_ops[c->op].name);
        }
        if (depth == cap) {
            const ir_node **g = ir_alloc((size_t)cap * 2 * sizeof *g);
            if (!g) {
                if (chain != stack)
                    ir_free(chain);
                return rt_fail(e->ctx, RLX_E_NOMEM, "out of memory");
            }
            memcpy(g, chain, (size_t)depth * sizeof *g);
            if (chain != stack)
                ir_free(chain);
            chain = g;
            cap *= 2;
        }
        chain[depth++] = c;
    }
    /* out is the base below chain[depth-1]; apply the views bottom up */
    rlx_status st = RLX_OK;
    while (depth > 0 && st == RLX_OK) {
        rt_view in = *out;
        memset(out, 0, sizeof *out);
        st = rt_eval_movement(e->ctx, chain[--depth], &in, out);
        ir_storage_release(in.st);
    }
    if (chain != stack)
        ir_free(chain);
    if (st != RLX_OK) {
        ir_storage_release(out->st);
        out->st = NULL;
    }
    return st;
}

/* Pool body running a kernel over [lo + b, lo + e) of its dim 0. */
typedef struct {
    cg_kernel_fn fn;
    void *const *bufs;
    int64_t lo;
} shifted;

static void run_shifted(void *const *bufs, const double *consts, int64_t b, int64_t e)
{
    const shifted *s = bufs[0];
    s->fn(s->bufs, consts, s->lo + b, s->lo + e);
}

/* The MATMUL of kernel mm into its value (already set up), with LOOP
 * kernel i (its epilogue) run over each block of rows once computed. */
static rlx_status run_epilogue(exec *e, long mm, long i, void *const *bufs, int64_t chunk)
{
    const sched_kernel *k = &e->p->s.k[i];
    const ir_node *n = e->p->s.k[mm].node;
    rt_ctx *ctx = e->ctx;
    rt_view in[2];
    int got = 0;
    for (; got < 2; got++)
        if (chain_view(e, n->src[got], &in[got]))
            goto done;
    int64_t cols = n->shape[n->rank - 1], rows = ir_node_numel(n) / cols;
    int64_t inner = ir_node_numel(k->node) / k->shape[0], l0 = k->shape[0];
    /* dim-0 steps of whole rows: unit steps cover unit*inner/cols rows */
    int64_t g = cols, r = inner;
    while (r) {
        int64_t t = g % r;
        g = r;
        r = t;
    }
    int64_t unit = cols / g, per = unit * inner / cols;
    long want = knob_value(sched_knobs(ctx), KNOB_GEMM_BLOCK, KCLASS_MATMUL, ir_node_numel(n));
    int64_t step = want == EPI_BLOCK_AUTO || want >= rows ? l0 : (want / per > 0 ? want / per : 1) * unit;
    int prev = step < l0 ? rt_blas_threads(e->nthreads) : 0; /* whole: blas.c picks the threads */
    for (int64_t lo = 0; lo < l0 && ctx->status == RLX_OK; lo += step) {
        int64_t hi = lo + step < l0 ? lo + step : l0;
        int64_t r0 = lo * inner / cols, r1 = (hi * inner + cols - 1) / cols;
        if (rt_matmul_rows(ctx, n, in, &e->vals[mm], r0, r1 < rows ? r1 : rows))
            break;
        shifted sh = {e->p->fn[i], bufs, lo};
        void *sb[1] = {&sh};
        rt_pool_run(run_shifted, sb, e->consts + e->p->const_at[i], hi - lo, chunk, e->nthreads);
    }
    if (step < l0)
        rt_blas_threads(prev);
done:
    for (int j = 0; j < got; j++)
        ir_storage_release(in[j].st);
    return ctx->status;
}

/* Runs LOOP kernel i; with mm >= 0, the MATMUL of kernel mm first, block
 * by block, i being its epilogue (plan->epi). */
static rlx_status run_loop(exec *e, long i, long mm)
{
    const rt_jit_plan *p = e->p;
    const sched_kernel *k = &p->s.k[i];
    rt_ctx *ctx = e->ctx;
    /* the buffers, then the kernel's parameters (read by a generic kernel) */
    void *stack[16], **bufs = k->nargs < 16 ? stack : ir_alloc((size_t)(k->nargs + 1) * sizeof *bufs);
    if (!bufs)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory");
    rt_view *out = &e->vals[i];
    int64_t at = p->mp.offset[i];
    if (at >= 0) { /* a slot of the arena */
        memset(out, 0, sizeof *out);
        ir_storage_retain(e->arena);
        out->st = e->arena;
        out->off = at / (int64_t)ir_dtype_size(k->node->dtype);
        rt_contiguous_strides(k->node->rank, k->node->shape, out->strides);
    } else if (p->donor[i] >= 0 && e->donate && e->donate[p->donor[i]]) {
        const ir_node *b = e->binds[p->donor[i]]; /* its last reader writes over it (see find_donors) */
        memset(out, 0, sizeof *out);
        out->st = ir_node_storage(b);
        ir_storage_retain(out->st);
        out->off = (int64_t)(b->offset / ir_dtype_size(b->dtype));
        rt_contiguous_strides(k->node->rank, k->node->shape, out->strides);
    } else if (rt_alloc_out(ctx, k->node, out, false)) {
        goto done;
    }
    if (mm >= 0) { /* the GEMM's value: the output itself when the dtypes agree */
        const ir_node *mn = p->s.k[mm].node;
        if (mn->dtype == k->node->dtype && p->mp.reuses[i] < 0) { /* not over an input it still reads */
            e->vals[mm] = *out;
            ir_storage_retain(out->st);
            rt_contiguous_strides(mn->rank, mn->shape, e->vals[mm].strides);
        } else if (rt_alloc_out(ctx, mn, &e->vals[mm], false)) {
            goto done;
        }
    }
    bufs[0] = rt_base(out, k->node->dtype);
    bufs[k->nargs] = p->dims + p->dims_at[i];
    const long *src = p->argsrc + p->arg_at[i];
    for (int a = 1; a < k->nargs; a++) {
        const ir_node *n = k->args[a];
        long from = src[a - 1];
        if (from >= 0) {
            if (!e->vals[from].st) {
                rt_fail(ctx, RLX_E_INTERNAL, "jit: input %d of a %s kernel is missing", a, ir_ops[k->node->op].name);
                goto done;
            }
            bufs[a] = rt_base(&e->vals[from], n->dtype);
        } else {
            const ir_node *b = from == ARG_REALIZED ? n : e->binds[ARG_SLOT - from];
            ir_storage *st = ir_node_storage(b);
            if (!st) {
                rt_fail(ctx, RLX_E_INTERNAL, "jit: input %d of a %s kernel is not realized", a,
                        ir_ops[k->node->op].name);
                goto done;
            }
            bufs[a] = (char *)st->data + b->offset;
        }
    }
    if (ir_node_numel(k->node) > 0) {
        int64_t inner = 1;
        for (int d = 1; d < k->rank; d++)
            inner *= k->shape[d];
        int64_t work = e->grain;
        int64_t chunk = inner >= work ? 1 : work / (inner ? inner : 1);
        if (mm >= 0)
            run_epilogue(e, mm, i, bufs, chunk);
        else
            rt_pool_run(p->fn[i], bufs, e->consts + p->const_at[i], k->shape[0], chunk, e->nthreads);
    }
    if (mm >= 0 && e->vals[mm].st == out->st) { /* in place: only the output's bytes are counted */
        ir_storage_release(e->vals[mm].st);
        e->vals[mm].st = NULL;
    }
    e->stats->kernels_run++;
    ctx->nodes_run++;
done:
    if (bufs != stack)
        ir_free(bufs);
    return ctx->status;
}

static rlx_status run_ref(exec *e, long i)
{
    const ir_node *n = e->p->s.k[i].node;
    rt_ctx *ctx = e->ctx;
    rt_view in[IR_MAX_RANK + 8], *inputs = in;
    int ns = n->nsrc, got = 0;
    rt_eval_fn fn = rt_lib_eval_fn(n->op);
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
    /* a result that is a view of the arena would be overwritten by later
     * kernels: it gets storage of its own, as a non-contiguous one does */
    if (!rt_view_is_contiguous(n, &out) || (e->arena && out.st == e->arena)) {
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

void rt_jit_plan_free(rt_jit_plan *p)
{
    if (!p)
        return;
    cg_kernels_release(p->kref, p->kref ? p->s.count : 0); /* its kernels may be evicted now */
    ir_free(p->kref);
    sched_memplan_free(&p->mp);
    ir_map_free(&p->produced);
    ir_map_free(&p->slot);
    sched_free(&p->s);
    ir_free(p->roots);
    ir_free(p->fn);
    ir_free(p->consts); /* and the other tables */
    ir_free(p->dims);
    ir_free(p->donor);
    sched_decisions_free(&p->dec);
    ir_free(p->kept);
    ir_free(p);
}

size_t rt_jit_plan_arena_bytes(const rt_jit_plan *p) { return p ? p->mp.arena_bytes : 0; }

/* k stores its elements contiguously from the start of its output. */
static bool stores_contiguous(const sched_kernel *k)
{
    int64_t st = 1;
    if (k->out.off != 0)
        return false;
    for (int d = k->rank - 1; d >= 0; st *= k->shape[d--])
        if (k->shape[d] != 1 && k->out.stride[d] != st)
            return false;
    return true;
}

/* True when kernel i is a float MATMUL that kernel i+1 can take as the
 * GEMM of its epilogue: an elementwise loop with a contiguous output, the
 * last reader of the product, loading it only at the element it writes,
 * with as many elements, and not placed over the product's operands. */
static bool epilogue_of(const rt_jit_plan *p, long i)
{
    const sched_kernel *m = &p->s.k[i], *k = m + 1;
    if (i + 1 >= p->s.count || m->kind != SCHED_REF || m->node->op != IR_OP_MATMUL ||
        !ir_dtype_is_float(m->node->dtype) || k->kind != SCHED_LOOP || k->red_op != IR_OP_COUNT || k->red_mask ||
        p->mp.last[i] != i + 1 || ir_node_numel(m->node) <= 0 || ir_node_numel(m->node) != ir_node_numel(k->node))
        return false;
    if (!stores_contiguous(k))
        return false;
    bool reads = false;
    for (int j = 0; j < k->ninstr; j++) {
        const sched_instr *in = &k->instr[j];
        if (in->kind != SCHED_I_LOAD || k->args[in->arg] != m->node)
            continue;
        reads = true;
        if (in->idx.off != 0)
            return false;
        for (int d = 0; d < k->rank; d++)
            if (k->shape[d] != 1 && in->idx.stride[d] != k->out.stride[d])
                return false;
    }
    if (!reads)
        return false;
    /* the GEMM reads its operands while the epilogue writes: the output's
     * arena slot must not be that of an operand dying at the GEMM */
    int64_t o0 = p->mp.offset[i + 1], o1 = o0 + (int64_t)ir_node_bytes(k->node);
    for (int a = 0; a < m->node->nsrc && o0 >= 0; a++) {
        const ir_node *v = m->node->src[a];
        long q;
        while ((q = ir_map_get(&p->produced, v)) < 0 && ir_ops[v->op].cls == IR_CLS_MOVEMENT)
            v = v->src[0];
        if (q >= 0 && p->mp.offset[q] >= 0 && p->mp.offset[q] < o1 &&
            o0 < p->mp.offset[q] + (int64_t)ir_node_bytes(p->s.k[q].node))
            return false;
    }
    return true;
}

const double *rt_jit_plan_consts(const rt_jit_plan *p, long *n, const ir_node *const **from)
{
    *n = p->nconsts;
    if (from)
        *from = p->const_src;
    return p->consts;
}

const sched_schedule *rt_jit_plan_schedule(const rt_jit_plan *p) { return &p->s; }

long rt_jit_plan_loops(const rt_jit_plan *p) { return p->nloops; }

bool rt_jit_plan_like(const rt_jit_plan *p) { return p->kept != NULL; }

/* The slot bound to v (through views), or -1. */
static long slot_below(const rt_jit_plan *p, const ir_node *v)
{
    while (ir_map_get(&p->produced, v) < 0 && ir_ops[v->op].cls == IR_CLS_MOVEMENT && v->nsrc)
        v = v->src[0];
    return ir_map_get(&p->slot, v);
}

/* donor[i]: the slot whose binding kernel i may write its output over in
 * a run that owns the binding (rlx_program_run_donate): an elementwise
 * LOOP kernel with storage of its own (a root), not a GEMM's epilogue,
 * storing contiguously, that is the slot's last reader, reads it only at
 * the element it stores, and has its byte size and element size. A slot
 * that a root shares (a root that is the input or a view of it) never
 * donates. Kernels run in schedule order, so no reader comes after. */
static bool find_donors(rt_jit_plan *p)
{
    long nk = p->s.count, ns = p->nslots;
    if (!(p->donor = ir_alloc((size_t)(nk ? nk : 1) * sizeof *p->donor)))
        return false;
    for (long i = 0; i < nk; i++)
        p->donor[i] = -1;
    if (!ns)
        return true;
    long *last = ir_alloc((size_t)ns * sizeof *last);
    if (!last)
        return false;
    for (long j = 0; j < ns; j++)
        last[j] = -1;
    for (long i = 0; i < nk; i++) {
        const sched_kernel *k = &p->s.k[i];
        long j;
        if (k->kind == SCHED_LOOP) {
            for (int a = 1; a < k->nargs; a++)
                if ((j = ir_map_get(&p->slot, k->args[a])) >= 0)
                    last[j] = i;
        } else if (k->kind == SCHED_REF) {
            for (int a = 0; a < k->node->nsrc; a++)
                if ((j = slot_below(p, k->node->src[a])) >= 0)
                    last[j] = i;
        } else if ((j = slot_below(p, k->node)) >= 0) {
            last[j] = nk;
        }
    }
    for (int r = 0; r < p->nroots; r++) {
        long j = slot_below(p, p->roots[r]);
        if (j >= 0)
            last[j] = nk;
    }
    for (long i = 0; i < nk; i++) {
        const sched_kernel *k = &p->s.k[i];
        if (k->kind != SCHED_LOOP || p->mp.offset[i] >= 0 || k->red_op != IR_OP_COUNT || k->red_mask ||
            (i > 0 && p->epi[i - 1]) || !stores_contiguous(k))
            continue;
        for (int a = 1; a < k->nargs; a++) {
            const ir_node *v = k->args[a];
            long j = ir_map_get(&p->slot, v);
            if (j >= 0 && last[j] == i && v->dtype == k->node->dtype && ir_node_bytes(v) == ir_node_bytes(k->node) &&
                sched_reads_in_place(k, v)) {
                p->donor[i] = j;
                last[j] = nk; /* one taker */
                break;
            }
        }
    }
    ir_free(last);
    return true;
}

/* The tables a run reads: constants, input sources, death lists. */
static bool plan_tables(rt_jit_plan *p)
{
    long nk = p->s.count, n1 = nk + 1, nconst = 0, nargs = 0;
    for (long i = 0; i < nk; i++) {
        if (p->s.k[i].kind == SCHED_LOOP) {
            nconst += p->s.k[i].nconsts;
            nargs += p->s.k[i].nargs - 1;
            p->nloops++;
        }
    }
    p->nconsts = nconst;
    /* one block (owned through consts): doubles, CONST nodes, then the long tables */
    size_t nlong = (size_t)(n1 + nargs + n1 + n1 + n1 + 1);
    p->consts = ir_alloc((size_t)nconst * (sizeof(double) + sizeof(ir_node *)) + nlong * sizeof(long) + (size_t)n1);
    if (!p->consts)
        return false;
    p->const_src = (const ir_node **)(p->consts + nconst);
    p->const_at = (long *)(p->const_src + nconst);
    p->argsrc = p->const_at + n1;
    p->arg_at = p->argsrc + nargs;
    p->die = p->arg_at + n1;
    p->die_at = p->die + n1;
    p->epi = (unsigned char *)(p->die_at + n1 + 1);
    memset(p->die_at, 0, (size_t)(n1 + 1) * sizeof *p->die_at);
    long c = 0, a = 0;
    for (long i = 0; i < nk; i++) {
        const sched_kernel *k = &p->s.k[i];
        p->const_at[i] = c;
        p->arg_at[i] = a;
        if (k->kind != SCHED_LOOP)
            continue;
        sched_kernel_consts(k, p->consts + c, p->const_src + c);
        c += k->nconsts;
        for (int j = 1; j < k->nargs; j++) {
            long from = ir_map_get(&p->produced, k->args[j]);
            if (from < 0) {
                long sl = p->nslots ? ir_map_get(&p->slot, k->args[j]) : -1;
                from = sl >= 0 ? ARG_SLOT - sl : ARG_REALIZED;
            }
            p->argsrc[a++] = from;
        }
    }
    /* counting sort of the kernels by the kernel after which they die */
    for (long i = 0; i < nk; i++)
        if (p->mp.last[i] < nk)
            p->die_at[p->mp.last[i] + 1]++;
    for (long i = 0; i < nk; i++)
        p->die_at[i + 1] += p->die_at[i];
    for (long i = 0, *fill = p->die_at; i < nk; i++) /* die_at[l] is used as the fill cursor of l, then restored */
        if (p->mp.last[i] < nk)
            p->die[fill[p->mp.last[i]]++] = i;
    for (long l = nk; l > 0; l--)
        p->die_at[l] = p->die_at[l - 1];
    p->die_at[0] = 0;
    for (long i = 0; i < nk; i++)
        p->epi[i] = epilogue_of(p, i);
    /* the numbers of each LOOP kernel: the same code serves every size
     * when it is a generic one; filled once per plan (a plan has one set
     * of sizes) */
    long nd = 0;
    for (long i = 0; i < nk; i++)
        if (p->s.k[i].kind == SCHED_LOOP)
            nd += sched_kernel_param_layout(&p->s.k[i], NULL);
    if (!(p->dims = ir_alloc((size_t)(nd ? nd : 1) * sizeof *p->dims + (size_t)n1 * sizeof *p->dims_at)))
        return false;
    p->dims_at = (long *)(p->dims + (nd ? nd : 1));
    nd = 0;
    for (long i = 0; i < nk; i++) {
        p->dims_at[i] = nd;
        if (p->s.k[i].kind != SCHED_LOOP)
            continue;
        sched_kernel_params(&p->s.k[i], p->dims + nd);
        nd += sched_kernel_param_layout(&p->s.k[i], NULL);
    }
    return true;
}

rlx_status rt_jit_plan_new(rt_ctx *ctx, ir_node *const *roots, int nroots, const rt_jit_plan *const *like,
                           int nlike, bool keep, rt_jit_plan **out)
{
    *out = NULL;
    rt_jit_plan *p = ir_calloc(1, sizeof *p);
    if (!p)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for the plan");
    int r = 0;
    for (int l = 0; l < nlike && !r; l++) {
        const rt_jit_plan *t = like[l];
        if (!t->dec.count)
            continue;
        ir_free(p->kept);
        if (!(p->kept = ir_alloc((size_t)(t->s.count ? t->s.count : 1)))) {
            rt_jit_plan_free(p);
            return rt_fail(ctx, RLX_E_NOMEM, "out of memory for the plan");
        }
        if ((r = sched_rebuild(ctx, &t->dec, &t->s, roots, nroots, &p->s, p->kept, &p->dec)) < 0) {
            rt_jit_plan_free(p);
            return ctx->status;
        }
        p->like = r ? t : NULL;
    }
    if (!r) {
        ir_free(p->kept);
        p->kept = NULL;
    }
    if (!r && sched_build_keep(ctx, roots, nroots, &p->s, keep || nlike ? &p->dec : NULL) != RLX_OK) {
        rt_jit_plan_free(p);
        return ctx->status;
    }
    p->nroots = nroots;
    p->roots = ir_alloc((size_t)(nroots ? nroots : 1) * sizeof *p->roots);
    if (!p->roots) {
        rt_jit_plan_free(p);
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for the schedule");
    }
    memcpy(p->roots, roots, (size_t)nroots * sizeof *roots);
    *out = p;
    return RLX_OK;
}

rlx_status rt_jit_plan_layout(rt_ctx *ctx, rt_jit_plan *p, ir_node *const *slots, int nslots)
{
    long nk = p->s.count;
    p->nslots = nslots;
    if (sched_memplan_build(ctx, &p->s, p->roots, p->nroots, &p->mp) != RLX_OK)
        return ctx->status;
    p->fn = ir_calloc((size_t)(nk ? nk : 1), sizeof *p->fn);
    p->kref = ir_calloc((size_t)(nk ? nk : 1), sizeof *p->kref);
    if (!p->fn || !p->kref)
        goto oom;
    for (long i = 0; i < nk; i++)
        if (p->s.k[i].kind != SCHED_VIEW && ir_map_put(&p->produced, p->s.k[i].node, i) < 0)
            goto oom;
    for (int j = 0; j < nslots; j++)
        if (ir_map_put(&p->slot, slots[j], j) < 0)
            goto oom;
    if (!plan_tables(p) || !find_donors(p))
        goto oom;
    return RLX_OK;
oom:
    return rt_fail(ctx, RLX_E_NOMEM, "out of memory for the schedule");
}

rlx_status rt_jit_plan_compile(rt_ctx *ctx, rt_jit_plan *p, rt_jit_stats *stats)
{
    /* every kernel up front: the missing ones compile in parallel */
    cg_stats cs = {0};
    char msg[sizeof ctx->msg];
    cg_kernels_release(p->kref, p->s.count); /* (a plan compiled twice) */
    /* a program over dynamic dims: generic kernels unless the knob says never */
    const knob_state *ks = sched_knobs(ctx);
    int gen = ctx->generic && knob_value(ks, KNOB_GENERIC_KERNELS, KCLASS_ANY, -1) != 0 ? 2 : -1;
    rlx_status st = RLX_OK;
    if (p->like) { /* a plan from like's decisions: its copied kernels' code as is, the others looked up */
        long n = 0;
        for (long i = 0; i < p->s.count; i++) {
            if (p->kept[i]) {
                cg_kernel_retain(p->like->kref[i]);
                p->kref[i] = p->like->kref[i];
                cs.hits++;
            } else if (p->s.k[i].kind == SCHED_LOOP) {
                n++;
            }
        }
        sched_kernel *todo = n ? ir_alloc((size_t)n * sizeof *todo) : NULL;
        cg_kernel **refs = n ? ir_calloc((size_t)n, sizeof *refs) : NULL;
        if (n && (!todo || !refs)) {
            st = RLX_E_NOMEM;
            snprintf(msg, sizeof msg, "out of memory");
        }
        for (long i = 0, j = 0; n && st == RLX_OK && i < p->s.count; i++)
            if (!p->kept[i] && p->s.k[i].kind == SCHED_LOOP)
                todo[j++] = p->s.k[i]; /* (a shallow copy: read only) */
        if (n && st == RLX_OK)
            st = cg_kernels_prepare_as(todo, n, sched_compile_threads(ctx), ks, gen, refs, &cs, msg, sizeof msg);
        for (long i = 0, j = 0; n && st == RLX_OK && i < p->s.count; i++)
            if (!p->kept[i] && p->s.k[i].kind == SCHED_LOOP)
                p->kref[i] = refs[j++];
        ir_free(todo);
        ir_free(refs);
        p->like = NULL;
    } else {
        st = cg_kernels_prepare_as(p->s.k, p->s.count, sched_compile_threads(ctx), ks, gen, p->kref, &cs, msg,
                                   sizeof msg);
    }
    for (long i = 0; i < p->s.count; i++)
        p->fn[i] = cg_kernel_func(p->kref[i]);
    stats->kernels_compiled += cs.compiled;
    stats->cache_hits += cs.hits;
    stats->cache_misses += cs.misses;
    stats->compile_seconds += cs.seconds;
    return st == RLX_OK ? RLX_OK : rt_fail(ctx, st, "%s", msg);
}

static rt_jit_prof_fn prof_fn;
static void *prof_arg;

void rt_jit_set_profiler(rt_jit_prof_fn fn, void *arg)
{
    prof_fn = fn;
    prof_arg = arg;
}

static int64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Drops the values that die after kernel i. */
static void release_dead(exec *e, long i)
{
    const rt_jit_plan *p = e->p;
    for (long d = p->die_at[i]; d < p->die_at[i + 1]; d++) {
        long j = p->die[d];
        if (!e->vals[j].st)
            continue;
        if (p->mp.offset[j] < 0) { /* the arena is counted as a whole */
            size_t b = ir_node_bytes(p->s.k[j].node);
            e->ctx->live_bytes -= e->ctx->live_bytes >= b ? b : e->ctx->live_bytes;
        }
        ir_storage_release(e->vals[j].st);
        e->vals[j].st = NULL;
    }
}

rlx_status rt_jit_plan_run(rt_ctx *ctx, const rt_jit_plan *p, ir_node *const *binds, const unsigned char *donate,
                           const double *consts, ir_storage *arena, rt_jit_stats *stats, rt_view *out)
{
    exec e = {.p = p, .ctx = ctx, .stats = stats, .nthreads = rt_threads(ctx), .binds = binds, .donate = donate,
              .consts = consts ? consts : p->consts,
              .grain = knob_value(sched_knobs(ctx), KNOB_GRAIN, KCLASS_ANY, -1)};
    long nk = p->s.count;
    rt_view vstack[8];
    for (int r = 0; r < p->nroots; r++)
        out[r].st = NULL;
    e.vals = nk <= 8 ? vstack : ir_alloc((size_t)nk * sizeof *e.vals);
    if (!e.vals)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for the schedule");
    memset(e.vals, 0, (size_t)nk * sizeof *e.vals);
    size_t ab = p->mp.arena_bytes;
    if (ab && arena && arena->bytes >= ab) { /* the caller's (a compiled program's pool) */
        ir_storage_retain(arena);
        e.arena = arena;
    } else if (ab) {
        e.arena = ab >= RT_BUFPOOL_MIN ? rt_bufpool_storage(ab) : rt_storage_alloc(ab, false);
    }
    if (ab) {
        if (!e.arena) {
            rt_fail(ctx, RLX_E_NOMEM, "out of memory allocating the %zu-byte arena", ab);
            goto out;
        }
        ctx->live_bytes += ab;
        if (ctx->live_bytes > ctx->peak_bytes)
            ctx->peak_bytes = ctx->live_bytes;
        if (ab > stats->arena_bytes)
            stats->arena_bytes = ab;
    }
    rt_jit_prof_fn prof = prof_fn;
    for (long i = 0; i < nk && ctx->status == RLX_OK; i++) {
        sched_kind kind = p->s.k[i].kind;
        int64_t w0 = prof ? clock_ns(CLOCK_MONOTONIC) : 0, c0 = prof ? clock_ns(CLOCK_THREAD_CPUTIME_ID) : 0;
        long i0 = i;
        if (p->epi[i]) { /* the GEMM and its epilogue: one kernel */
            run_loop(&e, i + 1, i);
            release_dead(&e, i++);
        } else if (kind == SCHED_LOOP) {
            run_loop(&e, i, -1);
        } else if (kind == SCHED_REF) {
            run_ref(&e, i);
        }
        release_dead(&e, i);
        if (prof)
            prof(prof_arg, p, i0, i != i0, clock_ns(CLOCK_MONOTONIC) - w0, clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0);
    }
    /* the roots: computed values, views of them (VIEW kernels), realized
     * nodes or bindings */
    for (int r = 0; r < p->nroots && ctx->status == RLX_OK; r++)
        chain_view(&e, p->roots[r], &out[r]);
    if (ctx->status)
        for (int r = 0; r < p->nroots; r++) {
            ir_storage_release(out[r].st);
            out[r].st = NULL;
        }
out:
    for (long i = 0; i < nk; i++)
        ir_storage_release(e.vals[i].st);
    if (e.vals != vstack)
        ir_free(e.vals);
    if (e.arena) {
        ctx->live_bytes -= ctx->live_bytes >= ab ? ab : ctx->live_bytes;
        ir_storage_release(e.arena);
    }
    return ctx->status;
}
