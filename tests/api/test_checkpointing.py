"""Checkpointing: the schedules as data (Griewank's minimum, CTZ's bounds, the first seed's n = 16
diagram), and wg.iterate / wg.checkpoint giving the gradients of storing everything, to 1e-12,
under every transform, with closed-over parameters and second derivatives.
"""

import math

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.checkpointing import Action, Stats, binomial, ctz

# -- schedules as data ---------------------------------------------------------------------------------


def griewank_minimum(n, s):
    """t = r n - C(s+r, s+1), r the integer with C(s+r-1, s) < n <= C(s+r, s) (Griewank 1992)."""
    r = 0
    while not (math.comb(s + r - 1, s) < n <= math.comb(s + r, s)):
        r += 1
    return r * n - math.comb(s + r, s + 1)


def test_griewank_example_from_the_issue():
    assert griewank_minimum(1024, 10) == 3755
    assert binomial(1024, 10).advances == 3755


@pytest.mark.parametrize("s", range(1, 11))
def test_binomial_advances_equal_griewank_minimum(s):
    for n in range(1, 301):
        schedule = binomial(n, s)  # building it replays it: a wrong reversal raises
        assert schedule.advances == griewank_minimum(n, s), (n, s)
        assert schedule.peak_snapshots <= s
        assert [a.position for a in schedule if a.kind == "reverse"] == list(range(n - 1, -1, -1))


def test_binomial_default_snapshots_is_ceil_log2_n():
    assert binomial(1024).snapshots == 10
    assert binomial(1000).snapshots == 10
    assert binomial(1).snapshots == 1


@pytest.mark.parametrize("chunk", range(4))
def test_ctz_bounds_for_every_n_up_to_2000(chunk):
    for n in range(1 + chunk, 2001, 4):
        schedule = ctz(n)
        assert schedule.peak_snapshots <= math.floor(math.log2(n)) + 2, n
        assert schedule.evaluations <= n * (math.ceil(math.log2(n)) + 1), n
        assert schedule.evaluations == schedule.advances + n


def test_ctz_16_reproduces_the_first_seeds_diagram():
    schedule = ctz(16)
    # Cached after the forward sweep: 0, 8, c, e, f (the seed's first diagram).
    held = []
    for a in schedule[:schedule.first_reverse()]:
        if a.kind == "snapshot":
            del held[a.slot:]
            held.append(a.position)
    assert held == [0, 8, 12, 14, 15]
    # The recomputations, in the seed's order: d from c; 8 to b keeping a; 9 from 8; 0 to 7 keeping
    # 4 and 6; 5 from 4; 0 to 3 keeping 2; 1 from 0.
    runs, run = [], None
    for a in schedule[schedule.first_reverse():]:
        if a.kind == "restore":
            run = [a.position]
        elif a.kind == "advance":
            run.append(a.position + a.steps)
        elif a.kind == "reverse":
            if run is not None and len(run) > 1:
                runs.append(run)
            run = None
    assert runs == [[12, 13], [8, 10, 11], [8, 9], [0, 4, 6, 7], [4, 5], [0, 2, 3], [0, 1]]
    # The seed's drawings, rows placed where they fit (the seed's final picture).
    assert str(schedule).splitlines()[:5] == [
        "0 1 2 3 4 5 6 7 8 9 a b c d e f",
        "X               X       X   X X",
        "+       X   X X +   X X + X",
        "+   X X + X     + X",
        "+ X",
    ]


def test_actions_print_readably():
    assert str(Action("advance", 3, 2)) == "advance 3 -> 5"
    assert str(ctz(2)[0]) == "snapshot 0 -> slot 0"
    assert [str(a) for a in ctz(2)] == ["snapshot 0 -> slot 0", "advance 0 -> 1", "snapshot 1 -> slot 1",
                                        "reverse 1", "restore 0 <- slot 0", "reverse 0"]
    assert "binomial: 10 steps, at most 3 snapshots" in str(binomial(10, 3))


