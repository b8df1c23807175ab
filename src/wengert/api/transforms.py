"""Function transforms: grad, value_and_grad, vjp, elementwise_grad (reverse mode); jvp (forward
mode); the Jacobians, Hessians and hvp built on them are in ``wengert.api.jacobians``. Semantics
follow JAX and HIPS autograd.

Each call opens a new trace, boxes the arguments asked for (their pytree leaves), runs the
function, and reads the derivative off the result. Nesting works to any depth (see ``trace.py``).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Literal, ParamSpec, Sequence, TypeVar, overload

import numpy as np

from wengert.api.tensor import ScalarTensor, Tensor
from wengert.api.tree import (
    _LEAF,
    accepts_argnum,
    argnums_checked,
    argnums_resolved,
    describe,
    tree_flatten,
    tree_map,
    tree_unflatten,
)
from wengert.core.exits import ExitError
from wengert.core.exits import name_of as _name
from wengert.core.trace import BOX_TYPES, unbox_all
from wengert.engines.forward import Dual, ForwardTrace
from wengert.engines.kept import keep_copies
from wengert.engines.reverse import ReverseTrace, backward_pass, gc_paused, is_inexact
from wengert.engines.saving import read_only_view
from wengert.rules.nondiff import stop_gradient as stop_gradient_statement
from wengert.rules.nondiff import zeros_like

__all__ = ["grad", "value_and_grad", "vjp", "vjp_at_once", "elementwise_grad", "jvp", "stop_gradient"]

# The transforms' types: a transformed function takes ``fun``'s parameters (P); its value keeps
# ``fun``'s result type (R), its aux (A); a gradient is ``Any`` (the arguments' structure, as arrays),
# a tuple of them for a tuple ``argnums``. ``argnum=`` (HIPS autograd's spelling of ``argnums``) is
# read by ``accepts_argnum`` before the transform is called; the signatures name it for type checkers.
P = ParamSpec("P")
R = TypeVar("R")
A = TypeVar("A")
T = TypeVar("T")


def _where(transform, fun, argnums):
    return f"wg.{transform}({_name(fun)}, argnums={argnums!r})"


def _argnums(fun, argnums, transform):
    """``argnums`` checked once, when the transform is made (an int or a tuple of ints)."""
    return argnums_checked(argnums, lambda: _where(transform, fun, argnums))


def _argnums_tuple(fun, argnums, nargs, transform):
    """``(single, nums)`` for a call with ``nargs`` positional arguments: in range, none twice."""
    where = lambda: _where(transform, fun, argnums)  # noqa: E731 - the message, only when needed
    single, nums = argnums_checked(argnums, where)
    return single, argnums_resolved(nums, nargs, where)


def _refuse_output(out, fun, transform, wanted):
    """The function returned None or a string (or a tape's variable) where ``wanted`` was due."""
    if out is None:
        raise TypeError(f"wg.{transform}({_name(fun)}): the function returned None; it must return "
                        f"{wanted}. Is a return statement missing?")
    for leaf in tree_flatten(out)[0]:
        if isinstance(leaf, (str, bytes)):
            raise TypeError(f"wg.{transform}({_name(fun)}): the function returned a string "
                            f"({leaf!r:.40}); it must return {wanted}.")


def _refuse_leaked(out, trace, fun, transform):
    """A traced value of a transform that began inside ``fun`` and has finished (an inner ``wg.grad``'s
    value kept in a list or a closure and used after it returned) cannot be differentiated by
    ``trace``: without this check its derivative would silently be taken as zero."""
    for leaf in ((out,) if type(out) in BOX_TYPES else tree_flatten(out)[0]):
        if type(leaf) in BOX_TYPES and leaf._trace is not trace and leaf._trace.level > trace.level:
            raise TypeError(
                f"wg.{transform}({_name(fun)}): the function's output depends on a value traced by a "
                f"transform called inside it that has already returned (a value kept from inside an "
                f"inner wg.grad, wg.vjp, ... after it finished, e.g. appended to a list): its derivative "
                f"cannot be followed from here. Return that value from the inner function (has_aux=True) "
                f"instead of keeping it.")


def restate_exit(error):
    """Raise the exit guard's error (``buf[i] = x`` into a plain float array) that NumPy restated as
    its own "setting an array element with a sequence"; any other ValueError goes on as it is. Every
    transform calls the user's function through ``except ValueError as e: restate_exit(e)`` (grad,
    vjp, jvp, vmap, jacfwd, the program tracer of wg.compile); an eager Tensor has no such boundary, so
    there NumPy's error stands, with the exit guard's as its ``__cause__`` (printed above it)."""
    if isinstance(error.__cause__, ExitError):
        raise error.__cause__ from None
    raise error


def _check_leaf(value, transform, fun, argnum):
    if type(value) in BOX_TYPES:  # a traced value (of an outer transform, wg.compile's tracer, a Tape)
        dtype = getattr(value, "dtype", None)  # its dtype decides, as the value's would (an int or bool
        if dtype is None or dtype.kind in "fc":  # argument of a compiled wg.grad is a traced int symbol)
            return
        raise TypeError(
            f"wg.{transform}({_name(fun)}): argument {argnum} is dtype {dtype}; derivatives are taken with "
            f"respect to float (or complex) values only. Pass it as a float, e.g. np.asarray(x, "
            f"dtype=float), or leave it out of argnums.")
    if not is_inexact(value):
        if isinstance(value, (float, complex)):  # a subclass: its methods might not be float's
            raise TypeError(
                f"wg.{transform}({_name(fun)}): argument {argnum} is a {type(value).__name__}, a subclass "
                f"of {type(value).__mro__[-2].__name__}; pass the plain number instead "
                f"({type(value).__mro__[-2].__name__}(x)), or leave it out of argnums.")
        kind = type(value).__name__ if not hasattr(value, "dtype") else f"dtype {value.dtype}"
        raise TypeError(
            f"wg.{transform}({_name(fun)}): argument {argnum} is {kind}; derivatives are taken with "
            f"respect to float (or complex) values only. Pass it as a float, e.g. np.asarray(x, "
            f"dtype=float), or leave it out of argnums.")


def _is_complex(x):
    x = unbox_all(x)
    return type(x) is complex or np.result_type(x).kind == "c"


def _check_complex(fun, transform, holomorphic, ins=(), outs=()):
    """JAX's rule for Jacobians of complex functions: a complex input (jacfwd, hessian) or output
    (jacrev) needs ``holomorphic=True``, which in turn needs complex inputs and outputs."""
    for what, leaves in (("input", ins), ("output", outs)):
        for leaf in leaves:
            c = _is_complex(leaf)
            if holomorphic and not c:
                raise TypeError(
                    f"wg.{transform}({_name(fun)}, holomorphic=True): an {what} is real "
                    f"({np.result_type(unbox_all(leaf))}); holomorphic=True needs complex inputs and "
                    f"outputs. Cast it (e.g. x + 0j), or leave holomorphic=False for real functions.")
            if c and not holomorphic:
                raise TypeError(
                    f"wg.{transform}({_name(fun)}): an {what} is complex "
                    f"({np.result_type(unbox_all(leaf))}); the Jacobian of a complex function is "
                    f"only defined as a complex matrix when the function is holomorphic. Pass "
                    f"holomorphic=True if it is (its derivative is then the complex derivative), or "
                    f"split the values into real and imaginary parts and differentiate a real "
                    f"function of them.")


def _boxed_call_args(trace, fun, args, nums, transform):
    """Replace the arguments at ``nums`` by pytrees of leaf boxes; also return those boxes."""
    args = list(args)
    boxes = []
    for a in nums:
        v = args[a]
        if type(v) is float or (type(v) is np.ndarray and v.dtype.kind in "fc"):
            box = trace.leaf(v)  # a single float leaf: no pytree machinery, nothing to check
            boxes.append(([box], _LEAF))
            args[a] = box
            continue
        leaves, treedef = tree_flatten(v)
        for v in leaves:
            _check_leaf(v, transform, fun, a)
        mine = [trace.leaf(v) for v in leaves]
        boxes.append((mine, treedef))
        args[a] = tree_unflatten(treedef, mine)
    return args, boxes


def _unbox_out(trace, out, frozen=False):
    """``out`` with this trace's boxes unboxed (``frozen``: their arrays as read-only views)."""
    hand_out = read_only_view if frozen else _as_is
    return tree_map(lambda v: hand_out(v.value) if type(v) in BOX_TYPES and v._trace is trace else v, out)


def _as_is(v):
    return v


def _finished(trace):
    """Whether ``trace`` is a transform's tape whose pass is over (``wg.grad`` drops its list): a value
    of it kept past the transform is a constant to any later one."""
    return type(trace) is ReverseTrace and trace.entries is None


def _finish(g, value):
    """The gradient for a leaf of value ``value`` (zero when it was not reached)."""
    if type(g) is np.ndarray and type(value) is np.ndarray and g.shape == value.shape:
        return g
    if type(g) is float and type(value) is float:
        return g
    if g is None:
        return 0.0 if type(value) is float else zeros_like(value)
    if type(g) in BOX_TYPES:
        if not _finished(g._trace):
            return g  # a value of an enclosing transform: a derivative of a derivative
        while type(g) in BOX_TYPES and _finished(g._trace):
            g = g.value  # a value kept from a finished transform met on the way: a constant here
        return _finish(g, value)
    if type(value) is float:
        if not isinstance(g, (np.ndarray, np.generic, int, complex)):
            return g  # another array library's 0-d array (Dask): kept lazy, not made a float
        g = np.asarray(g)
        return float(g) if g.dtype.kind != "c" else complex(g)
    if isinstance(value, np.ndarray) and isinstance(g, np.ndarray) and g.shape != value.shape:
        return np.broadcast_to(g, value.shape).copy()
    return g


def _gradients(adj, boxes):
    return [_finish(adj.get(mine[0]), mine[0].value) if treedef is _LEAF else
            tree_unflatten(treedef, [_finish(adj.get(b), b.value) for b in mine])
            for mine, treedef in boxes]


def _tape_trace(transform=None):
    """A reverse trace that keeps its Wengert list (read backwards by the backward pass); ``transform``
    (``"grad"``) is named in its values' ``repr``."""
    trace = ReverseTrace(Tensor, ScalarTensor)
    trace.entries = []
    trace.transform = transform
    return trace


def _ones(value):
    if type(value) is float:
        return 1.0
    v = unbox_all(value)  # elementwise_grad of elementwise_grad: the output is traced
    if type(v) is float:
        return 1.0
    if isinstance(v, np.generic):
        return v.dtype.type(1)
    if type(v) is not np.ndarray and hasattr(type(v), "__array_function__"):
        return np.ones_like(v)  # in the output's own library (a CuPy seed for a CuPy output)
    return np.ones(np.shape(v), dtype=np.result_type(v))


@overload
def value_and_grad(fun: Callable[P, R], argnums: int = 0, has_aux: Literal[False] = False,
                   holomorphic: bool = False) -> Callable[P, tuple[R, Any]]: ...
@overload
def value_and_grad(fun: Callable[P, R], argnums: Sequence[int], has_aux: Literal[False] = False,
                   holomorphic: bool = False) -> Callable[P, tuple[R, tuple[Any, ...]]]: ...
@overload
def value_and_grad(fun: Callable[P, tuple[R, A]], argnums: int = 0, *, has_aux: Literal[True],
                   holomorphic: bool = False) -> Callable[P, tuple[tuple[R, A], Any]]: ...
@overload
def value_and_grad(fun: Callable[P, tuple[R, A]], argnums: Sequence[int], has_aux: Literal[True],
                   holomorphic: bool = False) -> Callable[P, tuple[tuple[R, A], tuple[Any, ...]]]: ...
@overload
def value_and_grad(fun: Callable[P, Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, *, argnum: int | Sequence[int] | None = None
                   ) -> Callable[P, tuple[Any, Any]]: ...
@accepts_argnum
def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, *, argnum: int | Sequence[int] | None = None
                   ) -> Callable[..., Any]:
    """Function returning ``(fun(*args), gradient)`` (``jax.value_and_grad``).

    ``fun`` must return a scalar: shape ``()``, or any shape of size one (``(1,)``, ``(1, 1)``),
    which HIPS autograd and PyTorch's ``backward()`` accept too (JAX refuses them; wengert follows
    autograd here, so that code written for it runs unchanged); the value keeps its shape. With
    ``has_aux=True`` it returns ``(scalar, aux)`` and the result is ``((value, aux), gradient)``.
    ``holomorphic=True`` (as in JAX) asks for complex arguments and a complex result, whose
    derivative ``f'(z)`` it returns; without it a complex result is seeded with 1 all the same
    (see ``grad``).
    """
    _argnums(fun, argnums, "grad")  # a TypeError now for argnums=0.0 or "x"
    checked = {}  # len(args) -> validated argnums

    @functools.wraps(fun)
    def value_and_grad_fun(*args, **kwargs):
        n = len(args)
        if n not in checked:
            checked[n] = _argnums_tuple(fun, argnums, n, "grad")
        single, nums = checked[n]
        if holomorphic:
            _check_holomorphic_args(fun, args, nums)
        with gc_paused():  # through the call below, so that the graph it drops is freed meanwhile
            return _value_and_grad_call(fun, args, kwargs, single, nums, has_aux)

    return value_and_grad_fun


def _check_holomorphic_args(fun, args, nums):
    for a in nums:
        for leaf in tree_flatten(args[a])[0]:
            if not _is_complex(leaf):
                raise TypeError(f"wg.grad({_name(fun)}, holomorphic=True): argument {a} is real "
                                f"({np.result_type(unbox_all(leaf))}); holomorphic=True needs "
                                f"complex arguments. Cast it (e.g. x + 0j).")


def _value_and_grad_call(fun, args, kwargs, single, nums, has_aux):
    """One call of ``value_and_grad(fun)``, made with the cyclic collector paused.

    Nodes and their trace form a cycle (``node._trace``, ``trace.entries``): dropping the Wengert
    list before returning lets reference counting free the whole graph as this frame's locals go,
    still inside the pause. Left to the collector instead, every call's nodes would be rescanned by
    it at least once (about 0.8 us per recorded operation on the scalar chain).
    """
    trace = _tape_trace("grad")
    call_args, boxes = _boxed_call_args(trace, fun, args, nums, "grad")
    try:
        out = fun(*call_args, **kwargs)
    except ValueError as e:
        restate_exit(e)
    if has_aux:
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"wg.grad({_name(fun)}, has_aux=True): the function must return a "
                            f"pair (scalar, aux), got {type(out).__name__}")
        out, aux = out
    if type(out) in BOX_TYPES and out._trace is not trace:
        _refuse_leaked(out, trace, fun, "grad")
    v = unbox_all(out)
    _check_scalar(out, v, fun)
    if type(out) in BOX_TYPES and out._trace is trace:
        value = out.value
        adj, _ = backward_pass([(out, _ones(v))], tape=trace.entries)
    else:
        value = out
        adj = {}
    trace.entries = trace.mutations = None
    grads = _gradients(adj, boxes)
    g = grads[0] if single else tuple(grads)
    if has_aux:
        return (value, _unbox_out(trace, aux)), g
    return value, g


