/*
 * cg_math.c — transcendental functions emitted as LLVM IR, so that a fused
 * loop calling them still vectorizes. LLVM's llvm.exp & co. become one
 * scalar libm call per lane; these are small branch-free functions (range
 * reduction, a polynomial, selects for the special values) marked
 * always-inline, which the loop vectorizer widens with the loop.
 *
 * f32: exp, log, tanh and sigmoid compute in f32 (exp and tanh share a
 * minimax core for e^r - 1, log is Cephes'; exp scales by 2^n with an
 * integer add into the exponent field, tanh is e^(2|x|) - 1 over itself
 * + 2), erf too (1 - e^(-x^2) h above 1); sin and cos compute in f64 and
 * round once.
 * Half results (cg_math_fn_lowp): exp, tanh and sigmoid of an f32 value
 * that is only rounded to bf16 or f16 afterwards (cg_kernel.c's
 * mark_lowp says exactly when) use a shorter e^r - 1 core, degree 2 for
 * bf16 (relative error <= 2^-15.5) and 3 for f16 (<= 2^-21), against half
 * an ulp of at least 2^-9 and 2^-12 relative (a reciprocal estimate with
 * a Newton step in place of their divisions measured 3% slower on znver5:
 * the divider is not what limits W1). tanh = u/(u + 2)
 * and sigmoid = 1/(1 + e) hold the error relative to 1 - |f| too, so
 * gelu's 1 + tanh keeps it. The rounded result is the correctly rounded
 * one except where the exact value lies within that error of a rounding
 * midpoint (1 ulp off): tests/test_halfmath.c counts those over all 65,536
 * inputs of each dtype (<= 16 per function; the f32 kernels give about as
 * many). gelu_tanh of a half result is one function (emit_gelu_half):
 * x / (1 + 2^w) with a degree-4 (bf16) or 5 (f16) 2^f, no cancellation.
 * f64: fdlibm-style kernels. The accuracy of each, measured in ulps
 * against double-precision libm, is checked by tests/test_jit.c; sin and
 * cos (Cody-Waite below |x| = 32, Payne-Hanek above, in a function of
 * their own with vector twins) for every finite input by tests/test_trig.c.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "codegen_llvm/cg_internal.h"
#include "codegen_llvm/cg_math_tables.h"
#include "codegen_llvm/cg_trig64_table.h"

typedef struct {
    cg_mod *m;
    LLVMBuilderRef b;
    LLVMTypeRef t;  /* float or double */
    LLVMTypeRef it; /* the integer of the same width */
    bool f64;
    bool failed; /* a function called has no kernel (call1) */
    int lowp;    /* MATH_FULL, or the half dtype's variant (cg_math_fn_lowp) */
} mb;

enum { MATH_FULL = 0, MATH_BF16 = 1, MATH_F16 = 2 };

/* e in every lane of t if t is a vector (the f64 sin/cos bodies are also
 * emitted as vector functions), e itself otherwise */
static LLVMValueRef splat(LLVMTypeRef t, LLVMValueRef e)
{
    if (LLVMGetTypeKind(t) != LLVMVectorTypeKind)
        return e;
    LLVMValueRef v[16];
    unsigned n = LLVMGetVectorSize(t);
    for (unsigned i = 0; i < n && i < 16; i++)
        v[i] = e;
    return LLVMConstVector(v, n);
}
static LLVMTypeRef scalar_of(LLVMTypeRef t)
{
    return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetElementType(t) : t;
}
static LLVMValueRef K(mb *c, double v) { return splat(c->t, LLVMConstReal(scalar_of(c->t), v)); }
static LLVMValueRef KI(mb *c, long long v)
{
    return splat(c->it, LLVMConstInt(scalar_of(c->it), (unsigned long long)v, 1));
}
static LLVMValueRef m_add(mb *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(c->b, a, b, ""); }
static LLVMValueRef m_sub(mb *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(c->b, a, b, ""); }
static LLVMValueRef m_mul(mb *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(c->b, a, b, ""); }
static LLVMValueRef m_div(mb *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(c->b, a, b, ""); }
static LLVMValueRef sel(mb *c, LLVMValueRef k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(c->b, k, a, b, ""); }
static LLVMValueRef fcmp(mb *c, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildFCmp(c->b, p, a, b, "");
}

/* a*b + d, fused where the target has FMA (never a libm call). */
static LLVMValueRef fma3(mb *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef d)
{
    LLVMValueRef args[3] = {a, b, d};
    return cg_intrinsic(c->m, c->b, "llvm.fmuladd", c->t, args, 3);
}

static LLVMValueRef un(mb *c, const char *name, LLVMValueRef x)
{
    return cg_intrinsic(c->m, c->b, name, c->t, &x, 1);
}

static LLVMValueRef copysign_(mb *c, LLVMValueRef mag, LLVMValueRef sgn)
{
    LLVMValueRef args[2] = {mag, sgn};
    return cg_intrinsic(c->m, c->b, "llvm.copysign", c->t, args, 2);
}

/* p(x) = coef[0] + coef[1] x + ... (lowest first), by Horner. */
static LLVMValueRef horner(mb *c, LLVMValueRef x, const double *coef, int n)
{
    LLVMValueRef acc = K(c, coef[n - 1]);
    for (int i = n - 2; i >= 0; i--)
        acc = fma3(c, acc, x, K(c, coef[i]));
    return acc;
}

static LLVMValueRef is_nan(mb *c, LLVMValueRef x) { return fcmp(c, LLVMRealUNO, x, x); }

/* 2^n for an integer-valued float n in the exponent range, as two factors
 * 2^(n>>1) * 2^(n - (n>>1)) so subnormal and near-overflow results come
 * out of one final multiply each. */
static void pow2_pair(mb *c, LLVMValueRef n, LLVMValueRef *s1, LLVMValueRef *s2)
{
    LLVMValueRef safe = sel(c, is_nan(c, n), K(c, 0), n);
    LLVMValueRef ni = LLVMBuildFPToSI(c->b, safe, c->it, "");
    LLVMValueRef n1 = LLVMBuildAShr(c->b, ni, KI(c, 1), "");
    LLVMValueRef n2 = LLVMBuildSub(c->b, ni, n1, "");
    long long bias = c->f64 ? 1023 : 127, shift = c->f64 ? 52 : 23;
    LLVMValueRef e1 = LLVMBuildShl(c->b, LLVMBuildAdd(c->b, n1, KI(c, bias), ""), KI(c, shift), "");
    LLVMValueRef e2 = LLVMBuildShl(c->b, LLVMBuildAdd(c->b, n2, KI(c, bias), ""), KI(c, shift), "");
    *s1 = LLVMBuildBitCast(c->b, e1, c->t, "");
    *s2 = LLVMBuildBitCast(c->b, e2, c->t, "");
}

static LLVMValueRef call1(mb *c, LLVMValueRef fn, LLVMValueRef x)
{
    if (!fn) { /* cg_math_fn has none: the caller's function fails too */
        c->failed = true;
        return LLVMGetUndef(c->t);
    }
    return LLVMBuildCall2(c->b, LLVMGlobalGetValueType(fn), fn, &x, 1, "");
}

/* ------------------------------------------------------------------ exp */

/* (e^r - 1 - r)/r^2 on |r| <= ln2/2, degree 4: minimax for the relative
 * error of e^r - 1 (2^-26; Cephes' degree 5 is a term more than f32
 * needs), the f32-rounded coefficients then nudged by a few ulps so that
 * tanh stays within 2 ulp (checked over every f32, as exp's 1). */
static const double EXPF_P[5] = {0.5, 0x1.5554b4p-3, 0x1.555674p-5, 0x1.1227b0p-7, 0x1.6bebfep-10};
/* The same at degree 2 and 3 (f32 coefficients fitted by weighted least
 * squares, Lawson's iteration): relative error of e^r - 1 at most 2^-15.5
 * and 2^-21 on |r| <= ln2/2, the cores of the bf16 and f16 variants. */
static const double EXPF_P2[3] = {0x1.00022cp-1, 0x1.5708bap-3, 0x1.54de66p-5};
static const double EXPF_P3[4] = {0x1.fffe6ep-2, 0x1.555632p-3, 0x1.570592p-5, 0x1.1138dap-7};

