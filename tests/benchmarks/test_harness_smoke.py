"""Smoke test of the benchmark harness on tiny sizes, wengert and hand-written only: the gradient
cross-check passes, failures are reported, and tables are produced. No timing assertions.
"""


import numpy as np
import pytest

from benchmarks import workloads as W
from benchmarks.__main__ import main
from benchmarks.harness import (
    Impl,
    environment,
    evaluate_targets,
    format_markdown,
    format_text,
    run_workload,
)
from benchmarks.peers import PeerUnavailable
from tests.benchmarks.peer_guard import no_peer_imports  # noqa: F401 - an autouse fixture

OURS = ("hand", "wengert")


def quiet(_message):
    pass


def small_workloads():
    return [
        W.scalar_chain(steps=50, jax_steps=50),
        W.tiny_network(),
        W.mlp(np.float32, sizes=(12, 8, 6, 4), batch=5),
        W.mlp(np.float64, sizes=(12, 8, 6, 4), batch=5),
    ]



@pytest.mark.parametrize("workload", small_workloads(), ids=lambda w: w.name)
def test_cross_check_passes_and_table_is_produced(workload, tmp_path):
    workload.sample_s = 0.001
    res = run_workload(workload, impls=OURS, rounds=2, progress=quiet)
    assert [r.key for r in res.results] == list(OURS)
    for r in res.results:
        assert r.status == "ok", r.detail
        assert len(r.times) == 2 and r.calls >= 1
    text = format_text([res])
    assert "wengert" in text and "hand-written" in text and "FAILED" not in text
    md = format_markdown([res], environment())
    assert md.count("| wengert |") == 1 and "## Targets" in md
    assert all(verdict in ("MET", "NOT MET", "N/A") for _, _, verdict in evaluate_targets(res))


def _directional_fd(f, args, direction, eps=1e-6):
    plus = [a + eps * d for a, d in zip(args, direction)]
    minus = [a - eps * d for a, d in zip(args, direction)]
    return (f(*plus) - f(*minus)) / (2 * eps)


def _check_reference(f, by_hand, args):
    rng = np.random.default_rng(1)
    direction = [rng.standard_normal(np.shape(a)) for a in args]
    value, grads = by_hand(*args)
    assert np.isclose(value, f(*args), rtol=1e-12)
    exact = sum(float(np.sum(g * d)) for g, d in zip(grads, direction))
    assert np.isclose(exact, _directional_fd(f, args, direction), rtol=1e-5, atol=1e-8)


def test_hand_written_references_agree_with_finite_differences():
    _check_reference(lambda x, y: W.chain_forward(np.sin, x, y, 50),
                     lambda x, y: W.chain_by_hand(x, y, 50), [0.3, 0.9])
    W1, W2, x, label = W.tiny_data()
    _check_reference(lambda a, b: W.tiny_loss(np, a, b, x, label),
                     lambda a, b: W.tiny_by_hand(a, b, x, label), [W1, W2])
    params, X, labels = W.mlp_data(np.float64, sizes=(12, 8, 6, 4), batch=5)
    rows = np.arange(5)
    _check_reference(lambda *p: W.mlp_loss(np, p, X, labels, rows),
                     lambda *p: W.mlp_by_hand(p, X, labels, rows), list(params))


def test_wrong_gradient_fails_loudly_and_missing_peer_is_reported():
    workload = W.tiny_network()
    workload.sample_s = 0.001
    W1, W2, x, label = W.tiny_data()

    def wrong():
        loss, (g1, g2) = W.tiny_by_hand(W1, W2, x, label)
        return loss, [g1, 1.01 * g2]

    def missing():
        raise PeerUnavailable("not installed")

    workload.factories["torch"] = lambda: Impl(wrong, lambda out: out)
    workload.factories["jax"] = missing
    res = run_workload(workload, impls=OURS + ("torch", "jax"), rounds=2, progress=quiet)
    status = {r.key: r.status for r in res.results}
    assert status == {"hand": "ok", "wengert": "ok", "torch": "FAILED", "jax": "not installed"}
    failed = next(r for r in res.results if r.key == "torch")
    assert failed.times == [] and "d/dW2" in failed.detail
    assert res.failures == [failed]
    text = format_text([res])
    assert "FAILED" in text and "not installed" in text


def test_cli_quick_run_writes_markdown(tmp_path, capsys):
    out = tmp_path / "bench.md"
    code = main(["--quick", "--only", "tiny", "--rounds", "2", "--impls", "hand", "wengert",
                 "--markdown", str(out)])
    assert code == 0
    assert "tiny network" in capsys.readouterr().out
    assert "| wengert |" in out.read_text(encoding="utf-8")
