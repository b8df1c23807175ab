"""The README's speed summary is written from a run's results: the rows of the headline workloads,
JAX's jit time preferred and labelled, the fastest library (not the hand-written code) in bold
whoever it is, and only the text between the markers replaced. Results are built by hand here (no
timing is measured)."""

from benchmarks import readme_summary
from benchmarks.harness import ImplResult, Workload, WorkloadResult


def _result(name, title, times):
    work = Workload(name=name, title=title, params=(), rtol=1e-6, reference=lambda: (None, []),
                    factories={}, rounds=1)
    impls = [ImplResult(key, key, "ok", times=[t]) for key, t in times.items()]
    return WorkloadResult(work, impls, rounds=1)


RESULTS = [
    _result("scalar-chain", "scalar chain", {"hand": 1e-3, "wengert": 2e-3, "torch": 9e-3, "jax": 0.5,
                                             "autograd": 0.05}),
    _result("hessian-rosenbrock", "Hessian", {"hand": 1e-5, "wengert": 5e-4, "jit": 8e-5, "jax": 3e-2}),
    _result("not-a-headline", "other", {"hand": 1.0, "wengert": 1.0}),
]


def test_rows_bold_the_fastest_library_whoever_it_is():
    text = readme_summary.render(RESULTS, "2026-01-01")
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    assert lines[0] == "| workload | hand-written | wengert | PyTorch | JAX | HIPS autograd |"
    assert lines[1] == "| scalar chain | 1 ms | **2 ms** | 9 ms | 500 ms (eager) | 50 ms |"
    # JAX's jit wins the Hessian: the bold goes to it, and its eager time is not shown
    assert lines[2] == "| Hessian | 10 µs | 500 µs | – | **80 µs (jit)** | – |"
    assert "other" not in text


def test_write_replaces_only_between_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    before, after = "# title\n\nintro\n", "\n## next\ntext\n"
    stale = readme_summary.START + "\nstale table\n" + readme_summary.END
    readme.write_text(before + stale + after, encoding="utf-8")
    assert readme_summary.write(readme, RESULTS, "2026-01-01") == readme
    text = readme.read_text(encoding="utf-8")
    assert text.startswith(before + readme_summary.START + "\n") and text.endswith(readme_summary.END + after)
    assert "stale table" not in text and "| scalar chain |" in text
    plain = tmp_path / "PLAIN.md"
    plain.write_text("no markers\n", encoding="utf-8")
    assert readme_summary.write(plain, RESULTS, "2026-01-01") is None
    assert plain.read_text(encoding="utf-8") == "no markers\n"


def test_the_readme_has_the_markers():
    from benchmarks.__main__ import README

    text = README.read_text(encoding="utf-8")
    assert text.count(readme_summary.START) == 1 and text.count(readme_summary.END) == 1
