"""Random programs through every engine (``suites.py``, ``checks.py``), under the CI profile: the
same programs on every run. ``make fuzz`` runs the same properties on fresh programs for longer."""

from . import profiles
from .suites import property_test

_PROFILE = profiles.current()

test_elementwise = property_test("elementwise", _PROFILE)
test_reductions = property_test("reductions", _PROFILE)
test_shapes = property_test("shapes", _PROFILE)
test_indexing = property_test("indexing", _PROFILE)
test_products = property_test("products", _PROFILE)
test_linalg = property_test("linalg", _PROFILE)
test_control = property_test("control", _PROFILE)
test_complex = property_test("complex", _PROFILE)
test_composites = property_test("composites", _PROFILE)
test_everything = property_test("everything", _PROFILE)
