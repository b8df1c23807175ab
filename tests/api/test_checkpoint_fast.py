"""``wg.iterate``'s step run as a traced program (``checkpointing/fast.py``): the same gradients as the
step run under a tape per step (the program switched off), as ``checkpoint="all"`` and as the
unrolled loop under ``wg.grad``; the same counts of evaluations and snapshots; the loops that must
not use a program (control flow on a value, random draws, int leaves, outer traces) still right;
memory bounded by the snapshots. No timings (``benchmarks/iterate_speed.py`` measures them).
"""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.api.checkpointing import fast
from wengert.checkpointing import Stats, binomial, ctz

N = 2 * fast.MIN_STEPS + 7  # long enough for the program
BUILD = fast.build


class Counted:
    """A step that counts the times its Python runs."""

    def __init__(self, fun):
        self.fun, self.calls = fun, 0

    def __call__(self, x):
        self.calls += 1
        return self.fun(x)


def _unrolled(step, x, n):
    for _ in range(n):
        x = step(x)
    return x


def _close(a, b):
    for u, v in zip(np.atleast_1d(a), np.atleast_1d(b)):
        np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-12)


W = np.random.default_rng(3).normal(size=(5, 5)) / 3


def _scalar_loss(policy, **kw):
    def loss(x0, a):
        return wg.iterate(lambda x: a * wnp.sin(x) + 0.1 * x, x0, N, checkpoint=policy, **kw)
    return loss


def _array_loss(policy, **kw):
    def loss(x0, a):
        return wnp.sum(wg.iterate(lambda x: wnp.tanh(W @ x) * a + 0.5 * x, x0, N, checkpoint=policy, **kw))
    return loss


def _pytree_loss(policy, **kw):
    def loss(x0, a):
        def step(s):
            return {"p": s["p"] + 0.05 * s["v"], "v": s["v"] - 0.05 * a * wnp.sin(s["p"])}
        out = wg.iterate(step, {"p": x0, "v": 0.5 * x0}, N, checkpoint=policy, **kw)
        return wnp.sum(out["p"] * out["v"])
    return loss


CASES = {"scalar": (_scalar_loss, 0.3), "array": (_array_loss, np.linspace(-1.0, 1.0, 5)),
         "pytree": (_pytree_loss, np.linspace(0.1, 0.9, 3))}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("policy,kw", [("binomial", {}), ("binomial", {"snapshots": 2}), ("ctz", {})],
                         ids=["binomial", "binomial-s2", "ctz"])
def test_program_gives_the_taped_gradient(case, policy, kw, monkeypatch):
    make, x0 = CASES[case]
    g = wg.grad(make(policy, **kw), argnums=(0, 1))
    built = []
    monkeypatch.setattr(fast, "build", lambda *args: built.append(BUILD(*args)) or built[-1])
    with Stats() as fast_stats:
        got = g(x0, 0.9)
    assert [type(b) for b in built] == [fast.StepProgram]
    monkeypatch.setattr(fast, "_TRACER", [])
    with Stats() as taped_stats:
        want = g(x0, 0.9)
    every = wg.grad(make("all"), argnums=(0, 1))(x0, 0.9)
    for a, b, c in zip(got, want, every):
        _close(a, b)
        _close(a, c)
    schedule = binomial(N, kw.get("snapshots")) if policy == "binomial" else ctz(N)
    assert fast_stats.evaluations == taped_stats.evaluations == schedule.evaluations
    assert fast_stats.peak_snapshots == taped_stats.peak_snapshots == schedule.peak_snapshots


def test_the_step_runs_twice_in_python_then_as_a_program():
    """Step 0 as before (finding what it closes over), once more traced; every other evaluation of
    the forward sweep and the reverse sweep is the program's."""
    step = Counted(lambda x: 0.9 * wnp.sin(x) + 0.1 * x)
    g = wg.grad(lambda x0: wg.iterate(step, x0, N, checkpoint="binomial"))(0.3)
    assert step.calls == 2
    want = wg.grad(lambda x0: _unrolled(lambda x: 0.9 * wnp.sin(x) + 0.1 * x, x0, N))(0.3)
    _close(g, want)


