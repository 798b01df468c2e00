/*
 * norm.c — the normalization and regularization layers ported from
 * PyTorch's torch.nn.functional: batch_norm (training and evaluation),
 * group_norm and dropout.
 *
 * All three are composites of public calls built inside ts_open/ts_close
 * (see nn.c), so the JIT fuses them and rlx_grad differentiates them with
 * the existing rules. Arguments are checked first with user-facing
 * messages. Integer inputs compute in f32; bool inputs are RLX_E_DTYPE.
 * Dropout's mask comes from the in-graph counter-based RNG (IR_OP_RAND):
 * a pure function of (shape, seed), the same on both backends, evaluated
 * at realization rather than held as user data.
 */
#include <math.h>
#include <string.h>

#include "tensor/ts.h"

static bool eps_ok(const char *fn, double eps)
{
    if (eps >= 0 && !isinf(eps))
        return true;
    ts_error(RLX_E_ARG, fn, "eps must be finite and >= 0, got %g", eps);
    return false;
}

/* An optional per-channel parameter: NULL, or numeric of shape [c]. */
static bool channel_param(const char *fn, const char *arg, rlx_tensor *p, int64_t c, const ir_node *xn)
{
    if (!p)
        return true;
    if (!ts_numeric(fn, arg, p))
        return false;
    ir_node *pn = ts_node(p);
    if (pn->rank == 1 && pn->shape[0] == c)
        return true;
    ts_error(RLX_E_SHAPE, fn, "%s must be [%lld] (the channels, dim 1 of x %s), got %s", arg, (long long)c,
             ts_shape_str(xn), ts_shape_str(pn));
    return false;
}

/* p [C] reshaped to [C, 1, ..., 1] so that it broadcasts along axis 1 of a
 * rank-`rank` tensor. */
static rlx_tensor *per_channel(rlx_tensor *p, int rank)
{
    int64_t shape[RLX_MAX_RANK];
    shape[0] = ts_node(p)->shape[0];
    for (int i = 1; i < rank - 1; i++)
        shape[i] = 1;
    return rlx_reshape(p, rank - 1, shape);
}

/* y * weight + bias per channel; weight and bias may be NULL. */
static rlx_tensor *affine(rlx_tensor *y, rlx_tensor *weight, rlx_tensor *bias, int rank)
{
    if (weight)
        y = rlx_mul(y, per_channel(weight, rank));
    if (bias)
        y = rlx_add(y, per_channel(bias, rank));
    return y;
}

/* ------------------------------------------------------------ batch norm */

/* The reduced element count per channel (every axis but 1); -1 when a
 * reduced dim is dynamic. */
static int64_t per_channel_count(const ir_node *xn)
{
    int64_t n = 1;
    for (int i = 0; i < xn->rank; i++) {
        if (i == 1)
            continue;
        if (xn->shape[i] < 0)
            return -1;
        n *= xn->shape[i];
    }
    return n;
}

/* A tensor argument required here; a NULL records RLX_E_ARG saying why,
 * unless an error is already recorded (NULL propagation). */
static bool required(const char *fn, const char *arg, rlx_tensor *t, const char *why)
{
    if (t)
        return true;
    if (rlx_last_status() == RLX_OK)
        ts_error(RLX_E_ARG, fn, "%s is NULL; %s", arg, why);
    return false;
}

static bool batch_norm_check(const char *fn, rlx_tensor *x, rlx_tensor *rm, rlx_tensor *rv, rlx_tensor *w,
                             rlx_tensor *b, bool training, double momentum, double eps, bool want_stats)
{
    if (ts_null(fn, "x", x) || !ts_numeric(fn, "x", x))
        return false;
    ir_node *xn = ts_node(x);
    if (xn->rank < 2) {
        ts_error(RLX_E_SHAPE, fn, "x must be [N, C, ...] of rank >= 2, got %s", ts_shape_str(xn));
        return false;
    }
    int64_t c = xn->shape[1];
    if (c < 0) {
        ts_error(RLX_E_SHAPE, fn, "the channel dim of x %s must be static", ts_shape_str(xn));
        return false;
    }
    /* The running statistics come in pairs; evaluation and new_* need
     * them. A NULL there may be a failed expression: its error is kept. */
    const char *why = !training ? "evaluation needs it" : want_stats ? "new_mean/new_var need it"
                                                                     : "the running statistics come in pairs";
    if ((!training || want_stats || rm || rv) && (!required(fn, "running_mean", rm, why) ||
                                                  !required(fn, "running_var", rv, why)))
        return false;
    if (!channel_param(fn, "running_mean", rm, c, xn) || !channel_param(fn, "running_var", rv, c, xn) ||
        !channel_param(fn, "weight", w, c, xn) || !channel_param(fn, "bias", b, c, xn) || !eps_ok(fn, eps))
        return false;
    if (!(momentum >= 0 && momentum <= 1)) {
        ts_error(RLX_E_ARG, fn, "momentum must be in [0, 1], got %g", momentum);
        return false;
    }
    /* PyTorch's "Expected more than 1 value per channel when training":
     * the unbiased variance divides by n - 1. An empty batch passes. */
    int64_t n = per_channel_count(xn);
    if (training && n == 1) {
        ts_error(RLX_E_SHAPE, fn, "training needs more than 1 value per channel, x is %s", ts_shape_str(xn));
        return false;
    }
    return true;
}

