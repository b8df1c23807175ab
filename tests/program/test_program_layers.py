"""The program layer's place in the layering: its modules build on each other in one order (no
cycle), import no wengert module inside a function, import nothing from the layer on top, and no
lower layer imports them (the import graph of tools/import_graph.py)."""

import importlib.util
from pathlib import Path

import pytest

from wengert.core.errors import TracingError
from wengert.program import tracing

_PATH = Path(__file__).resolve().parents[2] / "tools" / "import_graph.py"
_spec = importlib.util.spec_from_file_location("import_graph", _PATH)
graph_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(graph_tool)

ORDER = ["ir", "rendering", "liveness", "passes", "algebra", "band_kernel", "band_values", "bands",
         "diagonal_products", "pipeline", "codegen", "dot", "tracing", "captures", "replay", "adjoint",
         "compiled_args",
         "source", "source.control", "source.codegen", "source.inplace", "source.checkpoint",
         "source.recompute", "source.factor", "source.values", "source.builder", "source.conversions",
         "source.parse", "source.nested", "source.scope", "source.loops",
         "source.interpreter", "source.adjoint", "source.program",
         "program", "native_helpers", "native", "native_types", "native_build", "native_loop",
         "checkpoint_steps", "loop_node", "compiled_source", "compiled",
         "source.api"]
"""Bottom to top, as ``wengert/program/__init__.py`` lists them; the package itself is the top."""

BELOW = ("wengert.core", "wengert.rules", "wengert.engines", "wengert.api", "wengert.numpy", "wengert.scipy")
PROGRAM = "wengert.program"

_KNOWN = graph_tool.modules()
_EDGES = graph_tool.edges(_KNOWN)


def _in(module, layer):
    return module == layer or module.startswith(layer + ".")


def test_every_module_of_the_program_layer_has_its_place():
    modules = sorted(m for m in _KNOWN if m.startswith(PROGRAM + "."))
    assert modules == sorted(f"{PROGRAM}.{m}" for m in ORDER)


@pytest.mark.parametrize("module", ORDER)
def test_a_program_module_imports_only_those_before_it(module):
    name = f"{PROGRAM}.{module}"
    earlier = {f"{PROGRAM}.{m}" for m in ORDER[:ORDER.index(module)]}
    imported = {b for a, b, _ in _EDGES if a == name and _in(b, PROGRAM)}
    assert imported <= earlier, f"{name} imports {sorted(imported - earlier)}, listed after it"
    assert not [b for a, b, inside in _EDGES if a == name and inside], "an import inside a function"
    outside = [b for a, b, _ in _EDGES if a == name and not _in(b, PROGRAM)]
    above = [b for b in outside if not any(_in(b, x) for x in BELOW)]
    assert above == [], f"{name} imports the layer on top: {above}"


def test_the_source_transformer_is_one_package():
    """Its modules live in ``program/source/``, not beside the tracing compiler's under a prefix."""
    flat = [m for m in _KNOWN if m.startswith(PROGRAM + ".") and m.count(".") == 2
            and m.rpartition(".")[2].startswith(("source_", "control"))]
    assert flat == []
    assert f"{PROGRAM}.source.interpreter" in _KNOWN


def test_program_calls_the_modules_it_names_directly():
    """``Program``'s methods reach tracing, the source front end, derivatives, printing and the
    drawing through plain imports (an editor follows them), not through a table filled in later."""
    program = f"{PROGRAM}.program"
    wanted = {f"{PROGRAM}.{m}" for m in ("tracing", "adjoint", "codegen", "dot", "source.program")}
    assert wanted <= {b for a, b, inside in _EDGES if a == program and not inside}


def test_no_lower_layer_imports_the_program_layer():
    assert [(a, b) for a, b, _ in _EDGES if _in(b, PROGRAM) and any(_in(a, x) for x in BELOW)] == []


def test_the_program_layer_is_in_no_cycle():
    graph = {}
    for a, b, _ in _EDGES:
        graph.setdefault(a, set()).add(b)
    assert [c for c in graph_tool.cycles(list(_KNOWN), graph) if any(_in(m, PROGRAM) for m in c)] == []


def test_the_lower_layers_raise_the_tracing_error_the_program_layer_names():
    assert tracing.TracingError is TracingError
    assert ("wengert.rules.linalg", "wengert.core.errors", False) in _EDGES
