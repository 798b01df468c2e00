/*
 * linalg.c — matrix products (matmul, matmul_t, linear, linear_act) and
 * linear solves (solve, inv).
 *
 * The MATMUL and SOLVE primitives take two operands of one rank >= 2, one
 * dtype and equal batch dims. Everything NumPy users expect on top of that
 * (1-D operands, batch broadcasting, promotion) is made explicit here, with
 * reshapes, permutes and expands, so that the runtime sees only the plain
 * batched form. Transposed operands stay views: the BLAS evaluator reads
 * them through their strides without a copy.
 */
#include <math.h>
#include <string.h>

#include "tensor/ts.h"

/* Swaps the last two axes of x (rank >= 2) as a PERMUTE view. */
static ir_node *swap_last_two(const char *fn, ir_node *x)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < x->rank; i++)
        a.perm.perm[i] = i;
    a.perm.perm[x->rank - 2] = x->rank - 1;
    a.perm.perm[x->rank - 1] = x->rank - 2;
    return ts_make(fn, IR_OP_PERMUTE, 1, &x, &a);
}

/* Casts x to dt, then broadcasts it to batch + its own last two dims. */
static ir_node *prep_operand(const char *fn, ir_node *x, rlx_dtype dt, int nb, const int64_t *batch)
{
    int64_t shape[IR_MAX_RANK];
    memcpy(shape, batch, (size_t)nb * sizeof *shape);
    shape[nb] = x->shape[x->rank - 2];
    shape[nb + 1] = x->shape[x->rank - 1];
    ir_node *c = ts_cast_node(fn, x, dt);
    ir_node *e = c ? ts_expand_node(fn, c, nb + 2, shape) : NULL;
    ir_release(c);
    return e;
}

/* Broadcasts the batch dims (all but the last two) of a and b into batch;
 * false with an RLX_E_SHAPE error naming the shapes as the user gave them. */
static bool broadcast_batch(const char *fn, const ir_node *a, const ir_node *b, const char *ua, const char *ub,
                            int *nb, int64_t *batch)
{
    if (!ir_broadcast_shapes(a->rank - 2, a->shape, b->rank - 2, b->shape, nb, batch) || *nb + 2 > IR_MAX_RANK) {
        ts_error(RLX_E_SHAPE, fn, "batch dims do not broadcast: %s and %s", ua, ub);
        return false;
    }
    return true;
}

/* Makes op (MATMUL or SOLVE) over a2 and b2 (rank >= 2 each, already
 * promoted-compatible), broadcasting their batch dims; the result has
 * rank nb + 2. */
static ir_node *batched(const char *fn, ir_op op, ir_node *a2, ir_node *b2, rlx_dtype dt, int nb,
                        const int64_t *batch)
{
    ir_node *src[2];
    src[0] = prep_operand(fn, a2, dt, nb, batch);
    src[1] = src[0] ? prep_operand(fn, b2, dt, nb, batch) : NULL;
    ir_node *out = src[1] ? ts_make_lib(fn, op, 2, src, NULL, dt) : NULL;
    ir_release(src[0]);
    ir_release(src[1]);
    return out;
}

/* a @ b, or a @ swap_last_two(b) when bt (a 1-D b is not transposed). */
static rlx_tensor *matmul_impl(const char *fn, rlx_tensor *a, rlx_tensor *b, bool bt)
{
    if (ts_null(fn, "a", a) || ts_null(fn, "b", b))
        return NULL;
    ir_node *an = ts_node(a), *bn = ts_node(b);
    if (an->dtype == RLX_BOOL || bn->dtype == RLX_BOOL) {
        ts_error(RLX_E_DTYPE, fn, "bool operands are not supported (%s @ %s); cast them first",
                 rlx_dtype_name(an->dtype), rlx_dtype_name(bn->dtype));
        return NULL;
    }
    if (an->rank == 0 || bn->rank == 0) {
        ts_error(RLX_E_SHAPE, fn, "operands must have rank >= 1, got %s @ %s", ts_shape_str(an), ts_shape_str(bn));
        return NULL;
    }
    const char *tsuf = bt && bn->rank >= 2 ? "^T" : "";
    ir_node *a2 = NULL, *b2 = NULL, *bv = NULL, *out = NULL;
    /* NumPy: a 1-D a is a row [1, k], a 1-D b a column [k, 1]; the added
     * dims are dropped from the result. */
    int64_t row[2] = {1, an->shape[0]}, col[2] = {bn->shape[0], 1};
    a2 = an->rank == 1 ? ts_reshape_node(fn, an, 2, row) : ir_retain(an);
    if (!a2)
        goto done;
    if (bn->rank == 1)
        b2 = ts_reshape_node(fn, bn, 2, col);
    else
        b2 = bt ? swap_last_two(fn, bn) : ir_retain(bn);
    if (!b2)
        goto done;
    if (a2->shape[a2->rank - 1] != b2->shape[b2->rank - 2]) {
        ts_error(RLX_E_SHAPE, fn, "inner dimensions differ: %s @ %s%s", ts_shape_str(an), ts_shape_str(bn), tsuf);
        goto done;
    }
    int nb;
    int64_t shape[IR_MAX_RANK];
    if (!broadcast_batch(fn, a2, b2, ts_shape_str(an), ts_shape_str(bn), &nb, shape))
        goto done;
    bv = batched(fn, IR_OP_MATMUL, a2, b2, ir_promote(an->dtype, bn->dtype), nb, shape);
    if (!bv)
        goto done;
    /* Result: batch + [m] unless a was 1-D + [n] unless b was 1-D. */
    int r = nb;
    if (an->rank > 1)
        shape[r++] = bv->shape[nb];
    if (bn->rank > 1)
        shape[r++] = bv->shape[nb + 1];
    out = ts_reshape_node(fn, bv, r, shape);
done:
    ir_release(a2);
    ir_release(b2);
    ir_release(bv);
    return ts_wrap(out);
}