/* (1 - m) * running + m * batch, in running's float dtype (f32 for
 * integers; f16/bf16 computed in f32 and rounded once). */
static rlx_tensor *blend(rlx_tensor *running, rlx_tensor *batch, double m)
{
    rlx_tensor *r = ts_as_float(running);
    rlx_tensor *v = rlx_add(rlx_mul_s(r, 1 - m), rlx_mul_s(batch, m));
    return rlx_cast(v, ts_float_dtype(ts_node(running)->dtype));
}

/* The running statistics after a training step, into *m_out and *v_out:
 * mean and var are the batch's (keepdim, biased var); running_var takes
 * the unbiased variance, as PyTorch. n counts at run time when a reduced
 * dim is dynamic (n = 1 there gives NaN, as 0/0). */
static void running_update(rlx_tensor *xf, const int *axes, int na, rlx_tensor *mean, rlx_tensor *var,
                           rlx_tensor *rm, rlx_tensor *rv, double momentum, rlx_tensor **m_out, rlx_tensor **v_out)
{
    ir_node *xn = ts_node(xf);
    int64_t c = xn->shape[1], n = per_channel_count(xn);
    if (n == 0) { /* nothing observed: the running statistics stay */
        *m_out = rm;
        *v_out = rv;
        return;
    }
    rlx_tensor *bv = rlx_reshape(var, 1, &c), *unbiased;
    if (n > 0) {
        unbiased = rlx_mul_s(bv, (double)n / (double)(n - 1));
    } else {
        rlx_tensor *cnt = rlx_sum(rlx_ones_like(xf), axes, na, false);
        unbiased = rlx_div(rlx_mul(bv, cnt), rlx_sub_s(cnt, 1));
    }
    *m_out = blend(rm, rlx_reshape(mean, 1, &c), momentum);
    *v_out = blend(rv, unbiased, momentum);
}

rlx_tensor *rlx_batch_norm(rlx_tensor *x, rlx_tensor *running_mean, rlx_tensor *running_var, rlx_tensor *weight,
                           rlx_tensor *bias, bool training, double momentum, double eps, rlx_tensor **new_mean,
                           rlx_tensor **new_var)
{
    const char *fn = "rlx_batch_norm";
    if (new_mean)
        *new_mean = NULL;
    if (new_var)
        *new_var = NULL;
    if (!batch_norm_check(fn, x, running_mean, running_var, weight, bias, training, momentum, eps,
                          new_mean || new_var) ||
        !ts_open(fn))
        return NULL;
    int rank = ts_node(x)->rank;
    rlx_tensor *xf = ts_as_float(x), *y, *m_out = running_mean, *v_out = running_var;
    if (!training) {
        rlx_tensor *mean = per_channel(running_mean, rank), *var = per_channel(running_var, rank);
        y = rlx_mul(rlx_sub(xf, mean), rlx_rsqrt(rlx_add_s(ts_as_float(var), eps)));
    } else {
        int axes[RLX_MAX_RANK], na = 0;
        for (int i = 0; i < rank; i++)
            if (i != 1)
                axes[na++] = i;
        rlx_tensor *mean = rlx_mean(xf, axes, na, true);
        rlx_tensor *d = rlx_sub(xf, mean);
        rlx_tensor *var = rlx_mean(rlx_mul(d, d), axes, na, true); /* biased, for normalizing */
        y = rlx_mul(d, rlx_rsqrt(rlx_add_s(var, eps)));
        if ((new_mean || new_var) && xf)
            running_update(xf, axes, na, mean, var, running_mean, running_var, momentum, &m_out, &v_out);
    }
    y = affine(y, weight, bias, rank);
    rlx_dtype out = ts_promote_opt(ts_promote_opt(ts_float_dtype(ts_node(x)->dtype), weight), bias);
    if (!training)
        out = ts_promote_opt(ts_promote_opt(out, running_mean), running_var);
    /* The statistics leave the internal scope as new references, both
     * retained there first. An escape fails only for want of memory in an
     * enclosing scope, which then owns (and frees) what escaped before;
     * ts_close releases the rest. */
    rlx_tensor *m_ref = new_mean ? rlx_retain(m_out) : NULL, *v_ref = new_var ? rlx_retain(v_out) : NULL;
    bool ok = y != NULL && (!new_mean || m_ref) && (!new_var || v_ref);
    if (ok && new_mean)
        ok = (*new_mean = rlx_escape(m_ref)) != NULL;
    if (ok && new_var)
        ok = (*new_var = rlx_escape(v_ref)) != NULL;
    if (!ok) {
        if (new_mean)
            *new_mean = NULL;
        if (new_var)
            *new_var = NULL;
    }
    return ts_close_as(ok ? y : NULL, out);
}

