"""Programs on which the compiled engine is checked against the tape
(``tests/program/test_program_engines.py``): scalar chains, the third seed's network, broadcasting,
reductions, indexing, matmuls, shapes."""

import math

import numpy as np

import wengert.numpy as wnp

rng = np.random.default_rng(7)


def R(*shape):
    return float(rng.standard_normal()) if not shape else rng.standard_normal(shape)


def P(*shape):
    """Positive values (for log, sqrt, division)."""
    return float(rng.uniform(0.5, 2.0)) if not shape else rng.uniform(0.5, 2.0, shape)


def seed2(x1, x2):
    return wnp.log(x1) + x1 * x2 - wnp.sin(x2)


def chain(x, y):
    z = x
    for _ in range(30):
        z = z * y + 0.5 * wnp.sin(z)
    return z


def tiny_network(W1, W2, x):
    h = W1 @ x
    pred = W2 @ h
    m = wnp.max(pred)
    return m + wnp.log(wnp.sum(wnp.exp(pred - m))) - pred[3, 0]


def mlp(W1, b1, W2, b2, X):
    h = wnp.maximum(X @ W1 + b1, 0.0)
    out = h @ W2 + b2
    m = wnp.max(out, axis=1, keepdims=True)
    lse = m + wnp.log(wnp.sum(wnp.exp(out - m), axis=1, keepdims=True))
    return wnp.mean(lse[:, 0] - out[np.arange(4), np.array([0, 2, 1, 2])])


def big_and_small(data, W_big, W_small):
    result = wnp.tanh(data @ W_big) @ W_big.T  # BigNet: the loss does not need it
    loss = wnp.sum(wnp.tanh(data @ W_small) ** 2)  # SmallNet
    return loss + 0.0 * wnp.sum(result[:0])


