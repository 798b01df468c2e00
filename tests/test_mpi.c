/*
 * test_mpi.c — librlx_mpi (include/rlx_mpi.h) under mpirun with 2 and 3
 * ranks (tests/CMakeLists.txt registers both; any rank count works).
 *
 * Every rank runs the same tests in the same order. Each rank's inputs
 * come from a generator keyed by (seed, rank, tensor, element), so every
 * rank can rebuild all ranks' inputs and compute the expected result
 * itself: the rank-order fold the header specifies, in the accumulation
 * type, compared bitwise. The gradient test compares a step over the
 * ranks with the one-process step against the header's error bound, with
 * the per-sample terms computed in f64.
 *
 *   test_mpi [filter]   the tests whose name contains filter
 *   test_mpi --exit     rank 1 exits without MPI_Finalize while rank 0
 *                       is in an allreduce: OpenMPI's runtime must end
 *                       the job (checked by its ctest, not a hang)
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rlx_mpi.h"

static rlx_mpi_ctx *ctx;
static int P, R; /* ranks, this rank */

/* ------------------------------------------------------------ inputs */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* [0, 1), a function of its arguments only. */
static double gen(uint64_t seed, int rank, int idx, int64_t j)
{
    uint64_t h = mix(seed ^ mix((uint64_t)rank * 1000003u + (uint64_t)idx * 7919u) ^ mix((uint64_t)j));
    return (double)(h >> 11) * 0x1p-53;
}

/* A value of dt's range, so integer sums wrap. */
static double ranged(rlx_dtype dt, double u)
{
    switch (dt) {
    case RLX_I8: return floor(u * 256) - 128;
    case RLX_U8: return floor(u * 256);
    case RLX_I16: return floor(u * 65536) - 32768;
    case RLX_I32: return floor((2 * u - 1) * 2.1e9);
    case RLX_U32: return floor(u * 4.29e9);
    case RLX_I64: return floor((2 * u - 1) * 9e18);
    case RLX_BOOL: return u < 0.5;
    default: return 8 * u - 4;
    }
}

/* Rank q's input number idx: dt of shape, from the generator; a strided
 * view (every second row of a base twice as long) when view is set. */
static rlx_tensor *input(uint64_t seed, int q, int idx, rlx_dtype dt, int rank, const int64_t *shape, bool view)
{
    int64_t base[RLX_MAX_RANK];
    memcpy(base, shape, (size_t)rank * sizeof *base);
    view = view && rank > 0;
    if (view)
        base[0] *= 2;
    int64_t m = test_numel(rank, base);
    double *re = malloc((size_t)(m + 1) * sizeof *re), *im = malloc((size_t)(m + 1) * sizeof *im);
    for (int64_t j = 0; j < m; j++) {
        re[j] = ranged(dt, gen(seed, q, idx, 2 * j));
        im[j] = ranged(dt, gen(seed, q, idx, 2 * j + 1));
    }
    rlx_tensor *t = rlx_from_data(RLX_F64, rank, base, re);
    if (dt == RLX_C64 || dt == RLX_C128) /* rlx_complex of f64 parts is c128 */
        t = rlx_cast(rlx_complex(t, rlx_from_data(RLX_F64, rank, base, im)), dt);
    else
        t = rlx_cast(t, dt);
    free(re);
    free(im);
    return view ? rlx_slice(t, 0, 0, RLX_END, 2) : t;
}

static size_t dsize(rlx_dtype dt)
{
    static const size_t s[] = {1, 4, 8, 4, 8, 2, 2, 1, 1, 2, 4, 8, 16};
    return s[dt];
}

/* The bytes of t in its own dtype (malloc'ed). */
static unsigned char *raw(rlx_tensor *t, size_t *bytes)
{
    *bytes = (size_t)rlx_numel(t) * dsize(rlx_dtype_of(t));
    unsigned char *b = malloc(*bytes + 1);
    if (rlx_read(t, b, *bytes) != RLX_OK)
        test_fail(__FILE__, __LINE__, "rlx_read: %s", rlx_last_error());
    return b;
}

/* The specified result's bytes: the ranks' inputs folded in rank order in
 * the accumulation type, the mean divided once, halves rounded once. */
