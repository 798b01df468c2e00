"""complex64 and complex128 against NumPy: interop both ways (zero-copy),
every op that computes them, broadcasting, views, empty and 0-d tensors,
the FFT, files, the refusals of the others, and gradients through complex
ops against finite differences."""

import numpy as np
import pytest

import rlx

RNG = np.random.default_rng(16)


def crand(*shape, dt=np.complex64):
    return np.asarray(RNG.uniform(-2, 2, shape) + 1j * RNG.uniform(-2, 2, shape), dt)  # 0-d: an array


CDTS = [np.complex64, np.complex128]


def tol(dt):
    """f32-part or f64-part accuracy."""
    return 1e-5 if np.dtype(dt) == np.complex64 else 1e-12


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
    # tensor(): Python complex data defaults to complex64 (PyTorch); NumPy arrays keep their dtype
    assert rlx.tensor([1 + 2j, 3]).dtype is rlx.complex64
    assert rlx.tensor(np.array([1j]), rlx.complex64).dtype is rlx.complex64
    assert rlx.tensor(np.array([1j])).dtype is rlx.complex128
    with pytest.raises(TypeError):
        rlx.from_numpy(np.zeros(2, np.clongdouble))


def test_complex128_maps_both_ways_zero_copy():
    assert rlx.complex128 == np.complex128 and rlx.complex128 == "c128" and rlx.cdouble is rlx.complex128
    assert rlx.dtype_name(rlx.complex128) == "c128" and rlx.complex128.itemsize == 16
    a = crand(3, 4, dt=np.complex128)
    t = rlx.from_numpy(a)
    assert t.dtype is rlx.complex128
    a[1, 2] = 0.1 - 7j  # read in place
    v = t.numpy()
    assert v.dtype == np.complex128 and not v.flags.writeable
    np.testing.assert_array_equal(v, a)
    np.testing.assert_array_equal(rlx.tensor(a).numpy(), a)
    assert rlx.tensor(np.array(0.1 + 0.2j)).item() == 0.1 + 0.2j
    assert "0.1+0.2j" in rlx.tensor(np.array([0.1 + 0.2j])).to_string()
    with pytest.raises(rlx.RlxError):
        rlx.tensor(a).item()


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
    for dt in [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.float16, np.float32]:
        b = rlx.tensor(np.ones(5, dt))
        assert (t + b).dtype is rlx.complex64 and (b * t).dtype is rlx.complex64
    close(t + 1.5, a + np.float32(1.5))
    close(2 * t, 2 * a)
    close(t + 1j, a + np.complex64(1j))
    # PyTorch's table: complex64 with float64 widens to complex128; complex128 with anything is complex128
    assert (t + rlx.tensor(np.ones(5))).dtype is rlx.complex128
    z = rlx.tensor(a.astype(np.complex128))
    for dt in [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64, np.complex64]:
        b = rlx.tensor(np.ones(5, dt))
        assert (z + b).dtype is rlx.complex128 and (b * z).dtype is rlx.complex128
    close(t.astype(rlx.complex128), a.astype(np.complex128), rtol=0, atol=0)
    close(z.astype(rlx.complex64), a, rtol=0, atol=0)
    close(z.astype(rlx.float64), a.real.astype(np.float64), rtol=0, atol=0)
    assert rlx.complex(rlx.tensor(np.float64([0.1])), rlx.tensor(np.float32([2]))).dtype is rlx.complex128
    close(rlx.complex(rlx.tensor(np.float64([0.1])), rlx.tensor(np.float64([0.2]))), np.array([0.1 + 0.2j]),
          rtol=0, atol=0)


@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (1, 5, 1)), ((), (2, 3)),
                                   ((0, 3), (3,)), ((1,), (7,))])
@pytest.mark.parametrize("cdt", CDTS)
def test_binary_broadcast(backend, sa, sb, cdt):
    a, b = crand(*sa, dt=cdt), crand(*sb, dt=cdt)
    ta, tb = rlx.tensor(a), rlx.tensor(b)
    e = tol(cdt)
    close(ta + tb, a + b, e, e)
    close(ta - tb, a - b, e, e)
    close(ta * tb, a * b, e, e)
    close(ta / tb, a / b, e, e)
    close(rlx.eq(ta, tb), a == b)
    close(rlx.ne(ta, ta), a != a)
    br = b.real
    close(ta * rlx.tensor(br), a * br, e, e)


