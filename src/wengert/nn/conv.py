"""Convolution and pooling layers (``torch.nn.Conv2d`` and friends): PyTorch's constructor arguments,
defaults, parameter names and layouts, channels first.

``weight`` is (out_channels, in_channels / groups, *kernel_size) for ``Conv1d``/``Conv2d`` and
(in_channels, out_channels / groups, *kernel_size) for ``ConvTranspose2d``, exactly PyTorch's, so a
PyTorch state_dict's arrays load unchanged. ``padding_mode`` "reflect", "replicate" or "circular"
pads the input with ``wengert.numpy.pad`` first, as PyTorch does (ConvTranspose2d: "zeros" only).
Initialisation is PyTorch's default (kaiming_uniform with a = sqrt(5)): weight and bias uniform in
+-1/sqrt(fan_in), fan_in = weight.shape[1] * prod(kernel).
Parameters are float32 by default; ``dtype=np.float64`` for gradient checks. An input of the wrong
rank or channel count is refused with the layer, the expected and the given shape.
"""

import math

import numpy as np

import wengert.numpy as wnp
from wengert.nn import convolution as F
from wengert.nn import init
from wengert.nn.module import Module, Parameter
from wengert.rules import broadcasting

__all__ = ["Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d",
           "AdaptiveAvgPool2d"]

_SPATIAL = {1: "L", 2: "H, W"}
_PAD_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}  # NumPy's


def _tuple(value, d, layer, what):
    if isinstance(value, (int, np.integer)):
        return (int(value),) * d
    value = tuple(int(v) for v in value)
    if len(value) != d:
        raise ValueError(f"{layer}: {what} must be an int or a tuple of {d} ints, got {value}")
    return value


def _check_input(module, x, d, channels=None):
    """``x`` of shape (N, C, *spatial) or (C, *spatial), C == ``channels`` when given."""
    s = tuple(broadcasting.shape_of(x))
    want = f"(N, {channels if channels is not None else 'C'}, {_SPATIAL[d]})"
    if len(s) not in (d + 1, d + 2):
        raise ValueError(f"{module!r}: expected an input of shape {want} or without the batch axis, got "
                         f"shape {s} ({len(s)} dimensions, not {d + 2} or {d + 1})")
    if channels is not None and s[-d - 1] != channels:
        raise ValueError(f"{module!r}: expected an input of shape {want} ({channels} channels), got shape "
                         f"{s} with {s[-d - 1]} channels")


