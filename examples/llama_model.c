/*
 * llama_model.c — the Llama decoder of llama_model.h, built from public rlx
 * ops: the full forward (the reference) and the KV-cache decode step, one
 * compiled program whose caches have a dynamic length.
 */
#include "llama_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double NORM_EPS = 1e-5, ROPE_THETA = 10000.0;

int llama_kv_dim(const llama_config *c) { return c->dim / c->heads * c->kv_heads; }

static int head_dim(const llama_config *c) { return c->dim / c->heads; }

/* ------------------------------------------------------------ weights */

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* One stream per weight (seed and index mixed, never zero), uniform in
 * [center - half, center + half). */
static void fill_uniform(double *dst, int64_t n, uint64_t seed, int index, double center, double half)
{
    uint64_t s = (seed + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)index + 1) * 0xbf58476d1ce4e5b9ull;
    if (!s)
        s = 1;
    for (int k = 0; k < 4; k++)
        xorshift(&s);
    for (int64_t k = 0; k < n; k++)
        dst[k] = center + half * (2.0 * (double)(xorshift(&s) >> 11) * 0x1p-53 - 1.0);
}

/* A realized tensor of m's dtype from doubles, taken out of any open scope
 * (the model owns it). */
static rlx_tensor *make(const llama_config *c, int rank, const int64_t *shape, const double *vals, void *scratch)
{
    const void *src = vals;
    if (c->dtype == RLX_F32) {
        int64_t n = 1;
        for (int d = 0; d < rank; d++)
            n *= shape[d];
        float *f = scratch;
        for (int64_t k = 0; k < n; k++)
            f[k] = (float)vals[k];
        src = f;
    }
    rlx_tensor *t = rlx_from_data(c->dtype, rank, shape, src);
    return t ? rlx_escape(t) : NULL;
}

static bool config_ok(const llama_config *c)
{
    if (c->dim < 1 || c->layers < 1 || c->heads < 1 || c->kv_heads < 1 || c->hidden < 1 || c->vocab < 1 ||
        c->max_seq < 1 || c->layers > LLAMA_MAX_LAYERS || c->dim % c->heads || head_dim(c) % 2 ||
        c->heads % c->kv_heads || (c->dtype != RLX_F32 && c->dtype != RLX_F64)) {
        fprintf(stderr,
                "llama_init: bad config (dim %d layers %d heads %d kv_heads %d hidden %d vocab %d max_seq %d "
                "dtype %d)\n",
                c->dim, c->layers, c->heads, c->kv_heads, c->hidden, c->vocab, c->max_seq, (int)c->dtype);
        return false;
    }
    return true;
}

/* The weight slots of m in a fixed order (the seed streams follow it). */
typedef struct {
    rlx_tensor **slot;
    int64_t rows, cols; /* cols 0: a norm gain [rows] */
} wslot;

static int weight_slots(llama_model *m, wslot *ws)
{
    const llama_config *c = &m->cfg;
    const int64_t D = c->dim, KV = llama_kv_dim(c), H = c->hidden;
    int n = 0;
    ws[n++] = (wslot){&m->tok_emb, c->vocab, D};
    for (int l = 0; l < c->layers; l++) {
        ws[n++] = (wslot){&m->attn_norm[l], D, 0};
        ws[n++] = (wslot){&m->wq[l], D, D};
        ws[n++] = (wslot){&m->wk[l], KV, D};
        ws[n++] = (wslot){&m->wv[l], KV, D};
        ws[n++] = (wslot){&m->wo[l], D, D};
        ws[n++] = (wslot){&m->ffn_norm[l], D, 0};
        ws[n++] = (wslot){&m->w1[l], H, D};
        ws[n++] = (wslot){&m->w2[l], D, H};
        ws[n++] = (wslot){&m->w3[l], H, D};
    }
    ws[n++] = (wslot){&m->norm, D, 0};
    return n;
}

enum { MAX_SLOTS = 2 + 9 * LLAMA_MAX_LAYERS };