rlx_tensor *rlx_matmul(rlx_tensor *a, rlx_tensor *b) { return matmul_impl("rlx_matmul", a, b, false); }
rlx_tensor *rlx_matmul_t(rlx_tensor *a, rlx_tensor *b) { return matmul_impl("rlx_matmul_t", a, b, true); }

/* Checks the operands of linear; true when they fit. */
static bool linear_check(const char *fn, rlx_tensor *x, rlx_tensor *w, rlx_tensor *b)
{
    if (ts_null(fn, "x", x) || ts_null(fn, "w", w))
        return false;
    ir_node *xn = ts_node(x), *wn = ts_node(w), *bn = b ? ts_node(b) : NULL;
    if (xn->dtype == RLX_BOOL || wn->dtype == RLX_BOOL || (bn && bn->dtype == RLX_BOOL)) {
        ts_error(RLX_E_DTYPE, fn, "bool operands are not supported (x %s, w %s%s%s)", rlx_dtype_name(xn->dtype),
                 rlx_dtype_name(wn->dtype), bn ? ", b " : "", bn ? rlx_dtype_name(bn->dtype) : "");
        return false;
    }
    if (wn->rank != 2) {
        ts_error(RLX_E_SHAPE, fn, "w must be [out, in], got %s", ts_shape_str(wn));
        return false;
    }
    if (xn->rank < 1 || xn->shape[xn->rank - 1] != wn->shape[1]) {
        ts_error(RLX_E_SHAPE, fn, "x %s does not end in in = %lld of w %s", ts_shape_str(xn),
                 (long long)wn->shape[1], ts_shape_str(wn));
        return false;
    }
    if (bn && (bn->rank != 1 || bn->shape[0] != wn->shape[0])) {
        ts_error(RLX_E_SHAPE, fn, "b must be [%lld] (out of w %s), got %s", (long long)wn->shape[0],
                 ts_shape_str(wn), ts_shape_str(bn));
        return false;
    }
    return true;
}

/* x @ w^T + b inside an open composite scope. Inputs of rank > 2 are
 * flattened to one matrix so that w is multiplied once, not per batch. */
static rlx_tensor *linear_body(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b)
{
    ir_node *xn = ts_node(x);
    int64_t in = xn->shape[xn->rank - 1], rows = ir_numel(xn->rank - 1, xn->shape);
    rlx_tensor *y;
    if (xn->rank > 2 && rows >= 0) {
        int64_t flat[2] = {rows, in};
        int64_t shape[IR_MAX_RANK];
        memcpy(shape, xn->shape, sizeof shape);
        shape[xn->rank - 1] = ts_node(w)->shape[0];
        y = rlx_reshape(rlx_matmul_t(rlx_reshape(x, 2, flat), w), xn->rank, shape);
    } else {
        y = rlx_matmul_t(x, w);
    }
    return b ? rlx_add(y, b) : y;
}

/* The dtype linear returns: x, w and b promoted. */
static rlx_dtype linear_dtype(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b)
{
    return ts_promote_opt(ir_promote(ts_node(x)->dtype, ts_node(w)->dtype), b);
}

/* t in its wide dtype (ts_wide_dtype), NULL passing: linear and its bias
 * compute f16/bf16 in f32 (narrow integers in i64) and round once. */
static rlx_tensor *widen(rlx_tensor *t)
{
    return t ? rlx_cast(t, ts_wide_dtype(ts_node(t)->dtype)) : NULL;
}

