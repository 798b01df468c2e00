"""Dynamic dims in compiled programs: None / -1 / named symbols, ops over
dynamic axes, gradients, the kept specializations (against NumPy)."""
import numpy as np
import pytest

import rlx
from conftest import assert_close


def test_none_and_minus_one_run_many_sizes(rng):
    x = rlx.input("x", (None, 3))
    y = rlx.input("y", (-1, 3))
    assert x.shape == (-1, 3) and y.shape == (-1, 3)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    out = ((x * 2 + y) @ rlx.tensor(w)).tanh()
    prog = rlx.compile(out)
    for n in [0, 1, 2, 5, 9, 17, 33, 3, 12, 40, 2]:  # more sizes than the kept 8
        xv = rng.standard_normal((n, 3)).astype(np.float32)
        yv = rng.standard_normal((n, 3)).astype(np.float32)
        got = prog.run(x=xv, y=yv)
        assert got.shape == (n, 4)
        assert_close(got, np.tanh((2 * xv + yv) @ w), rtol=1e-5, atol=1e-6)
    kept, prepared = prog.specs()
    assert kept == 8 and prepared == 10  # 2 is still kept: its second run prepared nothing


def test_symbols_bind_one_size(rng):
    x = rlx.input("x", ("batch", 2), dtype=rlx.float64)
    m = rlx.input("m", ("batch",), dtype=rlx.float64)
    prog = rlx.compile(x * m.unsqueeze(1))
    for n in [0, 1, 4]:
        xv, mv = rng.standard_normal((n, 2)), rng.standard_normal(n)
        assert_close(prog.run(x=xv, m=mv), xv * mv[:, None], rtol=1e-12)
    with pytest.raises(rlx.RlxError) as e:
        prog.run(x=np.zeros((3, 2)), m=np.zeros(2))
    msg = str(e.value)
    assert "symbol 'batch'" in msg and "'x'" in msg and "'m'" in msg and " 3 " in msg and " 2 " in msg
    with pytest.raises(ValueError):
        rlx.input("z", (-2, 3))


def test_joined_dims_are_never_broadcast():
    a, b = rlx.input("a", (None, 2)), rlx.input("b", (None, 2))
    prog = rlx.compile(a + b)
    with pytest.raises(rlx.RlxError) as e:
        prog.run(a=np.ones((1, 2), np.float32), b=np.ones((4, 2), np.float32))
    assert "add" in str(e.value) and "[1,2]" in str(e.value) and "[4,2]" in str(e.value)


def test_ops_over_a_dynamic_axis(rng):
    x = rlx.input("x", (None, 3), dtype=rlx.float64)
    outs = [x[1:] - x[:-1], x[::-1], x[-2:], x[1::2], rlx.roll(x, 2, 0), x.mean(axis=0), x.var(axis=0),
            x.reshape(-1).exp().reshape(-1, 3)]
    prog = rlx.compile(outs)
    for n in [2, 3, 0 + 2, 7, 5]:
        xv = rng.standard_normal((n, 3))
        want = [xv[1:] - xv[:-1], xv[::-1], xv[-2:], xv[1::2], np.roll(xv, 2, 0), xv.mean(0), xv.var(0),
                np.exp(xv)]
        for g, w in zip(prog.run(x=xv), want):
            assert g.shape == w.shape
            assert_close(g, w, rtol=1e-12, atol=1e-12)


def test_pad_of_a_dynamic_axis(rng):
    x = rlx.input("x", (None, 3), dtype=rlx.float64)
    outs = [rlx.pad(x, (2, 1), axis=0, value=-1.5), rlx.pad(x, (2, 1), "reflect", axis=0),
            rlx.pad(x, ((1, 3), (0, 1)), mode="edge")]
    prog = rlx.compile(outs)
    for n in [3, 7, 4, 3, 12]:
        xv = rng.standard_normal((n, 3))
        want = [np.pad(xv, ((2, 1), (0, 0)), constant_values=-1.5), np.pad(xv, ((2, 1), (0, 0)), "reflect"),
                np.pad(xv, ((1, 3), (0, 1)), "edge")]
        for g, w in zip(prog.run(x=xv), want):
            assert g.shape == w.shape
            assert_close(g, w, rtol=0, atol=0)
    with pytest.raises(rlx.RlxError) as e:  # reflect by 2 needs at least 3 rows
        prog.run(x=np.zeros((2, 3)))
    assert "rlx_program_run" in str(e.value)


