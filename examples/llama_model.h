/*
 * llama_model.h — a Llama-shaped decoder (the layout of llama2.c's models,
 * e.g. "stories15M") in the public C API only, shared by
 * bench/bench_w11.c and tests/test_llama_decode.c.
 *
 * The model: token embedding (index_select of "tok_emb" [V, D]), then per
 * layer a pre-RMSNorm attention block (q, k, v linears without biases,
 * rotary embeddings, causal grouped-query attention, output linear,
 * residual) and a pre-RMSNorm SwiGLU block w2(silu(w1 x) * w3 x) with
 * residual; a final RMSNorm and the classifier tied to the embedding
 * (logits = h @ tok_emb^T). RMSNorm eps 1e-5, RoPE theta 10000 over the
 * interleaved pairs (x[2i], x[2i+1]) of each head, as llama2.c and Meta's
 * reference rotate them (rlx_rope_ex with interleaved true).
 *
 * Weights (llama_init): deterministic from a seed, uniform with the
 * variance that keeps activations O(1): the embedding of variance 1 (the
 * residual stream starts at RMS 1), each linear w [out, in] of variance
 * 1/in (its output has the RMS of its input), the norm gains 1 + U(-0.1,
 * 0.1) so that they are not plain ones. They are constants of both graphs,
 * not program inputs: a run binds only the token, its position and the
 * caches.
 *
 * Two graphs over the same weights:
 *   llama_forward      tokens [1, S] (i32) -> logits [S, V], causal
 *                      attention over the whole sequence: the reference.
 *   the decode step    compiled once by llama_decoder_init. Inputs "token"
 *                      [1, 1] i32, "pos" [1] i32 (the token's position),
 *                      and per layer l "k<l>", "v<l>" [1, L, kv_dim]: the
 *                      past keys (already rotated) and values, L a named
 *                      symbol (-2) shared by every cache, so one binding
 *                      of L serves the whole step. Outputs: the logits
 *                      [1, V], then the new token's k rows [1, kv_dim] of
 *                      every layer, then its v rows. Inside, each layer
 *                      attends over the past rows and the new one
 *                      (L + 1 keys, read in place by rlx_attention_kv:
 *                      no cache is copied), the past rows j >= pos
 *                      masked: a caller may bind
 *                      more rows than it has filled (llama_decoder's
 *                      bucket), so that few lengths are ever planned.
 * The decoder keeps per-layer cache buffers of capacity max_seq rows and
 * binds rlx_from_blob views of their first L rows (no copy by the
 * caller), then appends the returned rows. A new L re-plans the program
 * (kernels are size-generic: nothing is compiled after the first two
 * steps, L = 0 and L = 1); the program keeps 8 plans (option
 * program_specs), so with bucket 1 every token of a long sequence
 * re-plans (about 0.35 ms of a stories15M token), with bucket >= max_seq
 * / 8 (or program_specs >= max_seq) none does after the first pass over
 * the lengths. The attention skips
 * key blocks the mask drops whole, so bucket = max_seq (the whole cache
 * bound at every step: one plan ever) costs about what bucket 32 does.
 */
#ifndef LLAMA_MODEL_H
#define LLAMA_MODEL_H

#include <stdint.h>

#include "rlx.h"

enum { LLAMA_MAX_LAYERS = 32 };

typedef struct {
    int dim, layers, heads, kv_heads, hidden, vocab, max_seq;
    rlx_dtype dtype; /* RLX_F32 or RLX_F64 */
} llama_config;

/* The weights of one model: rlx tensors owned by the struct (realized,
 * contiguous), and the RoPE tables [max_seq, head_dim/2]. */
