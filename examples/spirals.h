/*
 * spirals.h — what examples/train.c and its data-parallel twin
 * examples/train_mpi.c share: the clock, the three-spiral data set (a
 * fixed xorshift seed, so every process makes the same set) and the
 * 2-64-64-3 tanh MLP's parameter layout, forward and accuracy. Static functions:
 * each example includes it once.
 */
#ifndef RLX_EXAMPLES_SPIRALS_H
#define RLX_EXAMPLES_SPIRALS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rlx.h"

enum { CLASSES = 3, PER_CLASS = 1000, N = CLASSES * PER_CLASS, N_TRAIN = 2400, N_TEST = N - N_TRAIN };
enum { HIDDEN = 64, NPARAM = 6 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------ the data */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double uniform(void) /* [0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

static double normal(void)
{
    double u = uniform(), v = uniform();
    return sqrt(-2 * log(1 - u)) * cos(6.283185307179586 * v);
}

/* Three arms of a spiral, radius 0..1, each turning 4 radians, with
 * Gaussian noise on the angle (the CS231n set). Shuffled. */
static void make_spirals(float *x, int32_t *y)
{
    for (int c = 0; c < CLASSES; c++) {
        for (int i = 0; i < PER_CLASS; i++) {
            double r = (double)i / (PER_CLASS - 1);
            double t = c * 4.0 + r * 4.0 + 0.2 * normal();
            int k = c * PER_CLASS + i;
            x[2 * k] = (float)(r * sin(t));
            x[2 * k + 1] = (float)(r * cos(t));
            y[k] = c;
        }
    }
    for (int k = N - 1; k > 0; k--) {
        int j = (int)(uniform() * (k + 1));
        float tx = x[2 * k], ty = x[2 * k + 1];
        int32_t tl = y[k];
        x[2 * k] = x[2 * j];
        x[2 * k + 1] = x[2 * j + 1];
        y[k] = y[j];
        x[2 * j] = tx;
        x[2 * j + 1] = ty;
        y[j] = tl;
    }
}

/* ----------------------------------------------------------- the model */

static const char *const param_names[NPARAM] = {"w1", "b1", "w2", "b2", "w3", "b3"};
static const int64_t param_shapes[NPARAM][2] = {{HIDDEN, 2}, {HIDDEN, 0}, {HIDDEN, HIDDEN},
                                                {HIDDEN, 0}, {CLASSES, HIDDEN}, {CLASSES, 0}};
static int param_rank(int i) { return param_shapes[i][1] ? 2 : 1; }
static int64_t param_numel(int i) { return param_shapes[i][0] * (param_shapes[i][1] ? param_shapes[i][1] : 1); }

/* logits [n, 3] of the MLP with parameters p[6] on x [n, 2]. */
static rlx_tensor *forward(rlx_tensor *const *p, rlx_tensor *x)
{
    rlx_tensor *h = rlx_linear_act(x, p[0], p[1], RLX_ACT_TANH);
    h = rlx_linear_act(h, p[2], p[3], RLX_ACT_TANH);
    return rlx_linear(h, p[4], p[5]);
}

/* Fraction of rows of x [n, 2] whose argmax logit is the label. */
static double accuracy(rlx_tensor *const *p, const float *x, const int32_t *y, int n)
{
    rlx_scope_begin();
    const int64_t xs[2] = {n, 2};
    rlx_tensor *pred = rlx_argmax(forward(p, rlx_from_data(RLX_F32, 2, xs, x)), 1, false);
    int64_t *cls = malloc((size_t)n * sizeof *cls);
    int right = 0;
    if (rlx_read(pred, cls, (size_t)n * sizeof *cls) == RLX_OK)
        for (int i = 0; i < n; i++)
            right += cls[i] == y[i];
    else
        fprintf(stderr, "accuracy: %s\n", rlx_last_error());
    free(cls);
    rlx_scope_end();
    return (double)right / n;
}

static void release_all(rlx_tensor **t, int n)
{
    for (int i = 0; i < n; i++)
        rlx_release(t[i]);
}

#endif
