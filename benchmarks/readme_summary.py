"""The README's speed summary, written from the same run as ``docs/benchmarks.md``.

The README holds a few headline rows between two markers; a full ``make bench`` replaces the text
between them (``write``), so that the README and the benchmarks page never disagree. Each row gives
the median time per call of the hand-written code, wengert and each peer in that workload; the
fastest library in the row (hand-written code aside) is in bold, whoever it is. JAX's cell is its
jit time where the workload measured one, else its eager time, and says which.
"""

from pathlib import Path

from benchmarks.harness import _fmt_time

__all__ = ["HEADLINES", "rows", "render", "write", "START", "END"]

START = "<!-- speed summary: written by make bench; do not edit -->"
END = "<!-- end of speed summary -->"

HEADLINES = ("scalar-chain", "tiny-network", "mlp-float32", "hessian-rosenbrock", "per-example-grads",
             "cnn-lenet", "lstm-h128-seq100")
"""The workloads the README shows, in this order (those present in the run)."""

# column title -> the implementation keys that fill it, the first measured one winning
COLUMNS = (("hand-written", ("hand",)), ("wengert", ("wengert",)), ("PyTorch", ("torch",)),
           ("JAX", ("jit", "jax")), ("HIPS autograd", ("autograd",)))
_QUALIFIER = {"jit": "jit", "jax": "eager"}


def _cell(wres, keys):
    for key in keys:
        r = wres.get(key)
        if r is not None:
            return key, r.median
    return None, None


def rows(results):
    """``[(title, [(text, seconds or None), ...]), ...]`` for the headline workloads of ``results``."""
    by_name = {w.workload.name: w for w in results}
    out = []
    for name in HEADLINES:
        wres = by_name.get(name)
        if wres is None:
            continue
        cells = []
        for _title, keys in COLUMNS:
            key, seconds = _cell(wres, keys)
            note = wres.get(key).note if key is not None else ""
            text = _fmt_time(seconds) if seconds is not None else "–"
            if key in _QUALIFIER:
                text += f" ({_QUALIFIER[key]})"
            elif key == "torch" and "torch.func" in note:
                text += " (torch.func)"
            cells.append((text, seconds))
        out.append((wres.workload.title, cells))
    return out


def render(results, date):
    """The Markdown between the markers."""
    lines = [f"One run of `make bench` ({date}), single-threaded, median time per call; the fastest "
             "library in each row is in bold:", "",
             "| workload | " + " | ".join(title for title, _ in COLUMNS) + " |",
             "|:--|" + "--:|" * len(COLUMNS)]
    for title, cells in rows(results):
        timed = [s for (_, s) in cells[1:] if s is not None]
        best = min(timed) if timed else None
        texts = [cells[0][0]] + [f"**{t}**" if s is not None and s == best else t for t, s in cells[1:]]
        lines.append(f"| {title} | " + " | ".join(texts) + " |")
    return "\n".join(lines)


def write(readme, results, date):
    """Replace the text between the markers of ``readme``; returns the path, or None when the README
    has no markers (nothing is written then)."""
    readme = Path(readme)
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        return None
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(head + START + "\n" + render(results, date) + "\n" + END + tail, encoding="utf-8")
    return readme
