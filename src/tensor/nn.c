/*
 * nn.c — neural-network ops: softmax and log_softmax, layer and RMS norm,
 * the cross entropies, attention (positional masks, mask tensors, grouped
 * kv heads), rotary embeddings (offsets, positions, both pair layouts,
 * partial rotation), conv1d/conv2d, the transposed convolutions and the
 * 2-D pools.
 *
 * Everything but attention (a fused primitive, src/runtime/kernels/attention.c),
 * conv2d and the pools is a composite of public calls, built inside
 * ts_open/ts_close so that intermediates are released and errors name the
 * function the user called. Arguments are checked first, with user-facing
 * messages, so the composites never fail on shapes.
 * Integer inputs compute in f32; bool inputs (except masks, probabilities
 * and labels) are RLX_E_DTYPE, as they have no numeric meaning here.
 */
#include <math.h>
#include <string.h>

#include "passes/knobs.h"
#include "tensor/ts.h"

/* ---------------------------------------------------------------- softmax */

/* The row max used to shift x before exp: the max where finite, 0 on rows
 * whose max is +-inf, so such rows give inf/NaN like the plain formula
 * instead of -inf - -inf. */
static rlx_tensor *row_shift(rlx_tensor *xf, int ax)
{
    rlx_tensor *m = rlx_max(xf, &ax, 1, true);
    return rlx_where(rlx_lt_s(rlx_abs(m), INFINITY), m, rlx_zeros_like(m));
}

static bool softmax_begin(const char *fn, rlx_tensor *x, int axis, int *ax)
{
    if (ts_null(fn, "x", x) || !ts_numeric(fn, "x", x))
        return false;
    *ax = ts_axis(fn, axis, ts_node(x)->rank);
    return *ax >= 0 && ts_open(fn);
}

rlx_tensor *rlx_softmax(rlx_tensor *x, int axis)
{
    int ax;
    if (!softmax_begin("rlx_softmax", x, axis, &ax))
        return NULL;
    rlx_tensor *xf = ts_as_float(x);
    rlx_tensor *e = rlx_exp(rlx_sub(xf, row_shift(xf, ax)));
    return ts_close_as(rlx_div(e, rlx_sum(e, &ax, 1, true)), ts_float_dtype(ts_node(x)->dtype));
}

rlx_tensor *rlx_log_softmax(rlx_tensor *x, int axis)
{
    int ax;
    if (!softmax_begin("rlx_log_softmax", x, axis, &ax))
        return NULL;
    rlx_tensor *xf = ts_as_float(x);
    rlx_tensor *d = rlx_sub(xf, row_shift(xf, ax));
    return ts_close_as(rlx_sub(d, rlx_log(rlx_sum(rlx_exp(d), &ax, 1, true))), ts_float_dtype(ts_node(x)->dtype));
}

/* ------------------------------------------------------------------ norms */

/* Checks x (rank >= 1, numeric), an optional [D] parameter and eps. */
static bool norm_check(const char *fn, rlx_tensor *x, rlx_tensor *gamma, rlx_tensor *beta, double eps)
{
    if (ts_null(fn, "x", x) || !ts_numeric(fn, "x", x))
        return false;
    ir_node *xn = ts_node(x);
    if (xn->rank < 1) {
        ts_error(RLX_E_SHAPE, fn, "x must have rank >= 1, got %s", ts_shape_str(xn));
        return false;
    }
    int64_t d = xn->shape[xn->rank - 1];
    rlx_tensor *params[2] = {gamma, beta};
    const char *names[2] = {"gamma", "beta"};
    for (int i = 0; i < 2; i++) {
        if (!params[i])
            continue;
        ir_node *p = ts_node(params[i]);
        if (!ts_numeric(fn, names[i], params[i]))
            return false;
        if (p->rank != 1 || p->shape[0] != d) {
            ts_error(RLX_E_SHAPE, fn, "%s must be [%lld] (last dim of x %s), got %s", names[i], (long long)d,
                     ts_shape_str(xn), ts_shape_str(p));
            return false;
        }
    }
    if (!(eps >= 0) || isinf(eps)) {
        ts_error(RLX_E_ARG, fn, "eps must be finite and >= 0, got %g", eps);
        return false;
    }
    return true;
}

/* The dtype a norm returns: x's float dtype promoted with its parameters'
 * (what computing in those dtypes gives), rounded to once at the end. */
static rlx_dtype norm_dtype(rlx_tensor *x, rlx_tensor *gamma, rlx_tensor *beta)
{
    return ts_promote_opt(ts_promote_opt(ts_float_dtype(ts_node(x)->dtype), gamma), beta);
}

rlx_tensor *rlx_layer_norm(rlx_tensor *x, rlx_tensor *gamma, rlx_tensor *beta, double eps)
{
    const char *fn = "rlx_layer_norm";
    if (!norm_check(fn, x, gamma, beta, eps) || !ts_open(fn))
        return NULL;
    int ax = -1;
    rlx_tensor *xf = ts_as_float(x);
    rlx_tensor *d = rlx_sub(xf, rlx_mean(xf, &ax, 1, true));
    rlx_tensor *var = rlx_mean(rlx_mul(d, d), &ax, 1, true); /* population variance */
    rlx_tensor *y = rlx_mul(d, rlx_rsqrt(rlx_add_s(var, eps)));
    if (gamma)
        y = rlx_mul(y, gamma);
    if (beta)
        y = rlx_add(y, beta);
    return ts_close_as(y, norm_dtype(x, gamma, beta));
}

rlx_tensor *rlx_rms_norm(rlx_tensor *x, rlx_tensor *gamma, double eps)
{
    const char *fn = "rlx_rms_norm";
    if (!norm_check(fn, x, gamma, NULL, eps) || !ts_open(fn))
        return NULL;
    int ax = -1;
    rlx_tensor *xf = ts_as_float(x);
    rlx_tensor *y = rlx_mul(xf, rlx_rsqrt(rlx_add_s(rlx_mean(rlx_mul(xf, xf), &ax, 1, true), eps)));
    return ts_close_as(gamma ? rlx_mul(y, gamma) : y, norm_dtype(x, gamma, NULL));
}

/* --------------------------------------------------------- cross entropy */

