"""Measure wengert's layering: the import graph of ``src/wengert`` and its cycles.

    python tools/import_graph.py            # summary: modules, edges, in-function imports, cycles
    python tools/import_graph.py --cycles   # also each cycle's members

Counts imports placed inside functions too (they hide a cycle from Python, not from the design).
A measuring tool for the layering work; the layering test will use the same graph.
"""

import argparse
import ast
import subprocess
import sys
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
            inside = _inside_function(tree, node)
            for t in targets:
                if t.split(".")[0] != PACKAGE:
                    continue
                m = _resolve(t, known)
                if m and m != name:
                    out.append((name, m, inside))
    return sorted(set(out))


def _inside_function(tree, target):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(child is target for child in ast.walk(node)):
                return True
    return False


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


def loaded_by(module):
    """How many of the package's modules ``import module`` loads (in a fresh interpreter)."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); import {module}; "
            f"print(sum(m == {PACKAGE!r} or m.startswith({PACKAGE + '.'!r}) for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(done.stdout)


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
    print(f"modules loaded by `import {PACKAGE}.trace`: {loaded_by(PACKAGE + '.trace')}")
    if opts.cycles:
        for c in all_cycles:
            print(f"- {len(c)}: {', '.join(c)}")


if __name__ == "__main__":
    main()
