"""``Tensor``: the reverse-mode value, with PyTorch's habits (``requires_grad``, ``backward()``,
``.grad``, ``detach()``, ``no_grad()``, ``retain_grad()``, methods such as ``exp``, ``clamp``,
``view``, ``permute`` and reductions taking ``dim=``/``keepdim=``).

Tensors made by ``wg.tensor`` live on the *eager* trace, the lowest level, which never closes:
only operations that involve a tensor requiring a gradient are recorded, and ``y.backward()`` runs
the backward pass from ``y``. Inside ``wg.grad`` and friends, the boxed arguments are Tensors too,
on that transform's own trace.
"""

import math
import threading
from collections import namedtuple
from typing import Any

import numpy as np

from wengert.core import exits as _exits
from wengert.core import frontend
from wengert.core.trace import BOX_TYPES, register_box, unbox_all
from wengert.engines.batching import Batched
from wengert.engines.box import ArrayBox
from wengert.engines.escaped import LIVE, notice_writes_into, shared
from wengert.engines.kept import PLAIN, OneOperation, constants_kept, may_hold_arrays
from wengert.engines.mutation import assign, augmented_assign, mark_view, note_inplace_write
from wengert.engines.reverse import Node, NodeMethods, ReverseTrace, ScalarNode, backward_pass, is_inexact
from wengert.engines.saving import read_only_view
from wengert.engines.views import Retake
from wengert.rules import elementwise as ew
from wengert.rules import nn as nn_rules

__all__ = ["Tensor", "ScalarTensor", "TensorMethods", "tensor", "no_grad", "enable_grad", "is_grad_enabled"]

_state = threading.local()


def is_grad_enabled():
    """Whether eager tensors record operations (``torch.is_grad_enabled``)."""
    return getattr(_state, "enabled", True)


class _GradMode:
    def __init__(self, enabled):
        self.enabled = enabled

    def __enter__(self):
        self.prev = is_grad_enabled()
        _state.enabled = self.enabled

    def __exit__(self, *exc):
        _state.enabled = self.prev

    def __call__(self, fun):
        import functools

        @functools.wraps(fun)
        def wrapper(*args, **kwargs):
            with _GradMode(self.enabled):
                return fun(*args, **kwargs)

        return wrapper


def no_grad():
    """Context manager (or decorator): eager tensors record nothing inside (``torch.no_grad``).

    It concerns eager tensors only: ``wg.grad`` and the other transforms always differentiate
    what they were asked to.
    """
    return _GradMode(False)


def enable_grad():
    """Context manager (or decorator) re-enabling recording inside ``no_grad``."""
    return _GradMode(True)


