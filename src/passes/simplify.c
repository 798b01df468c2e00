/*
 * simplify.c — rewrites the unrealized graph of a realization into an
 * equivalent, smaller one before scheduling.
 *
 * One bottom-up walk (ir_postorder, iterative): each node is rebuilt from
 * its sources' replacements, and a few local rules are tried on it. Rules
 * look only at the node's sources (already simplified) and, through an
 * unrealized source, one level further; a rule builds its result with
 * rewrite() again, nested a bounded number of times (MAX_DEPTH), so the
 * walk is linear in the graph and never recurses along it. Nodes are made
 * with ir_make, so the result is hash-consed like any graph. Realized nodes
 * are leaves: their sources are neither visited nor looked through (only a
 * CONST's value is read, which lives in its attributes).
 *
 * Rules (each gives the node's exact dtype and shape):
 *  - constant folding: an elementwise op whose sources are all CONST becomes
 *    one CONST, computed by the caller's fold (the reference evaluator's
 *    scalar semantics), so a folded value is the oracle's value; movement
 *    of a CONST is a CONST of the new shape;
 *  - identities: x*1, 1*x and x/1 on real dtypes, x-(+0), x+(-0),
 *    integer and bool x+0 and x-0, neg(neg x), cast to the source's
 *    dtype, stop_gradient, where with a constant condition or equal
 *    branches, reshape/expand/permute/slice/pad that change nothing, and
 *    chains of reshapes, expands and permutes composed into one;
 *  - casts move below expands (fewer elements, and sums see the expand);
 *  - reductions over broadcast axes: sum = the source reduced over the
 *    other axes times the count, max/min = the source, argmax/argmin = 0;
 *    a sum over an empty axis = 0.
 * Not folded: x*0 (NaN*0 and inf*0 are NaN), x-x, float x+(+0) (below).
 *
 * Exactness: every rule is bit-exact against the reference evaluator,
 * except that a float sum over broadcast axes becomes one multiplication
 * by the count (after a sum over the other axes) where the reference adds
 * every copy in turn. The two agree whenever the reference's partial sums
 * are exact: integer-valued or short-mantissa floats below 2^53, and any
 * f32 value summed over broadcast axes alone with fewer than 2^29 copies
 * (the reference accumulates f32 in double). Otherwise they may differ in
 * the last bits, as any reordering of a float sum does (one rounding of
 * n*x is the correctly rounded result; the reference's n roundings are
 * not). Integer sums wrap identically: n*x mod 2^k is the wrapped sum.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/cast.h"
#include "ir/scratch.h"
#include "passes/passes.h"

enum { MAX_DEPTH = 6 };

typedef struct {
    simp_fold_fn fold;
    rlx_status status;
    char *err;
    size_t errcap;
} simp;

static ir_node nofire_node; /* a rule that does not apply returns NOFIRE */
#define NOFIRE (&nofire_node)

static bool realized(const ir_node *n) { return ir_node_storage(n) != NULL; }

/* A source whose own sources may be looked at: unrealized and not a leaf. */
static bool open_op(const ir_node *n, ir_op op) { return n->op == op && !realized(n); }

static bool is_const(const ir_node *n, double *v)
{
    if (n->op != IR_OP_CONST)
        return false;
    *v = n->attr.cst.value;
    return true;
}

static bool const_is(const ir_node *n, double want)
{
    double v;
    return is_const(n, &v) && v == want;
}

static bool has_dynamic(int rank, const int64_t *shape)
{
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0)
            return true;
    return false;
}

static ir_node *fail(simp *s, rlx_status st, const char *msg)
{
    if (s->status == RLX_OK) {
        s->status = st;
        if (s->errcap)
            snprintf(s->err, s->errcap, "simplify: %s", msg);
    }
    return NULL;
}

static ir_node *make(simp *s, ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a, rlx_dtype dt, int rank,
                     const int64_t *shape)
{
    char err[200] = "";
    ir_node *n = ir_make(op, nsrc, src, a, dt, rank, shape, err, sizeof err);
    if (!n) {
        rlx_status st = ir_make_failure(op, nsrc, src, a, dt, rank, shape);
        return fail(s, st == RLX_E_NOMEM ? st : RLX_E_INTERNAL, err); /* a rewrite keeps shapes: no user error */
    }
    return n;
}

/* A CONST leaf; v must already be exactly what dt holds. */
static ir_node *mk_const(simp *s, rlx_dtype dt, int rank, const int64_t *shape, double v)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.cst.value = v;
    return make(s, IR_OP_CONST, 0, NULL, &a, dt, rank, shape);
}

