/*
 * bench_mpi.c — librlx_mpi's figures (run under mpirun, 2 ranks):
 *
 *   mpirun -np 2 --bind-to none rlx-bench-mpi [--mb M (100)] [--rounds R (5)] [--steps S (20)]
 *
 * (--bind-to none: with no more ranks than cores OpenMPI binds each rank
 * to one core, so "1 rank x 2 threads" would run both threads on rank 0's
 * core.)
 *
 * 1. rlx_mpi_allreduce (SUM) of one f32 tensor of M MB, against a memcpy
 *    of the same bytes in the same process; each round times both, one
 *    after the other (the allreduce from a barrier to the slowest rank's
 *    return); best of R rounds. GB/s is M MB / time ("algorithm
 *    bandwidth"); each rank moves 2 (P-1)/P of it each way.
 * 2. W6 (bench/bench_w6.c: MLP 784-512-512-10 ReLU, softmax cross
 *    entropy, SGD lr 0.01, f32, batch 256), ms per step, rounds
 *    interleaved, each config's median over S steps, best of R rounds:
 *      2 ranks x 1 thread   each rank the gradients of its 128 rows (a
 *                           compiled program), rlx_mpi_allreduce MEAN of
 *                           loss and gradients, the SGD update (a second
 *                           program); the allreduce's share is printed
 *      1 rank x 2 threads   rank 0 alone runs bench_w6's fused step (one
 *                           program: forward, backward, update) while
 *                           rank 1 sleeps (it polls for rank 0's message
 *                           every 200 us, so it leaves its core free)
 *      1 rank x 1 thread    the same at one thread, for scale
 * The machine's load average is printed before and after: on a shared
 * machine the configurations compete with other work differently (two
 * busy processes against one), so read the figures with it.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx.h"
#include "rlx_mpi.h"

enum { BATCH = 256, IN = 784, H = 512, OUT = 10, NPARAM = 6 };
static const double LR = 0.01;
static const char *const param_names[NPARAM] = {"w1", "b1", "w2", "b2", "w3", "b3"};
static const int64_t param_shapes[NPARAM][2] = {{H, IN}, {H, 0}, {H, H}, {H, 0}, {OUT, H}, {OUT, 0}};
static int param_rank(int i) { return param_shapes[i][1] ? 2 : 1; }
static int64_t param_numel(int i) { return param_shapes[i][0] * (param_shapes[i][1] ? param_shapes[i][1] : 1); }

static int P, R;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

/* "loadavg 1.02 0.98 0.91" (the 1, 5 and 15 minute averages), in a static buffer. */
static const char *loadavg(void)
{
    static char buf[96];
    double a[3] = {-1, -1, -1};
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &a[0], &a[1], &a[2]) != 3)
            a[0] = -1;
        fclose(f);
    }
    snprintf(buf, sizeof buf, "loadavg %.2f %.2f %.2f", a[0], a[1], a[2]);
    return buf;
}

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "rank %d: %s: %s\n", R, what, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* ------------------------------------------------------ 1: allreduce */

static void bench_allreduce(rlx_mpi_ctx *ctx, double mb, int rounds)
{
    const int64_t n = (int64_t)(mb * 1e6 / 4);
    const size_t bytes = (size_t)n * 4;
    float *a = malloc(bytes), *b = malloc(bytes);
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)uniform();
    memset(b, 0, bytes);
    rlx_tensor *t = rlx_from_data(RLX_F32, 1, &n, a);
    const bool shm_possible = rlx_mpi_shared_memory(ctx);
    double best_ar[2] = {INFINITY, INFINITY}, best_cp = INFINITY;
    for (int r = 0; r <= rounds; r++) { /* round 0 warms up: first touches, the window */
        double t0 = now();
        memcpy(b, a, bytes);
        double cp = now() - t0;
        volatile float sink = b[(size_t)r % (size_t)n]; /* keep the copy */
        (void)sink;
        for (int shm = 0; shm <= (int)shm_possible; shm++) {
            rlx_mpi_set_shared_memory(ctx, shm);
            rlx_tensor *out = NULL;
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = now();
            if (rlx_mpi_allreduce(ctx, 1, &t, RLX_MPI_SUM, &out) != RLX_OK)
                die("allreduce", rlx_mpi_last_error());
            double ar = now() - t0, slowest;
            MPI_Allreduce(&ar, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            rlx_release(out);
            if (r && slowest < best_ar[shm])
                best_ar[shm] = slowest;
        }
        if (r && cp < best_cp)
            best_cp = cp;
    }
    rlx_mpi_set_shared_memory(ctx, shm_possible);
    if (R == 0) {
        printf("memcpy of %.0f MB: %.1f ms = %.2f GB/s\n", bytes / 1e6, 1e3 * best_cp, bytes / best_cp * 1e-9);
        for (int shm = 0; shm <= (int)shm_possible; shm++)
            printf("allreduce SUM of %.0f MB f32 over %d ranks (%s): %.1f ms = %.2f GB/s, %.2f x memcpy's time "
                   "(best of %d rounds, interleaved)\n",
                   bytes / 1e6, P, shm ? "shared window" : "messages", 1e3 * best_ar[shm],
                   bytes / best_ar[shm] * 1e-9, best_ar[shm] / best_cp, rounds);
    }
    rlx_release(t);
    free(a);
    free(b);
}

