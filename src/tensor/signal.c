/*
 * signal.c — the discrete Fourier transform over one axis.
 *
 * Complex values use the [..., 2N] layout: along the axis, N real parts
 * then N imaginary parts. The transform is one FFT primitive (a library
 * call for the passes); both directions are unnormalized, so
 * ifft(fft(x)) = N x. Integer and bool inputs compute in f32.
 */
#include <string.h>

#include "tensor/ts.h"

static rlx_tensor *fft_impl(const char *fn, rlx_tensor *x, int axis, bool inverse)
{
    if (ts_null(fn, "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    if (ir_dtype_is_complex(n->dtype)) {
        ts_error(RLX_E_DTYPE, fn, "takes the [..., 2N] layout of a real dtype, got %s (use rlx_fft_c)",
                 ir_dtype_name(n->dtype));
        return NULL;
    }
    if (n->rank == 0) {
        ts_error(RLX_E_SHAPE, fn, "a rank-0 tensor has no axis to transform (need [..., 2N])");
        return NULL;
    }
    int ax = ts_axis(fn, axis, n->rank);
    if (ax < 0)
        return NULL;
    int64_t len = n->shape[ax];
    if (len > 0 && len % 2) { /* a dynamic length is checked when bound */
        ts_error(RLX_E_SHAPE, fn,
                 "axis %d of shape %s has odd length %lld; complex values need 2N (N real, N imaginary parts)",
                 axis, ts_shape_str(n), (long long)len);
        return NULL;
    }
    ir_node *src = ts_cast_node(fn, n, ir_dtype_is_float(n->dtype) ? n->dtype : RLX_F32);
    if (!src)
        return NULL;
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.fft.axis = ax;
    a.fft.inverse = inverse;
    ir_node *out = ts_make_lib(fn, IR_OP_FFT, 1, &src, &a, src->dtype);
    ir_release(src);
    return ts_wrap(out);
}

rlx_tensor *rlx_fft(rlx_tensor *x) { return fft_impl("rlx_fft", x, -1, false); }
rlx_tensor *rlx_ifft(rlx_tensor *x) { return fft_impl("rlx_ifft", x, -1, true); }
rlx_tensor *rlx_fft_axis(rlx_tensor *x, int axis, bool inverse) { return fft_impl("rlx_fft_axis", x, axis, inverse); }

/* Complex tensors: the [..., 2N] transform of cat(real, imag) along the
 * axis, split back into parts. The parts go through f32 and the FFT
 * kernel computes f32 in double, so each result part rounds once. */
rlx_tensor *rlx_fft_c(rlx_tensor *x, int axis, bool inverse)
{
    const char *fn = "rlx_fft_c";
    if (ts_null(fn, "x", x))
        return NULL;
    ir_node *n = ts_node(x);
    if (n->dtype == RLX_BOOL) {
        ts_error(RLX_E_DTYPE, fn, "x must be numeric, got bool");
        return NULL;
    }
    if (n->rank == 0) {
        ts_error(RLX_E_SHAPE, fn, "a rank-0 tensor has no axis to transform");
        return NULL;
    }
    int ax = ts_axis(fn, axis, n->rank);
    if (ax < 0)
        return NULL;
    if (!ts_open(fn))
        return NULL;
    rlx_tensor *z = ir_dtype_is_complex(n->dtype) ? x : rlx_cast(x, ir_promote(n->dtype, RLX_C64)); /* f64 -> c128 */
    rlx_tensor *parts[2] = {rlx_real(z), rlx_imag(z)}, *halves[2] = {NULL, NULL};
    rlx_tensor *f = rlx_fft_axis(rlx_cat(parts, 2, ax), ax, inverse);
    if (f && rlx_chunk(f, ax, 2, halves) != RLX_OK) /* the real and imaginary halves, also of a dynamic axis */
        halves[0] = halves[1] = NULL;
    return ts_close(rlx_complex(halves[0], halves[1]));
}