rlx_status llama_init(llama_model *m, const llama_config *cfg, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    if (!config_ok(cfg))
        return RLX_E_ARG;
    m->cfg = *cfg;
    const llama_config *c = &m->cfg;
    wslot ws[MAX_SLOTS];
    int n = weight_slots(m, ws);
    int64_t most = (int64_t)c->max_seq * head_dim(c) / 2;
    for (int i = 0; i < n; i++)
        most = ws[i].rows * (ws[i].cols ? ws[i].cols : 1) > most ? ws[i].rows * (ws[i].cols ? ws[i].cols : 1) : most;
    double *vals = malloc((size_t)most * sizeof *vals);
    float *f32 = malloc((size_t)most * sizeof *f32);
    rlx_status rc = vals && f32 ? RLX_OK : RLX_E_NOMEM;
    for (int i = 0; i < n && rc == RLX_OK; i++) {
        const wslot *w = &ws[i];
        if (w->cols == 0) { /* a norm gain near 1 */
            fill_uniform(vals, w->rows, seed, i, 1.0, 0.1);
            *w->slot = make(c, 1, (int64_t[]){w->rows}, vals, f32);
        } else { /* variance 1 for the embedding, 1/in for a linear; U(-a, a) has variance a^2/3 */
            double var = w->slot == &m->tok_emb ? 1.0 : 1.0 / (double)w->cols;
            fill_uniform(vals, w->rows * w->cols, seed, i, 0.0, sqrt(3.0 * var));
            *w->slot = make(c, 2, (int64_t[]){w->rows, w->cols}, vals, f32);
        }
        if (!*w->slot)
            rc = rlx_last_status() != RLX_OK ? rlx_last_status() : RLX_E_NOMEM;
    }
    /* RoPE tables: position p, pair i turns by p * theta^(-2i/head_dim). */
    const int64_t half = head_dim(c) / 2, ts[2] = {c->max_seq, half};
    for (int which = 0; which < 2 && rc == RLX_OK; which++) {
        for (int64_t p = 0; p < c->max_seq; p++)
            for (int64_t i = 0; i < half; i++) {
                double a = (double)p * pow(ROPE_THETA, -2.0 * (double)i / (double)head_dim(c));
                vals[p * half + i] = which ? sin(a) : cos(a);
            }
        rlx_tensor **dst = which ? &m->rope_sin : &m->rope_cos;
        if (!(*dst = make(c, 2, ts, vals, f32)))
            rc = rlx_last_status() != RLX_OK ? rlx_last_status() : RLX_E_NOMEM;
    }
    free(vals);
    free(f32);
    if (rc != RLX_OK)
        llama_free(m);
    return rc;
}

void llama_free(llama_model *m)
{
    wslot ws[MAX_SLOTS];
    int n = weight_slots(m, ws);
    for (int i = 0; i < n; i++) {
        rlx_release(*ws[i].slot);
        *ws[i].slot = NULL;
    }
    rlx_release(m->rope_cos);
    rlx_release(m->rope_sin);
    m->rope_cos = m->rope_sin = NULL;
}

int64_t llama_weights_each(const llama_model *m, void (*fn)(const void *data, int64_t bytes, void *ctx), void *ctx)
{
    wslot ws[MAX_SLOTS];
    llama_model view = *m; /* (slots point into a copy: m stays const) */
    int n = weight_slots(&view, ws);
    int64_t total = 0, es = m->cfg.dtype == RLX_F32 ? 4 : 8;
    for (int i = 0; i < n; i++) {
        int64_t bytes = rlx_numel(*ws[i].slot) * es;
        fn(rlx_data(*ws[i].slot), bytes, ctx);
        total += bytes;
    }
    return total;
}

/* ------------------------------------------------------------- model */

static rlx_tensor *rope(const llama_model *m, rlx_tensor *x, rlx_tensor *pos)
{
    const rlx_rope_opts o = {.positions = pos, .interleaved = true};
    return rlx_rope_ex(x, m->rope_cos, m->rope_sin, head_dim(&m->cfg), &o);
}

/* The attention inputs of layer l over h [1, S, D]: q [1, S, D], k and v
 * [1, S, kv_dim], q and k rotated (positions pos, or 0..S-1 when NULL). */
static void attn_in(const llama_model *m, int l, rlx_tensor *h, rlx_tensor *pos, rlx_tensor **q, rlx_tensor **k,
                    rlx_tensor **v)
{
    rlx_tensor *x = rlx_rms_norm(h, m->attn_norm[l], NORM_EPS);
    *q = rope(m, rlx_linear(x, m->wq[l], NULL), pos);
    *k = rope(m, rlx_linear(x, m->wk[l], NULL), pos);
    *v = rlx_linear(x, m->wv[l], NULL);
}

