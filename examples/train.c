/*
 * train.c — trains a multilayer perceptron end to end with librlx: three
 * interleaved spirals (3,000 points, fixed seed) classified by a
 * 2-64-64-3 tanh MLP with softmax cross-entropy and Adam.
 *
 * The whole training step (forward, rlx_grad backward, Adam update) is
 * traced once over rlx_input placeholders and compiled with rlx_compile;
 * each step binds the batch and the previous step's parameters and
 * moments, and its outputs are the next step's inputs (no copies). The
 * program prints the loss per epoch, the final train/test accuracy, the
 * time per step and the runtime counters, and exits with status 1 when
 * the test accuracy is below 95%.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx.h"
#include "spirals.h"

enum { BATCH = 200, EPOCHS = 60 };
static const double LR = 0.01, BETA1 = 0.9, BETA2 = 0.999, EPS = 1e-8;

/* A tensor holding host data: parameters start as real buffers (Glorot
 * uniform weights, zero biases), not constant expressions. */
static rlx_tensor *init_param(int i)
{
    int64_t n = param_numel(i);
    float *v = malloc((size_t)n * sizeof *v);
    double fan = param_rank(i) == 2 ? (double)(param_shapes[i][0] + param_shapes[i][1]) : 0;
    for (int64_t k = 0; k < n; k++)
        v[k] = fan ? (float)((2 * uniform() - 1) * sqrt(6.0 / fan)) : 0.0f;
    rlx_tensor *t = rlx_from_data(RLX_F32, param_rank(i), param_shapes[i], v);
    free(v);
    return t;
}

static rlx_tensor *zeros_param(int i)
{
    int64_t n = param_numel(i);
    float *v = calloc((size_t)n, sizeof *v);
    rlx_tensor *t = rlx_from_data(RLX_F32, param_rank(i), param_shapes[i], v);
    free(v);
    return t;
}

/* Traces one training step over placeholders and compiles it. Inputs:
 * x [B, 2], y [B] (i32), lr_t [] (Adam's bias-corrected rate), and the
 * parameters, first and second moments by name. Outputs: the mean loss,
 * then the new parameters, moments m, moments v (6 each). */
static rlx_program *compile_step(void)
{
    rlx_scope_begin();
    const int64_t xs[2] = {BATCH, 2}, ys[1] = {BATCH};
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, xs), *y = rlx_input("y", RLX_I32, 1, ys);
    rlx_tensor *lr_t = rlx_input("lr_t", RLX_F32, 0, NULL);
    rlx_tensor *p[NPARAM], *m[NPARAM], *v[NPARAM], *g[NPARAM];
    for (int i = 0; i < NPARAM; i++) {
        char name[16];
        p[i] = rlx_input(param_names[i], RLX_F32, param_rank(i), param_shapes[i]);
        snprintf(name, sizeof name, "m_%s", param_names[i]);
        m[i] = rlx_input(name, RLX_F32, param_rank(i), param_shapes[i]);
        snprintf(name, sizeof name, "v_%s", param_names[i]);
        v[i] = rlx_input(name, RLX_F32, param_rank(i), param_shapes[i]);
    }
    rlx_tensor *out[1 + 3 * NPARAM];
    out[0] = rlx_mean_all(rlx_softmax_cross_entropy_with_logits(forward(p, x), y));
    if (rlx_grad(out[0], p, NPARAM, g) != RLX_OK) {
        rlx_scope_end();
        return NULL;
    }
    for (int i = 0; i < NPARAM; i++) { /* Adam, with ordinary ops */
        rlx_tensor *m2 = rlx_add(rlx_mul_s(m[i], BETA1), rlx_mul_s(g[i], 1 - BETA1));
        rlx_tensor *v2 = rlx_add(rlx_mul_s(v[i], BETA2), rlx_mul_s(rlx_mul(g[i], g[i]), 1 - BETA2));
        rlx_tensor *step = rlx_mul(lr_t, rlx_div(m2, rlx_add_s(rlx_sqrt(v2), EPS)));
        out[1 + i] = rlx_sub(p[i], step);
        out[1 + NPARAM + i] = m2;
        out[1 + 2 * NPARAM + i] = v2;
    }
    rlx_program *prog = rlx_compile(out, 1 + 3 * NPARAM);
    rlx_scope_end();
    return prog;
}

