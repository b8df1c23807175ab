"""The LSTM cell's pointwise part as one primitive, ``lstm_cell(gates, c)``, for speed.

``gates`` (..., 4H) are the pre-activations in PyTorch's order (input, forget, cell, output):
``x @ W_ih.T + b_ih + h @ W_hh.T + b_hh``; ``c`` (..., H) is the previous cell state. The result is
``concatenate([h', c'], -1)`` of shape (..., 2H), with

    i, f, g, o = sigmoid(a_i), sigmoid(a_f), tanh(a_g), sigmoid(a_o)
    c' = f * c + i * g          h' = o * tanh(c')

Composed from primitives this is about fifteen tape nodes per time step (four slices, three
sigmoids, two tanh, five products and sums); as one node it is one, with one backward step.
The rules are written with wengert's functions (so that second derivatives work), each in the joint
form (``defvjp(joint=...)``, ``defjvp(joint=...)``): both arguments' shares, or the tangent from both,
from one computation. The sigmoid is ``(1 + tanh(x / 2)) / 2``, which never overflows. float32 stays
float32.
"""

import weakref

import numpy as np

from wengert.core.extend import defjvp, defvjp, facts
from wengert.core.primitive import Primitive
from wengert.rules import broadcasting, elementwise, shape

__all__ = ["lstm_cell", "lstm_sequence", "discard_kept"]


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


def _vjp(needed, cot, out, gates, c):
    """Both arguments' shares from one backward computation: the reverse rule, in the joint form."""
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
defvjp(lstm_cell, joint=_vjp)
defjvp(lstm_cell, joint=lambda tangents, out, gates, c: _tangent(tangents[0], tangents[1], gates, c))
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


# -- lstm_sequence: every time step of one layer as one node --------------------------------------

def _sequence_impl(proj, h0, c0, w_hh):
    """Every step of an LSTM layer: ``proj`` (L, ..., 4H) the inputs' projections with both biases,
    ``h0``, ``c0`` (..., H), ``w_hh`` (4H, H) in PyTorch's layout; returns (L, ..., 2H), each step's
    ``[h_t, c_t]``. The activations are kept beside the result for its backward pass."""
    if any(broadcasting.foreign(a) for a in (proj, h0, c0, w_hh)):
        return _sequence_generic(proj, h0, c0, w_hh)
    L = np.shape(proj)[0]
    H = np.shape(w_hh)[1]
    lead = np.broadcast_shapes(np.shape(proj)[1:-1], np.shape(h0)[:-1], np.shape(c0)[:-1])
    dtype = np.result_type(proj, h0, c0, w_hh)
    out = np.empty((L,) + lead + (2 * H,), dtype=dtype)
    acts = np.empty((L,) + lead + (5 * H,), dtype=dtype)  # i, f, g, o, tanh(c_t)
    w_t = w_hh.T
    h, c = np.broadcast_to(h0, lead + (H,)), np.broadcast_to(c0, lead + (H,))
    for t in range(L):
        a = acts[t]
        gates = proj[t] + h @ w_t
        a[..., :2 * H] = _sigmoid_impl(gates[..., :2 * H])
        a[..., 2 * H:3 * H] = np.tanh(gates[..., 2 * H:3 * H])
        a[..., 3 * H:4 * H] = _sigmoid_impl(gates[..., 3 * H:])
        c_prev = out[t - 1, ..., H:] if t else c
        c = out[t, ..., H:]
        np.multiply(a[..., H:2 * H], c_prev, out=c)
        c += a[..., :H] * a[..., 2 * H:3 * H]
        np.tanh(c, out=a[..., 4 * H:])
        h = out[t, ..., :H]
        np.multiply(a[..., 3 * H:4 * H], a[..., 4 * H:], out=h)
    _KEPT[id(out)] = (weakref.ref(out, _forget(id(out))), acts)
    return out


def _sequence_generic(proj, h0, c0, w_hh):
    """The steps with the arrays' own library (Dask, CuPy: NumPy's functions dispatch), nothing kept."""
    H = np.shape(w_hh)[1]
    h, c, steps = h0, c0, []
    for t in range(np.shape(proj)[0]):
        hc = _lstm_cell_impl(proj[t] + h @ w_hh.T, c)
        h, c = hc[..., :H], hc[..., H:]
        steps.append(hc)
    return np.stack(steps, axis=0)