/* ----------------------------------------------------------- 2: W6 */

/* Gradients of a batch-b shard (outputs: loss, 6 gradients), or with
 * fused set the whole step (outputs: loss, 6 updated parameters). */
static rlx_program *compile_w6(int b, int fused)
{
    rlx_scope_begin();
    const int64_t xs[2] = {b, IN}, ys[1] = {b};
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, xs), *y = rlx_input("labels", RLX_I32, 1, ys);
    rlx_tensor *p[NPARAM], *g[NPARAM], *out[1 + NPARAM];
    for (int i = 0; i < NPARAM; i++)
        p[i] = rlx_input(param_names[i], RLX_F32, param_rank(i), param_shapes[i]);
    rlx_tensor *h = rlx_linear_act(x, p[0], p[1], RLX_ACT_RELU);
    h = rlx_linear_act(h, p[2], p[3], RLX_ACT_RELU);
    out[0] = rlx_mean_all(rlx_softmax_cross_entropy_with_logits(rlx_linear(h, p[4], p[5]), y));
    rlx_program *prog = NULL;
    if (rlx_grad(out[0], p, NPARAM, g) == RLX_OK) {
        for (int i = 0; i < NPARAM; i++)
            out[1 + i] = fused ? rlx_sub(p[i], rlx_mul_s(g[i], LR)) : g[i];
        prog = rlx_compile(out, 1 + NPARAM);
    }
    rlx_scope_end();
    return prog;
}

/* p_i - lr g_i, inputs w1.. and g_w1.. */
static rlx_program *compile_sgd(void)
{
    rlx_scope_begin();
    rlx_tensor *out[NPARAM];
    for (int i = 0; i < NPARAM; i++) {
        char name[16];
        snprintf(name, sizeof name, "g_%s", param_names[i]);
        rlx_tensor *p = rlx_input(param_names[i], RLX_F32, param_rank(i), param_shapes[i]);
        rlx_tensor *g = rlx_input(name, RLX_F32, param_rank(i), param_shapes[i]);
        out[i] = rlx_sub(p, rlx_mul_s(g, LR));
    }
    rlx_program *prog = rlx_compile(out, NPARAM);
    rlx_scope_end();
    return prog;
}

typedef struct {
    rlx_tensor *p[NPARAM];
} params;

static void init_params(params *s)
{
    uint64_t keep = rng;
    rng = 0x9e3779b97f4a7c15ull; /* the same parameters for every config */
    for (int i = 0; i < NPARAM; i++) {
        float *v = malloc((size_t)param_numel(i) * sizeof *v);
        double bound = param_rank(i) == 2 ? sqrt(6.0 / (double)param_shapes[i][1]) : 0;
        for (int64_t k = 0; k < param_numel(i); k++)
            v[k] = (float)((2 * uniform() - 1) * bound);
        s->p[i] = rlx_from_data(RLX_F32, param_rank(i), param_shapes[i], v);
        free(v);
    }
    rng = keep;
}

