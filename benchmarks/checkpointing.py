"""Checkpointing benchmark: the gradient of a long loop over a large state, per policy.

x = a sin(x) + 0.1 x applied n = 1024 times to 100,000 float64 (a = 0.9), loss = sum(x_n), gradient
with respect to x0 and a. Reports the median time of a full gradient and its peak memory:

- ``tracemalloc`` for NumPy-based code (wengert, hand-written): NumPy's buffers are traced;
- the peak resident set size above the one before the call, in a fresh subprocess (Linux VmHWM, reset
  by /proc/self/clear_refs), for everything: the only fair measure for PyTorch and JAX, whose
  allocators tracemalloc does not see.

Then the scale rows, memory that must grow with the snapshots and not with the loop's length: the
gradient of a 10^6-step scalar loop under "ctz" (and "all"), 10^6 scalar steps each wrapped in
``wg.checkpoint`` (and plain), and ``binomial(10^6, 20)`` iterated (tracemalloc: a few kilobytes are
below RSS's resolution); each in a fresh process (``--scale KEY``).

``python -m benchmarks --only checkpoint [--quick]``; part of the default ``make bench``.
"""

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from benchmarks import peers
from benchmarks.fresh import in_fresh_process, rss_bytes
from wengert.checkpointing import Stats, binomial, ctz

__all__ = ["IMPLS", "run", "matches", "main"]

RESULTS = Path(__file__).resolve().parent / "results"
A = 0.9
FULL = {"size": 100_000, "n": 1024, "snapshots": 10, "many": 32, "segments": 32, "rounds": 3,
        "scalar_n": 1_000_000, "schedule_n": 1_000_000, "schedule_s": 20}
QUICK = {"size": 2_000, "n": 64, "snapshots": 6, "many": 8, "segments": 8, "rounds": 1,
         "scalar_n": 2_000, "schedule_n": 2_000, "schedule_s": 5}


def matches(name):
    """Whether an ``--only`` argument selects this benchmark ("checkpoint", "checkpointing", "check")."""
    key = name.lower()
    return key.startswith("check") and ("checkpointing".startswith(key) or key.startswith("checkpoint"))


def initial_state(size):
    return np.random.default_rng(0).uniform(-2.0, 2.0, size)


# -- implementations: each returns a function computing (loss, [d/dx0, d/da]) ---------------------------

def hand_written(cfg):
    n = cfg["n"]

    def run(x0):
        xs = [x0]
        for _ in range(n):
            xs.append(A * np.sin(xs[-1]) + 0.1 * xs[-1])
        loss = float(np.sum(xs[-1]))
        g = np.ones_like(x0)
        ga = 0.0
        for x in reversed(xs[:-1]):
            ga += float(np.dot(g, np.sin(x)))
            g = g * (A * np.cos(x) + 0.1)
        return loss, [g, ga]

    return run


def wengert_policy(policy, snapshots="snapshots"):
    def make(cfg):
        n = cfg["n"]
        kw = {"snapshots": cfg[snapshots]} if policy == "binomial" else {}

        def loss(x0, a):
            return wnp.sum(wg.iterate(lambda x: a * wnp.sin(x) + 0.1 * x, x0, n, checkpoint=policy, **kw))

        vg = wg.value_and_grad(loss, argnums=(0, 1))

        def run(x0):
            value, (gx, ga) = vg(x0, A)
            return value, [gx, ga]

        return run

    return make


def torch_impl(checkpointed):
    def make(cfg):
        torch = peers.load_torch()
        from torch.utils.checkpoint import checkpoint_sequential

        n, segments = cfg["n"], cfg["segments"]

        def run(x0):
            x = torch.tensor(x0, requires_grad=True)
            a = torch.tensor(A, dtype=torch.float64, requires_grad=True)

            def step(v):
                return a * torch.sin(v) + 0.1 * v

            if checkpointed:
                out = checkpoint_sequential([step] * n, segments, x, use_reentrant=False)
            else:
                out = x
                for _ in range(n):
                    out = step(out)
            loss = out.sum()
            loss.backward()
            return loss.item(), [x.grad.numpy(), a.grad.item()]

        return run

    return make


