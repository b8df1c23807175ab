"""``autograd.misc.fixed_points``'s path: :func:`fixed_point`, differentiated by the implicit
function theorem instead of through its iterations."""

from __future__ import annotations

from typing import Any, Callable

import wengert.numpy as wnp
from wengert.api.transforms import vjp_at_once as vjp  # the pullbacks are called at once, in the rule
from wengert.extend import defvjp, primitive

__all__ = ["fixed_point"]


@primitive
def fixed_point(f: Callable[[Any], Callable[[Any], Any]], a: Any, x0: Any,
                distance: Callable[[Any, Any], Any], tol: float) -> Any:
    """The fixed point x* = f(a)(x*), by iterating ``f(a)`` from ``x0`` until ``distance`` between two
    iterates is at most ``tol`` (HIPS autograd's ``fixed_point``). Differentiable with respect to
    ``a``: the gradient solves the adjoint equation w = g + (d f(a)/dx)^T w at x* by the same
    iteration, then pulls w back through ``a``, so that no iteration is recorded; derivatives of any
    order follow, since the adjoint is computed with differentiable operations."""
    step = f(a)
    previous, x = x0, step(x0)
    while distance(x, previous) > tol:
        previous, x = x, step(x)
    return x


def _vjp_a(ans, f, a, x0, distance, tol):
    def pull(g):
        _, pull_x = vjp(lambda x: f(a)(x), ans)
        w_prev, w = wnp.zeros_like(g), g
        while distance(w, w_prev) > tol:  # w <- g + (df/dx)^T w, a contraction where f(a) is one
            w_prev, w = w, g + pull_x(w)[0]
        _, pull_a = vjp(lambda b: f(b)(ans), a)
        return pull_a(w)[0]
    return pull


defvjp(fixed_point, None, _vjp_a, None, None, None)
