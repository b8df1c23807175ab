"""wengert.numpy.random: NumPy's random module (``import wengert.numpy.random as npr``, as HIPS
autograd's ``autograd.numpy.random``). Random numbers carry no derivative: every name is NumPy's
own, drawn from plain arguments (pass ``x.detach()`` or plain arrays for a traced value)."""

import numpy.random as _random

__all__ = list(_random.__all__)


def __getattr__(name):
    return getattr(_random, name)


def __dir__():
    return sorted(set(dir(_random)))
