/*
 * test_complex.c — complex64: storage, casts, promotion, every op that
 * computes c64 on both backends against a double-precision reference
 * written here with C99 <complex.h>, the FFT against a naive DFT, the
 * refusals of every other op, and autodiff's refusal.
 */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ir/cmplx.h"
#include "rlx.h"

typedef double complex cd;

/* A c64 tensor of random values in [-2, 2)^2; ref gets the exact stored
 * (f32) values. */
static rlx_tensor *tc64(int rank, const int64_t *shape, cd *ref)
{
    int64_t n = test_numel(rank, shape);
    float *buf = malloc((size_t)(n ? n : 1) * 2 * sizeof *buf);
    for (int64_t i = 0; i < n; i++) {
        buf[2 * i] = (float)test_uniform(-2, 2);
        buf[2 * i + 1] = (float)test_uniform(-2, 2);
        if (ref)
            ref[i] = CMPLX(buf[2 * i], buf[2 * i + 1]);
    }
    rlx_tensor *t = rlx_from_data(RLX_C64, rank, shape, buf);
    free(buf);
    return t;
}

/* Checks t is c64 of shape and holds want within rtol * |want| + atol. */
static void expect_c(int line, const char *what, rlx_tensor *t, int rank, const int64_t *shape, const cd *want,
                     double rtol, double atol)
{
    if (!t) {
        test_fail(__FILE__, line, "%s: NULL (%s)", what, rlx_last_error());
        return;
    }
    if (rlx_dtype_of(t) != RLX_C64) {
        test_fail(__FILE__, line, "%s: dtype %s, want c64", what, rlx_dtype_name(rlx_dtype_of(t)));
        return;
    }
    int64_t got_shape[RLX_MAX_RANK];
    if (rlx_shape(t, got_shape, RLX_MAX_RANK) != rank ||
        (rank && memcmp(got_shape, shape, (size_t)rank * sizeof *shape) != 0)) {
        test_fail(__FILE__, line, "%s: shape differs from %s", what, test_dims(rank, shape));
        return;
    }
    int64_t n = test_numel(rank, shape);
    float *buf = malloc((size_t)(n ? n : 1) * 2 * sizeof *buf);
    if (rlx_read(t, buf, (size_t)n * 8) != RLX_OK) {
        test_fail(__FILE__, line, "%s: read failed: %s", what, rlx_last_error());
        free(buf);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        cd g = CMPLX(buf[2 * i], buf[2 * i + 1]);
        bool same_nan = (isnan(creal(g)) == isnan(creal(want[i]))) && (isnan(cimag(g)) == isnan(cimag(want[i])));
        double err = cabs(g - want[i]);
        if (!same_nan || (!isnan(err) && err > atol + rtol * cabs(want[i])) ||
            (isnan(err) && !isnan(creal(want[i])) && !isnan(cimag(want[i])))) {
            test_fail(__FILE__, line, "%s: element %lld is %g%+gj, want %g%+gj", what, (long long)i, creal(g),
                      cimag(g), creal(want[i]), cimag(want[i]));
            break;
        }
    }
    free(buf);
}
#define EXPECT_C(t, rank, shape, want, rtol) expect_c(__LINE__, #t, (t), (rank), (shape), (want), (rtol), 1e-6)

/* Flat index into a source of srank/sshape (broadcast to oshape) of flat
 * output index i. */
static int64_t bidx(int orank, const int64_t *oshape, int64_t i, int srank, const int64_t *sshape)
{
    int64_t idx[RLX_MAX_RANK], r = 0, stride = 1;
    for (int d = orank - 1; d >= 0; d--) {
        idx[d] = i % oshape[d];
        i /= oshape[d];
    }
    for (int d = srank - 1; d >= 0; d--) {
        int od = d + orank - srank;
        r += (sshape[d] == 1 ? 0 : idx[od]) * stride;
        stride *= sshape[d];
    }
    return r;
}

static cd cmul(cd a, cd b) { return a * b; }

/* ------------------------------------------------------------- storage */

TEST(storage_and_readback)
{
    const int64_t shape[2] = {2, 2};
    const float data[8] = {1, 2, -0.5f, 1.5f, 0, -1, 3, 0};
    rlx_tensor *t = rlx_from_data(RLX_C64, 2, shape, data);
    CHECK(t && rlx_dtype_of(t) == RLX_C64);
    CHECK(strcmp(rlx_dtype_name(RLX_C64), "c64") == 0);
    float back[8];
    CHECK(rlx_read(t, back, sizeof back) == RLX_OK && memcmp(back, data, sizeof back) == 0);
    char *s = rlx_to_string(t);
    const char *want_s = "tensor([[1.+2.j, -0.5+1.5j],\n        [0.-1.j, 3.+0.j]], shape=[2, 2], dtype=c64)";
    if (!s || strcmp(s, want_s) != 0)
        test_fail(__FILE__, __LINE__, "to_string gave %s", s ? s : "NULL");
    free(s);
    /* zero-copy: the blob is read in place */
    float blob[4] = {1, 2, 3, 4};
    const int64_t two[1] = {2};
    rlx_tensor *b = rlx_from_blob(RLX_C64, 1, two, blob, NULL, NULL);
    blob[3] = 9;
    cd want[2] = {CMPLX(1, 2), CMPLX(3, 9)};
    EXPECT_C(b, 1, two, want, 0);
    CHECK(rlx_storage_bytes(b) == 16);
    /* item and the converting reads refuse, naming rlx_read */
    double v;
    CHECK_ERR(rlx_item(rlx_reshape(rlx_slice(b, 0, 0, 1, 1), 0, NULL), &v), RLX_E_DTYPE, "rlx_item");
    float f[2];
    CHECK_ERR(rlx_read_f32(b, f, 2), RLX_E_DTYPE, "rlx_read_f32");
    CHECK_ERR(rlx_read_f64(b, (double *)blob, 2), RLX_E_DTYPE, "rlx_read_f64");
    /* an empty c64 tensor */
    const int64_t e[2] = {0, 3};
    rlx_tensor *z = rlx_from_data(RLX_C64, 2, e, NULL);
    EXPECT_C(z, 2, e, want, 0);
}

/* --------------------------------------------------- casts, promotion */

TEST(casts)
{
    const int64_t shape[1] = {5};
    double v[5] = {-2.5, 0, 1, 3.75, -0.0};
    EACH_BACKEND(b)
    {
        rlx_tensor *f = test_tensor(RLX_F32, 1, shape, v);
        cd want[5];
        for (int i = 0; i < 5; i++)
            want[i] = CMPLX(v[i], 0);
        EXPECT_C(rlx_cast(f, RLX_C64), 1, shape, want, 0);
        EXPECT_C(rlx_cast(rlx_cast(f, RLX_I32), RLX_C64), 1, shape,
                 ((cd[]){CMPLX(-2, 0), 0, CMPLX(1, 0), CMPLX(3, 0), 0}), 0);
        EXPECT_C(rlx_cast(rlx_gt_s(f, 0), RLX_C64), 1, shape, ((cd[]){0, 0, 1, 1, 0}), 0);
        /* c64 -> real: the real part (PyTorch), as that dtype's cast */
        const float d[10] = {1.5f, 2, -2.5f, 0, 0, 3, 0, 0, 7.9f, -1};
        rlx_tensor *z = rlx_from_data(RLX_C64, 1, shape, d);
        double re[5] = {1.5, -2.5, 0, 0, 7.9f}, ri[5] = {1, -2, 0, 0, 7}, rb[5] = {1, 1, 1, 0, 1};
        EXPECT(rlx_cast(z, RLX_F32), RLX_F32, 1, shape, re, 0);
        EXPECT(rlx_cast(z, RLX_F64), RLX_F64, 1, shape, re, 0);
        EXPECT(rlx_cast(z, RLX_I32), RLX_I32, 1, shape, ri, 0);
        EXPECT(rlx_cast(z, RLX_BOOL), RLX_BOOL, 1, shape, rb, 0); /* either part nonzero */
        EXPECT(rlx_real(z), RLX_F32, 1, shape, re, 0);
        double im[5] = {2, 0, 3, 0, -1};
        EXPECT(rlx_imag(z), RLX_F32, 1, shape, im, 0);
        /* a real x: real is x, imag zeros of its dtype, conj x */
        CHECK(rlx_real(f) == f && rlx_conj(f) == f);
        double zeros[5] = {0};
        EXPECT(rlx_imag(f), RLX_F32, 1, shape, zeros, 0);
        /* f64 -> c64 rounds each part to f32 */
        const double big[1] = {1.0 + 0x1p-30};
        const int64_t one[1] = {1};
        EXPECT_C(rlx_cast(rlx_from_data(RLX_F64, 1, one, big), RLX_C64), 1, one, ((cd[]){1}), 0);
        (void)b;
    }
}

