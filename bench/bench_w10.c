/*
 * bench_w10.c — W10: the GPT training step of examples/gpt_model.c, f32.
 *
 *   W10a: width 128, 2 layers, 4 heads, seq 64, batch 16, vocab 96
 *   W10b: width 256, 4 layers, 8 heads, seq 128, batch 8, vocab 256
 *
 * The whole step (forward, rlx_grad backward, Adam with ops) is one
 * rlx_compile program; each run is bound to the previous run's outputs
 * (parameters, Adam m and v). One timed step is gpt_step: rlx_program_run,
 * releasing the previous state and reading the loss. Four batches made
 * before timing are used in turn.
 *
 * In the same process, the GEMM-only reference: every GEMM of this step's
 * forward and backward with its shape and transposes, as bare cblas_sgemm
 * calls into the OpenBLAS librlx uses (RLX_BENCH_GEMM=onednn: oneDNN's
 * matmul, bench_gemm.h) (per layer: the q/k/v, output, fc and
 * proj linears and their two backward GEMMs each; per batch and head the
 * attention's Q K^T and P V and their four backward GEMMs, reading q/k/v
 * in place in the [N, 3W] buffer; the tied LM head and its two backward
 * GEMMs). The embedding gather/scatter, norms, softmax and Adam are not
 * GEMMs and are left out: it is the time a step cannot go below.
 * librlx steps and GEMM-only steps are timed interleaved, in rounds of
 * --steps each; the figure of each is the best (lowest) round median, of
 * the wall clock and (CPU time line, cpu_ratio_gemm) of the process's CPU
 * time, the steadier figure on a loaded machine at one thread (also the
 * median over rounds of the ratio within a round: cpu_paired_ratio_gemm).
 *
 * Also per configuration: minor page faults per step (getrusage ru_minflt
 * over the timed librlx steps), peak RSS (VmHWM after the warm-up
 * steps, before the GEMM-only buffers exist; and at the end), and the first
 * step (trace + rlx_compile, then the first run) with a cold disk cache
 * (RLX_CACHE_DIR a fresh temporary directory) and a warm one (a second
 * process on the same directory).
 *
 *   rlx-bench-w10                    W10a and W10b at 1 and 2 threads, each
 *                                    a child process (cold) plus a second
 *                                    child on the same cache dir (warm)
 *   rlx-bench-w10 --threads N        one configuration in this process (it
 *                                    re-execs itself when OPENBLAS_NUM_THREADS
 *                                    is not N: OpenBLAS reads it at load)
 *   --config a|b|all (all), --steps S (10), --rounds R (5), --warmup W (3)
 *   --no-gemm                        leave the GEMM-only reference out
 *   --attn-bwd                       also the step with attention's gradient as
 *                                    the composite of ops (knob attention_bwd 0),
 *                                    interleaved per round; reports kernel /
 *                                    composite step time (W10-ATTNBWD)
 *   --bf16                           also the mixed-precision step (compute
 *                                    bf16, f32 master weights and Adam; see
 *                                    gpt_model.h) of the same workload, same
 *                                    init and batches, its steps timed
 *                                    interleaved with the f32 ones in each
 *                                    round; reports f32 / bf16 step time
 *   --first-step                     only trace + compile + one step (the
 *                                    driver's warm-cache child), then three
 *                                    more: W10-NEXT gives the first run's
 *                                    minor faults, the best of those steps
 *                                    (wall and CPU ms: the first step's cost
 *                                    over a steady step) and the CPU ms of
 *                                    compile and first run
 *   --dyn-seq                        (with --threads, default 1) the step over
 *                                    a dynamic sequence length instead: a
 *                                    stream of lengths (compiles, new and
 *                                    repeated lengths' step time, arena) and
 *                                    the dynamic step against the static-
 *                                    length step at seq/4, seq/2, seq
 *                                    (interleaved, best round; run_dyn_seq)
 *   --export DIR                     (with --threads) also write the initial
 *                                    parameters, the batches and librlx's
 *                                    first losses for bench/compare.py:
 *                                    DIR/params.f32 (layout order, raw f32),
 *                                    DIR/batches.i32 (per batch tokens then
 *                                    targets, raw i32), DIR/meta.txt
 *
 * Profiling the timed steps only: with env W10_PERF_CTL naming perf's
 * control fifo, "enable" is written to it before the timed steps and
 * "disable" after them, so
 *   mkfifo /tmp/ctl; W10_PERF_CTL=/tmp/ctl perf record -D -1 \
 *     --control fifo:/tmp/ctl -g rlx-bench-w10 --threads 1 --config b --no-gemm
 * records nothing of tracing, compilation or the warm-up. With
 * --first-step, W10_PERF_FIRST=1 moves that window to the first run, 2 to
 * the three steady steps after it, 3 to trace + rlx_compile.
 */
#define _GNU_SOURCE /* cblas.h's cpu_set_t, mkdtemp */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_gemm.h"
#include "bench_util.h"
#include "gpt_model.h"
#include "rlx.h"

enum { NBATCH = 4, NLOSS = 3, SEED = 1234 };

typedef struct {
    const char *name;
    gpt_config cfg;
} workload;

static const workload workloads[] = {
    {"W10a", {.vocab = 96, .width = 128, .layers = 2, .heads = 4, .seq = 64, .batch = 16, .dtype = RLX_F32}},
    {"W10b", {.vocab = 256, .width = 256, .layers = 4, .heads = 8, .seq = 128, .batch = 8, .dtype = RLX_F32}},
};

