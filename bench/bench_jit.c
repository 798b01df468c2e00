/*
 * bench_jit.c — the JIT backend on memory-bound workloads, each beside a
 * traffic reference measured in the same process right after it:
 *
 *   W1  gelu_tanh(x*a + b), x, a, b of n f32            reference: x + a + b
 *   W2  tanh(square(exp((relu(x*1.5 + 0.5) - 0.25) * x) + x) - 1) over n
 *                                                        reference: x + 1
 *   W3  relu(X + bias), X [n/4096, 4096], bias [4096]    reference: X + bias
 *   W4a row sums of X [n/4096, 4096]                     reference: 8-accumulator row sums
 *   W4b softmax over the last axis of X [n/4096, 4096]   reference: x + 1
 *   W4c layer_norm over the last axis of X [n/2048, 1024] with gamma, beta
 *                                                        reference: x * gamma + beta
 *   W7  a + b of two 4-element tensors built, realized and read, per
 *       iteration; and the same through a compiled program (no reference)
 *   compile: the first realization of W2 (1024 elements) in this process,
 *       LLJIT start included, then a second W2 kernel (another shape)
 *
 * Prints median ms over runs, effective GB/s (bytes read + written once),
 * and reference-time / workload-time (the fraction; 1.0 = the memory-bound
 * limit), of the medians and of the best runs. Inputs are uniform in (-2, 2). Each run builds and realizes the
 * graph again (a cache hit: no compile), the result released after it.
 *
 * Usage: rlx-bench-jit [runs] [n] [threads] [workloads]
 *   runs 11, n 16777216, threads 1 (the reference loops always run on one),
 *   workloads a comma list of W1,W2,W3,W4a,W4b,W4c,W7,compile (default all).
 * RLX_BACKEND is set to jit here.
 *
 * Output buffers come from librlx's buffer pool (runtime/bufpool.c), which
 * recycles large blocks between realizations: only the first (cold)
 * realization, compile included and printed apart, pays for fresh pages.
 * CPU time of the calling thread is printed beside wall time: the machine
 * is shared, and a core held by another process slows the compute-bound
 * kernels more than the memory-bound references.
 */
#define _GNU_SOURCE /* clock_gettime, setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "rlx.h"

void traffic_w1(const float *restrict x, const float *restrict a, const float *restrict b, float *restrict out,
                size_t n);
