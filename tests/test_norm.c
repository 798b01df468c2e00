/*
 * test_norm.c — batch_norm (training, evaluation, the updated running
 * statistics, an empty and a dynamic batch), group_norm and dropout (the
 * documented mask rule, its keep fraction, reproducibility per seed, its
 * gradient), each against plain double loops or hand-computed values, on
 * both backends, in f32 and f64, through contiguous and transposed inputs,
 * plus every documented error and every allocation failure.
 * Finite-difference gradients of these ops are rows of tests/test_grad.c.
 */
#include "harness.h"

#define SH(...) ((const int64_t[]){__VA_ARGS__})

static const char *const backends[2] = {"jit", "ref"};

static double *rnd(int64_t n, double lo, double hi)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = test_uniform(lo, hi);
    return v;
}

/* A tensor of dtype dt holding v [N, C, S] as shape (rank >= 2). layout 0:
 * contiguous; 1: stored with axes 1 and rank-1 swapped (axes 0 and 1 at
 * rank 2) and read through rlx_transpose, a non-contiguous view. */
static rlx_tensor *make_x(rlx_dtype dt, int rank, const int64_t *shape, const double *v, int layout)
{
    rlx_tensor *c = rlx_cast(tf64(rank, shape, v), dt);
    if (!layout)
        return c;
    int perm[RLX_MAX_RANK];
    for (int i = 0; i < rank; i++)
        perm[i] = i;
    int a = rank > 2 ? 1 : 0, b = rank - 1;
    perm[a] = b;
    perm[b] = a;
    /* materialize the swapped layout, then swap back as a view */
    rlx_tensor *stored = rlx_contiguous(rlx_transpose(c, rank, perm));
    CHECK(rlx_realize(stored) == RLX_OK);
    return rlx_transpose(stored, rank, perm);
}

/* n, c, s of x [N, C, ...]: s is the product of the dims after C. */
static void ncs(int rank, const int64_t *shape, int64_t *n, int64_t *c, int64_t *s)
{
    *n = shape[0];
    *c = shape[1];
    *s = 1;
    for (int i = 2; i < rank; i++)
        *s *= shape[i];
}

/* ------------------------------------------------------------ batch norm */

/* PyTorch's batch_norm as loops: y, and the new running statistics. */
static void ref_batch_norm(const double *x, int64_t n, int64_t c, int64_t s, const double *rm, const double *rv,
                           const double *w, const double *b, bool training, double mom, double eps, double *y,
                           double *nm, double *nv)
{
    for (int64_t ch = 0; ch < c; ch++) {
        double mean = 0, var = 0, cnt = (double)(n * s);
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < s; k++)
                mean += x[(i * c + ch) * s + k];
        mean /= cnt;
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < s; k++)
                var += (x[(i * c + ch) * s + k] - mean) * (x[(i * c + ch) * s + k] - mean);
        double unbiased = var / (cnt - 1);
        var /= cnt;
        double m = training ? mean : rm[ch], v = training ? var : rv[ch];
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < s; k++) {
                int64_t j = (i * c + ch) * s + k;
                y[j] = (x[j] - m) / sqrt(v + eps) * (w ? w[ch] : 1) + (b ? b[ch] : 0);
            }
        nm[ch] = training ? (1 - mom) * rm[ch] + mom * mean : rm[ch];
        nv[ch] = training ? (1 - mom) * rv[ch] + mom * unbiased : rv[ch];
    }
}

TEST(batch_norm_hand_values)
{
    /* channel 0 holds 1, 3 (mean 2, variance 1, unbiased 2); channel 1
     * holds 2, 6 (mean 4, variance 4, unbiased 8) */
    rlx_tensor *x = tf64(2, SH(2, 2), (double[]){1, 2, 3, 6});
    rlx_tensor *rm = tf64(1, SH(2), (double[]){0, 0}), *rv = tf64(1, SH(2), (double[]){1, 1});
    rlx_tensor *m = NULL, *v = NULL;
    EXPECT(rlx_batch_norm(x, rm, rv, NULL, NULL, true, 0.1, 0, &m, &v), RLX_F64, 2, SH(2, 2),
           ((double[]){-1, -1, 1, 1}), 1e-15);
    EXPECT(m, RLX_F64, 1, SH(2), ((double[]){0.2, 0.4}), 1e-15);
    EXPECT(v, RLX_F64, 1, SH(2), ((double[]){1.1, 1.7}), 1e-15);
    /* evaluation: (x - 0) / sqrt(1 + 3) * 2 + 1 */
    rlx_tensor *three = tf64(1, SH(2), (double[]){3, 3}), *two = tf64(1, SH(2), (double[]){2, 2});
    EXPECT(rlx_batch_norm(x, rm, rlx_add(rv, three), two, rlx_ones(RLX_F64, 1, SH(2)), false, 0.1, 0, &m, &v),
           RLX_F64, 2, SH(2, 2), ((double[]){2, 3, 4, 7}), 1e-15);
    /* in evaluation the "new" statistics are the running ones */
    EXPECT(m, RLX_F64, 1, SH(2), ((double[]){0, 0}), 0);
    CHECK(rlx_shares_storage(m, rm));
    /* integers compute in f32; integer running statistics give f32 ones */
    rlx_tensor *xi = ti32(2, SH(2, 2), (int32_t[]){1, 2, 3, 6});
    rlx_tensor *rmi = ti64(1, SH(2), (int64_t[]){0, 10});
    EXPECT(rlx_batch_norm(xi, rmi, rv, NULL, NULL, true, 0.5, 0, &m, &v), RLX_F32, 2, SH(2, 2),
           ((double[]){-1, -1, 1, 1}), 1e-6);
    EXPECT(m, RLX_F32, 1, SH(2), ((double[]){1, 7}), 0);
    EXPECT(v, RLX_F64, 1, SH(2), ((double[]){1.5, 4.5}), 0);
    /* training without running statistics, new_* not asked for */
    EXPECT(rlx_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 0, NULL, NULL), RLX_F64, 2, SH(2, 2),
           ((double[]){-1, -1, 1, 1}), 1e-15);
    /* only new_var asked for */
    CHECK(rlx_batch_norm(x, rm, rv, NULL, NULL, true, 0.1, 0, NULL, &v) != NULL);
    EXPECT(v, RLX_F64, 1, SH(2), ((double[]){1.1, 1.7}), 1e-15);
}

