"""Checkpointed loops in derivative programs built from source (``source_grad(f, checkpoint=...)``).

The store-all reverse pass (``source/adjoint.py``) pushes each iteration's values on a stack: memory
grows with the trip count. With ``checkpoint="binomial"`` or ``"ctz"`` a loop instead keeps a few
*loop states* (the values of its loop-carried variables at the start of an iteration) and its
reverse pass executes a schedule of ``wengert.api.checkpointing.schedules``:

* the forward loop runs as written, without pushing anything; at the top of an iteration it takes
  the schedule's snapshots of the state (binomial: the schedule's forward snapshots, known when the
  program is generated, plus the state of the last iteration; CTZ: every state, in slot
  ``popcount(p)``, dropping the slots above: its forward sweep is online);
* the reverse sweep is a loop over the schedule's remaining actions (binomial: a tuple literal
  embedded in the program; CTZ: ``ctz_reverse_sweep(n)``, copied into the program from
  ``wengert.checkpointing``, since the trip count of a ``while`` loop is known only once it ran):
  ``advance`` re-runs the loop body without recording, ``snapshot``/``restore`` keep and take back
  states, and ``reverse p`` runs iteration p once more -- its values are then at hand, nothing is
  popped -- followed by the iteration's adjoint, exactly the store-all reverse body.

Step counts: the forward loop runs all n iterations (the rest of the function needs the final state),
so iteration n-1 runs once more than the schedule counts: ``schedule.evaluations + 1`` evaluations
of the body in all; the states held are the schedule's snapshots plus the last iteration's state,
kept from the forward loop until the reverse sweep starts from it.

The tape's checkpointing (``wg.iterate``, ``wg.checkpoint``) is ``wengert.api.checkpointing``, whose
docstring lists every checkpointing code path.
"""

import textwrap

from wengert.api.checkpointing.schedules import POLICIES, binomial, ctz_reverse_sweep
from wengert.api.checkpointing.schedules import check_policy as check_policy_name
from wengert.program.ir import Statement, Variable, vars_in
from wengert.program.rendering import register_helper
from wengert.program.source.codegen import render_block, render_loop, targets_source, values_source
from wengert.program.source.control import If, Loop, TransformError, all_names, defined, reads

__all__ = ["POLICIES", "check_policy", "checkpointed", "Checkpointed", "Sweep", "checkpoint_loop", "plain"]

register_helper(ctz_reverse_sweep)


def check_policy(checkpoint, snapshots, who):
    """Checks ``checkpoint``/``snapshots`` as given to ``source_grad`` (``who`` names the call)."""
    check_policy_name(checkpoint, who)
    if snapshots is None:
        return
    if checkpoint != "binomial":
        raise ValueError(f"{who}: snapshots={snapshots!r} is for checkpoint='binomial' (CTZ chooses its own "
                         f"number of snapshots; 'all' takes none)")
    if isinstance(snapshots, bool) or not isinstance(snapshots, int) and not hasattr(snapshots, "__index__"):
        raise TypeError(f"{who}: snapshots must be an integer, got {snapshots!r}")


def checkpointed(iterable, checkpoint="binomial", snapshots=None):
    """Marks one ``for`` loop for ``wg.source_grad``: ``for i in wg.checkpointed(range(n), "binomial",
    snapshots=10):`` reverses that loop following the schedule (``"binomial"`` or ``"ctz"``; ``"all"``:
    a stack, whatever ``source_grad``'s ``checkpoint=`` says). Run as Python, or on the tape, it is
    ``iterable`` itself."""
    check_policy(checkpoint, snapshots, "wg.checkpointed")
    if snapshots is not None and int(snapshots) < 1:
        raise ValueError(f"wg.checkpointed: snapshots must be at least 1 (the initial state is one), "
                         f"got {snapshots}")
    return iterable


def plain(nodes):
    """A forward block without the reverse pass's pushes, trip counters and snapshots."""
    out = []
    for n in nodes:
        t = type(n)
        if t is Loop:
            out.append(n.copy(count=None, push=[], stores=[], body=plain(n.body)))
        elif t is If:
            out.append(If(n.cond, plain(n.then), plain(n.orelse), n.outs, n.then_vals, n.else_vals, n.lineno))
        elif t is Checkpointed:
            out.append(n.plain_loop())
        elif t is _Snapshot:
            continue
        else:
            out.append(n)
    return out


def _state(headers):
    if not headers:
        return "()"
    return headers[0].name if len(headers) == 1 else f"({targets_source(headers)})"


