"""Batching (``wg.vmap``): a function written for one example, run on a whole batch at once.

A :class:`Batched` value holds every example's value in one array whose axis 0 runs over the
batch; to the function it looks like one example (its ``shape`` leaves the batch axis out). A
primitive called with batched values computes all examples in one call where it has a batching
rule: elementwise primitives (those declared by their derivatives, or with the ``broadcasts`` fact)
batch by broadcasting, once each argument's batch axis is lined up in front of its example's axes
(``rules.broadcasting.batch_elementwise``); a primitive's batching rule,
``rule(prim, values, batched, kwargs)`` (values with the batch on axis 0, and which of them are
batched) returns the batched result, declared beside the primitive with ``defbatch``. A primitive
without a rule runs once per example and the results are stacked: slower, never wrong, with a
one-time warning naming it.

Batched values are opaque to rules, like the program tracer's symbols: ``unbox_all`` stops at them
and ``is_symbolic`` is true, so a rule's data-dependent branch takes its general form and a
conversion to a Python number (``float(x)``, ``if x > 0:``) is refused, since each example would need
a branch of its own. Derivatives compose in either order: under ``wg.grad`` the batched arrays are
traced values of the outer trace, and inside ``vmap(grad(f))`` the backward pass's rules run on
batched values.
"""

import cmath
import dis
import os
import sys
import warnings

import numpy as np

from wengert.core import exits as _exits
from wengert.core.extend import facts, nondiff_primitive
from wengert.core.trace import BOX_TYPES, SYMBOLIC_TYPES, Trace, register_box
from wengert.engines.box import ArrayBox
from wengert.engines.mutation import note_view
from wengert.rules import batched_indexing, broadcasting, indexing
from wengert.rules import elementwise as ew
from wengert.rules import shape as shape_ops
from wengert.rules.broadcasting import NotBatched
from wengert.rules.products import matmul as _matmul

__all__ = ["Batched", "BatchTrace", "NoBatchingRuleWarning", "PlainArrayIndexed", "batching_rule"]

_shape = broadcasting.shape_of
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep


class NoBatchingRuleWarning(UserWarning):
    """A primitive without a batching rule ran once per example under ``wg.vmap``."""


class PlainArrayIndexed(_exits.ExitError):
    """NumPy's own indexing (``W[i]`` with a plain array ``W``, ``np.take(W, i)``) was given an integer
    index batched by ``wg.vmap``: NumPy cannot see the batch, so that ``vmap`` (``trace``) runs its
    function once per example instead (``wengert.api.batching``). ``site`` names the user's line."""

    def __init__(self, message, trace, site):
        super().__init__(message)
        self.trace = trace
        self.site = site


_SUBSCRIPT = dis.opmap.get("BINARY_SUBSCR")


def _numpy_indexes(frame):
    """Whether the conversion called from ``frame`` is NumPy indexing with the value: the frame runs
    ``container[index]`` right now, or is NumPy's own Python code (``np.take``)."""
    if frame.f_code.co_filename.startswith(_NUMPY_DIR):
        return True
    try:
        return frame.f_code.co_code[frame.f_lasti] == _SUBSCRIPT
    except (IndexError, AttributeError):
        return False


