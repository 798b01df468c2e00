/* test_core.c — lifecycle, scopes, introspection, constructors, the graph. */
#include "harness.h"

#include <pthread.h>

long ir_live_nodes(void);

TEST(version_and_names)
{
    CHECK(strcmp(rlx_version(), RLX_VERSION_STRING) == 0);
    const char *names[] = {"bool", "i32", "i64", "f32", "f64"};
    for (int i = 0; i < 5; i++)
        CHECK(strcmp(rlx_dtype_name((rlx_dtype)i), names[i]) == 0);
    CHECK(strcmp(rlx_dtype_name((rlx_dtype)13), "?") == 0);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_ARG);
    rlx_clear_error();
    CHECK_EQ_INT(rlx_last_status(), RLX_OK);
    CHECK(strcmp(rlx_last_error(), "") == 0);
    CHECK(strstr(rlx_host_info(), "LLVM 19") != NULL);
    CHECK(strstr(rlx_host_info(), ", OpenBLAS ") != NULL); /* its kernel choice */
}

TEST(retain_release_and_scopes)
{
    rlx_scope_end(); /* close the harness's scope so escapes reach the caller */
    long live = ir_live_nodes();
    rlx_scope_begin();
    rlx_tensor *a = rlx_ones(RLX_F32, 1, (int64_t[]){3});
    rlx_tensor *b = rlx_add(a, a);
    rlx_tensor *kept = rlx_escape(rlx_mul_s(b, 2));
    rlx_retain(a); /* recorded too: released by the scope */
    rlx_scope_end();
    CHECK_EQ_INT(ir_live_nodes(), live + 4); /* kept = mul(add(ones, ones), const) keeps 4 nodes alive */
    EXPECT(kept, RLX_F32, 1, ((int64_t[]){3}), ((double[]){4, 4, 4}), 0);
    rlx_release(kept);
    CHECK_EQ_INT(ir_live_nodes(), live);
    rlx_release(NULL); /* no-op */
    CHECK(rlx_retain(NULL) == NULL);
    /* Nested scopes: escape moves one level up only. */
    rlx_scope_begin();
    rlx_scope_begin();
    rlx_tensor *inner = rlx_escape(rlx_zeros(RLX_I32, 0, NULL));
    rlx_scope_end();
    CHECK_EQ_INT(rlx_rank(inner), 0); /* still alive in the outer scope */
    rlx_scope_end();
    CHECK_EQ_INT(ir_live_nodes(), live);
    /* Escaping a handle that is not in the scope returns it unchanged. */
    rlx_tensor *outside = rlx_zeros(RLX_F64, 0, NULL);
    rlx_scope_begin();
    CHECK(rlx_escape(outside) == outside);
    rlx_scope_end();
    CHECK_EQ_INT(rlx_rank(outside), 0);
    rlx_release(outside);
    CHECK_EQ_INT(ir_live_nodes(), live);
    rlx_scope_begin();
}

TEST(scope_end_without_scope)
{
    rlx_scope_end(); /* closes the test's own scope: reopen it so the harness can close it */
    rlx_clear_error();
    rlx_scope_end();
    CHECK_EQ_INT(rlx_last_status(), RLX_E_ARG);
    CHECK(strncmp(rlx_last_error(), "rlx_scope_end", 13) == 0);
    rlx_clear_error();
    rlx_scope_begin();
}

