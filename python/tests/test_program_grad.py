"""rlx.compile / Program.run and rlx.grad."""
import numpy as np
import pytest

import rlx
from conftest import assert_close


def test_compile_and_run(rng):
    x = rlx.input("x", (2, 3))
    w = rlx.input("w", (3, 4), dtype=rlx.float32)
    b = rlx.tensor(np.arange(4, dtype=np.float32))       # a constant captured by the program
    y = (x @ w + b).relu()
    s = y.sum()
    prog = rlx.compile([y, s])
    for seed in range(3):
        xv = rng.standard_normal((2, 3)).astype(np.float32)
        wv = rng.standard_normal((3, 4)).astype(np.float32)
        out_y, out_s = prog.run(x=xv, w=rlx.from_numpy(wv))
        want = np.maximum(xv @ wv + np.arange(4), 0)
        assert_close(out_y, want)
        assert_close(out_s, want.sum(), rtol=1e-5)
    single = rlx.compile(s)
    assert_close(single({"x": np.ones((2, 3), np.float32), "w": np.ones((3, 4), np.float32)}),
                 np.sum(np.maximum(3 + np.arange(4), 0)) * 2)
    with rlx.compile([x * 2]) as p:
        assert_close(p.run(x=np.ones((2, 3), np.float32))[0], np.full((2, 3), 2.0))
    with pytest.raises(ValueError):
        p.run(x=np.ones((2, 3), np.float32))


def test_run_donate_updates_in_place(rng):
    """run_donate: an SGD-with-momentum loop gives run()'s values, the
    donated Tensors are closed, and the updates take their inputs' buffers."""
    from rlx._base import _lib
    w, m, g = (rlx.input(n, (16, 8)) for n in "wmg")
    prog = rlx.compile([w - g * 0.5, m * 0.9 + g, (g * g).sum()])
    wv, mv = rng.standard_normal((16, 8)).astype(np.float32), np.zeros((16, 8), np.float32)
    tw, tm = rlx.tensor(wv), rlx.tensor(mv)
    for step in range(3):
        gv = rng.standard_normal((16, 8)).astype(np.float32)
        before = _lib.rlx_data(tw.handle)
        want = prog.run(w=tw, m=tm, g=gv)
        nw, nm, loss = prog.run_donate(w=tw, m=tm, g=gv)
        assert tw.handle is None and tm.handle is None   # donated: closed
        with pytest.raises(ValueError):
            prog.run_donate(w=tw, m=tm, g=gv)
        assert_close(nw, want[0].numpy(), rtol=0, atol=0)
        assert_close(nm, want[1].numpy(), rtol=0, atol=0)
        assert_close(loss, float((gv.astype(np.float64) ** 2).sum()), rtol=1e-5)
        del want   # (run() read tw before: its outputs are separate tensors)
        if rlx.get_option("backend") == "jit":
            assert _lib.rlx_data(nw.handle) == before
        tw, tm = nw, nm
    # a Tensor bound twice is donated once per binding, and nothing is written over it
    t = rlx.tensor(np.ones((16, 8), np.float32))
    a, b, _ = prog.run_donate(w=t, m=t, g=np.ones((16, 8), np.float32))
    assert_close(a, np.full((16, 8), 0.5))
    assert_close(b, np.full((16, 8), 1.9))
    assert t.handle is None


