/*
 * schedule.c — the scheduler: cuts the unrealized part of a graph into
 * kernels (fusion) and lowers each fused kernel to a loop nest whose body
 * is a short SSA list with affine loads.
 *
 * Rules (v1):
 *  - views (permute, expand, slice, reshape) are free: they compose into
 *    the affine index of the loads below them; a reshape whose source can
 *    not be addressed affinely through the new shape makes that source a
 *    materialized value instead (found while lowering, then re-planned);
 *  - a pad is a view with a guard: its reader computes
 *    where(in bounds, source at the shifted index, fill), the bounds being
 *    per-dim ranges of the loop indices (SCHED_I_GUARD), and every load
 *    below it is taken only where they hold (a guarded load); dims a
 *    reader never reads outside the source get no guard. A pad is never
 *    part of a view chain the runtime composes (a REF kernel's operand, a
 *    root published as a view): there it is materialized by a LOOP kernel;
 *  - a cat is selects among its inputs, each read through a guard on its
 *    range along the axis (selects keep -0: never a sum of padded parts);
 *  - a loop dim runs as two (outer, inner) when a flat index must split it
 *    into digits (a row of heads read through permute and reshape);
 *  - elementwise ops and CONST/IOTA leaves fuse into their consumer's loop,
 *    however long the chain, broadcasts included;
 *  - SUM/PROD/MAX/MIN reductions absorb their elementwise producers
 *    (sum(x*y) is one pass); a reduction read by one kernel only, over the
 *    trailing dims of that kernel's loop, becomes a phase of that kernel
 *    (a pass over each row before the passes that read its value), so
 *    softmax, layer_norm, rms_norm, logsumexp run as one kernel; other
 *    reductions are kernels of their own;
 *  - a node needed by several kernels is materialized once, unless it is
 *    cheap (a view or a leaf) or a small elementwise cluster over values
 *    stored anyway (recomputable, below), which each kernel recomputes;
 *  - everything else (gather, cumsum, arg reductions, rand,
 *    library calls, the float math the code generator lacks: ops.def's
 *    emit and jit columns) is a REF kernel: one node through the
 *    reference evaluator.
 * Roots are always materialized; a root that is only a view of a
 * materialized value, or only reshapes of a computed one, is published as
 * a view (VIEW kernel), as the reference evaluator does.
 *
 * The pass sees nodes only: no LLVM, no executor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/cast.h"
#include "passes/passes.h"
#include "passes/knobs.h"

enum { C_REALIZED, C_LEAF, C_EW, C_VIEW, C_REDUCE, C_REF };
enum { NEED_NONE = -1, NEED_MULTI = -2 };
enum { MAX_DEPTH = 200, MAX_INSTR = 4096, ACC_MAX = SCHED_ACC_MAX, FIND_MAX = 256 };
/* Recomputation's budget: the ops of an elementwise cluster (a MATH op,
 * a polynomial, counts RECOMP_MATH) that each reader computes again. */
enum { RECOMP_MAX = 16, RECOMP_MATH = 8 };

/* ------------------------------------------------------------ op classes */

/* Whether n fuses into a LOOP kernel: ops.def's emit and jit columns, for
 * the node's dtype and its sources'. */
bool sched_fusable(const ir_node *n)
{
    if (ir_node_numel(n) < 0)
        return false; /* dynamic dims: only below inputs, which the reference reports */
    if (!ir_op_jits(n->op, n->dtype))
        return false;
    for (int s = 0; s < n->nsrc; s++)
        if (!ir_op_jits(n->op, n->src[s]->dtype) || ir_node_numel(n->src[s]) < 0)
            return false;
    return true;
}

static int node_class(const ir_node *n)
{
    /* a constant's storage is a cache (lower_uncached): planned as if
     * absent, so the schedule does not depend on whether it was realized */
    if (ir_node_storage(n) && n->op != IR_OP_CONST)
        return C_REALIZED;
    if (!sched_fusable(n))
        return C_REF;
    switch (ir_ops[n->op].cls) {
    case IR_CLS_LEAF: return C_LEAF;
    case IR_CLS_MOVEMENT: return C_VIEW;
    case IR_CLS_REDUCE: return C_REDUCE;
    default: return C_EW;
    }
}

/* ------------------------------------------------------------- planning */

typedef struct {
    sched_liveness lv;
    unsigned char *cls;      /* C_* per order index */
    unsigned char *forced;   /* materialize: decided by an earlier lowering */
    unsigned char *is_root;
    unsigned char *must_m;   /* materialize: a REF kernel reads it */
    unsigned char *is_m;     /* materialized by a LOOP or REF kernel */
    unsigned char *view_root;/* a root published as a view of a materialized value */
    long *need;              /* NEED_NONE, NEED_MULTI or the one kernel that reads it */
    int *depth;              /* fused levels below its kernel's root (the lowering's recursion depth) */
    int *rcost;              /* recomputable: its cluster's cost; -1 when not */
    long *rload;             /* recomputable: the value of its size its cluster reads, -1 none */
    unsigned char *rmath;    /* its cluster has a MATH op; then (count more) read by a reduction */
    const knob_state *knobs; /* borrows: the fusion knobs */
} planner;

static long pos_of(const planner *p, const ir_node *n) { return ir_map_get(&p->lv.pos, n); }

/* A view the runtime can take as strides (a pad is not: it writes its fill). */
static bool is_chain_view(const planner *p, const ir_node *n)
{
    return p->cls[pos_of(p, n)] == C_VIEW && n->op != IR_OP_PAD;
}

/* The value under a chain of views (the node itself when it is none). */
static const ir_node *chain_bottom(const planner *p, const ir_node *n)
{
    while (is_chain_view(p, n))
        n = n->src[0];
    return n;
}

/* A chain of at least one reshape (and nothing else) over a non-view. */
static bool reshape_chain(const planner *p, const ir_node *n)
{
    if (!is_chain_view(p, n) || n->op != IR_OP_RESHAPE)
        return false;
    while (is_chain_view(p, n)) {
        if (n->op != IR_OP_RESHAPE)
            return false;
        n = n->src[0];
    }
    return true;
}

static long merge_need(long a, long b)
{
    if (a == NEED_NONE)
        return b;
    if (b == NEED_NONE || a == b)
        return a;
    return NEED_MULTI;
}

/* Which elementwise nodes every reader may compute again (rcost >= 0):
 * those whose cluster -- the node and its recomputable sources, through
 * views -- costs at most RECOMP_MAX and reads at most one value of its
 * own size (rload; smaller ones, a row's statistics or a bias, are
 * broadcast and stay in cache), which must be a leaf, a realized value or
 * another elementwise value (stored, or fused, anyway). A stored value
 * costs a write and a read per reader, the memory traffic the training
 * step's elementwise kernels are bound by, while recomputing a few ops
 * over a value the reader loads costs none: tanh-GELU's forward is one
 * kernel, not five whose pieces its gradient reads back, and
 * layer_norm's normalized rows are recomputed from x and the row
 * statistics. A sum of two full values (a residual add) is stored: each
 * reader would load both. A REF or reduction source stops it, as
 * recomputing would keep such a value alive (a GEMM's output past its
 * epilogue) or split a row kernel's phases. A cluster with a MATH op is
 * not recomputed into a reduction (the value a reduction reads, through
 * elementwise nodes with no other reader): there the polynomial runs
 * several times slower than in an elementwise loop (cross-entropy's exp
 * summed over rows of 96: 0.11 ms against 0.02 stored). A cluster of
 * leaves alone (a causal mask of iotas) is stored: recomputed inside
 * attention's softmax row kernel it made W10b's 2.8 ms, not 0.65. */
static void plan_recompute(planner *p)
{
    unsigned char *red = p->rmath + p->lv.count; /* read by a reduction */
    memset(red, 0, (size_t)p->lv.count);
    for (long i = p->lv.count - 1; i >= 0; i--) {
        const ir_node *node = p->lv.order[i];
        if (p->cls[i] != C_REDUCE && !(p->cls[i] == C_EW && red[i] && p->lv.uses[i] == 1))
            continue;
        for (int s = 0; s < node->nsrc; s++)
            red[pos_of(p, chain_bottom(p, node->src[s]))] = 1;
    }
    for (long i = 0; i < p->lv.count; i++) {
        const ir_node *node = p->lv.order[i];
        p->rcost[i] = -1;
        if (p->cls[i] != C_EW || node->op == IR_OP_CONTIGUOUS)
            continue;
        bool math = ir_ops[node->op].emit == IR_EMIT_MATH;
        int cost = math ? RECOMP_MATH : 1;
        long load = -1; /* the one value of its size it reads */
        for (int s = 0; s < node->nsrc && cost <= RECOMP_MAX; s++) {
            long b = pos_of(p, chain_bottom(p, node->src[s])), got = -1;
            int bc = p->cls[b];
            if (bc == C_EW && p->rcost[b] >= 0) {
                cost += p->rcost[b];
                got = p->rload[b];
                math |= p->rmath[b];
            } else if (bc == C_REALIZED || bc == C_EW) {
                got = ir_node_numel(p->lv.order[b]) >= ir_node_numel(node) ? b : -1;
            } else if (bc != C_LEAF) {
                cost = RECOMP_MAX + 1;
            }
            if (got >= 0 && load >= 0 && got != load)
                cost = RECOMP_MAX + 1;
            if (got >= 0)
                load = got;
        }
        p->rload[i] = load;
        p->rmath[i] = math;
        if (cost <= RECOMP_MAX && load >= 0 && !(math && red[i]))
            p->rcost[i] = cost;
    }
}