_KEPT = {}  # id(result) -> (weak reference to it, its activations): read by the first-order VJP


def _forget(key):
    def forget(_):
        _KEPT.pop(key, None)
    return forget


def _kept_activations(out):
    """The activations kept for ``out`` by its forward pass, handed over once (a second backward
    pass through the same node recomputes them), or None."""
    entry = _KEPT.get(id(out))
    if type(out) is np.ndarray and entry is not None and entry[0]() is out:
        del _KEPT[id(out)]
        return entry[1]
    return None


def discard_kept(out):
    """Forget the activations kept for ``out`` (a result nothing will differentiate)."""
    _KEPT.pop(id(out), None)


def _sequence_backward(needed, cot, out, proj, h0, c0, w_hh):
    """Every argument's cotangent, by backpropagation through time written with wengert's functions
    (so that it is differentiable again); on plain arrays the forward pass's kept activations are
    used, and the weight's cotangent is one product over all steps."""
    L = broadcasting.shape_of(proj)[0]
    H = broadcasting.shape_of(w_hh)[1]
    lead = tuple(broadcasting.shape_of(out))[1:-1]
    acts = _kept_activations(out)
    if acts is not None and all(type(a) is np.ndarray for a in (cot, h0, c0, w_hh)):
        return _plain_backward(needed, cot, out, acts, h0, c0, w_hh)
    h0 = broadcasting.broadcast_to(h0, lead + (H,))
    c0 = broadcasting.broadcast_to(c0, lead + (H,))
    w_t = shape.transpose(w_hh, (1, 0))
    dh = dc = 0.0
    d_gates = [None] * L
    for t in reversed(range(L)):
        h_prev = out[t - 1, ..., :H] if t else h0
        c_prev = out[t - 1, ..., H:] if t else c0
        if acts is not None:
            a = acts[t]
            i, f, g, o, tanh_c = (a[..., :H], a[..., H:2 * H], a[..., 2 * H:3 * H], a[..., 3 * H:4 * H],
                                  a[..., 4 * H:])
        else:
            i, f, g, o, _ = _activations(proj[t] + h_prev @ w_t, c_prev)
            tanh_c = elementwise.tanh(out[t, ..., H:])
        dh = cot[t, ..., :H] + dh
        dc_total = cot[t, ..., H:] + dc + dh * o * (1.0 - tanh_c * tanh_c)
        d = shape.concatenate(dc_total * g * i * (1.0 - i), dc_total * c_prev * f * (1.0 - f),
                              dc_total * i * (1.0 - g * g), dh * tanh_c * o * (1.0 - o), axis=-1)
        d_gates[t] = d
        dc = dc_total * f
        dh = d @ w_hh
    result = [None, None, None, None]
    stacked = shape.stack(*d_gates, axis=0) if needed[0] or needed[3] else None
    if needed[0]:
        result[0] = stacked
    if needed[1]:
        result[1] = dh
    if needed[2]:
        result[2] = dc
    if needed[3]:
        h_prevs = shape.concatenate(broadcasting.reshape(h0, (1,) + lead + (H,)), out[:-1, ..., :H], axis=0)
        result[3] = (shape.transpose(broadcasting.reshape(stacked, (-1, 4 * H)), (1, 0))
                     @ broadcasting.reshape(h_prevs, (-1, H)))
    return result


