/*
 * fuzz_program.c — the differential fuzzer of compiled programs over
 * dynamic dims: the input's bytes drive tests/prog_gen.h (the generator
 * of test_program_random), which draws a random graph over rlx_input
 * leaves with dynamic dims, compiles it once (with its gradients,
 * sometimes) and runs it over a sequence of bindings, each against the
 * same graph over the bound values on the reference backend (see
 * prog_gen.h for the rules). A difference, a run that fails where the
 * reference does not (or the reverse), or a leaked node aborts with the
 * recipe, the bindings and the difference.
 */
#include "fuzz_common.h"

#include "../prog_gen.h"

static pg_stats stats;

static void print_stats(void)
{
    fprintf(stderr, "fuzz_program: %ld programs, %ld bindings (%ld ran in both, %ld failed in both)\n",
            stats.programs, stats.bindings, stats.both_ok, stats.both_err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static long live0 = -1;
    static char msg[1 << 16];
    if (live0 < 0) {
        rlx_set_num_threads(2);
        live0 = ir_live_nodes();
        atexit(print_stats);
    }
    pg_rng g = pg_rng_bytes(data, size);
    pg_msg m = {msg, sizeof msg, 0};
    msg[0] = 0;
    bool ok = pg_check(&g, &stats, &m);
    FUZZ_ASSERT(ok, "%s", msg);
    FUZZ_ASSERT(ir_live_nodes() == live0, "%ld graph nodes leaked", ir_live_nodes() - live0);
    return 0;
}
