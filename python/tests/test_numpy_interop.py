"""dtype round trips, zero-copy in both directions, keep-alive rules."""
import gc
import sys
import weakref

import numpy as np
import pytest

import rlx

EXACT = [(np.bool_, rlx.bool), (np.int32, rlx.int32), (np.int64, rlx.int64), (np.float32, rlx.float32),
         (np.float64, rlx.float64), (np.float16, rlx.float16), (np.int8, rlx.int8), (np.uint8, rlx.uint8),
         (np.int16, rlx.int16), (np.uint32, rlx.uint32)]


def values(npdt, rng, shape=(3, 4)):
    if npdt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(npdt, np.integer):
        info = np.iinfo(npdt)
        a = rng.integers(info.min, info.max, shape, dtype=npdt, endpoint=True)
        a.flat[0], a.flat[1] = info.min, info.max
        return a
    a = rng.standard_normal(shape).astype(npdt)
    a.flat[:4] = [np.inf, -np.inf, np.finfo(npdt).tiny, np.finfo(npdt).max]
    return a


@pytest.mark.parametrize("npdt,dt", EXACT, ids=lambda v: str(v))
def test_round_trip_every_dtype(npdt, dt, rng):
    a = values(npdt, rng)
    for make in (rlx.tensor, rlx.from_numpy, rlx.asarray):
        t = make(a)
        assert t.dtype == dt and t.dtype is dt and t.shape == a.shape
        back = t.numpy()
        assert back.dtype == a.dtype and np.array_equal(back, a)
        assert np.array_equal(np.asarray(t), a) and np.array(t).dtype == a.dtype
        assert t.tolist() == a.tolist()
        assert t.read().dtype == a.dtype and np.array_equal(t.read(), a)
    # explicit dtype conversion on the way in; the 0-d and empty cases
    assert rlx.tensor(a, dtype=dt).dtype == dt
    s = rlx.tensor(a.flat[0])
    assert s.dtype == dt and s.shape == () and s.item() == a.flat[0].item()
    e = rlx.from_numpy(np.zeros((0, 3), npdt))
    assert e.shape == (0, 3) and e.numpy().shape == (0, 3) and e.numpy().dtype == npdt
    # NaN survives
    if np.issubdtype(npdt, np.floating):
        assert np.isnan(rlx.tensor(np.array([np.nan], npdt)).numpy()[0])


@pytest.mark.parametrize("npdt", [np.uint16, np.clongdouble, np.uint64, np.longdouble, object, "U3", "datetime64[s]"])
def test_unsupported_dtypes_raise_type_error_naming_it(npdt):
    a = np.zeros(3, dtype=npdt)
    name = np.dtype(npdt).name
    for make in (rlx.from_numpy, rlx.tensor):
        with pytest.raises(TypeError) as e:
            make(a)
        assert name in str(e.value) or np.dtype(npdt).kind in "OU"
    with pytest.raises(TypeError):
        rlx.zeros(3, dtype=npdt)


def test_python_inference():
    assert rlx.tensor([1.0, 2.0]).dtype == rlx.float32
    assert rlx.tensor([1, 2]).dtype == rlx.int64
    assert rlx.tensor([True, False]).dtype == rlx.bool
    assert rlx.tensor(1.5).dtype == rlx.float32 and rlx.tensor(3).dtype == rlx.int64
    assert rlx.tensor(np.float64(1.5)).dtype == rlx.float64
    assert rlx.tensor(np.int32(7)).dtype == rlx.int32
    assert rlx.tensor(2**62 + 1).item() == 2**62 + 1
    assert rlx.tensor([[1, 2], [3, 4]], dtype="float64").dtype == rlx.float64
    assert rlx.tensor(np.array([1, 2], dtype=">i4")).tolist() == [1, 2]       # byte-swapped: converted
    with pytest.raises(TypeError):
        rlx.tensor(["a", "b"])
    assert rlx.tensor(1 + 2j).dtype == rlx.complex64  # PyTorch's default complex


def test_from_numpy_is_zero_copy_and_sees_writes():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = rlx.from_numpy(a)
    assert t.data_ptr() == a.ctypes.data                 # the same memory
    y = t * 2 + 1                                        # lazy
    v = t[1:, ::2]
    assert v.shares_storage(t) and rlx.shares_storage(t, t.T)
    a[0, 0] = 100.0                                      # write before realization ...
    a[2, 2] = -1.0
    assert y.numpy()[0, 0] == 201.0                      # ... is visible
    assert v.numpy().tolist() == [[4.0, 6.0], [8.0, -1.0]]
    assert t.storage_bytes() == a.nbytes


def test_from_numpy_keeps_array_alive():
    a = np.arange(1000, dtype=np.float64)
    base_refs = sys.getrefcount(a)
    t = rlx.from_numpy(a)
    assert sys.getrefcount(a) == base_refs + 1
    w = t[10:20] + 0                        # a graph that reads the blob
    del t
    gc.collect()
    assert sys.getrefcount(a) == base_refs + 1      # still read by w
    assert w.numpy().tolist() == list(range(10, 20))
    del w
    gc.collect()
    assert sys.getrefcount(a) == base_refs          # the deleter ran
    # the array may be dropped by Python first: the tensor keeps it alive
    t = rlx.from_numpy(np.full(5, 3.0))
    gc.collect()
    assert t.sum().item() == 15.0


