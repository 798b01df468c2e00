/*
 * vjp.c — the vector-Jacobian product of every primitive, one row per op
 * in ad_vjps, and the rules themselves.
 *
 * A rule gets the node n, its cotangent g (n's shape and dtype) and which
 * sources want a gradient; it builds the sources' cotangents with public
 * calls, inside the composite scope the driver (grad.c) opened. Binary and
 * ternary sources already have the node's shape (broadcasts are explicit
 * EXPAND nodes), so summing a gradient back over broadcast axes is the
 * EXPAND rule's job alone. Rules use only differentiable primitives or
 * masks, so gradients of gradients work.
 *
 * Decisions at kinks and ties (documented at rlx_grad in rlx.h):
 *   abs, sign at 0: abs' = sign(0) = 0. relu is where(x <= 0, 0, x): 0 at 0.
 *   maximum/minimum on a tie: each operand gets half (as PyTorch, JAX).
 *   max/min reductions and max pooling: the cotangent is split evenly over
 *   every tied extreme of the reduced set (window).
 *   round: straight-through (identity). floor, ceil, sign, comparisons,
 *   logical ops, argmax/argmin, stop_gradient: no gradient.
 *   prod: exact with zeros (the product of the others where one factor is
 *   0; zero where two are).
 *   pow: d/da is 0 where b == 0; d/db is 0 where a == 0 and b >= 0 (and NaN
 *   for a < 0, like log).
 *   rem (fmod): d/da = 1, d/db = -trunc(a/b).
 *   mxquant: straight-through.
 *   qmatmul: the quantized weight is frozen: x gets g . W, scale zeros
 *   (wq and zero points are integers and never need a gradient).
 *   attention: the masked softmax's own rule (a row with no visible key
 *   passes no gradient); a bool mask has none, a float (additive) mask gets
 *   dS, which is 0 where a key is dropped.
 *   scatter (overwrite): an overwritten base element gets 0; of several
 *   src elements sent to one place, the one that won (the last in index
 *   order) gets the gradient, the others 0.
 */
#include <math.h>
#include <string.h>

#include "autodiff/ad.h"
#include "ir/scratch.h"
#include "passes/knobs.h"

#define FN "rlx_grad"

static rlx_tensor *T(ir_node *n) { return (rlx_tensor *)n; }

/* ------------------------------------------------------------ helpers */

/* The transpose of a strided read along axis ax: a tensor whose axis ax
 * has length dim, holding t's elements k at start + k*step and zeros
 * elsewhere (exact: only pads, reshapes and a flip). */
static rlx_tensor *place_axis(rlx_tensor *t, int ax, int64_t start, int64_t step, int64_t dim)
{
    if (!t)
        return NULL;
    ir_node *tn = ts_node(t);
    int64_t shape[IR_MAX_RANK];
    memcpy(shape, tn->shape, sizeof shape);
    int64_t len = shape[ax];
    shape[ax] = dim;
    if (len == 0 || ir_numel(tn->rank, tn->shape) == 0)
        return rlx_zeros(tn->dtype, tn->rank, shape);
    if (len == 1)
        step = 1; /* one element: its step does not matter */
    if (step < 0) { /* the same positions, visited upward */
        t = rlx_flip(t, ax);
        start += (len - 1) * step;
        step = -step;
    }
    if (step == 1)
        return rlx_pad(t, ax, start, dim - start - len, 0);
    /* [pre, len, post] -> [pre, len, 1, post] -> pad to [pre, len, step, post]
     * -> [pre, len*step, post]: element k lands at k*step. */
    int64_t pre = ir_numel(ax, tn->shape), post = ir_numel(tn->rank - ax - 1, tn->shape + ax + 1);
    int64_t s4[4] = {pre, len, 1, post}, s3[3] = {pre, len * step, post};
    rlx_tensor *u = rlx_pad(rlx_reshape(t, 4, s4), 2, 0, step - 1, 0);
    int64_t span = (len - 1) * step + 1;
    u = rlx_narrow(rlx_reshape(u, 3, s3), 1, 0, span);
    u = rlx_pad(u, 1, start, dim - start - span, 0);
    return rlx_reshape(u, tn->rank, shape);
}

/* t broadcast to x's shape, whose dynamic dims a program resolves with
 * x's (NULL passes through). */
static rlx_tensor *expand_like(rlx_tensor *t, ir_node *x)
{
    if (!t)
        return NULL;
    if (ir_node_numel(x) >= 0)
        return rlx_broadcast_to(t, x->rank, x->shape);
    ir_node *r = ts_expand_like(FN, ts_node(t), x);
    return r ? ts_wrap(r) : NULL;
}

/* zeros in the shape of x, dynamic dims included. */
static rlx_tensor *zeros_of(ir_node *x) { return rlx_zeros_like(T(x)); }

/* The slice (start, step, len: a dynamic axis' attrs, ts.h) of axis ax
 * of n, the other axes whole (a new reference). */
static ir_node *slice1(ir_node *n, int ax, int64_t start, int64_t step, int64_t len)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < n->rank; i++) {
        a.slice.step[i] = 1;
        a.slice.len[i] = n->shape[i];
    }
    a.slice.start[ax] = start;
    a.slice.step[ax] = step;
    a.slice.len[ax] = len;
    return ts_make(FN, IR_OP_SLICE, 1, &n, &a);
}

/* The cotangent t of a slice of the dynamic axis ax of x placed back into
 * x's shape: zeros around it, made of slices of x with the same
 * size-relative bounds (ts.h), so that a program resolves them together.
 * A step other than +-1 (or a reversed range) is refused. */
static rlx_tensor *place_dynamic(rlx_tensor *t, ir_node *x, int ax, int64_t start, int64_t step, int64_t len)
{
    if (!t)
        return NULL;
    if (len == -1)
        return t;
    if (len < -1 && step == -1 && start == TS_DYN_IX && ts_dyn_stop(len) == -TS_DYN_IX)
        return rlx_flip(t, ax); /* a flip */
    if (step != 1) { /* added back where the same slice of x's positions puts it */
        ir_node *pos = ts_node(rlx_arange_of(T(x), ax, RLX_I64)), *at = pos ? slice1(pos, 0, start, step, len) : NULL;
        int64_t col[IR_MAX_RANK];
        for (int d = 0; d < x->rank; d++)
            col[d] = d == ax ? (at ? at->shape[0] : 0) : 1;
        rlx_tensor *k = at ? expand_like(rlx_reshape(ts_wrap(at), x->rank, col), ts_node(t)) : NULL;
        return k ? rlx_scatter_add(zeros_of(x), ax, k, t) : NULL;
    }
    ir_node *lo = ts_dyn_range(FN, x, ax, 0, start, 1), *mid = NULL, *hi = NULL;
    if (lo && len >= 0)
        mid = ts_dyn_range(FN, x, ax, start, TS_DYN_IX, 1), hi = mid ? ts_dyn_range(FN, mid, ax, len, TS_DYN_IX, 1) : NULL;
    else if (lo) {
        /* hi = x[max(start, stop):]: a stop before the start (an empty
         * slice, as x[3:0]) must not overlap lo. Python indices (not
         * tagged) are resolved in the same binding: a stop from the end
         * is taken within x[start:], a start from the end within x[stop:] */
        int64_t stop = ts_dyn_stop(len), tag = TS_DYN_ROLL - TS_DYN_IX;
        bool plain = start < tag && stop < tag;
        if (plain && stop < 0)
            mid = ts_dyn_range(FN, x, ax, start, TS_DYN_IX, 1), hi = mid ? ts_dyn_range(FN, mid, ax, stop, TS_DYN_IX, 1) : NULL;
        else if (plain && start < 0)
            mid = ts_dyn_range(FN, x, ax, stop, TS_DYN_IX, 1), hi = mid ? ts_dyn_range(FN, mid, ax, start, TS_DYN_IX, 1) : NULL;
        else
            hi = ts_dyn_range(FN, x, ax, plain && start > stop ? start : stop, TS_DYN_IX, 1);
    }
    ir_release(mid);
    if (!hi) {
        ir_release(lo);
        return NULL;
    }
    rlx_tensor *parts[3] = {zeros_of(lo), t, zeros_of(hi)};
    ir_release(lo);
    ir_release(hi);
    /* where(true, ., x): a program checks the pieces add up to x's size */
    return expand_like(rlx_cat(parts, 3, ax), x);
}

/* op over the axes of mask, keeping them (NULL passes through). */
static rlx_tensor *reduce_keep(ir_op op, rlx_tensor *t, uint32_t mask)
{
    return t ? ts_reduce_mask(FN, op, t, mask, true) : NULL;
}

/* t cast to the dtype of node s (a no-op when it has it). */
static rlx_tensor *as_dtype(rlx_tensor *t, const ir_node *s)
{
    return t && ts_node(t)->dtype != s->dtype ? rlx_cast(t, s->dtype) : t;
}

static rlx_tensor *dt_const(const ir_node *n, double v) { return rlx_scalar(n->dtype, v); }