void traffic_w2(const float *restrict x, float *restrict out, size_t n);
void traffic_w3(const float *restrict x, const float *restrict bias, float *restrict out, size_t rows, size_t cols);
void traffic_w4a(const float *restrict x, float *restrict out, size_t rows, size_t cols);
void traffic_w4c(const float *restrict x, const float *restrict g, const float *restrict b, float *restrict out,
                 size_t rows, size_t cols);

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu_now(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

/* The references write to a buffer like the JIT's outputs (2 MiB-aligned,
 * huge-page advised, touched before timing), so both pay the same for
 * stores. */
static float *huge_buffer(size_t bytes)
{
    size_t huge = (size_t)2 << 20, len = (bytes + huge - 1) / huge * huge;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(p, len, MADV_HUGEPAGE);
    memset(p, 0, bytes);
    return p;
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

static double minimum(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static float *uniform(size_t n, unsigned seed)
{
    float *v = malloc(n * sizeof *v);
    unsigned long long s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)(-2.0 + 4.0 * (double)(s >> 11) * 0x1p-53);
    }
    return v;
}

/* ------------------------------------------------------------ workloads */

typedef struct {
    rlx_tensor *x, *a, *b;         /* n elements each, realized */
    rlx_tensor *bias, *gamma, *beta; /* [4096], [1024], [1024] */
    size_t n;
} inputs;

static rlx_tensor *rows_of(rlx_tensor *x, size_t n, int64_t cols)
{
    return rlx_reshape(x, 2, (int64_t[]){(int64_t)(n / (size_t)cols), cols});
}

static rlx_tensor *w1(const inputs *in) { return rlx_gelu_tanh(rlx_add(rlx_mul(in->x, in->a), in->b)); }

static rlx_tensor *w2(const inputs *in)
{
    rlx_tensor *x = in->x;
    rlx_tensor *t = rlx_relu(rlx_add_s(rlx_mul_s(x, 1.5), 0.5));
    t = rlx_exp(rlx_mul(rlx_sub_s(t, 0.25), x));
    return rlx_tanh(rlx_sub_s(rlx_add(rlx_mul(t, t), x), 1));
}

static rlx_tensor *w3(const inputs *in) { return rlx_relu(rlx_add(rows_of(in->x, in->n, 4096), in->bias)); }
static rlx_tensor *w4a(const inputs *in) { return rlx_sum(rows_of(in->x, in->n, 4096), (int[]){1}, 1, false); }
static rlx_tensor *w4b(const inputs *in) { return rlx_softmax(rows_of(in->x, in->n, 4096), -1); }
static rlx_tensor *w4c(const inputs *in)
{
    rlx_tensor *half = rlx_narrow(in->x, 0, 0, (int64_t)(in->n / 2));
    return rlx_layer_norm(rows_of(half, in->n / 2, 1024), in->gamma, in->beta, 1e-5);
}

/* Median seconds of build + realize; *cold gets the first one. */
static double time_jit(rlx_tensor *(*build)(const inputs *), const inputs *in, int runs, double *cold,
                       uint64_t *kernels, double *cpu, double *best)
{
    double *t = malloc((size_t)runs * sizeof *t), *c = malloc((size_t)runs * sizeof *c);
    for (int r = -1; r < runs; r++) {
        rlx_scope_begin();
        rlx_stats_reset();
        double t0 = now(), c0 = cpu_now();
        rlx_tensor *y = build(in);
        if (rlx_realize(y) != RLX_OK) {
            fprintf(stderr, "realize failed: %s\n", rlx_last_error());
            exit(1);
        }
        double dt = now() - t0, dc = cpu_now() - c0;
        rlx_stats_t s;
        rlx_stats(&s);
        *kernels = s.kernels_run;
        rlx_scope_end();
        if (r < 0)
            *cold = dt;
        else
            t[r] = dt, c[r] = dc;
    }
    *best = minimum(t, runs);
    double m = median(t, runs);
    *cpu = median(c, runs);
    free(t);
    free(c);
    return m;
}

/* fraction: of the medians; best: of the fastest runs of each (less
 * sensitive to other processes on a shared machine) */
static void report(const char *name, double jit, double cpu, double ref, double bytes, double cold,
                   uint64_t kernels, double jit_best, double ref_best)
{
    printf("%-4s jit %7.2f ms (cpu %7.2f) %5.1f GB/s | reference %7.2f ms %5.1f GB/s | fraction %.2f (best %.2f / %.2f"
           " ms: %.2f) | kernels %llu | cold %.1f ms\n",
           name, 1e3 * jit, 1e3 * cpu, bytes / jit * 1e-9, 1e3 * ref, bytes / ref * 1e-9, ref / jit, 1e3 * jit_best,
           1e3 * ref_best, ref_best / jit_best, (unsigned long long)kernels, 1e3 * cold);
    fflush(stdout);
}

typedef struct {
    const float *x, *a, *b, *bias, *gamma, *beta;
    float *out;
    size_t n;
} host;

static void ref_run(int w, const host *h)
{
    switch (w) {
    case 1: traffic_w1(h->x, h->a, h->b, h->out, h->n); break;
    case 2: case 5: traffic_w2(h->x, h->out, h->n); break;
    case 3: traffic_w3(h->x, h->bias, h->out, h->n / 4096, 4096); break;
    case 4: traffic_w4a(h->x, h->out, h->n / 4096, 4096); break;
    default: traffic_w4c(h->x, h->gamma, h->beta, h->out, h->n / 2048, 1024); break;
    }
}

static double time_ref(int w, const host *h, int runs, double *best)
{
    double *t = malloc((size_t)runs * sizeof *t);
    ref_run(w, h); /* warm: pages touched, caches in the same state as for the JIT */
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        ref_run(w, h);
        t[r] = now() - t0;
    }
    *best = minimum(t, runs);
    double m = median(t, runs);
    free(t);
    return m;
}

/* W7: per-iteration ns of building, realizing and reading a + b. */
static void w7(int runs)
{
    enum { ITERS = 20000 };
    float va[4] = {1, 2, 3, 4}, vb[4] = {5, 6, 7, 8}, out[4];
    int64_t four = 4;
    rlx_tensor *a = rlx_from_data(RLX_F32, 1, &four, va), *b = rlx_from_data(RLX_F32, 1, &four, vb);
    double *t = malloc((size_t)runs * sizeof *t), *tp = malloc((size_t)runs * sizeof *tp);
    rlx_tensor *ia = rlx_input("a", RLX_F32, 1, &four), *ib = rlx_input("b", RLX_F32, 1, &four);
    rlx_tensor *sum = rlx_add(ia, ib);
    rlx_program *p = rlx_compile(&sum, 1);
    rlx_binding bind[2] = {{"a", a}, {"b", b}};
    for (int r = -1; r < runs; r++) {
        double t0 = now();
        for (int i = 0; i < ITERS; i++) {
            rlx_tensor *c = rlx_add(a, b);
            if (rlx_read_f32(c, out, 4) != RLX_OK) {
                fprintf(stderr, "W7 failed: %s\n", rlx_last_error());
                exit(1);
            }
            rlx_release(c);
        }
        double t1 = now();
        for (int i = 0; p && i < ITERS; i++) {
            rlx_tensor *c = NULL;
            if (rlx_program_run(p, bind, 2, &c) != RLX_OK || rlx_read_f32(c, out, 4) != RLX_OK) {
                fprintf(stderr, "W7 program failed: %s\n", rlx_last_error());
                exit(1);
            }
            rlx_release(c);
        }
        double t2 = now();
        if (r >= 0)
            t[r] = (t1 - t0) / ITERS, tp[r] = (t2 - t1) / ITERS;
    }
    printf("W7   a + b of 4 elements, build + realize + read: %.0f ns per iteration; through a compiled program: %s%.0f ns\n",
           1e9 * median(t, runs), p ? "" : "(no program) ", p ? 1e9 * median(tp, runs) : 0.0);
    rlx_program_free(p);
    rlx_release(sum);
    rlx_release(ia);
    rlx_release(ib);
    rlx_release(a);
    rlx_release(b);
    free(t);
    free(tp);
}