def test_dynamic_batch(rng):
    """One program over a -1 batch dim, run at several batch sizes, against NumPy."""
    x = rlx.input("x", (-1, 6))
    assert x.shape == (-1, 6)
    w = rng.standard_normal((6, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    h = (x @ rlx.tensor(w) + rlx.tensor(b)).relu()
    logits = h.log_softmax(-1)
    centered = x - x.mean(axis=0, keepdims=True)
    prog = rlx.compile([logits, centered, h.sum()])
    for n in (1, 5, 0, 33, 5):
        xv = rng.standard_normal((n, 6)).astype(np.float32)
        out_l, out_c, out_s = prog.run(x=xv)
        hv = np.maximum(xv @ w + b, 0)
        m = hv.max(axis=-1, keepdims=True) if n else hv
        want_l = hv - m - np.log(np.exp(hv - m).sum(axis=-1, keepdims=True)) if n else hv
        assert out_l.shape == (n, 4)
        assert_close(out_l, want_l, rtol=1e-5, atol=1e-5)
        if n:
            assert_close(out_c, xv - xv.mean(axis=0, keepdims=True), rtol=1e-5, atol=1e-6)
        assert_close(out_s, hv.sum(), rtol=1e-5, atol=1e-5)
    with pytest.raises(rlx.RlxError) as e:
        prog.run(x=np.ones((3, 5), np.float32))
    assert e.value.status == rlx.Status.E_SHAPE and "[-1,6]" in str(e.value)


def test_program_errors():
    x = rlx.input("x", (2,), rlx.int32)
    prog = rlx.compile(x + 1)
    with pytest.raises(rlx.RlxError) as e:
        prog.run()
    assert e.value.status == rlx.Status.E_ARG                     # unbound
    with pytest.raises(rlx.RlxError) as e:
        prog.run(y=np.ones(2, np.int32))
    assert e.value.status == rlx.Status.E_ARG                     # no such input
    with pytest.raises(rlx.RlxError) as e:
        prog.run(x=np.ones(2, np.float32))
    assert e.value.status == rlx.Status.E_DTYPE
    with pytest.raises(rlx.RlxError) as e:
        prog.run(x=np.ones(3, np.int32))
    assert e.value.status == rlx.Status.E_SHAPE
    assert prog.run(x=np.array([1, 2], np.int32)).tolist() == [2, 3]
    with pytest.raises(rlx.RlxError) as e:
        rlx.compile([])
    assert e.value.status == rlx.Status.E_ARG


def _grad_or_skip(loss, wrt):
    try:
        return rlx.grad(loss, wrt)
    except rlx.RlxError as e:
        if e.status == rlx.Status.E_UNSUPPORTED:
            pytest.skip("rlx_grad reports RLX_E_UNSUPPORTED in this build: %s" % e.message)
        raise


def test_grad_of_a_linear_model(rng):
    xv = rng.standard_normal((5, 3))
    wv = rng.standard_normal((3, 2))
    bv = rng.standard_normal(2)
    x, w, b = rlx.tensor(xv), rlx.tensor(wv), rlx.tensor(bv)
    y = x @ w + b
    loss = (y * y).sum()
    gw, gb = _grad_or_skip(loss, [w, b])
    r = xv @ wv + bv
    assert_close(gw, 2 * xv.T @ r, rtol=1e-9, atol=1e-9)
    assert_close(gb, 2 * r.sum(0), rtol=1e-9, atol=1e-9)
    gx = rlx.grad(loss, x)                   # a single tensor gives a single gradient
    assert_close(gx, 2 * r @ wv.T, rtol=1e-9, atol=1e-9)


def test_grad_rules(rng):
    xv = rng.standard_normal(6)
    x = rlx.tensor(xv)
    g, = _grad_or_skip((x.tanh() * x.exp()).sum(), [x])
    assert_close(g, (1 - np.tanh(xv) ** 2) * np.exp(xv) + np.tanh(xv) * np.exp(xv), rtol=1e-9, atol=1e-9)
    assert_close(rlx.grad((x.stop_gradient() * x).sum(), [x])[0], xv, rtol=1e-12)
    assert_close(rlx.grad(x.round().sum(), [x])[0], np.ones(6))         # straight-through
    assert_close(rlx.grad(x.floor().sum(), [x])[0], np.zeros(6))
    # grad of grad: d2/dx2 sum(x^3) = 6x
    g1 = rlx.grad((x ** 3).sum(), [x])[0]
    assert_close(rlx.grad(g1.sum(), [x])[0], 6 * xv, rtol=1e-9, atol=1e-9)
    # through views and broadcasting
    m = rlx.tensor(rng.standard_normal((3, 4)))
    gm = rlx.grad((m[:, ::2] * rlx.tensor([1.0, 2.0])).sum(), m)
    want = np.zeros((3, 4))
    want[:, 0], want[:, 2] = 1, 2
    assert_close(gm, want)
