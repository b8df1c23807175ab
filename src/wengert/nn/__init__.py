"""wengert.nn: modules, layers, activations, losses and initialisers (``torch.nn``'s shape).

    model = nn.MLP([64, 128, 10])
    opt = optim.Adam(model.parameters(), lr=1e-3)
    loss = nn.cross_entropy(model(x), labels)      # x: array, labels: integer array
    opt.zero_grad(); loss.backward(); opt.step()

or functionally: ``wg.grad(lambda p: nn.cross_entropy(model.apply(p, x), labels))(model.parameters_tree())``.
"""

from wengert.nn import functional, init, utils
from wengert.nn.attention import MultiheadAttention
from wengert.nn.conv import (
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    Conv1d,
    Conv2d,
    ConvTranspose2d,
    MaxPool1d,
    MaxPool2d,
)
from wengert.nn.functional import (
    binary_cross_entropy_with_logits,
    cross_entropy,
    gelu,
    log_softmax,
    mse_loss,
    nll_loss,
    relu,
    sigmoid,
    softmax,
    tanh,
)
from wengert.nn.layers import (
    GELU,
    MLP,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    Linear,
    LogSoftmax,
    ReLU,
    Sequential,
    Sigmoid,
    Softmax,
    Tanh,
)
from wengert.nn.module import Module, Parameter, SparseRows, functional_call
from wengert.nn.normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from wengert.nn.recurrent import GRU, LSTM, GRUCell, LSTMCell, RNNCell

__all__ = [
    "Module", "Parameter", "SparseRows", "functional_call", "Linear", "Embedding", "Sequential", "MLP",
    "Dropout",
    "ReLU", "Tanh", "Sigmoid", "GELU", "Identity",
    "relu", "tanh", "sigmoid", "gelu", "softmax", "log_softmax",
    "cross_entropy", "nll_loss", "mse_loss", "binary_cross_entropy_with_logits", "init",
    "Flatten", "Softmax", "LogSoftmax", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm",
    "RNNCell", "LSTMCell", "GRUCell", "LSTM", "GRU", "MultiheadAttention", "functional", "utils",
]
__all__ += ["Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d",
            "AdaptiveAvgPool2d"]
