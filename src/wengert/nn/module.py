"""``Module`` and ``Parameter``: models that find their own parameters (``torch.nn.Module``'s habits).

A module's parameters are its attributes that are :class:`Parameter`s; its sub-modules are its
attributes that are modules, or lists/tuples of modules. Both ways of training work:

- eager, PyTorch style: ``loss = f(model(x)); loss.backward(); opt.step()`` -- parameters are
  ``wg.Tensor`` leaves that accumulate ``.grad``;
- functional, JAX style: ``params = model.parameters_tree()`` (nested dicts of arrays) and
  ``model.apply(params, x)`` inside a function given to ``wg.grad``.

Buffers (``register_buffer``: batch norm's running statistics) are plain NumPy arrays, never
traced. ``state_dict()`` is a flat dict of dotted names to arrays, parameters and buffers in
PyTorch's order; ``load_state_dict`` also takes PyTorch's (converted to NumPy), transposing
``Linear`` weights; ``save``/``load`` write and read it as a NumPy ``.npz`` file (never pickle).
"""

import contextlib
import weakref

import numpy as np

from wengert.api.tensor import EAGER, Tensor
from wengert.core.trace import register_box, unbox_all
from wengert.engines.mutation import note_inplace_write

__all__ = ["Module", "Parameter", "SparseRows", "functional_call"]


@register_box
class Parameter(Tensor):
    """A leaf ``Tensor`` that requires grad and that a :class:`Module` registers (torch.nn.Parameter).

    The array is copied. A parameter looked up by ``Embedding`` also collects *sparse* gradients:
    ``.grad`` is then a :class:`SparseRows` (unless dense gradients reached it too).
    """

    __slots__ = ("_lookups",)

    def __init__(self, data, requires_grad=True):
        value = np.array(unbox_all(data))
        if value.dtype.kind not in "fc":
            value = value.astype(np.float32)
        self._fill(value, EAGER, None, None, None, (), bool(requires_grad))
        self._lookups = []

    @property
    def grad(self):
        """Accumulated gradient: a Tensor, a :class:`SparseRows` (row lookups only), or None."""
        dense = getattr(self, "_grad", None)
        rows = [(idx, t.grad.value) for idx, t in self._lookups if t.grad is not None]
        if not rows:
            return dense
        sparse = SparseRows(np.concatenate([np.ravel(i) for i, _ in rows]),
                            np.concatenate([g.reshape(-1, *self.shape[1:]) for _, g in rows]), self.shape)
        if dense is None:
            return sparse
        return Tensor.make(sparse.add_to(np.array(dense.value)), EAGER, None, None, None, (), False)

    @grad.setter
    def grad(self, value):
        """Replace the whole gradient (dense and sparse parts); ``None`` forgets it."""
        Tensor.grad.fset(self, value)
        self._lookups = []

    def _accumulate_grad(self, g):
        """Dense accumulation, kept apart from the embedding lookups' rows (see ``grad``)."""
        if type(g) is not float:
            g = np.array(g, dtype=self.dtype)
        prev = getattr(self, "_grad", None)
        self._grad = Tensor.make(g if prev is None else prev.value + g, EAGER, None, None, None, (), False)

    def __repr__(self):
        return "Parameter(" + Tensor.__repr__(self)[len("tensor("):]


class SparseRows:
    """A gradient that is nonzero only in some rows: ``values[k]`` belongs to row ``indices[k]``
    (repeated indices add). What an embedding's weight receives (torch's sparse gradients)."""

    def __init__(self, indices, values, shape):
        self.indices = np.asarray(indices, dtype=np.intp)
        self.values = np.asarray(values)
        self.shape = tuple(shape)

    def coalesce(self):
        """The same gradient with each row once, in increasing order."""
        rows, inverse = np.unique(self.indices, return_inverse=True)
        values = np.zeros((len(rows),) + self.values.shape[1:], dtype=self.values.dtype)
        np.add.at(values, inverse, self.values)
        return SparseRows(rows, values, self.shape)

    def add_to(self, array):
        """``array`` with these rows added, in place; returns it."""
        np.add.at(array, self.indices, self.values.astype(array.dtype, copy=False))
        return array

    def to_dense(self):
        """The full gradient as a NumPy array."""
        return self.add_to(np.zeros(self.shape, dtype=self.values.dtype))

    def __repr__(self):
        return f"SparseRows({len(self.indices)} rows of a {self.shape} array)"


