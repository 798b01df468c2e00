/* test_limits.c — the edges of the shape space on both backends: element
 * counts and byte sizes that overflow, rank above 8, 10^15-element tensors,
 * extreme axes and offsets, 100,000-op chains (building, realizing,
 * autodiff, programs, scopes, release: no recursion may overflow the
 * stack), and gather indices out of range. Each is an error or a right
 * answer, never a crash.
 *
 * Tests named known_* check library bugs found by the fuzzers and
 * sanitizers that are not fixed yet; they run only with
 * RLX_TEST_KNOWN_BUGS=1 (some crash the process today). Each says what is
 * wrong; once fixed, move it to the main list (drop the guard). */
#include <math.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

long ir_live_nodes(void);
void ir_alloc_fail_after(long n);

#define G32 ((int64_t)1 << 32)
#define P62 ((int64_t)1 << 62)
#define PETA 1000000000000000LL

static const char *const backends[] = {"ref", "jit"};

static void use(const char *backend) { CHECK(rlx_set_option("backend", backend) == RLX_OK); }

/* Values of t (realized with the current backend) equal want exactly. */
static void expect_values(rlx_tensor *t, const double *want, int64_t n)
{
    if (!t) {
        test_fail(__FILE__, __LINE__, "tensor is NULL: %s", rlx_last_error());
        return;
    }
    CHECK_EQ_INT(rlx_numel(t), n);
    if (rlx_numel(t) != n)
        return;
    double v[64];
    if (n > 64 || rlx_read_f64(t, v, (size_t)n) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "read failed: %s", rlx_last_error());
        return;
    }
    for (int64_t i = 0; i < n; i++)
        if (!(v[i] == want[i] || (isnan(v[i]) && isnan(want[i])))) {
            test_fail(__FILE__, __LINE__, "element %lld is %.17g, expected %.17g", (long long)i, v[i], want[i]);
            return;
        }
}

/* Takes t out of the test's scope: the caller releases it (the harness runs
 * each test inside a scope, which would release it a second time). */
static rlx_tensor *own(rlx_tensor *t) { return rlx_escape(t); }

/* inline: no unused warning while no known bug is open */
static inline bool known_bugs(void)
{
    const char *e = getenv("RLX_TEST_KNOWN_BUGS");
    if (e && *e && strcmp(e, "0") != 0)
        return true;
    printf("  (skipped: a known bug; RLX_TEST_KNOWN_BUGS=1 runs it)\n");
    return false;
}

/* ------------------------------------------------------ overflowing shapes */

TEST(element_count_overflow)
{
    const int64_t sq[2] = {G32, G32}; /* 2^64 elements */
    CHECK_NULL_ERR(rlx_zeros(RLX_BOOL, 2, sq), RLX_E_SHAPE, "rlx_zeros");
    CHECK_NULL_ERR(rlx_ones(RLX_I32, 2, sq), RLX_E_SHAPE, "rlx_ones");
    CHECK_NULL_ERR(rlx_full(RLX_F64, 2, sq, 1), RLX_E_SHAPE, "rlx_full");
    CHECK_NULL_ERR(rlx_rand(RLX_F32, 2, sq, 1), RLX_E_SHAPE, "rlx_rand");
    CHECK_NULL_ERR(rlx_randn(RLX_F64, 2, sq, 1), RLX_E_SHAPE, "rlx_randn");
    CHECK_NULL_ERR(rlx_from_data(RLX_F32, 2, sq, "x"), RLX_E_SHAPE, "rlx_from_data");
    static float blob[1];
    CHECK_NULL_ERR(rlx_from_blob(RLX_F32, 2, sq, blob, NULL, NULL), RLX_E_SHAPE, "rlx_from_blob");
    CHECK_NULL_ERR(rlx_input("x", RLX_F32, 2, sq), RLX_E_SHAPE, "rlx_input");
    CHECK_NULL_ERR(rlx_input("x", RLX_F32, 3, ((int64_t[]){-1, G32, G32})), RLX_E_SHAPE, "rlx_input");
    const int64_t three[3] = {INT64_MAX, INT64_MAX, 2};
    CHECK_NULL_ERR(rlx_zeros(RLX_BOOL, 3, three), RLX_E_SHAPE, "rlx_zeros");
    CHECK_NULL_ERR(rlx_eye(RLX_F32, INT64_MAX), RLX_E_SHAPE, "rlx_eye");
    CHECK_NULL_ERR(rlx_eye(RLX_BOOL, G32), RLX_E_SHAPE, "rlx_eye");
    CHECK_NULL_ERR(rlx_arange(RLX_F32, 0, 1e300, 1e-300), RLX_E_SHAPE, "rlx_arange");
    CHECK_NULL_ERR(rlx_arange(RLX_F64, -1e308, 1e308, 1), RLX_E_SHAPE, "rlx_arange");
    CHECK_NULL_ERR(rlx_arange(RLX_I64, 0, 1e19, 1), RLX_E_SHAPE, "rlx_arange");
    /* views and movement whose result would not fit */
    rlx_tensor *s = rlx_scalar(RLX_F32, 1);
    CHECK_NULL_ERR(rlx_broadcast_to(s, 2, sq), RLX_E_SHAPE, "rlx_broadcast_to");
    rlx_tensor *big = rlx_zeros(RLX_BOOL, 1, (int64_t[]){P62});
    CHECK(big != NULL);
    CHECK_NULL_ERR(rlx_reshape(big, 2, ((int64_t[]){P62, 4})), RLX_E_SHAPE, "rlx_reshape");
    CHECK_NULL_ERR(rlx_reshape(big, 2, ((int64_t[]){-1, 0})), RLX_E_SHAPE, "rlx_reshape");
    rlx_clear_error();
    CHECK(rlx_tile(big, 0, 4) == NULL && rlx_last_status() != RLX_OK);
    rlx_clear_error();
    CHECK(rlx_tile(big, 0, INT64_MAX) == NULL && rlx_last_status() != RLX_OK);
    rlx_clear_error();
    CHECK(rlx_pad(big, 0, P62, 0, 0) == NULL && rlx_last_status() != RLX_OK);
    rlx_clear_error();
    CHECK(rlx_pad(big, 0, INT64_MAX, INT64_MAX, 0) == NULL && rlx_last_status() != RLX_OK);
    rlx_clear_error();
    /* the library stays usable */
    EXPECT(rlx_add_s(s, 1), RLX_F32, 0, NULL, ((double[]){2}), 0);
}

TEST(byte_size_overflow)
{
    /* the element count fits, the bytes do not */
    CHECK_NULL_ERR(rlx_zeros(RLX_F64, 1, (int64_t[]){(int64_t)1 << 61}), RLX_E_SHAPE, "rlx_zeros");
    CHECK_NULL_ERR(rlx_zeros(RLX_F32, 1, (int64_t[]){(int64_t)1 << 61}), RLX_E_SHAPE, "rlx_zeros");
    CHECK_NULL_ERR(rlx_full(RLX_I64, 2, ((int64_t[]){(int64_t)1 << 30, (int64_t)1 << 30}), 0), RLX_E_SHAPE, NULL);
    CHECK_NULL_ERR(rlx_from_data(RLX_I32, 1, (int64_t[]){INT64_MAX / 2}, "x"), RLX_E_SHAPE, "rlx_from_data");
    /* the largest that fit build lazily (and are never realized) */
    CHECK(rlx_zeros(RLX_BOOL, 1, (int64_t[]){INT64_MAX}) != NULL);
    CHECK(rlx_zeros(RLX_F32, 1, (int64_t[]){INT64_MAX / 4}) != NULL);
    CHECK(rlx_zeros(RLX_F64, 1, (int64_t[]){INT64_MAX / 8}) != NULL);
    CHECK_EQ_INT(rlx_numel(rlx_zeros(RLX_BOOL, 2, ((int64_t[]){G32, G32 / 2 - 1}))), G32 * (G32 / 2 - 1));
    /* realizing any of them is out of memory, on both backends */
    for (int b = 0; b < 2; b++) {
        use(backends[b]);
        rlx_tensor *t = rlx_ones(RLX_F64, 1, (int64_t[]){INT64_MAX / 8});
        CHECK_ERR(rlx_realize(t), RLX_E_NOMEM, "rlx_realize");
        CHECK_ERR(rlx_realize(rlx_mul_s(t, 2)), RLX_E_NOMEM, "rlx_realize");
        CHECK(!rlx_is_realized(t));
    }
    use("ref");
}

