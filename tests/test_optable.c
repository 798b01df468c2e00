/*
 * test_optable.c — ops.def as one fact: every primitive against every
 * layer, failing on any gap.
 *
 * For each row of ops.def:
 *  - reference semantics: the oracle has an evaluator for it
 *    (rt_ref_eval_fn), unless it is a LOAD leaf, which is never computed;
 *  - VJP: autodiff has a row for it (ad_vjp_kind; whether each rule is
 *    right and exercised is test_grad's vjp_table_covers_every_primitive);
 *  - a case in CASES below, whose values are checked on both backends: the
 *    reference evaluator against values written here, the JIT against the
 *    reference evaluator on every dtype the op takes;
 *  - codegen or declared fallback: realized alone, the node is one LOOP
 *    kernel where the emit and jit columns say the JIT computes it on
 *    those dtypes (so the code generator and cg_math.c must have a rule),
 *    one REF kernel where they say it falls back; a VIEW row is published
 *    as a view and fuses into its reader's LOOP kernel.
 */
#include "harness.h"

#include <stdbool.h>

#include "runtime/rt.h"
#include "tensor/ts.h"

/* internal: autodiff (grad.c), as test_grad declares them */
int ad_vjp_kind(int op);
enum { AD_MISSING = 0 };

static void use_jit(bool on) { setenv("RLX_BACKEND", on ? "jit" : "ref", 1); }

/* ------------------------------------------------------------ inputs */

static const int64_t S23[2] = {2, 3};
static const double AV[6] = {-1.5, -0.5, 0.25, 0.5, 1, 2.5};
static const double POSV[6] = {0.25, 0.5, 1, 1.5, 2, 3}; /* log, sqrt, ... */
static const double BV[6] = {0.5, 2, -1, 1.5, -2, 3};

/* A fresh [2,3] buffer of dt holding v (quantized into q). */
static ir_node *input(rlx_dtype dt, const double *v, double *q)
{
    double tmp[6];
    memcpy(tmp, v, sizeof tmp);
    rlx_tensor *t = test_tensor(dt, 2, S23, tmp);
    if (q)
        memcpy(q, tmp, sizeof tmp);
    return ts_node(t);
}

static ir_node *input_shape(rlx_dtype dt, int rank, const int64_t *shape, const double *v)
{
    double tmp[16];
    memcpy(tmp, v, (size_t)test_numel(rank, shape) * sizeof *tmp);
    return ts_node(test_tensor(dt, rank, shape, tmp));
}

static rlx_tensor *make(ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a)
{
    static const ir_attrs none;
    return ts_wrap(ts_make("test_optable", op, nsrc, src, a ? a : &none));
}

/* ----------------------------------------------------- the case table */

/* A case builds its primitive from fresh buffers of dtype dt (the dtype of
 * its first source) and writes what the result must hold into want (f64
 * only; NULL on other dtypes) and its element count into *n. */
typedef rlx_tensor *(*build_fn)(ir_op op, rlx_dtype dt, double *want, int *n);
typedef double (*scalar_fn)(double a, double b);

enum { C_PLAIN = 0, C_POS = 1, C_GONE = 2 };
typedef struct {
    ir_op op;
    scalar_fn ref;  /* elementwise rows: the value in double, else NULL */
    build_fn build; /* other rows */
    unsigned dts;   /* other rows: the dtypes to run (elementwise: from the flags) */
    int flags;      /* C_POS: positive inputs; C_GONE: the simplifier removes it */
} opcase;

