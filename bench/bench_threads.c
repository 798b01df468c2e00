/*
 * bench_threads.c — rlx-bench-threads: how much faster a training step
 * runs on two threads than on one, measured in one process, interleaved.
 *
 *   rlx-bench-threads [--config a|b|w6|w6gemm|all] [--rounds R (7)] [--steps S (10)] [--warmup W (3)]
 *                     [--spins US,US,...]   (2-thread modes with these spins instead)
 *                     [--split-ab]          (modes 1t, 1t-split0, 2t, 2t-split0: the
 *                                            GEMM block rule of kernels/blas.c against
 *                                            the one before it, rt_blas_set_wide_split 0)
 *
 * Workloads: W10a, W10b (the GPT steps of bench_w10.c, examples/
 * gpt_model.c), W6 (the MLP step, w6_step.h) and W6-GEMMs (its eight
 * GEMMs alone, through librlx: w6gemm_init). Each round runs S steps in
 * every mode below, the modes in a rotating order, on the same program and
 * state (rlx_set_num_threads is read at each run; GEMMs run OpenBLAS at one
 * thread on librlx's pool at any count, kernels/blas.c). A mode's figure is
 * its best round median; the ratios are 1-thread time over a mode's time,
 * best of rounds, and the median over rounds of the ratio within a round
 * (paired: both measured under the same load). On a shared machine only
 * these ratios mean anything, never a lone time.
 *
 * Modes (white-box: the pool's knobs, through the static library):
 *   1t       one thread
 *   2t-old   two threads, the pool as it was: workers and the waiting caller
 *            sleep at once (spin 0)
 *   2t       two threads, the defaults (adaptive spin, pool.c)
 * Also per mode: split jobs per step and the share a worker joined
 * (rt_pool_counts), and the process's CPU time per step (best round
 * median; at one thread the steadier figure on a loaded machine, at two it
 * includes the pool's spinning).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpt_model.h"
#include "runtime/exec/pool.h"
#include "runtime/rt.h"
#include "bench_util.h"
#include "w6_step.h"

enum { MAXR = 64, MAXMODE = 8, NB = 4 };

typedef struct {
    char name[24];
    int threads;
    long spin_us;   /* rt_pool_set_spin_us */
    long long split; /* rt_blas_set_wide_split */
} mode;

static mode modes[MAXMODE] = {{"1t", 1, -1, -1}, {"2t-old", 2, 0, -1}, {"2t", 2, -1, -1}};
static int NMODE = 3;

static void set_mode(const mode *m)
{
    rlx_set_num_threads(m->threads);
    rt_pool_set_spin_us(m->spin_us);
    rt_blas_set_wide_split(m->split);
}

/* A workload: one step k (batches used in turn); nonzero on failure. */
typedef struct {
    const char *name;
    int (*step)(void *w, int k);
    void *w;
} workload;

/* ------------------------------------------------------------------ W10 */

typedef struct {
    rlx_program *prog;
    gpt_state st;
    gpt_layout lay;
    rlx_tensor *tok[NB], *tgt[NB];
} w10;

static int w10_step(void *arg, int k)
{
    w10 *w = arg;
    return gpt_step(w->prog, &w->st, w->tok[k % NB], w->tgt[k % NB], NULL) != RLX_OK;
}

static int w10_init(w10 *w, const gpt_config *c)
{
    if (gpt_layout_make(c, &w->lay) != RLX_OK)
        return 1;
    const int64_t n = (int64_t)c->batch * c->seq;
    int32_t *tv = malloc((size_t)n * sizeof *tv), *yv = malloc((size_t)n * sizeof *yv);
    for (int b = 0; b < NB; b++) {
        gpt_make_batch(c, (uint64_t)(100 + b), tv, yv);
        w->tok[b] = rlx_from_data(RLX_I32, 1, &n, tv);
        w->tgt[b] = rlx_from_data(RLX_I32, 1, &n, yv);
    }
    free(tv);
    free(yv);
    w->prog = gpt_compile_step(&w->lay);
    return !w->prog || gpt_state_init(&w->st, &w->lay, 1) != RLX_OK;
}

