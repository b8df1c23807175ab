"""Every exit of a traced value, with every engine: the derivative is kept, or the exit raises naming
this file and the line of the exit.

An *exit* is a way for a traced value to become something that cannot carry a derivative: a Python
number (float, int, complex, an index, ``.item()``, ``.tolist()``), a plain NumPy array
(``np.asarray``, a NumPy function given a list holding it, a store into a plain array). The table
below lists each exit with its outcome in each engine:

- ``KEPT``: the exit keeps the derivative (iteration, len, comparisons used for control flow,
  astype), checked against central finite differences;
- ``RAISES``: an error whose message names this file and the exit's line;
- ``DETACHES``: the eager tensor's ``item()``/``tolist()``/``float()``/``int()`` give plain numbers
  without derivative, as
  ``torch.Tensor.item`` does (the way to log a loss), and ``wg.tensor(t)`` copies it without its
  graph, as ``torch.tensor`` does; only there.
"""

import inspect
import os

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import by_compile as _by_compile
from tests.support.engines import by_grad as _by_grad
from tests.support.engines import by_jvp as _by_jvp
from tests.support.engines import by_tape as _by_tape
from tests.support.engines import by_tensor as _by_tensor
from wengert.core.exits import ExitError

KEPT, RAISES, DETACHES = "kept", "raises", "detaches"
X0 = np.array([1.3, 0.7, 2.1])


def store_float(x):
    buf = np.zeros(2)
    buf[0] = x[0] * x[1]  # exit
    return wnp.sum(buf)


def store_float32(x):
    buf = np.zeros(2, dtype=np.float32)
    buf[1] = x[0]  # exit
    return wnp.sum(buf * x[1])


def store_int(x):
    buf = np.zeros(2, dtype=int)
    buf[0] = x[0]  # exit
    return wnp.sum(buf * x[1])


def store_complex(x):
    buf = np.zeros(2, dtype=complex)
    buf[0] = x[0]  # exit
    return wnp.sum(wnp.real(buf) * x[1])


def store_slice(x):
    buf = np.zeros(3)
    buf[:2] = x[:2]  # exit
    return wnp.sum(buf)


def bool_branch(x):
    if x[0] > 1.0:  # exit
        return x[0] * x[1]
    return x[1]


# name -> (function, outcome in every engine, {engine: other outcome})
EXITS = {
    "float": (lambda x: float(x[0]) * x[1], RAISES, {"tensor": (DETACHES, lambda x: [0, x[0], 0])}),
    "int": (lambda x: int(x[0]) * x[1], RAISES, {"tensor": (DETACHES, lambda x: [0, int(x[0]), 0])}),
    "complex": (lambda x: complex(x[0]).real * x[1], RAISES, {}),
    "index": (lambda x: [1.0, 2.0, 3.0][x[0]] * x[1], RAISES, {}),
    "range": (lambda x: sum(x[1] for _ in range(x[0])), RAISES, {}),
    # eager tensors: the derivative with the number held constant, as PyTorch gives it
    "item": (lambda x: x[0].item() * x[1], RAISES, {"tensor": (DETACHES, lambda x: [0, x[0], 0])}),
    "item of a sum": (lambda x: x.sum().item() * x[0], RAISES,
                      {"tensor": (DETACHES, lambda x: [x.sum(), 0, 0])}),
    "tolist": (lambda x: x.tolist()[0] * x[1], RAISES, {"tensor": (DETACHES, lambda x: [0, x[0], 0])}),
    # wg.compile: its trace refuses these, then the source front end reads them (source/conversions.py)
    "np.asarray": (lambda x: np.asarray(x)[0] * x[1], RAISES, {"compile": KEPT}),
    # a new leaf from a traced value; from an eager tensor, a copy without its graph (torch.tensor)
    "wg.tensor(x)": (lambda x: wnp.sum(wg.tensor(x) * x), RAISES, {"tensor": (DETACHES, lambda x: x)}),
    "np.array of a list": (lambda x: np.array([x[0], x[1]])[0] * x[1], RAISES, {"compile": KEPT}),
    # wg.compile: its trace refuses these (naming the line), then builds the program from source
    "np.sum of a list": (lambda x: np.sum([1.0, x[0] * x[1]]), RAISES, {"compile": KEPT}),
    "np.mean of a list": (lambda x: np.mean([x[0], x[1]]), RAISES, {"compile": KEPT}),
    "store into a float array": (store_float, RAISES, {"compile": KEPT}),
    "store into a float32 array": (store_float32, RAISES, {"compile": KEPT}),
    "store into an int array": (store_int, RAISES, {"compile": KEPT}),
    "store into a complex array": (store_complex, RAISES, {"compile": KEPT}),
    "store into a slice": (store_slice, RAISES, {"compile": KEPT}),
    # comparisons carry no derivative, so Python control flow on them loses none (a program trace
    # cannot follow it: wg.compile builds the program from source, a conditional expression too)
    "bool of a comparison": (bool_branch, KEPT, {}),
    "bool": (lambda x: x[1] * 2.0 if x[0] else x[1], KEPT, {}),
    "iteration": (lambda x: sum(v * v for v in x), KEPT, {}),
    "list(x)": (lambda x: list(x)[2] * x[0], KEPT, {}),
    "len": (lambda x: len(x) * x[0] * x[1], KEPT, {}),
    # a step function: zero derivative almost everywhere, as np.floor (JAX and PyTorch agree)
    "astype(int)": (lambda x: wnp.sum(x.astype(int) * x), KEPT, {}),
    "astype(float32)": (lambda x: wnp.sum(x.astype(np.float32) * x), KEPT, {}),
    "astype(complex)": (lambda x: wnp.sum(wnp.real(x.astype(complex) ** 2)), KEPT, {}),
}


