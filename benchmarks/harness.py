"""The harness: cross-check every implementation's gradients against the hand-written reference,
time the ones that pass interleaved round by round, and report medians as text and Markdown tables.
"""

import datetime
import gc
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from benchmarks.peers import PeerUnavailable, package_version

__all__ = [
    "IMPLEMENTATIONS", "Impl", "Target", "Workload", "ImplResult", "WorkloadResult", "cross_check",
    "run_workload", "format_text", "format_markdown", "format_tables_markdown", "evaluate_targets",
    "environment", "write_markdown", "METHOD",
]

# Implementation keys, in table order, with the labels printed for them.
IMPLEMENTATIONS = {
    "hand": "hand-written",
    "wengert": "wengert",
    "torch": "PyTorch eager",
    "jax": "JAX eager (no jit)",
    "autograd": "HIPS autograd",
    "tape": "wengert tape",  # wg.grad, where "wengert" is another route (compiled, from source)
    "jacfwd": "wengert jacfwd",  # benchmarks/batching.py: forward mode, where "wengert" is wg.jacrev
    "grad-loop": "wengert, a loop of wg.grad",  # per-example workloads: one example at a time
    "vjp": "wengert, one VJP",  # benchmarks/batching.py: the unit of the Jacobian's target
    "torch-loop": "PyTorch loop",  # benchmarks/batching.py: one example at a time
    "binomial": "wengert, iterate(binomial)",  # benchmarks/recurrent.py: checkpointed time steps
    "jit": "JAX jit",
    # benchmarks/native.py (and indexing.py's compiled loop): the derivative programs, and the floor
    "wg.compile": "wg.compile",
    "compile-numba": "wg.compile numba",
    "source": "wg.source_grad",
    "source-numba": "wg.source_grad numba",
    "numba": "hand-written Numba",
}


@dataclass
class Impl:
    """One implementation of a workload: ``run()`` is the timed call (forward and backward), and
    ``extract(run())`` turns its result into ``(value or None, [gradient, ...])`` as NumPy/floats."""

    run: Callable[[], Any]
    extract: Callable[[Any], tuple]
    reference: Callable[[], tuple] | None = None  # checked against this instead of the workload's
    ops: int | None = None  # recorded operations per call, when it differs from the workload's
    note: str = ""


@dataclass
class Target:
    """A performance target: wengert at least ``factor`` times faster than ``peer``
    (``kind="speedup"``), or at most ``factor`` times ``peer``'s time (``kind="within"``)."""

    text: str
    peer: str
    factor: float
    kind: str = "speedup"
    subject: str | None = None  # the implementation measured (default: the workload's subject)


@dataclass
class Workload:
    """A differentiation problem with a hand-written reference and implementation factories (a
    factory raises ``PeerUnavailable`` when its library is missing)."""

    name: str
    title: str
    params: tuple
    rtol: float
    reference: Callable[[], tuple]
    factories: dict
    rounds: int
    sample_s: float = 0.02  # calls are batched so one timed sample lasts about this long
    max_calls: int = 200
    ops: int | None = None  # recorded operations per call: times are also shown per operation
    targets: list = field(default_factory=list)
    description: str = ""
    subject: str = "wengert"  # the implementation in the "÷ wengert" column and the targets
    settle: int = 0  # untimed calls of an implementation before each of its timed batches (every one)


@dataclass
class ImplResult:
    key: str
    label: str
    status: str  # "ok", "FAILED", "not installed", "unavailable" or "n/a" (peers.NotApplicable)
    detail: str = ""
    note: str = ""
    ops: int | None = None
    calls: int = 0
    times: list = field(default_factory=list)  # seconds per call, one per round

    @property
    def median(self):
        return statistics.median(self.times) if self.times else None

    def per_op(self):
        """Median seconds per operation (or per call when the workload counts no operations)."""
        m = self.median
        return None if m is None else m / (self.ops or 1)

    @property
    def spread(self):
        """Interquartile range of the per-call times, relative to the median."""
        if len(self.times) < 4:
            return None
        q1, _, q3 = statistics.quantiles(self.times, n=4)
        return (q3 - q1) / self.median


@dataclass
class WorkloadResult:
    workload: Workload
    results: list
    rounds: int
    seconds: float = 0.0

    def get(self, key):
        for r in self.results:
            if r.key == key and r.status == "ok" and r.times:
                return r
        return None

    @property
    def failures(self):
        return [r for r in self.results if r.status == "FAILED"]


# -- cross-check ---------------------------------------------------------------------------------

def _compare(name, got, want, rtol):
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return f"{name}: shape {got.shape}, expected {want.shape}"
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    atol = rtol * max(scale, np.finfo(np.float64).tiny)
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        return f"{name}: max abs error {err:.3g} (largest |reference| {scale:.3g}, rtol {rtol:g})"
    return None