/* Decides which nodes are materialized; returns the number of kernels. */
static long plan(planner *p, const ir_node *const *roots, int nroots)
{
    long n = p->lv.count;
    memset(p->is_root, 0, (size_t)n);
    memset(p->must_m, 0, (size_t)n);
    memset(p->is_m, 0, (size_t)n);
    memset(p->view_root, 0, (size_t)n);
    for (long i = 0; i < n; i++)
        p->need[i] = NEED_NONE;
    memset(p->depth, 0, (size_t)n * sizeof *p->depth);
    plan_recompute(p);
    for (int r = 0; r < nroots; r++)
        p->is_root[pos_of(p, roots[r])] = 1;
    /* A root that is a view chain over a value materialized anyway is
     * published as a view, sharing its storage (as the reference does). */
    for (int r = 0; r < nroots; r++) {
        long i = pos_of(p, roots[r]);
        if (p->cls[i] != C_VIEW || p->forced[i])
            continue;
        long b = pos_of(p, chain_bottom(p, roots[r]));
        int bc = p->cls[b];
        /* reshapes of a computed value: computing the value itself is the
         * same work, and its kernel keeps the value's own loop space (a
         * squeezed logsumexp stays one row kernel) */
        if (bc == C_REALIZED || bc == C_REF || bc == C_REDUCE || p->forced[b] ||
            (p->is_root[b] && bc != C_VIEW) || p->lv.order[b]->op == IR_OP_CONTIGUOUS ||
            (bc == C_EW && reshape_chain(p, roots[r])))
            p->view_root[i] = 1;
    }
    /* fusion rules switched off for ablation (passes/knobs.c "fuse_*") */
    bool no_ew = !knob_value(p->knobs, KNOB_FUSE_ELEMENTWISE, KCLASS_ANY, -1),
         no_red = !knob_value(p->knobs, KNOB_FUSE_REDUCE, KCLASS_ANY, -1),
         no_phases = !knob_value(p->knobs, KNOB_FUSE_PHASES, KCLASS_ANY, -1);
    long kernels = 0;
    for (long i = n - 1; i >= 0; i--) {
        ir_node *node = p->lv.order[i];
        int c = p->cls[i];
        if (c == C_REALIZED)
            continue;
        bool cheap = c == C_VIEW || c == C_LEAF;
        /* a reduction read by one kernel only joins it as a phase (the
         * lowering checks the loop spaces agree, else forces it) */
        bool m = (p->is_root[i] && !p->view_root[i]) || c == C_REF || (c == C_REDUCE && p->need[i] < 0) ||
                 p->forced[i] || p->must_m[i] || node->op == IR_OP_CONTIGUOUS ||
                 (!cheap && p->need[i] == NEED_MULTI && (no_ew || p->rcost[i] < 0)) || (c == C_REDUCE && no_phases) ||
                 (c == C_EW && p->need[i] >= 0 && (no_ew || (no_red && p->cls[p->need[i]] == C_REDUCE)));
        /* a chain fused deeper than the lowering recurses is cut here, in
         * one plan, rather than by re-planning at each cut (which made a
         * long chain quadratic) */
        if ((c == C_EW || c == C_VIEW) && p->need[i] >= 0 && p->depth[i] > MAX_DEPTH)
            m = true;
        if (p->view_root[i]) {
            long b = pos_of(p, chain_bottom(p, node));
            if (p->cls[b] != C_REALIZED)
                p->must_m[b] = 1;
            kernels++;
        }
        if (m) {
            p->is_m[i] = 1;
            long g = i; /* a kernel is named by the order index of its node */
            kernels++;
            if (c == C_REF) {
                /* The reference evaluator reads views of materialized values. */
                for (int s = 0; s < node->nsrc; s++) {
                    long b = pos_of(p, chain_bottom(p, node->src[s]));
                    if (p->cls[b] != C_REALIZED)
                        p->must_m[b] = 1;
                }
                continue;
            }
            for (int s = 0; s < node->nsrc; s++) {
                long j = pos_of(p, node->src[s]);
                p->need[j] = merge_need(p->need[j], g);
                if (p->depth[j] < 1)
                    p->depth[j] = 1;
            }
            continue;
        }
        if (p->need[i] == NEED_NONE)
            continue; /* only read through a view chain by the runtime */
        for (int s = 0; s < node->nsrc; s++) {
            long j = pos_of(p, node->src[s]);
            p->need[j] = merge_need(p->need[j], p->need[i]);
            if (p->depth[j] < p->depth[i] + 1)
                p->depth[j] = p->depth[i] + 1;
        }
    }
    return kernels;
}

/* -------------------------------------------------------------- lowering */

/* Where a node is read from, relative to the kernel's loop indices: per
 * node dim an affine index, or (below a reshape) the flat index into the
 * node's row-major layout. */
typedef struct {
    int flat;
    int cond;              /* the guard of the loads below (a pad's): its instruction + 1; 0 when none */
    /* with cond: the box of loop indices the guard can hold on (loop dim
     * k in [lo[k], hi[k]]); a map need be valid only there. The box is a
     * function of cond, so the memo need not compare it. */
    int64_t lo[SCHED_MAX_LOOP], hi[SCHED_MAX_LOOP];
    const ir_node *origin; /* the reshape that made the map flat */
    sched_affine f;
    sched_affine dim[IR_MAX_RANK];
} lmap;

/* The memo: (node, map) -> instruction. Entries are small (the map lives
 * in a side array) and hash only the part of a map that means something
 * (node->rank dims, or the flat index, over the loop's rank): lowering a
 * small graph must cost little, it runs on every realization. */
typedef struct {
    uint64_t h; /* the ir_table hash word */
    const ir_node *n;
    int instr;
    int map;
} memo_ent;

typedef struct {
    planner *p;
    sched_kernel *k;
    const ir_node *root;
    int lrank;
    int64_t lshape[SCHED_MAX_LOOP];
    bool lempty;
    /* A loop dim that must run as two (outer, inner of extent q) for a
     * flat index to split into digits affinely (a row of heads read as
     * [heads, head width]): asked by to_dims, granted by a new lowering
     * (want_q 0: none asked). Elementwise kernels only. */
    int want_at;
    int64_t want_q;
    int cap_instr, cap_args;
    ir_table memo;              /* of memo_ent */
    lmap *maps;                 /* the maps of the memo entries */
    size_t maps_cap;
    uint32_t red_mask;          /* the row dims, once a reduction set them */
    bool mask_set;
    int nred;                   /* SCHED_I_REDUCE instructions so far */
    const ir_node *first_abs;   /* the first reduction absorbed as a phase */
    const ir_node *blame;       /* to materialize when lowering fails */
    bool oom;
} lower_ctx;

static void contiguous_strides(int rank, const int64_t *shape, int64_t *st)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s = (int64_t)((uint64_t)s * (uint64_t)(shape[i] > 0 ? shape[i] : 1)); /* candidate fix: see ref_eval.c */
    }
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static uint64_t memo_hash(const lower_ctx *c, const ir_node *n, const lmap *m)
{
    uint64_t h = mix((uint64_t)(uintptr_t)n ^ (uint64_t)m->flat << 63 ^ (uint64_t)(uint32_t)m->cond << 32);
    int nd = m->flat ? 1 : n->rank;
    for (int d = 0; d < nd; d++) {
        const sched_affine *a = m->flat ? &m->f : &m->dim[d];
        h = mix(h + (uint64_t)a->off);
        for (int k = 0; k < c->lrank; k++)
            h = mix(h + (uint64_t)a->stride[k]);
    }
    return ir_table_hash(h);
}

static bool map_eq(const lower_ctx *c, const ir_node *n, const lmap *a, const lmap *b)
{
    if (a->flat != b->flat || a->cond != b->cond)
        return false;
    int nd = a->flat ? 1 : n->rank;
    for (int d = 0; d < nd; d++) {
        const sched_affine *x = a->flat ? &a->f : &a->dim[d], *y = b->flat ? &b->f : &b->dim[d];
        if (x->off != y->off || memcmp(x->stride, y->stride, (size_t)c->lrank * sizeof *x->stride))
            return false;
    }
    return true;
}

static int memo_find(const lower_ctx *c, const ir_node *n, const lmap *m, uint64_t h)
{
    const memo_ent *tab = c->memo.slots;
    if (!c->memo.cap)
        return -1;
    for (size_t i = ir_table_home(&c->memo, h); tab[i].h; i = ir_table_next(&c->memo, i))
        if (tab[i].n == n && tab[i].h == h && map_eq(c, n, &c->maps[tab[i].map], m))
            return tab[i].instr;
    return -1;
}

static bool memo_put(lower_ctx *c, const ir_node *n, const lmap *m, uint64_t h, int instr)
{
    size_t count = c->memo.count;
    if (count == c->maps_cap) {
        size_t cap = c->maps_cap ? c->maps_cap * 2 : 16;
        lmap *t = ir_realloc(c->maps, cap * sizeof *t);
        if (!t)
            return false;
        c->maps = t;
        c->maps_cap = cap;
    }
    if (!ir_table_reserve(&c->memo, sizeof(memo_ent), 32))
        return false;
    c->maps[count] = *m;
    memo_ent *e = ir_table_claim(&c->memo, sizeof *e, h);
    e->n = n;
    e->instr = instr;
    e->map = (int)count;
    return true;
}

