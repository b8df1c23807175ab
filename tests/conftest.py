"""Shared test setup. The folders mirror ``src/wengert`` (``core/``, ``rules/``, ``engines/``, ``api/``,
``numpy/``, ``scipy/``, ``program/``, ``nn/``, ``cli/``; tests of top-level modules such as ``viz`` sit
here), plus ``docs/``, ``benchmarks/`` and ``fuzz/``. ``tests`` is a package and the repository root is
on ``sys.path`` (``pythonpath`` in ``pyproject.toml``), so helpers are imported one way everywhere,
``from tests.support.rule_helpers import R``, and ``benchmarks`` imports without a path hack."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    """A NumPy generator with a fixed seed, fresh for each test that takes it as an argument, so that
    a test's inputs do not depend on which tests ran before it in the same module."""
    return np.random.default_rng(0)
