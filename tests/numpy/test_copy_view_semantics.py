"""Copies are copies and views are views: every wengert.numpy function, and every method and property of
a traced value, shares memory with its argument exactly where NumPy's does.

The class of bug: a function whose result is a view of its argument in NumPy but a new array in
wengert (or the reverse: ``wnp.array(x)`` once returned ``x`` itself) gives a wrong value *and* a wrong
derivative, without an error, as soon as the program writes into one of the two (``y[0] = 5.0``,
``y *= 3.0``). So for each function, with an example call from :data:`CALLS` (or derived from its
ufunc's arity), the test runs two programs -- write into the result then read the argument, and write
into the argument then read the result -- under plain NumPy (the reference: whether the two share
memory is whatever NumPy does at test time, never written down here) and under ``wg.grad`` (the
tape), and asks for NumPy's value and a gradient equal to central finite differences of the NumPy
program. A refusal (an error naming a view or the function) is accepted only where NumPy's result
does share its argument's memory, and a NumPy error (a read-only view) must be an error here too.

The tables are checked against the namespace: a public name of ``wengert.numpy`` (``linalg``, ``fft``)
with a derivative, or a public method of a traced value, that has neither an example call nor a
reason in :data:`NOT_ARRAY_TO_ARRAY`, fails :func:`test_every_function_has_an_example_call`; so a new
function cannot escape the check. ``wg.compile`` and ``wg.source_grad`` run the same programs
(refusing is allowed, a wrong number is not); their sweep over every call is in the slow group.
"""

import functools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import finite_differences, function_from_text
from wengert.api.tensor import Tensor
from wengert.engines.box import ArrayBox
from wengert.numpy import _classification as table

# -- the arguments: the plain array x that is differentiated, and the statement making ``a`` of it -----

M = np.array([[0.31, 0.72, 0.47], [0.83, 0.24, 0.58]])  # 2 x 3, in (0, 1): every ufunc's domain but one
S = np.array([[2.1, 0.3, 0.2], [0.3, 1.7, 0.4], [0.2, 0.4, 1.9]])  # symmetric positive definite
V = np.array([0.31, 0.72, 0.45, 0.83, 0.24, 0.57])
T = np.arange(12.0).reshape(2, 3, 2) / 13.0 + 0.05
C = np.stack([M, M[::-1] - 0.3])  # a complex 2 x 3 array: x[0] + 1j * x[1]

INPUTS = {"m": M, "s": S, "v": V, "t": T, "c": C}
"""What ``a``, the argument the call reads, is made of (by the letter that starts a call's key)."""

PREPARE = {"leaf": "a = x", "node": "a = x * 1.0"}
"""``a`` is the differentiated argument itself (a leaf of the tape), or a value computed from it."""

# -- example calls: ``a`` the argument; B, B3, ... plain constants; the text is NumPy's (np.*) ---------

HEADER = """
B = np.array([[0.5, -0.25, 0.75], [0.125, 0.625, -0.375]])
B3 = np.array([0.5, -0.25, 0.75])
B2 = np.array([0.5, -0.25])
B32 = B.T.copy()
I2 = np.array([0, 2])
MASK = np.array([[True, False, True], [False, True, True]])
AT01 = np.array([[False, True, False], [False, False, False]])
AT12 = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
"""