TEST(introspection)
{
    const int64_t shape[3] = {2, 0, 5};
    rlx_tensor *t = rlx_zeros(RLX_I64, 3, shape);
    CHECK_EQ_INT(rlx_dtype_of(t), RLX_I64);
    CHECK_EQ_INT(rlx_rank(t), 3);
    CHECK_EQ_INT(rlx_dim(t, -1), 5);
    CHECK_EQ_INT(rlx_dim(t, 1), 0);
    CHECK_EQ_INT(rlx_numel(t), 0);
    int64_t out[2] = {-7, -7};
    CHECK_EQ_INT(rlx_shape(t, out, 2), 3);
    CHECK_EQ_INT(out[0], 2);
    CHECK_EQ_INT(out[1], 0);
    CHECK_EQ_INT(rlx_shape(t, NULL, 0), 3);
    CHECK(!rlx_is_realized(t));
    CHECK_EQ_INT(rlx_realize(t), RLX_OK);
    CHECK(rlx_is_realized(t));
    CHECK_ERR(rlx_dim(t, 3), RLX_E_ARG, "rlx_dim");
    CHECK_ERR(rlx_dim(t, -4), RLX_E_ARG, "rlx_dim");
    CHECK_ERR(rlx_shape(t, NULL, 3), RLX_E_ARG, "rlx_shape");
    CHECK_ERR(rlx_dtype_of(NULL), RLX_E_ARG, "rlx_dtype_of");
    CHECK_ERR(rlx_rank(NULL), RLX_E_ARG, "rlx_rank");
    CHECK_ERR(rlx_numel(NULL), RLX_E_ARG, "rlx_numel");
    CHECK_ERR(rlx_is_realized(NULL), RLX_E_ARG, "rlx_is_realized");
    CHECK_ERR(rlx_shares_storage(NULL, t), RLX_E_ARG, "rlx_shares_storage");
    CHECK_ERR(rlx_storage_bytes(NULL), RLX_E_ARG, "rlx_storage_bytes");
    CHECK_EQ_INT(rlx_rank(NULL), -1);
    rlx_clear_error();
}

TEST(storage_sharing)
{
    const int64_t s[2] = {256, 1024};
    rlx_tensor *base = rlx_zeros(RLX_F32, 2, s);
    CHECK_EQ_INT(rlx_storage_bytes(base), 0); /* lazy: nothing held yet */
    rlx_realize(base);
    CHECK_EQ_INT(rlx_storage_bytes(base), 1 << 20);
    rlx_tensor *v = rlx_slice(rlx_t(base), 0, 1, 100, 3);
    CHECK(rlx_shares_storage(v, base));
    CHECK_EQ_INT(rlx_storage_bytes(v), 1 << 20);
    rlx_tensor *other = rlx_ones(RLX_F32, 2, s);
    rlx_realize(other);
    CHECK(!rlx_shares_storage(other, base));
    rlx_tensor *both = rlx_add(base, other);
    CHECK(rlx_shares_storage(both, base) && rlx_shares_storage(both, other));
    CHECK_EQ_INT(rlx_storage_bytes(both), 2 << 20);
}

TEST(from_data_every_dtype)
{
    const int64_t s[2] = {2, 2};
    unsigned char b[4] = {1, 0, 0, 1};
    int32_t i[4] = {-1, 2, INT32_MAX, INT32_MIN};
    int64_t l[4] = {INT64_MAX, -5, 0, 7};
    float f[4] = {0.5f, -0.0f, INFINITY, NAN};
    double d[4] = {1e300, -2.5, 3, -4};
    const void *data[5] = {b, i, l, f, d};
    size_t sizes[5] = {1, 4, 8, 4, 8};
    for (int dt = 0; dt < 5; dt++) {
        rlx_tensor *t = rlx_from_data((rlx_dtype)dt, 2, s, data[dt]);
        char buf[32];
        CHECK_EQ_INT(rlx_read(t, buf, sizeof buf), RLX_OK);
        CHECK(memcmp(buf, data[dt], 4 * sizes[dt]) == 0);
        CHECK(memcmp(rlx_data(t), data[dt], 4 * sizes[dt]) == 0);
    }
    /* from_data copies: later writes to the source are not seen. */
    float src[2] = {1, 2};
    rlx_tensor *t = rlx_from_data(RLX_F32, 1, (int64_t[]){2}, src);
    src[0] = 9;
    EXPECT(t, RLX_F32, 1, ((int64_t[]){2}), ((double[]){1, 2}), 0);
    CHECK(rlx_from_data(RLX_F32, 1, (int64_t[]){0}, NULL) != NULL); /* empty needs no data */
}

