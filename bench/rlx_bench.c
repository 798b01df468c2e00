/*
 * rlx_bench.c — rlx-bench: librlx's named workloads beside this machine's
 * limits, knob sweeps and the tuner.
 *
 *   rlx-bench [--json] [--filter W1,W2,...] [--threads N] [--repeat R]
 *             [--quick] [--backend jit|ref] [--list]
 *             [--sweep KNOB=v1,v2,...]
 *             [--tune [--budget SECONDS] [--tuning-file PATH]]
 *
 * Workloads (f32, inputs uniform in (-2, 2) unless said):
 *   W1  gelu_tanh(x*a + b), 16M                  peer: C traffic loop x+a+b
 *   W2  tanh(square(exp((relu(x*1.5+0.5)-0.25)*x)+x)-1), 16M   peer: x+1
 *   W3  relu(X + bias), [4096, 4096]             peer: X + bias
 *   W1bf16, W1f16, W3bf16, W3f16: W1 and W3 on bf16 (f16) inputs, values
 *       computed in f32 and rounded once on store, half the traffic
 *   narrow: W1 and W3 in f32, bf16 and f16 interleaved, round after round
 *       in one process, the best time of each; the f32/bf16 and f32/f16
 *       time ratios (half the bytes: 2x at best)
 *   W4a row sums, [4096, 4096]                   peer: vector row sums
 *   W4b softmax over the last axis, [4096, 4096] peer: x+1
 *   W4c layer_norm, [8192, 1024], gamma, beta    peer: x*gamma+beta
 *   W5a matmul 2048^3                            peer: cblas_sgemm
 *   W5b gelu(x @ W^T + b), x [4096,1024], W [4096,1024]   peer: the bare sgemm
 *   W9  solve, A [1024,1024], b [1024,1]         peer: LAPACKE_sgesv (copies A, b)
 *   conv2d    x [32,64,56,56], w [64,64,3,3], padding 1
 *   attention q, k, v [8, 512, 16*64], causal
 *   fft       2^20 complex points; fft_prime: 1048573 (a prime)
 *   W6  training step of a 784-512-512-10 ReLU MLP, batch 256 (forward,
 *       rlx_grad, SGD), built lazily each step   peer: its 8 GEMMs in sgemm
 *   W12 u8 image batch [128,3,224,224] normalized per channel to f32,
 *       (x/255 - mean[c]) / std[c], one LOOP kernel   peer: x*a[c]+b[c]
 *   bf16gemm: rlx_matmul of bf16 512^3 and 2048^3 (oneDNN, and with
 *       bf16_gemm=1 widened to sgemm) against cblas_sgemm on f32 of the
 *       same size, interleaved rounds, the best of each; sgemm/bf16 ratio
 *   f16gemm: rlx_matmul of f16 512^3 and 2048^3 (F16C panels into sgemm)
 *       against casts around an f32 matmul and cblas_sgemm, interleaved
 *   q8linear: rlx_linear_q8 with i8 weights [4096, 4096] (per-channel
 *       scales) on x [1|8|256, 4096] against rlx_linear and cblas_sgemm
 *       on the same weights dequantized to f32, interleaved rounds, the
 *       best of each; the sgemm/q8 and linear/q8 time ratios
 *   halfattn: attention forward, and forward + backward, on bf16 read
 *       as it is, bf16 widened to f32 (half_kernels=1) and f32; B8 H16
 *       S512 D64 causal and the W10a/W10b shapes; interleaved rounds, the
 *       best wall and CPU time of each
 *   halfconv: conv2d 3x3 of [32, 64, 56, 56] (no bias), forward and
 *       forward + gradients, bf16 through oneDNN, bf16 widened, f32;
 *       interleaved rounds, the best wall and CPU time of each
 *   W7  a + b of 4 elements built, realized and read; and through a
 *       compiled program (ns per iteration)
 *   W4d, W4e column sums (bias gradients), [256, 512] and [8192, 512]
 *   accum: W4a, W4d, W4e, W4b, W4c with f32 sums in f64 (reduce_acc_f64=1)
 *       against blocked f32 (=0), interleaved rounds, the best wall and
 *       process CPU time of each, and =1 again as a control
 *   generic: W1-W4 with generic_kernels=2 against =0, interleaved rounds,
 *       the best of each, and =0 again as a control (the noise floor);
 *       then layer_norm+gelu over [n, 256] realized at
 *       64 distinct n under generic_kernels 0, 1 and 2 from an empty
 *       kernel cache: kernels compiled and the stream's time; and the
 *       same through a program over [-1, 256] (compiles after its first
 *       run, a new size's run time against a repeated size's)
 * Probes: "stream" (triad, 12 bytes per element, arrays far above the LLC)
 * and "fma" (16 independent 16-lane FMA chains), with --threads threads,
 * timed in thread CPU time (best of 5): the machine's limits, not what
 * other processes leave of them. Each workload's "fraction" is its roofline time,
 * max(bytes / stream, flops / fma), over its median time (bytes: inputs
 * read and outputs written once; flops: the arithmetic of matmul, conv,
 * attention, solve and FFT; 0 for the elementwise and row workloads).
 *
 * Timing: one cold run (compile), then --repeat runs (default 7; 2 with
 * --quick); while the median of all runs differs from that of the first
 * batch by more than 2%, another batch, up to 4 batches or 3 s. Each run
 * builds the graph again (kernel cache hit) and realizes it in a scope.
 * Peers run in the same process right after, on the workload's own input
 * payloads; the C traffic loops on one thread, the BLAS/LAPACK peers on
 * OpenBLAS's threads (env OPENBLAS_NUM_THREADS). --quick: tiny shapes, every workload's outputs compared with
 * the reference backend (exit 1 on a mismatch).
 * --sweep KNOB=v1,...: each selected workload under each value (any key
 * of rlx_set_option). --tune: coordinate descent per kernel class and
 * size bucket over the codegen knobs, within --budget seconds (default
 * 120), winners written to the tuning file (default: RLX_TUNING_FILE, else
 * the cache dir's tuning.txt; see src/passes/knobs.h).
 * Exit status: 0, 1 on a failed or mismatching workload, 2 on bad usage.
 */
#define _GNU_SOURCE /* clock_gettime, cblas.h's cpu_set_t */
#include <cblas.h>
#include <errno.h>
#include <lapacke.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "bench_util.h"
#include "rlx.h"
#include "codegen_llvm/cg.h"
#include "passes/knobs.h"
#include "runtime/exec/jit_exec.h"

void traffic_w1(const float *restrict x, const float *restrict a, const float *restrict b, float *restrict out,
                size_t n);
void traffic_w2(const float *restrict x, float *restrict out, size_t n);
void traffic_w3(const float *restrict x, const float *restrict bias, float *restrict out, size_t rows, size_t cols);
void traffic_w4a(const float *restrict x, float *restrict out, size_t rows, size_t cols);
void traffic_w12(const unsigned char *restrict x, const float *restrict scale, const float *restrict shift,
                 float *restrict out, size_t n, size_t ch, size_t hw);
void traffic_w4c(const float *restrict x, const float *restrict g, const float *restrict b, float *restrict out,
                 size_t rows, size_t cols);
void probe_triad(float *restrict a, const float *restrict b, const float *restrict c, float s, size_t n);
double probe_fma(long iters);

/* ------------------------------------------------------------ options */

static struct {
    bool json, quick, tune, list;
    const char *filter, *sweep, *tuning_file, *backend;
    int threads, repeat;
    double budget;
} opt = {.threads = 1, .repeat = 7, .budget = 120, .backend = "jit"};

static double stream_gbs, fma_gflops; /* the machine's limits, from the probes */
static int failures;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "rlx-bench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static float *uniform(size_t n, unsigned seed)
{
    float *v = xmalloc(n * sizeof *v);
    unsigned long long s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)(-2.0 + 4.0 * (double)(s >> 11) * 0x1p-53);
    }
    return v;
}

/* ------------------------------------------------------------ workloads */

enum { MAXIN = 10, MAXOUT = 8 };

typedef struct {
    int64_t d[6];             /* the workload's dims */
    double tol;               /* --quick's relative tolerance against the reference (0: 1e-3) */
    rlx_tensor *in[MAXIN];    /* realized inputs */
    int nin;
    float *out, *scratch;     /* peer buffers */
    lapack_int *ipiv;
    double bytes, flops;
} state;

typedef struct {
    const char *name, *cls, *desc;
    void (*setup)(state *s, bool quick);
    int (*build)(state *s, rlx_tensor **outs);
    void (*peer)(state *s);
    const char *peer_name;
} workload;

/* A realized f32 input of the given shape, uniform in (-2, 2) times scale. */
static rlx_tensor *input(state *s, int rank, const int64_t *shape, unsigned seed, float scale)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)shape[i];
    float *v = uniform(n, seed);
    for (size_t i = 0; scale != 1 && i < n; i++)
        v[i] *= scale;
    rlx_tensor *t = rlx_from_data(RLX_F32, rank, shape, v);
    free(v);
    if (!t || rlx_realize(t) != RLX_OK) {
        fprintf(stderr, "rlx-bench: input: %s\n", rlx_last_error());
        exit(1);
    }
    s->in[s->nin++] = t;
    return t;
}

static const float *host(state *s, int i) { return rlx_data(s->in[i]); }

static float *out_buffer(size_t n)
{
    float *p = xmalloc(n * sizeof *p);
    memset(p, 0, n * sizeof *p); /* touched before timing, as the library's pool is */
    return p;
}

/* W1, W2: n elements */
static void setup_w1(state *s, bool q)
{
    s->d[0] = q ? 4099 : 1 << 24;
    for (int i = 0; i < 3; i++)
        input(s, 1, s->d, 1 + (unsigned)i, 1);
    s->out = out_buffer((size_t)s->d[0]);
    s->bytes = 16.0 * (double)s->d[0];
}
static int build_w1(state *s, rlx_tensor **o)
{
    o[0] = rlx_gelu_tanh(rlx_add(rlx_mul(s->in[0], s->in[1]), s->in[2]));
    return 1;
}
static void peer_w1(state *s) { traffic_w1(host(s, 0), host(s, 1), host(s, 2), s->out, (size_t)s->d[0]); }

static void setup_w2(state *s, bool q)
{
    s->d[0] = q ? 4099 : 1 << 24;
    input(s, 1, s->d, 1, 1);
    s->out = out_buffer((size_t)s->d[0]);
    s->bytes = 8.0 * (double)s->d[0];
}
static int build_w2(state *s, rlx_tensor **o)
{
    rlx_tensor *x = s->in[0];
    rlx_tensor *t = rlx_relu(rlx_add_s(rlx_mul_s(x, 1.5), 0.5));
    t = rlx_exp(rlx_mul(rlx_sub_s(t, 0.25), x));
    o[0] = rlx_tanh(rlx_sub_s(rlx_add(rlx_mul(t, t), x), 1));
    return 1;
}
static void peer_w2(state *s) { traffic_w2(host(s, 0), s->out, (size_t)s->d[0]); }

/* W3, W4*: rows x cols */
static void setup_rows(state *s, bool q, int64_t rows, int64_t cols, int64_t qrows, int64_t qcols)
{
    s->d[0] = q ? qrows : rows;
    s->d[1] = q ? qcols : cols;
    input(s, 2, s->d, 1, 1);
    s->out = out_buffer((size_t)(s->d[0] * s->d[1]));
    s->bytes = 8.0 * (double)(s->d[0] * s->d[1]);
}
static void setup_w3(state *s, bool q)
{
    setup_rows(s, q, 4096, 4096, 5, 130);
    input(s, 1, &s->d[1], 4, 1);
    s->bytes += 4.0 * (double)s->d[1];
}
static int build_w3(state *s, rlx_tensor **o)
{
    o[0] = rlx_relu(rlx_add(s->in[0], s->in[1]));
    return 1;
}
static void peer_w3(state *s) { traffic_w3(host(s, 0), host(s, 1), s->out, (size_t)s->d[0], (size_t)s->d[1]); }

/* The inputs cast to dt (realized), the bytes scaled to its size; --quick
 * allows 4 of its spacings at 1 (the reference rounds each op to dt, the
 * JIT only the result). */