TEST(promotion)
{
    const int64_t s[1] = {2};
    rlx_dtype others[] = {RLX_BOOL, RLX_I32, RLX_I64, RLX_F32, RLX_F64, RLX_F16, RLX_BF16, RLX_I8, RLX_U8, RLX_I16,
                          RLX_U32, RLX_C64, RLX_C128};
    rlx_tensor *z = tc64(1, s, NULL), *zz = rlx_cast(z, RLX_C128);
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        /* PyTorch's table: c64 with f64 or c128 widens to c128; c128 with anything is c128 */
        rlx_dtype w = others[i] == RLX_F64 || others[i] == RLX_C128 ? RLX_C128 : RLX_C64;
        rlx_tensor *o = rlx_zeros(others[i], 1, s);
        CHECK(rlx_dtype_of(rlx_add(z, o)) == w);
        CHECK(rlx_dtype_of(rlx_mul(o, z)) == w);
        CHECK(rlx_dtype_of(rlx_where(rlx_ones(RLX_BOOL, 1, s), o, z)) == w);
        CHECK(rlx_dtype_of(rlx_sub(zz, o)) == RLX_C128);
        CHECK(rlx_dtype_of(rlx_div(o, zz)) == RLX_C128);
    }
    /* a real scalar adds to the real part */
    cd r[2];
    rlx_tensor *x = tc64(1, s, r);
    cd want[2] = {r[0] + 1.5, r[1] + 1.5};
    EXPECT_C(rlx_add_s(x, 1.5), 1, s, want, 1e-7);
    cd want2[2] = {2.0 / r[0], 2.0 / r[1]};
    EXPECT_C(rlx_rdiv_s(x, 2), 1, s, want2, 1e-6);
}

/* ----------------------------------------------------------- compute */

/* Binary ops over broadcasting shape pairs, c64 with c64 and with a real
 * operand, both backends. */
TEST(binary)
{
    static const struct {
        int ra, rb;
        int64_t a[3], b[3];
    } cases[] = {
        {2, 2, {3, 4}, {3, 4}}, {2, 1, {3, 4}, {4}},     {3, 3, {2, 1, 3}, {1, 5, 1}},
        {0, 2, {0}, {2, 3}},    {2, 1, {0, 3}, {3}},      {1, 1, {1}, {7}},
    };
    rlx_tensor *(*fns[4])(rlx_tensor *, rlx_tensor *) = {rlx_add, rlx_sub, rlx_mul, rlx_div};
    const char *names[4] = {"add", "sub", "mul", "div"};
    EACH_BACKEND(be)
    {
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            int ra = cases[c].ra, rb = cases[c].rb, ro = ra > rb ? ra : rb;
            int64_t os[3];
            for (int d = 0; d < ro; d++) {
                int da = d - (ro - ra), db = d - (ro - rb);
                int64_t x = da >= 0 ? cases[c].a[da] : 1, y = db >= 0 ? cases[c].b[db] : 1;
                os[d] = x == 1 ? y : x;
            }
            int64_t na = test_numel(ra, cases[c].a), nb = test_numel(rb, cases[c].b), no = test_numel(ro, os);
            cd *ra_v = malloc((size_t)(na + 1) * sizeof *ra_v), *rb_v = malloc((size_t)(nb + 1) * sizeof *rb_v),
               *want = malloc((size_t)(no + 1) * sizeof *want);
            rlx_tensor *a = tc64(ra, cases[c].a, ra_v), *b = tc64(rb, cases[c].b, rb_v);
            /* a real f32 operand: its values are the real parts of rb_v */
            double *bre = malloc((size_t)(nb + 1) * sizeof *bre);
            for (int64_t i = 0; i < nb; i++)
                bre[i] = creal(rb_v[i]);
            rlx_tensor *bf = test_tensor(RLX_F32, rb, cases[c].b, bre);
            for (int f = 0; f < 4; f++) {
                for (int real_b = 0; real_b < 2; real_b++) {
                    for (int64_t i = 0; i < no; i++) {
                        cd x = ra_v[bidx(ro, os, i, ra, cases[c].a)];
                        cd y = real_b ? CMPLX(bre[bidx(ro, os, i, rb, cases[c].b)], 0)
                                      : rb_v[bidx(ro, os, i, rb, cases[c].b)];
                        want[i] = f == 0 ? x + y : f == 1 ? x - y : f == 2 ? cmul(x, y) : x / y;
                    }
                    rlx_tensor *r = fns[f](a, real_b ? bf : b);
                    expect_c(__LINE__, names[f], r, ro, os, want, 1e-6, 1e-6);
                }
            }
            free(ra_v);
            free(rb_v);
            free(want);
            free(bre);
        }
        (void)be;
    }
}

TEST(unary_and_views)
{
    const int64_t shape[2] = {4, 6};
    cd v[24];
    EACH_BACKEND(be)
    {
        rlx_tensor *x = tc64(2, shape, v);
        /* a non-contiguous view: x^T [6, 4] then every other row [3, 4] */
        rlx_tensor *xt = rlx_slice(rlx_transpose(x, 2, (const int[]){1, 0}), 0, 0, 6, 2);
        const int64_t vs[2] = {3, 4};
        cd view[12], want[12];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                view[i * 4 + j] = v[j * 6 + 2 * i];
        EXPECT_C(xt, 2, vs, view, 0);
        EXPECT_C(rlx_contiguous(xt), 2, vs, view, 0);
        for (int i = 0; i < 12; i++)
            want[i] = -view[i];
        EXPECT_C(rlx_neg(xt), 2, vs, want, 0);
        for (int i = 0; i < 12; i++)
            want[i] = conj(view[i]);
        EXPECT_C(rlx_conj(xt), 2, vs, want, 0);
        for (int i = 0; i < 12; i++)
            want[i] = cexp(view[i]);
        EXPECT_C(rlx_exp(xt), 2, vs, want, 1e-6);
        double ab[12], re[12], im[12];
        for (int i = 0; i < 12; i++) {
            ab[i] = cabs(view[i]);
            re[i] = creal(view[i]);
            im[i] = cimag(view[i]);
        }
        EXPECT(rlx_abs(xt), RLX_F32, 2, vs, ab, 1e-6);
        EXPECT(rlx_real(xt), RLX_F32, 2, vs, re, 0);
        EXPECT(rlx_imag(xt), RLX_F32, 2, vs, im, 0);
        /* rank 0 */
        cd s;
        rlx_tensor *z = tc64(0, NULL, &s);
        cd ws = cexp(-s);
        EXPECT_C(rlx_exp(rlx_neg(z)), 0, NULL, &ws, 1e-6);
        /* rlx_complex: real parts of any real dtype, broadcast */
        double r4[4] = {1, -2, 3, 0.5}, i1[1] = {-3};
        const int64_t s4[1] = {4}, s1[1] = {1};
        rlx_tensor *c =
            rlx_complex(test_tensor(RLX_F32, 1, s4, r4), rlx_cast(test_tensor(RLX_F32, 1, s1, i1), RLX_I32));
        cd wc[4] = {CMPLX(1, -3), CMPLX(-2, -3), CMPLX(3, -3), CMPLX(0.5, -3)};
        EXPECT_C(c, 1, s4, wc, 0);
        (void)be;
    }
}

TEST(compare_and_select)
{
    const int64_t s[1] = {6};
    const float a[12] = {1, 2, 1, 2, NAN, 0, 0, -0.0f, 3, 4, 5, 6};
    const float b[12] = {1, 2, 1, -2, NAN, 0, -0.0f, 0, 3, 4.5f, 5, 6};
    EACH_BACKEND(be)
    {
        rlx_tensor *x = rlx_from_data(RLX_C64, 1, s, a), *y = rlx_from_data(RLX_C64, 1, s, b);
        double eq[6] = {1, 0, 0, 1, 0, 1}, ne[6] = {0, 1, 1, 0, 1, 0};
        EXPECT(rlx_eq(x, y), RLX_BOOL, 1, s, eq, 0);
        EXPECT(rlx_ne(x, y), RLX_BOOL, 1, s, ne, 0);
        rlx_tensor *w = rlx_where(rlx_eq(x, y), x, rlx_neg(y));
        cd want[6];
        for (int i = 0; i < 6; i++)
            want[i] = eq[i] ? CMPLX(a[2 * i], a[2 * i + 1]) : -CMPLX(b[2 * i], b[2 * i + 1]);
        EXPECT_C(w, 1, s, want, 0);
        /* masked_fill writes a real value */
        cd mf[6];
        for (int i = 0; i < 6; i++)
            mf[i] = eq[i] ? 7 : CMPLX(a[2 * i], a[2 * i + 1]);
        EXPECT_C(rlx_masked_fill(x, rlx_eq(x, y), 7), 1, s, mf, 0);
        /* a real scalar compares with the real part, imaginary 0 */
        const float c[4] = {2, 0, 2, 1};
        const int64_t s2[1] = {2};
        double eq2[2] = {1, 0};
        EXPECT(rlx_eq_s(rlx_from_data(RLX_C64, 1, s2, c), 2), RLX_BOOL, 1, s2, eq2, 0);
        (void)be;
    }
}

