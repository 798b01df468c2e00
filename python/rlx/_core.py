"""The Tensor class and every librlx operation, NumPy/PyTorch style.

Conventions (see the package docstring for the full list):
  * every call clears the thread's librlx error first; a NULL handle or a
    non-OK status raises RlxError carrying rlx_last_error();
  * a Tensor owns exactly one librlx reference, released in __del__;
  * axis arguments accept ``axis=`` (NumPy) or ``dim=`` (PyTorch), and
    ``keepdims=`` or ``keepdim=``.
"""

import builtins
import ctypes
import enum
import operator
import random as _random

import numpy as np

from . import _ffi

_lib = _ffi.lib
_c = ctypes
_c_void_p = ctypes.c_void_p
_c_int64 = ctypes.c_int64
_c_int = ctypes.c_int
_object_new = object.__new__
_builtin_bool = builtins.bool
_builtin_int = builtins.int
_builtin_float = builtins.float
_builtin_abs = builtins.abs
_builtin_min = builtins.min
_builtin_max = builtins.max
_builtin_round = builtins.round
_builtin_pow = builtins.pow

# Frequently called library functions, looked up once.
_clear = _lib.rlx_clear_error
_last_status = _lib.rlx_last_status
_last_error = _lib.rlx_last_error
_release = _lib.rlx_release

END = _ffi.DEFINES.get("RLX_END", 2**63 - 1)
MAX_RANK = _ffi.DEFINES.get("RLX_MAX_RANK", 8)
HEADER_VERSION = _ffi.DEFINES.get("RLX_VERSION_STRING")


def _enum(cname, pyname, prefix):
    members = {k[len(prefix):]: v for k, v in _ffi.ENUMS[cname].items()}
    return enum.IntEnum(pyname, members, module=__name__.rsplit(".", 1)[0])


Status = _enum("rlx_status", "Status", "RLX_")
Act = _enum("rlx_act", "Act", "RLX_ACT_")
Mask = _enum("rlx_mask", "Mask", "RLX_MASK_")
Minifloat = _enum("rlx_minifloat", "Minifloat", "RLX_")


# ------------------------------------------------------------------ errors

class RlxError(ValueError):
    """A librlx call failed. ``status`` is the rlx.Status, ``message`` the
    text of rlx_last_error() (it names the C function and the values)."""

    def __init__(self, status, message):
        try:
            status = Status(status)
        except ValueError:
            pass
        super().__init__("%s [%s]" % (message, getattr(status, "name", status)))
        self.status = status
        self.message = message


def _raise(what=None):
    st = _last_status()
    msg = (_last_error() or b"").decode("utf-8", "replace")
    if st == 0:
        st = Status.E_INTERNAL
        msg = msg or "%s failed without recording an error (a librlx bug)" % (what or "librlx call")
    raise RlxError(st, msg)


def _check(st):
    if st != 0:
        _raise()


def last_status():
    """Status of the last recorded librlx error on this thread."""
    return Status(_last_status())


def last_error():
    """Message of the last recorded librlx error on this thread ('' if none)."""
    return (_last_error() or b"").decode("utf-8", "replace")


def clear_error():
    _lib.rlx_clear_error()


# ------------------------------------------------------------------ dtypes

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


# -------------------------------------------------------------- arguments

def _i64s(seq):
    seq = [operator.index(s) for s in seq]
    return (_c_int64 * _builtin_max(len(seq), 1))(*seq), len(seq)


def _shape_arg(args):
    """zeros(2, 3), zeros((2, 3)), zeros([2, 3]) and zeros(()) all work."""
    if len(args) == 1 and not isinstance(args[0], (_builtin_int, np.integer)):
        args = args[0]
        if isinstance(args, Tensor):
            args = args.tolist()
    return tuple(operator.index(a) for a in args)


def _axis_arg(axis, dim, default=None):
    if dim is not None:
        if axis is not None and axis != default and axis != dim:
            raise TypeError("rlx: give axis= or dim=, not both")
        return dim
    return default if axis is None else axis


def _keep_arg(keepdims, keepdim):
    return _builtin_bool(keepdim if keepdim is not None else keepdims)


def _no_out(out):
    if out is not None:
        raise TypeError("rlx tensors are immutable: out= is not supported")


def _pair(v, name):
    if v is None:
        return None
    if isinstance(v, (_builtin_int, np.integer)):
        return (_c_int * 2)(_builtin_int(v), _builtin_int(v))
    v = tuple(v)
    if len(v) != 2:
        raise ValueError("rlx: %s must be an int or a pair, got %r" % (name, v))
    return (_c_int * 2)(*(operator.index(a) for a in v))


# ------------------------------------------------------------ numpy views

class _ArrayView:
    """Holds a Tensor and exposes its realized payload to NumPy; the array
    created from it keeps this object (and so the Tensor) alive."""
    __slots__ = ("__array_interface__", "_owner")

    def __init__(self, owner, ptr, shape, typestr, readonly):
        self._owner = owner
        self.__array_interface__ = {"shape": shape, "typestr": typestr,
                                    "data": (ptr, readonly), "version": 3}


# The deleter given to rlx_from_blob: ctx is the address of a Python object
# (the NumPy array) whose reference count from_numpy raised; the deleter
# lowers it again. A ctypes callback takes the GIL itself, so it may run on
# any thread. It captures what it needs as defaults so that it still works
# while the interpreter is shutting down, and it is referenced from the
# Tensor class (and Program), so it lives as long as anything that can
# release a tensor.
_py_incref = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_IncRef", ctypes.pythonapi))
_py_decref = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(("Py_DecRef", ctypes.pythonapi))


def _blob_deleter(ctx, _decref=_py_decref):
    if ctx:
        _decref(ctx)


_BLOB_DELETER = _ffi.Deleter(_blob_deleter)


# ------------------------------------------------------------------ Tensor

def _wrap(h):
    if not h:
        _raise()
    t = _object_new(Tensor)
    t._h = h
    t._shape = None
    return t


def _tt(x, dtype=None):
    """x as a Tensor (Tensors pass through; others are converted)."""
    if isinstance(x, Tensor):
        return x if dtype is None or x.dtype is _dtype(dtype) else x.astype(dtype)
    return tensor(x, dtype=dtype)


def _opt(x):
    return None if x is None else _tt(x)._h


