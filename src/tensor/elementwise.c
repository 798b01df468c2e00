/*
 * elementwise.c — unary and binary math, comparisons and selection.
 *
 * Primitive entry points share ts_unary/ts_binary, which apply the dtype
 * rules (promotion, float math on integers in f32) and make broadcasts
 * explicit; the activations are composites of those primitives.
 */
#include <math.h>
#include <string.h>

#include "tensor/ts.h"

rlx_tensor *ts_unary(const char *fn, ir_op op, rlx_tensor *x)
{
    if (ts_null(fn, "x", x))
        return NULL;
    ir_node *n = ts_node(x), *src, *out;
    unsigned flags = ir_ops[op].flags;
    if (n->dtype == RLX_BOOL && (flags & IR_F_NO_BOOL)) {
        ts_error(RLX_E_DTYPE, fn, "not defined on bool (use rlx_logical_not)");
        return NULL;
    }
    bool identity_on_ints = op == IR_OP_ROUND || op == IR_OP_FLOOR || op == IR_OP_CEIL;
    if ((n->dtype == RLX_BOOL && (identity_on_ints || op == IR_OP_ABS || op == IR_OP_SIGN)) ||
        (ir_dtype_is_int(n->dtype) && identity_on_ints))
        return rlx_retain(x);
    rlx_dtype want = (flags & IR_F_FLOAT_MATH) ? ts_float_dtype(n->dtype) : op == IR_OP_NOT ? RLX_BOOL : n->dtype;
    if (!(src = ts_cast_node(fn, n, want)))
        return NULL;
    out = ts_make(fn, op, 1, &src, NULL);
    ir_release(src);
    if (out && op == IR_OP_ABS && ir_dtype_is_complex(out->dtype)) { /* |z| is real: ABS of c64 gives (|z|, 0) */
        src = out;
        out = ts_cast_lossy(fn, src, ir_complex_part(src->dtype));
        ir_release(src);
    }
    return ts_wrap(out);
}

/* Casts and broadcasts k operands to one dtype and shape, then makes op. */
static ir_node *make_broadcast(const char *fn, ir_op op, int k, ir_node *const *in, const rlx_dtype *dts)
{
    int rank = 0;
    int64_t shape[IR_MAX_RANK] = {0};
    for (int i = 0; i < k; i++) {
        if (!ir_broadcast_shapes(rank, shape, in[i]->rank, in[i]->shape, &rank, shape)) {
            if (k == 2)
                ts_error(RLX_E_SHAPE, fn, "shapes %s and %s do not broadcast", ts_shape_str(in[0]),
                         ts_shape_str(in[1]));
            else
                ts_error(RLX_E_SHAPE, fn, "shapes %s, %s and %s do not broadcast", ts_shape_str(in[0]),
                         ts_shape_str(in[1]), ts_shape_str(in[2]));
            return NULL;
        }
    }
    for (int i = 0; i < k; i++) { /* a dynamic dim cannot be broadcast to a static size */
        for (int d = 0; d < in[i]->rank; d++) {
            int64_t o = shape[rank - in[i]->rank + d];
            if (in[i]->shape[d] < 0 && o >= 0) {
                ts_error(RLX_E_SHAPE, fn, "the dynamic dim %d of %s meets the static size %lld (%s and %s)", d,
                         ts_shape_str(in[i]), (long long)o, ts_shape_str(in[0]), ts_shape_str(in[k - 1]));
                return NULL;
            }
        }
    }
    ir_node *src[3] = {NULL, NULL, NULL}, *out = NULL;
    for (int i = 0; i < k; i++) {
        ir_node *c = ts_cast_node(fn, in[i], dts[i]);
        src[i] = c ? ts_expand_node(fn, c, rank, shape) : NULL;
        ir_release(c);
        if (!src[i])
            goto done;
    }
    out = ts_make(fn, op, k, src, NULL);
done:
    for (int i = 0; i < k; i++)
        ir_release(src[i]);
    return out;
}

