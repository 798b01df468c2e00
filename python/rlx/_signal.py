"""FFTs in the [..., 2N] layout (N real parts, then N imaginary) and NumPy
helpers converting to and from it."""

import operator

import numpy as np

from ._base import _lib, _clear, _axis_arg, _builtin_bool
from ._tensor import _wrap, _tt


def _transform(last_axis_fn, x, axis, dim, inverse):
    x = _tt(x)
    ax = operator.index(_axis_arg(axis, dim, -1))
    _clear()
    if ax == -1:
        return _wrap(last_axis_fn(x._h))
    return _wrap(_lib.rlx_fft_axis(x._h, ax, inverse))


def fft(x, axis=-1, *, dim=None):
    """Unnormalized FFT in the [..., 2N] layout (N real parts then N imaginary)."""
    return _transform(_lib.rlx_fft, x, axis, dim, False)


def ifft(x, axis=-1, *, dim=None):
    """Unnormalized inverse FFT (ifft(fft(x)) = N x), [..., 2N] layout."""
    return _transform(_lib.rlx_ifft, x, axis, dim, True)


def fft_axis(x, axis, inverse=False):
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_fft_axis(x._h, operator.index(axis), _builtin_bool(inverse)))


def fft_c(x, axis=-1, inverse=False):
    """Unnormalized FFT of a complex tensor along axis (rlx_fft_c): real
    input converts to complex64 (float64 to complex128), the result is
    complex of x's shape, complex128 computed in double (like
    numpy.fft.fft without its normalization choices: inverse=True is N times
    numpy.fft.ifft)."""
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_fft_c(x._h, operator.index(axis), _builtin_bool(inverse)))


def to_complex_layout(a, axis=-1):
    """NumPy helper: a complex (or real) array -> float array in the [..., 2N] layout."""
    a = np.asarray(a)
    return np.concatenate([a.real, a.imag if np.iscomplexobj(a) else np.zeros_like(a)], axis=axis)


def from_complex_layout(a, axis=-1):
    """NumPy helper: the [..., 2N] layout -> a complex NumPy array."""
    a = np.asarray(a)
    re, im = np.split(a, 2, axis=axis)
    return re + 1j * im
