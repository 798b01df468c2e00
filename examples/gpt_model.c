/*
 * gpt_model.c — the GPT of gpt_model.h, built from public rlx ops.
 */
#include "gpt_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double ADAM_LR = 3e-4, ADAM_B1 = 0.9, ADAM_B2 = 0.999, ADAM_EPS = 1e-8, LN_EPS = 1e-5;
static const double INIT_STD = 0.02;

enum { P_LN1_G, P_LN1_B, P_QKV_W, P_QKV_B, P_O_W, P_O_B, P_LN2_G, P_LN2_B, P_FC_W, P_FC_B, P_PROJ_W, P_PROJ_B,
       P_PER_LAYER };
static const char *const layer_param[P_PER_LAYER] = {"ln1_g", "ln1_b", "qkv_w", "qkv_b", "o_w",    "o_b",
                                                     "ln2_g", "ln2_b", "fc_w",  "fc_b",  "proj_w", "proj_b"};
/* Index of the first parameter of layer l (wte, wpe come first). */
static int layer_base(int l) { return 2 + P_PER_LAYER * l; }

static void add_param(gpt_layout *lay, const char *name, int64_t d0, int64_t d1)
{
    int i = lay->nparam++;
    snprintf(lay->name[i], sizeof lay->name[i], "%s", name);
    snprintf(lay->m_name[i], sizeof lay->m_name[i], "m.%s", name);
    snprintf(lay->v_name[i], sizeof lay->v_name[i], "v.%s", name);
    lay->rank[i] = d1 ? 2 : 1;
    lay->shape[i][0] = d0;
    lay->shape[i][1] = d1;
    lay->numel[i] = d0 * (d1 ? d1 : 1);
}

rlx_status gpt_layout_make(const gpt_config *cfg, gpt_layout *lay)
{
    memset(lay, 0, sizeof *lay);
    if (cfg->vocab < 1 || cfg->width < 1 || cfg->layers < 1 || cfg->heads < 1 || cfg->seq < 1 || cfg->batch < 1 ||
        cfg->width % cfg->heads != 0 || cfg->layers > GPT_MAX_LAYERS ||
        (cfg->dtype != RLX_F32 && cfg->dtype != RLX_F64) || !(cfg->lr >= 0) ||
        (cfg->compute != 0 && cfg->compute != cfg->dtype &&
         !(cfg->dtype == RLX_F32 && (cfg->compute == RLX_BF16 || cfg->compute == RLX_F16)))) {
        fprintf(stderr,
                "gpt_layout_make: bad config (vocab %d width %d layers %d heads %d seq %d batch %d lr %g dtype %d "
                "compute %d)\n",
                cfg->vocab, cfg->width, cfg->layers, cfg->heads, cfg->seq, cfg->batch, cfg->lr, (int)cfg->dtype,
                (int)cfg->compute);
        return RLX_E_ARG;
    }
    lay->cfg = *cfg;
    if (lay->cfg.compute == 0) /* (0: the zero of an unset field) */
        lay->cfg.compute = cfg->dtype;
    const int64_t w = cfg->width;
    add_param(lay, "wte", cfg->vocab, w);
    add_param(lay, "wpe", cfg->seq, w);
    for (int l = 0; l < cfg->layers; l++) {
        const int64_t shapes[P_PER_LAYER][2] = {{w, 0}, {w, 0}, {3 * w, w}, {3 * w, 0}, {w, w},     {w, 0},
                                                {w, 0}, {w, 0}, {4 * w, w}, {4 * w, 0}, {w, 4 * w}, {w, 0}};
        for (int k = 0; k < P_PER_LAYER; k++) {
            char name[GPT_NAME_CAP];
            snprintf(name, sizeof name, "h%d.%s", l, layer_param[k]);
            add_param(lay, name, shapes[k][0], shapes[k][1]);
        }
    }
    add_param(lay, "lnf_g", w, 0);
    add_param(lay, "lnf_b", w, 0);
    return RLX_OK;
}

/* ------------------------------------------------------------ init */

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double uniform01(uint64_t *s) { return (double)(xorshift(s) >> 11) * 0x1p-53; }

