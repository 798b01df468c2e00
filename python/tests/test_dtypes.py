"""The narrow dtypes (float16, bfloat16, int8, uint8, int16, uint32) in the
binding: names, zero-copy NumPy round trips, bfloat16 read out as values and
as bits, arithmetic against independent references, PyTorch promotion as
rlx.h states it, casts, printing, and the errors."""
import pickle

import numpy as np
import pytest

import rlx
from conftest import assert_close

# (rlx dtype, NumPy dtype, C short name, enum value)
NARROW = [(rlx.float16, np.float16, "f16", 5), (rlx.int8, np.int8, "i8", 7), (rlx.uint8, np.uint8, "u8", 8),
          (rlx.int16, np.int16, "i16", 9), (rlx.uint32, np.uint32, "u32", 10)]
ALL = [rlx.bool, rlx.int8, rlx.uint8, rlx.int16, rlx.int32, rlx.uint32, rlx.int64, rlx.float16, rlx.bfloat16,
       rlx.float32, rlx.float64]
INTS = [(rlx.int8, np.int8), (rlx.uint8, np.uint8), (rlx.int16, np.int16), (rlx.uint32, np.uint32)]


def values(npdt, rng, shape=(4, 5)):
    if np.issubdtype(npdt, np.integer):
        info = np.iinfo(npdt)
        a = rng.integers(info.min, info.max, shape, dtype=npdt, endpoint=True)
        a.flat[0], a.flat[1] = info.min, info.max
        return a
    a = (rng.standard_normal(shape) * 100).astype(npdt)
    a.flat[:5] = [np.inf, -np.inf, np.finfo(npdt).tiny, np.finfo(npdt).max, -0.0]
    return a


# ---------------------------------------------------------- bfloat16 reference