int main(void)
{
    printf("librlx %s: 3 spirals, %d train / %d test points, MLP 2-%d-%d-3 (tanh), Adam lr %g, batch %d\n",
           rlx_version(), N_TRAIN, N_TEST, HIDDEN, HIDDEN, LR, BATCH);
    static float x[2 * N];
    static int32_t y[N];
    make_spirals(x, y);

    rlx_stats_reset();
    double t0 = now();
    rlx_program *prog = compile_step();
    if (!prog) {
        fprintf(stderr, "compile: %s\n", rlx_last_error());
        return 1;
    }
    printf("traced and compiled the training step in %.1f ms\n", (now() - t0) * 1e3);

    /* state[0..6) parameters, [6..12) m, [12..18) v: owned here. */
    rlx_tensor *state[3 * NPARAM];
    for (int i = 0; i < NPARAM; i++) {
        state[i] = init_param(i);
        state[NPARAM + i] = zeros_param(i);
        state[2 * NPARAM + i] = zeros_param(i);
    }
    rlx_binding bind[3 + 3 * NPARAM];
    char names[3 * NPARAM][16];
    for (int i = 0; i < NPARAM; i++) {
        snprintf(names[i], 16, "%s", param_names[i]);
        snprintf(names[NPARAM + i], 16, "m_%s", param_names[i]);
        snprintf(names[2 * NPARAM + i], 16, "v_%s", param_names[i]);
    }
    for (int i = 0; i < 3 * NPARAM; i++)
        bind[3 + i].name = names[i];
    bind[0].name = "x";
    bind[1].name = "y";
    bind[2].name = "lr_t";

    const int batches = N_TRAIN / BATCH;
    const int64_t xs[2] = {BATCH, 2}, ys[1] = {BATCH};
    int steps = 0, status = 0;
    double train_t0 = now();
    for (int epoch = 1; epoch <= EPOCHS && !status; epoch++) {
        double loss_sum = 0;
        for (int b = 0; b < batches; b++) {
            steps++;
            double lr_t = LR * sqrt(1 - pow(BETA2, steps)) / (1 - pow(BETA1, steps));
            rlx_tensor *res[1 + 3 * NPARAM];
            rlx_scope_begin(); /* the batch, the rate and the loss die with it */
            bind[0].value = rlx_from_data(RLX_F32, 2, xs, x + 2 * b * BATCH);
            bind[1].value = rlx_from_data(RLX_I32, 1, ys, y + b * BATCH);
            float lr_f = (float)lr_t; /* data, not a constant: the kernels stay the same each step */
            bind[2].value = rlx_from_data(RLX_F32, 0, NULL, &lr_f);
            for (int i = 0; i < 3 * NPARAM; i++)
                bind[3 + i].value = state[i];
            rlx_status st = rlx_program_run(prog, bind, 3 + 3 * NPARAM, res);
            double loss = NAN;
            if (st == RLX_OK) {
                rlx_item(res[0], &loss);
                for (int i = 0; i < 3 * NPARAM; i++)
                    rlx_escape(res[1 + i]); /* no enclosing scope: now owned here */
            }
            rlx_scope_end();
            if (st != RLX_OK) {
                fprintf(stderr, "step %d: %s\n", steps, rlx_last_error());
                status = 1;
                break;
            }
            release_all(state, 3 * NPARAM);
            memcpy(state, res + 1, sizeof state);
            loss_sum += loss;
        }
        if (epoch == 1 || epoch % 5 == 0)
            printf("epoch %3d  loss %.4f  train accuracy %.3f\n", epoch, loss_sum / batches,
                   accuracy(state, x, y, N_TRAIN));
        else
            printf("epoch %3d  loss %.4f\n", epoch, loss_sum / batches);
    }
    double train_s = now() - train_t0;
    double train_acc = accuracy(state, x, y, N_TRAIN);
    double test_acc = accuracy(state, x + 2 * N_TRAIN, y + N_TRAIN, N_TEST);
    rlx_stats_t s;
    rlx_stats(&s);
    printf("\ntrain accuracy %.1f%%, test accuracy %.1f%%\n", 100 * train_acc, 100 * test_acc);
    printf("%d steps in %.2f s: %.2f ms per step (forward, backward and Adam update)\n", steps, train_s,
           1e3 * train_s / steps);
    printf("runtime: %llu kernels compiled, %llu cache hits, %llu misses, %llu kernels run, peak %.1f KiB\n",
           (unsigned long long)s.kernels_compiled, (unsigned long long)s.cache_hits,
           (unsigned long long)s.cache_misses, (unsigned long long)s.kernels_run, s.peak_bytes / 1024.0);
    release_all(state, 3 * NPARAM);
    rlx_program_free(prog);
    if (!status && test_acc < 0.95) {
        fprintf(stderr, "test accuracy %.3f is below the 95%% target\n", test_acc);
        status = 1;
    }
    return status;
}