static void narrow_inputs(state *s, rlx_dtype dt)
{
    for (int i = 0; i < s->nin; i++) {
        rlx_tensor *t = rlx_cast(s->in[i], dt);
        if (!t || rlx_realize(t) != RLX_OK) {
            fprintf(stderr, "rlx-bench: input: %s\n", rlx_last_error());
            exit(1);
        }
        rlx_release(s->in[i]);
        s->in[i] = t;
    }
    s->bytes /= 2;
    s->tol = dt == RLX_BF16 ? 4 * 0x1p-7 : 4 * 0x1p-10;
}
static void setup_w1bf16(state *s, bool q) { setup_w1(s, q); narrow_inputs(s, RLX_BF16); }
static void setup_w1f16(state *s, bool q) { setup_w1(s, q); narrow_inputs(s, RLX_F16); }
static void setup_w3bf16(state *s, bool q) { setup_w3(s, q); narrow_inputs(s, RLX_BF16); }
static void setup_w3f16(state *s, bool q) { setup_w3(s, q); narrow_inputs(s, RLX_F16); }

static void setup_w4a(state *s, bool q)
{
    setup_rows(s, q, 4096, 4096, 5, 192); /* the peer needs cols a multiple of 64 */
    s->bytes = 4.0 * (double)(s->d[0] * s->d[1]) + 4.0 * (double)s->d[0];
}
static int build_w4a(state *s, rlx_tensor **o)
{
    o[0] = rlx_sum(s->in[0], (int[]){1}, 1, false);
    return 1;
}
static void peer_w4a(state *s) { traffic_w4a(host(s, 0), s->out, (size_t)s->d[0], (size_t)s->d[1]); }

/* column sums: a bias gradient over the batch */
static void setup_w4d(state *s, bool q)
{
    setup_rows(s, q, 256, 512, 5, 64);
    s->bytes = 4.0 * (double)(s->d[0] * s->d[1]) + 4.0 * (double)s->d[1];
}
static void setup_w4e(state *s, bool q)
{
    setup_rows(s, q, 8192, 512, 70, 64);
    s->bytes = 4.0 * (double)(s->d[0] * s->d[1]) + 4.0 * (double)s->d[1];
}
static int build_colsum(state *s, rlx_tensor **o)
{
    o[0] = rlx_sum(s->in[0], (int[]){0}, 1, false);
    return 1;
}

static void setup_w4b(state *s, bool q) { setup_rows(s, q, 4096, 4096, 5, 130); }
static int build_w4b(state *s, rlx_tensor **o)
{
    o[0] = rlx_softmax(s->in[0], -1);
    return 1;
}
static void peer_w4b(state *s) { traffic_w2(host(s, 0), s->out, (size_t)(s->d[0] * s->d[1])); }

static void setup_w4c(state *s, bool q)
{
    setup_rows(s, q, 8192, 1024, 6, 64);
    input(s, 1, &s->d[1], 5, 1);
    input(s, 1, &s->d[1], 6, 1);
    s->bytes += 8.0 * (double)s->d[1];
}
static int build_w4c(state *s, rlx_tensor **o)
{
    o[0] = rlx_layer_norm(s->in[0], s->in[1], s->in[2], 1e-5);
    return 1;
}
static void peer_w4c(state *s)
{
    traffic_w4c(host(s, 0), host(s, 1), host(s, 2), s->out, (size_t)s->d[0], (size_t)s->d[1]);
}

/* W12: a u8 image batch [n, 3, h, w] normalized per channel to f32,
 * (x / 255 - mean[c]) / std[c]: one byte read and four written per
 * element, in one LOOP kernel. 128 x 3 x 224 x 224 is 96 MB of traffic,
 * three times the 32 MB L3 of a Zen core complex. */
static const float w12_mean[3] = {0.485f, 0.456f, 0.406f}, w12_std[3] = {0.229f, 0.224f, 0.225f};
static void setup_w12(state *s, bool q)
{
    int64_t shape[4] = {q ? 2 : 128, 3, q ? 13 : 224, q ? 11 : 224}, cshape[4] = {1, 3, 1, 1};
    size_t n = (size_t)(shape[0] * shape[1] * shape[2] * shape[3]);
    s->d[0] = shape[0], s->d[1] = 3, s->d[2] = shape[2] * shape[3];
    unsigned char *x = xmalloc(n);
    unsigned long long r = 12;
    for (size_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (unsigned char)(r >> 56); /* every value 0..255 */
    }
    s->in[s->nin++] = rlx_from_data(RLX_U8, 4, shape, x);
    s->in[s->nin++] = rlx_from_data(RLX_F32, 4, cshape, w12_mean);
    s->in[s->nin++] = rlx_from_data(RLX_F32, 4, cshape, w12_std);
    free(x);
    for (int i = 0; i < 3; i++)
        if (!s->in[i] || rlx_realize(s->in[i]) != RLX_OK) {
            fprintf(stderr, "rlx-bench: W12 input: %s\n", rlx_last_error());
            exit(1);
        }
    s->scratch = out_buffer(6);
    for (int c = 0; c < 3; c++)
        s->scratch[c] = 1 / (255 * w12_std[c]), s->scratch[3 + c] = -w12_mean[c] / w12_std[c];
    s->out = out_buffer(n);
    s->bytes = 5.0 * (double)n;
}
static int build_w12(state *s, rlx_tensor **o)
{
    rlx_tensor *x = rlx_div_s(rlx_cast(s->in[0], RLX_F32), 255);
    o[0] = rlx_div(rlx_sub(x, s->in[1]), s->in[2]);
    return 1;
}
static void peer_w12(state *s)
{
    traffic_w12(rlx_data(s->in[0]), s->scratch, s->scratch + 3, s->out, (size_t)s->d[0], (size_t)s->d[1],
                (size_t)s->d[2]);
}
/* One kernel, and each value within 4 f32 epsilons (of 1 or of the value)
 * of the expression as a C loop computes it in f32. */
static bool verify_w12(state *s)
{
    size_t n = (size_t)(s->d[0] * s->d[1] * s->d[2]);
    const unsigned char *x = rlx_data(s->in[0]);
    float *got = xmalloc(n * sizeof *got);
    rlx_tensor *o[1];
    rlx_scope_begin();
    rlx_stats_reset();
    build_w12(s, o);
    bool ok = rlx_realize(o[0]) == RLX_OK && rlx_read_f32(o[0], got, n) == RLX_OK;
    rlx_stats_t st;
    rlx_stats(&st);
    rlx_scope_end();
    if (ok && !strcmp(opt.backend, "jit") && (st.kernels_run != 1 || st.cache_hits + st.cache_misses != 1)) {
        fprintf(stderr, "rlx-bench: W12 ran %llu kernels (%llu compiled or cached), want one LOOP kernel\n",
                (unsigned long long)st.kernels_run, (unsigned long long)(st.cache_hits + st.cache_misses));
        ok = false;
    }
    for (size_t i = 0; ok && i < n; i++) {
        size_t c = i / (size_t)s->d[2] % 3;
        float want = ((float)x[i] / 255.0f - w12_mean[c]) / w12_std[c];
        double tol = 4 * 0x1p-23 * (fabs(want) > 1 ? fabs(want) : 1);
        if (!(fabs((double)got[i] - want) <= tol)) {
            fprintf(stderr, "rlx-bench: W12 [%zu]: %.9g, the C loop %.9g\n", i, got[i], want);
            ok = false;
        }
    }
    free(got);
    if (!opt.json)
        printf("%-10s check against a C loop (one kernel): %s\n", "W12", ok ? "ok" : "MISMATCH");
    else
        printf("{\"type\":\"check_c\",\"workload\":\"W12\",\"ok\":%s}\n", ok ? "true" : "false");
    return ok;
}

/* W5a: [m,k] @ [k,n] */
static void setup_w5a(state *s, bool q)
{
    int64_t m = q ? 33 : 2048, k = q ? 17 : 2048, n = q ? 29 : 2048;
    s->d[0] = m, s->d[1] = k, s->d[2] = n;
    input(s, 2, (int64_t[]){m, k}, 1, 1);
    input(s, 2, (int64_t[]){k, n}, 2, 1);
    s->out = out_buffer((size_t)(m * n));
    s->flops = 2.0 * (double)m * (double)n * (double)k;
    s->bytes = 4.0 * (double)(m * k + k * n + m * n);
}
static int build_w5a(state *s, rlx_tensor **o)
{
    o[0] = rlx_matmul(s->in[0], s->in[1]);
    return 1;
}
static void peer_w5a(state *s)
{
    int m = (int)s->d[0], k = (int)s->d[1], n = (int)s->d[2];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, host(s, 0), k, host(s, 1), n, 0, s->out, n);
}

/* W5b: gelu(x @ W^T + b), x [m,k], W [n,k] */
static void setup_w5b(state *s, bool q)
{
    int64_t m = q ? 9 : 4096, k = q ? 20 : 1024, n = q ? 11 : 4096;
    s->d[0] = m, s->d[1] = k, s->d[2] = n;
    input(s, 2, (int64_t[]){m, k}, 1, 0.5f);
    input(s, 2, (int64_t[]){n, k}, 2, 0.5f);
    input(s, 1, &s->d[2], 3, 1);
    s->out = out_buffer((size_t)(m * n));
    s->flops = 2.0 * (double)m * (double)n * (double)k;
    s->bytes = 4.0 * (double)(m * k + k * n + m * n + n);
}
static int build_w5b(state *s, rlx_tensor **o)
{
    o[0] = rlx_linear_act(s->in[0], s->in[1], s->in[2], RLX_ACT_GELU);
    return 1;
}
static void peer_w5b(state *s)
{
    int m = (int)s->d[0], k = (int)s->d[1], n = (int)s->d[2];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, host(s, 0), k, host(s, 1), k, 0, s->out, n);
}

/* W9: solve A x = b; A diagonally dominant so the f32 results compare */
static void setup_w9(state *s, bool q)
{
    int64_t n = q ? 13 : 1024;
    s->d[0] = n;
    float *a = uniform((size_t)(n * n), 1);
    for (int64_t i = 0; i < n; i++)
        a[i * n + i] += 2.0f * (float)n;
    rlx_tensor *t = rlx_from_data(RLX_F32, 2, (int64_t[]){n, n}, a);
    free(a);
    if (!t || rlx_realize(t) != RLX_OK) {
        fprintf(stderr, "rlx-bench: W9 input: %s\n", rlx_last_error());
        exit(1);
    }
    s->in[s->nin++] = t;
    input(s, 2, (int64_t[]){n, 1}, 2, 1);
    s->out = out_buffer((size_t)(n * n + n));
    s->ipiv = xmalloc((size_t)n * sizeof *s->ipiv);
    s->flops = 2.0 / 3.0 * (double)n * (double)n * (double)n + 2.0 * (double)n * (double)n;
    s->bytes = 4.0 * (double)(n * n + 2 * n);
}
static int build_w9(state *s, rlx_tensor **o)
{
    o[0] = rlx_solve(s->in[0], s->in[1]);
    return 1;
}
static void peer_w9(state *s)
{
    int64_t n = s->d[0];
    memcpy(s->out, host(s, 0), (size_t)(n * n) * sizeof(float));
    memcpy(s->out + n * n, host(s, 1), (size_t)n * sizeof(float));
    LAPACKE_sgesv(LAPACK_ROW_MAJOR, (lapack_int)n, 1, s->out, (lapack_int)n, s->ipiv, s->out + n * n, 1);
}

/* conv2d: x [N,C,H,W], w [O,C,3,3], padding 1 */
static void setup_conv(state *s, bool q)
{
    int64_t n = q ? 2 : 32, c = q ? 3 : 64, hw = q ? 7 : 56, o = q ? 4 : 64;
    s->d[0] = n, s->d[1] = c, s->d[2] = hw, s->d[3] = o;
    input(s, 4, (int64_t[]){n, c, hw, hw}, 1, 1);
    input(s, 4, (int64_t[]){o, c, 3, 3}, 2, 0.2f);
    input(s, 1, &s->d[3], 3, 1);
    s->flops = 2.0 * (double)(n * o * hw * hw) * (double)(c * 9);
    s->bytes = 4.0 * (double)(n * c * hw * hw + o * c * 9 + n * o * hw * hw);
}
static int build_conv(state *s, rlx_tensor **o)
{
    o[0] = rlx_conv2d(s->in[0], s->in[1], s->in[2], NULL, (const int[]){1, 1}, NULL, 1);
    return 1;
}