static int add_instr(lower_ctx *c, const sched_instr *in)
{
    sched_kernel *k = c->k;
    if (k->ninstr == c->cap_instr) {
        int cap = c->cap_instr ? c->cap_instr * 2 : 16;
        sched_instr *t = ir_realloc(k->instr, (size_t)cap * sizeof *t);
        if (!t) {
            c->oom = true;
            return -1;
        }
        k->instr = t;
        c->cap_instr = cap;
    }
    k->instr[k->ninstr] = *in;
    return k->ninstr++;
}

static int arg_index(lower_ctx *c, ir_node *n)
{
    sched_kernel *k = c->k;
    for (int i = 1; i < k->nargs; i++)
        if (k->args[i] == n)
            return i;
    if (k->nargs == c->cap_args) {
        int cap = c->cap_args * 2;
        ir_node **t = ir_realloc(k->args, (size_t)cap * sizeof *t);
        if (!t) {
            c->oom = true;
            return -1;
        }
        k->args = t;
        c->cap_args = cap;
    }
    k->args[k->nargs] = n;
    return k->nargs++;
}

static void affine_add_scaled(sched_affine *dst, const sched_affine *a, int64_t s)
{
    dst->off += a->off * s;
    /* every loop dim: a loop split one past the rank limit has SCHED_MAX_LOOP
     * (its innermost step was dropped, a stride 0 reading one element) */
    for (int k = 0; k < SCHED_MAX_LOOP; k++)
        dst->stride[k] += a->stride[k] * s;
}

/* The flat row-major index of n's element under a per-dim map. */
static void flatten(const ir_node *n, const lmap *m, sched_affine *f)
{
    int64_t cs[IR_MAX_RANK];
    contiguous_strides(n->rank, n->shape, cs);
    memset(f, 0, sizeof *f);
    for (int d = 0; d < n->rank; d++)
        affine_add_scaled(f, &m->dim[d], cs[d]);
}

/* The range of loop dim k under map m: its box when guarded, else the loop. */
static void loop_range(const lower_ctx *c, const lmap *m, int k, int64_t *lo, int64_t *hi)
{
    if (m->cond) {
        *lo = m->lo[k];
        *hi = m->hi[k];
    } else {
        *lo = 0;
        *hi = c->lshape[k] - 1;
    }
}

/* The range [*lo, *hi] of a over the loop indices m may be read at. */
static void affine_range(const lower_ctx *c, const lmap *m, const sched_affine *a, int64_t *lo, int64_t *hi)
{
    *lo = *hi = a->off;
    for (int k = 0; k < c->lrank; k++) {
        int64_t l, h;
        loop_range(c, m, k, &l, &h);
        int64_t x = a->stride[k] * l, y = a->stride[k] * h;
        *lo += x < y ? x : y;
        *hi += x < y ? y : x;
    }
}

/* The guard of m (and its box) on s. */
static void keep_guard(lmap *s, const lmap *m)
{
    s->cond = m->cond;
    if (m->cond) {
        memcpy(s->lo, m->lo, sizeof s->lo);
        memcpy(s->hi, m->hi, sizeof s->hi);
    }
}

/* to_dims failed on digit d of n: a loop dim stepping t through that
 * digit from 0 and running past it would split into digits as an outer
 * dim and an inner one of shape[d] / t. */
static void ask_split(lower_ctx *c, const lmap *m, const sched_affine *f, const ir_node *n, const int64_t *cs, int d)
{
    if (c->mask_set || c->want_q || c->lrank >= SCHED_MAX_LOOP)
        return;
    for (int k = 0; k < c->lrank; k++) {
        int64_t a = f->stride[k], l, h;
        loop_range(c, m, k, &l, &h);
        if (a <= 0 || a % cs[d] || h <= l)
            continue;
        int64_t t = a / cs[d], q = n->shape[d] / t;
        if (t * cs[d] == a && n->shape[d] % t == 0 && q > 1 && q < c->lshape[k] && c->lshape[k] % q == 0) {
            c->want_at = k;
            c->want_q = q;
            return;
        }
    }
}

/* Rewrites m's flat index into per-dim indices of n's shape; false when
 * the digits are not affine in the loop indices (checked over the loop
 * indices m is read at: its box under a guard, whose corner is the base). */
static bool to_dims(lower_ctx *c, const lmap *m, const ir_node *n, lmap *out)
{
    const sched_affine *f = &m->f;
    memset(out, 0, sizeof *out);
    keep_guard(out, m);
    if (c->lempty || ir_node_numel(n) == 0)
        return true; /* nothing is ever read */
    int64_t cs[IR_MAX_RANK], base[SCHED_MAX_LOOP], f0 = f->off;
    contiguous_strides(n->rank, n->shape, cs);
    for (int k = 0; k < c->lrank; k++) {
        int64_t h;
        loop_range(c, m, k, &base[k], &h);
        f0 += f->stride[k] * base[k];
    }
    if (f0 < 0 || f0 >= ir_node_numel(n))
        return false;
    for (int d = 0; d < n->rank; d++)
        out->dim[d].off = f0 / cs[d] % n->shape[d];
    for (int k = 0; k < c->lrank; k++) {
        int64_t a = f->stride[k], l, h;
        loop_range(c, m, k, &l, &h);
        if (a == 0 || h <= l)
            continue;
        int64_t mag = a < 0 ? -a : a;
        int d = 0;
        while (d < n->rank && (n->shape[d] <= 1 || mag % cs[d] != 0))
            d++;
        if (d == n->rank)
            return false;
        out->dim[d].stride[k] += a / cs[d];
    }
    for (int d = 0; d < n->rank; d++) {
        int64_t lo = out->dim[d].off, hi = lo; /* the digit at the base, plus steps over the box */
        for (int k = 0; k < c->lrank; k++) {
            int64_t l, h;
            loop_range(c, m, k, &l, &h);
            int64_t span = out->dim[d].stride[k] * (h - l);
            if (span < 0)
                lo += span;
            else
                hi += span;
        }
        if (lo < 0 || hi >= n->shape[d]) {
            ask_split(c, m, f, n, cs, d);
            return false;
        }
    }
    /* relative to loop index 0 */
    for (int d = 0; d < n->rank; d++)
        for (int k = 0; k < c->lrank; k++)
            out->dim[d].off -= out->dim[d].stride[k] * base[k];
    return true;
}

static int lower(lower_ctx *c, ir_node *n, const lmap *m, int depth);

/* m itself, or m as per-dim indices in *dm when it is a flat map; NULL
 * (blaming the view it came through) when the split is not exact. */
static const lmap *dims_map(lower_ctx *c, const lmap *m, const ir_node *n, lmap *dm)
{
    if (!m->flat)
        return m;
    if (!to_dims(c, m, n, dm)) {
        c->blame = m->origin->src[0];
        return NULL;
    }
    return dm;
}

/* The map of a view's source, from the map of the view. */
static bool compose_view(lower_ctx *c, const ir_node *v, const lmap *m, lmap *s)
{
    const ir_node *x = v->src[0];
    const ir_attrs *a = &v->attr;
    lmap dm;
    if (v->op != IR_OP_RESHAPE && !(m = dims_map(c, m, v, &dm)))
        return false;
    memset(s, 0, sizeof *s);
    switch (v->op) {
    case IR_OP_PERMUTE:
        for (int k = 0; k < v->rank; k++)
            s->dim[a->perm.perm[k]] = m->dim[k];
        return true;
    case IR_OP_EXPAND:
        for (int k = 0; k < v->rank; k++)
            if (x->shape[k] != 1)
                s->dim[k] = m->dim[k];
        return true;
    case IR_OP_SLICE:
        for (int k = 0; k < v->rank; k++) {
            if (a->slice.len[k] <= 0)
                continue;
            s->dim[k].off = a->slice.start[k];
            affine_add_scaled(&s->dim[k], &m->dim[k], a->slice.step[k]);
        }
        return true;
    case IR_OP_RESHAPE:
        /* A reshape keeps the flat index; the source is read flat. */
        s->flat = 1;
        s->origin = v;
        if (m->flat)
            s->f = m->f;
        else
            flatten(v, m, &s->f);
        return true;
    default:
        return false;
    }
}

static int lower_load(lower_ctx *c, ir_node *n, const lmap *m)
{
    sched_instr in;
    memset(&in, 0, sizeof in);
    in.kind = SCHED_I_LOAD;
    in.dtype = n->dtype;
    in.guarded = m->cond > 0;
    in.src[0] = in.guarded ? m->cond - 1 : 0;
    in.arg = arg_index(c, n);
    if (in.arg < 0)
        return -1;
    if (m->flat)
        in.idx = m->f;
    else
        flatten(n, m, &in.idx);
    return add_instr(c, &in);
}

/* True when a is exactly loop index d. */
static bool is_loop_index(const sched_affine *a, int d)
{
    if (a->off != 0)
        return false;
    for (int k = 0; k < SCHED_MAX_LOOP; k++)
        if (a->stride[k] != (k == d))
            return false;
    return true;
}