rlx_tensor *rlx_cross_entropy(rlx_tensor *logits, rlx_tensor *probs)
{
    const char *fn = "rlx_cross_entropy";
    if (ts_null(fn, "logits", logits) || ts_null(fn, "probs", probs) || !ts_numeric(fn, "logits", logits))
        return NULL;
    ir_node *ln = ts_node(logits), *pn = ts_node(probs);
    if (ln->rank < 1 || !ir_shape_eq(ln->rank, ln->shape, pn->rank, pn->shape)) {
        ts_error(RLX_E_SHAPE, fn, "logits and probs must be one shape [..., C] of rank >= 1, got %s and %s",
                 ts_shape_str(ln), ts_shape_str(pn));
        return NULL;
    }
    if (!ts_open(fn))
        return NULL;
    int ax = -1;
    /* A zero probability contributes 0 even where log_softmax is -inf
     * (0 log 0 = 0), rather than NaN. Only that pair is masked, inside the
     * product: the gradient with respect to probs stays -log_softmax at a
     * zero target too (PyTorch's), where masking the product made it 0. */
    rlx_tensor *ls = rlx_log_softmax(ts_as_float(logits), -1); /* f16/bf16 in f32: the loss rounds once */
    rlx_tensor *zero_inf = rlx_logical_and(rlx_eq_s(probs, 0), rlx_eq_s(ls, -INFINITY));
    rlx_tensor *t = rlx_mul(probs, rlx_where(zero_inf, rlx_zeros_like(ls), ls));
    return ts_close_as(rlx_neg(rlx_sum(t, &ax, 1, false)), ir_promote(ts_float_dtype(ln->dtype), pn->dtype));
}

rlx_tensor *rlx_softmax_cross_entropy_with_logits(rlx_tensor *logits, rlx_tensor *labels)
{
    const char *fn = "rlx_softmax_cross_entropy_with_logits";
    if (ts_null(fn, "logits", logits) || ts_null(fn, "labels", labels) || !ts_numeric(fn, "logits", logits))
        return NULL;
    ir_node *ln = ts_node(logits), *yn = ts_node(labels);
    if (yn->dtype == RLX_BOOL) {
        ts_error(RLX_E_DTYPE, fn, "labels must be integer or float-coded, got bool");
        return NULL;
    }
    if (ln->rank != 2 || yn->rank != 1 || yn->shape[0] != ln->shape[0]) {
        ts_error(RLX_E_SHAPE, fn, "logits must be [N, C] and labels [N], got %s and %s", ts_shape_str(ln),
                 ts_shape_str(yn));
        return NULL;
    }
    if (!ts_open(fn))
        return NULL;
    int64_t n = ln->shape[0], c = ln->shape[1], flat = n * c;
    bool dyn = n < 0 || c < 0;
    /* Pick row i's label from the flattened log-probabilities with a
     * gather. A label outside [0, C) (or NaN) is sent to index N*C, which
     * is out of range, so realization fails instead of reading another row
     * or counting from the end. */
    rlx_tensor *lab = rlx_cast(labels, RLX_I64); /* truncates float codes */
    /* a dynamic C: the bound count of classes, as a value */
    rlx_tensor *ct = c < 0 ? ts_dims_value(ln, 1, 2) : NULL;
    rlx_tensor *ok = rlx_logical_and(rlx_ge_s(lab, 0), ct ? rlx_lt(lab, ct) : rlx_lt_s(lab, (double)c));
    if (ir_dtype_is_float(yn->dtype))
        ok = rlx_logical_and(ok, rlx_eq(labels, labels));
    rlx_tensor *rows = rlx_arange_of(logits, 0, RLX_I64);
    rlx_tensor *idx = rlx_add(ct ? rlx_mul(rows, ct) : rlx_mul_s(rows, (double)c), lab);
    /* a dynamic N or C: an index past any tensor's end stands for N*C */
    idx = rlx_where(ok, idx, dyn ? rlx_full_like(idx, 0x1p62) : rlx_full(RLX_I64, 1, &n, (double)flat));
    rlx_tensor *ls = rlx_reshape(rlx_log_softmax(logits, 1), 1, dyn ? (const int64_t[]){-1} : &flat);
    return ts_close(rlx_neg(rlx_gather(ls, idx, 0)));
}

/* -------------------------------------------------------------- attention */

/* Whether f16/bf16 operands of attention (or conv2d) of dtype dt go to
 * the f32 kernel as widened copies rather than to the kernels that read
 * them as they are: knob half_kernels 1 widens both; the default (3)
 * widens attention only, whose own half kernel measured no faster (W10a
 * shapes bf16 forward+backward 3.09 ms against 2.29 widened, B8 H16 S512
 * D64 1.01x; rlx-bench --filter halfattn), while conv2d's runs 2.1x (5.5x
 * with gradients) faster than widened (--filter halfconv). */
static bool ts_half_widened(rlx_dtype dt, bool attention)
{
    long k = knob_get(KNOB_HALF_KERNELS);
    return (dt == RLX_BF16 || dt == RLX_F16) && (k == 1 || (attention && k == 3));
}

/* Checks q [B, Sq, H*D], k and v [B, Sk, Hkv*D], heads and head_dim. */
static bool attn_check(const char *fn, rlx_tensor *q, rlx_tensor *k, rlx_tensor *v, int h, int hk, int d)
{
    if (ts_null(fn, "q", q) || ts_null(fn, "k", k) || ts_null(fn, "v", v) || !ts_numeric(fn, "q", q) ||
        !ts_numeric(fn, "k", k) || !ts_numeric(fn, "v", v))
        return false;
    if (h < 1 || d < 1 || hk < 1) {
        ts_error(RLX_E_ARG, fn, "num_heads %d, num_kv_heads %d and head_dim %d must be >= 1", h, hk, d);
        return false;
    }
    if (h % hk) {
        ts_error(RLX_E_SHAPE, fn, "num_heads %d is not a multiple of num_kv_heads %d", h, hk);
        return false;
    }
    ir_node *qn = ts_node(q), *kn = ts_node(k), *vn = ts_node(v);
    int64_t hd = (int64_t)h * d, kd = (int64_t)hk * d;
    if (qn->rank != 3 || kn->rank != 3 || vn->rank != 3 || qn->shape[2] != hd || kn->shape[2] != kd ||
        vn->shape[2] != kd || kn->shape[0] != qn->shape[0] || vn->shape[0] != qn->shape[0] ||
        vn->shape[1] != kn->shape[1]) {
        ts_error(RLX_E_SHAPE, fn,
                 "need q [B, Sq, %lld], k and v [B, Sk, %lld] (%d heads, %d kv heads of %d), got %s, %s, %s",
                 (long long)hd, (long long)kd, h, hk, d, ts_shape_str(qn), ts_shape_str(kn), ts_shape_str(vn));
        return false;
    }
    /* The forward never stores the scores, but the gradient does: their
     * size stays bounded as when attention was a composite. */
    int64_t scores[4] = {qn->shape[0], h, qn->shape[1], kn->shape[1]};
    rlx_dtype dt = ir_promote(ir_promote(qn->dtype, kn->dtype), vn->dtype);
    if (!ir_shape_bytes_ok(ir_dtype_is_float(dt) ? dt : RLX_F32, 4, scores)) {
        ts_error(RLX_E_SHAPE, fn, "the scores %s of q %s and k %s are too large", ts_dims_str(4, scores),
                 ts_shape_str(qn), ts_shape_str(kn));
        return false;
    }
    return true;
}

