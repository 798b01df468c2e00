"""Every API function against NumPy (or a NumPy formula), on random inputs,
with broadcasting and views."""
import math

import numpy as np
import pytest

import rlx
from conftest import assert_close

F32 = np.float32
_erf = np.vectorize(math.erf, otypes=[np.float64])


def f64(a):
    return np.asarray(a, dtype=np.float64)


def softplus(x):
    return np.logaddexp(0, x)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


UNARY = {
    "neg": lambda x: -x, "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x * sigmoid(x), "tanh": np.tanh, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "sigmoid": sigmoid, "abs": np.abs, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "atan": np.arctan, "round": np.round, "recip": lambda x: 1 / x, "floor": np.floor,
    "ceil": np.ceil, "sign": np.sign, "softplus": softplus,
    "elu": lambda x: np.where(x > 0, x, np.expm1(x)), "erf": _erf,
    "hard_swish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1), "hard_sigmoid": lambda x: np.clip(x / 6 + 0.5, 0, 1),
    "mish": lambda x: x * np.tanh(softplus(x)), "softsign": lambda x: x / (1 + np.abs(x)),
    "log_sigmoid": lambda x: -softplus(-x), "logical_not": np.logical_not,
}
POSITIVE = {"log", "sqrt", "rsqrt", "recip"}


def _input(rng, name, shape, dtype=F32):
    x = rng.standard_normal(shape) * 2
    if name in POSITIVE:
        x = np.abs(x) + 0.1
    if name == "tan":
        x = np.clip(x, -1.2, 1.2)
    if name == "round":
        x[..., 0] = 2.5  # half to even
    return x.astype(dtype)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary(name, dtype, rng):
    a = _input(rng, name, (3, 4, 5), dtype)
    x = rlx.from_numpy(a)
    ref = UNARY[name](f64(a))
    if name == "logical_not":
        assert_close(getattr(rlx, name)(x), ref, dtype=rlx.bool)
        return
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else {}
    assert_close(getattr(rlx, name)(x), ref, dtype=dtype, **tol)
    assert_close(getattr(x, name)(), ref, **tol)                       # method form
    v = x[:, ::2, 1:].T                                                # a strided view
    assert_close(getattr(v, name)(), ref[:, ::2, 1:].T, **tol)


@pytest.mark.parametrize("name", ["neg", "abs", "sign", "relu", "round", "floor", "ceil", "exp", "sqrt",
                                  "logical_not", "sigmoid"])
def test_unary_integer_dtypes(name, rng):
    a = rng.integers(1, 9, size=(4, 3)).astype(np.int32)
    out = getattr(rlx, name)(rlx.tensor(a))
    keep = name in ("neg", "abs", "sign", "relu", "round", "floor", "ceil")
    want = rlx.int32 if keep else rlx.bool if name == "logical_not" else rlx.float32
    assert out.dtype == want
    assert_close(out, UNARY[name](f64(a)), rtol=1e-6)


def test_gelu_approximate_keyword(rng):
    a = rng.standard_normal(10).astype(F32)
    x = rlx.tensor(a)
    assert_close(rlx.gelu(x, approximate="tanh"), UNARY["gelu_tanh"](f64(a)))
    assert_close(x.gelu(), UNARY["gelu"](f64(a)))


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "atan2": np.arctan2, "rem": np.fmod,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "logical_and": np.logical_and, "logical_or": np.logical_or,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasting(name, rng):
    a = rng.standard_normal((3, 1, 5)).astype(F32)
    b = rng.standard_normal((4, 1)).astype(F32)
    if name == "pow":
        a = np.abs(a) + 0.5
    if name in ("eq", "ne", "le", "ge"):
        b[0, 0] = a[0, 0, 0]
    ref = BINARY[name](f64(a), f64(b))
    out = getattr(rlx, name)(rlx.tensor(a), rlx.tensor(b))
    assert out.shape == (3, 4, 5)
    assert_close(out, ref, rtol=2e-5)
    # views on both sides: a transposed and b a strided slice of a bigger array
    big = rng.standard_normal((8, 3)).astype(F32)
    bv = rlx.from_numpy(big)[::2, 1:2]
    av = rlx.from_numpy(np.ascontiguousarray(a.transpose(2, 1, 0)))   # (5, 1, 3)
    ref = BINARY[name](f64(a.transpose(2, 1, 0)).transpose(2, 1, 0), f64(big[::2, 1:2]))
    out = getattr(rlx, name)(av.transpose(2, 1, 0), bv)
    assert_close(out, ref, rtol=2e-5)
    if name not in ("logical_and", "logical_or"):        # the _s form
        s = 1.75
        assert_close(getattr(rlx, name)(rlx.tensor(a), s), BINARY[name](f64(a), s), rtol=2e-5)