/* ------------------------------------------------------------------- W6 */

typedef struct {
    rlx_program *prog;
    rlx_tensor *x[NBATCH], *y[NBATCH], *p[NPARAM];
} w6;

static int w6_step(void *arg, int k)
{
    w6 *w = arg;
    rlx_binding bind[2 + NPARAM] = {{"x", w->x[k % NBATCH]}, {"labels", w->y[k % NBATCH]}};
    for (int i = 0; i < NPARAM; i++)
        bind[2 + i] = (rlx_binding){param_names[i], w->p[i]};
    rlx_tensor *out[1 + NPARAM];
    if (rlx_program_run(w->prog, bind, 2 + NPARAM, out) != RLX_OK)
        return 1;
    rlx_release(out[0]);
    for (int i = 0; i < NPARAM; i++) {
        rlx_release(w->p[i]);
        w->p[i] = out[1 + i];
    }
    return 0;
}

static int w6_init(w6 *w)
{
    make_data();
    const int64_t xsh[2] = {BATCH, IN}, ysh[1] = {BATCH};
    for (int b = 0; b < NBATCH; b++) {
        w->x[b] = rlx_from_data(RLX_F32, 2, xsh, xs_data[b]);
        w->y[b] = rlx_from_data(RLX_I32, 1, ysh, ys_data[b]);
    }
    for (int i = 0; i < NPARAM; i++)
        w->p[i] = rlx_from_data(RLX_F32, param_rank(i), param_shapes[i], init_params[i]);
    w->prog = compile_step();
    return !w->prog;
}

/* W6's GEMMs alone, through librlx (its block split on the pool, as in
 * the step): the 3 forward and 5 backward products of the step's shapes
 * as one compiled program over random operands. Its speedup at two threads
 * is what W6's GEMMs allow the step (w6gemm in --config). */
enum { NGEMM_IN = 9, NGEMM_OUT = 8 };

typedef struct {
    rlx_program *prog;
    rlx_tensor *in[NGEMM_IN];
} w6gemm;

static const char *const gemm_names[NGEMM_IN] = {"x", "w1", "w2", "w3", "h1", "h2", "g1", "g2", "g3"};
static const int64_t gemm_shapes[NGEMM_IN][2] = {{BATCH, IN}, {H, IN}, {H, H},   {OUT, H},  {BATCH, H},
                                                 {BATCH, H},  {BATCH, H}, {BATCH, H}, {BATCH, OUT}};

static int w6gemm_step(void *arg, int k)
{
    (void)k;
    w6gemm *w = arg;
    rlx_binding bind[NGEMM_IN];
    for (int i = 0; i < NGEMM_IN; i++)
        bind[i] = (rlx_binding){gemm_names[i], w->in[i]};
    rlx_tensor *out[NGEMM_OUT];
    if (rlx_program_run(w->prog, bind, NGEMM_IN, out) != RLX_OK)
        return 1;
    for (int i = 0; i < NGEMM_OUT; i++)
        rlx_release(out[i]);
    return 0;
}

