/*
 * bench_w6.c — W6: one training step of a 784-512-512-10 ReLU MLP, batch
 * 256, softmax cross-entropy (integer labels, mean over the batch), plain
 * SGD (lr 0.01), f32.
 *
 * The step (forward, rlx_grad backward, SGD update) is traced once over
 * rlx_input placeholders and compiled with rlx_compile. Inputs: x [256,784],
 * labels [256] (i32), w1 [512,784], b1 [512], w2 [512,512], b2 [512],
 * w3 [10,512], b3 [10]. Outputs: the mean loss and the six updated
 * parameters, which are bound as the next step's parameters (no copies).
 * One timed step is rlx_program_run plus releasing the previous
 * parameters; the batches are realized tensors made before timing.
 *
 * In the same process, the GEMM-bound limit: the three forward GEMMs
 * (x W1^T, h1 W2^T, h2 W3^T) and the five backward GEMMs (dW3 = g3^T h2,
 * dh2 = g3 W3, dW2 = g2^T h1, dh1 = g2 W2, dW1 = g1^T x; no dx) of this
 * shape as direct cblas_sgemm calls into the OpenBLAS librlx uses (or,
 * with RLX_BENCH_GEMM=onednn, oneDNN's matmul: bench_gemm.h). It is
 * timed before and after the librlx steps; both medians are printed and
 * the limit is the median of all of its samples.
 *
 * Both backends run in one process, one after the other, each from the same
 * initial parameters: the reference evaluator (RLX_BACKEND unset) and the
 * JIT (RLX_BACKEND=jit; the library reads the variable at each
 * realization). A backend that fails is reported and skipped.
 *
 * Threads: rlx_set_num_threads(n) and OpenBLAS's thread count, which is
 * read from env OPENBLAS_NUM_THREADS when the library loads. So:
 *
 *   rlx-bench-w6                 runs "--threads 1" then "--threads 2", each
 *                                as a child process (fork + exec of itself)
 *   rlx-bench-w6 --threads N     one configuration; when OPENBLAS_NUM_THREADS
 *                                is not N, it sets it and re-execs itself
 *   options: --steps S (timed, default 40, at least 30), --warmup W (5)
 *
 * Data: synthetic, fixed seed: x ~ N(0,1) rows, labels = argmax of a fixed
 * random linear teacher, 8 batches used in turn. Parameters: Kaiming-uniform
 * weights (bound sqrt(6 / fan_in)), zero biases. The loss of the first step
 * and the mean loss over the first and the last pass over the 8 batches
 * show that it decreases.
 */
#define _GNU_SOURCE /* cblas.h's cpu_set_t */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_gemm.h"
#include "bench_util.h"
#include "rlx.h"
#include "w6_step.h"

typedef struct {
    double median, min, max;
} summary;

static summary summarize(const double *v, int n)
{
    double *s = malloc((size_t)n * sizeof *s);
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    summary r = {n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]), s[0], s[n - 1]};
    free(s);
    return r;
}

/* ------------------------------------------------------- the GEMM limit */

typedef struct {
    float *x, *w1, *w2, *w3, *z1, *z2, *z3, *g1, *g2, *g3, *dw1, *dw2, *dw3;
} gemm_bufs;

static float *filled(size_t n, float scale)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((2 * uniform() - 1) * scale);
    return v;
}

static gemm_bufs gemm_alloc(void)
{
    gemm_bufs g = {
        .x = filled(BATCH * IN, 1), .w1 = filled(H * IN, 0.05f), .w2 = filled(H * H, 0.05f),
        .w3 = filled(OUT * H, 0.05f), .z1 = filled(BATCH * H, 1), .z2 = filled(BATCH * H, 1),
        .z3 = filled(BATCH * OUT, 1), .g1 = filled(BATCH * H, 1), .g2 = filled(BATCH * H, 1),
        .g3 = filled(BATCH * OUT, 1), .dw1 = filled(H * IN, 1), .dw2 = filled(H * H, 1),
        .dw3 = filled(OUT * H, 1),
    };
    return g;
}

