"""Reductions: sum, mean, max, min, prod, var, std, norm, arg-reductions,
logsumexp, cumsum, all, any."""

import operator

import numpy as np

from ._base import (_lib, _clear, _axis_arg, _keep_arg, _no_out, _axes, _builtin_bool, _builtin_int,
                    _builtin_float, _builtin_max)
from ._dtypes import bool_
from ._tensor import cast, _wrap, _tt, _apply
from ._elementwise import sqrt
from ._shape import flatten, reshape
from ._create import ones_like


# ------------------------------------------------------------- reductions

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


def _moment(reducer, x, axis, dtype, out, ddof, keepdims, dim, keepdim, correction):
    """(x, axis, ddof, population var/std) from the NumPy/PyTorch arguments."""
    _no_out(out)
    x = _tt(x) if dtype is None else _tt(x).astype(dtype)
    ax = _axis_arg(axis, dim)
    ddof = correction if correction is not None else ddof
    return x, ax, ddof, reducer(x, ax, keepdims=_keep_arg(keepdims, keepdim))


def var(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, dim=None, keepdim=None,
        correction=None):
    """Variance; population (ddof=0, NumPy's default) unless ddof/correction is given."""
    x, ax, ddof, r = _moment(_var, x, axis, dtype, out, ddof, keepdims, dim, keepdim, correction)
    return _ddof_scale(x, r, ax, ddof)


def std(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, dim=None, keepdim=None,
        correction=None):
    """Standard deviation; population (ddof=0) unless ddof/correction is given."""
    x, ax, ddof, r = _moment(_std, x, axis, dtype, out, ddof, keepdims, dim, keepdim, correction)
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
    return _apply(_lib.rlx_sum_all, x)


def mean_all(x):
    return _apply(_lib.rlx_mean_all, x)


def all(x, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None):
    """True where every element is nonzero (min over bools)."""
    _no_out(out)
    return min(cast(_tt(x), bool_), axis, keepdims=keepdims, dim=dim, keepdim=keepdim)


def any(x, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None):
    """True where some element is nonzero (max over bools)."""
    _no_out(out)
    return max(cast(_tt(x), bool_), axis, keepdims=keepdims, dim=dim, keepdim=keepdim)
