/*
 * bench_w11.c — W11: greedy decoding of a Llama-shaped model (the shape of
 * llama2.c's "stories15M": dim 288, 6 layers, 6 heads, 6 kv heads, SwiGLU
 * hidden 768, vocab 32000, tied classifier, max_seq 256; random weights,
 * f32, about 61 MB) through the one compiled decode step of
 * examples/llama_model.c, the KV caches growing by a row per token.
 *
 * Each round generates --tokens tokens after a 1-token prompt at 1 and at
 * 2 threads, with the cache views of exactly L rows (bucket 1: a new
 * length, so a new plan, per token) and rounded up to --bucket rows
 * (default 32: 8 lengths over max_seq 256, all kept planned), and
 * measures the weight-streaming limit: the time to read
 * every weight byte once (a plain C loop summing the weight buffers, this
 * file is built -O3 -march=native), all interleaved in one process; each
 * figure is its best over the rounds. Also bucket B at 1 thread with the
 * knob gemv 1 (OpenBLAS's sgemv for the m = 1 products, as before
 * librlx's gemv kernel). Prints ms/token at each thread count (the sum
 * over the steps of each step's best over the rounds, and the best whole
 * run), the limit, and the ratio decode / limit (W11's target at 1
 * thread: <= 1.3), in wall time and, at 1 thread, in the thread's CPU
 * time (the time other processes hold the core left out: the better
 * figure on a loaded machine; memory traffic of other processes still
 * slows both).
 *
 * Then how a token's time splits at 1 thread and bucket 1, in CPU time:
 *   gemv      a program of the step's m = 1 products alone (per layer q,
 *             k, v, o, w1, w3, w2; the classifier), same weights, run
 *             once per token;
 *   attention a program of the attention op alone over L cache rows and
 *             the new one (rlx_attention_kv, as the step), timed at each L
 *             with its plan kept, times layers;
 *   replan    a step at a new L (its plan evicted: 8 are kept) minus the
 *             same step again (plan kept);
 *   rest      the step's time less the three (norms, rope, mask, silu,
 *             residuals, the caller's binding and appending, argmax).
 * and the gemv program through librlx's kernel and through OpenBLAS
 * (knob gemv 1), interleaved with the limit, at 1 thread (CPU time) and 2
 * (wall).
 *
 *   build/bench/rlx-bench-w11 [--tokens N] [--rounds R] [--bucket B] [--quick]
 * --quick: a small model and few tokens (a smoke run, no target).
 * --compare: also decodes through the step of llama_decoder_init_concat
 * (each layer's cache copied into cat(past, new) every token, the design
 * before rlx_attention_kv), interleaved with the other in every round,
 * and prints its ms/token and its ratio to the in-place step's.
 * --profile B: only decoding with bucket B at 1 thread, rounds times (to
 * run under perf: bench/w11_profile.sh splits its samples).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama_model.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

/* The calling thread's CPU time: at 1 thread every kernel of a step runs
 * on it, and time other processes hold the core is left out (this machine
 * is shared: load 3-10 on 2 cores). */
