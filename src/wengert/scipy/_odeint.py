"""scipy.integrate.odeint as a primitive, differentiated by solving more ODEs.

``odeint(func, y0, t, *args)`` integrates dy/dt = func(y, t, *args) and returns y at the times
``t`` (shape ``(len(t), len(y0))``). ``func`` is the user's function, written with wengert.numpy (or
NumPy on traced values); parameters must come in through ``args`` -- a traced value closed over
by ``func`` cannot be seen by SciPy's solver and makes it fail loudly, never silently.

- Reverse mode: the adjoint method (as HIPS autograd). Going backwards from t[-1], the augmented
  state (y, a, a_args) obeys dy/dt = f, da/dt = -a df/dy, da_args/dt = -a df/dargs; a jumps by
  the output cotangent g[i] at each t[i]. Then y0_bar = a(t0), args_bar = a_args(t0),
  t_bar[i] = g[i] . f(y_i, t_i) for i > 0 and t_bar[0] = -a(t0+) . f(y0, t0).
- Forward mode: forward sensitivities, the augmented state (y, y_dot) with
  dy_dot/dt = df/dy y_dot + df/dargs args_dot.

Both are solved by this same ``odeint`` primitive on an augmented system (its vector field made of
``wengert.vjp``/``wengert.jvp`` of ``func``), so they are differentiable again: second
derivatives in either mode. The augmented systems are solved to the same ``rtol``/``atol``, so
derivatives are accurate to the solver's tolerance, not to rounding.
"""

import sys
import threading

import numpy as np
import scipy.integrate

import wengert.numpy as wnp
from wengert import rules
from wengert.api.transforms import jvp
from wengert.api.transforms import vjp_at_once as vjp  # its pullback is called at once
from wengert.core.extend import defjvp_argnum, defvjp_argnum
from wengert.core.primitive import Primitive
from wengert.core.trace import is_symbolic, unbox_all
from wengert.numpy._classification import UnsupportedNumpyFunction
from wengert.rules import broadcasting, indexing

__all__ = ["odeint"]


def _odeint_impl(func, y0, t, *args, rtol=None, atol=None, mxstep=0, hmax=0.0):
    """scipy.integrate.odeint(func, y0, t, args) with the parameters as separate arguments."""
    try:
        return scipy.integrate.odeint(func, y0, t, args=tuple(args), rtol=rtol, atol=atol,
                                      mxstep=mxstep, hmax=hmax)
    except UnsupportedNumpyFunction as e:  # SciPy met a traced value that func returned
        name = getattr(func, "__name__", "func")
        raise TypeError(
            f"wengert.scipy.integrate.odeint: the vector field {name}(y, t, ...) returned a traced "
            f"value, so it reads a value being differentiated from outside itself (a closure or a "
            f"global). Pass such parameters through args instead: odeint(func, y0, t, args=(a,)) "
            f"with func(y, t, a); their derivatives then come from the adjoint ODE.") from e


def _size(x):
    return int(np.prod(broadcasting.shape_of(x)))


def _flat(x):
    return wnp.reshape(x, (-1,))


# -- forward mode: sensitivities ---------------------------------------------------------------


class _Sensitivity:
    """Vector field of (y, y_dot) for the tangent of argument ``argnum`` (1: y0, >= 3: args)."""

    def __init__(self, func, n, argnum):
        self.func, self.n, self.argnum = func, n, argnum
        self.__name__ = f"sensitivity({getattr(func, '__name__', 'func')})"

    def __call__(self, z, t, *params):
        n, k = self.n, self.argnum - 3
        y, y_dot = z[:n], z[n:]
        if k < 0:  # tangent of y0: args held fixed
            args = params
            dy, dy_dot = jvp(lambda y: self.func(y, t, *args), (y,), (y_dot,))
        else:  # tangent of args[k], passed after the args
            args, arg_dot = params[:-1], params[-1]

            def f(y, a):
                return self.func(y, t, *args[:k], a, *args[k + 1:])

            dy, dy_dot = jvp(f, (y, args[k]), (y_dot, arg_dot))
        return wnp.concatenate([_flat(dy), _flat(dy_dot)])


def _sensitivity(func, y0, t, args, argnum, y_dot0, arg_dot, options):
    n = _size(y0)
    field = _Sensitivity(func, n, argnum)
    z0 = wnp.concatenate([_flat(y0), _flat(y_dot0)])
    extra = () if arg_dot is None else (arg_dot,)
    z = odeint(field, z0, t, *args, *extra, **options)
    return indexing.getitem(z, (slice(None), slice(n, 2 * n)))


