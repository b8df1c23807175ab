"""``wg.checkpoint`` and ``wg.iterate``: a function, or a loop, whose intermediates are recomputed in
the backward pass instead of kept. The engine (one recomputing node per call) is ``recompute.py``;
the schedules the loop follows are ``schedules.py``; the package's docstring lists the rest.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from wengert.api.checkpointing import fast
from wengert.api.checkpointing import schedules as sched
from wengert.api.checkpointing.recompute import Chain, node_primitive
from wengert.api.randomness import sources_of
from wengert.api.tree import describe, tree_flatten, tree_unflatten
from wengert.core.exits import name_of
from wengert.core.trace import BOX_TYPES, unbox_all
from wengert.engines.reverse import is_inexact

__all__ = ["checkpoint", "iterate"]


def checkpoint(fun: Callable[..., Any] | None = None, *, generators: Any = None) -> Callable[..., Any]:
    """``fun`` whose intermediates are not kept for the backward pass but recomputed there from its
    inputs (``jax.checkpoint``, ``torch.utils.checkpoint.checkpoint``).

    Works under every transform (``grad`` of ``grad``, ``jvp``, ``Tensor.backward()``), with pytree
    arguments and results, and with traced values ``fun`` closes over (weights), whose gradients are
    correct. ``fun`` is run once forward and once more per backward pass; it must perform the same
    operations each time. Operations on closed-over values alone are recorded outside as usual.

    Randomness is replayed, as ``torch.utils.checkpoint`` does by default: the recomputation sees
    the forward run's random numbers from NumPy's global state (``np.random.*``) and from every
    ``numpy.random.Generator`` that ``fun`` reaches -- its closure, the globals it names, the
    objects those hold (a ``wengert.nn`` ``Dropout``'s ``rng``), its arguments -- and from those
    given as ``generators=[...]``; after the backward pass each is where the forward run left it. A
    draw from anything else (an unreachable Generator, ``np.random.default_rng()`` without a seed,
    Python's ``random``) cannot be replayed: the recomputed values then differ and the backward pass
    raises, naming ``fun``. ``@wg.checkpoint(generators=[rng])`` works as a decorator too.
    """
    if fun is None:
        return functools.partial(checkpoint, generators=generators)
    name = name_of(fun)
    prim = node_primitive(f"checkpoint({name})")  # one for every call: each call's node holds its chain

    @functools.wraps(fun)
    def checkpointed(*args, **kwargs):
        if fast._CHECKPOINT and generators is None:  # in a program being traced: one statement
            out = fast._CHECKPOINT[0](fun, args, kwargs, name)
            if out is not None:
                return out
        leaves, treedef = tree_flatten(tuple(args))
        roots = [v if type(v) not in BOX_TYPES and not is_inexact(v) else None for v in leaves]
        captured = []
        sources = sources_of(fun, roots + list(kwargs.values()), generators, f"wg.checkpoint({name})",
                             captured)
        chain = Chain(fun, name, "checkpoint", leaves, treedef, kwargs or _NO_KWARGS, sources, captured)
        chain.schedule = _ONE_STEP
        chain.keep_captured()
        values, out_def = chain.evaluate(0, chain.in_plain, chain.slot_plain.__getitem__)
        chain.first_run_done()
        return chain.make_node(prim, chain.node_args(leaves), values, out_def)

    return checkpointed


_NO_KWARGS: dict[str, Any] = {}  # never written to
_ONE_STEP = sched.Schedule((sched.Action("snapshot", 0, 0, 0), sched.Action("reverse", 0, 1)), 1,
                           "checkpoint")


def iterate(step: Callable[[Any], Any], x0: Any, n: int | None = None, *,
            until: Callable[[Any], Any] | None = None, checkpoint: str = "all",
            snapshots: int | None = None, generators: Any = None) -> Any:
    """The state after ``x = step(x)`` applied ``n`` times, or until ``until(x)`` is true (at most
    ``n`` times when both are given), differentiable with respect to ``x0`` and to everything
    ``step`` closes over (``jax.lax.fori_loop`` / ``while_loop`` with ``jax.checkpoint``).

    ``checkpoint`` chooses what the backward pass keeps: ``"all"`` records every step (the plain
    loop); ``"binomial"`` keeps ``snapshots`` states (default ceil(log2 n)) and recomputes the rest
    on Griewank's optimal schedule; ``"ctz"`` keeps at most floor(log2 n) + 2 states without knowing
    n in advance: the only policy that accepts ``until``. See :mod:`wengert.checkpointing`.
    The state may be a pytree; each step must keep its structure, shapes and dtypes. ``until`` is
    asked before every step, x0 included: ``while not until(x): x = step(x)``, on plain values;
    when the loop drew random numbers, the backward pass asks it again after each recomputed step
    (ignoring the answer) so that its draws are replayed with the steps'.
    Like ``jax.checkpoint``, the checkpointed policies run ``step`` again in the backward pass, so
    it must perform the same operations each time. Random numbers are replayed as in
    :func:`checkpoint` (``generators=``: Generators ``step`` uses that it does not reach): every
    recomputed step sees the draws its first run made, however often a schedule recomputes it.
    """
    name = name_of(step)
    where = f"wg.iterate({name})"
    sched.check_policy(checkpoint, where)
    if n is None and until is None:
        raise TypeError(f"{where}: give the number of steps n, or until=, a function of the state "
                        f"that says when to stop")
    if n is not None:
        n = sched._check_n(n, where)
    if until is not None and checkpoint != "ctz":
        raise ValueError(f"{where}: until= needs checkpoint='ctz', the online policy: "
                         f"checkpoint={checkpoint!r} needs the number of steps in advance")
    if snapshots is not None:
        if checkpoint != "binomial":
            raise ValueError(f"{where}: snapshots= is for checkpoint='binomial' only")
        snapshots = sched._check_snapshots(snapshots, where)
    if fast._LOOP and until is None:  # inside a program being traced: one statement (program.loop_node)
        out = fast._LOOP[0](step, x0, n, checkpoint, snapshots, name)
        if out is not None:
            return out
    if checkpoint == "all":
        return _iterate_all(step, x0, n, name)
    leaves, treedef = tree_flatten(x0)
    captured = []
    chain = Chain(step, name, "iterate", leaves, treedef,
                  sources=sources_of(step, (), generators, where, captured), captured=captured)
    plain_source = chain.slot_plain.__getitem__
    chain.keep_captured()
    if until is None:
        if n == 0:
            return x0
        chain.n = n
        chain.schedule = sched.binomial(n, snapshots) if checkpoint == "binomial" else sched.ctz(n)
        slots, current, values, back = chain.sweep_forward(chain.in_plain, plain_source)
    else:
        slots, current, values, back = _online_forward(chain, until, n, plain_source)
        if chain.n == 0:
            return x0
        chain.schedule = sched.ctz(chain.n)
    chain.first_run_done()
    args = chain.node_args(leaves)
    chain.forward_state = ([unbox_all(a) for a in args], slots, current, back)
    del current, back
    return chain.make_node(node_primitive(f"iterate({name})"), args, values, treedef)


def _online_forward(chain, until, n, source):
    """CTZ's forward sweep when the number of steps is not known: every step is recorded (the last
    one's recording is the first reverse step) and snapshots are kept as ``ctz`` keeps them."""
    slots = []
    current = chain.in_plain
    if n == 0 or until(tree_unflatten(chain.in_def, current)):
        chain.n = 0
        return slots, current, current, None
    chain.between = until  # recomputed steps ask it again, so that its draws are replayed
    chain.rng0 = chain.sources.capture()  # x_0's random state: after until(x_0), before step 0
    chain.snap(slots, 0, 0, current)
    p = 0
    try:
        while True:
            values, out_def, back = chain.record(p, current, source)
            chain.check_state(p, values, out_def)
            p += 1
            if (n is not None and p >= n) or until(tree_unflatten(chain.in_def, values)):
                chain.n = p
                return slots, current, values, back
            a = sched.ctz_forward(p)
            current = values
            chain.snap(slots, a.slot, p, current)
    except BaseException:
        chain.drop(slots, 0)
        raise


def _iterate_all(step, x, n, name):
    """The plain loop: every step recorded by whatever traces its values belong to."""
    leaves, treedef = tree_flatten(x)
    first = [unbox_all(v) for v in leaves]
    for j in range(n):
        sched._note_evaluation()
        x = step(x)
        leaves, out_def = tree_flatten(x)
        if out_def != treedef:
            raise ValueError(
                f"wg.iterate({name}): step {j} returned a state of structure {describe(out_def)}, "
                f"but the state is {describe(treedef)}; the step must return the same structure.")
        for i, (v, f) in enumerate(zip(leaves, first)):
            v = unbox_all(v)
            if np.shape(v) != np.shape(f) or np.result_type(v) != np.result_type(f):
                raise ValueError(
                    f"wg.iterate({name}): step {j} changed state leaf {i} from shape {np.shape(f)} "
                    f"{np.result_type(f)} to {np.shape(v)} {np.result_type(v)}; the step must keep "
                    f"every leaf's shape and dtype.")
    return x