ENGINES = {"grad": _by_grad, "jvp": _by_jvp, "tape": _by_tape, "tensor": _by_tensor, "compile": _by_compile}
CASES = [(name, engine, others.get(engine, outcome))
         for name, (_, outcome, others) in EXITS.items() for engine in ENGINES]


def _finite_differences(f, x, eps=1e-6):
    return np.array([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(len(x))])


def _exit_line(fun):
    """The line of the exit in ``fun``: the one marked ``# exit``, else a lambda's only line."""
    lines, start = inspect.getsourcelines(fun)
    for i, line in enumerate(lines):
        if "# exit" in line:
            return start + i
    return fun.__code__.co_firstlineno


@pytest.mark.parametrize("name, engine, outcome", CASES, ids=[f"{n}-{e}" for n, e, _ in CASES])
def test_exit(name, engine, outcome):
    f = EXITS[name][0]
    run = ENGINES[engine]
    if outcome == KEPT:
        eps, tol = (1e-2, 1e-4) if "float32" in name else (1e-6, 1e-6)  # float32 rounds the steps
        np.testing.assert_allclose(run(f, X0.copy()), _finite_differences(f, X0, eps), rtol=tol, atol=tol)
    elif type(outcome) is tuple:  # DETACHES, and the derivative with the number held constant
        np.testing.assert_allclose(run(f, X0.copy()), outcome[1](X0), rtol=1e-12)
    else:
        with pytest.raises((TypeError, ValueError)) as info:
            run(f, X0.copy())
        error = info.value
        # NumPy restates an error raised while storing into a float array as its own ValueError
        # ("setting an array element with a sequence"), keeping ours as the cause it shows first
        message = str(error) + " " + str(error.__cause__ or "")
        where = f"{os.path.basename(__file__)}, line {_exit_line(f)}"
        assert where in message, message
        assert "would drop its derivative" in message or "not known while a program is traced" in message
        if engine in ("grad", "jvp"):  # the guard's own error, not NumPy's restatement
            assert isinstance(error, ExitError), repr(error)
        elif engine != "compile":  # a program trace refuses with its own TracingError
            assert isinstance(error, ExitError) or isinstance(error.__cause__, ExitError)


def test_messages_say_what_to_write_instead():
    def message(f):
        with pytest.raises((TypeError, ValueError)) as info:
            wg.grad(f)(X0.copy())
        return str(info.value) + " " + str(info.value.__cause__ or "")

    assert "float(wg.stop_gradient(x))" in message(EXITS["item"][0])
    assert "np.asarray(wg.stop_gradient(x)).tolist()" in message(EXITS["tolist"][0])
    assert "float(wg.stop_gradient(x))" in message(EXITS["float"][0])
    assert "wnp.sum(" in message(EXITS["np.sum of a list"][0])
    assert "wnp.mean(" in message(EXITS["np.mean of a list"][0])
    store = message(store_float)
    assert "wnp.stack" in store and "wnp.index_update" in store
    assert "wnp.array" in message(EXITS["np.array of a list"][0])


