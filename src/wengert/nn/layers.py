"""Layers: ``Linear``, ``Embedding``, ``Sequential``, ``MLP``, ``Dropout`` and activation modules.

Parameters are float32 by default, as in PyTorch; pass ``dtype=np.float64`` for gradient checks.
``Linear`` keeps its weight as (in_features, out_features) and computes ``x @ W + b`` (DyNet's and
JAX's layout; PyTorch stores the transpose), which saves a transpose per call.
"""

from collections.abc import Sequence

import numpy as np
from numpy.typing import DTypeLike

import wengert.numpy as wnp
from wengert.api.tensor import EAGER, Tensor, is_grad_enabled
from wengert.api.transforms import stop_gradient
from wengert.core.trace import BOX_TYPES, unbox_all
from wengert.engines.mutation import note_inplace_write
from wengert.nn import functional as F
from wengert.nn import init
from wengert.nn.module import Module, Parameter
from wengert.rules import broadcasting

__all__ = ["Linear", "Embedding", "Sequential", "MLP", "Dropout", "ReLU", "Tanh", "Sigmoid", "GELU",
           "Identity", "Flatten", "Softmax", "LogSoftmax"]


class Linear(Module):
    """y = x @ weight + bias (torch.nn.Linear, with the weight transposed); PyTorch's default
    initialisation U(-1/sqrt(in), 1/sqrt(in)) for both.

    ``weight`` has shape ``(in_features, out_features)``, the transpose of PyTorch's ``(out, in)``,
    on purpose: ``x @ weight`` is how NumPy and HIPS autograd code writes a layer (so parameters
    move between them and ``model.apply`` unchanged), it needs no transpose in the forward or the
    backward pass, and saved models keep one layout. ``load_state_dict`` transposes PyTorch's
    weights (see :meth:`Module.load_state_dict`), and ``state_dict(layout="torch")`` gives them back.
    """

    _TORCH_TRANSPOSED = ("weight",)

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 rng: np.random.Generator | int | None = None, dtype: DTypeLike = np.float32) -> None:
        super().__init__()
        rng = init.as_rng(rng)
        self.in_features, self.out_features = int(in_features), int(out_features)
        bound = 1.0 / np.sqrt(in_features)
        self.weight = Parameter(init.uniform((in_features, out_features), -bound, bound, rng, dtype))
        self.bias = Parameter(init.uniform((out_features,), -bound, bound, rng, dtype)) if bias else None

    def forward(self, x):
        y = x @ self.weight
        return y if self.bias is None else y + self.bias

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A table of vectors looked up by integer index (torch.nn.Embedding, DyNet's lookup parameters).

    Eagerly (``loss.backward()``), a lookup records only the rows it took: the weight's ``.grad``
    is a :class:`~wengert.nn.SparseRows`, and the optimizers update those rows and leave the rest
    of the table untouched. This is PyTorch's ``sparse=True``, and wengert's default; pass
    ``sparse=False`` for PyTorch's default, a dense gradient (with Adam every row's moments then
    decay at each step, as in PyTorch). Inside ``wg.grad`` (``model.apply(params, ...)``) a lookup
    is ordinary indexing and its gradient a dense array. Initialised N(0, 1), as PyTorch. The rows
    looked up while recording are kept (like accumulated gradients) until ``zero_grad()``; look up
    under ``wg.no_grad()`` when no gradient is wanted.

    PyTorch's options, with its meanings: ``padding_idx`` names a row that starts at zero and
    never receives a gradient; ``max_norm`` rescales, in place, each looked-up row whose
    ``norm_type``-norm exceeds it (on the module's own table, not on a weight given to ``apply``);
    ``scale_grad_by_freq`` divides each row's gradient by the number of times the batch looked it up.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=True, rng=None, dtype=np.float32):
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.weight = Parameter(init.normal((num_embeddings, embedding_dim), 1.0, rng, dtype))
        n = self.num_embeddings
        if padding_idx is not None:
            if not -n <= int(padding_idx) < n:
                raise ValueError(f"Embedding: padding_idx must lie in [-{n}, {n}) for a table of {n} rows, "
                                 f"got {padding_idx}")
            padding_idx = int(padding_idx) % n
            self.weight.value[padding_idx] = 0
        if max_norm is not None and not max_norm > 0:
            raise ValueError(f"Embedding: max_norm must be positive (or None), got {max_norm}")
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, float(norm_type)
        self.scale_grad_by_freq, self.sparse = bool(scale_grad_by_freq), bool(sparse)

    def forward(self, indices):
        indices = np.asarray(unbox_all(indices))
        if indices.dtype.kind not in "iu":
            raise TypeError(f"Embedding: indices must be integers, got dtype {indices.dtype}")
        if indices.size and (indices.min() < -self.num_embeddings or indices.max() >= self.num_embeddings):
            raise IndexError(f"Embedding: index out of range for a table of {self.num_embeddings} rows "
                             f"(got {indices.min()} .. {indices.max()})")
        indices = indices % self.num_embeddings
        w = self.weight
        if self.max_norm is not None:
            self._renormalise(w, indices)
        if type(w) is Parameter and self.sparse:
            rows = w.value[indices]
            if not (w.requires_grad and is_grad_enabled()):
                return Tensor.make(rows, EAGER, None, None, None, (), False)
            looked_up = Tensor.make(rows, EAGER, None, None, None, (), True)
            w._lookups.append((indices, looked_up))
            return self._gradient_options(looked_up, rows, indices)
        return self._gradient_options(w[indices], stop_gradient(w)[indices], indices)

    def _gradient_options(self, rows, constant_rows, indices):
        """``rows`` with padding_idx's gradient removed and scale_grad_by_freq's applied."""
        if self.scale_grad_by_freq and indices.size:
            counts = np.bincount(indices.ravel(), minlength=self.num_embeddings)[indices]
            scale = (1.0 / counts)[..., None].astype(broadcasting.dtype_of(rows))
            rows = constant_rows + (rows - constant_rows) * scale
        if self.padding_idx is not None:
            rows = wnp.where((indices == self.padding_idx)[..., None], constant_rows, rows)
        return rows

    def _renormalise(self, w, indices):
        """PyTorch's embedding_renorm_: looked-up rows longer than max_norm scaled to it, in place."""
        if type(w) is not Parameter:
            raise NotImplementedError("Embedding: max_norm rescales rows of the module's own table in "
                                      "place; with a weight given to apply() or functional_call(), "
                                      "rescale the rows yourself (or use max_norm=None)")
        table = w.value
        rows = np.unique(indices)
        norms = np.linalg.norm(table[rows], ord=self.norm_type, axis=-1)
        long = norms > self.max_norm
        if long.any():
            table[rows[long]] *= (self.max_norm / (norms[long] + 1e-7))[:, None].astype(table.dtype)
            note_inplace_write(table, "Embedding's max_norm renormalisation")

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        return s


class Sequential(Module):
    """Modules applied one after the other (torch.nn.Sequential); parameters named ``"0.weight"``..."""

    def __init__(self, *layers):
        super().__init__()
        self.layers = list(layers)

    def named_children(self):
        for i, m in enumerate(self.layers):
            yield str(i), m

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self):
        return len(self.layers)