def cross_check(got, want, params, rtol):
    """Compare ``(value, grads)`` with the reference ``(value, grads)``; return a list of problems
    (empty when everything matches) and a list of notes (e.g. a gradient of another dtype)."""
    value, grads = got
    ref_value, ref_grads = want
    problems, notes = [], []
    grads, ref_grads = list(grads), list(ref_grads)
    if len(grads) != len(ref_grads):
        return [f"{len(grads)} gradients returned, expected {len(ref_grads)}"], notes
    if value is not None and ref_value is not None:
        problem = _compare("value", value, ref_value, rtol)
        if problem:
            problems.append(problem)
    for name, g, ref in zip(params, grads, ref_grads):
        problem = _compare(f"d/d{name}", g, ref, rtol)
        if problem:
            problems.append(problem)
        elif isinstance(ref, np.ndarray) and np.asarray(g).dtype != ref.dtype:
            notes.append(f"d/d{name} is {np.asarray(g).dtype}")
    return problems, notes


# -- running -------------------------------------------------------------------------------------

def _progress(message):
    print(message, file=sys.stderr, flush=True)


def _calibrate(run, sample_s, max_calls):
    """Seconds per call, from calls repeated until they fill ``sample_s`` (at least one call)."""
    gc.collect()
    calls = 0
    start = time.perf_counter()
    while True:
        run()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= sample_s or calls >= max_calls:
            return max(elapsed / calls, 1e-9)


def _prepare(workload, key, reference, progress):
    """Build, cross-check and calibrate one implementation; returns ``(ImplResult, Impl or None)``."""
    label = IMPLEMENTATIONS.get(key, key)
    result = ImplResult(key, label, "ok", ops=workload.ops)
    try:
        impl = workload.factories[key]()
    except PeerUnavailable as e:
        result.status = getattr(e, "status", None) or ("not installed" if str(e) == "not installed"
                                                       else "unavailable")
        result.detail = "" if result.status == "not installed" else str(e)
        return result, None
    except Exception as e:  # a factory builds (and may first call) its implementation: a failure
        result.status, result.detail = "FAILED", f"raised {type(e).__name__} while built: {e}"
        progress(f"  [{workload.name}] {label}: FAILED: {result.detail}")
        return result, None
    result.note = impl.note
    if impl.ops is not None:
        result.ops = impl.ops
    try:
        got = impl.extract(impl.run())
        want = impl.reference() if impl.reference is not None else reference
        problems, notes = cross_check(got, want, workload.params, workload.rtol)
    except Exception as e:  # an implementation that raises has failed, like one that is wrong
        problems, notes = [f"raised {type(e).__name__}: {e}"], []
    if notes:
        result.note = "; ".join(filter(None, [result.note] + notes))
    if problems:
        result.status = "FAILED"
        result.detail = "; ".join(problems)
        progress(f"  [{workload.name}] {label}: GRADIENT CHECK FAILED: {result.detail}")
        return result, None
    # The checked call was the warm-up (JAX compiles each primitive on first use); now size the batch.
    if workload.max_calls > 1:
        one = _calibrate(impl.run, workload.sample_s, workload.max_calls)
        result.calls = max(1, min(workload.max_calls, int(workload.sample_s / one)))
    else:
        result.calls = 1
    progress(f"  [{workload.name}] {label}: check ok, {result.calls} call(s) per sample")
    return result, impl


def run_workload(workload, impls=None, rounds=None, progress=_progress):
    """Cross-check, then time ``impls`` (keys of IMPLEMENTATIONS; default all) on ``workload``.

    Every round runs each implementation that passed its check once (a batch of calls), the order
    rotating from round to round; the reported figure is the median over rounds. A workload with
    ``settle`` runs that many untimed calls of the implementation before each timed batch.
    """
    started = time.perf_counter()
    rounds = workload.rounds if rounds is None else rounds
    keys = [k for k in IMPLEMENTATIONS if k in workload.factories and (impls is None or k in impls)]
    progress(f"[{workload.name}] {workload.title}")
    reference = workload.reference()
    prepared = [_prepare(workload, key, reference, progress) for key in keys]
    active = [(r, impl) for r, impl in prepared if impl is not None]
    for i in range(rounds):
        shift = i % len(active) if active else 0
        for result, impl in active[shift:] + active[:shift]:
            if result.status != "ok":
                continue
            run = impl.run
            gc.collect()
            try:
                for _ in range(workload.settle):  # what the previous implementation left is not charged
                    run()
                start = time.perf_counter()
                for _ in range(result.calls):
                    run()
            except Exception as e:  # passed its check, then raised: a failure, reported as such
                result.status, result.times = "FAILED", []
                result.detail = f"raised {type(e).__name__} while timed: {e}"
                progress(f"  [{workload.name}] {result.label}: FAILED: {result.detail}")
                continue
            result.times.append((time.perf_counter() - start) / result.calls)
    seconds = time.perf_counter() - started
    progress(f"[{workload.name}] done in {seconds:.1f} s")
    return WorkloadResult(workload, [r for r, _ in prepared], rounds, seconds)