static double r_exp(double a, double b) { (void)b; return exp(a); }
static double r_expm1(double a, double b) { (void)b; return expm1(a); }
static double r_log(double a, double b) { (void)b; return log(a); }
static double r_log1p(double a, double b) { (void)b; return log1p(a); }
static double r_sin(double a, double b) { (void)b; return sin(a); }
static double r_cos(double a, double b) { (void)b; return cos(a); }
static double r_tan(double a, double b) { (void)b; return tan(a); }
static double r_atan(double a, double b) { (void)b; return atan(a); }
static double r_sqrt(double a, double b) { (void)b; return sqrt(a); }
static double r_rsqrt(double a, double b) { (void)b; return 1 / sqrt(a); }
static double r_recip(double a, double b) { (void)b; return 1 / a; }
static double r_tanh(double a, double b) { (void)b; return tanh(a); }
static double r_erf(double a, double b) { (void)b; return erf(a); }
static double r_sigmoid(double a, double b) { (void)b; return 1 / (1 + exp(-a)); }
static double r_neg(double a, double b) { (void)b; return -a; }
static double r_abs(double a, double b) { (void)b; return fabs(a); }
static double r_sign(double a, double b) { (void)b; return a > 0 ? 1 : a < 0 ? -1 : 0; }
static double r_round(double a, double b) { (void)b; return nearbyint(a); }
static double r_floor(double a, double b) { (void)b; return floor(a); }
static double r_ceil(double a, double b) { (void)b; return ceil(a); }
static double r_not(double a, double b) { (void)b; return a == 0; }
static double r_same(double a, double b) { (void)b; return a; } /* cast to i32 from f64: see elementwise */
static double r_add(double a, double b) { return a + b; }
static double r_sub(double a, double b) { return a - b; }
static double r_mul(double a, double b) { return a * b; }
static double r_div(double a, double b) { return a / b; }
static double r_pow(double a, double b) { return pow(a, b); }
static double r_max(double a, double b) { return a > b ? a : b; }
static double r_min(double a, double b) { return a < b ? a : b; }
static double r_atan2(double a, double b) { return atan2(a, b); }
static double r_rem(double a, double b) { return fmod(a, b); }
static double r_eq(double a, double b) { return a == b; }
static double r_ne(double a, double b) { return a != b; }
static double r_lt(double a, double b) { return a < b; }
static double r_le(double a, double b) { return a <= b; }
static double r_gt(double a, double b) { return a > b; }
static double r_ge(double a, double b) { return a >= b; }
static double r_and(double a, double b) { return a != 0 && b != 0; }
static double r_or(double a, double b) { return a != 0 || b != 0; }

static scalar_fn cur_ref; /* the elementwise row being built */
static int cur_flags;

/* Unary and binary rows: op(A) or op(A, B) on [2,3]; CAST goes to i32
 * from f64 (truncating) and to f64 from the others. */
static rlx_tensor *b_elementwise(ir_op op, rlx_dtype dt, double *want, int *n)
{
    double a[6], b[6];
    ir_node *src[2] = {input(dt, (cur_flags & C_POS) ? POSV : AV, a), input(dt, BV, b)};
    ir_attrs at;
    memset(&at, 0, sizeof at);
    at.cast.dtype = dt == RLX_F64 ? RLX_I32 : RLX_F64;
    *n = 6;
    for (int i = 0; want && i < 6; i++)
        want[i] = op == IR_OP_CAST ? trunc(a[i]) : cur_ref(a[i], b[i]);
    return make(op, ir_ops[op].cls == IR_CLS_BINARY ? 2 : 1, src, &at);
}

static rlx_tensor *b_where(ir_op op, rlx_dtype dt, double *want, int *n)
{
    double a[6], b[6];
    ir_node *cond = ts_node(make(IR_OP_GT, 2, (ir_node *[]){input(dt, BV, NULL), input(dt, (double[6]){0}, NULL)}, NULL));
    ir_node *src[3] = {cond, input(dt, AV, a), input(dt, BV, b)};
    *n = 6;
    for (int i = 0; want && i < 6; i++)
        want[i] = b[i] > 0 ? a[i] : b[i];
    return make(op, 3, src, NULL);
}

/* Reductions of A over axis 1: [2,3] -> [2,1]. */
static rlx_tensor *b_reduce(ir_op op, rlx_dtype dt, double *want, int *n)
{
    static const double W[][2] = {[IR_OP_SUM] = {-1.75, 4},    [IR_OP_PROD] = {0.1875, 1.25},
                                  [IR_OP_RMAX] = {0.25, 2.5},  [IR_OP_RMIN] = {-1.5, 0.5},
                                  [IR_OP_ARGMAX] = {2, 2},     [IR_OP_ARGMIN] = {0, 0}};
    ir_node *x = input(dt, AV, NULL);
    ir_attrs at;
    memset(&at, 0, sizeof at);
    at.red.mask = 2;
    *n = 2;
    if (want)
        memcpy(want, W[op], sizeof W[op]);
    return make(op, 1, &x, &at);
}