def _odeint_jvp(argnum, tangent, out, func, y0, t, *args, **options):
    if argnum == 0:
        raise TypeError("odeint: the vector field func is not differentiable; pass parameters in args")
    if argnum == 1:
        return _sensitivity(func, y0, t, args, 1, tangent, None, options)
    if argnum >= 3:
        return _sensitivity(func, y0, t, args, argnum, np.zeros(_size(y0)), tangent, options)
    # argnum 2, the times: y(t_i) moves with t_i at speed f(y_i, t_i); moving t0 shifts the start.
    n_t = broadcasting.shape_of(t)[0]
    rates = wnp.stack([_flat(func(out[i], t[i], *args)) for i in range(n_t)])
    start = -rates[0] * tangent[0]
    shift = _sensitivity(func, y0, t, args, 1, start, None, options)
    return rates * wnp.reshape(tangent, (n_t, 1)) + shift


# -- reverse mode: the adjoint method ----------------------------------------------------------------


def _differentiable(x):
    """Whether an ``args`` entry is a float (or complex) array or number: the others (integers,
    strings, functions) are passed to ``func`` unchanged and get no cotangent."""
    x = unbox_all(x)
    if is_symbolic(x):  # a program's symbol: its dtype is known, its values are not
        return x.dtype.kind in "fc"
    try:
        return np.asarray(x).dtype.kind in "fc"
    except (TypeError, ValueError):
        return False


class _Adjoint:
    """Vector field of the augmented state (y, a, a_args), integrated backwards in time;
    ``a_args`` holds the cotangents of the float entries of ``args`` (positions ``chosen``)."""

    def __init__(self, func, n, chosen):
        self.func, self.n, self.chosen = func, n, chosen
        self.__name__ = f"adjoint({getattr(func, '__name__', 'func')})"

    def __call__(self, s, t, *args):
        n, chosen = self.n, self.chosen

        def f(y, *picked):
            full = list(args)
            for i, v in zip(chosen, picked):
                full[i] = v
            return self.func(y, t, *full)

        y, a = s[:n], s[n:2 * n]
        dy, back = vjp(f, y, *[args[i] for i in chosen])
        cots = back(a)
        parts = [_flat(dy), -_flat(cots[0])] + [-_flat(c) for c in cots[1:]]
        return wnp.concatenate(parts)


def _adjoint_all(g, out, func, y0, t, args, options):
    """Cotangents of (y0, t, *args), by the adjoint ODE integrated between successive times."""
    n = _size(y0)
    n_t = broadcasting.shape_of(t)[0]
    chosen = [i for i, a in enumerate(args) if _differentiable(a)]
    arg_shapes = [broadcasting.shape_of(args[i]) for i in chosen]
    n_args = sum(int(np.prod(s)) for s in arg_shapes)
    field = _Adjoint(func, n, chosen)
    a = g[n_t - 1]
    a_args = np.zeros(n_args)
    t_bar = [None] * n_t
    for i in range(n_t - 1, 0, -1):
        t_bar[i] = wnp.sum(g[i] * func(out[i], t[i], *args))
        state = wnp.concatenate([out[i], a, a_args]) if n_args else wnp.concatenate([out[i], a])
        span = indexing.getitem(t, np.array([i, i - 1]))
        back = odeint(field, state, span, *args, **options)[1]
        a = back[n:2 * n]
        a_args = back[2 * n:]
        if i == 1:
            t_bar[0] = -wnp.sum(a * func(y0, t[0], *args))
        a = a + g[i - 1]
    if n_t == 1:
        t_bar[0] = 0.0 * wnp.sum(g)
    y0_bar = wnp.reshape(a, broadcasting.shape_of(y0))
    args_bar, start = [None] * len(args), 0
    for i, s in zip(chosen, arg_shapes):
        size = int(np.prod(s))
        args_bar[i] = wnp.reshape(a_args[start:start + size], s)
        start += size
    return [y0_bar, wnp.stack(t_bar)] + args_bar


_memo = threading.local()
"""Per thread, ``last``: (key, cotangent's values, result) of the last adjoint solve, which every
argnum's rule shares (one solve gives them all). Per thread, so that threads differentiating
different ODEs at once never read each other's solve."""


def _odeint_vjp(argnum, g, out, func, y0, t, *args, **options):
    if argnum == 0:
        raise TypeError("odeint: the vector field func is not differentiable; pass parameters in args")
    key = (g, out, func, y0, t) + args
    last = getattr(_memo, "last", None)
    if last is None or len(last[0]) != len(key) or any(x is not y for x, y in zip(last[0], key)) \
            or not _same_values(last[1], g):
        last = _memo.last = (key, _snapshot(g), _adjoint_all(g, out, func, y0, t, args, options))
    return last[2][argnum - 1]


def _snapshot(g):
    return g.copy() if isinstance(g, np.ndarray) else g


def _same_values(old, g):
    """Whether a cached cotangent still holds the same numbers (buffers may be updated in place)."""
    if isinstance(g, np.ndarray):
        return isinstance(old, np.ndarray) and np.array_equal(old, g)
    return old is g


odeint = Primitive(_odeint_impl, name="odeint", grad_post=broadcasting.unbroadcast)  # float32 stays float32
defvjp_argnum(odeint, _odeint_vjp)
defjvp_argnum(odeint, _odeint_jvp)

rules.register_family(sys.modules[__name__])  # in the rule table beside the rules package's families
