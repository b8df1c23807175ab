"""wengert.numpy: NumPy's names and signatures, differentiable by every wengert engine.

Use it as ``import wengert.numpy as wnp`` -- or keep calling plain NumPy: on traced values,
``np.sin(x)``, ``np.sum(x, axis=0)`` and ``x @ W`` dispatch here. A NumPy function that has no
derivative rule in wengert raises an error naming it instead of silently dropping the derivative.
"""

import numpy as _np
from numpy import (  # noqa: F401 - constants and dtypes, as in NumPy
    bool_,
    complex64,
    complex128,
    dtype,
    e,
    float16,
    float32,
    float64,
    inf,
    int8,
    int16,
    int32,
    int64,
    nan,
    ndarray,
    newaxis,
    pi,
    random,  # noqa: F401 - NumPy's generator, for test data
    uint8,
)

from wengert.numpy._functions import (
    amax,
    amin,
    array,
    array_split,
    asarray,
    atleast_1d,
    atleast_2d,
    broadcast_to,
    clip,
    concatenate,
    dot,
    einsum,
    expand_dims,
    flip,
    fliplr,
    flipud,
    hstack,
    inner,
    matmul,
    max,
    mean,
    min,
    moveaxis,
    outer,
    prod,
    ravel,
    repeat,
    reshape,
    split,
    squeeze,
    stack,
    std,
    sum,
    swapaxes,
    tensordot,
    tile,
    transpose,
    var,
    vstack,
    where,
)
from wengert.ops.elementwise import (
    abs,
    absolute,
    add,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    cbrt,
    ceil,
    cos,
    cosh,
    divide,
    exp,
    exp2,
    expm1,
    floor,
    hypot,
    log,
    log1p,
    log2,
    log10,
    maximum,
    minimum,
    multiply,
    negative,
    positive,
    power,
    reciprocal,
    rint,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
    trunc,
)
from wengert.ops.indexing import index_add, index_update  # functional x[idx] = v / np.add.at
from wengert.ops.nondiff import (
    allclose,
    argmax,
    argmin,
    argsort,
    array_equal,
    count_nonzero,
    empty_like,
    equal,
    flatnonzero,
    floor_divide,
    full_like,
    greater,
    greater_equal,
    isclose,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    mod,
    ndim,
    nonzero,
    not_equal,
    ones_like,
    remainder,
    shape,
    signbit,
    size,
    zeros_like,
)

# Constructors: nothing to differentiate, so NumPy's own functions.
zeros = _np.zeros
ones = _np.ones
empty = _np.empty
full = _np.full
eye = _np.eye
identity = _np.identity
arange = _np.arange
linspace = _np.linspace
logspace = _np.logspace

DIFFERENTIABLE = [
    "abs", "absolute", "add", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2",
    "arctanh", "cbrt", "ceil", "cos", "cosh", "divide", "exp", "exp2", "expm1", "floor", "hypot",
    "log", "log1p", "log2", "log10", "maximum", "minimum", "multiply", "negative", "positive",
    "power", "reciprocal", "rint", "sign", "sin", "sinh", "sqrt", "square", "subtract", "tan",
    "tanh", "true_divide", "trunc", "clip", "where",
    "sum", "prod", "max", "min", "amax", "amin", "mean", "var", "std",
    "dot", "inner", "outer", "matmul", "tensordot", "einsum",
    "reshape", "ravel", "transpose", "swapaxes", "moveaxis", "expand_dims", "squeeze",
    "broadcast_to", "concatenate", "stack", "hstack", "vstack", "atleast_1d", "atleast_2d",
    "split", "array_split", "tile", "repeat", "flip", "fliplr", "flipud", "array", "asarray",
]
DIFFERENTIABLE += ["index_update", "index_add"]  # NumPy's x[idx] = v and np.add.at, as new arrays
NOT_DIFFERENTIABLE = [
    "allclose", "argmax", "argmin", "argsort", "array_equal", "count_nonzero", "empty_like",
    "equal", "flatnonzero", "floor_divide", "full_like", "greater", "greater_equal", "isclose",
    "isfinite", "isinf", "isnan", "less", "less_equal", "logical_and", "logical_not",
    "logical_or", "logical_xor", "mod", "ndim", "nonzero", "not_equal", "ones_like", "remainder",
    "shape", "signbit", "size", "zeros_like",
    "zeros", "ones", "empty", "full", "eye", "identity", "arange", "linspace", "logspace",
]
__all__ = DIFFERENTIABLE + NOT_DIFFERENTIABLE


def __getattr__(name):
    if hasattr(_np, name):
        raise AttributeError(
            f"wengert.numpy has no '{name}': numpy.{name} has no derivative rule in wengert. "
            f"Compose it from wengert.numpy functions, or define it with wg.primitive and "
            f"wg.defvjp/wg.defjvp (see docs/adding-a-primitive.md).")
    raise AttributeError(f"module 'wengert.numpy' has no attribute '{name}'")
