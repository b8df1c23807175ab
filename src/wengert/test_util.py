"""``autograd.test_util``'s path, for HIPS autograd's users: ``check_grads`` (:mod:`wengert.testing`),
in autograd's curried form ``check_grads(f, modes=..., order=...)(*args)`` as well as wengert's
``check_grads(f, *args)``."""

from wengert.testing import check_grads

__all__ = ["check_grads"]