CALLS = {
    # reductions, scans and statistics: new arrays
    "sum": ["np.sum(a, axis=0)"], "prod": ["np.prod(a, axis=1)"], "max": ["np.max(a, axis=0)"],
    "min": ["np.min(a, axis=1)"], "amax": ["np.amax(a, axis=0)"], "amin": ["np.amin(a, axis=0)"],
    "mean": ["np.mean(a, axis=0)"], "var": ["np.var(a, axis=1)"], "std": ["np.std(a, axis=0)"],
    "cumsum": ["np.cumsum(a, axis=1)"], "cumprod": ["np.cumprod(a, axis=0)"],
    "cumulative_sum": ["np.cumulative_sum(a, axis=1)"], "cumulative_prod": ["np.cumulative_prod(a, axis=1)"],
    "diff": ["np.diff(a, axis=1)", "np.diff(a, n=0)"], "ediff1d": ["np.ediff1d(a)"],
    "nancumsum": ["np.nancumsum(a, axis=1)"], "nancumprod": ["np.nancumprod(a, axis=0)"],
    "trapezoid": ["np.trapezoid(a, axis=1)"], "nansum": ["np.nansum(a, axis=0)"],
    "nanprod": ["np.nanprod(a, axis=0)"], "nanmax": ["np.nanmax(a, axis=0)"],
    "nanmin": ["np.nanmin(a, axis=1)"], "nanmean": ["np.nanmean(a, axis=0)"],
    "nanvar": ["np.nanvar(a, axis=0)"], "nanstd": ["np.nanstd(a, axis=1)"], "ptp": ["np.ptp(a, axis=1)"],
    "average": ["np.average(a, axis=0)", "np.average(a, axis=1, weights=B3)"],
    "quantile": ["np.quantile(a, 0.3, axis=1)"], "percentile": ["np.percentile(a, 40.0, axis=0)"],
    "median": ["np.median(a, axis=1)"],
    # products
    "dot": ["np.dot(a, B32)"], "inner": ["np.inner(a, B)"], "outer": ["np.outer(a, B3)"],
    "matmul": ["np.matmul(a, B32)"], "tensordot": ["np.tensordot(a, B, axes=1 - 1)"],
    "einsum": ["np.einsum('ij->ji', a)", "np.einsum('ij,kj->ik', a, B)"],
    "vdot": ["np.vdot(a, B)"], "kron": ["np.kron(a, B2)"], "cross": ["np.cross(a, B)"],
    "matvec": ["np.matvec(a, B3)"], "vecmat": ["np.vecmat(B2, a)"], "vecdot": ["np.vecdot(a, B)"],
    # shapes: views in NumPy
    "reshape": ["np.reshape(a, (3, 2))", "np.reshape(a, (3, 2), order='F')", "np.reshape(a.T, (6,))"],
    "ravel": ["np.ravel(a)", "np.ravel(a, order='F')", "np.ravel(a.T)", "np.ravel(a[:, ::2])"],
    "transpose": ["np.transpose(a)", "np.transpose(a, (1, 0))"], "swapaxes": ["np.swapaxes(a, 0, 1)"],
    "moveaxis": ["np.moveaxis(a, 0, -1)"], "rollaxis": ["np.rollaxis(a, 1)"],
    "expand_dims": ["np.expand_dims(a, 1)"], "squeeze": ["np.squeeze(a[:1])", "np.squeeze(a)"],
    "broadcast_to": ["np.broadcast_to(a, (2, 2, 3))"],
    "broadcast_arrays": ["np.broadcast_arrays(a, B)[0]", "np.broadcast_arrays(a, B3[None, None])[0]"],
    "concatenate": ["np.concatenate([a, B])", "np.concatenate([a])", "np.concatenate([a], axis=None)"],
    "stack": ["np.stack([a, B])", "np.stack([a])"], "hstack": ["np.hstack([a, B])", "np.hstack([a])"],
    "vstack": ["np.vstack([a, B])", "np.vstack([a])"], "dstack": ["np.dstack([a, B])"],
    "column_stack": ["np.column_stack([a, B])", "np.column_stack([a])"],
    "unstack": ["np.unstack(a)[0]", "np.unstack(a, axis=1)[1]"],
    "split": ["np.split(a, 3, axis=1)[1]", "np.split(a, 2)[0]"],
    "array_split": ["np.array_split(a, 2, axis=1)[0]"], "hsplit": ["np.hsplit(a, 3)[2]"],
    "vsplit": ["np.vsplit(a, 2)[1]"], "tile": ["np.tile(a, 2)", "np.tile(a, 1)", "np.tile(a, (1, 1))"],
    "repeat": ["np.repeat(a, 2, axis=0)", "np.repeat(a, 1)"], "flip": ["np.flip(a)", "np.flip(a, 1)"],
    "fliplr": ["np.fliplr(a)"], "flipud": ["np.flipud(a)"], "roll": ["np.roll(a, 1)", "np.roll(a, 0)"],
    "rot90": ["np.rot90(a)", "np.rot90(a, 2)", "np.rot90(a, 0)", "np.rot90(a, 4)"],
    "pad": ["np.pad(a, 1)", "np.pad(a, 0)"], "append": ["np.append(a, B3)"],
    "take": ["np.take(a, I2)", "np.take(a, I2, axis=1)"],
    "take_along_axis": ["np.take_along_axis(a, np.array([[0], [1]]), axis=1)"],
    "sort": ["np.sort(a)", "np.sort(a, axis=None)"], "partition": ["np.partition(a, 1)"],
    "select": ["np.select([MASK], [a])"], "diagonal": ["np.diagonal(a)", "np.diagonal(a, 1)"],
    "trace": ["np.trace(a)"], "diag": ["np.diag(a)", "np.diag(a[0])"], "diagflat": ["np.diagflat(a[0])"],
    "tril": ["np.tril(a)"], "triu": ["np.triu(a, 1)"],
    "atleast_1d": ["np.atleast_1d(a)", "np.atleast_1d(a[0, 0])"],
    "atleast_2d": ["np.atleast_2d(a)", "np.atleast_2d(a[0])"],
    "atleast_3d": ["np.atleast_3d(a)", "np.atleast_3d(a[0])"],
    "meshgrid": ["np.meshgrid(a[0], B3)[0]", "np.meshgrid(a[0], copy=False)[0]"],
    # conversions and copies
    "array": ["np.array(a)", "np.array(a, copy=None)", "np.array(a, ndmin=3)", "np.array([a[0], B3])"],
    "asarray": ["np.asarray(a)", "np.asarray(a, dtype=np.float64)", "np.asarray([a[0], B3])"],
    "asanyarray": ["np.asanyarray(a)"], "ascontiguousarray": ["np.ascontiguousarray(a)",
                                                              "np.ascontiguousarray(a.T)"],
    "asfortranarray": ["np.asfortranarray(a)", "np.asfortranarray(a[0])"],
    "copy": ["np.copy(a)"], "astype": ["np.astype(a, np.float64)", "np.astype(a, np.float32)"],
    "full": ["np.full((2, 3), a[0, 1])"], "full_like": ["np.full_like(B, a[0, 1])"],
    "linspace": ["np.linspace(a[0, 0], a[1, 2], 4)"], "logspace": ["np.logspace(a[0, 0], a[1, 2], 4)"],
    "real_if_close": ["np.real_if_close(a)"],
    # elementwise functions with NumPy's conventions
    "clip": ["np.clip(a, 0.3, 0.7)", "np.clip(a, -1.0, 2.0)"], "where": ["np.where(MASK, a, B)"],
    "real": ["np.real(a)"], "imag": ["np.imag(a)"], "angle": ["np.angle(a)"], "sinc": ["np.sinc(a)"],
    "nan_to_num": ["np.nan_to_num(a)"], "round": ["np.round(a, 1)"], "around": ["np.around(a, 1)"],
    "fix": ["np.fix(a * 3.0)"], "heaviside": ["np.heaviside(a - 0.5, B)"],
    "gradient": ["np.gradient(a, axis=1)"], "interp": ["np.interp(a, B3, B2[[0, 1, 0]])"],
    "convolve": ["np.convolve(a[0], B3)"], "correlate": ["np.correlate(a[0], B2)"],
    "polyval": ["np.polyval(B3, a)"], "polyfit": ["np.polyfit(B3, a[0], 1)"], "vander": ["np.vander(a[0])"],
    "arccosh": ["np.arccosh(a + 1.0)"], "acosh": ["np.acosh(a + 1.0)"],
    # constants from shapes
    "zeros_like": ["np.zeros_like(a)"], "ones_like": ["np.ones_like(a)"],
    # wengert.numpy's own
    "index_update": ["np.index_update(a, (0, 1), 5.0) | np.where(AT01, 5.0, a)"],
    "index_add": ["np.index_add(a, (1, 2), 5.0) | a + 5.0 * AT12"],
    # square inputs
    "s:linalg.inv": ["np.linalg.inv(a)"], "s:linalg.solve": ["np.linalg.solve(a, B32)"],
    "s:linalg.cholesky": ["np.linalg.cholesky(a)"], "s:linalg.eigh": ["np.linalg.eigh(a)[1]"],
    "s:linalg.eigvalsh": ["np.linalg.eigvalsh(a)"], "s:linalg.eig": ["np.linalg.eig(a)[0]"],
    "s:linalg.eigvals": ["np.linalg.eigvals(a)"], "s:linalg.qr": ["np.linalg.qr(a)[1]"],
    "s:linalg.matrix_power": ["np.linalg.matrix_power(a, 2)", "np.linalg.matrix_power(a, 1)"],
    "s:linalg.lstsq": ["np.linalg.lstsq(a, B32)[0]"],
    "s:linalg.multi_dot": ["np.linalg.multi_dot([a, a, B32])"],
    "s:linalg.det": ["np.linalg.det(a)"], "s:linalg.slogdet": ["np.linalg.slogdet(a)[1]"],
    "s:linalg.cond": ["np.linalg.cond(a)"],
    "linalg.svd": ["np.linalg.svd(a)[1]"], "linalg.svdvals": ["np.linalg.svdvals(a)"],
    "linalg.pinv": ["np.linalg.pinv(a)"], "linalg.norm": ["np.linalg.norm(a, axis=1)"],
    "linalg.vector_norm": ["np.linalg.vector_norm(a, axis=0)"],
    "linalg.matrix_norm": ["np.linalg.matrix_norm(a)"],
    "linalg.matrix_transpose": ["np.linalg.matrix_transpose(a)"],
    "linalg.matmul": ["np.linalg.matmul(a, B32)"],
    "linalg.tensordot": ["np.linalg.tensordot(a, B32, axes=1)"],
    "linalg.outer": ["np.linalg.outer(a[0], B3)"], "linalg.vecdot": ["np.linalg.vecdot(a, B)"],
    "linalg.diagonal": ["np.linalg.diagonal(a)"], "linalg.trace": ["np.linalg.trace(a)"],
    "linalg.cross": ["np.linalg.cross(a, B)"],
    "s:linalg.tensorinv": ["np.linalg.tensorinv(a, ind=1)"],
    "s:linalg.tensorsolve": ["np.linalg.tensorsolve(a, B3)"],
    "matrix_transpose": ["np.matrix_transpose(a)"], "permute_dims": ["np.permute_dims(a, (1, 0))"],
    "concat": ["np.concat([a])"], "row_stack": ["np.vstack([a])"],
    # fft
    "fft.fft": ["np.fft.fft(a)"], "fft.ifft": ["np.fft.ifft(a)"], "fft.fft2": ["np.fft.fft2(a)"],
    "fft.ifft2": ["np.fft.ifft2(a)"], "fft.fftn": ["np.fft.fftn(a)"], "fft.ifftn": ["np.fft.ifftn(a)"],
    "fft.rfft": ["np.fft.rfft(a)"], "fft.irfft": ["np.fft.irfft(a)"], "fft.rfft2": ["np.fft.rfft2(a)"],
    "fft.irfft2": ["np.fft.irfft2(a)"], "fft.rfftn": ["np.fft.rfftn(a)"], "fft.irfftn": ["np.fft.irfftn(a)"],
    "fft.fftshift": ["np.fft.fftshift(a)"], "fft.ifftshift": ["np.fft.ifftshift(a)"],
    "fft.fftfreq": ["np.fft.fftfreq(4, a[0, 0])"], "fft.rfftfreq": ["np.fft.rfftfreq(4, a[0, 0])"],
    # complex arguments
    "c:real": ["np.real(a)"], "c:imag": ["np.imag(a)"], "c:conjugate": ["np.conjugate(a)"],
    "c:angle": ["np.angle(a)"], "c:real_if_close": ["np.real_if_close(a)", "np.real_if_close(a * 0.0 + 0.5)"],
    "c:fft.ifft": ["np.fft.ifft(a)"], "c:abs": ["np.abs(a)"],
    # three axes
    "t:dsplit": ["np.dsplit(a, 2)[0]"], "t:moveaxis": ["np.moveaxis(a, [0, 1], [2, 0])"],
    "t:squeeze": ["np.squeeze(a[:, :1])"], "t:swapaxes": ["np.swapaxes(a, 0, 2)"],
    # methods and properties of a traced value (the ``.name`` key)
    ".T": ["a.T"], ".mT": ["a.mT"], ".real": ["a.real"], ".imag": ["a.imag"], "c:.real": ["a.real"],
    "c:.imag": ["a.imag"], ".copy": ["a.copy()"], ".reshape": ["a.reshape(3, 2)", "a.reshape((6,))",
                                                               "a.T.reshape(6)"],
    ".transpose": ["a.transpose()", "a.transpose(1, 0)"], ".swapaxes": ["a.swapaxes(0, 1)"],
    ".squeeze": ["a[:1].squeeze()"], ".ravel": ["a.ravel()", "a.T.ravel()"],
    ".flatten": ["a.flatten()", "a.T.flatten()"], ".astype": ["a.astype(np.float64)", "a.astype(np.float32)"],
    ".diagonal": ["a.diagonal()"], ".conj": ["a.conj()"], ".conjugate": ["a.conjugate()"],
    "c:.conj": ["a.conj()"], ".repeat": ["a.repeat(2)"], ".clip": ["a.clip(0.3, 0.7)"],
    ".sum": ["a.sum(axis=0)"], ".mean": ["a.mean(axis=1)"], ".prod": ["a.prod(axis=0)"],
    ".max": ["a.max(axis=0)"], ".min": ["a.min(axis=1)"], ".var": ["a.var(axis=0)"],
    ".std": ["a.std(axis=1)"],
    ".cumsum": ["a.cumsum(axis=1)"], ".cumprod": ["a.cumprod(axis=0)"], ".trace": ["a.trace()"],
    ".round": ["a.round(1)"], ".dot": ["a.dot(B32)"], "+": ["+a"], "-": ["-a"],
    ".at": ["a.at[0, 1].set(5.0) | np.where(AT01, 5.0, a)", "a.at[1, 2].add(5.0) | a + 5.0 * AT12"],
    # the tape's Tensor (PyTorch's names): the NumPy call after '|' is the reference
    ".abs": ["a.abs() | np.abs(a)"], ".exp": ["a.exp() | np.exp(a)"], ".log": ["a.log() | np.log(a)"],
    ".sqrt": ["a.sqrt() | np.sqrt(a)"], ".tanh": ["a.tanh() | np.tanh(a)"],
    ".pow": ["a.pow(2.0) | np.power(a, 2.0)"], ".relu": ["a.relu() | np.maximum(a, 0.0)"],
    ".sigmoid": ["a.sigmoid() | 1.0 / (1.0 + np.exp(-a))"],
    ".clamp": ["a.clamp(0.3, 0.7) | np.clip(a, 0.3, 0.7)"],
    ".view": ["a.view(3, 2) | np.reshape(a, (3, 2))", "a.view(-1) | np.reshape(a, -1)"],
    ".permute": ["a.permute(1, 0) | np.transpose(a, (1, 0))"],
    ".detach": ["a.detach() | a.view()"], ".data": ["a.data | a.view()"],
    ".__getitem__": ["a[0]", "a[:, 1:]", "a[..., None]", "a[I2 // 2]", "a[MASK]", "a[0, 1]", "a[()]"],
}
"""name -> example calls (one or more). A key ``s:name`` / ``c:name`` / ``t:name`` reads a square,
complex or 3-d argument; ``linalg.`` / ``fft.`` name those namespaces; ``.name`` a traced value's
method or property. Ufuncs without an entry are called as ``np.name(a)`` or ``np.name(a, B)``."""

