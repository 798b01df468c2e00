/*
 * test_grad.c — rlx_grad: every differentiable public function against
 * central finite differences in f64 (one table row per function, with
 * broadcasting and views; RLX_GRAD_ROW=name runs the rows matching name),
 * the same rows in f32 against the f64 gradients, Hessian-vector products
 * of every row against finite differences of the gradient (gradients of
 * gradients), exact values at kinks and ties, the known cases of the
 * autodiff issue, a linear regression trained with SGD through
 * rlx_compile, a 100,000-node chain, allocation failures, every
 * documented error, and the coverage of the VJP table (an empty row, or a
 * rule no test reached, is a failure).
 */
#include "harness.h"

/* Internal hooks of src/autodiff (tests link the static library). */
int ad_op_count(void);
const char *ad_op_name(int op);
int ad_vjp_kind(int op);
bool ad_vjp_used(int op);
enum { AD_MISSING = 0, AD_LEAF = 1, AD_ZERO = 2, AD_RULE = 3 };

#define MAXIN 4

/* ------------------------------------------------------------ helpers */

static int64_t numel_of(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    return n;
}

/* Reads a gradient into a malloc'ed array, NULL (and a failure) if absent. */
static double *read_all(rlx_tensor *t, int64_t *n)
{
    if (!t) {
        test_fail(__FILE__, __LINE__, "tensor is NULL: %s", rlx_last_error());
        return NULL;
    }
    return test_values(t, n);
}

/* The single gradient of loss with respect to x. */
static rlx_tensor *grad1(rlx_tensor *loss, rlx_tensor *x)
{
    rlx_tensor *g = NULL;
    rlx_status st = rlx_grad(loss, &x, 1, &g);
    if (st != RLX_OK)
        test_fail(__FILE__, __LINE__, "rlx_grad failed: %s", rlx_last_error());
    return g;
}

/* ------------------------------------------------ the gradient table */

typedef rlx_tensor *(*builder)(rlx_tensor **in);

typedef struct {
    const char *name;
    builder build;
    int nin;
    int rank[MAXIN];
    int64_t shape[MAXIN][4];
    double lo, hi; /* input domain, away from kinks and poles */
    double h, tol; /* 0: defaults */
} gcase;

/* Constant helpers for the builders (handles in the caller's scope). */
static rlx_tensor *c_i64(int rank, const int64_t *shape, const int64_t *v) { return ti64(rank, shape, v); }
static rlx_tensor *c_bool(int rank, const int64_t *shape, const unsigned char *v) { return tbool(rank, shape, v); }

#define B(name, expr)                                    \
    static rlx_tensor *b_##name(rlx_tensor **in)         \
    {                                                    \
        rlx_tensor *a = in[0], *b = in[1], *c = in[2];   \
        (void)a;                                         \
        (void)b;                                         \
        (void)c;                                         \
        return (expr);                                   \
    }

/* unary */
B(neg, rlx_neg(a))
B(relu, rlx_relu(a))
B(gelu, rlx_gelu(a))
B(gelu_tanh, rlx_gelu_tanh(a))
B(silu, rlx_silu(a))
B(tanh, rlx_tanh(a))
B(exp, rlx_exp(a))
B(exp_view, rlx_exp(rlx_t(a)))
B(log, rlx_log(a))
B(sqrt, rlx_sqrt(a))
B(rsqrt, rlx_rsqrt(a))
B(sigmoid, rlx_sigmoid(a))
B(abs, rlx_abs(a))
B(sin, rlx_sin(a))
B(cos, rlx_cos(a))
B(tan, rlx_tan(a))
B(atan, rlx_atan(a))
B(recip, rlx_recip(a))
B(floor, rlx_floor(a))
B(ceil, rlx_ceil(a))
B(sign, rlx_sign(a))
B(softplus, rlx_softplus(a))
B(elu, rlx_elu(a))
B(erf, rlx_erf(a))
B(hard_swish, rlx_hard_swish(a))
B(hard_sigmoid, rlx_hard_sigmoid(a))
B(mish, rlx_mish(a))
B(softsign, rlx_softsign(a))
B(log_sigmoid, rlx_log_sigmoid(a))

/* binary (broadcasting shapes in the rows) and the _s forms */
B(add, rlx_add(a, b))
B(sub, rlx_sub(a, b))
B(mul, rlx_mul(a, b))
B(mul_self, rlx_mul(a, a))
B(div, rlx_div(a, b))
B(pow, rlx_pow(a, b))
B(maximum, rlx_maximum(a, b))
B(minimum, rlx_minimum(a, b))
B(atan2, rlx_atan2(a, b))
B(rem, rlx_rem(a, b))
B(rem_neg, rlx_rem(rlx_neg(a), b))
B(add_s, rlx_add_s(a, 0.75))
B(sub_s, rlx_sub_s(a, 0.75))
B(mul_s, rlx_mul_s(a, -1.5))
B(div_s, rlx_div_s(a, 0.3))
B(pow_s, rlx_pow_s(a, 2.5))
B(pow_s_int, rlx_pow_s(a, 3))
B(maximum_s, rlx_maximum_s(a, 0.1))
B(minimum_s, rlx_minimum_s(a, 0.1))
B(atan2_s, rlx_atan2_s(a, -0.7))
B(rem_s, rlx_rem_s(a, 0.7))
B(rsub_s, rlx_rsub_s(a, 2))
B(rdiv_s, rlx_rdiv_s(a, 2))

/* selection */
static rlx_tensor *mask23(void)
{
    static const int64_t s[2] = {2, 3};
    static const unsigned char m[6] = {1, 0, 1, 0, 0, 1};
    return c_bool(2, s, m);
}
static rlx_tensor *mask3(void)
{
    static const int64_t s[1] = {3};
    static const unsigned char m[3] = {0, 1, 1};
    return c_bool(1, s, m);
}
B(where, rlx_where(mask23(), a, b))
B(where_data, rlx_where(rlx_gt(a, b), rlx_mul(a, b), rlx_sub(b, a)))
B(masked_fill, rlx_masked_fill(a, mask3(), 1.5))
B(clamp, rlx_clamp(a, -0.5, 0.5))
B(clamp_min, rlx_clamp_min(a, 0.2))
B(clamp_max, rlx_clamp_max(a, 0.2))

/* reductions */
static const int ax0[1] = {0}, ax1[1] = {1}, ax02[2] = {0, 2}, axm1[1] = {-1};
B(sum_axis, rlx_sum(a, ax1, 1, false))
B(sum_axes_keep, rlx_sum(a, ax02, 2, true))
B(sum_all, rlx_sum_all(a))
B(mean, rlx_mean(a, ax0, 1, false))
B(mean_all, rlx_mean_all(a))
B(max_axis, rlx_max(a, ax1, 1, false))
B(max_all, rlx_max(a, NULL, 0, false))
B(min_axes, rlx_min(a, ax02, 2, true))
B(prod, rlx_prod(a, ax1, 1, false))
B(prod_all, rlx_prod(a, NULL, 0, false))
B(var, rlx_var(a, ax1, 1, false))
B(std, rlx_std(a, axm1, 1, true))
B(norm, rlx_norm(a, NULL, 0, false))
B(logsumexp, rlx_logsumexp(a, 1, false))
B(logsumexp_keep, rlx_logsumexp(a, 0, true))
B(cumsum, rlx_cumsum(a, 1, false))
B(cumsum_excl, rlx_cumsum(a, 0, true))

/* movement (views) */
static const int64_t s234[3] = {2, 3, 4}, s6x2[2] = {6, -1};
static const int perm201[3] = {2, 0, 1};
B(reshape, rlx_mul(rlx_reshape(a, 2, s6x2), rlx_reshape(b, 2, s6x2)))
B(transpose, rlx_mul(rlx_transpose(a, 3, perm201), rlx_transpose(b, 3, perm201)))
B(t, rlx_matmul(rlx_t(a), a))
B(broadcast_to, rlx_mul(rlx_broadcast_to(a, 3, s234), b))
B(flatten, rlx_exp(rlx_flatten(a)))
B(unsqueeze, rlx_mul(rlx_unsqueeze(a, 1), b))
B(squeeze, rlx_exp(rlx_squeeze(a, 1)))
B(squeeze_all, rlx_sin(rlx_squeeze_all(a)))
B(narrow, rlx_exp(rlx_narrow(a, 1, 1, 2)))
B(slice_step, rlx_exp(rlx_slice(a, 1, 1, RLX_END, 2)))
B(slice_neg, rlx_exp(rlx_slice(rlx_slice(a, 0, RLX_END, RLX_END, -2), 1, 3, 0, -2)))
B(select, rlx_exp(rlx_select(a, 0, -1)))
static rlx_tensor *b_split(rlx_tensor **in)
{
    static const int64_t sizes[3] = {1, 2, 2};
    rlx_tensor *p[3];
    rlx_split(in[0], 1, 3, sizes, p);
    rlx_tensor *r[3] = {rlx_exp(p[2]), p[0], rlx_mul(p[1], p[1])};
    return rlx_cat(r, 3, 1);
}
static rlx_tensor *b_chunk(rlx_tensor **in)
{
    rlx_tensor *p[2];
    rlx_chunk(in[0], 0, 2, p);
    return rlx_mul(p[0], rlx_exp(p[1]));
}

/* data movement */
static rlx_tensor *b_cat(rlx_tensor **in) { return rlx_cat(in, 3, 1); }
static rlx_tensor *b_cat_same(rlx_tensor **in)
{
    rlx_tensor *xs[3] = {in[0], rlx_exp(in[0]), in[0]};
    return rlx_cat(xs, 3, 0);
}
static rlx_tensor *b_stack(rlx_tensor **in) { return rlx_stack(in, 2, 1); }
B(tile, rlx_mul(rlx_tile(a, 0, 3), b))
B(flip, rlx_mul(rlx_flip(a, 1), b))
B(roll, rlx_mul(rlx_roll(a, 1, 3), b))
B(pad, rlx_exp(rlx_pad(a, 0, 1, 2, 0.7)))
static rlx_tensor *idx5(void)
{
    static const int64_t s[1] = {5}, v[5] = {2, 0, -1, 2, 2};
    return c_i64(1, s, v);
}
static rlx_tensor *idx23(void)
{
    static const int64_t s[2] = {2, 3}, v[6] = {1, 1, 0, 2, -3, 1};
    return c_i64(2, s, v);
}
static rlx_tensor *idx_long(void)
{
    static const int64_t s[1] = {6}, v[6] = {39, 0, 17, 17, -2, 5};
    return c_i64(1, s, v);
}
B(gather_axis1, rlx_gather(a, idx5(), 1))
B(gather_2d_idx, rlx_gather(a, idx23(), 0))
B(gather_mid, rlx_gather(a, idx23(), 1))
B(gather_long, rlx_mul(rlx_gather(a, idx_long(), 0), rlx_gather(a, idx_long(), 0)))
B(index_select, rlx_index_select(a, 1, idx5()))
static rlx_tensor *idx_sc(void) /* [2,3] along axis 0 of a [3,4] base, duplicates */
{
    static const int64_t s[2] = {2, 3}, v[6] = {0, 2, 0, 0, 1, -1};
    return c_i64(2, s, v);
}
B(scatter_add, rlx_mul(rlx_scatter_add(a, 0, idx_sc(), b), a))
B(scatter_set, rlx_mul(rlx_scatter(a, 0, idx_sc(), b), a))
static rlx_tensor *idx25(void)
{
    static const int64_t s[2] = {2, 5}, v[10] = {2, 0, -1, 2, 2, 1, 1, 1, 0, -3};
    return c_i64(2, s, v);
}
B(scatter_add_view, rlx_exp(rlx_scatter_add(rlx_t(a), 1, idx25(), rlx_t(b))))
/* sort and topk: the gradient follows each value back to its position;
 * weights by position so a wrong permutation shows */