TEST(batch_norm_random)
{
    static const int64_t shapes[][4] = {{4, 3}, {2, 3, 5}, {2, 2, 3, 4}, {3, 1, 2}, {2, 5, 1, 1}, {7, 2, 3}};
    static const int ranks[] = {2, 3, 4, 3, 4, 3};
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        for (int c = 0; c < 24; c++) {
            int sh = c % 6, rank = ranks[sh], layout = c / 6 % 2;
            bool training = c % 2 == 0, affine = c / 3 % 2 == 1;
            rlx_dtype dt = c / 12 ? RLX_F32 : RLX_F64;
            const int64_t *shape = shapes[sh];
            int64_t n, ch, s;
            ncs(rank, shape, &n, &ch, &s);
            double *x = rnd(n * ch * s, -3, 3), *rm = rnd(ch, -1, 1), *rv = rnd(ch, 0.5, 2);
            double *w = rnd(ch, -2, 2), *b = rnd(ch, -1, 1), *y = malloc((size_t)(n * ch * s) * sizeof *y);
            double *nm = malloc((size_t)ch * sizeof *nm), *nv = malloc((size_t)ch * sizeof *nv);
            double mom = test_uniform(0, 1), eps = 1e-3;
            ref_batch_norm(x, n, ch, s, rm, rv, affine ? w : NULL, affine ? b : NULL, training, mom, eps, y, nm, nv);
            rlx_tensor *trm = rlx_cast(tf64(1, &ch, rm), dt), *trv = rlx_cast(tf64(1, &ch, rv), dt);
            rlx_tensor *tw = affine ? rlx_cast(tf64(1, &ch, w), dt) : NULL;
            rlx_tensor *tb = affine ? rlx_cast(tf64(1, &ch, b), dt) : NULL;
            rlx_tensor *m = NULL, *v = NULL;
            double tol = dt == RLX_F32 ? 2e-5 : 1e-12;
            int fails = test_failures;
            rlx_tensor *out = rlx_batch_norm(make_x(dt, rank, shape, x, layout), trm, trv, tw, tb, training, mom,
                                             eps, &m, &v);
            EXPECT(out, dt, rank, shape, y, tol);
            EXPECT(m, dt, 1, &ch, nm, tol);
            EXPECT(v, dt, 1, &ch, nv, tol);
            if (test_failures != fails)
                fprintf(stderr, "  (%s backend, case %d: %s %s, layout %d, %s, affine %d)\n", backends[be], c,
                        test_dims(rank, shape), rlx_dtype_name(dt), layout, training ? "training" : "eval", affine);
            free(x), free(rm), free(rv), free(w), free(b), free(y), free(nm), free(nv);
        }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}

TEST(batch_norm_empty_and_dynamic_batch)
{
    /* an empty batch: empty output, the running statistics unchanged */
    rlx_tensor *rm = tf32(1, SH(3), (float[]){1, 2, 3}), *rv = tf32(1, SH(3), (float[]){4, 5, 6});
    rlx_tensor *m = NULL, *v = NULL;
    EXPECT(rlx_batch_norm(rlx_zeros(RLX_F32, 3, SH(0, 3, 2)), rm, rv, NULL, NULL, true, 0.1, 1e-5, &m, &v), RLX_F32,
           3, SH(0, 3, 2), NULL, 0);
    EXPECT(m, RLX_F32, 1, SH(3), ((double[]){1, 2, 3}), 0);
    EXPECT(v, RLX_F32, 1, SH(3), ((double[]){4, 5, 6}), 0);
    /* a dynamic batch in a compiled program counts the values per channel
     * at run time (for the unbiased variance) */
    rlx_tensor *in = rlx_input("x", RLX_F64, 2, SH(-1, 2));
    rlx_tensor *rm2 = tf64(1, SH(2), (double[]){0, 0}), *rv2 = tf64(1, SH(2), (double[]){1, 1});
    rlx_tensor *outs[3];
    outs[0] = rlx_batch_norm(in, rm2, rv2, NULL, NULL, true, 0.1, 0, &outs[1], &outs[2]);
    CHECK(outs[0] && outs[1] && outs[2]);
    rlx_program *p = rlx_compile(outs, 3);
    CHECK(p != NULL);
    for (int run = 0; p && run < 2; run++) {
        /* run 0: [[1,2],[3,6]] as in batch_norm_hand_values; run 1: four rows */
        int64_t rows = run ? 4 : 2;
        double xv[8] = {1, 2, 3, 6, 5, 2, 7, 6}, nm[2], nv[2], y[8];
        ref_batch_norm(xv, rows, 2, 1, (double[]){0, 0}, (double[]){1, 1}, NULL, NULL, true, 0.1, 0, y, nm, nv);
        rlx_binding bind = {"x", tf64(2, SH(rows, 2), xv)};
        rlx_tensor *res[3] = {0};
        CHECK_EQ_INT(rlx_program_run(p, &bind, 1, res), RLX_OK);
        EXPECT(res[0], RLX_F64, 2, SH(rows, 2), y, 1e-14);
        EXPECT(res[1], RLX_F64, 1, SH(2), nm, 1e-14);
        EXPECT(res[2], RLX_F64, 1, SH(2), nv, 1e-14);
    }
    rlx_program_free(p);
}