def test_schedule_arguments_are_checked():
    with pytest.raises(ValueError, match="snapshots must be at least 1"):
        binomial(10, 0)
    with pytest.raises(ValueError, match="n must be >= 0"):
        ctz(-1)
    with pytest.raises(TypeError, match="must be an integer"):
        binomial(2.5, 3)
    assert len(ctz(0)) == 0 and len(binomial(0, 3)) == 0


# -- wg.iterate: every policy gives the gradients of storing everything -------------------------------

rng = np.random.default_rng(6)
X0 = rng.standard_normal(5)
W = 0.4 * rng.standard_normal((5, 5))
POLICIES = [("binomial", {}), ("binomial", {"snapshots": 1}), ("binomial", {"snapshots": 3}), ("ctz", {})]
IDS = ["binomial", "binomial-1", "binomial-3", "ctz"]


def pytree_loss(policy, x0, w, a, n=11, **kw):
    """A pytree state, a closed-over matrix and scalar, and an operation on the scalar alone."""

    def step(s):
        h = wnp.tanh(w @ s["x"]) * (a * 0.5)  # a * 0.5 involves no state: recorded outside
        return {"x": s["x"] + 0.1 * s["v"][0], "v": (s["v"][0] + 0.1 * h, s["v"][1])}

    out = wg.iterate(step, {"x": x0, "v": (np.zeros(5), 3)}, n, checkpoint=policy, **kw)
    assert out["v"][1] == 3
    return wnp.sum(out["x"] ** 2) + wnp.sum(wnp.sin(out["v"][0]))


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("policy,kw", POLICIES, ids=IDS)
def test_gradients_equal_all_including_closed_over_parameters(policy, kw):
    ref = wg.grad(pytree_loss, argnums=(1, 2, 3))("all", X0, W, 0.8)
    got = wg.grad(pytree_loss, argnums=(1, 2, 3))(policy, X0, W, 0.8, **kw)
    for g, r in zip(got, ref):
        close(g, r)
    assert np.max(np.abs(ref[1])) > 1e-3  # the parameters do matter


@pytest.mark.parametrize("policy,kw", POLICIES, ids=IDS)
def test_second_derivatives_equal_all(policy, kw):
    def hess(pol, **k):
        return wg.hessian(lambda x: pytree_loss(pol, x, W, 0.8, n=6, **k))(X0)

    close(hess(policy, **kw), hess("all"))

    def mixed(pol, **k):  # d/dW of |d loss / d a|^2: second order through the closed-over values
        return wg.grad(lambda w: wg.grad(pytree_loss, argnums=3)(pol, X0, w, 0.8, n=6, **k) ** 2)(W)

    close(mixed(policy, **kw), mixed("all"))


@pytest.mark.parametrize("policy,kw", POLICIES, ids=IDS)
def test_jvp_and_tensor_backward_equal_all(policy, kw):
    t = rng.standard_normal(5)
    ref = wg.jvp(lambda x: pytree_loss("all", x, W, 0.8), (X0,), (t,))
    got = wg.jvp(lambda x: pytree_loss(policy, x, W, 0.8, **kw), (X0,), (t,))
    close(got[0], ref[0])
    close(got[1], ref[1])
    grads = []
    for pol, k in [("all", {}), (policy, kw)]:
        x, w = wg.tensor(X0, requires_grad=True), wg.tensor(W, requires_grad=True)
        pytree_loss(pol, x, w, 0.8, **k).backward()
        grads.append((x.grad.value, w.grad.value))
    close(grads[1][0], grads[0][0])
    close(grads[1][1], grads[0][1])


