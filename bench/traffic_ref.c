/*
 * traffic_ref.c — the traffic references of rlx_bench.c: plain C loops
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

/* W12: u8 [n, ch, hw] to f32 normalized per channel, in the form a
 * hand-written loop would take (one multiply-add per element, the scale
 * and shift precomputed per channel): one byte read, four written. */
void traffic_w12(const unsigned char *restrict x, const float *restrict scale, const float *restrict shift,
                 float *restrict out, size_t n, size_t ch, size_t hw);

void traffic_w12(const unsigned char *restrict x, const float *restrict scale, const float *restrict shift,
                 float *restrict out, size_t n, size_t ch, size_t hw)
{
    for (size_t i = 0; i < n * ch; i++) {
        float a = scale[i % ch], b = shift[i % ch];
        for (size_t j = 0; j < hw; j++)
            out[i * hw + j] = (float)x[i * hw + j] * a + b;
    }
}

/* Machine-limit probes of rlx-bench (bench/rlx_bench.c). */
void probe_triad(float *restrict a, const float *restrict b, const float *restrict c, float s, size_t n);
double probe_fma(long iters);

/* STREAM's triad: 12 bytes of traffic per element (two reads, one write). */
void probe_triad(float *restrict a, const float *restrict b, const float *restrict c, float s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] + s * c[i];
}

/* Sixteen independent 16-lane FMA chains, long enough to cover the FMA
 * latency on any x86 core with two FMA pipes: 2 * 16 * 16 flops per
 * iteration. The result is returned so the chains are not dead code. */
double probe_fma(long iters)
{
    v16f acc[16], m, add;
    for (int k = 0; k < 16; k++)
        for (int l = 0; l < 16; l++)
            acc[k][l] = (float)(k + l) * 1e-3f;
    for (int l = 0; l < 16; l++)
        m[l] = 0.999999f, add[l] = 1e-7f;
    /* a float recurrence: without -ffast-math the compiler may not fold it */
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 16; k++)
            acc[k] = acc[k] * m + add;
    double s = 0;
    for (int k = 0; k < 16; k++)
        for (int l = 0; l < 16; l++)
            s += acc[k][l];
    return s;
}