TEST(rank_above_8)
{
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    float one = 1;
    CHECK_NULL_ERR(rlx_zeros(RLX_F32, 9, nine), RLX_E_SHAPE, "rlx_zeros");
    CHECK_NULL_ERR(rlx_ones(RLX_F32, 9, nine), RLX_E_SHAPE, "rlx_ones");
    CHECK_NULL_ERR(rlx_full(RLX_F32, 9, nine, 2), RLX_E_SHAPE, "rlx_full");
    CHECK_NULL_ERR(rlx_rand(RLX_F32, 9, nine, 1), RLX_E_SHAPE, "rlx_rand");
    CHECK_NULL_ERR(rlx_randn(RLX_F32, 9, nine, 1), RLX_E_SHAPE, "rlx_randn");
    CHECK_NULL_ERR(rlx_from_data(RLX_F32, 9, nine, &one), RLX_E_SHAPE, "rlx_from_data");
    CHECK_NULL_ERR(rlx_from_blob(RLX_F32, 9, nine, &one, NULL, NULL), RLX_E_SHAPE, "rlx_from_blob");
    CHECK_NULL_ERR(rlx_input("x", RLX_F32, 9, nine), RLX_E_SHAPE, "rlx_input");
    CHECK_NULL_ERR(rlx_zeros(RLX_F32, 1000, nine), RLX_E_SHAPE, "rlx_zeros");
    CHECK_NULL_ERR(rlx_zeros(RLX_F32, INT32_MAX, nine), RLX_E_SHAPE, "rlx_zeros");
    CHECK_NULL_ERR(rlx_zeros(RLX_F32, INT32_MIN, nine), RLX_E_SHAPE, "rlx_zeros");
    int64_t eight[8] = {2, 1, 2, 1, 2, 1, 2, 1};
    rlx_tensor *r8 = rlx_arange(RLX_F32, 0, 16, 1);
    r8 = rlx_reshape(r8, 8, eight);
    CHECK(r8 != NULL);
    CHECK_NULL_ERR(rlx_reshape(r8, 9, nine), RLX_E_SHAPE, "rlx_reshape");
    CHECK_NULL_ERR(rlx_broadcast_to(r8, 9, nine), RLX_E_SHAPE, "rlx_broadcast_to");
    CHECK_NULL_ERR(rlx_unsqueeze(r8, 0), RLX_E_ARG, "rlx_unsqueeze");
    CHECK_NULL_ERR(rlx_unsqueeze(r8, -1), RLX_E_ARG, "rlx_unsqueeze");
    CHECK_NULL_ERR(rlx_stack((rlx_tensor *[]){r8, r8}, 2, 0), RLX_E_ARG, "rlx_stack");
    CHECK_NULL_ERR(rlx_gather(r8, rlx_zeros(RLX_I64, 2, ((int64_t[]){1, 1})), 0), RLX_E_SHAPE, "rlx_gather");
    CHECK_NULL_ERR(rlx_transpose(r8, 9, (int[]){0, 1, 2, 3, 4, 5, 6, 7, 8}), RLX_E_ARG, "rlx_transpose");
    int axes[9] = {0, 1, 2, 3, 4, 5, 6, 7, 0};
    CHECK_NULL_ERR(rlx_sum(r8, axes, 9, false), RLX_E_ARG, "rlx_sum");
    /* rank 8 itself works on both backends */
    for (int b = 0; b < 2; b++) {
        use(backends[b]);
        rlx_scope_begin();
        rlx_tensor *y = rlx_add_s(rlx_transpose(r8, 0, NULL), 0.5); /* reverses all 8 axes */
        EXPECT(rlx_sum_all(y), RLX_F32, 0, NULL, ((double[]){128}), 0);
        rlx_tensor *m = rlx_matmul(r8, rlx_transpose(r8, 8, (int[]){0, 1, 2, 3, 4, 5, 7, 6}));
        CHECK(m != NULL && rlx_rank(m) == 8);
        EXPECT(rlx_sum_all(m), RLX_F32, 0, NULL, ((double[]){2472}), 0); /* sum over k of (4k+1)^2 */
        rlx_tensor *g = rlx_gather(r8, rlx_from_data(RLX_I64, 1, (int64_t[]){1}, (int64_t[]){-1}), 7);
        CHECK_EQ_INT(rlx_rank(g), 8);
        EXPECT(rlx_sum_all(g), RLX_F32, 0, NULL, ((double[]){120}), 0);
        rlx_scope_end();
    }
    use("ref");
}

