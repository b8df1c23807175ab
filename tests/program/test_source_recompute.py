"""The reverse sweep of a loop recomputes what is cheap and provably unchanged -- the induction
variable, reads ``x[i]`` of arrays the loop does not write -- stores scalars of a ``for`` over a known
range in a buffer of the trip count, and pushes the rest. Hostile programs (the array written later in
the body, after the loop, through a view; the index reassigned; nested, ``while``, ``break``/
``continue``, checkpointed loops; branches) are checked against the tape and finite differences, on
Python and on Numba, and a few against JAX."""

import re
import textwrap
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import finite_differences, function_from_text

R = np.random.default_rng(29)
V7 = R.normal(size=7)
M34 = R.normal(size=(3, 4))


def sum_squares(v):
    s = 0.0
    for i in range(len(v)):
        s += v[i] * v[i]
    return s


def product(v):
    p = 1.0
    for i in range(len(v)):
        p = p * (1.0 + 0.1 * v[i])
    return p


def written_later_in_the_body(v):
    w = v * 1.0
    s = 0.0
    for i in range(len(w)):
        s = s + w[i] * np.sin(w[i])
        w[i] = s * 0.5  # w changes inside the loop: w[i] is kept, not read again
        if i + 1 < len(w):
            w[i + 1] = w[i + 1] * s
    return s + np.sum(w * w)


def written_after_the_loop(v):
    w = v * 2.0
    s = 0.0
    for i in range(len(w)):
        s = s + np.sin(w[i]) * w[i]
    w[0] = s
    w[1:3] = w[1:3] * s
    w *= v
    return s + np.sum(w * w)


def view_written_after_the_loop(v):
    w = v * 1.0
    s = 0.0
    for i in range(len(w) - 1):
        s = s + w[i] * w[i + 1]
    u = w[1:4]
    u *= s  # writes w[1:4] through the view, after the loop read w (and the reverse sweep reads it)
    return s + np.sum(u * u)


def view_written_in_the_loop(v):
    w = v * 1.0
    s = 0.0
    for i in range(3):
        u = w[2:5]
        u[i] = s + v[i]  # w[2 + i] changes through the view; w[i] is read in later iterations
        s = s + w[i] * w[i]
    return s + np.sum(w * w)


def index_reassigned(v):
    s = 0.0
    for i in range(len(v) - 1):
        a = v[i]
        i = i + 1
        s = s + a * np.cos(v[i])
        i = len(v) - 1 - i
        s = s + v[i] * a
    return s


def stepped_ranges(v):
    s = 0.0
    for i in range(1, len(v), 2):
        s = s + v[i] * np.sin(v[i - 1])
    for j in range(len(v) - 1, 0, -3):
        s = s * v[j]
    return s


def nested(m):
    s = 0.0
    for i in range(m.shape[0]):
        row = m[i] * 2.0  # a fresh array each outer iteration, read by the inner loop
        for j in range(m.shape[1]):
            s = s + row[j] * np.sin(m[i, j]) * (i + 1.0)
    return s


def nested_writes_outer(v):
    y = v * 1.0
    s = 0.0
    for j in range(3):
        for i in range(len(y)):
            s = s + y[i] * np.cos(y[i])
        y[j] = s * 0.1  # the outer loop writes the array the inner one reads
    return s + np.sum(y)


def while_loops(v):
    s = 0.0
    k = 0
    while k < len(v) and s < 4.0:
        s = s + v[k] * v[k]
        k = k + 1
    t = 1.0
    while t < 3.0:
        t = t + v[2] * v[2] + 0.5  # v[2] read by every iteration: its index is not the loop's
    return s * t


def breaks_and_continues(v):
    s = 0.0
    for i in range(len(v)):
        if v[i] < -0.5:
            continue
        s = s + v[i] * np.exp(0.1 * v[i])
        if s > 1.5:
            break
    return s


def branches(v):
    s = 0.0
    for i in range(len(v) - 1):
        if v[i] > 0.0:
            t = v[i] * v[i + 1]
            s = s + t * t
        else:
            s = s - np.sin(v[i + 1]) * v[i]
    return s


def over_the_array(v):
    s = 1.0
    for x in v:
        s = s * 0.5 + x * np.tanh(x)
    return s


def checkpointed(v):
    s = 0.0
    for i in wg.checkpointed(range(len(v)), "binomial", snapshots=2):
        for j in range(i + 1):
            s = s + v[j] * np.sin(v[i] * s)
    return s


PROGRAMS = [sum_squares, product, written_later_in_the_body, written_after_the_loop,
            view_written_after_the_loop, index_reassigned, stepped_ranges,
            nested, nested_writes_outer, while_loops, breaks_and_continues, branches, over_the_array,
            checkpointed]


