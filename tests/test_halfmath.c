/*
 * test_halfmath.c — the reduced-precision f32 math of f16/bf16 kernels
 * (cg_math_fn_lowp, chosen by mark_lowp in cg_kernel.c): over every one of
 * the 65,536 bf16 and f16 patterns, exp, tanh and sigmoid of the half
 * dtype, and gelu_tanh (an f32 composite whose value is only rounded to
 * the half dtype, emitted in one piece as x / (1 + e^(-2y))), against the
 * exact function computed in double and rounded once to the dtype
 * (ir/cast.h, the reference's rounding). Equal bits, or one ulp off where
 * the value lies within the variant's error of a rounding midpoint; those
 * are counted and the counts bounded.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ir/cast.h"

typedef rlx_tensor *(*fn1)(rlx_tensor *);

static double gelu_tanh_d(double x) { return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
/* the same without 1 + tanh's cancellation (double loses it below x = -6) */
static double gelu_sig_d(double x) { return x / (1 + exp(-2 * 0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double sigmoid_d(double x) { return 1 / (1 + exp(-x)); }

static uint16_t round_to(rlx_dtype dt, double v) { return dt == RLX_BF16 ? ir_bf16_bits(v) : ir_f16_bits(v); }
static double half_val(rlx_dtype dt, uint16_t h) { return dt == RLX_BF16 ? ir_half_value(h, 7, 127) : ir_half_value(h, 10, 15); }

/* Distance in ulps between two finite patterns of one dtype (the patterns
 * as sign-magnitude integers, so +0 and -0 are 0 apart). */
static long ulp_dist(uint16_t a, uint16_t b)
{
    long ia = a & 0x8000 ? -(long)(a & 0x7fff) : (long)(a & 0x7fff);
    long ib = b & 0x8000 ? -(long)(b & 0x7fff) : (long)(b & 0x7fff);
    return labs(ia - ib);
}

/* f over all patterns of dt on the JIT; returns the count of 1-ulp
 * differences from the once-rounded exact value, fails on any larger one
 * (only where xlo <= x <= xhi). */
static long sweep_in(rlx_dtype dt, fn1 f, double (*exact)(double), double xlo, double xhi, const char *what)
{
    int64_t n = 65536;
    uint16_t *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
    for (int64_t i = 0; i < n; i++)
        in[i] = (uint16_t)i;
    rlx_tensor *x = rlx_from_data(dt, 1, &n, in);
    rlx_tensor *y = f(x);
    CHECK(y && rlx_realize(y) == RLX_OK && rlx_dtype_of(y) == dt);
    long off = 0, bad = 0;
    if (y && rlx_read(y, out, (size_t)n * sizeof *out) == RLX_OK) {
        for (int64_t i = 0; i < n; i++) {
            double xv = half_val(dt, in[i]);
            if (isnan(xv) || xv < xlo || xv > xhi)
                continue;
            uint16_t want = round_to(dt, exact(xv));
            bool wnan = isnan(half_val(dt, want)), gnan = isnan(half_val(dt, out[i]));
            long d = wnan || gnan ? (wnan == gnan ? 0 : 99) : ulp_dist(out[i], want);
            if (d == 1)
                off++;
            if (d > 1 && bad++ < 5)
                fprintf(stderr, "%s %s(%.9g): got 0x%04x (%.9g), want 0x%04x (%.9g)\n", rlx_dtype_name(dt), what, xv,
                        out[i], half_val(dt, out[i]), want, half_val(dt, want));
        }
    } else {
        CHECK(0);
    }
    CHECK_EQ_INT(bad, 0);
    free(in);
    free(out);
    return off;
}

static long sweep(rlx_dtype dt, fn1 f, double (*exact)(double), double xmax, const char *what)
{
    return sweep_in(dt, f, exact, -xmax, xmax, what);
}

static rlx_tensor *tanh_(rlx_tensor *x) { return rlx_tanh(x); }
static rlx_tensor *exp_(rlx_tensor *x) { return rlx_exp(x); }
static rlx_tensor *sigmoid_(rlx_tensor *x) { return rlx_sigmoid(x); }
static rlx_tensor *gelu_tanh_(rlx_tensor *x) { return rlx_gelu_tanh(x); }

/* gelu_tanh below -10.07 (bf16; f16 underflows long before): -0, where
 * the exact value is below |x| 2^-128 (cg_math.c's emit_gelu_half) */
static void gelu_tail_is_zero(void)
{
    int64_t n = 65536;
    uint16_t *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
    for (int64_t i = 0; i < n; i++)
        in[i] = (uint16_t)i;
    rlx_tensor *y = rlx_gelu_tanh(rlx_from_data(RLX_BF16, 1, &n, in));
    CHECK(y && rlx_realize(y) == RLX_OK && rlx_read(y, out, (size_t)n * sizeof *out) == RLX_OK);
    long bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double xv = half_val(RLX_BF16, in[i]);
        if (!isnan(xv) && xv <= -10.07)
            bad += out[i] != 0x8000 && !(isinf(xv) && isnan(half_val(RLX_BF16, out[i]))); /* -inf * 0: NaN */
    }
    CHECK_EQ_INT(bad, 0);
    free(in);
    free(out);
}

/* The bounds: a variant of relative error e (2^-15.5 for bf16, 2^-21 for
 * f16, plus f32 rounding) misrounds only inputs whose exact value lies
 * within e of a midpoint. Measured: bf16 tanh 2, exp 4, sigmoid 2; f16 2,
 * 2, 6 (the full f32 functions give about as many); 16 each is the bound.
 * A bf16 core of degree 1 (error 2^-9.4) gives 50, 64 and 25. gelu_tanh
 * (x / (1 + e^(-2y)), 2^-16.5 and 2^-20) over every input down to -10
 * (bf16: where its e^(-2y) overflows f32 below, gelu_tail_is_zero) gives 1
 * and 3; the composite's 0.5 x (1 + tanh y) (knob half_gelu=0) held to
 * that only within |x| <= 3, beyond which 1 + tanh y cancels. */
TEST(bf16_exhaustive)
{
    long t = sweep(RLX_BF16, tanh_, tanh, INFINITY, "tanh");
    long e = sweep(RLX_BF16, exp_, exp, INFINITY, "exp");
    long s = sweep(RLX_BF16, sigmoid_, sigmoid_d, INFINITY, "sigmoid");
    long g = sweep_in(RLX_BF16, gelu_tanh_, gelu_sig_d, -10, INFINITY, "gelu_tanh");
    gelu_tail_is_zero();
    fprintf(stderr, "bf16 1-ulp differences of 65536: tanh %ld, exp %ld, sigmoid %ld, gelu_tanh (x >= -10) %ld\n", t,
            e, s, g);
    CHECK(t <= 16 && e <= 16 && s <= 16 && g <= 16);
}

TEST(f16_exhaustive)
{
    long t = sweep(RLX_F16, tanh_, tanh, INFINITY, "tanh");
    long e = sweep(RLX_F16, exp_, exp, INFINITY, "exp");
    long s = sweep(RLX_F16, sigmoid_, sigmoid_d, INFINITY, "sigmoid");
    long g = sweep(RLX_F16, gelu_tanh_, gelu_sig_d, INFINITY, "gelu_tanh");
    fprintf(stderr, "f16 1-ulp differences of 65536: tanh %ld, exp %ld, sigmoid %ld, gelu_tanh %ld\n", t, e, s, g);
    CHECK(t <= 16 && e <= 16 && s <= 16 && g <= 16);
}

/* The composite as written (knob half_gelu=0), within |x| <= 3. */
TEST(gelu_composite_knob)
{
    CHECK(rlx_set_option("half_gelu", "0") == RLX_OK);
    long b = sweep(RLX_BF16, gelu_tanh_, gelu_tanh_d, 3, "gelu_tanh");
    long h = sweep(RLX_F16, gelu_tanh_, gelu_tanh_d, 3, "gelu_tanh");
    CHECK(rlx_set_option("half_gelu", "default") == RLX_OK);
    fprintf(stderr, "half_gelu=0: 1-ulp differences (|x| <= 3): bf16 %ld, f16 %ld\n", b, h);
    CHECK(b <= 16 && h <= 16);
}

/* A value that reaches an f32 store keeps the f32 function (error 2 ulp
 * of f32), though its input came from bf16: the variants are only for
 * values rounded to a half dtype. */
TEST(f32_result_keeps_f32_math)
{
    int64_t n = 65536;
    uint16_t *in = malloc(n * sizeof *in);
    float *out = malloc(n * sizeof *out);
    for (int64_t i = 0; i < n; i++)
        in[i] = (uint16_t)i;
    rlx_tensor *x = rlx_cast(rlx_from_data(RLX_BF16, 1, &n, in), RLX_F32);
    rlx_tensor *ys[2] = {rlx_tanh(x), rlx_mul_s(rlx_add_s(rlx_exp(rlx_neg(x)), 1), 0.5)};
    for (int k = 0; k < 2; k++) {
        CHECK(rlx_realize(ys[k]) == RLX_OK && rlx_read_f32(ys[k], out, (size_t)n) == RLX_OK);
        int worst = 0;
        for (int64_t i = 0; i < n; i++) {
            double xv = ir_half_value(in[i], 7, 127), w = k ? (exp(-xv) + 1) * 0.5 : tanh(xv);
            if (isnan(xv) || !isfinite(w) || fabs(w) > 1e38)
                continue;
            float wf = (float)w;
            double ulp = fmax(fabs(nextafterf(wf, INFINITY) - wf), 0x1p-149);
            int d = (int)ceil(fabs(out[i] - w) / ulp);
            if (d > worst)
                worst = d;
        }
        CHECK(worst <= 3);
    }
    free(in);
    free(out);
}

TEST(reference_backend_agrees)
{
    /* the reference evaluator on the same sweep: its double math rounded
     * once must be exact (no 1-ulp differences at all) */
    test_backend_save();
    rlx_set_option("backend", "ref");
    CHECK_EQ_INT(sweep(RLX_BF16, tanh_, tanh, INFINITY, "tanh"), 0);
    CHECK_EQ_INT(sweep(RLX_F16, exp_, exp, INFINITY, "exp"), 0);
    test_backend_restore();
}

TEST_MAIN(T(bf16_exhaustive), T(f16_exhaustive), T(gelu_composite_knob), T(f32_result_keeps_f32_math),
          T(reference_backend_agrees))
