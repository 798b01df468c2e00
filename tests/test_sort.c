/*
 * test_sort.c — rlx_sort, rlx_argsort, rlx_topk and rlx_multinomial.
 *
 * Sorts are checked against a plain stable insertion sort written here
 * (NaN largest, -0 == 0, integers compared exactly), on both backends,
 * over random shapes, every axis, every dtype, many ties and NaNs, and
 * transposed or sliced inputs; by hand on small cases; for the same bits
 * at every thread count. multinomial is checked exactly (a zero weight is
 * never drawn, a single positive weight always is, the same seed gives the
 * same samples on both backends and thread counts) and statistically
 * (per-bin and joint frequencies of 20000 draws against 5-sigma bounds).
 * Every documented error, build-time or found when realizing.
 */
#include "harness.h"

#define SH(...) ((const int64_t[]){__VA_ARGS__})

static const char *const BACKENDS[2] = {"ref", "jit"};
static void backend(const char *b) { rlx_set_option("backend", b); }
static int rand_int(int lo, int hi) { return lo + (int)test_uniform(0, hi - lo + 1); } /* [lo, hi] */

/* ------------------------------------------------------------ reference */

/* A tensor's logical values, exactly: as i64 for bool/int dtypes, as f64
 * for floats (read through a contiguous copy, so views work). */
typedef struct {
    bool fdom;
    int64_t n;
    int64_t *i;
    double *f;
} values;

static values read_values(rlx_tensor *t)
{
    values v = {.fdom = rlx_dtype_of(t) == RLX_F32 || rlx_dtype_of(t) == RLX_F64, .n = rlx_numel(t)};
    size_t n = (size_t)(v.n > 0 ? v.n : 1);
    rlx_tensor *c = rlx_contiguous(t);
    if (v.fdom) {
        v.f = calloc(n, sizeof *v.f);
        CHECK_EQ_INT(rlx_read_f64(c, v.f, n), RLX_OK);
        return v;
    }
    v.i = calloc(n, sizeof *v.i);
    if (rlx_dtype_of(t) == RLX_I64) {
        CHECK_EQ_INT(rlx_read(c, v.i, n * sizeof *v.i), RLX_OK);
    } else if (rlx_dtype_of(t) == RLX_I32) {
        int32_t *b = calloc(n, sizeof *b);
        CHECK_EQ_INT(rlx_read(c, b, n * sizeof *b), RLX_OK);
        for (size_t k = 0; k < n; k++)
            v.i[k] = b[k];
        free(b);
    } else {
        unsigned char *b = calloc(n, 1);
        CHECK_EQ_INT(rlx_read(c, b, n), RLX_OK);
        for (size_t k = 0; k < n; k++)
            v.i[k] = b[k] != 0;
        free(b);
    }
    return v;
}

static void free_values(values *v) { free(v->i), free(v->f); }

/* -1, 0, 1: the documented order (NaN above everything, -0 == 0). */
static int cmp_at(const values *v, int64_t a, int64_t b)
{
    if (!v->fdom)
        return v->i[a] < v->i[b] ? -1 : v->i[a] > v->i[b];
    double x = v->f[a], y = v->f[b];
    if (isnan(x) || isnan(y))
        return isnan(x) - isnan(y);
    return x < y ? -1 : x > y;
}

/* The stable argsort of x along axis as a plain insertion sort per line:
 * want[p] for every position p of x's (contiguous) shape. */
static void ref_argsort(const values *v, int rank, const int64_t *shape, int ax, bool desc, int64_t *want)
{
    int64_t inner = 1, len = shape[ax], outer = 1;
    for (int d = ax + 1; d < rank; d++)
        inner *= shape[d];
    for (int d = 0; d < ax; d++)
        outer *= shape[d];
    int64_t *line = malloc((size_t)(len > 0 ? len : 1) * sizeof *line);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            for (int64_t j = 0; j < len; j++) {
                int64_t k = j;
                for (; k > 0; k--) {
                    int c = cmp_at(v, base + line[k - 1] * inner, base + j * inner);
                    if (desc ? c >= 0 : c <= 0) /* the earlier one stays first when equal */
                        break;
                    line[k] = line[k - 1];
                }
                line[k] = j;
            }
            for (int64_t j = 0; j < len; j++)
                want[base + j * inner] = line[j];
        }
    free(line);
}

