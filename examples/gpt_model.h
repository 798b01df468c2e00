/*
 * gpt_model.h — a small GPT and its whole training step, in the public C
 * API only, shared by bench/bench_w10.c, tests/test_gpt_step.c and
 * examples.
 *
 * The model: token + position embeddings (index_select of wte, wpe), pre-
 * LayerNorm blocks (one fused q/k/v linear split with narrow, causal
 * multi-head rlx_attention, output linear, residual; a tanh-GELU MLP of 4x
 * width, residual), a final layer_norm and the tied LM head
 * (logits = h @ wte^T), softmax cross-entropy with integer targets, mean
 * over the batch*seq tokens. Adam (beta1 0.9, beta2 0.999, eps 1e-8, lr
 * 3e-4, PyTorch's bias correction) is written with ops, so the forward,
 * rlx_grad backward and update are one program, compiled once.
 *
 * Program inputs: "tokens", "targets" (i32 [batch*seq]), "step" (rank 0,
 * the model's dtype: the Adam step number t >= 1), and per parameter P its
 * value "P", Adam moments "m.P" and "v.P". Outputs: the mean loss, then
 * the updated parameters, m and v in layout order; gpt_step binds them as
 * the next run's inputs, so the state never leaves the library.
 *
 * Parameters (layout order): wte [V,W], wpe [S,W], then per layer l
 * "h<l>.ln1_g", ".ln1_b" [W], ".qkv_w" [3W,W], ".qkv_b" [3W], ".o_w" [W,W],
 * ".o_b" [W], ".ln2_g", ".ln2_b" [W], ".fc_w" [4W,W], ".fc_b" [4W],
 * ".proj_w" [W,4W], ".proj_b" [W]; then "lnf_g", "lnf_b" [W].
 * Initial values (gpt_init_values): weights N(0, 0.02^2) from a seeded
 * xorshift64 + Box-Muller stream, biases and betas 0, gammas 1.
 *
 * Mixed precision (cfg.compute = RLX_BF16 or RLX_F16, dtype f32): the
 * master weights, Adam moments, step number, loss and update stay f32,
 * because Adam's small increments (lr 3e-4 times ~1) vanish when added to a
 * weight with 8 significant bits, and its v (squared gradients) spans more
 * range than 16-bit mantissas resolve. Each step casts the weights to the
 * compute dtype, runs the forward (embeddings, matmuls, attention,
 * layer_norm, GELU, cross-entropy per token) and the rlx_grad backward in
 * it, so activations and gradients are 16-bit; the linears are written as
 * rlx_matmul_t + bias there (rlx_linear computes 16-bit operands in f32),
 * so their GEMMs run natively in bf16 (rlx_attention still computes in f32
 * inside and rounds its result); the per-token losses are cast to f32
 * before the mean; the 16-bit gradients (rlx_grad returns them in the
 * parameter's dtype) are cast to f32 for the update. bf16 keeps f32's exponent range, so no loss
 * scaling is needed; f16 has no loss scaling here either (tiny gradients
 * may flush to zero). Program inputs and outputs are those of f32.
 *
 * Decoding (gpt_decoder): one compiled program runs one token through the
 * blocks against a key/value cache per layer of fixed capacity [1, seq, W]:
 * the token's k/v are written at its position and its query attends over
 * the cached positions 0..pos (rlx_attention_masked), so every step has
 * the same shapes and the program is compiled once. (A cache that grows by
 * concatenation would change shapes every token and plan every token.)
 */
#ifndef GPT_MODEL_H
#define GPT_MODEL_H

#include <stdint.h>

#include "rlx.h"

enum { GPT_MAX_LAYERS = 16, GPT_MAX_PARAMS = 4 + 12 * GPT_MAX_LAYERS, GPT_NAME_CAP = 24 };

typedef struct {
    int vocab, width, layers, heads, seq, batch;
    rlx_dtype dtype;   /* RLX_F32 or RLX_F64: parameters, Adam state, loss */
    rlx_dtype compute; /* 0 or dtype: the same; RLX_BF16 or RLX_F16 with f32:
                        * mixed precision (above) */
    double lr;       /* Adam learning rate; 0 means 3e-4 */
} gpt_config;

typedef struct {
    gpt_config cfg;
    int nparam;
    char name[GPT_MAX_PARAMS][GPT_NAME_CAP];
    char m_name[GPT_MAX_PARAMS][GPT_NAME_CAP + 2];
    char v_name[GPT_MAX_PARAMS][GPT_NAME_CAP + 2];
    int rank[GPT_MAX_PARAMS];
    int64_t shape[GPT_MAX_PARAMS][2];
    int64_t numel[GPT_MAX_PARAMS];
} gpt_layout;

/* The Adam state of a run: parameters, moments, the next step number. It
 * owns its handles (taken out of any open rlx scope); gpt_state_free
 * releases them. */
typedef struct {
    const gpt_layout *lay;
    rlx_tensor *p[GPT_MAX_PARAMS], *m[GPT_MAX_PARAMS], *v[GPT_MAX_PARAMS];
    int64_t step;
    bool copy; /* gpt_step runs with rlx_program_run (new buffers each step), not rlx_program_run_donate;
                * donating, a failed step leaves p, m and v NULL (the run took them) */
} gpt_state;

