"""Rule-table cases for the neural-network primitives (``wengert.rules.nn``) and the composed
activations and losses of ``wengert.nn``."""

import numpy as np

from tests.support.rule_helpers import R, away, unary
from wengert import nn
from wengert.rules import nn as nn_ops

LABELS_4 = np.array([2, 0, 1, 2])
LABELS_23 = np.array([[0, 3, 1], [2, 2, 0]])

CASES = {
    "relu": unary(nn_ops.relu, make=away),
    "log_softmax": [
        (nn_ops.log_softmax, (R(5),)),
        (nn_ops.log_softmax, (R(3, 4, lo=-3, hi=3),)),
        (lambda x: nn_ops.log_softmax(x, axis=0), (R(3, 4),)),
    ],
    "softmax_cross_entropy": [
        (lambda x: nn_ops.softmax_cross_entropy(x, LABELS_4), (R(4, 3, lo=-2, hi=2),)),
        (lambda x: nn_ops.softmax_cross_entropy(x, LABELS_23), (R(2, 3, 4),)),
        (lambda x: nn_ops.softmax_cross_entropy(x, 1), (R(3),)),
        (lambda x: nn_ops.softmax_cross_entropy(x, LABELS_23, kept=1), (R(2, 3, 4),)),  # vmap's form
    ],
}

COMPOSED = {
    "nn.softmax": [(nn.softmax, (R(2, 5),)), (lambda x: nn.softmax(x, axis=0), (R(3, 2),))],
    "nn.sigmoid": unary(nn.sigmoid, lo=-3, hi=3),
    "nn.gelu": unary(nn.gelu, lo=-3, hi=3),
    "nn.cross_entropy(sum)": [(lambda x: nn.cross_entropy(x, LABELS_4, reduction="sum"), (R(4, 3),))],
    "nn.cross_entropy(none)": [(lambda x: nn.cross_entropy(x, LABELS_4, reduction="none"), (R(4, 3),))],
    "nn.mse_loss": [(nn.mse_loss, (R(3, 2), R(3, 2)))],
    "nn.binary_cross_entropy_with_logits": [
        (nn.binary_cross_entropy_with_logits, (away(6), R(6, lo=0, hi=1))),
    ],
}