/* Checks argsort, sort and topk of x along axis against the reference. */
static void check_sorts(const char *what, rlx_tensor *x, int axis, bool desc)
{
    int rank = rlx_rank(x);
    int64_t shape[8];
    rlx_shape(x, shape, 8);
    int ax = axis < 0 ? axis + rank : axis;
    values v = read_values(x);
    int64_t n = v.n;
    int64_t *want = malloc((size_t)(n > 0 ? n : 1) * sizeof *want);
    ref_argsort(&v, rank, shape, ax, desc, want);
    double *wi = malloc((size_t)(n > 0 ? n : 1) * sizeof *wi), *wv = malloc((size_t)(n > 0 ? n : 1) * sizeof *wv);
    int64_t inner = 1;
    for (int d = ax + 1; d < rank; d++)
        inner *= shape[d];
    for (int64_t p = 0; p < n; p++) {
        int64_t j = (p / inner) % shape[ax], src = p + (want[p] - j) * inner;
        wi[p] = (double)want[p];
        wv[p] = v.fdom ? v.f[src] : (double)v.i[src];
    }
    EXPECT_V(what, rlx_argsort(x, axis, desc), RLX_I64, rank, shape, wi, 0, 0);
    EXPECT_V(what, rlx_sort(x, axis, desc), rlx_dtype_of(x), rank, shape, wv, 0, 0);
    /* topk: the first k of the stable order */
    int64_t k = shape[ax] / 2 + (shape[ax] > 0), ks[8];
    memcpy(ks, shape, sizeof ks);
    ks[ax] = k;
    int64_t kn = test_numel(rank, ks), outer = test_numel(ax, shape);
    double *ti = malloc((size_t)(kn > 0 ? kn : 1) * sizeof *ti), *tv = malloc((size_t)(kn > 0 ? kn : 1) * sizeof *tv);
    for (int64_t o = 0, q = 0; o < outer; o++)
        for (int64_t j = 0; j < k; j++)
            for (int64_t i = 0; i < inner; i++, q++) {
                int64_t p = (o * shape[ax] + j) * inner + i;
                ti[q] = wi[p];
                tv[q] = wv[p];
            }
    rlx_tensor *tval = NULL, *tidx = NULL;
    CHECK_EQ_INT(rlx_topk(x, k, axis, desc, &tval, &tidx), RLX_OK);
    /* largest is the descending order, smallest the ascending one */
    EXPECT_V(what, tidx, RLX_I64, rank, ks, ti, 0, 0);
    EXPECT_V(what, tval, rlx_dtype_of(x), rank, ks, tv, 0, 0);
    free(want), free(wi), free(wv), free(ti), free(tv);
    free_values(&v);
}

/* topk of x along axis against the first k of the reference order. */
static void check_topk(const char *what, rlx_tensor *x, int axis, int64_t k, bool largest)
{
    int rank = rlx_rank(x);
    int64_t shape[8], ks[8];
    rlx_shape(x, shape, 8);
    int ax = axis < 0 ? axis + rank : axis;
    values v = read_values(x);
    int64_t *order = malloc((size_t)(v.n > 0 ? v.n : 1) * sizeof *order);
    ref_argsort(&v, rank, shape, ax, largest, order);
    memcpy(ks, shape, sizeof ks);
    ks[ax] = k;
    int64_t kn = test_numel(rank, ks), inner = test_numel(rank - ax - 1, shape + ax + 1);
    double *ti = malloc((size_t)(kn > 0 ? kn : 1) * sizeof *ti), *tv = malloc((size_t)(kn > 0 ? kn : 1) * sizeof *tv);
    for (int64_t o = 0, q = 0; o < test_numel(ax, shape); o++)
        for (int64_t j = 0; j < k; j++)
            for (int64_t i = 0; i < inner; i++, q++) {
                int64_t base = o * shape[ax] * inner + i, at = order[base + j * inner];
                ti[q] = (double)at;
                tv[q] = v.fdom ? v.f[base + at * inner] : (double)v.i[base + at * inner];
            }
    rlx_tensor *tval = NULL, *tidx = NULL;
    CHECK_EQ_INT(rlx_topk(x, k, axis, largest, &tval, &tidx), RLX_OK);
    EXPECT_V(what, tidx, RLX_I64, rank, ks, ti, 0, 0);
    EXPECT_V(what, tval, rlx_dtype_of(x), rank, ks, tv, 0, 0);
    free(order), free(ti), free(tv);
    free_values(&v);
}

/* ---------------------------------------------------------------- sorts */