class TensorMethods(NodeMethods):
    """What :class:`Tensor` can do (PyTorch's habits), shared with :class:`ScalarTensor`."""

    __slots__ = ()

    # -- PyTorch's API ---------------------------------------------------------------------------
    @property
    def grad(self):
        """Accumulated gradient of a leaf after ``backward()`` (a Tensor), or None."""
        return getattr(self, "_grad", None)

    @grad.setter
    def grad(self, value):
        self._grad = None if value is None else _constant(unbox_all(value))

    @property
    def is_leaf(self):
        return self._prim is None

    @property
    def grad_fn(self):
        """Name of the primitive that made this tensor (None for leaves and constants)."""
        return None if self._prim is None else self._prim.__name__

    @property
    def data(self):
        """The same storage, detached from the graph (``torch.Tensor.data``)."""
        return self.detach()

    def backward(self, gradient=None, retain_graph=False):
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (``torch.Tensor.backward``)."""
        if self._trace is not EAGER:
            raise RuntimeError(
                "backward() called on a value traced by a wengert transform (wg.grad, wg.vjp, ...); "
                "inside a transform return the value instead, and the transform differentiates it")
        if not self.requires_grad:
            raise RuntimeError(
                "backward(): this tensor does not require grad and has no graph; create the "
                "inputs with wg.tensor(..., requires_grad=True)")
        value = self.value
        if gradient is None:
            if math.prod(np.shape(value)) != 1:  # from the shape: a Dask value is not computed
                raise RuntimeError(
                    f"backward(): grad can be implicitly created only for scalar outputs; this "
                    f"tensor has shape {self.shape}: pass gradient= of that shape")
            seed = 1.0 if type(value) is float else np.ones_like(value)
        else:
            seed = unbox_all(gradient)
            if np.shape(seed) != self.shape:
                raise RuntimeError(
                    f"backward(): gradient has shape {np.shape(seed)}, but the tensor has shape "
                    f"{self.shape}")
        adj, nodes = backward_pass([(self, seed)], retain_graph=retain_graph, keep_all=_RETAINING[0])
        for node in nodes:
            if (node._prim is None and node.requires_grad) or getattr(node, "_retain", False):
                g = adj.get(node)
                if g is not None:
                    node._accumulate_grad(g)

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in ``.grad`` after ``backward()``
        (``torch.Tensor.retain_grad``). Once any tensor has asked, backward passes keep every
        node's adjoint until they end (PyTorch's hooks, in effect), which costs memory then."""
        if self._trace is not EAGER:
            raise RuntimeError("retain_grad() is for eager tensors (wg.tensor); inside a transform "
                               "return the intermediate value with has_aux=True, or use wg.vjp")
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._prim is not None:
            self._retain = True
            _RETAINING[0] = True
        return self

    def _accumulate_grad(self, g):
        if isinstance(g, (np.ndarray, np.generic)):
            g = np.array(g, dtype=self.dtype)  # a copy: never alias a seed or a user's array
        elif type(g) is not float:  # another array library's (Dask: immutable, kept lazy)
            g = g.astype(self.dtype)
        prev = self.grad
        self._grad = _constant(g if prev is None else prev.value + g)

    def detach(self):
        """The value without its graph, as a Tensor that does not require grad. Inside a transform
        its array is a read-only view: the transform's graph reads that value, which a write would
        change (an eager tensor's writes are caught by the next ``backward()`` instead); a later write
        into ``self`` is seen in it, as PyTorch's detached tensor shares the storage."""
        if self._trace is EAGER:
            return _constant(self.value)
        out = _constant(read_only_view(self.value))
        mark_view(out, self, Retake(Tensor.detach, "detach", readonly=True))
        return out

    def requires_grad_(self, requires_grad=True):
        """Make this leaf tensor (not) require grad, in place."""
        if self._prim is not None:
            raise RuntimeError("requires_grad_() can only change leaf tensors; use detach() first")
        if requires_grad:
            _check_float(self.value, "requires_grad_()")
        self.requires_grad = requires_grad
        return self

    def numpy(self):
        """The value as a NumPy array (``torch.Tensor.numpy``); detach first if it requires grad."""
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        return shared(np.asarray(self.value))

    # -- PyTorch's methods: elementwise functions, shapes, reductions with dim=/keepdim= ----------
    def exp(self):
        """torch.Tensor.exp."""
        return ew.exp(self)

    def log(self):
        """torch.Tensor.log."""
        return ew.log(self)

    def sqrt(self):
        """torch.Tensor.sqrt."""
        return ew.sqrt(self)

    def tanh(self):
        """torch.Tensor.tanh."""
        return ew.tanh(self)

    def abs(self):
        """torch.Tensor.abs."""
        return ew.abs(self)

    def pow(self, exponent):
        """torch.Tensor.pow."""
        return ew.power(self, exponent)

    def sigmoid(self):
        """torch.Tensor.sigmoid: 1 / (1 + exp(-x)), from z = exp(-|x|), which never overflows."""
        z = ew.exp(-ew.abs(self))
        return ew.where(unbox_all(self) >= 0, 1.0 / (1.0 + z), z / (1.0 + z))

    def relu(self):
        """torch.Tensor.relu (derivative 0 at 0, as PyTorch)."""
        return nn_rules.relu(self)

    def clamp(self, min=None, max=None):  # noqa: A002 - PyTorch's names
        """torch.Tensor.clamp (numpy.clip; the gradient passes where min <= x <= max)."""
        return frontend.numpy.clip(self, min, max)

    clip = clamp

    def view(self, *shape):
        """torch.Tensor.view: the reshaped tensor, a view as NumPy's reshape is (a write into either
        is seen in the other, as PyTorch's views share the storage)."""
        if len(shape) == 1 and isinstance(shape[0], (type, np.dtype, str)):
            raise TypeError("Tensor.view(dtype) is not supported; use .astype(dtype)")
        return self.reshape(*shape)

    def permute(self, *dims):
        """torch.Tensor.permute (numpy.transpose with the axes given)."""
        if len(dims) == 1 and not isinstance(dims[0], (int, np.integer)):
            dims = dims[0]
        return frontend.numpy.transpose(self, tuple(dims))

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        """numpy.sum, or torch.Tensor.sum with ``dim=``/``keepdim=``."""
        axis, keepdims = _torch_axes(axis, keepdims, dim, keepdim)
        return frontend.numpy.sum(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        """numpy.mean, or torch.Tensor.mean with ``dim=``/``keepdim=``."""
        axis, keepdims = _torch_axes(axis, keepdims, dim, keepdim)
        return frontend.numpy.mean(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        """numpy.prod, or torch.Tensor.prod with ``dim=``/``keepdim=``."""
        axis, keepdims = _torch_axes(axis, keepdims, dim, keepdim)
        return frontend.numpy.prod(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def max(self, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        """numpy.max; with ``dim=``, torch.Tensor.max: the pair ``(values, indices)``."""
        return self._extreme(frontend.numpy.max, np.argmax, axis, out, keepdims, dim, keepdim)

    def min(self, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        """numpy.min; with ``dim=``, torch.Tensor.min: the pair ``(values, indices)``."""
        return self._extreme(frontend.numpy.min, np.argmin, axis, out, keepdims, dim, keepdim)

    def _extreme(self, reduce, arg, axis, out, keepdims, dim, keepdim):
        axis, keepdims = _torch_axes(axis, keepdims, dim, keepdim)
        values = reduce(self, axis=axis, out=out, keepdims=keepdims)
        if dim is None:
            return values
        indices = arg(np.asarray(unbox_all(self.value)), axis=axis, keepdims=keepdims)
        return ValuesIndices(values, indices)

    def _kind(self):
        if self._trace is EAGER:
            return "a tensor that requires grad" if self.requires_grad else "a tensor"
        return "a value traced by a reverse-mode transform (wg.grad, wg.vjp, wg.jacrev, ...)"

    def item(self, *args):
        """The value of a one-element eager tensor as a Python number, without its derivative
        (``torch.Tensor.item``: the way to log a loss). Inside a transform (``wg.grad``, ...) it is
        refused, as ``float()`` is: the number would silently drop the derivative there."""
        if not self.requires_grad and self._trace is not EAGER:  # a transform's constant (a buffer)
            return np.asarray(self.value).item(*args)  # (a lower level's box converts itself, or refuses)
        if self._trace is not EAGER or _traced_by_transform(self):
            ArrayBox.item(self)
        v = unbox_all(self.value)
        return v if type(v) is float and not args else np.asarray(v).item(*args)

    def tolist(self):
        """The eager tensor's value as nested Python lists, without its derivative
        (``torch.Tensor.tolist``); refused inside a transform, as :meth:`item` is."""
        if not self.requires_grad and self._trace is not EAGER:  # a transform's constant (a buffer)
            return np.asarray(self.value).tolist()
        if self._trace is not EAGER or _traced_by_transform(self):
            ArrayBox.tolist(self)
        return np.asarray(unbox_all(self.value)).tolist()

    def __array__(self, dtype=None, copy=None):
        if self.requires_grad:
            ArrayBox.__array__(self, dtype)
        out = np.array(self.value, dtype=dtype, copy=copy)
        return shared(out) if out is self.value else out

    def __float__(self):
        """``float(t)`` of a one-element eager tensor, without its derivative, as in PyTorch (how a
        training loop logs ``float(loss)``); refused inside a transform, where it would silently drop
        the derivative (``float(wg.stop_gradient(x))`` there)."""
        if self.requires_grad and self._leaves_a_transform():
            ArrayBox.__float__(self)
        return float(_scalar(self.value))

    def __int__(self):
        """``int(t)`` of a one-element eager tensor (truncating, as PyTorch); refused inside a transform."""
        if self.requires_grad and self._leaves_a_transform():
            ArrayBox.__int__(self)
        return int(_scalar(self.value))

    def __format__(self, spec):
        """``f"{loss:.3f}"``: a 0-d eager tensor formats as its number (``torch.Tensor.__format__``);
        any other tensor, or a traced value with an empty ``spec``, as its ``str``. A format ``spec``
        on a traced value is refused inside a transform, as ``float()`` is."""
        if self.ndim == 0 and (spec or not self._leaves_a_transform()):
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def _leaves_a_transform(self):
        """Whether a number taken from this requires-grad value would leave a transform's trace, or
        silently leave the graph: ``buf[i] = t`` into a plain array is refused for eager tensors too."""
        if self._trace is not EAGER or _traced_by_transform(self):
            return True
        frame, _ = _exits.user_site()
        return frame is not None and _exits.storing(frame)

    def __index__(self):
        if self.requires_grad:
            ArrayBox.__index__(self)
        return int(self.value)

    # -- in place: truly in place only where nothing is recorded; else rebound (see mutation.py) --------
    def _inplace(self, op, other, symbol, functional):
        if self._recording(other):
            self._check_not_leaf(symbol)
            return augmented_assign(self, functional, other, symbol)
        other = unbox_all(other)
        if isinstance(self.value, np.ndarray):
            op(self.value, other, out=self.value, casting="same_kind")
            note_inplace_write(self.value, f"'{symbol}' on a tensor of shape {self.shape}")
        else:
            self.value = op(self.value, other)
        return self

    def _recording(self, other=None):
        """Whether an in-place update of this tensor by ``other`` must be recorded (a functional one)."""
        if self._trace is not EAGER or _traced_by_transform(other):
            return True
        return is_grad_enabled() and (self.requires_grad or _requires_grad(other))

    def _check_not_leaf(self, symbol):
        base = self
        while getattr(base, "_view", None) is not None and base._view[0] is not None:
            base = base._view[0]  # a write into a view writes into what it views (mutation.note_view)
        if base is not self and base._trace is EAGER and base._prim is None and base.requires_grad:
            raise RuntimeError(
                f"in-place {symbol} into a view of a leaf tensor that requires grad (PyTorch refuses it "
                f"too): the write would go through to the leaf, whose .grad would no longer belong to "
                f"the value you created. Write into a copy (y = x.copy(); y[...] = ...), or update the "
                f"leaf inside `with wg.no_grad():`")
        if self._trace is EAGER and self._prim is None and self.requires_grad:
            instead = "x = x " + symbol[:-1] + " y" if symbol.endswith("=") and len(symbol) <= 3 else \
                "y = x.copy(); y[...] = ..."
            raise RuntimeError(
                f"in-place {symbol} on a leaf tensor that requires grad (PyTorch refuses it too): its "
                f".grad would no longer belong to the value you created. Write {instead}, or update it "
                f"inside `with wg.no_grad():`")

    def __iadd__(self, other):
        return self._inplace(np.add, other, "+=", ew.add)

    def __isub__(self, other):
        return self._inplace(np.subtract, other, "-=", ew.subtract)

    def __imul__(self, other):
        return self._inplace(np.multiply, other, "*=", ew.multiply)

    def __itruediv__(self, other):
        return self._inplace(np.true_divide, other, "/=", ew.true_divide)

    def __ipow__(self, other):
        return self._inplace(np.power, other, "**=", ew.power)

    def __setitem__(self, idx, other):
        if self._recording(other):
            self._check_not_leaf("assignment x[...] = ...")
            assign(self, idx, other)
            return
        self.value[unbox_all(idx)] = unbox_all(other)
        note_inplace_write(self.value, f"assignment x[...] = ... into a tensor of shape {self.shape}")

    def zero_(self):
        """Set every element to zero, in place (e.g. ``p.grad.zero_()``)."""
        return self._inplace(np.multiply, 0.0, "*=", ew.multiply)

    def __repr__(self):
        if self._trace is not EAGER:  # a functional user made no tensor: say what traces the value
            value = unbox_all(self.value)
            body = repr(value) if type(value) is float else repr(np.asarray(value))
            by = getattr(self._trace, "transform", None)
            return f"Traced({body}, by {'wg.' + by if by else 'a reverse-mode transform'})"
        body = np.array2string(np.asarray(unbox_all(self.value)), separator=", ", prefix="tensor(")
        extra = ""
        if self._prim is not None:
            extra = f", grad_fn={self._prim.__name__}"
        elif self.requires_grad:
            extra = ", requires_grad=True"
        return f"tensor({body}{extra})"


class _TensorType(type):
    """``isinstance(v, Tensor)`` holds for the transforms' compact float nodes too (ScalarTensor)."""

    def __instancecheck__(cls, obj):
        return type.__instancecheck__(cls, obj) or (cls is Tensor and type(obj) is ScalarTensor)


@register_box
class Tensor(Node, TensorMethods, metaclass=_TensorType):
    """A value that can carry a derivative. Make one with :func:`wengert.tensor`."""

    __slots__ = ("_grad", "_retain")  # a leaf's accumulated gradient after backward(); retain_grad()


@register_box
class ScalarTensor(ScalarNode, TensorMethods):
    """A Python float recorded by a transform (``wg.grad``, ...): a :class:`Tensor` in behaviour,
    in the compact layout of ``ScalarNode`` (a scalar loop's tape is mostly these)."""

    __slots__ = ()


ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])
"""What ``Tensor.max(dim=...)`` and ``Tensor.min(dim=...)`` return, as ``torch.return_types.max``."""

_RETAINING = [False]
"""Whether some tensor has asked retain_grad(): backward passes then keep every adjoint."""


def _torch_axes(axis, keepdims, dim, keepdim):
    """NumPy's ``axis``/``keepdims`` from PyTorch's ``dim``/``keepdim`` (either spelling, not both)."""
    if dim is not None:
        if axis is not None:
            raise TypeError("give the axes as axis= (NumPy) or dim= (PyTorch), not both")
        axis = tuple(dim) if isinstance(dim, list) else dim
    if keepdim is not None:
        keepdims = keepdim
    return axis, keepdims


class EagerTrace(ReverseTrace):
    """The trace of ``wg.tensor`` values: lowest level, always open, switched off by no_grad."""

    __slots__ = ()

    # A tensor's in-place writes are stamped and the backward pass refuses what they overwrote
    # (engines.mutation), as PyTorch does; the caller's own arrays and lists passed beside a tensor
    # are copied as the operation is recorded instead (_caller_constants_kept), as no stamp sees
    # a write into them.
    keeps_constants = False

    def __init__(self, box_type):
        super().__init__(box_type)
        self.records_inline = False  # Node's inline recording is left to apply2, which honours no_grad

    def apply(self, prim, args, kwargs):
        if not is_grad_enabled():
            plain = [a.value if type(a) in BOX_TYPES and a._trace is self else a for a in args]
            return self.constant(prim(*plain, **kwargs))
        if LIVE:  # the caller holds a tensor's memory as an array (numpy()): stamp a write through it
            notice_writes_into([a.value if type(a) in BOX_TYPES else a for a in args])
        for a in args:
            if type(a) not in BOX_TYPES and type(a) not in PLAIN and may_hold_arrays(a):
                args, kwargs = _caller_constants_kept(self, prim, args, kwargs)
                break
        else:
            if kwargs and any(type(v) not in PLAIN and may_hold_arrays(v) for v in kwargs.values()):
                args, kwargs = _caller_constants_kept(self, prim, args, kwargs)
        return ReverseTrace.apply(self, prim, args, kwargs)

    def apply1(self, prim, x, kwargs=None):
        if not is_grad_enabled() or kwargs or LIVE:
            return self.apply(prim, (x,), kwargs or {})
        return ReverseTrace.apply1(self, prim, x, kwargs)

    def apply2(self, prim, x, y):
        if not is_grad_enabled() or LIVE:
            return self.apply(prim, (x, y), {})
        tx = type(x)
        ty = type(y)
        if ((tx not in BOX_TYPES and tx not in PLAIN and may_hold_arrays(x))
                or (ty not in BOX_TYPES and ty not in PLAIN and may_hold_arrays(y))):
            x, y = _caller_constants_kept(self, prim, (x, y), None)[0]
        return ReverseTrace.apply2(self, prim, x, y)

    def constant(self, value):
        return Tensor.make(value, self, None, None, None, (), False)


EAGER = EagerTrace(Tensor)
EAGER.level = 0


def _caller_constants_kept(trace, prim, args, kwargs):
    """``(args, kwargs)`` of an operation on eager tensors with the caller's arrays and lists (not a
    tensor's: those are stamped) that ``prim``'s rules read replaced by read-only copies, where the
    operation is recorded (a tensor among ``args`` requires a gradient): ``w * arr``, then
    ``arr[0] = 5.0``, and the backward pass still reads the old ``arr``, as ``torch.mul`` of a new
    tensor made from it would."""
    parents = [a if type(a) in BOX_TYPES and a._trace is trace and a.requires_grad else None
               for a in args]
    for p in parents:
        if p is not None:
            return constants_kept(OneOperation(), prim, args, parents, kwargs)
    return args, kwargs


def _traced_by_transform(x):
    """Whether ``x`` is, or holds, a value traced by a transform (not an eager tensor)."""
    t = type(x)
    if t in BOX_TYPES:
        return x._trace is not EAGER or type(x.value) in BOX_TYPES
    if t is list or t is tuple:
        return any(_traced_by_transform(v) for v in x)
    return False


def _first_box(x):
    if type(x) in BOX_TYPES:
        return x
    return next(b for b in map(_first_box, x) if b is not None) if type(x) in (list, tuple) else None


def _requires_grad(x):
    t = type(x)
    if t is Tensor:
        return x.requires_grad
    if t is list or t is tuple:
        return any(_requires_grad(v) for v in x)
    return False




def _scalar(value):
    """A one-element array as a 0-d one (NumPy deprecates ``float()`` of a 1-element 1-d array)."""
    if type(value) is np.ndarray and value.ndim and value.size == 1:
        return value.reshape(())
    return value


def _constant(value):
    return Tensor.make(value, EAGER, None, None, None, (), False)


def _check_float(value, where):
    if not is_inexact(value):
        raise RuntimeError(
            f"{where}: only floating point and complex tensors can require gradients, got dtype "
            f"{np.result_type(value)}; convert first, e.g. wg.tensor(data, dtype=float)")


def tensor(data: Any, requires_grad: bool = False, dtype: Any = None) -> Tensor:
    """A new leaf tensor holding (a copy of) ``data`` (``torch.tensor``).

    Python floats stay Python floats (a 0-d tensor); everything else becomes a NumPy array,
    float64 by default for Python numbers, as in NumPy. An eager tensor is copied without its graph,
    as ``torch.tensor`` copies; a value traced by a transform (``wg.grad``, ...) is refused, since
    the new leaf would silently drop its derivative.
    """
    if type(data) is Batched and type(data.value) not in BOX_TYPES:  # inside wg.vmap: a batch of leaves
        return Batched(tensor(data.value, requires_grad, dtype), data._trace)  # type: ignore[return-value]
    if _traced_by_transform(data):
        raise _exits.refusal(
            _first_box(data), "wg.tensor(x)",
            "Use x itself (it is already a traced value, with all of Tensor's methods), or "
            "wg.stop_gradient(x) for a constant.")
    data = unbox_all(data)
    value: Any
    if type(data) is float and dtype is None:
        value = data
    else:
        value = np.array(data, dtype=dtype)
    if requires_grad:
        _check_float(value, "wg.tensor(..., requires_grad=True)")
    return Tensor.make(value, EAGER, None, None, None, (), bool(requires_grad))
