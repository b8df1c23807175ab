"""Products: matmul, tensordot and einsum (``dot``, ``outer``, ``inner`` are composed from these).

Every rule is another product of the same kind, so second derivatives are products again. Batch
dimensions of ``matmul`` broadcast; ``unbroadcast`` sums them back (and casts dtypes).
"""

import string

import numpy as np

from wengert.core.extend import defbatch, defjvp, defjvp_argnum, defvjp, defvjp_argnum, facts
from wengert.core.primitive import Primitive, binary_function
from wengert.rules import broadcasting, shape

__all__ = ["matmul", "tensordot", "einsum"]


def _ndim(x):
    return len(broadcasting.shape_of(x))


def _mT(x):
    """Swap the last two axes."""
    if type(x) is np.ndarray:
        return x.swapaxes(-1, -2)  # a plain array: nothing to record, skip the dispatch
    n = _ndim(x)
    return shape.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _add_axis(x, pos):
    s = broadcasting.shape_of(x)
    pos = pos % (len(s) + 1)
    return shape.reshape(x, s[:pos] + (1,) + s[pos:])


def _drop_axis(x, pos):
    s = list(broadcasting.shape_of(x))
    del s[pos]
    return shape.reshape(x, tuple(s))


_ndarray = np.ndarray


def _matmul_impl(a, b):
    """numpy.matmul (the ``@`` operator)."""
    if type(a) is _ndarray and a.ndim > 2 and type(b) is _ndarray and b.ndim > 2 \
            and a.shape[-1] == 1 and b.shape[-2] == 1:
        return a * b  # stacked outer products (per-example weight gradients): matmul is ~2.5x slower
    return a @ b


def _matmul_vjp_a(g, out, a, b):
    if type(g) is np.ndarray and type(b) is np.ndarray and g.ndim == 2 and b.ndim == 2:
        return g @ b.T  # plain matrices (the common case): nothing is traced, skip the dispatch
    na, nb = _ndim(a), _ndim(b)
    if na == 1 and nb == 1:
        return g * b
    if nb == 1:  # a (..., n, k) @ b (k,) -> (..., n)
        return _add_axis(g, -1) * b
    if na == 1:  # a (k,) @ b (..., k, m) -> (..., m)
        return matmul(b, g) if nb == 2 else _drop_axis(matmul(b, _add_axis(g, -1)), -1)
    return matmul(g, _mT(b))


def _matmul_vjp_b(g, out, a, b):
    if type(g) is np.ndarray and type(a) is np.ndarray and g.ndim == 2 and a.ndim == 2:
        return a.T @ g
    na, nb = _ndim(a), _ndim(b)
    if na == 1 and nb == 1:
        return g * a
    if na == 1:  # a (k,) @ b (..., k, m) -> (..., m)
        return _add_axis(a, -1) * _add_axis(g, -2)
    if nb == 1:  # a (..., n, k) @ b (k,) -> (..., n); for one matrix, g @ a (one product, batched too)
        return matmul(g, a) if na == 2 else _drop_axis(matmul(_mT(a), _add_axis(g, -1)), -1)
    return matmul(_mT(a), g)


matmul = binary_function(Primitive(_matmul_impl, name="matmul", grad_post=broadcasting.unbroadcast,
                                   tangent_post=broadcasting.broadcast_tangent))
defvjp(matmul, _matmul_vjp_a, _matmul_vjp_b)
defjvp(matmul, lambda t, out, a, b: matmul(t, b), lambda t, out, a, b: matmul(a, t))
facts(matmul, linear=(0, 1), fresh=True, operator="@")
facts(matmul, saves={0: (1,), 1: (0,)})  # what its VJPs read (wengert.engines.saving)


def _tensordot_axes(axes, na, nb):
    """NumPy's ``axes`` argument as two lists of non-negative axes."""
    if isinstance(axes, (int, np.integer)):
        return list(range(na - axes, na)), list(range(axes))
    ax_a, ax_b = axes
    ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
    ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
    return [a % na for a in ax_a], [b % nb for b in ax_b]


