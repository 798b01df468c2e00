/*
 * traffic_ref.c — the traffic references of bench_jit.c: plain C loops
 * compiled with -O3 -march=native that read the same input bytes once and
 * write the same output bytes once with trivial arithmetic. A fused kernel
 * cannot beat them by much: they measure the memory system, not math.
 * (W4b, softmax, uses traffic_w2: read the matrix once, write it once.)
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

void traffic_w3(const float *restrict x, const float *restrict bias, float *restrict out, size_t rows, size_t cols);
void traffic_w4a(const float *restrict x, float *restrict out, size_t rows, size_t cols);
void traffic_w4c(const float *restrict x, const float *restrict g, const float *restrict b, float *restrict out,
                 size_t rows, size_t cols);

void traffic_w3(const float *restrict x, const float *restrict bias, float *restrict out, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            out[r * cols + c] = x[r * cols + c] + bias[c];
}

/* Row sums with four independent 16-lane accumulators (cols a multiple of
 * 64): spelled as vectors, since a float sum does not vectorize by itself. */
typedef float v16f __attribute__((vector_size(64), aligned(4)));

void traffic_w4a(const float *restrict x, float *restrict out, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++) {
        const float *row = x + r * cols;
        v16f acc[4] = {{0}, {0}, {0}, {0}};
        for (size_t c = 0; c < cols; c += 64)
            for (int k = 0; k < 4; k++)
                acc[k] += *(const v16f *)(row + c + 16 * (size_t)k);
        v16f t = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        float s = 0;
        for (int k = 0; k < 16; k++)
            s += t[k];
        out[r] = s;
    }
}

void traffic_w4c(const float *restrict x, const float *restrict g, const float *restrict b, float *restrict out,
                 size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            out[r * cols + c] = x[r * cols + c] * g[c] + b[c];
}