/* One data-parallel step: this rank's rows [R*b, (R+1)*b) of the batch. */
static double dp_step(rlx_mpi_ctx *ctx, rlx_program *grads, rlx_program *sgd, params *s, rlx_tensor *x,
                      rlx_tensor *y, double *ar_s, double *grad_s)
{
    double tg = now();
    rlx_binding gb[2 + NPARAM] = {{"x", x}, {"labels", y}};
    for (int i = 0; i < NPARAM; i++)
        gb[2 + i] = (rlx_binding){param_names[i], s->p[i]};
    rlx_tensor *g[1 + NPARAM], *mean[1 + NPARAM], *next[NPARAM];
    if (rlx_program_run(grads, gb, 2 + NPARAM, g) != RLX_OK)
        die("gradients", rlx_last_error());
    double t0 = now();
    *grad_s = t0 - tg;
    if (rlx_mpi_allreduce(ctx, 1 + NPARAM, g, RLX_MPI_MEAN, mean) != RLX_OK)
        die("allreduce", rlx_mpi_last_error());
    *ar_s = now() - t0;
    char names[NPARAM][16];
    rlx_binding sb[2 * NPARAM];
    for (int i = 0; i < NPARAM; i++) {
        snprintf(names[i], 16, "g_%s", param_names[i]);
        sb[i] = (rlx_binding){param_names[i], s->p[i]};
        sb[NPARAM + i] = (rlx_binding){names[i], mean[1 + i]};
    }
    if (rlx_program_run(sgd, sb, 2 * NPARAM, next) != RLX_OK)
        die("sgd", rlx_last_error());
    double loss = NAN;
    rlx_item(mean[0], &loss);
    for (int i = 0; i < 1 + NPARAM; i++) {
        rlx_release(g[i]);
        rlx_release(mean[i]);
    }
    for (int i = 0; i < NPARAM; i++) {
        rlx_release(s->p[i]);
        s->p[i] = next[i];
    }
    return loss;
}

static double fused_step(rlx_program *step, params *s, rlx_tensor *x, rlx_tensor *y)
{
    rlx_binding b[2 + NPARAM] = {{"x", x}, {"labels", y}};
    for (int i = 0; i < NPARAM; i++)
        b[2 + i] = (rlx_binding){param_names[i], s->p[i]};
    rlx_tensor *out[1 + NPARAM];
    if (rlx_program_run(step, b, 2 + NPARAM, out) != RLX_OK)
        die("step", rlx_last_error());
    double loss = NAN;
    rlx_item(out[0], &loss);
    rlx_release(out[0]);
    for (int i = 0; i < NPARAM; i++) {
        rlx_release(s->p[i]);
        s->p[i] = out[1 + i];
    }
    return loss;
}

/* Rank 1..P-1 wait for rank 0's go-ahead without spinning on a core. */
static void idle_until_released(void)
{
    int go = 0, done = 0;
    MPI_Request req;
    MPI_Irecv(&go, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, &req);
    while (!done) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done)
            nanosleep(&(struct timespec){0, 200000}, NULL);
    }
}

static void release_idlers(void)
{
    int go = 1;
    for (int q = 1; q < P; q++)
        MPI_Send(&go, 1, MPI_INT, q, 99, MPI_COMM_WORLD);
}