TEST(sum_and_mean)
{
    const int64_t shape[3] = {3, 4, 5};
    cd v[60];
    EACH_BACKEND(be)
    {
        rlx_tensor *x = tc64(3, shape, v);
        /* over axis 1, keepdim, and over (0, 2) */
        const int64_t s1[3] = {3, 1, 5}, s02[1] = {4};
        cd w1[15] = {0}, w02[4] = {0}, all = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 5; k++) {
                    cd e = v[(i * 4 + j) * 5 + k];
                    w1[i * 5 + k] += e;
                    w02[j] += e;
                    all += e;
                }
        EXPECT_C(rlx_sum(x, (const int[]){1}, 1, true), 3, s1, w1, 1e-6);
        EXPECT_C(rlx_sum(x, (const int[]){0, 2}, 2, false), 1, s02, w02, 1e-6);
        cd m = all / 60;
        EXPECT_C(rlx_mean_all(x), 0, NULL, &m, 1e-6);
        for (int j = 0; j < 4; j++)
            w02[j] /= 15;
        EXPECT_C(rlx_mean(x, (const int[]){0, 2}, 2, false), 1, s02, w02, 1e-6);
        /* a non-contiguous view and an empty axis */
        rlx_tensor *xs = rlx_slice(x, 2, 1, 5, 3); /* k = 1, 4 */
        const int64_t s3[1] = {3};
        cd w3[3] = {0};
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                w3[i] += v[(i * 4 + j) * 5 + 1] + v[(i * 4 + j) * 5 + 4];
        EXPECT_C(rlx_sum(xs, (const int[]){1, 2}, 2, false), 1, s3, w3, 1e-6);
        const int64_t e[2] = {0, 3}, s0[1] = {3};
        cd zeros[3] = {0};
        EXPECT_C(rlx_sum(rlx_zeros(RLX_C64, 2, e), (const int[]){0}, 1, false), 1, s0, zeros, 0);
        /* a constant folds to what the reference sums: (2.5 + 0i) * 12 */
        const int64_t s34[2] = {3, 4};
        cd thirty = 30;
        EXPECT_C(rlx_sum_all(rlx_full(RLX_C64, 2, s34, 2.5)), 0, NULL, &thirty, 0);
        (void)be;
    }
}

static void ref_matmul(const cd *a, const cd *b, cd *c, int64_t m, int64_t k, int64_t n)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            cd s = 0;
            for (int64_t p = 0; p < k; p++)
                s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s;
        }
}

TEST(matmul)
{
    EACH_BACKEND(be)
    {
        /* plain [3,4] @ [4,5] */
        const int64_t sa[2] = {3, 4}, sb[2] = {4, 5}, sc[2] = {3, 5};
        cd a[12], b[20], c[15];
        rlx_tensor *ta = tc64(2, sa, a), *tb = tc64(2, sb, b);
        ref_matmul(a, b, c, 3, 4, 5);
        EXPECT_C(rlx_matmul(ta, tb), 2, sc, c, 1e-5);
        /* b given transposed (a strided view), a real operand promoted */
        const int64_t sbt[2] = {5, 4};
        cd bt[20], b2[20];
        rlx_tensor *tbt = tc64(2, sbt, bt);
        for (int p = 0; p < 4; p++)
            for (int j = 0; j < 5; j++)
                b2[p * 5 + j] = bt[j * 4 + p];
        ref_matmul(a, b2, c, 3, 4, 5);
        EXPECT_C(rlx_matmul(ta, rlx_transpose(tbt, 2, (const int[]){1, 0})), 2, sc, c, 1e-5);
        double ar[12];
        cd ac[12];
        for (int i = 0; i < 12; i++) {
            ar[i] = creal(a[i]);
            ac[i] = creal(a[i]);
        }
        ref_matmul(ac, b, c, 3, 4, 5);
        EXPECT_C(rlx_matmul(test_tensor(RLX_F32, 2, sa, ar), tb), 2, sc, c, 1e-5);
        /* batches broadcast: [2,1,3,4] @ [5,4,2] -> [2,5,3,2] */
        const int64_t s4[4] = {2, 1, 3, 4}, s3[3] = {5, 4, 2}, so[4] = {2, 5, 3, 2};
        cd A[24], B[40], C[60];
        rlx_tensor *tA = tc64(4, s4, A), *tB = tc64(3, s3, B);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 5; j++)
                ref_matmul(A + i * 12, B + j * 8, C + (i * 5 + j) * 6, 3, 4, 2);
        EXPECT_C(rlx_matmul(tA, tB), 4, so, C, 1e-5);
        /* vectors, k = 0 */
        const int64_t s1[1] = {4};
        cd v1[4], dot = 0;
        rlx_tensor *tv = tc64(1, s1, v1);
        for (int i = 0; i < 4; i++)
            dot += v1[i] * v1[i];
        EXPECT_C(rlx_matmul(tv, tv), 0, NULL, &dot, 1e-5);
        const int64_t e0[2] = {2, 0}, e1[2] = {0, 3}, e2[2] = {2, 3};
        cd zeros[6] = {0};
        EXPECT_C(rlx_matmul(rlx_zeros(RLX_C64, 2, e0), rlx_zeros(RLX_C64, 2, e1)), 2, e2, zeros, 0);
        (void)be;
    }
}

TEST(movement)
{
    const int64_t shape[2] = {2, 3};
    cd v[6];
    EACH_BACKEND(be)
    {
        rlx_tensor *x = tc64(2, shape, v);
        const int64_t r[2] = {3, 2};
        EXPECT_C(rlx_reshape(x, 2, r), 2, r, v, 0);
        cd t[6] = {v[0], v[3], v[1], v[4], v[2], v[5]};
        EXPECT_C(rlx_transpose(x, 2, (const int[]){1, 0}), 2, r, t, 0);
        const int64_t e[3] = {2, 2, 3};
        cd ex[12];
        for (int i = 0; i < 12; i++)
            ex[i] = v[i % 6];
        EXPECT_C(rlx_broadcast_to(x, 3, e), 3, e, ex, 0);
        rlx_tensor *parts[2] = {x, rlx_conj(x)};
        const int64_t cs[2] = {2, 6};
        cd cat[12];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                cat[i * 6 + j] = v[i * 3 + j];
                cat[i * 6 + 3 + j] = conj(v[i * 3 + j]);
            }
        EXPECT_C(rlx_cat(parts, 2, 1), 2, cs, cat, 0);
        const int64_t ps[2] = {2, 5};
        cd pad[10];
        for (int i = 0; i < 2; i++) {
            pad[i * 5] = 7;
            pad[i * 5 + 4] = 7;
            for (int j = 0; j < 3; j++)
                pad[i * 5 + 1 + j] = v[i * 3 + j];
        }
        EXPECT_C(rlx_pad(x, 1, 1, 1, 7), 2, ps, pad, 0);
        const int64_t is[1] = {3};
        const int64_t idx[3] = {2, 0, 2};
        const int64_t ss[2] = {2, 3};
        cd sel[6];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                sel[i * 3 + j] = v[i * 3 + idx[j]];
        EXPECT_C(rlx_index_select(x, 1, rlx_from_data(RLX_I64, 1, is, idx)), 2, ss, sel, 0);
        (void)be;
    }
}

/* ---------------------------------------------------------------- FFT */

static void dft(const cd *x, cd *y, int64_t n, bool inverse)
{
    for (int64_t k = 0; k < n; k++) {
        cd s = 0;
        for (int64_t j = 0; j < n; j++)
            s += x[j] * cexp(CMPLX(0, (inverse ? 2 : -2) * M_PI * (double)(j * k % n) / (double)n));
        y[k] = s;
    }
}