TEST(extreme_axes_and_offsets)
{
    rlx_tensor *x = rlx_arange(RLX_F64, 0, 3, 1); /* [0, 1, 2] */
    rlx_tensor *m = rlx_reshape(rlx_arange(RLX_F64, 0, 12, 1), 2, ((int64_t[]){3, 4}));
    const int ibad[] = {INT32_MIN, INT32_MIN + 1, INT32_MAX, -3, 2};
    for (size_t i = 0; i < sizeof ibad / sizeof *ibad; i++) {
        int a = ibad[i];
        CHECK_NULL_ERR(rlx_flip(m, a), RLX_E_ARG, "rlx_flip");
        CHECK_NULL_ERR(rlx_squeeze(m, a), RLX_E_ARG, "rlx_squeeze");
        CHECK_NULL_ERR(rlx_cumsum(m, a, false), RLX_E_ARG, "rlx_cumsum");
        CHECK_NULL_ERR(rlx_argmax(m, a, false), RLX_E_ARG, "rlx_argmax");
        CHECK_NULL_ERR(rlx_softmax(m, a), RLX_E_ARG, "rlx_softmax");
        CHECK_NULL_ERR(rlx_sum(m, &a, 1, true), RLX_E_ARG, "rlx_sum");
        CHECK_NULL_ERR(rlx_select(m, a, 0), RLX_E_ARG, "rlx_select");
        CHECK_NULL_ERR(rlx_transpose(m, 2, ((int[]){0, a})), RLX_E_ARG, "rlx_transpose");
        if (a != 2 && a != -3) /* unsqueeze accepts [-3, 2] for rank 2 */
            CHECK_NULL_ERR(rlx_unsqueeze(m, a), RLX_E_ARG, "rlx_unsqueeze");
    }
    CHECK_NULL_ERR(rlx_sum(m, (int[]){0}, -1, false), RLX_E_ARG, "rlx_sum");
    CHECK_NULL_ERR(rlx_sum(m, (int[]){0}, INT32_MAX, false), RLX_E_ARG, "rlx_sum");
    const int64_t lbad[] = {INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1, 3, -4};
    for (size_t i = 0; i < sizeof lbad / sizeof *lbad; i++) {
        int64_t v = lbad[i];
        CHECK_NULL_ERR(rlx_select(x, 0, v), RLX_E_ARG, "rlx_select");
        CHECK_NULL_ERR(rlx_narrow(x, 0, v, 1), RLX_E_ARG, "rlx_narrow");
        CHECK_NULL_ERR(rlx_narrow(x, 0, 1, v > 2 || v < 0 ? v : 3), RLX_E_ARG, "rlx_narrow");
        CHECK_NULL_ERR(rlx_tile(x, 0, v < 0 ? v : INT64_MAX), RLX_E_ARG, "rlx_tile");
    }
    rlx_tensor *parts[2] = {NULL, NULL};
    CHECK_ERR(rlx_split(x, 0, 2, (int64_t[]){INT64_MAX, INT64_MIN + 4}, parts), RLX_E_SHAPE, "rlx_split");
    CHECK(parts[0] == NULL && parts[1] == NULL);
    CHECK_ERR(rlx_split(x, 0, 2, (int64_t[]){-1, 4}, parts), RLX_E_SHAPE, "rlx_split");
    CHECK_ERR(rlx_split(x, 0, INT32_MIN, (int64_t[]){3}, parts), RLX_E_ARG, "rlx_split");
    CHECK_ERR(rlx_chunk(x, 0, 0, parts), RLX_E_ARG, "rlx_chunk");
    CHECK_ERR(rlx_chunk(x, 0, INT32_MIN, parts), RLX_E_ARG, "rlx_chunk");
    /* legal extremes give the Python/NumPy answer on both backends */
    for (int b = 0; b < 2; b++) {
        use(backends[b]);
        rlx_scope_begin();
        expect_values(rlx_slice(x, 0, 0, RLX_END, INT64_MIN), (double[]){0}, 1);         /* x[0::-huge] */
        expect_values(rlx_slice(x, 0, INT64_MIN, INT64_MAX, INT64_MAX), (double[]){0}, 1); /* x[::huge] */
        expect_values(rlx_slice(x, 0, INT64_MAX, INT64_MIN, -1), (double[]){2, 1, 0}, 3);
        expect_values(rlx_slice(x, 0, RLX_END, RLX_END, -1), (double[]){2, 1, 0}, 3);
        expect_values(rlx_slice(x, 0, INT64_MIN, INT64_MIN, 1), (double[]){0}, 0);
        expect_values(rlx_roll(x, 0, INT64_MIN), (double[]){2, 0, 1}, 3);  /* INT64_MIN mod 3 == 1 */
        expect_values(rlx_roll(x, 0, INT64_MAX), (double[]){2, 0, 1}, 3);  /* INT64_MAX mod 3 == 1 */
        expect_values(rlx_pad(x, 0, 0, 0, NAN), (double[]){0, 1, 2}, 3);
        expect_values(rlx_pad(x, 0, 1, 0, -INFINITY), (double[]){-INFINITY, 0, 1, 2}, 4);
        expect_values(rlx_tile(x, 0, 0), (double[]){0}, 0);
        rlx_scope_end();
    }
    use("ref");
}

TEST(extreme_nn_parameters)
{
    rlx_tensor *img = rlx_ones(RLX_F32, 4, ((int64_t[]){1, 1, 4, 4}));
    rlx_tensor *w = rlx_ones(RLX_F32, 4, ((int64_t[]){1, 1, 2, 2}));
    rlx_tensor *q = rlx_ones(RLX_F32, 3, ((int64_t[]){1, 2, 4}));
    CHECK_NULL_ERR(rlx_conv2d(img, w, NULL, (int[]){0, 1}, NULL, NULL, 1), RLX_E_ARG, "rlx_conv2d");
    CHECK_NULL_ERR(rlx_conv2d(img, w, NULL, (int[]){INT32_MIN, 1}, NULL, NULL, 1), RLX_E_ARG, "rlx_conv2d");
    CHECK_NULL_ERR(rlx_conv2d(img, w, NULL, NULL, (int[]){INT32_MIN, 0}, NULL, 1), RLX_E_ARG, "rlx_conv2d");
    CHECK_NULL_ERR(rlx_conv2d(img, w, NULL, NULL, NULL, (int[]){INT32_MAX, INT32_MAX}, 1), RLX_E_SHAPE,
                   "rlx_conv2d");
    CHECK_NULL_ERR(rlx_conv2d(img, w, NULL, NULL, NULL, NULL, INT32_MIN), RLX_E_ARG, "rlx_conv2d");
    CHECK_NULL_ERR(rlx_conv2d(img, w, NULL, NULL, NULL, NULL, INT32_MAX), RLX_E_SHAPE, "rlx_conv2d");
    CHECK_NULL_ERR(rlx_max_pool2d(img, (int[]){0, 0}, NULL, NULL), RLX_E_ARG, "rlx_max_pool2d");
    CHECK_NULL_ERR(rlx_max_pool2d(img, (int[]){INT32_MAX, INT32_MAX}, NULL, NULL), RLX_E_SHAPE, "rlx_max_pool2d");
    CHECK_NULL_ERR(rlx_avg_pool2d(img, (int[]){2, 2}, (int[]){INT32_MIN, 1}, NULL), RLX_E_ARG, "rlx_avg_pool2d");
    CHECK_NULL_ERR(rlx_avg_pool2d(img, (int[]){2, 2}, NULL, (int[]){INT32_MAX, 0}), RLX_E_ARG, "rlx_avg_pool2d");
    CHECK_NULL_ERR(rlx_attention(q, q, q, 65536, 65536, RLX_MASK_NONE, 0), RLX_E_SHAPE, "rlx_attention");
    CHECK_NULL_ERR(rlx_attention(q, q, q, INT32_MIN, 4, RLX_MASK_NONE, 0), RLX_E_ARG, "rlx_attention");
    CHECK_NULL_ERR(rlx_attention(q, q, q, 1, 4, RLX_MASK_SLIDING, INT32_MIN), RLX_E_ARG, "rlx_attention");
    CHECK_NULL_ERR(rlx_attention(q, q, q, 1, 4, (rlx_mask)INT32_MAX, 1), RLX_E_ARG, "rlx_attention");
    rlx_tensor *cs = rlx_ones(RLX_F32, 2, ((int64_t[]){2, 2}));
    CHECK_NULL_ERR(rlx_rope(q, cs, cs, INT32_MIN), RLX_E_ARG, "rlx_rope");
    CHECK_NULL_ERR(rlx_rope(q, cs, cs, INT32_MAX), RLX_E_ARG, "rlx_rope");
    rlx_tensor *x = rlx_ones(RLX_F32, 2, ((int64_t[]){3, 4}));
    CHECK_NULL_ERR(rlx_scaled_matmul(x, x, RLX_FP8_E4M3, INT32_MIN), RLX_E_ARG, "rlx_scaled_matmul");
    CHECK_NULL_ERR(rlx_scaled_matmul(x, x, (rlx_minifloat)INT32_MAX, 0), RLX_E_ARG, "rlx_scaled_matmul");
    CHECK_NULL_ERR(rlx_spline_activation(x, rlx_ones(RLX_F32, 2, ((int64_t[]){4, 3})), INT32_MAX, 0, 1),
                   RLX_E_SHAPE, "rlx_spline_activation");
    CHECK_NULL_ERR(rlx_spline_activation(x, rlx_ones(RLX_F32, 2, ((int64_t[]){4, 3})), 3, 0, INFINITY), RLX_E_ARG,
                   "rlx_spline_activation");
    CHECK_NULL_ERR(rlx_cast(x, (rlx_dtype)INT32_MIN), RLX_E_DTYPE, "rlx_cast");
    /* a stride and a padding of INT32_MAX are legal: output rows start at
     * input rows -P, 0 and P, and only the window at row 0 is inside */
    for (int b = 0; b < 2; b++) {
        use(backends[b]);
        rlx_tensor *y = rlx_conv2d(img, w, NULL, (int[]){INT32_MAX, 1}, (int[]){INT32_MAX, 0}, NULL, 1);
        EXPECT(y, RLX_F32, 4, ((int64_t[]){1, 1, 3, 3}), ((double[]){0, 0, 0, 4, 4, 4, 0, 0, 0}), 0);
    }
    use("ref");
}