TEST(batch_norm_errors)
{
    const char *fn = "rlx_batch_norm";
    rlx_tensor *x = rlx_ones(RLX_F32, 3, SH(2, 3, 4)), *p3 = rlx_ones(RLX_F32, 1, SH(3));
    rlx_tensor *p2 = rlx_ones(RLX_F32, 1, SH(2)), *m = (rlx_tensor *)&fn, *v = (rlx_tensor *)&fn;
    CHECK_NULL_ERR(rlx_batch_norm(NULL, p3, p3, NULL, NULL, false, 0.1, 1e-5, NULL, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_batch_norm(rlx_ones(RLX_F32, 1, SH(3)), p3, p3, NULL, NULL, false, 0.1, 1e-5, NULL, NULL),
                   RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_batch_norm(rlx_scalar(RLX_F32, 1), p3, p3, NULL, NULL, false, 0.1, 1e-5, NULL, NULL),
                   RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_batch_norm(rlx_ones(RLX_BOOL, 2, SH(2, 3)), p3, p3, NULL, NULL, false, 0.1, 1e-5, NULL, NULL),
                   RLX_E_DTYPE, fn);
    /* channel-count mismatches of every parameter */
    CHECK_NULL_ERR(rlx_batch_norm(x, p2, p3, NULL, NULL, false, 0.1, 1e-5, NULL, NULL), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, p3, p2, NULL, NULL, false, 0.1, 1e-5, NULL, NULL), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, p3, p3, p2, NULL, false, 0.1, 1e-5, NULL, NULL), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, p3, p3, NULL, p2, true, 0.1, 1e-5, NULL, NULL), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, rlx_ones(RLX_F32, 2, SH(1, 3)), p3, NULL, NULL, false, 0.1, 1e-5, NULL, NULL),
                   RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, p3, p3, rlx_ones(RLX_BOOL, 1, SH(3)), NULL, false, 0.1, 1e-5, NULL, NULL),
                   RLX_E_DTYPE, fn);
    /* one value per channel in training (PyTorch's "Expected more than 1 value per channel") */
    CHECK_NULL_ERR(rlx_batch_norm(rlx_ones(RLX_F32, 2, SH(1, 3)), p3, p3, NULL, NULL, true, 0.1, 1e-5, NULL, NULL),
                   RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_batch_norm(rlx_ones(RLX_F32, 4, SH(1, 3, 1, 1)), NULL, NULL, NULL, NULL, true, 0.1, 1e-5, NULL,
                                  NULL),
                   RLX_E_SHAPE, fn);
    CHECK(rlx_batch_norm(rlx_ones(RLX_F32, 2, SH(1, 3)), p3, p3, NULL, NULL, false, 0.1, 1e-5, NULL, NULL) != NULL);
    /* running statistics: missing in evaluation, only one given, new_* without them */
    CHECK_NULL_ERR(rlx_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5, NULL, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, p3, NULL, NULL, NULL, true, 0.1, 1e-5, NULL, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, NULL, p3, NULL, NULL, true, 0.1, 1e-5, NULL, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5, &m, NULL), RLX_E_ARG, fn);
    CHECK(m == NULL); /* outputs are NULL on error */
    CHECK_NULL_ERR(rlx_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5, NULL, &v), RLX_E_ARG, fn);
    CHECK(v == NULL);
    /* eps and momentum */
    CHECK_NULL_ERR(rlx_batch_norm(x, p3, p3, NULL, NULL, false, 0.1, -1e-5, NULL, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, p3, p3, NULL, NULL, false, 0.1, NAN, NULL, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, p3, p3, NULL, NULL, false, 0.1, INFINITY, NULL, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, p3, p3, NULL, NULL, true, -0.1, 1e-5, NULL, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, p3, p3, NULL, NULL, true, 1.5, 1e-5, NULL, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_batch_norm(x, p3, p3, NULL, NULL, true, NAN, 1e-5, NULL, NULL), RLX_E_ARG, fn);
    /* a dynamic channel dim */
    CHECK_NULL_ERR(rlx_batch_norm(rlx_input("x", RLX_F32, 2, SH(2, -1)), NULL, NULL, NULL, NULL, true, 0.1, 1e-5,
                                  NULL, NULL),
                   RLX_E_SHAPE, fn);
    /* NULL propagation keeps the first error */
    rlx_clear_error();
    rlx_tensor *bad = rlx_reshape(x, 1, SH(5));
    CHECK(rlx_batch_norm(bad, p3, p3, NULL, NULL, false, 0.1, 1e-5, NULL, NULL) == NULL);
    CHECK(rlx_batch_norm(x, bad, p3, NULL, NULL, false, 0.1, 1e-5, NULL, NULL) == NULL);
    CHECK(rlx_batch_norm(x, p3, bad, NULL, NULL, true, 0.1, 1e-5, NULL, NULL) == NULL);
    CHECK(strncmp(rlx_last_error(), "rlx_reshape", 11) == 0);
    rlx_clear_error();
}

/* ------------------------------------------------------------ group norm */