static int w6gemm_init(w6gemm *w)
{
    rlx_scope_begin();
    rlx_tensor *v[NGEMM_IN], *out[NGEMM_OUT];
    for (int i = 0; i < NGEMM_IN; i++)
        v[i] = rlx_input(gemm_names[i], RLX_F32, 2, gemm_shapes[i]);
    /* x W1^T, h1 W2^T, h2 W3^T; dW3 = g3^T h2, dh2 = g3 W3, dW2 = g2^T h1, dh1 = g2 W2, dW1 = g1^T x */
    out[0] = rlx_matmul_t(v[0], v[1]);
    out[1] = rlx_matmul_t(v[4], v[2]);
    out[2] = rlx_matmul_t(v[5], v[3]);
    out[3] = rlx_matmul(rlx_t(v[8]), v[5]);
    out[4] = rlx_matmul(v[8], v[3]);
    out[5] = rlx_matmul(rlx_t(v[7]), v[4]);
    out[6] = rlx_matmul(v[7], v[2]);
    out[7] = rlx_matmul(rlx_t(v[6]), v[0]);
    w->prog = rlx_compile(out, NGEMM_OUT);
    rlx_scope_end();
    for (int i = 0; i < NGEMM_IN; i++) {
        int64_t n = gemm_shapes[i][0] * gemm_shapes[i][1];
        float *d = malloc((size_t)n * sizeof *d);
        for (int64_t j = 0; j < n; j++)
            d[j] = (float)(2 * uniform() - 1);
        w->in[i] = rlx_from_data(RLX_F32, 2, gemm_shapes[i], d);
        free(d);
    }
    return !w->prog;
}

/* ------------------------------------------------------------- the runs */

