"""Realizing several tensors at once, compiled programs and gradients."""

import ctypes as _ctypes
import re as _re

from ._base import _lib, _c_void_p, _clear, _check, _raise, _pieces, _builtin_max, RlxError
from ._create import symbol_name
from ._tensor import Tensor, tensor, _wrap, _tt, _handles, _BLOB_DELETER
from . import _ffi


# ------------------------------------------------------------ realization

def realize(*tensors):
    """Realize tensors in one schedule (shared work once); returns them."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    ts, arr = _handles(tensors)
    _clear()
    _check(_lib.rlx_realize_many(arr, len(ts)))
    return ts[0] if len(ts) == 1 else ts


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
            try:
                _raise("rlx_compile")
            except RlxError as e:
                raise _named_symbols(e) from None
        self._p = p

    def _bindings(self, bindings, kw):
        if self._p is None:
            raise ValueError("rlx.Program: the program was closed")
        b = dict(bindings or {})
        b.update(kw)
        return [(str(name).encode(), value if isinstance(value, Tensor) else tensor(value))
                for name, value in b.items()]

    def _invoke(self, fn, names, handles):
        """fn (rlx_program_run or _donate) over the named handles; the outputs."""
        arr = (_ffi.Binding * _builtin_max(len(names), 1))()
        for i, (nm, h) in enumerate(zip(names, handles)):
            arr[i].name = nm
            arr[i].value = h
        out = (_c_void_p * self._n)()
        _clear()
        try:
            _check(fn(self._p, arr, len(names), out))
        except RlxError as e:
            raise _named_symbols(e) from None
        res = [_wrap(out[i]) for i in range(self._n)]
        return res[0] if self._single else res

    def run(self, bindings=None, **kw):
        b = self._bindings(bindings, kw)  # (holds the converted Tensors while the run reads them)
        return self._invoke(_lib.rlx_program_run, [nm for nm, _ in b], [v._h for _, v in b])

    __call__ = run

    def run_donate(self, bindings=None, **kw):
        """As run, donating every bound value (rlx_program_run_donate): the
        Tensors passed are closed (their handles go to the run), and an
        output computed elementwise from an input nothing else refers to is
        written over that input's buffer (a training step's parameters and
        optimizer state updated without a second copy). A Tensor other
        Tensors or graphs still refer to is only read."""
        b = self._bindings(bindings, kw)
        handles, taken = [], {}
        try:
            for nm, v in b:
                if v._h is None:
                    if id(v) not in taken:
                        raise ValueError("rlx.Program.run_donate: binding %r is a closed Tensor" % nm.decode())
                    h = _lib.rlx_retain(taken[id(v)])  # bound again: a reference per binding
                else:
                    h, v._h = v._h, None
                    taken[id(v)] = h
                handles.append(h)
        except BaseException:
            for h in handles:
                _lib.rlx_release(h)
            raise
        return self._invoke(_lib.rlx_program_run_donate, [nm for nm, _ in b], handles)

    def specs(self):
        """(kept, prepared): the specializations kept now (at most 8, the
        most recently used) and how many were prepared since compiling."""
        kept, made = _ctypes.c_int(0), _ctypes.c_int64(0)
        _clear()
        _check(_lib.rlx_program_specs(self._p, _ctypes.byref(kept), _ctypes.byref(made)))
        return kept.value, made.value

    def reuses(self):
        """How many of the prepared specializations were made from a kept
        one's plan (rlx_program_reuses)."""
        reused = _ctypes.c_int64(0)
        _clear()
        _check(_lib.rlx_program_reuses(self._p, _ctypes.byref(reused)))
        return reused.value

    def arenas(self):
        """(count, bytes): the arenas the program holds between runs, one per
        run in flight at once, each grown to the largest plan it served
        (rlx_program_arenas)."""
        count, nbytes = _ctypes.c_int(0), _ctypes.c_int64(0)
        _clear()
        _check(_lib.rlx_program_arenas(self._p, _ctypes.byref(count), _ctypes.byref(nbytes)))
        return count.value, nbytes.value

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


def _named_symbols(e):
    """e with each "symbol -N" of its message named as rlx.input named it."""
    def name(m):
        n = symbol_name(int(m.group(1)))
        return "symbol '%s'" % n if n is not None else m.group(0)
    msg = _re.sub(r"symbol (-\d+)", name, e.message)
    return e if msg == e.message else RlxError(e.status, msg)


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