static bool attn_check_kind(const char *fn, rlx_mask mask, int window)
{
    if ((int)mask < RLX_MASK_NONE || (int)mask > RLX_MASK_SLIDING) {
        ts_error(RLX_E_ARG, fn, "unknown mask kind %d", (int)mask);
        return false;
    }
    if (mask == RLX_MASK_SLIDING && window < 1) {
        ts_error(RLX_E_ARG, fn, "sliding window must be >= 1, got %d", window);
        return false;
    }
    return true;
}

/* Checks a mask tensor against the scores [B, H, Sq, Sk]: bool or float,
 * broadcastable (NumPy rules, rank <= 4). */
static bool attn_check_mask(const char *fn, rlx_tensor *mask, const int64_t full[4])
{
    ir_node *mn = ts_node(mask);
    if (mn->dtype != RLX_BOOL && !ir_dtype_is_float(mn->dtype)) {
        ts_error(RLX_E_DTYPE, fn, "attn_mask must be bool (true keeps) or float (added), got %s",
                 rlx_dtype_name(mn->dtype));
        return false;
    }
    bool fits = mn->rank <= 4;
    for (int i = 0; fits && i < mn->rank; i++) {
        int64_t dm = mn->shape[mn->rank - 1 - i];
        fits = dm == 1 || dm == full[3 - i];
    }
    if (!fits)
        ts_error(RLX_E_SHAPE, fn, "attn_mask %s does not broadcast to the scores [B, H, Sq, Sk] = %s",
                 ts_shape_str(mn), ts_dims_str(4, full));
    return fits;
}

/* The ATTENTION primitive over q, k, v cast to their common float dtype
 * (integers compute in f32), with mask (bool, or float to add; any shape
 * broadcastable to the scores) when not NULL; inside an open scope. The
 * mask goes in as rank 4 with its broadcast dims left at 1: the kernel
 * reads them with stride 0. k2, v2 (both or neither): rows after k's and
 * v's, sources 3 and 4 (the mask then last). */
static rlx_tensor *attn_make(const char *fn, rlx_tensor *q, rlx_tensor *k, rlx_tensor *v, rlx_tensor *k2,
                             rlx_tensor *v2, rlx_tensor *mask, int h, int hk, int d, rlx_mask kind, int window,
                             double scale)
{
    rlx_dtype dt = ir_promote(ir_promote(ts_node(q)->dtype, ts_node(k)->dtype), ts_node(v)->dtype);
    if (k2)
        dt = ir_promote(ir_promote(dt, ts_node(k2)->dtype), ts_node(v2)->dtype);
    if (!ir_dtype_is_float(dt))
        dt = RLX_F32;
    /* f16/bf16 widen here by default (ts_half_widened); knob
     * half_kernels 0 runs them in the kernel's own f32 blocks (either way
     * rounded once) */
    rlx_dtype out = dt;
    if (ts_half_widened(dt, true))
        dt = RLX_F32;
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.attn.heads = h;
    a.attn.kv_heads = hk;
    a.attn.head_dim = d;
    a.attn.mask = (int)kind;
    a.attn.window = kind == RLX_MASK_SLIDING ? window : 0; /* unused otherwise: 0 keeps equal calls one node */
    a.attn.scale = scale != 0 ? scale : 1.0 / sqrt((double)d);
    if (mask) {
        ir_node *mn = ts_node(mask);
        int64_t ms[4] = {1, 1, 1, 1};
        memcpy(ms + 4 - mn->rank, mn->shape, (size_t)mn->rank * sizeof *ms);
        mask = rlx_reshape(mn->dtype == RLX_BOOL ? mask : rlx_cast(mask, dt), 4, ms);
        if (!mask)
            return NULL;
    }
    int nin = k2 ? 5 : 3;
    ir_node *src[6] = {NULL};
    src[nin] = mask ? ts_node(mask) : NULL;
    rlx_tensor *in[5] = {q, k, v, k2, v2};
    int ok = 0;
    for (; ok < nin; ok++)
        if (!(src[ok] = ts_cast_node(fn, ts_node(in[ok]), dt)))
            break;
    ir_node *y = ok == nin ? ts_make_lib(fn, IR_OP_ATTENTION, nin + (mask ? 1 : 0), src, &a, out) : NULL;
    for (int i = 0; i < ok; i++)
        ir_release(src[i]);
    return ts_wrap(y);
}

rlx_tensor *rlx_attention(rlx_tensor *q, rlx_tensor *k, rlx_tensor *v, int num_heads, int head_dim, rlx_mask mask,
                          int window)
{
    const char *fn = "rlx_attention";
    if (!attn_check(fn, q, k, v, num_heads, num_heads, head_dim) || !attn_check_kind(fn, mask, window))
        return NULL;
    if (!ts_open(fn))
        return NULL;
    return ts_close(attn_make(fn, q, k, v, NULL, NULL, NULL, num_heads, num_heads, head_dim, mask, window, 0));
}

rlx_tensor *rlx_attention_masked(rlx_tensor *q, rlx_tensor *k, rlx_tensor *v, rlx_tensor *mask, int num_heads,
                                 int head_dim)
{
    const char *fn = "rlx_attention_masked";
    if (!attn_check(fn, q, k, v, num_heads, num_heads, head_dim) || ts_null(fn, "mask", mask))
        return NULL;
    ir_node *mn = ts_node(mask), *kn = ts_node(k);
    if (mn->rank != 2 || mn->shape[0] != kn->shape[0] || mn->shape[1] != kn->shape[1]) {
        ts_error(RLX_E_SHAPE, fn, "mask must be [B, Sk] = [%lld,%lld], got %s", (long long)kn->shape[0],
                 (long long)kn->shape[1], ts_shape_str(mn));
        return NULL;
    }
    if (!ts_open(fn))
        return NULL;
    int64_t ks[4] = {kn->shape[0], 1, 1, kn->shape[1]}; /* [B, 1, 1, Sk]: one row for every query */
    rlx_tensor *keep = rlx_reshape(rlx_ne_s(mask, 0), 4, ks);
    return ts_close(
        keep ? attn_make(fn, q, k, v, NULL, NULL, keep, num_heads, num_heads, head_dim, RLX_MASK_NONE, 0, 0) : NULL);
}

