"""Whether Numba's machine code computes in the Python program's dtypes: checked after compiling.

Numba types a program by its own promotion rules, not NumPy's: a Python number with a ``float32`` or
small-integer array is computed in 64 bits (NumPy 2 keeps the array's dtype: ``float32[3] * 0.1`` is
``float32``, ``uint8[1] + 250`` wraps around in ``uint8``), and a NumPy scalar other than ``float64``,
``int64``, ``complex128`` or ``bool`` comes back as a Python number (``np.float32(0.38)`` as
``0.37999999895691877``). So after ``native_build`` compiles a program, :func:`mistyped` reads the
type Numba inferred for what the main function returns and compares each result's with the
program's own (the dtype, kind and rank its tracer recorded from NumPy); where one differs the
program runs as Python (``NativeFallbackWarning``): a different dtype is a different number, never
given silently. (Only the results: the types of the function's other variables are not kept in
Numba's disk cache, and a check that read them would decide differently in a second process.)
"""

import numpy as np

from wengert.program.ir import Variable, placeholder

__all__ = ["mistyped", "BOXED"]

BOXED = tuple(np.dtype(t) for t in (np.float64, np.int64, np.complex128, np.bool_))
"""The NumPy scalars' dtypes whose values come back from Numba as Python's own numbers of the same
value (``float``, ``int``, ``complex``, ``bool``); a scalar of another dtype would lose it."""


def _dtype_of(numba, t):
    """The NumPy dtype of Numba type ``t`` (an array's elements, or a number), or None."""
    t = numba.core.types.unliteral(t)
    if isinstance(t, numba.core.types.Array):
        t = t.dtype
    try:
        return np.dtype(numba.np.numpy_support.as_dtype(t))
    except Exception:  # noqa: BLE001 - Numba's NumbaNotImplementedError: a type with no dtype (a tuple)
        return None


def _result_differs(numba, got, want):
    """How Numba's result type ``got`` differs from the value ``want`` that the Python program returns
    (a placeholder of its kind, dtype and shape), in words; None where the caller gets the same number
    in the same dtype (a 0-d array for a scalar or the other way round: the same number)."""
    types = numba.core.types
    got = types.unliteral(got)
    if not isinstance(want, (np.ndarray, np.generic, bool, int, float, complex)):
        return None
    dtype = np.result_type(want)
    same = _dtype_of(numba, got) == dtype
    if isinstance(got, types.Array):
        if same and got.ndim == np.ndim(want):
            return None
        return f"NumPy gives {dtype.name}{list(np.shape(want))}, Numba {got}"
    if isinstance(want, (np.ndarray, np.generic)) and dtype not in BOXED:
        return f"NumPy gives {dtype.name}, Numba a Python {type(np.asarray(want).item()).__name__}"
    if same and np.ndim(want) == 0:
        return None
    return f"NumPy gives {dtype.name}{list(np.shape(want))}, Numba {got}"


def mistyped(numba, dispatcher, signature, program):
    """In words, where the machine code ``dispatcher`` compiled for ``signature`` returns another type
    than ``program``'s outputs have (their kind, dtype and number of axes); None where all agree."""
    compiled = dispatcher.overloads.get(tuple(signature))
    if compiled is None:  # pragma: no cover - compile() just put it there
        return None
    outputs = program.outputs
    returned = compiled.signature.return_type
    parts = list(returned.types) if len(outputs) != 1 and isinstance(returned, numba.core.types.BaseTuple) \
        else [returned]
    for i, (o, got) in enumerate(zip(outputs, parts)):
        differs = _result_differs(numba, got, placeholder(o) if type(o) is Variable else o)
        if differs:
            which = f"its result {o.name}" if type(o) is Variable else f"its result {i}"
            return f"{which} would be another type on Numba ({differs})"
    return None