void gpt_init_values(const gpt_layout *lay, int i, uint64_t seed, double *dst)
{
    const char *name = lay->name[i];
    const char *tail = strrchr(name, '.');
    tail = tail ? tail + 1 : name;
    size_t len = strlen(tail);
    bool gamma = len >= 2 && strcmp(tail + len - 2, "_g") == 0;
    if (lay->rank[i] == 1) { /* biases and betas 0, gammas 1 */
        for (int64_t k = 0; k < lay->numel[i]; k++)
            dst[k] = gamma ? 1.0 : 0.0;
        return;
    }
    /* One stream per parameter: seed and index mixed, never zero. */
    uint64_t s = (seed + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)i + 1) * 0xbf58476d1ce4e5b9ull;
    if (!s)
        s = 1;
    for (int k = 0; k < 4; k++)
        xorshift(&s);
    for (int64_t k = 0; k < lay->numel[i]; k++) {
        double u = uniform01(&s), v = uniform01(&s);
        dst[k] = INIT_STD * sqrt(-2 * log(1 - u)) * cos(6.283185307179586 * v);
    }
}

void gpt_make_batch(const gpt_config *cfg, uint64_t seed, int32_t *tokens, int32_t *targets)
{
    uint64_t s = (seed + 7) * 0x94d049bb133111ebull;
    if (!s)
        s = 1;
    int n = cfg->batch * cfg->seq;
    for (int k = 0; k < n; k++)
        tokens[k] = (int32_t)(xorshift(&s) % (uint64_t)cfg->vocab);
    for (int k = 0; k < n; k++) { /* the next token of a fixed map of the token and its position */
        int pos = k % cfg->seq;
        targets[k] = (int32_t)(((int64_t)tokens[k] * 5 + pos + 1) % cfg->vocab);
    }
}

/* ----------------------------------------------------------- model */

/* x @ w^T + b, then act. rlx_linear computes 16-bit operands in f32 (one
 * rounding for the op); the mixed-precision step wants the 16-bit GEMMs
 * themselves (bf16 runs natively), so 16-bit weights take rlx_matmul_t,
 * the bias add and the activation as separate ops, each rounding to the
 * compute dtype. f32/f64 weights keep rlx_linear: the f32 step unchanged. */
static rlx_tensor *linear(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b, rlx_act act)
{
    rlx_dtype dt = rlx_dtype_of(w);
    int64_t shape[3];
    int rank = rlx_shape(x, shape, 3);
    if (rank == 3 && shape[1] < 0 && dt != RLX_BF16 && dt != RLX_F16) {
        /* a dynamic length: [batch*S, in] flattened here, as the static
         * shapes' gradient does itself, so that w's gradient is one GEMM
         * over every token, not one per batch row summed after */
        rlx_tensor *f = rlx_reshape(x, 2, (int64_t[]){-1, shape[2]});
        f = act == RLX_ACT_NONE ? rlx_linear(f, w, b) : rlx_linear_act(f, w, b, act);
        return rlx_reshape(f, 3, (int64_t[]){shape[0], -1, rlx_dim(w, 0)});
    }
    if ((dt != RLX_BF16 && dt != RLX_F16) || rank != 3 || (act != RLX_ACT_NONE && act != RLX_ACT_GELU_TANH))
        return act == RLX_ACT_NONE ? rlx_linear(x, w, b) : rlx_linear_act(x, w, b, act);
    /* [batch, seq, in] flattened: w multiplied once */
    rlx_tensor *y = rlx_matmul_t(rlx_reshape(x, 2, (int64_t[]){shape[1] < 0 ? -1 : shape[0] * shape[1], shape[2]}), w);
    y = rlx_add(y, b);
    if (act == RLX_ACT_GELU_TANH)
        y = rlx_gelu_tanh(y);
    shape[2] = rlx_dim(w, 0);
    return rlx_reshape(y, 3, shape[1] < 0 ? (int64_t[]){shape[0], -1, shape[2]} : shape);
}

/* The attention input of a block: pre-LN, one fused q/k/v linear, split. */
static void block_qkv(const gpt_config *c, rlx_tensor *h, rlx_tensor *const *p, rlx_tensor **q, rlx_tensor **k,
                      rlx_tensor **v)
{
    const int64_t w = c->width;
    rlx_tensor *a = rlx_layer_norm(h, p[P_LN1_G], p[P_LN1_B], LN_EPS);
    rlx_tensor *qkv = linear(a, p[P_QKV_W], p[P_QKV_B], RLX_ACT_NONE);
    *q = rlx_narrow(qkv, 2, 0, w);
    *k = rlx_narrow(qkv, 2, w, w);
    *v = rlx_narrow(qkv, 2, 2 * w, w);
}