/* ----------------------------------------------------- 10^15 elements */

TEST(peta_tensors_build_lazily_and_fail_to_realize)
{
    const int64_t peta[1] = {PETA};
    const int64_t grid[2] = {1000000, 1000000000};
    for (int b = 0; b < 2; b++) {
        use(backends[b]);
        rlx_scope_begin();
        long live = ir_live_nodes();
        rlx_tensor *z = rlx_zeros(RLX_F32, 1, peta);
        rlx_tensor *r = rlx_rand(RLX_F32, 2, grid, 7);
        rlx_tensor *a = rlx_arange(RLX_F64, 0, 1e15, 1);
        rlx_tensor *bc = rlx_broadcast_to(rlx_scalar(RLX_F32, 1), 1, peta);
        CHECK(z && r && a && bc);
        CHECK_EQ_INT(rlx_numel(z), PETA);
        CHECK_EQ_INT(rlx_numel(r), PETA);
        CHECK_EQ_INT(rlx_numel(a), PETA);
        CHECK(ir_live_nodes() - live < 16); /* building allocates no payload */
        CHECK_EQ_INT(rlx_storage_bytes(z), 0);
        /* a lazy graph over them, with a gradient, builds too */
        rlx_tensor *loss = rlx_sum_all(rlx_mul(rlx_exp(rlx_reshape(z, 2, grid)), r));
        rlx_tensor *g = NULL;
        CHECK(rlx_grad(loss, &r, 1, &g) == RLX_OK && g != NULL);
        CHECK_EQ_INT(rlx_numel(g), PETA);
        /* realizing any elementwise result is out of memory, with nothing read */
        CHECK_ERR(rlx_realize(z), RLX_E_NOMEM, "rlx_realize");
        CHECK_ERR(rlx_realize(rlx_add_s(z, 1)), RLX_E_NOMEM, "rlx_realize");
        CHECK_ERR(rlx_realize(rlx_exp(rlx_reshape(z, 2, grid))), RLX_E_NOMEM, "rlx_realize");
        CHECK_ERR(rlx_realize(rlx_cast(r, RLX_F64)), RLX_E_NOMEM, "rlx_realize");
        CHECK_ERR(rlx_realize(a), RLX_E_NOMEM, "rlx_realize");
        CHECK_ERR(rlx_realize(bc), RLX_E_NOMEM, "rlx_realize");
        CHECK_ERR(rlx_realize(rlx_cumsum(z, 0, false)), RLX_E_NOMEM, "rlx_realize");
        CHECK_ERR(rlx_realize(g), RLX_E_NOMEM, "rlx_realize");
        rlx_tensor *many[2] = {z, r};
        CHECK_ERR(rlx_realize_many(many, 2), RLX_E_NOMEM, "rlx_realize_many");
        float f[4];
        CHECK_ERR(rlx_read_f32(z, f, 4), RLX_E_NOMEM, "rlx_read_f32");
        CHECK_ERR(rlx_data(z), RLX_E_NOMEM, "rlx_data");
        CHECK_NULL_ERR((rlx_tensor *)rlx_to_string(z), RLX_E_NOMEM, "rlx_to_string");
        double d;
        CHECK_ERR(rlx_item(z, &d), RLX_E_SHAPE, "rlx_item");
        CHECK(!rlx_is_realized(z) && !rlx_is_realized(g));
        /* a small view of a huge lazy tensor: the right values or out of memory */
        rlx_tensor *v = rlx_narrow(a, 0, 5, 3);
        rlx_clear_error();
        rlx_status st = rlx_realize(v);
        CHECK(st == RLX_OK || st == RLX_E_NOMEM);
        if (st == RLX_OK)
            expect_values(v, (double[]){5, 6, 7}, 3);
        rlx_clear_error();
        /* and the library is still usable */
        EXPECT(rlx_sum_all(rlx_ones(RLX_F32, 1, (int64_t[]){5})), RLX_F32, 0, NULL, ((double[]){5}), 0);
        rlx_scope_end();
    }
    /* copying 10^15 elements in is out of memory before data is touched */
    CHECK_NULL_ERR(rlx_from_data(RLX_F32, 1, peta, "x"), RLX_E_NOMEM, "rlx_from_data");
    use("ref");
}

/* Impossible work fails fast on every path: plain realize, a compiled
 * program, a gradient (each reports out of memory without touching the
 * 10^15 elements; an alarm turns a hang into a failure). */
static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

TEST(peta_work_fails_fast_on_every_path)
{
    const int64_t peta[1] = {PETA}, one[1] = {1};
    for (int b = 0; b < 2; b++) {
        use(backends[b]);
        rlx_scope_begin();
        alarm(120); /* a hang fails the test (the default action ends it) */
        double t0 = seconds_now();
        /* plain realize */
        CHECK_ERR(rlx_realize(rlx_sum_all(rlx_rand(RLX_F32, 1, peta, 3))), RLX_E_NOMEM, "rlx_realize");
        double t1 = seconds_now();
        /* a program over rand(10^15): the compile or the run says so */
        rlx_tensor *x = rlx_input("x", RLX_F32, 1, one);
        rlx_tensor *out = rlx_add(rlx_sum_all(rlx_rand(RLX_F32, 1, peta, 4)), x);
        rlx_clear_error();
        rlx_program *p = rlx_compile(&out, 1);
        if (!p) {
            CHECK_EQ_INT(rlx_last_status(), RLX_E_NOMEM);
        } else {
            rlx_binding bind = {"x", rlx_ones(RLX_F32, 1, one)};
            rlx_tensor *res = NULL;
            CHECK_ERR(rlx_program_run(p, &bind, 1, &res), RLX_E_NOMEM, "rlx_program_run");
            CHECK(res == NULL);
            rlx_program_free(p);
        }
        double t2 = seconds_now();
        /* a gradient through a 10^15-element sum: built lazily, realizing it fails */
        rlx_tensor *w = rlx_scalar(RLX_F32, 2);
        CHECK_EQ_INT(rlx_realize(w), RLX_OK);
        rlx_tensor *loss = rlx_sum_all(rlx_mul(rlx_rand(RLX_F32, 1, peta, 5), w)), *g = NULL;
        CHECK_EQ_INT(rlx_grad(loss, &w, 1, &g), RLX_OK);
        CHECK_ERR(rlx_realize(g), RLX_E_NOMEM, "rlx_realize");
        double t3 = seconds_now();
        alarm(0);
        printf("    %s: realize %.3f s, program %.3f s, gradient %.3f s\n", backends[b], t1 - t0, t2 - t1, t3 - t2);
        rlx_clear_error();
        EXPECT(rlx_sum_all(rlx_ones(RLX_F32, 1, (int64_t[]){5})), RLX_F32, 0, NULL, ((double[]){5}), 0);
        rlx_scope_end();
    }
    use("ref");
}

