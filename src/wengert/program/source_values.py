"""The values the source interpreter handles: a traced value (``Symbol``) or a constant, the
interpreter's own hidden variables (``return`` value, ``break``/``continue`` flags), and snapshots
of the lists and dicts a function may change in place."""

import numpy as np

from wengert.program.ir import placeholder
from wengert.program.tracing import Symbol

_JUMP, _BRK, _RET = "__jump", "__break", "__return"
_CONTAINER_TYPES = (list, dict)


def _zero_like(v):
    ex = _ex(v)
    if type(ex) is float:
        return 0.0
    return np.zeros(np.shape(ex), np.result_type(ex))


def _map_symbols(obj, f):
    t = type(obj)
    if t is Symbol:
        f(obj)
    elif t is tuple or t is list:
        for o in obj:
            _map_symbols(o, f)
    elif t is slice:
        _map_symbols((obj.start, obj.stop, obj.step), f)


def _clean(name):
    return {_RET: "result", _JUMP: "jump", _BRK: "stop"}.get(name, name)


def _ex(v):
    return v.example if type(v) is Symbol else v


def _unsym(v):
    return v.variable if type(v) is Symbol else v


def _numeric(v):
    return type(v) is Symbol or isinstance(v, (bool, int, float, complex, np.generic, np.ndarray))


def _is_float(v):
    return np.result_type(_ex(v)).kind in "fc"


def _static_equal(a, b):
    try:
        return type(a) is type(b) and bool(np.all(a == b))
    except (TypeError, ValueError):
        return a is b

def _example(var):
    return placeholder(var)


def _snapshot(values):
    """Every list and dict reachable from ``values`` (through lists, dicts and tuples), with a
    shallow copy of its contents: what :func:`_changed` compares against."""
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


def _changed(snapshot):
    """The lists and dicts of ``snapshot`` whose contents changed since."""
    out = []
    for obj, saved in snapshot:
        if type(obj) is list:
            if len(obj) != len(saved) or any(a is not b for a, b in zip(obj, saved)):
                out.append(obj)
        elif obj.keys() != saved.keys() or any(obj[k] is not saved[k] for k in saved):
            out.append(obj)
    return out


def _restore(snapshot):
    for obj, saved in snapshot:
        if type(obj) is list:
            obj[:] = saved
        else:
            obj.clear()
            obj.update(saved)