class Module:
    """Base class of models (torch.nn.Module). Subclasses set attributes in ``__init__`` (call
    ``super().__init__()`` first) and define ``forward``; call the module itself."""

    def __init__(self):
        self.training = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward(...)")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # -- discovery ------------------------------------------------------------------------------
    def named_children(self):
        """(name, module) for each direct sub-module; list elements are named ``name.i``."""
        for name, value in vars(self).items():
            if isinstance(value, Module):
                yield name, value
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    if isinstance(item, Module):
                        yield f"{name}.{i}", item

    def children(self):
        return [m for _, m in self.named_children()]

    def named_modules(self, prefix=""):
        """(dotted name, module) for this module and every sub-module, depth first."""
        seen = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            kids = [(f"{name}.{n}" if name else n, m) for n, m in module.named_children()]
            stack.extend(reversed(kids))

    def modules(self):
        return [m for _, m in self.named_modules()]

    def _own_parameters(self):
        for name, value in vars(self).items():
            if isinstance(value, Parameter):
                yield name, value

    def named_parameters(self):
        """(dotted name, Parameter) for every parameter, each once (shared ones under their first name)."""
        seen = set()
        for prefix, module in self.named_modules():
            for name, p in module._own_parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{prefix}.{name}" if prefix else name), p

    def parameters(self):
        """Every parameter, as a list (torch.nn.Module.parameters)."""
        return [p for _, p in self.named_parameters()]

    def num_parameters(self):
        """How many numbers the parameters hold."""
        return int(sum(p.size for p in self.parameters()))

    # -- modes ----------------------------------------------------------------------------------
    def train(self, mode=True):
        """Training mode (Dropout active, batch norm on batch statistics) for this module and all
        sub-modules; returns self."""
        for m in self.modules():
            m.training = mode
        return self

    def eval(self):
        """Evaluation mode (Dropout off); returns self."""
        return self.train(False)

    def zero_grad(self):
        """Forget every parameter's gradient (sets ``.grad`` to None, as PyTorch 2 does)."""
        for p in self.parameters():
            p.grad = None

    # -- buffers --------------------------------------------------------------------------------
    def register_buffer(self, name, value, persistent=True):
        """Keep ``value`` (an array, or None) as state that is not a parameter (torch's
        ``register_buffer``): batch norm's running statistics. Buffers are plain NumPy arrays, never
        traced or differentiated; ``state_dict`` holds them (unless ``persistent=False``)."""
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"{type(self).__name__}.register_buffer: name must be a non-empty string "
                           f"without '.', got {name!r}")
        if isinstance(vars(self).get(name), (Parameter, Module)):
            raise KeyError(f"{type(self).__name__}.register_buffer: '{name}' is already a parameter "
                           f"or sub-module")
        names = vars(self).setdefault("_buffer_names", {})
        names[name] = bool(persistent)
        object.__setattr__(self, name, None if value is None else np.asarray(unbox_all(value)))

    def _own_buffers(self, persistent_only=False):
        for name, persistent in vars(self).get("_buffer_names", {}).items():
            value = getattr(self, name)
            if value is not None and (persistent or not persistent_only):
                yield name, value

    def named_buffers(self):
        """(dotted name, array) for every buffer (torch.nn.Module.named_buffers)."""
        for prefix, module in self.named_modules():
            for name, value in module._own_buffers():
                yield (f"{prefix}.{name}" if prefix else name), value

    def buffers(self):
        """Every buffer's array, as a list."""
        return [b for _, b in self.named_buffers()]

    # -- state ----------------------------------------------------------------------------------
    def _state_slots(self):
        """name -> (module, attribute, kind) for every parameter and persistent buffer, in PyTorch's
        order (each module's parameters, then its buffers, depth first); shared parameters once."""
        slots, seen = {}, set()
        for prefix, module in self.named_modules():
            for name, p in module._own_parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    slots[f"{prefix}.{name}" if prefix else name] = (module, name, "parameter")
            for name, _ in module._own_buffers(persistent_only=True):
                slots[f"{prefix}.{name}" if prefix else name] = (module, name, "buffer")
        return slots

    def state_dict(self, layout="wengert"):
        """A flat dict: dotted name -> a copy of each parameter's and buffer's array.

        ``layout="torch"`` gives PyTorch's layouts (``Linear.weight`` transposed to (out, in)), for
        ``torch_model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})``.
        """
        if layout not in ("wengert", "torch"):
            raise ValueError(f"state_dict: layout must be 'wengert' or 'torch', got {layout!r}")
        state = {}
        for key, (module, attr, _) in self._state_slots().items():
            value = np.array(unbox_all(getattr(module, attr)))
            if attr in module._TORCH_TRANSPOSED:
                if layout == "torch":
                    value = np.ascontiguousarray(value.T)
                _HANDED_OUT[layout][id(value)] = value  # so that loading it back knows its layout
            state[key] = value
        return state

    _TORCH_TRANSPOSED = ()  # attribute names whose arrays PyTorch stores transposed (Linear's weight)

    def load_state_dict(self, state, strict=True, layout="auto"):
        """Copy arrays into the parameters and buffers, in place (optimizers keep their references).

        Accepts wengert's own ``state_dict()`` and PyTorch's converted to NumPy
        (``{k: v.numpy() for k, v in torch_model.state_dict().items()}``): ``layout="auto"`` takes
        the state as PyTorch's when a ``Linear`` weight has only PyTorch's (out, in) shape, and
        transposes every ``Linear`` weight then; a state whose ``Linear`` weights are all square
        cannot tell: it is refused unless its weights are PyTorch tensors or the arrays a
        ``state_dict()`` call returned (their layout is known) -- give ``layout="torch"`` (or
        ``"wengert"``) to say.
        With ``strict`` (the default) missing and unexpected names are refused; shapes must always
        match. Everything is checked before anything is written: an error loads nothing.
        """
        if layout not in ("auto", "wengert", "torch"):
            raise ValueError(f"load_state_dict: layout must be 'auto', 'wengert' or 'torch', got {layout!r}")
        slots = self._state_slots()
        missing = [k for k in slots if k not in state]
        unexpected = [k for k in state if k not in slots]
        if strict and (missing or unexpected):
            raise KeyError(f"{type(self).__name__}.load_state_dict: missing keys {missing}, unexpected "
                           f"keys {unexpected} (strict=False loads the names that match)")
        present = {k: slot for k, slot in slots.items() if k in state}
        if layout == "auto":
            layout = self._guess_layout(present, state)
        writes = []
        for key, (module, attr, kind) in present.items():
            target = getattr(module, attr)
            target_value = unbox_all(target)
            value = np.asarray(unbox_all(state[key]))
            if layout == "torch" and attr in module._TORCH_TRANSPOSED and value.ndim == 2:
                value = value.T
            if value.shape != np.shape(target_value):
                where = f"{type(module).__name__} '{key.rpartition('.')[0]}'" if "." in key \
                    else type(module).__name__
                hint = (" (PyTorch's (out, in) layout? wengert's Linear keeps (in, out); pass layout='torch')"
                        if attr in module._TORCH_TRANSPOSED and value.shape[::-1] == np.shape(target_value)
                        else "")
                raise ValueError(f"load_state_dict: {where}, key '{key}': expected shape "
                                 f"{tuple(np.shape(target_value))}, given {value.shape}{hint}")
            if not np.can_cast(value.dtype, np.asarray(target_value).dtype, casting="same_kind"):
                raise TypeError(f"load_state_dict: key '{key}': cannot store dtype {value.dtype} in "
                                f"{np.asarray(target_value).dtype}")
            writes.append((key, module, attr, kind, target_value, value))
        for key, module, attr, kind, target_value, value in writes:
            if kind == "parameter":
                np.copyto(target_value, value, casting="same_kind")
                note_inplace_write(target_value, f"load_state_dict into '{key}'")  # as PyTorch's copy_
            else:
                object.__setattr__(module, attr, np.array(value, dtype=np.asarray(target_value).dtype))
        return self

    @staticmethod
    def _guess_layout(present, state):
        """'torch' or 'wengert', from the transposed weights' shapes; a square one tells only when it
        is a PyTorch tensor or an array that ``state_dict`` handed out. Nothing to tell by: refused."""
        votes, square = set(), []
        for key, (module, attr, _) in present.items():
            if attr in module._TORCH_TRANSPOSED:
                value = state[key]
                want, given = np.shape(unbox_all(getattr(module, attr))), np.shape(unbox_all(value))
                if type(value).__module__.partition(".")[0] == "torch":
                    votes.add("torch")  # a torch.Tensor straight from a PyTorch state_dict
                elif want != want[::-1]:
                    if given == want:
                        votes.add("wengert")
                    elif given == want[::-1]:
                        votes.add("torch")
                else:
                    known = [name for name, arrays in _HANDED_OUT.items() if arrays.get(id(value)) is value]
                    if known:
                        votes.update(known)
                    else:
                        square.append(key)
        if len(votes) > 1:
            raise ValueError("load_state_dict: the state's Linear weights are in both layouts, some "
                             "(in, out) as wengert's and some (out, in) as PyTorch's; convert them to "
                             "one and pass layout='torch' or layout='wengert'")
        if not votes and square:
            raise ValueError(f"load_state_dict: the Linear weights {square} are square, so their layout "
                             f"cannot be told: pass layout='torch' for PyTorch's (out, in) (a state_dict "
                             f"from torch), or layout='wengert' for wengert's (in, out)")
        return votes.pop() if votes else "wengert"

    def save(self, path):
        """Write the state dict to ``path`` as a NumPy .npz file."""
        np.savez(path, **self.state_dict())

    def load(self, path, strict=True):
        """Read parameters written by :meth:`save` (no pickle); returns self."""
        with np.load(path, allow_pickle=False) as data:
            return self.load_state_dict({k: data[k] for k in data.files}, strict=strict, layout="wengert")

    # -- functional use -------------------------------------------------------------------------
    def parameters_tree(self):
        """The parameters' arrays as nested dicts (``{"0": {"weight": ..., "bias": ...}, ...}``),
        a pytree for ``wg.grad``; the arrays are the parameters' own (not copies)."""
        tree = {}
        for name, p in self.named_parameters():
            *path, leaf = name.split(".")
            node = tree
            for part in path:
                node = node.setdefault(part, {})
            node[leaf] = p.value
        return tree

    def apply(self, params, *args, **kwargs):
        """Call the module with ``params`` (as from :meth:`parameters_tree`) in place of its
        parameters: the functional form, for ``wg.grad(lambda params: loss(model.apply(params, x)))``."""
        with self.using(params):
            return self(*args, **kwargs)

    @contextlib.contextmanager
    def using(self, params):
        """Context manager: the module computes with ``params`` in place of its parameters."""
        slots = {}
        for prefix, module in self.named_modules():
            for name, _ in module._own_parameters():
                slots[f"{prefix}.{name}" if prefix else name] = (module, name)
        flat = dict(_flatten_names(params))
        if set(flat) != set(slots):
            missing, unexpected = sorted(set(slots) - set(flat)), sorted(set(flat) - set(slots))
            raise KeyError(f"{type(self).__name__}.apply: params do not match the model's parameters: "
                           f"missing {missing}, unexpected {unexpected}")
        saved = []
        try:
            for name, (module, attr) in slots.items():
                saved.append((module, attr, vars(module)[attr]))
                object.__setattr__(module, attr, flat[name])
            yield self
        finally:
            for module, attr, value in saved:
                object.__setattr__(module, attr, value)

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        kids = list(self.named_children())
        for name, m in kids:
            lines.append(f"  ({name}): " + repr(m).replace("\n", "\n  "))
        return "\n".join(lines) + ("\n)" if kids else ")")

    def extra_repr(self):
        return ""