/* ------------------------------------------------------------ deep chains */

enum { CHAIN = 100000 };

/* x -> add 1 -> mul 1 -> sub 0.5 -> max(-1e9) -> ... : x + CHAIN/8 at the end */
static rlx_tensor *chain(rlx_tensor *x, int n, bool mixed)
{
    rlx_tensor *y = own(rlx_retain(x));
    for (int i = 0; i < n && y; i++) {
        rlx_tensor *z;
        switch (mixed ? i % 4 : 0) {
        case 0: z = rlx_add_s(y, 1); break;
        case 1: z = rlx_mul_s(y, 1); break;
        case 2: z = rlx_sub_s(y, 0.5); break;
        default: z = rlx_maximum_s(y, -1e9); break;
        }
        own(z);
        rlx_release(y);
        y = z;
    }
    return y;
}

/* A chain the simplifier cannot fold (y*c, y + a*d alternating, a realized):
 * the scheduler cuts it into kernels in one plan (a re-plan per cut made
 * it quadratic: 16 s at 100k); value and gradient on the JIT. */
TEST(unfoldable_chain_of_100000_on_the_jit)
{
    use("jit");
    rlx_scope_begin();
    double xv[4] = {1, 2, 3, 4}, av[4] = {0.5, -1, 2, 0}, want[4];
    rlx_tensor *x = rlx_from_data(RLX_F64, 1, (int64_t[]){4}, xv);
    rlx_tensor *a = rlx_from_data(RLX_F64, 1, (int64_t[]){4}, av);
    rlx_tensor *y = x;
    double dydx = 1;
    memcpy(want, xv, sizeof want);
    for (int i = 0; i < CHAIN && y; i++) {
        y = i % 2 ? rlx_mul_s(y, 0.999999) : rlx_add(y, rlx_mul_s(a, 1e-6));
        for (int k = 0; k < 4; k++)
            want[k] = i % 2 ? want[k] * 0.999999 : want[k] + av[k] * 1e-6;
        if (i % 2)
            dydx *= 0.999999;
    }
    CHECK(y != NULL);
    double got[4];
    CHECK_EQ_INT(rlx_read_f64(y, got, 4), RLX_OK);
    for (int k = 0; k < 4; k++)
        CHECK_NEAR(got[k], want[k], 1e-12 * fabs(want[k]) + 1e-15);
    rlx_tensor *g = NULL;
    CHECK_EQ_INT(rlx_grad(rlx_sum_all(y), &x, 1, &g), RLX_OK);
    CHECK_EQ_INT(rlx_read_f64(g, got, 4), RLX_OK);
    for (int k = 0; k < 4; k++)
        CHECK_NEAR(got[k], dydx, 1e-12);
    rlx_scope_end();
    use("ref");
}

TEST(chain_of_100000_ops)
{
    long live = ir_live_nodes();
    rlx_tensor *x = own(rlx_from_data(RLX_F64, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4}));
    rlx_tensor *y = chain(x, CHAIN, false);
    CHECK(y != NULL);
    CHECK(ir_live_nodes() - live >= CHAIN);
    /* realized on the reference backend, then a second copy on the JIT */
    use("ref");
    expect_values(y, (double[]){1 + CHAIN, 2 + CHAIN, 3 + CHAIN, 4 + CHAIN}, 4);
    rlx_tensor *x2 = own(rlx_from_data(RLX_F64, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4}));
    rlx_tensor *y2 = chain(x2, CHAIN, false);
    use("jit");
    expect_values(y2, (double[]){1 + CHAIN, 2 + CHAIN, 3 + CHAIN, 4 + CHAIN}, 4);
    use("ref");
    rlx_release(y2);
    rlx_release(x2);
    /* autodiff through a mixed chain: d sum(y) / dx = 1 */
    rlx_tensor *ym = chain(x, CHAIN, true);
    rlx_tensor *loss = own(rlx_sum_all(ym)), *g = NULL;
    CHECK(rlx_grad(loss, &x, 1, &g) == RLX_OK);
    own(g);
    expect_values(g, (double[]){1, 1, 1, 1}, 4);
    expect_values(ym, (double[]){1 + CHAIN / 8, 2 + CHAIN / 8, 3 + CHAIN / 8, 4 + CHAIN / 8}, 4);
    rlx_release(g);
    rlx_release(loss);
    rlx_release(ym);
    /* released in one call: no recursion */
    rlx_release(y);
    rlx_release(x);
    CHECK_EQ_INT(ir_live_nodes(), live);
}

TEST(chain_of_100000_in_scopes_and_programs)
{
    long live = ir_live_nodes();
    /* every handle of the chain recorded in one scope, released at its end */
    rlx_scope_begin();
    rlx_tensor *y = rlx_ones(RLX_F32, 1, (int64_t[]){3});
    for (int i = 0; i < CHAIN && y; i++)
        y = rlx_sub_s(rlx_mul_s(y, 1), -1); /* two handles a step */
    expect_values(y, (double[]){1 + CHAIN, 1 + CHAIN, 1 + CHAIN}, 3);
    rlx_scope_end();
    CHECK_EQ_INT(ir_live_nodes(), live);
    /* a program of a 100,000-op chain compiles and runs */
    rlx_tensor *in = own(rlx_input("x", RLX_F64, 1, (int64_t[]){2}));
    rlx_tensor *out = chain(in, CHAIN, true);
    rlx_program *p = rlx_compile(&out, 1);
    CHECK(p != NULL);
    rlx_release(out);
    rlx_release(in);
    rlx_tensor *v = own(rlx_from_data(RLX_F64, 1, (int64_t[]){2}, (double[]){10, 20}));
    rlx_tensor *res = NULL;
    CHECK(rlx_program_run(p, &(rlx_binding){"x", v}, 1, &res) == RLX_OK);
    own(res);
    expect_values(res, (double[]){10 + CHAIN / 8, 20 + CHAIN / 8}, 2);
    CHECK(rlx_dump_dot(res, "/dev/null") == RLX_OK);
    rlx_release(res);
    rlx_release(v);
    rlx_program_free(p);
    CHECK_EQ_INT(ir_live_nodes(), live);
}

/* ------------------------------------------------- gather out of range */

