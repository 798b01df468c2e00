/*
 * test_dynamic_conv.c — convolutions, transposed convolutions and pools
 * over dynamic (-1) spatial dims (and batch) in compiled programs, with
 * their gradients: each expression of x (dynamic dims) and a weight w
 * (static) is compiled with d loss / d x and d loss / d w, run at many
 * bound shapes (0 and 1 included where the op allows), and every output
 * must equal the same expression over the bound values (static shapes)
 * on the reference backend, on both backends, in f32 and f64; in f64
 * central differences check gradient entries of x and w. Also the
 * group norm over dynamic C and spatial dims, and the errors a binding
 * that does not fit gets.
 */
#include <math.h>
#include <string.h>

#include "harness.h"

typedef rlx_tensor *(*expr2)(rlx_tensor *x, rlx_tensor *w);

typedef struct {
    const char *name;
    expr2 f;
    int xrank;
    int64_t xdims[4]; /* traced: -1 dynamic */
    int wrank;
    int64_t wdims[4];
    int nshapes;
    int64_t shapes[8][4]; /* bound x shapes */
} conv_case;

static rlx_tensor *loss_of(rlx_tensor *o) { return rlx_sum(rlx_mul(o, rlx_sin(o)), NULL, 0, false); }

static int build(const conv_case *c, rlx_tensor *x, rlx_tensor *w, rlx_tensor **outs)
{
    outs[0] = c->f(x, w);
    if (!outs[0])
        return 1;
    outs[1] = loss_of(outs[0]);
    if (rlx_grad(outs[1], (rlx_tensor *[]){x, w}, 2, outs + 2) != RLX_OK)
        outs[2] = outs[3] = NULL;
    return 4;
}

static double loss_at(const conv_case *c, const int64_t *xs, const double *xd, const double *wd)
{
    double l = NAN;
    rlx_tensor *o = loss_of(c->f(tf64(c->xrank, xs, xd), tf64(c->wrank, c->wdims, wd)));
    if (rlx_read_f64(o, &l, 1) != RLX_OK)
        test_fail(__FILE__, __LINE__, "%s loss: %s", c->name, rlx_last_error());
    return l;
}

/* Central differences at x's first and last elements and w's first
 * against the gradients got[2], got[3]. */
static void check_fd(const conv_case *c, const int64_t *xs, rlx_tensor *xv, rlx_tensor *wv, rlx_tensor *const *got)
{
    int64_t nx = test_numel(c->xrank, xs), nw = test_numel(c->wrank, c->wdims);
    double *xd = calloc((size_t)nx + 1, sizeof *xd), *wd = calloc((size_t)nw, sizeof *wd);
    double *gx = calloc((size_t)nx + 1, sizeof *gx), *gw = calloc((size_t)nw, sizeof *gw), h = 1e-6;
    CHECK_EQ_INT(rlx_read_f64(xv, xd, (size_t)nx), RLX_OK);
    CHECK_EQ_INT(rlx_read_f64(wv, wd, (size_t)nw), RLX_OK);
    CHECK_EQ_INT(rlx_read_f64(got[2], gx, (size_t)nx), RLX_OK);
    CHECK_EQ_INT(rlx_read_f64(got[3], gw, (size_t)nw), RLX_OK);
    struct { double *v, *g; int64_t at; char what; } pts[3] = {{xd, gx, 0, 'x'}, {xd, gx, nx - 1, 'x'}, {wd, gw, 0, 'w'}};
    for (int k = 0; k < 3; k++) {
        if (pts[k].at < 0 || (pts[k].what == 'x' && nx == 0))
            continue;
        double *v = pts[k].v + pts[k].at;
        *v += h;
        double lp = loss_at(c, xs, xd, wd);
        *v -= 2 * h;
        double lm = loss_at(c, xs, xd, wd);
        *v += h;
        double fd = (lp - lm) / (2 * h), g = pts[k].g[pts[k].at];
        if (fabs(fd - g) > 1e-5 * (1 + fabs(fd)))
            test_fail(__FILE__, __LINE__, "%s at x %s: d/d%c[%lld] finite difference %g, gradient %g", c->name,
                      test_dims(c->xrank, xs), pts[k].what, (long long)pts[k].at, fd, g);
    }
    free(xd), free(wd), free(gx), free(gw);
}