/* A reduction in this kernel (its root, or one absorbed as a phase) read at
 * map m: its source runs over the kernel's own loop space, the reduced
 * dims being the kernel's row dims and its kept dims the same loop dims as
 * the kernel's. Else it is blamed (materialized on the next plan). */
static int lower_reduce(lower_ctx *c, ir_node *n, const lmap *m, int depth)
{
    lmap dm;
    if (m->cond) { /* a pad above a phase: the reduction is a value of its own */
        c->blame = n;
        return -1;
    }
    if (!(m = dims_map(c, m, n, &dm)))
        return -1;
    ir_node *x = n->src[0];
    uint32_t mask = n->attr.red.mask;
    bool ok = x->rank == c->lrank && c->nred < SCHED_MAX_PHASES && (!c->mask_set || c->red_mask == mask);
    lmap s;
    memset(&s, 0, sizeof s);
    for (int d = 0; ok && d < x->rank; d++) {
        ok = x->shape[d] == c->lshape[d];
        if (mask >> d & 1) {
            s.dim[d].stride[d] = 1; /* the row: this kernel's loop dim d */
        } else {
            s.dim[d] = m->dim[d];
            if (ok && x->shape[d] > 1)
                ok = is_loop_index(&m->dim[d], d);
        }
    }
    if (!ok) {
        c->blame = n;
        return -1;
    }
    c->red_mask = mask;
    c->mask_set = true;
    if (n != c->root && !c->first_abs)
        c->first_abs = n;
    int v = lower(c, x, &s, depth + 1);
    if (v < 0)
        return -1;
    if (c->nred >= SCHED_MAX_PHASES) { /* x's own reductions took the last phases */
        c->blame = n != c->root ? n : c->first_abs;
        return -1;
    }
    sched_instr in;
    memset(&in, 0, sizeof in);
    in.kind = SCHED_I_REDUCE;
    in.op = n->op;
    in.dtype = n->dtype;
    in.src[0] = v;
    c->nred++;
    return add_instr(c, &in);
}

static int add_op(lower_ctx *c, ir_op op, rlx_dtype dt, int a, int b, int d)
{
    sched_instr in;
    memset(&in, 0, sizeof in);
    in.kind = SCHED_I_OP;
    in.op = op;
    in.dtype = dt;
    in.src[0] = a;
    in.src[1] = b;
    in.src[2] = d;
    return add_instr(c, &in);
}

/* A pad's fill: a slot of the constant array, read from no CONST node
 * (the plan's own value; the pad's attributes are part of a plan's key). */
static int pad_fill(lower_ctx *c, const ir_node *n)
{
    sched_instr in;
    memset(&in, 0, sizeof in);
    in.kind = SCHED_I_CONST;
    in.dtype = n->dtype;
    in.value = ir_cast_const(n->attr.pad.value, n->dtype); /* as the reference stores it */
    in.arg = c->k->nconsts++;
    return add_instr(c, &in);
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return q * b != a && (a < 0) != (b < 0) ? q - 1 : q;
}

static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/* Narrows s's box to where lo <= a < hi, when a steps along one loop dim,
 * or is the digits of a mixed radix whose top digit alone decides (a
 * split row of heads, the bounds on whole heads); else the box stays as
 * it is: it bounds where the guard holds, loosely. False when the box
 * becomes empty. */
static bool box_restrict(const lower_ctx *c, lmap *s, const sched_affine *a, int64_t lo, int64_t hi)
{
    int k = -1, nz = 0;
    for (int j = 0; j < c->lrank; j++) {
        if (a->stride[j] == 0)
            continue;
        nz++;
        if (k < 0 || llabs((long long)a->stride[j]) > llabs((long long)a->stride[k]))
            k = j;
    }
    if (k < 0)
        return a->off >= lo && a->off < hi;
    if (nz > 1) {
        int64_t st = a->stride[k], rlo = 0, rhi = 0;
        for (int j = 0; j < c->lrank; j++) {
            int64_t x = j == k ? 0 : a->stride[j] * s->lo[j], y = j == k ? 0 : a->stride[j] * s->hi[j];
            rlo += x < y ? x : y;
            rhi += x < y ? y : x;
        }
        if (st <= 0 || rlo < 0 || rhi >= st || (lo - a->off) % st || (hi - a->off) % st)
            return true;
        /* the lower digits stay inside one step of the top one and the
         * bounds are whole steps: the top digit alone decides */
        sched_affine top = {.off = a->off};
        top.stride[k] = st;
        return box_restrict(c, s, &top, lo, hi);
    }
    int64_t st = a->stride[k], x = lo - a->off, y = hi - 1 - a->off, l, h;
    if (st > 0) {
        l = ceil_div(x, st);
        h = floor_div(y, st);
    } else {
        l = ceil_div(y, st);
        h = floor_div(x, st);
    }
    if (l > s->lo[k])
        s->lo[k] = l;
    if (h < s->hi[k])
        s->hi[k] = h;
    return s->lo[k] <= s->hi[k];
}

/* pad(x) at map m: where(guard, x at the shifted map, fill), the loads of
 * x guarded by the conjunction of this guard and the ones above. */
static int lower_pad(lower_ctx *c, ir_node *n, const lmap *m, int depth)
{
    lmap dm;
    if (!(m = dims_map(c, m, n, &dm)))
        return -1;
    ir_node *x = n->src[0];
    const ir_attrs *a = &n->attr;
    if (c->lempty || ir_node_numel(x) == 0)
        return pad_fill(c, n); /* nothing is read: every element is the fill */
    lmap s = *m;
    if (!m->cond)
        for (int k = 0; k < c->lrank; k++)
            loop_range(c, m, k, &s.lo[k], &s.hi[k]);
    int g = -1;
    for (int d = 0; d < n->rank; d++) {
        int64_t b = a->pad.before[d], e = b + x->shape[d], lo, hi;
        if (b == 0 && a->pad.after[d] == 0)
            continue;
        s.dim[d].off -= b;
        affine_range(c, m, &m->dim[d], &lo, &hi);
        if (hi < b || lo >= e)
            return pad_fill(c, n); /* the reader sees only the padding */
        if (lo >= b && hi < e)
            continue; /* and here none of it */
        sched_instr in;
        memset(&in, 0, sizeof in);
        in.kind = SCHED_I_GUARD;
        in.dtype = RLX_BOOL;
        in.idx = m->dim[d];
        in.lo = b;
        in.hi = e;
        int t = add_instr(c, &in);
        if (t < 0 || (g >= 0 && (t = add_op(c, IR_OP_AND, RLX_BOOL, g, t, 0)) < 0))
            return -1;
        g = t;
        if (!box_restrict(c, &s, &m->dim[d], b, e))
            return pad_fill(c, n); /* the guard never holds */
    }
    if (g < 0)
        return lower(c, x, &s, depth + 1);
    int all = m->cond ? add_op(c, IR_OP_AND, RLX_BOOL, m->cond - 1, g, 0) : g;
    if (all < 0)
        return -1;
    s.cond = all + 1;
    int v = lower(c, x, &s, depth + 1), f = v < 0 ? -1 : pad_fill(c, n);
    return f < 0 ? -1 : add_op(c, IR_OP_WHERE, n->dtype, g, v, f);
}

/* cat(x_0, ..., x_k) at map m: where(g_0, x_0, where(g_1, x_1, ... x_k))
 * over the inputs the map can reach, g_s the guard of x_s's range along
 * the axis (selects, never sums: a -0 stays -0), each input's loads
 * guarded by its own range. Built from the last input back. */
static int lower_cat(lower_ctx *c, ir_node *n, const lmap *m, int depth)
{
    lmap dm;
    if (!(m = dims_map(c, m, n, &dm)))
        return -1;
    int ax = n->attr.ax.axis, v = -1;
    if (c->lempty)
        return lower(c, n->src[0], m, depth + 1); /* nothing is read */
    int64_t lo, hi, at = n->shape[ax];
    affine_range(c, m, &m->dim[ax], &lo, &hi);
    for (int i = n->nsrc - 1; i >= 0; i--) {
        ir_node *x = n->src[i];
        int64_t b = at - x->shape[ax], e = at;
        at = b;
        if (hi < b || lo >= e || b == e)
            continue; /* never read here */
        lmap s = *m;
        s.dim[ax].off -= b;
        if (lo >= b && hi < e) /* the only input read */
            return lower(c, x, &s, depth + 1);
        if (!m->cond)
            for (int k = 0; k < c->lrank; k++)
                loop_range(c, m, k, &s.lo[k], &s.hi[k]);
        sched_instr in;
        memset(&in, 0, sizeof in);
        in.kind = SCHED_I_GUARD;
        in.dtype = RLX_BOOL;
        in.idx = m->dim[ax];
        in.lo = b;
        in.hi = e;
        int g = add_instr(c, &in);
        int all = g < 0 ? -1 : m->cond ? add_op(c, IR_OP_AND, RLX_BOOL, m->cond - 1, g, 0) : g;
        if (all < 0)
            return -1;
        s.cond = all + 1;
        if (!box_restrict(c, &s, &m->dim[ax], b, e))
            continue;
        int xv = lower(c, x, &s, depth + 1);
        if (xv < 0)
            return -1;
        /* the last input read needs no select: the index lies in it when
         * it lies in no earlier one */
        v = v < 0 ? xv : add_op(c, IR_OP_WHERE, n->dtype, g, xv, v);
        if (v < 0)
            return -1;
    }
    if (v < 0) { /* cannot happen: the map reads inside the cat */
        c->blame = n;
        return -1;
    }
    return v;
}

