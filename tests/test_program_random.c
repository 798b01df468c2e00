/*
 * test_program_random.c — random compositions of ops over dynamic dims
 * (tests/prog_gen.h), each compiled once and run over a sequence of
 * bindings, against the same recipe over the bound values on the
 * reference backend. A failure prints the seed and the recipe; replay it
 * alone with RLX_PG_SEED=<seed> RLX_PG_PROGRAMS=1 ./test_program_random
 * (RLX_PG_PROGRAMS=n runs n programs from the seed).
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
    long n = env_long("RLX_PG_PROGRAMS", 150), seed0 = env_long("RLX_PG_SEED", 1);
    pg_stats st = {0};
    char *buf = malloc(MSG);
    CHECK(buf != NULL);
    if (!buf)
        return;
    int failed = 0;
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
           "%ld failed in both\n  live steps per op:",
           st.programs, st.steps, st.live_steps, st.grads, st.bindings, st.both_ok, st.both_err);
    for (int i = 0; i < PG_NOPS; i++)
        printf(" %s %ld", pg_op_names[i], st.ops[i]);
    printf("\n");
    /* the check must compare values, not only agree on errors */
    if (n >= 50) {
        CHECK(st.both_ok > 4 * n);
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

TEST_MAIN(T(random_programs), T(slice_grad_stop_before_start))