static double cpu_now(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

/* Wall and thread CPU seconds. */
typedef struct {
    double wall, cpu;
} secs;

static secs secs_now(void) { return (secs){now(), cpu_now()}; }

static secs secs_since(secs t0)
{
    secs t = secs_now();
    return (secs){t.wall - t0.wall, t.cpu - t0.cpu};
}

static void secs_min(secs *best, secs t)
{
    best->wall = t.wall < best->wall ? t.wall : best->wall;
    best->cpu = t.cpu < best->cpu ? t.cpu : best->cpu;
}

static const secs SECS_MAX = {1e9, 1e9};

static void die(const char *what)
{
    fprintf(stderr, "rlx-bench-w11: %s: %s\n", what, rlx_last_error());
    exit(1);
}

/* ------------------------------------------------ weight-streaming limit */

/* 64 independent f32 lanes: vectorized without reassociation, so the loop
 * is limited by the loads, not by one add chain. */
enum { LANES = 64 };
typedef struct {
    float acc[LANES];
} stream_sum;

static void stream_one(const void *data, int64_t bytes, void *ctx)
{
    stream_sum *s = ctx;
    const float *p = data;
    /* (the lanes in a local: through s they could alias p, and the compiler
     * then stores and reloads them every step, a chain that halves the rate) */
    float acc[LANES];
    memcpy(acc, s->acc, sizeof acc);
    int64_t n = bytes / (int64_t)sizeof(float), i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            acc[j] += p[i + j];
    for (; i < n; i++)
        acc[0] += p[i];
    memcpy(s->acc, acc, sizeof acc);
}

static volatile float stream_sink;

/* Seconds to read every weight byte of m once. */
static secs stream_weights(const llama_model *m)
{
    stream_sum s;
    memset(&s, 0, sizeof s);
    secs t0 = secs_now();
    llama_weights_each(m, stream_one, &s);
    secs t = secs_since(t0);
    float total = 0;
    for (int j = 0; j < LANES; j++)
        total += s.acc[j];
    stream_sink = total;
    return t;
}

static void count_bytes(const void *data, int64_t bytes, void *ctx)
{
    (void)data;
    (void)bytes;
    (void)ctx;
}

/* ------------------------------------------------------------ decoding */

static int32_t argmax(const float *v, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

/* Generates n tokens greedily after the prompt token 1 from position 0;
 * returns the seconds, the tokens in out. With step_best, each step's
 * time (step and argmax) lowers step_best[i] when shorter. */
static double generate(llama_decoder *d, int n, int32_t *out, float *logits, secs *step_best)
{
    d->pos = 0;
    int32_t tok = 1;
    double t0 = now();
    secs prev = secs_now();
    for (int i = 0; i < n; i++) {
        if (llama_decode_step(d, tok, logits) != RLX_OK)
            die("decode step");
        out[i] = tok = argmax(logits, d->m->cfg.vocab);
        if (step_best) {
            secs_min(&step_best[i], secs_since(prev));
            prev = secs_now();
        }
    }
    return now() - t0;
}

/* -------------------------------------------------------------- split */

/* The m = 1 products of one token, as one program of independent outputs. */
static rlx_program *gemv_program(const llama_model *m)
{
    const llama_config *c = &m->cfg;
    rlx_tensor *outs[1 + 7 * LLAMA_MAX_LAYERS];
    int n = 0;
    rlx_scope_begin();
    rlx_tensor *x = rlx_input("x", c->dtype, 2, (int64_t[]){1, c->dim});
    rlx_tensor *h = rlx_input("h", c->dtype, 2, (int64_t[]){1, c->hidden});
    for (int l = 0; l < c->layers; l++) {
        rlx_tensor *ws[6] = {m->wq[l], m->wk[l], m->wv[l], m->wo[l], m->w1[l], m->w3[l]};
        for (int i = 0; i < 6; i++)
            outs[n++] = rlx_linear(x, ws[i], NULL);
        outs[n++] = rlx_linear(h, m->w2[l], NULL);
    }
    outs[n++] = rlx_matmul_t(x, m->tok_emb);
    rlx_program *p = rlx_compile(outs, n);
    rlx_scope_end();
    if (!p)
        die("compiling the gemv program");
    return p;
}

static secs run_timed(rlx_program *p, const rlx_binding *b, int nb)
{
    rlx_tensor *outs[1 + 7 * LLAMA_MAX_LAYERS];
    rlx_scope_begin(); /* owns the outputs */
    secs t0 = secs_now();
    if (rlx_program_run(p, b, nb, outs) != RLX_OK)
        die("split run");
    secs t = secs_since(t0);
    rlx_scope_end();
    return t;
}

/* The gemv program's best run, with librlx's gemv (knob gemv 0) and with
 * OpenBLAS's (knob gemv 1) interleaved, and the limit's best in the same
 * rounds. */
static void gemv_seconds(const llama_model *m, int rounds, secs *ours, secs *openblas, secs *limit)
{
    const llama_config *c = &m->cfg;
    rlx_program *p = gemv_program(m);
    rlx_scope_begin();
    rlx_binding b[2] = {{"x", rlx_randn(c->dtype, 2, (int64_t[]){1, c->dim}, 1)},
                        {"h", rlx_randn(c->dtype, 2, (int64_t[]){1, c->hidden}, 2)}};
    rlx_realize_many((rlx_tensor *[]){b[0].value, b[1].value}, 2);
    *ours = *openblas = *limit = SECS_MAX;
    run_timed(p, b, 2); /* (a warm-up) */
    for (int r = 0; r < rounds; r++) {
        secs_min(ours, run_timed(p, b, 2));
        if (rlx_set_option("gemv", "1") != RLX_OK)
            die("rlx_set_option gemv");
        secs_min(openblas, run_timed(p, b, 2));
        if (rlx_set_option("gemv", "default") != RLX_OK)
            die("rlx_set_option gemv");
        secs_min(limit, stream_weights(m));
    }
    rlx_scope_end();
    rlx_program_free(p);
}

/* The attention of every layer at each L in [0, n), its plan kept: as the
 * step runs it, over the L past rows and the new one (rlx_attention_kv). */
static double attention_seconds(const llama_model *m, int n)
{
    const llama_config *c = &m->cfg;
    const int64_t kvd = llama_kv_dim(c);
    rlx_scope_begin();
    rlx_tensor *q = rlx_input("q", c->dtype, 3, (int64_t[]){1, 1, c->dim});
    rlx_tensor *k = rlx_input("k", c->dtype, 3, (int64_t[]){1, -2, kvd});
    rlx_tensor *v = rlx_input("v", c->dtype, 3, (int64_t[]){1, -2, kvd});
    rlx_tensor *kn = rlx_input("kn", c->dtype, 3, (int64_t[]){1, 1, kvd});
    rlx_tensor *vn = rlx_input("vn", c->dtype, 3, (int64_t[]){1, 1, kvd});
    const rlx_attention_opts o = {.num_kv_heads = c->kv_heads, .mask = RLX_MASK_CAUSAL};
    rlx_tensor *a = rlx_attention_kv(q, k, v, kn, vn, c->heads, c->dim / c->heads, &o);
    rlx_program *p = a ? rlx_compile(&a, 1) : NULL;
    if (!p)
        die("compiling the attention program");
    double total = 0;
    for (int L = 0; L < n; L++) {
        rlx_scope_begin();
        const int64_t ks[3] = {1, L, kvd}, ns[3] = {1, 1, kvd};
        rlx_binding b[5] = {{"q", rlx_randn(c->dtype, 3, (int64_t[]){1, 1, c->dim}, 3)},
                            {"k", rlx_randn(c->dtype, 3, ks, 4)},
                            {"v", rlx_randn(c->dtype, 3, ks, 5)},
                            {"kn", rlx_randn(c->dtype, 3, ns, 6)},
                            {"vn", rlx_randn(c->dtype, 3, ns, 7)}};
        rlx_realize_many((rlx_tensor *[]){b[0].value, b[1].value, b[2].value, b[3].value, b[4].value}, 5);
        run_timed(p, b, 5); /* plans this L */
        double best = 1e9;
        for (int r = 0; r < 3; r++) {
            double t = run_timed(p, b, 5).cpu;
            best = t < best ? t : best;
        }
        total += best * c->layers;
        rlx_scope_end();
    }
    rlx_program_free(p);
    rlx_scope_end();
    return total;
}

/* Per token: a step at a new L (its plan evicted) minus the same step
 * again (its plan kept), each the best of rounds passes over the lengths. */
static double replan_seconds(llama_decoder *d, const int32_t *tokens, int n, float *logits, int rounds,
                             double *step_total)
{
    double *t = malloc((size_t)(2 * n) * sizeof *t);
    for (int i = 0; i < 2 * n; i++)
        t[i] = 1e9;
    for (int r = 0; r < rounds; r++) {
        int32_t tok = 1;
        for (int i = 0; i < n; i++) {
            for (int rep = 0; rep < 2; rep++) {
                d->pos = i;
                double t0 = cpu_now();
                if (llama_decode_step(d, tok, logits) != RLX_OK)
                    die("decode step");
                double dt = cpu_now() - t0;
                t[2 * i + rep] = dt < t[2 * i + rep] ? dt : t[2 * i + rep];
            }
            tok = tokens[i];
        }
    }
    double extra = 0, kept = 0;
    for (int i = 0; i < n; i++) {
        extra += t[2 * i] - t[2 * i + 1];
        kept += t[2 * i + 1];
    }
    free(t);
    *step_total = kept + extra;
    return extra;
}

int main(int argc, char **argv)
{
    int ntok = 128, rounds = 5, bucket = 32, profile = 0;
    bool quick = false, compare = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            ntok = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bucket") && i + 1 < argc)
            bucket = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--profile") && i + 1 < argc)
            profile = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--compare"))
            compare = true;
        else {
            fprintf(stderr, "usage: rlx-bench-w11 [--tokens N] [--rounds R] [--bucket B] [--profile B] [--quick] [--compare]\n");
            return 2;
        }
    }
    llama_config cfg = {.dim = 288, .layers = 6, .heads = 6, .kv_heads = 6, .hidden = 768, .vocab = 32000,
                        .max_seq = 256, .dtype = RLX_F32};
    if (quick) {
        cfg = (llama_config){.dim = 64, .layers = 2, .heads = 4, .kv_heads = 2, .hidden = 128, .vocab = 500,
                             .max_seq = 32, .dtype = RLX_F32};
        ntok = ntok > 16 ? 16 : ntok;
        rounds = 2;
        bucket = 4;
    }
    if (ntok < 1 || ntok > cfg.max_seq || rounds < 1 || bucket < 1) {
        fprintf(stderr, "rlx-bench-w11: --tokens must be 1..%d, --rounds and --bucket >= 1\n", cfg.max_seq);
        return 2;
    }
    llama_model m;
    if (llama_init(&m, &cfg, 42) != RLX_OK)
        die("llama_init");
    const int64_t bytes = llama_weights_each(&m, count_bytes, NULL);
    llama_decoder d;
    rlx_stats_t s0, s1;
    double t0 = now();
    if (llama_decoder_init(&d, &m) != RLX_OK)
        die("llama_decoder_init");
    double compile_s = now() - t0;
    float *logits = malloc((size_t)cfg.vocab * sizeof *logits);
    int32_t *toks[2] = {malloc((size_t)ntok * sizeof(int32_t)), malloc((size_t)ntok * sizeof(int32_t))};
    printf("W11 llama decode: dim %d, %d layers, %d heads (%d kv), hidden %d, vocab %d; %.1f MB of f32 weights; "
           "%d tokens after a 1-token prompt, best of %d rounds\n",
           cfg.dim, cfg.layers, cfg.heads, cfg.kv_heads, cfg.hidden, cfg.vocab, (double)bytes / 1e6, ntok, rounds);

    /* Warm-up: the first steps compile the kernels, and each bucket's
     * lengths are planned; the rounds after only re-plan (bucket 1). */
    rlx_set_num_threads(1);
    rlx_stats_reset();
    double warm = generate(&d, ntok, toks[0], logits, NULL);
    rlx_stats(&s0);
    rlx_stats_t s0c = s0;
    llama_decoder dc;
    if (compare) {
        if (llama_decoder_init_concat(&dc, &m) != RLX_OK)
            die("llama_decoder_init_concat");
        for (int bk = 0; bk < 2; bk++) { /* (its warm-up: what it compiles is not counted) */
            dc.bucket = bk ? bucket : 1;
            generate(&dc, ntok, toks[1], logits, NULL);
        }
        rlx_stats(&s0c);
    }
    d.bucket = bucket;
    generate(&d, ntok, toks[0], logits, NULL);
    if (profile > 0) { /* decoding alone, for a profiler: rounds generations at 1 thread */
        d.bucket = profile;
        generate(&d, ntok, toks[0], logits, NULL);
        double t = 0;
        for (int r = 0; r < rounds; r++)
            t += generate(&d, ntok, toks[0], logits, NULL);
        printf("profile: bucket %d, %d x %d tokens, %.3f ms/token\n", profile, rounds, ntok, t / rounds / ntok * 1e3);
        llama_decoder_free(&d);
        llama_free(&m);
        return 0;
    }
    /* Configurations c: bucket 1 and bucket B at 1 and 2 threads, then
     * bucket B at 1 thread with OpenBLAS's gemv (knob gemv 1: the products
     * as before librlx's gemv); with --compare the cat(past, new) step at
     * each of the first four. best[c]: the best whole run; steps[c]: per
     * step, the best over the rounds (a 2 ms step is as likely as the 2 ms
     * limit to run between other processes' slices on a busy machine; a
     * whole 128-token run is not), in wall and in thread CPU time (at 1
     * thread all of a step runs on this thread); the limit likewise. */
    enum { NCONF = 5, OPENBLAS = 4 };
    double best[NCONF + 4];
    secs limit = SECS_MAX;
    secs *steps = malloc((size_t)((NCONF + 4) * ntok) * sizeof *steps);
    for (int i = 0; i < (NCONF + 4) * ntok; i++)
        steps[i] = SECS_MAX;
    for (int c = 0; c < NCONF + 4; c++)
        best[c] = 1e9;
    bool same = true;
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < NCONF; c++) {
            int t = c == OPENBLAS ? 1 : 1 + c % 2;
            rlx_set_num_threads(t);
            d.bucket = c >= 2 ? bucket : 1;
            if (c == OPENBLAS && rlx_set_option("gemv", "1") != RLX_OK)
                die("rlx_set_option gemv");
            double s = generate(&d, ntok, toks[1], logits, steps + c * ntok) / ntok;
            if (c == OPENBLAS && rlx_set_option("gemv", "default") != RLX_OK)
                die("rlx_set_option gemv");
            best[c] = s < best[c] ? s : best[c];
            same = same && memcmp(toks[0], toks[1], (size_t)ntok * sizeof(int32_t)) == 0;
            if (compare && c < 4) {
                dc.bucket = d.bucket;
                s = generate(&dc, ntok, toks[1], logits, steps + (NCONF + c) * ntok) / ntok;
                best[NCONF + c] = s < best[NCONF + c] ? s : best[NCONF + c];
                same = same && memcmp(toks[0], toks[1], (size_t)ntok * sizeof(int32_t)) == 0;
            }
            secs_min(&limit, stream_weights(&m));
        }
    rlx_stats(&s1);
    printf("compile %.1f ms; warm-up generation %.2f ms/token (%llu kernels compiled); after it %llu compiled\n",
           compile_s * 1e3, warm / ntok * 1e3, (unsigned long long)s0.kernels_compiled,
           (unsigned long long)(s1.kernels_compiled - s0c.kernels_compiled));
    printf("tokens: %d %d %d %d ... (every configuration %s)\n", toks[0][0], toks[0][1 % ntok], toks[0][2 % ntok],
           toks[0][3 % ntok], same ? "agrees" : "DIFFERS");
    printf("weight streaming   %8.3f ms (%.1f GB/s, one thread), CPU time %.3f ms\n", limit.wall * 1e3,
           (double)bytes / limit.wall / 1e9, limit.cpu * 1e3);
    secs sum[NCONF + 4];
    for (int c = 0; c < NCONF + 4; c++) {
        sum[c] = (secs){0, 0};
        for (int i = 0; i < ntok; i++) {
            sum[c].wall += steps[c * ntok + i].wall / ntok;
            sum[c].cpu += steps[c * ntok + i].cpu / ntok;
        }
    }
    for (int c = 0; c < NCONF; c++) {
        int t = c == OPENBLAS ? 1 : 1 + c % 2;
        printf("decode bucket %-3d %d thread%s %8.3f ms/token (best run %.3f)  ratio to the limit %.2f (best run "
               "%.2f)",
               c >= 2 ? bucket : 1, t, t > 1 ? "s" : " ", sum[c].wall * 1e3, best[c] * 1e3, sum[c].wall / limit.wall,
               best[c] / limit.wall);
        if (t == 1) /* (at 2 threads the calling thread's CPU time is part of the step's) */
            printf("; CPU time %.3f ms/token, ratio %.2f (target <= 1.3)", sum[c].cpu * 1e3, sum[c].cpu / limit.cpu);
        printf("%s\n", c == OPENBLAS ? "  <- OpenBLAS gemv (knob gemv 1)" : "");
    }
    for (int c = 0; compare && c < 4; c++)
        printf("  cat(past, new) step, bucket %-3d %d thread%s %8.3f ms/token: %.3fx the in-place step's\n",
               c >= 2 ? bucket : 1, 1 + c % 2, c % 2 ? "s" : " ", sum[NCONF + c].wall * 1e3,
               sum[NCONF + c].wall / sum[c].wall);
    if (compare)
        llama_decoder_free(&dc);
    free(steps);

    /* The split, at 1 thread, bucket 1 (the plain design: a new L per token). */
    rlx_set_num_threads(1);
    d.bucket = 1;
    generate(&d, ntok, toks[0], logits, NULL); /* the caches of this sequence */
    double step_total;
    double replan = replan_seconds(&d, toks[0], ntok, logits, rounds, &step_total) / ntok;
    secs gv, gv_blas, gv_limit;
    gemv_seconds(&m, 5 * rounds, &gv, &gv_blas, &gv_limit); /* (short runs: more of them) */
    double gemv = gv.cpu;
    double attn = attention_seconds(&m, ntok) / ntok;
    double step = step_total / ntok, rest = step - gemv - attn - replan;
    printf("split of a token at 1 thread, bucket 1, CPU time (%.3f ms/token in this pass; bucketed: replan ~0):\n",
           step * 1e3);
    printf("  gemv       %8.3f ms  %5.1f%%\n", gemv * 1e3, 100 * gemv / step);
    printf("  attention  %8.3f ms  %5.1f%%\n", attn * 1e3, 100 * attn / step);
    printf("  replan     %8.3f ms  %5.1f%%\n", replan * 1e3, 100 * replan / step);
    printf("  rest       %8.3f ms  %5.1f%%\n", rest * 1e3, 100 * rest / step);
    double bstep = sum[2].cpu, brest = bstep - gemv - attn;
    printf("bucket %d at 1 thread (%.3f ms/token CPU time, no re-planning): gemv %.1f%%, attention %.1f%%, rest %.3f "
           "ms (%.1f%%)\n",
           bucket, bstep * 1e3, 100 * gemv / bstep, 100 * attn / bstep, brest * 1e3, 100 * brest / bstep);
    printf("gemv program at 1 thread (CPU time): librlx %.3f ms, OpenBLAS (knob gemv 1) %.3f ms, limit in the same "
           "rounds %.3f ms: %.2fx and %.2fx the limit\n",
           gv.cpu * 1e3, gv_blas.cpu * 1e3, gv_limit.cpu * 1e3, gv.cpu / gv_limit.cpu, gv_blas.cpu / gv_limit.cpu);
    rlx_set_num_threads(2);
    gemv_seconds(&m, 5 * rounds, &gv, &gv_blas, &gv_limit);
    printf("gemv program at 2 threads (wall): librlx %.3f ms, OpenBLAS %.3f ms\n", gv.wall * 1e3, gv_blas.wall * 1e3);

    free(toks[0]);
    free(toks[1]);
    free(logits);
    llama_decoder_free(&d);
    llama_free(&m);
    return same ? 0 : 1;
}
