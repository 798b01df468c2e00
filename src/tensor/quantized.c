/*
 * quantized.c — int8 weights with per-channel scales: rlx_linear_q8 (the
 * QMATMUL primitive and its bias) and rlx_quantize_per_channel, which makes
 * such weights from a float tensor.
 *
 * QMATMUL computes in f32 (f64 for f64 x): narrow float activations are
 * widened before it and the result rounded once to x's dtype after the
 * bias add. The quantizer is a composite of public ops (abs, max, round,
 * clamp), so it is lazy like every other op and runs on either backend.
 */
#include <string.h>

#include "tensor/ts.h"

/* Checks an optional per-channel vector t: rank 1 and [nout]. */
static bool check_channels(const char *fn, const char *arg, rlx_tensor *t, const ir_node *wn)
{
    ir_node *tn = ts_node(t);
    if (tn->rank == 1 && tn->shape[0] == wn->shape[0])
        return true;
    ts_error(RLX_E_SHAPE, fn, "%s must be [%lld] (out of wq %s), got %s", arg, (long long)wn->shape[0],
             ts_shape_str(wn), ts_shape_str(tn));
    return false;
}

static bool check_float(const char *fn, const char *arg, rlx_tensor *t)
{
    rlx_dtype dt = ts_node(t)->dtype;
    if (ir_dtype_is_float(dt))
        return true;
    ts_error(RLX_E_DTYPE, fn, "%s must be a float tensor (f32, f64, f16 or bf16), got %s", arg, rlx_dtype_name(dt));
    return false;
}

static bool linear_q8_check(const char *fn, rlx_tensor *x, rlx_tensor *wq, rlx_tensor *scale, rlx_tensor *zp,
                            rlx_tensor *b)
{
    if (ts_null(fn, "x", x) || ts_null(fn, "wq", wq) || ts_null(fn, "scale", scale))
        return false;
    ir_node *xn = ts_node(x), *wn = ts_node(wq);
    if (!check_float(fn, "x", x) || !check_float(fn, "scale", scale) || (b && !check_float(fn, "b", b)))
        return false;
    if (wn->dtype != RLX_I8 && wn->dtype != RLX_U8) {
        ts_error(RLX_E_DTYPE, fn, "wq must be i8 or u8, got %s", rlx_dtype_name(wn->dtype));
        return false;
    }
    if (zp && ts_node(zp)->dtype != wn->dtype && ts_node(zp)->dtype != RLX_I32) {
        ts_error(RLX_E_DTYPE, fn, "zero_point must be %s (wq's dtype) or i32, got %s", rlx_dtype_name(wn->dtype),
                 rlx_dtype_name(ts_node(zp)->dtype));
        return false;
    }
    if (wn->rank != 2) {
        ts_error(RLX_E_SHAPE, fn, "wq must be [out, in], got %s", ts_shape_str(wn));
        return false;
    }
    if (xn->rank < 1 || xn->shape[xn->rank - 1] != wn->shape[1]) {
        ts_error(RLX_E_SHAPE, fn, "x %s does not end in in = %lld of wq %s", ts_shape_str(xn),
                 (long long)wn->shape[1], ts_shape_str(wn));
        return false;
    }
    return check_channels(fn, "scale", scale, wn) && (!zp || check_channels(fn, "zero_point", zp, wn)) &&
           (!b || check_channels(fn, "b", b, wn));
}

rlx_tensor *rlx_linear_q8(rlx_tensor *x, rlx_tensor *wq, rlx_tensor *scale, rlx_tensor *zero_point, rlx_tensor *b)
{
    const char *fn = "rlx_linear_q8";
    if (!linear_q8_check(fn, x, wq, scale, zero_point, b) || !ts_open(fn))
        return NULL;
    rlx_dtype xdt = ts_node(x)->dtype, cd = xdt == RLX_F64 ? RLX_F64 : RLX_F32;
    rlx_tensor *xc = rlx_cast(x, cd), *sc = rlx_cast(scale, cd);
    rlx_tensor *bc = b ? rlx_cast(b, cd) : NULL;
    if (!xc || !sc || (b && !bc)) /* out of memory: NULL must not mean "no bias" */
        return ts_close(NULL);
    ir_node *src[4] = {ts_node(xc), ts_node(wq), ts_node(sc), zero_point ? ts_node(zero_point) : NULL};
    rlx_tensor *y = ts_wrap(ts_make_lib(fn, IR_OP_QMATMUL, zero_point ? 4 : 3, src, NULL, cd));
    return ts_close_as(bc ? rlx_add(y, bc) : y, xdt);
}

/* max (or min) of t over every axis but ax, keeping dims; t itself when
 * there is no other axis. */
