/*
 * test_dtypes.c — the narrow dtypes' rules of rlx.h checked through the
 * public API on both backends: names and sizes, the promotion table (written
 * out here, not derived from the library's), f16/bf16 casts bit for bit
 * (every 16-bit pattern; edge and 10^7 random f32 values; f64 values that
 * double-round through f32), integer wrap and saturation, narrow integer
 * arithmetic.
 *
 * The independent references: gcc's _Float16 conversions for f16, integer
 * round-to-nearest-even on the bit pattern for f32 -> bf16, and a
 * nearest-of-two-neighbours search for f64 -> bf16. Handles live in the
 * harness scope of each test, which releases them.
 */
#include <float.h>

#include "harness.h"

static const char *const backends[] = {"ref", "jit"};

static const rlx_dtype all[] = {RLX_BOOL, RLX_I32, RLX_I64, RLX_F32, RLX_F64, RLX_F16,
                                RLX_BF16, RLX_I8,  RLX_U8,  RLX_I16, RLX_U32};
enum { NDT = sizeof all / sizeof all[0] };

TEST(names_and_sizes)
{
    static const char *const names[] = {"bool", "i32", "i64", "f32", "f64", "f16", "bf16", "i8", "u8", "i16", "u32"};
    static const int sizes[] = {1, 4, 8, 4, 8, 2, 2, 1, 1, 2, 4};
    for (int i = 0; i < NDT; i++) {
        CHECK(strcmp(rlx_dtype_name(all[i]), names[i]) == 0);
        rlx_tensor *z = rlx_zeros(all[i], 1, (int64_t[]){3});
        unsigned char buf[32];
        CHECK(z && rlx_dtype_of(z) == all[i]);
        CHECK(rlx_read(z, buf, (size_t)(3 * sizes[i])) == RLX_OK);
        CHECK_ERR(rlx_read(z, buf, (size_t)(3 * sizes[i] - 1)), RLX_E_ARG, "rlx_read");
    }
    rlx_clear_error();
    CHECK(strcmp(rlx_dtype_name((rlx_dtype)13), "?") == 0 && rlx_last_status() == RLX_E_ARG);
    CHECK_NULL_ERR(rlx_zeros((rlx_dtype)13, 0, NULL), RLX_E_DTYPE, "rlx_zeros");
}

/* PyTorch's promotion (NumPy's where PyTorch has no u32), row and column
 * in the order of `all`. */
static const rlx_dtype promoted[NDT][NDT] = {
    /*          bool      i32      i64      f32      f64      f16      bf16     i8       u8       i16      u32 */
    /* bool */ {RLX_BOOL, RLX_I32, RLX_I64, RLX_F32, RLX_F64, RLX_F16, RLX_BF16, RLX_I8, RLX_U8, RLX_I16, RLX_U32},
    /* i32 */ {RLX_I32, RLX_I32, RLX_I64, RLX_F32, RLX_F64, RLX_F16, RLX_BF16, RLX_I32, RLX_I32, RLX_I32, RLX_I64},
    /* i64 */ {RLX_I64, RLX_I64, RLX_I64, RLX_F32, RLX_F64, RLX_F16, RLX_BF16, RLX_I64, RLX_I64, RLX_I64, RLX_I64},
    /* f32 */ {RLX_F32, RLX_F32, RLX_F32, RLX_F32, RLX_F64, RLX_F32, RLX_F32, RLX_F32, RLX_F32, RLX_F32, RLX_F32},
    /* f64 */ {RLX_F64, RLX_F64, RLX_F64, RLX_F64, RLX_F64, RLX_F64, RLX_F64, RLX_F64, RLX_F64, RLX_F64, RLX_F64},
    /* f16 */ {RLX_F16, RLX_F16, RLX_F16, RLX_F32, RLX_F64, RLX_F16, RLX_F32, RLX_F16, RLX_F16, RLX_F16, RLX_F16},
    /* bf16 */ {RLX_BF16, RLX_BF16, RLX_BF16, RLX_F32, RLX_F64, RLX_F32, RLX_BF16, RLX_BF16, RLX_BF16, RLX_BF16, RLX_BF16},
    /* i8 */ {RLX_I8, RLX_I32, RLX_I64, RLX_F32, RLX_F64, RLX_F16, RLX_BF16, RLX_I8, RLX_I16, RLX_I16, RLX_I64},
    /* u8 */ {RLX_U8, RLX_I32, RLX_I64, RLX_F32, RLX_F64, RLX_F16, RLX_BF16, RLX_I16, RLX_U8, RLX_I16, RLX_U32},
    /* i16 */ {RLX_I16, RLX_I32, RLX_I64, RLX_F32, RLX_F64, RLX_F16, RLX_BF16, RLX_I16, RLX_I16, RLX_I16, RLX_I64},
    /* u32 */ {RLX_U32, RLX_I64, RLX_I64, RLX_F32, RLX_F64, RLX_F16, RLX_BF16, RLX_I64, RLX_U32, RLX_I64, RLX_U32},
};

