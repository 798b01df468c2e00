/* dtype.c — sizes, classes and NumPy promotion of the element types. */
#include "ir/ir.h"

const ir_op_info ir_ops[IR_OP_COUNT] = {
#define IR_OP(e, nm, ar, cl, em, jt, fl) [e] = {.name = nm, .arity = ar, .cls = cl, .emit = em, .jit = jt, .flags = fl},
#include "ir/ops.def"
#undef IR_OP
};

/* One row per dtype: its size, name, class and, for integers, width and
 * signedness (what promotion and wrapping read). */
static const struct {
    size_t size;
    const char *name;
    char cls; /* 'b'ool, 'i'nteger, 'f'loat, 'c'omplex */
    bool is_signed;
} dtypes[] = {
    [RLX_BOOL] = {1, "bool", 'b', false}, [RLX_I32] = {4, "i32", 'i', true}, [RLX_I64] = {8, "i64", 'i', true},
    [RLX_F32] = {4, "f32", 'f', true},    [RLX_F64] = {8, "f64", 'f', true}, [RLX_F16] = {2, "f16", 'f', true},
    [RLX_BF16] = {2, "bf16", 'f', true},  [RLX_I8] = {1, "i8", 'i', true},   [RLX_U8] = {1, "u8", 'i', false},
    [RLX_I16] = {2, "i16", 'i', true},    [RLX_U32] = {4, "u32", 'i', false}, [RLX_C64] = {8, "c64", 'c', true},
    [RLX_C128] = {16, "c128", 'c', true},
};

bool ir_dtype_valid(int dt) { return dt >= RLX_BOOL && dt <= RLX_C128; }
size_t ir_dtype_size(rlx_dtype dt) { return ir_dtype_valid((int)dt) ? dtypes[dt].size : 0; }
bool ir_dtype_is_float(rlx_dtype dt) { return ir_dtype_valid((int)dt) && dtypes[dt].cls == 'f'; }
bool ir_dtype_is_int(rlx_dtype dt) { return ir_dtype_valid((int)dt) && dtypes[dt].cls == 'i'; }
bool ir_dtype_is_unsigned(rlx_dtype dt) { return ir_dtype_is_int(dt) && !dtypes[dt].is_signed; }
bool ir_dtype_is_index(rlx_dtype dt) { return dt == RLX_I32 || dt == RLX_I64; }
bool ir_dtype_is_narrow(rlx_dtype dt) { return dt >= RLX_F16 && dt <= RLX_U32; }
bool ir_dtype_is_complex(rlx_dtype dt) { return dt == RLX_C64 || dt == RLX_C128; }
const char *ir_dtype_name(rlx_dtype dt) { return ir_dtype_valid((int)dt) ? dtypes[dt].name : "?"; }

/* The signed integer dtype of a byte width (1, 2, 4, 8; wider is i64). */
static rlx_dtype signed_of_size(size_t bytes)
{
    return bytes <= 1 ? RLX_I8 : bytes == 2 ? RLX_I16 : bytes == 4 ? RLX_I32 : RLX_I64;
}

/* PyTorch's promotion (rlx.h spells it out): bool < integers < floats. */
rlx_dtype ir_promote(rlx_dtype a, rlx_dtype b)
{
    if (a == b || b == RLX_BOOL)
        return a;
    if (a == RLX_BOOL)
        return b;
    if (ir_dtype_is_complex(a) || ir_dtype_is_complex(b)) /* PyTorch's: c64 with f64 widens to c128 */
        return a == RLX_C128 || b == RLX_C128 || a == RLX_F64 || b == RLX_F64 ? RLX_C128 : RLX_C64;
    bool fa = ir_dtype_is_float(a), fb = ir_dtype_is_float(b);
    if (fa != fb)
        return fa ? a : b;
    size_t sa = dtypes[a].size, sb = dtypes[b].size;
    if (fa) /* f16 with bf16: neither holds the other */
        return sa == sb ? RLX_F32 : sa > sb ? a : b;
    if (dtypes[a].is_signed == dtypes[b].is_signed)
        return sa > sb ? a : b;
    rlx_dtype u = dtypes[a].is_signed ? b : a, s = dtypes[a].is_signed ? a : b;
    return dtypes[s].size > dtypes[u].size ? s : signed_of_size(2 * dtypes[u].size);
}

bool ir_lib_takes(ir_op op, rlx_dtype dt)
{
    bool half = dt == RLX_BF16 || dt == RLX_F16;
    return !ir_dtype_is_narrow(dt) || (half && (op == IR_OP_MATMUL || op == IR_OP_ATTENTION || op == IR_OP_ATTENTION_BWD)) ||
           (op == IR_OP_CONV2D && dt == RLX_BF16) || /* oneDNN's bf16 convolution (f16: none without AVX512-FP16) */
           (op == IR_OP_QMATMUL && (dt == RLX_I8 || dt == RLX_U8)); /* the int8 weights themselves */
}

rlx_dtype ir_complex_part(rlx_dtype dt) { return dt == RLX_C128 ? RLX_F64 : RLX_F32; }

bool ir_c64_takes(ir_op op)
{
    switch (op) {
    case IR_OP_CONST: case IR_OP_BUFFER: case IR_OP_INPUT:
    case IR_OP_EXP: case IR_OP_NEG: case IR_OP_ABS: case IR_OP_CAST: case IR_OP_CONTIGUOUS: case IR_OP_STOP_GRAD:
    case IR_OP_CONJ: case IR_OP_IMAG:
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: case IR_OP_EQ: case IR_OP_NE:
    case IR_OP_COMPLEX: case IR_OP_WHERE: case IR_OP_SUM:
    case IR_OP_RESHAPE: case IR_OP_PERMUTE: case IR_OP_EXPAND: case IR_OP_PAD: case IR_OP_SLICE:
    case IR_OP_CAT: case IR_OP_GATHER: case IR_OP_MATMUL:
        return true;
    default:
        return false;
    }
}

bool ir_c64_refuses(ir_op op, int nsrc, ir_node *const *src)
{
    bool c_only = op == IR_OP_CONJ || op == IR_OP_IMAG || op == IR_OP_COMPLEX;
    for (int s = 0; s < nsrc; s++)
        if (ir_dtype_is_complex(src[s]->dtype) ? !ir_c64_takes(op) : c_only)
            return true;
    return false;
}

bool ir_op_jits(ir_op op, rlx_dtype dt)
{
    if (op < 0 || op >= IR_OP_COUNT || !ir_dtype_valid((int)dt))
        return false;
    ir_emit e = ir_ops[op].emit;
    bool loop = e == IR_EMIT_INSTR || e == IR_EMIT_INTRIN || e == IR_EMIT_MATH || e == IR_EMIT_VIEW;
    return loop && (ir_ops[op].jit & IR_JIT_DT(dt));
}
