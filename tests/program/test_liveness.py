"""What compiled programs keep alive: dead buffers deleted, cheap values computed again instead of
kept, adjoints of indexing added in place; and the replayed rules and shared examples that make
compiling a long program cost the same per statement as a short one. Values never change."""

import re
import tracemalloc

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.program import Program, Variable
from wengert.program.liveness import REMAT_MIN_SIZE, deletions, rematerialize
from wengert.program.pipeline import lower, simplify
from wengert.testing import check_grads

SIZE = REMAT_MIN_SIZE + 904  # 5,000: large enough to be computed again rather than kept


def chain(x, a, steps=6):
    for _ in range(steps):
        x = a * wnp.sin(x) + 0.1 * x
    return wnp.sum(x)


def chain_by_hand(x0, a, steps=6):
    """Value and gradient of :func:`chain`, keeping every x and computing sin(x) again backwards."""
    xs = [x0]
    for _ in range(steps):
        xs.append(a * np.sin(xs[-1]) + 0.1 * xs[-1])
    g, ga = np.ones_like(x0), 0.0
    for x in reversed(xs[:-1]):
        ga += float(np.dot(g, np.sin(x)))
        g = g * (a * np.cos(x) + 0.1)
    return float(np.sum(xs[-1])), g, ga


def body(source):
    """The generated function's lines (after its ``def``)."""
    return source.split("\ndef ")[-1].splitlines()[1:]


def test_compiled_chain_deletes_dead_buffers_and_matches_the_tape_and_the_hand_written_gradient():
    x0 = np.random.default_rng(0).uniform(-2, 2, SIZE)
    vg = wg.compile(chain).value_and_grad((0, 1))
    value, (gx, ga) = vg(x0, 0.9)
    want_value, want_gx, want_ga = chain_by_hand(x0, 0.9)
    assert value == pytest.approx(want_value, rel=1e-12)
    np.testing.assert_allclose(gx, want_gx, rtol=1e-12)
    assert ga == pytest.approx(want_ga, rel=1e-12)
    tape_value, (tape_gx, tape_ga) = wg.value_and_grad(chain, (0, 1))(x0, 0.9)
    assert value == pytest.approx(tape_value, rel=1e-12)
    np.testing.assert_allclose(gx, tape_gx, rtol=1e-12)
    lines = body(vg.source(x0, 0.9))
    deleted = [n for line in lines if line.strip().startswith("del ") for n in line.strip()[4:].split(", ")]
    assert deleted, "no buffer is deleted"
    assigned = {m.group(1) for line in lines for m in [re.match(r"\s+(\w+) = ", line)] if m}
    # every array temporary but the results and the inputs is deleted, once, after its last use
    assert sorted(deleted) == sorted(set(deleted))
    for k, line in enumerate(lines):
        if line.strip().startswith("del "):
            for name in line.strip()[4:].split(", "):
                later = "\n".join(lines[k + 1:])
                assert not re.search(rf"\b{name}\b", later), f"{name} is read after it is deleted"
    assert set(deleted) <= assigned


def test_values_are_computed_again_rather_than_kept_for_the_adjoint():
    x0 = np.random.default_rng(1).uniform(-2, 2, SIZE)
    program = simplify(Program.from_trace(chain, x0, 0.9).value_and_grad((0, 1)))
    lowered = lower(program)
    sins = [s for s in lowered.statements if s.prim.__name__ == "sin"]
    assert len(sins) == 2 * 6 - 1  # the last step's sin is read right away: kept, not computed again
    again = rematerialize(lowered)
    assert again is lowered  # nothing left to do: a fixed point
    small = simplify(Program.from_trace(chain, x0[:10], 0.9).value_and_grad((0, 1)))
    assert sum(s.prim.__name__ == "sin" for s in lower(small).statements) == 6  # small arrays are kept


def test_peak_live_arrays_of_the_compiled_chain_is_the_states_the_adjoint_needs():
    steps = 40
    x0 = np.random.default_rng(2).uniform(-2, 2, SIZE)
    vg = wg.compile(lambda x, a: chain(x, a, steps)).value_and_grad((0, 1))
    vg(x0, 0.9)
    tracemalloc.start()
    try:
        vg(x0, 0.9)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The bound, from the program: the adjoint reads each forward state x_k once in cos(x_k), so
    # those states must all be alive when it starts; besides them only a few arrays are live at
    # once around one step (the cotangent, a sin or cos, a product, the result's gradient).
    # Keeping each step's sin(x) too, or every temporary, would be two to nine times as many.
    program = vg.program(x0, 0.9)
    states = sum(1 for s in program.statements if s.prim.__name__ == "cos")
    assert states == steps
    assert peak <= (states + 6) * x0.nbytes, peak / x0.nbytes


def test_deletions_are_by_buffer_name_after_the_last_read():
    def var(name, kind="array"):
        return Variable(name, (3,), np.float64, kind)

    a, b, a2, f = var("a"), var("b"), var("a"), var("f", "float")
    found = deletions([[a], [a, b], [a2], [f]], [[b], [], [], []], keep={"b"})
    # a is written in place as a2 (one buffer, one name); b is kept; floats are not deleted
    assert found == {2: ["a"]}


def test_compiled_indexing_loop_adds_each_element_in_place():
    def loop_sum(v):
        return sum(v[i] * v[i] for i in range(len(v)))

    v = np.random.default_rng(3).standard_normal(50)
    vg = wg.compile(loop_sum).value_and_grad()
    value, g = vg(v)
    assert value == pytest.approx(float(v @ v), rel=1e-12)
    np.testing.assert_allclose(g, 2 * v, rtol=1e-13)
    source = "\n".join(body(vg.source(v)))
    assert source.count("untake(") <= 1  # one buffer made, then v_bar[i] += ... for each read
    assert source.count("] += ") >= 2 * (len(v) - 1)


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_replayed_rules_follow_shapes_constants_and_sameness(shape):
    rng = np.random.default_rng(4)
    x = rng.uniform(0.5, 1.5, shape) if shape else float(rng.uniform(0.5, 1.5))
    y = rng.uniform(0.5, 1.5, (3,))

    def f(x, y):
        total = 0.0
        for k in range(4):  # the same rules many times, with other constants, shapes and operands
            total = total + wnp.sum(x ** (k + 1) * y + x * x + x * y - y * y / (k + 2.0))
        return total

    got = wg.compile(f).grad((0, 1))(x, y)
    want = wg.grad(f, (0, 1))(x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    check_grads(lambda x, y: wg.compile(f)(x, y), x, y, modes=("rev",), order=1)


def test_shared_examples_leave_the_arguments_alone():
    x = np.random.default_rng(5).standard_normal(1000)
    before = x.copy()
    f = wg.compile(lambda v: wnp.sum(wnp.exp(wnp.sin(v)) + wnp.sin(v) * 2.0))
    assert f(x) == pytest.approx(float(np.sum(np.exp(np.sin(before)) + np.sin(before) * 2.0)), rel=1e-12)
    assert x.flags.writeable and np.array_equal(x, before)
    g = wg.compile(lambda v: wnp.sum(wnp.exp(wnp.sin(v)) + wnp.sin(v) * 2.0)).grad()(x)
    np.testing.assert_allclose(g, np.cos(before) * (np.exp(np.sin(before)) + 2.0), rtol=1e-12)
