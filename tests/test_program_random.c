/*
 * test_program_random.c — random compositions of ops over dynamic dims
 * (tests/prog_gen.h), each compiled once and run over a sequence of
 * bindings, against the same recipe over the bound values on the
 * reference backend. A failure prints the seed and the recipe; replay it
 * alone with RLX_PG_SEED=<seed> RLX_PG_PROGRAMS=1 ./test_program_random
 * (RLX_PG_PROGRAMS=n runs n programs from the seed); RLX_PG_FILE=path
 * replays an input of tests/fuzz/fuzz_program.c, RLX_PG_DUMP=1 prints
 * each recipe before it runs.
 */
#include "harness.h"
#include "prog_gen.h"

enum { MSG = 1 << 16 };

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 0) : dflt;
}

TEST(random_programs)
{
    long n = env_long("RLX_PG_PROGRAMS", 250), seed0 = env_long("RLX_PG_SEED", 1);
    pg_stats st = {0};
    char *buf = malloc(MSG);
    CHECK(buf != NULL);
    if (!buf)
        return;
    int failed = 0;
    const char *file = getenv("RLX_PG_FILE"); /* a fuzz_program input, replayed here */
    if (file) {
        FILE *f = fopen(file, "rb");
        static uint8_t bytes[1 << 16];
        size_t len = f ? fread(bytes, 1, sizeof bytes, f) : 0;
        if (f)
            fclose(f);
        pg_rng g = pg_rng_bytes(bytes, len);
        pg_msg m = {buf, MSG, 0};
        buf[0] = 0;
        if (!pg_check(&g, &st, &m))
            test_fail(__FILE__, __LINE__, "%s: %s", file, buf);
        n = 0;
    }
    for (long k = 0; k < n; k++) {
        uint64_t seed = (uint64_t)(seed0 + k);
        pg_rng g = pg_rng_seed(seed);
        pg_msg m = {buf, MSG, 0};
        buf[0] = 0;
        if (!pg_check(&g, &st, &m) && failed++ < 5)
            test_fail(__FILE__, __LINE__, "seed %llu: %s", (unsigned long long)seed, buf);
    }
    free(buf);
    printf("%ld programs (%ld steps traced, %ld live, %ld with gradients), %ld bindings: %ld ran in both, "
           "%ld failed in both; %ld specializations planned, %ld of them from a kept plan\n  live steps per op:",
           st.programs, st.steps, st.live_steps, st.grads, st.bindings, st.both_ok, st.both_err, st.prepared,
           st.reused);
    for (int i = 0; i < PG_NOPS; i++)
        printf(" %s %ld", pg_op_names[i], st.ops[i]);
    printf("\n");
    /* the check must compare values, not only agree on errors */
    if (n >= 50) {
        CHECK(st.both_ok > 4 * n);
        CHECK(st.reused > n); /* plans derived from kept ones: the point of the sequences */
        for (int i = 0; i < PG_NOPS; i++)
            CHECK(st.ops[i] > 0);
    }
}

/* d sum(x[start:stop]^2) / dx compiled over a dynamic x and run at n,
 * against the gradient over the bound values (reference backend). */
static void slice_grad_at(int64_t start, int64_t stop, int64_t n)
{
    rlx_tensor *x = rlx_input("x", RLX_F64, 1, (int64_t[]){-1}), *y = rlx_slice(x, 0, start, stop, 1), *g;
    CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(y, y)), &x, 1, &g), RLX_OK);
    rlx_program *p = rlx_compile(&g, 1);
    CHECK(p != NULL);
    rlx_tensor *xv = trand(RLX_F64, 1, &n, -1, 1), *got = NULL, *want;
    rlx_status st = rlx_program_run(p, &(rlx_binding){"x", xv}, 1, &got);
    if (st != RLX_OK)
        test_fail(__FILE__, __LINE__, "x[%lld:%lld] at %lld: %s", (long long)start, (long long)stop, (long long)n,
                  rlx_last_error());
    test_backend_save();
    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
    rlx_tensor *ys = rlx_slice(xv, 0, start, stop, 1);
    CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(ys, ys)), &xv, 1, &want), RLX_OK);
    if (got)
        EXPECT_SAME(got, want, 0);
    test_backend_restore();
    rlx_program_free(p);
}

/* Found by random_programs (seed 3): the gradient of a slice of a dynamic
 * axis whose stop resolves before its start (empty, as x[3:0]) placed the
 * zeros after it from the stop, overlapping those before the start: the
 * run failed ("'where' joins dims ... bound to [9] and [6]"). */