def test_short_loops_run_the_step_as_before():
    step = Counted(lambda x: 0.9 * wnp.sin(x))
    wg.grad(lambda x0: wg.iterate(step, x0, fast.MIN_STEPS - 1, checkpoint="binomial"))(0.3)
    assert step.calls > fast.MIN_STEPS


def test_python_floats_stay_python_floats():
    out = wg.iterate(lambda x: 0.9 * wnp.sin(x) + 0.1 * x, 0.3, N, checkpoint="binomial")
    assert type(out) is float
    g = wg.grad(lambda x0: wg.iterate(lambda x: 0.9 * wnp.sin(x) + 0.1 * x, x0, N,
                                      checkpoint="binomial"))(0.3)
    assert type(g) is float


# -- loops the program must not run ------------------------------------------------------------------

def test_control_flow_on_a_value_runs_the_step_as_before():
    """Tracing refuses ``if x > 0`` on a traced value: the loop follows Python at each step."""
    def raw(x):
        return 0.9 * wnp.sin(x) + 0.5 if x > 0.8 else 1.1 * x + 0.2

    step = Counted(raw)
    g = wg.grad(lambda x0: wg.iterate(step, x0, N, checkpoint="binomial"))(0.1)
    assert step.calls > N
    _close(g, wg.grad(lambda x0: _unrolled(raw, x0, N))(0.1))


def test_random_draws_are_replayed_not_traced():
    """A step drawing random numbers must draw them again in each recomputation: not a program
    (which would repeat one draw). Gradient and value of the plain loop from the same seed."""
    def raw(x):
        return 0.9 * wnp.sin(x) + 0.1 * np.random.rand()

    step = Counted(raw)
    np.random.seed(5)
    value, g = wg.value_and_grad(lambda x0: wg.iterate(step, x0, N, checkpoint="binomial"))(0.3)
    after = np.random.rand()
    assert step.calls > N
    np.random.seed(5)
    want_value, want = wg.value_and_grad(lambda x0: _unrolled(raw, x0, N))(0.3)
    _close(value, want_value)
    _close(g, want)
    assert np.random.rand() == after


def test_int_leaves_run_the_step_as_before():
    """An int in the state changes from step to step: a program would hold it as a constant."""
    def raw(s):
        x, k = s
        return (0.9 * wnp.sin(x) + 0.01 * k, k + 1)

    step = Counted(raw)
    g = wg.grad(lambda x0: wg.iterate(step, (x0, 0), N, checkpoint="binomial")[0])(0.3)
    assert step.calls > N
    _close(g, wg.grad(lambda x0: _unrolled(raw, (x0, 0), N)[0])(0.3))


def test_second_derivatives_record_the_step():
    """grad of grad: the outer trace must see every step, so those sweeps run the step as before."""
    def loss(a):
        return wg.iterate(lambda x: a * wnp.sin(x) + 0.1 * x, 0.3, N, checkpoint="binomial")

    def unrolled(a):
        return _unrolled(lambda x: a * wnp.sin(x) + 0.1 * x, 0.3, N)

    _close(wg.grad(wg.grad(loss))(0.9), wg.grad(wg.grad(unrolled))(0.9))
    _close(wg.jvp(wg.grad(loss), (0.9,), (1.0,))[1], wg.grad(wg.grad(unrolled))(0.9))
    _close(wg.jvp(loss, (0.9,), (1.0,))[1], wg.grad(unrolled)(0.9))


def test_a_captured_array_written_before_the_pullback_is_refused():
    V = np.linspace(0.5, 1.0, 4)

    def loss(x0):
        return wnp.sum(wg.iterate(lambda x: wnp.sin(x) * V, x0, N, checkpoint="binomial"))

    _, pullback = wg.vjp(loss, np.ones(4))
    V[0] = 7.0
    with pytest.raises(RuntimeError, match="was written after <lambda> ran"):
        pullback(1.0)


def test_a_compiled_step():
    """A ``wg.compile``d step: the loop traces through it (its arguments are traced values) and runs
    the program it traced."""
    calls = [0]

    def raw(x):
        calls[0] += 1
        return 0.9 * wnp.sin(x) + 0.1 * x

    step = wg.compile(raw)
    g = wg.grad(lambda x0: wnp.sum(wg.iterate(step, x0, N, checkpoint="binomial")))(np.linspace(0, 1, 3))
    assert calls[0] == 2
    want = wg.grad(lambda x0: wnp.sum(_unrolled(step, x0, N)))(np.linspace(0, 1, 3))
    _close(g, want)


