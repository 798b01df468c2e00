#!/usr/bin/env python3
"""compare.py -- rlx-bench's workloads in NumPy and (when installed) PyTorch,
in the same run as librlx, with speed ratios librlx/peer.

librlx's side comes from `rlx-bench --json` (run here, or read from a file
given with --rlx-json), with the same --filter/--threads/--quick; its
machine probes (stream triad, FMA peak) and each workload's bytes and
flops give every implementation's fraction of the machine limit (the
roofline time max(bytes/stream, flops/fma) over its median time).

    bench/compare.py                          # everything, 1 thread
    bench/compare.py --filter W1,W2,W5a --threads 2
    bench/compare.py --plot bench/roofline.png   # also draws the chart
    bench/compare.py --quick                  # tiny shapes (a smoke test)
    bench/compare.py --json > run.jsonl; bench/compare.py --replay run.jsonl --plot x.png
    bench/compare.py --w10 a,b                # W10 vs PyTorch eager + Adam, 1 and 2 threads

W10 (--w10) is the GPT training step of examples/gpt_model.c: rlx-bench-w10
--export writes its initial parameters and batches, the script builds the
same model in PyTorch eager (autograd, torch.optim.Adam), checks that its
first-step loss agrees with librlx's (relative 1e-4), then alternates
rounds of rlx-bench-w10 (a child process) and of PyTorch steps, and
reports the best round medians. Without --threads it runs itself at 1
and at 2 threads.

Ratio = peer median time / librlx median time: above 1, librlx is faster.
Peers run the same shapes and dtype (f32; NumPy's FFT computes in
complex128, as numpy.fft always does; NumPy has no erf, so its W5b uses
the tanh form of gelu). Timing as in rlx-bench: one warm-up, then batches
of --repeat runs until the median of all runs is within 2% of the first
batch's (at most 4 batches or 3 s). PyTorch is optional (Debian:
apt-get install python3-torch); so is matplotlib for --plot.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rlx", help="path of rlx-bench (default: build/bench/rlx-bench)")
    p.add_argument("--rlx-json", help="read librlx's results from this rlx-bench --json output instead")
    p.add_argument("--filter", help="comma list of workloads (rlx-bench --list)")
    p.add_argument("--threads", type=int, default=None, help="1 (W10 without it: 1 and 2)")
    p.add_argument("--w10", metavar="CONFIGS", help="W10 against PyTorch: a, b or a,b (needs PyTorch)")
    p.add_argument("--rounds", type=int, default=3, help="W10: rounds of each side (best round median)")
    p.add_argument("--steps", type=int, default=10, help="W10: timed steps per round")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="tiny shapes")
    p.add_argument("--no-torch", action="store_true", help="leave PyTorch out even when installed")
    p.add_argument("--json", action="store_true", help="JSON lines instead of the table")
    p.add_argument("--plot", metavar="PNG", help="draw fraction of the machine limit per workload")
    p.add_argument("--replay", metavar="JSONL", help="table/plot from an earlier compare.py --json output, "
                   "measuring nothing")
    a = p.parse_args()
    if a.w10 and a.threads is None:
        return a  # the driver re-runs this script per thread count
    a.threads = 1 if a.threads is None else a.threads
    if a.threads < 1 or a.repeat < 1:
        p.error("--threads and --repeat must be at least 1")
    return a


ARGS = parse_args()
if ARGS.w10 and ARGS.threads is None:
    for n in (1, 2):
        rc = subprocess.run([sys.executable] + sys.argv + ["--threads", str(n)]).returncode
        if rc:
            sys.exit(rc)
    sys.exit(0)
# BLAS threads are fixed when NumPy/PyTorch load their BLAS: set them first.
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402

try:
    if ARGS.no_torch:
        raise ImportError
    import torch  # noqa: E402

    torch.set_num_threads(ARGS.threads)
except ImportError:
    torch = None


def uniform(shape, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-2, 2, size=shape) * scale).astype(np.float32)


def measure(fn, repeat):
    """median, min, max seconds of fn() after one warm-up run"""
    fn()
    v, start = [], time.perf_counter()
    while len(v) < 4 * repeat:
        t0 = time.perf_counter()
        fn()
        v.append(time.perf_counter() - t0)
        if len(v) % repeat == 0:
            if len(v) == repeat and repeat > 2:
                continue
            allm, first = np.median(v), np.median(v[:repeat])
            if abs(allm - first) <= 0.02 * allm or time.perf_counter() - start > 3.0:
                break
    return float(np.median(v)), float(min(v)), float(max(v))


# ---------------------------------------------------------------- workloads
# Each: make(quick) -> dict of NumPy inputs; numpy(inp) and torch(inp) run it.

def gelu_tanh_np(y):
    return 0.5 * y * (1 + np.tanh(np.float32(0.7978845608028654) * (y + np.float32(0.044715) * y * y * y)))


def w1(q):
    n = 4099 if q else 1 << 24
    return {"x": uniform(n, 1), "a": uniform(n, 2), "b": uniform(n, 3)}


def w2(q):
    return {"x": uniform(4099 if q else 1 << 24, 1)}


def w2_np(i):
    x = i["x"]
    t = np.maximum(x * np.float32(1.5) + np.float32(0.5), 0)
    t = np.exp((t - np.float32(0.25)) * x)
    return np.tanh(t * t + x - np.float32(1))


def w2_t(i):
    x = i["x"]
    t = torch.relu(x * 1.5 + 0.5)
    t = torch.exp((t - 0.25) * x)
    return torch.tanh(t * t + x - 1)


def rows(q, r, c, qr, qc, extra=()):
    d = {"x": uniform((qr, qc) if q else (r, c), 1)}
    cols = qc if q else c
    for name, seed in extra:
        d[name] = uniform(cols, seed)
    return d


def w4b_np(i):
    x = i["x"]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def w4c_np(i):
    x = i["x"]
    mu = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + np.float32(1e-5)) * i["g"] + i["b"]


def w5a(q):
    m, k, n = (33, 17, 29) if q else (2048, 2048, 2048)
    return {"a": uniform((m, k), 1), "b": uniform((k, n), 2)}


def w5b(q):
    m, k, n = (9, 20, 11) if q else (4096, 1024, 4096)
    return {"x": uniform((m, k), 1, 0.5), "w": uniform((n, k), 2, 0.5), "b": uniform(n, 3)}


def w9(q):
    n = 13 if q else 1024
    a = uniform((n, n), 1)
    a[np.arange(n), np.arange(n)] += 2.0 * n
    return {"a": a, "b": uniform((n, 1), 2)}


def conv(q):
    n, c, hw, o = (2, 3, 7, 4) if q else (32, 64, 56, 64)
    return {"x": uniform((n, c, hw, hw), 1), "w": uniform((o, c, 3, 3), 2, 0.2), "b": uniform(o, 3)}


def attn(q):
    b, s, h, d = (2, 7, 2, 4) if q else (8, 512, 16, 64)
    return {"q": uniform((b, s, h * d), 1, 0.5), "k": uniform((b, s, h * d), 2, 0.5),
            "v": uniform((b, s, h * d), 3, 0.5), "h": h, "d": d}


def attn_np(i):
    h, d = i["h"], i["d"]
    b, s, _ = i["q"].shape
    q, k, v = (i[n].reshape(b, s, h, d).transpose(0, 2, 1, 3) for n in "qkv")
    sc = q @ k.transpose(0, 1, 3, 2) * np.float32(1 / math.sqrt(d))
    sc = np.where(np.tri(s, dtype=bool), sc, np.float32(-np.inf))
    e = np.exp(sc - sc.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3).reshape(b, s, h * d)


def attn_t(i):
    h, d = i["h"], i["d"]
    b, s, _ = i["q"].shape
    q, k, v = (i[n].reshape(b, s, h, d).transpose(1, 2) for n in "qkv")
    sc = q @ k.transpose(-1, -2) * (1 / math.sqrt(d))
    sc = sc.masked_fill(i["mask"], float("-inf"))
    return (torch.softmax(sc, -1) @ v).transpose(1, 2).reshape(b, s, h * d)


def fft_make(n):
    x = uniform(2 * n, 1)
    return {"z": (x[:n] + 1j * x[n:]).astype(np.complex64)}


def w6(q):
    batch, inp, h, out = (4, 12, 8, 3) if q else (256, 784, 512, 10)
    d = {"x": uniform((batch, inp), 1, 0.5), "y": (np.arange(batch) * 7 + 3) % out}
    shapes = [(h, inp), (h,), (h, h), (h,), (out, h), (out,)]
    for j, sh in enumerate(shapes):
        d["p%d" % j] = uniform(sh, 10 + j, 1.2 / math.sqrt(sh[1]) if len(sh) == 2 else 0.05)
    return d


def w6_np(i):
    """forward, backward by hand, SGD: the same step as rlx-bench's W6"""
    x, y = i["x"], i["y"]
    w1, b1, w2, b2, w3, b3 = (i["p%d" % j] for j in range(6))
    z1 = x @ w1.T + b1
    h1 = np.maximum(z1, 0)
    z2 = h1 @ w2.T + b2
    h2 = np.maximum(z2, 0)
    lg = h2 @ w3.T + b3
    e = np.exp(lg - lg.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    n = x.shape[0]
    loss = -np.log(p[np.arange(n), y]).mean()
    g3 = p
    g3[np.arange(n), y] -= 1
    g3 /= n
    gw3, gb3 = g3.T @ h2, g3.sum(0)
    g2 = (g3 @ w3) * (z2 > 0)
    gw2, gb2 = g2.T @ h1, g2.sum(0)
    g1 = (g2 @ w2) * (z1 > 0)
    gw1, gb1 = g1.T @ x, g1.sum(0)
    lr = np.float32(0.01)
    return loss, [w - lr * g for w, g in zip((w1, b1, w2, b2, w3, b3), (gw1, gb1, gw2, gb2, gw3, gb3))]


def w6_t(i):
    ps = [i["t_p%d" % j].detach().requires_grad_(True) for j in range(6)]
    h = torch.relu(i["x"] @ ps[0].T + ps[1])
    h = torch.relu(h @ ps[2].T + ps[3])
    loss = torch.nn.functional.cross_entropy(h @ ps[4].T + ps[5], i["y"])
    grads = torch.autograd.grad(loss, ps)
    with torch.no_grad():
        return loss, [p - 0.01 * g for p, g in zip(ps, grads)]


def to_torch(inp):
    t = {}
    for k, v in inp.items():
        if isinstance(v, np.ndarray):
            t[k] = torch.from_numpy(v.astype(np.int64) if v.dtype.kind == "i" else v)
            if k.startswith("p"):
                t["t_" + k] = t[k]
        else:
            t[k] = v
    if "q" in inp:
        s = inp["q"].shape[1]
        t["mask"] = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
    return t


WORKLOADS = {
    "W1": (w1, lambda i: gelu_tanh_np(i["x"] * i["a"] + i["b"]),
           lambda i: torch.nn.functional.gelu(i["x"] * i["a"] + i["b"], approximate="tanh")),
    "W2": (w2, w2_np, w2_t),
    "W3": (lambda q: rows(q, 4096, 4096, 5, 130, [("bias", 4)]), lambda i: np.maximum(i["x"] + i["bias"], 0),
           lambda i: torch.relu(i["x"] + i["bias"])),
    "W4a": (lambda q: rows(q, 4096, 4096, 5, 192), lambda i: i["x"].sum(axis=1), lambda i: i["x"].sum(1)),
    "W4b": (lambda q: rows(q, 4096, 4096, 5, 130), w4b_np, lambda i: torch.softmax(i["x"], -1)),
    "W4c": (lambda q: rows(q, 8192, 1024, 6, 64, [("g", 5), ("b", 6)]), w4c_np,
            lambda i: torch.nn.functional.layer_norm(i["x"], (i["x"].shape[1],), i["g"], i["b"], 1e-5)),
    "W5a": (w5a, lambda i: i["a"] @ i["b"], lambda i: i["a"] @ i["b"]),
    "W5b": (w5b, lambda i: gelu_tanh_np(i["x"] @ i["w"].T + i["b"]),
            lambda i: torch.nn.functional.gelu(torch.nn.functional.linear(i["x"], i["w"], i["b"]))),
    "W9": (w9, lambda i: np.linalg.solve(i["a"], i["b"]), lambda i: torch.linalg.solve(i["a"], i["b"])),
    "conv2d": (conv, None, lambda i: torch.nn.functional.conv2d(i["x"], i["w"], i["b"], padding=1)),
    "attention": (attn, attn_np, attn_t),
    "fft": (lambda q: fft_make(64 if q else 1 << 20), lambda i: np.fft.fft(i["z"]), lambda i: torch.fft.fft(i["z"])),
    "fft_prime": (lambda q: fft_make(61 if q else 1048573), lambda i: np.fft.fft(i["z"]),
                  lambda i: torch.fft.fft(i["z"])),
    "W6": (w6, w6_np, w6_t),
}


def w7_ns(lib):
    """a + b of 4 elements made, added and read back, per iteration"""
    iters = 200 if ARGS.quick else 20000
    a = np.array([1, 2, 3, 4], np.float32)
    b = np.array([5, 6, 7.5, 8], np.float32)
    if lib == "torch":
        a, b = torch.from_numpy(a), torch.from_numpy(b)

    def run():
        for _ in range(iters):
            (a + b).tolist()

    med, _, _ = measure(run, 3 if ARGS.quick else ARGS.repeat)
    return 1e9 * med / iters


# ------------------------------------------------------------------- driver

def rlx_results():
    if ARGS.rlx_json:
        with open(ARGS.rlx_json) as f:
            lines = f.read().splitlines()
    else:
        exe = ARGS.rlx
        if not exe:
            for cand in ("build/bench/rlx-bench", "build-lead/bench/rlx-bench"):
                path = os.path.join(HERE, "..", cand)
                if os.path.exists(path):
                    exe = path
                    break
        if not exe or not os.path.exists(exe):
            sys.exit("compare.py: rlx-bench not found (build it: make bench, or give --rlx PATH)")
        cmd = [exe, "--json", "--threads", str(ARGS.threads), "--repeat", str(ARGS.repeat)]
        if ARGS.filter:
            cmd += ["--filter", ARGS.filter]
        if ARGS.quick:
            cmd.append("--quick")
        r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit("compare.py: %s exited %d" % (" ".join(cmd), r.returncode))
        lines = r.stdout.splitlines()
    machine, res = None, {}
    for line in lines:
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        if d.get("type") == "machine":
            machine = d
        elif d.get("type") == "result" and not d.get("setting"):
            res[d["workload"]] = d
    return machine, res


def replay():
    machine, rows_out = None, []
    with open(ARGS.replay) as f:
        for line in f:
            if line.startswith("{"):
                d = json.loads(line)
                if d.get("type") == "machine":
                    machine = d
                elif d.get("type") == "compare":
                    rows_out.append(d)
    peers = [lib for lib in ("numpy", "torch") if any(lib + "_ratio" in r for r in rows_out)]
    show(machine, rows_out, peers)
    if ARGS.plot:
        plot(machine, rows_out, peers)


# ---------------------------------------------------------------- W10

def find_exe(name):
    for cand in ("build/bench/" + name, "build-lead/bench/" + name):
        path = os.path.join(HERE, "..", cand)
        if os.path.exists(path):
            return path
    sys.exit("compare.py: %s not found (build it first)" % name)


def w10_rlx(exe, cfg, export_dir=None):
    """one rlx-bench-w10 run (2 interleaved rounds); its W10-RESULT fields"""
    cmd = [exe, "--threads", str(ARGS.threads), "--config", cfg, "--steps", str(ARGS.steps), "--rounds", "2"]
    if export_dir:
        cmd += ["--export", export_dir]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("compare.py: %s exited %d" % (" ".join(cmd), r.returncode))
    for line in r.stdout.splitlines():
        if line.startswith("W10-RESULT"):
            return dict(kv.split("=", 1) for kv in line.split()[1:]), r.stdout
    sys.exit("compare.py: no W10-RESULT line from " + " ".join(cmd))


def w10_load(d):
    meta = {"params": []}
    with open(os.path.join(d, "meta.txt")) as f:
        for line in f:
            w = line.split()
            if w[0] == "param":
                meta["params"].append((w[1], int(w[2]), int(w[3])))
            elif w[0] == "losses":
                meta["losses"] = [float(x) for x in w[1:]]
            else:
                meta[w[0]] = int(w[1])
    flat = np.fromfile(os.path.join(d, "params.f32"), dtype=np.float32)
    params, off = {}, 0
    for name, d0, d1 in meta["params"]:
        shape = (d0, d1) if d1 else (d0,)
        n = d0 * (d1 or 1)
        params[name] = flat[off:off + n].reshape(shape).copy()
        off += n
    assert off == flat.size, "params.f32 does not match meta.txt"
    n = meta["batch"] * meta["seq"]
    raw = np.fromfile(os.path.join(d, "batches.i32"), dtype=np.int32).reshape(meta["nbatch"], 2, n)
    return meta, params, raw


def w10_torch_model(meta, params):
    F = torch.nn.functional
    B, S, W, H, L = meta["batch"], meta["seq"], meta["width"], meta["heads"], meta["layers"]
    D = W // H
    P = {k: torch.from_numpy(v).requires_grad_(True) for k, v in params.items()}
    mask = torch.triu(torch.ones(S, S, dtype=torch.bool), 1)

    def loss_fn(tok, tgt):
        x = P["wte"][tok].view(B, S, W) + P["wpe"]
        for l in range(L):
            p = lambda k: P["h%d.%s" % (l, k)]  # noqa: E731
            a = F.layer_norm(x, (W,), p("ln1_g"), p("ln1_b"), 1e-5)
            q, k, v = F.linear(a, p("qkv_w"), p("qkv_b")).split(W, dim=-1)
            q, k, v = (t.view(B, S, H, D).transpose(1, 2) for t in (q, k, v))
            s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
            att = torch.softmax(s.masked_fill(mask, float("-inf")), -1) @ v
            x = x + F.linear(att.transpose(1, 2).reshape(B, S, W), p("o_w"), p("o_b"))
            m = F.layer_norm(x, (W,), p("ln2_g"), p("ln2_b"), 1e-5)
            f = F.gelu(F.linear(m, p("fc_w"), p("fc_b")), approximate="tanh")
            x = x + F.linear(f, p("proj_w"), p("proj_b"))
        h = F.layer_norm(x, (W,), P["lnf_g"], P["lnf_b"], 1e-5)
        return F.cross_entropy(h.reshape(B * S, W) @ P["wte"].t(), tgt)

    opt = torch.optim.Adam(list(P.values()), lr=3e-4, betas=(0.9, 0.999), eps=1e-8)

    def step(tok, tgt):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(tok, tgt)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def w10_main():
    import resource
    import tempfile
    if torch is None:
        sys.exit("compare.py: --w10 needs PyTorch (apt-get install python3-torch)")
    exe = find_exe("rlx-bench-w10")
    names = {"a": "W10a", "b": "W10b"}
    rows_out = []
    for cfg in ARGS.w10.split(","):
        if cfg not in names:
            sys.exit("compare.py: --w10 takes a, b or a,b")
        with tempfile.TemporaryDirectory(prefix="rlx-w10-") as d:
            rlx_runs = [w10_rlx(exe, cfg, d)]
            meta, params, raw = w10_load(d)
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        step = w10_torch_model(meta, params)
        batches = [(torch.from_numpy(raw[b, 0].astype(np.int64)), torch.from_numpy(raw[b, 1].astype(np.int64)))
                   for b in range(meta["nbatch"])]
        losses = [step(*batches[s % len(batches)]) for s in range(len(meta["losses"]))]
        rel = abs(losses[0] - meta["losses"][0]) / abs(meta["losses"][0])
        print("%s: first-step loss PyTorch %.7f, librlx %.7f (rel %.1e); steps 2-3 %s vs %s" % (
            names[cfg], losses[0], meta["losses"][0], rel, " ".join("%.6f" % x for x in losses[1:]),
            " ".join("%.6f" % x for x in meta["losses"][1:])))
        if rel > 1e-4:
            sys.exit("compare.py: W10 first-step losses differ (rel %.2e > 1e-4)" % rel)
        for s in range(3):
            step(*batches[s % len(batches)])
        t_rounds, faults, nsteps = [], 0, 0
        for r in range(ARGS.rounds):
            if r:
                rlx_runs.append(w10_rlx(exe, cfg))
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            ts = []
            for s in range(ARGS.steps):
                t0 = time.perf_counter()
                step(*batches[s % len(batches)])
                ts.append(time.perf_counter() - t0)
            faults += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
            nsteps += len(ts)
            t_rounds.append(sorted(ts)[len(ts) // 2])
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        rlx_ms = min(float(x[0]["rlx_ms"]) for x in rlx_runs)
        gemm_ms = min(float(x[0]["gemm_ms"]) for x in rlx_runs)
        best = rlx_runs[[float(x[0]["rlx_ms"]) for x in rlx_runs].index(rlx_ms)][0]
        row = {"workload": names[cfg], "threads": ARGS.threads, "rlx_ms": rlx_ms, "torch_ms": 1e3 * min(t_rounds),
               "gemm_ms": gemm_ms, "torch_ratio": 1e3 * min(t_rounds) / rlx_ms, "rlx_gemm_ratio": rlx_ms / gemm_ms,
               "torch_gemm_ratio": 1e3 * min(t_rounds) / gemm_ms,
               "rlx_minflt": float(best["minflt_per_step"]), "torch_minflt": faults / nsteps,
               "rlx_rss_mib": float(best["rss_mib"]), "rlx_rss_base_mib": float(best["rss_base_mib"]),
               "torch_rss_mib": ru1.ru_maxrss / 1024.0, "torch_rss_base_mib": ru0.ru_maxrss / 1024.0,
               "rlx_first_step_ms": float(rlx_runs[0][0]["first_step_ms"]), "load": os.getloadavg()[0]}
        rows_out.append(row)
    if ARGS.json:
        for row in rows_out:
            print(json.dumps(dict(row, type="w10")))
        return
    print("W10 at %d thread(s), PyTorch %s; ratio = PyTorch ms / librlx ms (above 1: librlx faster); "
          "best round medians of %d rounds x %d steps" % (ARGS.threads, torch.__version__, ARGS.rounds, ARGS.steps))
    print("%-6s %9s %9s %6s %9s %7s %7s %10s %10s %13s %13s" % (
        "", "librlx ms", "torch ms", "ratio", "GEMM ms", "rlx/G", "pt/G", "rlx flt/st", "pt flt/st",
        "rlx RSS MiB", "pt RSS MiB"))
    for r in rows_out:
        print("%-6s %9.2f %9.2f %6.2f %9.2f %7.2f %7.2f %10.1f %10.1f %6.0f (+%4.0f) %6.0f (+%4.0f)   load %.1f" % (
            r["workload"], r["rlx_ms"], r["torch_ms"], r["torch_ratio"], r["gemm_ms"], r["rlx_gemm_ratio"],
            r["torch_gemm_ratio"], r["rlx_minflt"], r["torch_minflt"], r["rlx_rss_mib"],
            r["rlx_rss_mib"] - r["rlx_rss_base_mib"], r["torch_rss_mib"], r["torch_rss_mib"] - r["torch_rss_base_mib"],
            r["load"]))


def main():
    if ARGS.w10:
        return w10_main()
    if ARGS.replay:
        return replay()
    machine, rlx = rlx_results()
    peers = ["numpy"] + (["torch"] if torch is not None else [])
    rows_out = []
    for name, (make, f_np, f_t) in WORKLOADS.items():
        if name not in rlx:
            continue
        r = rlx[name]
        inp = make(ARGS.quick)
        tin = to_torch(inp) if torch is not None else None
        limit_s = r["fraction"] * r["median_ms"] * 1e-3  # the roofline time rlx-bench computed
        row = {"workload": name, "rlx_ms": r["median_ms"], "rlx_fraction": r["fraction"]}
        for lib, fn, arg in (("numpy", f_np, inp), ("torch", f_t, tin)):
            if lib not in peers or fn is None:
                continue
            if lib == "torch":
                with torch.inference_mode(name != "W6"):
                    med, mn, _ = measure(lambda: fn(arg), ARGS.repeat)
            else:
                med, mn, _ = measure(lambda: fn(arg), ARGS.repeat)
            row[lib + "_ms"] = 1e3 * med
            row[lib + "_ratio"] = med / (r["median_ms"] * 1e-3)
            row[lib + "_fraction"] = limit_s / med
        rows_out.append(row)
    if "W7" in rlx or (not ARGS.filter or "W7" in ARGS.filter.split(",")):
        r = rlx.get("W7")
        if r:
            row = {"workload": "W7", "rlx_ns": r["ns_per_iter"], "rlx_program_ns": r["program_ns_per_iter"]}
            for lib in peers:
                ns = w7_ns(lib)
                row[lib + "_ns"] = ns
                row[lib + "_ratio"] = ns / r["ns_per_iter"]
            rows_out.append(row)
    show(machine, rows_out, peers)
    if ARGS.plot:
        plot(machine, rows_out, peers)


def show(machine, rows_out, peers):
    if ARGS.json:
        if machine:
            print(json.dumps(machine))
        for row in rows_out:
            print(json.dumps(dict(row, type="compare", threads=ARGS.threads)))
        return
    if machine:
        print("librlx %s, %s; %d thread(s); stream %.1f GB/s, FMA %.1f GFLOP/s" % (
            machine["version"], machine["host"], ARGS.threads, machine["stream_gbs"], machine["fma_gflops"]))
    if ARGS.replay:
        print("(replayed from %s)" % ARGS.replay)
    print("NumPy %s%s" % (np.__version__, ", PyTorch %s" % torch.__version__ if torch is not None else
                          " (PyTorch not installed)"))
    print("ratio = peer time / librlx time (above 1: librlx faster); limit = fraction of the machine limit")
    hdr = "%-10s %10s %6s" % ("workload", "librlx ms", "limit")
    for lib in peers:
        hdr += " %10s %6s %7s" % (lib + " ms", "limit", "ratio")
    print(hdr)
    for row in rows_out:
        if row["workload"] == "W7":
            line = "%-10s %8.0f ns %6s" % ("W7", row["rlx_ns"], "")
            for lib in peers:
                line += " %7.0f ns %6s %7.2f" % (row[lib + "_ns"], "", row[lib + "_ratio"])
            print(line + "   (per a+b of 4 elements; librlx program: %.0f ns)" % row["rlx_program_ns"])
            continue
        line = "%-10s %10.3f %6.2f" % (row["workload"], row["rlx_ms"], row["rlx_fraction"])
        for lib in peers:
            if lib + "_ms" in row:
                line += " %10.3f %6.2f %7.2f" % (row[lib + "_ms"], row[lib + "_fraction"], row[lib + "_ratio"])
            else:
                line += " %10s %6s %7s" % ("-", "-", "-")
        print(line)
    ratios = {lib: [row[lib + "_ratio"] for row in rows_out if lib + "_ratio" in row] for lib in peers}
    for lib in peers:
        if ratios[lib]:
            print("geometric mean ratio vs %s: %.2f over %d workloads" % (
                lib, math.exp(sum(map(math.log, ratios[lib])) / len(ratios[lib])), len(ratios[lib])))


def plot(machine, rows_out, peers):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("compare.py: --plot needs matplotlib (apt-get install python3-matplotlib)")
    rows_p = [r for r in rows_out if "rlx_fraction" in r]
    names = [r["workload"] for r in rows_p]
    libs = ["rlx"] + peers
    width = 0.8 / len(libs)
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(names)), 4.5))
    for j, lib in enumerate(libs):
        vals = [r.get(lib + "_fraction", 0) for r in rows_p]
        ax.bar([i + (j - (len(libs) - 1) / 2) * width for i in range(len(names))], vals, width,
               label={"rlx": "librlx", "numpy": "NumPy", "torch": "PyTorch"}[lib])
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30)
    ax.set_ylabel("fraction of the machine limit (roofline)")
    title = "librlx vs peers, %d thread(s)" % ARGS.threads
    if machine:
        title += "; stream %.1f GB/s, FMA %.0f GFLOP/s" % (machine["stream_gbs"], machine["fma_gflops"])
    ax.set_title(title, fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(ARGS.plot, dpi=110)
    print("wrote %s" % ARGS.plot)


if __name__ == "__main__":
    main()
