"""Write the API reference pages, ``docs/reference/*.md``, from the public modules' ``__all__``.

``python tools/reference_pages.py`` rewrites them; ``tests/docs/test_site.py`` checks that the committed
pages are what this writes, so that every public name has its entry. Functions and classes are rendered
from their docstrings by mkdocstrings (``::: module.name``); the NumPy and SciPy namespaces, hundreds
of names with NumPy's and SciPy's own signatures, are listed in tables by how each is differentiated.
"""

import importlib
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = {
    "wengert": "Transforms, `Tensor`, `Tape`, programs, checkpointing and the extension API.",
    "wengert.nn": "Modules, layers, activations and losses, PyTorch's way and JAX's way.",
    "wengert.optim": "Optimizers and learning-rate schedules.",
    "wengert.checkpointing": "Checkpoint schedules: Griewank and Walther's binomial schedule and CTZ.",
    "wengert.testing": "Gradient checks against finite differences, in both modes, to any order.",
    "wengert.viz": "Pictures of the tape.",
    "wengert.misc": "HIPS autograd's `autograd.misc` paths: `flatten`, `flatten_func`, the optimizers.",
    "wengert.extend": "HIPS autograd's `autograd.extend`: primitives with autograd's rule conventions.",
    "wengert.errors": "Every exception and warning wengert raises at its users (see the errors guide).",
    "wengert.test_util": "HIPS autograd's `autograd.test_util` path: `check_grads` of `wengert.testing`.",
}


def documented(module_name):
    """The page of a module whose names are rendered from their docstrings."""
    module = importlib.import_module(module_name)
    lines = [f"# `{module_name}`", "", PAGES[module_name], ""]
    submodules = []
    for name in module.__all__:
        if isinstance(getattr(module, name), types.ModuleType):
            submodules.append(name)
            continue
        lines += [f"::: {module_name}.{name}", ""]
    if submodules:
        lines += ["Submodules: " + ", ".join(f"`{module_name}.{s}`" for s in submodules) + ".", ""]
    return "\n".join(lines)


def _table(rows):
    lines = ["| name | kind | note |", "|---|---|---|"]
    lines += [f"| `{name}` | {kind} | {note} |" for name, kind, note in rows]
    return lines


def numpy_page():
    """``wengert.numpy``, ``wengert.numpy.linalg`` and ``wengert.numpy.fft``: every name, by kind."""
    from wengert.numpy import _classification as c

    lines = ["# `wengert.numpy`", "",
             "NumPy's namespace with derivatives. Each function takes NumPy's arguments and gives NumPy's "
             "values and errors; plain NumPy calls on traced values reach these. Every public name of "
             "NumPy, `numpy.linalg` and `numpy.fft` is classified: *differentiable*; *zero derivative "
             "almost everywhere* (with the reason); *integer-valued* (results that carry no derivative); "
             "or *not supported* (an error naming it, and saying what to write instead, when given a "
             "traced value).", ""]
    for module_name, namespace in (("wengert.numpy", "numpy"), ("wengert.numpy.linalg", "numpy.linalg"),
                                   ("wengert.numpy.fft", "numpy.fft")):
        module = importlib.import_module(module_name)
        classified = c.TABLE[namespace]
        rows = []
        for name in module.__all__:
            e = classified.get(name) or c.TABLE["wengert.numpy"].get(name)
            kind = e.kind if e else ("module" if isinstance(getattr(module, name), types.ModuleType)
                                     else "wengert's own")
            note = (e.note if e else "").replace("|", "\\|")
            rows.append((name, kind, note))
        unsupported = sorted(n for n, e in classified.items() if e.kind == c.UNSUPPORTED
                             and n not in module.__all__)
        lines += [f"## `{module_name}`", "", *_table(rows), ""]
        if unsupported:
            lines += [f"Not supported ({len(unsupported)}): " + ", ".join(f"`{n}`" for n in unsupported)
                      + ".", ""]
    return "\n".join(lines)


def scipy_page():
    """``wengert.scipy``'s submodules: their names, with derivatives."""
    scipy = importlib.import_module("wengert.scipy")
    lines = ["# `wengert.scipy`", "",
             "SciPy's names and signatures with derivatives (both modes, any order unless a docstring "
             "says otherwise). Needs SciPy: `pip install \"wengert[scipy]\"`.", ""]
    for sub in scipy.__all__:
        module = importlib.import_module(f"wengert.scipy.{sub}")
        lines += [f"## `wengert.scipy.{sub}`", ""]
        if module.__doc__:
            lines += [module.__doc__.strip().split("\n\n")[0].replace("\n", " "), ""]
        lines += [", ".join(f"`{n}`" for n in module.__all__) + ".", ""]
    return "\n".join(lines)


def index_page():
    lines = ["# API reference", "",
             "Every public name, by module. Everything not listed here is internal and free to change.", ""]
    for module_name in [*PAGES, "wengert.numpy", "wengert.scipy"]:
        lines.append(f"- [`{module_name}`]({page_name(module_name)})")
    return "\n".join(lines) + "\n"


def page_name(module_name):
    return "wengert.md" if module_name == "wengert" else module_name.split(".", 1)[1] + ".md"


def pages():
    """{path relative to docs/reference: text}."""
    out = {page_name(m): documented(m) for m in PAGES}
    out["numpy.md"] = numpy_page()
    out["scipy.md"] = scipy_page()
    out["index.md"] = index_page()
    return out


def main():
    target = ROOT / "docs" / "reference"
    target.mkdir(parents=True, exist_ok=True)
    for name, text in pages().items():
        (target / name).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