static double minimum(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

/* Peak resident memory of this process in KiB: VmHWM of /proc/self/status
 * (ru_maxrss would carry the RSS of a parent that forked and exec'd us). */
static long peak_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

/* CPU time of the process (every thread), ms: less sensitive than the
 * wall clock to a loaded machine's preemption. */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static struct rusage usage(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru;
}

/* ------------------------------------------------------- GEMM-only */

typedef struct { /* per layer: saved activations, weights, weight gradients */
    float *a, *qkv, *p, *att, *m, *f, *o;
    float *wqkv, *wo, *wfc, *wproj, *dwqkv, *dwo, *dwfc, *dwproj;
} gemm_layer;

typedef struct {
    int n, w, v, s, b, h, d, layers;
    gemm_layer *l;
    float *hf, *logits, *dlogits, *dhf, *wte, *dwte;           /* LM head */
    float *dy, *df, *dm, *datt, *dqkv, *dp, *da;               /* transient gradients */
    double flop;
} gemm_bufs;

static uint64_t fill_rng = 0x9e3779b97f4a7c15ull;

static float *filled(int64_t n)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        fill_rng ^= fill_rng << 13;
        fill_rng ^= fill_rng >> 7;
        fill_rng ^= fill_rng << 17;
        v[i] = (float)(((double)(fill_rng >> 11) * 0x1p-53 * 2 - 1) * 0.05);
    }
    return v;
}

static gemm_bufs gemm_alloc(const gpt_config *c)
{
    gemm_bufs g = {.n = c->batch * c->seq, .w = c->width, .v = c->vocab, .s = c->seq, .b = c->batch,
                   .h = c->heads, .d = c->width / c->heads, .layers = c->layers};
    const int64_t n = g.n, w = g.w, bhss = (int64_t)g.b * g.h * g.s * g.s;
    g.l = calloc((size_t)g.layers, sizeof *g.l);
    for (int i = 0; i < g.layers; i++) {
        gemm_layer *l = &g.l[i];
        *l = (gemm_layer){filled(n * w), filled(n * 3 * w), filled(bhss), filled(n * w), filled(n * w),
                          filled(n * 4 * w), filled(n * w), filled(3 * w * w), filled(w * w), filled(4 * w * w),
                          filled(4 * w * w), filled(3 * w * w), filled(w * w), filled(4 * w * w), filled(4 * w * w)};
    }
    g.hf = filled(n * w);
    g.logits = filled(n * g.v);
    g.dlogits = filled(n * g.v);
    g.dhf = filled(n * w);
    g.wte = filled((int64_t)g.v * w);
    g.dwte = filled((int64_t)g.v * w);
    g.dy = filled(n * w);
    g.df = filled(n * 4 * w);
    g.dm = filled(n * w);
    g.datt = filled(n * w);
    g.dqkv = filled(n * 3 * w);
    g.dp = filled(bhss);
    g.da = filled(n * w);
    return g;
}

static void gemm_free(gemm_bufs *g)
{
    for (int i = 0; i < g->layers; i++) {
        gemm_layer *l = &g->l[i];
        float *all[] = {l->a,  l->qkv, l->p,     l->att,   l->m,   l->f,    l->o,    l->wqkv,
                        l->wo, l->wfc, l->wproj, l->dwqkv, l->dwo, l->dwfc, l->dwproj};
        for (size_t k = 0; k < sizeof all / sizeof *all; k++)
            free(all[k]);
    }
    free(g->l);
    float *all[] = {g->hf, g->logits, g->dlogits, g->dhf, g->wte, g->dwte, g->dy,
                    g->df, g->dm,     g->datt,    g->dqkv, g->dp, g->da};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        free(all[k]);
}

/* Row-major C[m,n] = op(A) op(B) (+ C when acc), counted into *flop. */
static void mm(double *flop, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
               const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    bench_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    *flop += 2.0 * m * n * k;
}

static void gemm_attention_fwd(gemm_bufs *g, gemm_layer *l, double *fl)
{
    const CBLAS_TRANSPOSE N = CblasNoTrans, T = CblasTrans;
    const int s = g->s, d = g->d, w = g->w, w3 = 3 * g->w;
    const float scale = 1.0f / sqrtf((float)d);
    for (int b = 0; b < g->b; b++)
        for (int h = 0; h < g->h; h++) {
            const float *q = l->qkv + (size_t)b * s * w3 + (size_t)h * d, *k = q + w, *v = q + 2 * w;
            float *p = l->p + ((size_t)b * g->h + h) * s * s;
            mm(fl, N, T, s, s, d, scale, q, w3, k, w3, 0, p, s);                          /* Q K^T */
            mm(fl, N, N, s, d, s, 1, p, s, v, w3, 0, l->att + (size_t)b * s * w + (size_t)h * d, w); /* P V */
        }
}

static void gemm_attention_bwd(gemm_bufs *g, gemm_layer *l, double *fl)
{
    const CBLAS_TRANSPOSE N = CblasNoTrans, T = CblasTrans;
    const int s = g->s, d = g->d, w = g->w, w3 = 3 * g->w;
    for (int b = 0; b < g->b; b++)
        for (int h = 0; h < g->h; h++) {
            size_t qo = (size_t)b * s * w3 + (size_t)h * d;
            const float *q = l->qkv + qo, *k = q + w, *v = q + 2 * w;
            float *dq = g->dqkv + qo, *dk = dq + w, *dv = dq + 2 * w;
            const float *p = l->p + ((size_t)b * g->h + h) * s * s;
            float *dp = g->dp + ((size_t)b * g->h + h) * s * s;
            const float *dout = g->datt + (size_t)b * s * w + (size_t)h * d;
            mm(fl, N, T, s, s, d, 1, dout, w, v, w3, 0, dp, s); /* dP = dO V^T */
            mm(fl, T, N, s, d, s, 1, p, s, dout, w, 0, dv, w3); /* dV = P^T dO */
            mm(fl, N, N, s, d, s, 1, dp, s, k, w3, 0, dq, w3);  /* dQ = dS K */
            mm(fl, T, N, s, d, s, 1, dp, s, q, w3, 0, dk, w3);  /* dK = dS^T Q */
        }
}

