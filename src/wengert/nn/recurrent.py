"""Recurrent layers: ``RNNCell``, ``LSTMCell``, ``GRUCell`` and the multi-step ``LSTM`` and ``GRU``
(torch.nn's constructor arguments, defaults, gate orders and parameter names and layouts:
``weight_ih`` of shape (gates * hidden, input), ``weight_hh`` (gates * hidden, hidden), ``bias_ih``,
``bias_hh``; ``_l{k}`` suffixes for layer k of ``LSTM``/``GRU``), so PyTorch's ``state_dict`` loads
unchanged. Initialisation U(-1/sqrt(hidden), 1/sqrt(hidden)), as PyTorch.

A time step is ordinary Python: a loop over a sequence records as many steps as it has, so the
graph follows each sequence's length (the dynamic networks of DyNet and Chainer). The LSTM cell's
pointwise part is one primitive (``wengert.rules.recurrent.lstm_cell``); ``LSTM`` computes every
step's input projection with one product and then runs all the steps of a layer as one primitive
(``lstm_sequence``, backpropagation through time in its rule, the recurrent weight's gradient one
product over all steps); ``GRU`` loops in Python over composed steps.
"""

import numpy as np

import wengert.numpy as wnp
from wengert.api.tensor import Tensor
from wengert.core.trace import BOX_TYPES, unbox_all
from wengert.nn import functional as F
from wengert.nn import init
from wengert.nn.layers import Dropout
from wengert.nn.module import Module, Parameter
from wengert.rules.recurrent import discard_kept, lstm_cell, lstm_sequence

__all__ = ["RNNCell", "LSTMCell", "GRUCell", "LSTM", "GRU"]


def _shape(x):
    return tuple(x.shape) if type(x) in BOX_TYPES else tuple(np.shape(x))


def _t(w):
    return wnp.transpose(w)


def lstm_step(gates, c):
    """One LSTM step from its pre-activations (..., 4H) in PyTorch's gate order (i, f, g, o) and
    the previous cell state: ``(h', c')``."""
    hc = lstm_cell(gates, c)
    H = _shape(c)[-1]
    return hc[..., :H], hc[..., H:]


def _gru_step(gi, gh, h):
    """h' from the input's and the hidden state's projections (..., 3H), gate order (r, z, n)."""
    H = _shape(h)[-1]
    r = F.sigmoid(gi[..., :H] + gh[..., :H])
    z = F.sigmoid(gi[..., H:2 * H] + gh[..., H:2 * H])
    n = wnp.tanh(gi[..., 2 * H:] + r * gh[..., 2 * H:])
    return n + z * (h - n)


class _CellBase(Module):
    _gates = 1

    def __init__(self, input_size, hidden_size, bias=True, rng=None, dtype=np.float32):
        super().__init__()
        rng = init.as_rng(rng)
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        k = 1.0 / np.sqrt(hidden_size)
        G = self._gates * self.hidden_size
        self.weight_ih = Parameter(init.uniform((G, self.input_size), -k, k, rng, dtype))
        self.weight_hh = Parameter(init.uniform((G, self.hidden_size), -k, k, rng, dtype))
        self.bias_ih = Parameter(init.uniform((G,), -k, k, rng, dtype)) if bias else None
        self.bias_hh = Parameter(init.uniform((G,), -k, k, rng, dtype)) if bias else None

    def _check_input(self, x):
        shape = _shape(x)
        if len(shape) not in (1, 2) or shape[-1] != self.input_size:
            raise ValueError(f"{type(self).__name__}({self.input_size}, {self.hidden_size}): expected input "
                             f"of shape (batch, {self.input_size}) or ({self.input_size},), got {shape}")
        return shape

    def _zeros(self, shape, x):
        dtype = self.weight_ih.dtype if type(x) in BOX_TYPES else np.result_type(x, self.weight_ih.dtype)
        return np.zeros(shape[:-1] + (self.hidden_size,), dtype=dtype)

    def _check_hidden(self, h, shape, what="hx"):
        want = shape[:-1] + (self.hidden_size,)
        if _shape(h) != want:
            raise ValueError(f"{type(self).__name__}: {what} must have shape {want} for input of shape "
                             f"{shape}, got {_shape(h)}")

    def _proj(self, x, w, b):
        y = x @ _t(w)
        return y if b is None else y + b

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias_ih is not None}"


