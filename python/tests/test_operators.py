"""Operator and reflected-operator tables against NumPy, every dtype pair."""
import operator

import numpy as np
import pytest

import rlx
from conftest import assert_close

DTYPES = [rlx.bool, rlx.int32, rlx.int64, rlx.float32, rlx.float64]
ORDER = {rlx.bool: 0, rlx.int32: 1, rlx.int64: 2, rlx.float32: 3, rlx.float64: 4}


def promote(a, b):
    """librlx's promotion: bool < i32 < i64 < f32 < f64, any integer with f32 is f32."""
    return a if ORDER[a] >= ORDER[b] else b


def sample(rng, dt, shape, nonzero=False, small=False):
    if dt == rlx.bool:
        a = rng.integers(0, 2, shape).astype(bool)
        return np.ones(shape, bool) if nonzero else a
    if dt.is_int:
        a = rng.integers(-6 if not small else 0, 7 if not small else 4, shape)
        if nonzero:
            a[a == 0] = 3
        return a.astype(dt.np)
    a = rng.standard_normal(shape) * 3
    if small:
        a = np.abs(a) / 3 + 0.5
    if nonzero:
        a[np.abs(a) < 0.1] = 0.5
    return a.astype(dt.np)


# name -> (python operator, numpy reference on operands already in the result dtype)
ARITH = {
    "+": (operator.add, np.add), "-": (operator.sub, np.subtract), "*": (operator.mul, np.multiply),
    "**": (operator.pow, np.power), "//": (operator.floordiv, np.floor_divide),
    "%": (operator.mod, np.remainder), "/": (operator.truediv, np.true_divide),
}
COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
           "!=": operator.ne}


def expected_arith(op, da, db, a, b):
    rd = promote(da, db)
    if op == "/" and not rd.is_float:
        rd = rlx.float32
    if rd == rlx.bool and op in ("+", "*"):
        return (np.logical_or if op == "+" else np.logical_and)(a, b), rd
    if rd == rlx.bool and op in ("//", "%"):
        rd = rlx.int64      # NumPy computes these on bools too (in int8)
    if rd == rlx.bool:
        return None, rd     # - and ** on two bools: RLX_E_DTYPE
    x, y = a.astype(rd.np), b.astype(rd.np)
    with np.errstate(all="ignore"):
        return ARITH[op][1](x, y), rd


@pytest.mark.parametrize("op", sorted(ARITH))
@pytest.mark.parametrize("da", DTYPES, ids=str)
@pytest.mark.parametrize("db", DTYPES, ids=str)
def test_tensor_tensor(op, da, db, rng):
    small = op == "**"
    a = sample(rng, da, (3, 1, 4), small=small)
    b = sample(rng, db, (5, 1), nonzero=op in ("/", "//", "%"), small=small)
    want, rd = expected_arith(op, da, db, a, b)
    x, y = rlx.tensor(a), rlx.tensor(b)
    if want is None:
        with pytest.raises(rlx.RlxError) as e:
            ARITH[op][0](x, y)
        assert e.value.status == rlx.Status.E_DTYPE
        return
    out = ARITH[op][0](x, y)
    tol = dict(rtol=3e-5, atol=3e-5) if rd == rlx.float32 else {}
    assert_close(out, want, dtype=rd, **tol)
    # ndarray on the left: NumPy defers to the reflected operator
    out2 = ARITH[op][0](a, y)
    assert isinstance(out2, rlx.Tensor)
    assert_close(out2, want, **tol)


SCALARS = [2, -3, 1.5, -0.75, True]


@pytest.mark.parametrize("op", sorted(ARITH))
@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("s", SCALARS, ids=repr)
def test_tensor_scalar_and_reflected(op, dt, s, rng):
    if op == "**" and isinstance(s, int) and s < 0 and not isinstance(s, bool):
        s = 3
    a = sample(rng, dt, (2, 3), nonzero=True, small=op == "**")
    x = rlx.tensor(a)
    # the scalar's dtype next to a tensor (PyTorch rule)
    if isinstance(s, bool):
        sd = dt
    elif isinstance(s, int):
        sd = rlx.int64 if dt == rlx.bool else dt
    else:
        sd = dt if dt.is_float else rlx.float32
    for reflected in (False, True):
        lhs, rhs = (np.asarray(s), a) if reflected else (a, np.asarray(s))
        dl, dr = (sd, dt) if reflected else (dt, sd)
        if op in ("/", "//", "%") and reflected is False and s == 0:
            continue
        if op in ("/", "//", "%") and reflected and not np.all(a != 0):
            continue
        rd = promote(dl, dr)
        if op == "/" and not rd.is_float:
            rd = rlx.float32
        if rd == rlx.bool and op in ("//", "%"):
            rd = rlx.int64
        if rd == rlx.bool and op not in ("+", "*"):
            with pytest.raises(rlx.RlxError) as e:
                ARITH[op][0](s, x) if reflected else ARITH[op][0](x, s)
            assert e.value.status == rlx.Status.E_DTYPE
            continue
        if rd == rlx.bool:
            want = (np.logical_or if op == "+" else np.logical_and)(lhs, rhs)
        else:
            with np.errstate(all="ignore"):
                want = ARITH[op][1](lhs.astype(rd.np), rhs.astype(rd.np))
        out = ARITH[op][0](s, x) if reflected else ARITH[op][0](x, s)
        tol = dict(rtol=3e-5, atol=3e-5) if rd == rlx.float32 else {}
        assert_close(out, want, dtype=rd, **tol)


