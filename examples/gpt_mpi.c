/*
 * gpt_mpi.c — the GPT of examples/gpt_model.c trained data-parallel over
 * MPI (librlx_mpi): every rank takes its share of each batch's rows.
 *
 *   mpirun -np 2 rlx-gpt-mpi [--steps S] [--check] [--save PATH]
 *
 * Rank 0 initializes the parameters and broadcasts them. Each step every
 * rank makes the same global batch (gpt_make_batch: BATCH rows of SEQ
 * tokens, seeded by the step), runs the step's gradient program
 * (gpt_compile_split) on its BATCH / ranks rows, averages the loss and the
 * gradients with rlx_mpi_allreduce (RLX_MPI_MEAN: equal shards, so the mean
 * of the shard means is the batch mean) and runs the Adam program; every
 * rank then holds the same bits. Rank 0 prints the loss and writes the
 * parameters with rlx_save_safetensors (default gpt_mpi.safetensors).
 * --check: rank 0 also runs the gradient program of the whole batch on
 * the same parameters each step and compares (loss and every gradient
 * within 1e-4 of the largest magnitude: the summation orders differ).
 * Exit status 1 on every rank when a check fails or the loss does not
 * fall.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_model.h"
#include "rlx.h"
#include "rlx_mpi.h"

/* 12 rows split evenly over 1, 2, 3, 4 and 6 ranks. */
enum { BATCH = 12, SEQ = 16 };

static int fail(int rank, const char *what, const char *msg)
{
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, msg);
    return 1;
}

