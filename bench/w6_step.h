/*
 * w6_step.h — the W6 workload (bench_w6.c, bench_threads.c): a training
 * step of a 784-512-512-10 ReLU MLP, batch 256, softmax cross-entropy,
 * SGD, f32, traced over rlx_input placeholders and compiled; its synthetic
 * data and initial parameters. Static definitions: one includer per
 * program.
 */
#ifndef RLX_BENCH_W6_STEP_H
#define RLX_BENCH_W6_STEP_H

#include <math.h>
#include <stdint.h>

#include "rlx.h"

enum { BATCH = 256, IN = 784, H = 512, OUT = 10, NPARAM = 6, NBATCH = 8 };
static const double LR = 0.01;

static const char *const param_names[NPARAM] = {"w1", "b1", "w2", "b2", "w3", "b3"};
static const int64_t param_shapes[NPARAM][2] = {{H, IN}, {H, 0}, {H, H}, {H, 0}, {OUT, H}, {OUT, 0}};
static int param_rank(int i) { return param_shapes[i][1] ? 2 : 1; }
static int64_t param_numel(int i) { return param_shapes[i][0] * (param_shapes[i][1] ? param_shapes[i][1] : 1); }

/* ------------------------------------------------------------ the data */

static uint64_t rng = 0x2545f4914f6cdd1dull;

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

static float xs_data[NBATCH][BATCH * IN];
static int32_t ys_data[NBATCH][BATCH];
static float init_params[NPARAM][H * IN];

static void make_data(void)
{
    static float teacher[IN * OUT];
    for (int i = 0; i < IN * OUT; i++)
        teacher[i] = (float)normal();
    for (int b = 0; b < NBATCH; b++) {
        for (int r = 0; r < BATCH; r++) {
            float *x = xs_data[b] + (size_t)r * IN;
            double score[OUT] = {0};
            for (int k = 0; k < IN; k++) {
                x[k] = (float)normal();
                for (int c = 0; c < OUT; c++)
                    score[c] += x[k] * teacher[k * OUT + c];
            }
            int best = 0;
            for (int c = 1; c < OUT; c++)
                if (score[c] > score[best])
                    best = c;
            ys_data[b][r] = best;
        }
    }
    for (int i = 0; i < NPARAM; i++) {
        double bound = param_rank(i) == 2 ? sqrt(6.0 / (double)param_shapes[i][1]) : 0;
        for (int64_t k = 0; k < param_numel(i); k++)
            init_params[i][k] = (float)((2 * uniform() - 1) * bound);
    }
}

/* ---------------------------------------------------------- the program */

static rlx_program *compile_step(void)
{
    rlx_scope_begin();
    const int64_t xsh[2] = {BATCH, IN}, ysh[1] = {BATCH};
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, xsh), *y = rlx_input("labels", RLX_I32, 1, ysh);
    rlx_tensor *p[NPARAM], *g[NPARAM], *out[1 + NPARAM];
    for (int i = 0; i < NPARAM; i++)
        p[i] = rlx_input(param_names[i], RLX_F32, param_rank(i), param_shapes[i]);
    rlx_tensor *h = rlx_linear_act(x, p[0], p[1], RLX_ACT_RELU);
    h = rlx_linear_act(h, p[2], p[3], RLX_ACT_RELU);
    rlx_tensor *logits = rlx_linear(h, p[4], p[5]);
    out[0] = rlx_mean_all(rlx_softmax_cross_entropy_with_logits(logits, y));
    if (rlx_grad(out[0], p, NPARAM, g) != RLX_OK) {
        rlx_scope_end();
        return NULL;
    }
    for (int i = 0; i < NPARAM; i++)
        out[1 + i] = rlx_sub(p[i], rlx_mul_s(g[i], LR));
    rlx_program *prog = rlx_compile(out, 1 + NPARAM);
    rlx_scope_end();
    return prog;
}

#endif