@register_box
class Batched(ArrayBox):
    """One example's view of a batch: ``value`` holds every example, on axis 0."""

    __slots__ = ("value", "_trace", "_diag", "_view", "__weakref__")

    def __init__(self, value, trace):
        self.value = value
        self._trace = trace
        self._diag = None
        self._view = None  # set on a view of another batch of this trace (mutation.note_view)

    @classmethod
    def diagonal(cls, d, trace):
        """The batch whose example ``k`` is zero but for ``d.flat[k]`` at flat position ``k``: the
        standard basis of ``d``'s space scaled by ``d`` (``d`` a plain array of ``trace.size``
        elements). It is kept as ``d`` while the operations on it keep it of this form (products
        with an unbatched factor, sums of two such batches, a matrix product to a dense batch), and
        made the dense ``(n, *d.shape)`` array when anything else reads ``value``."""
        b = cls.__new__(cls)
        b._trace = trace
        b._diag = d
        b._view = None
        return b

    def __getattr__(self, name):  # reached only for an unset slot: a diagonal batch's dense value
        if name != "value":
            raise AttributeError(name)
        d = self._diag
        n = d.size
        dense = np.zeros((n,) + d.shape, d.dtype)
        dense.reshape(-1)[::n + 1] = d.reshape(-1)
        self.value = dense
        return dense

    @property
    def shape(self):
        d = self._diag
        return tuple(_shape(self.value)[1:]) if d is None else d.shape

    @property
    def dtype(self):
        d = self._diag
        return ArrayBox.dtype.fget(self) if d is None else d.dtype

    def __len__(self):
        shape = self.shape
        if not shape:
            raise TypeError("len() of unsized object (a 0-d value batched by wg.vmap)")
        return shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self):
        self._refuse("bool()", "Each example may take a branch of its own: write the choice with "
                     "wnp.where(condition, a, b), or batch with a Python loop.")

    _exit_problem = "has a value of its own in each example, which a plain Python or NumPy value cannot hold"

    def _kind(self):
        return "a value batched by wg.vmap"

    def __array__(self, dtype=None, copy=None):
        """Refused, as for every traced value; an integer index into a plain NumPy array (``W[i]``,
        ``np.take(W, i)``) tells ``wg.vmap`` to run once per example, a boolean mask is refused as a
        data-dependent shape."""
        kind = self.dtype.kind
        if kind in "iub" and _numpy_indexes(sys._getframe(1)):
            if kind == "b":
                raise batched_indexing.DataDependentShapeError(batched_indexing.refusal(
                    "Indexing a plain NumPy array with a boolean mask batched by wg.vmap",
                    "the number of True elements"))
            site = _exits.where()
            raise PlainArrayIndexed(
                f"A plain NumPy array indexed by an integer index batched by wg.vmap{site}: NumPy's "
                f"indexing cannot see the batch. Index a traced array (wnp.take(W, i, axis=0)), or call "
                f"wg.vmap, which then runs the function once per example.", self._trace, site)
        return ArrayBox.__array__(self, dtype, copy)

    # a batch of eager tensors (wg.tensor inside wg.vmap): each example's backward() and .grad
    def backward(self, gradient=None, retain_graph=False):
        """Every example's ``backward()`` at once: the examples are independent, so the batch's
        sum has each example's gradient in its own row of the leaves' ``.grad``."""
        if not hasattr(self.value, "backward"):
            raise RuntimeError("backward() inside wg.vmap needs a tensor made by wg.tensor(..., "
                               "requires_grad=True) from a batched value")
        batch_shape = np.shape(self.value.value)
        if gradient is None:
            if self.shape != ():
                raise RuntimeError(f"backward(): grad can be implicitly created only for scalar outputs; "
                                   f"each example has shape {self.shape}: pass gradient=")
            seed = np.ones(batch_shape, dtype=np.result_type(self.value.value))
        elif type(gradient) is Batched:
            seed = gradient.value
        else:  # the same seed for every example
            seed = np.broadcast_to(gradient, batch_shape)
        self.value.backward(seed, retain_graph=retain_graph)

    @property
    def grad(self):
        g = getattr(self.value, "grad", None)
        return None if g is None else Batched(g.value, self._trace)

    @property
    def requires_grad(self):
        return bool(getattr(self.value, "requires_grad", False))

    # masks are batched too (a comparison of batched values): NumPy's logical operators on them
    def __and__(self, other):
        return _bitwise_and(self, other)

    def __rand__(self, other):
        return _bitwise_and(other, self)

    def __or__(self, other):
        return _bitwise_or(self, other)

    def __ror__(self, other):
        return _bitwise_or(other, self)

    def __xor__(self, other):
        return _bitwise_xor(self, other)

    def __rxor__(self, other):
        return _bitwise_xor(other, self)

    def __invert__(self):
        return _invert(self)

    def __repr__(self):
        return f"Batched({self.value!r}, level={self._trace.level})"