static unsigned char *expected(uint64_t seed, int idx, rlx_dtype dt, int rank, const int64_t *shape, bool view,
                               rlx_mpi_op op, size_t *bytes)
{
    const bool half = dt == RLX_F16 || dt == RLX_BF16;
    const rlx_dtype acc_dt = half ? RLX_F32 : dt;
    const int64_t m = test_numel(rank, shape) * (dt == RLX_C64 || dt == RLX_C128 ? 2 : 1);
    unsigned char *acc = NULL;
    for (int q = 0; q < P; q++) {
        size_t nb;
        rlx_tensor *x = input(seed, q, idx, dt, rank, shape, view);
        unsigned char *v = raw(half ? rlx_cast(x, RLX_F32) : x, &nb);
        if (!acc) {
            acc = v;
            continue;
        }
        for (int64_t j = 0; j < m; j++) {
            switch (acc_dt) {
            case RLX_F32: case RLX_C64: ((float *)acc)[j] = ((float *)acc)[j] + ((float *)v)[j]; break;
            case RLX_F64: case RLX_C128: ((double *)acc)[j] = ((double *)acc)[j] + ((double *)v)[j]; break;
            case RLX_I8: case RLX_U8: ((uint8_t *)acc)[j] = (uint8_t)(((uint8_t *)acc)[j] + ((uint8_t *)v)[j]); break;
            case RLX_I16: ((uint16_t *)acc)[j] = (uint16_t)(((uint16_t *)acc)[j] + ((uint16_t *)v)[j]); break;
            case RLX_I32: case RLX_U32: ((uint32_t *)acc)[j] += ((uint32_t *)v)[j]; break;
            case RLX_I64: ((uint64_t *)acc)[j] += ((uint64_t *)v)[j]; break;
            default: test_fail(__FILE__, __LINE__, "no reference for %s", rlx_dtype_name(dt));
            }
        }
        free(v);
    }
    for (int64_t j = 0; op == RLX_MPI_MEAN && j < m; j++) {
        if (acc_dt == RLX_F64 || acc_dt == RLX_C128)
            ((double *)acc)[j] = ((double *)acc)[j] / P;
        else
            ((float *)acc)[j] = ((float *)acc)[j] / (float)P;
    }
    *bytes = (size_t)m * dsize(acc_dt == RLX_C64 ? RLX_F32 : acc_dt == RLX_C128 ? RLX_F64 : acc_dt);
    if (!half)
        return acc;
    unsigned char *h = raw(rlx_cast(rlx_from_data(RLX_F32, rank, shape, acc), dt), bytes);
    free(acc);
    return h;
}

/* out must have dt, shape and exactly the expected bytes. */
static void check_result(int line, const char *what, rlx_tensor *out, uint64_t seed, int idx, rlx_dtype dt,
                         int rank, const int64_t *shape, bool view, rlx_mpi_op op)
{
    int64_t got_shape[RLX_MAX_RANK];
    if (!out) {
        test_fail(__FILE__, line, "%s %d: NULL result", what, idx);
        return;
    }
    if (rlx_dtype_of(out) != dt || rlx_shape(out, got_shape, RLX_MAX_RANK) != rank ||
        memcmp(got_shape, shape, (size_t)rank * sizeof *shape) != 0 || !rlx_is_realized(out)) {
        test_fail(__FILE__, line, "%s %d: got %s %s, expected %s %s (realized %d)", what, idx,
                  rlx_dtype_name(rlx_dtype_of(out)), test_dims(rlx_rank(out), got_shape), rlx_dtype_name(dt),
                  test_dims(rank, shape), (int)rlx_is_realized(out));
        return;
    }
    size_t nb, ne;
    unsigned char *got = raw(out, &nb), *want = expected(seed, idx, dt, rank, shape, view, op, &ne);
    if (nb != ne || memcmp(got, want, nb) != 0)
        test_fail(__FILE__, line, "%s %d: %s %s %s differs from the rank-order %s (seed %llu, %d ranks)", what,
                  idx, rlx_dtype_name(dt), test_dims(rank, shape), view ? "(view)" : "",
                  op == RLX_MPI_SUM ? "sum" : "mean", (unsigned long long)seed, P);
    free(got);
    free(want);
}

#define CHECK_MPI(call, want, fn)                                                                   \
    do {                                                                                            \
        rlx_mpi_clear_error();                                                                      \
        rlx_status s_ = (call);                                                                     \
        if (s_ != (want) || rlx_mpi_last_status() != (want) || !strstr(rlx_mpi_last_error(), fn))   \
            test_fail(__FILE__, __LINE__, "%s: status %d (\"%s\"), expected %d naming %s", #call, (int)s_, \
                      rlx_mpi_last_error(), (int)(want), fn);                                       \
    } while (0)
