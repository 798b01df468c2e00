/*
 * test_lowp.c — minifloat rounding, MX quantization through
 * rlx_scaled_matmul, codebook weight synthesis and the spline activation,
 * each against loops written here, plus every documented error.
 *
 * The quantizer reference below is independent of src/runtime/kernels/quant.c:
 * it enumerates each format's grid from its bit layout and picks the
 * nearest point, ties to the even code.
 */
#include "harness.h"

/* Internal (static library): the rounding primitive the evaluator uses. */
double rt_minifloat_round(double v, int fmt);
int rt_minifloat_emax(int fmt);

typedef struct {
    int ebits, mbits, bias;
    double max;
    int emax;
} fmt_desc;

static const fmt_desc fmts[5] = {
    {4, 3, 7, 448.0, 8},      /* FP8 E4M3 */
    {5, 2, 15, 57344.0, 15},  /* FP8 E5M2 */
    {2, 3, 1, 7.5, 2},        /* FP6 E2M3 */
    {3, 2, 3, 28.0, 4},       /* FP6 E3M2 */
    {2, 1, 1, 6.0, 2},        /* FP4 E2M1 */
};

/* The non-negative finite grid of a format in code order (ascending). */
static int grid_of(int fmt, double *grid)
{
    const fmt_desc *f = &fmts[fmt];
    int n = 0;
    for (int e = 0; e < 1 << f->ebits; e++) {
        for (int m = 0; m < 1 << f->mbits; m++) {
            double frac = (double)m / (double)(1 << f->mbits);
            double v = e == 0 ? ldexp(frac, 1 - f->bias) : ldexp(1 + frac, e - f->bias);
            if (v <= f->max)
                grid[n++] = v;
        }
    }
    return n;
}

/* Nearest grid point, ties to the even code; saturating; NaN stays NaN. */
static double ref_round(double v, int fmt)
{
    static double grids[5][256];
    static int sizes[5];
    if (!sizes[fmt])
        sizes[fmt] = grid_of(fmt, grids[fmt]);
    if (isnan(v))
        return v;
    double a = fabs(v), r = fmts[fmt].max;
    const double *g = grids[fmt];
    for (int i = 0; i + 1 < sizes[fmt]; i++) {
        if (a <= g[i + 1]) {
            double lo = a - g[i], hi = g[i + 1] - a;
            r = lo < hi ? g[i] : hi < lo ? g[i + 1] : (i % 2 == 0 ? g[i] : g[i + 1]);
            break;
        }
    }
    return v < 0 ? -r : r;
}

/* MX quantization of a [rows, cols] row-major array along cols. */
static void ref_mxquant(const double *x, double *q, int64_t rows, int64_t cols, int fmt, int block)
{
    double whole = 0;
    for (int64_t i = 0; i < rows * cols; i++)
        if (isfinite(x[i]) && fabs(x[i]) > whole)
            whole = fabs(x[i]);
    int64_t bl = block ? block : cols;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t b0 = 0; b0 < cols; b0 += bl) {
            int64_t b1 = b0 + bl < cols ? b0 + bl : cols;
            double amax = 0;
            for (int64_t c = b0; c < b1; c++)
                if (isfinite(x[r * cols + c]) && fabs(x[r * cols + c]) > amax)
                    amax = fabs(x[r * cols + c]);
            if (!block)
                amax = whole;
            double scale = amax > 0 ? ldexp(1, ilogb(amax) - fmts[fmt].emax) : 1;
            for (int64_t c = b0; c < b1; c++)
                q[r * cols + c] = ref_round(x[r * cols + c] / scale, fmt) * scale;
        }
    }
}

/* ------------------------------------------------------------ minifloats */

typedef struct {
    int fmt;
    double in, out;
} rounding_case;