TEST(sort_fixed)
{
    for (int b = 0; b < 2; b++) {
        backend(BACKENDS[b]);
        rlx_tensor *x = tf32(1, SH(9), (float[]){3, 1, NAN, 2, 1, -0.0f, 0.0f, NAN, -INFINITY});
        /* np.argsort(kind="stable"); torch.sort(stable=True, descending=True) */
        EXPECT(rlx_argsort(x, 0, false), RLX_I64, 1, SH(9), ((double[]){8, 5, 6, 1, 4, 3, 0, 2, 7}), 0);
        EXPECT(rlx_argsort(x, -1, true), RLX_I64, 1, SH(9), ((double[]){2, 7, 0, 3, 1, 4, 5, 6, 8}), 0);
        EXPECT(rlx_sort(x, 0, false), RLX_F32, 1, SH(9), ((double[]){-INFINITY, 0, 0, 1, 1, 2, 3, NAN, NAN}), 0);
        rlx_tensor *s = rlx_sort(x, 0, false);
        float got[9];
        CHECK_EQ_INT(rlx_read(s, got, sizeof got), RLX_OK);
        CHECK(signbit(got[1]) && !signbit(got[2])); /* -0 and 0 keep their order */
        /* i64 beyond 2^53: exact, not through double */
        rlx_tensor *big = ti64(1, SH(4), (int64_t[]){(1ll << 53) + 1, 1ll << 53, INT64_MIN, INT64_MAX});
        EXPECT(rlx_argsort(big, 0, false), RLX_I64, 1, SH(4), ((double[]){2, 1, 0, 3}), 0);
        EXPECT(rlx_argsort(big, 0, true), RLX_I64, 1, SH(4), ((double[]){3, 0, 1, 2}), 0);
        rlx_tensor *bo = tbool(2, SH(2, 3), (unsigned char[]){1, 0, 1, 0, 0, 1});
        EXPECT(rlx_argsort(bo, 1, false), RLX_I64, 2, SH(2, 3), ((double[]){1, 0, 2, 0, 1, 2}), 0);
        EXPECT(rlx_sort(bo, 0, true), RLX_BOOL, 2, SH(2, 3), ((double[]){1, 0, 1, 0, 0, 1}), 0);
        rlx_tensor *xi = ti32(2, SH(2, 3), (int32_t[]){5, -7, 5, INT32_MIN, 0, -7});
        EXPECT(rlx_sort(xi, 1, true), RLX_I32, 2, SH(2, 3), ((double[]){5, 5, -7, 0, -7, INT32_MIN}), 0);
        EXPECT(rlx_argsort(xi, 0, false), RLX_I64, 2, SH(2, 3), ((double[]){1, 0, 1, 0, 1, 0}), 0);
        /* topk: ties go to the lower index; smallest */
        rlx_tensor *v = NULL, *i = NULL;
        rlx_tensor *t = tf64(1, SH(6), (double[]){1, 4, 4, 2, 4, 0});
        CHECK_EQ_INT(rlx_topk(t, 2, 0, true, &v, &i), RLX_OK);
        EXPECT(v, RLX_F64, 1, SH(2), ((double[]){4, 4}), 0);
        EXPECT(i, RLX_I64, 1, SH(2), ((double[]){1, 2}), 0);
        CHECK_EQ_INT(rlx_topk(t, 3, -1, false, &v, &i), RLX_OK);
        EXPECT(v, RLX_F64, 1, SH(3), ((double[]){0, 1, 2}), 0);
        EXPECT(i, RLX_I64, 1, SH(3), ((double[]){5, 0, 3}), 0);
    }
    backend("jit");
}

TEST(sort_rank0_and_empty)
{
    for (int b = 0; b < 2; b++) {
        backend(BACKENDS[b]);
        rlx_tensor *s = rlx_scalar(RLX_F32, 2.5);
        EXPECT(rlx_sort(s, 0, false), RLX_F32, 0, NULL, ((double[]){2.5}), 0);
        EXPECT(rlx_argsort(s, -1, true), RLX_I64, 0, NULL, ((double[]){0}), 0);
        rlx_tensor *v = NULL, *i = NULL;
        CHECK_EQ_INT(rlx_topk(s, 1, 0, true, &v, &i), RLX_OK);
        EXPECT(v, RLX_F32, 0, NULL, ((double[]){2.5}), 0);
        EXPECT(i, RLX_I64, 0, NULL, ((double[]){0}), 0);
        rlx_tensor *e = rlx_zeros(RLX_F64, 2, SH(3, 0));
        EXPECT(rlx_argsort(e, 1, false), RLX_I64, 2, SH(3, 0), NULL, 0);
        EXPECT(rlx_sort(e, 1, true), RLX_F64, 2, SH(3, 0), NULL, 0);
        EXPECT(rlx_argsort(e, 0, false), RLX_I64, 2, SH(3, 0), NULL, 0);
        CHECK_EQ_INT(rlx_topk(e, 0, 1, true, &v, &i), RLX_OK);
        EXPECT(i, RLX_I64, 2, SH(3, 0), NULL, 0);
        CHECK_EQ_INT(rlx_topk(e, 0, 0, true, &v, &i), RLX_OK); /* k 0 of a non-empty axis */
        EXPECT(v, RLX_F64, 2, SH(0, 0), NULL, 0);
        /* a line of one */
        EXPECT(rlx_argsort(tf32(2, SH(2, 1), (float[]){NAN, 1}), 1, true), RLX_I64, 2, SH(2, 1),
               ((double[]){0, 0}), 0);
    }
    backend("jit");
}

/* Random shapes, every axis, every dtype, ties and NaNs, views. */
TEST(sort_random)
{
    static const rlx_dtype dts[5] = {RLX_BOOL, RLX_I32, RLX_I64, RLX_F32, RLX_F64};
    for (int it = 0; it < 120; it++) {
        rlx_scope_begin();
        int rank = rand_int(1, 4), view = rand_int(0, 2);
        rlx_dtype dt = dts[it % 5];
        int64_t shape[4];
        for (int d = 0; d < rank; d++)
            shape[d] = rand_int(1, it % 7 == 0 ? 40 : 6);
        if (it % 23 == 5)
            shape[rand_int(0, rank - 1)] = 0;
        int64_t n = test_numel(rank, shape);
        double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
        bool ties = it % 2 == 0;
        for (int64_t p = 0; p < n; p++) {
            double r = ties ? (double)rand_int(-2, 2) : test_uniform(-100, 100);
            if ((dt == RLX_F32 || dt == RLX_F64) && rand_int(0, 9) == 0)
                r = rand_int(0, 2) == 0 ? NAN : rand_int(0, 1) ? -0.0 : INFINITY;
            v[p] = r;
        }
        rlx_tensor *x = test_tensor(dt, rank, shape, v);
        if (view == 1 && rank >= 2)
            x = rlx_t(x); /* transposed */
        else if (view == 2 && shape[0] > 1)
            x = rlx_slice(x, 0, RLX_END, RLX_END, -2); /* reversed with a step */
        int xr = rlx_rank(x), axis = rand_int(-xr, xr - 1);
        bool desc = rand_int(0, 1);
        for (int b = 0; b < 2; b++) {
            backend(BACKENDS[b]);
            char what[120];
            snprintf(what, sizeof what, "it %d %s %s rank %d view %d axis %d desc %d", it, BACKENDS[b],
                     rlx_dtype_name(dt), xr, view, axis, desc);
            check_sorts(what, x, axis, desc);
        }
        free(v);
        rlx_scope_end();
    }
    backend("jit");
}