static void bench_w6(rlx_mpi_ctx *ctx, int rounds, int steps)
{
    const int shard = BATCH / P;
    float *xv = malloc((size_t)BATCH * IN * sizeof *xv);
    int32_t yv[BATCH];
    for (int i = 0; i < BATCH * IN; i++)
        xv[i] = (float)(2 * uniform() - 1);
    for (int i = 0; i < BATCH; i++)
        yv[i] = (int32_t)(uniform() * OUT);
    const int64_t xs[2] = {shard, IN}, ys[1] = {shard}, xf[2] = {BATCH, IN}, yf[1] = {BATCH};
    rlx_tensor *x = rlx_from_data(RLX_F32, 2, xs, xv + (size_t)R * shard * IN);
    rlx_tensor *y = rlx_from_data(RLX_I32, 1, ys, yv + R * shard);
    rlx_tensor *xfull = rlx_from_data(RLX_F32, 2, xf, xv), *yfull = rlx_from_data(RLX_I32, 1, yf, yv);
    rlx_program *grads = compile_w6(shard, 0), *sgd = compile_sgd(), *fused = compile_w6(BATCH, 1);
    if (!grads || !sgd || !fused)
        die("compile", rlx_last_error());
    params dp, one1, one2;
    init_params(&dp);
    init_params(&one1);
    init_params(&one2);
    double best[3] = {INFINITY, INFINITY, INFINITY}, best_ar = INFINITY, loss[3] = {0};
    double *t = malloc((size_t)steps * sizeof *t), *ar = malloc((size_t)steps * sizeof *ar),
           *gr = malloc((size_t)steps * sizeof *gr), best_gr = INFINITY;
    for (int r = 0; r <= rounds; r++) { /* round 0 warms up (compiles, first touches) */
        rlx_set_num_threads(1);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int s = 0; s < steps; s++) {
            double t0 = now();
            loss[0] = dp_step(ctx, grads, sgd, &dp, x, y, &ar[s], &gr[s]);
            t[s] = now() - t0;
        }
        double m = median(t, steps), ma = median(ar, steps), mg = median(gr, steps);
        if (r && m < best[0]) {
            best[0] = m;
            best_ar = ma;
            best_gr = mg;
        }
        for (int threads = 2; threads >= 1; threads--) {
            if (R != 0) {
                idle_until_released();
                continue;
            }
            rlx_set_num_threads(threads);
            params *s1 = threads == 2 ? &one2 : &one1;
            for (int s = 0; s < steps; s++) {
                double t0 = now();
                loss[threads] = fused_step(fused, s1, xfull, yfull);
                t[s] = now() - t0;
            }
            m = median(t, steps);
            if (r && m < best[threads])
                best[threads] = m;
            release_idlers();
        }
    }
    if (R == 0) {
        printf("W6 (784-512-512-10, batch %d), ms/step, median of %d steps, best of %d rounds, interleaved:\n", BATCH,
               steps, rounds);
        printf("  %d ranks x 1 thread  (batch %d each + allreduce): %8.3f ms  (gradients %.3f ms, allreduce %.3f ms, "
               "the rest the update; loss %.4f)\n",
               P, shard, 1e3 * best[0], 1e3 * best_gr, 1e3 * best_ar, loss[0]);
        printf("  1 rank  x 2 threads (fused step, batch %d):        %8.3f ms  (loss %.4f)\n", BATCH, 1e3 * best[2],
               loss[2]);
        printf("  1 rank  x 1 thread  (fused step, batch %d):        %8.3f ms  (loss %.4f)\n", BATCH, 1e3 * best[1],
               loss[1]);
        printf("  ratio (%d ranks x 1 thread) / (1 rank x 2 threads): %.3f\n", P, best[0] / best[2]);
    }
    for (int i = 0; i < NPARAM; i++) {
        rlx_release(dp.p[i]);
        rlx_release(one1.p[i]);
        rlx_release(one2.p[i]);
    }
    rlx_program_free(grads);
    rlx_program_free(sgd);
    rlx_program_free(fused);
    rlx_release(x), rlx_release(y), rlx_release(xfull), rlx_release(yfull);
    free(xv), free(t), free(ar), free(gr);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    double mb = 100;
    int rounds = 5, steps = 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc)
            mb = atof(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else {
            if (R == 0)
                fprintf(stderr, "usage: mpirun -np 2 %s [--mb M] [--rounds R] [--steps S]\n", argv[0]);
            MPI_Finalize();
            return 64;
        }
    }
    if (rounds < 1)
        rounds = 1;
    if (steps < 1)
        steps = 1;
    rlx_mpi_ctx *ctx = rlx_mpi_new(MPI_COMM_WORLD);
    if (!ctx)
        die("rlx_mpi_new", rlx_mpi_last_error());
    if (R == 0)
        printf("librlx %s, %s; %d ranks; %s\n", rlx_version(), rlx_host_info(), P, loadavg());
    if (BATCH % P) {
        if (R == 0)
            fprintf(stderr, "batch %d does not split over %d ranks\n", BATCH, P);
    } else {
        bench_allreduce(ctx, mb, rounds);
        bench_w6(ctx, rounds, steps);
    }
    if (R == 0)
        printf("%s at the end\n", loadavg());
    rlx_mpi_free(ctx);
    MPI_Finalize();
    return 0;
}
