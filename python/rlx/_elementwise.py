"""Elementwise operations: unary math, binary arithmetic with Python and
NumPy promotion rules, comparisons, logical ops, Python's division
semantics, selection (where, masked_fill, clamp), and Tensor's operators."""

import builtins

import numpy as np

from ._base import (_lib, _clear, _no_out, _builtin_bool, _builtin_int, _builtin_float, _builtin_abs)
from ._dtypes import _scalar_dtype, _is_scalar, _py_scalar, bool_, int64, float32, float64
from ._tensor import Tensor, tensor, cast, _wrap, _tt, _attach

_builtin_complex = builtins.complex  # this module's complex() builds tensors


# ------------------------------------------------------------------ unary

def _unary(cname):
    fn = getattr(_lib, "rlx_" + cname)

    def op(x):
        x = _tt(x)
        _clear()
        return _wrap(fn(x._h))
    op.__name__ = op.__qualname__ = cname
    op.__doc__ = "Elementwise rlx_%s (lazy)." % cname
    return op


_UNARY = ("neg relu gelu_tanh silu tanh exp log sqrt rsqrt sigmoid abs sin cos tan atan round "
          "recip floor ceil sign softplus elu erf hard_swish hard_sigmoid mish softsign log_sigmoid "
          "logical_not").split()
neg = _unary("neg")
relu = _unary("relu")
gelu_tanh = _unary("gelu_tanh")
silu = _unary("silu")
tanh = _unary("tanh")
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sigmoid = _unary("sigmoid")
abs = _unary("abs")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
atan = _unary("atan")
_round0 = _unary("round")


def round(x, decimals=0, out=None):
    """Round half to even (rlx_round); decimals != 0 scales by 10**decimals."""
    _no_out(out)
    if decimals == 0:
        return _round0(x)
    x = _tt(x)
    f = 10.0 ** decimals
    return _round0(x * f) / f if x.dtype.is_float or x.dtype.is_complex else x  # complex: round refuses
recip = _unary("recip")
floor = _unary("floor")
ceil = _unary("ceil")
sign = _unary("sign")
softplus = _unary("softplus")
elu = _unary("elu")
erf = _unary("erf")
hard_swish = _unary("hard_swish")
hard_sigmoid = _unary("hard_sigmoid")
mish = _unary("mish")
softsign = _unary("softsign")
log_sigmoid = _unary("log_sigmoid")
logical_not = _unary("logical_not")
_gelu_exact = _unary("gelu")


def gelu(x, approximate="none"):
    """GELU; approximate='tanh' (PyTorch's spelling) uses rlx_gelu_tanh."""
    if approximate in ("tanh", True):
        return gelu_tanh(x)
    if approximate not in ("none", None, False):
        raise ValueError("gelu: approximate must be 'none' or 'tanh', got %r" % (approximate,))
    return _gelu_exact(x)


negative = neg
absolute = abs
arctan = atan
reciprocal = recip
hardswish = hard_swish
hardsigmoid = hard_sigmoid
logsigmoid = log_sigmoid


# ----------------------------------------------------------------- binary

_BIN = {n: (getattr(_lib, "rlx_" + n), getattr(_lib, "rlx_%s_s" % n, None))
        for n in "add sub mul div pow maximum minimum atan2 rem eq ne lt le gt ge logical_and logical_or".split()}
_SWAP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _operand(o):
    if isinstance(o, Tensor):
        return o
    if _is_scalar(o):
        return _py_scalar(o)
    if isinstance(o, (np.ndarray, list, tuple, _builtin_complex, np.complexfloating)):  # complex: a c64 tensor
        return tensor(o)
    return NotImplemented


def _scalar_tensor(s, d):
    return tensor(s, d)


def _binary_tt(name, a, b):
    _clear()
    return _wrap(_BIN[name][0](a._h, b._h))


