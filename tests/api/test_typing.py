"""Types for users' type checkers: mypy (``--strict``) on a small typed user program sees the
transforms' results with the user function's parameters and result types (``reveal_type``), and
flags the wrong uses JAX's annotations flag (``argnums="x"``, a wrong argument to a transformed
function, ``nn.Linear("a", 3)``); the same for ``wg.compile``'s compiled functions (called, their
``.grad()``, ``.value_and_grad()``, ``.source()``, ``.cache_info()``), made directly, with
``static_argnums`` and by the decorator factory ``@wg.compile(static_argnames=...)``. wengert's own
modules are checked under ``--strict`` as they are for a user who installed it (errors hidden):
mypy 2.4 once crashed on one of them. One mypy run for the whole file (a few seconds)."""

import re
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# Each line ending in "# E" must get a mypy error; each reveal_type its expected type; nothing else.
PROGRAM = '''
from typing import Any

import numpy as np
import numpy.typing as npt

import wengert as wg
import wengert.nn as nn
import wengert.numpy as wnp

Array = npt.NDArray[np.float64]


def loss(w: Array, x: Array, scale: float) -> float:
    return np.sum((x @ w) ** 2) * scale


def loss_aux(w: Array, x: Array) -> tuple[float, str]:
    return float(np.sum(x @ w)), "aux"


def scaled(w: Array, n: int) -> Array:
    return w * n


@wg.compile(static_argnames="n")
def by_decorator(w: Array, n: int) -> Array:
    return w ** n


w: Array = np.ones(3)
x: Array = np.ones((2, 3))
reveal_type(wg.grad(loss))  # R: def (w: Array, x: Array, scale: float) -> Any
reveal_type(wg.grad(loss, argnums=(0, 1))(w, x, 2.0))  # R: tuple[Any, ...]
reveal_type(wg.grad(loss_aux, has_aux=True)(w, x))  # R: tuple[Any, str]
reveal_type(wg.value_and_grad(loss)(w, x, 2.0))  # R: tuple[float, Any]
reveal_type(wg.value_and_grad(loss_aux, has_aux=True)(w, x))  # R: tuple[tuple[float, str], Any]
reveal_type(wg.value_and_grad(loss, (0, 1))(w, x, 1.0))  # R: tuple[float, tuple[Any, ...]]
reveal_type(wg.vjp(loss, w, x, 1.0))  # R: tuple[float, def (Any) -> tuple[Any, ...]]
reveal_type(wg.vjp(loss_aux, w, x, has_aux=True))  # R: tuple[float, def (Any) -> tuple[Any, ...], str]
reveal_type(wg.jvp(loss, (w, x, 1.0), (w, x, 0.0)))  # R: tuple[float, Any]
reveal_type(wg.vmap(loss))  # R: def (w: Array, x: Array, scale: float) -> float
reveal_type(wg.jacrev(loss))  # R: def (w: Array, x: Array, scale: float) -> Any
reveal_type(wg.hessian(loss))  # R: def (w: Array, x: Array, scale: float) -> Any
reveal_type(wg.elementwise_grad(loss))  # R: def (w: Array, x: Array, scale: float) -> Any
reveal_type(wg.stop_gradient(w))  # R: Array
reveal_type(wg.tensor([1.0, 2.0], requires_grad=True))  # R: wengert.api.tensor.Tensor
reveal_type(nn.Linear(3, 2))  # R: wengert.nn.layers.Linear
cf = wg.compile(loss)
reveal_type(cf)  # R: CompiledFunction[[w: Array, x: Array, scale: float], float]
reveal_type(cf(w, x, 2.0))  # R: float
reveal_type(cf.grad())  # R: CompiledFunction[[w: Array, x: Array, scale: float], Any]
reveal_type(cf.grad((0, 1))(w, x, 2.0))  # R: tuple[Any, ...]
reveal_type(cf.value_and_grad()(w, x, 2.0))  # R: tuple[float, Any]
reveal_type(cf.value_and_grad([0, 1])(w, x, 2.0))  # R: tuple[float, tuple[Any, ...]]
reveal_type(cf.source(w, x, 2.0))  # R: str
reveal_type(cf.cache_info().hits)  # R: int
reveal_type(cf.cache_info().maxsize)  # R: int | None
reveal_type(wg.compile(cf)(w, x, 2.0))  # R: float
reveal_type(wg.compile(scaled, static_argnums=1, cache_size=None)(w, 3))  # R: Array
reveal_type(by_decorator(w, 3))  # R: Array
reveal_type(by_decorator.grad()(w, 3))  # R: Any
reveal_type(wg.compile(cache_size=8)(loss))  # R: CompiledFunction[[w: Array, x: Array, scale: float], float]
cf.cache_clear()
g: Any = wg.grad(loss, argnums=1)(w, x, 2.0)
g = wg.grad(loss, argnum=1)(w, x, 2.0)  # HIPS autograd's spelling
layer = nn.MLP([3, 4, 1], activation="tanh")
total: Any = wnp.sum(wnp.sin(w) * wnp.einsum("ij,j->i", x, w)) + wnp.linalg.norm(w)

wg.grad(loss, argnums="x")  # E
wg.grad(loss)(w, x)  # E
wg.grad(loss)(w, x, "2")  # E
wg.value_and_grad(loss, argnums=0.5)  # E
text: str = wg.value_and_grad(loss)(w, x, 2.0)[0]  # E
wg.jvp(loss, w, w)  # E
nn.Linear("a", 3)  # E
cf(w, x)  # E
cf(w, x, "2")  # E
wg.compile(loss)(w, x, scale="2")  # E
by_decorator(w, "3")  # E
cf.grad()(x)  # E
cf.grad(argnums="w")  # E
wg.compile(loss, static_argnums="x")  # E
wg.compile(loss, cache_size="64")  # E
wg.compile(static_argnums=0.5)  # E
words: str = cf(w, x, 2.0)  # E
count: str = cf.cache_info().misses  # E
'''


