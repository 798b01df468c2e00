/*
 * test_signal.c — rlx_fft, rlx_ifft and rlx_fft_axis against a naive DFT
 * computed here in double: every length N = 1..64, large primes and a
 * large power of two, f32 and f64, both directions, any axis, strided
 * inputs, the round trip, and every documented error; transforms longer
 * than one cache block (four-step, long Bluestein), primes too long for a
 * full DFT (sampled bins, Parseval, round trip), and the same bits with any
 * thread count or concurrent realizations.
 */
#include <pthread.h>

#include "harness.h"


#define TWO_PI 6.283185307179586476925286766559 /* M_PI is not in strict C11 */

/* Naive DFT of one line of 2N values (N real, then N imaginary) read with
 * stride `stride`, written contiguous to out[2N]. Angles use the exact
 * index (j*k) mod N into a table, so the reference is accurate to about
 * N ulps of the line's l1 norm. */
static void naive_dft(const double *x, int64_t stride, int64_t n, int inverse, const double *cs,
                      const double *sn, double *out)
{
    for (int64_t k = 0; k < n; k++) {
        double sr = 0, si = 0;
        for (int64_t j = 0; j < n; j++) {
            int64_t t = (j * k) % n;
            double wr = cs[t], wi = inverse ? sn[t] : -sn[t];
            double xr = x[j * stride], xi = x[(n + j) * stride];
            sr += xr * wr - xi * wi;
            si += xr * wi + xi * wr;
        }
        out[k] = sr;
        out[n + k] = si;
    }
}

/* Compares got (the transform of x along axis) with the naive DFT of x's
 * values, line by line, within tol times the line's l1 norm. */
static void check_transform(const char *file, int line, rlx_tensor *x, rlx_tensor *got, int axis, int inverse,
                            double tol)
{
    if (!x || !got) {
        test_fail(file, line, "tensor is NULL: %s", rlx_last_error());
        return;
    }
    int64_t shape[RLX_MAX_RANK], gshape[RLX_MAX_RANK], nx, ng;
    int rank = rlx_shape(x, shape, RLX_MAX_RANK);
    int grank = rlx_shape(got, gshape, RLX_MAX_RANK);
    if (grank != rank || memcmp(shape, gshape, (size_t)rank * sizeof *shape) != 0) {
        test_fail(file, line, "result shape differs from the input shape");
        return;
    }
    rlx_dtype want_dt = rlx_dtype_of(x) == RLX_F64 ? RLX_F64 : RLX_F32;
    if (rlx_dtype_of(got) != want_dt) {
        test_fail(file, line, "dtype %s, expected %s", rlx_dtype_name(rlx_dtype_of(got)), rlx_dtype_name(want_dt));
        return;
    }
    if (axis < 0)
        axis += rank;
    /* got first: reading x realizes it, and a realized view is then a
     * contiguous buffer to later transforms. */
    double *gv = test_values(got, &ng), *xv = test_values(x, &nx);
    int64_t len = shape[axis], n = len / 2, stride = 1, outer = 1;
    for (int i = axis + 1; i < rank; i++)
        stride *= shape[i];
    for (int i = 0; i < axis; i++)
        outer *= shape[i];
    double *cs = malloc((size_t)(n ? n : 1) * sizeof *cs), *sn = malloc((size_t)(n ? n : 1) * sizeof *sn);
    double *ref = malloc((size_t)(len ? len : 1) * sizeof *ref);
    for (int64_t t = 0; t < n; t++) {
        cs[t] = cos(TWO_PI * (double)t / (double)n);
        sn[t] = sin(TWO_PI * (double)t / (double)n);
    }
    int bad = 0;
    for (int64_t o = 0; xv && gv && o < outer && !bad; o++) {
        for (int64_t in = 0; in < stride && !bad; in++) {
            const double *xl = xv + o * len * stride + in;
            const double *gl = gv + o * len * stride + in;
            naive_dft(xl, stride, n, inverse, cs, sn, ref);
            double l1 = 0;
            for (int64_t j = 0; j < n; j++)
                l1 += hypot(xl[j * stride], xl[(n + j) * stride]);
            for (int64_t k = 0; k < len; k++) {
                if (!(fabs(gl[k * stride] - ref[k]) <= tol * (l1 + 1e-300))) {
                    test_fail(file, line, "N=%lld line (%lld,%lld) element %lld: %.17g, expected %.17g",
                              (long long)n, (long long)o, (long long)in, (long long)k, gl[k * stride], ref[k]);
                    bad = 1;
                    break;
                }
            }
        }
    }
    free(xv);
    free(gv);
    free(cs);
    free(sn);
    free(ref);
}
#define CHECK_TRANSFORM(x, got, axis, inverse, tol) \
    check_transform(__FILE__, __LINE__, (x), (got), (axis), (inverse), (tol))