/* Long lines (several merge passes) and many short ones, at 1..4 threads. */
TEST(argsort_bits_do_not_depend_on_threads)
{
    enum { R = 37, L = 5003 };
    float *v = malloc((size_t)R * L * sizeof *v);
    for (int p = 0; p < R * L; p++)
        v[p] = (float)rand_int(-50, 50);
    rlx_tensor *x = tf32(2, SH(R, L), v);
    int64_t *first = malloc((size_t)R * L * sizeof *first), *again = malloc((size_t)R * L * sizeof *again);
    int saved = rlx_get_num_threads();
    for (int axis = 0; axis < 2; axis++)
        for (int t = 1; t <= 4; t++) {
            rlx_set_num_threads(t);
            rlx_tensor *r = rlx_argsort(x, axis, axis == 1);
            CHECK_EQ_INT(rlx_read(r, t == 1 ? first : again, (size_t)R * L * sizeof *first), RLX_OK);
            if (t > 1)
                CHECK(memcmp(first, again, (size_t)R * L * sizeof *first) == 0);
        }
    rlx_set_num_threads(saved);
    check_sorts("long lines", x, 1, true);
    check_sorts("long lines", x, 0, false);
    free(v), free(first), free(again);
}

/* Small k of long lines (the kernel selects instead of sorting): ties,
 * NaNs, sorted, reversed and constant lines, every k up to len/8 and past. */
TEST(topk_long_lines)
{
    enum { L = 3001 };
    float *v = malloc(6 * L * sizeof *v);
    for (int r = 0; r < 6; r++)
        for (int j = 0; j < L; j++) {
            float *e = &v[r * L + j];
            switch (r) {
            case 0: *e = (float)rand_int(-3, 3); break;                     /* heavy ties */
            case 1: *e = rand_int(0, 20) == 0 ? NAN : (float)test_uniform(-1, 1); break;
            case 2: *e = (float)j; break;                                   /* sorted */
            case 3: *e = (float)(L - j); break;                             /* reversed */
            case 4: *e = 1; break;                                          /* constant */
            default: *e = (float)(j % 2 ? j : -j); break;                   /* alternating */
            }
        }
    rlx_tensor *x = tf32(2, SH(6, L), v);
    static const int64_t ks[] = {1, 2, 7, 50, L / 8, L / 8 + 1, L};
    for (int b = 0; b < 2; b++) {
        backend(BACKENDS[b]);
        for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
            for (int largest = 0; largest < 2; largest++) {
                char what[80];
                snprintf(what, sizeof what, "%s k %lld largest %d", BACKENDS[b], (long long)ks[i], largest);
                check_topk(what, x, 1, ks[i], largest);
                if (i < 3)
                    check_topk(what, rlx_t(x), 0, ks[i], largest); /* lines across a view */
            }
        rlx_tensor *xi = rlx_cast(rlx_mul_s(x, 1000), RLX_I64);
        check_topk("i64", xi, -1, 5, true);
        check_topk("i64", xi, -1, 5, false);
    }
    backend("jit");
    free(v);
}

/* sort, topk (two results from one composite), a gradient through the
 * sort and multinomial, built and realized under every allocation failure
 * in turn: RLX_E_NOMEM and no node left behind. */
static int sort_workload(void)
{
    rlx_scope_begin();
    double v[24];
    for (int i = 0; i < 24; i++)
        v[i] = sin(3.0 * i);
    rlx_tensor *x = rlx_from_data(RLX_F64, 2, SH(4, 6), v), *tv = NULL, *ti = NULL, *g = NULL;
    rlx_tensor *s = rlx_sort(rlx_t(x), 0, true);
    rlx_status st = rlx_topk(x, 2, 1, true, &tv, &ti);
    rlx_status sg = s ? rlx_grad(rlx_sum_all(rlx_mul(s, s)), &x, 1, &g) : RLX_E_NOMEM;
    rlx_tensor *m = rlx_multinomial(rlx_exp(x), 3, false, 5), *sv = NULL, *si = NULL;
    rlx_status s0 = rlx_topk(rlx_scalar(RLX_F32, 1), 1, 0, true, &sv, &si);
    rlx_tensor *outs[7] = {s, tv, ti, g, m, sv, si};
    int ok = s && st == RLX_OK && sg == RLX_OK && m && s0 == RLX_OK && rlx_realize_many(outs, 7) == RLX_OK;
    rlx_scope_end();
    return ok;
}

TEST(sort_allocation_failures)
{
    backend("ref");
    ALLOC_WALK(sort_workload, 20);
    backend("jit");
    ALLOC_WALK(sort_workload, 20);
}

