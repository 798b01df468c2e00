/*
 * test_gemv.c — matmul blocks of one row (m = 1, the products of decoding)
 * go through gemv (src/runtime/kernels/blas.c, mm_gemv): every operand
 * layout the planner hands it (b row-major, b a transposed weight as in
 * linear, leading dimensions wider than the matrix, a row read with a
 * stride, batches of distinct b, a product split in column blocks), f32
 * and f64, against a double loop over the logical values; identical bits
 * at 1 and 2 threads. A weight read as w^T (linear, matmul_t) takes
 * librlx's row kernel (blas.c, gemv_rows_*): its edges (inner sizes with
 * and without a partial vector, row counts around its group of 8), the
 * same bits for a row whatever rows it is grouped with, and the knob gemv
 * 1 (OpenBLAS's gemv) against the same reference.
 */
#include "harness.h"

/* c[q, 0, j] = sum_p a[q, 0, p] b[q, p, j] over logical values (batch q of
 * nb items; b shared when b_batched is false). */
static double *reference(const double *a, const double *b, int64_t nb, int64_t k, int64_t n, bool b_batched)
{
    double *c = malloc((size_t)(nb * n) * sizeof *c);
    for (int64_t q = 0; q < nb; q++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += a[q * k + p] * b[(b_batched ? q * k * n : 0) + p * n + j];
            c[q * n + j] = s;
        }
    return c;
}

/* Checks c = a @ b (a [.., 1, k], b [.., k, n] any views) against the
 * reference. */
static void check(const char *what, rlx_dtype dt, rlx_tensor *a, rlx_tensor *b, rlx_tensor *c)
{
    int64_t na, nbv, nc;
    double *av = test_values(a, &na), *bv = test_values(b, &nbv), *cv = test_values(c, &nc);
    int64_t k = rlx_dim(a, -1), n = rlx_dim(b, -1), items = nc / (n ? n : 1);
    if (!av || !bv || !cv) {
        test_fail(__FILE__, __LINE__, "%s: no values", what);
    } else {
        double *want = reference(av, bv, items, k, n, nbv > k * n);
        double tol = dt == RLX_F32 ? 2e-5 : 1e-12;
        for (int64_t i = 0; i < nc; i++)
            if (!test_close(cv[i], want[i], tol, tol)) {
                test_fail(__FILE__, __LINE__, "%s %s: [%lld] = %.9g, want %.9g", what, rlx_dtype_name(dt),
                          (long long)i, cv[i], want[i]);
                break;
            }
        free(want);
    }
    free(av);
    free(bv);
    free(cv);
}

TEST(gemv_layouts)
{
    const rlx_dtype dts[2] = {RLX_F32, RLX_F64};
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = dts[d];
        const int64_t k = 37, n = 53;
        rlx_tensor *a = trand(dt, 2, (int64_t[]){1, k}, -1, 1);
        rlx_tensor *b = trand(dt, 2, (int64_t[]){k, n}, -1, 1);
        check("b row-major", dt, a, b, rlx_matmul(a, b));
        rlx_tensor *w = trand(dt, 2, (int64_t[]){n, k}, -1, 1);
        check("b a transposed weight", dt, a, rlx_t(w), rlx_matmul_t(a, w));
        /* linear over [1, 1, k]: the decode step's form */
        rlx_tensor *a3 = rlx_reshape(a, 3, (int64_t[]){1, 1, k});
        rlx_tensor *lin = rlx_reshape(rlx_linear(a3, w, NULL), 2, (int64_t[]){1, n});
        check("linear", dt, a, rlx_t(w), lin);
        /* leading dimensions wider than the matrix */
        rlx_tensor *bw = rlx_narrow(trand(dt, 2, (int64_t[]){k, n + 5}, -1, 1), 1, 2, n);
        check("b row-major, wide ld", dt, a, bw, rlx_matmul(a, bw));
        rlx_tensor *ww = rlx_narrow(trand(dt, 2, (int64_t[]){n, k + 3}, -1, 1), 1, 0, k);
        check("b transposed, wide ld", dt, a, rlx_t(ww), rlx_matmul_t(a, ww));
        /* a row read with a stride (a column of a wider matrix) */
        rlx_tensor *as = rlx_t(rlx_narrow(trand(dt, 2, (int64_t[]){k, 3}, -1, 1), 1, 1, 1));
        check("a strided", dt, as, b, rlx_matmul(as, b));
        check("a strided, b transposed", dt, as, rlx_t(w), rlx_matmul_t(as, w));
        /* batches of distinct b: one gemv per item */
        rlx_tensor *ab = trand(dt, 3, (int64_t[]){3, 1, k}, -1, 1), *bb = trand(dt, 3, (int64_t[]){3, k, n}, -1, 1);
        check("batched", dt, ab, bb, rlx_matmul(ab, bb));
        /* n = 1 and k = 1 edges */
        rlx_tensor *al = trand(dt, 2, (int64_t[]){1, 300}, -1, 1), *b1 = trand(dt, 2, (int64_t[]){300, 1}, -1, 1);
        check("n = 1", dt, al, b1, rlx_matmul(al, b1));
        rlx_tensor *a1 = trand(dt, 2, (int64_t[]){1, 1}, -1, 1), *bk1 = trand(dt, 2, (int64_t[]){1, 300}, -1, 1);
        check("k = 1", dt, a1, bk1, rlx_matmul(a1, bk1));
    }
}

