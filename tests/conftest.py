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


# -- the slow groups: `make test` leaves them out, `make test-slow` runs them (CI runs both) ----------

SLOW_PATHS = ("tests/benchmarks/", "tests/fuzz/", "tests/scale/", "tests/test_package.py",
              "tests/docs/test_site.py", "tests/program/test_native_rules.py",
              "tests/engines/test_write_memory.py", "tests/test_layers.py",
              "tests/core/test_import_graph_tool.py")
"""Benchmark smoke runs, the fuzz profiles, the Dask cluster and example, the wheel built and installed
into fresh virtual environments, the documentation site's build, every rule-table case compiled
by Numba, the memory-growth tests and the import-graph (architecture) checks."""

SLOW_TESTS = ("tests/cli/test_rules.py::test_piped_into_a_reader_that_stops_early_exits_quietly",
              "tests/cli/test_main.py::test_version_as_a_module",
              "tests/cli/test_example_and_demo.py::test_example_prints_the_tape_example",
              "tests/cli/test_example_and_demo.py::test_unknown_command_exits_2",
              "tests/cli/test_example_and_demo.py::test_demo_one_epoch_writes_every_output",
              "tests/cli/test_demo_cnn.py::test_demo_cnn_one_epoch_writes_every_output",
              "tests/program/test_source.py::test_cli_prints_the_derivative_program_and_the_table",
              "tests/program/test_source_recompute.py::test_gradient_on_numba_equals_python",
              "tests/rules/test_dask_arrays.py::test_listed_exceptions_behave_as_listed_and_are_still_exceptions",
              "tests/rules/test_rule_forms.py::test_softmax_cross_entropy_under_vmap_matches_jax",
              "tests/api/test_vmap_indexing.py::test_random_batched_indices_match_jax",
              "tests/api/test_buffer_stores.py::test_the_hessian_of_buffer_writes_against_jax_and_pytorch",
              "tests/api/test_checkpoint_schedules.py::test_the_closed_form_split_is_the_searched_one",
              "tests/api/test_typing.py::test_mypy_sees_the_transforms_types_and_flags_wrong_uses",
              "tests/engines/test_scalar_hostile.py::test_higher_order_through_scalar_chains_matches_jax",
              "tests/engines/test_scalar_hostile.py::test_vmap_and_grad_of_scalar_reads_match_jax")
"""CLI runs in subprocesses, the demos' one-epoch runs, and the longest property tests against JAX
(the slowest tests of the rest, by ``pytest --durations``)."""


def pytest_collection_modifyitems(config, items):
    for item in items:
        node = item.nodeid
        if node.startswith(SLOW_PATHS) or node.split("[")[0] in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
