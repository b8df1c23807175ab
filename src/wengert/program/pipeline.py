"""The passes in the order ``wg.compile`` and the derivative programs run them.

- ``simplify``: constant folding, common subexpressions and dead code (derivative programs are
  returned simplified), with the algebraic rewrites, to a fixed point.
- ``lower``: what makes the generated code cheaper to run and to keep: broadcasts elided, sums
  and products factored, in-place accumulation, values computed again where that frees a buffer.
- ``optimize``: both, with ``diagonal_products`` (a product with the identity, or another diagonal
  constant, computed as a scaling) and ``bands.diagonalize`` between them (a batched derivative
  program's banded basis arrays computed on their diagonals).

Every pass is linear in the program's size: one sweep forward (or backward, for dead code) with
dictionaries, so a long program costs the same per statement as a short one.
"""

from wengert.program.algebra import factor_products, factor_sums, rewrite_algebra
from wengert.program.bands import diagonalize
from wengert.program.diagonal_products import diagonal_products
from wengert.program.ir import Statement, Variable, dup
from wengert.program.liveness import rematerialize
from wengert.program.passes import (
    _fold,
    _key,
    _negated,
    accumulate_in_place,
    elide_broadcasts,
    eliminate_dead_code,
)
from wengert.rules.elementwise import multiply, negative

__all__ = ["fold_and_merge", "simplify", "lower", "optimize"]

# the factors a multiplication folds by, from its facts: 0, 1 and -1 (compared by ==: -0.0 too)
_FOLDING = (0.0, *multiply.primitive.units.values(), *multiply.primitive.negates.values())


def _statement_key(s):
    """What makes two statements equal: the primitive and the arguments (Variables by identity,
    constants by value, ``passes._key``)."""
    parts = [id(s.prim)]
    for a in s.args:
        t = type(a)
        if t is Variable:
            parts.append(a)
        elif t is float:
            parts.append((float, repr(a)))
        else:
            parts.append(_key(a))
    if s.kwargs:
        parts.append(_key(s.kwargs))
    return tuple(parts)


def fold_and_merge(program):
    """``passes.fold_constants`` and ``passes.eliminate_common_subexpressions`` in one sweep: each
    statement is read through the aliases made so far, folded if it folds, else dropped if an
    equal one came earlier. (Merging two equal statements never makes one foldable: both have
    the same arguments, of the same types, constant or not.)"""
    alias, kept, seen = {}, [], {}
    mul = multiply.primitive

    def look(v):
        while type(v) is Variable and v in alias:
            v = alias[v]
        return v

    plain_prims = {}  # primitive -> whether a statement of it reading Variables only is plain
    alias_free = False
    for s in program.statements:
        args = s.args
        key = None
        if s._uses is args and args and len(s.outs) == 1:
            # the commonest case first: one output, Variables only, no keywords (``_uses`` is the
            # arguments themselves only then: ``Statement.uses``), none aliased
            if alias:
                for a in args:
                    if a in alias:
                        break
                else:
                    alias_free = True
            else:
                alias_free = True
            if alias_free:
                alias_free = False
                prim = s.prim
                ok = plain_prims.get(prim)
                if ok is None:
                    ok = plain_prims[prim] = prim is not dup and not prim.shape_only
                if ok:
                    key = (id(prim), *args)
        if key is None:  # not on the short path: constants, aliases, keywords, several outputs
            # Variables only, none aliased (the common case): no folding rule applies, as each needs
            # a constant, but for zeros_like and ones_like, which read only the shape; their key is
            # the primitive and the Variables (as _statement_key makes it)
            plain = True
            for a in args:
                t = type(a)
                if t is not Variable:
                    plain = False
                    if alias and (t is tuple or t is list or t is dict):  # passes._rewritten, inline
                        s = s.replaced(look)
                        args = s.args
                        break
                elif a in alias:
                    s = s.replaced(look)
                    args = s.args
                    plain = False
                    for a in args:  # read through the aliases, it may hold constants now
                        if type(a) is not Variable:
                            break
                    else:
                        plain = True
                    break
            else:
                if alias and s.kwargs:
                    s = s.replaced(look)
                    args = s.args
            plain = plain and bool(args) and len(s.outs) == 1 and not s.kwargs and s.prim is not dup \
                and not s.prim.shape_only
            if not plain and s.prim is mul and len(args) == 2 and not s.kwargs:
                # a Variable times a Python float other than 0, 1 and -1 (as 0.5 * sin(x)): nothing
                # folds it (_negated, _fold), and its key is _statement_key's
                x, y = args
                if type(x) is float and type(y) is Variable and x not in _FOLDING:
                    plain, key = True, (id(mul), (float, repr(x)), y)
                elif type(y) is float and type(x) is Variable and y not in _FOLDING:
                    plain, key = True, (id(mul), x, (float, repr(y)))
            elif plain:
                key = (id(s.prim), *args)
            if not plain:
                negated = _negated(s)
                if negated is not None:
                    s = Statement(s.outs, negative.primitive, (negated,))
                folded = _fold(s)
                if folded is not None:
                    alias[s.outs[0]] = folded
                    continue
                if s.prim is dup or len(s.outs) != 1:
                    kept.append(s)
                    continue
                key = _statement_key(s)
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = s.outs[0]
            kept.append(s)
        else:
            alias[s.outs[0]] = earlier
    outputs = [look(o) if type(o) is Variable else o for o in program.outputs]
    return program.with_statements(kept, outputs)


def simplify(program):
    """Constant folding, common subexpressions and dead code, to a fixed point.

    One round of the three is complete (each statement is rewritten through the aliases made
    earlier in the sweep; dropping dead statements makes nothing foldable): another runs only
    when the algebraic rewrites changed the program."""
    for _ in range(4):
        program = eliminate_dead_code(fold_and_merge(program))
        factored = factor_sums(rewrite_algebra(program))
        if factored is program:
            break
        program = factored
    return program


def lower(program):
    """The passes after ``simplify`` (derivative programs come simplified): broadcasts elided, sums
    factored again (an elided broadcast may expose a scalar factor), in-place accumulation, and
    cheap values computed again where that frees a buffer (``liveness.rematerialize``)."""
    program = factor_products(rewrite_algebra(factor_sums(elide_broadcasts(program))))
    return rematerialize(accumulate_in_place(program))


def optimize(program):
    """``simplify``, ``diagonal_products``, ``bands.diagonalize``, then ``lower``: what ``wg.compile``
    runs."""
    return lower(diagonalize(diagonal_products(simplify(program))))
