"""``MultiheadAttention`` (torch.nn.MultiheadAttention's arguments, defaults, masks, parameter names
and layouts: ``in_proj_weight`` (3E, E), ``in_proj_bias`` (3E,), ``out_proj.weight`` (E, E) in
PyTorch's (out, in) layout, ``out_proj.bias``), so PyTorch's ``state_dict`` loads unchanged.

Masks follow ``torch.nn.MultiheadAttention`` (the opposite of ``scaled_dot_product_attention``'s
boolean masks): a boolean ``attn_mask`` or ``key_padding_mask`` is True where attention is *not*
allowed; a float mask is added to the scores.
"""

import math

import numpy as np

import wengert.numpy as wnp
from wengert.core.trace import BOX_TYPES, unbox_all
from wengert.nn import functional as F
from wengert.nn import init
from wengert.nn.layers import Dropout
from wengert.nn.module import Module, Parameter

__all__ = ["MultiheadAttention"]


def _shape(x):
    return tuple(x.shape) if type(x) in BOX_TYPES else tuple(np.shape(x))


class _OutProjection(Module):
    """``x @ weight.T + bias`` with the weight in PyTorch's (out, in) layout (MultiheadAttention's
    ``out_proj``, torch's NonDynamicallyQuantizableLinear)."""

    def __init__(self, embed_dim, bias, rng, dtype):
        super().__init__()
        bound = 1.0 / math.sqrt(embed_dim)
        self.weight = Parameter(init.uniform((embed_dim, embed_dim), -bound, bound, rng, dtype))
        self.bias = Parameter(np.zeros(embed_dim, dtype)) if bias else None

    def forward(self, x):
        y = x @ wnp.transpose(self.weight)
        return y if self.bias is None else y + self.bias


