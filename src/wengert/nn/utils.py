"""``clip_grad_norm_`` (``torch.nn.utils.clip_grad_norm_``): gradients rescaled in place so that
their joint norm is at most ``max_norm``."""

import math

import numpy as np

from wengert.api.tensor import EAGER, Tensor
from wengert.nn.module import Parameter, SparseRows

__all__ = ["clip_grad_norm_"]


def _grad_array(p):
    g = p.grad
    if g is None:
        return None
    if isinstance(g, SparseRows):
        return g.coalesce().values  # each row once: the same norm as the dense gradient
    return np.asarray(g.value)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale every parameter's ``.grad`` by ``min(1, max_norm / (total_norm + 1e-6))`` in place and
    return ``total_norm``, the ``norm_type``-norm of all gradients together (a Python float; inf
    for the max norm), as ``torch.nn.utils.clip_grad_norm_``. Parameters without a gradient are
    skipped. A sparse (embedding) gradient becomes dense when it is scaled."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    params = [p for p in parameters if p.grad is not None]
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"clip_grad_norm_: expected Parameters (or Tensors with .grad), got "
                            f"{type(p).__name__}")
    norm_type = float(norm_type)
    grads = [_grad_array(p) for p in params]
    if not grads:
        return 0.0
    if norm_type == math.inf:
        total = max(float(np.max(np.abs(g))) if g.size else 0.0 for g in grads)
    else:
        total = float(sum(float(np.sum(np.abs(g).astype(np.float64) ** norm_type)) for g in grads)) \
            ** (1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                           f"{total}; set error_if_nonfinite=False to clip anyway")
    coef = max_norm / (total + 1e-6)
    if coef < 1.0:
        for p in params:
            g = p.grad
            dense = g.to_dense() if isinstance(g, SparseRows) else np.array(g.value)
            scaled = (dense * coef).astype(dense.dtype, copy=False)
            if isinstance(p, Parameter):
                p.grad = None
                p._accumulate_grad(scaled)
            else:
                p.grad = Tensor.make(scaled, EAGER, None, None, None, (), False)
    return total