SYMBOLIC_TYPES.add(Batched)  # opaque to rules: unbox_all stops here, is_symbolic is true

_bitwise_and, _bitwise_or, _bitwise_xor, _invert = (
    facts(nondiff_primitive(f), broadcasts=True) for f in (np.bitwise_and, np.bitwise_or, np.bitwise_xor,
                                                           np.invert))


class BatchTrace(Trace):
    """One ``wg.vmap`` in progress, over ``size`` examples."""

    __slots__ = ("size",)

    def __init__(self, size):
        super().__init__()
        self.size = size

    def mine(self, x):
        return type(x) is Batched and x._trace is self

    def box(self, value):
        """``value`` (batch on axis 0) as a batched value of this trace."""
        return Batched(value, self)

    def apply1(self, prim, x, kwargs=None):
        if prim is _NEG and type(x) is Batched and x._diag is not None and x._trace is self and not kwargs:
            return Batched.diagonal(-x._diag, self)
        if (not kwargs and prim.derivatives is not None and type(x) is Batched and x._trace is self
                and type(x.value) not in BOX_TYPES):
            return Batched(prim.fun(x.value), self)  # one-argument elementwise: the batch as it is
        return self.apply(prim, (x,), kwargs or {})

    def apply2(self, prim, x, y):
        if prim.broadcasts:  # elementwise on plain arrays: two batches of one rank, or one and a number
            tx, ty = type(x), type(y)
            if (tx is Batched and x._diag is not None) or (ty is Batched and y._diag is not None):
                out = _diagonal2(self, prim, x, y)
                if out is not None:
                    return out
            if tx is Batched and x._trace is self and type(x.value) is np.ndarray:
                if ty is Batched and y._trace is self and type(y.value) is np.ndarray:
                    if x.value.ndim == y.value.ndim:
                        return Batched(prim.fun(x.value, y.value), self)
                elif ty is float or ty is int:
                    return Batched(prim.fun(x.value, y), self)
            elif (tx is float or tx is int) and ty is Batched and y._trace is self \
                    and type(y.value) is np.ndarray:
                return Batched(prim.fun(x, y.value), self)
        return self.apply(prim, (x, y), {})

    def apply(self, prim, args, kwargs):
        if prim is _MATMUL and len(args) == 2 and not kwargs:
            out = _diagonal_matmul(self, *args)
            if out is not None:
                return out
        rule = batching_rule(prim)
        if rule is not None:
            batched, values, nested = [], [], False
            for a in args:
                t = type(a)
                if t is Batched and a._trace is self:
                    batched.append(True)
                    values.append(a.value)
                else:
                    batched.append(False)
                    values.append(a)
                    nested = nested or ((t is tuple or t is list or t is dict) and _holds(self, a))
            if nested and getattr(rule, "unpacks_tuples", False):  # x[i, j] with i batched: one per part
                values, batched, nested = _unpacked(self, values, batched)
            if not nested and not (kwargs and any(_holds(self, v) for v in kwargs.values())):
                out = rule(prim, values, batched, kwargs)
                if type(out) is NotBatched:  # the same for every example (a shape)
                    return out.value
                if out is not NotImplemented:  # a rule may decline (an argument it cannot batch)
                    boxed = _boxed(self, out, prim)
                    if type(out) is np.ndarray and out.base is not None:  # a view: of an argument's batch?
                        note_view(boxed, out, prim, args, kwargs, self, values)
                    return boxed
        return self.loop(prim, args, kwargs)

    def loop(self, prim, args, kwargs):
        """``prim`` once per example, the results stacked (for a primitive without a batching rule)."""
        name = prim.__name__
        if name not in _WARNED:
            _WARNED.add(name)
            warnings.warn(f"wg.vmap: '{name}' has no batching rule, so it runs once per example "
                          f"({self.size} calls here) and the results are stacked; the answer is the "
                          f"same, only slower.", NoBatchingRuleWarning, stacklevel=3)
        outs = [prim(*[_example(self, a, i) for a in args],
                     **{k: _example(self, v, i) for k, v in kwargs.items()}) for i in range(self.size)]
        return _stacked(self, outs, prim)


