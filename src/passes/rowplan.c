/*
 * rowplan.c — the decisions behind a phased (row) kernel's code, as data
 * (the plan is described in passes.h): which instructions each pass over
 * the row evaluates, which values are per row, which are stashed between
 * passes and where, which divisions are guarded, which pass prefetches.
 *
 * Every decision is made here from the kernel alone, so it can be tested
 * without LLVM; cg_kernel.c follows the plan. The rules:
 *  - an instruction is per element when a load or iota under it has a
 *    nonzero stride on a row dim; a per-row value waits for the phases
 *    under it and is computed before the first pass after them;
 *  - the store runs over the row when the stored value or its place
 *    depends on the row, else once per row after the phases;
 *  - a math result (exp, tanh...) needed by two passes or more is stashed:
 *    the first one the stored value is computed from in the output row
 *    (when that row is contiguous, of its dtype, and the store is a pass),
 *    the others in row buffers while SCHED_ROW_STASH_BYTES lasts, the rest
 *    recomputed; a pass loads a stash an earlier pass filled and fills it
 *    otherwise;
 *  - with fma, the first SCHED_ROW_FD_SLOTS f32 divisions of the store
 *    pass by a per-row value are guarded (fast, checked per row); when the
 *    store pass computes one, a retry pass follows, reading the stashes
 *    filled before the store pass but recomputing the output-row one (the
 *    store pass overwrote it);
 *  - rows of a [rows, n] matrix of at least SCHED_ROW_PF_MIN_BYTES, n a
 *    multiple of SCHED_ROW_PF_CHUNK (four chunks or more): when the pass
 *    after the first computes a math function, it runs in chunks, each
 *    prefetching that chunk of the next row of the first few row loads;
 *  - an f32, f16 or bf16 SUM phase sums blocks of SCHED_SUM_BLOCK elements
 *    (a chunked pass: of its chunks) in f32, adding each block's sum into
 *    an f64 accumulator; with acc_f64 (knob reduce_acc_f64) every element
 *    is added in f64, as PROD always is.
 */
#include <stdio.h>
#include <string.h>

#include "passes/passes.h"

int sched_instr_nsrc(const sched_instr *in)
{
    if (in->kind == SCHED_I_REDUCE || (in->kind == SCHED_I_LOAD && in->guarded))
        return 1;
    if (in->kind != SCHED_I_OP)
        return 0;
    switch (ir_ops[in->op].cls) {
    case IR_CLS_TERNARY: return 3;
    case IR_CLS_BINARY: return 2;
    default: return 1;
    }
}

bool sched_op_is_math(ir_op op) { return ir_ops[op].emit == IR_EMIT_MATH; } /* ops.def's emit column */

static bool is_math_instr(const sched_instr *in) { return in->kind == SCHED_I_OP && sched_op_is_math(in->op); }
/* f16 and bf16: values of f32 inside a kernel (codegen_llvm/cg_kernel.c) */
static bool half_float(rlx_dtype dt) { return dt == RLX_F16 || dt == RLX_BF16; }

/* The scratch of one build. */
typedef struct {
    const sched_kernel *k;
    sched_rowplan *p;
    unsigned char *mark, *filled, *uses;
    bool row_store;
    bool acc_f64; /* the knob reduce_acc_f64: no blocked f32 sums */
} planner;

/* mark[i] for each instruction the loop computing `root` needs (a stash
 * already filled is a leaf; per-row values are leaves). */
static void mark_closure(const planner *b, const unsigned char *filled, int root)
{
    const sched_kernel *k = b->k;
    memset(b->mark, 0, (size_t)k->ninstr);
    b->mark[root] = 1;
    for (int i = root; i >= 0; i--) {
        if (!b->mark[i] || !b->p->per_elem[i] || (filled && filled[i]))
            continue;
        for (int s = 0; s < sched_instr_nsrc(&k->instr[i]); s++)
            b->mark[k->instr[i].src[s]] = 1;
    }
}

static void row_dims(const sched_kernel *k, sched_rowplan *p)
{
    p->r1 = k->rank;
    for (int d = 0; d < k->rank; d++)
        if (k->red_mask >> d & 1 && p->r1 == k->rank)
            p->r1 = d;
    p->rowlen = 1;
    for (int d = k->rank - 1; d >= p->r1; d--) {
        p->rstride[d] = p->rowlen;
        p->rowlen *= k->shape[d];
    }
}

