"""Complex functions checked through real inputs and outputs, which no complex convention affects.

``realified(f, *args)`` returns ``(g, real_args)``: ``g`` takes each complex argument of ``f`` as
its real and imaginary parts (joined by ``complex.complex_from``) and returns a complex result as
``(real part, imaginary part)``. ``check_grads(g, *real_args)`` then checks ``f``'s complex rules
with real finite differences only."""

import numpy as np

from wengert.rules import complex as cplx


def _split(out):
    if cplx.is_complex(out):
        return cplx.real_of(out), cplx.real_of(out * -1j)
    return out


def realified(f, *args):
    complex_at = [np.iscomplexobj(a) for a in args]
    flat = []
    for a, c in zip(args, complex_at):
        flat.extend([np.real(a), np.imag(a)] if c else [a])

    def g(*xs):
        it = iter(xs)
        call = [cplx.complex_from(next(it), next(it)) if c else next(it) for c in complex_at]
        out = f(*call)
        return tuple(_split(o) for o in out) if isinstance(out, tuple) else _split(out)

    g.__name__ = f"realified({getattr(f, '__name__', 'f')})"
    return g, tuple(flat)


def realified_cases(cases):
    """``[(f, args), ...]`` with every function realified (real ones pass through unchanged)."""
    return [realified(f, *args) for f, args in cases]