static rlx_tensor *ramp(int64_t n) { return rlx_arange(RLX_F64, 1, (double)n + 1, 1); }
static rlx_tensor *topk_values(rlx_tensor *x, int64_t k, int axis, bool largest)
{
    rlx_tensor *v = NULL, *i = NULL;
    rlx_topk(x, k, axis, largest, &v, &i);
    return v;
}
B(sort_last, rlx_mul(rlx_sort(a, -1, false), ramp(4)))
B(sort_axis0_desc, rlx_mul(rlx_sort(a, 0, true), rlx_reshape(ramp(3), 2, (int64_t[]){3, 1})))
B(sort_view, rlx_mul(rlx_sort(rlx_t(a), 1, false), ramp(3)))
B(topk_largest, rlx_mul(topk_values(a, 2, 1, true), ramp(2)))
B(topk_smallest_axis0, rlx_mul(topk_values(a, 2, 0, false), rlx_reshape(ramp(2), 2, (int64_t[]){2, 1})))
B(index_add, rlx_exp(rlx_index_add(a, 1, idx5(), b)))
B(cast_f32, rlx_cast(rlx_mul(rlx_cast(a, RLX_F32), rlx_cast(b, RLX_F32)), RLX_F64))
B(contiguous, rlx_exp(rlx_contiguous(rlx_t(a))))

/* linear algebra */
static rlx_tensor *dominant(rlx_tensor *a) { return rlx_add(a, rlx_mul_s(rlx_eye(RLX_F64, 3), 3)); }
B(matmul, rlx_matmul(a, b))
B(matmul_batch, rlx_matmul(a, b))
B(matmul_vec, rlx_matmul(a, b))
B(matmul_dot, rlx_matmul(a, b))
B(matmul_view, rlx_matmul(rlx_t(a), rlx_slice(b, 1, 0, RLX_END, 2)))
B(matmul_t, rlx_matmul_t(a, b))
static rlx_tensor *b_einsum(const char *eq, rlx_tensor **in, int n) { return rlx_einsum(eq, in, n); }
B(einsum_chain, b_einsum("ab,bc,cd->da", in, 3))
B(einsum_diag_batch, b_einsum("bii,bj->jb", in, 2))
B(einsum_ellipsis_bcast, b_einsum("...ij,...j->...i", in, 2))
B(einsum_outer_sum, b_einsum("ij,k", in, 2))
B(linear, rlx_linear(a, b, c))
B(linear_nobias, rlx_linear(a, b, NULL))
B(linear_relu, rlx_linear_act(a, b, c, RLX_ACT_RELU))
B(linear_gelu, rlx_linear_act(a, b, c, RLX_ACT_GELU))
B(linear_gelu_tanh, rlx_linear_act(a, b, c, RLX_ACT_GELU_TANH))
B(linear_silu, rlx_linear_act(a, b, c, RLX_ACT_SILU))
B(linear_tanh, rlx_linear_act(a, b, c, RLX_ACT_TANH))
B(linear_sigmoid, rlx_linear_act(a, b, c, RLX_ACT_SIGMOID))
B(solve, rlx_solve(dominant(a), b))
B(solve_vec, rlx_solve(dominant(a), b))
B(solve_batch, rlx_solve(rlx_add(a, rlx_mul_s(rlx_eye(RLX_F64, 3), 3)), b))
B(inv, rlx_inv(dominant(a)))

/* neural-network ops */
B(softmax, rlx_softmax(a, -1))
B(softmax_axis0, rlx_softmax(a, 0))
B(log_softmax, rlx_log_softmax(a, 1))
B(layer_norm, rlx_layer_norm(a, b, c, 1e-5))
B(layer_norm_plain, rlx_layer_norm(a, NULL, NULL, 1e-3))
/* batch norm: x [N, C, ...]; running statistics as inputs (var kept > 0) */
B(batch_norm_train, rlx_batch_norm(a, NULL, NULL, b, c, true, 0.1, 1e-5, NULL, NULL))
B(batch_norm_train_rank2, rlx_batch_norm(a, NULL, NULL, NULL, b, true, 0.1, 1e-3, NULL, NULL))
B(batch_norm_eval, rlx_batch_norm(a, b, rlx_add_s(rlx_mul(c, c), 0.5), in[3], NULL, false, 0.1, 1e-5, NULL, NULL))
/* the updated running statistics, differentiated with respect to x and the old ones */
static rlx_tensor *b_batch_norm_stats(rlx_tensor **in)
{
    rlx_tensor *m = NULL, *v = NULL;
    rlx_tensor *y = rlx_batch_norm(in[0], in[1], in[2], NULL, NULL, true, 0.25, 1e-5, &m, &v);
    return y ? rlx_add(rlx_mul_s(m, 2), v) : NULL;
}
B(group_norm, rlx_group_norm(a, 2, b, c, 1e-5))
B(group_norm_plain, rlx_group_norm(a, 3, NULL, NULL, 1e-3))
B(pad_reflect, rlx_pad_mode(rlx_pad_mode(a, 1, 2, 1, RLX_PAD_REFLECT), 0, 0, 1, RLX_PAD_REFLECT))
B(pad_replicate, rlx_pad_mode(rlx_pad_mode(a, 1, 1, 3, RLX_PAD_REPLICATE), 0, 2, 0, RLX_PAD_REPLICATE))
B(pad_reflect_view, rlx_pad_mode(rlx_t(a), -1, 1, 2, RLX_PAD_REFLECT))
B(dropout, rlx_dropout(a, 0.4, 7))
B(rms_norm, rlx_rms_norm(a, b, 1e-5))
B(rms_norm_plain, rlx_rms_norm(a, NULL, 1e-5))
B(cross_entropy, rlx_cross_entropy(a, b))
static rlx_tensor *labels4(void)
{
    static const int64_t s[1] = {4}, v[4] = {2, 0, 1, 2};
    return c_i64(1, s, v);
}
B(softmax_ce, rlx_softmax_cross_entropy_with_logits(a, labels4()))
B(attention, rlx_attention(a, b, c, 2, 2, RLX_MASK_NONE, 0))
B(attention_causal, rlx_attention(a, b, c, 2, 2, RLX_MASK_CAUSAL, 0))
B(attention_sliding, rlx_attention(a, b, c, 2, 2, RLX_MASK_SLIDING, 2))
static rlx_tensor *b_attention_masked(rlx_tensor **in)
{
    static const int64_t s[2] = {2, 4};
    static const unsigned char m[8] = {1, 0, 1, 1, 0, 0, 0, 0}; /* batch 1: every key dropped */
    return rlx_attention_masked(in[0], in[1], in[2], c_bool(2, s, m), 2, 2);
}
B(attention_short_keys, rlx_attention(a, b, c, 2, 2, RLX_MASK_CAUSAL, 0)) /* queries 0, 1 see no key */
B(attention_head_dim1, rlx_attention(a, b, c, 3, 1, RLX_MASK_SLIDING, 2))
static const int perm021[3] = {0, 2, 1};
B(attention_view, rlx_attention(rlx_transpose(a, 3, perm021), b, c, 2, 2, RLX_MASK_NONE, 0))
B(attention_one_query, rlx_attention(a, b, c, 1, 4, RLX_MASK_SLIDING, 2))
B(rope, rlx_rope(a, b, c, 4))
/* rlx_attention_ex: grouped kv heads (their gradient sums over each
 * group), additive masks (differentiable) of broadcast shapes, bool masks */
static const rlx_attention_opts gqa_causal = {.num_kv_heads = 2, .mask = RLX_MASK_CAUSAL};
static const rlx_attention_opts mqa_sliding = {.num_kv_heads = 1, .mask = RLX_MASK_SLIDING, .window = 2};
B(attention_gqa, rlx_attention_ex(a, b, c, 4, 2, &gqa_causal))
B(attention_mqa, rlx_attention_ex(a, b, c, 2, 2, &mqa_sliding))
static rlx_tensor *b_attention_add_mask(rlx_tensor **in) /* mask [Sq, Sk], causal, Sq < Sk */
{
    rlx_attention_opts o = {.mask = RLX_MASK_CAUSAL, .attn_mask = in[3], .scale = 0.7};
    return rlx_attention_ex(in[0], in[1], in[2], 2, 2, &o);
}
static rlx_tensor *b_attention_add_mask_gqa(rlx_tensor **in) /* mask [B, 1, 1, Sk], MQA */
{
    rlx_attention_opts o = {.num_kv_heads = 1, .attn_mask = in[3]};
    return rlx_attention_ex(in[0], in[1], in[2], 2, 2, &o);
}
static rlx_tensor *b_attention_add_mask_heads(rlx_tensor **in) /* mask [H, Sq, 1], grouped */
{
    rlx_attention_opts o = {.num_kv_heads = 2, .attn_mask = in[3]};
    return rlx_attention_ex(in[0], in[1], in[2], 4, 1, &o);
}
static const rlx_rope_opts gptj_partial = {.offset = 1, .rotary_dim = 2, .interleaved = true};
B(rope_gptj_partial, rlx_rope_ex(a, b, c, 4, &gptj_partial))
static rlx_tensor *b_rope_positions(rlx_tensor **in) /* a repeated position: the table rows' gradients add */
{
    static const int64_t s[2] = {2, 3}, p[6] = {4, 0, 2, 2, 2, 1};
    rlx_rope_opts o = {.positions = c_i64(2, s, p)};
    return rlx_rope_ex(in[0], in[1], in[2], 4, &o);
}
static rlx_tensor *b_attention_bool_mask_gqa(rlx_tensor **in)
{
    static const int64_t s[4] = {1, 4, 2, 3};
    static const unsigned char m[24] = {1, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 1};
    rlx_attention_opts o = {.num_kv_heads = 2, .attn_mask = c_bool(4, s, m)}; /* head 1 row 1 sees nothing */
    return rlx_attention_ex(in[0], in[1], in[2], 4, 2, &o);
}
static const int one2[2] = {1, 1}, two2[2] = {2, 2}, zero2[2] = {0, 0};
static const int pad1[2] = {1, 2}, pad2[2] = {2, 1}, k3[2] = {3, 3}, k23[2] = {2, 3}, s21[2] = {2, 1};
B(conv2d, rlx_conv2d(a, b, c, NULL, pad1, NULL, 1))
B(conv2d_strided, rlx_conv2d(a, b, NULL, two2, zero2, s21, 1))
B(conv2d_groups, rlx_conv2d(a, b, c, s21, one2, NULL, 2))
B(conv2d_crop, rlx_conv2d(a, b, NULL, two2, pad2, NULL, 1))
static const int op11[2] = {1, 1}, op10[2] = {1, 0}, st32[2] = {3, 2};
B(conv_transpose2d, rlx_conv_transpose2d(a, b, c, two2, one2, op11, NULL, 1))
B(conv_transpose2d_groups, rlx_conv_transpose2d(a, b, c, st32, zero2, op10, s21, 2))
B(conv_transpose2d_crop, rlx_conv_transpose2d(a, b, NULL, two2, k3, NULL, NULL, 1)) /* pad > K-1 */
B(conv1d, rlx_conv1d(a, b, c, 2, 1, 2, 1))
B(conv_transpose1d, rlx_conv_transpose1d(a, b, c, 3, 1, 2, 1, 1))
B(max_pool, rlx_max_pool2d(a, two2, NULL, NULL))
B(max_pool_overlap, rlx_max_pool2d(a, k3, one2, one2))
B(avg_pool, rlx_avg_pool2d(a, two2, NULL, NULL))
B(avg_pool_padded, rlx_avg_pool2d(a, k23, s21, one2))

/* signal */
B(fft, rlx_fft(a))
B(ifft, rlx_ifft(a))
B(fft_axis0, rlx_fft_axis(a, 0, false))

/* low precision and synthesis */
static rlx_tensor *synth_idx(void)
{
    static const int64_t s[2] = {3, 2}, v[6] = {0, 2, 2, 1, 3, 3};
    return c_i64(2, s, v);
}
B(synth_matmul, rlx_synth_matmul(a, synth_idx(), b))
B(synth_reconstruct, rlx_mul(rlx_synth_reconstruct(synth_idx(), a), rlx_synth_reconstruct(synth_idx(), a)))
B(spline, rlx_spline_activation(a, b, 5, -1, 1))
/* u8 weights [3, 5] with zero points: d/dx and d/db (the weight is frozen) */
static const uint8_t q8_codes[15] = {0, 255, 128, 7, 200, 130, 1, 90, 255, 64, 128, 128, 17, 33, 250};
B(linear_q8, rlx_linear_q8(a, rlx_from_data(RLX_U8, 2, (const int64_t[]){3, 5}, q8_codes),
                           rlx_from_data(RLX_F32, 1, (const int64_t[]){3}, (const float[]){0.02f, 0.01f, 0.03f}),
                           rlx_from_data(RLX_U8, 1, (const int64_t[]){3}, (const uint8_t[]){128, 120, 0}), b))