def _binary_ts(name, x, s, reflected=False, compare=False):
    """x <op> s (or s <op> x when reflected) for a Python scalar s."""
    d = x.dtype
    sd = _scalar_dtype(s, d)
    if compare and not d.is_float and not d.is_complex and isinstance(s, _builtin_float):
        sd = float64  # compare exactly, whatever the integer
    if sd is not d:
        x = cast(x, sd)
    fn, fn_s = _BIN[name]
    if isinstance(s, _builtin_bool) and not sd.is_bool:
        s = _builtin_int(s)
    exact = fn_s is not None and not (isinstance(s, _builtin_int) and _builtin_abs(s) > 2**53)
    if not reflected and exact:
        _clear()
        return _wrap(fn_s(x._h, _builtin_float(s)))
    if reflected and exact and name in ("add", "mul", "maximum", "minimum", "eq", "ne"):
        _clear()
        return _wrap(fn_s(x._h, _builtin_float(s)))
    if reflected and exact and name == "sub":
        _clear()
        return _wrap(_lib.rlx_rsub_s(x._h, _builtin_float(s)))
    if reflected and exact and name == "div":
        _clear()
        return _wrap(_lib.rlx_rdiv_s(x._h, _builtin_float(s)))
    st = _scalar_tensor(s, sd)
    return _binary_tt(name, st, x) if reflected else _binary_tt(name, x, st)


def _arith(name, a, b, reflected=False):
    b = _operand(b)
    if b is NotImplemented:
        return NotImplemented
    if isinstance(b, Tensor):
        return _binary_tt(name, b, a) if reflected else _binary_tt(name, a, b)
    return _binary_ts(name, a, b, reflected)


def _compare(name, a, b):
    b = _operand(b)
    if b is NotImplemented:
        return NotImplemented
    if isinstance(b, Tensor):
        return _binary_tt(name, a, b)
    return _binary_ts(name, a, b, compare=True)


def _logical(name, a, b):
    b = _operand(b)
    if b is NotImplemented:
        return NotImplemented
    if not isinstance(b, Tensor):
        b = _scalar_tensor(_builtin_bool(b), bool_)
    if not (a.dtype.is_bool and b.dtype.is_bool):
        raise TypeError("&, | and ^ are logical and need bool tensors; got %s and %s"
                        % (a.dtype.name, b.dtype.name))
    return _binary_tt(name, a, b)


def _either(op, a, b, *name):
    """op([name,] a, b) with a Tensor as its first operand: b's turn
    (reflected=True) when only b is one; neither: a becomes one."""
    if isinstance(a, Tensor):
        return _check_ni(op(*name, a, b), a, b)
    if isinstance(b, Tensor):
        return _check_ni(op(*name, b, a, reflected=True), a, b)
    return op(*name, tensor(a), b)


def _binary_fn(name, doc):
    def op(a, b):
        return _either(_arith, a, b, name)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


def _check_ni(r, a, b):
    if r is NotImplemented:
        raise TypeError("rlx: unsupported operand types %s and %s" % (type(a).__name__, type(b).__name__))
    return r


add = _binary_fn("add", "a + b with broadcasting and NumPy promotion.")
sub = _binary_fn("sub", "a - b.")
mul = _binary_fn("mul", "a * b.")
div = _binary_fn("div", "rlx_div: C semantics, integer division truncates toward zero "
                        "(Python's / is rlx.true_divide, // is rlx.floor_divide).")
pow = _binary_fn("pow", "a ** b.")
maximum = _binary_fn("maximum", "Elementwise maximum (NaN propagates).")
minimum = _binary_fn("minimum", "Elementwise minimum (NaN propagates).")
atan2 = _binary_fn("atan2", "atan2(a, b).")
rem = _binary_fn("rem", "rlx_rem: C fmod semantics, the sign of a (Python's % is rlx.remainder).")
subtract, multiply, power, arctan2, fmod = sub, mul, pow, atan2, rem


def _cmp_fn(name):
    def op(a, b):
        if isinstance(a, Tensor):
            return _check_ni(_compare(name, a, b), a, b)
        if isinstance(b, Tensor):
            return _check_ni(_compare(_SWAP[name], b, a), a, b)
        return _compare(name, tensor(a), b)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = "Elementwise comparison, a bool tensor."
    return op


eq, ne, lt, le, gt, ge = (_cmp_fn(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))
equal, not_equal, less, less_equal, greater, greater_equal = eq, ne, lt, le, gt, ge


