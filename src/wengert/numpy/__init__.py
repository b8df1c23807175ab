"""wengert.numpy: NumPy's names and signatures, differentiable by every wengert engine.

Use it as ``import wengert.numpy as wnp`` -- or keep calling plain NumPy: on traced values,
``np.sin(x)``, ``np.sum(x, axis=0)`` and ``x @ W`` dispatch here. A NumPy function that has no
derivative rule in wengert raises an error naming it instead of silently dropping the derivative.
"""
# mypy: implicit-reexport
# (its public names are imported from the modules that define them, and __all__ is computed from the
# classification table: type checkers see them as exported, also under --strict)

import sys as _sys

import numpy as _np
from numpy import (  # noqa: F401 - constants and dtypes, as in NumPy
    bool_,
    complex64,
    complex128,
    dtype,
    e,
    errstate,
    finfo,
    float16,
    float32,
    float64,
    iinfo,
    inf,
    int8,
    int16,
    int32,
    int64,
    nan,
    ndarray,
    newaxis,
    pi,
    random,  # NumPy's generator, for test data; also importable as wengert.numpy.random (below)
    uint8,
)

from wengert.core import frontend as _frontend
from wengert.core.extend import defbatch as _defbatch
from wengert.core.extend import nondiff_primitive as _nondiff_primitive
from wengert.core.trace import contains_box as _contains_box
from wengert.core.trace import unbox_all as _unbox_all
from wengert.numpy import _classification as _table
from wengert.numpy import _dispatch, fft, linalg
from wengert.numpy._arrays import (
    append,
    argpartition,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    broadcast_arrays,
    column_stack,
    cross,
    diag,
    diag_indices,
    diagflat,
    diagonal,
    digitize,
    dsplit,
    dstack,
    full_like,
    hsplit,
    indices,
    kron,
    matvec,
    meshgrid,
    pad,
    partition,
    roll,
    rollaxis,
    rot90,
    searchsorted,
    select,
    sort,
    take,
    take_along_axis,
    trace,
    tri,
    tril,
    tril_indices,
    triu,
    triu_indices,
    unstack,
    vdot,
    vecmat,
    vsplit,
)
from wengert.numpy._creation import (
    ascontiguousarray,
    asfortranarray,
    astype,
    copy,
    empty_like,
    full,
    linspace,
    logspace,
    ones_like,
    zeros_like,
)
from wengert.numpy._elementwise import (
    angle,
    around,
    conj,
    conjugate,
    deg2rad,
    degrees,
    fabs,
    fix,
    float_power,
    fmax,
    fmin,
    imag,
    iscomplex,
    iscomplexobj,
    isneginf,
    isposinf,
    isreal,
    isrealobj,
    logaddexp,
    logaddexp2,
    nan_to_num,
    rad2deg,
    radians,
    real,
    round,
    sinc,
)
from wengert.numpy._functions import (
    amax,
    amin,
    array,
    array_split,
    asarray,
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
from wengert.numpy._layout import copy_in_order as _copy_in_order  # x.copy() (order='C')
from wengert.numpy._numerical import (
    convolve,
    copysign,
    correlate,
    gradient,
    interp,
    polyfit,
    polyval,
    real_if_close,
    vander,
)
from wengert.numpy._reductions import (
    average,
    cumprod,
    cumsum,
    cumulative_prod,
    cumulative_sum,
    diff,
    ediff1d,
    median,
    nanargmax,
    nanargmin,
    nancumprod,
    nancumsum,
    nanmax,
    nanmean,
    nanmin,
    nanprod,
    nanstd,
    nansum,
    nanvar,
    percentile,
    ptp,
    quantile,
    trapezoid,
)
from wengert.rules.elementwise import (
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
from wengert.rules.indexing import index_add, index_update  # functional x[idx] = v / np.add.at
from wengert.rules.modular import divmod_ as divmod  # noqa: A004 - NumPy's name
from wengert.rules.modular import floor_divide, fmod, mod, remainder
from wengert.rules.nondiff import (
    allclose,
    argmax,
    argmin,
    argsort,
    argwhere,
    array_equal,
    count_nonzero,
    equal,
    flatnonzero,
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
    ndim,
    nonzero,
    not_equal,
    shape,
    signbit,
    size,
)
from wengert.rules.nondiff import one_example as _one_example

# ``import wengert.numpy.random as npr`` (HIPS autograd's ``autograd.numpy.random``) gives NumPy's own
# random module, which is what ``wengert.numpy.random`` is: random numbers carry no derivative.
_sys.modules[__name__ + ".random"] = random

# Constructors from shapes: NumPy's own (a traced shape is refused by its __index__).
zeros = _np.zeros
ones = _np.ones
empty = _np.empty
eye = _np.eye
identity = _np.identity
bartlett = _np.bartlett
blackman = _np.blackman
hamming = _np.hamming
hanning = _np.hanning
matrix_transpose = linalg.matrix_transpose
vecdot = linalg.vecdot


_SHAPE_AND_DTYPE_ONLY = frozenset(("result_type", "iscomplexobj", "isrealobj", "min_scalar_type", "can_cast",
                                   "common_type", "shape", "ndim", "size"))


def _derive_names():
    """Aliases, and NumPy's own functions for the integer-valued and zero-derivative names not
    defined above; then the public lists. Everything here is read off the classification table."""
    namespace = globals()
    for name, entry in _table.TABLE["numpy"].items():
        if entry.alias_of is not None:
            namespace[name] = namespace[entry.alias_of]
        elif (entry.kind in (_table.INTEGER, _table.ZERO) and name not in namespace
              and hasattr(_np, name)):
            namespace[name] = _nondiff_primitive(_reading_values(getattr(_np, name)), name)
            if name in _SHAPE_AND_DTYPE_ONLY:  # under wg.vmap, one example answers for all
                _defbatch(namespace[name], _one_example)
    for name in _table.PLAIN_VALUES_ONLY:
        namespace[name] = _plain_values_only(name)
    present = [n for n in _table.TABLE["numpy"] if hasattr(_np, n)]
    differentiable = [n for n in present if _table.TABLE["numpy"][n].kind == _table.DIFFERENTIABLE]
    differentiable += _table.names("wengert.numpy", _table.DIFFERENTIABLE)
    no_derivative = [n for n in present if _table.TABLE["numpy"][n].kind in (_table.ZERO, _table.INTEGER)]
    return differentiable, no_derivative


def _reading_values(numpy_fun):
    """``numpy_fun`` on the values of its arguments, traced ones inside lists and tuples included
    (``np.lexsort((x, -x))``): its result carries no derivative."""

    def on_values(*args, **kwargs):
        return numpy_fun(*_unbox_all(args), **_unbox_all(kwargs))

    on_values.__name__ = on_values.__qualname__ = numpy_fun.__name__
    on_values.__doc__ = f"numpy.{numpy_fun.__name__}: no derivative."
    return on_values


def _plain_values_only(name):
    """NumPy's ``name`` for plain arguments; traced ones raise the error naming it."""
    numpy_fun = getattr(_np, name)

    def constructor(*args, **kwargs):
        if _contains_box(args) or _contains_box(kwargs):
            raise _table.unsupported(name)
        return numpy_fun(*args, **kwargs)

    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = f"numpy.{name}, for plain arguments (traced ones are refused)."
    return constructor


DIFFERENTIABLE, NOT_DIFFERENTIABLE = _derive_names()
"""Public names with derivative rules; and those whose result carries none (zero derivative almost
everywhere, or integer-, boolean- or metadata-valued). See wengert.numpy._classification."""
__all__ = DIFFERENTIABLE + NOT_DIFFERENTIABLE + list(_table.PLAIN_VALUES_ONLY)


def __getattr__(name):
    entry = _table.entry("numpy", name)
    if (entry is None or entry.kind != _table.UNSUPPORTED) and hasattr(_np, name):  # a newer NumPy's
        raise AttributeError(
            f"wengert.numpy has no '{name}': numpy.{name} has no derivative rule in wengert. "
            f"Compose it from wengert.numpy functions, or define it with wg.primitive and "
            f"wg.defvjp/wg.defjvp (see docs/adding-a-primitive.md).")
    raise _table.missing_attribute("numpy", name)


def _install():
    """Answer NumPy's protocols and ndarray's methods on traced values with this module's functions."""
    import sys

    _dispatch.install(sys.modules[__name__])
    _frontend.install(sys.modules[__name__], _dispatch)


_install()