/* ------------------------------------------------------- unary rules */

#define UNARY_RULE(name, expr)                                                         \
    static void vjp_##name(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx) \
    {                                                                                  \
        (void)need;                                                                    \
        rlx_tensor *x = T(n->src[0]), *y = T(n);                                       \
        (void)x;                                                                       \
        (void)y;                                                                       \
        dx[0] = (expr);                                                                \
    }

UNARY_RULE(exp, rlx_mul(g, y))
UNARY_RULE(expm1, rlx_mul(g, rlx_add_s(y, 1)))
UNARY_RULE(log, rlx_div(g, x))
UNARY_RULE(log1p, rlx_div(g, rlx_add_s(x, 1)))
UNARY_RULE(sin, rlx_mul(g, rlx_cos(x)))
UNARY_RULE(cos, rlx_neg(rlx_mul(g, rlx_sin(x))))
UNARY_RULE(tan, rlx_mul(g, rlx_add_s(rlx_mul(y, y), 1)))
UNARY_RULE(atan, rlx_div(g, rlx_add_s(rlx_mul(x, x), 1)))
UNARY_RULE(sqrt, rlx_div(rlx_mul_s(g, 0.5), y))
UNARY_RULE(rsqrt, rlx_mul(rlx_mul_s(g, -0.5), rlx_mul(y, rlx_mul(y, y)))) /* x^(-3/2) = rsqrt(x)^3 */
UNARY_RULE(recip, rlx_neg(rlx_mul(g, rlx_mul(y, y))))
UNARY_RULE(tanh, rlx_mul(g, rlx_rsub_s(rlx_mul(y, y), 1)))
UNARY_RULE(erf, rlx_mul(g, rlx_mul_s(rlx_exp(rlx_neg(rlx_mul(x, x))), M_2_SQRTPI)))
UNARY_RULE(sigmoid, rlx_mul(g, rlx_mul(y, rlx_rsub_s(y, 1))))
UNARY_RULE(neg, rlx_neg(g))
UNARY_RULE(abs, rlx_mul(g, rlx_sign(x))) /* sign(0) = 0: |x| has gradient 0 at 0 */
UNARY_RULE(identity, g)                  /* round (straight-through), contiguous */
UNARY_RULE(cast, as_dtype(g, n->src[0])) /* float -> float only: other casts carry no gradient */
#undef UNARY_RULE

/* ------------------------------------------------------ binary rules */

static void vjp_add(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)n;
    (void)need;
    dx[0] = dx[1] = g;
}

static void vjp_sub(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)n;
    dx[0] = g;
    dx[1] = need[1] ? rlx_neg(g) : NULL;
}

static void vjp_mul(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    dx[0] = need[0] ? rlx_mul(g, T(n->src[1])) : NULL;
    dx[1] = need[1] ? rlx_mul(g, T(n->src[0])) : NULL;
}

static void vjp_div(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    rlx_tensor *b = T(n->src[1]);
    dx[0] = need[0] ? rlx_div(g, b) : NULL;
    dx[1] = need[1] ? rlx_neg(rlx_div(rlx_mul(g, T(n)), b)) : NULL; /* -g a/b^2 = -g (a/b)/b */
}

static void vjp_pow(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    rlx_tensor *a = T(n->src[0]), *b = T(n->src[1]), *zero = dt_const(n, 0);
    if (need[0]) /* b a^(b-1), and 0 where b == 0 (not 0 * inf at a == 0) */
        dx[0] = rlx_mul(g, rlx_where(rlx_eq_s(b, 0), zero, rlx_mul(b, rlx_pow(a, rlx_sub_s(b, 1)))));
    if (need[1]) { /* a^b log a, and 0 where a == 0 and b >= 0 (the limit) */
        rlx_tensor *at0 = rlx_logical_and(rlx_eq_s(a, 0), rlx_ge_s(b, 0));
        rlx_tensor *safe_a = rlx_where(at0, dt_const(n, 1), a);
        dx[1] = rlx_mul(g, rlx_where(at0, zero, rlx_mul(T(n), rlx_log(safe_a))));
    }
}

/* maximum (is_max) or minimum: the chosen operand takes g, a tie splits it. */
static void minmax(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx, bool is_max)
{
    rlx_tensor *a = T(n->src[0]), *b = T(n->src[1]);
    rlx_tensor *half = rlx_mul_s(rlx_cast(rlx_eq(a, b), n->dtype), 0.5);
    rlx_tensor *a_wins = is_max ? rlx_gt(a, b) : rlx_lt(a, b), *b_wins = is_max ? rlx_gt(b, a) : rlx_lt(b, a);
    if (need[0])
        dx[0] = rlx_mul(g, rlx_add(rlx_cast(a_wins, n->dtype), half));
    if (need[1])
        dx[1] = rlx_mul(g, rlx_add(rlx_cast(b_wins, n->dtype), half));
}

static void vjp_max(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx) { minmax(n, g, need, dx, true); }
static void vjp_min(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx) { minmax(n, g, need, dx, false); }

static void vjp_atan2(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    rlx_tensor *a = T(n->src[0]), *b = T(n->src[1]);
    rlx_tensor *gd = rlx_div(g, rlx_add(rlx_mul(a, a), rlx_mul(b, b)));
    dx[0] = need[0] ? rlx_mul(gd, b) : NULL;
    dx[1] = need[1] ? rlx_neg(rlx_mul(gd, a)) : NULL;
}

static void vjp_rem(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    dx[0] = g;
    if (need[1]) { /* fmod(a, b) = a - trunc(a/b) b */
        rlx_tensor *q = rlx_div(T(n->src[0]), T(n->src[1]));
        rlx_tensor *trunc = rlx_where(rlx_lt_s(q, 0), rlx_ceil(q), rlx_floor(q));
        dx[1] = rlx_neg(rlx_mul(g, trunc));
    }
}

static void vjp_where(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    rlx_tensor *c = T(n->src[0]), *zero = dt_const(n, 0);
    dx[1] = need[1] ? rlx_where(c, g, zero) : NULL;
    dx[2] = need[2] ? rlx_where(c, zero, g) : NULL;
}

/* -------------------------------------------------------- reductions */

static void vjp_sum(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    dx[0] = expand_like(g, n->src[0]);
}

/* max/min: g split evenly over the elements equal to the extreme. */
static void vjp_extreme(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    rlx_tensor *hit = rlx_cast(rlx_eq(T(n->src[0]), T(n)), n->dtype);
    rlx_tensor *count = reduce_keep(IR_OP_SUM, hit, n->attr.red.mask);
    dx[0] = rlx_mul(rlx_div(g, count), hit);
}

/* prod: g * (product of the other factors of the set), exact with zeros.
 * With no zero it is p/x; with one zero, the zero's entry is the product
 * of the nonzeros and the rest 0; with two or more, all 0. Divisions only
 * ever see nonzero x, so second derivatives stay finite too. */
static void vjp_prod(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    rlx_tensor *x = T(n->src[0]), *zero = dt_const(n, 0);
    uint32_t mask = n->attr.red.mask;
    rlx_tensor *is0 = rlx_eq_s(x, 0);
    rlx_tensor *safe = rlx_where(is0, dt_const(n, 1), x);
    rlx_tensor *p_nz = reduce_keep(IR_OP_PROD, safe, mask);
    rlx_tensor *zeros = reduce_keep(IR_OP_SUM, rlx_cast(is0, n->dtype), mask);
    rlx_tensor *one_zero = rlx_logical_and(rlx_eq_s(zeros, 1), is0);
    rlx_tensor *others = rlx_where(rlx_eq_s(zeros, 0), rlx_div(p_nz, safe), rlx_where(one_zero, p_nz, zero));
    dx[0] = rlx_mul(g, others);
}

/* ---------------------------------------------------------- movement */

/* t (in ref's shape, ref = reshape(y)) reshaped to y's dims as bound,
 * however many are dynamic: a program reads them through where(true, t,
 * ref) (program.c, reshape_dims); always a node, even where t's traced
 * shape is y's. */
static rlx_tensor *reshape_to_bound(rlx_tensor *t, ir_node *ref)
{
    if (!t || !ref)
        return NULL;
    if (ref->op != IR_OP_RESHAPE) {
        ts_error(RLX_E_INTERNAL, FN, "a cotangent's bound dims read through a %s", ir_ops[ref->op].name);
        return NULL;
    }
    const ir_node *y = ref->src[0];
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.shape.rank = y->rank;
    memcpy(a.shape.dims, y->shape, (size_t)y->rank * sizeof *y->shape);
    ir_node *w = ts_expand_like(FN, ts_node(t), ref), *r = w ? ts_make(FN, IR_OP_RESHAPE, 1, &w, &a) : NULL;
    ir_release(w);
    return r ? ts_wrap(r) : NULL;
}

