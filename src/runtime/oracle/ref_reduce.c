/*
 * ref_reduce.c — sum, prod, max, min, argmax, argmin over an axis mask.
 * Floats accumulate in double, integers in wrapping int64. NaN wins max
 * and min (and argmax/argmin pick the first NaN, as NumPy).
 */
#include <math.h>
#include <string.h>

#include "runtime/rt.h"

static double lowest_f(rlx_dtype dt) { return ir_dtype_is_float(dt) ? -INFINITY : (double)ir_int_lo(dt); }
static double highest_f(rlx_dtype dt) { return ir_dtype_is_float(dt) ? INFINITY : (double)ir_int_hi(dt); }
static int64_t lowest_i(rlx_dtype dt) { return ir_int_lo(dt); }
static int64_t highest_i(rlx_dtype dt) { return ir_int_hi(dt); }

typedef struct {
    double f, im; /* im: a c64 sum's imaginary part */
    int64_t i;
    int64_t arg;
    bool seen;
} acc;

/* False for an op that is not a reduction (rt_eval_reduce then fails), so
 * acc_add_f and acc_add_i see only the ops listed here. */
static bool acc_init(acc *a, ir_op op, rlx_dtype dt)
{
    a->arg = 0;
    a->seen = false;
    switch (op) {
    case IR_OP_SUM: a->f = 0; a->im = 0; a->i = 0; return true;
    case IR_OP_PROD: a->f = 1; a->i = 1; return true;
    case IR_OP_RMAX: a->f = lowest_f(dt); a->i = lowest_i(dt); return true;
    case IR_OP_RMIN: a->f = highest_f(dt); a->i = highest_i(dt); return true;
    case IR_OP_ARGMAX: /* they use seen */
    case IR_OP_ARGMIN: a->f = 0; a->i = 0; return true;
    default: return false;
    }
}

static void acc_add_f(acc *a, ir_op op, double v, int64_t pos)
{
    bool isnan_acc = a->f != a->f;
    switch (op) {
    case IR_OP_SUM: a->f += v; break;
    case IR_OP_PROD: a->f *= v; break;
    case IR_OP_RMAX: if (!isnan_acc && (v != v || v > a->f)) a->f = v; break;
    case IR_OP_RMIN: if (!isnan_acc && (v != v || v < a->f)) a->f = v; break;
    case IR_OP_ARGMAX:
    case IR_OP_ARGMIN:
        if (!a->seen || (!isnan_acc && (v != v || (op == IR_OP_ARGMAX ? v > a->f : v < a->f)))) {
            a->f = v;
            a->arg = pos;
            a->seen = true;
        }
        break;
    default: break; /* not a reduction: acc_init refused it */
    }
}

static void acc_add_i(acc *a, ir_op op, int64_t v, int64_t pos)
{
    switch (op) {
    case IR_OP_SUM: a->i = (int64_t)((uint64_t)a->i + (uint64_t)v); break;
    case IR_OP_PROD: a->i = (int64_t)((uint64_t)a->i * (uint64_t)v); break;
    case IR_OP_RMAX: if (v > a->i) a->i = v; break;
    case IR_OP_RMIN: if (v < a->i) a->i = v; break;
    case IR_OP_ARGMAX:
    case IR_OP_ARGMIN:
        if (!a->seen || (op == IR_OP_ARGMAX ? v > a->i : v < a->i)) {
            a->i = v;
            a->arg = pos;
            a->seen = true;
        }
        break;
    default: break; /* not a reduction: acc_init refused it */
    }
}

rlx_status rt_eval_reduce(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    const ir_node *x = n->src[0];
    int64_t on = ir_node_numel(n), xn = ir_node_numel(x);
    acc probe;
    if (!acc_init(&probe, n->op, x->dtype))
        return rt_fail(ctx, RLX_E_INTERNAL, "reference evaluator: %s is not a reduction", ir_ops[n->op].name);
    acc *accs = ir_alloc((size_t)(on ? on : 1) * sizeof *accs);
    if (!accs)
        return rt_fail(ctx, RLX_E_NOMEM, "out of memory for %s accumulators", ir_ops[n->op].name);
    if (rt_alloc_out(ctx, n, out, false)) {
        ir_free(accs);
        return ctx->status;
    }
    ir_op op = n->op;
    rlx_dtype dt = x->dtype;
    bool fdom = ir_dtype_is_float(dt);
    for (int64_t i = 0; i < on; i++)
        acc_init(&accs[i], op, dt);
    int64_t ostrides[IR_MAX_RANK];
    rt_contiguous_strides(n->rank, n->shape, ostrides);
    int axis = 0;
    for (int d = 0; d < x->rank; d++) {
        if (n->attr.red.mask >> d & 1) {
            ostrides[d] = 0;
            axis = d;
        }
    }
    const int64_t *strides[2] = {in[0].strides, ostrides};
    rt_iter it;
    rt_iter_init(&it, x->rank, x->shape, 2, strides);
    it.off[0] = in[0].off;
    const char *src = in[0].st->data;
    for (int64_t i = 0; i < xn; i++, rt_iter_next(&it)) {
        acc *a = &accs[it.off[1]];
        if (ir_dtype_is_complex(dt)) { /* only SUM takes complex (ir_c64_takes) */
            rt_cplx v = rt_ld_c(src, dt, it.off[0]);
            a->f += v.re;
            a->im += v.im;
        } else if (fdom)
            acc_add_f(a, op, rt_ld_f(src, dt, it.off[0]), it.idx[axis]);
        else
            acc_add_i(a, op, rt_ld_i(src, dt, it.off[0]), it.idx[axis]);
    }
    void *dst = out->st->data;
    for (int64_t i = 0; i < on; i++) {
        if (op == IR_OP_ARGMAX || op == IR_OP_ARGMIN)
            rt_st_i(dst, RLX_I64, i, accs[i].arg);
        else if (ir_dtype_is_complex(dt))
            rt_st_c(dst, n->dtype, i, (rt_cplx){accs[i].f, accs[i].im});
        else if (fdom)
            rt_st_f(dst, n->dtype, i, accs[i].f);
        else
            rt_st_i(dst, n->dtype, i, accs[i].i);
    }
    ir_free(accs);
    return RLX_OK;
}
