"""Checkpointed loops in derivative programs built from source (``source_grad(f, checkpoint=...)``):
the gradients equal the store-all ones, the programs run on their own, the numbers of step
evaluations and of states kept are the schedules' (``wengert.checkpointing``), and bad requests
name the loop."""

import inspect
import re
import sys

import numpy as np
import pytest

import wengert as wg
from tests.support import source_programs as sp
from wengert.checkpointing import binomial, ctz

R = np.random.default_rng(11)
V6 = R.normal(size=6)

# loops whose trip count is known only at run time: binomial refuses them
RUN_TIME = {sp.break_loop, sp.while_data_exit, sp.while_counter, sp.while_break, sp.newton_sqrt,
            sp.triangular_loops, sp.while_in_for_with_and, sp.break_at_once, sp.while_cont_break,
            sp.while_array_exit}

LOOPS = [entry for entry in sp.PROGRAMS if "for " in inspect.getsource(entry[0])
         or "while " in inspect.getsource(entry[0])]
LOOPS += [(sp.sine_map, (V6, 9), 0), (sp.sine_map, (V6, 1), 0), (sp.while_array_exit, (np.abs(V6),), 0),
          (sp.stepped_range, (R.normal(size=9),), 0),
          (sp.sine_map, (V6, 0), 0), (sp.while_data_exit, (11.0,), 0)]  # loops that never run


def _grads(g, argnums):
    return tuple(g) if isinstance(argnums, tuple) else (g,)


@pytest.mark.parametrize("policy,snapshots", [("binomial", None), ("binomial", 1), ("ctz", None)])
@pytest.mark.parametrize("fun,args,argnums", LOOPS,
                         ids=[f"{f.__name__}-{k}" for k, (f, _a, _n) in enumerate(LOOPS)])
def test_checkpointed_gradients_equal_store_all(fun, args, argnums, policy, snapshots):
    d = wg.source_grad(fun, argnums, checkpoint=policy, snapshots=snapshots)
    if policy == "binomial" and fun in RUN_TIME:
        with pytest.raises(wg.TransformError, match="known only at run time"):
            d(*args)
        return
    expected = _grads(wg.source_grad(fun, argnums)(*args), argnums)
    got = _grads(d(*args), argnums)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    if fun is sp.sine_map and args[1] == 0:  # range(0) is known when reading: no loop is generated
        assert "for action" not in d.source
    else:
        assert re.search(r"for action\d*, p\d*, k\d*, slot\d* in", d.source)  # the reverse follows a schedule


def _standalone(src, name):
    assert "wengert" not in src
    namespace = {}
    exec(compile(src, f"<checkpointed {name}>", "exec"), namespace)  # noqa: S102 - the point
    return namespace[name]


@pytest.mark.parametrize("fun,args,policy", [(sp.sine_map, (V6, 13), "binomial"),
                                             (sp.sine_map, (V6, 13), "ctz"),
                                             (sp.nested_with_row_state, (sp.M34,), "binomial"),
                                             (sp.while_array_exit, (np.abs(V6),), "ctz"),
                                             (sp.while_in_for_with_and, (sp.V8, 1.2), "ctz")])
def test_generated_source_runs_on_its_own(fun, args, policy):
    d = wg.source_grad(fun, checkpoint=policy)
    expected = d(*args)
    f = _standalone(d.source, f"{fun.__name__}_grad")
    flat = [a for a in args if not isinstance(a, int)]
    np.testing.assert_allclose(f(*flat), expected, rtol=0, atol=0)
    # and it is the gradient: central differences on the function itself
    x = np.asarray(args[0], dtype=float)
    fd = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        h = np.zeros(x.shape)
        h[idx] = 1e-6
        fd[idx] = (fun(x + h, *args[1:]) - fun(x - h, *args[1:])) / 2e-6
    np.testing.assert_allclose(expected, fd, rtol=1e-5, atol=1e-6)