static void vjp_reshape(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    ir_node *x = n->src[0];
    if (ir_node_numel(x) >= 0) {
        dx[0] = rlx_reshape(g, x->rank, x->shape);
        return;
    }
    /* dynamic dims (maybe several): g follows n's rule 1 or 2 back (not
     * 3: x's own dims are surer; nor when n names symbols, which may have
     * reordered x's dims), else the program takes x's bound dims */
    int64_t known;
    int rule = ts_reshape_rule(n, x->rank, x->shape, &known);
    if ((rule == 1 || rule == 2) && !ts_reshape_names_symbol(n)) {
        ir_node *r = ts_reshape_node(FN, ts_node(g), x->rank, x->shape);
        dx[0] = r ? ts_wrap(r) : NULL;
    } else {
        dx[0] = reshape_to_bound(g, n);
    }
}

static void vjp_permute(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    int inv[IR_MAX_RANK];
    for (int i = 0; i < n->rank; i++)
        inv[n->attr.perm.perm[i]] = i;
    dx[0] = rlx_transpose(g, n->rank, inv);
}

static void vjp_expand(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    ir_node *x = n->src[0];
    uint32_t mask = 0;
    for (int i = 0; i < x->rank; i++)
        if (x->shape[i] != n->shape[i])
            mask |= 1u << i;
    dx[0] = reduce_keep(IR_OP_SUM, g, mask);
}

static void vjp_pad(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    ir_node *x = n->src[0];
    rlx_tensor *t = g;
    for (int i = 0; i < x->rank && t; i++) {
        int64_t b = n->attr.pad.before[i], e = n->attr.pad.after[i];
        if (b || e) /* a dynamic axis: the middle as Python's [b:-e] */
            t = x->shape[i] < 0 ? rlx_slice(t, i, b, e ? -e : RLX_END, 1) : rlx_narrow(t, i, b, x->shape[i]);
    }
    dx[0] = t;
}

static void vjp_slice(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    ir_node *x = n->src[0];
    rlx_tensor *t = g;
    for (int i = 0; i < x->rank; i++) {
        int64_t start = n->attr.slice.start[i], step = n->attr.slice.step[i];
        if (x->shape[i] < 0)
            t = place_dynamic(t, x, i, start, step, n->attr.slice.len[i]);
        else if (start != 0 || step != 1 || n->shape[i] != x->shape[i])
            t = place_axis(t, i, start, step, x->shape[i]);
    }
    dx[0] = t;
}

/* ------------------------------------------------------ data movement */

/* Piece k of g, the cotangent of the cat node cat, whose pieces before k
 * do not all have a static length: a slice of where(true, g, cat) between
 * where the bound pieces k and k+1 start (TS_DYN_PIECE), which a program
 * resolves from the pieces it binds. */
static rlx_tensor *cat_piece(rlx_tensor *g, ir_node *cat, int k)
{
    if (!g)
        return NULL;
    if (cat->op != IR_OP_CAT) {
        ts_error(RLX_E_INTERNAL, FN, "the pieces of %s are not a cat", ts_shape_str(cat));
        return NULL;
    }
    ir_node *w = ts_expand_like(FN, ts_node(g), cat), *r = NULL;
    int ax = cat->attr.ax.axis;
    int64_t len = cat->src[k]->shape[ax];
    if (w)
        r = slice1(w, ax, TS_DYN_PIECE + k, 1, len >= 0 ? len : ts_dyn_len(TS_DYN_PIECE + k + 1));
    ir_release(w);
    return r ? ts_wrap(r) : NULL;
}

static void vjp_cat(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    int ax = n->attr.ax.axis;
    int64_t at = 0;
    int dyn = -1, ndyn = 0; /* the one piece of a dynamic length, if any */
    for (int k = 0; k < n->nsrc; k++) {
        ndyn += n->src[k]->shape[ax] < 0;
        dyn = n->src[k]->shape[ax] < 0 ? k : dyn;
    }
    if (ndyn > 1) { /* several: the pieces from the first dynamic one on are placed by the program */
        for (int k = 0; k < n->nsrc; k++) {
            int64_t len = n->src[k]->shape[ax];
            if (need[k])
                dx[k] = at >= 0 && len >= 0 ? rlx_narrow(g, ax, at, len) : cat_piece(g, n, k);
            at = at < 0 || len < 0 ? -1 : at + len;
        }
        return;
    }
    for (int k = 0; k < n->nsrc; k++) {
        int64_t len = n->src[k]->shape[ax];
        if (len < 0)
            break;
        if (need[k])
            dx[k] = rlx_narrow(g, ax, at, len);
        at += len;
    }
    if (dyn < 0)
        return;
    /* after the dynamic piece: placed from the end; it takes what is between */
    int64_t back = 0;
    for (int k = n->nsrc - 1; k > dyn; k--) {
        int64_t len = n->src[k]->shape[ax];
        back += len;
        if (need[k])
            dx[k] = rlx_narrow(g, ax, -back, len);
    }
    if (need[dyn]) {
        ir_node *r = ts_dyn_range(FN, ts_node(g), ax, at, back ? -back : TS_DYN_IX, 1);
        dx[dyn] = r ? expand_like(ts_wrap(r), n->src[dyn]) : NULL;
    }
}

/* The cotangent of x for a gather of axis ax whose index dims cannot be
 * merged into one beside x's (several dynamic ones among dynamic dims of
 * x): g's elements added into x flattened, at the flat positions of the
 * elements they were read from (sizes as values, known when a program
 * binds them). An out-of-range index stays out of range (RLX_E_ARG when
 * realized, as the gather itself). */
static rlx_tensor *gather_flat_grad(ir_node *x, ir_node *idx, int ax, rlx_tensor *g)
{
    ir_node *gn = ts_node(g);
    int m = idx->rank, r = gn->rank;
    int64_t ks[IR_MAX_RANK];
    for (int d = 0; d < r; d++)
        ks[d] = d >= ax && d < ax + m ? idx->shape[d - ax] : 1;
    rlx_tensor *len = ts_dims_value(x, ax, ax + 1), *k = rlx_cast(T(idx), RLX_I64);
    rlx_tensor *ok = rlx_reshape(rlx_logical_and(rlx_ge(k, rlx_neg(len)), rlx_lt(k, len)), r, ks);
    k = rlx_reshape(rlx_where(rlx_lt_s(k, 0), rlx_add(k, len), k), r, ks);
    rlx_tensor *lin = rlx_mul(k, ts_dims_value(x, ax + 1, x->rank));
    for (int d = 0; d < r; d++) { /* g's other dims are x's, around the index's */
        if (d >= ax && d < ax + m)
            continue;
        int64_t col[IR_MAX_RANK];
        for (int e = 0; e < r; e++)
            col[e] = e == d ? gn->shape[d] : 1;
        rlx_tensor *pos = rlx_reshape(rlx_arange_of(g, d, RLX_I64), r, col);
        lin = rlx_add(lin, rlx_mul(pos, ts_dims_value(x, (d < ax ? d : d - m + 1) + 1, x->rank)));
    }
    lin = rlx_where(ok, lin, rlx_mul(rlx_ones_like(lin), ts_dims_value(x, 0, x->rank)));
    rlx_tensor *base = rlx_flatten(zeros_of(x));
    rlx_tensor *d = rlx_scatter_add(base, 0, rlx_flatten(lin), rlx_flatten(g));
    return base ? reshape_to_bound(d, ts_node(base)) : NULL;
}

/* gather: the cotangent of x is a scatter-add of g, one SCATTER node over
 * x as [outer, L, inner] with the indices repeated along outer and inner
 * (repeated indices add up in index order; negative ones count from the
 * end as in the forward gather). */
static void vjp_gather(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    ir_node *x = n->src[0], *idx = n->src[1];
    int ax = n->attr.ax.axis;
    int64_t outer = ir_numel(ax, x->shape), len = x->shape[ax];
    int64_t inner = ir_numel(x->rank - ax - 1, x->shape + ax + 1), ni = ir_node_numel(idx);
    if (ni == 0 || outer * inner == 0) {
        dx[0] = zeros_of(x);
        return;
    }
    if (outer < 0 || inner < 0) { /* x's rank kept: g with idx's dims as one, idx along ax */
        int64_t gs[IR_MAX_RANK], col[IR_MAX_RANK], known;
        for (int d = 0; d < x->rank; d++) {
            gs[d] = d == ax ? ni : x->shape[d];
            col[d] = d == ax ? ni : 1;
        }
        ir_node *gn = ts_node(g);
        if (ts_reshape_rule(gn, x->rank, gs, &known) == 0) { /* several dynamic dims merged */
            dx[0] = gather_flat_grad(x, idx, ax, g);
            return;
        }
        ir_node *g2 = ts_reshape_node(FN, gn, x->rank, gs);
        rlx_tensor *gx = g2 ? ts_wrap(g2) : NULL;
        rlx_tensor *at = gx ? expand_like(rlx_reshape(T(idx), x->rank, col), g2) : NULL;
        dx[0] = at ? rlx_scatter_add(zeros_of(x), ax, at, gx) : NULL;
        return;
    }
    /* a dynamic index count or axis length is the one -1 of its reshape,
     * and the shapes follow g and x when a program binds them */
    int64_t gs[3] = {outer, ni, inner}, xs[3] = {outer, len, inner}, is[3] = {1, ni, 1};
    rlx_tensor *g3 = rlx_reshape(g, 3, gs), *x3 = len < 0 ? rlx_reshape(T(x), 3, xs) : NULL;
    rlx_tensor *at = ni < 0 ? expand_like(rlx_reshape(T(idx), 3, is), ts_node(g3))
                            : rlx_broadcast_to(rlx_reshape(T(idx), 3, is), 3, gs);
    rlx_tensor *base = x3 ? zeros_of(ts_node(x3)) : rlx_zeros(x->dtype, 3, xs);
    rlx_tensor *d = rlx_scatter_add(base, 1, at, g3);
    dx[0] = rlx_reshape(d, x->rank, x->shape);
}