static void ref_group_norm(const double *x, int64_t n, int64_t c, int64_t s, int g, const double *w,
                           const double *b, double eps, double *y)
{
    int64_t cg = c / g, len = cg * s;
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < g; k++) {
            const double *row = x + (i * c + k * cg) * s;
            double mean = 0, var = 0;
            for (int64_t j = 0; j < len; j++)
                mean += row[j] / (double)len;
            for (int64_t j = 0; j < len; j++)
                var += (row[j] - mean) * (row[j] - mean) / (double)len;
            for (int64_t j = 0; j < len; j++) {
                int64_t ch = k * cg + j / s;
                y[(i * c + k * cg) * s + j] = (row[j] - mean) / sqrt(var + eps) * (w ? w[ch] : 1) + (b ? b[ch] : 0);
            }
        }
}

TEST(group_norm_random)
{
    static const struct {
        int rank;
        int64_t shape[4];
        int groups;
    } cases[] = {{2, {3, 4}, 2}, {3, {2, 6, 5}, 3}, {4, {2, 4, 3, 2}, 1}, {4, {1, 4, 2, 3}, 4},
                 {3, {3, 5, 1}, 5}, {3, {2, 1, 7}, 1}, {4, {2, 6, 2, 2}, 2}, {2, {5, 3}, 3}};
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        for (int c = 0; c < 32; c++) {
            int k = c % 8, rank = cases[k].rank, layout = c / 8 % 2, g = cases[k].groups;
            rlx_dtype dt = c / 16 ? RLX_F32 : RLX_F64;
            bool affine = (c + c / 8) % 2 == 1;
            const int64_t *shape = cases[k].shape;
            int64_t n, ch, s;
            ncs(rank, shape, &n, &ch, &s);
            double *x = rnd(n * ch * s, -3, 3), *w = rnd(ch, -2, 2), *b = rnd(ch, -1, 1);
            double *y = malloc((size_t)(n * ch * s) * sizeof *y), eps = 1e-4;
            ref_group_norm(x, n, ch, s, g, affine ? w : NULL, affine ? b : NULL, eps, y);
            rlx_tensor *tw = affine ? rlx_cast(tf64(1, &ch, w), dt) : NULL;
            rlx_tensor *tb = affine ? rlx_cast(tf64(1, &ch, b), dt) : NULL;
            int fails = test_failures;
            EXPECT(rlx_group_norm(make_x(dt, rank, shape, x, layout), g, tw, tb, eps), dt, rank, shape, y,
                   dt == RLX_F32 ? 2e-5 : 1e-12);
            if (test_failures != fails)
                fprintf(stderr, "  (%s backend, case %d: %s %s groups %d layout %d affine %d)\n", backends[be], c,
                        test_dims(rank, shape), rlx_dtype_name(dt), g, layout, affine);
            free(x), free(w), free(b), free(y);
        }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}

TEST(group_norm_fixed_and_errors)
{
    const char *fn = "rlx_group_norm";
    /* one sample, two groups of one channel: [1, 3] and [2, 6] normalize to -1, 1 */
    rlx_tensor *x = tf64(3, SH(1, 2, 2), (double[]){1, 3, 2, 6});
    EXPECT(rlx_group_norm(x, 2, NULL, NULL, 0), RLX_F64, 3, SH(1, 2, 2), ((double[]){-1, 1, -1, 1}), 1e-15);
    /* one group of all four: mean 3, variance 3.5 */
    double r = sqrt(3.5);
    EXPECT(rlx_group_norm(x, 1, tf64(1, SH(2), (double[]){1, 2}), tf64(1, SH(2), (double[]){0, 1}), 0), RLX_F64, 3,
           SH(1, 2, 2), ((double[]){-2 / r, 0, 1 - 2 / r, 1 + 6 / r}), 1e-14);
    /* integers compute in f32; an empty batch stays empty */
    EXPECT(rlx_group_norm(ti32(3, SH(1, 2, 2), (int32_t[]){1, 3, 2, 6}), 2, NULL, NULL, 0), RLX_F32, 3, SH(1, 2, 2),
           ((double[]){-1, 1, -1, 1}), 1e-6);
    EXPECT(rlx_group_norm(rlx_zeros(RLX_F32, 3, SH(0, 4, 2)), 2, NULL, NULL, 1e-5), RLX_F32, 3, SH(0, 4, 2), NULL, 0);
    rlx_tensor *p2 = rlx_ones(RLX_F64, 1, SH(2)), *p3 = rlx_ones(RLX_F64, 1, SH(3));
    CHECK_NULL_ERR(rlx_group_norm(NULL, 1, NULL, NULL, 1e-5), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_group_norm(rlx_ones(RLX_F32, 1, SH(4)), 1, NULL, NULL, 1e-5), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_group_norm(rlx_ones(RLX_BOOL, 2, SH(2, 2)), 1, NULL, NULL, 1e-5), RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_group_norm(x, 0, NULL, NULL, 1e-5), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_group_norm(x, -2, NULL, NULL, 1e-5), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_group_norm(x, 3, NULL, NULL, 1e-5), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_group_norm(x, 4, NULL, NULL, 1e-5), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_group_norm(x, 1, p3, NULL, 1e-5), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_group_norm(x, 1, p2, p3, 1e-5), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_group_norm(x, 1, rlx_ones(RLX_BOOL, 1, SH(2)), NULL, 1e-5), RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_group_norm(x, 1, NULL, NULL, -1), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_group_norm(x, 1, NULL, NULL, NAN), RLX_E_ARG, fn);
    /* dynamic positions trace (values: test_dynamic_conv.c) */
    CHECK(rlx_group_norm(rlx_input("x", RLX_F32, 3, SH(2, 2, -1)), 1, NULL, NULL, 1e-5) != NULL);
    /* a dynamic batch: a compiled program run at two batch sizes */
    rlx_tensor *w = tf32(1, SH(2), (float[]){2, 3});
    rlx_tensor *gn = rlx_group_norm(rlx_input("x", RLX_F32, 3, SH(-1, 2, 3)), 2, w, NULL, 1e-5);
    rlx_program *p = rlx_compile(&gn, 1);
    CHECK(p != NULL);
    for (int64_t rows = 1; p && rows <= 3; rows += 2) {
        double *xv = rnd(rows * 6, -2, 2), *y = malloc((size_t)(rows * 6) * sizeof *y);
        ref_group_norm(xv, rows, 2, 3, 2, (double[]){2, 3}, NULL, 1e-5, y);
        rlx_binding bind = {"x", rlx_cast(tf64(3, SH(rows, 2, 3), xv), RLX_F32)};
        rlx_tensor *res = NULL;
        CHECK_EQ_INT(rlx_program_run(p, &bind, 1, &res), RLX_OK);
        EXPECT(res, RLX_F32, 3, SH(rows, 2, 3), y, 2e-5);
        free(xv), free(y);
    }
    rlx_program_free(p);
}

