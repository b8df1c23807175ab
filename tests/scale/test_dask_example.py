"""examples/dask_logistic_regression.py at a small size: the fit on a LocalCluster converges, no worker
is restarted, and it matches the in-memory NumPy fit of the same rows to 1e-8."""


import pytest

from tests.support.examples import load_example

pytest.importorskip("dask.array")
pytest.importorskip("distributed")
pytest.importorskip("scipy.optimize")





def test_small_fit_matches_numpy_in_memory(capsys):
    example = load_example("dask_logistic_regression.py")
    out = example.main(["--rows", "30000", "--features", "6", "--chunk-rows", "7000",
                        "--memory-limit", "500MB", "--check"])
    printed = capsys.readouterr().out
    assert out["converged"] and out["workers_survived"]
    assert out["max_difference"] < 1e-8
    assert "5 chunks, generated lazily" in printed and "largest weight difference" in printed


def test_the_data_is_the_same_whichever_worker_computes_it():
    """Each chunk draws from its own generator (seeded by its position): two computations agree, so the
    loss and its gradient in one iteration and the next see the same rows."""
    import numpy as np

    example = load_example("dask_logistic_regression.py")
    x, y = example.make_data(1000, 3, 250)
    assert x.numblocks[0] == 4
    first = x.compute(scheduler="sync"), y.compute(scheduler="sync")
    second = x.compute(scheduler="threads"), y.compute(scheduler="threads")
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert set(np.unique(first[1])) == {0.0, 1.0}
