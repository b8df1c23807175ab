"""wengert.viz: pictures of the tape, drawn the way PyTorch's autograd graph pictures are.

``to_dot(value_or_tape)`` returns Graphviz DOT text for the recorded graph behind a ``Tensor``
(or a tape's ``Var``), or for a whole :class:`~wengert.Tape`:

- variables are rounded records (``Mrecord``): name | shape and dtype | ``creator: <function>``;
- functions are filled records: ``type: <primitive>`` | ``inputs: <names>``;
- data-flow edges run variable -> function -> variable; ``prev_func`` edges (function -> the
  functions that made its inputs, what PyTorch's early engine sorted) are drawn in red.

Array constants fed to a function (the data, integer labels) are drawn as variables with
``creator: None``; scalar constants appear in the function's ``inputs`` field. An object that can
draw itself (has ``to_dot()``, as ``wg.Program`` will) is asked to. ``render(obj, path)`` writes
SVG/PNG/PDF through Graphviz's ``dot`` when it is installed, else the ``.dot`` file and a hint.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any, Mapping

import numpy as np

from wengert.api.tape import Tape
from wengert.engines.reverse import FREED, NodeMethods
from wengert.engines.saving import Unsaved

__all__ = ["to_dot", "render"]


def to_dot(obj: Any, names: Mapping[str, Any] | None = None, title: str | None = None) -> str:
    """DOT text of the graph recorded for ``obj`` (a Tensor, a Var, a Tape, or anything with
    ``to_dot()``). ``names`` maps names to values (e.g. ``dict(model.named_parameters(), x=x)``)."""
    if hasattr(obj, "to_dot"):
        return obj.to_dot()
    label_of = {}
    named_arrays = []
    for name, value in (names or {}).items():
        label_of.setdefault(id(value), name)
        if type(value) is np.ndarray:
            named_arrays.append((name, value))
    nodes = _collect(obj)
    return _Drawing(nodes, label_of, title, named_arrays).text()


def _collect(obj):
    """The recorded nodes to draw, parents before children."""
    if isinstance(obj, Tape):
        entries = list(obj.entries)
        leaves = {}
        for node in entries:
            for p in node._parents:
                if p is not None and p._prim is None:
                    leaves.setdefault(id(p), p)
        return sorted(leaves.values(), key=lambda n: n._id if hasattr(n, "_id") else -1) + entries
    if not isinstance(obj, NodeMethods):
        raise TypeError(f"to_dot: expected a Tensor, a tape Var, a Tape, or an object with to_dot(); "
                        f"got {type(obj).__name__}. Only values computed from tensors that require "
                        f"grad have a recorded graph.")
    seen, order, stack = set(), [], [obj]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node._prim is not None and node._args is FREED:
            raise ValueError("to_dot: this graph was freed by backward(); draw it before calling "
                             "backward(), or call backward(retain_graph=True)")
        order.append(node)
        stack.extend(p for p in node._parents if p is not None)
    entries = getattr(obj._trace, "entries", None)
    if entries is not None:  # a Tape's, or a transform's Wengert list: no creation counter, use the list
        position = {id(n): i for i, n in enumerate(entries)}
        return sorted(order, key=lambda n: position.get(id(n), -1))
    return sorted(order, key=lambda n: n._id)


def _quote(text):
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _field(text):
    """Escape what is special inside a record label."""
    out = str(text)
    for ch in "\\{}|<>\"":
        out = out.replace(ch, "\\" + ch)
    return out


def _describe(value):
    if isinstance(value, float):
        return "scalar float64"
    if type(value) is Unsaved:  # an array the tape let go of (its rules do not read it): shape and dtype
        return f"{value.shape} {value.dtype}" if value.shape else f"scalar {value.dtype}"
    a = np.asarray(value)
    return f"{a.shape} {a.dtype}" if a.ndim else f"scalar {a.dtype}"


class _Drawing:
    def __init__(self, nodes, label_of, title, named_arrays=()):
        self.nodes = nodes
        self.label_of = label_of
        self.named_arrays = named_arrays
        self.title = title
        self.var_ids = {}     # id(value) -> DOT id of its variable node
        self.var_lines = []
        self.fun_lines = []
        self.flow = []
        self.prev = []
        self.fun_counts = {}
        self.unnamed = {}     # "input"/"t" -> how many unnamed variables of that kind so far
        self.shown = {}       # DOT id -> the name the picture gives the variable

    def _name(self, value, fallback):
        name = self.label_of.get(id(value)) or getattr(value, "name", None) or self._copied(value)
        return name if isinstance(name, str) and name else fallback

    def _copied(self, value):
        """The name of a named array ``value`` is a copy of: a recording holds copies of the caller's
        arrays that its rules read (``engines.kept``), the values as the operation ran."""
        if type(value) is not np.ndarray or value.base is not None or value.flags.writeable:
            return None
        for name, named in self.named_arrays:
            if named.shape == value.shape and named.dtype == value.dtype and np.array_equal(named, value):
                return name
        return None

    def variable(self, value, creator=None):
        key = id(value)
        if key in self.var_ids:
            return self.var_ids[key]
        dot_id = f"v{len(self.var_ids)}"
        self.var_ids[key] = dot_id
        raw = value.value if isinstance(value, NodeMethods) else value
        name = self._name(value, None)
        if name is None:
            kind = "input" if creator is None else "t"
            name = f"{kind}{self.unnamed.get(kind, 0)}"
            self.unnamed[kind] = self.unnamed.get(kind, 0) + 1
        self.shown[dot_id] = name
        label = f"<f0> {_field(name)} | <f1> {_field(_describe(raw))} | <f2> creator: {_field(creator)}"
        self.var_lines.append(f"    {_quote(dot_id)} [ label = {_quote(label)} ];")
        return dot_id

    def text(self):
        fun_of = {}  # id(node) -> DOT id of the function that made it
        for node in self.nodes:
            if node._prim is None:
                self.variable(node)
                continue
            op = node._prim.__name__
            k = self.fun_counts.get(op, 0)
            self.fun_counts[op] = k + 1
            fid = f"{op}{k}"
            fun_of[id(node)] = fid
            inputs, sources = [], []
            for arg, parent in zip(node._args, node._parents):
                if parent is not None:
                    vid = self.variable(parent, self._creator(parent))
                    sources.append(vid)
                    inputs.append(self._shown(parent, vid))
                elif (type(arg) is Unsaved or isinstance(arg, np.ndarray)) and arg.ndim > 0:
                    vid = self.variable(arg)
                    sources.append(vid)
                    inputs.append(self._shown(arg, vid))
                else:
                    inputs.append(_short(arg))
            out = self.variable(node, op)
            label = f"<f0> type: {_field(op)} | <f1> inputs: {_field(', '.join(inputs))}"
            self.fun_lines.append(f"    {_quote(fid)} [ label = {_quote(label)} ];")
            for vid in dict.fromkeys(sources):
                self.flow.append(f"    {_quote(vid)}:f0 -> {_quote(fid)}:f0;")
            self.flow.append(f"    {_quote(fid)}:f0 -> {_quote(out)}:f0;")
            prevs = [fun_of[id(p)] for p in node._parents if p is not None and id(p) in fun_of]
            for prev in dict.fromkeys(prevs):
                self.prev.append(f"    {_quote(fid)}:f1 -> {_quote(prev)}:f0;")
        lines = ["digraph wengert {", '  graph [ rankdir = "LR" fontsize = "12"'
                 + (f" label = {_quote(self.title)} labelloc = t" if self.title else "") + " ];",
                 "  subgraph function {",
                 '    node [ fontsize = "12" style = filled fillcolor = "#dde8f7" shape = "record" ];',
                 *self.fun_lines, "  }",
                 "  subgraph variable {",
                 '    node [ fontsize = "12" shape = "Mrecord" style = filled fillcolor = white ];',
                 *self.var_lines, "  }",
                 "  subgraph data_flow {", *self.flow, "  }",
                 "  subgraph prev_func {",
                 '    edge [ color = "red" arrowsize = "0.6" penwidth = "1" constraint = false ];',
                 *self.prev, "  }", "}"]
        return "\n".join(lines) + "\n"

    @staticmethod
    def _creator(node):
        return None if node._prim is None else node._prim.__name__

    def _shown(self, value, vid):
        return self.shown[vid]


def _short(value):
    if isinstance(value, (float, int, np.number)):
        return repr(value.item() if isinstance(value, np.number) else value)
    if isinstance(value, np.ndarray):
        return f"<{_describe(value)}>"
    return type(value).__name__


def render(obj: Any, path: str | os.PathLike[str], names: Mapping[str, Any] | None = None,
           title: str | None = None, quiet: bool = False) -> str:
    """Write the picture of ``obj`` to ``path`` (.svg, .png, .pdf through Graphviz's ``dot``; .dot as
    text). Without ``dot`` on PATH, writes the .dot file and prints how to render it. Returns the
    path actually written."""
    path = os.fspath(path)
    stem, ext = os.path.splitext(path)
    fmt = ext.lstrip(".").lower()
    text = to_dot(obj, names=names, title=title)
    dot_path = path if fmt in ("dot", "gv") else stem + ".dot"
    with open(dot_path, "w", encoding="utf-8") as f:
        f.write(text)
    if fmt in ("dot", "gv"):
        return dot_path
    if fmt not in ("svg", "png", "pdf"):
        raise ValueError(f"render: unknown picture format {ext!r}; use .svg, .png, .pdf or .dot")
    exe = shutil.which("dot")
    if exe is None:
        if not quiet:
            print(f"wengert.viz.render: Graphviz's 'dot' is not installed; wrote {dot_path}. Render it "
                  f"with:  dot -T{fmt} {dot_path} -o {path}   (install: apt-get install graphviz)")
        return dot_path
    subprocess.run([exe, f"-T{fmt}", dot_path, "-o", path], check=True, capture_output=True)
    return path