/* Tolerances relative to a line's l1 norm: f64 leaves room for the naive
 * reference's own error; f32 results are rounded once from double. */
#define TOL_F64 1e-12
#define TOL_F32 2e-7

TEST(fft_known_values)
{
    /* [1,2,3,4] -> [10, -2+2i, -2, -2-2i], by hand. */
    int64_t s[1] = {8};
    double x[8] = {1, 2, 3, 4, 0, 0, 0, 0};
    double want[8] = {10, -2, -2, -2, 0, 2, 0, -2};
    EXPECT(rlx_fft(tf64(1, s, x)), RLX_F64, 1, s, want, 1e-15);
    /* The inverse of that spectrum is 4 x. */
    double back[8] = {4, 8, 12, 16, 0, 0, 0, 0};
    EXPECT(rlx_ifft(tf64(1, s, want)), RLX_F64, 1, s, back, 1e-14);
    /* An impulse has a flat spectrum; N = 3 goes through Bluestein. */
    int64_t s3[1] = {6};
    float imp[6] = {1, 0, 0, 0, 0, 0};
    double flat[6] = {1, 1, 1, 0, 0, 0};
    EXPECT(rlx_fft(tf32(1, s3, imp)), RLX_F32, 1, s3, flat, 1e-7);
    /* N = 3, x = [0, 1, 0]: X_k = exp(-2 pi i k / 3). */
    double e1[6] = {0, 1, 0, 0, 0, 0};
    double w3[6] = {1, -0.5, -0.5, 0, -0.86602540378443865, 0.86602540378443865};
    EXPECT(rlx_fft(tf64(1, s3, e1)), RLX_F64, 1, s3, w3, 1e-15);
}

TEST(fft_every_length_1_to_64)
{
    for (int64_t n = 1; n <= 64; n++) {
        int64_t s[2] = {3, 2 * n};
        for (int d = 0; d < 2; d++) {
            rlx_dtype dt = d ? RLX_F64 : RLX_F32;
            double tol = d ? TOL_F64 : TOL_F32;
            rlx_tensor *x = trand(dt, 2, s, -1, 1);
            CHECK_TRANSFORM(x, rlx_fft(x), -1, 0, tol);
            CHECK_TRANSFORM(x, rlx_ifft(x), -1, 1, tol);
            CHECK_TRANSFORM(x, rlx_fft_axis(x, 1, false), 1, 0, tol);
            CHECK_TRANSFORM(x, rlx_fft_axis(x, -1, true), 1, 1, tol);
        }
    }
}

TEST(fft_large_lengths)
{
    const int64_t ns[] = {251, 1009, 4096, 1000};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        int64_t s[2] = {2, 2 * ns[i]};
        rlx_tensor *x = trand(RLX_F64, 2, s, -1, 1);
        CHECK_TRANSFORM(x, rlx_fft(x), -1, 0, TOL_F64);
        CHECK_TRANSFORM(x, rlx_ifft(x), -1, 1, TOL_F64);
        rlx_tensor *xf = trand(RLX_F32, 2, s, -1, 1);
        CHECK_TRANSFORM(xf, rlx_fft(xf), -1, 0, TOL_F32);
        CHECK_TRANSFORM(xf, rlx_ifft(xf), -1, 1, TOL_F32);
    }
}