/* Fills lay from cfg; RLX_E_ARG (with a message) for a config it cannot
 * build: non-positive sizes, width not a multiple of heads, too many
 * layers, a dtype other than f32/f64, a compute dtype other than 0, the
 * dtype, or (with f32) bf16/f16, a negative or NaN lr. lay->cfg.compute is
 * the dtype when cfg->compute is 0. */
rlx_status gpt_layout_make(const gpt_config *cfg, gpt_layout *lay);
/* The initial values of parameter i, as doubles, numel[i] of them. */
void gpt_init_values(const gpt_layout *lay, int i, uint64_t seed, double *dst);
/* The mean loss over rlx_input placeholders named as above. */
rlx_tensor *gpt_loss(const gpt_layout *lay, rlx_tensor *tokens, rlx_tensor *targets, rlx_tensor *const *params);
/* Logits [batch*len, vocab] of tokens (i32 [batch*len]) at positions
 * 0..len-1, 1 <= len <= seq: the forward of gpt_loss without the loss. */
rlx_tensor *gpt_logits(const gpt_layout *lay, rlx_tensor *tokens, int64_t batch, int64_t len,
                       rlx_tensor *const *params);
/* The training step's outputs (loss, then new parameters, m, v in layout
 * order: 1 + 3 * nparam new references, moved out of the caller's scope
 * level like any op result) over any tensors of the layout's shapes:
 * placeholders, or realized values for a one-off realization. */
rlx_status gpt_step_graph(const gpt_layout *lay, rlx_tensor *tokens, rlx_tensor *targets, rlx_tensor *step,
                          rlx_tensor *const *p, rlx_tensor *const *m, rlx_tensor *const *v, rlx_tensor **out);
/* Traces the whole training step and compiles it (under the backend
 * selected now). NULL with the library's error on failure. */
rlx_program *gpt_compile_step(const gpt_layout *lay);
/* The step at sequence length len, 1..seq: tokens and targets i32
 * [batch*len], positions the first len rows of wpe (gpt_compile_step is
 * len = seq); or len GPT_DYN_SEQ: tokens and targets i32 [batch, S] with S
 * a named dynamic dim, positions rlx_index_select(wpe, 0, rlx_arange_of(
 * tokens, 1)): one compile serves every S in 1..seq (a larger S fails at
 * run time, in index_select). */
enum { GPT_DYN_SEQ = -1 };
rlx_program *gpt_compile_step_len(const gpt_layout *lay, int64_t len);
/* The step as two programs, for data-parallel training (examples/
 * gpt_mpi.c): *grads maps "tokens", "targets" (i32 [batch*seq]) and the
 * parameters (by their layout names) to the loss and the gradients in
 * layout order (1 + nparam outputs); *update maps "step", the parameters,
 * their gradients "g.<name>", m and v to the new parameters, m and v (3 *
 * nparam outputs, gpt_step's order without the loss). Together they
 * compute gpt_compile_step's step (up to summation order). update may be
 * NULL (only the gradients wanted). Both NULL on error, with the
 * library's status. */
rlx_status gpt_compile_split(const gpt_layout *lay, rlx_program **grads, rlx_program **update);
/* Parameters from seed, zero moments, step 1. */
rlx_status gpt_state_init(gpt_state *st, const gpt_layout *lay, uint64_t seed);
void gpt_state_free(gpt_state *st);
/* One training step: runs prog on (tokens, targets) and the state, which it
 * replaces by the outputs; *loss (may be NULL) gets the step's loss. */
rlx_status gpt_step(rlx_program *prog, gpt_state *st, rlx_tensor *tokens, rlx_tensor *targets, double *loss);
/* A batch: tokens uniform in [0, vocab) from seed, targets a fixed
 * function of the token and its position (learnable). */
void gpt_make_batch(const gpt_config *cfg, uint64_t seed, int32_t *tokens, int32_t *targets);

/* KV-cache decoding of one sequence (batch 1) with the parameters of a
 * gpt_state. */
typedef struct {
    const gpt_layout *lay;
    rlx_program *prog;
    rlx_tensor *k[GPT_MAX_LAYERS], *v[GPT_MAX_LAYERS]; /* [1, seq, W] */
    int64_t pos; /* tokens in the cache */
} gpt_decoder;

/* The decode step's outputs over any tensors of the layout's shapes: token
 * and pos (i32 [1]), parameters, caches k[l], v[l] ([1, seq, W]); out gets
 * the logits [1, vocab] then the new k caches, then the new v caches
 * (1 + 2 * layers new references). */
rlx_status gpt_decode_graph(const gpt_layout *lay, rlx_tensor *token, rlx_tensor *pos, rlx_tensor *const *p,
                            rlx_tensor *const *k, rlx_tensor *const *v, rlx_tensor **out);
/* Compiles the decode step; zero caches, pos 0. */
rlx_status gpt_decoder_init(gpt_decoder *d, const gpt_layout *lay);
void gpt_decoder_free(gpt_decoder *d);
/* Runs token at position d->pos (< seq, else RLX_E_ARG) with params (the
 * layout's parameters), appends its k/v to the caches, and writes the
 * vocab next-token logits to logits (may be NULL). Setting d->pos = 0
 * restarts the sequence (stale cache entries are masked). */
rlx_status gpt_decode_step(gpt_decoder *d, rlx_tensor *const *params, int32_t token, float *logits);

#endif /* GPT_MODEL_H */