/* Hand-checked: q is the grid spacing in the input's binade. */
static const rounding_case table[] = {
    /* E4M3: emin -6, subnormal spacing 2^-9, max 448 = 1.75 * 2^8 */
    {RLX_FP8_E4M3, 0.1, 0.1015625},       /* q 2^-7: 12.8 q -> 13 q */
    {RLX_FP8_E4M3, -0.1, -0.1015625},
    {RLX_FP8_E4M3, 1.0, 1.0},
    {RLX_FP8_E4M3, 1.0625, 1.0},          /* tie 8.5 q -> 8 (even) */
    {RLX_FP8_E4M3, 1.1875, 1.25},         /* tie 9.5 q -> 10 (even) */
    {RLX_FP8_E4M3, 17.0, 16.0},           /* q 2: tie 8.5 -> 8 */
    {RLX_FP8_E4M3, 19.0, 20.0},           /* tie 9.5 -> 10 */
    {RLX_FP8_E4M3, 240.0, 240.0},
    {RLX_FP8_E4M3, 448.0, 448.0},
    {RLX_FP8_E4M3, 460.0, 448.0},
    {RLX_FP8_E4M3, 464.0, 448.0},         /* the tie with 480 (a NaN code) saturates */
    {RLX_FP8_E4M3, 470.0, 448.0},
    {RLX_FP8_E4M3, 1e9, 448.0},
    {RLX_FP8_E4M3, -1e9, -448.0},
    {RLX_FP8_E4M3, INFINITY, 448.0},
    {RLX_FP8_E4M3, -INFINITY, -448.0},
    {RLX_FP8_E4M3, 0.015625, 0.015625},   /* smallest normal 2^-6 */
    {RLX_FP8_E4M3, 0.001953125, 0.001953125}, /* smallest subnormal 2^-9 */
    {RLX_FP8_E4M3, 0.0009765625, 0.0},    /* 2^-10: tie -> 0 */
    {RLX_FP8_E4M3, 0.00099, 0.001953125}, /* just above the tie */
    {RLX_FP8_E4M3, 0.0029296875, 0.00390625}, /* 1.5 q -> 2 q */
    {RLX_FP8_E4M3, -0.0048828125, -0.00390625}, /* 2.5 q -> 2 q */
    {RLX_FP8_E4M3, 0.0, 0.0},
    /* E5M2: emin -14, subnormal spacing 2^-16, max 57344 = 1.75 * 2^15 */
    {RLX_FP8_E5M2, 0.1, 0.09375},         /* q 2^-6: 6.4 q -> 6 q */
    {RLX_FP8_E5M2, 1.125, 1.0},           /* tie 4.5 -> 4 */
    {RLX_FP8_E5M2, 1.375, 1.5},           /* tie 5.5 -> 6 */
    {RLX_FP8_E5M2, 3.2, 3.0},
    {RLX_FP8_E5M2, -3.0, -3.0},
    {RLX_FP8_E5M2, 57344.0, 57344.0},
    {RLX_FP8_E5M2, 60000.0, 57344.0},
    {RLX_FP8_E5M2, 61440.0, 57344.0},     /* tie with 2^16 saturates */
    {RLX_FP8_E5M2, 1e6, 57344.0},
    {RLX_FP8_E5M2, 0x1p-16, 0x1p-16},
    {RLX_FP8_E5M2, 0x1p-17, 0.0},         /* tie -> 0 */
    {RLX_FP8_E5M2, 0x3p-17, 0x1p-15},     /* 1.5 q -> 2 q */
    {RLX_FP8_E5M2, 0x1p-14, 0x1p-14},     /* smallest normal */
    /* E2M3: emin 0, subnormal spacing 2^-3, max 7.5 */
    {RLX_FP6_E2M3, 0.1, 0.125},
    {RLX_FP6_E2M3, 0.0625, 0.0},          /* tie -> 0 */
    {RLX_FP6_E2M3, 0.1875, 0.25},         /* 1.5 q -> 2 q */
    {RLX_FP6_E2M3, 1.0625, 1.0},
    {RLX_FP6_E2M3, 3.3, 3.25},
    {RLX_FP6_E2M3, 5.25, 5.0},            /* q 0.5: tie 10.5 -> 10 */
    {RLX_FP6_E2M3, 5.75, 6.0},            /* tie 11.5 -> 12 */
    {RLX_FP6_E2M3, -2.1, -2.0},
    {RLX_FP6_E2M3, 7.5, 7.5},
    {RLX_FP6_E2M3, 7.75, 7.5},
    {RLX_FP6_E2M3, 100.0, 7.5},
    /* E3M2: emin -2, subnormal spacing 2^-4, max 28 */
    {RLX_FP6_E3M2, 0.1, 0.125},
    {RLX_FP6_E3M2, 0.03125, 0.0},         /* tie -> 0 */
    {RLX_FP6_E3M2, 0.09375, 0.125},       /* 1.5 q -> 2 q */
    {RLX_FP6_E3M2, -0.3, -0.3125},
    {RLX_FP6_E3M2, 4.5, 4.0},             /* q 1: tie -> 4 */
    {RLX_FP6_E3M2, 5.5, 6.0},
    {RLX_FP6_E3M2, 28.0, 28.0},
    {RLX_FP6_E3M2, 29.0, 28.0},
    {RLX_FP6_E3M2, 30.0, 28.0},           /* tie with 32 saturates */
    {RLX_FP6_E3M2, 1000.0, 28.0},
    /* E2M1: grid 0 0.5 1 1.5 2 3 4 6 */
    {RLX_FP4_E2M1, 0.1, 0.0},
    {RLX_FP4_E2M1, 0.25, 0.0},            /* tie -> 0 */
    {RLX_FP4_E2M1, 0.75, 1.0},            /* tie -> 1 (even) */
    {RLX_FP4_E2M1, 1.25, 1.0},
    {RLX_FP4_E2M1, 1.75, 2.0},
    {RLX_FP4_E2M1, 2.5, 2.0},
    {RLX_FP4_E2M1, 3.5, 4.0},
    {RLX_FP4_E2M1, 5.0, 4.0},             /* tie between 4 and 6 -> 4 */
    {RLX_FP4_E2M1, 5.5, 6.0},
    {RLX_FP4_E2M1, 7.0, 6.0},
    {RLX_FP4_E2M1, -0.8, -1.0},
    {RLX_FP4_E2M1, -6.0, -6.0},
};