class Tensor:
    """An immutable, lazily evaluated librlx tensor (one owned reference).

    Build with rlx.tensor / rlx.from_numpy / rlx.zeros / ...; ``Tensor(data,
    dtype=None)`` is rlx.tensor(data, dtype). Operations build a graph;
    reading values (numpy(), item(), tolist(), repr, np.asarray) realizes.
    """
    __slots__ = ("_h", "_shape", "__weakref__")
    __array_priority__ = 1000
    _deleter = _BLOB_DELETER     # keeps the from_blob callback alive as long as any Tensor

    def __new__(cls, data=None, dtype=None):
        if data is None:
            raise TypeError("rlx.Tensor(data, dtype=None): data is required")
        return tensor(data, dtype)

    def __del__(self, _release=_release):
        h = getattr(self, "_h", None)
        if h:
            self._h = None
            try:
                _release(h)
            except Exception:  # interpreter shutting down
                pass

    # ------------------------------------------------------- introspection
    @property
    def handle(self):
        """The borrowed rlx_tensor* as an int (valid while this Tensor lives)."""
        return self._h

    @property
    def shape(self):
        s = self._shape
        if s is None:
            buf = (_c_int64 * MAX_RANK)()
            _clear()
            r = _lib.rlx_shape(self._h, buf, MAX_RANK)
            if r < 0:
                _raise()
            s = self._shape = tuple(buf[:r])
        return s

    @property
    def dtype(self):
        _clear()
        code = _lib.rlx_dtype_of(self._h)
        d = _BY_CODE.get(code)
        if d is None:
            _raise("rlx_dtype_of")
        return d

    @property
    def ndim(self):
        s = self._shape
        if s is not None:
            return len(s)
        _clear()
        r = _lib.rlx_rank(self._h)
        if r < 0:
            _raise()
        return r

    def dim(self, axis=None):
        """dim() is the rank (PyTorch); dim(axis) the size of one axis (rlx_dim)."""
        if axis is None:
            return self.ndim
        _clear()
        r = _lib.rlx_dim(self._h, operator.index(axis))
        if _last_status():
            _raise()
        return r

    def numel(self):
        _clear()
        n = _lib.rlx_numel(self._h)
        if _last_status():
            _raise()
        return n

    @property
    def size(self):
        """Number of elements (NumPy's ndarray.size)."""
        return self.numel()

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.numel() * self.dtype.itemsize

    @property
    def is_realized(self):
        _clear()
        r = _lib.rlx_is_realized(self._h)
        if _last_status():
            _raise()
        return r

    def storage_bytes(self):
        """Payload bytes physically held by the buffers this tensor reads."""
        _clear()
        r = _lib.rlx_storage_bytes(self._h)
        if _last_status():
            _raise()
        return r

    def shares_storage(self, other):
        return shares_storage(self, other)

    def data_ptr(self):
        """Realizes; the address of the contiguous payload (rlx_data)."""
        _clear()
        p = _lib.rlx_data(self._h)
        if not p and _last_status():
            _raise()
        return p or 0

    def __len__(self):
        s = self.shape
        if not s:
            raise TypeError("len() of a 0-d tensor")
        return s[0]

    def __iter__(self):
        s = self.shape
        if not s:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(s[0]):
            yield self.select(0, i)

    # -------------------------------------------------------- realization
    def realize(self):
        """Computes the value now; returns self."""
        _clear()
        _check(_lib.rlx_realize(self._h))
        return self

    def numpy(self, copy=False):
        """The values as a NumPy array. Without copy it is a read-only view of
        the realized payload (zero-copy; it keeps this Tensor alive); with
        copy=True a writable copy made by rlx_read."""
        if copy:
            return self.read()
        shape = self.shape
        d = self.dtype
        _clear()
        p = _lib.rlx_data(self._h)
        if not p:
            if _last_status():
                _raise()
            return np.zeros(shape, d.np)  # empty payload
        view = _ArrayView(self, p, shape, d.np.str, True)
        return np.asarray(view)

    def read(self, dtype=None):
        """A new writable NumPy copy (rlx_read; rlx_read_f32 / rlx_read_f64
        convert to float32 / float64 in the library)."""
        shape = self.shape
        n = 1
        for s in shape:
            n *= s
        d = self.dtype if dtype is None else _dtype(dtype)
        if dtype is not None and d is float32:
            out = np.empty(shape, np.float32)
            _clear()
            _check(_lib.rlx_read_f32(self._h, out.ctypes.data_as(_c.POINTER(_c.c_float)), n))
            return out
        if dtype is not None and d is float64:
            out = np.empty(shape, np.float64)
            _clear()
            _check(_lib.rlx_read_f64(self._h, out.ctypes.data_as(_c.POINTER(_c.c_double)), n))
            return out
        out = np.empty(shape, self.dtype.np)
        _clear()
        _check(_lib.rlx_read(self._h, out.ctypes.data, out.nbytes))
        return out if d is self.dtype else out.astype(d.np)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy ufuncs on Tensors: the elementwise ones librlx has stay lazy
        and give Tensors (np.exp(t), ndarray + t); anything else (reductions
        such as np.add.reduce, out=, where=, ...) runs in NumPy on the values."""
        if method == "__call__" and not kwargs:
            fn = _UFUNCS.get(ufunc)
            if fn is not None:
                return fn(*inputs)
        if builtins.any(isinstance(o, Tensor) for o in kwargs.get("out", ())):
            raise TypeError("rlx tensors are immutable: they cannot be a ufunc's out=")
        args = [i.numpy() if isinstance(i, Tensor) else i for i in inputs]
        return getattr(ufunc, method)(*args, **kwargs)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        if copy:
            return a.copy()
        return a

    def item(self):
        """The value of a one-element tensor as a Python bool / int / float."""
        d = self.dtype
        out = _c.c_double()
        _clear()
        _check(_lib.rlx_item(self._h, _c.byref(out)))
        if d.is_float:
            return out.value
        return self.numpy().reshape(-1)[0].item()  # exact for large int64

    def tolist(self):
        return self.numpy().tolist()

    def __bool__(self):
        if self.numel() != 1:
            raise ValueError("The truth value of a tensor with more than one element is ambiguous. "
                             "Use a.any() or a.all()")
        return _builtin_bool(self.item())

    def __float__(self):
        return _builtin_float(self.item())

    def __int__(self):
        return _builtin_int(self.item())

    def __index__(self):
        if not (self.dtype.is_int or self.dtype.is_bool) or self.ndim != 0:
            raise TypeError("only 0-d integer tensors can be used as an index")
        return _builtin_int(self.item())

    def __complex__(self):
        return complex(self.item())

    def to_string(self):
        """rlx_to_string: NumPy-like text with shape and dtype (realizes)."""
        _clear()
        p = _lib.rlx_to_string(self._h)
        if not p:
            _raise()
        try:
            return _c.string_at(p).decode("utf-8", "replace")
        finally:
            _ffi.free(p)

    def __repr__(self):
        try:
            return self.to_string()
        except RlxError as e:
            try:
                head = "shape=%s, dtype=%s" % (list(self.shape), self.dtype.short)
            except RlxError:
                head = "invalid"
            return "<rlx.Tensor %s: cannot realize: %s>" % (head, e.message)

    __str__ = __repr__

    def __format__(self, spec):
        if spec and self.numel() == 1:
            return format(self.item(), spec)
        return format(repr(self), spec)

    def __copy__(self):
        _clear()
        return _wrap(_lib.rlx_retain(self._h))

    def __deepcopy__(self, memo):
        return self  # immutable

    def __reduce__(self):
        return (tensor, (self.numpy().copy(), self.dtype.name))

    def __setitem__(self, key, value):
        raise TypeError("rlx tensors are immutable; build a new one, e.g. with rlx.where(mask, value, x) "
                        "or x.masked_fill(mask, value)")

    __hash__ = object.__hash__

    # ------------------------------------------------------------ casting
    def astype(self, dtype):
        d = _dtype(dtype)
        if d is self.dtype:
            return self
        return cast(self, d)

    def to(self, dtype):
        return self.astype(dtype)

    def float(self):
        return self.astype(float32)

    def double(self):
        return self.astype(float64)

    def int(self):
        return self.astype(int32)

    def long(self):
        return self.astype(int64)

    def bool(self):
        return self.astype(bool_)

    # ---------------------------------------------------------- operators
    def __add__(self, o): return _arith("add", self, o)
    def __radd__(self, o): return _arith("add", self, o, reflected=True)
    def __sub__(self, o): return _arith("sub", self, o)
    def __rsub__(self, o): return _arith("sub", self, o, reflected=True)
    def __mul__(self, o): return _arith("mul", self, o)
    def __rmul__(self, o): return _arith("mul", self, o, reflected=True)
    def __truediv__(self, o): return _truediv(self, o)
    def __rtruediv__(self, o): return _truediv(self, o, reflected=True)
    def __floordiv__(self, o): return _floordiv(self, o)
    def __rfloordiv__(self, o): return _floordiv(self, o, reflected=True)
    def __mod__(self, o): return _mod(self, o)
    def __rmod__(self, o): return _mod(self, o, reflected=True)
    def __pow__(self, o, mod=None):
        if mod is not None:
            return NotImplemented
        return _arith("pow", self, o)
    def __rpow__(self, o): return _arith("pow", self, o, reflected=True)
    def __matmul__(self, o):
        o = _operand(o)
        return NotImplemented if o is NotImplemented else matmul(self, o)
    def __rmatmul__(self, o):
        o = _operand(o)
        return NotImplemented if o is NotImplemented else matmul(o, self)
    def __lt__(self, o): return _compare("lt", self, o)
    def __le__(self, o): return _compare("le", self, o)
    def __gt__(self, o): return _compare("gt", self, o)
    def __ge__(self, o): return _compare("ge", self, o)
    def __eq__(self, o): return _compare("eq", self, o)
    def __ne__(self, o): return _compare("ne", self, o)
    def __neg__(self): return neg(self)
    def __pos__(self): return self
    def __abs__(self): return abs(self)
    def __invert__(self):
        if not self.dtype.is_bool:
            raise TypeError("~ is logical not and needs a bool tensor; got %s" % self.dtype.name)
        return logical_not(self)
    def __and__(self, o): return _logical("logical_and", self, o)
    __rand__ = __and__
    def __or__(self, o): return _logical("logical_or", self, o)
    __ror__ = __or__
    def __xor__(self, o): return _logical("ne", self, o)
    __rxor__ = __xor__

    # ----------------------------------------------------------- indexing
    def __getitem__(self, key):
        return _getitem(self, key)

    @property
    def T(self):
        """All axes reversed (NumPy)."""
        return transpose(self)

    @property
    def mT(self):
        """The last two axes swapped (rlx_t)."""
        return t(self)


# ---------------------------------------------------------- constructors

def _new_from_data(d, shape, arr):
    shp, n = _i64s(shape)
    _clear()
    return _wrap(_lib.rlx_from_data(d.code, n, shp, arr.ctypes.data if arr.size else None))


def tensor(data, dtype=None):
    """A tensor holding a copy of data (a list, tuple, NumPy array, Python or
    NumPy scalar, or Tensor). Without dtype: NumPy arrays keep their dtype
    (only bool, int32, int64, float32, float64 are accepted); Python floats
    give float32, ints int64, bools bool (PyTorch's rule)."""
    if isinstance(data, Tensor):
        return data if dtype is None else data.astype(dtype)
    d = None if dtype is None else _dtype(dtype)
    if isinstance(data, (_builtin_bool, _builtin_int, _builtin_float, np.generic)) and not (
            isinstance(data, np.generic) and data.dtype.kind not in "bif"):
        v = _py_scalar(data)
        if d is None:
            d = data.dtype if isinstance(data, np.generic) else (
                bool_ if isinstance(v, _builtin_bool) else int64 if isinstance(v, _builtin_int) else float32)
            d = _dtype(d)
        if isinstance(v, _builtin_int) and not isinstance(v, _builtin_bool) and d.is_int \
                and _builtin_abs(v) > 2**53:
            return _new_from_data(d, (), np.array(v, d.np))
        _clear()
        return _wrap(_lib.rlx_scalar(d.code, _builtin_float(v)))
    if isinstance(data, np.ndarray):
        if d is None:
            d = _dtype(data.dtype)
        arr = np.ascontiguousarray(data, dtype=d.np)
    else:
        if isinstance(data, (list, tuple)) and _has_tensor(data):
            return stack([_tt(x, dtype) for x in data]) if data else tensor(np.asarray(data), dtype)
        arr = np.asarray(data)
        if arr.dtype == object or arr.dtype.kind not in "bifu":
            raise TypeError("rlx.tensor: cannot make a tensor of %r (NumPy infers %s)" % (type(data).__name__,
                                                                                        arr.dtype))
        if d is None:
            k = arr.dtype.kind
            d = float32 if k == "f" else int64 if k in "iu" else bool_ if k == "b" else _dtype(arr.dtype)
        arr = np.ascontiguousarray(arr, dtype=d.np)
    return _new_from_data(d, arr.shape, arr)


def _has_tensor(seq):
    for x in seq:
        if isinstance(x, Tensor):
            return True
        if isinstance(x, (list, tuple)) and _has_tensor(x):
            return True
    return False


asarray = tensor


def from_numpy(a):
    """A tensor reading the NumPy array's memory in place (rlx_from_blob; no
    copy). The array stays alive while any tensor reads it; writing to the
    array before the tensor (or an expression over it) is realized is
    visible in the results. Non-contiguous or byte-swapped arrays are copied
    first. Dtypes map exactly; others raise TypeError."""
    if not isinstance(a, np.ndarray):
        raise TypeError("rlx.from_numpy expects a numpy.ndarray, got %s" % type(a).__name__)
    d = _dtype(a.dtype)
    if not a.flags.c_contiguous or a.dtype != d.np:
        a = np.ascontiguousarray(a, dtype=d.np)
    shp, n = _i64s(a.shape)
    obj = ctypes.py_object(a)
    _py_incref(obj)
    ctx = id(a)
    _clear()
    h = _lib.rlx_from_blob(d.code, n, shp, a.ctypes.data, _BLOB_DELETER, ctx)
    if not h:
        _py_decref(ctx)  # on failure the deleter does not run: undo the reference
        _raise()
    return _wrap(h)


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


def zeros_like(x, dtype=None):
    x = _tt(x)
    if dtype is not None and _dtype(dtype) is not x.dtype:
        return zeros(x.shape, dtype=dtype)
    _clear()
    return _wrap(_lib.rlx_zeros_like(x._h))


def ones_like(x, dtype=None):
    x = _tt(x)
    if dtype is not None and _dtype(dtype) is not x.dtype:
        return ones(x.shape, dtype=dtype)
    _clear()
    return _wrap(_lib.rlx_ones_like(x._h))


def full_like(x, fill_value, dtype=None):
    x = _tt(x)
    if dtype is not None and _dtype(dtype) is not x.dtype:
        return full(x.shape, fill_value, dtype=dtype)
    _clear()
    return _wrap(_lib.rlx_full_like(x._h, _builtin_float(_py_scalar(fill_value))))


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


def eye(n, dtype=float32):
    _clear()
    return _wrap(_lib.rlx_eye(_dtype(dtype).code, operator.index(n)))


def _seed(seed):
    return _random.getrandbits(64) if seed is None else operator.index(seed) & (2**64 - 1)


def rand(*shape, seed=None, dtype=float32):
    """U[0, 1) samples; the same (dtype, shape, seed) always gives the same
    values. seed=None draws one from Python's `random`."""
    shp, n = _i64s(_shape_arg(shape))
    _clear()
    return _wrap(_lib.rlx_rand(_dtype(dtype).code, n, shp, _seed(seed)))


def randn(*shape, seed=None, dtype=float32):
    """N(0, 1) samples; deterministic per (dtype, shape, seed)."""
    shp, n = _i64s(_shape_arg(shape))
    _clear()
    return _wrap(_lib.rlx_randn(_dtype(dtype).code, n, shp, _seed(seed)))


def input(name, shape, dtype=float32):
    """A named placeholder for rlx.compile; -1 marks a dynamic dim."""
    if isinstance(shape, (_builtin_int, np.integer)):
        shape = (shape,)
    shp, n = _i64s(shape)
    _clear()
    return _wrap(_lib.rlx_input(str(name).encode(), _dtype(dtype).code, n, shp))


placeholder = input


# ------------------------------------------------------------------ unary

def _unary(cname):
    fn = getattr(_lib, "rlx_" + cname)

    def op(x):
        x = _tt(x)
        _clear()
        return _wrap(fn(x._h))
    op.__name__ = op.__qualname__ = cname
    op.__doc__ = "Elementwise rlx_%s (lazy)." % cname
    return op


_UNARY = ("neg relu gelu_tanh silu tanh exp log sqrt rsqrt sigmoid abs sin cos tan atan round "
          "recip floor ceil sign softplus elu erf hard_swish hard_sigmoid mish softsign log_sigmoid "
          "logical_not").split()
neg = _unary("neg")
relu = _unary("relu")
gelu_tanh = _unary("gelu_tanh")
silu = _unary("silu")
tanh = _unary("tanh")
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sigmoid = _unary("sigmoid")
abs = _unary("abs")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
atan = _unary("atan")
_round0 = _unary("round")


def round(x, decimals=0, out=None):
    """Round half to even (rlx_round); decimals != 0 scales by 10**decimals."""
    _no_out(out)
    if decimals == 0:
        return _round0(x)
    x = _tt(x)
    f = 10.0 ** decimals
    return _round0(x * f) / f if x.dtype.is_float else x
recip = _unary("recip")
floor = _unary("floor")
ceil = _unary("ceil")
sign = _unary("sign")
softplus = _unary("softplus")
elu = _unary("elu")
erf = _unary("erf")
hard_swish = _unary("hard_swish")
hard_sigmoid = _unary("hard_sigmoid")
mish = _unary("mish")
softsign = _unary("softsign")
log_sigmoid = _unary("log_sigmoid")
logical_not = _unary("logical_not")
_gelu_exact = _unary("gelu")


def gelu(x, approximate="none"):
    """GELU; approximate='tanh' (PyTorch's spelling) uses rlx_gelu_tanh."""
    if approximate in ("tanh", True):
        return gelu_tanh(x)
    if approximate not in ("none", None, False):
        raise ValueError("gelu: approximate must be 'none' or 'tanh', got %r" % (approximate,))
    return _gelu_exact(x)


negative = neg
absolute = abs
arctan = atan
reciprocal = recip
hardswish = hard_swish
hardsigmoid = hard_sigmoid
logsigmoid = log_sigmoid


# ----------------------------------------------------------------- binary

_BIN = {n: (getattr(_lib, "rlx_" + n), getattr(_lib, "rlx_%s_s" % n, None))
        for n in "add sub mul div pow maximum minimum atan2 rem eq ne lt le gt ge logical_and logical_or".split()}
_SWAP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _operand(o):
    if isinstance(o, Tensor):
        return o
    if _is_scalar(o):
        return _py_scalar(o)
    if isinstance(o, (np.ndarray, list, tuple)):
        return tensor(o)
    return NotImplemented


def _scalar_tensor(s, d):
    return tensor(s, d)


def _binary_tt(name, a, b):
    _clear()
    return _wrap(_BIN[name][0](a._h, b._h))


def _binary_ts(name, x, s, reflected=False, compare=False):
    """x <op> s (or s <op> x when reflected) for a Python scalar s."""
    d = x.dtype
    sd = _scalar_dtype(s, d)
    if compare and not d.is_float and isinstance(s, _builtin_float):
        sd = float64  # compare exactly, whatever the integer
    if sd is not d:
        x = cast(x, sd)
    fn, fn_s = _BIN[name]
    if isinstance(s, _builtin_bool) and not sd.is_bool:
        s = _builtin_int(s)
    exact = fn_s is not None and not (isinstance(s, _builtin_int) and _builtin_abs(s) > 2**53)
    if not reflected and exact:
        _clear()
        return _wrap(fn_s(x._h, _builtin_float(s)))
    if reflected and exact and name in ("add", "mul", "maximum", "minimum", "eq", "ne"):
        _clear()
        return _wrap(fn_s(x._h, _builtin_float(s)))
    if reflected and exact and name == "sub":
        _clear()
        return _wrap(_lib.rlx_rsub_s(x._h, _builtin_float(s)))
    if reflected and exact and name == "div":
        _clear()
        return _wrap(_lib.rlx_rdiv_s(x._h, _builtin_float(s)))
    st = _scalar_tensor(s, sd)
    return _binary_tt(name, st, x) if reflected else _binary_tt(name, x, st)


def _arith(name, a, b, reflected=False):
    b = _operand(b)
    if b is NotImplemented:
        return NotImplemented
    if isinstance(b, Tensor):
        return _binary_tt(name, b, a) if reflected else _binary_tt(name, a, b)
    return _binary_ts(name, a, b, reflected)


def _compare(name, a, b):
    b = _operand(b)
    if b is NotImplemented:
        return NotImplemented
    if isinstance(b, Tensor):
        return _binary_tt(name, a, b)
    return _binary_ts(name, a, b, compare=True)


def _logical(name, a, b):
    b = _operand(b)
    if b is NotImplemented:
        return NotImplemented
    if not isinstance(b, Tensor):
        b = _scalar_tensor(_builtin_bool(b), bool_)
    if not (a.dtype.is_bool and b.dtype.is_bool):
        raise TypeError("&, | and ^ are logical and need bool tensors; got %s and %s"
                        % (a.dtype.name, b.dtype.name))
    return _binary_tt(name, a, b)


def _binary_fn(name, doc):
    def op(a, b):
        if isinstance(a, Tensor):
            return _check_ni(_arith(name, a, b), a, b)
        if isinstance(b, Tensor):
            return _check_ni(_arith(name, b, a, reflected=True), a, b)
        return _arith(name, tensor(a), b)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


def _check_ni(r, a, b):
    if r is NotImplemented:
        raise TypeError("rlx: unsupported operand types %s and %s" % (type(a).__name__, type(b).__name__))
    return r


add = _binary_fn("add", "a + b with broadcasting and NumPy promotion.")
sub = _binary_fn("sub", "a - b.")
mul = _binary_fn("mul", "a * b.")
div = _binary_fn("div", "rlx_div: C semantics, integer division truncates toward zero "
                        "(Python's / is rlx.true_divide, // is rlx.floor_divide).")
pow = _binary_fn("pow", "a ** b.")
maximum = _binary_fn("maximum", "Elementwise maximum (NaN propagates).")
minimum = _binary_fn("minimum", "Elementwise minimum (NaN propagates).")
atan2 = _binary_fn("atan2", "atan2(a, b).")
rem = _binary_fn("rem", "rlx_rem: C fmod semantics, the sign of a (Python's % is rlx.remainder).")
subtract, multiply, power, arctan2, fmod = sub, mul, pow, atan2, rem


def _cmp_fn(name):
    def op(a, b):
        if isinstance(a, Tensor):
            return _check_ni(_compare(name, a, b), a, b)
        if isinstance(b, Tensor):
            return _check_ni(_compare(_SWAP[name], b, a), a, b)
        return _compare(name, tensor(a), b)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = "Elementwise comparison, a bool tensor."
    return op


eq, ne, lt, le, gt, ge = (_cmp_fn(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))
equal, not_equal, less, less_equal, greater, greater_equal = eq, ne, lt, le, gt, ge


def logical_and(a, b):
    a, b = _tt(a), _tt(b)
    return _binary_tt("logical_and", a, b)


def logical_or(a, b):
    a, b = _tt(a), _tt(b)
    return _binary_tt("logical_or", a, b)


def logical_xor(a, b):
    return ne(cast(_tt(a), bool_), cast(_tt(b), bool_))


def rsub(x, s):
    """s - x (rlx_rsub_s)."""
    return _arith("sub", _tt(x), s, reflected=True)


def rdiv(x, s):
    """s / x with rlx_div semantics (rlx_rdiv_s)."""
    return _arith("div", _tt(x), s, reflected=True)


def _float_pair(a, b):
    """Python true division: integer/bool operands are cast to float32 first."""
    if not a.dtype.is_float and not (isinstance(b, Tensor) and b.dtype.is_float) \
            and not isinstance(b, _builtin_float):
        a = cast(a, float32)
    return a


def _truediv(a, b, reflected=False):
    b = _operand(b)
    if b is NotImplemented:
        return NotImplemented
    a = _float_pair(a, b)
    if isinstance(b, Tensor):
        return _binary_tt("div", b, a) if reflected else _binary_tt("div", a, b)
    return _binary_ts("div", a, b, reflected)


def true_divide(a, b):
    """a / b like Python and NumPy: integer and bool inputs give float32."""
    if isinstance(a, Tensor):
        return _check_ni(_truediv(a, b), a, b)
    if isinstance(b, Tensor):
        return _check_ni(_truediv(b, a, reflected=True), a, b)
    return _truediv(tensor(a), b)


divide = true_divide


def _pair_tensors(a, b, reflected):
    """Both operands as tensors of a common dtype, in operation order."""
    if not isinstance(b, Tensor):
        b = _scalar_tensor(b, _scalar_dtype(b, a.dtype))
    return (b, a) if reflected else (a, b)


def _floor_parts(a, b):
    """Python's (a // b, a % b) built from C truncating div/rem (NumPy's
    algorithm for floats)."""
    if a.dtype.is_bool and b.dtype.is_bool:
        a = cast(a, int64)
    md = rem(a, b)
    rdt = md.dtype
    zero = md == 0
    adjust = logical_and(logical_not(zero), ne(lt(md, 0), lt(b, 0)))
    if not rdt.is_float:
        q = div(a, b)
        q = q - cast(adjust, rdt)
        m = where(adjust, md + b, md)
        return q, m
    dv = div(a - md, b)
    dv = dv - cast(adjust, rdt)
    fl = floor(dv)
    fl = fl + cast(gt(dv - fl, 0.5), rdt)
    q = where(eq(b, 0), div(a, b), fl)
    m = where(adjust, md + b, md)
    return q, m


def _floordiv(a, b, reflected=False):
    b = _operand(b)
    if b is NotImplemented:
        return NotImplemented
    x, y = _pair_tensors(a, b, reflected)
    return _floor_parts(x, y)[0]


def _mod(a, b, reflected=False):
    b = _operand(b)
    if b is NotImplemented:
        return NotImplemented
    x, y = _pair_tensors(a, b, reflected)
    return _floor_parts(x, y)[1]


def floor_divide(a, b):
    """a // b like Python and NumPy (rounds toward -inf; integer division by
    zero gives 0)."""
    if isinstance(a, Tensor):
        return _check_ni(_floordiv(a, b), a, b)
    if isinstance(b, Tensor):
        return _check_ni(_floordiv(b, a, reflected=True), a, b)
    return _floordiv(tensor(a), b)


def remainder(a, b):
    """a % b like Python and NumPy (the sign of b); rlx.rem / rlx.fmod is C's."""
    if isinstance(a, Tensor):
        return _check_ni(_mod(a, b), a, b)
    if isinstance(b, Tensor):
        return _check_ni(_mod(b, a, reflected=True), a, b)
    return _mod(tensor(a), b)


mod = remainder


# -------------------------------------------------------------- selection

def where(cond, a, b):
    """cond ? a : b with broadcasting; a or b may be Python scalars."""
    cond = _tt(cond)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a, b = tensor(a), tensor(b)
    elif not isinstance(a, Tensor):
        a = _scalar_tensor(_py_scalar(a), _scalar_dtype(_py_scalar(a), b.dtype)) if _is_scalar(a) else _tt(a)
    elif not isinstance(b, Tensor):
        b = _scalar_tensor(_py_scalar(b), _scalar_dtype(_py_scalar(b), a.dtype)) if _is_scalar(b) else _tt(b)
    _clear()
    return _wrap(_lib.rlx_where(cond._h, a._h, b._h))


def masked_fill(x, mask, value):
    """where(mask, value, x) keeping x's shape and dtype."""
    x, mask = _tt(x), _tt(mask)
    _clear()
    return _wrap(_lib.rlx_masked_fill(x._h, mask._h, _builtin_float(_py_scalar(value))))


def clamp(x, min=None, max=None, out=None):
    """min(max(x, min), max); either bound may be None (values converted to x's dtype)."""
    _no_out(out)
    x = _tt(x)
    lo, hi = min, max
    _clear()
    if lo is not None and hi is not None:
        return _wrap(_lib.rlx_clamp(x._h, _builtin_float(lo), _builtin_float(hi)))
    if lo is not None:
        return _wrap(_lib.rlx_clamp_min(x._h, _builtin_float(lo)))
    if hi is not None:
        return _wrap(_lib.rlx_clamp_max(x._h, _builtin_float(hi)))
    return x


def clamp_min(x, min):
    return clamp(x, min=min)


def clamp_max(x, max):
    return clamp(x, max=max)


def clip(x, a_min=None, a_max=None, out=None, **kwargs):
    """NumPy spelling of clamp."""
    if kwargs:
        raise TypeError("rlx.clip: unsupported arguments %s" % sorted(kwargs))
    return clamp(x, a_min, a_max, out)


# ------------------------------------------------------------- reductions

def _axes(axis):
    if axis is None:
        return None, 0
    if isinstance(axis, (_builtin_int, np.integer)):
        axis = (axis,)
    axis = tuple(operator.index(a) for a in axis)
    return (_c_int * _builtin_max(len(axis), 1))(*axis), len(axis)


def _reducer(cname, alldefault=None):
    fn = getattr(_lib, "rlx_" + cname)

    def op(x, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        _no_out(out)
        x = _tt(x)
        if dtype is not None:
            x = x.astype(dtype)
        ax = _axis_arg(axis, dim)
        keep = _keep_arg(keepdims, keepdim)
        if ax is None and not keep and alldefault is not None:
            _clear()
            return _wrap(alldefault(x._h))
        arr, n = _axes(ax)
        _clear()
        return _wrap(fn(x._h, arr, n, keep))
    op.__name__ = op.__qualname__ = cname
    op.__doc__ = ("Reduction rlx_%s over axis (int, tuple or None for all); keepdims keeps them "
                  "as size 1." % cname)
    return op


sum = _reducer("sum", _lib.rlx_sum_all)
mean = _reducer("mean", _lib.rlx_mean_all)
max = _reducer("max")
min = _reducer("min")
prod = _reducer("prod")
_var = _reducer("var")
_std = _reducer("std")
norm = _reducer("norm")
amax, amin = max, min


def _ddof_scale(x, r, axis, ddof):
    if not ddof:
        return r
    shape = x.shape
    axes = range(len(shape)) if axis is None else (
        (axis,) if isinstance(axis, (_builtin_int, np.integer)) else axis)
    n = 1
    for a in axes:
        n *= shape[a]
    return r * (n / _builtin_max(n - ddof, 0)) if n - ddof > 0 else r * _builtin_float("nan")


def var(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, dim=None, keepdim=None,
        correction=None):
    """Variance; population (ddof=0, NumPy's default) unless ddof/correction is given."""
    _no_out(out)
    x = _tt(x) if dtype is None else _tt(x).astype(dtype)
    ax = _axis_arg(axis, dim)
    ddof = correction if correction is not None else ddof
    r = _var(x, ax, keepdims=_keep_arg(keepdims, keepdim))
    return _ddof_scale(x, r, ax, ddof)


def std(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, dim=None, keepdim=None,
        correction=None):
    """Standard deviation; population (ddof=0) unless ddof/correction is given."""
    _no_out(out)
    x = _tt(x) if dtype is None else _tt(x).astype(dtype)
    ax = _axis_arg(axis, dim)
    ddof = correction if correction is not None else ddof
    r = _std(x, ax, keepdims=_keep_arg(keepdims, keepdim))
    if ddof:
        r = r * sqrt(_ddof_scale(x, ones_like(r), ax, ddof))
    return r


def _argreducer(cname):
    fn = getattr(_lib, "rlx_" + cname)

    def op(x, axis=None, out=None, *, keepdims=False, dim=None, keepdim=None):
        _no_out(out)
        x = _tt(x)
        ax = _axis_arg(axis, dim)
        keep = _keep_arg(keepdims, keepdim)
        if ax is None:
            r = fn_flat(x)
            return reshape(r, (1,) * x.ndim) if keep else r
        _clear()
        return _wrap(fn(x._h, operator.index(ax), keep))

    def fn_flat(x):
        f = flatten(x)
        _clear()
        return _wrap(fn(f._h, 0, False))
    op.__name__ = op.__qualname__ = cname
    op.__doc__ = "int64 index of the first %s along axis (None: of the flattened tensor)." % cname[3:]
    return op


argmax = _argreducer("argmax")
argmin = _argreducer("argmin")


def logsumexp(x, axis=None, keepdims=False, *, dim=None, keepdim=None):
    """log(sum(exp(x))) along one axis (None: all, via flatten), stable."""
    x = _tt(x)
    ax = _axis_arg(axis, dim)
    keep = _keep_arg(keepdims, keepdim)
    if ax is None:
        f = flatten(x)
        _clear()
        r = _wrap(_lib.rlx_logsumexp(f._h, 0, False))
        return reshape(r, (1,) * x.ndim) if keep else r
    if not isinstance(ax, (_builtin_int, np.integer)):
        ax = tuple(ax)
        if len(ax) != 1:
            raise ValueError("rlx.logsumexp reduces one axis (or None); got %r" % (ax,))
        ax = ax[0]
    _clear()
    return _wrap(_lib.rlx_logsumexp(x._h, operator.index(ax), keep))


def cumsum(x, axis=None, dtype=None, out=None, *, dim=None, exclusive=False):
    """Running sum along axis (None: of the flattened tensor, as NumPy);
    exclusive=True starts at 0 and drops the last term."""
    _no_out(out)
    x = _tt(x) if dtype is None else _tt(x).astype(dtype)
    ax = _axis_arg(axis, dim)
    if ax is None:
        x, ax = flatten(x), 0
    _clear()
    return _wrap(_lib.rlx_cumsum(x._h, operator.index(ax), _builtin_bool(exclusive)))


def sum_all(x):
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_sum_all(x._h))


def mean_all(x):
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_mean_all(x._h))