TEST(gather_out_of_range)
{
    for (int b = 0; b < 2; b++) {
        use(backends[b]);
        rlx_scope_begin();
        rlx_tensor *x = rlx_arange(RLX_F32, 0, 4, 1);
        const int64_t bad64[] = {4, -5, INT64_MAX, INT64_MIN, INT64_MIN + 1, (int64_t)1 << 32};
        for (size_t i = 0; i < sizeof bad64 / sizeof *bad64; i++) {
            rlx_tensor *idx = rlx_from_data(RLX_I64, 1, (int64_t[]){2}, (int64_t[]){0, bad64[i]});
            rlx_tensor *g = rlx_gather(x, idx, 0);
            CHECK(g != NULL); /* found only when running */
            CHECK_ERR(rlx_realize(g), RLX_E_ARG, "rlx_realize");
            CHECK(!rlx_is_realized(g));
            double v[2];
            CHECK_ERR(rlx_read_f64(g, v, 2), RLX_E_ARG, "rlx_read_f64");
            /* inside a fused expression, and through index_select */
            CHECK_ERR(rlx_realize(rlx_add_s(rlx_exp(g), 1)), RLX_E_ARG, "rlx_realize");
            CHECK_ERR(rlx_realize(rlx_index_select(x, 0, idx)), RLX_E_ARG, "rlx_realize");
        }
        const int32_t bad32[] = {4, -5, INT32_MAX, INT32_MIN};
        for (size_t i = 0; i < sizeof bad32 / sizeof *bad32; i++) {
            rlx_tensor *idx = rlx_from_data(RLX_I32, 2, ((int64_t[]){1, 2}), (int32_t[]){-4, bad32[i]});
            CHECK_ERR(rlx_realize(rlx_gather(x, idx, 0)), RLX_E_ARG, "rlx_realize");
        }
        /* indices computed lazily: arange(0, 5) reaches 4 */
        rlx_tensor *comp = rlx_cast(rlx_arange(RLX_F32, 0, 5, 1), RLX_I64);
        CHECK_ERR(rlx_realize(rlx_gather(x, comp, 0)), RLX_E_ARG, "rlx_realize");
        /* a gather of a gather, where only the inner one is out of range */
        rlx_tensor *inner = rlx_gather(x, rlx_from_data(RLX_I64, 1, (int64_t[]){1}, (int64_t[]){9}), 0);
        rlx_tensor *outer = rlx_gather(inner, rlx_from_data(RLX_I64, 1, (int64_t[]){1}, (int64_t[]){0}), 0);
        CHECK_ERR(rlx_realize(outer), RLX_E_ARG, "rlx_realize");
        /* on a 2-D tensor along each axis */
        rlx_tensor *m = rlx_reshape(rlx_arange(RLX_F64, 0, 6, 1), 2, ((int64_t[]){2, 3}));
        rlx_tensor *i3 = rlx_from_data(RLX_I64, 1, (int64_t[]){1}, (int64_t[]){3});
        CHECK_ERR(rlx_realize(rlx_gather(m, i3, 1)), RLX_E_ARG, "rlx_realize");
        CHECK_ERR(rlx_realize(rlx_gather(m, i3, 0)), RLX_E_ARG, "rlx_realize");
        EXPECT(rlx_gather(m, rlx_from_data(RLX_I64, 1, (int64_t[]){1}, (int64_t[]){-1}), 1), RLX_F64, 2,
               ((int64_t[]){2, 1}), ((double[]){2, 5}), 0);
        /* valid negative indices count from the end */
        rlx_tensor *neg = rlx_from_data(RLX_I64, 1, (int64_t[]){3}, (int64_t[]){-1, -4, 0});
        EXPECT(rlx_gather(x, neg, 0), RLX_F32, 1, ((int64_t[]){3}), ((double[]){3, 0, 0}), 0);
        /* the one-hot label forms */
        rlx_tensor *logits = rlx_zeros(RLX_F32, 2, ((int64_t[]){2, 3}));
        rlx_tensor *lab = rlx_from_data(RLX_I64, 1, (int64_t[]){2}, (int64_t[]){0, 3});
        CHECK_ERR(rlx_realize(rlx_softmax_cross_entropy_with_logits(logits, lab)), RLX_E_ARG, "rlx_realize");
        rlx_tensor *labn = rlx_from_data(RLX_I64, 1, (int64_t[]){2}, (int64_t[]){0, -1});
        CHECK_ERR(rlx_realize(rlx_softmax_cross_entropy_with_logits(logits, labn)), RLX_E_ARG, "rlx_realize");
        rlx_tensor *code = rlx_ones(RLX_F32, 2, ((int64_t[]){2, 2}));
        rlx_tensor *sidx = rlx_from_data(RLX_I32, 2, ((int64_t[]){1, 2}), (int32_t[]){0, INT32_MIN});
        CHECK_ERR(rlx_realize(rlx_synth_reconstruct(sidx, code)), RLX_E_ARG, "rlx_realize");
        CHECK_ERR(rlx_realize(rlx_synth_matmul(rlx_ones(RLX_F32, 2, ((int64_t[]){1, 4})), sidx, code)), RLX_E_ARG,
                  "rlx_realize");
        /* a program whose bound indices are out of range */
        rlx_tensor *pin = rlx_input("i", RLX_I64, 1, (int64_t[]){2});
        rlx_tensor *pout = rlx_gather(x, pin, 0);
        rlx_program *p = rlx_compile(&pout, 1);
        rlx_tensor *res = NULL;
        CHECK_ERR(rlx_program_run(p, &(rlx_binding){"i", rlx_from_data(RLX_I64, 1, (int64_t[]){2}, (int64_t[]){1, 7})},
                                  1, &res),
                  RLX_E_ARG, "rlx_program_run");
        CHECK(res == NULL);
        CHECK(rlx_program_run(p, &(rlx_binding){"i", neg}, 1, &res) == RLX_E_SHAPE || res == NULL);
        rlx_clear_error();
        CHECK(rlx_program_run(p, &(rlx_binding){"i", rlx_from_data(RLX_I64, 1, (int64_t[]){2}, (int64_t[]){1, -1})}, 1,
                              &res) == RLX_OK);
        EXPECT(res, RLX_F32, 1, ((int64_t[]){2}), ((double[]){1, 3}), 0);
        rlx_program_free(p);
        rlx_scope_end();
    }
    use("ref");
}

/* ---------------------------------------------------------- known bugs */

/* Results of ops whose byte size overflows are accepted today: ir_make
 * (src/ir/node.c) never checks ir_shape_bytes_ok on the shape ir_infer
 * returns, so broadcasts, matmul, gather, cat/stack and dtype-widening ops
 * build tensors of 2^64+ bytes; numel overflows (UB in ir_numel,
 * shape.c:19), ir_node_bytes wraps, and realizing one writes past a
 * too-small buffer (heap overflow, both backends). cat also overflows
 * its length sum (shape.c:300). */
TEST(results_overflow)
{
    rlx_tensor *a = rlx_zeros(RLX_BOOL, 2, ((int64_t[]){G32, 1}));
    rlx_tensor *b = rlx_zeros(RLX_BOOL, 2, ((int64_t[]){1, G32}));
    CHECK_NULL_ERR(rlx_add(a, b), RLX_E_SHAPE, "rlx_add");
    CHECK_NULL_ERR(rlx_where(a, rlx_zeros(RLX_F32, 2, ((int64_t[]){1, G32})), rlx_scalar(RLX_F32, 0)), RLX_E_SHAPE,
                   "rlx_where");
    CHECK_NULL_ERR(rlx_matmul(rlx_zeros(RLX_F32, 2, ((int64_t[]){G32, 1})), rlx_zeros(RLX_F32, 2, ((int64_t[]){1, G32}))),
                   RLX_E_SHAPE, "rlx_matmul");
    rlx_tensor *x = rlx_zeros(RLX_BOOL, 2, ((int64_t[]){2, (int64_t)1 << 40}));
    CHECK_NULL_ERR(rlx_gather(x, rlx_zeros(RLX_I64, 1, (int64_t[]){(int64_t)1 << 40}), 0), RLX_E_SHAPE, "rlx_gather");
    rlx_tensor *big = rlx_zeros(RLX_BOOL, 1, (int64_t[]){P62});
    CHECK_NULL_ERR(rlx_cat((rlx_tensor *[]){big, big}, 2, 0), RLX_E_SHAPE, "rlx_cat");
    CHECK_NULL_ERR(rlx_stack((rlx_tensor *[]){big, big, big, big}, 4, 0), RLX_E_SHAPE, "rlx_stack");
    CHECK_NULL_ERR(rlx_cast(big, RLX_F32), RLX_E_SHAPE, "rlx_cast");
    CHECK_NULL_ERR(rlx_exp(big), RLX_E_SHAPE, "rlx_exp");
    CHECK_NULL_ERR(rlx_cumsum(big, 0, false), RLX_E_SHAPE, "rlx_cumsum");
    CHECK_NULL_ERR(rlx_fft(big), RLX_E_SHAPE, "rlx_fft");
    rlx_tensor *q = rlx_zeros(RLX_F32, 3, ((int64_t[]){1, G32, 4}));
    CHECK_NULL_ERR(rlx_attention(q, q, q, 1, 4, RLX_MASK_NONE, 0), RLX_E_SHAPE, "rlx_attention");
    /* the heap overflow itself: 2^62 bools cast to f32 are 2^64 bytes */
    for (int i = 0; i < 2; i++) {
        use(backends[i]);
        rlx_tensor *f = rlx_cast(rlx_broadcast_to(rlx_scalar(RLX_BOOL, 1), 1, (int64_t[]){P62}), RLX_F32);
        rlx_clear_error();
        if (f)
            CHECK(rlx_realize(f) != RLX_OK);
        rlx_clear_error();
    }
    use("ref");
}

