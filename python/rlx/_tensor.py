"""The Tensor class: handle ownership, introspection, realization, NumPy
views and conversion; making tensors from data (tensor, from_numpy) and
casting. The operations live in the other modules, which attach their
operators and methods to Tensor with _attach.

A Tensor owns exactly one librlx reference, released in __del__.
"""

import builtins
import ctypes
import operator

import numpy as np

from ._base import (_lib, _c, _c_void_p, _c_int64, _object_new, _builtin_bool, _builtin_int, _builtin_float,
                    _builtin_abs, _builtin_max, _clear, _last_status, _release, _raise, _check, _i64s,
                    MAX_RANK, RlxError)
from ._dtypes import (_dtype, _BY_CODE, _py_scalar, bool_, int32, int64, float32, float64, float16, bfloat16,
                      int8, uint8, int16, complex64)
from . import _ffi


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
    """An optional tensor argument as a Tensor, or None. The caller holds it
    while the library uses its handle (_h): a temporary's handle would be
    released as soon as the temporary is dropped."""
    return None if x is None else _tt(x)


def _h(t):
    return None if t is None else t._h


def _apply(fn, *xs):
    """fn(handles of xs as Tensors) wrapped: the plain one-call operations."""
    ts = [_tt(x) for x in xs]
    _clear()
    return _wrap(fn(*[t._h for t in ts]))


def _shape_arg(args):
    """zeros(2, 3), zeros((2, 3)), zeros([2, 3]) and zeros(()) all work."""
    if len(args) == 1 and not isinstance(args[0], (_builtin_int, np.integer)):
        args = args[0]
        if isinstance(args, Tensor):
            args = args.tolist()
    return tuple(operator.index(a) for a in args)


def _handles(xs):
    ts = [_tt(x) for x in xs]
    arr = (_c_void_p * _builtin_max(len(ts), 1))(*[t_._h for t_ in ts])
    return ts, arr