class RNNCell(_CellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (torch.nn.RNNCell; ``nonlinearity="relu"``)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", rng=None, dtype=np.float32):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(input_size, hidden_size, bias, rng, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, x, hx=None):
        shape = self._check_input(x)
        h = self._zeros(shape, x) if hx is None else hx
        self._check_hidden(h, shape)
        a = self._proj(x, self.weight_ih, self.bias_ih) + self._proj(h, self.weight_hh, self.bias_hh)
        return wnp.tanh(a) if self.nonlinearity == "tanh" else F.relu(a)


class LSTMCell(_CellBase):
    """One LSTM step (torch.nn.LSTMCell): ``h, c = cell(x, (h, c))``; gates (i, f, g, o) stacked in
    that order in ``weight_ih`` (4H, input), ``weight_hh`` (4H, H), ``bias_ih``, ``bias_hh``."""
    _gates = 4

    def forward(self, x, hx=None):
        shape = self._check_input(x)
        if hx is None:
            h = c = self._zeros(shape, x)
        else:
            h, c = hx
            self._check_hidden(h, shape, "h")
            self._check_hidden(c, shape, "c")
        gates = self._proj(x, self.weight_ih, self.bias_ih) + self._proj(h, self.weight_hh, self.bias_hh)
        return lstm_step(gates, c)


class GRUCell(_CellBase):
    """One GRU step (torch.nn.GRUCell), gates (r, z, n): n = tanh(W_in x + b_in + r (W_hn h + b_hn)),
    h' = (1 - z) n + z h."""
    _gates = 3

    def forward(self, x, hx=None):
        shape = self._check_input(x)
        h = self._zeros(shape, x) if hx is None else hx
        self._check_hidden(h, shape)
        gi = self._proj(x, self.weight_ih, self.bias_ih)
        return _gru_step(gi, self._proj(h, self.weight_hh, self.bias_hh), h)


def _project(x, w):
    """x (L, N, in) @ w.T as one 2-D product (a batched 3-D product, and its gradient, are slower)."""
    L, N, n_in = _shape(x)
    return wnp.reshape(wnp.reshape(x, (L * N, n_in)) @ _t(w), (L, N, -1))


class _Recurrent(Module):
    _gates = 1
    _states = 1

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, rng=None, dtype=np.float32):
        super().__init__()
        name = type(self).__name__
        if num_layers < 1:
            raise ValueError(f"{name}: num_layers must be at least 1, got {num_layers}")
        rng = init.as_rng(rng)
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers = int(num_layers)
        self.batch_first, self.bias = bool(batch_first), bool(bias)
        self.bidirectional = bool(bidirectional)
        self.dropout = float(dropout)
        self.drop = Dropout(self.dropout, rng=rng) if self.dropout else None
        k = 1.0 / np.sqrt(hidden_size)
        G = self._gates * self.hidden_size
        for layer in range(self.num_layers):
            n_in = self.input_size if layer == 0 else self.hidden_size * self._directions
            for suffix in self._suffixes:  # PyTorch's names and order: l{k}, then l{k}_reverse
                tag = f"l{layer}{suffix}"
                setattr(self, f"weight_ih_{tag}", Parameter(init.uniform((G, n_in), -k, k, rng, dtype)))
                setattr(self, f"weight_hh_{tag}",
                        Parameter(init.uniform((G, self.hidden_size), -k, k, rng, dtype)))
                if bias:
                    setattr(self, f"bias_ih_{tag}", Parameter(init.uniform((G,), -k, k, rng, dtype)))
                    setattr(self, f"bias_hh_{tag}", Parameter(init.uniform((G,), -k, k, rng, dtype)))

    @property
    def _directions(self):
        return 2 if self.bidirectional else 1

    @property
    def _suffixes(self):
        return ("", "_reverse") if self.bidirectional else ("",)

    def _layer_params(self, layer, suffix=""):
        get = vars(self).get
        tag = f"l{layer}{suffix}"
        return get(f"weight_ih_{tag}"), get(f"weight_hh_{tag}"), get(f"bias_ih_{tag}"), get(f"bias_hh_{tag}")

    def forward(self, input, hx=None):  # noqa: A002 - PyTorch's name
        """``output, h_n`` (GRU) or ``output, (h_n, c_n)`` (LSTM), as PyTorch: output (L, N, D H)
        ((N, L, D H) with ``batch_first``; (L, D H) for an unbatched (L, input) sequence), states
        (D num_layers, N, H), D = 2 when bidirectional (the reverse direction's states after the
        forward one's, layer by layer), else 1."""
        name = type(self).__name__
        shape = _shape(input)
        if len(shape) not in (2, 3) or shape[-1] != self.input_size:
            raise ValueError(f"{name}({self.input_size}, {self.hidden_size}): expected input of shape "
                             f"({'N, L' if self.batch_first else 'L, N'}, {self.input_size}) or (L, "
                             f"{self.input_size}), got {shape}")
        unbatched = len(shape) == 2
        if unbatched:
            x = wnp.expand_dims(input, 1)
        else:
            x = wnp.swapaxes(input, 0, 1) if self.batch_first else input
        L, N = _shape(x)[:2]
        states = self._initial_states(hx, N, unbatched, x)
        finals = [[] for _ in range(self._states)]
        D = self._directions
        for layer in range(self.num_layers):
            if layer and self.drop is not None and self.training:
                x = self.drop(x)
            outputs = []
            for direction, suffix in enumerate(self._suffixes):
                state = [s[layer * D + direction] for s in states]
                if direction:  # the reverse direction reads the sequence backwards
                    out, last = self._run_layer(wnp.flip(x, 0), state, layer, L, suffix)
                    out = wnp.flip(out, 0)
                else:
                    out, last = self._run_layer(x, state, layer, L, suffix)
                outputs.append(out)
                for acc, s in zip(finals, last):
                    acc.append(s)
            x = outputs[0] if D == 1 else wnp.concatenate(outputs, axis=-1)
        out = wnp.squeeze(x, 1) if unbatched else (wnp.swapaxes(x, 0, 1) if self.batch_first else x)
        final = [wnp.stack(f) for f in finals]
        if unbatched:
            final = [wnp.squeeze(f, 1) for f in final]
        return out, (final[0] if self._states == 1 else tuple(final))

    def _initial_states(self, hx, N, unbatched, x):
        want = (self.num_layers * self._directions, N, self.hidden_size)
        if hx is None:
            w = self.weight_ih_l0
            dtype = w.dtype if type(x) in BOX_TYPES else np.result_type(x, w.dtype)
            return [np.zeros(want, dtype=dtype)] * self._states
        given = [hx] if self._states == 1 else list(hx)
        out = []
        for s in given:
            s = wnp.expand_dims(s, 1) if unbatched else s
            if _shape(s) != want:
                shown = (want[0], self.hidden_size) if unbatched else want
                raise ValueError(f"{type(self).__name__}: initial state must have shape {shown}, got "
                                 f"{_shape(s) if not unbatched else _shape(s)[::2]}")
            out.append(s)
        return out

    def extra_repr(self):
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, bias={self.bias}, "
                f"batch_first={self.batch_first}" + (", bidirectional=True" if self.bidirectional else ""))


