/*
 * test_movement.c — views: reshape, transpose, t, broadcast_to, flatten,
 * unsqueeze, squeeze, squeeze_all, narrow, slice, select, split, chunk.
 *
 * Expected values come from a dense reference computed here with index
 * formulas (ref_map); slice is checked against CPython's slice.indices
 * algorithm. Every view of a realized tensor must read the base's buffer:
 * rlx_shares_storage is true and rlx_storage_bytes equals the base's.
 */
#include "harness.h"

#include <limits.h>

#define MAXR RLX_MAX_RANK

/* ------------------------------------------------------------ reference */

typedef struct {
    int rank;
    int64_t shape[MAXR];
    int64_t n;
    double *v;
} ref;

static int64_t numel_of(int rank, const int64_t *s)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= s[i];
    return n;
}

static ref ref_new(int rank, const int64_t *shape)
{
    ref r = {.rank = rank};
    for (int i = 0; i < rank; i++) /* (a loop: gcc -O3 misjudges the memcpy bound) */
        r.shape[i] = shape[i];
    r.n = numel_of(rank, shape);
    r.v = calloc((size_t)(r.n ? r.n : 1), sizeof *r.v);
    return r;
}

/* The value stored at flat index i of a test tensor of dtype dt. */
static double gen(rlx_dtype dt, int64_t i)
{
    switch (dt) {
    case RLX_BOOL: return (double)((i * 7 + 3) % 3 == 0);
    case RLX_I32: return (double)(i * 3 - 50);
    case RLX_I64: return (double)(i * 1000000007LL + 5000000000LL); /* beyond 32 bits */
    case RLX_F32: return (double)i * 0.25 - 3;
    default: return (double)i * 0.5 + 0.125;
    }
}

/* A realized tensor of dtype dt holding gen(dt, i); *r gets its reference. */
static rlx_tensor *make_base(rlx_dtype dt, int rank, const int64_t *shape, ref *r)
{
    *r = ref_new(rank, shape);
    size_t es = dt == RLX_BOOL ? 1 : dt == RLX_I32 || dt == RLX_F32 ? 4 : 8;
    unsigned char *buf = malloc((size_t)(r->n ? r->n : 1) * es);
    for (int64_t i = 0; i < r->n; i++) {
        double v = r->v[i] = gen(dt, i);
        switch (dt) {
        case RLX_BOOL: buf[i] = (unsigned char)(v != 0); break;
        case RLX_I32: ((int32_t *)(void *)buf)[i] = (int32_t)v; break;
        case RLX_I64: ((int64_t *)(void *)buf)[i] = (int64_t)v; break;
        case RLX_F32: ((float *)(void *)buf)[i] = (float)v; break;
        default: ((double *)(void *)buf)[i] = v; break;
        }
    }
    rlx_tensor *t = rlx_from_data(dt, rank, shape, buf);
    free(buf);
    if (!t)
        test_fail(__FILE__, __LINE__, "rlx_from_data: %s", rlx_last_error());
    else if (rlx_realize(t) != RLX_OK || !rlx_is_realized(t))
        test_fail(__FILE__, __LINE__, "base not realized: %s", rlx_last_error());
    return t;
}

/* out[oi] = in[ii] with ii = map(oi). */
typedef void (*map_fn)(const int64_t *oi, int64_t *ii, const void *ctx);

static ref ref_map(const ref *in, int rank, const int64_t *shape, map_fn f, const void *ctx)
{
    ref o = ref_new(rank, shape);
    int64_t oi[MAXR] = {0}, ii[MAXR] = {0};
    for (int64_t k = 0; k < o.n; k++) {
        f(oi, ii, ctx);
        int64_t off = 0;
        for (int d = 0; d < in->rank; d++)
            off = off * in->shape[d] + ii[d];
        o.v[k] = in->v[off];
        for (int d = rank - 1; d >= 0; d--) {
            if (++oi[d] < shape[d])
                break;
            oi[d] = 0;
        }
    }
    return o;
}

/* Row-major order is kept: reshape, flatten, (un)squeeze. */
static ref ref_reshape(const ref *in, int rank, const int64_t *shape)
{
    ref o = ref_new(rank, shape);
    if (o.n == in->n)
        memcpy(o.v, in->v, (size_t)o.n * sizeof *o.v);
    return o;
}

typedef struct {
    int rank, perm[MAXR];
} perm_ctx;
static void map_perm(const int64_t *oi, int64_t *ii, const void *c)
{
    const perm_ctx *p = c;
    for (int k = 0; k < p->rank; k++)
        ii[p->perm[k]] = oi[k];
}
static ref ref_transpose(const ref *in, const int *perm)
{
    perm_ctx c = {.rank = in->rank};
    int64_t shape[MAXR];
    for (int k = 0; k < in->rank; k++) {
        c.perm[k] = perm[k] < 0 ? perm[k] + in->rank : perm[k];
        shape[k] = in->shape[c.perm[k]];
    }
    return ref_map(in, in->rank, shape, map_perm, &c);
}

typedef struct {
    int rank, ax;
    int64_t first, step; /* ii[ax] = first + oi[ax] * step */
    int drop;            /* select: the output lacks axis ax */
} sl_ctx;
static void map_slice(const int64_t *oi, int64_t *ii, const void *c)
{
    const sl_ctx *s = c;
    for (int d = 0, k = 0; d < s->rank; d++) {
        if (d == s->ax)
            ii[d] = s->first + (s->drop ? 0 : oi[k++]) * s->step;
        else
            ii[d] = oi[k++];
    }
}
static ref ref_slice(const ref *in, int ax, int64_t first, int64_t step, int64_t len)
{
    sl_ctx c = {in->rank, ax, first, step, 0};
    int64_t shape[MAXR];
    memcpy(shape, in->shape, sizeof shape);
    shape[ax] = len;
    return ref_map(in, in->rank, shape, map_slice, &c);
}
static ref ref_select(const ref *in, int ax, int64_t index)
{
    sl_ctx c = {in->rank, ax, index, 0, 1};
    int64_t shape[MAXR];
    for (int d = 0, k = 0; d < in->rank; d++)
        if (d != ax)
            shape[k++] = in->shape[d];
    return ref_map(in, in->rank - 1, shape, map_slice, &c);
}

typedef struct {
    int rank, lead;
    const int64_t *in_shape;
} bc_ctx;
static void map_bcast(const int64_t *oi, int64_t *ii, const void *c)
{
    const bc_ctx *b = c;
    for (int d = 0; d < b->rank; d++)
        ii[d] = b->in_shape[d] == 1 ? 0 : oi[d + b->lead];
}
static ref ref_bcast(const ref *in, int rank, const int64_t *shape)
{
    bc_ctx c = {in->rank, rank - in->rank, in->shape};
    return ref_map(in, rank, shape, map_bcast, &c);
}

