"""Loading librlx and declaring its functions.

Every ctypes prototype is derived from the C header ``rlx.h`` at import
time, so the binding cannot drift from the library's declarations: the
header is parsed (comments stripped, every ``RLX_API <ret> rlx_name(<args>);``
declaration, every ``typedef enum``/``typedef struct`` and the ``#define``
constants) and each C type is mapped to its ctypes equivalent through one
table, ``CTYPE_MAP``. A C type the table does not know leaves that function
undeclared and listed in ``UNMAPPED`` (the test suite fails on it).

Where the library comes from (first that exists wins):
  1. ``$RLX_LIBRARY`` (a path to the shared library),
  2. next to the package (``rlx/librlx.so*``),
  3. the build tree (``<repo>/build/librlx.so``),
  4. the system library path (``ctypes.util.find_library('rlx')``, then
     ``librlx.so``).
Where the header comes from: ``$RLX_HEADER``, next to the package, next to
the library or in ``../include`` from it (install prefix and build tree), the
source tree recorded in a ``CMakeCache.txt`` beside the library, the repo's
``include/``, then ``/usr/local/include`` and ``/usr/include``.
"""

import ctypes
import ctypes.util
import os
import re

__all__ = ["lib", "LIBRARY_PATH", "HEADER_PATH", "DECLS", "ENUMS", "DEFINES",
           "STRUCTS", "UNMAPPED", "MISSING", "parse_header", "CTYPE_MAP"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))  # python/rlx -> repo root


# ---------------------------------------------------------------- locating

def _library_candidates():
    out = []
    env = os.environ.get("RLX_LIBRARY")
    if env:
        out.append(("$RLX_LIBRARY", env))
    for name in sorted(os.listdir(_HERE)):
        if name.startswith("librlx.so"):
            out.append(("package", os.path.join(_HERE, name)))
            break
    else:
        out.append(("package", os.path.join(_HERE, "librlx.so")))
    out.append(("build tree", os.path.join(_REPO, "build", "librlx.so")))
    return out


def _load_library():
    tried = []
    for where, path in _library_candidates():
        if not os.path.exists(path):
            tried.append("%s: %s (not found)" % (where, path))
            continue
        try:
            return ctypes.CDLL(path), os.path.realpath(path)
        except OSError as e:
            tried.append("%s: %s (%s)" % (where, path, e))
            if where == "$RLX_LIBRARY":
                break  # an explicit choice that fails must not be papered over
    else:
        for name in (ctypes.util.find_library("rlx"), "librlx.so", "librlx.so.0.1"):
            if not name:
                continue
            try:
                handle = ctypes.CDLL(name)
                return handle, _loaded_path(handle, name)
            except OSError as e:
                tried.append("system library path: %s (%s)" % (name, e))
        if not ctypes.util.find_library("rlx"):
            tried.append("system library path: find_library('rlx') found nothing")
    raise ImportError("rlx: cannot load librlx; looked in:\n  " + "\n  ".join(tried) +
                      "\nBuild it (cmake -S . -B build && cmake --build build) or set RLX_LIBRARY.")


def _loaded_path(handle, fallback):
    """The file a dlopen'ed handle came from (via dladdr of one symbol)."""
    try:
        class DlInfo(ctypes.Structure):
            _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                        ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
        libdl = ctypes.CDLL(None)
        dladdr = libdl.dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        dladdr.restype = ctypes.c_int
        info = DlInfo()
        addr = ctypes.cast(handle.rlx_version, ctypes.c_void_p).value
        if dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(info.dli_fname.decode())
    except (OSError, AttributeError):
        pass
    return fallback


