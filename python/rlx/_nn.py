"""Neural-network operations: softmax and norms (layer, RMS, batch, group),
dropout, losses, attention and rotary embeddings, convolution and pooling,
low-precision and synthesized weight matmuls, spline activations."""

import ctypes
import enum
import operator
import random as _random

import numpy as np

from . import _ffi
from ._base import _lib, _clear, _axis_arg, _pair, _mask, _fmt, _builtin_int, _builtin_float, _builtin_bool, Mask
from ._tensor import Tensor, _wrap, _tt, _opt, _h, _apply


# ----------------------------------------------------------- neural nets

def softmax(x, axis=-1, *, dim=None):
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_softmax(x._h, operator.index(_axis_arg(axis, dim, -1))))


def log_softmax(x, axis=-1, *, dim=None):
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_log_softmax(x._h, operator.index(_axis_arg(axis, dim, -1))))


def layer_norm(x, gamma=None, beta=None, eps=1e-5, *, weight=None, bias=None):
    """Normalize over the last axis; gamma/beta (weight/bias) are [D] or None."""
    x = _tt(x)
    g = _opt(gamma if gamma is not None else weight)
    b = _opt(beta if beta is not None else bias)
    _clear()
    return _wrap(_lib.rlx_layer_norm(x._h, _h(g), _h(b), _builtin_float(eps)))