static int deleted;
static void count_delete(void *ctx) { deleted += *(int *)ctx; }

TEST(from_blob_zero_copy)
{
    float data[4] = {1, 2, 3, 4};
    int weight = 1;
    deleted = 0;
    rlx_scope_end(); /* escapes below reach the test itself */
    rlx_scope_begin();
    rlx_tensor *t = rlx_from_blob(RLX_F32, 1, (int64_t[]){4}, data, count_delete, &weight);
    rlx_tensor *y = rlx_mul_s(t, 2);
    data[1] = 10; /* visible: nothing was copied and nothing has run */
    EXPECT(y, RLX_F32, 1, ((int64_t[]){4}), ((double[]){2, 20, 6, 8}), 0);
    CHECK(rlx_data(t) == data);
    rlx_tensor *view = rlx_escape(rlx_narrow(t, 0, 1, 2));
    rlx_scope_end();
    CHECK_EQ_INT(deleted, 0); /* the view still reads data */
    rlx_release(view);
    CHECK_EQ_INT(deleted, 1);
    rlx_scope_begin();
    /* On failure the deleter does not run: the caller keeps the data. */
    CHECK_NULL_ERR(rlx_from_blob(RLX_F32, 1, (int64_t[]){-1}, data, count_delete, &weight), RLX_E_SHAPE,
                   "rlx_from_blob");
    CHECK_NULL_ERR(rlx_from_blob(RLX_F32, 1, (int64_t[]){4}, NULL, count_delete, &weight), RLX_E_ARG,
                   "rlx_from_blob");
    CHECK_EQ_INT(deleted, 1);
    rlx_tensor *nodel = rlx_from_blob(RLX_I32, 0, NULL, data, NULL, NULL);
    CHECK_EQ_INT(rlx_numel(nodel), 1);
}

TEST(constants)
{
    EXPECT(rlx_full(RLX_I32, 2, ((int64_t[]){1, 2}), -2.7), RLX_I32, 2, ((int64_t[]){1, 2}), ((double[]){-2, -2}), 0);
    EXPECT(rlx_full(RLX_BOOL, 1, ((int64_t[]){2}), 0.5), RLX_BOOL, 1, ((int64_t[]){2}), ((double[]){1, 1}), 0);
    EXPECT(rlx_zeros(RLX_F64, 1, ((int64_t[]){3})), RLX_F64, 1, ((int64_t[]){3}), ((double[]){0, 0, 0}), 0);
    EXPECT(rlx_ones(RLX_I64, 0, NULL), RLX_I64, 0, NULL, ((double[]){1}), 0);
    EXPECT(rlx_scalar(RLX_F32, 0.1), RLX_F32, 0, NULL, ((double[]){(float)0.1}), 0);
    rlx_tensor *m = rlx_rand(RLX_F32, 2, ((int64_t[]){2, 3}), 1);
    EXPECT(rlx_full_like(m, 7), RLX_F32, 2, ((int64_t[]){2, 3}), ((double[]){7, 7, 7, 7, 7, 7}), 0);
    EXPECT(rlx_zeros_like(m), RLX_F32, 2, ((int64_t[]){2, 3}), ((double[]){0, 0, 0, 0, 0, 0}), 0);
    EXPECT(rlx_ones_like(m), RLX_F32, 2, ((int64_t[]){2, 3}), ((double[]){1, 1, 1, 1, 1, 1}), 0);
    CHECK_NULL_ERR(rlx_full((rlx_dtype)13, 0, NULL, 1), RLX_E_DTYPE, "rlx_full");
    CHECK_NULL_ERR(rlx_zeros(RLX_F32, 9, ((int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1})), RLX_E_SHAPE, "rlx_zeros");
    CHECK_NULL_ERR(rlx_ones(RLX_F32, 2, NULL), RLX_E_ARG, "rlx_ones");
    CHECK_NULL_ERR(rlx_scalar((rlx_dtype)-1, 1), RLX_E_DTYPE, "rlx_scalar");
    CHECK_NULL_ERR(rlx_full_like(NULL, 1), RLX_E_ARG, "rlx_full_like");
    CHECK_NULL_ERR(rlx_zeros_like(NULL), RLX_E_ARG, "rlx_zeros_like");
    CHECK_NULL_ERR(rlx_ones_like(NULL), RLX_E_ARG, "rlx_ones_like");
}