/* f32 range reduction y = n ln2 + r with n = round(y / ln2) by the
 * 1.5*2^23 trick: t = y*log2(e) + 1.5*2^23 holds n in its low mantissa
 * bits, so bitcast(t) << 23 is n << 23 with no float -> int conversion.
 * y = x, with ln2 in two parts (n*C1 exact) as |n| reaches 150; or, for
 * tanh, y = 2x with ln2 in one (|n| <= 29, and tanh weighs the error of
 * e^y down), t then from x (the same product: one step shorter). Gives t
 * (as i32 bits) and e^r - 1 = r + r^2 P(r), P by Estrin: the loop is
 * latency-bound (exp and tanh bodies fill the out-of-order window). */
static LLVMValueRef expm1_core32(mb *c, LLVMValueRef x, bool twice, LLVMValueRef *tbits)
{
    LLVMValueRef t = fma3(c, x, K(c, twice ? 0x1.715476p+1 : 0x1.715476p+0), K(c, 0x1.8p23));
    LLVMValueRef n = m_sub(c, t, K(c, 0x1.8p23)), r;
    if (twice) {
        r = fma3(c, n, K(c, -0x1.62e43p-1), m_add(c, x, x));
    } else {
        r = fma3(c, n, K(c, -0.693359375), x);
        r = fma3(c, n, K(c, 2.12194440e-4), r);
    }
    *tbits = LLVMBuildBitCast(c->b, t, c->it, "");
    LLVMValueRef r2 = m_mul(c, r, r);
    if (c->lowp == MATH_BF16)
        return fma3(c, r2, fma3(c, r, fma3(c, r, K(c, EXPF_P2[2]), K(c, EXPF_P2[1])), K(c, EXPF_P2[0])), r);
    if (c->lowp == MATH_F16)
        return fma3(c, r2, fma3(c, r2, fma3(c, r, K(c, EXPF_P3[3]), K(c, EXPF_P3[2])),
                                fma3(c, r, K(c, EXPF_P3[1]), K(c, EXPF_P3[0]))), r);
    LLVMValueRef p01 = fma3(c, r, K(c, EXPF_P[1]), K(c, EXPF_P[0]));
    LLVMValueRef p23 = fma3(c, r, K(c, EXPF_P[3]), K(c, EXPF_P[2]));
    LLVMValueRef p = fma3(c, r2, fma3(c, r2, K(c, EXPF_P[4]), p23), p01);
    return fma3(c, r2, p, r);
}

/* bits(1.5*2^23) + k: t's bits where n = k */
#define MAGIC_BITS(k) (0x4B400000 + (k))

/* min(max(x, lo), hi) on the bits of an f32 (lo < 0 < hi): unsigned min
 * with lo clamps the negatives, signed min with hi the positives; on the
 * integer pipes. NaN becomes lo or hi: callers restore it. */
static LLVMValueRef clamp_bits32(mb *c, LLVMValueRef x, float lo, float hi)
{
    uint32_t lb, hb;
    memcpy(&lb, &lo, 4);
    memcpy(&hb, &hi, 4);
    LLVMValueRef a[2] = {LLVMBuildBitCast(c->b, x, c->it, ""), KI(c, lb)};
    a[0] = cg_intrinsic(c->m, c->b, "llvm.umin", c->it, a, 2);
    a[1] = KI(c, hb);
    return LLVMBuildBitCast(c->b, cg_intrinsic(c->m, c->b, "llvm.smin", c->it, a, 2), c->t, "");
}

static LLVMValueRef emit_exp32(mb *c, LLVMValueRef x)
{
    /* HI: the largest f32 whose exp is finite; below -104 the result is 0.
     * NaN is restored at the end. */
    const float hi = 88.72283172607421875f, lo = -104.0f;
    LLVMValueRef tb;
    LLVMValueRef y = m_add(c, expm1_core32(c, clamp_bits32(c, x, lo, hi), false, &tb), K(c, 1)); /* in [0.7, 1.42] */
    /* y * 2^n by adding n to y's exponent field: exact in the normal range
     * (n >= -125); below it, add n + 32 and multiply by 2^-32, so subnormal
     * results round once. n <= 128 only where y < 1 (x <= HI). */
    LLVMValueRef small = LLVMBuildICmp(c->b, LLVMIntSLT, tb, KI(c, MAGIC_BITS(-125)), "");
    tb = sel(c, small, LLVMBuildAdd(c->b, tb, KI(c, 32), ""), tb);
    LLVMValueRef yb = LLVMBuildBitCast(c->b, y, c->it, "");
    yb = LLVMBuildAdd(c->b, yb, LLVMBuildShl(c->b, tb, KI(c, 23), ""), "");
    LLVMValueRef res = LLVMBuildBitCast(c->b, yb, c->t, "");
    res = sel(c, small, m_mul(c, res, K(c, 0x1p-32)), res);
    /* x > HI gives inf, NaN stays NaN: both are x + inf */
    return sel(c, fcmp(c, LLVMRealUGT, x, K(c, hi)), m_add(c, x, K(c, INFINITY)), res);
}

static LLVMValueRef emit_exp(mb *c, LLVMValueRef x)
{
    if (!c->f64)
        return emit_exp32(c, x);
    /* Clamp to where the result is inf or 0 anyway (NaN passes through). */
    double hi = 710.0, lo = -746.0;
    LLVMValueRef xc = sel(c, fcmp(c, LLVMRealOGT, x, K(c, hi)), K(c, hi), x);
    xc = sel(c, fcmp(c, LLVMRealOLT, xc, K(c, lo)), K(c, lo), xc);
    LLVMValueRef n = un(c, "llvm.roundeven", m_mul(c, xc, K(c, 0x1.71547652b82fep+0)));
    /* r = x - n ln2 in two parts (ln2_hi has 32 bits: n*ln2_hi exact) */
    LLVMValueRef r = fma3(c, n, K(c, -6.93147180369123816490e-01), xc);
    r = fma3(c, n, K(c, -1.90821492927058770002e-10), r);
    /* Taylor to degree 13 on |r| <= ln2/2: truncation 4e-18 */
    static const double T[12] = {1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
                                 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600,
                                 1.0 / 6227020800.0};
    LLVMValueRef p = horner(c, r, T, 12);
    LLVMValueRef y = m_add(c, fma3(c, m_mul(c, r, r), p, r), K(c, 1));
    LLVMValueRef s1, s2;
    pow2_pair(c, n, &s1, &s2);
    LLVMValueRef res = m_mul(c, m_mul(c, y, s1), s2);
    return sel(c, is_nan(c, x), x, res);
}

/* ------------------------------------------------------------------ log */