static int lower_uncached(lower_ctx *c, ir_node *n, const lmap *m, int depth)
{
    long i = pos_of(c->p, n);
    int cls = c->p->cls[i];
    sched_instr in;
    memset(&in, 0, sizeof in);
    in.dtype = n->dtype;
    /* A constant read by a kernel is a slot of its constant array (the
     * value is not compiled in), also when the constant has storage: a
     * binding or rlx_realize may have realized it, on a node hash-consing
     * shares with every graph holding that value, or this schedule
     * materializes it for a library kernel. Loading it instead would make
     * the kernel depend on that history (a program's second binding
     * compiled new kernels). A LOOP kernel's root is fusable, so a CONST
     * root is a constant slot too. */
    if (n->op == IR_OP_CONST) {
        in.kind = SCHED_I_CONST;
        in.value = ir_cast_const(n->attr.cst.value, n->dtype); /* as the reference stores it */
        in.cst = n;
        in.arg = c->k->nconsts++;
        return add_instr(c, &in);
    }
    if (n != c->root && (cls == C_REALIZED || c->p->is_m[i]))
        return lower_load(c, n, m);
    if (depth > MAX_DEPTH || c->k->ninstr > MAX_INSTR) {
        c->blame = n; /* a very long chain: cut it here */
        return -1;
    }
    switch (cls) {
    case C_LEAF: { /* an IOTA: constants were lowered above */
        lmap dm;
        if (m->flat) {
            if (!to_dims(c, m, n, &dm)) {
                c->blame = m->origin->src[0];
                return -1;
            }
            m = &dm;
        }
        in.kind = SCHED_I_IOTA;
        in.value = n->attr.iota.start;
        in.step = n->attr.iota.step;
        in.idx = m->dim[n->attr.iota.axis];
        return add_instr(c, &in);
    }
    case C_VIEW: {
        if (n->op == IR_OP_PAD)
            return lower_pad(c, n, m, depth);
        lmap s;
        if (!compose_view(c, n, m, &s))
            return -1;
        keep_guard(&s, m);
        return lower(c, n->src[0], &s, depth + 1);
    }
    case C_EW: {
        if (n->op == IR_OP_CAT)
            return lower_cat(c, n, m, depth);
        int src[3] = {0, 0, 0};
        for (int s = 0; s < n->nsrc; s++)
            if ((src[s] = lower(c, n->src[s], m, depth + 1)) < 0)
                return -1;
        if (n->op == IR_OP_CONTIGUOUS || n->op == IR_OP_STOP_GRAD)
            return src[0]; /* identities inside a loop */
        in.kind = SCHED_I_OP;
        in.op = n->op;
        memcpy(in.src, src, sizeof src);
        return add_instr(c, &in);
    }
    case C_REDUCE:
        return lower_reduce(c, n, m, depth);
    default:
        c->blame = n; /* cannot happen: REF nodes are materialized */
        return -1;
    }
}

static int lower(lower_ctx *c, ir_node *n, const lmap *m, int depth)
{
    /* Each use of a constant gets its own slot: hash-consing makes equal
     * values one node, and the kernel's structure must not depend on
     * whether two constants happen to be equal. */
    if (n->op == IR_OP_CONST && n != c->root)
        return lower_uncached(c, n, m, depth);
    uint64_t h = memo_hash(c, n, m);
    int r = memo_find(c, n, m, h);
    if (r >= 0)
        return r;
    r = lower_uncached(c, n, m, depth);
    if (r >= 0 && !memo_put(c, n, m, h, r)) {
        c->oom = true;
        return -1;
    }
    return r;
}

/* ------------------------------------------------------- canonical loops */

/* Every affine of k (output, loads, iotas), to rewrite them together. */
static int collect_affines(sched_kernel *k, sched_affine **out)
{
    int n = 0;
    out[n++] = &k->out;
    for (int i = 0; i < k->ninstr; i++)
        if (k->instr[i].kind == SCHED_I_LOAD || k->instr[i].kind == SCHED_I_IOTA || k->instr[i].kind == SCHED_I_GUARD)
            out[n++] = &k->instr[i].idx;
    return n;
}

/* Drops dims of extent 1, merges dims that step through memory as one,
 * orders reduced dims after the kept ones, and makes dim 0 a kept dim. */
static bool canonicalize_kernel(sched_kernel *k)
{
    sched_affine **aff = ir_alloc((size_t)(k->ninstr + 1) * sizeof *aff);
    if (!aff)
        return false;
    int na = collect_affines(k, aff);
    int rank = 0, map[SCHED_MAX_LOOP];
    int64_t shape[SCHED_MAX_LOOP];
    bool red[SCHED_MAX_LOOP];
    /* 1. drop extent-1 dims; 2. merge into the previous dim of the same kind
     * when every access steps through both as through one */
    for (int d = 0; d < k->rank; d++) {
        bool rd = k->red_mask >> d & 1;
        if (k->shape[d] == 1)
            continue;
        if (rank > 0 && red[rank - 1] == rd) {
            int p = map[rank - 1];
            bool ok = true;
            for (int a = 0; a < na && ok; a++)
                ok = aff[a]->stride[p] == aff[a]->stride[d] * k->shape[d];
            if (ok) {
                for (int a = 0; a < na; a++)
                    aff[a]->stride[p] = aff[a]->stride[d];
                shape[rank - 1] *= k->shape[d];
                /* the merged dim now steps like d: keep its index p */
                continue;
            }
        }
        map[rank] = d;
        shape[rank] = k->shape[d];
        red[rank] = rd;
        rank++;
    }
    /* 3. order: kept prefix, reduced dims, trailing kept run (when small
     * enough to accumulate in a row buffer) */
    int order[SCHED_MAX_LOOP], no = 0;
    int tail = rank;
    if (k->red_op != IR_OP_COUNT) {
        int64_t run = 1;
        while (tail > 0 && !red[tail - 1])
            run *= shape[--tail];
        if (run > ACC_MAX || tail == 0)
            tail = rank; /* too long for a row buffer, or nothing reduced */
    }
    for (int d = 0; d < tail; d++)
        if (!red[d])
            order[no++] = d;
    int kept_prefix = no;
    for (int d = 0; d < rank; d++)
        if (red[d])
            order[no++] = d;
    for (int d = tail; d < rank; d++)
        order[no++] = d;
    int lead = kept_prefix == 0; /* dim 0 must be a kept dim: add one of extent 1 */
    /* rewrite */
    sched_affine tmp;
    for (int a = 0; a < na; a++) {
        memset(&tmp, 0, sizeof tmp);
        tmp.off = aff[a]->off;
        for (int j = 0; j < no; j++)
            tmp.stride[j + lead] = aff[a]->stride[map[order[j]]];
        *aff[a] = tmp;
    }
    int64_t nshape[SCHED_MAX_LOOP];
    uint32_t mask = 0;
    if (lead)
        nshape[0] = 1;
    for (int j = 0; j < no; j++) {
        nshape[j + lead] = shape[order[j]];
        if (red[order[j]])
            mask |= 1u << (j + lead);
    }
    k->rank = no + lead;
    memcpy(k->shape, nshape, (size_t)k->rank * sizeof *nshape);
    k->red_mask = mask;
    ir_free(aff);
    return true;
}

/* True when a reshape only adds or drops dims of extent 1. */
static bool unit_reshape(const ir_node *v)
{
    const ir_node *x = v->src[0];
    int i = 0, j = 0;
    for (;;) {
        while (i < v->rank && v->shape[i] == 1)
            i++;
        while (j < x->rank && x->shape[j] == 1)
            j++;
        if (i == v->rank || j == x->rank)
            return i == v->rank && j == x->rank;
        if (v->shape[i++] != x->shape[j++])
            return false;
    }
}

/* A reduction absorbed as a phase that an elementwise root reaches through
 * elementwise nodes and unit-dim reshapes only (so of the root's own
 * shape, up to unit dims): the root is then a per-row value (logsumexp's
 * log(s) + m, a mean) and the kernel loops over that reduction's source.
 * NULL when there is none. */
static const ir_node *find_row_reduce(const planner *p, const ir_node *root)
{
    const ir_node *stack[FIND_MAX];
    int top = 0, seen = 0;
    stack[top++] = root;
    while (top > 0 && seen++ < FIND_MAX) {
        const ir_node *n = stack[--top];
        for (int s = 0; s < n->nsrc; s++) {
            const ir_node *x = n->src[s];
            long j = pos_of(p, x);
            if (p->is_m[j] || p->cls[j] == C_REALIZED)
                continue;
            if (p->cls[j] == C_REDUCE)
                return x;
            bool through = p->cls[j] == C_EW || (p->cls[j] == C_VIEW && x->op == IR_OP_RESHAPE && unit_reshape(x));
            if (through && top < FIND_MAX)
                stack[top++] = x;
        }
    }
    return NULL;
}

