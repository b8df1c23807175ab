"""Random straight-line programs give the same values before and after the passes (``simplify``,
``lower``: folding, merging, the algebraic rewrites, census-guarded skips), and their compiled
derivatives (gradient, Hessian) those of the tape."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.program import Program, pipeline

OPS = ("pow0", "pow1", "pow2", "mul", "add", "sub", "sin", "neg", "scale", "sum")


def _apply(op, a, b, c):
    if op == "pow0":
        return a ** 0
    if op == "pow1":
        return a ** 1
    if op == "pow2":
        return a ** 2
    if op == "mul":
        return a * b
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "sin":
        return wnp.sin(a)
    if op == "neg":
        return -a
    if op == "scale":
        return c * a
    return wnp.sum(a) * b  # a scalar factor of a sum


def _program(steps):
    def f(x, y):
        values = [x, y]
        for op, i, j, c in steps:
            values.append(_apply(op, values[i % len(values)], values[j % len(values)], c))
        total = 0.0
        for v in values[2:]:
            total = total + wnp.sum(v)
        return total + wnp.sum(x * y)

    return f


STEPS = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 7), st.integers(0, 7),
                           st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0])), min_size=1, max_size=7)
FLOATS = st.floats(-1.5, 1.5, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(STEPS, st.lists(FLOATS, min_size=3, max_size=3), FLOATS)
def test_passes_keep_values_of_random_programs(steps, xs, y):
    f = _program(steps)
    x = np.array(xs)
    p = Program.from_trace(f, x, y)
    want = p(x, y)
    for q in (pipeline.simplify(p), pipeline.optimize(p)):
        np.testing.assert_allclose(q(x, y), want, rtol=1e-9, atol=1e-12)
    g = p.grad((0, 1))
    lowered, tape = pipeline.lower(g)(x, y), wg.grad(f, argnums=(0, 1))(x, y)
    for got, ref in zip(lowered, tape):
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(STEPS, st.lists(FLOATS, min_size=3, max_size=3))
def test_compiled_hessians_of_random_programs_are_the_tapes(steps, xs):
    f = _program(steps)
    x = np.array(xs)
    g = lambda v: f(v, 0.75)  # noqa: E731
    np.testing.assert_allclose(wg.compile(wg.hessian(g))(x), wg.hessian(g)(x), rtol=1e-9, atol=1e-10)


def test_compiled_rosenbrock_hessian_is_jaxs():
    """The compiled Hessian (folded powers of zero, in-place writes, moved negations) against JAX's."""
    jax = __import__("pytest").importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def rosen(xp, x):
        return xp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

    x = np.linspace(-1.2, 1.1, 7)
    h = wg.compile(wg.hessian(lambda v: rosen(wnp, v)))
    want = np.asarray(jax.hessian(lambda v: rosen(jnp, v))(jnp.asarray(x)))
    np.testing.assert_allclose(h(x), want, rtol=1e-12, atol=1e-10)
    assert "**" not in h.source(x).split("def ")[-1].replace("** 2", "")  # no power of zero or one left
