"""What a reverse-mode recording keeps: each primitive's ``saves`` fact, and the release of the rest.

A primitive declares what its VJP rules read (``facts(prim, saves=...)``, ``wengert.core.extend``):
its output ``"out"`` and which positional arguments, by index or by the implementation's parameter
name, either once for every argument (``saves=(0,)``: ``sin`` reads ``x``) or per differentiated
argument (``saves={0: (1,), 1: (0,)}``: ``x * y`` reads ``y`` for x's cotangent and ``x`` for y's). A
primitive without the declaration keeps everything (user primitives included): nothing is guessed.

When a node is recorded, the array arguments its differentiated arguments' rules do not read are
replaced by :class:`Unsaved` (their shape and dtype, which broadcasting's adjoint and the buffers of
the backward pass read), so the forward pass's intermediates die as soon as Python drops them. A
node's own output is released the same way, once nothing but the graph refers to it: a trace that
keeps its Wengert list (``wg.grad``) counts, per candidate node, the references its children hold,
and :func:`sweep` compares that count with the node's reference count. A rule that reads what it did
not declare meets an :class:`Unsaved`, which refuses every use: the declaration is wrong, and the
error says so (``tests/rules/test_saves.py`` runs every rule of the rule table that way).
"""

import inspect
import sys
import weakref

import numpy as np

from wengert.core.trace import BOX_TYPES, SYMBOLIC_TYPES, unbox_all
from wengert.rules.broadcasting import dtype_of, shape_of

__all__ = ["read_only_view", "Unsaved", "UnsavedValueError", "needs", "saved_args", "sweep", "forget_pending"]

_ndarray = np.ndarray
_KEEP_ALL = None


class UnsavedValueError(RuntimeError):
    """A rule read a value its primitive's ``saves`` declaration says it does not read."""


class _UnsavedAttributeError(UnsavedValueError, AttributeError):
    """An attribute of an :class:`Unsaved` other than its shape and dtype was asked for."""


class Unsaved:
    """Stands for an array the tape did not keep: its ``shape`` and ``dtype`` (``ndim``, ``size``)
    only. Any other use raises :class:`UnsavedValueError` naming the primitive and the value."""

    __slots__ = ("shape", "dtype", "prim", "what")

    def __init__(self, value, prim, what):
        if type(value) is _ndarray:
            self.shape = value.shape
            self.dtype = value.dtype
        else:  # a box of a lower level (grad of grad): its own shape and dtype (a batch's are per example)
            self.shape = shape_of(value)
            self.dtype = dtype_of(value)
        self.prim = prim
        self.what = what

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape))

    def __repr__(self):
        return f"<not saved: {self.dtype} array of shape {self.shape}>"

    def _refuse(self, *args, **kwargs):
        name = getattr(self.prim, "__name__", "?")
        declared = repr(self.prim.saves)
        if len(declared) > 160:  # einsum's, one entry per operand
            declared = declared[:160] + " ...}"
        raise UnsavedValueError(
            f"wengert: a derivative rule of '{name}' used its {self.what} (an array of shape {self.shape}), "
            f"which '{name}' declares it does not read (saves={declared}), so the tape did not "
            f"keep it. The declaration is wrong: add the value to saves= in facts({name}, saves=...), "
            f"or remove the declaration (then everything is kept).")

    def __copy__(self):  # a placeholder, never changed: a copied graph (copy.deepcopy) shares it
        return self

    def __deepcopy__(self, memo):
        return self

    def __getattr__(self, name):  # anything but shape and dtype: an AttributeError too (hasattr is False)
        try:
            self._refuse()
        except UnsavedValueError as e:
            raise _UnsavedAttributeError(str(e)) from None


def _refusing(name):
    def refuse(self, *args, **kwargs):
        self._refuse()
    refuse.__name__ = name
    return refuse


for _name in ("__array__", "__array_ufunc__", "__len__", "__iter__", "__getitem__",
              "__setitem__", "__bool__", "__float__", "__int__", "__complex__", "__index__", "__neg__",
              "__pos__", "__abs__", "__invert__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
              "__rmul__", "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
              "__rmod__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__lt__", "__le__",
              "__gt__", "__ge__", "__and__", "__or__", "__xor__"):
    setattr(Unsaved, _name, _refusing(_name))
del _name


# -- the declaration, normalised --------------------------------------------------------------------

