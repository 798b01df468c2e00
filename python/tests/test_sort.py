"""sort, argsort, topk and multinomial against NumPy (stable sorts, NaNs,
ties, -0.0, views, every dtype) on both backends."""
import numpy as np
import pytest

import rlx
from conftest import assert_close


@pytest.fixture(params=["ref", "jit"])
def backend(request):
    before = rlx.get_option("backend")
    rlx.set_option("backend", request.param)
    yield request.param
    rlx.set_option("backend", before)


def ref_argsort(a, axis, descending):
    """np.argsort(kind="stable"); descending keeps equal elements in order
    (torch.sort(stable=True, descending=True)): the ascending order of the
    reversed array, reversed, with NaN first."""
    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    n = a.shape[axis]
    return n - 1 - np.flip(np.argsort(np.flip(a, axis), axis=axis, kind="stable"), axis)


def make(g, dtype, shape, ties):
    if dtype == np.bool_:
        return g.integers(0, 2, shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        hi = 3 if ties else 1000
        return g.integers(-hi, hi, shape).astype(dtype)
    a = (g.integers(-3, 3, shape) if ties else g.standard_normal(shape)).astype(dtype)
    special = g.random(shape) < 0.15
    a[special] = g.choice(np.array([np.nan, -0.0, 0.0, np.inf, -np.inf], dtype=dtype), int(special.sum()))
    return a


DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_argsort_match_numpy(backend, dtype, seed):
    g = np.random.default_rng(seed)
    rank = int(g.integers(1, 4))
    shape = tuple(int(n) for n in g.integers(1, 7, rank))
    a = make(g, dtype, shape, ties=seed % 2 == 0)
    x = rlx.tensor(a)
    for axis in range(-rank, rank):
        for desc in (False, True):
            idx = ref_argsort(a, axis, desc)
            assert_close(rlx.argsort(x, axis, descending=desc), idx)
            got = rlx.sort(x, axis, descending=desc).numpy()
            want = np.take_along_axis(a, idx, axis)
            assert got.dtype == a.dtype
            np.testing.assert_array_equal(got, want)
            if a.dtype.kind == "f":  # -0.0 and 0.0 kept in their order
                np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_views_flatten_and_methods(backend):
    g = np.random.default_rng(3)
    a = g.integers(-4, 4, (5, 6)).astype(np.float32)
    x = rlx.tensor(a)
    np.testing.assert_array_equal(rlx.sort(x.T, 1).numpy(), np.sort(a.T, 1, kind="stable"))
    np.testing.assert_array_equal(rlx.argsort(x[::2, ::-1], 0).numpy(), np.argsort(a[::2, ::-1], 0, kind="stable"))
    np.testing.assert_array_equal(rlx.argsort(x, None).numpy(), np.argsort(a, None, kind="stable"))
    np.testing.assert_array_equal(x.sort(dim=0).numpy(), np.sort(a, 0))
    np.testing.assert_array_equal(x.argsort(descending=True).numpy(), ref_argsort(a, -1, True))
    v, i = x.topk(2, dim=0, largest=False)
    np.testing.assert_array_equal(i.numpy(), np.argsort(a, 0, kind="stable")[:2])
    v, i = rlx.topk(x, 3, axis=0)
    np.testing.assert_array_equal(i.numpy(), ref_argsort(a, 0, True)[:3])


def test_nan_and_signed_zero(backend):
    a = np.array([3, 1, np.nan, 2, 1, -0.0, 0.0, np.nan, -np.inf], np.float32)
    x = rlx.tensor(a)
    np.testing.assert_array_equal(rlx.argsort(x).numpy(), [8, 5, 6, 1, 4, 3, 0, 2, 7])
    np.testing.assert_array_equal(rlx.argsort(x, descending=True).numpy(), [2, 7, 0, 3, 1, 4, 5, 6, 8])
    s = rlx.sort(x).numpy()
    np.testing.assert_array_equal(s, np.sort(a, kind="stable"))
    assert np.signbit(s[1]) and not np.signbit(s[2])


def test_rank0_and_empty(backend):
    s = rlx.tensor(np.float64(2.5))
    assert rlx.sort(s).numpy() == 2.5
    assert rlx.argsort(s).numpy() == 0 and rlx.argsort(s).dtype == rlx.int64
    v, i = rlx.topk(s, 1)
    assert v.numpy() == 2.5 and i.numpy() == 0
    e = rlx.zeros((3, 0))
    assert rlx.sort(e, 1).shape == (3, 0)
    assert rlx.argsort(e, 0).numpy().shape == (3, 0)


@pytest.mark.parametrize("seed", range(6))
def test_topk(backend, seed):
    g = np.random.default_rng(seed)
    shape = tuple(int(n) for n in g.integers(1, 8, 3))
    a = make(g, np.float64 if seed % 2 else np.int32, shape, ties=True)
    x = rlx.tensor(a)
    for dim in (0, 1, -1):
        n = a.shape[dim]
        for k in {0, 1, n // 2, n}:
            for largest in (True, False):
                idx = np.take(ref_argsort(a, dim, largest), np.arange(k), axis=dim)
                v, i = rlx.topk(x, k, dim=dim, largest=largest)
                np.testing.assert_array_equal(i.numpy(), idx)
                np.testing.assert_array_equal(v.numpy(), np.take_along_axis(a, idx, dim))
                assert v.dtype == x.dtype and i.dtype == rlx.int64


def test_topk_large_vocabulary(backend):
    logits = np.random.default_rng(0).standard_normal(50257).astype(np.float32)
    v, i = rlx.topk(rlx.tensor(logits), 50)
    want = np.argsort(-logits, kind="stable")[:50]
    np.testing.assert_array_equal(i.numpy(), want)
    np.testing.assert_array_equal(v.numpy(), logits[want])


def test_sort_gradient():
    a = np.array([[0.3, -1.0, 2.0, 0.5], [1.5, 1.0, -2.0, 0.0]])
    x = rlx.tensor(a)
    w = np.arange(1.0, 5.0)
    g = rlx.grad(rlx.sum(rlx.sort(x, 1) * rlx.tensor(w)), x).numpy()
    want = np.zeros_like(a)
    np.put_along_axis(want, np.argsort(a, 1), np.broadcast_to(w, a.shape), 1)
    np.testing.assert_array_equal(g, want)
    v, _ = rlx.topk(x, 2, dim=1)
    g = rlx.grad(rlx.sum(v * rlx.tensor(np.array([10.0, 1.0]))), x).numpy()
    want = np.zeros_like(a)
    np.put_along_axis(want, np.argsort(-a, 1)[:, :2], np.array([[10.0, 1.0]]), 1)
    np.testing.assert_array_equal(g, want)


def test_sort_errors():
    x = rlx.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(rlx.RlxError) as e:
        rlx.topk(x, 4, dim=1)
    assert e.value.status == rlx.E_ARG and "k 4" in str(e.value) and "length 3" in str(e.value)
    with pytest.raises(rlx.RlxError):
        rlx.sort(x, 2)
    with pytest.raises(rlx.RlxError):
        rlx.argsort(x, -3)


# ------------------------------------------------------------ multinomial

def test_multinomial_statistics(backend):
    w = np.array([0.5, 3, 0, 1.5, 5])
    n = 20000
    s = rlx.multinomial(rlx.tensor(w), n, replacement=True, seed=1).numpy()
    assert s.dtype == np.int64 and s.shape == (n,)
    counts = np.bincount(s, minlength=5)
    assert counts[2] == 0
    p = w / w.sum()
    chi2 = sum((counts[k] - n * p[k]) ** 2 / (n * p[k]) for k in range(5) if p[k] > 0)
    assert chi2 < 20, (counts, chi2)
    # without replacement: the first draw follows p, draws are distinct
    s = rlx.multinomial(rlx.tensor(np.broadcast_to(w, (n, 5)).copy()), 3, seed=2).numpy()
    assert s.shape == (n, 3)
    assert (np.sort(s, 1)[:, 1:] != np.sort(s, 1)[:, :-1]).all() and not (s == 2).any()
    first = np.bincount(s[:, 0], minlength=5)
    assert np.all(np.abs(first - n * p) <= 5 * np.sqrt(n * p * (1 - p)) + 1), first


def test_multinomial_deterministic():
    w = rlx.tensor(np.array([[1.0, 2.0, 0.0, 4.0], [0.0, 0.0, 3.0, 0.0]], np.float32))
    got = []
    for b in ("ref", "jit"):
        before = rlx.get_option("backend")
        rlx.set_option("backend", b)
        try:
            got.append(rlx.multinomial(w, 7, replacement=True, seed=42).numpy())
            got.append(rlx.multinomial(w, 1, seed=42).numpy())
        finally:
            rlx.set_option("backend", before)
    np.testing.assert_array_equal(got[0], got[2])
    np.testing.assert_array_equal(got[1], got[3])
    assert (got[0][1] == 2).all() and not (got[0][0] == 2).any()


@pytest.mark.parametrize("weights, n, repl", [
    ([1.0, -1.0], 1, True),
    ([1.0, np.nan], 1, True),
    ([0.0, 0.0], 1, True),
    ([0.0, 1.0, 0.0], 2, False),
])
def test_multinomial_bad_weights_raise_when_realized(backend, weights, n, repl):
    m = rlx.multinomial(rlx.tensor(np.array(weights)), n, replacement=repl)
    with pytest.raises(rlx.RlxError) as e:
        m.numpy()
    assert e.value.status == rlx.E_ARG and "multinomial" in str(e.value)


def test_multinomial_errors():
    with pytest.raises(rlx.RlxError) as e:
        rlx.multinomial(rlx.tensor(np.ones(3)), 4)
    assert e.value.status == rlx.E_ARG
    with pytest.raises(rlx.RlxError) as e:
        rlx.multinomial(rlx.tensor(np.ones((2, 2, 2))), 1)
    assert e.value.status == rlx.E_SHAPE


def test_compiled_program_runs_new_inputs():
    x = rlx.input("x", (3, 50))
    _, i = rlx.topk(x, 4)
    p = rlx.compile([rlx.sort(x, 1, descending=True), i, rlx.multinomial(rlx.exp(x), 2, seed=1)])
    for s in range(2):
        a = np.random.default_rng(s).standard_normal((3, 50)).astype(np.float32)
        srt, idx, m = p.run(x=a)
        np.testing.assert_array_equal(srt.numpy(), -np.sort(-a, 1))
        np.testing.assert_array_equal(idx.numpy(), ref_argsort(a, 1, True)[:, :4])
        assert m.numpy().shape == (3, 2) and (m.numpy()[:, 0] != m.numpy()[:, 1]).all()