/* [0, 1, 2, 3] (bool: [0, 1, 1, 0]) of dt, built by casting from f64. */
static rlx_tensor *small(rlx_dtype dt, int bool_pattern)
{
    double v[4] = {0, 1, 2, 3}, b[4] = {0, 1, 1, 0};
    rlx_tensor *d = rlx_from_data(RLX_F64, 1, (int64_t[]){4}, bool_pattern ? b : v);
    rlx_tensor *r = rlx_cast(d, dt);
    return r;
}

TEST(promotion_table)
{
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        for (int i = 0; i < NDT; i++)
            for (int j = 0; j < NDT; j++) {
                rlx_tensor *a = small(all[i], all[i] == RLX_BOOL), *b = small(all[j], all[j] == RLX_BOOL);
                rlx_tensor *s = rlx_add(a, b), *m = rlx_maximum(a, b);
                CHECK(s && rlx_dtype_of(s) == promoted[i][j]);
                CHECK(m && rlx_dtype_of(m) == promoted[i][j]);
                if (!s || !m)
                    continue;
                rlx_tensor *sf = rlx_cast(s, RLX_F64), *mf = rlx_cast(m, RLX_F64);
                double got[4], gotm[4];
                CHECK(rlx_read(sf, got, sizeof got) == RLX_OK && rlx_read(mf, gotm, sizeof gotm) == RLX_OK);
                for (int k = 0; k < 4; k++) {
                    double x = all[i] == RLX_BOOL ? (k == 1 || k == 2) : k;
                    double y = all[j] == RLX_BOOL ? (k == 1 || k == 2) : k;
                    double want = promoted[i][j] == RLX_BOOL ? (x || y) : x + y;
                    if (got[k] != want || gotm[k] != (x > y ? x : y))
                        test_fail(__FILE__, __LINE__, "%s: %s + %s at %d gives %g (max %g), expected %g", backends[be],
                                  rlx_dtype_name(all[i]), rlx_dtype_name(all[j]), k, got[k], gotm[k], want);
                }
            }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}

/* The complex rows of PyTorch's table, written out: c64 and c128 against
 * every dtype of `all` then c64, c128 (a complex result either way). */