TEST(sort_errors)
{
    rlx_tensor *x = tf32(2, SH(2, 3), (float[]){1, 2, 3, 4, 5, 6}), *v = NULL, *i = NULL;
    CHECK_NULL_ERR(rlx_sort(NULL, 0, false), RLX_E_ARG, "rlx_sort");
    CHECK_NULL_ERR(rlx_argsort(NULL, 0, false), RLX_E_ARG, "rlx_argsort");
    CHECK_NULL_ERR(rlx_sort(x, 2, false), RLX_E_ARG, "rlx_sort");
    CHECK_NULL_ERR(rlx_argsort(x, -3, true), RLX_E_ARG, "rlx_argsort");
    CHECK_NULL_ERR(rlx_argsort(rlx_scalar(RLX_I32, 1), 1, true), RLX_E_ARG, "rlx_argsort");
    CHECK_NULL_ERR(rlx_sort(rlx_scalar(RLX_I32, 1), -2, true), RLX_E_ARG, "rlx_sort");
    /* any dim may be dynamic (test_dynamic_ops.c checks the values); axis errors stay */
    rlx_tensor *dyn = rlx_input("x", RLX_F32, 2, SH(-1, 3));
    CHECK_NULL_ERR(rlx_sort(dyn, 2, false), RLX_E_ARG, "rlx_sort");
    /* topk: k out of range names k and the axis length */
    CHECK_EQ_INT(rlx_topk(x, 4, 1, true, &v, &i), RLX_E_ARG);
    CHECK(!v && !i);
    CHECK(strstr(rlx_last_error(), "rlx_topk") && strstr(rlx_last_error(), "k 4") &&
          strstr(rlx_last_error(), "length 3"));
    CHECK_ERR(rlx_topk(x, -1, 0, true, &v, &i), RLX_E_ARG, "rlx_topk");
    CHECK_ERR(rlx_topk(x, 1, 2, true, &v, &i), RLX_E_ARG, "rlx_topk");
    CHECK_ERR(rlx_topk(rlx_scalar(RLX_F32, 1), 0, 0, true, &v, &i), RLX_E_ARG, "rlx_topk");
    CHECK_ERR(rlx_topk(x, 1, 0, true, NULL, &i), RLX_E_ARG, "rlx_topk");
    CHECK(!i);
    CHECK_ERR(rlx_topk(x, 1, 0, true, &v, NULL), RLX_E_ARG, "rlx_topk");
    CHECK(!v);
    CHECK_ERR(rlx_topk(NULL, 1, 0, true, &v, &i), RLX_E_ARG, "rlx_topk");
    CHECK_ERR(rlx_topk(dyn, -1, 0, true, &v, &i), RLX_E_ARG, "rlx_topk");
    /* NULL propagation keeps the first error */
    rlx_clear_error();
    CHECK(!rlx_reshape(x, 1, SH(7)));
    rlx_status first = rlx_last_status();
    CHECK(!rlx_sort(rlx_reshape(x, 1, SH(7)), 0, false));
    CHECK(rlx_topk(NULL, 1, 0, true, &v, &i) == first && !v && !i);
    CHECK_EQ_INT(rlx_last_status(), first);
    rlx_clear_error();
}

/* ----------------------------------------------------------- multinomial */

static int64_t *draw(rlx_tensor *p, int64_t s, bool repl, uint64_t seed, int64_t *count)
{
    rlx_tensor *m = rlx_multinomial(p, s, repl, seed);
    if (!m) {
        test_fail(__FILE__, __LINE__, "multinomial did not build: %s", rlx_last_error());
        return NULL;
    }
    *count = rlx_numel(m);
    int64_t *out = malloc((size_t)(*count > 0 ? *count : 1) * sizeof *out);
    CHECK_EQ_INT(rlx_dtype_of(m), RLX_I64);
    CHECK_EQ_INT(rlx_read(m, out, (size_t)*count * sizeof *out), RLX_OK);
    return out;
}