/* ---------------------------------------------------------------- dropout */

/* The documented rule: kept iff rlx_rand(RLX_F32, shape, seed)[i] >= (float)p. */
static double *expected_dropout(const double *x, int64_t n, double p, uint64_t seed, rlx_dtype dt)
{
    double *want = malloc((size_t)(n ? n : 1) * sizeof *want), *u = test_values(rlx_rand(RLX_F32, 1, &n, seed), &n);
    for (int64_t i = 0; u && i < n; i++)
        want[i] = u[i] >= (double)(float)p ? test_quantize(dt, x[i] * (1 / (1 - p))) : 0;
    free(u);
    return want;
}

TEST(dropout_values)
{
    int64_t n = 257;
    double *x = rnd(n, -3, 3);
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        for (int c = 0; c < 8; c++) {
            rlx_dtype dt = c % 2 ? RLX_F32 : RLX_F64;
            double p = (double[]){0.1, 0.5, 0.75, 0.3}[c / 2];
            int64_t seed = 1000 + c;
            double *want = expected_dropout(x, n, p, (uint64_t)seed, dt);
            rlx_tensor *xt = rlx_cast(tf64(1, &n, x), dt), *st = rlx_from_data(RLX_I64, 0, NULL, &seed);
            EXPECT(rlx_dropout(xt, p, (uint64_t)seed), dt, 1, &n, want, dt == RLX_F32 ? 1e-6 : 1e-15);
            /* the seed as a tensor: the same mask */
            EXPECT(rlx_dropout_seeded(xt, p, st), dt, 1, &n, want, dt == RLX_F32 ? 1e-6 : 1e-15);
            free(want);
        }
        /* a transposed view and a rank-3 shape follow the logical order */
        double *want = expected_dropout(x, 12, 0.5, 3, RLX_F64);
        rlx_tensor *xt = rlx_t(rlx_contiguous(rlx_t(tf64(2, SH(3, 4), x))));
        EXPECT(rlx_dropout(xt, 0.5, 3), RLX_F64, 2, SH(3, 4), want, 1e-15);
        EXPECT(rlx_dropout(tf64(3, SH(2, 3, 2), x), 0.5, 3), RLX_F64, 3, SH(2, 3, 2), want, 1e-15);
        free(want);
        /* integers compute in f32 */
        want = expected_dropout((double[]){1, 2, 3, 4}, 4, 0.5, 9, RLX_F32);
        EXPECT(rlx_dropout(ti32(1, SH(4), (int32_t[]){1, 2, 3, 4}), 0.5, 9), RLX_F32, 1, SH(4), want, 0);
        free(want);
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
    /* p = 0 is x, p = 1 exact zeros (even for inf and NaN); rank 0 and empty */
    rlx_tensor *odd = tf32(1, SH(3), (float[]){INFINITY, NAN, -2});
    EXPECT(rlx_dropout(odd, 0, 1), RLX_F32, 1, SH(3), ((double[]){INFINITY, NAN, -2}), 0);
    EXPECT(rlx_dropout(odd, 1, 1), RLX_F32, 1, SH(3), ((double[]){0, 0, 0}), 0);
    double s = 0;
    rlx_tensor *d0 = rlx_dropout(rlx_scalar(RLX_F64, 2), 0.5, 4);
    CHECK(rlx_item(d0, &s) == RLX_OK && (s == 0 || s == 4) && rlx_rank(d0) == 0);
    EXPECT(rlx_dropout(rlx_zeros(RLX_F64, 2, SH(0, 3)), 0.5, 4), RLX_F64, 2, SH(0, 3), NULL, 0);
    free(x);
}

