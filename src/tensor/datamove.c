/*
 * datamove.c — ops that rearrange data: cat, stack, tile, flip, roll, pad
 * (constant, reflect, replicate), gather, index_select, scatter,
 * scatter_add, index_add, cast, and the two identities the passes must see
 * (contiguous, stop_gradient).
 */
#include <string.h>

#include "ir/cast.h"
#include "tensor/ts.h"

/* A list of n >= 1 tensors, none NULL (NULL entries keep their error). */
static bool check_list(const char *fn, rlx_tensor *const *xs, int n)
{
    if (!xs || n < 1) {
        ts_error(RLX_E_ARG, fn, "need at least one tensor (n = %d, xs %s)", n, xs ? "set" : "NULL");
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (!xs[i]) {
            if (rlx_last_status() == RLX_OK)
                ts_error(RLX_E_ARG, fn, "xs[%d] is NULL", i);
            return false;
        }
    }
    return true;
}

rlx_tensor *rlx_cat(rlx_tensor *const *xs, int n, int axis)
{
    const char *fn = "rlx_cat";
    if (!check_list(fn, xs, n))
        return NULL;
    ir_node *first = ts_node(xs[0]);
    int ax = ts_axis(fn, axis, first->rank);
    if (ax < 0)
        return NULL;
    rlx_dtype dt = first->dtype;
    for (int i = 1; i < n; i++) {
        ir_node *x = ts_node(xs[i]);
        bool ok = x->rank == first->rank;
        for (int d = 0; ok && d < x->rank; d++)
            ok = d == ax || x->shape[d] == first->shape[d];
        if (!ok) {
            ts_error(RLX_E_SHAPE, fn, "xs[%d] %s does not match xs[0] %s off axis %d", i, ts_shape_str(x),
                     ts_shape_str(first), axis);
            return NULL;
        }
        dt = ir_promote(dt, x->dtype);
    }
    ir_node **src = ir_alloc((size_t)n * sizeof *src);
    if (!src) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return NULL;
    }
    /* Empty pieces add nothing; when all are empty, the first one (cast)
     * already has the result's shape. A piece with dynamic dims stays: a
     * program checks what made it when bound (a narrow that does not fit
     * the bound size), as the static graph would. */
    int k = 0;
    ir_node *out = NULL;
    for (int i = 0; i < n; i++) {
        ir_node *x = ts_node(xs[i]);
        if (x->shape[ax] == 0 && ir_node_numel(x) == 0)
            continue;
        if (!(src[k] = ts_cast_node(fn, x, dt)))
            goto done;
        k++;
    }
    if (k <= 1) {
        out = k ? ir_retain(src[0]) : ts_cast_node(fn, first, dt);
    } else {
        ir_attrs a;
        memset(&a, 0, sizeof a);
        a.ax.axis = ax;
        out = ts_make(fn, IR_OP_CAT, k, src, &a);
    }
done:
    for (int i = 0; i < k; i++)
        ir_release(src[i]);
    ir_free(src);
    return ts_wrap(out);
}

