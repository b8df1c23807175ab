"""Checkpointing schedules as data: how to reverse a loop of n steps while holding few of its states.

A schedule is a sequence of :class:`Action` s, generated as it is followed, over the states
x_0 ... x_n of ``x = step(x)``, step p taking x_p to x_(p+1):

- ``advance p k``: from the current state x_p, evaluate k steps without recording them;
- ``snapshot p -> slot j``: keep the current state x_p in slot j. Slots form a stack: writing slot j
  drops every slot above it (the CTZ strategy's eviction; revolve never needs the slots above);
- ``restore p <- slot j``: make the snapshot of x_p the current state;
- ``reverse p``: evaluate step p from the current state x_p while recording it, and carry the
  cotangent of x_(p+1) back to x_p. Snapshots of x_p and later states are dropped: never needed again.

The first ``reverse`` is that of the last step, right after the forward sweep: its recorded evaluation
is also the one that gives x_n. A schedule thus evaluates ``advances + n`` steps in all, forward sweep
included. ``wg.iterate`` executes these schedules; :class:`Stats` counts what it did.
``print(ctz(16))`` draws a schedule as a diagram.
"""

import itertools
import math
import operator
import threading
from typing import NamedTuple

__all__ = ["Action", "Schedule", "binomial", "ctz", "ctz_reverse_sweep", "Stats"]


class Action(NamedTuple):
    """One action of a schedule (see the module docstring): ``kind`` is "advance", "snapshot",
    "restore" or "reverse"; ``position`` the state index it starts from."""

    kind: str
    position: int
    steps: int = 0  # advance: how many steps; reverse: 1
    slot: int = -1  # snapshot / restore: which slot

    def __str__(self):
        if self.kind == "advance":
            return f"advance {self.position} -> {self.position + self.steps}"
        if self.kind == "snapshot":
            return f"snapshot {self.position} -> slot {self.slot}"
        if self.kind == "restore":
            return f"restore {self.position} <- slot {self.slot}"
        return f"reverse {self.position}"


_new = tuple.__new__  # schedules have up to n log n actions: skip NamedTuple's keyword handling


def _advance(p, k):
    return _new(Action, ("advance", p, k, -1))


def _snapshot(p, slot):
    return _new(Action, ("snapshot", p, 0, slot))


def _restore(p, slot):
    return _new(Action, ("restore", p, 0, slot))


def _reverse(p):
    return _new(Action, ("reverse", p, 1, -1))


