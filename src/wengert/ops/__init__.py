"""The rule table: every primitive's implementation, VJP and JVP, defined once, by family.

Families: ``elementwise`` (ufuncs), ``broadcasting`` (broadcast_to and its adjoint),
``reductions``, ``shape``, ``indexing``, ``products``, and ``nondiff`` (functions whose result
carries no derivative). Every engine -- tape, dual numbers, and later the program transformer --
reads these rules; none defines a derivative of its own.
"""

# Import order matters: elementwise needs broadcasting's functions when it defines its primitives,
# and importing elementwise first loads broadcasting (and what it needs) completely before that.
from wengert.ops import elementwise  # noqa: I001
from wengert.ops import broadcasting, indexing, nondiff, products, reductions, shape
from wengert.primitive import Primitive

__all__ = ["rule_table", "FAMILIES"]

FAMILIES = (elementwise, broadcasting, reductions, shape, indexing, products)


def rule_table():
    """Every differentiable primitive, by name (aliases such as ``abs`` listed once)."""
    table = {}
    for module in FAMILIES:
        for value in vars(module).values():
            value = getattr(value, "primitive", value)  # fast entry points carry their Primitive
            if isinstance(value, Primitive) and not value.nondiff and value not in table.values():
                table[value.__name__] = value
    return table