class _ConvNd(Module):
    d = 2
    transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", output_padding=0, rng=None, dtype=np.float32):
        super().__init__()
        name, d = type(self).__name__, self.d
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        if self.groups < 1 or self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(f"{name}: groups={groups} must divide in_channels={in_channels} and "
                             f"out_channels={out_channels}")
        if padding_mode not in _PAD_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {sorted(_PAD_MODES)}, got "
                             f"{padding_mode!r}")
        if padding_mode != "zeros" and self.transposed:
            raise ValueError(f"{name}: only padding_mode='zeros' is supported (as in PyTorch), got "
                             f"{padding_mode!r}")
        self.kernel_size = _tuple(kernel_size, d, name, "kernel_size")
        self.stride = _tuple(stride, d, name, "stride")
        self.padding = padding if isinstance(padding, str) else _tuple(padding, d, name, "padding")
        self.dilation = _tuple(dilation, d, name, "dilation")
        self.output_padding = _tuple(output_padding, d, name, "output_padding")
        self.padding_mode = padding_mode
        if self.transposed:
            shape = (self.in_channels, self.out_channels // self.groups) + self.kernel_size
        else:
            shape = (self.out_channels, self.in_channels // self.groups) + self.kernel_size
        rng = init.as_rng(rng)
        bound = 1.0 / math.sqrt(shape[1] * math.prod(self.kernel_size))  # kaiming_uniform(a=sqrt(5))
        self.weight = Parameter(init.uniform(shape, -bound, bound, rng, dtype))
        self.bias = Parameter(init.uniform((self.out_channels,), -bound, bound, rng, dtype)) if bias else None

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self.d:
            s += f", padding={self.padding!r}"
        if self.dilation != (1,) * self.d:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self.d:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode!r}"
        if self.bias is None:
            s += ", bias=False"
        return s


class _Conv(_ConvNd):
    """Conv1d and Conv2d: PyTorch's constructor (no output_padding) and forward, by ``d``."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", rng=None, dtype=np.float32):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, rng=rng, dtype=dtype)

    def forward(self, x):
        _check_input(self, x, self.d, self.in_channels)
        conv = F.conv1d if self.d == 1 else F.conv2d
        padding = self.padding
        if self.padding_mode != "zeros":  # pad as PyTorch's _conv_forward, then convolve without padding
            x, padding = self._pad(x), 0
        return conv(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)

    def _pad(self, x):
        mode = self.padding_mode
        name = type(self).__name__
        pairs = F._conv_padding(self.padding, self.kernel_size, self.stride, self.dilation, name)
        shape = tuple(broadcasting.shape_of(x))
        for (lo, hi), n in zip(pairs, shape[-self.d:]):  # as PyTorch: reflect < size, circular <= size
            if mode != "replicate" and max(lo, hi) > (n - 1 if mode == "reflect" else n):
                raise ValueError(f"{self!r}: padding {self.padding} with padding_mode={self.padding_mode!r} "
                                 f"must be {'smaller than' if self.padding_mode == 'reflect' else 'at most'} "
                                 f"the input's spatial size, got input of shape {shape}")
        widths = ((0, 0),) * (len(shape) - self.d) + tuple(pairs)
        return wnp.pad(x, widths, mode=_PAD_MODES[self.padding_mode])


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L) (torch.nn.Conv1d); weight (out, in / groups, k)."""
    d = 1


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W) (torch.nn.Conv2d); weight (out, in / groups, kH, kW),
    ``padding`` an int, a pair, 'valid' or 'same'."""
    d = 2


class ConvTranspose2d(_ConvNd):
    """2-D transposed convolution (torch.nn.ConvTranspose2d); weight (in, out / groups, kH, kW)."""
    d = 2
    transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1,
                 bias=True, dilation=1, padding_mode="zeros", rng=None, dtype=np.float32):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, rng=rng, dtype=dtype)
        if isinstance(self.padding, str):
            raise ValueError(f"ConvTranspose2d: padding must be an int or a pair, got {padding!r}")

    def forward(self, x):
        _check_input(self, x, 2, self.in_channels)
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                  self.groups, self.dilation)


class _Pool(Module):
    d = 2


class _MaxPoolNd(_Pool):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode
        if return_indices:
            raise NotImplementedError(f"{type(self).__name__}: return_indices=True is not supported")

    def forward(self, x):
        _check_input(self, x, self.d)
        pool = F.max_pool1d if self.d == 1 else F.max_pool2d
        return pool(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Maximum over windows of (N, C, L) (torch.nn.MaxPool1d); stride defaults to kernel_size."""
    d = 1


class MaxPool2d(_MaxPoolNd):
    """Maximum over windows of (N, C, H, W) (torch.nn.MaxPool2d); stride defaults to kernel_size."""
    d = 2


class _AvgPoolNd(_Pool):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad, self.divisor_override = ceil_mode, count_include_pad, \
            divisor_override

    def forward(self, x):
        _check_input(self, x, self.d)
        if self.d == 1:
            return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                self.count_include_pad)
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """Mean over windows of (N, C, L) (torch.nn.AvgPool1d); padding counts in the mean by default."""
    d = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """Mean over windows of (N, C, H, W) (torch.nn.AvgPool2d); padding counts in the mean by default."""
    d = 2


class AdaptiveAvgPool2d(_Pool):
    """Mean over the windows that split (N, C, H, W) into ``output_size`` (torch.nn.AdaptiveAvgPool2d)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        _check_input(self, x, 2)
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"
