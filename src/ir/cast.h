/*
 * cast.h — what CAST means, once: every layer that converts a value
 * between dtypes in C (the reference evaluator's loads and stores, the
 * simplifier's folds, the scheduler's constants, the tensor layer's
 * constants) calls these, so the rules cannot drift apart.
 *
 *   float -> integer: truncate toward zero, NaN gives 0, out of range
 *                     saturates (+-inf too);
 *   integer -> i32:   wraps modulo 2^32;
 *   any -> bool:      nonzero (NaN too) is 1;
 *   -> f32:           one rounding of the double.
 *
 * The JIT emits the same rules as instructions (cg_kernel.c); the
 * differential tests hold the two together.
 */
#ifndef RLX_IR_CAST_H
#define RLX_IR_CAST_H

#include <stdint.h>

#include "rlx.h"

/* A double as integer dt (RLX_I32 or RLX_I64) holds it. The bounds are
 * doubles: -2^31 and 2^31-1 exactly, -2^63 and 2^63 (INT64_MAX rounds up),
 * so a double at or past either end saturates. */
static inline int64_t ir_cast_f2i(double v, rlx_dtype dt)
{
    double lo = dt == RLX_I32 ? -2147483648.0 : -9223372036854775808.0;
    double hi = dt == RLX_I32 ? 2147483647.0 : 9223372036854775807.0;
    if (v != v)
        return 0;
    if (v <= lo)
        return dt == RLX_I32 ? INT32_MIN : INT64_MIN;
    if (v >= hi)
        return dt == RLX_I32 ? INT32_MAX : INT64_MAX;
    return (int64_t)v;
}

/* A 64-bit integer as an i32 holds it: the low 32 bits. */
static inline int32_t ir_cast_wrap_i32(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }

/* A double as a bool holds it. */
static inline int ir_cast_bool(double v) { return v != 0; }

/* The value a CONST of dt holds when made from v: what casting the double
 * v to dt gives, as a double again (integers truncated, NaN 0, saturated;
 * f32 rounded once). */
static inline double ir_cast_const(double v, rlx_dtype dt)
{
    switch (dt) {
    case RLX_BOOL: return ir_cast_bool(v);
    case RLX_I32:
    case RLX_I64: return (double)ir_cast_f2i(v, dt);
    case RLX_F32: return (double)(float)v;
    default: return v;
    }
}

#endif
