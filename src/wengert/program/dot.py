"""The dataflow graph of a Program in Graphviz dot, in the style of PyTorch's autograd graph pictures:
one record per statement (``type | input | output``), ellipses for the inputs and the outputs.
"""

from wengert.program.codegen import param_names
from wengert.program.ir import Variable, pretty_value

__all__ = ["to_dot"]


def _dot_escape(text):
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("<", "\\<").replace(">", "\\>") \
        .replace("{", "\\{").replace("}", "\\}").replace("|", "\\|")


def to_dot(program):
    """Graphviz dot of the dataflow graph, in the style of PyTorch's autograd graph pictures: a record
    per statement (``type | input | output``), ellipses for inputs and outputs."""
    names = param_names(program)
    lines = [f'digraph "{program.name}" {{', '    graph [rankdir = "LR"];',
             '    node [fontsize = "16" shape = "ellipse"];']
    producer = {}
    for var, name in zip(program.inputs, names):
        label = _dot_escape(f"{var.name}: {var.describe()}")
        if name != var.name:
            label = f"{_dot_escape(name)}\\n{label}"
        lines.append(f'    "{var.name}" [label = "{label}"];')
        producer[var] = f'"{var.name}"'
    for i, s in enumerate(program.statements):
        ins = ", ".join(pretty_value(a) for a in s.args)
        outs = ", ".join(o.name for o in s.outs)
        label = (f"<f0> type: {_dot_escape(s.prim.__name__)} | <f1> input: {_dot_escape(ins)} | "
                 f"<f2> output: {outs}")
        lines.append(f'    "s{i}" [label = "{label}" shape = "record"];')
        for v in dict.fromkeys(s.uses()):
            if v in producer:
                lines.append(f'    {producer[v]} -> "s{i}":f1;')
        for o in s.outs:
            producer[o] = f'"s{i}":f2'
    for j, o in enumerate(program.outputs):
        lines.append(f'    "out{j}" [label = "output {j}: {_dot_escape(pretty_value(o))}" style = "filled"];')
        if type(o) is Variable and o in producer:
            lines.append(f'    {producer[o]} -> "out{j}";')
    lines.append("}")
    return "\n".join(lines)