static rlx_tensor *b_movement(ir_op op, rlx_dtype dt, double *want, int *n)
{
    ir_attrs at;
    memset(&at, 0, sizeof at);
    ir_node *x = input(dt, AV, NULL);
    const double *w = AV;
    *n = 6;
    switch (op) {
    case IR_OP_RESHAPE: at.shape.rank = 2; at.shape.dims[0] = 3; at.shape.dims[1] = 2; break;
    case IR_OP_PERMUTE:
        at.perm.perm[0] = 1;
        static const double w1[] = {-1.5, 0.5, -0.5, 1, 0.25, 2.5};
        w = w1;
        break;
    case IR_OP_EXPAND:
        x = input_shape(dt, 2, (const int64_t[]){1, 3}, AV);
        at.shape.rank = 2; at.shape.dims[0] = 2; at.shape.dims[1] = 3;
        static const double w2[] = {-1.5, -0.5, 0.25, -1.5, -0.5, 0.25};
        w = w2;
        break;
    case IR_OP_PAD:
        at.pad.before[1] = 1;
        at.pad.value = 7;
        *n = 8;
        static const double w3[] = {7, -1.5, -0.5, 0.25, 7, 0.5, 1, 2.5};
        w = w3;
        break;
    case IR_OP_SLICE:
        at.slice.len[0] = 2; at.slice.step[0] = 1;
        at.slice.start[1] = 2; at.slice.len[1] = 2; at.slice.step[1] = -1;
        *n = 4;
        static const double w4[] = {0.25, -0.5, 2.5, 1};
        w = w4;
        break;
    default: test_fail(__FILE__, __LINE__, "%s is not a movement case", ir_ops[op].name); break;
    }
    if (want)
        memcpy(want, w, (size_t)*n * sizeof *w);
    return make(op, 1, &x, &at);
}

static rlx_tensor *b_leaf(ir_op op, rlx_dtype dt, double *want, int *n)
{
    ir_attrs at;
    memset(&at, 0, sizeof at);
    *n = 6;
    if (op == IR_OP_BUFFER) {
        double v[6];
        ir_node *b = input(dt, AV, v);
        if (want)
            memcpy(want, v, sizeof v);
        return (rlx_tensor *)b; /* already in the test's scope */
    }
    if (op == IR_OP_CONST)
        at.cst.value = 2.5;
    if (op == IR_OP_IOTA) {
        at.iota.start = 1;
        at.iota.step = 0.5;
        at.iota.axis = 1;
    }
    if (op == IR_OP_RAND)
        at.rand.seed = 7;
    for (int i = 0; want && i < 6; i++)
        want[i] = op == IR_OP_CONST ? 2.5 : op == IR_OP_IOTA ? 1 + 0.5 * (i % 3) : NAN; /* rand: in [0, 1) */
    return ts_wrap(ts_leaf("test_optable", op, &at, dt, 2, S23));
}

