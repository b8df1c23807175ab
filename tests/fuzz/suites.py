"""The property tests, one per group of rule families, built for a given Hypothesis profile:
``test_fuzz.py`` builds them with the CI profile, ``run.py`` (``make fuzz``) with the long one."""

import collections

from hypothesis import given

from . import checks, known
from .generator import FAMILIES, programs

SUITES = {
    "elementwise": dict(families=("elementwise",)),
    "reductions": dict(families=("elementwise", "reductions")),
    "shapes": dict(families=("elementwise", "shape", "reductions")),
    "indexing": dict(families=("elementwise", "indexing", "reductions")),
    "products": dict(families=("elementwise", "products", "reductions")),
    "linalg": dict(families=("elementwise", "linalg", "products")),
    "control": dict(families=("elementwise", "control", "reductions")),
    "complex": dict(families=("complex", "reductions", "shape", "indexing", "products"),
                    dtypes=("complex128", "complex64")),
    "composites": dict(families=("elementwise", "composites", "indexing", "reductions", "shape"),
                       weights_as_args=True, pytrees=False),
    "everything": dict(families=FAMILIES, max_steps=10),
}

STATS = collections.Counter()
"""Programs checked (``"programs"``), and how often each feature occurred in them."""


def property_test(name, profile):
    """The property test of suite ``name`` under the Hypothesis settings ``profile``."""

    @profile
    @given(programs(**SUITES[name]))
    def test(program):
        STATS["programs"] += 1
        STATS.update(program.features)
        checks.check(program, known.skipped(program))

    test.__name__ = f"test_{name}"
    return test
