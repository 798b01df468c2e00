"""scatter_add, scatter and index_add against np.add.at and explicit loops."""
import numpy as np
import pytest

import rlx
from conftest import assert_close


def ref_scatter(base, axis, index, src, add):
    """PyTorch's rule as a loop in index order (last wins when not add)."""
    out = base.astype(np.float64).copy()
    for p in np.ndindex(*index.shape):
        t = list(p)
        t[axis] = index[p]
        out[tuple(t)] = out[tuple(t)] + src[p] if add else src[p]
    return out


@pytest.mark.parametrize("seed", range(12))
def test_scatter_random(seed):
    g = np.random.default_rng(seed)
    rank = int(g.integers(1, 4))
    shape = tuple(int(n) for n in g.integers(1, 5, rank))
    axis = int(g.integers(0, rank))
    ishape = tuple(int(g.integers(0, 7)) if d == axis else int(g.integers(0, shape[d] + 1)) for d in range(rank))
    sshape = tuple(n + int(g.integers(0, 2)) for n in ishape)
    base = g.standard_normal(shape)
    src = g.standard_normal(sshape)
    index = g.integers(-shape[axis], shape[axis], ishape)
    for add, fn in ((True, rlx.scatter_add), (False, rlx.scatter)):
        want = ref_scatter(base, axis, index, src, add)
        assert_close(fn(rlx.tensor(base), axis, rlx.tensor(index), rlx.tensor(src)), want, rtol=1e-12, atol=1e-12)
    # index_add against np.add.at
    n = int(g.integers(0, 6))
    idx1 = g.integers(-shape[axis], shape[axis], n)
    s = list(shape)
    s[axis] = n
    src1 = g.standard_normal(s)
    want = base.copy()
    np.add.at(want, (slice(None),) * axis + (idx1,), src1)
    got = rlx.tensor(base).index_add(axis, rlx.tensor(idx1), rlx.tensor(src1))
    assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_scatter_fixed_and_methods():
    x = rlx.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    idx = [[2, 0], [1, 1]]
    src = rlx.tensor(np.array([[10, 20], [30, 40]], np.float32))
    assert_close(x.scatter_add(1, idx, src), [[20, 1, 12], [3, 74, 5]])
    assert_close(rlx.scatter(x, dim=1, index=idx, src=src), [[20, 1, 10], [3, 40, 5]])
    assert_close(rlx.index_add(x, 0, [1, 1], np.ones((2, 3), np.float32)), [[0, 1, 2], [5, 6, 7]])
    # a non-contiguous base and src
    b = rlx.tensor(np.arange(12.0).reshape(3, 4)).T        # [4, 3]
    s = rlx.tensor(np.arange(8.0).reshape(2, 4))[:, ::-1]  # [2, 4] reversed
    want = np.arange(12.0).reshape(3, 4).T.copy()
    np.add.at(want, ([0, 3, 3], slice(None)), np.array([[2, 1, 0], [6, 5, 4], [1, 1, 1]], float))
    got = rlx.index_add(b, 0, [0, 3, 3], rlx.cat([s[:, 1:], rlx.ones((1, 3), dtype=rlx.float64)], axis=0))
    assert_close(got, want)


def test_scatter_grad_matches_loop():
    base = rlx.tensor(np.ones((3, 2)))
    src = rlx.tensor(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    w = rlx.tensor(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    idx = [[0, 2], [0, 2], [1, 1]]
    gb, gs = rlx.grad(rlx.sum(rlx.scatter(base, 0, idx, src) * w), [base, src])
    assert_close(gb, [[0, 2], [0, 0], [5, 0]])          # overwritten places get 0
    assert_close(gs, [[0, 0], [1, 6], [3, 4]])          # the last writer of each place
    gb, gs = rlx.grad(rlx.sum(rlx.scatter_add(base, 0, idx, src) * w), [base, src])
    assert_close(gb, w.numpy())
    assert_close(gs, [[1, 6], [1, 6], [3, 4]])


def test_scatter_errors():
    x = rlx.zeros((2, 3))
    with pytest.raises(Exception, match="rlx_scatter_add"):
        rlx.scatter_add(x, 0, [0, 1], np.ones(2))          # rank differs
    with pytest.raises(Exception, match="rlx_index_add"):
        rlx.index_add(x, 1, [0, 1], np.ones((2, 3)))      # src axis length differs
    with pytest.raises(TypeError):
        rlx.scatter(x, 0, [[0.5]], np.ones((1, 1)))
    with pytest.raises(Exception, match="out of range"):
        rlx.scatter_add(x, 0, [[2]], np.ones((1, 1))).realize()


@pytest.mark.parametrize("seed", range(8))
def test_index_add_f32_rows(seed):
    """f32 index_add along a leading axis: the index is the same along each
    target row (the embedding-gradient form scatter runs as a vector loop),
    duplicates and negative indices, a contiguous, broadcast or strided base
    and a strided src; each element is the f64 sum in index order rounded
    once, so it matches np.add.at in f64 rounded to f32 exactly."""
    g = np.random.default_rng(100 + seed)
    rows, cols, n = (int(v) for v in g.integers(1, 9, 3))
    cols += 16 * int(g.integers(0, 3))  # beyond one vector
    idx = g.integers(-rows, rows, n)
    src = g.standard_normal((n, cols)).astype(np.float32)
    for kind in ("contiguous", "broadcast", "strided"):
        if kind == "contiguous":
            base_np = g.standard_normal((rows, cols)).astype(np.float32)
            base = rlx.tensor(base_np)
        elif kind == "broadcast":
            base_np = np.full((rows, cols), 0.25, np.float32)
            base = rlx.broadcast_to(rlx.tensor(np.float32(0.25)), (rows, cols))
        else:
            full = g.standard_normal((cols, rows)).astype(np.float32)
            base_np = full.T.copy()
            base = rlx.tensor(full).T
        want = base_np.astype(np.float64)
        np.add.at(want, idx, src.astype(np.float64))
        s = rlx.tensor(src[:, ::-1].copy())[:, ::-1] if seed % 2 else rlx.tensor(src)
        got = rlx.index_add(base, 0, rlx.tensor(idx), s)
        assert got.dtype == rlx.float32
        np.testing.assert_array_equal(got.numpy(), want.astype(np.float32))