static rlx_tensor *b_index(ir_op op, rlx_dtype dt, double *want, int *n)
{
    ir_attrs at;
    memset(&at, 0, sizeof at);
    ir_node *x = input(dt, AV, NULL);
    at.ax.axis = 1;
    at.scan.axis = 1;
    if (op == IR_OP_CAT) {
        static const double w[] = {-1.5, -0.5, 0.25, 0.5, 2, -1, 0.5, 1, 2.5, 1.5, -2, 3};
        *n = 12;
        if (want)
            memcpy(want, w, sizeof w);
        return make(op, 2, (ir_node *[]){x, input(dt, BV, NULL)}, &at);
    }
    if (op == IR_OP_GATHER) {
        static const double w[] = {0.25, -1.5, 2.5, 0.5};
        *n = 4;
        if (want)
            memcpy(want, w, sizeof w);
        return make(op, 2, (ir_node *[]){x, input_shape(RLX_I64, 1, (const int64_t[]){2}, (const double[]){2, 0})}, &at);
    }
    if (op == IR_OP_SCATTER) { /* add mode, axis 1, with a duplicate in row 1 */
        static const double w[] = {0.5, -0.5, 0.75, 1, 1, 2.5};
        const int64_t s22[2] = {2, 2};
        at.scatter.axis = 1;
        at.scatter.mode = IR_SCATTER_ADD;
        *n = 6;
        if (want)
            memcpy(want, w, sizeof w);
        return make(op, 3,
                    (ir_node *[]){x, input_shape(RLX_I64, 2, s22, (const double[]){2, 0, 0, 0}),
                                  input_shape(dt, 2, s22, BV)},
                    &at);
    }
    if (op == IR_OP_ARGSORT) { /* descending, stable: AV's rows as dt stores them */
        static const double wb[] = {0, 1, 2, 0, 1, 2}, wi[] = {1, 2, 0, 2, 1, 0}, wf[] = {2, 1, 0, 2, 1, 0};
        at.sort.axis = 1;
        at.sort.descending = 1;
        *n = 6;
        if (want)
            memcpy(want, dt == RLX_BOOL ? wb : ir_dtype_is_float(dt) ? wf : wi, sizeof wf);
        return make(op, 1, &x, &at);
    }
    static const double w[] = {-1.5, -2, -1.75, 0.5, 1.5, 4}; /* cumsum */
    *n = 6;
    if (want)
        memcpy(want, w, sizeof w);
    return make(op, 1, &x, &at);
}

static rlx_tensor *b_library(ir_op op, rlx_dtype dt, double *want, int *n)
{
    ir_attrs at;
    memset(&at, 0, sizeof at);
    const double *w = NULL;
    rlx_tensor *r = NULL;
    const int64_t s22[2] = {2, 2}, s1111[4] = {1, 1, 2, 2}, s111[3] = {1, 1, 1};
    switch (op) {
    case IR_OP_MATMUL: { /* A [2,3] x B' [3,2] */
        ir_node *y = input_shape(dt, 2, (const int64_t[]){3, 2}, BV);
        r = make(op, 2, (ir_node *[]){input(dt, AV, NULL), y}, NULL);
        static const double w5[] = {-0.75, -3, -5.75, 10};
        w = w5;
        *n = 4;
        break;
    }
    case IR_OP_SOLVE: /* [[2,0],[0,4]] x = [[2,4],[8,4]] */
        r = make(op, 2,
                 (ir_node *[]){input_shape(dt, 2, s22, (const double[]){2, 0, 0, 4}),
                               input_shape(dt, 2, s22, (const double[]){2, 4, 8, 4})},
                 NULL);
        static const double w6[] = {1, 2, 2, 1};
        w = w6;
        *n = 4;
        break;
    case IR_OP_FFT: /* [re 1, 0 | im 0, 0] -> [1, 1 | 0, 0] */
        at.fft.axis = 0;
        r = make(op, 1, (ir_node *[]){input_shape(dt, 1, (const int64_t[]){4}, (const double[]){1, 0, 0, 0})}, &at);
        static const double w7[] = {1, 1, 0, 0};
        w = w7;
        *n = 4;
        break;
    case IR_OP_CONV2D: /* 1x1 kernel of 2 */
        at.conv.stride[0] = at.conv.stride[1] = at.conv.dil[0] = at.conv.dil[1] = at.conv.groups = 1;
        r = make(op, 2,
                 (ir_node *[]){input_shape(dt, 4, s1111, (const double[]){1, 2, 3, 4}),
                               input_shape(dt, 4, (const int64_t[]){1, 1, 1, 1}, (const double[]){2})},
                 &at);
        static const double w8[] = {2, 4, 6, 8};
        w = w8;
        *n = 4;
        break;
    case IR_OP_POOL2D: /* 2x2 max */
        at.pool.kind = IR_POOL_MAX;
        at.pool.kernel[0] = at.pool.kernel[1] = at.pool.stride[0] = at.pool.stride[1] = 2;
        r = make(op, 1, (ir_node *[]){input_shape(dt, 4, s1111, (const double[]){1, 5, 3, 4})}, &at);
        static const double w9[] = {5};
        w = w9;
        *n = 1;
        break;
    case IR_OP_MXQUANT: /* powers of two below amax are on every format's grid */
        r = make(op, 1, (ir_node *[]){input_shape(dt, 1, (const int64_t[]){4}, (const double[]){1, 2, 4, 0})}, &at);
        static const double w10[] = {1, 2, 4, 0};
        w = w10;
        *n = 4;
        break;
    case IR_OP_ATTENTION: /* one key: the output is v */
        at.attn.heads = at.attn.kv_heads = at.attn.head_dim = 1;
        at.attn.scale = 1;
        r = make(op, 3,
                 (ir_node *[]){input_shape(dt, 3, s111, (const double[]){0.5}),
                               input_shape(dt, 3, s111, (const double[]){2}),
                               input_shape(dt, 3, s111, (const double[]){3})},
                 &at);
        static const double w11[] = {3};
        w = w11;
        *n = 1;
        break;
    case IR_OP_MULTINOMIAL: /* one positive weight per row: always drawn */
        at.multinomial.samples = 2;
        at.multinomial.replacement = 1;
        at.multinomial.seed = 3;
        r = make(op, 1, (ir_node *[]){input_shape(dt, 2, S23, (const double[]){0, 1, 0, 0, 0, 2})}, &at);
        static const double w12[] = {1, 1, 2, 2};
        w = w12;
        *n = 4;
        break;
    case IR_OP_RAND_SEEDED: { /* seed 7 read from a buffer: rlx_rand's numbers for seed 7 */
        static double w13[6];
        at.rands.dtype = dt;
        at.rands.rank = 2;
        memcpy(at.rands.dims, S23, sizeof S23);
        r = make(op, 1, (ir_node *[]){input_shape(RLX_I64, 0, NULL, (const double[]){7})}, &at);
        CHECK(rlx_read_f64(rlx_rand(dt, 2, S23, 7), w13, 6) == RLX_OK);
        w = w13;
        *n = 6;
        break;
    }
    default: test_fail(__FILE__, __LINE__, "%s is not a library case", ir_ops[op].name); break;
    }
    if (want && w)
        memcpy(want, w, (size_t)*n * sizeof *w);
    return r;
}