TEST(fft_c)
{
    const int64_t lens[] = {1, 2, 5, 8, 12, 17};
    EACH_BACKEND(be)
    {
        for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
            int64_t n = lens[l];
            const int64_t shape[2] = {3, n};
            cd x[3 * 17], want[3 * 17], back[3 * 17];
            rlx_tensor *t = tc64(2, shape, x);
            for (int r = 0; r < 3; r++)
                dft(x + r * n, want + r * n, n, false);
            rlx_tensor *f = rlx_fft_c(t, -1, false);
            EXPECT_C(f, 2, shape, want, 1e-5);
            for (int i = 0; i < 3 * n; i++)
                back[i] = x[i] * (double)n;
            EXPECT_C(rlx_fft_c(f, 1, true), 2, shape, back, 1e-5);
        }
        /* axis 0 of a transposed view, and real input */
        const int64_t s[2] = {4, 3}, st[2] = {3, 4};
        cd x[12], xt[12], want[12];
        rlx_tensor *t = tc64(2, s, x);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                xt[i * 4 + j] = x[j * 3 + i];
        cd col[4], out[4];
        for (int j = 0; j < 4; j++) { /* transform along axis 0 of xt [3, 4] */
            for (int i = 0; i < 3; i++)
                col[i] = xt[i * 4 + j];
            dft(col, out, 3, false);
            for (int i = 0; i < 3; i++)
                want[i * 4 + j] = out[i];
        }
        EXPECT_C(rlx_fft_c(rlx_transpose(t, 2, (const int[]){1, 0}), 0, false), 2, st, want, 1e-5);
        double re[4] = {1, 2, 3, 4};
        const int64_t s4[1] = {4};
        cd xr[4] = {1, 2, 3, 4}, wr[4];
        dft(xr, wr, 4, false);
        EXPECT_C(rlx_fft_c(rlx_cast(test_tensor(RLX_F32, 1, s4, re), RLX_I32), 0, false), 1, s4, wr, 1e-6);
        (void)be;
    }
}

/* ------------------------------------------------------------- refusals */

TEST(refusals)
{
    const int64_t s[2] = {2, 3};
    rlx_tensor *z = tc64(2, s, NULL), *f = rlx_ones(RLX_F32, 2, s);
#define REFUSE(call, fn) CHECK_NULL_ERR(call, RLX_E_DTYPE, fn)
    /* check the message names c64 too */
    rlx_tensor *r = rlx_sqrt(z);
    CHECK(!r && rlx_last_status() == RLX_E_DTYPE && strstr(rlx_last_error(), "rlx_sqrt") &&
          strstr(rlx_last_error(), "c64"));
    rlx_clear_error();
    REFUSE(rlx_log(z), "rlx_log");
    REFUSE(rlx_sin(z), "rlx_sin");
    REFUSE(rlx_tanh(z), "rlx_tanh");
    REFUSE(rlx_sign(z), "rlx_sign");
    REFUSE(rlx_floor(z), "rlx_floor");
    REFUSE(rlx_pow(z, z), "rlx_pow");
    REFUSE(rlx_maximum(z, f), "rlx_maximum");
    REFUSE(rlx_lt(z, f), "rlx_lt");
    REFUSE(rlx_atan2(z, f), "rlx_atan2");
    REFUSE(rlx_rem(z, f), "rlx_rem");
    REFUSE(rlx_max(z, (const int[]){0}, 1, false), "rlx_max");
    REFUSE(rlx_prod(z, (const int[]){0}, 1, false), "rlx_prod");
    REFUSE(rlx_argmax(z, 0, false), "rlx_argmax");
    REFUSE(rlx_cumsum(z, 0, false), "rlx_cumsum");
    rlx_tensor *z0 = tc64(0, NULL, NULL); /* rank-0 shortcuts refuse too */
    REFUSE(rlx_cumsum(z0, 0, false), "rlx_cumsum");
    REFUSE(rlx_logsumexp(z0, 0, false), "rlx_logsumexp");
    REFUSE(rlx_max(z0, NULL, 0, false), "rlx_max");
    REFUSE(rlx_argmax(z0, 0, false), "rlx_argmax");
    REFUSE(rlx_sign(z0), "rlx_sign");
    REFUSE(rlx_round(z0), "rlx_round");
    REFUSE(rlx_relu(z0), "rlx_relu");
    REFUSE(rlx_sort(z0, 0, false), "rlx_sort");
    REFUSE(rlx_norm(z0, NULL, 0, false), "rlx_norm");
    REFUSE(rlx_argsort(z0, 0, false), "rlx_argsort");
    REFUSE(rlx_min(tc64(1, (const int64_t[]){0}, NULL), NULL, 0, false), "rlx_min");
    REFUSE(rlx_sort(tc64(1, (const int64_t[]){0}, NULL), 0, false), "rlx_sort");
    rlx_tensor *tv = NULL, *ti = NULL;
    CHECK_ERR(rlx_topk(z0, 1, 0, true, &tv, &ti), RLX_E_DTYPE, "rlx_topk");
    REFUSE(rlx_softmax(z, 1), "rlx_softmax");
    REFUSE(rlx_relu(z), "rlx_relu");
    REFUSE(rlx_gelu(z), "rlx_gelu");
    REFUSE(rlx_fft(z), "rlx_fft");
    REFUSE(rlx_ifft(z), "rlx_ifft");
    REFUSE(rlx_rand(RLX_C64, 2, s, 1), "rlx_rand");
    REFUSE(rlx_arange(RLX_C64, 0, 4, 1), "rlx_arange");
    REFUSE(rlx_complex(z, f), "rlx_complex");
    REFUSE(rlx_complex(f, z), "rlx_complex");
    const int64_t sq[2] = {3, 3};
    REFUSE(rlx_solve(tc64(2, sq, NULL), tc64(2, sq, NULL)), "rlx_solve");
    REFUSE(rlx_var(z, (const int[]){0}, 1, false), "rlx_var");
    REFUSE(rlx_layer_norm(z, NULL, NULL, 1e-5), "rlx_layer_norm");
    REFUSE(rlx_logical_not(z), "rlx_logical_not");
    REFUSE(rlx_softsign(z), "rlx_softsign");
    REFUSE(rlx_rope(rlx_reshape(z, 3, (const int64_t[]){1, 2, 3}), f, f, 2), "rlx_rope");
    REFUSE(rlx_dropout(z, 0.5, 1), "rlx_dropout");
    REFUSE(rlx_spline_activation(z, rlx_ones(RLX_F32, 2, (const int64_t[]){3, 2}), 2, -1, 1), "rlx_spline_activation");
    REFUSE(rlx_max_pool2d(rlx_reshape(z, 4, (const int64_t[]){1, 1, 2, 3}), (const int[]){1, 1}, NULL, NULL),
           "rlx_max_pool2d");
    CHECK_NULL_ERR(rlx_fft_c(rlx_ones(RLX_BOOL, 2, s), 0, false), RLX_E_DTYPE, "rlx_fft_c");
    CHECK_NULL_ERR(rlx_fft_c(tc64(0, NULL, NULL), 0, false), RLX_E_SHAPE, "rlx_fft_c");
    CHECK_NULL_ERR(rlx_fft_c(z, 2, false), RLX_E_ARG, "rlx_fft_c");
    CHECK_NULL_ERR(rlx_fft_c(NULL, 0, false), RLX_E_ARG, "rlx_fft_c");
    CHECK_NULL_ERR(rlx_complex(NULL, f), RLX_E_ARG, "rlx_complex");
    CHECK_NULL_ERR(rlx_complex(f, rlx_ones(RLX_F32, 1, (const int64_t[]){4})), RLX_E_SHAPE, "rlx_complex");
    CHECK_NULL_ERR(rlx_real(NULL), RLX_E_ARG, "rlx_real");
    CHECK_NULL_ERR(rlx_imag(NULL), RLX_E_ARG, "rlx_imag");
    CHECK_NULL_ERR(rlx_conj(NULL), RLX_E_ARG, "rlx_conj");
#undef REFUSE
}

/* ---------------------------------------------------------- complex128 */

/* A c128 tensor of random values in [-2, 2)^2; ref gets them. */
static rlx_tensor *tc128(int rank, const int64_t *shape, cd *ref)
{
    int64_t n = test_numel(rank, shape);
    double *buf = malloc((size_t)(n ? n : 1) * 2 * sizeof *buf);
    for (int64_t i = 0; i < n; i++) {
        buf[2 * i] = test_uniform(-2, 2);
        buf[2 * i + 1] = test_uniform(-2, 2);
        if (ref)
            ref[i] = CMPLX(buf[2 * i], buf[2 * i + 1]);
    }
    rlx_tensor *t = rlx_from_data(RLX_C128, rank, shape, buf);
    free(buf);
    return t;
}

