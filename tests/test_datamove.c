/*
 * test_datamove.c — cat, stack, tile, flip, roll, pad (every mode), gather, index_select,
 * scatter, scatter_add, index_add, cast, contiguous, stop_gradient.
 *
 * Expected values are computed here with loops over multi-indices. Inputs
 * are random (the harness's fixed seed) and often non-contiguous: stored
 * flipped and read through rlx_slice(.., -1), or stored transposed and read
 * through rlx_t.
 */
#include "harness.h"

#include <limits.h>

#define MAXR RLX_MAX_RANK
#define SH(...) ((const int64_t[]){__VA_ARGS__})
#define TS(...) ((rlx_tensor *const[]){__VA_ARGS__})

static int64_t numel_of(int rank, const int64_t *s)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= s[i];
    return n;
}

static void unravel(int64_t k, int rank, const int64_t *shape, int64_t *idx)
{
    for (int d = rank - 1; d >= 0; d--) {
        idx[d] = shape[d] ? k % shape[d] : 0;
        k = shape[d] ? k / shape[d] : 0;
    }
}

static int64_t ravel(const int64_t *idx, int rank, const int64_t *shape)
{
    int64_t off = 0;
    for (int d = 0; d < rank; d++)
        off = off * shape[d] + idx[d];
    return off;
}

static size_t dsize(rlx_dtype dt) { return dt == RLX_BOOL ? 1 : dt == RLX_I32 || dt == RLX_F32 ? 4 : 8; }

/* A random value that dt holds exactly. */
static double rval(rlx_dtype dt)
{
    switch (dt) {
    case RLX_BOOL: return test_uniform(0, 1) < 0.5;
    case RLX_I32: return floor(test_uniform(-1000, 1000));
    case RLX_I64: return floor(test_uniform(-1e15, 1e15));
    case RLX_F32: return (double)(float)test_uniform(-10, 10);
    default: return test_uniform(-10, 10);
    }
}

static double *rvals(rlx_dtype dt, int64_t n)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = rval(dt);
    return v;
}

static void store(void *buf, rlx_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case RLX_BOOL: ((unsigned char *)buf)[i] = (unsigned char)(v != 0); break;
    case RLX_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case RLX_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case RLX_F32: ((float *)buf)[i] = (float)v; break;
    default: ((double *)buf)[i] = v; break;
    }
}

/* A tensor of dtype dt whose logical values are v (row-major). mode 0:
 * contiguous; 1: stored flipped along axis 0, read through a -1 slice;
 * 2: stored with the last two axes swapped, read through rlx_t. */
static rlx_tensor *make_t(rlx_dtype dt, int rank, const int64_t *shape, const double *v, int mode)
{
    if ((mode == 1 && rank < 1) || (mode == 2 && rank < 2))
        mode = 0;
    int64_t n = numel_of(rank, shape), ps[MAXR], idx[MAXR];
    for (int d = 0; d < rank; d++)
        ps[d] = shape[d];
    if (mode == 2) {
        ps[rank - 1] = shape[rank - 2];
        ps[rank - 2] = shape[rank - 1];
    }
    void *buf = malloc((size_t)(n ? n : 1) * dsize(dt));
    for (int64_t k = 0; k < n; k++) {
        unravel(k, rank, shape, idx);
        if (mode == 1)
            idx[0] = shape[0] - 1 - idx[0];
        if (mode == 2) {
            int64_t t = idx[rank - 1];
            idx[rank - 1] = idx[rank - 2];
            idx[rank - 2] = t;
        }
        store(buf, dt, ravel(idx, rank, ps), v[k]);
    }
    rlx_tensor *p = rlx_from_data(dt, rank, rank ? ps : NULL, buf);
    free(buf);
    if (!p) {
        test_fail(__FILE__, __LINE__, "rlx_from_data: %s", rlx_last_error());
        return NULL;
    }
    return mode == 0 ? p : mode == 1 ? rlx_slice(p, 0, RLX_END, RLX_END, -1) : rlx_t(p);
}

/* NumPy's conversion of a value of one dtype to another (astype). */
static double conv(double v, rlx_dtype from, rlx_dtype to)
{
    switch (to) {
    case RLX_BOOL: return v != 0; /* NaN is true */
    case RLX_I32:
    case RLX_I64: {
        if (from == RLX_I64 && to == RLX_I32)
            return (double)(int32_t)(uint32_t)(uint64_t)(int64_t)v; /* wraps */
        if (from != RLX_F32 && from != RLX_F64)
            return v;
        double lo = to == RLX_I32 ? -2147483648.0 : -9223372036854775808.0;
        double hi = to == RLX_I32 ? 2147483647.0 : 9223372036854775807.0;
        return isnan(v) ? 0 : trunc(v) < lo ? lo : trunc(v) > hi ? hi : trunc(v);
    }
    case RLX_F32: return (double)(float)v;
    default: return v;
    }
}

static rlx_dtype promote(rlx_dtype a, rlx_dtype b) { return a > b ? a : b; }


static int rand_int(int lo, int hi) { return lo + (int)test_uniform(0, hi - lo + 1); } /* [lo, hi] */

/* ------------------------------------------------------------ cat/stack */

TEST(cat_fixed)
{
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {7, 8, 9};
    rlx_tensor *x = tf32(2, SH(2, 3), a), *y = tf32(2, SH(1, 3), b);
    EXPECT(rlx_cat(TS(x, y), 2, 0), RLX_F32, 2, SH(3, 3), ((double[]){1, 2, 3, 4, 5, 6, 7, 8, 9}), 0);
    EXPECT(rlx_cat(TS(y, x), 2, -2), RLX_F32, 2, SH(3, 3), ((double[]){7, 8, 9, 1, 2, 3, 4, 5, 6}), 0);
    rlx_tensor *c = tf32(2, SH(2, 1), (float[]){-1, -2});
    EXPECT(rlx_cat(TS(x, c, x), 3, -1), RLX_F32, 2, SH(2, 7), ((double[]){1, 2, 3, -1, 1, 2, 3, 4, 5, 6, -2, 4, 5, 6}), 0);
    /* a single tensor, and empty pieces */
    EXPECT(rlx_cat(TS(x), 1, 1), RLX_F32, 2, SH(2, 3), ((double[]){1, 2, 3, 4, 5, 6}), 0);
    rlx_tensor *e0 = rlx_from_data(RLX_F32, 2, SH(0, 3), NULL), *e1 = rlx_from_data(RLX_I32, 2, SH(2, 0), NULL);
    EXPECT(rlx_cat(TS(e0, x, e0), 3, 0), RLX_F32, 2, SH(2, 3), ((double[]){1, 2, 3, 4, 5, 6}), 0);
    EXPECT(rlx_cat(TS(e0, e0), 2, 0), RLX_F32, 2, SH(0, 3), NULL, 0);
    EXPECT(rlx_cat(TS(e1, x, e1), 3, 1), RLX_F32, 2, SH(2, 3), ((double[]){1, 2, 3, 4, 5, 6}), 0);
    EXPECT(rlx_cat(TS(e1, e1), 2, 1), RLX_I32, 2, SH(2, 0), NULL, 0);
    EXPECT(rlx_cat(TS(e1, rlx_from_data(RLX_BOOL, 2, SH(2, 0), NULL)), 2, 1), RLX_I32, 2, SH(2, 0), NULL, 0);
    /* empty off the axis */
    EXPECT(rlx_cat(TS(e1, e1, e1), 3, 0), RLX_I32, 2, SH(6, 0), NULL, 0);
    /* promotion: bool < i32 < i64 < f32 < f64 */
    rlx_tensor *tb = tbool(1, SH(2), (unsigned char[]){1, 0}), *t32 = ti32(1, SH(2), (int32_t[]){-7, 9});
    rlx_tensor *t64 = ti64(1, SH(1), (int64_t[]){5000000000LL}), *f32 = tf32(1, SH(1), (float[]){0.5f});
    rlx_tensor *f64 = tf64(1, SH(1), (double[]){0.1});
    EXPECT(rlx_cat(TS(tb, t32), 2, 0), RLX_I32, 1, SH(4), ((double[]){1, 0, -7, 9}), 0);
    EXPECT(rlx_cat(TS(t32, t64), 2, 0), RLX_I64, 1, SH(3), ((double[]){-7, 9, 5000000000.0}), 0);
    EXPECT(rlx_cat(TS(t64, f32), 2, 0), RLX_F32, 1, SH(2), ((double[]){(float)5000000000.0, 0.5}), 0);
    EXPECT(rlx_cat(TS(tb, f32), 2, 0), RLX_F32, 1, SH(3), ((double[]){1, 0, 0.5}), 0);
    EXPECT(rlx_cat(TS(t32, f64, tb), 3, 0), RLX_F64, 1, SH(5), ((double[]){-7, 9, 0.1, 1, 0}), 0);
    EXPECT(rlx_cat(TS(f32, f64), 2, 0), RLX_F64, 1, SH(2), ((double[]){0.5, 0.1}), 0);
    EXPECT(rlx_cat(TS(tb, tb), 2, 0), RLX_BOOL, 1, SH(4), ((double[]){1, 0, 1, 0}), 0);
    /* an empty piece still promotes */
    EXPECT(rlx_cat(TS(t32, rlx_from_data(RLX_F64, 1, SH(0), NULL)), 2, 0), RLX_F64, 1, SH(2), ((double[]){-7, 9}), 0);
}

