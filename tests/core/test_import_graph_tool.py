"""tools/import_graph.py, the layering measurement: its cycle finder and its reading of the package."""

import ast
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


def test_imports_inside_functions_are_found_at_any_depth(tmp_path):
    # a function, a method of a class inside a function, an async method: inside; module level and a
    # class body: not (the graph of a two-module package written here)
    package = tmp_path / "wengert"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "b.py").write_text("")
    (package / "a.py").write_text(
        "import wengert.b\n"
        "def f():\n    import wengert.b\n    class C:\n        def g(self):\n"
        "            from wengert import b\n"
        "class K:\n    import wengert.b\n    async def h(self):\n        from wengert.b import x\n")
    known = {"wengert": package / "__init__.py", **{f"wengert.{m}": package / f"{m}.py" for m in "ab"}}
    assert graph_tool.edges(known) == [("wengert.a", "wengert.b", False), ("wengert.a", "wengert.b", True)]
    tree = ast.parse((package / "a.py").read_text())
    inside = graph_tool._inside_functions(tree)
    assert sorted(n.lineno for n in ast.walk(tree) if id(n) in inside) == [3, 6, 10]
