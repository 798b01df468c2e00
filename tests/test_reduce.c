/*
 * test_reduce.c — sum, mean, max, min, prod, var, std, norm over any set of
 * axes; argmax/argmin, logsumexp, cumsum, sum_all, mean_all.
 *
 * Every expected value comes from plain loops in double written here from
 * the documented semantics (rlx.h): population variance, 2-norm, empty
 * reductions (sum 0, prod 1, mean NaN, max -inf, min +inf), NaN winning
 * max/min, first index on ties, result dtypes.
 */
#include "harness.h"

/* ------------------------------------------------------------- helpers */




static double *rand_vals(int64_t n, double lo, double hi, int integers)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = integers ? floor(test_uniform(lo, hi)) : test_uniform(lo, hi);
    return v;
}


#define S(...) ((const int64_t[]){__VA_ARGS__})
#define V(...) ((double[]){__VA_ARGS__})

static void seed_error(void)
{
    rlx_clear_error();
    if (rlx_arange(RLX_BOOL, 0, 1, 1) || rlx_last_status() != RLX_E_DTYPE)
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

/* x as a transposed view: x has shape s (rank 3) and the view axis i is x's
 * axis perm[i]; vals gets the view's row-major values. */
static rlx_tensor *permuted(rlx_tensor *x, const double *xv, const int64_t *s, const int *perm, double *vals,
                            int64_t *vs)
{
    int64_t st[3] = {s[1] * s[2], s[2], 1};
    for (int i = 0; i < 3; i++)
        vs[i] = s[perm[i]];
    int64_t k = 0;
    for (int64_t a = 0; a < vs[0]; a++)
        for (int64_t b = 0; b < vs[1]; b++)
            for (int64_t c = 0; c < vs[2]; c++)
                vals[k++] = xv[a * st[perm[0]] + b * st[perm[1]] + c * st[perm[2]]];
    return rlx_transpose(x, 3, perm);
}

/* --------------------------------------------------- reference reductions */

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_VAR, R_STD, R_NORM, NRED };
typedef rlx_tensor *(*red_fn)(rlx_tensor *, const int *, int, bool);
static const struct {
    const char *name;
    red_fn fn;
} RED[NRED] = {{"rlx_sum", rlx_sum},   {"rlx_mean", rlx_mean}, {"rlx_max", rlx_max}, {"rlx_min", rlx_min},
               {"rlx_prod", rlx_prod}, {"rlx_var", rlx_var},   {"rlx_std", rlx_std}, {"rlx_norm", rlx_norm}};

/* Index in the keepdim output of input element i. */
static int64_t red_index(int rank, const int64_t *shape, uint32_t mask, int64_t i)
{
    int64_t j = 0, st = 1;
    for (int d = rank - 1; d >= 0; d--) {
        int64_t c = i % shape[d];
        i /= shape[d];
        if (!(mask >> d & 1)) {
            j += c * st;
            st *= shape[d];
        }
    }
    return j;
}

/* The reduction `kind` of x over the axes in mask, in double; the result
 * shape (keepdim or not) goes to *orank, oshape. Returns a malloc'ed array. */
static double *ref_reduce(int kind, int rank, const int64_t *shape, const double *x, uint32_t mask, bool keepdim,
                          int *orank, int64_t *oshape)
{
    int64_t ks[RLX_MAX_RANK];
    *orank = 0;
    for (int i = 0; i < rank; i++) {
        ks[i] = mask >> i & 1 ? 1 : shape[i];
        if (keepdim || !(mask >> i & 1))
            oshape[(*orank)++] = ks[i];
    }
    int64_t on = test_numel(rank, ks), n = test_numel(rank, shape);
    double *out = malloc((size_t)(on ? on : 1) * sizeof *out), *sum = calloc((size_t)(on ? on : 1), sizeof *sum);
    double *sq = calloc((size_t)(on ? on : 1), sizeof *sq), *dev = calloc((size_t)(on ? on : 1), sizeof *dev);
    double *prod = malloc((size_t)(on ? on : 1) * sizeof *prod), *mx = malloc((size_t)(on ? on : 1) * sizeof *mx);
    double *mn = malloc((size_t)(on ? on : 1) * sizeof *mn);
    int64_t *cnt = calloc((size_t)(on ? on : 1), sizeof *cnt);
    for (int64_t j = 0; j < on; j++) {
        prod[j] = 1;
        mx[j] = -INFINITY;
        mn[j] = INFINITY;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t j = red_index(rank, shape, mask, i);
        double v = x[i];
        sum[j] += v;
        sq[j] += v * v;
        prod[j] *= v;
        mx[j] = isnan(mx[j]) || isnan(v) ? NAN : v > mx[j] ? v : mx[j];
        mn[j] = isnan(mn[j]) || isnan(v) ? NAN : v < mn[j] ? v : mn[j];
        cnt[j]++;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t j = red_index(rank, shape, mask, i);
        double d = x[i] - sum[j] / (double)cnt[j];
        dev[j] += d * d;
    }
    for (int64_t j = 0; j < on; j++) {
        double mean = cnt[j] ? sum[j] / (double)cnt[j] : NAN, var = cnt[j] ? dev[j] / (double)cnt[j] : NAN;
        switch (kind) {
        case R_SUM: out[j] = sum[j]; break;
        case R_MEAN: out[j] = mean; break;
        case R_MAX: out[j] = mx[j]; break;
        case R_MIN: out[j] = mn[j]; break;
        case R_PROD: out[j] = prod[j]; break;
        case R_VAR: out[j] = var; break;
        case R_STD: out[j] = sqrt(var); break;
        default: out[j] = sqrt(sq[j]); break;
        }
    }
    free(sum);
    free(sq);
    free(dev);
    free(prod);
    free(mx);
    free(mn);
    free(cnt);
    return out;
}

/* Runs the eight reductions of x (values v; prod on xp, values vp) and
 * compares with ref_reduce. axes NULL means every axis. */
