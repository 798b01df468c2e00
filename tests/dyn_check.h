/*
 * dyn_check.h — the check of test_dynamic_ops.c and test_dynamic_reshape.c:
 * an expression of x [X, C] and y [Y, C] (X, Y dynamic: -1 or a symbol),
 * compiled once with its gradients and run at many pairs of lengths (0 and
 * 1 included), each output against the same expression built over the
 * bound values (static shapes) on the reference backend, on both backends,
 * in f32 and f64; in f64 central differences check three entries of each
 * input's gradient.
 */
#ifndef RLX_TEST_DYN_CHECK_H
#define RLX_TEST_DYN_CHECK_H

#include <math.h>

#include "harness.h"

enum { C = 3 };

/* An expression of x and y (either may be unused). */
typedef rlx_tensor *(*expr2)(rlx_tensor *x, rlx_tensor *y);

static rlx_tensor *loss_of(rlx_tensor *o) { return rlx_sum(rlx_mul(o, rlx_sin(o)), NULL, 0, false); }

/* outs: f, then (grad) its loss and d loss / d x, d y; the count. */
static int build(expr2 f, bool grad, rlx_tensor *x, rlx_tensor *y, rlx_tensor **outs)
{
    outs[0] = f(x, y);
    if (!grad || !outs[0])
        return 1;
    outs[1] = loss_of(outs[0]);
    if (rlx_grad(outs[1], (rlx_tensor *[]){x, y}, 2, outs + 2) != RLX_OK)
        outs[2] = outs[3] = NULL;
    return 4;
}

static double loss_at(expr2 f, const double *xd, int64_t nx, const double *yd, int64_t ny)
{
    double l = NAN;
    rlx_tensor *o = loss_of(f(tf64(2, (int64_t[]){nx, C}, xd), tf64(2, (int64_t[]){ny, C}, yd)));
    if (rlx_read_f64(o, &l, 1) != RLX_OK)
        test_fail(__FILE__, __LINE__, "loss: %s", rlx_last_error());
    return l;
}

/* Central differences at the first, a middle and the last element of x
 * and y, against the gradients got[2], got[3]. */
static void check_fd(const char *name, expr2 f, rlx_tensor *xv, rlx_tensor *yv, rlx_tensor *const *got)
{
    int64_t nx = rlx_dim(xv, 0), ny = rlx_dim(yv, 0);
    double xd[16 * C], yd[16 * C], gd[16 * C], h = 1e-6;
    CHECK_EQ_INT(rlx_read_f64(xv, xd, (size_t)(nx * C)), RLX_OK);
    CHECK_EQ_INT(rlx_read_f64(yv, yd, (size_t)(ny * C)), RLX_OK);
    for (int w = 0; w < 2; w++) {
        int64_t n = (w ? ny : nx) * C;
        double *v = w ? yd : xd;
        if (n == 0)
            continue;
        CHECK_EQ_INT(rlx_read_f64(got[2 + w], gd, (size_t)n), RLX_OK);
        const int64_t ats[3] = {0, n / 2, n - 1};
        for (int k = 0; k < 3; k++) {
            int64_t at = ats[k];
            v[at] += h;
            double lp = loss_at(f, xd, nx, yd, ny);
            v[at] -= 2 * h;
            double lm = loss_at(f, xd, nx, yd, ny);
            v[at] += h;
            double fd = (lp - lm) / (2 * h);
            if (fabs(fd - gd[at]) > 1e-5 * (1 + fabs(fd)))
                test_fail(__FILE__, __LINE__, "%s at (%lld, %lld): d/d%c[%lld] finite difference %g, gradient %g", name,
                          (long long)nx, (long long)ny, w ? 'y' : 'x', (long long)at, fd, gd[at]);
        }
    }
}

static const int64_t dyn_pairs[][2] = {{0, 0}, {1, 1}, {2, 3}, {3, 0}, {0, 2}, {5, 1}, {1, 4}, {4, 4}, {7, 2}, {1, 0}};

/* f traced over x [xdim, C], y [ydim, C] (-1 or a symbol each) and
 * compiled once (with its gradients when grad) against f over the bound
 * values; pairs with x shorter than minx or y than miny are skipped (the
 * op needs that many). */
static void dyn_check(const char *name, expr2 f, bool grad, int64_t xdim, int64_t ydim, int64_t minx, int64_t miny)
{
    const rlx_dtype dts[] = {RLX_F32, RLX_F64};
    EACH_BACKEND(b)
    {
        const char *be = b ? "jit" : "ref";
        for (int t = 0; t < 2; t++) {
            rlx_tensor *x = rlx_input("x", dts[t], 2, (int64_t[]){xdim, C});
            rlx_tensor *y = rlx_input("y", dts[t], 2, (int64_t[]){ydim, C}), *outs[4] = {0};
            int n = build(f, grad, x, y, outs);
            bool built = true;
            for (int o = 0; o < n; o++)
                built &= outs[o] != NULL;
            rlx_program *p = built ? rlx_compile(outs, n) : NULL;
            if (!p) {
                test_fail(__FILE__, __LINE__, "%s (%s, %s): %s", name, be, rlx_dtype_name(dts[t]), rlx_last_error());
                continue;
            }
            for (size_t k = 0; k < sizeof dyn_pairs / sizeof *dyn_pairs; k++) {
                int64_t nx = dyn_pairs[k][0], ny = dyn_pairs[k][1];
                if (nx < minx || ny < miny)
                    continue;
                rlx_tensor *xv = trand(dts[t], 2, (int64_t[]){nx, C}, -1, 1);
                rlx_tensor *yv = trand(dts[t], 2, (int64_t[]){ny, C}, -1, 1), *got[4] = {0}, *want[4] = {0};
                rlx_binding bind[2] = {{"x", xv}, {"y", yv}};
                if (rlx_program_run(p, bind, 2, got) != RLX_OK) {
                    test_fail(__FILE__, __LINE__, "%s (%s, %s) at (%lld, %lld): %s", name, be,
                              rlx_dtype_name(dts[t]), (long long)nx, (long long)ny, rlx_last_error());
                    continue;
                }
                CHECK_EQ_INT(rlx_set_option("backend", "ref"), RLX_OK);
                build(f, grad, xv, yv, want);
                for (int o = 0; o < n; o++) {
                    CHECK_EQ_INT(rlx_rank(got[o]), rlx_rank(want[o]));
                    for (int d = 0; d < rlx_rank(want[o]); d++)
                        CHECK_EQ_INT(rlx_dim(got[o], d), rlx_dim(want[o], d));
                    EXPECT_SAME(got[o], want[o], dts[t] == RLX_F32 ? 1e-4 : 1e-10);
                }
                if (grad && dts[t] == RLX_F64)
                    check_fd(name, f, xv, yv, got);
                CHECK_EQ_INT(rlx_set_option("backend", be), RLX_OK);
            }
            rlx_program_free(p);
        }
    }
}

#endif