#define CHECK_MSG(text)                                                                             \
    do {                                                                                            \
        if (!strstr(rlx_mpi_last_error(), text))                                                    \
            test_fail(__FILE__, __LINE__, "message \"%s\" lacks \"%s\"", rlx_mpi_last_error(), text); \
    } while (0)

/* ------------------------------------------------------------- values */

enum { NSHAPES = 8 };
static const int shape_rank[NSHAPES] = {0, 1, 1, 2, 3, 3, 2, 1};
static const int64_t shapes[NSHAPES][3] = {{0}, {0}, {1}, {5, 7}, {3, 0, 2}, {4, 3, 5}, {6, 9}, {1031}};
static const bool shape_view[NSHAPES] = {false, false, false, false, false, true, true, true};

static const rlx_dtype all_dtypes[] = {RLX_F32, RLX_F64, RLX_F16, RLX_BF16, RLX_C64, RLX_C128,
                                       RLX_I8,  RLX_U8,  RLX_I16, RLX_I32,  RLX_U32, RLX_I64};
enum { NDTYPES = sizeof all_dtypes / sizeof *all_dtypes };
static bool is_float(rlx_dtype dt) { return dt == RLX_F32 || dt == RLX_F64 || dt == RLX_F16 || dt == RLX_BF16 || dt == RLX_C64 || dt == RLX_C128; }

/* Every dtype, SUM and MEAN, over rank-0, empty, odd and strided shapes. */
TEST(allreduce_values)
{
    for (int shm = 0; shm < 2; shm++)
    for (int d = 0; d < NDTYPES; d++)
        for (int op = RLX_MPI_SUM; op <= RLX_MPI_MEAN; op++) {
            rlx_dtype dt = all_dtypes[d];
            if (op == RLX_MPI_MEAN && !is_float(dt))
                continue;
            uint64_t seed = 100u * (uint64_t)d + (uint64_t)op;
            rlx_tensor *in[NSHAPES], *out[NSHAPES];
            CHECK_EQ_INT(rlx_mpi_set_shared_memory(ctx, shm), RLX_OK); /* messages, then the window */
            for (int i = 0; i < NSHAPES; i++)
                in[i] = input(seed, R, i, dt, shape_rank[i], shapes[i], shape_view[i]);
            CHECK_EQ_INT(rlx_mpi_allreduce(ctx, NSHAPES, in, (rlx_mpi_op)op, out), RLX_OK);
            for (int i = 0; i < NSHAPES; i++)
                check_result(__LINE__, rlx_dtype_name(dt), out[i], seed, i, dt, shape_rank[i], shapes[i],
                             shape_view[i], (rlx_mpi_op)op);
        }
}

/* Many small tensors of mixed dtypes in one call, across bucket
 * boundaries: buckets of 16 to 100 bytes (not multiples of every element
 * size) and the default. */
TEST(allreduce_buckets)
{
    enum { N = 40 };
    static const size_t buckets[] = {16, 20, 24, 100, 4096, RLX_MPI_DEFAULT_BUCKET_BYTES};
    for (int shm = 0; shm < 2; shm++)
    for (size_t b = 0; b < sizeof buckets / sizeof *buckets; b++)
        for (int op = RLX_MPI_SUM; op <= RLX_MPI_MEAN; op++) {
            CHECK_EQ_INT(rlx_mpi_set_shared_memory(ctx, shm), RLX_OK);
            CHECK_EQ_INT(rlx_mpi_set_bucket_bytes(ctx, buckets[b]), RLX_OK);
            uint64_t seed = 7000u + 10u * b + (uint64_t)op;
            rlx_tensor *in[N], *out[N];
            rlx_dtype dts[N];
            int64_t sh[N][2];
            int rk[N];
            for (int i = 0; i < N; i++) {
                dts[i] = all_dtypes[(i * 7) % (op == RLX_MPI_MEAN ? 5 : NDTYPES)];
                rk[i] = i % 6 == 0 ? 0 : 1 + i % 2;
                sh[i][0] = i % 9;
                sh[i][1] = 1 + i % 4;
                in[i] = input(seed, R, i, dts[i], rk[i], sh[i], i % 5 == 3);
            }
            CHECK_EQ_INT(rlx_mpi_allreduce(ctx, N, in, (rlx_mpi_op)op, out), RLX_OK);
            for (int i = 0; i < N; i++)
                check_result(__LINE__, "mixed", out[i], seed, i, dts[i], rk[i], sh[i], i % 5 == 3, (rlx_mpi_op)op);
        }
    CHECK_EQ_INT(rlx_mpi_set_bucket_bytes(ctx, RLX_MPI_DEFAULT_BUCKET_BYTES), RLX_OK);
}

