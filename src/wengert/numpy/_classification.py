"""Every public function of ``numpy``, ``numpy.linalg`` and ``numpy.fft``, classified in one place.

Each name is exactly one of:

* ``DIFFERENTIABLE`` -- wengert.numpy has it, with derivative rules (a primitive, or composed from them);
* ``ZERO`` -- wengert.numpy has it and its derivative is zero almost everywhere, for the reason
  given (piecewise constant, or a constant built from shapes); never a function with a slope;
* ``INTEGER`` -- its result is integer-, boolean-, string- or dtype-valued (indices, masks,
  counts, shapes), so it carries no derivative; traced arguments are read by value;
* ``UNSUPPORTED`` -- a traced argument raises an error naming the function and saying what to
  write instead (the note); wengert.numpy still has the name, NumPy's own function, for plain
  arguments.

``wengert.numpy``'s public lists, its aliases, and the dispatch tables of plain NumPy calls on
traced values (``np.sin(x)``) are all derived from this table; ``tests/numpy/test_classification.py``
enumerates NumPy's own namespaces and fails on any name missing here. An alias (``acos``) names
the function whose rules it shares (``arccos``).
"""

from collections import namedtuple

__all__ = ["DIFFERENTIABLE", "ZERO", "INTEGER", "UNSUPPORTED", "Entry", "TABLE", "NAMESPACES",
           "names", "entry", "missing_attribute", "PLAIN_VALUES_ONLY"]

DIFFERENTIABLE = "differentiable"
ZERO = "zero derivative almost everywhere"
INTEGER = "integer-valued"
UNSUPPORTED = "not supported"

NAMESPACES = ("numpy", "numpy.linalg", "numpy.fft")

Entry = namedtuple("Entry", ["kind", "note", "alias_of"])
"""``kind``: one of the four; ``note``: why (ZERO) or what to write instead (UNSUPPORTED);
``alias_of``: for an alias, the name (same namespace) whose implementation and rules it shares."""

TABLE = {namespace: {} for namespace in NAMESPACES + ("wengert.numpy",)}


def _add(namespace, kind, names_, note=""):
    for name in names_.split():
        alias_of = None
        if "=" in name:
            name, alias_of = name.split("=")
        if name in TABLE[namespace]:
            raise ValueError(f"{namespace}.{name} is classified twice")
        TABLE[namespace][name] = Entry(kind, note, alias_of)


def names(namespace, *kinds):
    """The names of ``namespace`` of the given kinds, in table order."""
    return [n for n, e in TABLE[namespace].items() if e.kind in kinds]


def entry(namespace, name):
    """The table's entry for ``namespace.name``, or None."""
    return TABLE.get(namespace, {}).get(name)


def missing_attribute(namespace, name):
    """The AttributeError for ``wengert.<namespace>.<name>`` (``numpy.fft``, ``hfft``): what NumPy's
    function lacks and what to write instead, where the table knows."""
    ours = "wengert." + namespace
    found = entry(namespace, name)
    if found is not None and found.kind == UNSUPPORTED:
        return AttributeError(
            f"{ours} has no '{name}': {namespace}.{name} has no derivative rule in wengert; "
            f"{found.note}. Or define it with wg.primitive and wg.defvjp/wg.defjvp "
            f"(see docs/adding-a-primitive.md).")
    return AttributeError(f"module '{ours}' has no attribute '{name}'")


# -- numpy: differentiable -------------------------------------------------------------------------
_add("numpy", DIFFERENTIABLE, """
    abs absolute add arccos arccosh arcsin arcsinh arctan arctan2 arctanh cbrt cos cosh divide exp
    exp2 expm1 hypot log log1p log2 log10 maximum minimum multiply negative positive power
    reciprocal sin sinh sqrt square subtract tan tanh true_divide remainder mod fmod divmod
    clip where real imag conjugate conj angle deg2rad rad2deg radians degrees logaddexp logaddexp2
    sinc fmax fmin fabs float_power nan_to_num
    sum prod max min amax amin mean var std cumsum cumprod cumulative_sum cumulative_prod diff
    ediff1d nancumsum nancumprod trapezoid nansum nanprod nanmax nanmin nanmean nanvar nanstd ptp
    average quantile percentile median
    dot inner outer matmul tensordot einsum vdot kron cross matvec vecmat vecdot
    reshape ravel transpose swapaxes moveaxis rollaxis expand_dims squeeze broadcast_to
    broadcast_arrays concatenate stack hstack vstack dstack column_stack unstack split array_split
    hsplit vsplit dsplit tile repeat flip fliplr flipud roll rot90 pad append
    take take_along_axis sort partition select diagonal trace diag diagflat tril triu
    atleast_1d atleast_2d atleast_3d meshgrid array asarray copy astype full full_like
    linspace logspace
    gradient interp convolve correlate polyval polyfit vander copysign real_if_close
    acos=arccos acosh=arccosh asin=arcsin asinh=arcsinh atan=arctan atan2=arctan2 atanh=arctanh
    pow=power concat=concatenate permute_dims=transpose matrix_transpose
    row_stack=vstack asanyarray=asarray ascontiguousarray asfortranarray
""")
_add("numpy", ZERO, "floor ceil rint trunc fix round around",
     "piecewise constant: rounds to integers, so it jumps at them and is flat in between")
