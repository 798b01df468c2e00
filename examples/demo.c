/*
 * demo.c — `make demo`: builds a few lazy expressions (an activation chain,
 * a matmul, a softmax, a layer norm, a reduction), realizes them and prints
 * the results with rlx_to_string, with the time each realization took.
 * Everything is built inside one scope, so one rlx_scope_end frees it all.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
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

static int show(const char *title, rlx_tensor *t)
{
    double t0 = now();
    rlx_status st = rlx_realize(t);
    double ms = (now() - t0) * 1e3;
    if (st != RLX_OK) {
        fprintf(stderr, "%s: %s\n", title, rlx_last_error());
        return 1;
    }
    char *s = rlx_to_string(t);
    printf("%s   (realized in %.3f ms)\n%s\n\n", title, ms, s);
    free(s);
    return 0;
}

int main(void)
{
    printf("librlx %s on %s, %d threads\n\n", rlx_version(), rlx_host_info(), rlx_get_num_threads());
    rlx_scope_begin();

    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
    const float a_data[6] = {1, 2, 3, 4, 5, 6};
    const float b_data[6] = {0.5f, -1, 2, 0, -0.5f, 1};
    rlx_tensor *a = rlx_from_data(RLX_F32, 2, s23, a_data);
    rlx_tensor *b = rlx_from_data(RLX_F32, 2, s32, b_data);

    /* Nothing has run yet: these are recorded graphs. */
    rlx_tensor *x = rlx_sub_s(rlx_mul_s(a, 0.5), 1.0);
    rlx_tensor *act = rlx_gelu_tanh(x);
    rlx_tensor *mm = rlx_matmul(a, b);
    rlx_tensor *sm = rlx_softmax(a, -1);
    rlx_tensor *ln = rlx_layer_norm(a, NULL, NULL, 1e-5);
    int axis = 0;
    rlx_tensor *colsum = rlx_sum(rlx_sqrt(a), &axis, 1, false);
    int64_t n = 2000;
    rlx_tensor *big = rlx_sin(rlx_mul_s(rlx_arange(RLX_F32, 0, (double)n, 1), 0.01));

    if (rlx_last_status() != RLX_OK) { /* checked once for the whole build */
        fprintf(stderr, "building failed: %s\n", rlx_last_error());
        return 1;
    }
    int bad = 0;
    bad |= show("a", a);
    bad |= show("b", b);
    bad |= show("gelu_tanh(a * 0.5 - 1)", act);
    bad |= show("a @ b", mm);
    bad |= show("softmax(a, axis=-1)", sm);
    bad |= show("layer_norm(a)", ln);
    bad |= show("sum(sqrt(a), axis=0)", colsum);
    bad |= show("sin(arange(2000) * 0.01)", big);

    /* Errors are values, never crashes: a shape mismatch gives NULL. */
    rlx_tensor *wrong = rlx_matmul(a, a);
    printf("a @ a -> %s: \"%s\"\n\n", wrong ? "tensor" : "NULL", rlx_last_error());
    rlx_clear_error();

    rlx_stats_t st;
    rlx_stats(&st);
    printf("primitives run: %llu, peak intermediate bytes: %llu\n", (unsigned long long)st.kernels_run,
           (unsigned long long)st.peak_bytes);
    rlx_scope_end();
    return bad;
}