static uint64_t hash_bytes(const unsigned char *b, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The same call gives the same bits: twice, at another bucket size, and
 * on every rank. */
TEST(allreduce_repeatable)
{
    const int64_t s1[2] = {300, 37}, s2[1] = {1001};
    rlx_tensor *in[2] = {input(31, R, 0, RLX_F32, 2, s1, false), input(31, R, 1, RLX_F16, 1, s2, false)};
    uint64_t h[4] = {0};
    for (int run = 0; run < 4; run++) { /* twice, small buckets, messages */
        CHECK_EQ_INT(rlx_mpi_set_bucket_bytes(ctx, run == 2 ? 64 : RLX_MPI_DEFAULT_BUCKET_BYTES), RLX_OK);
        CHECK_EQ_INT(rlx_mpi_set_shared_memory(ctx, run != 3), RLX_OK);
        rlx_tensor *out[2];
        CHECK_EQ_INT(rlx_mpi_allreduce(ctx, 2, in, RLX_MPI_MEAN, out), RLX_OK);
        for (int i = 0; i < 2 && out[i]; i++) {
            size_t nb;
            unsigned char *b = raw(out[i], &nb);
            h[run] ^= hash_bytes(b, nb) * (uint64_t)(i + 1);
            free(b);
        }
    }
    CHECK(h[0] == h[1]);
    CHECK(h[0] == h[2]);
    CHECK(h[0] == h[3]);
    CHECK_EQ_INT(rlx_mpi_set_shared_memory(ctx, true), RLX_OK);
    CHECK(rlx_mpi_shared_memory(ctx)); /* every rank of this test is on one machine */
    unsigned long long lo, hi, mine = (unsigned long long)h[0];
    MPI_Allreduce(&mine, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi);
    CHECK_EQ_INT(rlx_mpi_set_bucket_bytes(ctx, RLX_MPI_DEFAULT_BUCKET_BYTES), RLX_OK);
}

/* From every root: each rank's tensors are layouts with its own values;
 * every rank gets the root's bytes. */
TEST(broadcast_values)
{
    enum { N = 7 };
    static const rlx_dtype dts[N] = {RLX_BOOL, RLX_I32, RLX_C64, RLX_F16, RLX_F64, RLX_BF16, RLX_U8};
    static const int rk[N] = {2, 0, 2, 1, 2, 1, 1};
    static const int64_t sh[N][2] = {{3, 4}, {0}, {2, 3}, {0}, {7, 3}, {5}, {3}};
    static const bool view[N] = {false, false, false, false, true, true, false};
    for (size_t bucket = 16; bucket <= RLX_MPI_DEFAULT_BUCKET_BYTES; bucket = bucket == 16 ? RLX_MPI_DEFAULT_BUCKET_BYTES : bucket * 2) {
        CHECK_EQ_INT(rlx_mpi_set_bucket_bytes(ctx, bucket), RLX_OK);
        for (int root = 0; root < P; root++) {
            rlx_tensor *in[N], *out[N];
            for (int i = 0; i < N; i++)
                in[i] = input(55, R, i, dts[i], rk[i], sh[i], view[i]);
            CHECK_EQ_INT(rlx_mpi_broadcast(ctx, root, N, in, out), RLX_OK);
            for (int i = 0; i < N; i++) {
                size_t ng, nw;
                rlx_tensor *want = input(55, root, i, dts[i], rk[i], sh[i], view[i]);
                int64_t gs[RLX_MAX_RANK];
                if (!out[i] || rlx_dtype_of(out[i]) != dts[i] || rlx_shape(out[i], gs, RLX_MAX_RANK) != rk[i] ||
                    memcmp(gs, sh[i], (size_t)rk[i] * sizeof *gs) != 0) {
                    test_fail(__FILE__, __LINE__, "broadcast %d from %d: wrong result", i, root);
                    continue;
                }
                unsigned char *g = raw(out[i], &ng), *w = raw(want, &nw);
                if (ng != nw || memcmp(g, w, ng) != 0)
                    test_fail(__FILE__, __LINE__, "broadcast %d (%s) from root %d: values differ", i,
                              rlx_dtype_name(dts[i]), root);
                free(g);
                free(w);
            }
        }
    }
    CHECK_EQ_INT(rlx_mpi_set_bucket_bytes(ctx, RLX_MPI_DEFAULT_BUCKET_BYTES), RLX_OK);
}

TEST(barrier_and_queries)
{
    CHECK_EQ_INT(rlx_mpi_barrier(ctx), RLX_OK);
    CHECK_EQ_INT(rlx_mpi_rank(ctx), R);
    CHECK_EQ_INT(rlx_mpi_size(ctx), P);
    rlx_tensor *out[1] = {NULL};
    CHECK_EQ_INT(rlx_mpi_allreduce(ctx, 0, NULL, RLX_MPI_SUM, out), RLX_OK); /* n = 0: agreed, nothing moves */
    CHECK_EQ_INT(rlx_mpi_broadcast(ctx, 0, 0, NULL, NULL), RLX_OK);
    /* A second context over a subcommunicator of the even ranks. */
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, R % 2, R, &sub);
    rlx_mpi_ctx *c2 = rlx_mpi_new(sub);
    CHECK(c2 != NULL);
    const int64_t s[1] = {3};
    rlx_tensor *in = rlx_full(RLX_I32, 1, s, R + 1), *o = NULL;
    CHECK_EQ_INT(rlx_mpi_allreduce(c2, 1, &in, RLX_MPI_SUM, &o), RLX_OK);
    int32_t v[3] = {0}, want = 0;
    for (int q = R % 2; q < P; q += 2)
        want += q + 1;
    CHECK_EQ_INT(rlx_read(o, v, sizeof v), RLX_OK);
    CHECK_EQ_INT(v[2], want);
    rlx_mpi_free(c2);
    MPI_Comm_free(&sub);
}

