"""scipy.signal.convolve as a primitive (n-d; modes full, valid, same).

Convolution is bilinear. With ``full`` the output of in1 (shape n1) and in2 (shape n2) has shape
n1 + n2 - 1 and the cotangent of in1 is the ``valid`` convolution of the output cotangent with
in2 reversed along every axis (of shape n1); ``valid`` and ``same`` outputs are centred crops of
the full one (SciPy's ``_centered``), so their cotangent is first placed back into a zero array of
the full shape (``indexing.untake``). Every rule is a convolution again: second derivatives work.
"""

import scipy.signal

from wengert.core.extend import defjvp, defvjp, facts
from wengert.core.primitive import Primitive
from wengert.rules import broadcasting, indexing

__all__ = ["convolve"]


def _convolve_impl(in1, in2, mode="full", method="auto"):
    """scipy.signal.convolve."""
    return scipy.signal.convolve(in1, in2, mode=mode, method=method)


def _full_cotangent(g, out, in1, in2, mode):
    """``g`` placed where the ``mode`` output sits inside the full convolution."""
    if mode == "full":
        return g
    s1, s2 = broadcasting.shape_of(in1), broadcasting.shape_of(in2)
    full = tuple(a + b - 1 for a, b in zip(s1, s2))
    crop = broadcasting.shape_of(out)
    where = tuple(slice((f - c) // 2, (f - c) // 2 + c) for f, c in zip(full, crop))
    return indexing.untake(g, where, full)


def _reversed(x):
    return indexing.getitem(x, tuple(slice(None, None, -1) for _ in broadcasting.shape_of(x)))


def _vjp_in1(g, out, in1, in2, mode="full", method="auto"):
    return convolve(_full_cotangent(g, out, in1, in2, mode), _reversed(in2), mode="valid", method=method)


def _vjp_in2(g, out, in1, in2, mode="full", method="auto"):
    return convolve(_full_cotangent(g, out, in1, in2, mode), _reversed(in1), mode="valid", method=method)


convolve = Primitive(_convolve_impl, name="scipy_convolve")  # apart from a numpy.convolve primitive
defvjp(convolve, _vjp_in1, _vjp_in2)
facts(convolve, saves={0: (1,), 1: (0,)})  # the other input (and shapes: wengert.engines.saving)
defjvp(convolve,
       lambda t, out, in1, in2, mode="full", method="auto": convolve(t, in2, mode=mode, method=method),
       lambda t, out, in1, in2, mode="full", method="auto": convolve(in1, t, mode=mode, method=method))