static void run_reductions(rlx_dtype dt, rlx_tensor *x, const double *v, rlx_tensor *xp, const double *vp, int rank,
                           const int64_t *shape, const int *axes, int naxes, bool keepdim, const char *tag)
{
    uint32_t mask = 0;
    for (int i = 0; i < (axes ? naxes : rank); i++)
        mask |= 1u << (axes ? (axes[i] + rank) % rank : i);
    int64_t n = test_numel(rank, shape);
    double tol = dt == RLX_F32 ? 1e-4 : 1e-10, atol = dt == RLX_F32 ? 2e-6 * (double)(n + 1) : 1e-10;
    for (int k = 0; k < NRED; k++) {
        int orank;
        int64_t os[RLX_MAX_RANK];
        double *e = ref_reduce(k, rank, shape, k == R_PROD ? vp : v, mask, keepdim, &orank, os);
        char what[192], ax[64] = "NULL";
        if (axes) {
            ax[0] = 0;
            for (int i = 0; i < naxes; i++)
                snprintf(ax + strlen(ax), sizeof ax - strlen(ax), "%d,", axes[i]);
        }
        snprintf(what, sizeof what, "%s %s %s axes {%s} keepdim %d (%s)", RED[k].name, rlx_dtype_name(dt),
                 test_dims(rank, shape), ax, keepdim, tag);
        rlx_clear_error();
        EXPECT_V(what, RED[k].fn(k == R_PROD ? xp : x, axes, naxes, keepdim), dt, orank, os, e, tol, atol);
        free(e);
    }
}

/* Random shapes [2..6]^k, k = 1..4, random axis sets (negative forms and
 * any order), keepdim both ways, against the loops. */
static void random_reductions(rlx_dtype dt)
{
    for (int rank = 1; rank <= 4; rank++) {
        for (int trial = 0; trial < 8; trial++) {
            int64_t shape[4];
            for (int i = 0; i < rank; i++)
                shape[i] = 2 + (int64_t)test_uniform(0, 5);
            int64_t n = test_numel(rank, shape);
            double *v = rand_vals(n, -2, 2, 0), *vp = rand_vals(n, 0.8, 1.25, 0);
            rlx_tensor *x = test_tensor(dt, rank, shape, v), *xp = test_tensor(dt, rank, shape, vp);
            int axes[4], naxes = 0;
            for (int i = 0; i < rank; i++)
                if (test_uniform(0, 1) < 0.5)
                    axes[naxes++] = test_uniform(0, 1) < 0.5 ? i - rank : i;
            for (int i = naxes - 1; i > 0; i--) { /* shuffle */
                int j = (int)test_uniform(0, i + 1), t = axes[i];
                axes[i] = axes[j];
                axes[j] = t;
            }
            bool keepdim = trial & 1;
            if (trial == 7)
                run_reductions(dt, x, v, xp, vp, rank, shape, NULL, 0, keepdim, "all axes");
            else if (naxes)
                run_reductions(dt, x, v, xp, vp, rank, shape, axes, naxes, keepdim, "random axes");
            free(v);
            free(vp);
        }
    }
}

TEST(reduce_random_shapes_f64) { random_reductions(RLX_F64); }
TEST(reduce_random_shapes_f32) { random_reductions(RLX_F32); }

/* Transposed and strided inputs. */
TEST(reduce_transposed_views)
{
    const int64_t s[3] = {3, 4, 5};
    static const int perms[2][3] = {{2, 0, 1}, {1, 2, 0}};
    static const int axsets[4][2] = {{0, 0}, {1, 2}, {-1, 0}, {2, 0}};
    static const int nax[4] = {1, 2, 1, 2};
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F32 : RLX_F64;
        double *v = rand_vals(60, -2, 2, 0), *vp = rand_vals(60, 0.8, 1.25, 0), pv[60], ppv[60];
        rlx_tensor *x = test_tensor(dt, 3, s, v), *xp = test_tensor(dt, 3, s, vp);
        for (int p = 0; p < 2; p++) {
            int64_t vs[3];
            rlx_tensor *xv = permuted(x, v, s, perms[p], pv, vs), *xpv = permuted(xp, vp, s, perms[p], ppv, vs);
            for (int a = 0; a < 4; a++)
                run_reductions(dt, xv, pv, xpv, ppv, 3, vs, axsets[a], nax[a], a & 1, "transposed view");
            run_reductions(dt, xv, pv, xpv, ppv, 3, vs, NULL, 0, false, "transposed view");
        }
        /* A step-2 slice: [3,4,5] -> [3,2,5]. */
        double sv[30], spv[30];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++)
                for (int k = 0; k < 5; k++) {
                    sv[(i * 2 + j) * 5 + k] = v[(i * 4 + 2 * j + 1) * 5 + k];
                    spv[(i * 2 + j) * 5 + k] = vp[(i * 4 + 2 * j + 1) * 5 + k];
                }
        rlx_tensor *xs = rlx_slice(x, 1, 1, RLX_END, 2), *xps = rlx_slice(xp, 1, 1, RLX_END, 2);
        run_reductions(dt, xs, sv, xps, spv, 3, S(3, 2, 5), (const int[]){1}, 1, false, "sliced view");
        run_reductions(dt, xs, sv, xps, spv, 3, S(3, 2, 5), (const int[]){0, 2}, 2, true, "sliced view");
        free(v);
        free(vp);
    }
}

/* axes NULL (all), naxes 0 (none), negative and reordered axes. */
TEST(reduce_axes_forms)
{
    const int64_t s[3] = {2, 3, 4};
    double *v = rand_vals(24, -2, 2, 0), *vp = rand_vals(24, 0.8, 1.25, 0);
    rlx_tensor *x = test_tensor(RLX_F64, 3, s, v), *xp = test_tensor(RLX_F64, 3, s, vp);
    run_reductions(RLX_F64, x, v, xp, vp, 3, s, NULL, 0, false, "NULL axes");
    run_reductions(RLX_F64, x, v, xp, vp, 3, s, NULL, 0, true, "NULL axes");
    run_reductions(RLX_F64, x, v, xp, vp, 3, s, (const int[]){2, 0, 1}, 3, false, "every axis listed");
    /* naxes 0 with axes given: nothing is reduced, whatever keepdim. */
    for (int keep = 0; keep < 2; keep++) {
        double a[24], z[24];
        for (int i = 0; i < 24; i++) {
            a[i] = fabs(v[i]);
            z[i] = 0;
        }
        const int ax[1] = {0};
        const double *want[NRED] = {v, v, v, v, vp, z, z, a};
        for (int k = 0; k < NRED; k++)
            EXPECT_V(RED[k].name, RED[k].fn(k == R_PROD ? xp : x, ax, 0, keep), RLX_F64, 3, s, want[k], 1e-12, 1e-12);
    }
    /* Negative axes equal their positive forms; the order does not matter. */
    rlx_tensor *p = rlx_sum(x, (const int[]){0, 2}, 2, false);
    EXPECT_SAME(rlx_sum(x, (const int[]){-1, -3}, 2, false), p, 0);
    EXPECT_SAME(rlx_sum(x, (const int[]){2, 0}, 2, false), p, 0);
    EXPECT_SAME(rlx_var(x, (const int[]){-2}, 1, true), rlx_var(x, (const int[]){1}, 1, true), 0);
    /* Rank 0 input: NULL axes reduce nothing but still apply the dtype rule. */
    double one[1] = {3};
    rlx_tensor *sc = test_tensor(RLX_I32, 0, NULL, one);
    EXPECT_V("sum rank 0", rlx_sum(sc, NULL, 0, false), RLX_I64, 0, NULL, V(3), 0, 0);
    EXPECT_V("mean rank 0", rlx_mean(sc, NULL, 0, true), RLX_F32, 0, NULL, V(3), 0, 0);
    EXPECT_V("var rank 0", rlx_var(sc, NULL, 0, false), RLX_F32, 0, NULL, V(0), 0, 0);
    free(v);
    free(vp);
}

