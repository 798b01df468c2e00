"""complex64 against NumPy: interop both ways (zero-copy), every op that
computes complex64, broadcasting, views, empty and 0-d tensors, the FFT,
files, and the refusals of the others."""

import numpy as np
import pytest

import rlx

RNG = np.random.default_rng(16)


def crand(*shape):
    return (RNG.uniform(-2, 2, shape) + 1j * RNG.uniform(-2, 2, shape)).astype(np.complex64)


def close(got, want, rtol=1e-5, atol=1e-5):
    got = got.numpy() if isinstance(got, rlx.Tensor) else got
    assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.fixture(params=["ref", "jit"])
def backend(request):
    old = rlx.get_option("backend")
    rlx.set_option("backend", request.param)
    yield request.param
    rlx.set_option("backend", old)


def test_dtype_maps_both_ways_zero_copy():
    assert rlx.complex64 == np.complex64 and rlx.complex64 == "c64" and rlx.cfloat is rlx.complex64
    assert rlx.dtype_name(rlx.complex64) == "c64" and rlx.complex64.itemsize == 8
    a = crand(3, 4)
    t = rlx.from_numpy(a)
    assert t.dtype is rlx.complex64
    a[1, 2] = 5 - 7j  # read in place
    v = t.numpy()
    assert v.dtype == np.complex64 and not v.flags.writeable
    np.testing.assert_array_equal(v, a)
    assert np.shares_memory(np.asarray(rlx.contiguous(t)), np.asarray(rlx.contiguous(t)))
    w = t.numpy(copy=True)
    w[0, 0] = 0
    np.testing.assert_array_equal(t.numpy(), a)
    # tensor(): complex data defaults to complex64 (PyTorch), complex128 is not an rlx dtype
    assert rlx.tensor([1 + 2j, 3]).dtype is rlx.complex64
    assert rlx.tensor(np.array([1j]), rlx.complex64).dtype is rlx.complex64
    for bad in (lambda: rlx.from_numpy(np.zeros(2, np.complex128)), lambda: rlx.tensor(np.array([1j]))):
        with pytest.raises(TypeError):  # NumPy arrays keep their dtype: complex128 is none of rlx's
            bad()


def test_item_and_to_string():
    t = rlx.tensor(np.array([1.5 - 2j], np.complex64))
    assert t.item() == 1.5 - 2j and complex(t) == 1.5 - 2j
    assert rlx.sum(t).item() == 1.5 - 2j
    assert "1.5-2.j" in t.to_string() and "dtype=c64" in t.to_string()
    with pytest.raises(rlx.RlxError):
        rlx.tensor(crand(2)).item()


def test_casts_and_promotion(backend):
    a = crand(5)
    t = rlx.tensor(a)
    close(t.astype(rlx.float32), a.real)  # PyTorch: the real part
    close(t.astype(rlx.int32), a.real.astype(np.int32))
    close(t.astype(rlx.bool_), a != 0)
    f = np.array([1.5, -2, 0, 7, 3], np.float32)
    close(rlx.tensor(f).astype(rlx.complex64), f.astype(np.complex64))
    for dt in [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64]:
        b = rlx.tensor(np.ones(5, dt))
        assert (t + b).dtype is rlx.complex64 and (b * t).dtype is rlx.complex64
    close(t + 1.5, a + np.float32(1.5))
    close(2 * t, 2 * a)
    close(t + 1j, a + np.complex64(1j))


@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (1, 5, 1)), ((), (2, 3)),
                                   ((0, 3), (3,)), ((1,), (7,))])
def test_binary_broadcast(backend, sa, sb):
    a, b = crand(*sa), crand(*sb)
    ta, tb = rlx.tensor(a), rlx.tensor(b)
    close(ta + tb, a + b)
    close(ta - tb, a - b)
    close(ta * tb, a * b)
    close(ta / tb, a / b, rtol=1e-5)
    close(rlx.eq(ta, tb), a == b)
    close(rlx.ne(ta, ta), a != a)
    br = b.real.astype(np.float32)
    close(ta * rlx.tensor(br), a * br)


def test_unary_views_and_parts(backend):
    a = crand(4, 6)
    t = rlx.tensor(a)
    v = t.T[::2]  # a non-contiguous view
    av = a.T[::2]
    close(v, av)
    close(-v, -av)
    close(rlx.exp(v), np.exp(av), rtol=1e-5)
    close(rlx.abs(v), np.abs(av))
    close(rlx.conj(v), np.conj(av))
    close(v.conj(), np.conj(av))
    close(v.real, av.real)
    close(v.imag, av.imag)
    close(rlx.real(v), av.real)
    s = crand()
    close(rlx.exp(rlx.tensor(s)), np.exp(s))
    close(rlx.complex(rlx.tensor(np.float32([1, 2, 3])), rlx.tensor(np.int32([4]))),
          np.array([1 + 4j, 2 + 4j, 3 + 4j], np.complex64))
    r = rlx.tensor(np.float32([1, 2]))
    close(r.imag, np.float32([0, 0]))