def _plain_backward(needed, cot, out, acts, h0, c0, w_hh):
    """:func:`_sequence_backward` on plain NumPy arrays with the kept activations (a first-order
    pass): the same formulas, written into one preallocated array of every step's gate cotangents."""
    L, H = out.shape[0], w_hh.shape[1]
    lead = out.shape[1:-1]
    h0, c0 = np.broadcast_to(h0, lead + (H,)), np.broadcast_to(c0, lead + (H,))
    dtype = np.result_type(cot, out)
    d_all = np.empty(out.shape[:-1] + (4 * H,), dtype=dtype)
    dh = np.zeros(lead + (H,), dtype=dtype)
    dc = np.zeros(lead + (H,), dtype=dtype)
    for t in reversed(range(L)):
        a = acts[t]
        i, f, g, o = a[..., :H], a[..., H:2 * H], a[..., 2 * H:3 * H], a[..., 3 * H:4 * H]
        tanh_c = a[..., 4 * H:]
        c_prev = out[t - 1, ..., H:] if t else c0
        dh += cot[t, ..., :H]
        dc += cot[t, ..., H:]
        dc += dh * o * (1.0 - tanh_c * tanh_c)
        d = d_all[t]
        np.multiply(dc * g, i * (1.0 - i), out=d[..., :H])
        np.multiply(dc * c_prev, f * (1.0 - f), out=d[..., H:2 * H])
        np.multiply(dc * i, 1.0 - g * g, out=d[..., 2 * H:3 * H])
        np.multiply(dh * tanh_c, o * (1.0 - o), out=d[..., 3 * H:])
        dc *= f
        dh = d @ w_hh
    result = [d_all if needed[0] else None, dh if needed[1] else None, dc if needed[2] else None, None]
    if needed[3]:
        h_prevs = np.concatenate([h0[None], out[:-1, ..., :H]], axis=0)
        result[3] = d_all.reshape(-1, 4 * H).T @ h_prevs.reshape(-1, H)
    return result


def _sequence_tangent(tangents, out, proj, h0, c0, w_hh):
    """The result's tangent for the arguments' tangents (None where absent), step by step: the forward
    rule, in the joint form."""
    t_proj, t_h0, t_c0, t_w = tangents
    L = broadcasting.shape_of(proj)[0]
    H = broadcasting.shape_of(w_hh)[1]
    lead = tuple(broadcasting.shape_of(out))[1:-1]
    w_t = shape.transpose(w_hh, (1, 0))
    t_wt = None if t_w is None else shape.transpose(t_w, (1, 0))
    t_h, t_c = t_h0, t_c0
    h, c = broadcasting.broadcast_to(h0, lead + (H,)), broadcasting.broadcast_to(c0, lead + (H,))
    steps = []
    for t in range(L):
        t_gates = None if t_proj is None else t_proj[t]
        for extra in ((None if t_h is None else t_h @ w_t), (None if t_wt is None else h @ t_wt)):
            if extra is not None:
                t_gates = extra if t_gates is None else t_gates + extra
        if t_gates is None and t_c is None:
            step = elementwise.zeros_of(out[t])
        else:
            step = _tangent(t_gates, t_c, proj[t] + h @ w_t, c)
        steps.append(step)
        t_h, t_c = step[..., :H], step[..., H:]
        h, c = out[t, ..., :H], out[t, ..., H:]
    return shape.stack(*steps, axis=0)


lstm_sequence = Primitive(_sequence_impl, name="lstm_sequence", grad_post=broadcasting.unbroadcast)
defvjp(lstm_sequence, joint=_sequence_backward)
defjvp(lstm_sequence, joint=_sequence_tangent)
facts(lstm_sequence, fresh=True, saves=("out", 0, 1, 2, 3))


def _batch_sequence(prim, values, batched, kwargs):
    """Examples are one more axis after time (the weights shared), or, with batched weights, each
    example's steps as ``lstm_cell`` calls, which batch."""
    proj, h0, c0, w_hh = values
    if batched[3]:
        return NotImplemented
    size = broadcasting.shape_of(proj if batched[0] else (h0 if batched[1] else c0))[0]
    if batched[0]:
        ps = tuple(broadcasting.shape_of(proj))
        proj = shape.transpose(proj, (1, 0) + tuple(range(2, len(ps))))  # (L, examples, ..., 4H)
    else:
        ps = tuple(broadcasting.shape_of(proj))
        proj = broadcasting.broadcast_to(broadcasting.reshape(proj, ps[:1] + (1,) + ps[1:]),
                                         ps[:1] + (size,) + ps[1:])
    rank = len(broadcasting.shape_of(proj)) - 1  # the examples' axis and the others, less time
    fitted = []
    for v, b in ((h0, batched[1]), (c0, batched[2])):
        vs = tuple(broadcasting.shape_of(v))
        if not b:
            v = broadcasting.reshape(v, (1,) + vs)
            vs = (1,) + vs
        fitted.append(broadcasting.reshape(v, vs[:1] + (1,) * (rank - len(vs)) + vs[1:]))
    out = prim(proj, fitted[0], fitted[1], w_hh)
    n = len(broadcasting.shape_of(out))
    return shape.transpose(out, (1, 0) + tuple(range(2, n)))


lstm_sequence.batch = _batch_sequence
