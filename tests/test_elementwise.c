/*
 * test_elementwise.c — unary, binary, comparison and selection ops.
 *
 * Table-driven: each function has a row with a reference in double written
 * here from the documented math (rlx.h), an input domain and tolerances.
 * Rows run on f32 and f64, on rank 0, [1], [5,7,11], an empty [0,3] and a
 * strided transposed view; binary rows also on broadcasting shape pairs.
 * Explicit tests cover dtype rules, integer and bool semantics, NaN/inf,
 * round-half-even, extreme inputs and bad arguments of every function.
 */
#include "harness.h"

#define PI_ 3.14159265358979323846

/* ------------------------------------------------------------- helpers */

enum { D_UNI, D_INT, D_PM }; /* uniform, floor(uniform), random sign * uniform */

static double gen(int dom, double lo, double hi)
{
    double v = test_uniform(lo, hi);
    if (dom == D_INT)
        return floor(v);
    if (dom == D_PM)
        return test_uniform(0, 1) < 0.5 ? -v : v;
    return v;
}

static double *gen_vals(int64_t n, int dom, double lo, double hi)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = gen(dom, lo, hi);
    return v;
}




/* A [4,6] view of a [6,8] base: v[i][j] = base[j][2i] (slice step 2, then
 * transpose). base has 48 values (quantized in place); vals gets 24. */
static rlx_tensor *strided_view(rlx_dtype dt, double *base, double *vals)
{
    const int64_t bs[2] = {6, 8};
    rlx_tensor *b = test_tensor(dt, 2, bs, base);
    rlx_tensor *v = rlx_transpose(rlx_slice(b, 1, 0, RLX_END, 2), 2, (const int[]){1, 0});
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 6; j++)
            vals[i * 6 + j] = base[j * 8 + 2 * i];
    return v;
}



/* NULL propagation: with an E_DTYPE from rlx_arange recorded, call must
 * return NULL and keep that error. */
static void seed_error(void)
{
    rlx_clear_error();
    rlx_tensor *t = rlx_arange(RLX_BOOL, 0, 1, 1);
    if (t || rlx_last_status() != RLX_E_DTYPE)
        test_fail(__FILE__, __LINE__, "could not seed an error");
}
static void check_kept(int line, rlx_tensor *r, const char *call)
{
    if (r)
        test_fail(__FILE__, line, "%s returned a tensor after an error", call);
    if (rlx_last_status() != RLX_E_DTYPE || strncmp(rlx_last_error(), "rlx_arange:", 11) != 0)
        test_fail(__FILE__, line, "%s replaced the first error: %d '%s'", call, (int)rlx_last_status(),
                  rlx_last_error());
    rlx_clear_error();
}
#define CHECK_KEEPS(call)                    \
    do {                                     \
        seed_error();                        \
        check_kept(__LINE__, (call), #call); \
    } while (0)

/* ------------------------------------------------------ unary references */

static double r_neg(double x) { return -x; }
static double r_relu(double x) { return isnan(x) ? x : x > 0 ? x : 0; }
static double r_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double r_gelu_tanh(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / PI_) * (x + 0.044715 * x * x * x))); }
static double r_sigmoid(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }
static double r_silu(double x) { return x * r_sigmoid(x); }
static double r_rsqrt(double x) { return 1 / sqrt(x); }
static double r_recip(double x) { return 1 / x; }
static double r_sign(double x) { return isnan(x) ? x : x > 0 ? 1 : x < 0 ? -1 : 0; }
static double r_round(double x) /* half to even, written out */
{
    if (!isfinite(x))
        return x;
    double f = floor(x), d = x - f, r = d > 0.5 ? f + 1 : d < 0.5 ? f : fmod(f, 2) == 0 ? f : f + 1;
    return r == 0 ? copysign(0, x) : r;
}
static double r_softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static double r_elu(double x) { return x > 0 ? x : expm1(x); }
static double r_hard_sigmoid(double x) { return isnan(x) ? x : x <= -3 ? 0 : x >= 3 ? 1 : x / 6 + 0.5; }
static double r_hard_swish(double x) { return x * r_hard_sigmoid(x); }
static double r_mish(double x) { return x * tanh(r_softplus(x)); }
static double r_softsign(double x) { return x / (1 + fabs(x)); }
static double r_log_sigmoid(double x) { return -r_softplus(-x); }
static double r_not(double x) { return x == 0; }
static double clampd(double x, double lo, double hi) { return isnan(x) ? x : x < lo ? (lo > hi ? hi : lo) : x > hi ? hi : x; }
static double r_clamp(double x) { return clampd(x, -0.5, 0.75); }
static double r_clamp_rev(double x) { return isnan(x) ? x : -1; } /* lo 1 > hi -1: hi */
static double r_clamp_min(double x) { return clampd(x, 0.25, INFINITY); }
static double r_clamp_max(double x) { return clampd(x, -INFINITY, -0.25); }
static rlx_tensor *w_clamp(rlx_tensor *x) { return rlx_clamp(x, -0.5, 0.75); }
static rlx_tensor *w_clamp_rev(rlx_tensor *x) { return rlx_clamp(x, 1, -1); }
static rlx_tensor *w_clamp_min(rlx_tensor *x) { return rlx_clamp_min(x, 0.25); }
static rlx_tensor *w_clamp_max(rlx_tensor *x) { return rlx_clamp_max(x, -0.25); }

enum { K_FLOAT, K_KEEP, K_NOT, K_CLAMP }; /* result dtype rule */
typedef struct {
    const char *name; /* as errors name it, without "rlx_" */
    rlx_tensor *(*fn)(rlx_tensor *);
    double (*ref)(double);
    int kind, dom;
    double lo, hi;
    int inf_ok; /* ref is the right value at +-inf */
    double tol32, tol64;
} urow;

#define T32 1e-5
#define T64 1e-12
static const urow UNARY[] = {
    {"neg", rlx_neg, r_neg, K_KEEP, D_UNI, -5, 5, 1, 0, 0},
    {"relu", rlx_relu, r_relu, K_KEEP, D_UNI, -5, 5, 1, 0, 0},
    {"gelu", rlx_gelu, r_gelu, K_FLOAT, D_UNI, -6, 6, 0, T32, T64},
    {"gelu_tanh", rlx_gelu_tanh, r_gelu_tanh, K_FLOAT, D_UNI, -6, 6, 0, T32, T64},
    {"silu", rlx_silu, r_silu, K_FLOAT, D_UNI, -8, 8, 0, T32, T64},
    {"tanh", rlx_tanh, tanh, K_FLOAT, D_UNI, -5, 5, 1, T32, T64},
    {"exp", rlx_exp, exp, K_FLOAT, D_UNI, -10, 10, 1, T32, T64},
    {"log", rlx_log, log, K_FLOAT, D_UNI, 0.01, 20, 1, T32, T64},
    {"sqrt", rlx_sqrt, sqrt, K_FLOAT, D_UNI, 0, 20, 1, T32, T64},
    {"rsqrt", rlx_rsqrt, r_rsqrt, K_FLOAT, D_UNI, 0.01, 20, 1, T32, T64},
    {"sigmoid", rlx_sigmoid, r_sigmoid, K_FLOAT, D_UNI, -20, 20, 1, T32, T64},
    {"abs", rlx_abs, fabs, K_KEEP, D_UNI, -5, 5, 1, 0, 0},
    {"sin", rlx_sin, sin, K_FLOAT, D_UNI, -6, 6, 1, T32, T64},
    {"cos", rlx_cos, cos, K_FLOAT, D_UNI, -6, 6, 1, T32, T64},
    {"tan", rlx_tan, tan, K_FLOAT, D_UNI, -1.4, 1.4, 1, T32, T64},
    {"atan", rlx_atan, atan, K_FLOAT, D_UNI, -10, 10, 1, T32, T64},
    {"round", rlx_round, r_round, K_KEEP, D_UNI, -10, 10, 1, 0, 0},
    {"recip", rlx_recip, r_recip, K_FLOAT, D_PM, 0.05, 10, 1, T32, T64},
    {"floor", rlx_floor, floor, K_KEEP, D_UNI, -10, 10, 1, 0, 0},
    {"ceil", rlx_ceil, ceil, K_KEEP, D_UNI, -10, 10, 1, 0, 0},
    {"sign", rlx_sign, r_sign, K_KEEP, D_INT, -3, 4, 1, 0, 0},
    {"softplus", rlx_softplus, r_softplus, K_FLOAT, D_UNI, -30, 30, 1, T32, T64},
    {"elu", rlx_elu, r_elu, K_FLOAT, D_UNI, -5, 5, 1, T32, T64},
    {"erf", rlx_erf, erf, K_FLOAT, D_UNI, -4, 4, 1, T32, T64},
    {"hard_swish", rlx_hard_swish, r_hard_swish, K_FLOAT, D_UNI, -5, 5, 0, T32, T64},
    {"hard_sigmoid", rlx_hard_sigmoid, r_hard_sigmoid, K_FLOAT, D_UNI, -5, 5, 1, T32, T64},
    {"mish", rlx_mish, r_mish, K_FLOAT, D_UNI, -8, 8, 0, T32, T64},
    {"softsign", rlx_softsign, r_softsign, K_FLOAT, D_UNI, -10, 10, 0, T32, T64},
    {"log_sigmoid", rlx_log_sigmoid, r_log_sigmoid, K_FLOAT, D_UNI, -30, 30, 1, T32, T64},
    {"logical_not", rlx_logical_not, r_not, K_NOT, D_INT, -2, 2, 1, 0, 0},
    {"clamp", w_clamp, r_clamp, K_CLAMP, D_UNI, -2, 2, 1, 0, 0},
    {"clamp", w_clamp_rev, r_clamp_rev, K_CLAMP, D_UNI, -2, 2, 1, 0, 0},
    {"clamp_min", w_clamp_min, r_clamp_min, K_CLAMP, D_UNI, -2, 2, 1, 0, 0},
    {"clamp_max", w_clamp_max, r_clamp_max, K_CLAMP, D_UNI, -2, 2, 1, 0, 0},
};
#define NUNARY ((int)(sizeof UNARY / sizeof *UNARY))