/* The largest |a - b| over n values of two f32 tensors, and max |b|. */
static void compare(rlx_tensor *a, rlx_tensor *b, int64_t n, double *diff, double *mag)
{
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    if (x && y && rlx_read_f32(a, x, (size_t)n) == RLX_OK && rlx_read_f32(b, y, (size_t)n) == RLX_OK)
        for (int64_t k = 0; k < n; k++) {
            *diff = fmax(*diff, fabs((double)x[k] - y[k]));
            *mag = fmax(*mag, fabs((double)y[k]));
        }
    else
        *diff = INFINITY;
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    int steps = 30, check = 0;
    const char *save = "gpt_mpi.safetensors";
    MPI_Init(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--check") == 0)
            check = 1;
        else if (strcmp(argv[i], "--save") == 0 && i + 1 < argc)
            save = argv[++i];
    }
    rlx_mpi_ctx *ctx = rlx_mpi_new(MPI_COMM_WORLD);
    if (!ctx) {
        fprintf(stderr, "rlx_mpi_new: %s\n", rlx_mpi_last_error());
        MPI_Finalize();
        return 1;
    }
    const int rank = rlx_mpi_rank(ctx), size = rlx_mpi_size(ctx);
    int status = 0;
    if (BATCH % size) {
        if (rank == 0)
            fprintf(stderr, "rlx-gpt-mpi: %d ranks do not divide the batch of %d rows\n", size, BATCH);
        rlx_mpi_free(ctx);
        MPI_Finalize();
        return 1;
    }
    const gpt_config whole = {.vocab = 32, .width = 32, .layers = 2, .heads = 2, .seq = SEQ, .batch = BATCH,
                              .dtype = RLX_F32, .lr = 3e-3};
    gpt_config shard = whole;
    shard.batch = BATCH / size;
    gpt_layout lay, lay_all;
    rlx_program *grads = NULL, *update = NULL, *grads_all = NULL;
    gpt_state st;
    memset(&st, 0, sizeof st);
    if (gpt_layout_make(&shard, &lay) != RLX_OK || gpt_layout_make(&whole, &lay_all) != RLX_OK ||
        gpt_compile_split(&lay, &grads, &update) != RLX_OK ||
        (check && rank == 0 && gpt_compile_split(&lay_all, &grads_all, NULL) != RLX_OK) ||
        gpt_state_init(&st, &lay, 1000 + (uint64_t)rank) != RLX_OK) { /* rank 0's values win below */
        status = fail(rank, "setup", rlx_last_error());
        goto out;
    }
    const int np = lay.nparam;
    rlx_tensor *p[GPT_MAX_PARAMS];
    if (rlx_mpi_broadcast(ctx, 0, np, st.p, p) != RLX_OK) {
        status = fail(rank, "broadcast", rlx_mpi_last_error());
        goto out;
    }
    for (int i = 0; i < np; i++) {
        rlx_release(st.p[i]);
        st.p[i] = rlx_escape(p[i]);
    }
    int32_t tv[BATCH * SEQ], yv[BATCH * SEQ];
    const int64_t rows = (int64_t)shard.batch * SEQ, all = (int64_t)BATCH * SEQ;
    double first = NAN, last = NAN, worst = 0;
    for (int s = 1; s <= steps && !status; s++) {
        rlx_scope_begin();
        gpt_make_batch(&whole, (uint64_t)s, tv, yv);
        rlx_binding b[2 + 4 * GPT_MAX_PARAMS];
        b[0] = (rlx_binding){"tokens", rlx_from_data(RLX_I32, 1, &rows, tv + rank * rows)};
        b[1] = (rlx_binding){"targets", rlx_from_data(RLX_I32, 1, &rows, yv + rank * rows)};
        for (int i = 0; i < np; i++)
            b[2 + i] = (rlx_binding){lay.name[i], st.p[i]};
        rlx_tensor *g[1 + GPT_MAX_PARAMS], *mean[1 + GPT_MAX_PARAMS];
        if (rlx_program_run(grads, b, 2 + np, g) != RLX_OK) {
            status = fail(rank, "gradients", rlx_last_error());
        } else if (rlx_mpi_allreduce(ctx, 1 + np, g, RLX_MPI_MEAN, mean) != RLX_OK) {
            status = fail(rank, "allreduce", rlx_mpi_last_error());
        } else {
            double loss = NAN;
            rlx_item(mean[0], &loss);
            first = s == 1 ? loss : first;
            last = loss;
            if (grads_all) { /* the one-process gradients of the whole batch */
                rlx_tensor *ga[1 + GPT_MAX_PARAMS];
                b[0].value = rlx_from_data(RLX_I32, 1, &all, tv);
                b[1].value = rlx_from_data(RLX_I32, 1, &all, yv);
                if (rlx_program_run(grads_all, b, 2 + np, ga) != RLX_OK) {
                    status = fail(rank, "whole-batch gradients", rlx_last_error());
                } else {
                    for (int i = 0; i <= np; i++) {
                        double diff = 0, mag = 0;
                        compare(mean[i], ga[i], i ? lay.numel[i - 1] : 1, &diff, &mag);
                        worst = fmax(worst, diff / fmax(mag, 1e-30));
                    }
                    if (!(worst <= 1e-4))
                        status = fail(rank, "check", "data-parallel and whole-batch gradients differ");
                }
            }
            rlx_tensor *t = rlx_scalar(RLX_F32, (double)s), *upd[3 * GPT_MAX_PARAMS];
            rlx_binding u[1 + 4 * GPT_MAX_PARAMS];
            char gname[GPT_MAX_PARAMS][GPT_NAME_CAP + 2];
            u[0] = (rlx_binding){"step", t};
            for (int i = 0; i < np; i++) {
                snprintf(gname[i], sizeof gname[i], "g.%s", lay.name[i]);
                u[1 + i] = (rlx_binding){lay.name[i], st.p[i]};
                u[1 + np + i] = (rlx_binding){gname[i], mean[1 + i]};
                u[1 + 2 * np + i] = (rlx_binding){lay.m_name[i], st.m[i]};
                u[1 + 3 * np + i] = (rlx_binding){lay.v_name[i], st.v[i]};
            }
            if (!status && rlx_program_run(update, u, 1 + 4 * np, upd) != RLX_OK) {
                status = fail(rank, "update", rlx_last_error());
            } else if (!status) {
                for (int i = 0; i < np; i++) {
                    rlx_release(st.p[i]);
                    rlx_release(st.m[i]);
                    rlx_release(st.v[i]);
                    st.p[i] = rlx_escape(upd[i]);
                    st.m[i] = rlx_escape(upd[np + i]);
                    st.v[i] = rlx_escape(upd[2 * np + i]);
                }
                if (rank == 0 && (s == 1 || s % 10 == 0 || s == steps))
                    printf("step %3d  loss %.4f\n", s, loss);
            }
        }
        rlx_scope_end();
    }
    if (!status && !(last < first))
        status = fail(rank, "training", "the loss did not fall");
    if (!status && rank == 0) {
        const char *names[GPT_MAX_PARAMS];
        for (int i = 0; i < np; i++)
            names[i] = lay.name[i];
        if (rlx_save_safetensors(save, np, names, st.p) != RLX_OK)
            status = fail(rank, "save", rlx_last_error());
        else
            printf("%d ranks x %d rows: loss %.4f -> %.4f over %d steps; saved %s\n", size, shard.batch, first, last,
                   steps, save);
        if (grads_all)
            printf("check: data-parallel gradients within %.2g (relative to the largest) of the whole batch's\n",
                   worst);
    }
out:
    gpt_state_free(&st);
    rlx_program_free(grads);
    rlx_program_free(update);
    rlx_program_free(grads_all);
    /* every rank exits with the worst status */
    int any = status;
    MPI_Allreduce(&status, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    rlx_mpi_free(ctx);
    MPI_Finalize();
    return any;
}