TEST(arange_and_eye)
{
    EXPECT(rlx_arange(RLX_F32, 0, 5, 1), RLX_F32, 1, ((int64_t[]){5}), ((double[]){0, 1, 2, 3, 4}), 0);
    EXPECT(rlx_arange(RLX_F64, 1, 2, 0.25), RLX_F64, 1, ((int64_t[]){4}), ((double[]){1, 1.25, 1.5, 1.75}), 0);
    EXPECT(rlx_arange(RLX_I32, 5, 0, -2), RLX_I32, 1, ((int64_t[]){3}), ((double[]){5, 3, 1}), 0);
    EXPECT(rlx_arange(RLX_I64, 3, 3, 1), RLX_I64, 1, ((int64_t[]){0}), NULL, 0);
    EXPECT(rlx_arange(RLX_F32, 0, 1, 0.3), RLX_F32, 1, ((int64_t[]){4}), ((double[]){0, 0.3f, 0.6f, 0.9f}), 1e-6);
    EXPECT(rlx_eye(RLX_F32, 3), RLX_F32, 2, ((int64_t[]){3, 3}), ((double[]){1, 0, 0, 0, 1, 0, 0, 0, 1}), 0);
    EXPECT(rlx_eye(RLX_BOOL, 0), RLX_BOOL, 2, ((int64_t[]){0, 0}), NULL, 0);
    CHECK_NULL_ERR(rlx_arange(RLX_F32, 0, 1, 0), RLX_E_ARG, "rlx_arange");
    CHECK_NULL_ERR(rlx_arange(RLX_F32, 0, INFINITY, 1), RLX_E_ARG, "rlx_arange");
    CHECK_NULL_ERR(rlx_arange(RLX_BOOL, 0, 2, 1), RLX_E_DTYPE, "rlx_arange");
    CHECK_NULL_ERR(rlx_arange(RLX_F32, 0, 1e300, 1e-300), RLX_E_SHAPE, "rlx_arange");
    CHECK_NULL_ERR(rlx_eye(RLX_F32, -1), RLX_E_SHAPE, "rlx_eye");
    CHECK_NULL_ERR(rlx_eye((rlx_dtype)13, 2), RLX_E_DTYPE, "rlx_eye");
}

TEST(random_values)
{
    const int64_t n = 100000;
    for (int dt = RLX_F32; dt <= RLX_F64; dt++) {
        rlx_tensor *u = rlx_rand((rlx_dtype)dt, 1, &n, 42);
        int64_t k;
        double *v = test_values(u, &k);
        double mean = 0, lo = 1, hi = 0;
        for (int64_t i = 0; i < k; i++) {
            mean += v[i];
            lo = v[i] < lo ? v[i] : lo;
            hi = v[i] > hi ? v[i] : hi;
        }
        mean /= (double)k;
        CHECK(lo >= 0 && hi < 1);
        CHECK_NEAR(mean, 0.5, 0.01);
        free(v);
        rlx_tensor *g = rlx_randn((rlx_dtype)dt, 1, &n, 42);
        v = test_values(g, &k);
        double m = 0, m2 = 0;
        for (int64_t i = 0; i < k; i++) {
            m += v[i];
            m2 += v[i] * v[i];
        }
        m /= (double)k;
        CHECK_NEAR(m, 0, 0.02);
        CHECK_NEAR(m2 / (double)k - m * m, 1, 0.03);
        free(v);
    }
    /* Same seed, same values; another seed, other values. */
    double a[4], b[4], c[4];
    rlx_read_f64(rlx_rand(RLX_F64, 1, (int64_t[]){4}, 7), a, 4);
    rlx_read_f64(rlx_rand(RLX_F64, 1, (int64_t[]){4}, 7), b, 4);
    rlx_read_f64(rlx_rand(RLX_F64, 1, (int64_t[]){4}, 8), c, 4);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    CHECK_NULL_ERR(rlx_rand(RLX_I32, 1, (int64_t[]){4}, 7), RLX_E_DTYPE, "rlx_rand");
    CHECK_NULL_ERR(rlx_randn(RLX_BOOL, 1, (int64_t[]){4}, 7), RLX_E_DTYPE, "rlx_randn");
    CHECK_NULL_ERR(rlx_randn(RLX_F32, -1, NULL, 7), RLX_E_SHAPE, "rlx_randn");
}

