/*
 * lowp.c — low-precision and weight-synthesis ops: scaled (MX) matmul,
 * codebook-synthesized weights and the Gaussian-basis spline activation.
 *
 * rlx_scaled_matmul is the one user of the MXQUANT primitive, which
 * quantizes along the last axis and holds the dequantized values as f32
 * (see src/runtime/kernels/quant.c); the product is then an ordinary f32
 * matmul. The other ops are composites of public calls.
 */
#include <math.h>
#include <string.h>

#include "tensor/ts.h"

/* The number of formats in rlx_minifloat (RLX_FP4_E2M1 is the last). */
#define LOWP_NFORMATS 5

static bool check_rank(const char *fn, const char *arg, rlx_tensor *t, int rank)
{
    if (ts_node(t)->rank == rank)
        return true;
    ts_error(RLX_E_SHAPE, fn, "%s must have rank %d, got shape %s", arg, rank, ts_shape_str(ts_node(t)));
    return false;
}

/* mxquant(t) in the open composite scope; NULL passes through. */
static rlx_tensor *mxquant(const char *fn, rlx_tensor *t, int fmt, int block)
{
    if (!t)
        return NULL;
    ir_node *src = ts_node(t);
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.quant.fmt = fmt;
    a.quant.block = block;
    return ts_wrap(ts_make_lib(fn, IR_OP_MXQUANT, 1, &src, &a, RLX_F32));
}

rlx_tensor *rlx_scaled_matmul(rlx_tensor *x, rlx_tensor *w, rlx_minifloat fmt, int block)
{
    const char *fn = "rlx_scaled_matmul";
    if (ts_null(fn, "x", x) || ts_null(fn, "w", w))
        return NULL;
    if ((int)fmt < 0 || (int)fmt >= LOWP_NFORMATS) {
        ts_error(RLX_E_ARG, fn, "unknown minifloat format %d (expected 0..%d)", (int)fmt, LOWP_NFORMATS - 1);
        return NULL;
    }
    if (block < 0) {
        ts_error(RLX_E_ARG, fn, "block %d is negative (0 means one scale per tensor)", block);
        return NULL;
    }
    if (!check_rank(fn, "x", x, 2) || !check_rank(fn, "w", w, 2))
        return NULL;
    ir_node *xn = ts_node(x), *wn = ts_node(w);
    if (xn->shape[1] != wn->shape[1]) {
        ts_error(RLX_E_SHAPE, fn, "inner dimensions differ: x %s, w %s (expected x [m,k], w [n,k])",
                 ts_shape_str(xn), ts_shape_str(wn));
        return NULL;
    }
    if (xn->dtype == RLX_BOOL || wn->dtype == RLX_BOOL) {
        ts_error(RLX_E_DTYPE, fn, "bool operands (x %s, w %s) are not numbers", rlx_dtype_name(xn->dtype),
                 rlx_dtype_name(wn->dtype));
        return NULL;
    }
    if (!ts_open(fn))
        return NULL;
    rlx_tensor *qx = mxquant(fn, ts_as_float(x), (int)fmt, block);
    rlx_tensor *qw = mxquant(fn, ts_as_float(w), (int)fmt, block);
    return ts_close(qx && qw ? rlx_matmul_t(qx, qw) : NULL);
}

/* Checks indices [n, k/d] (integer) and codebook [E, d]; k, when >= 0,
 * must equal indices.shape[1] * d. */
static bool check_synth(const char *fn, rlx_tensor *indices, rlx_tensor *codebook, int64_t k)
{
    if (!check_rank(fn, "indices", indices, 2) || !check_rank(fn, "codebook", codebook, 2))
        return false;
    ir_node *in = ts_node(indices), *cb = ts_node(codebook);
    if (!ir_dtype_is_index(in->dtype)) {
        ts_error(RLX_E_DTYPE, fn, "indices must be i32 or i64, got %s", rlx_dtype_name(in->dtype));
        return false;
    }
    if (cb->dtype == RLX_BOOL) {
        ts_error(RLX_E_DTYPE, fn, "codebook must be numeric, got bool");
        return false;
    }
    if (cb->shape[1] > 0 && in->shape[1] > INT64_MAX / cb->shape[1]) {
        ts_error(RLX_E_SHAPE, fn, "indices %s with codebook %s give rows too long to address", ts_shape_str(in),
                 ts_shape_str(cb));
        return false;
    }
    if (k >= 0 && in->shape[1] * cb->shape[1] != k) {
        ts_error(RLX_E_SHAPE, fn, "indices %s with codebook %s give rows of %lld elements, x has k = %lld",
                 ts_shape_str(in), ts_shape_str(cb), (long long)(in->shape[1] * cb->shape[1]), (long long)k);
        return false;
    }
    return true;
}