/* ------------------------------------------------------------ group norm */

rlx_tensor *rlx_group_norm(rlx_tensor *x, int num_groups, rlx_tensor *weight, rlx_tensor *bias, double eps)
{
    const char *fn = "rlx_group_norm";
    if (ts_null(fn, "x", x) || !ts_numeric(fn, "x", x))
        return NULL;
    ir_node *xn = ts_node(x);
    if (xn->rank < 2) {
        ts_error(RLX_E_SHAPE, fn, "x must be [N, C, ...] of rank >= 2, got %s", ts_shape_str(xn));
        return NULL;
    }
    int64_t c = xn->shape[1], rest = 1;
    for (int i = 2; i < xn->rank; i++)
        rest = xn->shape[i] < 0 || rest < 0 ? -1 : rest * xn->shape[i];
    if (num_groups < 1 || (c >= 0 && c % num_groups)) { /* a dynamic C: checked when bound */
        ts_error(RLX_E_ARG, fn, "num_groups %d must be >= 1 and divide the %lld channels of x %s", num_groups,
                 (long long)c, ts_shape_str(xn));
        return NULL;
    }
    if (!channel_param(fn, "weight", weight, c, xn) || !channel_param(fn, "bias", bias, c, xn) || !eps_ok(fn, eps) ||
        !ts_open(fn))
        return NULL;
    rlx_dtype out = ts_promote_opt(ts_promote_opt(ts_float_dtype(xn->dtype), weight), bias);
    if (c < 0 || rest < 0) {
        /* dynamic C or spatial dims: [N, C, *] as [C, N, *] -> [G, C/G, N, *]
         * (C leads: with N before it the split of a dynamic C could not be
         * told from one of N; a program resolves it per binding, C % G
         * checked then), normalized over every axis but G and N (counted
         * when run), and back to the bound dims (where(true, y, r): the
         * program's reshape back) */
        int perm[RLX_MAX_RANK], axes[RLX_MAX_RANK], na = 0;
        for (int i = 0; i < xn->rank; i++)
            perm[i] = i < 2 ? 1 - i : i;
        rlx_tensor *xt = rlx_transpose(ts_as_float(x), xn->rank, perm);
        ir_node *tn = xt ? ts_node(xt) : NULL;
        int64_t g[RLX_MAX_RANK + 1] = {num_groups, c < 0 ? -1 : c / num_groups};
        for (int i = 1; i < xn->rank; i++)
            g[i + 1] = tn ? tn->shape[i] : 0;
        for (int i = 1; i <= xn->rank; i++)
            if (i != 2)
                axes[na++] = i;
        ir_node *r = tn ? ts_reshape_node(fn, tn, xn->rank + 1, g) : NULL;
        rlx_tensor *rt = r ? ts_wrap(r) : NULL;
        rlx_tensor *d = rlx_sub(rt, rlx_mean(rt, axes, na, true));
        rlx_tensor *y = rlx_mul(d, rlx_rsqrt(rlx_add_s(rlx_mean(rlx_mul(d, d), axes, na, true), eps)));
        ir_node *yw = y && r ? ts_expand_like(fn, ts_node(y), r) : NULL;
        ir_node *back = yw ? ts_reshape_node(fn, yw, xn->rank, tn->shape) : NULL;
        ir_release(yw);
        rlx_tensor *yb = rlx_transpose(back ? ts_wrap(back) : NULL, xn->rank, perm);
        return ts_close_as(affine(yb, weight, bias, xn->rank), out);
    }
    /* [N, C, *] -> [N, G, C/G * prod(*)]: each group is one row of a
     * layer norm; an empty batch or group stays empty. */
    int64_t g[3] = {xn->shape[0], num_groups, c / num_groups * rest};
    rlx_tensor *y = rlx_layer_norm(rlx_reshape(ts_as_float(x), 3, g), NULL, NULL, eps);
    return ts_close_as(affine(rlx_reshape(y, xn->rank, xn->shape), weight, bias, xn->rank), out);
}