/* The seed as a tensor: exactly rlx_rand/rlx_randn of its value, i32 and
 * i64, shape [] and [1], on both backends and thread counts. */
TEST(random_seeded_values)
{
    static const char *const be[2] = {"jit", "ref"};
    const int64_t shapes[5][3] = {{0}, {0}, {3, 0}, {257}, {4, 5, 6}};
    const int ranks[5] = {0, 1, 2, 1, 3};
    const int64_t seeds[5] = {0, 1, 42, ((int64_t)1 << 40) + 3, -1};
    for (int b = 0; b < 4; b++) {
        CHECK(rlx_set_option("backend", be[b % 2]) == RLX_OK);
        rlx_set_num_threads(b < 2 ? 0 : 3);
        for (int dt = RLX_F32; dt <= RLX_F64; dt++)
            for (int sh = 0; sh < 5; sh++)
                for (int k = 0; k < 5; k++) {
                    int64_t s = seeds[k];
                    int32_t s32 = (int32_t)s;
                    /* i64 rank 0, i64 [1], and i32 where the value fits */
                    rlx_tensor *st[3] = {rlx_from_data(RLX_I64, 0, NULL, &s),
                                         rlx_from_data(RLX_I64, 1, (int64_t[]){1}, &s),
                                         s32 == s ? rlx_from_data(RLX_I32, 0, NULL, &s32) : NULL};
                    for (int f = 0; f < 3 && st[f]; f++) {
                        rlx_dtype d = (rlx_dtype)dt;
                        EXPECT_SAME(rlx_rand_seeded(d, ranks[sh], shapes[sh], st[f]),
                                    rlx_rand(d, ranks[sh], shapes[sh], (uint64_t)s), 0);
                        EXPECT_SAME(rlx_randn_seeded(d, ranks[sh], shapes[sh], st[f]),
                                    rlx_randn(d, ranks[sh], shapes[sh], (uint64_t)s), 0);
                    }
                }
    }
    rlx_set_num_threads(0);
    CHECK(rlx_set_option("backend", "jit") == RLX_OK);
    /* a computed seed (a graph, not a buffer) is read as well */
    rlx_tensor *seed = rlx_add_s(rlx_scalar(RLX_I64, 5), 2);
    EXPECT_SAME(rlx_rand_seeded(RLX_F64, 1, (int64_t[]){9}, seed), rlx_rand(RLX_F64, 1, (int64_t[]){9}, 7), 0);
    /* no gradient flows to or through the seed */
    rlx_tensor *fs = rlx_scalar(RLX_F64, 3), *g = NULL;
    rlx_tensor *u = rlx_rand_seeded(RLX_F64, 1, (int64_t[]){4}, rlx_cast(fs, RLX_I64));
    CHECK(rlx_grad(rlx_sum_all(rlx_mul(u, fs)), &fs, 1, &g) == RLX_OK);
    double gv = 0, uv[4], sum = 0;
    CHECK(rlx_item(g, &gv) == RLX_OK && rlx_read_f64(u, uv, 4) == RLX_OK);
    for (int i = 0; i < 4; i++)
        sum += uv[i];
    CHECK_NEAR(gv, sum, 1e-12);
}

