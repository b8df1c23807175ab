"""Rule-table cases for convolution and pooling (``wengert.rules.convolution``) and the pooling
functions composed from them (``wengert.nn.functional``)."""

import numpy as np

from tests.support.rule_helpers import R
from wengert.nn import functional as F
from wengert.rules import convolution as cv


def distinct(*shape):
    """Values at least 0.1 apart (max pooling has a kink where two values of a window tie)."""
    rng = np.random.default_rng(int(np.prod(shape)))
    return rng.permutation(np.prod(shape)).reshape(shape) * 0.1 - 0.05 * np.prod(shape)


def _pairs(*pads):
    return tuple((p, p) if isinstance(p, int) else p for p in pads)


def _conv(stride, padding, dilation, groups=1):
    return lambda x, w: cv.conv(x, w, stride=stride, padding=_pairs(*padding), dilation=dilation,
                                groups=groups)


def _conv_t(stride, padding, dilation, groups=1):
    return lambda y, w: cv.conv_transpose(y, w, stride=stride, padding=_pairs(*padding), dilation=dilation,
                                          groups=groups)


def _pool(kernel, stride, padding, dilation):
    return lambda x: cv.max_pool(x, kernel, stride, _pairs(*padding), dilation)


INDEX = cv.pool_index(distinct(2, 2, 5, 4), (2, 2), (2, 1), ((1, 1), (0, 0)), (1, 1))
TILE_INDEX = cv.pool_index(distinct(2, 2, 5, 4), (2, 2), (2, 2), ((1, 0), (0, 0)), (1, 1))  # disjoint windows

CASES = {
    "conv": [
        (_conv((1,), (0,), (1,)), (R(2, 3, 6), R(4, 3, 3))),
        (_conv((2,), ((1, 2),), (2,), groups=2), (R(1, 4, 9), R(2, 2, 2))),
        (_conv((1, 1), (1, 1), (1, 1)), (R(2, 2, 4, 4), R(3, 2, 3, 3))),
        (_conv((2, 1), (0, (1, 0)), (1, 2), groups=2), (R(1, 4, 5, 6), R(4, 2, 2, 2))),
    ],
    "conv_transpose": [
        (_conv_t((2,), (0,), (1,)), (R(2, 3, 4), R(3, 2, 3))),
        (_conv_t((2, 2), ((1, 0), 1), (1, 1)), (R(1, 2, 3, 3), R(2, 3, 3, 2))),
        (_conv_t((1, 2), (0, 1), (2, 1), groups=2), (R(2, 4, 3, 2), R(4, 1, 2, 3))),
    ],
    "max_pool": [
        (_pool((2,), (2,), (0,), (1,)), (distinct(2, 3, 6),)),
        (_pool((3,), (1,), (1,), (2,)), (distinct(1, 2, 7),)),
        (_pool((2, 2), (2, 2), (0, 0), (1, 1)), (distinct(2, 2, 4, 4),)),
        (_pool((3, 2), (2, 1), (1, 0), (1, 2)), (distinct(1, 2, 5, 6),)),
        (_pool((2, 2), (2, 2), (1, (0, 1)), (1, 1)), (distinct(2, 2, 5, 5),)),   # tiles, padded
        (_pool((2, 2), (3, 4), (0, 0), (2, 1)), (distinct(1, 2, 7, 8),)),         # gaps between windows
    ],
    "window_gather": [
        (lambda h: cv.window_gather(h, INDEX, ((1, 1), (0, 0))), (R(2, 2, 5, 4),)),
    ],
    "window_scatter": [
        (lambda g: cv.window_scatter(g, INDEX, ((1, 1), (0, 0)), (5, 4)), (R(*INDEX.shape),)),
        (lambda g: cv.window_scatter(g, TILE_INDEX, ((1, 0), (0, 0)), (5, 4), unique=True),
         (R(*TILE_INDEX.shape),)),
    ],
}

COMPOSED = {
    "nn.avg_pool2d": [
        (lambda x: F.avg_pool2d(x, 2), (R(2, 2, 4, 4),)),
        (lambda x: F.avg_pool2d(x, (3, 2), stride=(1, 2), padding=1), (R(1, 2, 5, 4),)),
    ],
    "nn.avg_pool1d": [(lambda x: F.avg_pool1d(x, 3, stride=2, padding=1), (R(2, 3, 7),))],
    "nn.adaptive_avg_pool2d": [
        (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), (R(2, 2, 5, 7),)),
        (lambda x: F.adaptive_avg_pool2d(x, 1), (R(1, 3, 4, 4),)),
    ],
    "nn.conv2d": [
        (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding="valid"), (R(1, 2, 5, 5), R(3, 2, 2, 2), R(3))),
        (lambda x, w: F.conv2d(x, w, padding="same", dilation=2), (R(1, 2, 5, 4), R(2, 2, 2, 3))),
    ],
    "nn.conv1d": [(lambda x, w, b: F.conv1d(x, w, b, padding="same"), (R(2, 2, 5), R(3, 2, 4), R(3)))],
    "nn.conv_transpose2d": [
        (lambda y, w, b: F.conv_transpose2d(y, w, b, stride=2, padding=1, output_padding=1),
         (R(1, 2, 3, 3), R(2, 3, 3, 3), R(3))),
    ],
    "nn.max_pool2d": [(lambda x: F.max_pool2d(x, 2, ceil_mode=True), (distinct(1, 2, 5, 5),))],
}
