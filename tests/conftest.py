"""Shared test setup. The folders mirror ``src/wengert`` (``core/``, ``rules/``, ``engines/``, ``api/``,
``numpy/``, ``scipy/``, ``program/``, ``nn/``, ``cli/``; tests of top-level modules such as ``viz`` sit
here), plus ``docs/``, ``benchmarks/`` and ``fuzz/``. ``tests`` is a package and the repository root is
on ``sys.path`` (``pythonpath`` in ``pyproject.toml``), so helpers are imported one way everywhere,
``from tests.support.rule_helpers import R``, and ``benchmarks`` imports without a path hack."""

import re
from pathlib import Path

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
              "tests/core/test_import_graph_tool.py", "tests/program/test_hostile_native.py",
              "tests/program/test_native_random_programs.py")
"""Benchmark smoke runs, the fuzz profiles, the Dask cluster and example, the wheel built and installed
into fresh virtual environments, the documentation site's build, every rule-table case compiled
by Numba, the memory-growth tests and the import-graph (architecture) checks."""

SLOW_TESTS = ("tests/program/test_native_dtypes.py::test_a_float32_scalar_result_comes_back_as_numpys_"
              "float32",
              "tests/cli/test_rules.py::test_piped_into_a_reader_that_stops_early_exits_quietly",
              "tests/program/test_transforms_against_jax.py::test_compiled_transforms_of_random_programs_"
              "equal_jax",
              "tests/nn/test_torch_edge_settings.py::test_cross_entropy_property_matches_torch",
              "tests/nn/test_torch_edge_settings.py::test_conv_layer_property_matches_torch",
              "tests/nn/test_torch_edge_settings.py::test_normalisation_property_matches_torch",
              "tests/cli/test_main.py::test_version_as_a_module",
              "tests/cli/test_example_and_demo.py::test_example_prints_the_tape_example",
              "tests/cli/test_example_and_demo.py::test_unknown_command_exits_2",
              "tests/cli/test_example_and_demo.py::test_demo_one_epoch_writes_every_output",
              "tests/cli/test_demo_cnn.py::test_demo_cnn_one_epoch_writes_every_output",
              "tests/program/test_source.py::test_cli_prints_the_derivative_program_and_the_table",
              "tests/program/test_source_recompute.py::test_gradient_on_numba_equals_python",
              "tests/program/test_stop_gradient_programs.py::test_the_cut_runs_natively",
              "tests/program/test_native_helpers.py::test_the_gradients_of_extremes_and_masks_run_natively",
              "tests/program/test_native_indexing.py::test_the_rosenbrock_hessian_runs_natively_with_the_python_"
              "backends_numbers",
              "tests/program/test_native_indexing.py::test_a_factor_not_finite_runs_the_dense_program_natively_"
              "as_python_does",
              "tests/program/test_native_indexing.py::test_a_gather_at_repeated_indices_runs_natively",
              "tests/program/test_native_indexing.py::test_the_banded_hessian_checks_every_element_not_the_sum",
              "tests/program/test_native_indexing.py::test_the_dense_program_is_compiled_at_its_first_need_with_the_"
              "python_backends_values",
              "tests/program/test_native_indexing.py::test_a_dense_program_numba_fails_to_compile_at_its_first_need_"
              "runs_as_python",
              "tests/program/test_native_indexing.py::test_the_dense_function_is_made_uncompiled_and_goes_with_its_"
              "handle",
              "tests/program/test_native_indexing.py::test_untake_compiled_equals_the_python_helper",
              "tests/program/test_native_indexing.py::test_a_loop_state_of_an_array_and_a_float_runs_natively",
              "tests/program/test_native_helpers.py::test_native_gradients_equal_python_on_ties",
              "tests/program/test_native_helpers.py::test_the_fused_accumulation_at_the_maxima_runs_natively",
              "tests/program/test_native_helpers.py::test_a_nan_gives_the_python_backends_gradient",
              "tests/program/test_native_helpers.py::test_nan_and_infinite_cotangents_at_the_maxima_give_the_"
              "tapes_gradient_natively",
              "tests/program/test_fused_adds.py::test_compiled_gradients_of_max_programs_equal_jax_at_nan_and_"
              "infinite_cotangents",
              "tests/program/test_source_factor.py::test_the_chain_runs_natively_and_equals_python",
              "tests/program/test_source_asarray.py::test_conversions_differentiate_as_jax",
              "tests/program/test_source_asarray.py::test_the_dtype_conversion_differentiates_as_jax",
              "tests/program/test_source_asarray.py::test_numba_runs_the_conversions_natively",
              "tests/program/test_source_factor.py::test_arguments_named_like_the_numba_support_functions",
              "tests/program/test_compile_iterate_native.py::test_a_compiled_loop_runs_natively_with_the_python_"
              "backends_numbers",
              "tests/program/test_compile_iterate_native.py::test_property_one_compiled_driver_over_n_and_the_"
              "snapshot_budget",
              "tests/program/test_compile_iterate_native.py::test_the_lorenz_rk4_loop_compiled_natively",
              "tests/program/test_compile_iterate_native.py::test_the_lorenz_loop_agrees_with_jax_fori_loop_and_"
              "checkpoint",
              "tests/program/test_compile_iterate_native.py::test_an_array_state_and_a_closed_over_matrix_run_"
              "natively",
              "tests/program/test_compile_iterate_native.py::test_checkpointed_calls_run_natively_with_the_"
              "python_backends_numbers",
              "tests/rules/test_dask_arrays.py::test_listed_exceptions_behave_as_listed_and_are_still_exceptions",
              "tests/rules/test_rule_forms.py::test_softmax_cross_entropy_under_vmap_matches_jax",
              "tests/api/test_vmap_indexing.py::test_random_batched_indices_match_jax",
              "tests/api/test_buffer_stores.py::test_the_hessian_of_buffer_writes_against_jax_and_pytorch",
              "tests/api/test_checkpoint_schedules.py::test_the_closed_form_split_is_the_searched_one",
              "tests/api/test_typing.py::test_mypy_sees_the_transforms_types_and_flags_wrong_uses",
              "tests/engines/test_scalar_hostile.py::test_higher_order_through_scalar_chains_matches_jax",
              "tests/engines/test_scalar_hostile.py::test_vmap_and_grad_of_scalar_reads_match_jax",
              "tests/numpy/test_copy_view_semantics.py::test_compile_and_source_grad_on_every_call",
              "tests/numpy/test_copy_view_semantics.py::test_the_tape_writes_as_numpy_does_after_every_ufunc")