/* The rest of a block after attention: output linear, residual, MLP. */
static rlx_tensor *block_out(rlx_tensor *h, rlx_tensor *att, rlx_tensor *const *p)
{
    h = rlx_add(h, linear(att, p[P_O_W], p[P_O_B], RLX_ACT_NONE));
    rlx_tensor *m = rlx_layer_norm(h, p[P_LN2_G], p[P_LN2_B], LN_EPS);
    rlx_tensor *f = linear(m, p[P_FC_W], p[P_FC_B], RLX_ACT_GELU_TANH);
    return rlx_add(h, linear(f, p[P_PROJ_W], p[P_PROJ_B], RLX_ACT_NONE));
}

static rlx_tensor *block(const gpt_config *c, rlx_tensor *h, rlx_tensor *const *p)
{
    rlx_tensor *q, *k, *v;
    block_qkv(c, h, p, &q, &k, &v);
    rlx_tensor *att = rlx_attention(q, k, v, c->heads, c->width / c->heads, RLX_MASK_CAUSAL, 0);
    return block_out(h, att, p);
}

/* The final hidden states mapped to logits [n, vocab] by the tied head. */
static rlx_tensor *head(const gpt_layout *lay, rlx_tensor *h, int64_t n, rlx_tensor *const *params)
{
    const gpt_config *c = &lay->cfg;
    int f = layer_base(c->layers);
    h = rlx_layer_norm(h, params[f], params[f + 1], LN_EPS);
    return rlx_matmul_t(rlx_reshape(h, 2, (int64_t[]){n, c->width}), params[0]);
}

/* The logits of flat tokens [batch*len] with position embeddings pe
 * [len, W]; len -1: a dynamic length (reshapes infer it). */
static rlx_tensor *logits_pe(const gpt_layout *lay, rlx_tensor *tokens, int64_t batch, int64_t len, rlx_tensor *pe,
                             rlx_tensor *const *params)
{
    const gpt_config *c = &lay->cfg;
    rlx_tensor *emb = rlx_index_select(params[0], 0, tokens);
    rlx_tensor *h = rlx_add(rlx_reshape(emb, 3, (int64_t[]){batch, len, c->width}), pe);
    for (int l = 0; l < c->layers; l++)
        h = block(c, h, params + layer_base(l));
    return head(lay, h, len < 0 ? -1 : batch * len, params);
}

rlx_tensor *gpt_logits(const gpt_layout *lay, rlx_tensor *tokens, int64_t batch, int64_t len,
                       rlx_tensor *const *params)
{
    const gpt_config *c = &lay->cfg;
    rlx_tensor *wpe = params[1];
    if (len != c->seq) /* (the full table itself at len == seq: the W10 graph as it was) */
        wpe = rlx_narrow(wpe, 0, 0, len);
    return logits_pe(lay, tokens, batch, len, wpe, params);
}

/* Logits of tokens [batch, S], S static or dynamic: the positions 0..S-1
 * gathered from wpe (their gradient a scatter-add into it). */
static rlx_tensor *logits_2d(const gpt_layout *lay, rlx_tensor *tokens, rlx_tensor *const *params)
{
    rlx_tensor *pe = rlx_index_select(params[1], 0, rlx_arange_of(tokens, 1, RLX_I32));
    rlx_tensor *flat = rlx_reshape(tokens, 1, (int64_t[]){-1});
    return logits_pe(lay, flat, lay->cfg.batch, rlx_dim(tokens, 1), pe, params);
}

/* The step's logits: flat tokens [batch*len] (len from their count) or
 * tokens [batch, S]. */
static rlx_tensor *step_logits(const gpt_layout *lay, rlx_tensor *tokens, rlx_tensor *const *params)
{
    if (rlx_rank(tokens) == 2)
        return logits_2d(lay, tokens, params);
    int64_t n = rlx_numel(tokens), b = lay->cfg.batch;
    return gpt_logits(lay, tokens, b, n >= 0 ? n / b : -1, params);
}