def _header_candidates(libpath):
    out = []
    env = os.environ.get("RLX_HEADER")
    if env:
        out.append(env)
    out.append(os.path.join(_HERE, "rlx.h"))
    if libpath and os.path.isabs(libpath):
        libdir = os.path.dirname(libpath)
        out += [os.path.join(libdir, "rlx.h"),
                os.path.join(libdir, "..", "include", "rlx.h"),
                os.path.join(libdir, "..", "..", "include", "rlx.h")]
        cache = os.path.join(libdir, "CMakeCache.txt")
        if os.path.exists(cache):
            try:
                with open(cache, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        m = re.match(r"(?:rlx_SOURCE_DIR|CMAKE_HOME_DIRECTORY):\w+=(.*)", line.strip())
                        if m:
                            out.append(os.path.join(m.group(1), "include", "rlx.h"))
            except OSError:
                pass
    out += [os.path.join(_REPO, "include", "rlx.h"),
            "/usr/local/include/rlx.h", "/usr/include/rlx.h"]
    return out


def _find_header(libpath):
    cands = _header_candidates(libpath)
    for c in cands:
        if os.path.isfile(c):
            return os.path.realpath(c)
    raise ImportError("rlx: cannot find rlx.h (the binding derives its ctypes declarations from it); "
                      "looked in:\n  " + "\n  ".join(cands) + "\nSet RLX_HEADER to its path.")


# ------------------------------------------------------------------ parsing

def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _split_top(s, sep=","):
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _canon_type(tokens):
    """Canonical spelling of a C type: words space-separated, '*' glued."""
    out = ""
    for t in tokens:
        if t == "*":
            out = out.rstrip() + "*"
        else:
            if out and not out.endswith((" ", "*")):
                out += " "
            out += t
    return out.strip()


def _parse_param(p):
    """(canonical type, name) of one parameter declaration."""
    m = re.match(r"^(.*?)\(\s*\*\s*(\w*)\s*\)\s*\((.*)\)$", p, flags=re.S)
    if m:  # function pointer: ret (*name)(args)
        ret = _canon_type(re.findall(r"\w+|\*", m.group(1)))
        args = ",".join(_parse_param(a)[0] for a in _split_top(m.group(3)))
        return "%s(*)(%s)" % (ret, args), m.group(2)
    toks = re.findall(r"\w+|\*|\[\s*\w*\s*\]", p)
    name = None
    arrays = 0
    while toks and toks[-1].startswith("["):
        arrays += 1
        toks.pop()
    words = [t for t in toks if t != "*"]
    if len(words) >= 2 and re.match(r"\w+$", toks[-1]) and toks[-1] != "const":
        name = toks.pop()
    return _canon_type(toks + ["*"] * arrays), name


def parse_header(text):
    """Parse rlx.h text into (decls, enums, defines, structs).

    decls: {name: (ret_type, [(arg_type, arg_name), ...])}, in header order;
    enums: {enum_type: {CONSTANT: value}}; defines: {NAME: int or str};
    structs: {typedef_name: [(field_type, field_name), ...]}.
    """
    code = _strip_comments(text)
    decls = {}
    for m in re.finditer(r"\bRLX_API\s+([^;{}#]*?)\s*;", code, flags=re.S):
        d = " ".join(m.group(1).split())
        fm = re.match(r"^(.*?)\b(rlx_\w+)\s*\((.*)\)$", d)
        if not fm:
            continue
        ret = _canon_type(re.findall(r"\w+|\*", fm.group(1)))
        params = _split_top(fm.group(3))
        if params == ["void"]:
            params = []
        decls[fm.group(2)] = (ret, [_parse_param(p) for p in params])
    enums = {}
    for m in re.finditer(r"typedef\s+enum\s*\{(.*?)\}\s*(\w+)\s*;", code, flags=re.S):
        vals, nxt = {}, 0
        for item in _split_top(m.group(1)):
            km = re.match(r"(\w+)\s*(?:=\s*(-?\w+))?$", item.strip())
            if not km:
                continue
            nxt = int(km.group(2), 0) if km.group(2) else nxt
            vals[km.group(1)] = nxt
            nxt += 1
        enums[m.group(2)] = vals
    structs = {}
    for m in re.finditer(r"typedef\s+struct\s*\w*\s*\{(.*?)\}\s*(\w+)\s*;", code, flags=re.S):
        fields = []
        for stmt in m.group(1).split(";"):
            stmt = " ".join(stmt.split())
            if not stmt:
                continue
            fm = re.match(r"^((?:const\s+)?\w+(?:\s*\*)*)\s*(.*)$", stmt)
            base = fm.group(1)
            for decl in fm.group(2).split(","):
                toks = re.findall(r"\w+|\*", base + " " + decl)
                ftype, fname = _parse_param(" ".join(toks))
                fields.append((ftype, fname))
        structs[m.group(2)] = fields
    defines = {}
    for m in re.finditer(r"^\s*#\s*define\s+(RLX_\w+)\s+(.+?)\s*$", code, flags=re.M):
        v = m.group(2).strip()
        if v == "INT64_MAX":
            defines[m.group(1)] = 2**63 - 1
        elif re.match(r"^-?\d+$", v):
            defines[m.group(1)] = int(v)
        elif re.match(r'^".*"$', v):
            defines[m.group(1)] = v[1:-1]
    return decls, enums, defines, structs


# ------------------------------------------------------------ type mapping

_S = ctypes


def _build_ctype_map(enums, structs):
    """The one table from canonical C type spelling to ctypes."""
    t = {
        "void": None,
        "bool": _S.c_bool, "int": _S.c_int, "size_t": _S.c_size_t, "double": _S.c_double,
        "float": _S.c_float, "int64_t": _S.c_int64, "uint64_t": _S.c_uint64,
        "int32_t": _S.c_int32,
        # opaque handles stay plain integers (None for NULL)
        "rlx_tensor*": _S.c_void_p, "rlx_program*": _S.c_void_p,
        "rlx_checkpoint*": _S.c_void_p, "const rlx_checkpoint*": _S.c_void_p,
        "const char*const*": _S.POINTER(_S.c_char_p),
        "rlx_tensor**": _S.POINTER(_S.c_void_p), "rlx_tensor*const*": _S.POINTER(_S.c_void_p),
        "const int64_t*": _S.POINTER(_S.c_int64), "int64_t*": _S.POINTER(_S.c_int64),
        "const int*": _S.POINTER(_S.c_int), "int*": _S.POINTER(_S.c_int),
        "float*": _S.POINTER(_S.c_float), "double*": _S.POINTER(_S.c_double),
        "void*": _S.c_void_p, "const void*": _S.c_void_p,
        "const char*": _S.c_char_p,   # library-owned strings: copied to bytes
        "char*": _S.c_void_p,         # caller-owned strings: kept as a pointer to free()
        "void(*)(void*)": _S.CFUNCTYPE(None, _S.c_void_p),
    }
    for e in enums:
        t[e] = _S.c_int
    for name, fields in structs.items():
        cls = type(name, (_S.Structure,), {})
        cls._fields_ = [(fname, t[ftype]) for ftype, fname in fields]
        t[name] = cls
        t[name + "*"] = _S.POINTER(cls)
        t["const " + name + "*"] = _S.POINTER(cls)
    return t


# ------------------------------------------------------------------ loading

lib, LIBRARY_PATH = _load_library()
HEADER_PATH = _find_header(LIBRARY_PATH)
with open(HEADER_PATH, encoding="utf-8") as _f:
    DECLS, ENUMS, DEFINES, STRUCTS = parse_header(_f.read())
CTYPE_MAP = _build_ctype_map(ENUMS, STRUCTS)

_unmapped, _missing = [], []
for _name, (_ret, _params) in DECLS.items():
    _types = [_ret] + [p[0] for p in _params]
    _bad = [x for x in _types if x not in CTYPE_MAP]
    if _bad:
        _unmapped.append("%s (%s)" % (_name, ", ".join(_bad)))
        continue
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        _missing.append(_name)
        continue
    _fn.restype = CTYPE_MAP[_ret]
    _fn.argtypes = [CTYPE_MAP[p[0]] for p in _params]
UNMAPPED = tuple(_unmapped)   # declared in rlx.h with a C type CTYPE_MAP lacks
MISSING = tuple(_missing)     # declared in rlx.h but not exported by the library
del _name, _ret, _params, _types, _bad, _unmapped, _missing
try:
    del _fn
except NameError:
    pass

# libc free() for rlx_to_string's result
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
free = _libc.free
free.argtypes = [ctypes.c_void_p]
free.restype = None

Binding = CTYPE_MAP.get("rlx_binding")
Stats = CTYPE_MAP.get("rlx_stats_t")
Deleter = CTYPE_MAP["void(*)(void*)"]
