"""wengert.scipy.integrate: scipy.integrate.odeint, differentiable in y0, t and args.

Gradients by the adjoint method (an augmented ODE solved backwards, as HIPS autograd offers),
tangents by forward sensitivities; see ``wengert.scipy._odeint``. Parameters of ``func`` must be
passed through ``args`` (traced values closed over by ``func`` make the solver fail loudly); an
argument may be a pytree (a list of ``(W, b)`` pairs, as HIPS autograd allows).
"""

from wengert.api.tree import tree_flatten, tree_unflatten
from wengert.rules import broadcasting, shape
from wengert.scipy import _odeint as ops

__all__ = ["odeint"]


def odeint(func, y0, t, args=(), Dfun=None, col_deriv=0, full_output=0, ml=None, mu=None, rtol=None,
           atol=None, tcrit=None, h0=0.0, hmax=0.0, hmin=0.0, ixpr=0, mxstep=0, mxhnil=0, mxordn=12,
           mxords=5, printmessg=0, tfirst=False):
    """scipy.integrate.odeint: y(t) of dy/dt = func(y, t, *args), shape (len(t), len(y0)).

    ``y0`` is 1-D (a scalar is treated as one equation). ``rtol``, ``atol``, ``mxstep``, ``hmax``
    and ``tfirst`` are honoured; ``full_output``, ``Dfun`` and the banded-Jacobian options are not
    supported (the derivative solves choose their own steps).
    """
    if full_output or Dfun is not None or ml is not None or mu is not None or tcrit is not None:
        raise NotImplementedError("wengert.scipy.integrate.odeint: full_output, Dfun, ml, mu and tcrit "
                                  "are not supported; call scipy.integrate.odeint on plain arrays for them")
    if not isinstance(args, tuple):
        args = (args,)
    if tfirst:
        user = func

        def func(y, t, *a):
            return user(t, y, *a)

        func.__name__ = getattr(user, "__name__", "func")
    leaves, treedef = tree_flatten(args)
    if len(leaves) != len(args) or any(type(a) in (list, tuple, dict) for a in args):
        nested = func

        def func(y, t, *flat):  # the arguments' leaves, each differentiable, rebuilt into the trees
            return nested(y, t, *tree_unflatten(treedef, flat))

        func.__name__ = getattr(nested, "__name__", "func")
        args = tuple(leaves)
    if len(broadcasting.shape_of(y0)) == 0:
        y0 = shape.reshape(y0, (1,))
    elif len(broadcasting.shape_of(y0)) != 1:
        raise ValueError(f"odeint: y0 must be 1-D (or a scalar), got shape {broadcasting.shape_of(y0)}")
    return ops.odeint(func, y0, t, *args, rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