static ir_node *rewrite(simp *s, ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a, ir_node *orig,
                        int depth);

static ir_node *mk1(simp *s, ir_op op, ir_node *x, const ir_attrs *a, int depth)
{
    return rewrite(s, op, 1, &x, a, NULL, depth + 1);
}

static ir_node *mk2(simp *s, ir_op op, ir_node *x, ir_node *y, int depth)
{
    ir_node *src[2] = {x, y};
    return rewrite(s, op, 2, src, NULL, NULL, depth + 1);
}

static ir_node *mk_shape(simp *s, ir_op op, ir_node *x, int rank, const int64_t *shape, int depth)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.shape.rank = rank;
    if (rank > 0)
        memcpy(a.shape.dims, shape, (size_t)rank * sizeof *shape);
    return mk1(s, op, x, &a, depth);
}

/* x * c where c is a CONST of x's type and shape. */
static ir_node *mul_const(simp *s, ir_node *x, double c, int depth)
{
    ir_node *k = mk_const(s, x->dtype, x->rank, x->shape, c);
    if (!k)
        return NULL;
    ir_node *r = mk2(s, IR_OP_MUL, x, k, depth);
    ir_release(k);
    return r;
}

/* ------------------------------------------------------------ elementwise */

static ir_node *fold(simp *s, ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a, rlx_dtype dt, int rank,
                     const int64_t *shape)
{
    double v;
    for (int k = 0; k < nsrc; k++)
        if (!is_const(src[k], &v))
            return NOFIRE;
    if (!s->fold || op == IR_OP_CONTIGUOUS || !s->fold(op, a, dt, nsrc, src, &v))
        return NOFIRE; /* the fold declines (a value a CONST cannot hold, or no memory): keep the op */
    return mk_const(s, dt, rank, shape, v);
}

static ir_node *unary(simp *s, ir_op op, ir_node *x, const ir_attrs *a, int depth)
{
    switch (op) {
    case IR_OP_STOP_GRAD: /* only autodiff sees it; values pass through */
        return ir_retain(x);
    case IR_OP_NEG:
        if (open_op(x, IR_OP_NEG)) /* exact: -(-x) is x for every float and, wrapping, every integer */
            return ir_retain(x->src[0]);
        return NOFIRE;
    case IR_OP_CAST:
        if (a->cast.dtype == x->dtype)
            return ir_retain(x);
        if (open_op(x, IR_OP_EXPAND)) { /* cast the smaller tensor, then broadcast */
            ir_node *c = mk1(s, IR_OP_CAST, x->src[0], a, depth);
            if (!c)
                return NULL;
            ir_node *r = mk_shape(s, IR_OP_EXPAND, c, x->rank, x->shape, depth);
            ir_release(c);
            return r;
        }
        return NOFIRE;
    default:
        return NOFIRE;
    }
}

/*
 * Additive zeros: IEEE gives -0 + +0 = +0, so x + (+0) turns -0 into +0
 * and is NOT the identity on floats; x + (-0) is (it maps -0 to -0 and
 * +0 to +0), and so is x - (+0). Integers and bools have one zero. We fold
 * only those exact cases: a float x + 0.0 stays an add.
 */
static bool additive_identity(const ir_node *c, bool sub)
{
    double v;
    if (!is_const(c, &v) || v != 0 || ir_dtype_is_complex(c->dtype)) /* its +0 imaginary part is a float x + (+0) */
        return false;
    if (!ir_dtype_is_float(c->dtype))
        return true;
    return sub ? !signbit(v) : signbit(v);
}

static ir_node *binary(ir_op op, ir_node *x, ir_node *y)
{
    switch (op) {
    case IR_OP_MUL: /* x*1 is exact for every real value, NaN and inf included; x*0 is not folded */
        if (ir_dtype_is_complex(x->dtype) || ir_dtype_is_complex(y->dtype))
            return NOFIRE; /* (a+bi)(1+0i) has real part a - b*0: NaN when b is NaN or inf, as C and NumPy */
        if (const_is(y, 1))
            return ir_retain(x);
        if (const_is(x, 1))
            return ir_retain(y);
        return NOFIRE;
    case IR_OP_DIV: /* complex division by 1+0i meets b*0 too */
        return const_is(y, 1) && !ir_dtype_is_complex(x->dtype) && !ir_dtype_is_complex(y->dtype) ? ir_retain(x)
                                                                                                    : NOFIRE;
    case IR_OP_ADD:
        if (additive_identity(y, false))
            return ir_retain(x);
        if (additive_identity(x, false))
            return ir_retain(y);
        return NOFIRE;
    case IR_OP_SUB:
        return additive_identity(y, true) ? ir_retain(x) : NOFIRE;
    default:
        return NOFIRE;
    }
}

