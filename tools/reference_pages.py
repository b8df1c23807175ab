"""Write the API reference pages, ``docs/reference/*.md``, from the public modules' ``__all__``.

``python tools/reference_pages.py`` rewrites them; ``tests/docs/test_site.py`` checks that the committed
pages are what this writes, so that every public name has its entry. Functions and classes are rendered
from their docstrings by mkdocstrings (``::: module.name``; classes with their constructor and their
public methods, inherited ones included). What mkdocstrings cannot render under a public path is written
here, from the live objects: the ``wengert.numpy`` functions (each with its signature, its docstring,
its kind and a link to NumPy's page), aliases (``wg.jacobian``), primitives made by a call
(``nn.relu``) and the object ``wg.compile`` returns.

Docstrings use Sphinx's roles (``:func:`hvp```, ``:class:`Tape```); :func:`links` turns each into a
cross-reference to the public path of what it names (``tools/griffe_roles.py`` applies it to the
docstrings mkdocstrings renders), or into plain code when that has no reference entry.
"""

import importlib
import inspect
import re
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
NUMPY_MODULES = {"wengert.numpy": "numpy", "wengert.numpy.linalg": "numpy.linalg",
                 "wengert.numpy.fft": "numpy.fft"}
COMPILED = "wengert.compile.result"
"""The anchor of the entry for what ``wg.compile`` returns (its class has no public name)."""
NUMPY_DOCS = "https://numpy.org/doc/stable/reference/generated/{}.html"


def _entries():
    """``{id(object): public path}`` for every object that has an entry in the reference: the
    names in the documented modules' ``__all__``, the public members of their classes (inherited
    ones included, as mkdocstrings renders them), the ``wengert.numpy`` functions and the compiled
    function's methods. The first public path of an object wins (``wengert.ExitError`` before
    ``wengert.errors.ExitError``)."""
    paths = {}

    def add(obj, path):
        if callable(obj) or isinstance(obj, property):
            paths.setdefault(id(obj), path)

    classes = []
    for module_name in [*PAGES, *NUMPY_MODULES]:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType):
                continue
            add(obj, f"{module_name}.{name}")
            if isinstance(obj, type) and module_name in PAGES:
                classes.append((obj, f"{module_name}.{name}"))
    from wengert.program.compiled import CompiledFunction

    classes.append((CompiledFunction, COMPILED))
    for cls, path in classes:
        for name, member in _members(cls):
            add(member, f"{path}.{name}")
    return paths


def _members(cls):
    """The public methods and properties of ``cls`` defined in wengert (its own first)."""
    seen = {}
    for base in cls.__mro__:
        if not base.__module__.startswith("wengert"):
            continue
        for name, member in vars(base).items():
            if not name.startswith("_") and name not in seen and (inspect.isfunction(member)
                                                                   or isinstance(member, property)):
                seen[name] = member
    return list(seen.items())


_PUBLIC = None


def public_path(obj):
    """The public path of ``obj``'s reference entry, or None."""
    global _PUBLIC
    if _PUBLIC is None:
        _PUBLIC = _entries()
    return _PUBLIC.get(id(obj))


