"""batch_norm, group_norm, instance_norm, dropout and the pad modes against
NumPy, on both backends, plus their argument errors."""
import numpy as np
import pytest

import rlx
from conftest import assert_close


@pytest.fixture(params=["jit", "ref"])
def backend(request):
    before = rlx.get_option("backend")
    rlx.set_option("backend", request.param)
    yield request.param
    rlx.set_option("backend", before)


def np_batch_norm(x, rm, rv, w, b, training, momentum, eps):
    axes = tuple(i for i in range(x.ndim) if i != 1)
    bshape = [1] * x.ndim
    bshape[1] = x.shape[1]
    if training:
        mean, var = x.mean(axes), x.var(axes)
        n = x.size // x.shape[1]
        nm = (1 - momentum) * rm + momentum * mean
        nv = (1 - momentum) * rv + momentum * x.var(axes) * n / (n - 1)
    else:
        mean, var, nm, nv = rm, rv, rm, rv
    y = (x - mean.reshape(bshape)) / np.sqrt(var.reshape(bshape) + eps)
    if w is not None:
        y = y * w.reshape(bshape)
    if b is not None:
        y = y + b.reshape(bshape)
    return y, nm, nv


def np_group_norm(x, g, w, b, eps):
    n, c = x.shape[:2]
    xr = x.reshape(n, g, -1)
    y = ((xr - xr.mean(-1, keepdims=True)) / np.sqrt(xr.var(-1, keepdims=True) + eps)).reshape(x.shape)
    bshape = [1] * x.ndim
    bshape[1] = c
    if w is not None:
        y = y * w.reshape(bshape)
    if b is not None:
        y = y + b.reshape(bshape)
    return y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 2, 3, 4)])
@pytest.mark.parametrize("training", [False, True])
def test_batch_norm(backend, dtype, shape, training, rng):
    x = rng.standard_normal(shape).astype(dtype)
    c = shape[1]
    rm, rv = rng.standard_normal(c).astype(dtype), rng.uniform(0.5, 2, c).astype(dtype)
    w, b = rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype)
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else {}
    for affine in (False, True):
        ww, bb = (w, b) if affine else (None, None)
        y, nm, nv = np_batch_norm(x.astype(np.float64), rm, rv, ww, bb, training, 0.2, 1e-3)
        got = rlx.batch_norm(x, rm, rv, ww, bb, training=training, momentum=0.2, eps=1e-3)
        assert_close(got, y, dtype=rlx.tensor(x).dtype, **tol)
        got, gm, gv = rlx.batch_norm(x, rm, rv, ww, bb, training, 0.2, 1e-3, return_stats=True)
        assert_close(got, y, **tol)
        assert_close(gm, nm, **tol)
        assert_close(gv, nv, **tol)
    # a non-contiguous view of x (channels stay on axis 1)
    perm = (1, 0) if x.ndim == 2 else (0, 1) + tuple(range(x.ndim - 1, 1, -1))
    xt = rlx.tensor(np.ascontiguousarray(x.transpose(perm))).transpose(perm)
    y, _, _ = np_batch_norm(x.astype(np.float64), rm, rv, w, b, training, 0.1, 1e-5)
    assert_close(rlx.batch_norm(xt, rm, rv, w, b, training=training), y, **tol)
    assert_close(xt.batch_norm(rm, rv, w, b, training=training), y, **tol)