def test_item_in_a_transform_is_refused_not_detached():
    """``grad(lambda x: x.item() * x)(2.0)`` is 4 or an error -- never 2 (JAX errors too)."""
    with pytest.raises(TypeError, match=r"x\.item\(\).*test_exits\.py"):
        wg.grad(lambda x: x.item() * x)(2.0)
    with pytest.raises(TypeError, match="wg.jvp"):
        wg.jvp(lambda x: x.item() * x, (2.0,), (1.0,))


def test_eager_item_is_a_plain_number_as_in_pytorch():
    t = wg.tensor(2.0, requires_grad=True)
    y = t * t
    assert type(y.item()) is float and y.item() == 4.0
    assert wg.tensor(np.arange(3.0), requires_grad=True).tolist() == [0.0, 1.0, 2.0]


def test_stop_gradient_is_the_way_out():
    def f(x):
        scale = float(wg.stop_gradient(x[0]))
        return scale * x[0] + wnp.sum(np.asarray(wg.stop_gradient(x)).tolist() * x)

    np.testing.assert_allclose(wg.grad(f)(np.array([2.0, 3.0])), [2.0 + 2.0, 3.0])


def _tape_inside_grad(x):
    w = wg.Tape().var(1.0)
    return x * w  # exit


def _two_tapes(x):
    v, w = wg.Tape().var(x), wg.Tape().var(2.0)
    return v * w  # exit


def _var_of_a_traced_value(x):
    return wg.Tape().var(x)  # exit


@pytest.mark.parametrize("f, kind", [
    (_tape_inside_grad, "a value traced by a reverse-mode transform"),
    (_var_of_a_traced_value, "a value traced by a reverse-mode transform"),
], ids=["arithmetic", "tape.var"])
def test_tape_variable_meeting_a_grad_value_says_they_are_separate_engines(f, kind):
    with pytest.raises(TypeError) as info:
        wg.grad(f)(3.0)  # was 0.0 (arithmetic) or "float() of a traced value" (tape.var, then .wrt)
    message = str(info.value)
    assert kind in message and "separate" in message and f"test_exits.py, line {_exit_line(f)}" in message


def test_tape_variable_meeting_jvp_or_another_tape():
    with pytest.raises(TypeError, match="wg.jvp.*separate"):
        wg.jvp(_tape_inside_grad, (3.0,), (1.0,))
    with pytest.raises(TypeError, match=f"another wg.Tape at .*test_exits.py, line {_exit_line(_two_tapes)}"):
        _two_tapes(1.0)


def test_grad_of_a_tape_variable_still_nests():
    """A transform over Tape variables (the tape below it, as a closure or an argument) is nesting, not
    mixing: the gradient is itself recorded on the tape."""
    tape = wg.Tape()
    v = tape.var(3.0)
    g = wg.grad(lambda x: x * x * v)(v)  # 2 x v at x = v: 2 v**2, recorded on the tape
    assert g.value == 18.0 and g.grad().wrt(v) == 12.0


@pytest.mark.parametrize("engine", ["grad", "jvp", "tape", "tensor"])
def test_what_the_store_error_says_to_write_works(engine):
    def updated(x):
        buf = np.zeros(3)
        buf = wnp.index_update(buf, 0, x[0] * x[1])
        buf[1] = x[2] ** 2  # buf is traced now
        return wnp.sum(buf)

    def stacked(x):
        return wnp.sum(wnp.stack([x[i] ** 2 for i in range(3)]))

    for f in (updated, stacked):
        np.testing.assert_allclose(ENGINES[engine](f, X0.copy()), _finite_differences(f, X0), rtol=1e-6)


def test_tape_var_takes_an_eager_constant_but_not_a_tensor_that_requires_grad():
    tape = wg.Tape()
    v = tape.var(wg.tensor([1.0, 2.0]))
    np.testing.assert_allclose(wnp.sum(v * v).grad().wrt(v), [2.0, 4.0])
    with pytest.raises(TypeError, match="tape.var was given a tensor that requires grad at .*test_exits.py"):
        tape.var(wg.tensor(1.0, requires_grad=True))
