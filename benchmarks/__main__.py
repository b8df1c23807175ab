"""``python -m benchmarks [--quick] [--only NAME ...] [--rounds N] [--docs PATH]``: print the tables and
targets, write them to benchmarks/results/latest.md, and exit non-zero if any gradient cross-check
failed. A full run (no ``--quick``, ``--only``, ``--impls`` or ``--rounds``: what ``make bench`` does)
also writes the documentation's benchmark page, docs/benchmarks.md, with its plots in docs/img/;
``--docs PATH`` writes the page for any run.
"""

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path

from benchmarks import checkpointing as checkpoint_bench
from benchmarks import dask as dask_bench
from benchmarks import docs_page, indexing, native, readme_summary
from benchmarks import memory as memory_bench
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
DOCS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
README = Path(__file__).resolve().parents[1] / "README.md"
NAMES = WORKLOAD_NAMES + COMPILED_NAMES + native.NATIVE_NAMES
CHECKPOINTING = "checkpointing"  # the checkpointing benchmark's name for --only (benchmarks/checkpointing.py)


def _select(names, parser):
    """Workload names matching ``--only`` arguments (a part such as "mlp" selects several)."""
    chosen = []
    for raw in names:
        key = raw.lower().replace("_", "-").replace(" ", "-")
        matches = [n for n in NAMES if key in n]
        if not matches:
            parser.error(f"--only {raw!r}: no such workload; choose from {', '.join(NAMES)}")
        chosen += [m for m in matches if m not in chosen]
    return chosen


class _Tee(io.TextIOBase):
    """Writes to several streams at once."""

    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self):
        for stream in self.streams:
            stream.flush()


