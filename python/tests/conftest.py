"""Shared fixtures: the package is imported from python/ (no install needed)."""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
if PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)

# Compiled kernels are not cached across runs by the tests.
os.environ.setdefault("RLX_CACHE_DIR", "")

import rlx  # noqa: E402


@pytest.fixture
def rng(request):
    # a different, reproducible stream per test
    seed = abs(hash(request.node.nodeid)) % (2**32)
    return np.random.default_rng(seed)


def assert_close(actual, expected, rtol=None, atol=None, dtype=None):
    """actual: an rlx.Tensor; expected: array-like. Checks shape, dtype
    (when given) and values (NaN equal to NaN)."""
    assert isinstance(actual, rlx.Tensor), type(actual)
    got = actual.numpy()
    exp = np.asarray(expected)
    assert got.shape == exp.shape, (got.shape, exp.shape)
    if dtype is not None:
        assert actual.dtype == dtype, (actual.dtype, dtype)
    if got.dtype.kind == "f" or exp.dtype.kind == "f":
        if rtol is None:
            rtol = 1e-5 if got.dtype == np.float32 else 1e-10
        if atol is None:
            atol = 1e-5 if got.dtype == np.float32 else 1e-10
        np.testing.assert_allclose(got.astype(np.float64), exp.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, exp)


def run_python(code, env=None, timeout=60):
    """Run code in a fresh interpreter with the package importable; returns
    the CompletedProcess."""
    import subprocess
    e = dict(os.environ)
    e["PYTHONPATH"] = PYDIR + os.pathsep + e.get("PYTHONPATH", "")
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e,
                          timeout=timeout)