/* CPython's PySlice_Unpack + PySlice_AdjustIndices (Objects/sliceobject.c),
 * with RLX_END standing for None where rlx.h says it does: a None stop with
 * a negative step is PY_SSIZE_T_MIN there; every other RLX_END is already
 * CPython's encoding of None (PY_SSIZE_T_MAX). */
static int64_t py_slice(int64_t len, int64_t start, int64_t stop, int64_t step, int64_t *first)
{
    if (step < -INT64_MAX)
        step = -INT64_MAX;
    if (stop == RLX_END && step < 0)
        stop = INT64_MIN;
    if (start < 0) {
        start += len;
        if (start < 0)
            start = step < 0 ? -1 : 0;
    } else if (start >= len) {
        start = step < 0 ? len - 1 : len;
    }
    if (stop < 0) {
        stop += len;
        if (stop < 0)
            stop = step < 0 ? -1 : 0;
    } else if (stop >= len) {
        stop = step < 0 ? len - 1 : len;
    }
    *first = start;
    if (step < 0)
        return stop < start ? (start - stop - 1) / (-step) + 1 : 0;
    return start < stop ? (stop - start - 1) / step + 1 : 0;
}

/* ------------------------------------------------------------- checking */

#define EXPECT_REF(t, dt, r) test_expect(__FILE__, __LINE__, #t, (t), (dt), (r)->rank, (r)->shape, (r)->v, 0, 0)

/* v reads base's buffer and holds no payload of its own. */
#define CHECK_VIEW(v, base) check_view(__FILE__, __LINE__, #v, (v), (base))
static void check_view(const char *file, int line, const char *name, rlx_tensor *v, rlx_tensor *base)
{
    if (!v) {
        test_fail(file, line, "%s is NULL: %s", name, rlx_last_error());
        return;
    }
    if (!rlx_shares_storage(v, base))
        test_fail(file, line, "%s does not share the base's storage", name);
    size_t got = rlx_storage_bytes(v), want = rlx_storage_bytes(base);
    if (got != want)
        test_fail(file, line, "rlx_storage_bytes(%s) = %zu, base holds %zu", name, got, want);
}


/* split/chunk failing: the returned status, the recorded one, the message,
 * and every out[i] set to NULL. */