TEST(dropout_statistics_and_seeds)
{
    int64_t n = 200000;
    rlx_tensor *ones = rlx_ones(RLX_F32, 1, &n);
    for (int k = 0; k < 3; k++) {
        double p = (double[]){0.1, 0.5, 0.9}[k];
        int64_t m = 0;
        double *a = test_values(rlx_dropout(ones, p, 42), &m), *b = test_values(rlx_dropout(ones, p, 42), &m);
        double *c = test_values(rlx_dropout(ones, p, 43), &m);
        if (!a || !b || !c) {
            free(a), free(b), free(c);
            continue;
        }
        int64_t kept = 0, same = 0, both = 0;
        for (int64_t i = 0; i < n; i++) {
            kept += a[i] != 0;
            same += a[i] == b[i];
            both += a[i] != 0 && c[i] != 0;
            if (a[i] != 0 && fabs(a[i] - 1 / (1 - p)) > 1e-6)
                test_fail(__FILE__, __LINE__, "p %g: kept value %g, expected %g", p, a[i], 1 / (1 - p));
        }
        /* the keep fraction is 1 - p within 5 standard deviations */
        double frac = (double)kept / (double)n, sd = sqrt(p * (1 - p) / (double)n);
        if (fabs(frac - (1 - p)) > 5 * sd)
            test_fail(__FILE__, __LINE__, "p %g: kept %g of the elements", p, frac);
        CHECK_EQ_INT(same, n); /* one seed, one mask */
        /* another seed gives an independent mask: kept by both about (1-p)^2 */
        double fb = (double)both / (double)n, sdb = sqrt((1 - p) * (1 - p) * (1 - (1 - p) * (1 - p)) / (double)n);
        if (fabs(fb - (1 - p) * (1 - p)) > 5 * sdb)
            test_fail(__FILE__, __LINE__, "p %g: seeds 42 and 43 both kept %g of the elements", p, fb);
        free(a), free(b), free(c);
    }
    /* f32 and f64 inputs share the mask; both backends give the same bits */
    int64_t n2 = 1000;
    rlx_tensor *x64 = rlx_add_s(rlx_rand(RLX_F64, 1, &n2, 5), 1);
    rlx_tensor *d64 = rlx_ne_s(rlx_dropout(x64, 0.4, 11), 0), *d32 = rlx_ne_s(rlx_dropout(rlx_cast(x64, RLX_F32), 0.4, 11), 0);
    EXPECT_SAME(d64, d32, 0);
    CHECK(rlx_set_option("backend", "ref") == RLX_OK);
    rlx_tensor *ref = rlx_contiguous(rlx_dropout(x64, 0.4, 11));
    CHECK(rlx_realize(ref) == RLX_OK);
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
    EXPECT_SAME(rlx_dropout(x64, 0.4, 11), ref, 0);
}

/* A new seed is a new mask without new code: the mask is a runtime value
 * to the kernels that read it (what the header promises a training loop). */
TEST(dropout_new_seed_compiles_nothing)
{
    rlx_tensor *x = rlx_rand(RLX_F32, 2, SH(16, 16), 1);
    for (uint64_t seed = 1; seed <= 3; seed++) {
        rlx_stats_t st;
        rlx_stats_reset();
        rlx_tensor *y = rlx_sum_all(rlx_relu(rlx_dropout(rlx_matmul(x, x), 0.5, seed)));
        CHECK(rlx_realize(y) == RLX_OK);
        rlx_stats(&st);
        if (seed > 1)
            CHECK_EQ_INT(st.kernels_compiled, 0);
    }
}

TEST(dropout_gradient_is_the_mask)
{
    int64_t n = 64;
    double p = 0.25;
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        rlx_tensor *x = rlx_add_s(rlx_rand(RLX_F64, 1, &n, 1), 0.5), *r = rlx_rand(RLX_F64, 1, &n, 2), *g = NULL;
        rlx_tensor *y = rlx_dropout(x, p, 77);
        CHECK(rlx_grad(rlx_sum_all(rlx_mul(y, r)), &x, 1, &g) == RLX_OK);
        /* grad = mask / (1 - p) * r, the mask read off the forward values */
        double *yv = test_values(y, &n), *rv = test_values(r, &n), *want = malloc((size_t)n * sizeof *want);
        int64_t kept = 0;
        for (int64_t i = 0; yv && rv && i < n; i++) {
            want[i] = yv[i] != 0 ? rv[i] / (1 - p) : 0;
            kept += yv[i] != 0;
        }
        CHECK(kept > 0 && kept < n);
        EXPECT(g, RLX_F64, 1, &n, want, 1e-15);
        free(yv), free(rv), free(want);
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}

TEST(dropout_errors)
{
    const char *fn = "rlx_dropout";
    rlx_tensor *x = rlx_ones(RLX_F32, 1, SH(4));
    CHECK_NULL_ERR(rlx_dropout(NULL, 0.5, 0), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_dropout(x, -0.1, 0), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_dropout(x, 1.01, 0), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_dropout(x, NAN, 0), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_dropout(x, INFINITY, 0), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_dropout(rlx_ones(RLX_BOOL, 1, SH(4)), 0.5, 0), RLX_E_DTYPE, fn);
    /* NULL propagation keeps the first error */
    rlx_clear_error();
    CHECK(rlx_dropout(rlx_reshape(x, 1, SH(5)), 0.5, 0) == NULL);
    CHECK(strncmp(rlx_last_error(), "rlx_reshape", 11) == 0);
    CHECK(rlx_group_norm(rlx_reshape(x, 1, SH(5)), 1, NULL, NULL, 0) == NULL);
    CHECK(strncmp(rlx_last_error(), "rlx_reshape", 11) == 0);
    rlx_clear_error();
}

/* ------------------------------------------------ dropout with a seed tensor */

TEST(dropout_seeded_values)
{
    int64_t n = 12;
    double *x = rnd(n, -3, 3);
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        /* a transposed view, an i32 seed of shape [1]; rank 0, empty, p = 0 and 1 */
        int32_t s3 = 3;
        rlx_tensor *s1 = rlx_from_data(RLX_I32, 1, SH(1), &s3);
        rlx_tensor *xt = rlx_t(rlx_contiguous(rlx_t(tf64(2, SH(3, 4), x))));
        EXPECT_SAME(rlx_dropout_seeded(xt, 0.5, s1), rlx_dropout(xt, 0.5, 3), 0);
        rlx_tensor *x0 = rlx_scalar(RLX_F64, 2), *xe = rlx_zeros(RLX_F32, 2, SH(0, 3));
        for (int k = 0; k < 4; k++) {
            double p = (double[]){0, 0.5, 0.9, 1}[k];
            EXPECT_SAME(rlx_dropout_seeded(x0, p, s1), rlx_dropout(x0, p, 3), 0);
            EXPECT_SAME(rlx_dropout_seeded(xt, p, s1), rlx_dropout(xt, p, 3), 0);
            EXPECT(rlx_dropout_seeded(xe, p, s1), RLX_F32, 2, SH(0, 3), NULL, 0);
        }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
    free(x);
}