/* The inverse of a scatter's placement: out[p] = t[p with axis coordinate
 * idx[p]], for t of the scatter's shape and p over idx's shape (a gather
 * of t's flattened elements). An index out of range stays out of range. */
static rlx_tensor *take_along(rlx_tensor *t, int ax, ir_node *idx)
{
    if (!t)
        return NULL;
    ir_node *tn = ts_node(t);
    /* sizes as values: a dynamic one is known when a program binds it */
    rlx_tensor *len = ts_dims_value(tn, ax, ax + 1), *numel = ts_dims_value(tn, 0, tn->rank);
    rlx_tensor *k = rlx_cast(T(idx), RLX_I64);
    rlx_tensor *ok = rlx_logical_and(rlx_ge(k, rlx_neg(len)), rlx_lt(k, len));
    rlx_tensor *lin = ts_along_positions(FN, rlx_where(rlx_lt_s(k, 0), rlx_add(k, len), k), ax, tn);
    lin = rlx_where(ok, lin, rlx_mul(rlx_ones_like(lin), numel));
    return rlx_gather(rlx_flatten(t), lin, 0);
}

/* scatter: add mode passes g to base and gathers it back for src. Set
 * mode passes g where nothing was written and gives it to the src
 * element that won (the last in index order); the others get 0. */
static void vjp_scatter(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    ir_node *base = n->src[0], *idx = n->src[1];
    int ax = n->attr.scatter.axis;
    if (n->attr.scatter.mode == IR_SCATTER_ADD) {
        dx[0] = need[0] ? g : NULL;
        dx[2] = need[2] ? take_along(g, ax, idx) : NULL;
        return;
    }
    if (need[0]) {
        rlx_tensor *hit = rlx_scatter(rlx_zeros(RLX_BOOL, base->rank, base->shape), ax, T(idx),
                                      rlx_ones(RLX_BOOL, idx->rank, idx->shape));
        dx[0] = rlx_where(hit, rlx_zeros_like(g), g);
    }
    if (need[2]) {
        ir_attrs a;
        memset(&a, 0, sizeof a);
        a.iota.step = 1;
        a.iota.axis = ax;
        rlx_tensor *pos = ts_wrap(ts_leaf(FN, IR_OP_IOTA, &a, RLX_I64, idx->rank, idx->shape));
        rlx_tensor *last = rlx_scatter(rlx_full(RLX_I64, base->rank, base->shape, -1), ax, T(idx), pos);
        rlx_tensor *won = rlx_eq(take_along(last, ax, idx), pos);
        dx[2] = rlx_where(won, take_along(g, ax, idx), dt_const(n, 0));
    }
}

/* cumsum: the adjoint of a running sum is a running sum from the end
 * (exclusive stays exclusive). */
static void vjp_cumsum(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    int ax = n->attr.scan.axis;
    dx[0] = rlx_flip(rlx_cumsum(rlx_flip(g, ax), ax, n->attr.scan.exclusive), ax);
}

/* ------------------------------------------------------------ library */

/* Whether n swaps the last two dims and keeps the others. */
static bool is_transpose(const ir_node *n)
{
    if (n->op != IR_OP_PERMUTE || n->rank < 2)
        return false;
    for (int d = 0; d < n->rank - 2; d++)
        if (n->attr.perm.perm[d] != d)
            return false;
    return n->attr.perm.perm[n->rank - 2] == n->rank - 1 && n->attr.perm.perm[n->rank - 1] == n->rank - 2;
}

/* C = A B: dA = G B^T, dB = A^T G (batch dims are equal here; broadcast
 * batches are summed by the EXPAND rule below). An operand that is a
 * transpose (x @ w^T: a linear layer's weight) gets its gradient as the
 * transpose of the product in the other order, dB = (G^T A)^T: the
 * permute's own rule transposes it back, the two permutes compose away,
 * and the weight's gradient is one GEMM written in the weight's layout,
 * which the optimizer's elementwise kernels then read contiguously. */
static void vjp_matmul(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    rlx_tensor *a = T(n->src[0]), *b = T(n->src[1]);
    dx[0] = !need[0] ? NULL : is_transpose(n->src[0]) ? rlx_t(rlx_matmul(b, rlx_t(g))) : rlx_matmul_t(g, b);
    dx[1] = !need[1] ? NULL : is_transpose(n->src[1]) ? rlx_t(rlx_matmul(rlx_t(g), a)) : rlx_matmul(rlx_t(a), g);
}

/* X = A^-1 B (implicit function): dB = A^-T G, dA = -dB X^T. */
static void vjp_solve(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    rlx_tensor *db = rlx_solve(rlx_t(T(n->src[0])), g);
    dx[1] = need[1] ? db : NULL;
    dx[0] = need[0] ? rlx_neg(rlx_matmul_t(db, T(n))) : NULL;
}

/* The unnormalized DFT matrix W is symmetric, so its adjoint as a real map
 * of the [re, im] layout is conj(W): the unnormalized transform the other
 * way, with no scale. */
static void vjp_fft(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    dx[0] = rlx_fft_axis(g, n->attr.fft.axis, !n->attr.fft.inverse);
}

/* conv2d, input side: the transposed convolution with the same arguments,
 * plus, as output padding, the rows the forward stride skipped at the end
 * (fewer than the stride). On a dynamic H or W that count depends on the
 * bound size: the most (stride - 1) is padded and the result cut to x's
 * positions (a gather of rlx_arange_of, which a program makes per binding). */
static rlx_tensor *conv_dx(ir_node *n, rlx_tensor *g)
{
    ir_node *x = n->src[0], *w = n->src[1];
    const int *s = n->attr.conv.stride, *p = n->attr.conv.pad, *d = n->attr.conv.dil;
    int skipped[2];
    for (int i = 0; i < 2; i++) {
        int64_t span = (int64_t)d[i] * (w->shape[2 + i] - 1) + 1;
        skipped[i] = x->shape[2 + i] < 0 ? s[i] - 1
                                         : (int)(x->shape[2 + i] + 2 * (int64_t)p[i] - span - (n->shape[2 + i] - 1) * s[i]);
    }
    rlx_tensor *dx = rlx_conv_transpose2d(g, T(w), NULL, s, p, skipped, d, n->attr.conv.groups);
    for (int i = 0; i < 2; i++)
        if (x->shape[2 + i] < 0 && s[i] > 1)
            dx = rlx_index_select(dx, 2 + i, rlx_arange_of(T(x), 2 + i, RLX_I64));
    return dx;
}

/* conv2d, weight side: per group, the correlation of x with g over the
 * batch (batch and channel axes swapped), with the forward dilation as
 * stride and the forward stride as dilation; the result is cut to KH, KW. */
static rlx_tensor *conv_dw(ir_node *n, rlx_tensor *g)
{
    ir_node *x = n->src[0], *w = n->src[1];
    int groups = n->attr.conv.groups;
    int64_t cg = w->shape[1], og = w->shape[0] / groups;
    static const int swap01[4] = {1, 0, 2, 3};
    rlx_tensor *parts[64];
    ir_scratch part_mem = IR_SCRATCH(parts);
    rlx_tensor **part = ir_scratch_get(&part_mem, (size_t)groups * sizeof *part);
    if (!part) {
        ts_error(RLX_E_NOMEM, FN, "out of memory");
        return NULL;
    }
    for (int k = 0; k < groups; k++) {
        rlx_tensor *xg = groups > 1 ? rlx_narrow(T(x), 1, k * cg, cg) : T(x);
        rlx_tensor *gg = groups > 1 ? rlx_narrow(g, 1, k * og, og) : g;
        rlx_tensor *r = rlx_conv2d(rlx_transpose(xg, 4, swap01), rlx_transpose(gg, 4, swap01), NULL,
                                   n->attr.conv.dil, n->attr.conv.pad, n->attr.conv.stride, 1);
        r = rlx_narrow(rlx_narrow(r, 2, 0, w->shape[2]), 3, 0, w->shape[3]);
        part[k] = rlx_transpose(r, 4, swap01);
    }
    rlx_tensor *dw = groups > 1 ? rlx_cat(part, groups, 0) : part[0];
    ir_scratch_free(&part_mem);
    return dw;
}