def test_ctz_with_until_equals_all_with_the_same_number_of_steps():
    def step(x):
        return 0.9 * x + 0.01 * wnp.sin(x) + 0.1  # creeps towards about 1.08

    def loss(x0, policy, **kw):
        return wnp.sum(wg.iterate(step, x0, checkpoint=policy, **kw) ** 2)

    steps = []
    value = wg.iterate(step, X0, until=lambda x: steps.append(1) or x.min() > 1.0, checkpoint="ctz")
    n = len(steps) - 1  # until is asked before every step and once after the last
    assert n >= 10 and np.all(value > 1.0)
    close(wg.grad(loss)(X0, "ctz", until=lambda x: x.min() > 1.0), wg.grad(loss)(X0, "all", n=n))
    close(wg.grad(loss)(X0, "ctz", n=2, until=lambda x: False), wg.grad(loss)(X0, "all", n=2))
    close(wg.grad(loss)(X0, "ctz", until=lambda x: True), 2 * X0)  # no step at all


@pytest.mark.parametrize("policy", ["all", "binomial", "ctz"])
@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_short_loops_and_float_states(policy, n):
    def loss(x):
        return wg.iterate(lambda v: wnp.sin(v) * 1.1, x, n, checkpoint=policy)

    expected = 1.0
    x = 0.3
    for _ in range(n):  # d/dx of the n-fold composition, by hand
        expected *= 1.1 * math.cos(x)
        x = 1.1 * math.sin(x)
    assert wg.grad(loss)(0.3) == pytest.approx(expected, rel=1e-13)
    assert type(wg.grad(loss)(0.3)) is float


# -- measurement --------------------------------------------------------------------------------------

@pytest.mark.parametrize("policy,kw,schedule", [("binomial", {"snapshots": 3}, binomial(20, 3)),
                                                ("binomial", {}, binomial(20)), ("ctz", {}, ctz(20))])
def test_stats_count_what_the_schedule_says(policy, kw, schedule):
    calls = []

    def step(x):
        calls.append(1)
        return wnp.cos(x) * 0.9

    with Stats() as stats:
        wg.grad(lambda x: wnp.sum(wg.iterate(step, x, 20, checkpoint=policy, **kw)))(X0)
    assert stats.evaluations == len(calls) == schedule.evaluations
    assert stats.peak_snapshots == schedule.peak_snapshots
    assert stats.evaluations < 20 * 20  # recomputing from x0 each time would take 210 + 20


def test_stats_of_the_plain_loop_and_without_derivatives():
    with Stats() as stats:
        wg.grad(lambda x: wnp.sum(wg.iterate(wnp.sin, x, 7)))(X0)
    assert (stats.evaluations, stats.peak_snapshots) == (7, 0)
    with Stats() as stats:
        out = wg.iterate(np.sin, X0, 7, checkpoint="ctz")
    close(out, np.sin(np.sin(np.sin(np.sin(np.sin(np.sin(np.sin(X0))))))))
    assert stats.evaluations == 7


# -- wg.checkpoint ------------------------------------------------------------------------------------------

def block(w):
    def f(x, pair):
        h = wnp.tanh(w @ x) + pair[0] * pair[1]
        return {"h": h, "s": (wnp.sum(h ** 2), 7)}

    return f


def block_loss(ck, x, w, p):
    f = wg.checkpoint(block(w)) if ck else block(w)
    out = f(x, (p, 2.0))
    assert out["s"][1] == 7
    return wnp.sum(wnp.sin(out["h"])) + out["s"][0]


def test_checkpoint_gradients_with_pytrees_and_closed_over_weights():
    for argnums in [(1, 2, 3)]:
        for g, r in zip(wg.grad(block_loss, argnums)(True, X0, W, 0.3),
                        wg.grad(block_loss, argnums)(False, X0, W, 0.3)):
            close(g, r)