class LSTM(_Recurrent):
    """A multi-layer LSTM over a sequence (torch.nn.LSTM): ``output, (h_n, c_n) = lstm(x, (h0, c0))``.
    Parameters ``weight_ih_l{k}`` (4H, input), ``weight_hh_l{k}`` (4H, H), ``bias_ih_l{k}``,
    ``bias_hh_l{k}``; gates (i, f, g, o). ``dropout`` between layers while training."""
    _gates = 4
    _states = 2

    def _run_layer(self, x, state, layer, L, suffix=""):
        w_ih, w_hh, b_ih, b_hh = self._layer_params(layer, suffix)
        projected = _project(x, w_ih)
        if b_ih is not None:
            projected = projected + (b_ih + b_hh)
        h, c = state
        H = self.hidden_size
        steps = lstm_sequence(projected, h, c, w_hh)  # (L, N, 2H): every step's [h, c], one node
        if type(steps) is np.ndarray or (type(steps) is Tensor and not steps.requires_grad):
            discard_kept(unbox_all(steps))  # not recorded (no_grad, plain arrays): no backward pass
        last = steps[-1]
        return steps[..., :H], (last[..., :H], last[..., H:])


class GRU(_Recurrent):
    """A multi-layer GRU over a sequence (torch.nn.GRU): ``output, h_n = gru(x, h0)``. Parameters
    ``weight_ih_l{k}`` (3H, input), ``weight_hh_l{k}`` (3H, H), ``bias_ih_l{k}``, ``bias_hh_l{k}``;
    gates (r, z, n)."""
    _gates = 3

    def _run_layer(self, x, state, layer, L, suffix=""):
        w_ih, w_hh, b_ih, b_hh = self._layer_params(layer, suffix)
        projected = _project(x, w_ih)
        if b_ih is not None:
            projected = projected + b_ih
        w_hh_t = _t(w_hh)
        (h,) = state
        hs = []
        for t in range(L):
            gh = h @ w_hh_t
            h = _gru_step(projected[t], gh if b_hh is None else gh + b_hh, h)
            hs.append(h)
        return wnp.stack(hs), (h,)
