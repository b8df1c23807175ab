"""wengert's layering: the import graph of ``src/wengert``, its layers, and what breaks them.

    python tools/import_graph.py            # summary: modules, edges, in-function imports, cycles
    python tools/import_graph.py --cycles   # also each cycle's members and every violation

Counts imports placed inside functions too (they hide a cycle from Python, not from the design).
tests/test_layers.py enforces the layering with the same graph.
"""

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "wengert"


def modules():
    """``{dotted name: path}`` of every module of the package."""
    out = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name, known):
    """The longest known module that ``name`` (``wengert.rules.linalg.det``) lies in."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def edges(known):
    """``[(importer, imported, inside_function)]`` between the package's modules."""
    out = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        in_functions = _inside_functions(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                # `from pkg import mod` depends on pkg.mod; `from mod import name` on mod
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            else:
                continue
            inside = id(node) in in_functions
            for t in targets:
                if t.split(".")[0] != PACKAGE:
                    continue
                m = _resolve(t, known)
                if m and m != name:
                    out.append((name, m, inside))
    return sorted(set(out))


def _inside_functions(tree):
    """The ids of the import statements of ``tree`` that lie inside a function (one walk of the
    tree and one of each outermost function: the graph of the package takes a fraction of a second)."""
    found, todo = set(), [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.update(id(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
        else:
            todo.extend(ast.iter_child_nodes(node))
    return found


def cycles(nodes, graph):
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(graph.get(root, ())))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph.get(w, ()))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out, key=len, reverse=True)


LAYERS = (
    ("core", ("wengert.core",)),
    ("rules", ("wengert.rules",)),
    ("engines", ("wengert.engines",)),
    ("api", ("wengert.api", "wengert.checkpointing")),
    ("front ends", ("wengert.numpy", "wengert.scipy")),
    ("program", ("wengert.program",)),
    ("on top", ("wengert", "wengert.nn", "wengert.optim", "wengert.viz", "wengert.testing", "wengert.cli",
                "wengert.misc", "wengert.extend", "wengert.test_util",
                "wengert.__main__")),
)
"""Bottom to top: a module may import modules of its own layer and of the layers before it, never
after (``wengert.checkpointing`` is the public face of ``wengert.api.checkpointing``)."""

_SCIPY_ON_DEMAND = ("needs SciPy, optional and about a second to import: imported the first time a "
                    "scipy.special ufunc meets a traced value, so that import wengert does not pay for it")
OPTIONAL_INSIDE_FUNCTIONS = {("wengert.numpy._dispatch", "wengert.rules.special"): _SCIPY_ON_DEMAND,
                             ("wengert.numpy._dispatch", "wengert.rules.special_scaled"): _SCIPY_ON_DEMAND}
"""``(importer, imported) -> reason`` for imports allowed inside a function: only where the imported
module needs an optional dependency that the importer must work without."""


def layer_of(module):
    """Index in :data:`LAYERS` of the layer holding ``module`` (the longest matching prefix wins)."""
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def violations(known=None):
    """``(upward, inside)``: imports of a higher layer, and wengert imports placed inside functions
    (except :data:`OPTIONAL_INSIDE_FUNCTIONS`), each a list of ``(importer, imported)``."""
    known = known or modules()
    upward, inside = [], []
    for a, b, in_function in edges(known):
        if layer_of(b) > layer_of(a):
            upward.append((a, b))
        if in_function and (a, b) not in OPTIONAL_INSIDE_FUNCTIONS:
            inside.append((a, b))
    return upward, inside


def sizes(known=None):
    """``(lines of the core layer, [(lines, module)] largest first)``, counting every line of each file."""
    known = known or modules()
    counted = [(len(path.read_text().splitlines()), name) for name, path in known.items()]
    counted.sort(reverse=True)
    core = sum(n for n, name in counted if layer_of(name) == 0)
    return core, counted


def depends_on(module, graph):
    """Every module ``module`` imports, directly or not (its static closure in ``graph``)."""
    seen, todo = set(), [module]
    while todo:
        for b in graph.get(todo.pop(), ()):
            if b not in seen:
                seen.add(b)
                todo.append(b)
    seen.discard(module)
    return seen


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", action="store_true", help="list each cycle's modules")
    opts = parser.parse_args(argv)
    known = modules()
    es = edges(known)
    graph, top_level = {}, {}
    for a, b, inside in es:
        graph.setdefault(a, set()).add(b)
        if not inside:
            top_level.setdefault(a, set()).add(b)
    all_cycles, top_cycles = cycles(list(known), graph), cycles(list(known), top_level)
    print(f"modules: {len(known)}; imports between them: {len(es)}, "
          f"{sum(inside for *_, inside in es)} inside functions")
    print(f"cycles counting imports inside functions: {len(all_cycles)}, largest "
          f"{len(all_cycles[0]) if all_cycles else 0} modules")
    print(f"cycles of module-level imports only: {len(top_cycles)}, largest "
          f"{len(top_cycles[0]) if top_cycles else 0} modules")
    print(f"modules that {PACKAGE}.core.trace depends on: {len(depends_on(PACKAGE + '.core.trace', graph))}")
    core, counted = sizes(known)
    print(f"core: {core} lines; largest files: " + ", ".join(f"{name} {n}" for n, name in counted[:3]))
    upward, inside = violations(known)
    print(f"imports of a higher layer: {len(upward)}; wengert imports inside functions: {len(inside)}")
    if opts.cycles:
        for c in all_cycles:
            print(f"- {len(c)}: {', '.join(c)}")
        for a, b in upward:
            print(f"upward: {a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})")
        for a, b in inside:
            print(f"inside a function: {a} -> {b}")


if __name__ == "__main__":
    main()