rlx_tensor *rlx_attention_ex(rlx_tensor *q, rlx_tensor *k, rlx_tensor *v, int num_heads, int head_dim,
                             const rlx_attention_opts *opts)
{
    const char *fn = "rlx_attention_ex";
    static const rlx_attention_opts none;
    const rlx_attention_opts *o = opts ? opts : &none;
    int hk = o->num_kv_heads ? o->num_kv_heads : num_heads;
    if (!attn_check(fn, q, k, v, num_heads, hk, head_dim) || !attn_check_kind(fn, o->mask, o->window))
        return NULL;
    if (!isfinite(o->scale)) {
        ts_error(RLX_E_ARG, fn, "scale must be finite, got %g", o->scale);
        return NULL;
    }
    if (o->attn_mask) {
        ir_node *qn = ts_node(q), *kn = ts_node(k);
        int64_t full[4] = {qn->shape[0], num_heads, qn->shape[1], kn->shape[1]};
        if (!attn_check_mask(fn, o->attn_mask, full))
            return NULL;
    }
    if (!ts_open(fn))
        return NULL;
    return ts_close(
        attn_make(fn, q, k, v, NULL, NULL, o->attn_mask, num_heads, hk, head_dim, o->mask, o->window, o->scale));
}

rlx_tensor *rlx_attention_kv(rlx_tensor *q, rlx_tensor *k, rlx_tensor *v, rlx_tensor *k_new, rlx_tensor *v_new,
                             int num_heads, int head_dim, const rlx_attention_opts *opts)
{
    const char *fn = "rlx_attention_kv";
    static const rlx_attention_opts none;
    const rlx_attention_opts *o = opts ? opts : &none;
    int hk = o->num_kv_heads ? o->num_kv_heads : num_heads;
    if (!attn_check(fn, q, k, v, num_heads, hk, head_dim) ||
        !attn_check(fn, q, k_new, v_new, num_heads, hk, head_dim) || !attn_check_kind(fn, o->mask, o->window))
        return NULL;
    if (!isfinite(o->scale)) {
        ts_error(RLX_E_ARG, fn, "scale must be finite, got %g", o->scale);
        return NULL;
    }
    ir_node *qn = ts_node(q), *kn = ts_node(k), *k2 = ts_node(k_new);
    int64_t sk = kn->shape[1] < 0 || k2->shape[1] < 0 ? -1 : kn->shape[1] + k2->shape[1];
    if (o->attn_mask) {
        int64_t full[4] = {qn->shape[0], num_heads, qn->shape[1], sk};
        if (!attn_check_mask(fn, o->attn_mask, full))
            return NULL;
    }
    if (!ts_open(fn))
        return NULL;
    return ts_close(
        attn_make(fn, q, k, v, k_new, v_new, o->attn_mask, num_heads, hk, head_dim, o->mask, o->window, o->scale));
}

/* ------------------------------------------------------------------- rope */

/* Rotates pairs (a, b) by angles of cosines c and sines s (broadcasting):
 * (a c - b s, b c + a s). */
static void rotate(rlx_tensor *a, rlx_tensor *b, rlx_tensor *c, rlx_tensor *s, rlx_tensor **ra, rlx_tensor **rb)
{
    *ra = rlx_sub(rlx_mul(a, c), rlx_mul(b, s));
    *rb = rlx_add(rlx_mul(b, c), rlx_mul(a, s));
}

/* The table rows [S, R/2] (or [B, S, R/2]) of the tokens of x, shaped to
 * broadcast over heads: [S, 1, R/2] or [B, S, 1, R/2]. */
static rlx_tensor *rope_rows(rlx_tensor *table, int64_t s, int64_t half, int64_t offset, rlx_tensor *pos)
{
    if (!pos) {
        int64_t bs[3] = {s, 1, half};
        return rlx_reshape(rlx_narrow(table, 0, offset, s), 3, bs);
    }
    ir_node *pn = ts_node(pos);
    int64_t rows = ts_node(table)->shape[0];
    /* A negative position would count from the end in gather: send it out
     * of range instead (past any end for a table of dynamic length), so
     * that it is an error at realize. */
    rlx_tensor *idx = rlx_where(rlx_lt_s(pos, 0), rlx_full(pn->dtype, 0, NULL, rows < 0 ? 0x1p62 : (double)rows), pos);
    rlx_tensor *g = rlx_gather(table, idx, 0);
    if (pn->rank == 1) {
        int64_t bs[3] = {s, 1, half};
        return rlx_reshape(g, 3, bs);
    }
    int64_t bs[4] = {pn->shape[0], s, 1, half};
    return rlx_reshape(g, 4, bs);
}

/* The rope of x [B, S, H*D] with tables cos, sin [>= S, R/2] (already
 * checked), inside an open scope. */
static rlx_tensor *rope_make(rlx_tensor *x, rlx_tensor *cos, rlx_tensor *sin, int d, const rlx_rope_opts *o)
{
    ir_node *xn = ts_node(x);
    int64_t rot = o->rotary_dim ? o->rotary_dim : d, half = rot / 2;
    int64_t xs[4] = {xn->shape[0], xn->shape[1], xn->shape[2] / d, d};
    rlx_tensor *xr = rlx_reshape(ts_as_float(x), 4, xs), *xrot = rot < d ? rlx_narrow(xr, 3, 0, rot) : xr;
    rlx_tensor *c = rope_rows(cos, xs[1], half, o->offset, o->positions);
    rlx_tensor *s = rope_rows(sin, xs[1], half, o->offset, o->positions), *y;
    if (!o->interleaved) { /* NeoX: pairs (x[i], x[i + R/2]) */
        rlx_tensor *h[2];
        rotate(rlx_narrow(xrot, 3, 0, half), rlx_narrow(xrot, 3, half, half), c, s, &h[0], &h[1]);
        y = rlx_cat(h, 2, 3);
    } else { /* GPT-J: pairs (x[2i], x[2i+1]), a trailing axis of 2 */
        int64_t ps[5] = {xs[0], xs[1], xs[2], half, 2};
        rlx_tensor *xp = rlx_reshape(xrot, 5, ps), *h[2];
        c = rlx_unsqueeze(c, -1);
        s = rlx_unsqueeze(s, -1);
        rotate(rlx_narrow(xp, 4, 0, 1), rlx_narrow(xp, 4, 1, 1), c, s, &h[0], &h[1]);
        int64_t ys[4] = {xs[0], xs[1], xs[2], rot};
        y = rlx_reshape(rlx_cat(h, 2, 4), 4, ys);
    }
    if (rot < d) {
        rlx_tensor *parts[2] = {y, rlx_narrow(xr, 3, rot, d - rot)};
        y = rlx_cat(parts, 2, 3);
    }
    return rlx_reshape(y, 3, xn->shape);
}