#undef B

#define R1(n0) 1, {1}, {{n0}}
#define R2(n0, n1) 1, {2}, {{n0, n1}}
#define RR(n0, n1, n2) 1, {3}, {{n0, n1, n2}}
#define U(name, lo, hi) {#name, b_##name, R2(2, 3), lo, hi, 0, 0}

static const gcase cases[] = {
    U(neg, -2, 2), U(relu, -2, 2), U(gelu, -3, 3), U(gelu_tanh, -3, 3), U(silu, -3, 3), U(tanh, -2, 2),
    U(exp, -2, 2), {"exp_view", b_exp_view, RR(2, 3, 2), -1, 1, 0, 0}, U(log, 0.5, 3), U(sqrt, 0.5, 3),
    U(rsqrt, 0.5, 3), U(sigmoid, -3, 3), U(abs, -2, 2), U(sin, -3, 3), U(cos, -3, 3), U(tan, -1, 1),
    U(atan, -2, 2), U(recip, 0.5, 2), U(floor, -2, 2), U(ceil, -2, 2), U(sign, -2, 2), U(softplus, -3, 3),
    U(elu, -2, 2), U(erf, -2, 2), U(hard_swish, -4, 4), U(hard_sigmoid, -4, 4), U(mish, -2, 2),
    U(softsign, -2, 2), U(log_sigmoid, -3, 3),

    {"add", b_add, 2, {2, 1}, {{2, 3}, {3}}, -2, 2, 0, 0},
    {"sub", b_sub, 2, {2, 2}, {{2, 1}, {1, 3}}, -2, 2, 0, 0},
    {"mul", b_mul, 2, {2, 0}, {{2, 3}, {0}}, -2, 2, 0, 0},
    {"mul_self", b_mul_self, R2(2, 3), -2, 2, 0, 0},
    {"div", b_div, 2, {2, 1}, {{2, 3}, {3}}, 0.5, 2, 0, 0},
    {"pow", b_pow, 2, {2, 2}, {{2, 3}, {2, 1}}, 0.5, 2, 0, 0},
    {"maximum", b_maximum, 2, {2, 2}, {{2, 3}, {2, 3}}, -2, 2, 0, 0},
    {"minimum", b_minimum, 2, {2, 1}, {{2, 3}, {3}}, -2, 2, 0, 0},
    {"atan2", b_atan2, 2, {2, 2}, {{2, 3}, {2, 3}}, -2, 2, 0, 0},
    {"rem", b_rem, 2, {2, 2}, {{2, 3}, {2, 3}}, 0.5, 3, 0, 0},
    {"rem_neg", b_rem_neg, 2, {2, 1}, {{2, 3}, {3}}, 0.5, 3, 0, 0},
    U(add_s, -2, 2), U(sub_s, -2, 2), U(mul_s, -2, 2), U(div_s, -2, 2), U(pow_s, 0.5, 2), U(pow_s_int, -2, 2),
    U(maximum_s, -2, 2), U(minimum_s, -2, 2), U(atan2_s, -2, 2), U(rem_s, 0.5, 3), U(rsub_s, -2, 2),
    U(rdiv_s, 0.5, 2),

    {"where", b_where, 2, {2, 1}, {{2, 3}, {3}}, -2, 2, 0, 0},
    {"where_data", b_where_data, 2, {2, 2}, {{2, 3}, {2, 3}}, -2, 2, 0, 0},
    U(masked_fill, -2, 2), U(clamp, -2, 2), U(clamp_min, -2, 2), U(clamp_max, -2, 2),

    {"sum_axis", b_sum_axis, R2(3, 4), -2, 2, 0, 0},
    {"sum_axes_keep", b_sum_axes_keep, RR(2, 3, 4), -2, 2, 0, 0},
    {"sum_all", b_sum_all, R2(3, 4), -2, 2, 0, 0},
    {"mean", b_mean, R2(3, 4), -2, 2, 0, 0},
    {"mean_all", b_mean_all, RR(2, 1, 3), -2, 2, 0, 0},
    {"max_axis", b_max_axis, R2(3, 4), -2, 2, 0, 0},
    {"max_all", b_max_all, R2(3, 4), -2, 2, 0, 0},
    {"min_axes", b_min_axes, RR(2, 3, 4), -2, 2, 0, 0},
    {"prod", b_prod, R2(3, 4), 0.5, 1.5, 0, 0},
    {"prod_all", b_prod_all, R2(2, 3), -1.5, 1.5, 0, 0},
    {"var", b_var, R2(3, 4), -2, 2, 0, 0},
    {"std", b_std, R2(3, 4), -2, 2, 0, 0},
    {"norm", b_norm, R2(3, 4), -2, 2, 0, 0},
    {"logsumexp", b_logsumexp, R2(3, 4), -2, 2, 0, 0},
    {"logsumexp_keep", b_logsumexp_keep, R2(3, 4), -2, 2, 0, 0},
    {"cumsum", b_cumsum, R2(3, 4), -2, 2, 0, 0},
    {"cumsum_excl", b_cumsum_excl, R2(3, 4), -2, 2, 0, 0},

    {"reshape", b_reshape, 2, {3, 2}, {{2, 3, 2}, {3, 4}}, -2, 2, 0, 0},
    {"transpose", b_transpose, 2, {3, 3}, {{2, 3, 2}, {2, 3, 2}}, -2, 2, 0, 0},
    {"t", b_t, R2(3, 2), -2, 2, 0, 0},
    {"broadcast_to", b_broadcast_to, 2, {2, 3}, {{3, 1}, {2, 3, 4}}, -2, 2, 0, 0},
    {"flatten", b_flatten, R2(2, 3), -1, 1, 0, 0},
    {"unsqueeze", b_unsqueeze, 2, {2, 2}, {{2, 3}, {4, 3}}, -2, 2, 0, 0},
    {"squeeze", b_squeeze, RR(2, 1, 3), -1, 1, 0, 0},
    {"squeeze_all", b_squeeze_all, RR(1, 4, 1), -2, 2, 0, 0},
    {"narrow", b_narrow, R2(3, 4), -1, 1, 0, 0},
    {"slice_step", b_slice_step, R2(3, 5), -1, 1, 0, 0},
    {"slice_neg", b_slice_neg, R2(5, 4), -1, 1, 0, 0},
    {"select", b_select, R2(3, 4), -1, 1, 0, 0},
    {"split", b_split, R2(2, 5), -1, 1, 0, 0},
    {"chunk", b_chunk, R2(4, 2), -1, 1, 0, 0},

    {"cat", b_cat, 3, {2, 2, 2}, {{2, 1}, {2, 3}, {2, 2}}, -2, 2, 0, 0},
    {"cat_same", b_cat_same, R2(2, 2), -1, 1, 0, 0},
    {"stack", b_stack, 2, {2, 2}, {{2, 3}, {2, 3}}, -2, 2, 0, 0},
    {"tile", b_tile, 2, {2, 2}, {{2, 3}, {6, 3}}, -2, 2, 0, 0},
    {"flip", b_flip, 2, {2, 2}, {{2, 3}, {2, 3}}, -2, 2, 0, 0},
    {"roll", b_roll, 2, {2, 2}, {{2, 4}, {2, 4}}, -2, 2, 0, 0},
    {"pad", b_pad, R2(2, 3), -1, 1, 0, 0},
    {"gather_axis1", b_gather_axis1, R2(3, 4), -2, 2, 0, 0},
    {"gather_2d_idx", b_gather_2d_idx, R2(3, 2), -2, 2, 0, 0},
    {"gather_mid", b_gather_mid, RR(2, 3, 2), -2, 2, 0, 0},
    {"gather_long", b_gather_long, R1(40), -2, 2, 0, 0},
    {"index_select", b_index_select, R2(2, 3), -2, 2, 0, 0},
    {"scatter_add", b_scatter_add, 2, {2, 2}, {{3, 4}, {2, 4}}, -2, 2, 0, 0},
    {"scatter_set", b_scatter_set, 2, {2, 2}, {{3, 4}, {2, 4}}, -2, 2, 0, 0},
    {"scatter_add_view", b_scatter_add_view, 2, {2, 2}, {{3, 2}, {5, 2}}, -1, 1, 0, 0},
    {"sort_last", b_sort_last, R2(3, 4), -2, 2, 0, 0},
    {"sort_axis0_desc", b_sort_axis0_desc, R2(3, 4), -2, 2, 0, 0},
    {"sort_view", b_sort_view, R2(3, 4), -2, 2, 0, 0},
    {"topk_largest", b_topk_largest, R2(3, 5), -2, 2, 0, 0},
    {"topk_smallest_axis0", b_topk_smallest_axis0, R2(4, 3), -2, 2, 0, 0},
    {"index_add", b_index_add, 2, {2, 2}, {{2, 3}, {2, 5}}, -1, 1, 0, 0},
    {"cast_f32", b_cast_f32, 2, {2, 2}, {{2, 3}, {2, 3}}, -2, 2, 1e-2, 1e-4},
    {"contiguous", b_contiguous, R2(3, 2), -1, 1, 0, 0},

    {"matmul", b_matmul, 2, {2, 2}, {{2, 3}, {3, 4}}, -1, 1, 0, 0},
    {"einsum_chain", b_einsum_chain, 3, {2, 2, 2}, {{2, 3}, {3, 4}, {4, 2}}, -1, 1, 0, 0},
    {"einsum_diag_batch", b_einsum_diag_batch, 2, {3, 2}, {{2, 3, 3}, {2, 4}}, -1, 1, 0, 0},
    {"einsum_ellipsis_bcast", b_einsum_ellipsis_bcast, 2, {4, 2}, {{2, 1, 3, 4}, {3, 4}}, -1, 1, 0, 0},
    {"einsum_outer_sum", b_einsum_outer_sum, 2, {2, 1}, {{2, 3}, {4}}, -1, 1, 0, 0},
    {"matmul_batch", b_matmul_batch, 2, {3, 2}, {{2, 2, 3}, {3, 2}}, -1, 1, 0, 0},
    {"matmul_vec", b_matmul_vec, 2, {1, 3}, {{3}, {2, 3, 2}}, -1, 1, 0, 0},
    {"matmul_dot", b_matmul_dot, 2, {1, 1}, {{4}, {4}}, -1, 1, 0, 0},
    {"matmul_view", b_matmul_view, 2, {2, 2}, {{3, 2}, {3, 5}}, -1, 1, 0, 0},
    {"matmul_t", b_matmul_t, 2, {2, 2}, {{2, 3}, {4, 3}}, -1, 1, 0, 0},
    {"linear", b_linear, 3, {2, 2, 1}, {{4, 3}, {2, 3}, {2}}, -1, 1, 0, 0},
    {"linear_nobias", b_linear_nobias, 2, {3, 2}, {{2, 2, 3}, {2, 3}}, -1, 1, 0, 0},
    {"linear_relu", b_linear_relu, 3, {2, 2, 1}, {{4, 3}, {2, 3}, {2}}, -1, 1, 0, 0},
    {"linear_gelu", b_linear_gelu, 3, {2, 2, 1}, {{4, 3}, {2, 3}, {2}}, -1, 1, 0, 0},
    {"linear_gelu_tanh", b_linear_gelu_tanh, 3, {2, 2, 1}, {{4, 3}, {2, 3}, {2}}, -1, 1, 0, 0},
    {"linear_silu", b_linear_silu, 3, {2, 2, 1}, {{4, 3}, {2, 3}, {2}}, -1, 1, 0, 0},
    {"linear_tanh", b_linear_tanh, 3, {2, 2, 1}, {{4, 3}, {2, 3}, {2}}, -1, 1, 0, 0},
    {"linear_sigmoid", b_linear_sigmoid, 3, {2, 2, 1}, {{4, 3}, {2, 3}, {2}}, -1, 1, 0, 0},
    {"solve", b_solve, 2, {2, 2}, {{3, 3}, {3, 2}}, -1, 1, 0, 0},
    {"solve_vec", b_solve_vec, 2, {2, 1}, {{3, 3}, {3}}, -1, 1, 0, 0},
    {"solve_batch", b_solve_batch, 2, {3, 2}, {{2, 3, 3}, {3, 1}}, -1, 1, 0, 0},
    {"inv", b_inv, R2(3, 3), -1, 1, 0, 0},

    {"softmax", b_softmax, R2(3, 4), -2, 2, 0, 0},
    {"softmax_axis0", b_softmax_axis0, R2(3, 4), -2, 2, 0, 0},
    {"log_softmax", b_log_softmax, R2(3, 4), -2, 2, 0, 0},
    {"layer_norm", b_layer_norm, 3, {3, 1, 1}, {{2, 2, 4}, {4}, {4}}, -2, 2, 0, 0},
    {"layer_norm_plain", b_layer_norm_plain, R2(3, 4), -2, 2, 0, 0},
    {"batch_norm_train", b_batch_norm_train, 3, {3, 1, 1}, {{3, 2, 2}, {2}, {2}}, -2, 2, 0, 0},
    {"batch_norm_train_rank2", b_batch_norm_train_rank2, 2, {2, 1}, {{4, 3}, {3}}, -2, 2, 0, 0},
    {"batch_norm_eval", b_batch_norm_eval, 4, {4, 1, 1, 1}, {{2, 3, 2, 2}, {3}, {3}, {3}}, -2, 2, 0, 0},
    {"batch_norm_stats", b_batch_norm_stats, 3, {3, 1, 1}, {{3, 2, 2}, {2}, {2}}, -2, 2, 0, 0},
    {"group_norm", b_group_norm, 3, {3, 1, 1}, {{2, 4, 3}, {4}, {4}}, -2, 2, 0, 0},
    {"group_norm_plain", b_group_norm_plain, RR(2, 3, 2), -2, 2, 0, 0},
    {"pad_reflect", b_pad_reflect, R2(2, 3), -2, 2, 0, 0},
    {"pad_replicate", b_pad_replicate, R2(2, 2), -2, 2, 0, 0},
    {"pad_reflect_view", b_pad_reflect_view, R2(4, 2), -2, 2, 0, 0},
    {"dropout", b_dropout, R2(4, 5), -2, 2, 0, 0},
    {"rms_norm", b_rms_norm, 2, {2, 1}, {{3, 4}, {4}}, -2, 2, 0, 0},
    {"rms_norm_plain", b_rms_norm_plain, R2(3, 4), -2, 2, 0, 0},
    {"cross_entropy", b_cross_entropy, 2, {2, 2}, {{3, 4}, {3, 4}}, 0.1, 2, 0, 0},
    {"softmax_ce", b_softmax_ce, R2(4, 3), -2, 2, 0, 0},
    {"attention", b_attention, 3, {3, 3, 3}, {{2, 3, 4}, {2, 4, 4}, {2, 4, 4}}, -1, 1, 0, 0},
    {"attention_causal", b_attention_causal, 3, {3, 3, 3}, {{1, 3, 4}, {1, 4, 4}, {1, 4, 4}}, -1, 1, 0, 0},
    {"attention_sliding", b_attention_sliding, 3, {3, 3, 3}, {{1, 4, 4}, {1, 4, 4}, {1, 4, 4}}, -1, 1, 0, 0},
    {"attention_masked", b_attention_masked, 3, {3, 3, 3}, {{2, 2, 4}, {2, 4, 4}, {2, 4, 4}}, -1, 1, 0, 0},
    {"attention_short_keys", b_attention_short_keys, 3, {3, 3, 3}, {{1, 4, 4}, {1, 2, 4}, {1, 2, 4}}, -1, 1, 0, 0},
    {"attention_head_dim1", b_attention_head_dim1, 3, {3, 3, 3}, {{1, 3, 3}, {1, 4, 3}, {1, 4, 3}}, -1, 1, 0, 0},
    {"attention_view", b_attention_view, 3, {3, 3, 3}, {{1, 4, 3}, {1, 2, 4}, {1, 2, 4}}, -1, 1, 0, 0},
    {"attention_one_query", b_attention_one_query, 3, {3, 3, 3}, {{2, 1, 4}, {2, 3, 4}, {2, 3, 4}}, -1, 1, 0, 0},
    {"attention_gqa", b_attention_gqa, 3, {3, 3, 3}, {{1, 3, 8}, {1, 4, 4}, {1, 4, 4}}, -1, 1, 0, 0},
    {"attention_mqa", b_attention_mqa, 3, {3, 3, 3}, {{2, 3, 4}, {2, 3, 2}, {2, 3, 2}}, -1, 1, 0, 0},
    {"attention_add_mask", b_attention_add_mask, 4, {3, 3, 3, 2},
     {{1, 3, 4}, {1, 4, 4}, {1, 4, 4}, {3, 4}}, -1, 1, 0, 0},
    {"attention_add_mask_gqa", b_attention_add_mask_gqa, 4, {3, 3, 3, 4},
     {{2, 2, 4}, {2, 3, 2}, {2, 3, 2}, {2, 1, 1, 3}}, -1, 1, 0, 0},
    {"attention_add_mask_heads", b_attention_add_mask_heads, 4, {3, 3, 3, 3},
     {{1, 3, 4}, {1, 2, 2}, {1, 2, 2}, {4, 3, 1}}, -1, 1, 0, 0},
    {"attention_bool_mask_gqa", b_attention_bool_mask_gqa, 3, {3, 3, 3},
     {{1, 2, 8}, {1, 3, 4}, {1, 3, 4}}, -1, 1, 0, 0},
    {"rope_gptj_partial", b_rope_gptj_partial, 3, {3, 2, 2}, {{1, 3, 8}, {5, 1}, {5, 1}}, -1, 1, 0, 0},
    {"rope_positions", b_rope_positions, 3, {3, 2, 2}, {{2, 3, 8}, {5, 2}, {5, 2}}, -1, 1, 0, 0},
    {"rope", b_rope, 3, {3, 2, 2}, {{1, 3, 8}, {3, 2}, {3, 2}}, -1, 1, 0, 0},
    {"conv2d", b_conv2d, 3, {4, 4, 1}, {{1, 2, 4, 3}, {3, 2, 3, 2}, {3}}, -1, 1, 0, 0},
    {"conv2d_strided", b_conv2d_strided, 2, {4, 4}, {{2, 1, 7, 6}, {2, 1, 2, 3}}, -1, 1, 0, 0},
    {"conv2d_groups", b_conv2d_groups, 3, {4, 4, 1}, {{1, 4, 5, 3}, {2, 2, 3, 2}, {2}}, -1, 1, 0, 0},
    {"conv2d_crop", b_conv2d_crop, 2, {4, 4}, {{1, 1, 5, 4}, {2, 1, 2, 2}}, -1, 1, 0, 0},
    {"conv_transpose2d", b_conv_transpose2d, 3, {4, 4, 1}, {{1, 2, 3, 2}, {2, 3, 3, 2}, {3}}, -1, 1, 0, 0},
    {"conv_transpose2d_groups", b_conv_transpose2d_groups, 3, {4, 4, 1}, {{2, 4, 2, 3}, {4, 1, 2, 2}, {2}}, -1, 1,
     0, 0},
    {"conv_transpose2d_crop", b_conv_transpose2d_crop, 2, {4, 4}, {{1, 1, 5, 4}, {1, 2, 3, 3}}, -1, 1, 0, 0},
    {"conv1d", b_conv1d, 3, {3, 3, 1}, {{2, 2, 9}, {3, 2, 3}, {3}}, -1, 1, 0, 0},
    {"conv_transpose1d", b_conv_transpose1d, 3, {3, 3, 1}, {{1, 2, 4}, {2, 3, 3}, {3}}, -1, 1, 0, 0},
    {"max_pool", b_max_pool, 1, {4}, {{1, 2, 4, 4}}, -2, 2, 0, 0},
    {"max_pool_overlap", b_max_pool_overlap, 1, {4}, {{2, 1, 4, 5}}, -2, 2, 0, 0},
    {"avg_pool", b_avg_pool, 1, {4}, {{1, 2, 4, 4}}, -2, 2, 0, 0},
    {"avg_pool_padded", b_avg_pool_padded, 1, {4}, {{1, 1, 5, 4}}, -2, 2, 0, 0},

    {"fft", b_fft, R2(2, 8), -1, 1, 0, 0},
    {"ifft", b_ifft, R2(2, 6), -1, 1, 0, 0},
    {"fft_axis0", b_fft_axis0, R2(6, 2), -1, 1, 0, 0},

    {"synth_matmul", b_synth_matmul, 2, {2, 2}, {{2, 4}, {4, 2}}, -1, 1, 0, 0},
    {"synth_reconstruct", b_synth_reconstruct, R2(4, 2), -1, 1, 0, 0},
    {"spline", b_spline, 2, {3, 2}, {{2, 2, 3}, {3, 5}}, -1.2, 1.2, 0, 0},
    {"linear_q8", b_linear_q8, 2, {3, 1}, {{2, 2, 5}, {3}}, -1, 1, 0, 0},
};
#define NCASES ((int)(sizeof cases / sizeof *cases))

