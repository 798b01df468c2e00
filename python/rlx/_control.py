"""Runtime control: threads, options, statistics, graph dumps, version."""

import operator

from ._base import _lib, _c, _clear, _check, _raise
from ._tensor import _tt
from . import _ffi


# ---------------------------------------------------------- runtime control

def set_num_threads(n):
    _lib.rlx_set_num_threads(operator.index(n))


def get_num_threads():
    return _lib.rlx_get_num_threads()


def set_option(key, value):
    """Tuning knob (rlx_set_option), e.g. set_option('backend', 'ref')."""
    _clear()
    _check(_lib.rlx_set_option(str(key).encode(), str(value).encode()))


def get_option(key):
    """Current value of an option (rlx_get_option) as a string, e.g.
    get_option('backend') -> 'ref'; knobs give the value used outside any
    tuned class, 'tuning_status' why a tuning file was (not) used."""
    k = str(key).encode()
    # 4 KiB holds any path; the library reports a longer value as E_ARG,
    # so one retry with room for anything tells that apart from a bad key.
    for cap in (4096, 1 << 20):
        buf = _c.create_string_buffer(cap)
        _clear()
        if _lib.rlx_get_option(k, buf, cap) == 0:
            return buf.value.decode("utf-8", "replace")
    _raise()


def stats():
    """Process-wide counters (rlx_stats) as a dict."""
    s = _ffi.Stats()
    _lib.rlx_stats(_c.byref(s))
    return {name: getattr(s, name) for name, _ in s._fields_}


def stats_reset():
    _lib.rlx_stats_reset()


def dump_dot(x, path):
    """Write the graph of x as Graphviz dot to path."""
    x = _tt(x)
    _clear()
    _check(_lib.rlx_dump_dot(x._h, str(path).encode()))


def version():
    """The library's version string (rlx_version)."""
    return _lib.rlx_version().decode()


def host_info():
    return _lib.rlx_host_info().decode()