TEST(complex_promotion_table)
{
    static const rlx_dtype cx[2] = {RLX_C64, RLX_C128};
    /* columns: bool i32 i64 f32 f64 f16 bf16 i8 u8 i16 u32 c64 c128 */
    static const rlx_dtype rows[2][NDT + 2] = {
        {RLX_C64, RLX_C64, RLX_C64, RLX_C64, RLX_C128, RLX_C64, RLX_C64, RLX_C64, RLX_C64, RLX_C64, RLX_C64, RLX_C64,
         RLX_C128},
        {RLX_C128, RLX_C128, RLX_C128, RLX_C128, RLX_C128, RLX_C128, RLX_C128, RLX_C128, RLX_C128, RLX_C128, RLX_C128,
         RLX_C128, RLX_C128},
    };
    CHECK(strcmp(rlx_dtype_name(RLX_C64), "c64") == 0 && strcmp(rlx_dtype_name(RLX_C128), "c128") == 0);
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < NDT + 2; j++) {
                rlx_dtype o = j < NDT ? all[j] : cx[j - NDT];
                rlx_tensor *a = small(cx[i], 0), *b = small(o, o == RLX_BOOL);
                rlx_tensor *s = rlx_add(a, b), *t = rlx_mul(b, a);
                CHECK(s && rlx_dtype_of(s) == rows[i][j] && t && rlx_dtype_of(t) == rows[i][j]);
                if (!s)
                    continue;
                double got[8];
                CHECK(rlx_read(rlx_cast(s, RLX_C128), got, sizeof got) == RLX_OK);
                for (int k = 0; k < 4; k++) {
                    double y = o == RLX_BOOL ? (k == 1 || k == 2) : k;
                    if (got[2 * k] != k + y || got[2 * k + 1] != 0)
                        test_fail(__FILE__, __LINE__, "%s: %s + %s at %d gives %g%+gj, expected %g", backends[be],
                                  rlx_dtype_name(cx[i]), rlx_dtype_name(o), k, got[2 * k], got[2 * k + 1], k + y);
                }
            }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}

