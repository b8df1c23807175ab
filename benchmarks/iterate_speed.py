"""Per-step time of a checkpointed loop's gradient, ``wg.grad`` through ``wg.iterate(...,
checkpoint="binomial")`` (default snapshots, ceil(log2 n)), for a scalar step and a small-array step:

- ``program``: the step run as a traced program and its VJP program (``checkpointing/fast.py``);
- ``taped``: the same loop with the program switched off: the step run under a substitution trace,
  each reversed step recorded on a tape (what every loop did before);
- ``all``: ``checkpoint="all"``, every step on the tape once;
- ``hand``: the loop and its adjoint written by hand in NumPy (all states kept);
- ``schedule overhead``: ``program`` minus what its evaluations of the step cost by themselves
  (advances x the forward function's time, plus n x the VJP function's time, each timed alone).

Interleaved in one process, medians of ``--rounds``; run single-threaded (OMP_NUM_THREADS=1). The
clock is the process's CPU time (``--clock process``, the default: on a shared machine wall time
counts the other processes' turns) or the wall clock (``--clock wall``).
``python -m benchmarks.iterate_speed [--n 10000 100000] [--rounds 5] [--clock wall]``.
"""

import argparse
import statistics
import time

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from wengert.api.checkpointing import fast
from wengert.checkpointing import binomial

__all__ = ["main"]

W = np.random.default_rng(0).normal(size=(10, 10)) / 4
A = 0.9
CLOCK = [time.process_time]


def _workloads(n):
    def scalar(policy):
        return lambda x0, a: wg.iterate(lambda x: a * wnp.sin(x) + 0.1 * x, x0, n, checkpoint=policy)

    def small_array(policy):
        return lambda x0, a: wnp.sum(wg.iterate(lambda x: wnp.tanh(W @ x) * a + 0.5 * x, x0, n,
                                                checkpoint=policy))

    def scalar_hand(x0, a):
        xs = [x0]
        for _ in range(n):
            xs.append(a * np.sin(xs[-1]) + 0.1 * xs[-1])
        g, ga = 1.0, 0.0
        for x in reversed(xs[:-1]):
            ga += g * np.sin(x)
            g = g * (a * np.cos(x) + 0.1)
        return g, ga

    def array_hand(x0, a):
        xs = [x0]
        for _ in range(n):
            xs.append(np.tanh(W @ xs[-1]) * a + 0.5 * xs[-1])
        g, ga = np.ones_like(x0), 0.0
        for x in reversed(xs[:-1]):
            t = np.tanh(W @ x)
            ga += g @ t
            g = W.T @ (g * a * (1 - t * t)) + 0.5 * g
        return g, ga

    return {"scalar": (scalar, scalar_hand, 0.3),
            "small array (10)": (small_array, array_hand, np.linspace(-1, 1, 10))}


def _step_costs(make, x0, reps=2000):
    """The traced step's forward and VJP functions, each timed alone (seconds per call)."""
    built = []
    original = fast.build
    fast.build = lambda *args: built.append(original(*args)) or built[-1]
    try:
        wg.grad(make("binomial"), argnums=(0, 1))(x0, A)
    finally:
        fast.build = original
    program = built[0]
    x = [x0]
    slots = [A] * len(program.slots)
    ct = [np.ones_like(x0) if isinstance(x0, np.ndarray) else 1.0]
    t = CLOCK[0]()
    for _ in range(reps):
        program.forward(*x, *slots)
    forward = (CLOCK[0]() - t) / reps
    t = CLOCK[0]()
    for _ in range(reps):
        program.vjp(*x, *slots, *ct)
    return forward, (CLOCK[0]() - t) / reps


def _bench(n, rounds):
    return [_one(name, make, hand, x0, n, rounds) for name, (make, hand, x0) in _workloads(n).items()]


def _one(name, make, hand, x0, n, rounds):
    tracer = list(fast._TRACER)
    grad_binomial = wg.grad(make("binomial"), argnums=(0, 1))
    grad_all = wg.grad(make("all"), argnums=(0, 1))

    def program():
        fast._TRACER[:] = tracer
        return grad_binomial(x0, A)

    def taped():
        fast._TRACER[:] = []
        try:
            return grad_binomial(x0, A)
        finally:
            fast._TRACER[:] = tracer

    cases = {"program": program, "taped": taped, "all": lambda: grad_all(x0, A),
             "hand": lambda: hand(x0, A)}
    got, want = program(), taped()
    diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)) / (np.abs(np.asarray(b)) + 1e-300)))
               for a, b in zip(got, want))
    times = {k: [] for k in cases}
    for _ in range(rounds):
        for k, f in cases.items():
            t = CLOCK[0]()
            f()
            times[k].append(CLOCK[0]() - t)
    med = {k: statistics.median(v) / n * 1e6 for k, v in times.items()}
    forward, vjp = _step_costs(make, x0)
    schedule = binomial(n)
    inherent = (schedule.advances * forward + n * vjp) / n * 1e6
    return name, n, med, inherent, schedule.evaluations / n, diff


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clock", choices=["process", "wall"], default="process")
    args = parser.parse_args(argv)
    CLOCK[0] = time.process_time if args.clock == "process" else time.perf_counter
    print("| step | n | program | taped (before) | all | hand | step evaluations alone | schedule overhead "
          "| evaluations / step | max rel. diff program vs taped |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for steps in args.n:
        for name, n, med, inherent, evals, diff in _bench(steps, args.rounds):
            print(f"| {name} | {n:,} | {med['program']:.2f} | {med['taped']:.1f} | {med['all']:.2f} | "
                  f"{med['hand']:.2f} | {inherent:.2f} | {med['program'] - inherent:.2f} | {evals:.2f} | "
                  f"{diff:.1e} |", flush=True)
    print(f"µs per step ({args.clock} time), medians of {args.rounds} interleaved rounds")


if __name__ == "__main__":
    main()
