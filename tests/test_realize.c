/* test_realize.c — realization, readers, formatting, programs, control. */
#include "harness.h"

#include <unistd.h>

TEST(realize_and_many)
{
    rlx_tensor *x = rlx_arange(RLX_F32, 0, 6, 1);
    rlx_tensor *a = rlx_mul_s(x, 2), *b = rlx_add_s(x, 1);
    rlx_tensor *ts[2] = {a, b};
    CHECK_EQ_INT(rlx_realize_many(ts, 2), RLX_OK);
    CHECK(rlx_is_realized(a) && rlx_is_realized(b));
    EXPECT(b, RLX_F32, 1, ((int64_t[]){6}), ((double[]){1, 2, 3, 4, 5, 6}), 0);
    CHECK_EQ_INT(rlx_realize(a), RLX_OK); /* again: at once */
    CHECK_EQ_INT(rlx_realize_many(NULL, 0), RLX_OK);
    CHECK_ERR(rlx_realize_many(NULL, 2), RLX_E_ARG, "rlx_realize_many");
    CHECK_ERR(rlx_realize_many(ts, -1), RLX_E_ARG, "rlx_realize_many");
    rlx_tensor *bad[2] = {a, NULL};
    CHECK_ERR(rlx_realize_many(bad, 2), RLX_E_ARG, "rlx_realize_many");
    CHECK_ERR(rlx_realize(NULL), RLX_E_ARG, "rlx_realize");
}

TEST(readers)
{
    rlx_tensor *t = rlx_from_data(RLX_I32, 1, (int64_t[]){3}, (int32_t[]){-1, 2, 7});
    float f[3];
    double d[3];
    int32_t raw[3];
    CHECK_EQ_INT(rlx_read_f32(t, f, 3), RLX_OK);
    CHECK(f[0] == -1 && f[1] == 2 && f[2] == 7);
    CHECK_EQ_INT(rlx_read_f64(t, d, 5), RLX_OK);
    CHECK(d[2] == 7);
    CHECK_EQ_INT(rlx_read(t, raw, sizeof raw), RLX_OK);
    CHECK(raw[1] == 2);
    CHECK_ERR(rlx_read(t, raw, 11), RLX_E_ARG, "rlx_read");
    CHECK_ERR(rlx_read(t, NULL, 12), RLX_E_ARG, "rlx_read");
    CHECK_ERR(rlx_read_f32(t, f, 2), RLX_E_ARG, "rlx_read_f32");
    CHECK_ERR(rlx_read_f64(NULL, d, 3), RLX_E_ARG, "rlx_read_f64");
    CHECK_ERR(rlx_read(NULL, raw, 12), RLX_E_ARG, "rlx_read");
    rlx_tensor *empty = rlx_zeros(RLX_F32, 1, (int64_t[]){0});
    CHECK_EQ_INT(rlx_read(empty, NULL, 0), RLX_OK);
    CHECK(rlx_data(empty) != NULL);
    /* A realized view is contiguous in its payload. */
    rlx_tensor *m = rlx_reshape(rlx_arange(RLX_F64, 0, 6, 1), 2, (int64_t[]){2, 3});
    const double *p = rlx_data(rlx_t(m));
    CHECK(p && p[0] == 0 && p[1] == 3 && p[2] == 1 && p[5] == 5);
    CHECK(rlx_data(NULL) == NULL);
    rlx_clear_error();
}

TEST(item)
{
    double v = 0;
    CHECK_EQ_INT(rlx_item(rlx_scalar(RLX_I64, -3), &v), RLX_OK);
    CHECK(v == -3);
    CHECK_EQ_INT(rlx_item(rlx_ones(RLX_BOOL, 2, (int64_t[]){1, 1}), &v), RLX_OK);
    CHECK(v == 1);
    CHECK_ERR(rlx_item(rlx_ones(RLX_F32, 1, (int64_t[]){2}), &v), RLX_E_SHAPE, "rlx_item");
    CHECK_ERR(rlx_item(rlx_ones(RLX_F32, 0, NULL), NULL), RLX_E_ARG, "rlx_item");
    CHECK_ERR(rlx_item(NULL, &v), RLX_E_ARG, "rlx_item");
}

static void expect_string(rlx_tensor *t, const char *want)
{
    char *s = rlx_to_string(t);
    if (!s || strcmp(s, want) != 0)
        test_fail(__FILE__, __LINE__, "to_string gave\n%s\nexpected\n%s", s ? s : "(null)", want);
    free(s);
}

