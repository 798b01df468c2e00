"""rlx.attention_kv (attention over past and new key/value rows, read in
place) against NumPy attention over the concatenated rows, on both
backends, f32 and f64, with grouped kv heads, causal and sliding masks, an
attn_mask spanning both pieces, an empty past, and the past a view of the
first rows of a larger cache."""
import numpy as np
import pytest

import rlx
from conftest import assert_close
from test_attention import sdpa_ref


@pytest.fixture(params=["ref", "jit"])
def backend(request):
    saved = rlx.get_option("backend")
    rlx.set_option("backend", request.param)
    yield request.param
    rlx.set_option("backend", saved)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("L,Sn", [(0, 1), (1, 1), (7, 2), (90, 1), (300, 3)])
@pytest.mark.parametrize("hkv", [1, 2])
@pytest.mark.parametrize("mask", [None, "causal", "sliding"])
def test_matches_concatenated(rng, backend, dt, L, Sn, hkv, mask):
    B, Sq, H, D, cap = 1, min(Sn + 1, L + Sn), 2, 4, L + 5
    q = rng.standard_normal((B, Sq, H * D)).astype(dt)
    kc = rng.standard_normal((B, cap, hkv * D)).astype(dt)
    vc = rng.standard_normal((B, cap, hkv * D)).astype(dt)
    kn = rng.standard_normal((B, Sn, hkv * D)).astype(dt)
    vn = rng.standard_normal((B, Sn, hkv * D)).astype(dt)
    keep = rng.random((Sq, L + Sn)) < 0.7
    k, v = rlx.tensor(kc).narrow(1, 0, L), rlx.tensor(vc).narrow(1, 0, L)  # views of a cache's first rows
    got = rlx.attention_kv(q, k, v, kn, vn, H, D, num_kv_heads=hkv, mask=mask, window=3 if mask == "sliding" else 0,
                           attn_mask=keep)
    kall, vall = np.concatenate([kc[:, :L], kn], 1), np.concatenate([vc[:, :L], vn], 1)
    want = sdpa_ref(q, kall, vall, H, D, hkv, attn_mask=keep, causal=mask is not None,
                    window=3 if mask == "sliding" else 0)
    tol = {"rtol": 2e-5, "atol": 2e-5} if dt == np.float32 else {}
    assert_close(got, want, **tol)


def test_errors():
    q, k = np.zeros((1, 2, 8), np.float32), np.zeros((1, 3, 8), np.float32)
    with pytest.raises(rlx.RlxError, match="rlx_attention_kv"):
        rlx.attention_kv(q, k, k, np.zeros((1, 1, 4), np.float32), np.zeros((1, 1, 4), np.float32), 2)
    with pytest.raises(rlx.RlxError, match="rlx_attention_kv"):
        rlx.attention_kv(q, k, k, k, k, 2, attn_mask=np.ones((2, 3), bool))  # spans 3 keys of 6