static void check(const conv_case *c)
{
    const rlx_dtype dts[] = {RLX_F32, RLX_F64};
    EACH_BACKEND(b)
    {
        const char *be = b ? "jit" : "ref";
        for (int t = 0; t < 2; t++) {
            rlx_tensor *x = rlx_input("x", dts[t], c->xrank, c->xdims);
            rlx_tensor *w = rlx_input("w", dts[t], c->wrank, c->wdims), *outs[4] = {0};
            int n = build(c, x, w, outs);
            bool built = true;
            for (int o = 0; o < n; o++)
                built &= outs[o] != NULL;
            rlx_program *p = built ? rlx_compile(outs, n) : NULL;
            if (!p) {
                test_fail(__FILE__, __LINE__, "%s (%s, %s): %s", c->name, be, rlx_dtype_name(dts[t]), rlx_last_error());
                continue;
            }
            for (int k = 0; k < c->nshapes; k++) {
                const int64_t *xs = c->shapes[k];
                rlx_tensor *xv = trand(dts[t], c->xrank, xs, -1, 1), *wv = trand(dts[t], c->wrank, c->wdims, -1, 1);
                rlx_tensor *got[4] = {0}, *want[4] = {0};
                rlx_binding bind[2] = {{"x", xv}, {"w", wv}};
                if (rlx_program_run(p, bind, 2, got) != RLX_OK) {
                    test_fail(__FILE__, __LINE__, "%s (%s, %s) at x %s: %s", c->name, be, rlx_dtype_name(dts[t]),
                              test_dims(c->xrank, xs), rlx_last_error());
                    continue;
                }
                CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
                build(c, xv, wv, want);
                for (int o = 0; o < n; o++) {
                    CHECK_EQ_INT(rlx_rank(got[o]), rlx_rank(want[o]));
                    for (int d = 0; d < rlx_rank(want[o]); d++)
                        CHECK_EQ_INT(rlx_dim(got[o], d), rlx_dim(want[o], d));
                    EXPECT_SAME(got[o], want[o], dts[t] == RLX_F32 ? 2e-4 : 1e-10);
                }
                if (dts[t] == RLX_F64)
                    check_fd(c, xs, xv, wv, got);
                CHECK_EQ_INT(rlx_set_option("backend", be), RLX_OK);
            }
            rlx_program_free(p);
        }
    }
}

static rlx_tensor *f_conv_same(rlx_tensor *x, rlx_tensor *w)
{
    return rlx_conv2d(x, w, NULL, NULL, (int[]){1, 1}, NULL, 1);
}
static rlx_tensor *f_conv_strided(rlx_tensor *x, rlx_tensor *w)
{
    return rlx_conv2d(rlx_tanh(x), w, NULL, (int[]){2, 3}, (int[]){1, 0}, (int[]){1, 2}, 2);
}
static rlx_tensor *f_conv1d(rlx_tensor *x, rlx_tensor *w) { return rlx_conv1d(x, w, NULL, 3, 2, 1, 1); }
static rlx_tensor *f_maxpool(rlx_tensor *x, rlx_tensor *w)
{
    rlx_tensor *y = rlx_conv2d(x, w, NULL, NULL, (int[]){1, 1}, NULL, 1);
    return rlx_max_pool2d(y, (int[]){3, 2}, (int[]){2, 2}, (int[]){1, 1});
}
static rlx_tensor *f_avgpool(rlx_tensor *x, rlx_tensor *w)
{
    rlx_tensor *y = rlx_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
    return rlx_avg_pool2d(rlx_exp(y), (int[]){2, 3}, (int[]){3, 1}, (int[]){1, 0});
}
static rlx_tensor *f_conv_t(rlx_tensor *x, rlx_tensor *w)
{
    return rlx_conv_transpose2d(x, w, NULL, (int[]){2, 3}, (int[]){1, 0}, (int[]){1, 2}, NULL, 1);
}
static rlx_tensor *f_conv_t_dil(rlx_tensor *x, rlx_tensor *w)
{
    return rlx_conv_transpose2d(rlx_sin(x), w, NULL, (int[]){2, 1}, (int[]){2, 1}, (int[]){1, 0}, (int[]){2, 2}, 1);
}
/* a small image model: conv, relu, pool, conv, mean over H and W */
static rlx_tensor *f_cnn(rlx_tensor *x, rlx_tensor *w)
{
    rlx_tensor *y = rlx_relu(rlx_conv2d(x, w, NULL, NULL, (int[]){1, 1}, NULL, 1));
    y = rlx_max_pool2d(y, (int[]){2, 2}, NULL, NULL);
    rlx_tensor *w2 = rlx_narrow(rlx_transpose(w, 4, (int[]){1, 0, 2, 3}), 0, 0, 2);
    y = rlx_conv2d(y, w2, NULL, (int[]){2, 2}, (int[]){1, 1}, NULL, 1);
    return rlx_mean(y, (int[]){2, 3}, 2, false);
}

