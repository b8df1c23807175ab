"""Initialisers: functions of a shape that return a new NumPy array (``torch.nn.init``'s schemes).

Each takes ``rng`` (a ``numpy.random.Generator``, or a seed) and ``dtype`` (float32 by default, as
PyTorch's parameters). Fans are computed as PyTorch does for a weight of shape (fan_in, fan_out),
the layout ``wengert.nn.Linear`` uses.
"""

import math

import numpy as np

__all__ = ["zeros", "ones", "uniform", "normal", "xavier_uniform", "xavier_normal",
           "kaiming_uniform", "kaiming_normal", "lecun_uniform", "as_rng"]

_RELU_GAIN = math.sqrt(2.0)


def as_rng(rng):
    """A numpy Generator from a Generator, a seed, or None (fresh entropy)."""
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _fans(shape):
    if len(shape) == 0:
        raise ValueError("initialiser: needs a shape with at least one dimension")
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[0] * receptive, shape[1] * receptive


def zeros(shape, rng=None, dtype=np.float32):
    """All zeros (torch.nn.init.zeros_)."""
    return np.zeros(shape, dtype=dtype)


def ones(shape, rng=None, dtype=np.float32):
    """All ones (torch.nn.init.ones_)."""
    return np.ones(shape, dtype=dtype)


def uniform(shape, low=-0.1, high=0.1, rng=None, dtype=np.float32):
    """U(low, high) (torch.nn.init.uniform_)."""
    return as_rng(rng).uniform(low, high, size=shape).astype(dtype)


def normal(shape, std=0.01, rng=None, dtype=np.float32):
    """N(0, std^2) (torch.nn.init.normal_)."""
    return (std * as_rng(rng).standard_normal(shape)).astype(dtype)


def xavier_uniform(shape, gain=1.0, rng=None, dtype=np.float32):
    """Glorot uniform: U(-a, a), a = gain sqrt(6 / (fan_in + fan_out)) (torch.nn.init.xavier_uniform_)."""
    fan_in, fan_out = _fans(tuple(shape))
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform(shape, -a, a, rng, dtype)


def xavier_normal(shape, gain=1.0, rng=None, dtype=np.float32):
    """Glorot normal: std = gain sqrt(2 / (fan_in + fan_out)) (torch.nn.init.xavier_normal_)."""
    fan_in, fan_out = _fans(tuple(shape))
    return normal(shape, gain * math.sqrt(2.0 / (fan_in + fan_out)), rng, dtype)


def kaiming_uniform(shape, gain=_RELU_GAIN, rng=None, dtype=np.float32):
    """He uniform: U(-b, b), b = gain sqrt(3 / fan_in) (torch.nn.init.kaiming_uniform_, ReLU gain)."""
    fan_in, _ = _fans(tuple(shape))
    b = gain * math.sqrt(3.0 / fan_in)
    return uniform(shape, -b, b, rng, dtype)


def kaiming_normal(shape, gain=_RELU_GAIN, rng=None, dtype=np.float32):
    """He normal: std = gain / sqrt(fan_in) (torch.nn.init.kaiming_normal_, ReLU gain)."""
    fan_in, _ = _fans(tuple(shape))
    return normal(shape, gain / math.sqrt(fan_in), rng, dtype)


def lecun_uniform(shape, rng=None, dtype=np.float32):
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): what torch.nn.Linear uses for its weight and bias."""
    fan_in, _ = _fans(tuple(shape))
    b = 1.0 / math.sqrt(fan_in)
    return uniform(shape, -b, b, rng, dtype)
