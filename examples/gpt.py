#!/usr/bin/env python3
"""gpt.py: the Python twin of examples/gpt.c, through the ctypes binding.

The same character-level GPT (token + position embeddings, pre-LN causal
attention blocks, tanh-GELU MLP, tied head, Adam) trained on the same text
(default /usr/share/common-licenses/GPL-3): the training step (forward,
rlx.grad backward, Adam) is one rlx.compile program; then it saves a
safetensors checkpoint and samples with a fixed-capacity KV cache (the
decode step is a second compiled program: the new token's k/v are written
at its position, its query attends over positions 0..pos).

    python3 examples/gpt.py [--data PATH] [--steps 100] [--sample 200] [--save gpt-py.safetensors]

Run from the repository root (the binding finds build/librlx.so) with
PYTHONPATH=python, or with the package installed.
"""
import argparse
import math
import time

import numpy as np
import rlx

LN_EPS, B1, B2, EPS = 1e-5, 0.9, 0.999, 1e-8


def layout(vocab, width, layers, seq):
    """(name, shape) of every parameter, in gpt_model.c's order."""
    w = width
    shapes = [("wte", (vocab, w)), ("wpe", (seq, w))]
    for l in range(layers):
        shapes += [(f"h{l}.{n}", s) for n, s in (
            ("ln1_g", (w,)), ("ln1_b", (w,)), ("qkv_w", (3 * w, w)), ("qkv_b", (3 * w,)), ("o_w", (w, w)),
            ("o_b", (w,)), ("ln2_g", (w,)), ("ln2_b", (w,)), ("fc_w", (4 * w, w)), ("fc_b", (4 * w,)),
            ("proj_w", (w, 4 * w)), ("proj_b", (w,)))]
    return shapes + [("lnf_g", (w,)), ("lnf_b", (w,))]


def init(shapes, seed):
    rng = np.random.default_rng(seed)
    def value(name, shape):
        if len(shape) == 2:
            return (0.02 * rng.standard_normal(shape)).astype(np.float32)
        return np.full(shape, 1.0 if name.endswith("_g") else 0.0, np.float32)
    return {n: value(n, s) for n, s in shapes}


def block_qkv(h, P, l, w):
    a = rlx.layer_norm(h, P[f"h{l}.ln1_g"], P[f"h{l}.ln1_b"], LN_EPS)
    qkv = rlx.linear(a, P[f"h{l}.qkv_w"], P[f"h{l}.qkv_b"])
    return rlx.narrow(qkv, 2, 0, w), rlx.narrow(qkv, 2, w, w), rlx.narrow(qkv, 2, 2 * w, w)


def block_out(h, att, P, l):
    h = h + rlx.linear(att, P[f"h{l}.o_w"], P[f"h{l}.o_b"])
    m = rlx.layer_norm(h, P[f"h{l}.ln2_g"], P[f"h{l}.ln2_b"], LN_EPS)
    f = rlx.linear(m, P[f"h{l}.fc_w"], P[f"h{l}.fc_b"], act="gelu_tanh")
    return h + rlx.linear(f, P[f"h{l}.proj_w"], P[f"h{l}.proj_b"])


def head(h, P, n, w):
    h = rlx.layer_norm(h, P["lnf_g"], P["lnf_b"], LN_EPS)
    return rlx.matmul_t(h.reshape(n, w), P["wte"])


def loss_fn(tokens, targets, P, cfg):
    b, s, w, heads, layers = cfg["batch"], cfg["seq"], cfg["width"], cfg["heads"], cfg["layers"]
    h = rlx.index_select(P["wte"], 0, tokens).reshape(b, s, w) + P["wpe"]
    for l in range(layers):
        q, k, v = block_qkv(h, P, l, w)
        h = block_out(h, rlx.attention(q, k, v, heads, mask="causal"), P, l)
    logits = head(h, P, b * s, w)
    return rlx.mean_all(rlx.softmax_cross_entropy_with_logits(logits, targets))


def compile_step(shapes, cfg):
    """One program: loss, new params, m, v from tokens, targets, the
    bias-corrected step size and sqrt(1 - beta2^t), params, m, v."""
    n = cfg["batch"] * cfg["seq"]
    P = {name: rlx.input(name, s) for name, s in shapes}
    M = {name: rlx.input("m." + name, s) for name, s in shapes}
    V = {name: rlx.input("v." + name, s) for name, s in shapes}
    tokens, targets = rlx.input("tokens", n, rlx.int32), rlx.input("targets", n, rlx.int32)
    step_size, bc2_sqrt = rlx.input("step_size", ()), rlx.input("bc2_sqrt", ())
    loss = loss_fn(tokens, targets, P, cfg)
    names = [name for name, _ in shapes]
    grads = rlx.grad(loss, [P[k] for k in names])
    new_p, new_m, new_v = [], [], []
    for k, g in zip(names, grads):
        m2 = M[k] * B1 + g * (1 - B1)
        v2 = V[k] * B2 + g * g * (1 - B2)
        new_p.append(P[k] - step_size * (m2 / (rlx.sqrt(v2) / bc2_sqrt + EPS)))
        new_m.append(m2)
        new_v.append(v2)
    return rlx.compile([loss] + new_p + new_m + new_v), names


