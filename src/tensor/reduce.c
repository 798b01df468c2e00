/*
 * reduce.c — reductions over any set of axes, arg reductions, cumsum and
 * the statistics built on them (mean, var, std, norm, logsumexp).
 */
#include <math.h>
#include <string.h>

#include "tensor/ts.h"

bool ts_axes_mask(const char *fn, int rank, const int *axes, int naxes, uint32_t *mask)
{
    *mask = 0;
    if (!axes) {
        if (naxes > 0) {
            ts_error(RLX_E_ARG, fn, "axes is NULL but naxes is %d", naxes);
            return false;
        }
        *mask = rank ? (1u << rank) - 1 : 0;
        return true;
    }
    if (naxes < 0 || naxes > RLX_MAX_RANK) {
        ts_error(RLX_E_ARG, fn, "naxes %d outside 0..%d", naxes, RLX_MAX_RANK);
        return false;
    }
    for (int i = 0; i < naxes; i++) {
        if (axes[i] < -rank || axes[i] >= rank) {
            ts_error(RLX_E_ARG, fn, "axis %d out of range for rank %d", axes[i], rank);
            return false;
        }
        int ax = axes[i] < 0 ? axes[i] + rank : axes[i];
        if (*mask >> ax & 1) {
            ts_error(RLX_E_ARG, fn, "axis %d is repeated", axes[i]);
            return false;
        }
        *mask |= 1u << ax;
    }
    return true;
}

static ir_node *drop_axes(const char *fn, ir_node *r, uint32_t mask)
{
    int64_t shape[IR_MAX_RANK];
    int k = 0;
    for (int i = 0; i < r->rank; i++)
        if (!(mask >> i & 1))
            shape[k++] = r->shape[i];
    return ts_reshape_node(fn, r, k, shape);
}

rlx_tensor *ts_reduce_mask(const char *fn, ir_op op, rlx_tensor *x, uint32_t mask, bool keepdim)
{
    ir_node *n = ts_node(x);
    if (ir_dtype_is_complex(n->dtype) && !ir_c64_takes(op)) { /* also when no axis is left to reduce */
        ts_error(RLX_E_DTYPE, fn, "%s does not take %s", ir_ops[op].name, ir_dtype_name(n->dtype));
        return NULL;
    }
    /* sum and prod of bool/integers accumulate in i64, as NumPy and PyTorch. */
    rlx_dtype dt = (op == IR_OP_SUM || op == IR_OP_PROD) && !ir_dtype_is_float(n->dtype) &&
                           !ir_dtype_is_complex(n->dtype)
                       ? RLX_I64
                       : n->dtype;
    ir_node *src = ts_cast_node(fn, n, dt);
    if (!src)
        return NULL;
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.red.mask = mask;
    ir_node *r = mask ? ts_make(fn, op, 1, &src, &a) : ir_retain(src);
    ir_release(src);
    if (!r || keepdim)
        return ts_wrap(r);
    ir_node *out = drop_axes(fn, r, mask);
    ir_release(r);
    return ts_wrap(out);
}

static rlx_tensor *reduce(const char *fn, ir_op op, rlx_tensor *x, const int *axes, int naxes, bool keepdim)
{
    uint32_t mask;
    if (ts_null(fn, "x", x) || !ts_axes_mask(fn, ts_node(x)->rank, axes, naxes, &mask))
        return NULL;
    return ts_reduce_mask(fn, op, x, mask, keepdim);
}

rlx_tensor *rlx_sum(rlx_tensor *x, const int *axes, int naxes, bool keepdim)
{
    return reduce("rlx_sum", IR_OP_SUM, x, axes, naxes, keepdim);
}
rlx_tensor *rlx_prod(rlx_tensor *x, const int *axes, int naxes, bool keepdim)
{
    return reduce("rlx_prod", IR_OP_PROD, x, axes, naxes, keepdim);
}
rlx_tensor *rlx_max(rlx_tensor *x, const int *axes, int naxes, bool keepdim)
{
    return reduce("rlx_max", IR_OP_RMAX, x, axes, naxes, keepdim);
}
rlx_tensor *rlx_min(rlx_tensor *x, const int *axes, int naxes, bool keepdim)
{
    return reduce("rlx_min", IR_OP_RMIN, x, axes, naxes, keepdim);
}

static int64_t reduced_count(ir_node *n, uint32_t mask)
{
    int64_t c = 1;
    for (int i = 0; i < n->rank; i++)
        if (mask >> i & 1) {
            if (n->shape[i] < 0)
                return -1;
            c *= n->shape[i];
        }
    return c;
}