_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|exc|obj|const):`(~?)([^`]+)`")


def _attribute_path(root, parts):
    for part in parts:
        try:
            root = getattr(root, part)
        except AttributeError:
            return None
    return root


def _lookup(target, module_name, class_name):
    """What ``target`` names, read as Sphinx would: from the class, the module, then absolutely."""
    parts = target.split(".")
    scopes = []
    if module_name:
        module = importlib.import_module(module_name)
        if class_name:
            scopes.append(_attribute_path(module, class_name.split(".")))
        scopes.append(module)
    scopes += [importlib.import_module(m) for m in ["wengert", *PAGES]]
    for scope in scopes:
        found = _attribute_path(scope, parts) if scope is not None else None
        if found is not None:
            return found
    for cut in range(len(parts) - 1, 0, -1):  # an absolute path: the longest module prefix
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        return _attribute_path(module, parts[cut:])
    return None


def links(text, module_name=None, class_name=None):
    """``text`` with each Sphinx role as a cross-reference (``[`hvp`][wengert.hvp]``) to the public
    entry of what it names, or as plain code where that has none; a role naming a public object by
    an internal path shows its public path."""

    def replace(match):
        tilde, target = match.groups()
        title = None
        if target.endswith(">") and "<" in target:
            title, target = (s.strip() for s in target[:-1].split("<", 1))
        obj = _lookup(target.lstrip("."), module_name, class_name)
        path = public_path(obj) if obj is not None else None
        if isinstance(obj, types.ModuleType) and obj.__name__ in [*PAGES, *NUMPY_MODULES, "wengert.scipy"]:
            return f"`{obj.__name__}`"
        shown = title or (target.rsplit(".", 1)[-1] if tilde else target)
        if path and shown.startswith("wengert."):
            shown = path
        if path and path.rsplit(".", 1)[0] in NUMPY_MODULES:  # an entry of the page written here
            return f"[`{shown}`](../numpy/#{path})"
        return f"[`{shown}`][{path}]" if path else f"`{shown}`"

    return _ROLE.sub(replace, text)


def _signature(name, obj, fallback=None):
    """``name(parameters)``; NumPy's where wengert's own takes ``*args, **kwargs``."""
    for candidate in (obj, fallback):
        if candidate is None:
            continue
        try:
            signature = inspect.signature(candidate, eval_str=True)
        except (TypeError, ValueError, NameError):
            try:
                signature = inspect.signature(candidate)
            except (TypeError, ValueError):
                continue
        kinds = {p.kind for p in signature.parameters.values()}
        if kinds == {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD} and candidate is obj:
            continue
        text = re.sub(r"<object object at 0x[0-9a-f]+>", "<unset>", f"{name}{signature}")
        text = re.sub(r"\bwengert\.(?:\w+\.)+(\w+)", r"\1", text)  # annotations: no internal module paths
        text = re.sub(r"(?<=[\[, ])~(?=[A-Za-z_])", "", text.replace("typing.", ""))  # ~P: a ParamSpec
        return text.removesuffix(" -> Any")  # the docstring says what it returns
    return f"{name}(...)"


def _doc(obj, module_name=None):
    doc = inspect.getdoc(obj) or ""
    module_name = module_name or getattr(obj, "__module__", None)
    return links(doc, module_name if module_name and module_name.startswith("wengert") else None)


def _entry(level, path, title, signature, doc, after=()):
    """A heading with anchor ``path``, a signature block and the docstring."""
    lines = [f"{'#' * level} `{title}` {{ #{path} }}", ""]
    if signature:
        lines += ["```python", signature, "```", ""]
    if doc:
        lines += [doc, ""]
    return lines + list(after)


def _earlier_name(module, name, obj):
    """The name before ``name`` in ``module.__all__`` of the same object, if any (an alias)."""
    for other in module.__all__[:module.__all__.index(name)]:
        if getattr(module, other) is obj:
            return other
    return None


def _manual(module_name, name, obj):
    """The entry of an alias or of a callable object that mkdocstrings sees as a bare attribute."""
    path = f"{module_name}.{name}"
    original = _earlier_name(importlib.import_module(module_name), name, obj)
    if original:
        original = f"{module_name}.{original}"
        return [f"## `{path}` {{ #{path} }}", "", f"Another name for [`{original}`][{original}].", ""]
    return _entry(2, path, path, _signature(name, obj), _doc(obj))


def _compiled_entry():
    """What ``wg.compile`` returns: its class is internal, its methods are what users call."""
    from wengert.program.compiled import CompiledFunction

    lines = [f"## The compiled function {{ #{COMPILED} }}", "",
             "What [`wengert.compile`][wengert.compile] returns: call it as the function itself "
             "(`compiled(*args)`); its methods show and derive what runs.", "",
             inspect.getdoc(CompiledFunction) and links(inspect.getdoc(CompiledFunction).replace(
                 "; see the module docs", ""), "wengert.program.compiled") or "", ""]
    for name, member in _members(CompiledFunction):
        target = member.fget if isinstance(member, property) else member
        signature = None if isinstance(member, property) else _signature(f"compiled.{name}", member)
        if signature:
            signature = signature.replace("(self, ", "(").replace("(self)", "()")
        lines += _entry(3, f"{COMPILED}.{name}", f"compiled.{name}", signature,
                        _doc(target, "wengert.program.compiled"))
    return lines


def _rendered_by_mkdocstrings(module, name, obj):
    """Whether mkdocstrings renders ``module.name`` under its public path: a class, or a function
    defined by a ``def`` of that name (not an alias, nor a function that a call made)."""
    if _earlier_name(module, name, obj):
        return False  # an alias
    if isinstance(obj, type):
        return True
    if not inspect.isfunction(obj) or "<locals>" in obj.__qualname__:
        return False
    home = importlib.import_module(obj.__module__)
    return _attribute_path(home, obj.__qualname__.split(".")) is obj


def _inherited(cls):
    """The rest of a class's directive: a subclass of a public class (``nn.Linear`` of ``nn.Module``)
    lists the methods it inherits from it as links to their entries there, instead of rendering each
    again on every subclass (the page of ``wengert.nn`` would hold ``Module``'s methods 40 times)."""
    if not isinstance(cls, type):
        return [""]
    base = next((b for b in cls.__mro__[1:] if public_path(b) and b.__module__.startswith("wengert")), None)
    if base is None:
        return [""]
    of_base = dict(_members(base))
    own = [n for n, m in _members(cls) if n not in vars(cls) and of_base.get(n) is not m]
    shared = [n for n, m in of_base.items() if dict(_members(cls)).get(n) is m]
    path = public_path(base)
    return ["    options:", f"      inherited_members: {own!r}".replace("'", '"'), "",
            f"Inherited from [`{path}`][{path}]: "
            + ", ".join(f"[`{n}`][{public_path(of_base[n]) or path + '.' + n}]" for n in shared) + ".", ""]


def documented(module_name):
    """The page of a module whose names are rendered from their docstrings."""
    module = importlib.import_module(module_name)
    lines = [f"# `{module_name}`", "", PAGES[module_name], ""]
    submodules = []
    for name in module.__all__:
        obj = getattr(module, name)
        if isinstance(obj, types.ModuleType):
            submodules.append(name)
        elif _rendered_by_mkdocstrings(module, name, obj):
            lines += [f"::: {module_name}.{name}", *_inherited(obj)]
        else:
            lines += _manual(module_name, name, obj)
        if module_name == "wengert" and name == "compile":
            lines += _compiled_entry()
    if submodules:
        lines += ["Submodules: " + ", ".join(f"`{module_name}.{s}`" for s in submodules) + ".", ""]
    return "\n".join(lines)


def _cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def _numpy_entry(module_name, namespace, name, obj, entry):
    """One ``wengert.numpy`` function: signature, docstring, kind and NumPy's page."""
    import numpy as np

    numpy_fun = _attribute_path(np, [*namespace.split(".")[1:], name])
    path = f"{module_name}.{name}"
    kind = entry.kind if entry else "wengert's own"
    is_numpys = numpy_fun is not None and obj is numpy_fun
    doc = (f"NumPy's own `{namespace}.{name}`, unchanged: it takes shapes or plain values, so its result "
           "carries no derivative." if is_numpys else _doc(obj, module_name))
    facts = [f"*{kind}*" + (f": {entry.note}" if entry and entry.note else "")]
    if entry and entry.alias_of:
        facts.append(f"another name for [`{entry.alias_of}`](#{module_name}.{entry.alias_of})")
    if numpy_fun is not None:
        facts.append(f"NumPy: [`{namespace}.{name}`]({NUMPY_DOCS.format(f'{namespace}.{name}')})")
    return _entry(3, path, name, _signature(name, obj, numpy_fun), doc, ["; ".join(facts) + ".", ""])


def numpy_page():
    """``wengert.numpy``, ``wengert.numpy.linalg`` and ``wengert.numpy.fft``: every name, by kind,
    then each function's entry."""
    from wengert.numpy import _classification as c

    lines = ["# `wengert.numpy`", "",
             "NumPy's namespace with derivatives. Each function takes NumPy's arguments and gives NumPy's "
             "values and errors; plain NumPy calls on traced values reach these. Every public name of "
             "NumPy, `numpy.linalg` and `numpy.fft` is classified: *differentiable*; *zero derivative "
             "almost everywhere* (with the reason); *integer-valued* (results that carry no derivative); "
             "or *not supported* (an error naming it, and saying what to write instead, when given a "
             "traced value). Each entry below gives the function's signature, what differs from NumPy "
             "(its docstring) and a link to NumPy's own page.", ""]
    for module_name, namespace in NUMPY_MODULES.items():
        module = importlib.import_module(module_name)
        classified = c.TABLE[namespace]
        rows, entries = [], []
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType):
                continue
            e = classified.get(name) or c.TABLE["wengert.numpy"].get(name)
            kind = e.kind if e else "wengert's own"
            rows.append(f"| [`{name}`](#{module_name}.{name}) | {kind} |")
            entries += _numpy_entry(module_name, namespace, name, obj, e)
        unsupported = sorted(n for n, e in classified.items() if e.kind == c.UNSUPPORTED
                             and n not in module.__all__)
        lines += [f"## `{module_name}` {{ #{module_name} }}", "", "| name | kind |", "|---|---|", *rows, ""]
        if unsupported:
            lines += [f"Not supported ({len(unsupported)}): " + ", ".join(f"`{n}`" for n in unsupported)
                      + ".", ""]
        lines += entries
    return "\n".join(lines)


def scipy_page():
    """``wengert.scipy``'s submodules: their names, with derivatives."""
    scipy = importlib.import_module("wengert.scipy")
    lines = ["# `wengert.scipy`", "",
             "SciPy's names and signatures with derivatives (both modes, any order unless a docstring "
             "says otherwise). Needs SciPy: `pip install scipy`.", ""]
    for sub in scipy.__all__:
        module = importlib.import_module(f"wengert.scipy.{sub}")
        lines += [f"## `wengert.scipy.{sub}`", ""]
        if module.__doc__:
            lines += [links(module.__doc__.strip().split("\n\n")[0].replace("\n", " ")), ""]
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