NOT_ARRAY_TO_ARRAY = {
    # wengert.numpy: constructors from shapes (no traced argument to share memory with)
    **dict.fromkeys("zeros ones empty eye identity tri bartlett blackman hamming hanning".split(),
                    "a constant made from shapes: no array argument"),
    # traced values' members that return no array
    **dict.fromkeys(".shape .ndim .size .dtype .item .tolist .argmax .argmin .forward_mode".split(),
                    "returns no traced array (metadata, a refused conversion, or integers)"),
    **dict.fromkeys(".backward .grad .grad_fn .is_leaf .requires_grad .requires_grad_ .retain_grad .make "
                    ".value".split(), "the tape's Tensor: PyTorch's graph and gradient members"),
    ".numpy": "refused on a value that requires grad (PyTorch's rule): tests/api/test_tensor*.py",
    ".zero_": "an in-place write itself (a Tensor's, PyTorch's), not a view or a copy",
    "empty_like": "its values are whatever memory held: zeros_like and ones_like stand for it",
}
"""Names the enumeration finds that take no array to return one, and why."""


# -- the enumeration -------------------------------------------------------------------------------

def _namespace_names():
    """Every public name of wengert.numpy (its linalg, fft) whose result can carry a derivative or is a
    zero-derivative array, and every public member of a traced value."""
    names = set()
    for namespace, prefix in (("numpy", ""), ("numpy.linalg", "linalg."), ("numpy.fft", "fft."),
                              ("wengert.numpy", "")):
        names |= {prefix + n for n in table.names(namespace, table.DIFFERENTIABLE, table.ZERO)}
    names |= {"." + n for box in (ArrayBox, Tensor) for n in dir(box) if not n.startswith("_")}
    return names | {".__getitem__", "+", "-"}


