"""Activations and losses, as functions (``torch.nn.functional``'s names and meanings).

They accept plain arrays, ``wg.Tensor``s and values traced by ``wg.grad``. Numerically delicate
ones rest on the dedicated primitives of ``wengert.rules.nn`` (``log_softmax``,
``softmax_cross_entropy``); the others are composed from ``wengert.numpy``.
"""

import math

import numpy as np

import wengert.numpy as wnp
from wengert.core.trace import BOX_TYPES, unbox_all
from wengert.nn.convolution import (  # convolution and pooling (torch.nn.functional's names)
    adaptive_avg_pool2d,
    avg_pool1d,
    avg_pool2d,
    conv1d,
    conv2d,
    conv_transpose2d,
    max_pool1d,
    max_pool2d,
)
from wengert.rules import broadcasting
from wengert.rules import nn as nn_ops

__all__ = ["relu", "tanh", "sigmoid", "gelu", "softmax", "log_softmax",
           "cross_entropy", "nll_loss", "mse_loss", "binary_cross_entropy_with_logits",
           "batch_norm", "layer_norm", "group_norm", "scaled_dot_product_attention"]
__all__ += ["conv1d", "conv2d", "conv_transpose2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
            "adaptive_avg_pool2d"]

relu = nn_ops.relu
tanh = wnp.tanh


def sigmoid(x):
    """1 / (1 + exp(-x)) (torch.sigmoid), from z = exp(-|x|), which never overflows: 1 / (1 + z)
    for x >= 0 and z / (1 + z) below, accurate to rounding even far in the tails."""
    z = wnp.exp(-wnp.abs(x))
    return wnp.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))


_GELU_C = math.sqrt(2.0 / math.pi)


def gelu(x):
    """GELU, tanh approximation: x/2 (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))).

    This is PyTorch's ``gelu(x, approximate="tanh")``; the exact form needs ``erf``, which
    wengert.numpy does not have (it agrees with it to about 1e-3).
    """
    return 0.5 * x * (1.0 + wnp.tanh(_GELU_C * (x + 0.044715 * (x * x * x))))


def log_softmax(x, axis=-1, dim=None):
    """log(softmax(x)) along ``axis`` (or PyTorch's ``dim=``), computed stably (torch.log_softmax,
    jax.nn.log_softmax)."""
    return nn_ops.log_softmax(x, axis=axis if dim is None else dim)


def softmax(x, axis=-1, dim=None):
    """exp(x) / sum(exp(x)) along ``axis`` (or PyTorch's ``dim=``), via the stable log_softmax
    (torch.softmax)."""
    return wnp.exp(nn_ops.log_softmax(x, axis=axis if dim is None else dim))


