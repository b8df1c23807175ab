"""Jacobians and Hessians: jacrev, jacfwd, hessian, hvp (``jax.jacrev`` and friends).

``jacrev`` records the function once and runs one backward pass batched over the output's basis
vectors; ``jacfwd`` one forward pass batched over the input's basis vectors (``wg.vmap``'s engine:
each rule runs once on the whole batch of seeds); ``hessian`` is ``jacfwd(jacrev(f))``.
``chunk_size`` bounds the batch, hence the memory, at the cost of more passes. Results take JAX's
layout: the output's pytree structure outside, the inputs' inside, each block of shape
``out.shape + in.shape``.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, ParamSpec, Sequence

import numpy as np

from wengert.api.transforms import (
    _argnums,
    _argnums_tuple,
    _check_complex,
    _check_leaf,
    _own,
    _record,
    _refuse_leaked,
    _refuse_output,
    _restricted,
    _split_aux,
    grad,
    jvp,
    restate_exit,
)
from wengert.api.tree import accepts_argnum, tree_flatten, tree_map, tree_unflatten
from wengert.core.exits import name_of as _name
from wengert.core.primitive import NoRuleError
from wengert.core.trace import unbox_all
from wengert.engines.batching import Batched, BatchTrace
from wengert.engines.forward import Dual, ForwardTrace
from wengert.engines.reverse import backward_pass, gc_paused, is_inexact
from wengert.rules import broadcasting, products
from wengert.rules import shape as shape_ops

P = ParamSpec("P")  # a Jacobian's function takes ``fun``'s parameters

__all__ = ["jacrev", "jacobian", "jacfwd", "hessian", "hvp", "hessian_vector_product",
           "hessian_tensor_product"]


def _check_chunk(chunk_size, transform):
    if chunk_size is not None and (not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1):
        raise ValueError(f"wg.{transform}: chunk_size must be a positive int or None, got {chunk_size!r}")


def _basis(value, start, stop, batch):
    """Elements ``start:stop`` of the standard basis of ``value``'s space as a batch of ``batch``:
    the whole basis as a diagonal batch (kept as a vector of ones while the rules keep it
    diagonal, so that elementwise steps cost O(n), not O(n^2)), a part of it as a dense one."""
    if start == 0 and stop == math.prod(np.shape(value)):
        return Batched.diagonal(np.ones(np.shape(value), np.result_type(value)), batch)
    return Batched(_basis_batch(value, start, stop), batch)


def _basis_batch(value, start, stop):
    """Elements ``start:stop`` of the standard basis of ``value``'s space, stacked on a new axis 0."""
    shape, dtype = np.shape(value), np.result_type(value)
    n = math.prod(shape)
    e = np.eye(stop - start, n, start, dtype=dtype)  # rows start..stop of the n x n identity
    return e.reshape((stop - start,) + shape)


def _batched_rows(pass_for, value, boxes, chunk_size):
    """For each box, its Jacobian rows ``(n, *box shape)``: ``pass_for(g)`` (a backward pass seeded
    with ``g``, returning the adjoints) run once per chunk of basis vectors of ``value``'s space, as
    one pass on the batch of them (``wg.vmap``'s engine)."""
    value = unbox_all(value)
    n = math.prod(np.shape(value))
    step = max(n, 1) if chunk_size is None else chunk_size
    parts = [[] for _ in boxes]
    for start in range(0, n, step):
        stop = min(n, start + step)
        batch = BatchTrace(stop - start)
        adj = pass_for(_basis(value, start, stop, batch))
        for k, b in enumerate(boxes):
            parts[k].append(_unbatched(adj.get(b), batch, b.value, value))
    return [_joined(p) for p in parts]


def _joined(parts):
    return parts[0] if len(parts) == 1 else shape_ops.concatenate(*parts, axis=0)


def _dtype_of(x):
    """``x``'s dtype for ``np.result_type`` (a Python number as itself, weakly typed): a traced symbol
    of ``wg.compile`` has one but refuses to be an array (``np.result_type(symbol)`` failed to trace)."""
    x = unbox_all(x)
    return x if type(x) in (float, complex, int) else x.dtype