def all(x, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None):
    """True where every element is nonzero (min over bools)."""
    _no_out(out)
    return min(cast(_tt(x), bool_), axis, keepdims=keepdims, dim=dim, keepdim=keepdim)


def any(x, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None):
    """True where some element is nonzero (max over bools)."""
    _no_out(out)
    return max(cast(_tt(x), bool_), axis, keepdims=keepdims, dim=dim, keepdim=keepdim)


# --------------------------------------------------------------- movement

def reshape(x, *shape, order="C"):
    """View with a new shape; one dim may be -1 (row-major order only)."""
    if order != "C":
        raise ValueError("rlx.reshape: only order='C' is supported")
    x = _tt(x)
    shp, n = _i64s(_shape_arg(shape))
    _clear()
    r = _wrap(_lib.rlx_reshape(x._h, n, shp))
    return r


def view(x, *shape):
    return reshape(x, *shape)


def transpose(x, *axes):
    """NumPy transpose: axes is a permutation (none reverses all axes). For
    PyTorch's transpose(dim0, dim1) use swapaxes."""
    x = _tt(x)
    if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], (_builtin_int, np.integer))):
        axes = () if axes[0] is None else tuple(axes[0])
    if not axes:
        _clear()
        return _wrap(_lib.rlx_transpose(x._h, 0, None))
    perm = (_c_int * len(axes))(*(operator.index(a) for a in axes))
    _clear()
    return _wrap(_lib.rlx_transpose(x._h, len(axes), perm))