rlx_tensor *rlx_linear(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b)
{
    const char *fn = "rlx_linear";
    if (!linear_check(fn, x, w, b) || !ts_open(fn))
        return NULL;
    rlx_tensor *bw = widen(b);
    if (b && !bw) /* out of memory: NULL must not mean "no bias" */
        return ts_close(NULL);
    return ts_close_as(linear_body(widen(x), widen(w), bw), linear_dtype(x, w, b));
}

rlx_tensor *rlx_linear_act(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b, rlx_act act)
{
    const char *fn = "rlx_linear_act";
    if (!linear_check(fn, x, w, b))
        return NULL;
    if ((int)act < RLX_ACT_NONE || (int)act > RLX_ACT_SIGMOID) {
        ts_error(RLX_E_ARG, fn, "unknown activation %d", (int)act);
        return NULL;
    }
    if (!ts_open(fn))
        return NULL;
    rlx_dtype out = linear_dtype(x, w, b);
    if (act != RLX_ACT_NONE && act != RLX_ACT_RELU)
        out = ts_float_dtype(out);
    rlx_tensor *bw = widen(b);
    if (b && !bw) /* out of memory: NULL must not mean "no bias" */
        return ts_close(NULL);
    rlx_tensor *y = linear_body(widen(x), widen(w), bw);
    switch (act) {
    case RLX_ACT_RELU: y = rlx_relu(y); break;
    case RLX_ACT_GELU: y = rlx_gelu(y); break;
    case RLX_ACT_GELU_TANH: y = rlx_gelu_tanh(y); break;
    case RLX_ACT_SILU: y = rlx_silu(y); break;
    case RLX_ACT_TANH: y = rlx_tanh(y); break;
    case RLX_ACT_SIGMOID: y = rlx_sigmoid(y); break;
    default: break;
    }
    return ts_close_as(y, out);
}

/* The float dtype solve computes in: promotion, with integers and bool in f32. */
static rlx_dtype solve_dtype(rlx_dtype a, rlx_dtype b)
{
    rlx_dtype dt = ir_promote(a, b);
    return ir_dtype_is_float(dt) ? dt : RLX_F32;
}

/* Checks that a is a stack of square matrices. */
static bool check_square(const char *fn, const ir_node *an)
{
    if (an->rank < 2 || an->shape[an->rank - 1] != an->shape[an->rank - 2]) {
        ts_error(RLX_E_SHAPE, fn, "a must be [..., n, n], got %s", ts_shape_str(an));
        return false;
    }
    return true;
}

rlx_tensor *rlx_solve(rlx_tensor *a, rlx_tensor *b)
{
    const char *fn = "rlx_solve";
    if (ts_null(fn, "a", a) || ts_null(fn, "b", b))
        return NULL;
    ir_node *an = ts_node(a), *bn = ts_node(b);
    if (!check_square(fn, an))
        return NULL;
    int64_t n = an->shape[an->rank - 1];
    /* NumPy 2: b is a vector only when it is 1-D; otherwise [..., n, k]. */
    bool vec = bn->rank == 1;
    if (bn->rank == 0 || bn->shape[vec ? 0 : bn->rank - 2] != n) {
        ts_error(RLX_E_SHAPE, fn, "b must be [n] or [..., n, k] with n = %lld of a %s, got %s", (long long)n,
                 ts_shape_str(an), ts_shape_str(bn));
        return NULL;
    }
    int64_t col[2] = {n, 1};
    ir_node *b2 = vec ? ts_reshape_node(fn, bn, 2, col) : ir_retain(bn), *x = NULL, *out = NULL;
    int nb;
    int64_t shape[IR_MAX_RANK];
    if (!b2 || !broadcast_batch(fn, an, b2, ts_shape_str(an), ts_shape_str(bn), &nb, shape))
        goto done;
    x = batched(fn, IR_OP_SOLVE, an, b2, solve_dtype(an->dtype, bn->dtype), nb, shape);
    if (!x)
        goto done;
    shape[nb] = n;
    shape[nb + 1] = x->shape[nb + 1];
    out = ts_reshape_node(fn, x, vec ? nb + 1 : nb + 2, shape);
done:
    ir_release(b2);
    ir_release(x);
    return ts_wrap(out);
}

rlx_tensor *rlx_inv(rlx_tensor *a)
{
    const char *fn = "rlx_inv";
    if (ts_null(fn, "a", a) || !check_square(fn, ts_node(a)) || !ts_open(fn))
        return NULL;
    ir_node *an = ts_node(a);
    /* solve broadcasts the [n, n] identity over a's batch dims. */
    rlx_tensor *eye = rlx_eye(solve_dtype(an->dtype, an->dtype), an->shape[an->rank - 1]);
    return ts_close(rlx_solve(a, eye));
}