TEST(minifloat_table)
{
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        double got = rt_minifloat_round(table[i].in, table[i].fmt);
        if (got != table[i].out)
            test_fail(__FILE__, __LINE__, "format %d: round(%.17g) = %.17g, expected %.17g", table[i].fmt,
                      table[i].in, got, table[i].out);
        /* The enumerating reference agrees with the hand-checked value. */
        CHECK(ref_round(table[i].in, table[i].fmt) == table[i].out);
    }
    for (int f = 0; f < 5; f++) {
        CHECK(isnan(rt_minifloat_round(NAN, f)));
        CHECK(signbit(rt_minifloat_round(-0.0, f)));
        CHECK_EQ_INT(rt_minifloat_emax(f), fmts[f].emax);
    }
}

TEST(minifloat_matches_grid)
{
    /* Every grid point is fixed, every midpoint ties to even, and random
     * values agree with the enumerating reference. */
    for (int f = 0; f < 5; f++) {
        double g[256];
        int n = grid_of(f, g);
        for (int i = 0; i < n; i++) {
            CHECK(rt_minifloat_round(g[i], f) == g[i]);
            CHECK(rt_minifloat_round(-g[i], f) == -g[i]);
            if (i + 1 < n) {
                double mid = (g[i] + g[i + 1]) / 2;
                CHECK(rt_minifloat_round(mid, f) == (i % 2 == 0 ? g[i] : g[i + 1]));
            }
        }
        for (int k = 0; k < 2000; k++) {
            double v = test_uniform(-1.2, 1.2) * fmts[f].max;
            if (rt_minifloat_round(v, f) != ref_round(v, f)) {
                test_fail(__FILE__, __LINE__, "format %d: round(%.17g) = %.17g, reference %.17g", f, v,
                          rt_minifloat_round(v, f), ref_round(v, f));
                break;
            }
        }
    }
}

/* ----------------------------------------------------------- mxquant */

/* mxquant(x) read back through rlx_scaled_matmul(x, I): the identity
 * quantizes to itself (its scale is 2^-emax, and 2^emax is on the grid). */
static void check_mxquant(int64_t rows, int64_t cols, int fmt, int block, double lo, double hi)
{
    int64_t s[2] = {rows, cols}, n;
    rlx_tensor *x = trand(RLX_F32, 2, s, lo, hi);
    double *xv = test_values(x, &n);
    if (!xv)
        return;
    double *q = malloc((size_t)n * sizeof *q);
    ref_mxquant(xv, q, rows, cols, fmt, block);
    EXPECT(rlx_scaled_matmul(x, rlx_eye(RLX_F32, cols), (rlx_minifloat)fmt, block), RLX_F32, 2, s, q, 0);
    free(xv);
    free(q);
}