static LLVMValueRef emit_log(mb *c, LLVMValueRef x)
{
    /* x = m 2^e with m in [sqrt(1/2), sqrt(2)); subnormals scaled first */
    double tiny = c->f64 ? 0x1p-1022 : 0x1p-126, up = c->f64 ? 0x1p54 : 0x1p23;
    long long upe = c->f64 ? 54 : 23, shift = c->f64 ? 52 : 23, bias = c->f64 ? 1022 : 126;
    long long mmask = c->f64 ? 0x000fffffffffffffll : 0x007fffff, half = c->f64 ? 0x3fe0000000000000ll : 0x3f000000;
    LLVMValueRef sub = fcmp(c, LLVMRealOLT, x, K(c, tiny));
    LLVMValueRef xs = sel(c, sub, m_mul(c, x, K(c, up)), x);
    LLVMValueRef bits = LLVMBuildBitCast(c->b, xs, c->it, "");
    LLVMValueRef e = LLVMBuildSub(c->b, LLVMBuildLShr(c->b, bits, KI(c, shift), ""), KI(c, bias), "");
    e = LLVMBuildSub(c->b, e, sel(c, sub, KI(c, upe), KI(c, 0)), "");
    LLVMValueRef mbits = LLVMBuildOr(c->b, LLVMBuildAnd(c->b, bits, KI(c, mmask), ""), KI(c, half), "");
    LLVMValueRef m = LLVMBuildBitCast(c->b, mbits, c->t, "");
    LLVMValueRef small = fcmp(c, LLVMRealOLT, m, K(c, 0.70710678118654752440));
    e = LLVMBuildSub(c->b, e, LLVMBuildZExt(c->b, small, c->it, ""), "");
    LLVMValueRef f = m_sub(c, sel(c, small, m_add(c, m, m), m), K(c, 1));
    LLVMValueRef ef = LLVMBuildSIToFP(c->b, e, c->t, "");
    LLVMValueRef res;
    if (c->f64) {
        /* fdlibm: log(1+f) = f - (hfsq - s (hfsq + R(s^2))), s = f/(2+f);
         * R is the atanh series 2/3 z + 2/5 z^2 + ... (z <= 0.0295) */
        LLVMValueRef s = m_div(c, f, m_add(c, K(c, 2), f));
        LLVMValueRef z = m_mul(c, s, s);
        double L[10];
        for (int i = 0; i < 10; i++)
            L[i] = 2.0 / (2 * i + 3);
        LLVMValueRef R = m_mul(c, z, horner(c, z, L, 10));
        LLVMValueRef hfsq = m_mul(c, K(c, 0.5), m_mul(c, f, f));
        LLVMValueRef t = m_add(c, m_mul(c, s, m_add(c, hfsq, R)), m_mul(c, ef, K(c, 1.90821492927058770002e-10)));
        res = m_add(c, m_mul(c, ef, K(c, 6.93147180369123816490e-01)), m_sub(c, f, m_sub(c, hfsq, t)));
    } else {
        /* Cephes logf */
        static const double P[9] = {3.3333331174E-1, -2.4999993993E-1, 2.0000714765E-1,
                                    -1.6668057665E-1, 1.4249322787E-1, -1.2420140846E-1,
                                    1.1676998740E-1, -1.1514610310E-1, 7.0376836292E-2};
        LLVMValueRef z = m_mul(c, f, f);
        LLVMValueRef y = m_mul(c, f, m_mul(c, z, horner(c, f, P, 9)));
        y = m_add(c, y, m_mul(c, ef, K(c, -2.12194440e-4)));
        y = m_add(c, y, m_mul(c, K(c, -0.5), z));
        res = m_add(c, m_add(c, f, y), m_mul(c, ef, K(c, 0.693359375)));
    }
    res = sel(c, fcmp(c, LLVMRealOEQ, x, K(c, INFINITY)), x, res);
    res = sel(c, fcmp(c, LLVMRealOEQ, x, K(c, 0)), K(c, -INFINITY), res);
    return sel(c, fcmp(c, LLVMRealULT, x, K(c, 0)), K(c, NAN), res); /* x < 0 or NaN */
}

/* ------------------------------------------------------ tanh, sigmoid */

/* f32: tanh|x| = u / (u + 2) with u = e^(2|x|) - 1 from the exp core
 * (e^(2|x|) - 1 = 2^n (e^r - 1) + (2^n - 1), one fma): no cancellation
 * near 0, one division; u + 2 from the rounded u, whose error then mostly
 * cancels in the quotient. |x| is clamped at 10, beyond which tanh rounds
 * to 1 (2^n stays below 2^30). */
static LLVMValueRef emit_tanh32(mb *c, LLVMValueRef x)
{
    LLVMValueRef ax = un(c, "llvm.fabs", x);
    ax = sel(c, fcmp(c, LLVMRealOGT, ax, K(c, 10)), K(c, 10), ax); /* NaN stays */
    LLVMValueRef tb;
    LLVMValueRef q = expm1_core32(c, ax, true, &tb);
    LLVMValueRef sb = LLVMBuildAdd(c->b, LLVMBuildShl(c->b, tb, KI(c, 23), ""), KI(c, 127 << 23), "");
    LLVMValueRef s = LLVMBuildBitCast(c->b, sb, c->t, "");
    LLVMValueRef u = fma3(c, s, q, m_sub(c, s, K(c, 1)));
    return copysign_(c, m_div(c, u, m_add(c, u, K(c, 2))), x);
}

static LLVMValueRef emit_tanh(mb *c, LLVMValueRef x)
{
    if (!c->f64)
        return emit_tanh32(c, x);
    LLVMValueRef ax = un(c, "llvm.fabs", x);
    LLVMValueRef z = m_mul(c, x, x);
    /* Cephes tanh: x + x z P(z)/Q(z) on |x| < 0.625 */
    static const double P[3] = {-1.61468768441708447952E3, -9.92877231001918586564E1,
                                -9.64399179425052238628E-1};
    static const double Q[4] = {4.84406305325125486048E3, 2.23548839060100448583E3,
                                1.12811678491632931402E2, 1.0};
    LLVMValueRef r = m_div(c, horner(c, z, P, 3), horner(c, z, Q, 4));
    LLVMValueRef small = fma3(c, m_mul(c, x, z), r, x);
    /* 1 - 2/(exp(2|x|) + 1): exact 1 once exp overflows */
    LLVMValueRef e = call1(c, cg_math_fn(c->m, IR_OP_EXP, c->t), m_add(c, ax, ax));
    LLVMValueRef big = copysign_(c, m_sub(c, K(c, 1), m_div(c, K(c, 2), m_add(c, e, K(c, 1)))), x);
    return sel(c, fcmp(c, LLVMRealOLT, ax, K(c, 0.625)), small, big);
}

static LLVMValueRef exp_fn(mb *c)
{
    return c->lowp ? cg_math_fn_lowp(c->m, IR_OP_EXP, c->lowp == MATH_BF16 ? RLX_BF16 : RLX_F16)
                   : cg_math_fn(c->m, IR_OP_EXP, c->t);
}

static LLVMValueRef emit_sigmoid(mb *c, LLVMValueRef x)
{
    /* As the reference: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below. */
    LLVMValueRef e = call1(c, exp_fn(c), LLVMBuildFNeg(c->b, un(c, "llvm.fabs", x), ""));
    LLVMValueRef d = m_add(c, K(c, 1), e);
    return sel(c, fcmp(c, LLVMRealOGE, x, K(c, 0)), m_div(c, K(c, 1), d), m_div(c, e, d));
}

/* ------------------------------------------------ gelu_tanh for halves */

/* 2 * 2^f on |f| <= 1/2, lowest coefficient first, the constant term
 * exactly 2: minimax for the relative error (Remez exchange, then the
 * coefficients rounded to f32), 2^-18.1 at degree 4 (bf16) and 2^-21.1
 * at degree 5 (f16). With the constant exact, x near 0 gives x / 2
 * exactly, as the reference's double does. */
static const double EXP2X2_P4[5] = {2, 0x1.62dfcap+0, 0x1.ebf1b4p-2, 0x1.ca9008p-4, 0x1.409104p-6};
static const double EXP2X2_P5[6] = {2, 0x1.62e39ep+0, 0x1.ebfa4ep-2, 0x1.c74322p-4, 0x1.3cbea8p-6, 0x1.23a608p-9};

/* p(f) by Estrin's scheme: a multiply more than Horner's, a third of its
 * latency (the loop runs out of out-of-order window before it runs out of
 * pipes). */
static LLVMValueRef estrin(mb *c, LLVMValueRef f, const double *p, int n)
{
    LLVMValueRef f2 = m_mul(c, f, f);
    LLVMValueRef hi = n % 2 ? K(c, p[n - 1]) : fma3(c, f, K(c, p[n - 1]), K(c, p[n - 2]));
    for (int i = n % 2 ? n - 3 : n - 4; i >= 0; i -= 2)
        hi = fma3(c, f2, hi, fma3(c, f, K(c, p[i + 1]), K(c, p[i])));
    return hi;
}