def _arg(f):
    return M34 if f is nested else V7


def _check(f, d, x):
    np.testing.assert_allclose(d(x), wg.grad(f)(x), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(d(x), finite_differences(f, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_gradient_equals_the_tapes_and_finite_differences(f):
    x = _arg(f)
    _check(f, wg.source_grad(f), x)
    if f not in (checkpointed, while_loops, breaks_and_continues):  # binomial: known trip counts only
        _check(f, wg.source_grad(f, checkpoint="binomial"), x)
    _check(f, wg.source_grad(f, checkpoint="ctz"), x)


NOT_NATIVE = ()
"""Programs whose gradient runs as Python on Numba: none (the scatter-adds of the three whose reverse
sweeps add into an array, ``untake`` and ``np.add.at``, have Numba versions)."""


@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_gradient_on_numba_equals_python(f, tmp_path, monkeypatch):
    numba = pytest.importorskip("numba")
    monkeypatch.setenv("WENGERT_CACHE_DIR", str(tmp_path))
    x = _arg(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if f in NOT_NATIVE else "error", wg.NativeFallbackWarning)
        d = wg.source_grad(f, backend="numba")
        np.testing.assert_allclose(d(x), wg.source_grad(f)(x), rtol=1e-13, atol=1e-14)
    _check(f, d, x)
    function = d.program(x).function
    assert isinstance(function, numba.core.dispatcher.Dispatcher) is (f not in NOT_NATIVE)


def test_a_view_written_in_the_loop_while_the_loop_reads_its_base_is_refused():
    # NumPy would change w[2 + i] under the loop's reads of w: the front end refuses, naming both
    with pytest.raises(wg.TransformError, match=r"line \d+ \(in view_written_in_the_loop\): an in-place "
                                                r"write into 'u', while 'w' shares its memory"):
        wg.source_grad(view_written_in_the_loop)(V7)


def _reverse_loop(text):
    """The body of the first reverse loop of a derivative program."""
    lines = text.split("\n")
    header = re.compile(r"\s+for \w+ in range\(n\w* - 1, -1, -1\):")
    at = next(k for k, line in enumerate(lines) if header.match(line))
    depth = len(lines[at]) - len(lines[at].lstrip())
    body = []
    for line in lines[at + 1:]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        body.append(line.strip())
    return body


def test_the_index_and_the_reads_are_recomputed_not_pushed():
    text = wg.source_grad(sum_squares).program(V7).source
    assert "stack" not in text and "saved" not in text
    body = _reverse_loop(text)
    assert re.search(r"for i in range\(n - 1, -1, -1\):", text)
    assert any(re.fullmatch(r"\w+ = v\[i\]", line) for line in body)


def test_scalars_of_a_known_range_are_stored_in_a_buffer_of_the_trip_count():
    d = wg.source_grad(product)
    text = d.program(V7).source
    assert "stack" not in text
    assert re.search(r"p\w*_saved = \[None\] \* 7", text)
    assert re.search(r"p\w*_saved\[n\] = p", text)
    assert any(re.fullmatch(r"p\w* = p\w*_saved\[i\]", line) for line in _reverse_loop(text))


def test_numba_stores_in_arrays():
    pytest.importorskip("numba")
    from wengert.program.source.codegen import block_source

    g = wg.source_grad(product).program(V7)
    text = block_source(g.name, g.inputs, g.nodes, g.outputs, stack=g.stack, native=True)[0]
    assert re.search(r"p\w*_saved = np\.empty\(7\)", text)


def test_what_the_loop_writes_is_kept_not_read_again():
    text = wg.source_grad(written_later_in_the_body).program(V7).source
    assert "stack.append(" in text or "_saved[n] = " in text
    body = _reverse_loop(text)
    assert not any(re.fullmatch(r"\w+ = w\d*\[i\]", line) for line in body)  # w is a loop-carried array


def test_a_while_loop_pushes_what_depends_on_its_carried_index():
    text = wg.source_grad(while_loops).program(V7).source
    assert "stack.append(" in text  # v[k], k carried: not recomputable


def test_a_range_with_a_start_and_a_step_computes_the_index_from_the_position():
    text = wg.source_grad(stepped_ranges).program(V7).source
    assert re.search(r"for k\w* in range\(n\w* - 1, -1, -1\):", text)
    assert re.search(r"i = 1 \+ \w+", text) or re.search(r"i = k\w* \* 2", text)


def test_jax_agrees_on_loops_with_reads_and_stored_carries():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jax_stepped(v):
        s = 0.0
        for i in range(1, v.shape[0], 2):
            s = s + v[i] * jnp.sin(v[i - 1])
        for j in range(v.shape[0] - 1, 0, -3):
            s = s * v[j]
        return s

    def jax_branches(v):
        s = 0.0
        for i in range(v.shape[0] - 1):
            s = jnp.where(v[i] > 0.0, s + (v[i] * v[i + 1]) ** 2, s - jnp.sin(v[i + 1]) * v[i])
        return s

    for ours, theirs in ((stepped_ranges, jax_stepped), (branches, jax_branches), (product, None)):
        if theirs is None:
            def theirs(v):
                return jax.lax.fori_loop(0, v.shape[0], lambda i, p: p * (1.0 + 0.1 * v[i]), 1.0)
        np.testing.assert_allclose(wg.source_grad(ours)(V7), np.asarray(jax.grad(theirs)(jnp.asarray(V7))),
                                   rtol=1e-12)


# -- random loop programs ---------------------------------------------------------------------------

def _function(text):
    """The function ``f`` of the source ``text``, from a file (source_grad reads the source)."""
    return function_from_text(text, "recompute_case")


_READS = ["v[i]", "v[i - 1]", "v[0]", "v[{n} - 1 - i]", "w[i]", "w[i - 1]", "u[i]", "s"]
_UNARY = ["np.sin({})", "np.cos({})", "({} * {})", "({} + 0.5)", "np.tanh({})"]


@st.composite
def loop_programs(draw):
    """A loop over range(1, n) (sometimes stepped or nested in a second loop) mixing reads of the
    argument, of an array the loop writes (w), of one written after the loop (u), a carried scalar,
    branches, break and continue."""
    n = 6
    lines = ["def f(v):", "    w = v * 1.5", "    u = np.cos(v)", "    s = 0.1"]
    step = draw(st.sampled_from([1, 2]))
    outer = draw(st.booleans())
    pad = "    "
    if outer:
        lines.append(f"{pad}for r in range(2):")
        pad += "    "
    lines.append(f"{pad}for i in range(1, {n}, {step}):")
    pad += "    "
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["update", "write", "branch", "reassign", "continue", "break"]))
        a = draw(st.sampled_from(_READS)).format(n=n)
        b = draw(st.sampled_from(_READS)).format(n=n)
        op = draw(st.sampled_from(_UNARY)).format(a, b)
        if kind == "update":
            lines.append(f"{pad}s = s * 0.9 + {op} * {b}")
        elif kind == "write":
            lines.append(f"{pad}w[{draw(st.sampled_from(['i', 'i - 1', '0']))}] = {op}")
        elif kind == "branch":
            lines += [f"{pad}if {a} > 0.0:", f"{pad}    s = s + {op}", f"{pad}else:", f"{pad}    s = s - {b}"]
        elif kind == "reassign":
            lines.append(f"{pad}i = {n} - 1 - i")
        elif kind == "continue":
            lines += [f"{pad}if {a} < -1.0:", f"{pad}    continue"]
        else:
            lines += [f"{pad}if s > 3.0:", f"{pad}    break"]
    lines.append("    u[2] = s")
    lines.append("    return s + np.sum(w * u)")
    return "\n".join(lines) + "\n"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=loop_programs(), seed=st.integers(0, 2**16))
