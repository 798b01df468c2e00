/*
 * sort.c — sort, argsort, topk and multinomial: the public edge of the
 * ARGSORT and MULTINOMIAL primitives (ops.def; kernels/sort.c).
 *
 * argsort is the primitive. sort and topk's values are x picked along the
 * axis by those positions (take_along_axis): one GATHER of x's flattened
 * elements at positions built from the indices and IOTA leaves, so their
 * gradient is GATHER's (a scatter-add back through the permutation) and
 * nothing else needs a rule. topk is argsort's first k positions (the
 * kernel selects them without sorting the whole line when k is small).
 */
#include <string.h>

#include "tensor/ts.h"

/* The ARGSORT node of n along ax: the first k positions of the order. */
static rlx_tensor *argsort_node(const char *fn, ir_node *n, int ax, bool descending, int64_t k)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.sort.axis = ax;
    a.sort.descending = descending;
    a.sort.k = k;
    return ts_wrap(ts_make_lib(fn, IR_OP_ARGSORT, 1, &n, &a, RLX_I64));
}

/* out[p] = x[p with its axis coordinate replaced by idx[p]], idx i64 of
 * x's shape but for the axis, every value in range (NumPy
 * take_along_axis). Inside an open composite. */
static rlx_tensor *take_along(const char *fn, rlx_tensor *x, int ax, rlx_tensor *idx)
{
    if (!idx)
        return NULL;
    return rlx_gather(rlx_reshape(x, 1, (int64_t[]){-1}), ts_along_positions(fn, idx, ax, ts_node(x)), 0);
}

/* Checks x and the axis (rank 0 takes 0 or -1); the normalized axis, or
 * -1 with an error recorded. */
static int sort_args(const char *fn, rlx_tensor *x, int axis)
{
    if (ts_null(fn, "x", x))
        return -1;
    ir_node *n = ts_node(x);
    if (ir_dtype_is_complex(n->dtype)) { /* complex numbers have no order (rank 0 and empty included) */
        ts_error(RLX_E_DTYPE, fn, "does not take %s", ir_dtype_name(n->dtype));
        return -1;
    }
    if (n->rank == 0) {
        if (axis != 0 && axis != -1) {
            ts_error(RLX_E_ARG, fn, "axis %d out of range for rank 0", axis);
            return -1;
        }
        return 0;
    }
    return ts_axis(fn, axis, n->rank); /* any dim may be dynamic: a whole line is k -1 (ir_infer) */
}

rlx_tensor *rlx_argsort(rlx_tensor *x, int axis, bool descending)
{
    const char *fn = "rlx_argsort";
    int ax = sort_args(fn, x, axis);
    if (ax < 0)
        return NULL;
    if (ts_node(x)->rank == 0) /* one element: position 0 */
        return rlx_zeros(RLX_I64, 0, NULL);
    return argsort_node(fn, ts_node(x), ax, descending, ts_node(x)->shape[ax]);
}

rlx_tensor *rlx_sort(rlx_tensor *x, int axis, bool descending)
{
    const char *fn = "rlx_sort";
    int ax = sort_args(fn, x, axis);
    if (ax < 0)
        return NULL;
    if (ts_node(x)->rank == 0 || ir_node_numel(ts_node(x)) == 0)
        return rlx_retain(x);
    if (!ts_open(fn))
        return NULL;
    ir_node *n = ts_node(x);
    return ts_close(take_along(fn, x, ax, argsort_node(fn, n, ax, descending, n->shape[ax])));
}

rlx_status rlx_topk(rlx_tensor *x, int64_t k, int axis, bool largest, rlx_tensor **values, rlx_tensor **indices)
{
    const char *fn = "rlx_topk";
    if (values)
        *values = NULL;
    if (indices)
        *indices = NULL;
    if (!values || !indices) {
        if (!ts_null(fn, "x", x))
            ts_error(RLX_E_ARG, fn, "values and indices must not be NULL");
        return rlx_last_status();
    }
    int ax = sort_args(fn, x, axis);
    if (ax < 0)
        return rlx_last_status();
    ir_node *n = ts_node(x);
    int64_t len = n->rank ? n->shape[ax] : 1;
    if (k < 0 || (len >= 0 && k > len) || (n->rank == 0 && k != 1)) { /* a dynamic len: checked when bound */
        ts_error(RLX_E_ARG, fn, "k %lld out of range for axis %d of length %lld (x %s)", (long long)k, axis,
                 (long long)len, ts_shape_str(n));
        return RLX_E_ARG;
    }
    if (n->rank == 0) { /* without a scope neither call can fail; with one, it owns z */
        rlx_tensor *z = rlx_zeros(RLX_I64, 0, NULL), *v = z ? rlx_retain(x) : NULL;
        if (!v)
            return rlx_last_status();
        *values = v;
        *indices = z;
        return RLX_OK;
    }
    /* Both results come out of one composite: the indices' node is held
     * apart and wrapped last, so a failure leaves nothing to release twice. */
    ir_node *idxn = NULL;
    rlx_tensor *val = NULL;
    if (ts_open(fn)) {
        rlx_tensor *idx = argsort_node(fn, n, ax, largest, k);
        val = take_along(fn, x, ax, idx);
        if (val)
            idxn = ir_retain(ts_node(idx));
        val = ts_close(val);
    }
    if (!val) {
        ir_release(idxn);
        return rlx_last_status();
    }
    rlx_tensor *idx = ts_wrap(idxn);
    if (!idx) /* only with a scope open, which owns val */
        return rlx_last_status();
    *values = val;
    *indices = idx;
    return RLX_OK;
}

rlx_tensor *rlx_multinomial(rlx_tensor *probs, int64_t num_samples, bool replacement, uint64_t seed)
{
    const char *fn = "rlx_multinomial";
    if (ts_null(fn, "probs", probs))
        return NULL;
    ir_node *n = ts_node(probs);
    if (n->rank < 1 || n->rank > 2 || n->shape[n->rank - 1] == 0) {
        ts_error(RLX_E_SHAPE, fn, "probs must be [N] or [B, N] with N >= 1, got %s", ts_shape_str(n));
        return NULL;
    }
    if (n->dtype == RLX_BOOL) {
        ts_error(RLX_E_DTYPE, fn, "probs must be numeric weights, got bool");
        return NULL;
    }
    int64_t cats = n->shape[n->rank - 1]; /* dynamic (-1): checked when a program binds it (ir_infer) */
    if (num_samples < 0 || (!replacement && cats >= 0 && num_samples > cats)) {
        ts_error(RLX_E_ARG, fn, "num_samples %lld out of range for %lld categories%s", (long long)num_samples,
                 (long long)cats, replacement ? "" : " without replacement");
        return NULL;
    }
    ir_node *src = ts_cast_node(fn, n, ir_dtype_is_float(n->dtype) ? n->dtype : RLX_F64);
    if (!src)
        return NULL;
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.multinomial.seed = seed;
    a.multinomial.samples = num_samples;
    a.multinomial.replacement = replacement;
    ir_node *out = ts_make_lib(fn, IR_OP_MULTINOMIAL, 1, &src, &a, RLX_I64);
    ir_release(src);
    return ts_wrap(out);
}