TEST(slice_grad_stop_before_start)
{
    const int64_t ix[] = {0, 1, 3, 9, -1, -3, -7, RLX_END};
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++)
            for (int64_t n = 0; n < 7; n += 2)
                slice_grad_at(ix[a], ix[b], n);
}

/* Found by random_programs (seed 160): a reshape of a reshape is folded
 * into one reshape of the first one's source, and over dynamic dims the
 * folded one can be one a program cannot rebuild: [2, S, S] -> [2S, S]
 * (traced as [-1, -1]) then unsqueeze -> [-1, -1, 1] of [2, S, S], which
 * tracing refuses as ambiguous; traced, the run failed (RLX_E_UNSUPPORTED
 * "a reshape traced to [-1,-1,1] cannot be specialized"). */
TEST(reshape_then_unsqueeze_dynamic)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 3, (int64_t[]){2, -3, -3});
    rlx_tensor *o = rlx_unsqueeze(rlx_reshape(x, 2, (int64_t[]){-1, -1}), 2), *g;
    CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(o, rlx_sin(o))), &x, 1, &g), RLX_OK);
    rlx_program *p = rlx_compile((rlx_tensor *[]){o, g}, 2);
    CHECK(p != NULL);
    for (int64_t s = 0; p && s < 5; s++) {
        rlx_tensor *xv = trand(RLX_F32, 3, (int64_t[]){2, s, s}, -1, 1), *got[2] = {0};
        CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got), RLX_OK);
        test_backend_save();
        CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
        rlx_tensor *want = rlx_unsqueeze(rlx_reshape(xv, 2, (int64_t[]){2 * s, s}), 2), *wg;
        CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(want, rlx_sin(want))), &xv, 1, &wg), RLX_OK);
        if (got[0] && got[1]) {
            CHECK_EQ_INT(rlx_rank(got[0]), 3);
            CHECK_EQ_INT(rlx_dim(got[0], 0), 2 * s);
            EXPECT_SAME(got[0], want, 0);
            EXPECT_SAME(got[1], wg, 1e-6);
        }
        test_backend_restore();
    }
    rlx_program_free(p);
}

/* Found by random_programs (seeds 54, 56, 125): the gradient of a
 * batched matmul whose batch is dynamic, x [S, 3, K] @ w [K, 4], summed
 * over the batch, transposes w broadcast over the batch; the program
 * could not move a broadcast to a dynamic dim through a permute, and the
 * run failed (RLX_E_UNSUPPORTED "'permute' of a broadcast to a dynamic
 * dim cannot be specialized"). */
TEST(batched_matmul_grad_dynamic_batch)
{
    rlx_tensor *w = trand(RLX_F64, 2, (int64_t[]){2, 4}, -1, 1);
    rlx_tensor *x = rlx_input("x", RLX_F64, 3, (int64_t[]){-3, 3, 2});
    rlx_tensor *y = rlx_sum(rlx_matmul(x, w), (int[]){0}, 1, false), *g;
    CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(y, rlx_sin(y))), &x, 1, &g), RLX_OK);
    rlx_program *p = rlx_compile((rlx_tensor *[]){y, g}, 2);
    CHECK(p != NULL);
    for (int64_t s = 0; p && s < 5; s++) {
        rlx_tensor *xv = trand(RLX_F64, 3, (int64_t[]){s, 3, 2}, -1, 1), *got[2] = {0};
        if (rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got) != RLX_OK) {
            test_fail(__FILE__, __LINE__, "S = %lld: %s", (long long)s, rlx_last_error());
            continue;
        }
        test_backend_save();
        CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
        rlx_tensor *ys = rlx_sum(rlx_matmul(xv, w), (int[]){0}, 1, false), *gs;
        CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(ys, rlx_sin(ys))), &xv, 1, &gs), RLX_OK);
        CHECK_EQ_INT(rlx_dim(got[1], 0), s);
        EXPECT_SAME(got[0], ys, 1e-12);
        EXPECT_SAME(got[1], gs, 1e-12);
        test_backend_restore();
    }
    rlx_program_free(p);
}

/* Found by random_programs (seed 101): rlx_gather refuses a non-empty
 * index into an empty axis (NumPy's take does too), but a program ran it
 * when the result was empty as well (x [0, 0, 3], index [0] along axis 1:
 * no index is read), giving a value where the same graph over the bound
 * values is an error. */
