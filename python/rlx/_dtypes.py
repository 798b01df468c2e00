"""rlx dtypes and the rules mapping Python and NumPy scalars and dtypes onto
them: bool, int32, int64, float32, float64, the narrow ones float16,
bfloat16, int8, uint8, int16, uint32, complex64 and complex128 (rlx.h
states their storage, PyTorch promotion, casts and compute rules; both
complex dtypes are NumPy's layout, so they map both ways zero-copy).

NumPy has every one of them but bfloat16. A bfloat16 DType's ``np`` is
uint16, the NumPy type of its storage (the bit patterns); ``values_np`` is
float32, the NumPy type its values are read out as."""

import numpy as np

from ._base import _lib, _clear, _last_status, _raise, _builtin_bool, _builtin_int, _builtin_float
from . import _ffi


class DType:
    """An rlx dtype. Compares equal to itself, its names ('float32', 'f32'),
    the NumPy dtype and the NumPy scalar type (bfloat16: its names only).

    is_int is true for signed and unsigned integers (is_unsigned tells them
    apart); np is the NumPy dtype of the storage, values_np that of the
    values (they differ for bfloat16 only: uint16 bits, float32 values)."""
    __slots__ = ("name", "code", "short", "np", "values_np", "itemsize", "is_float", "is_int", "is_unsigned",
                 "is_bool", "is_complex")

    def __init__(self, name, code, npdt, kind=None, values=None):
        self.name = name
        self.code = code
        self.short = _lib.rlx_dtype_name(code).decode()
        self.np = np.dtype(npdt)
        self.values_np = np.dtype(values or npdt)
        self.itemsize = self.np.itemsize
        kind = kind or self.np.kind
        self.is_float = kind == "f"
        self.is_int = kind in "iu"
        self.is_unsigned = kind == "u"
        self.is_bool = kind == "b"
        self.is_complex = kind == "c"

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
float16 = DType("float16", _DTYPE_ENUM["RLX_F16"], np.float16)
bfloat16 = DType("bfloat16", _DTYPE_ENUM["RLX_BF16"], np.uint16, kind="f", values=np.float32)
int8 = DType("int8", _DTYPE_ENUM["RLX_I8"], np.int8)
uint8 = DType("uint8", _DTYPE_ENUM["RLX_U8"], np.uint8)
int16 = DType("int16", _DTYPE_ENUM["RLX_I16"], np.int16)
uint32 = DType("uint32", _DTYPE_ENUM["RLX_U32"], np.uint32)
complex64 = DType("complex64", _DTYPE_ENUM["RLX_C64"], np.complex64)
complex128 = DType("complex128", _DTYPE_ENUM["RLX_C128"], np.complex128)
_DTYPES = (bool_, int32, int64, float32, float64, float16, bfloat16, int8, uint8, int16, uint32, complex64,
           complex128)
_SUPPORTED = ", ".join(d.name for d in _DTYPES)
_BY_CODE = {d.code: d for d in _DTYPES}
_BY_NAME = {}
for _d in _DTYPES:
    _BY_NAME[_d.name] = _d
    _BY_NAME[_d.short] = _d
_BY_NAME.update({"bool_": bool_, "half": float16, "short": int16, "cfloat": complex64,
                 "cdouble": complex128})  # NumPy's and PyTorch's aliases
# bfloat16 has no NumPy dtype (its storage, uint16, is not an rlx dtype);
# ml_dtypes' bfloat16, a NumPy extension dtype, is recognized by its name
_BY_NP = {d.np: d for d in _DTYPES if d is not bfloat16}
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
        raise TypeError("rlx: %r is not a dtype (supported: %s)" % (dt, _SUPPORTED))
    if npdt.name == "bfloat16" and npdt.itemsize == 2:
        return bfloat16
    d = _BY_NP.get(npdt.newbyteorder("=")) if npdt.kind in "biufc" else None
    if d is None:
        raise TypeError("rlx: dtype %s is not supported (supported: %s)" % (npdt.name, _SUPPORTED))
    return d


def dtype_name(dt):
    """The C library's short name of a dtype: 'bool', 'i32', 'i64', 'f32',
    'f64', 'f16', 'bf16', 'i8', 'u8', 'i16', 'u32', 'c64', 'c128'."""
    code = _dtype(dt).code if not isinstance(dt, _builtin_int) else dt
    _clear()
    r = _lib.rlx_dtype_name(code)
    if _last_status():
        _raise()
    return r.decode()


def _int_range(d):
    """[lo, hi] of an integer dtype."""
    bits = d.itemsize * 8
    return (0, 2**bits - 1) if d.is_unsigned else (-2**(bits - 1), 2**(bits - 1) - 1)


def _scalar_dtype(s, d):
    """Dtype that a Python scalar takes next to a tensor of dtype d (the
    PyTorch rule: a scalar never widens a tensor of its own kind; a float
    scalar with an integer/bool tensor gives float32, an int scalar with a
    bool tensor int64). An int outside the range of an integer d (300 next
    to uint8, -1 next to uint32) gives int64, so that it is neither wrapped
    nor saturated: x + 300 and x < 300 mean what they say."""
    if isinstance(s, _builtin_bool):
        return d
    if isinstance(s, _builtin_int):
        if d.is_bool:
            return int64
        if d is not int64 and d.is_int:
            lo, hi = _int_range(d)
            if not lo <= s <= hi:
                return int64
        return d
    return d if d.is_float or d.is_complex else float32


def _is_scalar(x):
    return isinstance(x, (_builtin_int, _builtin_float)) or (
        isinstance(x, np.generic) and x.dtype.kind in "biuf")


def _py_scalar(x):
    return x.item() if isinstance(x, np.generic) else x