/* Result dtypes and values on bool and integers. */
TEST(reduce_dtypes)
{
    static const rlx_dtype in[5] = {RLX_BOOL, RLX_I32, RLX_I64, RLX_F32, RLX_F64};
    for (int d = 0; d < 5; d++) {
        rlx_dtype dt = in[d];
        bool isint = dt <= RLX_I64;
        double v[6] = {1, 0, 3, 4, 5, 6};
        rlx_tensor *x = test_tensor(dt, 2, S(2, 3), v);
        const rlx_dtype want[NRED] = {isint ? RLX_I64 : dt, isint ? RLX_F32 : dt, dt, dt, isint ? RLX_I64 : dt,
                                      isint ? RLX_F32 : dt, isint ? RLX_F32 : dt, isint ? RLX_F32 : dt};
        for (int k = 0; k < NRED; k++) {
            int orank;
            int64_t os[2];
            double *e = ref_reduce(k, 2, S(2, 3), v, 2u, false, &orank, os);
            char what[64];
            snprintf(what, sizeof what, "%s of %s", RED[k].name, rlx_dtype_name(dt));
            EXPECT_V(what, RED[k].fn(x, (const int[]){1}, 1, false), want[k], orank, os, e, 1e-6, 1e-6);
            free(e);
        }
        EXPECT_V("sum_all", rlx_sum_all(x), isint ? RLX_I64 : dt, 0, NULL, V(dt == RLX_BOOL ? 5 : 19), 0, 0);
        EXPECT_V("mean_all", rlx_mean_all(x), isint ? RLX_F32 : dt, 0, NULL, V(dt == RLX_BOOL ? 5.0 / 6 : 19.0 / 6), 1e-6, 0);
    }
    /* Integer sums and products do not wrap at 32 bits and are exact in i64. */
    int32_t big[3] = {INT32_MAX, INT32_MAX, 100000};
    rlx_tensor *b = ti32(1, S(3), big);
    int64_t got = 0;
    CHECK(rlx_read(rlx_sum(b, NULL, 0, false), &got, sizeof got) == RLX_OK && got == 2LL * INT32_MAX + 100000);
    int32_t pv[3] = {100000, 100000, 3};
    CHECK(rlx_read(rlx_prod(ti32(1, S(3), pv), NULL, 0, false), &got, sizeof got) == RLX_OK && got == 30000000000LL);
    int64_t lv[2] = {(int64_t)1 << 53, 1};
    CHECK(rlx_read(rlx_sum_all(ti64(1, S(2), lv)), &got, sizeof got) == RLX_OK && got == ((int64_t)1 << 53) + 1);
    /* i64 beyond 2^53: max/min/argmax exact. */
    int64_t l53[3] = {(int64_t)1 << 53, ((int64_t)1 << 53) + 1, (int64_t)1 << 53};
    rlx_tensor *x53 = ti64(1, S(3), l53);
    CHECK(rlx_read(rlx_max(x53, NULL, 0, false), &got, 8) == RLX_OK && got == l53[1]);
    CHECK(rlx_read(rlx_min(x53, NULL, 0, false), &got, 8) == RLX_OK && got == l53[0]);
    CHECK(rlx_read(rlx_argmax(x53, 0, false), &got, 8) == RLX_OK && got == 1);
    CHECK(rlx_read(rlx_argmin(x53, 0, false), &got, 8) == RLX_OK && got == 0);
    /* Integer mean is not truncated. */
    EXPECT_V("mean i32", rlx_mean(test_tensor(RLX_I32, 1, S(2), V(1, 2)), NULL, 0, false), RLX_F32, 0, NULL, V(1.5), 0, 0);
    /* Known values: population variance and the 2-norm. */
    rlx_tensor *f = test_tensor(RLX_F64, 1, S(4), V(1, 2, 3, 4));
    EXPECT_V("var", rlx_var(f, NULL, 0, false), RLX_F64, 0, NULL, V(1.25), 1e-15, 0);
    EXPECT_V("std", rlx_std(f, NULL, 0, false), RLX_F64, 0, NULL, V(sqrt(1.25)), 1e-15, 0);
    EXPECT_V("norm", rlx_norm(test_tensor(RLX_F32, 1, S(2), V(3, -4)), NULL, 0, false), RLX_F32, 0, NULL, V(5), 1e-7, 0);
}