static rlx_dtype unary_out(const urow *r, rlx_dtype in)
{
    if (r->kind == K_NOT)
        return RLX_BOOL;
    if (r->kind == K_FLOAT && (in == RLX_BOOL || in == RLX_I32 || in == RLX_I64))
        return RLX_F32;
    return in;
}

/* Runs row r on x (values xv) and compares with r->ref. */
static void check_unary(const urow *r, rlx_dtype dt, rlx_tensor *x, const double *xv, int rank,
                        const int64_t *shape, const char *tag)
{
    int64_t n = test_numel(rank, shape);
    double *e = malloc((size_t)(n ? n : 1) * sizeof *e);
    for (int64_t i = 0; i < n; i++)
        e[i] = r->ref(xv[i]);
    rlx_dtype od = unary_out(r, dt);
    double tol = od == RLX_F32 ? r->tol32 : od == RLX_F64 ? r->tol64 : 0;
    char what[128];
    snprintf(what, sizeof what, "rlx_%s %s %s", r->name, rlx_dtype_name(dt), tag);
    rlx_clear_error();
    EXPECT_V(what, r->fn(x), od, rank, shape, e, tol, tol);
    free(e);
}

static const struct { int rank; int64_t shape[3]; } USHAPES[] = {{0, {0}}, {1, {1}}, {3, {5, 7, 11}}, {2, {0, 3}}};

static void unary_shapes(rlx_dtype dt)
{
    for (int k = 0; k < NUNARY; k++) {
        const urow *r = &UNARY[k];
        for (size_t s = 0; s < sizeof USHAPES / sizeof *USHAPES; s++) {
            int rank = USHAPES[s].rank;
            const int64_t *shape = USHAPES[s].shape;
            double *v = gen_vals(test_numel(rank, shape), r->dom, r->lo, r->hi);
            rlx_tensor *x = test_tensor(dt, rank, shape, v);
            check_unary(r, dt, x, v, rank, shape, test_dims(rank, shape));
            free(v);
        }
        double base[48], vals[24];
        for (int i = 0; i < 48; i++)
            base[i] = gen(r->dom, r->lo, r->hi);
        rlx_tensor *x = strided_view(dt, base, vals);
        check_unary(r, dt, x, vals, 2, (const int64_t[]){4, 6}, "strided view");
    }
}

TEST(unary_f64_shapes) { unary_shapes(RLX_F64); }
TEST(unary_f32_shapes) { unary_shapes(RLX_F32); }

/* Signed zeros, halves, small integers, NaN (and +-inf where meaningful). */
TEST(unary_special_values)
{
    static const double sv[] = {0, -0.0, 0.5, -0.5, 1, -1, 1.5, -1.5, 2.5, -2.5, 3, -3, NAN, INFINITY, -INFINITY};
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F32 : RLX_F64;
        for (int k = 0; k < NUNARY; k++) {
            int n = UNARY[k].inf_ok ? 15 : 13;
            double v[15];
            memcpy(v, sv, sizeof v);
            int64_t s = n;
            rlx_tensor *x = test_tensor(dt, 1, &s, v);
            check_unary(&UNARY[k], dt, x, v, 1, &s, "special values");
        }
    }
}

/* Large magnitudes: stable formulas stay finite and correct. */
TEST(unary_extreme_values)
{
    static const double xv[] = {1000, -1000, 50, -50, 20, -20};
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F32 : RLX_F64;
        for (int k = 0; k < NUNARY; k++) {
            double v[6];
            memcpy(v, xv, sizeof v);
            int64_t s = 6;
            check_unary(&UNARY[k], dt, test_tensor(dt, 1, &s, v), v, 1, &s, "extreme values");
        }
        /* The ones that must not overflow, spelled out. */
        double v[4] = {1000, -1000, 50, -50};
        int64_t s = 4;
        rlx_tensor *x = test_tensor(dt, 1, &s, v);
        EXPECT_V("softplus(+-1000)", rlx_softplus(x), dt, 1, &s, ((double[]){1000, 0, 50, 1.9287498479639178e-22}), 1e-6, 1e-30);
        EXPECT_V("log_sigmoid(+-1000)", rlx_log_sigmoid(x), dt, 1, &s, ((double[]){0, -1000, -1.9287498479639178e-22, -50}), 1e-6, 1e-30);
        EXPECT_V("sigmoid(+-1000)", rlx_sigmoid(x), dt, 1, &s, ((double[]){1, 0, 1, 1.9287498479639178e-22}), 1e-6, 1e-30);
        EXPECT_V("tanh(+-50)", rlx_tanh(x), dt, 1, &s, ((double[]){1, -1, 1, -1}), 0, 0);
    }
}

/* Integer and bool inputs: float math gives f32, the rest keep the dtype. */
TEST(unary_integer_and_bool_inputs)
{
    static const double iv[] = {-3, -2, -1, 0, 1, 2, 3, 7};
    const rlx_dtype ints[] = {RLX_I32, RLX_I64, RLX_BOOL};
    for (int d = 0; d < 3; d++) {
        rlx_dtype dt = ints[d];
        for (int k = 0; k < NUNARY; k++) {
            const urow *r = &UNARY[k];
            if (r->kind == K_CLAMP)
                continue;
            double v[8];
            memcpy(v, iv, sizeof v);
            int64_t s = 8;
            rlx_tensor *x = test_tensor(dt, 1, &s, v);
            if (dt == RLX_BOOL && r->fn == rlx_neg) {
                CHECK_NULL_ERR(rlx_neg(x), RLX_E_DTYPE, "rlx_neg:");
                continue;
            }
            check_unary(r, dt, x, v, 1, &s, "integer input");
        }
    }
    /* Wrapping at the edge of i32: neg/abs of INT32_MIN stay INT32_MIN. */
    int32_t m[2] = {INT32_MIN, INT32_MAX}, out[2] = {0, 0};
    rlx_tensor *x = ti32(1, (const int64_t[]){2}, m);
    CHECK(rlx_read(rlx_neg(x), out, sizeof out) == RLX_OK);
    CHECK_EQ_INT(out[0], INT32_MIN);
    CHECK_EQ_INT(out[1], -INT32_MAX);
    CHECK(rlx_read(rlx_abs(x), out, sizeof out) == RLX_OK);
    CHECK_EQ_INT(out[0], INT32_MIN);
    CHECK_EQ_INT(out[1], INT32_MAX);
    /* logical_not of every dtype is bool; NaN is nonzero. */
    for (int dt = RLX_BOOL; dt <= RLX_F64; dt++) {
        double v[3] = {0, 2, dt >= RLX_F32 ? NAN : -1};
        EXPECT_V("logical_not", rlx_logical_not(test_tensor((rlx_dtype)dt, 1, (const int64_t[]){3}, v)), RLX_BOOL, 1,
                 ((const int64_t[]){3}), ((double[]){1, 0, 0}), 0, 0);
    }
}

TEST(round_half_to_even)
{
    static const double in[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 4.5, -0.4, 0.49999997, 8388609, -7.5};
    static const double want[] = {0, 2, 2, -0.0, -2, -2, 4, 4, -0.0, 0, 8388609, -8};
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F32 : RLX_F64;
        double v[12];
        memcpy(v, in, sizeof v);
        rlx_tensor *r = rlx_round(test_tensor(dt, 1, (const int64_t[]){12}, v));
        EXPECT_V("round", r, dt, 1, ((const int64_t[]){12}), want, 0, 0);
        double got[12];
        if (rlx_read_f64(r, got, 12) == RLX_OK) {
            CHECK(signbit(got[3]) && signbit(got[8])); /* -0.5 and -0.4 round to -0 */
            CHECK(!signbit(got[0]));
        }
    }
    double big[2] = {4503599627370497.0, -4503599627370497.0}; /* 2^52+1: already an integer */
    EXPECT_V("round 2^52+1", rlx_round(test_tensor(RLX_F64, 1, (const int64_t[]){2}, big)), RLX_F64, 1,
             ((const int64_t[]){2}), big, 0, 0);
}