# the Linear weights each state_dict() call handed out, by layout (weakly: id -> the array itself),
# so that loading that state back knows the layout of square weights, whose shape cannot tell
_HANDED_OUT: dict[str, weakref.WeakValueDictionary] = {
    "wengert": weakref.WeakValueDictionary(), "torch": weakref.WeakValueDictionary()}


def functional_call(module, params, args, kwargs=None):
    """``module(*args, **kwargs)`` computed with ``params`` in place of its parameters
    (``torch.func.functional_call``); ``args`` a tuple, or one argument. ``params`` maps dotted names
    to arrays (``{"0.weight": ..., ...}``) or is nested dicts (:meth:`Module.parameters_tree`). With it
    a module's per-example gradients are one line::

        grads = wg.vmap(wg.grad(loss), in_axes=(None, 0, 0))(model.parameters_tree(), X, y)

    where ``loss(params, x, y)`` calls ``functional_call(model, params, x)`` on one example.
    """
    if not isinstance(module, Module):
        raise TypeError(f"functional_call expects a wengert.nn.Module, got {type(module).__name__}")
    args = args if type(args) is tuple else (args,)
    with module.using(params):
        return module(*args, **(kwargs or {}))


def _flatten_names(tree, prefix=""):
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _flatten_names(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, tree