TEST(to_string)
{
    expect_string(rlx_from_data(RLX_I32, 2, (int64_t[]){2, 2}, (int32_t[]){1, 2, 3, 4}),
                  "tensor([[1, 2],\n        [3, 4]], shape=[2, 2], dtype=i32)");
    expect_string(rlx_scalar(RLX_F64, 2.5), "tensor(2.5, shape=[], dtype=f64)");
    expect_string(rlx_from_data(RLX_BOOL, 1, (int64_t[]){2}, (unsigned char[]){1, 0}),
                  "tensor([true, false], shape=[2], dtype=bool)");
    expect_string(rlx_from_data(RLX_F32, 1, (int64_t[]){3}, (float[]){1, NAN, -INFINITY}),
                  "tensor([1., nan, -inf], shape=[3], dtype=f32)");
    expect_string(rlx_zeros(RLX_F32, 2, (int64_t[]){0, 3}), "tensor([], shape=[0, 3], dtype=f32)");
    char *big = rlx_to_string(rlx_arange(RLX_I64, 0, 5000, 1));
    CHECK(big && strstr(big, "[0, 1, 2, ..., 4997, 4998, 4999]") != NULL);
    free(big);
    CHECK(rlx_to_string(NULL) == NULL);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_ARG);
    rlx_clear_error();
}

TEST(compiled_program)
{
    rlx_tensor *x = rlx_input("x", RLX_F32, 1, (int64_t[]){3});
    rlx_tensor *w = rlx_input("w", RLX_F32, 1, (int64_t[]){3});
    rlx_tensor *outs[2] = {rlx_sum_all(rlx_mul(x, w)), rlx_exp(x)};
    rlx_program *p = rlx_compile(outs, 2);
    CHECK(p != NULL);
    for (int step = 0; step < 3; step++) {
        rlx_tensor *xv = rlx_from_data(RLX_F32, 1, (int64_t[]){3}, (float[]){1, 2, (float)step});
        rlx_tensor *wv = rlx_full(RLX_F32, 1, (int64_t[]){3}, 2);
        rlx_binding b[2] = {{"x", xv}, {"w", wv}};
        rlx_tensor *res[2];
        CHECK_EQ_INT(rlx_program_run(p, b, 2, res), RLX_OK);
        EXPECT(res[0], RLX_F32, 0, NULL, ((double[]){2.0 * (3 + step)}), 0);
        EXPECT(res[1], RLX_F32, 1, ((int64_t[]){3}), ((double[]){(float)exp(1), (float)exp(2), (float)exp(step)}), 1e-6);
    }
    rlx_tensor *res[2];
    rlx_binding wrong_shape[2] = {{"x", rlx_zeros(RLX_F32, 1, (int64_t[]){4})}, {"w", rlx_zeros(RLX_F32, 1, (int64_t[]){3})}};
    CHECK_ERR(rlx_program_run(p, wrong_shape, 2, res), RLX_E_SHAPE, "rlx_program_run");
    CHECK(res[0] == NULL && res[1] == NULL);
    rlx_binding wrong_dtype[1] = {{"x", rlx_zeros(RLX_F64, 1, (int64_t[]){3})}};
    CHECK_ERR(rlx_program_run(p, wrong_dtype, 1, res), RLX_E_DTYPE, "rlx_program_run");
    rlx_binding unknown[1] = {{"nope", rlx_zeros(RLX_F32, 1, (int64_t[]){3})}};
    CHECK_ERR(rlx_program_run(p, unknown, 1, res), RLX_E_ARG, "rlx_program_run");
    rlx_binding partial[1] = {{"x", rlx_zeros(RLX_F32, 1, (int64_t[]){3})}};
    CHECK_ERR(rlx_program_run(p, partial, 1, res), RLX_E_ARG, "rlx_program_run");
    CHECK_ERR(rlx_program_run(NULL, partial, 1, res), RLX_E_ARG, "rlx_program_run");
    rlx_program_free(p);
    rlx_program_free(NULL);
    CHECK(rlx_compile(NULL, 1) == NULL);
    CHECK_EQ_INT(rlx_last_status(), RLX_E_ARG);
    /* a dynamic dim: one program, any length (tests/test_program.c has more) */
    rlx_tensor *dyn = rlx_input("d", RLX_F32, 1, (int64_t[]){-1});
    rlx_tensor *o = rlx_neg(dyn);
    p = rlx_compile(&o, 1);
    CHECK(p != NULL);
    for (int64_t n = 0; n < 4; n++) {
        double want[3] = {-0.0, -1.0, -2.0};
        rlx_binding b = {"d", rlx_arange(RLX_F32, 0, (double)n, 1)};
        CHECK_EQ_INT(rlx_program_run(p, &b, 1, res), RLX_OK);
        EXPECT(res[0], RLX_F32, 1, (&n), want, 0);
    }
    rlx_program_free(p);
}

