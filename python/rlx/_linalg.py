"""Matrix products (matmul, einsum, linear, linear_q8) and solvers (solve, inv)."""

import operator

from ._base import _lib, _clear, _act, _check, _pieces
from ._dtypes import _dtype
from ._tensor import _wrap, _tt, _opt, _h, _apply, _attach, _handles
from ._elementwise import _operand


def matmul(a, b):
    """NumPy @ (1-D operands, broadcast batch dims)."""
    return _apply(_lib.rlx_matmul, a, b)


def matmul_t(a, b):
    """a @ swap_last_two(b)."""
    return _apply(_lib.rlx_matmul_t, a, b)


def einsum(equation, *operands):
    """NumPy einsum: einsum("ij,jk->ik", a, b); implicit output, "...",
    diagonals ("ii->i") and size-1 broadcasting as NumPy. Contractions are
    batched matmuls."""
    if not isinstance(equation, str):
        raise TypeError("rlx.einsum: the equation must be a str, got %s" % type(equation).__name__)
    ts, arr = _handles(operands)
    _clear()
    return _wrap(_lib.rlx_einsum(equation.encode(), arr, len(ts)))


def linear(x, weight, bias=None, act=None):
    """x @ weight.T + bias with weight [out, in]; act (None, 'relu', 'gelu',
    'gelu_tanh', 'silu', 'tanh', 'sigmoid') fuses an activation."""
    x, w = _tt(x), _tt(weight)
    b = _opt(bias)
    _clear()
    if act is None:
        return _wrap(_lib.rlx_linear(x._h, w._h, _h(b)))
    return _wrap(_lib.rlx_linear_act(x._h, w._h, _h(b), _act(act)))


def linear_q8(x, wq, scale, zero_point=None, bias=None):
    """x @ W.T + bias with int8 weights for inference: wq [out, in] int8 or
    uint8, W[n, k] = (wq[n, k] - zero_point[n]) * scale[n]; scale and bias
    [out] float, zero_point [out] of wq's dtype or int32 (None: 0). x is
    float32, float64, float16 or bfloat16; the result has x's dtype
    (computed in float32, float64 for float64 x). Gradients reach x and
    bias only: the quantized weight is frozen."""
    x, w, s = _tt(x), _tt(wq), _tt(scale)
    z, b = _opt(zero_point), _opt(bias)
    _clear()
    return _wrap(_lib.rlx_linear_q8(x._h, w._h, s._h, _h(z), _h(b)))


def quantize_per_channel(w, dtype="int8", axis=0):
    """(wq, scale, zero_point) quantizing the float w per channel along axis
    (0 for a linear weight [out, in]) so that linear_q8(x, wq, scale,
    zero_point) approximates linear(x, w). int8: symmetric, scale =
    amax / 127, codes in [-127, 127], zero_point None. uint8: affine over
    [min(lo, 0), max(hi, 0)], scale = range / 255, uint8 zero points.
    Codes round half to even and saturate; an all-zero channel gets scale 1.
    scale is float32 [C]."""
    w = _tt(w)
    dt = _dtype(dtype)
    q, s, z = _pieces(1), _pieces(1), _pieces(1)
    _clear()
    _check(_lib.rlx_quantize_per_channel(w._h, dt.code, operator.index(axis), q, s, z))
    return _wrap(q[0]), _wrap(s[0]), (_wrap(z[0]) if z[0] else None)


def linear_act(x, weight, bias, act):
    x, w = _tt(x), _tt(weight)
    b = _opt(bias)
    _clear()
    return _wrap(_lib.rlx_linear_act(x._h, w._h, _h(b), _act(act)))


def solve(a, b):
    """NumPy linalg.solve (batched); a singular matrix raises at realization."""
    a, b = _tt(a), _tt(b)
    _clear()
    return _wrap(_lib.rlx_solve(a._h, b._h))


def inv(a):
    a = _tt(a)
    _clear()
    return _wrap(_lib.rlx_inv(a._h))


class _MatmulOperators:
    """Tensor @ Tensor, array @ Tensor."""
    def __matmul__(self, o):
        o = _operand(o)
        return NotImplemented if o is NotImplemented else matmul(self, o)
    def __rmatmul__(self, o):
        o = _operand(o)
        return NotImplemented if o is NotImplemented else matmul(o, self)


_attach(_MatmulOperators)