static char sentinel_;
#define SENTINEL ((rlx_tensor *)(void *)&sentinel_)
#define CHECK_PIECES_ERR(call, want, fn, out, n) \
    check_pieces_err(__FILE__, __LINE__, #call, (call), (want), (fn), (out), (n))
static void check_pieces_err(const char *file, int line, const char *call, rlx_status got, rlx_status want,
                             const char *fn, rlx_tensor **out, int n)
{
    if (got != want)
        test_fail(file, line, "%s returned %d, expected %d (%s)", call, (int)got, (int)want, rlx_last_error());
    test_check_error(file, line, call, want, fn);
    for (int i = 0; out && i < n; i++)
        if (out[i] != NULL)
            test_fail(file, line, "%s: out[%d] is not NULL after the error", call, i);
}
static void fill_sentinel(rlx_tensor **out, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = SENTINEL;
}

#define SH(...) ((const int64_t[]){__VA_ARGS__})

/* ---------------------------------------------------------------- tests */

TEST(reshape_values_and_views)
{
    ref r;
    rlx_tensor *x = make_base(RLX_F64, 3, SH(2, 3, 4), &r);
    static const struct {
        int rank;
        int64_t ask[4], want[4];
    } cases[] = {
        {2, {4, 6}, {4, 6}},        {1, {24}, {24}},          {3, {2, -1, 3}, {2, 4, 3}},
        {1, {-1}, {24}},            {4, {1, 24, 1, 1}, {1, 24, 1, 1}}, {2, {-1, 8}, {3, 8}},
        {3, {2, 3, 4}, {2, 3, 4}},  {4, {2, 2, -1, 2}, {2, 2, 3, 2}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        rlx_tensor *y = rlx_reshape(x, cases[i].rank, cases[i].ask);
        CHECK_VIEW(y, x);
        ref e = ref_reshape(&r, cases[i].rank, cases[i].want);
        EXPECT_REF(y, RLX_F64, &e);
        free(e.v);
    }
    /* reshape of a reshape */
    rlx_tensor *y = rlx_reshape(rlx_reshape(x, 2, SH(6, 4)), 3, SH(4, 3, 2));
    CHECK_VIEW(y, x);
    ref e = ref_reshape(&r, 3, SH(4, 3, 2));
    EXPECT_REF(y, RLX_F64, &e);
    free(e.v);
    free(r.v);
    /* rank 0 <-> [1] <-> [1,1,1] */
    ref s;
    rlx_tensor *sc = make_base(RLX_I32, 0, NULL, &s);
    rlx_tensor *one = rlx_reshape(sc, 1, SH(1));
    CHECK_VIEW(one, sc);
    EXPECT(one, RLX_I32, 1, SH(1), s.v, 0);
    rlx_tensor *back = rlx_reshape(one, 0, NULL);
    CHECK_VIEW(back, sc);
    EXPECT(back, RLX_I32, 0, NULL, s.v, 0);
    EXPECT(rlx_reshape(sc, 3, SH(1, -1, 1)), RLX_I32, 3, SH(1, 1, 1), s.v, 0);
    EXPECT(rlx_reshape(rlx_reshape(sc, 3, SH(1, 1, 1)), 0, NULL), RLX_I32, 0, NULL, s.v, 0);
    free(s.v);
    /* empty tensors: -1 is inferred when it is not ambiguous */
    ref z;
    rlx_tensor *empty = make_base(RLX_F32, 2, SH(0, 3), &z);
    EXPECT(rlx_reshape(empty, 2, SH(3, 0)), RLX_F32, 2, SH(3, 0), z.v, 0);
    EXPECT(rlx_reshape(empty, 2, SH(2, -1)), RLX_F32, 2, SH(2, 0), z.v, 0);
    EXPECT(rlx_reshape(empty, 1, SH(-1)), RLX_F32, 1, SH(0), z.v, 0);
    free(z.v);
}

TEST(reshape_errors)
{
    rlx_tensor *x = rlx_from_data(RLX_F32, 2, SH(4, 6), (float[24]){0});
    rlx_tensor *empty = rlx_from_data(RLX_F32, 2, SH(0, 3), NULL);
    CHECK_NULL_ERR(rlx_reshape(NULL, 1, SH(24)), RLX_E_ARG, "rlx_reshape");
    CHECK_NULL_ERR(rlx_reshape(x, 2, SH(5, 5)), RLX_E_SHAPE, "rlx_reshape");
    CHECK_NULL_ERR(rlx_reshape(x, 2, SH(-1, -1)), RLX_E_SHAPE, "rlx_reshape");
    CHECK_NULL_ERR(rlx_reshape(x, 2, SH(-2, -12)), RLX_E_SHAPE, "rlx_reshape");
    CHECK_NULL_ERR(rlx_reshape(x, 2, SH(5, -1)), RLX_E_SHAPE, "rlx_reshape");
    CHECK_NULL_ERR(rlx_reshape(x, 2, SH(0, -1)), RLX_E_SHAPE, "rlx_reshape");
    CHECK_NULL_ERR(rlx_reshape(x, 0, NULL), RLX_E_SHAPE, "rlx_reshape");
    CHECK_NULL_ERR(rlx_reshape(x, 2, SH(INT64_MAX, 2)), RLX_E_SHAPE, "rlx_reshape");
    CHECK_NULL_ERR(rlx_reshape(x, 3, SH(INT64_MAX / 2, 4, -1)), RLX_E_SHAPE, "rlx_reshape");
    /* -1 beside a 0 is ambiguous with 0 elements */
    CHECK_NULL_ERR(rlx_reshape(empty, 2, SH(0, -1)), RLX_E_SHAPE, "rlx_reshape");
    CHECK_NULL_ERR(rlx_reshape(empty, 3, SH(-1, 0, 3)), RLX_E_SHAPE, "rlx_reshape");
    CHECK_NULL_ERR(rlx_reshape(empty, 2, SH(1, 1)), RLX_E_SHAPE, "rlx_reshape");
    /* rank outside 0..8 */
    CHECK_NULL_ERR(rlx_reshape(x, 9, SH(1, 1, 1, 1, 1, 1, 1, 4, 6)), RLX_E_SHAPE, "rlx_reshape");
    CHECK_NULL_ERR(rlx_reshape(x, -1, SH(24)), RLX_E_SHAPE, "rlx_reshape");
}

/* A NULL shape array is a bad argument (rlx.h: RLX_E_ARG covers NULL), as
 * rlx_broadcast_to and the constructors report it. */
TEST(reshape_null_shape_is_arg)
{
    rlx_tensor *x = rlx_from_data(RLX_F32, 2, SH(4, 6), (float[24]){0});
    CHECK_NULL_ERR(rlx_reshape(x, 2, NULL), RLX_E_ARG, "rlx_reshape");
    CHECK_NULL_ERR(rlx_broadcast_to(x, 2, NULL), RLX_E_ARG, "rlx_broadcast_to");
}

TEST(transpose_and_t)
{
    ref r;
    rlx_tensor *x = make_base(RLX_F32, 3, SH(2, 3, 4), &r);
    static const int perms[][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0},
                                   {-1, 0, 1}, {-3, -1, -2}, {2, -2, 0}};
    for (size_t i = 0; i < sizeof perms / sizeof *perms; i++) {
        rlx_scope_begin(); /* a read view is released before an equal one is built */
        rlx_tensor *y = rlx_transpose(x, 3, perms[i]);
        CHECK_VIEW(y, x);
        ref e = ref_transpose(&r, perms[i]);
        EXPECT_REF(y, RLX_F32, &e);
        free(e.v);
        rlx_scope_end();
    }
    /* NULL perm reverses, as NumPy */
    ref e = ref_transpose(&r, (int[]){2, 1, 0});
    rlx_tensor *rev = rlx_transpose(x, 0, NULL);
    CHECK_VIEW(rev, x);
    EXPECT_REF(rev, RLX_F32, &e);
    free(e.v);
    /* t swaps the last two */
    e = ref_transpose(&r, (int[]){0, 2, 1});
    rlx_tensor *tt = rlx_t(x);
    CHECK_VIEW(tt, x);
    EXPECT_REF(tt, RLX_F32, &e);
    EXPECT_SAME(rlx_t(rlx_t(x)), x, 0);
    free(e.v);
    free(r.v);
    /* rank 0 and 1 come back as they are */
    ref a, b;
    rlx_tensor *s = make_base(RLX_I64, 0, NULL, &a), *v = make_base(RLX_I64, 1, SH(5), &b);
    EXPECT(rlx_t(s), RLX_I64, 0, NULL, a.v, 0);
    EXPECT(rlx_t(v), RLX_I64, 1, SH(5), b.v, 0);
    EXPECT(rlx_transpose(s, 0, NULL), RLX_I64, 0, NULL, a.v, 0);
    EXPECT(rlx_transpose(v, 1, (int[]){-1}), RLX_I64, 1, SH(5), b.v, 0);
    CHECK_VIEW(rlx_t(v), v);
    free(a.v);
    free(b.v);
    /* errors */
    CHECK_NULL_ERR(rlx_transpose(NULL, 0, NULL), RLX_E_ARG, "rlx_transpose");
    static const struct {
        int n, p[4];
    } bad[] = {{2, {1, 0}},  {4, {0, 1, 2, 3}}, {3, {0, 0, 1}},        {3, {0, -3, 1}},
               {3, {0, 1, 3}}, {3, {0, 1, -4}},  {3, {INT_MIN, 1, 2}}, {3, {0, INT_MAX, 1}}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_NULL_ERR(rlx_transpose(x, bad[i].n, bad[i].p), RLX_E_ARG, "rlx_transpose");
    CHECK_NULL_ERR(rlx_transpose(x, 3, NULL), RLX_E_ARG, "rlx_transpose");
    CHECK_NULL_ERR(rlx_t(NULL), RLX_E_ARG, "rlx_t");
}

TEST(broadcast_to)
{
    ref r;
    rlx_tensor *x = make_base(RLX_I32, 2, SH(3, 1), &r);
    static const struct {
        int rank;
        int64_t shape[4];
    } ok[] = {{2, {3, 1}}, {2, {3, 5}}, {3, {2, 3, 4}}, {4, {1, 2, 3, 1}}, {3, {0, 3, 2}}, {2, {3, 0}}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        rlx_tensor *y = rlx_broadcast_to(x, ok[i].rank, ok[i].shape);
        CHECK_VIEW(y, x);
        ref e = ref_bcast(&r, ok[i].rank, ok[i].shape);
        EXPECT_REF(y, RLX_I32, &e);
        free(e.v);
    }
    ref s;
    rlx_tensor *sc = make_base(RLX_F64, 0, NULL, &s);
    rlx_tensor *y = rlx_broadcast_to(sc, 2, SH(2, 3));
    CHECK_VIEW(y, sc);
    ref e = ref_bcast(&s, 2, SH(2, 3));
    EXPECT_REF(y, RLX_F64, &e);
    free(e.v);
    free(s.v);
    free(r.v);
    CHECK_NULL_ERR(rlx_broadcast_to(NULL, 1, SH(3)), RLX_E_ARG, "rlx_broadcast_to");
    static const struct {
        int rank;
        int64_t shape[9];
    } bad[] = {{2, {4, 2}}, {1, {3}}, {2, {1, 1}}, {0, {0}}, {2, {3, -1}}, {9, {1, 1, 1, 1, 1, 1, 1, 3, 1}}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_NULL_ERR(rlx_broadcast_to(x, bad[i].rank, bad[i].shape), RLX_E_SHAPE, "rlx_broadcast_to");
}

TEST(flatten_unsqueeze_squeeze)
{
    ref r, s;
    rlx_tensor *x = make_base(RLX_F64, 3, SH(2, 3, 4), &r), *sc = make_base(RLX_F64, 0, NULL, &s);
    rlx_tensor *f = rlx_flatten(x);
    CHECK_VIEW(f, x);
    EXPECT(f, RLX_F64, 1, SH(24), r.v, 0);
    EXPECT(rlx_flatten(sc), RLX_F64, 1, SH(1), s.v, 0);
    EXPECT(rlx_flatten(f), RLX_F64, 1, SH(24), r.v, 0);
    EXPECT(rlx_flatten(rlx_from_data(RLX_I32, 2, SH(0, 5), NULL)), RLX_I32, 1, SH(0), NULL, 0);
    /* unsqueeze: axis in [-rank-1, rank] */
    for (int axis = -4; axis <= 3; axis++) {
        int ax = axis < 0 ? axis + 4 : axis;
        int64_t want[4];
        for (int d = 0, k = 0; d < 4; d++)
            want[d] = d == ax ? 1 : r.shape[k++];
        rlx_tensor *u = rlx_unsqueeze(x, axis);
        CHECK_VIEW(u, x);
        EXPECT(u, RLX_F64, 4, want, r.v, 0);
        /* and squeeze undoes it */
        rlx_tensor *q = rlx_squeeze(u, axis);
        CHECK_VIEW(q, x);
        EXPECT(q, RLX_F64, 3, SH(2, 3, 4), r.v, 0);
    }
    EXPECT(rlx_unsqueeze(sc, 0), RLX_F64, 1, SH(1), s.v, 0);
    EXPECT(rlx_unsqueeze(sc, -1), RLX_F64, 1, SH(1), s.v, 0);
    CHECK_NULL_ERR(rlx_unsqueeze(NULL, 0), RLX_E_ARG, "rlx_unsqueeze");
    for (int a = 0; a < 2; a++) { /* just outside [-rank-1, rank] */
        CHECK_NULL_ERR(rlx_unsqueeze(x, a ? -5 : 4), RLX_E_ARG, "rlx_unsqueeze");
        CHECK_NULL_ERR(rlx_unsqueeze(sc, a ? -2 : 1), RLX_E_ARG, "rlx_unsqueeze");
    }
    rlx_tensor *r8 = rlx_zeros(RLX_F32, 8, SH(1, 1, 1, 1, 1, 1, 1, 2));
    CHECK_NULL_ANY(rlx_unsqueeze(r8, 0), "rlx_unsqueeze"); /* rank 9 */
    /* squeeze: size-1 axes only */
    ref o;
    rlx_tensor *y = make_base(RLX_I64, 5, SH(1, 3, 1, 2, 1), &o);
    static const struct {
        int axis;
        int64_t shape[4];
    } sq[] = {{0, {3, 1, 2, 1}}, {2, {1, 3, 2, 1}}, {4, {1, 3, 1, 2}}, {-1, {1, 3, 1, 2}}, {-5, {3, 1, 2, 1}},
              {-3, {1, 3, 2, 1}}};
    for (size_t i = 0; i < sizeof sq / sizeof *sq; i++) {
        rlx_tensor *q = rlx_squeeze(y, sq[i].axis);
        CHECK_VIEW(q, y);
        EXPECT(q, RLX_I64, 4, sq[i].shape, o.v, 0);
    }
    CHECK_NULL_ERR(rlx_squeeze(NULL, 0), RLX_E_ARG, "rlx_squeeze");
    for (int a = 0; a < 2; a++) {
        CHECK_NULL_ERR(rlx_squeeze(y, a ? -2 : 1), RLX_E_SHAPE, "rlx_squeeze"); /* size 2 or 3 */
        CHECK_NULL_ERR(rlx_squeeze(y, a ? -6 : 5), RLX_E_ARG, "rlx_squeeze");
    }
    CHECK_NULL_ERR(rlx_squeeze(sc, 0), RLX_E_ARG, "rlx_squeeze");
    CHECK_NULL_ERR(rlx_squeeze(rlx_from_data(RLX_F32, 1, SH(0), NULL), 0), RLX_E_SHAPE, "rlx_squeeze");
    /* squeeze_all */
    rlx_tensor *qa = rlx_squeeze_all(y);
    CHECK_VIEW(qa, y);
    EXPECT(qa, RLX_I64, 2, SH(3, 2), o.v, 0);
    EXPECT(rlx_squeeze_all(rlx_reshape(sc, 3, SH(1, 1, 1))), RLX_F64, 0, NULL, s.v, 0);
    EXPECT(rlx_squeeze_all(sc), RLX_F64, 0, NULL, s.v, 0);
    EXPECT(rlx_squeeze_all(x), RLX_F64, 3, SH(2, 3, 4), r.v, 0);
    EXPECT(rlx_squeeze_all(rlx_from_data(RLX_F32, 3, SH(1, 0, 1), NULL)), RLX_F32, 1, SH(0), NULL, 0);
    CHECK_NULL_ERR(rlx_squeeze_all(NULL), RLX_E_ARG, "rlx_squeeze_all");
    CHECK_NULL_ERR(rlx_flatten(NULL), RLX_E_ARG, "rlx_flatten");
    free(r.v);
    free(s.v);
    free(o.v);
}

TEST(narrow_and_select)
{
    ref r;
    rlx_tensor *x = make_base(RLX_F32, 3, SH(5, 4, 3), &r);
    static const struct {
        int axis;
        int64_t start, len, first;
    } nw[] = {{0, 1, 3, 1}, {0, -2, 2, 3}, {1, 0, 4, 0}, {-1, 2, 1, 2}, {-2, -4, 0, 0},
              {0, 5, 0, 5},  {1, 4, 0, 4}, {-3, -5, 5, 0}, {2, -1, 1, 2}};
    for (size_t i = 0; i < sizeof nw / sizeof *nw; i++) {
        rlx_scope_begin();
        rlx_tensor *y = rlx_narrow(x, nw[i].axis, nw[i].start, nw[i].len);
        CHECK_VIEW(y, x);
        int ax = nw[i].axis < 0 ? nw[i].axis + 3 : nw[i].axis;
        ref e = ref_slice(&r, ax, nw[i].first, 1, nw[i].len);
        EXPECT_REF(y, RLX_F32, &e);
        free(e.v);
        rlx_scope_end();
    }
    CHECK_NULL_ERR(rlx_narrow(NULL, 0, 0, 1), RLX_E_ARG, "rlx_narrow");
    static const struct {
        int axis;
        int64_t start, len;
    } bad[] = {{3, 0, 1},  {-4, 0, 1}, {0, -6, 1}, {0, 6, 0},         {0, 2, 4},
               {0, -1, 2}, {0, 0, -1}, {0, 1, INT64_MAX}, {0, INT64_MIN, 1}, {0, INT64_MAX, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_NULL_ERR(rlx_narrow(x, bad[i].axis, bad[i].start, bad[i].len), RLX_E_ARG, "rlx_narrow");
    /* select drops the axis */
    for (int axis = -3; axis < 3; axis++) {
        int ax = axis < 0 ? axis + 3 : axis;
        for (int64_t idx = -r.shape[ax]; idx < r.shape[ax]; idx++) {
            rlx_scope_begin();
            rlx_tensor *y = rlx_select(x, axis, idx);
            CHECK_VIEW(y, x);
            ref e = ref_select(&r, ax, idx < 0 ? idx + r.shape[ax] : idx);
            EXPECT_REF(y, RLX_F32, &e);
            free(e.v);
            rlx_scope_end();
        }
    }
    ref v;
    rlx_tensor *vec = make_base(RLX_I32, 1, SH(4), &v);
    EXPECT(rlx_select(vec, 0, -1), RLX_I32, 0, NULL, &v.v[3], 0);
    CHECK_NULL_ERR(rlx_select(NULL, 0, 0), RLX_E_ARG, "rlx_select");
    CHECK_NULL_ERR(rlx_select(x, 0, 5), RLX_E_ARG, "rlx_select");
    CHECK_NULL_ERR(rlx_select(x, 0, -6), RLX_E_ARG, "rlx_select");
    CHECK_NULL_ERR(rlx_select(x, 3, 0), RLX_E_ARG, "rlx_select");
    CHECK_NULL_ERR(rlx_select(x, -4, 0), RLX_E_ARG, "rlx_select");
    CHECK_NULL_ERR(rlx_select(x, 0, INT64_MIN), RLX_E_ARG, "rlx_select");
    CHECK_NULL_ERR(rlx_select(rlx_select(vec, 0, 0), 0, 0), RLX_E_ARG, "rlx_select"); /* rank 0 */
    CHECK_NULL_ERR(rlx_select(rlx_from_data(RLX_F32, 2, SH(0, 2), NULL), 0, 0), RLX_E_ARG, "rlx_select");
    free(r.v);
    free(v.v);
}

TEST(slice_table)
{
    /* Hand-computed Python results on a length-5 axis (x = [0..4]). */
    static const struct {
        int64_t start, stop, step;
        int n;
        int64_t idx[5];
    } cases[] = {
        {RLX_END, RLX_END, -1, 5, {4, 3, 2, 1, 0}} /* x[::-1] */, {0, RLX_END, 1, 5, {0, 1, 2, 3, 4}} /* x[0:] */,
        {RLX_END, RLX_END, 1, 0, {0}} /* start past the end */, {RLX_END, 0, 1, 0, {0}},
        {3, RLX_END, -1, 4, {3, 2, 1, 0}} /* x[3::-1] */,   {RLX_END, 2, -1, 2, {4, 3}} /* x[:2:-1] */,
        {-1, RLX_END, -2, 3, {4, 2, 0}} /* x[-1::-2] */,    {0, RLX_END, 2, 3, {0, 2, 4}},
        {-100, 100, 1, 5, {0, 1, 2, 3, 4}},                 {100, -100, -1, 5, {4, 3, 2, 1, 0}},
        {1, 1, 1, 0, {0}},                                  {2, -1, 1, 2, {2, 3}},
        {-1, -6, -1, 5, {4, 3, 2, 1, 0}},                   {-1, -5, -1, 4, {4, 3, 2, 1}},
        {RLX_END, -100, -1, 5, {4, 3, 2, 1, 0}},            {1, 4, 2, 2, {1, 3}},
        {4, 0, -3, 2, {4, 1}},                              {0, 5, 100, 1, {0}},
        {2, RLX_END, INT64_MAX, 1, {2}},                    {RLX_END, RLX_END, -INT64_MAX, 1, {4}},
        {-3, 4, 1, 2, {2, 3}},                              {3, 1, 1, 0, {0}},
        {1, 3, -1, 0, {0}},                                 {INT64_MIN, RLX_END, 1, 5, {0, 1, 2, 3, 4}},
        {RLX_END, INT64_MIN, -1, 5, {4, 3, 2, 1, 0}},       {0, INT64_MIN, -1, 1, {0}},
    };
    ref r;
    rlx_tensor *x = make_base(RLX_I64, 2, SH(5, 2), &r);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        rlx_scope_begin();
        rlx_tensor *y = rlx_slice(x, 0, cases[i].start, cases[i].stop, cases[i].step);
        CHECK_VIEW(y, x);
        double want[10];
        for (int k = 0; k < cases[i].n; k++)
            for (int j = 0; j < 2; j++)
                want[k * 2 + j] = r.v[cases[i].idx[k] * 2 + j];
        int before = test_failures;
        EXPECT(y, RLX_I64, 2, ((int64_t[]){cases[i].n, 2}), want, 0);
        if (test_failures != before)
            fprintf(stderr, "  (case %zu: start %lld stop %lld step %lld)\n", i, (long long)cases[i].start,
                    (long long)cases[i].stop, (long long)cases[i].step);
        /* the test's reference agrees with the table */
        int64_t first, n = py_slice(5, cases[i].start, cases[i].stop, cases[i].step, &first);
        CHECK_EQ_INT(n, cases[i].n);
        if (n > 0)
            CHECK_EQ_INT(first, cases[i].idx[0]);
        rlx_scope_end();
    }
    free(r.v);
}

static int64_t rand_bound(int64_t len)
{
    double u = test_uniform(0, 1);
    if (u < 0.12)
        return RLX_END;
    if (u < 0.16)
        return INT64_MIN;
    if (u < 0.22)
        return (int64_t)test_uniform(-1e18, 1e18);
    return (int64_t)floor(test_uniform((double)(-len - 3), (double)(len + 4)));
}

static int64_t rand_step(int64_t len)
{
    double u = test_uniform(0, 1);
    if (u < 0.04)
        return INT64_MAX;
    if (u < 0.08)
        return -INT64_MAX;
    if (u < 0.14)
        return (int64_t)test_uniform(-1e18, 1e18) | 1;
    int64_t s = (int64_t)floor(test_uniform((double)(-len - 2), (double)(len + 3)));
    return s ? s : -1;
}

TEST(slice_random_python_rules)
{
    ref r[8];
    rlx_tensor *base[8];
    for (int len = 0; len < 8; len++)
        base[len] = make_base(RLX_F64, 3, SH(2, len, 3), &r[len]);
    for (int it = 0; it < 400; it++) {
        int len = (int)test_uniform(0, 8);
        int64_t start = rand_bound(len), stop = rand_bound(len), step = rand_step(len), first;
        int64_t n = py_slice(len, start, stop, step, &first);
        rlx_scope_begin();
        rlx_tensor *y = rlx_slice(base[len], it % 2 ? 1 : -2, start, stop, step);
        int before = test_failures;
        CHECK_VIEW(y, base[len]);
        ref e = ref_slice(&r[len], 1, n ? first : 0, step, n);
        EXPECT_REF(y, RLX_F64, &e);
        if (test_failures != before)
            fprintf(stderr, "  (len %d start %lld stop %lld step %lld: want %lld elements from %lld)\n", len,
                    (long long)start, (long long)stop, (long long)step, (long long)n, (long long)first);
        free(e.v);
        rlx_scope_end();
    }
    for (int len = 0; len < 8; len++)
        free(r[len].v);
}

TEST(slice_errors)
{
    rlx_tensor *x = rlx_from_data(RLX_F32, 2, SH(2, 3), (float[6]){0});
    CHECK_NULL_ERR(rlx_slice(NULL, 0, 0, 1, 1), RLX_E_ARG, "rlx_slice");
    CHECK_NULL_ERR(rlx_slice(x, 0, 0, 2, 0), RLX_E_ARG, "rlx_slice");
    CHECK_NULL_ERR(rlx_slice(x, 2, 0, 2, 1), RLX_E_ARG, "rlx_slice");
    CHECK_NULL_ERR(rlx_slice(x, -3, 0, 2, 1), RLX_E_ARG, "rlx_slice");
    CHECK_NULL_ERR(rlx_slice(x, INT_MAX, 0, 2, 1), RLX_E_ARG, "rlx_slice");
    CHECK_NULL_ERR(rlx_slice(rlx_scalar(RLX_F32, 1), 0, 0, 1, 1), RLX_E_ARG, "rlx_slice");
}

/* rlx.h asks only step != 0; Python clamps a step of -2^63 to -(2^63-1). */
TEST(slice_step_int64_min)
{
    ref r;
    rlx_tensor *x = make_base(RLX_I32, 1, SH(5), &r);
    rlx_tensor *y = rlx_slice(x, 0, RLX_END, RLX_END, INT64_MIN);
    EXPECT(y, RLX_I32, 1, SH(1), &r.v[4], 0);
    free(r.v);
}

TEST(split_and_chunk)
{
    ref r;
    rlx_tensor *x = make_base(RLX_F32, 2, SH(7, 3), &r);
    static const struct {
        int axis, n;
        int64_t sizes[4];
    } sp[] = {{0, 3, {2, 0, 5}}, {-2, 1, {7}}, {1, 2, {1, 2}}, {-1, 4, {0, 3, 0, 0}}, {0, 4, {1, 1, 1, 4}}};
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++) {
        rlx_tensor *out[4];
        fill_sentinel(out, 4);
        rlx_scope_begin();
        CHECK_EQ_INT(rlx_split(x, sp[i].axis, sp[i].n, sp[i].sizes, out), RLX_OK);
        if (sp[i].n < 4)
            CHECK(out[sp[i].n] == SENTINEL); /* nothing written past n */
        int ax = sp[i].axis < 0 ? sp[i].axis + 2 : sp[i].axis;
        int64_t at = 0;
        for (int k = 0; k < sp[i].n; k++) /* all before any read: equal pieces are one node */
            CHECK_VIEW(out[k], x);
        for (int k = 0; k < sp[i].n; k++) {
            ref e = ref_slice(&r, ax, at, 1, sp[i].sizes[k]);
            EXPECT_REF(out[k], RLX_F32, &e);
            free(e.v);
            at += sp[i].sizes[k];
        }
        rlx_scope_end();
    }
    /* chunk: the first len % n pieces get one more */
    static const struct {
        int64_t len;
        int n;
        int64_t sizes[6];
    } ch[] = {{7, 3, {3, 2, 2}}, {2, 5, {1, 1, 0, 0, 0}}, {6, 3, {2, 2, 2}}, {0, 2, {0, 0}}, {5, 1, {5}},
              {11, 6, {2, 2, 2, 2, 2, 1}}};
    for (size_t i = 0; i < sizeof ch / sizeof *ch; i++) {
        ref b;
        rlx_tensor *y = make_base(RLX_I64, 3, SH(2, ch[i].len, 2), &b), *out[6];
        fill_sentinel(out, 6);
        CHECK_EQ_INT(rlx_chunk(y, i % 2 ? 1 : -2, ch[i].n, out), RLX_OK);
        int64_t at = 0;
        for (int k = 0; k < ch[i].n; k++)
            CHECK_VIEW(out[k], y);
        for (int k = 0; k < ch[i].n; k++) {
            ref e = ref_slice(&b, 1, at, 1, ch[i].sizes[k]);
            EXPECT_REF(out[k], RLX_I64, &e);
            free(e.v);
            at += ch[i].sizes[k];
        }
        free(b.v);
    }
    free(r.v);
}

TEST(split_chunk_errors)
{
    rlx_tensor *x = rlx_from_data(RLX_F32, 2, SH(7, 3), (float[21]){0}), *out[4];
#define SPLIT_ERR(call, want, fn, n)        \
    do {                                    \
        fill_sentinel(out, 4);              \
        rlx_clear_error();                  \
        CHECK_PIECES_ERR(call, want, fn, out, n); \
    } while (0)
    SPLIT_ERR(rlx_split(x, 0, 2, SH(3, 3), out), RLX_E_SHAPE, "rlx_split", 2);
    SPLIT_ERR(rlx_split(x, 0, 2, SH(3, 5), out), RLX_E_SHAPE, "rlx_split", 2);
    SPLIT_ERR(rlx_split(x, 0, 3, SH(8, -1, 0), out), RLX_E_SHAPE, "rlx_split", 3);
    SPLIT_ERR(rlx_split(x, 0, 2, SH(INT64_MAX, 8), out), RLX_E_SHAPE, "rlx_split", 2);
    SPLIT_ERR(rlx_split(x, 1, 4, SH(1, 1, 1, 1), out), RLX_E_SHAPE, "rlx_split", 4);
    SPLIT_ERR(rlx_split(x, 2, 1, SH(3), out), RLX_E_ARG, "rlx_split", 1);
    SPLIT_ERR(rlx_split(x, -3, 1, SH(7), out), RLX_E_ARG, "rlx_split", 1);
    SPLIT_ERR(rlx_split(NULL, 0, 2, SH(3, 4), out), RLX_E_ARG, "rlx_split", 2);
    SPLIT_ERR(rlx_split(x, 0, 2, NULL, out), RLX_E_ARG, "rlx_split", 2);
    SPLIT_ERR(rlx_split(x, 0, 0, SH(7), out), RLX_E_ARG, "rlx_split", 0);
    SPLIT_ERR(rlx_split(x, 0, -1, SH(7), out), RLX_E_ARG, "rlx_split", 0);
    SPLIT_ERR(rlx_split(x, 0, 1, SH(7), NULL), RLX_E_ARG, "rlx_split", 0);
    SPLIT_ERR(rlx_chunk(x, 0, 0, out), RLX_E_ARG, "rlx_chunk", 0);
    SPLIT_ERR(rlx_chunk(x, 0, -2, out), RLX_E_ARG, "rlx_chunk", 0);
    SPLIT_ERR(rlx_chunk(x, 0, 2, NULL), RLX_E_ARG, "rlx_chunk", 0);
    SPLIT_ERR(rlx_chunk(x, 2, 2, out), RLX_E_ARG, "rlx_chunk", 2);
    SPLIT_ERR(rlx_chunk(x, -3, 3, out), RLX_E_ARG, "rlx_chunk", 3);
    SPLIT_ERR(rlx_chunk(NULL, 0, 4, out), RLX_E_ARG, "rlx_chunk", 4);
    SPLIT_ERR(rlx_chunk(rlx_scalar(RLX_F32, 0), 0, 2, out), RLX_E_ARG, "rlx_chunk", 2);
#undef SPLIT_ERR
}

/* Random chains of views over a realized base, against the dense model. */
TEST(view_chains_random)
{
    for (int it = 0; it < 150; it++) {
        rlx_scope_begin();
        int rank = 1 + (int)test_uniform(0, 4);
        int64_t shape[MAXR];
        for (int d = 0; d < rank; d++)
            shape[d] = 1 + (int64_t)test_uniform(0, 4);
        static const rlx_dtype dts[] = {RLX_BOOL, RLX_I32, RLX_I64, RLX_F32, RLX_F64};
        rlx_dtype dt = dts[it % 5];
        ref r;
        rlx_tensor *base = make_base(dt, rank, shape, &r), *cur = base;
        char trail[256] = "";
        int steps = 1 + (int)test_uniform(0, 6);
        for (int s = 0; s < steps && cur; s++) {
            int op = (int)test_uniform(0, 8), R = r.rank;
            ref e = {0};
            snprintf(trail + strlen(trail), sizeof trail - strlen(trail), "%d,", op);
            int perm[MAXR];
            for (int d = 0; d < R; d++)
                perm[d] = d;
            if ((op == 0 && R > 0) || (op == 7 && R >= 2)) { /* a random permutation, or t */
                for (int d = R - 1; d > 0 && op == 0; d--) {
                    int j = (int)test_uniform(0, d + 1), tmp = perm[d];
                    perm[d] = perm[j];
                    perm[j] = tmp;
                }
                if (op == 7)
                    perm[R - 2] = R - 1, perm[R - 1] = R - 2;
                e = ref_transpose(&r, perm);
                cur = op == 0 ? rlx_transpose(cur, R, perm) : rlx_t(cur);
            } else if (op == 1 && R > 0) { /* slice */
                int ax = (int)test_uniform(0, R);
                int64_t len = r.shape[ax], start = rand_bound(len), stop = rand_bound(len), step = rand_step(len);
                int64_t first, n = py_slice(len, start, stop, step, &first);
                e = ref_slice(&r, ax, n ? first : 0, step, n);
                cur = rlx_slice(cur, ax - (it % 2 ? R : 0), start, stop, step);
            } else if (op == 2 && R > 0 && r.n > 0) { /* select */
                int ax = (int)test_uniform(0, R);
                int64_t i = (int64_t)test_uniform(0, (double)r.shape[ax]);
                e = ref_select(&r, ax, i);
                cur = rlx_select(cur, ax, i - (it % 3 ? 0 : r.shape[ax]));
            } else if (op == 3 && R < 6) { /* unsqueeze */
                int ax = (int)test_uniform(0, R + 1);
                int64_t sh[MAXR];
                for (int d = 0, k = 0; d <= R; d++)
                    sh[d] = d == ax ? 1 : r.shape[k++];
                e = ref_reshape(&r, R + 1, sh);
                cur = rlx_unsqueeze(cur, ax);
            } else if (op == 4 && R < 6) { /* broadcast: a new leading 2, size-1 axes to 3 */
                int64_t sh[MAXR];
                sh[0] = 2;
                for (int d = 0; d < R; d++)
                    sh[d + 1] = r.shape[d] == 1 ? 3 : r.shape[d];
                e = ref_bcast(&r, R + 1, sh);
                cur = rlx_broadcast_to(cur, R + 1, sh);
            } else if (op == 5) { /* reshape to [n] or [a, -1] */
                int64_t a = 1;
                for (int64_t k = 2; k <= 4; k++)
                    if (r.n % k == 0 && test_uniform(0, 1) < 0.5)
                        a = k;
                int64_t sh[2] = {a, r.n / a};
                e = ref_reshape(&r, a > 1 ? 2 : 1, a > 1 ? sh : &r.n);
                cur = a > 1 ? rlx_reshape(cur, 2, (int64_t[]){a, -1}) : rlx_flatten(cur);
            } else if (op == 6 && R > 0) { /* narrow */
                int ax = (int)test_uniform(0, R);
                int64_t len = r.shape[ax], st = (int64_t)test_uniform(0, (double)len + 1);
                int64_t n = (int64_t)test_uniform(0, (double)(len - st) + 1);
                e = ref_slice(&r, ax, st, 1, n);
                cur = rlx_narrow(cur, ax, st < len && it % 2 ? st - len : st, n);
            } else { /* squeeze_all */
                int64_t sh[MAXR];
                int k = 0;
                for (int d = 0; d < R; d++)
                    if (r.shape[d] != 1)
                        sh[k++] = r.shape[d];
                e = ref_reshape(&r, k, sh);
                cur = rlx_squeeze_all(cur);
            }
            free(r.v);
            r = e;
        }
        int before = test_failures;
        CHECK_VIEW(cur, base);
        EXPECT_REF(cur, dt, &r);
        if (test_failures != before)
            fprintf(stderr, "  (chain %d: ops %s)\n", it, trail);
        free(r.v);
        rlx_scope_end();
    }
}

/* Slice of transpose of reshape (and more) on every dtype. */
TEST(views_every_dtype)
{
    static const rlx_dtype dts[] = {RLX_BOOL, RLX_I32, RLX_I64, RLX_F32, RLX_F64};
    for (int i = 0; i < 5; i++) {
        ref r;
        rlx_tensor *x = make_base(dts[i], 1, SH(24), &r);
        rlx_tensor *a = rlx_reshape(x, 3, SH(2, 3, 4));
        rlx_tensor *b = rlx_transpose(a, 3, (int[]){2, 0, 1});
        rlx_tensor *c = rlx_slice(b, 0, RLX_END, RLX_END, -2);
        rlx_tensor *d = rlx_select(rlx_unsqueeze(c, 1), 3, -1);
        rlx_tensor *e = rlx_broadcast_to(rlx_narrow(d, 2, 1, 1), 4, SH(2, 2, 1, 3));
        ref ra = ref_reshape(&r, 3, SH(2, 3, 4));
        ref rb = ref_transpose(&ra, (int[]){2, 0, 1});
        ref rc = ref_slice(&rb, 0, 3, -2, 2);
        ref ru = ref_reshape(&rc, 4, SH(2, 1, 2, 3));
        ref rd = ref_select(&ru, 3, 2);
        ref rn = ref_slice(&rd, 2, 1, 1, 1);
        ref re = ref_bcast(&rn, 4, SH(2, 2, 1, 3));
        const ref *refs[] = {&ra, &rb, &rc, &rd, &re};
        rlx_tensor *views[] = {a, b, c, d, e};
        for (int k = 0; k < 5; k++) /* all before any read */
            CHECK_VIEW(views[k], x);
        for (int k = 0; k < 5; k++)
            EXPECT_REF(views[k], dts[i], refs[k]);
        free(r.v), free(ra.v), free(rb.v), free(rc.v), free(ru.v), free(rd.v), free(rn.v), free(re.v);
    }
}

/* Realizing a view must not give it a payload of its own: rlx_shares_storage
 * stays true and rlx_storage_bytes stays the base's. */
TEST(views_stay_shared_after_realize)
{
    ref r;
    rlx_tensor *x = make_base(RLX_F32, 2, SH(64, 64), &r);
    rlx_tensor *pieces[2];
    rlx_tensor *views[] = {
        rlx_reshape(x, 3, SH(4, 16, 64)),
        rlx_narrow(x, 0, 8, 16),
        rlx_select(x, 0, 3),
        rlx_unsqueeze(x, 0),
        rlx_flatten(x),
        rlx_transpose(x, 0, NULL),
        rlx_t(x),
        rlx_broadcast_to(x, 3, SH(8, 64, 64)),
        rlx_slice(x, 0, RLX_END, RLX_END, -1),
        rlx_slice(x, 1, 1, 60, 3),
        rlx_narrow(x, 1, 8, 16),
        rlx_select(x, 1, 3),
        rlx_chunk(x, 1, 2, pieces) == RLX_OK ? pieces[1] : NULL,
        rlx_narrow(x, 0, 3, 0),
        rlx_narrow(x, 1, 3, 0),
    };
    static const char *names[] = {"reshape", "narrow0", "select0", "unsqueeze", "flatten", "transpose",
                                  "t", "broadcast_to", "slice_rev", "slice_step", "narrow1", "select1", "chunk1",
                                  "empty0", "empty1"};
    /* As rlx.h documents: a realized view keeps sharing its source when its
     * elements are contiguous there (the first five and the empty ones), and
     * gets its own contiguous buffer otherwise. */
    static const int contiguous[] = {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
    for (size_t i = 0; i < sizeof views / sizeof *views; i++) {
        if (!views[i] || rlx_realize(views[i]) != RLX_OK) {
            test_fail(__FILE__, __LINE__, "%s: %s", names[i], rlx_last_error());
            continue;
        }
        bool shares = rlx_shares_storage(views[i], x);
        size_t want = contiguous[i] ? rlx_storage_bytes(x) : (size_t)rlx_numel(views[i]) * 4;
        if (shares != (bool)contiguous[i] || rlx_storage_bytes(views[i]) != want)
            test_fail(__FILE__, __LINE__, "realized %s: shares %d, %zu bytes (expected %d, %zu)", names[i],
                      (int)shares, rlx_storage_bytes(views[i]), contiguous[i], want);
    }
    /* a view of an unrealized view is a view of the base */
    rlx_tensor *tv = rlx_t(rlx_reshape(x, 2, SH(32, 128)));
    CHECK_VIEW(rlx_slice(tv, 0, 0, 8, 2), x);
    /* and the values are still right */
    ref e = ref_bcast(&r, 3, SH(8, 64, 64));
    EXPECT_REF(views[7], RLX_F32, &e);
    free(e.v);
    e = ref_transpose(&r, (int[]){1, 0});
    EXPECT_REF(views[6], RLX_F32, &e);
    free(e.v);
    free(r.v);
}

/* A NULL input keeps the first recorded error. */
TEST(null_propagation_keeps_first_error)
{
    rlx_tensor *x = rlx_zeros(RLX_F32, 2, SH(2, 3)), *out[2];
    rlx_clear_error();
    rlx_tensor *bad = rlx_reshape(x, 1, SH(7));
    CHECK(bad == NULL);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_SHAPE);
    char first[256];
    snprintf(first, sizeof first, "%s", rlx_last_error());
    rlx_tensor *chain[] = {rlx_transpose(bad, 0, NULL), rlx_t(bad), rlx_broadcast_to(bad, 1, SH(3)), rlx_flatten(bad),
                           rlx_unsqueeze(bad, 0), rlx_squeeze(bad, 0), rlx_squeeze_all(bad),
                           rlx_narrow(bad, 0, 0, 1), rlx_slice(bad, 0, 0, 1, 1), rlx_select(bad, 0, 0),
                           rlx_reshape(bad, 1, SH(6))};
    for (size_t i = 0; i < sizeof chain / sizeof *chain; i++)
        CHECK(chain[i] == NULL);
    CHECK_EQ_INT(rlx_split(bad, 0, 2, SH(1, 1), out), RLX_E_SHAPE);
    CHECK(out[0] == NULL && out[1] == NULL);
    CHECK_EQ_INT(rlx_chunk(bad, 0, 2, out), RLX_E_SHAPE);
    CHECK(out[0] == NULL && out[1] == NULL);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_SHAPE);
    CHECK(strcmp(rlx_last_error(), first) == 0);
    CHECK(strncmp(first, "rlx_reshape", 11) == 0);
    rlx_clear_error();
}

TEST_MAIN(T(reshape_values_and_views), T(reshape_errors), T(reshape_null_shape_is_arg), T(transpose_and_t), T(broadcast_to),
          T(flatten_unsqueeze_squeeze), T(narrow_and_select), T(slice_table), T(slice_random_python_rules),
          T(slice_errors), T(slice_step_int64_min), T(split_and_chunk), T(split_chunk_errors),
          T(view_chains_random), T(views_every_dtype), T(views_stay_shared_after_realize),
          T(null_propagation_keeps_first_error))