TEST(cat_random)
{
    static const rlx_dtype dts[] = {RLX_BOOL, RLX_I32, RLX_I64, RLX_F32, RLX_F64};
    for (int it = 0; it < 80; it++) {
        rlx_scope_begin();
        int rank = rand_int(1, 4), ax = rand_int(0, rank - 1), n = rand_int(1, 4);
        int64_t shape[MAXR] = {0}, oshape[MAXR], sizes[4], at[5] = {0};
        for (int d = 0; d < rank; d++)
            shape[d] = rand_int(1, 3);
        rlx_tensor *xs[4];
        double *v[4];
        rlx_dtype dt[4], odt = RLX_BOOL;
        for (int i = 0; i < n; i++) {
            sizes[i] = rand_int(0, 3);
            at[i + 1] = at[i] + sizes[i];
            int64_t s[MAXR];
            memcpy(s, shape, sizeof s);
            s[ax] = sizes[i];
            dt[i] = dts[rand_int(0, 4)];
            odt = promote(odt, dt[i]);
            v[i] = rvals(dt[i], numel_of(rank, s));
            xs[i] = make_t(dt[i], rank, s, v[i], rand_int(0, 2));
        }
        memcpy(oshape, shape, sizeof oshape);
        oshape[ax] = at[n];
        int64_t on = numel_of(rank, oshape), idx[MAXR];
        double *want = malloc((size_t)(on ? on : 1) * sizeof *want);
        for (int64_t k = 0; k < on; k++) {
            unravel(k, rank, oshape, idx);
            int i = 0;
            while (idx[ax] >= at[i + 1])
                i++;
            idx[ax] -= at[i];
            int64_t s[MAXR];
            memcpy(s, shape, sizeof s);
            s[ax] = sizes[i];
            want[k] = conv(v[i][ravel(idx, rank, s)], dt[i], odt);
        }
        int before = test_failures;
        EXPECT(rlx_cat(xs, n, it % 2 ? ax - rank : ax), odt, rank, oshape, want, 0);
        if (test_failures != before)
            fprintf(stderr, "  (iteration %d: rank %d axis %d n %d)\n", it, rank, ax, n);
        free(want);
        for (int i = 0; i < n; i++)
            free(v[i]);
        rlx_scope_end();
    }
}

TEST(stack_every_axis)
{
    for (int it = 0; it < 30; it++) {
        rlx_scope_begin();
        int rank = rand_int(0, 3), n = rand_int(1, 3);
        int64_t shape[MAXR], oshape[MAXR], idx[MAXR];
        for (int d = 0; d < rank; d++)
            shape[d] = rand_int(0, 3);
        int64_t m = numel_of(rank, shape);
        rlx_dtype dt[3], odt = RLX_BOOL;
        double *v[3];
        rlx_tensor *xs[3];
        for (int i = 0; i < n; i++) {
            dt[i] = (rlx_dtype)rand_int(0, 4);
            odt = promote(odt, dt[i]);
            v[i] = rvals(dt[i], m);
            xs[i] = make_t(dt[i], rank, shape, v[i], rand_int(0, 2));
        }
        for (int axis = -rank - 1; axis <= rank; axis++) {
            int ax = axis < 0 ? axis + rank + 1 : axis;
            for (int d = 0, k = 0; d <= rank; d++)
                oshape[d] = d == ax ? n : shape[k++];
            double *want = malloc((size_t)(m * n > 0 ? m * n : 1) * sizeof *want);
            for (int64_t k = 0; k < m * n; k++) {
                unravel(k, rank + 1, oshape, idx);
                int64_t i = idx[ax];
                memmove(idx + ax, idx + ax + 1, (size_t)(rank - ax) * sizeof *idx);
                want[k] = conv(v[i][ravel(idx, rank, shape)], dt[i], odt);
            }
            int before = test_failures;
            EXPECT(rlx_stack(xs, n, axis), odt, rank + 1, oshape, want, 0);
            if (test_failures != before)
                fprintf(stderr, "  (iteration %d: rank %d axis %d n %d)\n", it, rank, axis, n);
            free(want);
        }
        for (int i = 0; i < n; i++)
            free(v[i]);
        rlx_scope_end();
    }
}

TEST(cat_stack_errors)
{
    rlx_tensor *a = rlx_zeros(RLX_F32, 2, SH(2, 3)), *b = rlx_zeros(RLX_F32, 2, SH(2, 4));
    rlx_tensor *c = rlx_zeros(RLX_F32, 1, SH(3)), *s = rlx_scalar(RLX_F32, 1);
    CHECK_NULL_ERR(rlx_cat(NULL, 2, 0), RLX_E_ARG, "rlx_cat");
    CHECK_NULL_ERR(rlx_cat(TS(a, b), 0, 0), RLX_E_ARG, "rlx_cat");
    CHECK_NULL_ERR(rlx_cat(TS(a, b), -1, 0), RLX_E_ARG, "rlx_cat");
    CHECK_NULL_ERR(rlx_cat(TS(a, NULL), 2, 0), RLX_E_ARG, "rlx_cat");
    CHECK_NULL_ERR(rlx_cat(TS(NULL, a), 2, 0), RLX_E_ARG, "rlx_cat");
    CHECK_NULL_ERR(rlx_cat(TS(a, b), 2, 0), RLX_E_SHAPE, "rlx_cat");
    CHECK_NULL_ERR(rlx_cat(TS(a, c), 2, 0), RLX_E_SHAPE, "rlx_cat");
    CHECK_NULL_ERR(rlx_cat(TS(a, c), 2, -1), RLX_E_SHAPE, "rlx_cat");
    CHECK_NULL_ERR(rlx_cat(TS(a, b), 2, 2), RLX_E_ARG, "rlx_cat");
    CHECK_NULL_ERR(rlx_cat(TS(a, b), 2, -3), RLX_E_ARG, "rlx_cat");
    CHECK_NULL_ANY(rlx_cat(TS(s, s), 2, 0), "rlx_cat"); /* rank 0 has no axis to join */
    CHECK_NULL_ERR(rlx_stack(NULL, 1, 0), RLX_E_ARG, "rlx_stack");
    CHECK_NULL_ERR(rlx_stack(TS(a), 0, 0), RLX_E_ARG, "rlx_stack");
    CHECK_NULL_ERR(rlx_stack(TS(a, NULL), 2, 0), RLX_E_ARG, "rlx_stack");
    CHECK_NULL_ERR(rlx_stack(TS(a, b), 2, 0), RLX_E_SHAPE, "rlx_stack");
    CHECK_NULL_ERR(rlx_stack(TS(a, c), 2, 0), RLX_E_SHAPE, "rlx_stack");
    CHECK_NULL_ERR(rlx_stack(TS(a, a), 2, 3), RLX_E_ARG, "rlx_stack");
    CHECK_NULL_ERR(rlx_stack(TS(a, a), 2, -4), RLX_E_ARG, "rlx_stack");
    CHECK_NULL_ERR(rlx_stack(TS(s), 1, 1), RLX_E_ARG, "rlx_stack");
    rlx_tensor *r8 = rlx_zeros(RLX_F32, 8, SH(1, 1, 1, 1, 1, 1, 1, 2));
    CHECK_NULL_ANY(rlx_stack(TS(r8, r8), 2, 0), "rlx_stack"); /* rank 9 */
}

/* ------------------------------------------------ tile, flip, roll, pad */

/* out[idx] = x[src(idx)] for a one-axis index map. */
typedef int64_t (*axis_map)(int64_t j, int64_t len, int64_t arg);
static int64_t map_tile(int64_t j, int64_t len, int64_t arg) { return (void)arg, j % len; }
static int64_t map_flip(int64_t j, int64_t len, int64_t arg) { return (void)arg, len - 1 - j; }
static int64_t map_roll(int64_t j, int64_t len, int64_t shift)
{
    int64_t s = shift % len; /* element i moves to (i + shift) mod len */
    int64_t i = j - s;
    return i < 0 ? i + len : i >= len ? i - len : i;
}

static double *ref_axis_map(const double *v, int rank, const int64_t *shape, int ax, int64_t olen, axis_map f,
                            int64_t arg, int64_t *oshape)
{
    memcpy(oshape, shape, (size_t)rank * sizeof *shape);
    oshape[ax] = olen;
    int64_t on = numel_of(rank, oshape), idx[MAXR];
    double *w = malloc((size_t)(on ? on : 1) * sizeof *w);
    for (int64_t k = 0; k < on; k++) {
        unravel(k, rank, oshape, idx);
        idx[ax] = f(idx[ax], shape[ax], arg);
        w[k] = v[ravel(idx, rank, shape)];
    }
    return w;
}

typedef enum { OP_TILE, OP_FLIP, OP_ROLL } axis_op;