/* Checks t is c128 of shape holding want within rtol * |want| + 1e-14. */
static void expect_c128(int line, const char *what, rlx_tensor *t, int rank, const int64_t *shape, const cd *want,
                        double rtol)
{
    if (!t || rlx_dtype_of(t) != RLX_C128) {
        test_fail(__FILE__, line, "%s: %s", what, t ? rlx_dtype_name(rlx_dtype_of(t)) : rlx_last_error());
        return;
    }
    int64_t got_shape[RLX_MAX_RANK];
    if (rlx_shape(t, got_shape, RLX_MAX_RANK) != rank ||
        (rank && memcmp(got_shape, shape, (size_t)rank * sizeof *shape) != 0)) {
        test_fail(__FILE__, line, "%s: shape differs from %s", what, test_dims(rank, shape));
        return;
    }
    int64_t n = test_numel(rank, shape);
    double *buf = malloc((size_t)(n ? n : 1) * 2 * sizeof *buf);
    if (rlx_read(t, buf, (size_t)n * 16) != RLX_OK)
        test_fail(__FILE__, line, "%s: read failed: %s", what, rlx_last_error());
    else
        for (int64_t i = 0; i < n; i++) {
            cd g = CMPLX(buf[2 * i], buf[2 * i + 1]);
            if (!(cabs(g - want[i]) <= 1e-14 + rtol * cabs(want[i]))) {
                test_fail(__FILE__, line, "%s: element %lld is %.17g%+.17gj, want %.17g%+.17gj", what, (long long)i,
                          creal(g), cimag(g), creal(want[i]), cimag(want[i]));
                break;
            }
        }
    free(buf);
}
#define EXPECT_C128(t, rank, shape, want, rtol) expect_c128(__LINE__, #t, (t), (rank), (shape), (want), (rtol))

TEST(c128_storage_and_casts)
{
    const int64_t shape[2] = {2, 2};
    const double data[8] = {1, 2, -0.5, 1.5, 0, -1, 0.1, 0};
    rlx_tensor *t = rlx_from_data(RLX_C128, 2, shape, data);
    CHECK(t && rlx_dtype_of(t) == RLX_C128 && strcmp(rlx_dtype_name(RLX_C128), "c128") == 0);
    double back[8];
    CHECK(rlx_read(t, back, sizeof back) == RLX_OK && memcmp(back, data, sizeof back) == 0);
    char *s = rlx_to_string(t);
    const char *want_s = "tensor([[1.+2.j, -0.5+1.5j],\n        [0.-1.j, 0.1+0.j]], shape=[2, 2], dtype=c128)";
    if (!s || strcmp(s, want_s) != 0)
        test_fail(__FILE__, __LINE__, "to_string gave %s", s ? s : "NULL");
    free(s);
    double blob[4] = {1, 2, 3, 4};
    const int64_t two[1] = {2};
    rlx_tensor *b = rlx_from_blob(RLX_C128, 1, two, blob, NULL, NULL);
    blob[3] = 0.1;
    EXPECT_C128(b, 1, two, ((cd[]){CMPLX(1, 2), CMPLX(3, 0.1)}), 0);
    CHECK(rlx_storage_bytes(b) == 32);
    double v;
    CHECK_ERR(rlx_item(rlx_reshape(rlx_slice(b, 0, 0, 1, 1), 0, NULL), &v), RLX_E_DTYPE, "rlx_item");
    CHECK_ERR(rlx_read_f64(b, blob, 2), RLX_E_DTYPE, "rlx_read_f64");
    const int64_t e[2] = {0, 3};
    EXPECT_C128(rlx_from_data(RLX_C128, 2, e, NULL), 2, e, NULL, 0);
    EACH_BACKEND(be)
    {
        /* c64 <-> c128 converts each part; f64 -> c128 is exact; c128 -> real keeps the real part */
        cd w[4] = {CMPLX(1, 2), CMPLX(-0.5, 1.5), CMPLX(0, -1), CMPLX(0.1, 0)};
        rlx_tensor *c64 = rlx_cast(t, RLX_C64);
        float f[8];
        CHECK(rlx_read(c64, f, sizeof f) == RLX_OK && f[6] == 0.1f && f[2] == -0.5f);
        cd wf[4] = {CMPLX(1, 2), CMPLX(-0.5, 1.5), CMPLX(0, -1), CMPLX((double)0.1f, 0)};
        EXPECT_C128(rlx_cast(c64, RLX_C128), 2, shape, wf, 0);
        EXPECT_C128(rlx_cast(rlx_real(t), RLX_C128), 2, shape, ((cd[]){1, -0.5, 0, 0.1}), 0);
        EXPECT(rlx_cast(t, RLX_F64), RLX_F64, 2, shape, ((const double[]){1, -0.5, 0, 0.1}), 0);
        EXPECT(rlx_cast(t, RLX_BOOL), RLX_BOOL, 2, shape, ((const double[]){1, 1, 1, 1}), 0);
        EXPECT(rlx_cast(t, RLX_I32), RLX_I32, 2, shape, ((const double[]){1, 0, 0, 0}), 0);
        EXPECT(rlx_real(t), RLX_F64, 2, shape, ((const double[]){1, -0.5, 0, 0.1}), 0);
        EXPECT(rlx_imag(t), RLX_F64, 2, shape, ((const double[]){2, 1.5, -1, 0}), 0);
        EXPECT_C128(rlx_complex(rlx_real(t), rlx_imag(t)), 2, shape, w, 0);
        EXPECT_C128(rlx_full(RLX_C128, 2, shape, 0.1), 2, shape, ((cd[]){0.1, 0.1, 0.1, 0.1}), 0);
        (void)be;
    }
}

TEST(c128_ops)
{
    static const struct {
        int ra, rb;
        int64_t a[3], b[3], o[3];
    } cases[] = {
        {2, 2, {2, 3}, {2, 3}, {2, 3}},
        {2, 1, {2, 3}, {3}, {2, 3}},
        {3, 2, {2, 1, 4}, {3, 1}, {2, 3, 4}},
        {0, 2, {0}, {2, 2}, {2, 2}},
        {2, 2, {0, 3}, {1, 3}, {0, 3}},
    };
    EACH_BACKEND(be)
    {
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            int ra = cases[c].ra, rb = cases[c].rb, ro = ra > rb ? ra : rb;
            const int64_t *os = cases[c].o;
            int64_t no = test_numel(ro, os);
            cd av[24], bv[24], w[4][24] = {{0}};
            rlx_tensor *a = tc128(ra, cases[c].a, av), *b = tc128(rb, cases[c].b, bv);
            for (int64_t i = 0; i < no; i++) {
                cd x = av[bidx(ro, os, i, ra, cases[c].a)], y = bv[bidx(ro, os, i, rb, cases[c].b)];
                w[0][i] = x + y;
                w[1][i] = x - y;
                w[2][i] = x * y;
                w[3][i] = x / y;
            }
            EXPECT_C128(rlx_add(a, b), ro, os, w[0], 0);
            EXPECT_C128(rlx_sub(a, b), ro, os, w[1], 0);
            EXPECT_C128(rlx_mul(a, b), ro, os, w[2], 1e-15);
            EXPECT_C128(rlx_div(a, b), ro, os, w[3], 1e-15);
            /* mixed with c64 and f64: c128 */
            for (int64_t i = 0; i < no; i++) /* f64 with c128: c128 */
                w[0][i] = creal(av[bidx(ro, os, i, ra, cases[c].a)]) * bv[bidx(ro, os, i, rb, cases[c].b)];
            EXPECT_C128(rlx_mul(rlx_real(a), b), ro, os, w[0], 1e-15);
        }
        /* unary on a transposed view, against C99's complex double */
        const int64_t s[2] = {2, 3}, st[2] = {3, 2};
        cd v[6], t[6], wn[6], wc[6], we[6];
        double wa[6], wr[6], wi[6];
        rlx_tensor *x = tc128(2, s, v), *xt = rlx_transpose(x, 2, (const int[]){1, 0});
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) {
                cd z = v[j * 3 + i];
                int k = i * 2 + j;
                t[k] = z;
                wn[k] = -z;
                wc[k] = conj(z);
                we[k] = cexp(z);
                wa[k] = cabs(z);
                wr[k] = creal(z);
                wi[k] = cimag(z);
            }
        EXPECT_C128(rlx_contiguous(xt), 2, st, t, 0);
        EXPECT_C128(rlx_neg(xt), 2, st, wn, 0);
        EXPECT_C128(rlx_conj(xt), 2, st, wc, 0);
        EXPECT_C128(rlx_exp(xt), 2, st, we, 1e-15);
        EXPECT(rlx_abs(xt), RLX_F64, 2, st, wa, 1e-15);
        EXPECT(rlx_real(xt), RLX_F64, 2, st, wr, 0);
        EXPECT(rlx_imag(xt), RLX_F64, 2, st, wi, 0);
        /* eq/ne, where, sum/mean over axes, rank 0 */
        EXPECT(rlx_eq(x, rlx_conj(rlx_conj(x))), RLX_BOOL, 2, s, ((const double[]){1, 1, 1, 1, 1, 1}), 0);
        EXPECT(rlx_ne(x, rlx_conj(x)), RLX_BOOL, 2, s, ((const double[]){1, 1, 1, 1, 1, 1}), 0);
        cd ws[3], wm[2], wall = 0;
        for (int j = 0; j < 3; j++)
            ws[j] = v[j] + v[3 + j];
        for (int i = 0; i < 2; i++)
            wm[i] = (v[i * 3] + v[i * 3 + 1] + v[i * 3 + 2]) / 3;
        for (int i = 0; i < 6; i++)
            wall += v[i];
        EXPECT_C128(rlx_sum(x, (const int[]){0}, 1, false), 1, s + 1, ws, 1e-15);
        EXPECT_C128(rlx_mean(x, (const int[]){1}, 1, false), 1, s, wm, 1e-15);
        EXPECT_C128(rlx_sum_all(x), 0, NULL, &wall, 1e-15);
        cd ww[6];
        for (int i = 0; i < 6; i++)
            ww[i] = i % 2 ? v[i] : conj(v[i]);
        rlx_tensor *mask = rlx_from_data(RLX_BOOL, 2, s, (const bool[]){false, true, false, true, false, true});
        EXPECT_C128(rlx_where(mask, x, rlx_conj(x)), 2, s, ww, 0);
        cd z0, w0;
        rlx_tensor *r0 = tc128(0, NULL, &z0);
        w0 = cexp(z0 * z0);
        EXPECT_C128(rlx_exp(rlx_mul(r0, r0)), 0, NULL, &w0, 1e-14);
        const int64_t e[2] = {0, 3};
        EXPECT_C128(rlx_sum(rlx_zeros(RLX_C128, 2, e), (const int[]){0}, 1, false), 1, e + 1, ((cd[]){0, 0, 0}), 0);
        (void)be;
    }
}

