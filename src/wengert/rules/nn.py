"""Neural-network primitives: ``relu``, ``log_softmax`` and ``softmax_cross_entropy``.

Each is a primitive (rather than composed from ``maximum``, ``exp``, ``log`` and ``sum``) for a
stated reason:

- ``log_softmax`` for numerical stability: ``x - max(x) - log(sum(exp(x - max(x))))`` never
  overflows, and its VJP ``g - softmax(x) * sum(g)`` needs no division by a tiny probability.
- ``softmax_cross_entropy`` (DyNet's ``pickneglogsoftmax``, PyTorch's ``cross_entropy`` from
  logits with integer labels, mean over the batch) for stability and speed: one node on the tape
  whose VJP is the familiar ``(softmax(x) - onehot(labels)) / N``; it is also the single
  ``softmax`` function of PyTorch's autograd graph pictures.
- ``relu`` for speed: one node and a mask, instead of ``maximum``'s tie bookkeeping.

Rules call wengert's own functions, so second derivatives work.
"""

import numpy as np

from wengert.core.extend import defbatch, defjvp, defvjp, facts, nondiff_primitive
from wengert.core.primitive import Primitive, unary_function
from wengert.rules import broadcasting, elementwise, reductions

__all__ = ["relu", "log_softmax", "softmax_cross_entropy", "positive_mask", "one_hot"]


# -- relu -------------------------------------------------------------------------------------

def _relu_impl(x):
    """max(x, 0) elementwise (``torch.relu``, ``jax.nn.relu``)."""
    if type(x) is float:
        return 0.0 if x <= 0.0 else x  # nan stays nan, as in np.maximum
    return np.maximum(x, np.zeros((), dtype=np.result_type(x)))


def _positive_mask_impl(x):
    """1 where x > 0, else 0, in x's float dtype (relu's derivative; 0 at x == 0, as PyTorch)."""
    if type(x) is float:
        return 1.0 if x > 0.0 else 0.0
    return (x > 0).astype(np.result_type(x))


positive_mask = nondiff_primitive(_positive_mask_impl, "positive_mask")
facts(positive_mask, fresh=True)

relu = unary_function(Primitive(_relu_impl, name="relu"))
defvjp(relu, lambda g, out, x: g * positive_mask(x))  # a mask: the same map on tangents
defjvp(relu, *relu.primitive.vjps)
facts(relu, fresh=True)
facts(relu, saves=(0,))  # what its VJP reads (wengert.engines.saving)


# -- log_softmax ------------------------------------------------------------------------------

def _check_axis_array(x, fname):
    if np.ndim(x) == 0:
        raise ValueError(f"{fname}: needs an array of at least one dimension, got a scalar")


def _log_softmax_impl(x, axis=-1):
    """x - logsumexp(x, axis), computed with the maximum subtracted first."""
    _check_axis_array(x, "log_softmax")
    if not broadcasting.foreign(x):  # another library's array (Dask, CuPy) stays its own
        x = np.asarray(x)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


log_softmax = Primitive(_log_softmax_impl, name="log_softmax")
defvjp(log_softmax, lambda g, out, x, axis=-1:
       g - elementwise.exp(out) * reductions.sum(g, axis=axis, keepdims=True))
defjvp(log_softmax, lambda t, out, x, axis=-1:
       t - reductions.sum(elementwise.exp(out) * t, axis=axis, keepdims=True))
facts(log_softmax, fresh=True)
facts(log_softmax, saves=("out",))


# -- softmax_cross_entropy --------------------------------------------------------------------

