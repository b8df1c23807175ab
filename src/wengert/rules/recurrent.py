"""The LSTM cell's pointwise part as one primitive, ``lstm_cell(gates, c)``, for speed.

``gates`` (..., 4H) are the pre-activations in PyTorch's order (input, forget, cell, output):
``x @ W_ih.T + b_ih + h @ W_hh.T + b_hh``; ``c`` (..., H) is the previous cell state. The result is
``concatenate([h', c'], -1)`` of shape (..., 2H), with

    i, f, g, o = sigmoid(a_i), sigmoid(a_f), tanh(a_g), sigmoid(a_o)
    c' = f * c + i * g          h' = o * tanh(c')

Composed from primitives this is about fifteen tape nodes per time step (four slices, three
sigmoids, two tanh, five products and sums); as one node it is one, with one backward step.
The VJP rules are written with wengert's functions (so that second derivatives work) and the
backward pass asks both arguments' shares of one joint rule (``vjp_joint``), computed once. The sigmoid
is ``(1 + tanh(x / 2)) / 2``, which never overflows. float32 stays float32.
"""

import numpy as np

from wengert.core.extend import defjvp, defvjp, facts
from wengert.core.primitive import Primitive
from wengert.rules import broadcasting, elementwise, shape

__all__ = ["lstm_cell"]


def _sigmoid_impl(x):
    return 0.5 * np.tanh(0.5 * x) + 0.5


def _lstm_cell_impl(gates, c):
    """concatenate([o * tanh(c'), c'], -1) with c' = f * c + i * g (PyTorch's gate order i, f, g, o)."""
    H = _check(gates, c)
    i = _sigmoid_impl(gates[..., :H])
    f = _sigmoid_impl(gates[..., H:2 * H])
    g = np.tanh(gates[..., 2 * H:3 * H])
    o = _sigmoid_impl(gates[..., 3 * H:])
    c_new = f * c + i * g
    return np.concatenate([o * np.tanh(c_new), c_new], axis=-1)


def _check(gates, c):
    gs, cs = broadcasting.shape_of(gates), broadcasting.shape_of(c)
    if not gs or gs[-1] % 4 or not cs or cs[-1] * 4 != gs[-1]:
        raise ValueError(f"lstm_cell: gates must have shape (..., 4*H) and the cell state (..., H); got "
                         f"gates of shape {tuple(gs)} and cell state of shape {tuple(cs)}")
    return cs[-1]


def _sigmoid(x):
    return 0.5 * elementwise.tanh(0.5 * x) + 0.5


def _activations(gates, c):
    H = broadcasting.shape_of(c)[-1]
    i = _sigmoid(gates[..., :H])
    f = _sigmoid(gates[..., H:2 * H])
    g = elementwise.tanh(gates[..., 2 * H:3 * H])
    o = _sigmoid(gates[..., 3 * H:])
    return i, f, g, o, H


def _backward(cot, gates, c):
    """(d gates, d c) for the cotangent ``cot`` = [dh', dc'] of the result."""
    i, f, g, o, H = _activations(gates, c)
    tanh_c = elementwise.tanh(f * c + i * g)
    dh, dc = cot[..., :H], cot[..., H:]
    dc_total = dc + dh * o * (1.0 - tanh_c * tanh_c)
    d_gates = shape.concatenate(dc_total * g * i * (1.0 - i), dc_total * c * f * (1.0 - f),
                                dc_total * i * (1.0 - g * g), dh * tanh_c * o * (1.0 - o), axis=-1)
    return d_gates, dc_total * f


def _vjp_gates(cot, out, gates, c):
    return _backward(cot, gates, c)[0]


def _vjp_c(cot, out, gates, c):
    return _backward(cot, gates, c)[1]


def _vjp_joint(needed, cot, out, gates, c):
    """Both arguments' shares from one backward computation (the backward pass calls this)."""
    d_gates, d_c = _backward(cot, gates, c)
    return [d_gates if needed[0] else None, d_c if needed[1] else None]


def _tangent(t_gates, t_c, gates, c):
    """The result's tangent for tangents of the pre-activations and of the cell state (either None)."""
    i, f, g, o, H = _activations(gates, c)
    c_new = f * c + i * g
    tanh_c = elementwise.tanh(c_new)
    t_new = 0.0
    t_o = 0.0
    if t_gates is not None:
        t_new = (t_gates[..., :H] * i * (1.0 - i) * g + t_gates[..., H:2 * H] * f * (1.0 - f) * c
                 + t_gates[..., 2 * H:3 * H] * (1.0 - g * g) * i)
        t_o = t_gates[..., 3 * H:] * o * (1.0 - o) * tanh_c
    if t_c is not None:
        t_new = t_new + f * t_c
    t_h = t_o + o * (1.0 - tanh_c * tanh_c) * t_new
    full = broadcasting.shape_of(c_new)
    return shape.concatenate(broadcasting.broadcast_to(t_h, full), broadcasting.broadcast_to(t_new, full),
                             axis=-1)


lstm_cell = Primitive(_lstm_cell_impl, name="lstm_cell", grad_post=broadcasting.unbroadcast)
defvjp(lstm_cell, _vjp_gates, _vjp_c)
defjvp(lstm_cell, lambda t, out, gates, c: _tangent(t, None, gates, c),
       lambda t, out, gates, c: _tangent(None, t, gates, c))
lstm_cell.vjp_joint, lstm_cell.vjp_extra = _vjp_joint, True  # one backward step for both
facts(lstm_cell, fresh=True, saves=(0, 1))


def _batch_lstm_cell(prim, values, batched, kwargs):
    """Examples are one more leading axis: line both arguments up on it and call the cell once."""
    gates, c = values
    size = broadcasting.shape_of(gates if batched[0] else c)[0]
    if not batched[0]:
        gates = broadcasting.broadcast_to(gates, (size,) + tuple(broadcasting.shape_of(gates)))
    if not batched[1]:
        c = broadcasting.broadcast_to(c, (size,) + tuple(broadcasting.shape_of(c)))
    gs, cs = tuple(broadcasting.shape_of(gates)), tuple(broadcasting.shape_of(c))
    rank = max(len(gs), len(cs))  # each example's axes line up from the right, after the batch axis
    gates = broadcasting.reshape(gates, gs[:1] + (1,) * (rank - len(gs)) + gs[1:])
    c = broadcasting.reshape(c, cs[:1] + (1,) * (rank - len(cs)) + cs[1:])
    lead = np.broadcast_shapes(tuple(broadcasting.shape_of(gates))[:-1], tuple(broadcasting.shape_of(c))[:-1])
    gates = broadcasting.broadcast_to(gates, lead + gs[-1:])
    c = broadcasting.broadcast_to(c, lead + cs[-1:])
    return prim(gates, c)


lstm_cell.batch = _batch_lstm_cell
