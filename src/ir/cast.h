/*
 * cast.h — what CAST means, once: every layer that converts a value
 * between dtypes in C (the reference evaluator's loads and stores, the
 * simplifier's folds, the scheduler's constants, the tensor layer's
 * constants) calls these, so the rules cannot drift apart.
 *
 *   float -> integer:   truncate toward zero, NaN gives 0, out of range
 *                       saturates at the target's range (+-inf too);
 *   integer -> integer: wraps modulo 2^bits of the target;
 *   any -> bool:        nonzero (NaN too) is 1;
 *   -> f32, f16, bf16:  one rounding (to nearest even) of the exact value.
 *   real -> c64:        (value as f32, 0); c64 -> real: the real part, then
 *                       the rule above; c64 -> bool: re != 0 || im != 0.
 *   c128:               as c64 with f64 parts; c64 <-> c128 converts each part.
 *
 * The JIT emits the same rules as instructions (cg_kernel.c); the
 * differential tests hold the two together.
 */
#ifndef RLX_IR_CAST_H
#define RLX_IR_CAST_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "rlx.h"

/* The range of integer dtype dt, as int64 (bool is [0, 1]). */
static inline int64_t ir_int_lo(rlx_dtype dt)
{
    switch (dt) {
    case RLX_I8: return INT8_MIN;
    case RLX_I16: return INT16_MIN;
    case RLX_I32: return INT32_MIN;
    case RLX_I64: return INT64_MIN;
    default: return 0; /* bool, u8, u32 */
    }
}
static inline int64_t ir_int_hi(rlx_dtype dt)
{
    switch (dt) {
    case RLX_I8: return INT8_MAX;
    case RLX_U8: return UINT8_MAX;
    case RLX_I16: return INT16_MAX;
    case RLX_I32: return INT32_MAX;
    case RLX_U32: return UINT32_MAX;
    case RLX_I64: return INT64_MAX;
    default: return 1; /* bool */
    }
}

/* A double as integer dt holds it: truncated toward zero, NaN 0, saturated
 * at dt's range. The bounds are exact doubles except INT64_MAX, which
 * rounds up to 2^63, so a double at or past either end saturates. */
static inline int64_t ir_cast_f2i(double v, rlx_dtype dt)
{
    int64_t lo = ir_int_lo(dt), hi = ir_int_hi(dt);
    if (v != v)
        return 0;
    if (v <= (double)lo)
        return lo;
    if (v >= (double)hi)
        return hi;
    return (int64_t)v;
}

/* A 64-bit integer as integer dt holds it: the low bits, sign- or
 * zero-extended (wrapping modulo 2^bits, as C and NumPy). */
static inline int64_t ir_cast_wrap(int64_t v, rlx_dtype dt)
{
    switch (dt) {
    case RLX_I8: return (int8_t)(uint8_t)(uint64_t)v;
    case RLX_U8: return (uint8_t)(uint64_t)v;
    case RLX_I16: return (int16_t)(uint16_t)(uint64_t)v;
    case RLX_I32: return (int32_t)(uint32_t)(uint64_t)v;
    case RLX_U32: return (uint32_t)(uint64_t)v;
    case RLX_BOOL: return v != 0;
    default: return v;
    }
}
static inline int32_t ir_cast_wrap_i32(int64_t v) { return (int32_t)ir_cast_wrap(v, RLX_I32); }

/* A double as a bool holds it. */
static inline int ir_cast_bool(double v) { return v != 0; }

/* Rounds the finite or infinite double v to a binary float with `mant`
 * stored significand bits and exponent bias `bias` (f16: 10, 15; bf16: 7,
 * 127), to nearest even, once; returns its 16-bit pattern. Overflow gives
 * inf, NaN a quiet NaN of v's sign. Works on v's exact value: an f64 is
 * never rounded through f32 first. */
static inline uint16_t ir_round_half(double v, int mant, int bias)
{
    uint16_t sign = signbit(v) ? 0x8000u : 0;
    int64_t inf = (int64_t)((1u << (15 - mant)) - 1) << mant;
    if (v != v)
        return (uint16_t)(sign | inf | (1u << (mant - 1)));
    double a = fabs(v);
    if (a == 0 || isinf(a))
        return (uint16_t)(sign | (a == 0 ? 0 : inf));
    int e;
    (void)frexp(a, &e); /* a in [2^(e-1), 2^e) */
    /* 2^q is the spacing of the target's values at a (the subnormal one
     * below the smallest normal); a / 2^q is exact */
    int q = e - 1 - mant < 1 - bias - mant ? 1 - bias - mant : e - 1 - mant;
    double m = ldexp(a, -q), r = floor(m), frac = m - r;
    if (frac > 0.5 || (frac == 0.5 && fmod(r, 2) == 1))
        r += 1;
    /* a rounds to r * 2^q with r <= 2^(mant+1); its pattern is the biased
     * exponent less one, shifted, plus r (a carry into the exponent and the
     * subnormal case, where the exponent term is 0, fall out) */
    int64_t bits = ((int64_t)(q + mant + bias - 1) << mant) + (int64_t)r;
    return (uint16_t)(sign | (bits >= inf ? inf : bits));
}
static inline uint16_t ir_f16_bits(double v) { return ir_round_half(v, 10, 15); }
static inline uint16_t ir_bf16_bits(double v) { return ir_round_half(v, 7, 127); }

/* The exact value of a 16-bit float pattern. */
static inline double ir_half_value(uint16_t h, int mant, int bias)
{
    int expbits = 15 - mant;
    unsigned e = (h >> mant) & ((1u << expbits) - 1), f = h & ((1u << mant) - 1);
    double v = e == 0 ? ldexp(f, 1 - bias - mant)
               : e == (1u << expbits) - 1 ? (f ? NAN : INFINITY)
                                          : ldexp((double)(f | (1u << mant)), (int)e - bias - mant);
    return h & 0x8000u ? -v : v;
}
static inline double ir_f16_value(uint16_t h) { return ir_half_value(h, 10, 15); }
static inline double ir_bf16_value(uint16_t h) { return ir_half_value(h, 7, 127); }

/* bf16 <-> f32 on bit patterns, for the library kernels' inner loops (the
 * same results as ir_bf16_value / ir_bf16_bits on an f32 value). */
static inline float ir_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint16_t ir_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (f != f)
        return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* The value a CONST of dt holds when made from v: what casting the double
 * v to dt gives, as a double again (integers truncated, NaN 0, saturated;
 * narrower floats rounded once). */
static inline double ir_cast_const(double v, rlx_dtype dt)
{
    switch (dt) {
    case RLX_BOOL: return ir_cast_bool(v);
    case RLX_F32:
    case RLX_C64: return (double)(float)v; /* a c64 CONST is v + 0i */
    case RLX_F64:
    case RLX_C128: return v;
    case RLX_F16: return ir_f16_value(ir_f16_bits(v));
    case RLX_BF16: return ir_bf16_value(ir_bf16_bits(v));
    default: return (double)ir_cast_f2i(v, dt);
    }
}

#endif