/* Checks x, the tables and the options of a rope (fn names the caller). */
static bool rope_check(const char *fn, rlx_tensor *x, rlx_tensor *cos, rlx_tensor *sin, int head_dim,
                       const rlx_rope_opts *o, bool exact_rows)
{
    if (ts_null(fn, "x", x) || ts_null(fn, "cos", cos) || ts_null(fn, "sin", sin) || !ts_numeric(fn, "x", x) ||
        !ts_numeric(fn, "cos", cos) || !ts_numeric(fn, "sin", sin))
        return false;
    if (head_dim < 2 || head_dim % 2) {
        ts_error(RLX_E_ARG, fn, "head_dim must be even and >= 2, got %d", head_dim);
        return false;
    }
    int rot = o->rotary_dim ? o->rotary_dim : head_dim;
    if (rot < 2 || rot % 2 || rot > head_dim) {
        ts_error(RLX_E_ARG, fn, "rotary_dim must be even, >= 2 and <= head_dim %d, got %d", head_dim, o->rotary_dim);
        return false;
    }
    ir_node *xn = ts_node(x), *cn = ts_node(cos), *sn = ts_node(sin);
    if (xn->rank != 3 || xn->shape[2] % head_dim) {
        ts_error(RLX_E_SHAPE, fn, "x must be [B, S, H*%d], got %s", head_dim, ts_shape_str(xn));
        return false;
    }
    int64_t half = rot / 2, s = xn->shape[1];
    if (exact_rows) {
        int64_t cs[2] = {s, half};
        if (!ir_shape_eq(cn->rank, cn->shape, 2, cs) || !ir_shape_eq(sn->rank, sn->shape, 2, cs)) {
            ts_error(RLX_E_SHAPE, fn, "cos and sin must be [S, D/2] = %s, got %s and %s", ts_dims_str(2, cs),
                     ts_shape_str(cn), ts_shape_str(sn));
            return false;
        }
        return true;
    }
    if (cn->rank != 2 || cn->shape[1] != half || !ir_shape_eq(cn->rank, cn->shape, sn->rank, sn->shape)) {
        ts_error(RLX_E_SHAPE, fn, "cos and sin must be one shape [S_max, %lld] (rotary_dim / 2), got %s and %s",
                 (long long)half, ts_shape_str(cn), ts_shape_str(sn));
        return false;
    }
    if (o->offset < 0 || (o->positions && o->offset)) {
        ts_error(RLX_E_ARG, fn, "offset must be >= 0 and 0 with positions, got %lld", (long long)o->offset);
        return false;
    }
    if (!o->positions) {
        if (s >= 0 && cn->shape[0] >= 0 && o->offset > cn->shape[0] - s) {
            ts_error(RLX_E_SHAPE, fn, "offset %lld with %lld positions is outside the tables of %lld rows",
                     (long long)o->offset, (long long)s, (long long)cn->shape[0]);
            return false;
        }
        return true;
    }
    ir_node *pn = ts_node(o->positions);
    if (!ir_dtype_is_index(pn->dtype)) {
        ts_error(RLX_E_DTYPE, fn, "positions must be i32 or i64, got %s", rlx_dtype_name(pn->dtype));
        return false;
    }
    if (!((pn->rank == 1 && pn->shape[0] == s) ||
          (pn->rank == 2 && pn->shape[0] == xn->shape[0] && pn->shape[1] == s))) {
        ts_error(RLX_E_SHAPE, fn, "positions must be [S] or [B, S] for x %s, got %s", ts_shape_str(xn),
                 ts_shape_str(pn));
        return false;
    }
    return true;
}

rlx_tensor *rlx_rope(rlx_tensor *x, rlx_tensor *cos, rlx_tensor *sin, int head_dim)
{
    const char *fn = "rlx_rope";
    static const rlx_rope_opts none;
    if (!rope_check(fn, x, cos, sin, head_dim, &none, true) || !ts_open(fn))
        return NULL;
    return ts_close_as(rope_make(x, cos, sin, head_dim, &none), norm_dtype(x, cos, sin));
}

rlx_tensor *rlx_rope_ex(rlx_tensor *x, rlx_tensor *cos, rlx_tensor *sin, int head_dim, const rlx_rope_opts *opts)
{
    const char *fn = "rlx_rope_ex";
    static const rlx_rope_opts none;
    const rlx_rope_opts *o = opts ? opts : &none;
    if (!rope_check(fn, x, cos, sin, head_dim, o, false) || !ts_open(fn))
        return NULL;
    return ts_close_as(rope_make(x, cos, sin, head_dim, o), norm_dtype(x, cos, sin));
}

/* ---------------------------------------------------------- conv and pool */

/* Reads an optional int pair, def when NULL. */
static void pair(const int *p, int def, int out[2])
{
    out[0] = p ? p[0] : def;
    out[1] = p ? p[1] : def;
}

/* x is [N, C, H, W]; any of them may be dynamic (rlx_input): the size
 * checks below skip a dynamic H or W, which ir_infer checks when a
 * program binds it (the output size is inferred there too). */
static bool check_nchw(const char *fn, rlx_tensor *x)
{
    ir_node *xn = ts_node(x);
    if (xn->rank != 4) {
        ts_error(RLX_E_SHAPE, fn, "x must be [N, C, H, W], got %s", ts_shape_str(xn));
        return false;
    }
    return true;
}

