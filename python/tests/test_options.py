"""rlx.get_option / rlx.set_option: values round trip, "default" restores the
built-in choice, bad keys and values raise, the environment and the tuning
file set knobs."""
import os

import pytest

import rlx
from conftest import run_python

S = rlx.Status

# knob -> (built-in default as rlx.h documents it, another valid value, an invalid one)
KNOBS = {
    "vector_width": ("0", "8", "3"),           # 0 auto, else a power of two <= 64
    "unroll": ("0", "4", "17"),
    "reduce_accumulators": ("0", "2", "-1"),
    "grain": ("32768", "4096", "63"),
    "gemm_block": ("0", "64", "x"),
    "small_matmul": ("0", "1000", "1.5"),
    "bf16_gemm": ("0", "1", "2"),
    "f32_gemm": ("0", "2", "3"),
    "fuse_elementwise": ("1", "0", "2"),
    "fuse_reduce": ("1", "0", "2"),
    "fuse_phases": ("1", "0", "2"),
    "generic_kernels": ("1", "2", "3"),
    "reduce_acc_f64": ("0", "1", "2"),
    "attention_bwd": ("2", "0", "3"),
    "gemv": ("0", "1", "2"),
    "half_gelu": ("1", "0", "2"),
    "half_kernels": ("3", "2", "4"),
}


def test_backend_round_trip():
    before = rlx.get_option("backend")
    assert before in ("ref", "jit")
    try:
        for b in ("jit", "ref", "jit"):
            rlx.set_option("backend", b)
            assert rlx.get_option("backend") == b
            assert (rlx.ones(3) * 2).sum().item() == 6.0
        with pytest.raises(rlx.RlxError) as e:
            rlx.set_option("backend", "gpu")
        assert e.value.status == S.E_ARG
        assert rlx.get_option("backend") == "jit"  # a refused value changes nothing
    finally:
        rlx.set_option("backend", before)


def test_num_threads_round_trip():
    default = rlx.get_num_threads()
    try:
        rlx.set_option("num_threads", "3")
        assert rlx.get_option("num_threads") == "3" and rlx.get_num_threads() == 3
        rlx.set_num_threads(1)
        assert rlx.get_option("num_threads") == "1"
    finally:
        rlx.set_option("num_threads", "0")  # 0 = the default again
    assert rlx.get_option("num_threads") == str(default) == str(rlx.get_num_threads())


def test_compile_threads_round_trip():
    default = int(rlx.get_option("compile_threads"))
    assert default >= 1
    try:
        rlx.set_option("compile_threads", "2")
        assert rlx.get_option("compile_threads") == "2"
        with pytest.raises(rlx.RlxError):
            rlx.set_option("compile_threads", "-3")
    finally:
        rlx.set_option("compile_threads", "0")
    assert rlx.get_option("compile_threads") == str(default)


@pytest.mark.parametrize("knob", sorted(KNOBS))
def test_knob_round_trip(knob):
    default, other, bad = KNOBS[knob]
    assert rlx.get_option(knob) == default
    try:
        rlx.set_option(knob, other)
        assert rlx.get_option(knob) == other
        with pytest.raises(rlx.RlxError) as e:
            rlx.set_option(knob, bad)
        assert e.value.status == S.E_ARG and "rlx_set_option" in e.value.message
        assert rlx.get_option(knob) == other
        # a kernel built under the knob still computes the right values
        x = rlx.arange(4096, dtype=rlx.float32)
        assert (x * 2 + 1).sum().item() == 2 * (4095 * 4096 / 2) + 4096
    finally:
        rlx.set_option(knob, "default")
    assert rlx.get_option(knob) == default


def test_unknown_key_raises():
    for key in ("no_such_option", "", "Backend"):
        with pytest.raises(rlx.RlxError) as e:
            rlx.get_option(key)
        assert e.value.status == S.E_ARG
        assert "rlx_get_option" in e.value.message and repr(key)[1:-1] in e.value.message
    with pytest.raises(rlx.RlxError) as e:
        rlx.get_option("no_such_option")
    assert "'no_such_option'" in e.value.message
    assert rlx.last_status() == S.E_ARG


def test_tuning_file_sets_knobs_outside_tuned_classes(tmp_path):
    assert rlx.get_option("tuning_status") == "none"  # the tests run with RLX_CACHE_DIR=""
    f = tmp_path / "tuning.txt"
    f.write_text("# test\nrlx-tuning 1\nany any grain=8192 unroll=2\nmatmul large gemm_block=32\n")
    try:
        rlx.set_option("tuning_file", str(f))
        status = rlx.get_option("tuning_status")
        # one entry per knob=value
        assert status.startswith("loaded 3 entries") and str(f) in status, status
        assert rlx.get_option("grain") == "8192" and rlx.get_option("unroll") == "2"
        assert rlx.get_option("gemm_block") == "0"  # only tuned for large matmuls
        rlx.set_option("grain", "1024")             # a set value wins over the file
        assert rlx.get_option("grain") == "1024"
        rlx.set_option("grain", "default")
        assert rlx.get_option("grain") == "8192"
    finally:
        rlx.set_option("tuning_file", "")
    assert rlx.get_option("grain") == "32768" and rlx.get_option("unroll") == "0"
    with pytest.raises(rlx.RlxError) as e:
        rlx.set_option("tuning_file", str(tmp_path / "missing.txt"))
    assert e.value.status == S.E_IO


def test_environment_sets_options(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("rlx-tuning 1\nany any grain=nope\n")
    code = ("import rlx\nfor k in ('backend', 'grain', 'fuse_phases', 'num_threads', 'tuning_status'):\n"
            "    print(k, rlx.get_option(k))")
    r = run_python(code, env={"RLX_BACKEND": "jit", "RLX_GRAIN": "2048", "RLX_FUSE_PHASES": "0",
                              "RLX_NUM_THREADS": "3", "RLX_TUNING_FILE": str(bad)})
    assert r.returncode == 0, r.stderr
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert got["backend"] == "jit" and got["grain"] == "2048" and got["fuse_phases"] == "0"
    assert got["num_threads"] == "3"
    assert got["tuning_status"].startswith("ignored") and "grain" in got["tuning_status"], got
    assert r.stderr == ""  # a malformed file is reported only under RLX_DEBUG


def test_program_specs_round_trip():
    assert rlx.get_option("program_specs") == "8"
    try:
        rlx.set_option("program_specs", "32")
        assert rlx.get_option("program_specs") == "32"
        for bad in ("-1", "4097", "many", ""):
            with pytest.raises(rlx.RlxError) as e:
                rlx.set_option("program_specs", bad)
            assert e.value.status == S.E_ARG and "program_specs" in str(e.value)
        assert rlx.get_option("program_specs") == "32"
    finally:
        rlx.set_option("program_specs", "0")  # 0 = the default again
    assert rlx.get_option("program_specs") == "8"
    r = run_python("import rlx\nprint(rlx.get_option('program_specs'))", env={"RLX_PROGRAM_SPECS": "64"})
    assert r.returncode == 0 and r.stdout.strip() == "64", r.stderr


def test_cache_dir_round_trip(tmp_path):
    before = os.environ.get("RLX_CACHE_DIR", None)
    try:
        rlx.set_option("cache_dir", str(tmp_path))
        assert rlx.get_option("cache_dir") == str(tmp_path)
        rlx.set_option("cache_dir", "")
        assert rlx.get_option("cache_dir") == ""
    finally:
        rlx.set_option("cache_dir", before or "")