/* What the seed tensor is for: a compiled training step whose seed is an
 * input draws a new mask per run, and the same mask for the same seed,
 * without compiling anything after the first run. */
TEST(dropout_seeded_compiled_step)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, SH(8, 16)), *seed = rlx_input("seed", RLX_I64, 0, NULL);
    rlx_tensor *w = rlx_add_s(rlx_rand(RLX_F32, 2, SH(16, 16), 3), -0.5), *g = NULL;
    rlx_tensor *h = rlx_dropout_seeded(rlx_relu(rlx_matmul(x, w)), 0.5, seed);
    rlx_tensor *loss = rlx_sum_all(rlx_mul(h, h));
    CHECK(rlx_grad(loss, &w, 1, &g) == RLX_OK);
    rlx_tensor *outs[3] = {loss, g, h};
    rlx_program *p = rlx_compile(outs, 3);
    CHECK(p != NULL);
    rlx_tensor *xv = rlx_rand(RLX_F32, 2, SH(8, 16), 4);
    const int64_t seeds[3] = {1, 2, 1};
    double hv[3][128];
    for (int r = 0; p && r < 3; r++) {
        rlx_binding bind[2] = {{"x", xv}, {"seed", rlx_from_data(RLX_I64, 0, NULL, &seeds[r])}};
        rlx_tensor *res[3] = {NULL, NULL, NULL};
        rlx_stats_t st;
        rlx_stats_reset();
        CHECK_EQ_INT(rlx_program_run(p, bind, 2, res), RLX_OK);
        rlx_stats(&st);
        if (r > 0)
            CHECK_EQ_INT(st.kernels_compiled, 0);
        CHECK(rlx_read_f64(res[2], hv[r], 128) == RLX_OK);
        /* the eager graph with the attribute seed agrees */
        rlx_tensor *he = rlx_dropout(rlx_relu(rlx_matmul(xv, w)), 0.5, (uint64_t)seeds[r]);
        EXPECT_SAME(res[2], he, 1e-6);
    }
    CHECK(memcmp(hv[0], hv[2], sizeof hv[0]) == 0);
    CHECK(memcmp(hv[0], hv[1], sizeof hv[0]) != 0);
    rlx_program_free(p);
}

/* The gradient is mask/(1-p), checked against the mask and by central
 * differences (dropout is linear in x at a fixed seed). */