#define EW(op, ref) {op, ref, NULL, 0, C_PLAIN}
#define EWP(op, ref) {op, ref, NULL, 0, C_POS}
#define ALL ((1u << RLX_BOOL) | (1u << RLX_I32) | (1u << RLX_I64) | (1u << RLX_F32) | (1u << RLX_F64))
#define NUM ((1u << RLX_I32) | (1u << RLX_I64) | (1u << RLX_F32) | (1u << RLX_F64))
#define FLT ((1u << RLX_F32) | (1u << RLX_F64))
static const opcase CASES[] = {
    {IR_OP_BUFFER, NULL, b_leaf, ALL, 0},
    {IR_OP_CONST, NULL, b_leaf, ALL, 0},
    {IR_OP_IOTA, NULL, b_leaf, NUM, 0},
    {IR_OP_RAND, NULL, b_leaf, FLT, 0},
    {IR_OP_INPUT, NULL, NULL, 0, 0}, /* input_is_reported_unbound */
    EW(IR_OP_EXP, r_exp), EW(IR_OP_EXPM1, r_expm1), EWP(IR_OP_LOG, r_log), EWP(IR_OP_LOG1P, r_log1p),
    EW(IR_OP_SIN, r_sin), EW(IR_OP_COS, r_cos), EW(IR_OP_TAN, r_tan), EW(IR_OP_ATAN, r_atan),
    EWP(IR_OP_SQRT, r_sqrt), EWP(IR_OP_RSQRT, r_rsqrt), EW(IR_OP_RECIP, r_recip), EW(IR_OP_TANH, r_tanh),
    EW(IR_OP_ERF, r_erf), EW(IR_OP_SIGMOID, r_sigmoid),
    EW(IR_OP_NEG, r_neg), EW(IR_OP_ABS, r_abs), EW(IR_OP_SIGN, r_sign), EW(IR_OP_ROUND, r_round),
    EW(IR_OP_FLOOR, r_floor), EW(IR_OP_CEIL, r_ceil), EW(IR_OP_NOT, r_not), EW(IR_OP_CAST, r_same),
    EW(IR_OP_CONTIGUOUS, r_same), {IR_OP_STOP_GRAD, r_same, NULL, 0, C_GONE},
    EW(IR_OP_ADD, r_add), EW(IR_OP_SUB, r_sub), EW(IR_OP_MUL, r_mul), EW(IR_OP_DIV, r_div),
    EWP(IR_OP_POW, r_pow), EW(IR_OP_MAX, r_max), EW(IR_OP_MIN, r_min), EW(IR_OP_ATAN2, r_atan2),
    EW(IR_OP_REM, r_rem), EW(IR_OP_EQ, r_eq), EW(IR_OP_NE, r_ne), EW(IR_OP_LT, r_lt), EW(IR_OP_LE, r_le),
    EW(IR_OP_GT, r_gt), EW(IR_OP_GE, r_ge), EW(IR_OP_AND, r_and), EW(IR_OP_OR, r_or),
    {IR_OP_WHERE, NULL, b_where, ALL, 0},
    {IR_OP_SUM, NULL, b_reduce, ALL, 0}, {IR_OP_PROD, NULL, b_reduce, ALL, 0},
    {IR_OP_RMAX, NULL, b_reduce, ALL, 0}, {IR_OP_RMIN, NULL, b_reduce, ALL, 0},
    {IR_OP_ARGMAX, NULL, b_reduce, ALL, 0}, {IR_OP_ARGMIN, NULL, b_reduce, ALL, 0},
    {IR_OP_RESHAPE, NULL, b_movement, ALL, 0}, {IR_OP_PERMUTE, NULL, b_movement, ALL, 0},
    {IR_OP_EXPAND, NULL, b_movement, ALL, 0}, {IR_OP_PAD, NULL, b_movement, ALL, 0},
    {IR_OP_SLICE, NULL, b_movement, ALL, 0},
    {IR_OP_CAT, NULL, b_index, ALL, 0}, {IR_OP_GATHER, NULL, b_index, ALL, 0},
    {IR_OP_SCATTER, NULL, b_index, ALL, 0},
    {IR_OP_CUMSUM, NULL, b_index, ALL, 0},
    {IR_OP_MATMUL, NULL, b_library, NUM, 0}, {IR_OP_SOLVE, NULL, b_library, FLT, 0},
    {IR_OP_FFT, NULL, b_library, FLT, 0}, {IR_OP_CONV2D, NULL, b_library, FLT, 0},
    {IR_OP_POOL2D, NULL, b_library, FLT, 0}, {IR_OP_MXQUANT, NULL, b_library, FLT, 0},
    {IR_OP_ATTENTION, NULL, b_library, FLT, 0},
    {IR_OP_ARGSORT, NULL, b_index, ALL, 0}, {IR_OP_MULTINOMIAL, NULL, b_library, FLT, 0},
    {IR_OP_RAND_SEEDED, NULL, b_library, FLT, 0},
};
#define NCASES ((int)(sizeof CASES / sizeof *CASES))

