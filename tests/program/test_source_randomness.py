"""Programs built from source (wg.source_grad, every checkpoint policy) refuse random draws: the
draw would run once, when the program is built, and its numbers would be constants of the program
-- the same on every call and every recomputation, unlike the plain function's. The error names
the line and what drew; the random state is left as it was. The tape (wg.grad) is the way.
"""

import numpy as np
import pytest

import wengert as wg

X = np.array([0.5, 1.0, 1.5])
RNG = np.random.default_rng(0)


def global_draw(x):
    for i in range(6):
        x = np.tanh(x * np.random.rand(3))
    return np.sum(x)


def generator_draw(x):
    for i in range(6):
        x = np.tanh(x * RNG.random(3))
    return np.sum(x)


def own_generator(x):
    rng = np.random.default_rng(0)
    for i in range(6):
        x = np.tanh(x * rng.random(3))
    return np.sum(x)


def marked_loop(x):
    for i in wg.checkpointed(range(6), "binomial", snapshots=2):
        x = np.sin(x) + np.random.randn()
    return np.sum(x)


CASES = [(global_draw, 18, r"NumPy's global random state \(np\.random\)"),
         (generator_draw, 24, r"the Generator RNG"),
         (own_generator, 31, r"the Generator rng"),
         (marked_loop, 37, r"NumPy's global random state \(np\.random\)")]


@pytest.mark.parametrize("checkpoint", ["all", "ctz", "binomial"])
@pytest.mark.parametrize("fun, line, what", CASES, ids=[c[0].__name__ for c in CASES])
def test_source_grad_refuses_draws(fun, line, what, checkpoint):
    state = np.random.get_state()
    generator_state = RNG.bit_generator.state
    with pytest.raises(wg.TransformError,
                       match=rf"the statement at .*test_source_randomness\.py, line {line} \(in "
                             rf"{fun.__name__}\) draws random numbers from {what}: a program built from "
                             rf"source would hold this draw as constants, the same on every call\. The "
                             rf"tape \(wg\.grad\) handles it"):
        wg.source_grad(fun, checkpoint=checkpoint)(X)
    after = np.random.get_state()
    assert np.array_equal(after[1], state[1]) and after[2:] == state[2:]
    assert RNG.bit_generator.state == generator_state


def test_the_tape_differentiates_them_and_a_seeded_draw_outside_loops_is_fine():
    np.random.seed(0)
    g = wg.grad(own_generator)(X)
    rows = np.random.default_rng(0).random((6, 3))
    x, d = X.copy(), np.ones(3)
    for r in rows:
        y = np.tanh(x * r)
        d = d * (1 - y ** 2) * r
        x = y
    assert np.allclose(g, d, rtol=1e-12)

    def deterministic(x):
        return np.sum(np.sin(x) * 2.0)

    assert np.allclose(wg.source_grad(deterministic)(X), 2 * np.cos(X))