"""CLI runs in subprocesses, the demos' one-epoch runs, and the longest property tests against JAX
(the slowest tests of the rest, by ``pytest --durations``)."""


SWEEPS = ("tests/engines/test_cross_engine.py::test_compiled_value_equals_the_direct_call",
          "tests/engines/test_cross_engine.py::test_compiled_gradient_equals_the_tape",
          "tests/engines/test_cross_engine.py::test_jvp_program_equals_dual_numbers",
          "tests/engines/test_cross_engine.py::test_generated_gradient_source_runs_on_its_own",
          "tests/engines/test_reference_pass.py::test_every_rule_case",
          "tests/engines/test_reference_pass.py::test_every_composed_case",
          "tests/rules/test_batching.py::test_vmap_equals_the_loop",
          "tests/rules/test_batching.py::test_vmap_of_derivatives_equals_the_loop",
          "tests/rules/test_dask_arrays.py::test_differentiating_on_dask_stays_lazy_and_equals_numpy",
          "tests/rules/test_dtypes.py::test_single_precision_stays_single",
          "tests/rules/test_jacobians.py::test_jacobians_equal_one_pass_per_basis_vector",
          "tests/rules/test_jacobians.py::test_hessians_equal_one_tangent_of_the_gradient_per_basis_vector")
"""Rule-table sweeps: every case of the rule table (ids ``name-i``) under one more engine or transform.
``make test`` runs each primitive's first case (``name-0``) under each of them; the other cases are in
the slow group, which CI runs too. The rule table's own test (tests/rules/test_rule_table.py: every
case, both modes, second order) runs every case in ``make test``."""

_LATER_CASE = re.compile(r"-[1-9][0-9]*\]$")

_ROOT = Path(__file__).resolve().parents[1]


def pytest_ignore_collect(collection_path, config):
    """Under ``-m "not slow"`` exactly (``make test``) the modules of SLOW_PATHS are not imported at
    all: every test in them would be deselected, and importing them (Dask, matplotlib, the benchmarks)
    cost each pytest-xdist worker seconds of collection. Any other run collects them as usual."""
    if config.getoption("markexpr") != "not slow":
        return None
    try:
        relative = collection_path.resolve().relative_to(_ROOT).as_posix()
    except ValueError:
        return None
    if collection_path.is_dir():
        relative += "/"
    return True if relative.startswith(SLOW_PATHS) else None


def pytest_collection_modifyitems(config, items):
    for item in items:
        node = item.nodeid
        function = node.split("[")[0]
        if node.startswith(SLOW_PATHS) or function in SLOW_TESTS or (function in SWEEPS
                                                                      and _LATER_CASE.search(node)):
            item.add_marker(pytest.mark.slow)
