"""The layering, enforced: core -> rules -> engines -> api -> front ends -> program -> on top.

Each layer imports only itself and the layers before it (``tools/import_graph.py`` holds the layers
and reads the import graph, counting imports placed inside functions): no import of a higher layer,
no wengert import hidden inside a function, no import cycle at all.
"""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "tools" / "import_graph.py"
_spec = importlib.util.spec_from_file_location("import_graph", _PATH)
graph_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(graph_tool)


def _graph():
    known = graph_tool.modules()
    edges = graph_tool.edges(known)
    graph = {}
    for a, b, _ in edges:
        graph.setdefault(a, set()).add(b)
    return known, graph


def test_every_module_is_in_a_layer():
    known, _ = _graph()
    assert [m for m in known if graph_tool.layer_of(m) is None] == []


def test_no_module_imports_a_higher_layer():
    upward, _ = graph_tool.violations()
    assert upward == [], "a module imports a layer above its own (see tools/import_graph.py's LAYERS)"


def test_no_wengert_import_is_hidden_inside_a_function():
    _, inside = graph_tool.violations()
    assert inside == [], "an import inside a function: move it to the top of the module"


def test_no_import_cycles():
    known, graph = _graph()
    assert graph_tool.cycles(list(known), graph) == []


def test_the_core_depends_on_nothing_above_it():
    known, graph = _graph()
    for module in known:
        if graph_tool.layer_of(module) == 0:
            assert {m for m in graph_tool.depends_on(module, graph) if graph_tool.layer_of(m) != 0} == set()


def test_layer_of_reads_the_longest_prefix():
    assert graph_tool.layer_of("wengert") == len(graph_tool.LAYERS) - 1
    assert graph_tool.layer_of("wengert.core.trace") == 0
    assert graph_tool.layer_of("wengert.checkpointing") == graph_tool.layer_of("wengert.api.tape")
    assert graph_tool.layer_of("wengert.numpy.linalg") < graph_tool.layer_of("wengert.program.ir")


KNOWN_OVER_600_LINES = set()
"""Modules longer than 600 lines, still to split by content."""


def test_the_core_reads_in_one_sitting_and_files_stay_short():
    core, counted = graph_tool.sizes()
    assert core <= 1000, f"the core (wengert.core) has {core} lines; keep it to 1,000"
    long = {name for n, name in counted if n > 600}
    assert sorted(long - KNOWN_OVER_600_LINES) == [], "a module over 600 lines: split it by content"
    assert sorted(KNOWN_OVER_600_LINES - long) == [], "now short: remove it from KNOWN_OVER_600_LINES"