def _reduce(losses, reduction, fname):
    if reduction == "mean":
        return wnp.mean(losses)
    if reduction == "sum":
        return wnp.sum(losses)
    if reduction == "none":
        return losses
    raise ValueError(f"{fname}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def cross_entropy(logits, labels, reduction="mean", weight=None, ignore_index=-100, label_smoothing=0.0):
    """Softmax cross-entropy from raw scores and integer class labels (torch.nn.functional.cross_entropy,
    DyNet's pickneglogsoftmax).

    ``logits`` has shape (..., classes): the classes on the *last* axis (JAX's and DyNet's layout;
    PyTorch puts them on axis 1 of (N, C, d1, ...), so move them with ``wnp.moveaxis(x, 1, -1)``
    first), ``labels`` the leading shape, of integers. The plain mean is one primitive
    (``softmax_cross_entropy``): its gradient is (softmax - onehot) / N. As in PyTorch, ``labels``
    may instead be class probabilities of the logits' own shape (one-hot rows, or soft targets):
    the loss is then ``-sum(labels * log_softmax(logits), -1)``, differentiable in both.

    PyTorch's options, with its meanings: ``weight`` (classes,) scales each class's terms, and the
    mean over integer labels is then the weighted mean ``sum(w[y] l) / sum(w[y])``; labels equal to
    ``ignore_index`` count for nothing (integer labels only); ``label_smoothing`` e mixes the target
    with the uniform distribution, (1 - e) target + e / classes.
    """
    plain = _plain(labels)
    smoothing = float(label_smoothing)
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must lie in [0, 1], got {label_smoothing}")
    if np.shape(plain) == np.shape(_plain(logits)) and np.asarray(plain).dtype.kind in "fc" \
            and np.ndim(plain) > 0:
        log_probs = nn_ops.log_softmax(logits)
        classes = np.shape(plain)[-1]
        if smoothing:
            labels = labels * (1.0 - smoothing) + smoothing / classes
        terms = labels * log_probs
        if weight is not None:
            terms = terms * _class_weight(weight, classes, "cross_entropy")
        return _reduce(-wnp.sum(terms, axis=-1), reduction, "cross_entropy")
    plain_mean = reduction == "mean" and weight is None and not smoothing
    batched = type(plain) in BOX_TYPES  # labels with a value per example under wg.vmap
    if plain_mean and (batched or not np.any(np.asarray(plain) == ignore_index)):
        return nn_ops.softmax_cross_entropy(logits, labels)
    return _nll(nn_ops.log_softmax(logits), plain, weight, ignore_index, reduction, smoothing,
                "cross_entropy")


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):  # noqa: A002 - PyTorch's names
    """Negative log-likelihood from log-probabilities (..., classes) and integer labels
    (torch.nn.functional.nll_loss, classes on the last axis): ``-input[..., target]``, scaled by
    ``weight[target]``; the mean is the weighted mean, labels equal to ``ignore_index`` left out."""
    return _nll(input, _plain(target), weight, ignore_index, reduction, 0.0, "nll_loss")


def _class_weight(weight, classes, fname):
    if tuple(_shape_of(weight)) != (classes,):
        raise ValueError(f"{fname}: weight must have shape ({classes},), one per class, got "
                         f"{tuple(_shape_of(weight))}")
    return weight