def _ufunc(name):
    return getattr(np, name, None) if "." not in name else None


def _calls(ufuncs=True):
    """(key, call) for every example, the ufuncs' derived (or those alone: ``ufuncs='only'``)."""
    out = []
    for name in sorted(_namespace_names() | {k for k in CALLS}):
        keys = [k for k in CALLS if k.split(":")[-1] == name]
        if keys:
            out += [(k, call) for k in keys for call in CALLS[k]] if ufuncs != "only" else []
        elif isinstance(_ufunc(name), np.ufunc) and ufuncs:
            u = _ufunc(name)
            args = "a" if u.nin == 1 else "a, B"
            out.append((name, f"np.{name}({args})" + ("[0]" if u.nout > 1 else "")))
    return out


ALL_CALLS = _calls()


def test_every_function_has_an_example_call():
    names = _namespace_names()
    covered = {k.split(":")[-1] for k in CALLS} | set(NOT_ARRAY_TO_ARRAY)
    missing = sorted(n for n in names if n not in covered and not isinstance(_ufunc(n), np.ufunc))
    assert not missing, (f"public functions or traced-value members without an example call in CALLS "
                         f"(or a reason in NOT_ARRAY_TO_ARRAY): {missing}")
    stale = sorted({k.split(":")[-1] for k in CALLS} - names) + sorted(set(NOT_ARRAY_TO_ARRAY) - names)
    assert not stale, f"entries for names that are not public (renamed? removed?): {stale}"