/* per_elem, stage and the phases, in one walk (sources come first). */
static void levels(const sched_kernel *k, sched_rowplan *p)
{
    for (int i = 0; i < k->ninstr; i++) {
        const sched_instr *in = &k->instr[i];
        if (in->kind == SCHED_I_LOAD || in->kind == SCHED_I_IOTA || in->kind == SCHED_I_GUARD) {
            for (int d = p->r1; d < k->rank; d++)
                p->per_elem[i] |= in->idx.stride[d] != 0;
            if (in->kind == SCHED_I_LOAD && in->guarded) { /* and where its guard is computed */
                p->per_elem[i] |= p->per_elem[in->src[0]];
                p->stage[i] = p->stage[in->src[0]];
            }
        } else if (in->kind == SCHED_I_REDUCE) {
            p->stage[i] = p->nphases + 1;
            p->phase[p->nphases++] = i;
        } else {
            for (int s = 0; s < sched_instr_nsrc(in); s++) {
                p->per_elem[i] |= p->per_elem[in->src[s]];
                if (p->stage[in->src[s]] > p->stage[i])
                    p->stage[i] = p->stage[in->src[s]];
            }
        }
    }
}

static bool stores_over_row(const sched_kernel *k, const sched_rowplan *p)
{
    bool row = p->per_elem[k->ninstr - 1];
    for (int d = p->r1; d < k->rank; d++)
        row |= k->out.stride[d] != 0;
    return row;
}

/* The stash decision: uses[i] counts (up to 2) the passes needing i. */
static void choose_stashes(planner *b)
{
    const sched_kernel *k = b->k;
    sched_rowplan *p = b->p;
    int n = k->ninstr, last = n - 1;
    for (int L = 0; L < p->nphases + (b->row_store ? 1 : 0); L++) {
        mark_closure(b, NULL, L < p->nphases ? k->instr[p->phase[L]].src[0] : last);
        for (int i = 0; i < n; i++)
            if (b->mark[i] && p->per_elem[i] && b->uses[i] < 2)
                b->uses[i]++;
    }
    /* A row kernel never writes over its inputs (memplan.c), so no load
     * reads the output row: the store pass reads each element's stash
     * there just before overwriting it. */
    bool out_row = b->row_store && k->red_mask != 0;
    for (int d = p->r1; d < k->rank; d++)
        out_row &= k->out.stride[d] == p->rstride[d];
    if (out_row)
        mark_closure(b, NULL, last);
    int64_t budget = SCHED_ROW_STASH_BYTES;
    for (int i = 0; i < n; i++) {
        const sched_instr *in = &k->instr[i];
        /* a stash holds the kernel's value: f32 for f16 and bf16 */
        int64_t bytes = p->rowlen * (int64_t)(half_float(in->dtype) ? 4 : ir_dtype_size(in->dtype));
        if (b->uses[i] < 2 || !is_math_instr(in))
            continue;
        /* (the output row holds 16-bit floats, not their f32 values) */
        if (out_row && p->ostash < 0 && b->mark[i] && in->dtype == k->node->dtype && !half_float(in->dtype)) {
            p->stash[i] = SCHED_STASH_OUT;
            p->ostash = i;
        } else if (bytes <= budget) {
            p->stash[i] = SCHED_STASH_ROW;
            p->nstash_row++;
            budget -= bytes;
        }
    }
}

/* Guarded divisions: f32 by a per-row value, in the store pass. */
static void choose_guards(planner *b, bool fma)
{
    const sched_kernel *k = b->k;
    sched_rowplan *p = b->p;
    memset(p->fdslot, -1, (size_t)k->ninstr);
    if (!b->row_store || !fma)
        return;
    mark_closure(b, NULL, k->ninstr - 1);
    for (int i = 0; i < k->ninstr && p->nfd < SCHED_ROW_FD_SLOTS; i++) {
        const sched_instr *in = &k->instr[i];
        if (b->mark[i] && p->per_elem[i] && in->kind == SCHED_I_OP && in->op == IR_OP_DIV &&
            k->instr[in->src[0]].dtype == RLX_F32 && !p->per_elem[in->src[1]])
            p->fdslot[i] = (signed char)p->nfd++;
    }
}

/* The pass after the first computes a math function per element: the
 * chunked, prefetching one for a large [rows, n] matrix. -1 when none. */