/* attention: q, k, v [B, S, H*D], causal */
static void setup_attn(state *s, bool q)
{
    int64_t b = q ? 2 : 8, sq = q ? 7 : 512, h = q ? 2 : 16, d = q ? 4 : 64;
    s->d[0] = b, s->d[1] = sq, s->d[2] = h, s->d[3] = d;
    int64_t sh[3] = {b, sq, h * d};
    for (int i = 0; i < 3; i++)
        input(s, 3, sh, 1 + (unsigned)i, 0.5f);
    /* QK^T and PV, half of each under the causal mask */
    s->flops = 2.0 * (double)(b * h) * (double)(sq * sq) * (double)d;
    s->bytes = 16.0 * (double)(b * sq * h * d);
}
static int build_attn(state *s, rlx_tensor **o)
{
    o[0] = rlx_attention(s->in[0], s->in[1], s->in[2], (int)s->d[2], (int)s->d[3], RLX_MASK_CAUSAL, 0);
    return 1;
}

/* FFT of N complex points ([2N]: real parts, then imaginary parts) */
static void setup_fft_n(state *s, int64_t n)
{
    s->d[0] = n;
    int64_t len = 2 * n;
    input(s, 1, &len, 1, 1);
    s->flops = 5.0 * (double)n * log2((double)n);
    s->bytes = 16.0 * (double)n;
}
static void setup_fft(state *s, bool q) { setup_fft_n(s, q ? 64 : 1 << 20); }
static void setup_fft_prime(state *s, bool q) { setup_fft_n(s, q ? 61 : 1048573); }
static int build_fft(state *s, rlx_tensor **o)
{
    o[0] = rlx_fft(s->in[0]);
    return 1;
}

/* W6: one SGD step of an MLP in -> h -> h -> out, ReLU, softmax
 * cross-entropy (integer labels), built lazily each step */
static void setup_w6(state *s, bool q)
{
    int64_t batch = q ? 4 : 256, in = q ? 12 : 784, h = q ? 8 : 512, out = q ? 3 : 10;
    s->d[0] = batch, s->d[1] = in, s->d[2] = h, s->d[3] = out;
    input(s, 2, (int64_t[]){batch, in}, 1, 0.5f);
    int32_t *lab = xmalloc((size_t)batch * sizeof *lab);
    for (int64_t i = 0; i < batch; i++)
        lab[i] = (int32_t)((i * 7 + 3) % out);
    s->in[s->nin++] = rlx_from_data(RLX_I32, 1, &batch, lab);
    free(lab);
    const int64_t shapes[6][2] = {{h, in}, {h, 0}, {h, h}, {h, 0}, {out, h}, {out, 0}};
    for (int i = 0; i < 6; i++)
        input(s, shapes[i][1] ? 2 : 1, shapes[i], 10 + (unsigned)i,
              shapes[i][1] ? (float)(1.2 / sqrt((double)shapes[i][1])) : 0.05f);
    /* forward: 3 GEMMs; backward: dW3, dh2, dW2, dh1, dW1 */
    s->flops = 2.0 * (double)batch * (2.0 * (double)(in * h + h * h + h * out) + (double)(h * out + h * h));
    s->bytes = 4.0 * (double)(batch * in) + 8.0 * (double)(h * in + h * h + out * h);
    size_t scratch = (size_t)(batch * (in + 4 * h + 2 * out));
    s->scratch = out_buffer(scratch);
    s->out = out_buffer((size_t)(h * in + h * h + out * h));
}
static int build_w6(state *s, rlx_tensor **o)
{
    rlx_tensor **p = &s->in[2];
    rlx_tensor *h1 = rlx_linear_act(s->in[0], p[0], p[1], RLX_ACT_RELU);
    rlx_tensor *h2 = rlx_linear_act(h1, p[2], p[3], RLX_ACT_RELU);
    rlx_tensor *logits = rlx_linear(h2, p[4], p[5]);
    o[0] = rlx_mean_all(rlx_softmax_cross_entropy_with_logits(logits, s->in[1]));
    rlx_tensor *g[6];
    if (rlx_grad(o[0], p, 6, g) != RLX_OK)
        return -1;
    for (int i = 0; i < 6; i++)
        o[1 + i] = rlx_sub(p[i], rlx_mul_s(g[i], 0.01));
    return 7;
}
/* the same GEMMs as direct sgemm calls: the GEMM-bound limit of a step */
static void peer_w6(state *s)
{
    int b = (int)s->d[0], in = (int)s->d[1], h = (int)s->d[2], out = (int)s->d[3];
    const float *x = host(s, 0), *w1 = host(s, 2), *w2 = host(s, 4), *w3 = host(s, 6);
    float *h1 = s->scratch, *h2 = h1 + b * h, *lg = h2 + b * h, *g2 = lg + b * out, *g1 = g2 + b * h;
    float *dw1 = s->out, *dw2 = dw1 + h * in, *dw3 = dw2 + h * h;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, h, in, 1, x, in, w1, in, 0, h1, h);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, h, h, 1, h1, h, w2, h, 0, h2, h);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, out, h, 1, h2, h, w3, h, 0, lg, out);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, h, b, 1, lg, out, h2, h, 0, dw3, h);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, h, out, 1, lg, out, w3, h, 0, g2, h);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h, h, b, 1, g2, h, h1, h, 0, dw2, h);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, h, h, 1, g2, h, w2, h, 0, g1, h);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h, in, b, 1, g1, h, x, in, 0, dw1, in);
}

static const workload workloads[] = {
    {"W1", "ew_math", "gelu_tanh(x*a+b), 16M", setup_w1, build_w1, peer_w1, "traffic x+a+b"},
    {"W2", "ew_math", "tanh(square(exp((relu(x*1.5+0.5)-0.25)*x)+x)-1), 16M", setup_w2, build_w2, peer_w2,
     "traffic x+1"},
    {"W3", "ew", "relu(X+bias), [4096,4096]", setup_w3, build_w3, peer_w3, "traffic X+bias"},
    {"W1bf16", "ew_math", "W1 on bf16", setup_w1bf16, build_w1, NULL, NULL},
    {"W1f16", "ew_math", "W1 on f16", setup_w1f16, build_w1, NULL, NULL},
    {"W3bf16", "ew", "W3 on bf16", setup_w3bf16, build_w3, NULL, NULL},
    {"W3f16", "ew", "W3 on f16", setup_w3f16, build_w3, NULL, NULL},
    {"W4a", "reduce", "row sums, [4096,4096]", setup_w4a, build_w4a, peer_w4a, "traffic row sums"},
    {"W4d", "reduce", "column sums, [256,512]", setup_w4d, build_colsum, NULL, NULL},
    {"W4e", "reduce", "column sums, [8192,512]", setup_w4e, build_colsum, NULL, NULL},
    {"W4b", "rows", "softmax last axis, [4096,4096]", setup_w4b, build_w4b, peer_w4b, "traffic x+1"},
    {"W4c", "rows", "layer_norm, [8192,1024], gamma, beta", setup_w4c, build_w4c, peer_w4c, "traffic x*g+b"},
    {"W5a", "matmul", "matmul 2048^3", setup_w5a, build_w5a, peer_w5a, "cblas_sgemm"},
    {"W5b", "matmul", "gelu(x@W^T+b), x [4096,1024], W [4096,1024]", setup_w5b, build_w5b, peer_w5b,
     "bare sgemm"},
    {"W9", "-", "solve 1024^2, 1 rhs", setup_w9, build_w9, peer_w9, "LAPACKE_sgesv"},
    {"conv2d", "-", "conv2d [32,64,56,56] * [64,64,3,3], pad 1", setup_conv, build_conv, NULL, NULL},
    {"attention", "-", "attention B8 H16 S512 D64 causal", setup_attn, build_attn, NULL, NULL},
    {"fft", "-", "fft 2^20 complex", setup_fft, build_fft, NULL, NULL},
    {"fft_prime", "-", "fft 1048573 (prime) complex", setup_fft_prime, build_fft, NULL, NULL},
    {"W6", "-", "MLP 784-512-512-10 train step, batch 256", setup_w6, build_w6, peer_w6, "8 sgemm"},
    {"W12", "ew", "(cast(u8 x, f32)/255-mean[c])/std[c], [128,3,224,224]", setup_w12, build_w12, peer_w12,
     "traffic x*a[c]+b[c]"},
};
enum { NWORK = sizeof workloads / sizeof workloads[0] };

static bool wanted(const char *name)
{
    if (!opt.filter)
        return true;
    size_t len = strlen(name);
    for (const char *p = opt.filter; (p = strstr(p, name)); p += len)
        if ((p == opt.filter || p[-1] == ',') && (p[len] == ',' || p[len] == 0))
            return true;
    return false;
}

static void teardown(state *s)
{
    for (int i = 0; i < s->nin; i++)
        rlx_release(s->in[i]);
    free(s->out);
    free(s->scratch);
    free(s->ipiv);
    memset(s, 0, sizeof *s);
}

/* -------------------------------------------------------------- timing */

typedef struct {
    double med, min, max, cold, cpu; /* cpu: median process CPU seconds */
    int runs;
    uint64_t kernels;
    bool ok;
} timing;

/* One build + realize in a scope; seconds, or -1 on failure. */
static double run_once(const workload *w, state *s, uint64_t *kernels)
{
    rlx_tensor *o[MAXOUT];
    rlx_scope_begin();
    rlx_stats_reset();
    double t0 = now();
    int n = w->build(s, o);
    rlx_status st = n > 0 ? rlx_realize_many(o, n) : RLX_E_ARG;
    double dt = now() - t0;
    rlx_stats_t stats;
    rlx_stats(&stats);
    *kernels = stats.kernels_run;
    rlx_scope_end();
    if (st != RLX_OK) {
        fprintf(stderr, "rlx-bench: %s failed: %s\n", w->name, rlx_last_error());
        return -1;
    }
    return dt;
}

static void peer_once(const workload *w, state *s, uint64_t *unused)
{
    (void)unused;
    w->peer(s);
}

/* Repeats until stable (see the header); fn is run_once or the peer. */
static timing measure(const workload *w, state *s, bool peer, int repeat)
{
    timing t = {0};
    int cap = 4 * repeat, n = 0;
    double *v = xmalloc((size_t)cap * sizeof *v), *c = xmalloc((size_t)cap * sizeof *c), start = now();
    for (int r = -1; n < cap; r++) {
        double dt, c0 = cpu_now();
        uint64_t k = 0;
        if (peer) {
            double t0 = now();
            peer_once(w, s, &k);
            dt = now() - t0;
        } else {
            dt = run_once(w, s, &k);
            t.kernels = k;
        }
        if (dt < 0) {
            free(v);
            free(c);
            return t;
        }
        if (r < 0) {
            t.cold = dt;
            continue;
        }
        c[n] = cpu_now() - c0;
        v[n++] = dt;
        if (n % repeat == 0) {
            double all = median(v, n), first = median(v, repeat);
            if (n == repeat && repeat > 2)
                continue; /* compare at least two batches */
            if (fabs(all - first) <= 0.02 * all || now() - start > 3.0)
                break;
        }
    }
    t.med = median(v, n);
    t.cpu = median(c, n);
    free(c);
    t.min = t.max = v[0];
    for (int i = 1; i < n; i++) {
        t.min = v[i] < t.min ? v[i] : t.min;
        t.max = v[i] > t.max ? v[i] : t.max;
    }
    t.runs = n;
    t.ok = true;
    free(v);
    return t;
}

/* ----------------------------------------------------- machine probes */