class Schedule:
    """The :class:`Action` s reversing ``n`` steps, produced on demand: iterating a schedule runs a
    generator, so holding or following one costs memory for its snapshots' bookkeeping only (O(s)
    for ``binomial``, O(log n) for ``ctz``), never for its actions. ``str()`` draws it.

    ``actions`` is a function returning a fresh iterator of the actions (or a sequence of them);
    ``reverse`` optionally one returning the actions from the first ``reverse`` on (else they are
    found by skipping the forward sweep). The counts (``advances``, ``peak_snapshots``, ``len()``,
    ...) replay the schedule once, checking it, the first time one is asked for: O(actions) time,
    O(s) memory. ``list(schedule)`` gives the actions as a list; indexing and slicing work too, by
    iterating (O(index))."""

    __slots__ = ("n", "policy", "snapshots", "_actions", "_reverse", "_counts", "_raw")

    def __init__(self, actions, n, policy, snapshots=None, reverse=None, raw=None):
        if not callable(actions):
            fixed = tuple(actions)
            actions = fixed.__iter__
        self._actions = actions
        self._reverse = reverse
        self.n = n
        self.policy = policy
        self.snapshots = snapshots
        self._counts = None
        self._raw = raw  # optionally: a function returning the actions as plain tuples

    def __iter__(self):
        return iter(self._actions())

    def forward_sweep(self):
        """The actions before the first ``reverse``: the forward sweep."""
        for a in self._actions():
            if a[0] == "reverse":
                return
            yield a

    def reverse_tuples(self):
        """The actions from the first ``reverse`` on, as ``(kind, position, steps, slot)`` tuples
        (Actions are such tuples; a schedule may make plain ones, faster)."""
        if self._raw is None:
            yield from self.reverse_sweep()
            return
        actions = iter(self._raw())
        for a in actions:
            if a[0] == "reverse":
                yield a
                break
        yield from actions

    def reverse_sweep(self):
        """The actions from the first ``reverse`` on."""
        if self._reverse is not None:
            yield from self._reverse()
            return
        actions = iter(self._actions())
        for a in actions:
            if a[0] == "reverse":
                yield a
                break
        yield from actions

    def _count(self, key):
        if self._counts is None:
            self._counts = _simulate(self._actions(), self.n)
        return self._counts[key]

    @property
    def advances(self):
        """Steps evaluated without recording (forward sweep and recomputations)."""
        return self._count("advances")

    @property
    def forward_advances(self):
        """Advances of the forward sweep (before the first reverse)."""
        return self._count("forward")

    @property
    def recomputations(self):
        """Advances after the forward sweep: steps evaluated again from a snapshot."""
        return self.advances - self.forward_advances

    @property
    def evaluations(self):
        """Every step evaluation: advances plus one recorded evaluation per reversed step."""
        return self.advances + self.n

    @property
    def peak_snapshots(self):
        """The largest number of snapshots held at once."""
        return self._count("peak")

    def first_reverse(self):
        """Index of the first ``reverse`` action: where the forward sweep ends."""
        return self._count("first")

    def __len__(self):
        return self._count("length")

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self)) if _negative(index) else (
                index.start or 0, index.stop, index.step or 1)
            if step < 1:
                return list(self)[index]
            return list(itertools.islice(self._actions(), start, stop, step))
        index = operator.index(index)
        if index < 0:
            index += len(self)
        if index >= 0:
            for a in itertools.islice(self._actions(), index, None):
                return a
        raise IndexError("schedule index out of range")

    def __eq__(self, other):
        if isinstance(other, (Schedule, list, tuple)):
            sentinel = object()
            return all(a == b for a, b in itertools.zip_longest(self, other, fillvalue=sentinel))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable: equality compares the actions

    def __repr__(self):
        return f"<{self.policy} schedule: {self.n} steps>"

    def __str__(self):
        return render(self)


def _negative(index):
    return any(v is not None and v < 0 for v in (index.start, index.stop, index.step))


def _simulate(actions, n):
    """Check that ``actions`` reverse steps n-1, ..., 0 correctly; count advances, snapshots and
    actions. Holds the positions of the snapshots only: O(peak snapshots) memory."""
    slots = []  # positions held, bottom to top
    current = 0
    advances = forward = peak = length = 0
    first = None
    expected = n - 1
    for a in actions:
        kind, position, steps, slot = a
        if kind == "advance":
            if position != current or steps < 1:
                raise ValueError(f"schedule: '{a}' but the current state is x_{current}")
            current += steps
            advances += steps
            if first is None:
                forward += steps
        elif kind == "snapshot":
            if position != current or not 0 <= slot <= len(slots):
                raise ValueError(f"schedule: '{a}' with the current state x_{current} and {len(slots)} slots")
            del slots[slot:]
            slots.append(position)
            if slot >= peak:
                peak = slot + 1
        elif kind == "restore":
            if not (0 <= slot < len(slots) and slots[slot] == position):
                raise ValueError(f"schedule: '{a}' but slot {slot} does not hold x_{position}")
            current = position
        elif kind == "reverse":
            if position != current or position != expected:
                raise ValueError(f"schedule: '{a}' with the current state x_{current}, "
                                 f"when step {expected} is the next to reverse")
            if first is None:
                first = length
            expected -= 1
            while slots and slots[-1] >= position:
                slots.pop()
        else:
            raise ValueError(f"schedule: unknown action {a!r}")
        length += 1
    if expected != -1:
        raise ValueError(f"schedule: steps {expected} ... 0 are never reversed")
    return {"advances": advances, "forward": forward, "peak": peak, "length": length,
            "first": length if first is None else first}


# -- Griewank's binomial schedule (revolve) ------------------------------------------------------