typedef struct {
    llama_config cfg;
    rlx_tensor *tok_emb;                    /* [V, D], also the classifier */
    rlx_tensor *attn_norm[LLAMA_MAX_LAYERS]; /* [D] */
    rlx_tensor *wq[LLAMA_MAX_LAYERS];        /* [D, D] */
    rlx_tensor *wk[LLAMA_MAX_LAYERS];        /* [kv_dim, D] */
    rlx_tensor *wv[LLAMA_MAX_LAYERS];        /* [kv_dim, D] */
    rlx_tensor *wo[LLAMA_MAX_LAYERS];        /* [D, D] */
    rlx_tensor *ffn_norm[LLAMA_MAX_LAYERS];  /* [D] */
    rlx_tensor *w1[LLAMA_MAX_LAYERS];        /* [hidden, D] */
    rlx_tensor *w2[LLAMA_MAX_LAYERS];        /* [D, hidden] */
    rlx_tensor *w3[LLAMA_MAX_LAYERS];        /* [hidden, D] */
    rlx_tensor *norm;                        /* [D] */
    rlx_tensor *rope_cos, *rope_sin;         /* [max_seq, head_dim/2], not weights */
} llama_model;

/* kv_dim = dim / heads * kv_heads. The model and the decoder own their
 * handles, taken out of the caller's scope: call llama_init and
 * llama_decoder_init outside any rlx scope or directly inside one. */
int llama_kv_dim(const llama_config *c);
/* Fills m with weights from seed. RLX_E_ARG (with a message on stderr) for
 * a config it cannot build: non-positive sizes, dim not a multiple of heads,
 * an odd head_dim, heads not a multiple of kv_heads, too many layers, a
 * dtype other than f32/f64; else the library's error. */
rlx_status llama_init(llama_model *m, const llama_config *cfg, uint64_t seed);
void llama_free(llama_model *m);
/* Calls fn(data, bytes, ctx) for every weight buffer (the RoPE tables are
 * not weights); returns the total bytes. */
int64_t llama_weights_each(const llama_model *m, void (*fn)(const void *data, int64_t bytes, void *ctx), void *ctx);

/* The full forward: tokens i32 [1, S] -> logits [S, V] (a new reference,
 * recorded in the caller's scope like any op result). */
rlx_tensor *llama_forward(const llama_model *m, rlx_tensor *tokens);

/* KV-cache decoding of one sequence through one compiled program. */
typedef struct {
    const llama_model *m;
    rlx_program *prog;
    void *kc[LLAMA_MAX_LAYERS], *vc[LLAMA_MAX_LAYERS]; /* owns: max_seq x kv_dim elements each */
    int64_t pos;                                       /* tokens in the caches */
    int bucket; /* 1 (llama_decoder_init's): bind the first pos rows; b > 1: pos + 1 rounded up
                 * to a multiple of b (at most max_seq), the rows from pos on masked */
} llama_decoder;

/* The decode step's outputs over the given inputs (token [1, 1], pos [1],
 * k[l] and v[l] [1, L, kv_dim]): out gets the logits [1, V], the layers' k
 * rows, then their v rows (1 + 2 * layers new references). */
rlx_status llama_decode_graph(const llama_model *m, rlx_tensor *token, rlx_tensor *pos, rlx_tensor *const *k,
                              rlx_tensor *const *v, rlx_tensor **out);
/* Compiles the decode step (under the backend selected now) and allocates
 * the caches; pos 0. */
rlx_status llama_decoder_init(llama_decoder *d, const llama_model *m);
/* As llama_decoder_init with each layer attending over cat(past, new),
 * copied every step (the design before rlx_attention_kv), for comparisons
 * (rlx-bench-w11 --compare). */
rlx_status llama_decoder_init_concat(llama_decoder *d, const llama_model *m);
void llama_decoder_free(llama_decoder *d);
/* Runs token at position d->pos (< max_seq, else RLX_E_ARG) over the first
 * d->pos cache rows, appends its k/v rows, and writes the V next-token
 * logits to logits (may be NULL; f32 whatever the dtype). d->pos = 0
 * restarts the sequence. */
rlx_status llama_decode_step(llama_decoder *d, int32_t token, float *logits);
/* As llama_decode_step, logits as doubles (for the f64 tests). */
rlx_status llama_decode_step_f64(llama_decoder *d, int32_t token, double *logits);
/* The binding names of the decode step's cache inputs: "k<l>" or "v<l>". */
const char *llama_cache_name(char *buf, int cap, char kind, int layer);

#endif /* LLAMA_MODEL_H */