def test_binary_integer_semantics():
    a = np.array([7, -7, 7, -7, 5, 0], np.int32)
    b = np.array([2, 2, -2, -2, 0, 3], np.int32)
    x, y = rlx.tensor(a), rlx.tensor(b)
    # rlx.div / rlx.rem: C truncation; division by zero gives 0
    assert_close(rlx.div(x, y), [3, -3, -3, 3, 0, 0], dtype=rlx.int32)
    assert_close(rlx.rem(x, y), [1, -1, 1, -1, 0, 0], dtype=rlx.int32)
    # Python operators: NumPy semantics
    assert_close(x // y, np.floor_divide(a, np.where(b == 0, 1, b)) * (b != 0), dtype=rlx.int32)
    assert_close(x % y, np.remainder(a, np.where(b == 0, 1, b)) * (b != 0), dtype=rlx.int32)
    with np.errstate(divide="ignore", invalid="ignore"):
        assert_close(x / y, (a / b).astype(F32), dtype=rlx.float32)
    assert_close(rlx.rsub(x, 10), 10 - a)
    assert_close(rlx.rdiv(x + 10, 100), 100 // (a + 10))  # positive: truncation == floor


def test_float_floor_divide_and_remainder(rng):
    a = (rng.standard_normal(200) * 10).astype(np.float64)
    b = (rng.standard_normal(200) * 3).astype(np.float64)
    a[:5] = [5.0, -5.0, 5.0, -5.0, 0.0]
    b[:5] = [2.5, 2.5, -2.5, -2.5, 1.0]
    x, y = rlx.tensor(a), rlx.tensor(b)
    assert_close(x // y, np.floor_divide(a, b))
    assert_close(x % y, np.remainder(a, b))
    assert_close(rlx.fmod(x, y), np.fmod(a, b))


def test_where_masked_fill_clamp(rng):
    a = rng.standard_normal((3, 4)).astype(F32)
    b = rng.standard_normal((4,)).astype(F32)
    c = a > 0
    x = rlx.tensor(a)
    assert_close(rlx.where(rlx.tensor(c), x, rlx.tensor(b)), np.where(c, a, b))
    assert_close(rlx.where(x > 0, x, 0.0), np.where(c, a, 0))
    assert_close(x.where(x > 0, -1), np.where(c, a, -1))
    assert_close(rlx.where(rlx.tensor([1, 0, 2, 0]), rlx.tensor(b), 7.0), np.where([1, 0, 2, 0], b, 7))
    assert_close(x.masked_fill(x < 0, 9.0), np.where(a < 0, 9, a))
    assert_close(x.masked_fill(rlx.tensor([True, False, True, False]), -3), np.where([1, 0, 1, 0], -3, a))
    assert_close(x.clamp(-0.5, 0.5), np.clip(a, -0.5, 0.5))
    assert_close(x.clamp(min=0), np.maximum(a, 0))
    assert_close(x.clamp(max=0), np.minimum(a, 0))
    assert_close(rlx.clamp_min(x, 0.1), np.maximum(a, 0.1))
    assert_close(rlx.clamp_max(x, 0.1), np.minimum(a, 0.1))
    assert_close(rlx.clip(x, -1, 1), np.clip(a, -1, 1))
    n = rlx.tensor([np.nan, 1.0, 5.0])
    assert_close(n.clamp(0, 2), [np.nan, 1.0, 2.0])


AXES = [None, 0, 1, -1, (0, 2), (1, 2), (0, 1, 2), ()]


@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name,ref", [
    ("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min), ("prod", np.prod),
    ("var", np.var), ("std", np.std), ("norm", lambda a, axis, keepdims: np.sqrt(np.sum(a * a, axis, keepdims=keepdims)))])
def test_reductions(name, ref, axis, keepdims, rng):
    a = rng.standard_normal((3, 4, 5)).astype(np.float64)
    if name == "prod":
        a = 0.5 + np.abs(a) / 2
    x = rlx.from_numpy(a)
    want = ref(a, axis=axis, keepdims=keepdims)
    assert_close(getattr(rlx, name)(x, axis=axis, keepdims=keepdims), want)
    assert_close(getattr(x, name)(dim=axis, keepdim=keepdims), want)  # PyTorch spelling
    v = x.transpose(2, 0, 1)[:, 1:]                                 # a view
    assert_close(getattr(v, name)(axis, keepdims=keepdims),
                 ref(a.transpose(2, 0, 1)[:, 1:], axis=axis, keepdims=keepdims))


def test_reduction_dtypes_and_empty():
    i = rlx.tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert i.sum().dtype == rlx.int64 and i.sum(axis=0).tolist() == [3, 5, 7]
    assert i.prod(axis=1).dtype == rlx.int64 and i.prod(axis=1).tolist() == [0, 60]
    assert i.max().dtype == rlx.int32 and i.max().item() == 5
    assert i.mean().dtype == rlx.float32 and i.mean().item() == 2.5
    b = rlx.tensor([True, False, True])
    assert b.sum().item() == 2 and b.sum().dtype == rlx.int64
    assert b.all().item() is False and b.any().item() is True
    e = rlx.zeros((0, 3))
    assert e.sum(axis=0).tolist() == [0, 0, 0]
    assert e.prod(axis=0).tolist() == [1, 1, 1]
    assert np.isnan(e.mean(axis=0).numpy()).all()
    assert e.max(axis=0).tolist() == [-np.inf] * 3 and e.min(axis=0).tolist() == [np.inf] * 3
    assert rlx.tensor([1.0, np.nan, 3.0]).max().numpy() != rlx.tensor([1.0, np.nan, 3.0]).max().numpy()


def test_var_std_ddof(rng):
    a = rng.standard_normal((4, 6))
    x = rlx.tensor(a)
    assert_close(x.var(axis=1, ddof=1), np.var(a, axis=1, ddof=1))
    assert_close(x.std(correction=1), np.std(a, ddof=1))


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_arg_reductions(axis, rng):
    a = rng.integers(0, 5, size=(4, 6)).astype(np.float32)   # ties: the first index wins
    x = rlx.tensor(a)
    for name in ("argmax", "argmin"):
        out = getattr(x, name)(axis=axis)
        assert out.dtype == rlx.int64
        assert_close(out, getattr(np, name)(a, axis=axis))
        k = getattr(rlx, name)(x, axis, keepdims=True)
        assert_close(k, np.expand_dims(getattr(np, name)(a, axis=axis), axis) if axis is not None
                     else getattr(np, name)(a).reshape(1, 1))


def test_logsumexp_cumsum(rng):
    a = rng.standard_normal((3, 5))
    x = rlx.tensor(a)
    lse = lambda v, ax, kd=False: np.log(np.sum(np.exp(v), axis=ax, keepdims=kd))  # noqa: E731
    assert_close(x.logsumexp(axis=1), lse(a, 1))
    assert_close(rlx.logsumexp(x, dim=0, keepdim=True), lse(a, 0, True))
    assert_close(x.logsumexp(), lse(a, None))
    assert_close(rlx.tensor([-np.inf, -np.inf]).logsumexp(axis=0), -np.inf)
    assert_close(x.cumsum(axis=1), np.cumsum(a, axis=1))
    assert_close(x.cumsum(), np.cumsum(a))
    assert_close(x.cumsum(axis=0, exclusive=True), np.cumsum(a, axis=0) - a, atol=1e-12)
    ci = rlx.tensor([1, 2, 3], dtype=rlx.int32).cumsum(0)
    assert ci.dtype == rlx.int64 and ci.tolist() == [1, 3, 6]
    assert rlx.sum_all(x).ndim == 0 and abs(rlx.mean_all(x).item() - a.mean()) < 1e-12


def _source(rng, shape=(4, 5, 6)):
    a = rng.standard_normal(shape).astype(F32)
    return a, rlx.from_numpy(a)


def test_movement_views(rng):
    a, x = _source(rng)
    views = [
        (x.reshape(20, 6), a.reshape(20, 6)), (x.reshape(-1), a.reshape(-1)), (rlx.reshape(x, 2, -1, 3), a.reshape(2, -1, 3)),
        (x.transpose(), a.transpose()), (x.transpose(1, 2, 0), a.transpose(1, 2, 0)), (x.T, a.T),
        (x.permute(2, 0, 1), a.transpose(2, 0, 1)), (x.swapaxes(0, 2), a.swapaxes(0, 2)),
        (x.mT, np.swapaxes(a, -1, -2)), (rlx.t(x), np.swapaxes(a, -1, -2)),
        (rlx.moveaxis(x, 0, -1), np.moveaxis(a, 0, -1)),
        (x[:, :1].broadcast_to(3, 4, 5, 6), np.broadcast_to(a[:, :1], (3, 4, 5, 6))),
        (x[:, :1].expand(-1, 3, -1), np.broadcast_to(a[:, :1], (4, 3, 6))),
        (x.flatten(), a.ravel()), (x.flatten(1), a.reshape(4, 30)), (x.unsqueeze(1), a[:, None]),
        (rlx.expand_dims(x, (0, -1)), np.expand_dims(a, (0, -1))),
        (x[:, :1].squeeze(1), a[:, 0]), (x[:1, :, :1].squeeze(), a[0, :, 0]),
        (x[:1, :, :1].squeeze((0, 2)), a[0, :, 0]),
        (x.narrow(1, 1, 3), a[:, 1:4]), (x.narrow(2, -2, 2), a[:, :, -2:]),
        (x.slice(2, 1, None, 2), a[:, :, 1::2]), (x.slice(0, None, None, -1), a[::-1]),
        (x.select(1, 3), a[:, 3]), (x.select(-1, -1), a[..., -1]),
        (rlx.broadcast_to(rlx.tensor(1.5), (2, 2)), np.full((2, 2), 1.5, F32)),
        (rlx.flatten(rlx.tensor(3.0)), np.array([3.0], F32)),
    ]
    # identical expressions are one node (x.T is x.transpose()), and realizing
    # a non-contiguous view gives it its own buffer: check sharing first
    for i, (v, want) in enumerate(views[:-2]):
        assert v.shares_storage(x) and rlx.shares_storage(x, v), (i, v.shape)
    for v, want in views:
        assert_close(v, want)
    assert rlx.storage_bytes(x[1:, ::2]) == a.nbytes
    assert x.storage_bytes() == a.nbytes


def test_split_chunk(rng):
    a, x = _source(rng, (7, 4))
    parts = x.split([2, 4, 1])
    for p, w in zip(parts, np.split(a, [2, 6])):
        assert_close(p, w)
        assert p.shares_storage(x)
    parts = rlx.split(x, 3, dim=0)  # PyTorch: pieces of size 3
    assert [p.shape[0] for p in parts] == [3, 3, 1]
    parts = x.chunk(3, axis=0)
    assert [p.shape[0] for p in parts] == [3, 2, 2]
    for p, w in zip(parts, np.array_split(a, 3)):
        assert_close(p, w)
    parts = rlx.chunk(x, 2, dim=1)
    for p, w in zip(parts, np.array_split(a, 2, axis=1)):
        assert_close(p, w)


def test_data_movement(rng):
    a, x = _source(rng, (3, 4))
    b = rng.standard_normal((2, 4)).astype(np.float64)
    y = rlx.tensor(b)
    assert_close(rlx.cat([x, y]), np.concatenate([a, b]), dtype=rlx.float64)
    assert_close(rlx.concatenate([x, x], axis=1), np.concatenate([a, a], axis=1))
    assert_close(rlx.stack([x, x * 2], axis=1), np.stack([a, a * 2], axis=1))
    assert_close(rlx.stack([x[0], rlx.tensor(b[0])], dim=-1), np.stack([a[0], b[0]], axis=-1))
    assert_close(x.tile(2, axis=0), np.tile(a, (2, 1)))
    assert_close(rlx.tile(x, (2, 1, 3)), np.tile(a, (2, 1, 3)))
    assert_close(x.tile(0, axis=1), np.zeros((3, 0), F32))
    assert_close(x.flip(0), a[::-1])
    assert_close(x.flip(), a[::-1, ::-1])
    assert_close(x.roll(2, axis=1), np.roll(a, 2, axis=1))
    assert_close(x.roll(-5, axis=0), np.roll(a, -5, axis=0))
    assert_close(x.roll(5), np.roll(a, 5))
    assert_close(rlx.roll(x, (1, 2), axis=(0, 1)), np.roll(a, (1, 2), axis=(0, 1)))
    assert_close(x.pad((1, 2), axis=1, constant_values=-1), np.pad(a, ((0, 0), (1, 2)), constant_values=-1))
    assert_close(rlx.pad(x, ((1, 0), (0, 2))), np.pad(a, ((1, 0), (0, 2))))
    assert_close(rlx.pad(x, 1, constant_values=7.5), np.pad(a, 1, constant_values=7.5))
    idx = np.array([[2, 0], [-1, 1]])
    assert_close(x.gather(idx, axis=0), np.take(a, idx, axis=0))
    assert_close(rlx.gather(x, rlx.tensor(idx, dtype=rlx.int32), axis=1), np.take(a, idx, axis=1))
    assert_close(rlx.take(x, [0, 11, -1]), np.take(a, [0, 11, -1]))
    assert_close(x.index_select(1, [3, 0, 3]), a[:, [3, 0, 3]])
    assert_close(rlx.index_select(x, dim=0, index=rlx.tensor([2, 2])), a[[2, 2]])
    assert_close(x.astype(rlx.int32), a.astype(np.int32))
    assert_close(rlx.cast(rlx.tensor([np.nan, 1.7, -1.7, 1e20]), "int32"), [0, 1, -1, 2**31 - 1])
    assert_close(rlx.cast(rlx.tensor([0.0, -0.5, np.nan]), rlx.bool), [False, True, True])
    c = x.T.contiguous().realize()
    assert_close(c, a.T)
    assert not c.shares_storage(x)
    assert_close(x.stop_gradient(), a)
    assert_close(x.detach(), a)


def test_linear_algebra(rng):
    a = rng.standard_normal((2, 3, 4))
    b = rng.standard_normal((4, 5))
    v = rng.standard_normal(4)
    x, y, z = rlx.tensor(a), rlx.tensor(b), rlx.tensor(v)
    assert_close(x @ y, a @ b)
    assert_close(rlx.matmul(x, z), a @ v)
    assert_close(z @ y, v @ b)
    assert_close(z @ z, v @ v)
    assert_close(rlx.tensor(b).T @ x.swapaxes(1, 2)[:, :, :, None][..., 0], b.T @ a.swapaxes(1, 2))
    assert_close(rlx.matmul_t(x, rlx.tensor(b.T)), a @ b)
    ai = rng.integers(-3, 4, (3, 4)).astype(np.int32)
    bi = rng.integers(-3, 4, (4, 2)).astype(np.int64)
    r = rlx.tensor(ai) @ rlx.tensor(bi)
    assert r.dtype == rlx.int64 and r.tolist() == (ai.astype(np.int64) @ bi).tolist()
    w = rng.standard_normal((6, 4))
    bias = rng.standard_normal(6)
    assert_close(rlx.linear(x, rlx.tensor(w), rlx.tensor(bias)), a @ w.T + bias)
    assert_close(x.linear(rlx.tensor(w)), a @ w.T)
    acts = {"none": lambda t: t, "relu": lambda t: np.maximum(t, 0), "gelu": UNARY["gelu"],
            "gelu_tanh": UNARY["gelu_tanh"], "silu": UNARY["silu"], "tanh": np.tanh, "sigmoid": sigmoid}
    for act, f in acts.items():
        assert_close(rlx.linear_act(x, rlx.tensor(w), rlx.tensor(bias), act), f(a @ w.T + bias))
        assert_close(rlx.linear(x, rlx.tensor(w), None, act=rlx.Act[act.upper()]), f(a @ w.T))
    m = rng.standard_normal((3, 4, 4)) + 4 * np.eye(4)
    rhs = rng.standard_normal((3, 4, 2))
    assert_close(rlx.solve(rlx.tensor(m), rlx.tensor(rhs)), np.linalg.solve(m, rhs), rtol=1e-8, atol=1e-9)
    assert_close(rlx.linalg.solve(rlx.tensor(m[0]), rlx.tensor(rhs[0, :, 0])), np.linalg.solve(m[0], rhs[0, :, 0]),
                 rtol=1e-8, atol=1e-9)
    assert_close(rlx.inv(rlx.tensor(m)), np.linalg.inv(m), rtol=1e-8, atol=1e-9)
    assert_close(rlx.linalg.norm(x, axis=-1), np.linalg.norm(a, axis=-1))


def _log_softmax(a, axis=-1):
    m = a.max(axis=axis, keepdims=True)
    return a - m - np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True))