/* The independent references. */
static uint16_t f16_of_double(double d)
{
    _Float16 h = (_Float16)d; /* gcc: one rounding, to nearest even */
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static float float_of_f16(uint16_t u)
{
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}
static uint16_t bf16_of_float(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (f != f)
        return (uint16_t)((u >> 16) | 0x40); /* any quiet NaN; callers compare NaN as NaN */
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
static float float_of_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static bool is_nan16(uint16_t u, rlx_dtype dt)
{
    return dt == RLX_F16 ? (u & 0x7c00) == 0x7c00 && (u & 0x3ff) : (u & 0x7f80) == 0x7f80 && (u & 0x7f);
}

/* Casts n values of `from` (raw, in `from`'s layout) to `to` and reads them. */
static bool cast_read(rlx_dtype from, rlx_dtype to, int64_t n, const void *src, void *dst, size_t dst_bytes)
{
    rlx_tensor *x = rlx_from_data(from, 1, (int64_t[]){n}, src);
    rlx_tensor *y = rlx_cast(x, to);
    bool ok = y && rlx_read(y, dst, dst_bytes) == RLX_OK;
    return ok;
}

/* Every f16 and bf16 pattern to f32 exactly, and back unchanged. */
TEST(half_patterns_exhaustive)
{
    uint16_t *pat = malloc(65536 * 2), *back = malloc(65536 * 2);
    float *f = malloc(65536 * sizeof *f);
    for (int i = 0; i < 65536; i++)
        pat[i] = (uint16_t)i;
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        for (int h = 0; h < 2; h++) {
            rlx_dtype dt = h ? RLX_BF16 : RLX_F16;
            CHECK(cast_read(dt, RLX_F32, 65536, pat, f, 65536 * sizeof *f));
            CHECK(cast_read(RLX_F32, dt, 65536, f, back, 65536 * 2));
            int bad = 0;
            for (int i = 0; i < 65536 && bad < 5; i++) {
                float want = h ? float_of_bf16(pat[i]) : float_of_f16(pat[i]);
                bool nan = is_nan16(pat[i], dt);
                bool ok = nan ? f[i] != f[i] && is_nan16(back[i], dt)
                              : memcmp(&f[i], &want, 4) == 0 && back[i] == pat[i];
                if (!ok)
                    bad++, test_fail(__FILE__, __LINE__, "%s %s pattern %04x: f32 %a (want %a), back %04x", backends[be],
                                     rlx_dtype_name(dt), i, f[i], want, back[i]);
            }
        }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
    free(pat);
    free(back);
    free(f);
}

static uint32_t xorshift32(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* f32 -> f16 and bf16: edge values (ties both ways, the overflow
 * threshold, subnormals, zeros, infinities, NaN) and 10^7 random bit
 * patterns, bit for bit. */
TEST(f32_to_half_random)
{
    enum { N = 10000000, NEDGE = 24 };
    float *f = malloc(N * sizeof *f);
    uint16_t *got = malloc(N * 2);
    const float edge[NEDGE] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-45f,
                               65504.0f, 65519.99f, 65520.0f, -65520.0f, 1.0f + 0x1p-11f, 1.0f + 0x1p-11f + 0x1p-23f,
                               1.0f + 3 * 0x1p-11f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 1.0f + 0x1p-8f,
                               1.0f + 3 * 0x1p-8f, 0x1.fffffep127f, 0x1.ff8p127f, 5.96e-8f};
    uint32_t s = 0x9e3779b9u;
    for (int i = 0; i < N; i++) {
        uint32_t u = i < NEDGE ? 0 : xorshift32(&s);
        if (i < NEDGE)
            f[i] = edge[i];
        else if (i % 4 == 0) /* near ties of f16 and bf16: few low bits set */
            u &= 0xffffe000u | (u & 1), memcpy(&f[i], &u, 4);
        else
            memcpy(&f[i], &u, 4);
    }
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        for (int h = 0; h < 2; h++) {
            rlx_dtype dt = h ? RLX_BF16 : RLX_F16;
            CHECK(cast_read(RLX_F32, dt, N, f, got, (size_t)N * 2));
            int bad = 0;
            for (int i = 0; i < N && bad < 5; i++) {
                uint16_t want = h ? bf16_of_float(f[i]) : f16_of_double(f[i]);
                bool ok = f[i] != f[i] ? is_nan16(got[i], dt) : got[i] == want;
                if (!ok)
                    bad++, test_fail(__FILE__, __LINE__, "%s f32 %a to %s gives %04x, expected %04x", backends[be], f[i],
                                     rlx_dtype_name(dt), got[i], want);
            }
        }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
    free(f);
    free(got);
}

/* The bf16 nearest to d (ties to even), by comparing the two bf16
 * neighbours of d's f32 truncation: independent of the library's rounding. */
static uint16_t bf16_of_double(double d)
{
    if (fabs(d) >= 0x1.ff8p127) /* the tie between the largest bf16 and 2^128 rounds up (odd largest) */
        return d < 0 ? 0xff80 : 0x7f80;
    float t = (float)d;
    if ((double)t != d && fabs((double)t) > fabs(d))
        t = nextafterf(t, 0.0f); /* toward zero: t's bits truncate d */
    uint32_t u;
    memcpy(&u, &t, 4);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double dl = fabs(d - (double)float_of_bf16(lo)), dh = fabs((double)float_of_bf16(hi) - d);
    return dl < dh ? lo : dh < dl ? hi : (lo & 1) ? hi : lo;
}

/* f64 -> f16/bf16 rounds once: values a hair above a tie of the narrow
 * type round up, where rounding through f32 would see the tie and go to
 * even. */
TEST(f64_to_half_rounds_once)
{
    enum { N = 200000 };
    double *d = malloc(N * sizeof *d);
    uint16_t *got = malloc(N * 2);
    uint32_t s = 12345;
    for (int h = 0; h < 2; h++) {
        rlx_dtype dt = h ? RLX_BF16 : RLX_F16;
        for (int i = 0; i < N; i++) {
            /* a random narrow value with even last bit, plus half a unit, plus
             * or minus a tiny relative amount (or exactly the tie) */
            uint16_t b = (uint16_t)(xorshift32(&s) & (h ? 0x7f7e : 0x7bfe));
            double v = h ? float_of_bf16(b) : float_of_f16(b), next = h ? float_of_bf16(b + 1) : float_of_f16(b + 1);
            double tie = v + (next - v) / 2, eps = (next - v) * 0x1p-30;
            int k = (int)(xorshift32(&s) % 3);
            d[i] = (xorshift32(&s) & 1 ? -1 : 1) * (k == 0 ? tie : k == 1 ? tie + eps : tie - eps);
        }
        for (int be = 0; be < 2; be++) {
            CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
            CHECK(cast_read(RLX_F64, dt, N, d, got, N * 2));
            int bad = 0;
            for (int i = 0; i < N && bad < 5; i++) {
                uint16_t want = h ? bf16_of_double(d[i]) : f16_of_double(d[i]);
                if (got[i] != want)
                    bad++, test_fail(__FILE__, __LINE__, "%s f64 %a to %s gives %04x, expected %04x", backends[be], d[i],
                                     rlx_dtype_name(dt), got[i], want);
            }
        }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
    free(d);
    free(got);
}

/* Float to integer truncates and saturates at the target's range; integer
 * to a narrower integer wraps. */
TEST(integer_casts)
{
    enum { NF = 12, NI = 8 };
    const double fv[NF] = {-1.5, 0.99, 255.9, 256.0, 300.7, -200.0, 1e10, -1e10, NAN, INFINITY, -INFINITY, 32767.5};
    const int64_t iv[NI] = {300, -1, 65541, 2147483655LL, -1099511627779LL, 127, -129, 4294967296LL + 7};
    const rlx_dtype to[] = {RLX_I8, RLX_U8, RLX_I16, RLX_U32};
    const double lo[] = {-128, 0, -32768, 0}, hi[] = {127, 255, 32767, 4294967295.0};
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        for (int t = 0; t < 4; t++) {
            rlx_tensor *xf = rlx_from_data(RLX_F64, 1, (int64_t[]){NF}, fv);
            rlx_tensor *xi = rlx_from_data(RLX_I64, 1, (int64_t[]){NI}, iv);
            rlx_tensor *cf = rlx_cast(rlx_cast(xf, to[t]), RLX_F64), *ci = rlx_cast(rlx_cast(xi, to[t]), RLX_I64);
            double gf[NF];
            int64_t gi[NI];
            CHECK(rlx_read(cf, gf, sizeof gf) == RLX_OK && rlx_read(ci, gi, sizeof gi) == RLX_OK);
            for (int k = 0; k < NF; k++) {
                double v = fv[k], want = v != v ? 0 : v <= lo[t] ? lo[t] : v >= hi[t] ? hi[t] : trunc(v);
                if (gf[k] != want)
                    test_fail(__FILE__, __LINE__, "%s: f64 %g to %s gives %g, expected %g", backends[be], v,
                              rlx_dtype_name(to[t]), gf[k], want);
            }
            for (int k = 0; k < NI; k++) {
                int64_t v = iv[k];
                int64_t want = t == 0 ? (int8_t)v : t == 1 ? (uint8_t)v : t == 2 ? (int16_t)v : (int64_t)(uint32_t)v;
                if (gi[k] != want)
                    test_fail(__FILE__, __LINE__, "%s: i64 %lld to %s gives %lld, expected %lld", backends[be],
                              (long long)v, rlx_dtype_name(to[t]), (long long)gi[k], (long long)want);
            }
        }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}

/* Narrow integers wrap in their dtype; unsigned compare and divide. */
TEST(narrow_integer_arithmetic)
{
    const uint8_t ua[4] = {200, 3, 255, 17}, ub[4] = {100, 5, 255, 4};
    const int8_t ia[4] = {-128, 100, 127, -7}, ib[4] = {-1, 3, 2, 2};
    const uint32_t wa[3] = {4000000000u, 3000000000u, 7}, wb[3] = {4000000000u, 1, 2};
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        rlx_tensor *a = rlx_from_data(RLX_U8, 1, (int64_t[]){4}, ua), *b = rlx_from_data(RLX_U8, 1, (int64_t[]){4}, ub);
        uint8_t sum[4], diff[4], prod[4], quot[4];
        CHECK(rlx_read(rlx_add(a, b), sum, 4) == RLX_OK && rlx_read(rlx_sub(a, b), diff, 4) == RLX_OK);
        CHECK(rlx_read(rlx_mul(a, b), prod, 4) == RLX_OK && rlx_read(rlx_div(a, b), quot, 4) == RLX_OK);
        for (int k = 0; k < 4; k++) {
            CHECK_EQ_INT(sum[k], (uint8_t)(ua[k] + ub[k]));
            CHECK_EQ_INT(diff[k], (uint8_t)(ua[k] - ub[k]));
            CHECK_EQ_INT(prod[k], (uint8_t)(ua[k] * ub[k]));
            CHECK_EQ_INT(quot[k], ua[k] / ub[k]);
        }
        rlx_tensor *c = rlx_from_data(RLX_I8, 1, (int64_t[]){4}, ia), *d = rlx_from_data(RLX_I8, 1, (int64_t[]){4}, ib);
        int8_t isum[4], iprod[4], iquot[4];
        CHECK(rlx_read(rlx_add(c, d), isum, 4) == RLX_OK && rlx_read(rlx_mul(c, d), iprod, 4) == RLX_OK);
        CHECK(rlx_read(rlx_div(c, d), iquot, 4) == RLX_OK);
        for (int k = 0; k < 4; k++) {
            CHECK_EQ_INT(isum[k], (int8_t)(ia[k] + ib[k]));
            CHECK_EQ_INT(iprod[k], (int8_t)(ia[k] * ib[k]));
            CHECK_EQ_INT(iquot[k], (int8_t)(ia[k] / ib[k])); /* -128 / -1 wraps to -128 */
        }
        rlx_tensor *e = rlx_from_data(RLX_U32, 1, (int64_t[]){3}, wa), *f = rlx_from_data(RLX_U32, 1, (int64_t[]){3}, wb);
        uint32_t wsum[3];
        unsigned char gt[3];
        CHECK(rlx_read(rlx_add(e, f), wsum, sizeof wsum) == RLX_OK && rlx_read(rlx_gt(e, f), gt, 3) == RLX_OK);
        for (int k = 0; k < 3; k++) {
            CHECK_EQ_INT(wsum[k], (uint32_t)(wa[k] + wb[k]));
            CHECK_EQ_INT(gt[k], wa[k] > wb[k]);
        }
        /* sums of integers are i64, whatever the width (PyTorch) */
        rlx_tensor *s = rlx_sum(a, NULL, 0, false);
        int64_t total = 0;
        CHECK(s && rlx_dtype_of(s) == RLX_I64 && rlx_read(s, &total, 8) == RLX_OK && total == 200 + 3 + 255 + 17);
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}

/* Element-wise |got - ref| <= u |ref| + k 2^-23 (|a| @ |b|), u the dtype's
 * ulp at 1 (2^-7 bf16, 2^-10 f16) over 2: the one rounding of the result
 * and f32 accumulation over k terms. */
static void check_half_product(const char *what, rlx_dtype dt, rlx_tensor *got, rlx_tensor *a, rlx_tensor *b,
                               int64_t k)
{
    double u = dt == RLX_BF16 ? 0x1p-8 : 0x1p-11;
    rlx_tensor *a64 = rlx_cast(a, RLX_F64), *b64 = rlx_cast(b, RLX_F64);
    rlx_tensor *ref = rlx_matmul(a64, b64), *sabs = rlx_matmul(rlx_abs(a64), rlx_abs(b64));
    rlx_tensor *g64 = rlx_cast(got, RLX_F64);
    int64_t n = rlx_numel(ref);
    double *r = malloc((size_t)(3 * n + 1) * sizeof *r), *sa = r + n, *g = sa + n;
    CHECK(got && rlx_dtype_of(got) == dt && rlx_numel(got) == n);
    if (rlx_read(ref, r, (size_t)n * 8) != RLX_OK || rlx_read(sabs, sa, (size_t)n * 8) != RLX_OK ||
        rlx_read(g64, g, (size_t)n * 8) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "%s: read failed: %s", what, rlx_last_error());
        n = 0;
    }
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 3; i++)
        if (!(fabs(g[i] - r[i]) <= u * fabs(r[i]) + (double)k * 0x1p-23 * sa[i]))
            bad++, test_fail(__FILE__, __LINE__, "%s: element %lld is %.9g, f64 product %.9g", what, (long long)i,
                             g[i], r[i]);
    free(r);
}

/* bf16 matmul: bf16 result, f32 accumulation, rounded once; contiguous,
 * transposed, strided and broadcast-batched operands; small products (the
 * loop), large ones (oneDNN, or sgemm on widened blocks with bf16_gemm 1);
 * both backends; bitwise the same at 1 and 2 threads. */
TEST(bf16_matmul)
{
    static const int64_t mkn[][3] = {{1, 1, 1}, {3, 5, 2}, {7, 64, 33}, {70, 300, 90}, {257, 129, 300}};
    const char *knob[] = {"0", "1"};
    for (int be = 0; be < 2; be++)
        for (int kb = 0; kb < 2; kb++) {
            CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
            CHECK(rlx_set_option("bf16_gemm", knob[kb]) == RLX_OK);
            for (size_t t = 0; t < sizeof mkn / sizeof mkn[0]; t++) {
                int64_t m = mkn[t][0], k = mkn[t][1], n = mkn[t][2];
                char what[96];
                snprintf(what, sizeof what, "%s bf16_gemm=%s %lldx%lldx%lld", backends[be], knob[kb], (long long)m,
                         (long long)k, (long long)n);
                rlx_tensor *a = rlx_randn(RLX_BF16, 2, (int64_t[]){m, k}, 10 + t);
                rlx_tensor *b = rlx_randn(RLX_BF16, 2, (int64_t[]){k, n}, 20 + t);
                check_half_product(what, RLX_BF16, rlx_matmul(a, b), a, b, k);
                rlx_tensor *bt = rlx_randn(RLX_BF16, 2, (int64_t[]){n, k}, 30 + t); /* b given as [n, k] */
                check_half_product(what, RLX_BF16, rlx_matmul_t(a, bt), a, rlx_transpose(bt, 0, NULL), k);
                rlx_tensor *a2 = rlx_slice(rlx_randn(RLX_BF16, 2, (int64_t[]){2 * m, k}, 40 + t), 0, 0, RLX_END, 2);
                check_half_product(what, RLX_BF16, rlx_matmul(a2, b), a2, b, k);
                rlx_tensor *ab = rlx_randn(RLX_BF16, 3, (int64_t[]){3, m, k}, 50 + t); /* batch over one b */
                check_half_product(what, RLX_BF16, rlx_matmul(ab, b), ab, b, k);
            }
        }
    /* thread counts: the split depends on the shape only */
    rlx_tensor *a = rlx_randn(RLX_BF16, 2, (int64_t[]){512, 384}, 1), *b = rlx_randn(RLX_BF16, 2, (int64_t[]){384, 640}, 2);
    uint16_t *c1 = malloc(512 * 640 * 2), *c2 = malloc(512 * 640 * 2);
    for (int kb = 0; kb < 2; kb++) {
        CHECK(rlx_set_option("bf16_gemm", knob[kb]) == RLX_OK);
        CHECK(rlx_set_option("num_threads", "1") == RLX_OK);
        CHECK(rlx_read(rlx_matmul(a, b), c1, 512 * 640 * 2) == RLX_OK);
        CHECK(rlx_set_option("num_threads", "2") == RLX_OK);
        CHECK(rlx_read(rlx_matmul(rlx_add_s(a, 0), b), c2, 512 * 640 * 2) == RLX_OK); /* a new node: computed again */
        CHECK(memcmp(c1, c2, 512 * 640 * 2) == 0);
    }
    free(c1);
    free(c2);
    CHECK(rlx_set_option("num_threads", "0") == RLX_OK);
    CHECK(rlx_set_option("bf16_gemm", "default") == RLX_OK);
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}

/* f16 matmul (f16 result; f32 panels of 256 inner indices through sgemm,
 * summed in f32, rounded once): odd sizes, k below, at and over a panel,
 * contiguous, transposed, strided and batch-broadcast operands, a row
 * vector (m = 1), both backends; bitwise the same at 1 and 2 threads; the
 * f32 product of the same values rounded to f16 agrees to one rounding. */
TEST(f16_matmul)
{
    static const int64_t mkn[][3] = {{1, 1, 1}, {3, 5, 2}, {1, 300, 17}, {7, 64, 33}, {70, 300, 90}, {257, 256, 129},
                                     {33, 600, 65}};
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        for (size_t t = 0; t < sizeof mkn / sizeof mkn[0]; t++) {
            int64_t m = mkn[t][0], k = mkn[t][1], n = mkn[t][2];
            char what[96];
            snprintf(what, sizeof what, "%s f16 %lldx%lldx%lld", backends[be], (long long)m, (long long)k,
                     (long long)n);
            rlx_tensor *a = rlx_randn(RLX_F16, 2, (int64_t[]){m, k}, 60 + t);
            rlx_tensor *b = rlx_randn(RLX_F16, 2, (int64_t[]){k, n}, 70 + t);
            check_half_product(what, RLX_F16, rlx_matmul(a, b), a, b, k);
            rlx_tensor *bt = rlx_randn(RLX_F16, 2, (int64_t[]){n, k}, 80 + t); /* b given as [n, k] */
            check_half_product(what, RLX_F16, rlx_matmul_t(a, bt), a, rlx_transpose(bt, 0, NULL), k);
            /* a column-major a */
            rlx_tensor *at = rlx_transpose(rlx_randn(RLX_F16, 2, (int64_t[]){k, m}, 85 + t), 0, NULL);
            check_half_product(what, RLX_F16, rlx_matmul(at, b), at, b, k);
            rlx_tensor *a2 = rlx_slice(rlx_randn(RLX_F16, 2, (int64_t[]){2 * m, k}, 90 + t), 0, 0, RLX_END, 2);
            check_half_product(what, RLX_F16, rlx_matmul(a2, b), a2, b, k);
            rlx_tensor *ab = rlx_randn(RLX_F16, 3, (int64_t[]){3, m, k}, 95 + t); /* batch over one b */
            check_half_product(what, RLX_F16, rlx_matmul(ab, b), ab, b, k);
        }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
    /* thread counts: the split depends on the shape only */
    rlx_tensor *a = rlx_randn(RLX_F16, 2, (int64_t[]){512, 384}, 3);
    rlx_tensor *b = rlx_randn(RLX_F16, 2, (int64_t[]){384, 640}, 4);
    uint16_t *c1 = malloc(512 * 640 * 2), *c2 = malloc(512 * 640 * 2);
    CHECK(rlx_set_option("num_threads", "1") == RLX_OK);
    CHECK(rlx_read(rlx_matmul(a, b), c1, 512 * 640 * 2) == RLX_OK);
    CHECK(rlx_set_option("num_threads", "2") == RLX_OK);
    CHECK(rlx_read(rlx_matmul(rlx_add_s(a, 0), b), c2, 512 * 640 * 2) == RLX_OK); /* a new node: computed again */
    CHECK(memcmp(c1, c2, 512 * 640 * 2) == 0);
    CHECK(rlx_set_option("num_threads", "0") == RLX_OK);
    /* NaN (with a payload) and inf operands, in the small loop (2 x 2) and
     * through sgemm (16 x 16): NaN comes out as the reference's quiet NaN,
     * a sum over 65504 overflows to inf */
    for (int64_t s = 2; s <= 16; s += 14) {
        uint16_t av[256], bv[256], cv[256];
        for (int i = 0; i < 256; i++)
            av[i] = bv[i] = 0x3c00; /* 1 */
        av[0] = 0xfe01;              /* -NaN, payload 1 */
        av[s] = 0xfc00;              /* -inf */
        av[2 * s] = av[2 * s + 1] = 0x7bff; /* 65504 twice */
        int64_t sh[2] = {s, s};
        CHECK(rlx_read(rlx_matmul(rlx_from_data(RLX_F16, 2, sh, av), rlx_from_data(RLX_F16, 2, sh, bv)), cv,
                       (size_t)(s * s) * 2) == RLX_OK);
        CHECK((cv[0] & 0x7fff) == 0x7e00 && (cv[s - 1] & 0x7fff) == 0x7e00 && cv[s] == 0xfc00);
        CHECK(s < 3 || cv[2 * s] == 0x7c00);
    }
    free(c1);
    free(c2);
}

TEST_MAIN(T(names_and_sizes), T(promotion_table), T(complex_promotion_table), T(half_patterns_exhaustive),
          T(f32_to_half_random),
          T(f64_to_half_rounds_once), T(integer_casts), T(narrow_integer_arithmetic), T(bf16_matmul), T(f16_matmul))
