"""tools/import_graph.py, the layering measurement: its cycle finder and its reading of the package."""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "tools" / "import_graph.py"
_spec = importlib.util.spec_from_file_location("import_graph", _PATH)
graph_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(graph_tool)


def test_cycles_are_the_strongly_connected_components():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert graph_tool.cycles(list("abcdef"), g) == [["a", "b", "c"], ["d", "e"]]
    assert graph_tool.cycles(list("ab"), {"a": {"b"}}) == []


def test_the_package_graph_resolves_submodule_imports():
    known = graph_tool.modules()
    assert "wengert.core.trace" in known and "wengert.rules.elementwise" in known
    es = graph_tool.edges(known)
    # `from wengert.rules import elementwise as ew` in reverse.py: an edge to the module, at module level
    assert ("wengert.engines.reverse", "wengert.rules.elementwise", False) in es
    assert all(a != b for a, b, _ in es)
