"""rlx.attention's grouped kv heads, mask tensors, is_causal and scale, and
rlx.rope's offsets, positions, layouts and partial rotation, against NumPy
written out from the definitions (kv heads repeated with np.repeat, the
repeat_interleave of PyTorch's enable_gqa), on both backends."""
import numpy as np
import pytest

import rlx
from conftest import assert_close


@pytest.fixture(params=["ref", "jit"])
def backend(request):
    saved = rlx.get_option("backend")
    rlx.set_option("backend", request.param)
    yield request.param
    rlx.set_option("backend", saved)


def sdpa_ref(q, k, v, h, d, hkv=None, attn_mask=None, causal=False, window=0, scale=None):
    """NumPy attention: q [B, Sq, H*D], k, v [B, Sk, Hkv*D]; the mask
    broadcast to [B, H, Sq, Sk] (bool keeps, float adds); a row with no
    visible key is zeros."""
    hkv = hkv or h
    B, Sq, _ = q.shape
    Sk = k.shape[1]
    qh = q.reshape(B, Sq, h, d).transpose(0, 2, 1, 3)
    kh = np.repeat(k.reshape(B, Sk, hkv, d).transpose(0, 2, 1, 3), h // hkv, axis=1)
    vh = np.repeat(v.reshape(B, Sk, hkv, d).transpose(0, 2, 1, 3), h // hkv, axis=1)
    s = qh @ kh.transpose(0, 1, 3, 2) * (1 / np.sqrt(d) if scale is None else scale)
    keep = np.ones(s.shape, bool)
    pos = Sk - Sq + np.arange(Sq)[:, None]
    j = np.arange(Sk)[None, :]
    if causal:
        keep &= j <= pos
        if window:
            keep &= j > pos - window
    if attn_mask is not None:
        m = np.broadcast_to(attn_mask, s.shape)
        if m.dtype == bool:
            keep &= m
        else:
            s = s + m
            keep &= m != -np.inf
    s = np.where(keep, s, -np.inf)
    mx = np.max(s, -1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0)
    e = np.where(keep, np.exp(s - mx), 0)
    den = e.sum(-1, keepdims=True)
    p = np.divide(e, den, out=np.zeros_like(e), where=den > 0)
    return (p @ vh).transpose(0, 2, 1, 3).reshape(B, Sq, h * d)


def _qkv(rng, B, Sq, Sk, h, hkv, d, dt):
    return (rng.standard_normal((B, Sq, h * d)).astype(dt), rng.standard_normal((B, Sk, hkv * d)).astype(dt),
            rng.standard_normal((B, Sk, hkv * d)).astype(dt))


def _tol(dt):
    return {"rtol": 2e-5, "atol": 2e-5} if dt == np.float32 else {}


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("hkv", [1, 2, 4])
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_kv_heads(rng, backend, dt, hkv, causal):
    B, Sq, Sk, H, D = 2, 5, 7, 4, 3
    q, k, v = _qkv(rng, B, Sq, Sk, H, hkv, D, dt)
    got = rlx.attention(q, k, v, H, D, num_kv_heads=hkv, is_causal=causal)
    assert_close(got, sdpa_ref(q, k, v, H, D, hkv, causal=causal), **_tol(dt))


MASK_SHAPES = [(5, 7), (2, 1, 5, 7), (2, 4, 5, 7), (2, 1, 1, 7), (7,), (4, 5, 7), (1, 4, 1, 7), (2, 4, 5, 1)]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", MASK_SHAPES)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_mask_shapes(rng, backend, dt, shape, kind):
    B, Sq, Sk, H, D = 2, 5, 7, 4, 3
    q, k, v = _qkv(rng, B, Sq, Sk, H, 2, D, dt)
    if kind == "bool":
        m = rng.random(shape) < 0.6
    else:
        m = np.where(rng.random(shape) < 0.2, -np.inf, rng.uniform(-2, 2, shape)).astype(dt)
    if len(shape) >= 2:  # the first mask row drops every key: zeros there
        m.reshape(-1, shape[-1])[0] = False if kind == "bool" else -np.inf
    for causal in (False, True):
        got = rlx.attention(q, k, v, H, D, num_kv_heads=2, attn_mask=m, is_causal=causal)
        assert_close(got, sdpa_ref(q, k, v, H, D, 2, m, causal), **_tol(dt))
    got = rlx.attention(q, k, v, H, D, mask="sliding", window=3, num_kv_heads=2, attn_mask=m)
    assert_close(got, sdpa_ref(q, k, v, H, D, 2, m, True, 3), **_tol(dt))


def test_fully_masked_rows_are_zero(backend):
    q = np.ones((1, 2, 2))
    m = np.array([[True, False], [False, False]])
    out = rlx.attention(q, q, q, 1, attn_mask=m).numpy()
    assert np.all(out[0, 1] == 0) and np.all(out[0, 0] == 1)
    out = rlx.attention(q, q, q, 1, attn_mask=np.full((2, 2), -np.inf)).numpy()
    assert np.all(out == 0)  # PyTorch SDPA gives NaN here


@pytest.mark.parametrize("Sq,Sk", [(3, 8), (1, 8), (6, 3), (70, 150)])
def test_causal_bottom_right_with_padding(rng, backend, Sq, Sk):
    B, H, D = 2, 2, 4
    q, k, v = _qkv(rng, B, Sq, Sk, H, 1, D, np.float64)
    pad = np.ones((B, 1, 1, Sk), bool)
    pad[1, 0, 0, : Sk // 2] = False  # left padding in batch 1
    got = rlx.attention(q, k, v, H, D, num_kv_heads=1, is_causal=True, attn_mask=pad)
    assert_close(got, sdpa_ref(q, k, v, H, D, 1, pad, True))
    # query i sees keys j <= i + Sk - Sq: the last query sees them all
    last = rlx.attention(q[:, -1:], k, v, H, D, num_kv_heads=1, is_causal=True).numpy()
    assert_close(rlx.tensor(last), sdpa_ref(q[:, -1:], k, v, H, D, 1))


def test_fused_qkv_views_and_scale(rng, backend):
    B, S, H, Hkv, D = 2, 6, 4, 2, 4
    f = rng.standard_normal((B, S, (H + 2 * Hkv) * D))
    F = rlx.tensor(f)
    Q, K, V = F.narrow(2, 0, H * D), F.narrow(2, H * D, Hkv * D), F.narrow(2, (H + Hkv) * D, Hkv * D)
    q, k, v = f[:, :, :H * D], f[:, :, H * D:(H + Hkv) * D], f[:, :, (H + Hkv) * D:]
    got = rlx.attention(Q, K, V, H, D, num_kv_heads=Hkv, is_causal=True, scale=0.3)
    assert_close(got, sdpa_ref(q, k, v, H, D, Hkv, causal=True, scale=0.3))


def test_old_calls_unchanged(rng, backend):
    B, Sq, Sk, H, D = 2, 3, 5, 2, 4
    q, k, v = _qkv(rng, B, Sq, Sk, H, H, D, np.float64)
    keep = np.array([[1, 1, 0, 1, 0], [0, 1, 0, 0, 1]])
    want = sdpa_ref(q, k, v, H, D, attn_mask=keep[:, None, None, :] != 0)
    assert_close(rlx.attention(q, k, v, H, mask=rlx.tensor(keep)), want)
    # a key mask tensor with a new keyword goes through rlx_attention_ex
    assert_close(rlx.attention(q, k, v, H, mask=rlx.tensor(keep), scale=1 / np.sqrt(D)), want)
    assert_close(rlx.attention(q, k, v, H, mask="causal"), sdpa_ref(q, k, v, H, D, causal=True))


def test_additive_mask_gradient(rng, backend):
    """d/d(mask) of sum(w * attention) equals d/d(scores) summed over the
    mask's broadcast dims: checked by central differences in NumPy."""
    B, Sq, Sk, H, D = 1, 3, 4, 2, 2
    q, k, v = _qkv(rng, B, Sq, Sk, H, 1, D, np.float64)
    m = rng.uniform(-1, 1, (Sq, Sk))
    w = rng.standard_normal((B, Sq, H * D))
    M = rlx.tensor(m)
    loss = rlx.sum_all(rlx.attention(q, k, v, H, D, num_kv_heads=1, attn_mask=M, is_causal=True) * rlx.tensor(w))
    (g,) = rlx.grad(loss, [M])
    fd = np.zeros_like(m)
    for idx in np.ndindex(m.shape):
        for sgn in (1, -1):
            mp = m.copy()
            mp[idx] += sgn * 1e-6
            fd[idx] += sgn * np.sum(sdpa_ref(q, k, v, H, D, 1, mp, True) * w) / 2e-6
    assert_close(g, fd, rtol=1e-5, atol=1e-7)
    assert np.all(g.numpy()[np.triu_indices(Sq, 1 + Sk - Sq)] == 0)  # keys the causal mask drops


def test_attention_errors():
    q = rlx.ones(2, 3, 8)
    k = rlx.ones(2, 5, 4)
    with pytest.raises(rlx.RlxError, match="rlx_attention_ex") as e:
        rlx.attention(q, rlx.ones(2, 5, 6), rlx.ones(2, 5, 6), 4, 2, num_kv_heads=3)
    assert e.value.status == rlx.Status.E_SHAPE
    with pytest.raises(rlx.RlxError, match="does not broadcast") as e:
        rlx.attention(q, k, k, 4, 2, num_kv_heads=2, attn_mask=np.ones((3, 4), bool))
    assert e.value.status == rlx.Status.E_SHAPE
    with pytest.raises(rlx.RlxError, match="attn_mask") as e:
        rlx.attention(q, k, k, 4, 2, num_kv_heads=2, attn_mask=np.ones((3, 5), np.int32))
    assert e.value.status == rlx.Status.E_DTYPE
    with pytest.raises(ValueError):
        rlx.attention(q, k, k, 4, 2, mask="sliding", window=2, is_causal=True)
    with pytest.raises(ValueError):
        rlx.attention(q, k, k, 4, 2, mask=rlx.ones(2, 5), attn_mask=np.ones((3, 5), bool))


# ------------------------------------------------------------------- rope

def rope_ref(x, c, s, d, pos, interleaved=False, rot=None):
    """x [B, S, H*D]; tables [rows, R/2]; pos [S] or [B, S]."""
    B, S, HD = x.shape
    rot = rot or d
    xh = x.reshape(B, S, HD // d, d).copy()
    pos = np.broadcast_to(pos, (B, S))
    cc, ss = c[pos][:, :, None, :], s[pos][:, :, None, :]
    if interleaved:
        a, b = xh[..., 0:rot:2].copy(), xh[..., 1:rot:2].copy()
        xh[..., 0:rot:2], xh[..., 1:rot:2] = a * cc - b * ss, b * cc + a * ss
    else:
        a, b = xh[..., : rot // 2].copy(), xh[..., rot // 2: rot].copy()
        xh[..., : rot // 2], xh[..., rot // 2: rot] = a * cc - b * ss, b * cc + a * ss
    return xh.reshape(B, S, HD)


def _tables(rows, rot):
    inv = 1.0 / 10000 ** (np.arange(0, rot, 2) / rot)
    ang = np.arange(rows)[:, None] * inv[None, :]
    return np.cos(ang), np.sin(ang)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rot", [None, 2, 4])
def test_rope_layouts_and_positions(rng, backend, dt, interleaved, rot):
    B, S, H, D, ROWS = 2, 3, 2, 6, 9
    x = rng.standard_normal((B, S, H * D)).astype(dt)
    c, s = (t.astype(dt) for t in _tables(ROWS, rot or D))
    tol = _tol(dt)
    kw = {"interleaved": interleaved, "rotary_dim": rot}
    assert_close(rlx.rope(x, c[:S], s[:S], D, **kw), rope_ref(x, c, s, D, np.arange(S), interleaved, rot), **tol)
    assert_close(rlx.rope(x, c, s, D, offset=4, **kw), rope_ref(x, c, s, D, 4 + np.arange(S), interleaved, rot),
                 **tol)
    p1 = np.array([8, 0, 3])
    assert_close(rlx.rope(x, c, s, D, positions=p1, **kw), rope_ref(x, c, s, D, p1, interleaved, rot), **tol)
    p2 = np.array([[1, 2, 3], [7, 7, 0]], np.int32)
    assert_close(rlx.rope(x, c, s, D, positions=p2, **kw), rope_ref(x, c, s, D, p2, interleaved, rot), **tol)


def test_rope_decoding_matches_prefill(rng, backend):
    B, S, H, D = 1, 5, 2, 8
    x = rng.standard_normal((B, S, H * D))
    c, s = _tables(8, 4)
    full = rlx.rope(x, c, s, D, rotary_dim=4, interleaved=True).numpy()
    for t in range(S):
        step = rlx.rope(x[:, t:t + 1], c, s, D, offset=t, rotary_dim=4, interleaved=True)
        assert_close(step, full[:, t:t + 1], rtol=1e-15, atol=1e-15)
        step = rlx.rope(x[:, t:t + 1], c, s, D, positions=np.array([t]), rotary_dim=4, interleaved=True)
        assert_close(step, full[:, t:t + 1], rtol=1e-15, atol=1e-15)


def test_rope_errors(backend):
    x = rlx.ones(2, 3, 8)
    c = np.ones((5, 2))
    for bad in ({"rotary_dim": 3}, {"rotary_dim": 10}, {"rotary_dim": 4, "offset": -1},
                {"rotary_dim": 4, "offset": 1, "positions": np.array([0, 1, 2])}):
        with pytest.raises(rlx.RlxError, match="rlx_rope_ex") as e:
            rlx.rope(x, c, c, 8, **bad)
        assert e.value.status == rlx.Status.E_ARG
    with pytest.raises(rlx.RlxError, match="rlx_rope_ex") as e:
        rlx.rope(x, c, c, 8, rotary_dim=4, offset=3)  # rows 3..5 of a 5-row table
    assert e.value.status == rlx.Status.E_SHAPE
    with pytest.raises(rlx.RlxError) as e:
        rlx.rope(x, c, c, 8, rotary_dim=4, positions=np.array([0.0, 1.0, 2.0]))
    assert e.value.status == rlx.Status.E_DTYPE
    for p in ([0, 5, 1], [0, -1, 1]):  # outside the table: an error at realize, never a value
        y = rlx.rope(x, c, c, 8, rotary_dim=4, positions=np.array(p))
        with pytest.raises(rlx.RlxError) as e:
            y.numpy()
        assert e.value.status == rlx.Status.E_ARG