TEST(fft_axis_0_and_middle)
{
    const int64_t ns[] = {1, 4, 5, 12, 17};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        int64_t s[2] = {2 * ns[i], 3};
        rlx_tensor *x = trand(RLX_F64, 2, s, -2, 2);
        CHECK_TRANSFORM(x, rlx_fft_axis(x, 0, false), 0, 0, TOL_F64);
        CHECK_TRANSFORM(x, rlx_fft_axis(x, -2, true), 0, 1, TOL_F64);
        int64_t s3[3] = {2, 2 * ns[i], 3};
        rlx_tensor *y = trand(RLX_F32, 3, s3, -2, 2);
        CHECK_TRANSFORM(y, rlx_fft_axis(y, 1, false), 1, 0, TOL_F32);
        CHECK_TRANSFORM(y, rlx_fft_axis(y, 1, true), 1, 1, TOL_F32);
    }
}

TEST(fft_strided_input)
{
    /* Views that are not contiguous: the transform must follow their
     * strides and offset. Each result is realized before its input view
     * is read (reading a view realizes it as a contiguous buffer). */
    const int64_t ns[] = {6, 8, 13};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        int64_t s[2] = {2 * ns[i], 3}, s2[2] = {3, 2 * ns[i]};
        int perm[2] = {1, 0};
        rlx_tensor *x = trand(RLX_F64, 2, s, -1, 1), *y = trand(RLX_F32, 2, s2, -1, 1);
        rlx_tensor *xt = rlx_transpose(x, 2, perm); /* [3, 2N], strides [1, 3] */
        rlx_tensor *yt = rlx_transpose(y, 2, perm); /* [2N, 3], strides [1, 2N] */
        rlx_tensor *yn = rlx_narrow(y, 0, 1, 2);    /* rows 1..2: offset 2N */
        rlx_tensor *got[4] = {rlx_fft(xt), rlx_ifft(xt), rlx_fft_axis(yt, 0, false), rlx_fft(yn)};
        CHECK_EQ_INT(rlx_realize_many(got, 4), RLX_OK);
        CHECK(!rlx_is_realized(xt) && !rlx_is_realized(yt) && !rlx_is_realized(yn));
        CHECK_TRANSFORM(xt, got[0], -1, 0, TOL_F64);
        CHECK_TRANSFORM(xt, got[1], -1, 1, TOL_F64);
        CHECK_TRANSFORM(yt, got[2], 0, 0, TOL_F32);
        CHECK_TRANSFORM(yn, got[3], -1, 0, TOL_F32);
    }
}

TEST(fft_round_trip)
{
    const int64_t ns[] = {1, 2, 7, 16, 100};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        int64_t s[2] = {4, 2 * ns[i]}, n;
        rlx_tensor *x = trand(RLX_F64, 2, s, -1, 1);
        double *xv = test_values(x, &n);
        for (int64_t k = 0; xv && k < n; k++)
            xv[k] *= (double)ns[i];
        if (xv)
            EXPECT(rlx_ifft(rlx_fft(x)), RLX_F64, 2, s, xv, 1e-12);
        free(xv);
        rlx_tensor *y = trand(RLX_F32, 2, s, -1, 1);
        double *yv = test_values(y, &n);
        for (int64_t k = 0; yv && k < n; k++)
            yv[k] *= (double)ns[i];
        if (yv)
            EXPECT(rlx_fft_axis(rlx_fft_axis(y, 1, true), 1, false), RLX_F32, 2, s, yv, 2e-5);
        free(yv);
    }
}

TEST(fft_four_step_lengths)
{
    /* Transforms longer than one in-cache block: a power of two, and
     * primes whose Bluestein convolution is that long, last axis and axis
     * 0 (lines that are columns), both dtypes and directions. */
    const int64_t ns[] = {8192, 2053, 4099};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        int64_t s[2] = {1, 2 * ns[i]}, st[2] = {2 * ns[i], 2};
        for (int d = 0; d < 2; d++) {
            rlx_dtype dt = d ? RLX_F64 : RLX_F32;
            double tol = d ? TOL_F64 : TOL_F32;
            rlx_tensor *x = trand(dt, 2, s, -1, 1);
            CHECK_TRANSFORM(x, rlx_fft(x), -1, 0, tol);
            CHECK_TRANSFORM(x, rlx_ifft(x), -1, 1, tol);
            if (ns[i] != 8192) {
                rlx_tensor *y = trand(dt, 2, st, -1, 1);
                CHECK_TRANSFORM(y, rlx_fft_axis(y, 0, d == 1), 0, d == 1, tol);
            }
        }
    }
}