static ir_node *where(ir_node *c, ir_node *x, ir_node *y)
{
    double v;
    if (is_const(c, &v)) /* where copies the chosen element: exact */
        return ir_retain(v != 0 ? x : y);
    if (x == y)
        return ir_retain(x);
    return NOFIRE;
}

/* ------------------------------------------------------------- reductions */

/* The count n as a constant of dt that multiplies like n in dt's
 * arithmetic, or false when dt cannot hold it exactly. */
static bool count_value(rlx_dtype dt, int64_t n, double *v)
{
    switch (dt) {
    case RLX_BOOL: *v = 1; return true; /* a bool sum of n >= 1 copies of b is b */
    case RLX_I64: *v = (double)n; return n <= ((int64_t)1 << 53);
    case RLX_F32:
    case RLX_F64:
    case RLX_F16:
    case RLX_BF16:
    case RLX_C64:
    case RLX_C128: *v = ir_cast_const((double)n, dt); return n <= ((int64_t)1 << 53) && *v == (double)n;
    default: *v = (double)ir_cast_wrap(n, dt); return true; /* products wrap mod 2^bits anyway */
    }
}

/* sum of n copies of the CONST value c, as the reference would store it
 * (see the header on floats). False when a CONST cannot hold the result. */
static bool const_sum(rlx_dtype dt, double c, int64_t n, double *v)
{
    if (ir_dtype_is_float(dt) || ir_dtype_is_complex(dt)) { /* a c64 CONST is real */
        if (n > ((int64_t)1 << 53))
            return false;
        double r = ir_cast_const(c * (double)n, dt);
        *v = r + 0.0; /* the reference's sum starts at +0: -0 copies sum to +0 */
        return true;
    }
    if (dt == RLX_BOOL) {
        *v = c != 0;
        return true;
    }
    /* the integer c holds: the reference stores a CONST as CAST does, so c
     * may be out of range */
    uint64_t p = (uint64_t)ir_cast_f2i(c, dt) * (uint64_t)n;
    int64_t r = ir_cast_wrap((int64_t)p, dt);
    double d = (double)r;
    if (!(d >= -0x1p63 && d < 0x1p63) || (int64_t)d != r)
        return false; /* an i64 beyond 2^53 that a double does not hold */
    *v = d;
    return true;
}

static ir_node *reduce(simp *s, ir_op op, ir_node *x, uint32_t mask, rlx_dtype dt, int rank, const int64_t *shape,
                       int depth)
{
    if (op == IR_OP_PROD || !mask)
        return NOFIRE;
    int64_t n = 1;
    for (int d = 0; d < x->rank; d++)
        if (mask >> d & 1) {
            if (x->shape[d] == 0)
                /* an empty sum is 0 (the reference's +0 start); max/min of
                 * nothing keep their op */
                return op == IR_OP_SUM ? mk_const(s, dt, rank, shape, 0) : NOFIRE;
            n *= x->shape[d];
        }
    bool arg = op == IR_OP_ARGMAX || op == IR_OP_ARGMIN;
    double c, v;
    if (is_const(x, &c)) {
        if (arg) /* every element ties: the first, 0 (a NaN is first too) */
            return mk_const(s, RLX_I64, rank, shape, 0);
        if (op != IR_OP_SUM)
            return mk_const(s, dt, rank, shape, c);
        return const_sum(dt, c, n, &v) ? mk_const(s, dt, rank, shape, v) : NOFIRE;
    }
    /* Axes along which x repeats one value: dims of size 1, and the
     * broadcast dims of an EXPAND. */
    ir_node *base = open_op(x, IR_OP_EXPAND) ? x->src[0] : x;
    uint32_t bcast = 0;
    int64_t count = 1;
    for (int d = 0; d < x->rank; d++)
        if ((mask >> d & 1) && base->shape[d] == 1) {
            bcast |= 1u << d;
            count *= x->shape[d];
        }
    uint32_t rest = mask & ~bcast;
    if (!bcast || (base == x && rest))
        return NOFIRE; /* nothing repeats, or only the mask's size-1 dims would go */
    if (arg)
        return mk_const(s, RLX_I64, rank, shape, 0);
    double cv = 1;
    if (op == IR_OP_SUM && count != 1 && !count_value(dt, count, &cv))
        return NOFIRE;
    ir_node *r;
    if (rest) {
        ir_attrs a;
        memset(&a, 0, sizeof a);
        a.red.mask = rest;
        r = mk1(s, op, base, &a, depth);
    } else {
        r = ir_retain(base);
    }
    if (r && op == IR_OP_SUM && count != 1) {
        ir_node *t = mul_const(s, r, cv, depth);
        ir_release(r);
        r = t;
    }
    if (r && op == IR_OP_SUM && !rest && ir_dtype_is_float(dt)) {
        /* the reference adds onto +0: a -0 element sums to +0 (a partial
         * sum over the other axes is never -0, so it needs no add) */
        ir_node *z = mk_const(s, dt, r->rank, r->shape, 0.0);
        ir_node *t = z ? mk2(s, IR_OP_ADD, r, z, depth) : NULL;
        ir_release(z);
        ir_release(r);
        r = t;
    }
    if (!r || ir_shape_eq(r->rank, r->shape, rank, shape))
        return r;
    ir_node *e = mk_shape(s, IR_OP_EXPAND, r, rank, shape, depth); /* kept axes that x broadcast */
    ir_release(r);
    return e;
}

