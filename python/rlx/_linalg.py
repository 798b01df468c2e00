"""Matrix products (matmul, einsum, linear) and solvers (solve, inv)."""

from ._base import _lib, _clear, _act
from ._tensor import _wrap, _tt, _opt, _h, _apply, _attach, _handles
from ._elementwise import _operand


def matmul(a, b):
    """NumPy @ (1-D operands, broadcast batch dims)."""
    return _apply(_lib.rlx_matmul, a, b)


def matmul_t(a, b):
    """a @ swap_last_two(b)."""
    return _apply(_lib.rlx_matmul_t, a, b)


def einsum(equation, *operands):
    """NumPy einsum: einsum("ij,jk->ik", a, b); implicit output, "...",
    diagonals ("ii->i") and size-1 broadcasting as NumPy. Contractions are
    batched matmuls."""
    if not isinstance(equation, str):
        raise TypeError("rlx.einsum: the equation must be a str, got %s" % type(equation).__name__)
    ts, arr = _handles(operands)
    _clear()
    return _wrap(_lib.rlx_einsum(equation.encode(), arr, len(ts)))


def linear(x, weight, bias=None, act=None):
    """x @ weight.T + bias with weight [out, in]; act (None, 'relu', 'gelu',
    'gelu_tanh', 'silu', 'tanh', 'sigmoid') fuses an activation."""
    x, w = _tt(x), _tt(weight)
    b = _opt(bias)
    _clear()
    if act is None:
        return _wrap(_lib.rlx_linear(x._h, w._h, _h(b)))
    return _wrap(_lib.rlx_linear_act(x._h, w._h, _h(b), _act(act)))


def linear_act(x, weight, bias, act):
    x, w = _tt(x), _tt(weight)
    b = _opt(bias)
    _clear()
    return _wrap(_lib.rlx_linear_act(x._h, w._h, _h(b), _act(act)))


def solve(a, b):
    """NumPy linalg.solve (batched); a singular matrix raises at realization."""
    a, b = _tt(a), _tt(b)
    _clear()
    return _wrap(_lib.rlx_solve(a._h, b._h))


def inv(a):
    a = _tt(a)
    _clear()
    return _wrap(_lib.rlx_inv(a._h))


class _MatmulOperators:
    """Tensor @ Tensor, array @ Tensor."""
    def __matmul__(self, o):
        o = _operand(o)
        return NotImplemented if o is NotImplemented else matmul(self, o)
    def __rmatmul__(self, o):
        o = _operand(o)
        return NotImplemented if o is NotImplemented else matmul(o, self)


_attach(_MatmulOperators)