def _tensordot_impl(a, b, axes=2):
    """numpy.tensordot."""
    return np.tensordot(a, b, axes)


def _tensordot_vjp_a(g, out, a, b, axes=2):
    na, nb = _ndim(a), _ndim(b)
    ax_a, ax_b = _tensordot_axes(axes, na, nb)
    free_a = [i for i in range(na) if i not in ax_a]
    free_b = [j for j in range(nb) if j not in ax_b]
    r = tensordot(g, b, (list(range(len(free_a), len(free_a) + len(free_b))), free_b))
    dims = free_a + [ax_a[ax_b.index(j)] for j in sorted(ax_b)]
    return shape.transpose(r, tuple(np.argsort(dims)))


def _tensordot_vjp_b(g, out, a, b, axes=2):
    na, nb = _ndim(a), _ndim(b)
    ax_a, ax_b = _tensordot_axes(axes, na, nb)
    free_a = [i for i in range(na) if i not in ax_a]
    free_b = [j for j in range(nb) if j not in ax_b]
    r = tensordot(a, g, (free_a, list(range(len(free_a)))))
    dims = [ax_b[ax_a.index(i)] for i in sorted(ax_a)] + free_b
    return shape.transpose(r, tuple(np.argsort(dims)))


# unbroadcast as grad_post only fits dtypes here (e.g. a real argument of a complex product).
tensordot = Primitive(_tensordot_impl, name="tensordot", grad_post=broadcasting.unbroadcast)
defvjp(tensordot, _tensordot_vjp_a, _tensordot_vjp_b)
defjvp(tensordot,
       lambda t, out, a, b, axes=2: tensordot(t, b, axes),
       lambda t, out, a, b, axes=2: tensordot(a, t, axes))
facts(tensordot, linear=(0, 1), fresh=True)
facts(tensordot, saves={0: (1,), 1: (0,)})