def test_batch_norm_integers_and_errors():
    x = np.array([[1, 2], [3, 6]], np.int32)
    assert_close(rlx.batch_norm(x, None, None, training=True, eps=0), [[-1, -1], [1, 1]], dtype=rlx.float32)
    y, m, v = rlx.batch_norm(x, np.zeros(2), np.ones(2), training=True, momentum=0.1, eps=0, return_stats=True)
    # f64 running statistics blended with the batch's f32 ones (integer x computes in f32)
    assert_close(m, [0.2, 0.4], dtype=rlx.float64, rtol=1e-6)
    assert_close(v, [1.1, 1.7], dtype=rlx.float64, rtol=1e-6)
    with pytest.raises(rlx.RlxError, match="more than 1 value per channel"):
        rlx.batch_norm(np.ones((1, 3)), np.zeros(3), np.ones(3), training=True)
    with pytest.raises(rlx.RlxError, match=r"rlx_batch_norm.*\[2\]"):
        rlx.batch_norm(np.ones((4, 3)), np.zeros(2), np.ones(2))
    with pytest.raises(rlx.RlxError, match="rlx_batch_norm"):
        rlx.batch_norm(np.ones(3), np.zeros(3), np.ones(3))
    with pytest.raises(rlx.RlxError, match="eps"):
        rlx.batch_norm(np.ones((2, 3)), np.zeros(3), np.ones(3), eps=-1)
    with pytest.raises(rlx.RlxError, match="running_mean"):
        rlx.batch_norm(np.ones((2, 3)), None, None)
    with pytest.raises(rlx.RlxError, match="running_mean"):
        rlx.batch_norm(np.ones((2, 3)), None, None, training=True, return_stats=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,groups", [((2, 4), 2), ((2, 6, 5), 3), ((1, 4, 3, 2), 1), ((3, 4, 2, 2), 4)])
def test_group_norm(backend, dtype, shape, groups, rng):
    x = rng.standard_normal(shape).astype(dtype)
    c = shape[1]
    w, b = rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype)
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else {}
    x64 = x.astype(np.float64)
    assert_close(rlx.group_norm(x, groups), np_group_norm(x64, groups, None, None, 1e-5), **tol)
    assert_close(rlx.group_norm(x, groups, w, b, eps=1e-3), np_group_norm(x64, groups, w, b, 1e-3), **tol)
    assert_close(rlx.tensor(x).group_norm(groups, weight=w), np_group_norm(x64, groups, w, None, 1e-5), **tol)
    assert_close(rlx.instance_norm(x, w, b), np_group_norm(x64, c, w, b, 1e-5), **tol)
    # a view: [N, *, C] moved to [N, C, *]
    xt = rlx.tensor(np.moveaxis(x, 1, -1).copy()).moveaxis(-1, 1)
    assert_close(rlx.group_norm(xt, groups, w, b), np_group_norm(x64, groups, w, b, 1e-5), **tol)


def test_group_norm_errors():
    with pytest.raises(rlx.RlxError, match="num_groups 3 must be >= 1 and divide"):
        rlx.group_norm(np.ones((2, 4)), 3)
    with pytest.raises(rlx.RlxError, match="rlx_group_norm"):
        rlx.group_norm(np.ones((2, 4)), 2, weight=np.ones(3))
    with pytest.raises(rlx.RlxError, match="rlx_group_norm"):
        rlx.group_norm(np.ones(4), 1)
    assert rlx.group_norm(np.array([[1, 3], [2, 6]], np.int32), 1).dtype == rlx.float32


def test_dropout(backend):
    x = np.ones((400, 500), np.float32)
    for p in (0.1, 0.5, 0.8):
        d = rlx.dropout(x, p, seed=3).numpy()
        kept = d != 0
        assert abs(kept.mean() - (1 - p)) < 5 * np.sqrt(p * (1 - p) / x.size)
        np.testing.assert_allclose(d[kept], 1 / (1 - p), rtol=1e-6)
        assert np.array_equal(rlx.dropout(x, p, seed=3).numpy(), d)  # reproducible per seed
        assert not np.array_equal(rlx.dropout(x, p, seed=4).numpy(), d)
        # the documented mask: rand(float32, shape, seed) >= p
        u = rlx.rand(*x.shape, seed=3, dtype=rlx.float32).numpy()
        assert np.array_equal(kept, u >= np.float32(p))
    assert np.array_equal(rlx.dropout(x, 0.0).numpy(), x)
    assert not rlx.dropout(x, 1.0).numpy().any()
    assert rlx.dropout(x, 0.5, training=False).numpy() is not None
    assert np.array_equal(rlx.dropout(x, 0.9, training=False).numpy(), x)
    assert rlx.dropout(x, 0.5, seed=None).shape == x.shape
    assert rlx.dropout(np.arange(4, dtype=np.int64), 0.5).dtype == rlx.float32
    xd = rlx.tensor(x[:3, :4].astype(np.float64))
    assert np.array_equal(rlx.dropout(xd, 0.5, seed=1).numpy() != 0, rlx.dropout(x[:3, :4], 0.5, seed=1).numpy() != 0)