/* Opens the composite scope and gives x as floats and the axis mask. */
static bool stat_begin(const char *fn, rlx_tensor *x, const int *axes, int naxes, uint32_t *mask, rlx_tensor **xf)
{
    if (ts_null(fn, "x", x) || !ts_axes_mask(fn, ts_node(x)->rank, axes, naxes, mask) || !ts_open(fn))
        return false;
    *xf = ts_as_float(x); /* f16/bf16 in f32 too: the result rounds once, at stat_end */
    if (!*xf) { /* candidate fix: the cast failed (out of memory) */
        ts_close(NULL);
        return false;
    }
    return true;
}

/* Closes a statistic's scope with r in x's float dtype. */
static rlx_tensor *stat_end(rlx_tensor *x, rlx_tensor *r) { return ts_close_as(r, ts_float_dtype(ts_node(x)->dtype)); }

static rlx_tensor *mean_mask(const char *fn, rlx_tensor *xf, uint32_t mask, bool keepdim)
{
    if (!xf)
        return NULL; /* candidate fix: an inner op failed (out of memory) */
    int64_t count = reduced_count(ts_node(xf), mask);
    rlx_tensor *s = ts_reduce_mask(fn, IR_OP_SUM, xf, mask, keepdim);
    if (count < 0) { /* a dynamic axis: the count is counted when the program runs */
        rlx_tensor *ones = rlx_ones_like(xf);
        return ones ? rlx_div(s, ts_reduce_mask(fn, IR_OP_SUM, ones, mask, keepdim)) : NULL;
    }
    return count ? rlx_div_s(s, (double)count) : rlx_mul_s(s, NAN); /* mean of nothing is NaN */
}

static rlx_tensor *var_mask(const char *fn, rlx_tensor *xf, uint32_t mask, bool keepdim)
{
    /* NumPy's complex var is real (|x - mean|^2): not built here */
    if (xf && ir_dtype_is_complex(ts_node(xf)->dtype)) {
        ts_error(RLX_E_DTYPE, fn, "does not take %s", ir_dtype_name(ts_node(xf)->dtype));
        return NULL;
    }
    rlx_tensor *d = rlx_sub(xf, mean_mask(fn, xf, mask, true));
    return mean_mask(fn, rlx_mul(d, d), mask, keepdim);
}

/* sqrt(s) whose gradient at s == 0 is 0, PyTorch's subgradient of norm
 * and std there, not inf * 0 = NaN: at 0 the value comes from a branch
 * that carries no gradient, and the sqrt branch is fed 1. Same values. */
static rlx_tensor *sqrt_zero_grad(rlx_tensor *s)
{
    rlx_tensor *at0 = rlx_eq_s(s, 0);
    return rlx_where(at0, rlx_zeros_like(s), rlx_sqrt(rlx_where(at0, rlx_ones_like(s), s)));
}

rlx_tensor *rlx_mean(rlx_tensor *x, const int *axes, int naxes, bool keepdim)
{
    uint32_t mask;
    rlx_tensor *xf;
    if (!stat_begin("rlx_mean", x, axes, naxes, &mask, &xf))
        return NULL;
    return stat_end(x, mean_mask("rlx_mean", xf, mask, keepdim));
}

rlx_tensor *rlx_var(rlx_tensor *x, const int *axes, int naxes, bool keepdim)
{
    uint32_t mask;
    rlx_tensor *xf;
    if (!stat_begin("rlx_var", x, axes, naxes, &mask, &xf))
        return NULL;
    return stat_end(x, var_mask("rlx_var", xf, mask, keepdim));
}

rlx_tensor *rlx_std(rlx_tensor *x, const int *axes, int naxes, bool keepdim)
{
    uint32_t mask;
    rlx_tensor *xf;
    if (!stat_begin("rlx_std", x, axes, naxes, &mask, &xf))
        return NULL;
    return stat_end(x, sqrt_zero_grad(var_mask("rlx_std", xf, mask, keepdim)));
}

rlx_tensor *rlx_norm(rlx_tensor *x, const int *axes, int naxes, bool keepdim)
{
    uint32_t mask;
    rlx_tensor *xf;
    if (!stat_begin("rlx_norm", x, axes, naxes, &mask, &xf))
        return NULL;
    return stat_end(x, sqrt_zero_grad(ts_reduce_mask("rlx_norm", IR_OP_SUM, rlx_mul(xf, xf), mask, keepdim)));
}

rlx_tensor *rlx_sum_all(rlx_tensor *x) { return reduce("rlx_sum_all", IR_OP_SUM, x, NULL, 0, false); }