def test_checkpoint_second_derivatives_jvp_and_backward():
    close(wg.hessian(lambda x: block_loss(True, x, W, 0.3))(X0),
          wg.hessian(lambda x: block_loss(False, x, W, 0.3))(X0))
    mixed = [wg.grad(lambda w: wnp.sum(wg.grad(block_loss, 1)(ck, X0, w, 0.3) ** 2))(W)
             for ck in (True, False)]
    close(mixed[0], mixed[1])
    t = rng.standard_normal(5)
    close(wg.jvp(lambda x: block_loss(True, x, W, 0.3), (X0,), (t,))[1],
          wg.jvp(lambda x: block_loss(False, x, W, 0.3), (X0,), (t,))[1])
    grads = []
    for ck in (True, False):
        x, w = wg.tensor(X0, requires_grad=True), wg.tensor(W, requires_grad=True)
        block_loss(ck, x, w, 0.3).backward()
        grads.append((x.grad.value, w.grad.value))
    close(grads[0][0], grads[1][0])
    close(grads[0][1], grads[1][1])


def test_checkpoint_keeps_no_intermediates_and_recomputes_once_per_backward():
    calls = []

    def f(x):
        calls.append(1)
        for _ in range(20):
            x = wnp.sin(x) * 1.01
        return x

    tape = wg.Tape()
    x = tape.var(X0)
    y = wnp.sum(wg.checkpoint(f)(x))
    assert len(tape) == 2  # the checkpoint and the sum: none of f's 40 operations
    assert len(calls) == 1
    g = y.grad().wrt(x)
    assert len(calls) == 2
    plain = wg.Tape()
    xp = plain.var(X0)
    yp = wnp.sum(f(xp))
    assert len(plain) == 41
    close(g, yp.grad().wrt(xp))


def test_checkpoint_nested_and_inside_a_loop():
    inner = wg.checkpoint(lambda z: wnp.sin(z) * W[0])
    outer = wg.checkpoint(lambda z: inner(z * 2.0) + z)
    close(wg.grad(lambda z: wnp.sum(outer(z)))(X0),
          wg.grad(lambda z: wnp.sum(wnp.sin(z * 2.0) * W[0] + z))(X0))
    step = wg.checkpoint(lambda x: wnp.tanh(W @ x))
    close(wg.grad(lambda x: wnp.sum(wg.iterate(step, x, 4, checkpoint="ctz")))(X0),
          wg.grad(lambda x: wnp.sum(wg.iterate(lambda v: wnp.tanh(W @ v), x, 4)))(X0))


def test_checkpoint_without_derivatives_is_the_function():
    out = wg.checkpoint(block(W))(X0, (0.3, 2.0))
    ref = block(W)(X0, (0.3, 2.0))
    close(out["h"], ref["h"])
    assert out["s"][1] == 7 and type(out["h"]) is np.ndarray


# -- bad input -------------------------------------------------------------------------------------------

def test_until_needs_ctz():
    for policy in ("all", "binomial"):
        with pytest.raises(ValueError, match=r"wg.iterate\(sin\): until= needs checkpoint='ctz'"):
            wg.iterate(np.sin, X0, until=lambda x: True, checkpoint=policy)


def test_bad_counts_name_the_step():
    with pytest.raises(ValueError, match=r"wg.iterate\(sin\): snapshots must be at least 1"):
        wg.iterate(np.sin, X0, 5, checkpoint="binomial", snapshots=0)
    with pytest.raises(ValueError, match=r"wg.iterate\(sin\): the number of steps n must be >= 0"):
        wg.iterate(np.sin, X0, -1, checkpoint="ctz")
    with pytest.raises(TypeError, match=r"wg.iterate\(sin\): give the number of steps n, or until="):
        wg.iterate(np.sin, X0)
    with pytest.raises(ValueError, match="checkpoint must be one of 'all', 'binomial', 'ctz'"):
        wg.iterate(np.sin, X0, 3, checkpoint="sqrt")