/* The values of one row's inputs, the cotangent weights r of its output,
 * and a direction v for Hessian-vector products. */
typedef struct {
    const gcase *gc;
    double *x[MAXIN], *v[MAXIN];
    int64_t n[MAXIN];
    double *r;
    int out_rank;
    int64_t out_shape[RLX_MAX_RANK];
} point;

/* loss = sum(f(x) * r), built in the open scope; in[] gets the inputs. */
static rlx_tensor *build_loss(const point *p, rlx_tensor **in)
{
    const gcase *gc = p->gc;
    for (int k = 0; k < MAXIN; k++)
        in[k] = k < gc->nin ? tf64(gc->rank[k], gc->shape[k], p->x[k]) : NULL;
    rlx_tensor *out = gc->build(in);
    if (!out)
        return NULL;
    return rlx_sum_all(rlx_mul(out, tf64(p->out_rank, p->out_shape, p->r)));
}

static double loss_at(const point *p)
{
    rlx_scope_begin();
    rlx_tensor *in[MAXIN];
    double v = NAN;
    rlx_tensor *loss = build_loss(p, in);
    if (!loss || rlx_item(loss, &v) != RLX_OK)
        test_fail(__FILE__, __LINE__, "%s: loss failed: %s", p->gc->name, rlx_last_error());
    rlx_scope_end();
    return v;
}

/* The row built on f32 inputs: gradients must be f32 and agree with the
 * f64 ones g[] to f32 accuracy. */
static void check_f32(const point *p, double *const *g)
{
    const gcase *gc = p->gc;
    rlx_scope_begin();
    rlx_tensor *in[MAXIN] = {0}, *gr[MAXIN] = {0};
    for (int k = 0; k < gc->nin; k++)
        in[k] = rlx_cast(tf64(gc->rank[k], gc->shape[k], p->x[k]), RLX_F32);
    rlx_tensor *out = gc->build(in);
    rlx_tensor *loss = out ? rlx_sum_all(rlx_mul(out, tf64(p->out_rank, p->out_shape, p->r))) : NULL;
    if (!loss || rlx_grad(loss, in, gc->nin, gr) != RLX_OK || rlx_realize_many(gr, gc->nin) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "%s: f32 gradient failed: %s", gc->name, rlx_last_error());
        rlx_scope_end();
        return;
    }
    for (int k = 0; k < gc->nin; k++) {
        int64_t n;
        double *v = rlx_dtype_of(gr[k]) == RLX_F32 ? read_all(gr[k], &n) : NULL;
        if (!v) {
            test_fail(__FILE__, __LINE__, "%s: f32 gradient %d is %s", gc->name, k, rlx_dtype_name(rlx_dtype_of(gr[k])));
            continue;
        }
        for (int64_t i = 0; i < p->n[k]; i++) {
            if (!test_close(v[i], g[k][i], 2e-3, 2e-4)) {
                test_fail(__FILE__, __LINE__, "%s: f32 gradient of input %d [%lld] = %.8g, f64 %.8g", gc->name, k,
                          (long long)i, v[i], g[k][i]);
                break;
            }
        }
        free(v);
    }
    rlx_scope_end();
}

