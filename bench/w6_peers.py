#!/usr/bin/python3
"""W6 peers: one training step of a 784-512-512-10 ReLU MLP, batch 256,
softmax cross-entropy (integer labels, mean over the batch), plain SGD
(lr 0.01), float32 -- the workload of bench/bench_w6.c -- in

  * NumPy, with a hand-written backward (float32 throughout), and
  * PyTorch eager (nn.Linear/ReLU, F.cross_entropy, loss.backward(),
    torch.optim.SGD), when `import torch` works.

Usage: /usr/bin/python3 bench/w6_peers.py [--steps S] [--warmup W]
       /usr/bin/python3 bench/w6_peers.py --summarize LOG

Each thread count (1, then 2) runs in a child process of this script whose
environment has OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS
set to it (BLAS pools are sized when the library loads); the child also
calls torch.set_num_threads. OPENBLAS_CORETYPE is left as found.
Prints median/min/max ms per step over S timed steps (default 40, at
least 30) after W warmup steps (default 5), the loss at step 1 and the mean
loss over the first and last pass over the 8 batches, and one
"W6-PEERS threads=N numpy_ms=... torch_ms=..." line per thread count. The
"cpu" column is the median process CPU time per step (all threads): at one
thread, the work without the time spent waiting for a shared core.

--summarize LOG reads the W6-RESULT lines of rlx-bench-w6 and the W6-PEERS
lines of this script from a log of several rounds (each round: one
rlx-bench-w6 run, then one run of this script) and prints the W6 table:
per configuration the median over rounds of the per-round medians, and each
librlx/peer ratio as the median over rounds of the ratio within a round.

Data: synthetic, fixed seed: x ~ N(0,1), labels = argmax of a fixed random
linear teacher, 8 batches used in turn; Kaiming-uniform weights (bound
sqrt(6 / fan_in)), zero biases (torch keeps its own nn.Linear init for
the biases' shape but they are zeroed here).
"""
import os
import subprocess
import sys
import time

BATCH, IN, H, OUT, NBATCH, LR = 256, 784, 512, 10, 8, 0.01


def median(ts):  # in ms
    return summary(ts)[0]


def summary(ts):
    s = sorted(ts)
    n = len(s)
    med = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    return med * 1e3, s[0] * 1e3, s[-1] * 1e3


def make_data(np):
    rng = np.random.default_rng(6)
    teacher = rng.standard_normal((IN, OUT)).astype(np.float32)
    xs = [rng.standard_normal((BATCH, IN)).astype(np.float32) for _ in range(NBATCH)]
    ys = [np.argmax(x @ teacher, axis=1).astype(np.int64) for x in xs]
    params = []
    for fan_out, fan_in in ((H, IN), (H, H), (OUT, H)):
        bound = np.sqrt(6.0 / fan_in)
        params.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32))
        params.append(np.zeros(fan_out, np.float32))
    return xs, ys, params


def loss_report(losses):
    return "loss: step 1 %.4f, first pass %.4f, last pass %.4f" % (
        losses[0], sum(losses[:NBATCH]) / NBATCH, sum(losses[-NBATCH:]) / NBATCH)


def bench_numpy(np, xs, ys, init, warmup, steps):
    w1, b1, w2, b2, w3, b3 = [p.copy() for p in init]
    rows = np.arange(BATCH)

    def step(x, y):
        # forward
        z1 = x @ w1.T
        z1 += b1
        h1 = np.maximum(z1, 0)
        z2 = h1 @ w2.T
        z2 += b2
        h2 = np.maximum(z2, 0)
        z3 = h2 @ w3.T
        z3 += b3
        # softmax cross-entropy, mean over the batch
        z3 -= z3.max(axis=1, keepdims=True)
        e = np.exp(z3)
        s = e.sum(axis=1, keepdims=True)
        loss = float(np.mean(np.log(s[:, 0]) - z3[rows, y]))
        # backward
        g3 = e / s
        g3[rows, y] -= 1
        g3 *= np.float32(1.0 / BATCH)
        dw3 = g3.T @ h2
        db3 = g3.sum(axis=0)
        g2 = g3 @ w3
        g2 *= z2 > 0
        dw2 = g2.T @ h1
        db2 = g2.sum(axis=0)
        g1 = g2 @ w2
        g1 *= z1 > 0
        dw1 = g1.T @ x
        db1 = g1.sum(axis=0)
        # SGD, in place
        lr = np.float32(LR)
        for p, g in ((w1, dw1), (b1, db1), (w2, dw2), (b2, db2), (w3, dw3), (b3, db3)):
            p -= lr * g
        return loss

    ts, cs, losses = [], [], []
    for i in range(warmup + steps):
        t0, c0 = time.perf_counter(), time.process_time()
        losses.append(step(xs[i % NBATCH], ys[i % NBATCH]))
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    assert w1.dtype == np.float32 and b3.dtype == np.float32
    return summary(ts[warmup:]), median(cs[warmup:]), losses


def bench_torch(torch, xs, ys, init, warmup, steps):
    nn, F = torch.nn, torch.nn.functional
    model = nn.Sequential(nn.Linear(IN, H), nn.ReLU(), nn.Linear(H, H), nn.ReLU(), nn.Linear(H, OUT))
    with torch.no_grad():
        for p, v in zip(model.parameters(), init):
            p.copy_(torch.from_numpy(v))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    txs = [torch.from_numpy(x) for x in xs]
    tys = [torch.from_numpy(y) for y in ys]
    ts, cs, losses = [], [], []
    for i in range(warmup + steps):
        x, y = txs[i % NBATCH], tys[i % NBATCH]
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
        losses.append(loss.item())
    return summary(ts[warmup:]), median(cs[warmup:]), losses