TEST(multinomial_exact)
{
    int64_t *seen[2][4] = {{0}};
    int64_t cnt = 0;
    for (int b = 0; b < 2; b++) {
        backend(BACKENDS[b]);
        rlx_tensor *w = tf32(2, SH(3, 5), (float[]){0, 2, 0, 1, 0, /**/ 0, 0, 0, 7, 0, /**/ 1, 1, 1, 1, 1});
        seen[b][0] = draw(w, 300, true, 11, &cnt);
        CHECK_EQ_INT(cnt, 900);
        for (int64_t s = 0; s < 300; s++) {
            int64_t a = seen[b][0][s], c = seen[b][0][300 + s], e = seen[b][0][600 + s];
            CHECK(a == 1 || a == 3);         /* a zero weight is never drawn */
            CHECK_EQ_INT(c, 3);              /* a single positive weight always is */
            CHECK(e >= 0 && e < 5);
        }
        /* without replacement: distinct, every positive weight once when S = count */
        rlx_tensor *w1 = tf64(2, SH(2, 6), (double[]){0, 5, 1e-3, 0, 2, 9, /**/ 1, 1, 1, 1, 1, 1});
        seen[b][1] = draw(w1, 3, false, 5, &cnt);
        bool got[6] = {0};
        for (int s = 0; s < 3; s++) {
            int64_t k = seen[b][1][s];
            CHECK(k == 1 || k == 2 || k == 4 || k == 5);
            CHECK(k >= 0 && k < 6 && !got[k]);
            if (k >= 0 && k < 6)
                got[k] = true;
        }
        int64_t *all = draw(rlx_slice(w1, 0, 0, 1, 1), 4, false, 9, &cnt);
        bool hit[6] = {0};
        for (int s = 0; s < 4; s++)
            if (all[s] >= 0 && all[s] < 6)
                hit[all[s]] = true;
        CHECK(hit[1] && hit[2] && hit[4] && hit[5]);
        free(all);
        /* integer weights, a broadcast view, [N] */
        seen[b][2] = draw(rlx_broadcast_to(ti32(1, SH(3), (int32_t[]){0, 3, 0}), 2, SH(4, 3)), 5, true, 1, &cnt);
        for (int s = 0; s < 20; s++)
            CHECK_EQ_INT(seen[b][2][s], 1);
        seen[b][3] = draw(tf32(1, SH(4), (float[]){1, 2, 3, 4}), 64, true, 77, &cnt);
        CHECK_EQ_INT(cnt, 64);
        /* empty results */
        EXPECT(rlx_multinomial(w, 0, false, 1), RLX_I64, 2, SH(3, 0), NULL, 0);
        EXPECT(rlx_multinomial(rlx_zeros(RLX_F32, 2, SH(0, 4)), 2, true, 1), RLX_I64, 2, SH(0, 2), NULL, 0);
    }
    /* the same seed: the same samples on both backends; another seed differs */
    CHECK(memcmp(seen[0][0], seen[1][0], 900 * sizeof(int64_t)) == 0);
    CHECK(memcmp(seen[0][1], seen[1][1], 6 * sizeof(int64_t)) == 0);
    CHECK(memcmp(seen[0][3], seen[1][3], 64 * sizeof(int64_t)) == 0);
    int64_t *other = draw(tf32(1, SH(4), (float[]){1, 2, 3, 4}), 64, true, 78, &cnt);
    CHECK(memcmp(seen[0][3], other, 64 * sizeof(int64_t)) != 0);
    free(other);
    /* and at every thread count */
    int saved = rlx_get_num_threads();
    float *big = malloc(64 * 3000 * sizeof *big);
    for (int p = 0; p < 64 * 3000; p++)
        big[p] = (float)test_uniform(0, 1);
    rlx_tensor *bw = tf32(2, SH(64, 3000), big);
    int64_t *t1 = NULL;
    for (int t = 1; t <= 3; t++)
        for (int repl = 0; repl < 2; repl++) {
            rlx_set_num_threads(t);
            int64_t *r = draw(bw, 50, repl, 3, &cnt);
            if (t == 1 && repl == 0)
                t1 = r;
            else {
                if (repl == 0)
                    CHECK(memcmp(t1, r, (size_t)cnt * sizeof *r) == 0);
                free(r);
            }
        }
    rlx_set_num_threads(saved);
    free(t1), free(big);
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 4; k++)
            free(seen[b][k]);
    backend("jit");
}

/* |observed - expected| within 5 sigma of a binomial count. */
static void check_count(const char *what, int64_t got, double n, double p)
{
    double sd = sqrt(n * p * (1 - p)), d = fabs((double)got - n * p);
    if (d > 5 * sd + 1)
        test_fail(__FILE__, __LINE__, "%s: count %lld, expected %.1f (sd %.1f)", what, (long long)got, n * p, sd);
}