def _repetitions(n, s, below=None):
    """The r with C(s+r-1, s) < n <= C(s+r, s): how often the worst step is evaluated. ``below``: a
    known upper bound (a sub-range's r is at most its parent's), searched downwards from."""
    if below is not None:
        r = below
        while r > 0 and math.comb(s + r - 1, s) >= n:
            r -= 1
        return r
    r = 0
    while math.comb(s + r, s) < n:
        r += 1
    return r


def _min_advances(n, s):
    """Griewank's minimal number of advances t(n, s) = r n - C(s+r, s+1) (0 for n <= 1)."""
    if n <= 1:
        return 0
    if s == 1:
        return n * (n - 1) // 2
    r = _repetitions(n, s)
    return r * n - math.comb(s + r, s + 1)


def _split(n, s, r):
    """Where to put the next snapshot when reversing n steps with s slots (s >= 2, n >= 2, r their
    repetition number): the smallest m for which m + t(n-m, s-1) + t(m, s) is Griewank's minimum
    t(n, s). The right part, reversed with s-1 slots, may take up to C(s+r-1, s-1) steps; the left
    part must be long enough that the right part's recomputations are not wasted: C(s+r-2, s)."""
    return max(1, n - math.comb(s + r - 1, s - 1), math.comb(s + r - 2, s) if r >= 2 else 1)


def binomial(n, snapshots=None):
    """Griewank's optimal offline schedule ("revolve") for ``n`` steps and ``snapshots`` slots
    (x_0's included; default ceil(log2 n)): the fewest advances, t = r n - C(s+r, s+1). Its actions
    are generated as they are followed, holding at most one pending sub-range per slot."""
    n = _check_n(n, "binomial")
    s = default_snapshots(n) if snapshots is None else _check_snapshots(snapshots, "binomial")
    return Schedule(lambda: _binomial_actions(n, s), n, "binomial", s, raw=lambda: binomial_tuples(n, s))


def _binomial_actions(n, s):
    return itertools.starmap(_action, binomial_tuples(n, s))


_SPLITS_KEPT = 4096
"""The most splits a binomial schedule's generator remembers (bounded memory, whatever n)."""


def binomial_tuples(n, s):
    """The actions of ``binomial(n, s)``, one at a time, as ``(kind, position, steps, slot)`` tuples
    (what a loop following it unpacks: no :class:`Action` made). ``tasks``: the sub-ranges still to
    reverse, [start, end) with x_start in slot ``base``: one per slot at most (each split leaves its
    left part with the same slots and gives its right part one slot fewer)."""
    if not n:
        return
    yield ("snapshot", 0, 0, 0)
    current = 0
    tasks = [(0, n, 0, s, _repetitions(n, s))]
    pop, push = tasks.pop, tasks.append
    splits = {}  # (length, slots, r) -> (split, left part's r, right part's r)
    while tasks:
        start, end, base, slots, r = pop()
        if current != start:
            yield ("restore", start, 0, base)
            current = start
        length = end - start
        if length == 1:
            yield ("reverse", start, 1, -1)
        elif slots == 1:
            for p in range(end - 1, start - 1, -1):
                if current != start:
                    yield ("restore", start, 0, base)
                if p > start:
                    yield ("advance", start, p - start, -1)
                yield ("reverse", p, 1, -1)
                current = p
        elif length == 2:  # the split of two steps is always one: x_start+1 kept, reversed, then x_start
            yield ("advance", start, 1, -1)
            yield ("snapshot", start + 1, 0, base + 1)
            yield ("reverse", start + 1, 1, -1)
            yield ("restore", start, 0, base)
            yield ("reverse", start, 1, -1)
            current = start
        else:
            key = (length, slots, r)
            split = splits.get(key)
            if split is None:  # sub-ranges repeat: a few hundred distinct ones reverse 10^6 steps
                m = _split(length, slots, r)
                split = m, _repetitions(m, slots, r), _repetitions(length - m, slots - 1, r)
                if len(splits) < _SPLITS_KEPT:
                    splits[key] = split
            m, r_left, r_right = split
            yield ("advance", start, m, -1)
            yield ("snapshot", start + m, 0, base + 1)
            current = start + m
            push((start, start + m, base, slots, r_left))
            push((start + m, end, base + 1, slots - 1, r_right))


