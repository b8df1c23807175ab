"""``autograd.misc``'s paths, for HIPS autograd's users: ``wengert.misc.flatten`` (``flatten``,
``flatten_func``) and ``wengert.misc.optimizers`` (``sgd``, ``momentum``, ``rmsprop``, ``adam``, the
functional optimisers of :mod:`wengert.optim`)."""

from wengert.misc import optimizers
from wengert.misc.flatten import flatten, flatten_func

__all__ = ["flatten", "flatten_func", "optimizers"]