/* Every documented error; each collective error on every rank, and the
 * context still works after them (no rank left behind). */
TEST(errors)
{
    const int64_t s23[2] = {2, 3}, s24[2] = {2, 4};
    rlx_tensor *a = rlx_ones(RLX_F32, 2, s23), *out[2] = {a, a};
    rlx_tensor *in2[2] = {a, a};
    /* NULL ctx: local, nothing to agree with */
    CHECK_MPI(rlx_mpi_allreduce(NULL, 1, &a, RLX_MPI_SUM, out), RLX_E_ARG, "rlx_mpi_allreduce");
    CHECK(out[0] == NULL);
    CHECK_MPI(rlx_mpi_broadcast(NULL, 0, 1, &a, out), RLX_E_ARG, "rlx_mpi_broadcast");
    CHECK_MPI(rlx_mpi_barrier(NULL), RLX_E_ARG, "rlx_mpi_barrier");
    CHECK_MPI(rlx_mpi_set_bucket_bytes(NULL, 64), RLX_E_ARG, "rlx_mpi_set_bucket_bytes");
    CHECK_MPI(rlx_mpi_set_shared_memory(NULL, true), RLX_E_ARG, "rlx_mpi_set_shared_memory");
    rlx_mpi_clear_error();
    CHECK(!rlx_mpi_shared_memory(NULL));
    CHECK_EQ_INT(rlx_mpi_last_status(), RLX_E_ARG);
    rlx_mpi_clear_error();
    CHECK_EQ_INT(rlx_mpi_rank(NULL), -1);
    CHECK_EQ_INT(rlx_mpi_last_status(), RLX_E_ARG);
    CHECK_EQ_INT(rlx_mpi_size(NULL), -1);
    CHECK(rlx_mpi_new(MPI_COMM_NULL) == NULL);
    CHECK_EQ_INT(rlx_mpi_last_status(), RLX_E_ARG);
    rlx_mpi_free(NULL);
    CHECK_MPI(rlx_mpi_set_bucket_bytes(ctx, 8), RLX_E_ARG, "rlx_mpi_set_bucket_bytes");
    CHECK_MPI(rlx_mpi_set_bucket_bytes(ctx, ((size_t)1 << 30) + 1), RLX_E_ARG, "rlx_mpi_set_bucket_bytes");

    /* bad arguments on every rank */
    CHECK_MPI(rlx_mpi_allreduce(ctx, -1, in2, RLX_MPI_SUM, out), RLX_E_ARG, "rlx_mpi_allreduce");
    CHECK_MPI(rlx_mpi_allreduce(ctx, 1, NULL, RLX_MPI_SUM, out), RLX_E_ARG, "rlx_mpi_allreduce");
    CHECK_MPI(rlx_mpi_allreduce(ctx, 1, in2, RLX_MPI_SUM, NULL), RLX_E_ARG, "rlx_mpi_allreduce");
    CHECK_MPI(rlx_mpi_allreduce(ctx, 1, in2, (rlx_mpi_op)7, out), RLX_E_ARG, "rlx_mpi_allreduce");
    rlx_tensor *b = rlx_ones(RLX_BOOL, 2, s23), *i32 = rlx_ones(RLX_I32, 2, s23);
    CHECK_MPI(rlx_mpi_allreduce(ctx, 1, &b, RLX_MPI_SUM, out), RLX_E_DTYPE, "rlx_mpi_allreduce");
    CHECK_MSG("bool");
    CHECK_MPI(rlx_mpi_allreduce(ctx, 1, &i32, RLX_MPI_MEAN, out), RLX_E_DTYPE, "rlx_mpi_allreduce");
    CHECK_MPI(rlx_mpi_broadcast(ctx, P, 1, &a, out), RLX_E_ARG, "rlx_mpi_broadcast");
    CHECK_MSG("root");
    CHECK_MPI(rlx_mpi_broadcast(ctx, -1, 1, &a, out), RLX_E_ARG, "rlx_mpi_broadcast");
    const int64_t dyn[1] = {-1};
    rlx_tensor *inp = rlx_input("x", RLX_F32, 1, dyn);
    CHECK_MPI(rlx_mpi_allreduce(ctx, 1, &inp, RLX_MPI_SUM, out), RLX_E_SHAPE, "rlx_mpi_allreduce");
    CHECK_MPI(rlx_mpi_broadcast(ctx, 0, 1, &inp, out), RLX_E_SHAPE, "rlx_mpi_broadcast");

    /* one rank's bad input fails every rank */
    rlx_tensor *maybe_null[2] = {a, R == P - 1 ? NULL : a};
    CHECK_MPI(rlx_mpi_allreduce(ctx, 2, maybe_null, RLX_MPI_SUM, out), RLX_E_ARG, "rlx_mpi_allreduce");
    CHECK_MSG(R == P - 1 ? "tensor 1 is NULL" : "failed: rlx_mpi_allreduce: tensor 1 is NULL");
    CHECK(out[0] == NULL && out[1] == NULL);
    CHECK_MPI(rlx_mpi_broadcast(ctx, 0, 2, maybe_null, out), RLX_E_ARG, "rlx_mpi_broadcast");

    /* layouts that differ across ranks: every rank, naming the tensor */
    rlx_tensor *shp[2] = {a, R == 1 ? rlx_ones(RLX_F32, 2, s24) : a};
    CHECK_MPI(rlx_mpi_allreduce(ctx, 2, shp, RLX_MPI_SUM, out), RLX_E_SHAPE, "rlx_mpi_allreduce");
    CHECK_MSG("tensor 1 differs across ranks: rank 0 has f32 [2,3], rank 1 has f32 [2,4]");
    CHECK_MPI(rlx_mpi_broadcast(ctx, 0, 2, shp, out), RLX_E_SHAPE, "rlx_mpi_broadcast");
    rlx_tensor *dty[2] = {R == P - 1 ? rlx_ones(RLX_F64, 2, s23) : a, a};
    CHECK_MPI(rlx_mpi_allreduce(ctx, 2, dty, RLX_MPI_SUM, out), RLX_E_DTYPE, "rlx_mpi_allreduce");
    CHECK_MSG("tensor 0 differs across ranks");
    rlx_tensor *rk[1] = {R == 1 ? rlx_ones(RLX_F32, 3, (const int64_t[]){2, 3, 1}) : a};
    CHECK_MPI(rlx_mpi_allreduce(ctx, 1, rk, RLX_MPI_SUM, out), RLX_E_SHAPE, "rlx_mpi_allreduce");
    CHECK_MPI(rlx_mpi_allreduce(ctx, R == 1 ? 1 : 2, in2, RLX_MPI_SUM, out), RLX_E_ARG, "rlx_mpi_allreduce");
    CHECK_MSG("different tensor counts");
    CHECK_MPI(rlx_mpi_allreduce(ctx, 1, in2, R == 1 ? RLX_MPI_MEAN : RLX_MPI_SUM, out), RLX_E_ARG,
              "rlx_mpi_allreduce");
    CHECK_MSG("different ops");
    CHECK_MPI(rlx_mpi_broadcast(ctx, R == 1 ? 0 : P - 1, 1, in2, out), RLX_E_ARG, "rlx_mpi_broadcast");
    CHECK_MSG("different roots");
    CHECK_EQ_INT(rlx_mpi_set_shared_memory(ctx, R != 1), RLX_OK);
    CHECK_MPI(rlx_mpi_allreduce(ctx, 1, in2, RLX_MPI_SUM, out), RLX_E_ARG, "rlx_mpi_allreduce");
    CHECK_MSG("shared-memory");
    CHECK_EQ_INT(rlx_mpi_set_shared_memory(ctx, true), RLX_OK);
    CHECK_EQ_INT(rlx_mpi_set_bucket_bytes(ctx, R == 1 ? 64 : 128), RLX_OK);
    CHECK_MPI(rlx_mpi_allreduce(ctx, 1, in2, RLX_MPI_SUM, out), RLX_E_ARG, "rlx_mpi_allreduce");
    CHECK_MSG("bucket sizes");
    CHECK_EQ_INT(rlx_mpi_set_bucket_bytes(ctx, RLX_MPI_DEFAULT_BUCKET_BYTES), RLX_OK);

    /* still in step: a good call works */
    CHECK_EQ_INT(rlx_mpi_allreduce(ctx, 1, &a, RLX_MPI_SUM, out), RLX_OK);
    float v[6] = {0};
    CHECK_EQ_INT(rlx_read(out[0], v, sizeof v), RLX_OK);
    CHECK(v[5] == (float)P);
}