TEST(fft_many_lines_any_layout)
{
    /* Enough lines to fill whole blocks and a partial one, along the last
     * axis, axis 0 (adjacent lines) and a middle axis. */
    const int64_t ns[] = {5, 16, 12};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        int64_t s0[2] = {2 * ns[i], 19}, s1[3] = {3, 2 * ns[i], 9}, s2[2] = {21, 2 * ns[i]};
        for (int d = 0; d < 2; d++) {
            rlx_dtype dt = d ? RLX_F64 : RLX_F32;
            double tol = d ? TOL_F64 : TOL_F32;
            rlx_tensor *a = trand(dt, 2, s0, -1, 1), *b = trand(dt, 3, s1, -1, 1), *c = trand(dt, 2, s2, -1, 1);
            CHECK_TRANSFORM(a, rlx_fft_axis(a, 0, false), 0, 0, tol);
            CHECK_TRANSFORM(a, rlx_fft_axis(a, 0, true), 0, 1, tol);
            CHECK_TRANSFORM(b, rlx_fft_axis(b, 1, false), 1, 0, tol);
            CHECK_TRANSFORM(c, rlx_ifft(c), -1, 1, tol);
        }
    }
}

/* Large primes, too long for a full naive DFT: 40 bins computed naively
 * in double, Parseval, and the round trip. */
TEST(fft_large_primes)
{
    const int64_t ns[] = {65537, 100003};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        int64_t n = ns[i], s[1] = {2 * n}, cnt;
        for (int d = 0; d < 2; d++) {
            rlx_dtype dt = d ? RLX_F64 : RLX_F32;
            rlx_tensor *x = trand(dt, 1, s, -1, 1), *f = rlx_fft(x);
            double *fv = test_values(f, &cnt), *xv = test_values(x, &cnt);
            double l1 = 0, ex = 0, ef = 0;
            for (int64_t j = 0; xv && j < n; j++) {
                l1 += hypot(xv[j], xv[n + j]);
                ex += xv[j] * xv[j] + xv[n + j] * xv[n + j];
            }
            for (int b = 0; fv && xv && b < 40; b++) {
                int64_t k = b < 4 ? b : (int64_t)(test_uniform(0, 1) * (double)n) % n;
                double sr = 0, si = 0;
                for (int64_t j = 0; j < n; j++) {
                    double ang = -TWO_PI * (double)((j * k) % n) / (double)n, c = cos(ang), sn = sin(ang);
                    sr += xv[j] * c - xv[n + j] * sn;
                    si += xv[j] * sn + xv[n + j] * c;
                }
                double tol = (d ? 1e-13 : 2e-7) * l1;
                if (!(fabs(fv[k] - sr) <= tol && fabs(fv[n + k] - si) <= tol))
                    test_fail(__FILE__, __LINE__, "N=%lld %s bin %lld: %.17g%+.17gi, expected %.17g%+.17gi",
                              (long long)n, rlx_dtype_name(dt), (long long)k, fv[k], fv[n + k], sr, si);
            }
            for (int64_t j = 0; fv && j < n; j++)
                ef += fv[j] * fv[j] + fv[n + j] * fv[n + j];
            CHECK_NEAR(ef / (double)n, ex, d ? 1e-10 : 1e-5); /* Parseval */
            if (xv) {
                for (int64_t j = 0; j < 2 * n; j++)
                    xv[j] *= (double)n;
                EXPECT_V("round trip", rlx_ifft(f), dt, 1, s, xv, 0, (d ? 1e-8 : 5e-2));
            }
            free(fv);
            free(xv);
        }
    }
}