def rms_norm(x, gamma=None, eps=1e-6, *, weight=None):
    """x / sqrt(mean(x^2, last axis) + eps) * gamma."""
    x = _tt(x)
    g = _opt(gamma if gamma is not None else weight)
    _clear()
    return _wrap(_lib.rlx_rms_norm(x._h, _h(g), _builtin_float(eps)))


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5, *,
               return_stats=False):
    """torch.nn.functional.batch_norm over axis 1 of x [N, C, ...]. Nothing
    is updated in place (tensors are immutable): with return_stats=True the
    result is (y, new_running_mean, new_running_var), the statistics
    PyTorch would have written back (momentum blend, unbiased batch
    variance for the variance; in evaluation the running ones unchanged).
    running_mean/running_var may be None in training mode (then
    return_stats=True is an error)."""
    x = _tt(x)
    rm, rv, w, b = _opt(running_mean), _opt(running_var), _opt(weight), _opt(bias)
    outs = [ctypes.c_void_p(), ctypes.c_void_p()] if return_stats else [None, None]
    _clear()
    y = _lib.rlx_batch_norm(x._h, _h(rm), _h(rv), _h(w), _h(b), _builtin_bool(training),
                            _builtin_float(momentum), _builtin_float(eps),
                            *[ctypes.byref(o) if o is not None else None for o in outs])
    y = _wrap(y)
    if not return_stats:
        return y
    return y, _wrap(outs[0].value), _wrap(outs[1].value)


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.group_norm: x [N, C, ...] in num_groups groups of
    channels; weight/bias [C] or None."""
    x = _tt(x)
    w, b = _opt(weight), _opt(bias)
    _clear()
    return _wrap(_lib.rlx_group_norm(x._h, operator.index(num_groups), _h(w), _h(b), _builtin_float(eps)))


def instance_norm(x, weight=None, bias=None, eps=1e-5):
    """Instance norm without running statistics (PyTorch's default
    use_input_stats): group_norm with one group per channel."""
    x = _tt(x)
    return group_norm(x, x.shape[1] if x.ndim >= 2 else 1, weight, bias, eps)


def dropout(x, p=0.5, seed=0, training=True):
    """Zero each element with probability p and scale the rest by 1/(1-p)
    (rlx_dropout); training=False returns x. The mask depends only on
    (shape, seed), so call with a new seed each step for new masks
    (seed=None draws one from Python's `random`). A Tensor seed (int32 or
    int64, shape () or (1,)) is read when the result is realized
    (rlx_dropout_seeded): in a compiled step, make it an rlx.input and bind
    a new value per run; its value s gives the mask of seed=s."""
    x = _tt(x)
    if not training:
        return x
    if isinstance(seed, Tensor):
        _clear()
        return _wrap(_lib.rlx_dropout_seeded(x._h, _builtin_float(p), seed._h))
    s = _random.getrandbits(64) if seed is None else operator.index(seed) & (2**64 - 1)
    _clear()
    return _wrap(_lib.rlx_dropout(x._h, _builtin_float(p), s))


def cross_entropy(logits, probs):
    """-sum(probs * log_softmax(logits), -1): [..., C] -> [...]."""
    return _apply(_lib.rlx_cross_entropy, logits, probs)


def softmax_cross_entropy_with_logits(logits, labels):
    """-log_softmax(logits)[i, labels[i]]: logits [N, C], labels [N] -> [N]."""
    return _apply(_lib.rlx_softmax_cross_entropy_with_logits, logits, labels)


def attention(q, k, v, num_heads, head_dim=None, mask=None, window=0, *, num_kv_heads=None, attn_mask=None,
              is_causal=False, scale=None):
    """Multi-head attention over q [B, Sq, H*D], k, v [B, Sk, Hkv*D].

    mask: None, 'causal', 'sliding' (with window), or a [B, Sk] tensor of
    keep (nonzero) / drop (0) flags (rlx_attention_masked). is_causal=True
    is mask='causal'; librlx aligns it to the bottom right (query i sees keys
    j <= i + Sk - Sq, as flash-attn; PyTorch's is_causal aligns top left, the
    same when Sq == Sk). num_kv_heads: grouped-query attention (PyTorch's
    enable_gqa: query head h reads kv head h // (H // Hkv)). attn_mask: as
    PyTorch SDPA's, broadcastable to [B, H, Sq, Sk]: bool keeps where True,
    float is added to the scaled scores. scale: None means 1/sqrt(D). A row
    with every key masked is zeros (PyTorch gives NaN)."""
    q, k, v = _tt(q), _tt(k), _tt(v)
    nh = operator.index(num_heads)
    if head_dim is None:
        if nh <= 0:
            raise ValueError("attention: num_heads must be positive")
        head_dim = q.shape[-1] // nh
    hd = operator.index(head_dim)
    keymask = mask is not None and not isinstance(mask, (str, _builtin_int, enum.Enum))
    if is_causal:
        if mask is not None and _mask(mask) != Mask.CAUSAL:
            raise ValueError("attention: is_causal=True with mask=%r" % (mask,))
        mask = "causal"
    if num_kv_heads is None and attn_mask is None and scale is None:
        if keymask:
            m = _tt(mask)
            _clear()
            return _wrap(_lib.rlx_attention_masked(q._h, k._h, v._h, m._h, nh, hd))
        _clear()
        return _wrap(_lib.rlx_attention(q._h, k._h, v._h, nh, hd, _mask(mask), operator.index(window)))
    if keymask:  # a [B, Sk] key mask as a [B, 1, 1, Sk] bool attn_mask
        if attn_mask is not None:
            raise ValueError("attention: a key mask tensor and attn_mask together; combine them into attn_mask")
        km = _tt(mask)
        if km.ndim != 2:
            raise ValueError("attention: a key mask must be [B, Sk], got %s" % (km.shape,))
        attn_mask, mask = km.ne(0).reshape(km.shape[0], 1, 1, km.shape[1]), None
    am = _opt(attn_mask)
    opts = _ffi.CTYPE_MAP["rlx_attention_opts"](
        0 if num_kv_heads is None else operator.index(num_kv_heads), _mask(mask), operator.index(window),
        _h(am), 0.0 if scale is None else _builtin_float(scale))
    _clear()
    return _wrap(_lib.rlx_attention_ex(q._h, k._h, v._h, nh, hd, ctypes.byref(opts)))


def attention_kv(q, k, v, k_new, v_new, num_heads, head_dim=None, *, num_kv_heads=None, mask=None, window=0,
                 attn_mask=None, scale=None):
    """rlx.attention over the keys cat(k, k_new) and values cat(v, v_new)
    along axis 1, read in place (no concatenated copy): k, v [B, L, Hkv*D]
    the past rows (e.g. a KV cache), k_new, v_new [B, Sn, Hkv*D] the new
    ones. mask: None, 'causal' or 'sliding' (with window), aligned to the
    L + Sn keys; attn_mask broadcastable to [B, H, Sq, L + Sn]; num_kv_heads
    and scale as rlx.attention."""
    q, k, v, kn, vn = _tt(q), _tt(k), _tt(v), _tt(k_new), _tt(v_new)
    nh = operator.index(num_heads)
    if head_dim is None:
        if nh <= 0:
            raise ValueError("attention_kv: num_heads must be positive")
        head_dim = q.shape[-1] // nh
    am = _opt(attn_mask)
    opts = _ffi.CTYPE_MAP["rlx_attention_opts"](
        0 if num_kv_heads is None else operator.index(num_kv_heads), _mask(mask), operator.index(window),
        _h(am), 0.0 if scale is None else _builtin_float(scale))
    _clear()
    return _wrap(_lib.rlx_attention_kv(q._h, k._h, v._h, kn._h, vn._h, nh, operator.index(head_dim),
                                       ctypes.byref(opts)))


def attention_masked(q, k, v, mask, num_heads, head_dim=None):
    q = _tt(q)
    if head_dim is None:
        head_dim = q.shape[-1] // operator.index(num_heads)
    q, k, v, m = q, _tt(k), _tt(v), _tt(mask)
    _clear()
    return _wrap(_lib.rlx_attention_masked(q._h, k._h, v._h, m._h, operator.index(num_heads),
                                           operator.index(head_dim)))


def rope(x, cos, sin, head_dim, *, offset=0, positions=None, interleaved=False, rotary_dim=None):
    """Rotary embedding per head: x [B, S, H*D], cos/sin [S, R/2] (R the
    rotary dim; with offset or positions, [S_max, R/2] tables read at the
    tokens' positions). offset: token s at position offset + s. positions:
    an int [S] or [B, S] tensor of positions (one compiled program serves
    every decoding step; a position outside the table is an error at
    realize). interleaved: GPT-J pairs (x[2i], x[2i+1]) instead of NeoX
    rotate-half (x[i], x[i + R/2]). rotary_dim: rotate only the first
    rotary_dim of each head (GPT-NeoX rotary_pct), pass the rest."""
    x, c, s = _tt(x), _tt(cos), _tt(sin)
    if operator.index(offset) == 0 and positions is None and not interleaved and rotary_dim is None:
        _clear()
        return _wrap(_lib.rlx_rope(x._h, c._h, s._h, operator.index(head_dim)))
    p = _opt(positions)
    opts = _ffi.CTYPE_MAP["rlx_rope_opts"](operator.index(offset), _h(p),
                                          0 if rotary_dim is None else operator.index(rotary_dim),
                                          bool(interleaved))
    _clear()
    return _wrap(_lib.rlx_rope_ex(x._h, c._h, s._h, operator.index(head_dim), ctypes.byref(opts)))


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """NCHW x OIHW convolution (PyTorch conv2d); ints or pairs."""
    x, w = _tt(x), _tt(weight)
    b = _opt(bias)
    _clear()
    return _wrap(_lib.rlx_conv2d(x._h, w._h, _h(b), _pair(stride, "stride"), _pair(padding, "padding"),
                                 _pair(dilation, "dilation"), operator.index(groups)))


def _single(v, name):
    """An int, or a 1-tuple as PyTorch's 1-D functions take."""
    if not isinstance(v, (_builtin_int, np.integer)):
        v = tuple(v)
        if len(v) != 1:
            raise ValueError("rlx: %s must be an int or a 1-tuple, got %r" % (name, v))
        v = v[0]
    return operator.index(v)


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """NCL x OCK convolution (PyTorch conv1d)."""
    x, w = _tt(x), _tt(weight)
    b = _opt(bias)
    _clear()
    return _wrap(_lib.rlx_conv1d(x._h, w._h, _h(b), _single(stride, "stride"), _single(padding, "padding"),
                                 _single(dilation, "dilation"), operator.index(groups)))


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """PyTorch conv_transpose2d (its argument order): x [N, C_in, H, W],
    weight [C_in, C_out/groups, KH, KW]; ints or pairs."""
    x, w = _tt(x), _tt(weight)
    b = _opt(bias)
    _clear()
    return _wrap(_lib.rlx_conv_transpose2d(x._h, w._h, _h(b), _pair(stride, "stride"), _pair(padding, "padding"),
                                           _pair(output_padding, "output_padding"), _pair(dilation, "dilation"),
                                           operator.index(groups)))


def conv_transpose1d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """PyTorch conv_transpose1d: x [N, C_in, L], weight [C_in, C_out/groups, K]."""
    x, w = _tt(x), _tt(weight)
    b = _opt(bias)
    _clear()
    return _wrap(_lib.rlx_conv_transpose1d(x._h, w._h, _h(b), _single(stride, "stride"),
                                           _single(padding, "padding"), _single(output_padding, "output_padding"),
                                           _single(dilation, "dilation"), operator.index(groups)))


def _pool(fn, x, kernel_size, stride, padding):
    x = _tt(x)
    _clear()
    return _wrap(fn(x._h, _pair(kernel_size, "kernel_size"), _pair(stride, "stride"),
                    _pair(padding, "padding")))


def max_pool2d(x, kernel_size, stride=None, padding=0):
    """NCHW max pooling (stride None = kernel size; pads with -inf)."""
    return _pool(_lib.rlx_max_pool2d, x, kernel_size, stride, padding)


def avg_pool2d(x, kernel_size, stride=None, padding=0):
    """NCHW average pooling (count_include_pad=True)."""
    return _pool(_lib.rlx_avg_pool2d, x, kernel_size, stride, padding)


# ------------------------------------------- low precision, weight synthesis

def scaled_matmul(x, w, fmt="fp8_e4m3", block=32):
    """x [m, k] @ w[n, k]^T with both rounded to a minifloat ('fp8_e4m3',
    'fp8_e5m2', 'fp6_e2m3', 'fp6_e3m2', 'fp4_e2m1') scaled per block."""
    x, w = _tt(x), _tt(w)
    _clear()
    return _wrap(_lib.rlx_scaled_matmul(x._h, w._h, _fmt(fmt), operator.index(block)))


def synth_matmul(x, indices, codebook):
    x, i, c = _tt(x), _tt(indices), _tt(codebook)
    _clear()
    return _wrap(_lib.rlx_synth_matmul(x._h, i._h, c._h))


def synth_reconstruct(indices, codebook):
    i, c = _tt(indices), _tt(codebook)
    _clear()
    return _wrap(_lib.rlx_synth_reconstruct(i._h, c._h))


def spline_activation(x, coeff, grid_min, grid_max, num_basis=None):
    """sum_g coeff[c, g] exp(-((x - ctr_g)/h)^2) per last-axis channel c."""
    x, c = _tt(x), _tt(coeff)
    nb = c.shape[-1] if num_basis is None else operator.index(num_basis)
    _clear()
    return _wrap(_lib.rlx_spline_activation(x._h, c._h, nb, _builtin_float(grid_min), _builtin_float(grid_max)))