_INEXACT_SCALARS = frozenset((np.float64, np.float32, np.float16, np.longdouble, np.complex128, np.complex64))


def _check_scalar(out, v, fun):
    """``out`` (``v`` unboxed) must be a float scalar."""
    if type(v) is float or type(v) in _INEXACT_SCALARS:
        return
    if v is None or isinstance(v, (str, bytes)):
        _refuse_output(v, fun, "grad", "a float scalar")
    if isinstance(out, (tuple, list, dict)):
        raise TypeError(
            f"wg.grad({_name(fun)}): the function returned a {type(out).__name__}; grad needs a "
            f"scalar output. Use has_aux=True for (loss, extra) pairs, or wg.vjp / wg.jacrev.")
    shape = np.shape(v)
    if shape != () and math.prod(shape) != 1:  # size one, (1,) or (1, 1): a scalar, as in autograd
        raise TypeError(
            f"wg.grad({_name(fun)}): the function must return a scalar, but its output has shape "
            f"{shape}. Reduce it (e.g. .sum()), or use wg.vjp, wg.elementwise_grad or wg.jacrev.")
    if not is_inexact(v):
        raise TypeError(
            f"wg.grad({_name(fun)}): the output is {np.result_type(v)}, not float; "
            f"integer and boolean results carry no derivative.")


