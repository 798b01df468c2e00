/*
 * bench_jit.c — the JIT backend on memory-bound elementwise workloads,
 * beside a traffic reference measured in the same process:
 *
 *   W1  gelu_tanh(x*a + b), x, a, b of 16M f32       reference: x + a + b
 *   W2  tanh(square(exp((relu(x*1.5 + 0.5) - 0.25) * x) + x) - 1) over 16M f32
 *                                                     reference: x + 1
 *
 * Prints median ms over runs, effective GB/s (bytes read + written once),
 * and reference-time / workload-time. Inputs are uniform in (-2, 2).
 * Usage: rlx-bench-jit [runs] [n] [threads]   (RLX_BACKEND is set to jit
 * here; threads defaults to 1, the reference loops always run on one).
 *
 * Large buffers are recycled by malloc
 * (mallopt below) the way the planned buffer pool will recycle them: a
 * fresh 64 MiB buffer costs ~200 ms of first-touch page faults here, which
 * would measure the kernel allocator, not the kernel. The first (cold)
 * realization, compile included, is printed apart.
 */
#define _GNU_SOURCE /* clock_gettime, setenv, mallopt */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx.h"

void traffic_w1(const float *restrict x, const float *restrict a, const float *restrict b, float *restrict out,
                size_t n);
void traffic_w2(const float *restrict x, float *restrict out, size_t n);

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Wall time is what counts; this thread's CPU time is printed beside it
 * because the machine is shared: another process may hold a core, which
 * slows compute-bound kernels more than the memory-bound reference. */
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu_now(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

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

static rlx_tensor *w1(rlx_tensor *const *in) { return rlx_gelu_tanh(rlx_add(rlx_mul(in[0], in[1]), in[2])); }

static rlx_tensor *w2(rlx_tensor *const *in)
{
    rlx_tensor *x = in[0];
    rlx_tensor *t = rlx_relu(rlx_add_s(rlx_mul_s(x, 1.5), 0.5));
    t = rlx_exp(rlx_mul(rlx_sub_s(t, 0.25), x));
    return rlx_tanh(rlx_sub_s(rlx_add(rlx_mul(t, t), x), 1));
}

/* Median seconds of build + realize; *cold gets the first one. */
static double time_jit(rlx_tensor *(*build)(rlx_tensor *const *), rlx_tensor *const *in, int runs, double *cold,
                       uint64_t *kernels, double *cpu)
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
    double m = median(t, runs);
    *cpu = median(c, runs);
    free(t);
    free(c);
    return m;
}

static void report(const char *name, double jit, double cpu, double ref, double bytes, double cold,
                   uint64_t kernels)
{
    printf("%-3s jit %7.2f ms (cpu %7.2f) %5.1f GB/s | reference %7.2f ms %5.1f GB/s | fraction %.2f | kernels %llu"
           " | cold %.1f ms\n",
           name, 1e3 * jit, 1e3 * cpu, bytes / jit * 1e-9, 1e3 * ref, bytes / ref * 1e-9, ref / jit,
           (unsigned long long)kernels, 1e3 * cold);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 11;
    size_t n = argc > 2 ? (size_t)atoll(argv[2]) : (size_t)1 << 24;
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    if (runs < 1)
        runs = 1;
    rlx_set_num_threads(threads > 0 ? threads : 1);
    mallopt(M_MMAP_THRESHOLD, 1 << 30); /* recycle large buffers (see above) */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    setenv("RLX_BACKEND", "jit", 1);
    printf("librlx %s, %s, n = %zu f32, median of %d runs, %d jit thread(s)\n", rlx_version(), rlx_host_info(), n,
           runs, rlx_get_num_threads());
    float *x = uniform(n, 1), *a = uniform(n, 2), *b = uniform(n, 3), *out = malloc(n * sizeof *out);
    int64_t shape[1] = {(int64_t)n};
    rlx_tensor *in[3] = {rlx_from_data(RLX_F32, 1, shape, x), rlx_from_data(RLX_F32, 1, shape, a),
                         rlx_from_data(RLX_F32, 1, shape, b)};
    double *tr = malloc((size_t)runs * sizeof *tr), cold, cpu;
    uint64_t kernels;

    double jit = time_jit(w1, in, runs, &cold, &kernels, &cpu);
    traffic_w1(x, a, b, out, n);
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        traffic_w1(x, a, b, out, n);
        tr[r] = now() - t0;
    }
    report("W1", jit, cpu, median(tr, runs), 16.0 * (double)n, cold, kernels);

    jit = time_jit(w2, in, runs, &cold, &kernels, &cpu);
    traffic_w2(x, out, n);
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        traffic_w2(x, out, n);
        tr[r] = now() - t0;
    }
    report("W2", jit, cpu, median(tr, runs), 8.0 * (double)n, cold, kernels);

    for (int i = 0; i < 3; i++)
        rlx_release(in[i]);
    free(x);
    free(a);
    free(b);
    free(out);
    free(tr);
    return 0;
}
