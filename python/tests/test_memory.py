"""Creating and dropping a million small tensors does not grow the process."""
import gc
import os
import sys
import time

import numpy as np

import rlx


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_million_small_tensors_do_not_leak():
    # warm up (allocator pools, ctypes caches), then measure
    for i in range(20000):
        rlx.full(2, float(i))
    gc.collect()
    before = rss_bytes()
    t0 = time.time()
    for i in range(1_000_000):
        t = rlx.full(2, float(i))           # distinct values: distinct graph nodes
        if i % 10 == 0:
            t = (t + 1.0)[1:]               # some expressions and views too
        if i % 1000 == 0:
            t.numpy()                       # and some realizations
    del t
    gc.collect()
    grown = rss_bytes() - before
    elapsed = time.time() - t0
    assert grown < 32 * 2**20, "RSS grew by %.1f MiB over a million tensors" % (grown / 2**20)
    assert elapsed < 60, elapsed


def test_from_numpy_and_views_release_everything():
    a = np.ones(16, np.float32)
    base = sys.getrefcount(a)
    gc.collect()
    before = rss_bytes()
    for i in range(100_000):
        t = rlx.from_numpy(a)
        v = t.numpy()                       # NumPy view -> Tensor -> blob -> a
        del t, v
    gc.collect()
    assert sys.getrefcount(a) == base
    assert rss_bytes() - before < 16 * 2**20
