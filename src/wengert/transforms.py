"""Function transforms: grad, value_and_grad, vjp, elementwise_grad (reverse mode); jvp (forward
mode); jacrev, jacfwd, hessian, hvp (compositions). Semantics follow JAX and HIPS autograd.

Each call opens a new trace, boxes the arguments asked for (their pytree leaves), runs the
function, and reads the derivative off the result. Nesting works to any depth (see ``trace.py``).
"""

import functools

import numpy as np

import wengert.numpy as wnp
from wengert.forward import Dual, ForwardTrace
from wengert.ops.nondiff import zeros_like
from wengert.reverse import ReverseTrace, backward_pass, gc_paused, is_inexact
from wengert.tensor import Tensor
from wengert.trace import BOX_TYPES, unbox_all
from wengert.tree import _LEAF, describe, tree_flatten, tree_map, tree_unflatten

__all__ = ["grad", "value_and_grad", "vjp", "elementwise_grad", "jvp", "jacrev", "jacobian",
           "jacfwd", "hessian", "hvp", "stop_gradient"]


def _name(fun):
    return getattr(fun, "__name__", repr(fun))


def _argnums_tuple(fun, argnums, nargs, transform):
    single = isinstance(argnums, (int, np.integer))
    nums = (int(argnums),) if single else tuple(int(a) for a in argnums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise ValueError(
                f"wg.{transform}({_name(fun)}, argnums={argnums!r}): argument {a} asked for, but "
                f"the function was called with {nargs} positional argument(s)")
    return single, tuple(a % nargs for a in nums)


def _check_leaf(value, transform, fun, argnum):
    if type(value) in BOX_TYPES:
        return
    if not is_inexact(value):
        kind = type(value).__name__ if not hasattr(value, "dtype") else f"dtype {value.dtype}"
        raise TypeError(
            f"wg.{transform}({_name(fun)}): argument {argnum} is {kind}; derivatives are taken with "
            f"respect to float (or complex) values only. Pass it as a float, e.g. np.asarray(x, "
            f"dtype=float), or leave it out of argnums.")


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


def _unbox_out(trace, out):
    return tree_map(lambda v: v.value if type(v) in BOX_TYPES and v._trace is trace else v, out)


def _finish(g, value):
    """The gradient for a leaf of value ``value`` (zero when it was not reached)."""
    if type(g) is np.ndarray and type(value) is np.ndarray and g.shape == value.shape:
        return g
    if g is None:
        return 0.0 if type(value) is float else zeros_like(value)
    if type(g) in BOX_TYPES:
        return g
    if type(value) is float:
        g = np.asarray(g)
        return float(g) if g.dtype.kind != "c" else complex(g)
    if isinstance(value, np.ndarray) and isinstance(g, np.ndarray) and g.shape != value.shape:
        return np.broadcast_to(g, value.shape).copy()
    return g


def _gradients(adj, boxes):
    return [_finish(adj.get(mine[0]), mine[0].value) if treedef is _LEAF else
            tree_unflatten(treedef, [_finish(adj.get(b), b.value) for b in mine])
            for mine, treedef in boxes]


def _tape_trace():
    """A reverse trace that keeps its Wengert list (read backwards by the backward pass)."""
    trace = ReverseTrace(Tensor)
    trace.entries = []
    return trace


def _ones(value):
    if type(value) is float:
        return 1.0
    if isinstance(value, np.generic):
        return value.dtype.type(1)
    return np.ones(np.shape(value), dtype=np.result_type(value))


def value_and_grad(fun, argnums=0, has_aux=False):
    """Function returning ``(fun(*args), gradient)`` (``jax.value_and_grad``).

    ``fun`` must return a scalar (shape ``()``); with ``has_aux=True`` it returns
    ``(scalar, aux)`` and the result is ``((value, aux), gradient)``.
    """

    checked = {}  # len(args) -> validated argnums

    @functools.wraps(fun)
    def value_and_grad_fun(*args, **kwargs):
        n = len(args)
        if n not in checked:
            checked[n] = _argnums_tuple(fun, argnums, n, "grad")
        single, nums = checked[n]
        with gc_paused():  # through the call below, so that the graph it drops is freed meanwhile
            return _value_and_grad_call(fun, args, kwargs, single, nums, has_aux)

    return value_and_grad_fun


def _value_and_grad_call(fun, args, kwargs, single, nums, has_aux):
    """One call of ``value_and_grad(fun)``, made with the cyclic collector paused.

    Nodes and their trace form a cycle (``node._trace``, ``trace.entries``): dropping the Wengert
    list before returning lets reference counting free the whole graph as this frame's locals go,
    still inside the pause. Left to the collector instead, every call's nodes would be rescanned by
    it at least once (about 0.8 us per recorded operation on the scalar chain).
    """
    trace = _tape_trace()
    call_args, boxes = _boxed_call_args(trace, fun, args, nums, "grad")
    out = fun(*call_args, **kwargs)
    if has_aux:
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"wg.grad({_name(fun)}, has_aux=True): the function must return a "
                            f"pair (scalar, aux), got {type(out).__name__}")
        out, aux = out
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
    if isinstance(out, (tuple, list, dict)):
        raise TypeError(
            f"wg.grad({_name(fun)}): the function returned a {type(out).__name__}; grad needs a "
            f"scalar output. Use has_aux=True for (loss, extra) pairs, or wg.vjp / wg.jacrev.")
    shape = np.shape(v)
    if shape != ():
        raise TypeError(
            f"wg.grad({_name(fun)}): the function must return a scalar, but its output has shape "
            f"{shape}. Reduce it (e.g. .sum()), or use wg.vjp, wg.elementwise_grad or wg.jacrev.")
    if not is_inexact(v):
        raise TypeError(
            f"wg.grad({_name(fun)}): the output is {np.result_type(v)}, not float; "
            f"integer and boolean results carry no derivative.")


