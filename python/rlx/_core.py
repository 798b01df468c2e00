"""The public namespace of rlx, assembled from the modules that define it
(each one family of operations), and what spans them: every operation as a
Tensor method, and the NumPy ufuncs that stay lazy on Tensors.

  _base        library handle, errors, enums, constants, argument helpers
  _dtypes      dtypes and scalar promotion
  _tensor      Tensor, tensor(), from_numpy(), cast()
  _create      constants, ranges, random tensors, placeholders
  _elementwise unary/binary math, comparisons, division, where, clamp
  _reduce      reductions
  _shape       views and movement
  _indexing    x[key]
  _linalg      matmul, linear, solve, inv
  _nn          softmax, norms, losses, attention, conv, pooling, ...
  _signal      FFTs
  _sort        sort, argsort, topk, multinomial
  _program     realize(), compiled programs, grad
  _control     threads, options, statistics, version
  _checkpoint  safetensors, .npy and .npz files
"""

import numpy as np

from ._base import *  # noqa: F401,F403
from ._dtypes import *  # noqa: F401,F403
from ._dtypes import _dtype  # noqa: F401  (pickled DTypes name rlx._core._dtype)
from ._tensor import *  # noqa: F401,F403
from ._tensor import _UFUNCS, _tt
from ._base import _builtin_bool
from ._create import *  # noqa: F401,F403
from ._elementwise import *  # noqa: F401,F403
from ._elementwise import _UNARY, _operand, _binary_tt
from ._reduce import *  # noqa: F401,F403
from ._shape import *  # noqa: F401,F403
from ._indexing import *  # noqa: F401,F403
from ._linalg import *  # noqa: F401,F403
from ._nn import *  # noqa: F401,F403
from ._signal import *  # noqa: F401,F403
from ._sort import *  # noqa: F401,F403
from ._program import *  # noqa: F401,F403
from ._control import *  # noqa: F401,F403
from ._checkpoint import *  # noqa: F401,F403


# ----------------------------------------------------------- Tensor methods

def _method(fn):
    def m(self, *a, **kw):
        return fn(self, *a, **kw)
    m.__name__ = m.__qualname__ = fn.__name__
    m.__doc__ = fn.__doc__
    return m


for _name in (_UNARY + ["gelu", "negative", "absolute", "arctan", "reciprocal", "hardswish", "hardsigmoid",
                        "logsigmoid",
                        "add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2", "rem", "fmod",
                        "subtract", "multiply", "power", "arctan2", "true_divide", "divide", "floor_divide",
                        "remainder", "eq", "ne", "lt", "le", "gt", "ge", "equal", "not_equal", "less",
                        "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_xor",
                        "rsub", "rdiv",
                        "masked_fill", "clamp", "clamp_min", "clamp_max", "clip",
                        "sum", "mean", "max", "min", "prod", "var", "std", "norm", "amax", "amin", "argmax",
                        "argmin", "logsumexp", "cumsum", "sum_all", "mean_all", "all", "any",
                        "sort", "argsort", "topk",
                        "reshape", "view", "transpose", "permute", "swapaxes", "swapdims", "moveaxis", "t",
                        "broadcast_to", "expand", "flatten", "ravel", "unsqueeze", "expand_dims", "squeeze",
                        "narrow", "slice", "select", "split", "chunk",
                        "tile", "flip", "roll", "pad", "gather", "take", "index_select", "scatter_add",
                        "scatter", "index_add", "contiguous",
                        "stop_gradient", "detach", "cast",
                        "matmul", "matmul_t", "linear", "linear_act", "linear_q8", "solve", "inv",
                        "softmax", "log_softmax", "layer_norm", "rms_norm", "batch_norm", "group_norm", "instance_norm",
                        "dropout", "cross_entropy",
                        "softmax_cross_entropy_with_logits", "rope", "conv1d", "conv2d", "conv_transpose1d",
                        "conv_transpose2d", "max_pool2d", "avg_pool2d",
                        "fft", "ifft", "fft_axis", "fft_c", "conj", "conjugate", "scaled_matmul", "synth_matmul", "spline_activation",
                        "dump_dot", "zeros_like", "ones_like", "full_like"]):
    setattr(Tensor, _name, _method(globals()[_name]))
del _name

_UFUNCS.update({
    np.add: add, np.subtract: sub, np.multiply: mul, np.true_divide: true_divide,
    np.floor_divide: floor_divide, np.remainder: remainder, np.fmod: rem, np.power: pow,
    np.maximum: maximum, np.minimum: minimum, np.arctan2: atan2, np.equal: eq, np.not_equal: ne,
    np.less: lt, np.less_equal: le, np.greater: gt, np.greater_equal: ge, np.logical_and: logical_and,
    np.logical_or: logical_or, np.logical_xor: logical_xor, np.logical_not: logical_not, np.negative: neg,
    np.positive: lambda x: _tt(x), np.absolute: abs, np.exp: exp, np.log: log, np.sqrt: sqrt, np.sin: sin,
    np.cos: cos, np.tan: tan, np.arctan: atan, np.tanh: tanh, np.sign: sign, np.floor: floor, np.ceil: ceil,
    np.rint: round, np.matmul: matmul,
})


def _bitwise(logical, npfn):
    def op(a, b):
        ta, tb = _operand(a), _operand(b)
        if _all_bool(ta) and _all_bool(tb):
            return _binary_tt(logical, _tt(ta), _tt(tb))
        args = [v.numpy() if isinstance(v, Tensor) else v for v in (a, b)]
        return npfn(*args)
    return op


def _all_bool(v):
    return (isinstance(v, Tensor) and v.dtype.is_bool) or isinstance(v, _builtin_bool)


_UFUNCS[np.bitwise_and] = _bitwise("logical_and", np.bitwise_and)
_UFUNCS[np.bitwise_or] = _bitwise("logical_or", np.bitwise_or)
_UFUNCS[np.bitwise_xor] = _bitwise("ne", np.bitwise_xor)
_UFUNCS[np.invert] = lambda x: ~_tt(x) if _tt(x).dtype.is_bool else np.invert(_tt(x).numpy())


def _where_method(self, condition, other):
    """PyTorch's x.where(condition, other) = rlx.where(condition, x, other)."""
    return where(condition, self, other)


Tensor.where = _where_method
