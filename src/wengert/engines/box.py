"""What every traced value can do: operators, NumPy's array protocols, and ndarray-like methods.

Engines subclass :class:`ArrayBox` (``Tensor`` for reverse mode, ``Dual`` for forward mode); a
subclass provides ``value`` and ``_trace`` slots. Operators call the rule table's primitives, so
``x * y`` on boxes is the same primitive call as ``wnp.multiply(x, y)``. Converting a box to a
NumPy array or a Python number would silently drop its derivative, so it raises instead.
"""

import numpy as np

from wengert.core import exits as _exits
from wengert.core import frontend
from wengert.core.trace import SYMBOLIC_TYPES, unbox_all
from wengert.engines import mutation
from wengert.rules import elementwise as ew
from wengert.rules import indexing, modular, nondiff, products
from wengert.rules import shape as shape_ops

_getitem = indexing.getitem
_GETITEM = indexing.getitem.primitive


def _unbox_index(idx):
    """Indices are never differentiated: strip traced integer arrays used as indices."""
    return unbox_all(idx)


class ArrayBox:
    """Mixin for traced values. Subclasses define ``__slots__`` with ``value`` and ``_trace``."""

    __slots__ = ()
    __array_priority__ = 100.0
    forward_mode = False
    """True for forward mode's dual numbers (an assignment rebinds their value and tangent together)."""

    # -- arithmetic (forward operators are the primitives' entry points themselves) ----------------
    __add__ = ew.add

    def __radd__(self, other):
        if type(other) is int and type(self.value) is float:  # sum(...)'s start value 0
            other = float(other)
        return ew.add(other, self)

    __sub__ = ew.subtract

    def __rsub__(self, other):
        return ew.subtract(other, self)

    __mul__ = ew.multiply

    def __rmul__(self, other):
        return ew.multiply(other, self)

    __truediv__ = ew.true_divide

    def __rtruediv__(self, other):
        return ew.true_divide(other, self)

    __pow__ = ew.power

    def __rpow__(self, other):
        return ew.power(other, self)

    def __matmul__(self, other):
        if type(other) is list or type(other) is tuple:  # x @ [1., 2.]: NumPy's array of the list
            other = frontend.numpy.asarray(other)
        return products.matmul(self, other)

    def __rmatmul__(self, other):
        if type(other) is list or type(other) is tuple:
            other = frontend.numpy.asarray(other)
        return products.matmul(other, self)

    def __floordiv__(self, other):
        return modular.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return modular.floor_divide(other, self)

    def __mod__(self, other):
        return modular.remainder(self, other)

    def __rmod__(self, other):
        return modular.remainder(other, self)

    def __divmod__(self, other):
        return modular.divmod_(self, other)

    def __rdivmod__(self, other):
        return modular.divmod_(other, self)

    def __neg__(self):
        return ew.negative(self)

    def __pos__(self):
        """``+x``: a new array, as NumPy's (a write into it leaves ``x`` alone); a Python float itself."""
        return self if type(getattr(self, "value", None)) is float else ew.positive(self)

    # -- in-place operators: NumPy's semantics (aliases see the change), by rebinding -------------------
    def __iadd__(self, other):
        return mutation.augmented_assign(self, ew.add, other, "+=")

    def __isub__(self, other):
        return mutation.augmented_assign(self, ew.subtract, other, "-=")

    def __imul__(self, other):
        return mutation.augmented_assign(self, ew.multiply, other, "*=")

    def __itruediv__(self, other):
        return mutation.augmented_assign(self, ew.true_divide, other, "/=")

    def __ipow__(self, other):
        return mutation.augmented_assign(self, ew.power, other, "**=")

    def __abs__(self):
        return ew.absolute(self)

    # -- comparisons: constants, never differentiated ------------------------------------------
    def __eq__(self, other):
        return nondiff.equal(self, other)

    def __ne__(self, other):
        return nondiff.not_equal(self, other)

    def __lt__(self, other):
        return nondiff.less(self, other)

    def __le__(self, other):
        return nondiff.less_equal(self, other)

    def __gt__(self, other):
        return nondiff.greater(self, other)

    def __ge__(self, other):
        return nondiff.greater_equal(self, other)

    __hash__ = object.__hash__  # identity, as PyTorch tensors: usable as dict keys

    # -- containers ----------------------------------------------------------------------------
    def __getitem__(self, idx):
        if type(idx) is int:  # v[i] in a loop: the common case, straight to this box's trace
            return self._trace.apply2(_GETITEM, self, idx)
        idx = _unbox_index(idx)
        # x[i, j] with i batched by a vmap inside this trace (the test is one C call: v[i, j] is hot)
        if type(idx) is tuple and not SYMBOLIC_TYPES.isdisjoint(map(type, idx)):
            for p in idx:
                if type(p) in SYMBOLIC_TYPES and p._trace.level > self._trace.level:
                    return p._trace.apply(_GETITEM, (self, idx), {})
        return _getitem(self, idx)

    def __setitem__(self, idx, value):
        """``x[idx] = value``: x is rebound to a recorded functional update (see wengert.engines.mutation)."""
        mutation.assign(self, idx, value)

    @property
    def at(self):
        """JAX's functional updates: ``x.at[idx].set(v)``, ``.add(v)``, ``.multiply(v)``, ``.get()``."""
        return indexing.IndexUpdates(self)

    def __len__(self):
        try:
            return len(self.value)
        except TypeError:  # a Python float: NumPy's words for a 0-d array
            raise TypeError("len() of unsized object (a 0-d traced value)") from None

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self):
        return bool(self.value)

    # -- exits: conversions to plain Python numbers or NumPy arrays would lose the derivative, so
    # they raise, naming the user's line (see wengert.core.exits). Comparisons, bool(), len() and iteration
    # (which yields traced elements) stay: they lose no derivative.
    def _kind(self):
        """What kind of traced value this is, for error messages."""
        return "a traced value"

    def _refuse(self, what, instead):
        raise _exits.refusal(self, what, instead)

    def __float__(self):
        self._refuse("float()", "Keep it traced: use wengert.numpy functions (wnp.sin, wnp.exp, ...) instead "
                     "of math's; if the number alone is wanted (printing, logging), write "
                     "float(wg.stop_gradient(x)).")

    def __int__(self):
        self._refuse("int()", "An int carries no derivative: write int(wg.stop_gradient(x)) if the integer "
                     "is wanted, or wnp.floor(x) to stay traced.")

    def __round__(self, ndigits=None):
        """``round(x, n)``, whose derivative is zero: Python's for a Python float (a constant: it is
        correctly rounded, NumPy's is not: 1.65 -> 1.7, not 1.6), NumPy's otherwise; ``round(x)``, an int,
        refused as ``int(x)`` is."""
        if ndigits is None:
            self._refuse("round() (which returns an int)", "An int carries no derivative: write "
                         "round(wg.stop_gradient(x)) if the integer is wanted, or wnp.round(x) to stay "
                         "traced.")
        if type(self.value) is float:
            return round(self.value, ndigits)
        return self.round(ndigits)

    def __index__(self):
        self._refuse("Use as a Python index (range(x), seq[x], a shape)",
                     "Index with int(wg.stop_gradient(x)) or an integer array.")

    def __complex__(self):
        self._refuse("complex()", "Keep it traced: use wengert.numpy functions instead of cmath's; "
                     "complex(wg.stop_gradient(x)) gives the number alone.")

    def item(self, *args):
        """Refused: a Python number cannot carry the derivative (as ``jax.Array.item`` on a tracer)."""
        self._refuse("x.item()", "Use x itself (a traced scalar works in arithmetic and wengert.numpy "
                     "functions; x.reshape(()) makes a 0-d one); if the number alone is wanted "
                     "(printing, logging), write float(wg.stop_gradient(x)).")

    def tolist(self):
        """Refused: Python numbers cannot carry the derivative."""
        self._refuse("x.tolist()", "Use x itself, or list(x) for a list of traced rows; if the numbers "
                     "alone are wanted, write np.asarray(wg.stop_gradient(x)).tolist().")

    def __array__(self, dtype=None, copy=None):
        caller = frontend.protocols.scipy_caller()
        if caller is not None and not frontend.protocols.has_wengert_version(caller):
            raise frontend.protocols.scipy_refusal(caller)
        # else a NumPy function with a wengert.numpy version, given a list that holds x: said by _refuse
        self._refuse(
            "Conversion to a plain NumPy array (np.asarray(x), np.array([..., x, ...]), or a NumPy "
            "function given a list that holds x)",
            "Call wengert.numpy functions (plain NumPy functions given x itself dispatch to them): "
            "wnp.array / wnp.stack for lists of traced values; use wg.stop_gradient(x) when the "
            "derivative is not wanted.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return frontend.protocols.ufunc_call(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return frontend.protocols.function_call(func, args, kwargs)

    # -- ndarray-like attributes -----------------------------------------------------------------
    @property
    def shape(self):
        return np.shape(self.value) if type(self.value) is not float else ()

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape))

    @property
    def dtype(self):
        v = self.value
        if type(v) is float:
            return np.dtype(np.float64)
        return np.result_type(v) if type(v) is complex else v.dtype

    @property
    def T(self):
        return frontend.numpy.transpose(self)

    @property
    def mT(self):
        return frontend.numpy.swapaxes(self, -1, -2)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        return frontend.numpy.sum(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        return frontend.numpy.mean(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False):
        return frontend.numpy.prod(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def max(self, axis=None, out=None, keepdims=False):
        return frontend.numpy.max(self, axis=axis, out=out, keepdims=keepdims)

    def min(self, axis=None, out=None, keepdims=False):
        return frontend.numpy.min(self, axis=axis, out=out, keepdims=keepdims)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return frontend.numpy.var(self, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return frontend.numpy.std(self, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = shape[0]
        return frontend.numpy.reshape(self, tuple(shape), order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            axes = axes[0]
        return frontend.numpy.transpose(self, tuple(axes) if axes else None)

    def swapaxes(self, axis1, axis2):
        return frontend.numpy.swapaxes(self, axis1, axis2)

    def squeeze(self, axis=None):
        return frontend.numpy.squeeze(self, axis)

    def ravel(self):
        return frontend.numpy.ravel(self)

    def flatten(self):
        """ndarray.flatten: a new 1-d array, always (``ravel`` is a view where it can be)."""
        return ew.positive(frontend.numpy.ravel(self))

    def repeat(self, repeats, axis=None):
        return frontend.numpy.repeat(self, repeats, axis)

    def dot(self, other):
        return frontend.numpy.dot(self, other)

    def clip(self, min=None, max=None):  # noqa: A002
        return frontend.numpy.clip(self, min, max)

    def astype(self, dtype):
        """ndarray.astype. To an integer or boolean dtype the result is a step function of x, a constant
        whose derivative is zero almost everywhere (as ``np.floor``; JAX and PyTorch agree)."""
        return shape_ops.astype(self, dtype)

    def argmax(self, axis=None):
        return nondiff.argmax(self, axis)

    def argmin(self, axis=None):
        return nondiff.argmin(self, axis)

    def copy(self, order="C"):
        """ndarray.copy: a new traced value equal to this one (later assignments to either leave the other
        alone), C-contiguous by default as NumPy's (so that its ravel is a view where NumPy's is)."""
        return frontend.numpy._copy_in_order(self, order)

    # -- complex parts and cumulative methods ---------------------------------------
    @property
    def real(self):
        return frontend.numpy.real(self)

    @property
    def imag(self):
        return frontend.numpy.imag(self)

    def conj(self):
        """ndarray.conj: the array itself when it is real, as NumPy's (``np.conj(x)`` is a new array)."""
        return frontend.numpy.conj(self) if self.dtype.kind == "c" else self

    conjugate = conj

    def cumsum(self, axis=None, dtype=None, out=None):
        return frontend.numpy.cumsum(self, axis=axis, dtype=dtype, out=out)

    def cumprod(self, axis=None, dtype=None, out=None):
        return frontend.numpy.cumprod(self, axis=axis, dtype=dtype, out=out)

    def trace(self, offset=0, axis1=0, axis2=1, dtype=None, out=None):
        return frontend.numpy.trace(self, offset, axis1, axis2, dtype, out)

    def diagonal(self, offset=0, axis1=0, axis2=1):
        return frontend.numpy.diagonal(self, offset, axis1, axis2)

    def round(self, decimals=0, out=None):
        return frontend.numpy.round(self, decimals, out)