def test_each_example_calls_the_function_it_is_filed_under():
    for key, call in ALL_CALLS:
        name = key.split(":")[-1]
        if name.startswith(".") or name in "+-":
            want = name if name != ".__getitem__" else "a["
        else:
            entry = table.entry("numpy", name)
            alias = f"np.{entry.alias_of}(" if entry is not None and entry.alias_of else None
            want = alias if alias and alias in call else f"np.{name}("
        assert want in call, (key, call)


# -- the programs ------------------------------------------------------------------------------------

def _input(key):
    return INPUTS[key.split(":")[0]] if ":" in key else M


def _prepare(key, prep):
    if key.startswith("c:"):
        return "a = x[0] + 1j * x[1]"
    return PREPARE[prep]


def _sides(call):
    """(the call the tape runs, NumPy's): they differ only for the Tensor's PyTorch names."""
    tape, _, numpy = call.partition(" | ")
    return tape, numpy or tape


@functools.lru_cache(maxsize=None)
def _reference(key, call, prep):
    """NumPy's ``a`` and ``y = call`` (plain arrays; read, never written)."""
    namespace = {"np": np}
    exec(HEADER, namespace)  # noqa: S102 - the test's own text
    text = f"def g(x):\n    {_prepare(key, prep)}\n    y = {_sides(call)[1]}\n    return a, y\n"
    exec(text, namespace)  # noqa: S102
    return namespace["g"](_input(key).copy())