def test_softmax_norms_losses(rng):
    a = rng.standard_normal((3, 5)).astype(np.float64)
    x = rlx.tensor(a)
    assert_close(x.softmax(), np.exp(_log_softmax(a)))
    assert_close(rlx.softmax(x, dim=0), np.exp(_log_softmax(a, 0)))
    assert_close(x.log_softmax(axis=0), _log_softmax(a, 0))
    g, b = rng.standard_normal(5), rng.standard_normal(5)
    mu, var = a.mean(-1, keepdims=True), a.var(-1, keepdims=True)
    assert_close(x.layer_norm(rlx.tensor(g), rlx.tensor(b), eps=1e-5), (a - mu) / np.sqrt(var + 1e-5) * g + b)
    assert_close(rlx.layer_norm(x), (a - mu) / np.sqrt(var + 1e-5))
    assert_close(rlx.layer_norm(x, weight=rlx.tensor(g), eps=1e-3), (a - mu) / np.sqrt(var + 1e-3) * g)
    rms = a / np.sqrt(np.mean(a * a, -1, keepdims=True) + 1e-6)
    assert_close(x.rms_norm(rlx.tensor(g)), rms * g)
    assert_close(rlx.rms_norm(x), rms)
    p = np.exp(_log_softmax(rng.standard_normal((3, 5))))
    assert_close(rlx.cross_entropy(x, rlx.tensor(p)), -np.sum(p * _log_softmax(a), -1))
    labels = np.array([4, 0, 2])
    want = -_log_softmax(a)[np.arange(3), labels]
    assert_close(rlx.softmax_cross_entropy_with_logits(x, rlx.tensor(labels)), want)
    assert_close(x.softmax_cross_entropy_with_logits(rlx.tensor(labels.astype(np.float32) + 0.3)), want)


