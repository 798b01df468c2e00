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

TEST_MAIN(T(random_programs))
