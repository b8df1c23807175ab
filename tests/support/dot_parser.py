"""A small structural reader of the DOT text ``wengert.viz`` writes (tests only): nodes with
their labels and subgraph, edges with their subgraph; raises ValueError on anything malformed."""

import re

_NODE = re.compile(r'^"((?:[^"\\]|\\.)+)"\s*\[\s*label\s*=\s*"((?:[^"\\]|\\.)*)"\s*\];$')
_EDGE = re.compile(r'^"((?:[^"\\]|\\.)+)"(?::f\d+)?\s*->\s*"((?:[^"\\]|\\.)+)"(?::f\d+)?;$')
_ATTRS = re.compile(r'^(graph|node|edge)\s*\[.*\];?$')
_SUB = re.compile(r'^subgraph\s+(\w+)\s*\{$')


def parse(text):
    """{"nodes": {id: (label, subgraph)}, "edges": [(tail, head, subgraph)]}."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not re.match(r'^digraph\s+\w+\s*\{$', lines[0]) or lines[-1] != "}":
        raise ValueError("not a digraph { ... }")
    nodes, edges, stack = {}, [], []
    for ln in lines[1:-1]:
        if m := _SUB.match(ln):
            stack.append(m.group(1))
        elif ln == "}":
            if not stack:
                raise ValueError("unbalanced braces")
            stack.pop()
        elif m := _NODE.match(ln):
            if m.group(1) in nodes:
                raise ValueError(f"node {m.group(1)} declared twice")
            nodes[m.group(1)] = (m.group(2), stack[-1] if stack else None)
        elif m := _EDGE.match(ln):
            edges.append((m.group(1), m.group(2), stack[-1] if stack else None))
        elif not _ATTRS.match(ln) and not ln.startswith("label"):
            raise ValueError(f"cannot read DOT line: {ln!r}")
    if stack:
        raise ValueError("unclosed subgraph")
    for tail, head, _ in edges:
        if tail not in nodes or head not in nodes:
            raise ValueError(f"edge {tail} -> {head} names an undeclared node")
    return {"nodes": nodes, "edges": edges}


def fields(label):
    """A record label's fields, ports stripped: "<f0> x | <f1> creator: None" -> ["x", "creator: None"]."""
    return [re.sub(r"^<f\d+>\s*", "", part.strip()) for part in re.split(r"(?<!\\)\|", label)]
