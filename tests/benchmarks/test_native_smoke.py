"""Smoke test of the machine-speed workloads (benchmarks/native.py) at tiny sizes, hand-written and
wengert's Python programs only (no peer library, no Numba compile, no timing assertions): the
hand-written references agree with finite differences, every workload cross-checks, the loop's slope
table is produced, and a ``backend="numba"`` that this wengert refuses is reported "n/a", not a crash."""

import time
import warnings

import numpy as np
import pytest

from benchmarks import native
from benchmarks import workloads as W
from benchmarks.__main__ import NAMES
from benchmarks.harness import Impl, Workload, format_markdown, format_text, run_workload
from benchmarks.indexing import run_interleaved
from benchmarks.native_floors import kernels, rosenbrock, rosenbrock_hessian
from benchmarks.peers import NotApplicable, PeerUnavailable
from tests.benchmarks.peer_guard import no_peer_imports  # noqa: F401 - an autouse fixture

PYTHON = ("hand", "wengert", "wg.compile", "source")


def quiet(_message):
    pass


def test_registered():
    names = {w.name for w in native.workloads(quick=True)}
    assert names == set(native.NATIVE_NAMES)
    assert set(native.NATIVE_NAMES) <= set(NAMES)


def test_lorenz_tangents_match_finite_differences():
    params, steps, eps = (10.0, 14.0, 8.0 / 3.0), 30, 1e-6
    value, *grads = kernels()["lorenz_tangents"](*params, steps, 0.01)
    assert value == pytest.approx(native.lorenz_rk4(*params, steps), rel=1e-13)
    for k, g in enumerate(grads):
        up = [p + eps * (j == k) for j, p in enumerate(params)]
        down = [p - eps * (j == k) for j, p in enumerate(params)]
        fd = (native.lorenz_rk4(*up, steps) - native.lorenz_rk4(*down, steps)) / (2 * eps)
        assert g == pytest.approx(fd, rel=1e-6, abs=1e-8), k