@overload
def grad(fun: Callable[P, Any], argnums: int = 0, has_aux: Literal[False] = False,
         holomorphic: bool = False) -> Callable[P, Any]: ...
@overload
def grad(fun: Callable[P, Any], argnums: Sequence[int], has_aux: Literal[False] = False,
         holomorphic: bool = False) -> Callable[P, tuple[Any, ...]]: ...
@overload
def grad(fun: Callable[P, tuple[Any, A]], argnums: int = 0, *, has_aux: Literal[True],
         holomorphic: bool = False) -> Callable[P, tuple[Any, A]]: ...
@overload
def grad(fun: Callable[P, tuple[Any, A]], argnums: Sequence[int], has_aux: Literal[True],
         holomorphic: bool = False) -> Callable[P, tuple[tuple[Any, ...], A]]: ...
@overload
def grad(fun: Callable[P, Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, *, argnum: int | Sequence[int] | None = None) -> Callable[P, Any]: ...
@accepts_argnum
def grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, *, argnum: int | Sequence[int] | None = None) -> Callable[..., Any]:
    """Gradient of scalar-valued ``fun`` with respect to argument(s) ``argnums`` (``jax.grad``).

    The gradient has the structure of the argument (nested tuples/lists/dicts of arrays and floats).
    Complex arguments follow HIPS autograd and JAX: for real-valued ``fun`` of ``z = x + iy`` the
    gradient is ``dfun/dx - i dfun/dy`` (``2 conj(z)`` for ``|z|**2``; step along its conjugate to
    descend); a complex-valued ``fun`` is seeded with 1, giving ``f'(z)`` for holomorphic ``f``.
    Real arguments get real gradients. See docs/complex.md. An output of size one but shape
    ``(1,)`` or ``(1, 1)`` counts as a scalar, as in HIPS autograd and PyTorch (JAX refuses it).
    """
    vg = value_and_grad(fun, argnums, has_aux, holomorphic)

    @functools.wraps(fun)
    def grad_fun(*args, **kwargs):
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    return grad_fun


