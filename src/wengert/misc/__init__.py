"""``autograd.misc``'s paths, for HIPS autograd's users: ``wengert.misc.flatten`` (``flatten``,
``flatten_func``), ``wengert.misc.optimizers`` (``sgd``, ``momentum``, ``rmsprop``, ``adam``, the
functional optimisers of :mod:`wengert.optim`) and ``wengert.misc.fixed_points`` (``fixed_point``)."""

from wengert.misc import fixed_points, optimizers
from wengert.misc.fixed_points import fixed_point
from wengert.misc.flatten import flatten, flatten_func

__all__ = ["flatten", "flatten_func", "fixed_point", "optimizers", "fixed_points"]