# -- reporting -----------------------------------------------------------------------------------

def _fmt_time(seconds):
    if seconds is None:
        return "-"
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def _fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}x"


def evaluate_targets(wres):
    """``[(text, measured, verdict)]`` with verdict "MET", "NOT MET" or "N/A"."""
    out = []
    for t in wres.workload.targets:
        subject = t.subject or wres.workload.subject
        mine = IMPLEMENTATIONS.get(subject, subject)
        w = wres.get(subject)
        peer = wres.get(t.peer)
        if w is None or peer is None:
            missing = mine if w is None else IMPLEMENTATIONS.get(t.peer, t.peer)
            out.append((t.text, f"{missing} not measured", "N/A"))
            continue
        label = IMPLEMENTATIONS.get(t.peer, t.peer)
        if t.kind == "speedup":
            ratio = peer.per_op() / w.per_op()
            measured = f"{label} / {mine} = {ratio:.2f}x"
            met = ratio >= t.factor
        else:
            ratio = w.per_op() / peer.per_op()
            measured = f"{mine} / {label} = {ratio:.2f}x"
            met = ratio <= t.factor
        out.append((t.text, measured, "MET" if met else "NOT MET"))
    return out


_COLUMNS = ["implementation", "check", "median / run", "µs / op", "÷ wengert", "÷ hand-written",
            "IQR", "calls × rounds", "note"]


def _rows(wres):
    """The table's rows as lists of strings (columns as in ``_COLUMNS``, µs/op only with ops)."""
    base_w, base_h = wres.get(wres.workload.subject), wres.get("hand")
    rows = []
    for r in wres.results:
        check = r.status
        note = "; ".join(filter(None, [r.note, r.detail]))
        if r.status != "ok" or not r.times:
            rows.append([r.label, check, "-", "-", "-", "-", "-", "-", note])
            continue
        per_op = r.per_op()
        rows.append([
            r.label, check, _fmt_time(r.median),
            f"{per_op * 1e6:.3g}" if r.ops else "-",
            _fmt_ratio(per_op / base_w.per_op() if base_w else None),
            _fmt_ratio(per_op / base_h.per_op() if base_h else None),
            "-" if r.spread is None else f"{r.spread:.0%}",
            f"{r.calls} × {len(r.times)}", note,
        ])
    if not wres.workload.ops:
        rows = [row[:3] + row[4:] for row in rows]
    return rows


def _columns(wres):
    return _COLUMNS if wres.workload.ops else _COLUMNS[:3] + _COLUMNS[4:]


def _heading(wres):
    w = wres.workload
    return f"{w.title} — {wres.rounds} rounds, {wres.seconds:.0f} s"


_RATIO_NOTE = ("÷ wengert, ÷ hand-written: median time relative to that implementation's (above 1 "
               "is slower); {per}. IQR: interquartile range of the per-round times over the median.")


def _ratio_note(wres):
    per = "per operation" if wres.workload.ops else "per run"
    subject = wres.workload.subject
    label = IMPLEMENTATIONS.get(subject, subject)
    which = "" if subject == "wengert" else f" (÷ wengert: relative to {label})"
    return _RATIO_NOTE.format(per=f"compared {per}") + which


METHOD = (
    "Every implementation's value and gradients are first checked against the hand-written ones "
    "(np.allclose, rtol 1e-6 in float64, 1e-3 in float32, atol rtol × the largest reference entry); "
    "a mismatch is reported as a failed check and not timed. Then, in one process, each round runs "
    "every implementation once (a batch of calls sized to about the same duration, order rotating "
    "between rounds), and the table gives the median over rounds of the time per call. All run "
    "single-threaded, with the same formula in each library (logsumexp written with max). Each column "
    "means one thing in every table: \"JAX eager\" runs without jit and \"JAX jit\" with it; \"wengert "
    "tape\" is wg.grad recording a tape, where the \"wengert\" column is another route (a compiled "
    "program, a derivative from source, wg.vmap).")