/* Reducing over an empty axis. */
TEST(reduce_empty)
{
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F32 : RLX_F64;
        rlx_tensor *x = rlx_zeros(dt, 2, S(0, 3));
        const double want[NRED] = {0, NAN, -INFINITY, INFINITY, 1, NAN, NAN, 0};
        for (int k = 0; k < NRED; k++) {
            double e[3] = {want[k], want[k], want[k]};
            EXPECT_V(RED[k].name, RED[k].fn(x, (const int[]){0}, 1, false), dt, 1, S(3), e, 0, 0);
            EXPECT_V(RED[k].name, RED[k].fn(x, NULL, 0, false), dt, 0, NULL, e, 0, 0);
            EXPECT_V(RED[k].name, RED[k].fn(x, (const int[]){1}, 1, true), dt, 2, S(0, 1), NULL, 0, 0);
        }
        EXPECT_V("sum_all empty", rlx_sum_all(x), dt, 0, NULL, V(0), 0, 0);
        EXPECT_V("mean_all empty", rlx_mean_all(x), dt, 0, NULL, V(NAN), 0, 0);
        CHECK_NULL_ERR(rlx_argmax(x, 0, false), RLX_E_SHAPE, "rlx_argmax:");
        CHECK_NULL_ERR(rlx_argmin(x, -2, true), RLX_E_SHAPE, "rlx_argmin:");
        EXPECT_V("argmax along a full axis", rlx_argmax(x, 1, false), RLX_I64, 1, S(0), NULL, 0, 0);
        EXPECT_V("cumsum empty", rlx_cumsum(x, 0, false), dt, 2, S(0, 3), NULL, 0, 0);
    }
    /* Integers: the dtype's lowest/highest; bool false/true; sum/prod i64. */
    rlx_tensor *xi = rlx_zeros(RLX_I32, 2, S(2, 0));
    EXPECT_V("max i32 empty", rlx_max(xi, (const int[]){1}, 1, false), RLX_I32, 1, S(2), V(INT32_MIN, INT32_MIN), 0, 0);
    EXPECT_V("min i32 empty", rlx_min(xi, (const int[]){1}, 1, false), RLX_I32, 1, S(2), V(INT32_MAX, INT32_MAX), 0, 0);
    EXPECT_V("sum i32 empty", rlx_sum(xi, (const int[]){1}, 1, false), RLX_I64, 1, S(2), V(0, 0), 0, 0);
    EXPECT_V("prod i32 empty", rlx_prod(xi, (const int[]){1}, 1, false), RLX_I64, 1, S(2), V(1, 1), 0, 0);
    EXPECT_V("mean i32 empty", rlx_mean(xi, (const int[]){1}, 1, false), RLX_F32, 1, S(2), V(NAN, NAN), 0, 0);
    rlx_tensor *xb = rlx_zeros(RLX_BOOL, 1, S(0));
    EXPECT_V("max bool empty", rlx_max(xb, NULL, 0, false), RLX_BOOL, 0, NULL, V(0), 0, 0);
    EXPECT_V("min bool empty", rlx_min(xb, NULL, 0, false), RLX_BOOL, 0, NULL, V(1), 0, 0);
    int64_t lo = 0, hi = 0;
    rlx_tensor *xl = rlx_zeros(RLX_I64, 1, S(0));
    CHECK(rlx_read(rlx_max(xl, NULL, 0, false), &lo, 8) == RLX_OK && lo == INT64_MIN);
    CHECK(rlx_read(rlx_min(xl, NULL, 0, false), &hi, 8) == RLX_OK && hi == INT64_MAX);
}

/* NaN wins max/min and propagates through sums; infinities are ordinary. */
TEST(reduce_nan_inf)
{
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F32 : RLX_F64;
        double v[12] = {NAN, 1, 2, 3, 4, 5, 6, NAN, -INFINITY, -INFINITY, 7, INFINITY};
        rlx_tensor *x = test_tensor(dt, 2, S(3, 4), v);
        const int ax1[1] = {1}, ax0[1] = {0};
        EXPECT_V("max rows", rlx_max(x, ax1, 1, false), dt, 1, S(3), V(NAN, NAN, INFINITY), 0, 0);
        EXPECT_V("min rows", rlx_min(x, ax1, 1, false), dt, 1, S(3), V(NAN, NAN, -INFINITY), 0, 0);
        EXPECT_V("max cols", rlx_max(x, ax0, 1, true), dt, 2, S(1, 4), V(NAN, 5, 7, NAN), 0, 0);
        EXPECT_V("min cols", rlx_min(x, ax0, 1, false), dt, 1, S(4), V(NAN, -INFINITY, 2, NAN), 0, 0);
        EXPECT_V("sum rows", rlx_sum(x, ax1, 1, false), dt, 1, S(3), V(NAN, NAN, NAN), 0, 0);
        EXPECT_V("max all", rlx_max(x, NULL, 0, false), dt, 0, NULL, V(NAN), 0, 0);
        double w[4] = {-INFINITY, -INFINITY, 1, -INFINITY};
        rlx_tensor *y = test_tensor(dt, 2, S(2, 2), w);
        EXPECT_V("max -inf", rlx_max(y, ax1, 1, false), dt, 1, S(2), V(-INFINITY, 1), 0, 0);
        EXPECT_V("sum -inf", rlx_sum(y, ax1, 1, false), dt, 1, S(2), V(-INFINITY, -INFINITY), 0, 0);
    }
}

/* ------------------------------------------------------- argmax, argmin */

/* First index of the max (min) along axis; NaN counts as the extreme. */
static void ref_arg(int argmin, int rank, const int64_t *shape, const double *x, int axis, double *out)
{
    int64_t inner = 1, len = shape[axis];
    for (int d = axis + 1; d < rank; d++)
        inner *= shape[d];
    int64_t outer = test_numel(rank, shape) / (len * inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t best = 0;
            double bv = x[o * len * inner + i];
            for (int64_t k = 1; k < len && !isnan(bv); k++) {
                double v = x[(o * len + k) * inner + i];
                if (isnan(v) || (argmin ? v < bv : v > bv)) {
                    best = k;
                    bv = v;
                }
            }
            out[o * inner + i] = (double)best;
        }
}