def _attention_ref(q, k, v, h, d, mask=None, window=0, keep=None):
    B, Sq, _ = q.shape
    Sk = k.shape[1]
    out = np.zeros_like(q)
    for hh in range(h):
        sl = slice(hh * d, (hh + 1) * d)
        s = q[:, :, sl] @ k[:, :, sl].transpose(0, 2, 1) / np.sqrt(d)
        allowed = np.ones((B, Sq, Sk), bool)
        pos = Sk - Sq + np.arange(Sq)[:, None]
        kk = np.arange(Sk)[None, :]
        if mask == "causal":
            allowed &= kk <= pos
        if mask == "sliding":
            allowed &= (kk <= pos) & (kk > pos - window)
        if keep is not None:
            allowed &= keep[:, None, :] != 0
        s = np.where(allowed, s, -np.inf)
        m = np.max(s, -1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        e = np.where(allowed, np.exp(s - m), 0)
        den = e.sum(-1, keepdims=True)
        p = np.divide(e, den, out=np.zeros_like(e), where=den > 0)
        out[:, :, sl] = p @ v[:, :, sl]
    return out


def test_attention_and_rope(rng):
    B, Sq, Sk, H, D = 2, 3, 5, 2, 4
    q = rng.standard_normal((B, Sq, H * D))
    k = rng.standard_normal((B, Sk, H * D))
    v = rng.standard_normal((B, Sk, H * D))
    Q, K, V = rlx.tensor(q), rlx.tensor(k), rlx.tensor(v)
    assert_close(rlx.attention(Q, K, V, H), _attention_ref(q, k, v, H, D))
    assert_close(rlx.attention(Q, K, V, H, D, mask="causal"), _attention_ref(q, k, v, H, D, "causal"))
    assert_close(rlx.attention(Q, K, V, H, D, mask=rlx.Mask.SLIDING, window=2),
                 _attention_ref(q, k, v, H, D, "sliding", 2))
    keep = np.array([[1, 1, 0, 1, 0], [0, 0, 0, 0, 0]])   # second batch: every key masked -> zeros
    assert_close(rlx.attention(Q, K, V, H, mask=rlx.tensor(keep)), _attention_ref(q, k, v, H, D, keep=keep))
    assert_close(rlx.attention_masked(Q, K, V, rlx.tensor(keep), H, D), _attention_ref(q, k, v, H, D, keep=keep))
    # rope: rotate-half per head
    x = rng.standard_normal((B, Sk, H * D))
    ang = rng.standard_normal((Sk, D // 2))
    c, s = np.cos(ang), np.sin(ang)
    want = x.copy()
    for hh in range(H):
        x1 = x[:, :, hh * D: hh * D + D // 2]
        x2 = x[:, :, hh * D + D // 2: (hh + 1) * D]
        want[:, :, hh * D: hh * D + D // 2] = x1 * c - x2 * s
        want[:, :, hh * D + D // 2: (hh + 1) * D] = x2 * c + x1 * s
    assert_close(rlx.rope(rlx.tensor(x), rlx.tensor(c), rlx.tensor(s), D), want)


def _conv_ref(x, w, b, stride, padding, dilation, groups):
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    OH = (H + 2 * padding[0] - dilation[0] * (KH - 1) - 1) // stride[0] + 1
    OW = (W + 2 * padding[1] - dilation[1] * (KW - 1) - 1) // stride[1] + 1
    out = np.zeros((N, O, OH, OW))
    og = O // groups
    for o in range(O):
        g = o // og
        for i in range(OH):
            for j in range(OW):
                patch = xp[:, g * Cg:(g + 1) * Cg,
                           i * stride[0]: i * stride[0] + dilation[0] * (KH - 1) + 1: dilation[0],
                           j * stride[1]: j * stride[1] + dilation[1] * (KW - 1) + 1: dilation[1]]
                out[:, o, i, j] = np.sum(patch * w[o], axis=(1, 2, 3))
    if b is not None:
        out += b[None, :, None, None]
    return out


def _pool_ref(x, k, s, p, kind):
    N, C, H, W = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0],) * 2, (p[1],) * 2),
                constant_values=-np.inf if kind == "max" else 0)
    OH = (H + 2 * p[0] - k[0]) // s[0] + 1
    OW = (W + 2 * p[1] - k[1]) // s[1] + 1
    out = np.zeros((N, C, OH, OW))
    for i in range(OH):
        for j in range(OW):
            win = xp[:, :, i * s[0]: i * s[0] + k[0], j * s[1]: j * s[1] + k[1]]
            out[:, :, i, j] = win.max(axis=(2, 3)) if kind == "max" else win.mean(axis=(2, 3))
    return out


def test_conv_and_pooling(rng):
    x = rng.standard_normal((2, 4, 7, 6))
    w = rng.standard_normal((6, 2, 3, 2))
    b = rng.standard_normal(6)
    X, Wt = rlx.tensor(x), rlx.tensor(w)
    assert_close(rlx.conv2d(X, Wt, rlx.tensor(b), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2),
                 _conv_ref(x, w, b, (2, 1), (1, 0), (1, 2), 2))
    w1 = rng.standard_normal((3, 4, 3, 3))
    assert_close(X.conv2d(rlx.tensor(w1), padding=1), _conv_ref(x, w1, None, (1, 1), (1, 1), (1, 1), 1))
    assert_close(rlx.max_pool2d(X, 2), _pool_ref(x, (2, 2), (2, 2), (0, 0), "max"))
    assert_close(X.max_pool2d((3, 2), stride=1, padding=1), _pool_ref(x, (3, 2), (1, 1), (1, 1), "max"))
    assert_close(rlx.avg_pool2d(X, 3, stride=2, padding=1), _pool_ref(x, (3, 3), (2, 2), (1, 1), "avg"))


def test_fft(rng):
    a = rng.standard_normal((3, 6)) + 1j * rng.standard_normal((3, 6))
    lay = rlx.to_complex_layout(a)
    x = rlx.tensor(lay)
    assert_close(x.fft(), rlx.to_complex_layout(np.fft.fft(a)), rtol=1e-9, atol=1e-9)
    assert_close(rlx.ifft(x), rlx.to_complex_layout(np.fft.ifft(a) * 6), rtol=1e-9, atol=1e-9)
    assert_close(rlx.ifft(rlx.fft(x)), lay * 6, rtol=1e-9, atol=1e-9)
    b = rng.standard_normal((5, 2)) + 1j * rng.standard_normal((5, 2))
    lb = rlx.to_complex_layout(b, axis=0)          # [10, 2]
    assert_close(rlx.fft_axis(rlx.tensor(lb), 0), rlx.to_complex_layout(np.fft.fft(b, axis=0), axis=0),
                 rtol=1e-9, atol=1e-9)
    assert_close(rlx.fft(rlx.tensor(lb), axis=0), rlx.to_complex_layout(np.fft.fft(b, axis=0), axis=0),
                 rtol=1e-9, atol=1e-9)
    assert_close(rlx.ifft(rlx.tensor(lb), dim=0), rlx.to_complex_layout(np.fft.ifft(b, axis=0) * 5, axis=0),
                 rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(rlx.from_complex_layout(x.fft().numpy()), np.fft.fft(a), rtol=1e-9, atol=1e-9)


MINIFLOATS = {  # (exponent bits, mantissa bits, max finite)
    "fp8_e4m3": (4, 3, 448.0), "fp8_e5m2": (5, 2, 57344.0), "fp6_e2m3": (2, 3, 7.5),
    "fp6_e3m2": (3, 2, 28.0), "fp4_e2m1": (2, 1, 6.0),
}


def _quantize(v, fmt):
    e_bits, m_bits, vmax = MINIFLOATS[fmt]
    bias = 2 ** (e_bits - 1) - 1
    emin = 1 - bias
    a = np.abs(v)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(e, emin)
    q = 2.0 ** (e - m_bits)
    r = np.round(a / q) * q               # half to even
    return np.sign(v) * np.minimum(r, vmax)


def _mx(v, fmt, block):
    e_bits, m_bits, vmax = MINIFLOATS[fmt]
    emax = int(np.floor(np.log2(vmax)))
    out = np.zeros_like(v)
    k = v.shape[-1]
    step = k if block == 0 else block
    for s in range(0, k, step):
        blk = v[..., s:s + step]
        amax = np.abs(blk).max(axis=-1, keepdims=True)
        scale = 2.0 ** (np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - emax)
        if block == 0:
            amax_all = np.abs(v).max()
            scale = 2.0 ** (np.floor(np.log2(amax_all if amax_all > 0 else 1.0)) - emax)
        out[..., s:s + step] = _quantize(blk / scale, fmt) * scale
    return out


@pytest.mark.parametrize("fmt", sorted(MINIFLOATS))
@pytest.mark.parametrize("block", [0, 4, 5])
def test_scaled_matmul(fmt, block, rng):
    x = rng.standard_normal((3, 12)).astype(F32)
    w = rng.standard_normal((4, 12)).astype(F32)
    want = _mx(f64(x), fmt, block) @ _mx(f64(w), fmt, block).T
    assert_close(rlx.scaled_matmul(rlx.tensor(x), rlx.tensor(w), fmt, block), want, rtol=1e-5, atol=1e-5)


def test_weight_synthesis_and_splines(rng):
    m, k, n, d, E = 3, 8, 5, 2, 6
    x = rng.standard_normal((m, k)).astype(F32)
    idx = rng.integers(0, E, (n, k // d))
    cb = rng.standard_normal((E, d)).astype(F32)
    W = np.concatenate([cb[idx[:, j]] for j in range(k // d)], axis=1)       # [n, k]
    assert_close(rlx.synth_matmul(rlx.tensor(x), rlx.tensor(idx), rlx.tensor(cb)), f64(x) @ W.T, rtol=1e-5)
    assert_close(rlx.synth_reconstruct(rlx.tensor(idx, dtype=rlx.int32), rlx.tensor(cb)), W.T)
    C, G = 3, 5
    xs = rng.standard_normal((2, 4, C))
    coeff = rng.standard_normal((C, G))
    ctr = np.linspace(-2, 2, G)
    h = 4 / (G - 1)
    want = np.einsum("...cg,cg->...c", np.exp(-((xs[..., None] - ctr) / h) ** 2), coeff)
    assert_close(rlx.spline_activation(rlx.tensor(xs), rlx.tensor(coeff), -2, 2), want)
    assert_close(rlx.tensor(xs).spline_activation(rlx.tensor(coeff), -2.0, 2.0, num_basis=G), want)


def test_constructors(rng):
    assert_close(rlx.zeros(2, 3), np.zeros((2, 3)), dtype=rlx.float32)
    assert_close(rlx.zeros((2, 3), dtype=rlx.int32), np.zeros((2, 3)), dtype=rlx.int32)
    assert_close(rlx.ones([4], dtype="float64"), np.ones(4), dtype=rlx.float64)
    assert_close(rlx.ones(()), np.ones(()))
    assert_close(rlx.full((2, 2), 7), np.full((2, 2), 7), dtype=rlx.int64)
    assert_close(rlx.full(3, 2.5), np.full(3, 2.5), dtype=rlx.float32)
    assert_close(rlx.full(3, True), np.full(3, True), dtype=rlx.bool)
    assert_close(rlx.full((2,), 3.9, dtype=rlx.int32), [3, 3])
    assert_close(rlx.arange(5), np.arange(5), dtype=rlx.int64)
    assert_close(rlx.arange(1, 2, 0.25), np.arange(1, 2, 0.25), dtype=rlx.float32)
    assert_close(rlx.arange(10, 0, -3, dtype=rlx.int32), np.arange(10, 0, -3))
    assert_close(rlx.eye(3), np.eye(3))
    assert_close(rlx.eye(2, dtype=rlx.bool), np.eye(2, dtype=bool))
    for fn in (rlx.rand, rlx.randn):
        r1 = fn(100, 50, seed=3)
        r2 = fn((100, 50), seed=3)
        assert r1.shape == (100, 50) and np.array_equal(r1.numpy(), r2.numpy())
        assert not np.array_equal(r1.numpy(), fn(100, 50, seed=4).numpy())
        assert fn(3, dtype=rlx.float64).dtype == rlx.float64
    u = rlx.rand(100000, seed=1).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    g = rlx.randn(100000, seed=1).numpy()
    assert abs(g.mean()) < 0.02 and abs(g.std() - 1) < 0.02
    x = rlx.tensor(rng.standard_normal((2, 3)))
    assert_close(rlx.zeros_like(x), np.zeros((2, 3)), dtype=rlx.float64)
    assert_close(x.ones_like(), np.ones((2, 3)), dtype=rlx.float64)
    assert_close(rlx.full_like(x, 4), np.full((2, 3), 4.0), dtype=rlx.float64)
    assert_close(rlx.zeros_like(x, dtype=rlx.int32), np.zeros((2, 3)), dtype=rlx.int32)
    assert_close(rlx.scalar(2.5), 2.5)
    assert rlx.scalar(1, rlx.int32).dtype == rlx.int32
    assert_close(rlx.tensor([rlx.tensor([1.0, 2.0]), rlx.tensor([3.0, 4.0])]), [[1, 2], [3, 4]])
    assert_close(rlx.Tensor([[1, 2]]), [[1, 2]], dtype=rlx.int64)


def test_realize_many_read_and_introspection(rng):
    a = rng.standard_normal((3, 4)).astype(F32)
    x = rlx.tensor(a)
    y, z = x * 2, (x * 2).sum()
    assert not y.is_realized
    rlx.realize(y, z)
    assert y.is_realized and z.is_realized
    assert y.read().flags.writeable and np.array_equal(y.read(), a * 2)
    assert y.read(np.float64).dtype == np.float64 and np.allclose(y.read(rlx.float64), a * 2)
    assert y.read(rlx.float32).dtype == np.float32
    assert y.read(rlx.int32).dtype == np.int32
    assert y.numpy(copy=True).flags.writeable
    assert x.dim() == 2 and x.dim(1) == 4 and x.dim(-2) == 3 and x.ndim == 2 and len(x) == 3
    assert x.numel() == 12 and x.size == 12 and x.nbytes == 48 and x.itemsize == 4
    assert x.data_ptr() != 0
    assert rlx.dtype_name(rlx.float32) == "f32" and rlx.dtype_name("bool") == "bool"
    assert [r.tolist() for r in x] == a.tolist()


def test_runtime_control(tmp_path):
    n = rlx.get_num_threads()
    rlx.set_num_threads(2)
    assert rlx.get_num_threads() == 2
    rlx.set_num_threads(0)
    assert rlx.get_num_threads() == n
    rlx.set_option("num_threads", "0")
    rlx.stats_reset()
    (rlx.ones(3) + 1).realize()
    s = rlx.stats()
    assert set(s) == {"kernels_compiled", "cache_hits", "cache_misses", "kernels_run", "compile_seconds",
                      "arena_bytes", "peak_bytes", "kernel_cache_bytes", "kernel_evictions", "plan_cache_bytes",
                      "plan_evictions"}
    assert s["kernels_run"] >= 1
    p = tmp_path / "g.dot"
    rlx.dump_dot(rlx.ones(3) * 2 + 1, p)
    assert p.read_text().lstrip().startswith(("digraph", "strict digraph"))
    assert "LLVM" in rlx.host_info() or rlx.host_info()
    assert rlx.version() == rlx.__version__


def test_optional_tensor_arguments_given_as_lists(rng):
    # a bias/gamma given as a list becomes a temporary Tensor whose handle the
    # library reads: it must stay alive through the call (it was released
    # before the call once, and the library read freed memory)
    x = rng.standard_normal((3, 4)).astype(F32)
    w = rng.standard_normal((5, 4)).astype(F32)
    bias = [0.5, -1.0, 2.0, 0.0, 3.0]
    gamma, beta = [1.0, 2.0, 0.5, -1.0], [0.0, 1.0, -1.0, 2.0]
    for _ in range(3):
        assert_close(rlx.linear(x, w, bias), x @ w.T + np.float32(bias), rtol=1e-5)
        assert_close(rlx.linear(x, w, bias, act="relu"), np.maximum(x @ w.T + np.float32(bias), 0), rtol=1e-5)
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        assert_close(rlx.layer_norm(x, gamma, beta), (x - mu) / np.sqrt(var + 1e-5) * gamma + beta,
                     rtol=1e-4, atol=1e-5)
        assert_close(rlx.rms_norm(x, gamma), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * gamma,
                     rtol=1e-4, atol=1e-5)
        img = rng.standard_normal((1, 1, 3, 3)).astype(F32)
        assert_close(rlx.conv2d(img, np.ones((2, 1, 3, 3), F32), [1.0, -1.0]),
                     np.array([img.sum() + 1, img.sum() - 1], F32).reshape(1, 2, 1, 1), rtol=1e-5, atol=1e-5)
