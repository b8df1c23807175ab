"""``wg.compile`` refuses a function that draws random numbers while traced: the program would
repeat the traced draw on every call (a plain call draws new numbers). The random state is left as
before the trace."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert import nn
from wengert.core.errors import TracingError

RNG = np.random.default_rng(0)


def draws_global(x):
    return wnp.sum(x * np.random.rand(3))


def draws_wengert_random(x):
    return wnp.sum(x * wnp.random.normal(size=3))


def draws_module_generator(x):
    return wnp.sum(x * RNG.normal(size=3))


@pytest.mark.parametrize("fun,source", [(draws_global, r"NumPy's global random state"),
                                        (draws_wengert_random, r"NumPy's global random state"),
                                        (draws_module_generator, r"the Generator RNG")])
@pytest.mark.parametrize("transform", ["call", "grad", "value_and_grad"])
def test_a_draw_while_tracing_is_refused_naming_the_source(fun, source, transform):
    compiled = wg.compile(fun)
    run = {"call": compiled, "grad": compiled.grad(0),
           "value_and_grad": compiled.value_and_grad(0)}[transform]
    state = np.random.get_state()[1].copy()
    rng_state = RNG.bit_generator.state
    with pytest.raises(TracingError, match=rf"wg\.compile\({fun.__name__}\): {fun.__name__} draws random "
                                              rf"numbers \(from {source}"):
        run(np.ones(3))
    assert np.array_equal(np.random.get_state()[1], state)
    assert RNG.bit_generator.state == rng_state


def test_dropout_in_training_mode_is_refused_and_in_eval_mode_compiles():
    drop = nn.Dropout(0.5, rng=np.random.default_rng(1))

    def f(x):
        return wnp.sum(drop(x) * x)

    x = np.arange(1.0, 5.0)
    with pytest.raises(TracingError, match="draws random numbers"):
        wg.compile(f)(x)
    drop.eval()
    assert np.isclose(wg.compile(f)(x), np.sum(x * x))


def test_a_generator_made_with_a_seed_inside_the_function_compiles():
    def f(x):
        return wnp.sum(x * np.random.default_rng(7).normal(size=3))

    x = np.array([0.5, -1.0, 2.0])
    assert np.isclose(wg.compile(f)(x), f(x))
    assert np.allclose(wg.compile(f).grad(0)(x), np.random.default_rng(7).normal(size=3))