TEST(dropout_seeded_gradient)
{
    int64_t n = 64, seed = 77;
    double p = 0.25;
    for (int be = 0; be < 2; be++) {
        CHECK(rlx_set_option("backend", backends[be]) == RLX_OK);
        rlx_tensor *st = rlx_from_data(RLX_I64, 0, NULL, &seed);
        rlx_tensor *x = rlx_add_s(rlx_rand(RLX_F64, 1, &n, 1), 0.5), *r = rlx_rand(RLX_F64, 1, &n, 2), *g = NULL;
        CHECK(rlx_grad(rlx_sum_all(rlx_mul(rlx_dropout_seeded(x, p, st), r)), &x, 1, &g) == RLX_OK);
        double *u = test_values(rlx_rand(RLX_F32, 1, &n, (uint64_t)seed), &n), *rv = test_values(r, &n);
        double *xv = test_values(x, &n), *want = malloc((size_t)n * sizeof *want), *fd = malloc((size_t)n * sizeof *fd);
        int64_t kept = 0;
        for (int64_t i = 0; u && rv && xv && i < n; i++) {
            want[i] = u[i] >= (double)(float)p ? rv[i] / (1 - p) : 0;
            kept += want[i] != 0;
            double h = 1e-4, lv[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                xv[i] += sgn ? -h : h;
                rlx_tensor *l = rlx_sum_all(rlx_mul(rlx_dropout_seeded(tf64(1, &n, xv), p, st), r));
                lv[sgn] = NAN;
                CHECK(rlx_item(l, &lv[sgn]) == RLX_OK);
                xv[i] -= sgn ? -h : h;
            }
            fd[i] = (lv[0] - lv[1]) / (2 * h);
        }
        CHECK(kept > 0 && kept < n);
        EXPECT(g, RLX_F64, 1, &n, want, 1e-15);
        EXPECT(g, RLX_F64, 1, &n, fd, 1e-7);
        free(u), free(rv), free(xv), free(want), free(fd);
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}

TEST(dropout_seeded_errors)
{
    const char *fn = "rlx_dropout_seeded";
    rlx_tensor *x = rlx_ones(RLX_F32, 1, SH(4)), *s = rlx_scalar(RLX_I64, 1);
    CHECK_NULL_ERR(rlx_dropout_seeded(NULL, 0.5, s), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_dropout_seeded(x, 0.5, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_dropout_seeded(x, -0.1, s), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_dropout_seeded(x, NAN, s), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_dropout_seeded(rlx_ones(RLX_BOOL, 1, SH(4)), 0.5, s), RLX_E_DTYPE, fn);
    /* over a dynamic dim (test_program.c checks the values) the seed is checked as well */
    rlx_tensor *xd = rlx_input("x", RLX_F32, 2, SH(-1, 4));
    CHECK_NULL_ERR(rlx_dropout_seeded(xd, 0.5, rlx_scalar(RLX_F32, 1)), RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_dropout_seeded(xd, 0.5, rlx_ones(RLX_I64, 1, SH(2))), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_dropout_seeded(xd, 2, s), RLX_E_ARG, fn);
    /* the seed is checked whatever p is */
    for (int k = 0; k < 2; k++) {
        double p = k ? 0.5 : 0;
        CHECK_NULL_ERR(rlx_dropout_seeded(x, p, rlx_scalar(RLX_F32, 1)), RLX_E_DTYPE, fn);
        CHECK_NULL_ERR(rlx_dropout_seeded(x, p, rlx_scalar(RLX_BOOL, 1)), RLX_E_DTYPE, fn);
        CHECK_NULL_ERR(rlx_dropout_seeded(x, p, rlx_ones(RLX_I32, 1, SH(2))), RLX_E_SHAPE, fn);
    }
    /* NULL propagation keeps the first error */
    rlx_clear_error();
    CHECK(rlx_dropout_seeded(rlx_reshape(x, 1, SH(5)), 0.5, s) == NULL);
    CHECK(strncmp(rlx_last_error(), "rlx_reshape", 11) == 0);
    CHECK(rlx_dropout_seeded(x, 0.5, rlx_reshape(s, 1, SH(5))) == NULL);
    CHECK(strncmp(rlx_last_error(), "rlx_reshape", 11) == 0);
    rlx_clear_error();
}

/* ------------------------------------------------- allocation failures */

/* Every op here, the updated statistics included, built and realized under
 * every allocation failure in turn. */
static int norm_workload(void)
{
    rlx_scope_begin();
    double v[24];
    for (int i = 0; i < 24; i++)
        v[i] = sin(i);
    rlx_tensor *x = rlx_from_data(RLX_F64, 3, SH(2, 3, 4), v), *p = rlx_from_data(RLX_F64, 1, SH(3), v);
    rlx_tensor *m = NULL, *var = NULL;
    rlx_tensor *outs[7] = {rlx_batch_norm(x, p, rlx_exp(p), p, p, true, 0.1, 1e-5, &m, &var), m, var,
                           rlx_group_norm(rlx_t(x), 2, NULL, NULL, 1e-5), rlx_dropout(x, 0.5, 1),
                           rlx_dropout_seeded(x, 0.5, rlx_scalar(RLX_I64, 1)),
                           rlx_pad_mode(x, 2, 2, 3, RLX_PAD_REFLECT)};
    int ok = 1;
    for (int i = 0; i < 7; i++)
        ok = ok && outs[i];
    ok = ok && rlx_realize_many(outs, 7) == RLX_OK;
    rlx_scope_end();
    return ok;
}

TEST(allocation_failures)
{
    ALLOC_WALK(norm_workload, 20);
    CHECK(rlx_set_option("backend", "ref") == RLX_OK);
    ALLOC_WALK(norm_workload, 20);
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}


static rlx_tensor *nf_bn_eval(rlx_tensor *const *in)
{
    /* |v| is exact in every dtype: both computations see one variance */
    return rlx_batch_norm(in[0], in[1], rlx_abs(in[2]), in[3], in[4], false, 0.1, 1e-5, NULL, NULL);
}
static rlx_tensor *nf_bn_train(rlx_tensor *const *in)
{
    return rlx_batch_norm(in[0], in[1], rlx_abs(in[2]), in[3], in[4], true, 0.1, 1e-5, NULL, NULL);
}
static rlx_tensor *nf_bn_new_var(rlx_tensor *const *in)
{
    rlx_tensor *m = NULL, *v = NULL;
    return rlx_batch_norm(in[0], in[1], rlx_abs(in[2]), in[3], in[4], true, 0.1, 1e-5, &m, &v) ? v : NULL;
}
static rlx_tensor *nf_group_norm(rlx_tensor *const *in) { return rlx_group_norm(in[0], 2, in[3], in[4], 1e-5); }
static rlx_tensor *nf_dropout(rlx_tensor *const *in) { return rlx_dropout(in[0], 0.3, 11); }

/* batch_norm (eval and training, its running variance update), group_norm
 * and dropout on f16/bf16 x, statistics and affine parameters: computed in
 * f32, rounded once to the dtype. */
TEST(norms_narrow_floats_match_f32)
{
    const int64_t x[4] = {3, 4, 5, 2}, c[1] = {4};
    const int ranks[5] = {4, 1, 1, 1, 1};
    const int64_t *const shapes[5] = {x, c, c, c, c};
    const rlx_dtype dts[2] = {RLX_BF16, RLX_F16};
    for (int i = 0; i < 2; i++) {
        EXPECT_NARROW(nf_bn_eval, dts[i], 5, ranks, shapes, -2, 2, 1);
        EXPECT_NARROW(nf_bn_train, dts[i], 5, ranks, shapes, -2, 2, 1);
        EXPECT_NARROW(nf_bn_new_var, dts[i], 5, ranks, shapes, -2, 2, 1);
        EXPECT_NARROW(nf_group_norm, dts[i], 5, ranks, shapes, -2, 2, 1);
        EXPECT_NARROW(nf_dropout, dts[i], 1, ranks, shapes, -2, 2, 1);
    }
}

TEST_MAIN(T(batch_norm_hand_values), T(batch_norm_random), T(batch_norm_empty_and_dynamic_batch),
          T(batch_norm_errors), T(group_norm_random), T(group_norm_fixed_and_errors), T(dropout_values),
          T(dropout_statistics_and_seeds), T(dropout_new_seed_compiles_nothing), T(dropout_gradient_is_the_mask),
          T(dropout_errors), T(dropout_seeded_values), T(dropout_seeded_compiled_step), T(dropout_seeded_gradient),
          T(dropout_seeded_errors),
          T(allocation_failures), T(norms_narrow_floats_match_f32))