/* Causal grouped-query attention (aligned bottom right: a query of the
 * decode step sees every key), with keep (NULL, or bool broadcast to the
 * scores) dropping the keys it marks false; over the keys cat(k, kn) and
 * values cat(v, vn) when kn is not NULL, read in place (rlx_attention_kv:
 * the decode step copies no cache). */
static rlx_tensor *attend(const llama_model *m, rlx_tensor *q, rlx_tensor *k, rlx_tensor *v, rlx_tensor *kn,
                          rlx_tensor *vn, rlx_tensor *keep)
{
    const rlx_attention_opts o = {.num_kv_heads = m->cfg.kv_heads, .mask = RLX_MASK_CAUSAL, .attn_mask = keep};
    if (kn)
        return rlx_attention_kv(q, k, v, kn, vn, m->cfg.heads, head_dim(&m->cfg), &o);
    return rlx_attention_ex(q, k, v, m->cfg.heads, head_dim(&m->cfg), &o);
}

/* The keys the decode step attends to, [1, 1, 1, L + 1] bool, from the
 * past keys kp [1, L, kv_dim] and the new row kn [1, 1, kv_dim]: the past
 * rows j < pos (a caller may bind more rows than it has filled) and the
 * new row j = L. Row indices are an exclusive running sum of ones over the
 * dynamic axis and L + 1 their sum (there is no arange of a dynamic
 * length); all elementwise over one shape, so one plan serves every L.
 * (The cat here is of the [.., 1] columns of ones: a few bytes.) */
static rlx_tensor *keep_mask(rlx_tensor *kp, rlx_tensor *kn, rlx_tensor *pos)
{
    rlx_tensor *ones[2] = {rlx_ones_like(rlx_narrow(kp, 2, 0, 1)), rlx_ones_like(rlx_narrow(kn, 2, 0, 1))};
    rlx_tensor *one = rlx_cat(ones, 2, 1); /* [1, L + 1, 1] */
    rlx_tensor *row = rlx_cumsum(one, 1, true), *last = rlx_sub_s(rlx_sum(one, (int[]){1}, 1, true), 1);
    rlx_tensor *keep = rlx_logical_or(rlx_lt(row, rlx_cast(pos, rlx_dtype_of(kp))), rlx_ge(row, last));
    return rlx_reshape(keep, 4, (int64_t[]){1, 1, 1, -1});
}

/* The rest of layer l after attention: output linear, residual, SwiGLU
 * w2(silu(w1 x) * w3 x), residual. */
static rlx_tensor *layer_out(const llama_model *m, int l, rlx_tensor *h, rlx_tensor *att)
{
    h = rlx_add(h, rlx_linear(att, m->wo[l], NULL));
    rlx_tensor *x = rlx_rms_norm(h, m->ffn_norm[l], NORM_EPS);
    rlx_tensor *g = rlx_mul(rlx_silu(rlx_linear(x, m->w1[l], NULL)), rlx_linear(x, m->w3[l], NULL));
    return rlx_add(h, rlx_linear(g, m->w2[l], NULL));
}

/* The embeddings [1, S, D] of token ids [1, S]. */
static rlx_tensor *embed(const llama_model *m, rlx_tensor *tokens, int64_t s)
{
    rlx_tensor *e = rlx_index_select(m->tok_emb, 0, rlx_reshape(tokens, 1, (int64_t[]){s}));
    return rlx_reshape(e, 3, (int64_t[]){1, s, m->cfg.dim});
}

/* Final norm and the tied classifier: [1, S, D] -> [S, V]. */
static rlx_tensor *classify(const llama_model *m, rlx_tensor *h, int64_t s)
{
    rlx_tensor *x = rlx_rms_norm(h, m->norm, NORM_EPS);
    return rlx_matmul_t(rlx_reshape(x, 2, (int64_t[]){s, m->cfg.dim}), m->tok_emb);
}

rlx_tensor *llama_forward(const llama_model *m, rlx_tensor *tokens)
{
    int64_t s = rlx_dim(tokens, 1);
    if (s < 0)
        return NULL; /* (a NULL or rank-0 token tensor: rlx_dim's error; a dynamic length is not served) */
    rlx_scope_begin();
    rlx_tensor *h = embed(m, tokens, s);
    for (int l = 0; l < m->cfg.layers; l++) {
        rlx_tensor *q, *k, *v;
        attn_in(m, l, h, NULL, &q, &k, &v);
        h = layer_out(m, l, h, attend(m, q, k, v, NULL, NULL, NULL));
    }
    rlx_tensor *logits = classify(m, h, s);
    if (logits)
        rlx_escape(logits);
    rlx_scope_end();
    return logits;
}