def test_rosenbrock_hessian_matches_finite_differences():
    x = np.random.default_rng(3).uniform(-1.5, 1.5, 5)
    f = lambda v: rosenbrock(np, v)  # noqa: E731
    h, eye = 1e-4, np.eye(5)
    fd = np.array([[(f(x + h * eye[i] + h * eye[j]) - f(x + h * eye[i] - h * eye[j])
                     - f(x - h * eye[i] + h * eye[j]) + f(x - h * eye[i] - h * eye[j])) / (4 * h * h)
                    for j in range(5)] for i in range(5)])
    np.testing.assert_allclose(rosenbrock_hessian(x), fd, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(kernels()["rosenbrock_hessian_loops"](x), rosenbrock_hessian(x))


def test_python_kernels_agree_with_the_other_hand_written_code():
    z, gx, gy = kernels()["chain_adjoint"](0.3, 0.9, 40)
    ref_z, (ref_gx, ref_gy) = W.chain_by_hand(0.3, 0.9, 40)
    assert (z, gx, gy) == pytest.approx((ref_z, ref_gx, ref_gy), rel=1e-14)
    v = np.random.default_rng(0).standard_normal(17)
    s, g = kernels()["loop_adjoint"](v)
    assert s == pytest.approx(float(v @ v), rel=1e-13)
    np.testing.assert_array_equal(g, 2.0 * v)
    W1, W2, x, label = W.tiny_data(0)
    loss, dW1, dW2 = kernels()["tiny_adjoint"](W1, W2, x, label)
    ref_loss, (ref_W1, ref_W2) = W.tiny_by_hand(W1, W2, x, label)
    assert loss == pytest.approx(ref_loss, rel=1e-14)
    np.testing.assert_allclose(dW1, ref_W1, rtol=1e-13)
    np.testing.assert_allclose(dW2, ref_W2, rtol=1e-13)


@pytest.mark.parametrize("make", [
    lambda: native.native_chain(steps=20, rounds=1),
    lambda: native.native_lorenz(steps=8, rounds=1),
    lambda: native.native_tiny_network(rounds=1),
    lambda: native.native_hessian(n=6, rounds=1),
    lambda: native.native_compile_time(sizes=(40, 80), repeats=1, rounds=1),
], ids=["chain", "lorenz", "tiny", "hessian", "compile-time"])
def test_python_systems_cross_check(make):
    workload = make()
    workload.sample_s = 0.0
    res = run_workload(workload, impls=PYTHON, progress=quiet)
    problems = [(r.key, r.detail) for r in res.results if r.status != "ok"]
    assert res.results and not problems, problems
    assert "FAILED" not in format_text([res])


def test_compile_time_note_has_every_size_and_both_slopes():
    res = run_workload(native.native_compile_time(sizes=(40, 80), repeats=1, rounds=1), impls=("wg.compile",),
                       progress=quiet)
    (r,) = res.results
    assert "40 ops" in r.note and "80 ops" in r.note and "Python's compile" in r.note
    assert "slope <= Python's" in r.note and "a minimal Python pass over as many statements" in r.note


def test_the_minimal_pass_times_what_it_does():
    assert native._minimal_pass_s(2000) > 0.0
    _, _, minimal = native.compile_table((40, 80), repeats=1)
    assert len(minimal) == 2 and all(t > 0 for t in minimal)


def test_loop_at_two_sizes_gives_slopes():
    loops = [native.native_loop(n, rounds=1) for n in (30, 60)]
    for w in loops:
        w.sample_s = 0.0
    results = run_interleaved(loops, impls=("hand", "wengert", "source"), rounds=2, progress=quiet)
    for res in results:
        assert all(r.status == "ok" for r in res.results), [(r.key, r.detail) for r in res.results]
    text = native.loop_summary(results)
    assert "n=30" in text and "n=60" in text and "wg.source_grad" in text
    assert native.loop_summary_markdown(results).startswith("## Loop at machine speed")


def _refuse(message, kind=TypeError):
    def build():
        raise kind(message)
    return build


def test_an_unknown_backend_keyword_is_not_applicable():
    with pytest.raises(NotApplicable, match="unexpected keyword argument 'backend'"):
        native.native_build(_refuse("f() got an unexpected keyword argument 'backend'"), None, "x")
    with pytest.raises(NotApplicable, match="backend must be"):
        native.native_build(_refuse("backend must be 'python'", ValueError), None, "x")
    with pytest.raises(NotApplicable, match="No module named 'numba'"):
        native.native_build(_refuse("No module named 'numba'", ImportError), None, "x")
    with pytest.raises(TypeError, match="unsupported operand"):  # another error is a real failure
        native.native_build(_refuse("unsupported operand"), None, "x")


def test_a_build_past_the_limit_is_stopped():
    def spin(_fn):
        end = time.perf_counter() + 5.0
        while time.perf_counter() < end:
            pass

    start = time.perf_counter()
    with pytest.raises(PeerUnavailable, match="stopped after"):
        native.native_build(lambda: None, spin, "slow", limit_s=0.05)
    assert time.perf_counter() - start < 4.0


def test_fallback_warnings_are_named_in_the_note():
    class NativeFallbackWarning(UserWarning):
        pass

    def call(_fn):
        warnings.warn("np.linalg.eigh runs as Python", NativeFallbackWarning, stacklevel=1)
        return 1.0

    _, out, seconds, note = native.native_build(lambda: None, call, "built")
    assert out == 1.0 and seconds >= 0
    assert "1 fallback warning(s): np.linalg.eigh runs as Python" in note


def test_harness_reports_not_applicable_and_failed_builds():
    def not_here():
        raise NotApplicable("wg.compile(f, backend=...): no such keyword")

    def broken():
        raise RuntimeError("the build broke")

    work = Workload(name="probe", title="probe", params=("x",), rtol=1e-9,
                    reference=lambda: (1.0, [2.0]), rounds=1, sample_s=0.0, max_calls=1,
                    factories={"hand": lambda: Impl(lambda: (1.0, [2.0]), lambda out: out),
                               "compile-numba": not_here, "wg.compile": broken})
    res = run_workload(work, progress=quiet)
    status = {r.key: (r.status, r.detail) for r in res.results}
    assert status["hand"][0] == "ok"
    assert status["compile-numba"] == ("n/a", "wg.compile(f, backend=...): no such keyword")
    assert status["wg.compile"][0] == "FAILED" and "the build broke" in status["wg.compile"][1]
    md = format_markdown([res], {})
    assert "| wg.compile numba | n/a |" in md
