"""Constant, range, random and placeholder tensors."""

import builtins
import operator
import random as _random

import numpy as np

from ._base import _lib, _clear, _i64s, _builtin_bool, _builtin_int, _builtin_float
from ._dtypes import _dtype, _py_scalar, bool_, int64, float32
from ._tensor import Tensor, tensor, _wrap, _tt, _shape_arg


def scalar(value, dtype=None):
    """A rank-0 tensor (rlx_scalar)."""
    return tensor(value, dtype)


def _const(fn, shape, dtype):
    shp, n = _i64s(shape)
    _clear()
    return _wrap(fn(_dtype(dtype).code, n, shp))


def zeros(*shape, dtype=float32):
    return _const(_lib.rlx_zeros, _shape_arg(shape), dtype)


def ones(*shape, dtype=float32):
    return _const(_lib.rlx_ones, _shape_arg(shape), dtype)


empty = zeros


def full(shape, fill_value, dtype=None):
    """Constant tensor. Without dtype: bool value -> bool, int -> int64,
    float -> float32."""
    if isinstance(shape, (_builtin_int, np.integer)):
        shape = (shape,)
    v = _py_scalar(fill_value)
    if dtype is None:
        dtype = bool_ if isinstance(v, _builtin_bool) else int64 if isinstance(v, _builtin_int) else float32
    shp, n = _i64s(shape)
    _clear()
    return _wrap(_lib.rlx_full(_dtype(dtype).code, n, shp, _builtin_float(v)))


def _like(like_fn, make, x, dtype, *value):
    """x's shape and dtype (like_fn), or x's shape and another dtype (make)."""
    x = _tt(x)
    if dtype is not None and _dtype(dtype) is not x.dtype:
        return make(x.shape, *value, dtype=dtype)
    _clear()
    return _wrap(like_fn(x._h, *value))


def zeros_like(x, dtype=None):
    return _like(_lib.rlx_zeros_like, zeros, x, dtype)


def ones_like(x, dtype=None):
    return _like(_lib.rlx_ones_like, ones, x, dtype)


def full_like(x, fill_value, dtype=None):
    return _like(_lib.rlx_full_like, full, x, dtype, _builtin_float(_py_scalar(fill_value)))


def arange(start, stop=None, step=1, dtype=None):
    """[start, stop) by step (NumPy length). Without dtype: int64 when all
    arguments are ints, else float32."""
    if stop is None:
        start, stop = 0, start
    vals = [_py_scalar(v) for v in (start, stop, step)]
    if dtype is None:
        dtype = int64 if builtins.all(isinstance(v, _builtin_int) for v in vals) else float32
    _clear()
    return _wrap(_lib.rlx_arange(_dtype(dtype).code, *(_builtin_float(v) for v in vals)))


def arange_of(t, axis=0, dtype=int64):
    """0, 1, ..., n-1 with n the size of t's axis (torch.arange(t.size(axis))):
    a plain arange when the axis is static; over a dynamic axis of a compiled
    program's input, made in each run's bound size (rlx_arange_of). t's values
    are not read; no gradient."""
    t = _tt(t)
    _clear()
    return _wrap(_lib.rlx_arange_of(t._h, operator.index(axis), _dtype(dtype).code))


def eye(n, dtype=float32):
    _clear()
    return _wrap(_lib.rlx_eye(_dtype(dtype).code, operator.index(n)))


def _seed(seed):
    return _random.getrandbits(64) if seed is None else operator.index(seed) & (2**64 - 1)


def _random_tensor(fn, fn_seeded, shape, seed, dtype):
    shp, n = _i64s(_shape_arg(shape))
    if isinstance(seed, Tensor):  # read at realization: an rlx.input seed varies per run
        _clear()
        return _wrap(fn_seeded(_dtype(dtype).code, n, shp, seed._h))
    s = _seed(seed)
    _clear()
    return _wrap(fn(_dtype(dtype).code, n, shp, s))


def rand(*shape, seed=None, dtype=float32):
    """U[0, 1) samples; the same (dtype, shape, seed) always gives the same
    values. seed=None draws one from Python's `random`. A Tensor seed (int32
    or int64, shape () or (1,), e.g. an rlx.input of a compiled program) is
    read when the result is realized (rlx_rand_seeded): its value s gives
    exactly rand(..., seed=s)."""
    return _random_tensor(_lib.rlx_rand, _lib.rlx_rand_seeded, shape, seed, dtype)


def randn(*shape, seed=None, dtype=float32):
    """N(0, 1) samples; deterministic per (dtype, shape, seed). seed may be a
    Tensor, as for rand (rlx_randn_seeded)."""
    return _random_tensor(_lib.rlx_randn, _lib.rlx_randn_seeded, shape, seed, dtype)


_SYMBOLS = {}  # symbol name -> its C id (<= -2), shared by every input


def _symbol_id(name):
    sid = _SYMBOLS.get(name)
    if sid is None:
        sid = _SYMBOLS[name] = -2 - len(_SYMBOLS)
    return sid


def symbol_name(sid):
    """The name of the symbol whose C id is sid (None when unnamed)."""
    for k, v in _SYMBOLS.items():
        if v == sid:
            return k
    return None


def input(name, shape, dtype=float32):
    """A named placeholder for rlx.compile. A dim that is None or -1 is
    dynamic (any size at run time); a string names a symbol: every dim of
    every input carrying that name must be bound to one size."""
    if isinstance(shape, (_builtin_int, np.integer, str)) or shape is None:
        shape = (shape,)
    dims = []
    for d in shape:
        if d is None:
            dims.append(-1)
        elif isinstance(d, str):
            if not d:
                raise ValueError("rlx.input: a symbol name must not be empty")
            dims.append(_symbol_id(d))
        else:
            d = operator.index(d)
            if d <= -2:
                raise ValueError("rlx.input: dim %d: use None or -1 for a dynamic dim, a string for a symbol" % d)
            dims.append(d)
    shp, n = _i64s(dims)
    _clear()
    return _wrap(_lib.rlx_input(str(name).encode(), _dtype(dtype).code, n, shp))


placeholder = input