rlx_tensor *gpt_loss(const gpt_layout *lay, rlx_tensor *tokens, rlx_tensor *targets, rlx_tensor *const *params)
{
    rlx_tensor *logits = step_logits(lay, tokens, params);
    if (rlx_rank(targets) == 2)
        targets = rlx_reshape(targets, 1, (int64_t[]){-1});
    return rlx_mean_all(rlx_softmax_cross_entropy_with_logits(logits, targets));
}

/* PyTorch's Adam: m, v moving averages; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps). */
static void adam(rlx_tensor *p, rlx_tensor *g, rlx_tensor *m, rlx_tensor *v, rlx_tensor *step_size,
                 rlx_tensor *bc2_sqrt, rlx_tensor **out)
{
    rlx_tensor *m2 = rlx_add(rlx_mul_s(m, ADAM_B1), rlx_mul_s(g, 1 - ADAM_B1));
    rlx_tensor *v2 = rlx_add(rlx_mul_s(v, ADAM_B2), rlx_mul_s(rlx_mul(g, g), 1 - ADAM_B2));
    rlx_tensor *denom = rlx_add_s(rlx_div(rlx_sqrt(v2), bc2_sqrt), ADAM_EPS);
    out[0] = rlx_sub(p, rlx_mul(step_size, rlx_div(m2, denom)));
    out[1] = m2;
    out[2] = v2;
}

/* The loss of (tokens, targets) and its gradients g[nparam] in the
 * parameters' dtype; mixed precision (gpt_model.h) computes forward and
 * backward over narrow copies of the master weights, the loss reduced in
 * f32, the narrow gradients widened. */
static rlx_status loss_and_grads(const gpt_layout *lay, rlx_tensor *tokens, rlx_tensor *targets,
                                 rlx_tensor *const *p, rlx_tensor **loss, rlx_tensor **g)
{
    const gpt_config *c = &lay->cfg;
    const int np = lay->nparam;
    if (c->compute == c->dtype) {
        *loss = gpt_loss(lay, tokens, targets, p);
        return *loss ? rlx_grad(*loss, p, np, g) : rlx_last_status();
    }
    rlx_tensor *pc[GPT_MAX_PARAMS];
    for (int i = 0; i < np; i++)
        pc[i] = rlx_cast(p[i], c->compute);
    rlx_tensor *logits = step_logits(lay, tokens, pc);
    if (rlx_rank(targets) == 2)
        targets = rlx_reshape(targets, 1, (int64_t[]){-1});
    *loss = rlx_mean_all(rlx_cast(rlx_softmax_cross_entropy_with_logits(logits, targets), c->dtype));
    rlx_status rc = *loss ? rlx_grad(*loss, pc, np, g) : rlx_last_status();
    for (int i = 0; i < np && rc == RLX_OK; i++)
        if (!(g[i] = rlx_cast(g[i], c->dtype)))
            rc = rlx_last_status();
    return rc;
}

/* Adam over every parameter at step `step`: out[0..np) the new
 * parameters, out[np..2np) m, out[2np..3np) v. */
static void adam_all(const gpt_layout *lay, rlx_tensor *step, rlx_tensor *const *p, rlx_tensor *const *g,
                     rlx_tensor *const *m, rlx_tensor *const *v, rlx_tensor **out)
{
    const gpt_config *c = &lay->cfg;
    const int np = lay->nparam;
    rlx_tensor *bc1 = rlx_rsub_s(rlx_pow(rlx_scalar(c->dtype, ADAM_B1), step), 1);
    rlx_tensor *bc2 = rlx_rsub_s(rlx_pow(rlx_scalar(c->dtype, ADAM_B2), step), 1);
    rlx_tensor *step_size = rlx_rdiv_s(bc1, c->lr > 0 ? c->lr : ADAM_LR), *bc2_sqrt = rlx_sqrt(bc2);
    for (int i = 0; i < np; i++) {
        rlx_tensor *upd[3];
        adam(p[i], g[i], m[i], v[i], step_size, bc2_sqrt, upd);
        out[i] = upd[0];
        out[np + i] = upd[1];
        out[2 * np + i] = upd[2];
    }
}

/* The n outputs escaped out of the scope about to end (RLX_OK), or all
 * NULL with the error's status. */