class _Counter:
    """Counts, by sys.settrace, the executions of the generated lines that contain given texts, and
    the largest length of the list ``snaps``."""

    def __init__(self, filename, src, texts):
        self.filename = filename
        self.lines = {t: {k + 1 for k, line in enumerate(src.splitlines()) if t in line} for t in texts}
        self.hits = dict.fromkeys(texts, 0)
        self.peak = 0

    def __call__(self, frame, event, arg):
        if frame.f_code.co_filename != self.filename:
            return None
        if event == "line":
            for t, lines in self.lines.items():
                if frame.f_lineno in lines:
                    self.hits[t] += 1
            self.peak = max(self.peak, len(frame.f_locals.get("snaps", ())))
        return self


@pytest.mark.parametrize("policy,snapshots",
                         [("binomial", 5), ("binomial", None), ("binomial", 1), ("ctz", None)])
def test_step_evaluations_and_states_kept_are_the_schedules(policy, snapshots):
    n = 100
    d = wg.source_grad(sp.sine_map, checkpoint=policy, snapshots=snapshots)
    x = R.normal(size=4)
    expected = d(x, n)
    src = d.source
    filename = f"<counted {policy}>"
    namespace = {}
    exec(compile(src, filename, "exec"), namespace)  # noqa: S102
    counter = _Counter(filename, src, ["np_sin(", "np_cos(", "stack.append"])
    sys.settrace(counter)
    try:
        got = namespace["sine_map_grad"](x)
    finally:
        sys.settrace(None)
    np.testing.assert_allclose(got, expected, rtol=0, atol=0)
    sched = binomial(n, snapshots) if policy == "binomial" else ctz(n)
    # the forward loop runs all n steps (the function's value needs x_n), the reverse sweep re-runs the
    # schedule's recomputations: schedule.advances + 1 unrecorded evaluations (step n-1 once more
    # than the schedule, whose forward sweep stops at x_(n-1)) ...
    assert counter.hits["np_sin("] == sched.advances + 1 == n + sched.recomputations
    # ... and each step once more, recorded, for its adjoint (cos is sin's derivative)
    assert counter.hits["np_cos("] == n
    assert counter.hits["stack.append"] == 0  # no iteration is stored
    # the states kept: the schedule's snapshots, and x_(n-1) where the reverse sweep starts
    last_is_snapshot = policy == "ctz" or any(a.kind == "snapshot" and a.position == n - 1
                                              for a in sched[:sched.first_reverse()])
    assert counter.peak == sched.peak_snapshots + (0 if last_is_snapshot else 1)
    if policy == "ctz" or snapshots is not None:
        assert counter.peak <= (snapshots or int(np.log2(n)) + 2) + 1


def test_more_snapshots_than_steps():
    got = wg.source_grad(sp.sine_map, checkpoint="binomial", snapshots=50)(V6, 5)
    np.testing.assert_allclose(got, wg.source_grad(sp.sine_map)(V6, 5), rtol=1e-12, atol=1e-12)


def test_store_all_keeps_one_entry_per_iteration():
    """The baseline the schedules improve on: the stack grows with the trip count."""
    src = wg.source_grad(sp.sine_map).program(V6, 50).source
    assert "stack.append" in src and "snaps" not in src


def _line_of(fun, text):
    lines, start = inspect.getsourcelines(fun)
    return start + next(k for k, line in enumerate(lines) if text in line)


def test_binomial_on_a_while_loop_names_the_loop():
    line = _line_of(sp.while_data_exit, "while ")
    with pytest.raises(wg.TransformError, match=rf"while loop at .*source_programs\.py, line {line} .*ctz"):
        wg.source_grad(sp.while_data_exit, checkpoint="binomial")(1.5)


def test_binomial_on_a_loop_left_by_break_names_the_loop():
    line = _line_of(sp.break_loop, "for ")
    with pytest.raises(wg.TransformError, match=rf"left by break at .*source_programs\.py, line {line} "):
        wg.source_grad(sp.break_loop, checkpoint="binomial")(sp.V8)


