/*
 * ref_elementwise.c — scalar semantics of every elementwise primitive and
 * the leaves, in two compute domains: double for float sources, 64-bit
 * wrapping integers for bool and integer sources. This file is the
 * definition the JIT is tested against.
 */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "ir/cmplx.h"
#include "runtime/rt.h"

/* ------------------------------------------------------ scalar semantics */

static double f_sigmoid(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }
static double f_sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : x; /* keeps NaN and signed zero */ }

/* The scalar functions set *bad for an op they have no rule for (none of
 * ops.def's rows: rt_eval_elementwise then fails with RLX_E_INTERNAL). */
static double unary_f(ir_op op, double x, bool *bad)
{
    switch (op) {
    case IR_OP_EXP: return exp(x);
    case IR_OP_EXPM1: return expm1(x);
    case IR_OP_LOG: return log(x);
    case IR_OP_LOG1P: return log1p(x);
    case IR_OP_SIN: return sin(x);
    case IR_OP_COS: return cos(x);
    case IR_OP_TAN: return tan(x);
    case IR_OP_ATAN: return atan(x);
    case IR_OP_SQRT: return sqrt(x);
    case IR_OP_RSQRT: return 1 / sqrt(x);
    case IR_OP_RECIP: return 1 / x;
    case IR_OP_TANH: return tanh(x);
    case IR_OP_ERF: return erf(x);
    case IR_OP_SIGMOID: return f_sigmoid(x);
    case IR_OP_NEG: return -x;
    case IR_OP_ABS: return fabs(x);
    case IR_OP_SIGN: return f_sign(x);
    case IR_OP_ROUND: return nearbyint(x); /* default rounding mode: half to even */
    case IR_OP_FLOOR: return floor(x);
    case IR_OP_CEIL: return ceil(x);
    case IR_OP_NOT: return x == 0;
    case IR_OP_CAST: /* the store converts */
    case IR_OP_CONTIGUOUS:
    case IR_OP_STOP_GRAD: return x;
    default: *bad = true; return NAN;
    }
}

static int64_t unary_i(ir_op op, int64_t x, bool *bad)
{
    switch (op) {
    case IR_OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case IR_OP_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case IR_OP_SIGN: return (x > 0) - (x < 0);
    case IR_OP_NOT: return x == 0;
    case IR_OP_ROUND: /* integers are whole already */
    case IR_OP_FLOOR:
    case IR_OP_CEIL:
    case IR_OP_CAST: /* the store converts */
    case IR_OP_CONTIGUOUS:
    case IR_OP_STOP_GRAD: return x;
    default: *bad = true; return 0; /* float math: the tensor layer gives it floats */
    }
}

static double binary_f(ir_op op, double a, double b, bool *bad)
{
    switch (op) {
    case IR_OP_ADD: return a + b;
    case IR_OP_SUB: return a - b;
    case IR_OP_MUL: return a * b;
    case IR_OP_DIV: return a / b;
    case IR_OP_POW: return pow(a, b);
    case IR_OP_MAX: return a != a || b != b ? NAN : a > b ? a : b;
    case IR_OP_MIN: return a != a || b != b ? NAN : a < b ? a : b;
    case IR_OP_ATAN2: return atan2(a, b);
    case IR_OP_REM: return fmod(a, b);
    case IR_OP_EQ: return a == b;
    case IR_OP_NE: return a != b;
    case IR_OP_LT: return a < b;
    case IR_OP_LE: return a <= b;
    case IR_OP_GT: return a > b;
    case IR_OP_GE: return a >= b;
    case IR_OP_AND: return a != 0 && b != 0;
    case IR_OP_OR: return a != 0 || b != 0;
    default: *bad = true; return NAN;
    }
}

static int64_t ipow(int64_t a, int64_t b)
{
    if (b < 0) /* 1/a^|b| truncated toward zero */
        return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    uint64_t r = 1, base = (uint64_t)a;
    for (uint64_t e = (uint64_t)b; e; e >>= 1, base *= base)
        if (e & 1)
            r *= base;
    return (int64_t)r;
}