static rlx_status escape_all(rlx_status rc, rlx_tensor **out, int n)
{
    for (int i = 0; i < n && rc == RLX_OK; i++)
        if (!out[i])
            rc = rlx_last_status() != RLX_OK ? rlx_last_status() : RLX_E_INTERNAL;
    for (int i = 0; i < n && rc == RLX_OK; i++)
        if (!rlx_escape(out[i]))
            rc = RLX_E_NOMEM; /* (the ones escaped before leak: out of memory only) */
    if (rc != RLX_OK)
        for (int i = 0; i < n; i++)
            out[i] = NULL;
    return rc;
}

rlx_status gpt_step_graph(const gpt_layout *lay, rlx_tensor *tokens, rlx_tensor *targets, rlx_tensor *step,
                          rlx_tensor *const *p, rlx_tensor *const *m, rlx_tensor *const *v, rlx_tensor **out)
{
    const int np = lay->nparam;
    rlx_tensor *g[GPT_MAX_PARAMS];
    rlx_scope_begin();
    rlx_status rc = loss_and_grads(lay, tokens, targets, p, &out[0], g);
    if (rc == RLX_OK)
        adam_all(lay, step, p, g, m, v, out + 1);
    rc = escape_all(rc, out, 1 + 3 * np);
    rlx_scope_end();
    return rc;
}

rlx_program *gpt_compile_step(const gpt_layout *lay) { return gpt_compile_step_len(lay, lay->cfg.seq); }

rlx_program *gpt_compile_step_len(const gpt_layout *lay, int64_t len)
{
    const gpt_config *c = &lay->cfg;
    const int np = lay->nparam;
    if (len != GPT_DYN_SEQ && (len < 1 || len > c->seq)) {
        fprintf(stderr, "gpt_compile_step_len: length %lld is not in 1..%d\n", (long long)len, c->seq);
        return NULL;
    }
    /* dynamic: tokens and targets [batch, S], S one named symbol */
    const int64_t nsh[2] = {len == GPT_DYN_SEQ ? c->batch : c->batch * len, -2};
    const int rank = len == GPT_DYN_SEQ ? 2 : 1;
    rlx_scope_begin();
    rlx_tensor *tokens = rlx_input("tokens", RLX_I32, rank, nsh), *targets = rlx_input("targets", RLX_I32, rank, nsh);
    rlx_tensor *t = rlx_input("step", c->dtype, 0, NULL);
    rlx_tensor *p[GPT_MAX_PARAMS], *m[GPT_MAX_PARAMS], *v[GPT_MAX_PARAMS], *out[1 + 3 * GPT_MAX_PARAMS];
    for (int i = 0; i < np; i++) {
        p[i] = rlx_input(lay->name[i], c->dtype, lay->rank[i], lay->shape[i]);
        m[i] = rlx_input(lay->m_name[i], c->dtype, lay->rank[i], lay->shape[i]);
        v[i] = rlx_input(lay->v_name[i], c->dtype, lay->rank[i], lay->shape[i]);
    }
    rlx_program *prog = NULL;
    if (gpt_step_graph(lay, tokens, targets, t, p, m, v, out) == RLX_OK) /* outputs land in this scope */
        prog = rlx_compile(out, 1 + 3 * np);
    rlx_scope_end();
    return prog;
}