def test_compiled_loss_containing_a_checkpointed_loop():
    """``wg.compile`` of a function calling ``wg.iterate``: the program holds the loop's steps."""
    loss = _scalar_loss("binomial")
    got = wg.compile(loss).grad((0, 1))(0.3, 0.9)
    want = wg.grad(loss, argnums=(0, 1))(0.3, 0.9)
    for a, b in zip(got, want):
        _close(a, b)


def test_jax_agrees():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jloss(x0, a):
        return jnp.sum(jax.lax.fori_loop(0, N, lambda i, x: jnp.tanh(jnp.asarray(W) @ x) * a + 0.5 * x, x0))

    x0 = np.linspace(-1.0, 1.0, 5)
    want = jax.grad(jloss, argnums=(0, 1))(x0, 0.9)
    got = wg.grad(_array_loss("binomial", snapshots=3), argnums=(0, 1))(x0, 0.9)
    for a, b in zip(got, want):
        _close(a, np.asarray(b))


# -- memory ----------------------------------------------------------------------------------------------

def test_live_states_are_the_snapshots_and_one_step_with_the_program():
    """As ``test_checkpoint_schedules``' test of live states, for a state the program runs: the
    program's trace (once, at step 0, while x_0 alone is kept) and its functions keep no state of
    their own beyond their inputs' examples."""
    size = fast.MAX_STATE_SIZE
    x0 = np.random.default_rng(0).uniform(-2, 2, size)
    step = Counted(lambda v: 0.9 * wnp.sin(v) + 0.1 * v)

    def loss(x, a):
        return wnp.sum(wg.iterate(lambda v: a * step(v), x, 256, checkpoint="binomial", snapshots=6))

    g = wg.grad(loss, argnums=(0, 1))
    g(x0, 0.9)  # the first trace imports what the tracer needs: not the loop's memory
    step.calls = 0
    tracemalloc.start()
    try:
        with Stats() as stats:
            g(x0, 0.9)
        states = tracemalloc.get_traced_memory()[1] / x0.nbytes
    finally:
        tracemalloc.stop()
    assert step.calls == 2  # the program ran the loop
    assert states <= stats.peak_snapshots + 11, (states, stats.peak_snapshots)


# -- the property -------------------------------------------------------------------------------------------

STEPS = {
    "sin": lambda a: lambda x: a * wnp.sin(x) + 0.1 * x,
    "tanh-matrix": lambda a: lambda x: wnp.tanh(W[:3, :3] @ x) * a + 0.5 * x,
    "exp-decay": lambda a: lambda x: x * wnp.exp(-0.01 * a * x * x),
    "pair": lambda a: lambda s: (s[0] + 0.05 * s[1], s[1] - 0.05 * a * wnp.sin(s[0])),
}


@settings(max_examples=20, deadline=None, derandomize=True)
@given(name=st.sampled_from(sorted(STEPS)), n=st.integers(fast.MIN_STEPS, 160),
       snapshots=st.integers(1, 8), policy=st.sampled_from(["binomial", "ctz"]),
       x=st.floats(-1.5, 1.5), a=st.floats(0.2, 1.2))
def test_property_same_gradient_as_the_unrolled_loop(name, n, snapshots, policy, x, a):
    x0 = np.full(3, x) + np.arange(3) * 0.1
    if name == "pair":
        x0 = (x0, 0.5 * x0)
    kw = {"snapshots": snapshots} if policy == "binomial" else {}

    def total(s):
        return wnp.sum(s[0] * s[1]) if name == "pair" else wnp.sum(s)

    def loss(x0, a):
        return total(wg.iterate(STEPS[name](a), x0, n, checkpoint=policy, **kw))

    def unrolled(x0, a):
        return total(_unrolled(STEPS[name](a), x0, n))

    got = wg.grad(loss, argnums=(0, 1))(x0, a)
    want = wg.grad(unrolled, argnums=(0, 1))(x0, a)
    for g, w in zip(_leaves(got), _leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)


def _leaves(tree):
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in _leaves(t)]
    return [tree]
