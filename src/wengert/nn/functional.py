"""Activations and losses, as functions (``torch.nn.functional``'s names and meanings).

They accept plain arrays, ``wg.Tensor``s and values traced by ``wg.grad``. Numerically delicate
ones rest on the dedicated primitives of ``wengert.rules.nn`` (``log_softmax``,
``softmax_cross_entropy``); the others are composed from ``wengert.numpy``.
"""

import math

import numpy as np

import wengert.numpy as wnp
from wengert.core.trace import unbox_all
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
from wengert.rules import nn as nn_ops

__all__ = ["relu", "tanh", "sigmoid", "gelu", "softmax", "log_softmax",
           "cross_entropy", "mse_loss", "binary_cross_entropy_with_logits"]
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


def log_softmax(x, axis=-1):
    """log(softmax(x)) along ``axis``, computed stably (torch.log_softmax, jax.nn.log_softmax)."""
    return nn_ops.log_softmax(x, axis=axis)


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along ``axis``, via the stable log_softmax (torch.softmax)."""
    return wnp.exp(nn_ops.log_softmax(x, axis=axis))


def _reduce(losses, reduction, fname):
    if reduction == "mean":
        return wnp.mean(losses)
    if reduction == "sum":
        return wnp.sum(losses)
    if reduction == "none":
        return losses
    raise ValueError(f"{fname}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def cross_entropy(logits, labels, reduction="mean"):
    """Softmax cross-entropy from raw scores and integer class labels (torch.nn.functional.cross_entropy,
    DyNet's pickneglogsoftmax).

    ``logits`` has shape (..., classes), ``labels`` the leading shape, of integers. The mean is one
    primitive (``softmax_cross_entropy``): its gradient is (softmax - onehot) / N. As in PyTorch,
    ``labels`` may instead be class probabilities of the logits' own shape (one-hot rows, or soft
    targets): the loss is then ``-sum(labels * log_softmax(logits), -1)``, differentiable in both.
    """
    plain = _plain(labels)
    if np.shape(plain) == np.shape(_plain(logits)) and np.asarray(plain).dtype.kind in "fc" \
            and np.ndim(plain) > 0:
        picked = wnp.sum(labels * nn_ops.log_softmax(logits), axis=-1)
        return _reduce(-picked, reduction, "cross_entropy")
    if reduction == "mean":
        return nn_ops.softmax_cross_entropy(logits, labels)
    labels = nn_ops._check_labels(logits, _plain(labels))
    picked = wnp.squeeze(_take_last(nn_ops.log_softmax(logits), labels), -1)
    return _reduce(-picked, reduction, "cross_entropy")


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


def binary_cross_entropy_with_logits(logits, targets, reduction="mean"):
    """Sigmoid cross-entropy from raw scores and targets in [0, 1]
    (torch.nn.functional.binary_cross_entropy_with_logits).

    Written as max(x, 0) - x t + log(1 + exp(-|x|)), which never overflows.
    """
    losses = wnp.maximum(logits, 0.0) - logits * targets + wnp.log1p(wnp.exp(-wnp.abs(logits)))
    return _reduce(losses, reduction, "binary_cross_entropy_with_logits")
