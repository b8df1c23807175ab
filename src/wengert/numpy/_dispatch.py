"""Plain NumPy on traced values: the tables behind ``__array_ufunc__`` and ``__array_function__``.

``np.sin(x)`` on a traced ``x`` arrives here as the ufunc object ``np.sin``; ``np.sum(x, axis=0)``
as the function object ``np.sum``. Each maps to the wengert.numpy function of the same name; one
without an entry raises :class:`UnsupportedNumpyFunction` naming it.
"""

import numpy as np

import wengert.numpy as wnp

__all__ = ["UnsupportedNumpyFunction", "ufunc_call", "function_call"]


class UnsupportedNumpyFunction(TypeError):
    """A NumPy function was called on a traced value and wengert has no derivative rule for it."""


def _tables():
    ufuncs, functions = {}, {}
    for name in wnp.__all__:
        ours = getattr(wnp, name)
        theirs = getattr(np, name, None)
        if isinstance(theirs, np.ufunc):
            ufuncs[theirs] = ours
        elif callable(theirs) and theirs is not ours:
            functions[theirs] = ours
    return ufuncs, functions


UFUNCS, FUNCTIONS = _tables()
REDUCERS = {np.add: wnp.sum, np.multiply: wnp.prod, np.maximum: wnp.max, np.minimum: wnp.min}


def _unsupported(qualname, extra=""):
    return UnsupportedNumpyFunction(
        f"numpy.{qualname} was called on a traced wengert value, and wengert has no derivative "
        f"rule for it{extra}. Use a wengert.numpy function that has one, compose it from them, or "
        f"define it with wg.primitive + wg.defvjp (docs/adding-a-primitive.md). If no derivative "
        f"is wanted, pass x.detach() or a plain array instead.")


def ufunc_call(ufunc, method, inputs, kwargs):
    """Dispatch ``ufunc.method(*inputs, **kwargs)`` on traced inputs to wengert.numpy."""
    if kwargs.get("out") is not None:
        raise TypeError(
            f"numpy.{ufunc.__name__}(..., out=...) on a traced value: writing into an existing "
            f"array is not differentiable; use the returned value instead")
    kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    if method == "__call__":
        fun = UFUNCS.get(ufunc)
        if fun is None:
            raise _unsupported(ufunc.__name__)
        if kwargs:
            raise TypeError(f"numpy.{ufunc.__name__} on a traced value: keyword arguments "
                            f"{sorted(kwargs)} are not supported")
        return fun(*inputs)
    if method == "reduce" and ufunc in REDUCERS:
        return REDUCERS[ufunc](*inputs, **kwargs)
    if method == "at" and ufunc is np.add and len(inputs) == 3 and hasattr(inputs[0], "_trace"):
        from wengert.mutation import add_at  # the traced array is rebound (see wengert.mutation)

        return add_at(*inputs)
    raise _unsupported(f"{ufunc.__name__}.{method}")


def function_call(func, args, kwargs):
    """Dispatch a NumPy function called on traced arguments to wengert.numpy."""
    fun = FUNCTIONS.get(func)
    if fun is None:
        module = getattr(func, "__module__", "") or ""
        prefix = next((m + "." for m in ("linalg", "fft", "random") if f".{m}" in module), "")
        raise _unsupported(prefix + func.__name__)
    return fun(*args, **kwargs)