/* --------------------------------------------------------------- movement */

static bool perm_identity(int rank, const int *perm)
{
    for (int i = 0; i < rank; i++)
        if (perm[i] != i)
            return false;
    return true;
}

static bool slice_identity(const ir_node *x, const ir_attrs *a)
{
    for (int i = 0; i < x->rank; i++) {
        int64_t len = a->slice.len[i];
        if (len != x->shape[i] || (len > 0 && a->slice.start[i] != 0) || (len > 1 && a->slice.step[i] != 1))
            return false;
    }
    return true;
}

static ir_node *movement(simp *s, ir_op op, ir_node *x, const ir_attrs *a, rlx_dtype dt, int rank,
                         const int64_t *shape, int depth)
{
    double c;
    if (op != IR_OP_PAD && is_const(x, &c)) /* every element of a view of a constant is the constant */
        return mk_const(s, dt, rank, shape, c);
    switch (op) {
    case IR_OP_RESHAPE:
    case IR_OP_EXPAND:
        if (ir_shape_eq(x->rank, x->shape, rank, shape))
            return ir_retain(x);
        if (open_op(x, op)) /* reshape(reshape(y)) = reshape(y); expand(expand(y)) = expand(y) */
            return mk1(s, op, x->src[0], a, depth);
        return NOFIRE;
    case IR_OP_PERMUTE:
        if (perm_identity(x->rank, a->perm.perm))
            return ir_retain(x);
        if (open_op(x, IR_OP_PERMUTE)) {
            /* out axis i of the outer is its source's axis p2[i], which is
             * the inner source's axis p1[p2[i]] */
            ir_attrs c2;
            memset(&c2, 0, sizeof c2);
            for (int i = 0; i < rank; i++)
                c2.perm.perm[i] = x->attr.perm.perm[a->perm.perm[i]];
            return mk1(s, IR_OP_PERMUTE, x->src[0], &c2, depth);
        }
        return NOFIRE;
    case IR_OP_SLICE:
        return slice_identity(x, a) ? ir_retain(x) : NOFIRE;
    case IR_OP_PAD:
        for (int i = 0; i < x->rank; i++)
            if (a->pad.before[i] || a->pad.after[i])
                return NOFIRE;
        return ir_retain(x);
    default:
        return NOFIRE;
    }
}

/* ------------------------------------------------------------------ walk */

/* The simplified form of op(src) (a new reference), or NULL with s->status
 * set. orig, when given, is an existing node of the same op and attributes
 * that is returned when no rule fires and the sources are its own. */