static int64_t binary_i(ir_op op, int64_t a, int64_t b, bool *bad)
{
    switch (op) {
    case IR_OP_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case IR_OP_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case IR_OP_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    /* Integer division by zero gives 0 (NumPy's value); INT_MIN / -1 wraps. */
    case IR_OP_DIV: return b == 0 ? 0 : b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
    case IR_OP_REM: return b == 0 || b == -1 ? 0 : a % b;
    case IR_OP_POW: return ipow(a, b);
    case IR_OP_MAX: return a > b ? a : b;
    case IR_OP_MIN: return a < b ? a : b;
    case IR_OP_EQ: return a == b;
    case IR_OP_NE: return a != b;
    case IR_OP_LT: return a < b;
    case IR_OP_LE: return a <= b;
    case IR_OP_GT: return a > b;
    case IR_OP_GE: return a >= b;
    case IR_OP_AND: return a && b;
    case IR_OP_OR: return a || b;
    default: *bad = true; return 0; /* atan2: the tensor layer gives it floats */
    }
}

/* c64 (rlx.h): C's complex double arithmetic (Annex G's inf and NaN
 * rules for mul, div and exp), rounded once by the store. */
static rt_cplx cplx_of(double complex z) { return (rt_cplx){creal(z), cimag(z)}; }

static rt_cplx unary_c(ir_op op, rt_cplx x, bool *bad)
{
    switch (op) {
    case IR_OP_EXP: return cplx_of(cexp(CMPLX(x.re, x.im)));
    case IR_OP_NEG: return (rt_cplx){-x.re, -x.im};
    case IR_OP_ABS: return (rt_cplx){hypot(x.re, x.im), 0}; /* the tensor layer casts it to f32 */
    case IR_OP_CONJ: return (rt_cplx){x.re, -x.im};
    case IR_OP_IMAG: return (rt_cplx){x.im, 0};
    case IR_OP_CAST: /* the store converts */
    case IR_OP_CONTIGUOUS:
    case IR_OP_STOP_GRAD: return x;
    default: *bad = true; return (rt_cplx){NAN, NAN};
    }
}

static rt_cplx binary_c(ir_op op, rt_cplx a, rt_cplx b, bool *bad)
{
    switch (op) {
    case IR_OP_ADD: return (rt_cplx){a.re + b.re, a.im + b.im};
    case IR_OP_SUB: return (rt_cplx){a.re - b.re, a.im - b.im};
    case IR_OP_MUL: return cplx_of(CMPLX(a.re, a.im) * CMPLX(b.re, b.im));
    case IR_OP_DIV: return cplx_of(CMPLX(a.re, a.im) / CMPLX(b.re, b.im));
    case IR_OP_EQ: return (rt_cplx){a.re == b.re && a.im == b.im, 0};
    case IR_OP_NE: return (rt_cplx){a.re != b.re || a.im != b.im, 0};
    case IR_OP_COMPLEX: return (rt_cplx){a.re, b.re};
    default: *bad = true; return (rt_cplx){NAN, NAN};
    }
}

/* ------------------------------------------------------------------ leaves */

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t rand_bits(uint64_t seed, uint64_t i) { return splitmix64(splitmix64(seed) ^ (i * 0xd1342543de82ef95ull)); }

double rt_rand_uniform(uint64_t seed, uint64_t i, rlx_dtype dt)
{
    uint64_t r = rand_bits(seed, i);
    /* As many random bits as the type holds, so rounding never gives 1. */
    int bits = dt == RLX_F32 ? 24 : dt == RLX_F16 ? 11 : dt == RLX_BF16 ? 8 : 53;
    return ldexp((double)(r >> (64 - bits)), -bits);
}