static ir_node *binary_nodes(const char *fn, ir_op op, ir_node *a, ir_node *b)
{
    unsigned flags = ir_ops[op].flags;
    rlx_dtype dt = ir_promote(a->dtype, b->dtype);
    if (op == IR_OP_AND || op == IR_OP_OR)
        dt = RLX_BOOL;
    else if (flags & IR_F_FLOAT_MATH)
        dt = ts_float_dtype(dt);
    else if (dt == RLX_BOOL && !(flags & IR_F_BOOL_OK)) {
        ts_error(RLX_E_DTYPE, fn, "not defined on two bool operands");
        return NULL;
    }
    ir_node *in[2] = {a, b};
    rlx_dtype dts[2] = {dt, dt};
    return make_broadcast(fn, op, 2, in, dts);
}

rlx_tensor *ts_binary(const char *fn, ir_op op, rlx_tensor *a, rlx_tensor *b)
{
    if (ts_null(fn, "a", a) || ts_null(fn, "b", b))
        return NULL;
    return ts_wrap(binary_nodes(fn, op, ts_node(a), ts_node(b)));
}

rlx_tensor *ts_binary_s(const char *fn, ir_op op, rlx_tensor *a, double s)
{
    if (ts_null(fn, "a", a))
        return NULL;
    ir_node *x = ts_node(a);
    ir_node *c = ts_const_node(fn, x->dtype, x->rank, x->shape, s); /* the scalar takes a's dtype */
    ir_node *out = c ? binary_nodes(fn, op, x, c) : NULL;
    ir_release(c);
    return ts_wrap(out);
}

#define UNARY(name, op) \
    rlx_tensor *rlx_##name(rlx_tensor *x) { return ts_unary("rlx_" #name, op, x); }
UNARY(neg, IR_OP_NEG)
UNARY(exp, IR_OP_EXP)
UNARY(log, IR_OP_LOG)
UNARY(sqrt, IR_OP_SQRT)
UNARY(rsqrt, IR_OP_RSQRT)
UNARY(sigmoid, IR_OP_SIGMOID)
UNARY(abs, IR_OP_ABS)
UNARY(sin, IR_OP_SIN)
UNARY(cos, IR_OP_COS)
UNARY(tan, IR_OP_TAN)
UNARY(atan, IR_OP_ATAN)
UNARY(round, IR_OP_ROUND)
UNARY(recip, IR_OP_RECIP)
UNARY(floor, IR_OP_FLOOR)
UNARY(ceil, IR_OP_CEIL)
UNARY(sign, IR_OP_SIGN)
UNARY(erf, IR_OP_ERF)
UNARY(tanh, IR_OP_TANH)
UNARY(logical_not, IR_OP_NOT)
#undef UNARY

#define BINARY(name, op)                                                                       \
    rlx_tensor *rlx_##name(rlx_tensor *a, rlx_tensor *b) { return ts_binary("rlx_" #name, op, a, b); } \
    rlx_tensor *rlx_##name##_s(rlx_tensor *a, double s) { return ts_binary_s("rlx_" #name "_s", op, a, s); }
BINARY(add, IR_OP_ADD)
BINARY(sub, IR_OP_SUB)
BINARY(mul, IR_OP_MUL)
BINARY(div, IR_OP_DIV)
BINARY(pow, IR_OP_POW)
BINARY(maximum, IR_OP_MAX)
BINARY(minimum, IR_OP_MIN)
BINARY(atan2, IR_OP_ATAN2)
BINARY(rem, IR_OP_REM)
BINARY(eq, IR_OP_EQ)
BINARY(ne, IR_OP_NE)
BINARY(lt, IR_OP_LT)
BINARY(le, IR_OP_LE)
BINARY(gt, IR_OP_GT)
BINARY(ge, IR_OP_GE)
#undef BINARY

rlx_tensor *rlx_logical_and(rlx_tensor *a, rlx_tensor *b) { return ts_binary("rlx_logical_and", IR_OP_AND, a, b); }
rlx_tensor *rlx_logical_or(rlx_tensor *a, rlx_tensor *b) { return ts_binary("rlx_logical_or", IR_OP_OR, a, b); }

rlx_tensor *rlx_rsub_s(rlx_tensor *x, double s)
{
    if (ts_null("rlx_rsub_s", "x", x) || !ts_open("rlx_rsub_s"))
        return NULL;
    return ts_close(rlx_add_s(rlx_neg(x), s));
}

rlx_tensor *rlx_rdiv_s(rlx_tensor *x, double s)
{
    if (ts_null("rlx_rdiv_s", "x", x) || !ts_open("rlx_rdiv_s"))
        return NULL;
    rlx_tensor *c = rlx_full(ts_node(x)->dtype, 0, NULL, s);
    return ts_close(rlx_div(c, x));
}

