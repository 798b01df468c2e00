"""f32 sums on the JIT (blocked in f32, each block's sum added in f64;
knob reduce_acc_f64 adds every element in f64) against NumPy's float64
sums within the bound include/rlx.h documents."""
import numpy as np
import pytest

import rlx

U = 2.0 ** -24
UO = {"float32": U, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def bound(n, uo, s, a, f64):
    g64 = n * 2.0 ** -53 / (1 - n * 2.0 ** -53)
    if f64:
        return uo * abs(s) + (1 + uo) * g64 * a
    g = 1023 * U / (1 - 1023 * U)
    return uo * abs(s) + (1 + uo) * (g + g64 * (1 + g)) * a


@pytest.fixture(params=["0", "1"])
def acc_f64(request):
    rlx.set_option("reduce_acc_f64", request.param)
    yield request.param == "1"
    rlx.set_option("reduce_acc_f64", "default")


@pytest.mark.parametrize("shape,axis", [((1, 3000001), 1), ((7, 100003), 1), ((100003, 7), 0), ((5, 1025), 1),
                                        ((1, 1), 1)])
def test_sums_within_bound(rng, acc_f64, shape, axis):
    x = rng.uniform(-1, 3, shape).astype(np.float32)
    x[0, 0] = 1e4  # a large value, then many small ones
    got = rlx.tensor(x).sum(axis).numpy().astype(np.float64)
    x64 = x.astype(np.float64)
    s, a = x64.sum(axis), np.abs(x64).sum(axis)
    n = shape[axis]
    for i in range(got.size):
        assert abs(got[i] - s[i]) <= bound(n, U, s[i], a[i], acc_f64), (i, got[i], s[i])


def test_half_sums_within_bound(rng, acc_f64):
    x = rng.uniform(0, 0.05, (3, 200001)).astype(np.float32)
    for dt in ("float16", "bfloat16"):
        t = rlx.tensor(x).astype(dt)
        vals = t.astype("float32").numpy().astype(np.float64)
        got = t.sum(1).astype("float32").numpy().astype(np.float64)
        s = vals.sum(1)
        for i in range(3):
            assert abs(got[i] - s[i]) <= bound(vals.shape[1], UO[dt], s[i], s[i], acc_f64), (dt, got[i], s[i])


def test_policies_differ_only_within_bound(rng):
    x = rng.standard_normal((64, 4099)).astype(np.float32)
    out = {}
    for v in ("0", "1"):
        rlx.set_option("reduce_acc_f64", v)
        out[v] = (rlx.tensor(x).sum(1).numpy(), rlx.softmax(rlx.tensor(x), -1).numpy())
    rlx.set_option("reduce_acc_f64", "default")
    a = np.abs(x.astype(np.float64)).sum(1)
    assert np.all(np.abs(out["0"][0].astype(np.float64) - out["1"][0]) <= 2 * bound(4099, U, 0, 1, False) * a + 1e-6)
    np.testing.assert_allclose(out["0"][1], out["1"][1], rtol=2e-4, atol=1e-9)