double rt_rand_normal(uint64_t seed, uint64_t i)
{
    /* Box-Muller on two uniforms drawn from the even/odd counters of i. */
    double u1 = ((double)(rand_bits(seed, 2 * i) >> 11) + 1) * 0x1p-53; /* (0, 1] */
    double u2 = (double)(rand_bits(seed, 2 * i + 1) >> 11) * 0x1p-53;
    return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

rlx_status rt_eval_leaf(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    (void)in;
    if (n->op == IR_OP_INPUT)
        return rt_fail(ctx, RLX_E_ARG, "input '%s' is not bound (compile the graph and bind it)", n->attr.input.name);
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    void *p = out->st->data;
    int64_t numel = ir_node_numel(n);
    const ir_attrs *a = &n->attr;
    if (n->op == IR_OP_CONST) {
        for (int64_t i = 0; i < numel; i++)
            rt_st_f(p, n->dtype, i, a->cst.value);
    } else if (n->op == IR_OP_IOTA) {
        int64_t inner = 1;
        for (int d = a->iota.axis + 1; d < n->rank; d++)
            inner *= n->shape[d];
        int64_t len = n->shape[a->iota.axis];
        for (int64_t i = 0; i < numel; i++)
            rt_st_f(p, n->dtype, i, a->iota.start + (double)(i / inner % len) * a->iota.step);
    } else if (n->op == IR_OP_RAND) {
        for (int64_t i = 0; i < numel; i++)
            rt_st_f(p, n->dtype, i,
                    a->rand.normal ? rt_rand_normal(a->rand.seed, (uint64_t)i)
                                   : rt_rand_uniform(a->rand.seed, (uint64_t)i, n->dtype));
    } else {
        return rt_fail(ctx, RLX_E_INTERNAL, "leaf %s has no evaluator", ir_ops[n->op].name);
    }
    return RLX_OK;
}

/* RAND_SEEDED: RAND's numbers with the seed read from the source now, so
 * one compiled program draws new numbers per binding. The seed converts
 * as C's (uint64_t) of its signed value, as rlx_rand's argument would. */
rlx_status rt_eval_rand_seeded(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    uint64_t seed = (uint64_t)rt_ld_i(in[0].st->data, n->src[0]->dtype, in[0].off);
    void *p = out->st->data;
    int64_t numel = ir_node_numel(n);
    int normal = n->attr.rands.normal;
    for (int64_t i = 0; i < numel; i++)
        rt_st_f(p, n->dtype, i,
                normal ? rt_rand_normal(seed, (uint64_t)i) : rt_rand_uniform(seed, (uint64_t)i, n->dtype));
    return RLX_OK;
}

/* ------------------------------------------------------------ elementwise */

rlx_status rt_eval_elementwise(rt_ctx *ctx, const ir_node *n, const rt_view *in, rt_view *out)
{
    if (rt_alloc_out(ctx, n, out, false))
        return ctx->status;
    int k = n->nsrc;
    const int64_t *strides[3];
    const char *base[3];
    for (int s = 0; s < k; s++) {
        strides[s] = in[s].strides;
        base[s] = (const char *)in[s].st->data;
    }
    rt_iter it;
    rt_iter_init(&it, n->rank, n->shape, k, strides);
    for (int s = 0; s < k; s++)
        it.off[s] = in[s].off;
    void *dst = out->st->data;
    int64_t numel = ir_node_numel(n);
    ir_op op = n->op;
    rlx_dtype sdt = n->src[k - 1]->dtype, odt = n->dtype;
    bool fdom = ir_dtype_is_float(sdt), cdom = ir_dtype_is_complex(sdt) || ir_dtype_is_complex(odt);
    size_t es = ir_dtype_size(odt);
    bool bad = false;
    for (int64_t i = 0; i < numel && !bad; i++, rt_iter_next(&it)) {
        if (op == IR_OP_WHERE) {
            int64_t c = rt_ld_i(base[0], RLX_BOOL, it.off[0]);
            int pick = c ? 1 : 2;
            memcpy((char *)dst + i * (int64_t)es, base[pick] + it.off[pick] * (int64_t)es, es);
        } else if (cdom) {
            rt_cplx a = rt_ld_c(base[0], sdt, it.off[0]);
            rt_cplx r = k == 1 ? unary_c(op, a, &bad) : binary_c(op, a, rt_ld_c(base[1], sdt, it.off[1]), &bad);
            rt_st_c(dst, odt, i, r);
        } else if (fdom) {
            double a = rt_ld_f(base[0], sdt, it.off[0]);
            double r = k == 1 ? unary_f(op, a, &bad) : binary_f(op, a, rt_ld_f(base[1], sdt, it.off[1]), &bad);
            rt_st_f(dst, odt, i, r);
        } else {
            int64_t a = rt_ld_i(base[0], sdt, it.off[0]);
            int64_t r = k == 1 ? unary_i(op, a, &bad) : binary_i(op, a, rt_ld_i(base[1], sdt, it.off[1]), &bad);
            rt_st_i(dst, odt, i, r);
        }
    }
    if (bad)
        return rt_fail(ctx, RLX_E_INTERNAL, "reference evaluator: no rule for %s on %s", ir_ops[op].name,
                       ir_dtype_name(sdt));
    return RLX_OK;
}
