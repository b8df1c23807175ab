"""``autograd.extend`` for HIPS autograd's users: new primitives with autograd's rule conventions.

``primitive`` makes a function a primitive (:func:`wengert.primitive`). ``defvjp`` takes autograd's
VJP *makers*, one per argument, ``maker(ans, *args, **kwargs)`` returning ``lambda g: ...`` (None
for an argument not differentiable); ``defjvp`` autograd's JVP functions, ``jvp(g, ans, *args,
**kwargs)``. Both are adapted onto wengert's own rules (``rule(g, out, *args)``, see
``docs/adding-a-primitive.md``), so the primitive works under every transform, and to any order
where the rules are written with ``wengert.numpy``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from wengert.api.transforms import stop_gradient
from wengert.core import extend as _extend
from wengert.core.extend import primitive

__all__ = ["primitive", "notrace_primitive", "defvjp", "defvjp_argnum", "defvjp_argnums", "defjvp",
           "defjvp_argnum", "def_linear"]


def _from_maker(maker: Callable[..., Any]) -> Callable[..., Any]:
    """wengert's ``rule(g, out, *args)`` from autograd's ``maker(ans, *args)`` returning ``vjp(g)``."""

    def rule(g, out, *args, **kwargs):
        return maker(out, *args, **kwargs)(g)

    rule.__name__ = rule.__qualname__ = getattr(maker, "__name__", "vjp")
    return rule


def _slots(vjps: list[Any], argnums: Any, definer: str) -> list[Any]:
    argnums = tuple(range(len(vjps))) if argnums is None else tuple(argnums)
    if len(argnums) != len(vjps):
        raise TypeError(f"wengert.extend.{definer}: {len(vjps)} rules for argnums={argnums}; give one rule "
                        f"per argument number")
    rules: list[Any] = [None] * (max(argnums) + 1 if argnums else 0)
    for a, r in zip(argnums, vjps):
        rules[a] = r
    return rules


def defvjp(fun: Any, *vjpmakers: Callable[..., Any] | None, argnums: Any = None) -> None:
    """autograd's ``defvjp(fun, maker_0, maker_1, ...)``: ``maker_i(ans, *args, **kwargs)`` returns
    the VJP for argument ``i``, ``lambda g: ...``; None marks an argument not differentiable.
    ``argnums=(i, j, ...)`` gives the makers for those arguments instead of 0, 1, ..."""
    makers = [None if m is None else _from_maker(m) for m in vjpmakers]
    _extend.defvjp(fun, *_slots(makers, argnums, "defvjp"))


def defvjp_argnum(fun: Any, makevjp: Callable[..., Any]) -> None:
    """autograd's ``defvjp_argnum``: one maker for every argument, ``makevjp(argnum, ans, args,
    kwargs)`` returning ``lambda g: ...``."""

    def rule(argnum, g, out, *args, **kwargs):
        return makevjp(argnum, out, args, kwargs)(g)

    _extend.defvjp(fun, variadic=rule)


def defvjp_argnums(fun: Any, makevjp: Callable[..., Any]) -> None:
    """autograd's ``defvjp_argnums``: ``makevjp(argnums, ans, args, kwargs)`` returns ``vjp(g)``, a
    tuple of the cotangents of the arguments at ``argnums``. Here it is asked one argument at a time."""

    def rule(argnum, g, out, *args, **kwargs):
        return makevjp((argnum,), out, args, kwargs)(g)[0]

    _extend.defvjp(fun, variadic=rule)


def defjvp(fun: Any, *jvpfuns: Callable[..., Any] | None, argnums: Any = None) -> None:
    """autograd's ``defjvp(fun, jvp_0, jvp_1, ...)``: ``jvp_i(g, ans, *args, **kwargs)`` is the
    output's tangent from argument ``i``'s tangent ``g`` (wengert's own convention too); None marks
    an argument not differentiable."""
    _extend.defjvp(fun, *_slots(list(jvpfuns), argnums, "defjvp"))


def defjvp_argnum(fun: Any, jvpmaker: Callable[..., Any]) -> None:
    """autograd's ``defjvp_argnum``: ``jvpmaker(argnum, g, ans, args, kwargs)`` for every argument."""

    def rule(argnum, t, out, *args, **kwargs):
        return jvpmaker(argnum, t, out, args, kwargs)

    _extend.defjvp(fun, variadic=rule)


def def_linear(fun: Any) -> None:
    """autograd's ``def_linear``: ``fun`` is linear in each argument, so the tangent from argument
    ``i`` is ``fun`` with that argument replaced by its tangent. As in autograd, only the JVP is
    defined."""

    def rule(argnum, t, out, *args, **kwargs):
        args = list(args)
        args[argnum] = t
        return fun(*args, **kwargs)

    _extend.defjvp(fun, variadic=rule)


def notrace_primitive(f_raw: Callable[..., Any]) -> Callable[..., Any]:
    """autograd's ``notrace_primitive``: ``f_raw`` called on its arguments' plain values, its result
    a constant under every transform (no derivative flows through it)."""

    @functools.wraps(f_raw)
    def f(*args, **kwargs):
        return f_raw(*stop_gradient(args), **stop_gradient(kwargs))

    return f