def _split_aux(out, fun, transform):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"wg.{transform}({_name(fun)}, has_aux=True): the function must return a "
                        f"pair (output, aux), got {type(out).__name__}")
    return out


def _record(fun, primals, transform, has_aux, frozen=False, kept=False):
    """Run ``fun`` on boxed ``primals`` on a new tape: ``(trace, boxes, out_leaves, out_def, aux)``
    (``frozen``: the aux's arrays from the tape as read-only views: ``saving.read_only_view``;
    ``kept``: for a pullback called later, the caller's arrays the tape reads copied: ``engines.kept``)."""
    trace = _tape_trace(transform)
    call_args, boxes = _boxed_call_args(trace, fun, primals, range(len(primals)), transform)
    if kept:
        leaves = [b.value for mine, _ in boxes for b in mine]
    with gc_paused():
        try:
            out = fun(*call_args)
        except ValueError as e:
            restate_exit(e)
        if kept:
            keep_copies(trace, leaves)
    aux = None
    if has_aux:
        out, aux = _split_aux(out, fun, transform)
        aux = _unbox_out(trace, aux, frozen)
    _refuse_output(out, fun, transform, "an array, a float or a pytree of them")
    _refuse_leaked(out, trace, fun, transform)
    out_leaves, out_def = tree_flatten(out)
    return trace, boxes, out_leaves, out_def, aux