/* ------------------------------------------------------------ complex */

rlx_tensor *rlx_complex(rlx_tensor *re, rlx_tensor *im)
{
    const char *fn = "rlx_complex";
    if (ts_null(fn, "re", re) || ts_null(fn, "im", im))
        return NULL;
    ir_node *in[2] = {ts_node(re), ts_node(im)};
    for (int k = 0; k < 2; k++)
        if (ir_dtype_is_complex(in[k]->dtype)) {
            ts_error(RLX_E_DTYPE, fn, "%s must be real, got %s", k ? "im" : "re", ir_dtype_name(in[k]->dtype));
            return NULL;
        }
    /* through the part dtype first: a part rounds as it does in a cast to
     * f32 (an i64 or f64 converts once, not through a second rounding);
     * an f64 part makes c128 (PyTorch's complex of two f64) */
    rlx_dtype cdt = in[0]->dtype == RLX_F64 || in[1]->dtype == RLX_F64 ? RLX_C128 : RLX_C64;
    ir_node *f[2] = {ts_cast_node(fn, in[0], ir_complex_part(cdt)), NULL}, *out = NULL;
    if (f[0] && (f[1] = ts_cast_node(fn, in[1], ir_complex_part(cdt)))) {
        rlx_dtype dts[2] = {cdt, cdt};
        out = make_broadcast(fn, IR_OP_COMPLEX, 2, f, dts);
    }
    ir_release(f[0]);
    ir_release(f[1]);
    return ts_wrap(out);
}