_WARNED = set()

# Diagonal batches (``Batched.diagonal``): what keeps them diagonal. Each case computes exactly what
# the dense batch would give, zeros included, so a factor that is not finite (0 * inf is nan off the
# diagonal) or a divisor with a zero declines, and the dense batch is used.
_ADD, _SUB, _MUL, _DIV, _NEG = (f.primitive for f in (ew.add, ew.subtract, ew.multiply, ew.true_divide,
                                                      ew.negative))
_MATMUL = _matmul.primitive
_KINDS = frozenset("biufc")


def _plain_factor(v, d, divisor=False):
    """``v`` as an unbatched factor of the diagonal batch ``d`` that keeps it diagonal (a plain,
    finite number or array broadcasting to ``d``'s shape), or None."""
    t = type(v)
    if t is float or t is int or t is complex:
        ok = cmath.isfinite(v) and not (divisor and v == 0)
        return v if ok else None
    if t is not np.ndarray and not isinstance(v, np.generic):
        return None
    v = np.asarray(v)
    if v.dtype.kind not in _KINDS or v.ndim > d.ndim or np.broadcast_shapes(v.shape, d.shape) != d.shape:
        return None
    if not np.isfinite(v.sum()) or (divisor and not v.all()):  # a finite sum: every element finite
        return None
    return v


def _diagonal2(trace, prim, x, y):
    """An elementwise binary primitive on at least one diagonal batch, kept diagonal; or None."""
    dx = x._diag if type(x) is Batched and x._trace is trace else None
    dy = y._diag if type(y) is Batched and y._trace is trace else None
    if dx is not None and dy is not None:
        if prim is _ADD or prim is _SUB:
            return Batched.diagonal(prim.fun(dx, dy), trace)
        return None
    d, other = (dx, y) if dx is not None else (dy, x)
    if d is None:
        return None
    if prim is _MUL or (prim is _DIV and dx is not None):
        f = _plain_factor(other, d, divisor=prim is _DIV)
        if f is None:
            return None
        return Batched.diagonal(prim.fun(dx, f) if dx is not None else prim.fun(f, dy), trace)
    if (prim is _ADD or prim is _SUB) and type(other) is Batched and other._trace is trace \
            and other._diag is None and type(other.value) is np.ndarray:
        dense = other.value
        if dense.shape != (trace.size,) + d.shape:
            return None
        out = np.empty(dense.shape, np.result_type(dense, d))  # C order, so that the view below is one
        if dx is None or prim is _ADD:
            np.copyto(out, dense)
        else:
            np.negative(dense, out=out)
        diagonal = out.reshape(-1)[::trace.size + 1]  # a view: example k's element k
        if prim is _SUB and dy is not None:  # dense - diagonal
            diagonal -= d.reshape(-1)
        else:
            diagonal += d.reshape(-1)
        return Batched(out, trace)
    return None


def _diagonal_matmul(trace, a, b):
    """``a @ b`` with one side a diagonal batch of vectors and the other a plain finite matrix or
    vector: example ``k`` is ``d[k]`` times row ``k`` of ``b`` (or column ``k`` of ``a``); or None."""
    da = a._diag if type(a) is Batched and a._trace is trace else None
    db = b._diag if type(b) is Batched and b._trace is trace else None
    if (da is None) == (db is None):
        return None
    d, m = (da, b) if da is not None else (db, a)
    if d.ndim != 1 or type(m) is not np.ndarray or m.ndim not in (1, 2) or m.dtype.kind not in _KINDS:
        return None
    if (m.shape[0] if da is not None else m.shape[-1]) != d.shape[0] or not np.isfinite(m.sum()):
        return None
    if m.ndim == 1:  # a dot product: example k is d[k] * m[k]
        return Batched(d * m, trace)
    return Batched(d[:, None] * (m if da is not None else m.T), trace)


def batching_rule(prim):
    """``prim``'s batching rule (declared, or the elementwise one its facts imply), or None."""
    rule = getattr(prim, "batch", None)
    if rule is None and (prim.broadcasts or prim.derivatives is not None):
        return broadcasting.batch_elementwise
    return rule