TEST(control)
{
    int n0 = rlx_get_num_threads();
    CHECK(n0 >= 1);
    rlx_set_num_threads(3);
    CHECK_EQ_INT(rlx_get_num_threads(), 3);
    rlx_set_num_threads(0);
    CHECK_EQ_INT(rlx_get_num_threads(), n0);
    CHECK_EQ_INT(rlx_set_option("num_threads", "2"), RLX_OK);
    CHECK_EQ_INT(rlx_get_num_threads(), 2);
    CHECK_EQ_INT(rlx_set_option("num_threads", "0"), RLX_OK);
    char got[64];
    CHECK_EQ_INT(rlx_set_option("cache_dir", "/tmp/rlx-test-cache-dir"), RLX_OK);
    CHECK_EQ_INT(rlx_get_option("cache_dir", got, sizeof got), RLX_OK);
    CHECK(strcmp(got, "/tmp/rlx-test-cache-dir") == 0);
    CHECK_EQ_INT(rlx_set_option("cache_dir", ""), RLX_OK);
    CHECK_EQ_INT(rlx_get_option("cache_dir", got, sizeof got), RLX_OK);
    CHECK(strcmp(got, "") == 0);
    CHECK_EQ_INT(rlx_set_option("cache_dir", "/tmp/rlx-test-cache-dir"), RLX_OK);
    CHECK_ERR(rlx_get_option("cache_dir", got, 4), RLX_E_ARG, "rlx_get_option");
    CHECK_ERR(rlx_get_option("tuning_file", got, sizeof got), RLX_E_ARG, "rlx_get_option");
    CHECK_EQ_INT(rlx_set_option("cache_dir", ""), RLX_OK);
    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
    CHECK_EQ_INT(rlx_get_option("backend", got, sizeof got), RLX_OK);
    CHECK(strcmp(got, "ref") == 0);
    CHECK_ERR(rlx_set_option("backend", "gpu"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option("num_threads", "two"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option("no_such_knob", "1"), RLX_E_ARG, "rlx_set_option");
    CHECK_ERR(rlx_set_option(NULL, "1"), RLX_E_ARG, "rlx_set_option");
    rlx_stats_reset();
    rlx_stats_t st;
    rlx_stats(&st);
    CHECK_EQ_INT(st.kernels_run, 0);
    rlx_realize(rlx_exp(rlx_rand(RLX_F32, 1, (int64_t[]){1000}, 1)));
    rlx_stats(&st);
    CHECK_EQ_INT(st.kernels_run, 2);
    CHECK(st.peak_bytes >= 4000);
    CHECK_ERR(rlx_stats(NULL), RLX_E_ARG, "rlx_stats");
}

/* Dumps t to path and returns the number of kernel clusters (-1 when the
 * file is not a graph holding every op named in ops). */
static int dot_clusters(rlx_tensor *t, const char *path, const char *const *ops)
{
    if (rlx_dump_dot(t, path) != RLX_OK)
        return -1;
    FILE *f = fopen(path, "r");
    static char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    if (strncmp(buf, "digraph rlx", 11) != 0)
        return -1;
    for (; *ops; ops++)
        if (!strstr(buf, *ops))
            return -1;
    int count = 0;
    for (const char *p = buf; (p = strstr(p, "subgraph cluster_")); p++)
        count++;
    return count;
}

TEST(dump_dot)
{
    char path[] = "/tmp/rlx_test_dot_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    rlx_tensor *x = rlx_rand(RLX_F32, 2, (int64_t[]){2, 3}, 1);
    CHECK_EQ_INT(rlx_realize(x), RLX_OK);
    rlx_tensor *y = rlx_softmax(x, -1);
    const char *sm_ops[] = {"exp", "sum", "max", "div", "->", NULL};
    char backend[16];
    CHECK_EQ_INT(rlx_get_option("backend", backend, sizeof backend), RLX_OK);
    /* reference backend: one cluster per primitive; JIT: softmax is one
     * fused kernel; exp | cumsum (not fused) | tanh three */
    CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
    CHECK(dot_clusters(y, path, sm_ops) >= 5);
    CHECK_EQ_INT(rlx_set_option("backend", "jit"), RLX_OK);
    CHECK_EQ_INT(dot_clusters(y, path, sm_ops), 1);
    rlx_tensor *z = rlx_tanh(rlx_cumsum(rlx_exp(x), 1, false));
    CHECK_EQ_INT(dot_clusters(z, path, (const char *[]){"exp", "cumsum", "tanh", "->", NULL}), 3);
    CHECK_EQ_INT(dot_clusters(x, path, (const char *[]){"realized", NULL}), 0);
    CHECK_EQ_INT(rlx_set_option("backend", backend), RLX_OK);
    unlink(path);
    CHECK_ERR(rlx_dump_dot(y, "/nonexistent-dir/x.dot"), RLX_E_IO, "rlx_dump_dot");
    CHECK_ERR(rlx_dump_dot(y, NULL), RLX_E_ARG, "rlx_dump_dot");
    CHECK_ERR(rlx_dump_dot(NULL, path), RLX_E_ARG, "rlx_dump_dot");
}

TEST_MAIN(T(realize_and_many), T(readers), T(item), T(to_string), T(compiled_program), T(control),
          T(dump_dot))