def test_dropout_gradient_is_the_mask():
    x = rlx.tensor(np.linspace(0.5, 1.5, 20))
    y = rlx.dropout(x, 0.3, seed=5)
    g = rlx.grad(y.sum(), x)
    mask = y.numpy() != 0
    np.testing.assert_allclose(g.numpy(), mask / 0.7, rtol=1e-15)


@pytest.mark.parametrize("dtype", [rlx.float32, rlx.float64])
def test_rand_tensor_seed(backend, dtype):
    """A Tensor seed gives exactly the numbers of its value as an int seed."""
    for shape in [(), (0,), (3, 0), (257,), (4, 5, 6)]:
        for s in (0, 1, 42, 2**40 + 3, -1):
            for seed in (rlx.tensor(np.int64(s)), rlx.tensor(np.array([s], np.int64)),
                         rlx.tensor(np.int32(s)) if -2**31 <= s < 2**31 else None):
                if seed is None:
                    continue
                for f in (rlx.rand, rlx.randn):
                    got = f(*shape, seed=seed, dtype=dtype).numpy()
                    want = f(*shape, seed=s, dtype=dtype).numpy()
                    assert got.shape == shape and np.array_equal(got, want)
    u = rlx.rand(1000, seed=rlx.tensor(np.int64(9)), dtype=dtype).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.05


def test_dropout_tensor_seed(backend):
    x = np.linspace(-2, 2, 300).reshape(20, 15)
    for p in (0.0, 0.3, 0.5, 1.0):
        for s in (3, 4):
            got = rlx.dropout(x, p, seed=rlx.tensor(np.int64(s))).numpy()
            # NumPy reference of the documented mask: rand(float32, shape, seed) >= p
            u = rlx.rand(*x.shape, seed=s, dtype=rlx.float32).numpy()
            want = np.where(u >= np.float32(p), x / (1 - p) if p < 1 else 0.0, 0.0)
            np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
            assert np.array_equal(got, rlx.dropout(x, p, seed=s).numpy())
    xt = rlx.tensor(x)
    y = rlx.dropout(xt, 0.3, seed=rlx.tensor(np.int32(5)))
    g = rlx.grad((y * y).sum(), xt)
    mask = rlx.rand(*x.shape, seed=5, dtype=rlx.float32).numpy() >= np.float32(0.3)
    np.testing.assert_allclose(g.numpy(), 2 * x * mask / 0.7 ** 2, rtol=1e-12)


def test_dropout_seed_input_compiled():
    """A compiled step with the seed as an input: a new mask per run, the
    same for the same seed, and no kernel compiled after the first run."""
    x = rlx.input("x", (16, 32))
    seed = rlx.input("seed", (), dtype=rlx.int64)
    h = rlx.dropout((x * 2).relu(), 0.5, seed=seed)
    prog = rlx.compile([h, h.sum()])
    xv = np.abs(np.random.default_rng(0).standard_normal((16, 32))).astype(np.float32) + 0.1
    outs = []
    for r, s in enumerate((1, 2, 1)):
        rlx.stats_reset()
        hv, _ = prog.run(x=xv, seed=np.array(s, np.int64))
        if r:
            assert rlx.stats()["kernels_compiled"] == 0
        outs.append(hv.numpy().copy())
        np.testing.assert_allclose(outs[-1], rlx.dropout(xv * 2, 0.5, seed=s).numpy(), rtol=1e-6)
    assert np.array_equal(outs[0], outs[2]) and not np.array_equal(outs[0], outs[1])