TEST(mxquant_blocks)
{
    for (int f = 0; f < 5; f++) {
        check_mxquant(3, 64, f, 32, -3, 3);   /* whole blocks */
        check_mxquant(3, 70, f, 32, -3, 3);   /* a last partial block of 6 */
        check_mxquant(2, 40, f, 0, -50, 50);  /* one scale for the tensor */
        check_mxquant(2, 10, f, 32, 0, 1e-3); /* block longer than the row */
        check_mxquant(4, 9, f, 1, -7, 7);     /* one scale per element */
    }
}

TEST(mxquant_scale_rules)
{
    /* Block 0 shares one scale across the whole tensor, not per row: a row
     * of small values next to a row of large ones rounds to zero in FP4. */
    int64_t s[2] = {2, 2};
    float x[4] = {1000, 600, 0.01f, -0.02f};
    /* amax 1000: scale 2^(9-2) = 128; 7.8 saturates to 6, 4.7 -> 4. */
    double whole[4] = {768, 512, 0, 0};
    rlx_tensor *xt = tf32(2, s, x), *eye = rlx_eye(RLX_F32, 2);
    EXPECT(rlx_scaled_matmul(xt, eye, RLX_FP4_E2M1, 0), RLX_F32, 2, s, whole, 0);
    /* Per-row blocks: row 1 has amax 0.02, scale 2^(-6-2); 0.01 -> 2.56 -> 3,
     * -0.02 -> -5.12 -> -6. */
    double rows[4] = {768, 512, 0.01171875, -0.0234375};
    EXPECT(rlx_scaled_matmul(xt, eye, RLX_FP4_E2M1, 2), RLX_F32, 2, s, rows, 0);
    /* The tensor's amax may sit in any row: here in the last one. */
    float xr[4] = {0.01f, -0.02f, 600, 1000};
    double wholer[4] = {0, 0, 512, 768};
    EXPECT(rlx_scaled_matmul(tf32(2, s, xr), eye, RLX_FP4_E2M1, 0), RLX_F32, 2, s, wholer, 0);
    /* A last partial block has its own scale: blocks [6, 6] and [0.3], not
     * [6, 6, 0.3] (whose scale 2^(2-2) would round 0.3 to 0.5). */
    float p[3] = {6, 6, 0.3f};
    int64_t s13[2] = {1, 3};
    double pq[3] = {6, 6, 0.25}; /* 0.3: scale 2^(-2-2), 4.8 -> 4 */
    EXPECT(rlx_scaled_matmul(tf32(2, s13, p), rlx_eye(RLX_F32, 3), RLX_FP4_E2M1, 2), RLX_F32, 2, s13, pq, 0);
    /* inf saturates to max * scale and stays out of amax (the block's
     * scale comes from -1: 2^-8, so inf -> 448 * 2^-8); an all-zero block
     * has scale 1. NaN stays NaN (and the matmul spreads it over its row,
     * so only that row is NaN). */
    float y[8] = {NAN, 3, 1, 0, INFINITY, -1, 0, 0};
    int64_t s24[2] = {2, 4};
    double *v;
    int64_t n;
    rlx_tensor *r = rlx_scaled_matmul(tf32(2, s24, y), rlx_eye(RLX_F32, 4), RLX_FP8_E4M3, 2);
    if ((v = test_values(r, &n)) != NULL) {
        CHECK(isnan(v[0]));
        CHECK(v[4] == 1.75 && v[5] == -1 && v[6] == 0 && v[7] == 0);
        free(v);
    }
    /* Saturation inside a block: amax 1000 gives scale 2^(9-8) and 500 -> 448. */
    float z[4] = {1000, 3, 1, 0.3f};
    int64_t s14[2] = {1, 4};
    double zq[4] = {896, 3, 1, 0.3125}; /* [1, 0.3]: scale 2^-8, 76.8 -> 80 */
    EXPECT(rlx_scaled_matmul(tf32(2, s14, z), rlx_eye(RLX_F32, 4), RLX_FP8_E4M3, 2), RLX_F32, 2, s14, zq, 0);
}

/* --------------------------------------------------------- scaled matmul */

