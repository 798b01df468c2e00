/*
 * movement.c — views: reshape, transpose, broadcast, squeeze, narrow,
 * slice, select, split, chunk. None copies payload; each is one movement
 * node (RESHAPE, PERMUTE, EXPAND, SLICE) that later folds into the index
 * map of whatever reads it.
 */
#include <string.h>

#include "tensor/ts.h"

bool ts_reshape_names_symbol(const ir_node *n)
{
    for (int i = 0; n->op == IR_OP_RESHAPE && i < n->attr.shape.rank; i++)
        if (n->attr.shape.dims[i] <= -2)
            return true;
    return false;
}

bool ts_const_true(const ir_node *n)
{
    while (n->op == IR_OP_RESHAPE || n->op == IR_OP_EXPAND)
        n = n->src[0];
    return n->op == IR_OP_CONST && n->attr.cst.value != 0;
}

/* A reshape of where(true, g, reshape(y)) with dynamic dims: a gradient
 * going back through a reshape, which a program resolves to y's bound
 * dims (vjp.c reshape_to_bound; program.c reshape_dims). */
static bool reshape_to_bound(const ir_node *x)
{
    return x->op == IR_OP_RESHAPE && ir_node_numel(x) < 0 && x->src[0]->op == IR_OP_WHERE &&
           ts_const_true(x->src[0]->src[0]) && x->src[0]->src[2]->op == IR_OP_RESHAPE;
}

/* Reshapes that name symbols or go back to bound dims stay: folded into
 * the reshape over them, what they resolve from would be lost (a
 * flattened [B*S, D] reshaped to [-1, -1, H, Dh] reads two ways). */
ir_node *ts_reshape_base(const ir_node *x)
{
    return x->op == IR_OP_RESHAPE && !ts_reshape_names_symbol(x) && !reshape_to_bound(x) ? x->src[0]
                                                                                          : (ir_node *)(uintptr_t)x;
}

/* The symbol of each dynamic dim of n where tracing knows it (an input's
 * or a reshape's that names it), 0 elsewhere; false when a dynamic dim
 * has none. */
static bool dim_symbols(const ir_node *n, int64_t *sym)
{
    bool all = true;
    for (int d = 0; d < n->rank; d++) {
        sym[d] = n->shape[d] >= 0 ? 0
                 : n->op == IR_OP_INPUT ? n->attr.input.sym[d]
                 : n->op == IR_OP_RESHAPE && n->attr.shape.dims[d] <= -2 ? n->attr.shape.dims[d]
                                                                       : 0;
        all &= n->shape[d] >= 0 || sym[d] <= -2;
    }
    return all;
}

/* The count check tracing can make for a reshape of x to dims naming
 * symbols (infer: the place of a -1, or -1): when every dynamic dim of x
 * is a known symbol and the target names each of them (and no other), the
 * symbols cancel and the static parts must agree (*sx, *st: their counts;
 * around a -1, divide). Otherwise the count is checked when bound. */
static bool symbol_count_ok(const ir_node *x, int rank, const int64_t *dims, int infer, int64_t *sx, int64_t *st)
{
    int64_t xs[IR_MAX_RANK];
    bool used[IR_MAX_RANK] = {false};
    *sx = *st = 1;
    if (!dim_symbols(x, xs))
        return true;
    for (int d = 0; d < x->rank; d++)
        *sx *= x->shape[d] >= 0 ? x->shape[d] : 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] >= 0)
            *st *= dims[i];
        if (dims[i] >= -1)
            continue;
        int d = 0;
        while (d < x->rank && (used[d] || xs[d] != dims[i]))
            d++;
        if (d == x->rank)
            return true; /* a symbol x does not carry */
        used[d] = true;
    }
    for (int d = 0; d < x->rank; d++)
        if (x->shape[d] < 0 && !used[d])
            return true;
    return infer < 0 ? *sx == *st : *st > 0 && *sx % *st == 0;
}