static int choose_prefetch(planner *b)
{
    const sched_kernel *k = b->k;
    sched_rowplan *p = b->p;
    int np = p->nphases, n = k->ninstr;
    bool math = false;
    if (np >= 1 && (np >= 2 || b->row_store)) {
        mark_closure(b, NULL, np >= 2 ? k->instr[p->phase[1]].src[0] : n - 1);
        for (int i = 0; i < n; i++)
            math |= b->mark[i] && p->per_elem[i] && is_math_instr(&k->instr[i]);
    }
    int64_t bytes = k->rank == 2 ? k->shape[0] * k->shape[1] * (int64_t)ir_dtype_size(k->node->dtype) : 0;
    if (!math || p->r1 != 1 || k->rank != 2 || k->shape[1] % SCHED_ROW_PF_CHUNK != 0 ||
        k->shape[1] < 4 * SCHED_ROW_PF_CHUNK || bytes < SCHED_ROW_PF_MIN_BYTES)
        return -1;
    for (int i = 0; i < n && p->npf < SCHED_ROW_PF_LOADS; i++) {
        const sched_instr *in = &k->instr[i];
        bool seen = false;
        for (int q = 0; q < p->npf; q++)
            seen |= k->instr[p->pf[q]].arg == in->arg;
        if (in->kind == SCHED_I_LOAD && !in->guarded && p->per_elem[i] && in->idx.stride[0] != 0 && in->idx.stride[1] == 1 && !seen)
            p->pf[p->npf++] = i;
    }
    return p->npf ? 1 : -1;
}

/* The act of a pass over the row ending with root: per element, what
 * `root` needs, stashes loaded where filled (then marked filled). */
static void row_acts(planner *b, unsigned char *act, unsigned char *filled, int root)
{
    const sched_rowplan *p = b->p;
    if (!p->per_elem[root])
        return;
    mark_closure(b, filled, root);
    for (int i = 0; i <= root; i++) {
        if (!b->mark[i] || !p->per_elem[i])
            continue;
        act[i] = !p->stash[i] ? SCHED_ROW_EVAL : filled[i] ? SCHED_ROW_LOAD : SCHED_ROW_EVAL_STASH;
    }
    for (int i = 0; i <= root; i++)
        if (b->mark[i] && p->stash[i])
            filled[i] = 1;
}

static sched_rowpass *add_pass(sched_rowplan *p, sched_rowpass_kind kind, int red, int root)
{
    sched_rowpass *ps = &p->pass[p->npass];
    ps->kind = kind;
    ps->red = red;
    ps->root = root;
    ps->act = (unsigned char *)p->mem + (size_t)p->npass * (size_t)p->ninstr;
    p->npass++;
    return ps;
}

static void per_row_acts(const sched_kernel *k, const sched_rowplan *p, int L, unsigned char *act)
{
    for (int i = 0; i < k->ninstr; i++)
        if (!p->per_elem[i] && p->stage[i] == L && k->instr[i].kind != SCHED_I_REDUCE)
            act[i] = SCHED_ROW_PER_ROW;
}

static void make_passes(planner *b, int pf_pass)
{
    const sched_kernel *k = b->k;
    sched_rowplan *p = b->p;
    int n = k->ninstr, last = n - 1;
    for (int L = 0; L < p->nphases; L++) {
        const sched_instr *red = &k->instr[p->phase[L]];
        sched_rowpass *ps = add_pass(p, SCHED_ROW_REDUCE, p->phase[L], red->src[0]);
        /* f32, f16 and bf16 sums and products accumulate in f64; a sum
         * first in f32 blocks (unless acc_f64): a chunked pass's chunk is
         * its block, the chunk loop being the natural place to add it */
        bool f32ish = red->dtype == RLX_F32 || half_float(red->dtype);
        bool wide = (red->op == IR_OP_SUM || red->op == IR_OP_PROD) && f32ish;
        ps->acc_dtype = wide ? RLX_F64 : red->dtype;
        ps->chunk = L == pf_pass ? SCHED_ROW_PF_CHUNK : 0;
        if (red->op == IR_OP_SUM && f32ish && !b->acc_f64 && p->r1 < k->rank) /* (no row dim: one element) */
            ps->block = ps->chunk > 0 ? ps->chunk : SCHED_SUM_BLOCK;
        per_row_acts(k, p, L, ps->act);
        row_acts(b, ps->act, b->filled, ps->root);
    }
    if (!b->row_store) {
        per_row_acts(k, p, p->nphases, add_pass(p, SCHED_ROW_STORE_ONE, -1, last)->act);
        return;
    }
    sched_rowpass *st = add_pass(p, SCHED_ROW_STORE, -1, last);
    st->fast_div = p->nfd > 0;
    st->chunk = p->nphases == pf_pass ? SCHED_ROW_PF_CHUNK : 0;
    per_row_acts(k, p, p->nphases, st->act);
    memcpy(b->uses, b->filled, (size_t)n); /* what the retry finds filled */
    if (p->ostash >= 0)
        b->uses[p->ostash] = 0;
    row_acts(b, st->act, b->filled, last);
    bool guarded = false;
    for (int i = 0; i < n; i++)
        guarded |= p->fdslot[i] >= 0 && st->act[i] == SCHED_ROW_EVAL;
    if (guarded)
        row_acts(b, add_pass(p, SCHED_ROW_RETRY, -1, last)->act, b->uses, last);
}