/* gelu_tanh(x) = 0.5 x (1 + tanh y), y = sqrt(2/pi) (x + 0.044715 x^3),
 * for a result only rounded to a half dtype (cg_kernel.c's gelu_match):
 * x / (1 + e^(-2y)), the same value without the cancellation of 1 + tanh y
 * (it loses every digit in f32 below x = -3), within 2^-16.5 (bf16) and
 * 2^-20 (f16) of it wherever e^(-2y) is finite; one exp, one division.
 * e^(-2y) = 2^w, w = x (A x^2 + B) = n + f: n by the 1.5*2^23 trick and
 * f = w - n from the exact product (fma), 2^f from the polynomial above
 * (times 2), 2^(n-1) from n's bits shifted into an exponent field, and
 * 1 + 2^f 2^n one fma. x is clamped (on the integer pipes) to where n lies
 * in [-125, 128], so that field stays in [1, 254]: at the top, x >= 9.98,
 * 1 + 2^w is 1; at the bottom, x <= -10.07, the product overflows to inf
 * as 2^w does from x = -10.061 down, and x / inf is -0 where the exact
 * value is below |x| 2^-128. The division takes x itself: NaN stays NaN,
 * -inf gives NaN as the reference's -inf * 0. */
static LLVMValueRef emit_gelu_half(mb *c, LLVMValueRef x)
{
    /* A, B: -2 log2(e) sqrt(2/pi) (0.044715, 1) rounded once */
    const double a = -0x1.a5a7d0p-4, b = -0x1.26aec2p+1;
    LLVMValueRef xc = clamp_bits32(c, x, -10.07f, 9.98f);
    LLVMValueRef s = fma3(c, m_mul(c, xc, xc), K(c, a), K(c, b));
    LLVMValueRef t = fma3(c, xc, s, K(c, 0x1.8p23));
    LLVMValueRef n = m_sub(c, t, K(c, 0x1.8p23));
    LLVMValueRef f = fma3(c, xc, s, LLVMBuildFNeg(c->b, n, ""));
    LLVMValueRef p = c->lowp == MATH_BF16 ? estrin(c, f, EXP2X2_P4, 5) : estrin(c, f, EXP2X2_P5, 6);
    LLVMValueRef sb = LLVMBuildShl(c->b, LLVMBuildBitCast(c->b, t, c->it, ""), KI(c, 23), ""); /* n << 23 */
    sb = LLVMBuildAdd(c->b, sb, KI(c, 126 << 23), "");
    return m_div(c, x, fma3(c, p, LLVMBuildBitCast(c->b, sb, c->t, ""), K(c, 1)));
}

/* -------------------------------------------------------- sin and cos */

/* fdlibm __kernel_sin / __kernel_cos on |r| <= pi/4 (double). */
static LLVMValueRef ksin(mb *c, LLVMValueRef r)
{
    static const double S[5] = {8.33333333332248946124e-03, -1.98412698298579493134e-04,
                                2.75573137070700676789e-06, -2.50507602534068634195e-08,
                                1.58969099521155010221e-10};
    LLVMValueRef z = m_mul(c, r, r), v = m_mul(c, z, r);
    LLVMValueRef p = fma3(c, z, horner(c, z, S, 5), K(c, -1.66666666666666324348e-01));
    return fma3(c, v, p, r);
}

static LLVMValueRef kcos(mb *c, LLVMValueRef r)
{
    static const double C[6] = {4.16666666666666019037e-02, -1.38888888888741095749e-03,
                                2.48015872894767294178e-05, -2.75573143513906633035e-07,
                                2.08757232129817482790e-09, -1.13596475577881948265e-11};
    LLVMValueRef z = m_mul(c, r, r);
    LLVMValueRef rr = m_mul(c, z, horner(c, z, C, 6));
    LLVMValueRef hz = m_mul(c, K(c, 0.5), z), w = m_sub(c, K(c, 1), hz);
    /* w + (((1 - w) - hz) + z*rr): recovers the bits 1 - hz rounds off */
    return m_add(c, w, fma3(c, z, rr, m_sub(c, m_sub(c, K(c, 1), w), hz)));
}

/* sin (is_cos false) or cos of r + rl + q pi/2, q = n mod 4 as a float;
 * rl (NULL: none) a tail below half an ulp of r, taken to first order. */
static LLVMValueRef quadrant(mb *c, LLVMValueRef r, LLVMValueRef rl, LLVMValueRef n, bool is_cos)
{
    LLVMValueRef q = m_sub(c, n, m_mul(c, K(c, 4), un(c, "llvm.floor", m_mul(c, n, K(c, 0.25)))));
    if (is_cos)
        q = m_add(c, q, K(c, 1)); /* cos(x) = sin(x + pi/2) */
    LLVMValueRef s = ksin(c, r), co = kcos(c, r);
    if (rl) { /* sin(r + rl) = s + rl co, cos(r + rl) = co - rl s */
        LLVMValueRef s2 = fma3(c, rl, co, s);
        co = fma3(c, LLVMBuildFNeg(c->b, rl, ""), s, co);
        s = s2;
    }
    LLVMValueRef odd = fcmp(c, LLVMRealOEQ, q, K(c, 1));
    odd = LLVMBuildOr(c->b, odd, fcmp(c, LLVMRealOEQ, q, K(c, 3)), "");
    LLVMValueRef neg = fcmp(c, LLVMRealOGE, q, K(c, 2));
    neg = LLVMBuildAnd(c->b, neg, fcmp(c, LLVMRealOLT, q, K(c, 4)), "");
    LLVMValueRef v = sel(c, odd, co, s);
    return sel(c, neg, LLVMBuildFNeg(c->b, v, ""), v);
}

/* Exact a*b = *hi + *lo: the error term needs a true fma (fmuladd may
 * round the product). */
static void two_prod(mb *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef *hi, LLVMValueRef *lo)
{
    *hi = m_mul(c, a, b);
    LLVMValueRef args[3] = {a, b, LLVMBuildFNeg(c->b, *hi, "")};
    *lo = cg_intrinsic(c->m, c->b, "llvm.fma", c->t, args, 3);
}

/* Exact a + b = *s + *e for any magnitudes (Knuth's two-sum). */
static void two_sum(mb *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef *s, LLVMValueRef *e)
{
    *s = m_add(c, a, b);
    LLVMValueRef bb = m_sub(c, *s, a);
    *e = m_add(c, m_sub(c, a, m_sub(c, *s, bb)), m_sub(c, b, bb));
}

static LLVMValueRef trig64_table(cg_mod *m)
{
    LLVMValueRef g = LLVMGetNamedGlobal(m->mod, "rlx_trig_f64");
    if (g)
        return g;
    LLVMTypeRef row = LLVMArrayType2(m->f64, 4), tab = LLVMArrayType2(row, CG_TRIG_F64_ROWS);
    LLVMValueRef rows[CG_TRIG_F64_ROWS];
    for (int i = 0; i < CG_TRIG_F64_ROWS; i++) {
        LLVMValueRef v[4];
        for (int j = 0; j < 4; j++)
            v[j] = LLVMConstReal(m->f64, CG_TRIG_F64[i][j]);
        rows[i] = LLVMConstArray2(m->f64, v, 4);
    }
    g = LLVMAddGlobal(m->mod, tab, "rlx_trig_f64");
    LLVMSetInitializer(g, LLVMConstArray2(row, rows, CG_TRIG_F64_ROWS));
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
    return g;
}

/* Payne-Hanek for |x| >= 32 (finite): |x| = M 2^s with an integer M < 2^53,
 * and the row of s holds B = 2^s 2/pi mod 4 as F0 + F1 + F2 + F3 at fixed
 * bit positions (cg_trig64_table.h), so x 2/pi = M B mod 4. M F0 is a
 * multiple of 2^-50 below 2^55: its high part mod 4 plus its low part is
 * exact (< 8, 53 bits); M F1 and the error of adding its high part are
 * multiples of 2^-102 below 2^-49, their sum exact too; two-sums carry the
 * rest. The fraction f = x 2/pi - n comes out as a double-double good to
 * about 2^-140 absolute, against |f| > 2^-62 for every double (the worst
 * case is 6381956970095103 * 2^797), and r + r_lo = f pi/2 to about 2^-100 relative.
 * Gives r, r_lo and n for x itself (a negative x negates all three). */
