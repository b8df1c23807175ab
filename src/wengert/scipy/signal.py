"""wengert.scipy.signal: scipy.signal.convolve, differentiable in both inputs (real, n-d)."""

from wengert.rules import broadcasting
from wengert.rules import signal as ops

__all__ = ["convolve"]


def convolve(in1, in2, mode="full", method="auto"):
    """scipy.signal.convolve (modes 'full', 'valid', 'same'; any number of dimensions)."""
    if mode not in ("full", "valid", "same"):
        raise ValueError("Acceptable mode flags are 'valid', 'same', or 'full'.")
    if method not in ("auto", "direct", "fft"):
        raise ValueError("Acceptable method flags are 'auto', 'direct', or 'fft'.")
    s1, s2 = broadcasting.shape_of(in1), broadcasting.shape_of(in2)
    if len(s1) != len(s2):
        raise ValueError("in1 and in2 should have the same dimensionality")
    if mode == "valid" and not (all(a >= b for a, b in zip(s1, s2)) or all(a <= b for a, b in zip(s1, s2))):
        raise ValueError("For 'valid' mode, one must be at least as large as the other in every dimension")
    return ops.convolve(in1, in2, mode=mode, method=method)