@pytest.mark.parametrize("cdt", CDTS)
def test_unary_views_and_parts(backend, cdt):
    a = crand(4, 6, dt=cdt)
    t = rlx.tensor(a)
    v = t.T[::2]  # a non-contiguous view
    av = a.T[::2]
    e = tol(cdt)
    close(v, av)
    close(-v, -av)
    close(rlx.exp(v), np.exp(av), e, e)
    close(rlx.abs(v), np.abs(av), e, e)
    close(rlx.conj(v), np.conj(av))
    close(v.conj(), np.conj(av))
    close(v.real, av.real)
    close(v.imag, av.imag)
    close(rlx.real(v), av.real)
    s = crand(dt=cdt)
    close(rlx.exp(rlx.tensor(s)), np.exp(s), e, e)
    close(rlx.complex(rlx.tensor(np.float32([1, 2, 3])), rlx.tensor(np.int32([4]))),
          np.array([1 + 4j, 2 + 4j, 3 + 4j], np.complex64))
    r = rlx.tensor(np.float32([1, 2]))
    close(r.imag, np.float32([0, 0]))


@pytest.mark.parametrize("cdt", CDTS)
def test_where_and_reductions(backend, cdt):
    a, b = crand(3, 4, 5, dt=cdt), crand(3, 4, 5, dt=cdt)
    ta, tb = rlx.tensor(a), rlx.tensor(b)
    m = a.real > 0
    e = tol(cdt)
    close(rlx.where(rlx.tensor(m), ta, tb), np.where(m, a, b))
    close(rlx.sum(ta, axis=1), a.sum(axis=1), e, e)
    close(rlx.sum(ta, axis=(0, 2), keepdims=True), a.sum(axis=(0, 2), keepdims=True), e, e)
    close(rlx.mean(ta, axis=2), a.mean(axis=2), e, e)
    close(rlx.sum(ta[:, :, 1::3], axis=(1, 2)), a[:, :, 1::3].sum(axis=(1, 2)), e, e)
    close(rlx.sum(rlx.tensor(np.zeros((0, 3), cdt)), axis=0), np.zeros(3, cdt))


@pytest.mark.parametrize("cdt", CDTS)
def test_matmul(backend, cdt):
    a, b = crand(2, 1, 3, 4, dt=cdt), crand(5, 4, 2, dt=cdt)
    e = tol(cdt)
    close(rlx.matmul(rlx.tensor(a), rlx.tensor(b)), a @ b, e, e)
    c = crand(4, 5, dt=cdt)
    close(rlx.tensor(c).T @ rlx.tensor(c), c.T @ c, e, e)
    v = crand(4, dt=cdt)
    close(rlx.matmul(rlx.tensor(v), rlx.tensor(v)), v @ v, e, e)


@pytest.mark.parametrize("cdt", CDTS)
def test_movement(backend, cdt):
    a = crand(2, 3, dt=cdt)
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
    a2 = a.astype(np.complex128) * 1.1
    f2 = rlx.fft_c(rlx.tensor(a2))
    close(f2, np.fft.fft(a2), 1e-12, 1e-12)  # complex128 in double
    close(rlx.fft_c(f2, inverse=True), a2 * n, 1e-12, 1e-12)
    r2 = RNG.uniform(-1, 1, n)
    close(rlx.fft_c(rlx.tensor(r2)), np.fft.fft(r2), 1e-12, 1e-12)  # float64 input: complex128
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
    z = crand(3, 4, dt=np.complex128)
    rlx.save_npy(tmp_path / "z.npy", rlx.tensor(z).T)
    np.testing.assert_array_equal(np.load(tmp_path / "z.npy"), z.T)
    np.save(tmp_path / "zb.npy", z.astype(">c16"))
    np.testing.assert_array_equal(rlx.load_npy(tmp_path / "zb.npy").numpy(), z)
    np.savez_compressed(tmp_path / "z.npz", x=z)
    np.testing.assert_array_equal(rlx.load_npz(tmp_path / "z.npz")["x"].numpy(), z)
    rlx.save_safetensors(tmp_path / "z.safetensors", {"x": rlx.tensor(z), "y": rlx.tensor(a)})
    np.testing.assert_array_equal(rlx.load_safetensors(tmp_path / "z.safetensors")["x"].numpy(), z)


@pytest.mark.parametrize("fn", [rlx.sqrt, rlx.log, rlx.sin, rlx.tanh, rlx.sign, rlx.floor, rlx.relu,
                                lambda x: rlx.softmax(x, -1), lambda x: rlx.max(x),
                                lambda x: rlx.cumsum(x, 0), lambda x: x < x, lambda x: x ** 2,
                                lambda x: rlx.maximum(x, x), rlx.fft, lambda x: rlx.var(x)])