TEST(argmax_argmin)
{
    /* Ties, NaN, infinities, on every dtype that can hold them. */
    static const struct { double v[5]; double amax, amin; int floats; } C[] = {
        {{1, 3, 3, 2, 0}, 1, 4, 0}, {{2, 1, 1, 5, 5}, 3, 1, 0}, {{7, 7, 7, 7, 7}, 0, 0, 0},
        {{1, NAN, 3, NAN, -1}, 1, 1, 1}, {{-INFINITY, -INFINITY, -5, INFINITY, INFINITY}, 3, 0, 1},
        {{0, 1, 1, 0, 1}, 1, 0, 0},
    };
    static const rlx_dtype dts[5] = {RLX_F32, RLX_F64, RLX_I32, RLX_I64, RLX_BOOL};
    for (size_t c = 0; c < sizeof C / sizeof *C; c++)
        for (int d = 0; d < (C[c].floats ? 2 : (c == 5 ? 5 : 4)); d++) {
            double v[5];
            memcpy(v, C[c].v, sizeof v);
            rlx_tensor *x = test_tensor(dts[d], 1, S(5), v);
            char what[64];
            snprintf(what, sizeof what, "argmax case %zu %s", c, rlx_dtype_name(dts[d]));
            EXPECT_V(what, rlx_argmax(x, 0, false), RLX_I64, 0, NULL, V(C[c].amax), 0, 0);
            EXPECT_V(what, rlx_argmin(x, -1, true), RLX_I64, 1, S(1), V(C[c].amin), 0, 0);
        }
    /* Random [4,5,6] with many ties, every axis, keepdim, f32/f64/i32 and a
     * transposed view. */
    const int64_t s[3] = {4, 5, 6};
    for (int d = 0; d < 3; d++) {
        rlx_dtype dt = d == 0 ? RLX_F64 : d == 1 ? RLX_F32 : RLX_I32;
        double *v = rand_vals(120, -3, 3, 1), pv[120], e[120];
        rlx_tensor *x = test_tensor(dt, 3, s, v);
        int64_t vs[3];
        rlx_tensor *xv = permuted(x, v, s, (const int[]){2, 0, 1}, pv, vs);
        for (int view = 0; view < 2; view++)
            for (int axis = -3; axis < 3; axis++)
                for (int am = 0; am < 2; am++) {
                    const int64_t *sh = view ? vs : s;
                    int ax = axis < 0 ? axis + 3 : axis;
                    ref_arg(am, 3, sh, view ? pv : v, ax, e);
                    int64_t os[3];
                    int k = 0;
                    for (int i = 0; i < 3; i++)
                        if (i != ax || am)
                            os[k++] = i == ax ? 1 : sh[i];
                    char what[96];
                    snprintf(what, sizeof what, "%s %s axis %d%s", am ? "argmin" : "argmax", rlx_dtype_name(dt), axis,
                             view ? " view" : "");
                    rlx_tensor *r = am ? rlx_argmin(view ? xv : x, axis, true) : rlx_argmax(view ? xv : x, axis, false);
                    EXPECT_V(what, r, RLX_I64, k, os, e, 0, 0);
                }
        free(v);
    }
    /* Rank 0: axis 0 or -1, index 0, rank 0 result. */
    rlx_tensor *sc = rlx_scalar(RLX_F32, 4);
    EXPECT_V("argmax rank 0", rlx_argmax(sc, 0, false), RLX_I64, 0, NULL, V(0), 0, 0);
    EXPECT_V("argmin rank 0", rlx_argmin(sc, -1, true), RLX_I64, 0, NULL, V(0), 0, 0);
    CHECK_NULL_ERR(rlx_argmax(sc, 1, false), RLX_E_ARG, "rlx_argmax:");
    CHECK_NULL_ERR(rlx_argmin(sc, -2, false), RLX_E_ARG, "rlx_argmin:");
}

/* -------------------------------------------------------------- logsumexp */

static double ref_lse(const double *x, int64_t n, int64_t stride)
{
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i * stride]))
            return NAN;
        if (x[i * stride] > m)
            m = x[i * stride];
    }
    if (isinf(m))
        return m;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += exp(x[i * stride] - m);
    return m + log(s);
}

TEST(logsumexp)
{
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F32 : RLX_F64;
        double tol = d ? 1e-5 : 1e-12;
        double *v = rand_vals(20, -20, 20, 0);
        rlx_tensor *x = test_tensor(dt, 2, S(4, 5), v);
        double e0[5], e1[4];
        for (int j = 0; j < 5; j++)
            e0[j] = ref_lse(v + j, 4, 5);
        for (int i = 0; i < 4; i++)
            e1[i] = ref_lse(v + 5 * i, 5, 1);
        EXPECT_V("lse axis 0", rlx_logsumexp(x, 0, false), dt, 1, S(5), e0, tol, tol);
        EXPECT_V("lse axis -2 keepdim", rlx_logsumexp(x, -2, true), dt, 2, S(1, 5), e0, tol, tol);
        EXPECT_V("lse axis 1", rlx_logsumexp(x, 1, false), dt, 1, S(4), e1, tol, tol);
        EXPECT_V("lse axis -1 keepdim", rlx_logsumexp(x, -1, true), dt, 2, S(4, 1), e1, tol, tol);
        /* Transposed view: lse over its axis 0 is lse over x's axis 1. */
        EXPECT_V("lse view", rlx_logsumexp(rlx_t(x), 0, false), dt, 1, S(4), e1, tol, tol);
        /* Large values, an all -inf row, +inf, NaN. */
        double w[15] = {1000, 1000, 999, -1000, -1000, -1001, -INFINITY, -INFINITY, -INFINITY,
                        INFINITY, 1, -INFINITY, NAN, 0, 1};
        rlx_tensor *y = test_tensor(dt, 2, S(5, 3), w);
        double ew[5];
        for (int i = 0; i < 5; i++)
            ew[i] = ref_lse(w + 3 * i, 3, 1);
        CHECK(fabs(ew[0] - (1000 + log(2 + exp(-1)))) < 1e-12 && ew[2] == -INFINITY);
        EXPECT_V("lse extremes", rlx_logsumexp(y, 1, false), dt, 1, S(5), ew, tol, 0);
        free(v);
    }
    /* Integer input: f32 result. */
    EXPECT_V("lse i32", rlx_logsumexp(test_tensor(RLX_I32, 1, S(2), V(0, 0)), 0, false), RLX_F32, 0, NULL, V(log(2)), 1e-6, 0);
}

/* --------------------------------------------------------------- cumsum */

static void ref_cumsum(int rank, const int64_t *shape, const double *x, int axis, int exclusive, double *out)
{
    int64_t inner = 1, len = shape[axis];
    for (int d = axis + 1; d < rank; d++)
        inner *= shape[d];
    int64_t outer = len ? test_numel(rank, shape) / (len * inner) : 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t k = 0; k < len; k++) {
                int64_t at = (o * len + k) * inner + i;
                if (exclusive)
                    out[at] = s;
                s += x[at];
                if (!exclusive)
                    out[at] = s;
            }
        }
}

TEST(cumsum)
{
    const int64_t s[3] = {3, 4, 5};
    static const rlx_dtype dts[5] = {RLX_F64, RLX_F32, RLX_I32, RLX_I64, RLX_BOOL};
    for (int d = 0; d < 5; d++) {
        rlx_dtype dt = dts[d], od = dt >= RLX_F32 ? dt : RLX_I64;
        double tol = dt == RLX_F32 ? 1e-5 : dt == RLX_F64 ? 1e-12 : 0;
        double *v = rand_vals(60, -5, 5, dt < RLX_F32), pv[60], e[60];
        rlx_tensor *x = test_tensor(dt, 3, s, v);
        int64_t vs[3];
        rlx_tensor *xv = permuted(x, v, s, (const int[]){1, 2, 0}, pv, vs);
        for (int view = 0; view < 2; view++)
            for (int axis = -3; axis < 3; axis++)
                for (int ex = 0; ex < 2; ex++) {
                    ref_cumsum(3, view ? vs : s, view ? pv : v, (axis + 3) % 3, ex, e);
                    char what[96];
                    snprintf(what, sizeof what, "cumsum %s axis %d%s%s", rlx_dtype_name(dt), axis,
                             ex ? " exclusive" : "", view ? " view" : "");
                    EXPECT_V(what, rlx_cumsum(view ? xv : x, axis, ex), od, 3, view ? vs : s, e, tol, tol);
                }
        free(v);
    }
    rlx_tensor *x = test_tensor(RLX_F64, 1, S(4), V(1, 2, 3, 4));
    EXPECT_V("cumsum", rlx_cumsum(x, 0, false), RLX_F64, 1, S(4), V(1, 3, 6, 10), 0, 0);
    EXPECT_V("cumsum exclusive", rlx_cumsum(x, -1, true), RLX_F64, 1, S(4), V(0, 1, 3, 6), 0, 0);
    /* i32 running sums that leave the i32 range. */
    int32_t big[3] = {INT32_MAX, INT32_MAX, INT32_MAX};
    int64_t got[3] = {0, 0, 0};
    CHECK(rlx_read(rlx_cumsum(ti32(1, S(3), big), 0, false), got, sizeof got) == RLX_OK &&
          got[2] == 3LL * INT32_MAX && got[1] == 2LL * INT32_MAX);
    EXPECT_V("cumsum empty axis", rlx_cumsum(rlx_zeros(RLX_I32, 2, S(2, 0)), 1, true), RLX_I64, 2, S(2, 0), NULL, 0, 0);
}

