"""``python -m wengert rules``: the rule table at a glance.

One line per differentiable primitive: its name, its family (the ``wengert.rules`` module defining it),
the modes it has rules for (``rev``: a VJP for every argument or ``rev(0,1)`` for some; ``fwd``
likewise; ``float``: a fused Python-float VJP; ``vmap``: a batching rule), and the facts the program
transformer relies on (linear in which arguments, always returns a fresh buffer, broadcasts its
arguments, and how generated code spells it), read from the primitive itself
(``wengert.core.extend.facts``), so that they can be checked at a glance.
"""

from wengert import rules as ops
from wengert.core.primitive import Primitive
from wengert.engines.batching import batching_rule
from wengert.program import rendering

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
    if batching_rule(prim) is not None:
        parts.append("vmap")
    return " ".join(p for p in parts if p)


def _spelling(prim):
    name = prim.__name__
    if prim.operator is not None:
        return f"{prim.operator}a" if len(prim.vjps) == 1 else f"a {prim.operator} b"
    if prim.helper is not None:
        return f"{name}(...) (helper)"
    if rendering.numpy_name(prim) is not None:
        math = prim.math_name
        return f"np.{name}" + (f", math.{math} on floats" if math else "")
    return "its implementation"


def _facts(prim):
    facts = []
    if prim.linear:
        facts.append("linear in " + ",".join(map(str, prim.linear)))
    if prim.fresh:
        facts.append("fresh")
    if prim.broadcasts:
        facts.append("broadcasts")
    return ", ".join(facts)


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
            out.append((prim.__name__, family, _modes(prim), _facts(prim), _spelling(prim)))
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