def test_mypy_sees_the_transforms_types_and_flags_wrong_uses(tmp_path):
    api = pytest.importorskip("mypy.api")
    source = textwrap.dedent(PROGRAM)
    (tmp_path / "user_program.py").write_text(source, encoding="utf-8")
    (tmp_path / "mypy.ini").write_text(
        f"[mypy]\nstrict = True\nmypy_path = {SRC}\ncache_dir = {tmp_path / 'cache'}\n"
        "[mypy-wengert.*]\nignore_errors = True\n", encoding="utf-8")
    out, err, _ = api.run(["--config-file", str(tmp_path / "mypy.ini"), "--no-error-summary",
                           "--hide-error-context", str(tmp_path / "user_program.py")])
    assert err == ""
    lines = source.splitlines()
    revealed, errors = {}, {}
    for message in out.splitlines():
        found = re.match(r".*user_program\.py:(\d+): (note|error): (.*)", message)
        assert found, message
        number, kind, text = int(found.group(1)), found.group(2), found.group(3)
        if kind == "note" and text.startswith("Revealed type is "):
            revealed[number] = text[len('Revealed type is "'):-1]
        elif kind == "error":
            errors.setdefault(number, []).append(text)
    expected_reveal = {i + 1: line.split("# R: ")[1] for i, line in enumerate(lines) if "# R: " in line}
    expected_errors = {i + 1 for i, line in enumerate(lines) if line.endswith("# E")}
    revealed = {n: t.replace("numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.float64]]", "Array")
                .replace("builtins.", "")
                .replace("wengert.program.compiled.", "") for n, t in revealed.items()}
    assert revealed == expected_reveal
    assert set(errors) == expected_errors, {n: (lines[n - 1], e) for n, e in errors.items()}