TEST(sum_all_mean_all)
{
    for (int d = 0; d < 2; d++) {
        rlx_dtype dt = d ? RLX_F32 : RLX_F64;
        double *v = rand_vals(60, -2, 2, 0), pv[60], s = 0;
        rlx_tensor *x = test_tensor(dt, 3, S(3, 4, 5), v);
        for (int i = 0; i < 60; i++)
            s += v[i];
        double tol = d ? 1e-5 : 1e-12;
        EXPECT_V("sum_all", rlx_sum_all(x), dt, 0, NULL, V(s), tol, tol);
        EXPECT_V("mean_all", rlx_mean_all(x), dt, 0, NULL, V(s / 60), tol, tol);
        int64_t vs[3];
        rlx_tensor *xv = permuted(x, v, S(3, 4, 5), (const int[]){2, 1, 0}, pv, vs);
        EXPECT_V("sum_all view", rlx_sum_all(xv), dt, 0, NULL, V(s), tol, tol);
        EXPECT_V("mean_all view", rlx_mean_all(xv), dt, 0, NULL, V(s / 60), tol, tol);
        EXPECT_V("sum_all rank 0", rlx_sum_all(rlx_scalar(dt, -2.5)), dt, 0, NULL, V(-2.5), 0, 0);
        free(v);
    }
    rlx_tensor *b = test_tensor(RLX_BOOL, 2, S(2, 2), V(1, 0, 1, 1));
    EXPECT_V("sum_all bool", rlx_sum_all(b), RLX_I64, 0, NULL, V(3), 0, 0);
    EXPECT_V("mean_all bool", rlx_mean_all(b), RLX_F32, 0, NULL, V(0.75), 0, 0);
    rlx_tensor *i = test_tensor(RLX_I32, 1, S(3), V(1, 2, 4));
    EXPECT_V("sum_all i32", rlx_sum_all(i), RLX_I64, 0, NULL, V(7), 0, 0);
    EXPECT_V("mean_all i32", rlx_mean_all(i), RLX_F32, 0, NULL, V(7.0 / 3), 1e-6, 0);
}

/* ------------------------------------------------- f32 sum error bound */

/* The bound include/rlx.h documents for a sum of n values of f32, f16 or
 * bf16 (blocks of at most m = 1024 elements summed in f32 in any order,
 * block sums added in order in f64, one rounding to the output's unit
 * roundoff uo): |got - s| <= uo |s| + (1 + uo) (g(m-1) + g64(n) (1 + g(m-1))) sum|x|,
 * g(k) = k u / (1 - k u), u = 2^-24, g64 with 2^-53. */
static double sum_bound(int64_t n, double uo, double s, double abs)
{
    const double u = 0x1p-24, u64 = 0x1p-53, m = 1024;
    double g = (m - 1) * u / (1 - (m - 1) * u), g64 = (double)n * u64 / (1 - (double)n * u64);
    return uo * fabs(s) + (1 + uo) * (g + g64 * (1 + g)) * abs;
}
/* The same for reduce_acc_f64=1: every element added in f64. */
static double sum_bound_f64(int64_t n, double uo, double s, double abs)
{
    double g64 = (double)n * 0x1p-53 / (1 - (double)n * 0x1p-53);
    return uo * fabs(s) + (1 + uo) * g64 * abs;
}

/* Compensated (Neumaier) sums of x[i*stride], i < n: the reference. */
static void ref_sum(const float *x, int64_t n, int64_t stride, double *s, double *abs)
{
    double sum = 0, c = 0, a = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i * stride], t = sum + v;
        c += fabs(sum) >= fabs(v) ? (sum - t) + v : (v - t) + sum;
        sum = t;
        a += fabs(v);
    }
    *s = sum + c;
    *abs = a;
}

/* The old naive loop: one f32 accumulator, in order. */
static double naive_f32(const float *x, int64_t n)
{
    volatile float acc = 0; /* (no reassociation) */
    for (int64_t i = 0; i < n; i++)
        acc += x[i];
    return acc;
}

/* The sums along axis of the [rows, cols] matrix x (row sums: axis 1, or
 * each row broadcast back through a row kernel, phase 1; column sums:
 * axis 0) against the bound; the worst error over the bound returned. */
static double check_sums(const char *what, const float *x, int64_t rows, int64_t cols, int axis, int phase,
                         rlx_dtype dt, double uo, bool f64)
{
    int64_t shape[2] = {rows, cols}, n = 0;
    float *q = NULL;
    if (dt != RLX_F32) { /* the values dt holds: the reference's too */
        q = malloc((size_t)(rows * cols) * sizeof *q);
        for (int64_t i = 0; i < rows * cols; i++)
            q[i] = (float)test_quantize(dt, x[i]);
        x = q;
    }
    rlx_tensor *t = tf32(2, shape, x);
    if (dt != RLX_F32)
        t = rlx_cast(t, dt);
    rlx_tensor *r = rlx_sum(t, (const int[]){axis}, 1, phase != 0);
    if (phase) /* a phase of a row kernel: 0*x + sum, stored per element */
        r = rlx_add(rlx_mul(t, rlx_scalar(dt, 0)), r);
    double *got = test_values(r, &n);
    double worst = 0;
    int64_t outs = axis == 1 ? rows : cols, len = axis == 1 ? cols : rows;
    for (int64_t o = 0; got && o < outs; o++) {
        double s, abs;
        ref_sum(axis == 1 ? x + o * cols : x + o, len, axis == 1 ? 1 : cols, &s, &abs);
        double b = f64 ? sum_bound_f64(len, uo, s, abs) : sum_bound(len, uo, s, abs);
        double g = got[phase ? o * cols + cols - 1 : o], e = fabs(g - s);
        if (!(e <= b))
            test_fail(__FILE__, __LINE__, "%s %s%s: sum %lld got %.9g want %.9g: error %.3g over the bound %.3g", what,
                      rlx_dtype_name(dt), f64 ? " (reduce_acc_f64)" : "", (long long)o, g, s, e, b);
        if (e / b > worst)
            worst = e / b;
    }
    free(got);
    free(q);
    return worst;
}

