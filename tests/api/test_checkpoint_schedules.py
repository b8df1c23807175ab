"""Checkpoint schedules as generators: action for action the schedules the library built as whole
lists (the slow reference below), Griewank's minimum and the slot bounds for many (n, s), memory
that grows with the snapshots and not with n (counted: the generators' own bookkeeping, traced
bytes, live states), and a small footprint per ``wg.checkpoint`` call. No timings.
"""

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.api.checkpointing import recompute, schedules
from wengert.checkpointing import Action, Stats, binomial, ctz
from wengert.testing import check_grads

# -- the reference: schedules built as whole lists, the split found by search ----------------------


def griewank_minimum(n, s):
    """t(n, s) = r n - C(s+r, s+1), r with C(s+r-1, s) < n <= C(s+r, s) (0 for n <= 1)."""
    if n <= 1:
        return 0
    r = 0
    while not (math.comb(s + r - 1, s) < n <= math.comb(s + r, s)):
        r += 1
    return r * n - math.comb(s + r, s + 1)


def split_by_search(n, s):
    """The smallest first snapshot position m with m + t(n-m, s-1) + t(m, s) = t(n, s)."""
    best = griewank_minimum(n, s)
    for m in range(1, n):
        if m + griewank_minimum(n - m, s - 1) + griewank_minimum(m, s) == best:
            return m
    raise AssertionError((n, s))


def reference_binomial(n, s):
    """Revolve as a list, by recursion over sub-ranges (what the library built before generators):
    reverse [start, end) from the snapshot of x_start in slot ``base`` with ``slots`` slots."""
    out = []
    current = 0

    def reverse(start, end, base, slots):
        nonlocal current
        if current != start:
            out.append(("restore", start, 0, base))
            current = start
        if end - start == 1:
            out.append(("reverse", start, 1, -1))
        elif slots == 1:
            for p in range(end - 1, start - 1, -1):
                if current != start:
                    out.append(("restore", start, 0, base))
                if p > start:
                    out.append(("advance", start, p - start, -1))
                out.append(("reverse", p, 1, -1))
                current = p
        else:
            m = split_by_search(end - start, slots)
            out.append(("advance", start, m, -1))
            out.append(("snapshot", start + m, 0, base + 1))
            current = start + m
            reverse(start + m, end, base + 1, slots - 1)
            reverse(start, start + m, base, slots)

    if n:
        out.append(("snapshot", 0, 0, 0))
        reverse(0, n, 0, s)
    return out


def reference_ctz(n):
    """CTZ as a list: keep x_i in slot popcount(i) on the way forward; to reverse step p, restore the
    latest kept prefix of p and advance through p's remaining bits, keeping each."""
    if n == 0:
        return []
    out = [("snapshot", 0, 0, 0)]
    for i in range(1, n):
        out += [("advance", i - 1, 1, -1), ("snapshot", i, 0, bin(i).count("1"))]
    held = _prefixes(n - 1)
    out.append(("reverse", n - 1, 1, -1))
    for p in range(n - 2, -1, -1):
        held = [q for q in held if q <= p]
        q = held[-1]
        out.append(("restore", q, 0, len(held) - 1))
        for nxt in [r for r in _prefixes(p) if r > q]:
            out += [("advance", q, nxt - q, -1), ("snapshot", nxt, 0, len(held))]
            held.append(nxt)
            q = nxt
        out.append(("reverse", p, 1, -1))
    return out


def _prefixes(p):
    """0, ..., p with its lowest set bits cleared one at a time, then p."""
    out = [p]
    while p:
        p &= p - 1
        out.append(p)
    return out[::-1]


def replay(actions, n):
    """An independent check of a schedule: every step reversed once, last first; advances from the
    current state; restores from a slot holding that state. Returns (advances, peak, count)."""
    slots, current, expected, advances, peak, count = [], 0, n - 1, 0, 0, 0
    for kind, p, k, slot in actions:
        count += 1
        if kind == "advance":
            assert p == current and k >= 1
            current += k
            advances += k
        elif kind == "snapshot":
            assert p == current and slot <= len(slots)
            slots[slot:] = [p]
            peak = max(peak, len(slots))
        elif kind == "restore":
            assert slots[slot] == p
            current = p
        else:
            assert kind == "reverse" and p == current == expected
            expected -= 1
            slots = [q for q in slots if q < p]
    assert expected == -1
    return advances, peak, count


