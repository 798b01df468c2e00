"""rlx dtypes (bool, int32, int64, float32, float64) and the rules mapping
Python and NumPy scalars and dtypes onto them."""

import numpy as np

from ._base import _lib, _clear, _last_status, _raise, _builtin_bool, _builtin_int, _builtin_float
from . import _ffi


class DType:
    """An rlx dtype. Compares equal to itself, its names ('float32', 'f32'),
    the NumPy dtype and the NumPy scalar type."""
    __slots__ = ("name", "code", "short", "np", "itemsize", "is_float", "is_int", "is_bool")

    def __init__(self, name, code, npdt):
        self.name = name
        self.code = code
        self.short = _lib.rlx_dtype_name(code).decode()
        self.np = np.dtype(npdt)
        self.itemsize = self.np.itemsize
        self.is_float = self.np.kind == "f"
        self.is_int = self.np.kind == "i"
        self.is_bool = self.np.kind == "b"

    def __repr__(self):
        return "rlx." + self.name

    __str__ = lambda self: self.name

    def __eq__(self, other):
        if isinstance(other, DType):
            return other is self
        try:
            return _dtype(other) is self
        except (TypeError, ValueError):
            return False

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):
        return (_dtype, (self.name,))


_DTYPE_ENUM = _ffi.ENUMS["rlx_dtype"]
bool_ = DType("bool", _DTYPE_ENUM["RLX_BOOL"], np.bool_)
int32 = DType("int32", _DTYPE_ENUM["RLX_I32"], np.int32)
int64 = DType("int64", _DTYPE_ENUM["RLX_I64"], np.int64)
float32 = DType("float32", _DTYPE_ENUM["RLX_F32"], np.float32)
float64 = DType("float64", _DTYPE_ENUM["RLX_F64"], np.float64)
_DTYPES = (bool_, int32, int64, float32, float64)
_BY_CODE = {d.code: d for d in _DTYPES}
_BY_NAME = {}
for _d in _DTYPES:
    _BY_NAME[_d.name] = _d
    _BY_NAME[_d.short] = _d
_BY_NAME["bool_"] = bool_
_BY_NP = {d.np: d for d in _DTYPES}
del _d


def _dtype(dt):
    """Map anything dtype-like to a DType; TypeError naming unsupported ones."""
    if isinstance(dt, DType):
        return dt
    if isinstance(dt, str):
        d = _BY_NAME.get(dt)
        if d is not None:
            return d
    elif dt is _builtin_bool:
        return bool_
    elif dt is _builtin_int:
        return int64
    elif dt is _builtin_float:
        return float64  # as NumPy and PyTorch do for an explicit dtype=float
    try:
        npdt = np.dtype(dt)
    except TypeError:
        raise TypeError("rlx: %r is not a dtype (supported: bool, int32, int64, float32, float64)" % (dt,))
    d = _BY_NP.get(npdt.newbyteorder("=")) if npdt.kind in "bif" else None
    if d is None:
        raise TypeError("rlx: dtype %s is not supported (supported: bool, int32, int64, float32, float64)"
                        % npdt.name)
    return d


def dtype_name(dt):
    """The C library's short name of a dtype: 'bool', 'i32', 'i64', 'f32', 'f64'."""
    code = _dtype(dt).code if not isinstance(dt, _builtin_int) else dt
    _clear()
    r = _lib.rlx_dtype_name(code)
    if _last_status():
        _raise()
    return r.decode()


def _scalar_dtype(s, d):
    """Dtype that a Python scalar takes next to a tensor of dtype d (the
    PyTorch rule: a scalar never widens a tensor of its own kind; a float
    scalar with an integer/bool tensor gives float32, an int scalar with a
    bool tensor int64)."""
    if isinstance(s, _builtin_bool):
        return d
    if isinstance(s, _builtin_int):
        if d.is_bool:
            return int64
        if d is int32 and not (-2**31 <= s < 2**31):
            return int64
        return d
    return d if d.is_float else float32


def _is_scalar(x):
    return isinstance(x, (_builtin_int, _builtin_float)) or (
        isinstance(x, np.generic) and x.dtype.kind in "bif")


def _py_scalar(x):
    return x.item() if isinstance(x, np.generic) else x