static rlx_tensor *reduce_others(rlx_tensor *t, int ax, bool max)
{
    if (!t)
        return NULL;
    int rank = ts_node(t)->rank, axes[IR_MAX_RANK], n = 0;
    for (int d = 0; d < rank; d++)
        if (d != ax)
            axes[n++] = d;
    if (n == 0)
        return t;
    return max ? rlx_max(t, axes, n, true) : rlx_min(t, axes, n, true);
}

/* The f32 scale range / levels per channel (1 where range is 0: an all-zero
 * channel keeps codes 0 and divides by nothing), back in w's compute dtype
 * cd so that codes are computed with the scale the kernel will use. */
static rlx_tensor *channel_scale(rlx_tensor *range, double levels, rlx_dtype cd)
{
    rlx_tensor *s = rlx_where(rlx_gt_s(range, 0), rlx_div_s(range, levels), rlx_ones_like(range));
    return rlx_cast(rlx_cast(s, RLX_F32), cd);
}

rlx_status rlx_quantize_per_channel(rlx_tensor *w, rlx_dtype dt, int axis, rlx_tensor **wq, rlx_tensor **scale,
                                    rlx_tensor **zero_point)
{
    const char *fn = "rlx_quantize_per_channel";
    if (wq)
        *wq = NULL;
    if (scale)
        *scale = NULL;
    if (zero_point)
        *zero_point = NULL;
    if (ts_null(fn, "w", w))
        return rlx_last_status();
    if (!wq || !scale || (dt == RLX_U8 && !zero_point)) {
        ts_error(RLX_E_ARG, fn, "wq and scale (and zero_point for u8) must not be NULL");
        return RLX_E_ARG;
    }
    if (dt != RLX_I8 && dt != RLX_U8) {
        ts_error(RLX_E_DTYPE, fn, "dtype must be i8 (symmetric) or u8 (with zero points), got %s",
                 rlx_dtype_name(dt));
        return RLX_E_DTYPE;
    }
    if (!check_float(fn, "w", w))
        return RLX_E_DTYPE;
    ir_node *wn = ts_node(w);
    if (wn->rank < 1) {
        ts_error(RLX_E_SHAPE, fn, "w must have a channel axis, got shape %s", ts_shape_str(wn));
        return RLX_E_SHAPE;
    }
    int ax = ts_axis(fn, axis, wn->rank);
    if (ax < 0)
        return rlx_last_status();
    int64_t nch[1] = {wn->shape[ax]};
    if (!ts_open(fn))
        return rlx_last_status();
    rlx_dtype cd = wn->dtype == RLX_F64 ? RLX_F64 : RLX_F32;
    rlx_tensor *wf = rlx_cast(w, cd), *s, *q, *zp = NULL;
    if (dt == RLX_I8) { /* symmetric: scale = amax / 127, codes in [-127, 127] */
        s = channel_scale(reduce_others(rlx_abs(wf), ax, true), 127, cd);
        q = rlx_clamp(rlx_round(rlx_div(wf, s)), -127, 127);
    } else { /* affine: [min(lo, 0), max(hi, 0)] onto [0, 255], 0 exact */
        rlx_tensor *lo = rlx_minimum_s(reduce_others(wf, ax, false), 0);
        rlx_tensor *hi = rlx_maximum_s(reduce_others(wf, ax, true), 0);
        s = channel_scale(rlx_sub(hi, lo), 255, cd);
        zp = rlx_clamp(rlx_round(rlx_neg(rlx_div(lo, s))), 0, 255);
        q = rlx_clamp(rlx_add(rlx_round(rlx_div(wf, s)), zp), 0, 255);
        zp = rlx_cast(rlx_reshape(zp, 1, nch), RLX_U8);
    }
    rlx_tensor *sv = rlx_cast(rlx_reshape(s, 1, nch), RLX_F32), *qv = rlx_cast(q, dt);
    /* three results out of one composite: sv and zp are held apart and
     * wrapped after it closes */
    ir_node *sn = NULL, *zn = NULL;
    if (qv && sv && (dt == RLX_I8 || zp)) {
        sn = ir_retain(ts_node(sv));
        zn = zp ? ir_retain(ts_node(zp)) : NULL;
    } else {
        qv = NULL;
    }
    qv = ts_close(qv);
    if (!qv) {
        ir_release(sn);
        ir_release(zn);
        return rlx_last_status();
    }
    rlx_tensor *st = ts_wrap(sn);
    if (!st) { /* only with a scope open, which owns qv */
        ir_release(zn);
        return rlx_last_status();
    }
    rlx_tensor *zt = zn ? ts_wrap(zn) : NULL;
    if (zn && !zt)
        return rlx_last_status();
    *wq = qv;
    *scale = st;
    if (zero_point)
        *zero_point = zt;
    return RLX_OK;
}