TEST(c128_matmul_and_fft)
{
    EACH_BACKEND(be)
    {
        /* batched, broadcast, a transposed operand: zgemm against a naive sum */
        const int64_t sa[3] = {2, 3, 4}, sb[2] = {5, 4}, so[3] = {2, 3, 5};
        cd a[24], b[20], w[30];
        rlx_tensor *ta = tc128(3, sa, a), *tb = tc128(2, sb, b);
        for (int p = 0; p < 2; p++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 5; j++) {
                    cd acc = 0;
                    for (int k = 0; k < 4; k++)
                        acc += a[p * 12 + i * 4 + k] * b[j * 4 + k];
                    w[p * 15 + i * 5 + j] = acc;
                }
        EXPECT_C128(rlx_matmul(ta, rlx_transpose(tb, 2, (const int[]){1, 0})), 3, so, w, 1e-14);
        const int64_t e0[2] = {2, 0}, e1[2] = {0, 3}, e2[2] = {2, 3};
        EXPECT_C128(rlx_matmul(rlx_zeros(RLX_C128, 2, e0), rlx_zeros(RLX_C128, 2, e1)), 2, e2,
                    ((cd[]){0, 0, 0, 0, 0, 0}), 0);
        /* fft_c in double against a naive DFT; an f64 input gives c128 */
        const int64_t lens[] = {1, 5, 8, 12};
        for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
            int64_t n = lens[l];
            const int64_t shape[2] = {2, n};
            cd x[24], want[24], back[24];
            rlx_tensor *t = tc128(2, shape, x);
            for (int r = 0; r < 2; r++)
                dft(x + r * n, want + r * n, n, false);
            rlx_tensor *f = rlx_fft_c(t, -1, false);
            EXPECT_C128(f, 2, shape, want, 1e-12);
            for (int i = 0; i < 2 * n; i++)
                back[i] = x[i] * (double)n;
            EXPECT_C128(rlx_fft_c(f, 1, true), 2, shape, back, 1e-12);
        }
        double re[4] = {0.1, 2, 3, 4};
        const int64_t s4[1] = {4};
        cd xr[4] = {0.1, 2, 3, 4}, wr[4];
        dft(xr, wr, 4, false);
        EXPECT_C128(rlx_fft_c(test_tensor(RLX_F64, 1, s4, re), 0, false), 1, s4, wr, 1e-14);
        (void)be;
    }
}

TEST(c128_files_and_refusals)
{
    const int64_t s[2] = {2, 3};
    cd v[6];
    rlx_tensor *x = tc128(2, s, v);
    char path[] = "/tmp/rlx_c128_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        close(fd);
        CHECK(rlx_save_npy(path, rlx_transpose(x, 2, (const int[]){1, 0})) == RLX_OK);
        rlx_tensor *back = rlx_load_npy(path);
        cd t[6];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++)
                t[i * 2 + j] = v[j * 3 + i];
        EXPECT_C128(back, 2, ((const int64_t[]){3, 2}), t, 0);
        const char *names[2] = {"z", "f"};
        rlx_tensor *ts[2] = {x, rlx_ones(RLX_F32, 1, s)};
        CHECK(rlx_save_safetensors(path, 2, names, ts) == RLX_OK);
        rlx_checkpoint *ck = rlx_load_safetensors(path);
        CHECK(ck != NULL);
        if (ck)
            EXPECT_C128(rlx_checkpoint_get(ck, "z"), 2, s, v, 0);
        rlx_checkpoint_free(ck);
        unlink(path);
    }
    /* refusals name the function and c128 */
    rlx_tensor *r = rlx_sqrt(x);
    CHECK(!r && rlx_last_status() == RLX_E_DTYPE && strstr(rlx_last_error(), "rlx_sqrt") &&
          strstr(rlx_last_error(), "c128"));
    rlx_clear_error();
    r = rlx_max(x, NULL, 0, false);
    CHECK(!r && rlx_last_status() == RLX_E_DTYPE && strstr(rlx_last_error(), "c128"));
    rlx_clear_error();
    CHECK_NULL_ERR(rlx_sort(x, 0, false), RLX_E_DTYPE, "rlx_sort");
    CHECK_NULL_ERR(rlx_cumsum(x, 0, false), RLX_E_DTYPE, "rlx_cumsum");
    CHECK_NULL_ERR(rlx_fft(x), RLX_E_DTYPE, "rlx_fft");
    CHECK_NULL_ERR(rlx_rand(RLX_C128, 2, s, 1), RLX_E_DTYPE, "rlx_rand");
    CHECK_NULL_ERR(rlx_arange(RLX_C128, 0, 4, 1), RLX_E_DTYPE, "rlx_arange");
    CHECK_NULL_ERR(rlx_complex(x, rlx_real(x)), RLX_E_DTYPE, "rlx_complex");
    CHECK_NULL_ERR(rlx_var(x, (const int[]){0}, 1, false), RLX_E_DTYPE, "rlx_var");
    CHECK_NULL_ERR(rlx_softmax(x, 1), RLX_E_DTYPE, "rlx_softmax");
}

/* ------------------------------------------------------------ gradients */

/* One input of a gradient check: complex of cdt, or real (the part dtype)
 * when real is set. */
typedef struct {
    int rank;
    int64_t shape[3];
    bool real;
} gspec;

typedef rlx_tensor *(*gloss)(rlx_tensor *const *in);

static rlx_dtype part_of(rlx_dtype cdt) { return cdt == RLX_C128 ? RLX_F64 : RLX_F32; }

/* Input k from doubles v (pairs for complex), rounded to its dtype. */
static rlx_tensor *g_input(const gspec *sp, rlx_dtype cdt, const double *v)
{
    rlx_tensor *t = rlx_from_data(sp->real ? RLX_F64 : RLX_C128, sp->rank, sp->shape, v);
    return t ? rlx_cast(t, sp->real ? part_of(cdt) : cdt) : NULL;
}

/* Loss value of fn at the inputs held in vals. */
static double g_eval(gloss fn, int nin, const gspec *sp, rlx_dtype cdt, double *const *vals)
{
    rlx_scope_begin();
    rlx_tensor *in[4];
    for (int k = 0; k < nin; k++)
        in[k] = g_input(&sp[k], cdt, vals[k]);
    double v = NAN;
    if (rlx_item(fn(in), &v) != RLX_OK)
        test_fail(__FILE__, __LINE__, "loss: %s", rlx_last_error());
    rlx_scope_end();
    return v;
}

