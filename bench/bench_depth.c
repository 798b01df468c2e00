/*
 * bench_depth.c — rlx-bench-depth: a chain of N nodes (default 1,000,000:
 * alternating adds and muls of a small tensor) built, realized and
 * differentiated, each timed, with the peak resident memory (issue 18:
 * every walk over depth iterative, every pass linear or n log n).
 *
 *   rlx-bench-depth [nodes (1000000)] [width (4)] [skip-forward (0)]
 *
 * skip-forward 1 leaves the chain's own realization out (the gradient
 * alone), for when the forward realization is the slow part.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "rlx.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int64_t w = argc > 2 ? atol(argv[2]) : 4;
    bool skip_forward = argc > 3 && atoi(argv[3]) != 0;
    rlx_tensor *x = rlx_rand(RLX_F32, 1, &w, 1), *a = rlx_rand(RLX_F32, 1, &w, 2);
    if (rlx_realize(x) != RLX_OK || rlx_realize(a) != RLX_OK) {
        fprintf(stderr, "%s\n", rlx_last_error());
        return 1;
    }
    double t0 = now();
    rlx_tensor *y = x;
    for (long i = 0; i < n; i++) {
        /* y*0.999 + a*1e-3 keeps the values bounded at any depth */
        rlx_tensor *z = (i & 1) ? rlx_add(y, rlx_mul_s(a, 1e-6)) : rlx_mul_s(y, 0.999999);
        if (y != x)
            rlx_release(y);
        y = z;
    }
    double t1 = now();
    rlx_status st = skip_forward ? RLX_OK : rlx_realize(y);
    double t2 = now();
    if (st != RLX_OK) {
        fprintf(stderr, "realize: %s\n", rlx_last_error());
        return 1;
    }
    rlx_tensor *loss = rlx_sum(y, (int[]){0}, 1, false), *g = NULL;
    st = rlx_grad(loss, &x, 1, &g);
    double t3 = now();
    if (st == RLX_OK)
        st = rlx_realize(g);
    double t4 = now();
    if (st != RLX_OK) {
        fprintf(stderr, "grad: %s\n", rlx_last_error());
        return 1;
    }
    float gv[4] = {0};
    rlx_read_f32(g, gv, w < 4 ? (size_t)w : 4);
    printf("rlx-bench-depth: %ld nodes (width %lld): build %.2f s, realize %.2f s, grad build %.2f s, grad realize "
           "%.2f s, total %.2f s; peak RSS %.0f MiB; dloss/dx[0] = %g\n",
           n, (long long)w, t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0, peak_mib(), (double)gv[0]);
    return 0;
}
