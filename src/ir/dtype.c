/* dtype.c — sizes, classes and NumPy promotion of the element types. */
#include "ir/ir.h"

const ir_op_info ir_ops[IR_OP_COUNT] = {
#define IR_OP(e, nm, ar, cl, em, jt, fl) [e] = {.name = nm, .arity = ar, .cls = cl, .emit = em, .jit = jt, .flags = fl},
#include "ir/ops.def"
#undef IR_OP
};

size_t ir_dtype_size(rlx_dtype dt)
{
    static const size_t size[] = {[RLX_BOOL] = 1, [RLX_I32] = 4, [RLX_I64] = 8, [RLX_F32] = 4, [RLX_F64] = 8};
    return ir_dtype_valid((int)dt) ? size[dt] : 0;
}

bool ir_dtype_valid(int dt) { return dt >= RLX_BOOL && dt <= RLX_F64; }
bool ir_dtype_is_float(rlx_dtype dt) { return dt == RLX_F32 || dt == RLX_F64; }
bool ir_dtype_is_int(rlx_dtype dt) { return dt == RLX_I32 || dt == RLX_I64; }

/* The enum is ordered bool < i32 < i64 < f32 < f64, which is the lattice;
 * "any integer with f32 gives f32" falls out of taking the larger. */
rlx_dtype ir_promote(rlx_dtype a, rlx_dtype b) { return a > b ? a : b; }

const char *ir_dtype_name(rlx_dtype dt)
{
    static const char *const name[] = {[RLX_BOOL] = "bool", [RLX_I32] = "i32", [RLX_I64] = "i64",
                                       [RLX_F32] = "f32", [RLX_F64] = "f64"};
    return ir_dtype_valid((int)dt) ? name[dt] : "?";
}

bool ir_op_jits(ir_op op, rlx_dtype dt)
{
    if (op < 0 || op >= IR_OP_COUNT || !ir_dtype_valid((int)dt))
        return false;
    ir_emit e = ir_ops[op].emit;
    bool loop = e == IR_EMIT_INSTR || e == IR_EMIT_INTRIN || e == IR_EMIT_MATH || e == IR_EMIT_VIEW;
    return loop && (ir_ops[op].jit & IR_JIT_DT(dt));
}