def test_too_few_snapshots_names_the_loop():
    line = _line_of(sp.sine_map, "for ")
    with pytest.raises(ValueError, match=rf"loop at .*source_programs\.py, line {line}: snapshots must be "):
        wg.source_grad(sp.sine_map, checkpoint="binomial", snapshots=0)(V6, 5)


def test_bad_policy_arguments():
    with pytest.raises(ValueError, match="checkpoint must be one of 'all', 'binomial', 'ctz'"):
        wg.source_grad(sp.sine_map, checkpoint="revolve")
    with pytest.raises(ValueError, match="snapshots=3 is for checkpoint='binomial'"):
        wg.source_grad(sp.sine_map, checkpoint="ctz", snapshots=3)
    with pytest.raises(TypeError, match="snapshots must be an integer"):
        wg.source_grad(sp.sine_map, checkpoint="binomial", snapshots=2.5)


def test_table_and_cli_with_checkpointing(tmp_path):
    d = wg.source_grad(sp.sine_map, checkpoint="binomial", snapshots=2)
    d(V6, 7)
    table = d.table()
    assert "reverse (read bottom-up)" in table and "for action, p, k, slot in schedule:" in table
    from wengert.__main__ import main

    path = tmp_path / "prog.py"
    path.write_text("import numpy as np\n\ndef f(x):\n    for i in range(6):\n        x = np.sin(x) * 1.1\n"
                    "    return x\n")
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["adjoint", f"{path}:f", "--checkpoint", "binomial", "--snapshots", "2"])
    assert status in (0, None)
    assert "binomial(6, 2)" in out.getvalue()


# -- the per-loop marker: for i in wg.checkpointed(range(n), policy, snapshots) ------------------------

@pytest.mark.parametrize("fun,args,argnums", [(sp.marked_outer, (np.linspace(0.1, 0.5, 4), V6[:4]), (0, 1)),
                                              (sp.marked_over_array, (V6,), 0)])
def test_marked_loop_gradient(fun, args, argnums):
    d = wg.source_grad(fun, argnums)
    expected = _grads(wg.grad(fun, argnums)(*args), argnums)  # the tape ignores the marker
    for e, g in zip(expected, _grads(d(*args), argnums)):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    assert re.search(r"for action\d*, p\d*, k\d*, slot\d* in", d.source)
    f = _standalone(d.source, f"{fun.__name__}_grad")
    for e, g in zip(expected, _grads(f(*args), argnums)):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_marked_outer_loop_keeps_its_inner_loop_store_all():
    src = wg.source_grad(sp.marked_outer).program(np.ones(4), np.ones(4)).source
    assert "binomial(20, 3)" in src
    # the inner loop is reversed by a loop of its own, which reads v[j] and x[j] again (nothing kept)
    assert src.count("for action") == 1 and re.search(r"for j in range\(n\d* - 1, -1, -1\):", src)


def test_marker_is_the_iterable_when_run():
    r = range(4)
    assert wg.checkpointed(r, "ctz") is r
    with pytest.raises(ValueError, match="checkpoint must be one of"):
        wg.checkpointed(r, "sometimes")


def test_marked_loop_inside_a_storing_loop_is_refused():
    line = _line_of(sp.marked_inside_stored, "wg.checkpointed")
    with pytest.raises(wg.TransformError, match=rf"line {line} is checkpointed but the loop around it keeps"):
        wg.source_grad(sp.marked_inside_stored)(np.ones(2), np.ones(3))
    got = wg.source_grad(sp.marked_inside_stored, checkpoint="ctz")(np.ones(2), V6[:3])  # both checkpointed
    np.testing.assert_allclose(got, wg.grad(sp.marked_inside_stored)(np.ones(2), V6[:3]), rtol=1e-12)


def test_marker_with_bad_snapshots_names_the_line():
    line = _line_of(sp.marked_bad_snapshots, "wg.checkpointed")
    with pytest.raises(wg.TransformError, match=rf"source_programs\.py, line {line}: .*snapshots must be "):
        wg.source_grad(sp.marked_bad_snapshots)(0.5)
