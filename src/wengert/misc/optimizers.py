"""``autograd.misc.optimizers``: the functional optimisers ``sgd``, ``momentum``, ``rmsprop`` and
``adam`` of :mod:`wengert.optim`, under autograd's path. Each takes ``grad(params, i)`` and a pytree
of starting parameters, calls ``callback(params, i, g)`` every step, and returns the parameters."""

from wengert.optim import adam, momentum, rmsprop, sgd

__all__ = ["sgd", "momentum", "rmsprop", "adam"]