def permute(x, *dims):
    return transpose(x, *dims)


def swapaxes(x, axis1, axis2):
    x = _tt(x)
    r = x.ndim
    perm = list(range(r))
    a1, a2 = operator.index(axis1), operator.index(axis2)
    if not (-r <= a1 < r and -r <= a2 < r):
        raise IndexError("swapaxes: axis %d or %d out of range for rank %d" % (a1, a2, r))
    perm[a1], perm[a2] = perm[a2], perm[a1]
    return transpose(x, perm)


swapdims = swapaxes


def moveaxis(x, source, destination):
    x = _tt(x)
    r = x.ndim
    s, d = operator.index(source) % _builtin_max(r, 1), operator.index(destination) % _builtin_max(r, 1)
    perm = [i for i in range(r) if i != s]
    perm.insert(d, s)
    return transpose(x, perm)


def t(x):
    """The last two axes swapped (rlx_t); rank 0 and 1 are returned as they are."""
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_t(x._h))


def broadcast_to(x, *shape):
    x = _tt(x)
    shp, n = _i64s(_shape_arg(shape))
    _clear()
    return _wrap(_lib.rlx_broadcast_to(x._h, n, shp))


def expand(x, *sizes):
    """PyTorch expand: broadcast_to where -1 keeps a dim."""
    x = _tt(x)
    sizes = _shape_arg(sizes)
    shape = x.shape
    off = len(sizes) - len(shape)
    sizes = tuple(shape[i - off] if s == -1 and i >= off else s for i, s in enumerate(sizes))
    return broadcast_to(x, sizes)