static const opcase *case_of(ir_op op)
{
    const opcase *found = NULL;
    for (int i = 0; i < NCASES; i++)
        if (CASES[i].op == op) {
            if (found)
                test_fail(__FILE__, __LINE__, "primitive %s has two cases", ir_ops[op].name);
            found = &CASES[i];
        }
    return found;
}

/* The dtypes an elementwise row takes, from its flags (as ir_infer). */
static unsigned dtypes_of(const opcase *c)
{
    if (!c->ref)
        return c->dts;
    unsigned f = ir_ops[c->op].flags;
    if (f & IR_F_FLOAT_MATH)
        return FLT;
    bool no_bool = ir_ops[c->op].cls == IR_CLS_BINARY ? !(f & IR_F_BOOL_OK) : (f & IR_F_NO_BOOL) != 0;
    return no_bool ? NUM : ALL;
}

/* ------------------------------------------------------------ running */

typedef struct {
    int loops, refs; /* LOOP and REF kernels one realization ran */
} kinds;

static rlx_tensor *build(const opcase *c, rlx_dtype dt, double *want, int *n)
{
    cur_ref = c->ref;
    cur_flags = c->flags;
    return (c->ref ? b_elementwise : c->build)(c->op, dt, want, n);
}

/* Builds c on dt from fresh buffers and realizes it with the JIT or the
 * reference backend; *k gets the kernels run. */
