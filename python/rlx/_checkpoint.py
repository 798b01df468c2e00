"""Checkpoints: safetensors, NumPy .npy and .npz files (rlx.h "checkpoints").

    rlx.save_safetensors("model.safetensors", {"w": w, "b": b})
    params = rlx.load_safetensors("model.safetensors")   # {"w": Tensor, ...}
    rlx.save_npz("a.npz", w=w, b=b); rlx.load_npz("a.npz")
    rlx.save_npy("w.npy", w); rlx.load_npy("w.npy")

Loaded tensors read the file's mapping in place where its bytes allow
(zero-copy) and keep it mapped while they live. Values given to the savers
may be Tensors or anything rlx.tensor accepts (NumPy arrays keep their
dtype). Errors raise rlx.RlxError (E_IO for an unreadable or corrupt file).
"""

import ctypes
import os

from ._base import _lib, _clear, _check, _raise
import numpy as np

from ._tensor import Tensor, _tt, _wrap, from_numpy

__all__ = ["save_safetensors", "load_safetensors", "save_npy", "load_npy", "save_npz", "load_npz"]


def _path(path):
    return os.fsencode(os.fspath(path))


def _value(v):
    """A Tensor of exactly v's shape and dtype (NumPy arrays, 0-d too)."""
    return from_numpy(v) if isinstance(v, np.ndarray) and not isinstance(v, Tensor) else _tt(v)


def _named(tensors, kw):
    items = dict(tensors or {})
    items.update(kw)
    names = [str(k) for k in items]
    ts = [_value(v) for v in items.values()]
    carr = (ctypes.c_char_p * max(len(names), 1))(*[n.encode() for n in names])
    harr = (ctypes.c_void_p * max(len(ts), 1))(*[t._h for t in ts])
    return ts, carr, harr, len(ts)


def _save(fn, path, tensors, kw):
    ts, names, handles, n = _named(tensors, kw)  # ts keeps the handles alive
    _clear()
    _check(fn(_path(path), n, names, handles))


def _read(c, where):
    """The tensors of a loaded rlx_checkpoint, in file order; frees it."""
    if not c:
        _raise(where)
    try:
        out = {}
        for i in range(_lib.rlx_checkpoint_count(c)):
            name = _lib.rlx_checkpoint_name(c, i)
            if name is None:
                _raise(where)
            out[name.decode("utf-8", "surrogateescape")] = _wrap(_lib.rlx_checkpoint_get(c, name))
        return out
    finally:
        _lib.rlx_checkpoint_free(c)


def save_safetensors(path, tensors=None, **kw):
    """Write {name: tensor} (a dict and/or keywords) as a safetensors file."""
    _save(_lib.rlx_save_safetensors, path, tensors, kw)


def load_safetensors(path):
    """{name: Tensor} of a safetensors file, in the file's order."""
    _clear()
    return _read(_lib.rlx_load_safetensors(_path(path)), "rlx_load_safetensors")


def save_npz(path, tensors=None, **kw):
    """np.savez's format (uncompressed): {name: tensor} and/or keywords."""
    _save(_lib.rlx_save_npz, path, tensors, kw)


def load_npz(path):
    """{name: Tensor} of an .npz (np.savez or np.savez_compressed)."""
    _clear()
    return _read(_lib.rlx_load_npz(_path(path)), "rlx_load_npz")


def save_npy(path, t):
    """Write one tensor as a .npy file (np.load reads it)."""
    t = _value(t)
    _clear()
    _check(_lib.rlx_save_npy(_path(path), t._h))


def load_npy(path):
    """The tensor of a .npy file (any byte order, C or Fortran order)."""
    _clear()
    return _wrap(_lib.rlx_load_npy(_path(path)))