static void axis_op_random(axis_op op, int iters)
{
    for (int it = 0; it < iters; it++) {
        rlx_scope_begin();
        int rank = rand_int(1, 4);
        int64_t shape[MAXR], oshape[MAXR];
        for (int d = 0; d < rank; d++)
            shape[d] = rand_int(0, 4);
        rlx_dtype dt = (rlx_dtype)rand_int(0, 4);
        double *v = rvals(dt, numel_of(rank, shape));
        rlx_tensor *x = make_t(dt, rank, shape, v, rand_int(0, 2));
        for (int ax = 0; ax < rank; ax++) {
            int axis = it % 2 ? ax - rank : ax;
            int64_t len = shape[ax], arg = 0, olen = len;
            static const int64_t shifts[] = {0, 1, -1, 3, -3, 5, -7, 1000000007, INT64_MAX, INT64_MIN};
            rlx_tensor *y;
            if (op == OP_TILE) {
                arg = rand_int(0, 3);
                olen = len * arg;
                y = rlx_tile(x, axis, arg);
            } else if (op == OP_FLIP) {
                y = rlx_flip(x, axis);
            } else {
                arg = shifts[rand_int(0, 9)];
                y = rlx_roll(x, axis, arg);
            }
            double *w = len ? ref_axis_map(v, rank, shape, ax, olen, op == OP_TILE ? map_tile : op == OP_FLIP ? map_flip : map_roll, arg, oshape)
                            : ref_axis_map(v, rank, shape, ax, 0, map_flip, 0, oshape);
            int before = test_failures;
            EXPECT(y, dt, rank, oshape, w, 0);
            if (test_failures != before)
                fprintf(stderr, "  (op %d iteration %d: rank %d axis %d arg %lld)\n", (int)op, it, rank, axis,
                        (long long)arg);
            free(w);
        }
        free(v);
        rlx_scope_end();
    }
}

TEST(tile_random) { axis_op_random(OP_TILE, 40); }
TEST(flip_random) { axis_op_random(OP_FLIP, 40); }
TEST(roll_random) { axis_op_random(OP_ROLL, 60); }

TEST(tile_flip_roll_fixed)
{
    rlx_tensor *x = ti32(2, SH(2, 3), (int32_t[]){1, 2, 3, 4, 5, 6});
    EXPECT(rlx_tile(x, 0, 0), RLX_I32, 2, SH(0, 3), NULL, 0);
    EXPECT(rlx_tile(x, 1, 1), RLX_I32, 2, SH(2, 3), ((double[]){1, 2, 3, 4, 5, 6}), 0);
    EXPECT(rlx_tile(x, -1, 3), RLX_I32, 2, SH(2, 9), ((double[]){1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 4, 5, 6}), 0);
    EXPECT(rlx_tile(x, 0, 2), RLX_I32, 2, SH(4, 3), ((double[]){1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}), 0);
    EXPECT(rlx_flip(x, 0), RLX_I32, 2, SH(2, 3), ((double[]){4, 5, 6, 1, 2, 3}), 0);
    EXPECT(rlx_flip(x, -1), RLX_I32, 2, SH(2, 3), ((double[]){3, 2, 1, 6, 5, 4}), 0);
    EXPECT(rlx_roll(x, 1, 1), RLX_I32, 2, SH(2, 3), ((double[]){3, 1, 2, 6, 4, 5}), 0);
    EXPECT(rlx_roll(x, 1, -1), RLX_I32, 2, SH(2, 3), ((double[]){2, 3, 1, 5, 6, 4}), 0);
    EXPECT(rlx_roll(x, -1, 4), RLX_I32, 2, SH(2, 3), ((double[]){3, 1, 2, 6, 4, 5}), 0);
    EXPECT(rlx_roll(x, 0, 3), RLX_I32, 2, SH(2, 3), ((double[]){4, 5, 6, 1, 2, 3}), 0);
    EXPECT(rlx_roll(x, 0, -2), RLX_I32, 2, SH(2, 3), ((double[]){1, 2, 3, 4, 5, 6}), 0);
    EXPECT(rlx_roll(rlx_from_data(RLX_F32, 2, SH(2, 0), NULL), 1, 5), RLX_F32, 2, SH(2, 0), NULL, 0);
    /* errors */
    CHECK_NULL_ERR(rlx_tile(NULL, 0, 1), RLX_E_ARG, "rlx_tile");
    CHECK_NULL_ERR(rlx_tile(x, 0, -1), RLX_E_ARG, "rlx_tile");
    CHECK_NULL_ERR(rlx_tile(x, 0, INT64_MIN), RLX_E_ARG, "rlx_tile");
    CHECK_NULL_ERR(rlx_tile(x, 2, 1), RLX_E_ARG, "rlx_tile");
    CHECK_NULL_ERR(rlx_tile(x, -3, 1), RLX_E_ARG, "rlx_tile");
    CHECK_NULL_ERR(rlx_tile(rlx_scalar(RLX_F32, 1), 0, 2), RLX_E_ARG, "rlx_tile");
    CHECK_NULL_ANY(rlx_tile(x, 0, INT64_MAX / 2), "rlx_tile");
    CHECK_NULL_ERR(rlx_flip(NULL, 0), RLX_E_ARG, "rlx_flip");
    CHECK_NULL_ERR(rlx_flip(x, 2), RLX_E_ARG, "rlx_flip");
    CHECK_NULL_ERR(rlx_flip(x, -3), RLX_E_ARG, "rlx_flip");
    CHECK_NULL_ERR(rlx_flip(rlx_scalar(RLX_F32, 1), 0), RLX_E_ARG, "rlx_flip");
    CHECK_NULL_ERR(rlx_roll(NULL, 0, 1), RLX_E_ARG, "rlx_roll");
    CHECK_NULL_ERR(rlx_roll(x, 2, 1), RLX_E_ARG, "rlx_roll");
    CHECK_NULL_ERR(rlx_roll(x, INT_MIN, 1), RLX_E_ARG, "rlx_roll");
    CHECK_NULL_ERR(rlx_roll(rlx_scalar(RLX_F32, 1), 0, 1), RLX_E_ARG, "rlx_roll");
}

/* rank 8 is a legal rank: tiling one of its axes keeps the rank. */
TEST(tile_rank8)
{
    rlx_tensor *x = ti32(8, SH(1, 1, 1, 1, 1, 1, 2, 3), (int32_t[]){1, 2, 3, 4, 5, 6});
    static const double w[] = {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6};
    EXPECT(rlx_tile(x, 6, 2), RLX_I32, 8, SH(1, 1, 1, 1, 1, 1, 4, 3), w, 0);
    EXPECT(rlx_tile(x, 0, 2), RLX_I32, 8, SH(2, 1, 1, 1, 1, 1, 2, 3), w, 0);
}

TEST(pad)
{
    static const struct {
        rlx_dtype dt;
        double value, stored;
    } cases[] = {
        {RLX_F32, 7.5, 7.5},      {RLX_F32, 0.1, (double)0.1f}, {RLX_F64, -0.1, -0.1},
        {RLX_I32, 2.7, 2},        {RLX_I32, -2.7, -2},          {RLX_I32, NAN, 0},
        {RLX_I32, 1e20, 2147483647.0}, {RLX_I64, -1e30, -9223372036854775808.0}, {RLX_I64, 3e10, 3e10},
        {RLX_BOOL, 0.5, 1},       {RLX_BOOL, 0, 0},             {RLX_BOOL, NAN, 1},
        {RLX_F64, INFINITY, INFINITY},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        rlx_dtype dt = cases[c].dt;
        for (int mode = 0; mode < 3; mode++) {
            int64_t shape[2] = {2, 3}, before = rand_int(0, 3), after = rand_int(0, 3);
            int ax = rand_int(0, 1);
            double *v = rvals(dt, 6);
            rlx_tensor *x = make_t(dt, 2, shape, v, mode);
            int64_t os[2] = {2, 3}, idx[2];
            os[ax] += before + after;
            double want[32];
            for (int64_t k = 0; k < os[0] * os[1]; k++) {
                unravel(k, 2, os, idx);
                idx[ax] -= before;
                want[k] = idx[ax] < 0 || idx[ax] >= shape[ax] ? cases[c].stored : v[ravel(idx, 2, shape)];
            }
            int fails = test_failures;
            EXPECT(rlx_pad(x, ax - (mode == 1 ? 2 : 0), before, after, cases[c].value), dt, 2, os, want, 0);
            if (test_failures != fails)
                fprintf(stderr, "  (case %zu mode %d axis %d before %lld after %lld)\n", c, mode, ax,
                        (long long)before, (long long)after);
            free(v);
        }
    }
    rlx_tensor *x = tf32(1, SH(2), (float[]){1, 2});
    EXPECT(rlx_pad(x, 0, 0, 0, 9), RLX_F32, 1, SH(2), ((double[]){1, 2}), 0);
    EXPECT(rlx_pad(rlx_from_data(RLX_I32, 1, SH(0), NULL), 0, 1, 2, 4), RLX_I32, 1, SH(3), ((double[]){4, 4, 4}), 0);
    CHECK_NULL_ERR(rlx_pad(NULL, 0, 1, 1, 0), RLX_E_ARG, "rlx_pad");
    CHECK_NULL_ERR(rlx_pad(x, 0, -1, 1, 0), RLX_E_ARG, "rlx_pad");
    CHECK_NULL_ERR(rlx_pad(x, 0, 1, -1, 0), RLX_E_ARG, "rlx_pad");
    CHECK_NULL_ERR(rlx_pad(x, 1, 1, 1, 0), RLX_E_ARG, "rlx_pad");
    CHECK_NULL_ERR(rlx_pad(x, -2, 1, 1, 0), RLX_E_ARG, "rlx_pad");
    CHECK_NULL_ERR(rlx_pad(rlx_scalar(RLX_F32, 1), 0, 1, 1, 0), RLX_E_ARG, "rlx_pad");
    CHECK_NULL_ANY(rlx_pad(x, 0, 1, INT64_MAX, 0), "rlx_pad");
}

