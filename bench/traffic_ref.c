/*
 * traffic_ref.c — the traffic references of bench_jit.c: plain C loops
 * compiled with -O3 -march=native that read the same input bytes once and
 * write the same output bytes once with trivial arithmetic. A fused kernel
 * cannot beat them by much: they measure the memory system, not math.
 */
#include <stddef.h>

void traffic_w1(const float *restrict x, const float *restrict a, const float *restrict b, float *restrict out,
                size_t n);
void traffic_w2(const float *restrict x, float *restrict out, size_t n);

void traffic_w1(const float *restrict x, const float *restrict a, const float *restrict b, float *restrict out,
                size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = x[i] + a[i] + b[i];
}

void traffic_w2(const float *restrict x, float *restrict out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = x[i] + 1;
}