TEST(gather_empty_axis_in_program)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 3, (int64_t[]){-1, -2, 3});
    rlx_tensor *idx = ti64(1, (int64_t[]){1}, (int64_t[]){0}), *o = rlx_gather(x, idx, 1);
    rlx_program *p = rlx_compile(&o, 1);
    CHECK(p != NULL);
    const int64_t sizes[][2] = {{0, 0}, {2, 0}, {0, 2}, {2, 2}};
    for (int k = 0; p && k < 4; k++) {
        rlx_tensor *xv = trand(RLX_F32, 3, (int64_t[]){sizes[k][0], sizes[k][1], 3}, -1, 1), *got = NULL;
        rlx_clear_error();
        rlx_status st = rlx_program_run(p, &(rlx_binding){"x", xv}, 1, &got);
        if (sizes[k][1] == 0) {
            CHECK(st != RLX_OK && got == NULL);
            CHECK_NULL_ERR(rlx_gather(xv, idx, 1), RLX_E_SHAPE, "rlx_gather");
        } else {
            CHECK_EQ_INT(st, RLX_OK);
            if (got)
                EXPECT_SAME(got, rlx_gather(xv, idx, 1), 0);
        }
    }
    rlx_clear_error();
    rlx_program_free(p);
}

/* Found by random_programs (seed 41): [0, 4, S] -> [0, -1] (a dynamic
 * axis narrowed to 0, then two dims merged) traced, and every run failed
 * (RLX_E_UNSUPPORTED "a reshape traced to [0,-1] cannot be specialized"):
 * a -1 beside static dims of 0 elements cannot be inferred from the
 * count, which rlx_input documents as RLX_E_SHAPE while tracing. One the
 * program reads as the dynamic dims kept in place still traces and runs. */
TEST(reshape_zero_dims_dynamic)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 3, (int64_t[]){0, 4, -3});
    CHECK_NULL_ERR(rlx_reshape(x, 2, (int64_t[]){0, -1}), RLX_E_SHAPE, "rlx_reshape");
    rlx_tensor *y = rlx_input("y", RLX_F32, 2, (int64_t[]){0, -3}), *o = rlx_reshape(y, 3, (int64_t[]){0, 1, -1});
    rlx_program *p = rlx_compile(&o, 1);
    CHECK(p != NULL);
    rlx_tensor *got = NULL;
    if (p)
        CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"y", trand(RLX_F32, 2, (int64_t[]){0, 5}, -1, 1)}, 1, &got),
                     RLX_OK);
    if (got)
        CHECK(rlx_rank(got) == 3 && rlx_dim(got, 0) == 0 && rlx_dim(got, 1) == 1 && rlx_dim(got, 2) == 5);
    rlx_program_free(p);
}

/* roll(transpose(x1 * s) * s), s = sum(x2): s is broadcast to [2, a, S]
 * and to [2, S, a] (x1 [2, a, S]). */
static rlx_tensor *twice_broadcast(rlx_tensor *x1, rlx_tensor *x2)
{
    rlx_tensor *s = rlx_sum_all(x2), *t = rlx_transpose(rlx_mul(x1, s), 3, (int[]){0, 2, 1});
    return rlx_roll(rlx_mul(t, s), 1, -9);
}

/* Found by random_programs (seed 11889): the two broadcasts of s trace
 * alike ([2, -1, -1]) and are one hash-consed expand node, where the
 * gradient added the cotangents of both uses; bound to other sizes
 * ([2, 3, 2] and [2, 2, 3]) the run failed ("'add' joins dims that
 * tracing took as equal"). */
TEST(grad_of_one_broadcast_to_two_dynamic_shapes)
{
    rlx_tensor *x1 = rlx_input("x1", RLX_F64, 3, (int64_t[]){2, -1, -3});
    rlx_tensor *x2 = rlx_input("x2", RLX_F64, 1, (int64_t[]){-3}), *y = twice_broadcast(x1, x2), *g[2];
    CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(y, rlx_sin(y))), (rlx_tensor *[]){x1, x2}, 2, g), RLX_OK);
    rlx_program *p = rlx_compile((rlx_tensor *[]){y, g[0], g[1]}, 3);
    CHECK(p != NULL);
    const int64_t sizes[][2] = {{2, 3}, {3, 3}, {1, 4}, {0, 2}, {4, 1}};
    for (int k = 0; p && k < 5; k++) {
        int64_t a = sizes[k][0], s = sizes[k][1];
        rlx_tensor *v1 = trand(RLX_F64, 3, (int64_t[]){2, a, s}, -1, 1), *v2 = trand(RLX_F64, 1, &s, -0.5, 0.5);
        rlx_tensor *got[3] = {0}, *want[3];
        if (rlx_program_run(p, (rlx_binding[]){{"x1", v1}, {"x2", v2}}, 2, got) != RLX_OK) {
            test_fail(__FILE__, __LINE__, "a = %lld, S = %lld: %s", (long long)a, (long long)s, rlx_last_error());
            continue;
        }
        test_backend_save();
        CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
        want[0] = twice_broadcast(v1, v2);
        CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(want[0], rlx_sin(want[0]))), (rlx_tensor *[]){v1, v2}, 2, want + 1),
                     RLX_OK);
        for (int o = 0; o < 3; o++)
            EXPECT_SAME(got[o], want[o], 1e-12);
        test_backend_restore();
    }
    rlx_program_free(p);
}

