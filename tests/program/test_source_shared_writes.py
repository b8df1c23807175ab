"""The source front end gives each name its own value; NumPy's in-place writes change every name that
shares the array's memory. A write into a name while another name that the function may still read
shares its memory (the same array, a view, the array viewed, a view of the same array, also across an
inline call) is refused with the line; writes that no other live name can see are differentiated."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.engines.test_views_after_writes import base_then_view, siblings
from tests.support.engines import finite_differences as _fd
from wengert.program.source.control import TransformError

V = np.array([0.5, -1.0, 2.0, 0.25, 1.5, -0.75])


def view_then_base(v):
    y = v * 1.5
    w = y[1:4]
    w += wnp.sin(v[0] * v[5])
    return wnp.sum(y * y)


def alias_then_base(v):
    y = v * 1.5
    w = y
    w *= v
    return wnp.sum(y)


def _bump(buf, v):
    buf[0] = v[2] * 3.0
    return v[0]


def argument_of_a_call(v):
    y = v * 1.5
    _bump(y, v)
    return wnp.sum(y * y)


def in_a_loop(v):
    y = v * 1.0
    for _ in range(3):
        w = y[1:3]
        w *= v[:2]
    return wnp.sum(y * y)


@pytest.mark.parametrize("f,other", [(view_then_base, "'y' shares its memory"),
                                     (alias_then_base, "'y' names the same array"),
                                     (base_then_view, "'w' shares its memory"),
                                     (siblings, "'b' shares its memory"),
                                     (argument_of_a_call, r"'y \(in argument_of_a_call\)' names the same"),
                                     (in_a_loop, "'y' shares its memory")])
def test_a_write_another_live_name_would_see_is_refused_with_its_line(f, other):
    with pytest.raises(TransformError,
                       match=rf"line \d+ \(in \w+\): an in-place write into '\w+', while {other}"):
        wg.source_grad(f)(V.copy())


def _step(s, v):
    s -= 0.1 * s * v  # the caller rebinds its name to the result: no stale name remains
    return s


def rebinding_helper(v):
    y = v * 1.0
    for _ in range(3):
        y = _step(y, v)
    return wnp.sum(y * y)


def view_of_a_dead_temporary(v):
    m = wnp.reshape(v * 2.0, (2, 3))
    m -= 1.0
    m[1] *= v[:3]
    return wnp.sum(m * m)


def view_read_alone(v):
    y = v * 1.5
    w = y[1:4]
    w += v[:3] ** 2
    return wnp.sum(w * w)


def base_written_directly(v):
    y = v * 1.5
    y[1:4] += wnp.sin(v[0] * v[5])
    y[::2] *= v[1::2]
    return wnp.sum(y * y)


@pytest.mark.parametrize("f", [rebinding_helper, view_of_a_dead_temporary, view_read_alone,
                               base_written_directly])
def test_writes_no_other_live_name_sees_are_differentiated(f):
    want = _fd(f, V.copy())
    assert np.allclose(wg.source_grad(f)(V.copy()), want, atol=1e-6)
    assert np.allclose(wg.grad(f)(V.copy()), want, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(start=st.integers(0, 3), stop=st.integers(4, 6), scale=st.floats(-2, 2),
       read_base=st.booleans(), op=st.sampled_from(["+=", "*=", "-="]))
def test_source_grad_is_right_or_refused_never_wrong(start, stop, scale, read_base, op):
    src = (f"def f(v):\n    y = v * 1.5\n    w = y[{start}:{stop}]\n"
           f"    w {op} v[:{stop - start}] * {scale!r}\n"
           f"    return wnp.sum({'y * y' if read_base else 'w * w'})\n")
    scope = {"wnp": wnp}
    import linecache
    name = f"<shared-write-{start}-{stop}-{op}-{read_base}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    exec(compile(src, name, "exec"), scope)  # noqa: S102 - a generated test program
    f = scope["f"]
    want = _fd(f, V.copy())
    try:
        got = wg.source_grad(f)(V.copy())
    except TransformError as e:
        assert read_base and "in-place write into 'w'" in str(e)
        return
    assert not read_base
    assert np.allclose(got, want, atol=1e-6)
