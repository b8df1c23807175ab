"""The values the source interpreter handles: a traced value (``Symbol``) or a constant, the
interpreter's own hidden variables (``return`` value, ``break``/``continue`` flags), and snapshots
of the lists and dicts a function may change in place."""

import numpy as np

from wengert.program.tracing import Symbol

__all__ = ["JUMP", "BRK", "RET", "HIDDEN", "CONTAINER_TYPES", "zero_like", "each_symbol", "clean_name",
           "example_of", "unsymbolic", "is_numeric", "is_float", "static_equal", "containers_snapshot",
           "changed_containers", "restore_containers"]

JUMP, BRK, RET = "__jump", "__break", "__return"
"""The interpreter's hidden variables: a ``break``/``continue``/``return`` was taken; the loop's break
flag; the function's result."""
HIDDEN = "__wg_"
"""The prefix of the names the reading adds to a function (``__wg_choice1``: the value of ``a if c else
b``; ``__wg_no_break1``: a loop's ``else`` runs), shown without it and its number in generated code."""
CONTAINER_TYPES = (list, dict)


def zero_like(v):
    """Zeros like ``v``'s value: what an ``if`` arm that has not returned yet gives as its result."""
    ex = example_of(v)
    if type(ex) is float:
        return 0.0
    return np.zeros(np.shape(ex), np.result_type(ex))


def each_symbol(obj, f):
    """Calls ``f`` on each Symbol in ``obj`` (through tuples, lists and slices)."""
    t = type(obj)
    if t is Symbol:
        f(obj)
    elif t is tuple or t is list:
        for o in obj:
            each_symbol(o, f)
    elif t is slice:
        each_symbol((obj.start, obj.stop, obj.step), f)


def clean_name(name):
    """The user-facing name of a variable (the hidden ones named ``result``, ``jump``, ``stop``,
    ``choice``, ``no_break``)."""
    if name.startswith(HIDDEN):
        return name[len(HIDDEN):].rstrip("0123456789") or "hidden"
    return {RET: "result", JUMP: "jump", BRK: "stop"}.get(name, name)


def example_of(v):
    """The value ``v`` stands for while the program is built (a Symbol's example)."""
    return v.example if type(v) is Symbol else v


def unsymbolic(v):
    """The IR value of ``v``: a Symbol's Variable, or the constant itself."""
    return v.variable if type(v) is Symbol else v


def is_numeric(v):
    """Whether ``v`` is a value a program can carry (a Symbol, a number or an array)."""
    return type(v) is Symbol or isinstance(v, (bool, int, float, complex, np.generic, np.ndarray))


def is_float(v):
    """Whether ``v`` holds floats or complex numbers (a derivative can flow through it)."""
    return np.result_type(example_of(v)).kind in "fc"


def static_equal(a, b):
    """Whether two static values are the same (then an ``if`` needs no phi output for them)."""
    try:
        return type(a) is type(b) and bool(np.all(a == b))
    except (TypeError, ValueError):
        return a is b

def containers_snapshot(values):
    """Every list and dict reachable from ``values`` (through lists, dicts and tuples), with a
    shallow copy of its contents: what :func:`changed_containers` compares against."""
    seen, out, todo = set(), [], list(values)
    while todo:
        v = todo.pop()
        t = type(v)
        if t is list or t is dict:
            if id(v) in seen:
                continue
            seen.add(id(v))
            out.append((v, list(v) if t is list else dict(v)))
            todo.extend(v if t is list else v.values())
        elif t is tuple:
            todo.extend(v)
    return out


def changed_containers(snapshot):
    """The lists and dicts of ``snapshot`` whose contents changed since."""
    out = []
    for obj, saved in snapshot:
        if type(obj) is list:
            if len(obj) != len(saved) or any(a is not b for a, b in zip(obj, saved)):
                out.append(obj)
        elif obj.keys() != saved.keys() or any(obj[k] is not saved[k] for k in saved):
            out.append(obj)
    return out


def restore_containers(snapshot):
    """Puts back the contents :func:`containers_snapshot` saved."""
    for obj, saved in snapshot:
        if type(obj) is list:
            obj[:] = saved
        else:
            obj.clear()
            obj.update(saved)