/* The row on f16 or bf16 inputs (the point's values rounded to dt, the
 * cotangent weights too): the loss and every gradient have dtype dt, and
 * the gradients agree with the f32 gradients of the same expression on the
 * same rounded values, rounded to dt, within tol (relative, and relative
 * to the largest |gradient| of the input: a chain of narrow roundings,
 * so a few ulps of dt; measured, at most 2.1 ulps over every row). */
static void check_narrow(const point *p, rlx_dtype dt, double tol)
{
    const gcase *gc = p->gc;
    rlx_scope_begin();
    rlx_tensor *in[MAXIN] = {0}, *in32[MAXIN] = {0}, *g[MAXIN] = {0}, *g32[MAXIN] = {0};
    for (int k = 0; k < gc->nin; k++) {
        in[k] = rlx_cast(tf64(gc->rank[k], gc->shape[k], p->x[k]), dt);
        in32[k] = rlx_cast(in[k], RLX_F32);
    }
    rlx_tensor *r = rlx_cast(tf64(p->out_rank, p->out_shape, p->r), dt);
    rlx_tensor *out = gc->build(in), *out32 = gc->build(in32);
    rlx_tensor *loss = out ? rlx_sum_all(rlx_mul(out, r)) : NULL;
    rlx_tensor *loss32 = out32 ? rlx_sum_all(rlx_mul(out32, rlx_cast(r, RLX_F32))) : NULL;
    if (!loss || !loss32 || rlx_grad(loss, in, gc->nin, g) != RLX_OK || rlx_grad(loss32, in32, gc->nin, g32) != RLX_OK ||
        rlx_realize_many(g, gc->nin) != RLX_OK) {
        test_fail(__FILE__, __LINE__, "%s: %s gradient failed: %s", gc->name, rlx_dtype_name(dt), rlx_last_error());
        rlx_scope_end();
        return;
    }
    if (rlx_dtype_of(out) == dt && rlx_dtype_of(loss) != dt)
        test_fail(__FILE__, __LINE__, "%s: the %s loss is %s", gc->name, rlx_dtype_name(dt),
                  rlx_dtype_name(rlx_dtype_of(loss)));
    for (int k = 0; k < gc->nin; k++) {
        int64_t n, n32;
        if (rlx_dtype_of(g[k]) != dt) {
            test_fail(__FILE__, __LINE__, "%s: %s gradient %d is %s", gc->name, rlx_dtype_name(dt), k,
                      rlx_dtype_name(rlx_dtype_of(g[k])));
            continue;
        }
        double *v = read_all(g[k], &n), *w = read_all(rlx_cast(g32[k], dt), &n32);
        double scale = 0;
        for (int64_t i = 0; w && i < n32; i++)
            scale = isfinite(w[i]) ? fmax(scale, fabs(w[i])) : scale;
        for (int64_t i = 0; v && w && i < n && n == n32; i++) {
            if (!test_close(v[i], w[i], tol, tol * scale)) {
                test_fail(__FILE__, __LINE__, "%s: %s gradient of input %d [%lld] = %.6g, f32 %.6g", gc->name,
                          rlx_dtype_name(dt), k, (long long)i, v[i], w[i]);
                break;
            }
        }
        free(v);
        free(w);
    }
    rlx_scope_end();
}

/* Gradients (or, with hvp, Hessian-vector products along p->v) at p into
 * out[k] (malloc'ed). */
static bool grads_at(const point *p, bool hvp, double **out)
{
    const gcase *gc = p->gc;
    bool ok = false;
    rlx_scope_begin();
    rlx_tensor *in[MAXIN], *g[MAXIN] = {0}, *h[MAXIN] = {0};
    rlx_tensor *loss = build_loss(p, in);
    if (!loss || rlx_grad(loss, in, gc->nin, g) != RLX_OK)
        goto done;
    if (hvp) {
        rlx_tensor *gv = NULL;
        for (int k = 0; k < gc->nin; k++) {
            rlx_tensor *t = rlx_sum_all(rlx_mul(g[k], tf64(gc->rank[k], gc->shape[k], p->v[k])));
            gv = gv ? rlx_add(gv, t) : t;
        }
        if (rlx_grad(gv, in, gc->nin, h) != RLX_OK)
            goto done;
        memcpy(g, h, sizeof g);
    }
    if (rlx_realize_many(g, gc->nin) != RLX_OK)
        goto done;
    ok = true;
    for (int k = 0; k < gc->nin; k++) {
        int64_t n;
        if (rlx_dtype_of(g[k]) != RLX_F64 || rlx_numel(g[k]) != p->n[k]) {
            test_fail(__FILE__, __LINE__, "%s: gradient %d has dtype %s and %lld elements, expected f64 and %lld",
                      gc->name, k, rlx_dtype_name(rlx_dtype_of(g[k])), (long long)rlx_numel(g[k]),
                      (long long)p->n[k]);
            ok = false;
            continue;
        }
        out[k] = read_all(g[k], &n);
        ok &= out[k] != NULL;
    }
done:
    if (!ok)
        test_fail(__FILE__, __LINE__, "%s: %s failed: %s", gc->name, hvp ? "hvp" : "grad", rlx_last_error());
    rlx_scope_end();
    return ok;
}

static bool point_init(point *p, const gcase *gc)
{
    memset(p, 0, sizeof *p);
    p->gc = gc;
    for (int k = 0; k < gc->nin; k++) {
        p->n[k] = numel_of(gc->rank[k], gc->shape[k]);
        p->x[k] = malloc((size_t)(p->n[k] ? p->n[k] : 1) * sizeof(double));
        p->v[k] = malloc((size_t)(p->n[k] ? p->n[k] : 1) * sizeof(double));
        for (int64_t i = 0; i < p->n[k]; i++) {
            p->x[k][i] = test_uniform(gc->lo, gc->hi);
            p->v[k][i] = test_uniform(-1, 1);
        }
    }
    /* The output's shape, to draw the cotangent weights. */
    rlx_scope_begin();
    rlx_tensor *in[MAXIN];
    for (int k = 0; k < MAXIN; k++)
        in[k] = k < gc->nin ? tf64(gc->rank[k], gc->shape[k], p->x[k]) : NULL;
    rlx_tensor *out = gc->build(in);
    bool ok = out && rlx_dtype_of(out) == RLX_F64;
    if (ok)
        p->out_rank = rlx_shape(out, p->out_shape, RLX_MAX_RANK);
    else
        test_fail(__FILE__, __LINE__, "%s: building failed (%s)", gc->name, out ? "not f64" : rlx_last_error());
    rlx_scope_end();
    int64_t no = numel_of(p->out_rank, p->out_shape);
    p->r = malloc((size_t)(no ? no : 1) * sizeof(double));
    for (int64_t i = 0; i < no; i++)
        p->r[i] = test_uniform(-1, 1);
    return ok;
}

static void point_free(point *p)
{
    for (int k = 0; k < MAXIN; k++) {
        free(p->x[k]);
        free(p->v[k]);
    }
    free(p->r);
}

static void check_row(const gcase *gc)
{
    double h = gc->h ? gc->h : 1e-6, tol = gc->tol ? gc->tol : 1e-6;
    point p;
    double *g[MAXIN] = {0}, *hv[MAXIN] = {0};
    if (!point_init(&p, gc) || !grads_at(&p, false, g))
        goto out;
    /* first derivatives: central differences, element by element */
    for (int k = 0; k < gc->nin; k++) {
        for (int64_t i = 0; i < p.n[k]; i++) {
            double x0 = p.x[k][i];
            p.x[k][i] = x0 + h;
            double lp = loss_at(&p);
            p.x[k][i] = x0 - h;
            double lm = loss_at(&p);
            p.x[k][i] = x0;
            double fd = (lp - lm) / (2 * h);
            if (!test_close(g[k][i], fd, 100 * tol, tol)) {
                test_fail(__FILE__, __LINE__, "%s: d/d input %d [%lld] = %.12g, finite difference %.12g", gc->name, k,
                          (long long)i, g[k][i], fd);
                goto out;
            }
        }
    }
    check_f32(&p, g);
    check_narrow(&p, RLX_F16, 4 * 0x1p-10); /* 4 ulps of the largest gradient */
    check_narrow(&p, RLX_BF16, 4 * 0x1p-7);
    /* second derivatives: H v against the difference of gradients along v */
    if (!grads_at(&p, true, hv))
        goto out;
    double *gp[MAXIN] = {0}, *gm[MAXIN] = {0};
    double hh = gc->h ? gc->h : 1e-5;
    for (int k = 0; k < gc->nin; k++)
        for (int64_t i = 0; i < p.n[k]; i++)
            p.x[k][i] += hh * p.v[k][i];
    bool okp = grads_at(&p, false, gp);
    for (int k = 0; k < gc->nin; k++)
        for (int64_t i = 0; i < p.n[k]; i++)
            p.x[k][i] -= 2 * hh * p.v[k][i];
    bool okm = okp && grads_at(&p, false, gm);
    for (int k = 0; okm && k < gc->nin; k++) {
        for (int64_t i = 0; i < p.n[k]; i++) {
            double fd = (gp[k][i] - gm[k][i]) / (2 * hh);
            if (!test_close(hv[k][i], fd, 1e-3, 1e-4)) {
                test_fail(__FILE__, __LINE__, "%s: (H v) of input %d [%lld] = %.12g, finite difference %.12g",
                          gc->name, k, (long long)i, hv[k][i], fd);
                break;
            }
        }
    }
    for (int k = 0; k < MAXIN; k++) {
        free(gp[k]);
        free(gm[k]);
    }
out:
    for (int k = 0; k < MAXIN; k++) {
        free(g[k]);
        free(hv[k]);
    }
    point_free(&p);
}

static int rows_run;
static bool ran_round, ran_scaled; /* the rules only these tests reach */

TEST(finite_differences_every_function)
{
    const char *only = getenv("RLX_GRAD_ROW");
    for (int i = 0; i < NCASES; i++) {
        if (only && !strstr(cases[i].name, only))
            continue;
        int before = test_failures;
        check_row(&cases[i]);
        if (test_failures != before)
            fprintf(stderr, "  (row %s)\n", cases[i].name);
        rows_run++;
    }
}

/* ------------------------------------------------------- known cases */

static const int64_t s3[1] = {3}, s4[1] = {4};

TEST(known_dot_and_square)
{
    const float av[3] = {1, 2, 3}, bv[3] = {4, 5, 6};
    rlx_tensor *a = tf32(1, s3, av), *b = tf32(1, s3, bv);
    rlx_tensor *wrt[2] = {a, b}, *g[2];
    CHECK(rlx_grad(rlx_sum_all(rlx_mul(a, b)), wrt, 2, g) == RLX_OK);
    const double eb[3] = {4, 5, 6}, ea[3] = {1, 2, 3};
    EXPECT(g[0], RLX_F32, 1, s3, eb, 0);
    EXPECT(g[1], RLX_F32, 1, s3, ea, 0);
    const double e2[3] = {2, 4, 6};
    EXPECT(grad1(rlx_sum_all(rlx_mul(a, a)), a), RLX_F32, 1, s3, e2, 0);
}

TEST(known_relu)
{
    const float xv[4] = {-1, 2, -3, 4};
    rlx_tensor *x = tf32(1, s4, xv);
    const double e[4] = {0, 1, 0, 1};
    EXPECT(grad1(rlx_sum_all(rlx_relu(x)), x), RLX_F32, 1, s4, e, 0);
}

TEST(known_solve)
{
    const int64_t s33[2] = {3, 3};
    const double av[9] = {2, 1, 0, 1, 3, 1, 0, 1, 2}, bv[3] = {1, 2, 3};
    rlx_tensor *a = tf64(2, s33, av), *b = tf64(1, s3, bv);
    rlx_tensor *loss = rlx_sum_all(rlx_solve(a, b)), *wrt[2] = {a, b}, *g[2];
    double l;
    CHECK(rlx_item(loss, &l) == RLX_OK);
    CHECK_NEAR(l, 2, 1e-12);
    CHECK(rlx_grad(loss, wrt, 2, g) == RLX_OK);
    const double eb[3] = {0.5, 0, 0.5}, ea[9] = {-0.25, 0, -0.75, 0, 0, 0, -0.25, 0, -0.75};
    EXPECT(g[1], RLX_F64, 1, s3, eb, 1e-12);
    EXPECT(g[0], RLX_F64, 2, s33, ea, 1e-12);
}