/* group norm over dynamic spatial dims (weight and bias [C]), and over a
 * dynamic C too (no weight; w scales the result) */
static rlx_tensor *f_gn(rlx_tensor *x, rlx_tensor *w) { return rlx_group_norm(rlx_exp(x), 2, w, rlx_sin(w), 1e-5); }
static rlx_tensor *f_gn_c(rlx_tensor *x, rlx_tensor *w)
{
    return rlx_mul(rlx_group_norm(x, 3, NULL, NULL, 1e-5), rlx_sum(w, NULL, 0, false));
}

static const conv_case cases[] = {
    {"conv_same", f_conv_same, 4, {-1, 2, -1, -1}, 4, {3, 2, 3, 3}, 6,
     {{1, 2, 3, 3}, {2, 2, 5, 4}, {0, 2, 4, 4}, {1, 2, 1, 1}, {3, 2, 6, 7}, {1, 2, 2, 9}}},
    {"conv_strided", f_conv_strided, 4, {-1, 4, -1, -1}, 4, {4, 2, 3, 2}, 6,
     {{1, 4, 1, 3}, {2, 4, 5, 4}, {1, 4, 6, 8}, {2, 4, 7, 5}, {0, 4, 3, 3}, {1, 4, 8, 9}}},
    {"conv_h_only", f_conv_strided, 4, {2, 4, -1, 5}, 4, {4, 2, 3, 2}, 4,
     {{2, 4, 1, 5}, {2, 4, 2, 5}, {2, 4, 5, 5}, {2, 4, 8, 5}}},
    {"conv1d", f_conv1d, 3, {-1, 2, -1}, 3, {3, 2, 4}, 6,
     {{0, 2, 1}, {1, 2, 1}, {2, 2, 5}, {1, 2, 6}, {3, 2, 7}, {1, 2, 11}}},
    {"maxpool", f_maxpool, 4, {-1, 2, -1, -1}, 4, {2, 2, 3, 3}, 5,
     {{1, 2, 2, 2}, {2, 2, 5, 4}, {1, 2, 6, 7}, {0, 2, 3, 3}, {1, 2, 4, 9}}},
    {"avgpool", f_avgpool, 4, {-1, 1, -1, -1}, 4, {2, 1, 2, 2}, 5,
     {{1, 1, 2, 4}, {2, 1, 3, 4}, {1, 1, 7, 5}, {2, 1, 5, 4}, {1, 1, 9, 6}}},
    {"conv_t", f_conv_t, 4, {-1, 2, -1, -1}, 4, {2, 3, 3, 3}, 5,
     {{1, 2, 1, 1}, {2, 2, 3, 2}, {1, 2, 5, 4}, {0, 2, 2, 2}, {1, 2, 4, 7}}},
    {"conv_t_dil", f_conv_t_dil, 4, {-1, 2, -1, -1}, 4, {2, 2, 3, 2}, 4,
     {{1, 2, 2, 1}, {2, 2, 3, 2}, {1, 2, 5, 6}, {1, 2, 7, 3}}},
    {"cnn", f_cnn, 4, {-1, 2, -1, -1}, 4, {3, 2, 3, 3}, 5,
     {{1, 2, 2, 2}, {2, 2, 4, 5}, {1, 2, 7, 6}, {3, 2, 8, 8}, {0, 2, 4, 4}}},
    {"group_norm", f_gn, 4, {-1, 4, -1, -1}, 1, {4}, 6,
     {{1, 4, 1, 1}, {2, 4, 3, 2}, {0, 4, 2, 2}, {1, 4, 5, 1}, {3, 4, 2, 6}, {1, 4, 0, 3}}},
    {"group_norm_c", f_gn_c, 3, {-1, -1, -1}, 1, {2}, 6,
     {{1, 3, 1}, {2, 6, 3}, {0, 3, 2}, {1, 9, 2}, {2, 3, 5}, {1, 6, 0}}},
};