def _unbatched(v, batch, value, seed_value):
    """A batched result (or one that does not depend on the batch, or None for zero) as an array with
    the batch on axis 0."""
    shape = (batch.size,) + tuple(np.shape(unbox_all(value)))
    if type(v) is Batched and v._trace is batch:
        return v.value
    if v is None:
        return np.zeros(shape, np.result_type(_dtype_of(value), _dtype_of(seed_value)))
    return broadcasting.broadcast_to(v, shape)


def _jac_block(stacked, out_value, in_value, out_first):
    """One block of a Jacobian, shape ``out.shape + in.shape``, from its rows stacked on axis 0
    (``out_first``: one per output element) or its columns (one per input element)."""
    out_shape, in_shape = np.shape(unbox_all(out_value)), np.shape(unbox_all(in_value))
    if not out_first:  # (n_in, *out) -> (*out, n_in)
        n_out = len(out_shape)
        stacked = shape_ops.transpose(stacked, tuple(range(1, n_out + 1)) + (0,))
    return shape_ops.reshape(stacked, out_shape + in_shape)


def _block(parts, out_value, in_value, out_first):
    """One block of a Jacobian, shape ``out.shape + in.shape``, from its rows (``out_first``: one
    per output element, each shaped like the input) or its columns (one per input element)."""
    out_value, in_value = unbox_all(out_value), unbox_all(in_value)
    out_shape, in_shape = np.shape(out_value), np.shape(in_value)
    if not parts:  # an output that does not depend on the input, or an empty one
        return np.zeros(out_shape + in_shape, np.result_type(in_value, out_value))
    rows = [shape_ops.reshape(p, (1,) + np.shape(unbox_all(p))) for p in parts]
    stacked = shape_ops.concatenate(*rows, axis=0)
    if not out_first:  # (n_in, *out) -> (*out, n_in)
        n_out = len(out_shape)
        stacked = shape_ops.transpose(stacked, tuple(range(1, n_out + 1)) + (0,))
    return shape_ops.reshape(stacked, out_shape + in_shape)


def _check_out_leaves(fun, transform, values):
    for i, v in enumerate(values):
        if not is_inexact(v):
            raise TypeError(f"wg.{transform}({_name(fun)}): output leaf {i} is "
                            f"{np.result_type(v)}, not float; integer and boolean results carry "
                            f"no derivative (return them as aux, with has_aux=True).")


def _assemble(out_def, per_out, single):
    """JAX's layout: the output's structure outside, the inputs' inside (a tuple over argnums
    unless ``argnums`` was one int)."""
    return tree_unflatten(out_def, [blocks[0] if single else tuple(blocks) for blocks in per_out])