def child(threads, warmup, steps):
    import numpy as np
    print("== W6 peers at %d thread(s): OMP_NUM_THREADS=%s OPENBLAS_NUM_THREADS=%s OPENBLAS_CORETYPE=%s" % (
        threads, os.environ.get("OMP_NUM_THREADS"), os.environ.get("OPENBLAS_NUM_THREADS"),
        os.environ.get("OPENBLAS_CORETYPE", "(unset)")))
    print("   loadavg at start: %s" % open("/proc/loadavg").read().strip())
    xs, ys, init = make_data(np)
    print("   %-22s %9s %9s %9s %9s   ms/step (cpu: median process CPU time), %d warmup + %d timed steps" % (
        "", "median", "min", "max", "cpu", warmup, steps))
    (med, lo, hi), cpu, losses = bench_numpy(np, xs, ys, init, warmup, steps)
    np_ms, np_cpu = med, cpu
    print("   %-22s %9.3f %9.3f %9.3f %9.3f   | %s" % (
        "NumPy %s" % np.__version__, med, lo, hi, cpu, loss_report(losses)))
    torch_ms = torch_cpu = None
    try:
        import torch
    except ImportError as e:
        print("   PyTorch: not available (%s)" % e)
    else:
        torch.set_num_threads(threads)
        (med, lo, hi), cpu, losses = bench_torch(torch, xs, ys, init, warmup, steps)
        torch_ms, torch_cpu = med, cpu
        print("   %-22s %9.3f %9.3f %9.3f %9.3f   | %s | torch.get_num_threads %d" % (
            "PyTorch %s eager" % torch.__version__, med, lo, hi, cpu, loss_report(losses),
            torch.get_num_threads()))
    print("   loadavg at end: %s" % open("/proc/loadavg").read().strip())
    print("W6-PEERS threads=%d numpy_ms=%.3f torch_ms=%s numpy_cpu=%.3f torch_cpu=%s" % (
        threads, np_ms, "%.3f" % torch_ms if torch_ms is not None else "n/a", np_cpu,
        "%.3f" % torch_cpu if torch_cpu is not None else "n/a"), flush=True)


def summarize(path):
    rounds, cur = [], None
    for line in open(path):
        tag = line.split(" ", 1)[0]
        if tag not in ("W6-RESULT", "W6-PEERS"):
            continue
        kv = dict(f.split("=", 1) for f in line.split()[1:])
        t = int(kv.pop("threads"))
        if tag == "W6-RESULT" and t == 1:  # a new round starts with rlx-bench-w6 at 1 thread
            cur = {}
            rounds.append(cur)
        if cur is None:
            continue
        for k, v in kv.items():
            try:
                cur[(k, t)] = float(v)
            except ValueError:  # "n/a", "FAILED:..."
                pass
    cols = [("librlx ref", "ref"), ("librlx jit", "jit"), ("NumPy", "numpy"), ("PyTorch eager", "torch"),
            ("GEMM limit", "gemm")]

    def med(v):
        v = sorted(v)
        n = len(v)
        return None if not n else v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])

    def fmt(x, f="%.2f"):
        return "n/a" if x is None else f % x

    print("%d rounds from %s" % (len(rounds), path))
    for unit, suffix in (("ms/step (wall, median of rounds)", "ms"), ("process CPU ms/step", "cpu")):
        print("\n| %s | 1 thread | 2 threads |\n|---|---:|---:|" % unit)
        for name, key in cols:
            print("| %s | %s |" % (name, " | ".join(fmt(med([r[(key + "_" + suffix, t)] for r in rounds
                                                              if (key + "_" + suffix, t) in r])) for t in (1, 2))))
        if suffix == "cpu":
            break
        print("\n| ratio (median over rounds of same-round ratios) | 1 thread | 2 threads |\n|---|---:|---:|")
        for a in ("ref", "jit"):
            for b in ("numpy", "torch", "gemm"):
                vals = []
                for t in (1, 2):
                    vals.append(med([r[(a + "_ms", t)] / r[(b + "_ms", t)] for r in rounds
                                     if (a + "_ms", t) in r and (b + "_ms", t) in r]))
                print("| librlx %s / %s | %s |" % (a, dict(numpy="NumPy", torch="PyTorch", gemm="GEMM limit")[b],
                                                   " | ".join(fmt(v) for v in vals)))


def main():
    args = sys.argv[1:]
    if args[:1] == ["--summarize"] and len(args) == 2:
        summarize(args[1])
        return
    warmup, steps, threads = 5, 40, None
    while args:
        a = args.pop(0)
        if a == "--steps":
            steps = int(args.pop(0))
        elif a == "--warmup":
            warmup = int(args.pop(0))
        elif a == "--child":
            threads = int(args.pop(0))
        else:
            sys.exit("usage: w6_peers.py [--steps S (>= 30)] [--warmup W]")
    steps, warmup = max(steps, 30), max(warmup, 1)
    if threads is not None:
        child(threads, warmup, steps)
        return
    print("W6 peers: MLP 784-512-512-10 ReLU, batch %d, softmax cross-entropy, SGD lr %g, float32; python %s" % (
        BATCH, LR, sys.version.split()[0]), flush=True)
    status = 0
    for t in (1, 2):
        env = dict(os.environ, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t), MKL_NUM_THREADS=str(t))
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(t), "--steps", str(steps),
                            "--warmup", str(warmup)], env=env)
        status |= r.returncode
    sys.exit(status)


if __name__ == "__main__":
    main()