typedef struct {
    float *a, *b, *c;
    size_t n;
    long iters;
    int reps;
    double cpu; /* the thread's CPU seconds */
} probe_arg;

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *triad_thread(void *p)
{
    probe_arg *a = p;
    double c0 = thread_cpu();
    for (int r = 0; r < a->reps; r++)
        probe_triad(a->a, a->b, a->c, 0.5f, a->n);
    a->cpu = thread_cpu() - c0;
    return NULL;
}

static void *fma_thread(void *p)
{
    probe_arg *a = p;
    double c0 = thread_cpu();
    volatile double sink = probe_fma(a->iters);
    (void)sink;
    a->cpu = thread_cpu() - c0;
    return NULL;
}

/* Seconds for `threads` threads each running fn on its own arg, best of
 * 5: each run's time is its slowest thread's CPU time, not wall time, so
 * that the limits are the machine's and not what other processes on a
 * shared machine leave of it (the workloads are timed in wall time). */
static double probe_run(void *(*fn)(void *), probe_arg *args, int threads)
{
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t tid[64];
        for (int i = 1; i < threads; i++)
            pthread_create(&tid[i], NULL, fn, &args[i]);
        fn(&args[0]);
        double dt = args[0].cpu;
        for (int i = 1; i < threads; i++) {
            pthread_join(tid[i], NULL);
            dt = args[i].cpu > dt ? args[i].cpu : dt;
        }
        best = dt < best ? dt : best;
    }
    return best;
}

static void probes(void)
{
    int th = opt.threads > 64 ? 64 : opt.threads;
    size_t n = opt.quick ? (size_t)1 << 16 : (size_t)1 << 24, per = n / (size_t)th;
    float *a = out_buffer(n), *b = uniform(n, 7), *c = uniform(n, 8);
    probe_arg args[64];
    for (int i = 0; i < th; i++)
        args[i] = (probe_arg){a + (size_t)i * per, b + (size_t)i * per, c + (size_t)i * per, per, 0, 2, 0};
    double dt = probe_run(triad_thread, args, th);
    stream_gbs = 12.0 * (double)(per * (size_t)th) * 2 / dt * 1e-9;
    free(a);
    free(b);
    free(c);
    long iters = opt.quick ? 20000 : 2000000;
    for (int i = 0; i < th; i++)
        args[i].iters = iters;
    dt = probe_run(fma_thread, args, th);
    fma_gflops = 2.0 * 16 * 16 * (double)iters * th / dt * 1e-9;
    if (opt.json) {
        printf("{\"type\":\"machine\",\"host\":\"%s\",\"version\":\"%s\",\"threads\":%d,\"stream_gbs\":%.2f,"
               "\"fma_gflops\":%.2f}\n",
               rlx_host_info(), rlx_version(), opt.threads, stream_gbs, fma_gflops);
    } else {
        printf("librlx %s, %s\nmachine limits at %d thread(s): stream triad %.1f GB/s, FMA peak %.1f GFLOP/s"
               " (f32)\n",
               rlx_version(), rlx_host_info(), opt.threads, stream_gbs, fma_gflops);
    }
    fflush(stdout);
}

/* --------------------------------------------------------------- report */

static void print_header(const char *extra)
{
    if (opt.json)
        return;
    printf("%-10s %-12s %9s %9s %9s %9s %8s %8s %6s %9s %7s %4s  %s\n", "workload", extra ? extra : "",
           "median ms", "min ms", "max ms", "cpu ms", "GB/s", "GFLOP/s", "limit", "peer ms", "peer/rl", "kern",
           "peer");
}

static void report(const workload *w, const state *s, const timing *t, const timing *p, const char *setting)
{
    double gbs = s->bytes / t->med * 1e-9, gfl = s->flops / t->med * 1e-9;
    double lim = 0;
    if (stream_gbs > 0 && fma_gflops > 0) {
        double tb = s->bytes / (stream_gbs * 1e9), tf = s->flops / (fma_gflops * 1e9);
        lim = (tb > tf ? tb : tf) / t->med;
    }
    if (opt.json) {
        printf("{\"type\":\"result\",\"workload\":\"%s\",\"desc\":\"%s\",\"threads\":%d,\"quick\":%s,"
               "\"setting\":\"%s\",\"runs\":%d,\"median_ms\":%.4f,\"min_ms\":%.4f,\"max_ms\":%.4f,\"cpu_ms\":%.4f,"
               "\"cold_ms\":%.3f,"
               "\"bytes\":%.0f,\"flops\":%.0f,\"gbs\":%.3f,\"gflops\":%.3f,\"fraction\":%.4f,\"kernels\":%llu",
               w->name, w->desc, opt.threads, opt.quick ? "true" : "false", setting ? setting : "", t->runs,
               1e3 * t->med, 1e3 * t->min, 1e3 * t->max, 1e3 * t->cpu, 1e3 * t->cold, s->bytes, s->flops, gbs, gfl, lim,
               (unsigned long long)t->kernels);
        if (p && p->ok)
            printf(",\"peer\":\"%s\",\"peer_ms\":%.4f,\"peer_ratio\":%.4f", w->peer_name, 1e3 * p->med,
                   p->med / t->med);
        printf("}\n");
    } else {
        char ps[16] = "-", pr[16] = "-";
        if (p && p->ok) {
            snprintf(ps, sizeof ps, "%.3f", 1e3 * p->med);
            snprintf(pr, sizeof pr, "%.2f", p->med / t->med);
        }
        printf("%-10s %-12s %9.3f %9.3f %9.3f %9.3f %8.1f %8.1f %6.2f %9s %7s %4llu  %s\n", w->name,
               setting ? setting : "", 1e3 * t->med, 1e3 * t->min, 1e3 * t->max, 1e3 * t->cpu, gbs, gfl, lim, ps, pr,
               (unsigned long long)t->kernels, p && p->ok ? w->peer_name : "");
    }
    fflush(stdout);
}

/* ---------------------------------------------------------- quick check */

/* Outputs of one realization on a backend, as f32 (n values each). */
static int outputs_on(const workload *w, state *s, const char *backend, float **vals, int64_t *count)
{
    rlx_set_option("backend", backend);
    rlx_tensor *o[MAXOUT];
    rlx_scope_begin();
    int n = w->build(s, o);
    int ok = n > 0 && rlx_realize_many(o, n) == RLX_OK;
    for (int i = 0; ok && i < n; i++) {
        count[i] = rlx_numel(o[i]);
        vals[i] = xmalloc((size_t)count[i] * sizeof(float));
        ok = rlx_read_f32(o[i], vals[i], (size_t)count[i]) == RLX_OK;
    }
    if (!ok) {
        fprintf(stderr, "rlx-bench: %s on %s: %s\n", w->name, backend, rlx_last_error());
        n = -1;
    }
    rlx_scope_end();
    rlx_set_option("backend", opt.backend);
    return n;
}

/* The workload's outputs against the reference backend's. */
static bool check(const workload *w, state *s)
{
    float *a[MAXOUT] = {0}, *b[MAXOUT] = {0};
    int64_t na[MAXOUT], nb[MAXOUT];
    int n = outputs_on(w, s, opt.backend, a, na), m = outputs_on(w, s, "ref", b, nb);
    bool ok = n > 0 && n == m;
    for (int i = 0; ok && i < n; i++) {
        ok = na[i] == nb[i];
        double scale = 0;
        for (int64_t j = 0; j < nb[i]; j++)
            scale = fabs(b[i][j]) > scale ? fabs(b[i][j]) : scale;
        double tol = s->tol > 0 ? s->tol : 1e-3;
        for (int64_t j = 0; ok && j < na[i]; j++) {
            double d = fabs((double)a[i][j] - b[i][j]);
            if (!(d <= tol * fabs(b[i][j]) + 0.1 * tol * (scale > 1 ? scale : 1))) {
                fprintf(stderr, "rlx-bench: %s output %d [%lld]: %.8g on %s, %.8g on ref\n", w->name, i,
                        (long long)j, a[i][j], opt.backend, b[i][j]);
                ok = false;
            }
        }
    }
    for (int i = 0; i < MAXOUT; i++) {
        free(a[i]);
        free(b[i]);
    }
    if (!opt.json)
        printf("%-10s check against the reference backend: %s\n", w->name, ok ? "ok" : "MISMATCH");
    else
        printf("{\"type\":\"check\",\"workload\":\"%s\",\"ok\":%s}\n", w->name, ok ? "true" : "false");
    return ok;
}

/* ------------------------------------------------------------------ W7 */

static void w7(void)
{
    int iters = opt.quick ? 200 : 20000, runs = opt.quick ? 2 : opt.repeat;
    float va[4] = {1, 2, 3, 4}, vb[4] = {5, 6, 7.5f, 8}, out[4];
    int64_t four = 4;
    rlx_tensor *a = rlx_from_data(RLX_F32, 1, &four, va), *b = rlx_from_data(RLX_F32, 1, &four, vb);
    rlx_tensor *ia = rlx_input("a", RLX_F32, 1, &four), *ib = rlx_input("b", RLX_F32, 1, &four);
    rlx_tensor *sum = rlx_add(ia, ib);
    rlx_program *p = rlx_compile(&sum, 1);
    rlx_binding bind[2] = {{"a", a}, {"b", b}};
    double *t = xmalloc((size_t)runs * sizeof *t), *tp = xmalloc((size_t)runs * sizeof *tp);
    bool ok = p != NULL;
    for (int r = -1; ok && r < runs; r++) {
        double t0 = now();
        for (int i = 0; ok && i < iters; i++) {
            rlx_tensor *c = rlx_add(a, b);
            ok = rlx_read_f32(c, out, 4) == RLX_OK && out[2] == 10.5f;
            rlx_release(c);
        }
        double t1 = now();
        for (int i = 0; ok && i < iters; i++) {
            rlx_tensor *c = NULL;
            ok = rlx_program_run(p, bind, 2, &c) == RLX_OK && rlx_read_f32(c, out, 4) == RLX_OK && out[3] == 12;
            rlx_release(c);
        }
        if (r >= 0)
            t[r] = (t1 - t0) / iters, tp[r] = (now() - t1) / iters;
    }
    if (!ok) {
        fprintf(stderr, "rlx-bench: W7 failed or gave a wrong sum: %s\n", rlx_last_error());
        failures++;
    } else if (opt.json) {
        printf("{\"type\":\"result\",\"workload\":\"W7\",\"desc\":\"a+b of 4 elements, build+realize+read\","
               "\"threads\":%d,\"quick\":%s,\"runs\":%d,\"ns_per_iter\":%.1f,\"program_ns_per_iter\":%.1f}\n",
               opt.threads, opt.quick ? "true" : "false", runs, 1e9 * median(t, runs), 1e9 * median(tp, runs));
    } else {
        printf("W7         a + b of 4 elements, build + realize + read: %.0f ns per iteration; through a compiled"
               " program: %.0f ns\n",
               1e9 * median(t, runs), 1e9 * median(tp, runs));
    }
    fflush(stdout);
    free(t);
    free(tp);
    rlx_program_free(p);
    rlx_release(sum);
    rlx_release(ia);
    rlx_release(ib);
    rlx_release(a);
    rlx_release(b);
}

/* The workload named name (NULL if none). */
static const workload *find_workload(const char *name)
{
    for (int i = 0; i < NWORK; i++)
        if (!strcmp(workloads[i].name, name))
            return &workloads[i];
    return NULL;
}

/* --------------------------------------------------------------- narrow */

/* W1 and W3 in f32, bf16 and f16: each round runs the three once, in
 * turn, so a change in the machine's load falls on all of them; the best
 * of the rounds is each one's time. */