/* The source index of output position i of an axis of length len padded
 * by `before` in mode (1 reflect, 2 replicate). */
static int64_t pad_source(int64_t i, int64_t len, int mode)
{
    if (mode == RLX_PAD_REPLICATE)
        return i < 0 ? 0 : i >= len ? len - 1 : i;
    return i < 0 ? -i : i >= len ? 2 * (len - 1) - i : i;
}

/* Random shapes, axes, dtypes and layouts against the index loop above, on
 * both backends. */
TEST(pad_mode_random)
{
    static const rlx_dtype dts[5] = {RLX_BOOL, RLX_I32, RLX_I64, RLX_F32, RLX_F64};
    for (int b = 0; b < 2; b++) {
        CHECK(rlx_set_option("backend", b ? "ref" : "jit") == RLX_OK);
        for (int c = 0; c < 60; c++) {
            rlx_dtype dt = dts[c % 5];
            int mode = 1 + c / 5 % 2, layout = c / 10 % 3, rank = rand_int(1, 3), ax = rand_int(0, rank - 1);
            int64_t shape[3], os[3], idx[3];
            for (int d = 0; d < rank; d++)
                shape[d] = os[d] = rand_int(1, 5);
            int64_t len = shape[ax], hi = mode == RLX_PAD_REFLECT ? len - 1 : 6;
            int64_t before = rand_int(0, (int)hi), after = rand_int(0, (int)hi);
            os[ax] += before + after;
            double *v = rvals(dt, numel_of(rank, shape)), *want = malloc((size_t)numel_of(rank, os) * sizeof *want);
            for (int64_t k = 0; k < numel_of(rank, os); k++) {
                unravel(k, rank, os, idx);
                idx[ax] = pad_source(idx[ax] - before, len, mode);
                want[k] = v[ravel(idx, rank, shape)];
            }
            int fails = test_failures;
            rlx_tensor *x = make_t(dt, rank, shape, v, layout);
            EXPECT(rlx_pad_mode(x, ax - (c % 2 ? rank : 0), before, after, (rlx_padding)mode), dt, rank, os, want, 0);
            if (test_failures != fails)
                fprintf(stderr, "  (%s backend, case %d: %s mode %d layout %d axis %d before %lld after %lld)\n",
                        b ? "ref" : "jit", c, test_dims(rank, shape), mode, layout, ax, (long long)before,
                        (long long)after);
            free(v);
            free(want);
        }
    }
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
}

TEST(pad_mode_fixed_and_errors)
{
    const char *fn = "rlx_pad_mode";
    rlx_tensor *x = tf64(1, SH(3), (double[]){1, 2, 3});
    /* torch.nn.functional.pad(x, (2, 2), mode="reflect") and "replicate" */
    EXPECT(rlx_pad_mode(x, 0, 2, 2, RLX_PAD_REFLECT), RLX_F64, 1, SH(7), ((double[]){3, 2, 1, 2, 3, 2, 1}), 0);
    EXPECT(rlx_pad_mode(x, 0, 2, 1, RLX_PAD_REPLICATE), RLX_F64, 1, SH(6), ((double[]){1, 1, 1, 2, 3, 3}), 0);
    EXPECT(rlx_pad_mode(x, 0, 1, 0, RLX_PAD_CONSTANT), RLX_F64, 1, SH(4), ((double[]){0, 1, 2, 3}), 0);
    EXPECT(rlx_pad_mode(x, -1, 0, 2, RLX_PAD_REFLECT), RLX_F64, 1, SH(5), ((double[]){1, 2, 3, 2, 1}), 0);
    /* a length-1 axis replicates; zero padding is x in every mode, even on an empty axis */
    rlx_tensor *one = ti32(2, SH(1, 2), (int32_t[]){4, 5}), *empty = rlx_zeros(RLX_F32, 2, SH(0, 2));
    EXPECT(rlx_pad_mode(one, 0, 1, 2, RLX_PAD_REPLICATE), RLX_I32, 2, SH(4, 2), ((double[]){4, 5, 4, 5, 4, 5, 4, 5}),
           0);
    EXPECT(rlx_pad_mode(one, 1, 1, 1, RLX_PAD_REFLECT), RLX_I32, 2, SH(1, 4), ((double[]){5, 4, 5, 4}), 0);
    for (int m = 0; m < 3; m++) {
        EXPECT(rlx_pad_mode(empty, 0, 0, 0, (rlx_padding)m), RLX_F32, 2, SH(0, 2), NULL, 0);
        EXPECT(rlx_pad_mode(empty, 1, 1, 1, (rlx_padding)m), RLX_F32, 2, SH(0, 4), NULL, 0);
    }
    EXPECT(rlx_pad_mode(empty, 0, 1, 0, RLX_PAD_CONSTANT), RLX_F32, 2, SH(1, 2), ((double[]){0, 0}), 0);
    CHECK_NULL_ERR(rlx_pad_mode(empty, 0, 1, 0, RLX_PAD_REPLICATE), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_pad_mode(empty, 0, 0, 1, RLX_PAD_REFLECT), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_pad_mode(x, 0, 3, 0, RLX_PAD_REFLECT), RLX_E_SHAPE, fn); /* before == len */
    CHECK_NULL_ERR(rlx_pad_mode(x, 0, 0, 3, RLX_PAD_REFLECT), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_pad_mode(one, 0, 1, 0, RLX_PAD_REFLECT), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_pad_mode(NULL, 0, 1, 1, RLX_PAD_REFLECT), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_pad_mode(x, 0, -1, 1, RLX_PAD_REPLICATE), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_pad_mode(x, 0, -1, 1, RLX_PAD_CONSTANT), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_pad_mode(x, 0, 1, -1, RLX_PAD_REFLECT), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_pad_mode(x, 1, 1, 1, RLX_PAD_REFLECT), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_pad_mode(x, 0, 1, 1, (rlx_padding)3), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_pad_mode(x, 0, 1, 1, (rlx_padding)-1), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_pad_mode(rlx_scalar(RLX_F32, 1), 0, 1, 1, RLX_PAD_REPLICATE), RLX_E_ARG, fn);
    CHECK_NULL_ANY(rlx_pad_mode(x, 0, 1, INT64_MAX, RLX_PAD_REPLICATE), fn);
    CHECK_NULL_ERR(rlx_tile(rlx_input("d", RLX_F32, 1, SH(-1)), 0, -1), RLX_E_ARG, "rlx_tile");
}

/* ------------------------------------------------------- gather, index */

static double *ref_gather(const double *v, int rank, const int64_t *shape, const double *ind, int irank,
                          const int64_t *ishape, int ax, int64_t *oshape)
{
    int orank = rank - 1 + irank;
    for (int d = 0, k = 0; d < rank; d++) {
        if (d == ax)
            for (int j = 0; j < irank; j++)
                oshape[k++] = ishape[j];
        else
            oshape[k++] = shape[d];
    }
    int64_t on = numel_of(orank, oshape), idx[2 * MAXR], src[MAXR];
    double *w = malloc((size_t)(on ? on : 1) * sizeof *w);
    for (int64_t k = 0; k < on; k++) {
        unravel(k, orank, oshape, idx);
        int64_t i = (int64_t)ind[ravel(idx + ax, irank, ishape)];
        for (int d = 0; d < rank; d++)
            src[d] = d < ax ? idx[d] : d == ax ? (i < 0 ? i + shape[ax] : i) : idx[d - 1 + irank];
        w[k] = v[ravel(src, rank, shape)];
    }
    return w;
}