static void vjp_conv2d(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    dx[0] = need[0] ? conv_dx(n, g) : NULL;
    dx[1] = need[1] ? conv_dw(n, g) : NULL;
}

/* Tap (u, v) of a pool: xp[:, :, u + s0*i, v + s1*j] for the output's
 * (i, j), from the padded input xp. */
static rlx_tensor *pool_tap(ir_node *n, rlx_tensor *xp, int u, int v)
{
    const int *s = n->attr.pool.stride;
    int64_t oh = n->shape[2], ow = n->shape[3];
    return rlx_slice(rlx_slice(xp, 2, u, u + (oh - 1) * s[0] + 1, s[0]), 3, v, v + (ow - 1) * s[1] + 1, s[1]);
}

/* pool2d: each kernel tap's share of g goes back to the input positions
 * the tap read (a strided placement into the padded input). Average
 * pooling gives every tap g/(KH*KW) (padding counted, as the forward);
 * max pooling gives g to the taps equal to the window's max, split evenly
 * when several tie. */
/* The rows u, u+s, ... of axis ax of xp that a pool's tap u reads: on a
 * dynamic axis Python's u:-(k-1-u):s (as many as the output has). */
static ir_node *pool_tap_axis(ir_node *xp, int ax, int u, int k, int s, int64_t out)
{
    if (!xp)
        return NULL;
    if (xp->shape[ax] >= 0)
        return slice1(xp, ax, u, s, out);
    return ts_dyn_range(FN, xp, ax, u, k - 1 - u ? -(k - 1 - u) : TS_DYN_IX, s);
}

/* pool2d over a dynamic H or W: each tap is a slice of the padded input
 * whose own rule places its share back (resolved per binding). */
static rlx_tensor *pool_dx_dynamic(ir_node *n, rlx_tensor *g)
{
    ir_node *x = n->src[0];
    const int *k = n->attr.pool.kernel, *s = n->attr.pool.stride, *p = n->attr.pool.pad;
    bool avg = n->attr.pool.kind == IR_POOL_AVG;
    double fill = avg ? 0 : -INFINITY;
    ir_node *xp = ts_node(rlx_pad(rlx_pad(T(x), 2, p[0], p[0], fill), 3, p[1], p[1], fill));
    if (!xp)
        return NULL;
    ir_node *taps[64]; /* pool kernels up to 8x8 here; a larger one takes the memory below */
    ir_scratch tap_mem = IR_SCRATCH(taps);
    int nt = k[0] * k[1];
    ir_node **tap = ir_scratch_get(&tap_mem, (size_t)nt * sizeof *tap);
    if (!tap) {
        ts_error(RLX_E_NOMEM, FN, "out of memory");
        return NULL;
    }
    rlx_tensor *count = NULL, *sum = NULL;
    for (int u = 0; u < k[0]; u++)
        for (int v = 0; v < k[1]; v++) {
            ir_node *r = pool_tap_axis(xp, 2, u, k[0], s[0], n->shape[2]);
            tap[u * k[1] + v] = ts_node(ts_wrap(pool_tap_axis(r, 3, v, k[1], s[1], n->shape[3])));
            ir_release(r);
        }
    if (!avg)
        for (int t = 0; t < nt; t++) {
            rlx_tensor *hit = rlx_cast(rlx_eq(T(tap[t]), T(n)), n->dtype);
            count = count ? rlx_add(count, hit) : hit;
        }
    rlx_tensor *share = avg ? rlx_mul_s(g, 1.0 / nt) : rlx_div(g, count);
    bool need = true;
    for (int t = 0; t < nt; t++) {
        rlx_tensor *c = avg ? share : rlx_mul(share, rlx_cast(rlx_eq(T(tap[t]), T(n)), n->dtype)), *row = NULL, *placed = NULL;
        if (!tap[t] || !c)
            continue;
        vjp_slice(tap[t], c, &need, &row);
        if (row)
            vjp_slice(tap[t]->src[0], row, &need, &placed);
        sum = sum && placed ? rlx_add(sum, placed) : placed;
    }
    ir_scratch_free(&tap_mem);
    for (int i = 0; i < 2 && sum; i++)
        if (p[i])
            sum = x->shape[2 + i] < 0 ? rlx_slice(sum, 2 + i, p[i], -p[i], 1) : rlx_narrow(sum, 2 + i, p[i], x->shape[2 + i]);
    return sum;
}

static void vjp_pool2d(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    ir_node *x = n->src[0];
    if (x->shape[2] < 0 || x->shape[3] < 0) {
        dx[0] = pool_dx_dynamic(n, g);
        return;
    }
    const int *k = n->attr.pool.kernel, *s = n->attr.pool.stride, *p = n->attr.pool.pad;
    int64_t hp = x->shape[2] + 2 * (int64_t)p[0], wp = x->shape[3] + 2 * (int64_t)p[1];
    bool avg = n->attr.pool.kind == IR_POOL_AVG;
    rlx_tensor *xp = NULL, *share = rlx_mul_s(g, 1.0 / ((double)k[0] * k[1]));
    if (!avg) {
        xp = rlx_pad(rlx_pad(T(x), 2, p[0], p[0], -INFINITY), 3, p[1], p[1], -INFINITY);
        rlx_tensor *count = NULL;
        for (int u = 0; u < k[0]; u++)
            for (int v = 0; v < k[1]; v++) {
                rlx_tensor *hit = rlx_cast(rlx_eq(pool_tap(n, xp, u, v), T(n)), n->dtype);
                count = count ? rlx_add(count, hit) : hit;
            }
        share = rlx_div(g, count);
    }
    rlx_tensor *sum = NULL;
    for (int u = 0; u < k[0]; u++)
        for (int v = 0; v < k[1]; v++) {
            rlx_tensor *c = avg ? share : rlx_mul(share, rlx_cast(rlx_eq(pool_tap(n, xp, u, v), T(n)), n->dtype));
            rlx_tensor *placed = place_axis(place_axis(c, 2, u, s[0], hp), 3, v, s[1], wp);
            sum = sum ? rlx_add(sum, placed) : placed;
        }
    dx[0] = rlx_narrow(rlx_narrow(sum, 2, p[0], x->shape[2]), 3, p[1], x->shape[3]);
}

/* [B, S, H*D] -> [B, H, S, D] and back (views). */
static rlx_tensor *split_heads(rlx_tensor *x, int h, int d)
{
    ir_node *xn = ts_node(x);
    int64_t shape[4] = {xn->shape[0], xn->shape[1], h, d};
    static const int perm[4] = {0, 2, 1, 3};
    return rlx_transpose(rlx_reshape(x, 4, shape), 4, perm);
}

static rlx_tensor *merge_heads(rlx_tensor *x, const ir_node *like)
{
    static const int perm[4] = {0, 2, 1, 3};
    return rlx_reshape(rlx_transpose(x, 4, perm), like->rank, like->shape);
}

/* Grouped-query attention (G = H/Hkv query heads per kv head) is written
 * with an explicit group axis so that no kv head is ever repeated: query
 * side [B, S, H*D] -> [B, Hkv, G, S, D], kv side [B, Hkv, 1, S, D]; the
 * matmuls broadcast over the group. With G = 1 the plain [B, H, S, D]. */
static rlx_tensor *q_heads(ir_node *n, rlx_tensor *x)
{
    int h = n->attr.attn.heads, hk = n->attr.attn.kv_heads, d = n->attr.attn.head_dim;
    if (h == hk)
        return split_heads(x, h, d);
    ir_node *xn = ts_node(x);
    int64_t shape[5] = {xn->shape[0], xn->shape[1], hk, h / hk, d};
    static const int perm[5] = {0, 2, 3, 1, 4};
    return rlx_transpose(rlx_reshape(x, 5, shape), 5, perm);
}

static rlx_tensor *q_merge(ir_node *n, rlx_tensor *x, const ir_node *like)
{
    if (n->attr.attn.heads == n->attr.attn.kv_heads)
        return merge_heads(x, like);
    static const int perm[5] = {0, 3, 1, 2, 4};
    return rlx_reshape(rlx_transpose(x, 5, perm), like->rank, like->shape);
}

static rlx_tensor *kv_heads(ir_node *n, rlx_tensor *x)
{
    rlx_tensor *xh = split_heads(x, n->attr.attn.kv_heads, n->attr.attn.head_dim);
    return n->attr.attn.heads == n->attr.attn.kv_heads ? xh : rlx_unsqueeze(xh, 2);
}

/* A kv-side gradient [B, Hkv, G, S, D] summed over the group, back to
 * [B, S, Hkv*D] like the source. */
static rlx_tensor *kv_merge(ir_node *n, rlx_tensor *x, const ir_node *like)
{
    int ax = 2;
    if (n->attr.attn.heads != n->attr.attn.kv_heads)
        x = rlx_sum(x, &ax, 1, false);
    return merge_heads(x, like);
}

