"""The gradient of ``f`` at a 1-d ``x`` by each engine that takes a plain function of one array:
shared by the tests that enumerate cases across engines (exits, lists)."""

import importlib.util
import sys
import tempfile

import numpy as np

import wengert as wg


def by_grad(f, x):
    return wg.grad(f)(x)


def by_jvp(f, x):
    return np.array([wg.jvp(f, (x,), (e,))[1] for e in np.eye(len(x))])


def by_tape(f, x):
    tape = wg.Tape()
    v = tape.var(x)
    return f(v).grad().wrt(v)


def by_tensor(f, x):
    t = wg.tensor(x, requires_grad=True)
    f(t).backward()
    return t.grad.value


def by_compile(f, x):
    return wg.compile(f).grad()(x)


def finite_differences(f, x, eps=1e-6):
    """Central differences of scalar ``f`` at ``x`` (any shape), in float64."""
    x = np.asarray(x, float)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


_SOURCE_MODULES = {}


def function_from_text(text, tag="case"):
    """The function ``f`` defined by the source ``text``, written to a file and imported as a module
    (``source_grad`` reads a function's source from its file); one module per distinct text."""
    if text not in _SOURCE_MODULES:
        path = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, dir=tempfile.gettempdir())
        with path:
            path.write("import numpy as np\n\n" + text)
        name = f"wengert_{tag}_{len(_SOURCE_MODULES)}"
        spec = importlib.util.spec_from_file_location(name, path.name)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _SOURCE_MODULES[text] = module.f
    return _SOURCE_MODULES[text]