/* The decode step; concat: over cat(past, new) copied per layer (the
 * design before rlx_attention_kv, kept for comparisons). */
static rlx_status decode_graph(const llama_model *m, rlx_tensor *token, rlx_tensor *pos, rlx_tensor *const *k,
                               rlx_tensor *const *v, rlx_tensor **out, bool concat)
{
    const llama_config *c = &m->cfg;
    const int nl = c->layers, nout = 1 + 2 * nl;
    const int64_t row[2] = {1, llama_kv_dim(c)};
    rlx_status rc = RLX_OK;
    rlx_scope_begin();
    rlx_tensor *h = embed(m, token, 1), *keep = NULL;
    for (int l = 0; l < nl; l++) {
        rlx_tensor *q, *kn, *vn;
        attn_in(m, l, h, pos, &q, &kn, &vn);
        /* over the past rows and the new one, L + 1 keys */
        if (!keep) /* (one mask for every layer) */
            keep = keep_mask(k[l], kn, pos);
        if (concat) {
            rlx_tensor *ks[2] = {k[l], kn}, *vs[2] = {v[l], vn};
            h = layer_out(m, l, h, attend(m, q, rlx_cat(ks, 2, 1), rlx_cat(vs, 2, 1), NULL, NULL, keep));
        } else {
            h = layer_out(m, l, h, attend(m, q, k[l], v[l], kn, vn, keep));
        }
        out[1 + l] = rlx_reshape(kn, 2, row);
        out[1 + nl + l] = rlx_reshape(vn, 2, row);
    }
    out[0] = classify(m, h, 1);
    for (int i = 0; i < nout && rc == RLX_OK; i++)
        if (!out[i])
            rc = rlx_last_status() != RLX_OK ? rlx_last_status() : RLX_E_INTERNAL;
    for (int i = 0; i < nout && rc == RLX_OK; i++)
        if (!rlx_escape(out[i]))
            rc = RLX_E_NOMEM;
    if (rc != RLX_OK)
        for (int i = 0; i < nout; i++)
            out[i] = NULL;
    rlx_scope_end();
    return rc;
}

rlx_status llama_decode_graph(const llama_model *m, rlx_tensor *token, rlx_tensor *pos, rlx_tensor *const *k,
                              rlx_tensor *const *v, rlx_tensor **out)
{
    return decode_graph(m, token, pos, k, v, out, false);
}

/* ---------------------------------------------------------- decoding */

const char *llama_cache_name(char *buf, int cap, char kind, int layer)
{
    snprintf(buf, (size_t)cap, "%c%d", kind, layer);
    return buf;
}

/* The symbol of the caches' length: every "k<l>" and "v<l>" is one L. */
enum { SYM_L = -2 };

static rlx_status decoder_init(llama_decoder *d, const llama_model *m, bool concat)
{
    const llama_config *c = &m->cfg;
    const int nl = c->layers;
    memset(d, 0, sizeof *d);
    d->m = m;
    d->bucket = 1;
    const int64_t tsh[2] = {1, 1}, psh[1] = {1}, csh[3] = {1, SYM_L, llama_kv_dim(c)};
    rlx_status rc;
    rlx_scope_begin();
    rlx_tensor *token = rlx_input("token", RLX_I32, 2, tsh), *pos = rlx_input("pos", RLX_I32, 1, psh);
    rlx_tensor *k[LLAMA_MAX_LAYERS], *v[LLAMA_MAX_LAYERS], *out[1 + 2 * LLAMA_MAX_LAYERS];
    for (int l = 0; l < nl; l++) {
        char nk[16], nv[16];
        k[l] = rlx_input(llama_cache_name(nk, sizeof nk, 'k', l), c->dtype, 3, csh);
        v[l] = rlx_input(llama_cache_name(nv, sizeof nv, 'v', l), c->dtype, 3, csh);
    }
    rc = decode_graph(m, token, pos, k, v, out, concat);
    if (rc == RLX_OK && !(d->prog = rlx_compile(out, 1 + 2 * nl)))
        rc = rlx_last_status() != RLX_OK ? rlx_last_status() : RLX_E_INTERNAL;
    rlx_scope_end(); /* (the outputs escaped into this scope: the program holds the graph) */
    size_t bytes = (size_t)c->max_seq * (size_t)llama_kv_dim(c) * (c->dtype == RLX_F32 ? 4 : 8);
    for (int l = 0; l < nl && rc == RLX_OK; l++)
        /* zeroed: rows past a sequence's end may be bound (masked) and must be finite */
        if (!(d->kc[l] = calloc(1, bytes)) || !(d->vc[l] = calloc(1, bytes)))
            rc = RLX_E_NOMEM;
    if (rc != RLX_OK)
        llama_decoder_free(d);
    return rc;
}