/* The mask source [B|1, H|1, Sq|1, Sk|1] in the scores' layout: as it is
 * for G = 1, else [B|1, Hkv|1, G|1, Sq|1, Sk|1]. */
static rlx_tensor *mask_heads(ir_node *n, ir_node *m)
{
    int h = n->attr.attn.heads, hk = n->attr.attn.kv_heads;
    if (h == hk)
        return T(m);
    bool per_head = m->shape[1] != 1;
    int64_t shape[5] = {m->shape[0], per_head ? hk : 1, per_head ? h / hk : 1, m->shape[2], m->shape[3]};
    return rlx_reshape(T(m), 5, shape);
}

/* The attention weights P of node n, in the scores' layout, rebuilt from
 * q and k with n's masks: a row with no visible key is all zeros (rlx.h). */
static rlx_tensor *attn_probs(ir_node *n, rlx_tensor *qh, rlx_tensor *kh, ir_node *mk)
{
    rlx_dtype dt = n->dtype;
    int mask = n->attr.attn.mask, ax = -1;
    double sq = (double)n->src[0]->shape[1], sk = (double)n->src[1]->shape[1];
    rlx_tensor *s = rlx_mul_s(rlx_matmul_t(qh, kh), n->attr.attn.scale), *keep = NULL;
    if (mask != RLX_MASK_NONE) { /* query i at position Sk - Sq + i, key j at j */
        rlx_tensor *qpos, *kpos;
        if (sq >= 0 && sk >= 0) {
            qpos = rlx_unsqueeze(rlx_arange(RLX_I64, sk - sq, sk, 1), 1);
            kpos = rlx_arange(RLX_I64, 0, sk, 1);
        } else { /* a dynamic length: the positions of q's and k's axis 1, Sk - Sq counted when run */
            rlx_tensor *qa = rlx_arange_of(T(n->src[0]), 1, RLX_I64);
            kpos = rlx_arange_of(T(n->src[1]), 1, RLX_I64);
            rlx_tensor *shift = rlx_sub(rlx_sum(rlx_ones_like(kpos), NULL, 0, false), rlx_sum(rlx_ones_like(qa), NULL, 0, false));
            qpos = rlx_unsqueeze(rlx_add(qa, shift), 1);
        }
        keep = rlx_le(kpos, qpos);
        if (mask == RLX_MASK_SLIDING)
            keep = rlx_logical_and(keep, rlx_gt(kpos, rlx_sub_s(qpos, n->attr.attn.window)));
    }
    if (mk) {
        rlx_tensor *m = mask_heads(n, mk);
        if (mk->dtype == RLX_BOOL)
            keep = keep ? rlx_logical_and(keep, m) : m;
        else
            s = rlx_add(s, m);
    }
    rlx_tensor *zero = rlx_zeros(dt, 0, NULL);
    rlx_tensor *sm = keep ? rlx_where(keep, s, rlx_full(dt, 0, NULL, -INFINITY)) : s;
    rlx_tensor *m = rlx_max(sm, &ax, 1, true);
    rlx_tensor *e = rlx_exp(rlx_sub(s, rlx_where(rlx_gt_s(m, -INFINITY), m, zero)));
    if (keep)
        e = rlx_where(keep, e, zero);
    rlx_tensor *den = rlx_sum(e, &ax, 1, true);
    return rlx_div(e, rlx_where(rlx_eq_s(den, 0), rlx_ones(dt, 0, NULL), den));
}

/* The gradient of a float mask source m: dS summed over m's broadcast
 * dims (the scores' layout of mask_heads), back to m's shape. */
static rlx_tensor *mask_grad(ir_node *n, rlx_tensor *ds, ir_node *m)
{
    rlx_tensor *mt = mask_heads(n, m);
    if (!ds || !mt) /* out of memory: the error is recorded */
        return NULL;
    ir_node *dn = ts_node(ds), *mh = ts_node(mt);
    int axes[5], na = 0;
    for (int i = 0; i < dn->rank; i++)
        if (mh->shape[i] == 1 && dn->shape[i] != 1)
            axes[na++] = i;
    return rlx_reshape(na ? rlx_sum(ds, axes, na, true) : ds, m->rank, m->shape);
}

/* attention, O = P V per head with P = softmax(scale q k^T + mask, masked):
 * the forward kept no P, so it is rebuilt here. dV = P^T G, dP = G V^T,
 * dS = P (dP - rowsum(G O)) (rowsum(dP P) = rowsum(G O) as O = P V),
 * dQ = scale dS K, dK = scale dS^T Q, d(float mask) = dS; kv gradients
 * sum over their group of query heads. Only differentiable calls: the
 * gradient of a gradient goes through this rule again. */
static void vjp_attention_kv(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx);

/* The composite rule over n's attrs with q, k, v, the forward output o, the
 * cotangent g and the mask source mk (NULL: none); dx[0..3] as need. */
static void attn_bwd_ops(ir_node *n, ir_node *q, ir_node *k, ir_node *v, rlx_tensor *o, rlx_tensor *g, ir_node *mk,
                         const bool *need, rlx_tensor **dx)
{
    int ax = -1;
    rlx_tensor *qh = q_heads(n, T(q)), *kh = kv_heads(n, T(k));
    rlx_tensor *gh = q_heads(n, g), *p = attn_probs(n, qh, kh, mk);
    bool dmask = mk && need[3] && mk->dtype != RLX_BOOL;
    if (need[2])
        dx[2] = kv_merge(n, rlx_matmul(rlx_t(p), gh), v);
    if (need[0] || need[1] || dmask) {
        rlx_tensor *dp = rlx_matmul_t(gh, kv_heads(n, T(v)));
        rlx_tensor *rs = rlx_sum(rlx_mul(gh, q_heads(n, o)), &ax, 1, true);
        rlx_tensor *du = rlx_mul(p, rlx_sub(dp, rs)), *ds = rlx_mul_s(du, n->attr.attn.scale);
        dx[0] = need[0] ? q_merge(n, rlx_matmul(ds, kh), q) : NULL;
        dx[1] = need[1] ? kv_merge(n, rlx_matmul(rlx_t(ds), qh), k) : NULL;
        dx[3] = dmask ? mask_grad(n, du, mk) : NULL;
    }
}

/* Keys at or above which knob attention_bwd 2 (auto) takes the kernel.
 * Measured (rlx-bench-w10 --attn-bwd, 1 thread, CPU time of the step,
 * kernel / composite): W10b (seq 128) 0.965-0.971, W10a (seq 64)
 * 0.955-1.02 over three runs (within the noise: not taken). */
enum { ATTN_BWD_MIN_KEYS = 128 };

/* The ATTENTION_BWD node over n (q, k, v, n, g[, mask]) and its three
 * pieces; NULL where it does not cover n (the composite then runs): a
 * float dtype, static lengths, no gradient wanted for a float mask, knob
 * attention_bwd 1, or 2 with at least ATTN_BWD_MIN_KEYS keys (any for f16/bf16). */
static ir_node *attn_bwd_node(ir_node *n, rlx_tensor *g, const bool *need)
{
    ir_node *q = n->src[0], *k = n->src[1], *mk = n->nsrc == 4 ? n->src[3] : NULL;
    long knob = knob_get(KNOB_ATTENTION_BWD);
    /* f16/bf16 take the kernel at any length: it computes in f32, the ops would round each step */
    bool half = n->dtype == RLX_F16 || n->dtype == RLX_BF16;
    if (!ir_dtype_is_float(n->dtype) || q->shape[0] < 0 || q->shape[1] < 0 || k->shape[1] < 0 ||
        (mk && mk->dtype != RLX_BOOL && need[3]) || knob == 0 ||
        (knob == 2 && !half && k->shape[1] < ATTN_BWD_MIN_KEYS))
        return NULL;
    ir_node *src[6] = {q, k, n->src[2], n, ts_node(g), mk};
    return ts_make_lib(FN, IR_OP_ATTENTION_BWD, mk ? 6 : 5, src, &n->attr, n->dtype);
}

/* f16/bf16 attention that the kernel does not cover (knob attention_bwd 0,
 * a float mask's gradient wanted, dynamic lengths): the composite on f32
 * copies, as every op of it would round in the half dtype, with the
 * forward output recomputed in f32 (rowsum(g o) must be rowsum(dP P) to
 * f32 accuracy: a rounded o leaves noise where gradients cancel); each
 * gradient rounded once. */
static void attn_bwd_ops_f32(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    ir_node *w[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < n->nsrc; i++)
        if (!(w[i] = n->src[i]->dtype == RLX_BOOL ? n->src[i] : ts_node(rlx_cast(T(n->src[i]), RLX_F32))))
            return; /* out of memory: the error is recorded */
    rlx_tensor *o = ts_wrap(ts_make_lib(FN, IR_OP_ATTENTION, n->nsrc, w, &n->attr, RLX_F32));
    if (!o)
        return;
    attn_bwd_ops(n, w[0], w[1], w[2], o, rlx_cast(g, RLX_F32), w[3], need, dx);
    for (int i = 0; i < n->nsrc; i++)
        if (dx[i])
            dx[i] = rlx_cast(dx[i], n->src[i]->dtype);
}