# NumPy ufunc -> the rlx function that computes it lazily (filled in by
# rlx._core once every operation exists).
_UFUNCS = {}


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
        copy=True a writable copy made by rlx_read.

        bfloat16, which NumPy lacks, reads out as float32 values: always a
        new writable copy (exact: every bfloat16 is a float32). Its bit
        patterns, zero-copy, are ``bits()``."""
        d = self.dtype
        if copy or d is bfloat16:
            return self.read()
        return self._view(d.np)

    def bits(self):
        """The realized payload, zero-copy and read-only, as unsigned integers
        of the element's width: the bit patterns of a bfloat16 or float16
        tensor as uint16 (uint8 for bool, int8, uint8; uint32 for float32,
        int32, uint32; uint64 for the 8-byte types). It keeps this Tensor
        alive; rlx.from_numpy(b, dtype=rlx.bfloat16) reads such bits back."""
        return self._view(np.dtype("u%d" % self.dtype.itemsize))

    def _view(self, npdt):
        shape = self.shape
        _clear()
        p = _lib.rlx_data(self._h)
        if not p:
            if _last_status():
                _raise()
            return np.zeros(shape, npdt)  # empty payload
        view = _ArrayView(self, p, shape, npdt.str, True)
        return np.asarray(view)

    def read(self, dtype=None):
        """A new writable NumPy copy (rlx_read; rlx_read_f32 / rlx_read_f64
        convert to float32 / float64 in the library). A bfloat16 tensor, or
        dtype=bfloat16 (the library's cast first), reads as float32 values."""
        shape = self.shape
        n = 1
        for s in shape:
            n *= s
        d = self.dtype if dtype is None else _dtype(dtype)
        if d is bfloat16 and self.dtype is not bfloat16:
            return self.astype(bfloat16).read()
        if self.dtype is bfloat16 and d is not float64:
            # a bfloat16 is the high half of a float32 (rlx.h): its value is
            # its bits shifted, exact for every pattern (NaN payloads too)
            v = (self.bits().astype(np.uint32) << 16).view(np.float32)
            return v if d is bfloat16 or d is float32 else v.astype(d.np)
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
        """The value of a one-element tensor as a Python bool / int / float /
        complex."""
        d = self.dtype
        if d.is_complex:  # rlx_item refuses c64 (two parts): read the pair
            if self.numel() != 1:
                _clear()
                _check(_lib.rlx_item(self._h, _c.byref(_c.c_double())))  # the library's shape error
            return complex(self.numpy().reshape(-1)[0])
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

    @property
    def real(self):
        """The real part (rlx_real): a float32 (float64) copy of a
        complex64 (complex128) tensor, the tensor itself for a real one."""
        _clear()
        return _wrap(_lib.rlx_real(self._h))

    @property
    def imag(self):
        """The imaginary part (rlx_imag): float32 (float64) of a complex64
        (complex128) tensor, zeros of a real one's dtype."""
        _clear()
        return _wrap(_lib.rlx_imag(self._h))

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
        d = self.dtype  # bfloat16 travels as its bits (tensor() takes uint16 as bits)
        return (tensor, ((self.bits() if d is bfloat16 else self.numpy()).copy(), d.name))

    def __setitem__(self, key, value):
        raise TypeError("rlx tensors are immutable; build a new one, e.g. with rlx.where(mask, value, x) "
                        "or x.masked_fill(mask, value)")

    __hash__ = object.__hash__

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

    def half(self):
        return self.astype(float16)

    def bfloat16(self):
        return self.astype(bfloat16)

    def char(self):  # torch: int8
        return self.astype(int8)

    def byte(self):  # torch: uint8
        return self.astype(uint8)

    def short(self):
        return self.astype(int16)


def _attach(members):
    """Make members (a class whose body defines Tensor operators or
    properties) attributes of Tensor: the modules defining operations add
    them this way because Tensor exists before they do."""
    for name, m in vars(members).items():
        # only functions and properties: not the class's own bookkeeping, nor
        # the __hash__ = None a class defining __eq__ gets (Tensor hashes by id)
        if not (callable(m) or isinstance(m, property)):
            continue
        f = m.fget if isinstance(m, property) else m
        f.__qualname__ = "Tensor." + f.__name__
        setattr(Tensor, name, m)


# ---------------------------------------------------------- constructors

def _c_order(a, d):
    # not np.ascontiguousarray: it returns ndim >= 1, turning a 0-d array into shape (1,)
    return np.asarray(a, dtype=d.np, order="C")


def _new_from_data(d, shape, arr):
    shp, n = _i64s(shape)
    _clear()
    return _wrap(_lib.rlx_from_data(d.code, n, shp, arr.ctypes.data if arr.size else None))


def _is_bits(a, d):
    """A uint16 array given for a 16-bit float dtype holds its bit patterns."""
    return d is not None and d.np.itemsize == 2 and d.is_float and isinstance(a, np.ndarray) \
        and a.dtype.newbyteorder("=") == np.uint16


def _as_bits(a, d):
    """The uint16 patterns of a in native byte order, typed as d's storage."""
    return a.astype(np.uint16, copy=False).view(d.np)


def _bf16_values(arr):
    """A realized bfloat16 tensor of arr's values, rounded by the library's
    cast (to nearest even, once, from the exact value)."""
    try:
        src = _dtype(arr.dtype)
    except TypeError:
        src = float64  # e.g. uint64, float128: through float64
    if src is bfloat16:  # ml_dtypes' bfloat16: already the bits
        return _new_from_data(bfloat16, arr.shape, _c_order(arr.view(np.uint16), bfloat16))
    return cast(_new_from_data(src, arr.shape, _c_order(arr, src)), bfloat16).realize()


def tensor(data, dtype=None):
    """A tensor holding a copy of data (a list, tuple, NumPy array, Python or
    NumPy scalar, or Tensor). Without dtype: NumPy arrays keep their dtype
    (bool, int8, uint8, int16, int32, uint32, int64, float16, float32,
    float64 are accepted; ml_dtypes' bfloat16 too); Python floats give
    float32, ints int64, bools bool (PyTorch's rule).

    dtype=bfloat16 (NumPy has none): values are rounded to nearest even by
    the library's cast; a uint16 NumPy array is taken as the bit patterns
    instead (for float16 too: the inverse of Tensor.bits())."""
    if isinstance(data, Tensor):
        return data if dtype is None else data.astype(dtype)
    d = None if dtype is None else _dtype(dtype)
    if _is_bits(data, d):
        return _new_from_data(d, data.shape, _c_order(_as_bits(data, d), d))
    if isinstance(data, (_builtin_bool, _builtin_int, _builtin_float, np.generic)) and not (
            isinstance(data, np.generic) and data.dtype.kind not in "biuf"):
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
        if d is bfloat16:
            return _bf16_values(data)
        arr = _c_order(data, d)
    else:
        if isinstance(data, (list, tuple)) and _has_tensor(data):
            from ._shape import stack  # here: _shape imports this module
            return stack([_tt(x, dtype) for x in data]) if data else tensor(np.asarray(data), dtype)
        arr = np.asarray(data)
        if arr.dtype == object or arr.dtype.kind not in "bifuc":
            raise TypeError("rlx.tensor: cannot make a tensor of %r (NumPy infers %s)" % (type(data).__name__,
                                                                                        arr.dtype))
        if d is None:
            k = arr.dtype.kind
            d = float32 if k == "f" else int64 if k in "iu" else bool_ if k == "b" else \
                complex64 if k == "c" else _dtype(arr.dtype)
        if d is bfloat16:
            return _bf16_values(arr)
        arr = _c_order(arr, d)
    return _new_from_data(d, arr.shape, arr)


def _has_tensor(seq):
    for x in seq:
        if isinstance(x, Tensor):
            return True
        if isinstance(x, (list, tuple)) and _has_tensor(x):
            return True
    return False


asarray = tensor


def from_numpy(a, dtype=None):
    """A tensor reading the NumPy array's memory in place (rlx_from_blob; no
    copy). The array stays alive while any tensor reads it; writing to the
    array before the tensor (or an expression over it) is realized is
    visible in the results. Non-contiguous or byte-swapped arrays are copied
    first. Dtypes map exactly (ml_dtypes' bfloat16 to bfloat16); others
    raise TypeError.

    dtype: a uint16 array with dtype=bfloat16 or float16 is read in place as
    the bit patterns (Tensor.bits() gives them). Any other dtype differing
    from a's is the library's cast of the in-place tensor: lazy, rounded to
    nearest even for float16 and bfloat16, wrapping or saturating for
    integers as rlx.h says (from float32 values: from_numpy(a, dtype=rlx.bfloat16))."""
    if not isinstance(a, np.ndarray):
        raise TypeError("rlx.from_numpy expects a numpy.ndarray, got %s" % type(a).__name__)
    want = None if dtype is None else _dtype(dtype)
    if _is_bits(a, want):
        d = want
        a = _as_bits(a, d)
    else:
        d = _dtype(a.dtype)
        if want is not None and want is not d:
            return cast(from_numpy(a), want)
        if d is bfloat16:
            a = a.view(np.uint16)  # ml_dtypes' bfloat16: its storage
    if not a.flags.c_contiguous or a.dtype != d.np:
        a = _c_order(a, d)
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


def cast(x, dtype):
    """Convert to dtype (float -> int truncates; -> bool is x != 0)."""
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_cast(x._h, _dtype(dtype).code))


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