rlx_status gpt_compile_split(const gpt_layout *lay, rlx_program **grads, rlx_program **update)
{
    const gpt_config *c = &lay->cfg;
    const int np = lay->nparam;
    *grads = NULL;
    if (update)
        *update = NULL;
    const int64_t nsh[1] = {(int64_t)c->batch * c->seq};
    rlx_scope_begin();
    rlx_tensor *tokens = rlx_input("tokens", RLX_I32, 1, nsh), *targets = rlx_input("targets", RLX_I32, 1, nsh);
    rlx_tensor *t = rlx_input("step", c->dtype, 0, NULL);
    rlx_tensor *p[GPT_MAX_PARAMS], *g[GPT_MAX_PARAMS], *m[GPT_MAX_PARAMS], *v[GPT_MAX_PARAMS];
    rlx_tensor *out[1 + 3 * GPT_MAX_PARAMS];
    char gname[GPT_MAX_PARAMS][GPT_NAME_CAP + 2];
    for (int i = 0; i < np; i++) {
        snprintf(gname[i], sizeof gname[i], "g.%s", lay->name[i]);
        p[i] = rlx_input(lay->name[i], c->dtype, lay->rank[i], lay->shape[i]);
        g[i] = rlx_input(gname[i], c->dtype, lay->rank[i], lay->shape[i]);
        m[i] = rlx_input(lay->m_name[i], c->dtype, lay->rank[i], lay->shape[i]);
        v[i] = rlx_input(lay->v_name[i], c->dtype, lay->rank[i], lay->shape[i]);
    }
    rlx_status rc = loss_and_grads(lay, tokens, targets, p, &out[0], out + 1);
    if (rc == RLX_OK && !(*grads = rlx_compile(out, 1 + np)))
        rc = rlx_last_status();
    if (rc == RLX_OK && update) {
        adam_all(lay, t, p, g, m, v, out);
        for (int i = 0; i < 3 * np && rc == RLX_OK; i++)
            if (!out[i])
                rc = rlx_last_status();
        if (rc == RLX_OK && !(*update = rlx_compile(out, 3 * np)))
            rc = rlx_last_status();
    }
    if (rc != RLX_OK) {
        rlx_program_free(*grads);
        *grads = NULL;
    }
    rlx_scope_end();
    return rc;
}

/* ----------------------------------------------------------- state */

/* The state owns its handles: taken out of any open scope (the caller's
 * scope would release them a second time). */
static rlx_tensor *own(rlx_tensor *t) { return t ? rlx_escape(t) : NULL; }

rlx_status gpt_state_init(gpt_state *st, const gpt_layout *lay, uint64_t seed)
{
    memset(st, 0, sizeof *st);
    st->lay = lay;
    st->step = 1;
    const rlx_dtype dt = lay->cfg.dtype;
    int64_t most = 0;
    for (int i = 0; i < lay->nparam; i++)
        most = lay->numel[i] > most ? lay->numel[i] : most;
    double *vals = malloc((size_t)most * sizeof *vals);
    float *f32 = malloc((size_t)most * sizeof *f32);
    if (!vals || !f32) {
        free(vals);
        free(f32);
        return RLX_E_NOMEM;
    }
    rlx_status rc = RLX_OK;
    for (int i = 0; i < lay->nparam && rc == RLX_OK; i++) {
        gpt_init_values(lay, i, seed, vals);
        for (int64_t k = 0; k < lay->numel[i]; k++)
            f32[k] = (float)vals[k];
        st->p[i] = own(rlx_from_data(dt, lay->rank[i], lay->shape[i], dt == RLX_F32 ? (void *)f32 : (void *)vals));
        st->m[i] = own(rlx_zeros(dt, lay->rank[i], lay->shape[i]));
        st->v[i] = own(rlx_zeros(dt, lay->rank[i], lay->shape[i]));
        if (!st->p[i] || !st->m[i] || !st->v[i])
            rc = rlx_last_status() != RLX_OK ? rlx_last_status() : RLX_E_NOMEM;
    }
    free(vals);
    free(f32);
    if (rc != RLX_OK)
        gpt_state_free(st);
    return rc;
}

void gpt_state_free(gpt_state *st)
{
    for (int i = 0; i < GPT_MAX_PARAMS; i++) {
        rlx_release(st->p[i]);
        rlx_release(st->m[i]);
        rlx_release(st->v[i]);
        st->p[i] = st->m[i] = st->v[i] = NULL;
    }
}