/* Places node's dims in the loop space: to[j] is the loop dim of node dim
 * j (-1 for a unit dim), node's non-unit dims being the space's non-unit
 * kept dims in order. False when they are not. */
static bool root_dims(const ir_node *node, const ir_node *space, uint32_t mask, int *to)
{
    int d = 0;
    for (int j = 0; j < node->rank; j++) {
        to[j] = -1;
        if (node->shape[j] == 1)
            continue;
        while (d < space->rank && ((mask >> d & 1) || space->shape[d] == 1))
            d++;
        if (d == space->rank || space->shape[d] != node->shape[j])
            return false;
        to[j] = d++;
    }
    for (; d < space->rank; d++)
        if (!(mask >> d & 1) && space->shape[d] != 1)
            return false;
    return true;
}

/* The row dims of a phased kernel must be its trailing (non-unit) dims:
 * each pass then walks contiguous rows. */
static bool rows_trail(const ir_node *space, uint32_t mask)
{
    bool kept_after = false;
    for (int d = space->rank - 1; d >= 0; d--) {
        if (space->shape[d] == 1)
            continue;
        if (!(mask >> d & 1))
            kept_after = true;
        else if (kept_after)
            return false;
    }
    return true;
}

/* Lowers the LOOP kernel of node; false with c->blame set (re-plan) or
 * c->oom. */
/* Loop dim k of an affine over rank dims split into (k, k + 1), the inner
 * of extent q. */
static void split_affine(sched_affine *a, int rank, int k, int64_t q)
{
    for (int d = rank - 1; d > k; d--)
        a->stride[d + 1] = a->stride[d];
    a->stride[k + 1] = a->stride[k];
    a->stride[k] *= q;
}

enum { MAX_SPLITS = 4 };

/* Lowers the LOOP kernel of node, its loop dims split as split_at/split_q
 * say (in order, each in the loop space the ones before made); false with
 * c->blame set (re-plan), c->want_q set (split and retry) or c->oom. */
static bool lower_kernel(planner *p, ir_node *node, sched_kernel *k, lower_ctx *c, const int *split_at,
                         const int64_t *split_q, int nsplit)
{
    memset(c, 0, sizeof *c);
    c->p = p;
    c->k = k;
    c->root = node;
    c->cap_args = 4;
    k->kind = SCHED_LOOP;
    k->node = node;
    k->red_op = IR_OP_COUNT;
    if (!(k->args = ir_alloc((size_t)c->cap_args * sizeof *k->args))) {
        c->oom = true;
        return false;
    }
    k->args[0] = node;
    k->nargs = 1;
    /* the loop space: the node's shape, or the source of its reduction */
    const ir_node *space = node, *r = NULL;
    int to[IR_MAX_RANK];
    if (p->cls[pos_of(p, node)] == C_REDUCE)
        r = node;
    else if (p->cls[pos_of(p, node)] == C_EW)
        r = find_row_reduce(p, node);
    if (r && root_dims(node, r->src[0], r->attr.red.mask, to)) {
        space = r->src[0];
        c->red_mask = r->attr.red.mask;
        c->mask_set = true;
    } else {
        root_dims(node, node, 0, to);
    }
    c->lrank = space->rank;
    memcpy(c->lshape, space->shape, sizeof space->shape);
    c->lempty = ir_node_numel(space) == 0;
    if (c->lempty && r && r != node && ir_node_numel(node) > 0) {
        /* a reduction over an empty axis read by a non-empty node: the
         * loop over its empty source would write nothing, so the reduction
         * becomes a kernel of its own (which stores its identity) */
        c->blame = r;
        return false;
    }
    /* node's index: the loop index of each of its dims (0 on unit dims),
     * and its element offset */
    lmap id;
    memset(&id, 0, sizeof id);
    int64_t cs[IR_MAX_RANK];
    contiguous_strides(node->rank, node->shape, cs);
    memset(&k->out, 0, sizeof k->out);
    for (int j = 0; j < node->rank; j++)
        if (to[j] >= 0) {
            id.dim[j].stride[to[j]] = 1;
            k->out.stride[to[j]] = cs[j];
        }
    for (int s = 0; s < nsplit && !c->mask_set; s++) {
        int at = split_at[s];
        for (int j = 0; j < node->rank; j++)
            split_affine(&id.dim[j], c->lrank, at, split_q[s]);
        split_affine(&k->out, c->lrank, at, split_q[s]);
        for (int d = c->lrank - 1; d > at; d--)
            c->lshape[d + 1] = c->lshape[d];
        c->lshape[at + 1] = split_q[s];
        c->lshape[at] /= split_q[s];
        c->lrank++;
    }
    int v = lower(c, node, &id, 0);
    ir_table_free(&c->memo);
    ir_free(c->maps);
    c->maps = NULL;
    if (v < 0)
        return false;
    sched_instr mv;
    memset(&mv, 0, sizeof mv);
    mv.kind = SCHED_I_OP;
    mv.op = IR_OP_STOP_GRAD; /* a copy: the code generator treats it as identity */
    if (c->nred == 1 && k->instr[v].kind == SCHED_I_REDUCE && v == k->ninstr - 1) {
        /* one reduction, stored: the classic form, the value reduced last */
        k->red_op = k->instr[v].op;
        k->red_mask = c->red_mask;
        int src = k->instr[v].src[0];
        k->ninstr--;
        if (src != k->ninstr - 1) {
            mv.dtype = k->instr[src].dtype;
            mv.src[0] = src;
            if (add_instr(c, &mv) < 0)
                return false;
        }
    } else {
        if (v != k->ninstr - 1) { /* the value stored is the last instruction */
            mv.dtype = k->instr[v].dtype;
            mv.src[0] = v;
            if (add_instr(c, &mv) < 0)
                return false;
        }
        if (c->nred > 0) { /* phased */
            k->red_mask = c->red_mask;
            if (!rows_trail(space, c->red_mask)) {
                c->blame = c->first_abs;
                return false;
            }
        }
    }
    k->rank = c->lrank;
    memcpy(k->shape, c->lshape, (size_t)c->lrank * sizeof *c->lshape);
    if (!canonicalize_kernel(k)) {
        c->oom = true;
        return false;
    }
    return true;
}

/* ------------------------------------------------------------ the driver */

static void kernel_free(sched_kernel *k)
{
    ir_free(k->args);
    ir_free(k->instr);
    memset(k, 0, sizeof *k);
}

void sched_free(sched_schedule *s)
{
    for (long i = 0; s->k && i < s->count; i++)
        kernel_free(&s->k[i]);
    ir_free(s->k);
    s->k = NULL;
    s->count = 0;
}

static void planner_free(planner *p)
{
    ir_free(p->cls);
    ir_free(p->forced);
    ir_free(p->is_root);
    ir_free(p->must_m);
    ir_free(p->is_m);
    ir_free(p->view_root);
    ir_free(p->need);
    ir_free(p->depth);
    ir_free(p->rcost);
    ir_free(p->rload);
    ir_free(p->rmath);
    sched_liveness_free(&p->lv);
}

/* Lowers the LOOP kernel of node into k, splitting loop dims as the
 * lowering asks; false with c->blame or c->oom as lower_kernel sets them. */
static bool lower_split(planner *p, ir_node *node, sched_kernel *k, lower_ctx *c)
{
    int split_at[MAX_SPLITS], nsplit = 0;
    int64_t split_q[MAX_SPLITS];
    bool done;
    while (!(done = lower_kernel(p, node, k, c, split_at, split_q, nsplit)) && !c->oom && c->want_q &&
           nsplit < MAX_SPLITS) {
        split_at[nsplit] = c->want_at;
        split_q[nsplit++] = c->want_q;
        kernel_free(k);
    }
    return done;
}

/* Builds the kernels of one plan (at[k]: kernel k's order index, when at
 * is not NULL); returns 1 done, 0 re-plan, -1 error. */
static int build_once(sched_ctx *sc, planner *p, const ir_node *const *roots, int nroots, sched_schedule *out,
                      long **at)
{
    long nk = plan(p, roots, nroots);
    out->k = ir_calloc((size_t)(nk ? nk : 1), sizeof *out->k);
    out->count = 0;
    if (at) {
        ir_free(*at);
        *at = ir_alloc((size_t)(nk ? nk : 1) * sizeof **at);
    }
    if (!out->k || (at && !*at))
        goto oom;
    for (long i = 0; i < p->lv.count; i++) {
        ir_node *node = p->lv.order[i];
        if (p->view_root[i]) {
            if (at)
                (*at)[out->count] = i;
            sched_kernel *k = &out->k[out->count++];
            k->kind = SCHED_VIEW;
            k->node = node;
        }
        if (!p->is_m[i])
            continue;
        if (at)
            (*at)[out->count] = i;
        sched_kernel *k = &out->k[out->count++];
        if (p->cls[i] == C_REF) {
            k->kind = SCHED_REF;
            k->node = node;
            continue;
        }
        lower_ctx c;
        if (lower_split(p, node, k, &c))
            continue;
        if (c.oom)
            goto oom;
        long b = c.blame ? pos_of(p, c.blame) : -1;
        if (b < 0 || p->forced[b] || p->is_m[b]) {
            sched_fail(sc, RLX_E_INTERNAL, "scheduler: cannot lower the kernel of %s", ir_ops[node->op].name);
            sched_free(out);
            return -1;
        }
        p->forced[b] = 1;
        sched_free(out);
        return 0;
    }
    return 1;
oom:
    sched_fail(sc, RLX_E_NOMEM, "out of memory scheduling the graph");
    sched_free(out);
    return -1;
}

