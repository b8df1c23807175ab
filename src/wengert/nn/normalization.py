"""Normalisation layers: ``BatchNorm1d``, ``BatchNorm2d``, ``LayerNorm``, ``GroupNorm`` (torch.nn's
constructor arguments, defaults, parameter and buffer names, so PyTorch's ``state_dict`` loads as is).

Batch norm's running statistics are buffers: plain NumPy arrays, updated in place in training mode
and never differentiated (a ``wg.grad`` of a training step updates them once, as PyTorch's
forward does). Under ``wg.vmap`` a training-mode batch norm that tracks running statistics is
refused (functorch refuses it too); ``eval()`` or ``track_running_stats=False`` work.
"""

import numpy as np

from wengert.core.trace import BOX_TYPES
from wengert.nn import functional as F
from wengert.nn.module import Module, Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm"]


def _shape(x):
    return tuple(x.shape) if type(x) in BOX_TYPES else tuple(np.shape(x))


class _BatchNorm(Module):
    _ranks: tuple[int, ...] = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 dtype=np.float32):
        super().__init__()
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), momentum
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        self.weight = Parameter(np.ones(num_features, dtype)) if affine else None
        self.bias = Parameter(np.zeros(num_features, dtype)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", np.zeros(num_features, dtype))
            self.register_buffer("running_var", np.ones(num_features, dtype))
            self.register_buffer("num_batches_tracked", np.array(0, dtype=np.int64))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def reset_running_stats(self):
        """Running mean 0, running variance 1, no batches counted."""
        if self.track_running_stats:
            self.running_mean[...] = 0
            self.running_var[...] = 1
            self.num_batches_tracked[...] = 0

    def forward(self, x):
        shape = _shape(x)
        name = type(self).__name__
        if len(shape) not in self._ranks:
            want = " or ".join(f"{r}-D" for r in self._ranks)
            raise ValueError(f"{name}: expected {want} input (N, C{', L' if 3 in self._ranks else ', H, W'}),"
                             f" got input of shape {shape}")
        if shape[1] != self.num_features:
            raise ValueError(f"{name}({self.num_features}): input has {shape[1]} channels on axis 1 "
                             f"(shape {shape}), expected {self.num_features}")
        updating = self.training and self.track_running_stats
        momentum = self.momentum
        if updating and momentum is None:  # a cumulative average, as PyTorch's momentum=None
            momentum = 1.0 / float(self.num_batches_tracked + 1)
        out = F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                           self.training or not self.track_running_stats, momentum or 0.0, self.eps)
        if updating:
            self.num_batches_tracked += 1
        return out

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) over all but axis 1 (torch.nn.BatchNorm1d):
    weight 1 and bias 0, buffers ``running_mean``, ``running_var``, ``num_batches_tracked``."""
    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) per channel (torch.nn.BatchNorm2d); see BatchNorm1d."""
    _ranks = (4,)


class LayerNorm(Module):
    """Normalisation over the last axes, ``normalized_shape`` (torch.nn.LayerNorm): weight 1, bias 0
    of that shape (``elementwise_affine``, ``bias``)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=np.float32):
        super().__init__()
        self.normalized_shape = (int(normalized_shape),) if np.ndim(normalized_shape) == 0 \
            else tuple(int(n) for n in normalized_shape)
        self.eps = float(eps)
        self.weight = Parameter(np.ones(self.normalized_shape, dtype)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype)) if elementwise_affine and bias else None

    def forward(self, x):
        shape = _shape(x)
        k = len(self.normalized_shape)
        if shape[len(shape) - k:] != self.normalized_shape or len(shape) < k:
            raise ValueError(f"LayerNorm({self.normalized_shape}): input of shape {shape} must end in "
                             f"{self.normalized_shape}")
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.weight is not None}"


class GroupNorm(Module):
    """Normalisation of (N, C, *) over groups of channels (torch.nn.GroupNorm): weight 1, bias 0
    per channel (``affine``)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, dtype=np.float32):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels={num_channels} must be divisible by "
                             f"num_groups={num_groups}")
        self.num_groups, self.num_channels, self.eps = int(num_groups), int(num_channels), float(eps)
        self.weight = Parameter(np.ones(num_channels, dtype)) if affine else None
        self.bias = Parameter(np.zeros(num_channels, dtype)) if affine else None

    def forward(self, x):
        shape = _shape(x)
        if len(shape) < 2 or shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm({self.num_groups}, {self.num_channels}): expected input (N, "
                             f"{self.num_channels}, *), got shape {shape}")
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.weight is not None}"