static void narrow_ratios(void)
{
    static const char *fam[2] = {"W1", "W3"};
    for (int f = 0; f < 2; f++) {
        const workload *w[3] = {0};
        char nm[3][16];
        snprintf(nm[0], sizeof nm[0], "%s", fam[f]);
        snprintf(nm[1], sizeof nm[1], "%sbf16", fam[f]);
        snprintf(nm[2], sizeof nm[2], "%sf16", fam[f]);
        for (int v = 0; v < 3; v++)
            w[v] = find_workload(nm[v]);
        state s[3];
        memset(s, 0, sizeof s);
        double best[3] = {INFINITY, INFINITY, INFINITY};
        uint64_t kern[3] = {0};
        bool ok = true;
        for (int v = 0; v < 3; v++)
            w[v]->setup(&s[v], opt.quick);
        int rounds = opt.quick ? 2 : 3 * opt.repeat;
        for (int r = -1; r < rounds && ok; r++) /* round -1 compiles */
            for (int v = 0; v < 3 && ok; v++) {
                double dt = run_once(w[v], &s[v], &kern[v]);
                ok = dt >= 0;
                if (r >= 0 && dt < best[v])
                    best[v] = dt;
            }
        if (!ok)
            failures++;
        else if (opt.json)
            printf("{\"type\":\"narrow\",\"workload\":\"%s\",\"threads\":%d,\"quick\":%s,\"rounds\":%d,"
                   "\"f32_ms\":%.4f,\"bf16_ms\":%.4f,\"f16_ms\":%.4f,\"f32_over_bf16\":%.3f,\"f32_over_f16\":%.3f,"
                   "\"kernels\":[%llu,%llu,%llu]}\n",
                   fam[f], opt.threads, opt.quick ? "true" : "false", rounds, 1e3 * best[0], 1e3 * best[1], 1e3 * best[2],
                   best[0] / best[1], best[0] / best[2], (unsigned long long)kern[0], (unsigned long long)kern[1],
                   (unsigned long long)kern[2]);
        else
            printf("narrow     %s best of %d interleaved rounds: f32 %.3f ms, bf16 %.3f ms, f16 %.3f ms; "
                   "f32/bf16 %.2fx, f32/f16 %.2fx (kernels %llu, %llu, %llu)\n",
                   fam[f], rounds, 1e3 * best[0], 1e3 * best[1], 1e3 * best[2], best[0] / best[1], best[0] / best[2],
                   (unsigned long long)kern[0], (unsigned long long)kern[1], (unsigned long long)kern[2]);
        fflush(stdout);
        for (int v = 0; v < 3; v++)
            teardown(&s[v]);
    }
}

/* -------------------------------------------------------------- generic */

static int set_or_die(const char *key, const char *value);

/* w run under knob = val[0], val[1], val[2] in turn, round after round
 * (round -1 compiles): best[v] the best time under val[v] (cpu: the best
 * process CPU time, NULL: not kept), cold[v] the compile seconds of its
 * first run. The knob is then back to default. */
static bool knob_interleaved(const workload *w, state *s, const char *knob, const char *const *val, double *best,
                             double *cpu, double *cold, int *rounds)
{
    uint64_t kern[3] = {0};
    bool ok = true;
    *rounds = opt.quick ? 2 : 3 * opt.repeat;
    for (int v = 0; v < 3; v++) {
        best[v] = INFINITY, cold[v] = 0;
        if (cpu)
            cpu[v] = INFINITY;
    }
    for (int r = -1; r < *rounds && ok; r++)
        for (int v = 0; v < 3 && ok; v++) {
            set_or_die(knob, val[v]);
            double c0 = cpu_now();
            double dt = run_once(w, s, &kern[v]);
            double dc = cpu_now() - c0;
            ok = dt >= 0;
            if (r >= 0 && dt < best[v])
                best[v] = dt;
            if (r >= 0 && cpu && dc < cpu[v])
                cpu[v] = dc;
            if (r < 0) { /* run_once reset the counters: its compiles */
                rlx_stats_t st;
                rlx_stats(&st);
                cold[v] = st.compile_seconds;
            }
        }
    set_or_die(knob, "default");
    return ok;
}

/* The f32 accumulation policy (knob reduce_acc_f64, issue #14): the row
 * and column sums and the row kernels with every element added in f64
 * (=1) against blocked f32 sums (=0), interleaved, and =1 again as a
 * control: the ratio f64/blocked. */
static void accum_ratios(void)
{
    static const char *names[] = {"W4a", "W4d", "W4e", "W4b", "W4c"};
    enum { N = sizeof names / sizeof *names };
    bool any = false; /* --filter accum,W4c: W4c only */
    for (size_t f = 0; f < N; f++)
        any |= wanted(names[f]) && opt.filter;
    for (size_t f = 0; f < N; f++) {
        if (any && !wanted(names[f]))
            continue;
        const workload *w = find_workload(names[f]);
        state s;
        memset(&s, 0, sizeof s);
        w->setup(&s, opt.quick);
        double best[3], cpu[3], cold[3];
        int rounds;
        if (!knob_interleaved(w, &s, "reduce_acc_f64", (const char *[]){"1", "0", "1"}, best, cpu, cold, &rounds))
            failures++;
        else if (opt.json)
            printf("{\"type\":\"accum\",\"workload\":\"%s\",\"threads\":%d,\"quick\":%s,\"rounds\":%d,"
                   "\"f64_ms\":%.4f,\"blocked_f32_ms\":%.4f,\"f64_over_blocked\":%.3f,\"control_ratio\":%.3f,"
                   "\"f64_cpu_ms\":%.4f,\"blocked_f32_cpu_ms\":%.4f,\"cpu_ratio\":%.3f,\"cpu_control_ratio\":%.3f}\n",
                   w->name, opt.threads, opt.quick ? "true" : "false", rounds, 1e3 * best[0], 1e3 * best[1],
                   best[0] / best[1], best[2] / best[0], 1e3 * cpu[0], 1e3 * cpu[1], cpu[0] / cpu[1], cpu[2] / cpu[0]);
        else
            printf("accum      %-5s best of %d interleaved rounds: f64 %.3f ms, blocked f32 %.3f ms; "
                   "f64/blocked %.3fx (control: f64 again %.3fx); process CPU f64/blocked %.3fx (control %.3fx)\n",
                   w->name, rounds, 1e3 * best[0], 1e3 * best[1], best[0] / best[1], best[2] / best[0],
                   cpu[0] / cpu[1], cpu[2] / cpu[0]);
        fflush(stdout);
        teardown(&s);
    }
}

/* Size-generic kernels (knob generic_kernels, issue #15): W1-W4 with
 * generic_kernels=2 and =0 interleaved, round after round, the best of
 * each (the ratio generic/specialized); then a stream of plain
 * realizations of layer_norm + gelu over [n, 256] at 64 distinct n under
 * 0, 1 and 2, each from an empty kernel cache and no disk cache: kernels
 * compiled and the stream's time. */
static void generic_ratios(void)
{
    static const char *names[] = {"W1", "W2", "W3", "W4a", "W4b", "W4c"};
    for (size_t f = 0; f < sizeof names / sizeof *names; f++) {
        if (!wanted(names[f]) && !wanted("generic"))
            continue;
        const workload *w = find_workload(names[f]);
        state s;
        memset(&s, 0, sizeof s);
        w->setup(&s, opt.quick);
        /* v 2 runs the specialized kernels again: the ratio of two runs of
         * the same code, the noise floor of the comparison */
        double best[3], cold[3];
        int rounds;
        bool ok = knob_interleaved(w, &s, "generic_kernels", (const char *[]){"0", "2", "0"}, best, NULL, cold, &rounds);
        if (!ok)
            failures++;
        else if (opt.json)
            printf("{\"type\":\"generic\",\"workload\":\"%s\",\"threads\":%d,\"quick\":%s,\"rounds\":%d,"
                   "\"specialized_ms\":%.4f,\"generic_ms\":%.4f,\"generic_over_specialized\":%.3f,"
                   "\"specialized_compile_ms\":%.2f,\"generic_compile_ms\":%.2f,\"control_ratio\":%.3f}\n",
                   w->name, opt.threads, opt.quick ? "true" : "false", rounds, 1e3 * best[0], 1e3 * best[1],
                   best[1] / best[0], 1e3 * cold[0], 1e3 * cold[1], best[2] / best[0]);
        else
            printf("generic    %-5s best of %d interleaved rounds: specialized %.3f ms, generic %.3f ms; "
                   "generic/specialized %.3fx (compiles %.1f ms, %.1f ms; control: specialized again %.3fx)\n",
                   w->name, rounds, 1e3 * best[0], 1e3 * best[1], best[1] / best[0], 1e3 * cold[0], 1e3 * cold[1],
                   best[2] / best[0]);
        fflush(stdout);
        teardown(&s);
    }
    if (!wanted("generic"))
        return;
    char dir[512];
    if (rlx_get_option("cache_dir", dir, sizeof dir) != RLX_OK)
        dir[0] = 0;
    set_or_die("cache_dir", "");
    enum { M = 256, SIZES = 64 };
    int64_t m = M;
    float *g = uniform(M, 31);
    float *x = uniform((size_t)(SIZES + 40) * M, 32);
    rlx_tensor *tg = rlx_from_data(RLX_F32, 1, &m, g);
    for (int mode = 0; mode < 3 && tg; mode++) {
        char v[2] = {(char)('0' + mode), 0};
        set_or_die("generic_kernels", v);
        rt_plan_cache_clear();
        cg_cache_reset_for_tests(); /* an empty kernel cache: a new process */
        rlx_stats_reset();
        double t0 = now();
        bool ok = true;
        for (int i = 0; i < SIZES && ok; i++) {
            int64_t sh[2] = {40 + i, M};
            rlx_scope_begin();
            rlx_tensor *tx = rlx_from_data(RLX_F32, 2, sh, x);
            rlx_tensor *r = rlx_gelu(rlx_layer_norm(tx, tg, tg, 1e-5));
            ok = r && rlx_realize(r) == RLX_OK;
            rlx_scope_end();
        }
        double dt = now() - t0;
        rlx_stats_t st;
        rlx_stats(&st);
        if (!ok)
            failures++;
        else if (opt.json)
            printf("{\"type\":\"generic_stream\",\"generic_kernels\":%d,\"sizes\":%d,\"compiled\":%llu,"
                   "\"compile_ms\":%.2f,\"total_ms\":%.2f}\n",
                   mode, SIZES, (unsigned long long)st.kernels_compiled, 1e3 * st.compile_seconds, 1e3 * dt);
        else
            printf("generic    stream layer_norm+gelu [n,256], %d sizes, generic_kernels=%d: %llu kernels "
                   "compiled (%.1f ms), %.1f ms in all\n",
                   SIZES, mode, (unsigned long long)st.kernels_compiled, 1e3 * st.compile_seconds, 1e3 * dt);
        fflush(stdout);
    }
    set_or_die("generic_kernels", "default");
    /* the same through a program over a dynamic batch dim: compiles after
     * its first run, and a new size's time against a repeated size's */
    rt_plan_cache_clear();
    cg_cache_reset_for_tests();
    int64_t dyn[2] = {-1, M};
    rlx_tensor *in = rlx_input("x", RLX_F32, 2, dyn);
    rlx_tensor *po = rlx_gelu(rlx_layer_norm(in, tg, tg, 1e-5));
    rlx_program *prog = po ? rlx_compile(&po, 1) : NULL;
    uint64_t after_first = 0;
    double t_new = 0, t_rep = 0;
    bool pok = prog != NULL;
    for (int i = 0; i < SIZES && pok; i++) {
        for (int rep = 0; rep < 2 && pok; rep++) { /* a new size, then the same again */
            int64_t sh[2] = {40 + i, M};
            rlx_scope_begin();
            rlx_binding b = {"x", rlx_from_data(RLX_F32, 2, sh, x)};
            rlx_tensor *out = NULL;
            rlx_stats_t s0;
            rlx_stats(&s0);
            double t0 = now();
            pok = rlx_program_run(prog, &b, 1, &out) == RLX_OK;
            double dt = now() - t0;
            rlx_stats_t s1;
            rlx_stats(&s1);
            if (i > 0) {
                after_first += s1.kernels_compiled - s0.kernels_compiled;
                *(rep ? &t_rep : &t_new) += dt;
            }
            rlx_scope_end();
        }
    }
    if (!pok)
        failures++;
    else if (opt.json)
        printf("{\"type\":\"generic_program\",\"sizes\":%d,\"compiled_after_first\":%llu,\"new_size_ms\":%.4f,"
               "\"repeated_size_ms\":%.4f}\n",
               SIZES, (unsigned long long)after_first, 1e3 * t_new / (SIZES - 1), 1e3 * t_rep / (SIZES - 1));
    else
        printf("generic    program layer_norm+gelu [-1,256], %d sizes: %llu kernels compiled after the first run; "
               "a new size %.3f ms, a repeated size %.3f ms (mean)\n",
               SIZES, (unsigned long long)after_first, 1e3 * t_new / (SIZES - 1), 1e3 * t_rep / (SIZES - 1));
    rlx_program_free(prog);
    set_or_die("cache_dir", dir);
    rlx_release(tg);
    free(g);
    free(x);
}