TEST(unary_bad_input)
{
    for (int k = 0; k < NUNARY; k++) {
        char nm[64];
        snprintf(nm, sizeof nm, "rlx_%s:", UNARY[k].name);
        CHECK_NULL_ERR(UNARY[k].fn(NULL), RLX_E_ARG, nm);
        CHECK_KEEPS(UNARY[k].fn(NULL));
    }
    /* An expression over a failed operand: one check at the end. */
    seed_error();
    rlx_tensor *x = rlx_arange(RLX_BOOL, 0, 3, 1);
    check_kept(__LINE__, rlx_exp(rlx_neg(rlx_add(x, x))), "exp(neg(add(NULL, NULL)))");
}

/* ----------------------------------------------------- binary references */

static double b_add(double a, double b) { return a + b; }
static double b_sub(double a, double b) { return a - b; }
static double b_mul(double a, double b) { return a * b; }
static double b_div(double a, double b) { return a / b; }
static double b_max(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static double b_min(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }
static double b_eq(double a, double b) { return a == b; }
static double b_ne(double a, double b) { return a != b; }
static double b_lt(double a, double b) { return a < b; }
static double b_le(double a, double b) { return a <= b; }
static double b_gt(double a, double b) { return a > b; }
static double b_ge(double a, double b) { return a >= b; }
static double b_and(double a, double b) { return a != 0 && b != 0; }
static double b_or(double a, double b) { return a != 0 || b != 0; }
static double b_rsub(double x, double s) { return s - x; }
static double b_rdiv(double x, double s) { return s / x; }

enum { B_ARITH, B_CMP }; /* result dtype: promoted, or bool */
typedef struct {
    const char *name;
    rlx_tensor *(*fn)(rlx_tensor *, rlx_tensor *); /* NULL: no tensor form */
    rlx_tensor *(*fns)(rlx_tensor *, double);      /* NULL: no _s form */
    double (*ref)(double, double);
    int kind;
    int adom;
    double alo, ahi;
    int bdom;
    double blo, bhi, s, tol32, tol64;
} brow;

static const brow BINARY[] = {
    {"add", rlx_add, rlx_add_s, b_add, B_ARITH, D_UNI, -5, 5, D_UNI, -5, 5, 1.25, 1e-6, 1e-15},
    {"sub", rlx_sub, rlx_sub_s, b_sub, B_ARITH, D_UNI, -5, 5, D_UNI, -5, 5, 0.75, 1e-6, 1e-15},
    {"mul", rlx_mul, rlx_mul_s, b_mul, B_ARITH, D_UNI, -5, 5, D_UNI, -5, 5, -1.5, 1e-6, 1e-15},
    {"div", rlx_div, rlx_div_s, b_div, B_ARITH, D_UNI, -5, 5, D_PM, 0.5, 4, 2.5, 1e-6, 1e-15},
    {"pow", rlx_pow, rlx_pow_s, pow, B_ARITH, D_UNI, 0.1, 3, D_UNI, -2, 2, 1.5, 1e-5, 1e-13},
    {"maximum", rlx_maximum, rlx_maximum_s, b_max, B_ARITH, D_INT, -3, 3, D_INT, -3, 3, 0, 0, 0},
    {"minimum", rlx_minimum, rlx_minimum_s, b_min, B_ARITH, D_INT, -3, 3, D_INT, -3, 3, 1, 0, 0},
    {"atan2", rlx_atan2, rlx_atan2_s, atan2, B_ARITH, D_UNI, -3, 3, D_UNI, -3, 3, -0.5, 1e-5, 1e-13},
    {"rem", rlx_rem, rlx_rem_s, fmod, B_ARITH, D_UNI, -8, 8, D_PM, 0.5, 3, 1.25, 1e-6, 1e-15},
    {"eq", rlx_eq, rlx_eq_s, b_eq, B_CMP, D_INT, -3, 3, D_INT, -3, 3, 1, 0, 0},
    {"ne", rlx_ne, rlx_ne_s, b_ne, B_CMP, D_INT, -3, 3, D_INT, -3, 3, 1, 0, 0},
    {"lt", rlx_lt, rlx_lt_s, b_lt, B_CMP, D_INT, -3, 3, D_INT, -3, 3, 0, 0, 0},
    {"le", rlx_le, rlx_le_s, b_le, B_CMP, D_INT, -3, 3, D_INT, -3, 3, 0, 0, 0},
    {"gt", rlx_gt, rlx_gt_s, b_gt, B_CMP, D_INT, -3, 3, D_INT, -3, 3, -1, 0, 0},
    {"ge", rlx_ge, rlx_ge_s, b_ge, B_CMP, D_INT, -3, 3, D_INT, -3, 3, -1, 0, 0},
    {"logical_and", rlx_logical_and, NULL, b_and, B_CMP, D_INT, -1, 2, D_INT, -1, 2, 0, 0, 0},
    {"logical_or", rlx_logical_or, NULL, b_or, B_CMP, D_INT, -1, 2, D_INT, -1, 2, 0, 0, 0},
    {"rsub_s", NULL, rlx_rsub_s, b_rsub, B_ARITH, D_UNI, -5, 5, D_UNI, 0, 0, 2.25, 1e-6, 1e-15},
    {"rdiv_s", NULL, rlx_rdiv_s, b_rdiv, B_ARITH, D_PM, 0.5, 4, D_UNI, 0, 0, -3.5, 1e-6, 1e-15},
};
#define NBINARY ((int)(sizeof BINARY / sizeof *BINARY))

/* NumPy broadcast of two shapes in the test's own words; -1 if they do not. */
static int bshape(int ra, const int64_t *a, int rb, const int64_t *b, int64_t *out)
{
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int64_t da = i < r - ra ? 1 : a[i - (r - ra)], db = i < r - rb ? 1 : b[i - (r - rb)];
        if (da != db && da != 1 && db != 1)
            return -1;
        out[i] = da == 1 ? db : da;
    }
    return r;
}

/* Flat index into an input of shape is for flat output index o. */
static int64_t bidx(int ro, const int64_t *os, int64_t o, int ri, const int64_t *is)
{
    int64_t off = 0, st = 1;
    for (int d = ro - 1; d >= 0; d--) {
        int64_t c = o % os[d];
        o /= os[d];
        int k = d - (ro - ri);
        if (k >= 0) {
            if (is[k] != 1)
                off += c * st;
            st *= is[k];
        }
    }
    return off;
}

static void check_binary(const brow *r, rlx_dtype dt, rlx_tensor *a, const double *av, int ra, const int64_t *sa,
                         rlx_tensor *b, const double *bv, int rb, const int64_t *sb, const char *tag)
{
    int64_t os[RLX_MAX_RANK];
    int ro = bshape(ra, sa, rb, sb, os);
    int64_t n = test_numel(ro, os);
    double *e = malloc((size_t)(n ? n : 1) * sizeof *e);
    for (int64_t i = 0; i < n; i++)
        e[i] = r->ref(av[bidx(ro, os, i, ra, sa)], bv[bidx(ro, os, i, rb, sb)]);
    rlx_dtype od = r->kind == B_CMP ? RLX_BOOL : dt;
    double tol = od == RLX_F32 ? r->tol32 : r->tol64;
    char what[160];
    snprintf(what, sizeof what, "rlx_%s %s %s %s (%s)", r->name, rlx_dtype_name(dt), test_dims(ra, sa), test_dims(rb, sb), tag);
    rlx_clear_error();
    EXPECT_V(what, r->fn(a, b), od, ro, os, e, tol, tol);
    free(e);
}

static const struct { int ra; int64_t sa[3]; int rb; int64_t sb[3]; } BSHAPES[] = {
    {0, {0}, 0, {0}}, {1, {1}, 1, {1}}, {3, {5, 7, 11}, 3, {5, 7, 11}}, {2, {0, 3}, 2, {0, 3}},
    {2, {3, 1}, 2, {1, 4}}, {2, {1, 4}, 2, {3, 1}}, {1, {4}, 3, {2, 3, 4}}, {3, {2, 3, 4}, 1, {4}},
    {0, {0}, 2, {2, 2}}, {2, {2, 2}, 0, {0}}, {2, {0, 3}, 1, {3}}, {1, {1}, 3, {5, 7, 11}},
};