def jax_impl(checkpointed):
    def make(cfg):
        jax, jnp = peers.load_jax()
        n, segments = cfg["n"], cfg["segments"]

        def steps(x, a, k):
            return jax.lax.scan(lambda v, _: (a * jnp.sin(v) + 0.1 * v, None), x, None, length=k)[0]

        def loss(x0, a):
            if checkpointed:  # scan over segments, each recomputed in the backward pass
                segment = jax.checkpoint(lambda v: steps(v, a, n // segments))
                x = jax.lax.scan(lambda v, _: (segment(v), None), x0, None, length=segments)[0]
            else:
                x = steps(x0, a, n)
            return jnp.sum(x)

        vg = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
        compiled = vg.lower(jnp.zeros(cfg["size"]), A).compile()  # compiled, not run: no memory peak

        def run(x0):
            value, (gx, ga) = compiled(jnp.asarray(x0), A)
            gx.block_until_ready()
            return float(value), [np.asarray(gx), float(ga)]

        return run

    return make


# key -> (label, factory, kept for the backward pass, measured by tracemalloc)
IMPLS = {
    "hand": ("hand-written NumPy, every state", hand_written, "all", True),
    "wengert-all": ('wengert checkpoint="all"', wengert_policy("all"), "all", True),
    "wengert-binomial": ('wengert checkpoint="binomial"', wengert_policy("binomial"), "{snapshots} snapshots",
                         True),
    "wengert-binomial-many": ('wengert checkpoint="binomial", more snapshots',
                              wengert_policy("binomial", "many"), "{many} snapshots", True),
    "wengert-ctz": ('wengert checkpoint="ctz"', wengert_policy("ctz"), "<= floor(log2 n)+2 snapshots", True),
    "torch-all": ("PyTorch eager, every state", torch_impl(False), "all", False),
    "torch-checkpoint": ("PyTorch checkpoint_sequential", torch_impl(True), "{segments} segments", False),
    "jax-all": ("JAX jit(grad(scan))", jax_impl(False), "all", False),
    "jax-checkpoint": ("JAX scan of jax.checkpoint(scan)", jax_impl(True), "{segments} segments", False),
}
PEERS = ("torch-all", "torch-checkpoint", "jax-all", "jax-checkpoint")


def _evaluations(key, cfg):
    n = cfg["n"]
    if key == "wengert-binomial":
        return binomial(n, cfg["snapshots"]).evaluations
    if key == "wengert-binomial-many":
        return binomial(n, cfg["many"]).evaluations
    if key == "wengert-ctz":
        return ctz(n).evaluations
    if key == "torch-checkpoint" or key == "jax-checkpoint":
        return 2 * n  # each segment is run forward twice (recorded the second time)
    return n


def measure_rss(key, cfg):
    """Peak resident memory above the level before one gradient call, in this (fresh) process."""
    run = IMPLS[key][1](cfg)
    x0 = initial_state(cfg["size"])
    before = rss_bytes("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak (VmHWM) to the current RSS
    except OSError:
        return None
    run(x0)
    return rss_bytes("VmHWM") - before


def _rss_in_subprocess(key, cfg, quick):
    return in_fresh_process("benchmarks.checkpointing", ["--rss", key] + (["--quick"] if quick else []),
                            f"RSS of {key}")


def _check(got, want):
    value, grads = got
    ref_value, ref_grads = want
    ok = np.isclose(value, ref_value, rtol=1e-9)
    for g, r in zip(grads, ref_grads):
        ok = ok and np.allclose(g, r, rtol=1e-8, atol=1e-10 * max(1.0, float(np.max(np.abs(r)))))
    return bool(ok)


def run(quick=False, peers_wanted=True, rss=None, rounds=None, markdown=None, progress=None):
    """Run the benchmark; print and write the table. Returns 0, or 1 if a gradient was wrong."""
    cfg = dict(QUICK if quick else FULL)
    if rounds is not None:
        cfg["rounds"] = rounds
    rss = (not quick) if rss is None else rss
    say = progress or (lambda m: print(m, file=sys.stderr, flush=True))
    x0 = initial_state(cfg["size"])
    keys = [k for k in IMPLS if peers_wanted or k not in PEERS]
    runs, status = {}, {}
    reference = hand_written(cfg)(x0)
    for key in keys:
        try:
            fn = IMPLS[key][1](cfg)
        except peers.PeerUnavailable as e:
            status[key] = "not installed" if str(e) == "not installed" else "unavailable"
            continue
        if not _check(fn(x0), reference):
            status[key] = "FAILED"
            continue
        runs[key], status[key] = fn, "ok"
    times = {k: [] for k in runs}
    for r in range(cfg["rounds"]):  # interleaved rounds
        for key, fn in runs.items():
            start = time.perf_counter()
            fn(x0)
            times[key].append(time.perf_counter() - start)
        say(f"checkpointing: round {r + 1}/{cfg['rounds']} done")
    traced, evaluations, snapshots = {}, {}, {}
    for key, fn in runs.items():
        if IMPLS[key][3]:
            tracemalloc.start()
            with Stats() as stats:
                fn(x0)
            traced[key] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            if key.startswith("wengert"):
                evaluations[key], snapshots[key] = stats.evaluations, stats.peak_snapshots
    resident = {key: _rss_in_subprocess(key, cfg, quick) for key in runs} if rss else {}
    rows = _rows(cfg, keys, status, times, traced, resident, evaluations, snapshots)
    targets = _targets(times, traced, cfg)
    text = _format(cfg, rows, targets, quick)
    say("checkpointing: scale workloads")
    scale = {key: (_scale_in_subprocess(key, quick) if rss else measure_scale(key, cfg)) for key in SCALE}
    text += "\n\n" + _format_scale(cfg, scale, rss, quick)
    print(text)
    path = markdown or RESULTS / ("checkpointing-quick.md" if quick else "checkpointing.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")
    print(f"\nMarkdown written to {path}")
    return 1 if any(s == "FAILED" for s in status.values()) else 0


def _seconds(t):
    return f"{t * 1e3:.1f} ms" if t < 1 else f"{t:.2f} s"


def _mib(b):
    return "-" if b is None else f"{b / 2**20:,.1f} MiB"


def _rows(cfg, keys, status, times, traced, resident, evaluations, snapshots):
    base_t = statistics.median(times["wengert-all"]) if times.get("wengert-all") else None
    base_m = traced.get("wengert-all")
    rows = []
    for key in keys:
        label, _, kept, _ = IMPLS[key]
        kept = kept.format(**cfg)
        if status.get(key) != "ok":
            rows.append([label, kept, "-", status.get(key, "-"), "", "", "", ""])
            continue
        t = statistics.median(times[key])
        evals = evaluations.get(key, _evaluations(key, cfg))
        if snapshots.get(key):
            kept = f"{snapshots[key]} snapshots (peak)"
        rows.append([
            label, kept, f"{evals:,}", _seconds(t),
            f"{t / base_t:.2f}x" if base_t else "",
            _mib(traced.get(key)) if key in traced else "not seen",
            f"1/{base_m / traced[key]:.0f}" if base_m and key in traced else "",
            _mib(resident.get(key)) if resident else "not measured",
        ])
    return rows


def _targets(times, traced, cfg=None):
    out = []
    if "wengert-all" not in times:
        return out
    t_all = statistics.median(times["wengert-all"])
    m_all = traced["wengert-all"]
    if cfg is not None and "wengert-binomial-many" in times:
        states = traced["wengert-binomial-many"] / (8 * cfg["size"])
        bound = cfg["many"] + 8
        t = statistics.median(times["wengert-binomial-many"]) / t_all
        out.append((f'"binomial" with {cfg["many"]} snapshots: peak <= {bound} states',
                    f"{states:.1f} states", states <= bound))
        out.append((f'"binomial" with {cfg["many"]} snapshots: time <= 2x "all"', f"{t:.2f}x", t <= 2))
    for key, factor in (("wengert-binomial", 3), ("wengert-ctz", 4)):
        if key not in times:
            continue
        t = statistics.median(times[key]) / t_all
        m = traced[key] / m_all
        policy = key.split("-")[1]
        out.append((f'"{policy}" peak memory <= 1/20 of "all"', f"1/{1 / m:.0f}", m <= 1 / 20))
        out.append((f'"{policy}" time <= {factor}x "all"', f"{t:.2f}x", t <= factor))
    return out


def _format(cfg, rows, targets, quick):
    head = ["implementation", "kept for the backward pass", "step evaluations", "time (median)",
            "time / wengert all", "peak memory (tracemalloc)", "memory / wengert all",
            "peak RSS increase (subprocess)"]
    lines = [f"## Checkpointing: gradient of {cfg['n']} steps of x = 0.9 sin(x) + 0.1 x over "
             f"{cfg['size']:,} float64" + (" (QUICK: not representative)" if quick else ""),
             "",
             f"Median of {cfg['rounds']} interleaved round(s); one thread. tracemalloc sees NumPy's "
             f"buffers only (not PyTorch's or XLA's allocators); the RSS column is the peak resident "
             f"memory above the level before the call, in a fresh process (Linux VmHWM, with "
             f"MALLOC_MMAP_THRESHOLD_=65536 so that freed arrays leave the resident set).",
             "",
             "| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if targets:
        lines += ["", "| target | measured | verdict |", "|---|---|---|"]
        lines += [f"| {t} | {m} | {'MET' if ok else 'NOT MET'} |" for t, m, ok in targets]
    return "\n".join(lines)


# -- scale: memory that grows with the schedule's snapshots, not with the loop's length -----------------

def _scalar_step(x):
    return 0.9 * wnp.sin(x) + 0.1 * x


def _scalar_loop(policy, n):
    return wg.grad(lambda x: wg.iterate(_scalar_step, x, n, checkpoint=policy))


def _scalar_calls(checkpointed, n):
    step = wg.checkpoint(_scalar_step) if checkpointed else _scalar_step

    def loss(x):
        for _ in range(n):
            x = step(x)
        return x

    return wg.grad(loss)


def _iterate_schedule(n, s):
    count = 0
    for _ in binomial(n, s):
        count += 1
    return count


# key -> (label, what it measures, make(cfg) -> a function of no arguments)
SCALE = {
    "scalar-all": ('grad of a {scalar_n:,}-step scalar loop, checkpoint="all"', "loop",
                   lambda cfg: lambda: _scalar_loop("all", cfg["scalar_n"])(0.5)),
    "scalar-ctz": ('grad of a {scalar_n:,}-step scalar loop, checkpoint="ctz"', "loop",
                   lambda cfg: lambda: _scalar_loop("ctz", cfg["scalar_n"])(0.5)),
    "calls-plain": ("grad of {scalar_n:,} scalar steps, plain", "calls",
                    lambda cfg: lambda: _scalar_calls(False, cfg["scalar_n"])(0.5)),
    "calls-checkpoint": ("grad of {scalar_n:,} scalar steps, each in wg.checkpoint", "calls",
                         lambda cfg: lambda: _scalar_calls(True, cfg["scalar_n"])(0.5)),
    "schedule-binomial": ("binomial({schedule_n:,}, {schedule_s}) iterated", "schedule",
                          lambda cfg: lambda: _iterate_schedule(cfg["schedule_n"], cfg["schedule_s"])),
}


def measure_scale(key, cfg, rss=False):
    """One scale workload in this process: its peak RSS increase (``rss``: for a fresh process; no
    tracemalloc, which would slow a 10^6-step loop several times over) or its peak traced memory."""
    fn = SCALE[key][2](cfg)
    start = time.perf_counter()
    if rss and SCALE[key][1] != "schedule":  # a schedule's few kilobytes: below RSS's resolution
        before = rss_bytes("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        fn()
        return {"rss": rss_bytes("VmHWM") - before, "seconds": time.perf_counter() - start}
    tracemalloc.start()
    try:
        fn()
        return {"traced": tracemalloc.get_traced_memory()[1], "seconds": time.perf_counter() - start}
    finally:
        tracemalloc.stop()


def _scale_in_subprocess(key, quick):
    return in_fresh_process("benchmarks.checkpointing", ["--scale", key] + (["--quick"] if quick else []),
                            f"scale {key}", timeout=1800)


def _format_scale(cfg, scale, rss, quick):
    what = ("peak RSS increase above the level before the call, a fresh process each" if rss
            else "peak traced memory (tracemalloc), this process")
    lines = [f"## Checkpointing at scale ({what})" + (" (QUICK: not representative)" if quick else ""), "",
             "| workload | memory | time |", "|---|---|---|"]
    def mem(key):
        got = scale.get(key)
        return None if not got else got.get("rss", got.get("traced"))

    for key, (label, kind, _) in SCALE.items():
        got = scale.get(key)
        how = " (tracemalloc)" if got and "rss" not in got and rss else ""
        memory = f"{mem(key) / 1e3:,.1f} kB" if kind == "schedule" and got else _mib(mem(key))
        took = _seconds(got["seconds"]) if got else "-"
        lines.append(f"| {label.format(**cfg)} | {memory}{how} | {took} |")
    targets = []

    if mem("scalar-ctz") is not None:
        targets.append(('"ctz" scalar loop <= 60 MB above the level before the call',
                        _mib(mem("scalar-ctz")), mem("scalar-ctz") <= 60e6))
    if mem("schedule-binomial") is not None:
        targets.append(("binomial schedule iterated <= 1 MB", f'{mem("schedule-binomial") / 1e3:,.1f} kB',
                        mem("schedule-binomial") <= 1e6))
    if mem("calls-checkpoint") is not None and mem("calls-plain"):
        ratio = mem("calls-checkpoint") / mem("calls-plain")
        targets.append(("wg.checkpoint around each step <= 1.5x without", f"{ratio:.2f}x", ratio <= 1.5))
    if targets:
        lines += ["", "| target | measured | verdict |", "|---|---|---|"]
        lines += [f"| {t} | {m} | {'MET' if ok else 'NOT MET'} |" for t, m, ok in targets]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.checkpointing", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--rss", metavar="KEY", choices=list(IMPLS),
                        help="measure one implementation's peak RSS in this process and print it (JSON)")
    parser.add_argument("--scale", metavar="KEY", choices=list(SCALE),
                        help="measure one scale workload's peak RSS in this process and print it (JSON)")
    args = parser.parse_args(argv)
    if args.scale:
        print(json.dumps(measure_scale(args.scale, dict(QUICK if args.quick else FULL), rss=True)))
        return 0
    if args.rss:
        print(json.dumps(measure_rss(args.rss, dict(QUICK if args.quick else FULL))))
        return 0
    return run(quick=args.quick, peers_wanted=not args.no_peers, rounds=args.rounds)


if __name__ == "__main__":
    sys.exit(main())
