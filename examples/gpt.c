/*
 * gpt.c — a character-level GPT trained with librlx on a text file, with
 * checkpoints and KV-cache sampling.
 *
 * The model and its training step are examples/gpt_model.c (the W10 model:
 * token + position embeddings, pre-LN causal attention blocks, tanh-GELU
 * MLP, tied head, Adam), traced once and compiled with rlx_compile. The
 * text (default /usr/share/common-licenses/GPL-3, present on every Debian
 * system and unchanged since 2007, so runs are reproducible) is read as
 * bytes; the vocabulary is the distinct bytes, sorted. Each step trains on
 * `batch` random windows of seq+1 bytes (inputs and next-byte targets)
 * drawn from a fixed seed.
 *
 * Every --save-every steps the parameters, Adam moments and step number
 * (with the config and vocabulary) go to a safetensors file; --resume
 * loads one and continues with the same model and data stream. At the end
 * it samples --sample bytes after --prompt, one token at a time through
 * the compiled KV-cache decode step (gpt_decoder). --max-loss X exits 1
 * when the final loss (mean of the last 10 steps) is above X (make demo).
 * --bench-decode times a decode step against re-running the whole sequence
 * at length 256 and exits. --bf16 trains in mixed precision (forward and
 * backward in bf16, f32 master weights and Adam: gpt_model.h).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#define _DEFAULT_SOURCE         /* getloadavg */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpt_model.h"

enum { LOSS_WINDOW = 10, BENCH_LEN = 256 };

typedef struct {
    const char *data, *save, *resume, *prompt;
    int steps, print_every, save_every, sample;
    double temperature, max_loss;
    uint64_t seed;
    int bench_decode;
    gpt_config cfg;
} options;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double load1(void)
{
    double l[1] = {-1};
    return getloadavg(l, 1) == 1 ? l[0] : -1;
}

static int fail(const char *what)
{
    fprintf(stderr, "rlx-gpt: %s: %s\n", what, rlx_last_error());
    return 1;
}

/* ------------------------------------------------------------- options */

static void usage(void)
{
    fprintf(stderr,
            "usage: rlx-gpt [--data PATH] [--steps N] [--batch N] [--seq N] [--width N] [--layers N]\n"
            "               [--heads N] [--lr X] [--seed N] [--print-every N] [--save PATH]\n"
            "               [--save-every N] [--resume PATH] [--sample N] [--temperature X]\n"
            "               [--prompt TEXT] [--max-loss X] [--bench-decode] [--bf16]\n");
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.data = "/usr/share/common-licenses/GPL-3",
                   .save = "gpt.safetensors",
                   .prompt = "The ",
                   .steps = 600,
                   .print_every = 50,
                   .sample = 300,
                   .temperature = 0.8,
                   .max_loss = INFINITY,
                   .seed = 1,
                   .cfg = {.vocab = 0, .width = 64, .layers = 2, .heads = 4, .seq = 64, .batch = 16,
                           .dtype = RLX_F32, .lr = 3e-3}};
    for (int i = 1; i < argc; i++) {
        char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *ip = !strcmp(a, "--steps")         ? &o->steps
                  : !strcmp(a, "--batch")       ? &o->cfg.batch
                  : !strcmp(a, "--seq")         ? &o->cfg.seq
                  : !strcmp(a, "--width")       ? &o->cfg.width
                  : !strcmp(a, "--layers")      ? &o->cfg.layers
                  : !strcmp(a, "--heads")       ? &o->cfg.heads
                  : !strcmp(a, "--print-every") ? &o->print_every
                  : !strcmp(a, "--save-every")  ? &o->save_every
                  : !strcmp(a, "--sample")      ? &o->sample
                                                : NULL;
        double *dp = !strcmp(a, "--lr")            ? &o->cfg.lr
                     : !strcmp(a, "--temperature") ? &o->temperature
                     : !strcmp(a, "--max-loss")    ? &o->max_loss
                                                   : NULL;
        const char **sp = !strcmp(a, "--data")     ? &o->data
                          : !strcmp(a, "--save")   ? &o->save
                          : !strcmp(a, "--resume") ? &o->resume
                          : !strcmp(a, "--prompt") ? &o->prompt
                                                   : NULL;
        if (!strcmp(a, "--bench-decode")) {
            o->bench_decode = 1;
            continue;
        }
        if (!strcmp(a, "--bf16")) { /* mixed precision: bf16 compute, f32 weights and Adam */
            o->cfg.compute = RLX_BF16;
            continue;
        }
        if ((!ip && !dp && !sp && strcmp(a, "--seed")) || !v) {
            usage();
            return 0;
        }
        char *end;
        if (ip)
            *ip = (int)strtol(v, &end, 10);
        else if (dp)
            *dp = strtod(v, &end);
        else if (sp)
            *sp = v, end = v + strlen(v);
        else
            o->seed = strtoull(v, &end, 10);
        if (*end) {
            fprintf(stderr, "rlx-gpt: bad value '%s' for %s\n", v, a);
            return 0;
        }
        i++;
    }
    return 1;
}

