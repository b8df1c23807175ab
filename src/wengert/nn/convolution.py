"""Convolution and pooling as functions, with ``torch.nn.functional``'s names, signatures and layouts.

Arrays are channels first: (N, C, L) in 1-D, (N, C, H, W) in 2-D, or without the batch axis
((C, L), (C, H, W)) as PyTorch also accepts. Weights are PyTorch's: (out, in / groups, *kernel) for a
convolution, (in, out / groups, *kernel) for a transposed one, so weights move between the two
without transposes. ``conv*`` and ``max_pool*`` rest on the primitives of
``wengert.rules.convolution``; average pooling is a depthwise convolution by a constant kernel and
adaptive average pooling two products by averaging matrices, so their derivatives are those rules'.
"""

import math

import numpy as np

from wengert.rules import broadcasting, products
from wengert.rules import convolution as cv

__all__ = ["conv1d", "conv2d", "conv_transpose2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
           "adaptive_avg_pool2d"]

_shape = broadcasting.shape_of


def _tuple(value, d, fname, what):
    """``value`` as a tuple of ``d`` non-negative ints (one int repeats)."""
    if isinstance(value, (int, np.integer)):
        value = (int(value),) * d
    value = tuple(int(v) for v in value)
    if len(value) != d:
        raise ValueError(f"{fname}: {what} must be an int or a tuple of {d} ints, got {value}")
    return value


def _positive(values, fname, what):
    if any(v < 1 for v in values):
        raise ValueError(f"{fname}: {what} must be positive, got {values}")
    return values


def _batched(x, d, fname, shape_hint):
    """``x`` with a batch axis (and whether one was added): PyTorch accepts one example alone."""
    s = tuple(_shape(x))
    if len(s) == d + 2:
        return x, False
    if len(s) == d + 1:
        return broadcasting.reshape(x, (1,) + s), True
    raise ValueError(f"{fname}: expected an input of shape {shape_hint} (or without the batch axis), "
                     f"got shape {s}")


def _unbatched(out, added):
    return broadcasting.reshape(out, tuple(_shape(out))[1:]) if added else out


