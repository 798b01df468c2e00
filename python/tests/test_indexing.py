"""Indexing and slicing against NumPy on a few hundred random expressions."""
import numpy as np
import pytest

import rlx
from conftest import assert_close


def random_slice(rng):
    def bound():
        r = rng.random()
        if r < 0.3:
            return None
        return int(rng.integers(-8, 9))
    step = [None, 1, 2, 3, -1, -2, -3][rng.integers(0, 7)]
    return slice(bound(), bound(), step)


def random_index(rng, shape):
    """A random NumPy basic index (plus, sometimes, one integer array)."""
    nd = len(shape)
    items = []
    use_ellipsis = rng.random() < 0.3
    use_array = rng.random() < 0.25 and nd > 0
    n_consume = int(rng.integers(0, nd + 1))
    array_at = int(rng.integers(0, n_consume)) if use_array and n_consume else -1
    # with an Ellipsis, the items before it index the leading axes and the
    # items after it the trailing ones
    split = int(rng.integers(0, n_consume + 1)) if use_ellipsis else n_consume
    axes = list(range(split)) + list(range(nd - (n_consume - split), nd))
    for i, axis in enumerate(axes):
        dim = shape[axis]
        r = rng.random()
        if i == array_at:
            k = rng.integers(-dim, dim, size=int(rng.integers(1, 4)))
            items.append(k.tolist() if rng.random() < 0.5 else k.reshape(-1, 1) if k.size > 1 else k)
        elif r < 0.35:
            items.append(int(rng.integers(-dim, dim)))
        else:
            items.append(random_slice(rng))
    if use_ellipsis:
        items.insert(split, Ellipsis)
    for _ in range(int(rng.integers(0, 3))):
        items.insert(int(rng.integers(0, len(items) + 1)), None)
    if len(items) == 1 and rng.random() < 0.5:
        return items[0]
    return tuple(items)


@pytest.mark.parametrize("seed", range(8))
def test_random_index_expressions(seed):
    rng = np.random.default_rng(1000 + seed)
    for _ in range(50):                                   # 400 expressions in all
        nd = int(rng.integers(0, 5))
        shape = tuple(int(d) for d in rng.integers(1, 6, size=nd))
        a = rng.standard_normal(shape).astype(np.float32)
        x = rlx.from_numpy(a)
        idx = random_index(rng, shape)
        want = a[idx]
        got = x[idx]
        basic = not any(isinstance(i, (list, np.ndarray)) for i in (idx if isinstance(idx, tuple) else (idx,)))
        if basic and want.size:
            assert got.shares_storage(x), (shape, idx)          # a view, before realization
        assert got.shape == want.shape, (shape, idx, got.shape, want.shape)
        np.testing.assert_array_equal(got.numpy(), want, err_msg="shape %s index %r" % (shape, idx))


def test_examples_from_the_issue():
    a = np.arange(4 * 5 * 3, dtype=np.float64).reshape(4, 5, 3)
    x = rlx.from_numpy(a)
    assert_close(x[1:, ::2, None, -1], a[1:, ::2, None, -1])
    assert_close(x[..., 0], a[..., 0])
    assert_close(x[::-1, -2::-2], a[::-1, -2::-2])
    assert_close(x[None], a[None])
    assert_close(x[...], a[...])
    assert_close(x[10:], a[10:])
    assert_close(x[-100:100:3], a[-100:100:3])
    assert_close(x[:, 2**70:], a[:, 4:][:, :0])
    assert_close(x[np.int64(1), np.int32(-1)], a[1, -1])
    assert_close(x[rlx.tensor(2)], a[2])
    s = rlx.tensor(7.5)
    assert s[()].item() == 7.5 and s[None].shape == (1,) and s[...].shape == ()


def test_advanced_indices():
    a = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    x = rlx.tensor(a)
    assert_close(x[[2, 0, -1]], a[[2, 0, -1]])
    assert_close(x[:, [1, 3]], a[:, [1, 3]])
    assert_close(x[1, [1, 3]], a[1, [1, 3]])
    assert_close(x[1, :, [0, 4]], a[1, :, [0, 4]])                    # separated: advanced dims first
    assert_close(x[:, np.array([[0], [2]]), 1:3], a[:, np.array([[0], [2]]), 1:3])
    assert_close(x[..., rlx.tensor([4, 0])], a[..., [4, 0]])
    assert_close(x[0, None, [1, 2]], a[0, None, [1, 2]])               # None separates: advanced first
    assert_close(x[0, ..., [1, 2]], a[0, ..., [1, 2]])
    assert_close(x[:, 0, ..., np.array([[1], [2]])], a[:, 0, ..., np.array([[1], [2]])])  # empty Ellipsis too
    assert_close(x[None, 0, [1, 2]], a[None, 0, [1, 2]])               # adjacent: in place
    assert_close(x[a[:, 0, 0] > 10], a[a[:, 0, 0] > 10])             # boolean masks
    assert_close(x[rlx.tensor(a % 7 == 0)], a[a % 7 == 0])
    assert_close(x[[True, False, True]], a[[True, False, True]])
    assert_close(x[rlx.tensor(a[:, :, 0] > 20)], a[a[:, :, 0] > 20])


def test_index_errors():
    x = rlx.zeros(3, 4)
    for bad in (3, -4, (0, 4), (slice(None), -5)):
        with pytest.raises(IndexError):
            x[bad]
    with pytest.raises(IndexError):
        x[0, 0, 0]
    with pytest.raises(IndexError):
        x[..., ...]
    with pytest.raises(IndexError):
        x[[0, 3]]
    with pytest.raises(IndexError):
        x[[0], [1]]
    with pytest.raises(IndexError):
        x["a"]
    with pytest.raises(IndexError):
        x[np.ones((2, 2), bool)]
    with pytest.raises(ValueError):
        x[::0]
    g = x[rlx.tensor([5])]                # a lazy tensor index is checked at realization
    with pytest.raises(rlx.RlxError) as e:
        g.numpy()
    assert e.value.status == rlx.Status.E_ARG


def test_iteration_and_len():
    a = np.arange(6).reshape(3, 2)
    x = rlx.tensor(a)
    assert len(x) == 3
    assert [r.tolist() for r in x] == a.tolist()
    assert list(rlx.tensor([1, 2, 3])) == [1, 2, 3] or [int(v) for v in rlx.tensor([1, 2, 3])] == [1, 2, 3]