/* The same transform with 1 and 2 threads: bitwise equal. */
static rlx_tensor *seeded_fft(int64_t n, int64_t lines)
{
    int64_t s[2] = {lines, 2 * n};
    return rlx_fft(rlx_rand(RLX_F64, 2, s, 7)); /* a seeded leaf: same values each call */
}

TEST(fft_same_bits_any_threads)
{
    const int64_t cases[][2] = {{1 << 14, 1}, {5003, 1}, {100, 40}, {1 << 12, 9}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        double *v[2];
        int64_t cnt[2];
        for (int t = 0; t < 2; t++) {
            rlx_set_num_threads(t + 1);
            v[t] = test_values(seeded_fft(cases[c][0], cases[c][1]), &cnt[t]);
        }
        rlx_set_num_threads(0);
        CHECK(v[0] && v[1] && cnt[0] == cnt[1] && memcmp(v[0], v[1], (size_t)cnt[0] * sizeof *v[0]) == 0);
        free(v[0]);
        free(v[1]);
    }
}

/* Realizations on several threads at once share cached plans: each result
 * must equal the one computed alone (bitwise). */
static const int64_t conc_n[3] = {5003, 1000, 8192};
static double *conc_want[3];

static void *conc_worker(void *arg)
{
    int t = (int)(intptr_t)arg, bad = 0;
    for (int it = 0; it < 6 && !bad; it++) {
        int c = (t + it) % 3;
        rlx_scope_begin();
        double *v = malloc((size_t)(2 * conc_n[c]) * sizeof *v);
        bad = rlx_read_f64(seeded_fft(conc_n[c], 1), v, (size_t)(2 * conc_n[c])) != RLX_OK ||
              memcmp(v, conc_want[c], (size_t)(2 * conc_n[c]) * sizeof *v) != 0;
        free(v);
        rlx_scope_end();
    }
    return (void *)(intptr_t)bad;
}

TEST(fft_concurrent_realizations)
{
    int64_t cnt;
    for (int c = 0; c < 3; c++)
        conc_want[c] = test_values(seeded_fft(conc_n[c], 1), &cnt);
    pthread_t th[3];
    for (int t = 0; t < 3; t++)
        CHECK(pthread_create(&th[t], NULL, conc_worker, (void *)(intptr_t)t) == 0);
    for (int t = 0; t < 3; t++) {
        void *bad = NULL;
        pthread_join(th[t], &bad);
        CHECK(bad == NULL);
    }
    for (int c = 0; c < 3; c++)
        free(conc_want[c]);
}

TEST(fft_integer_input_and_empty)
{
    /* Integers and bools compute in f32. */
    int64_t s[1] = {4};
    int32_t xi[4] = {1, 2, 0, 0};
    double want[4] = {3, -1, 0, 0};
    EXPECT(rlx_fft(ti32(1, s, xi)), RLX_F32, 1, s, want, 0);
    int64_t xl[4] = {1, 2, 0, 0};
    EXPECT(rlx_fft_axis(ti64(1, s, xl), 0, false), RLX_F32, 1, s, want, 0);
    unsigned char xb[4] = {1, 1, 0, 0};
    double wb[4] = {2, 0, 0, 0};
    EXPECT(rlx_ifft(tbool(1, s, xb)), RLX_F32, 1, s, wb, 0);
    /* An empty axis (N = 0) and an empty batch give empty results. */
    int64_t e1[2] = {3, 0}, e2[3] = {0, 2, 6};
    EXPECT(rlx_fft(rlx_zeros(RLX_F32, 2, e1)), RLX_F32, 2, e1, NULL, 0);
    EXPECT(rlx_ifft(rlx_zeros(RLX_F64, 2, e1)), RLX_F64, 2, e1, NULL, 0);
    EXPECT(rlx_fft_axis(rlx_zeros(RLX_F64, 3, e2), 1, false), RLX_F64, 3, e2, NULL, 0);
    EXPECT(rlx_fft_axis(rlx_zeros(RLX_F64, 3, e2), -1, true), RLX_F64, 3, e2, NULL, 0);
}