# -- the generators equal the lists ---------------------------------------------------------------------


@pytest.mark.parametrize("s", range(1, 9))
def test_binomial_generator_equals_the_list_schedule(s):
    for n in range(0, 120):
        assert [tuple(a) for a in binomial(n, s)] == reference_binomial(n, s), (n, s)


def test_ctz_generator_equals_the_list_schedule():
    for n in range(0, 300):
        assert [tuple(a) for a in ctz(n)] == reference_ctz(n), n


def test_the_closed_form_split_is_the_searched_one():
    for s in range(2, 11):
        for n in [*range(2, 160), *range(160, 2000, 97)]:
            r = schedules._repetitions(n, s)
            assert schedules._split(n, s, r) == split_by_search(n, s), (n, s)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 3000), st.integers(1, 40))
def test_binomial_properties_for_any_n_and_s(n, s):
    schedule = binomial(n, s)
    advances, peak, count = replay(schedule, n)
    assert advances == griewank_minimum(n, s) == schedule.advances
    assert peak <= s and peak == schedule.peak_snapshots
    assert count == len(schedule)
    assert list(schedule.forward_sweep()) + list(schedule.reverse_sweep()) == list(schedule)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(1, 5000))
def test_ctz_properties_for_any_n(n):
    schedule = ctz(n)
    advances, peak, count = replay(schedule, n)
    assert peak <= math.floor(math.log2(n)) + 2 and peak == schedule.peak_snapshots
    assert advances == schedule.advances and count == len(schedule)
    assert list(schedule.forward_sweep()) + list(schedule.reverse_sweep()) == list(schedule)


def test_a_schedule_is_followed_again_from_the_start_and_indexed():
    schedule = binomial(30, 4)
    assert list(schedule) == list(schedule)  # each iteration is a fresh generator
    actions = list(schedule)
    assert schedule[0] == actions[0] and schedule[-1] == actions[-1] and schedule[7] == actions[7]
    assert schedule[3:9] == actions[3:9] and schedule[-4:] == actions[-4:]
    assert schedule == actions and schedule != actions[:-1]
    with pytest.raises(IndexError):
        schedule[len(actions)]
    assert schedule.first_reverse() == next(i for i, a in enumerate(actions) if a.kind == "reverse")
    assert all(type(a) is Action for a in schedule)


def test_drawing_a_huge_schedule_is_refused_clearly():
    with pytest.raises(ValueError, match="too long to draw"):
        str(binomial(10**6, 20))
    assert "binomial: 40 steps" in str(binomial(40, 3))


# -- memory, counted -----------------------------------------------------------------------------------


def _max_local_length(generator, name):
    """Follow a generator to the end; the longest its local list ``name`` ever was."""
    longest = seen = 0
    for _ in generator:
        seen += name in generator.gi_frame.f_locals
        longest = max(longest, len(generator.gi_frame.f_locals.get(name, ())))
    assert seen > 1000  # the list was watched
    return longest


@pytest.mark.parametrize("n,s", [(10_000, 5), (20_000, 12), (5_000, 1)])
def test_binomial_keeps_one_pending_range_per_slot(n, s):
    assert _max_local_length(schedules.binomial_tuples(n, s), "tasks") <= s


def test_ctz_reverse_sweep_keeps_log_n_positions():
    n = 50_000
    assert _max_local_length(schedules.ctz_reverse_sweep(n), "held") <= math.floor(math.log2(n)) + 2


def test_following_a_long_schedule_traces_little_memory():
    for schedule in (binomial(30_000, 10), ctz(20_000)):
        tracemalloc.start()
        try:
            count = sum(1 for _ in schedule)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert count > 100_000 and peak < 32_000, (schedule, count, peak)  # a list: > 10 MB


@pytest.mark.parametrize("policy,kw", [("binomial", {"snapshots": 8}), ("binomial", {"snapshots": 3}),
                                       ("ctz", {})])
