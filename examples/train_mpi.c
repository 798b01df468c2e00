/*
 * train_mpi.c — examples/train.c data-parallel over MPI (librlx_mpi):
 * the same three spirals and 2-64-64-3 tanh MLP with softmax
 * cross-entropy and Adam, trained by every rank of MPI_COMM_WORLD.
 *
 *   mpirun -np 2 rlx-train-mpi [checkpoint.safetensors]
 *
 * Rank 0 initializes the parameters and broadcasts them; every rank
 * makes the same data set (fixed seed) and takes its shard of each batch
 * (BATCH / ranks rows); the gradients and the loss are averaged with
 * rlx_mpi_allreduce (RLX_MPI_MEAN), so every rank applies the same Adam
 * update to the same parameters (bitwise: the allreduce gives every rank
 * the same bits). Two compiled programs: the shard's loss and gradients,
 * and the Adam update. Rank 0 prints the loss per epoch and the
 * accuracies and writes the trained parameters with rlx_save_safetensors
 * (default train_mpi.safetensors). Exit status 1 on every rank when the
 * test accuracy is below 95%.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx.h"
#include "rlx_mpi.h"
#include "spirals.h"

/* 240 splits evenly over 1, 2, 3, 4, 5, 6 and 8 ranks. */
enum { BATCH = 240, EPOCHS = 60 };
static const double LR = 0.01, BETA1 = 0.9, BETA2 = 0.999, EPS = 1e-8;

/* Glorot-uniform weights and zero biases on rank 0; the others hold
 * zeros of the same layout until the broadcast. */
static rlx_tensor *init_param(int i, int rank)
{
    int64_t n = param_numel(i);
    float *v = calloc((size_t)n, sizeof *v);
    double fan = param_rank(i) == 2 ? (double)(param_shapes[i][0] + param_shapes[i][1]) : 0;
    for (int64_t k = 0; rank == 0 && fan && k < n; k++)
        v[k] = (float)((2 * uniform() - 1) * sqrt(6.0 / fan));
    rlx_tensor *t = rlx_from_data(RLX_F32, param_rank(i), param_shapes[i], v);
    free(v);
    return t;
}

/* The shard's step: inputs x [b, 2], y [b] and the parameters; outputs
 * the mean loss, then the 6 gradients. */
static rlx_program *compile_grads(int b)
{
    rlx_scope_begin();
    const int64_t xs[2] = {b, 2}, ys[1] = {b};
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, xs), *y = rlx_input("y", RLX_I32, 1, ys);
    rlx_tensor *p[NPARAM], *out[1 + NPARAM];
    for (int i = 0; i < NPARAM; i++)
        p[i] = rlx_input(param_names[i], RLX_F32, param_rank(i), param_shapes[i]);
    out[0] = rlx_mean_all(rlx_softmax_cross_entropy_with_logits(forward(p, x), y));
    rlx_program *prog = rlx_grad(out[0], p, NPARAM, out + 1) == RLX_OK ? rlx_compile(out, 1 + NPARAM) : NULL;
    rlx_scope_end();
    return prog;
}

/* Adam: inputs lr_t, p_i, m_i, v_i, g_i; outputs new p, m, v (6 each). */
static rlx_program *compile_adam(void)
{
    rlx_scope_begin();
    rlx_tensor *lr_t = rlx_input("lr_t", RLX_F32, 0, NULL), *out[3 * NPARAM];
    for (int i = 0; i < NPARAM; i++) {
        char name[16];
        rlx_tensor *p = rlx_input(param_names[i], RLX_F32, param_rank(i), param_shapes[i]);
        snprintf(name, sizeof name, "m_%s", param_names[i]);
        rlx_tensor *m = rlx_input(name, RLX_F32, param_rank(i), param_shapes[i]);
        snprintf(name, sizeof name, "v_%s", param_names[i]);
        rlx_tensor *v = rlx_input(name, RLX_F32, param_rank(i), param_shapes[i]);
        snprintf(name, sizeof name, "g_%s", param_names[i]);
        rlx_tensor *g = rlx_input(name, RLX_F32, param_rank(i), param_shapes[i]);
        rlx_tensor *m2 = rlx_add(rlx_mul_s(m, BETA1), rlx_mul_s(g, 1 - BETA1));
        rlx_tensor *v2 = rlx_add(rlx_mul_s(v, BETA2), rlx_mul_s(rlx_mul(g, g), 1 - BETA2));
        out[i] = rlx_sub(p, rlx_mul(lr_t, rlx_div(m2, rlx_add_s(rlx_sqrt(v2), EPS))));
        out[NPARAM + i] = m2;
        out[2 * NPARAM + i] = v2;
    }
    rlx_program *prog = rlx_compile(out, 3 * NPARAM);
    rlx_scope_end();
    return prog;
}