def default_snapshots(n):
    """The default number of snapshots of the binomial schedule: ceil(log2 n), at least 1."""
    return max(1, math.ceil(math.log2(n))) if n > 1 else 1


# -- the CTZ strategy (online) -------------------------------------------------------------------

def ctz_forward(i):
    """The snapshot CTZ takes on reaching x_i (i >= 1): slot popcount(i), dropping those above."""
    return _snapshot(i, bin(i).count("1"))


def _ctz_forward_sweep(n):
    """The forward sweep of ``ctz(n)`` (n >= 1): x_0 kept, then each step advanced and its state kept
    in the slot CTZ gives it. The first 2n - 1 actions of any longer one (it is online)."""
    yield _snapshot(0, 0)
    for i in range(n - 1):
        yield _advance(i, 1)
        yield ctz_forward(i + 1)


def _ctz_reverse(n):
    return itertools.starmap(_action, ctz_reverse_sweep(n))


def _action(kind, position, steps, slot):
    return _new(Action, (kind, position, steps, slot))


def _ctz_actions(n):
    yield from _ctz_forward_sweep(n)
    yield from _ctz_reverse(n)


def ctz(n):
    """The CTZ schedule for ``n`` steps: online (the forward sweep does not need n),
    at most floor(log2 n) + 2 snapshots, each step recomputed O(log n) times. Generated as it is
    followed, holding O(log n) positions."""
    n = _check_n(n, "ctz")
    if n == 0:
        return Schedule((), 0, "ctz")
    return Schedule(lambda: _ctz_actions(n), n, "ctz", reverse=lambda: _ctz_reverse(n))


def ctz_reverse_sweep(n):
    """The actions of ``ctz(n)`` after its forward sweep, as ``(kind, position, steps, slot)`` tuples,
    computed as they are needed. Self-contained (no imports): the source transformation copies this
    function into derivative programs whose loops' trip counts are known only at run time."""
    held = [0]  # the positions held after the forward sweep: n-1's prefixes, slot by slot
    p = n - 1
    while p > 0:
        held.insert(1, p)
        p &= p - 1
    if n > 0:
        yield ("reverse", n - 1, 1, -1)
    for p in range(n - 2, -1, -1):
        while held[-1] > p:
            held.pop()
        q = held[-1]  # a prefix of p: p = q + the bits of p below q's lowest set bit
        yield ("restore", q, 0, len(held) - 1)
        rest = p - q
        while rest:  # advance through p's prefixes above q, keeping each
            bit = 1 << (rest.bit_length() - 1)
            yield ("advance", q, bit, -1)
            q += bit
            yield ("snapshot", q, 0, len(held))
            rest -= bit
            held.append(q)
        yield ("reverse", p, 1, -1)


# -- drawing ---------------------------------------------------------------------------------------

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
RENDER_LIMIT = 2000
"""The longest schedule :func:`render` draws (steps): a diagram has a column per step."""


def render(schedule):
    """The schedule drawn as a diagram: X marks a state held, + a restored snapshot a
    recomputation starts from; row 1 is the forward sweep, each later row a recomputation.
    Follows the schedule's generator once; refuses schedules longer than :data:`RENDER_LIMIT`."""
    n = schedule.n
    if n == 0:
        return f"{schedule.policy} schedule for 0 steps: nothing to do"
    if n > RENDER_LIMIT:
        raise ValueError(f"render: a {schedule.policy} schedule of {n} steps is too long to draw (one column "
                         f"per step, at most {RENDER_LIMIT}); its counts are its attributes: advances, "
                         f"recomputations, evaluations, peak_snapshots")
    width = 2 if n <= len(_DIGITS) else len(str(n - 1)) + 1
    labels = [_DIGITS[i] if n <= len(_DIGITS) else str(i) for i in range(n)]
    held = []
    actions = iter(schedule)
    for a in actions:
        if a.kind == "reverse":
            break
        if a.kind == "snapshot":
            del held[a.slot:]
            held.append(a.position)
    forward_row = {p: "X" for p in held + [n - 1]}
    rows = [[(0, n - 1, forward_row)]]
    segment = None
    for a in actions:
        if a.kind == "restore":
            segment = {a.position: "+"}
        elif a.kind == "advance" and segment is not None:
            segment[a.position + a.steps] = "X"
        elif a.kind == "snapshot" and segment is not None:
            segment[a.position] = "X"
        elif a.kind == "reverse":
            if segment is not None and len(segment) > 1:
                _place(rows, segment)
            segment = None
    lines = ["".join(label.ljust(width) for label in labels).rstrip()]
    for row in rows:
        cells = [" "] * n
        for _, _, marks in row:
            for p, c in marks.items():
                cells[p] = c
        lines.append("".join(c.ljust(width) for c in cells).rstrip())
    lines.append(f"{schedule.policy}: {n} steps, at most {schedule.peak_snapshots} snapshots, "
                 f"{schedule.evaluations} step evaluations ({schedule.forward_advances} forward, "
                 f"{schedule.recomputations} recomputed, {n} recorded while reversing)")
    return "\n".join(lines)