def grad(fun, argnums=0, has_aux=False):
    """Gradient of scalar-valued ``fun`` with respect to argument(s) ``argnums`` (``jax.grad``).

    The gradient has the structure of the argument (nested tuples/lists/dicts of arrays and floats).
    Complex arguments follow HIPS autograd and JAX: for real-valued ``fun`` of ``z = x + iy`` the
    gradient is ``dfun/dx - i dfun/dy`` (``2 conj(z)`` for ``|z|**2``; step along its conjugate to
    descend); a complex-valued ``fun`` is seeded with 1, giving ``f'(z)`` for holomorphic ``f``.
    Real arguments get real gradients. See docs/complex.md.
    """
    vg = value_and_grad(fun, argnums, has_aux)

    @functools.wraps(fun)
    def grad_fun(*args, **kwargs):
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    return grad_fun


def vjp(fun, *primals, has_aux=False):
    """``(fun(*primals), vjp_fun)``; ``vjp_fun(cotangent)`` is a tuple, one entry per primal
    (``jax.vjp``). ``vjp_fun`` may be called many times."""
    trace = _tape_trace()
    call_args, boxes = _boxed_call_args(trace, fun, primals, range(len(primals)), "vjp")
    with gc_paused():
        out = fun(*call_args)
    if has_aux:
        out, aux = out
    out_leaves, out_def = tree_flatten(out)
    value = tree_unflatten(out_def, [v.value if type(v) in BOX_TYPES and v._trace is trace else v
                                     for v in out_leaves])

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
            if type(o) in BOX_TYPES and o._trace is trace:
                seeds.append((o, c))
        adj = backward_pass(seeds, tape=trace.entries)[0] if seeds else {}
        return tuple(_gradients(adj, boxes))

    if has_aux:
        return value, vjp_fun, _unbox_out(trace, aux)
    return value, vjp_fun


def elementwise_grad(fun, argnums=0):
    """Sum over outputs of their gradients: the derivative of an elementwise function
    (``autograd.elementwise_grad``; the VJP with a cotangent of ones)."""

    @functools.wraps(fun)
    def egrad_fun(*args, **kwargs):
        single, nums = _argnums_tuple(fun, argnums, len(args), "elementwise_grad")
        f = _restricted(fun, args, nums, kwargs)
        out, back = vjp(f, *[args[a] for a in nums])
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