rlx_status llama_decoder_init(llama_decoder *d, const llama_model *m) { return decoder_init(d, m, false); }

rlx_status llama_decoder_init_concat(llama_decoder *d, const llama_model *m) { return decoder_init(d, m, true); }

void llama_decoder_free(llama_decoder *d)
{
    rlx_program_free(d->prog);
    d->prog = NULL;
    for (int l = 0; l < LLAMA_MAX_LAYERS; l++) {
        free(d->kc[l]);
        free(d->vc[l]);
        d->kc[l] = d->vc[l] = NULL;
    }
}

/* One step; the logits read into logits (NULL: not read) as f32 or f64. */
static rlx_status decode(llama_decoder *d, int32_t token, void *logits, bool f64)
{
    const llama_config *c = &d->m->cfg;
    const int nl = c->layers;
    const int64_t kvd = llama_kv_dim(c), es = c->dtype == RLX_F32 ? 4 : 8, L = d->pos;
    if (L < 0 || L >= c->max_seq || token < 0 || token >= c->vocab) {
        fprintf(stderr, "llama_decode_step: position %lld or token %d out of range\n", (long long)L, token);
        return RLX_E_ARG;
    }
    const int32_t posv = (int32_t)L;
    /* The rows bound: L, or L + 1 rounded up to the bucket (the rows from
     * L on are masked), so that few distinct lengths are ever planned. */
    int64_t rows = L;
    if (d->bucket > 1) {
        rows = (L + 1 + d->bucket - 1) / d->bucket * d->bucket;
        rows = rows < c->max_seq ? rows : c->max_seq;
    }
    const int64_t tsh[2] = {1, 1}, csh[3] = {1, rows, kvd};
    rlx_binding bind[2 + 2 * LLAMA_MAX_LAYERS];
    char names[2 * LLAMA_MAX_LAYERS][16];
    rlx_tensor *out[1 + 2 * LLAMA_MAX_LAYERS];
    int nb = 0;
    rlx_scope_begin();
    bind[nb++] = (rlx_binding){"token", rlx_from_data(RLX_I32, 2, tsh, &token)};
    bind[nb++] = (rlx_binding){"pos", rlx_from_data(RLX_I32, 1, tsh, &posv)};
    /* The first L rows of each cache, in place. */
    for (int l = 0; l < nl; l++) {
        bind[nb++] = (rlx_binding){llama_cache_name(names[l], 16, 'k', l),
                                   rlx_from_blob(c->dtype, 3, csh, d->kc[l], NULL, NULL)};
        bind[nb++] = (rlx_binding){llama_cache_name(names[nl + l], 16, 'v', l),
                                   rlx_from_blob(c->dtype, 3, csh, d->vc[l], NULL, NULL)};
    }
    rlx_status rc = RLX_OK;
    for (int i = 0; i < nb && rc == RLX_OK; i++)
        if (!bind[i].value)
            rc = rlx_last_status();
    if (rc == RLX_OK)
        rc = rlx_program_run(d->prog, bind, nb, out);
    /* Append the new rows (the run is over: nothing reads the views now). */
    for (int l = 0; l < nl && rc == RLX_OK; l++) {
        rc = rlx_read(out[1 + l], (char *)d->kc[l] + L * kvd * es, (size_t)(kvd * es));
        if (rc == RLX_OK)
            rc = rlx_read(out[1 + nl + l], (char *)d->vc[l] + L * kvd * es, (size_t)(kvd * es));
    }
    if (rc == RLX_OK && logits)
        rc = f64 ? rlx_read_f64(out[0], logits, (size_t)c->vocab) : rlx_read_f32(out[0], logits, (size_t)c->vocab);
    if (rc == RLX_OK)
        d->pos++;
    rlx_scope_end();
    return rc;
}

rlx_status llama_decode_step(llama_decoder *d, int32_t token, float *logits)
{
    return decode(d, token, logits, false);
}

rlx_status llama_decode_step_f64(llama_decoder *d, int32_t token, double *logits)
{
    return decode(d, token, logits, true);
}