static rlx_tensor *run(const opcase *c, rlx_dtype dt, bool jit, double *want, int *n, kinds *k)
{
    rlx_tensor *t = build(c, dt, want, n);
    use_jit(jit);
    rlx_stats_t s0, s1;
    rlx_stats(&s0);
    rlx_status st = rlx_realize(t);
    rlx_stats(&s1);
    use_jit(true);
    if (st != RLX_OK) {
        test_fail(__FILE__, __LINE__, "%s on %s (%s): %s", ir_ops[c->op].name, rlx_dtype_name(dt),
                  jit ? "jit" : "ref", rlx_last_error());
        rlx_clear_error();
        return NULL;
    }
    k->loops = (int)(s1.cache_hits + s1.cache_misses - s0.cache_hits - s0.cache_misses);
    k->refs = (int)(s1.kernels_run - s0.kernels_run) - k->loops;
    return t;
}

/* What ops.def says realizing c's node alone makes on the JIT. */
static kinds expected_kinds(const opcase *c, rlx_tensor *t)
{
    const ir_node *n = ts_node(t);
    ir_emit e = ir_ops[c->op].emit;
    if (e == IR_EMIT_VIEW && c->op == IR_OP_PAD && !(c->flags & C_GONE))
        return (kinds){1, 0}; /* a pad writes its fill: a root pad is a LOOP kernel, not a published view */
    if ((c->flags & C_GONE) || e == IR_EMIT_LOAD || e == IR_EMIT_VIEW)
        return (kinds){0, 0}; /* nothing computed; a root view is published as a view */
    bool jits = ir_op_jits(n->op, n->dtype);
    for (int s = 0; s < n->nsrc; s++)
        jits = jits && ir_op_jits(n->op, n->src[s]->dtype);
    return jits ? (kinds){1, 0} : (kinds){0, 1};
}

static double tol_of(rlx_dtype dt) { return dt == RLX_F32 ? 1e-5 : dt == RLX_F64 ? 1e-12 : 0; }

static void check_case(const opcase *c, rlx_dtype dt)
{
    const char *name = ir_ops[c->op].name;
    double want[16];
    int n = 0;
    kinds kj, kr;
    rlx_tensor *got = run(c, dt, true, NULL, &n, &kj);
    rlx_tensor *ref = run(c, dt, false, dt == RLX_F64 ? want : NULL, &n, &kr);
    if (!got || !ref)
        return;
    kinds ek = expected_kinds(c, got);
    if (kj.loops != ek.loops || kj.refs != ek.refs)
        test_fail(__FILE__, __LINE__, "%s on %s: the JIT ran %d LOOP and %d REF kernels; ops.def (emit %d, jit 0x%x) says %d and %d",
                  name, rlx_dtype_name(dt), kj.loops, kj.refs, (int)ir_ops[c->op].emit, ir_ops[c->op].jit, ek.loops, ek.refs);
    if (c->op == IR_OP_RAND) {
        double v[6];
        CHECK(rlx_read_f64(ref, v, 6) == RLX_OK);
        for (int i = 0; i < 6; i++)
            if (!(v[i] >= 0 && v[i] < 1))
                test_fail(__FILE__, __LINE__, "rand value %g outside [0, 1)", v[i]);
    } else if (dt == RLX_F64) {
        char what[64];
        snprintf(what, sizeof what, "reference %s on f64", name);
        int64_t shape[RLX_MAX_RANK];
        int rank = rlx_shape(ref, shape, RLX_MAX_RANK);
        EXPECT_V(what, ref, rlx_dtype_of(ref), rank, shape, want, 1e-12, 1e-12);
    }
    test_expect_same(__FILE__, __LINE__, got, ref, tol_of(rlx_dtype_of(ref)), tol_of(rlx_dtype_of(ref)));
}