def test_where_and_reductions(backend):
    a, b = crand(3, 4, 5), crand(3, 4, 5)
    ta, tb = rlx.tensor(a), rlx.tensor(b)
    m = a.real > 0
    close(rlx.where(rlx.tensor(m), ta, tb), np.where(m, a, b))
    close(rlx.sum(ta, axis=1), a.sum(axis=1), rtol=1e-5)
    close(rlx.sum(ta, axis=(0, 2), keepdims=True), a.sum(axis=(0, 2), keepdims=True), rtol=1e-5)
    close(rlx.mean(ta, axis=2), a.mean(axis=2), rtol=1e-5)
    close(rlx.sum(ta[:, :, 1::3], axis=(1, 2)), a[:, :, 1::3].sum(axis=(1, 2)), rtol=1e-5)
    close(rlx.sum(rlx.tensor(np.zeros((0, 3), np.complex64)), axis=0), np.zeros(3, np.complex64))


def test_matmul(backend):
    a, b = crand(2, 1, 3, 4), crand(5, 4, 2)
    close(rlx.matmul(rlx.tensor(a), rlx.tensor(b)), a @ b, rtol=1e-5)
    c = crand(4, 5)
    close(rlx.tensor(c).T @ rlx.tensor(c), c.T @ c, rtol=1e-5)
    v = crand(4)
    close(rlx.matmul(rlx.tensor(v), rlx.tensor(v)), v @ v, rtol=1e-5)


def test_movement(backend):
    a = crand(2, 3)
    t = rlx.tensor(a)
    close(t.reshape(3, 2), a.reshape(3, 2))
    close(rlx.cat([t, t.conj()], axis=1), np.concatenate([a, a.conj()], axis=1))
    close(rlx.stack([t, t], axis=0), np.stack([a, a]))
    close(rlx.broadcast_to(t, (4, 2, 3)), np.broadcast_to(a, (4, 2, 3)))
    close(t[:, ::-1], a[:, ::-1])
    close(rlx.pad(t, ((0, 0), (1, 2))), np.pad(a, ((0, 0), (1, 2))))
    close(rlx.index_select(t, 1, rlx.tensor(np.int64([2, 0]))), a[:, [2, 0]])


@pytest.mark.parametrize("n", [1, 2, 5, 8, 12, 17])
def test_fft_c(backend, n):
    a = crand(3, n)
    t = rlx.tensor(a)
    f = rlx.fft_c(t)
    close(f, np.fft.fft(a).astype(np.complex64), rtol=1e-4, atol=1e-4)
    close(rlx.fft_c(f, inverse=True), (a * n).astype(np.complex64), rtol=1e-4, atol=1e-4)
    close(rlx.fft_c(t.T, axis=0), np.fft.fft(a.T, axis=0).astype(np.complex64), rtol=1e-4, atol=1e-4)
    r = RNG.uniform(-1, 1, n).astype(np.float32)
    close(rlx.fft_c(rlx.tensor(r)), np.fft.fft(r).astype(np.complex64), rtol=1e-4, atol=1e-4)


def test_files(tmp_path):
    a = crand(3, 4)
    rlx.save_npy(tmp_path / "a.npy", rlx.tensor(a))
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), a)
    np.save(tmp_path / "b.npy", a.astype(">c8"))  # big-endian: each part swapped
    np.testing.assert_array_equal(rlx.load_npy(tmp_path / "b.npy").numpy(), a)
    np.savez(tmp_path / "c.npz", x=a, y=a.real)
    d = rlx.load_npz(tmp_path / "c.npz")
    np.testing.assert_array_equal(d["x"].numpy(), a)
    rlx.save_npz(tmp_path / "d.npz", {"x": rlx.tensor(a)})
    np.testing.assert_array_equal(np.load(tmp_path / "d.npz")["x"], a)
    rlx.save_safetensors(tmp_path / "e.safetensors", {"x": rlx.tensor(a)})
    np.testing.assert_array_equal(rlx.load_safetensors(tmp_path / "e.safetensors")["x"].numpy(), a)
    raw = (tmp_path / "e.safetensors").read_bytes()
    assert b'"C64"' in raw  # the safetensors dtype name


@pytest.mark.parametrize("fn", [rlx.sqrt, rlx.log, rlx.sin, rlx.tanh, rlx.sign, rlx.floor, rlx.relu,
                                lambda x: rlx.softmax(x, -1), lambda x: rlx.max(x),
                                lambda x: rlx.cumsum(x, 0), lambda x: x < x, lambda x: x ** 2,
                                lambda x: rlx.maximum(x, x), rlx.fft, lambda x: rlx.var(x)])
def test_other_ops_refuse(fn):
    t = rlx.tensor(crand(2, 4))
    with pytest.raises(rlx.RlxError) as e:
        fn(t)
    assert e.value.status == rlx.E_DTYPE and "c64" in str(e.value)


def test_grad_refused():
    x = rlx.tensor(np.float32([1, 2, 3]))
    y = rlx.tensor(np.float32([3, 2, 1]))
    loss = rlx.sum(rlx.abs(rlx.complex(x, y)))
    with pytest.raises(rlx.RlxError) as e:
        rlx.grad(loss, [x, y])
    assert e.value.status == rlx.E_UNSUPPORTED and "complex64" in str(e.value)