def logical_and(a, b):
    a, b = _tt(a), _tt(b)
    return _binary_tt("logical_and", a, b)


def logical_or(a, b):
    a, b = _tt(a), _tt(b)
    return _binary_tt("logical_or", a, b)


def logical_xor(a, b):
    return ne(cast(_tt(a), bool_), cast(_tt(b), bool_))


def rsub(x, s):
    """s - x (rlx_rsub_s)."""
    return _arith("sub", _tt(x), s, reflected=True)


def rdiv(x, s):
    """s / x with rlx_div semantics (rlx_rdiv_s)."""
    return _arith("div", _tt(x), s, reflected=True)


def _float_pair(a, b):
    """Python true division: integer/bool operands are cast to float32 first
    (never a complex one: that cast would keep only the real part)."""
    if not a.dtype.is_float and not a.dtype.is_complex and \
            not (isinstance(b, Tensor) and (b.dtype.is_float or b.dtype.is_complex)) \
            and not isinstance(b, _builtin_float):
        a = cast(a, float32)
    return a


def _truediv(a, b, reflected=False):
    b = _operand(b)
    if b is NotImplemented:
        return NotImplemented
    a = _float_pair(a, b)
    if isinstance(b, Tensor):
        return _binary_tt("div", b, a) if reflected else _binary_tt("div", a, b)
    return _binary_ts("div", a, b, reflected)


def true_divide(a, b):
    """a / b like Python and NumPy: integer and bool inputs give float32."""
    return _either(_truediv, a, b)


divide = true_divide


def _pair_tensors(a, b, reflected):
    """Both operands as tensors of a common dtype, in operation order."""
    if not isinstance(b, Tensor):
        b = _scalar_tensor(b, _scalar_dtype(b, a.dtype))
    return (b, a) if reflected else (a, b)


def _floor_parts(a, b):
    """Python's (a // b, a % b) built from C truncating div/rem (NumPy's
    algorithm for floats)."""
    if a.dtype.is_bool and b.dtype.is_bool:
        a = cast(a, int64)
    md = rem(a, b)
    rdt = md.dtype
    zero = md == 0
    adjust = logical_and(logical_not(zero), ne(lt(md, 0), lt(b, 0)))
    if not rdt.is_float:
        q = div(a, b)
        q = q - cast(adjust, rdt)
        m = where(adjust, md + b, md)
        return q, m
    dv = div(a - md, b)
    dv = dv - cast(adjust, rdt)
    fl = floor(dv)
    fl = fl + cast(gt(dv - fl, 0.5), rdt)
    q = where(eq(b, 0), div(a, b), fl)
    m = where(adjust, md + b, md)
    return q, m


def _floor_part(which, a, b, reflected):
    b = _operand(b)
    if b is NotImplemented:
        return NotImplemented
    x, y = _pair_tensors(a, b, reflected)
    return _floor_parts(x, y)[which]


def _floordiv(a, b, reflected=False):
    return _floor_part(0, a, b, reflected)


def _mod(a, b, reflected=False):
    return _floor_part(1, a, b, reflected)


def floor_divide(a, b):
    """a // b like Python and NumPy (rounds toward -inf; integer division by
    zero gives 0)."""
    return _either(_floordiv, a, b)


def remainder(a, b):
    """a % b like Python and NumPy (the sign of b); rlx.rem / rlx.fmod is C's."""
    return _either(_mod, a, b)


mod = remainder


# -------------------------------------------------------------- selection

def where(cond, a, b):
    """cond ? a : b with broadcasting; a or b may be Python scalars."""
    cond = _tt(cond)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a, b = tensor(a), tensor(b)
    elif not isinstance(a, Tensor):
        a = _scalar_tensor(_py_scalar(a), _scalar_dtype(_py_scalar(a), b.dtype)) if _is_scalar(a) else _tt(a)
    elif not isinstance(b, Tensor):
        b = _scalar_tensor(_py_scalar(b), _scalar_dtype(_py_scalar(b), a.dtype)) if _is_scalar(b) else _tt(b)
    _clear()
    return _wrap(_lib.rlx_where(cond._h, a._h, b._h))