/* A VIEW row fuses into its reader: cast(view(x)) is one LOOP kernel. */
static void check_view_fuses(const opcase *c)
{
    int n;
    rlx_tensor *v = build(c, RLX_F32, NULL, &n);
    ir_attrs at;
    memset(&at, 0, sizeof at);
    at.cast.dtype = RLX_F64;
    rlx_tensor *t = make(IR_OP_CAST, 1, (ir_node *[]){ts_node(v)}, &at);
    rlx_stats_t s0, s1;
    rlx_stats(&s0);
    CHECK(rlx_realize(t) == RLX_OK);
    rlx_stats(&s1);
    int loops = (int)(s1.cache_hits + s1.cache_misses - s0.cache_hits - s0.cache_misses);
    int all = (int)(s1.kernels_run - s0.kernels_run);
    if (loops != 1 || all != 1)
        test_fail(__FILE__, __LINE__, "cast(%s(x)): %d kernels, %d LOOP; a VIEW row must fuse into one", ir_ops[c->op].name,
                  all, loops);
}

/* ------------------------------------------------------------- tests */

TEST(every_primitive_has_every_layer)
{
    int rows = 0;
    for (int op = 0; op < IR_OP_COUNT; op++) {
        const char *name = ir_ops[op].name;
        ir_emit e = ir_ops[op].emit;
        if (!rt_ref_eval_fn((ir_op)op) && e != IR_EMIT_LOAD)
            test_fail(__FILE__, __LINE__, "primitive %s has no reference evaluator", name);
        if (ad_vjp_kind(op) == AD_MISSING)
            test_fail(__FILE__, __LINE__, "primitive %s has no VJP row", name);
        if (!case_of((ir_op)op))
            test_fail(__FILE__, __LINE__, "primitive %s has no case in test_optable.c", name);
        bool loop = e == IR_EMIT_INSTR || e == IR_EMIT_INTRIN || e == IR_EMIT_MATH || e == IR_EMIT_VIEW;
        if (loop != (ir_ops[op].jit != IR_JIT_NONE))
            test_fail(__FILE__, __LINE__, "primitive %s: emit %d with jit dtypes 0x%x", name, (int)e, ir_ops[op].jit);
        rows++;
    }
    CHECK(rows == NCASES);
    CHECK(!rt_ref_eval_fn(IR_OP_COUNT) && !ir_op_jits(IR_OP_COUNT, RLX_F32) && !ir_op_jits(IR_OP_ADD, (rlx_dtype)11));
}

TEST(every_case_on_every_dtype_matches_its_row)
{
    int runs = 0;
    for (int i = 0; i < NCASES; i++) {
        const opcase *c = &CASES[i];
        unsigned dts = dtypes_of(c);
        for (int dt = RLX_BOOL; dt <= RLX_F64; dt++) {
            if (!(dts >> dt & 1))
                continue;
            check_case(c, (rlx_dtype)dt);
            runs++;
        }
        if (ir_ops[c->op].emit == IR_EMIT_VIEW)
            check_view_fuses(c);
    }
    printf("  %d primitives, %d (primitive, dtype) runs on both backends\n", NCASES, runs);
}

TEST(input_is_reported_unbound)
{
    /* INPUT's reference semantics: realizing one unbound is an error */
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, S23);
    CHECK(x && ts_node(x)->op == IR_OP_INPUT);
    for (int jit = 0; jit < 2; jit++) {
        use_jit(jit);
        rlx_clear_error();
        CHECK(rlx_realize(x) == RLX_E_ARG && strstr(rlx_last_error(), "not bound") != NULL);
    }
    use_jit(true);
    rlx_clear_error();
}

TEST(dtype_names_record_no_error)
{
    CHECK(strcmp(ir_dtype_name(RLX_I64), "i64") == 0 && strcmp(ir_dtype_name((rlx_dtype)42), "?") == 0);
    CHECK(rlx_last_status() == RLX_OK);
    CHECK(strcmp(rlx_dtype_name((rlx_dtype)42), "?") == 0 && rlx_last_status() == RLX_E_ARG);
    rlx_clear_error();
}

TEST_MAIN(T(every_primitive_has_every_layer), T(every_case_on_every_dtype_matches_its_row), T(input_is_reported_unbound),
          T(dtype_names_record_no_error))