rlx_tensor *rlx_reshape(rlx_tensor *x, int rank, const int64_t *shape)
{
    const char *fn = "rlx_reshape";
    if (ts_null(fn, "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    if (rank > 0 && !shape) {
        ts_error(RLX_E_ARG, fn, "shape is NULL for rank %d", rank);
        return NULL;
    }
    if (rank < 0 || rank > RLX_MAX_RANK) {
        ts_error(RLX_E_SHAPE, fn, "rank %d outside 0..%d", rank, RLX_MAX_RANK);
        return NULL;
    }
    int64_t dims[IR_MAX_RANK], known = 1;
    int infer = -1, more = 0, sym = -1;
    bool dynamic = ir_node_numel(n) < 0;
    for (int i = 0; i < rank; i++) {
        dims[i] = shape[i];
        if (shape[i] == -1 && (infer < 0 || dynamic)) { /* a dynamic x: several (rlx_dim's -1s) */
            more += infer >= 0;
            infer = infer < 0 ? i : infer;
            continue;
        }
        if (shape[i] <= -2 && dynamic) { /* a symbol (rlx_input): its bound size */
            sym = i;
            continue;
        }
        if (shape[i] <= -2) {
            ts_error(RLX_E_SHAPE, fn, "shape %s names symbol %lld (dim %d), but input %s has no dynamic dim: "
                     "nothing binds it", ts_dims_str(rank, shape), (long long)shape[i], i, ts_shape_str(n));
            return NULL;
        }
        if (shape[i] < 0) {
            ts_error(RLX_E_SHAPE, fn, "shape %s: dim %d is %lld (one -1 allowed)", ts_dims_str(rank, shape), i,
                     (long long)shape[i]);
            return NULL;
        }
        if (shape[i] && known > INT64_MAX / shape[i]) {
            ts_error(RLX_E_SHAPE, fn, "shape %s overflows", ts_dims_str(rank, shape));
            return NULL;
        }
        known *= shape[i];
    }
    int64_t numel = ir_node_numel(n);
    if (sym >= 0) { /* symbols name their dims; at most one -1 is left to the count */
        int64_t sx, st;
        if (more) {
            ts_error(RLX_E_UNSUPPORTED, fn, "shape %s for input %s names symbols and has several -1s "
                     "(at most one, inferred from the count)", ts_dims_str(rank, shape), ts_shape_str(n));
            return NULL;
        }
        if (infer >= 0 && known == 0) {
            ts_error(RLX_E_SHAPE, fn, "cannot infer -1 in %s for input %s: the other static dims have 0 elements",
                     ts_dims_str(rank, shape), ts_shape_str(n));
            return NULL;
        }
        if (!symbol_count_ok(n, rank, dims, infer, &sx, &st)) {
            ts_error(RLX_E_SHAPE, fn, "shape %s does not fit input %s: with the symbols they share, %lld static "
                     "elements%s %lld", ts_dims_str(rank, shape), ts_shape_str(n), (long long)st,
                     infer >= 0 ? " do not divide" : " against", (long long)sx);
            return NULL;
        }
        return ts_wrap(ts_reshape_node(fn, n, rank, dims));
    }
    if (numel < 0) { /* a dynamic input: the -1 stays dynamic, a program infers it */
        if (infer < 0) {
            ts_error(RLX_E_SHAPE, fn, "shape %s for input %s with a dynamic dim needs a -1", ts_dims_str(rank, shape),
                     ts_shape_str(n));
            return NULL;
        }
        int64_t k;
        if (!more && known == 0 && !ts_reshape_rule(n, rank, dims, &k)) {
            /* a -1 beside static dims of 0 elements is read from the count
             * only as the dynamic dims kept in place; else a run could not
             * infer it ([0, 4, S] -> [0, -1]) */
            ts_error(RLX_E_SHAPE, fn, "cannot infer -1 in %s for input %s: the other static dims have 0 elements",
                     ts_dims_str(rank, shape), ts_shape_str(n));
            return NULL;
        }
        if (more && !ts_reshape_rule(n, rank, dims, &k)) {
            ts_error(RLX_E_UNSUPPORTED, fn,
                     "shape %s for input %s is ambiguous: its -1s are not the input's dynamic dims kept in place "
                     "around one that is merged or split with static ones", ts_dims_str(rank, shape), ts_shape_str(n));
            return NULL;
        }
        return ts_wrap(ts_reshape_node(fn, n, rank, dims));
    }
    if (infer >= 0) {
        if (known == 0 || numel % known) {
            ts_error(RLX_E_SHAPE, fn, "cannot infer -1 in %s for input %s of %lld elements",
                     ts_dims_str(rank, shape), ts_shape_str(n), (long long)numel);
            return NULL;
        }
        dims[infer] = numel / known;
        known = numel;
    }
    if (known != numel) {
        ts_error(RLX_E_SHAPE, fn, "shape %s has %lld elements, input %s has %lld", ts_dims_str(rank, shape),
                 (long long)known, ts_shape_str(n), (long long)numel);
        return NULL;
    }
    return ts_wrap(ts_reshape_node(fn, n, rank, dims));
}

static ir_node *permute_node(const char *fn, ir_node *n, const int *perm)
{
    bool identity = true;
    for (int i = 0; i < n->rank; i++)
        identity &= perm[i] == i;
    if (identity)
        return ir_retain(n);
    ir_attrs a;
    memset(&a, 0, sizeof a);
    memcpy(a.perm.perm, perm, (size_t)n->rank * sizeof *perm);
    return ts_make(fn, IR_OP_PERMUTE, 1, &n, &a);
}

rlx_tensor *rlx_transpose(rlx_tensor *x, int nperm, const int *perm)
{
    const char *fn = "rlx_transpose";
    if (ts_null(fn, "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    int p[IR_MAX_RANK];
    if (!perm && nperm == 0) {
        for (int i = 0; i < n->rank; i++)
            p[i] = n->rank - 1 - i;
        return ts_wrap(permute_node(fn, n, p));
    }
    if (!perm || nperm != n->rank) {
        ts_error(RLX_E_ARG, fn, "permutation of %d axes for %s of rank %d", perm ? nperm : 0, ts_shape_str(n), n->rank);
        return NULL;
    }
    unsigned seen = 0;
    for (int i = 0; i < nperm; i++) {
        if (perm[i] < -n->rank || perm[i] >= n->rank) {
            ts_error(RLX_E_ARG, fn, "axis %d out of range for rank %d", perm[i], n->rank);
            return NULL;
        }
        p[i] = perm[i] < 0 ? perm[i] + n->rank : perm[i];
        if (seen >> p[i] & 1) {
            ts_error(RLX_E_ARG, fn, "axis %d repeated in the permutation", perm[i]);
            return NULL;
        }
        seen |= 1u << p[i];
    }
    return ts_wrap(permute_node(fn, n, p));
}

rlx_tensor *rlx_t(rlx_tensor *x)
{
    if (ts_null("rlx_t", "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    if (n->rank < 2)
        return rlx_retain(x);
    int p[IR_MAX_RANK];
    for (int i = 0; i < n->rank; i++)
        p[i] = i;
    p[n->rank - 2] = n->rank - 1;
    p[n->rank - 1] = n->rank - 2;
    return ts_wrap(permute_node("rlx_t", n, p));
}

rlx_tensor *rlx_broadcast_to(rlx_tensor *x, int rank, const int64_t *shape)
{
    const char *fn = "rlx_broadcast_to";
    if (ts_null(fn, "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    if (!ts_check_shape(fn, n->dtype, rank, shape, false))
        return NULL;
    bool ok = n->rank <= rank;
    for (int i = 0; ok && i < n->rank; i++) {
        int64_t d = n->shape[n->rank - 1 - i], t = shape[rank - 1 - i];
        ok = d == t || d == 1;
    }
    if (!ok) {
        ts_error(RLX_E_SHAPE, fn, "%s does not broadcast to %s", ts_shape_str(n), ts_dims_str(rank, shape));
        return NULL;
    }
    return ts_wrap(ts_expand_node(fn, n, rank, shape));
}

rlx_tensor *rlx_flatten(rlx_tensor *x)
{
    if (ts_null("rlx_flatten", "x", x))
        return NULL;
    int64_t n = ir_node_numel(ts_node(x));
    return ts_wrap(ts_reshape_node("rlx_flatten", ts_node(x), 1, &n));
}

rlx_tensor *rlx_unsqueeze(rlx_tensor *x, int axis)
{
    const char *fn = "rlx_unsqueeze";
    if (ts_null(fn, "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    if (axis < -n->rank - 1 || axis > n->rank || n->rank == RLX_MAX_RANK) {
        ts_error(RLX_E_ARG, fn, "axis %d out of range for %s (rank %d)", axis, ts_shape_str(n), n->rank);
        return NULL;
    }
    int ax = axis < 0 ? axis + n->rank + 1 : axis;
    int64_t dims[IR_MAX_RANK];
    for (int i = 0, k = 0; i <= n->rank; i++)
        dims[i] = i == ax ? 1 : n->shape[k++];
    return ts_wrap(ts_reshape_node(fn, n, n->rank + 1, dims));
}

rlx_tensor *rlx_squeeze(rlx_tensor *x, int axis)
{
    const char *fn = "rlx_squeeze";
    int ax;
    ir_node *n = ts_node_axis(fn, x, axis, &ax);
    if (!n)
        return NULL;
    if (n->shape[ax] != 1) {
        ts_error(RLX_E_SHAPE, fn, "axis %d of %s has size %lld, not 1", axis, ts_shape_str(n), (long long)n->shape[ax]);
        return NULL;
    }
    int64_t dims[IR_MAX_RANK];
    for (int i = 0, k = 0; i < n->rank; i++)
        if (i != ax)
            dims[k++] = n->shape[i];
    return ts_wrap(ts_reshape_node(fn, n, n->rank - 1, dims));
}

rlx_tensor *rlx_squeeze_all(rlx_tensor *x)
{
    if (ts_null("rlx_squeeze_all", "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    int64_t dims[IR_MAX_RANK];
    int k = 0;
    for (int i = 0; i < n->rank; i++)
        if (n->shape[i] != 1)
            dims[k++] = n->shape[i];
    return ts_wrap(ts_reshape_node("rlx_squeeze_all", n, k, dims));
}

/* A SLICE node over one axis; the other axes are taken whole. */
static ir_node *slice_axis(const char *fn, ir_node *n, int ax, int64_t start, int64_t step, int64_t len)
{
    if (start == 0 && step == 1 && len == n->shape[ax])
        return ir_retain(n);
    ir_attrs a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < n->rank; i++) {
        a.slice.step[i] = 1;
        a.slice.len[i] = n->shape[i];
    }
    if (n->shape[ax] < 0) { /* relative to the size (ts.h): as given */
        a.slice.start[ax] = start;
        a.slice.step[ax] = step;
        a.slice.len[ax] = len;
        return ts_make(fn, IR_OP_SLICE, 1, &n, &a);
    }
    a.slice.start[ax] = len ? start : 0;
    a.slice.step[ax] = len > 1 ? step : 1; /* keeps stride arithmetic far from overflow */
    a.slice.len[ax] = len;
    return ts_make(fn, IR_OP_SLICE, 1, &n, &a);
}

/* An index of a dynamic axis (ts.h), Python's clamped to +-TS_DYN_IX
 * (beyond any size, so it clamps the same). */
static int64_t dyn_ix(int64_t i)
{
    return i > TS_DYN_IX ? TS_DYN_IX : i < -TS_DYN_IX ? -TS_DYN_IX : i;
}

/* The range start:stop (TS_DYN_* indices) of a dynamic axis. */
ir_node *ts_dyn_range(const char *fn, ir_node *n, int ax, int64_t start, int64_t stop, int64_t step)
{
    return slice_axis(fn, n, ax, start, step, ts_dyn_len(stop));
}

/* Python's slice.indices() for a tagged or Python index ix of an axis of
 * size dim (ts.h); tagged ones come out in [0, dim]. */
static int64_t dyn_index(int64_t dim, int64_t ix)
{
    if (ix >= TS_DYN_REST && ix < TS_DYN_CHUNK) { /* -1 (no fit) is never a tagged index's value */
        int64_t c = ix - TS_DYN_REST, need = c >> 29 & ((1 << 28) - 1), x = c & ((1 << 29) - 1);
        bool exact = c & TS_DYN_EXACT;
        return dim < need || (exact && dim != need) ? -1 : x >= (1 << 28) ? x - (1 << 28) : dim - x;
    }
    if (ix >= TS_DYN_CHUNK) {
        int64_t c = ix - TS_DYN_CHUNK, i = c >> 31, k = c & 0x7fffffff;
        return i * (dim / k) + (i < dim % k ? i : dim % k);
    }
    if (ix >= TS_DYN_ROLL - TS_DYN_IX) {
        int64_t sh = ix - TS_DYN_ROLL;
        return dim ? dim - ((sh % dim) + dim) % dim : 0;
    }
    return ix;
}

static int64_t slice_indices(int64_t dim, int64_t start, int64_t stop, int64_t step, int64_t *first);

bool ts_dyn_resolve(int64_t dim, int64_t *start, int64_t *step, int64_t *len)
{
    int64_t s = dyn_index(dim, *start), n = *len, first;
    if (n == -1) {
        *start = 0, *step = 1, *len = dim;
        return true;
    }
    bool tagged = *start >= TS_DYN_ROLL - TS_DYN_IX;
    if (tagged && s < 0)
        return false;
    if (n >= 0) { /* a static length: it must fit */
        if (s < 0)
            s += dim;
        if (s < 0 || s > dim || (n > 0 && (s + (n - 1) * *step >= dim || s + (n - 1) * *step < 0)))
            return false;
        first = s;
    } else {
        int64_t stop = ts_dyn_stop(n), e = dyn_index(dim, stop);
        if (stop >= TS_DYN_ROLL - TS_DYN_IX && e < 0)
            return false;
        n = slice_indices(dim, s, e, *step, &first);
    }
    *start = n ? first : 0;
    *step = n > 1 ? *step : 1;
    *len = n;
    return true;
}

rlx_tensor *rlx_narrow(rlx_tensor *x, int axis, int64_t start, int64_t len)
{
    const char *fn = "rlx_narrow";
    int ax;
    ir_node *n = ts_node_axis(fn, x, axis, &ax);
    if (!n)
        return NULL;
    int64_t dim = n->shape[ax], s = start < 0 ? start + dim : start;
    if (dim < 0 && len >= 0) /* checked against the size when it is bound */
        return ts_wrap(slice_axis(fn, n, ax, dyn_ix(start), 1, len));
    if (s < 0 || len < 0 || s > dim || len > dim - s) {
        ts_error(RLX_E_ARG, fn, "start %lld, length %lld out of range for axis %d of %s", (long long)start,
                 (long long)len, axis, ts_shape_str(n));
        return NULL;
    }
    return ts_wrap(slice_axis(fn, n, ax, s, 1, len));
}

/* Python's slice.indices(): clamps start and stop and counts the elements. */
static int64_t slice_indices(int64_t dim, int64_t start, int64_t stop, int64_t step, int64_t *first)
{
    int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? dim : dim - 1;
    if (stop == RLX_END)
        stop = step > 0 ? dim : -1;
    else if (stop < 0)
        stop = stop + dim < lo ? lo : stop + dim;
    else if (stop > hi)
        stop = hi;
    if (start == RLX_END)
        start = step > 0 ? dim : dim - 1;
    else if (start < 0)
        start = start + dim < lo ? lo : start + dim;
    else if (start > hi)
        start = hi;
    *first = start;
    if (step > 0)
        return stop > start ? (stop - start - 1) / step + 1 : 0;
    return start > stop ? (start - stop - 1) / (-step) + 1 : 0;
}

rlx_tensor *rlx_slice(rlx_tensor *x, int axis, int64_t start, int64_t stop, int64_t step)
{
    const char *fn = "rlx_slice";
    int ax;
    ir_node *n = ts_node_axis(fn, x, axis, &ax);
    if (!n)
        return NULL;
    if (step == 0) {
        ts_error(RLX_E_ARG, fn, "step 0 is not allowed");
        return NULL;
    }
    if (step == INT64_MIN)
        step = -INT64_MAX; /* Python clamps the step the same way */
    if (n->shape[ax] < 0) {
        if (start == 0 && stop == RLX_END && step == 1)
            return rlx_retain(x);
        int64_t s0 = start == RLX_END ? TS_DYN_IX : dyn_ix(start);
        int64_t s1 = stop == RLX_END ? (step > 0 ? TS_DYN_IX : -TS_DYN_IX) : dyn_ix(stop);
        return ts_wrap(ts_dyn_range(fn, n, ax, s0, s1, step));
    }
    int64_t first, len = slice_indices(n->shape[ax], start, stop, step, &first);
    return ts_wrap(slice_axis(fn, n, ax, first, step, len));
}

rlx_tensor *rlx_select(rlx_tensor *x, int axis, int64_t index)
{
    const char *fn = "rlx_select";
    int ax;
    ir_node *n = ts_node_axis(fn, x, axis, &ax);
    if (!n)
        return NULL;
    int64_t dim = n->shape[ax], i = index < 0 ? index + dim : index;
    if (dim < 0) /* checked against the size when it is bound */
        i = dyn_ix(index);
    else if (i < 0 || i >= dim) {
        ts_error(RLX_E_ARG, fn, "index %lld out of range for axis %d of %s", (long long)index, axis, ts_shape_str(n));
        return NULL;
    }
    ir_node *s = slice_axis(fn, n, ax, i, 1, 1);
    if (!s)
        return NULL;
    int64_t dims[IR_MAX_RANK];
    for (int d = 0, k = 0; d < n->rank; d++)
        if (d != ax)
            dims[k++] = n->shape[d];
    ir_node *r = ts_reshape_node(fn, s, n->rank - 1, dims);
    ir_release(s);
    return ts_wrap(r);
}

/* The pieces made in place of out[0..n) (as nodes) become handles; when
 * one failed (NULL), the ones before it are released instead and out is
 * cleared. */
static rlx_status split_finish(ir_node **pieces, int n, rlx_tensor **out)
{
    for (int i = 0; i < n; i++) {
        if (pieces[i])
            continue;
        for (int j = 0; j < i; j++) {
            ir_release(pieces[j]);
            out[j] = NULL;
        }
        return rlx_last_status();
    }
    for (int i = 0; i < n; i++)
        out[i] = ts_wrap(pieces[i]);
    return RLX_OK;
}

/* Cuts axis ax of x into n pieces of the given sizes (already checked).
 * Handles are made only once every piece exists, so a failure leaves no
 * handle in a scope and every out[i] NULL. */
static rlx_status split_into(const char *fn, ir_node *x, int ax, int n, const int64_t *sizes, rlx_tensor **out)
{
    ir_node **pieces = (ir_node **)out;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        pieces[i] = slice_axis(fn, x, ax, at, 1, sizes[i]);
        at += sizes[i];
        if (!pieces[i])
            break;
    }
    return split_finish(pieces, n, out);
}

/* rlx_split of a dynamic axis: one size may be -1, the rest of the axis;
 * the pieces after it are placed from the end. Without one, every piece
 * checks that the sizes sum to the bound axis (TS_DYN_EXACT). */
static rlx_status split_dynamic(const char *fn, ir_node *x, int ax, int n, const int64_t *sizes, rlx_tensor **out)
{
    int rest = -1;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] == -1 && rest < 0) {
            rest = i;
        } else if (sizes[i] < 0 || sizes[i] >= (1 << 28) - total) {
            ts_error(RLX_E_SHAPE, fn, "size %lld of piece %d is not valid for axis %d of %s",
                     (long long)sizes[i], i, ax, ts_shape_str(x));
            return RLX_E_SHAPE;
        } else {
            total += sizes[i];
        }
    }
    /* every piece checks that the axis holds the fixed sizes (TS_DYN_REST),
     * so one used alone never overlaps another */
    ir_node **pieces = (ir_node **)out;
    int64_t at = 0, after = total, need = total << 29 | (rest < 0 ? TS_DYN_EXACT : 0);
    if (rest < 0)
        rest = n; /* every piece from the start */
    for (int i = 0; i < n; i++) {
        if (i < rest) {
            pieces[i] = slice_axis(fn, x, ax, TS_DYN_REST + (need | (1 << 28 | at)), 1, sizes[i]);
            at += sizes[i];
            after -= sizes[i];
        } else if (i == rest) {
            pieces[i] = ts_dyn_range(fn, x, ax, TS_DYN_REST + (need | (1 << 28 | at)), TS_DYN_REST + (need | after), 1);
        } else {
            pieces[i] = slice_axis(fn, x, ax, TS_DYN_REST + (need | after), 1, sizes[i]);
            after -= sizes[i];
        }
        if (!pieces[i])
            break;
    }
    return split_finish(pieces, n, out);
}

static bool split_args(const char *fn, rlx_tensor *x, int axis, int n, rlx_tensor **out, int *ax)
{
    if (out && n > 0)
        for (int i = 0; i < n; i++)
            out[i] = NULL;
    if (ts_null(fn, "x", x))
        return false;
    if (!out || n <= 0) {
        ts_error(RLX_E_ARG, fn, "need n > 0 pieces and an out array (n = %d, out %s)", n, out ? "set" : "NULL");
        return false;
    }
    *ax = ts_axis(fn, axis, ts_node(x)->rank);
    return *ax >= 0;
}

static rlx_status split_static(const char *fn, ir_node *nd, int ax, int axis, int n, const int64_t *sizes,
                               rlx_tensor **out);

rlx_status rlx_split(rlx_tensor *x, int axis, int n, const int64_t *sizes, rlx_tensor **out)
{
    const char *fn = "rlx_split";
    int ax;
    if (!split_args(fn, x, axis, n, out, &ax))
        return rlx_last_status();
    if (!sizes) {
        ts_error(RLX_E_ARG, fn, "sizes is NULL");
        return RLX_E_ARG;
    }
    ir_node *nd = ts_node(x);
    if (nd->shape[ax] < 0)
        return split_dynamic(fn, nd, ax, n, sizes, out);
    int rest = -1; /* a size -1: the rest of the axis */
    int64_t others = 0, fixed[64], *own = n <= 64 ? fixed : ir_alloc((size_t)n * sizeof *own);
    if (!own) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return RLX_E_NOMEM;
    }
    for (int i = 0; i < n; i++) {
        own[i] = sizes[i];
        if (sizes[i] == -1 && rest < 0)
            rest = i;
        else if (sizes[i] >= 0) /* saturates past the axis: no overflow */
            others = sizes[i] > nd->shape[ax] - others ? nd->shape[ax] + 1 : others + sizes[i];
    }
    if (rest >= 0 && others <= nd->shape[ax])
        own[rest] = nd->shape[ax] - others;
    rlx_status st = split_static(fn, nd, ax, axis, n, own, out);
    if (own != fixed)
        ir_free(own);
    return st;
}

static rlx_status split_static(const char *fn, ir_node *nd, int ax, int axis, int n, const int64_t *sizes,
                               rlx_tensor **out)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0 || sizes[i] > nd->shape[ax] - total) {
            ts_error(RLX_E_SHAPE, fn, "sizes do not add up to %lld, the length of axis %d of %s",
                     (long long)nd->shape[ax], axis, ts_shape_str(nd));
            return RLX_E_SHAPE;
        }
        total += sizes[i];
    }
    if (total != nd->shape[ax]) {
        ts_error(RLX_E_SHAPE, fn, "sizes add up to %lld, axis %d of %s has %lld", (long long)total, axis,
                 ts_shape_str(nd), (long long)nd->shape[ax]);
        return RLX_E_SHAPE;
    }
    return split_into(fn, nd, ax, n, sizes, out);
}

rlx_status rlx_chunk(rlx_tensor *x, int axis, int n, rlx_tensor **out)
{
    const char *fn = "rlx_chunk";
    int ax;
    if (!split_args(fn, x, axis, n, out, &ax))
        return rlx_last_status();
    ir_node *nd = ts_node(x);
    int64_t len = nd->shape[ax];
    if (len < 0) { /* piece i starts where ts_dyn_resolve puts it */
        ir_node **pieces = (ir_node **)out;
        for (int i = 0; i < n; i++) {
            int64_t at = TS_DYN_CHUNK + ((int64_t)i << 31 | n), to = TS_DYN_CHUNK + ((int64_t)(i + 1) << 31 | n);
            if (!(pieces[i] = ts_dyn_range(fn, nd, ax, at, to, 1)))
                break;
        }
        return split_finish(pieces, n, out);
    }
    int64_t *sizes = ir_alloc((size_t)n * sizeof *sizes);
    if (!sizes) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return RLX_E_NOMEM;
    }
    for (int i = 0; i < n; i++)
        sizes[i] = len / n + (i < len % n);
    rlx_status st = split_into(fn, nd, ax, n, sizes, out);
    ir_free(sizes);
    return st;
}