rlx_tensor *rlx_conv2d(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b, const int stride[2], const int padding[2],
                       const int dilation[2], int groups)
{
    const char *fn = "rlx_conv2d";
    if (ts_null(fn, "x", x) || ts_null(fn, "w", w) || !ts_numeric(fn, "x", x) || !ts_numeric(fn, "w", w) ||
        (b && !ts_numeric(fn, "b", b)) || !check_nchw(fn, x))
        return NULL;
    ir_node *xn = ts_node(x), *wn = ts_node(w);
    if (wn->rank != 4) {
        ts_error(RLX_E_SHAPE, fn, "w must be [O, C/groups, KH, KW], got %s", ts_shape_str(wn));
        return NULL;
    }
    if (groups < 1) {
        ts_error(RLX_E_ARG, fn, "groups must be >= 1, got %d", groups);
        return NULL;
    }
    if (xn->shape[1] % groups || wn->shape[0] % groups || wn->shape[1] * groups != xn->shape[1]) {
        ts_error(RLX_E_SHAPE, fn, "groups %d must divide C and O, and w must be [O, C/groups, KH, KW]: x %s, w %s",
                 groups, ts_shape_str(xn), ts_shape_str(wn));
        return NULL;
    }
    ir_attrs a;
    memset(&a, 0, sizeof a);
    pair(stride, 1, a.conv.stride);
    pair(padding, 0, a.conv.pad);
    pair(dilation, 1, a.conv.dil);
    a.conv.groups = groups;
    for (int i = 0; i < 2; i++) {
        if (a.conv.stride[i] < 1 || a.conv.dil[i] < 1 || a.conv.pad[i] < 0) {
            ts_error(RLX_E_ARG, fn, "stride [%d,%d] and dilation [%d,%d] must be >= 1, padding [%d,%d] >= 0",
                     a.conv.stride[0], a.conv.stride[1], a.conv.dil[0], a.conv.dil[1], a.conv.pad[0], a.conv.pad[1]);
            return NULL;
        }
        int64_t span = (int64_t)a.conv.dil[i] * (wn->shape[2 + i] - 1) + 1;
        if (xn->shape[2 + i] >= 0 && wn->shape[2 + i] >= 0 && xn->shape[2 + i] + 2 * (int64_t)a.conv.pad[i] < span) {
            ts_error(RLX_E_SHAPE, fn, "dilated kernel of %lld exceeds the padded input %lld on axis %d: x %s, w %s",
                     (long long)span, (long long)(xn->shape[2 + i] + 2 * (int64_t)a.conv.pad[i]), 2 + i,
                     ts_shape_str(xn), ts_shape_str(wn));
            return NULL;
        }
    }
    ir_node *bn = b ? ts_node(b) : NULL;
    if (bn && (bn->rank != 1 || bn->shape[0] != wn->shape[0])) {
        ts_error(RLX_E_SHAPE, fn, "b must be [O] = [%lld], got %s", (long long)wn->shape[0], ts_shape_str(bn));
        return NULL;
    }
    rlx_dtype dt = ir_promote(xn->dtype, wn->dtype);
    if (!ir_dtype_is_float(dt))
        dt = RLX_F32;
    if (!ts_open(fn))
        return NULL;
    /* bf16 without a bias goes to the kernel as it is (oneDNN's bf16
     * convolution, rounded once); with a bias, f16, and bf16 under knob
     * half_kernels 1, as f32 copies, so that product and bias round once
     * together (the bf16 kernel's product would round before the sum) */
    rlx_dtype kdt = ts_half_widened(dt, false) || (b && dt == RLX_BF16) ? RLX_F32 : dt;
    ir_node *src[2];
    src[0] = ts_cast_node(fn, xn, kdt);
    src[1] = src[0] ? ts_cast_node(fn, wn, kdt) : NULL;
    rlx_tensor *y = ts_wrap(src[1] ? ts_make_lib(fn, IR_OP_CONV2D, 2, src, &a, ir_lib_takes(IR_OP_CONV2D, kdt) ? kdt : ts_wide_dtype(dt)) : NULL);
    ir_release(src[0]);
    ir_release(src[1]);
    int64_t bs[4] = {1, wn->shape[0], 1, 1}; /* the bias broadcasts over N, OH, OW */
    rlx_dtype out = ts_promote_opt(dt, b);
    return ts_close_as(y && b ? rlx_add(y, rlx_cast(rlx_reshape(b, 4, bs), ts_wide_dtype(out))) : y, out);
}

/* x [N, C, L] as conv2d on [N, C, 1, L]: the library kernel and its
 * gradient serve the 1-D case too. */
rlx_tensor *rlx_conv1d(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b, int stride, int padding, int dilation, int groups)
{
    const char *fn = "rlx_conv1d";
    if (ts_null(fn, "x", x) || ts_null(fn, "w", w))
        return NULL;
    if (ts_node(x)->rank != 3 || ts_node(w)->rank != 3) {
        ts_error(RLX_E_SHAPE, fn, "x must be [N, C, L] and w [O, C/groups, K], got %s and %s",
                 ts_shape_str(ts_node(x)), ts_shape_str(ts_node(w)));
        return NULL;
    }
    if (stride < 1 || dilation < 1 || padding < 0) {
        ts_error(RLX_E_ARG, fn, "stride %d and dilation %d must be >= 1, padding %d >= 0", stride, dilation,
                 padding);
        return NULL;
    }
    if (!ts_open(fn))
        return NULL;
    int s[2] = {1, stride}, p[2] = {0, padding}, d[2] = {1, dilation};
    rlx_tensor *y = rlx_conv2d(rlx_unsqueeze(x, 2), rlx_unsqueeze(w, 2), b, s, p, d, groups);
    return ts_close(rlx_squeeze(y, 2));
}

#define PHASES 8 /* the largest stride split into phases (a larger one is zero-inserted) */

/* t with step-1 zeros between the elements of axis ax: length (L-1)*step+1. */
static rlx_tensor *zero_dilate(rlx_tensor *t, int ax, int64_t step)
{
    ir_node *tn = ts_node(t);
    if (step == 1 || (tn->shape[ax] >= 0 && tn->shape[ax] <= 1))
        return t;
    if (ir_node_numel(tn) < 0) {
        /* dynamic dims: element k added at k*step of zeros shaped like t
         * tiled step times (never read), the trailing step-1 zeros cut;
         * a reshape merging a dynamic axis could not be resolved per
         * binding next to other dynamic dims */
        int64_t col[IR_MAX_RANK];
        for (int d = 0; d < tn->rank; d++)
            col[d] = d == ax ? -1 : 1;
        rlx_tensor *k = rlx_reshape(rlx_mul_s(rlx_arange_of(t, ax, RLX_I64), (double)step), tn->rank, col);
        ir_node *kn = k ? ts_expand_like("rlx_conv_transpose2d", ts_node(k), tn) : NULL;
        rlx_tensor *u = rlx_scatter_add(rlx_zeros_like(rlx_tile(t, ax, step)), ax, kn ? ts_wrap(kn) : NULL, t);
        return rlx_slice(u, ax, 0, 1 - step, 1);
    }
    int64_t len = tn->shape[ax], pre = ir_numel(ax, tn->shape);
    int64_t post = ir_numel(tn->rank - ax - 1, tn->shape + ax + 1);
    int64_t s4[4] = {pre, len, 1, post}, s3[3] = {pre, len * step, post}, shape[IR_MAX_RANK];
    rlx_tensor *u = rlx_reshape(rlx_pad(rlx_reshape(t, 4, s4), 2, 0, step - 1, 0), 3, s3);
    memcpy(shape, tn->shape, sizeof shape);
    shape[ax] = (len - 1) * step + 1;
    return rlx_reshape(rlx_narrow(u, 1, 0, shape[ax]), tn->rank, shape);
}

/* Zero padding where before/after are >= 0, cropping where negative: pads
 * first, so a crop longer than the line itself still lands in range. */