def _reads(name, value):
    """``sum(real(name) * w) (+ sum(imag(name) * w))`` for fixed weights w of ``value``'s shape."""
    shape = np.shape(value)
    w = f"np.cos(np.arange({int(np.prod(shape))}.0) * 0.7 + 0.3).reshape({shape})"
    text = f"np.sum(np.real({name}) * {w})"
    if np.iscomplexobj(value):
        text += f" + np.sum(np.imag({name}) * {w} * 0.5)"
    return text


def program(key, call, prep, into, side=1):
    """The text of ``f(x)``: make ``a``, call, write into the result (``into='result'``) or into ``a``
    (``'argument'``), and read both; the tape's call (``side=0``) or NumPy's."""
    a, y = _reference(key, call, prep)
    target, value = ("y", y) if into == "result" else ("a", a)
    write = f"{target} *= 3.0\n    {target}[{(0,) * np.ndim(value)!r}] = 5.0"
    return (f"{HEADER}\n\ndef f(x):\n    {_prepare(key, prep)}\n    y = {_sides(call)[side]}\n    {write}\n"
            f"    return {_reads('a', a)} + {_reads('y', y)}\n")


def _function(text, module):
    namespace = {"np": module}
    exec(text, namespace)  # noqa: S102 - the test's own text
    return namespace["f"]


