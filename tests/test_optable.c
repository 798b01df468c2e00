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

static void use_jit(bool on) { CHECK(rlx_set_option("backend", on ? "jit" : "ref") == RLX_OK); }

/* ------------------------------------------------------------ inputs */

static const int64_t S23[2] = {2, 3};
static const double AV[6] = {-1.5, -0.5, 0.25, 0.5, 1, 2.5};
static const double POSV[6] = {0.25, 0.5, 1, 1.5, 2, 3}; /* log, sqrt, ... */
static const double BV[6] = {0.5, 2, -1, 1.5, -2, 3};

/* While a narrow dtype's case is rebuilt on its wide dtype (the value
 * reference), the narrow dtype: every input holds what it would hold. */
static rlx_dtype as_narrow = (rlx_dtype)-1;

static void quantize_as_narrow(double *v, int64_t n)
{
    for (int64_t i = 0; (int)as_narrow >= 0 && i < n; i++)
        v[i] = test_quantize(as_narrow, v[i]);
}

/* A fresh [2,3] buffer of dt holding v (quantized into q). */
static ir_node *input(rlx_dtype dt, const double *v, double *q)
{
    double tmp[6];
    memcpy(tmp, v, sizeof tmp);
    quantize_as_narrow(tmp, 6);
    rlx_tensor *t = test_tensor(dt, 2, S23, tmp);
    if (q)
        memcpy(q, tmp, sizeof tmp);
    return ts_node(t);
}

