"""x[key]: NumPy basic indexing (ints, slices, None, Ellipsis) as views,
one integer array as a gather, a boolean mask as an eager gather."""

import builtins

import numpy as np

from ._base import _lib, _clear, _builtin_bool, _builtin_int
from ._tensor import Tensor, tensor, _wrap, _attach
from ._shape import slice, transpose, reshape, gather


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


class _Indexing:
    """Tensor[key]."""
    def __getitem__(self, key):
        return _getitem(self, key)


_attach(_Indexing)