def jvp(fun, primals, tangents, has_aux=False):
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
        out = fun(*call_args)
    if has_aux:
        out, aux = out
    out_leaves, out_def = tree_flatten(out)
    values, tans = [], []
    for o in out_leaves:
        if type(o) is Dual and o._trace is trace:
            values.append(o.value)
            tans.append(o.tangent)
        else:
            values.append(o)
            tans.append(0.0 if type(o) is float else zeros_like(o))
    result = tree_unflatten(out_def, values), tree_unflatten(out_def, tans)
    if has_aux:
        return result + (tree_map(lambda v: v.value if type(v) is Dual and v._trace is trace else v, aux),)
    return result


def _basis(value):
    """The standard basis of ``value``'s space, one array per element."""
    shape, dtype = np.shape(value), np.result_type(value)
    for k in range(int(np.prod(shape))):
        e = np.zeros(shape, dtype)
        e.flat[k] = 1
        yield e if shape else (1.0 if type(value) is float else e)


def _single_array(x, transform):
    leaves, treedef = tree_flatten(x)
    if len(leaves) != 1 or treedef != "leaf":
        raise TypeError(f"wg.{transform}: arguments and results must be single arrays, got a "
                        f"pytree {describe(treedef)}")


def jacrev(fun, argnums=0):
    """Jacobian by reverse mode, one VJP per output element; shape ``out.shape + in.shape``
    (``jax.jacrev``)."""

    @functools.wraps(fun)
    def jac_fun(*args, **kwargs):
        single, nums = _argnums_tuple(fun, argnums, len(args), "jacrev")
        f = _restricted(fun, args, nums, kwargs)
        chosen = [args[a] for a in nums]
        for c in chosen:
            _single_array(c, "jacrev")
        out, back = vjp(f, *chosen)
        _single_array(out, "jacrev")
        rows = [back(e) for e in _basis(unbox_all(out))]
        jacs = []
        for i, c in enumerate(chosen):
            stacked = wnp.stack([r[i] for r in rows]) if rows else np.zeros((0,) + np.shape(c))
            jacs.append(wnp.reshape(stacked, np.shape(unbox_all(out)) + np.shape(unbox_all(c))))
        return jacs[0] if single else tuple(jacs)

    return jac_fun


jacobian = jacrev


def jacfwd(fun, argnums=0):
    """Jacobian by forward mode, one JVP per input element; shape ``out.shape + in.shape``
    (``jax.jacfwd``)."""

    @functools.wraps(fun)
    def jac_fun(*args, **kwargs):
        single, nums = _argnums_tuple(fun, argnums, len(args), "jacfwd")
        f = _restricted(fun, args, nums, kwargs)
        chosen = [args[a] for a in nums]
        for c in chosen:
            _single_array(c, "jacfwd")
        jacs = []
        out_shape = None
        for i, c in enumerate(chosen):
            f_i = _restricted(f, chosen, (i,), {})
            cols = []
            for e in _basis(unbox_all(c)):
                out, t = jvp(f_i, (c,), (e,))
                out_shape = np.shape(unbox_all(out))
                cols.append(t)
            if not cols:
                out_shape = np.shape(unbox_all(f(*chosen)))
                jacs.append(np.zeros(out_shape + (0,)))
                continue
            stacked = wnp.stack(cols)  # (n_in, *out)
            n_out = len(out_shape)
            moved = wnp.transpose(stacked, tuple(range(1, n_out + 1)) + (0,))
            jacs.append(wnp.reshape(moved, out_shape + np.shape(unbox_all(c))))
        return jacs[0] if single else tuple(jacs)

    return jac_fun


def hessian(fun, argnums=0):
    """Hessian, forward over reverse: ``jacfwd(jacrev(fun))`` (``jax.hessian``)."""
    return jacfwd(jacrev(fun, argnums), argnums)


def hvp(fun, primals, tangents):
    """Hessian-vector product by forward over reverse: the JVP of ``grad(fun)``.

    With one primal it returns an array like that primal; with several, a tuple of them.
    """
    n = len(primals)
    g = grad(fun, argnums=0 if n == 1 else tuple(range(n)))
    return jvp(g, tuple(primals), tuple(tangents))[1]


def stop_gradient(x):
    """``x`` as a constant at every level: no derivative flows through it (``jax.lax.stop_gradient``)."""
    return tree_map(unbox_all, x)