class _Snapshot:
    """The forward loop's snapshot of its state, at the top of an iteration."""

    def __init__(self, snaps, headers, count, positions):
        self.snaps, self.headers, self.count, self.positions = snaps, list(headers), count, positions

    def node_reads(self, found):
        found.extend(self.headers + [self.count])

    def render(self, mod, indent, safe):
        pad = "    " * indent
        state, n = _state(self.headers), self.count.name
        if self.positions is None:  # CTZ: every state, in slot popcount(n)
            return [f"{pad}del {self.snaps}[bin({n}).count('1'):]  # CTZ: x_{n} in slot popcount({n})",
                    f"{pad}{self.snaps}.append({state})"]
        keep = "{" + ", ".join(str(p) for p in self.positions) + "}"
        return [f"{pad}if {n} in {keep}:  # the binomial schedule's forward snapshots, and the last state",
                f"{pad}    {self.snaps}.append({state})"]


class Checkpointed:
    """A forward loop keeping the states its checkpointing schedule asks for (``snaps``)."""

    def __init__(self, loop, snaps, label):
        self.loop = loop  # its body starts with a _Snapshot
        self.snaps = snaps
        self.label = label

    def plain_loop(self):
        return self.loop.copy(count=None, push=[], stores=[], body=plain(self.loop.body))

    def node_reads(self, found):
        reads([self.loop], found)

    def node_defined(self):
        return defined([self.loop])

    def node_names(self, found):
        all_names([self.loop], found)
        found.add(self.snaps)

    def render(self, mod, indent, safe):
        pad = "    " * indent
        return [f"{pad}{self.snaps} = []  # the states kept for the reverse sweep ({self.label})"] + \
            render_loop(self.loop, mod, indent, safe)


class Sweep:
    """The reverse pass of a checkpointed loop: its schedule's actions, from the last state on."""

    def __init__(self, loop, step, record, rev, snaps, count, schedule, names, label):
        self.loop = loop  # the forward Loop: index, bounds, headers, body_outs, cond_block
        self.step = step  # the body without pushes (advance)
        self.record = record  # the body as the store-all forward pass runs it (reverse p)
        self.rev = rev  # the iteration's adjoint (no pop: ``record`` just computed its values)
        self.snaps = snaps
        self.count = count
        self.schedule = schedule  # a tuple of actions, or None: ctz_reverse_sweep(count) at run time
        self.names = names  # (action, p, k, slot, schedule, q)
        self.label = label

    def blocks(self):
        return [self.loop.cond_block, self.step, self.record, self.rev]

    def inner_blocks(self):
        return self.record + self.rev

    def node_reads(self, found):
        found.append(self.count)
        vars_in(list(self.loop.bounds), found)
        for b in self.blocks():
            reads(b, found)
        found.extend(v for v in self.loop.body_outs if type(v) is Variable)

    def node_defined(self):
        return []

    def node_names(self, found):
        for b in self.blocks():
            all_names(b, found)
        found.update(h.name for h in self.loop.headers)
        if self.loop.index is not None:
            found.add(self.loop.index.name)
        found.add(self.snaps)
        found.update(self.names)

    def _index(self, mod, pos):
        """The loop index of iteration ``pos`` (a name)."""
        b = tuple(self.loop.bounds)
        lo, st = (0, 1) if len(b) == 1 else (b[0], b[2] if len(b) == 3 else 1)
        zero = type(lo) is not Variable and lo == 0
        one = type(st) is not Variable and st == 1
        if zero and one:
            return pos
        start = "" if zero else mod.value(lo)
        step = "" if one else f" * {mod.value(st)}"
        return f"{start} + {pos}{step}" if start else f"{pos}{step}"

    def render(self, mod, indent, safe):
        pad = "    " * indent
        p1, p2, p3 = pad + "    ", pad + "        ", pad + "            "
        action, p, k, slot, sched, q = self.names
        loop, state, snaps = self.loop, _state(self.loop.headers), self.snaps
        lines = []
        if self.schedule is None:
            mod.use_helper(ctz_reverse_sweep)
            source = f"ctz_reverse_sweep({self.count.name})"
            lines.append(f"{pad}if {self.count.name}:")
            lines.append(f"{p1}{state} = {snaps}[-1]  # the last iteration's state: the sweep starts there")
        else:
            text = "".join(repr(a) + ", " for a in self.schedule).rstrip()
            body = textwrap.wrap(text, 100, break_on_hyphens=False, break_long_words=False)
            lines.append(f"{pad}{sched} = (  # {self.label} after its forward sweep: (action, position, "
                         f"steps, slot)")
            lines += [p1 + b for b in body] + [f"{pad})"]
            if self.schedule:
                lines.append(f"{pad}{state} = {snaps}[-1]  # the last iteration's state: the sweep "
                             f"starts there")
            source = sched
        lines.append(f"{pad}for {action}, {p}, {k}, {slot} in {source}:")
        # advance: k steps from x_p, recording nothing
        lines.append(f"{p1}if {action} == 'advance':")
        idx = loop.index
        if idx is None:
            lines.append(f"{p2}for _ in range({k}):")
        elif self._index(mod, q) == q:
            lines.append(f"{p2}for {idx.name} in range({p}, {p} + {k}):")
        else:
            lines.append(f"{p2}for {q} in range({p}, {p} + {k}):")
            lines.append(f"{p3}{idx.name} = {self._index(mod, q)}")
        lines += render_block(loop.cond_block, mod, indent + 3, safe)
        lines += render_block(self.step, mod, indent + 3, safe)
        changed = [(h, o) for h, o in zip(loop.headers, loop.body_outs) if o is not h]
        if changed:
            headers, values = [h for h, _ in changed], [o for _, o in changed]
            lines.append(f"{p3}{targets_source(headers)} = {values_source(values, mod)}")
        else:
            lines.append(f"{p3}pass")
        lines.append(f"{p1}elif {action} == 'snapshot':")
        lines.append(f"{p2}del {snaps}[{slot}:]")
        lines.append(f"{p2}{snaps}.append({state})")
        lines.append(f"{p1}elif {action} == 'restore':")
        lines.append(f"{p2}{state if loop.headers else '_'} = {snaps}[{slot}]")
        lines.append(f"{p1}else:  # reverse step {p}: run it again, then its adjoint")
        if idx is not None and idx.name != "_" and idx in reads(loop.cond_block + self.record + self.rev):
            lines.append(f"{p2}{idx.name} = {self._index(mod, p)}")
        inner = render_block(loop.cond_block, mod, indent + 2, safe)
        inner += render_block(self.record, mod, indent + 2, safe)
        inner += render_block(self.rev, mod, indent + 2, safe)
        lines += inner or [f"{p2}pass"]
        return lines


