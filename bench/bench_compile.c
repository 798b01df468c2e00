/*
 * bench_compile.c — the latency of the first realization of W2
 * (tanh(square(exp((relu(x*1.5 + 0.5) - 0.25) * x) + x) - 1), 1024 f32)
 * in a fresh process: LLJIT start, compile or disk-cache load, run. One
 * measurement per process, so a shell loop takes medians over processes:
 *
 *   d=$(mktemp -d); for i in $(seq 11); do rm -rf $d/c; \
 *     RLX_CACHE_DIR=$d/c build/bench/rlx-bench-compile; done     # cold
 *   RLX_CACHE_DIR=$d/c build/bench/rlx-bench-compile             # fill, then
 *   for i in $(seq 11); do RLX_CACHE_DIR=$d/c build/bench/rlx-bench-compile; done  # warm
 *
 * Prints "<ms> compiled=<n> hits=<n>" (hits counts disk loads in a fresh
 * process). bench/compile_latency.sh runs both loops and prints medians.
 * RLX_DEBUG=1 splits the time: optimizer and codegen, or load (2: JIT start).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rlx.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void)
{
    enum { N = 1024 };
    static float v[N];
    for (int i = 0; i < N; i++)
        v[i] = -2.0f + 4.0f * (float)i / N;
    if (rlx_set_option("backend", "jit") != RLX_OK)
        return 1;
    int64_t sh = N;
    rlx_scope_begin(); /* releases every tensor made below at rlx_scope_end */
    rlx_tensor *x = rlx_from_data(RLX_F32, 1, &sh, v);
    double t0 = now();
    rlx_tensor *t = rlx_relu(rlx_add_s(rlx_mul_s(x, 1.5), 0.5));
    t = rlx_exp(rlx_mul(rlx_sub_s(t, 0.25), x));
    rlx_tensor *y = rlx_tanh(rlx_sub_s(rlx_add(rlx_mul(t, t), x), 1));
    if (rlx_realize(y) != RLX_OK) {
        fprintf(stderr, "bench_compile: %s\n", rlx_last_error());
        return 1;
    }
    double ms = 1e3 * (now() - t0);
    rlx_stats_t s;
    rlx_stats(&s);
    printf("%.3f compiled=%llu hits=%llu\n", ms, (unsigned long long)s.kernels_compiled,
           (unsigned long long)s.cache_hits);
    rlx_scope_end();
    return 0;
}
