"""Every failure the fuzzer found, as a regular test: fixed ones here with their minimal program,
pending ones (``known.KNOWN_BROKEN``) as strict expected failures until their fix is merged."""

import pytest

from . import known

_PENDING = pytest.mark.xfail(strict=True, reason="known broken; once this passes, remove the entry from "
                                                  "tests/fuzz/known.py (WENGERT_FUZZ_ENABLE=all runs it)")


@pytest.mark.parametrize("entry", [pytest.param(k, id=k.key, marks=() if known.enabled(k) else _PENDING)
                                   for k in known.KNOWN_BROKEN])
def test_known_broken_reproducer(entry):
    entry.reproducer()


@pytest.mark.parametrize("entry", [pytest.param(k, id=k.key) for k in known.FIXED])
def test_fixed_reproducer(entry):
    entry.reproducer()


def test_known_entries_are_described():
    from .checks import CHECKS

    keys = [k.key for k in known.KNOWN_BROKEN + known.FIXED]
    assert len(keys) == len(set(keys))
    for k in known.KNOWN_BROKEN:
        assert k.description and k.area and k.skips <= set(CHECKS), k.key
