/*
 * shape.c — shape arithmetic and the shape/dtype rule of every op class.
 *
 * ir_infer is the single place that knows what a primitive produces; the
 * verifier re-runs it over a graph, and the tensor layer relies on it after
 * validating user arguments with user-facing messages of its own.
 */
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

int64_t ir_numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0)
            return -1;
    for (int i = 0; i < rank; i++)
        if (shape[i] == 0)
            return 0; /* [6, 2^62, 0] is empty: the product of the others may overflow */
    for (int i = 0; i < rank; i++)
        n *= shape[i]; /* callers checked ir_shape_bytes_ok: no overflow */
    return n;
}

bool ir_shape_bytes_ok(rlx_dtype dt, int rank, const int64_t *shape)
{
    if (rank < 0 || rank > IR_MAX_RANK)
        return false;
    /* candidate fix: the product of the nonzero dims must fit too, so that
     * counts and strides of an empty tensor ([6, 2^62, 0]) never overflow */
    int64_t limit = INT64_MAX / (int64_t)(ir_dtype_size(dt) ? ir_dtype_size(dt) : 1), n = 1;
    for (int i = 0; i < rank; i++) {
        int64_t d = shape[i] <= 0 ? 1 : shape[i];
        if (n > limit / d)
            return false;
        n *= d;
    }
    return true;
}

bool ir_shape_eq(int ra, const int64_t *a, int rb, const int64_t *b)
{
    return ra == rb && (ra == 0 || memcmp(a, b, (size_t)ra * sizeof *a) == 0);
}

bool ir_broadcast_shapes(int ra, const int64_t *a, int rb, const int64_t *b, int *rout, int64_t *out)
{
    int r = ra > rb ? ra : rb;
    int64_t tmp[IR_MAX_RANK];
    for (int i = 0; i < r; i++) {
        int ia = i - (r - ra), ib = i - (r - rb);
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (da == db || db == 1)
            tmp[i] = da;
        else if (da == 1)
            tmp[i] = db;
        else if (da < 0 || db < 0)
            tmp[i] = da < 0 ? db : da; /* a dynamic dim meets a static one */
        else
            return false;
    }
    memcpy(out, tmp, (size_t)r * sizeof *out);
    *rout = r;
    return true;
}