static void binary_shapes(rlx_dtype dt)
{
    for (int k = 0; k < NBINARY; k++) {
        const brow *r = &BINARY[k];
        if (!r->fn)
            continue;
        for (size_t s = 0; s < sizeof BSHAPES / sizeof *BSHAPES; s++) {
            int ra = BSHAPES[s].ra, rb = BSHAPES[s].rb;
            const int64_t *sa = BSHAPES[s].sa, *sb = BSHAPES[s].sb;
            double *av = gen_vals(test_numel(ra, sa), r->adom, r->alo, r->ahi);
            double *bv = gen_vals(test_numel(rb, sb), r->bdom, r->blo, r->bhi);
            rlx_tensor *a = test_tensor(dt, ra, sa, av), *b = test_tensor(dt, rb, sb, bv);
            check_binary(r, dt, a, av, ra, sa, b, bv, rb, sb, "contiguous");
            free(av);
            free(bv);
        }
        /* Strided views: a transposed-sliced [4,6] with a sliced [4,6], and
         * with a broadcast [6]. */
        double abase[48], av[24], bbase[48], bv[24], cv[6];
        for (int i = 0; i < 48; i++) {
            abase[i] = gen(r->adom, r->alo, r->ahi);
            bbase[i] = gen(r->bdom, r->blo, r->bhi);
        }
        for (int i = 0; i < 6; i++)
            cv[i] = gen(r->bdom, r->blo, r->bhi);
        rlx_tensor *a = strided_view(dt, abase, av);
        rlx_tensor *bb = test_tensor(dt, 2, (const int64_t[]){4, 12}, bbase);
        rlx_tensor *b = rlx_slice(bb, 1, 1, RLX_END, 2); /* b[i][j] = bbase[i][1+2j] */
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 6; j++)
                bv[i * 6 + j] = bbase[i * 12 + 1 + 2 * j];
        const int64_t s46[2] = {4, 6}, s6[1] = {6};
        check_binary(r, dt, a, av, 2, s46, b, bv, 2, s46, "strided views");
        check_binary(r, dt, b, bv, 2, s46, a, av, 2, s46, "strided views");
        rlx_tensor *c = test_tensor(dt, 1, s6, cv);
        check_binary(r, dt, a, av, 2, s46, c, cv, 1, s6, "view with broadcast");
    }
}

TEST(binary_f64_shapes) { binary_shapes(RLX_F64); }
TEST(binary_f32_shapes) { binary_shapes(RLX_F32); }

/* The _s forms (and rsub_s, rdiv_s): the scalar takes the tensor's dtype. */
TEST(binary_scalar_forms)
{
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F32 : RLX_F64;
        for (int k = 0; k < NBINARY; k++) {
            const brow *r = &BINARY[k];
            if (!r->fns)
                continue;
            for (int s = 0; s < 4; s++) { /* rank 0, [5,7,11], [0,3], then a strided view */
                static const int pick[3] = {0, 2, 3};
                int rank = s == 3 ? 2 : USHAPES[pick[s]].rank;
                const int64_t *shape = s == 3 ? (const int64_t[]){4, 6} : USHAPES[pick[s]].shape;
                int64_t n = test_numel(rank, shape);
                double *av = gen_vals(n, r->adom, r->alo, r->ahi), base[48];
                rlx_tensor *a;
                if (s == 3) {
                    for (int i = 0; i < 48; i++)
                        base[i] = gen(r->adom, r->alo, r->ahi);
                    a = strided_view(dt, base, av);
                } else {
                    a = test_tensor(dt, rank, shape, av);
                }
                double sv = test_quantize(dt, r->s);
                double *e = malloc((size_t)(n ? n : 1) * sizeof *e);
                for (int64_t i = 0; i < n; i++)
                    e[i] = r->ref(av[i], sv);
                rlx_dtype od = r->kind == B_CMP ? RLX_BOOL : dt;
                double tol = od == RLX_F32 ? r->tol32 : r->tol64;
                char what[96];
                snprintf(what, sizeof what, "rlx_%s%s %s %s", r->name, r->fn ? "_s" : "", rlx_dtype_name(dt),
                         test_dims(rank, shape));
                rlx_clear_error();
                EXPECT_V(what, r->fns(a, r->s), od, rank, shape, e, tol, tol);
                free(e);
                free(av);
            }
        }
    }
}

/* NumPy promotion, both operand orders, for arithmetic and comparison. */
TEST(binary_dtype_promotion)
{
    static const struct { rlx_dtype a, b, out; } P[] = {
        {RLX_I32, RLX_F32, RLX_F32}, {RLX_I32, RLX_I64, RLX_I64}, {RLX_BOOL, RLX_I32, RLX_I32},
        {RLX_F32, RLX_F64, RLX_F64}, {RLX_I64, RLX_F32, RLX_F32}, {RLX_BOOL, RLX_F64, RLX_F64},
        {RLX_BOOL, RLX_I64, RLX_I64}, {RLX_I64, RLX_F64, RLX_F64}, {RLX_I32, RLX_I32, RLX_I32},
        {RLX_BOOL, RLX_BOOL, RLX_BOOL}, {RLX_BOOL, RLX_F32, RLX_F32},
    };
    for (size_t i = 0; i < sizeof P / sizeof *P; i++) {
        for (int swap = 0; swap < 2; swap++) {
            rlx_dtype da = swap ? P[i].b : P[i].a, db = swap ? P[i].a : P[i].b;
            double av[4] = {1, 0, 3, -2}, bv[4] = {4.5, 5, -6, 0.25};
            rlx_tensor *a = test_tensor(da, 1, (const int64_t[]){4}, av), *b = test_tensor(db, 1, (const int64_t[]){4}, bv);
            double sum[4], prod[4], lt[4];
            for (int j = 0; j < 4; j++) {
                sum[j] = test_quantize(P[i].out, av[j] + bv[j]);
                prod[j] = test_quantize(P[i].out, av[j] * bv[j]);
                lt[j] = av[j] < bv[j];
            }
            char what[64];
            snprintf(what, sizeof what, "%s op %s", rlx_dtype_name(da), rlx_dtype_name(db));
            const int64_t s4[1] = {4};
            EXPECT_V(what, rlx_add(a, b), P[i].out, 1, s4, sum, 1e-6, 0);
            EXPECT_V(what, rlx_mul(a, b), P[i].out, 1, s4, prod, 1e-6, 0);
            EXPECT_V(what, rlx_lt(a, b), RLX_BOOL, 1, s4, lt, 0, 0);
        }
    }
    /* i32 7 / f32 2 is 3.5 (promoted first); i32 / i64 truncates. */
    double a7[1] = {7}, b2[1] = {2}, b2i[1] = {2};
    const int64_t s1[1] = {1};
    EXPECT_V("i32/f32", rlx_div(test_tensor(RLX_I32, 1, s1, a7), test_tensor(RLX_F32, 1, s1, b2)), RLX_F32, 1, s1, ((double[]){3.5}), 0, 0);
    EXPECT_V("i32/i64", rlx_div(test_tensor(RLX_I32, 1, s1, a7), test_tensor(RLX_I64, 1, s1, b2i)), RLX_I64, 1, s1, ((double[]){3}), 0, 0);
    /* atan2 of integers computes in f32; with f64 gives f64. */
    double y[2] = {1, -1}, x[2] = {1, 0};
    const int64_t s2[1] = {2};
    rlx_tensor *yi = test_tensor(RLX_I32, 1, s2, y), *xi = test_tensor(RLX_I32, 1, s2, x);
    EXPECT_V("atan2 i32", rlx_atan2(yi, xi), RLX_F32, 1, s2, ((double[]){PI_ / 4, -PI_ / 2}), 1e-6, 0);
    EXPECT_V("atan2 i32,f64", rlx_atan2(yi, test_tensor(RLX_F64, 1, s2, x)), RLX_F64, 1, s2, ((double[]){PI_ / 4, -PI_ / 2}), 1e-15, 0);
    /* The _s forms keep the tensor's dtype: 2.5 on i32 is 2, on f32 stays f32. */
    double iv[3] = {1, -4, 7};
    const int64_t s3[1] = {3};
    for (int dt = RLX_I32; dt <= RLX_F64; dt++) {
        rlx_tensor *t = test_tensor((rlx_dtype)dt, 1, s3, iv);
        double w = test_quantize((rlx_dtype)dt, 2.5);
        EXPECT_V("add_s", rlx_add_s(t, 2.5), (rlx_dtype)dt, 1, s3, ((double[]){1 + w, -4 + w, 7 + w}), 0, 0);
        EXPECT_V("mul_s", rlx_mul_s(t, 2.5), (rlx_dtype)dt, 1, s3, ((double[]){w, -4 * w, 7 * w}), 0, 0);
        EXPECT_V("lt_s", rlx_lt_s(t, 1.5), RLX_BOOL, 1, s3, ((double[]){dt < RLX_F32 ? 0 : 1, 1, 0}), 0, 0);
    }
    EXPECT_V("f32 add_s 1e-10", rlx_add_s(test_tensor(RLX_F32, 1, s3, iv), 1e-10), RLX_F32, 1, s3, iv, 0, 0);
    EXPECT_V("eq_s i32 0.5", rlx_eq_s(test_tensor(RLX_I32, 1, s2, (double[]){0, 1}), 0.5), RLX_BOOL, 1, s2, ((double[]){1, 0}), 0, 0);
}

