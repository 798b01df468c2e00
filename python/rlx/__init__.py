"""rlx — Python binding of librlx, a C11 library of lazy tensors.

    import numpy as np, rlx
    x = rlx.tensor([[1.0, 2.0], [3.0, 4.0]])
    w = rlx.randn(2, 3, seed=0)
    y = (x @ w + 1).relu()            # lazy: builds a graph, runs nothing
    print(y)                          # realizes; NumPy-like text
    a = y.numpy()                     # read-only zero-copy view (copy=True: writable copy)

Semantics worth knowing (NumPy / PyTorch users):
  * Tensors are immutable and lazy; reading values realizes. ``x[...] = v``
    raises TypeError: use rlx.where / masked_fill.
  * dtypes: rlx.bool, int8, uint8, int16, int32, uint32, int64, float16,
    bfloat16, float32, float64 (aliases as in PyTorch: rlx.half, rlx.short,
    rlx.float, rlx.double, rlx.long, rlx.int); anything else is a TypeError
    naming the dtype. Python floats become float32, ints int64 (PyTorch's
    rule); NumPy arrays keep their dtype exactly. Two tensors promote as
    PyTorch does (rlx.h: u8+i8 -> int16, int64+float16 -> float16,
    float16+bfloat16 -> float32), which differs from NumPy for some pairs.
  * A Python scalar takes the tensor's dtype unless it is a float next to an
    integer/bool tensor (then float32), an int next to a bool tensor, or an
    int outside an integer tensor's range (then int64: u8 + 300 is not wrapped).
  * bfloat16 (NumPy has none): t.numpy() gives its values as a float32
    copy; t.bits() the zero-copy uint16 bit patterns. rlx.tensor(x,
    dtype=rlx.bfloat16) and rlx.from_numpy(a, dtype=rlx.bfloat16) round
    float values to nearest even; a uint16 array is taken as bit patterns.
  * complex64 (rlx.complex64, rlx.cfloat) and complex128 (rlx.complex128,
    rlx.cdouble) map to and from NumPy complex64/complex128 zero-copy;
    Python complex data and scalars become complex64 (PyTorch). Promotion
    is PyTorch's: complex64 with float64 gives complex128, complex128 with
    anything complex128. They compute + - * / neg exp abs (-> the part
    dtype) == != where, sum/mean, matmul, movement and indexing,
    rlx.complex(re, im) (complex128 when a part is float64), t.real /
    t.imag (float32/float64 copies), t.conj() and rlx.fft_c; every other op
    raises RlxError (E_DTYPE). rlx.grad flows through them with PyTorch's
    convention (the gradient of a complex z is dL/dRe z + i dL/dIm z; the
    loss must be real); an op without a complex rule raises E_UNSUPPORTED.
    t.astype(float32) keeps the real part (PyTorch); t.item() is a Python
    complex.
  * ``/`` is true division: integer/bool operands are cast to float32 first.
    ``//`` and ``%`` round toward -inf like Python/NumPy. rlx.div / rlx.rem
    (= fmod) keep librlx's C semantics (truncation).
  * Reductions take ``axis=``/``dim=`` and ``keepdims=``/``keepdim=``;
    var/std are population (ddof=0) as NumPy. ``max(axis)`` returns values
    only (NumPy), use argmax for indices.
  * ``transpose(*axes)`` is NumPy's permutation; PyTorch's two-axis swap is
    ``swapaxes``. ``split`` follows PyTorch (sizes, not split points).
  * NumPy interop: np.asarray(t) / t.numpy() are zero-copy read-only views
    (t.numpy(copy=True) for a writable copy); rlx.from_numpy(a) reads a's
    memory in place (writes before realization are visible). NumPy ufuncs
    librlx has (np.exp(t), ndarray + t, ...) stay lazy and return Tensors;
    np.sum(t) etc. call the Tensor methods; other ufunc uses run in NumPy.
  * Errors: every librlx failure raises rlx.RlxError (a ValueError) with
    ``.status`` (an rlx.Status) and the library's message.
  * The library is found via $RLX_LIBRARY, next to this package, the repo's
    build/ tree, or the system path; its header rlx.h supplies every ctypes
    declaration (rlx.lib is the raw ctypes library).
"""

from . import _ffi
from ._ffi import lib, LIBRARY_PATH, HEADER_PATH
from ._core import *  # noqa: F401,F403
from ._core import (  # names that shadow builtins, so kept out of __all__
    abs, all, any, max, min, pow, round, sum, slice, input, compile, complex, bool_, Tensor, RlxError,
    Status, Act, Mask, Minifloat, Padding, DType, Program, END, MAX_RANK, HEADER_VERSION)
from . import _core

bool = bool_
int32 = _core.int32
int64 = _core.int64
float32 = _core.float32
float64 = _core.float64
float16 = _core.float16
bfloat16 = _core.bfloat16
int8 = _core.int8
uint8 = _core.uint8
int16 = _core.int16
uint32 = _core.uint32
complex64 = _core.complex64
cfloat = complex64  # torch.cfloat
complex128 = _core.complex128
cdouble = complex128  # torch.cdouble
half = float16    # torch.half
short = int16     # torch.short
float = float32   # torch.float
double = float64
long = int64
int = int32       # torch.int

# Enum constants under their C names without the RLX_ prefix (rlx.E_SHAPE, ...)
for _e, _prefix in ((Status, ""), (Act, "ACT_"), (Mask, "MASK_"), (Minifloat, ""), (Padding, "PAD_")):
    for _m in _e:
        globals()[_prefix + _m.name] = _m
del _e, _m, _prefix
for _leak in ("builtins", "ctypes", "enum", "operator", "np"):
    globals().pop(_leak, None)
del _leak


class _Linalg:
    """rlx.linalg.solve / inv / norm (NumPy's namespace)."""
    solve = staticmethod(_core.solve)
    inv = staticmethod(_core.inv)
    norm = staticmethod(_core.norm)


linalg = _Linalg()

__version__ = _core.version()

__all__ = [n for n in dir(_core) if not n.startswith("_") and n not in {
    "abs", "all", "any", "max", "min", "pow", "round", "sum", "slice", "input", "compile", "complex",
    "builtins", "ctypes", "enum", "operator", "np"}] + ["lib", "linalg"]