static ir_node *input_shape(rlx_dtype dt, int rank, const int64_t *shape, const double *v)
{
    double tmp[16];
    memcpy(tmp, v, (size_t)test_numel(rank, shape) * sizeof *tmp);
    quantize_as_narrow(tmp, test_numel(rank, shape));
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
    at.cast.dtype = dt == RLX_F64 && (int)as_narrow < 0 ? RLX_I32 : RLX_F64;
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
    case IR_OP_ATTENTION_BWD: /* one key, g = 2: dS = P (g v - g o) = 0, so dq = dk = 0; dv = P g = 2 */
        at.attn.heads = at.attn.kv_heads = at.attn.head_dim = 1;
        at.attn.scale = 1;
        r = make(op, 5,
                 (ir_node *[]){input_shape(dt, 3, s111, (const double[]){0.5}),
                               input_shape(dt, 3, s111, (const double[]){2}),
                               input_shape(dt, 3, s111, (const double[]){3}),
                               input_shape(dt, 3, s111, (const double[]){3}),
                               input_shape(dt, 3, s111, (const double[]){2})},
                 &at);
        static const double w15[] = {0, 0, 2};
        w = w15;
        *n = 3;
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
    case IR_OP_QMATMUL: { /* x [2,3] . ((wq - zp) * scale)^T, W = [[0, -1.5, 1], [2, 10, 0]] */
        ir_node *wq = input_shape(RLX_I8, 2, S23, (const double[]){1, -2, 3, 0, 4, -1});
        ir_node *sc = input_shape(dt, 1, (const int64_t[]){2}, (const double[]){0.5, 2});
        ir_node *zp = input_shape(RLX_I32, 1, (const int64_t[]){2}, (const double[]){1, -1});
        r = make(op, 4, (ir_node *[]){input(dt, AV, NULL), wq, sc, zp}, NULL);
        static const double w14[] = {1, -8, 1, 11};
        w = w14;
        *n = 4;
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
#define NFLT ((1u << RLX_F16) | (1u << RLX_BF16))
#define NINT ((1u << RLX_I8) | (1u << RLX_U8) | (1u << RLX_I16) | (1u << RLX_U32))
#define ALL ((1u << RLX_BOOL) | (1u << RLX_I32) | (1u << RLX_I64) | (1u << RLX_F32) | (1u << RLX_F64) | NFLT | NINT)
#define NUM ((1u << RLX_I32) | (1u << RLX_I64) | (1u << RLX_F32) | (1u << RLX_F64) | NFLT | NINT)
#define FLT ((1u << RLX_F32) | (1u << RLX_F64) | NFLT)
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
    {IR_OP_ATTENTION_BWD, NULL, b_library, (1u << RLX_F32) | (1u << RLX_F64), 0},
    {IR_OP_ARGSORT, NULL, b_index, ALL, 0}, {IR_OP_MULTINOMIAL, NULL, b_library, FLT, 0},
    {IR_OP_RAND_SEEDED, NULL, b_library, FLT, 0},
    /* c64 only: every_primitive_on_c64 */
    {IR_OP_CONJ, NULL, NULL, 0, 0}, {IR_OP_IMAG, NULL, NULL, 0, 0}, {IR_OP_COMPLEX, NULL, NULL, 0, 0},
    {IR_OP_QMATMUL, NULL, b_library, (1u << RLX_F32) | (1u << RLX_F64), 0}, /* x's dtype; wq is i8 */
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
    bool jits = ir_op_jits(n->op, n->dtype);
    for (int s = 0; s < n->nsrc; s++)
        jits = jits && ir_op_jits(n->op, n->src[s]->dtype);
    if (e == IR_EMIT_VIEW && !jits && !(c->flags & C_GONE))
        return (kinds){0, 1}; /* a view on a dtype the JIT does not load: a REF kernel */
    if (e == IR_EMIT_VIEW && c->op == IR_OP_PAD && !(c->flags & C_GONE))
        return (kinds){1, 0}; /* a pad writes its fill: a root pad is a LOOP kernel, not a published view */
    if ((c->flags & C_GONE) || e == IR_EMIT_LOAD || e == IR_EMIT_VIEW)
        return (kinds){0, 0}; /* nothing computed; a root view is published as a view */
    kinds k = jits ? (kinds){1, 0} : (kinds){0, 1};
    for (int s = 0; s < n->nsrc; s++) { /* a computed source the JIT cannot fuse is a REF kernel of its own */
        const ir_node *src = n->src[s];
        if (ir_ops[src->op].cls != IR_CLS_LEAF && !ir_op_jits(src->op, src->src[0]->dtype))
            k.refs++;
    }
    return k;
}

static double tol_of(rlx_dtype dt) { return dt == RLX_F32 ? 1e-5 : dt == RLX_F64 ? 1e-12 : 0; }

/* Relative spacing of dt's floats (0 for integers and bool: exact). */
static double ulp_of(rlx_dtype dt)
{
    switch (dt) {
    case RLX_F16: return 0x1p-10;
    case RLX_BF16: return 0x1p-7;
    case RLX_F32: return 0x1p-23;
    case RLX_F64: return 0x1p-52;
    default: return 0;
    }
}

/* A library row on a narrow dtype it does not take (ir_lib_takes): its
 * shape rule refuses it, naming the primitive and the dtype (the tensor
 * layer converts around it). */
static void check_lib_refuses(const opcase *c, rlx_dtype dt)
{
    double want[16];
    int n = 0;
    rlx_clear_error();
    rlx_tensor *t = build(c, dt, want, &n);
    const char *msg = rlx_last_error();
    if (t || !strstr(msg, ir_ops[c->op].name) || !strstr(msg, rlx_dtype_name(dt)))
        test_fail(__FILE__, __LINE__, "library %s on %s: want a refusal naming both, got %s (%s)", ir_ops[c->op].name,
                  rlx_dtype_name(dt), t ? "a node" : "NULL", msg);
    rlx_clear_error();
}

/* A narrow dtype's values: the case rebuilt on the wide dtype from the
 * values the narrow inputs hold, by the reference evaluator, then cast to
 * the result's dtype (rounded once, or wrapped): what computing in double
 * (integers in 64 bits) and rounding once gives. got from the reference
 * evaluator must match it exactly; from the JIT within 2 ulps. */
static void check_narrow_values(const opcase *c, rlx_dtype dt, rlx_tensor *got, bool jit)
{
    if (c->op == IR_OP_RAND || c->op == IR_OP_RAND_SEEDED)
        return; /* draws per precision: checked against rlx_rand of dt itself */
    double want[16];
    int n = 0;
    kinds k;
    as_narrow = dt;
    rlx_tensor *w = run(c, ir_dtype_is_float(dt) ? RLX_F64 : RLX_I64, false, want, &n, &k);
    as_narrow = (rlx_dtype)-1;
    if (!w)
        return;
    rlx_dtype rd = rlx_dtype_of(got);
    double tol = jit ? 2 * ulp_of(rd) : 0;
    use_jit(false);
    test_expect_same(__FILE__, __LINE__, got, rlx_cast(w, rd), tol, 0);
    use_jit(true);
}

static void check_case(const opcase *c, rlx_dtype dt)
{
    if (ir_dtype_is_narrow(dt) && ir_ops[c->op].emit == IR_EMIT_LIB && !ir_lib_takes(c->op, dt)) {
        check_lib_refuses(c, dt);
        return;
    }
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
    if (ir_dtype_is_narrow(dt)) {
        check_narrow_values(c, dt, ref, false);
        check_narrow_values(c, dt, got, true);
    }
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
    CHECK(!rt_ref_eval_fn(IR_OP_COUNT) && !ir_op_jits(IR_OP_COUNT, RLX_F32) && !ir_op_jits(IR_OP_ADD, (rlx_dtype)13));
}

TEST(every_case_on_every_dtype_matches_its_row)
{
    int runs = 0;
    for (int i = 0; i < NCASES; i++) {
        const opcase *c = &CASES[i];
        unsigned dts = dtypes_of(c);
        for (int dt = RLX_BOOL; dt <= RLX_U32; dt++) {
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


/* --------------------------------------- the public API on every dtype */

/* Every public function over [2,3] operands a and b of one dtype, on all
 * eleven dtypes and both backends. Accepted: the result has the dtype the
 * function's rule gives, and its values are those of the same call on the
 * operands' values widened to f64 (integer results: i64, then wrapped),
 * computed by the reference evaluator and rounded once to the result's
 * dtype, within a few ulps of it (integers exact). Refused: RLX_E_DTYPE
 * with a message naming the function and the dtype. */

typedef rlx_tensor *(*api_fn)(rlx_tensor *a, rlx_tensor *b);
enum { R_SAME, R_FLOAT, R_BOOL, R_I64, R_ACC, R_F32 }; /* ACC: integers and bool give i64 */
typedef struct {
    const char *fn; /* the public function named in errors */
    api_fn f;
    int res;
    unsigned refuse; /* dtypes it refuses */
    unsigned skip;   /* dtypes on which the case's own operands mean another thing (bool 2 I is I) */
} apicase;

static const int64_t S32[2] = {3, 2}, S6[1] = {6}, S1123[4] = {1, 1, 2, 3}, S123[3] = {1, 2, 3}, S223[3] = {2, 2, 3},
                     S231[3] = {2, 3, 1}, S22[2] = {2, 2}, S1122[4] = {1, 1, 2, 2}, S122[3] = {1, 2, 2};
static const int AXIS1 = 1;
static const int PERM10[2] = {1, 0}, K22[2] = {2, 2}, ONE2[2] = {1, 1};

static rlx_tensor *idx2(void) { return ti64(2, S22, (const int64_t[]){2, 0, 0, 0}); }
static rlx_tensor *idx1(void) { return ti64(1, (const int64_t[]){2}, (const int64_t[]){2, 0}); }
static rlx_tensor *first4(rlx_tensor *t, int rank, const int64_t *shape)
{
    return rlx_reshape(rlx_narrow(rlx_flatten(t), 0, 0, 4), rank, shape);
}
/* An invertible [2,2] of a's dtype: 2 I + a's first four values (no
 * integer wraps: i8 holds 120 + 2). */
static rlx_tensor *square(rlx_tensor *a)
{
    return rlx_add(rlx_mul_s(rlx_eye(rlx_dtype_of(a), 2), 2), first4(a, 2, S22));
}
static rlx_tensor *topk_values(rlx_tensor *a)
{
    rlx_tensor *v = NULL, *i = NULL;
    return rlx_topk(a, 2, 1, true, &v, &i) == RLX_OK ? v : NULL;
}

#define API(name, call) \
    static rlx_tensor *api_##name(rlx_tensor *a, rlx_tensor *b) { (void)a; (void)b; return call; }
API(neg, rlx_neg(a)) API(abs, rlx_abs(a)) API(sign, rlx_sign(a)) API(relu, rlx_relu(a)) API(round, rlx_round(a))
API(floor, rlx_floor(a)) API(ceil, rlx_ceil(a)) API(exp, rlx_exp(a)) API(log, rlx_log(a)) API(sqrt, rlx_sqrt(a))
API(rsqrt, rlx_rsqrt(a)) API(sigmoid, rlx_sigmoid(a)) API(sin, rlx_sin(a)) API(cos, rlx_cos(a)) API(tan, rlx_tan(a))
API(atan, rlx_atan(a)) API(recip, rlx_recip(a)) API(erf, rlx_erf(a)) API(tanh, rlx_tanh(a)) API(gelu, rlx_gelu(a))
API(gelu_tanh, rlx_gelu_tanh(a)) API(silu, rlx_silu(a)) API(softplus, rlx_softplus(a)) API(elu, rlx_elu(a))
API(hard_swish, rlx_hard_swish(a)) API(hard_sigmoid, rlx_hard_sigmoid(a)) API(mish, rlx_mish(a))
API(softsign, rlx_softsign(a)) API(log_sigmoid, rlx_log_sigmoid(a)) API(logical_not, rlx_logical_not(a))
API(add, rlx_add(a, b)) API(sub, rlx_sub(a, b)) API(mul, rlx_mul(a, b)) API(div, rlx_div(a, b)) API(pow, rlx_pow(a, b))
API(maximum, rlx_maximum(a, b)) API(minimum, rlx_minimum(a, b)) API(atan2, rlx_atan2(a, b)) API(rem, rlx_rem(a, b))
API(eq, rlx_eq(a, b)) API(ne, rlx_ne(a, b)) API(lt, rlx_lt(a, b)) API(le, rlx_le(a, b)) API(gt, rlx_gt(a, b))
API(ge, rlx_ge(a, b)) API(logical_and, rlx_logical_and(a, b)) API(logical_or, rlx_logical_or(a, b))
API(add_s, rlx_add_s(a, 3)) API(sub_s, rlx_sub_s(a, 2)) API(mul_s, rlx_mul_s(a, 3)) API(div_s, rlx_div_s(a, 2))
API(pow_s, rlx_pow_s(a, 2)) API(maximum_s, rlx_maximum_s(a, 0.5)) API(minimum_s, rlx_minimum_s(a, 0.5))
API(rem_s, rlx_rem_s(a, 3)) API(eq_s, rlx_eq_s(a, 1)) API(lt_s, rlx_lt_s(a, 1)) API(rsub_s, rlx_rsub_s(a, 1))
API(rdiv_s, rlx_rdiv_s(a, 2)) API(clamp, rlx_clamp(a, -1, 2)) API(clamp_min, rlx_clamp_min(a, 0))
API(clamp_max, rlx_clamp_max(a, 1)) API(masked_fill, rlx_masked_fill(a, rlx_gt_s(b, 0), 7))
API(where, rlx_where(rlx_gt_s(b, 0), a, b))
API(sum, rlx_sum(a, &AXIS1, 1, false)) API(prod, rlx_prod(a, &AXIS1, 1, false)) API(mean, rlx_mean(a, &AXIS1, 1, false))
API(var, rlx_var(a, &AXIS1, 1, false)) API(std, rlx_std(a, &AXIS1, 1, false)) API(norm, rlx_norm(a, &AXIS1, 1, false))
API(max, rlx_max(a, &AXIS1, 1, false)) API(min, rlx_min(a, &AXIS1, 1, false)) API(argmax, rlx_argmax(a, 1, false))
API(argmin, rlx_argmin(a, 1, false)) API(logsumexp, rlx_logsumexp(a, 1, false)) API(cumsum, rlx_cumsum(a, 1, false))
API(sum_all, rlx_sum_all(a)) API(mean_all, rlx_mean_all(a))
API(transpose, rlx_transpose(a, 2, PERM10)) API(reshape, rlx_reshape(a, 2, S32)) API(flip, rlx_flip(a, 1))
API(roll, rlx_roll(a, 1, 1)) API(tile, rlx_tile(a, 0, 2)) API(pad, rlx_pad(a, 1, 1, 2, 7))
API(pad_mode, rlx_pad_mode(a, 1, 1, 1, RLX_PAD_REFLECT)) API(cat, rlx_cat((rlx_tensor *[]){a, b}, 2, 0))
API(stack, rlx_stack((rlx_tensor *[]){a, b}, 2, 1)) API(narrow, rlx_narrow(a, 1, 1, 2))
API(slice, rlx_slice(a, 1, 2, -4, -2)) API(select, rlx_select(a, 0, 1)) API(gather, rlx_gather(a, idx2(), 1))
API(index_select, rlx_index_select(a, 1, idx1())) API(broadcast_to, rlx_broadcast_to(rlx_unsqueeze(a, 0), 3, S223))
API(flatten, rlx_flatten(a)) API(contiguous, rlx_contiguous(a)) API(full_like, rlx_full_like(a, 2.5))
API(ones_like, rlx_ones_like(a))
API(scatter_add, rlx_scatter_add(a, 1, idx2(), rlx_narrow(b, 1, 0, 2)))
API(scatter, rlx_scatter(a, 1, idx2(), rlx_narrow(b, 1, 0, 2)))
API(index_add, rlx_index_add(a, 1, idx1(), rlx_narrow(b, 1, 0, 2)))
API(softmax, rlx_softmax(a, 1)) API(log_softmax, rlx_log_softmax(a, 1))
API(layer_norm, rlx_layer_norm(a, NULL, NULL, 1e-5)) API(rms_norm, rlx_rms_norm(a, NULL, 1e-5))
API(cross_entropy, rlx_cross_entropy(a, rlx_abs(b))) API(dropout, rlx_dropout(a, 0.5, 7))
API(group_norm, rlx_group_norm(rlx_reshape(a, 3, S231), 1, NULL, NULL, 1e-5))
API(batch_norm, rlx_batch_norm(rlx_reshape(a, 3, S231), NULL, NULL, NULL, NULL, true, 0.1, 1e-5, NULL, NULL))
API(matmul, rlx_matmul(a, rlx_transpose(b, 2, PERM10))) API(matmul_t, rlx_matmul_t(a, b))
API(linear, rlx_linear(a, b, rlx_select(b, 1, 0)))
API(linear_act, rlx_linear_act(a, b, NULL, RLX_ACT_GELU))
API(einsum, rlx_einsum("ij,kj->ik", (rlx_tensor *[]){a, b}, 2))
API(solve, rlx_solve(square(a), rlx_select(b, 1, 0))) API(inv, rlx_inv(square(a)))
API(fft, rlx_fft(rlx_reshape(a, 1, S6))) API(ifft, rlx_ifft(rlx_reshape(a, 1, S6)))
API(conv2d, rlx_conv2d(rlx_reshape(a, 4, S1123), first4(b, 4, S1122), rlx_narrow(rlx_flatten(b), 0, 5, 1), NULL, NULL,
                       NULL, 1))
API(conv1d, rlx_conv1d(rlx_reshape(a, 3, S123), first4(b, 3, S122), NULL, 1, 0, 1, 1))
API(conv_transpose2d, rlx_conv_transpose2d(rlx_reshape(a, 4, S1123), first4(b, 4, S1122), NULL, NULL, NULL, NULL, NULL, 1))
API(max_pool2d, rlx_max_pool2d(rlx_reshape(a, 4, S1123), K22, ONE2, NULL))
API(avg_pool2d, rlx_avg_pool2d(rlx_reshape(a, 4, S1123), K22, ONE2, NULL))
API(attention, rlx_attention(rlx_reshape(a, 3, S123), rlx_reshape(b, 3, S123), rlx_reshape(a, 3, S123), 1, 3,
                             RLX_MASK_CAUSAL, 0))
API(sort, rlx_sort(a, 1, false)) API(argsort, rlx_argsort(a, 1, true)) API(topk, topk_values(a))
API(scaled_matmul, rlx_scaled_matmul(a, b, RLX_FP8_E4M3, 0))
API(linear_q8, rlx_linear_q8(a, rlx_from_data(RLX_I8, 2, S23, (const int8_t[]){1, -2, 3, 0, 4, -1}),
                             tf32(1, (const int64_t[]){2}, (const float[]){0.5f, 2}), NULL, rlx_select(b, 1, 0)))
#undef API

#define BOOL_ (1u << RLX_BOOL)
#define AC(name, res, refuse) {"rlx_" #name, api_##name, res, refuse, 0}
#define SKIP(name, res, skip) {"rlx_" #name, api_##name, res, 0, skip}
static const apicase API_CASES[] = {
    AC(neg, R_SAME, BOOL_), AC(abs, R_SAME, 0), AC(sign, R_SAME, 0), AC(relu, R_SAME, 0), AC(round, R_SAME, 0),
    AC(floor, R_SAME, 0), AC(ceil, R_SAME, 0), AC(exp, R_FLOAT, 0), AC(log, R_FLOAT, 0), AC(sqrt, R_FLOAT, 0),
    AC(rsqrt, R_FLOAT, 0), AC(sigmoid, R_FLOAT, 0), AC(sin, R_FLOAT, 0), AC(cos, R_FLOAT, 0), AC(tan, R_FLOAT, 0),
    AC(atan, R_FLOAT, 0), AC(recip, R_FLOAT, 0), AC(erf, R_FLOAT, 0), AC(tanh, R_FLOAT, 0), AC(gelu, R_FLOAT, 0),
    AC(gelu_tanh, R_FLOAT, 0), AC(silu, R_FLOAT, 0), AC(softplus, R_FLOAT, 0), AC(elu, R_FLOAT, 0),
    AC(hard_swish, R_FLOAT, 0), AC(hard_sigmoid, R_FLOAT, 0), AC(mish, R_FLOAT, 0), AC(softsign, R_FLOAT, 0),
    AC(log_sigmoid, R_FLOAT, 0), AC(logical_not, R_BOOL, 0),
    AC(add, R_SAME, 0), AC(sub, R_SAME, BOOL_), AC(mul, R_SAME, 0), AC(div, R_SAME, BOOL_), AC(pow, R_SAME, BOOL_),
    AC(maximum, R_SAME, 0), AC(minimum, R_SAME, 0), AC(atan2, R_FLOAT, 0), AC(rem, R_SAME, BOOL_),
    AC(eq, R_BOOL, 0), AC(ne, R_BOOL, 0), AC(lt, R_BOOL, 0), AC(le, R_BOOL, 0), AC(gt, R_BOOL, 0), AC(ge, R_BOOL, 0),
    AC(logical_and, R_BOOL, 0), AC(logical_or, R_BOOL, 0),
    AC(add_s, R_SAME, 0), AC(sub_s, R_SAME, BOOL_), AC(mul_s, R_SAME, 0), AC(div_s, R_SAME, BOOL_),
    AC(pow_s, R_SAME, BOOL_), AC(maximum_s, R_SAME, 0), AC(minimum_s, R_SAME, 0), AC(rem_s, R_SAME, BOOL_),
    AC(eq_s, R_BOOL, 0), AC(lt_s, R_BOOL, 0), AC(rsub_s, R_SAME, BOOL_), AC(rdiv_s, R_SAME, BOOL_),
    AC(clamp, R_SAME, 0), AC(clamp_min, R_SAME, 0), AC(clamp_max, R_SAME, 0), AC(masked_fill, R_SAME, 0),
    AC(where, R_SAME, 0),
    AC(sum, R_ACC, 0), AC(prod, R_ACC, 0), AC(mean, R_FLOAT, 0), AC(var, R_FLOAT, 0), AC(std, R_FLOAT, 0),
    AC(norm, R_FLOAT, 0), AC(max, R_SAME, 0), AC(min, R_SAME, 0), AC(argmax, R_I64, 0), AC(argmin, R_I64, 0),
    AC(logsumexp, R_FLOAT, 0), AC(cumsum, R_ACC, 0), AC(sum_all, R_ACC, 0), AC(mean_all, R_FLOAT, 0),
    AC(transpose, R_SAME, 0), AC(reshape, R_SAME, 0), AC(flip, R_SAME, 0), AC(roll, R_SAME, 0), AC(tile, R_SAME, 0),
    AC(pad, R_SAME, 0), AC(pad_mode, R_SAME, 0), AC(cat, R_SAME, 0), AC(stack, R_SAME, 0), AC(narrow, R_SAME, 0),
    AC(slice, R_SAME, 0), AC(select, R_SAME, 0), AC(gather, R_SAME, 0), AC(index_select, R_SAME, 0),
    AC(broadcast_to, R_SAME, 0), AC(flatten, R_SAME, 0), AC(contiguous, R_SAME, 0), AC(full_like, R_SAME, 0),
    AC(ones_like, R_SAME, 0), AC(scatter_add, R_SAME, 0), AC(scatter, R_SAME, 0), AC(index_add, R_SAME, 0),
    AC(softmax, R_FLOAT, BOOL_), AC(log_softmax, R_FLOAT, BOOL_), AC(layer_norm, R_FLOAT, BOOL_),
    AC(rms_norm, R_FLOAT, BOOL_), AC(cross_entropy, R_FLOAT, BOOL_), AC(dropout, R_FLOAT, BOOL_),
    AC(group_norm, R_FLOAT, BOOL_), AC(batch_norm, R_FLOAT, BOOL_),
    AC(matmul, R_SAME, BOOL_), AC(matmul_t, R_SAME, BOOL_), AC(linear, R_SAME, BOOL_), AC(linear_act, R_FLOAT, BOOL_),
    AC(einsum, R_SAME, BOOL_), SKIP(solve, R_FLOAT, BOOL_), SKIP(inv, R_FLOAT, BOOL_), AC(fft, R_FLOAT, 0),
    AC(ifft, R_FLOAT, 0), AC(conv2d, R_FLOAT, BOOL_), AC(conv1d, R_FLOAT, BOOL_), AC(conv_transpose2d, R_FLOAT, BOOL_),
    AC(max_pool2d, R_FLOAT, BOOL_), AC(avg_pool2d, R_FLOAT, BOOL_), AC(attention, R_FLOAT, BOOL_), AC(sort, R_SAME, 0),
    AC(argsort, R_I64, 0), AC(topk, R_SAME, 0), AC(scaled_matmul, R_F32, BOOL_),
    AC(linear_q8, R_SAME, ~FLT),
};
#undef AC
#undef SKIP
#define NAPI ((int)(sizeof API_CASES / sizeof *API_CASES))

static const double IA[6] = {100, -3, 0, 120, -128, 250}; /* integers: wraps in the narrow ones */
static const double IB[6] = {3, 0, -7, 2, 9, 100};

static rlx_dtype result_dtype(int res, rlx_dtype dt)
{
    switch (res) {
    case R_FLOAT: return ir_dtype_is_float(dt) ? dt : RLX_F32;
    case R_BOOL: return RLX_BOOL;
    case R_I64: return RLX_I64;
    case R_ACC: return ir_dtype_is_float(dt) ? dt : RLX_I64;
    case R_F32: return RLX_F32;
    default: return dt;
    }
}


/* r must be NULL with RLX_E_DTYPE recorded, the message naming fn and dt. */
static void expect_refused(const char *fn, rlx_dtype dt, rlx_tensor *r)
{
    const char *msg = rlx_last_error();
    if (r || rlx_last_status() != RLX_E_DTYPE || !strstr(msg, fn) || !strstr(msg, rlx_dtype_name(dt)))
        test_fail(__FILE__, __LINE__, "%s on %s: want RLX_E_DTYPE naming both, got %s (status %d: %s)", fn,
                  rlx_dtype_name(dt), r ? "a result" : "NULL", (int)rlx_last_status(), msg);
    rlx_clear_error();
}

/* The reference: c on a and b widened (floats to f64; integers and bool to
 * f64 when the result is a float or bool, else to i64), by the reference
 * evaluator, then rounded once (or wrapped) to want; NULL on failure. */
static double *api_reference(const apicase *c, rlx_tensor *a, rlx_tensor *b, rlx_dtype want, int64_t *n)
{
    rlx_dtype dt = rlx_dtype_of(a);
    rlx_dtype w = ir_dtype_is_float(dt) || ir_dtype_is_float(want) || want == RLX_BOOL ? RLX_F64 : RLX_I64;
    if (dt == RLX_BOOL && want == RLX_BOOL)
        w = RLX_BOOL; /* bool ops are logical: widening would change them */
    use_jit(false);
    rlx_tensor *r = c->f(rlx_cast(a, w), rlx_cast(b, w));
    double *v = r ? test_values(rlx_cast(r, want), n) : NULL;
    use_jit(true);
    if (!v)
        test_fail(__FILE__, __LINE__, "%s on %s widened to %s: %s", c->fn, rlx_dtype_name(dt), rlx_dtype_name(w),
                  rlx_last_error());
    return v;
}

static void check_api(const apicase *c, rlx_dtype dt)
{
    double av[6], bv[6];
    bool fl = ir_dtype_is_float(dt);
    memcpy(av, fl ? AV : IA, sizeof av);
    memcpy(bv, fl ? BV : IB, sizeof bv);
    rlx_tensor *a = test_tensor(dt, 2, S23, av), *b = test_tensor(dt, 2, S23, bv);
    rlx_clear_error();
    if (c->skip >> dt & 1)
        return;
    if (c->refuse >> dt & 1) {
        EACH_BACKEND(be) expect_refused(c->fn, dt, c->f(a, b));
        return;
    }
    rlx_dtype want = result_dtype(c->res, dt);
    int64_t n = 0;
    double *ref = api_reference(c, a, b, want, &n);
    if (!ref)
        return;
    double scale = 1;
    for (int64_t i = 0; i < n; i++)
        scale = isfinite(ref[i]) && fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
    double tol = 8 * ulp_of(want);
    EACH_BACKEND(be) {
        rlx_tensor *r = c->f(a, b);
        if (!r) {
            test_fail(__FILE__, __LINE__, "%s on %s (%s): %s", c->fn, rlx_dtype_name(dt), be ? "jit" : "ref",
                      rlx_last_error());
            rlx_clear_error();
            continue;
        }
        if (rlx_dtype_of(r) != want) {
            test_fail(__FILE__, __LINE__, "%s on %s gives %s, want %s", c->fn, rlx_dtype_name(dt),
                      rlx_dtype_name(rlx_dtype_of(r)), rlx_dtype_name(want));
            continue;
        }
        int64_t m = 0;
        double *got = test_values(r, &m);
        for (int64_t i = 0; got && i < m && m == n; i++)
            if (!test_close(got[i], ref[i], tol, tol * scale))
                test_fail(__FILE__, __LINE__, "%s on %s (%s) [%lld]: %.9g, want %.9g (%s)", c->fn, rlx_dtype_name(dt),
                          be ? "jit" : "ref", (long long)i, got[i], ref[i], rlx_dtype_name(want));
        if (got && m != n)
            test_fail(__FILE__, __LINE__, "%s on %s: %lld values, want %lld", c->fn, rlx_dtype_name(dt), (long long)m,
                      (long long)n);
        free(got);
    }
    free(ref);
}

TEST(every_public_op_on_every_dtype)
{
    int runs = 0;
    for (int i = 0; i < NAPI; i++)
        for (int dt = RLX_BOOL; dt <= RLX_U32; dt++) {
            rlx_scope_begin();
            check_api(&API_CASES[i], (rlx_dtype)dt);
            rlx_scope_end();
            runs++;
        }
    printf("  %d public functions, %d (function, dtype) runs on both backends\n", NAPI, runs);
}


/* The constructors on every dtype: full/zeros/ones/scalar hold the value
 * as a cast gives it (2.5 on u8 is 2, 1e6 on f16 is inf, -1 on u32 is 0:
 * a double converts as a float does), arange and eye on every numeric
 * dtype, the random constructors on the four floats (values in [0, 1) of
 * the dtype, the seeded form equal to the plain one) and RLX_E_DTYPE
 * naming the function and the dtype on the others. Both backends. */
TEST(constructors_on_every_dtype)
{
    const int64_t s3[1] = {3}, s22[2] = {2, 2};
    EACH_BACKEND(be) for (int d = RLX_BOOL; d <= RLX_U32; d++) {
        rlx_dtype dt = (rlx_dtype)d;
        const char *name = rlx_dtype_name(dt);
        const double vals[3] = {2.5, 1e6, -1};
        for (int i = 0; i < 3; i++) {
            double q = test_quantize(dt, vals[i]), want[3] = {q, q, q};
            EXPECT_V(name, rlx_full(dt, 1, s3, vals[i]), dt, 1, s3, want, 0, 0);
            EXPECT_V(name, rlx_scalar(dt, vals[i]), dt, 0, NULL, want, 0, 0);
        }
        EXPECT_V(name, rlx_zeros(dt, 1, s3), dt, 1, s3, ((const double[]){0, 0, 0}), 0, 0);
        EXPECT_V(name, rlx_ones(dt, 1, s3), dt, 1, s3, ((const double[]){1, 1, 1}), 0, 0);
        EXPECT_V(name, rlx_eye(dt, 2), dt, 2, s22, ((const double[]){1, 0, 0, 1}), 0, 0);
        rlx_clear_error();
        if (dt == RLX_BOOL)
            expect_refused("rlx_arange", dt, rlx_arange(dt, 0, 3, 1));
        else
            EXPECT_V(name, rlx_arange(dt, 0, 3, 1), dt, 1, s3, ((const double[]){0, 1, 2}), 0, 0);
        rlx_tensor *seed = ti64(0, NULL, (const int64_t[]){5});
        if (!ir_dtype_is_float(dt)) {
            expect_refused("rlx_rand", dt, rlx_rand(dt, 1, s3, 5));
            expect_refused("rlx_randn", dt, rlx_randn(dt, 1, s3, 5));
            expect_refused("rlx_rand_seeded", dt, rlx_rand_seeded(dt, 1, s3, seed));
            continue;
        }
        double u[3], v[3];
        rlx_tensor *r = rlx_rand(dt, 1, s3, 5);
        CHECK(r && rlx_dtype_of(r) == dt && rlx_read_f64(r, u, 3) == RLX_OK);
        for (int i = 0; i < 3; i++)
            if (!(u[i] >= 0 && u[i] < 1) || test_quantize(dt, u[i]) != u[i])
                test_fail(__FILE__, __LINE__, "rand(%s) drew %.17g", name, u[i]);
        CHECK(rlx_read_f64(rlx_rand_seeded(dt, 1, s3, seed), v, 3) == RLX_OK && memcmp(u, v, sizeof u) == 0);
        rlx_tensor *n = rlx_randn(dt, 1, s3, 5);
        CHECK(n && rlx_dtype_of(n) == dt && rlx_read_f64(n, v, 3) == RLX_OK && isfinite(v[0]));
    }
}

/* Index operands are i32 or i64 (PyTorch takes int64 and int32): a
 * narrow integer index is RLX_E_DTYPE naming the function and the dtype. */
TEST(narrow_index_operands_are_refused)
{
    const int64_t s2[1] = {2}, s22[2] = {2, 2};
    const rlx_dtype ints[4] = {RLX_I8, RLX_U8, RLX_I16, RLX_U32};
    rlx_tensor *x = tf32(2, S23, (const float[]){1, 2, 3, 4, 5, 6}), *src = tf32(2, s22, (const float[]){1, 2, 3, 4});
    for (int i = 0; i < 4; i++) {
        rlx_tensor *i1 = rlx_cast(ti64(1, s2, (const int64_t[]){1, 0}), ints[i]);
        rlx_tensor *i2 = rlx_cast(ti64(2, s22, (const int64_t[]){1, 0, 0, 2}), ints[i]);
        rlx_clear_error();
        expect_refused("rlx_gather", ints[i], rlx_gather(x, i2, 1));
        expect_refused("rlx_index_select", ints[i], rlx_index_select(x, 1, i1));
        expect_refused("rlx_scatter", ints[i], rlx_scatter(x, 1, i2, src));
        expect_refused("rlx_scatter_add", ints[i], rlx_scatter_add(x, 1, i2, src));
        expect_refused("rlx_index_add", ints[i], rlx_index_add(x, 1, i1, src));
    }
}

/* ------------------------------------------------------------ complex64 */

/* c64 values with imaginary part 0 compute what f64 computes (rounded to
 * f32 parts): a c64 result's real part matches the f64 one within f32's
 * spacing and its imaginary part is 0; a real result (eq, ne, a cast)
 * matches directly. tests/test_complex.c checks complex values. */
static void expect_like_f64(const char *what, rlx_tensor *c, rlx_tensor *f)
{
    bool cx = rlx_dtype_of(c) == RLX_C64 || rlx_dtype_of(c) == RLX_C128;
    rlx_tensor *re = cx ? rlx_real(c) : c;
    double tol = rlx_dtype_of(re) == RLX_F64 ? 1e-12 : 1e-6;
    test_expect_same(__FILE__, __LINE__, re, rlx_cast(f, rlx_dtype_of(re)), tol, tol);
    if (cx) {
        int64_t n = 0;
        double *im = test_values(rlx_imag(c), &n);
        for (int64_t i = 0; im && i < n; i++)
            if (im[i] != 0)
                test_fail(__FILE__, __LINE__, "%s: imaginary part %g of a real computation", what, im[i]);
        free(im);
    }
}

/* Every primitive on c64 (and c128): rebuilt from its f64 case with every
 * float source cast to cdt, it computes (ir_c64_takes: checked as above,
 * both backends) or its node is refused with RLX_E_DTYPE naming the
 * primitive and cdt. Leaves are the constructors' (below). */
static void primitives_on_complex(rlx_dtype cdt)
{
    int computed = 0, refused = 0;
    for (int i = 0; i < NCASES; i++) {
        const opcase *c = &CASES[i];
        if (ir_ops[c->op].cls == IR_CLS_LEAF)
            continue;
        if (c->op == IR_OP_CONJ || c->op == IR_OP_IMAG || c->op == IR_OP_COMPLEX)
            continue; /* c64 only: their own case runs on c64 */
        int n = 0;
        use_jit(false);
        rlx_tensor *f = build(c, RLX_F64, NULL, &n);
        if (!f || ts_node(f)->op != c->op) {
            test_fail(__FILE__, __LINE__, "%s: its f64 case is not the bare primitive", ir_ops[c->op].name);
            continue;
        }
        ir_node *fn = ts_node(f), *src[6]; /* (attention_bwd: 5) */
        bool any = false;
        for (int k = 0; k < fn->nsrc; k++) {
            bool fl = fn->src[k]->dtype == RLX_F64;
            src[k] = fl ? ts_node(rlx_cast((rlx_tensor *)fn->src[k], cdt)) : fn->src[k];
            any |= fl;
        }
        if (!any)
            continue; /* no float operand (rand_seeded's seed): the constructors' test */
        rlx_clear_error();
        rlx_tensor *r = make(c->op, fn->nsrc, src, &fn->attr);
        if (!ir_c64_takes(c->op)) {
            const char *msg = rlx_last_error();
            if (r || rlx_last_status() != RLX_E_DTYPE || !strstr(msg, ir_ops[c->op].name) ||
                !strstr(msg, rlx_dtype_name(cdt)))
                test_fail(__FILE__, __LINE__, "%s on %s: want RLX_E_DTYPE naming both, got %s (%s)",
                          ir_ops[c->op].name, rlx_dtype_name(cdt), r ? "a node" : "NULL", msg);
            rlx_clear_error();
            refused++;
            continue;
        }
        if (!r) {
            test_fail(__FILE__, __LINE__, "%s on %s: %s", ir_ops[c->op].name, rlx_dtype_name(cdt), rlx_last_error());
            rlx_clear_error();
            continue;
        }
        for (int jit = 0; jit < 2; jit++) {
            rlx_tensor *again = make(c->op, fn->nsrc, src, &fn->attr);
            use_jit(jit);
            if (rlx_realize(again) != RLX_OK) {
                test_fail(__FILE__, __LINE__, "%s on %s (%s): %s", ir_ops[c->op].name, rlx_dtype_name(cdt),
                          jit ? "jit" : "ref", rlx_last_error());
                rlx_clear_error();
                continue;
            }
            use_jit(false);
            expect_like_f64(ir_ops[c->op].name, again, f);
        }
        computed++;
    }
    printf("  %s: %d primitives compute it, %d refuse it\n", rlx_dtype_name(cdt), computed, refused);
}

TEST(every_primitive_on_c128) { primitives_on_complex(RLX_C128); }

TEST(every_primitive_on_c64)
{
    primitives_on_complex(RLX_C64);
    /* the c64-only rows, against values written here */
    use_jit(true);
    const float zv[12] = {1, 2, -3, 0.5f, 0, -1, 2.5f, 2.5f, -0.0f, 0, 4, -4};
    rlx_tensor *z = rlx_from_data(RLX_C64, 2, S23, zv);
    ir_node *zn = ts_node(z), *pair[2] = {zn, ts_node(rlx_conj(z))};
    double re[6], im[6], ci[6];
    for (int k = 0; k < 6; k++) {
        re[k] = zv[2 * k];
        im[k] = zv[2 * k + 1];
        ci[k] = -zv[2 * k + 1];
    }
    EACH_BACKEND(be) {
        rlx_tensor *cj = make(IR_OP_CONJ, 1, &zn, NULL), *ig = make(IR_OP_IMAG, 1, &zn, NULL);
        rlx_tensor *cx = make(IR_OP_COMPLEX, 2, pair, NULL); /* re(z) + i re(conj z) */
        EXPECT(rlx_real(cj), RLX_F32, 2, S23, re, 0);
        EXPECT(rlx_imag(cj), RLX_F32, 2, S23, ci, 0);
        EXPECT(rlx_real(ig), RLX_F32, 2, S23, im, 0);
        EXPECT(rlx_imag(ig), RLX_F32, 2, S23, ((const double[]){0, 0, 0, 0, 0, 0}), 0);
        EXPECT(rlx_real(cx), RLX_F32, 2, S23, re, 0);
        EXPECT(rlx_imag(cx), RLX_F32, 2, S23, re, 0);
        (void)be;
    }
    /* they take only c64 */
    rlx_tensor *fl = rlx_real(z);
    ir_node *fln = ts_node(fl), *fpair[2] = {fln, fln};
    for (int k = 0; k < 3; k++) {
        ir_op op = k == 0 ? IR_OP_CONJ : k == 1 ? IR_OP_IMAG : IR_OP_COMPLEX;
        rlx_clear_error();
        rlx_tensor *r = make(op, k == 2 ? 2 : 1, fpair, NULL);
        if (r || rlx_last_status() != RLX_E_DTYPE)
            test_fail(__FILE__, __LINE__, "%s of f32: want RLX_E_DTYPE", ir_ops[op].name);
        rlx_clear_error();
    }
}

/* The public functions on c64 operands: those rlx.h lists as computing
 * c64 give, on c64 operands with imaginary part 0, the f64 call's values
 * (as above) and run on complex operands on both backends; every other one
 * is RLX_E_DTYPE naming the function and c64. */
static const char *const C64_API[] = {
    "rlx_neg", "rlx_abs", "rlx_exp", "rlx_add", "rlx_sub", "rlx_mul", "rlx_div", "rlx_eq", "rlx_ne",
    "rlx_add_s", "rlx_sub_s", "rlx_mul_s", "rlx_div_s", "rlx_eq_s", "rlx_rsub_s", "rlx_rdiv_s",
    "rlx_sum", "rlx_mean", "rlx_sum_all", "rlx_mean_all", "rlx_transpose",
    "rlx_reshape", "rlx_flip", "rlx_roll", "rlx_tile", "rlx_pad", "rlx_pad_mode", "rlx_cat", "rlx_stack",
    "rlx_narrow", "rlx_slice", "rlx_select", "rlx_gather", "rlx_index_select", "rlx_broadcast_to",
    "rlx_flatten", "rlx_contiguous", "rlx_full_like", "rlx_ones_like", "rlx_matmul", "rlx_matmul_t",
    "rlx_linear", "rlx_einsum",
};

static void public_ops_on_complex(rlx_dtype cdt)
{
    int computed = 0, refused = 0;
    double av[6], bv[6];
    memcpy(av, AV, sizeof av);
    memcpy(bv, BV, sizeof bv);
    rlx_tensor *af = test_tensor(RLX_F64, 2, S23, av), *bf = test_tensor(RLX_F64, 2, S23, bv);
    rlx_tensor *ar = rlx_cast(af, cdt), *br = rlx_cast(bf, cdt);
    rlx_tensor *ac = rlx_cast(rlx_complex(af, bf), cdt), *bc = rlx_cast(rlx_complex(bf, rlx_neg(af)), cdt);
    double tol = cdt == RLX_C128 ? 1e-12 : 1e-6;
    for (int i = 0; i < NAPI; i++) {
        const apicase *c = &API_CASES[i];
        bool takes = false;
        for (size_t k = 0; k < sizeof C64_API / sizeof *C64_API; k++)
            takes |= strcmp(C64_API[k], c->fn) == 0;
        if (strcmp(c->fn, "rlx_where") == 0 || strcmp(c->fn, "rlx_masked_fill") == 0)
            continue; /* their case builds the mask with rlx_gt_s(b): test_complex.c checks them on c64 */
        rlx_scope_begin();
        rlx_clear_error();
        if (!takes) {
            EACH_BACKEND(be) expect_refused(c->fn, cdt, c->f(ac, bc));
            refused++;
            rlx_scope_end();
            continue;
        }
        use_jit(false);
        rlx_tensor *want = c->f(af, bf);
        rlx_tensor *got[2] = {NULL, NULL};
        EACH_BACKEND(be) {
            rlx_tensor *r = c->f(ar, br);
            if (!r || rlx_realize(r) != RLX_OK) {
                test_fail(__FILE__, __LINE__, "%s on %s (%s): %s", c->fn, rlx_dtype_name(cdt), be ? "jit" : "ref",
                          rlx_last_error());
                rlx_clear_error();
                continue;
            }
            use_jit(false);
            expect_like_f64(c->fn, r, want);
            use_jit(be);
            got[be] = c->f(ac, bc);
            if (!got[be] || rlx_realize(got[be]) != RLX_OK) {
                test_fail(__FILE__, __LINE__, "%s on complex %s (%s): %s", c->fn, rlx_dtype_name(cdt),
                          be ? "jit" : "ref", rlx_last_error());
                rlx_clear_error();
            }
        }
        if (got[0] && got[1] && rlx_dtype_of(got[0]) == cdt) { /* the backends agree */
            use_jit(false);
            test_expect_same(__FILE__, __LINE__, rlx_real(got[1]), rlx_real(got[0]), tol, tol);
            test_expect_same(__FILE__, __LINE__, rlx_imag(got[1]), rlx_imag(got[0]), tol, tol);
        }
        use_jit(true);
        computed++;
        rlx_scope_end();
    }
    /* the constructors: full/zeros/ones/eye hold real values, the others refuse */
    const int64_t s3[1] = {3};
    rlx_tensor *seed = ti64(0, NULL, (const int64_t[]){5});
    EACH_BACKEND(be) {
        expect_like_f64("rlx_full", rlx_full(cdt, 1, s3, 2.5), rlx_full(RLX_F64, 1, s3, 2.5));
        expect_like_f64("rlx_eye", rlx_eye(cdt, 2), rlx_eye(RLX_F64, 2));
        expect_like_f64("rlx_zeros", rlx_zeros(cdt, 1, s3), rlx_zeros(RLX_F64, 1, s3));
        rlx_clear_error();
        expect_refused("rlx_arange", cdt, rlx_arange(cdt, 0, 3, 1));
        expect_refused("rlx_rand", cdt, rlx_rand(cdt, 1, s3, 5));
        expect_refused("rlx_randn", cdt, rlx_randn(cdt, 1, s3, 5));
        expect_refused("rlx_rand_seeded", cdt, rlx_rand_seeded(cdt, 1, s3, seed));
        (void)be;
    }
    printf("  %s: %d public functions compute it, %d refuse it\n", rlx_dtype_name(cdt), computed, refused);
}

TEST(every_public_op_on_c64) { public_ops_on_complex(RLX_C64); }
TEST(every_public_op_on_c128) { public_ops_on_complex(RLX_C128); }

TEST_MAIN(T(every_primitive_has_every_layer), T(every_case_on_every_dtype_matches_its_row),
          T(every_primitive_on_c64), T(every_public_op_on_c64), T(every_primitive_on_c128),
          T(every_public_op_on_c128), T(input_is_reported_unbound),
          T(dtype_names_record_no_error), T(every_public_op_on_every_dtype), T(constructors_on_every_dtype),
          T(narrow_index_operands_are_refused))
