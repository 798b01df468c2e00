"""Sorting and sampling: sort, argsort, topk, multinomial (rlx_sort,
rlx_argsort, rlx_topk, rlx_multinomial). Sorts are stable in both
directions; NaN sorts as the largest value (NumPy, PyTorch)."""

import operator

from ._base import _lib, _clear, _check, _axis_arg, _pieces, _builtin_bool
from ._tensor import _wrap, _tt
from ._shape import flatten


def _line(x, axis, dim):
    """x and the axis to sort along (None: x flattened, as NumPy)."""
    x = _tt(x)
    ax = _axis_arg(axis, dim, -1) if dim is not None else axis
    if ax is None:
        return flatten(x), 0
    return x, operator.index(ax)


def sort(x, axis=-1, descending=False, *, dim=None, stable=True):
    """Values sorted along axis (None: flattened), stable; NaN last when
    ascending, first when descending. Differentiable. Returns the values
    only (np.sort); torch.sort's indices are argsort's. stable=False is
    accepted and still stable."""
    x, ax = _line(x, axis, dim)
    _clear()
    return _wrap(_lib.rlx_sort(x._h, ax, _builtin_bool(descending)))


def argsort(x, axis=-1, descending=False, *, dim=None, stable=True):
    """int64 positions that stably sort x along axis (None: flattened), as
    np.argsort(kind="stable") and torch.argsort(stable=True)."""
    x, ax = _line(x, axis, dim)
    _clear()
    return _wrap(_lib.rlx_argsort(x._h, ax, _builtin_bool(descending)))


def topk(x, k, dim=-1, largest=True, sorted=True, *, axis=None):
    """torch.topk: (values, int64 indices) of the k largest (smallest) along
    dim (axis= is NumPy's spelling), in that order; ties go to the lower
    index, NaN counts as the largest. sorted=False is accepted (the result
    is sorted anyway). Values are differentiable."""
    x = _tt(x)
    ax = operator.index(dim if axis is None else axis)
    vals, idx = _pieces(1), _pieces(1)
    _clear()
    _check(_lib.rlx_topk(x._h, operator.index(k), ax, _builtin_bool(largest), vals, idx))
    return _wrap(vals[0]), _wrap(idx[0])


def multinomial(probs, num_samples, replacement=False, seed=0):
    """torch.multinomial: int64 category indices [num_samples] (or [B,
    num_samples]) drawn from rows of non-negative weights; deterministic per
    seed. Bad weights raise when the result is realized."""
    p = _tt(probs)
    _clear()
    return _wrap(_lib.rlx_multinomial(p._h, operator.index(num_samples), _builtin_bool(replacement),
                                      operator.index(seed) & (2**64 - 1)))