@pytest.mark.parametrize("op", sorted(COMPARE))
@pytest.mark.parametrize("da", DTYPES, ids=str)
@pytest.mark.parametrize("db", DTYPES, ids=str)
def test_comparisons(op, da, db, rng):
    a = sample(rng, da, (4, 1, 3))
    b = sample(rng, db, (1, 5, 3))
    b[0, 0] = a[0, 0].astype(db.np)      # some equal elements
    want = COMPARE[op](a, b)
    out = COMPARE[op](rlx.tensor(a), rlx.tensor(b))
    assert_close(out, want, dtype=rlx.bool)
    for s in (0, 1, -2, 0.5, 2.0, True):
        assert_close(COMPARE[op](rlx.tensor(a), s), COMPARE[op](a, s), dtype=rlx.bool)
        # reflected: Python swaps to the mirrored comparison
        assert_close(COMPARE[op](s, rlx.tensor(a)), COMPARE[op](s, a), dtype=rlx.bool)


def test_comparison_with_float_scalar_on_large_ints():
    x = rlx.tensor(np.array([2**31 - 1, 2, 3], np.int32))
    assert (x < 2.5).tolist() == [False, True, False]
    assert (x > 2147483646.5).tolist() == [True, False, False]
    big = rlx.tensor(np.array([2**62 + 1, 5], np.int64))
    assert (big == 2**62 + 1).tolist() == [True, False]
    assert (big + 2**60).tolist() == [2**62 + 1 + 2**60, 5 + 2**60]
    assert (rlx.tensor(np.array([1], np.int32)) + 2**40).dtype == rlx.int64


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_unary_operators(dt, rng):
    a = sample(rng, dt, (3, 4))
    x = rlx.tensor(a)
    if dt == rlx.bool:
        with pytest.raises(rlx.RlxError) as e:
            -x
        assert e.value.status == rlx.Status.E_DTYPE
        assert_close(~x, ~a)
        assert_close(abs(x), a, dtype=rlx.bool)
    else:
        assert_close(-x, -a, dtype=dt)
        assert_close(abs(x), np.abs(a), dtype=dt)
        with pytest.raises(TypeError):
            ~x
    assert (+x) is x


def test_logical_operators(rng):
    a = rng.integers(0, 2, (3, 4)).astype(bool)
    b = rng.integers(0, 2, (4,)).astype(bool)
    x, y = rlx.tensor(a), rlx.tensor(b)
    assert_close(x & y, a & b)
    assert_close(x | y, a | b)
    assert_close(x ^ y, a ^ b)
    assert_close(x & True, a & True)
    assert_close(False | x, a)
    assert_close(rlx.logical_xor(x, y), a ^ b)
    with pytest.raises(TypeError):
        rlx.tensor([1, 2]) & rlx.tensor([1, 0])


@pytest.mark.parametrize("da", [rlx.int32, rlx.int64, rlx.float32, rlx.float64], ids=str)
@pytest.mark.parametrize("db", [rlx.int32, rlx.int64, rlx.float32, rlx.float64], ids=str)
def test_matmul_operator(da, db, rng):
    a = sample(rng, da, (2, 3, 4))
    b = sample(rng, db, (4, 5))
    rd = promote(da, db)
    out = rlx.tensor(a) @ rlx.tensor(b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert_close(out, want, dtype=rd, rtol=1e-4, atol=1e-4)
    assert_close(a @ rlx.tensor(b), want, rtol=1e-4, atol=1e-4)        # ndarray @ Tensor
    assert_close(rlx.tensor(a) @ b.tolist(), want, rtol=1e-4, atol=1e-4)


def test_bool_matmul_and_misc_errors():
    with pytest.raises(rlx.RlxError) as e:
        rlx.tensor([[True]]) @ rlx.tensor([[False]])
    assert e.value.status == rlx.Status.E_DTYPE
    x = rlx.tensor([1.0, 2.0])
    assert (x == "a") is False and (x != None) is True  # noqa: E711  (not tensors: identity)
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(TypeError):
        x[0] = 1.0


def test_python_protocols():
    x = rlx.tensor([[1.5, 2.0], [3.0, 4.0]])
    assert float(x[0, 0]) == 1.5 and int(x[1, 1]) == 4
    assert bool(rlx.tensor([True])) is True
    with pytest.raises(ValueError):
        bool(x)
    assert [1, 2, 3][rlx.tensor(1)] == 2
    assert x[0, 1].item() == 2.0 and isinstance(rlx.tensor(3).item(), int)
    assert rlx.tensor(True).item() is True
    assert x.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert "%.2f" % x[0, 0] == "1.50" and "{:.1f}".format(x[0, 0]) == "1.5"
    assert hash(x) == hash(x)
    with pytest.raises(TypeError):
        len(rlx.tensor(1.0))
    import copy
    import pickle
    c = copy.copy(x)
    assert c is not x and c.handle == x.handle and c.tolist() == x.tolist()
    assert copy.deepcopy(x) is x
    y = pickle.loads(pickle.dumps(x))
    assert y.dtype == rlx.float32 and y.tolist() == x.tolist()
    assert rlx.float32 == np.float32 and rlx.float32 == "f32" and rlx.int64 == np.dtype("int64")
    assert rlx.bool == bool and rlx.int64 == int and rlx.float64 == float and rlx.float32 != rlx.float64
    assert rlx.zeros(2, dtype=float).dtype == rlx.float64 and rlx.zeros(2, dtype="float").dtype == rlx.float64