TEST(known_hessian_vector_product)
{
    const double xv[3] = {0.5, -1, 2}, vv[3] = {1, 0.25, -0.5};
    rlx_tensor *x = tf64(1, s3, xv), *v = tf64(1, s3, vv);
    const double e[3] = {3, 3, -24};
    rlx_tensor *losses[2] = {rlx_sum_all(rlx_pow_s(x, 4)), rlx_sum_all(rlx_mul(rlx_mul(x, x), rlx_mul(x, x)))};
    for (int i = 0; i < 2; i++) {
        rlx_tensor *g = grad1(losses[i], x);
        EXPECT(grad1(rlx_sum_all(rlx_mul(g, v)), x), RLX_F64, 1, s3, e, 1e-12);
    }
    /* and the third derivative: d/dx sum(H v) = 24 x v */
    rlx_tensor *hv = grad1(rlx_sum_all(rlx_mul(grad1(losses[0], x), v)), x);
    const double e3[3] = {12, -6, -24};
    EXPECT(grad1(rlx_sum_all(hv), x), RLX_F64, 1, s3, e3, 1e-12);
}

/* One SGD step's graph over parameters w [2], b []: mean squared error of
 * X w + b against y; returns the loss and writes the updated parameters. */
static rlx_tensor *regression_step(rlx_tensor *w, rlx_tensor *b, double lr, rlx_tensor **w2, rlx_tensor **b2)
{
    const int64_t sx[2] = {4, 2};
    const double xv[8] = {1, 1, 2, 1, 1, 2, 3, 2}, yv[4] = {0, 1.5, -2, 1};
    rlx_tensor *pred = rlx_add(rlx_matmul(tf64(2, sx, xv), w), b);
    rlx_tensor *d = rlx_sub(pred, tf64(1, s4, yv));
    rlx_tensor *loss = rlx_mean_all(rlx_mul(d, d));
    rlx_tensor *wrt[2] = {w, b}, *g[2] = {NULL, NULL};
    rlx_grad(loss, wrt, 2, g);
    *w2 = rlx_sub(w, rlx_mul_s(g[0], lr));
    *b2 = rlx_sub(b, rlx_mul_s(g[1], lr));
    return loss;
}

TEST(known_linear_regression_sgd)
{
    /* Compiled once over input placeholders; each step binds the last
     * step's parameters, so the update runs without retracing. */
    const int64_t s2[1] = {2};
    rlx_tensor *w_in = rlx_input("w", RLX_F64, 1, s2), *b_in = rlx_input("b", RLX_F64, 0, NULL);
    rlx_tensor *outs[3];
    outs[0] = regression_step(w_in, b_in, 0.1, &outs[1], &outs[2]);
    rlx_program *prog = rlx_compile(outs, 3);
    CHECK(prog != NULL);
    /* The parameters are owned here (escaped from the test's scope); each
     * step runs in a scope of its own and hands its results out. */
    const double zeros2[2] = {0, 0};
    rlx_tensor *w = rlx_escape(tf64(1, s2, zeros2)), *b = rlx_escape(tf64(0, NULL, zeros2));
    double w50[2] = {0, 0}, b50 = 0;
    for (int step = 0; prog && step < 3000; step++) {
        if (step == 50) {
            rlx_read_f64(w, w50, 2);
            rlx_item(b, &b50);
        }
        rlx_binding bind[2] = {{"w", w}, {"b", b}};
        rlx_tensor *res[3];
        rlx_scope_begin();
        rlx_status st = rlx_program_run(prog, bind, 2, res);
        if (st == RLX_OK) {
            rlx_escape(res[1]);
            rlx_escape(res[2]);
        }
        rlx_scope_end(); /* frees the loss */
        if (st != RLX_OK) {
            test_fail(__FILE__, __LINE__, "step %d: %s", step, rlx_last_error());
            break;
        }
        rlx_release(w);
        rlx_release(b);
        w = rlx_escape(res[1]);
        b = rlx_escape(res[2]);
    }
    const double ew[2] = {1.5, -2}, eb[1] = {0.5};
    EXPECT(w, RLX_F64, 1, s2, ew, 0.02);
    EXPECT(b, RLX_F64, 0, NULL, eb, 0.02);
    rlx_release(w);
    rlx_release(b);
    rlx_program_free(prog);

    /* The same with the graph rebuilt each step (the uncompiled path)
     * follows the same trajectory. */
    rlx_tensor *w1 = tf64(1, s2, zeros2), *b1 = tf64(0, NULL, zeros2);
    for (int step = 0; step < 50; step++) {
        rlx_tensor *w2, *b2;
        regression_step(w1, b1, 0.1, &w2, &b2);
        rlx_tensor *both[2] = {w2, b2};
        CHECK(rlx_realize_many(both, 2) == RLX_OK);
        w1 = w2;
        b1 = b2;
    }
    EXPECT(w1, RLX_F64, 1, s2, w50, 1e-12);
    EXPECT(b1, RLX_F64, 0, NULL, &b50, 1e-12);
}

/* ---------------------------------------------------- kinks and ties */

TEST(kinks_relu_abs_at_zero)
{
    const double xv[4] = {0, -0.0, 1, -1};
    rlx_tensor *x = tf64(1, s4, xv);
    const double er[4] = {0, 0, 1, 0}, ea[4] = {0, 0, 1, -1};
    EXPECT(grad1(rlx_sum_all(rlx_relu(x)), x), RLX_F64, 1, s4, er, 0);
    EXPECT(grad1(rlx_sum_all(rlx_abs(x)), x), RLX_F64, 1, s4, ea, 0);
}

TEST(kinks_maximum_minimum_ties_split)
{
    const double av[3] = {1, 2, 3}, bv[3] = {1, 5, 0};
    rlx_tensor *a = tf64(1, s3, av), *b = tf64(1, s3, bv), *wrt[2] = {a, b}, *g[2];
    CHECK(rlx_grad(rlx_sum_all(rlx_maximum(a, b)), wrt, 2, g) == RLX_OK);
    const double ga[3] = {0.5, 0, 1}, gb[3] = {0.5, 1, 0};
    EXPECT(g[0], RLX_F64, 1, s3, ga, 0);
    EXPECT(g[1], RLX_F64, 1, s3, gb, 0);
    CHECK(rlx_grad(rlx_sum_all(rlx_minimum(a, b)), wrt, 2, g) == RLX_OK);
    const double ma[3] = {0.5, 1, 0}, mb[3] = {0.5, 0, 1};
    EXPECT(g[0], RLX_F64, 1, s3, ma, 0);
    EXPECT(g[1], RLX_F64, 1, s3, mb, 0);
    /* clamp at its bounds is a tie of maximum/minimum: half */
    const double cv[3] = {-1, 0, 1};
    rlx_tensor *c = tf64(1, s3, cv);
    const double ec[3] = {0.5, 1, 0.5};
    EXPECT(grad1(rlx_sum_all(rlx_clamp(c, -1, 1)), c), RLX_F64, 1, s3, ec, 0);
}

TEST(kinks_max_reduction_ties_split_evenly)
{
    const int64_t s24[2] = {2, 4};
    const double xv[8] = {1, 3, 3, 2, 5, 5, 5, -1};
    rlx_tensor *x = tf64(2, s24, xv);
    const int ax[1] = {1};
    const double e[8] = {0, 0.5, 0.5, 0, 1. / 3, 1. / 3, 1. / 3, 0};
    EXPECT(grad1(rlx_sum_all(rlx_max(x, ax, 1, false)), x), RLX_F64, 2, s24, e, 1e-15);
    const double em[8] = {1, 0, 0, 0, 0, 0, 0, 1};
    EXPECT(grad1(rlx_sum_all(rlx_min(x, ax, 1, false)), x), RLX_F64, 2, s24, em, 0);
    /* max over everything: one maximum, three tied */
    const double ea[8] = {0, 0, 0, 0, 1. / 3, 1. / 3, 1. / 3, 0};
    EXPECT(grad1(rlx_max(x, NULL, 0, false), x), RLX_F64, 2, s24, ea, 1e-15);
}

TEST(kinks_max_pool_ties)
{
    const int64_t s[4] = {1, 1, 2, 4};
    const double xv[8] = {1, 2, 7, 7, 2, 0, 7, 1};
    rlx_tensor *x = tf64(4, s, xv);
    const int k[2] = {2, 2};
    const double e[8] = {0, 0.5, 1. / 3, 1. / 3, 0.5, 0, 1. / 3, 0};
    EXPECT(grad1(rlx_sum_all(rlx_max_pool2d(x, k, NULL, NULL)), x), RLX_F64, 4, s, e, 1e-15);
}

TEST(kinks_prod_with_zeros)
{
    const double v1[3] = {2, 0, 3}, v2[3] = {0, 2, 0}, v3[3] = {2, 3, 4};
    const double e1[3] = {0, 6, 0}, e2[3] = {0, 0, 0}, e3[3] = {12, 8, 6};
    const double *vs[3] = {v1, v2, v3}, *es[3] = {e1, e2, e3};
    for (int i = 0; i < 3; i++) {
        rlx_tensor *x = tf64(1, s3, vs[i]);
        EXPECT(grad1(rlx_prod(x, NULL, 0, false), x), RLX_F64, 1, s3, es[i], 0);
    }
}

TEST(kinks_round_floor_ceil_sign_compare_stop)
{
    const double xv[4] = {0.5, 1.5, -2.3, 2.7};
    rlx_tensor *x = tf64(1, s4, xv);
    const double ones[4] = {1, 1, 1, 1}, zeros[4] = {0, 0, 0, 0};
    EXPECT(grad1(rlx_sum_all(rlx_round(x)), x), RLX_F64, 1, s4, ones, 0);
    ran_round = true;
    EXPECT(grad1(rlx_sum_all(rlx_floor(x)), x), RLX_F64, 1, s4, zeros, 0);
    EXPECT(grad1(rlx_sum_all(rlx_ceil(x)), x), RLX_F64, 1, s4, zeros, 0);
    EXPECT(grad1(rlx_sum_all(rlx_sign(x)), x), RLX_F64, 1, s4, zeros, 0);
    EXPECT(grad1(rlx_sum_all(rlx_cast(rlx_gt_s(x, 0), RLX_F64)), x), RLX_F64, 1, s4, zeros, 0);
    EXPECT(grad1(rlx_sum_all(rlx_cast(rlx_cast(x, RLX_I32), RLX_F64)), x), RLX_F64, 1, s4, zeros, 0);
    EXPECT(grad1(rlx_sum_all(rlx_cast(rlx_argmax(x, 0, false), RLX_F64)), x), RLX_F64, 1, s4, zeros, 0);
    /* x * stop_gradient(x): the stopped factor is a constant */
    EXPECT(grad1(rlx_sum_all(rlx_mul(x, rlx_stop_gradient(x))), x), RLX_F64, 1, s4, xv, 0);
    EXPECT(grad1(rlx_sum_all(rlx_stop_gradient(x)), x), RLX_F64, 1, s4, zeros, 0);
}

TEST(kinks_pow_at_zero)
{
    /* d/da a^b at a = 0: b a^(b-1), 0 for b = 0; d/db: 0 where a = 0, b >= 0 */
    const double av[4] = {0, 0, 0, 2}, bv[4] = {0, 1, 2, 0};
    rlx_tensor *a = tf64(1, s4, av), *b = tf64(1, s4, bv), *wrt[2] = {a, b}, *g[2];
    CHECK(rlx_grad(rlx_sum_all(rlx_pow(a, b)), wrt, 2, g) == RLX_OK);
    const double ga[4] = {0, 1, 0, 0}, gb[4] = {0, 0, 0, log(2.0)};
    EXPECT(g[0], RLX_F64, 1, s4, ga, 0);
    EXPECT(g[1], RLX_F64, 1, s4, gb, 1e-15);
}

