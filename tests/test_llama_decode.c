/*
 * test_llama_decode.c — KV-cache decoding of examples/llama_model.c through
 * one compiled program whose caches grow by a row per token (a dynamic
 * length L bound to 0, 1, 2, ...): the logits of every step equal the full
 * forward's at that position (f32 within 1e-5, f64 within 1e-12, relative
 * to the row's largest |logit|), on both backends; the full forward is
 * itself causal (a prefix's last row equals the whole sequence's row);
 * after the second step nothing is compiled (L = 0 and L >= 1 may differ
 * by a kernel: dims of 0 or 1 drop out), after the first with
 * cache views rounded up to a bucket of rows (the rows past pos masked),
 * which plans each bucket once; bad bindings are errors.
 */
#include <pthread.h>

#include "llama_model.h"
#include "harness.h"

enum { SEQ = 24, VOCAB = 50 };

static llama_config small(rlx_dtype dt)
{
    return (llama_config){.dim = 32, .layers = 2, .heads = 4, .kv_heads = 2, .hidden = 64, .vocab = VOCAB,
                          .max_seq = SEQ, .dtype = dt};
}

static void make_tokens(int32_t *tokens, int n, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        tokens[i] = (int32_t)(s % VOCAB);
    }
}

/* Largest |a[j] - b[j]| over max |b[j]| of one row of logits. */
static double row_error(const double *a, const double *b, int n)
{
    double scale = 0, err = 0;
    for (int j = 0; j < n; j++) {
        scale = fabs(b[j]) > scale ? fabs(b[j]) : scale;
        err = fabs(a[j] - b[j]) > err ? fabs(a[j] - b[j]) : err;
    }
    return scale > 0 ? err / scale : err;
}

/* The full forward's logits [n, V] of tokens[0..n) as doubles (malloc'ed). */
static double *forward_values(const llama_model *m, const int32_t *tokens, int n)
{
    const int64_t sh[2] = {1, n};
    rlx_tensor *logits = llama_forward(m, ti32(2, sh, tokens));
    CHECK(logits != NULL);
    int64_t count = 0;
    double *v = logits ? test_values(logits, &count) : NULL;
    CHECK_EQ_INT(count, (int64_t)n * VOCAB);
    return v;
}

/* Decodes tokens twice (the second time over the stale caches of the
 * first) with the cache views rounded up to bucket rows, and compares the
 * logits with the full forward's. */
static void decode_run(const llama_model *m, const char *be, int bucket, const int32_t *tokens, const double *full,
                       double rtol)
{
    const rlx_dtype dt = m->cfg.dtype;
    const bool jit = strcmp(be, "jit") == 0;
    llama_decoder d;
    if (llama_decoder_init(&d, m) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "%s: decoder init: %s", be, rlx_last_error());
        return;
    }
    d.bucket = bucket;
    double worst = 0, got[VOCAB], spread = 0;
    rlx_stats_t s0, s1;
    for (int round = 0; round < 2; round++) { /* round 1 restarts over the caches of round 0 */
        d.pos = 0;
        for (int t = 0; t < SEQ; t++) {
            CHECK_EQ_INT(llama_decode_step_f64(&d, tokens[t], got), RLX_OK);
            /* Exact views: L = 0 (an empty past) may plan a kernel of its
             * own; L >= 1 share size-generic ones. Bucketed views are never
             * empty: one step compiles all. */
            if (round == 0 && t == (bucket > 1 ? 0 : 1))
                rlx_stats(&s0);
            double e = row_error(got, full + t * VOCAB, VOCAB);
            worst = e > worst ? e : worst;
            for (int j = 0; j < VOCAB; j++)
                spread = fabs(got[j]) > spread ? fabs(got[j]) : spread;
        }
    }
    rlx_stats(&s1);
    CHECK(spread > 0.5); /* the logits are not all near 0 */
    CHECK_EQ_INT(d.pos, SEQ);
    if (jit) /* the JIT compiles at the first step(s) only: every L after them re-plans */
        CHECK_EQ_INT(s1.kernels_compiled, s0.kernels_compiled);
    int64_t prepared = -1;
    CHECK_EQ_INT(rlx_program_specs(d.prog, NULL, &prepared), RLX_OK);
    if (jit && bucket == 8) /* lengths 8, 16, 24, each planned once (8 plans are kept) */
        CHECK_EQ_INT(prepared, 3);
    if (jit && bucket == 1) /* every length, twice: 24 > 8 plans kept */
        CHECK_EQ_INT(prepared, 2 * SEQ);
    if (getenv("LLAMA_TEST_VERBOSE"))
        printf("  %s %s bucket %d: worst |decode - full| / max|logit| = %g over %d positions\n", be,
               rlx_dtype_name(dt), bucket, worst, SEQ);
    if (worst > rtol)
        test_fail(__FILE__, __LINE__, "%s %s bucket %d: decode logits differ from the full forward (rel %g > %g)",
                  be, rlx_dtype_name(dt), bucket, worst, rtol);
    CHECK_EQ_INT(llama_decode_step(&d, 1, NULL), RLX_E_ARG); /* the caches are full */
    d.pos = 0;
    CHECK_EQ_INT(llama_decode_step(&d, VOCAB, NULL), RLX_E_ARG); /* no such token */
    llama_decoder_free(&d);
}

