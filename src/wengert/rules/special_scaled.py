"""scipy.special's exponentially scaled Bessel function ``ive`` and the sign of the gamma function
``gammasgn``.

``ive(v, z) = iv(v, z) exp(-|z|)`` (real ``z``) stays finite where ``iv`` overflows, so it is a
primitive of its own rather than ``iv`` times an exponential. Its derivative in ``z`` is that of the
product, written with ``ive`` alone: ``(ive(v - 1, z) + ive(v + 1, z)) / 2 - sign(z) ive(v, z)``;
the order ``v`` is not differentiable (as for ``iv``). ``gammasgn`` is piecewise constant: its
derivative is zero (it jumps at the poles 0, -1, -2, ...).
"""

import scipy.special as sp

from wengert.core.extend import defjvp, defvjp, elementwise, facts
from wengert.core.primitive import Primitive
from wengert.rules.broadcasting import broadcast_tangent, unbroadcast
from wengert.rules.elementwise import sign

__all__ = ["ive", "gammasgn"]


def _ive_rule(g, out, v, z):
    return g * (0.5 * (ive(v - 1.0, z) + ive(v + 1.0, z)) - sign(z) * out)


ive = Primitive(sp.ive, name="ive", grad_post=unbroadcast, tangent_post=broadcast_tangent)
defvjp(ive, None, _ive_rule)
defjvp(ive, None, _ive_rule)
facts(ive, broadcasts=True, fresh=True, saves=("out", 0, 1))  # what its VJP reads (wengert.engines.saving)

gammasgn = elementwise(sp.gammasgn, 0.0, name="gammasgn", saves=())  # a zero VJP reads nothing