def _parse_einsum(subscripts, shapes):
    """Explicit subscripts: (list of input subscripts, output subscript), ellipses spelled out."""
    subs = subscripts.replace(" ", "")
    if "->" in subs:
        ins, out = subs.split("->")
    else:
        ins, out = subs, None
    ins = ins.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"einsum: {subscripts!r} names {len(ins)} operands, {len(shapes)} given")
    used = set("".join(ins))
    spare = [c for c in string.ascii_letters if c not in used]
    n_ell = max((len(s) - (len(i) - 3) for i, s in zip(ins, shapes) if "..." in i), default=0)
    ell = "".join(spare[:n_ell])
    explicit = []
    for i, s in zip(ins, shapes):
        if "..." in i:
            k = len(s) - (len(i) - 3)
            i = i.replace("...", ell[n_ell - k:] if k else "")
        explicit.append(i)
    if out is None:
        counts = "".join(explicit)
        out = ell + "".join(sorted(c for c in set(counts) if counts.count(c) == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    return explicit, out


def _einsum_impl(subscripts, *operands, optimize=False):
    """numpy.einsum."""
    return np.einsum(subscripts, *operands, optimize=optimize)


def _einsum_vjp(argnum, g, out, subscripts, *operands, optimize=False):
    i = argnum - 1
    shapes = [broadcasting.shape_of(o) for o in operands]
    ins, out_subs = _parse_einsum(subscripts, shapes)
    target = ins[i]
    if len(set(target)) != len(target):
        raise NotImplementedError(
            f"einsum {subscripts!r}: the derivative with respect to an operand with a repeated "
            f"subscript ({target!r}) is not supported; take the diagonal first with wnp.diagonal")
    others = [o for j, o in enumerate(operands) if j != i]
    other_subs = [s for j, s in enumerate(ins) if j != i]
    available = set(out_subs).union(*other_subs) if other_subs else set(out_subs)
    kept = "".join(c for c in target if c in available)
    spec = ",".join([out_subs] + other_subs) + "->" + kept
    r = einsum(spec, g, *others, optimize=optimize)
    if kept != target:  # letters summed inside this operand alone: broadcast back
        sizes = dict(zip(target, shapes[i]))
        r = shape.reshape(r, tuple(sizes[c] if c in kept else 1 for c in target))
        r = broadcasting.broadcast_to(r, shapes[i])
    return r


def _einsum_jvp(argnum, t, out, subscripts, *operands, optimize=False):
    ops = list(operands)
    ops[argnum - 1] = t
    return einsum(subscripts, *ops, optimize=optimize)


einsum = Primitive(_einsum_impl, name="einsum",
                   grad_post=broadcasting.unbroadcast, tangent_post=broadcasting.broadcast_tangent)
defvjp_argnum(einsum, _einsum_vjp)
defjvp_argnum(einsum, _einsum_jvp)

EINSUM_MAX_OPERANDS = 63
"""The most operands ``np.einsum`` takes (it refuses more, so no recorded call has more)."""

# What its VJPs read: an operand's cotangent reads the subscripts and every other operand (its own
# operand's shape only). Per operand, so that a product of two keeps one where one is differentiated.
facts(einsum, saves={k: (0,) + tuple(j for j in range(1, EINSUM_MAX_OPERANDS + 1) if j != k)
                     for k in range(1, EINSUM_MAX_OPERANDS + 1)})


# -- batching rules (wengert.engines.batching): the batch on axis 0 of the batched arguments -----------

def _batch_matmul(prim, values, batched, kwargs):
    """``a @ b`` for a batch, where NumPy's broadcasting of stacked matrices keeps the batch axis in
    front: a batch of matrices (or of vectors, as rows) with one matrix or vector, one matrix with
    a batch of matrices, two batches of the same rank; one matrix with a batch of vectors takes them
    as columns. A batch against one matrix is one matrix product, not one per example (NumPy loops
    over stacked matrices). Otherwise NotImplemented (the loop), where the batch axis would be mixed
    up."""
    a, b = values
    ra, rb = _ndim(a), _ndim(b)
    na, nb = ra - batched[0], rb - batched[1]
    if batched[0] and not batched[1]:
        if na >= 2 and rb == 2:  # (B, ..., n, k) @ (k, m): rows of every example at once
            sa = tuple(broadcasting.shape_of(a))
            flat = prim(shape.reshape(a, (-1, sa[-1])), b)
            return shape.reshape(flat, sa[:-1] + tuple(broadcasting.shape_of(b))[-1:])
        fits = (na == 1 and nb <= 2) or (na >= 2 and (nb <= 2 or na >= nb))
    elif batched[1] and not batched[0]:
        if ra == 2 and nb == 1:  # (n, k) @ each (k,): the batch's rows times a's transpose
            return prim(b, shape.transpose(a, (1, 0)))
        if ra == 2 and nb >= 2:  # (n, k) @ each (..., k, m): one product of the columns
            sb = tuple(broadcasting.shape_of(b))
            k_axis = len(sb) - (2 if nb >= 2 else 1)
            order = (k_axis,) + tuple(i for i in range(len(sb)) if i != k_axis)
            cols = shape.reshape(shape.transpose(b, order), (sb[k_axis], -1))
            rest = tuple(sb[i] for i in order[1:])
            out = shape.reshape(prim(a, cols), (broadcasting.shape_of(a)[0],) + rest)
            n_rest = len(rest)  # out: (n, B, ..., [m]) -> (B, ..., n, [m])
            if nb >= 2:
                back = tuple(range(1, n_rest)) + (0, n_rest)
            else:
                back = tuple(range(1, n_rest + 1)) + (0,)
            return shape.transpose(out, back)
        fits = nb >= 2 and (ra <= 2 or nb >= ra)
    else:
        fits = na >= 2 and na == nb
    return prim(a, b) if fits else _batched_matmul_general(prim, a, b, batched, na, nb)


def _batched_matmul_general(prim, a, b, batched, na, nb):
    """``a @ b`` for a batch in any other case: vectors made matrices (a row, a column), each batched
    operand given size-1 stacked axes after its batch axis up to the other's, so that matmul's
    broadcasting of stacked axes keeps the batch in front; the vectors' axes are then dropped."""
    a = _expand(a, _ndim(a) - 1) if na == 1 else a  # (..., k) -> (..., 1, k)
    b = _expand(b, _ndim(b)) if nb == 1 else b  # (..., k) -> (..., k, 1)
    stacked = max(max(na, 2), max(nb, 2)) - 2
    a = _expand(a, 1, stacked - (max(na, 2) - 2)) if batched[0] else a
    b = _expand(b, 1, stacked - (max(nb, 2) - 2)) if batched[1] else b
    out = prim(a, b)
    s = tuple(broadcasting.shape_of(out))
    drop = {len(s) - 2} if na == 1 else set()
    drop |= {len(s) - 1} if nb == 1 else set()
    return shape.reshape(out, tuple(n for i, n in enumerate(s) if i not in drop)) if drop else out


def _expand(x, axis, count=1):
    """``x`` with ``count`` size-1 axes inserted at ``axis``."""
    s = tuple(broadcasting.shape_of(x))
    return shape.reshape(x, s[:axis] + (1,) * count + s[axis:]) if count else x


def _batch_tensordot(prim, values, batched, kwargs):
    """A batched argument contracted with an unbatched one: the batch axis is a free axis of the
    batched argument, moved to the front (a's free axes come first in tensordot's result). Both
    batched: the same contraction as an einsum with the batch's subscript shared."""
    a, b = values[:2]
    axes = values[2] if len(values) > 2 else kwargs.get("axes", 2)
    if len(batched) > 2 and batched[2]:
        return NotImplemented
    na, nb = _ndim(a) - batched[0], _ndim(b) - batched[1]
    ax_a, ax_b = _tensordot_axes(axes, na, nb)
    if batched[0] and not batched[1]:
        return prim(a, b, ([x + 1 for x in ax_a], ax_b))
    if batched[1] and not batched[0]:
        out = prim(a, b, (ax_a, [x + 1 for x in ax_b]))  # (a's free, B, b's free)
        free_a = na - len(ax_a)
        n = _ndim(out)
        return shape.transpose(out, (free_a,) + tuple(i for i in range(n) if i != free_a))
    letters = iter(string.ascii_letters)
    batch, sub_a = next(letters), [next(letters) for _ in range(na)]
    sub_b = [next(letters) for _ in range(nb)]
    for i, j in zip(ax_a, ax_b):
        sub_b[j] = sub_a[i]
    out = batch + "".join(c for i, c in enumerate(sub_a) if i not in ax_a) \
        + "".join(c for j, c in enumerate(sub_b) if j not in ax_b)
    return einsum(f"{batch}{''.join(sub_a)},{batch}{''.join(sub_b)}->{out}", a, b)


def _batch_einsum(prim, values, batched, kwargs):
    """einsum with one more subscript, for the batch, on every batched operand and in front of the
    output (the subscripts made explicit first: an implicit output's order would change)."""
    subscripts, operands = values[0], values[1:]
    if batched[0] or not isinstance(subscripts, str):
        return NotImplemented
    shapes = [tuple(broadcasting.shape_of(o))[b:] for o, b in zip(operands, batched[1:])]
    ins, out = _parse_einsum(subscripts, shapes)
    letter = next(c for c in string.ascii_letters if c not in "".join(ins) + out)
    ins = [letter + i if b else i for i, b in zip(ins, batched[1:])]
    return prim(",".join(ins) + "->" + letter + out, *operands, **kwargs)


defbatch(matmul, _batch_matmul)
defbatch(einsum, _batch_einsum)
defbatch(tensordot, _batch_tensordot)
