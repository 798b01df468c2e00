"""Checkpoints against independent readers and writers: NumPy for .npy and
.npz, and a plain struct + json safetensors reader/writer written here."""
import json
import struct

import numpy as np
import pytest

import rlx

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint32]
ST_NAMES = {np.bool_: "BOOL", np.int32: "I32", np.int64: "I64", np.float32: "F32", np.float64: "F64",
            np.float16: "F16", np.int8: "I8", np.uint8: "U8", np.int16: "I16", np.uint32: "U32"}
SHAPES = [(), (0,), (1,), (5, 7, 11), (3, 0, 2)]


def sample(dt, shape, seed=0):
    r = np.random.default_rng(seed)
    if dt is np.bool_:
        return np.asarray(r.random(shape) < 0.5)
    if np.issubdtype(dt, np.integer):
        return np.asarray(r.integers(-2**20, 2**20, size=shape), dtype=dt)
    return np.asarray(r.standard_normal(shape) * 100, dtype=dt)


def arrays():
    out = {}
    for dt in DTYPES:
        for i, s in enumerate(SHAPES):
            out["%s_%d" % (np.dtype(dt).name, i)] = sample(dt, s, seed=i)
    return out


# ---------------------------------------------- a plain safetensors codec

def st_read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    inv = {v: k for k, v in ST_NAMES.items()}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        out[name] = np.frombuffer(data[b:en], dtype=np.dtype(inv[e["dtype"]]).newbyteorder("<")).reshape(e["shape"])
    return out, header