/* ------------------------------------------------------------ q8linear */

/* rlx_linear_q8 (i8 weights, a quarter of the bytes) against rlx_linear
 * and cblas_sgemm of x [m, k] . W^T on f32 weights holding the same
 * dequantized values, for decode (m 1, 8) and prefill (m 256) shapes:
 * each round runs the three once, in turn; the best round is each one's
 * time. Every size checks the q8 product against sgemm's (f32 sums of k
 * terms in another order). */
static void q8_linear(void)
{
    const int64_t ms[3] = {1, 8, 256}, k = opt.quick ? 70 : 4096, n = opt.quick ? 67 : 4096;
    int64_t ws[2] = {n, k};
    float *w = uniform((size_t)(n * k), 31);
    rlx_tensor *wt = rlx_from_data(RLX_F32, 2, ws, w), *wq = NULL, *sc = NULL;
    bool ok = rlx_quantize_per_channel(wt, RLX_I8, 0, &wq, &sc, NULL) == RLX_OK && rlx_realize(wq) == RLX_OK &&
              rlx_realize(sc) == RLX_OK;
    /* the f32 peer's weights: the values the quantized ones stand for */
    rlx_tensor *wd = ok ? rlx_mul(rlx_cast(wq, RLX_F32), rlx_unsqueeze(sc, 1)) : NULL;
    ok = ok && wd && rlx_read_f32(wd, w, (size_t)(n * k)) == RLX_OK;
    rlx_tensor *wf = ok ? rlx_from_data(RLX_F32, 2, ws, w) : NULL;
    for (int z = 0; z < 3 && ok; z++) {
        int64_t m = opt.quick ? ms[z] % 37 : ms[z], xs[2] = {m, k};
        float *x = uniform((size_t)(m * k), 32 + (unsigned)z), *c = out_buffer((size_t)(m * n));
        float *got = xmalloc((size_t)(m * n) * sizeof *got);
        rlx_tensor *xt = rlx_from_data(RLX_F32, 2, xs, x);
        double best[3] = {INFINITY, INFINITY, INFINITY};
        int rounds = opt.quick ? 2 : 3 * opt.repeat;
        for (int r = -1; r < rounds && ok; r++) /* round -1 warms up */
            for (int v = 0; v < 3 && ok; v++) {
                double t0 = now(), dt;
                if (v < 2) {
                    rlx_scope_begin();
                    rlx_tensor *y = v ? rlx_linear(xt, wf, NULL) : rlx_linear_q8(xt, wq, sc, NULL, NULL);
                    ok = rlx_realize(y) == RLX_OK;
                    dt = now() - t0;
                    if (ok && v == 0 && r == -1)
                        ok = rlx_read_f32(y, got, (size_t)(m * n)) == RLX_OK;
                    rlx_scope_end();
                } else {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1, x, (int)k, w,
                                (int)k, 0, c, (int)n);
                    dt = now() - t0;
                }
                if (r >= 0 && dt < best[v])
                    best[v] = dt;
            }
        for (int64_t i = 0; ok && i < m * n; i++) {
            /* |x| < 2, |w| < 2: sums of k terms of at most 4 in two orders */
            double tol = 1e-5 * fabs(c[i]) + 4.0 * (double)k * 0x1p-22;
            if (!(fabs((double)got[i] - c[i]) <= tol)) {
                fprintf(stderr, "rlx-bench: q8linear m %lld [%lld]: %.8g, sgemm %.8g\n", (long long)m, (long long)i,
                        got[i], c[i]);
                ok = false;
            }
        }
        if (!ok) {
            /* reported below */
        } else if (opt.json) {
            printf("{\"type\":\"q8linear\",\"m\":%lld,\"k\":%lld,\"n\":%lld,\"threads\":%d,\"quick\":%s,"
                   "\"rounds\":%d,\"q8_ms\":%.4f,\"linear_f32_ms\":%.4f,\"sgemm_ms\":%.4f,\"sgemm_over_q8\":%.3f,"
                   "\"linear_over_q8\":%.3f}\n",
                   (long long)m, (long long)k, (long long)n, opt.threads, opt.quick ? "true" : "false", rounds,
                   1e3 * best[0], 1e3 * best[1], 1e3 * best[2], best[2] / best[0], best[1] / best[0]);
        } else {
            printf("q8linear   [%lld,%lld]x[%lld,%lld]^T best of %d interleaved rounds: q8 %.3f ms, rlx_linear f32 "
                   "%.3f ms, sgemm f32 %.3f ms; sgemm/q8 %.2fx, linear/q8 %.2fx\n",
                   (long long)m, (long long)k, (long long)n, (long long)k, rounds, 1e3 * best[0], 1e3 * best[1],
                   1e3 * best[2], best[2] / best[0], best[1] / best[0]);
        }
        fflush(stdout);
        rlx_release(xt);
        free(x);
        free(c);
        free(got);
    }
    if (!ok) {
        fprintf(stderr, "rlx-bench: q8linear failed: %s\n", rlx_last_error());
        failures++;
    }
    rlx_release(wf);
    rlx_release(wd);
    rlx_release(wq);
    rlx_release(sc);
    rlx_release(wt);
    free(w);
}

/* ------------------------------------------------- bf16gemm, f16gemm */

/* A 16-bit float rlx_matmul against its second path and cblas_sgemm on
 * f32 of the same size: each round runs the three once, in turn, so a
 * change in load falls on all; the best of the rounds is each one's time.
 * bf16: oneDNN where the CPU has AVX512-BF16, the second path the knob
 * bf16_gemm=1 (each block widened to f32 for sgemm). f16: F16C panels into
 * sgemm, the second path the widening it replaced (both cast to f32, an
 * f32 matmul, cast back). --quick also checks each product against sgemm
 * of the same 16-bit values widened (f32 accumulation in both). */
static int set_or_die(const char *key, const char *value);

static void half_gemm(rlx_dtype dt)
{
    bool bf = dt == RLX_BF16;
    const char *name = bf ? "bf16gemm" : "f16gemm", *tn = bf ? "bf16" : "f16";
    const int64_t sizes[2] = {opt.quick ? 40 : 512, opt.quick ? (bf ? 67 : 300) : 2048};
    const double unit = bf ? 0x1p-8 : 0x1p-11; /* the rounding of the result, relative */
    for (int z = 0; z < 2; z++) {
        int64_t n = sizes[z], sh[2] = {n, n};
        size_t nn = (size_t)(n * n);
        float *a = uniform(nn, bf ? 21 : 23), *b = uniform(nn, bf ? 22 : 24), *c = out_buffer(nn);
        rlx_tensor *fa = rlx_from_data(RLX_F32, 2, sh, a), *fb = rlx_from_data(RLX_F32, 2, sh, b);
        rlx_tensor *ta = rlx_cast(fa, dt), *tb = rlx_cast(fb, dt);
        bool ok = ta && tb && rlx_realize(ta) == RLX_OK && rlx_realize(tb) == RLX_OK;
        /* sgemm's operands: the 16-bit values widened (the same products) */
        ok = ok && rlx_read_f32(ta, a, nn) == RLX_OK && rlx_read_f32(tb, b, nn) == RLX_OK;
        double best[3] = {INFINITY, INFINITY, INFINITY};
        int rounds = opt.quick ? 2 : (n >= 2048 ? opt.repeat : 3 * opt.repeat);
        for (int r = -1; r < rounds && ok; r++) /* round -1 warms up */
            for (int v = 0; v < 3 && ok; v++) {
                double t0 = now(), dt_s;
                if (v < 2) {
                    if (bf)
                        set_or_die("bf16_gemm", v ? "1" : "default");
                    rlx_scope_begin();
                    rlx_tensor *p = bf || !v ? rlx_matmul(ta, tb)
                                             : rlx_cast(rlx_matmul(rlx_cast(ta, RLX_F32), rlx_cast(tb, RLX_F32)), dt);
                    ok = rlx_realize(p) == RLX_OK;
                    dt_s = now() - t0;
                    if (ok && opt.quick) {
                        float *got = xmalloc(nn * sizeof *got);
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1, a, (int)n,
                                    b, (int)n, 0, c, (int)n);
                        ok = rlx_read_f32(p, got, nn) == RLX_OK;
                        for (size_t i = 0; ok && i < nn; i++) {
                            /* the rounding of the result, plus the f32 sums' order: n terms of at most 4 */
                            double tol = unit * fabs(c[i]) + 4.0 * (double)n * 0x1p-22;
                            if (!(fabs((double)got[i] - c[i]) <= tol)) {
                                fprintf(stderr, "rlx-bench: %s %lld [%zu] (path %d): %.8g, sgemm %.8g\n", name,
                                        (long long)n, i, v, got[i], c[i]);
                                ok = false;
                            }
                        }
                        free(got);
                    }
                    rlx_scope_end();
                } else {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1, a, (int)n, b,
                                (int)n, 0, c, (int)n);
                    dt_s = now() - t0;
                }
                if (r >= 0 && dt_s < best[v])
                    best[v] = dt_s;
            }
        if (bf)
            set_or_die("bf16_gemm", "default");
        if (!ok) {
            fprintf(stderr, "rlx-bench: %s %lld failed: %s\n", name, (long long)n, rlx_last_error());
            failures++;
        } else if (opt.json) {
            printf("{\"type\":\"%s\",\"n\":%lld,\"threads\":%d,\"quick\":%s,\"rounds\":%d,"
                   "\"%s_ms\":%.4f,\"%s_widened_ms\":%.4f,\"sgemm_ms\":%.4f,\"sgemm_over_%s\":%.3f,"
                   "\"widened_over_%s\":%.3f}\n",
                   name, (long long)n, opt.threads, opt.quick ? "true" : "false", rounds, tn, 1e3 * best[0], tn,
                   1e3 * best[1], 1e3 * best[2], tn, best[2] / best[0], tn, best[1] / best[0]);
        } else {
            double fl = 2.0 * (double)n * (double)n * (double)n * 1e-9;
            printf("%-10s %lld^3 best of %d interleaved rounds: %s %.3f ms (%.1f GFLOP/s), %s %.3f ms (%.1f), "
                   "sgemm f32 %.3f ms (%.1f); sgemm/%s %.2fx, widened/%s %.2fx\n",
                   name, (long long)n, rounds, tn, 1e3 * best[0], fl / best[0],
                   bf ? "widened (bf16_gemm=1)" : "widened (casts around an f32 matmul)", 1e3 * best[1],
                   fl / best[1], 1e3 * best[2], fl / best[2], tn, best[2] / best[0], tn, best[1] / best[0]);
        }
        fflush(stdout);
        rlx_release(ta);
        rlx_release(tb);
        rlx_release(fa);
        rlx_release(fb);
        free(a);
        free(b);
        free(c);
    }
}

/* -------------------------------------------------- halfattn, halfconv */

/* Builds the op of a half-precision row over its inputs x (the last one,
 * the cotangent weight, unread). */
typedef rlx_tensor *(*half_op)(const void *arg, rlx_tensor *const *x);

/* One row: the op forward, and forward plus the gradients of
 * sum(op * x[nin-1]) in the other inputs, on bf16 operands through their
 * own kernels (knob half_kernels 0), bf16 widened to f32 copies around the
 * f32 kernels (half_kernels 1) and f32, all of the same bf16 values (nin
 * inputs of the given rank and shapes, uniform from seed): each round runs
 * the six once, in turn; the best round of each, wall and process CPU
 * time, printed as "type label pass ..." (json: the fragment id). */