/* The GEMMs of one training step; returns their flops. */
static double gemm_step(gemm_bufs *g)
{
    const CBLAS_TRANSPOSE N = CblasNoTrans, T = CblasTrans;
    const int n = g->n, w = g->w, v = g->v, w3 = 3 * w, w4 = 4 * w;
    double fl = 0;
    for (int i = 0; i < g->layers; i++) {
        gemm_layer *l = &g->l[i];
        mm(&fl, N, T, n, w3, w, 1, l->a, w, l->wqkv, w, 0, l->qkv, w3);
        gemm_attention_fwd(g, l, &fl);
        mm(&fl, N, T, n, w, w, 1, l->att, w, l->wo, w, 0, l->o, w);
        mm(&fl, N, T, n, w4, w, 1, l->m, w, l->wfc, w, 0, l->f, w4);
        mm(&fl, N, T, n, w, w4, 1, l->f, w4, l->wproj, w4, 0, l->o, w);
    }
    mm(&fl, N, T, n, v, w, 1, g->hf, w, g->wte, w, 0, g->logits, v);    /* logits = h wte^T */
    mm(&fl, N, N, n, w, v, 1, g->dlogits, v, g->wte, w, 0, g->dhf, w);  /* dh = dlogits wte */
    mm(&fl, T, N, v, w, n, 1, g->dlogits, v, g->hf, w, 0, g->dwte, w);  /* dwte = dlogits^T h */
    for (int i = g->layers - 1; i >= 0; i--) {
        gemm_layer *l = &g->l[i];
        mm(&fl, T, N, w, w4, n, 1, g->dy, w, l->f, w4, 0, l->dwproj, w4);
        mm(&fl, N, N, n, w4, w, 1, g->dy, w, l->wproj, w4, 0, g->df, w4);
        mm(&fl, T, N, w4, w, n, 1, g->df, w4, l->m, w, 0, l->dwfc, w);
        mm(&fl, N, N, n, w, w4, 1, g->df, w4, l->wfc, w, 0, g->dm, w);
        mm(&fl, T, N, w, w, n, 1, g->dy, w, l->att, w, 0, l->dwo, w);
        mm(&fl, N, N, n, w, w, 1, g->dy, w, l->wo, w, 0, g->datt, w);
        gemm_attention_bwd(g, l, &fl);
        mm(&fl, T, N, w3, w, n, 1, g->dqkv, w3, l->a, w, 0, l->dwqkv, w);
        mm(&fl, N, N, n, w, w3, 1, g->dqkv, w3, l->wqkv, w, 0, g->da, w);
    }
    return fl;
}

/* perf's control fifo (env W10_PERF_CTL): "enable" / "disable". */
static void perf_ctl(const char *cmd)
{
    const char *path = getenv("W10_PERF_CTL");
    FILE *f = path && *path ? fopen(path, "w") : NULL;
    if (f) {
        fprintf(f, "%s\n", cmd);
        fclose(f);
    }
}

/* ------------------------------------------------------- the program */

typedef struct {
    rlx_tensor *tok[NBATCH], *tgt[NBATCH];
    int32_t *tv[NBATCH], *yv[NBATCH];
} batches;

static void make_batches(const gpt_config *c, batches *bt)
{
    const int64_t n = (int64_t)c->batch * c->seq;
    for (int b = 0; b < NBATCH; b++) {
        bt->tv[b] = malloc((size_t)n * sizeof(int32_t));
        bt->yv[b] = malloc((size_t)n * sizeof(int32_t));
        gpt_make_batch(c, (uint64_t)(100 + b), bt->tv[b], bt->yv[b]);
        bt->tok[b] = rlx_from_data(RLX_I32, 1, &n, bt->tv[b]);
        bt->tgt[b] = rlx_from_data(RLX_I32, 1, &n, bt->yv[b]);
    }
}

static void free_batches(batches *bt)
{
    for (int b = 0; b < NBATCH; b++) {
        rlx_release(bt->tok[b]);
        rlx_release(bt->tgt[b]);
        free(bt->tv[b]);
        free(bt->yv[b]);
    }
}