static void check_scaled_matmul(rlx_dtype dt, int64_t m, int64_t k, int64_t n, int fmt, int block)
{
    int64_t sx[2] = {m, k}, sw[2] = {n, k}, so[2] = {m, n}, nx, nw;
    rlx_tensor *x = trand(dt, 2, sx, -4, 4), *w = trand(dt, 2, sw, -0.5, 0.5);
    double *xv = test_values(x, &nx), *wv = test_values(w, &nw);
    if (!xv || !wv) {
        free(xv);
        free(wv);
        return;
    }
    double *qx = malloc((size_t)nx * sizeof *qx), *qw = malloc((size_t)nw * sizeof *qw);
    double *want = malloc((size_t)(m * n) * sizeof *want);
    ref_mxquant(xv, qx, m, k, fmt, block);
    ref_mxquant(wv, qw, n, k, fmt, block);
    double atol = 0;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            double acc = 0, mag = 0;
            for (int64_t c = 0; c < k; c++) {
                acc += qx[i * k + c] * qw[j * k + c];
                mag += fabs(qx[i * k + c] * qw[j * k + c]);
            }
            want[i * n + j] = acc;
            if (mag > atol)
                atol = mag;
        }
    }
    EXPECT(rlx_scaled_matmul(x, w, (rlx_minifloat)fmt, block), RLX_F32, 2, so, want, 1e-5 * atol + 1e-30);
    free(xv);
    free(wv);
    free(qx);
    free(qw);
    free(want);
}

TEST(scaled_matmul_vs_loop)
{
    for (int f = 0; f < 5; f++) {
        check_scaled_matmul(RLX_F32, 5, 64, 7, f, 32);
        check_scaled_matmul(RLX_F32, 3, 45, 4, f, 16); /* partial last block */
        check_scaled_matmul(RLX_F64, 4, 33, 5, f, 0);
        check_scaled_matmul(RLX_F64, 2, 8, 3, f, 3);
    }
}

TEST(scaled_matmul_integer_input)
{
    /* Integers compute in f32; small integers sit on the E4M3 grid once
     * scaled (amax 7: scale 2^(2-8), 7 * 64 = 448). */
    int64_t sx[2] = {1, 3}, sw[2] = {2, 3}, so[2] = {1, 2};
    int32_t x[3] = {1, 2, 7};
    int64_t w[6] = {1, 0, 0, 1, 1, 1};
    double want[2] = {1, 10};
    EXPECT(rlx_scaled_matmul(ti32(2, sx, x), ti64(2, sw, w), RLX_FP8_E4M3, 0), RLX_F32, 2, so, want, 0);
}

TEST(scaled_matmul_errors)
{
    const char *fn = "rlx_scaled_matmul";
    int64_t s23[2] = {2, 3}, s43[2] = {4, 3}, s24[2] = {2, 4}, s3[1] = {3}, s123[3] = {1, 2, 3};
    rlx_tensor *x = rlx_ones(RLX_F32, 2, s23), *w = rlx_ones(RLX_F32, 2, s43);
    CHECK_NULL_ERR(rlx_scaled_matmul(NULL, w, RLX_FP8_E4M3, 32), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_scaled_matmul(x, NULL, RLX_FP8_E4M3, 32), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_scaled_matmul(x, w, (rlx_minifloat)5, 32), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_scaled_matmul(x, w, (rlx_minifloat)-1, 32), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_scaled_matmul(x, w, RLX_FP4_E2M1, -1), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_scaled_matmul(x, rlx_ones(RLX_F32, 2, s24), RLX_FP8_E5M2, 32), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_scaled_matmul(rlx_ones(RLX_F32, 1, s3), w, RLX_FP8_E5M2, 32), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_scaled_matmul(x, rlx_ones(RLX_F32, 3, s123), RLX_FP8_E5M2, 32), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_scaled_matmul(rlx_ones(RLX_BOOL, 2, s23), w, RLX_FP8_E5M2, 32), RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_scaled_matmul(x, rlx_ones(RLX_BOOL, 2, s43), RLX_FP8_E5M2, 32), RLX_E_DTYPE, fn);
}

/* --------------------------------------------------- weight synthesis */