def _argnum(prim, item):
    """A ``saves`` item as an argument index, or "out"."""
    if item == "out" or type(item) is int:
        return item
    try:
        params = [p.name for p in inspect.signature(prim.fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    if item in params:
        return params.index(item)
    known = ", ".join(params) or "none known"
    raise ValueError(f"facts({prim.__name__}, saves=...): {item!r} is neither 'out', an argument index, "
                     f"nor a positional parameter of its implementation ({known})")


def _table(prim):
    """``prim.saves`` as ``frozenset`` (every argument) or ``{argnum: frozenset}``, with a cache of
    the masks met: ``[declared, table, {mask: frozenset or None}]``, kept on prim."""
    cached = prim.__dict__.get("_saves_table")
    declared = prim.saves
    if cached is not None and cached[0] is declared:
        return cached
    if isinstance(declared, dict):
        table = {_argnum(prim, k): frozenset(_argnum(prim, v) for v in
                                             ((vs,) if isinstance(vs, (str, int)) else vs))
                 for k, vs in declared.items()}
    else:
        table = frozenset(_argnum(prim, v) for v in declared)
    cached = prim._saves_table = [declared, table, {}]
    return cached


def needs(prim, parents):
    """What the rules of ``prim``'s differentiated arguments (``parents`` not None) read: a frozenset
    of argument indices and maybe "out"; None (everything) without a declaration."""
    if prim.saves is None:
        return _KEEP_ALL
    _, table, by_mask = _table(prim)
    if type(table) is frozenset:
        return table
    mask = tuple(p is not None for p in parents) if len(parents) != 2 else \
        (parents[0] is not None, parents[1] is not None)
    found = by_mask.get(mask, False)
    if found is False:
        found = frozenset()
        for i, differentiated in enumerate(mask):
            if differentiated:
                part = table.get(i)
                if part is None:  # no declaration for this argument: keep everything
                    found = _KEEP_ALL
                    break
                found = found | part
        by_mask[mask] = found
    return found


def saved_args(prim, args, parents):
    """``(args, keep_out)``: ``args`` with the arrays the rules do not read replaced by :class:`Unsaved`
    (arrays under :data:`MIN_BYTES` are kept: an ``Unsaved`` would save less than it costs)."""
    keep = needs(prim, parents)
    if keep is _KEEP_ALL:
        return args, True
    pruned = None
    i = -1
    for a in args:
        i += 1
        if i in keep:
            continue
        t = type(a)
        if t is _ndarray:
            if a.nbytes < MIN_BYTES:
                continue
        elif t in BOX_TYPES and t not in SYMBOLIC_TYPES:
            v = unbox_all(a)
            if type(v) in SYMBOLIC_TYPES or getattr(v, "nbytes", 0) < MIN_BYTES:
                continue
        else:
            continue
        if pruned is None:
            pruned = list(args)
        pruned[i] = Unsaved(a, prim, f"argument {i}")
    return (args if pruned is None else tuple(pruned)), "out" in keep


MIN_BYTES = 4096
"""Arrays smaller than this are kept whatever the declaration (and their nodes' outputs too)."""


# -- releasing outputs nothing but the graph refers to ----------------------------------------------

def _excess(pending, release):
    """``release(node)`` for each candidate of ``pending`` ({id(node): [children's references, prim,
    weak reference]}) whose reference count is its children's and the trace's list's alone (held
    weakly here, so the table makes no cycle with the nodes); the number of candidates left."""
    for key, entry in list(pending.items()):
        node = entry[2]()
        if node is None:
            del pending[key]
        elif sys.getrefcount(node) - entry[0] == _BASE and node._prim is entry[1]:
            release(node)
            del pending[key]
    return len(pending)


class _Probe:
    __slots__ = ("_prim", "__weakref__")


def _calibrate():
    """The reference count :func:`_excess` sees for a node held by the trace's list and the pending
    table only: measured with a probe (interpreters count differently), by trying counts in turn."""
    global _BASE
    released = []
    for base in range(1, 16):
        _BASE = base
        probe = _Probe()
        probe._prim = None
        holder = [probe]  # the trace's Wengert list
        pending = {id(probe): [0, None, weakref.ref(probe)]}
        del probe
        _excess(pending, released.append)
        del holder
        if released:
            released.clear()
            return base
    raise RuntimeError("wengert: could not measure the reference count of a recorded node")


_BASE = _calibrate()


def _release_value(node):
    node.value = Unsaved(node.value, node._prim, "output")


def sweep(trace):
    """Release the outputs of ``trace``'s pending nodes that nothing but the graph refers to."""
    pending = trace.pending
    if pending:
        if trace.entries is None:
            # the transform's pass is over, and values that outlived it (stored from inside the
            # function) are recorded without the list, whose reference :func:`_excess` counts on: a
            # node the user holds would look released. Stop releasing on this trace.
            trace.pending = False
            return
        survivors = _excess(pending, _release_value)
        trace.sweep_at = max(32, 2 * survivors)


def forget_pending(trace):
    """Stop releasing outputs on ``trace`` (its graph's references were rewritten: the counts no
    longer hold)."""
    if getattr(trace, "pending", None) is not None:
        trace.pending = False


def read_only_view(v):
    """A read-only view of ``v`` if it is a writeable array (anything else as it is). The values a graph
    holds are handed out so while the graph may still read them (a pullback not yet called, a value
    detached inside a transform): a write into one would silently change a derivative, and NumPy
    refuses it instead. A copy is writeable."""
    if type(v) is np.ndarray and v.flags.writeable:
        v = v.view()
        v.flags.writeable = False
    return v