def _tee(run, **kwargs):
    """``(run(**kwargs), what it printed)``, the printing still shown."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(_Tee(sys.stdout, printed)):
        result = run(**kwargs)
    return result, printed.getvalue()


def _stacking_markdown(printed):
    """The stacking benchmark's printed caption and table as a Markdown section ("" without them)."""
    lines = printed.splitlines()
    start = next((k for k, line in enumerate(lines) if line.startswith("Stacking N traced scalars")), None)
    if start is None:
        return ""
    table = [line for line in lines[start + 1:] if line.startswith("|")]
    notes = [line for line in lines[start + 1:] if "differ from the formula" in line]
    return "\n".join(["## Scale: stacking many traced pieces", "", lines[start] + ".", "", *table, "",
                      *notes]) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time wengert against hand-written NumPy, PyTorch, JAX and HIPS autograd "
                    "(peers that are not installed are reported and skipped).")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few rounds, for smoke-testing (not representative)")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help=f"run only these workloads: {', '.join(NAMES)}, "
                             f"{CHECKPOINTING} (the checkpointing runner: time and memory of long loops), "
                             "stack (stacking many traced pieces), dask (a gradient over Dask arrays on a "
                             "local cluster), memory (peak memory of reverse mode) (parts of names work)")
    parser.add_argument("--rounds", type=int, metavar="N", help="rounds per workload (default: per workload)")
    parser.add_argument("--impls", nargs="+", metavar="KEY", choices=list(IMPLEMENTATIONS),
                        help=f"run only these implementations: {', '.join(IMPLEMENTATIONS)}")
    parser.add_argument("--markdown", type=Path, metavar="PATH",
                        help="where to write the Markdown report (default: benchmarks/results/latest.md, "
                             "or latest-quick.md with --quick)")
    parser.add_argument("--docs", type=Path, metavar="PATH",
                        help="also write the documentation's benchmark page there, plots in img/ beside it "
                             "(a full run writes docs/benchmarks.md)")
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")

    dask_too = args.only is None or any(dask_bench.matches(o) for o in args.only)  # "--only dask"
    others = [o for o in args.only or [] if not checkpoint_bench.matches(o) and not stacking.matches(o)
              and not dask_bench.matches(o) and not memory_bench.matches(o)]
    memory_too = args.only is None or any(memory_bench.matches(o) for o in args.only)  # "--only memory"
    checkpoint_too = args.only is None or any(checkpoint_bench.matches(o) for o in args.only)
    stacking_too = args.only is None or any(stacking.matches(o) for o in args.only)
    if args.only and not others:
        failed = stacking.run(quick=args.quick, rounds=args.rounds) if stacking_too else 0
        if memory_too:
            failed += memory_bench.run(quick=args.quick)
        if dask_too:
            failed += dask_bench.run(quick=args.quick, rounds=args.rounds)
        if checkpoint_too:
            failed += checkpoint_bench.run(quick=args.quick, rounds=args.rounds, markdown=args.markdown)
        return 1 if failed else 0
    selected = _select(others, parser) if args.only else list(NAMES)
    everything = (all_workloads(quick=args.quick) + compiled_workloads(quick=args.quick)
                  + native.workloads(quick=args.quick))
    workloads = [w for w in everything if w.name in selected]
    env = environment()
    started = time.perf_counter()
    loops = [w for w in workloads if w.name == indexing.NAME]  # its sizes are timed interleaved
    sloops = [w for w in workloads if w.name == source_loops.NAME]  # likewise
    nloops = [w for w in workloads if w.name == native.LOOP_NAME]  # likewise; it calls JAX: after those two
    # The loops run first: before any JAX eager call, which leaves this process slower at
    # allocation-heavy Python (see indexing.run_interleaved); reported after the others.
    loop_results = indexing.run_interleaved(loops, args.impls, args.rounds)
    loop_results += indexing.run_interleaved(sloops, args.impls, args.rounds)
    loop_results += indexing.run_interleaved(nloops, args.impls, args.rounds)
    results = [run_workload(w, impls=args.impls, rounds=args.rounds) for w in workloads
               if w not in loops and w not in sloops and w not in nloops]
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
    print(native.loop_summary(results))
    path = args.markdown or RESULTS / ("latest-quick.md" if args.quick else "latest.md")
    write_markdown(path, format_markdown(results, env, quick=args.quick) + indexing.summary_markdown(results)
                   + source_loops.summary_markdown(results) + native.loop_summary_markdown(results))
    print(f"\nTotal {elapsed:.0f} s. Markdown written to {path}")
    failed = sum(len(r.failures) for r in results)
    stacking_md = ""
    if stacking_too:
        failed_stacking, printed = _tee(stacking.run, quick=args.quick, rounds=args.rounds)
        failed += failed_stacking
        stacking_md = _stacking_markdown(printed)
    if memory_too:
        failed += memory_bench.run(quick=args.quick)
    checkpoint_md = RESULTS / ("checkpointing-quick.md" if args.quick else "checkpointing.md")
    if checkpoint_too:
        failed += checkpoint_bench.run(quick=args.quick, rounds=args.rounds, markdown=checkpoint_md)
    if dask_too:
        failed += dask_bench.run(quick=args.quick, rounds=args.rounds)
    full = not (args.quick or args.only or args.impls or args.rounds)
    page = args.docs or (DOCS_PAGE if full else None)
    if page is not None:
        extra = [indexing.summary_markdown(results), source_loops.summary_markdown(results),
                 native.loop_summary_markdown(results), stacking_md]
        checkpointing = checkpoint_md.read_text(encoding="utf-8") if checkpoint_too else None
        command = "make bench" if full else "python -m benchmarks " + " ".join(argv or sys.argv[1:])
        written = docs_page.write_page(page, results, env, quick=args.quick, command=command,
                                       checkpointing=checkpointing, extra=extra)
        if page == DOCS_PAGE:  # a full run: the README's summary comes from the same results
            readme = readme_summary.write(README, results, env.get("date", "an unknown date"))
            written += [readme] if readme is not None else []
        print("Benchmark page written: " + ", ".join(str(p) for p in written))
    if failed:
        print(f"{failed} implementation(s) FAILED the gradient cross-check", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