TEST(synth_matmul_vs_loop)
{
    const int64_t m = 3, n = 5, d = 4, e = 6, kd = 3, k = kd * 4;
    int64_t sx[2] = {m, k}, si[2] = {n, kd}, sc[2] = {e, d}, so[2] = {m, n}, sr[2] = {k, n}, nx, nc;
    rlx_tensor *x = trand(RLX_F64, 2, sx, -1, 1), *cb = trand(RLX_F64, 2, sc, -1, 1);
    int32_t idx[15];
    int64_t idx64[15];
    for (int i = 0; i < 15; i++)
        idx64[i] = idx[i] = (int32_t)((i * 7 + 3) % e);
    double *xv = test_values(x, &nx), *cv = test_values(cb, &nc);
    if (!xv || !cv) {
        free(xv);
        free(cv);
        return;
    }
    double wt[60], want[15];
    for (int64_t j = 0; j < n; j++)
        for (int64_t c = 0; c < k; c++)
            wt[c * n + j] = cv[idx[j * kd + c / d] * d + c % d]; /* W[j, c] */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t c = 0; c < k; c++)
                acc += xv[i * k + c] * wt[c * n + j];
            want[i * n + j] = acc;
        }
    rlx_tensor *ii = ti32(2, si, idx), *il = ti64(2, si, idx64);
    EXPECT(rlx_synth_matmul(x, ii, cb), RLX_F64, 2, so, want, 1e-12);
    EXPECT(rlx_synth_matmul(x, il, cb), RLX_F64, 2, so, want, 1e-12);
    EXPECT(rlx_synth_reconstruct(ii, cb), RLX_F64, 2, sr, wt, 0);
    EXPECT(rlx_synth_reconstruct(il, cb), RLX_F64, 2, sr, wt, 0);
    /* f32 operands give f32. */
    rlx_tensor *x32 = rlx_cast(x, RLX_F32), *cb32 = rlx_cast(cb, RLX_F32);
    EXPECT(rlx_synth_matmul(x32, ii, cb32), RLX_F32, 2, so, want, 1e-5);
    free(xv);
    free(cv);
}

TEST(synth_bad_index_at_realize)
{
    int64_t sx[2] = {1, 4}, si[2] = {2, 2}, sc[2] = {3, 2};
    int32_t idx[4] = {0, 1, 2, 3}; /* 3 is out of range for 3 codebook rows */
    rlx_tensor *r = rlx_synth_matmul(rlx_ones(RLX_F32, 2, sx), ti32(2, si, idx), rlx_ones(RLX_F32, 2, sc));
    CHECK(r != NULL);
    CHECK_EQ_INT(rlx_realize(r), RLX_E_ARG);
    rlx_clear_error();
}

TEST(synth_errors)
{
    const char *fm = "rlx_synth_matmul", *fr = "rlx_synth_reconstruct";
    int64_t sx[2] = {2, 6}, si[2] = {4, 3}, sc[2] = {5, 2}, sc3[2] = {5, 3}, s1[1] = {6}, s3[3] = {1, 4, 3};
    rlx_tensor *x = rlx_ones(RLX_F32, 2, sx), *cb = rlx_ones(RLX_F32, 2, sc);
    rlx_tensor *idx = rlx_zeros(RLX_I32, 2, si);
    CHECK(rlx_synth_matmul(x, idx, cb) != NULL); /* the baseline is valid */
    CHECK_NULL_ERR(rlx_synth_matmul(NULL, idx, cb), RLX_E_ARG, fm);
    CHECK_NULL_ERR(rlx_synth_matmul(x, NULL, cb), RLX_E_ARG, fm);
    CHECK_NULL_ERR(rlx_synth_matmul(x, idx, NULL), RLX_E_ARG, fm);
    CHECK_NULL_ERR(rlx_synth_matmul(x, idx, rlx_ones(RLX_F32, 2, sc3)), RLX_E_SHAPE, fm); /* 3*3 != 6 */
    CHECK_NULL_ERR(rlx_synth_matmul(rlx_ones(RLX_F32, 1, s1), idx, cb), RLX_E_SHAPE, fm);
    CHECK_NULL_ERR(rlx_synth_matmul(x, rlx_zeros(RLX_I32, 3, s3), cb), RLX_E_SHAPE, fm);
    CHECK_NULL_ERR(rlx_synth_matmul(x, idx, rlx_ones(RLX_F32, 1, s1)), RLX_E_SHAPE, fm);
    CHECK_NULL_ERR(rlx_synth_matmul(x, rlx_zeros(RLX_F32, 2, si), cb), RLX_E_DTYPE, fm);
    CHECK_NULL_ERR(rlx_synth_matmul(x, rlx_zeros(RLX_BOOL, 2, si), cb), RLX_E_DTYPE, fm);
    CHECK_NULL_ERR(rlx_synth_matmul(x, idx, rlx_ones(RLX_BOOL, 2, sc)), RLX_E_DTYPE, fm);
    CHECK(rlx_synth_reconstruct(idx, cb) != NULL);
    CHECK_NULL_ERR(rlx_synth_reconstruct(NULL, cb), RLX_E_ARG, fr);
    CHECK_NULL_ERR(rlx_synth_reconstruct(idx, NULL), RLX_E_ARG, fr);
    CHECK_NULL_ERR(rlx_synth_reconstruct(rlx_zeros(RLX_F64, 2, si), cb), RLX_E_DTYPE, fr);
    CHECK_NULL_ERR(rlx_synth_reconstruct(rlx_zeros(RLX_I64, 3, s3), cb), RLX_E_SHAPE, fr);
    CHECK_NULL_ERR(rlx_synth_reconstruct(idx, rlx_ones(RLX_F32, 1, s1)), RLX_E_SHAPE, fr);
}