def flatten(x, start_dim=0, end_dim=-1):
    """rlx_flatten (rank 1; rank 0 gives [1]); with start_dim/end_dim as PyTorch."""
    x = _tt(x)
    if (start_dim == 0 and end_dim == -1) or x.ndim == 0:
        _clear()
        return _wrap(_lib.rlx_flatten(x._h))
    shape = x.shape
    r = len(shape)
    s, e = start_dim % r, end_dim % r
    n = 1
    for d in shape[s:e + 1]:
        n *= d
    return reshape(x, shape[:s] + (n,) + shape[e + 1:])


ravel = flatten


def unsqueeze(x, axis=None, *, dim=None):
    x = _tt(x)
    ax = _axis_arg(axis, dim)
    if ax is None:
        raise TypeError("unsqueeze needs an axis")
    _clear()
    return _wrap(_lib.rlx_unsqueeze(x._h, operator.index(ax)))


def expand_dims(x, axis):
    x = _tt(x)
    if isinstance(axis, (_builtin_int, np.integer)):
        return unsqueeze(x, axis)
    r = x.ndim + len(axis)
    for a in sorted(operator.index(a) % r for a in axis):
        x = unsqueeze(x, a)
    return x


def squeeze(x, axis=None, *, dim=None):
    """Drop size-1 axes: all (rlx_squeeze_all) or the given ones (rlx_squeeze;
    a non-1 axis is an RlxError, as NumPy)."""
    x = _tt(x)
    ax = _axis_arg(axis, dim)
    if ax is None:
        _clear()
        return _wrap(_lib.rlx_squeeze_all(x._h))
    if isinstance(ax, (_builtin_int, np.integer)):
        _clear()
        return _wrap(_lib.rlx_squeeze(x._h, operator.index(ax)))
    r = x.ndim
    for a in sorted({operator.index(a) % _builtin_max(r, 1) for a in ax}, reverse=True):
        _clear()
        x = _wrap(_lib.rlx_squeeze(x._h, a))
    return x


def narrow(x, axis, start, length):
    """[start, start+length) along axis (a view)."""
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_narrow(x._h, operator.index(axis), operator.index(start), operator.index(length)))


def _clip64(v):
    return _builtin_max(-END, _builtin_min(END, operator.index(v)))


def slice(x, axis, start=None, stop=None, step=None):
    """x[start:stop:step] along one axis, Python rules (a view; rlx_slice)."""
    x = _tt(x)
    step = 1 if step is None else operator.index(step)
    if step == 0:
        raise ValueError("slice step cannot be zero")
    st = END if start is None and step < 0 else (0 if start is None else _clip64(start))
    sp = END if stop is None else _clip64(stop)
    _clear()
    return _wrap(_lib.rlx_slice(x._h, operator.index(axis), st, sp, _clip64(step)))


def select(x, axis, index):
    """x[..., index, ...] along axis (drops it; a view; rlx_select)."""
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_select(x._h, operator.index(axis), operator.index(index)))


def _pieces(n):
    return (_c_void_p * _builtin_max(n, 1))()