/* Empty tensors may have huge other dims ([6, 2^62, 0] is accepted), but
 * ir_numel (shape.c:19) multiplies them before it meets the 0 (signed
 * overflow), rt_contiguous_strides (ref_eval.c:30) overflows, and work
 * proportional to the product of the nonzero dims follows: rlx_to_string
 * prints 2^40 "[]" (format.c put_axis), cumsum loops 2^40 times
 * (ref_movement.c:164). */
TEST(empty_tensors_with_huge_dims)
{
    for (int i = 0; i < 2; i++) {
        use(backends[i]);
        rlx_scope_begin();
        rlx_clear_error();
        rlx_tensor *e = rlx_zeros(RLX_F32, 3, ((int64_t[]){6, P62, 0}));
        if (e) { /* accepted: it must then behave as an empty tensor */
            CHECK_EQ_INT(rlx_numel(e), 0);
            CHECK(rlx_realize(rlx_add_s(e, 1)) == RLX_OK);
            CHECK(rlx_realize(rlx_cumsum(e, 1, false)) == RLX_OK);
        } else {
            CHECK_EQ_INT(rlx_last_status(), RLX_E_SHAPE);
        }
        rlx_clear_error();
        rlx_tensor *w = rlx_zeros(RLX_F32, 2, ((int64_t[]){(int64_t)1 << 40, 0}));
        CHECK(w != NULL);
        char *s = rlx_to_string(w);
        CHECK(s != NULL && strlen(s) < 1000);
        free(s);
        CHECK(rlx_realize(rlx_cumsum(w, 1, false)) == RLX_OK);
        rlx_scope_end();
    }
    use("ref");
}

/* A chain of 100,000 views realized by the JIT: chain_view
 * (src/runtime/jit_exec.c) once recursed per movement op of a VIEW
 * kernel's chain and overflowed the stack. */
TEST(view_chain_of_100000_on_the_jit)
{
    use("jit");
    rlx_tensor *x = own(rlx_from_data(RLX_F64, 2, ((int64_t[]){2, 2}), (double[]){1, 2, 3, 4}));
    rlx_tensor *y = own(rlx_retain(x));
    for (int i = 0; i < CHAIN; i++) {
        rlx_tensor *z = own(rlx_flip(y, i % 2));
        rlx_release(y);
        y = z;
    }
    expect_values(y, (double[]){1, 2, 3, 4}, 4);
    rlx_release(y);
    rlx_release(x);
    use("ref");
}

/* mean/var/std/norm of an integer tensor dereference NULL when the cast
 * to f32 fails (out of memory): stat_begin does not check it and
 * mean_mask -> reduced_count reads ts_node(NULL) (src/tensor/reduce.c:98,
 * :115). rlx_from_blob leaks its 16-byte deleter record when the buffer
 * node cannot be made (construct.c: st->free_fn = NULL skips free_user). */
TEST(allocation_failures)
{
    rlx_tensor *x = rlx_ones(RLX_I32, 1, (int64_t[]){4});
    long live = ir_live_nodes();
    for (long n = 0; n < 64; n++) {
        rlx_clear_error();
        ir_alloc_fail_after(n);
        rlx_tensor *m = own(rlx_mean(x, NULL, 0, false));
        rlx_tensor *v = own(rlx_var(x, NULL, 0, false));
        float data[2] = {1, 2};
        rlx_tensor *blob = own(rlx_from_blob(RLX_F32, 1, (int64_t[]){2}, data, NULL, NULL));
        ir_alloc_fail_after(-1);
        rlx_release(m);
        rlx_release(v);
        rlx_release(blob);
    }
    rlx_clear_error();
    CHECK_EQ_INT(ir_live_nodes(), live);
}

/* rlx_to_string of a float that an int64 cannot hold converts it anyway:
 * (int64_t)v with v = inf or 9.3e18 is undefined (format.c:62; clang's
 * -fsanitize=float-cast-overflow reports it, GCC's -fsanitize=undefined
 * does not include that check). */
TEST(to_string_of_huge_floats)
{
    const double vals[] = {INFINITY, -INFINITY, 9.3e18, -1e300};
    for (int i = 0; i < 4; i++) {
        char *s = rlx_to_string(rlx_scalar(RLX_F64, vals[i]));
        CHECK(s != NULL);
        free(s);
    }
}

/* ------------------------------------------- scopes opened at depth 0 */
/* The tests run inside the harness's scope, so the scope stack of their
 * thread never has to grow; rlx-soak's rounds each open the first scope of
 * the main thread, whose stack is freed when the last scope closes, so
 * every round's first allocation was the stack. When it failed, the round
 * went on unscoped and leaked its whole graph (live nodes crept up over a
 * 30-minute soak). These run on a fresh thread, where no scope is open. */

typedef struct {
    void (*fn)(void);
} thread_job;

static void *thread_main(void *job)
{
    ((thread_job *)job)->fn();
    return NULL;
}

static void run_on_fresh_thread(void (*fn)(void))
{
    pthread_t th;
    thread_job job = {fn};
    if (pthread_create(&th, NULL, thread_main, &job) != 0) {
        test_fail(__FILE__, __LINE__, "pthread_create failed");
        return;
    }
    pthread_join(th, NULL);
}

/* A soak round's graph over x (r x c): the ops rlx-soak draws. */
static rlx_tensor *soak_graph(rlx_tensor *x, int64_t r, int64_t c)
{
    rlx_tensor *y = rlx_add(rlx_mul_s(rlx_tanh(x), 0.75), x);
    y = rlx_exp(rlx_minimum_s(y, 4));
    y = rlx_softmax(y, -1);
    y = rlx_add(y, rlx_sum(y, (int[]){1}, 1, true));
    y = rlx_mul(y, rlx_sum(y, (int[]){0}, 1, true));
    y = rlx_transpose(rlx_add_s(rlx_transpose(y, 2, (int[]){1, 0}), 1), 2, (int[]){1, 0});
    y = rlx_reshape(rlx_tanh(rlx_reshape(y, 1, (int64_t[]){r * c})), 2, (int64_t[]){r, c});
    y = rlx_matmul(y, rlx_transpose(rlx_add_s(x, 0.25), 2, (int[]){1, 0}));
    return rlx_mul_s(rlx_matmul(y, x), 1.0 / (double)(r * c));
}

static uint64_t round_seed;

/* internal: runtime/exec/jit_exec.h */
typedef struct {
    uint64_t hits, misses, built, evicted;
    long entries, nodes;
} rt_plan_cache_counts;
void rt_plan_cache_counts_get(rt_plan_cache_counts *out);