/* Result buffers: a result still held is never reused by a later call; a
 * released one is (the pool), and results outlive their context. */
TEST(result_buffers)
{
    const int64_t s[1] = {4096};
    rlx_mpi_ctx *c2 = rlx_mpi_new(MPI_COMM_WORLD);
    CHECK(c2 != NULL);
    rlx_tensor *in[3], *held = NULL, *again = NULL, *later = NULL;
    for (int i = 0; i < 3; i++)
        in[i] = input(77, R, i, RLX_F32, 1, s, false);
    CHECK_EQ_INT(rlx_mpi_allreduce(c2, 1, &in[0], RLX_MPI_SUM, &held), RLX_OK);
    const void *data[3] = {NULL};
    for (int k = 0; k < 3; k++) { /* released results go back to the pool and come out again */
        rlx_scope_begin();        /* releases this call's result at its end */
        rlx_tensor *t = NULL;
        CHECK_EQ_INT(rlx_mpi_allreduce(c2, 1, &in[1], RLX_MPI_SUM, &t), RLX_OK);
        check_result(__LINE__, "pooled", t, 77, 1, RLX_F32, 1, s, false, RLX_MPI_SUM);
        data[k] = rlx_data(t);
        rlx_scope_end();
    }
    CHECK(data[0] == data[1] && data[1] == data[2]); /* reused, not allocated again */
    CHECK(data[0] != rlx_data(held));
    CHECK_EQ_INT(rlx_mpi_allreduce(c2, 1, &in[2], RLX_MPI_MEAN, &again), RLX_OK);
    rlx_mpi_free(c2);
    CHECK_EQ_INT(rlx_mpi_allreduce(ctx, 1, &in[1], RLX_MPI_SUM, &later), RLX_OK);
    check_result(__LINE__, "held", held, 77, 0, RLX_F32, 1, s, false, RLX_MPI_SUM);
    check_result(__LINE__, "after free", again, 77, 2, RLX_F32, 1, s, false, RLX_MPI_MEAN);
    check_result(__LINE__, "other ctx", later, 77, 1, RLX_F32, 1, s, false, RLX_MPI_SUM);
}