def _writable(key, call, prep, into):
    a, y = _reference(key, call, prep)
    return isinstance(y if into == "result" else a, np.ndarray)


REFUSALS = (TypeError, ValueError)


def check(key, call, prep, into, run, may_refuse=False):
    """Run the tape's program by ``run`` (its text -> a function of x giving (value, gradient)) and
    compare with NumPy's program; return what happened. A refusal is accepted where NumPy's result
    shares memory with its argument (or anywhere, with ``may_refuse``)."""
    f = _function(program(key, call, prep, into), np)
    x = _input(key)
    a, y = _reference(key, call, prep)
    shared = np.shares_memory(a, y)
    ours = run(program(key, call, prep, into, side=0))
    try:
        with warnings.catch_warnings():  # NumPy 2 warns on a write into broadcast_arrays' views
            warnings.simplefilter("ignore", DeprecationWarning)
            want = f(x.copy())
    except (ValueError, TypeError) as numpy_error:  # a read-only view, a cast NumPy refuses
        with pytest.raises(type(numpy_error)):
            ours(x.copy())
        return "both refuse"
    try:
        value, grad = ours(x.copy())
    except REFUSALS as e:
        assert shared or may_refuse, f"{call}: NumPy's result is a new array, yet the write is refused: {e}"
        return f"refused: {e}"
    np.testing.assert_allclose(value, want, rtol=1e-12, atol=1e-12,
                               err_msg=f"{call} ({into} written, {prep}): the value is not NumPy's")
    if "detach()" in call or ".data" in call:
        return "shared, no gradient"  # its gradient is that of a constant: the value is the point here
    loose = "float32" in call  # the rounding to float32 needs a wide step
    tolerance = dict(rtol=1e-4, atol=1e-4) if loose else dict(rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grad, finite_differences(f, x, eps=1e-2 if loose else 1e-6), **tolerance,
                               err_msg=f"{call} ({into} written, {prep}): the gradient is not NumPy's")
    return "shared" if shared else "copy"


def _tape(text):
    return wg.value_and_grad(_function(text, wnp))


CASES = [(k, c, into) for k, c in ALL_CALLS for into in ("result", "argument")]
UFUNC_CASES = [(k, c, into) for k, c in _calls(ufuncs="only") for into in ("result", "argument")]
OTHER_CASES = [case for case in CASES if case not in UFUNC_CASES]


def _check_tape(key, call, into):
    prep = "leaf" if into == "result" else "node"
    if not _writable(key, call, prep, into):
        pytest.skip("NumPy returns a scalar: nothing to write into")
    check(key, call, prep, into, _tape)


@pytest.mark.parametrize("key, call, into", OTHER_CASES, ids=[f"{c}-{i}" for _, c, i in OTHER_CASES])
def test_the_tape_writes_as_numpy_does(key, call, into):
    _check_tape(key, call, into)


@pytest.mark.parametrize("key, call, into", UFUNC_CASES, ids=[f"{c}-{i}" for _, c, i in UFUNC_CASES])
def test_the_tape_writes_as_numpy_does_after_every_ufunc(key, call, into):
    """The ufuncs' calls, derived from their arity (the slow group: a ufunc's result is always new)."""
    _check_tape(key, call, into)


# -- wg.compile and wg.source_grad: the same programs (a refusal is allowed, a wrong number is not) ---------

TRANSFORM_REFUSALS = (TypeError, ValueError, NotImplementedError)
"""What the program transformations may raise instead: TracingError, TransformError, ExitError and
UnsupportedNumpyFunction are TypeErrors; NumPy's ValueError for a read-only view."""


def _program_runs(text):
    f = function_from_text(text, tag="copy_view")
    compiled = wg.compile(f)
    source = wg.source_grad(f)
    return (lambda x: (compiled(x), compiled.grad()(x))), (lambda x: (f(x), source(x)))


def _check_transforms(key, call, into):
    if "|" in call or call.startswith(("a.at", "np.index_")):
        pytest.skip("no NumPy text for both sides")
    prep = "node"
    if not _writable(key, call, prep, into):
        pytest.skip("NumPy returns a scalar: nothing to write into")
    for run in _program_runs(program(key, call, prep, into)):
        check(key, call, prep, into, lambda _text, run=run: run, may_refuse=True)


