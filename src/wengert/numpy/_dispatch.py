"""Plain NumPy on traced values: the tables behind ``__array_ufunc__`` and ``__array_function__``.

``np.sin(x)`` on a traced ``x`` arrives here as the ufunc object ``np.sin``; ``np.sum(x, axis=0)``
as the function object ``np.sum``. Each maps to the wengert.numpy function of the same name; one
without an entry raises :class:`UnsupportedNumpyFunction` naming it.
"""

import sys

import numpy as np

from wengert.engines.mutation import add_at  # np.add.at on a traced array rebinds it
from wengert.numpy import _classification as _table
from wengert.numpy._classification import UnsupportedNumpyFunction, unsupported

_SCIPY_UFUNCS: dict = {}
"""scipy.special's ufuncs -> wengert's primitives, filled the first time a ufunc that is not NumPy's
arrives (SciPy is imported only then: ``import wengert`` does not pay for it)."""

__all__ = ["UnsupportedNumpyFunction", "unsupported", "ufunc_call", "function_call", "scipy_caller",
           "scipy_refusal", "has_wengert_version"]


def _tables(wnp):
    """NumPy's function object -> wengert.numpy's (``wnp``), for every name the classification does not
    refuse."""
    ufuncs, functions = {}, {}
    for namespace, ours_module, theirs_module in (("numpy", wnp, np), ("numpy.linalg", wnp.linalg, np.linalg),
                                                   ("numpy.fft", wnp.fft, np.fft)):
        for name, entry in _table.TABLE[namespace].items():
            theirs = getattr(theirs_module, name, None)
            if entry.kind == _table.UNSUPPORTED or theirs is None:
                continue
            ours = getattr(ours_module, name)
            if isinstance(theirs, np.ufunc):
                ufuncs[theirs] = ours
            elif callable(theirs) and not isinstance(theirs, type) and theirs is not ours:
                functions.setdefault(theirs, ours)  # an object with two names (mod, remainder) once
    return ufuncs, functions


UFUNCS, FUNCTIONS, REDUCERS = {}, {}, {}


def install(wnp):
    """Fill the tables from ``wengert.numpy`` (``wnp``), which calls this once it has defined its names."""
    ufuncs, functions = _tables(wnp)
    UFUNCS.update(ufuncs)
    FUNCTIONS.update(functions)
    REDUCERS.update({np.add: wnp.sum, np.multiply: wnp.prod, np.maximum: wnp.max, np.minimum: wnp.min})


_unsupported = unsupported


def ufunc_call(ufunc, method, inputs, kwargs):
    """Dispatch ``ufunc.method(*inputs, **kwargs)`` on traced inputs to wengert.numpy."""
    if kwargs.get("out") is not None:
        raise TypeError(
            f"numpy.{ufunc.__name__}(..., out=...) on a traced value: writing into an existing "
            f"array is not differentiable; use the returned value instead")
    kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    if method == "__call__":
        fun = UFUNCS.get(ufunc) or _scipy_ufunc(ufunc)
        if fun is None:
            raise _unsupported(_ufunc_name(ufunc))
        if kwargs:
            raise TypeError(f"numpy.{ufunc.__name__} on a traced value: keyword arguments "
                            f"{sorted(kwargs)} are not supported")
        return fun(*inputs)
    if method == "reduce" and ufunc in REDUCERS:
        return REDUCERS[ufunc](*inputs, **kwargs)
    if method == "at" and ufunc is np.add and len(inputs) == 3 and hasattr(inputs[0], "_trace"):
        return add_at(*inputs)
    raise _unsupported(f"{_ufunc_name(ufunc)}.{method}")


def _ufunc_name(ufunc):
    """``erf`` -> ``scipy.special.erf`` for ufuncs that are not NumPy's own."""
    if getattr(np, ufunc.__name__, None) is ufunc:
        return ufunc.__name__
    return f"scipy.special.{ufunc.__name__}"