static void decode_matches_forward(rlx_dtype dt, double rtol)
{
    const llama_config c = small(dt);
    int32_t tokens[SEQ];
    make_tokens(tokens, SEQ, 11);
    EACH_BACKEND(b)
    {
        const char *be = b ? "jit" : "ref";
        llama_model m;
        if (llama_init(&m, &c, 5) != RLX_OK) {
            test_fail(__FILE__, __LINE__, "%s: llama_init: %s", be, rlx_last_error());
            continue;
        }
        double *full = forward_values(&m, tokens, SEQ);
        /* The reference is causal: a prefix's last row is the same row. */
        for (int n = 1; n < SEQ && full; n += 10) {
            double *pre = forward_values(&m, tokens, n);
            if (pre && row_error(pre + (n - 1) * VOCAB, full + (n - 1) * VOCAB, VOCAB) > rtol)
                test_fail(__FILE__, __LINE__, "%s %s: the forward over %d tokens differs from the whole one's row",
                          be, rlx_dtype_name(dt), n);
            free(pre);
        }
        for (int bucket = 1; bucket <= 8 && full; bucket += 7)
            decode_run(&m, be, bucket, tokens, full, rtol);
        free(full);
        llama_free(&m);
    }
}

TEST(llama_decode_f32_matches_forward) { decode_matches_forward(RLX_F32, 1e-5); }
TEST(llama_decode_f64_matches_forward) { decode_matches_forward(RLX_F64, 1e-12); }

/* The program's bindings, valid for L rows; one can then be replaced. */
typedef struct {
    rlx_binding b[2 + 4];
    char names[4][8];
    int n;
} bindings;

static void valid_bindings(bindings *bs, llama_decoder *d, rlx_dtype dt, int64_t L)
{
    const llama_config *c = &d->m->cfg;
    const int64_t tsh[2] = {1, 1}, csh[3] = {1, L, llama_kv_dim(c)};
    const int32_t tok = 3, posv = (int32_t)L;
    bs->n = 0;
    bs->b[bs->n++] = (rlx_binding){"token", ti32(2, tsh, &tok)};
    bs->b[bs->n++] = (rlx_binding){"pos", ti32(1, tsh, &posv)};
    for (int l = 0; l < c->layers; l++) {
        bs->b[bs->n++] = (rlx_binding){llama_cache_name(bs->names[2 * l], 8, 'k', l), rlx_zeros(dt, 3, csh)};
        bs->b[bs->n++] = (rlx_binding){llama_cache_name(bs->names[2 * l + 1], 8, 'v', l), rlx_zeros(dt, 3, csh)};
    }
}