/* ----------------------------------------------------- a gradient step */

enum { B = 12, IN = 5, H = 7, C = 3, NP = 4 };
static const int64_t pshape[NP][2] = {{H, IN}, {H, 0}, {C, H}, {C, 0}};
static int prank(int i) { return pshape[i][1] ? 2 : 1; }
static int64_t pnumel(int i) { return pshape[i][0] * (pshape[i][1] ? pshape[i][1] : 1); }

/* Gradients of the mean cross entropy of the 5-7-3 ReLU MLP over rows
 * [lo, hi) of x/y, in dt. */
static void mlp_grads(rlx_dtype dt, rlx_tensor *const *p32, const float *x, const int32_t *y, int lo, int hi,
                      rlx_tensor **g)
{
    const int64_t xs[2] = {hi - lo, IN}, ys[1] = {hi - lo};
    rlx_tensor *p[NP];
    for (int i = 0; i < NP; i++)
        p[i] = rlx_cast(p32[i], dt);
    rlx_tensor *xt = rlx_cast(rlx_from_data(RLX_F32, 2, xs, x + lo * IN), dt);
    rlx_tensor *h = rlx_relu(rlx_linear(xt, p[0], p[1]));
    rlx_tensor *loss = rlx_mean_all(rlx_softmax_cross_entropy_with_logits(rlx_linear(h, p[2], p[3]),
                                                                          rlx_from_data(RLX_I32, 1, ys, y + lo)));
    CHECK_EQ_INT(rlx_grad(loss, p, NP, g), RLX_OK);
    CHECK_EQ_INT(rlx_realize_many(g, NP), RLX_OK);
}