def split(x, split_size_or_sections, axis=0, *, dim=None):
    """PyTorch split: an int is the piece size (the last may be shorter), a
    list the sizes of the pieces (rlx_split). Returns a list of views."""
    x = _tt(x)
    ax = _axis_arg(axis, dim, 0)
    s = split_size_or_sections
    if isinstance(s, (_builtin_int, np.integer)):
        length = x.shape[ax]
        s = operator.index(s)
        if s <= 0:
            raise ValueError("split: piece size must be positive, got %d" % s)
        sizes = [s] * (length // s) + ([length % s] if length % s else [])
        if not sizes:
            sizes = [0]
    else:
        sizes = [operator.index(v) for v in s]
    arr, n = _i64s(sizes)
    out = _pieces(n)
    _clear()
    _check(_lib.rlx_split(x._h, operator.index(ax), n, arr, out))
    return [_wrap(out[i]) for i in range(n)]


def chunk(x, chunks, axis=0, *, dim=None):
    """chunks pieces; the first len % chunks get one more element (rlx_chunk)."""
    x = _tt(x)
    ax = _axis_arg(axis, dim, 0)
    n = operator.index(chunks)
    out = _pieces(n)
    _clear()
    _check(_lib.rlx_chunk(x._h, operator.index(ax), n, out))
    return [_wrap(out[i]) for i in range(n)]


def array_split(x, sections, axis=0):
    return chunk(x, sections, axis)


# ---------------------------------------------------------- data movement

def _handles(xs):
    ts = [_tt(x) for x in xs]
    arr = (_c_void_p * _builtin_max(len(ts), 1))(*[t_._h for t_ in ts])
    return ts, arr


def cat(tensors, axis=0, *, dim=None):
    """Concatenate along an existing axis (dtypes promote)."""
    ts, arr = _handles(tensors)
    _clear()
    return _wrap(_lib.rlx_cat(arr, len(ts), operator.index(_axis_arg(axis, dim, 0))))


concatenate = cat
concat = cat


def stack(tensors, axis=0, *, dim=None):
    """Stack equal shapes along a new axis (dtypes promote)."""
    ts, arr = _handles(tensors)
    _clear()
    return _wrap(_lib.rlx_stack(arr, len(ts), operator.index(_axis_arg(axis, dim, 0))))


def tile(x, reps, axis=None):
    """np.tile(x, reps); with axis=, rlx_tile: repeat that whole axis reps times."""
    x = _tt(x)
    if axis is not None:
        _clear()
        return _wrap(_lib.rlx_tile(x._h, operator.index(axis), operator.index(reps)))
    if isinstance(reps, (_builtin_int, np.integer)):
        reps = (reps,)
    reps = tuple(operator.index(r) for r in reps)
    while x.ndim < len(reps):
        x = unsqueeze(x, 0)
    reps = (1,) * (x.ndim - len(reps)) + reps
    for a, r in enumerate(reps):
        if r != 1:
            _clear()
            x = _wrap(_lib.rlx_tile(x._h, a, r))
    return x


def flip(x, axis=None, *, dims=None, dim=None):
    """Reverse the order along axis (an int, a tuple, or None for all)."""
    x = _tt(x)
    ax = dims if dims is not None else _axis_arg(axis, dim)
    if ax is None:
        ax = range(x.ndim)
    elif isinstance(ax, (_builtin_int, np.integer)):
        ax = (ax,)
    for a in ax:
        _clear()
        x = _wrap(_lib.rlx_flip(x._h, operator.index(a)))
    return x


def roll(x, shift, axis=None, *, dims=None, dim=None):
    """np.roll: element i moves to (i + shift) mod len; axis None rolls the
    flattened tensor; tuples of shifts and axes roll each."""
    x = _tt(x)
    ax = dims if dims is not None else _axis_arg(axis, dim)
    if ax is None:
        shape = x.shape
        f = flatten(x)
        _clear()
        return reshape(_wrap(_lib.rlx_roll(f._h, 0, operator.index(shift))), shape)
    if isinstance(ax, (_builtin_int, np.integer)):
        ax = (ax,)
    shifts = (shift,) * len(ax) if isinstance(shift, (_builtin_int, np.integer)) else tuple(shift)
    if len(shifts) != len(ax):
        raise ValueError("roll: %d shifts for %d axes" % (len(shifts), len(ax)))
    for a, s in zip(ax, shifts):
        _clear()
        x = _wrap(_lib.rlx_roll(x._h, operator.index(a), operator.index(s)))
    return x


def pad(x, pad_width, constant_values=0, axis=None, *, value=None):
    """Constant padding. NumPy form: pad_width an int, a (before, after) pair
    for every axis, or one pair per axis. With axis=, pad_width is the
    (before, after) of that axis only (rlx_pad)."""
    x = _tt(x)
    v = _builtin_float(_py_scalar(constant_values if value is None else value))
    if axis is not None:
        b, a = (pad_width, pad_width) if isinstance(pad_width, (_builtin_int, np.integer)) else pad_width
        _clear()
        return _wrap(_lib.rlx_pad(x._h, operator.index(axis), operator.index(b), operator.index(a), v))
    r = x.ndim
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (r, 2)) if r else np.zeros((0, 2), np.int64)
    for ax_ in range(r):
        b, a = (_builtin_int(pw[ax_, 0]), _builtin_int(pw[ax_, 1]))
        if b or a:
            _clear()
            x = _wrap(_lib.rlx_pad(x._h, ax_, b, a, v))
    return x


def _index_tensor(idx):
    if isinstance(idx, Tensor):
        return idx
    arr = np.asarray(idx)
    if arr.dtype.kind not in "iu" and not (arr.size == 0 and arr.dtype.kind == "f"):
        raise TypeError("indices must be integers, got %s" % arr.dtype)
    return tensor(arr.astype(np.int64))


def gather(x, indices, axis=0, *, dim=None):
    """NumPy take along axis: shape x[:axis] + indices.shape + x[axis+1:]
    (negative indices count from the end; out of range raises at realization)."""
    x = _tt(x)
    idx = _index_tensor(indices)
    _clear()
    return _wrap(_lib.rlx_gather(x._h, idx._h, operator.index(_axis_arg(axis, dim, 0))))


def take(x, indices, axis=None, out=None, mode="raise"):
    """np.take: axis None takes from the flattened tensor (mode 'raise' only;
    out-of-range indices raise at realization)."""
    _no_out(out)
    if mode != "raise":
        raise ValueError("rlx.take: only mode='raise' is supported")
    x = _tt(x)
    if axis is None:
        x, axis = flatten(x), 0
    return gather(x, indices, axis)


def index_select(x, axis=None, index=None, *, dim=None):
    """PyTorch index_select(x, dim, index): index must be 1-D."""
    x = _tt(x)
    ax = _axis_arg(axis, dim)
    idx = _index_tensor(index)
    _clear()
    return _wrap(_lib.rlx_index_select(x._h, operator.index(ax), idx._h))


def cast(x, dtype):
    """Convert to dtype (float -> int truncates; -> bool is x != 0)."""
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_cast(x._h, _dtype(dtype).code))


def contiguous(x):
    """Same values; realized into its own contiguous buffer."""
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_contiguous(x._h))


def stop_gradient(x):
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_stop_gradient(x._h))


detach = stop_gradient


def _enum(cls, value, what, none=None):
    """An enum member from its value, or from its name in any case; None
    gives `none` (when the API has a default)."""
    if value is None and none is not None:
        return none
    if isinstance(value, str):
        try:
            return cls[value.upper()]
        except KeyError:
            raise ValueError("unknown %s %r (one of %s)" % (what, value, ", ".join(m.name.lower() for m in cls)))
    return cls(value)


def _act(act):
    return _enum(Act, act, "activation", Act.NONE)


def _mask(mask):
    return _enum(Mask, mask, "mask", Mask.NONE)


def _fmt(fmt):
    return _enum(Minifloat, fmt, "minifloat")


# --------------------------------------------------------- linear algebra

def matmul(a, b):
    """NumPy @ (1-D operands, broadcast batch dims)."""
    a, b = _tt(a), _tt(b)
    _clear()
    return _wrap(_lib.rlx_matmul(a._h, b._h))


def matmul_t(a, b):
    """a @ swap_last_two(b)."""
    a, b = _tt(a), _tt(b)
    _clear()
    return _wrap(_lib.rlx_matmul_t(a._h, b._h))


def linear(x, weight, bias=None, act=None):
    """x @ weight.T + bias with weight [out, in]; act (None, 'relu', 'gelu',
    'gelu_tanh', 'silu', 'tanh', 'sigmoid') fuses an activation."""
    x, w = _tt(x), _tt(weight)
    b = _opt(bias)
    _clear()
    if act is None:
        return _wrap(_lib.rlx_linear(x._h, w._h, b))
    return _wrap(_lib.rlx_linear_act(x._h, w._h, b, _act(act)))


def linear_act(x, weight, bias, act):
    x, w = _tt(x), _tt(weight)
    b = _opt(bias)
    _clear()
    return _wrap(_lib.rlx_linear_act(x._h, w._h, b, _act(act)))


def solve(a, b):
    """NumPy linalg.solve (batched); a singular matrix raises at realization."""
    a, b = _tt(a), _tt(b)
    _clear()
    return _wrap(_lib.rlx_solve(a._h, b._h))


def inv(a):
    a = _tt(a)
    _clear()
    return _wrap(_lib.rlx_inv(a._h))


# ----------------------------------------------------------- neural nets

def softmax(x, axis=-1, *, dim=None):
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_softmax(x._h, operator.index(_axis_arg(axis, dim, -1))))


def log_softmax(x, axis=-1, *, dim=None):
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_log_softmax(x._h, operator.index(_axis_arg(axis, dim, -1))))


def layer_norm(x, gamma=None, beta=None, eps=1e-5, *, weight=None, bias=None):
    """Normalize over the last axis; gamma/beta (weight/bias) are [D] or None."""
    x = _tt(x)
    g = _opt(gamma if gamma is not None else weight)
    b = _opt(beta if beta is not None else bias)
    _clear()
    return _wrap(_lib.rlx_layer_norm(x._h, g, b, _builtin_float(eps)))


