"""``Module`` and ``Parameter``: models that find their own parameters (``torch.nn.Module``'s habits).

A module's parameters are its attributes that are :class:`Parameter`s; its sub-modules are its
attributes that are modules, or lists/tuples of modules. Both ways of training work:

- eager, PyTorch style: ``loss = f(model(x)); loss.backward(); opt.step()`` -- parameters are
  ``wg.Tensor`` leaves that accumulate ``.grad``;
- functional, JAX style: ``params = model.parameters_tree()`` (nested dicts of arrays) and
  ``model.apply(params, x)`` inside a function given to ``wg.grad``.

``state_dict()`` is a flat dict of dotted names to arrays; ``save``/``load`` write and read it as a
NumPy ``.npz`` file (never pickle: loading runs no code).
"""

import contextlib

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
        """Training mode (Dropout active) for this module and all sub-modules; returns self."""
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

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self):
        """A flat dict: dotted parameter name -> a copy of its array."""
        return {name: np.array(p.value) for name, p in self.named_parameters()}

    def load_state_dict(self, state, strict=True):
        """Copy arrays into the parameters, in place (optimizers keep their references).

        With ``strict`` the names must match exactly; shapes must always match.
        """
        params = dict(self.named_parameters())
        missing = sorted(set(params) - set(state))
        unexpected = sorted(set(state) - set(params))
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing parameters {missing}, unexpected entries {unexpected}")
        for name, p in params.items():
            if name not in state:
                continue
            value = np.asarray(unbox_all(state[name]))
            if value.shape != p.shape:
                raise ValueError(f"load_state_dict: '{name}' has shape {p.shape} in the model but "
                                 f"{value.shape} in the state")
            np.copyto(p.value, value, casting="same_kind")
            note_inplace_write(p.value, f"load_state_dict into '{name}'")  # as PyTorch's param.copy_
        return self

    def save(self, path):
        """Write the state dict to ``path`` as a NumPy .npz file."""
        np.savez(path, **self.state_dict())

    def load(self, path, strict=True):
        """Read parameters written by :meth:`save` (no pickle); returns self."""
        with np.load(path, allow_pickle=False) as data:
            return self.load_state_dict({k: data[k] for k in data.files}, strict=strict)

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