static void gemm_free(gemm_bufs *g)
{
    float *all[] = {g->x, g->w1, g->w2, g->w3, g->z1, g->z2, g->z3, g->g1, g->g2, g->g3, g->dw1, g->dw2, g->dw3};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* The eight GEMMs of one step, row-major, weights [out, in]. z1/z2 stand
 * for the activations h1/h2 and g1/g2/g3 for the gradients at z1/z2/z3. */
static void gemm_step(const gemm_bufs *g)
{
    const CBLAS_TRANSPOSE N = CblasNoTrans, T = CblasTrans;
    /* forward: z = h W^T */
    bench_gemm(N, T, BATCH, H, IN, 1, g->x, IN, g->w1, IN, 0, g->z1, H);
    bench_gemm(N, T, BATCH, H, H, 1, g->z1, H, g->w2, H, 0, g->z2, H);
    bench_gemm(N, T, BATCH, OUT, H, 1, g->z2, H, g->w3, H, 0, g->z3, OUT);
    /* backward */
    bench_gemm(T, N, OUT, H, BATCH, 1, g->g3, OUT, g->z2, H, 0, g->dw3, H); /* dW3 = g3^T h2 */
    bench_gemm(N, N, BATCH, H, OUT, 1, g->g3, OUT, g->w3, H, 0, g->g2, H);  /* dh2 = g3 W3 */
    bench_gemm(T, N, H, H, BATCH, 1, g->g2, H, g->z1, H, 0, g->dw2, H);     /* dW2 = g2^T h1 */
    bench_gemm(N, N, BATCH, H, H, 1, g->g2, H, g->w2, H, 0, g->g1, H);      /* dh1 = g2 W2 */
    bench_gemm(T, N, H, IN, BATCH, 1, g->g1, H, g->x, IN, 0, g->dw1, IN);   /* dW1 = g1^T x */
}

static const double GEMM_FLOP = 2.0 * BATCH * (2.0 * (IN * H + H * H + H * OUT) + (H * OUT + H * H));

static void time_gemm(const gemm_bufs *g, int warmup, int runs, double *t, double *c)
{
    for (int r = 0; r < warmup; r++)
        gemm_step(g);
    for (int r = 0; r < runs; r++) {
        double t0 = now(), c0 = cpu_now();
        gemm_step(g);
        t[r] = now() - t0;
        c[r] = cpu_now() - c0;
    }
}

typedef struct {
    int ok;
    summary step, cpu;
    double first_loss, first_pass, last_pass, compile_ms, cold_ms;
    rlx_stats_t stats;
} result;

/* Runs warmup + steps training steps on the current backend; the timed
 * ones are the last `steps`. */
static result run_backend(rlx_program *prog, rlx_tensor **xb, rlx_tensor **yb, int warmup, int steps)
{
    result res = {0};
    rlx_tensor *state[NPARAM];
    for (int i = 0; i < NPARAM; i++)
        state[i] = rlx_from_data(RLX_F32, param_rank(i), param_shapes[i], init_params[i]);
    rlx_binding bind[2 + NPARAM];
    bind[0].name = "x";
    bind[1].name = "labels";
    for (int i = 0; i < NPARAM; i++)
        bind[2 + i].name = param_names[i];
    int total = warmup + steps;
    double *t = malloc((size_t)total * sizeof *t), *c = malloc((size_t)total * sizeof *c),
           *loss = malloc((size_t)total * sizeof *loss);
    rlx_stats_reset();
    for (int s = 0; s < total; s++) {
        rlx_tensor *out[1 + NPARAM];
        bind[0].value = xb[s % NBATCH];
        bind[1].value = yb[s % NBATCH];
        for (int i = 0; i < NPARAM; i++)
            bind[2 + i].value = state[i];
        double t0 = now(), c0 = cpu_now();
        rlx_status st = rlx_program_run(prog, bind, 2 + NPARAM, out);
        if (st == RLX_OK)
            for (int i = 0; i < NPARAM; i++) {
                rlx_release(state[i]);
                state[i] = out[1 + i];
            }
        t[s] = now() - t0;
        c[s] = cpu_now() - c0;
        if (st != RLX_OK) {
            printf("   step %d on RLX_BACKEND=%s failed (status %d): %s\n", s + 1,
                   getenv("RLX_BACKEND") ? getenv("RLX_BACKEND") : "(unset)", (int)st, rlx_last_error());
            goto done;
        }
        if (rlx_item(out[0], &loss[s]) != RLX_OK)
            loss[s] = NAN;
        rlx_release(out[0]);
        if (s == 0)
            res.cold_ms = 1e3 * t[0];
    }
    res.ok = 1;
    res.step = summarize(t + warmup, steps);
    res.cpu = summarize(c + warmup, steps);
    res.first_loss = loss[0];
    for (int s = 0; s < NBATCH; s++) {
        res.first_pass += loss[s] / NBATCH;
        res.last_pass += loss[total - NBATCH + s] / NBATCH;
    }
    rlx_stats(&res.stats);
done:
    for (int i = 0; i < NPARAM; i++)
        rlx_release(state[i]);
    free(t);
    free(c);
    free(loss);
    return res;
}

/* ---------------------------------------------------------------- main */

static int one_config(int threads, int warmup, int steps, char **argv)
{
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    char want[16];
    snprintf(want, sizeof want, "%d", threads);
    if (!env || strcmp(env, want) != 0) { /* OpenBLAS reads it at load: re-exec */
        setenv("OPENBLAS_NUM_THREADS", want, 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    rlx_set_num_threads(threads);
    char load0[128], load1[128];
    loadavg(load0, sizeof load0);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    printf("== W6 at %d thread(s): rlx_get_num_threads %d, OPENBLAS_NUM_THREADS=%s (openblas_get_num_threads %d), "
           "OPENBLAS_CORETYPE=%s, OpenBLAS core %s\n",
           threads, rlx_get_num_threads(), env, openblas_get_num_threads(), coretype ? coretype : "(unset)",
           openblas_get_corename());
    printf("   loadavg at start: %s\n", load0);

    make_data();
    const int64_t xsh[2] = {BATCH, IN}, ysh[1] = {BATCH};
    rlx_tensor *xb[NBATCH], *yb[NBATCH];
    for (int b = 0; b < NBATCH; b++) {
        xb[b] = rlx_from_data(RLX_F32, 2, xsh, xs_data[b]);
        yb[b] = rlx_from_data(RLX_I32, 1, ysh, ys_data[b]);
    }
    double t0 = now();
    rlx_program *prog = compile_step();
    if (!prog) {
        fprintf(stderr, "compile: %s\n", rlx_last_error());
        return 1;
    }
    double compile_ms = 1e3 * (now() - t0);

    gemm_bufs gb = gemm_alloc();
    int gruns = steps;
    double *gt = malloc((size_t)(2 * gruns) * sizeof *gt), *gc = malloc((size_t)(2 * gruns) * sizeof *gc);
    time_gemm(&gb, warmup, gruns, gt, gc);

    const char *backends[2] = {NULL, "jit"};
    result res[2];
    for (int k = 0; k < 2; k++) {
        if (backends[k])
            setenv("RLX_BACKEND", backends[k], 1);
        else
            unsetenv("RLX_BACKEND");
        res[k] = run_backend(prog, xb, yb, warmup, steps);
    }
    unsetenv("RLX_BACKEND");

    time_gemm(&gb, warmup, gruns, gt + gruns, gc + gruns);
    summary g_before = summarize(gt, gruns), g_after = summarize(gt + gruns, gruns), g = summarize(gt, 2 * gruns);
    summary gcpu = summarize(gc, 2 * gruns);
    loadavg(load1, sizeof load1);

    printf("   trace + rlx_compile: %.1f ms; %d warmup steps, %d timed steps per backend\n", compile_ms, warmup,
           steps);
    printf("   %-22s %9s %9s %9s %9s   %s\n", "", "median", "min", "max", "cpu", "ms/step (cpu: median process CPU time)");
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "librlx jit" : "librlx ref";
        if (!res[k].ok) {
            printf("   %-22s FAILED (see above)\n", name);
            continue;
        }
        printf("   %-22s %9.3f %9.3f %9.3f %9.3f   | x GEMM limit %.2f | first step %.1f ms | loss: step 1 %.4f, "
               "first pass %.4f, last pass %.4f | kernels run %llu, compiled %llu, compile %.2f s\n",
               name, 1e3 * res[k].step.median, 1e3 * res[k].step.min, 1e3 * res[k].step.max,
               1e3 * res[k].cpu.median, res[k].step.median / g.median, res[k].cold_ms, res[k].first_loss, res[k].first_pass,
               res[k].last_pass, (unsigned long long)res[k].stats.kernels_run,
               (unsigned long long)res[k].stats.kernels_compiled, res[k].stats.compile_seconds);
    }
    char glabel[32];
    snprintf(glabel, sizeof glabel, "GEMM limit (8 %s)", bench_gemm_engine());
    printf("   %-22s %9.3f %9.3f %9.3f %9.3f   | %.1f GFLOP/s | medians before %.3f, after %.3f\n",
           glabel, 1e3 * g.median, 1e3 * g.min, 1e3 * g.max, 1e3 * gcpu.median, GEMM_FLOP / g.median * 1e-9, 1e3 * g_before.median,
           1e3 * g_after.median);
    printf("   loadavg at end: %s\n", load1);
    printf("W6-RESULT threads=%d ref_ms=%.3f jit_ms=%s%.3f gemm_ms=%.3f ref_cpu=%.3f jit_cpu=%.3f gemm_cpu=%.3f\n",
           threads, res[0].ok ? 1e3 * res[0].step.median : NAN, res[1].ok ? "" : "FAILED:",
           res[1].ok ? 1e3 * res[1].step.median : NAN, 1e3 * g.median, res[0].ok ? 1e3 * res[0].cpu.median : NAN,
           res[1].ok ? 1e3 * res[1].cpu.median : NAN, 1e3 * gcpu.median);
    fflush(stdout);

    gemm_free(&gb);
    free(gt);
    free(gc);
    for (int b = 0; b < NBATCH; b++) {
        rlx_release(xb[b]);
        rlx_release(yb[b]);
    }
    rlx_program_free(prog);
    return (res[0].ok && res[1].ok) ? 0 : 2;
}

int main(int argc, char **argv)
{
    int threads = 0, warmup = 5, steps = 40;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--steps S (>= 30)] [--warmup W]\n", argv[0]);
            return 64;
        }
    }
    if (steps < 30)
        steps = 30;
    if (warmup < 1)
        warmup = 1;
    if (threads > 0)
        return one_config(threads, warmup, steps, argv);

    /* Driver: one child process per thread count, so that each loads
     * OpenBLAS with its own OPENBLAS_NUM_THREADS. */
    printf("librlx %s, %s\nW6: MLP 784-512-512-10 ReLU, batch %d, softmax cross-entropy, SGD lr %g, f32\n",
           rlx_version(), rlx_host_info(), BATCH, LR);
    fflush(stdout);
    int status = 0;
    for (int t = 1; t <= 2; t++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            char ts[8], ss[16], ws[16];
            snprintf(ts, sizeof ts, "%d", t);
            snprintf(ss, sizeof ss, "%d", steps);
            snprintf(ws, sizeof ws, "%d", warmup);
            char *args[] = {argv[0], "--threads", ts, "--steps", ss, "--warmup", ws, NULL};
            setenv("OPENBLAS_NUM_THREADS", ts, 1);
            execv("/proc/self/exe", args);
            perror("execv /proc/self/exe");
            _exit(127);
        }
        int ws;
        if (waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            status = 1;
    }
    return status;
}