def compile_decode(shapes, cfg):
    """One token through the blocks against caches [1, seq, W] per layer."""
    s, w, heads, layers = cfg["seq"], cfg["width"], cfg["heads"], cfg["layers"]
    P = {name: rlx.input(name, sh) for name, sh in shapes}
    token, pos = rlx.input("token", 1, rlx.int32), rlx.input("pos", 1, rlx.int32)
    slots = rlx.arange(0, s, dtype=rlx.int32)
    at_pos, seen = (slots == pos).reshape(1, s, 1), (slots <= pos).reshape(1, s)
    h = (rlx.index_select(P["wte"], 0, token) + rlx.index_select(P["wpe"], 0, pos)).reshape(1, 1, w)
    ks, vs = [], []
    for l in range(layers):
        q, k, v = block_qkv(h, P, l, w)
        kc = rlx.where(at_pos, k, rlx.input(f"k.cache{l}", (1, s, w)))
        vc = rlx.where(at_pos, v, rlx.input(f"v.cache{l}", (1, s, w)))
        h = block_out(h, rlx.attention(q, kc, vc, heads, mask=seen), P, l)
        ks.append(kc)
        vs.append(vc)
    return rlx.compile([head(h, P, 1, w)] + ks + vs)


def sample(params, cfg, shapes, vocab_bytes, prompt, n, temperature, seed):
    prog = compile_decode(shapes, cfg)
    layers, s, w = cfg["layers"], cfg["seq"], cfg["width"]
    ids = {b: i for i, b in enumerate(vocab_bytes)}
    caches = {f"{kind}.cache{l}": np.zeros((1, s, w), np.float32) for kind in "kv" for l in range(layers)}
    rng = np.random.default_rng(seed)
    hist = [ids[b] for b in prompt.encode() if b in ids] or [0]
    pos, out, logits = 0, [], None

    def step(token, pos):
        nonlocal caches
        res = prog.run(token=np.array([token], np.int32), pos=np.array([pos], np.int32), **params, **caches)
        caches = {f"k.cache{l}": res[1 + l] for l in range(layers)}
        caches.update({f"v.cache{l}": res[1 + layers + l] for l in range(layers)})
        return res[0].numpy()[0].astype(np.float64)

    context = hist[-s:]
    for t in context:
        logits, pos = step(t, pos), pos + 1
    for _ in range(n):
        p = np.exp((logits - logits.max()) / temperature)
        nxt = int(rng.choice(len(p), p=p / p.sum()))
        hist.append(nxt)
        out.append(nxt)
        if pos == s:  # cache full: restart from the last half of the context
            pos = 0
            for t in hist[-(s // 2):]:
                logits, pos = step(t, pos), pos + 1
        else:
            logits, pos = step(nxt, pos), pos + 1
    return prompt + bytes(vocab_bytes[i] for i in out).decode("latin-1")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sample", type=int, default=200)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--prompt", default="The ")
    ap.add_argument("--save", default="gpt-py.safetensors")
    a = ap.parse_args()

    text = open(a.data, "rb").read()
    vocab_bytes = sorted(set(text))
    lut = np.zeros(256, np.int32)
    lut[vocab_bytes] = np.arange(len(vocab_bytes), dtype=np.int32)
    data = lut[np.frombuffer(text, np.uint8)]
    cfg = dict(batch=a.batch, seq=a.seq, width=a.width, layers=a.layers, heads=a.heads)
    shapes = layout(len(vocab_bytes), a.width, a.layers, a.seq)
    print(f"{a.data}: {len(text)} bytes, vocab {len(vocab_bytes)}; {cfg}")

    t0 = time.time()
    prog, names = compile_step(shapes, cfg)
    print(f"compiled the training step in {time.time() - t0:.2f} s")
    params = init(shapes, a.seed)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(x) for k, x in params.items()}
    rng = np.random.default_rng(a.seed)
    t0 = time.time()
    for t in range(1, a.steps + 1):
        starts = rng.integers(0, len(data) - a.seq, a.batch)
        win = np.stack([data[s0:s0 + a.seq + 1] for s0 in starts])
        out = prog.run(tokens=win[:, :-1].reshape(-1), targets=win[:, 1:].reshape(-1),
                       step_size=np.float32(a.lr / (1 - B1 ** t)), bc2_sqrt=np.float32(math.sqrt(1 - B2 ** t)),
                       **params, **{"m." + k: x for k, x in m.items()}, **{"v." + k: x for k, x in v.items()})
        n = len(names)
        params = dict(zip(names, out[1:1 + n]))
        m = dict(zip(names, out[1 + n:1 + 2 * n]))
        v = dict(zip(names, out[1 + 2 * n:]))
        if t == 1 or t % 25 == 0 or t == a.steps:
            print(f"step {t:4d}  loss {out[0].item():.4f}  ({1e3 * (time.time() - t0) / t:.1f} ms/step)")

    rlx.save_safetensors(a.save, {**params, **{"m." + k: x for k, x in m.items()},
                                  **{"v." + k: x for k, x in v.items()}})
    back = rlx.load_safetensors(a.save)
    assert all(np.array_equal(back[k].numpy(), params[k].numpy()) for k in names)
    print(f"saved {a.save} ({len(back)} tensors, read back equal)")
    print(f"--- sample ({a.sample} bytes, temperature {a.temperature}) ---")
    print(sample(params, cfg, shapes, vocab_bytes, a.prompt, a.sample, a.temperature, a.seed))


if __name__ == "__main__":
    main()