TEST(multinomial_statistics)
{
    enum { S = 20000 };
    const double w[5] = {0.5, 3, 0, 1.5, 5}, tot = 10;
    for (int b = 0; b < 2; b++) {
        backend(BACKENDS[b]);
        rlx_tensor *p = tf64(1, SH(5), (double[]){0.5, 3, 0, 1.5, 5});
        int64_t cnt = 0, *r = draw(p, S, true, 2024, &cnt), bins[5] = {0};
        for (int s = 0; s < S; s++)
            bins[r[s] >= 0 && r[s] < 5 ? r[s] : 2]++;
        CHECK_EQ_INT(bins[2], 0);
        double chi2 = 0;
        for (int k = 0; k < 5; k++) {
            char what[64];
            snprintf(what, sizeof what, "%s with replacement, bin %d", BACKENDS[b], k);
            check_count(what, bins[k], S, w[k] / tot);
            if (w[k] > 0)
                chi2 += pow((double)bins[k] - S * w[k] / tot, 2) / (S * w[k] / tot);
        }
        CHECK(chi2 < 20); /* 3 degrees of freedom: p < 2e-4 */
        free(r);
        /* without replacement, 2 of 5 per row over S rows: the first draw
         * follows w, the second w without the first */
        int64_t *q = draw(rlx_broadcast_to(p, 2, SH(S, 5)), 2, false, 7, &cnt), first[5] = {0}, pair[5][5] = {{0}};
        for (int s = 0; s < S; s++) {
            int64_t a = q[2 * s], c = q[2 * s + 1];
            if (a < 0 || a > 4 || c < 0 || c > 4 || a == c || w[a] == 0 || w[c] == 0) {
                test_fail(__FILE__, __LINE__, "row %d draws %lld, %lld", s, (long long)a, (long long)c);
                break;
            }
            first[a]++;
            pair[a][c]++;
        }
        for (int a = 0; a < 5; a++) {
            char what[64];
            snprintf(what, sizeof what, "%s without replacement, first %d", BACKENDS[b], a);
            check_count(what, first[a], S, w[a] / tot);
            for (int c = 0; c < 5; c++)
                if (c != a && w[a] > 0) {
                    snprintf(what, sizeof what, "%s without replacement, pair %d %d", BACKENDS[b], a, c);
                    check_count(what, pair[a][c], S, w[a] / tot * w[c] / (tot - w[a]));
                }
        }
        free(q);
        /* 2 of 40 (the kernel selects the two largest keys instead of sorting) */
        double w40[40], t40 = 0;
        for (int j = 0; j < 40; j++)
            t40 += w40[j] = j % 5;
        rlx_tensor *p40 = rlx_broadcast_to(tf64(1, SH(40), w40), 2, SH(S, 40));
        int64_t *d = draw(p40, 2, false, 8, &cnt), f40[40] = {0};
        for (int s = 0; s < S; s++) {
            int64_t a = d[2 * s], c = d[2 * s + 1];
            if (a < 0 || a > 39 || c < 0 || c > 39 || a == c || w40[a] == 0 || w40[c] == 0) {
                test_fail(__FILE__, __LINE__, "row %d draws %lld, %lld", s, (long long)a, (long long)c);
                break;
            }
            f40[a]++;
        }
        for (int j = 0; j < 40; j++)
            check_count("2 of 40, first", f40[j], S, w40[j] / t40);
        /* selecting 2 and sorting all 32 positive keys agree on the first two */
        int64_t *all = draw(p40, 32, false, 8, &cnt);
        for (int s = 0; s < S; s++)
            if (all[32 * s] != d[2 * s] || all[32 * s + 1] != d[2 * s + 1]) {
                test_fail(__FILE__, __LINE__, "row %d: selected %lld %lld, sorted %lld %lld", s, (long long)d[2 * s],
                          (long long)d[2 * s + 1], (long long)all[32 * s], (long long)all[32 * s + 1]);
                break;
            }
        free(d), free(all);
    }
    backend("jit");
}