def _check_labels(logits, labels):
    """``labels`` as an integer array matching ``logits.shape[:-1]``, values in [0, classes)."""
    shape = np.shape(logits)
    if len(shape) == 0:
        raise ValueError("cross_entropy: logits must have a class axis (shape (..., classes)), got a scalar")
    labels = np.asarray(labels)
    if labels.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: labels must be integer class indices (shape {shape[:-1]}) or "
                        f"class probabilities such as one-hot rows (shape {shape}), got dtype "
                        f"{labels.dtype} and shape {labels.shape}; for one 0/1 target per class "
                        f"(several labels at once) use binary_cross_entropy_with_logits")
    if labels.shape != shape[:-1]:
        raise ValueError(f"cross_entropy: logits of shape {shape} need labels of shape {shape[:-1]}, "
                         f"got labels of shape {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= shape[-1]):
        raise ValueError(f"cross_entropy: labels must lie in [0, {shape[-1]}), got values from "
                         f"{labels.min()} to {labels.max()}")
    return labels


def _one_hot_impl(labels, shape, dtype):
    """An array of ``shape`` (classes on the last axis): 1 at each label, 0 elsewhere."""
    out = np.zeros(shape, dtype=dtype)
    np.put_along_axis(out, np.asarray(labels)[..., None], 1, axis=-1)
    return out


one_hot = nondiff_primitive(_one_hot_impl, "one_hot")
facts(one_hot, fresh=True)


def _softmax_cross_entropy_impl(logits, labels, kept=0):
    """mean over positions of -log softmax(logits)[label]; with ``kept`` > 0, one mean for each index
    of the first ``kept`` axes (each example's, under ``wg.vmap``)."""
    labels = _check_labels(logits, labels)
    lsm = _log_softmax_impl(logits)
    picked = np.take_along_axis(lsm, labels[..., None], axis=-1)
    if kept:
        return -picked.mean(axis=tuple(range(kept, picked.ndim)))
    return lsm.dtype.type(-picked.mean())


def _ce_direction(logits, labels, kept):
    """d loss / d logits: (softmax(logits) - onehot(labels)) / N, N the positions in one mean."""
    n = max(int(np.prod(np.shape(labels)[kept:])), 1)
    target = one_hot(labels, broadcasting.shape_of(logits), broadcasting.dtype_of(logits))
    return (elementwise.exp(log_softmax(logits)) - target) * (1.0 / n)


def _ce_vjp(g, out, logits, labels, kept=0):
    if kept:  # one cotangent per kept index, spread over its positions and classes
        shape = broadcasting.shape_of(logits)
        g = broadcasting.reshape(g, tuple(shape[:kept]) + (1,) * (len(shape) - kept))
    return g * _ce_direction(logits, labels, kept)


def _ce_jvp(t, out, logits, labels, kept=0):
    axes = tuple(range(kept, len(broadcasting.shape_of(logits)))) if kept else None
    return reductions.sum(t * _ce_direction(logits, labels, kept), axis=axes)


softmax_cross_entropy = Primitive(_softmax_cross_entropy_impl, name="softmax_cross_entropy")
defvjp(softmax_cross_entropy, _ce_vjp, None)
defjvp(softmax_cross_entropy, _ce_jvp, None)
facts(softmax_cross_entropy, fresh=True)
facts(softmax_cross_entropy, saves=(0, 1))  # logits and labels both (not out)


# -- batching rules (wengert.engines.batching) ------------------------------------------------------

def _batch_log_softmax(prim, values, batched, kwargs):
    if any(batched[1:]):
        return NotImplemented
    x = values[0]
    axis = values[1] if len(values) > 1 else kwargs.get("axis", -1)
    (axis,) = broadcasting.example_axes(axis, len(broadcasting.shape_of(x)) - 1)
    return prim(x, axis=axis)


def _batch_softmax_cross_entropy(prim, values, batched, kwargs):
    """Each example's mean over its positions: the primitive itself, keeping one more leading axis."""
    logits, labels = values
    shape = tuple(broadcasting.shape_of(logits))
    if not batched[0]:
        logits = broadcasting.broadcast_to(logits, broadcasting.shape_of(labels)[:1] + shape)
        shape = tuple(broadcasting.shape_of(logits))
    elif not batched[1]:
        labels = np.broadcast_to(labels, shape[:-1])
    return prim(logits, labels, kept=kwargs.get("kept", 0) + 1)


def _batch_one_hot(prim, values, batched, kwargs):
    labels, shape, dtype = values
    if batched[1] or batched[2] or not batched[0]:
        return NotImplemented
    return prim(labels, broadcasting.shape_of(labels)[:1] + tuple(shape), dtype)


defbatch(relu, broadcasting.batch_unary)
defbatch(positive_mask, broadcasting.batch_unary)
defbatch(log_softmax, _batch_log_softmax)
defbatch(softmax_cross_entropy, _batch_softmax_cross_entropy)
defbatch(one_hot, _batch_one_hot)