/* i32/i64: wrapping add/sub/mul, C division and remainder, x/0 = 0, pow. */
TEST(binary_integer_semantics)
{
    static const struct { const char *op; int64_t a, b, want; } C[] = {
        {"add", INT32_MAX, 1, INT32_MIN}, {"sub", INT32_MIN, 1, INT32_MAX}, {"mul", 65536, 65536, 0},
        {"mul", 46341, 46341, -2147479015}, {"div", 7, 2, 3}, {"div", -7, 2, -3}, {"div", 7, -2, -3},
        {"div", -7, -2, 3}, {"div", 5, 0, 0}, {"div", 0, 0, 0}, {"div", -5, 0, 0}, {"div", INT32_MIN, -1, INT32_MIN},
        {"rem", 7, 2, 1}, {"rem", -7, 2, -1}, {"rem", 7, -2, 1}, {"rem", -7, -2, -1}, {"rem", 5, 0, 0},
        {"rem", INT32_MIN, -1, 0}, {"pow", 2, 10, 1024}, {"pow", -3, 3, -27}, {"pow", 2, -1, 0},
        {"pow", 1, -5, 1}, {"pow", -1, -3, -1}, {"pow", -1, -2, 1}, {"pow", 5, 0, 1}, {"pow", 0, 0, 1},
        {"pow", 2, 31, INT32_MIN}, {"pow", 3, 2, 9}, {"maximum", -3, 2, 2}, {"minimum", -3, 2, -3},
    };
    rlx_tensor *(*const fns[])(rlx_tensor *, rlx_tensor *) = {rlx_add, rlx_sub, rlx_mul, rlx_div, rlx_rem,
                                                            rlx_pow, rlx_maximum, rlx_minimum};
    static const char *names[] = {"add", "sub", "mul", "div", "rem", "pow", "maximum", "minimum"};
    for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
        int f = 0;
        while (strcmp(names[f], C[i].op) != 0)
            f++;
        int32_t a = (int32_t)C[i].a, b = (int32_t)C[i].b, got = 12345;
        rlx_tensor *r = fns[f](ti32(0, NULL, &a), ti32(0, NULL, &b));
        if (!r || rlx_dtype_of(r) != RLX_I32 || rlx_read(r, &got, sizeof got) != RLX_OK)
            test_fail(__FILE__, __LINE__, "i32 %s(%d, %d) failed: %s", C[i].op, a, b, rlx_last_error());
        else if (got != (int32_t)C[i].want)
            test_fail(__FILE__, __LINE__, "i32 %s(%d, %d) = %d, expected %d", C[i].op, a, b, got, (int32_t)C[i].want);
        /* The same in i64, where the i32 wraps do not wrap. */
        int64_t a64 = C[i].a, b64 = C[i].b, g64 = 12345, w64 = C[i].want;
        if (f <= 2 || (f == 5 && C[i].b == 31))
            w64 = f == 0 ? a64 + b64 : f == 1 ? a64 - b64 : f == 2 ? a64 * b64 : (int64_t)1 << 31;
        if (f == 3 && a64 == INT32_MIN)
            w64 = -a64;
        r = fns[f](ti64(0, NULL, &a64), ti64(0, NULL, &b64));
        if (!r || rlx_dtype_of(r) != RLX_I64 || rlx_read(r, &g64, sizeof g64) != RLX_OK || g64 != w64)
            test_fail(__FILE__, __LINE__, "i64 %s(%lld, %lld) = %lld, expected %lld (%s)", C[i].op, (long long)a64,
                      (long long)b64, (long long)g64, (long long)w64, rlx_last_error());
    }
    int64_t big[2] = {INT64_MAX, INT64_MIN}, one = 1, out[2] = {0, 0};
    rlx_tensor *b = ti64(1, (const int64_t[]){2}, big), *o = ti64(0, NULL, &one);
    CHECK(rlx_read(rlx_add(b, o), out, sizeof out) == RLX_OK && out[0] == INT64_MIN && out[1] == INT64_MIN + 1);
    CHECK(rlx_read(rlx_sub(b, o), out, sizeof out) == RLX_OK && out[0] == INT64_MAX - 1 && out[1] == INT64_MAX);
    /* i64 beyond 2^53 stays exact; i32 with f32 computes in f32 (the rule). */
    int64_t hi53 = ((int64_t)1 << 53) + 1, lo53 = (int64_t)1 << 53, g = 0;
    rlx_tensor *h = ti64(0, NULL, &hi53), *l = ti64(0, NULL, &lo53);
    unsigned char bo = 9;
    CHECK(rlx_read(rlx_eq(h, l), &bo, 1) == RLX_OK && bo == 0);
    CHECK(rlx_read(rlx_gt(h, l), &bo, 1) == RLX_OK && bo == 1);
    CHECK(rlx_read(rlx_maximum(h, l), &g, 8) == RLX_OK && g == hi53);
    CHECK(rlx_read(rlx_sub(h, l), &g, 8) == RLX_OK && g == 1);
    int32_t i24 = 16777217;
    float f24 = 16777216.0f;
    CHECK(rlx_read(rlx_eq(ti32(0, NULL, &i24), tf32(0, NULL, &f24)), &bo, 1) == RLX_OK && bo == 1);
    /* _s and reversed forms on integers. */
    double v[4] = {7, -7, 0, 3};
    const int64_t s4[1] = {4};
    rlx_tensor *x = test_tensor(RLX_I32, 1, s4, v);
    EXPECT_V("div_s i32", rlx_div_s(x, 2), RLX_I32, 1, s4, ((double[]){3, -3, 0, 1}), 0, 0);
    EXPECT_V("div_s i32 by 0", rlx_div_s(x, 0), RLX_I32, 1, s4, ((double[]){0, 0, 0, 0}), 0, 0);
    EXPECT_V("rem_s i32", rlx_rem_s(x, -2), RLX_I32, 1, s4, ((double[]){1, -1, 0, 1}), 0, 0);
    EXPECT_V("rdiv_s i32", rlx_rdiv_s(x, 7), RLX_I32, 1, s4, ((double[]){1, -1, 0, 2}), 0, 0);
    EXPECT_V("rsub_s i32", rlx_rsub_s(x, 7.9), RLX_I32, 1, s4, ((double[]){0, 14, 7, 4}), 0, 0);
    EXPECT_V("pow_s i32", rlx_pow_s(x, 2), RLX_I32, 1, s4, ((double[]){49, 49, 0, 9}), 0, 0);
    /* Float rem is fmod (sign of the dividend). */
    double fa[4] = {-7.5, 7.5, 5, -0.0}, fb[4] = {2, -2, 0, 3};
    EXPECT_V("rem f64", rlx_rem(test_tensor(RLX_F64, 1, s4, fa), test_tensor(RLX_F64, 1, s4, fb)), RLX_F64, 1, s4,
             ((double[]){-1.5, 1.5, NAN, -0.0}), 0, 0);
}

/* bool op bool: add/maximum are or, mul/minimum and; other arithmetic fails. */
TEST(binary_bool_semantics)
{
    double av[4] = {0, 0, 1, 1}, bv[4] = {0, 1, 0, 1};
    const int64_t s4[1] = {4};
    rlx_tensor *a = test_tensor(RLX_BOOL, 1, s4, av), *b = test_tensor(RLX_BOOL, 1, s4, bv);
    const double OR[4] = {0, 1, 1, 1}, AND[4] = {0, 0, 0, 1};
    EXPECT_V("bool add", rlx_add(a, b), RLX_BOOL, 1, s4, OR, 0, 0);
    EXPECT_V("bool maximum", rlx_maximum(a, b), RLX_BOOL, 1, s4, OR, 0, 0);
    EXPECT_V("bool logical_or", rlx_logical_or(a, b), RLX_BOOL, 1, s4, OR, 0, 0);
    EXPECT_V("bool mul", rlx_mul(a, b), RLX_BOOL, 1, s4, AND, 0, 0);
    EXPECT_V("bool minimum", rlx_minimum(a, b), RLX_BOOL, 1, s4, AND, 0, 0);
    EXPECT_V("bool logical_and", rlx_logical_and(a, b), RLX_BOOL, 1, s4, AND, 0, 0);
    EXPECT_V("bool eq", rlx_eq(a, b), RLX_BOOL, 1, s4, ((double[]){1, 0, 0, 1}), 0, 0);
    EXPECT_V("bool lt", rlx_lt(a, b), RLX_BOOL, 1, s4, ((double[]){0, 1, 0, 0}), 0, 0);
    EXPECT_V("bool add_s", rlx_add_s(a, 0), RLX_BOOL, 1, s4, av, 0, 0);
    EXPECT_V("bool mul_s", rlx_mul_s(a, 0), RLX_BOOL, 1, s4, ((double[]){0, 0, 0, 0}), 0, 0);
    CHECK_NULL_ERR(rlx_sub(a, b), RLX_E_DTYPE, "rlx_sub:");
    CHECK_NULL_ERR(rlx_sub_s(a, 1), RLX_E_DTYPE, "rlx_sub_s:");
    CHECK_NULL_ERR(rlx_div(a, b), RLX_E_DTYPE, "rlx_div:");
    CHECK_NULL_ERR(rlx_rem(a, b), RLX_E_DTYPE, "rlx_rem:");
    CHECK_NULL_ERR(rlx_pow(a, b), RLX_E_DTYPE, "rlx_pow:");
    CHECK_NULL_ERR(rlx_rsub_s(a, 1), RLX_E_DTYPE, "rlx_rsub_s:");
    CHECK_NULL_ERR(rlx_rdiv_s(a, 1), RLX_E_DTYPE, "rlx_rdiv_s:");
    CHECK_NULL_ERR(rlx_neg(a), RLX_E_DTYPE, "rlx_neg:");
    /* logical ops on other dtypes: nonzero (NaN included) is true. */
    double fv[4] = {0, 0.5, NAN, -2}, iv[4] = {3, 0, 1, 0};
    rlx_tensor *f = test_tensor(RLX_F32, 1, s4, fv), *i = test_tensor(RLX_I32, 1, s4, iv);
    EXPECT_V("logical_and f32,i32", rlx_logical_and(f, i), RLX_BOOL, 1, s4, ((double[]){0, 0, 1, 0}), 0, 0);
    EXPECT_V("logical_or f32,i32", rlx_logical_or(f, i), RLX_BOOL, 1, s4, ((double[]){1, 1, 1, 1}), 0, 0);
}