TEST(kinks_scatter_overwrite)
{
    /* the last in index order wins: its src gets g, the overwritten base 0 */
    rlx_tensor *x = tf64(1, s4, (const double[]){1, 2, 3, 4}), *v = tf64(1, s3, (const double[]){5, 6, 7});
    rlx_tensor *idx = ti64(1, s3, (const int64_t[]){1, -3, 3}), *wrt[2] = {x, v}, *g[2];
    rlx_tensor *w = tf64(1, s4, (const double[]){10, 20, 30, 40});
    CHECK(rlx_grad(rlx_sum_all(rlx_mul(rlx_scatter(x, 0, idx, v), w)), wrt, 2, g) == RLX_OK);
    EXPECT(g[0], RLX_F64, 1, s4, ((const double[]){10, 0, 30, 0}), 0);
    EXPECT(g[1], RLX_F64, 1, s3, ((const double[]){0, 20, 40}), 0);
    CHECK(rlx_grad(rlx_sum_all(rlx_mul(rlx_scatter_add(x, 0, idx, v), w)), wrt, 2, g) == RLX_OK);
    EXPECT(g[0], RLX_F64, 1, s4, ((const double[]){10, 20, 30, 40}), 0);
    EXPECT(g[1], RLX_F64, 1, s3, ((const double[]){20, 20, 40}), 0);
}

/* Regression (issue 17): the gradient with respect to a zero target is
 * -log_softmax(logits) there too, as PyTorch's, not 0. */
TEST(cross_entropy_gradient_at_zero_targets)
{
    const int64_t s13[2] = {1, 3};
    rlx_tensor *z = tf64(2, s13, (const double[]){0.5, -1, 2}), *p = tf64(2, s13, (const double[]){0.25, 0.75, 0});
    rlx_tensor *wrt[2] = {z, p}, *g[2];
    CHECK(rlx_grad(rlx_sum_all(rlx_cross_entropy(z, p)), wrt, 2, g) == RLX_OK);
    double lse = log(exp(0.5) + exp(-1.0) + exp(2.0));
    const double gp[3] = {lse - 0.5, lse + 1, lse - 2};
    EXPECT(g[1], RLX_F64, 2, s13, gp, 1e-14);
    /* the logits' gradient is softmax - p, and a -inf logit with a zero target stays finite */
    const double gz[3] = {exp(0.5 - lse) - 0.25, exp(-1 - lse) - 0.75, exp(2 - lse)};
    EXPECT(g[0], RLX_F64, 2, s13, gz, 1e-14);
    rlx_tensor *zi = tf64(2, s13, (const double[]){0.5, -INFINITY, 2}), *pi = tf64(2, s13, (const double[]){0.5, 0, 0.5});
    EXPECT(rlx_cross_entropy(zi, pi), RLX_F64, 1, s13, ((const double[]){0.5 * (log(exp(0.5) + exp(2.0)) - 0.5) +
                                                                         0.5 * (log(exp(0.5) + exp(2.0)) - 2)}),
           1e-14);
    CHECK(rlx_grad(rlx_sum_all(rlx_cross_entropy(zi, pi)), (rlx_tensor *[]){zi}, 1, g) == RLX_OK);
    double gzi[3];
    CHECK_EQ_INT(rlx_read_f64(g[0], gzi, 3), RLX_OK);
    CHECK(isfinite(gzi[0]) && gzi[1] == 0 && isfinite(gzi[2]));
}

/* Regression (issue 17): norm and std at 0 have gradient 0 (PyTorch's
 * subgradient), not NaN. */
TEST(kinks_norm_std_at_zero)
{
    const int64_t s23[2] = {2, 3};
    rlx_tensor *x = tf64(2, s23, (const double[]){0, 0, 0, 3, 0, 4});
    const int ax[1] = {1};
    EXPECT(grad1(rlx_sum_all(rlx_norm(x, ax, 1, false)), x), RLX_F64, 2, s23,
           ((const double[]){0, 0, 0, 0.6, 0, 0.8}), 1e-15);
    EXPECT(grad1(rlx_sum_all(rlx_norm(x, NULL, 0, false)), x), RLX_F64, 2, s23,
           ((const double[]){0, 0, 0, 0.6, 0, 0.8}), 1e-15);
    rlx_tensor *z = rlx_zeros(RLX_F64, 2, s23);
    EXPECT(grad1(rlx_sum_all(rlx_norm(z, NULL, 0, false)), z), RLX_F64, 2, s23, ((const double[6]){0}), 0);
    rlx_tensor *c = tf64(2, s23, (const double[]){2, 2, 2, 1, 2, 3});
    double sd = sqrt(2.0 / 3.0);
    EXPECT(grad1(rlx_sum_all(rlx_std(c, ax, 1, true)), c), RLX_F64, 2, s23,
           ((const double[]){0, 0, 0, -1 / (3 * sd), 0, 1 / (3 * sd)}), 1e-15);
    EXPECT(rlx_std(c, ax, 1, false), RLX_F64, 1, (const int64_t[]){2}, ((const double[]){0, sd}), 1e-15);
}

TEST(scaled_matmul_straight_through)
{
    const int64_t sx[2] = {2, 4}, sw[2] = {3, 4}, so[2] = {2, 3};
    rlx_tensor *x = trand(RLX_F32, 2, sx, -1, 1), *w = trand(RLX_F32, 2, sw, -1, 1);
    rlx_tensor *wrt[2] = {x, w}, *g[2];
    CHECK(rlx_grad(rlx_sum_all(rlx_scaled_matmul(x, w, RLX_FP8_E4M3, 2)), wrt, 2, g) == RLX_OK);
    /* mxquant is the identity to the gradient: d/dx = ones @ q(w), d/dw = ones^T @ q(x);
     * q(w)^T is scaled_matmul(I, w) since the identity quantizes exactly. */
    rlx_tensor *qwt = rlx_scaled_matmul(rlx_cast(rlx_eye(RLX_F32, 4), RLX_F32), w, RLX_FP8_E4M3, 2);
    rlx_tensor *qxt = rlx_scaled_matmul(rlx_eye(RLX_F32, 4), x, RLX_FP8_E4M3, 2);
    EXPECT_SAME(g[0], rlx_matmul(rlx_ones(RLX_F32, 2, so), rlx_t(qwt)), 1e-6);
    EXPECT_SAME(g[1], rlx_matmul_t(rlx_ones(RLX_F32, 2, (const int64_t[]){3, 2}), qxt), 1e-6);
    ran_scaled = true;
}

/* ------------------------------------------------- graph properties */

TEST(wrt_unreachable_intermediate_and_repeated)
{
    const double xv[3] = {1, 2, 3};
    rlx_tensor *x = tf64(1, s3, xv), *y = tf64(1, s3, xv);
    rlx_tensor *u = rlx_exp(x);
    rlx_tensor *loss = rlx_sum_all(rlx_mul(u, u));
    rlx_tensor *z = rlx_zeros(RLX_F32, 2, (const int64_t[]){2, 5});
    rlx_tensor *wrt[5] = {y, u, x, z, x}, *g[5];
    CHECK(rlx_grad(loss, wrt, 5, g) == RLX_OK);
    const double zero3[3] = {0, 0, 0}, zero10[10] = {0};
    EXPECT(g[0], RLX_F64, 1, s3, zero3, 0); /* not reachable: zeros of its shape */
    EXPECT(g[3], RLX_F32, 2, ((const int64_t[]){2, 5}), zero10, 0);
    double du[3], dx[3];
    for (int i = 0; i < 3; i++) {
        du[i] = 2 * exp(xv[i]);
        dx[i] = 2 * exp(2 * xv[i]);
    }
    EXPECT(g[1], RLX_F64, 1, s3, du, 1e-12);
    EXPECT(g[2], RLX_F64, 1, s3, dx, 1e-12);
    EXPECT(g[4], RLX_F64, 1, s3, dx, 1e-12);
    /* loss itself: ones; no wrt at all is fine */
    const double ones[3] = {1, 1, 1};
    EXPECT(grad1(u, u), RLX_F64, 1, s3, ones, 0);
    CHECK(rlx_grad(loss, NULL, 0, NULL) == RLX_OK);
    /* a view as wrt: the gradient has the view's shape */
    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
    rlx_tensor *m = tf64(2, s23, (const double[]){1, 2, 3, 4, 5, 6});
    rlx_tensor *mt = rlx_t(m);
    const double emt[6] = {1, 4, 2, 5, 3, 6}, e2mt[6] = {2, 8, 4, 10, 6, 12};
    EXPECT(grad1(rlx_sum_all(rlx_mul(rlx_t(m), rlx_t(m))), mt), RLX_F64, 2, s32, e2mt, 0);
    EXPECT(grad1(rlx_sum_all(rlx_mul(mt, rlx_stop_gradient(mt))), mt), RLX_F64, 2, s32, emt, 0);
    /* a constant loss */
    EXPECT(grad1(rlx_sum_all(rlx_ones(RLX_F64, 1, s3)), x), RLX_F64, 1, s3, zero3, 0);
}

TEST(f32_gradients_and_realize_together)
{
    const int64_t s23[2] = {2, 3};
    rlx_tensor *x = trand(RLX_F32, 2, s23, -1, 1), *w = trand(RLX_F32, 2, s23, -1, 1);
    rlx_tensor *loss = rlx_mean_all(rlx_tanh(rlx_mul(x, w)));
    rlx_tensor *wrt[2] = {x, w}, *g[2];
    CHECK(rlx_grad(loss, wrt, 2, g) == RLX_OK);
    CHECK(rlx_dtype_of(g[0]) == RLX_F32 && rlx_dtype_of(g[1]) == RLX_F32);
    rlx_tensor *all[3] = {loss, g[0], g[1]};
    CHECK(rlx_realize_many(all, 3) == RLX_OK);
    CHECK(rlx_is_realized(g[0]) && rlx_is_realized(g[1]) && rlx_is_realized(loss));
    /* gradients of a realized graph are unchanged */
    rlx_tensor *g2;
    g2 = grad1(loss, x);
    EXPECT_SAME(g2, g[0], 0);
    /* gradient w.r.t. an f64 input through a cast to f32 is f64 */
    rlx_tensor *d = tf64(2, s23, (const double[]){1, 2, 3, 4, 5, 6});
    rlx_tensor *gd = grad1(rlx_sum_all(rlx_mul(rlx_cast(d, RLX_F32), x)), d);
    CHECK(rlx_dtype_of(gd) == RLX_F64);
    EXPECT_SAME(rlx_cast(gd, RLX_F32), x, 0);
}

TEST(deep_chain_100000)
{
    const double xv[1] = {0.5};
    rlx_tensor *x = tf64(1, (const int64_t[]){1}, xv);
    rlx_scope_begin();
    rlx_tensor *y = x;
    for (int i = 0; i < 100000; i++)
        y = rlx_add(y, x); /* y_i = y_{i-1} + x */
    rlx_tensor *g = grad1(rlx_sum_all(y), x);
    rlx_escape(g); /* into the test's scope */
    rlx_scope_end();
    const double e[1] = {100001};
    EXPECT(g, RLX_F64, 1, ((const int64_t[]){1}), e, 0);
}

/* ---------------------------------------------------------- errors */