static rlx_tensor *pad_or_crop(rlx_tensor *t, int ax, int64_t before, int64_t after)
{
    t = rlx_pad(t, ax, before > 0 ? before : 0, after > 0 ? after : 0, 0);
    if (before >= 0 && after >= 0)
        return t;
    int64_t len = t ? ts_node(t)->shape[ax] : 0, b = before < 0 ? -before : 0, a = after < 0 ? -after : 0;
    if (len < 0) /* a dynamic axis: Python's [b:-a] */
        return rlx_slice(t, ax, b, a ? -a : RLX_END, 1);
    return rlx_narrow(t, ax, b, len - b - a);
}

static const int ones2[2] = {1, 1}, zeros2[2] = {0, 0};

/* w [C_in, C_out/groups, KH, KW] as the conv2d weight of its adjoint:
 * [C_out, C_in/groups, KH, KW], channels swapped per group, taps flipped. */
static rlx_tensor *adjoint_weight(rlx_tensor *w, int groups)
{
    if (!w)
        return NULL;
    ir_node *wn = ts_node(w);
    int64_t cig = wn->shape[0] / groups, co = wn->shape[1] * groups;
    int64_t w5[5] = {groups, cig, wn->shape[1], wn->shape[2], wn->shape[3]};
    int64_t w4[4] = {co, cig, wn->shape[2], wn->shape[3]};
    static const int swap12[5] = {0, 2, 1, 3, 4};
    rlx_tensor *wt = rlx_reshape(rlx_transpose(rlx_reshape(w, 5, w5), 5, swap12), 4, w4);
    return rlx_flip(rlx_flip(wt, 2), 3);
}

/* The transposed convolution as conv2d's input gradient was written: a
 * stride-1 conv2d of x with stride-1 zeros inserted between elements,
 * padded by dil*(K-1) - pad per side (cropped where negative) plus
 * output_padding at the end. Costs stride^2 times the useful products. */
static rlx_tensor *conv_t_dilated(rlx_tensor *x, rlx_tensor *w, int groups, const int *s, const int *p,
                                  const int *op, const int *d)
{
    rlx_tensor *t = x;
    for (int i = 0; i < 2; i++) {
        int64_t edge = (int64_t)d[i] * (ts_node(w)->shape[2 + i] - 1) - p[i];
        t = t ? pad_or_crop(zero_dilate(t, 2 + i, s[i]), 2 + i, edge, edge + op[i]) : NULL;
    }
    return rlx_conv2d(t, adjoint_weight(w, groups), NULL, ones2, zeros2, d, groups);
}

/* One output phase (rho0, rho1) of an undilated transposed convolution:
 * the outputs o = t*s + rho, t < T. Output o receives x[j - m] w[r + s*m]
 * with r = (rho + p) mod s and j = t + (rho + p) div s, so the phase is a
 * stride-1 conv2d of x, shifted, with the taps r, r+s, ... of w
 * (ceil((K - r)/s) of them; none leaves the phase zero). */
static rlx_tensor *conv_t_phase(rlx_tensor *x, rlx_tensor *w, int groups, const int *s, const int *p,
                                const int64_t *T, const int *rho, rlx_dtype dt)
{
    ir_node *xn = ts_node(x), *wn = ts_node(w);
    rlx_tensor *t = x, *sub = w;
    for (int i = 0; i < 2; i++) {
        int64_t k = wn->shape[2 + i], r = (rho[i] + p[i]) % s[i], c = (rho[i] + p[i]) / s[i];
        int64_t kr = r < k ? (k - r + s[i] - 1) / s[i] : 0;
        if (!kr) {
            int64_t shape[4] = {xn->shape[0], wn->shape[1] * groups, T[0], T[1]};
            return rlx_zeros(dt, 4, shape);
        }
        sub = rlx_slice(sub, 2 + i, r, RLX_END, s[i]);
        int64_t before = kr - 1 - c; /* x[i - before] sits at i: the window of t starts at x[t + c - (kr - 1)] */
        t = pad_or_crop(t, 2 + i, before, T[i] + kr - 1 - xn->shape[2 + i] - before);
    }
    return rlx_conv2d(t, adjoint_weight(sub, groups), NULL, ones2, zeros2, ones2, groups);
}

/* Undilated transposed convolution as s0*s1 phase convolutions whose
 * products are exactly the useful ones, interleaved by two stacks:
 * [N, C, T0, s0, T1, s1] -> [N, C, T0*s0, T1*s1], cut to the output. */
static rlx_tensor *conv_t_phases(rlx_tensor *x, rlx_tensor *w, int groups, const int *s, const int *p,
                                 const int64_t *out, rlx_dtype dt)
{
    int64_t T[2] = {(out[0] + s[0] - 1) / s[0], (out[1] + s[1] - 1) / s[1]};
    rlx_tensor *rows[PHASES], *cols[PHASES];
    for (int r0 = 0; r0 < s[0]; r0++) {
        for (int r1 = 0; r1 < s[1]; r1++)
            cols[r1] = conv_t_phase(x, w, groups, s, p, T, (int[2]){r0, r1}, dt);
        rows[r0] = rlx_stack(cols, s[1], 4);
    }
    rlx_tensor *y = rlx_stack(rows, s[0], 3);
    ir_node *xn = ts_node(x), *wn = ts_node(w);
    int64_t shape[4] = {xn->shape[0], wn->shape[1] * groups, T[0] * s[0], T[1] * s[1]};
    return rlx_narrow(rlx_narrow(rlx_reshape(y, 4, shape), 2, 0, out[0]), 3, 0, out[1]);
}

/* The adjoint of conv2d with the same arguments, and so also conv2d's
 * input gradient, which calls this. */