/* A compiled program with the seed as an input: a new seed gives new
 * numbers, the same seed the same numbers, and nothing is compiled again. */
TEST(random_seeded_compiled)
{
    rlx_tensor *seed = rlx_input("seed", RLX_I64, 0, NULL);
    rlx_tensor *outs[2] = {rlx_rand_seeded(RLX_F32, 2, (int64_t[]){8, 16}, seed),
                           rlx_exp(rlx_randn_seeded(RLX_F64, 1, (int64_t[]){33}, seed))};
    rlx_program *p = rlx_compile(outs, 2);
    CHECK(p != NULL);
    double runs[3][128];
    const int64_t seeds[3] = {1, 2, 1};
    for (int r = 0; p && r < 3; r++) {
        rlx_binding bind = {"seed", rlx_from_data(RLX_I64, 0, NULL, &seeds[r])};
        rlx_tensor *res[2] = {NULL, NULL};
        rlx_stats_t st;
        rlx_stats_reset();
        CHECK_EQ_INT(rlx_program_run(p, &bind, 1, res), RLX_OK);
        CHECK(rlx_read_f64(res[0], runs[r], 128) == RLX_OK);
        rlx_stats(&st);
        if (r > 0)
            CHECK_EQ_INT(st.kernels_compiled, 0);
        EXPECT_SAME(res[0], rlx_rand(RLX_F32, 2, (int64_t[]){8, 16}, (uint64_t)seeds[r]), 0);
        EXPECT_SAME(res[1], rlx_exp(rlx_randn(RLX_F64, 1, (int64_t[]){33}, (uint64_t)seeds[r])), 0);
    }
    CHECK(memcmp(runs[0], runs[2], sizeof runs[0]) == 0);
    CHECK(memcmp(runs[0], runs[1], sizeof runs[0]) != 0);
    rlx_program_free(p);
}

TEST(random_seeded_errors)
{
    const char *fn = "rlx_rand_seeded";
    rlx_tensor *s = rlx_scalar(RLX_I64, 1);
    const int64_t n[1] = {4};
    CHECK_NULL_ERR(rlx_rand_seeded(RLX_F32, 1, n, NULL), RLX_E_ARG, fn);
    CHECK_NULL_ERR(rlx_rand_seeded(RLX_F32, 1, n, rlx_scalar(RLX_F32, 1)), RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_rand_seeded(RLX_F32, 1, n, rlx_scalar(RLX_BOOL, 1)), RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_rand_seeded(RLX_F32, 1, n, rlx_ones(RLX_I64, 1, (int64_t[]){2})), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_rand_seeded(RLX_F32, 1, n, rlx_ones(RLX_I64, 2, (int64_t[]){1, 1})), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_rand_seeded(RLX_F32, 1, n, rlx_ones(RLX_I64, 1, (int64_t[]){0})), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_rand_seeded(RLX_F32, 1, n, rlx_input("s", RLX_I64, 1, (int64_t[]){-1})), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_rand_seeded(RLX_I32, 1, n, s), RLX_E_DTYPE, fn);
    CHECK_NULL_ERR(rlx_rand_seeded(RLX_F32, 1, (int64_t[]){-2}, s), RLX_E_SHAPE, fn);
    CHECK_NULL_ERR(rlx_randn_seeded(RLX_BOOL, 1, n, s), RLX_E_DTYPE, "rlx_randn_seeded");
    CHECK_NULL_ERR(rlx_randn_seeded(RLX_F64, -1, NULL, s), RLX_E_SHAPE, "rlx_randn_seeded");
    CHECK_NULL_ERR(rlx_randn_seeded(RLX_F64, 1, n, rlx_scalar(RLX_F64, 1)), RLX_E_DTYPE, "rlx_randn_seeded");
    /* NULL propagation keeps the first error */
    rlx_clear_error();
    CHECK(rlx_rand_seeded(RLX_F32, 1, n, rlx_reshape(s, 1, (int64_t[]){5})) == NULL);
    CHECK(strncmp(rlx_last_error(), "rlx_reshape", 11) == 0);
    rlx_clear_error();
}