rlx_tensor *rlx_stack(rlx_tensor *const *xs, int n, int axis)
{
    const char *fn = "rlx_stack";
    if (!check_list(fn, xs, n))
        return NULL;
    for (int i = 1; i < n; i++) {
        ir_node *x = ts_node(xs[i]), *f = ts_node(xs[0]);
        if (!ir_shape_eq(x->rank, x->shape, f->rank, f->shape)) {
            ts_error(RLX_E_SHAPE, fn, "xs[%d] %s differs from xs[0] %s", i, ts_shape_str(x), ts_shape_str(f));
            return NULL;
        }
    }
    int rank = ts_node(xs[0])->rank;
    if (axis < -rank - 1 || axis > rank || rank == RLX_MAX_RANK) {
        ts_error(RLX_E_ARG, fn, "axis %d out of range for stacking rank %d", axis, rank);
        return NULL;
    }
    rlx_tensor **parts = ir_alloc((size_t)n * sizeof *parts);
    if (!parts) {
        ts_error(RLX_E_NOMEM, fn, "out of memory");
        return NULL;
    }
    if (!ts_open(fn)) {
        ir_free(parts);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        parts[i] = rlx_unsqueeze(xs[i], axis);
    rlx_tensor *r = rlx_cat(parts, n, axis);
    ir_free(parts);
    return ts_close(r);
}

rlx_tensor *rlx_tile(rlx_tensor *x, int axis, int64_t reps)
{
    const char *fn = "rlx_tile";
    int ax;
    ir_node *n = ts_node_axis(fn, x, axis, &ax);
    if (!n)
        return NULL;
    if (n->shape[ax] < 0) { /* x's positions along ax, reps times over (a gather; the count is checked when bound) */
        if (reps < 0) {
            ts_error(RLX_E_ARG, fn, "reps %lld is negative (%s)", (long long)reps, ts_shape_str(n));
            return NULL;
        }
        if (!ts_open(fn))
            return NULL;
        rlx_tensor *pos = rlx_unsqueeze(rlx_arange_of(x, ax, RLX_I64), 0);
        ir_node *e = pos ? ts_expand_node(fn, ts_node(pos), 2, (int64_t[]){reps, -1}) : NULL;
        rlx_tensor *at = e ? rlx_reshape(ts_wrap(e), 1, (int64_t[]){-1}) : NULL;
        return ts_close(rlx_index_select(x, ax, at));
    }
    if (reps < 0 || (n->shape[ax] && reps > INT64_MAX / n->shape[ax])) {
        ts_error(RLX_E_ARG, fn, "reps %lld is negative or too large for %s", (long long)reps, ts_shape_str(n));
        return NULL;
    }
    int64_t shape[IR_MAX_RANK];
    memcpy(shape, n->shape, sizeof shape);
    shape[ax] *= reps;
    if (!ts_check_shape(fn, n->dtype, n->rank, shape, n->rank < RLX_MAX_RANK) || !ts_open(fn))
        return NULL;
    if (n->rank == RLX_MAX_RANK) { /* no room for a repeat axis: gather i % len instead */
        rlx_tensor *i = rlx_arange(RLX_I64, 0, (double)shape[ax], 1);
        return ts_close(rlx_gather(x, n->shape[ax] ? rlx_rem_s(i, (double)n->shape[ax]) : i, ax));
    }
    /* [.., d, ..] -> [.., 1, d, ..] -> expand [.., reps, d, ..] -> merge. */
    rlx_tensor *u = rlx_unsqueeze(x, ax);
    int64_t ex[IR_MAX_RANK];
    for (int i = 0, k = 0; i <= n->rank; i++)
        ex[i] = i == ax ? reps : n->shape[k++];
    rlx_tensor *e = u ? ts_wrap(ts_expand_node(fn, ts_node(u), n->rank + 1, ex)) : NULL; /* dynamic dims pass through */
    return ts_close(rlx_reshape(e, n->rank, shape));
}

rlx_tensor *rlx_flip(rlx_tensor *x, int axis)
{
    if (ts_null("rlx_flip", "x", x) || ts_axis("rlx_flip", axis, ts_node(x)->rank) < 0)
        return NULL;
    if (!ts_open("rlx_flip"))
        return NULL;
    return ts_close(rlx_slice(x, axis, RLX_END, RLX_END, -1));
}

rlx_tensor *rlx_roll(rlx_tensor *x, int axis, int64_t shift)
{
    const char *fn = "rlx_roll";
    int ax;
    ir_node *n = ts_node_axis(fn, x, axis, &ax);
    if (!n)
        return NULL;
    int64_t len = n->shape[ax];
    if (len < 0 && shift != 0) { /* cut at size - shift mod size, resolved when the size is bound (ts.h) */
        if (shift > TS_DYN_IX / 2 || shift < -TS_DYN_IX / 2) { /* beyond the tag: gather (i - shift) mod size */
            if (!ts_open(fn))
                return NULL;
            rlx_tensor *size = ts_dims_value(n, ax, ax + 1), *s = rlx_from_data(RLX_I64, 0, NULL, &shift);
            rlx_tensor *r = rlx_rem(s, size); /* exact in i64; 0 for an empty axis */
            rlx_tensor *at = rlx_rem(rlx_add(rlx_sub(rlx_arange_of(x, ax, RLX_I64), r), size), size);
            return ts_close(rlx_index_select(x, ax, at));
        }
        int64_t cut = TS_DYN_ROLL + shift;
        ir_node *a = ts_dyn_range(fn, n, ax, cut, TS_DYN_IX, 1), *b = a ? ts_dyn_range(fn, n, ax, 0, cut, 1) : NULL;
        if (!b) {
            ir_release(a);
            return NULL;
        }
        if (!ts_open(fn)) {
            ir_release(a);
            ir_release(b);
            return NULL;
        }
        rlx_tensor *parts[2] = {ts_wrap(a), ts_wrap(b)};
        return ts_close(rlx_cat(parts, 2, ax));
    }
    int64_t s = len > 0 ? ((shift % len) + len) % len : 0;
    if (s == 0)
        return rlx_retain(x);
    if (!ts_open(fn))
        return NULL;
    rlx_tensor *parts[2] = {rlx_narrow(x, ax, len - s, s), rlx_narrow(x, ax, 0, len - s)};
    return ts_close(rlx_cat(parts, 2, ax));
}

rlx_tensor *rlx_pad(rlx_tensor *x, int axis, int64_t before, int64_t after, double value)
{
    const char *fn = "rlx_pad";
    int ax;
    ir_node *n = ts_node_axis(fn, x, axis, &ax);
    if (!n)
        return NULL;
    if (before < 0 || after < 0 || before > INT64_MAX / 4 || after > INT64_MAX / 4) {
        ts_error(RLX_E_ARG, fn, "padding %lld before and %lld after must be >= 0 and finite", (long long)before,
                 (long long)after);
        return NULL;
    }
    if (before == 0 && after == 0)
        return rlx_retain(x);
    int64_t shape[IR_MAX_RANK];
    memcpy(shape, n->shape, sizeof shape);
    if (shape[ax] >= 0) /* a dynamic axis stays dynamic: PAD's shape rule sizes it when bound */
        shape[ax] += before + after;
    if (!ts_check_shape(fn, n->dtype, n->rank, shape, true)) /* other axes may be dynamic */
        return NULL;
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.pad.before[ax] = before;
    a.pad.after[ax] = after;
    a.pad.value = ir_cast_const(value, n->dtype); /* the fill as x's dtype holds it, one value for every backend */
    return ts_wrap(ts_make(fn, IR_OP_PAD, 1, &n, &a));
}

/* The before/after border pieces of a reflect or replicate pad; the
 * arguments are checked against a static axis. Slices, flips and
 * broadcasts are views, so the result is one CAT whose pieces the JIT
 * reads in place. The after pieces start from the end (narrow's negative
 * start), so on a dynamic axis they resolve when the size is bound, and a
 * bound size that is too short fails there (narrow's static length must
 * fit) instead of clamping. */
static rlx_tensor *pad_border(rlx_tensor *x, int ax, int64_t count, bool before, rlx_padding mode)
{
    if (mode == RLX_PAD_REPLICATE)
        return rlx_tile(rlx_narrow(x, ax, before ? 0 : -1, 1), ax, count);
    /* reflect leaves the edge out: before gets x[count..1], after x[len-2..len-1-count] */
    return rlx_flip(rlx_narrow(x, ax, before ? 1 : -1 - count, count), ax);
}

rlx_tensor *rlx_pad_mode(rlx_tensor *x, int axis, int64_t before, int64_t after, rlx_padding mode)
{
    const char *fn = "rlx_pad_mode";
    int ax;
    ir_node *n = ts_node_axis(fn, x, axis, &ax);
    if (!n)
        return NULL;
    if (mode == RLX_PAD_CONSTANT) /* in a scope of its own so that errors name rlx_pad_mode */
        return ts_open(fn) ? ts_close(rlx_pad(x, axis, before, after, 0)) : NULL;
    if (mode != RLX_PAD_REFLECT && mode != RLX_PAD_REPLICATE) {
        ts_error(RLX_E_ARG, fn, "unknown mode %d (constant 0, reflect 1, replicate 2)", (int)mode);
        return NULL;
    }
    const char *name = mode == RLX_PAD_REFLECT ? "reflect" : "replicate";
    int64_t len = n->shape[ax];
    if (before < 0 || after < 0 || before > INT64_MAX / 4 || after > INT64_MAX / 4) {
        ts_error(RLX_E_ARG, fn, "padding %lld before and %lld after must be >= 0 and finite", (long long)before,
                 (long long)after);
        return NULL;
    }
    if (before == 0 && after == 0)
        return rlx_retain(x);
    /* PyTorch's rules: reflect needs before, after < len (each border
     * mirrors once); replicate needs an element to repeat. A dynamic
     * length is checked when bound (pad_border). */
    if (len >= 0 && (mode == RLX_PAD_REFLECT ? before >= len || after >= len : len == 0)) {
        ts_error(RLX_E_SHAPE, fn, "%s padding %lld before and %lld after needs %s along axis %d of %s", name,
                 (long long)before, (long long)after,
                 mode == RLX_PAD_REFLECT ? "both < the axis length" : "a non-empty axis", axis, ts_shape_str(n));
        return NULL;
    }
    int64_t shape[IR_MAX_RANK];
    memcpy(shape, n->shape, sizeof shape);
    if (len >= 0)
        shape[ax] += before + after;
    if (!ts_check_shape(fn, n->dtype, n->rank, shape, true) || !ts_open(fn))
        return NULL;
    rlx_tensor *parts[3];
    int k = 0;
    if (before)
        parts[k++] = pad_border(x, ax, before, true, mode);
    parts[k++] = x;
    if (after)
        parts[k++] = pad_border(x, ax, after, false, mode);
    return ts_close(rlx_cat(parts, k, ax));
}

static rlx_tensor *gather(const char *fn, rlx_tensor *x, rlx_tensor *indices, int axis)
{
    if (ts_null(fn, "x", x) || ts_null(fn, "indices", indices))
        return NULL;
    ir_node *n = ts_node(x), *idx = ts_node(indices);
    int ax = ts_axis(fn, axis, n->rank);
    if (ax < 0)
        return NULL;
    if (!ir_dtype_is_index(idx->dtype)) {
        ts_error(RLX_E_DTYPE, fn, "indices must be i32 or i64, got %s", rlx_dtype_name(idx->dtype));
        return NULL;
    }
    if (n->rank - 1 + idx->rank > RLX_MAX_RANK) {
        ts_error(RLX_E_SHAPE, fn, "result rank %d exceeds %d (x %s, indices %s)", n->rank - 1 + idx->rank,
                 RLX_MAX_RANK, ts_shape_str(n), ts_shape_str(idx));
        return NULL;
    }
    if (n->shape[ax] == 0 && ir_node_numel(idx) > 0) {
        ts_error(RLX_E_SHAPE, fn, "cannot index the empty axis %d of %s", axis, ts_shape_str(n));
        return NULL;
    }
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.ax.axis = ax;
    ir_node *src[2] = {n, idx};
    return ts_wrap(ts_make(fn, IR_OP_GATHER, 2, src, &a));
}

rlx_tensor *rlx_gather(rlx_tensor *x, rlx_tensor *indices, int axis) { return gather("rlx_gather", x, indices, axis); }

rlx_tensor *rlx_index_select(rlx_tensor *x, int axis, rlx_tensor *indices)
{
    if (!ts_null("rlx_index_select", "indices", indices) && ts_node(indices)->rank != 1) {
        ts_error(RLX_E_SHAPE, "rlx_index_select", "indices must be 1-D, got %s", ts_shape_str(ts_node(indices)));
        return NULL;
    }
    return gather("rlx_index_select", x, indices, axis);
}

/* --------------------------------------------------------------- scatter */

/* The SCATTER node of base, index and src, src already of index's shape;
 * base and src promote to one dtype. */
static rlx_tensor *scatter_node(const char *fn, ir_node *base, int ax, ir_node *idx, ir_node *src, int mode)
{
    rlx_dtype dt = ir_promote(base->dtype, src->dtype);
    ir_node *b = ts_cast_node(fn, base, dt), *v = b ? ts_cast_node(fn, src, dt) : NULL, *out = NULL;
    if (v) {
        ir_attrs a;
        memset(&a, 0, sizeof a);
        a.scatter.axis = ax;
        a.scatter.mode = mode;
        out = ts_make_lib(fn, IR_OP_SCATTER, 3, (ir_node *[]){b, idx, v}, &a, dt);
    }
    ir_release(b);
    ir_release(v);
    return ts_wrap(out);
}

/* Checks the three arguments and normalizes the axis (-1 on error). */
static int scatter_check(const char *fn, rlx_tensor *base, int axis, rlx_tensor *index, rlx_tensor *src)
{
    if (ts_null(fn, "base", base) || ts_null(fn, "index", index) || ts_null(fn, "src", src))
        return -1;
    ir_node *idx = ts_node(index);
    int ax = ts_axis(fn, axis, ts_node(base)->rank);
    if (ax >= 0 && !ir_dtype_is_index(idx->dtype)) {
        ts_error(RLX_E_DTYPE, fn, "index must be i32 or i64, got %s", rlx_dtype_name(idx->dtype));
        return -1;
    }
    return ax;
}

/* PyTorch scatter/scatter_add: index, src and base of one rank, index no
 * longer than src anywhere nor than base off the axis; src's part outside
 * index's shape is not used. */
static rlx_tensor *scatter(const char *fn, rlx_tensor *base, int axis, rlx_tensor *index, rlx_tensor *src, int mode)
{
    int ax = scatter_check(fn, base, axis, index, src);
    if (ax < 0)
        return NULL;
    ir_node *b = ts_node(base), *idx = ts_node(index), *v = ts_node(src);
    bool fits = idx->rank == b->rank && v->rank == b->rank, same = fits;
    for (int d = 0; fits && d < b->rank; d++) {
        fits = idx->shape[d] <= v->shape[d] && (d == ax || idx->shape[d] <= b->shape[d]);
        same = same && idx->shape[d] == v->shape[d];
    }
    if (!fits || (!same && (ir_node_numel(idx) < 0 || ir_node_numel(v) < 0))) {
        ts_error(RLX_E_SHAPE, fn, "index %s must have the rank of base %s and src %s, and fit in src (and in base off axis %d)",
                 ts_dims_str(idx->rank, idx->shape), ts_dims_str(b->rank, b->shape), ts_shape_str(v), ax);
        return NULL;
    }
    if (same)
        return scatter_node(fn, b, ax, idx, v, mode);
    int64_t start[IR_MAX_RANK] = {0}, step[IR_MAX_RANK];
    for (int d = 0; d < v->rank; d++)
        step[d] = 1;
    ir_attrs a;
    memset(&a, 0, sizeof a);
    memcpy(a.slice.start, start, sizeof start);
    memcpy(a.slice.step, step, sizeof step);
    memcpy(a.slice.len, idx->shape, (size_t)idx->rank * sizeof *idx->shape);
    ir_node *part = ts_make(fn, IR_OP_SLICE, 1, &v, &a);
    rlx_tensor *r = part ? scatter_node(fn, b, ax, idx, part, mode) : NULL;
    ir_release(part);
    return r;
}

rlx_tensor *rlx_scatter_add(rlx_tensor *base, int axis, rlx_tensor *index, rlx_tensor *src)
{
    return scatter("rlx_scatter_add", base, axis, index, src, IR_SCATTER_ADD);
}

rlx_tensor *rlx_scatter(rlx_tensor *base, int axis, rlx_tensor *index, rlx_tensor *src)
{
    return scatter("rlx_scatter", base, axis, index, src, IR_SCATTER_SET);
}

rlx_tensor *rlx_index_add(rlx_tensor *base, int axis, rlx_tensor *index, rlx_tensor *src)
{
    const char *fn = "rlx_index_add";
    int ax = scatter_check(fn, base, axis, index, src);
    if (ax < 0)
        return NULL;
    ir_node *b = ts_node(base), *idx = ts_node(index), *v = ts_node(src);
    bool fits = idx->rank == 1 && v->rank == b->rank && v->shape[ax] == idx->shape[0];
    for (int d = 0; fits && d < b->rank; d++)
        fits = d == ax || v->shape[d] == b->shape[d];
    if (!fits) {
        ts_error(RLX_E_SHAPE, fn, "index must be 1-D [n] and src base's shape %s with axis %d of length n, got index %s and src %s",
                 ts_dims_str(b->rank, b->shape), ax, ts_dims_str(idx->rank, idx->shape), ts_shape_str(v));
        return NULL;
    }
    int64_t one[IR_MAX_RANK];
    for (int d = 0; d < b->rank; d++)
        one[d] = d == ax ? idx->shape[0] : 1;
    ir_node *col = ts_reshape_node(fn, idx, b->rank, one);
    ir_node *full = col ? ts_expand_node(fn, col, v->rank, v->shape) : NULL;
    rlx_tensor *r = full ? scatter_node(fn, b, ax, full, v, IR_SCATTER_ADD) : NULL;
    ir_release(col);
    ir_release(full);
    return r;
}

rlx_tensor *rlx_cast(rlx_tensor *x, rlx_dtype dt)
{
    if (ts_null("rlx_cast", "x", x) || !ts_check_dtype("rlx_cast", (int)dt))
        return NULL;
    /* c64 to a real dtype keeps the real part (PyTorch) when the user asks;
     * inside a composite it is refused like any implicit conversion */
    if (strcmp(ts_fn("rlx_cast"), "rlx_cast") != 0)
        return ts_wrap(ts_cast_node("rlx_cast", ts_node(x), dt));
    return ts_wrap(ts_cast_lossy("rlx_cast", ts_node(x), dt));
}

static rlx_tensor *identity(const char *fn, ir_op op, rlx_tensor *x)
{
    if (ts_null(fn, "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    return ts_wrap(ts_make(fn, op, 1, &n, NULL));
}

rlx_tensor *rlx_contiguous(rlx_tensor *x) { return identity("rlx_contiguous", IR_OP_CONTIGUOUS, x); }
rlx_tensor *rlx_stop_gradient(rlx_tensor *x) { return identity("rlx_stop_gradient", IR_OP_STOP_GRAD, x); }

rlx_tensor *ts_dims_value(const ir_node *x, int from, int to)
{
    int64_t known = 1;
    rlx_tensor *r = NULL;
    for (int d = from; d < to; d++) {
        if (x->shape[d] >= 0) {
            known *= x->shape[d];
            continue;
        }
        /* a dynamic size: the count of its positions, when a program binds it */
        rlx_tensor *n = rlx_sum(rlx_ones_like(rlx_arange_of((rlx_tensor *)(uintptr_t)x, d, RLX_I64)), NULL, 0, false);
        r = r ? rlx_mul(r, n) : n;
    }
    return r ? (known == 1 ? r : rlx_mul_s(r, (double)known)) : rlx_scalar(RLX_I64, (double)known);
}

/* k * stride (NULL passes): a plain multiply when the stride is static. */
static rlx_tensor *times_stride(rlx_tensor *k, const ir_node *x, int d)
{
    int64_t st = ir_numel(x->rank - d - 1, x->shape + d + 1);
    return st >= 0 ? rlx_mul_s(k, (double)st) : rlx_mul(k, ts_dims_value(x, d + 1, x->rank));
}

rlx_tensor *ts_along_positions(const char *fn, rlx_tensor *k, int ax, const ir_node *x)
{
    if (!k)
        return NULL;
    ir_node *kn = ts_node(k);
    rlx_tensor *lin = times_stride(k, x, ax);
    int64_t one[IR_MAX_RANK]; /* k's shape, 1 on a dynamic dim: the iotas broadcast there */
    for (int d = 0; d < kn->rank; d++)
        one[d] = kn->shape[d] < 0 ? 1 : kn->shape[d];
    for (int d = 0; d < kn->rank; d++) {
        if (d == ax || kn->shape[d] == 1)
            continue;
        rlx_tensor *pos;
        if (kn->shape[d] < 0) { /* its positions [1, .., -1, .., 1], made when a program binds it */
            int64_t col[IR_MAX_RANK];
            for (int e = 0; e < kn->rank; e++)
                col[e] = e == d ? -1 : 1;
            pos = rlx_reshape(rlx_arange_of(k, d, RLX_I64), kn->rank, col);
        } else {
            ir_attrs a;
            memset(&a, 0, sizeof a);
            a.iota.step = 1;
            a.iota.axis = d;
            pos = ts_wrap(ts_leaf(fn, IR_OP_IOTA, &a, RLX_I64, kn->rank, one));
        }
        lin = rlx_add(lin, times_stride(pos, x, d));
    }
    return lin;
}