/* Long f32 sums (up to 10^7 elements; many small values after a large
 * one, alternating signs, random) against a compensated double reference
 * within the documented bound, for row sums, column sums (the blocked
 * dim keeps tail dims), a row kernel's phase and f16/bf16; with
 * reduce_acc_f64=1 within the f64 policy's bound. The bound is not
 * vacuous: the naive f32 loop breaks it. */
TEST(sum_f32_error_bound)
{
    const int64_t N = 10000000;
    float *x = malloc((size_t)N * sizeof *x);
    /* a large value, then many small ones each below its half ulp */
    x[0] = 1;
    for (int64_t i = 1; i < N; i++)
        x[i] = 1e-8f;
    double s, abs;
    ref_sum(x, N, 1, &s, &abs);
    double naive = fabs(naive_f32(x, N) - s), b = sum_bound(N, 0x1p-24, s, abs);
    if (!(naive > 100 * b))
        test_fail(__FILE__, __LINE__, "the naive f32 loop's error %.3g is within 100x the bound %.3g", naive, b);
    for (int f64 = 0; f64 < 2; f64++) {
        CHECK(rlx_set_option("reduce_acc_f64", f64 ? "1" : "0") == RLX_OK);
        check_sums("large then small, one row", x, 1, N, 1, 0, RLX_F32, 0x1p-24, f64);
        check_sums("large then small, 10 rows", x, 10, N / 10, 1, 0, RLX_F32, 0x1p-24, f64);
        check_sums("large then small, row kernel", x, 10, N / 10, 1, 1, RLX_F32, 0x1p-24, f64);
        check_sums("large then small, columns", x, N / 5, 5, 0, 0, RLX_F32, 0x1p-24, f64);
    }
    /* alternating signs around 1 and 2^12: the sum far below sum|x| */
    for (int64_t i = 0; i < N; i++)
        x[i] = (float)((i & 1 ? -1 : 1) * (i % 3 ? 1 + 0x1p-12 * (double)(i % 4093) : 4096 + (double)(i % 7)));
    for (int f64 = 0; f64 < 2; f64++) {
        CHECK(rlx_set_option("reduce_acc_f64", f64 ? "1" : "0") == RLX_OK);
        check_sums("alternating, one row", x, 1, N, 1, 0, RLX_F32, 0x1p-24, f64);
        check_sums("alternating, 7 rows", x, 7, N / 7, 1, 1, RLX_F32, 0x1p-24, f64);
        check_sums("alternating, columns", x, N / 8, 8, 0, 0, RLX_F32, 0x1p-24, f64);
    }
    /* random rows of odd lengths (partial blocks), all dtypes */
    for (int64_t i = 0; i < N; i++)
        x[i] = (float)test_uniform(0, 0.05);
    static const struct { rlx_dtype dt; double uo; } DT[3] = {{RLX_F32, 0x1p-24}, {RLX_F16, 0x1p-11}, {RLX_BF16, 0x1p-8}};
    static const int64_t SHAPES[][2] = {{3, 1023}, {5, 1025}, {2, 333333}, {1001, 3}, {20011, 129}, {1, 1}};
    CHECK(rlx_set_option("reduce_acc_f64", "0") == RLX_OK);
    for (int gen = 0; gen < 2; gen++) { /* specialized kernels, then size-generic ones (run-time blocks) */
        CHECK(rlx_set_option("generic_kernels", gen ? "2" : "0") == RLX_OK);
        for (int d = 0; d < 3; d++)
            for (size_t k = 0; k < sizeof SHAPES / sizeof *SHAPES; k++)
                for (int axis = 0; axis < 2; axis++)
                    check_sums(gen ? "random, generic" : "random", x, SHAPES[k][0], SHAPES[k][1], axis, axis, DT[d].dt,
                               DT[d].uo, false);
    }
    CHECK(rlx_set_option("generic_kernels", "default") == RLX_OK);
    CHECK(rlx_set_option("reduce_acc_f64", "default") == RLX_OK);
    free(x);
}

/* A large softmax sums exp(x - max) in the chunks of its prefetching pass
 * (passes/rowplan.c: the chunks are the blocks): each value within the sum's
 * bound (all terms positive: relative g(255) at most, m = the chunk) plus
 * a few ulps of exp and the division, against double. */
TEST(softmax_chunked_sum_bound)
{
    const int64_t R = 8, C = 1 << 18, shape[2] = {R, C}; /* 8 MiB: chunked */
    float *x = malloc((size_t)(R * C) * sizeof *x);
    for (int64_t i = 0; i < R * C; i++)
        x[i] = (float)test_uniform(-4, 4);
    x[5] = 30; /* one term dominating row 0 */
    int64_t n = 0;
    double *got = test_values(rlx_softmax(tf32(2, shape, x), -1), &n);
    const double u = 0x1p-24, tol = 255 * u / (1 - 255 * u) + 16 * u;
    double worst = 0;
    for (int64_t r = 0; got && r < R; r++) {
        const float *xr = x + r * C;
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < C; j++)
            m = xr[j] > m ? xr[j] : m;
        for (int64_t j = 0; j < C; j++)
            s += exp((double)xr[j] - m);
        for (int64_t j = 0; j < C; j++) {
            double want = exp((double)xr[j] - m) / s, e = fabs(got[r * C + j] - want) / want;
            worst = e > worst ? e : worst;
        }
    }
    if (!(worst <= tol))
        test_fail(__FILE__, __LINE__, "softmax [%lld,%lld]: relative error %.3g over %.3g", (long long)R, (long long)C,
                  worst, tol);
    free(got);
    free(x);
}

/* ------------------------------------------------------------ bad input */