const char *ir_shape_str(char *buf, size_t cap, int rank, const int64_t *shape)
{
    size_t n = 0;
    n += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ",%lld" : "%lld", (long long)shape[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
    return buf;
}

#define FAIL(...) do { snprintf(err, errcap, __VA_ARGS__); return false; } while (0)

static bool same_type(int nsrc, ir_node *const *src, char *err, size_t errcap)
{
    for (int i = 1; i < nsrc; i++) {
        if (src[i]->dtype != src[0]->dtype)
            FAIL("sources differ in dtype");
        if (!ir_shape_eq(src[i]->rank, src[i]->shape, src[0]->rank, src[0]->shape))
            FAIL("sources differ in shape");
    }
    return true;
}

static bool infer_reduce(ir_op op, ir_node *x, const ir_attrs *a, rlx_dtype *dt, int64_t *shape,
                         char *err, size_t errcap)
{
    if (a->red.mask >> x->rank)
        FAIL("reduce mask 0x%x beyond rank %d", a->red.mask, x->rank);
    for (int i = 0; i < x->rank; i++)
        shape[i] = (a->red.mask >> i & 1) ? 1 : x->shape[i];
    *dt = x->dtype;
    if (op == IR_OP_ARGMAX || op == IR_OP_ARGMIN) {
        if (__builtin_popcount(a->red.mask) != 1)
            FAIL("arg reduction needs exactly one axis");
        *dt = RLX_I64;
    }
    return true;
}

static bool infer_movement(ir_op op, ir_node *x, const ir_attrs *a, int *rank, int64_t *shape,
                           char *err, size_t errcap)
{
    switch (op) {
    case IR_OP_RESHAPE:
    case IR_OP_EXPAND:
        *rank = a->shape.rank;
        memcpy(shape, a->shape.dims, sizeof a->shape.dims);
        if (op == IR_OP_RESHAPE) {
            for (int i = 0; i < *rank; i++) /* a dim naming a symbol (<= -2, rlx_reshape) is traced as -1 */
                shape[i] = shape[i] < -1 ? -1 : shape[i];
            if (ir_numel(*rank, shape) != ir_numel(x->rank, x->shape))
                FAIL("reshape changes the element count");
            return true;
        }
        if (*rank != x->rank)
            FAIL("expand changes the rank");
        for (int i = 0; i < x->rank; i++)
            if (x->shape[i] != 1 && x->shape[i] != shape[i])
                FAIL("expand of a dim that is not 1");
        return true;
    case IR_OP_PERMUTE: {
        unsigned seen = 0;
        for (int i = 0; i < x->rank; i++) {
            int p = a->perm.perm[i];
            if (p < 0 || p >= x->rank || (seen >> p & 1))
                FAIL("permutation is not one");
            seen |= 1u << p;
            shape[i] = x->shape[p];
        }
        return true;
    }
    case IR_OP_PAD:
        for (int i = 0; i < x->rank; i++) {
            if (a->pad.before[i] < 0 || a->pad.after[i] < 0)
                FAIL("negative padding");
            shape[i] = x->shape[i] < 0 ? -1 : x->shape[i] + a->pad.before[i] + a->pad.after[i];
        }
        return true;
    case IR_OP_SLICE:
        for (int i = 0; i < x->rank; i++) {
            int64_t s = a->slice.start[i], st = a->slice.step[i], n = a->slice.len[i];
            if (x->shape[i] < 0 && st != 0 && (n != -1 || (s == 0 && st == 1))) {
                /* a dynamic dim: whole, a static length, or a range the
                 * tensor layer resolves when the size is bound (ts.h) */
                shape[i] = n >= 0 ? n : -1;
                continue;
            }
            if (st == 0 || n < 0)
                FAIL("slice step 0 or negative length");
            if (n > 0 && (s < 0 || s >= x->shape[i] || s + (n - 1) * st < 0 || s + (n - 1) * st >= x->shape[i]))
                FAIL("slice out of range on axis %d", i);
            shape[i] = n;
        }
        return true;
    default:
        FAIL("not a movement op");
    }
}

static bool same3(const ir_node *a, const ir_node *b)
{
    return a->shape[0] == b->shape[0] && a->shape[1] == b->shape[1] && a->shape[2] == b->shape[2];
}

static bool infer_library(ir_op op, int nsrc, ir_node *const *src, const ir_attrs *a, rlx_dtype *dt,
                          int *rank, int64_t *shape, char *err, size_t errcap)
{
    ir_node *x = src[0];
    *dt = x->dtype;
    *rank = x->rank;
    memcpy(shape, x->shape, sizeof x->shape);
    switch (op) {
    case IR_OP_MATMUL:
    case IR_OP_SOLVE: {
        ir_node *y = src[1];
        int r = x->rank;
        if (nsrc != 2 || r < 2 || y->rank != r || y->dtype != x->dtype)
            FAIL("%s needs two operands of one rank >= 2 and one dtype", ir_ops[op].name);
        for (int i = 0; i < r - 2; i++)
            if (x->shape[i] != y->shape[i])
                FAIL("batch dims differ");
        if (x->shape[r - 1] != y->shape[r - 2])
            FAIL("inner dims differ");
        if (op == IR_OP_SOLVE && (x->shape[r - 1] != x->shape[r - 2] || !ir_dtype_is_float(x->dtype)))
            FAIL("solve needs square float matrices");
        if (x->dtype == RLX_BOOL)
            FAIL("matmul of bool");
        shape[r - 1] = y->shape[r - 1];
        if (op == IR_OP_SOLVE)
            shape[r - 2] = y->shape[r - 2];
        return true;
    }
    case IR_OP_FFT:
        /* a dynamic (-1) axis is checked when a program binds it */
        if (a->fft.axis < 0 || a->fft.axis >= x->rank || (x->shape[a->fft.axis] > 0 && x->shape[a->fft.axis] % 2) ||
            !ir_dtype_is_float(x->dtype))
            FAIL("fft needs a float axis of even length");
        return true;
    case IR_OP_CONV2D: {
        ir_node *w = src[1];
        const int *s = a->conv.stride, *p = a->conv.pad, *d = a->conv.dil;
        int g = a->conv.groups;
        if (x->rank != 4 || w->rank != 4 || w->dtype != x->dtype || !ir_dtype_is_float(x->dtype) || g < 1 ||
            x->shape[1] != w->shape[1] * g || w->shape[0] % g)
            FAIL("conv2d operands do not fit");
        for (int i = 0; i < 2; i++) {
            if (s[i] < 1 || d[i] < 1 || p[i] < 0)
                FAIL("conv2d stride/dilation/padding");
            if (x->shape[2 + i] < 0 || w->shape[2 + i] < 0) { /* dynamic: checked when a program binds it */
                shape[2 + i] = -1;
                continue;
            }
            int64_t span = (int64_t)d[i] * (w->shape[2 + i] - 1) + 1;
            int64_t in = x->shape[2 + i] + 2 * (int64_t)p[i];
            if (in < span)
                FAIL("conv2d kernel of %lld larger than the padded input %lld on axis %d of x %s", (long long)span,
                     (long long)in, 2 + i, ir_shape_str((char[64]){0}, 64, x->rank, x->shape));
            shape[2 + i] = (in - span) / s[i] + 1;
        }
        shape[1] = w->shape[0];
        return true;
    }
    case IR_OP_POOL2D:
        if (x->rank != 4 || !ir_dtype_is_float(x->dtype))
            FAIL("pool2d needs float [N,C,H,W]");
        for (int i = 0; i < 2; i++) {
            int k = a->pool.kernel[i], s = a->pool.stride[i], p = a->pool.pad[i];
            if (k < 1 || s < 1 || p < 0 || 2 * p > k)
                FAIL("pool2d kernel/stride/padding");
            if (x->shape[2 + i] >= 0 && x->shape[2 + i] + 2 * p < k)
                FAIL("pool2d kernel %d larger than the padded input %lld on axis %d of x %s", k,
                     (long long)(x->shape[2 + i] + 2 * p), 2 + i, ir_shape_str((char[64]){0}, 64, x->rank, x->shape));
            shape[2 + i] = x->shape[2 + i] < 0 ? -1 : (x->shape[2 + i] + 2 * p - k) / s + 1;
        }
        return true;
    case IR_OP_MULTINOMIAL:
        if (x->rank >= 1 && x->rank <= 2 && x->shape[x->rank - 1] == 0) /* (a dynamic N bound to 0) */
            FAIL("multinomial needs N >= 1 categories, got N = 0");
        if (!ir_dtype_is_float(x->dtype) || x->rank < 1 || x->rank > 2 || a->multinomial.samples < 0 ||
            (unsigned)a->multinomial.replacement > 1 ||
            (!a->multinomial.replacement && x->shape[x->rank - 1] >= 0 &&
             a->multinomial.samples > x->shape[x->rank - 1]))
            FAIL("multinomial needs float weights [N] or [B,N] and 0 <= samples (<= N without replacement): %lld "
                 "samples of %lld categories", (long long)a->multinomial.samples, (long long)x->shape[x->rank - 1]);
        *dt = RLX_I64;
        shape[x->rank - 1] = a->multinomial.samples;
        return true;
    case IR_OP_RAND_SEEDED:
        if (x->rank != 0 || (x->dtype != RLX_I32 && x->dtype != RLX_I64) || !ir_dtype_is_float(a->rands.dtype) ||
            a->rands.rank < 0 || a->rands.rank > IR_MAX_RANK || (unsigned)a->rands.normal > 1)
            FAIL("rand_seeded needs a rank-0 i32/i64 seed and a float dtype");
        for (int d = 0; d < a->rands.rank; d++)
            if (a->rands.dims[d] < -1) /* (-1: traced over a program's dynamic dim) */
                FAIL("rand_seeded needs sizes");
        *dt = a->rands.dtype;
        *rank = a->rands.rank;
        memcpy(shape, a->rands.dims, sizeof a->rands.dims);
        return true;
    case IR_OP_MXQUANT:
        if (!ir_dtype_is_float(x->dtype) || x->rank < 1 || a->quant.fmt < 0 || a->quant.fmt > 4 || a->quant.block < 0)
            FAIL("mxquant needs float input and a format");
        *dt = RLX_F32;
        return true;
    case IR_OP_QMATMUL: {
        const ir_node *w = nsrc > 1 ? src[1] : NULL, *s = nsrc > 2 ? src[2] : NULL, *z = nsrc > 3 ? src[3] : NULL;
        if (nsrc < 3 || nsrc > 4 || (x->dtype != RLX_F32 && x->dtype != RLX_F64) || x->rank < 1 ||
            (w->dtype != RLX_I8 && w->dtype != RLX_U8) || w->rank != 2 || s->dtype != x->dtype || s->rank != 1 ||
            s->shape[0] != w->shape[0] ||
            (z && (z->rank != 1 || z->shape[0] != w->shape[0] || (z->dtype != w->dtype && z->dtype != RLX_I32))))
            FAIL("qmatmul needs x [...,K] f32/f64, wq [N,K] i8/u8, scale [N] of x's dtype, zero point [N]");
        if (x->shape[x->rank - 1] >= 0 && w->shape[1] >= 0 && x->shape[x->rank - 1] != w->shape[1])
            FAIL("qmatmul of x with K = %lld and wq [%lld,%lld]", (long long)x->shape[x->rank - 1],
                 (long long)w->shape[0], (long long)w->shape[1]);
        shape[x->rank - 1] = w->shape[0];
        return true;
    }
    case IR_OP_ATTENTION: {
        /* q, k, v[, k2, v2][, mask]: with 5 or 6 sources the keys and values
         * are cat(k, k2) and cat(v, v2) along axis 1, read in two pieces */
        ir_node *k = nsrc > 1 ? src[1] : NULL, *v = nsrc > 2 ? src[2] : NULL;
        ir_node *m = nsrc == 4 || nsrc == 6 ? src[nsrc - 1] : NULL;
        int h = a->attn.heads, hk = a->attn.kv_heads, d = a->attn.head_dim;
        if (nsrc < 3 || nsrc > 6 || !ir_dtype_is_float(x->dtype) || k->dtype != x->dtype || v->dtype != x->dtype ||
            x->rank != 3 || k->rank != 3 || v->rank != 3 || h < 1 || d < 1 || hk < 1 || h % hk ||
            x->shape[2] != (int64_t)h * d || k->shape[2] != (int64_t)hk * d || v->shape[2] != (int64_t)hk * d ||
            k->shape[0] != x->shape[0] || v->shape[0] != x->shape[0] || v->shape[1] != k->shape[1])
            FAIL("attention needs float q [B,Sq,H*D], k and v [B,Sk,Hkv*D] of one dtype, H %% Hkv == 0");
        int64_t sk = k->shape[1];
        if (nsrc >= 5) {
            const ir_node *k2 = src[3], *v2 = src[4];
            if (k2->dtype != x->dtype || v2->dtype != x->dtype || k2->rank != 3 || v2->rank != 3 ||
                k2->shape[0] != x->shape[0] || v2->shape[0] != x->shape[0] || k2->shape[2] != k->shape[2] ||
                v2->shape[2] != k->shape[2] || v2->shape[1] != k2->shape[1])
                FAIL("attention's second key/value piece must be [B,Sn,Hkv*D] like k and v");
            sk = sk < 0 || k2->shape[1] < 0 ? -1 : sk + k2->shape[1];
        }
        if (a->attn.mask < RLX_MASK_NONE || a->attn.mask > RLX_MASK_SLIDING ||
            (a->attn.mask == RLX_MASK_SLIDING && a->attn.window < 1))
            FAIL("attention mask kind or window");
        if (m) {
            int64_t full[4] = {x->shape[0], h, x->shape[1], sk};
            bool fits = m->rank == 4 && (m->dtype == RLX_BOOL || m->dtype == x->dtype);
            for (int i = 0; fits && i < 4; i++)
                fits = m->shape[i] == 1 || m->shape[i] == full[i];
            if (!fits)
                FAIL("attention mask must be bool or the scores' dtype, [B|1, H|1, Sq|1, Sk|1]");
        }
        return true;
    }
    case IR_OP_ATTENTION_BWD: {
        /* q, k, v, o, g[, mask] (o and g like q): static lengths only (the rule falls back otherwise) */
        const ir_node *k = nsrc > 2 ? src[1] : NULL, *v = nsrc > 2 ? src[2] : NULL;
        const ir_node *o = nsrc > 4 ? src[3] : NULL, *g = nsrc > 4 ? src[4] : NULL;
        int h = a->attn.heads, hk = a->attn.kv_heads, d = a->attn.head_dim;
        if (nsrc < 5 || nsrc > 6 || !ir_dtype_is_float(x->dtype) || x->rank != 3 || k->rank != 3 ||
            v->rank != 3 || o->rank != 3 || g->rank != 3 || k->dtype != x->dtype || v->dtype != x->dtype ||
            o->dtype != x->dtype || g->dtype != x->dtype || h < 1 || hk < 1 || d < 1 || h % hk ||
            x->shape[2] != (int64_t)h * d || k->shape[2] != (int64_t)hk * d || !same3(k, v) || !same3(o, x) ||
            !same3(g, x) || k->shape[0] != x->shape[0] || x->shape[0] < 0 || x->shape[1] < 0 || k->shape[1] < 0)
            FAIL("attention_bwd needs float q, o, g [B,Sq,H*D], k and v [B,Sk,Hkv*D] of static lengths");
        if (a->attn.mask < RLX_MASK_NONE || a->attn.mask > RLX_MASK_SLIDING ||
            (a->attn.mask == RLX_MASK_SLIDING && a->attn.window < 1))
            FAIL("attention_bwd mask kind or window");
        if (nsrc == 6) {
            const ir_node *m = src[5];
            int64_t full[4] = {x->shape[0], h, x->shape[1], k->shape[1]};
            bool fits = m->rank == 4 && (m->dtype == RLX_BOOL || m->dtype == x->dtype);
            for (int i = 0; fits && i < 4; i++)
                fits = m->shape[i] == 1 || m->shape[i] == full[i];
            if (!fits)
                FAIL("attention_bwd mask must be bool or the scores' dtype, [B|1, H|1, Sq|1, Sk|1]");
        }
        double total = (double)x->shape[0] * ((double)x->shape[1] * x->shape[2] + 2.0 * k->shape[1] * k->shape[2]);
        if (total > 9e15)
            FAIL("attention_bwd output too large");
        *rank = 1;
        shape[0] = x->shape[0] * (x->shape[1] * x->shape[2] + 2 * k->shape[1] * k->shape[2]);
        return true;
    }
    default:
        FAIL("not a library op");
    }
}

/* SCATTER(base, index, src): the result is base's type; index (integer)
 * and src (base's dtype) have one shape of base's rank, no longer than base
 * off the axis (dynamic -1 dims are not compared). */
static bool infer_scatter(ir_node *const *src, const ir_attrs *a, char *err, size_t errcap)
{
    const ir_node *x = src[0], *idx = src[1], *v = src[2];
    int ax = a->scatter.axis;
    if (ax < 0 || ax >= x->rank || (a->scatter.mode != IR_SCATTER_ADD && a->scatter.mode != IR_SCATTER_SET))
        FAIL("scatter axis or mode");
    if (!ir_dtype_is_index(idx->dtype) || v->dtype != x->dtype || idx->rank != x->rank ||
        !ir_shape_eq(idx->rank, idx->shape, v->rank, v->shape))
        FAIL("scatter needs an integer index and a src of one shape, of base's rank and dtype");
    for (int d = 0; d < x->rank; d++)
        if (d != ax && idx->shape[d] >= 0 && x->shape[d] >= 0 && idx->shape[d] > x->shape[d])
            FAIL("scatter index longer than base off the axis");
    return true;
}

bool ir_infer(ir_op op, int nsrc, ir_node *const *src, const ir_attrs *attr, rlx_dtype *dt,
              int *rank, int64_t *shape, char *err, size_t errcap)
{
    const ir_op_info *info = &ir_ops[op];
    if (info->arity >= 0 ? nsrc != info->arity : nsrc < 1)
        FAIL("%s takes %d sources, got %d", info->name, info->arity, nsrc);
    if (info->cls == IR_CLS_LEAF)
        FAIL("leaf has no rule");
    ir_node *x = src[0];
    *dt = x->dtype;
    *rank = x->rank;
    memcpy(shape, x->shape, sizeof x->shape);
    if (ir_c64_refuses(op, nsrc, src)) { /* complex computes only the ops rlx.h lists */
        rlx_dtype bad = x->dtype;
        for (int s = nsrc - 1; s >= 0; s--)
            bad = ir_dtype_is_complex(src[s]->dtype) ? src[s]->dtype : bad;
        FAIL("%s does not take %s", info->name, ir_dtype_name(bad));
    }
    /* library kernels are written for the wide dtypes (and bf16, f16 matmul);
     * the tensor layer converts narrow ones around them (rlx.h) */
    for (int s = 0; s < nsrc && info->emit == IR_EMIT_LIB; s++)
        if (!ir_lib_takes(op, src[s]->dtype))
            FAIL("%s of %s (library kernels take wide dtypes)", info->name, ir_dtype_name(src[s]->dtype));
    switch (info->cls) {
    case IR_CLS_UNARY:
        if ((info->flags & IR_F_FLOAT_MATH) && !ir_dtype_is_float(x->dtype) && !ir_dtype_is_complex(x->dtype))
            FAIL("%s of a non-float source", info->name);
        if ((info->flags & IR_F_NO_BOOL) && x->dtype == RLX_BOOL)
            FAIL("%s of bool", info->name);
        if (op == IR_OP_CAST)
            *dt = attr->cast.dtype;
        if (info->flags & IR_F_BOOL_OUT)
            *dt = RLX_BOOL;
        return ir_dtype_valid((int)*dt) ? true : (snprintf(err, errcap, "bad dtype"), false);
    case IR_CLS_BINARY:
        if (!same_type(nsrc, src, err, errcap))
            return false;
        if ((info->flags & IR_F_FLOAT_MATH) && !ir_dtype_is_float(x->dtype))
            FAIL("%s of non-float sources", info->name);
        if (!(info->flags & IR_F_BOOL_OK) && x->dtype == RLX_BOOL)
            FAIL("%s of bools", info->name);
        if (info->flags & IR_F_BOOL_OUT)
            *dt = RLX_BOOL;
        return true;
    case IR_CLS_TERNARY:
        if (src[0]->dtype != RLX_BOOL || !ir_shape_eq(src[0]->rank, src[0]->shape, src[1]->rank, src[1]->shape))
            FAIL("where needs a bool condition of the result's shape");
        if (!same_type(2, src + 1, err, errcap))
            return false;
        *dt = src[1]->dtype;
        return true;
    case IR_CLS_REDUCE:
        return infer_reduce(op, x, attr, dt, shape, err, errcap);
    case IR_CLS_MOVEMENT:
        return infer_movement(op, x, attr, rank, shape, err, errcap);
    case IR_CLS_SCAN:
        if (op == IR_OP_ARGSORT) {
            int ax = attr->sort.axis;
            /* k -1 over a dynamic axis: the whole line (a program binds its length) */
            if (ax < 0 || ax >= x->rank || (unsigned)attr->sort.descending > 1 ||
                (attr->sort.k < 0 && !(attr->sort.k == -1 && x->shape[ax] < 0)) ||
                (x->shape[ax] >= 0 && attr->sort.k > x->shape[ax]))
                FAIL("argsort axis, direction or k");
            *dt = RLX_I64;
            shape[ax] = attr->sort.k;
            return true;
        }
        if (attr->scan.axis < 0 || attr->scan.axis >= x->rank)
            FAIL("cumsum axis");
        return true;
    case IR_CLS_INDEX:
        if (op == IR_OP_SCATTER)
            return infer_scatter(src, attr, err, errcap);
        if (op == IR_OP_GATHER) {
            ir_node *idx = src[1];
            int ax = attr->ax.axis;
            if (ax < 0 || ax >= x->rank || !ir_dtype_is_index(idx->dtype) || x->rank - 1 + idx->rank > IR_MAX_RANK)
                FAIL("gather axis/index dtype/rank");
            *rank = x->rank - 1 + idx->rank;
            memcpy(shape + ax, idx->shape, (size_t)idx->rank * sizeof *shape);
            memcpy(shape + ax + idx->rank, x->shape + ax + 1, (size_t)(x->rank - ax - 1) * sizeof *shape);
            return true;
        } else {
            int ax = attr->ax.axis;
            if (ax < 0 || ax >= x->rank)
                FAIL("cat axis");
            shape[ax] = 0;
            for (int i = 0; i < nsrc; i++) {
                ir_node *s = src[i];
                if (s->rank != x->rank || s->dtype != x->dtype)
                    FAIL("cat sources differ in rank or dtype");
                for (int d = 0; d < x->rank; d++)
                    if (d != ax && s->shape[d] != x->shape[d])
                        FAIL("cat sources differ off the axis");
                if (shape[ax] < 0 || s->shape[ax] < 0) {
                    shape[ax] = -1; /* a dynamic length */
                    continue;
                }
                if (s->shape[ax] > INT64_MAX - shape[ax])
                    FAIL("cat length overflows");
                shape[ax] += s->shape[ax];
            }
            return true;
        }
    case IR_CLS_LIBRARY:
        return infer_library(op, nsrc, src, attr, dt, rank, shape, err, errcap);
    default:
        FAIL("unknown class");
    }
}