def _needed(body, rev):
    """``body`` without the statements whose values neither ``rev`` nor a later node reads (the
    reverse step recomputes what the adjoint uses, not the new state)."""
    need = set(reads(rev))
    keep = []
    for n in reversed(body):
        if type(n) is Statement and not any(o in need for o in n.outs):
            continue
        keep.append(n)
        need.update(reads([n]))
    return keep[::-1]


def _trip_count(loop):
    """The number of iterations of a ``for`` loop over a range known when generating, or None."""
    if loop.kind != "for" or loop.brk is not None:
        return None
    if any(type(b) is Variable or isinstance(b, bool) or not hasattr(b, "__index__") for b in loop.bounds):
        return None
    return len(range(*(int(b) for b in loop.bounds)))


def checkpoint_loop(node, fwd_body, rev, count, fresh, policy, snapshots, who):
    """The forward node and reverse node of loop ``node`` under ``policy`` ("binomial" or "ctz"):
    ``fwd_body`` is its augmented forward body, ``rev`` its reverse body (without the pop);
    ``fresh(base)`` makes a new name."""
    where = node.where or f"line {node.lineno}"
    label = "CTZ"
    if policy == "binomial":
        n = _trip_count(node)
        if n is None:
            what = "while loop" if node.kind == "while" else ("for loop left by break" if node.brk is not None
                                                              else "for loop over a range known at run time")
            raise TransformError(f"{who}: the {what} at {where} has a trip count known only at run time; "
                                 f"the binomial schedule is computed for a known number of steps when the "
                                 f"program is generated: use checkpoint='ctz' (online) or 'all'")
        if snapshots is not None and int(snapshots) < 1:
            raise ValueError(f"{who}: the loop at {where}: snapshots must be at least 1 (the initial state "
                             f"is one), got {snapshots}")
        sched = binomial(n, snapshots)
        forward = [a for a in sched.forward_sweep() if a.kind == "snapshot"]
        if [a.slot for a in forward] != list(range(len(forward))):  # pragma: no cover - revolve's layout
            raise AssertionError("binomial: forward snapshots out of slot order")
        positions = [a.position for a in forward]
        if n and positions[-1] != n - 1:
            positions.append(n - 1)  # the last state: the reverse sweep starts from it
        schedule = tuple(tuple(a) for a in sched.reverse_sweep())
        label = f"binomial({n}, {sched.snapshots})"
    else:
        positions = schedule = None
    snaps = fresh("snaps")
    headers = list(node.headers)
    step = plain(fwd_body)
    fwd = node.copy(body=[_Snapshot(snaps, headers, count, positions)] + step, count=count)
    fwd.push = []
    names = tuple(fresh(b) for b in ("action", "p", "k", "slot", "schedule", "q"))
    sweep = Sweep(node, step, _needed(fwd_body, rev), rev, snaps, count, schedule, names, label)
    return Checkpointed(fwd, snaps, label), sweep