static void half_compare(const char *type, const char *label, const char *json_id, int nin, int rank,
                         const int64_t *const *shp, unsigned seed, half_op op, const void *arg)
{
    static const char *const vname[3] = {"bf16", "bf16_widened", "f32"};
    rlx_tensor *in[2][4]; /* bf16, f32 */
    bool ok = true;
    for (int i = 0; i < nin; i++) {
        size_t nn = 1;
        for (int d = 0; d < rank; d++)
            nn *= (size_t)shp[i][d];
        float *a = uniform(nn, seed + (unsigned)i);
        in[0][i] = rlx_cast(rlx_from_data(RLX_F32, rank, shp[i], a), RLX_BF16);
        in[1][i] = rlx_cast(in[0][i], RLX_F32);
        ok = ok && in[1][i] && rlx_realize(in[0][i]) == RLX_OK && rlx_realize(in[1][i]) == RLX_OK;
        free(a);
    }
    double best[2][3], cbest[2][3];
    for (int m = 0; m < 2; m++)
        for (int v = 0; v < 3; v++)
            best[m][v] = cbest[m][v] = INFINITY;
    int rounds = opt.quick ? 2 : opt.repeat;
    for (int r = -1; r < rounds && ok; r++) /* round -1 warms up */
        for (int m = 0; m < 2 && ok; m++)
            for (int v = 0; v < 3 && ok; v++) {
                set_or_die("half_kernels", v == 1 ? "1" : "0");
                rlx_tensor *const *x = in[v == 2];
                double t0 = now(), c0 = cpu_now();
                rlx_scope_begin();
                rlx_tensor *y = op(arg, x);
                if (m == 0) {
                    ok = rlx_realize(y) == RLX_OK;
                } else {
                    rlx_tensor *g[3];
                    ok = rlx_grad(rlx_sum_all(rlx_mul(y, x[nin - 1])), x, nin - 1, g) == RLX_OK &&
                         rlx_realize_many(g, nin - 1) == RLX_OK;
                }
                rlx_scope_end();
                double wt = now() - t0, ct = cpu_now() - c0;
                if (r >= 0) {
                    best[m][v] = wt < best[m][v] ? wt : best[m][v];
                    cbest[m][v] = ct < cbest[m][v] ? ct : cbest[m][v];
                }
            }
    set_or_die("half_kernels", "default");
    if (!ok) {
        fprintf(stderr, "rlx-bench: %s %s failed: %s\n", type, label, rlx_last_error());
        failures++;
    }
    for (int m = 0; m < 2 && ok; m++) {
        const char *what = m ? "fwd+bwd" : "fwd";
        if (opt.json) {
            printf("{\"type\":\"%s\",%s,\"pass\":\"%s\",\"threads\":%d,\"rounds\":%d", type, json_id, what,
                   opt.threads, rounds);
            for (int v = 0; v < 3; v++)
                printf(",\"%s_ms\":%.4f,\"%s_cpu_ms\":%.4f", vname[v], 1e3 * best[m][v], vname[v], 1e3 * cbest[m][v]);
            printf(",\"f32_over_bf16\":%.3f,\"widened_over_bf16\":%.3f,\"cpu_f32_over_bf16\":%.3f,"
                   "\"cpu_widened_over_bf16\":%.3f}\n",
                   best[m][2] / best[m][0], best[m][1] / best[m][0], cbest[m][2] / cbest[m][0],
                   cbest[m][1] / cbest[m][0]);
        } else {
            printf("%-10s %-16s %-7s best of %d interleaved rounds (wall / CPU ms): bf16 %.2f / %.2f, "
                   "bf16 widened %.2f / %.2f, f32 %.2f / %.2f; f32/bf16 %.2fx (CPU %.2fx), widened/bf16 %.2fx "
                   "(CPU %.2fx)\n",
                   type, label, what, rounds, 1e3 * best[m][0], 1e3 * cbest[m][0], 1e3 * best[m][1],
                   1e3 * cbest[m][1], 1e3 * best[m][2], 1e3 * cbest[m][2], best[m][2] / best[m][0],
                   cbest[m][2] / cbest[m][0], best[m][1] / best[m][0], cbest[m][1] / cbest[m][0]);
        }
    }
    fflush(stdout);
    for (int i = 0; i < nin; i++) {
        rlx_release(in[0][i]);
        rlx_release(in[1][i]);
    }
}

typedef struct {
    const char *name;
    int64_t b, s;
    int h, d;
} attn_shape;

static rlx_tensor *attn_op(const void *arg, rlx_tensor *const *x)
{
    const attn_shape *a = arg;
    return rlx_attention(x[0], x[1], x[2], a->h, a->d, RLX_MASK_CAUSAL, 0);
}

/* Causal attention of q, k, v (w the cotangent weight): B8 H16 S512 D64
 * and the attention of the W10a and W10b GPT steps. */
static void half_attn(void)
{
    static const attn_shape shapes[] = {
        {"B8H16S512D64", 8, 512, 16, 64}, {"W10a", 16, 64, 4, 32}, {"W10b", 8, 128, 8, 32}};
    for (size_t z = 0; z < sizeof shapes / sizeof *shapes; z++) {
        int64_t sh[3] = {shapes[z].b, shapes[z].s, (int64_t)shapes[z].h * shapes[z].d};
        const int64_t *shp[4] = {sh, sh, sh, sh};
        char id[64];
        snprintf(id, sizeof id, "\"shape\":\"%s\"", shapes[z].name);
        half_compare("halfattn", shapes[z].name, id, 4, 3, shp, 31, attn_op, &shapes[z]);
    }
}

static rlx_tensor *conv_op(const void *arg, rlx_tensor *const *x)
{
    (void)arg;
    static const int pad[2] = {1, 1};
    return rlx_conv2d(x[0], x[1], NULL, NULL, pad, NULL, 1);
}

/* conv2d 3x3 (pad 1, no bias) of x [32, 64, 56, 56] and w [64, 64, 3, 3]
 * (r the cotangent weight). */
static void half_conv(void)
{
    int64_t xs[4] = {opt.quick ? 2 : 32, 64, 56, 56}, ws[4] = {64, 64, 3, 3};
    int64_t ys[4] = {xs[0], 64, 56, 56};
    const int64_t *shp[3] = {xs, ws, ys};
    char label[32], id[32];
    snprintf(label, sizeof label, "%lldx64x56x56", (long long)xs[0]);
    snprintf(id, sizeof id, "\"n\":%lld", (long long)xs[0]);
    half_compare("halfconv", label, id, 3, 4, shp, 41, conv_op, NULL);
}

/* ------------------------------------------------- run, sweep and tune */

static int repeat_count(void) { return opt.quick ? 2 : opt.repeat; }

static void run_workload(const workload *w)
{
    state s = {0};
    w->setup(&s, opt.quick);
    if (opt.quick && !check(w, &s))
        failures++;
    if (opt.quick && w->build == build_w12 && !verify_w12(&s)) /* also against a C loop */
        failures++;
    timing t = measure(w, &s, false, repeat_count());
    if (!t.ok) {
        failures++;
    } else {
        timing p = {0};
        if (w->peer)
            p = measure(w, &s, true, repeat_count());
        report(w, &s, &t, w->peer ? &p : NULL, NULL);
    }
    teardown(&s);
}

static int set_or_die(const char *key, const char *value)
{
    if (rlx_set_option(key, value) != RLX_OK) {
        fprintf(stderr, "rlx-bench: %s\n", rlx_last_error());
        return -1;
    }
    return 0;
}

/* "KNOB=v1,v2,...": each workload under each value */
static int sweep(void)
{
    char key[64];
    const char *eq = strchr(opt.sweep, '=');
    if (!eq || eq == opt.sweep || (size_t)(eq - opt.sweep) >= sizeof key || !eq[1]) {
        fprintf(stderr, "rlx-bench: --sweep wants KNOB=v1,v2,..., got '%s'\n", opt.sweep);
        return 2;
    }
    memcpy(key, opt.sweep, (size_t)(eq - opt.sweep));
    key[eq - opt.sweep] = 0;
    char *vals = strdup(eq + 1), *save = NULL;
    char *list[64];
    int nv = 0;
    for (char *v = strtok_r(vals, ",", &save); v && nv < 64; v = strtok_r(NULL, ",", &save)) {
        if (set_or_die(key, v) < 0) { /* every value is checked before measuring */
            free(vals);
            return 2;
        }
        list[nv++] = v;
    }
    probes();
    const char *reset = strcmp(key, "num_threads") == 0 ? "0" : strcmp(key, "backend") == 0 ? opt.backend : "default";
    set_or_die(key, reset);
    print_header(key);
    for (int i = 0; i < NWORK; i++) {
        if (!wanted(workloads[i].name))
            continue;
        state s = {0};
        workloads[i].setup(&s, opt.quick);
        for (int v = 0; v < nv; v++) {
            char setting[96];
            snprintf(setting, sizeof setting, "%s=%s", key, list[v]);
            set_or_die(key, list[v]);
            timing t = measure(&workloads[i], &s, false, repeat_count());
            if (t.ok)
                report(&workloads[i], &s, &t, NULL, setting);
            else
                failures++;
        }
        set_or_die(key, reset);
        teardown(&s);
    }
    free(vals);
    return failures ? 1 : 0;
}

/* The knobs the tuner searches for a class, and their candidates. */
typedef struct {
    knob_id id;
    long vals[8];
    int nv;
} knob_space;

static int space_for(const char *cls, knob_space *sp)
{
    int n = 0;
    if (!strcmp(cls, "ew") || !strcmp(cls, "ew_math")) {
        sp[n++] = (knob_space){KNOB_UNROLL, {0, 1, 2, 4, 8, 16}, 6};
        sp[n++] = (knob_space){KNOB_VECTOR_WIDTH, {0, 8, 16, 32}, 4};
    } else if (!strcmp(cls, "reduce") || !strcmp(cls, "rows")) {
        sp[n++] = (knob_space){KNOB_REDUCE_ACC, {0, 1, 2, 4, 8}, 5};
        sp[n++] = (knob_space){KNOB_VECTOR_WIDTH, {0, 8, 16, 32}, 4};
    } else if (!strcmp(cls, "matmul")) {
        sp[n++] = (knob_space){KNOB_GEMM_BLOCK, {0, 32, 64, 128, 256}, 5};
    }
    if (n && opt.threads > 1)
        sp[n++] = (knob_space){KNOB_GRAIN, {32768, 4096, 16384, 131072, 524288}, 5};
    return n;
}

static int class_index(const char *cls)
{
    for (int i = 0; i < KCLASS_COUNT; i++)
        if (!strcmp(cls, knob_class_names[i]))
            return i;
    return -1;
}

static int workload_bucket(const state *s, const workload *w)
{
    int64_t e = s->d[0];
    if (!strcmp(w->name, "W3") || !strcmp(w->name, "W4a") || !strcmp(w->name, "W4b") || !strcmp(w->name, "W4c"))
        e = s->d[0] * s->d[1];
    else if (!strcmp(w->name, "W12"))
        e = s->d[0] * s->d[1] * s->d[2];
    else if (!strcmp(w->cls, "matmul"))
        e = s->d[0] * s->d[2];
    return knob_bucket(e);
}

static void set_knob(knob_id id, long v)
{
    char b[32];
    snprintf(b, sizeof b, "%ld", v);
    set_or_die(knob_table[id].name, b);
}

/* Sum of log median times of a group's workloads under the set knobs. */
static double group_score(const int *members, int nm, state *st)
{
    double sc = 0;
    for (int i = 0; i < nm; i++) {
        timing t = measure(&workloads[members[i]], &st[i], false, opt.quick ? 1 : 3);
        if (!t.ok)
            return INFINITY;
        sc += log(opt.threads == 1 ? t.cpu : t.med); /* CPU time: steadier on a shared machine */
    }
    return sc;
}

static int mkdirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return 0;
}