class _Activation(Module):
    fun = None

    def forward(self, x):
        return type(self).fun(x)


class ReLU(_Activation):
    """max(x, 0) as a module."""
    fun = staticmethod(F.relu)


class Tanh(_Activation):
    """tanh as a module."""
    fun = staticmethod(wnp.tanh)


class Sigmoid(_Activation):
    """The logistic function as a module."""
    fun = staticmethod(F.sigmoid)


class GELU(_Activation):
    """GELU (tanh approximation) as a module."""
    fun = staticmethod(F.gelu)


class Identity(_Activation):
    """Returns its input."""
    fun = staticmethod(lambda x: x)


class Flatten(Module):
    """Flattens axes ``start_dim`` .. ``end_dim`` into one (torch.nn.Flatten; defaults keep axis 0,
    the batch)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def forward(self, x):
        shape = tuple(np.shape(unbox_all(x))) if type(x) not in BOX_TYPES else tuple(x.shape)
        n = len(shape)
        start, end = self.start_dim % max(n, 1), self.end_dim % max(n, 1)
        if n == 0 or start > end or not (-n <= self.start_dim < n and -n <= self.end_dim < n):
            raise ValueError(f"Flatten(start_dim={self.start_dim}, end_dim={self.end_dim}): input of "
                             f"shape {shape} has no such range of axes")
        return wnp.reshape(x, shape[:start] + (-1,) + shape[end + 1:])

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Softmax(Module):
    """softmax along ``dim`` as a module (torch.nn.Softmax; ``dim`` must be given, default -1)."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, axis=self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log_softmax along ``dim`` as a module (torch.nn.LogSoftmax)."""

    def forward(self, x):
        return F.log_softmax(x, axis=self.dim)


_ACTIVATIONS = {"relu": ReLU, "tanh": Tanh, "sigmoid": Sigmoid, "gelu": GELU, "identity": Identity}


class Dropout(Module):
    """Zero each element with probability ``p`` while training, scaling the rest by 1/(1-p)
    (torch.nn.Dropout, inverted dropout; p = 1 zeroes everything); the identity in eval mode.
    ``rng``: a Generator or seed (a keyword: PyTorch's second argument is ``inplace``, which
    wengert, never writing into its input, accepts only as False)."""

    def __init__(self, p=0.5, inplace=False, rng=None):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        if inplace is not False:
            raise ValueError(f"Dropout: inplace={inplace!r} is not supported (wengert never writes into its "
                             f"input; it returns a new array): leave it out, and give a seed as rng=")
        self.p = float(p)
        self.rng = init.as_rng(rng)

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        if self.p == 1.0:
            return x * 0.0
        shape = np.shape(unbox_all(x))
        keep = (self.rng.random(shape) >= self.p).astype(unbox_all(x).dtype if shape else float)
        return x * (keep / (1.0 - self.p))

    def extra_repr(self):
        return f"p={self.p}"


class MLP(Sequential):
    """Linear layers with an activation between them: ``MLP([64, 128, 10])`` is
    Linear(64, 128), ReLU, Linear(128, 10). Optional Dropout after each hidden activation."""

    def __init__(self, sizes: Sequence[int], activation: str = "relu", dropout: float = 0.0,
                 rng: np.random.Generator | int | None = None, dtype: DTypeLike = np.float32) -> None:
        sizes = [int(s) for s in sizes]
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError(f"MLP: sizes must list at least two positive layer widths, got {sizes}")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"MLP: activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        rng = init.as_rng(rng)
        layers: list[Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(Linear(a, b, rng=rng, dtype=dtype))
            if i < len(sizes) - 2:
                layers.append(_ACTIVATIONS[activation]())
                if dropout:
                    layers.append(Dropout(dropout, rng=rng))
        super().__init__(*layers)
        self.sizes = sizes