_add("numpy", ZERO, "sign", "piecewise constant: -1, 0 or 1")
_add("numpy", ZERO, "floor_divide", "piecewise constant: the integer quotient floor(x / y)")
_add("numpy", ZERO, "heaviside", "piecewise constant: 0, h0 or 1; h0 is chosen only where x == 0")
_add("numpy", ZERO, "spacing", "piecewise constant: the gap to the next float, a power of two")
_add("numpy", ZERO, "zeros_like ones_like empty_like", "a constant: only its argument's shape is read")
_add("numpy", ZERO, "zeros ones empty eye identity tri bartlett blackman hamming hanning",
     "a constant built from integers and shapes")

# -- numpy: integer-, boolean- or metadata-valued ----------------------------------------------------
_add("numpy", INTEGER, """
    equal not_equal less less_equal greater greater_equal logical_and logical_or logical_xor
    logical_not isnan isinf isfinite isposinf isneginf signbit iscomplex isreal iscomplexobj
    isrealobj isclose allclose array_equal array_equiv isin isnat all any
    argmax argmin argsort argpartition nanargmax nanargmin lexsort nonzero flatnonzero argwhere
    count_nonzero searchsorted digitize shape ndim size
    indices tril_indices triu_indices diag_indices mask_indices tril_indices_from
    triu_indices_from diag_indices_from ravel_multi_index unravel_index ix_
    bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_invert invert bitwise_left_shift
    bitwise_right_shift left_shift right_shift bitwise_count gcd lcm packbits unpackbits
    broadcast_shapes result_type promote_types can_cast min_scalar_type common_type mintypecode
    isdtype issubdtype typename isscalar iterable isfortran may_share_memory shares_memory
    einsum_path array2string array_repr array_str base_repr binary_repr format_float_positional
    format_float_scientific datetime_as_string datetime_data busday_count busday_offset is_busday
""")

# -- numpy: not supported on traced values ------------------------------------------------------------
_DETACH = "if no derivative is wanted, call it on wg.stop_gradient(x), a plain NumPy array"
_add("numpy", UNSUPPORTED, "arange geomspace",
     "constructors from plain numbers; with traced endpoints write start + (stop - start) * "
     "wnp.linspace(0.0, 1.0, num)")
_add("numpy", UNSUPPORTED, "ldexp", "write x * 2.0 ** n")
_add("numpy", UNSUPPORTED, "frexp", "the mantissa is x / 2.0 ** e with e = np.frexp(wg.stop_gradient(x))[1]")
_add("numpy", UNSUPPORTED, "modf", "write x - wnp.trunc(x) and wnp.trunc(x)")
_add("numpy", UNSUPPORTED, "nextafter", "the result equals x up to one ulp: use x itself")
_add("numpy", UNSUPPORTED, "i0", "use wengert.scipy.special.i0")
_add("numpy", UNSUPPORTED, "cov corrcoef", "compose it from wnp.mean and wnp.matmul")
_add("numpy", UNSUPPORTED, "unwrap", "compose it from wnp.diff, wnp.round and wnp.cumsum")
_add("numpy", UNSUPPORTED, "nanmedian nanquantile nanpercentile",
     "apply wnp.median or wnp.quantile to the non-nan values (x[~wnp.isnan(x)])")
_add("numpy", UNSUPPORTED, "block", "use wnp.concatenate and wnp.stack")
_add("numpy", UNSUPPORTED, "choose", "use wnp.select or wnp.where")
_add("numpy", UNSUPPORTED, "compress extract", "index with the boolean mask: x[mask]")
_add("numpy", UNSUPPORTED, "delete insert", "use slices and wnp.concatenate")
_add("numpy", UNSUPPORTED, "resize", "use wnp.tile and wnp.reshape")
_add("numpy", UNSUPPORTED, "trim_zeros", "slice x with indices computed from wg.stop_gradient(x)")
_add("numpy", UNSUPPORTED, "sort_complex", "use wnp.sort on the real part, or wnp.take")
_add("numpy", UNSUPPORTED, "poly polyadd polysub polymul polydiv polyder polyint roots",
     "compose polynomials from wnp.polyval, wnp.convolve, wnp.vander and wnp.matmul")
