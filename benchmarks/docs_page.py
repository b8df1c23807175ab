"""The documentation's benchmark page, written from one run: ``make bench`` (``python -m benchmarks``
without ``--quick``/``--only``) writes ``docs/benchmarks.md``, and ``--docs PATH`` writes it for any
run. The page holds the machine and the versions, a summary table and plots of each implementation's
time relative to the hand-written code, every workload's table, and the checkpointing benchmark's
time and memory. The plots (matplotlib, PNG) go to ``img/`` beside the page. Nothing on the page is
typed by hand: rerun the benchmarks to change it.
"""

import re
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from benchmarks.harness import IMPLEMENTATIONS, METHOD, format_tables_markdown

__all__ = ["write_page", "plot_relative", "plot_memory", "summary_rows", "memory_points"]

IMAGES = "img"
RELATIVE_PNG = "bench-relative.png"
MEMORY_PNG = "bench-checkpointing.png"


def _relative(wres, key):
    """``key``'s time over the hand-written one (per operation), or None when either is missing."""
    r, hand = wres.get(key), wres.get("hand")
    if r is None or hand is None:
        return None
    return r.per_op() / hand.per_op()


def _keys(results):
    """The implementations measured in any workload, in the harness's order, hand-written excluded."""
    seen = {r.key for wres in results for r in wres.results if wres.get(r.key) is not None}
    return [k for k in IMPLEMENTATIONS if k in seen and k != "hand"]


def _labels(results):
    """A label per workload result: its name, with the size from its title where names repeat
    (the loops are run at several sizes)."""
    names = [w.workload.name for w in results]
    return [n if names.count(n) == 1 else f"{n} ({w.workload.title.rsplit(', ', 1)[-1]})"
            for n, w in zip(names, results)]


def summary_rows(results):
    """``(header, rows)``: one row per workload with a hand-written time, one column per
    implementation, each cell that implementation's time over the hand-written one."""
    keys = _keys(results)
    header = ["workload"] + [IMPLEMENTATIONS[k] for k in keys]
    rows = []
    for wres, label in zip(results, _labels(results)):
        if wres.get("hand") is None:
            continue
        cells = [_relative(wres, k) for k in keys]
        rows.append([label] + ["-" if c is None else f"{c:.2f}x" for c in cells])
    return header, rows


def _ratio_text(x):
    return f"{x:,.0f}" if x >= 10 else f"{x:.2g}"


_PLAIN = FuncFormatter(lambda v, _: f"{v:g}")


def plot_relative(results, path):
    """A horizontal bar chart, log scale: per workload, each measured implementation's time over the
    hand-written code's, one bar each (a colour per implementation). Returns the path, or None when
    no workload has a hand-written time and another measured implementation."""
    keys = _keys(results)
    rows, ticks, y = [], [], 0.0  # rows: (y, key, ratio)
    for wres, label in zip(results, _labels(results)):
        present = [(k, r) for k in keys if (r := _relative(wres, k)) is not None]
        if not present:
            continue
        ticks.append((y + (len(present) - 1) / 2, label))
        for k, r in present:
            rows.append((y, k, r))
            y += 1.0
        y += 0.8  # a gap between workloads
    if not rows:
        return None
    fig = Figure(figsize=(9, 1.3 + 0.24 * y), layout="constrained")
    ax = fig.add_subplot()
    for j, key in enumerate(keys):
        mine = [(yy, r) for yy, k, r in rows if k == key]
        if not mine:
            continue
        ys, xs = [yy for yy, _ in mine], [r for _, r in mine]
        # each bar runs from 1 (the hand-written time) to the ratio: right slower, left faster
        ax.barh(ys, [x - 1.0 for x in xs], left=1.0, height=0.85, label=IMPLEMENTATIONS[key],
                color=f"C{j % 10}")
        for yy, x in mine:
            ax.annotate(_ratio_text(x), (x, yy), xytext=(3 if x >= 1 else -3, 0), textcoords="offset points",
                        ha="left" if x >= 1 else "right", va="center", fontsize="x-small")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(_PLAIN)
    ratios = [r for _, _, r in rows]
    ax.set_xlim(min(0.5, min(ratios) / 2), max(2.0, max(ratios) * 2))
    ax.set_yticks([t for t, _ in ticks], [name for _, name in ticks])
    ax.set_ylim(y - 0.3, -0.7)
    ax.set_xlabel("time relative to hand-written NumPy (log scale): right of 1 slower, left of 1 faster")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    ax.grid(axis="x", which="both", alpha=0.3)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