static ir_node *rewrite(simp *s, ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a, ir_node *orig,
                        int depth)
{
    static const ir_attrs none;
    if (!a)
        a = &none;
    rlx_dtype dt = RLX_F32;
    int rank = 0;
    int64_t shape[IR_MAX_RANK] = {0};
    char err[200] = "";
    if (!ir_infer(op, nsrc, src, a, &dt, &rank, shape, err, sizeof err))
        return fail(s, RLX_E_INTERNAL, err);
    ir_node *r = NOFIRE;
    bool dynamic = has_dynamic(rank, shape);
    for (int k = 0; k < nsrc; k++)
        dynamic = dynamic || has_dynamic(src[k]->rank, src[k]->shape);
    if (depth < MAX_DEPTH && !dynamic) {
        switch (ir_ops[op].cls) {
        case IR_CLS_UNARY:
        case IR_CLS_BINARY:
        case IR_CLS_TERNARY:
            r = fold(s, op, nsrc, src, a, dt, rank, shape);
            if (r == NOFIRE)
                r = nsrc == 1 ? unary(s, op, src[0], a, depth)
                    : nsrc == 2 ? binary(op, src[0], src[1])
                    : where(src[0], src[1], src[2]);
            break;
        case IR_CLS_REDUCE:
            r = reduce(s, op, src[0], a->red.mask, dt, rank, shape, depth);
            break;
        case IR_CLS_MOVEMENT:
            r = movement(s, op, src[0], a, dt, rank, shape, depth);
            break;
        default:
            break;
        }
    }
    if (r != NOFIRE)
        return r;
    if (orig && (nsrc == 0 || memcmp(orig->src, src, (size_t)nsrc * sizeof *src) == 0))
        return ir_retain(orig);
    return make(s, op, nsrc, src, a, dt, rank, shape);
}

static bool stop_at_realized(const ir_node *n, void *ctx)
{
    (void)ctx;
    return realized(n);
}

/* Small graphs (most realizations) find positions by a search back
 * through the order and keep their replacements on the stack: the map's
 * and the array's allocations cost more than the search. */
enum { SMALL = 16 };

static long position(const ir_map *pos, ir_node *const *order, long count, const ir_node *n, long below)
{
    if (count > SMALL)
        return ir_map_get(pos, n);
    for (long j = below - 1; j >= 0; j--)
        if (order[j] == n)
            return j;
    return -1;
}

rlx_status simp_run(sched_ctx *c, ir_node *const *roots, int nroots, simp_fold_fn fold_fn, ir_node **out)
{
    char err[sizeof c->msg];
    simp s = {fold_fn, RLX_OK, err, sizeof err};
    err[0] = '\0';
    for (int r = 0; r < nroots; r++)
        out[r] = NULL;
    ir_node **order = NULL, **repl = NULL, *src_small[8], **src, *repl_small[SMALL];
    ir_scratch src_mem = IR_SCRATCH(src_small), repl_mem = IR_SCRATCH(repl_small);
    ir_map pos = {0};
    long count = ir_postorder(roots, nroots, stop_at_realized, NULL, &order);
    if (count < 0 || !(repl = ir_scratch_get(&repl_mem, (size_t)count * sizeof *repl))) {
        fail(&s, RLX_E_NOMEM, "out of memory");
        goto out;
    }
    memset(repl, 0, (size_t)count * sizeof *repl);
    for (long i = 0; i < count; i++) {
        ir_node *n = order[i];
        if (count > SMALL && ir_map_put(&pos, n, i) < 0) {
            fail(&s, RLX_E_NOMEM, "out of memory");
            goto out;
        }
        if (realized(n) || n->nsrc == 0) {
            repl[i] = ir_retain(n);
            continue;
        }
        if (!(src = ir_scratch_get(&src_mem, (size_t)n->nsrc * sizeof *src))) { /* heap for a long CAT */
            fail(&s, RLX_E_NOMEM, "out of memory");
            goto out;
        }
        for (int k = 0; k < n->nsrc; k++)
            src[k] = repl[position(&pos, order, count, n->src[k], i)]; /* sources come first in post-order */
        if (!(repl[i] = rewrite(&s, n->op, n->nsrc, src, &n->attr, n, 0)))
            goto out;
    }
    for (int r = 0; r < nroots; r++)
        out[r] = ir_retain(repl[position(&pos, order, count, roots[r], count)]);
out:
    for (long i = 0; repl && i < count; i++)
        ir_release(repl[i]);
    ir_scratch_free(&src_mem);
    ir_scratch_free(&repl_mem);
    ir_free(order);
    ir_map_free(&pos);
    return s.status == RLX_OK ? RLX_OK : sched_fail(c, s.status, "%s", err);
}

long simp_count(ir_node *const *roots, int nroots)
{
    ir_node **order = NULL;
    long count = ir_postorder(roots, nroots, stop_at_realized, NULL, &order), live = 0;
    for (long i = 0; i < count; i++)
        live += !realized(order[i]);
    ir_free(order);
    return count < 0 ? -1 : live;
}