_add("numpy", UNSUPPORTED, "piecewise", "use wnp.where or wnp.select")
_add("numpy", UNSUPPORTED, "apply_along_axis apply_over_axes",
     "write the loop, or vectorise the function with wengert.numpy calls")
_add("numpy", UNSUPPORTED, "kaiser", "compose it from wengert.scipy.special.i0")
_add("numpy", UNSUPPORTED, "bincount", "with traced weights use wnp.index_add(wnp.zeros(n), x, w)")
_add("numpy", UNSUPPORTED, "histogram histogram2d histogramdd histogram_bin_edges unique "
     "unique_all unique_counts unique_inverse unique_values intersect1d union1d setdiff1d "
     "setxor1d asarray_chkfinite require", _DETACH)
_add("numpy", UNSUPPORTED, "copyto place put putmask put_along_axis fill_diagonal",
     "they write into an array in place: use x.at[idx].set(v), wnp.index_update or wnp.where")
_add("numpy", UNSUPPORTED, "save savez savez_compressed savetxt",
     "save wg.stop_gradient(x), a plain NumPy array")
_add("numpy", UNSUPPORTED, """
    load loadtxt genfromtxt fromfile frombuffer fromstring fromregex fromiter fromfunction
    frompyfunc from_dlpack nested_iters asmatrix bmat""",
     "these build arrays from files, buffers, strings or Python callables: use NumPy's own "
     "function on plain values")
_add("numpy", UNSUPPORTED, """
    seterr geterr seterrcall geterrcall setbufsize getbufsize get_printoptions set_printoptions
    printoptions show_config show_runtime get_include info test""",
     "NumPy's settings and information: they take no arrays to differentiate")

# -- numpy.linalg and numpy.fft ----------------------------------------------------------------------
_add("numpy.linalg", DIFFERENTIABLE, """
    inv solve det slogdet cholesky eigh eigvalsh eig eigvals svd svdvals qr pinv norm vector_norm
    matrix_norm matrix_power lstsq cond multi_dot matrix_transpose tensorinv tensorsolve matmul
    tensordot outer vecdot diagonal trace cross""")
_add("numpy.linalg", INTEGER, "matrix_rank")
_add("numpy.linalg", UNSUPPORTED, "test", "NumPy's own test runner")
_add("numpy.fft", DIFFERENTIABLE, """
    fft ifft fft2 ifft2 fftn ifftn rfft irfft rfft2 irfft2 rfftn irfftn fftshift ifftshift
    fftfreq rfftfreq""")
_add("numpy.fft", UNSUPPORTED, "hfft ihfft",
     "write hfft(a, n) as wnp.fft.irfft(wnp.conj(a), n) * n")
_add("numpy.fft", UNSUPPORTED, "test", "NumPy's own test runner")

# -- wengert.numpy's own additions --------------------------------------------------------------------
_add("wengert.numpy", DIFFERENTIABLE, "index_update index_add")

PLAIN_VALUES_ONLY = tuple(names("numpy", UNSUPPORTED))
"""Unsupported names that wengert.numpy still provides, NumPy's own functions for plain arguments
(a traced argument raises the error saying what to write instead): code written for NumPy runs
unchanged as long as it does not differentiate through them."""


class UnsupportedNumpyFunction(TypeError):
    """A NumPy function was called on a traced value and wengert has no derivative rule for it."""


def unsupported(qualname, extra=""):
    """The error for NumPy's ``qualname`` (``interp``, ``fft.hfft``, ``scipy.special.x``) called on
    a traced value; it says what to write instead where the classification table knows."""
    if qualname.startswith("scipy."):
        ours = "wengert.scipy.special"
    else:
        qualname, ours = "numpy." + qualname, "wengert.numpy"
    namespace, _, name = qualname.rpartition(".")
    found = entry(namespace, name)
    advice = f" To go on: {found.note}." if found is not None and found.note else ""
    plain = "" if "stop_gradient" in advice else f" {NO_DERIVATIVE}"
    return UnsupportedNumpyFunction(
        f"{qualname} was called on a traced wengert value, and wengert has no derivative "
        f"rule for it{extra}.{advice} Otherwise use a {ours} function that has one, compose it "
        f"from them, or define it with wg.primitive + wg.defvjp (docs/adding-a-primitive.md).{plain}")


NO_DERIVATIVE = ("If no derivative is wanted, pass wg.stop_gradient(x), a plain NumPy array, in place of x "
                 "(inside a transform and on a Tensor alike; x.detach() is still a Tensor).")