class MultiheadAttention(Module):
    """Multi-head attention (torch.nn.MultiheadAttention): ``out, weights = mha(query, key, value)``,
    with inputs (L, N, E) ((N, L, E) with ``batch_first``; (L, E) unbatched); ``weights`` the
    attention weights averaged over heads (N, L, S) (per head with ``average_attn_weights=False``),
    or None with ``need_weights=False``. Key and value may have other sizes (``kdim``, ``vdim``):
    the three projections are then ``q_proj_weight`` (E, E), ``k_proj_weight`` (E, kdim) and
    ``v_proj_weight`` (E, vdim), as PyTorch, in place of ``in_proj_weight``."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, rng=None, dtype=np.float32):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim={embed_dim} must be divisible by "
                             f"num_heads={num_heads}")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv=True and add_zero_attn=True are not "
                                      "implemented; append the extra key/value row to key and value yourself")
        rng = init.as_rng(rng)
        self.embed_dim, self.num_heads, self.batch_first = int(embed_dim), int(num_heads), bool(batch_first)
        self.kdim = self.embed_dim if kdim is None else int(kdim)
        self.vdim = self.embed_dim if vdim is None else int(vdim)
        self.head_dim = self.embed_dim // self.num_heads
        E = self.embed_dim
        if self.kdim == E and self.vdim == E:
            bound = math.sqrt(6.0 / (E + 3 * E))  # xavier_uniform on (3E, E), as PyTorch
            self.in_proj_weight = Parameter(init.uniform((3 * E, E), -bound, bound, rng, dtype))
        else:  # PyTorch's separate projections, each xavier_uniform
            for name, n_in in (("q", E), ("k", self.kdim), ("v", self.vdim)):
                bound = math.sqrt(6.0 / (E + n_in))
                weight = Parameter(init.uniform((E, n_in), -bound, bound, rng, dtype))
                setattr(self, f"{name}_proj_weight", weight)
        self.in_proj_bias = Parameter(np.zeros(3 * embed_dim, dtype)) if bias else None
        self.out_proj = _OutProjection(self.embed_dim, bias, rng, dtype)
        self.dropout = float(dropout)
        self.drop = Dropout(self.dropout, rng=rng) if self.dropout else None

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        E, heads, hd = self.embed_dim, self.num_heads, self.head_dim
        shapes = [_shape(a) for a in (query, key, value)]
        ndim = len(shapes[0])
        sizes = (E, self.kdim, self.vdim)
        if ndim not in (2, 3) or any(len(s) != ndim or s[-1] != n for s, n in zip(shapes, sizes)) \
                or shapes[1][:-1] != shapes[2][:-1]:
            lead = "N, L" if self.batch_first else "L, N"
            raise ValueError(f"MultiheadAttention(embed_dim={E}): query, key and value must be ({lead}, "
                             f"{E}), ({lead}, {self.kdim}), ({lead}, {self.vdim}) (or without N unbatched), "
                             f"key and value of one length; got {shapes[0]}, {shapes[1]}, {shapes[2]}")
        unbatched = ndim == 2
        q, k, v = [self._batch_major(a, unbatched) for a in (query, key, value)]  # (N, L, E)
        N, L, S = _shape(q)[0], _shape(q)[1], _shape(k)[1]
        b = self.in_proj_bias
        parts = []
        for i, x in enumerate((q, k, v)):
            y = x @ wnp.transpose(self._projection(i))
            if b is not None:
                y = y + b[i * E:(i + 1) * E]
            parts.append(wnp.transpose(wnp.reshape(y, (N, -1, heads, hd)), (0, 2, 1, 3)))  # (N, h, L, hd)
        qh, kh, vh = parts
        scores = (qh @ wnp.swapaxes(kh, -1, -2)) * (1.0 / math.sqrt(hd))  # (N, h, L, S)
        scores = self._masked(scores, attn_mask, key_padding_mask, is_causal, N, L, S, unbatched)
        weights = F.softmax(scores, axis=-1)
        if self.drop is not None and self.training:
            weights = self.drop(weights)
        out = wnp.reshape(wnp.transpose(weights @ vh, (0, 2, 1, 3)), (N, L, E))
        out = self.out_proj(out)
        out = wnp.squeeze(out, 0) if unbatched else (out if self.batch_first else wnp.swapaxes(out, 0, 1))
        if not need_weights:
            return out, None
        w_out = wnp.mean(weights, axis=1) if average_attn_weights else weights
        return out, (wnp.squeeze(w_out, 0) if unbatched else w_out)

    def _projection(self, i):
        """The weight (E, in) of query (0), key (1) or value (2)."""
        w = vars(self).get("in_proj_weight")
        if w is not None:
            return w[i * self.embed_dim:(i + 1) * self.embed_dim]
        return getattr(self, ("q_proj_weight", "k_proj_weight", "v_proj_weight")[i])

    def _batch_major(self, x, unbatched):
        if unbatched:
            return wnp.expand_dims(x, 0)
        return x if self.batch_first else wnp.swapaxes(x, 0, 1)

    def _masked(self, scores, attn_mask, key_padding_mask, is_causal, N, L, S, unbatched):
        name = "MultiheadAttention"
        if is_causal and attn_mask is None:
            attn_mask = ~np.tril(np.ones((L, S), dtype=bool))
        if attn_mask is not None:
            mask = unbox_all(attn_mask)
            ms = _shape(mask)
            if ms == (L, S):
                pass
            elif ms == (N * self.num_heads, L, S):
                mask = wnp.reshape(attn_mask, (N, self.num_heads, L, S)) if type(mask) in BOX_TYPES \
                    else np.reshape(mask, (N, self.num_heads, L, S))
            else:
                raise ValueError(f"{name}: attn_mask must have shape ({L}, {S}) or ({N * self.num_heads}, "
                                 f"{L}, {S}), got {ms}")
            scores = self._apply(scores, mask, attn_mask if type(mask) in BOX_TYPES else None)
        if key_padding_mask is not None:
            mask = unbox_all(key_padding_mask)
            want = (S,) if unbatched else (N, S)
            if _shape(mask) != want:
                raise ValueError(f"{name}: key_padding_mask must have shape {want}, got {_shape(mask)}")
            mask = np.reshape(mask, (N, 1, 1, S)) if type(mask) is np.ndarray else \
                wnp.reshape(key_padding_mask, (N, 1, 1, S))
            scores = self._apply(scores, mask, None)
        return scores

    @staticmethod
    def _apply(scores, mask, traced):
        if type(mask) is np.ndarray and mask.dtype == bool:
            return wnp.where(mask, -np.inf, scores)
        return scores + (mask if traced is None else traced)

    def extra_repr(self):
        same = self.kdim == self.vdim == self.embed_dim
        dims = "" if same else f", kdim={self.kdim}, vdim={self.vdim}"
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}{dims}, batch_first={self.batch_first}"