/* NaN and infinity through arithmetic, comparisons, maximum/minimum, clamp. */
TEST(binary_nan_inf)
{
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F32 : RLX_F64;
        double av[6] = {NAN, 1, NAN, INFINITY, -INFINITY, INFINITY}, bv[6] = {1, NAN, NAN, 1, INFINITY, INFINITY};
        const int64_t s6[1] = {6};
        rlx_tensor *a = test_tensor(dt, 1, s6, av), *b = test_tensor(dt, 1, s6, bv);
        EXPECT_V("maximum nan", rlx_maximum(a, b), dt, 1, s6, ((double[]){NAN, NAN, NAN, INFINITY, INFINITY, INFINITY}), 0, 0);
        EXPECT_V("minimum nan", rlx_minimum(a, b), dt, 1, s6, ((double[]){NAN, NAN, NAN, 1, -INFINITY, INFINITY}), 0, 0);
        EXPECT_V("add inf", rlx_add(a, b), dt, 1, s6, ((double[]){NAN, NAN, NAN, INFINITY, NAN, INFINITY}), 0, 0);
        EXPECT_V("sub inf", rlx_sub(a, b), dt, 1, s6, ((double[]){NAN, NAN, NAN, INFINITY, -INFINITY, NAN}), 0, 0);
        const double F[6] = {0, 0, 0, 0, 0, 0};
        EXPECT_V("eq nan", rlx_eq(a, b), RLX_BOOL, 1, s6, ((double[]){0, 0, 0, 0, 0, 1}), 0, 0);
        EXPECT_V("ne nan", rlx_ne(a, b), RLX_BOOL, 1, s6, ((double[]){1, 1, 1, 1, 1, 0}), 0, 0);
        EXPECT_V("lt nan", rlx_lt(a, b), RLX_BOOL, 1, s6, ((double[]){0, 0, 0, 0, 1, 0}), 0, 0);
        EXPECT_V("le nan", rlx_le(a, b), RLX_BOOL, 1, s6, ((double[]){0, 0, 0, 0, 1, 1}), 0, 0);
        EXPECT_V("gt nan", rlx_gt(a, b), RLX_BOOL, 1, s6, ((double[]){0, 0, 0, 1, 0, 0}), 0, 0);
        EXPECT_V("ge nan", rlx_ge(a, b), RLX_BOOL, 1, s6, ((double[]){0, 0, 0, 1, 0, 1}), 0, 0);
        EXPECT_V("eq_s nan", rlx_eq_s(a, NAN), RLX_BOOL, 1, s6, F, 0, 0);
        EXPECT_V("ne_s nan", rlx_ne_s(a, NAN), RLX_BOOL, 1, s6, ((double[]){1, 1, 1, 1, 1, 1}), 0, 0);
        EXPECT_V("maximum_s nan", rlx_maximum_s(b, NAN), dt, 1, s6, ((double[]){NAN, NAN, NAN, NAN, NAN, NAN}), 0, 0);
        EXPECT_V("clamp nan", rlx_clamp(a, 0, 2), dt, 1, s6, ((double[]){NAN, 1, NAN, 2, 0, 2}), 0, 0);
        EXPECT_V("clamp_min nan", rlx_clamp_min(a, 0), dt, 1, s6, ((double[]){NAN, 1, NAN, INFINITY, 0, INFINITY}), 0, 0);
        EXPECT_V("clamp_max nan", rlx_clamp_max(a, 0), dt, 1, s6, ((double[]){NAN, 0, NAN, 0, -INFINITY, 0}), 0, 0);
        double z[3] = {1, -1, 0};
        rlx_tensor *zt = test_tensor(dt, 1, (const int64_t[]){3}, z);
        EXPECT_V("x/0", rlx_div_s(zt, 0), dt, 1, ((const int64_t[]){3}), ((double[]){INFINITY, -INFINITY, NAN}), 0, 0);
        EXPECT_V("rdiv 0", rlx_rdiv_s(zt, 0), dt, 1, ((const int64_t[]){3}), ((double[]){0, -0.0, NAN}), 0, 0);
        EXPECT_V("inf*0", rlx_mul_s(test_tensor(dt, 1, (const int64_t[]){1}, (double[]){INFINITY}), 0), dt, 1,
                 ((const int64_t[]){1}), ((double[]){NAN}), 0, 0);
    }
}

/* Every binary function: NULL operands, shapes that do not broadcast. */
TEST(binary_bad_input)
{
    rlx_tensor *a = rlx_ones(RLX_F32, 2, (const int64_t[]){2, 3});
    rlx_tensor *b = rlx_ones(RLX_F32, 2, (const int64_t[]){4, 3});
    rlx_tensor *c = rlx_ones(RLX_F32, 1, (const int64_t[]){4});
    for (int k = 0; k < NBINARY; k++) {
        const brow *r = &BINARY[k];
        char nm[64], nms[64];
        snprintf(nm, sizeof nm, "rlx_%s:", r->name);
        snprintf(nms, sizeof nms, r->fn ? "rlx_%s_s:" : "rlx_%s:", r->name);
        if (r->fn) {
            CHECK_NULL_ERR(r->fn(NULL, a), RLX_E_ARG, nm);
            CHECK_NULL_ERR(r->fn(a, NULL), RLX_E_ARG, nm);
            CHECK_NULL_ERR(r->fn(NULL, NULL), RLX_E_ARG, nm);
            CHECK_KEEPS(r->fn(NULL, a));
            CHECK_KEEPS(r->fn(a, NULL));
            for (int pair = 0; pair < 2; pair++) {
                rlx_tensor *x = pair ? b : a, *y = pair ? a : c;
                const char *sx = pair ? "[4,3]" : "[2,3]", *sy = pair ? "[2,3]" : "[4]";
                rlx_clear_error();
                rlx_tensor *res = r->fn(x, y);
                const char *msg = rlx_last_error();
                if (res || rlx_last_status() != RLX_E_SHAPE || strncmp(msg, nm, strlen(nm)) != 0 ||
                    !strstr(msg, sx) || !strstr(msg, sy))
                    test_fail(__FILE__, __LINE__, "rlx_%s(%s, %s): status %d, message '%s'", r->name, sx, sy,
                              (int)rlx_last_status(), msg);
                rlx_release(res);
            }
        }
        if (r->fns) {
            CHECK_NULL_ERR(r->fns(NULL, 1), RLX_E_ARG, nms);
            CHECK_KEEPS(r->fns(NULL, 1));
        }
    }
    rlx_clear_error();
}

/* ------------------------------------------------------------ selection */