/* A loop nest one past the rank limit (SCHED_MAX_LOOP dims): six tiles of
 * the static last axis of [S, S, S, 3], the value of five materialized
 * for the gradient; its kernel splits 96 into 2x2x2x2x2x3 beside the
 * three outer dims, and the innermost step was dropped (every element of
 * a row read as its first: wrong values in 2/3 of y). Found by
 * fuzz_program. With and without dynamic dims (the program's graph is not
 * simplified, so the chain is lowered as traced). */
static rlx_tensor *six_tiles(rlx_tensor *x)
{
    x = rlx_narrow(x, 3, 0, 3);
    for (int i = 0; i < 6; i++)
        x = rlx_tile(x, 3, 2);
    return x;
}

TEST(loop_nest_at_the_rank_limit)
{
    const int64_t dyn[4] = {-3, -3, -3, -3}, fixed[4] = {3, 3, 3, 3};
    for (int v = 0; v < 2; v++) {
        rlx_tensor *x = rlx_input("x", RLX_F64, 4, v ? fixed : dyn), *y = six_tiles(x), *g;
        CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(y, rlx_sin(y))), &x, 1, &g), RLX_OK);
        rlx_program *p = rlx_compile((rlx_tensor *[]){y, g}, 2);
        CHECK(p != NULL);
        for (int64_t s = 3; p && s < (v ? 4 : 6); s++) {
            int64_t sz[4] = {s, s, s, s};
            rlx_tensor *xv = trand(RLX_F64, 4, sz, -1, 1), *got[2] = {0};
            CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", xv}, 1, got), RLX_OK);
            test_backend_save();
            CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
            rlx_tensor *want = six_tiles(xv), *wg;
            CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(want, rlx_sin(want))), &xv, 1, &wg), RLX_OK);
            if (got[0] && got[1]) {
                EXPECT_SAME(got[0], want, 0);
                EXPECT_SAME(got[1], wg, 1e-12);
            }
            test_backend_restore();
        }
        rlx_program_free(p);
    }
}

/* A cat's piece that is empty along the axis but has a dynamic dim stays
 * in the graph, so what made it is checked when bound: here a narrow of
 * 3 columns, which S = 2 does not fit (the piece was dropped while
 * tracing and the program ran; the static graph refuses). Found by
 * fuzz_program. */
TEST(cat_keeps_an_empty_dynamic_piece)
{
    rlx_tensor *x = rlx_input("x", RLX_F64, 2, (int64_t[]){-2, -3});
    rlx_tensor *e = rlx_narrow(rlx_narrow(x, 1, 0, 3), 1, 0, 0); /* [B, 0] */
    rlx_tensor *y = rlx_cat((rlx_tensor *[]){e, rlx_sin(x)}, 2, 1);
    rlx_program *p = rlx_compile(&y, 1);
    CHECK(p != NULL);
    for (int64_t s = 2; p && s < 6; s += 2) {
        rlx_tensor *xv = trand(RLX_F64, 2, (int64_t[]){3, s}, -1, 1), *got = NULL;
        rlx_status st = rlx_program_run(p, &(rlx_binding){"x", xv}, 1, &got);
        if (s < 3) {
            CHECK_EQ_INT(st, RLX_E_SHAPE);
            CHECK(got == NULL);
            rlx_clear_error();
            continue;
        }
        CHECK_EQ_INT(st, RLX_OK);
        if (got)
            EXPECT_SAME(got, rlx_sin(xv), 0);
    }
    rlx_program_free(p);
}

TEST_MAIN(T(random_programs), T(cat_keeps_an_empty_dynamic_piece), T(loop_nest_at_the_rank_limit), T(reshape_zero_dims_dynamic), T(grad_of_one_broadcast_to_two_dynamic_shapes), T(slice_grad_stop_before_start), T(reshape_then_unsqueeze_dynamic),
          T(batched_matmul_grad_dynamic_batch), T(gather_empty_axis_in_program))