TEST(fft_errors)
{
    int64_t s5[2] = {3, 5}, s4[2] = {3, 4};
    rlx_tensor *odd = rlx_zeros(RLX_F32, 2, s5), *even = rlx_zeros(RLX_F32, 2, s4);
    CHECK_NULL_ERR(rlx_fft(NULL), RLX_E_ARG, "rlx_fft");
    CHECK_NULL_ERR(rlx_ifft(NULL), RLX_E_ARG, "rlx_ifft");
    CHECK_NULL_ERR(rlx_fft_axis(NULL, 0, false), RLX_E_ARG, "rlx_fft_axis");
    CHECK_NULL_ERR(rlx_fft(odd), RLX_E_SHAPE, "rlx_fft");
    CHECK_NULL_ERR(rlx_ifft(odd), RLX_E_SHAPE, "rlx_ifft");
    CHECK_NULL_ERR(rlx_fft_axis(odd, 1, true), RLX_E_SHAPE, "rlx_fft_axis");
    CHECK_NULL_ERR(rlx_fft_axis(even, 0, false), RLX_E_SHAPE, "rlx_fft_axis"); /* axis 0 has length 3 */
    /* The message names the shape. */
    rlx_clear_error();
    CHECK(rlx_fft(odd) == NULL);
    CHECK(strstr(rlx_last_error(), "[3,5]") != NULL);
    rlx_clear_error();
    CHECK_NULL_ERR(rlx_fft_axis(even, 2, false), RLX_E_ARG, "rlx_fft_axis");
    CHECK_NULL_ERR(rlx_fft_axis(even, -3, false), RLX_E_ARG, "rlx_fft_axis");
    CHECK_NULL_ERR(rlx_fft(rlx_scalar(RLX_F32, 1)), RLX_E_SHAPE, "rlx_fft");
    CHECK_NULL_ERR(rlx_fft_axis(rlx_scalar(RLX_F64, 1), 0, false), RLX_E_SHAPE, "rlx_fft_axis");
    /* A dynamic axis is checked when bound (fft_dynamic_axis); a dynamic batch too. */
    rlx_tensor *dyn_axis = rlx_input("x", RLX_F32, 2, (const int64_t[]){2, -1});
    rlx_tensor *dyn_batch = rlx_input("x", RLX_F32, 2, (const int64_t[]){-1, 4});
    rlx_tensor *fa = rlx_fft(dyn_axis), *fb = rlx_fft(dyn_batch);
    CHECK(fa != NULL && rlx_dim(fa, 0) == 2 && rlx_dim(fa, 1) == -1);
    CHECK(fb != NULL && rlx_dim(fb, 0) == -1 && rlx_dim(fb, 1) == 4);
    /* NULL propagates and keeps the first error. */
    rlx_clear_error();
    CHECK(rlx_fft(odd) == NULL);
    CHECK(rlx_ifft(rlx_fft(odd)) == NULL);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_SHAPE);
    CHECK(strncmp(rlx_last_error(), "rlx_fft:", 8) == 0);
    rlx_clear_error();
}

/* Builds and realizes a Bluestein and a radix-2 transform in a scope of
 * its own; true when every step worked and the values are right. */
static int fft_workload(void)
{
    rlx_scope_begin();
    int64_t s[1] = {6};
    double x[6] = {1, 0, 0, 0, 0, 0}; /* impulse: flat spectrum */
    double v[6] = {0};
    rlx_tensor *t = rlx_from_data(RLX_F64, 1, s, x);
    rlx_tensor *f = rlx_fft(t), *g = rlx_ifft(rlx_narrow(t, 0, 0, 4)); /* N = 3 and N = 2 */
    int ok = f && g && rlx_realize(g) == RLX_OK && rlx_read_f64(f, v, 6) == RLX_OK && v[0] == 1 && v[1] == 1 &&
             v[2] == 1 && v[3] == 0;
    rlx_scope_end();
    return ok;
}

TEST(fft_allocation_failures) { ALLOC_WALK(fft_workload, 5); }