static int tune(void)
{
    char path[4096];
    const char *env = getenv("RLX_TUNING_FILE");
    if (opt.tuning_file)
        snprintf(path, sizeof path, "%s", opt.tuning_file);
    else if (env && *env)
        snprintf(path, sizeof path, "%s", env);
    else if (rlx_get_option("cache_dir", path, sizeof path - 16) == RLX_OK && path[0])
        strcat(path, "/tuning.txt"); /* the default: the cache directory's */
    else {
        fprintf(stderr, "rlx-bench: no tuning file path (RLX_CACHE_DIR is empty and no --tuning-file)\n");
        return 2;
    }
    double start = now();
    knob_entry found[256];
    int nfound = 0;
    bool tuned_group[KCLASS_COUNT][KBUCKET_COUNT] = {{false}};
    bool done[NWORK] = {false};
    for (int i = 0; i < NWORK; i++) {
        const workload *w = &workloads[i];
        if (done[i] || !wanted(w->name) || class_index(w->cls) < 0)
            continue;
        /* the group: every selected workload of the same class and bucket */
        int members[NWORK], nm = 0;
        state st[NWORK];
        memset(st, 0, sizeof st);
        int cls = class_index(w->cls), bucket = -1;
        for (int j = i; j < NWORK; j++) {
            if (done[j] || !wanted(workloads[j].name) || class_index(workloads[j].cls) != cls)
                continue;
            workloads[j].setup(&st[nm], opt.quick);
            int b = workload_bucket(&st[nm], &workloads[j]);
            if (bucket >= 0 && b != bucket) {
                teardown(&st[nm]);
                continue;
            }
            bucket = b;
            members[nm++] = j;
            done[j] = true;
        }
        knob_space sp[4];
        int nk = space_for(w->cls, sp);
        long best_v[4];
        for (int k = 0; k < nk; k++)
            set_knob(sp[k].id, best_v[k] = sp[k].vals[0]);
        double best = group_score(members, nm, st), base = best;
        for (int pass = 0; pass < 2; pass++) {
            bool changed = false;
            for (int k = 0; k < nk && now() - start < opt.budget; k++) {
                for (int v = 0; v < sp[k].nv && now() - start < opt.budget; v++) {
                    if (sp[k].vals[v] == best_v[k])
                        continue;
                    set_knob(sp[k].id, sp[k].vals[v]);
                    double sc = group_score(members, nm, st);
                    if (sc < best - log(1.02)) { /* 2%: below that it is noise on a shared machine */
                        best = sc, best_v[k] = sp[k].vals[v], changed = true;
                    }
                }
                set_knob(sp[k].id, best_v[k]);
            }
            if (!changed)
                break;
        }
        tuned_group[cls][bucket] = true;
        char names[128] = "";
        for (int m = 0; m < nm; m++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", m ? "," : "", workloads[members[m]].name);
        if (!opt.json)
            printf("tune %-8s %-6s (%s): ", w->cls, knob_bucket_names[bucket], names);
        else
            printf("{\"type\":\"tune\",\"class\":\"%s\",\"bucket\":\"%s\",\"workloads\":\"%s\",\"speedup\":%.4f",
                   w->cls, knob_bucket_names[bucket], names, exp((base - best) / nm));
        for (int k = 0; k < nk; k++) {
            if (opt.json)
                printf(",\"%s\":%ld", knob_table[sp[k].id].name, best_v[k]);
            else
                printf("%s=%ld ", knob_table[sp[k].id].name, best_v[k]);
            /* grain is read per realization, not per kernel class: any/any */
            if (best_v[k] != knob_table[sp[k].id].def && nfound < 256)
                found[nfound++] = (knob_entry){sp[k].id == KNOB_GRAIN ? KCLASS_ANY : cls,
                                               sp[k].id == KNOB_GRAIN ? KBUCKET_ANY : bucket, sp[k].id, best_v[k]};
            set_or_die(knob_table[sp[k].id].name, "default");
        }
        if (opt.json)
            printf("}\n");
        else
            printf("(%.1f%% faster than the built-in rules, geometric mean)\n", 100 * (exp((base - best) / nm) - 1));
        fflush(stdout);
        for (int m = 0; m < nm; m++)
            teardown(&st[m]);
    }
    /* keep the old file's entries of groups not tuned now */
    knob_entry *old = NULL, *all;
    int nold = 0;
    char msg[512];
    FILE *f = fopen(path, "rb");
    if (f) {
        char *text = xmalloc(1 << 20);
        size_t len = fread(text, 1, 1 << 20, f);
        fclose(f);
        if (knobs_parse(text, len, &old, &nold, msg, sizeof msg) != RLX_OK)
            nold = 0;
        free(text);
    }
    all = xmalloc((size_t)(nold + nfound) * sizeof *all);
    int nall = 0;
    for (int i = 0; i < nold; i++)
        if (old[i].cls == KCLASS_ANY || old[i].bucket == KBUCKET_ANY || !tuned_group[old[i].cls][old[i].bucket])
            if (!(old[i].id == KNOB_GRAIN && opt.threads > 1))
                all[nall++] = old[i];
    memcpy(all + nall, found, (size_t)nfound * sizeof *found);
    nall += nfound;
    free(old);
    char comment[512];
    snprintf(comment, sizeof comment, "%s, %d thread(s)", rlx_host_info(), opt.threads);
    int rc = 0;
    if (mkdirs(path) != 0 || knobs_save(path, all, nall, comment, msg, sizeof msg) != RLX_OK) {
        fprintf(stderr, "rlx-bench: cannot write the tuning file %s: %s\n", path, msg);
        rc = 1;
    } else if (rlx_set_option("tuning_file", path) != RLX_OK) {
        fprintf(stderr, "rlx-bench: the tuning file written does not load: %s\n", rlx_last_error());
        rc = 1;
    } else if (!opt.json) {
        printf("tuning file %s: %d entries (%.0f s)\n", path, nall, now() - start);
    } else {
        printf("{\"type\":\"tuning_file\",\"path\":\"%s\",\"entries\":%d}\n", path, nall);
    }
    free(all);
    return rc;
}

/* ----------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fprintf(f, "usage: rlx-bench [--json] [--filter W1,W2,...] [--threads N] [--repeat R] [--quick]\n"
               "                 [--backend jit|ref] [--list] [--sweep KNOB=v1,v2,...]\n"
               "                 [--tune [--budget SECONDS] [--tuning-file PATH]]\n");
}

static bool parse_int_arg(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static int parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        long v;
        if (!strcmp(a, "--json"))
            opt.json = true;
        else if (!strcmp(a, "--quick"))
            opt.quick = true;
        else if (!strcmp(a, "--tune"))
            opt.tune = true;
        else if (!strcmp(a, "--list"))
            opt.list = true;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--filter") && has)
            opt.filter = argv[++i];
        else if (!strcmp(a, "--sweep") && has)
            opt.sweep = argv[++i];
        else if (!strcmp(a, "--tuning-file") && has)
            opt.tuning_file = argv[++i];
        else if (!strcmp(a, "--backend") && has) {
            opt.backend = argv[++i];
            if (strcmp(opt.backend, "jit") && strcmp(opt.backend, "ref")) {
                fprintf(stderr, "rlx-bench: --backend wants jit or ref, got '%s'\n", opt.backend);
                return -1;
            }
        } else if (!strcmp(a, "--threads") && has) {
            if (!parse_int_arg(argv[++i], 1, 64, &v)) {
                fprintf(stderr, "rlx-bench: --threads wants an integer in 1..64, got '%s'\n", argv[i]);
                return -1;
            }
            opt.threads = (int)v;
        } else if (!strcmp(a, "--repeat") && has) {
            if (!parse_int_arg(argv[++i], 1, 1000, &v)) {
                fprintf(stderr, "rlx-bench: --repeat wants an integer in 1..1000, got '%s'\n", argv[i]);
                return -1;
            }
            opt.repeat = (int)v;
        } else if (!strcmp(a, "--budget") && has) {
            if (!parse_int_arg(argv[++i], 1, 86400, &v)) {
                fprintf(stderr, "rlx-bench: --budget wants seconds in 1..86400, got '%s'\n", argv[i]);
                return -1;
            }
            opt.budget = (double)v;
        } else {
            static const char *const valued[] = {"--filter", "--sweep", "--tuning-file", "--backend",
                                                 "--threads", "--repeat", "--budget"};
            bool needs = false;
            for (size_t k = 0; k < sizeof valued / sizeof *valued; k++)
                needs = needs || !strcmp(a, valued[k]);
            fprintf(stderr, "rlx-bench: %s '%s'\n", needs ? "missing value after" : "unknown argument", a);
            return -1;
        }
    }
    if (opt.filter) {
        /* every name in the filter must be a workload, W7 or a probe */
        char *f = strdup(opt.filter), *save = NULL;
        for (char *t = strtok_r(f, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            bool known = !strcmp(t, "W7") || !strcmp(t, "probes") || !strcmp(t, "narrow") || !strcmp(t, "generic") ||
                         !strcmp(t, "accum") || !strcmp(t, "bf16gemm") || !strcmp(t, "f16gemm") ||
                         !strcmp(t, "q8linear") || !strcmp(t, "halfattn") || !strcmp(t, "halfconv");
            for (int i = 0; i < NWORK; i++)
                known = known || !strcmp(t, workloads[i].name);
            if (!known) {
                fprintf(stderr, "rlx-bench: unknown workload '%s' in --filter (--list shows them)\n", t);
                free(f);
                return -1;
            }
        }
        free(f);
    }
    if (opt.tune && opt.sweep) {
        fprintf(stderr, "rlx-bench: --tune and --sweep are exclusive\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (parse_args(argc, argv) < 0) {
        usage(stderr);
        return 2;
    }
    if (opt.list) {
        for (int i = 0; i < NWORK; i++)
            printf("%-10s %-8s %s%s%s\n", workloads[i].name, workloads[i].cls, workloads[i].desc,
                   workloads[i].peer ? "; peer: " : "", workloads[i].peer ? workloads[i].peer_name : "");
        printf("%-10s %-8s %s\n", "W7", "-", "a+b of 4 elements, build+realize+read, and through a program");
        printf("%-10s %-8s %s\n", "narrow", "-", "W1 and W3: f32 time over bf16 and f16 time, interleaved rounds");
        printf("%-10s %-8s %s\n", "bf16gemm", "-", "bf16 matmul 512^3, 2048^3 against f32 cblas_sgemm, interleaved rounds");
        printf("%-10s %-8s %s\n", "f16gemm", "-", "f16 matmul 512^3, 2048^3 against its widening and cblas_sgemm");
        printf("%-10s %-8s %s\n", "generic", "-", "W1-W4 generic/specialized kernels, interleaved; a 64-size stream");
        printf("%-10s %-8s %s\n", "accum", "-", "W4a,W4d,W4e,W4b,W4c: f32 sums in f64 against blocked f32, interleaved");
        printf("%-10s %-8s %s\n", "q8linear", "-", "i8-weight linear [1|8|256,4096]x[4096,4096]^T against f32, interleaved");
        printf("%-10s %-8s %s\n", "halfattn", "-", "bf16 attention fwd, fwd+bwd: native, widened, f32; interleaved rounds");
        printf("%-10s %-8s %s\n", "halfconv", "-", "bf16 conv2d 32x64x56x56 3x3 fwd, fwd+bwd: oneDNN, widened, f32; interleaved");
        printf("knobs (rlx_set_option / env RLX_<KNOB>):");
        for (int i = 0; i < KNOB_COUNT; i++)
            printf(" %s", knob_table[i].name);
        printf("\n");
        return 0;
    }
    rlx_set_num_threads(opt.threads);
    if (set_or_die("backend", opt.backend) < 0)
        return 2;
    if (opt.sweep)
        return sweep();
    if (opt.tune)
        return tune();
    probes();
    print_header(NULL);
    for (int i = 0; i < NWORK; i++)
        if (wanted(workloads[i].name))
            run_workload(&workloads[i]);
    if (wanted("W7"))
        w7();
    if (wanted("narrow"))
        narrow_ratios();
    if (wanted("bf16gemm"))
        half_gemm(RLX_BF16);
    if (wanted("f16gemm"))
        half_gemm(RLX_F16);
    if (wanted("generic"))
        generic_ratios();
    if (wanted("q8linear"))
        q8_linear();
    if (wanted("halfattn"))
        half_attn();
    if (wanted("halfconv"))
        half_conv();
    if (wanted("accum"))
        accum_ratios();
    return failures ? 1 : 0;
}