_NUMBER = re.compile(r"([0-9][0-9,]*\.?[0-9]*)\s*(µs|ms|s|KiB|MiB|GiB)\b")
_SCALE = {"µs": 1e-6, "ms": 1e-3, "s": 1.0, "KiB": 2.0**-10, "MiB": 1.0, "GiB": 2.0**10}


def _quantity(cell):
    m = _NUMBER.search(cell)
    return None if m is None else float(m.group(1).replace(",", "")) * _SCALE[m.group(2)]


def memory_points(markdown):
    """``[(implementation, seconds, MiB)]`` read from the checkpointing benchmark's Markdown table
    (its ``time (median)`` and ``peak memory (tracemalloc)`` columns); [] when it has no such table."""
    points = []
    lines = markdown.splitlines()
    for k, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if "time (median)" in cells and "peak memory (tracemalloc)" in cells:
            t, m = cells.index("time (median)"), cells.index("peak memory (tracemalloc)")
            for row in lines[k + 2:]:
                if not row.startswith("|"):
                    break
                values = [c.strip() for c in row.strip().strip("|").split("|")]
                if len(values) > max(t, m):
                    seconds, mib = _quantity(values[t]), _quantity(values[m])
                    if seconds is not None and mib is not None:
                        points.append((values[0], seconds, mib))
            break
    return points


def plot_memory(points, path):
    """Time against peak memory, log-log, one labelled point per implementation of the
    checkpointing benchmark. Returns the path, or None without points."""
    if not points:
        return None
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.add_subplot()
    for j, (label, seconds, mib) in enumerate(points):
        ax.scatter([mib], [seconds], color=f"C{j % 10}", label=label, zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(_PLAIN)
        axis.set_minor_formatter(_PLAIN)
    ax.set_xlabel("peak memory of one gradient (MiB, tracemalloc; log scale)")
    ax.set_ylabel("time of one gradient (s, median; log scale)")
    ax.legend(fontsize="small")
    ax.grid(which="both", alpha=0.3)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _demote(markdown):
    """Headings one level down (the page's own sections are level 2)."""
    return re.sub(r"^(#+) ", lambda m: "#" + m.group(1) + " ", markdown, flags=re.MULTILINE)


def write_page(path, results, env, quick=False, command="make bench", checkpointing=None, extra=()):
    """Write the page to ``path`` and its plots to ``img/`` beside it; returns the paths written.
    ``checkpointing``: the checkpointing benchmark's Markdown, if it ran; ``extra``: more Markdown
    sections from the same run (the loops' summaries)."""
    path = Path(path)
    images = path.parent / IMAGES
    written = []
    lines = ["# Benchmarks", "",
             f"Generated by `{command}` on {env.get('date', 'an unknown date')}: every number and picture "
             f"on this page comes from that one run (run it again to update the page; do not edit it).",
             ""]
    if quick:
        lines += ["!!! warning \"Quick run\"", "    Reduced sizes and rounds (`--quick`): a smoke test of "
                  "the page, not representative timings.", ""]
    lines += ["## Machine and versions", "", "| | |", "|:--|:--|"]
    lines += [f"| {key} | {str(value).replace('|', '/')} |" for key, value in env.items()]
    lines += [f"| rounds | {', '.join(f'{w.workload.name} {w.rounds}' for w in results)} |", "",
              "## Method", "", METHOD, ""]
    header, rows = summary_rows(results)
    if rows:
        lines += ["## Summary", "",
                  "Time of each implementation relative to hand-written NumPy (per operation where the "
                  "workload counts operations; below 1 is faster than the hand-written code). In the "
                  "compiled workloads \"wengert\" is `wg.compile`'s derivative program and \"wengert tape\" "
                  "is `wg.grad` on the same function.", "",
                  "| " + " | ".join(header) + " |", "|:--|" + "--:|" * (len(header) - 1)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
    plot = plot_relative(results, images / RELATIVE_PNG)
    if plot is not None:
        written.append(plot)
        lines += [f"![time relative to hand-written NumPy, per workload and implementation]"
                  f"({IMAGES}/{RELATIVE_PNG})", ""]
    lines += ["## Workloads", "", _demote(format_tables_markdown(results, quick=quick)).rstrip(), ""]
    for section in extra:
        if section.strip():
            lines += [_demote(section).rstrip(), ""]
    if checkpointing:
        lines += ["## Time and memory: checkpointing", "", _demote(checkpointing).rstrip(), ""]
        memory = plot_memory(memory_points(checkpointing), images / MEMORY_PNG)
        if memory is not None:
            written.append(memory)
            lines += [f"![time against peak memory of each checkpointing policy and peer]"
                      f"({IMAGES}/{MEMORY_PNG})", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return [path] + written