static void vjp_attention(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    if (n->nsrc >= 5) { /* keys and values in two pieces */
        vjp_attention_kv(n, g, need, dx);
        return;
    }
    ir_node *pk = attn_bwd_node(n, g, need);
    if (!pk && (n->dtype == RLX_F16 || n->dtype == RLX_BF16)) {
        attn_bwd_ops_f32(n, g, need, dx);
        return;
    }
    if (!pk) {
        attn_bwd_ops(n, n->src[0], n->src[1], n->src[2], T(n), g, n->nsrc == 4 ? n->src[3] : NULL, need, dx);
        return;
    }
    rlx_tensor *packed = ts_wrap(pk);
    int64_t off = 0;
    for (int i = 0; i < 3; i++) { /* dq, dk, dv: contiguous pieces */
        ir_node *s = n->src[i];
        int64_t len = s->shape[0] * s->shape[1] * s->shape[2];
        if (need[i])
            dx[i] = rlx_reshape(rlx_narrow(packed, 0, off, len), s->rank, s->shape);
        off += len;
    }
}

/* ATTENTION_BWD(q, k, v, o, g[, mask]): its gradient is the gradient of
 * the composite rule it stands for (attn_bwd_ops, packed the same way),
 * taken by rlx_grad, so second derivatives of attention work as they did
 * with the composite. The composite reads stop_gradient copies of the
 * sources: o is a function of q, k, v, and the sweep here must not follow
 * that path (the outer one does, through o's own cotangent). */
static void vjp_attention_bwd(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    rlx_tensor *x[6] = {NULL, NULL, NULL, NULL, NULL, NULL}, *wrt[6], *pieces[3];
    for (int i = 0; i < n->nsrc; i++)
        if (!(x[i] = n->src[i]->dtype == RLX_BOOL ? T(n->src[i]) : rlx_stop_gradient(T(n->src[i]))))
            return;
    bool all[4] = {true, true, true, false};
    rlx_tensor *d3[4] = {NULL, NULL, NULL, NULL};
    attn_bwd_ops(n, ts_node(x[0]), ts_node(x[1]), ts_node(x[2]), x[3], x[4], x[5] ? ts_node(x[5]) : NULL, all, d3);
    for (int i = 0; i < 3; i++) {
        ir_node *s = n->src[i];
        int64_t len = s->shape[0] * s->shape[1] * s->shape[2];
        pieces[i] = rlx_reshape(d3[i], 1, &len);
    }
    rlx_tensor *loss = rlx_sum_all(rlx_mul(rlx_cat(pieces, 3, 0), g));
    int nw = 0, idx[6];
    for (int i = 0; i < n->nsrc; i++)
        if (need[i]) {
            idx[nw] = i;
            wrt[nw++] = x[i];
        }
    rlx_tensor *got[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    if (!loss || !nw || rlx_grad(loss, wrt, nw, got) != RLX_OK)
        return;
    for (int i = 0; i < nw; i++)
        dx[idx[i]] = got[i];
}

/* attention over q, k, v, k2, v2[, mask] (rlx_attention_kv): the rule of
 * the one-piece node over cat(k, k2) and cat(v, v2), whose key and value
 * gradients are split back into the two pieces (the first piece's length
 * may be dynamic: all rows but the last Sn). */
static void vjp_attention_kv(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    const ir_attrs *a = &n->attr;
    int64_t l = n->src[1]->shape[1], sn = n->src[3]->shape[1];
    rlx_tensor *ks[2] = {T(n->src[1]), T(n->src[3])}, *vs[2] = {T(n->src[2]), T(n->src[4])};
    rlx_attention_opts o = {.num_kv_heads = a->attn.kv_heads, .mask = (rlx_mask)a->attn.mask,
                            .window = a->attn.window, .attn_mask = n->nsrc == 6 ? T(n->src[5]) : NULL,
                            .scale = a->attn.scale};
    rlx_tensor *kv[2] = {rlx_cat(ks, 2, 1), rlx_cat(vs, 2, 1)};
    rlx_tensor *y = rlx_attention_ex(T(n->src[0]), kv[0], kv[1], a->attn.heads, a->attn.head_dim, &o);
    if (!y) /* (the error is recorded) */
        return;
    bool need1[4] = {need[0], need[1] || need[3], need[2] || need[4], n->nsrc == 6 && need[5]};
    rlx_tensor *d1[4] = {NULL, NULL, NULL, NULL};
    vjp_attention(ts_node(y), g, need1, d1);
    dx[0] = d1[0];
    for (int s = 1; s <= 2; s++) { /* k, then v */
        if (!d1[s])
            continue;
        if (l < 0 && sn < 0) { /* both dynamic: where the bound pieces split */
            dx[s] = need[s] ? cat_piece(d1[s], ts_node(kv[s - 1]), 0) : NULL;
            dx[s + 2] = need[s + 2] ? cat_piece(d1[s], ts_node(kv[s - 1]), 1) : NULL;
            continue;
        }
        if (need[s]) /* the first l rows, or all but the last sn */
            dx[s] = l >= 0 ? rlx_narrow(d1[s], 1, 0, l) : sn ? rlx_slice(d1[s], 1, 0, -sn, 1) : d1[s];
        if (need[s + 2])
            dx[s + 2] = sn >= 0 ? rlx_narrow(d1[s], 1, l >= 0 ? l : -sn, sn) : rlx_slice(d1[s], 1, l, RLX_END, 1);
    }
    if (n->nsrc == 6)
        dx[5] = d1[3];
}

static void vjp_mxquant(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    dx[0] = as_dtype(g, n->src[0]); /* straight-through */
}

/* y = x . W^T, W = (wq - zp) * scale dequantized in y's dtype: dx = g . W. */
static void vjp_qmatmul(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    ir_node *s = n->src[2];
    dx[2] = need[2] ? rlx_zeros(s->dtype, s->rank, s->shape) : NULL;
    if (!need[0])
        return;
    rlx_tensor *w = rlx_cast(T(n->src[1]), n->dtype);
    if (n->nsrc > 3)
        w = rlx_sub(w, rlx_unsqueeze(rlx_cast(T(n->src[3]), n->dtype), 1));
    dx[0] = rlx_matmul(g, rlx_mul(w, rlx_unsqueeze(T(s), 1)));
}

/* ------------------------------------------------------ complex rules */

/* Complex (c64, c128) nodes, PyTorch's convention: the cotangent of a
 * complex z is dL/dRe(z) + i dL/dIm(z) for the real loss L. A holomorphic
 * f passes g * conj(f'(z)); the linear rules (add, sub, neg, sum,
 * movement, where, cast) are the real ones unchanged. */
static void cvjp_exp(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    dx[0] = rlx_mul(g, rlx_conj(T(n)));
}
static void cvjp_mul(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    dx[0] = need[0] ? rlx_mul(g, rlx_conj(T(n->src[1]))) : NULL;
    dx[1] = need[1] ? rlx_mul(g, rlx_conj(T(n->src[0]))) : NULL;
}
static void cvjp_div(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    rlx_tensor *cb = rlx_conj(T(n->src[1]));
    dx[0] = need[0] ? rlx_div(g, cb) : NULL;
    dx[1] = need[1] ? rlx_neg(rlx_div(rlx_mul(g, rlx_conj(T(n))), cb)) : NULL; /* d(a/b)/db = -(a/b)/b */
}
static void cvjp_matmul(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    rlx_tensor *a = T(n->src[0]), *b = T(n->src[1]);
    dx[0] = need[0] ? rlx_matmul_t(g, rlx_conj(b)) : NULL; /* g B^H */
    dx[1] = need[1] ? rlx_matmul(rlx_t(rlx_conj(a)), g) : NULL; /* A^H g */
}
/* ABS of complex z is (|z|, 0): only Re(g) reaches |z|, whose gradient is
 * z/|z| (0 at 0, as PyTorch: z / 1 there). */
static void cvjp_abs(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    rlx_tensor *z = T(n->src[0]), *a = rlx_abs(z);
    rlx_tensor *safe = rlx_where(rlx_eq_s(a, 0), rlx_ones_like(a), a);
    dx[0] = rlx_mul(rlx_cast(rlx_real(g), n->dtype), rlx_div(z, rlx_cast(safe, n->dtype)));
}
static void cvjp_conj(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)n;
    (void)need;
    dx[0] = rlx_conj(g);
}
/* IMAG: z -> (Im z, 0), so dL/dIm(z) = Re(g) and dL/dRe(z) = 0. */
static void cvjp_imag(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    rlx_tensor *re = rlx_real(g);
    dx[0] = as_dtype(rlx_complex(rlx_zeros_like(re), re), n->src[0]);
}
/* GATHER is linear but its transpose (scatter_add) is real: each part of
 * g goes back through the real rule, applied to a gather of x's real part
 * (same index, axis and shape), and the parts are joined. */