def _scipy_ufunc(ufunc):
    """The wengert primitive for a scipy.special ufunc, or None (also when SciPy is missing)."""
    if getattr(np, ufunc.__name__, None) is ufunc or "scipy.special" not in sys.modules:
        return None  # a scipy.special ufunc exists only once scipy.special is imported
    if not _SCIPY_UFUNCS:
        import scipy.special as sp

        from wengert.rules import special_scaled
        from wengert.rules.special import UFUNCS as special_ufuncs
        _SCIPY_UFUNCS.update(special_ufuncs)
        _SCIPY_UFUNCS.update({sp.ive: special_scaled.ive, sp.gammasgn: special_scaled.gammasgn})
    return _SCIPY_UFUNCS.get(ufunc)


def function_call(func, args, kwargs):
    """Dispatch a NumPy function called on traced arguments to wengert.numpy."""
    fun = FUNCTIONS.get(func)
    if fun is None:
        module = getattr(func, "__module__", "") or ""
        prefix = next((m + "." for m in ("linalg", "fft", "random") if f".{m}" in module), "")
        raise _unsupported(prefix + func.__name__)
    return fun(*args, **kwargs)


def scipy_caller():
    """The SciPy function (``scipy.linalg.expm``) on the call stack, if one is converting a traced
    value to a NumPy array -- SciPy functions other than ufuncs do not dispatch -- else the NumPy
    function that does not dispatch either (``numpy.kaiser``), else None."""
    frame, found = sys._getframe(1), None
    while frame is not None:
        module = frame.f_globals.get("__name__") or ""
        if module.split(".")[0] == "scipy":
            found = frame  # keep climbing: the outermost SciPy frame is the function the user called
        elif found is not None:
            break
        frame = frame.f_back
    if found is None:
        return _numpy_caller(sys._getframe(2))
    module = found.f_globals["__name__"]
    name = getattr(found.f_code, "co_qualname", found.f_code.co_name)
    if "<locals>" in name:  # a decorator's wrapper: name the function it wraps
        inner = next((v for v in found.f_locals.values() if callable(v)
                      and (getattr(v, "__module__", None) or "").startswith("scipy.")), None)
        if inner is None:
            return "a SciPy function"
        module, name = inner.__module__, inner.__qualname__
    public = ".".join(part for part in module.split(".") if not part.startswith("_"))
    return f"{public}.{name}"


def _numpy_caller(frame):
    """``numpy.<name>`` for the outermost public NumPy function on the stack above ``frame``."""
    found = None
    while frame is not None:
        module = frame.f_globals.get("__name__") or ""
        if module.split(".")[0] == "numpy":
            namespace = next((ns for ns in ("numpy.linalg", "numpy.fft") if module.startswith(ns)), "numpy")
            if _table.entry(namespace, frame.f_code.co_name) is not None:
                found = f"{namespace}.{frame.f_code.co_name}"
        elif found is not None:
            break
        frame = frame.f_back
    return found


def has_wengert_version(caller):
    """Whether ``caller`` (``numpy.real``, from :func:`scipy_caller`) is a NumPy function that
    wengert.numpy has with a derivative (then a list holding a traced value is the problem)."""
    namespace, _, name = caller.rpartition(".")
    if not namespace.startswith("numpy"):
        return False
    found = _table.entry(namespace, name)
    return found is not None and found.kind != _table.UNSUPPORTED


def scipy_refusal(caller):
    """The error for a traced value reaching SciPy (or non-dispatching NumPy) function ``caller``."""
    if caller.startswith("numpy."):
        return unsupported(caller[len("numpy."):])
    return UnsupportedNumpyFunction(
        f"{caller} was called on a traced wengert value (or called back a function that returned "
        f"one), and SciPy's functions do not dispatch to wengert. Use its wengert.scipy version "
        f"(import wengert.scipy) where there is one -- passing parameters of callbacks through "
        f"args -- or define it with wg.primitive + wg.defvjp. {_table.NO_DERIVATIVE}")
