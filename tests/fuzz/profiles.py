"""Hypothesis profiles of the fuzz tests; ``WENGERT_FUZZ_PROFILE`` picks one (``ci`` by default).

- ``ci``: derandomized (the same programs on every run), sized to run in about half a minute in all,
  collected by plain ``pytest``;
- ``fuzz``: fresh random programs, no deadline, the shrunk failure printed with its reproduction blob
  (``make fuzz`` runs it in rounds until its time budget is spent);
- ``dev``: a few programs per test, for a quick look while editing the generator.
"""

import os

from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, database=None, report_multiple_bugs=False,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])

settings.register_profile("ci", derandomize=True, max_examples=100, print_blob=False, **_COMMON)
settings.register_profile("fuzz", derandomize=False, max_examples=200, print_blob=True, **_COMMON)
settings.register_profile("dev", derandomize=False, max_examples=10, print_blob=True, **_COMMON)


def current():
    """The profile named by ``WENGERT_FUZZ_PROFILE`` (``ci`` when unset)."""
    return settings.get_profile(os.environ.get("WENGERT_FUZZ_PROFILE", "ci"))