/* ---------------------------------------------------------------- data */

typedef struct {
    int32_t *tok; /* the text as token ids */
    int64_t n;
    unsigned char byte[256]; /* token id -> byte */
    int vocab;
} corpus;

/* Reads the file; the vocabulary is its distinct bytes unless one is given
 * (from a checkpoint), in which case every byte must be in it. */
static int read_corpus(const char *path, corpus *cp, const int32_t *given, int ngiven)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 0;
    }
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n == cap) {
            unsigned char *nb = realloc(buf, cap = cap ? 2 * cap : 65536);
            if (!nb) {
                free(buf);
                fclose(f);
                return 0;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    int id[256];
    for (int b = 0; b < 256; b++)
        id[b] = -1;
    cp->vocab = 0;
    if (given) {
        for (int k = 0; k < ngiven; k++)
            id[given[k] & 255] = k, cp->byte[k] = (unsigned char)given[k];
        cp->vocab = ngiven;
    } else {
        int seen[256] = {0};
        for (size_t k = 0; k < n; k++)
            seen[buf[k]] = 1;
        for (int b = 0; b < 256; b++)
            if (seen[b])
                id[b] = cp->vocab, cp->byte[cp->vocab++] = (unsigned char)b;
    }
    cp->tok = malloc((n ? n : 1) * sizeof *cp->tok);
    cp->n = (int64_t)n;
    int ok = cp->tok != NULL;
    for (size_t k = 0; ok && k < n; k++)
        if ((cp->tok[k] = id[buf[k]]) < 0) {
            fprintf(stderr, "rlx-gpt: %s has byte 0x%02x, not in the checkpoint's vocabulary\n", path, buf[k]);
            ok = 0;
        }
    free(buf);
    return ok;
}

/* batch random windows of seq+1 tokens: inputs and next-token targets. */
static void make_batch(const corpus *cp, const gpt_config *c, uint64_t *rng, int32_t *x, int32_t *y)
{
    const uint64_t starts = (uint64_t)(cp->n - c->seq);
    for (int b = 0; b < c->batch; b++) {
        int64_t s = (int64_t)(xorshift(rng) % starts);
        memcpy(x + (int64_t)b * c->seq, cp->tok + s, (size_t)c->seq * sizeof *x);
        memcpy(y + (int64_t)b * c->seq, cp->tok + s + 1, (size_t)c->seq * sizeof *y);
    }
}

/* ---------------------------------------------------------- checkpoints */

enum { CFG_VOCAB, CFG_WIDTH, CFG_LAYERS, CFG_HEADS, CFG_SEQ, CFG_N };

static int save_checkpoint(const char *path, const gpt_state *st, const corpus *cp, uint64_t rng)
{
    const gpt_layout *lay = st->lay;
    const gpt_config *c = &lay->cfg;
    const int np = lay->nparam;
    const char *names[3 * GPT_MAX_PARAMS + 4];
    rlx_tensor *ts[3 * GPT_MAX_PARAMS + 4];
    for (int i = 0; i < np; i++) {
        names[i] = lay->name[i], ts[i] = st->p[i];
        names[np + i] = lay->m_name[i], ts[np + i] = st->m[i];
        names[2 * np + i] = lay->v_name[i], ts[2 * np + i] = st->v[i];
    }
    int n = 3 * np;
    const int64_t meta[] = {c->vocab, c->width, c->layers, c->heads, c->seq}, one = 1, ncfg = CFG_N,
                  nvocab = cp->vocab;
    const int64_t step_rng[2] = {st->step, (int64_t)rng};
    int32_t bytes[256];
    for (int k = 0; k < cp->vocab; k++)
        bytes[k] = cp->byte[k];
    rlx_scope_begin();
    names[n] = "step", ts[n++] = rlx_from_data(RLX_I64, 1, &one, &step_rng[0]);
    names[n] = "rng", ts[n++] = rlx_from_data(RLX_I64, 1, &one, &step_rng[1]);
    names[n] = "config", ts[n++] = rlx_from_data(RLX_I64, 1, &ncfg, meta);
    names[n] = "vocab", ts[n++] = rlx_from_data(RLX_I32, 1, &nvocab, bytes);
    rlx_status rc = rlx_save_safetensors(path, n, names, ts);
    rlx_scope_end();
    return rc == RLX_OK ? 1 : !fail("saving the checkpoint");
}

static int read_i64(const rlx_checkpoint *ck, const char *name, int64_t *dst, int64_t n)
{
    rlx_tensor *t = rlx_checkpoint_get(ck, name);
    int ok = t && rlx_dtype_of(t) == RLX_I64 && rlx_numel(t) == n && rlx_read(t, dst, (size_t)n * 8) == RLX_OK;
    rlx_release(t);
    if (!ok)
        fprintf(stderr, "rlx-gpt: checkpoint: no i64 [%lld] '%s'\n", (long long)n, name);
    return ok;
}

/* The config and vocabulary of a checkpoint (they override the options). */
static rlx_checkpoint *open_checkpoint(const char *path, gpt_config *c, int32_t *bytes)
{
    rlx_checkpoint *ck = rlx_load_safetensors(path);
    if (!ck) {
        fail("loading the checkpoint");
        return NULL;
    }
    int64_t meta[CFG_N];
    rlx_tensor *vt = NULL;
    int ok = read_i64(ck, "config", meta, CFG_N) && meta[CFG_VOCAB] >= 1 && meta[CFG_VOCAB] <= 256 &&
             (vt = rlx_checkpoint_get(ck, "vocab")) && rlx_dtype_of(vt) == RLX_I32 &&
             rlx_numel(vt) == meta[CFG_VOCAB] && rlx_read(vt, bytes, (size_t)meta[CFG_VOCAB] * 4) == RLX_OK;
    rlx_release(vt);
    if (!ok) {
        fprintf(stderr, "rlx-gpt: %s: no valid config/vocab\n", path);
        rlx_checkpoint_free(ck);
        return NULL;
    }
    c->vocab = (int)meta[CFG_VOCAB], c->width = (int)meta[CFG_WIDTH], c->layers = (int)meta[CFG_LAYERS];
    c->heads = (int)meta[CFG_HEADS], c->seq = (int)meta[CFG_SEQ];
    return ck;
}

/* Parameters, moments, step and data stream of a checkpoint, checked
 * against the layout. */
static int load_state(const rlx_checkpoint *ck, gpt_state *st, const gpt_layout *lay, uint64_t *rng)
{
    memset(st, 0, sizeof *st);
    st->lay = lay;
    int ok = 1;
    for (int i = 0; i < lay->nparam && ok; i++) {
        const char *names[3] = {lay->name[i], lay->m_name[i], lay->v_name[i]};
        rlx_tensor **dst[3] = {&st->p[i], &st->m[i], &st->v[i]};
        for (int k = 0; k < 3 && ok; k++) {
            rlx_tensor *t = *dst[k] = rlx_checkpoint_get(ck, names[k]);
            int64_t shape[2] = {0, 0};
            ok = t && rlx_dtype_of(t) == lay->cfg.dtype && rlx_rank(t) == lay->rank[i] &&
                 rlx_shape(t, shape, 2) == lay->rank[i] && shape[0] == lay->shape[i][0] &&
                 (lay->rank[i] == 1 || shape[1] == lay->shape[i][1]);
            if (!ok)
                fprintf(stderr, "rlx-gpt: checkpoint: '%s' missing or of the wrong shape\n", names[k]);
        }
    }
    int64_t step = 0, r = 0;
    ok = ok && read_i64(ck, "step", &step, 1) && read_i64(ck, "rng", &r, 1) && step >= 1;
    st->step = step;
    *rng = (uint64_t)r;
    if (!ok)
        gpt_state_free(st);
    return ok;
}

/* ------------------------------------------------------------ sampling */

static int32_t pick(const float *logits, int vocab, double temperature, uint64_t *rng)
{
    int best = 0;
    for (int j = 1; j < vocab; j++)
        best = logits[j] > logits[best] ? j : best;
    if (temperature <= 0)
        return best;
    double p[256], sum = 0;
    for (int j = 0; j < vocab; j++)
        sum += p[j] = exp((logits[j] - logits[best]) / temperature);
    double u = (double)(xorshift(rng) >> 11) * 0x1p-53 * sum;
    for (int j = 0; j < vocab; j++)
        if ((u -= p[j]) < 0)
            return j;
    return best;
}

/* Feeds tokens[0..n) to the decoder from position 0; logits of the last. */
static rlx_status prefill(gpt_decoder *d, rlx_tensor *const *params, const int32_t *tokens, int n, float *logits)
{
    d->pos = 0;
    rlx_status rc = RLX_OK;
    for (int k = 0; k < n && rc == RLX_OK; k++)
        rc = gpt_decode_step(d, params, tokens[k], logits);
    return rc;
}

/* Prints the prompt and n sampled bytes. When the cache is full the
 * context restarts from its last half (positions from 0 again). */
static int sample_text(const gpt_state *st, const corpus *cp, const options *o)
{
    const gpt_config *c = &st->lay->cfg;
    int plen = (int)strlen(o->prompt);
    int32_t *hist = malloc((size_t)(plen + o->sample + 1) * sizeof *hist);
    float logits[256];
    gpt_decoder d;
    if (!hist || gpt_decoder_init(&d, st->lay) != RLX_OK) {
        free(hist);
        return fail("decoder");
    }
    int n = 0;
    for (int k = 0; k < plen; k++) {
        int id = -1;
        for (int j = 0; j < cp->vocab; j++)
            id = cp->byte[j] == (unsigned char)o->prompt[k] ? j : id;
        if (id >= 0) /* (bytes outside the vocabulary are dropped) */
            hist[n++] = id;
    }
    if (n == 0)
        hist[n++] = cp->tok[0];
    int start = n > c->seq ? n - c->seq : 0;
    rlx_status rc = prefill(&d, st->p, hist + start, n - start, logits);
    printf("--- sample (%d bytes, temperature %.2f, seed %llu) ---\n", o->sample, o->temperature,
           (unsigned long long)o->seed);
    for (int k = 0; k < n; k++)
        putchar(cp->byte[hist[k]]);
    uint64_t rng = o->seed * 0x9e3779b97f4a7c15ull + 1;
    double t0 = now();
    for (int k = 0; k < o->sample && rc == RLX_OK; k++) {
        int32_t next = pick(logits, cp->vocab, o->temperature, &rng);
        hist[n++] = next;
        putchar(cp->byte[next]);
        if (d.pos == c->seq) {
            int keep = c->seq / 2;
            rc = prefill(&d, st->p, hist + n - keep, keep, logits);
        } else {
            rc = gpt_decode_step(&d, st->p, next, logits);
        }
    }
    double dt = now() - t0;
    printf("\n--- %.2f ms per sampled byte ---\n", o->sample ? 1e3 * dt / o->sample : 0.0);
    gpt_decoder_free(&d);
    free(hist);
    return rc == RLX_OK ? 1 : !fail("sampling");
}

/* --------------------------------------------------------- decode bench */

/* Per-token time of the KV-cache step (averaged over positions 0..255)
 * against one compiled forward over the whole 256-token sequence. */
static int bench_decode(const options *o, int vocab)
{
    gpt_config c = o->cfg;
    c.vocab = vocab, c.seq = BENCH_LEN, c.batch = 1;
    gpt_layout lay;
    gpt_state st;
    if (gpt_layout_make(&c, &lay) != RLX_OK || gpt_state_init(&st, &lay, o->seed) != RLX_OK)
        return fail("bench model");
    const int64_t n = BENCH_LEN;
    int32_t tokens[BENCH_LEN];
    uint64_t rng = 12345;
    for (int k = 0; k < BENCH_LEN; k++)
        tokens[k] = (int32_t)(xorshift(&rng) % (uint64_t)vocab);
    rlx_scope_begin();
    rlx_tensor *tin = rlx_input("tokens", RLX_I32, 1, &n), *p[GPT_MAX_PARAMS];
    for (int i = 0; i < lay.nparam; i++)
        p[i] = rlx_input(lay.name[i], c.dtype, lay.rank[i], lay.shape[i]);
    rlx_tensor *logits = gpt_logits(&lay, tin, 1, n, p);
    rlx_program *full = logits ? rlx_compile(&logits, 1) : NULL;
    rlx_scope_end();
    rlx_tensor *tok = rlx_from_data(RLX_I32, 1, &n, tokens);
    gpt_decoder d;
    if (!full || !tok || gpt_decoder_init(&d, &lay) != RLX_OK) {
        rlx_program_free(full);
        return fail("bench compile");
    }
    rlx_binding bind[1 + GPT_MAX_PARAMS];
    bind[0] = (rlx_binding){"tokens", tok};
    for (int i = 0; i < lay.nparam; i++)
        bind[1 + i] = (rlx_binding){lay.name[i], st.p[i]};
    float *row = malloc((size_t)(n * vocab) * sizeof *row);
    const int reps = 20;
    double t_full = INFINITY, t_dec = INFINITY;
    rlx_status rc = row ? RLX_OK : RLX_E_NOMEM;
    for (int round = 0; round < 3 && rc == RLX_OK; round++) { /* best of 3 rounds, after a warm-up */
        double t0 = now();
        for (int r = 0; r < reps && rc == RLX_OK; r++) {
            rlx_tensor *out;
            rc = rlx_program_run(full, bind, 1 + lay.nparam, &out);
            if (rc == RLX_OK)
                rc = rlx_read_f32(out, row, (size_t)(n * vocab)), rlx_release(out);
        }
        double tf = (now() - t0) / reps;
        float lg[256];
        t0 = now();
        rc = rc == RLX_OK ? prefill(&d, st.p, tokens, BENCH_LEN, lg) : rc;
        double td = (now() - t0) / BENCH_LEN;
        if (round > 0)
            t_full = tf < t_full ? tf : t_full, t_dec = td < t_dec ? td : t_dec;
    }
    if (rc == RLX_OK)
        printf("decode at length %d (width %d, %d layers, %d heads, vocab %d, %d threads, load %.2f):\n"
               "  KV cache   %8.3f ms/token\n  full rerun %8.3f ms/token\n  speedup    %8.1fx\n",
               BENCH_LEN, c.width, c.layers, c.heads, vocab, rlx_get_num_threads(), load1(), 1e3 * t_dec,
               1e3 * t_full, t_full / t_dec);
    free(row);
    gpt_decoder_free(&d);
    rlx_release(tok);
    rlx_program_free(full);
    gpt_state_free(&st);
    return rc == RLX_OK ? 1 : !fail("bench");
}

/* ---------------------------------------------------------------- main */

static int train(const options *o, gpt_state *st, const corpus *cp, uint64_t *rng, double *final)
{
    const gpt_config *c = &st->lay->cfg;
    double t0 = now();
    rlx_program *prog = gpt_compile_step(st->lay);
    if (!prog)
        return fail("compiling the training step");
    printf("compiled the training step in %.2f s\n", now() - t0);
    const int64_t nt = (int64_t)c->batch * c->seq;
    int32_t *x = malloc((size_t)nt * sizeof *x), *y = malloc((size_t)nt * sizeof *y);
    double recent[LOSS_WINDOW];
    int nrecent = 0, ok = x && y;
    t0 = now();
    double tp = t0;
    int64_t sp = st->step - 1; /* the step of the last line printed */
    const int64_t first = st->step, last = first + o->steps - 1;
    for (int64_t s = first; ok && s <= last; s++) {
        make_batch(cp, c, rng, x, y);
        rlx_scope_begin();
        rlx_tensor *tok = rlx_from_data(RLX_I32, 1, &nt, x), *tgt = rlx_from_data(RLX_I32, 1, &nt, y);
        double loss = NAN;
        ok = tok && tgt && gpt_step(prog, st, tok, tgt, &loss) == RLX_OK;
        rlx_scope_end();
        if (!ok)
            break;
        recent[nrecent++ % LOSS_WINDOW] = loss;
        if (s == first || s % o->print_every == 0 || s == last) {
            double t = now();
            printf("step %5lld  loss %.4f  (%.1f ms/step)\n", (long long)s, loss, 1e3 * (t - tp) / (double)(s - sp));
            fflush(stdout);
            tp = t, sp = s;
        }
        if (o->save_every > 0 && s % o->save_every == 0 && !(ok = save_checkpoint(o->save, st, cp, *rng)))
            break;
        if (o->save_every > 0 && s % o->save_every == 0)
            printf("saved %s at step %lld\n", o->save, (long long)s);
    }
    if (!ok)
        fail("training");
    int k = nrecent < LOSS_WINDOW ? nrecent : LOSS_WINDOW;
    *final = 0;
    for (int j = 0; j < k; j++)
        *final += recent[j] / k;
    if (ok && o->steps > 0)
        printf("trained %d steps in %.1f s; final loss %.4f (mean of the last %d)\n", o->steps, now() - t0, *final,
               k);
    free(x);
    free(y);
    rlx_program_free(prog);
    return ok;
}

int main(int argc, char **argv)
{
    options o;
    if (!parse(argc, argv, &o))
        return 2;
    rlx_checkpoint *ck = NULL;
    int32_t given[256];
    if (o.resume && !(ck = open_checkpoint(o.resume, &o.cfg, given)))
        return 1;
    corpus cp = {0};
    if (!read_corpus(o.data, &cp, ck ? given : NULL, ck ? o.cfg.vocab : 0)) {
        rlx_checkpoint_free(ck);
        free(cp.tok);
        return 1;
    }
    if (o.bench_decode) {
        free(cp.tok);
        return bench_decode(&o, cp.vocab) ? 0 : 1;
    }
    o.cfg.vocab = cp.vocab;
    gpt_layout lay;
    gpt_state st;
    uint64_t rng = o.seed * 0xbf58476d1ce4e5b9ull + 1;
    int ok = cp.n > o.cfg.seq + 1 && gpt_layout_make(&o.cfg, &lay) == RLX_OK;
    if (!ok)
        fprintf(stderr, "rlx-gpt: bad config or text shorter than seq + 2 bytes\n");
    else if (ck)
        ok = load_state(ck, &st, &lay, &rng);
    else
        ok = gpt_state_init(&st, &lay, o.seed) == RLX_OK || fail("init");
    rlx_checkpoint_free(ck); /* (the loaded tensors stay valid) */
    double final = NAN;
    if (ok) {
        printf("%s: %lld bytes, vocab %d; width %d, %d layers, %d heads, seq %d, batch %d, lr %g; %s step %lld\n",
               o.data, (long long)cp.n, cp.vocab, lay.cfg.width, lay.cfg.layers, lay.cfg.heads, lay.cfg.seq,
               lay.cfg.batch, lay.cfg.lr, o.resume ? "resuming at" : "from", (long long)st.step);
        ok = train(&o, &st, &cp, &rng, &final) && (o.sample <= 0 || sample_text(&st, &cp, &o));
        gpt_state_free(&st);
    }
    free(cp.tok);
    if (ok && o.steps > 0 && !(final <= o.max_loss)) {
        fprintf(stderr, "rlx-gpt: final loss %.4f is above --max-loss %.4f\n", final, o.max_loss);
        return 1;
    }
    return ok ? 0 : 1;
}