/* Batch B/P on each rank, gradients averaged, against the one-process
 * batch-B gradient: within 2 (B + K) u sum_j |t_j| (rlx_mpi.h), the
 * per-sample terms t_j = grad_j / B computed in f64. */
TEST(gradient_step_matches_one_process)
{
    if (B % P) {
        printf("skipped: batch %d does not split over %d ranks\n", B, P);
        return;
    }
    float x[B * IN], pv[NP][H * IN];
    int32_t y[B];
    for (int j = 0; j < B * IN; j++)
        x[j] = (float)(4 * gen(900, 0, 0, j) - 2);
    for (int j = 0; j < B; j++)
        y[j] = (int32_t)(gen(901, 0, 0, j) * C);
    rlx_tensor *p[NP];
    for (int i = 0; i < NP; i++) {
        for (int64_t k = 0; k < pnumel(i); k++)
            pv[i][k] = (float)(gen(902, 0, i, k) - 0.5);
        p[i] = rlx_from_data(RLX_F32, prank(i), pshape[i], pv[i]);
    }
    rlx_tensor *g1[NP], *gl[NP], *gn[NP];
    mlp_grads(RLX_F32, p, x, y, 0, B, g1);
    mlp_grads(RLX_F32, p, x, y, R * (B / P), (R + 1) * (B / P), gl);
    CHECK_EQ_INT(rlx_mpi_allreduce(ctx, NP, gl, RLX_MPI_MEAN, gn), RLX_OK);
    const double u = 0x1p-24, K = IN + H + 16;
    double *S[NP];
    for (int i = 0; i < NP; i++)
        S[i] = calloc((size_t)pnumel(i), sizeof *S[i]);
    for (int j = 0; j < B; j++) { /* per-sample terms in f64 */
        rlx_tensor *t[NP];
        mlp_grads(RLX_F64, p, x, y, j, j + 1, t);
        for (int i = 0; i < NP; i++) {
            int64_t n;
            double *v = test_values(t[i], &n);
            for (int64_t k = 0; v && k < n; k++)
                S[i][k] += fabs(v[k]) / B;
            free(v);
        }
    }
    int worse = 0;
    double worst = 0;
    for (int i = 0; i < NP; i++) {
        int64_t n1, nn;
        double *a = test_values(g1[i], &n1), *b = test_values(gn[i], &nn);
        for (int64_t k = 0; a && b && k < n1; k++) {
            double bound = 2 * (B + K) * u * S[i][k] + 1e-300;
            double ratio = fabs(a[k] - b[k]) / bound;
            worst = ratio > worst ? ratio : worst;
            worse += ratio > 1;
        }
        free(a);
        free(b);
        free(S[i]);
    }
    if (worse)
        test_fail(__FILE__, __LINE__, "%d gradient elements outside the bound (worst %.3g x the bound)", worse, worst);
    if (R == 0)
        printf("  gradient over %d ranks vs one process: worst |diff| = %.3g x the bound\n", P, worst);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    ctx = rlx_mpi_new(MPI_COMM_WORLD);
    if (!ctx) {
        fprintf(stderr, "rlx_mpi_new: %s\n", rlx_mpi_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (argc > 1 && strcmp(argv[1], "--exit") == 0) {
        /* A rank that exits without MPI_Finalize: OpenMPI's runtime ends the
         * job; rank 0 never returns from the allreduce (no status to check). */
        if (R == 1)
            exit(3);
        rlx_tensor *t = rlx_ones(RLX_F32, 0, NULL), *o = NULL;
        rlx_status st = rlx_mpi_allreduce(ctx, 1, &t, RLX_MPI_SUM, &o);
        printf("rank %d: allreduce returned %d: %s\n", R, (int)st, rlx_mpi_last_error());
        MPI_Finalize();
        return 0;
    }
    static const test_case cases[] = {T(allreduce_values),   T(allreduce_buckets), T(allreduce_repeatable),
                                      T(broadcast_values),   T(barrier_and_queries), T(errors), T(result_buffers),
                                      T(gradient_step_matches_one_process)};
    int rc = test_main(argc, argv, cases, (int)(sizeof cases / sizeof *cases)), worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    rlx_mpi_free(ctx);
    MPI_Finalize();
    return worst;
}
