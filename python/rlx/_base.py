"""What every module of the binding shares: the library handle, the error
state (RlxError, Status), the enums and constants from rlx.h, and argument
helpers that need no Tensor.

Conventions (see the package docstring for the full list):
  * every call clears the thread's librlx error first; a NULL handle or a
    non-OK status raises RlxError carrying rlx_last_error();
  * axis arguments accept ``axis=`` (NumPy) or ``dim=`` (PyTorch), and
    ``keepdims=`` or ``keepdim=``.
"""

import builtins
import ctypes
import enum
import operator

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


def _int_enum(cname, pyname, prefix):
    members = {k[len(prefix):]: v for k, v in _ffi.ENUMS[cname].items()}
    return enum.IntEnum(pyname, members, module=__name__.rsplit(".", 1)[0])


Status = _int_enum("rlx_status", "Status", "RLX_")
Act = _int_enum("rlx_act", "Act", "RLX_ACT_")
Mask = _int_enum("rlx_mask", "Mask", "RLX_MASK_")
Minifloat = _int_enum("rlx_minifloat", "Minifloat", "RLX_")
Padding = _int_enum("rlx_padding", "Padding", "RLX_PAD_")


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


# -------------------------------------------------------------- arguments

def _i64s(seq):
    seq = [operator.index(s) for s in seq]
    return (_c_int64 * _builtin_max(len(seq), 1))(*seq), len(seq)


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


def _axes(axis):
    if axis is None:
        return None, 0
    if isinstance(axis, (_builtin_int, np.integer)):
        axis = (axis,)
    axis = tuple(operator.index(a) for a in axis)
    return (_c_int * _builtin_max(len(axis), 1))(*axis), len(axis)


def _clip64(v):
    return _builtin_max(-END, _builtin_min(END, operator.index(v)))


def _pieces(n):
    return (_c_void_p * _builtin_max(n, 1))()


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