@pytest.mark.parametrize("policy", ["all", "binomial", "ctz"])
def test_a_step_changing_the_state_is_named(policy):
    def grow(x):
        return wnp.concatenate([x, x[:1]])

    def to_pair(x):
        return (x, x)

    def to_float32(x):
        return x.astype(np.float32)

    for step, what in [(grow, r"step 0 changed state leaf 0 from shape \(5,\) float64 to \(6,\)"),
                       (to_pair, r"step 0 returned a state of structure \(\*, \*\), but the state is \*"),
                       (to_float32, r"step 0 changed state leaf 0 from shape \(5,\) float64 to \(5,\) "
                                    r"float32")]:
        with pytest.raises(ValueError, match=rf"wg.iterate\({step.__name__}\): " + what):
            wg.grad(lambda x: wnp.sum(wg.iterate(step, x, 3, checkpoint=policy)))(X0)


def test_a_nondeterministic_closure_is_refused():
    weights = [wg.tensor(1.0, requires_grad=True), wg.tensor(2.0, requires_grad=True)]

    def fickle(x):
        fickle.calls += 1
        return x * weights[0] if fickle.calls == 1 else x * weights[0] * weights[1]

    fickle.calls = 0
    y = wnp.sum(wg.checkpoint(fickle)(wg.tensor(X0, requires_grad=True)))
    with pytest.raises(RuntimeError, match=r"wg.checkpoint\(fickle\): recomputing the function used"):
        y.backward()


def test_iterate_records_one_node_whatever_n():
    for policy in ("binomial", "ctz"):
        tape = wg.Tape()
        x = tape.var(X0)
        y = wnp.sum(wg.iterate(lambda v: wnp.sin(v) * 1.1, x, 50, checkpoint=policy))
        assert len(tape) == 2  # the loop and the sum: none of the 100 operations of its steps
        plain = wg.Tape()
        xp = plain.var(X0)
        yp = wnp.sum(wg.iterate(lambda v: wnp.sin(v) * 1.1, xp, 50))
        assert len(plain) == 101
        close(y.grad().wrt(x), yp.grad().wrt(xp))


def test_vjp_function_called_twice_recomputes_from_the_inputs():
    schedule = binomial(12, 3)
    out, back = wg.vjp(lambda v: wg.iterate(wnp.sin, v, 12, checkpoint="binomial", snapshots=3), X0)
    ref = wg.vjp(lambda v: wg.iterate(wnp.sin, v, 12), X0)[1](np.ones(5))
    with Stats() as stats:
        first = back(np.ones(5))
        second = back(np.ones(5))
    close(first[0], ref[0])
    close(second[0], ref[0])
    # the first call continues the forward sweep's schedule; the second runs all of it again
    assert stats.evaluations == schedule.evaluations - schedule.forward_advances - 1 + schedule.evaluations


def test_checkpoint_returning_a_closed_over_value():
    def f(x, w):
        return wnp.sum(wg.checkpoint(lambda v: (v * 2.0, w))(x)[1] * x)

    close(wg.grad(f, argnums=(0, 1))(X0, W[0])[1], X0)
    close(wg.grad(f, argnums=(0, 1))(X0, W[0])[0], W[0])


@pytest.mark.parametrize("policy", ["binomial", "ctz"])
def test_a_gradient_inside_the_step(policy):
    def energy(x, w):
        return wnp.sum(wnp.sin(x) * w * x)

    def loss(x0, w, pol):
        step = lambda x: x - 0.1 * wg.grad(energy)(x, w)  # gradient descent, differentiated
        return wnp.sum(wg.iterate(step, x0, 6, checkpoint=pol) ** 2)

    for g, r in zip(wg.grad(loss, (0, 1))(X0, 0.8, policy), wg.grad(loss, (0, 1))(X0, 0.8, "all")):
        close(g, r)


@pytest.mark.parametrize("policy", ["binomial", "ctz"])
def test_against_finite_differences_to_second_order(policy):
    from wengert.testing import check_grads

    def f(x, w):
        step = wg.checkpoint(lambda v: wnp.tanh(w @ v) + 0.5 * v)
        return wg.iterate(step, x, 5, checkpoint=policy)

    check_grads(f, X0, W, modes=("fwd", "rev"), order=2)