def test_from_numpy_non_contiguous_is_copied():
    a = np.arange(20, dtype=np.int64).reshape(4, 5)
    v = a[:, ::2]
    t = rlx.from_numpy(v)
    assert t.tolist() == v.tolist()
    assert t.data_ptr() != v.ctypes.data
    f = np.asfortranarray(a)
    assert rlx.from_numpy(f).tolist() == a.tolist()
    with pytest.raises(TypeError):
        rlx.from_numpy([1, 2, 3])


def test_numpy_view_is_zero_copy_and_keeps_tensor_alive():
    t = rlx.arange(10, dtype=rlx.float64) * 3
    arr = t.numpy()
    assert arr.ctypes.data == t.data_ptr()
    assert not arr.flags.writeable                           # tensors are immutable
    with pytest.raises(ValueError):
        arr[0] = 1
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is not None                                 # the array keeps the Tensor alive
    assert arr.tolist() == [3.0 * i for i in range(10)]
    del arr
    gc.collect()
    assert ref() is None
    c = rlx.ones(3).numpy(copy=True)
    c[0] = 5                                                 # a copy is writable
    assert np.asarray(rlx.ones(2), dtype=np.int32).dtype == np.int32


def test_numpy_of_views_and_scalars():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    t = rlx.from_numpy(a)
    assert np.array_equal(t.transpose(2, 0, 1).numpy(), a.transpose(2, 0, 1))
    assert np.array_equal(t[1].numpy(), a[1])
    assert t[1, 2, 3].numpy().shape == () and t[1, 2, 3].item() == 23
    assert np.array_equal(np.asarray(t[:, ::-1]), a[:, ::-1])


def test_numpy_functions_and_ufuncs_on_tensors():
    a = np.array([[1.0, -2.0], [3.0, 4.5]])
    x = rlx.tensor(a)
    lazy = {np.exp(x): np.exp(a), np.add(a, x): a + a, a - x: a * 0, a @ x: a @ a, np.maximum(x, 2): np.maximum(a, 2),
            np.negative(x): -a, np.abs(x): np.abs(a), np.floor_divide(a, x): np.ones_like(a),
            np.rint(x): np.rint(a), np.tanh(x): np.tanh(a), np.less(a, x): np.zeros_like(a, bool)}
    for got, want in lazy.items():
        assert isinstance(got, rlx.Tensor)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    b = x > 0
    assert isinstance(np.array([True, False]) & b, rlx.Tensor)
    assert (np.array([True, False]) & b).tolist() == (np.array([True, False]) & (a > 0)).tolist()
    assert isinstance(np.add.reduce(x), np.ndarray)                    # other methods run in NumPy
    assert np.add.reduce(x).tolist() == np.add.reduce(a).tolist()
    assert isinstance(np.bitwise_and(rlx.tensor([6, 3]), 5), np.ndarray)
    with pytest.raises(TypeError):
        np.exp(x, out=x)
    # NumPy's functions call the methods with NumPy's signatures
    for fn, kw in ((np.sum, {}), (np.mean, {"axis": 0}), (np.var, {}), (np.std, {"ddof": 1}),
                   (np.max, {"axis": 1}), (np.min, {}), (np.prod, {}), (np.argmax, {}), (np.argmin, {"axis": 0}),
                   (np.cumsum, {}), (np.all, {}), (np.any, {"axis": 0}), (np.transpose, {}), (np.squeeze, {})):
        got, want = fn(x, **kw), fn(a, **kw)
        assert isinstance(got, rlx.Tensor), fn
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, err_msg=fn.__name__)
    np.testing.assert_allclose(np.clip(x, 0, 2).numpy(), np.clip(a, 0, 2))
    np.testing.assert_allclose(np.round(x * 1.2345, 2).numpy(), np.round(a * 1.2345, 2))
    np.testing.assert_allclose(np.take(x, [0, 3]).numpy(), np.take(a, [0, 3]))
    np.testing.assert_allclose(np.reshape(x, (4,)).numpy(), a.reshape(4))
    with pytest.raises(TypeError):
        np.sum(x, out=np.zeros(()))


@pytest.mark.parametrize("npdt,dt", EXACT, ids=lambda v: str(v))
def test_rank0_inputs_stay_rank0(npdt, dt):
    # 0-d arrays (plain, byte-swapped, given a dtype), Python and NumPy
    # scalars and nested 0-d lists all give shape (), as NumPy and PyTorch do
    a = np.array(1 if npdt != np.bool_ else True, npdt)
    cases = [(rlx.tensor, a), (rlx.asarray, a), (rlx.from_numpy, a), (rlx.tensor, a.astype(a.dtype.newbyteorder())),
             (rlx.from_numpy, a.astype(a.dtype.newbyteorder())), (rlx.tensor, a[()])]
    for make, v in cases:
        t = make(v)
        assert t.shape == () and t.ndim == 0 and t.dtype == dt, (make.__name__, v, t.shape)
        assert t.numpy().shape == () and t.item() == a.item()
    assert rlx.tensor(a, dtype=rlx.float64).shape == ()
    assert rlx.tensor(np.array(a, dtype=object).item()).shape == ()


def test_rank0_python_scalars():
    for v, dt in ((5.0, rlx.float32), (5, rlx.int64), (True, rlx.bool), (2**60, rlx.int64)):
        t = rlx.tensor(v)
        assert t.shape == () and t.dtype == dt and t.item() == v
    t = rlx.tensor(np.array(5))
    assert t.shape == () and t.dtype == rlx.int64 and (t + 1).shape == () and t.item() == 5
    assert rlx.tensor(np.array(2.5), dtype=rlx.float32).shape == ()