def _conv_padding(padding, kernel, stride, dilation, fname):
    d = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * d
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{fname}: padding='same' needs stride 1 (as in PyTorch), got stride "
                                 f"{stride}")
            total = [dl * (k - 1) for k, dl in zip(kernel, dilation)]
            return tuple((t // 2, t - t // 2) for t in total)  # the odd one extra at the end, as PyTorch
        raise ValueError(f"{fname}: padding must be 'valid', 'same', an int or a tuple of ints, got "
                         f"{padding!r}")
    pads = _tuple(padding, d, fname, "padding")
    if any(p < 0 for p in pads):
        raise ValueError(f"{fname}: padding must be non-negative, got {pads}")
    return tuple((p, p) for p in pads)


def _add_bias(out, bias, channels, fname):
    if bias is None:
        return out
    if tuple(_shape(bias)) != (channels,):
        raise ValueError(f"{fname}: bias must have shape ({channels},) (one per output channel), got "
                         f"{tuple(_shape(bias))}")
    d = len(_shape(out)) - 2
    return out + broadcasting.reshape(bias, (channels,) + (1,) * d)


def _conv_nd(d, fname, x, weight, bias, stride, padding, dilation, groups):
    hint = "(N, C, L)" if d == 1 else "(N, C, H, W)"
    ws = tuple(_shape(weight))
    if len(ws) != d + 2:
        raise ValueError(f"{fname}: weight must have shape (out_channels, in_channels / groups, "
                         f"{'kL' if d == 1 else 'kH, kW'}), got {ws}")
    x, added = _batched(x, d, fname, hint)
    xs = tuple(_shape(x))
    groups = int(groups)
    if groups < 1 or xs[1] % groups or ws[0] % groups:
        raise ValueError(f"{fname}: groups={groups} must divide the input's {xs[1]} channels and the "
                         f"weight's {ws[0]} output channels")
    if xs[1] != ws[1] * groups:
        raise ValueError(f"{fname}: input of shape {xs} has {xs[1]} channels, but weight of shape {ws} "
                         f"with groups={groups} expects {ws[1] * groups}")
    stride = _positive(_tuple(stride, d, fname, "stride"), fname, "stride")
    dilation = _positive(_tuple(dilation, d, fname, "dilation"), fname, "dilation")
    pads = _conv_padding(padding, ws[2:], stride, dilation, fname)
    out = cv.conv(x, weight, stride=stride, padding=pads, dilation=dilation, groups=groups)
    return _unbatched(_add_bias(out, bias, ws[0], fname), added)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """1-D cross-correlation, (N, C, L) by weight (out, C / groups, kL) (torch.nn.functional.conv1d)."""
    return _conv_nd(1, "conv1d", input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """2-D cross-correlation, (N, C, H, W) by weight (out, C / groups, kH, kW)
    (torch.nn.functional.conv2d); ``padding`` an int, a pair, 'valid' or 'same'."""
    return _conv_nd(2, "conv2d", input, weight, bias, stride, padding, dilation, groups)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0,  # noqa: A002
                     output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution, (N, C_in, H, W) by weight (C_in, out / groups, kH, kW)
    (torch.nn.functional.conv_transpose2d): the gradient of conv2d with respect to its input."""
    fname, d = "conv_transpose2d", 2
    ws = tuple(_shape(weight))
    if len(ws) != d + 2:
        raise ValueError(f"{fname}: weight must have shape (in_channels, out_channels / groups, kH, kW), "
                         f"got {ws}")
    x, added = _batched(input, d, fname, "(N, C, H, W)")
    xs = tuple(_shape(x))
    groups = int(groups)
    if groups < 1 or xs[1] % groups:
        raise ValueError(f"{fname}: groups={groups} must divide the input's {xs[1]} channels")
    if xs[1] != ws[0]:
        raise ValueError(f"{fname}: input of shape {xs} has {xs[1]} channels, but weight of shape {ws} "
                         f"expects {ws[0]} (weight is (in_channels, out_channels / groups, kH, kW))")
    stride = _positive(_tuple(stride, d, fname, "stride"), fname, "stride")
    dilation = _positive(_tuple(dilation, d, fname, "dilation"), fname, "dilation")
    pads = _tuple(padding, d, fname, "padding")
    extra = _tuple(output_padding, d, fname, "output_padding")
    for op, s, dl in zip(extra, stride, dilation):
        if not 0 <= op < max(s, dl):
            raise ValueError(f"{fname}: output_padding {extra} must be smaller than stride {stride} or "
                             f"dilation {dilation}")
    sizes = tuple((n - 1) * s - 2 * p + dl * (k - 1) + op + 1
                  for n, s, p, dl, k, op in zip(xs[2:], stride, pads, dilation, ws[2:], extra))
    if any(n < 1 for n in sizes):  # as PyTorch: never an empty or clipped output
        raise ValueError(f"{fname}: input of shape {xs} with weight {ws}, stride {stride}, padding {pads}, "
                         f"output_padding {extra} and dilation {dilation} gives an output of spatial size "
                         f"{sizes}, which is too small; use less padding")
    pairs = tuple((p, p - op) for p, op in zip(pads, extra))
    out = cv.conv_transpose(x, weight, stride=stride, padding=pairs, dilation=dilation, groups=groups)
    return _unbatched(_add_bias(out, bias, ws[1] * groups, fname), added)


def _pool_geometry(fname, xs, d, kernel_size, stride, padding, dilation, ceil_mode):
    kernel = _positive(_tuple(kernel_size, d, fname, "kernel_size"), fname, "kernel_size")
    stride = kernel if stride is None or stride == () else _tuple(stride, d, fname, "stride")
    stride = _positive(stride, fname, "stride")
    dilation = _positive(_tuple(dilation, d, fname, "dilation"), fname, "dilation")
    pads = _tuple(padding, d, fname, "padding")
    if any(not 0 <= p <= k // 2 for p, k in zip(pads, kernel)):
        raise ValueError(f"{fname}: padding {pads} must be at most half the kernel size {kernel} "
                         f"(as in PyTorch)")
    pairs = []
    for s, k, st, p, dl in zip(xs[2:], kernel, stride, pads, dilation):
        span = s + 2 * p - dl * (k - 1) - 1
        out = (-(-span // st) if ceil_mode else span // st) + 1
        if ceil_mode and (out - 1) * st >= s + p:  # windows start inside the input or the low padding
            out -= 1
        if out < 1:
            raise ValueError(f"{fname}: input of shape {xs} with padding {pads} is smaller than the "
                             f"kernel {kernel} (dilation {dilation})")
        hi = p
        if ceil_mode:  # as PyTorch: the last window may hang over the end, even past the padding
            hi = (out - 1) * st + dl * (k - 1) + 1 - s - p
        pairs.append((p, max(hi, p)))
    return kernel, stride, tuple(pairs), dilation


def _max_pool(d, fname, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    if return_indices:
        raise NotImplementedError(f"{fname}: return_indices=True is not supported; the gradient needs "
                                  f"no indices (wg.grad routes it through each window's maximum)")
    x, added = _batched(x, d, fname, "(N, C, L)" if d == 1 else "(N, C, H, W)")
    kernel, stride, pairs, dilation = _pool_geometry(fname, tuple(_shape(x)), d, kernel_size, stride, padding,
                                                     dilation, ceil_mode)
    return _unbatched(cv.max_pool(x, kernel, stride, pairs, dilation), added)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode=False, return_indices=False):
    """Maximum over windows of (N, C, L) (torch.nn.functional.max_pool1d); stride defaults to the kernel."""
    return _max_pool(1, "max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode=False, return_indices=False):
    """Maximum over windows of (N, C, H, W) (torch.nn.functional.max_pool2d); stride defaults to the
    kernel; the gradient goes to each window's first maximum."""
    return _max_pool(2, "max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def _window_sums(x, kernel, stride, pairs):
    """Sum over each window: a depthwise convolution of every (n, c) plane by a kernel of ones."""
    xs = tuple(_shape(x))
    ones = np.ones((1, 1) + kernel, dtype=broadcasting.dtype_of(x))
    flat = broadcasting.reshape(x, (xs[0] * xs[1], 1) + xs[2:])
    out = cv.conv(flat, ones, stride=stride, padding=pairs, dilation=(1,) * len(kernel), groups=1)
    return broadcasting.reshape(out, xs[:2] + tuple(_shape(out))[2:])


def _avg_pool(d, fname, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    x, added = _batched(x, d, fname, "(N, C, L)" if d == 1 else "(N, C, H, W)")
    xs = tuple(_shape(x))
    kernel, stride, pairs, _ = _pool_geometry(fname, xs, d, kernel_size, stride, padding, 1, ceil_mode)
    sums = _window_sums(x, kernel, stride, pairs)
    if divisor_override is not None:
        out = sums * (1.0 / float(divisor_override))
    elif all(lo == hi == 0 for lo, hi in pairs) or (count_include_pad and all(lo == hi for lo, hi in pairs)):
        out = sums * (1.0 / math.prod(kernel))
    else:  # divide by each window's count: the input, the padding when it counts, never ceil_mode's overhang
        counts = np.ones((), dtype=np.float64)
        for size, k, st, (lo, hi) in zip(xs[2:], kernel, stride, pairs):
            inside = np.zeros(lo + size + hi)
            inside[0 if count_include_pad else lo:lo + size + (lo if count_include_pad else 0)] = 1.0
            per_axis = np.convolve(inside, np.ones(k), mode="valid")[::st]
            counts = np.multiply.outer(counts, per_axis)
        out = sums * (1.0 / counts).astype(broadcasting.dtype_of(x))
    return _unbatched(out, added)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True):
    """Mean over windows of (N, C, L) (torch.nn.functional.avg_pool1d); padding counts, as by default
    in PyTorch."""
    return _avg_pool(1, "avg_pool1d", input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True,
               divisor_override=None):
    """Mean over windows of (N, C, H, W) (torch.nn.functional.avg_pool2d); padding counts in the mean
    unless ``count_include_pad=False``, as in PyTorch."""
    return _avg_pool(2, "avg_pool2d", input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def _averaging_matrix(size, out, dtype):
    """(out, size): row i averages [floor(i size / out), ceil((i + 1) size / out)), PyTorch's windows."""
    m = np.zeros((out, size), dtype=dtype)
    for i in range(out):
        lo, hi = (i * size) // out, -(-((i + 1) * size) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """Mean over the windows that split (N, C, H, W) into ``output_size`` (torch.nn.functional.
    adaptive_avg_pool2d; None in ``output_size`` keeps that axis): A_h @ x @ A_w^T."""
    fname = "adaptive_avg_pool2d"
    x, added = _batched(input, 2, fname, "(N, C, H, W)")
    xs = tuple(_shape(x))
    if isinstance(output_size, (int, np.integer)) or output_size is None:
        output_size = (output_size, output_size)
    oh, ow = (s if o is None else int(o) for o, s in zip(output_size, xs[2:]))
    if oh < 1 or ow < 1:
        raise ValueError(f"{fname}: output_size must be positive, got {output_size}")
    dtype = broadcasting.dtype_of(x)
    rows, cols = _averaging_matrix(xs[2], oh, dtype), _averaging_matrix(xs[3], ow, dtype).T
    out = products.matmul(products.matmul(rows, x), cols)
    return _unbatched(out, added)