/* Runs d's program with bs and expects status want (no outputs). */
static void expect_run(const char *file, int line, const char *what, llama_decoder *d, const bindings *bs, int nb,
                       rlx_status want)
{
    rlx_tensor *out[5] = {NULL};
    rlx_clear_error();
    rlx_status rc = rlx_program_run(d->prog, bs->b, nb, out);
    if (rc != want)
        test_fail(file, line, "%s: status %d, expected %d (%s)", what, (int)rc, (int)want, rlx_last_error());
    if (want != RLX_OK) {
        for (int i = 0; i < 5; i++)
            if (out[i])
                test_fail(file, line, "%s: output %d set on error", what, i);
        if (!strstr(rlx_last_error(), "rlx_program_run"))
            test_fail(file, line, "%s: the message does not name rlx_program_run: \"%s\"", what, rlx_last_error());
    }
}
#define EXPECT_RUN(what, d, bs, nb, want) expect_run(__FILE__, __LINE__, (what), (d), (bs), (nb), (want))

TEST(llama_decode_bad_bindings)
{
    llama_config c = small(RLX_F32);
    llama_model m;
    CHECK_EQ_INT(llama_init(&m, &c, 5), RLX_OK);
    llama_decoder d;
    CHECK_EQ_INT(llama_decoder_init(&d, &m), RLX_OK);
    const int64_t kvd = llama_kv_dim(&c), tsh[2] = {1, 1};
    bindings bs;
    for (int64_t L = 0; L < 3; L += 2) {
        valid_bindings(&bs, &d, RLX_F32, L);
        EXPECT_RUN("valid", &d, &bs, bs.n, RLX_OK);
        valid_bindings(&bs, &d, RLX_F32, L);
        bs.b[2].value = rlx_zeros(RLX_F64, 3, (int64_t[]){1, L, kvd});
        EXPECT_RUN("an f64 cache", &d, &bs, bs.n, RLX_E_DTYPE);
        valid_bindings(&bs, &d, RLX_F32, L);
        bs.b[3].value = rlx_zeros(RLX_F32, 3, (int64_t[]){1, L, kvd + 1});
        EXPECT_RUN("v rows of another width", &d, &bs, bs.n, RLX_E_SHAPE);
        valid_bindings(&bs, &d, RLX_F32, L);
        bs.b[4].value = rlx_zeros(RLX_F32, 2, (int64_t[]){L, kvd});
        EXPECT_RUN("a cache of rank 2", &d, &bs, bs.n, RLX_E_SHAPE);
        valid_bindings(&bs, &d, RLX_F32, L);
        bs.b[5].value = rlx_zeros(RLX_F32, 3, (int64_t[]){1, L + 1, kvd});
        EXPECT_RUN("caches of two lengths", &d, &bs, bs.n, RLX_E_SHAPE);
        valid_bindings(&bs, &d, RLX_F32, L);
        bs.b[0].value = ti64(2, tsh, (int64_t[]){3});
        EXPECT_RUN("an i64 token", &d, &bs, bs.n, RLX_E_DTYPE);
        valid_bindings(&bs, &d, RLX_F32, L);
        bs.b[1].value = rlx_zeros(RLX_F32, 1, tsh);
        EXPECT_RUN("an f32 position", &d, &bs, bs.n, RLX_E_DTYPE);
        valid_bindings(&bs, &d, RLX_F32, L);
        EXPECT_RUN("a missing cache", &d, &bs, bs.n - 1, RLX_E_ARG);
    }
    /* Values out of range are run-time errors, not reads out of bounds. */
    valid_bindings(&bs, &d, RLX_F32, 1);
    bs.b[0].value = ti32(2, tsh, (int32_t[]){VOCAB});
    rlx_tensor *out[5] = {NULL};
    CHECK(rlx_program_run(d.prog, bs.b, bs.n, out) != RLX_OK);
    CHECK(out[0] == NULL);
    valid_bindings(&bs, &d, RLX_F32, 1);
    bs.b[1].value = ti32(1, tsh, (int32_t[]){SEQ});
    CHECK(rlx_program_run(d.prog, bs.b, bs.n, out) != RLX_OK);
    CHECK(out[0] == NULL);
    rlx_clear_error();
    llama_decoder_free(&d);
    llama_free(&m);
    /* Configs the model cannot build. */
    c.kv_heads = 3;
    CHECK_EQ_INT(llama_init(&m, &c, 5), RLX_E_ARG);
    c = small(RLX_I32);
    CHECK_EQ_INT(llama_init(&m, &c, 5), RLX_E_ARG);
}