/* Bad weights are found when realizing: RLX_E_ARG naming the row, nothing drawn. */
TEST(multinomial_runtime_errors)
{
    for (int b = 0; b < 2; b++) {
        backend(BACKENDS[b]);
        struct {
            rlx_tensor *m;
            const char *says;
        } bad[] = {
            {rlx_multinomial(tf32(2, SH(2, 3), (float[]){1, 1, 1, 1, -1, 1}), 1, true, 0), "row 1"},
            {rlx_multinomial(tf32(1, SH(3), (float[]){1, NAN, 1}), 1, true, 0), "row 0"},
            {rlx_multinomial(tf64(1, SH(3), (double[]){1, INFINITY, 1}), 2, false, 0), "row 0"},
            {rlx_multinomial(tf32(2, SH(2, 2), (float[]){1, 0, 0, 0}), 1, true, 0), "no positive weight"},
            {rlx_multinomial(tf64(1, SH(2), (double[]){1e308, 1e308}), 1, true, 0), "infinity"},
            {rlx_multinomial(tf32(1, SH(3), (float[]){0, 2, 0}), 2, false, 0), "1 positive"},
            {rlx_add_s(rlx_multinomial(tf32(1, SH(3), (float[]){0, -0.5f, 0}), 1, true, 0), 1), "row 0"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            if (!bad[i].m) {
                test_fail(__FILE__, __LINE__, "case %zu did not build: %s", i, rlx_last_error());
                continue;
            }
            rlx_clear_error();
            CHECK_EQ_INT(rlx_realize(bad[i].m), RLX_E_ARG);
            const char *msg = rlx_last_error();
            if (strncmp(msg, "rlx_realize", 11) != 0 || !strstr(msg, "multinomial") || !strstr(msg, bad[i].says))
                test_fail(__FILE__, __LINE__, "%s case %zu: message '%s'", BACKENDS[b], i, msg);
            CHECK(!rlx_is_realized(bad[i].m));
            rlx_clear_error();
        }
    }
    backend("jit");
}

TEST(multinomial_errors)
{
    rlx_tensor *p = tf32(1, SH(3), (float[]){1, 2, 3});
    CHECK_NULL_ERR(rlx_multinomial(NULL, 1, true, 0), RLX_E_ARG, "rlx_multinomial");
    CHECK_NULL_ERR(rlx_multinomial(rlx_scalar(RLX_F32, 1), 1, true, 0), RLX_E_SHAPE, "rlx_multinomial");
    CHECK_NULL_ERR(rlx_multinomial(rlx_ones(RLX_F32, 3, SH(1, 2, 3)), 1, true, 0), RLX_E_SHAPE, "rlx_multinomial");
    CHECK_NULL_ERR(rlx_multinomial(rlx_ones(RLX_F32, 2, SH(2, 0)), 1, true, 0), RLX_E_SHAPE, "rlx_multinomial");
    CHECK_NULL_ERR(rlx_multinomial(tbool(1, SH(2), (unsigned char[]){1, 0}), 1, true, 0), RLX_E_DTYPE,
                   "rlx_multinomial");
    CHECK_NULL_ERR(rlx_multinomial(p, -1, true, 0), RLX_E_ARG, "rlx_multinomial");
    rlx_clear_error();
    CHECK(!rlx_multinomial(p, 4, false, 0));
    CHECK(rlx_last_status() == RLX_E_ARG && strstr(rlx_last_error(), "rlx_multinomial") &&
          strstr(rlx_last_error(), "num_samples 4") && strstr(rlx_last_error(), "3 categories"));
    /* a dynamic N traces (values: test_dynamic_ops.c) */
    CHECK(rlx_multinomial(rlx_input("w", RLX_F32, 1, SH(-1)), 1, true, 0) != NULL);
    rlx_clear_error();
}

static const rlx_dtype NARROW_FLOATS[2] = {RLX_BF16, RLX_F16};

static rlx_tensor *nf_sort(rlx_tensor *const *in) { return rlx_sort(in[0], -1, true); }
static rlx_tensor *nf_topk(rlx_tensor *const *in)
{
    rlx_tensor *v = NULL, *i = NULL;
    return rlx_topk(in[0], 3, 0, false, &v, &i) == RLX_OK ? v : NULL;
}

/* Sorting f16/bf16 is exact: the sorted values are f32's on the same
 * values; the positions are argsort's of those values; narrow integers
 * sort as their values (u8 200 after 100, i8 -1 before 0). */
TEST(sort_narrow_dtypes)
{
    const int64_t a[2] = {4, 33};
    for (int i = 0; i < 2; i++) {
        EXPECT_NARROW(nf_sort, NARROW_FLOATS[i], 1, ((int[]){2}), ((const int64_t *const[]){a}), -4, 4, 0);
        EXPECT_NARROW(nf_topk, NARROW_FLOATS[i], 1, ((int[]){2}), ((const int64_t *const[]){a}), -4, 4, 0);
    }
    const int64_t s5[1] = {5};
    EACH_BACKEND(be) {
        double u[5] = {200, 100, 7, 255, 0}, s[5] = {-1, 0, 100, -128, 5};
        EXPECT(rlx_sort(test_tensor(RLX_U8, 1, s5, u), 0, false), RLX_U8, 1, s5, ((const double[]){0, 7, 100, 200, 255}), 0);
        EXPECT(rlx_argsort(test_tensor(RLX_I8, 1, s5, s), 0, false), RLX_I64, 1, s5, ((const double[]){3, 0, 1, 4, 2}), 0);
        double w[5] = {0, 0, 3, 0, 0};
        EXPECT(rlx_multinomial(test_tensor(RLX_F16, 1, s5, w), 2, true, 9), RLX_I64, 1, ((const int64_t[]){2}),
               ((const double[]){2, 2}), 0);
    }
}

/* Sorting lines of a dynamic batch (x [-1, 3, 6] sorted along axis 2 or
 * 1) in one program run at many batch sizes: sort, argsort, topk's values
 * and indices, multinomial draws and the gradient of a loss through
 * topk's values, each equal to the same graph over the bound value. */
static void sort_dyn_graph(rlx_tensor *x, rlx_tensor **out)
{
    rlx_tensor *v = NULL, *i = NULL;
    out[0] = rlx_sort(x, 2, true);
    out[1] = rlx_argsort(x, 1, false);
    CHECK_EQ_INT(rlx_topk(rlx_mul_s(x, -1), 2, -1, true, &v, &i), RLX_OK);
    out[2] = v;
    out[3] = i;
    out[4] = rlx_multinomial(rlx_reshape(rlx_exp(x), 2, SH(-1, 6)), 4, true, 77);
    rlx_tensor *loss = rlx_sum(rlx_mul(v, rlx_sin(v)), NULL, 0, false);
    CHECK_EQ_INT(rlx_grad(loss, &x, 1, &out[5]), RLX_OK);
}

TEST(sort_dynamic_batch)
{
    rlx_tensor *x = rlx_input("x", RLX_F64, 3, SH(-1, 3, 6)), *outs[6];
    sort_dyn_graph(x, outs);
    rlx_program *p = rlx_compile(outs, 6);
    CHECK(p != NULL);
    if (!p)
        return;
    const int64_t batches[] = {1, 4, 0, 2, 7, 4};
    for (size_t k = 0; k < sizeof batches / sizeof *batches; k++) {
        int64_t n = batches[k];
        rlx_tensor *xv = trand(RLX_F64, 3, SH(n, 3, 6), -2, 2), *got[6] = {0}, *want[6];
        CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got), RLX_OK);
        sort_dyn_graph(xv, want);
        for (int o = 0; o < 6; o++) {
            CHECK_EQ_INT(rlx_rank(got[o]), rlx_rank(want[o]));
            for (int d = 0; d < rlx_rank(want[o]); d++)
                CHECK_EQ_INT(rlx_dim(got[o], d), rlx_dim(want[o], d));
            EXPECT_SAME(got[o], want[o], 0);
        }
    }
    rlx_program_free(p);
}

TEST_MAIN(T(sort_fixed), T(sort_rank0_and_empty), T(sort_random), T(argsort_bits_do_not_depend_on_threads),
          T(topk_long_lines), T(sort_allocation_failures),
          T(sort_errors), T(multinomial_exact), T(multinomial_statistics), T(multinomial_runtime_errors),
          T(multinomial_errors), T(sort_narrow_dtypes), T(sort_dynamic_batch))
