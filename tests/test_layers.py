"""The layering, enforced: core -> rules -> engines -> api -> front ends -> program -> on top.

Each layer imports only itself and the layers before it (``tools/import_graph.py`` holds the layers
and reads the import graph, counting imports placed inside functions): no import of a higher layer,
no wengert import hidden inside a function, no import cycle at all.
"""

import ast
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


# -- primitives are matched by identity or by their facts, never by name ----------------------------

_SRC = Path(__file__).resolve().parents[1] / "src" / "wengert"
_NAME_FREE = ("program", "engines")
"""Packages that must recognise a primitive by identity (``prim is add.primitive``) or by a fact it
declares (``prim.units``): a user's primitive may bear any name, ``multiply`` included."""


def _is_prim_name(node):
    """``<...prim...>.__name__`` or ``getattr(<...prim...>, "__name__", ...)``: a primitive's name."""
    if isinstance(node, ast.Attribute) and node.attr == "__name__":
        return "prim" in ast.unparse(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
        return node.args[1].value == "__name__" and "prim" in ast.unparse(node.args[0])
    return False


def _strings(node, constants):
    """Whether ``node`` is a string, a collection of strings, or a module-level name bound to one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_strings(e, constants) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in ("frozenset", "set") and len(node.args) == 1:
        return _strings(node.args[0], constants)
    return isinstance(node, ast.Name) and node.id in constants


def _own_nodes(scope):
    """The nodes of ``scope``, but not of the functions defined in it (each a scope of its own)."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo += ast.iter_child_nodes(node)


def _tainted_names(scope):
    """Names ``scope`` binds to a primitive's name (``name = s.prim.__name__``, also in tuples)."""
    found = set()
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = [(target, node.value)]
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                        and len(target.elts) == len(node.value.elts):
                    pairs = list(zip(target.elts, node.value.elts))
                found |= {t.id for t, v in pairs if isinstance(t, ast.Name) and _is_prim_name(v)}
    return found


def name_comparisons(source):
    """``(line, text)`` of each comparison of a primitive's name with a string, a collection of
    strings, or a function's parameter (``made_by(x, "negative")``'s ``s.prim.__name__ == name``)."""
    tree = ast.parse(source)
    constants = {t.id for node in tree.body if isinstance(node, ast.Assign) and _strings(node.value, set())
                 for t in node.targets if isinstance(t, ast.Name)}
    found = []
    scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                    ast.Lambda))]
    for scope in scopes:
        tainted = _tainted_names(scope)
        params = set() if scope is tree else {a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)}
        for node in _own_nodes(scope):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left] + node.comparators
            named = [s for s in sides if _is_prim_name(s) or (isinstance(s, ast.Name) and s.id in tainted)]
            others = [s for s in sides if s not in named]
            if named and any(_strings(s, constants) or (isinstance(s, ast.Name) and s.id in params)
                             for s in others):
                found.append((node.lineno, ast.unparse(node)))
    return sorted(set(found))


def test_program_and_engines_match_no_primitive_by_name():
    found = []
    for package in _NAME_FREE:
        for path in sorted((_SRC / package).rglob("*.py")):
            found += [f"{path.relative_to(_SRC)}:{line}: {text}"
                      for line, text in name_comparisons(path.read_text())]
    assert found == [], "a primitive matched by its name (use identity or a fact):\n" + "\n".join(found)


def test_the_name_scan_finds_every_form():
    """The scan above, on the forms program/ used before (each a miscompile of a user's primitive)."""
    source = '''
_UPDATES = ("index_update", "index_add")
_SHAPE_ONLY = frozenset(("zeros_like", "ones_like"))

def fold(s):
    name, args = s.prim.__name__, s.args
    if name == "multiply":
        return 1
    if name in ("add", "subtract"):
        return 2
    if s.prim.__name__ in _UPDATES or s.prim.__name__ not in _SHAPE_ONLY:
        return 3
    if getattr(stmt.prim, "__name__", None) != "sum":
        return 4

def made_by(s, name):
    return s.prim.__name__ == name
'''
    lines = sorted({line for line, _ in name_comparisons(source)})
    assert lines == [7, 9, 11, 13, 17]
    fine = '''
def f(prim, x, fun):
    if prim is add.primitive or prim.units or type(x).__name__ == "ndarray" or fun.__name__ == "<lambda>":
        return f"primitive '{prim.__name__}'"
'''
    assert name_comparisons(fine) == []