def masked_fill(x, mask, value):
    """where(mask, value, x) keeping x's shape and dtype."""
    x, mask = _tt(x), _tt(mask)
    _clear()
    return _wrap(_lib.rlx_masked_fill(x._h, mask._h, _builtin_float(_py_scalar(value))))


def clamp(x, min=None, max=None, out=None):
    """min(max(x, min), max); either bound may be None (values converted to x's dtype)."""
    _no_out(out)
    x = _tt(x)
    lo, hi = min, max
    _clear()
    if lo is not None and hi is not None:
        return _wrap(_lib.rlx_clamp(x._h, _builtin_float(lo), _builtin_float(hi)))
    if lo is not None:
        return _wrap(_lib.rlx_clamp_min(x._h, _builtin_float(lo)))
    if hi is not None:
        return _wrap(_lib.rlx_clamp_max(x._h, _builtin_float(hi)))
    return x


def clamp_min(x, min):
    return clamp(x, min=min)


def clamp_max(x, max):
    return clamp(x, max=max)


def clip(x, a_min=None, a_max=None, out=None, **kwargs):
    """NumPy spelling of clamp."""
    if kwargs:
        raise TypeError("rlx.clip: unsupported arguments %s" % sorted(kwargs))
    return clamp(x, a_min, a_max, out)


class _Operators:
    """Tensor's arithmetic, comparison and logical operators."""
    def __add__(self, o): return _arith("add", self, o)
    def __radd__(self, o): return _arith("add", self, o, reflected=True)
    def __sub__(self, o): return _arith("sub", self, o)
    def __rsub__(self, o): return _arith("sub", self, o, reflected=True)
    def __mul__(self, o): return _arith("mul", self, o)
    def __rmul__(self, o): return _arith("mul", self, o, reflected=True)
    def __truediv__(self, o): return _truediv(self, o)
    def __rtruediv__(self, o): return _truediv(self, o, reflected=True)
    def __floordiv__(self, o): return _floordiv(self, o)
    def __rfloordiv__(self, o): return _floordiv(self, o, reflected=True)
    def __mod__(self, o): return _mod(self, o)
    def __rmod__(self, o): return _mod(self, o, reflected=True)
    def __pow__(self, o, mod=None):
        if mod is not None:
            return NotImplemented
        return _arith("pow", self, o)
    def __rpow__(self, o): return _arith("pow", self, o, reflected=True)
    def __lt__(self, o): return _compare("lt", self, o)
    def __le__(self, o): return _compare("le", self, o)
    def __gt__(self, o): return _compare("gt", self, o)
    def __ge__(self, o): return _compare("ge", self, o)
    def __eq__(self, o): return _compare("eq", self, o)
    def __ne__(self, o): return _compare("ne", self, o)
    def __neg__(self): return neg(self)
    def __pos__(self): return self
    def __abs__(self): return abs(self)
    def __invert__(self):
        if not self.dtype.is_bool:
            raise TypeError("~ is logical not and needs a bool tensor; got %s" % self.dtype.name)
        return logical_not(self)
    def __and__(self, o): return _logical("logical_and", self, o)
    __rand__ = __and__
    def __or__(self, o): return _logical("logical_or", self, o)
    __ror__ = __or__
    def __xor__(self, o): return _logical("ne", self, o)
    __rxor__ = __xor__


_attach(_Operators)


# ---------------------------------------------------------------- complex

def complex(real, imag):
    """complex64 from real and imaginary parts (rlx_complex): real tensors
    or scalars of any real dtype, broadcast together (torch.complex);
    complex128 when either part is float64."""
    re, im = _tt(real), _tt(imag)
    _clear()
    return _wrap(_lib.rlx_complex(re._h, im._h))


def real(x):
    """The real part (rlx_real): float32 of complex64 (float64 of
    complex128), x itself if real."""
    return _tt(x).real


def imag(x):
    """The imaginary part (rlx_imag): float32 of complex64 (float64 of
    complex128), zeros if real."""
    return _tt(x).imag


def conj(x):
    """The complex conjugate (rlx_conj); a real x as it is."""
    x = _tt(x)
    _clear()
    return _wrap(_lib.rlx_conj(x._h))


conjugate = conj