def test_live_states_are_the_snapshots_and_one_step(policy, kw):
    """Peak traced memory, in states: the snapshots, the step being reversed and its recording, the
    cotangents, the output. The forward sweep's recording and x_(n-1) must not live through the
    whole reverse sweep (they added four states)."""
    size = 20_000
    x0 = np.random.default_rng(0).uniform(-2, 2, size)

    def loss(x, a):
        return wnp.sum(wg.iterate(lambda v: a * wnp.sin(v) + 0.1 * v, x, 64, checkpoint=policy, **kw))

    g = wg.grad(loss, argnums=(0, 1))
    tracemalloc.start()
    try:
        with Stats() as stats:
            g(x0, 0.9)
        states = tracemalloc.get_traced_memory()[1] / x0.nbytes
    finally:
        tracemalloc.stop()
    assert states <= stats.peak_snapshots + 11, (states, stats.peak_snapshots)


def test_a_long_loop_stores_its_slot_sequence_once():
    w = np.array([0.3, -0.2])
    chains = []
    make_node = recompute.Chain.make_node

    def spy(self, *args):
        chains.append(self)
        return make_node(self, *args)

    recompute.Chain.make_node = spy
    try:
        g = wg.grad(lambda x: wnp.sum(wg.iterate(lambda v: wnp.sin(v * w), x, 500, checkpoint="ctz")))(
            np.ones(2))
    finally:
        recompute.Chain.make_node = make_node
    assert chains[0].seq_count == 500 and chains[0].seq_other is None  # one shared sequence
    ref = wg.grad(lambda x: wnp.sum(wg.iterate(lambda v: wnp.sin(v * w), x, 500)))(np.ones(2))
    np.testing.assert_allclose(g, ref, rtol=1e-12)


def test_checkpoint_calls_share_their_primitive_layout_and_structures():
    """What each wg.checkpoint call keeps until the backward pass: one slim chain. The primitive,
    flags, structures and slot sequences are shared between calls; discovery's lists are dropped."""
    chains = []
    make_node = recompute.Chain.make_node

    def spy(self, prim, *args):
        chains.append((self, prim))
        return make_node(self, prim, *args)

    step = wg.checkpoint(lambda x, w: 0.9 * wnp.sin(x * w) + 0.1 * x)

    def loss(x, w):
        for _ in range(3):
            x = step(x, 2.0) * w
        return x

    recompute.Chain.make_node = spy
    try:
        value = wg.grad(loss, argnums=(0, 1))(0.5, 1.5)
    finally:
        recompute.Chain.make_node = make_node
    (a, pa), (b, pb) = chains[0], chains[1]
    assert pa is pb and a.layout is b.layout and a.in_def is b.in_def and a.in_float is b.in_float
    assert a.seq_first is b.seq_first and a.schedule is b.schedule
    assert a.slot_boxes is None and a.slot_ids is None and not hasattr(a, "__dict__")
    check_grads(loss, 0.5, 1.5, modes=("rev",), order=1)
    assert np.isfinite(value).all()


# -- gradients unchanged ---------------------------------------------------------------------------------


@pytest.mark.parametrize("policy,kw,n", [("binomial", {"snapshots": 2}, 40),
                                         ("binomial", {"snapshots": 5}, 200), ("ctz", {}, 100)])
def test_long_loops_against_finite_differences(policy, kw, n):
    w = np.array([[0.5, -0.3], [0.2, 0.4]])

    def f(x, a):
        return wg.iterate(lambda v: wnp.tanh(w @ v) * a + 0.3 * v, x, n, checkpoint=policy, **kw)

    check_grads(f, np.array([0.4, -0.7]), 0.9, modes=("rev",), order=1)
    all_ = wg.grad(lambda x, a: wnp.sum(wg.iterate(lambda v: wnp.tanh(w @ v) * a + 0.3 * v, x, n)),
                   argnums=(0, 1))(np.array([0.4, -0.7]), 0.9)
    got = wg.grad(lambda x, a: wnp.sum(f(x, a)), argnums=(0, 1))(np.array([0.4, -0.7]), 0.9)
    for g, r in zip(got, all_):
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-14)


def test_shared_structures_keep_their_key_types():
    """Structures shared between calls are told apart by type, not only by equality: 1 == True."""
    step = wg.checkpoint(lambda d: {k: wnp.sin(v) for k, v in d.items()})

    def f(x, key):
        out = step({key: x})
        assert [type(k) for k in out] == [type(key)], (list(out), key)
        return wnp.sum(out[key])

    for key in (1, True, 1.0):
        np.testing.assert_allclose(wg.grad(f)(np.ones(2), key), np.cos(np.ones(2)), rtol=1e-15)