def st_write(path, tensors, metadata=None, pad_to=8):
    header, chunks, at = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).astype(np.dtype(a.dtype).newbyteorder("<")).tobytes()
        header[name] = {"dtype": ST_NAMES[a.dtype.type], "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        chunks.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-(8 + len(h)) % pad_to)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))


def same(t, a):
    got = t.numpy()
    assert got.dtype == a.dtype and got.shape == a.shape
    assert got.tobytes() == np.ascontiguousarray(a).tobytes()  # bit for bit


# ------------------------------------------------------------ safetensors

def test_librlx_writes_safetensors_a_plain_reader_reads(tmp_path):
    a = arrays()
    a["view"] = np.arange(24, dtype=np.float32).reshape(4, 6)
    tensors = {k: rlx.from_numpy(v) for k, v in a.items()}
    tensors["view"] = tensors["view"].T  # written contiguous
    a["view"] = a["view"].T
    rlx.save_safetensors(tmp_path / "m.safetensors", tensors)
    got, header = st_read(tmp_path / "m.safetensors")
    assert list(got) == list(a)
    for k in a:
        assert got[k].tobytes() == np.ascontiguousarray(a[k]).tobytes() and got[k].shape == a[k].shape, k
        assert got[k].dtype == a[k].dtype
    assert (8 + struct.unpack("<Q", open(tmp_path / "m.safetensors", "rb").read(8))[0]) % 8 == 0


@pytest.mark.parametrize("pad_to", [1, 8])
def test_plain_writer_safetensors_librlx_reads(tmp_path, pad_to):
    a = arrays()
    st_write(tmp_path / "m.safetensors", a, metadata={"format": "pt"}, pad_to=pad_to)
    got = rlx.load_safetensors(tmp_path / "m.safetensors")
    assert list(got) == list(a)
    for k in a:
        same(got[k], a[k])


def test_safetensors_zero_copy_survives_the_dict(tmp_path):
    w = np.random.default_rng(1).standard_normal((128, 64)).astype(np.float32)
    st_write(tmp_path / "w.safetensors", {"w": w})
    t = rlx.load_safetensors(tmp_path / "w.safetensors")["w"]
    assert t.is_realized and rlx.storage_bytes(t) == w.nbytes
    np.testing.assert_array_equal((t * 2).numpy(), w * 2)


def test_safetensors_errors(tmp_path):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(rlx.RlxError) as e:
        rlx.load_safetensors(p)
    assert e.value.status == rlx.E_IO and str(p) in e.value.message and "past the end" in e.value.message
    h = b'{"a":{"dtype":"U16","shape":[1],"data_offsets":[0,2]}}'
    p.write_bytes(struct.pack("<Q", len(h)) + h + b"\0\0")
    with pytest.raises(rlx.RlxError) as e:
        rlx.load_safetensors(p)
    assert e.value.status == rlx.E_UNSUPPORTED
    # a dtype string whose size does not fit the data, and one of the wrong case
    for dt in (b"BF16", b"F16", b"I8", b"U32", b"f16", b"bfloat16"):
        h = b'{"a":{"dtype":"' + dt + b'","shape":[3],"data_offsets":[0,4]}}'
        p.write_bytes(struct.pack("<Q", len(h)) + h + b"\0" * 4)
        with pytest.raises(rlx.RlxError) as e:
            rlx.load_safetensors(p)
        assert e.value.status == rlx.E_IO and str(p) in e.value.message
    with pytest.raises(rlx.RlxError) as e:
        rlx.load_safetensors(tmp_path / "missing")
    assert e.value.status == rlx.E_IO
    with pytest.raises(rlx.RlxError) as e:
        rlx.save_safetensors(tmp_path / "x", {"": np.zeros(2)})
    assert e.value.status == rlx.E_ARG
    with pytest.raises(rlx.RlxError) as e:
        rlx.save_safetensors(tmp_path / "no" / "x", {"a": np.zeros(2)})
    assert e.value.status == rlx.E_IO


# ----------------------------------------------------------- npy and npz

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("order", ["<", ">"])
def test_numpy_writes_npy_librlx_reads(tmp_path, dt, order):
    for i, s in enumerate(SHAPES):
        a = sample(dt, s, seed=i)
        a = a.astype(np.dtype(dt).newbyteorder(order))
        np.save(tmp_path / "a.npy", a)
        t = rlx.load_npy(tmp_path / "a.npy")
        np.testing.assert_array_equal(t.numpy(), a)
        assert t.numpy().dtype == np.dtype(dt)


def test_numpy_fortran_order_and_versions(tmp_path):
    a = np.asfortranarray(np.arange(24, dtype=np.float64).reshape(2, 3, 4))
    np.save(tmp_path / "f.npy", a)
    np.testing.assert_array_equal(rlx.load_npy(tmp_path / "f.npy").numpy(), a)
    from numpy.lib import format as npf
    for version in [(1, 0), (2, 0), (3, 0)]:
        b = np.arange(6, dtype=np.int32).reshape(3, 2)
        with open(tmp_path / "v.npy", "wb") as f:
            npf.write_array(f, b, version=version)
        np.testing.assert_array_equal(rlx.load_npy(tmp_path / "v.npy").numpy(), b)


@pytest.mark.parametrize("dt", DTYPES)
def test_librlx_writes_npy_numpy_reads(tmp_path, dt):
    for i, s in enumerate(SHAPES):
        a = sample(dt, s, seed=i)
        rlx.save_npy(tmp_path / "a.npy", a if i % 2 else rlx.from_numpy(a))
        b = np.load(tmp_path / "a.npy")
        assert b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("saver", [np.savez, np.savez_compressed])
def test_numpy_writes_npz_librlx_reads(tmp_path, saver):
    a = arrays()
    saver(tmp_path / "a.npz", **a)
    got = rlx.load_npz(tmp_path / "a.npz")
    assert sorted(got) == sorted(a)
    for k in a:
        same(got[k], a[k])


def test_librlx_writes_npz_numpy_reads(tmp_path):
    a = arrays()
    rlx.save_npz(tmp_path / "a.npz", {k: rlx.from_numpy(v) for k, v in a.items()}, extra=rlx.arange(0, 5, 1, dtype=rlx.float32))
    with np.load(tmp_path / "a.npz") as z:
        assert sorted(z.files) == sorted(list(a) + ["extra"])
        for k in a:
            assert z[k].dtype == a[k].dtype and z[k].shape == a[k].shape
            np.testing.assert_array_equal(z[k], a[k])
        np.testing.assert_array_equal(z["extra"], np.arange(5, dtype=np.float32))


def test_npy_npz_errors(tmp_path):
    p = tmp_path / "bad.npz"
    np.savez(p, x=np.arange(100.0))
    blob = bytearray(p.read_bytes())
    blob[200] ^= 0xFF
    p.write_bytes(bytes(blob))
    with pytest.raises(rlx.RlxError) as e:
        rlx.load_npz(p)
    assert e.value.status == rlx.E_IO and "CRC" in e.value.message and str(p) in e.value.message
    q = tmp_path / "u.npy"
    np.save(q, np.zeros(3, dtype=np.uint16))
    with pytest.raises(rlx.RlxError) as e:
        rlx.load_npy(q)
    assert e.value.status == rlx.E_UNSUPPORTED
    np.save(q, np.array(["ab"]))
    with pytest.raises(rlx.RlxError) as e:
        rlx.load_npy(q)
    assert e.value.status == rlx.E_IO
    with pytest.raises(rlx.RlxError) as e:
        rlx.save_npz(tmp_path / "dir-missing" / "a.npz", a=np.zeros(1))
    assert e.value.status == rlx.E_IO
    with pytest.raises(rlx.RlxError):
        rlx.save_npy(tmp_path / "dir-missing" / "a.npy", np.zeros(1))


# ------------------------------------------------------ the narrow dtypes

def test_every_float16_pattern_through_every_format(tmp_path):
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    h = bits.view(np.float16)  # NaN payloads, -0, subnormals, infinities
    t = rlx.from_numpy(h)
    rlx.save_safetensors(tmp_path / "h.safetensors", {"h": t})
    rlx.save_npz(tmp_path / "h.npz", h=t)
    rlx.save_npy(tmp_path / "h.npy", t)
    got, header = st_read(tmp_path / "h.safetensors")
    assert header["h"]["dtype"] == "F16" and got["h"].tobytes() == h.tobytes()
    with np.load(tmp_path / "h.npz") as z:
        assert z["h"].dtype == np.float16 and z["h"].tobytes() == h.tobytes()
    assert np.load(tmp_path / "h.npy").tobytes() == h.tobytes()
    for load in (lambda: rlx.load_safetensors(tmp_path / "h.safetensors")["h"],
                 lambda: rlx.load_npz(tmp_path / "h.npz")["h"], lambda: rlx.load_npy(tmp_path / "h.npy")):
        r = load()
        assert r.dtype is rlx.float16 and r.bits().tobytes() == bits.tobytes()


def test_bfloat16_in_safetensors_both_ways(tmp_path):
    bits = np.array([[0x3F80, 0xC020, 0x7F80], [0xFF80, 0x7FC1, 0x0001]], np.uint16)
    t = rlx.from_numpy(bits, dtype=rlx.bfloat16)
    rlx.save_safetensors(tmp_path / "b.safetensors", {"b": t, "f": rlx.ones(3)})
    with open(tmp_path / "b.safetensors", "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    e = json.loads(blob[8:8 + n])["b"]
    assert e["dtype"] == "BF16" and e["shape"] == [2, 3]
    b0, b1 = e["data_offsets"]
    assert blob[8 + n + b0:8 + n + b1] == bits.astype("<u2").tobytes()
    # a file written here, read by librlx in place
    h = json.dumps({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}).encode()
    h += b" " * (-(8 + len(h)) % 8)
    (tmp_path / "w.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + bits.astype("<u2").tobytes())
    w = rlx.load_safetensors(tmp_path / "w.safetensors")["w"]
    assert w.dtype is rlx.bfloat16 and np.array_equal(w.bits(), bits)
    assert w.numpy()[0].tolist() == [1.0, -2.5, np.inf]


def test_bfloat16_has_no_npy_descr(tmp_path):
    t = rlx.tensor([1.0, 2.0], dtype=rlx.bfloat16)
    with pytest.raises(rlx.RlxError) as e:
        rlx.save_npy(tmp_path / "b.npy", t)
    assert e.value.status == rlx.E_DTYPE and "rlx_save_npy" in e.value.message and "bf16" in e.value.message
    assert not (tmp_path / "b.npy").exists()
    with pytest.raises(rlx.RlxError) as e:
        rlx.save_npz(tmp_path / "b.npz", a=np.zeros(2), b=t)
    assert e.value.status == rlx.E_DTYPE and "rlx_save_npz" in e.value.message and "tensors[1]" in e.value.message
    assert not (tmp_path / "b.npz").exists()
    rlx.save_npy(tmp_path / "b.npy", t.float())  # as float32 values it saves
    assert np.load(tmp_path / "b.npy").tolist() == [1.0, 2.0]
    # NumPy arrays of dtypes librlx lacks: a uint16 .npy stays unsupported
    np.save(tmp_path / "u.npy", np.zeros(2, np.uint16))
    with pytest.raises(rlx.RlxError) as e:
        rlx.load_npy(tmp_path / "u.npy")
    assert e.value.status == rlx.E_UNSUPPORTED
