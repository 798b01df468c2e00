/*
 * build.c — making nodes from the tensor layer: ir_make with the error
 * recorded under the public function's name, and the casts, reshapes and
 * broadcasts that establish the IR's invariants.
 *
 * Constants are never folded into new constants here: a constant the user
 * made may be differentiated against, so it must stay in the graph.
 */
#include <string.h>

#include "ir/cast.h"
#include "tensor/ts.h"

ir_node *ts_make(const char *fn, ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a)
{
    char err[200] = "";
    ir_node *n = ir_make(op, nsrc, src, a, RLX_F32, 0, NULL, err, sizeof err);
    if (!n)
        ts_error(ir_make_failure(op, nsrc, src, a, RLX_F32, 0, NULL), fn, "%s", err);
    return n;
}

ir_node *ts_leaf(const char *fn, ir_op op, const ir_attrs *a, rlx_dtype dt, int rank, const int64_t *shape)
{
    if (ir_dtype_is_complex(dt) && !ir_c64_takes(op)) { /* iota, rand: complex computes only what rlx.h lists */
        ts_error(RLX_E_DTYPE, fn, "%s does not take %s", ir_ops[op].name, ir_dtype_name(dt));
        return NULL;
    }
    char err[200] = "";
    ir_node *n = ir_make(op, 0, NULL, a, dt, rank, shape, err, sizeof err);
    if (!n)
        ts_error(RLX_E_NOMEM, fn, "%s", err);
    return n;
}

ir_node *ts_const_node(const char *fn, rlx_dtype dt, int rank, const int64_t *shape, double v)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.cst.value = ir_cast_const(v, dt); /* exactly what casting v to dt gives */
    return ts_leaf(fn, IR_OP_CONST, &a, dt, rank, shape);
}

rlx_dtype ts_wide_dtype(rlx_dtype dt)
{
    return !ir_dtype_is_narrow(dt) ? dt : ir_dtype_is_float(dt) ? RLX_F32 : RLX_I64;
}

/* c64 is its own float dtype: composites then meet the c64 refusal of
 * their first op that does not take it, never a silent real cast. */
rlx_dtype ts_float_dtype(rlx_dtype dt) { return ir_dtype_is_float(dt) || ir_dtype_is_complex(dt) ? dt : RLX_F32; }

rlx_dtype ts_promote_opt(rlx_dtype dt, rlx_tensor *t) { return t ? ir_promote(dt, ts_node(t)->dtype) : dt; }

ir_node *ts_make_lib(const char *fn, ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a, rlx_dtype back)
{
    ir_node *wide[6] = {NULL, NULL, NULL, NULL, NULL, NULL}, *r = NULL, *out = NULL; /* (attention: 6) */
    if (nsrc > 6) {
        ts_error(RLX_E_INTERNAL, fn, "%s with %d sources", ir_ops[op].name, nsrc);
        return NULL;
    }
    int k = 0;
    for (; k < nsrc; k++)
        if (!(wide[k] = ts_cast_node(fn, src[k], ir_lib_takes(op, src[k]->dtype) ? src[k]->dtype
                                                                                  : ts_wide_dtype(src[k]->dtype))))
            break;
    if (k == nsrc && (r = ts_make(fn, op, nsrc, wide, a)))
        out = ts_cast_node(fn, r, back);
    ir_release(r);
    for (int i = 0; i < k; i++)
        ir_release(wide[i]);
    return out;
}

ir_node *ts_cast_node(const char *fn, ir_node *x, rlx_dtype dt)
{
    if (ir_dtype_is_complex(x->dtype) && !ir_dtype_is_complex(dt)) {
        /* a conversion the caller did not ask for would drop the imaginary
         * part: only rlx_cast, rlx_real, rlx_imag and rlx_abs do that */
        ts_error(RLX_E_DTYPE, fn, "does not take %s (to %s would drop the imaginary part)", ir_dtype_name(x->dtype),
                 ir_dtype_name(dt));
        return NULL;
    }
    return ts_cast_lossy(fn, x, dt);
}

ir_node *ts_cast_lossy(const char *fn, ir_node *x, rlx_dtype dt)
{
    if (x->dtype == dt)
        return ir_retain(x);
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.cast.dtype = dt;
    return ts_make(fn, IR_OP_CAST, 1, &x, &a);
}

ir_node *ts_reshape_node(const char *fn, ir_node *x, int rank, const int64_t *shape)
{
    if (ir_shape_eq(x->rank, x->shape, rank, shape))
        return ir_retain(x);
    /* a reshape of a reshape is one reshape, unless x has dynamic dims
     * and the one reshape would be one a program cannot rebuild per
     * binding where both steps can ([2, S, S] -> [2S, S] -> [2S, S, 1]:
     * [2, S, S] -> [-1, -1, 1] is ambiguous) */
    ir_node *base = ts_reshape_base(x);
    int64_t known;
    if (base != x && (ir_node_numel(x) >= 0 || ts_reshape_rule(base, rank, shape, &known)))
        x = base;
    if (ir_shape_eq(x->rank, x->shape, rank, shape))
        return ir_retain(x);
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.shape.rank = rank;
    if (rank) /* rank 0 may come with no shape array */
        memcpy(a.shape.dims, shape, (size_t)rank * sizeof *shape);
    return ts_make(fn, IR_OP_RESHAPE, 1, &x, &a);
}

ir_node *ts_expand_node(const char *fn, ir_node *x, int rank, const int64_t *shape)
{
    if (ir_shape_eq(x->rank, x->shape, rank, shape))
        return ir_retain(x);
    int64_t padded[IR_MAX_RANK];
    int lead = rank - x->rank;
    for (int i = 0; i < rank; i++)
        padded[i] = i < lead ? 1 : x->shape[i - lead];
    ir_node *r = ts_reshape_node(fn, x, rank, padded);
    if (!r || ir_shape_eq(rank, padded, rank, shape))
        return r;
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.shape.rank = rank;
    memcpy(a.shape.dims, shape, (size_t)rank * sizeof *shape);
    ir_node *e = ts_make(fn, IR_OP_EXPAND, 1, &r, &a);
    ir_release(r);
    return e;
}