static void reduce_huge64(mb *c, LLVMValueRef x, LLVMValueRef *r, LLVMValueRef *r_lo, LLVMValueRef *n)
{
    cg_mod *m = c->m;
    LLVMBuilderRef b = c->b;
    LLVMValueRef bits = LLVMBuildBitCast(b, x, m->i64, "");
    LLVMValueRef e = LLVMBuildAnd(b, LLVMBuildLShr(b, bits, KI(c, 52), ""), KI(c, 0x7ff), "");
    LLVMValueRef row[2] = {LLVMBuildSub(b, e, KI(c, CG_TRIG_F64_E0), ""), KI(c, 0)};
    row[0] = cg_intrinsic(m, b, "llvm.smax", m->i64, row, 2); /* |x| < 32 and inf/NaN: any row, unused */
    row[1] = KI(c, CG_TRIG_F64_ROWS - 1);
    row[0] = cg_intrinsic(m, b, "llvm.smin", m->i64, row, 2);
    /* M as a double: the mantissa bits under the exponent of 2^52 */
    LLVMValueRef mbits = LLVMBuildOr(b, LLVMBuildAnd(b, bits, KI(c, 0x000fffffffffffffll), ""),
                                     KI(c, 0x4330000000000000ll), "");
    LLVMValueRef M = LLVMBuildBitCast(b, mbits, m->f64, "");
    LLVMValueRef tab = trig64_table(m), F[4];
    LLVMTypeRef tt = LLVMGlobalGetValueType(tab);
    for (int j = 0; j < 4; j++) {
        LLVMValueRef idx[3] = {LLVMConstInt(m->i64, 0, 0), row[0], LLVMConstInt(m->i32, (unsigned)j, 0)};
        F[j] = LLVMBuildLoad2(b, m->f64, LLVMBuildInBoundsGEP2(b, tt, tab, idx, 3, ""), "");
    }
    LLVMValueRef hi0, lo0, hi1, lo1, hi2, lo2, s, e1, t2, e2, fh, e3;
    two_prod(c, M, F[0], &hi0, &lo0);
    LLVMValueRef s0 = m_add(c, fma3(c, K(c, -4), un(c, "llvm.floor", m_mul(c, hi0, K(c, 0.25))), hi0), lo0);
    two_prod(c, M, F[1], &hi1, &lo1);
    two_sum(c, s0, hi1, &s, &e1);
    LLVMValueRef nn = un(c, "llvm.roundeven", s);
    LLVMValueRef f0 = m_sub(c, s, nn); /* exact, |f0| <= 1/2 */
    two_prod(c, M, F[2], &hi2, &lo2);
    two_sum(c, m_add(c, e1, lo1), hi2, &t2, &e2);
    LLVMValueRef l = m_add(c, m_add(c, e2, lo2), m_mul(c, M, F[3]));
    two_sum(c, f0, t2, &fh, &e3);
    LLVMValueRef fl = m_add(c, e3, l);
    /* (fh + fl) pi/2 with pi/2 = P + p */
    const double P = 0x1.921fb54442d18p+0, p = 0x1.1a62633145c07p-54;
    LLVMValueRef rh, rl;
    two_prod(c, fh, K(c, P), &rh, &rl);
    LLVMValueRef t = fma3(c, fl, K(c, P), fma3(c, fh, K(c, p), rl));
    LLVMValueRef res = m_add(c, rh, t);
    LLVMValueRef tail = m_sub(c, t, m_sub(c, res, rh)); /* |rh| >= |t|: exact */
    LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, bits, KI(c, 0), "");
    *r = sel(c, neg, LLVMBuildFNeg(b, res, ""), res);
    *r_lo = sel(c, neg, LLVMBuildFNeg(b, tail, ""), tail);
    *n = sel(c, neg, LLVMBuildFNeg(b, nn, ""), nn);
}

/* f64: Cody-Waite with pi/2 in three parts (30 + 30 + 53 bits) for |x| <
 * 32, where it is within 1 ulp also at the doubles nearest to multiples
 * of pi/2 (tests/test_trig.c checks them; at 29 pi/2 = 45.55, whose
 * distance to a double is 2^-61, the 113 bits of pi/2 give 13 ulp). x may
 * be a vector (c->t). */
static LLVMValueRef trig64_fast(mb *c, LLVMValueRef x, bool is_cos)
{
    LLVMValueRef n = un(c, "llvm.roundeven", m_mul(c, x, K(c, 0x1.45f306dc9c883p-1)));
    LLVMValueRef r = fma3(c, n, K(c, -0x1.921fb54000000p+0), x);
    r = fma3(c, n, K(c, -0x1.10b4611800000p-30), r);
    r = fma3(c, n, K(c, -0x1.313198a2e0370p-61), r);
    LLVMValueRef y = quadrant(c, r, NULL, n, is_cos);
    if (!is_cos) /* sin(-0) = -0 */
        y = sel(c, fcmp(c, LLVMRealOEQ, x, K(c, 0)), x, y);
    return y;
}

static void add_fn_attrs(cg_mod *m, LLVMValueRef fn, bool pure)
{
    static const char *const attrs[] = {"noinline", "nounwind", "willreturn", "nosync"};
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) {
        unsigned kind = LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i]));
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(m->ctx, kind, 0));
    }
    if (pure) { /* memory(none): it reads only the constant table */
        unsigned kind = LLVMGetEnumAttributeKindForName("memory", 6);
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(m->ctx, kind, 0));
    }
}

/* A private function (cg_jit.c makes internal ones always-inline) of type
 * t -> t with blocks entry, big and done, the builder at entry. */
static LLVMValueRef trig64_shell(cg_mod *m, const char *name, LLVMTypeRef t, LLVMBuilderRef b, LLVMBasicBlockRef bb[3])
{
    LLVMValueRef fn = LLVMAddFunction(m->mod, name, LLVMFunctionType(t, &t, 1, 0));
    LLVMSetLinkage(fn, LLVMPrivateLinkage);
    add_fn_attrs(m, fn, true);
    const char *names[3] = {"entry", "big", "done"};
    for (int i = 0; i < 3; i++)
        bb[i] = LLVMAppendBasicBlockInContext(m->ctx, fn, names[i]);
    LLVMPositionBuilderAtEnd(b, bb[0]);
    return fn;
}

/* The vector twin of the scalar f64 sin/cos fn over lanes: the fast path
 * on all lanes; if some lane has |x| >= 32 (or inf/NaN, rare), fn on each
 * lane. The common case costs a compare and a branch per vector. */
static void trig64_variant(cg_mod *m, LLVMValueRef fn, const char *name, unsigned lanes, bool is_cos)
{
    LLVMTypeRef vt = LLVMVectorType(m->f64, lanes), bt = LLVMVectorType(LLVMInt1TypeInContext(m->ctx), lanes);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(m->ctx);
    LLVMBasicBlockRef bb[3];
    LLVMValueRef v = trig64_shell(m, name, vt, b, bb);
    mb c = {m, b, vt, LLVMVectorType(m->i64, lanes), true, false, MATH_FULL};
    LLVMValueRef x = LLVMGetParam(v, 0);
    LLVMValueRef y = trig64_fast(&c, x, is_cos);
    LLVMValueRef big = fcmp(&c, LLVMRealUGE, un(&c, "llvm.fabs", x), K(&c, 32));
    LLVMBuildCondBr(b, cg_intrinsic(m, b, "llvm.vector.reduce.or", bt, &big, 1), bb[1], bb[2]);
    LLVMPositionBuilderAtEnd(b, bb[1]);
    LLVMValueRef acc = LLVMGetUndef(vt);
    for (unsigned i = 0; i < lanes; i++) {
        LLVMValueRef li = LLVMConstInt(m->i32, i, 0);
        LLVMValueRef xi = LLVMBuildExtractElement(b, x, li, "");
        acc = LLVMBuildInsertElement(b, acc, LLVMBuildCall2(b, LLVMGlobalGetValueType(fn), fn, &xi, 1, ""), li, "");
    }
    LLVMBuildBr(b, bb[2]);
    LLVMPositionBuilderAtEnd(b, bb[2]);
    LLVMValueRef phi = LLVMBuildPhi(b, vt, ""), vals[2] = {y, acc};
    LLVMBasicBlockRef from[2] = {bb[0], bb[1]};
    LLVMAddIncoming(phi, vals, from, 2);
    LLVMBuildRet(b, phi);
    LLVMDisposeBuilder(b);
}

