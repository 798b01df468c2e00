"""Convolutions, pools, group norm and splits over dynamic dims in
compiled programs (the C tests in tests/test_dynamic_conv.c check every
variant; here the Python surface): values and gradients against the same
expression over the bound arrays."""
import numpy as np
import pytest

import rlx
from conftest import assert_close


def _model(x, w):
    y = rlx.relu(rlx.conv2d(x, w, padding=1, stride=(2, 1)))
    y = rlx.max_pool2d(y, 2)
    return rlx.group_norm(y, 1).mean(axis=(2, 3))


def test_conv_pool_over_dynamic_image_size(rng):
    x = rlx.input("x", (None, 2, "h", "w"), dtype=rlx.float64)
    w = rng.standard_normal((3, 2, 3, 3))
    out = _model(x, rlx.tensor(w))
    loss = (out * out).sum()
    prog = rlx.compile([out, rlx.grad(loss, [x])[0]])
    for n, h, wd in [(1, 4, 2), (2, 7, 5), (1, 9, 9), (3, 5, 4)]:
        xv = rng.standard_normal((n, 2, h, wd))
        got, gx = prog.run(x=xv)
        xt = rlx.tensor(xv)
        want = _model(xt, rlx.tensor(w))
        wg = rlx.grad((want * want).sum(), [xt])[0]
        assert got.shape == (n, 3) and gx.shape == xv.shape
        assert_close(got, want.numpy(), rtol=1e-10, atol=1e-12)
        assert_close(gx, wg.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(rlx.RlxError) as e:  # too small for the kernel
        prog.run(x=np.zeros((1, 2, 1, 1)))
    assert "conv2d" in str(e.value) or "pool2d" in str(e.value)


def test_split_of_a_named_dynamic_axis_into_fixed_sizes(rng):
    x = rlx.input("x", ("len", 2), dtype=rlx.float64)
    a, b = rlx.split(x, [1, 3])
    prog = rlx.compile([a * 2, b.sum(axis=0)])
    xv = rng.standard_normal((4, 2))
    got = prog.run(x=xv)
    assert_close(got[0], xv[:1] * 2, rtol=0, atol=0)
    assert_close(got[1], xv[1:].sum(0), rtol=1e-12)
    with pytest.raises(rlx.RlxError) as e:
        prog.run(x=np.zeros((5, 2)))
    msg = str(e.value)
    assert "symbol 'len'" in msg and "'x'" in msg and "sum to 4" in msg and "bound to 5" in msg
