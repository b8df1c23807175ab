"""Random programs under ``wg.grad``, ``wg.hessian``, ``wg.jacrev``, ``wg.jacfwd`` and ``wg.vmap(wg.grad)``,
eager and compiled, against JAX (float64): the same values, shapes and dtypes. Inputs are drawn from a
few values so that ties (``max``, ``maximum``, ``sort``), zeros (``abs``, ``where``) and empty batches
come up; the programs broadcast, reduce, index with repeated indices and chain reshapes and transposes.
In the slow group (each example compiles five programs)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import wengert as wg
import wengert.numpy as wnp

# Each step maps an array of shape (n, k), k >= 1, to one of the same shape; ``m`` is the NumPy-like
# module (wengert.numpy or jax.numpy), so one definition serves both libraries.
STEPS = {
    "sin_times": lambda m, x: m.sin(x) * x,
    "where": lambda m, x: m.where(x > 0, x ** 2, -x),
    "abs": lambda m, x: m.abs(x - 0.3) * x,  # off 0: its kink's derivative is a convention (see below)
    "broadcast_row_sum": lambda m, x: m.tanh(x) + m.sum(x, axis=-1, keepdims=True),
    "max_ties": lambda m, x: m.max(x, axis=-1, keepdims=True) * x,
    "maximum_ties": lambda m, x: m.maximum(x, 0.5) + m.minimum(x, x * 0.0),
    "sort": lambda m, x: m.sort(x, axis=-1) * m.arange(x.shape[-1]) + x,
    "transpose_reshape": lambda m, x: (x.T * 2.0).reshape(x.shape) + x,
    "repeated_index": lambda m, x: x[:, [0, 0, -1]][:, :1] * x,
    "exp_mean": lambda m, x: m.exp(x * 0.3) - m.mean(x, axis=0, keepdims=True),
}

VALUES = st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0])


def _program(m, names):
    def f(x):
        for name in names:
            x = STEPS[name](m, x)
        return x
    return f


def _check_like(name, got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{name}: shape {got.shape}, JAX {expected.shape}"
    assert got.dtype == expected.dtype, f"{name}: dtype {got.dtype}, JAX {expected.dtype}"
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10, err_msg=name)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=3),
       x=st.tuples(st.integers(0, 3), st.integers(1, 3)).flatmap(
           lambda shape: arrays(np.float64, shape, elements=VALUES)))
def test_compiled_transforms_of_random_programs_equal_jax(names, x):
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    f, jf = _program(wnp, names), _program(jnp, names)

    def scalar(x):
        return wnp.sum(f(x) ** 2)

    def jscalar(x):
        return jnp.sum(jf(x) ** 2)

    cases = {
        "grad": (wg.grad(scalar), jax.grad(jscalar)),
        "hessian": (wg.hessian(scalar), jax.hessian(jscalar)),
        "jacrev": (wg.jacrev(f), jax.jacrev(jf)),
        "jacfwd": (wg.jacfwd(f), jax.jacfwd(jf)),
        "vmap(grad)": (wg.vmap(wg.grad(lambda row: wnp.sum(f(row[None]) ** 3))),
                       jax.vmap(jax.grad(lambda row: jnp.sum(jf(row[None]) ** 3)))),
    }
    for transform, (ours, theirs) in cases.items():
        expected = theirs(x)
        label = f"{transform} of {' -> '.join(names)} at {x.tolist()}"
        _check_like(f"{label} (eager)", ours(x), expected)
        _check_like(f"{label} (compiled)", wg.compile(ours)(x), expected)