TEST(inputs)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, 3});
    CHECK_EQ_INT(rlx_dim(x, 0), -1);
    CHECK_EQ_INT(rlx_numel(x), -1);
    rlx_tensor *y = rlx_input("y", RLX_F32, 1, (int64_t[]){3});
    rlx_tensor *z = rlx_exp(y);
    CHECK_ERR(rlx_realize(z), RLX_E_ARG, "rlx_realize");
    CHECK_NULL_ERR(rlx_input(NULL, RLX_F32, 0, NULL), RLX_E_ARG, "rlx_input");
    CHECK_NULL_ERR(rlx_input("", RLX_F32, 0, NULL), RLX_E_ARG, "rlx_input");
    rlx_tensor *q = rlx_input("q", RLX_F32, 2, (int64_t[]){-2, -7}); /* symbols: dynamic dims */
    CHECK(q && rlx_dim(q, 0) == -1 && rlx_dim(q, 1) == -1);
    CHECK_NULL_ERR(rlx_input("q", RLX_F32, 1, NULL), RLX_E_ARG, "rlx_input");
    CHECK_NULL_ERR(rlx_input("q", (rlx_dtype)13, 0, NULL), RLX_E_DTYPE, "rlx_input");
}

TEST(hash_consing)
{
    rlx_tensor *x = rlx_rand(RLX_F32, 1, (int64_t[]){8}, 3);
    rlx_tensor *a = rlx_exp(rlx_add_s(x, 1));
    rlx_tensor *b = rlx_exp(rlx_add_s(x, 1));
    CHECK(a == b); /* identical subexpressions are one node */
    CHECK(rlx_exp(rlx_add_s(x, 2)) != a);
    rlx_realize(a);
    CHECK(rlx_is_realized(b)); /* and so realized once */
}

TEST(deep_chain)
{
    /* 100,000 ops: building, realizing and releasing must not recurse. */
    rlx_scope_end(); /* without a scope, to release the chain through its root only */
    rlx_tensor *x = rlx_ones(RLX_F32, 1, (int64_t[]){4});
    rlx_tensor *y = rlx_retain(x);
    for (int i = 0; i < 100000; i++) {
        rlx_tensor *next = rlx_add_s(y, 1);
        rlx_release(y);
        y = next;
    }
    EXPECT(y, RLX_F32, 1, ((int64_t[]){4}), ((double[]){100001, 100001, 100001, 100001}), 0);
    rlx_release(y);
    rlx_release(x);
    rlx_scope_begin();
}

static void *thread_work(void *arg)
{
    rlx_tensor *shared = arg;
    double ok = 1;
    for (int it = 0; it < 200; it++) {
        rlx_scope_begin();
        rlx_tensor *y = rlx_sum_all(rlx_mul(rlx_add_s(shared, (double)(it % 7)), shared));
        double v = 0;
        if (rlx_item(y, &v) != RLX_OK)
            ok = 0;
        double want = 0;
        for (int i = 0; i < 64; i++)
            want += (i + it % 7) * (double)i;
        if (v != want)
            ok = 0;
        rlx_scope_end();
    }
    return ok ? arg : NULL;
}

TEST(threads_share_graphs)
{
    rlx_tensor *shared = rlx_arange(RLX_F64, 0, 64, 1);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, thread_work, shared);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        CHECK(r == shared);
    }
}

TEST_MAIN(T(version_and_names), T(retain_release_and_scopes), T(scope_end_without_scope), T(introspection),
          T(storage_sharing), T(from_data_every_dtype), T(from_blob_zero_copy), T(constants), T(arange_and_eye),
          T(random_values), T(random_seeded_values), T(random_seeded_compiled), T(random_seeded_errors),
          T(inputs), T(hash_consing), T(deep_chain), T(threads_share_graphs))