/* W [n, k] = rows of codebook picked by indices, concatenated per row. */
static rlx_tensor *synth_weight(rlx_tensor *indices, rlx_tensor *codebook)
{
    ir_node *in = ts_node(indices), *cb = ts_node(codebook);
    int64_t shape[2] = {in->shape[0], in->shape[1] * cb->shape[1]};
    return rlx_reshape(rlx_gather(codebook, indices, 0), 2, shape);
}

rlx_tensor *rlx_synth_matmul(rlx_tensor *x, rlx_tensor *indices, rlx_tensor *codebook)
{
    const char *fn = "rlx_synth_matmul";
    if (ts_null(fn, "x", x) || ts_null(fn, "indices", indices) || ts_null(fn, "codebook", codebook))
        return NULL;
    if (!check_rank(fn, "x", x, 2) || !check_synth(fn, indices, codebook, ts_node(x)->shape[1]))
        return NULL;
    if (!ts_open(fn))
        return NULL;
    return ts_close(rlx_matmul_t(x, synth_weight(indices, codebook)));
}

rlx_tensor *rlx_synth_reconstruct(rlx_tensor *indices, rlx_tensor *codebook)
{
    const char *fn = "rlx_synth_reconstruct";
    if (ts_null(fn, "indices", indices) || ts_null(fn, "codebook", codebook))
        return NULL;
    if (!check_synth(fn, indices, codebook, -1) || !ts_open(fn))
        return NULL;
    return ts_close(rlx_t(synth_weight(indices, codebook)));
}

rlx_tensor *rlx_spline_activation(rlx_tensor *x, rlx_tensor *coeff, int num_basis, double grid_min,
                                  double grid_max)
{
    const char *fn = "rlx_spline_activation";
    if (ts_null(fn, "x", x) || ts_null(fn, "coeff", coeff) || !ts_numeric(fn, "x", x) ||
        !ts_numeric(fn, "coeff", coeff))
        return NULL;
    if (num_basis < 2) {
        ts_error(RLX_E_ARG, fn, "num_basis %d must be at least 2", num_basis);
        return NULL;
    }
    if (!isfinite(grid_min) || !isfinite(grid_max) || !(grid_min < grid_max)) {
        ts_error(RLX_E_ARG, fn, "grid [%g, %g] must be finite with grid_min < grid_max", grid_min, grid_max);
        return NULL;
    }
    ir_node *xn = ts_node(x), *cn = ts_node(coeff);
    if (xn->rank == 0) {
        ts_error(RLX_E_SHAPE, fn, "x must have a channel axis [..., C], got a rank-0 tensor");
        return NULL;
    }
    int64_t c = xn->shape[xn->rank - 1];
    if (cn->rank != 2 || cn->shape[0] != c || cn->shape[1] != num_basis) {
        ts_error(RLX_E_SHAPE, fn, "coeff must be [C, G] = [%lld,%d] for x %s, got %s", (long long)c, num_basis,
                 ts_shape_str(xn), ts_shape_str(cn));
        return NULL;
    }
    double *ctr = ir_alloc((size_t)num_basis * sizeof *ctr);
    if (!ctr) {
        ts_error(RLX_E_NOMEM, fn, "out of memory for %d grid centers", num_basis);
        return NULL;
    }
    double h = (grid_max - grid_min) / (num_basis - 1);
    for (int g = 0; g < num_basis; g++) /* linspace: the last center is grid_max exactly */
        ctr[g] = g == num_basis - 1 ? grid_max : grid_min + g * h;
    if (!ts_open(fn)) {
        ir_free(ctr);
        return NULL;
    }
    int64_t gshape[1] = {num_basis};
    rlx_tensor *xf = ts_as_float(x); /* f16/bf16 in f32, rounded once at the end */
    rlx_tensor *centers = xf ? rlx_cast(rlx_from_data(RLX_F64, 1, gshape, ctr), ts_node(xf)->dtype) : NULL;
    ir_free(ctr);
    /* [..., C, 1] - [G] -> [..., C, G]; coeff [C, G] broadcasts over the batch. */
    rlx_tensor *t = rlx_div_s(rlx_sub(rlx_unsqueeze(xf, -1), centers), h);
    rlx_tensor *basis = rlx_exp(rlx_neg(rlx_mul(t, t)));
    int last = -1;
    rlx_dtype out = ir_promote(ts_float_dtype(xn->dtype), ts_float_dtype(cn->dtype));
    return ts_close_as(rlx_sum(rlx_mul(basis, ts_as_float(coeff)), &last, 1, false), out);
}
