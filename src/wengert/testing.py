"""Gradient checking: compare forward and reverse mode with finite differences, to any order.

``check_grads(fun, *args)`` perturbs ``args`` along a random direction ``v`` and compares the
central difference ``(f(x + eps v) - f(x - eps v)) / 2 eps`` with the JVP (forward mode) and, for a
random cotangent ``u``, ``<u, that difference>`` with ``<vjp(u), v>`` (reverse mode). With
``order=2`` the same checks are applied to the derivative functions themselves (the JVP and the VJP
as functions of ``args``), which exercises every rule's own derivative.

Complex arguments are perturbed along complex directions (random real and imaginary parts), and
cotangents pair with tangents by ``Re(sum(u * t))``, without conjugation: the convention of HIPS
autograd and JAX, under which a holomorphic ``f`` has VJP ``g * f'(z)`` (docs/complex.md).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from wengert.api.transforms import jvp, vjp
from wengert.api.tree import tree_flatten, tree_unflatten
from wengert.core.exits import name_of as _name

__all__ = ["check_grads", "GradientCheckError"]


class GradientCheckError(AssertionError):
    """A derivative disagrees with finite differences."""


def _leaves(tree):
    return tree_flatten(tree)[0]


def _random_like(tree, rng):
    leaves, treedef = tree_flatten(tree)
    out = []
    for x in leaves:
        if type(x) is float:
            out.append(float(rng.standard_normal()))
        elif type(x) is complex:
            out.append(complex(rng.standard_normal(), rng.standard_normal()))
        else:
            x = np.asarray(x)
            r = rng.standard_normal(x.shape)
            if x.dtype.kind == "c":
                r = r + 1j * rng.standard_normal(x.shape)
            out.append(r.astype(x.dtype))
    return tree_unflatten(treedef, out)


def _axpy(a, x, y):
    """y + a * x, leafwise (Python floats stay floats)."""
    return tree_unflatten(tree_flatten(y)[1], [yi + a * xi for xi, yi in zip(_leaves(x), _leaves(y))])


def _inner(a, b):
    """Re(sum(a * b)), leafwise: the pairing of cotangents with tangents (no conjugation).

    With it, ``<u, J v> = <vjp(u), v>`` holds for complex values under HIPS autograd's and JAX's
    convention (a holomorphic ``f`` has VJP ``g * f'(z)``; see docs/complex.md).
    """
    total = 0.0
    for x, y in zip(_leaves(a), _leaves(b)):
        total += float(np.real(np.sum(np.multiply(x, y))))
    return total


def _sub(a, b, scale):
    return tree_unflatten(tree_flatten(a)[1], [(x - y) * scale for x, y in zip(_leaves(a), _leaves(b))])


def _close(a, b, rtol, atol):
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def check_grads(fun: Callable[..., Any], *args: Any, modes: Sequence[str] = ("fwd", "rev"), order: int = 2,
                eps: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-6, seed: int = 0,
                argnum: int | None = None) -> Any:
    """Check ``fun``'s derivatives at ``args`` against finite differences, to ``order``.

    Like HIPS autograd's ``check_grads``. Raises :class:`GradientCheckError` naming the mode, the
    order and both numbers when they disagree. ``args`` are the differentiated arguments (arrays,
    floats, or pytrees of them); close over anything else.

    Called with the function alone, ``check_grads(fun, modes=..., order=...)`` is autograd's curried
    form: it returns ``check(*args)``, which checks ``fun``'s derivatives with respect to argument
    ``argnum`` (0 by default, as in autograd), the other arguments held fixed. ``argnum`` given with
    ``args`` likewise checks that argument alone.
    """
    for m in modes:
        if m not in ("fwd", "rev"):
            raise ValueError(f"check_grads: unknown mode {m!r}; use 'fwd' and/or 'rev'")
    options = dict(modes=modes, order=order, eps=eps, rtol=rtol, atol=atol, seed=seed)
    if not args:
        def check(*call_args: Any, **kwargs: Any) -> None:
            _check_argnum(fun, call_args, kwargs, 0 if argnum is None else argnum, options)

        check.__name__ = f"check_grads({_name(fun)})"
        return check
    if argnum is not None:
        _check_argnum(fun, args, {}, argnum, options)
        return None
    rng = np.random.default_rng(seed)
    _check(fun, args, modes, order, 1, eps, rtol, atol, rng)
    return None


def _check_argnum(fun, args, kwargs, argnum, options):
    """``check_grads`` of ``fun`` as a function of ``args[argnum]`` alone."""
    if not -len(args) <= argnum < len(args):
        raise ValueError(f"check_grads({_name(fun)}): argnum={argnum} asked for, but the check was called "
                         f"with {len(args)} positional argument(s)")
    argnum %= len(args)

    def of_one(x):
        full = list(args)
        full[argnum] = x
        return fun(*full, **kwargs)

    of_one.__name__ = _name(fun)
    rng = np.random.default_rng(options["seed"])
    _check(of_one, (args[argnum],), options["modes"], options["order"], 1, options["eps"], options["rtol"],
           options["atol"], rng)


def _check(fun, args, modes, order, level, eps, rtol, atol, rng):
    v = _random_like(args, rng)
    plus = fun(*_axpy(eps, v, args))
    minus = fun(*_axpy(-eps, v, args))
    fd = _sub(plus, minus, 1.0 / (2 * eps))
    out = fun(*args)
    u = _random_like(out, rng)
    expected = _inner(u, fd)
    where = f"check_grads({_name(fun)}), derivative order {level}"
    if "fwd" in modes:
        _, tangent = jvp(fun, tuple(args), tuple(v))
        got = _inner(u, tangent)
        if not _close(got, expected, rtol, atol):
            raise GradientCheckError(
                f"{where}: forward mode (JVP) disagrees with finite differences: "
                f"<u, jvp(v)> = {got!r}, finite difference {expected!r}")
    if "rev" in modes:
        _, back = vjp(fun, *args)
        got = _inner(back(u), v)
        if not _close(got, expected, rtol, atol):
            raise GradientCheckError(
                f"{where}: reverse mode (VJP) disagrees with finite differences: "
                f"<vjp(u), v> = {got!r}, finite difference {expected!r}")
    if order > 1:
        if "fwd" in modes:
            def jvp_fun(*xs):
                return jvp(fun, tuple(xs), tuple(v))[1]

            jvp_fun.__name__ = f"jvp({_name(fun)})"
            _check(jvp_fun, args, modes, order - 1, level + 1, eps, rtol, atol, rng)
        if "rev" in modes:
            def vjp_fun(*xs):
                return vjp(fun, *xs)[1](u)

            vjp_fun.__name__ = f"vjp({_name(fun)})"
            _check(vjp_fun, args, modes, order - 1, level + 1, eps, rtol, atol, rng)