TEST(conv_over_dynamic_spatial_dims)
{
    for (int k = 0; k < 4; k++)
        check(&cases[k]);
}

TEST(pools_over_dynamic_spatial_dims)
{
    check(&cases[4]);
    check(&cases[5]);
}

TEST(conv_transpose_over_dynamic_spatial_dims)
{
    check(&cases[6]);
    check(&cases[7]);
}

TEST(small_cnn_over_dynamic_image_size)
{
    check(&cases[8]);
}

TEST(group_norm_over_dynamic_dims)
{
    check(&cases[9]);
    check(&cases[10]);
    /* a bound C that num_groups does not divide */
    rlx_tensor *x = rlx_input("x", RLX_F32, 3, (int64_t[]){-1, -1, 4});
    rlx_tensor *y = rlx_group_norm(x, 3, NULL, NULL, 1e-5), *got = NULL;
    rlx_program *p = rlx_compile(&y, 1);
    CHECK(p != NULL);
    rlx_binding bad = {"x", trand(RLX_F32, 3, (int64_t[]){2, 5, 4}, -1, 1)};
    CHECK_EQ_INT(rlx_program_run(p, &bad, 1, &got), RLX_E_SHAPE);
    CHECK(strstr(rlx_last_error(), "[5,2,4]") != NULL); /* (C leads in the reshape) */
    /* a static C still is checked while tracing */
    CHECK_NULL_ERR(rlx_group_norm(rlx_input("z", RLX_F32, 3, (int64_t[]){-1, 5, -1}), 2, NULL, NULL, 1e-5), RLX_E_ARG,
                   "rlx_group_norm");
    rlx_program_free(p);
}

/* A bound H or W too small for the kernel fails the run with
 * RLX_E_SHAPE naming conv2d (pool2d) and the shapes; a larger one after
 * it still runs. */
TEST(conv_pool_binding_too_small)
{
    EACH_BACKEND(b)
    {
        (void)b;
        rlx_tensor *x = rlx_input("x", RLX_F32, 4, (int64_t[]){-1, 2, -1, -1});
        rlx_tensor *w = trand(RLX_F32, 4, (int64_t[]){3, 2, 3, 3}, -1, 1);
        rlx_tensor *outs[2] = {rlx_conv2d(x, w, NULL, NULL, NULL, NULL, 1),
                               rlx_max_pool2d(x, (int[]){3, 3}, NULL, NULL)};
        for (int o = 0; o < 2; o++) {
            rlx_program *p = rlx_compile(&outs[o], 1);
            CHECK(p != NULL);
            rlx_tensor *got = NULL;
            rlx_binding small = {"x", trand(RLX_F32, 4, (int64_t[]){1, 2, 2, 5}, -1, 1)};
            CHECK_EQ_INT(rlx_program_run(p, &small, 1, &got), RLX_E_SHAPE);
            const char *msg = rlx_last_error();
            CHECK(strstr(msg, "rlx_program_run") && strstr(msg, o ? "pool2d" : "conv2d") && strstr(msg, "[1,2,2,5]"));
            CHECK_EQ_INT(rlx_program_run(p, &(rlx_binding){"x", trand(RLX_F32, 4, (int64_t[]){1, 2, 3, 5}, -1, 1)}, 1,
                                         &got),
                         RLX_OK);
            CHECK_EQ_INT(rlx_dim(got, 2), o ? 1 : 1);
            CHECK_EQ_INT(rlx_dim(got, 3), o ? 1 : 3);
            rlx_program_free(p);
        }
        /* static arguments are still checked while tracing */
        CHECK_NULL_ERR(rlx_conv2d(x, w, NULL, (int[]){0, 1}, NULL, NULL, 1), RLX_E_ARG, "rlx_conv2d");
        CHECK_NULL_ERR(rlx_max_pool2d(x, (int[]){2, 2}, NULL, (int[]){2, 0}), RLX_E_ARG, "rlx_max_pool2d");
    }
}

TEST_MAIN(T(conv_over_dynamic_spatial_dims), T(pools_over_dynamic_spatial_dims),
          T(conv_transpose_over_dynamic_spatial_dims), T(small_cnn_over_dynamic_image_size), T(group_norm_over_dynamic_dims),
          T(conv_pool_binding_too_small))