def test_tensor_seed_errors():
    x = np.ones(4, np.float32)
    for bad, err in ((rlx.tensor(np.float32(1)), "rlx_dropout_seeded: seed must be i32 or i64"),
                     (rlx.tensor(np.array([1, 2], np.int64)), "rlx_dropout_seeded: seed must be a scalar")):
        with pytest.raises(rlx.RlxError, match=err):
            rlx.dropout(x, 0.5, seed=bad)
    with pytest.raises(rlx.RlxError, match="rlx_rand_seeded: seed must be i32 or i64"):
        rlx.rand(3, seed=rlx.tensor(np.array(True)))
    with pytest.raises(rlx.RlxError, match="rlx_randn_seeded: seed must be a scalar"):
        rlx.randn(3, seed=rlx.tensor(np.zeros((1, 1), np.int32)))


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan")])
def test_dropout_bad_p(p):
    with pytest.raises(rlx.RlxError, match="rlx_dropout: p must be in"):
        rlx.dropout(np.ones(3, np.float32), p)


@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.int64, np.float32, np.float64])
def test_pad_modes(backend, dtype, rng):
    a = (rng.standard_normal((3, 4, 5)) * 10).astype(dtype)
    widths = [((2, 1), (3, 3), (0, 4)), 2, (1, 2), ((0, 0), (1, 0), (4, 4))]
    for mode in ("constant", "reflect", "edge"):
        for pw in widths:
            want = np.pad(a, pw, mode=mode)
            assert_close(rlx.pad(a, pw, mode=mode), want)
            assert_close(rlx.pad(a, pw, mode), want)  # NumPy's positional mode
    assert_close(rlx.pad(a, ((1, 1), (2, 2), (3, 3)), mode="replicate"), np.pad(a, ((1, 1), (2, 2), (3, 3)), "edge"))
    assert_close(rlx.pad(a, (2, 3), axis=1, mode="reflect"), np.pad(a, ((0, 0), (2, 3), (0, 0)), "reflect"))
    assert_close(rlx.pad(a, 1, constant_values=7), np.pad(a, 1, constant_values=7))
    # a transposed view
    t = rlx.tensor(a).transpose(2, 0, 1)
    assert_close(t.pad(((1, 2), (2, 0), (3, 1)), mode="reflect"),
                 np.pad(a.transpose(2, 0, 1), ((1, 2), (2, 0), (3, 1)), "reflect"))


def test_pad_mode_gradients_and_errors():
    x = rlx.tensor(np.array([1.0, 2.0, 3.0]))
    # reflect [1,2,3] by 2 each side: 3 2 1 2 3 2 1 -> counts 2, 3, 2
    assert_close(rlx.grad(rlx.pad(x, 2, mode="reflect").sum(), x), [2, 3, 2])
    assert_close(rlx.grad(rlx.pad(x, (3, 1), mode="edge").sum(), x), [4, 1, 2])
    with pytest.raises(rlx.RlxError, match="rlx_pad_mode: reflect padding 3 before"):
        rlx.pad(x, (3, 0), mode="reflect")
    with pytest.raises(rlx.RlxError, match="non-empty axis"):
        rlx.pad(np.zeros((0, 2)), 1, mode="edge")
    assert rlx.pad(np.zeros((0, 2)), ((0, 0), (1, 1)), mode="edge").shape == (0, 4)
    with pytest.raises(ValueError, match="unknown mode"):
        rlx.pad(x, 1, mode="wrap")
    assert int(rlx.PAD_REFLECT) == 1 and rlx.Padding.REPLICATE == 2 and rlx.Padding.CONSTANT == 0