def test_gradient_over_a_dynamic_batch(rng):
    x = rlx.input("x", (None, 4), dtype=rlx.float64)
    w = rlx.tensor(rng.standard_normal((4, 3)))
    loss = ((x @ w).tanh() ** 2).mean()
    gx, gw = rlx.grad(loss, [x, w])
    prog = rlx.compile([loss, gx, gw])
    wv = w.numpy()
    for n in [1, 2, 7, 3]:
        xv = rng.standard_normal((n, 4))
        l, dx, dw = prog.run(x=xv)
        t = np.tanh(xv @ wv)
        dh = 2 * t * (1 - t * t) / t.size
        assert_close(l, (t ** 2).mean(), rtol=1e-12)
        assert_close(dx, dh @ wv.T, rtol=1e-10, atol=1e-12)
        assert_close(dw, xv.T @ dh, rtol=1e-10, atol=1e-12)


def test_einsum_over_dynamic_dims(rng):
    x = rlx.input("x", (None, 3, 4), dtype=rlx.float64)
    w = rng.standard_normal((4, 5))
    sq = rlx.input("sq", (2, None, None), dtype=rlx.float64)
    mm = rlx.einsum("bij,jk->bik", x, rlx.tensor(w))
    outs = [mm, rlx.einsum("bij,bkj->bik", x, x), rlx.einsum("bij->j", x), rlx.einsum("bii->bi", sq),
            rlx.einsum("...j,jk->...k", x, rlx.tensor(w))]
    (gx,) = rlx.grad((mm * mm).sum(), [x])
    prog = rlx.compile(outs + [gx])
    for n in [0, 1, 4, 2, 7]:
        xv, sv = rng.standard_normal((n, 3, 4)), rng.standard_normal((2, n, n))
        got = prog.run(x=xv, sq=sv)
        want = [np.einsum("bij,jk->bik", xv, w), np.einsum("bij,bkj->bik", xv, xv), np.einsum("bij->j", xv),
                np.einsum("bii->bi", sv), np.einsum("...j,jk->...k", xv, w),
                2 * np.einsum("bik,jk->bij", xv @ w, w)]
        for g, e in zip(got, want):
            assert g.shape == e.shape
            assert_close(g, e, rtol=1e-10, atol=1e-12)


def test_dropout_over_a_dynamic_dim(rng):
    x = rlx.input("x", (None, 8), dtype=rlx.float64)
    y = rlx.dropout(x, 0.3, seed=11)
    (gx,) = rlx.grad(y.sum(), [x])
    prog = rlx.compile([y, gx])
    for n in [0, 1, 5, 16, 3]:
        xv = rng.standard_normal((n, 8))
        got, g = prog.run(x=xv)
        want = rlx.dropout(rlx.tensor(xv), 0.3, seed=11).numpy()  # the static mask of the bound shape
        assert got.shape == (n, 8)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(g, np.where(want != 0, 1 / 0.7, 0))
    # the seed as a program input: a new mask per run, the static one for that seed
    s = rlx.input("seed", (), dtype=rlx.int64)
    prog = rlx.compile(rlx.dropout(x, 0.3, seed=s))
    for n, sd in [(4, 1), (4, 2), (9, 1)]:
        xv = rng.standard_normal((n, 8))
        seed = rlx.tensor(np.array(sd, np.int64))
        np.testing.assert_array_equal(prog.run(x=xv, seed=seed).numpy(),
                                      rlx.dropout(rlx.tensor(xv), 0.3, seed=seed).numpy())


