"""conv1d, conv_transpose1d/2d and einsum against NumPy: a scatter-accumulate
reference for the transposed convolution, np.einsum on random valid
equations, on both backends, with views, every dtype they take, and their
errors."""
import numpy as np
import pytest

import rlx
from conftest import assert_close


@pytest.fixture(params=["ref", "jit"])
def backend(request):
    rlx.set_option("backend", request.param)
    yield request.param
    rlx.set_option("backend", "jit")


def conv_t_ref(x, w, b, s, p, op, d, g):
    """conv_transpose2d by its definition: x[n, c, i, j] * w[c, o, u, v] lands on
    output (i*s - p + u*d, j*s - p + v*d); accumulated on a canvas without the
    padding, then cropped."""
    n, ci, h, wd = x.shape
    _, cog, kh, kw = w.shape
    oh = (h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1
    ow = (wd - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1
    canvas = np.zeros((n, cog * g, (h - 1) * s[0] + d[0] * (kh - 1) + 1 + op[0],
                       (wd - 1) * s[1] + d[1] * (kw - 1) + 1 + op[1]))
    cig = ci // g
    for k in range(g):
        xg = x[:, k * cig:(k + 1) * cig].astype(np.float64)
        for u in range(kh):
            for v in range(kw):
                part = np.einsum("ncij,co->noij", xg, w[k * cig:(k + 1) * cig, :, u, v].astype(np.float64))
                canvas[:, k * cog:(k + 1) * cog, u * d[0]:u * d[0] + (h - 1) * s[0] + 1:s[0],
                       v * d[1]:v * d[1] + (wd - 1) * s[1] + 1:s[1]] += part
    y = canvas[:, :, p[0]:p[0] + oh, p[1]:p[1] + ow]
    return y if b is None else y + b[None, :, None, None]


def conv_ref(x, w, b, s, p, d, g):
    """conv2d (cross-correlation) by its definition, through padded slices."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (h + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
    y = np.zeros((n, o, oh, ow))
    og = o // g
    for k in range(g):
        for u in range(kh):
            for v in range(kw):
                patch = xp[:, k * cg:(k + 1) * cg, u * d[0]:u * d[0] + (oh - 1) * s[0] + 1:s[0],
                           v * d[1]:v * d[1] + (ow - 1) * s[1] + 1:s[1]]
                y[:, k * og:(k + 1) * og] += np.einsum("ncij,oc->noij", patch, w[k * og:(k + 1) * og, :, u, v])
    return y if b is None else y + b[None, :, None]


CONV_T = [  # x shape, C_out/groups, kernel, stride, padding, output_padding, dilation, groups
    ((2, 3, 4, 5), 2, (3, 3), (1, 1), (0, 0), (0, 0), (1, 1), 1),
    ((1, 4, 3, 3), 3, (2, 3), (2, 3), (1, 0), (1, 2), (1, 2), 2),
    ((2, 2, 5, 4), 1, (3, 2), (3, 1), (2, 1), (2, 0), (1, 1), 1),
    ((1, 6, 2, 3), 2, (1, 1), (2, 2), (0, 0), (1, 1), (1, 1), 3),
    ((1, 2, 3, 3), 2, (2, 2), (2, 2), (2, 2), (0, 1), (1, 1), 1),   # padding beyond the kernel: a crop
    ((8, 64, 28, 28), 32, (4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 1),
    ((1, 2, 3, 2), 2, (3, 2), (9, 2), (1, 0), (4, 1), (1, 1), 1),     # stride 9: zero-inserted, not phases
    ((2, 2, 4, 3), 3, (5, 3), (3, 2), (4, 2), (0, 1), (1, 1), 2),     # phases with unequal tap counts
]


@pytest.mark.parametrize("case", CONV_T)
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_conv_transpose2d_matches_scatter_loop(backend, case, dt):
    xs, cog, k, s, p, op, d, g = case
    rng = np.random.default_rng(sum(xs) + cog)
    x = rng.standard_normal(xs).astype(dt)
    w = rng.standard_normal((xs[1], cog, *k)).astype(dt)
    b = rng.standard_normal(cog * g).astype(dt)
    want = conv_t_ref(x, w, b, s, p, op, d, g)
    tol = 1e-4 if dt == np.float32 else 1e-10
    got = rlx.conv_transpose2d(x, w, b, stride=s, padding=p, output_padding=op, groups=g, dilation=d)
    assert_close(got, want, rtol=tol, atol=tol)
    # x as a transposed view, no bias, ints broadcast to pairs where they are equal
    xt = rlx.tensor(np.ascontiguousarray(x.transpose(0, 1, 3, 2))).transpose(0, 1, 3, 2)
    got = rlx.conv_transpose2d(xt, w, None, s, p, op, g, d)
    assert_close(got, conv_t_ref(x, w, None, s, p, op, d, g), rtol=tol, atol=tol)


def test_conv_transpose2d_is_conv2d_adjoint(backend):
    """<conv2d(x, w), y> == <x, conv_transpose2d(y, w)> with matching output_padding."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 9, 8))
    w = rng.standard_normal((6, 2, 3, 2))
    y = rlx.conv2d(x, w, stride=(2, 3), padding=(1, 1), dilation=(1, 2), groups=2).numpy()
    r = rng.standard_normal(y.shape)
    xt = rlx.conv_transpose2d(r, w, stride=(2, 3), padding=(1, 1), output_padding=(0, 1), groups=2,
                              dilation=(1, 2)).numpy()
    assert xt.shape == x.shape
    np.testing.assert_allclose(np.sum(y * r), np.sum(x * xt), rtol=1e-10)


def test_conv_transpose2d_integers_compute_in_f32():
    x = np.arange(4, dtype=np.int32).reshape(1, 1, 2, 2)
    w = np.ones((1, 1, 2, 2), np.int32)
    assert_close(rlx.conv_transpose2d(x, w, stride=2), np.kron(x[0, 0], np.ones((2, 2)))[None, None],
                 dtype=rlx.float32)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_conv1d_and_conv_transpose1d(backend, dt):
    rng = np.random.default_rng(3)
    tol = 1e-4 if dt == np.float32 else 1e-10
    for (n, c, L, o, k, s, p, d, g) in [(2, 4, 11, 6, 3, 2, 1, 2, 2), (1, 3, 5, 2, 1, 1, 0, 1, 1),
                                        (3, 2, 7, 4, 4, 3, 2, 1, 2)]:
        x = rng.standard_normal((n, c, L)).astype(dt)
        w = rng.standard_normal((o, c // g, k)).astype(dt)
        b = rng.standard_normal(o).astype(dt)
        want = conv_ref(x[:, :, None], w[:, :, None], None, (1, s), (0, p), (1, d), g)[:, :, 0] + b[None, :, None]
        assert_close(rlx.conv1d(x, w, b, stride=s, padding=p, dilation=d, groups=g), want, rtol=tol, atol=tol)
        xv = rlx.tensor(np.repeat(x, 2, axis=2))[:, :, ::2]  # a strided view
        assert_close(rlx.conv1d(xv, w, b, (s,), (p,), (d,), g), want, rtol=tol, atol=tol)
        for op in range(max(s, d)):
            wt = rng.standard_normal((c, o // g, k)).astype(dt)
            want = conv_t_ref(x[:, :, None], wt[:, :, None], b[:o // g * g], (1, s), (0, p), (0, op), (1, d), g)
            got = rlx.conv_transpose1d(x, wt, b[:o // g * g], stride=s, padding=p, output_padding=op, groups=g,
                                       dilation=d)
            assert_close(got, want[:, :, 0], rtol=tol, atol=tol)


def test_conv_errors():
    x = np.ones((1, 4, 3, 3), np.float32)
    w = np.ones((4, 2, 2, 2), np.float32)
    with pytest.raises(rlx.RlxError) as e:
        rlx.conv_transpose2d(x, w, output_padding=1)  # not below stride 1 or dilation 1
    assert e.value.status == rlx.E_ARG and "rlx_conv_transpose2d" in str(e.value)
    with pytest.raises(rlx.RlxError) as e:
        rlx.conv_transpose2d(x, np.ones((3, 2, 2, 2), np.float32))
    assert e.value.status == rlx.E_SHAPE
    with pytest.raises(rlx.RlxError) as e:
        rlx.conv_transpose2d(x, w, padding=5)
    assert e.value.status == rlx.E_SHAPE
    with pytest.raises(rlx.RlxError) as e:
        rlx.conv1d(x, w)
    assert e.value.status == rlx.E_SHAPE and "rlx_conv1d" in str(e.value)
    with pytest.raises(rlx.RlxError):
        rlx.conv_transpose1d(np.ones((1, 4, 3)), np.ones((4, 1, 2)), stride=2, output_padding=2)
    with pytest.raises(ValueError):
        rlx.conv1d(np.ones((1, 4, 3)), np.ones((2, 4, 2)), stride=(1, 2))


# ------------------------------------------------------------------ einsum

def random_einsum(rng):
    """A random valid equation and operand shapes: repeated letters within a
    term (diagonals), letters summed away, size-1 dims against larger ones,
    "..." with broadcasting, implicit or explicit outputs."""
    letters = list(rng.choice(list("abcdeAB"), size=int(rng.integers(1, 6)), replace=False))
    size = {c: int(rng.integers(1, 4)) for c in letters}
    ell = [int(v) for v in rng.integers(1, 4, size=int(rng.integers(0, 3)))]
    use_ell = rng.random() < 0.3
    terms, shapes = [], []
    for _ in range(int(rng.integers(1, 4))):
        t = [str(c) for c in rng.choice(letters, size=int(rng.integers(0, 4)))]
        shape = [size[c] for c in t]
        for i, c in enumerate(t):
            if t.count(c) == 1 and rng.random() < 0.15:
                shape[i] = 1
        if use_ell and rng.random() < 0.8:
            e = ell[len(ell) - int(rng.integers(0, len(ell) + 1)):]
            e = [1 if rng.random() < 0.2 else v for v in e]
            pos = int(rng.integers(0, len(t) + 1))
            t.insert(pos, "...")
            shape[pos:pos] = e
        terms.append("".join(t))
        shapes.append(tuple(shape))
    eq = ",".join(terms)
    if rng.random() < 0.6:
        used = sorted({c for t in terms for c in t if c != "."})
        out = [str(c) for c in rng.permutation(used)[:int(rng.integers(0, len(used) + 1))]] if used else []
        if any("..." in t for t in terms):
            out.insert(int(rng.integers(0, len(out) + 1)), "...")
        eq += "->" + "".join(out)
    return eq, shapes


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.int32, np.int64])
def test_einsum_random_equations(backend, dt):
    rng = np.random.default_rng({np.float64: 1, np.float32: 2, np.int32: 3, np.int64: 4}[dt])
    for _ in range(60 if backend == "jit" else 120):
        eq, shapes = random_einsum(rng)
        ops = [np.asarray(rng.integers(-3, 4, size=s)).astype(dt) for s in shapes]
        want = np.einsum(eq, *ops)
        tensors = [rlx.from_numpy(o) if o.ndim == 0 else o for o in ops]
        got = rlx.einsum(eq, *tensors)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5, err_msg="%s %s" % (eq, shapes))
        assert got.numpy().dtype == want.dtype, (eq, got.numpy().dtype, want.dtype)


def test_einsum_views_and_common_forms(backend):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((4, 3))
    b = rng.standard_normal((5, 4))
    at = rlx.tensor(np.ascontiguousarray(a.T)).T                # a transposed view
    bs = rlx.tensor(np.repeat(b, 2, axis=1))[:, ::2]            # a strided view
    assert_close(rlx.einsum("ij,ki->jk", at, bs), np.einsum("ij,ki->jk", a, b))
    q = rng.standard_normal((2, 5, 3, 4))
    k = rng.standard_normal((2, 6, 3, 4))
    assert_close(rlx.einsum("bqhd,bkhd->bhqk", q, k), np.einsum("bqhd,bkhd->bhqk", q, k))
    x = rng.standard_normal((3, 3, 3))
    assert_close(rlx.einsum("iii->i", x), np.einsum("iii->i", x))
    assert_close(rlx.einsum("iii", x), np.einsum("iii", x))
    assert_close(rlx.einsum("i...i", x), np.einsum("i...i", x))
    v = rng.standard_normal(3)
    assert_close(rlx.einsum("i,i", v, v), np.einsum("i,i", v, v))
    ms = [rng.standard_normal((3, 3)) for _ in range(4)]
    assert_close(rlx.einsum("ij,jk,kl,lm->im", *ms), ms[0] @ ms[1] @ ms[2] @ ms[3])
    s = rlx.from_numpy(np.array(2.5))  # rank 0
    assert_close(rlx.einsum(",i->i", s, v), 2.5 * v)
    assert_close(rlx.einsum("", s), 2.5)


def test_einsum_gradient_matches_finite_differences():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((2, 3, 3))
    b = rng.standard_normal((2, 4))
    r = rng.standard_normal((4, 2))
    ta, tb = rlx.tensor(a), rlx.tensor(b)
    loss = (rlx.einsum("bii,bj->jb", ta, tb) * r).sum()
    ga, gb = rlx.grad(loss, [ta, tb])
    eps = 1e-6

    def f(a_, b_):
        return float(np.sum(np.einsum("bii,bj->jb", a_, b_) * r))
    fd_a = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        d = np.zeros_like(a)
        d[i] = eps
        fd_a[i] = (f(a + d, b) - f(a - d, b)) / (2 * eps)
    fd_b = np.zeros_like(b)
    for i in np.ndindex(b.shape):
        d = np.zeros_like(b)
        d[i] = eps
        fd_b[i] = (f(a, b + d) - f(a, b - d)) / (2 * eps)
    assert_close(ga, fd_a, rtol=1e-6, atol=1e-6)
    assert_close(gb, fd_b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("eq, shapes, status", [
    ("ij,jk", [(2, 3), (4, 5)], "E_SHAPE"),
    ("ij,jk", [(2, 3)], "E_ARG"),
    ("ij", [(2, 3), (3, 2)], "E_ARG"),
    ("i$", [(2, 3)], "E_ARG"),
    ("ij->ii", [(2, 3)], "E_ARG"),
    ("ij->k", [(2, 3)], "E_ARG"),
    ("ijk", [(2, 3)], "E_SHAPE"),
    ("ii", [(2, 3)], "E_SHAPE"),
    ("...i->i", [(2, 3)], "E_ARG"),
    ("....", [(2, 3)], "E_ARG"),
])
def test_einsum_errors(eq, shapes, status):
    with pytest.raises(rlx.RlxError) as e:
        rlx.einsum(eq, *[np.ones(s) for s in shapes])
    assert e.value.status == getattr(rlx, status) and "rlx_einsum" in str(e.value)


def test_einsum_error_names_the_index():
    with pytest.raises(rlx.RlxError, match="index 'j'.*size 3 in operand 0 and 4 in operand 1"):
        rlx.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((4, 5)))
    with pytest.raises(rlx.RlxError):
        rlx.einsum("ij", np.ones((2, 3), bool))
    with pytest.raises(rlx.RlxError):
        rlx.einsum("i")
    with pytest.raises(TypeError):
        rlx.einsum(np.ones(3), "i")
