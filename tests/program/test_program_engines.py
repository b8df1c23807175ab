"""The compiled engine against the tape on the program suite: value, gradient and JVP to 1e-12
relative (float64), the generated source on its own, and finite differences on a few programs."""

import numpy as np
import pytest

import wengert as wg
from tests.support.program_suite import SUITE
from wengert.program import Program

CASES = [pytest.param(fun, args, id=name) for name, fun, args in SUITE]


def close(got, want, rtol):
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert got.shape == want.shape
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-300)
    assert float(np.max(np.abs(got - want), initial=0.0)) <= rtol * scale, (got, want)


def _rtol(args):
    return 1e-5 if any(getattr(a, "dtype", None) == np.float32 for a in args) else 1e-12


def test_the_suite_is_large_enough():
    assert len(SUITE) >= 30


@pytest.mark.parametrize("fun,args", CASES)
def test_compiled_value_and_gradient_agree_with_the_tape(fun, args):
    argnums = tuple(range(len(args)))
    value, grads = wg.compile(fun).value_and_grad(argnums)(*args)
    want_value, want_grads = wg.value_and_grad(fun, argnums)(*args)
    close(value, want_value, _rtol(args))
    close(wg.compile(fun)(*args), want_value, _rtol(args))
    for g, w in zip(grads, want_grads):
        close(g, w, _rtol(args))


@pytest.mark.parametrize("fun,args", CASES)
def test_jvp_program_agrees_with_dual_numbers(fun, args):
    rng = np.random.default_rng(3)
    tangents = tuple(float(rng.standard_normal()) if type(a) is float else
                     rng.standard_normal(np.shape(a)).astype(np.asarray(a).dtype) for a in args)
    out, t = Program.from_trace(fun, *args).jvp()(*args, tangents)
    want_out, want_t = wg.jvp(fun, args, tangents)
    close(out, want_out, _rtol(args))
    close(t, want_t, _rtol(args))


@pytest.mark.parametrize("fun,args", CASES)
def test_generated_source_runs_with_only_numpy(fun, args):
    compiled = wg.compile(fun).value_and_grad(tuple(range(len(args))))
    source = compiled.source(*args)
    assert "wengert" not in source.split("def ")[0].replace("supplied by wengert", "")
    namespace = {}
    exec(source, namespace)  # a fresh namespace: the source imports what it needs (numpy, math)
    program = compiled.program(*args)
    inputs = [a for a in args if not isinstance(a, int)]
    value, *grads = namespace[program.name](*inputs)
    want_value, want_grads = wg.value_and_grad(fun, tuple(range(len(args))))(*args)
    close(value, want_value, _rtol(args))
    for g, w in zip(grads, want_grads):
        close(g, w, _rtol(args))


def _finite_difference_grad(f, args, i, eps=1e-6):
    x = np.array(args[i], dtype=float)
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[k] += eps
        down[k] -= eps
        a_up, a_down = list(args), list(args)
        a_up[i] = float(up) if type(args[i]) is float else up
        a_down[i] = float(down) if type(args[i]) is float else down
        g[k] = (f(*a_up) - f(*a_down)) / (2 * eps)
    return g


@pytest.mark.parametrize("name", ["seed2", "tiny_network", "mlp", "index_repeated", "prod"])
def test_compiled_gradient_matches_finite_differences(name):
    _, fun, args = next(case for case in SUITE if case[0] == name)
    grads = wg.compile(fun).grad(tuple(range(len(args))))(*args)
    for i, g in enumerate(grads):
        close(g, _finite_difference_grad(fun, args, i), 1e-6)