static bool decisions_refs(sched_decisions *d, const sched_schedule *s, const ir_map *pos);

rlx_status sched_build(sched_ctx *sc, ir_node *const *roots, int nroots, sched_schedule *out)
{
    return sched_build_keep(sc, roots, nroots, out, NULL);
}

rlx_status sched_build_keep(sched_ctx *sc, ir_node *const *roots, int nroots, sched_schedule *out,
                            sched_decisions *keep)
{
    if (keep)
        memset(keep, 0, sizeof *keep);
    planner p;
    memset(&p, 0, sizeof p);
    memset(out, 0, sizeof *out);
    p.knobs = sched_knobs(sc);
    if (!sched_liveness_build(roots, nroots, &p.lv))
        return sched_fail(sc, RLX_E_NOMEM, "out of memory ordering the graph");
    long n = p.lv.count;
    size_t nb = (size_t)(n ? n : 1);
    p.cls = ir_alloc(nb);
    p.forced = ir_calloc(nb, 1);
    p.is_root = ir_alloc(nb);
    p.must_m = ir_alloc(nb);
    p.is_m = ir_alloc(nb);
    p.view_root = ir_alloc(nb);
    p.need = ir_alloc(nb * sizeof *p.need);
    p.depth = ir_alloc(nb * sizeof *p.depth);
    p.rcost = ir_alloc(nb * sizeof *p.rcost);
    p.rload = ir_alloc(nb * sizeof *p.rload);
    p.rmath = ir_alloc(2 * nb);
    bool ok = p.cls && p.forced && p.is_root && p.must_m && p.is_m && p.view_root && p.need && p.depth && p.rcost &&
              p.rload && p.rmath;
    for (long i = 0; ok && i < n; i++)
        p.cls[i] = (unsigned char)node_class(p.lv.order[i]);
    if (!ok) {
        planner_free(&p);
        return sched_fail(sc, RLX_E_NOMEM, "out of memory scheduling the graph");
    }
    int r;
    long *at = NULL;
    while ((r = build_once(sc, &p, (const ir_node *const *)roots, nroots, out, keep ? &at : NULL)) == 0)
        ;
    if (r > 0 && keep) { /* the order, classes and cuts move to the caller */
        keep->count = n;
        keep->order = p.lv.order;
        keep->src_start = p.lv.src_start;
        keep->src_index = p.lv.src_index;
        p.lv.order = NULL;
        p.lv.src_start = p.lv.src_index = NULL;
        keep->nk = out->count;
        keep->at = at;
        at = NULL;
        keep->nroots = nroots;
        keep->cls = ir_alloc(2 * nb);
        keep->root_at = ir_alloc((size_t)(nroots ? nroots : 1) * sizeof *keep->root_at);
        if (!keep->cls || !keep->root_at || !decisions_refs(keep, out, &p.lv.pos)) {
            sched_decisions_free(keep);
            sched_free(out);
            r = -1;
            sched_fail(sc, RLX_E_NOMEM, "out of memory scheduling the graph");
        } else {
            keep->is_m = keep->cls + n;
            memcpy(keep->cls, p.cls, (size_t)n);
            memcpy(keep->is_m, p.is_m, (size_t)n);
            for (int i = 0; i < nroots; i++)
                keep->root_at[i] = pos_of(&p, roots[i]);
        }
    }
    ir_free(at);
    planner_free(&p);
    return r > 0 ? RLX_OK : sc->status;
}

void sched_decisions_free(sched_decisions *d)
{
    ir_free(d->order);
    ir_free(d->src_start);
    ir_free(d->src_index);
    ir_free(d->cls); /* and is_m */
    ir_free(d->at);
    ir_free(d->root_at);
    ir_free(d->ref_at);
    ir_free(d->refs);
    memset(d, 0, sizeof *d);
}

/* d's refs for the kernels of s, places looked up in pos (-2: not in it). */
static bool decisions_refs(sched_decisions *d, const sched_schedule *s, const ir_map *pos)
{
    long total = 0;
    for (long k = 0; k < s->count; k++)
        if (s->k[k].kind == SCHED_LOOP)
            total += s->k[k].nargs + s->k[k].ninstr;
    d->ref_at = ir_alloc((size_t)(s->count + 1) * sizeof *d->ref_at);
    d->refs = ir_alloc((size_t)(total ? total : 1) * sizeof *d->refs);
    if (!d->ref_at || !d->refs)
        return false;
    long r = 0;
    for (long k = 0; k < s->count; k++) {
        const sched_kernel *kk = &s->k[k];
        d->ref_at[k] = r;
        if (kk->kind != SCHED_LOOP)
            continue;
        for (int a = 0; a < kk->nargs; a++) {
            long j = ir_map_get(pos, kk->args[a]);
            d->refs[r++] = j < 0 ? -2 : j;
        }
        for (int i = 0; i < kk->ninstr; i++) {
            long j = kk->instr[i].cst ? ir_map_get(pos, kk->instr[i].cst) : -1;
            d->refs[r++] = kk->instr[i].cst && j < 0 ? -2 : j;
        }
    }
    d->ref_at[s->count] = r;
    return true;
}

/* Whether the kernel of d's node g reads or computes a node whose size or
 * attributes changed (changed[]): the nodes it fuses down to, and those
 * it loads. seen[] marks visits with mark; stack holds count + 1. */
static bool region_changed(const sched_decisions *d, long g, const unsigned char *changed, long *seen, long mark,
                           long *stack)
{
    long top = 0;
    stack[top++] = g;
    seen[g] = mark;
    while (top > 0) {
        long i = stack[--top];
        if (changed[i])
            return true;
        if (i != g && (d->cls[i] == C_REALIZED || d->is_m[i]))
            continue; /* loaded, not fused */
        for (long s = d->src_start[i]; s < d->src_start[i + 1]; s++) {
            long j = d->src_index[s];
            if (seen[j] != mark) {
                seen[j] = mark;
                stack[top++] = j;
            }
        }
    }
    return false;
}

/* The new graph's order, from its roots through d's sources (no hash
 * map: a new binding must cost little), checked node for node against
 * d's: op, dtype, rank, sources, and storage, which with the dtypes
 * fixes the class (node_class; bound sizes are never dynamic). False
 * when the structure differs. changed[i]: node i's shape or attributes
 * differ. set: 2^k >= 2 * count zeroed pointers. */
static bool match_order(const sched_decisions *d, ir_node *const *roots, ir_node **order, unsigned char *changed,
                        const ir_node **set, size_t mask)
{
    long n = d->count;
    for (int r = 0; r < d->nroots; r++) {
        long i = d->root_at[r];
        if (order[i] && order[i] != roots[r])
            return false;
        order[i] = roots[r];
    }
    for (long i = n - 1; i >= 0; i--) { /* consumers before their sources */
        const ir_node *a = d->order[i];
        ir_node *b = order[i];
        if (!b || a->op != b->op || a->dtype != b->dtype || a->rank != b->rank || a->nsrc != b->nsrc ||
            !ir_node_storage(a) != !ir_node_storage(b))
            return false;
        for (long k = d->src_start[i], s = 0; k < d->src_start[i + 1]; k++, s++) {
            long j = d->src_index[k];
            if (!order[j])
                order[j] = b->src[s];
            else if (order[j] != b->src[s])
                return false;
        }
        /* one node in two places would be two kernels' values */
        size_t h = (size_t)(((uintptr_t)b >> 4) * 0x9e3779b97f4a7c15ull) & mask;
        while (set[h] && set[h] != b)
            h = (h + 1) & mask;
        if (set[h])
            return false;
        set[h] = b;
        /* (attributes compared as bytes: a difference in padding only
         * lowers a kernel again) */
        changed[i] = a != b && (memcmp(a->shape, b->shape, (size_t)a->rank * sizeof *a->shape) ||
                                memcmp(&a->attr, &b->attr, sizeof a->attr));
    }
    return true;
}