/* f64 sin or cos as a function of its own: the fast path, and a branch to
 * Payne-Hanek (reduce_huge64) for |x| >= 32, with vector twins of 2, 4
 * and 8 lanes named in its vector-function-abi-variant attribute: the loop
 * vectorizer calls a twin per vector. In [-10, 10] this costs ~13% over
 * the inline fast path alone; the reduction inline and branch-free on
 * every lane cost 2.4x, the fast path inline plus a twin for the huge
 * lanes only ~30% (the call spills the hoisted constants). 16 lanes get
 * no twin (compile time): such a loop calls the scalar function per lane. */
static LLVMValueRef trig64_fn(cg_mod *m, bool is_cos)
{
    const char *name = is_cos ? "rlx_cos_impl_f64" : "rlx_sin_impl_f64";
    LLVMValueRef fn = LLVMGetNamedFunction(m->mod, name);
    if (fn)
        return fn;
    LLVMBuilderRef b = LLVMCreateBuilderInContext(m->ctx);
    LLVMBasicBlockRef bb[3];
    fn = trig64_shell(m, name, m->f64, b, bb);
    mb c = {m, b, m->f64, m->i64, true, false, MATH_FULL};
    LLVMValueRef x = LLVMGetParam(fn, 0), ax = un(&c, "llvm.fabs", x);
    LLVMValueRef y = trig64_fast(&c, x, is_cos);
    LLVMBuildCondBr(b, fcmp(&c, LLVMRealUGE, ax, K(&c, 32)), bb[1], bb[2]);
    LLVMPositionBuilderAtEnd(b, bb[1]);
    LLVMValueRef r, rl, n;
    reduce_huge64(&c, x, &r, &rl, &n);
    LLVMValueRef yh = quadrant(&c, r, rl, n, is_cos);
    yh = sel(&c, fcmp(&c, LLVMRealUEQ, ax, K(&c, INFINITY)), K(&c, NAN), yh); /* inf, NaN: NaN */
    LLVMBuildBr(b, bb[2]);
    LLVMPositionBuilderAtEnd(b, bb[2]);
    LLVMValueRef phi = LLVMBuildPhi(b, m->f64, ""), vals[2] = {y, yh};
    LLVMBasicBlockRef from[2] = {bb[0], bb[1]};
    LLVMAddIncoming(phi, vals, from, 2);
    LLVMBuildRet(b, phi);
    LLVMDisposeBuilder(b);
    char list[512];
    int len = 0;
    for (unsigned lanes = 2; lanes <= 8; lanes *= 2) {
        char vname[64];
        snprintf(vname, sizeof vname, "%s_v%u", name, lanes);
        trig64_variant(m, fn, vname, lanes, is_cos);
        len += snprintf(list + len, sizeof list - (size_t)len, "%s_ZGV_LLVM_N%uv_%s(%s)", lanes > 2 ? "," : "",
                        lanes, name, vname);
    }
    static const char key[] = "vector-function-abi-variant";
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(m->ctx, key, sizeof key - 1, list, (unsigned)len));
    return fn;
}

static LLVMValueRef emit_trig64(mb *c, LLVMValueRef x, bool is_cos) { return call1(c, trig64_fn(c->m, is_cos), x); }

static LLVMValueRef trig_table(cg_mod *m)
{
    if (m->trig_table)
        return m->trig_table;
    LLVMTypeRef row = LLVMArrayType2(m->f64, 3), tab = LLVMArrayType2(row, 256);
    LLVMValueRef rows[256];
    for (int i = 0; i < 256; i++) {
        LLVMValueRef v[3];
        for (int j = 0; j < 3; j++)
            v[j] = LLVMConstReal(m->f64, CG_TRIG_F32[i][j]);
        rows[i] = LLVMConstArray2(m->f64, v, 3);
    }
    LLVMValueRef g = LLVMAddGlobal(m->mod, tab, "rlx_trig_f32");
    LLVMSetInitializer(g, LLVMConstArray2(row, rows, 256));
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
    return m->trig_table = g;
}

/* f32 x, computed in f64: exact reduction of every f32 by one table row
 * (see cg_math_tables.h), then the f64 kernels, rounded once. tan is the
 * f64 quotient of the two. */
enum { TRIG_SIN, TRIG_COS, TRIG_TAN };

static LLVMValueRef emit_trig32(mb *c32, LLVMValueRef x, int fn)
{
    cg_mod *m = c32->m;
    mb cc = {m, c32->b, m->f64, m->i64, true, false, MATH_FULL}, *c = &cc;
    LLVMBuilderRef b = c->b;
    LLVMValueRef bits = LLVMBuildBitCast(b, x, m->i32, "");
    LLVMValueRef eb = LLVMBuildAnd(b, LLVMBuildLShr(b, bits, LLVMConstInt(m->i32, 23, 0), ""),
                                   LLVMConstInt(m->i32, 255, 0), "");
    LLVMValueRef mant = LLVMBuildAnd(b, bits, LLVMConstInt(m->i32, 0x7fffff, 0), "");
    LLVMValueRef normal = LLVMBuildICmp(b, LLVMIntNE, eb, LLVMConstInt(m->i32, 0, 0), "");
    mant = LLVMBuildOr(b, mant, LLVMBuildSelect(b, normal, LLVMConstInt(m->i32, 0x800000, 0),
                                                LLVMConstInt(m->i32, 0, 0), ""), "");
    LLVMValueRef md = LLVMBuildSIToFP(b, mant, m->f64, "");
    LLVMValueRef idx[3] = {LLVMConstInt(m->i64, 0, 0), LLVMBuildZExt(b, eb, m->i64, ""), NULL};
    LLVMValueRef tab = trig_table(m), F[3];
    LLVMTypeRef tt = LLVMGlobalGetValueType(tab);
    for (int j = 0; j < 3; j++) {
        idx[2] = LLVMConstInt(m->i32, (unsigned)j, 0);
        LLVMValueRef p = LLVMBuildInBoundsGEP2(b, tt, tab, idx, 3, "");
        F[j] = LLVMBuildLoad2(b, m->f64, p, "");
    }
    /* v = m F1 mod 4 (exact), plus m F2 (exact) as a two-sum, plus m F3 */
    LLVMValueRef v = m_mul(c, md, F[0]);
    v = m_sub(c, v, m_mul(c, K(c, 4), un(c, "llvm.floor", m_mul(c, v, K(c, 0.25)))));
    LLVMValueRef t = m_mul(c, md, F[1]);
    LLVMValueRef s = m_add(c, v, t), bb = m_sub(c, s, v);
    LLVMValueRef err = m_add(c, m_sub(c, v, m_sub(c, s, bb)), m_sub(c, t, bb));
    LLVMValueRef lo = fma3(c, md, F[2], err);
    LLVMValueRef n = un(c, "llvm.roundeven", s);
    LLVMValueRef f = m_add(c, m_sub(c, s, n), lo);
    LLVMValueRef r = m_mul(c, f, K(c, 0x1.921fb54442d18p+0));
    LLVMValueRef y = quadrant(c, r, NULL, n, fn == TRIG_COS);
    if (fn == TRIG_TAN) /* the f64 quotient errs by a few 1e-16, also near the poles */
        y = m_div(c, y, quadrant(c, r, NULL, n, true));
    if (fn != TRIG_COS) { /* the reduction worked on |x|: odd functions of -x, -0 included */
        LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, bits, LLVMConstInt(m->i32, 0, 0), "");
        y = sel(c, neg, LLVMBuildFNeg(b, y, ""), y);
    }
    LLVMValueRef res = LLVMBuildFPTrunc(b, y, m->f32, "");
    /* inf and NaN: NaN */
    LLVMValueRef special = LLVMBuildICmp(b, LLVMIntEQ, eb, LLVMConstInt(m->i32, 255, 0), "");
    return LLVMBuildSelect(b, special, LLVMConstReal(m->f32, NAN), res, "");
}

/* ------------------------------------------------------------------ erf */