static rlx_status check_kernel(const sched_kernel *k, char *err, size_t errcap)
{
    if (k->kind != SCHED_LOOP || k->red_op != IR_OP_COUNT || k->ninstr < 1 || !k->instr || !k->node) {
        snprintf(err, errcap, "row plan: kernel is not a phased LOOP kernel");
        return RLX_E_INTERNAL;
    }
    int np = 0;
    for (int i = 0; i < k->ninstr; i++) {
        const sched_instr *in = &k->instr[i];
        np += in->kind == SCHED_I_REDUCE;
        for (int s = 0; s < sched_instr_nsrc(in); s++) {
            if (in->src[s] < 0 || in->src[s] >= i) {
                snprintf(err, errcap, "row plan: instruction %d (%s) reads %d", i, ir_ops[in->op].name, in->src[s]);
                return RLX_E_INTERNAL;
            }
        }
    }
    if (np > SCHED_MAX_PHASES) {
        snprintf(err, errcap, "row plan: kernel of %d phases, at most %d", np, SCHED_MAX_PHASES);
        return RLX_E_INTERNAL;
    }
    return RLX_OK;
}

rlx_status sched_rowplan_build(const sched_kernel *k, bool fma, bool acc_f64, sched_rowplan *p, char *err, size_t errcap)
{
    memset(p, 0, sizeof *p);
    rlx_status st = check_kernel(k, err, errcap);
    if (st != RLX_OK)
        return st;
    size_t n = (size_t)k->ninstr;
    /* acts of every pass, stage, then the byte arrays and the scratch */
    size_t acts = SCHED_ROW_PASSES * n, stage_off = (acts + sizeof(int) - 1) / sizeof(int) * sizeof(int);
    unsigned char *mem = ir_calloc(stage_off + n * sizeof(int) + 6 * n, 1);
    if (!mem) {
        snprintf(err, errcap, "out of memory planning a row kernel");
        return RLX_E_NOMEM;
    }
    p->mem = mem;
    p->ninstr = k->ninstr;
    p->ostash = -1;
    p->stage = (int *)(void *)(mem + stage_off);
    unsigned char *bytes = mem + stage_off + n * sizeof(int);
    p->per_elem = bytes;
    p->stash = bytes + n;
    p->fdslot = (signed char *)(bytes + 2 * n);
    planner b = {k, p, bytes + 3 * n, bytes + 4 * n, bytes + 5 * n, false, acc_f64};
    row_dims(k, p);
    levels(k, p);
    b.row_store = stores_over_row(k, p);
    choose_stashes(&b);
    choose_guards(&b, fma);
    int pf_pass = choose_prefetch(&b);
    make_passes(&b, pf_pass);
    return RLX_OK;
}

void sched_rowplan_free(sched_rowplan *p)
{
    ir_free(p->mem);
    memset(p, 0, sizeof *p);
    p->ostash = -1;
}

size_t sched_rowplan_key(const sched_kernel *k, uint64_t *buf, size_t cap)
{
    sched_rowplan p;
    char err[8];
    /* (fma changes which divisions are guarded, acc_f64 the blocks, never
     * with sizes: the knob word of the key has acc_f64) */
    if (sched_rowplan_build(k, true, false, &p, err, sizeof err) != RLX_OK)
        return SIZE_MAX;
    size_t n = 0;
#define PUT(v) do { uint64_t v_ = (uint64_t)(v); if (n < cap) buf[n] = v_; n++; } while (0)
    for (int i = 0; i < k->ninstr; i++)
        PUT(p.stash[i]);
    PUT(p.npass);
    for (int P = 0; P < p.npass; P++)
        PUT(p.pass[P].chunk);
    PUT(p.npf);
    for (int q = 0; q < p.npf; q++)
        PUT(p.pf[q]);
#undef PUT
    sched_rowplan_free(&p);
    return n;
}