TEST(where_broadcast_and_promotion)
{
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F32 : RLX_F64;
        /* cond [3,1] bool, a [1,4] dt, b rank 0 f64 -> [3,4] f64. */
        double cv[3] = {1, 0, 1}, av[4], bv[1] = {-9.5};
        for (int i = 0; i < 4; i++)
            av[i] = test_uniform(-5, 5);
        rlx_tensor *c = test_tensor(RLX_BOOL, 2, (const int64_t[]){3, 1}, cv), *a = test_tensor(dt, 2, (const int64_t[]){1, 4}, av);
        rlx_tensor *b = test_tensor(RLX_F64, 0, NULL, bv);
        double e[12];
        for (int i = 0; i < 12; i++)
            e[i] = cv[i / 4] != 0 ? av[i % 4] : bv[0];
        EXPECT_V("where bcast", rlx_where(c, a, b), RLX_F64, 2, ((const int64_t[]){3, 4}), e, 0, 0);
        /* Same-shape strided views, cond of dt (nonzero and NaN are true). */
        double cb[48], cvv[24], ab[48], avv[24], bb[48], bvv[24];
        for (int i = 0; i < 48; i++) {
            cb[i] = i % 5 == 0 ? NAN : floor(test_uniform(-1, 2));
            ab[i] = test_uniform(-5, 5);
            bb[i] = test_uniform(-5, 5);
        }
        rlx_tensor *cw = strided_view(dt, cb, cvv), *aw = strided_view(dt, ab, avv), *bw = strided_view(dt, bb, bvv);
        double e2[24];
        for (int i = 0; i < 24; i++)
            e2[i] = cvv[i] != 0 ? avv[i] : bvv[i];
        EXPECT_V("where views", rlx_where(cw, aw, bw), dt, 2, ((const int64_t[]){4, 6}), e2, 0, 0);
        /* Empty and rank 0. */
        EXPECT_V("where empty", rlx_where(rlx_zeros(RLX_BOOL, 2, (const int64_t[]){0, 1}), a, b), RLX_F64, 2,
                 ((const int64_t[]){0, 4}), NULL, 0, 0);
    }
    double ci[1] = {0}, x[4] = {1, 2, 3, 4}, y[4] = {5, 6, 7, 8};
    rlx_tensor *xi = test_tensor(RLX_I32, 2, (const int64_t[]){2, 2}, x), *yi = test_tensor(RLX_I32, 2, (const int64_t[]){2, 2}, y);
    EXPECT_V("where i32 cond 0", rlx_where(test_tensor(RLX_I32, 0, NULL, ci), xi, yi), RLX_I32, 2, ((const int64_t[]){2, 2}), y, 0, 0);
    EXPECT_V("where i32/f32", rlx_where(test_tensor(RLX_BOOL, 0, NULL, (double[]){1}), xi, test_tensor(RLX_F32, 0, NULL, (double[]){0.5})),
             RLX_F32, 2, ((const int64_t[]){2, 2}), x, 0, 0);
    /* Bad input. */
    rlx_tensor *t = rlx_ones(RLX_F32, 1, (const int64_t[]){3});
    CHECK_NULL_ERR(rlx_where(NULL, t, t), RLX_E_ARG, "rlx_where:");
    CHECK_NULL_ERR(rlx_where(t, NULL, t), RLX_E_ARG, "rlx_where:");
    CHECK_NULL_ERR(rlx_where(t, t, NULL), RLX_E_ARG, "rlx_where:");
    CHECK_KEEPS(rlx_where(NULL, t, t));
    CHECK_KEEPS(rlx_where(t, t, NULL));
    CHECK_NULL_ERR(rlx_where(t, xi, t), RLX_E_SHAPE, "rlx_where:");
    CHECK_NULL_ERR(rlx_where(rlx_ones(RLX_BOOL, 1, (const int64_t[]){4}), t, t), RLX_E_SHAPE, "rlx_where:");
}

TEST(masked_fill)
{
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F32 : RLX_F64;
        const int64_t sx[3] = {5, 7, 11}, sm[2] = {7, 1};
        double *xv = gen_vals(385, D_UNI, -3, 3), mv[7];
        for (int i = 0; i < 7; i++)
            mv[i] = i % 3 == 0;
        rlx_tensor *x = test_tensor(dt, 3, sx, xv), *m = test_tensor(RLX_BOOL, 2, sm, mv);
        double *e = malloc(385 * sizeof *e);
        for (int i = 0; i < 385; i++)
            e[i] = mv[i / 11 % 7] != 0 ? -INFINITY : xv[i];
        EXPECT_V("masked_fill bcast", rlx_masked_fill(x, m, -INFINITY), dt, 3, sx, e, 0, 0);
        /* A strided x with an f32 mask of its own shape. */
        double xb[48], xw[24], mb[48], mw[24], e2[24];
        for (int i = 0; i < 48; i++) {
            xb[i] = test_uniform(-3, 3);
            mb[i] = floor(test_uniform(-1, 2));
        }
        rlx_tensor *xs = strided_view(dt, xb, xw), *ms = strided_view(RLX_F32, mb, mw);
        for (int i = 0; i < 24; i++)
            e2[i] = mw[i] != 0 ? 0.5 : xw[i];
        EXPECT_V("masked_fill view", rlx_masked_fill(xs, ms, 0.5), dt, 2, ((const int64_t[]){4, 6}), e2, 0, 0);
        EXPECT_V("masked_fill empty", rlx_masked_fill(rlx_zeros(dt, 2, (const int64_t[]){0, 3}), rlx_ones(RLX_BOOL, 1, (const int64_t[]){3}), 1),
                 dt, 2, ((const int64_t[]){0, 3}), NULL, 0, 0);
        free(xv);
        free(e);
    }
    /* The value takes x's dtype: 2.7 on i32 is 2. */
    double xi[3] = {5, 6, 7}, mi[3] = {0, 4, 0};
    rlx_tensor *x = test_tensor(RLX_I32, 1, (const int64_t[]){3}, xi);
    EXPECT_V("masked_fill i32", rlx_masked_fill(x, test_tensor(RLX_I64, 1, (const int64_t[]){3}, mi), 2.7), RLX_I32, 1,
             ((const int64_t[]){3}), ((double[]){5, 2, 7}), 0, 0);
    /* The mask must broadcast to x's shape, not enlarge it. */
    rlx_tensor *m23 = rlx_ones(RLX_BOOL, 2, (const int64_t[]){2, 3}), *m4 = rlx_ones(RLX_BOOL, 1, (const int64_t[]){4});
    CHECK_NULL_ERR(rlx_masked_fill(x, m23, 0), RLX_E_SHAPE, "rlx_masked_fill:");
    CHECK_NULL_ERR(rlx_masked_fill(x, m4, 0), RLX_E_SHAPE, "rlx_masked_fill:");
    CHECK_NULL_ERR(rlx_masked_fill(NULL, m4, 0), RLX_E_ARG, "rlx_masked_fill:");
    CHECK_NULL_ERR(rlx_masked_fill(x, NULL, 0), RLX_E_ARG, "rlx_masked_fill:");
    CHECK_KEEPS(rlx_masked_fill(NULL, m4, 0));
    CHECK_KEEPS(rlx_masked_fill(x, NULL, 0));
}

/* clamp on integers converts the bounds to the dtype; lo > hi gives hi. */
TEST(clamp_integers)
{
    double v[6] = {-5, -1, 0, 1, 2, 9};
    const int64_t s6[1] = {6};
    for (int dt = RLX_I32; dt <= RLX_I64; dt++) {
        rlx_tensor *x = test_tensor((rlx_dtype)dt, 1, s6, v);
        EXPECT_V("clamp int", rlx_clamp(x, -1.5, 2.9), (rlx_dtype)dt, 1, s6, ((double[]){-1, -1, 0, 1, 2, 2}), 0, 0);
        EXPECT_V("clamp_min int", rlx_clamp_min(x, 0.7), (rlx_dtype)dt, 1, s6, ((double[]){0, 0, 0, 1, 2, 9}), 0, 0);
        EXPECT_V("clamp_max int", rlx_clamp_max(x, -0.7), (rlx_dtype)dt, 1, s6, ((double[]){-5, -1, 0, 0, 0, 0}), 0, 0);
        EXPECT_V("clamp lo>hi int", rlx_clamp(x, 3, 1), (rlx_dtype)dt, 1, s6, ((double[]){1, 1, 1, 1, 1, 1}), 0, 0);
    }
}


/* The value v of an integer dtype dt wrapped modulo 2^bits, as integer
 * arithmetic leaves it (C, NumPy, PyTorch). */
static double wrap_to(double v, rlx_dtype dt)
{
    switch (dt) {
    case RLX_I8: return (double)(int8_t)(uint8_t)(int64_t)v;
    case RLX_U8: return (double)(uint8_t)(int64_t)v;
    case RLX_I16: return (double)(int16_t)(uint16_t)(int64_t)v;
    case RLX_U32: return (double)(uint32_t)(int64_t)v;
    case RLX_I32: return (double)(int32_t)(uint32_t)(int64_t)v;
    default: return v;
    }
}

/* PyTorch's promotion, written out pair by pair for the narrow dtypes
 * (torch.promote_types; NumPy's for u32, which PyTorch lacks in part). */
static rlx_dtype torch_promote(rlx_dtype a, rlx_dtype b)
{
    enum { B = RLX_BOOL, I32 = RLX_I32, I64 = RLX_I64, F32 = RLX_F32, F64 = RLX_F64, F16 = RLX_F16, BF = RLX_BF16,
           I8 = RLX_I8, U8 = RLX_U8, I16 = RLX_I16, U32 = RLX_U32 };
    /* rows and columns in enum order: bool i32 i64 f32 f64 f16 bf16 i8 u8 i16 u32 */
    static const unsigned char T[11][11] = {
        [B] = {B, I32, I64, F32, F64, F16, BF, I8, U8, I16, U32},
        [I32] = {I32, I32, I64, F32, F64, F16, BF, I32, I32, I32, I64},
        [I64] = {I64, I64, I64, F32, F64, F16, BF, I64, I64, I64, I64},
        [F32] = {F32, F32, F32, F32, F64, F32, F32, F32, F32, F32, F32},
        [F64] = {F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64},
        [F16] = {F16, F16, F16, F32, F64, F16, F32, F16, F16, F16, F16},
        [BF] = {BF, BF, BF, F32, F64, F32, BF, BF, BF, BF, BF},
        [I8] = {I8, I32, I64, F32, F64, F16, BF, I8, I16, I16, I64},
        [U8] = {U8, I32, I64, F32, F64, F16, BF, I16, U8, I16, U32},
        [I16] = {I16, I32, I64, F32, F64, F16, BF, I16, I16, I16, I64},
        [U32] = {U32, I64, I64, F32, F64, F16, BF, I64, U32, I64, U32},
    };
    return (rlx_dtype)T[a][b];
}