def rms_norm(x, gamma=None, eps=1e-6, *, weight=None):
    """x / sqrt(mean(x^2, last axis) + eps) * gamma."""
    x = _tt(x)
    g = _opt(gamma if gamma is not None else weight)
    _clear()
    return _wrap(_lib.rlx_rms_norm(x._h, g, _builtin_float(eps)))


def cross_entropy(logits, probs):
    """-sum(probs * log_softmax(logits), -1): [..., C] -> [...]."""
    a, b = _tt(logits), _tt(probs)
    _clear()
    return _wrap(_lib.rlx_cross_entropy(a._h, b._h))


def softmax_cross_entropy_with_logits(logits, labels):
    """-log_softmax(logits)[i, labels[i]]: logits [N, C], labels [N] -> [N]."""
    a, b = _tt(logits), _tt(labels)
    _clear()
    return _wrap(_lib.rlx_softmax_cross_entropy_with_logits(a._h, b._h))


def attention(q, k, v, num_heads, head_dim=None, mask=None, window=0):
    """Multi-head attention over q [B, Sq, H*D], k, v [B, Sk, H*D].
    mask: None, 'causal', 'sliding' (with window), or a [B, Sk] tensor of
    keep (nonzero) / drop (0) flags (rlx_attention_masked)."""
    q, k, v = _tt(q), _tt(k), _tt(v)
    nh = operator.index(num_heads)
    if head_dim is None:
        if nh <= 0:
            raise ValueError("attention: num_heads must be positive")
        head_dim = q.shape[-1] // nh
    hd = operator.index(head_dim)
    if mask is not None and not isinstance(mask, (str, _builtin_int, enum.Enum)):
        m = _tt(mask)
        _clear()
        return _wrap(_lib.rlx_attention_masked(q._h, k._h, v._h, m._h, nh, hd))
    _clear()
    return _wrap(_lib.rlx_attention(q._h, k._h, v._h, nh, hd, _mask(mask), operator.index(window)))


def attention_masked(q, k, v, mask, num_heads, head_dim=None):
    q = _tt(q)
    if head_dim is None:
        head_dim = q.shape[-1] // operator.index(num_heads)
    q, k, v, m = q, _tt(k), _tt(v), _tt(mask)
    _clear()
    return _wrap(_lib.rlx_attention_masked(q._h, k._h, v._h, m._h, operator.index(num_heads),
                                           operator.index(head_dim)))


def rope(x, cos, sin, head_dim):
    """Rotary embedding, rotate-half per head: x [B, S, H*D], cos/sin [S, D/2]."""
    x, c, s = _tt(x), _tt(cos), _tt(sin)
    _clear()
    return _wrap(_lib.rlx_rope(x._h, c._h, s._h, operator.index(head_dim)))


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """NCHW x OIHW convolution (PyTorch conv2d); ints or pairs."""
    x, w = _tt(x), _tt(weight)
    b = _opt(bias)
    _clear()
    return _wrap(_lib.rlx_conv2d(x._h, w._h, b, _pair(stride, "stride"), _pair(padding, "padding"),
                                 _pair(dilation, "dilation"), operator.index(groups)))


def _pool(fn, x, kernel_size, stride, padding):
    x = _tt(x)
    _clear()
    return _wrap(fn(x._h, _pair(kernel_size, "kernel_size"), _pair(stride, "stride"),
                    _pair(padding, "padding")))


def max_pool2d(x, kernel_size, stride=None, padding=0):
    """NCHW max pooling (stride None = kernel size; pads with -inf)."""
    return _pool(_lib.rlx_max_pool2d, x, kernel_size, stride, padding)


def avg_pool2d(x, kernel_size, stride=None, padding=0):
    """NCHW average pooling (count_include_pad=True)."""
    return _pool(_lib.rlx_avg_pool2d, x, kernel_size, stride, padding)


# ----------------------------------------------------------------- signal

def fft(x, axis=-1, *, dim=None):
    """Unnormalized FFT in the [..., 2N] layout (N real parts then N imaginary)."""
    x = _tt(x)
    ax = operator.index(_axis_arg(axis, dim, -1))
    _clear()
    if ax == -1:
        return _wrap(_lib.rlx_fft(x._h))
    return _wrap(_lib.rlx_fft_axis(x._h, ax, False))


def ifft(x, axis=-1, *, dim=None):
    """Unnormalized inverse FFT (ifft(fft(x)) = N x), [..., 2N] layout."""
    x = _tt(x)
    ax = operator.index(_axis_arg(axis, dim, -1))
    _clear()
    if ax == -1:
        return _wrap(_lib.rlx_ifft(x._h))
    return _wrap(_lib.rlx_fft_axis(x._h, ax, True))


def fft_axis(x, axis, inverse=False):
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_fft_axis(x._h, operator.index(axis), _builtin_bool(inverse)))


def to_complex_layout(a, axis=-1):
    """NumPy helper: a complex (or real) array -> float array in the [..., 2N] layout."""
    a = np.asarray(a)
    return np.concatenate([a.real, a.imag if np.iscomplexobj(a) else np.zeros_like(a)], axis=axis)


def from_complex_layout(a, axis=-1):
    """NumPy helper: the [..., 2N] layout -> a complex NumPy array."""
    a = np.asarray(a)
    re, im = np.split(a, 2, axis=axis)
    return re + 1j * im


# ------------------------------------------- low precision, weight synthesis

def scaled_matmul(x, w, fmt="fp8_e4m3", block=32):
    """x [m, k] @ w[n, k]^T with both rounded to a minifloat ('fp8_e4m3',
    'fp8_e5m2', 'fp6_e2m3', 'fp6_e3m2', 'fp4_e2m1') scaled per block."""
    x, w = _tt(x), _tt(w)
    _clear()
    return _wrap(_lib.rlx_scaled_matmul(x._h, w._h, _fmt(fmt), operator.index(block)))


def synth_matmul(x, indices, codebook):
    x, i, c = _tt(x), _tt(indices), _tt(codebook)
    _clear()
    return _wrap(_lib.rlx_synth_matmul(x._h, i._h, c._h))


def synth_reconstruct(indices, codebook):
    i, c = _tt(indices), _tt(codebook)
    _clear()
    return _wrap(_lib.rlx_synth_reconstruct(i._h, c._h))


def spline_activation(x, coeff, grid_min, grid_max, num_basis=None):
    """sum_g coeff[c, g] exp(-((x - ctr_g)/h)^2) per last-axis channel c."""
    x, c = _tt(x), _tt(coeff)
    nb = c.shape[-1] if num_basis is None else operator.index(num_basis)
    _clear()
    return _wrap(_lib.rlx_spline_activation(x._h, c._h, nb, _builtin_float(grid_min), _builtin_float(grid_max)))


# ------------------------------------------------------------ realization

def realize(*tensors):
    """Realize tensors in one schedule (shared work once); returns them."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    ts, arr = _handles(tensors)
    _clear()
    _check(_lib.rlx_realize_many(arr, len(ts)))
    return ts[0] if len(ts) == 1 else ts


def shares_storage(a, b):
    """True when a and b would read (part of) the same backing buffer."""
    a, b = _tt(a), _tt(b)
    _clear()
    r = _lib.rlx_shares_storage(a._h, b._h)
    if _last_status():
        _raise()
    return r


def storage_bytes(x):
    return _tt(x).storage_bytes()


# --------------------------------------------------------------- programs

class Program:
    """A compiled program (rlx_compile): run(**bindings) binds every input
    by name (values: Tensors or arrays) and returns the outputs."""
    _deleter = _BLOB_DELETER

    def __init__(self, outputs):
        self._single = isinstance(outputs, Tensor)
        outs = [outputs] if self._single else list(outputs)
        ts, arr = _handles(outs)
        self._p = None
        self._n = len(ts)
        _clear()
        p = _lib.rlx_compile(arr, len(ts))
        if not p:
            _raise("rlx_compile")
        self._p = p

    def run(self, bindings=None, **kw):
        if self._p is None:
            raise ValueError("rlx.Program: the program was closed")
        b = dict(bindings or {})
        b.update(kw)
        keep = []
        arr = (_ffi.Binding * _builtin_max(len(b), 1))()
        for i, (name, value) in enumerate(b.items()):
            v = value if isinstance(value, Tensor) else tensor(value)
            nm = str(name).encode()
            keep.append((v, nm))
            arr[i].name = nm
            arr[i].value = v._h
        out = (_c_void_p * self._n)()
        _clear()
        _check(_lib.rlx_program_run(self._p, arr, len(b), out))
        res = [_wrap(out[i]) for i in range(self._n)]
        return res[0] if self._single else res

    __call__ = run

    def close(self, _free=_lib.rlx_program_free):
        p, self._p = getattr(self, "_p", None), None
        if p:
            try:
                _free(p)
            except Exception:
                pass

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def compile(outputs):
    """Compile the graph of outputs (a Tensor or a list) into a Program."""
    return Program(outputs)


# --------------------------------------------------------------- autodiff

def grad(loss, wrt):
    """Lazy d sum(loss) / d w for each w in wrt (a Tensor or a list)."""
    loss = _tt(loss)
    single = isinstance(wrt, Tensor)
    ws = [wrt] if single else list(wrt)
    ts, arr = _handles(ws)
    out = _pieces(len(ts))
    _clear()
    _check(_lib.rlx_grad(loss._h, arr, len(ts), out))
    res = [_wrap(out[i]) for i in range(len(ts))]
    return res[0] if single else res


# ---------------------------------------------------------- runtime control

def set_num_threads(n):
    _lib.rlx_set_num_threads(operator.index(n))


def get_num_threads():
    return _lib.rlx_get_num_threads()


def set_option(key, value):
    """Tuning knob (rlx_set_option), e.g. set_option('backend', 'ref')."""
    _clear()
    _check(_lib.rlx_set_option(str(key).encode(), str(value).encode()))


def stats():
    """Process-wide counters (rlx_stats) as a dict."""
    s = _ffi.Stats()
    _lib.rlx_stats(_c.byref(s))
    return {name: getattr(s, name) for name, _ in s._fields_}


def stats_reset():
    _lib.rlx_stats_reset()


def dump_dot(x, path):
    """Write the graph of x as Graphviz dot to path."""
    x = _tt(x)
    _clear()
    _check(_lib.rlx_dump_dot(x._h, str(path).encode()))


def version():
    """The library's version string (rlx_version)."""
    return _lib.rlx_version().decode()


