"""The rule table: every primitive's implementation, VJP and JVP, defined once, by family.

The families import each other without cycles: ``broadcasting`` (broadcast_to and its adjoint, with
the sums, reshapes, casts and real parts they are made of) needs none; ``complex``, ``elementwise``,
``indexing``, ``shape``, ``reductions`` and the rest build on it and on each other in that order.

Families: ``elementwise`` (ufuncs), ``broadcasting`` (broadcast_to and its adjoint),
``reductions``, ``shape``, ``indexing``, ``products``, and ``nondiff`` (functions whose result
carries no derivative). Every engine -- tape, dual numbers, and later the program transformer --
reads these rules; none defines a derivative of its own.
"""

import importlib
import pkgutil
import sys

from wengert.core.primitive import Primitive
from wengert.rules import broadcasting, elementwise, indexing, nondiff, products, reductions, shape  # noqa: F401

__all__ = ["rule_table", "families", "loaded_families", "register_family"]

OPTIONAL_DEPENDENCIES = ("scipy",)
"""A family module that needs one of these is left out of the table when it is not installed."""


EXTRA_FAMILIES = []
"""Modules of primitives defined above the rules layer (``odeint``, whose rules call the transforms),
added by :func:`register_family` when they are imported."""


def register_family(module):
    """Count ``module``'s primitives in the rule table (for a family that cannot live in this package)."""
    if module not in EXTRA_FAMILIES:
        EXTRA_FAMILIES.append(module)


def families():
    """Every family module under ``wengert.rules`` (imported here), in name order, then those
    registered by :func:`register_family`."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        try:
            found.append(importlib.import_module(f"{__name__}.{info.name}"))
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in OPTIONAL_DEPENDENCIES:
                raise
    return found + EXTRA_FAMILIES


_NAMES = []  # the family modules' names under this package (listed once)


def loaded_families():
    """The family modules imported so far (and those registered), in name order: every primitive
    that exists belongs to one of them, so what generated code may name is found here without
    importing the others (``special`` imports SciPy)."""
    if not _NAMES:
        _NAMES.extend(sorted(info.name for info in pkgutil.iter_modules(__path__)))
    modules = sys.modules
    found = [modules[f"{__name__}.{name}"] for name in _NAMES if f"{__name__}.{name}" in modules]
    return found + EXTRA_FAMILIES


def rule_table():
    """Every differentiable primitive, by name (aliases such as ``abs`` listed once)."""
    table = {}
    for module in families():
        for value in vars(module).values():
            value = getattr(value, "primitive", value)  # fast entry points carry their Primitive
            if isinstance(value, Primitive) and not value.nondiff and value not in table.values():
                table[value.__name__] = value
    return table