def test_once_refused_ops_over_dynamic_axes(rng):
    # cats of two dynamic lengths and strided slices (gradients), tile, far
    # rolls and sorts of a dynamic axis, against NumPy
    x = rlx.input("x", (None, 3), dtype=rlx.float64)
    y = rlx.input("y", (None, 3), dtype=rlx.float64)
    c = rlx.cat([x, y.exp(), x], axis=0)
    s = x[::-2]
    loss = (c * c).sum() + s.sin().sum()
    gx, gy = rlx.grad(loss, [x, y])
    far = 2 ** 62 + 5
    outs = [c, gx, gy, rlx.tile(x, 3, axis=0), rlx.roll(y, far, 0), rlx.sort(x, axis=0),
            rlx.sort(y, axis=0, descending=True)]
    prog = rlx.compile(outs)
    for nx, ny in [(0, 2), (3, 1), (1, 0), (5, 4), (2, 2)]:
        xv, yv = rng.standard_normal((nx, 3)), rng.standard_normal((ny, 3))
        dx = 4 * xv
        dx[::-2] += np.cos(xv[::-2])
        want = [np.concatenate([xv, np.exp(yv), xv]), dx, 2 * np.exp(2 * yv), np.tile(xv, (3, 1)),
                np.roll(yv, far % ny if ny else 0, 0), np.sort(xv, axis=0), -np.sort(-yv, axis=0)]
        for g, w in zip(prog.run(x=xv, y=yv), want):
            assert g.shape == w.shape
            assert_close(g, w, rtol=1e-12, atol=1e-12)