/* A decoder over the program of another (its own caches): threads that
 * decode at once run one program. */
typedef struct {
    llama_decoder d;
    const int32_t *tokens;
    const double *full;
    double worst;
    int bad;
} sharer;

static void *decode_thread(void *arg)
{
    sharer *s = arg;
    double got[VOCAB];
    s->d.pos = 0;
    for (int t = 0; t < SEQ; t++) {
        if (llama_decode_step_f64(&s->d, s->tokens[t], got) != RLX_OK) {
            s->bad++;
            break;
        }
        double e = row_error(got, s->full + t * VOCAB, VOCAB);
        s->worst = e > s->worst ? e : s->worst;
    }
    return NULL;
}

/* Two threads decode two sequences through one program (JIT), one over
 * exact lengths and one over 8-row buckets, so their runs bind different
 * lengths at once; each matches its full forward, and nothing compiles
 * after the first steps of a single-threaded warm-up (TSan: make
 * test-tsan). */
TEST(llama_decode_two_threads_one_program)
{
    const llama_config c = small(RLX_F64);
    llama_model m;
    CHECK_EQ_INT(llama_init(&m, &c, 5), RLX_OK);
    int32_t tokens[2][SEQ];
    make_tokens(tokens[0], SEQ, 11);
    make_tokens(tokens[1], SEQ, 12);
    double *full[2] = {forward_values(&m, tokens[0], SEQ), forward_values(&m, tokens[1], SEQ)};
    sharer sh[2];
    memset(sh, 0, sizeof sh);
    CHECK_EQ_INT(llama_decoder_init(&sh[0].d, &m), RLX_OK);
    CHECK_EQ_INT(llama_decoder_init(&sh[1].d, &m), RLX_OK);
    rlx_program_free(sh[1].d.prog); /* the second decodes through the first's program */
    sh[1].d.prog = sh[0].d.prog;
    sh[1].d.bucket = 8;
    for (int i = 0; i < 2; i++) {
        sh[i].tokens = tokens[i];
        sh[i].full = full[i];
    }
    double got[VOCAB];
    for (int t = 0; t < 3 && full[0] && full[1]; t++) /* warm-up: the kernels of L = 0, 1 and a bucket */
        for (int i = 0; i < 2; i++)
            CHECK_EQ_INT(llama_decode_step_f64(&sh[i].d, tokens[i][t], got), RLX_OK);
    rlx_stats_t s0, s1;
    rlx_stats(&s0);
    pthread_t th[2];
    for (int i = 0; i < 2 && full[0] && full[1]; i++)
        CHECK_EQ_INT(pthread_create(&th[i], NULL, decode_thread, &sh[i]), 0);
    for (int i = 0; i < 2 && full[0] && full[1]; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(sh[i].bad, 0);
        CHECK_EQ_INT(sh[i].d.pos, SEQ);
        if (sh[i].worst > 1e-12)
            test_fail(__FILE__, __LINE__, "thread %d: logits differ from the full forward (rel %g)", i, sh[i].worst);
    }
    rlx_stats(&s1);
    CHECK_EQ_INT(s1.kernels_compiled, s0.kernels_compiled);
    sh[1].d.prog = NULL;
    llama_decoder_free(&sh[1].d);
    llama_decoder_free(&sh[0].d);
    free(full[0]);
    free(full[1]);
    llama_free(&m);
}

TEST_MAIN(T(llama_decode_f32_matches_forward), T(llama_decode_f64_matches_forward), T(llama_decode_bad_bindings),
          T(llama_decode_two_threads_one_program))