/* One epoch over the rank's shards; returns the mean loss (over the whole
 * batches), NAN on error. state: parameters, m, v (replaced). */
static double epoch(rlx_mpi_ctx *ctx, rlx_program *grads, rlx_program *adam, rlx_tensor **state, const float *x,
                    const int32_t *y, int *steps)
{
    const int P = rlx_mpi_size(ctx), R = rlx_mpi_rank(ctx), shard = BATCH / P;
    const int64_t xs[2] = {shard, 2}, ys[1] = {shard};
    double loss_sum = 0;
    for (int b = 0; b < N_TRAIN / BATCH; b++) {
        ++*steps;
        int row = b * BATCH + R * shard;
        rlx_scope_begin(); /* this step's temporaries */
        rlx_binding gb[2 + NPARAM] = {{"x", rlx_from_data(RLX_F32, 2, xs, x + 2 * row)},
                                      {"y", rlx_from_data(RLX_I32, 1, ys, y + row)}};
        for (int i = 0; i < NPARAM; i++)
            gb[2 + i] = (rlx_binding){param_names[i], state[i]};
        rlx_tensor *local[1 + NPARAM], *mean[1 + NPARAM], *next[3 * NPARAM];
        rlx_status st = rlx_program_run(grads, gb, 2 + NPARAM, local);
        const char *err = st != RLX_OK ? rlx_last_error() : NULL;
        if (st == RLX_OK && (st = rlx_mpi_allreduce(ctx, 1 + NPARAM, local, RLX_MPI_MEAN, mean)) != RLX_OK)
            err = rlx_mpi_last_error();
        double loss = NAN;
        if (st == RLX_OK) {
            float lr_f = (float)(LR * sqrt(1 - pow(BETA2, *steps)) / (1 - pow(BETA1, *steps)));
            rlx_binding ab[1 + 4 * NPARAM] = {{"lr_t", rlx_from_data(RLX_F32, 0, NULL, &lr_f)}};
            char names[3 * NPARAM][16];
            for (int i = 0; i < NPARAM; i++) {
                snprintf(names[i], 16, "m_%s", param_names[i]);
                snprintf(names[NPARAM + i], 16, "v_%s", param_names[i]);
                snprintf(names[2 * NPARAM + i], 16, "g_%s", param_names[i]);
                ab[1 + i] = (rlx_binding){param_names[i], state[i]};
                ab[1 + NPARAM + i] = (rlx_binding){names[i], state[NPARAM + i]};
                ab[1 + 2 * NPARAM + i] = (rlx_binding){names[NPARAM + i], state[2 * NPARAM + i]};
                ab[1 + 3 * NPARAM + i] = (rlx_binding){names[2 * NPARAM + i], mean[1 + i]};
            }
            st = rlx_program_run(adam, ab, 1 + 4 * NPARAM, next);
            if (st != RLX_OK)
                err = rlx_last_error();
            else {
                rlx_item(mean[0], &loss);
                for (int i = 0; i < 3 * NPARAM; i++)
                    rlx_escape(next[i]);
            }
        }
        if (err)
            fprintf(stderr, "rank %d, step %d: %s\n", R, *steps, err);
        rlx_scope_end();
        if (st != RLX_OK)
            return NAN;
        release_all(state, 3 * NPARAM);
        memcpy(state, next, sizeof next);
        loss_sum += loss;
    }
    return loss_sum / (N_TRAIN / BATCH);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    rlx_mpi_ctx *ctx = rlx_mpi_new(MPI_COMM_WORLD);
    if (!ctx) {
        fprintf(stderr, "rlx_mpi_new: %s\n", rlx_mpi_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const int P = rlx_mpi_size(ctx), R = rlx_mpi_rank(ctx);
    const char *ckpt = argc > 1 ? argv[1] : "train_mpi.safetensors";
    if (BATCH % P) {
        if (R == 0)
            fprintf(stderr, "batch %d does not split evenly over %d ranks\n", BATCH, P);
        rlx_mpi_free(ctx);
        MPI_Finalize();
        return 1;
    }
    if (R == 0)
        printf("librlx %s on %d ranks: 3 spirals, %d train / %d test points, MLP 2-%d-%d-3 (tanh), Adam lr %g, "
               "batch %d (%d per rank)\n",
               rlx_version(), P, N_TRAIN, N_TEST, HIDDEN, HIDDEN, LR, BATCH, BATCH / P);
    static float x[2 * N];
    static int32_t y[N];
    make_spirals(x, y);

    rlx_program *grads = compile_grads(BATCH / P), *adam = compile_adam();
    /* state[0..6) parameters, [6..12) m, [12..18) v: owned here. */
    rlx_tensor *state[3 * NPARAM], *init[NPARAM];
    for (int i = 0; i < NPARAM; i++) {
        init[i] = init_param(i, R);
        state[NPARAM + i] = rlx_zeros(RLX_F32, param_rank(i), param_shapes[i]);
        state[2 * NPARAM + i] = rlx_zeros(RLX_F32, param_rank(i), param_shapes[i]);
    }
    int status = 0;
    if (!grads || !adam) {
        fprintf(stderr, "rank %d: compile: %s\n", R, rlx_last_error());
        status = 1;
    }
    /* Collective even after a local failure: it then fails on every rank. */
    if (rlx_mpi_broadcast(ctx, 0, status ? -1 : NPARAM, init, state) != RLX_OK) {
        fprintf(stderr, "rank %d: %s\n", R, rlx_mpi_last_error());
        status = 1;
    }
    release_all(init, NPARAM);

    int steps = 0;
    double t0 = now();
    for (int e = 1; e <= EPOCHS && !status; e++) {
        double loss = epoch(ctx, grads, adam, state, x, y, &steps);
        if (isnan(loss))
            status = 1;
        else if (R == 0 && (e == 1 || e % 10 == 0))
            printf("epoch %3d  loss %.4f  train accuracy %.3f\n", e, loss, accuracy(state, x, y, N_TRAIN));
    }
    double train_s = now() - t0;
    if (!status) {
        /* Every rank holds the same parameters, so the same accuracy. */
        double test_acc = accuracy(state, x + 2 * N_TRAIN, y + N_TRAIN, N_TEST);
        if (R == 0) {
            printf("\ntrain accuracy %.1f%%, test accuracy %.1f%%\n", 100 * accuracy(state, x, y, N_TRAIN),
                   100 * test_acc);
            printf("%d steps in %.2f s: %.2f ms per step (shard gradients, allreduce, Adam)\n", steps, train_s,
                   1e3 * train_s / steps);
            if (rlx_save_safetensors(ckpt, NPARAM, param_names, state) != RLX_OK) {
                fprintf(stderr, "save: %s\n", rlx_last_error());
                status = 1;
            } else
                printf("rank 0 wrote %s\n", ckpt);
        }
        if (test_acc < 0.95) {
            if (R == 0)
                fprintf(stderr, "test accuracy %.3f is below the 95%% target\n", test_acc);
            status = 1;
        }
    }
    release_all(state, 3 * NPARAM); /* NULL entries are no-ops */
    rlx_program_free(grads);
    rlx_program_free(adam);
    rlx_mpi_free(ctx);
    MPI_Finalize();
    return status;
}