/* ---------------------------------------------------------------- dropout */

/* U[0,1) in f32 over x's dynamic shape: a rand leaf (rand_seeded over
 * seed_t when given) traced with x's -1 dims beside x, where(true, rand,
 * x), which a program makes in x's bound shape (program.c, instantiate),
 * so its values are rlx_rand's (rlx_rand_seeded's) over that shape with
 * the same seed. x is never read; the mask has no gradient. */
static rlx_tensor *dynamic_rand(const char *fn, ir_node *xn, uint64_t seed, rlx_tensor *seed_t)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.rand.seed = seed;
    rlx_tensor *rs = seed_t ? ts_rand_seeded_traced(fn, xn->rank, xn->shape, seed_t) : NULL;
    ir_node *r = !seed_t ? ts_leaf(fn, IR_OP_RAND, &a, RLX_F32, xn->rank, xn->shape) : rs ? ir_retain(ts_node(rs)) : NULL;
    ir_node *u = r ? ts_expand_like(fn, r, xn) : NULL;
    ir_release(r);
    return rlx_stop_gradient(ts_wrap(u));
}

/* Both dropouts: the mask from the seed value, or from seed_t (a scalar
 * tensor read at run time) when it is given. */
static rlx_tensor *dropout(const char *fn, rlx_tensor *x, double p, uint64_t seed, rlx_tensor *seed_t, bool by_tensor)
{
    if (ts_null(fn, "x", x) || (by_tensor && ts_null(fn, "seed", seed_t)) || !ts_numeric(fn, "x", x))
        return NULL;
    if (!(p >= 0 && p <= 1)) {
        ts_error(RLX_E_ARG, fn, "p must be in [0, 1], got %g", p);
        return NULL;
    }
    ir_node *xn = ts_node(x);
    const bool dyn = ir_node_numel(xn) < 0;
    if (!ts_open(fn))
        return NULL;
    /* the seed tensor is checked even when p = 0 makes it unused, so a
     * wrong seed is found whatever p a caller tries first */
    rlx_tensor *u = !by_tensor ? NULL
                    : dyn      ? dynamic_rand(fn, xn, 0, seed_t)
                               : rlx_rand_seeded(RLX_F32, xn->rank, xn->shape, seed_t);
    if (by_tensor && !u)
        return ts_close(NULL);
    rlx_tensor *xf = ts_as_float(x);
    rlx_dtype out = ts_float_dtype(xn->dtype);
    if (p == 0)
        return ts_close_as(rlx_retain(xf), out);
    /* keep where u >= p, u ~ U[0,1) in f32 whatever x's dtype, so one
     * (shape, seed) gives one mask for f32 and f64 alike. The where (not
     * x * mask) gives exact zeros even for inf/NaN inputs, and its
     * gradient is the same mask times the incoming gradient. */
    if (!by_tensor)
        u = dyn ? dynamic_rand(fn, xn, seed, NULL) : rlx_rand(RLX_F32, xn->rank, xn->shape, seed);
    rlx_tensor *keep = rlx_ge_s(u, p);
    rlx_tensor *kept = p < 1 ? rlx_mul_s(xf, 1 / (1 - p)) : rlx_zeros_like(xf);
    return ts_close_as(rlx_where(keep, kept, rlx_zeros_like(xf)), out);
}

rlx_tensor *rlx_dropout(rlx_tensor *x, double p, uint64_t seed)
{
    return dropout("rlx_dropout", x, p, seed, NULL, false);
}

rlx_tensor *rlx_dropout_seeded(rlx_tensor *x, double p, rlx_tensor *seed)
{
    return dropout("rlx_dropout_seeded", x, p, 0, seed, true);
}