/* ------------------------------------------------------------- spline */

static void check_spline(rlx_dtype dt, int rank, const int64_t *shape, int g, double lo, double hi, double tol)
{
    int64_t c = shape[rank - 1], nx, nc, sc[2] = {c, g};
    rlx_tensor *x = trand(dt, rank, shape, lo - 1, hi + 1), *coeff = trand(dt, 2, sc, -1, 1);
    double *xv = test_values(x, &nx), *cv = test_values(coeff, &nc);
    double *want = malloc((size_t)(nx ? nx : 1) * sizeof *want);
    double h = (hi - lo) / (g - 1);
    for (int64_t i = 0; xv && cv && i < nx; i++) {
        int64_t ch = i % c;
        double acc = 0;
        for (int j = 0; j < g; j++) {
            double ctr = lo + j * h, t = (xv[i] - ctr) / h;
            acc += cv[ch * g + j] * exp(-t * t);
        }
        want[i] = acc;
    }
    if (xv && cv)
        EXPECT(rlx_spline_activation(x, coeff, g, lo, hi), dt, rank, shape, want, tol);
    free(xv);
    free(cv);
    free(want);
}

TEST(spline_vs_loop)
{
    int64_t s3[3] = {2, 3, 4}, s1[1] = {5}, s2[2] = {7, 1};
    check_spline(RLX_F64, 3, s3, 5, -1.5, 1.5, 1e-12);
    check_spline(RLX_F32, 3, s3, 8, -2, 3, 1e-5);
    check_spline(RLX_F64, 1, s1, 2, 0, 1, 1e-12);
    check_spline(RLX_F32, 2, s2, 3, -0.5, 0.5, 1e-5);
    /* By hand: one channel, G = 2 on [0, 1] (h = 1): x = 0 gives
     * c0 + c1 e^-1; x = 1 gives c0 e^-1 + c1. */
    int64_t sx[2] = {2, 1}, sc[2] = {1, 2};
    double x[2] = {0, 1}, c[2] = {2, 3};
    double want[2] = {2 + 3 * exp(-1.0), 2 * exp(-1.0) + 3};
    EXPECT(rlx_spline_activation(tf64(2, sx, x), tf64(2, sc, c), 2, 0, 1), RLX_F64, 2, sx, want, 1e-15);
    /* Integer x computes in f32. */
    int32_t xi[2] = {0, 1};
    EXPECT(rlx_spline_activation(ti32(2, sx, xi), tf32(2, sc, (const float[]){2, 3}), 2, 0, 1), RLX_F32, 2, sx,
           want, 1e-6);
}