static int measure(const workload *wl, int rounds, int steps, int warmup)
{
    static double t[MAXMODE][MAXR], c[MAXMODE][MAXR], tr[MAXR * 64], cr[MAXR * 64];
    uint64_t jobs[MAXMODE] = {0}, joins[MAXMODE] = {0};
    char l0[64], l1[64];
    loadavg(l0, sizeof l0);
    for (int m = 0; m < NMODE; m++) {
        set_mode(&modes[m]);
        for (int s = 0; s < warmup; s++)
            if (wl->step(wl->w, s))
                return 1;
    }
    int k = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < NMODE; i++) {
            int m = (i + r) % NMODE;
            set_mode(&modes[m]);
            uint64_t j0, n0, j1, n1;
            rt_pool_counts(&j0, &n0);
            for (int s = 0; s < steps; s++) {
                double a = now(), ca = cpu_now();
                if (wl->step(wl->w, k++)) {
                    fprintf(stderr, "%s: step failed: %s\n", wl->name, rlx_last_error());
                    return 1;
                }
                tr[s] = now() - a;
                cr[s] = cpu_now() - ca;
            }
            rt_pool_counts(&j1, &n1);
            jobs[m] += j1 - j0;
            joins[m] += n1 - n0;
            t[m][r] = median(tr, steps);
            c[m][r] = median(cr, steps);
        }
    }
    set_mode(&modes[NMODE - 1]);
    loadavg(l1, sizeof l1);
    double best[MAXMODE], cbest[MAXMODE];
    for (int m = 0; m < NMODE; m++) {
        best[m] = t[m][0];
        cbest[m] = c[m][0];
        for (int r = 1; r < rounds; r++) {
            best[m] = t[m][r] < best[m] ? t[m][r] : best[m];
            cbest[m] = c[m][r] < cbest[m] ? c[m][r] : cbest[m];
        }
    }
    printf("%s: %d rounds x %d steps, load %s -> %s\n", wl->name, rounds, steps, l0, l1);
    for (int m = 0; m < NMODE; m++) {
        double paired[MAXR];
        for (int r = 0; r < rounds; r++)
            paired[r] = t[0][r] / t[m][r];
        printf("  %-9s best %8.3f ms  speedup best %.3f  paired median %.3f  CPU %8.3f ms  jobs/step %6.1f  "
               "worker joined %5.1f%%\n",
               modes[m].name, 1e3 * best[m], best[0] / best[m], median(paired, rounds), 1e3 * cbest[m],
               (double)jobs[m] / (rounds * steps), jobs[m] ? 100.0 * (double)joins[m] / (double)jobs[m] : 0.0);
    }
    if (NMODE == 4 && modes[1].split == 0) /* --split-ab */
        printf("SPLIT-RESULT workload=%s cpu_1t_new_over_old=%.3f wall_1t_new_over_old=%.3f speedup_2t_new=%.3f "
               "speedup_2t_old=%.3f wall_2t_new_over_old=%.3f load=%s\n",
               wl->name, cbest[0] / cbest[1], best[0] / best[1], best[0] / best[2], best[1] / best[3],
               best[2] / best[3], l1);
    else if (NMODE == 3)
        printf("THREADS-RESULT workload=%s speedup_old=%.3f speedup_new=%.3f new_over_old=%.3f load=%s\n", wl->name,
               best[0] / best[1], best[0] / best[2], best[1] / best[2], l1);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = 7, steps = 10, warmup = 3;
    const char *cfg = "all";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            cfg = argv[++i];
        else if (strcmp(argv[i], "--split-ab") == 0) {
            modes[1] = (mode){"1t-split0", 1, -1, 0};
            modes[2] = (mode){"2t", 2, -1, -1};
            modes[3] = (mode){"2t-split0", 2, -1, 0};
            NMODE = 4;
        } else if (strcmp(argv[i], "--spins") == 0 && i + 1 < argc) { /* 2-thread modes: one per spin (us) */
            NMODE = 1;
            for (char *tok = strtok(argv[++i], ","); tok && NMODE < MAXMODE; tok = strtok(NULL, ",")) {
                modes[NMODE] = (mode){"", 2, atol(tok), -1};
                snprintf(modes[NMODE].name, sizeof modes[NMODE].name, "2t-s%ld", modes[NMODE].spin_us);
                NMODE++;
            }
        }
        else {
            fprintf(stderr, "usage: %s [--config a|b|w6|w6gemm|all] [--rounds R] [--steps S] [--warmup W] [--spins US,...] "
                    "[--split-ab]\n", argv[0]);
            return 64;
        }
    }
    rounds = rounds < 1 ? 1 : rounds > MAXR ? MAXR : rounds;
    steps = steps < 1 ? 1 : steps > 64 ? 64 : steps;
    bool all = strcmp(cfg, "all") == 0;
    int rc = 0;
    const gpt_config ca = {.vocab = 96, .width = 128, .layers = 2, .heads = 4, .seq = 64, .batch = 16, .dtype = RLX_F32},
                     cb = {.vocab = 256, .width = 256, .layers = 4, .heads = 8, .seq = 128, .batch = 8, .dtype = RLX_F32};
    for (int c = 0; c < 2; c++) {
        if (!all && strcmp(cfg, c ? "b" : "a") != 0)
            continue;
        static w10 w;
        if (w10_init(&w, c ? &cb : &ca)) {
            fprintf(stderr, "W10%c: %s\n", 'a' + c, rlx_last_error());
            return 1;
        }
        workload wl = {c ? "W10b" : "W10a", w10_step, &w};
        rc |= measure(&wl, rounds, steps, warmup);
        gpt_state_free(&w.st);
        rlx_program_free(w.prog);
        for (int b = 0; b < NB; b++) {
            rlx_release(w.tok[b]);
            rlx_release(w.tgt[b]);
        }
    }
    if (all || strcmp(cfg, "w6gemm") == 0) {
        static w6gemm w;
        if (w6gemm_init(&w)) {
            fprintf(stderr, "W6 GEMMs: %s\n", rlx_last_error());
            return 1;
        }
        workload wl = {"W6-GEMMs", w6gemm_step, &w};
        rc |= measure(&wl, rounds, steps, warmup);
        for (int i = 0; i < NGEMM_IN; i++)
            rlx_release(w.in[i]);
        rlx_program_free(w.prog);
    }
    if (all || strcmp(cfg, "w6") == 0) {
        static w6 w;
        if (w6_init(&w)) {
            fprintf(stderr, "W6: %s\n", rlx_last_error());
            return 1;
        }
        workload wl = {"W6", w6_step, &w};
        rc |= measure(&wl, rounds, steps, warmup);
        for (int i = 0; i < NPARAM; i++)
            rlx_release(w.p[i]);
        for (int b = 0; b < NBATCH; b++) {
            rlx_release(w.x[b]);
            rlx_release(w.y[b]);
        }
        rlx_program_free(w.prog);
    }
    return rc;
}