SUITE = [
    ("seed2", seed2, (2.0, 5.0)),
    ("chain", chain, (0.3, 0.9)),
    ("poly", lambda x: 3.0 * x ** 3 - 2.0 * x + 1.0 / x, (1.3,)),
    ("exp_tanh", lambda x, y: wnp.exp(x) * wnp.tanh(y) / wnp.sqrt(x * x + 1.0), (0.3, -0.7)),
    ("trig", lambda x: wnp.sin(x) * wnp.cos(2.0 * x) + wnp.arctan(x) - wnp.tan(0.3 * x), (0.4,)),
    ("hyperbolic", lambda x: wnp.sum(wnp.sinh(x) + wnp.cosh(x) * wnp.arcsinh(x)), (R(4),)),
    ("logs", lambda x: wnp.sum(wnp.log1p(x) + wnp.log2(x) + wnp.log10(x) + wnp.expm1(-x)), (P(5),)),
    ("power_arrays", lambda x, y: wnp.sum(x ** y + wnp.square(x) + wnp.reciprocal(y)), (P(3), P(3))),
    ("tiny_network", tiny_network, (R(6, 6) / 3, R(5, 6) / 3, R(6, 1))),
    ("mlp", mlp, (R(3, 5) / 2, R(5) / 10, R(5, 3) / 2, R(3) / 10, R(4, 3))),
    ("broadcast_rows_cols", lambda a, b: wnp.sum(a * b + a / (1.0 + b * b)), (R(3, 1), R(1, 4))),
    ("broadcast_scalar_array", lambda s, x: wnp.sum(s * x - x / s + s), (1.7, R(2, 3))),
    ("broadcast_bias", lambda x, b: wnp.sum(wnp.tanh(x + b) ** 2), (R(4, 3), R(3))),
    ("sum_axis", lambda x: wnp.sum(wnp.sum(x, axis=0) ** 2) + wnp.sum(x, axis=(1, 2)).prod(), (R(2, 3, 2),)),
    ("mean_var_std", lambda x: wnp.std(x, axis=0).sum() + wnp.var(x) + wnp.mean(x * x), (R(4, 3),)),
    ("max_min_axis", lambda x: wnp.sum(wnp.max(x, axis=1) * wnp.min(x, axis=0).sum()), (R(3, 4),)),
    ("prod", lambda x: wnp.prod(x) + wnp.sum(wnp.prod(x, axis=1, keepdims=True) * x), (P(2, 3),)),
    ("logsumexp_keepdims", lambda x: wnp.sum(wnp.log(wnp.sum(wnp.exp(x), axis=-1, keepdims=True)) - x),
     (R(3, 4),)),
    ("index_int", lambda x: x[1] @ x[2] + x[0, 1] * x[2, 3], (R(3, 4),)),
    ("index_repeated", lambda x: wnp.sum(x[np.array([0, 0, 2]), 1] ** 2) + x[[1, 1], [2, 2]].sum(),
     (R(3, 4),)),
    ("index_slices", lambda x: wnp.sum(x[1:, ::2] * x[:-1, 1::2]) + x[..., -1].sum(), (R(3, 4),)),
    ("index_newaxis", lambda x: wnp.sum(x[:, None] * x[None, :]), (R(4),)),
    ("index_mask_const", lambda x: wnp.sum(x[np.array([True, False, True])] ** 3), (R(3, 2),)),
    ("matmul_shapes", lambda a, b, v: wnp.sum((a @ b) @ v) + v @ v, (R(2, 3), R(3, 4), R(4))),
    ("matmul_batched", lambda a, b: wnp.sum(wnp.tanh(a @ b)), (R(2, 3, 4), R(4, 2))),
    ("dot_outer_inner", lambda a, b: wnp.sum(wnp.outer(a, b)) + wnp.dot(a, a) + wnp.inner(b, b),
     (R(3), R(4))),
    ("tensordot_einsum", lambda a, b: wnp.sum(wnp.tensordot(a, b, 2))
     + wnp.einsum("ij,jk->", a[:, :2, 0], b[:2]),
     (R(2, 3, 4), R(3, 4))),
    ("reshape_transpose", lambda x: wnp.sum(wnp.transpose(wnp.reshape(x, (2, 6))) @ wnp.ones((2, 1))),
     (R(3, 4),)),
    ("swap_move_squeeze", lambda x: wnp.sum(wnp.squeeze(wnp.moveaxis(wnp.swapaxes(x, 0, 2), 0, 1)) ** 2),
     (R(2, 1, 3),)),
    ("concatenate_stack", lambda a, b: wnp.sum(wnp.concatenate([a, 2.0 * b], axis=0) ** 2)
     + wnp.sum(wnp.stack([a[0], b[0]]) * 3.0), (R(2, 3), R(1, 3))),
    ("tile_repeat", lambda x: wnp.sum(wnp.tile(x, (2, 1)) * wnp.repeat(x, 2, axis=0)[:2].sum()), (R(2, 3),)),
    ("where_relu", lambda x: wnp.sum(wnp.where(x > 0, x ** 2, -x) + wnp.maximum(x, 0.0)), (R(6),)),
    ("abs_clip_sign", lambda x: wnp.sum(wnp.abs(x) * 2.0 + wnp.clip(x, -0.5, 0.5) + wnp.sign(x)), (R(5),)),
    ("minimum_hypot_arctan2", lambda a, b: wnp.sum(wnp.minimum(a, b) + wnp.hypot(a, b) + wnp.arctan2(a, b)),
     (P(4), P(4) + 3.0)),
    ("max_with_ties", lambda x: wnp.log(wnp.sum(wnp.exp(x - wnp.max(x)))) + 2.0 * wnp.max(x),
     (np.array([[1.0, 3.0], [3.0, 0.0]]),)),
    ("logsumexp_ties", lambda x: (lambda m: m + wnp.log(wnp.sum(wnp.exp(x - m))))(wnp.max(x)) * x[0, 0],
     (np.array([[1.0, 3.0], [3.0, 0.0]]),)),
    ("softmax_cross_entropy", lambda z: -wnp.log(wnp.exp(z[2]) / wnp.sum(wnp.exp(z))), (R(5),)),
    ("float32", lambda W, x: wnp.sum(wnp.tanh(W @ x)), (R(3, 4).astype(np.float32), R(4).astype(np.float32))),
    ("big_and_small", big_and_small, (R(4, 3), R(3, 3), R(3, 2))),
    ("shape_control_flow", lambda x: wnp.sum(x ** 2) if x.shape[0] > 2 else wnp.sum(x), (R(4),)),
    ("const_math", lambda x: math.pi * wnp.sum(x) + wnp.exp(1.0) * wnp.sum(x ** 2), (R(3),)),
]