def test_random_loop_programs_match_the_tape(text, seed):
    f = _function(text)
    v = np.random.default_rng(seed).normal(size=6)
    expected = wg.grad(f)(v)
    np.testing.assert_allclose(wg.source_grad(f)(v), expected, rtol=1e-10, atol=1e-10, err_msg=text)


def test_random_programs_cover_reads_that_are_recomputed_and_kept():
    # the generator reaches both outcomes: a read of v recomputed, a read of w (written) kept
    f = _function(textwrap.dedent("""\
        def f(v):
            w = v * 1.5
            s = 0.1
            for i in range(1, 6, 1):
                s = s * 0.9 + np.sin(v[i]) * w[i]
                w[i - 1] = s
            return s + np.sum(w)
        """))
    text = wg.source_grad(f).program(V7[:6]).source
    body = _reverse_loop(text)
    assert any(re.fullmatch(r"\w+ = v\[i\]", line) for line in body)
    assert not any(re.fullmatch(r"\w+ = w\d*\[i\]", line) for line in body)
    np.testing.assert_allclose(wg.source_grad(f)(V7[:6]), wg.grad(f)(V7[:6]), rtol=1e-12)


def test_wnp_names_work_the_same():
    def f(v):
        s = 0.0
        for i in range(len(v)):
            s = s + wnp.sin(v[i]) * v[i]
        return s

    np.testing.assert_allclose(wg.source_grad(f)(V7), wg.grad(f)(V7), rtol=1e-13)