TEST(reduce_bad_input)
{
    rlx_tensor *x = rlx_ones(RLX_F32, 2, S(2, 3));
    static const struct { int ax[2]; int n; } BAD[] = {{{2, 0}, 1}, {{-3, 0}, 1}, {{0, 0}, 2}, {{1, -1}, 2}, {{0, 5}, 2}};
    for (int k = 0; k < NRED; k++) {
        char nm[32];
        snprintf(nm, sizeof nm, "%s:", RED[k].name);
        CHECK_NULL_ERR(RED[k].fn(NULL, NULL, 0, false), RLX_E_ARG, nm);
        CHECK_NULL_ERR(RED[k].fn(NULL, (const int[]){0}, 1, true), RLX_E_ARG, nm);
        for (size_t b = 0; b < sizeof BAD / sizeof *BAD; b++)
            CHECK_NULL_ERR(RED[k].fn(x, BAD[b].ax, BAD[b].n, false), RLX_E_ARG, nm);
        CHECK_NULL_ERR(RED[k].fn(x, NULL, 1, false), RLX_E_ARG, nm);
        CHECK_NULL_ERR(RED[k].fn(x, (const int[]){0}, -1, false), RLX_E_ARG, nm);
        CHECK_KEEPS(RED[k].fn(NULL, NULL, 0, false));
        CHECK_KEEPS(RED[k].fn(NULL, (const int[]){0}, 1, true));
    }
    rlx_tensor *(*const axis_fns[4])(rlx_tensor *, int, bool) = {rlx_argmax, rlx_argmin, rlx_logsumexp, rlx_cumsum};
    static const char *axis_names[4] = {"rlx_argmax:", "rlx_argmin:", "rlx_logsumexp:", "rlx_cumsum:"};
    for (int k = 0; k < 4; k++) {
        CHECK_NULL_ERR(axis_fns[k](NULL, 0, false), RLX_E_ARG, axis_names[k]);
        CHECK_NULL_ERR(axis_fns[k](x, 2, false), RLX_E_ARG, axis_names[k]);
        CHECK_NULL_ERR(axis_fns[k](x, -3, true), RLX_E_ARG, axis_names[k]);
        CHECK_KEEPS(axis_fns[k](NULL, 0, false));
    }
    CHECK_NULL_ERR(rlx_sum_all(NULL), RLX_E_ARG, "rlx_sum_all:");
    CHECK_NULL_ERR(rlx_mean_all(NULL), RLX_E_ARG, "rlx_mean_all:");
    CHECK_KEEPS(rlx_sum_all(NULL));
    CHECK_KEEPS(rlx_mean_all(NULL));
    /* A whole expression over a failed operand is checked once at the end. */
    seed_error();
    rlx_tensor *bad = rlx_arange(RLX_BOOL, 0, 2, 1);
    check_kept(__LINE__, rlx_mean(rlx_sum(rlx_cumsum(bad, 0, false), NULL, 0, false), NULL, 0, false), "chain");
}

static const rlx_dtype NARROW_FLOATS[2] = {RLX_BF16, RLX_F16};

static rlx_tensor *nf_mean(rlx_tensor *const *in) { return rlx_mean(in[0], (const int[]){1}, 1, false); }
static rlx_tensor *nf_var(rlx_tensor *const *in) { return rlx_var(in[0], NULL, 0, false); }
static rlx_tensor *nf_std(rlx_tensor *const *in) { return rlx_std(in[0], (const int[]){0}, 1, true); }
static rlx_tensor *nf_norm(rlx_tensor *const *in) { return rlx_norm(in[0], (const int[]){1}, 1, false); }
static rlx_tensor *nf_lse(rlx_tensor *const *in) { return rlx_logsumexp(in[0], 1, false); }
static rlx_tensor *nf_sum(rlx_tensor *const *in) { return rlx_sum(in[0], (const int[]){1}, 1, false); }

/* Statistics of f16/bf16 are computed in f32 and rounded once, so they
 * match f32's rounded (a mean summed in f16 would drift by many ulps over
 * 300 elements); sum keeps the dtype (accumulated wide by the evaluator). */
TEST(reduce_narrow_floats)
{
    const int64_t s[2] = {3, 300};
    for (int i = 0; i < 2; i++) {
        rlx_dtype dt = NARROW_FLOATS[i];
        EXPECT_NARROW(nf_mean, dt, 1, ((int[]){2}), ((const int64_t *const[]){s}), 0, 2, 1);
        EXPECT_NARROW(nf_var, dt, 1, ((int[]){2}), ((const int64_t *const[]){s}), 0, 2, 1);
        EXPECT_NARROW(nf_std, dt, 1, ((int[]){2}), ((const int64_t *const[]){s}), 0, 2, 1);
        EXPECT_NARROW(nf_norm, dt, 1, ((int[]){2}), ((const int64_t *const[]){s}), 0, 2, 1);
        EXPECT_NARROW(nf_lse, dt, 1, ((int[]){2}), ((const int64_t *const[]){s}), -3, 3, 1);
        EXPECT_NARROW(nf_sum, dt, 1, ((int[]){2}), ((const int64_t *const[]){s}), 0, 2, 1);
    }
}

/* sum and prod of every integer dtype are i64 (PyTorch), mean of one f32. */
TEST(reduce_narrow_integers)
{
    const int64_t s4[1] = {4};
    const rlx_dtype ints[4] = {RLX_I8, RLX_U8, RLX_I16, RLX_U32};
    EACH_BACKEND(be) for (int i = 0; i < 4; i++) {
        double v[4] = {100, 120, 90, 7};
        rlx_tensor *x = test_tensor(ints[i], 1, s4, v);
        EXPECT(rlx_sum_all(x), RLX_I64, 0, NULL, ((const double[]){317}), 0);
        EXPECT(rlx_prod(x, NULL, 0, false), RLX_I64, 0, NULL, ((const double[]){7560000}), 0);
        EXPECT(rlx_mean_all(x), RLX_F32, 0, NULL, ((const double[]){79.25}), 0);
        EXPECT(rlx_cumsum(x, 0, false), RLX_I64, 1, s4, ((const double[]){100, 220, 310, 317}), 0);
        EXPECT(rlx_max(x, NULL, 0, false), ints[i], 0, NULL, ((const double[]){120}), 0);
    }
}

TEST_MAIN(T(reduce_random_shapes_f64), T(reduce_random_shapes_f32), T(reduce_transposed_views), T(reduce_axes_forms),
          T(reduce_dtypes), T(reduce_empty), T(reduce_nan_inf), T(argmax_argmin), T(logsumexp), T(cumsum),
          T(sum_all_mean_all), T(reduce_bad_input), T(reduce_narrow_floats), T(reduce_narrow_integers),
          T(sum_f32_error_bound), T(softmax_chunked_sum_bound))