/* compile: first realization of W2 in this process (LLJIT start included),
 * then a second W2 kernel of another shape (a compile without the start). */
static void compile_latency(void)
{
    double ms[2];
    for (int k = 0; k < 2; k++) {
        size_t n = 1024 + (size_t)k;
        float *v = uniform(n, 9);
        int64_t sh = (int64_t)n;
        inputs in = {.x = rlx_from_data(RLX_F32, 1, &sh, v), .n = n};
        rlx_stats_reset();
        double t0 = now();
        rlx_tensor *y = w2(&in);
        if (rlx_realize(y) != RLX_OK) {
            fprintf(stderr, "compile bench failed: %s\n", rlx_last_error());
            exit(1);
        }
        ms[k] = 1e3 * (now() - t0);
        rlx_stats_t s;
        rlx_stats(&s);
        if (s.kernels_compiled != 1)
            fprintf(stderr, "compile bench: %llu kernels compiled\n", (unsigned long long)s.kernels_compiled);
        rlx_release(y);
        rlx_release(in.x);
        free(v);
    }
    printf("compile W2: first realization in the process %.1f ms (LLJIT start included), another W2 kernel %.1f ms;"
           " disk cache: none yet\n",
           ms[0], ms[1]);
}

static int wanted(const char *list, const char *name)
{
    if (!list)
        return 1;
    size_t len = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += len)
        if ((p == list || p[-1] == ',') && (p[len] == ',' || p[len] == 0))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 11;
    size_t n = argc > 2 ? (size_t)atoll(argv[2]) : (size_t)1 << 24;
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    const char *which = argc > 4 ? argv[4] : NULL;
    if (runs < 1)
        runs = 1;
    n = n < 4096 ? 4096 : n / 4096 * 4096;
    rlx_set_num_threads(threads > 0 ? threads : 1);
    setenv("RLX_BACKEND", "jit", 1);
    printf("librlx %s, %s, n = %zu f32, median of %d runs, %d jit thread(s)\n", rlx_version(), rlx_host_info(), n,
           runs, rlx_get_num_threads());
    if (wanted(which, "compile"))
        compile_latency(); /* first: the process has not started LLJIT yet */
    float *x = uniform(n, 1), *a = uniform(n, 2), *b = uniform(n, 3), *out = huge_buffer(n * sizeof *out);
    float *bias = uniform(4096, 4), *gamma = uniform(1024, 5), *beta = uniform(1024, 6);
    int64_t shape[1] = {(int64_t)n}, s4096 = 4096, s1024 = 1024;
    inputs in = {rlx_from_data(RLX_F32, 1, shape, x),      rlx_from_data(RLX_F32, 1, shape, a),
                 rlx_from_data(RLX_F32, 1, shape, b),      rlx_from_data(RLX_F32, 1, &s4096, bias),
                 rlx_from_data(RLX_F32, 1, &s1024, gamma), rlx_from_data(RLX_F32, 1, &s1024, beta), n};
    /* the references read the very bytes the JIT reads (its input payloads) */
    host h = {rlx_data(in.x), rlx_data(in.a), rlx_data(in.b), rlx_data(in.bias), rlx_data(in.gamma),
              rlx_data(in.beta), out, n};
    static const struct {
        const char *name;
        rlx_tensor *(*build)(const inputs *);
        int ref;
    } ws[] = {{"W1", w1, 1}, {"W2", w2, 2}, {"W3", w3, 3}, {"W4a", w4a, 4}, {"W4b", w4b, 5}, {"W4c", w4c, 6}};
    double fn = (double)n;
    const double bytes[] = {16 * fn, 8 * fn, 8 * fn + 4 * 4096, 4 * fn + fn / 1024, 8 * fn, 4 * fn + 8 * 1024};
    for (int i = 0; i < 6; i++) {
        if (!wanted(which, ws[i].name))
            continue;
        double cold = 0, cpu = 0, jbest = 0, rbest = 0;
        uint64_t kernels = 0;
        double jit = time_jit(ws[i].build, &in, runs, &cold, &kernels, &cpu, &jbest);
        double ref = time_ref(ws[i].ref, &h, runs, &rbest);
        report(ws[i].name, jit, cpu, ref, bytes[i], cold, kernels, jbest, rbest);
    }
    if (wanted(which, "W7"))
        w7(runs);
    rlx_release(in.x);
    rlx_release(in.a);
    rlx_release(in.b);
    rlx_release(in.bias);
    rlx_release(in.gamma);
    rlx_release(in.beta);
    free(x);
    free(a);
    free(b);
    munmap(out, n * sizeof *out);
    free(bias);
    free(gamma);
    free(beta);
    return 0;
}