def bf16_value(bits):
    """float32 values of bfloat16 bit patterns: the high half of an f32."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def bf16_round(x):
    """bfloat16 bits of float64 values, rounded once to nearest even (for
    finite values in the normal range): frexp gives m in [0.5, 1), 8
    significant bits are m * 2^8 rounded by rint (half to even)."""
    x = np.asarray(x, np.float64)
    m, e = np.frexp(x)
    r = np.ldexp(np.rint(np.ldexp(m, 8)), e - 8)
    return (r.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


# ----------------------------------------------------------------- names

def test_names_codes_and_aliases():
    for d, npdt, short, code in NARROW + [(rlx.bfloat16, None, "bf16", 6)]:
        assert int(d.code) == code
        assert d.short == short and rlx.dtype_name(d) == short
        assert d == short and d == d.name and rlx.tensor([1], dtype=short).dtype is d
        if npdt is not None:
            assert d == npdt and d == np.dtype(npdt) and d.np == np.dtype(npdt)
        assert pickle.loads(pickle.dumps(d)) is d
    assert rlx.half is rlx.float16 and rlx.short is rlx.int16
    assert rlx.float16.is_float and rlx.bfloat16.is_float and not rlx.bfloat16.is_int
    assert rlx.uint8.is_int and rlx.uint8.is_unsigned and rlx.int8.is_int and not rlx.int8.is_unsigned
    assert rlx.bfloat16.itemsize == 2 and rlx.bfloat16.values_np == np.float32
    # bfloat16 is not NumPy's uint16 (its storage type), nor any NumPy dtype
    assert rlx.bfloat16 != np.uint16 and rlx.bfloat16 == "bfloat16"
    assert {rlx.tensor([1], dtype=d).dtype for d in ALL} == set(ALL)


def test_unsupported_numpy_dtypes_raise_type_error():
    for npdt in (np.uint16, np.uint64, np.clongdouble, np.longdouble):
        for make in (rlx.tensor, rlx.from_numpy):
            with pytest.raises(TypeError) as e:
                make(np.zeros(2, npdt))
            assert np.dtype(npdt).name in str(e.value) and "bfloat16" in str(e.value)
        with pytest.raises(TypeError):
            rlx.zeros(2, dtype=npdt)
    with pytest.raises(TypeError):
        rlx.from_numpy(np.zeros(2, np.uint64), dtype=rlx.int32)  # the source must be an rlx dtype


def test_bad_dtype_codes_are_rlx_errors():
    for code in (-1, 13, 100):
        with pytest.raises(rlx.RlxError) as e:
            rlx.dtype_name(code)
        assert e.value.status == rlx.E_ARG and "rlx_dtype_name" in e.value.message
    # an index of a narrow integer type: the library refuses it, naming the dtype
    with pytest.raises(rlx.RlxError) as e:
        rlx.gather(rlx.ones(3), rlx.tensor(np.array([0, 1], np.uint8)), 0)
    assert e.value.status == rlx.E_DTYPE and "u8" in e.value.message
    with pytest.raises(TypeError):
        rlx.tensor([1.0]) & rlx.tensor(np.array([1], np.uint8))


# ------------------------------------------------------- NumPy round trips

@pytest.mark.parametrize("d,npdt", [(d, n) for d, n, _, _ in NARROW], ids=lambda v: str(v))
def test_zero_copy_both_ways(d, npdt, rng):
    a = values(npdt, rng)
    t = rlx.from_numpy(a)
    assert t.dtype is d and t.shape == a.shape and t.is_realized
    assert t.data_ptr() == a.ctypes.data  # in: rlx_from_blob over a's memory
    back = t.numpy()
    assert back.dtype == np.dtype(npdt) and back.ctypes.data == a.ctypes.data  # out: a view of the same bytes
    assert not back.flags.writeable and np.array_equal(back, a, equal_nan=d.is_float)
    assert np.asarray(t).ctypes.data == a.ctypes.data
    assert back.tobytes() == a.tobytes() and t.bits().tobytes() == a.tobytes()
    a.flat[2] = a.flat[3]  # writes to the array are seen in place
    assert t.numpy().flat[2] == a.flat[3]
    c = t.numpy(copy=True)
    assert c.flags.writeable and c.ctypes.data != a.ctypes.data and c.tobytes() == a.tobytes()
    assert t.read().dtype == npdt and t.read().tobytes() == a.tobytes()
    # a computed result is viewed in place too
    r = (t + t).realize()
    assert r.numpy().ctypes.data == r.data_ptr()
    # tensor() copies, keeping the dtype; 0-d and empty
    u = rlx.tensor(a)
    assert u.dtype is d and u.data_ptr() != a.ctypes.data and u.numpy().tobytes() == a.tobytes()
    s = rlx.tensor(a.flat[6])
    assert s.dtype is d and s.shape == () and s.item() == a.flat[6].item()
    assert type(s.item()) is (float if d.is_float else int)
    e = rlx.from_numpy(np.zeros((0, 3), npdt))
    assert e.shape == (0, 3) and e.numpy().dtype == npdt and e.bits().shape == (0, 3)
    assert pickle.loads(pickle.dumps(t)).numpy().tobytes() == a.tobytes()
    assert t.tolist() == a.tolist()


def test_byte_swapped_and_strided_arrays_are_copied():
    a = np.array([[1, -2, 3], [4, 5, -6]], dtype=">i2")
    t = rlx.from_numpy(a)
    assert t.dtype is rlx.int16 and t.tolist() == a.tolist()
    h = np.array([1.5, -2.25, 3.0, 65504.0], np.float16)[::2]
    t = rlx.from_numpy(h)
    assert t.dtype is rlx.float16 and t.tolist() == [1.5, 3.0]


def test_bfloat16_reads_out_as_float32_values_and_as_bits():
    bits = np.array([0x3F80, 0xC020, 0x7F80, 0xFF80, 0x7FC1, 0x0001, 0x8000, 0x4049], np.uint16)
    t = rlx.from_numpy(bits, dtype=rlx.bfloat16)  # uint16: the patterns, read in place
    assert t.dtype is rlx.bfloat16 and t.data_ptr() == bits.ctypes.data
    v = t.numpy()
    assert v.dtype == np.float32 and v.flags.writeable and v.ctypes.data != bits.ctypes.data  # a copy
    want = bf16_value(bits)
    assert v.tobytes() == want.tobytes()  # exact, NaN payload and -0 included
    assert v[0] == 1.0 and v[1] == -2.5 and v[2] == np.inf and v[5] == 2.0**-133 and v[7] == 3.140625
    b = t.bits()
    assert b.dtype == np.uint16 and b.ctypes.data == bits.ctypes.data and not b.flags.writeable
    assert np.array_equal(b, bits)
    assert np.asarray(t).dtype == np.float32 and t.read().tobytes() == want.tobytes()
    assert t.read(rlx.float64).tolist()[:2] == [1.0, -2.5]
    assert t.read(np.float16)[1] == np.float16(-2.5)
    assert t[1].item() == -2.5 and type(t[1].item()) is float and t[7].item() == 3.140625
    assert t.tolist()[:2] == [1.0, -2.5]
    # pickling keeps the exact bits (a NaN payload too)
    assert np.array_equal(pickle.loads(pickle.dumps(t)).bits(), bits)
    # float16 patterns as uint16 work the same way
    h = rlx.from_numpy(np.array([0x3C00, 0xFC00], np.uint16), dtype=rlx.float16)
    assert h.dtype is rlx.float16 and h.tolist() == [1.0, -np.inf]
    assert rlx.tensor(np.array([0x3C00], ">u2"), dtype=rlx.float16).tolist() == [1.0]  # byte order honored


def test_bfloat16_from_values_rounds_to_nearest_even(rng):
    f = (rng.standard_normal(20000) * 10.0 ** rng.integers(-30, 30, 20000)).astype(np.float32)
    f[:4] = (np.array([0x3F808000, 0x3F818000, 0x3F80C000, 0x3F807FFF], np.uint32)).view(np.float32)  # ties, near
    want = bf16_round(f.astype(np.float64))
    assert np.array_equal(want[:4], [0x3F80, 0x3F82, 0x3F81, 0x3F80])  # the reference itself: ties to even
    for t in (rlx.tensor(f, dtype=rlx.bfloat16), rlx.from_numpy(f, dtype=rlx.bfloat16),
              rlx.tensor(f.tolist(), dtype=rlx.bfloat16), rlx.from_numpy(f).astype(rlx.bfloat16)):
        assert t.dtype is rlx.bfloat16
        assert np.array_equal(t.bits(), want)
    # from_numpy with dtype= is the library's cast: lazy, so later writes are seen
    g = np.array([1.0, 2.0], np.float32)
    t = rlx.from_numpy(g, dtype=rlx.bfloat16)
    g[0] = 3.0
    assert t.tolist() == [3.0, 2.0]
    # float64 is rounded once, not through float32: 1 + 2^-8 + 2^-30 is above the tie
    x = np.array([1 + 2.0**-8 + 2.0**-30, -(1 + 2.0**-8)])
    assert rlx.tensor(x, dtype=rlx.bfloat16).bits().tolist() == [0x3F81, 0xBF80]
    # infinities, NaN, overflow
    s = rlx.tensor([np.inf, -np.inf, np.nan, 3.5e38], dtype=rlx.bfloat16).numpy()
    assert s[0] == np.inf and s[1] == -np.inf and np.isnan(s[2]) and s[3] == np.inf
    assert rlx.tensor(2.5, dtype=rlx.bfloat16).bits().item() == 0x4020


# -------------------------------------------------------------- arithmetic

def float_ref(op, a, b):
    """f16 results of op on f16 inputs, computed exactly in float64 (sums and
    products of two f16 values are exact there) and rounded once by NumPy."""
    return op(a.astype(np.float64), b.astype(np.float64)).astype(np.float16)


def test_float16_arithmetic_against_references(rng):
    a = (rng.standard_normal(500) * 50).astype(np.float16)
    b = (rng.standard_normal(500) * 50).astype(np.float16)
    x, y = rlx.from_numpy(a), rlx.from_numpy(b)
    for op in (np.add, np.multiply, np.subtract):
        got = op(x, y)
        assert got.dtype is rlx.float16
        # the exact once-rounded result (1 ulp of slack: a fused kernel computes in f32) and NumPy's
        np.testing.assert_allclose(got.numpy(), float_ref(op, a, b), rtol=2.0**-10, atol=2.0**-24)
        np.testing.assert_allclose(got.numpy(), op(a, b), rtol=2.0**-10, atol=2.0**-24)
    assert ((x + 0.5).numpy() == (a + np.float16(0.5))).all() and (x * 2).dtype is rlx.float16
    s = x.sum()
    assert s.dtype is rlx.float16
    np.testing.assert_allclose(s.item(), np.sum(a.astype(np.float64)), rtol=2.0**-10)
    m = x.mean()
    assert m.dtype is rlx.float16
    np.testing.assert_allclose(m.item(), np.mean(a.astype(np.float64)), rtol=2.0**-10, atol=1e-3)
    # overflow to inf as NumPy's f16 does
    big = rlx.tensor(np.array([60000.0], np.float16))
    with np.errstate(over="ignore"):
        assert (big + big).item() == np.inf and np.isinf((np.float16(60000) + np.float16(60000)))


def test_float16_matmul_against_numpy(rng):
    """f16 @ f16 is f16: f32 sums rounded once (odd sizes, k over the 256
    of a panel, a transposed operand, a batch over one matrix)."""
    for m, k, n in [(3, 5, 2), (17, 300, 9), (64, 513, 33)]:
        a = rng.standard_normal((2, m, k)).astype(np.float16)
        b = rng.standard_normal((n, k)).astype(np.float16)
        got = rlx.from_numpy(a) @ rlx.from_numpy(b).T
        assert got.dtype is rlx.float16 and got.shape == (2, m, n)
        ref = a.astype(np.float64) @ b.astype(np.float64).T
        bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T
        err = np.abs(got.numpy().astype(np.float64) - ref)
        assert (err <= 2.0**-11 * np.abs(ref) + k * 2.0**-23 * bound).all()


def test_bfloat16_arithmetic_against_references(rng):
    abits = bf16_round(rng.standard_normal(500) * 50)
    bbits = bf16_round(rng.standard_normal(500) * 50)
    a, b = bf16_value(abits).astype(np.float64), bf16_value(bbits).astype(np.float64)
    x = rlx.from_numpy(abits, dtype=rlx.bfloat16)
    y = rlx.from_numpy(bbits, dtype=rlx.bfloat16)
    for op in (np.add, np.multiply):
        got = op(x, y)
        assert got.dtype is rlx.bfloat16
        np.testing.assert_allclose(got.numpy(), bf16_value(bf16_round(op(a, b))), rtol=2.0**-7)
    s = x.sum()
    assert s.dtype is rlx.bfloat16
    np.testing.assert_allclose(s.item(), a.sum(), rtol=2.0**-7, atol=np.abs(a).sum() * 2.0**-16)
    np.testing.assert_allclose(x.mean().item(), a.mean(), rtol=2.0**-7, atol=np.abs(a).mean() * 2.0**-16)


@pytest.mark.parametrize("d,npdt", INTS, ids=lambda v: str(v))
def test_integer_arithmetic_wraps_as_numpy(d, npdt, rng):
    a, b = values(npdt, rng, (200,)), values(npdt, rng, (200,))
    x, y = rlx.from_numpy(a), rlx.from_numpy(b)
    with np.errstate(over="ignore"):
        for op in (np.add, np.multiply, np.subtract):
            got = op(x, y)
            assert got.dtype is d
            assert np.array_equal(got.numpy(), op(a, b))  # both wrap modulo 2^bits
        assert np.array_equal((x * 3).numpy(), a * npdt(3))
        assert np.array_equal((-x).numpy(), -a)
    s = x.sum()
    assert s.dtype is rlx.int64 and s.item() == int(a.astype(np.int64).sum())
    m = x.mean()
    assert m.dtype is rlx.float32
    np.testing.assert_allclose(m.item(), a.astype(np.float64).mean(), rtol=1e-6)
    assert x.max().item() == a.max() and x.min().item() == a.min() and x.argmax().item() == a.argmax()
    assert np.array_equal((x // 7).numpy(), a // npdt(7)) and np.array_equal((x % 7).numpy(), a % npdt(7))
    assert (x / 2).dtype is rlx.float32
    np.testing.assert_allclose((x / 2).numpy(), a / 2, rtol=1e-6)


# ---------------------------------------------------------------- promotion

_ORDER = ["bool", "i8", "u8", "i16", "i32", "u32", "i64", "f16", "bf16", "f32", "f64"]
# rlx.h's rule (PyTorch's table): row + column -> entry
_TABLE = """
bool  bool i8   u8   i16  i32  u32  i64  f16  bf16 f32  f64
i8    i8   i8   i16  i16  i32  i64  i64  f16  bf16 f32  f64
u8    u8   i16  u8   i16  i32  u32  i64  f16  bf16 f32  f64
i16   i16  i16  i16  i16  i32  i64  i64  f16  bf16 f32  f64
i32   i32  i32  i32  i32  i32  i64  i64  f16  bf16 f32  f64
u32   u32  i64  u32  i64  i64  u32  i64  f16  bf16 f32  f64
i64   i64  i64  i64  i64  i64  i64  i64  f16  bf16 f32  f64
f16   f16  f16  f16  f16  f16  f16  f16  f16  f32  f32  f64
bf16  bf16 bf16 bf16 bf16 bf16 bf16 bf16 f32  bf16 f32  f64
f32   f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64
f64   f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64
"""


def test_promotion_follows_the_table_of_rlx_h():
    rows = [line.split() for line in _TABLE.strip().splitlines()]
    assert [r[0] for r in rows] == _ORDER
    for r in rows:
        for col, want in zip(_ORDER, r[1:]):
            a, b = rlx.ones(2, dtype=r[0]), rlx.ones(2, dtype=col)
            for got in (a + b, b * a, rlx.where(rlx.tensor([True, False]), a, b)):
                assert got.dtype == want, (r[0], col, got.dtype)
            if want != "bool":
                assert (a + b).tolist() == [2, 2]
    # where NumPy differs (int64 + float16 is float64 there)
    assert (rlx.ones(2, dtype=rlx.int64) + rlx.ones(2, dtype=rlx.float16)).dtype is rlx.float16
    assert (np.ones(2, np.int64) + np.ones(2, np.float16)).dtype == np.float64


def test_python_scalars_take_the_tensor_dtype():
    for d in (rlx.float16, rlx.bfloat16):
        t = rlx.ones(2, dtype=d)
        assert (t + 1.5).dtype is d and (2 * t).dtype is d and (t + 1).dtype is d and (t > 0.5).dtype is rlx.bool
    for d in (rlx.int8, rlx.uint8, rlx.int16, rlx.uint32):
        t = rlx.ones(2, dtype=d)
        assert (t + 1).dtype is d and (t * 2).dtype is d and (t + 1.5).dtype is rlx.float32
        assert (t / 2).dtype is rlx.float32 and (t // 2).dtype is d
    # an int outside the tensor's range is not wrapped: it widens to int64
    u = rlx.tensor(np.array([250, 7], np.uint8))
    assert (u + 300).dtype is rlx.int64 and (u + 300).tolist() == [550, 307]
    assert (u < 300).tolist() == [True, True] and (u > -1).tolist() == [True, True]
    assert (u - 1).dtype is rlx.uint8 and (u - 1).tolist() == [249, 6]
    assert (u + 10).tolist() == [4, 17]  # in range: uint8 arithmetic, which wraps
    w = rlx.tensor(np.array([1], np.uint32))
    assert (w + 2**32).dtype is rlx.int64 and (w + (-1)).tolist() == [0] and (w + (2**32 - 1)).dtype is rlx.uint32
    assert (rlx.tensor(np.array([1], np.int8)) + 128).dtype is rlx.int64
    assert (rlx.tensor(np.array([1], np.int8)) + 127).dtype is rlx.int8
    # NumPy scalars behave as Python scalars of their kind
    assert (rlx.ones(2, dtype=rlx.float16) + np.float64(1.5)).dtype is rlx.float16


# -------------------------------------------------------------------- casts

def cast_ref(a, npdt):
    """rlx.h's casts computed with NumPy: float to integer truncates and
    saturates (NaN is 0), integer to integer wraps, to float16 rounds once
    to nearest even (NumPy's float64 -> float16 does), to bool is != 0."""
    npdt = np.dtype(npdt)
    if npdt == np.bool_:
        return a != 0
    if npdt.kind in "iu" and a.dtype.kind == "f":
        info = np.iinfo(npdt)
        v = np.nan_to_num(np.trunc(a.astype(np.float64)), nan=0.0, posinf=info.max, neginf=info.min)
        return np.clip(v, info.min, info.max).astype(npdt)
    with np.errstate(over="ignore"):
        return a.astype(np.float64).astype(npdt) if npdt.kind == "f" else a.astype(npdt)


def test_casts_between_every_dtype(rng):
    srcs = {
        np.float32: np.array([np.nan, np.inf, -np.inf, -1.5, 0.5, 1.99, 127.5, 128.7, -129.2, 255.9, 256.0, 300.7,
                              -32769.0, 32767.9, 65504.0, 65520.0, 4294967295.0, 5e9, -5e9, 1e-8, 3.14159], np.float32),
        np.int64: np.array([0, 1, -1, 127, 128, -129, 255, 256, 300, -32769, 32768, 65535, 2**31, 2**32 + 5,
                            -2**40 - 3, 2**53 + 1], np.int64),
        np.uint8: np.arange(0, 256, 17, dtype=np.uint8),
        np.float16: np.array([np.nan, -0.0, 6e-8, 65504, -1.5, 300.5], np.float16),
    }
    targets = [(rlx.int8, np.int8), (rlx.uint8, np.uint8), (rlx.int16, np.int16), (rlx.uint32, np.uint32),
               (rlx.float16, np.float16), (rlx.int32, np.int32), (rlx.float32, np.float32), (rlx.bool, np.bool_)]
    for npsrc, a in srcs.items():
        x = rlx.from_numpy(a)
        for d, npdt in targets:
            got = x.astype(d)
            assert got.dtype is d
            want = cast_ref(a, npdt)
            if npdt == np.float32 and a.dtype == np.int64:
                want = a.astype(np.float64).astype(np.float32)  # rounded once from the exact value
            np.testing.assert_array_equal(got.numpy(), want, err_msg="%s -> %s" % (a.dtype, d))
        b = rlx.cast(x, rlx.bfloat16)
        finite = np.isfinite(a.astype(np.float64)) & (np.abs(a.astype(np.float64)) < 3e38)
        assert np.array_equal(b.bits()[finite], bf16_round(a.astype(np.float64)[finite]))
        assert np.array_equal(b.numpy()[~finite], a.astype(np.float32)[~finite], equal_nan=True)
    # the torch-style methods
    t = rlx.tensor([1.7, -2.2])
    assert t.half().dtype is rlx.float16 and t.bfloat16().dtype is rlx.bfloat16 and t.char().dtype is rlx.int8
    assert t.byte().tolist() == [1, 0] and t.short().tolist() == [1, -2]


def test_every_dtype_prints_and_gives_items():
    for d in ALL:
        t = rlx.tensor([1, 0, 1], dtype=d)
        r = repr(t)
        assert "dtype=%s" % d.short in r and r == str(t) == t.to_string()
        v = t[0].item()
        assert v == 1 and type(v) is (bool if d.is_bool else float if d.is_float else int)
        assert bool(t[1]) is False and int(t[2]) == 1 and float(t[0]) == 1.0
        for e in ALL:
            assert t.astype(e).dtype is e and t.astype(e).tolist() == ([True, False, True] if e.is_bool else [1, 0, 1])
    assert repr(rlx.tensor([1.5, -2.0], dtype=rlx.bfloat16)).startswith("tensor([1.5, -2.")
    assert rlx.tensor(np.array(7, np.uint32)).__index__() == 7
    assert_close(rlx.tensor([1, 2], dtype=rlx.float16) * 2, [2, 4], dtype=rlx.float16)


def test_ml_dtypes_bfloat16_arrays_map_to_bfloat16():
    ml = pytest.importorskip("ml_dtypes")  # optional: JAX's NumPy bfloat16
    a = np.array([1.0, -2.5, 3.140625], dtype=ml.bfloat16)
    t = rlx.from_numpy(a)
    assert t.dtype is rlx.bfloat16 and t.data_ptr() == a.ctypes.data
    assert t.tolist() == [1.0, -2.5, 3.140625] and np.array_equal(t.bits(), a.view(np.uint16))
    assert rlx.tensor(a).bits().tolist() == a.view(np.uint16).tolist()
    assert rlx.bfloat16 == a.dtype