static const rlx_dtype NARROW_FLOATS[2] = {RLX_BF16, RLX_F16};

static rlx_tensor *nf_fft(rlx_tensor *const *in) { return rlx_fft(in[0]); }
static rlx_tensor *nf_ifft_axis0(rlx_tensor *const *in) { return rlx_fft_axis(in[0], 0, true); }

/* The transforms of f16/bf16 compute in f32 and round once. */
TEST(fft_narrow_floats_match_f32)
{
    const int64_t a[2] = {3, 32}, b[2] = {10, 3};
    for (int i = 0; i < 2; i++) {
        EXPECT_NARROW(nf_fft, NARROW_FLOATS[i], 1, ((int[]){2}), ((const int64_t *const[]){a}), -1, 1, 1);
        EXPECT_NARROW(nf_ifft_axis0, NARROW_FLOATS[i], 1, ((int[]){2}), ((const int64_t *const[]){b}), -1, 1, 1);
    }
}

/* Transforms over a dynamic axis in one program, run at many lengths:
 * rlx_fft_axis, its inverse and rlx_fft_c (real and imaginary halves
 * split at the bound length), and the gradient of a loss through the
 * first, each equal to the same graph over the bound value; an odd length of
 * the [..., 2N] layout is RLX_E_SHAPE from the run. */
static void fft_dyn_graph(rlx_tensor *x, rlx_tensor **out)
{
    rlx_tensor *f = rlx_fft_axis(rlx_tanh(x), 1, false);
    rlx_tensor *c = rlx_fft_c(rlx_complex(x, rlx_mul_s(x, -0.5)), 1, true);
    /* (rlx_grad refuses fft_c's cat of two dynamic halves: rlx.h, rlx_input) */
    rlx_tensor *loss = rlx_sum(rlx_mul(f, rlx_sin(f)), NULL, 0, false);
    out[0] = f;
    out[1] = rlx_real(c);
    out[2] = rlx_imag(c);
    out[3] = loss;
    CHECK_EQ_INT(rlx_grad(loss, &x, 1, &out[4]), RLX_OK);
}

TEST(fft_dynamic_axis)
{
    rlx_tensor *x = rlx_input("x", RLX_F64, 2, (const int64_t[]){3, -1}), *outs[5];
    fft_dyn_graph(x, outs);
    rlx_program *p = rlx_compile(outs, 5);
    CHECK(p != NULL);
    if (!p)
        return;
    const int64_t lens[] = {2, 8, 6, 30, 0, 8, 14};
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
        int64_t n = lens[k];
        rlx_tensor *xv = trand(RLX_F64, 2, (const int64_t[]){3, n}, -1, 1), *got[5] = {0}, *want[5];
        CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got), RLX_OK);
        fft_dyn_graph(xv, want);
        for (int o = 0; o < 5; o++) {
            CHECK_EQ_INT(rlx_rank(got[o]), rlx_rank(want[o]));
            for (int d = 0; d < rlx_rank(want[o]); d++)
                CHECK_EQ_INT(rlx_dim(got[o], d), rlx_dim(want[o], d));
            EXPECT_SAME(got[o], want[o], 1e-12);
        }
    }
    rlx_tensor *got[5] = {0};
    CHECK_ERR(rlx_program_run(p, &(rlx_binding){"x", trand(RLX_F64, 2, (const int64_t[]){3, 5}, -1, 1)}, 1, got),
              RLX_E_SHAPE, "rlx_program_run");
    CHECK(got[0] == NULL);
    rlx_program_free(p);
}

TEST_MAIN(T(fft_known_values), T(fft_every_length_1_to_64), T(fft_large_lengths), T(fft_axis_0_and_middle),
          T(fft_strided_input), T(fft_round_trip), T(fft_four_step_lengths), T(fft_many_lines_any_layout),
          T(fft_large_primes), T(fft_same_bits_any_threads), T(fft_concurrent_realizations),
          T(fft_integer_input_and_empty), T(fft_errors),
          T(fft_allocation_failures), T(fft_narrow_floats_match_f32), T(fft_dynamic_axis))