int sched_rebuild(sched_ctx *sc, const sched_decisions *d, const sched_schedule *old, ir_node *const *roots,
                  int nroots, sched_schedule *out, unsigned char *keep, sched_decisions *keep_d)
{
    memset(out, 0, sizeof *out);
    memset(keep_d, 0, sizeof *keep_d);
    long n = d->count, nk = old->count, nsrc = n ? d->src_start[n] : 0;
    if (nroots != d->nroots || nk != d->nk || n < 1)
        return 0;
    planner p;
    memset(&p, 0, sizeof p);
    p.knobs = sched_knobs(sc);
    int r = 0;
    bool mapped = false;
    size_t mask = 1;
    while (mask < 2 * (size_t)n)
        mask <<= 1;
    unsigned char *changed = ir_alloc((size_t)n);
    long *seen = ir_alloc((size_t)(2 * n + 1) * sizeof *seen);
    const ir_node **set = ir_calloc(mask, sizeof *set);
    keep_d->order = ir_calloc((size_t)n, sizeof *keep_d->order);
    keep_d->src_start = ir_alloc((size_t)(n + 1) * sizeof *keep_d->src_start);
    keep_d->src_index = ir_alloc((size_t)(nsrc ? nsrc : 1) * sizeof *keep_d->src_index);
    keep_d->cls = ir_alloc(2 * (size_t)n);
    keep_d->at = ir_alloc((size_t)(nk ? nk : 1) * sizeof *keep_d->at);
    keep_d->root_at = ir_alloc((size_t)(nroots ? nroots : 1) * sizeof *keep_d->root_at);
    out->k = ir_calloc((size_t)(nk ? nk : 1), sizeof *out->k);
    if (!changed || !seen || !set || !keep_d->order || !keep_d->src_start || !keep_d->src_index || !keep_d->cls ||
        !keep_d->at || !keep_d->root_at || !out->k)
        goto oom;
    ir_node **order = keep_d->order;
    if (!match_order(d, roots, order, changed, set, mask - 1))
        goto out;
    keep_d->count = n;
    keep_d->nk = nk;
    keep_d->nroots = nroots;
    keep_d->is_m = keep_d->cls + n;
    memcpy(keep_d->src_start, d->src_start, (size_t)(n + 1) * sizeof *d->src_start);
    memcpy(keep_d->src_index, d->src_index, (size_t)nsrc * sizeof *d->src_index);
    memcpy(keep_d->cls, d->cls, (size_t)n);
    memcpy(keep_d->is_m, d->is_m, (size_t)n);
    memcpy(keep_d->at, d->at, (size_t)nk * sizeof *d->at);
    memcpy(keep_d->root_at, d->root_at, (size_t)nroots * sizeof *d->root_at);
    p.cls = keep_d->cls;
    p.is_m = keep_d->is_m;
    for (long i = 0; i < n; i++)
        seen[i] = -1;
    for (long i = 0; i < nk; i++) {
        const sched_kernel *o = &old->k[i];
        sched_kernel *k = &out->k[out->count++];
        long g = d->at[i];
        ir_node *node = order[g];
        keep[i] = 0;
        if (o->kind != SCHED_LOOP) {
            k->kind = o->kind;
            k->node = node;
            continue;
        }
        if (!region_changed(d, g, changed, seen, i, seen + n)) {
            /* the same numbers over the new nodes */
            const long *rf = d->refs + d->ref_at[i];
            *k = *o;
            k->node = node;
            k->args = ir_alloc((size_t)o->nargs * sizeof *k->args);
            k->instr = ir_alloc((size_t)(o->ninstr ? o->ninstr : 1) * sizeof *k->instr);
            if (!k->args || !k->instr) {
                k->nargs = k->ninstr = 0;
                goto oom;
            }
            memcpy(k->instr, o->instr, (size_t)o->ninstr * sizeof *k->instr);
            for (int a = 0; a < o->nargs; a++) {
                if (rf[a] < 0)
                    goto out;
                k->args[a] = order[rf[a]];
            }
            for (int j = 0; j < o->ninstr; j++) {
                long c = rf[o->nargs + j];
                if (c == -2)
                    goto out;
                k->instr[j].cst = c >= 0 ? order[c] : NULL;
            }
            keep[i] = 1;
            continue;
        }
        for (long j = 0; j < n && !mapped; j++) /* the lowering looks nodes up */
            if (ir_map_put(&p.lv.pos, order[j], j) < 0)
                goto oom;
        mapped = true;
        lower_ctx c;
        if (!lower_split(&p, node, k, &c)) {
            if (c.oom)
                goto oom;
            goto out; /* another plan: the caller schedules afresh */
        }
    }
    if (mapped) {
        if (!decisions_refs(keep_d, out, &p.lv.pos))
            goto oom;
    } else {
        long total = d->ref_at[nk];
        keep_d->ref_at = ir_alloc((size_t)(nk + 1) * sizeof *keep_d->ref_at);
        keep_d->refs = ir_alloc((size_t)(total ? total : 1) * sizeof *keep_d->refs);
        if (!keep_d->ref_at || !keep_d->refs)
            goto oom;
        memcpy(keep_d->ref_at, d->ref_at, (size_t)(nk + 1) * sizeof *d->ref_at);
        memcpy(keep_d->refs, d->refs, (size_t)total * sizeof *d->refs);
    }
    r = 1;
    goto out;
oom:
    r = -1;
    sched_fail(sc, RLX_E_NOMEM, "out of memory scheduling the graph");
out:
    if (r <= 0) {
        sched_free(out);
        sched_decisions_free(keep_d);
    }
    ir_map_free(&p.lv.pos);
    ir_free(changed);
    ir_free(seen);
    ir_free(set);
    return r;
}

/* ----------------------------------------------------------- cache keys */

static uint64_t bits_of(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

/* A generic key's word for stride v on dim d: its value where it is
 * compiled in, else PARAM (no stride is that large). */
#define PARAM ((uint64_t)INT64_MIN + 1)
static uint64_t stride_word(int64_t v, int d, int rank) { return sched_stride_fixed(v, d, rank) ? (uint64_t)v : PARAM; }

size_t sched_kernel_key(const sched_kernel *k, bool generic, uint64_t *buf, size_t cap)
{
    size_t n = 0;
#define PUT(v) do { uint64_t v_ = (uint64_t)(v); if (n < cap) buf[n] = v_; n++; } while (0)
    if (generic)
        PUT(SCHED_KEY_GENERIC);
    PUT(k->rank);
    for (int d = 0; d < k->rank && !generic; d++)
        PUT(k->shape[d]);
    PUT(k->red_op);
    PUT(k->red_mask);
    PUT(k->node->dtype);
    if (!generic)
        PUT(k->out.off);
    for (int d = 0; d < k->rank; d++)
        PUT(generic ? stride_word(k->out.stride[d], d, k->rank) : (uint64_t)k->out.stride[d]);
    PUT(k->nargs);
    PUT(k->ninstr);
    bool phased = k->red_mask != 0;
    for (int i = 0; i < k->ninstr; i++) {
        const sched_instr *in = &k->instr[i];
        phased |= in->kind == SCHED_I_REDUCE;
        PUT((uint64_t)in->kind | (uint64_t)in->op << 8 | (uint64_t)in->dtype << 24 | (uint64_t)(uint32_t)in->arg << 32);
        PUT((uint64_t)(uint32_t)in->src[0] | (uint64_t)(uint32_t)in->src[1] << 32);
        PUT(in->src[2]);
        if (in->kind == SCHED_I_IOTA) { /* a CONST's value is an argument, not code */
            PUT(bits_of(in->value));
            PUT(bits_of(in->step));
        }
        if (in->kind == SCHED_I_LOAD)
            PUT(in->guarded);
        if (in->kind == SCHED_I_GUARD && !generic) {
            PUT(in->lo);
            PUT(in->hi);
        }
        if (in->kind == SCHED_I_LOAD || in->kind == SCHED_I_IOTA || in->kind == SCHED_I_GUARD) {
            if (!generic)
                PUT(in->idx.off);
            for (int d = 0; d < k->rank; d++)
                PUT(generic ? stride_word(in->idx.stride[d], d, k->rank) : (uint64_t)in->idx.stride[d]);
        }
    }
#undef PUT
    if (generic && k->red_op == IR_OP_COUNT && phased) { /* a row kernel: its plan's size-dependent decisions */
        size_t m = sched_rowplan_key(k, n < cap ? buf + n : NULL, n < cap ? cap - n : 0);
        if (m == SIZE_MAX)
            return SIZE_MAX;
        n += m;
    }
    return n;
}

int sched_kernel_param_layout(const sched_kernel *k, int *base)
{
    int n = 2 * k->rank + 1; /* shape, out */
    for (int i = 0; i < k->ninstr; i++) {
        const sched_instr *in = &k->instr[i];
        bool has = in->kind == SCHED_I_LOAD || in->kind == SCHED_I_IOTA || in->kind == SCHED_I_GUARD;
        if (base)
            base[i] = has ? n : -1;
        if (has)
            n += 1 + k->rank + (in->kind == SCHED_I_GUARD ? 2 : 0);
    }
    return n;
}

static int64_t *put_affine(const sched_affine *a, int rank, int64_t *o)
{
    *o++ = a->off;
    for (int d = 0; d < rank; d++)
        *o++ = a->stride[d];
    return o;
}

void sched_kernel_params(const sched_kernel *k, int64_t *out)
{
    for (int d = 0; d < k->rank; d++)
        *out++ = k->shape[d];
    out = put_affine(&k->out, k->rank, out);
    for (int i = 0; i < k->ninstr; i++) {
        const sched_instr *in = &k->instr[i];
        if (in->kind != SCHED_I_LOAD && in->kind != SCHED_I_IOTA && in->kind != SCHED_I_GUARD)
            continue;
        out = put_affine(&in->idx, k->rank, out);
        if (in->kind == SCHED_I_GUARD) {
            *out++ = in->lo;
            *out++ = in->hi;
        }
    }
}

void sched_kernel_consts(const sched_kernel *k, double *consts, const ir_node **from)
{
    for (int i = 0; i < k->ninstr; i++) {
        if (k->instr[i].kind != SCHED_I_CONST)
            continue;
        consts[k->instr[i].arg] = k->instr[i].value;
        if (from)
            from[k->instr[i].arg] = k->instr[i].cst;
    }
}

double sched_const_value(double v, rlx_dtype dt) { return ir_cast_const(v, dt); }