/* A product large enough to be split in column blocks over the pool: the
 * same bits at 1 and 2 threads, and the reference's values. */
TEST(gemv_blocks_thread_invariant)
{
    const rlx_dtype dts[2] = {RLX_F32, RLX_F64};
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = dts[d];
        const int64_t k = 400, n = 12011; /* m n k = 4.8M multiply-adds: 4 blocks */
        rlx_tensor *a = trand(dt, 2, (int64_t[]){1, k}, -1, 1), *w = trand(dt, 2, (int64_t[]){n, k}, -1, 1);
        CHECK_EQ_INT(rlx_realize_many((rlx_tensor *[]){a, w}, 2), RLX_OK);
        double *v[2] = {NULL, NULL};
        for (int t = 1; t <= 2; t++) {
            rlx_set_num_threads(t);
            /* (another node per thread count: hash-consing would return the realized one) */
            rlx_tensor *c = rlx_matmul_t(t == 1 ? a : rlx_mul_s(a, 1.0), w);
            int64_t nc;
            v[t - 1] = test_values(c, &nc);
            if (t == 1)
                check("split", dt, a, rlx_t(w), c);
        }
        rlx_set_num_threads(0);
        CHECK(v[0] && v[1] && memcmp(v[0], v[1], (size_t)n * sizeof(double)) == 0);
        free(v[0]);
        free(v[1]);
    }
}

/* The row kernel's edges: k below, at and past a vector (16 f32, 8 f64
 * lanes) and long, n below, at and past the 8 rows of a group; each
 * through the kernel (knob gemv 0) and through OpenBLAS (knob gemv 1). */
TEST(gemv_rows_edges)
{
    const rlx_dtype dts[2] = {RLX_F32, RLX_F64};
    const int64_t ks[] = {1, 5, 8, 16, 17, 64, 288, 1000}, ns[] = {1, 7, 8, 9, 33};
    const char *knob[2] = {"0", "1"};
    for (int kb = 0; kb < 2; kb++) {
        CHECK(rlx_set_option("gemv", knob[kb]) == RLX_OK);
        for (int d = 0; d < 2; d++)
            for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
                for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
                    rlx_dtype dt = dts[d];
                    int64_t k = ks[ki], n = ns[ni];
                    char what[64];
                    snprintf(what, sizeof what, "k %lld n %lld knob gemv %s", (long long)k, (long long)n, knob[kb]);
                    rlx_tensor *a = trand(dt, 2, (int64_t[]){1, k}, -1, 1);
                    rlx_tensor *w = trand(dt, 2, (int64_t[]){n, k}, -1, 1);
                    check(what, dt, a, rlx_t(w), rlx_matmul_t(a, w));
                }
    }
    CHECK(rlx_set_option("gemv", "default") == RLX_OK);
}

/* A row's sum does not depend on the rows it runs with: rows 3.. of w
 * give the same bits as the product over w narrowed to start at row 3
 * (other groups of 8, other rows alone in the tail), and as products of
 * two rows (both in the tail). */
TEST(gemv_rows_same_bits_any_grouping)
{
    const rlx_dtype dts[2] = {RLX_F32, RLX_F64};
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = dts[d];
        const int64_t k = 300, n = 41;
        rlx_tensor *a = trand(dt, 2, (int64_t[]){1, k}, -1, 1), *w = trand(dt, 2, (int64_t[]){n, k}, -1, 1);
        CHECK_EQ_INT(rlx_realize_many((rlx_tensor *[]){a, w}, 2), RLX_OK);
        int64_t nf, ns;
        double *full = test_values(rlx_matmul_t(a, w), &nf);
        double *sub = test_values(rlx_matmul_t(a, rlx_narrow(w, 0, 3, n - 3)), &ns);
        CHECK(full && sub && nf == n && ns == n - 3);
        if (full && sub)
            CHECK(memcmp(full + 3, sub, (size_t)(n - 3) * sizeof(double)) == 0);
        for (int64_t j = 0; full && j + 2 <= n; j += 5) {
            int64_t n2;
            double *two = test_values(rlx_matmul_t(a, rlx_narrow(w, 0, j, 2)), &n2);
            CHECK(two && n2 == 2 && memcmp(two, full + j, 2 * sizeof(double)) == 0);
            free(two);
        }
        free(full);
        free(sub);
    }
}

TEST_MAIN(T(gemv_layouts), T(gemv_blocks_thread_invariant), T(gemv_rows_edges), T(gemv_rows_same_bits_any_grouping))