def _nll(log_probs, labels, weight, ignore_index, reduction, smoothing, fname):
    """PyTorch's nll_loss (with cross_entropy's label smoothing) over the last axis of ``log_probs``."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{fname}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    shape = _shape_of(log_probs)
    labels = np.asarray(labels)
    if labels.dtype.kind not in "iu":
        raise TypeError(f"{fname}: labels must be integer class indices of shape {shape[:-1]}, got dtype "
                        f"{labels.dtype}")
    valid = labels != ignore_index
    safe = nn_ops._check_labels(np.broadcast_to(np.zeros((), bool), shape), np.where(valid, labels, 0))
    classes = shape[-1]
    picked = -wnp.squeeze(_take_last(log_probs, safe), -1)
    scale = valid.astype(broadcasting.dtype_of(log_probs))
    if weight is not None:
        scale = _class_weight(weight, classes, fname)[safe] * scale
    losses = picked * scale
    if smoothing:
        spread = log_probs if weight is None else log_probs * weight
        uniform = -wnp.sum(spread, axis=-1) * valid.astype(broadcasting.dtype_of(log_probs))
        losses = losses * (1.0 - smoothing) + uniform * (smoothing / classes)
    if reduction == "none":
        return losses
    total = wnp.sum(losses)
    if reduction == "sum":
        return total
    if not valid.any():  # every label ignored: 0 / 0, and (as PyTorch) a zero gradient, not nan
        return total + np.nan
    return total / wnp.sum(scale)


def _plain(labels):
    return unbox_all(labels)


def _take_last(a, labels):
    """a[..., labels] position by position, keeping a trailing axis of length 1."""
    index = tuple(np.indices(labels.shape, sparse=True)) + (labels,)
    return wnp.expand_dims(a[index], -1)


def mse_loss(prediction, target, reduction="mean"):
    """Mean (or sum) of squared differences (torch.nn.functional.mse_loss)."""
    diff = prediction - target
    return _reduce(diff * diff, reduction, "mse_loss")


def binary_cross_entropy_with_logits(logits, targets, reduction="mean", weight=None, pos_weight=None):
    """Sigmoid cross-entropy from raw scores and targets in [0, 1]
    (torch.nn.functional.binary_cross_entropy_with_logits).

    Written as max(x, 0) - x t + log(1 + exp(-|x|)), which never overflows. PyTorch's options:
    ``pos_weight`` (broadcasting against the last axis: one per class) scales the positive term,
    -pw t log sigmoid(x); ``weight`` (broadcasting against the loss) scales each element.
    """
    if pos_weight is None:
        losses = wnp.maximum(logits, 0.0) - logits * targets + wnp.log1p(wnp.exp(-wnp.abs(logits)))
    else:  # (1 - t) x + (1 + (pw - 1) t) (-log sigmoid(x)), PyTorch's stable form
        minus_log_sigmoid = wnp.maximum(-logits, 0.0) + wnp.log1p(wnp.exp(-wnp.abs(logits)))
        losses = (1.0 - targets) * logits + (1.0 + (pos_weight - 1.0) * targets) * minus_log_sigmoid
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction, "binary_cross_entropy_with_logits")


# -- normalisation ---------------------------------------------------------------------------------

def _shape_of(x):
    return tuple(x.shape) if type(x) in BOX_TYPES else tuple(np.shape(x))


def _per_channel(v, ndim):
    """A (C,) vector shaped to broadcast against (N, C, *spatial)."""
    return wnp.reshape(v, (-1,) + (1,) * (ndim - 2)) if ndim > 2 else v


def batch_norm(input, running_mean, running_var, weight=None, bias=None,  # noqa: A002 - PyTorch's name
               training=False, momentum=0.1, eps=1e-5):
    """Batch normalisation over axis 1 of (N, C, *) (torch.nn.functional.batch_norm).

    Training: each channel is normalised by its batch mean and (biased) variance, and, where
    running statistics are given (plain NumPy arrays), they are updated in place with ``momentum``,
    the variance unbiased as in PyTorch; the update is bookkeeping, never differentiated. Not
    training: the running statistics normalise. Under ``wg.vmap`` the running statistics cannot be
    updated (each example would need its own): that is refused, as functorch does; use eval mode or
    pass None for them (each example then normalised by its own batch's statistics).
    """
    shape = _shape_of(input)
    if len(shape) < 2:
        raise ValueError(f"batch_norm: input must have shape (N, C, *), got {shape}")
    ndim = len(shape)
    axes = (0,) + tuple(range(2, ndim))
    if training:
        count = int(np.prod([shape[a] for a in axes]))
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got "
                             f"input of shape {shape}")
        mean = wnp.mean(input, axis=axes, keepdims=True)
        centred = input - mean
        var = wnp.mean(centred * centred, axis=axes, keepdims=True)
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, running_var, mean, var, momentum, count)
        normed = centred / wnp.sqrt(var + eps)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are needed when not training")
        normed = (input - _per_channel(running_mean, ndim)) / wnp.sqrt(_per_channel(running_var, ndim) + eps)
    if weight is not None:
        normed = normed * _per_channel(weight, ndim)
    if bias is not None:
        normed = normed + _per_channel(bias, ndim)
    return normed


def _update_running(running_mean, running_var, mean, var, momentum, count):
    mean_value, var_value = unbox_all(mean), unbox_all(var)
    if type(mean_value) in BOX_TYPES or type(var_value) in BOX_TYPES:
        raise ValueError("batch_norm: training mode updates the running statistics, which cannot be done "
                         "under wg.vmap or in a traced program (each example would need its own); "
                         "use eval() mode, or track_running_stats=False (running statistics None)")
    for buffer, value, name in ((running_mean, mean_value, "running_mean"),
                                (running_var, var_value * (count / (count - 1)), "running_var")):
        if buffer is None:
            continue
        if type(buffer) is not np.ndarray:
            raise TypeError(f"batch_norm: {name} must be a NumPy array (updated in place), got "
                            f"{type(buffer).__name__}")
        buffer *= 1.0 - momentum
        buffer += momentum * np.reshape(value, buffer.shape)


def layer_norm(input,  # noqa: A002 - PyTorch's name
               normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalisation over the last ``len(normalized_shape)`` axes (torch.nn.functional.layer_norm),
    biased variance, then ``* weight + bias`` (both of ``normalized_shape``)."""
    normalized_shape = (int(normalized_shape),) if np.ndim(normalized_shape) == 0 else tuple(normalized_shape)
    shape = _shape_of(input)
    k = len(normalized_shape)
    if k == 0 or shape[len(shape) - k:] != normalized_shape or len(shape) < k:
        raise ValueError(f"layer_norm: input of shape {shape} does not end in normalized_shape "
                         f"{normalized_shape}")
    axes = tuple(range(len(shape) - k, len(shape)))
    mean = wnp.mean(input, axis=axes, keepdims=True)
    centred = input - mean
    var = wnp.mean(centred * centred, axis=axes, keepdims=True)
    out = centred / wnp.sqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def group_norm(input,  # noqa: A002 - PyTorch's name
               num_groups, weight=None, bias=None, eps=1e-5):
    """Normalisation of (N, C, *) over groups of C / num_groups channels and the spatial axes
    (torch.nn.functional.group_norm), then ``* weight + bias`` per channel."""
    shape = _shape_of(input)
    if len(shape) < 2 or shape[1] % num_groups:
        raise ValueError(f"group_norm: input of shape {shape} needs (N, C, *) with C divisible by "
                         f"num_groups={num_groups}")
    grouped = wnp.reshape(input, (shape[0], num_groups, -1))
    mean = wnp.mean(grouped, axis=-1, keepdims=True)
    centred = grouped - mean
    var = wnp.mean(centred * centred, axis=-1, keepdims=True)
    out = wnp.reshape(centred / wnp.sqrt(var + eps), shape)
    if weight is not None:
        out = out * _per_channel(weight, len(shape))
    if bias is not None:
        out = out + _per_channel(bias, len(shape))
    return out


# -- attention -------------------------------------------------------------------------------------

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, rng=None):
    """softmax(q k^T * scale + mask) v over the last two axes
    (torch.nn.functional.scaled_dot_product_attention).

    ``query`` (..., L, E), ``key`` (..., S, E), ``value`` (..., S, Ev); ``scale`` defaults to
    1/sqrt(E). ``attn_mask``: boolean (True: may attend, as PyTorch) or float (added to the scores),
    broadcasting to (..., L, S); ``is_causal``: position i attends to j <= i. A row that may attend
    to nothing gives nan, as in PyTorch. ``dropout_p`` drops attention weights with ``rng`` (a
    Generator or seed; NumPy's global state by default).
    """
    q_shape, k_shape = _shape_of(query), _shape_of(key)
    if len(q_shape) < 2 or len(k_shape) < 2 or q_shape[-1] != k_shape[-1]:
        raise ValueError(f"scaled_dot_product_attention: query (..., L, E) and key (..., S, E) must share "
                         f"E; got shapes {q_shape} and {k_shape}")
    scale = 1.0 / math.sqrt(q_shape[-1]) if scale is None else float(scale)
    scores = (query @ wnp.swapaxes(key, -1, -2)) * scale
    L, S = q_shape[-2], k_shape[-2]
    if is_causal:
        if attn_mask is not None:
            raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal=True, not both")
        attn_mask = np.tril(np.ones((L, S), dtype=bool))
    if attn_mask is not None:
        mask = unbox_all(attn_mask) if np.asarray(unbox_all(attn_mask)).dtype == bool else attn_mask
        if type(mask) is np.ndarray and mask.dtype == bool:
            scores = wnp.where(mask, scores, -np.inf)
        else:
            scores = scores + mask
    weights = softmax(scores, axis=-1)
    if dropout_p > 0.0:
        draw = np.random.random if rng is None else np.random.default_rng(rng).random
        keep = draw(_shape_of(weights)) >= dropout_p
        weights = weights * (keep / (1.0 - dropout_p)).astype(unbox_all(weights).dtype)
    return weights @ value