@accepts_argnum
def jacrev(fun: Callable[P, Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, chunk_size: int | None = None, *,
           argnum: int | Sequence[int] | None = None) -> Callable[P, Any]:
    """Jacobian by reverse mode (``jax.jacrev``): one recording, and one backward pass batched over
    every output element (``chunk_size`` of them at a time, to bound memory; all by default).

    Arguments and results may be pytrees: the result has the output's structure outside and the
    argument's inside (a tuple of them for a tuple ``argnums``), each block of shape
    ``out.shape + in.shape``. A complex output needs ``holomorphic=True`` (then the complex
    derivative); a complex input with a real output gives the gradient's convention,
    ``df/dx - i df/dy``, as ``grad`` does.
    """
    _argnums(fun, argnums, "jacrev")

    @functools.wraps(fun)
    def jac_fun(*args, **kwargs):
        single, nums = _argnums_tuple(fun, argnums, len(args), "jacrev")
        f = _restricted(fun, args, nums, kwargs)
        _check_chunk(chunk_size, "jacrev")
        trace, boxes, out_leaves, out_def, aux = _record(f, [args[a] for a in nums], "jacrev", has_aux)
        out_values = [o.value if _own(o, trace) else o for o in out_leaves]
        _check_out_leaves(fun, "jacrev", [unbox_all(v) for v in out_values])
        ins = [b.value for mine, _ in boxes for b in mine]
        _check_complex(fun, "jacrev", holomorphic, ins if holomorphic else (), out_values)
        per_out = []
        for o, ov in zip(out_leaves, out_values):
            ins_of = [[b.value for b in mine] for mine, _ in boxes]
            if _own(o, trace) and math.prod(np.shape(unbox_all(ov))):
                blocks = _batched_rows(lambda g, o=o: backward_pass([(o, g)], tape=trace.entries)[0],
                                       ov, [b for mine, _ in boxes for b in mine], chunk_size)
                blocks = iter(blocks)
                per_out.append([tree_unflatten(treedef, [_jac_block(next(blocks), ov, v, True)
                                                         for v in values])
                                for values, (_, treedef) in zip(ins_of, boxes)])
            else:
                per_out.append([tree_unflatten(treedef, [_block([], ov, v, True) for v in values])
                                for values, (_, treedef) in zip(ins_of, boxes)])
        trace.entries = trace.mutations = None
        jac = _assemble(out_def, per_out, single)
        return (jac, aux) if has_aux else jac

    return jac_fun


jacobian = jacrev


@accepts_argnum
def jacfwd(fun: Callable[P, Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, chunk_size: int | None = None, *,
           argnum: int | Sequence[int] | None = None) -> Callable[P, Any]:
    """Jacobian by forward mode (``jax.jacfwd``): one forward pass batched over every input element
    (``chunk_size`` of them at a time, to bound memory; all by default); the same layout as
    :func:`jacrev`. A complex input needs ``holomorphic=True`` (then the complex derivative, equal
    to ``jacrev``'s); a real input with a complex output gives the complex Jacobian ``d out / dx``.
    """
    return _jacfwd(fun, argnums, has_aux, holomorphic, "jacfwd", chunk_size)


def _jacfwd(fun, argnums, has_aux, holomorphic, transform, chunk_size=None):
    _argnums(fun, argnums, transform)
    _check_chunk(chunk_size, transform)

    @functools.wraps(fun)
    def jac_fun(*args, **kwargs):
        single, nums = _argnums_tuple(fun, argnums, len(args), transform)
        f = _restricted(fun, args, nums, kwargs)
        chosen = [args[a] for a in nums]
        flat = [tree_flatten(c) for c in chosen]
        for k, (leaves, _) in enumerate(flat):
            for leaf in leaves:
                _check_leaf(leaf, transform, fun, nums[k])
        _check_complex(fun, transform, holomorphic, [leaf for leaves, _ in flat for leaf in leaves])
        cols = [[None for _ in leaves] for leaves, _ in flat]  # [argnum][leaf] -> [per output: columns]
        out_def = out_values = aux = None
        with gc_paused():
            for k, (leaves, treedef) in enumerate(flat):
                for j, leaf in enumerate(leaves):
                    n = math.prod(np.shape(unbox_all(leaf)))
                    step = max(n, 1) if chunk_size is None else chunk_size
                    chunks = []
                    for start in range(0, n, step):
                        stop = min(n, start + step)
                        batch, trace = BatchTrace(stop - start), ForwardTrace()
                        moved = list(leaves)
                        basis = _basis(unbox_all(leaf), start, stop, batch)
                        moved[j] = Dual(leaf, basis, trace)
                        call = list(chosen)
                        call[k] = tree_unflatten(treedef, moved)
                        try:
                            out = f(*call)
                        except ValueError as e:
                            restate_exit(e)
                        if has_aux:
                            out, aux_k = _split_aux(out, fun, transform)
                        if out_def is None:
                            _refuse_output(out, fun, transform, "an array, a float or a pytree of them")
                            _refuse_leaked(out, trace, fun, transform)
                            out_leaves, out_def = tree_flatten(out)
                            out_values = [o.value if type(o) is Dual and o._trace is trace else o
                                          for o in out_leaves]
                            if has_aux:
                                aux = tree_map(lambda v, t=trace: v.value if type(v) is Dual and
                                               v._trace is t else v, aux_k)
                        else:
                            out_leaves = tree_flatten(out)[0]
                        tangents = [o.tangent if type(o) is Dual and o._trace is trace else None
                                    for o in out_leaves]
                        chunks.append([_unbatched(t, batch, ov, leaf) for t, ov in zip(tangents, out_values)])
                    if chunks:  # per output leaf, its columns for this input leaf, on axis 0
                        cols[k][j] = [_joined([ch[i] for ch in chunks]) for i in range(len(out_values))]
            if out_def is None:  # no input has an element: the function runs once, for its output
                out = f(*chosen)
                if has_aux:
                    out, aux = _split_aux(out, fun, transform)
                _refuse_output(out, fun, transform, "an array, a float or a pytree of them")
                out_values, out_def = tree_flatten(out)
        _check_out_leaves(fun, transform, [unbox_all(v) for v in out_values])
        if holomorphic:
            _check_complex(fun, transform, True, outs=out_values)
        per_out = [[tree_unflatten(treedef, [_block([], ov, leaf, False) if cols[k][j] is None else
                                             _jac_block(cols[k][j][i], ov, leaf, False)
                                             for j, leaf in enumerate(leaves)])
                    for k, (leaves, treedef) in enumerate(flat)]
                   for i, ov in enumerate(out_values)]
        jac = _assemble(out_def, per_out, single)
        return (jac, aux) if has_aux else jac

    return jac_fun


@accepts_argnum
def hessian(fun: Callable[P, Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False, chunk_size: int | None = None, *,
            argnum: int | Sequence[int] | None = None) -> Callable[P, Any]:
    """Hessian, forward over reverse: ``jacfwd(jacrev(fun))`` (``jax.hessian``); reverse over reverse,
    ``jacrev(jacrev(fun))`` as in HIPS autograd, where a primitive has no JVP rule. For a tuple
    ``argnums`` the blocks nest as ``((H00, H01), (H10, H11))``, block ``Hij`` of shape
    ``x_i.shape + x_j.shape``; pytree arguments nest likewise."""
    _argnums(fun, argnums, "hessian")
    fwd = _jacfwd(jacrev(fun, argnums, has_aux, holomorphic, chunk_size), argnums, has_aux, holomorphic,
                  "hessian", chunk_size)

    @functools.wraps(fun)
    def hessian_fun(*args, **kwargs):
        try:
            return fwd(*args, **kwargs)
        except NoRuleError as e:
            if not _no_jvp_rule(e):
                raise
        # a primitive with a VJP rule only (as autograd's extensions often are): reverse over reverse
        rev = jacrev(fun, argnums, has_aux, holomorphic, chunk_size)
        return jacrev(rev, argnums, has_aux, holomorphic, chunk_size)(*args, **kwargs)

    return hessian_fun


def _no_jvp_rule(error):
    """Whether ``error`` (a NoRuleError) is a primitive's missing forward-mode rule."""
    return error.mode == "jvp"


def hvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """Hessian-vector product by forward over reverse: the JVP of ``grad(fun)``.

    With one primal it returns an array like that primal; with several, a tuple of them.
    Primals may be pytrees (the tangents then have the same structure).
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("wg.hvp(fun, primals, tangents): primals and tangents must be tuples "
                        "(one entry per argument), e.g. wg.hvp(f, (x,), (v,))")
    n = len(primals)
    g = grad(fun, argnums=0 if n == 1 else tuple(range(n)))
    return jvp(g, tuple(primals), tuple(tangents))[1]


def hessian_vector_product(fun: Callable[..., Any], argnum: int = 0) -> Callable[..., Any]:
    """``autograd.hessian_vector_product``: a function ``hvp(*args, vector)`` returning the Hessian
    of scalar ``fun`` with respect to argument ``argnum``, times ``vector`` (of that argument's
    shape), by forward over reverse (the JVP of the gradient; reverse over reverse, as in autograd,
    where a primitive has no JVP rule): no Hessian is formed. The other arguments are held fixed.
    :func:`hvp` is the same product in JAX's form."""
    _argnums(fun, argnum, "hessian_vector_product")
    if not isinstance(argnum, (int, np.integer)) or isinstance(argnum, bool):
        raise TypeError(f"wg.hessian_vector_product({_name(fun)}, argnum={argnum!r}): argnum must be one int")
    g = grad(fun, argnums=argnum)

    @functools.wraps(fun)
    def hvp_fun(*args_and_vector, **kwargs):
        if not args_and_vector:
            raise TypeError(f"wg.hessian_vector_product({_name(fun)}): call it as hvp(*args, vector)")
        *args, vector = args_and_vector
        (a,) = _argnums_tuple(fun, argnum, len(args), "hessian_vector_product")[1]
        rest = _restricted(g, args, (a,), kwargs)
        try:
            return jvp(rest, (args[a],), (vector,))[1]
        except NoRuleError as e:  # a primitive with a VJP rule only: reverse over reverse, as autograd
            if not _no_jvp_rule(e):
                raise
            dot = lambda x: products.tensordot(rest(x), vector, axes=np.ndim(vector))  # noqa: E731
            return grad(dot)(args[a])

    return hvp_fun


hessian_tensor_product = hessian_vector_product
"""``autograd.hessian_tensor_product``: the same function (the vector has the argument's shape)."""