rlx_status gpt_step(rlx_program *prog, gpt_state *st, rlx_tensor *tokens, rlx_tensor *targets, double *loss)
{
    const gpt_layout *lay = st->lay;
    const int np = lay->nparam;
    rlx_binding bind[3 + 3 * GPT_MAX_PARAMS];
    rlx_tensor *out[1 + 3 * GPT_MAX_PARAMS];
    rlx_tensor *t = own(rlx_scalar(lay->cfg.dtype, (double)st->step));
    /* (a donating run takes a reference per binding: the caller keeps its own) */
    bind[0] = (rlx_binding){"tokens", st->copy ? tokens : own(rlx_retain(tokens))};
    bind[1] = (rlx_binding){"targets", st->copy ? targets : own(rlx_retain(targets))};
    bind[2] = (rlx_binding){"step", t};
    for (int i = 0; i < np; i++) {
        bind[3 + i] = (rlx_binding){lay->name[i], st->p[i]};
        bind[3 + np + i] = (rlx_binding){lay->m_name[i], st->m[i]};
        bind[3 + 2 * np + i] = (rlx_binding){lay->v_name[i], st->v[i]};
    }
    /* donating: the parameters and moments are updated over their own
     * buffers (the state's handles are the run's to release) */
    rlx_status rc;
    if (st->copy) {
        rc = rlx_program_run(prog, bind, 3 + 3 * np, out);
        rlx_release(t);
    } else {
        rc = rlx_program_run_donate(prog, bind, 3 + 3 * np, out);
        for (int i = 0; i < np; i++)
            st->p[i] = st->m[i] = st->v[i] = NULL;
    }
    if (rc != RLX_OK)
        return rc;
    for (int i = 0; i < 1 + 3 * np; i++)
        own(out[i]);
    for (int i = 0; i < np; i++) {
        rlx_release(st->p[i]);
        rlx_release(st->m[i]);
        rlx_release(st->v[i]);
        st->p[i] = out[1 + i];
        st->m[i] = out[1 + np + i];
        st->v[i] = out[1 + 2 * np + i];
    }
    st->step++;
    if (loss && (rc = rlx_item(out[0], loss)) != RLX_OK)
        *loss = NAN;
    rlx_release(out[0]);
    return rc;
}

/* --------------------------------------------------------- decoding */

/* One block for one token at position pos: its k/v written into the cache
 * at pos (where over a one-hot row: exact), its query attending over the
 * keys at positions <= pos. */
static rlx_tensor *block_decode(const gpt_config *c, rlx_tensor *h, rlx_tensor *const *p, rlx_tensor *at_pos,
                                rlx_tensor *seen, rlx_tensor *kc, rlx_tensor *vc, rlx_tensor **kc2,
                                rlx_tensor **vc2)
{
    rlx_tensor *q, *k, *v;
    block_qkv(c, h, p, &q, &k, &v);
    *kc2 = rlx_where(at_pos, k, kc);
    *vc2 = rlx_where(at_pos, v, vc);
    rlx_tensor *att = rlx_attention_masked(q, *kc2, *vc2, seen, c->heads, c->width / c->heads);
    return block_out(h, att, p);
}