def format_text(results, quick=False):
    """The tables and the targets as plain text."""
    lines = textwrap.wrap(METHOD, 110) + [""]
    for wres in results:
        header, rows = _columns(wres), _rows(wres)
        widths = [max(len(header[i]), *(len(row[i]) for row in rows)) for i in range(len(header))]
        lines.append(f"== {_heading(wres)}")
        if wres.workload.description:
            lines += textwrap.wrap(wres.workload.description, 106, initial_indent="   ",
                                   subsequent_indent="   ")
        fmt = lambda cells, widths=widths: "  ".join(
            c.ljust(wd) if i in (0, 1, len(cells) - 1) else c.rjust(wd)
            for i, (c, wd) in enumerate(zip(cells, widths))).rstrip()
        lines.append(fmt(header))
        lines.append(fmt(["-" * wd for wd in widths]))
        for row in rows:
            line = fmt(row)
            if row[1] == "FAILED":
                line = f"{line}   <<<<<<<< FAILED GRADIENT CHECK"
            lines.append(line)
        lines += textwrap.wrap(_ratio_note(wres), 106, initial_indent="   ", subsequent_indent="   ")
        lines.append("")
    lines.append("Targets" + (" — QUICK MODE: reduced sizes, not the real workloads"
                                               if quick else ""))
    for wres in results:
        for text, measured, verdict in evaluate_targets(wres):
            lines.append(f"  {'[' + verdict + ']':<10} {wres.workload.name}: {text}  ({measured})")
    failures = [(wres.workload.name, r.label) for wres in results for r in wres.failures]
    if failures:
        lines.append("")
        lines.append("GRADIENT CHECK FAILED: " + ", ".join(f"{w}/{label}" for w, label in failures))
    return "\n".join(lines)


def _md_cell(text):
    return text.replace("|", "\\|")


def format_markdown(results, env, quick=False):
    """The environment header, tables and targets as Markdown."""
    lines = ["# wengert benchmarks", ""]
    if quick:
        lines += ["**Quick mode: reduced sizes and rounds; not the full workloads.**", ""]
    for key, value in env.items():
        lines.append(f"- **{key}**: {value}")
    lines.append("- **rounds**: " + ", ".join(f"{w.workload.name} {w.rounds}" for w in results))
    lines += ["", METHOD, ""]
    return "\n".join(lines) + "\n" + format_tables_markdown(results, quick)


def format_tables_markdown(results, quick=False):
    """Each workload's table (a level-2 heading each) and the targets, as Markdown."""
    lines = []
    for wres in results:
        lines.append(f"## {_heading(wres)}")
        lines.append("")
        if wres.workload.description:
            lines += [wres.workload.description, ""]
        header = _columns(wres)
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join(":--" if i in (0, 1, len(header) - 1) else "--:"
                                    for i in range(len(header))) + "|")
        for row in _rows(wres):
            if row[1] == "FAILED":
                row = row[:1] + ["**FAILED**"] + row[2:]
            lines.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
        lines += ["", _ratio_note(wres), ""]
    lines += ["## Targets", "", "| workload | target | measured | verdict |",
              "|:--|:--|:--|:--|"]
    for wres in results:
        for text, measured, verdict in evaluate_targets(wres):
            lines.append(f"| {wres.workload.name} | {text} | {measured} | **{verdict}** |")
    failures = [f"{wres.workload.name} / {r.label}" for wres in results for r in wres.failures]
    if failures:
        lines += ["", "**GRADIENT CHECK FAILED**: " + ", ".join(failures)]
    lines.append("")
    return "\n".join(lines)


def write_markdown(path, text):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_revision():
    root = Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "src"], cwd=root,
                               capture_output=True, timeout=5).returncode != 0
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{rev} (src/ modified)" if dirty else rev


def _blas():
    try:
        deps = np.show_config(mode="dicts")["Build Dependencies"]
        return f"{deps['blas']['name']} {deps['blas'].get('version', '')}".strip()
    except Exception:  # the config layout differs between NumPy versions
        return "unknown"


def environment():
    """Facts for the report header (no peer library is imported)."""
    import wengert

    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cpus = f"{os.cpu_count()}" + (f" ({affinity} usable)" if affinity is not None else "")
    threads = ", ".join(f"{k}={os.environ.get(k, 'unset')}" for k in
                        ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))
    return {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "machine": f"{_cpu_model()}, {cpus} CPUs, {platform.system()} {platform.release()}",
        "OS": platform.platform(),
        "Python": platform.python_version(),
        "NumPy": f"{np.__version__} (BLAS: {_blas()})",
        "wengert": f"{wengert.__version__}, commit {_git_revision()}",
        "torch": package_version("torch"),
        "jax": f"{package_version('jax')} (jaxlib {package_version('jaxlib')})",
        "autograd": package_version("autograd"),
        "numba": package_version("numba"),
        "threads": f"{threads}; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}; torch.set_num_threads(1)",
    }