TEST(spline_errors)
{
    const char *fn = "rlx_spline_activation";
    int64_t sx[2] = {3, 4}, sc[2] = {4, 5}, sbad[2] = {4, 6}, sbad2[2] = {3, 5}, s1[1] = {20};
    rlx_tensor *x = rlx_ones(RLX_F32, 2, sx), *c = rlx_ones(RLX_F32, 2, sc);
    CHECK(rlx_spline_activation(x, c, 5, -1, 1) != NULL); /* the baseline is valid */
    CHECK_NULL_ERR(rlx_spline_activation(NULL, c, 5, -1, 1), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_spline_activation(x, NULL, 5, -1, 1), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_spline_activation(x, c, 1, -1, 1), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_spline_activation(x, c, 0, -1, 1), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_spline_activation(x, c, -3, -1, 1), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_spline_activation(x, c, 5, 1, 1), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_spline_activation(x, c, 5, 2, 1), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_spline_activation(x, c, 5, NAN, 1), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_spline_activation(x, c, 5, -1, INFINITY), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_spline_activation(x, c, 6, -1, 1), RLX_E_SHAPE, fn); /* G != num_basis */
    CHECK_NULL_ERR(rlx_spline_activation(x, rlx_ones(RLX_F32, 2, sbad), 5, -1, 1), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_spline_activation(x, rlx_ones(RLX_F32, 2, sbad2), 5, -1, 1), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_spline_activation(x, rlx_ones(RLX_F32, 1, s1), 5, -1, 1), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_spline_activation(rlx_scalar(RLX_F32, 1), c, 5, -1, 1), RLX_E_SHAPE, fn);
}

/* Builds and realizes each op of this file in a scope of its own; true
 * when every step worked and the values are right. */
static int lowp_workload(void)
{
    rlx_scope_begin();
    int64_t s[2] = {1, 2}, si[2] = {1, 1}, sc[2] = {2, 2}, sg[2] = {2, 2};
    float x[2] = {1, 3};
    int32_t idx[1] = {1};
    float cb[4] = {0, 0, 1, 2}, coeff[4] = {0, 0, 0, 0};
    double v[4] = {0};
    rlx_tensor *xt = rlx_from_data(RLX_F32, 2, s, x);
    rlx_tensor *q = rlx_scaled_matmul(xt, rlx_eye(RLX_F32, 2), RLX_FP8_E4M3, 1);
    rlx_tensor *sm = rlx_synth_matmul(xt, rlx_from_data(RLX_I32, 2, si, idx), rlx_from_data(RLX_F32, 2, sc, cb));
    rlx_tensor *sp = rlx_spline_activation(xt, rlx_from_data(RLX_F32, 2, sg, coeff), 2, 0, 1);
    int ok = q && sm && sp && rlx_read_f64(q, v, 2) == RLX_OK && v[0] == 1 && v[1] == 3 &&
             rlx_read_f64(sm, v + 2, 1) == RLX_OK && v[2] == 7 && rlx_read_f64(sp, v, 2) == RLX_OK && v[0] == 0;
    rlx_scope_end();
    return ok;
}

TEST(lowp_allocation_failures) { ALLOC_WALK(lowp_workload, 20); }

TEST(scaled_matmul_empty)
{
    /* k = 0 gives zeros; m = 0 gives an empty result; block 0 on empty is fine. */
    int64_t sx[2] = {2, 0}, sw[2] = {3, 0}, so[2] = {2, 3}, ex[2] = {0, 4}, ew[2] = {3, 4}, eo[2] = {0, 3};
    double zeros[6] = {0};
    EXPECT(rlx_scaled_matmul(rlx_ones(RLX_F32, 2, sx), rlx_ones(RLX_F32, 2, sw), RLX_FP6_E3M2, 0), RLX_F32, 2, so,
           zeros, 0);
    EXPECT(rlx_scaled_matmul(rlx_ones(RLX_F64, 2, ex), rlx_ones(RLX_F64, 2, ew), RLX_FP6_E2M3, 4), RLX_F32, 2, eo,
           NULL, 0);
}

TEST_MAIN(T(minifloat_table), T(minifloat_matches_grid), T(mxquant_blocks), T(mxquant_scale_rules),
          T(scaled_matmul_vs_loop), T(scaled_matmul_integer_input), T(scaled_matmul_errors),
          T(synth_matmul_vs_loop), T(synth_bad_index_at_realize), T(synth_errors), T(spline_vs_loop),
          T(spline_errors), T(scaled_matmul_empty), T(lowp_allocation_failures))