/* rlx_add of every pair of the eleven dtypes: the promoted dtype (PyTorch's
 * table, written out here) and a + b computed exactly and rounded once to
 * it (integers: wrapped), on both backends. */
TEST(promotion_table_through_add)
{
    const int64_t s4[1] = {4};
    int pairs = 0;
    EACH_BACKEND(be) for (int a = RLX_BOOL; a <= RLX_U32; a++) for (int b = RLX_BOOL; b <= RLX_U32; b++) {
        double av[4] = {1, 100, 3.25, 70000}, bv[4] = {-3, 27.5, 0, 65504};
        rlx_tensor *x = test_tensor((rlx_dtype)a, 1, s4, av), *y = test_tensor((rlx_dtype)b, 1, s4, bv);
        rlx_dtype want = torch_promote((rlx_dtype)a, (rlx_dtype)b);
        rlx_tensor *r = rlx_add(x, y);
        if (!r || rlx_dtype_of(r) != want) {
            test_fail(__FILE__, __LINE__, "%s + %s gives %s, want %s", rlx_dtype_name((rlx_dtype)a),
                      rlx_dtype_name((rlx_dtype)b), r ? rlx_dtype_name(rlx_dtype_of(r)) : rlx_last_error(),
                      rlx_dtype_name(want));
            continue;
        }
        double e[4];
        for (int i = 0; i < 4; i++) {
            double s = av[i] + bv[i]; /* exact: the stored values are small */
            e[i] = want == RLX_BOOL ? (av[i] != 0 || bv[i] != 0)
                   : want == RLX_F32 || want == RLX_F64 || want == RLX_F16 || want == RLX_BF16 ? test_quantize(want, s)
                                                                                                : wrap_to(s, want);
        }
        char what[64];
        snprintf(what, sizeof what, "%s + %s", rlx_dtype_name((rlx_dtype)a), rlx_dtype_name((rlx_dtype)b));
        EXPECT_V(what, r, want, 1, s4, e, 0, 0);
        pairs++;
    }
    CHECK_EQ_INT(pairs, 2 * 121);
}

/* Narrow integer arithmetic wraps in the result's dtype; the _s forms
 * take the tensor's dtype: the scalar, a double, converts as a float does
 * (300 saturates to 255 on u8; NumPy and PyTorch refuse it). */
TEST(narrow_integers_wrap)
{
    const int64_t s3[1] = {3};
    EACH_BACKEND(be) {
        double a[3] = {200, 255, 3}, b[3] = {100, 1, 250};
        rlx_tensor *x = test_tensor(RLX_U8, 1, s3, a), *y = test_tensor(RLX_U8, 1, s3, b);
        EXPECT(rlx_add(x, y), RLX_U8, 1, s3, ((const double[]){44, 0, 253}), 0);
        EXPECT(rlx_sub(x, y), RLX_U8, 1, s3, ((const double[]){100, 254, 9}), 0);
        EXPECT(rlx_add_s(x, 300), RLX_U8, 1, s3, ((const double[]){199, 254, 2}), 0);
        EXPECT(rlx_mul_s(x, 2), RLX_U8, 1, s3, ((const double[]){144, 254, 6}), 0);
        EXPECT(rlx_neg(x), RLX_U8, 1, s3, ((const double[]){56, 1, 253}), 0);
        double c[3] = {100, 120, -128}, d[3] = {3, 2, -1};
        rlx_tensor *p = test_tensor(RLX_I8, 1, s3, c), *q = test_tensor(RLX_I8, 1, s3, d);
        EXPECT(rlx_mul(p, q), RLX_I8, 1, s3, ((const double[]){44, -16, -128}), 0);
        EXPECT(rlx_div(p, q), RLX_I8, 1, s3, ((const double[]){33, 60, -128}), 0); /* -128 / -1 wraps */
        EXPECT(rlx_abs(p), RLX_I8, 1, s3, ((const double[]){100, 120, -128}), 0);
        double e[3] = {30000, -30000, 1}, f[3] = {30000, -30000, 0};
        EXPECT(rlx_add(test_tensor(RLX_I16, 1, s3, e), test_tensor(RLX_I16, 1, s3, f)), RLX_I16, 1, s3,
               ((const double[]){-5536, 5536, 1}), 0);
        double g[3] = {0, 4294967295.0, 65536}, h[3] = {1, 1, 65536};
        rlx_tensor *u = test_tensor(RLX_U32, 1, s3, g), *v = test_tensor(RLX_U32, 1, s3, h);
        EXPECT(rlx_sub(u, v), RLX_U32, 1, s3, ((const double[]){4294967295.0, 4294967294.0, 0}), 0);
        EXPECT(rlx_mul(u, v), RLX_U32, 1, s3, ((const double[]){0, 4294967295.0, 0}), 0);
        EXPECT(rlx_gt(u, v), RLX_BOOL, 1, s3, ((const double[]){0, 1, 0}), 0); /* unsigned compare */
    }
}

/* float -> integer casts truncate and saturate per dtype (NaN is 0);
 * integer -> narrower integer wraps; f64 -> f16/bf16 rounds once to nearest
 * even from the exact value (not through f32). */
TEST(casts_saturate_wrap_and_round_once)
{
    const int64_t s8[1] = {8};
    double in[8] = {-1.5, 300.7, 255.9, NAN, 1e10, 3.9, -200, -0.5};
    EACH_BACKEND(be) {
        rlx_tensor *x = tf64(1, s8, in);
        EXPECT(rlx_cast(x, RLX_U8), RLX_U8, 1, s8, ((const double[]){0, 255, 255, 0, 255, 3, 0, 0}), 0);
        EXPECT(rlx_cast(x, RLX_I8), RLX_I8, 1, s8, ((const double[]){-1, 127, 127, 0, 127, 3, -128, 0}), 0);
        EXPECT(rlx_cast(x, RLX_I16), RLX_I16, 1, s8, ((const double[]){-1, 300, 255, 0, 32767, 3, -200, 0}), 0);
        EXPECT(rlx_cast(x, RLX_U32), RLX_U32, 1, s8, ((const double[]){0, 300, 255, 0, 4294967295.0, 3, 0, 0}), 0);
        EXPECT(rlx_cast(rlx_cast(x, RLX_F32), RLX_U8), RLX_U8, 1, s8, ((const double[]){0, 255, 255, 0, 255, 3, 0, 0}), 0);
        const int64_t s4[1] = {4};
        double iv[4] = {300, -1, 65536 + 7, -129};
        rlx_tensor *i = test_tensor(RLX_I64, 1, s4, iv);
        EXPECT(rlx_cast(i, RLX_U8), RLX_U8, 1, s4, ((const double[]){44, 255, 7, 127}), 0);
        EXPECT(rlx_cast(i, RLX_U32), RLX_U32, 1, s4, ((const double[]){300, 4294967295.0, 65543, 4294967167.0}), 0);
        EXPECT(rlx_cast(i, RLX_I8), RLX_I8, 1, s4, ((const double[]){44, -1, 7, 127}), 0);
        /* 1 + 2^-11 + 2^-40 is above the f16 tie: up to 1 + 2^-10 (through
         * f32 it would be the tie 1 + 2^-11, rounding to 1); 65520 is inf */
        double fv[4] = {1 + 0x1p-11 + 0x1p-40, 1 + 0x1p-11, 65520, -1e-9};
        rlx_tensor *f = tf64(1, s4, fv);
        EXPECT(rlx_cast(f, RLX_F16), RLX_F16, 1, s4, ((const double[]){1 + 0x1p-10, 1, INFINITY, -0.0}), 0);
        double bv[4] = {1 + 0x1p-8 + 0x1p-40, 1 + 0x1p-8, 3.5e38, 0.1};
        EXPECT(rlx_cast(tf64(1, s4, bv), RLX_BF16), RLX_BF16, 1, s4,
               ((const double[]){1 + 0x1p-7, 1, INFINITY, 0.10009765625}), 0);
    }
}

TEST_MAIN(T(unary_f64_shapes), T(unary_f32_shapes), T(unary_special_values), T(unary_extreme_values),
          T(unary_integer_and_bool_inputs), T(round_half_to_even), T(unary_bad_input), T(binary_f64_shapes),
          T(binary_f32_shapes), T(binary_scalar_forms), T(binary_dtype_promotion), T(binary_integer_semantics),
          T(binary_bool_semantics), T(binary_nan_inf), T(binary_bad_input), T(where_broadcast_and_promotion),
          T(masked_fill), T(clamp_integers), T(promotion_table_through_add), T(narrow_integers_wrap),
          T(casts_saturate_wrap_and_round_once))