TEST(gather_fixed)
{
    rlx_tensor *x = tf32(2, SH(3, 4), (float[]){0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
    EXPECT(rlx_gather(x, ti32(1, SH(2), (int32_t[]){2, -1}), 0), RLX_F32, 2, SH(2, 4),
           ((double[]){20, 21, 22, 23, 20, 21, 22, 23}), 0);
    EXPECT(rlx_gather(x, ti64(2, SH(2, 2), (int64_t[]){0, 3, -4, 1}), 1), RLX_F32, 3, SH(3, 2, 2),
           ((double[]){0, 3, 0, 1, 10, 13, 10, 11, 20, 23, 20, 21}), 0);
    EXPECT(rlx_gather(x, ti64(0, NULL, (int64_t[]){-2}), -1), RLX_F32, 1, SH(3), ((double[]){2, 12, 22}), 0);
    EXPECT(rlx_gather(x, rlx_from_data(RLX_I32, 1, SH(0), NULL), 0), RLX_F32, 2, SH(0, 4), NULL, 0);
    EXPECT(rlx_gather(x, rlx_from_data(RLX_I64, 2, SH(2, 0), NULL), 1), RLX_F32, 3, SH(3, 2, 0), NULL, 0);
    EXPECT(rlx_index_select(x, 1, ti64(1, SH(3), (int64_t[]){3, 3, -3})), RLX_F32, 2, SH(3, 3),
           ((double[]){3, 3, 1, 13, 13, 11, 23, 23, 21}), 0);
    EXPECT(rlx_index_select(x, -2, ti32(1, SH(1), (int32_t[]){1})), RLX_F32, 2, SH(1, 4), ((double[]){10, 11, 12, 13}), 0);
    /* a gathered bool keeps its dtype */
    rlx_tensor *b = tbool(1, SH(3), (unsigned char[]){1, 0, 1});
    EXPECT(rlx_gather(b, ti32(1, SH(4), (int32_t[]){1, 1, 0, -1}), 0), RLX_BOOL, 1, SH(4), ((double[]){0, 0, 1, 1}), 0);
}

TEST(gather_random)
{
    for (int it = 0; it < 80; it++) {
        rlx_scope_begin();
        int rank = rand_int(1, 3), irank = rand_int(0, 2), ax = rand_int(0, rank - 1);
        int64_t shape[MAXR], ishape[MAXR], oshape[2 * MAXR];
        for (int d = 0; d < rank; d++)
            shape[d] = rand_int(1, 4);
        for (int d = 0; d < irank; d++)
            ishape[d] = rand_int(0, 3);
        rlx_dtype dt = (rlx_dtype)rand_int(0, 4), it_dt = it % 2 ? RLX_I64 : RLX_I32;
        double *v = rvals(dt, numel_of(rank, shape));
        int64_t ni = numel_of(irank, ishape);
        double *ind = malloc((size_t)(ni ? ni : 1) * sizeof *ind);
        for (int64_t k = 0; k < ni; k++)
            ind[k] = (double)rand_int((int)-shape[ax], (int)shape[ax] - 1);
        rlx_tensor *x = make_t(dt, rank, shape, v, rand_int(0, 2));
        rlx_tensor *idx = make_t(it_dt, irank, ishape, ind, rand_int(0, 2));
        double *w = ref_gather(v, rank, shape, ind, irank, ishape, ax, oshape);
        int before = test_failures;
        int axis = it % 3 ? ax : ax - rank;
        EXPECT(rlx_gather(x, idx, axis), dt, rank - 1 + irank, oshape, w, 0);
        if (irank == 1)
            EXPECT(rlx_index_select(x, axis, idx), dt, rank, oshape, w, 0);
        if (test_failures != before)
            fprintf(stderr, "  (iteration %d: rank %d irank %d axis %d)\n", it, rank, irank, axis);
        free(v), free(ind), free(w);
        rlx_scope_end();
    }
}

/* An out-of-range index is found while running: realize fails cleanly. */
TEST(gather_out_of_range)
{
    rlx_tensor *x = tf64(2, SH(2, 4), (double[]){0, 1, 2, 3, 4, 5, 6, 7});
    rlx_tensor *bad[] = {
        rlx_gather(x, ti32(1, SH(2), (int32_t[]){1, 7}), 1),
        rlx_gather(x, ti64(1, SH(2), (int64_t[]){-5, 0}), 1),
        rlx_gather(x, ti64(1, SH(2), (int64_t[]){0, 4}), 1),
        rlx_gather(x, ti64(1, SH(1), (int64_t[]){INT64_MAX}), 0),
        rlx_gather(x, ti64(1, SH(1), (int64_t[]){INT64_MIN}), 0),
        rlx_gather(x, ti32(1, SH(1), (int32_t[]){INT32_MIN}), 1),
        rlx_index_select(x, 0, ti32(1, SH(3), (int32_t[]){0, 1, 2})),
        rlx_add_s(rlx_gather(x, ti32(2, SH(1, 1), (int32_t[]){-3}), 0), 1),
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (!bad[i]) {
            test_fail(__FILE__, __LINE__, "case %zu did not build: %s", i, rlx_last_error());
            continue;
        }
        rlx_clear_error();
        CHECK_EQ_INT(rlx_realize(bad[i]), RLX_E_ARG);
        CHECK_EQ_INT(rlx_last_status(), RLX_E_ARG);
        const char *msg = rlx_last_error();
        if (strncmp(msg, "rlx_realize", 11) != 0 || strlen(msg) < 20)
            test_fail(__FILE__, __LINE__, "case %zu: message '%s'", i, msg);
        CHECK(!rlx_is_realized(bad[i]));
        double buf[16];
        rlx_clear_error();
        CHECK_EQ_INT(rlx_read_f64(bad[i], buf, 16), RLX_E_ARG);
        CHECK(strncmp(rlx_last_error(), "rlx_read_f64", 12) == 0);
        rlx_clear_error();
    }
    /* the message names the offending index */
    rlx_realize(bad[0]);
    CHECK(strstr(rlx_last_error(), "7") != NULL);
    rlx_clear_error();
}

TEST(gather_errors)
{
    rlx_tensor *x = rlx_zeros(RLX_F32, 2, SH(3, 4)), *i1 = ti32(1, SH(2), (int32_t[]){0, 1});
    rlx_tensor *i2 = ti64(2, SH(1, 2), (int64_t[]){0, 1}), *s = ti64(0, NULL, (int64_t[]){0});
    CHECK_NULL_ERR(rlx_gather(NULL, i1, 0), RLX_E_ARG, "rlx_gather");
    CHECK_NULL_ERR(rlx_gather(x, NULL, 0), RLX_E_ARG, "rlx_gather");
    CHECK_NULL_ERR(rlx_gather(x, i1, 2), RLX_E_ARG, "rlx_gather");
    CHECK_NULL_ERR(rlx_gather(x, i1, -3), RLX_E_ARG, "rlx_gather");
    CHECK_NULL_ERR(rlx_gather(rlx_scalar(RLX_F32, 1), s, 0), RLX_E_ARG, "rlx_gather");
    CHECK_NULL_ERR(rlx_gather(x, tf32(1, SH(1), (float[]){0}), 0), RLX_E_DTYPE, "rlx_gather");
    CHECK_NULL_ERR(rlx_gather(x, tf64(1, SH(1), (double[]){0}), 0), RLX_E_DTYPE, "rlx_gather");
    CHECK_NULL_ERR(rlx_gather(x, tbool(1, SH(1), (unsigned char[]){0}), 0), RLX_E_DTYPE, "rlx_gather");
    rlx_tensor *x5 = rlx_zeros(RLX_F32, 5, SH(1, 1, 1, 1, 2)), *i5 = rlx_zeros(RLX_I32, 5, SH(1, 1, 1, 1, 1));
    CHECK_NULL_ERR(rlx_gather(x5, i5, 0), RLX_E_SHAPE, "rlx_gather"); /* rank 9 */
    CHECK_NULL_ERR(rlx_index_select(NULL, 0, i1), RLX_E_ARG, "rlx_index_select");
    CHECK_NULL_ERR(rlx_index_select(x, 0, NULL), RLX_E_ARG, "rlx_index_select");
    CHECK_NULL_ERR(rlx_index_select(x, 0, i2), RLX_E_SHAPE, "rlx_index_select");
    CHECK_NULL_ERR(rlx_index_select(x, 0, s), RLX_E_SHAPE, "rlx_index_select");
    CHECK_NULL_ERR(rlx_index_select(x, 2, i1), RLX_E_ARG, "rlx_index_select");
    CHECK_NULL_ERR(rlx_index_select(x, 0, tf32(1, SH(1), (float[]){0})), RLX_E_DTYPE, "rlx_index_select");
}

/* ------------------------------------------------------------- scatter */

static void backend(const char *b) { setenv("RLX_BACKEND", b, 1); }

/* np.add.at (add) or a plain assignment loop (last wins) in double over
 * index's positions p: out[p, axis = index[p]] (+)= src[p]; then each value
 * converted to dt. src has sshape, only index's part of it is read. */
static double *ref_scatter(const double *base, int rank, const int64_t *shape, int ax, const double *ind,
                           const int64_t *ishape, const double *src, const int64_t *sshape, bool add, rlx_dtype dt)
{
    int64_t n = numel_of(rank, shape), ni = numel_of(rank, ishape), p[MAXR];
    double *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    memcpy(w, base, (size_t)n * sizeof *w);
    for (int64_t k = 0; k < ni; k++) {
        unravel(k, rank, ishape, p);
        double e = src[ravel(p, rank, sshape)];
        int64_t i = (int64_t)ind[k];
        p[ax] = i < 0 ? i + shape[ax] : i;
        int64_t t = ravel(p, rank, shape);
        w[t] = add ? w[t] + e : e;
    }
    for (int64_t k = 0; k < n; k++)
        w[k] = dt == RLX_BOOL ? w[k] != 0 : conv(w[k], RLX_F64, dt);
    return w;
}

TEST(scatter_fixed)
{
    for (int b = 0; b < 2; b++) {
        backend(b ? "ref" : "jit");
        rlx_tensor *x = tf32(2, SH(2, 3), (float[]){0, 1, 2, 3, 4, 5});
        rlx_tensor *idx = ti64(2, SH(2, 2), (int64_t[]){2, 0, 1, 1}), *src = tf32(2, SH(2, 2), (float[]){10, 20, 30, 40});
        /* torch.scatter_add(x, 1, idx, src): row 1 gets 30 + 40 at column 1 */
        EXPECT(rlx_scatter_add(x, 1, idx, src), RLX_F32, 2, SH(2, 3), ((double[]){20, 1, 12, 3, 74, 5}), 0);
        /* overwrite: the last in index order wins */
        EXPECT(rlx_scatter(x, -1, idx, src), RLX_F32, 2, SH(2, 3), ((double[]){20, 1, 10, 3, 40, 5}), 0);
        /* along axis 0, negative indices, an index smaller than src */
        rlx_tensor *i0 = ti32(2, SH(1, 2), (int32_t[]){-1, 0}), *s3 = tf32(2, SH(2, 3), (float[]){7, 8, 9, 1, 1, 1});
        EXPECT(rlx_scatter_add(x, 0, i0, s3), RLX_F32, 2, SH(2, 3), ((double[]){0, 9, 2, 10, 4, 5}), 0);
        /* index_add as np.add.at(x, (slice(None), [2, 0, 2]), src) */
        rlx_tensor *ia = rlx_index_add(x, 1, ti64(1, SH(3), (int64_t[]){2, 0, 2}),
                                       tf32(2, SH(2, 3), (float[]){1, 2, 3, 4, 5, 6}));
        EXPECT(ia, RLX_F32, 2, SH(2, 3), ((double[]){2, 1, 6, 8, 4, 15}), 0);
        EXPECT(rlx_index_add(x, 0, ti32(1, SH(3), (int32_t[]){1, 1, -2}), tf32(2, SH(3, 3), (float[]){1, 1, 1, 2, 2, 2, 4, 4, 4})),
               RLX_F32, 2, SH(2, 3), ((double[]){4, 5, 6, 6, 7, 8}), 0);
        /* dtypes promote: i32 base, f64 src */
        rlx_tensor *xi = ti32(1, SH(3), (int32_t[]){1, 2, 3});
        EXPECT(rlx_scatter_add(xi, 0, ti64(1, SH(2), (int64_t[]){0, 0}), tf64(1, SH(2), (double[]){0.5, 0.25})),
               RLX_F64, 1, SH(3), ((double[]){1.75, 2, 3}), 0);
        /* integers wrap in 64 bits and are stored as i32 wrap */
        EXPECT(rlx_scatter_add(xi, 0, ti64(1, SH(2), (int64_t[]){2, 2}), ti32(1, SH(2), (int32_t[]){INT32_MAX, 1})),
               RLX_I32, 1, SH(3), ((double[]){1, 2, (double)(int32_t)((uint32_t)INT32_MAX + 4u)}), 0);
        /* bool add is or */
        rlx_tensor *bb = tbool(1, SH(3), (unsigned char[]){0, 1, 0});
        EXPECT(rlx_scatter_add(bb, 0, ti64(1, SH(3), (int64_t[]){0, 1, 1}), tbool(1, SH(3), (unsigned char[]){1, 1, 0})),
               RLX_BOOL, 1, SH(3), ((double[]){1, 1, 0}), 0);
        /* empty index: base unchanged; empty base along another axis */
        EXPECT(rlx_scatter_add(x, 1, rlx_zeros(RLX_I64, 2, SH(2, 0)), rlx_zeros(RLX_F32, 2, SH(2, 0))), RLX_F32, 2,
               SH(2, 3), ((double[]){0, 1, 2, 3, 4, 5}), 0);
        EXPECT(rlx_scatter(rlx_zeros(RLX_F64, 2, SH(0, 3)), 1, rlx_zeros(RLX_I32, 2, SH(0, 3)),
                           rlx_zeros(RLX_F64, 2, SH(0, 3))),
               RLX_F64, 2, SH(0, 3), NULL, 0);
        EXPECT(rlx_index_add(x, 0, rlx_zeros(RLX_I64, 1, SH(0)), rlx_zeros(RLX_F32, 2, SH(0, 3))), RLX_F32, 2, SH(2, 3),
               ((double[]){0, 1, 2, 3, 4, 5}), 0);
    }
    backend("jit");
}

TEST(scatter_random)
{
    for (int it = 0; it < 120; it++) {
        rlx_scope_begin();
        int rank = rand_int(1, 4), ax = rand_int(0, rank - 1), mode = it % 3; /* 0 add, 1 set, 2 index_add */
        int64_t shape[MAXR], ishape[MAXR], sshape[MAXR];
        for (int d = 0; d < rank; d++) {
            shape[d] = rand_int(1, 4);
            ishape[d] = d == ax ? rand_int(0, 6) : rand_int(0, (int)shape[d]); /* duplicates when longer */
            sshape[d] = ishape[d] + (mode == 2 ? 0 : rand_int(0, 1));
        }
        if (mode == 2)
            for (int d = 0; d < rank; d++)
                ishape[d] = sshape[d] = d == ax ? ishape[d] : shape[d];
        rlx_dtype dt = (rlx_dtype)rand_int(0, 4), it_dt = it % 2 ? RLX_I64 : RLX_I32;
        int64_t ni = numel_of(rank, ishape);
        double *v = rvals(dt, numel_of(rank, shape)), *sv = rvals(dt, numel_of(rank, sshape));
        double *ind = malloc((size_t)(ni ? ni : 1) * sizeof *ind), *ind1 = malloc((size_t)(ishape[ax] + 1) * sizeof *ind1);
        for (int64_t j = 0; j < ishape[ax]; j++)
            ind1[j] = (double)rand_int((int)-shape[ax], (int)shape[ax] - 1);
        for (int64_t k = 0; k < ni; k++) {
            int64_t p[MAXR];
            unravel(k, rank, ishape, p);
            ind[k] = mode == 2 ? ind1[p[ax]] : (double)rand_int((int)-shape[ax], (int)shape[ax] - 1);
        }
        rlx_tensor *x = make_t(dt, rank, shape, v, rand_int(0, 2)), *src = make_t(dt, rank, sshape, sv, rand_int(0, 2));
        rlx_tensor *idx = mode == 2 ? make_t(it_dt, 1, ishape + ax, ind1, rand_int(0, 1))
                                    : make_t(it_dt, rank, ishape, ind, rand_int(0, 2));
        double *w = ref_scatter(v, rank, shape, ax, ind, ishape, sv, sshape, mode != 1, dt);
        int axis = it % 4 ? ax : ax - rank, before = test_failures;
        for (int b = 0; b < 2; b++) {
            backend(b ? "ref" : "jit");
            rlx_tensor *r = mode == 0 ? rlx_scatter_add(x, axis, idx, src)
                            : mode == 1 ? rlx_scatter(x, axis, idx, src) : rlx_index_add(x, axis, idx, src);
            EXPECT(r, dt, rank, shape, w, 0);
        }
        backend("jit");
        if (test_failures != before)
            fprintf(stderr, "  (iteration %d: mode %d rank %d axis %d dtype %s)\n", it, mode, rank, axis, rlx_dtype_name(dt));
        free(v), free(sv), free(ind), free(ind1), free(w);
        rlx_scope_end();
    }
}

/* Many duplicates: the same bits at every thread count (index order). */
TEST(scatter_add_bits_do_not_depend_on_threads)
{
    enum { N = 4096, L = 7, D = 33 };
    int64_t *ind = malloc(N * sizeof *ind);
    float *src = malloc((size_t)N * D * sizeof *src);
    for (int i = 0; i < N; i++)
        ind[i] = rand_int(0, L - 1);
    for (int i = 0; i < N * D; i++)
        src[i] = (float)test_uniform(-1, 1);
    rlx_tensor *idx = ti64(1, SH(N), ind), *s = tf32(2, SH(N, D), src);
    float first[L * D], again[L * D];
    int saved = rlx_get_num_threads();
    for (int t = 1; t <= 3; t++) {
        rlx_set_num_threads(t);
        rlx_tensor *r = rlx_index_add(rlx_zeros(RLX_F32, 2, SH(L, D)), 0, idx, s);
        CHECK_EQ_INT(rlx_read(r, t == 1 ? first : again, sizeof first), RLX_OK);
        if (t > 1)
            CHECK(memcmp(first, again, sizeof first) == 0);
    }
    rlx_set_num_threads(saved);
    free(ind), free(src);
}

TEST(scatter_out_of_range)
{
    rlx_tensor *x = tf64(2, SH(2, 4), (double[]){0, 1, 2, 3, 4, 5, 6, 7}), *s = rlx_ones(RLX_F64, 2, SH(2, 4));
    for (int b = 0; b < 2; b++) {
        backend(b ? "ref" : "jit");
        rlx_tensor *bad[] = {
            rlx_scatter_add(x, 1, ti32(2, SH(1, 2), (int32_t[]){1, 4}), s),
            rlx_scatter(x, 1, ti64(2, SH(1, 1), (int64_t[]){-5}), s),
            rlx_scatter_add(x, 0, ti64(2, SH(1, 1), (int64_t[]){INT64_MIN}), s),
            rlx_index_add(x, 0, ti64(1, SH(2), (int64_t[]){0, 2}), s),
            rlx_exp(rlx_index_add(x, 1, ti32(1, SH(1), (int32_t[]){INT32_MAX}), rlx_ones(RLX_F64, 2, SH(2, 1)))),
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            if (!bad[i]) {
                test_fail(__FILE__, __LINE__, "case %zu did not build: %s", i, rlx_last_error());
                continue;
            }
            rlx_clear_error();
            CHECK_EQ_INT(rlx_realize(bad[i]), RLX_E_ARG);
            CHECK(strncmp(rlx_last_error(), "rlx_realize", 11) == 0 && strstr(rlx_last_error(), "scatter: index"));
            CHECK(!rlx_is_realized(bad[i]));
        }
        rlx_realize(bad[0]);
        CHECK(strstr(rlx_last_error(), "index 4 out of range for axis 1 of size 4") != NULL);
        rlx_clear_error();
    }
    backend("jit");
}

TEST(scatter_errors)
{
    rlx_tensor *x = rlx_zeros(RLX_F32, 2, SH(3, 4)), *i22 = ti64(2, SH(2, 2), (int64_t[]){0, 1, 2, 0});
    rlx_tensor *s22 = rlx_ones(RLX_F32, 2, SH(2, 2)), *i1 = ti32(1, SH(2), (int32_t[]){0, 1});
    const char *fns[2] = {"rlx_scatter_add", "rlx_scatter"};
    for (int k = 0; k < 2; k++) {
        rlx_tensor *(*f)(rlx_tensor *, int, rlx_tensor *, rlx_tensor *) = k ? rlx_scatter : rlx_scatter_add;
        CHECK_NULL_ERR(f(NULL, 0, i22, s22), RLX_E_ARG, fns[k]);
        CHECK_NULL_ERR(f(x, 0, NULL, s22), RLX_E_ARG, fns[k]);
        CHECK_NULL_ERR(f(x, 0, i22, NULL), RLX_E_ARG, fns[k]);
        CHECK_NULL_ERR(f(x, 2, i22, s22), RLX_E_ARG, fns[k]);
        CHECK_NULL_ERR(f(x, -3, i22, s22), RLX_E_ARG, fns[k]);
        CHECK_NULL_ERR(f(rlx_scalar(RLX_F32, 0), 0, ti64(0, NULL, (int64_t[]){0}), rlx_scalar(RLX_F32, 1)), RLX_E_ARG,
                       fns[k]);
        CHECK_NULL_ERR(f(x, 0, tf32(2, SH(2, 2), (float[]){0, 0, 0, 0}), s22), RLX_E_DTYPE, fns[k]);
        CHECK_NULL_ERR(f(x, 0, tbool(2, SH(1, 1), (unsigned char[]){0}), s22), RLX_E_DTYPE, fns[k]);
        CHECK_NULL_ERR(f(x, 0, i1, s22), RLX_E_SHAPE, fns[k]);                          /* rank */
        CHECK_NULL_ERR(f(x, 0, i22, rlx_ones(RLX_F32, 1, SH(4))), RLX_E_SHAPE, fns[k]); /* src rank */
        CHECK_NULL_ERR(f(x, 0, i22, rlx_ones(RLX_F32, 2, SH(2, 1))), RLX_E_SHAPE, fns[k]); /* index > src */
        CHECK_NULL_ERR(f(x, 1, rlx_zeros(RLX_I64, 2, SH(4, 1)), rlx_ones(RLX_F32, 2, SH(4, 1))), RLX_E_SHAPE,
                       fns[k]); /* index > base off the axis */
    }
    rlx_clear_error();
    CHECK(!rlx_scatter_add(x, 1, rlx_zeros(RLX_I64, 2, SH(4, 1)), rlx_ones(RLX_F32, 2, SH(4, 1))));
    CHECK(strstr(rlx_last_error(), "[4,1]") && strstr(rlx_last_error(), "[3,4]")); /* the message shows the shapes */
    rlx_clear_error();
    CHECK_NULL_ERR(rlx_index_add(NULL, 0, i1, s22), RLX_E_ARG, "rlx_index_add");
    CHECK_NULL_ERR(rlx_index_add(x, 0, NULL, s22), RLX_E_ARG, "rlx_index_add");
    CHECK_NULL_ERR(rlx_index_add(x, 0, i1, NULL), RLX_E_ARG, "rlx_index_add");
    CHECK_NULL_ERR(rlx_index_add(x, 5, i1, s22), RLX_E_ARG, "rlx_index_add");
    CHECK_NULL_ERR(rlx_index_add(x, 0, tf64(1, SH(2), (double[]){0, 1}), rlx_ones(RLX_F32, 2, SH(2, 4))), RLX_E_DTYPE,
                   "rlx_index_add");
    CHECK_NULL_ERR(rlx_index_add(x, 0, i22, rlx_ones(RLX_F32, 2, SH(2, 4))), RLX_E_SHAPE, "rlx_index_add");
    CHECK_NULL_ERR(rlx_index_add(x, 0, i1, rlx_ones(RLX_F32, 2, SH(3, 4))), RLX_E_SHAPE, "rlx_index_add");
    CHECK_NULL_ERR(rlx_index_add(x, 0, i1, rlx_ones(RLX_F32, 2, SH(2, 3))), RLX_E_SHAPE, "rlx_index_add");
    CHECK_NULL_ERR(rlx_index_add(x, 0, i1, rlx_ones(RLX_F32, 1, SH(2))), RLX_E_SHAPE, "rlx_index_add");
}

/* ---------------------------------------------------------------- cast */

TEST(cast_float_to_int_and_bool)
{
    static const double in[] = {-2.9, -0.5, -0.0, 0.0, 0.5, 2.9, 1e10, -1e10, NAN, INFINITY, -INFINITY,
                                2147483647.5, -2147483648.7, 2147483646.9, 9.3e18, -9.3e18, 16777217.0, 1e-30};
    enum { N = sizeof in / sizeof *in };
    for (int from = RLX_F32; from <= RLX_F64; from++) {
        for (int mode = 0; mode < 2; mode++) {
            double src[N], want[N];
            for (int i = 0; i < N; i++)
                src[i] = from == RLX_F32 ? (double)(float)in[i] : in[i];
            rlx_tensor *x = make_t((rlx_dtype)from, 1, SH(N), src, mode);
            for (int to = RLX_BOOL; to <= RLX_F64; to++) {
                for (int i = 0; i < N; i++)
                    want[i] = conv(src[i], (rlx_dtype)from, (rlx_dtype)to);
                int before = test_failures;
                EXPECT(rlx_cast(x, (rlx_dtype)to), (rlx_dtype)to, 1, SH(N), want, 0);
                if (test_failures != before)
                    fprintf(stderr, "  (%s -> %s, mode %d)\n", rlx_dtype_name((rlx_dtype)from),
                            rlx_dtype_name((rlx_dtype)to), mode);
            }
        }
    }
    /* spot values, spelled out */
    rlx_tensor *x = tf64(1, SH(5), (double[]){-2.9, 2.9, NAN, 1e10, -0.0});
    EXPECT(rlx_cast(x, RLX_I32), RLX_I32, 1, SH(5), ((double[]){-2, 2, 0, 2147483647.0, 0}), 0);
    EXPECT(rlx_cast(x, RLX_I64), RLX_I64, 1, SH(5), ((double[]){-2, 2, 0, 1e10, 0}), 0);
    EXPECT(rlx_cast(x, RLX_BOOL), RLX_BOOL, 1, SH(5), ((double[]){1, 1, 1, 1, 0}), 0);
}

TEST(cast_int_sources)
{
    /* i64 -> i32 wraps (NumPy astype); -> bool tests the whole value */
    static const int64_t v64[] = {4294967297LL, 2147483648LL, -2147483649LL, -1, 4294967296LL, INT64_MAX,
                                  INT64_MIN, 9007199254740993LL, 1152921573326323713LL, 0};
    enum { N = sizeof v64 / sizeof *v64 };
    rlx_tensor *x = ti64(1, SH(N), v64);
    double w32[N], wb[N], wf32[N], wf64[N];
    for (int i = 0; i < N; i++) {
        w32[i] = (double)(int32_t)(uint32_t)(uint64_t)v64[i];
        wb[i] = v64[i] != 0;
        wf32[i] = (double)(float)v64[i]; /* correctly rounded from the integer */
        wf64[i] = (double)v64[i];
    }
    EXPECT(rlx_cast(x, RLX_I32), RLX_I32, 1, SH(N), w32, 0);
    EXPECT(rlx_cast(x, RLX_BOOL), RLX_BOOL, 1, SH(N), wb, 0);
    EXPECT(rlx_cast(x, RLX_F32), RLX_F32, 1, SH(N), wf32, 0);
    EXPECT(rlx_cast(x, RLX_F64), RLX_F64, 1, SH(N), wf64, 0);
    /* v64[8] = 2^60 + 2^36 + 1 rounds to 2^60 + 2^37 directly but to 2^60
     * through f64 (double rounding). wf32 is computed at run time because
     * valgrind emulates this conversion through f64 too. */
    rlx_tensor *y = rlx_slice(ti32(1, SH(4), (int32_t[]){-5, 16777217, 0, INT32_MIN}), 0, RLX_END, RLX_END, -1);
    EXPECT(rlx_cast(y, RLX_I64), RLX_I64, 1, SH(4), ((double[]){INT32_MIN, 0, 16777217, -5}), 0);
    EXPECT(rlx_cast(y, RLX_F32), RLX_F32, 1, SH(4), ((double[]){INT32_MIN, 0, 16777216, -5}), 0);
    EXPECT(rlx_cast(y, RLX_F64), RLX_F64, 1, SH(4), ((double[]){INT32_MIN, 0, 16777217, -5}), 0);
    EXPECT(rlx_cast(y, RLX_BOOL), RLX_BOOL, 1, SH(4), ((double[]){1, 0, 1, 1}), 0);
    rlx_tensor *b = tbool(1, SH(3), (unsigned char[]){1, 0, 1});
    for (int to = RLX_BOOL; to <= RLX_F64; to++)
        EXPECT(rlx_cast(b, (rlx_dtype)to), (rlx_dtype)to, 1, SH(3), ((double[]){1, 0, 1}), 0);
    /* f64 -> f32 rounds; overflow gives inf */
    EXPECT(rlx_cast(tf64(1, SH(3), (double[]){0.1, 1e300, -1e300}), RLX_F32), RLX_F32, 1, SH(3),
           ((double[]){(double)0.1f, INFINITY, -INFINITY}), 0);
}

/* Casting a constant must give what casting its data would (folded or not). */
TEST(cast_of_constants)
{
    EXPECT(rlx_cast(rlx_full(RLX_I64, 1, SH(2), 4294967297.0), RLX_I32), RLX_I32, 1, SH(2), ((double[]){1, 1}), 0);
    EXPECT(rlx_cast(rlx_full(RLX_I64, 1, SH(2), -2147483649.0), RLX_I32), RLX_I32, 1, SH(2),
           ((double[]){2147483647.0, 2147483647.0}), 0);
    EXPECT(rlx_cast(rlx_full(RLX_F64, 1, SH(2), NAN), RLX_I32), RLX_I32, 1, SH(2), ((double[]){0, 0}), 0);
    EXPECT(rlx_cast(rlx_full(RLX_F64, 1, SH(2), -2.7), RLX_I64), RLX_I64, 1, SH(2), ((double[]){-2, -2}), 0);
    EXPECT(rlx_cast(rlx_full(RLX_F32, 1, SH(2), NAN), RLX_BOOL), RLX_BOOL, 1, SH(2), ((double[]){1, 1}), 0);
    EXPECT(rlx_cast(rlx_full(RLX_I64, 1, SH(2), 4294967296.0), RLX_BOOL), RLX_BOOL, 1, SH(2), ((double[]){1, 1}), 0);
}

TEST(cast_errors)
{
    rlx_tensor *x = rlx_zeros(RLX_F32, 1, SH(2));
    CHECK_NULL_ERR(rlx_cast(NULL, RLX_I32), RLX_E_ARG, "rlx_cast");
    CHECK_NULL_ERR(rlx_cast(x, (rlx_dtype)13), RLX_E_DTYPE, "rlx_cast");
    CHECK_NULL_ERR(rlx_cast(x, (rlx_dtype)-3), RLX_E_DTYPE, "rlx_cast");
    CHECK_NULL_ERR(rlx_cast(x, (rlx_dtype)-1), RLX_E_DTYPE, "rlx_cast");
    CHECK_NULL_ERR(rlx_cast(x, (rlx_dtype)INT_MAX), RLX_E_DTYPE, "rlx_cast");
}

/* ------------------------------------------ contiguous, stop_gradient */

TEST(contiguous_and_stop_gradient)
{
    for (int dt = RLX_BOOL; dt <= RLX_F64; dt++) {
        for (int mode = 0; mode < 3; mode++) {
            rlx_scope_begin();
            int64_t shape[3] = {2, 3, 4};
            double *v = rvals((rlx_dtype)dt, 24);
            rlx_tensor *x = make_t((rlx_dtype)dt, 3, shape, v, mode);
            rlx_realize(x);
            rlx_tensor *c = rlx_contiguous(x), *g = rlx_stop_gradient(x);
            EXPECT(c, (rlx_dtype)dt, 3, shape, v, 0);
            EXPECT(g, (rlx_dtype)dt, 3, shape, v, 0);
            CHECK_EQ_INT(rlx_realize(c), RLX_OK);
            CHECK(rlx_is_realized(c));
            CHECK(!rlx_shares_storage(c, x));
            CHECK_EQ_INT(rlx_storage_bytes(c), 24 * dsize((rlx_dtype)dt));
            /* a view of a contiguous result still reads the right values */
            double w[4];
            for (int k = 0; k < 4; k++)
                w[k] = v[1 * 12 + 2 * 4 + k];
            EXPECT(rlx_select(rlx_select(c, 0, 1), 0, 2), (rlx_dtype)dt, 1, SH(4), w, 0);
            free(v);
            rlx_scope_end();
        }
    }
    /* an already realized contiguous tensor still gets its own buffer */
    rlx_tensor *x = tf32(1, SH(3), (float[]){1, 2, 3}), *c = rlx_contiguous(x);
    CHECK_EQ_INT(rlx_realize(c), RLX_OK);
    CHECK(!rlx_shares_storage(c, x));
    EXPECT(c, RLX_F32, 1, SH(3), ((double[]){1, 2, 3}), 0);
    EXPECT(rlx_stop_gradient(rlx_scalar(RLX_I32, 4)), RLX_I32, 0, NULL, ((double[]){4}), 0);
    CHECK_NULL_ERR(rlx_contiguous(NULL), RLX_E_ARG, "rlx_contiguous");
    CHECK_NULL_ERR(rlx_stop_gradient(NULL), RLX_E_ARG, "rlx_stop_gradient");
}

/* A NULL input keeps the first recorded error, for every function here. */
TEST(null_propagation_keeps_first_error)
{
    rlx_tensor *i1 = ti32(1, SH(1), (int32_t[]){0});
    rlx_clear_error();
    rlx_tensor *bad = rlx_cast(i1, (rlx_dtype)13);
    CHECK(bad == NULL);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_DTYPE);
    char first[256];
    snprintf(first, sizeof first, "%s", rlx_last_error());
    rlx_tensor *r[] = {rlx_cat(TS(bad), 1, 0), rlx_cat(TS(i1, bad), 2, 0), rlx_stack(TS(bad), 1, 0),
                       rlx_tile(bad, 0, 2), rlx_flip(bad, 0), rlx_roll(bad, 0, 1), rlx_pad(bad, 0, 1, 1, 0),
                       rlx_pad_mode(bad, 0, 1, 1, RLX_PAD_REFLECT), rlx_pad_mode(bad, 0, 1, 1, RLX_PAD_REPLICATE),
                       rlx_gather(bad, i1, 0), rlx_gather(i1, bad, 0), rlx_index_select(bad, 0, i1),
                       rlx_index_select(i1, 0, bad), rlx_cast(bad, RLX_F32), rlx_contiguous(bad),
                       rlx_stop_gradient(bad)};
    for (size_t i = 0; i < sizeof r / sizeof *r; i++)
        if (r[i] != NULL)
            test_fail(__FILE__, __LINE__, "call %zu returned a tensor for a NULL input", i);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_DTYPE);
    CHECK(strcmp(rlx_last_error(), first) == 0);
    CHECK(strncmp(first, "rlx_cast", 8) == 0);
    rlx_clear_error();
}

TEST_MAIN(T(cat_fixed), T(cat_random), T(stack_every_axis), T(cat_stack_errors), T(tile_random), T(flip_random),
          T(roll_random), T(tile_flip_roll_fixed), T(tile_rank8), T(pad), T(pad_mode_random), T(pad_mode_fixed_and_errors), T(gather_fixed), T(gather_random),
          T(gather_out_of_range), T(gather_errors), T(scatter_fixed), T(scatter_random),
          T(scatter_add_bits_do_not_depend_on_threads), T(scatter_out_of_range), T(scatter_errors), T(cast_float_to_int_and_bool), T(cast_int_sources),
          T(cast_of_constants), T(cast_errors), T(contiguous_and_stop_gradient),
          T(null_propagation_keeps_first_error))