rlx_tensor *rlx_mean_all(rlx_tensor *x)
{
    uint32_t mask;
    rlx_tensor *xf;
    if (!stat_begin("rlx_mean_all", x, NULL, 0, &mask, &xf))
        return NULL;
    return stat_end(x, mean_mask("rlx_mean_all", xf, mask, false));
}

static rlx_tensor *arg_reduce(const char *fn, ir_op op, rlx_tensor *x, int axis, bool keepdim)
{
    if (ts_null(fn, "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    if (ir_dtype_is_complex(n->dtype)) { /* complex numbers have no order */
        ts_error(RLX_E_DTYPE, fn, "%s does not take %s", ir_ops[op].name, ir_dtype_name(n->dtype));
        return NULL;
    }
    if (n->rank == 0) { /* a scalar: index 0 along its one implicit axis */
        if (axis != 0 && axis != -1) {
            ts_error(RLX_E_ARG, fn, "axis %d out of range for rank 0", axis);
            return NULL;
        }
        return rlx_zeros(RLX_I64, 0, NULL);
    }
    int ax = ts_axis(fn, axis, n->rank);
    if (ax < 0)
        return NULL;
    if (n->shape[ax] == 0) {
        ts_error(RLX_E_SHAPE, fn, "axis %d of %s is empty", axis, ts_shape_str(n));
        return NULL;
    }
    return ts_reduce_mask(fn, op, x, 1u << ax, keepdim);
}

rlx_tensor *rlx_argmax(rlx_tensor *x, int axis, bool keepdim) { return arg_reduce("rlx_argmax", IR_OP_ARGMAX, x, axis, keepdim); }
rlx_tensor *rlx_argmin(rlx_tensor *x, int axis, bool keepdim) { return arg_reduce("rlx_argmin", IR_OP_ARGMIN, x, axis, keepdim); }

rlx_tensor *rlx_logsumexp(rlx_tensor *x, int axis, bool keepdim)
{
    const char *fn = "rlx_logsumexp";
    if (ts_null(fn, "x", x))
        return NULL;
    if (ir_dtype_is_complex(ts_node(x)->dtype)) { /* as its other ranks (log, max refuse it) */
        ts_error(RLX_E_DTYPE, fn, "does not take %s", ir_dtype_name(ts_node(x)->dtype));
        return NULL;
    }
    if (ts_node(x)->rank == 0 && (axis == 0 || axis == -1))
        return rlx_cast(x, ts_float_dtype(ts_node(x)->dtype));
    int ax = ts_axis(fn, axis, ts_node(x)->rank);
    if (ax < 0 || !ts_open(fn))
        return NULL;
    rlx_tensor *xf = ts_as_float(x);
    rlx_tensor *m = rlx_max(xf, &ax, 1, true);
    /* Shift by the row max when it is finite; all -inf (or empty) rows
     * then give log(0) = -inf and +inf rows +inf, without NaN. */
    rlx_tensor *finite = rlx_lt_s(rlx_abs(m), INFINITY);
    rlx_tensor *shift = rlx_where(finite, m, rlx_zeros_like(m));
    rlx_tensor *s = rlx_sum(rlx_exp(rlx_sub(xf, shift)), &ax, 1, true);
    rlx_tensor *r = rlx_add(rlx_log(s), shift);
    return stat_end(x, keepdim ? r : rlx_squeeze(r, ax));
}

rlx_tensor *rlx_cumsum(rlx_tensor *x, int axis, bool exclusive)
{
    const char *fn = "rlx_cumsum";
    if (ts_null(fn, "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    if (ir_dtype_is_complex(n->dtype)) { /* before the rank-0 shortcut, whose cast would keep the real part */
        ts_error(RLX_E_DTYPE, fn, "does not take %s", ir_dtype_name(n->dtype));
        return NULL;
    }
    if (n->rank == 0 && (axis == 0 || axis == -1)) /* a scalar is its own running sum */
        return exclusive ? rlx_zeros(ir_dtype_is_float(n->dtype) ? n->dtype : RLX_I64, 0, NULL)
                         : rlx_cast(x, ir_dtype_is_float(n->dtype) ? n->dtype : RLX_I64);
    int ax = ts_axis(fn, axis, n->rank);
    if (ax < 0)
        return NULL;
    ir_node *src = ts_cast_node(fn, n, ir_dtype_is_float(n->dtype) ? n->dtype : RLX_I64);
    if (!src)
        return NULL;
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.scan.axis = ax;
    a.scan.exclusive = exclusive;
    ir_node *out = ts_make(fn, IR_OP_CUMSUM, 1, &src, &a);
    ir_release(src);
    return ts_wrap(out);
}
