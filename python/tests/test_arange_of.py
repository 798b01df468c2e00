"""rlx.arange_of: the positions 0..n-1 of an axis, static or dynamic (the
size bound per run of a compiled program), against NumPy."""
import numpy as np
import pytest

import rlx
from conftest import assert_close


@pytest.mark.parametrize("dtype,np_dtype", [(rlx.int32, np.int32), (rlx.int64, np.int64),
                                            (rlx.float32, np.float32), (rlx.float64, np.float64)])
def test_static_axes(dtype, np_dtype):
    t = rlx.zeros(3, 0, 5)
    for axis, n in [(0, 3), (1, 0), (2, 5), (-1, 5), (-3, 3)]:
        got = rlx.arange_of(t, axis, dtype).numpy()
        assert got.dtype == np_dtype and got.shape == (n,)
        assert np.array_equal(got, np.arange(n, dtype=np_dtype))


def test_dynamic_axis_in_a_program(rng):
    x = rlx.input("x", (2, None, 3), dtype=rlx.float64)
    pos = rlx.arange_of(x, 1, rlx.float64)
    y = x * pos.reshape(1, -1, 1) + rlx.arange_of(x, 0, rlx.float64).reshape(2, 1, 1)
    idx = rlx.index_select(rlx.tensor(np.arange(40.0) * 10), 0, rlx.arange_of(x, -2, rlx.int32))
    prog = rlx.compile([y, idx])
    for n in [0, 1, 4, 7, 2, 13]:
        xv = rng.standard_normal((2, n, 3))
        got, gi = prog.run(x=xv)
        want = xv * np.arange(n)[None, :, None] + np.arange(2)[:, None, None]
        assert_close(got, want, rtol=1e-12)
        assert np.array_equal(gi.numpy(), np.arange(n) * 10.0)
    # a view along the other axes does not matter; the reference backend agrees
    old = rlx.get_option("backend")
    rlx.set_option("backend", "ref")
    try:
        prog_ref = rlx.compile([y, idx])
        xv = rng.standard_normal((2, 5, 3))
        got, gi = prog_ref.run(x=xv)
        assert_close(got, xv * np.arange(5)[None, :, None] + np.arange(2)[:, None, None], rtol=1e-12)
    finally:
        rlx.set_option("backend", old)


def test_no_gradient_and_empty_other_axis(rng):
    x = rlx.input("x", (0, None), dtype=rlx.float32)
    prog = rlx.compile(rlx.arange_of(x, 1, rlx.int64))
    for n in [0, 3, 6]:
        assert np.array_equal(prog.run(x=np.zeros((0, n), np.float32)).numpy(), np.arange(n))
    w = rlx.tensor(rng.standard_normal(4))
    s = (rlx.arange_of(w, 0, rlx.float64) * w).sum()
    (g,) = rlx.grad(s, [w])
    assert_close(g, np.arange(4.0), rtol=0)


def test_errors():
    t = rlx.zeros(2, 3)
    with pytest.raises(rlx.RlxError, match="rlx_arange_of"):
        rlx.arange_of(t, 2)
    with pytest.raises(rlx.RlxError, match="rlx_arange_of"):
        rlx.arange_of(t, 0, rlx.bool_)
    with pytest.raises(rlx.RlxError, match="rlx_arange_of"):
        rlx.arange_of(rlx.tensor(1.0), 0)


def test_program_arenas_grow_only(rng):
    # (the arena pool a dynamic program resolves its specs' memory plans into)
    w = rlx.tensor(rng.standard_normal((32, 32)) * 0.1)
    x = rlx.input("x", (None, 32), dtype=rlx.float64)
    h = (x @ w).tanh()
    prog = rlx.compile(((h @ w) + h).tanh() @ w)
    assert prog.arenas() == (0, 0)
    seen = []
    for n in [8, 64, 8, 16]:
        xv = rng.standard_normal((n, 32))
        h_np = np.tanh(xv @ w.numpy())
        assert_close(prog.run(x=xv), np.tanh(h_np @ w.numpy() + h_np) @ w.numpy(), rtol=1e-10, atol=1e-12)
        seen.append(prog.arenas())
    assert [c for c, _ in seen] == [1, 1, 1, 1]
    assert seen[1][1] > seen[0][1] > 0
    assert seen[2] == seen[3] == seen[1]  # after 64, smaller bindings reuse its arena