def _holds(trace, x):
    """Whether ``x`` is, or holds in a list, tuple or dict, a batched value of ``trace``."""
    t = type(x)
    if t is Batched:
        return x._trace is trace
    if t is list or t is tuple:
        return any(_holds(trace, v) for v in x)
    if t is dict:
        return any(_holds(trace, v) for v in x.values())
    return False


def _unpacked(trace, values, batched):
    """For a rule that takes them (``unpacks_tuples``): each tuple argument holding batched values as
    the tuple of their values, its flag a tuple of one flag per element; ``nested`` still true where
    a batched value sits deeper (a list, a tuple in a tuple)."""
    values, batched, nested = list(values), list(batched), False
    for k, v in enumerate(values):
        if type(v) is tuple and _holds(trace, v):
            flags = tuple(type(p) is Batched and p._trace is trace for p in v)
            values[k] = tuple(p.value if f else p for p, f in zip(v, flags))
            batched[k] = flags
            nested = nested or any(_holds(trace, p) for p, f in zip(v, flags) if not f)
        elif not batched[k] and _holds(trace, v):
            nested = True
    return values, batched, nested


def _example(trace, x, i):
    """Example ``i`` of ``x`` (``x`` itself where it is not batched by ``trace``)."""
    t = type(x)
    if t is Batched and x._trace is trace:
        return indexing.getitem(x.value, i)
    if (t is list or t is tuple) and _holds(trace, x):
        return t(_example(trace, v, i) for v in x)
    if t is dict and _holds(trace, x):
        return {k: _example(trace, v, i) for k, v in x.items()}
    return x


_NUMBERS = (float, complex, np.ndarray, np.generic)


def _array_like(x):
    """Another array library's array (Dask, CuPy): it has a shape, a dtype and NumPy's protocols."""
    return hasattr(x, "__array_function__") and hasattr(x, "shape") and hasattr(x, "dtype")


def _stacked(trace, outs, prim=None):
    """Per-example results as one batched result (tuples and lists component by component); a
    non-numeric result (a shape, a dtype) must be the same for every example and is kept as it is.
    Results of different shapes (a boolean mask's selection, ``nonzero``) cannot be one batch."""
    first = outs[0]
    t = type(first)
    if t is tuple or t is list:
        return t(_stacked(trace, [o[k] for o in outs], prim) for k in range(len(first)))
    if t in BOX_TYPES or isinstance(first, _NUMBERS) or _array_like(first) \
            or (t in (int, bool) and any(o != first for o in outs)):
        shapes = [tuple(_shape(o)) for o in outs]
        if any(s != shapes[0] for s in shapes):
            name = "" if prim is None else f"'{prim.__name__}' "
            raise ValueError(
                f"wg.vmap: {name}gives results of different shapes for different examples ({shapes[0]} "
                f"and {next(s for s in shapes if s != shapes[0])}): its result's shape depends on the "
                f"data (a boolean mask's selection, nonzero, unique), so the examples cannot be one "
                f"batch, as in JAX. Keep the shape fixed: wnp.where(mask, x, 0) instead of x[mask], "
                f"or run a Python loop over the examples.")
        parts = [shape_ops.reshape(o, (1,) + tuple(_shape(o))) for o in outs]
        return trace.box(shape_ops.concatenate(*parts, axis=0))
    if any(o != first for o in outs):
        raise ValueError(f"wg.vmap: a result differs between examples but is not an array or a number "
                         f"({first!r}, {outs[1]!r}, ...)")
    return first


def _boxed(trace, out, prim):
    """A batching rule's result as batched values, each checked to hold the batch on axis 0."""
    t = type(out)
    if t is tuple or t is list:
        return t(_boxed(trace, o, prim) for o in out)
    shape = tuple(_shape(out))
    if shape[:1] != (trace.size,):
        raise ValueError(f"wg.vmap: the batching rule of '{prim.__name__}' returned shape {shape}, but a "
                         f"batch of {trace.size} examples must be on axis 0 of its result (wg.defbatch)")
    return trace.box(out)