/* rlx_grad of fn (a real loss of complex or real inputs of random values,
 * broadcasting as the specs say) against central differences taken on the
 * real and the imaginary part of every element separately, on both
 * backends; c128 to f64 accuracy (limited by the difference quotient),
 * c64 to f32's. */
static void check_cgrad(int line, const char *what, gloss fn, int nin, const gspec *sp, rlx_dtype cdt)
{
    double *vals[4];
    int64_t len[4];
    for (int k = 0; k < nin; k++) {
        int64_t n = test_numel(sp[k].rank, sp[k].shape) * (sp[k].real ? 1 : 2);
        len[k] = n;
        vals[k] = malloc((size_t)(n ? n : 1) * sizeof(double));
        for (int64_t i = 0; i < n; i++) /* held at the input dtype's precision */
            vals[k][i] = cdt == RLX_C64 ? (double)(float)test_uniform(-1.5, 1.5) : test_uniform(-1.5, 1.5);
    }
    bool c128 = cdt == RLX_C128;
    double h = c128 ? 1e-6 : 1e-2, tol = c128 ? 1e-6 : 2e-2;
    EACH_BACKEND(be)
    {
        rlx_tensor *in[4], *g[4];
        for (int k = 0; k < nin; k++)
            in[k] = g_input(&sp[k], cdt, vals[k]);
        rlx_tensor *loss = fn(in);
        if (!loss || rlx_grad(loss, in, nin, g) != RLX_OK) {
            test_fail(__FILE__, line, "%s (%s): %s", what, rlx_dtype_name(cdt), rlx_last_error());
            rlx_clear_error();
            continue;
        }
        for (int k = 0; k < nin; k++) {
            rlx_dtype want = sp[k].real ? part_of(cdt) : cdt;
            if (rlx_dtype_of(g[k]) != want) {
                test_fail(__FILE__, line, "%s: gradient %d is %s, want %s", what, k, rlx_dtype_name(rlx_dtype_of(g[k])),
                          rlx_dtype_name(want));
                continue;
            }
            double *an = malloc((size_t)(len[k] ? len[k] : 1) * sizeof *an);
            rlx_tensor *wide = rlx_cast(g[k], sp[k].real ? RLX_F64 : RLX_C128);
            if (rlx_read(wide, an, (size_t)len[k] * sizeof *an) != RLX_OK) {
                test_fail(__FILE__, line, "%s: read: %s", what, rlx_last_error());
                free(an);
                continue;
            }
            for (int64_t i = 0; i < len[k]; i++) {
                double keep = vals[k][i];
                vals[k][i] = keep + h;
                double lp = g_eval(fn, nin, sp, cdt, vals);
                vals[k][i] = keep - h;
                double lm = g_eval(fn, nin, sp, cdt, vals);
                vals[k][i] = keep;
                double fd = (lp - lm) / (2 * h);
                if (!(fabs(fd - an[i]) <= tol * (1 + fabs(fd)))) {
                    test_fail(__FILE__, line,
                              "%s (%s, %s): d/d%s of input %d element %lld: rlx_grad %.9g, differences %.9g", what,
                              rlx_dtype_name(cdt), be ? "jit" : "ref", sp[k].real ? "x" : i % 2 ? "Im" : "Re", k,
                              (long long)(sp[k].real ? i : i / 2), an[i], fd);
                    break;
                }
            }
            free(an);
        }
    }
    for (int k = 0; k < nin; k++)
        free(vals[k]);
}

static rlx_tensor *sum_abs(rlx_tensor *z) { return rlx_sum_all(rlx_abs(z)); }
/* a real loss that weighs both parts differently (so that a rule mixing
 * them up shows) */
static rlx_tensor *parts(rlx_tensor *z)
{
    return rlx_add(rlx_sum_all(rlx_mul(rlx_real(z), rlx_real(z))), rlx_sum_all(rlx_mul_s(rlx_imag(z), 0.7)));
}
static rlx_tensor *l_mul(rlx_tensor *const *in) { return parts(rlx_mul(in[0], in[1])); }
static rlx_tensor *l_div(rlx_tensor *const *in) { return parts(rlx_div(in[0], rlx_add_s(in[1], 3))); }
static rlx_tensor *l_addsub(rlx_tensor *const *in) { return parts(rlx_sub(rlx_add(in[0], in[1]), rlx_neg(in[1]))); }
static rlx_tensor *l_exp_conj(rlx_tensor *const *in) { return parts(rlx_mul(rlx_exp(rlx_conj(in[0])), in[0])); }
static rlx_tensor *l_abs(rlx_tensor *const *in) { return sum_abs(rlx_mul(in[0], in[0])); }
static rlx_tensor *l_matmul(rlx_tensor *const *in) { return parts(rlx_matmul(in[0], in[1])); }
static rlx_tensor *l_matmul_b(rlx_tensor *const *in) { return sum_abs(rlx_matmul(in[0], in[1])); }
static rlx_tensor *l_complex(rlx_tensor *const *in)
{
    return parts(rlx_mul(rlx_complex(in[0], in[1]), rlx_complex(in[1], rlx_mul(in[0], in[0]))));
}
/* real times complex */
static rlx_tensor *l_real_mix(rlx_tensor *const *in) { return parts(rlx_mul(in[0], rlx_exp(in[1]))); }
static rlx_tensor *l_reduce(rlx_tensor *const *in)
{
    rlx_tensor *m = rlx_mean(in[0], (const int[]){1}, 1, true), *s = rlx_sum(in[0], (const int[]){0}, 1, false);
    return parts(rlx_mul(rlx_sub(in[0], m), s));
}
static rlx_tensor *l_movement(rlx_tensor *const *in)
{
    rlx_tensor *t = rlx_transpose(in[0], 2, (const int[]){1, 0}); /* [3, 2] */
    rlx_tensor *sl = rlx_flip(t, 0);                              /* rows 2, 1, 0 of the view */
    rlx_tensor *pc[2] = {rlx_pad(sl, 1, 1, 0, 0.5), rlx_reshape(in[0], 2, (const int64_t[]){3, 2})};
    rlx_tensor *c = rlx_cat(pc, 2, 1); /* [3, 5] */
    /* a fixed mask: no kink to difference across */
    static const bool pick[15] = {1, 0, 0, 1, 1, 0, 1, 0, 1, 0, 0, 0, 1, 1, 1};
    rlx_tensor *w = rlx_where(rlx_from_data(RLX_BOOL, 2, (const int64_t[]){3, 5}, pick), c, rlx_conj(c));
    return parts(rlx_mul(rlx_contiguous(w), rlx_broadcast_to(rlx_narrow(c, 1, 0, 1), 2, (const int64_t[]){3, 5})));
}
static rlx_tensor *l_fft(rlx_tensor *const *in)
{
    return rlx_add(parts(rlx_fft_c(in[0], 1, false)), sum_abs(rlx_fft_c(rlx_mul(in[0], in[0]), 0, true)));
}
static rlx_tensor *l_widen(rlx_tensor *const *in) /* c64 (or c128) with f64: c128 */
{
    return parts(rlx_mul(in[0], rlx_cast(in[1], RLX_F64)));
}
static rlx_tensor *l_index(rlx_tensor *const *in) /* repeated indices: their gradients add */
{
    rlx_tensor *i3 = rlx_from_data(RLX_I64, 1, (const int64_t[]){4}, (const int64_t[]){2, 0, 2, 2});
    rlx_tensor *g = rlx_from_data(RLX_I32, 2, (const int64_t[]){1, 3}, (const int32_t[]){1, 1, 0});
    rlx_tensor *sel = rlx_index_select(in[0], 1, i3); /* [2, 4] */
    return rlx_add(parts(rlx_mul(sel, sel)), sum_abs(rlx_gather(in[0], g, 0)));
}
static rlx_tensor *l_rank0(rlx_tensor *const *in) { return rlx_add(sum_abs(rlx_mul(in[0], in[1])), parts(in[0])); }