def _own(v, trace):
    return type(v) in BOX_TYPES and v._trace is trace


@overload
def vjp(fun: Callable[..., R], *primals: Any,
        has_aux: Literal[False] = False) -> tuple[R, Callable[[Any], tuple[Any, ...]]]: ...
@overload
def vjp(fun: Callable[..., tuple[R, A]], *primals: Any,
        has_aux: Literal[True]) -> tuple[R, Callable[[Any], tuple[Any, ...]], A]: ...
@overload
def vjp(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]: ...
def vjp(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(fun(*primals), vjp_fun)``; ``vjp_fun(cotangent)`` is a tuple, one entry per primal
    (``jax.vjp``). ``vjp_fun`` may be called many times, and gives the derivative at the values of
    the forward pass whatever is written afterwards: the caller's arrays it reads (the arguments,
    arrays ``fun`` closes over, views of them) are copied when ``fun`` returns (``engines.kept``;
    a read-only array is not), and the output's and the aux's arrays are read-only views."""
    return _vjp(fun, primals, has_aux, True)


def vjp_at_once(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """:func:`vjp` for a caller that calls ``vjp_fun`` before any other code can write into the
    arrays (inside a rule, ``elementwise_grad``): nothing is copied."""
    return _vjp(fun, primals, has_aux, False)


def _vjp(fun, primals, has_aux, kept):
    trace, boxes, out_leaves, out_def, aux = _record(fun, primals, "vjp", has_aux, frozen=True, kept=kept)
    value = tree_unflatten(out_def, [read_only_view(v.value) if _own(v, trace) else v for v in out_leaves])

    def vjp_fun(cotangent):
        ct_leaves, ct_def = tree_flatten(cotangent)
        if ct_def != out_def:
            raise ValueError(f"vjp_fun: the cotangent's structure {describe(ct_def)} differs from "
                             f"the output's {describe(out_def)}")
        seeds = []
        for i, (o, c) in enumerate(zip(out_leaves, ct_leaves)):
            if np.shape(unbox_all(c)) != np.shape(unbox_all(o)):
                raise ValueError(f"vjp_fun: cotangent leaf {i} has shape {np.shape(unbox_all(c))}, "
                                 f"the output has shape {np.shape(unbox_all(o))}")
            if _own(o, trace):
                seeds.append((o, c))
        adj = backward_pass(seeds, tape=trace.entries)[0] if seeds else {}
        return tuple(_gradients(adj, boxes))

    if has_aux:
        return value, vjp_fun, aux
    return value, vjp_fun


@accepts_argnum
def elementwise_grad(fun: Callable[P, Any], argnums: int | Sequence[int] = 0, *,
                     argnum: int | Sequence[int] | None = None) -> Callable[P, Any]:
    """Sum over outputs of their gradients: the derivative of an elementwise function
    (``autograd.elementwise_grad``; the VJP with a cotangent of ones). It nests:
    ``elementwise_grad(elementwise_grad(f))`` is the elementwise second derivative."""
    _argnums(fun, argnums, "elementwise_grad")

    @functools.wraps(fun)
    def egrad_fun(*args, **kwargs):
        single, nums = _argnums_tuple(fun, argnums, len(args), "elementwise_grad")
        f = _restricted(fun, args, nums, kwargs)
        out, back = vjp_at_once(f, *[args[a] for a in nums])
        g = back(tree_map(_ones, out))
        return g[0] if single else g

    return egrad_fun


def _restricted(fun, args, nums, kwargs):
    """``fun`` as a function of the arguments at ``nums`` only, the others held fixed."""

    def f(*chosen):
        full = list(args)
        for a, v in zip(nums, chosen):
            full[a] = v
        return fun(*full, **kwargs)

    f.__name__ = _name(fun)
    return f


def _zero_tangent(o):
    o = unbox_all(o)
    return 0.0 if type(o) is float else zeros_like(o)


_PY_SCALAR = {float: float, np.float64: float, complex: complex, np.complex128: complex}
"""A float64 scalar's Python type: jvp gives a scalar's value and tangent as the same type."""


@overload
def jvp(fun: Callable[..., R], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: Literal[False] = False) -> tuple[R, Any]: ...
@overload
def jvp(fun: Callable[..., tuple[R, A]], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: Literal[True]) -> tuple[R, Any, A]: ...
@overload
def jvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool = False) -> tuple[Any, ...]: ...
def jvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool = False) -> tuple[Any, ...]:
    """``(fun(*primals), tangent of the output)`` by dual numbers (``jax.jvp``)."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("wg.jvp(fun, primals, tangents): primals and tangents must be tuples "
                        "(one entry per argument), e.g. wg.jvp(f, (x,), (dx,))")
    if len(primals) != len(tangents):
        raise ValueError(f"wg.jvp: {len(primals)} primals but {len(tangents)} tangents")
    trace = ForwardTrace()
    call_args = []
    for i, (p, t) in enumerate(zip(primals, tangents)):
        p_leaves, p_def = tree_flatten(p)
        t_leaves, t_def = tree_flatten(t)
        if p_def != t_def:
            raise ValueError(f"wg.jvp: tangent {i} has structure {describe(t_def)}, primal "
                             f"{describe(p_def)}")
        duals = []
        for pv, tv in zip(p_leaves, t_leaves):
            _check_leaf(pv, "jvp", fun, i)
            if np.shape(unbox_all(pv)) != np.shape(unbox_all(tv)):
                raise ValueError(f"wg.jvp: tangent of argument {i} has shape "
                                 f"{np.shape(unbox_all(tv))}, the primal {np.shape(unbox_all(pv))}")
            duals.append(Dual(pv, tv, trace))
        call_args.append(tree_unflatten(p_def, duals))
    with gc_paused():
        try:
            out = fun(*call_args)
        except ValueError as e:
            restate_exit(e)
    if has_aux:
        out, aux = _split_aux(out, fun, "jvp")
    _refuse_output(out, fun, "jvp", "an array, a float or a pytree of them")
    _refuse_leaked(out, trace, fun, "jvp")
    out_leaves, out_def = tree_flatten(out)
    values, tans = [], []
    for o in out_leaves:
        if type(o) is Dual and o._trace is trace and o.tangent is not None:  # None: a constant buffer
            v, t = o.value, o.tangent
            if type(v) is not type(t) and type(v) in _PY_SCALAR and type(t) in _PY_SCALAR:
                v, t = _PY_SCALAR[type(v)](v), _PY_SCALAR[type(t)](t)  # both Python numbers
            values.append(v)
            tans.append(t)
        else:
            values.append(o.value if type(o) is Dual and o._trace is trace else o)
            tans.append(_zero_tangent(o))
    result = tree_unflatten(out_def, values), tree_unflatten(out_def, tans)
    if has_aux:
        return result + (tree_map(lambda v: v.value if type(v) is Dual and v._trace is trace else v, aux),)
    return result


def stop_gradient(x: T) -> T:
    """``x`` as a constant at every level: no derivative flows through it (``jax.lax.stop_gradient``).
    A traced array comes out as a read-only view of the value the graph holds (a write into it would
    silently change the derivative): copy it to write into it."""
    return tree_map(_stopped, x)


def _stopped(v):
    if type(v) not in BOX_TYPES:
        return v
    inner = unbox_all(v)
    if type(inner) in BOX_TYPES:  # a program's symbol (unbox_all stops there): a statement without derivative
        return stop_gradient_statement(inner)
    return read_only_view(inner)