def host_info():
    return _lib.rlx_host_info().decode()


# ----------------------------------------------------------------- indexing

def _getitem(x, key):
    if not isinstance(key, tuple):
        key = (key,)
    shape = x.shape
    # a single boolean mask
    if len(key) == 1 and _is_bool_index(key[0]):
        return _bool_mask(x, key[0])
    items = []
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, type(builtins.slice(0))):
            items.append(k)
        elif isinstance(k, (_builtin_bool, np.bool_)):
            raise IndexError("rlx: a scalar bool index is not supported")
        elif isinstance(k, (_builtin_int, np.integer)):
            items.append(_builtin_int(k))
        elif isinstance(k, Tensor) and k.ndim == 0 and not k.dtype.is_float and not k.dtype.is_bool:
            items.append(_builtin_int(k.item()))
        elif isinstance(k, (Tensor, np.ndarray, list, tuple)):
            if _is_bool_index(k):
                raise IndexError("rlx: a boolean mask must be the only index")
            items.append(("array", k))
        else:
            raise IndexError("rlx: only integers, slices, None, Ellipsis and one integer array are valid "
                             "indices, got %s" % type(k).__name__)
    nell = items.count(Ellipsis)
    if nell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = len([i for i in items if i is not None and i is not Ellipsis])
    if consumed > len(shape):
        raise IndexError("too many indices for tensor: tensor is %d-dimensional, but %d were indexed"
                         % (len(shape), consumed))
    narrays = len([i for i in items if isinstance(i, tuple)])
    if narrays > 1:
        raise IndexError("rlx: at most one integer-array index is supported")
    # NumPy: with an array index, ints count as advanced indices too; when
    # they are not adjacent (None or an Ellipsis, even an empty one, in
    # between) the advanced dims move to the front.
    move_front = False
    if narrays:
        adv = [i for i, it in enumerate(items) if isinstance(it, (tuple, _builtin_int))]
        move_front = adv != list(range(adv[0], adv[0] + len(adv)))
    if nell:
        at = items.index(Ellipsis)
        items[at:at + 1] = [builtins.slice(None)] * (len(shape) - consumed)
    ax = 0      # current output axis
    src = 0     # current input axis (for sizes)
    adv_at = adv_nd = None
    for it in items:
        if it is None:
            _clear()
            x = _wrap(_lib.rlx_unsqueeze(x._h, ax))
            ax += 1
        elif isinstance(it, _builtin_int):
            n = shape[src]
            if not -n <= it < n:
                raise IndexError("index %d is out of bounds for axis %d with size %d" % (it, src, n))
            _clear()
            x = _wrap(_lib.rlx_select(x._h, ax, it + n if it < 0 else it))
            src += 1
        elif isinstance(it, tuple):
            idx = it[1]
            n = shape[src]
            if not isinstance(idx, Tensor):
                arr = np.asarray(idx)
                if arr.size == 0:
                    arr = arr.astype(np.int64)
                if arr.dtype.kind not in "iu":
                    raise IndexError("arrays used as indices must be of integer (or boolean) type")
                if arr.size and (arr.max() >= n or arr.min() < -n):
                    bad = arr.max() if arr.max() >= n else arr.min()
                    raise IndexError("index %d is out of bounds for axis %d with size %d" % (bad, src, n))
                idx = tensor(arr.astype(np.int64))
            _clear()
            x = _wrap(_lib.rlx_gather(x._h, idx._h, ax))
            adv_at, adv_nd = ax, idx.ndim
            ax += idx.ndim
            src += 1
        else:  # slice
            st, sp, sx = it.start, it.stop, it.step
            x = slice(x, ax, st, sp, sx)
            ax += 1
            src += 1
    if move_front and adv_at:
        r = x.ndim
        perm = list(range(adv_at, adv_at + adv_nd)) + [i for i in range(r) if not adv_at <= i < adv_at + adv_nd]
        x = transpose(x, perm)
    return x


def _is_bool_index(k):
    if isinstance(k, Tensor):
        return k.dtype.is_bool and k.ndim > 0
    if isinstance(k, np.ndarray):
        return k.dtype == np.bool_ and k.ndim > 0
    if isinstance(k, list) and k:
        a = np.asarray(k)
        return a.dtype == np.bool_ and a.ndim > 0
    return False


def _bool_mask(x, mask):
    """x[mask] (eager: the mask is read to know the result's size)."""
    m = mask.numpy() if isinstance(mask, Tensor) else np.asarray(mask, dtype=np.bool_)
    shape = x.shape
    k = m.ndim
    if m.shape != shape[:k]:
        raise IndexError("boolean index of shape %s does not match tensor of shape %s" % (m.shape, shape))
    flat = reshape(x, (-1,) + shape[k:]) if k != 1 else x
    idx = np.flatnonzero(m).astype(np.int64)
    return gather(flat, tensor(idx), 0)


# ----------------------------------------------------------- Tensor methods

def _method(fn):
    def m(self, *a, **kw):
        return fn(self, *a, **kw)
    m.__name__ = m.__qualname__ = fn.__name__
    m.__doc__ = fn.__doc__
    return m


for _name in (_UNARY + ["gelu", "negative", "absolute", "arctan", "reciprocal", "hardswish", "hardsigmoid",
                        "logsigmoid",
                        "add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2", "rem", "fmod",
                        "subtract", "multiply", "power", "arctan2", "true_divide", "divide", "floor_divide",
                        "remainder", "eq", "ne", "lt", "le", "gt", "ge", "equal", "not_equal", "less",
                        "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_xor",
                        "rsub", "rdiv",
                        "masked_fill", "clamp", "clamp_min", "clamp_max", "clip",
                        "sum", "mean", "max", "min", "prod", "var", "std", "norm", "amax", "amin", "argmax",
                        "argmin", "logsumexp", "cumsum", "sum_all", "mean_all", "all", "any",
                        "reshape", "view", "transpose", "permute", "swapaxes", "swapdims", "moveaxis", "t",
                        "broadcast_to", "expand", "flatten", "ravel", "unsqueeze", "expand_dims", "squeeze",
                        "narrow", "slice", "select", "split", "chunk",
                        "tile", "flip", "roll", "pad", "gather", "take", "index_select", "contiguous",
                        "stop_gradient", "detach", "cast",
                        "matmul", "matmul_t", "linear", "linear_act", "solve", "inv",
                        "softmax", "log_softmax", "layer_norm", "rms_norm", "cross_entropy",
                        "softmax_cross_entropy_with_logits", "rope", "conv2d", "max_pool2d", "avg_pool2d",
                        "fft", "ifft", "fft_axis", "scaled_matmul", "synth_matmul", "spline_activation",
                        "dump_dot", "zeros_like", "ones_like", "full_like"]):
    setattr(Tensor, _name, _method(globals()[_name]))
del _name


_UFUNCS = {
    np.add: add, np.subtract: sub, np.multiply: mul, np.true_divide: true_divide,
    np.floor_divide: floor_divide, np.remainder: remainder, np.fmod: rem, np.power: pow,
    np.maximum: maximum, np.minimum: minimum, np.arctan2: atan2, np.equal: eq, np.not_equal: ne,
    np.less: lt, np.less_equal: le, np.greater: gt, np.greater_equal: ge, np.logical_and: logical_and,
    np.logical_or: logical_or, np.logical_xor: logical_xor, np.logical_not: logical_not, np.negative: neg,
    np.positive: lambda x: _tt(x), np.absolute: abs, np.exp: exp, np.log: log, np.sqrt: sqrt, np.sin: sin,
    np.cos: cos, np.tan: tan, np.arctan: atan, np.tanh: tanh, np.sign: sign, np.floor: floor, np.ceil: ceil,
    np.rint: round, np.matmul: matmul,
}


def _bitwise(logical, npfn):
    def op(a, b):
        ta, tb = _operand(a), _operand(b)
        if _all_bool(ta) and _all_bool(tb):
            return _binary_tt(logical, _tt(ta), _tt(tb))
        args = [v.numpy() if isinstance(v, Tensor) else v for v in (a, b)]
        return npfn(*args)
    return op


def _all_bool(v):
    return (isinstance(v, Tensor) and v.dtype.is_bool) or isinstance(v, _builtin_bool)


_UFUNCS[np.bitwise_and] = _bitwise("logical_and", np.bitwise_and)
_UFUNCS[np.bitwise_or] = _bitwise("logical_or", np.bitwise_or)
_UFUNCS[np.bitwise_xor] = _bitwise("ne", np.bitwise_xor)
_UFUNCS[np.invert] = lambda x: ~_tt(x) if _tt(x).dtype.is_bool else np.invert(_tt(x).numpy())


def _where_method(self, condition, other):
    """PyTorch's x.where(condition, other) = rlx.where(condition, x, other)."""
    return where(condition, self, other)


Tensor.where = _where_method
