"""Movement and layout: reshape, transposes, broadcasting, squeezing,
slicing and splitting (views), and copies along axes (cat, stack, tile,
flip, roll, pad, gather)."""

import operator

import numpy as np

from ._base import (_lib, _c_int, _clear, _check, _i64s, _axis_arg, _no_out, _clip64, _pieces, _builtin_int,
                    _builtin_float, _builtin_max, END, RlxError, Status)
from ._dtypes import _py_scalar
from ._create import _symbol_id
from ._tensor import Tensor, tensor, _wrap, _tt, _apply, _shape_arg, _handles, _attach


# --------------------------------------------------------------- movement

def _reshape_dims(shape):
    """reshape's dims: ints (one may be -1) or strings naming symbols as
    rlx.input does (the dim is the size bound to that symbol)."""
    if len(shape) == 1 and not isinstance(shape[0], (_builtin_int, np.integer, str)):
        shape = shape[0].tolist() if isinstance(shape[0], Tensor) else shape[0]
    dims = []
    for d in shape:
        if isinstance(d, str):
            if not d:
                raise ValueError("rlx.reshape: a symbol name must not be empty")
            dims.append(_symbol_id(d))
            continue
        d = operator.index(d)
        if d <= -2:
            raise ValueError("rlx.reshape: dim %d: use -1 for an inferred dim, a string for a symbol" % d)
        dims.append(d)
    return dims


def reshape(x, *shape, order="C"):
    """View with a new shape; one dim may be -1 (row-major order only). Over
    dynamic dims a string names a symbol of rlx.input: that dim is the size
    bound to it, e.g. y.reshape("B", "S", 64) after x.reshape(-1, 64)."""
    if order != "C":
        raise ValueError("rlx.reshape: only order='C' is supported")
    x = _tt(x)
    shp, n = _i64s(_reshape_dims(shape))
    _clear()
    try:
        return _wrap(_lib.rlx_reshape(x._h, n, shp))
    except RlxError as e:
        from ._program import _named_symbols  # (imports this module's peers)
        raise _named_symbols(e) from None


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
    if any(d < 0 for d in shape[s:e + 1]):
        n = -1  # a dynamic dim merged: its size comes from the count when bound
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
        if length < 0:  # the count of pieces would depend on the bound size
            raise RlxError(Status.E_UNSUPPORTED, "split: pieces of size %d of dynamic axis %d: their count depends on "
                           "the bound size; give the sizes with one -1 (the rest), or use chunk" % (s, ax))
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


# NumPy's pad mode names, PyTorch's F.pad names as aliases
_PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2, "replicate": 2}


def pad(x, pad_width, constant_values=0, axis=None, *, value=None, mode="constant"):
    """NumPy np.pad: pad_width an int, a (before, after) pair for every
    axis, or one pair per axis. With axis=, pad_width is the (before, after)
    of that axis only (rlx_pad / rlx_pad_mode). mode: "constant" (with
    constant_values or value), "reflect" (mirror without repeating the
    edge; PyTorch's rule: each pad must be shorter than its axis, where
    NumPy would reflect again), "edge" (repeat the edge element; PyTorch's
    "replicate" is accepted as an alias). As in np.pad, the mode may also
    be the third positional argument: rlx.pad(x, 2, "reflect")."""
    x = _tt(x)
    if isinstance(constant_values, str):  # np.pad(x, w, "reflect")
        mode, constant_values = constant_values, 0
    if mode not in _PAD_MODES:
        raise ValueError("pad: unknown mode %r (one of %s)" % (mode, ", ".join(_PAD_MODES)))
    m = _PAD_MODES[mode]
    v = _builtin_float(_py_scalar(constant_values if value is None else value))

    def one(t, ax_, b, a):
        _clear()
        if m == 0:
            return _wrap(_lib.rlx_pad(t._h, ax_, b, a, v))
        return _wrap(_lib.rlx_pad_mode(t._h, ax_, b, a, m))

    if axis is not None:
        b, a = (pad_width, pad_width) if isinstance(pad_width, (_builtin_int, np.integer)) else pad_width
        return one(x, operator.index(axis), operator.index(b), operator.index(a))
    r = x.ndim
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (r, 2)) if r else np.zeros((0, 2), np.int64)
    for ax_ in range(r):
        b, a = (_builtin_int(pw[ax_, 0]), _builtin_int(pw[ax_, 1]))
        if b or a:
            x = one(x, ax_, b, a)
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


def _scatter_args(x, axis, dim, index, src):
    x = _tt(x)
    ax = operator.index(_axis_arg(axis, dim))
    idx = _index_tensor(index)
    src = src if isinstance(src, Tensor) else tensor(np.asarray(src), dtype=x.dtype)
    return x, ax, idx, src


def scatter_add(x, axis=None, index=None, src=None, *, dim=None):
    """PyTorch scatter_add(x, dim, index, src): x with src[p] added at x[p with
    axis coordinate index[p]] for every position p of index (np.add.at
    semantics: duplicates add up, in index order). index, src and x share one
    rank; index fits in src, and in x off the axis; negative indices count
    from the end; out of range raises at realization."""
    x, ax, idx, src = _scatter_args(x, axis, dim, index, src)
    _clear()
    return _wrap(_lib.rlx_scatter_add(x._h, ax, idx._h, src._h))


def scatter(x, axis=None, index=None, src=None, *, dim=None):
    """PyTorch scatter(x, dim, index, src) (overwrite), arguments as
    scatter_add; of duplicate targets the last in index order wins."""
    x, ax, idx, src = _scatter_args(x, axis, dim, index, src)
    _clear()
    return _wrap(_lib.rlx_scatter(x._h, ax, idx._h, src._h))


def index_add(x, axis=None, index=None, src=None, *, dim=None):
    """PyTorch index_add(x, dim, index, src): 1-D index [n], src x's shape with
    axis of length n; slice j of src is added at x's slice index[j], as
    np.add.at(x, (slice(None),) * axis + (index,), src)."""
    x, ax, idx, src = _scatter_args(x, axis, dim, index, src)
    _clear()
    return _wrap(_lib.rlx_index_add(x._h, ax, idx._h, src._h))


def contiguous(x):
    """Same values; realized into its own contiguous buffer."""
    return _apply(_lib.rlx_contiguous, x)


def stop_gradient(x):
    return _apply(_lib.rlx_stop_gradient, x)


detach = stop_gradient


class _Views:
    """Tensor.T and Tensor.mT."""
    @property
    def T(self):
        """All axes reversed (NumPy)."""
        return transpose(self)

    @property
    def mT(self):
        """The last two axes swapped (rlx_t)."""
        return t(self)


_attach(_Views)
