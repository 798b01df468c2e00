/*
 * test_trig.c — sin, cos and tan for every finite input, on both backends:
 * each binary exponent (f64: -1074..1023, f32: -149..127) with random
 * mantissas of both signs, in ulps against glibc (whose reduction is exact
 * for all doubles), and hand-picked hard cases (huge magnitudes, DBL_MAX,
 * near multiples of pi/2, subnormals, signed zeros) against libquadmath's
 * sinq/cosq where the compiler has it. RLX_TRIG_VERBOSE=1 prints the worst
 * error of every exponent.
 */
#include "harness.h"

#include <float.h>
#include <stdbool.h>
#ifdef RLX_HAVE_QUADMATH
#include <quadmath.h>
#endif

static void use_backend(const char *b) { setenv("RLX_BACKEND", b, 1); }

typedef struct {
    uint64_t s;
} rng;

static uint64_t rnext(rng *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    uint64_t z = r->s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* bit patterns ordered as integers, so that a difference counts ulps */
static int64_t ord64(double d)
{
    int64_t i;
    memcpy(&i, &d, 8);
    return i < 0 ? INT64_MIN - i : i;
}

static int64_t ord32(float f)
{
    int32_t i;
    memcpy(&i, &f, 4);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

/* ulps between got and want; NaN against non-NaN (or a non-finite result
 * for a finite input) counts as INT32_MAX */
static int64_t ulps64(double got, double want)
{
    if (isnan(got) || isnan(want))
        return isnan(got) == isnan(want) ? 0 : INT32_MAX;
    int64_t d = ord64(got) - ord64(want);
    return d < 0 ? -d : d;
}

static int64_t ulps32(float got, float want)
{
    if (isnan(got) || isnan(want))
        return isnan(got) == isnan(want) ? 0 : INT32_MAX;
    return llabs(ord32(got) - ord32(want));
}

enum { FN_SIN, FN_COS, FN_TAN };
static const char *fn_name[3] = {"sin", "cos", "tan"};

static rlx_tensor *apply(int fn, rlx_tensor *x)
{
    return fn == FN_SIN ? rlx_sin(x) : fn == FN_COS ? rlx_cos(x) : rlx_tan(x);
}

static double ref64(int fn, double x) { return fn == FN_SIN ? sin(x) : fn == FN_COS ? cos(x) : tan(x); }

static bool verbose(void)
{
    const char *v = getenv("RLX_TRIG_VERBOSE");
    return v && *v == '1';
}

/* fn of x[0..n) realized on the current backend into y */
static bool eval64(int fn, const double *x, double *y, int64_t n)
{
    rlx_scope_begin();
    rlx_status st = rlx_read_f64(apply(fn, tf64(1, &n, x)), y, (size_t)n);
    rlx_scope_end();
    if (st != RLX_OK)
        test_fail(__FILE__, __LINE__, "%s: %s", fn_name[fn], rlx_last_error());
    return st == RLX_OK;
}

static bool eval32(int fn, const float *x, float *y, int64_t n)
{
    rlx_scope_begin();
    rlx_status st = rlx_read_f32(apply(fn, tf32(1, &n, x)), y, (size_t)n);
    rlx_scope_end();
    if (st != RLX_OK)
        test_fail(__FILE__, __LINE__, "%s: %s", fn_name[fn], rlx_last_error());
    return st == RLX_OK;
}

/* ------------------------------------------------ every binary exponent */

enum { PER_EXP = 64, E64_LO = -1074, E64_HI = 1023, NE64 = E64_HI - E64_LO + 1 };

/* PER_EXP doubles of each exponent e (|x| in [2^e, 2^(e+1)), subnormal
 * below -1022), random mantissas, alternating signs */
static double *sweep64(int64_t *n)
{
    *n = (int64_t)NE64 * PER_EXP;
    double *x = malloc((size_t)*n * sizeof *x);
    rng r = {1234};
    for (int e = E64_LO; e <= E64_HI; e++)
        for (int k = 0; k < PER_EXP; k++) {
            uint64_t mant = rnext(&r) >> 12, bits;
            if (e >= -1022)
                bits = (uint64_t)(e + 1023) << 52 | mant;
            else /* subnormal: leading bit at position e + 1074 */
                bits = ((uint64_t)1 << (e + 1074)) | (mant & (((uint64_t)1 << (e + 1074)) - 1));
            bits |= (uint64_t)(k & 1) << 63;
            memcpy(&x[(int64_t)(e - E64_LO) * PER_EXP + k], &bits, 8);
        }
    return x;
}

/* The worst ulp error of fn over the sweep on the current backend; ranges
 * of exponents summarized in the log, every exponent with RLX_TRIG_VERBOSE. */
static int64_t sweep64_worst(int fn, const char *backend)
{
    int64_t n;
    double *x = sweep64(&n), *y = malloc((size_t)n * sizeof *y);
    int64_t worst = 0, range_worst = 0;
    int range_lo = E64_LO;
    double wx = 0;
    if (eval64(fn, x, y, n)) {
        for (int e = E64_LO; e <= E64_HI; e++) {
            int64_t ew = 0;
            for (int k = 0; k < PER_EXP; k++) {
                int64_t i = (int64_t)(e - E64_LO) * PER_EXP + k, d = ulps64(y[i], ref64(fn, x[i]));
                if (d > ew)
                    ew = d;
                if (d > worst) {
                    worst = d;
                    wx = x[i];
                }
            }
            range_worst = ew > range_worst ? ew : range_worst;
            if (verbose())
                printf("    %s f64 %s 2^%d: %lld ulp\n", backend, fn_name[fn], e, (long long)ew);
            else if (e == E64_HI || (e + 1074) % 128 == 127) {
                printf("    %s f64 %s 2^[%d..%d]: %lld ulp\n", backend, fn_name[fn], range_lo, e, (long long)range_worst);
                range_worst = 0;
                range_lo = e + 1;
            }
        }
        printf("  %s f64 %s: max %lld ulp over every exponent (at %.17g)\n", backend, fn_name[fn], (long long)worst,
               wx);
    }
    free(x);
    free(y);
    return worst;
}

TEST(trig_f64_every_exponent)
{
    const char *backends[2] = {"jit", "ref"};
    for (int b = 0; b < 2; b++) {
        use_backend(backends[b]);
        for (int fn = 0; fn < 3; fn++) {
            int64_t w = sweep64_worst(fn, backends[b]);
            /* sin and cos <= 2 ulp; tan of f64 is left to the reference
             * evaluator (libm) on both backends */
            CHECK(w <= 2);
        }
    }
    use_backend("ref");
}

enum { E32_LO = -149, E32_HI = 127, NE32 = E32_HI - E32_LO + 1 };

TEST(trig_f32_every_exponent)
{
    const int64_t n = (int64_t)NE32 * PER_EXP;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    rng r = {99};
    for (int e = E32_LO; e <= E32_HI; e++)
        for (int k = 0; k < PER_EXP; k++) {
            uint32_t mant = (uint32_t)(rnext(&r) >> 41), bits;
            if (e >= -126)
                bits = (uint32_t)(e + 127) << 23 | mant;
            else
                bits = (1u << (e + 149)) | (mant & ((1u << (e + 149)) - 1));
            bits |= (uint32_t)(k & 1) << 31;
            memcpy(&x[(e - E32_LO) * PER_EXP + k], &bits, 4);
        }
    const char *backends[2] = {"jit", "ref"};
    for (int b = 0; b < 2; b++) {
        use_backend(backends[b]);
        for (int fn = 0; fn < 3; fn++) {
            if (!eval32(fn, x, y, n))
                continue;
            int64_t worst = 0;
            float wx = 0;
            for (int64_t i = 0; i < n; i++) {
                int64_t d = ulps32(y[i], (float)ref64(fn, (double)x[i]));
                if (d > worst) {
                    worst = d;
                    wx = x[i];
                }
            }
            printf("  %s f32 %s: max %lld ulp over every exponent (at %.9g)\n", backends[b], fn_name[fn],
                   (long long)worst, (double)wx);
            CHECK(worst <= 1); /* as tests/test_jit.c bounds them */
        }
    }
    use_backend("ref");
    free(x);
    free(y);
}

/* ------------------------------------------------------ the hard cases */

/* Doubles whose reduction is hard: huge powers of ten, the ends of the
 * range, and the doubles nearest to large multiples of pi/2 (found by the
 * continued fraction of pi/2: numerators of its convergents, and the
 * classic worst case 6381956970095103 * 2^797, whose distance to a
 * multiple of pi/2 is about 4.7e-19). */
static const double hard64[] = {
    1e18, 1e19, 1e22, 1e50, 1e100, 1e200, 1e300, 1e308, DBL_MAX, 0x1p1023, 0x1.0000000000001p1023,
    0x1.fffffffffffffp1022, 0x1p1000, 0x1p64, 0x1p63, 0x1p60, 0x1p55, 0x1p53, 0x1p52, 0x1p30, 0x1p24, 0x1.8p23,
    /* the boundary of the fast reduction (32) and the old one (2^26) */
    32.0, 0x1.fffffffffffffp+4, 0x1.0000000000001p+5, 0x1p26, 0x1.fffffffffffffp25, 0x1p27, 0x1p28, 0x1p40,
    6381956970095103.0 * 0x1p797, 5319372648326859.0 * 0x1p-51 * 0x1p70,
    /* numerators of convergents of pi/2: near multiples of pi/2 */
    355.0 / 2 * 2, 103993.0, 104348.0, 208341.0, 312689.0, 833719.0, 1146408.0, 4272943.0, 5419351.0, 80143857.0,
    165707065.0, 245850922.0, 411557987.0, 1068966896.0, 2549491779.0, 6167950454.0, 14885392687.0,
    21053343141.0, 1783366216531.0, 3587785776203.0, 5371151992734.0, 8958937768937.0, 139755218526789.0,
    428224593349304.0, 5706674932067741.0, 6134899525417045.0,
    /* small: subnormals, the smallest normal, signed zeros, 1 */
    0x1p-1074, 0x1p-1022, 0x1.fffffffffffffp-1023, 1e-300, 0.0, -0.0, 1.0, 0x1.921fb54442d18p+0,
    0x1.921fb54442d18p+1, 0x1.921fb54442d18p+2, 1e7, 1e10, 1e15,
};

#ifdef RLX_HAVE_QUADMATH
/* sinq/cosq reduce exactly; rounding the quad result to double is within
 * 2^-60 relative of correct rounding, far below the 2 ulp checked */
static double hiref(int fn, double x)
{
    __float128 q = (__float128)x;
    return (double)(fn == FN_SIN ? sinq(q) : cosq(q));
}
#else
static double hiref(int fn, double x) { return ref64(fn, x); }
#endif

TEST(trig_f64_hard_cases)
{
    enum { NH = sizeof hard64 / sizeof *hard64 };
    int64_t n = 2 * NH;
    double x[2 * NH], y[2 * NH];
    for (int i = 0; i < NH; i++) {
        x[i] = hard64[i];
        x[NH + i] = -hard64[i];
    }
    /* The JIT within 2 ulp of the high-precision value. The reference
     * evaluator is libm by definition: it must give libm's bits, whose
     * distance to the high-precision value is only printed (glibc 2.36
     * errs by 179 ulp at sin(428224593349304), 8 at cos(0x1.6ac5b262ca1ffp+849)). */
    const char *backends[2] = {"jit", "ref"};
    for (int b = 0; b < 2; b++) {
        use_backend(backends[b]);
        for (int fn = 0; fn < 2; fn++) {
            if (!eval64(fn, x, y, n))
                continue;
            int64_t worst = 0;
            for (int64_t i = 0; i < n; i++) {
                double want = b == 0 ? hiref(fn, x[i]) : ref64(fn, x[i]);
                int64_t d = ulps64(y[i], want), libm = ulps64(ref64(fn, x[i]), hiref(fn, x[i]));
                bool zero_sign = x[i] == 0 && fn == FN_SIN && signbit(y[i]) != signbit(x[i]);
                if (d > (b == 0 ? 2 : 0) || zero_sign)
                    test_fail(__FILE__, __LINE__, "%s %s(%a) = %a, want %a (%lld ulp)", backends[b], fn_name[fn], x[i],
                              y[i], want, (long long)d);
                worst = d > worst ? d : worst;
                if (b == 1 && libm > 2 && x[i] > 0)
                    printf("  (libm %s(%a) is %lld ulp from the high-precision value)\n", fn_name[fn], x[i],
                           (long long)libm);
            }
            printf("  %s f64 %s: max %lld ulp from %s over %d hard cases\n", backends[b], fn_name[fn],
                   (long long)worst, b == 0 ? "the high-precision value" : "libm", (int)n);
        }
    }
    /* inf and NaN give NaN */
    double sx[3] = {INFINITY, -INFINITY, NAN}, sy[3];
    int64_t three = 3;
    for (int b = 0; b < 2; b++) {
        use_backend(backends[b]);
        for (int fn = 0; fn < 2; fn++)
            if (eval64(fn, sx, sy, three))
                for (int i = 0; i < 3; i++)
                    CHECK(isnan(sy[i]));
    }
    use_backend("ref");
}

#ifdef RLX_HAVE_QUADMATH
/* The doubles nearest to n pi/2 and their neighbours, where the reduction
 * cancels most: every n up to 2^15 (|x| < 51472), then random n of every
 * size up to 2^52; n pi/2 in quad precision is within 2^-60 of x's ulp. */
TEST(trig_f64_near_multiples)
{
    enum { NSEQ = 1 << 15, NRAND = 1 << 14 };
    const int64_t n = 3 * (NSEQ + NRAND);
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    rng r = {5};
    for (int64_t i = 0; i < NSEQ + NRAND; i++) {
        __float128 k = i < NSEQ ? (__float128)(i + 1) : floorq(ldexpq(1 + (rnext(&r) >> 11) * 0x1p-53Q, (int)(rnext(&r) % 53)));
        double c = (double)(k * M_PI_2q);
        x[3 * i] = c;
        x[3 * i + 1] = nextafter(c, 0);
        x[3 * i + 2] = -nextafter(c, INFINITY);
    }
    use_backend("jit");
    for (int fn = 0; fn < 2; fn++) {
        if (!eval64(fn, x, y, n))
            continue;
        int64_t worst = 0;
        double wx = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t d = ulps64(y[i], hiref(fn, x[i]));
            if (d > worst) {
                worst = d;
                wx = x[i];
            }
        }
        printf("  jit f64 %s: max %lld ulp at %lld doubles nearest to multiples of pi/2 (at %a)\n", fn_name[fn],
               (long long)worst, (long long)n, wx);
        CHECK(worst <= 2);
    }
    use_backend("ref");
    free(x);
    free(y);
}
#define NEAR_MULTIPLES T(trig_f64_near_multiples),
#else
#define NEAR_MULTIPLES
#endif

TEST_MAIN(T(trig_f64_every_exponent), T(trig_f32_every_exponent), T(trig_f64_hard_cases), NEAR_MULTIPLES)