@pytest.mark.parametrize("cdt", CDTS)
def test_other_ops_refuse(fn, cdt):
    t = rlx.tensor(crand(2, 4, dt=cdt))
    with pytest.raises(rlx.RlxError) as e:
        fn(t)
    assert e.value.status == rlx.E_DTYPE and rlx.dtype_name(cdt) in str(e.value)


def fd_grad(f, xs, k, h):
    """Central differences of the real f(*xs) in the real and the imaginary
    part of every element of xs[k] separately: dRe + 1j dIm (PyTorch)."""
    x = xs[k]
    g = np.zeros(x.shape, x.dtype)
    for idx in np.ndindex(x.shape):
        for unit in ((1,) if not np.iscomplexobj(x) else (1, 1j)):
            d = np.zeros(x.shape, x.dtype)
            d[idx] = h * unit
            # np.asarray: 0-d arithmetic gives a NumPy scalar, which rlx.tensor takes as a Python one
            lp = f(*[np.asarray(xi + d, x.dtype) if i == k else xi for i, xi in enumerate(xs)]).item()
            lm = f(*[np.asarray(xi - d, x.dtype) if i == k else xi for i, xi in enumerate(xs)]).item()
            g[idx] += (lp - lm) / (2 * h) * unit
    return g


def _parts(z):
    return rlx.sum(z.real * z.real) + rlx.sum(z.imag * 0.7)


LOSSES = {
    "mul": (lambda a, b: _parts(a * b), [(2, 3), (3,)]),
    "div": (lambda a, b: _parts(a / (b + 3)), [(2, 3), (2, 1)]),
    "exp_conj_abs": (lambda a: rlx.sum(rlx.abs(rlx.exp(rlx.conj(a)) * a)), [(3, 2)]),
    "matmul": (lambda a, b: _parts(a @ b), [(2, 3), (3, 4)]),
    "sum_mean_view": (lambda a: _parts(rlx.sum(a.T[::-1], axis=0) * rlx.mean(a)), [(2, 3)]),
    "fft_c": (lambda a: _parts(rlx.fft_c(a, axis=0)) + rlx.sum(rlx.abs(rlx.fft_c(a, inverse=True))), [(4, 2)]),
    "rank0": (lambda a, b: _parts(a * b), [(), (2,)]),
    "index_select": (lambda a: _parts(rlx.index_select(a, 1, rlx.tensor(np.int64([2, 0, 2]))) * 2), [(2, 3)]),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("cdt", CDTS)
def test_grad_matches_finite_differences(backend, name, cdt):
    fn, shapes = LOSSES[name]
    xs = [crand(*s, dt=cdt) for s in shapes]

    def f(*arrs):
        return fn(*[rlx.tensor(a) for a in arrs])

    ts = [rlx.tensor(x) for x in xs]
    gs = rlx.grad(fn(*ts), ts)
    wide = np.dtype(cdt) == np.complex128
    for k, x in enumerate(xs):
        assert gs[k].dtype == rlx.complex128 if wide else gs[k].dtype == rlx.complex64
        want = fd_grad(f, xs, k, 1e-6 if wide else 1e-2)
        np.testing.assert_allclose(gs[k].numpy(), want, rtol=1e-6 if wide else 2e-2, atol=1e-6 if wide else 2e-2)


def test_grad_real_inputs_through_complex(backend):
    x, y = RNG.uniform(-1, 1, (2, 3)), RNG.uniform(-1, 1, (3,))

    def f(a, b):
        return rlx.sum(rlx.abs(rlx.complex(a, b) * rlx.complex(b, a * a)))

    tx, ty = rlx.tensor(x), rlx.tensor(y)
    gx, gy = rlx.grad(f(tx, ty), [tx, ty])
    assert gx.dtype == rlx.float64
    np.testing.assert_allclose(gx.numpy(), fd_grad(lambda a, b: f(rlx.tensor(a), rlx.tensor(b)), [x, y], 0, 1e-6),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gy.numpy(), fd_grad(lambda a, b: f(rlx.tensor(a), rlx.tensor(b)), [x, y], 1, 1e-6),
                               rtol=1e-6, atol=1e-6)


def test_grad_refusals():
    z = rlx.tensor(crand(3, dt=np.complex128))
    with pytest.raises(rlx.RlxError) as e:  # PyTorch: grad only of real outputs
        rlx.grad(rlx.sum(z * z), [z])
    assert e.value.status == rlx.E_DTYPE and "real" in str(e.value) and "c128" in str(e.value)
    g, = rlx.grad(rlx.sum(rlx.abs(z * 0)), [z])  # |z| at 0: gradient 0 (PyTorch)
    np.testing.assert_array_equal(g.numpy(), np.zeros(3, np.complex128))