static int write_file(const char *dir, const char *name, const void *data, size_t bytes, const char *mode)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, mode);
    if (!f || fwrite(data, 1, bytes, f) != bytes) {
        perror(path);
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

/* The initial parameters (as the f32 the step starts from), the batches
 * and the first losses, for compare.py. */
static int export_run(const char *dir, const gpt_layout *lay, const batches *bt, const double *loss)
{
    const gpt_config *c = &lay->cfg;
    const size_t n = (size_t)c->batch * c->seq;
    char path[4096];
    snprintf(path, sizeof path, "%s/params.f32", dir);
    remove(path);
    for (int i = 0; i < lay->nparam; i++) {
        double *v = malloc((size_t)lay->numel[i] * sizeof *v);
        float *f = malloc((size_t)lay->numel[i] * sizeof *f);
        gpt_init_values(lay, i, SEED, v);
        for (int64_t k = 0; k < lay->numel[i]; k++)
            f[k] = (float)v[k];
        int rc = write_file(dir, "params.f32", f, (size_t)lay->numel[i] * sizeof *f, "ab");
        free(v);
        free(f);
        if (rc)
            return -1;
    }
    snprintf(path, sizeof path, "%s/batches.i32", dir);
    remove(path);
    for (int b = 0; b < NBATCH; b++)
        if (write_file(dir, "batches.i32", bt->tv[b], n * 4, "ab") || write_file(dir, "batches.i32", bt->yv[b], n * 4, "ab"))
            return -1;
    snprintf(path, sizeof path, "%s/meta.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "vocab %d\nwidth %d\nlayers %d\nheads %d\nseq %d\nbatch %d\nnbatch %d\n", c->vocab, c->width,
            c->layers, c->heads, c->seq, c->batch, NBATCH);
    fprintf(f, "losses");
    for (int s = 0; s < NLOSS; s++)
        fprintf(f, " %.9g", loss[s]);
    fprintf(f, "\n");
    for (int i = 0; i < lay->nparam; i++)
        fprintf(f, "param %s %lld %lld\n", lay->name[i], (long long)lay->shape[i][0], (long long)lay->shape[i][1]);
    return fclose(f);
}

typedef struct {
    int threads, steps, rounds, warmup, first_only, no_gemm, bf16, dyn_seq;
    int attn_ab; /* --attn-bwd: the second program is f32 with knob attention_bwd 0 (the composite rule) */
    const char *export_dir;
} options;

static int run_workload(const workload *wl, const options *o)
{
    gpt_layout lay;
    if (gpt_layout_make(&wl->cfg, &lay) != RLX_OK)
        return 1;
    char load0[128], load1[128];
    loadavg(load0, sizeof load0);
    const char *cache = getenv("RLX_CACHE_DIR");
    long rss_base = peak_rss_kib();
    batches bt;
    make_batches(&wl->cfg, &bt);

    const char *pf = getenv("W10_PERF_FIRST");
    if (pf && *pf == '3')
        perf_ctl("enable");
    double t0 = now(), compile_cpu = cpu_ms();
    rlx_program *prog = gpt_compile_step(&lay);
    if (pf && *pf == '3')
        perf_ctl("disable");
    double compile_ms = 1e3 * (now() - t0);
    compile_cpu = cpu_ms() - compile_cpu;
    gpt_state st;
    if (!prog || gpt_state_init(&st, &lay, SEED) != RLX_OK) {
        fprintf(stderr, "%s: compile/init: %s\n", wl->name, rlx_last_error());
        return 1;
    }
    st.copy = getenv("W10_COPY") && *getenv("W10_COPY") == '1'; /* the step without donation, to compare */
    rlx_stats_t s0;
    rlx_stats(&s0);
    double loss[NLOSS], l;
    if (pf && *pf == '1')
        perf_ctl("enable");
    long flt0 = usage().ru_minflt;
    double cpu0 = cpu_ms();
    t0 = now();
    if (gpt_step(prog, &st, bt.tok[0], bt.tgt[0], &loss[0]) != RLX_OK) {
        fprintf(stderr, "%s: step 1: %s\n", wl->name, rlx_last_error());
        return 1;
    }
    double first_ms = 1e3 * (now() - t0);
    if (pf && *pf == '1')
        perf_ctl("disable");
    long first_flt = usage().ru_minflt - flt0;
    double first_cpu = cpu_ms() - cpu0;
    if (o->first_only) {
        /* the next steps: what the first run costs over a steady one */
        double next_ms = 1e30, next_cpu = 1e30;
        long next_flt = 0;
        if (pf && *pf == '2')
            perf_ctl("enable");
        for (int s = 1; s < 4; s++) {
            long f1 = usage().ru_minflt;
            double c1 = cpu_ms(), t1 = now();
            if (gpt_step(prog, &st, bt.tok[s], bt.tgt[s], &l) != RLX_OK)
                return 1;
            double ms = 1e3 * (now() - t1), cms = cpu_ms() - c1;
            next_cpu = cms < next_cpu ? cms : next_cpu;
            next_ms = ms < next_ms ? ms : next_ms;
            next_flt = usage().ru_minflt - f1;
        }
        if (pf && *pf == '2')
            perf_ctl("disable");
        printf("W10-NEXT first_run_minflt=%ld steady_ms=%.1f steady_minflt=%ld first_run_cpu_ms=%.1f "
               "steady_cpu_ms=%.1f compile_cpu_ms=%.1f\n",
               first_flt, next_ms, next_flt, first_cpu, next_cpu, compile_cpu);
        printf("W10-FIRST workload=%s threads=%d compile_ms=%.1f first_run_ms=%.1f first_step_ms=%.1f "
               "kernels_compiled=%llu cache_hits=%llu cache_dir=%s\n",
               wl->name, o->threads, compile_ms, first_ms, compile_ms + first_ms,
               (unsigned long long)s0.kernels_compiled, (unsigned long long)s0.cache_hits, cache ? cache : "(default)");
        fflush(stdout);
        gpt_state_free(&st);
        rlx_program_free(prog);
        free_batches(&bt);
        return 0;
    }
    for (int s = 1; s < NLOSS; s++)
        if (gpt_step(prog, &st, bt.tok[s % NBATCH], bt.tgt[s % NBATCH], &loss[s]) != RLX_OK)
            return 1;
    if (o->export_dir && export_run(o->export_dir, &lay, &bt, loss))
        return 1;
    for (int s = 0; s < o->warmup; s++)
        if (gpt_step(prog, &st, bt.tok[s % NBATCH], bt.tgt[s % NBATCH], &l) != RLX_OK)
            return 1;
    long rss_steady = peak_rss_kib();
    /* the bf16 variant: its own program and state, warmed up alike */
    gpt_layout lay16;
    gpt_config c16 = wl->cfg;
    if (!o->attn_ab)
        c16.compute = RLX_BF16;
    rlx_program *prog16 = NULL;
    gpt_state st16;
    double loss16[NLOSS], compile16_ms = NAN;
    if (o->bf16 || o->attn_ab) {
        if (gpt_layout_make(&c16, &lay16) != RLX_OK)
            return 1;
        t0 = now();
        if (o->attn_ab) /* read when rlx_grad builds the step's gradient */
            rlx_set_option("attention_bwd", "0");
        prog16 = gpt_compile_step(&lay16);
        if (o->attn_ab)
            rlx_set_option("attention_bwd", "default");
        compile16_ms = 1e3 * (now() - t0);
        if (!prog16 || gpt_state_init(&st16, &lay16, SEED) != RLX_OK) {
            fprintf(stderr, "%s bf16: compile/init: %s\n", wl->name, rlx_last_error());
            return 1;
        }
        for (int s = 0; s < NLOSS + o->warmup; s++)
            if (gpt_step(prog16, &st16, bt.tok[s % NBATCH], bt.tgt[s % NBATCH], s < NLOSS ? &loss16[s] : &l) !=
                RLX_OK) {
                fprintf(stderr, "%s bf16 step %d: %s\n", wl->name, s + 1, rlx_last_error());
                return 1;
            }
    }

    gemm_bufs gb = gemm_alloc(&wl->cfg);
    double gflop = o->no_gemm ? NAN : gemm_step(&gb) * 1e-9; /* also the GEMM warm-up */
    const int total = o->rounds * o->steps;
    double *tr = malloc((size_t)total * sizeof *tr), *tg = malloc((size_t)total * sizeof *tg);
    double *rmed = malloc((size_t)o->rounds * sizeof *rmed), *gmed = malloc((size_t)o->rounds * sizeof *gmed);
    double *t16 = malloc((size_t)total * sizeof *t16), *med16 = malloc((size_t)o->rounds * sizeof *med16);
    double *cr = malloc((size_t)total * sizeof *cr), *cx16 = malloc((size_t)total * sizeof *cx16);
    double *cmed = malloc((size_t)o->rounds * sizeof *cmed), *cmed16 = malloc((size_t)o->rounds * sizeof *cmed16);
    double *cg = malloc((size_t)total * sizeof *cg), *cgmed = malloc((size_t)o->rounds * sizeof *cgmed);
    for (int k = 0; k < total; k++)
        tg[k] = t16[k] = cx16[k] = cg[k] = NAN;
    long faults = 0;
    rlx_stats_reset();
    perf_ctl("enable");
    for (int r = 0; r < o->rounds; r++) {
        long f0 = usage().ru_minflt;
        for (int s = 0; s < o->steps; s++) {
            int k = r * o->steps + s;
            double a = now(), ca = cpu_now();
            if (gpt_step(prog, &st, bt.tok[k % NBATCH], bt.tgt[k % NBATCH], &l) != RLX_OK) {
                fprintf(stderr, "%s: timed step: %s\n", wl->name, rlx_last_error());
                return 1;
            }
            tr[k] = now() - a;
            cr[k] = cpu_now() - ca;
        }
        faults += usage().ru_minflt - f0;
        for (int s = 0; s < o->steps && !o->no_gemm; s++) {
            double a = now(), ca = cpu_now();
            gemm_step(&gb);
            tg[r * o->steps + s] = now() - a;
            cg[r * o->steps + s] = cpu_now() - ca;
        }
        for (int s = 0; s < o->steps && prog16; s++) {
            int k = r * o->steps + s;
            double a = now(), ca = cpu_now();
            if (gpt_step(prog16, &st16, bt.tok[k % NBATCH], bt.tgt[k % NBATCH], &l) != RLX_OK) {
                fprintf(stderr, "%s: timed bf16 step: %s\n", wl->name, rlx_last_error());
                return 1;
            }
            t16[k] = now() - a;
            cx16[k] = cpu_now() - ca;
        }
        rmed[r] = median(tr + r * o->steps, o->steps);
        gmed[r] = o->no_gemm ? NAN : median(tg + r * o->steps, o->steps);
        med16[r] = prog16 ? median(t16 + r * o->steps, o->steps) : NAN;
        cmed[r] = median(cr + r * o->steps, o->steps);
        cgmed[r] = o->no_gemm ? NAN : median(cg + r * o->steps, o->steps);
        cmed16[r] = prog16 ? median(cx16 + r * o->steps, o->steps) : NAN;
    }
    perf_ctl("disable");
    rlx_stats_t sx;
    rlx_stats(&sx);
    loadavg(load1, sizeof load1);
    double rb = minimum(rmed, o->rounds), gbest = minimum(gmed, o->rounds);
    const gpt_config *c = &wl->cfg;
    printf("== %s (width %d, %d layers, %d heads, seq %d, batch %d, vocab %d, f32) at %d thread(s): "
           "rlx_get_num_threads %d, openblas_get_num_threads %d, OpenBLAS core %s\n",
           wl->name, c->width, c->layers, c->heads, c->seq, c->batch, c->vocab, o->threads, rlx_get_num_threads(),
           openblas_get_num_threads(), openblas_get_corename());
    printf("   loadavg at start %s, at end %s; RLX_CACHE_DIR=%s\n", load0, load1, cache ? cache : "(unset)");
    printf("   first step: trace + rlx_compile %.1f ms (%llu kernels compiled, %llu cache hits, %.2f s), first run "
           "%.1f ms, total %.1f ms\n",
           compile_ms, (unsigned long long)s0.kernels_compiled, (unsigned long long)s0.cache_hits,
           s0.compile_seconds, first_ms, compile_ms + first_ms);
    printf("   losses: steps 1-3 %.6f %.6f %.6f\n", loss[0], loss[1], loss[2]);
    printf("   librlx step   best round median %8.3f ms, median %8.3f, min %8.3f  (%d rounds x %d steps)\n", 1e3 * rb,
           1e3 * median(tr, total), 1e3 * minimum(tr, total), o->rounds, o->steps);
    printf("   GEMM-only     best round median %8.3f ms, median %8.3f, min %8.3f  (%.3f GFLOP, %.1f GFLOP/s, %s)\n",
           1e3 * gbest, 1e3 * median(tg, total), 1e3 * minimum(tg, total), gflop, gflop / gbest, bench_gemm_engine());
    /* CPU time of the process: at one thread, less disturbed by a loaded
     * machine than the wall clock (at two, it counts the pool's spinning) */
    double crb = minimum(cmed, o->rounds), cgb = minimum(cgmed, o->rounds), *pr = malloc((size_t)o->rounds * sizeof *pr);
    for (int r = 0; r < o->rounds; r++) /* paired: both medians of one round, under the same load */
        pr[r] = cmed[r] / cgmed[r];
    double cpaired = median(pr, o->rounds);
    free(pr);
    printf("   CPU time      librlx %8.3f ms, GEMM-only %8.3f ms (best round medians): librlx / GEMM-only %.3f, "
           "paired median over rounds %.3f\n",
           1e3 * crb, 1e3 * cgb, crb / cgb, cpaired);
    printf("   librlx / GEMM-only %.2f; minor faults/step %.1f; peak RSS %.1f MiB after warm-up (%.1f before the "
           "model), %.1f at end; arena %.1f MiB, peak %.1f MiB (rlx_stats); kernels run/step %.0f\n",
           rb / gbest, (double)faults / total, rss_steady / 1024.0, rss_base / 1024.0, peak_rss_kib() / 1024.0,
           sx.arena_bytes / 1048576.0, sx.peak_bytes / 1048576.0, (double)sx.kernels_run / total);
    printf("W10-RESULT workload=%s threads=%d rlx_ms=%.3f rlx_median_ms=%.3f rlx_min_ms=%.3f gemm_ms=%.3f "
           "ratio_gemm=%.3f cpu_ratio_gemm=%.3f cpu_paired_ratio_gemm=%.3f minflt_per_step=%.1f rss_mib=%.1f rss_base_mib=%.1f compile_ms=%.1f first_run_ms=%.1f "
           "first_step_ms=%.1f loss1=%.9g load=%s\n",
           wl->name, o->threads, 1e3 * rb, 1e3 * median(tr, total), 1e3 * minimum(tr, total), 1e3 * gbest,
           rb / gbest, crb / cgb, cpaired, (double)faults / total, rss_steady / 1024.0, rss_base / 1024.0, compile_ms, first_ms,
           compile_ms + first_ms, loss[0], strtok(load1, " "));
    if (prog16 && o->attn_ab) {
        double b16 = minimum(med16, o->rounds);
        printf("   composite attention backward (knob attention_bwd 0) best round median %8.3f ms, median %8.3f, "
               "min %8.3f; losses 1-3 %.6f %.6f %.6f\n",
               1e3 * b16, 1e3 * median(t16, total), 1e3 * minimum(t16, total), loss16[0], loss16[1], loss16[2]);
        double cb = minimum(cmed, o->rounds), cb16 = minimum(cmed16, o->rounds);
        printf("W10-ATTNBWD workload=%s threads=%d kernel_ms=%.3f composite_ms=%.3f ratio_kernel_composite=%.3f "
               "min_ratio=%.3f cpu_kernel_ms=%.3f cpu_composite_ms=%.3f cpu_ratio=%.3f cpu_min_ratio=%.3f "
               "loss1_kernel=%.9g loss1_composite=%.9g load=%s\n",
               wl->name, o->threads, 1e3 * rb, 1e3 * b16, rb / b16, minimum(tr, total) / minimum(t16, total),
               1e3 * cb, 1e3 * cb16, cb / cb16, minimum(cr, total) / minimum(cx16, total), loss[0], loss16[0], load1);
        gpt_state_free(&st16);
        rlx_program_free(prog16);
        prog16 = NULL;
    }
    if (prog16) {
        double b16 = minimum(med16, o->rounds);
        printf("   bf16 mixed    best round median %8.3f ms, median %8.3f, min %8.3f; losses 1-3 %.6f %.6f %.6f; "
               "compile %.1f ms\n",
               1e3 * b16, 1e3 * median(t16, total), 1e3 * minimum(t16, total), loss16[0], loss16[1], loss16[2],
               compile16_ms);
        printf("W10-BF16 workload=%s threads=%d f32_ms=%.3f bf16_ms=%.3f ratio_f32_bf16=%.3f loss1_f32=%.6f "
               "loss1_bf16=%.6f load=%s\n",
               wl->name, o->threads, 1e3 * rb, 1e3 * b16, rb / b16, loss[0], loss16[0], load1);
        gpt_state_free(&st16);
        rlx_program_free(prog16);
    }
    fflush(stdout);
    free(t16);
    free(med16);
    free(cr);
    free(cx16);
    free(cmed);
    free(cmed16);
    free(cg);
    free(cgmed);
    free(tr);
    free(tg);
    free(rmed);
    free(gmed);
    gemm_free(&gb);
    gpt_state_free(&st);
    rlx_program_free(prog);
    free_batches(&bt);
    return 0;
}

/* ------------------------------------------------- dynamic length */

/* Tokens and targets of batch b cut to length len: [batch, len] for the
 * dynamic program (two_d), [batch*len] for the static one. */
static void cut_batch(const gpt_config *c, const batches *bt, int b, int64_t len, int two_d, rlx_tensor **tok,
                      rlx_tensor **tgt)
{
    int32_t *tv = malloc((size_t)(c->batch * len) * sizeof *tv), *yv = malloc((size_t)(c->batch * len) * sizeof *yv);
    for (int r = 0; r < c->batch; r++)
        for (int64_t k = 0; k < len; k++) {
            tv[r * len + k] = bt->tv[b][r * c->seq + k];
            yv[r * len + k] = bt->yv[b][r * c->seq + k];
        }
    const int64_t sh[2] = {c->batch, len}, flat = c->batch * len;
    *tok = two_d ? rlx_from_data(RLX_I32, 2, sh, tv) : rlx_from_data(RLX_I32, 1, &flat, tv);
    *tgt = two_d ? rlx_from_data(RLX_I32, 2, sh, yv) : rlx_from_data(RLX_I32, 1, &flat, yv);
    free(tv);
    free(yv);
}

/* Median ms of `steps` steps of prog at length len (batches in turn). */
static double steps_ms(rlx_program *prog, gpt_state *st, const gpt_config *c, const batches *bt, int64_t len,
                       int two_d, int steps)
{
    double *ms = malloc((size_t)steps * sizeof *ms), l, r = -1;
    rlx_tensor *tok[NBATCH], *tgt[NBATCH];
    for (int b = 0; b < NBATCH; b++)
        cut_batch(c, bt, b, len, two_d, &tok[b], &tgt[b]);
    int ok = 1;
    for (int s = 0; s < steps && ok; s++) {
        double t0 = now();
        ok = gpt_step(prog, st, tok[s % NBATCH], tgt[s % NBATCH], &l) == RLX_OK;
        ms[s] = 1e3 * (now() - t0);
    }
    if (ok)
        r = median(ms, steps);
    else
        fprintf(stderr, "step at length %lld: %s\n", (long long)len, rlx_last_error());
    for (int b = 0; b < NBATCH; b++) {
        rlx_release(tok[b]);
        rlx_release(tgt[b]);
    }
    free(ms);
    return r;
}

/* --dyn-seq: the step compiled once over a dynamic sequence length
 * (gpt_compile_step_len GPT_DYN_SEQ). A stream of 24 lengths in 1..seq
 * (fixed seed; some repeat): kernels compiled at the first length and at
 * all later ones, what a new length's first step costs over the next step
 * at it (its spec prepared), the arena the program holds after it. Then at
 * seq/4, seq/2 and seq: the dynamic program's step time against the
 * static-length program's at the same length (gpt_compile_step_len len),
 * interleaved in rounds of --steps each, best round median of each. */
static int run_dyn_seq(const workload *wl, const options *o)
{
    const gpt_config *c = &wl->cfg;
    gpt_layout lay;
    if (gpt_layout_make(c, &lay) != RLX_OK)
        return 1;
    batches bt;
    make_batches(c, &bt);
    double t0 = now();
    rlx_program *dyn = gpt_compile_step_len(&lay, GPT_DYN_SEQ);
    double compile_ms = 1e3 * (now() - t0);
    gpt_state st;
    if (!dyn || gpt_state_init(&st, &lay, SEED) != RLX_OK) {
        fprintf(stderr, "%s: compile/init: %s\n", wl->name, rlx_last_error());
        return 1;
    }
    enum { NSTREAM = 24 };
    uint64_t rng = 0x2545f4914f6cdd1dull, first_kc = 0, later_kc = 0;
    double new_ms[NSTREAM], rep_ms[NSTREAM];
    int nnew = 0, nrep = 0, seen[4096] = {0}; /* (seq <= 4096: gpt_layout_make's workloads here) */
    for (int k = 0; k < NSTREAM; k++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int64_t len = k == 0 ? c->seq : 1 + (int64_t)(rng % (uint64_t)c->seq);
        rlx_stats_t s;
        rlx_stats_reset();
        double ms = steps_ms(dyn, &st, c, &bt, len, 1, 1);
        rlx_stats(&s);
        if (ms < 0)
            return 1;
        if (k == 0)
            first_kc = s.kernels_compiled;
        else
            later_kc += s.kernels_compiled;
        /* a new length's step minus the next step at it: what a new binding
         * costs (instantiate, schedule, memory plan, kernels looked up) */
        double again = seen[len] ? -1 : steps_ms(dyn, &st, c, &bt, len, 1, 1);
        if (seen[len]++)
            rep_ms[nrep++] = ms;
        else if (k > 0)
            new_ms[nnew++] = ms - again;
        printf("W10-DYN-STREAM workload=%s step=%d len=%lld ms=%.2f next_step_ms=%.2f kernels_compiled=%llu %s\n",
               wl->name, k, (long long)len, ms, again, (unsigned long long)s.kernels_compiled,
               seen[len] > 1 ? "repeat" : "new");
    }
    int kept = 0, narena = 0;
    int64_t prepared = 0;
    int64_t arena = 0;
    rlx_program_specs(dyn, &kept, &prepared);
    rlx_program_arenas(dyn, &narena, &arena);
    printf("W10-DYN workload=%s threads=%d compile_ms=%.1f kernels_first_len=%llu kernels_later_lens=%llu "
           "specs_prepared=%lld kept=%d new_len_extra_ms_median=%.2f repeat_len_step_ms_median=%.2f arenas=%d "
           "arena_bytes=%lld\n",
           wl->name, o->threads, compile_ms, (unsigned long long)first_kc, (unsigned long long)later_kc,
           (long long)prepared, kept, nnew ? median(new_ms, nnew) : -1.0, nrep ? median(rep_ms, nrep) : -1.0, narena, (long long)arena);
    fflush(stdout);
    const int64_t lens[3] = {c->seq / 4 > 0 ? c->seq / 4 : 1, c->seq / 2 > 0 ? c->seq / 2 : 1, c->seq};
    int status = 0;
    for (int k = 0; k < 3 && !status; k++) {
        int64_t len = lens[k];
        rlx_program *stat = gpt_compile_step_len(&lay, len);
        gpt_state ss;
        if (!stat || gpt_state_init(&ss, &lay, SEED) != RLX_OK) {
            fprintf(stderr, "%s: static compile at %lld: %s\n", wl->name, (long long)len, rlx_last_error());
            return 1;
        }
        double bd = 1e300, bs = 1e300;
        steps_ms(dyn, &st, c, &bt, len, 1, o->warmup + 1);
        steps_ms(stat, &ss, c, &bt, len, 0, o->warmup + 1);
        for (int r = 0; r < o->rounds; r++) {
            double d = steps_ms(dyn, &st, c, &bt, len, 1, o->steps), t = steps_ms(stat, &ss, c, &bt, len, 0, o->steps);
            if (d < 0 || t < 0)
                status = 1;
            bd = d < bd ? d : bd;
            bs = t < bs ? t : bs;
        }
        printf("W10-DYN-VS-STATIC workload=%s threads=%d len=%lld dyn_ms=%.3f static_ms=%.3f ratio=%.3f\n", wl->name,
               o->threads, (long long)len, bd, bs, bd / bs);
        fflush(stdout);
        gpt_state_free(&ss);
        rlx_program_free(stat);
    }
    gpt_state_free(&st);
    rlx_program_free(dyn);
    free_batches(&bt);
    return status;
}

/* ---------------------------------------------------------------- main */

static int run_child(char *exe, const char *cfg, int threads, const options *o, int first_only, const char *cache)
{
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        char ts[8], ss[16], rs[16], ws[16], cs[8];
        snprintf(cs, sizeof cs, "%s", cfg);
        snprintf(ts, sizeof ts, "%d", threads);
        snprintf(ss, sizeof ss, "%d", o->steps);
        snprintf(rs, sizeof rs, "%d", o->rounds);
        snprintf(ws, sizeof ws, "%d", o->warmup);
        char *args[16] = {exe, "--threads", ts, "--config", cs, "--steps", ss, "--rounds", rs, "--warmup", ws};
        int na = 11;
        if (first_only)
            args[na++] = "--first-step";
        if (o->bf16)
            args[na++] = "--bf16";
        if (o->attn_ab)
            args[na++] = "--attn-bwd";
        setenv("OPENBLAS_NUM_THREADS", ts, 1);
        setenv("RLX_CACHE_DIR", cache, 1);
        execv("/proc/self/exe", args);
        perror("execv /proc/self/exe");
        _exit(127);
    }
    int ws;
    return waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0;
}