def _shared(key, call):
    a, y = _reference(key, _sides(call)[1], "node")
    return isinstance(y, np.ndarray) and np.shares_memory(a, y)


def _views_one_call_per_function():
    seen, out = set(), []
    for key, call, _ in CASES:
        if "|" not in call and key not in seen and _shared(key, call):
            seen.add(key)
            out.append((key, call, "result" if len(seen) % 2 else "argument"))  # each write, in turn
    return out[::3]  # a third of them: the slow sweep has every call


VIEW_CASES = _views_one_call_per_function()
"""Every third view-making function's first call, written into or read after a write into its argument
in turn: the default group's share of the sweep."""


@pytest.mark.parametrize("key, call, into", VIEW_CASES, ids=[f"{c}-{i}" for _, c, i in VIEW_CASES])
def test_compile_and_source_grad_write_through_views_or_refuse(key, call, into):
    _check_transforms(key, call, into)


@pytest.mark.parametrize("key, call, into", CASES, ids=[f"{c}-{i}" for _, c, i in CASES])
def test_compile_and_source_grad_on_every_call(key, call, into):
    """The sweep over every example (the slow group: a trace and a source transformation each)."""
    _check_transforms(key, call, into)


# -- random chains of views and copies, with writes anywhere in between -------------------------------

CHAIN_OPS = ["{}.T", "{}[::-1]", "{}[..., ::2]", "{}[:1]", "np.ravel({})", "{}.reshape(-1)", "{}.copy()",
             "np.array({})", "np.asarray({})", "{}.flatten()", "+{}", "np.ascontiguousarray({})",
             "np.asfortranarray({})", "np.expand_dims({}, 0)", "np.squeeze({})", "np.flip({})",
             "np.atleast_2d({})", "np.swapaxes({}, 0, -1)", "np.real({})", "{}.conj()",
             "np.moveaxis({}, 0, -1)",
             "np.copy({})", "np.transpose({})", "{}.astype(np.float64)", "np.broadcast_to({}, {}.shape)",
             "np.diagonal(np.atleast_2d({}))"]
"""Unary calls of an array: views (NumPy's own choice: a layout may make a reshape a copy) and copies."""

WRITES = ["{0} *= 3.0", "{0}[(0,) * {0}.ndim] = 5.0", "{0} += {1}.sum()"]


def _chain_text(steps):
    lines, names = ["v0 = x * 1.0"], ["v0"]
    for step in steps:
        if step[0] == "op":
            _, op, source = step
            source = names[source % len(names)]
            lines.append(f"v{len(names)} = " + CHAIN_OPS[op].replace("{}", source))
            names.append(f"v{len(names)}")
        else:
            _, kind, target, other = step
            lines.append(WRITES[kind].format(names[target % len(names)], names[other % len(names)]))
    reads = " + ".join(f"np.sum(np.cos(np.arange({n}.size) * 0.7 + 0.3).reshape({n}.shape) * {n})"
                       for n in names)
    return "def f(x):\n    " + "\n    ".join(lines) + f"\n    return {reads}\n"


_STEP = st.one_of(st.tuples(st.just("op"), st.integers(0, len(CHAIN_OPS) - 1), st.integers(0, 8)),
                  st.tuples(st.just("write"), st.integers(0, len(WRITES) - 1), st.integers(0, 8),
                            st.integers(0, 8)))


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(_STEP, min_size=1, max_size=7), square=st.booleans())
def test_random_chains_of_views_copies_and_writes_follow_numpy(steps, square):
    text = _chain_text(steps)
    x = S.copy() if square else M.copy()
    f = _function(text, np)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            want = f(x.copy())
    except (ValueError, TypeError):  # a write into a read-only view
        with pytest.raises((ValueError, TypeError)):
            wg.value_and_grad(_function(text, wnp))(x.copy())
        return
    try:
        value, grad = wg.value_and_grad(_function(text, wnp))(x.copy())
    except (TypeError, ValueError) as e:  # refused: only a write into a view the tape cannot follow
        assert "view" in str(e), f"{text}\nrefused: {e}"
        return
    np.testing.assert_allclose(value, want, rtol=1e-12, atol=1e-12, err_msg=text)
    want_grad = finite_differences(f, x)  # (repeated sums make large slopes: a relative tolerance)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(want_grad).max()),
                               err_msg=text)
