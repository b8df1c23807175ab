"""Smoke test of the generated benchmark page: a quick run of one workload (hand-written and wengert
only) writes a page holding the machine and versions, the summary and the workload's table, and a
plot that exists. The memory plot's reader is checked on the checkpointing benchmark's table format.
No timing assertions."""

import re

import pytest

from benchmarks import docs_page
from benchmarks.__main__ import main
from tests.benchmarks.peer_guard import no_peer_imports  # noqa: F401 - an autouse fixture

PNG = b"\x89PNG\r\n\x1a\n"



@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs")
    status = main(["--quick", "--only", "scalar-chain", "--impls", "hand", "wengert",
                   "--docs", str(out / "benchmarks.md"), "--markdown", str(out / "latest.md")])
    assert status == 0
    return out / "benchmarks.md"


def test_the_page_has_the_environment(page):
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks\n")
    assert "Quick run" in text  # a quick run says so
    for key in ("date", "machine", "OS", "Python", "NumPy", "wengert", "torch", "jax", "autograd",
                "threads", "rounds"):
        assert re.search(rf"^\| {key} \| \S", text, re.MULTILINE), f"no {key} in the page"


def test_the_page_has_the_tables(page):
    text = page.read_text(encoding="utf-8")
    summary = text.split("## Summary", 1)[1].split("##", 1)[0]
    assert re.search(r"^\| scalar-chain \| \d+\.\d\dx \|$", summary, re.MULTILINE)
    assert "### scalar chain" in text
    table = text.split("### scalar chain", 1)[1]
    assert re.search(r"^\| hand-written \| ok \| ", table, re.MULTILINE)
    assert re.search(r"^\| wengert \| ok \| ", table, re.MULTILINE)
    assert "### Targets" in text


def test_the_plot_exists_and_is_referenced(page):
    text = page.read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert images == [f"{docs_page.IMAGES}/{docs_page.RELATIVE_PNG}"]
    for image in images:
        data = (page.parent / image).read_bytes()
        assert data.startswith(PNG) and len(data) > 1000


CHECKPOINTING = """## Checkpointing: gradient of 64 steps

| implementation | kept for the backward pass | step evaluations | time (median) | time / wengert all \
| peak memory (tracemalloc) | memory / wengert all | peak RSS increase (subprocess) |
|---|---|---|---|---|---|---|---|
| wengert, all | 64 states | 64 | 12.5 ms | 1.00x | 1,024.0 MiB | 1.00x | - |
| wengert, binomial | 6 states | 150 | 1.20 s | 2.00x | 0.5 MiB | 0.10x | - |
| PyTorch | - | - | not installed | | | | |
"""


def test_memory_points_read_the_checkpointing_table(tmp_path):
    points = docs_page.memory_points(CHECKPOINTING)
    assert points == [("wengert, all", pytest.approx(0.0125), pytest.approx(1024.0)),
                      ("wengert, binomial", pytest.approx(1.2), pytest.approx(0.5))]
    written = docs_page.plot_memory(points, tmp_path / "memory.png")
    assert written.read_bytes().startswith(PNG)
    assert docs_page.memory_points("no table here") == []
    assert docs_page.plot_memory([], tmp_path / "none.png") is None