def test_transformer_block_trains_over_batch_and_sequence(rng):
    # one compiled training step of a pre-norm block over dynamic (B, S):
    # [B, S, D] @ W^T (a weight broadcast over the batch, transposed by its
    # gradient), causal attention (whose gradient splits into heads a
    # cotangent that came back from [B*S, D]), a flattened MLP split back
    # by name; loss and gradients against the same graph over the bound
    # values on the reference backend (both once failed every run)
    D, H = 8, 2
    W = {k: rlx.tensor(rng.standard_normal(s) * 0.3, dtype=rlx.float64)
         for k, s in dict(wq=(D, D), wk=(D, D), wv=(D, D), wo=(D, D), w1=(2 * D, D), w2=(D, 2 * D)).items()}

    def loss(x, t, b, s):
        h = x.layer_norm()
        a = rlx.attention(h @ W["wq"].T, h @ W["wk"].T, h @ W["wv"].T, H, D // H, rlx.MASK_CAUSAL)
        x = x + a @ W["wo"].T
        f = ((x.reshape(-1, D) @ W["w1"].T).relu() @ W["w2"].T).reshape(b, s, D)
        d = x + f - t
        return (d * d).mean()

    x, t = rlx.input("x", ("B", "S", D), dtype=rlx.float64), rlx.input("t", ("B", "S", D), dtype=rlx.float64)
    params = [W[k] for k in ("wq", "wo", "w1")]
    lo = loss(x, t, "B", "S")
    prog = rlx.compile([lo] + list(rlx.grad(lo, params)))
    for b, s in [(2, 3), (1, 1), (3, 5), (1, 7), (2, 3)]:
        xv, tv = rng.standard_normal((b, s, D)), rng.standard_normal((b, s, D))
        got = prog.run(x=xv, t=tv)
        rlx.set_option("backend", "ref")
        try:
            ls = loss(rlx.tensor(xv), rlx.tensor(tv), b, s)
            want = [ls] + list(rlx.grad(ls, params))
            want = [w.numpy() for w in want]
        finally:
            rlx.set_option("backend", "jit")
        for g, w in zip(got, want):
            assert g.shape == w.shape
            assert_close(g, w, rtol=1e-10, atol=1e-12)


def test_split_of_a_dynamic_axis(rng):
    # an int piece size would make as many pieces as the bound size allows:
    # refused while tracing (it once split into one piece of size 1); sizes
    # with a -1 and chunk work, and a static axis splits by the int
    x = rlx.input("x", ("B", 4), dtype=rlx.float64)
    with pytest.raises(rlx.RlxError) as e:
        rlx.split(x, 2, 0)
    assert e.value.status == rlx.E_UNSUPPORTED and "dynamic axis 0" in e.value.message
    head, rest = rlx.split(x, [1, -1], 0)
    a, b = rlx.split(x, 2, 1)
    prog = rlx.compile([rest, head * 2, b - a])
    for n in [1, 3, 6]:
        xv = rng.standard_normal((n, 4))
        got = prog.run(x=xv)
        for g, w in zip(got, [xv[1:], 2 * xv[:1], xv[:, 2:] - xv[:, :2]]):
            assert g.shape == w.shape
            assert_close(g, w, rtol=0, atol=0)


def test_einsum_merging_two_dynamic_dims(rng):
    x = rlx.input("x", (None, None, 3), dtype=rlx.float64)
    w = rng.standard_normal((3, 4))
    out = rlx.einsum("bij,jk->bik", x, rlx.tensor(w))
    (gx,) = rlx.grad((out * out).sum(), [x])
    prog = rlx.compile([out, gx])
    for b, i in [(2, 3), (0, 4), (1, 1), (5, 2)]:
        xv = rng.standard_normal((b, i, 3))
        got, g = prog.run(x=xv)
        assert_close(got, np.einsum("bij,jk->bik", xv, w), rtol=1e-10, atol=1e-12)
        assert_close(g, 2 * np.einsum("bik,jk->bij", xv @ w, w), rtol=1e-10, atol=1e-12)


def test_reshape_names_symbols(rng):
    # [B, S, D] -> [B*S, D] -> linear -> [B, S, D] by name: one program, any (B, S)
    d = 4
    x = rlx.input("x", ("B", "S", d), dtype=rlx.float64)
    w = rng.standard_normal((d, d))
    h = (x.reshape(-1, d) @ rlx.tensor(w)).tanh()
    y = rlx.reshape(h, ("B", "S", d)) + x
    s = h.reshape("S", "B", d)  # the same elements read as [S, B, D]
    assert y.shape == (-1, -1, d) and s.shape == (-1, -1, d)
    loss = (y * y).sum() + s.sin().sum()
    prog = rlx.compile([y, s, rlx.grad(loss, x)])
    for b, n in [(2, 3), (0, 0), (1, 1), (0, 5), (4, 1), (3, 2)]:
        xv = rng.standard_normal((b, n, d))
        hv = np.tanh(xv.reshape(-1, d) @ w)
        yv = hv.reshape(b, n, d) + xv
        got_y, got_s, got_g = prog.run(x=xv)
        assert got_y.shape == (b, n, d) and got_s.shape == (n, b, d)
        assert_close(got_y, yv, rtol=1e-12)
        assert_close(got_s, hv.reshape(n, b, d), rtol=1e-12)
        # d loss / d x: 2y + (2y + cos(s) read back as [B, S, D]) through the tanh linear
        gh = (2 * yv).reshape(-1, d) + np.cos(hv.reshape(n, b, d)).reshape(-1, d)
        gx = 2 * yv + ((gh * (1 - hv * hv)) @ w.T).reshape(b, n, d)
        assert got_g.shape == (b, n, d)
        assert_close(got_g, gx, rtol=1e-10, atol=1e-12)


def test_reshape_symbol_errors():
    x = rlx.input("x", ("B", 6))
    with pytest.raises(ValueError):
        x.reshape(-2, 6)
    with pytest.raises(ValueError):
        x.reshape("", 6)
    with pytest.raises(rlx.RlxError) as e:  # a symbol over a static tensor: nothing binds it
        rlx.zeros((2, 3)).reshape("B", 3)
    assert "symbol 'B'" in str(e.value)
    with pytest.raises(rlx.RlxError) as e:  # a symbol no input carries
        rlx.compile(x.reshape("B", "nobody", 3))
    assert "rlx_compile" in str(e.value) and "symbol 'nobody'" in str(e.value)
    prog = rlx.compile(x.reshape(-1).reshape("B", "B", 6))  # [B*6] as [B, B, 6]: only B = 1 (or 0) fits
    assert prog.run(x=np.ones((1, 6), np.float32)).shape == (1, 1, 6)
    with pytest.raises(rlx.RlxError) as e:
        prog.run(x=np.ones((2, 6), np.float32))
    assert "symbol 'B' bound to 2" in str(e.value)


def test_flatten_range_over_dynamic_dims(rng):
    x = rlx.input("x", ("B", "S", 2, 3), dtype=rlx.float64)
    f = rlx.flatten(x, 2, 3)  # [B, S, 6]: the dynamic dims kept
    g = rlx.flatten(x, 1, 2)  # [B, 2S, 3]
    back = rlx.reshape(rlx.flatten(x, 0, 1).exp(), ("B", "S", 6))
    prog = rlx.compile([f, g, back])
    for b, n in [(0, 2), (1, 1), (3, 4)]:
        xv = rng.standard_normal((b, n, 2, 3))
        got = prog.run(x=xv)
        want = [xv.reshape(b, n, 6), xv.reshape(b, 2 * n, 3), np.exp(xv).reshape(b, n, 6)]
        for gv, w in zip(got, want):
            assert gv.shape == w.shape
            assert_close(gv, w, rtol=1e-12)