rlx_status gpt_decode_graph(const gpt_layout *lay, rlx_tensor *token, rlx_tensor *pos, rlx_tensor *const *p,
                            rlx_tensor *const *k, rlx_tensor *const *v, rlx_tensor **out)
{
    const gpt_config *c = &lay->cfg;
    const int nout = 1 + 2 * c->layers;
    rlx_status rc = RLX_OK;
    rlx_scope_begin();
    rlx_tensor *slots = rlx_arange(RLX_I32, 0, c->seq, 1);
    rlx_tensor *at_pos = rlx_reshape(rlx_eq(slots, pos), 3, (int64_t[]){1, c->seq, 1});
    rlx_tensor *seen = rlx_reshape(rlx_le(slots, pos), 2, (int64_t[]){1, c->seq});
    rlx_tensor *x = rlx_add(rlx_index_select(p[0], 0, token), rlx_index_select(p[1], 0, pos));
    rlx_tensor *h = rlx_reshape(x, 3, (int64_t[]){1, 1, c->width});
    for (int l = 0; l < c->layers; l++)
        h = block_decode(c, h, p + layer_base(l), at_pos, seen, k[l], v[l], &out[1 + l], &out[1 + c->layers + l]);
    out[0] = head(lay, h, 1, p);
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

static const char *cache_name(char *buf, size_t cap, char kind, int l)
{
    snprintf(buf, cap, "%c.cache%d", kind, l);
    return buf;
}

rlx_status gpt_decoder_init(gpt_decoder *d, const gpt_layout *lay)
{
    const gpt_config *c = &lay->cfg;
    memset(d, 0, sizeof *d);
    d->lay = lay;
    const int64_t one[1] = {1}, csh[3] = {1, c->seq, c->width};
    rlx_status rc = RLX_OK;
    rlx_scope_begin();
    rlx_tensor *token = rlx_input("token", RLX_I32, 1, one), *pos = rlx_input("pos", RLX_I32, 1, one);
    rlx_tensor *p[GPT_MAX_PARAMS], *k[GPT_MAX_LAYERS], *v[GPT_MAX_LAYERS], *out[1 + 2 * GPT_MAX_LAYERS];
    for (int i = 0; i < lay->nparam; i++)
        p[i] = rlx_input(lay->name[i], c->dtype, lay->rank[i], lay->shape[i]);
    for (int l = 0; l < c->layers; l++) {
        char nk[16], nv[16];
        k[l] = rlx_input(cache_name(nk, sizeof nk, 'k', l), c->dtype, 3, csh);
        v[l] = rlx_input(cache_name(nv, sizeof nv, 'v', l), c->dtype, 3, csh);
    }
    rc = gpt_decode_graph(lay, token, pos, p, k, v, out);
    if (rc == RLX_OK && !(d->prog = rlx_compile(out, 1 + 2 * c->layers)))
        rc = rlx_last_status() != RLX_OK ? rlx_last_status() : RLX_E_INTERNAL;
    rlx_scope_end();
    for (int l = 0; l < c->layers && rc == RLX_OK; l++) {
        d->k[l] = own(rlx_zeros(c->dtype, 3, csh));
        d->v[l] = own(rlx_zeros(c->dtype, 3, csh));
        if (!d->k[l] || !d->v[l])
            rc = rlx_last_status() != RLX_OK ? rlx_last_status() : RLX_E_NOMEM;
    }
    if (rc != RLX_OK)
        gpt_decoder_free(d);
    return rc;
}

void gpt_decoder_free(gpt_decoder *d)
{
    rlx_program_free(d->prog);
    d->prog = NULL;
    for (int l = 0; l < GPT_MAX_LAYERS; l++) {
        rlx_release(d->k[l]);
        rlx_release(d->v[l]);
        d->k[l] = d->v[l] = NULL;
    }
}

rlx_status gpt_decode_step(gpt_decoder *d, rlx_tensor *const *params, int32_t token, float *logits)
{
    const gpt_layout *lay = d->lay;
    const gpt_config *c = &lay->cfg;
    const int L = c->layers;
    if (d->pos < 0 || d->pos >= c->seq || token < 0 || token >= c->vocab) {
        fprintf(stderr, "gpt_decode_step: position %lld or token %d out of range\n", (long long)d->pos, token);
        return RLX_E_ARG;
    }
    const int64_t one[1] = {1};
    const int32_t posv = (int32_t)d->pos;
    rlx_tensor *tok = own(rlx_from_data(RLX_I32, 1, one, &token)), *pos = own(rlx_from_data(RLX_I32, 1, one, &posv));
    rlx_binding bind[2 + GPT_MAX_PARAMS + 2 * GPT_MAX_LAYERS];
    char names[2 * GPT_MAX_LAYERS][16];
    int nb = 0;
    bind[nb++] = (rlx_binding){"token", tok};
    bind[nb++] = (rlx_binding){"pos", pos};
    for (int i = 0; i < lay->nparam; i++)
        bind[nb++] = (rlx_binding){lay->name[i], params[i]};
    for (int l = 0; l < L; l++) {
        bind[nb++] = (rlx_binding){cache_name(names[l], sizeof names[l], 'k', l), d->k[l]};
        bind[nb++] = (rlx_binding){cache_name(names[L + l], sizeof names[L + l], 'v', l), d->v[l]};
    }
    rlx_tensor *out[1 + 2 * GPT_MAX_LAYERS];
    rlx_status rc = tok && pos ? rlx_program_run(d->prog, bind, nb, out) : rlx_last_status();
    rlx_release(tok);
    rlx_release(pos);
    if (rc != RLX_OK)
        return rc;
    for (int i = 0; i < 1 + 2 * L; i++)
        own(out[i]);
    for (int l = 0; l < L; l++) {
        rlx_release(d->k[l]);
        rlx_release(d->v[l]);
        d->k[l] = out[1 + l];
        d->v[l] = out[1 + L + l];
    }
    d->pos++;
    if (logits)
        rc = rlx_read_f32(out[0], logits, (size_t)c->vocab);
    rlx_release(out[0]);
    return rc;
}