static LLVMValueRef emit_erf64(mb *c, LLVMValueRef x)
{
    LLVMValueRef ax = un(c, "llvm.fabs", x), z = m_mul(c, x, x);
    LLVMValueRef a = m_mul(c, x, horner(c, z, ERF_A, (int)(sizeof ERF_A / sizeof *ERF_A)));
    /* |x| >= 1: erf = 1 - exp(-x^2) h(|x|), h piecewise */
    LLVMValueRef hb = horner(c, m_sub(c, ax, K(c, 1.5)), ERF_B, (int)(sizeof ERF_B / sizeof *ERF_B));
    LLVMValueRef hc = horner(c, m_sub(c, ax, K(c, 2.75)), ERF_C, (int)(sizeof ERF_C / sizeof *ERF_C));
    LLVMValueRef hd = horner(c, m_sub(c, ax, K(c, 4.75)), ERF_D, (int)(sizeof ERF_D / sizeof *ERF_D));
    LLVMValueRef h = sel(c, fcmp(c, LLVMRealOLT, ax, K(c, 2)), hb, sel(c, fcmp(c, LLVMRealOLT, ax, K(c, 3.5)), hc, hd));
    LLVMValueRef e = call1(c, cg_math_fn(c->m, IR_OP_EXP, c->t), LLVMBuildFNeg(c->b, z, ""));
    LLVMValueRef big = m_sub(c, K(c, 1), m_mul(c, e, h));
    big = sel(c, fcmp(c, LLVMRealOGE, ax, K(c, 6)), K(c, 1), big);
    return sel(c, fcmp(c, LLVMRealOLT, ax, K(c, 1)), a, copysign_(c, big, x));
}

/* f32 erf in f32 (a third of the f64 kernel's cost at twice the lanes):
 * x + x p(x^2) below 1; 1 - exp(-x^2) h(|x|) up to 3.92, where erf first
 * rounds to 1 in f32, with x^2 = t + lo split exactly so that exp sees no
 * rounding of x^2 (exp(-t - lo) = exp(-t) (1 - lo), |lo| < 5e-7). Within
 * 1 ulp of the rounded erf given an f32 exp within 1 ulp
 * (tests/test_jit.c checks both). */
static LLVMValueRef emit_erf32(mb *c, LLVMValueRef x)
{
    LLVMValueRef ax = un(c, "llvm.fabs", x), t = m_mul(c, x, x);
    LLVMValueRef a = fma3(c, x, horner(c, t, ERF32_A, (int)(sizeof ERF32_A / sizeof *ERF32_A)), x);
    LLVMValueRef lo = fma3(c, x, x, LLVMBuildFNeg(c->b, t, ""));
    LLVMValueRef e = call1(c, cg_math_fn(c->m, IR_OP_EXP, c->t), LLVMBuildFNeg(c->b, t, ""));
    e = fma3(c, e, LLVMBuildFNeg(c->b, lo, ""), e);
    LLVMValueRef h = horner(c, m_sub(c, ax, K(c, 2)), ERF32_B, (int)(sizeof ERF32_B / sizeof *ERF32_B));
    LLVMValueRef big = m_sub(c, K(c, 1), m_mul(c, e, h));
    big = sel(c, fcmp(c, LLVMRealOGE, ax, K(c, 3.92)), K(c, 1), big);
    return sel(c, fcmp(c, LLVMRealOLT, ax, K(c, 1)), a, copysign_(c, big, x));
}

/* ------------------------------------ f32 functions through f64 kernels */

/* expm1, log1p, atan, atan2 and pow of f32 compute in f64 with the f64
 * kernels above and round once: their f64 error (a few 1e-16 relative) is
 * far below half an f32 ulp, so the result is the correctly rounded f32
 * except within that distance of a rounding midpoint (tests/test_jit.c
 * checks them in ulps against libm). The f64 versions of these ops are
 * left to the reference evaluator (their jit column in ops.def is f32). */

static LLVMValueRef f64_call(mb *c, ir_op op, LLVMValueRef x)
{
    return call1(c, cg_math_fn(c->m, op, c->m->f64), x);
}

static LLVMValueRef signbit_(mb *c, LLVMValueRef x)
{
    return LLVMBuildICmp(c->b, LLVMIntSLT, LLVMBuildBitCast(c->b, x, c->it, ""), KI(c, 0), "");
}

/* atan of t in [0, 1]: t > tan(pi/8) maps to pi/4 + atan((t-1)/(t+1)),
 * leaving |u| <= 0.4143, where 13 terms of the odd Taylor series are
 * within 2e-12 relative. */
static LLVMValueRef atan01(mb *c, LLVMValueRef t)
{
    LLVMValueRef big = fcmp(c, LLVMRealOGT, t, K(c, 0.41421356237309503));
    LLVMValueRef u = sel(c, big, m_div(c, m_sub(c, t, K(c, 1)), m_add(c, t, K(c, 1))), t);
    double A[13];
    for (int j = 0; j < 13; j++)
        A[j] = (j & 1 ? -1.0 : 1.0) / (2 * j + 1);
    LLVMValueRef p = m_mul(c, u, horner(c, m_mul(c, u, u), A, 13));
    return m_add(c, sel(c, big, K(c, 0.78539816339744830962), K(c, 0)), p);
}

/* atan2 with C99's signed zeros and infinities: the smaller magnitude over
 * the larger (0/0 counts as 0, inf/inf as 1), then the octant. */
static LLVMValueRef atan2_64(mb *c, LLVMValueRef y, LLVMValueRef x)
{
    LLVMValueRef ay = un(c, "llvm.fabs", y), ax = un(c, "llvm.fabs", x);
    LLVMValueRef swap = fcmp(c, LLVMRealOGT, ay, ax);
    LLVMValueRef num = sel(c, swap, ax, ay), den = sel(c, swap, ay, ax);
    LLVMValueRef t = m_div(c, num, den);
    t = sel(c, fcmp(c, LLVMRealOEQ, den, K(c, 0)), K(c, 0), t);
    t = sel(c, fcmp(c, LLVMRealOEQ, num, K(c, INFINITY)), K(c, 1), t);
    LLVMValueRef a = atan01(c, t);
    a = sel(c, swap, m_sub(c, K(c, 1.57079632679489661923), a), a);
    a = sel(c, signbit_(c, x), m_sub(c, K(c, 3.14159265358979323846), a), a);
    return sel(c, fcmp(c, LLVMRealUNO, x, y), K(c, NAN), copysign_(c, a, y));
}

/* expm1: the exp kernel's e^r - 1 Taylor core below |x| = 0.3 (no
 * cancellation), e^x - 1 above (|result| > 0.25). */
static LLVMValueRef expm1_64(mb *c, LLVMValueRef x)
{
    static const double T[12] = {1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
                                 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600,
                                 1.0 / 6227020800.0};
    LLVMValueRef small = fma3(c, m_mul(c, x, x), horner(c, x, T, 12), x);
    LLVMValueRef big = m_sub(c, f64_call(c, IR_OP_EXP, x), K(c, 1));
    LLVMValueRef r = sel(c, fcmp(c, LLVMRealOLT, un(c, "llvm.fabs", x), K(c, 0.3)), small, big);
    return sel(c, fcmp(c, LLVMRealOEQ, x, K(c, 0)), x, r); /* -0 stays -0 */
}

/* log1p: log(u) * x / (u - 1) with u = 1 + x rounded, which cancels the
 * rounding of u (Goldberg); x itself where u rounds to 1. */
static LLVMValueRef log1p_64(mb *c, LLVMValueRef x)
{
    LLVMValueRef u = m_add(c, K(c, 1), x);
    LLVMValueRef r = m_mul(c, f64_call(c, IR_OP_LOG, u), m_div(c, x, m_sub(c, u, K(c, 1))));
    r = sel(c, fcmp(c, LLVMRealOEQ, x, K(c, INFINITY)), x, r);
    return sel(c, fcmp(c, LLVMRealOEQ, u, K(c, 1)), x, r);
}

/* pow by e^(y log|x|) with C99's special cases: x^0 = 1^y = 1 (NaN too),
 * (-1)^+-inf = 1, a negative finite x to a finite non-integer power is
 * NaN, and a negative x (-0, -inf included) to an odd integer power
 * negates. |y log|x|| stays below 2^14 wherever the f32 result is finite
 * and nonzero, so the f64 exp errs by at most about 2e-12 relative there. */
