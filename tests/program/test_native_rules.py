"""Every primitive of the rule table through the Numba backend: value and gradient equal to the Python
backend's, or a ``NativeFallbackWarning`` naming a primitive of the program.

Kept cheap (a Numba compilation costs 0.1-1 s, and each NumPy function Numba compiles again for each new
signature): each primitive runs one case of ``tests/rules/test_rule_table.py`` (its first case whose
float arguments are all arrays, else its first), and every case whose arguments are all Python floats
runs too. The cases are summed into one scalar loss (each output weighted by a fixed array, so that a
transposed or misplaced adjoint shows), and ``wg.compile(loss, backend="numba").value_and_grad`` over
every float argument is compared with the same on the Python backend. The cases whose generated code may
be native (``native_build.refusals``) run as one program, halved again and again where Numba falls back,
so that each fallback is pinned on one case; the others run one by one (no Numba compilation: they warn
at once). Cases that ``wg.compile`` itself refuses are left out (the Python backend is what is compared
against).
"""

import os
import re
import warnings

os.environ.setdefault("NUMBA_OPT", "0")  # a third of the compile time; no fast-math either way: same floats

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from tests.rules.test_rule_table import CASES
from wengert.api.tree import tree_flatten
from wengert.program.native_build import refusals

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    pytest.importorskip("numba")
    mp = pytest.MonkeyPatch()
    mp.setenv("WENGERT_CACHE_DIR", str(tmp_path_factory.mktemp("wengert-cache")))
    yield
    mp.undo()


def _floats(args):
    return [j for j, a in enumerate(args)
            if type(a) is float or (isinstance(a, np.ndarray) and a.dtype.kind == "f")]


def _weighted(out):
    """A scalar of every float output, each entry weighted differently."""
    total = 0.0
    for o in tree_flatten(out)[0]:
        kind = np.dtype(getattr(o, "dtype", type(o))).kind
        if kind == "c":
            o = wnp.real(o)
        elif kind != "f":
            continue
        shape = np.shape(o)
        w = np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape) if shape else 0.75
        total = total + wnp.sum(o * w)
    return total


def _loss(cases):
    """One loss over ``cases`` (``(function, argument count)``), of all their arguments in a row."""
    def loss(*flat):
        total, at = 0.0, 0
        for fun, n in cases:
            total = total + _weighted(fun(*flat[at:at + n]))
            at += n
        return total
    return loss


def _python_program(fun, args):
    """The Python backend's value-and-gradient program of one case, or None where wg.compile refuses."""
    argnums = tuple(_floats(args))
    if not argnums:
        return None
    try:
        cf = wg.compile(_loss([(fun, len(args))])).value_and_grad(argnums)
        cf(*args)
        return cf.program(*args)
    except Exception:  # noqa: BLE001 - a case wg.compile refuses has no Python program to compare with
        return None


def _chosen():
    """``[(label, primitive name, function, args, native by the facts)]``: the cases the sweep runs."""
    out = []
    for name in sorted(CASES):
        cases = CASES[name]
        arrays = [k for k, (_, args) in enumerate(cases)
                  if all(isinstance(args[j], np.ndarray) and args[j].ndim for j in _floats(args))]
        floats = [k for k, (_, args) in enumerate(cases) if all(type(a) is float for a in args)]
        for k in sorted(set(arrays[:1] or [0]) | set(floats)):
            fun, args = cases[k]
            program = _python_program(fun, args)
            if program is not None:
                native = not refusals(program)
                out.append((f"{name}-{k}", name, fun, args, native))
    return out


def _run(items):
    """Python and Numba values of the loss over ``items``; returns the fallback warnings' messages."""
    flat = [a for item in items for a in item[3]]
    argnums = tuple(_floats(flat))
    loss = _loss([(item[2], len(item[3])) for item in items])
    want = wg.compile(loss).value_and_grad(argnums)(*flat)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", wg.NativeFallbackWarning)
        got = wg.compile(loss, backend="numba").value_and_grad(argnums)(*flat)
    labels = ", ".join(item[0] for item in items)
    for g, w in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=f"numba != python on {labels}")
    return [str(w.message) for w in caught if issubclass(w.category, wg.NativeFallbackWarning)]


def _sweep(items, found):
    """Run ``items`` as one program; where it falls back, halve it until each fallback is one case's."""
    fell = _run(items)
    if not fell:
        for item in items:
            found[item[0]] = None
    elif len(items) == 1:
        found[items[0][0]] = fell
    else:
        _sweep(items[:len(items) // 2], found)
        _sweep(items[len(items) // 2:], found)


_RESULTS = {}


def _results():
    """label -> None (native, equal values) or the fallback warnings; computed once."""
    if not _RESULTS:
        chosen = _chosen()
        _sweep([item for item in chosen if item[4]], _RESULTS)
        for item in chosen:
            if not item[4]:
                _RESULTS[item[0]] = _run([item])
    return _RESULTS


def _labels(name):
    return sorted(label for label in _results() if label.rpartition("-")[0] == name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_primitive_runs_natively_or_warns(name):
    labels = _labels(name)
    if not labels:
        pytest.skip(f"wg.compile takes no case of {name}")
    for label in labels:
        fell = _RESULTS[label]
        if fell:
            assert len(fell) == 1, fell  # one warning per program
            said = (r"as Python, not native code: "
                    r"(primitive|the generated code's helper|Numba cannot compile|Numba promotes dtypes)")
            assert re.search(said, fell[0]), fell[0]


@pytest.mark.parametrize("name", ["add", "multiply", "true_divide", "sin", "exp", "log", "tanh", "square",
                                  "transpose", "concatenate", "cumsum", "clip", "maximum", "minimum", "max",
                                  "min", "where", "tie_select"])
def test_the_common_primitives_are_native(name):
    """The sweep can fail: these compile natively (a fallback here would hide behind the warning)."""
    assert [_RESULTS[label] for label in _labels(name)] == [None] * len(_labels(name))


def _per_example_loss(params, x, target):
    """One example's softmax cross-entropy through a tanh layer (its max: chooser_weights, batched)."""
    h = wnp.tanh(x @ params[0] + params[1])
    z = h @ params[2] + params[3]
    m = wnp.max(z)
    return m + wnp.log(wnp.sum(wnp.exp(z - m))) - wnp.sum(z * target)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_per_example_gradients_with_a_max_compile_natively(dtype):
    """wg.compile(wg.vmap(wg.grad(loss))) on Numba: the batched max's weights (chooser_weights over the
    example axes) run natively, equal to the Python backend's; logits with repeated maxima (zero weights)."""
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((6, 5)).astype(dtype), np.zeros(5, dtype), np.zeros((5, 4), dtype),
              np.zeros(4, dtype)]
    X = rng.standard_normal((3, 6)).astype(dtype)
    targets = np.eye(4, dtype=dtype)[[0, 3, 1]]
    per = wg.vmap(wg.grad(_per_example_loss), in_axes=(None, 0, 0))
    want = wg.compile(per)(params, X, targets)
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        got = wg.compile(per, backend="numba")(params, X, targets)
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)