static int realize_round(void)
{
    rlx_scope_begin();
    rlx_tensor *y = soak_graph(rlx_rand(RLX_F32, 2, (int64_t[]){3, 5}, ++round_seed), 3, 5);
    int ok = rlx_realize(y) == RLX_OK;
    rlx_scope_end();
    return ok;
}

static int realize_many_round(void)
{
    rlx_scope_begin();
    rlx_tensor *x = rlx_rand(RLX_F32, 2, (int64_t[]){4, 2}, ++round_seed);
    rlx_tensor *ys[2] = {soak_graph(x, 4, 2), rlx_softmax(rlx_exp(x), 0)};
    int ok = rlx_realize_many(ys, 2) == RLX_OK;
    rlx_scope_end();
    return ok;
}

static int program_round(void)
{
    rlx_scope_begin();
    rlx_tensor *y = soak_graph(rlx_input("x", RLX_F32, 2, (int64_t[]){2, 6}), 2, 6);
    rlx_program *p = rlx_compile(&y, 1);
    int ok = p != NULL;
    for (int k = 0; k < 2 && ok; k++) {
        rlx_binding b = {"x", rlx_rand(RLX_F32, 2, (int64_t[]){2, 6}, ++round_seed)};
        rlx_tensor *out = NULL;
        ok = rlx_program_run(p, &b, 1, &out) == RLX_OK && rlx_realize(out) == RLX_OK;
    }
    rlx_program_free(p);
    rlx_scope_end();
    return ok;
}

static int grad_round(void)
{
    rlx_scope_begin();
    rlx_tensor *x = rlx_rand(RLX_F32, 2, (int64_t[]){3, 4}, ++round_seed);
    rlx_tensor *loss = rlx_sum(soak_graph(x, 3, 4), (int[]){0, 1}, 2, false);
    rlx_tensor *g = NULL;
    int ok = rlx_grad(loss, &x, 1, &g) == RLX_OK && rlx_realize(g) == RLX_OK;
    rlx_scope_end();
    return ok;
}

/* The same structure three times on new data: cached the second time,
 * a plan-cache hit the third. */
static int plan_cache_round(void)
{
    rlx_scope_begin();
    int ok = 1;
    for (int k = 0; k < 3 && ok; k++) {
        float v[6] = {1, 2, 3, 4, 5, (float)k}; /* a realized leaf: new data, one structure */
        rlx_tensor *y = rlx_tanh(rlx_add_s(rlx_from_data(RLX_F32, 2, (int64_t[]){2, 3}, v), 1));
        ok = rlx_realize(rlx_sum(rlx_mul(y, y), (int[]){1}, 1, true)) == RLX_OK;
    }
    rlx_scope_end();
    return ok;
}

static void walk_realize(void) { ALLOC_WALK(realize_round, 20); }
static void walk_realize_many(void) { ALLOC_WALK(realize_many_round, 20); }
static void walk_program(void) { ALLOC_WALK(program_round, 20); }
static void walk_grad(void) { ALLOC_WALK(grad_round, 20); }
static void walk_plan_cache(void) { ALLOC_WALK(plan_cache_round, 10); }

/* Every allocation of a soak round fails in turn, the scope's own first:
 * each failed round releases everything it took (ALLOC_WALK checks the
 * live nodes after each). */
TEST(allocation_failures_in_unscoped_rounds)
{
    char backend[16] = "jit";
    rlx_get_option("backend", backend, sizeof backend);
    use("jit");
    long before = ir_live_nodes();
    rt_plan_cache_counts c0, c1;
    rt_plan_cache_counts_get(&c0);
    run_on_fresh_thread(walk_realize);
    run_on_fresh_thread(walk_realize_many);
    run_on_fresh_thread(walk_program);
    run_on_fresh_thread(walk_grad);
    run_on_fresh_thread(walk_plan_cache);
    rt_plan_cache_counts_get(&c1);
    CHECK(c1.hits > c0.hits); /* the plan-cache workload hit */
    CHECK_EQ_INT(ir_live_nodes(), before);
    use(backend);
}

/* A failed rlx_scope_begin is still closed by its rlx_scope_end, and no
 * handle is handed out in between (nothing would release it). */
static void failed_scope_body(void)
{
    rlx_tensor *outer = rlx_ones(RLX_F32, 1, (int64_t[]){2}); /* unscoped: the caller's */
    long live = ir_live_nodes();
    rlx_clear_error();
    ir_alloc_fail_after(0); /* the stack's first allocation */
    rlx_scope_begin();
    ir_alloc_fail_after(-1);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_NOMEM);
    CHECK(strstr(rlx_last_error(), "rlx_scope_begin") != NULL);
    CHECK_NULL_ERR(rlx_ones(RLX_F32, 1, (int64_t[]){3}), RLX_E_NOMEM, "rlx_scope");
    CHECK_NULL_ERR(rlx_add(outer, outer), RLX_E_NOMEM, "rlx_scope");
    CHECK_NULL_ERR(rlx_retain(outer), RLX_E_NOMEM, "rlx_scope");
    CHECK_NULL_ERR(rlx_softmax(outer, 0), RLX_E_NOMEM, "rlx_softmax"); /* a composite cannot open */
    rlx_tensor *g = outer;
    CHECK_ERR(rlx_grad(rlx_sum(outer, NULL, 0, false), &outer, 1, &g), RLX_E_NOMEM, "rlx_scope");
    CHECK(g == NULL);
    CHECK(rlx_escape(outer) == outer); /* not in the unopened scope: unchanged */
    rlx_clear_error();
    rlx_scope_begin(); /* nested in the failed one: fails too */
    CHECK_EQ_INT(rlx_last_status(), RLX_E_NOMEM);
    rlx_scope_end();
    CHECK_NULL_ERR(rlx_ones(RLX_F32, 1, (int64_t[]){3}), RLX_E_NOMEM, "rlx_scope");
    rlx_clear_error();
    rlx_scope_end(); /* closes the failed scope: no RLX_E_ARG */
    CHECK_EQ_INT(rlx_last_status(), RLX_OK);
    CHECK_EQ_INT(ir_live_nodes(), live);
    rlx_scope_end(); /* nothing is open now */
    CHECK_EQ_INT(rlx_last_status(), RLX_E_ARG);
    rlx_clear_error();
    /* handles come again, scoped and not */
    rlx_scope_begin();
    CHECK(rlx_add(outer, outer) != NULL);
    rlx_scope_end();
    rlx_tensor *y = rlx_add(outer, outer);
    double v[2] = {0};
    CHECK(rlx_read_f64(y, v, 2) == RLX_OK && v[0] == 2 && v[1] == 2);
    rlx_release(y);
    rlx_release(outer);
}

TEST(failed_scope_begin_hands_out_nothing) { run_on_fresh_thread(failed_scope_body); }

TEST_MAIN(T(element_count_overflow), T(byte_size_overflow), T(rank_above_8), T(extreme_axes_and_offsets),
          T(extreme_nn_parameters), T(peta_tensors_build_lazily_and_fail_to_realize),
          T(peta_work_fails_fast_on_every_path), T(unfoldable_chain_of_100000_on_the_jit), T(chain_of_100000_ops),
          T(chain_of_100000_in_scopes_and_programs), T(gather_out_of_range), T(results_overflow),
          T(empty_tensors_with_huge_dims), T(view_chain_of_100000_on_the_jit),
          T(allocation_failures), T(to_string_of_huge_floats), T(allocation_failures_in_unscoped_rounds),
          T(failed_scope_begin_hands_out_nothing))