static int driver(char *exe, const char *cfg, const options *o)
{
    printf("librlx %s, %s\nW10: GPT training step (gpt_model.c), Adam lr 3e-4, f32\n", rlx_version(), rlx_host_info());
    fflush(stdout);
    int status = 0;
    for (size_t w = 0; w < sizeof workloads / sizeof *workloads; w++) {
        const char *one = w ? "b" : "a";
        if (strcmp(cfg, "all") != 0 && strcmp(cfg, one) != 0)
            continue;
        for (int t = 1; t <= 2; t++) {
            char dir[] = "/tmp/rlx-w10-cache-XXXXXX";
            if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return 1;
            }
            status |= run_child(exe, one, t, o, 0, dir); /* cold disk cache */
            status |= run_child(exe, one, t, o, 1, dir); /* warm: same directory */
            char cmd[128];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
            if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", dir);
        }
    }
    return status;
}

int main(int argc, char **argv)
{
    options o = {.steps = 10, .rounds = 5, .warmup = 3};
    const char *cfg = "all";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            o.threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            o.steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            o.rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
            o.warmup = atoi(argv[++i]);
        else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            cfg = argv[++i];
        else if (strcmp(argv[i], "--export") == 0 && i + 1 < argc)
            o.export_dir = argv[++i];
        else if (strcmp(argv[i], "--first-step") == 0)
            o.first_only = 1;
        else if (strcmp(argv[i], "--no-gemm") == 0)
            o.no_gemm = 1;
        else if (strcmp(argv[i], "--bf16") == 0)
            o.bf16 = 1;
        else if (strcmp(argv[i], "--attn-bwd") == 0)
            o.attn_ab = 1;
        else if (strcmp(argv[i], "--dyn-seq") == 0)
            o.dyn_seq = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--threads N] [--config a|b|all] [--steps S] [--rounds R] [--warmup W] "
                    "[--first-step] [--no-gemm] [--bf16] [--attn-bwd] [--export DIR] [--dyn-seq]\n",
                    argv[0]);
            return 64;
        }
    }
    if (strcmp(cfg, "a") && strcmp(cfg, "b") && strcmp(cfg, "all")) {
        fprintf(stderr, "--config: a, b or all\n");
        return 64;
    }
    o.steps = o.steps < 3 ? 3 : o.steps;
    o.rounds = o.rounds < 1 ? 1 : o.rounds;
    o.warmup = o.warmup < 0 ? 0 : o.warmup;
    if (o.dyn_seq && o.threads <= 0)
        o.threads = 1; /* one configuration in this process */
    if (o.threads <= 0)
        return driver(argv[0], cfg, &o);

    char want[16];
    snprintf(want, sizeof want, "%d", o.threads);
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    if (!env || strcmp(env, want) != 0) { /* OpenBLAS reads it at load: re-exec */
        setenv("OPENBLAS_NUM_THREADS", want, 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    rlx_set_num_threads(o.threads);
    int status = 0;
    for (size_t w = 0; w < sizeof workloads / sizeof *workloads; w++) {
        const char *one = w ? "b" : "a";
        if (strcmp(cfg, "all") == 0 || strcmp(cfg, one) == 0)
            status |= o.dyn_seq ? run_dyn_seq(&workloads[w], &o) : run_workload(&workloads[w], &o);
    }
    return status;
}
