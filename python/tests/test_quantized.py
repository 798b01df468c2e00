"""int8/uint8 weights with per-channel scales: rlx.linear_q8 and
rlx.quantize_per_channel against NumPy (float64 references, float32 where
the library documents float32 arithmetic), the gradient with respect to x,
and the errors."""
import numpy as np
import pytest

import rlx

RNG = np.random.default_rng(16)


def values(t):
    """A float Tensor's values as a float64 array (bfloat16 through float32)."""
    return np.asarray(rlx.cast(t, "float32") if t.dtype == rlx.bfloat16 else t).astype(np.float64)


def codes(dtype, shape):
    lo, hi = (-128, 128) if dtype == np.int8 else (0, 256)
    return RNG.integers(lo, hi, size=shape).astype(dtype)


def reference(x, wq, scale, zp, bias):
    z = np.zeros(len(scale)) if zp is None else zp.astype(np.float64)
    w = (wq.astype(np.float64) - z[:, None]) * scale[:, None]
    y = x.astype(np.float64) @ w.T
    return y if bias is None else y + bias


@pytest.mark.parametrize("wdt", [np.int8, np.uint8])
@pytest.mark.parametrize("xdt", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("zp_kind", [None, "same", "int32"])
@pytest.mark.parametrize("shape", [(1, 7, 1), (3, 70, 5), (8, 600, 70), (20, 33, 9), (0, 5, 3)])
def test_linear_q8_matches_numpy(wdt, xdt, zp_kind, shape):
    m, k, n = shape
    x = RNG.uniform(-2, 2, (m, k)).astype(np.float32)
    wq = codes(wdt, (n, k))
    scale = RNG.uniform(0.001, 0.05, n).astype(np.float32)
    zp = None
    if zp_kind is not None:
        zp = RNG.integers(-20, 20, n) if wdt == np.int8 else RNG.integers(100, 156, n)
        zp = zp.astype(wdt if zp_kind == "same" else np.int32)
    bias = RNG.uniform(-1, 1, n).astype(np.float32) if m % 2 == 0 else None
    xt = rlx.cast(rlx.tensor(x), xdt)
    xv = values(xt)  # what the narrow dtype holds
    y = rlx.linear_q8(xt, wq, scale, zp, bias)
    assert y.dtype == xt.dtype and y.shape == (m, n)
    want = reference(xv, wq, scale.astype(np.float64), zp, bias)
    mag = np.abs(xv) @ np.abs(reference(np.eye(k), wq, scale.astype(np.float64), zp, None)) + (
        0 if bias is None else np.abs(bias))
    ulp = {"float32": 2**-24, "float64": 2**-53, "float16": 2**-11, "bfloat16": 2**-8}[xdt]
    acc = 1e-13 if xdt == "float64" else 1e-5
    np.testing.assert_array_less(np.abs(values(y) - want), 2 * ulp * np.abs(want) + acc * mag + 1e-300)


def test_linear_q8_batched_and_strided():
    x = RNG.uniform(-1, 1, (2, 3, 40)).astype(np.float32)
    wt = codes(np.int8, (40, 6))  # the weight as a transposed view
    scale = RNG.uniform(0.01, 0.1, 6).astype(np.float32)
    y = rlx.linear_q8(rlx.tensor(x), rlx.tensor(wt).t(), scale)
    np.testing.assert_allclose(np.asarray(y), reference(x, wt.T, scale, None, None), rtol=1e-5, atol=1e-5)
    xs = RNG.uniform(-1, 1, (5, 50)).astype(np.float32)
    y = rlx.linear_q8(rlx.tensor(xs)[:, 3:43], wt.T.copy(), scale)  # rows 50 apart
    np.testing.assert_allclose(np.asarray(y), reference(xs[:, 3:43], wt.T, scale, None, None), rtol=1e-5,
                               atol=1e-5)


def np_quantize(w, dtype):
    """rlx.quantize_per_channel's documented float32 arithmetic, axis 0."""
    w = w.astype(np.float32)
    other = tuple(range(1, w.ndim))
    if dtype == "int8":
        rng = np.abs(w).max(axis=other, keepdims=True)
        s = np.where(rng > 0, rng / np.float32(127), np.float32(1)).astype(np.float32)
        return np.clip(np.rint(w / s), -127, 127).astype(np.int8), s.reshape(-1), None
    lo = np.minimum(w.min(axis=other, keepdims=True), 0)
    hi = np.maximum(w.max(axis=other, keepdims=True), 0)
    rng = (hi - lo).astype(np.float32)
    s = np.where(rng > 0, rng / np.float32(255), np.float32(1)).astype(np.float32)
    zp = np.clip(np.rint(-lo / s), 0, 255)
    q = np.clip(np.rint(w / s) + zp, 0, 255)
    return q.astype(np.uint8), s.reshape(-1), zp.reshape(-1).astype(np.uint8)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantize_per_channel_matches_numpy(dtype):
    w = (RNG.uniform(-3, 2, (6, 33)) * np.arange(1, 7)[:, None]).astype(np.float32)
    w[2] = 0  # an all-zero channel: scale 1
    q, s, z = rlx.quantize_per_channel(w, dtype)
    wq, ws, wz = np_quantize(w, dtype)
    assert q.dtype == dtype and s.dtype == rlx.float32
    np.testing.assert_array_equal(np.asarray(q), wq)
    np.testing.assert_array_equal(np.asarray(s), ws)
    if dtype == "int8":
        assert z is None
    else:
        np.testing.assert_array_equal(np.asarray(z), wz)
    assert np.asarray(s)[2] == 1
    # channels last: the same numbers
    q1, s1, _ = rlx.quantize_per_channel(w.T.copy(), dtype, axis=-1)
    np.testing.assert_array_equal(np.asarray(q1), wq.T)
    np.testing.assert_array_equal(np.asarray(s1), ws)


def test_quantize_rounds_half_to_even_and_saturates():
    q, s, _ = rlx.quantize_per_channel(np.array([[127, 0.5, 1.5, 2.5, -2.5, -0.5]], np.float32), "int8")
    np.testing.assert_array_equal(np.asarray(q), [[127, 0, 2, 2, -2, 0]])
    # scale 0.25 exactly; both 127.5s round up to 128: 128 + 128 saturates at 255
    q, s, z = rlx.quantize_per_channel(np.array([[-31.875, 31.875, 0, 0.375]], np.float32), "uint8")
    np.testing.assert_array_equal(np.asarray(q), [[0, 255, 128, 130]])
    assert np.asarray(s)[0] == 0.25 and np.asarray(z)[0] == 128


def test_quantized_layer_runs_close_to_the_float_one():
    w = RNG.uniform(-0.2, 0.2, (32, 128)).astype(np.float32)
    x = RNG.uniform(-1, 1, (4, 128)).astype(np.float32)
    b = RNG.uniform(-1, 1, 32).astype(np.float32)
    for dtype in ("int8", "uint8"):
        q, s, z = rlx.quantize_per_channel(w, dtype)
        y = np.asarray(rlx.linear_q8(x, q, s, z, b))
        bound = np.abs(x).sum(axis=1, keepdims=True) * np.asarray(s)[None, :] * 0.5 * 1.001 + 1e-5
        assert np.all(np.abs(y - (x @ w.T + b)) <= bound)


def test_gradient_reaches_x_and_bias_only():
    wq = codes(np.uint8, (4, 10))
    scale = RNG.uniform(0.01, 0.02, 4).astype(np.float32)
    zp = np.array([128, 120, 0, 255], np.uint8)
    x = rlx.tensor(RNG.uniform(-1, 1, (3, 10)))  # float64
    b = rlx.tensor(RNG.uniform(-1, 1, 4))
    st = rlx.tensor(scale)
    c = RNG.uniform(-1, 1, (3, 4))
    loss = (rlx.linear_q8(x, wq, st, zp, b) * c).sum_all()
    gx, gb, gs = rlx.grad(loss, [x, b, st])
    w = (wq.astype(np.float64) - zp.astype(np.float64)[:, None]) * scale.astype(np.float64)[:, None]
    np.testing.assert_allclose(np.asarray(gx), c @ w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gb), c.sum(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(gs), np.zeros(4, np.float32))
    with pytest.raises(rlx.RlxError) as e:
        rlx.grad(loss, rlx.tensor(wq))
    assert e.value.status == rlx.Status.E_DTYPE


@pytest.mark.parametrize("call, status, words", [
    (lambda x, w, s: rlx.linear_q8(x, w.astype(np.int32), s), "E_DTYPE", ["wq", "i32"]),
    (lambda x, w, s: rlx.linear_q8(x.astype(np.int32), w, s), "E_DTYPE", ["x", "i32"]),
    (lambda x, w, s: rlx.linear_q8(x, w, s, np.zeros(3, np.float32)), "E_DTYPE", ["zero_point", "f32"]),
    (lambda x, w, s: rlx.linear_q8(x[:, :2], w, s), "E_SHAPE", ["[2,2]", "[3,3]"]),
    (lambda x, w, s: rlx.linear_q8(x, w, s[:2]), "E_SHAPE", ["scale", "[2]"]),
    (lambda x, w, s: rlx.linear_q8(x, w, s, None, np.zeros(4, np.float32)), "E_SHAPE", ["b", "[4]"]),
])
def test_linear_q8_errors_name_the_function_and_shapes(call, status, words):
    x = np.ones((2, 3), np.float32)
    w = np.zeros((3, 3), np.int8)
    s = np.ones(3, np.float32)
    with pytest.raises(rlx.RlxError) as e:
        call(x, w, s)
    assert e.value.status == getattr(rlx.Status, status)
    msg = str(e.value)
    assert "rlx_linear_q8" in msg and all(word in msg for word in words), msg


def test_quantize_per_channel_errors():
    with pytest.raises(rlx.RlxError) as e:
        rlx.quantize_per_channel(np.ones((2, 3), np.float32), "int32")
    assert e.value.status == rlx.Status.E_DTYPE and "rlx_quantize_per_channel" in str(e.value)
    with pytest.raises(rlx.RlxError) as e:
        rlx.quantize_per_channel(np.ones((2, 3), np.int64))
    assert e.value.status == rlx.Status.E_DTYPE and "i64" in str(e.value)
    with pytest.raises(rlx.RlxError) as e:
        rlx.quantize_per_channel(np.ones((2, 3), np.float32), axis=2)
    assert e.value.status == rlx.Status.E_ARG