static LLVMValueRef pow_64(mb *c, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef ax = un(c, "llvm.fabs", x);
    LLVMValueRef r = f64_call(c, IR_OP_EXP, m_mul(c, y, f64_call(c, IR_OP_LOG, ax)));
    LLVMValueRef fin = fcmp(c, LLVMRealOLT, un(c, "llvm.fabs", y), K(c, INFINITY));
    LLVMValueRef integral = LLVMBuildAnd(c->b, fin, fcmp(c, LLVMRealOEQ, un(c, "llvm.floor", y), y), "");
    LLVMValueRef hy = m_mul(c, y, K(c, 0.5));
    LLVMValueRef odd = LLVMBuildAnd(c->b, integral, fcmp(c, LLVMRealUNE, un(c, "llvm.floor", hy), hy), "");
    LLVMValueRef neg = signbit_(c, x);
    r = sel(c, LLVMBuildAnd(c->b, neg, odd, ""), LLVMBuildFNeg(c->b, r, ""), r);
    LLVMValueRef negfin = LLVMBuildAnd(c->b, fcmp(c, LLVMRealOLT, x, K(c, 0)), fcmp(c, LLVMRealOGT, x, K(c, -INFINITY)), "");
    LLVMValueRef nan = LLVMBuildAnd(c->b, negfin, LLVMBuildAnd(c->b, fin, LLVMBuildNot(c->b, integral, ""), ""), "");
    r = sel(c, nan, K(c, NAN), r);
    LLVMValueRef one = LLVMBuildOr(c->b, fcmp(c, LLVMRealOEQ, y, K(c, 0)), fcmp(c, LLVMRealOEQ, x, K(c, 1)), "");
    LLVMValueRef m1inf = LLVMBuildAnd(c->b, fcmp(c, LLVMRealOEQ, x, K(c, -1)), LLVMBuildNot(c->b, fin, ""), "");
    m1inf = LLVMBuildAnd(c->b, m1inf, fcmp(c, LLVMRealORD, y, y), "");
    return sel(c, LLVMBuildOr(c->b, one, m1inf, ""), K(c, 1), r);
}

/* op of f32 arguments through the f64 function above, rounded once; NULL
 * for an op without one. */
static LLVMValueRef via_f64(mb *c32, ir_op op, LLVMValueRef a, LLVMValueRef b)
{
    cg_mod *m = c32->m;
    mb cc = {m, c32->b, m->f64, m->i64, true, false, MATH_FULL}, *c = &cc;
    LLVMValueRef x = LLVMBuildFPExt(c->b, a, m->f64, ""), y = b ? LLVMBuildFPExt(c->b, b, m->f64, "") : NULL, r;
    switch (op) {
    case IR_OP_EXPM1: r = expm1_64(c, x); break;
    case IR_OP_LOG1P: r = log1p_64(c, x); break;
    case IR_OP_ATAN: r = atan2_64(c, x, K(c, 1)); break;
    case IR_OP_ATAN2: r = atan2_64(c, x, y); break;
    case IR_OP_POW: r = pow_64(c, x, y); break;
    default: return NULL;
    }
    c32->failed |= cc.failed;
    return LLVMBuildFPTrunc(c->b, r, m->f32, "");
}

/* --------------------------------------------------------------- driver */

/* The body of op's function of type c->t at x (y: the second argument of
 * a binary op), or NULL when there is none for that type. */
static LLVMValueRef math_body(mb *c, ir_op op, LLVMValueRef x, LLVMValueRef y)
{
    bool f64 = c->f64;
    switch (op) {
    case IR_OP_EXP: return emit_exp(c, x);
    case IR_OP_LOG: return emit_log(c, x);
    case IR_OP_TANH: return emit_tanh(c, x);
    case IR_OP_SIGMOID: return emit_sigmoid(c, x);
    case IR_OP_SIN:
    case IR_OP_COS: return f64 ? emit_trig64(c, x, op == IR_OP_COS) : emit_trig32(c, x, op == IR_OP_COS ? TRIG_COS : TRIG_SIN);
    case IR_OP_TAN: return f64 ? NULL : emit_trig32(c, x, TRIG_TAN);
    case IR_OP_EXPM1:
    case IR_OP_LOG1P:
    case IR_OP_ATAN:
    case IR_OP_ATAN2:
    case IR_OP_POW: return f64 ? NULL : via_f64(c, op, x, y);
    case IR_OP_ERF: return f64 ? emit_erf64(c, x) : emit_erf32(c, x);
    default: return NULL;
    }
}

static void set_math_attrs(cg_mod *m, LLVMValueRef fn)
{
    const char *attrs[] = {"alwaysinline", "nounwind", "willreturn", "nosync"};
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) {
        unsigned kind = LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i]));
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(m->ctx, kind, 0));
    }
}

static LLVMValueRef math_fn(cg_mod *m, ir_op op, LLVMTypeRef ty, int lowp)
{
    bool f64 = ty == m->f64;
    int slot = lowp ? 1 + lowp : f64;
    if (ir_ops[op].emit != IR_EMIT_MATH || !ir_op_jits(op, f64 ? RLX_F64 : RLX_F32))
        return NULL;
    if (m->math[op][slot])
        return m->math[op][slot];
    static const char *const sfx[4] = {"f32", "f64", "f32_bf16", "f32_f16"};
    char name[64];
    snprintf(name, sizeof name, "rlx_%s_%s", ir_ops[op].name, sfx[slot]);
    bool binary = ir_ops[op].cls == IR_CLS_BINARY;
    LLVMTypeRef pts[2] = {ty, ty}, ft = LLVMFunctionType(ty, pts, binary ? 2 : 1, 0);
    LLVMValueRef fn = LLVMAddFunction(m->mod, name, ft);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    set_math_attrs(m, fn);
    m->math[op][slot] = fn; /* before the body: tanh calls exp */
    mb c = {m, LLVMCreateBuilderInContext(m->ctx), ty, f64 ? m->i64 : m->i32, f64, false, lowp};
    LLVMPositionBuilderAtEnd(c.b, LLVMAppendBasicBlockInContext(m->ctx, fn, "entry"));
    LLVMValueRef r = math_body(&c, op, LLVMGetParam(fn, 0), binary ? LLVMGetParam(fn, 1) : NULL);
    if (!r || c.failed) {
        LLVMDisposeBuilder(c.b);
        LLVMDeleteFunction(fn);
        m->math[op][slot] = NULL;
        return NULL;
    }
    LLVMBuildRet(c.b, r);
    LLVMDisposeBuilder(c.b);
    return fn;
}

/* NULL unless ops.def marks op MATH on this type and a body exists. */
LLVMValueRef cg_math_fn(cg_mod *m, ir_op op, LLVMTypeRef ty) { return math_fn(m, op, ty, MATH_FULL); }

LLVMValueRef cg_math_fn_lowp(cg_mod *m, ir_op op, rlx_dtype half)
{
    if (op != IR_OP_EXP && op != IR_OP_TANH && op != IR_OP_SIGMOID)
        return cg_math_fn(m, op, m->f32);
    return math_fn(m, op, m->f32, half == RLX_BF16 ? MATH_BF16 : MATH_F16);
}

LLVMValueRef cg_math_gelu_half(cg_mod *m, rlx_dtype half)
{
    const char *name = half == RLX_BF16 ? "rlx_gelu_tanh_f32_bf16" : "rlx_gelu_tanh_f32_f16";
    LLVMValueRef fn = LLVMGetNamedFunction(m->mod, name); /* once per module */
    if (fn)
        return fn;
    LLVMTypeRef pt = m->f32;
    fn = LLVMAddFunction(m->mod, name, LLVMFunctionType(m->f32, &pt, 1, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    set_math_attrs(m, fn);
    mb c = {m, LLVMCreateBuilderInContext(m->ctx), m->f32, m->i32, false, false, half == RLX_BF16 ? MATH_BF16 : MATH_F16};
    LLVMPositionBuilderAtEnd(c.b, LLVMAppendBasicBlockInContext(m->ctx, fn, "entry"));
    LLVMBuildRet(c.b, emit_gelu_half(&c, LLVMGetParam(fn, 0)));
    LLVMDisposeBuilder(c.b);
    return fn;
}