rlx_tensor *rlx_conv_transpose2d(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b, const int stride[2],
                                 const int padding[2], const int output_padding[2], const int dilation[2],
                                 int groups)
{
    const char *fn = "rlx_conv_transpose2d";
    if (ts_null(fn, "x", x) || ts_null(fn, "w", w) || !ts_numeric(fn, "x", x) || !ts_numeric(fn, "w", w) ||
        (b && !ts_numeric(fn, "b", b)) || !check_nchw(fn, x))
        return NULL;
    ir_node *xn = ts_node(x), *wn = ts_node(w);
    if (wn->rank != 4) {
        ts_error(RLX_E_SHAPE, fn, "w must be [C_in, C_out/groups, KH, KW], got %s", ts_shape_str(wn));
        return NULL;
    }
    if (groups < 1) {
        ts_error(RLX_E_ARG, fn, "groups must be >= 1, got %d", groups);
        return NULL;
    }
    if (wn->shape[0] != xn->shape[1] || xn->shape[1] % groups) {
        ts_error(RLX_E_SHAPE, fn, "w must be [C_in, C_out/groups, KH, KW] with groups %d dividing C_in: x %s, w %s",
                 groups, ts_shape_str(xn), ts_shape_str(wn));
        return NULL;
    }
    int s[2], p[2], op[2], d[2];
    pair(stride, 1, s);
    pair(padding, 0, p);
    pair(output_padding, 0, op);
    pair(dilation, 1, d);
    int64_t out[2];
    for (int i = 0; i < 2; i++) {
        if (s[i] < 1 || d[i] < 1 || p[i] < 0 || op[i] < 0) {
            ts_error(RLX_E_ARG, fn,
                     "stride [%d,%d] and dilation [%d,%d] must be >= 1, padding [%d,%d] and output_padding "
                     "[%d,%d] >= 0", s[0], s[1], d[0], d[1], p[0], p[1], op[0], op[1]);
            return NULL;
        }
        if (op[i] >= s[i] && op[i] >= d[i]) {
            ts_error(RLX_E_ARG, fn, "output_padding %d on axis %d must be smaller than the stride %d or the dilation %d",
                     op[i], 2 + i, s[i], d[i]);
            return NULL;
        }
        int64_t in = xn->shape[2 + i];
        out[i] = (in - 1) * s[i] - 2 * (int64_t)p[i] + (int64_t)d[i] * (wn->shape[2 + i] - 1) + op[i] + 1;
        if (in < 0) { /* dynamic: a program checks the bound size (the stride-1 conv2d below) */
            out[i] = -1;
        } else if (in < 1 || out[i] < 1) {
            ts_error(RLX_E_SHAPE, fn, "output size %lld on axis %d is not positive: x %s, w %s, stride %d, padding %d",
                     (long long)out[i], 2 + i, ts_shape_str(xn), ts_shape_str(wn), s[i], p[i]);
            return NULL;
        }
    }
    ir_node *bn = b ? ts_node(b) : NULL;
    int64_t co = wn->shape[1] * groups;
    if (bn && (bn->rank != 1 || bn->shape[0] != co)) {
        ts_error(RLX_E_SHAPE, fn, "b must be [C_out] = [%lld], got %s", (long long)co, ts_shape_str(bn));
        return NULL;
    }
    if (!ts_open(fn))
        return NULL;
    rlx_dtype dt = ir_promote(xn->dtype, wn->dtype);
    /* Without dilation the stride's phases are separate convolutions (no
     * product with an inserted zero); with it, the zero-inserted form. */
    rlx_tensor *y = d[0] == 1 && d[1] == 1 && s[0] * s[1] > 1 && s[0] <= PHASES && s[1] <= PHASES &&
                            out[0] >= 0 && out[1] >= 0 /* the phases' sizes are static */
                        ? conv_t_phases(x, w, groups, s, p, out, ir_dtype_is_float(dt) ? dt : RLX_F32)
                        : conv_t_dilated(x, w, groups, s, p, op, d);
    int64_t bs[4] = {1, co, 1, 1}; /* the bias broadcasts over N, OH, OW */
    return ts_close(y && b ? rlx_add(y, rlx_reshape(b, 4, bs)) : y);
}

/* x [N, C_in, L] as rlx_conv_transpose2d on [N, C_in, 1, L]. */
rlx_tensor *rlx_conv_transpose1d(rlx_tensor *x, rlx_tensor *w, rlx_tensor *b, int stride, int padding,
                                 int output_padding, int dilation, int groups)
{
    const char *fn = "rlx_conv_transpose1d";
    if (ts_null(fn, "x", x) || ts_null(fn, "w", w))
        return NULL;
    if (ts_node(x)->rank != 3 || ts_node(w)->rank != 3) {
        ts_error(RLX_E_SHAPE, fn, "x must be [N, C_in, L] and w [C_in, C_out/groups, K], got %s and %s",
                 ts_shape_str(ts_node(x)), ts_shape_str(ts_node(w)));
        return NULL;
    }
    if (!ts_open(fn))
        return NULL;
    int s[2] = {1, stride}, p[2] = {0, padding}, op[2] = {0, output_padding}, d[2] = {1, dilation};
    rlx_tensor *y = rlx_conv_transpose2d(rlx_unsqueeze(x, 2), rlx_unsqueeze(w, 2), b, s, p, op, d, groups);
    return ts_close(rlx_squeeze(y, 2));
}

static rlx_tensor *pool(const char *fn, int kind, rlx_tensor *x, const int kernel[2], const int stride[2],
                        const int padding[2])
{
    if (ts_null(fn, "x", x) || !ts_numeric(fn, "x", x) || !check_nchw(fn, x))
        return NULL;
    if (!kernel) {
        ts_error(RLX_E_ARG, fn, "kernel is NULL");
        return NULL;
    }
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.pool.kind = kind;
    pair(kernel, 1, a.pool.kernel);
    pair(stride ? stride : kernel, 1, a.pool.stride);
    pair(padding, 0, a.pool.pad);
    ir_node *xn = ts_node(x);
    for (int i = 0; i < 2; i++) {
        int k = a.pool.kernel[i], s = a.pool.stride[i], p = a.pool.pad[i];
        if (k < 1 || s < 1 || p < 0 || 2 * (int64_t)p > k) {
            ts_error(RLX_E_ARG, fn,
                     "kernel [%d,%d] and stride [%d,%d] must be >= 1, padding [%d,%d] in 0..kernel/2",
                     a.pool.kernel[0], a.pool.kernel[1], a.pool.stride[0], a.pool.stride[1], a.pool.pad[0],
                     a.pool.pad[1]);
            return NULL;
        }
        if (xn->shape[2 + i] >= 0 && xn->shape[2 + i] + 2 * (int64_t)p < k) {
            ts_error(RLX_E_SHAPE, fn, "kernel %d exceeds the padded input %lld on axis %d of x %s", k,
                     (long long)(xn->shape[2 + i] + 2 * (int64_t)p), 2 + i, ts_shape_str(xn));
            return NULL;
        }
    }
    ir_node *src = ts_cast_node(fn, xn, ts_float_dtype(xn->dtype));
    ir_node *y = src ? ts_make_lib(fn, IR_OP_POOL2D, 1, &src, &a, src->dtype) : NULL;
    ir_release(src);
    return ts_wrap(y);
}

rlx_tensor *rlx_max_pool2d(rlx_tensor *x, const int kernel[2], const int stride[2], const int padding[2])
{
    return pool("rlx_max_pool2d", IR_POOL_MAX, x, kernel, stride, padding);
}

rlx_tensor *rlx_avg_pool2d(rlx_tensor *x, const int kernel[2], const int stride[2], const int padding[2])
{
    return pool("rlx_avg_pool2d", IR_POOL_AVG, x, kernel, stride, padding);
}
