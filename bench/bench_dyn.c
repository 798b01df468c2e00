/*
 * bench_dyn.c — what a new binding of a dynamic dim costs a compiled
 * program: the MLP y = softmax(x + linear(gelu_tanh(linear(layer_norm(x)))))
 * (width 256, f32) over x [-1, 256], run at 64 distinct batch sizes.
 *
 * Pass 1 runs each size once (kernels compiled or found). Pass 2, each size's
 * best of [rounds] rounds, runs each size twice in a row: the first run finds its
 * spec evicted (8 are kept) and prepares it again with every kernel
 * already compiled (instantiate, then the schedule from a kept spec's plan,
 * memory plan, plan build), the
 * second runs the kept spec. Prints ms per size of both and their
 * difference, the compiles of pass 2 (rlx_stats, should be 0), and how
 * many specs were made from a kept one's plan (rlx_program_reuses).
 *
 *   build/bench/rlx-bench-dyn [rounds]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rlx.h"

enum { W = 256, NSIZES = 64 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double run(rlx_program *p, rlx_tensor *xv)
{
    rlx_tensor *y = NULL;
    rlx_scope_begin(); /* owns y */
    double t0 = now();
    if (rlx_program_run(p, &(rlx_binding){"x", xv}, 1, &y) != RLX_OK) {
        fprintf(stderr, "run: %s\n", rlx_last_error());
        exit(1);
    }
    double t = now() - t0;
    rlx_scope_end();
    return t;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    rlx_scope_begin();
    int64_t ws[2] = {W, W}, bs[1] = {W};
    rlx_tensor *w1 = rlx_randn(RLX_F32, 2, ws, 1), *w2 = rlx_randn(RLX_F32, 2, ws, 2);
    rlx_tensor *b1 = rlx_randn(RLX_F32, 1, bs, 3), *b2 = rlx_randn(RLX_F32, 1, bs, 4);
    rlx_tensor *g = rlx_ones(RLX_F32, 1, bs), *be = rlx_zeros(RLX_F32, 1, bs);
    rlx_realize_many((rlx_tensor *[]){w1, w2, b1, b2, g, be}, 6); /* parameters: values, not recomputed per run */
    rlx_tensor *x = rlx_input("x", RLX_F32, 2, (int64_t[]){-1, W});
    rlx_tensor *h = rlx_gelu_tanh(rlx_linear(rlx_layer_norm(x, g, be, 1e-5), w1, b1));
    rlx_tensor *y = rlx_softmax(rlx_add(x, rlx_linear(h, w2, b2)), -1);
    rlx_program *p = rlx_compile(&y, 1);
    if (!p) {
        fprintf(stderr, "compile: %s\n", rlx_last_error());
        return 1;
    }
    rlx_tensor *xs[NSIZES];
    for (int i = 0; i < NSIZES; i++)
        xs[i] = rlx_randn(RLX_F32, 2, (int64_t[]){8 + 3 * i, W}, 10 + (uint64_t)i);
    rlx_realize_many(xs, NSIZES);
    rlx_stats_t st;
    rlx_stats_reset();
    double first = 0;
    for (int i = 0; i < NSIZES; i++)
        first += run(p, xs[i]);
    rlx_stats(&st);
    printf("pass 1: %.3f ms per new size (%llu kernels compiled)\n", 1e3 * first / NSIZES,
           (unsigned long long)st.kernels_compiled);
    rlx_stats_reset();
    /* each size's best over the rounds (the machine is shared: noise only adds) */
    double bn[NSIZES], bk[NSIZES], best_new = 0, best_kept = 0;
    for (int i = 0; i < NSIZES; i++)
        bn[i] = bk[i] = 1e30;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < NSIZES; i++) {
            double tn = run(p, xs[i]), tk = run(p, xs[i]);
            bn[i] = tn < bn[i] ? tn : bn[i];
            bk[i] = tk < bk[i] ? tk : bk[i];
        }
    }
    for (int i = 0; i < NSIZES; i++)
        best_new += bn[i], best_kept += bk[i];
    rlx_stats(&st);
    int kept;
    int64_t prepared;
    int64_t reused;
    rlx_program_specs(p, &kept, &prepared);
    rlx_program_reuses(p, &reused);
    printf("pass 2: new binding (kernels compiled) %.3f ms, kept spec %.3f ms, difference %.3f ms per size; "
           "%llu kernels compiled, %lld specs prepared (%lld from a kept plan), %d kept\n",
           1e3 * best_new / NSIZES, 1e3 * best_kept / NSIZES, 1e3 * (best_new - best_kept) / NSIZES,
           (unsigned long long)st.kernels_compiled, (long long)prepared, (long long)reused, kept);
    rlx_program_free(p);
    rlx_scope_end();
    return 0;
}