def _place(rows, marks):
    """Put a recomputation in the first row (after the forward sweep's) where it overlaps nothing."""
    lo, hi = min(marks), max(marks)
    for row in rows[1:]:
        if all(hi < a or lo > b for a, b, _ in row):
            row.append((lo, hi, marks))
            return
    rows.append([(lo, hi, marks)])


# -- argument checks ---------------------------------------------------------------------------------

POLICIES = ("all", "binomial", "ctz")
"""What a checkpointed loop keeps: every step ("all"), Griewank's binomial schedule, or CTZ."""


def check_policy(checkpoint, where):
    """Refuse a ``checkpoint=`` that is not one of :data:`POLICIES` (``where`` names the call)."""
    if checkpoint not in POLICIES:
        raise ValueError(f"{where}: checkpoint must be one of {', '.join(map(repr, POLICIES))}, "
                         f"got {checkpoint!r}")


def _check_n(n, where):
    if isinstance(n, bool) or not isinstance(n, int) and not hasattr(n, "__index__"):
        raise TypeError(f"{where}: the number of steps n must be an integer, got {n!r}")
    n = int(n)
    if n < 0:
        raise ValueError(f"{where}: the number of steps n must be >= 0, got {n}")
    return n


def _check_snapshots(s, where):
    if isinstance(s, bool) or not isinstance(s, int) and not hasattr(s, "__index__"):
        raise TypeError(f"{where}: snapshots must be an integer, got {s!r}")
    s = int(s)
    if s < 1:
        raise ValueError(f"{where}: snapshots must be at least 1 (the initial state is one), got {s}")
    return s


# -- measurement -------------------------------------------------------------------------------------

_local = threading.local()


def _active():
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


class Stats:
    """Context manager counting step evaluations (forward and recomputation, by ``wg.iterate`` and
    ``wg.checkpoint``) and the peak number of snapshots held at once::

        with wengert.checkpointing.Stats() as stats:
            wg.grad(loss)(x0)
        stats.evaluations, stats.peak_snapshots

    Snapshots count for the loops started inside the context. ``wg.iterate(..., checkpoint="all")``
    takes no snapshots: its tape keeps every intermediate. ``wg.checkpoint`` counts its function's
    evaluations, and one snapshot (its inputs) while it recomputes.
    """

    def __init__(self):
        self.evaluations = 0
        self.peak_snapshots = 0
        self._held = 0

    def __enter__(self):
        _active().append(self)
        return self

    def __exit__(self, *exc):
        _active().remove(self)

    def __repr__(self):
        return f"Stats(evaluations={self.evaluations}, peak_snapshots={self.peak_snapshots})"


def _note_evaluation():
    for stats in _active():
        stats.evaluations += 1


def _note_evaluations(k):
    """``k`` step evaluations at once (a compiled step's run of ``k`` steps)."""
    for stats in _active():
        stats.evaluations += k


def _watching():
    """The Stats a loop starting now reports its snapshots to."""
    return tuple(_active())


def _note_snapshots(delta, watchers):
    """``delta`` snapshots taken (positive) or released (negative) by a loop ``watchers`` watch."""
    for stats in watchers:
        stats._held += delta
        if stats._held > stats.peak_snapshots:
            stats.peak_snapshots = stats._held