TEST(bad_arguments)
{
    const double xv[3] = {1, 2, 3};
    rlx_tensor *x = tf64(1, s3, xv), *loss = rlx_sum_all(x);
    rlx_tensor *junk = (rlx_tensor *)(uintptr_t)1;
    rlx_tensor *g[2] = {junk, junk}, *wrt[2] = {x, NULL};
    CHECK_ERR(rlx_grad(loss, wrt, -1, g), RLX_E_ARG, "rlx_grad: ");
    CHECK_ERR(rlx_grad(loss, NULL, 1, g), RLX_E_ARG, "rlx_grad: ");
    CHECK(g[0] == NULL);
    g[0] = junk;
    CHECK_ERR(rlx_grad(loss, wrt, 1, NULL), RLX_E_ARG, "rlx_grad: ");
    CHECK_ERR(rlx_grad(loss, wrt, 2, g), RLX_E_ARG, "rlx_grad: ");
    CHECK(g[0] == NULL && g[1] == NULL);
    g[0] = g[1] = junk;
    CHECK_ERR(rlx_grad(NULL, wrt, 1, g), RLX_E_ARG, "rlx_grad: ");
    CHECK(g[0] == NULL);
    rlx_tensor *xi = ti32(1, s3, (const int32_t[]){1, 2, 3});
    g[0] = junk;
    CHECK_ERR(rlx_grad(rlx_sum_all(xi), wrt, 1, g), RLX_E_DTYPE, "rlx_grad: ");
    CHECK(g[0] == NULL);
    rlx_tensor *wi[2] = {x, xi};
    g[0] = g[1] = junk;
    CHECK_ERR(rlx_grad(rlx_sum_all(rlx_add(x, xi)), wi, 2, g), RLX_E_DTYPE, "rlx_grad: ");
    CHECK(g[0] == NULL && g[1] == NULL);
    /* narrow integers are refused as loss and as wrt, naming the dtype */
    const rlx_dtype narrow_ints[4] = {RLX_I8, RLX_U8, RLX_I16, RLX_U32};
    for (int i = 0; i < 4; i++) {
        rlx_tensor *xn = rlx_cast(x, narrow_ints[i]), *wn[1] = {xn};
        rlx_clear_error();
        CHECK(rlx_grad(rlx_sum_all(rlx_cast(xn, RLX_F32)), wn, 1, g) == RLX_E_DTYPE);
        CHECK(strstr(rlx_last_error(), "rlx_grad") && strstr(rlx_last_error(), rlx_dtype_name(narrow_ints[i])));
        CHECK_ERR(rlx_grad(rlx_max(xn, NULL, 0, false), wrt, 1, g), RLX_E_DTYPE, "rlx_grad: ");
    }
    rlx_tensor *wb[1] = {rlx_gt_s(x, 1)};
    CHECK_ERR(rlx_grad(loss, wb, 1, g), RLX_E_DTYPE, "rlx_grad: ");
    /* a gather by a 2-D index off two dynamic dims is differentiated
     * (values: test_dynamic_ops.c) */
    rlx_tensor *din = rlx_input("d", RLX_F64, 3, (const int64_t[]){-1, -1, 3});
    rlx_tensor *wd[1] = {din}, *i22 = rlx_zeros(RLX_I64, 2, (const int64_t[]){2, 2});
    CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_exp(rlx_gather(din, i22, 2))), wd, 1, g), RLX_OK);
    /* NULL propagation: the first error is kept */
    rlx_clear_error();
    rlx_tensor *bad = rlx_reshape(x, 1, (const int64_t[]){4});
    CHECK(rlx_grad(bad, wrt, 1, g) == RLX_E_SHAPE);
    CHECK(strncmp(rlx_last_error(), "rlx_reshape", 11) == 0);
    rlx_clear_error();
}

/* Builds a small network's loss and its gradients with the n-th
 * allocation failing: it must fail cleanly (RLX_E_NOMEM, no gradient
 * handed out) or succeed, and leak nothing. */
static int grad_workload(void)
{
    rlx_scope_begin();
    const int64_t sx[2] = {3, 4}, sw[2] = {2, 4};
    rlx_tensor *x = rlx_from_data(RLX_F32, 2, sx, (float[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    rlx_tensor *w = rlx_from_data(RLX_F32, 2, sw, (float[]){1, -1, 0.5f, 2, 0, 1, -2, 1});
    rlx_tensor *y = rlx_log_softmax(rlx_linear_act(x, w, NULL, RLX_ACT_GELU), 1);
    rlx_tensor *loss = rlx_mean_all(rlx_mul(y, rlx_max(y, NULL, 0, false)));
    rlx_tensor *wrt[2] = {x, w}, *g[2] = {(rlx_tensor *)(uintptr_t)1, (rlx_tensor *)(uintptr_t)1};
    rlx_status st = rlx_grad(loss, wrt, 2, g);
    int ok = st == RLX_OK && g[0] && g[1];
    if (st != RLX_OK && (g[0] || g[1]))
        test_fail(__FILE__, __LINE__, "a failed rlx_grad handed out a gradient");
    ok = ok && rlx_realize_many(g, 2) == RLX_OK;
    rlx_scope_end();
    return ok;
}

TEST(allocation_failures) { ALLOC_WALK(grad_workload, 100); }

TEST(empty_tensors)
{
    const int64_t s03[2] = {0, 3};
    rlx_tensor *x = tf64(2, s03, NULL);
    rlx_tensor *loss = rlx_add(rlx_sum_all(rlx_exp(x)), rlx_sum_all(rlx_max(x, (const int[]){0}, 1, false)));
    rlx_tensor *g = grad1(loss, x);
    EXPECT(g, RLX_F64, 2, s03, NULL, 0);
}

/* conj, imag and complex pass gradients (test_complex.c checks every
 * complex rule by finite differences): sum Im(conj(z)^2) = sum -2xy. */
TEST(complex_rules)
{
    const int64_t s[1] = {3};
    double xv[3] = {1, -2, 0.5}, yv[3] = {3, 0.25, -1}, gx[3], gy[3];
    rlx_tensor *x = tf64(1, s, xv), *y = tf64(1, s, yv);
    rlx_tensor *cz = rlx_conj(rlx_complex(x, y));
    rlx_tensor *loss = rlx_sum_all(rlx_imag(rlx_mul(cz, cz)));
    rlx_tensor *wrt[2] = {x, y}, *g[2];
    CHECK(rlx_grad(loss, wrt, 2, g) == RLX_OK);
    for (int i = 0; i < 3; i++) {
        gx[i] = -2 * yv[i];
        gy[i] = -2 * xv[i];
    }
    EXPECT(g[0], RLX_F64, 1, s, gx, 1e-12);
    EXPECT(g[1], RLX_F64, 1, s, gy, 1e-12);
}

/* ---------------------------------------------------------- coverage */

/* The rule of ATTENTION_BWD (the attention gradient kernel, knob
 * attention_bwd 1; auto takes it only from 128 keys): H v through it
 * against H v through the composite (knob 0). tests/test_attention_bwd.c
 * checks the kernel's values. */
TEST(attention_bwd_rule_second_order)
{
    int64_t sq[3] = {1, 3, 4}, sk[3] = {1, 5, 2};
    rlx_tensor *h[2][3];
    for (int f = 0; f < 2; f++) {
        double x[20];
        for (int i = 0; i < 20; i++)
            x[i] = sin(1.3 * i + 0.2);
        rlx_tensor *q = tf64(3, sq, x), *k = tf64(3, sk, x + 2), *v = tf64(3, sk, x + 7), *wrt[3] = {q, k, v}, *g[3];
        CHECK(rlx_set_option("attention_bwd", f ? "0" : "1") == RLX_OK);
        rlx_attention_opts o = {.num_kv_heads = 1, .mask = RLX_MASK_CAUSAL};
        rlx_tensor *y = rlx_attention_ex(q, k, v, 2, 2, &o);
        CHECK_EQ_INT(rlx_grad(rlx_sum_all(rlx_mul(y, rlx_cos(q))), wrt, 3, g), RLX_OK);
        rlx_tensor *dot = rlx_add(rlx_add(rlx_sum_all(rlx_mul(g[0], rlx_sin(q))), rlx_sum_all(rlx_mul(g[1], k))),
                                  rlx_sum_all(rlx_mul(g[2], rlx_exp(v))));
        CHECK_EQ_INT(rlx_grad(dot, wrt, 3, h[f]), RLX_OK);
        CHECK(rlx_set_option("attention_bwd", "default") == RLX_OK);
    }
    for (int i = 0; i < 3; i++)
        EXPECT_SAME(h[0][i], h[1][i], 1e-10);
}

TEST(vjp_table_covers_every_primitive)
{
    /* Exactly these primitives pass no gradient or have no sources; every
     * other one must have a rule, and every rule must have been reached by
     * the tests above (when the whole file runs). */
    static const char *const zero_or_leaf[] = {"buffer", "const", "iota",  "rand", "input", "sign",
                                               "floor",  "ceil",  "not",   "stop_gradient", "eq",
                                               "ne",     "lt",    "le",    "gt",   "ge",    "logical_and",
                                               "logical_or", "argmax", "argmin", "argsort", "multinomial",
                                               "rand_seeded"};
    int n = ad_op_count(), nzero = (int)(sizeof zero_or_leaf / sizeof *zero_or_leaf), rules = 0;
    bool all_ran = rows_run == NCASES && ran_round && ran_scaled;
    CHECK(n > 60);
    for (int op = 0; op < n; op++) {
        const char *name = ad_op_name(op);
        int kind = ad_vjp_kind(op);
        bool listed = false;
        for (int i = 0; i < nzero; i++)
            listed |= strcmp(zero_or_leaf[i], name) == 0;
        if (kind == AD_MISSING)
            test_fail(__FILE__, __LINE__, "primitive %s has no VJP row", name);
        else if (listed != (kind != AD_RULE))
            test_fail(__FILE__, __LINE__, "primitive %s: row kind %d, expected %s", name, kind,
                      listed ? "zero or leaf" : "a rule");
        if (kind == AD_RULE) {
            rules++;
            if (all_ran && !ad_vjp_used(op))
                test_fail(__FILE__, __LINE__, "the VJP rule of %s was never exercised", name);
        }
    }
    CHECK(ad_vjp_kind(-1) == -1 && ad_vjp_kind(n) == -1 && ad_op_name(n) == NULL);
    if (!all_ran)
        printf("  (a filtered run: whether every rule was exercised is not checked)\n");
    else
        printf("  %d primitives: %d rules exercised, %d without gradient; %d table rows\n", n, rules, n - rules,
               NCASES);
}


/* f16 and bf16 parameters get gradients of their dtype whose values are
 * exact where the arithmetic is: d sum(x*x + 3x) = 2x + 3, and through a
 * bf16 matmul (computed in f32) d sum(x @ w) / dw = x^T 1. */
TEST(narrow_float_gradients_known)
{
    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
    const rlx_dtype dts[2] = {RLX_F16, RLX_BF16};
    EACH_BACKEND(b) for (int i = 0; i < 2; i++) {
        double xv[6] = {1, -2, 0.5, 4, 0.25, -3}, wv[6] = {1, 2, 3, 4, 5, 6};
        rlx_tensor *x = test_tensor(dts[i], 2, s23, xv), *w = test_tensor(dts[i], 2, s32, wv);
        rlx_tensor *loss = rlx_sum_all(rlx_add(rlx_mul(x, x), rlx_mul_s(x, 3)));
        rlx_tensor *g[2] = {NULL, NULL}, *wrt[2] = {x, w};
        CHECK(rlx_dtype_of(loss) == dts[i]);
        CHECK(rlx_grad(loss, wrt, 1, g) == RLX_OK);
        double want[6];
        for (int k = 0; k < 6; k++)
            want[k] = 2 * xv[k] + 3;
        EXPECT(g[0], dts[i], 2, s23, want, 0);
        CHECK(rlx_grad(rlx_sum_all(rlx_matmul(x, w)), wrt, 2, g) == RLX_OK);
        double gx[6] = {3, 7, 11, 3, 7, 11}, gw[6] = {5, 5, -1.75, -1.75, -2.5, -2.5};
        EXPECT(g[0], dts[i], 2, s23, gx, 0);
        EXPECT(g[1], dts[i], 2, s32, gw, 0);
    }
}

TEST_MAIN(T(kinks_scatter_overwrite), T(cross_entropy_gradient_at_zero_targets), T(kinks_norm_std_at_zero),
          T(known_dot_and_square), T(known_relu), T(known_solve), T(known_hessian_vector_product),
          T(known_linear_regression_sgd), T(kinks_relu_abs_at_zero), T(kinks_maximum_minimum_ties_split),
          T(kinks_max_reduction_ties_split_evenly), T(kinks_max_pool_ties), T(kinks_prod_with_zeros),
          T(kinks_round_floor_ceil_sign_compare_stop), T(kinks_pow_at_zero), T(scaled_matmul_straight_through),
          T(wrt_unreachable_intermediate_and_repeated), T(f32_gradients_and_realize_together),
          T(deep_chain_100000), T(bad_arguments), T(allocation_failures), T(empty_tensors), T(complex_rules),
          T(finite_differences_every_function), T(attention_bwd_rule_second_order),
          T(vjp_table_covers_every_primitive), T(narrow_float_gradients_known))