TEST(gradients)
{
    const gspec m23 = {2, {2, 3, 2}, false}, v3 = {1, {3, 2}, false}, r23 = {2, {2, 3}, true};
    const gspec m34 = {2, {3, 4, 2}, false}, b234 = {3, {2, 3, 4}, false}, s0 = {0, {2}, false};
    const gspec m43 = {2, {4, 3, 0}, false};
    for (int c = 0; c < 2; c++) {
        rlx_dtype cdt = c ? RLX_C128 : RLX_C64;
        check_cgrad(__LINE__, "mul (broadcast)", l_mul, 2, (gspec[]){m23, v3}, cdt);
        check_cgrad(__LINE__, "div", l_div, 2, (gspec[]){m23, v3}, cdt);
        check_cgrad(__LINE__, "add, sub, neg", l_addsub, 2, (gspec[]){v3, m23}, cdt);
        check_cgrad(__LINE__, "exp, conj", l_exp_conj, 1, (gspec[]){m23}, cdt);
        check_cgrad(__LINE__, "abs", l_abs, 1, (gspec[]){m23}, cdt);
        check_cgrad(__LINE__, "matmul", l_matmul, 2, (gspec[]){m23, m34}, cdt);
        check_cgrad(__LINE__, "batched matmul", l_matmul_b, 2, (gspec[]){b234, m43}, cdt);
        check_cgrad(__LINE__, "complex of reals", l_complex, 2, (gspec[]){r23, r23}, cdt);
        check_cgrad(__LINE__, "real times complex", l_real_mix, 2, (gspec[]){r23, m23}, cdt);
        check_cgrad(__LINE__, "sum, mean", l_reduce, 1, (gspec[]){m23}, cdt);
        check_cgrad(__LINE__, "movement", l_movement, 1, (gspec[]){m23}, cdt);
        check_cgrad(__LINE__, "fft_c", l_fft, 1, (gspec[]){m34}, cdt);
        check_cgrad(__LINE__, "widened to c128", l_widen, 2, (gspec[]){m23, r23}, cdt);
        check_cgrad(__LINE__, "index_select, gather", l_index, 1, (gspec[]){m23}, cdt);
        check_cgrad(__LINE__, "rank 0", l_rank0, 2, (gspec[]){s0, m23}, cdt);
    }
}

TEST(gradient_edges)
{
    for (int c = 0; c < 2; c++) {
        rlx_dtype cdt = c ? RLX_C128 : RLX_C64;
        /* |z| has gradient 0 at 0 (PyTorch), z/|z| elsewhere */
        double zv[4] = {0, 0, 3, -4};
        const int64_t s2[1] = {2};
        rlx_tensor *z = rlx_cast(rlx_from_data(RLX_C128, 1, s2, zv), cdt);
        rlx_tensor *g = NULL;
        CHECK(rlx_grad(rlx_sum_all(rlx_abs(z)), &z, 1, &g) == RLX_OK);
        rlx_tensor *gw = rlx_cast(g, RLX_C128);
        double got[4] = {1, 1, 1, 1};
        CHECK(rlx_read(gw, got, sizeof got) == RLX_OK);
        CHECK(got[0] == 0 && got[1] == 0 && fabs(got[2] - 0.6) < 1e-6 && fabs(got[3] + 0.8) < 1e-6);
        /* an empty complex wrt gets an empty complex gradient */
        const int64_t e[2] = {0, 3};
        rlx_tensor *ze = rlx_zeros(cdt, 2, e);
        CHECK(rlx_grad(rlx_sum_all(rlx_abs(rlx_mul(ze, ze))), &ze, 1, &g) == RLX_OK);
        CHECK(rlx_dtype_of(g) == cdt && rlx_numel(g) == 0);
        /* a complex loss is refused (PyTorch: only real outputs) */
        rlx_tensor *x = rlx_ones(part_of(cdt), 1, s2);
        CHECK_ERR(rlx_grad(rlx_sum_all(rlx_cast(x, cdt)), &x, 1, &g), RLX_E_DTYPE, "rlx_grad");
        rlx_tensor *w = rlx_cast(x, cdt);
        CHECK(rlx_grad(rlx_sum_all(w), &x, 1, &g) == RLX_E_DTYPE && strstr(rlx_last_error(), "real") &&
              strstr(rlx_last_error(), rlx_dtype_name(cdt)));
        rlx_clear_error();
        /* a complex branch the gradient does not flow through is fine */
        rlx_tensor *side = rlx_cast(rlx_eq(w, rlx_conj(w)), part_of(cdt));
        CHECK(rlx_grad(rlx_sum_all(rlx_add(rlx_mul(x, x), side)), &x, 1, &g) == RLX_OK);
        EXPECT(g, part_of(cdt), 1, s2, ((const double[]){2, 2}), 0);
    }
}

/* A compiled program with a c64 input runs its c64 ops on each binding. */
TEST(program_input)
{
    const int64_t s[1] = {3};
    rlx_tensor *x = rlx_input("x", RLX_C64, 1, s);
    rlx_tensor *y = rlx_sum_all(rlx_mul(x, rlx_conj(x))); /* sum |x|^2 + 0i */
    rlx_program *p = rlx_compile(&y, 1);
    CHECK(p != NULL);
    EACH_BACKEND(be)
    {
        for (int round = 0; round < 2 && p; round++) {
            cd v[3];
            rlx_binding bind = {"x", tc64(1, s, v)};
            rlx_tensor *out = NULL;
            CHECK(rlx_program_run(p, &bind, 1, &out) == RLX_OK);
            cd want = 0;
            for (int i = 0; i < 3; i++)
                want += v[i] * conj(v[i]);
            EXPECT_C(out, 0, NULL, &want, 1e-6);
        }
        (void)be;
    }
    rlx_program_free(p);
}

/* The same structure realized again with another complex constant (a
 * constant the reference evaluator computes): each realization gets its
 * own value, never a cached plan's (fuzz_diff found x + inf reading an
 * earlier x + 7). */
TEST(repeated_structure_new_constants)
{
    const double vals[] = {2.5, 7, 3, -9.3e18, INFINITY, -0.5};
    const rlx_dtype dts[] = {RLX_C64, RLX_C128};
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 6; i++) {
            double re[6], want[12];
            for (int j = 0; j < 6; j++)
                re[j] = j + 1;
            rlx_tensor *x = rlx_cast(tf64(3, (int64_t[]){1, 1, 6}, re), dts[t]);
            rlx_tensor *y = rlx_add(rlx_reshape(x, 4, (int64_t[]){1, 1, 1, 6}),
                                    rlx_full(dts[t], 4, (int64_t[]){1, 1, 1, 6}, vals[i]));
            for (int j = 0; j < 6; j++) {
                want[2 * j] = dts[t] == RLX_C64 ? (double)(float)((float)re[j] + (float)vals[i]) : re[j] + vals[i];
                want[2 * j + 1] = 0;
            }
            double got[12];
            if (dts[t] == RLX_C64) {
                float f[12];
                CHECK_EQ_INT(rlx_read(y, f, sizeof f), RLX_OK);
                for (int j = 0; j < 12; j++)
                    got[j] = f[j];
            } else {
                CHECK_EQ_INT(rlx_read(y, got, sizeof got), RLX_OK);
            }
            for (int j = 0; j < 12; j++)
                if (!(got[j] == want[j]))
                    test_fail(__FILE__, __LINE__, "%s + %g: element %d is %g, expected %g", rlx_dtype_name(dts[t]),
                              vals[i], j, got[j], want[j]);
        }
}

/* x*1, 1*x and x/1 are not folded away on complex values: (a+bi)(1+0i) has
 * real part a*1 - b*0, so a NaN part makes both parts NaN, as NumPy and
 * PyTorch compute it (the fuzzer found the JIT returning a where the
 * reference gave NaN). The wanted values are written out: C compilers may
 * fold a division by the constant 1+0i into a division by the real 1. */
TEST(one_is_not_an_identity)
{
    const int64_t n[1] = {4};
    const float parts[8] = {65504, NAN, NAN, 2, 3, -1.5f, 0.25f, NAN};
    cd want[4];
    for (int i = 0; i < 4; i++)
        want[i] = isnan(parts[2 * i]) || isnan(parts[2 * i + 1]) ? CMPLX(NAN, NAN)
                                                                 : CMPLX(parts[2 * i], parts[2 * i + 1]);
    EACH_BACKEND(be)
    {
        rlx_tensor *x = rlx_from_data(RLX_C64, 1, n, parts), *one = rlx_full(RLX_C64, 0, NULL, 1);
        EXPECT_C(rlx_mul_s(x, 1), 1, n, want, 1e-6);
        EXPECT_C(rlx_mul(one, x), 1, n, want, 1e-6);
        EXPECT_C(rlx_div_s(x, 1), 1, n, want, 1e-6);
        EXPECT_C(rlx_div(x, one), 1, n, want, 1e-6);
        (void)be;
    }
}

TEST_MAIN(T(storage_and_readback), T(casts), T(promotion), T(binary), T(unary_and_views), T(compare_and_select),
          T(sum_and_mean), T(matmul), T(movement), T(fft_c), T(refusals), T(c128_storage_and_casts), T(c128_ops),
          T(c128_matmul_and_fft),
          T(c128_files_and_refusals), T(gradients), T(gradient_edges),
          T(program_input), T(repeated_structure_new_constants), T(one_is_not_an_identity))