rlx_tensor *rlx_real(rlx_tensor *x)
{
    if (ts_null("rlx_real", "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    return ir_dtype_is_complex(n->dtype) ? ts_wrap(ts_cast_lossy("rlx_real", n, ir_complex_part(n->dtype)))
                                         : rlx_retain(x);
}

rlx_tensor *rlx_imag(rlx_tensor *x)
{
    if (ts_null("rlx_imag", "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    if (!ir_dtype_is_complex(n->dtype))
        return ts_wrap(ts_const_node("rlx_imag", n->dtype, n->rank, n->shape, 0));
    ir_node *im = ts_make("rlx_imag", IR_OP_IMAG, 1, &n, NULL);
    ir_node *out = im ? ts_cast_lossy("rlx_imag", im, ir_complex_part(n->dtype)) : NULL;
    ir_release(im);
    return ts_wrap(out);
}

rlx_tensor *rlx_conj(rlx_tensor *x)
{
    if (ts_null("rlx_conj", "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    return ir_dtype_is_complex(n->dtype) ? ts_wrap(ts_make("rlx_conj", IR_OP_CONJ, 1, &n, NULL)) : rlx_retain(x);
}

/* ------------------------------------------------------------ selection */

rlx_tensor *rlx_where(rlx_tensor *cond, rlx_tensor *a, rlx_tensor *b)
{
    const char *fn = "rlx_where";
    if (ts_null(fn, "cond", cond) || ts_null(fn, "a", a) || ts_null(fn, "b", b))
        return NULL;
    ir_node *in[3] = {ts_node(cond), ts_node(a), ts_node(b)};
    rlx_dtype dt = ir_promote(in[1]->dtype, in[2]->dtype);
    rlx_dtype dts[3] = {RLX_BOOL, dt, dt};
    return ts_wrap(make_broadcast(fn, IR_OP_WHERE, 3, in, dts));
}

rlx_tensor *rlx_masked_fill(rlx_tensor *x, rlx_tensor *mask, double value)
{
    const char *fn = "rlx_masked_fill";
    if (ts_null(fn, "x", x) || ts_null(fn, "mask", mask))
        return NULL;
    ir_node *xn = ts_node(x), *mn = ts_node(mask);
    int rank;
    int64_t shape[IR_MAX_RANK];
    if (!ir_broadcast_shapes(xn->rank, xn->shape, mn->rank, mn->shape, &rank, shape) ||
        !ir_shape_eq(rank, shape, xn->rank, xn->shape)) {
        ts_error(RLX_E_SHAPE, fn, "mask %s does not broadcast to x %s", ts_shape_str(mn), ts_shape_str(xn));
        return NULL;
    }
    if (!ts_open(fn))
        return NULL;
    return ts_close(rlx_where(mask, rlx_full(xn->dtype, 0, NULL, value), x));
}

rlx_tensor *rlx_clamp_min(rlx_tensor *x, double lo) { return ts_binary_s("rlx_clamp_min", IR_OP_MAX, x, lo); }
rlx_tensor *rlx_clamp_max(rlx_tensor *x, double hi) { return ts_binary_s("rlx_clamp_max", IR_OP_MIN, x, hi); }

rlx_tensor *rlx_clamp(rlx_tensor *x, double lo, double hi)
{
    if (ts_null("rlx_clamp", "x", x) || !ts_open("rlx_clamp"))
        return NULL;
    return ts_close(rlx_minimum_s(rlx_maximum_s(x, lo), hi));
}

/* ---------------------------------------------------------- activations */

rlx_tensor *ts_as_float(rlx_tensor *x)
{
    rlx_dtype dt = ts_wide_dtype(ts_float_dtype(ts_node(x)->dtype));
    return ts_node(x)->dtype == dt ? x : rlx_cast(x, dt);
}

bool ts_numeric(const char *fn, const char *arg, rlx_tensor *t)
{
    rlx_dtype dt = ts_node(t)->dtype;
    if (dt != RLX_BOOL && !ir_dtype_is_complex(dt))
        return true;
    ts_error(RLX_E_DTYPE, fn, "%s must be real numeric, got %s", arg, ir_dtype_name(dt));
    return false;
}

rlx_tensor *rlx_relu(rlx_tensor *x)
{
    if (ts_null("rlx_relu", "x", x))
        return NULL;
    if (ts_node(x)->dtype == RLX_BOOL)
        return rlx_retain(x);
    if (!ts_open("rlx_relu"))
        return NULL;
    /* where(x <= 0, 0, x) rather than maximum(x, 0): NaN stays NaN and the
     * gradient at 0 is 0, as PyTorch gives. */
    return ts_close(rlx_where(rlx_le_s(x, 0), rlx_zeros_like(x), x));
}

/* Each composite below: open a scope, compute on floats (f16/bf16 in
 * f32), round to the float dtype of x once, close. */
#define COMPOSITE(name, body)                                   \
    rlx_tensor *rlx_##name(rlx_tensor *x_)                      \
    {                                                           \
        if (ts_null("rlx_" #name, "x", x_) ||                   \
            (ir_dtype_is_complex(ts_node(x_)->dtype) && !ts_numeric("rlx_" #name, "x", x_)) || !ts_open("rlx_" #name)) \
            return NULL; /* bool computes in f32; c64 is refused */ \
        rlx_tensor *x = ts_as_float(x_);                        \
        return ts_close_as(body, ts_float_dtype(ts_node(x_)->dtype)); \
    }

COMPOSITE(gelu, rlx_mul(rlx_mul_s(x, 0.5), rlx_add_s(rlx_erf(rlx_mul_s(x, M_SQRT1_2)), 1)))
COMPOSITE(gelu_tanh,
          rlx_mul(rlx_mul_s(x, 0.5),
                  rlx_add_s(rlx_tanh(rlx_mul_s(rlx_add(x, rlx_mul_s(rlx_mul(rlx_mul(x, x), x), 0.044715)),
                                               0.7978845608028654)),
                            1)))
COMPOSITE(silu, rlx_mul(x, rlx_sigmoid(x)))
/* max(x, 0) + log1p(exp(-|x|)): no overflow for large |x|. */
COMPOSITE(softplus, rlx_add(rlx_clamp_min(x, 0), ts_unary("rlx_softplus", IR_OP_LOG1P, rlx_exp(rlx_neg(rlx_abs(x))))))
COMPOSITE(elu, rlx_where(rlx_gt_s(x, 0), x, ts_unary("rlx_elu", IR_OP_EXPM1, x)))
COMPOSITE(hard_sigmoid, rlx_clamp(rlx_add_s(rlx_div_s(x, 6), 0.5), 0, 1))
COMPOSITE(hard_swish, rlx_mul(x, rlx_hard_sigmoid(x)))
COMPOSITE(mish, rlx_mul(x, rlx_tanh(rlx_softplus(x))))
COMPOSITE(softsign, rlx_div(x, rlx_add_s(rlx_abs(x), 1)))
COMPOSITE(log_sigmoid, rlx_neg(rlx_softplus(rlx_neg(x))))
#undef COMPOSITE
