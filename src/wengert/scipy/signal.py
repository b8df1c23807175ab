"""wengert.scipy.signal: scipy.signal.convolve, differentiable in both inputs (real, n-d), and
along chosen axes with others contracted, as HIPS autograd's ``autograd.scipy.signal.convolve``
(``axes=``, ``dot_axes=``)."""

import string

import numpy as np

from wengert.rules import broadcasting, indexing, products
from wengert.rules import signal as ops

__all__ = ["convolve"]


def convolve(in1, in2, mode="full", method="auto", *, axes=None, dot_axes=((), ())):
    """scipy.signal.convolve (modes 'full', 'valid', 'same'; any number of dimensions).

    With ``axes=(axes1, axes2)`` (HIPS autograd's signature), only those axes of ``in1`` and
    ``in2``, pairwise, are convolved; ``dot_axes=(d1, d2)`` pairs axes that are summed over (a
    tensor contraction, as in a convolutional layer's channels); every other axis of either input
    is kept, and the result's axes are: ``in1``'s other axes, ``in2``'s other axes, the convolved
    ones. ``'same'`` is then centred on ``in1``'s sizes, as SciPy centres it.
    """
    if mode not in ("full", "valid", "same"):
        raise ValueError("Acceptable mode flags are 'valid', 'same', or 'full'.")
    if method not in ("auto", "direct", "fft"):
        raise ValueError("Acceptable method flags are 'auto', 'direct', or 'fft'.")
    s1, s2 = broadcasting.shape_of(in1), broadcasting.shape_of(in2)
    if axes is not None or any(len(d) for d in dot_axes):
        return _along_axes(in1, in2, s1, s2, mode, axes, dot_axes)
    if len(s1) != len(s2):
        raise ValueError("in1 and in2 should have the same dimensionality")
    if mode == "valid" and not (all(a >= b for a, b in zip(s1, s2)) or all(a <= b for a, b in zip(s1, s2))):
        raise ValueError("For 'valid' mode, one must be at least as large as the other in every dimension")
    return ops.convolve(in1, in2, mode=mode, method=method)


def _axis_list(axes, ndim, what):
    out = [int(a) % ndim if -ndim <= int(a) < ndim else None for a in axes]
    if None in out or len(set(out)) != len(out):
        raise ValueError(f"convolve: {what} {list(axes)} are not distinct axes of a {ndim}-d array")
    return out


def _along_axes(in1, in2, s1, s2, mode, axes, dot_axes):
    """The convolution along ``axes``, composed: along each convolved axis the larger input is
    gathered into shifted copies (a window axis and an output axis), and one einsum multiplies by
    the smaller and sums over the windows and ``dot_axes``. Bilinear, exact to any order."""
    if axes is None:
        axes = (range(len(s1)), range(len(s2)))
    conv1, conv2 = _axis_list(axes[0], len(s1), "axes"), _axis_list(axes[1], len(s2), "axes")
    dot1 = _axis_list(dot_axes[0], len(s1), "dot_axes")
    dot2 = _axis_list(dot_axes[1], len(s2), "dot_axes")
    if len(conv1) != len(conv2) or len(dot1) != len(dot2):
        raise ValueError("convolve: axes and dot_axes must pair as many axes of in1 as of in2")
    if set(conv1) & set(dot1) or set(conv2) & set(dot2):
        raise ValueError("convolve: an axis cannot be both convolved and in dot_axes")
    if any(s1[a] != s2[b] for a, b in zip(dot1, dot2)):
        raise ValueError("convolve: the axes paired by dot_axes must have the same sizes")
    pairs = list(zip(conv1, conv2))
    if mode == "valid" and not (all(s1[a] >= s2[b] for a, b in pairs)
                                or all(s1[a] <= s2[b] for a, b in pairs)):
        raise ValueError("For 'valid' mode, one must be at least as large as the other in every dimension")
    letters = iter(string.ascii_letters)
    names1 = [next(letters) for _ in s1]  # one letter per original axis
    names2 = [next(letters) for _ in s2]
    for a, b in zip(dot1, dot2):
        names2[b] = names1[a]
    subs = [list(names1), list(names2)]  # the current axes' letters, as the inputs are gathered
    operands = [in1, in2]
    out_letters = []
    for a, b in pairs:
        n1, n2 = s1[a], s2[b]
        ns, nl = min(n1, n2), max(n1, n2)
        large = 1 if n2 > n1 else 0
        window_letter = names1[a] if large else names2[b]  # the smaller input's letter
        if mode == "valid":
            start, length = ns - 1, nl - ns + 1
        elif mode == "full":
            start, length = 0, nl + ns - 1
        else:  # 'same': centred on in1's size, as SciPy centres it
            start, length = (nl + ns - 1 - n1) // 2, n1
        shifted = np.arange(start, start + length)[None, :] - np.arange(ns)[:, None]  # t - s
        inside = (shifted >= 0) & (shifted < nl)
        pos = subs[large].index(names2[b] if large else names1[a])
        trailing = len(subs[large]) - pos - 1
        target = operands[large]
        gathered = indexing.getitem(target, (slice(None),) * pos + (np.where(inside, shifted, 0),))
        if not inside.all():  # out[t] = sum_s small[s] large[t - s], zero where t - s falls outside
            mask = inside.reshape(inside.shape + (1,) * trailing).astype(broadcasting.dtype_of(target))
            gathered = gathered * mask
        operands[large] = gathered
        out_letter = next(letters)
        subs[large][pos:pos + 1] = [window_letter, out_letter]
        out_letters.append(out_letter)
    kept1 = [names1[k] for k in range(len(s1)) if k not in conv1 and k not in dot1]
    kept2 = [names2[k] for k in range(len(s2)) if k not in conv2 and k not in dot2]
    spec = "".join(subs[0]) + "," + "".join(subs[1]) + "->" + "".join(kept1 + kept2 + out_letters)
    return products.einsum(spec, *operands)
