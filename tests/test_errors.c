/* test_errors.c — the error model: sticky NULL, messages, limits, and
 * allocation failures injected at every allocation of a workload. */
#include "harness.h"


TEST(null_propagates_first_error)
{
    rlx_tensor *a = rlx_ones(RLX_F32, 1, (int64_t[]){3});
    rlx_tensor *b = rlx_ones(RLX_F32, 1, (int64_t[]){4});
    rlx_clear_error();
    rlx_tensor *bad = rlx_add(a, b);
    CHECK(bad == NULL);
    rlx_tensor *y = rlx_exp(rlx_mul_s(rlx_sum(bad, NULL, 0, false), 2));
    CHECK(y == NULL);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_SHAPE);
    CHECK(strcmp(rlx_last_error(), "rlx_add: shapes [3] and [4] do not broadcast") == 0);
    rlx_clear_error();
    CHECK(rlx_exp(NULL) == NULL);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_ARG);
    CHECK(strcmp(rlx_last_error(), "rlx_exp: argument 'x' is NULL") == 0);
    rlx_clear_error();
}

TEST(composite_errors_name_the_composite)
{
    rlx_tensor *x = rlx_ones(RLX_F32, 2, (int64_t[]){2, 3});
    CHECK_NULL_ERR(rlx_logsumexp(x, 2, false), RLX_E_ARG, "rlx_logsumexp");
    CHECK_NULL_ERR(rlx_masked_fill(x, rlx_ones(RLX_BOOL, 1, (int64_t[]){4}), 0), RLX_E_SHAPE, "rlx_masked_fill");
}

TEST(size_limits)
{
    const int64_t huge[3] = {1 << 30, 1 << 30, 1 << 30};
    CHECK_NULL_ERR(rlx_zeros(RLX_F64, 3, huge), RLX_E_SHAPE, "rlx_zeros");
    const int64_t over[2] = {INT64_MAX / 2, 3};
    CHECK_NULL_ERR(rlx_full(RLX_I32, 2, over, 1), RLX_E_SHAPE, "rlx_full");
    CHECK_NULL_ERR(rlx_from_data(RLX_F32, 2, over, "x"), RLX_E_SHAPE, "rlx_from_data");
    const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_NULL_ERR(rlx_zeros(RLX_F32, 9, nine), RLX_E_SHAPE, "rlx_zeros");
    CHECK_NULL_ERR(rlx_zeros(RLX_F32, -1, nine), RLX_E_SHAPE, "rlx_zeros");
    CHECK_NULL_ERR(rlx_zeros(RLX_F32, 2, ((int64_t[]){3, -2})), RLX_E_SHAPE, "rlx_zeros");
    /* 10^15 elements build lazily, and realizing them is an error, not a crash. */
    const int64_t peta[1] = {1000000000000000};
    rlx_tensor *t = rlx_zeros(RLX_F32, 1, peta);
    CHECK(t != NULL);
    CHECK_ERR(rlx_realize(rlx_add_s(t, 1)), RLX_E_NOMEM, "rlx_realize");
    CHECK_NULL_ERR(rlx_from_data(RLX_F32, 1, peta, "x"), RLX_E_NOMEM, "rlx_from_data");
    /* Even an empty tensor may not have dims whose product overflows: every
     * later shape computation would overflow with it. */
    CHECK_NULL_ERR(rlx_zeros(RLX_F64, 3, ((int64_t[]){0, INT64_MAX, INT64_MAX})), RLX_E_SHAPE, "rlx_zeros");
    CHECK(rlx_zeros(RLX_F64, 3, ((int64_t[]){0, 1 << 20, 1 << 20})) != NULL);
}

TEST(gather_out_of_range_at_realize)
{
    rlx_tensor *x = rlx_arange(RLX_F32, 0, 4, 1);
    rlx_tensor *idx = rlx_from_data(RLX_I64, 1, (int64_t[]){2}, (int64_t[]){1, 4});
    rlx_tensor *g = rlx_gather(x, idx, 0);
    CHECK(g != NULL);
    CHECK_ERR(rlx_realize(g), RLX_E_ARG, "rlx_realize");
    CHECK(!rlx_is_realized(g));
    double v[2];
    CHECK_ERR(rlx_read_f64(g, v, 2), RLX_E_ARG, "rlx_read_f64");
}

/* Runs a workload with the n-th allocation failing, for every n until it
 * succeeds untouched: each run must fail cleanly or succeed, and leak no
 * node (storage leaks are caught by valgrind/ASan on this test). */
static int workload(void)
{
    rlx_scope_begin();
    rlx_tensor *x = rlx_from_data(RLX_F32, 2, (int64_t[]){2, 3}, (float[]){1, 2, 3, 4, 5, 6});
    rlx_tensor *y = rlx_softmax(rlx_add(rlx_t(x), rlx_arange(RLX_F32, 0, 2, 1)), 0);
    int axis = 1;
    rlx_tensor *z = rlx_sum(rlx_mul(y, y), &axis, 1, true);
    rlx_tensor *parts[2];
    rlx_status st = rlx_split(x, 1, 2, (int64_t[]){1, 2}, parts);
    rlx_tensor *c = st == RLX_OK ? rlx_cat(parts, 2, 1) : NULL;
    double v[3] = {0};
    int ok = z && c && rlx_read_f64(z, v, 3) == RLX_OK && rlx_realize(c) == RLX_OK;
    char *s = ok ? rlx_to_string(z) : NULL;
    ok = ok && s != NULL;
    free(s);
    rlx_scope_end();
    return ok;
}

TEST(allocation_failures) { ALLOC_WALK(workload, 20); }

TEST_MAIN(T(null_propagates_first_error), T(composite_errors_name_the_composite), T(size_limits),
          T(gather_out_of_range_at_realize), T(allocation_failures))
