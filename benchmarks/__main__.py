"""``python -m benchmarks [--quick] [--only NAME ...] [--rounds N]``: print the tables and targets, write
them to benchmarks/results/latest.md, and exit non-zero if any gradient cross-check failed.
"""

import argparse
import sys
import time
from pathlib import Path

from benchmarks import checkpointing as checkpoint_bench
from benchmarks import dask as dask_bench
from benchmarks import indexing
from benchmarks import scale as stacking
from benchmarks import source as source_loops
from benchmarks.compiled import COMPILED_NAMES, compiled_workloads
from benchmarks.harness import (
    IMPLEMENTATIONS,
    environment,
    format_markdown,
    format_text,
    run_workload,
    write_markdown,
)
from benchmarks.workloads import WORKLOAD_NAMES, all_workloads

RESULTS = Path(__file__).resolve().parent / "results"


def _select(names, parser):
    """Workload names matching ``--only`` arguments (a part such as "mlp" selects several)."""
    chosen = []
    for raw in names:
        key = raw.lower().replace("_", "-").replace(" ", "-")
        matches = [n for n in WORKLOAD_NAMES + COMPILED_NAMES if key in n]
        if not matches:
            parser.error(f"--only {raw!r}: no such workload; choose from "
                         f"{', '.join(WORKLOAD_NAMES + COMPILED_NAMES)}")
        chosen += [m for m in matches if m not in chosen]
    return chosen


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time wengert against hand-written NumPy, PyTorch, JAX and HIPS autograd "
                    "(peers that are not installed are reported and skipped).")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few rounds, for smoke-testing (not representative)")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help=f"run only these workloads: {', '.join(WORKLOAD_NAMES + COMPILED_NAMES)}, "
                             "checkpoint, dask "
                             "(parts of names work)")
    parser.add_argument("--rounds", type=int, metavar="N", help="rounds per workload (default: per workload)")
    parser.add_argument("--impls", nargs="+", metavar="KEY", choices=list(IMPLEMENTATIONS),
                        help=f"run only these implementations: {', '.join(IMPLEMENTATIONS)}")
    parser.add_argument("--markdown", type=Path, metavar="PATH",
                        help="where to write the Markdown report (default: benchmarks/results/latest.md, "
                             "or latest-quick.md with --quick)")
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")

    dask_too = args.only is None or any(dask_bench.matches(o) for o in args.only)  # "--only dask"
    others = [o for o in args.only or [] if not checkpoint_bench.matches(o) and not stacking.matches(o)
              and not dask_bench.matches(o)]
    checkpoint_too = args.only is None or any(checkpoint_bench.matches(o) for o in args.only)
    stacking_too = args.only is None or any(stacking.matches(o) for o in args.only)
    if args.only and not others:
        failed = stacking.run(quick=args.quick, rounds=args.rounds) if stacking_too else 0
        if dask_too:
            failed += dask_bench.run(quick=args.quick, rounds=args.rounds)
        if checkpoint_too:
            failed += checkpoint_bench.run(quick=args.quick, rounds=args.rounds, markdown=args.markdown)
        return 1 if failed else 0
    selected = _select(others, parser) if args.only else list(WORKLOAD_NAMES + COMPILED_NAMES)
    everything = all_workloads(quick=args.quick) + compiled_workloads(quick=args.quick)
    workloads = [w for w in everything if w.name in selected]
    env = environment()
    started = time.perf_counter()
    loops = [w for w in workloads if w.name == indexing.NAME]  # its sizes are timed interleaved
    sloops = [w for w in workloads if w.name == source_loops.NAME]  # likewise
    # The loops run first: before any JAX eager call, which leaves this process slower at
    # allocation-heavy Python (see indexing.run_interleaved); reported after the others.
    loop_results = indexing.run_interleaved(loops, args.impls, args.rounds)
    loop_results += indexing.run_interleaved(sloops, args.impls, args.rounds)
    results = [run_workload(w, impls=args.impls, rounds=args.rounds) for w in workloads
               if w not in loops and w not in sloops]
    results += loop_results
    elapsed = time.perf_counter() - started

    env["total time"] = f"{elapsed:.0f} s"
    print()
    for key, value in env.items():
        print(f"{key}: {value}")
    print("rounds: " + ", ".join(f"{r.workload.name} {r.rounds}" for r in results))
    print()
    print(format_text(results, quick=args.quick))
    print(indexing.summary(results))
    print(source_loops.summary(results))
    path = args.markdown or RESULTS / ("latest-quick.md" if args.quick else "latest.md")
    write_markdown(path, format_markdown(results, env, quick=args.quick) + indexing.summary_markdown(results)
                   + source_loops.summary_markdown(results))
    print(f"\nTotal {elapsed:.0f} s. Markdown written to {path}")
    failed = sum(len(r.failures) for r in results)
    if stacking_too:
        failed += stacking.run(quick=args.quick, rounds=args.rounds)
    if checkpoint_too:
        failed += checkpoint_bench.run(quick=args.quick, rounds=args.rounds)
    if dask_too:
        failed += dask_bench.run(quick=args.quick, rounds=args.rounds)
    if failed:
        print(f"{failed} implementation(s) FAILED the gradient cross-check", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
