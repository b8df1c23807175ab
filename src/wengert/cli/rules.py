"""``python -m wengert rules``: the rule table at a glance.

One line per differentiable primitive: its name, its family (the ``wengert.rules`` module defining it),
the modes it has rules for (``rev``: a VJP for every argument or ``rev(0,1)`` for some; ``fwd``
likewise; ``float``: a fused Python-float VJP), and the facts the program transformer relies on
(linear in which arguments, always returns a fresh buffer, broadcasts its arguments, and how
generated code spells it). The facts are gathered from where they are kept today (the passes'
and the renderer's tables); the table shows them together so that they can be checked at a glance.
"""

from wengert import rules as ops
from wengert.core.primitive import Primitive
from wengert.program import passes, rendering

__all__ = ["rows", "render"]


def _modes(prim):
    def covered(rules, argnum, letter):
        if argnum is not None:
            return letter
        given = [i for i, r in enumerate(rules) if r is not None]
        if not given:
            return ""
        return letter if len(given) == len(rules) else f"{letter}({','.join(map(str, given))})"

    parts = [covered(prim.vjps, prim.vjp_argnum, "rev"), covered(prim.jvps, prim.jvp_argnum, "fwd")]
    if prim.float_vjp is not None:
        parts.append("float")
    return " ".join(p for p in parts if p)


def _spelling(prim, family):
    name = prim.__name__
    if name in rendering.OPERATORS:
        return f"a {rendering.OPERATORS[name]} b"
    if name in rendering.UNARY_OPERATORS:
        return f"{rendering.UNARY_OPERATORS[name]}a"
    if name in rendering.HELPERS:
        return f"{name}(...) (helper)"
    if f"wengert.rules.{family}" in rendering.KNOWN_FAMILIES:
        math = rendering.MATH_UNARY.get(name) or rendering.MATH_BINARY.get(name)
        return f"np.{name}" + (f", math.{math} on floats" if math else "")
    return "its implementation"


def rows():
    """``[(name, family, modes, facts, spelling)]`` for every differentiable primitive, by family."""
    out, seen = [], set()
    for module in ops.families():
        for value in vars(module).values():
            prim = getattr(value, "primitive", value)  # fast entry points carry their Primitive
            if not isinstance(prim, Primitive) or prim.nondiff or id(prim) in seen:
                continue
            seen.add(id(prim))
            home = getattr(prim.fun, "__module__", "") or ""
            family = (home if home.startswith("wengert.rules.") else module.__name__).rpartition(".")[2]
            name = prim.__name__
            facts = []
            if name in passes._LINEAR:
                facts.append("linear in " + ",".join(map(str, passes._LINEAR[name])))
            if name in passes._FRESH:
                facts.append("fresh")
            if name in passes._BROADCASTING:
                facts.append("broadcasts")
            out.append((name, family, _modes(prim), ", ".join(facts), _spelling(prim, family)))
    return sorted(out, key=lambda r: (r[1], r[0]))


def render():
    """The table as aligned text, with a count per family at the end."""
    table = rows()
    head = ("primitive", "family", "modes", "facts", "generated code")
    widths = [max(len(head[i]), *(len(r[i]) for r in table)) for i in range(4)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)) + "  " + head[4]]
    lines.append("  ".join("-" * w for w in widths) + "  " + "-" * len(head[4]))
    for r in table:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4])
    counts = {}
    for r in table:
        counts[r[1]] = counts.get(r[1], 0) + 1
    lines.append("")
    lines.append(f"{len(table)} primitives: " + ", ".join(f"{f} {n}" for f, n in sorted(counts.items())))
    return "\n".join(lines)