static void cvjp_gather(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    ir_node *src[2] = {ts_node(rlx_real(T(n->src[0]))), n->src[1]};
    rlx_tensor *rn = src[0] ? ts_wrap(ts_make(FN, IR_OP_GATHER, 2, src, &n->attr)) : NULL;
    if (!rn)
        return;
    const bool only_x[2] = {true, false};
    rlx_tensor *re[2] = {NULL, NULL}, *im[2] = {NULL, NULL};
    vjp_gather(ts_node(rn), rlx_real(g), only_x, re);
    vjp_gather(ts_node(rn), rlx_imag(g), only_x, im);
    dx[0] = re[0] && im[0] ? as_dtype(rlx_complex(re[0], im[0]), n->src[0]) : NULL;
}
/* A cast's cotangent goes back to the source's dtype: Re(g) for a real
 * source of a complex node (rlx_real: implicit casts refuse complex). */
static void cvjp_cast(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    (void)need;
    bool drop = ir_dtype_is_complex(n->dtype) && !ir_dtype_is_complex(n->src[0]->dtype);
    dx[0] = as_dtype(drop ? rlx_real(g) : g, n->src[0]);
}
/* COMPLEX: (a, b) -> Re(a) + i Re(b). */
static void cvjp_complex(ir_node *n, rlx_tensor *g, const bool *need, rlx_tensor **dx)
{
    dx[0] = need[0] ? rlx_cast(rlx_real(g), n->src[0]->dtype) : NULL;
    dx[1] = need[1] ? rlx_cast(rlx_imag(g), n->src[1]->dtype) : NULL;
}

/* The rules of nodes that are complex or have a complex source; an empty
 * row is an op whose complex gradient is not written (rlx_grad refuses it). */
#define CRULE(op, fn) [op] = {AD_RULE, fn}
static const ad_vjp cvjps[IR_OP_COUNT] = {
    CRULE(IR_OP_ADD, vjp_add),     CRULE(IR_OP_SUB, vjp_sub),         CRULE(IR_OP_NEG, vjp_neg),
    CRULE(IR_OP_SUM, vjp_sum),     CRULE(IR_OP_WHERE, vjp_where),     CRULE(IR_OP_CAST, cvjp_cast),
    CRULE(IR_OP_RESHAPE, vjp_reshape), CRULE(IR_OP_PERMUTE, vjp_permute), CRULE(IR_OP_EXPAND, vjp_expand),
    CRULE(IR_OP_PAD, vjp_pad),     CRULE(IR_OP_SLICE, vjp_slice),     CRULE(IR_OP_CAT, vjp_cat),
    CRULE(IR_OP_CONTIGUOUS, vjp_identity), CRULE(IR_OP_GATHER, cvjp_gather),
    CRULE(IR_OP_EXP, cvjp_exp),    CRULE(IR_OP_MUL, cvjp_mul),        CRULE(IR_OP_DIV, cvjp_div),
    CRULE(IR_OP_MATMUL, cvjp_matmul), CRULE(IR_OP_ABS, cvjp_abs),     CRULE(IR_OP_CONJ, cvjp_conj),
    CRULE(IR_OP_IMAG, cvjp_imag),  CRULE(IR_OP_COMPLEX, cvjp_complex),
};
#undef CRULE

const ad_vjp *ad_vjp_of(const ir_node *n)
{
    const ad_vjp *row = &ad_vjps[n->op];
    bool cx = ir_dtype_is_complex(n->dtype);
    for (int k = 0; k < n->nsrc && !cx; k++)
        cx = ir_dtype_is_complex(n->src[k]->dtype);
    if (!cx || row->kind == AD_LEAF || row->kind == AD_ZERO)
        return row;
    return cvjps[n->op].kind == AD_RULE ? &cvjps[n->op] : NULL;
}

/* ---------------------------------------------------------------- table */

#define LEAF(op) [op] = {AD_LEAF, NULL}
#define ZERO(op) [op] = {AD_ZERO, NULL}
#define RULE(op, fn) [op] = {AD_RULE, fn}

const ad_vjp ad_vjps[IR_OP_COUNT] = {
    LEAF(IR_OP_BUFFER),
    LEAF(IR_OP_CONST),
    LEAF(IR_OP_IOTA),
    LEAF(IR_OP_RAND),
    LEAF(IR_OP_INPUT),

    RULE(IR_OP_EXP, vjp_exp),
    RULE(IR_OP_EXPM1, vjp_expm1),
    RULE(IR_OP_LOG, vjp_log),
    RULE(IR_OP_LOG1P, vjp_log1p),
    RULE(IR_OP_SIN, vjp_sin),
    RULE(IR_OP_COS, vjp_cos),
    RULE(IR_OP_TAN, vjp_tan),
    RULE(IR_OP_ATAN, vjp_atan),
    RULE(IR_OP_SQRT, vjp_sqrt),
    RULE(IR_OP_RSQRT, vjp_rsqrt),
    RULE(IR_OP_RECIP, vjp_recip),
    RULE(IR_OP_TANH, vjp_tanh),
    RULE(IR_OP_ERF, vjp_erf),
    RULE(IR_OP_SIGMOID, vjp_sigmoid),

    RULE(IR_OP_NEG, vjp_neg),
    RULE(IR_OP_ABS, vjp_abs),
    ZERO(IR_OP_SIGN),
    RULE(IR_OP_ROUND, vjp_identity), /* straight-through */
    ZERO(IR_OP_FLOOR),
    ZERO(IR_OP_CEIL),
    ZERO(IR_OP_NOT),
    RULE(IR_OP_CAST, vjp_cast), /* to or from a non-float: no gradient (dtype rule of the driver) */
    RULE(IR_OP_CONTIGUOUS, vjp_identity),
    ZERO(IR_OP_STOP_GRAD),

    RULE(IR_OP_ADD, vjp_add),
    RULE(IR_OP_SUB, vjp_sub),
    RULE(IR_OP_MUL, vjp_mul),
    RULE(IR_OP_DIV, vjp_div),
    RULE(IR_OP_POW, vjp_pow),
    RULE(IR_OP_MAX, vjp_max),
    RULE(IR_OP_MIN, vjp_min),
    RULE(IR_OP_ATAN2, vjp_atan2),
    RULE(IR_OP_REM, vjp_rem),
    ZERO(IR_OP_EQ),
    ZERO(IR_OP_NE),
    ZERO(IR_OP_LT),
    ZERO(IR_OP_LE),
    ZERO(IR_OP_GT),
    ZERO(IR_OP_GE),
    ZERO(IR_OP_AND),
    ZERO(IR_OP_OR),

    RULE(IR_OP_WHERE, vjp_where),

    RULE(IR_OP_SUM, vjp_sum),
    RULE(IR_OP_PROD, vjp_prod),
    RULE(IR_OP_RMAX, vjp_extreme),
    RULE(IR_OP_RMIN, vjp_extreme),
    ZERO(IR_OP_ARGMAX),
    ZERO(IR_OP_ARGMIN),

    RULE(IR_OP_RESHAPE, vjp_reshape),
    RULE(IR_OP_PERMUTE, vjp_permute),
    RULE(IR_OP_EXPAND, vjp_expand),
    RULE(IR_OP_PAD, vjp_pad),
    RULE(IR_OP_SLICE, vjp_slice),

    RULE(IR_OP_CAT, vjp_cat),
    RULE(IR_OP_GATHER, vjp_gather),
    RULE(IR_OP_SCATTER, vjp_scatter),
    RULE(IR_OP_CUMSUM, vjp_cumsum),

    RULE(IR_OP_MATMUL, vjp_matmul),
    RULE(IR_OP_SOLVE, vjp_solve),
    RULE(IR_OP_FFT, vjp_fft),
    RULE(IR_OP_CONV2D, vjp_conv2d),
    RULE(IR_OP_POOL2D, vjp_pool2d),
    RULE(IR_OP_MXQUANT, vjp_mxquant),
    RULE(IR_OP_ATTENTION, vjp_attention),
    RULE(IR_OP_ATTENTION_BWD, vjp_attention_bwd),

    ZERO(IR_OP_ARGSORT),     /* integer positions; sort's values get theirs through GATHER */
    ZERO(IR_OP_MULTINOMIAL), /* integer samples */
    ZERO(IR_OP_RAND_SEEDED), /* no gradient for the integer seed */
    RULE(IR_OP_CONJ, cvjp_conj), /* complex only (ad_vjp_of) */
    RULE(IR_OP_IMAG, cvjp_imag),
    RULE(IR_OP_COMPLEX, cvjp_complex),
    RULE(IR_OP_QMATMUL, vjp_qmatmul),
};

#undef LEAF
#undef ZERO
#undef RULE
