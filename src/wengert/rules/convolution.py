"""Convolution and max-pooling primitives in PyTorch's channels-first layout (N, C, *spatial).

- ``conv(x, w, stride, padding, dilation, groups)``: cross-correlation (what deep learning calls a
  convolution), ``x`` of shape (N, C, *S), ``w`` of shape (O, C / groups, *K), 1-D or 2-D (the rank
  of ``w`` decides). ``padding`` is one (low, high) pair per spatial axis; a negative entry crops.
- ``conv_transpose(y, w, stride, padding, dilation, groups)``: the adjoint of ``conv`` in its first
  argument, ``w`` of shape (C_in, C_out / groups, *K) as ``torch.nn.ConvTranspose2d``; each spatial
  axis of the result has length (S - 1) * stride + (K - 1) * dilation + 1 - low - high (a negative
  ``high`` appends zeros: PyTorch's ``output_padding``).
- ``max_pool(x, kernel, stride, padding, dilation)``, padded with -inf; its derivatives route values
  through the index of each window's first maximum (``pool_index``, no derivative) with the linear
  pair ``window_gather`` / ``window_scatter``, each the other's adjoint. Windows that tile the grid
  (stride == kernel, no dilation) are read as one contiguous copy; where windows are disjoint the
  VJP's scatter writes its values (``unique=True``) instead of summing them (``np.bincount``).

Both convolutions are bilinear and every rule is a convolution again, so derivatives of any order
work: conv's input VJP is a ``conv_transpose``, its weight VJP a ``conv`` of the input by the
cotangent (batch and channel axes exchanged, stride and dilation exchanged), conv_transpose's input
VJP a ``conv``. Implementations gather windows with strided views (no copy) and contract them with
BLAS matmuls (im2col): at stride 1 each kernel offset's columns are one contiguous run of the flattened
grid (the positions wrapping around a row's end computed and dropped), a kernel larger than its output
(the weight gradient's) copies whole windows, and both make and multiply their columns in blocks of
examples that fit in cache; ``conv_transpose`` makes each kernel offset's columns by one matmul and
scatters them with one strided add, never a loop over pixels. Under ``wg.vmap`` the batch axis folds
into N, or into the groups when the weights are batched (per-example gradients), so a batch is one
call. Average pooling and adaptive average pooling are composed from these (``wengert.nn.functional``).
"""

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from wengert.core.extend import defjvp, defvjp, facts, nondiff_primitive
from wengert.core.primitive import Primitive
from wengert.rules import broadcasting, indexing, shape

__all__ = ["conv", "conv_transpose", "max_pool", "pool_index", "window_gather", "window_scatter",
           "conv_output_size"]

_shape = broadcasting.shape_of


def conv_output_size(size, kernel, stride, pad, dilation):
    """Length of a convolution's (or pooling's) output along one axis: PyTorch's formula."""
    return (size + pad[0] + pad[1] - dilation * (kernel - 1) - 1) // stride + 1


def _padded(x, padding, fill=0.0):
    """``x`` with each spatial axis padded by (low, high) ``fill`` values; negative amounts crop."""
    if all(lo == 0 and hi == 0 for lo, hi in padding):
        return x
    crop = (slice(None), slice(None)) + tuple(slice(max(-lo, 0), s - max(-hi, 0))
                                              for (lo, hi), s in zip(padding, x.shape[2:]))
    x = x[crop]
    grow = [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    return np.pad(x, grow, constant_values=fill) if any(a or b for a, b in grow) else x


def _windows(xp, kernel, stride, dilation):
    """The view (N, C, *out, *kernel) of every window of the padded ``xp``."""
    d = len(kernel)
    extent = [(k - 1) * dl + 1 for k, dl in zip(kernel, dilation)]
    view = sliding_window_view(xp, extent, axis=tuple(range(2, 2 + d)))
    return view[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)
                + tuple(slice(None, None, dl) for dl in dilation)]


def _check_fits(fname, x_shape, padding, kernel, dilation):
    for s, pad, k, dl in zip(x_shape[2:], padding, kernel, dilation):
        if s + pad[0] + pad[1] < (k - 1) * dl + 1:
            raise ValueError(f"{fname}: input of shape {tuple(x_shape)} with padding {tuple(padding)} is "
                             f"smaller than the kernel {tuple(kernel)} (dilation {tuple(dilation)}); "
                             f"pad it or use a smaller kernel")


# -- conv -----------------------------------------------------------------------------------------

def _conv_impl(x, w, stride=(1,), padding=((0, 0),), dilation=(1,), groups=1):
    """N-d cross-correlation, channels first (torch.nn.functional.conv1d / conv2d)."""
    d = np.ndim(w) - 2
    if np.ndim(x) != d + 2:
        raise ValueError(f"conv: a {d}-d convolution needs an input of shape (N, C, {d} spatial axes), got "
                         f"{np.shape(x)} for weight of shape {np.shape(w)}")
    (n, c), (o, cg), kernel = x.shape[:2], w.shape[:2], w.shape[2:]
    if c != cg * groups or o % groups:
        raise ValueError(f"conv: input of shape {x.shape} has {c} channels; weight of shape {w.shape} with "
                         f"groups={groups} expects {cg * groups} (and out channels divisible by groups)")
    _check_fits("conv", x.shape, padding, kernel, dilation)
    dtype = np.result_type(x, w)
    xp = _padded(x, padding)
    out_sp = tuple(conv_output_size(s, k, st, (0, 0), dl)
                   for s, k, st, dl in zip(xp.shape[2:], kernel, stride, dilation))
    p, kk = math.prod(out_sp), math.prod(kernel)
    wm = w.reshape(groups, o // groups, cg * kk).astype(dtype, copy=False)
    if kk > p:  # a kernel larger than the output (the weight gradient's): one copy of every window,
        # laid out (N, g, P, C/g * K): each copy reads whole kernel rows; the matmul reads it transposed
        win = _windows(xp, kernel, stride, dilation).reshape((n, groups, cg) + out_sp + tuple(kernel))
        win = win.transpose((0, 1) + tuple(range(3, 3 + d)) + (2,) + tuple(range(3 + d, 3 + 2 * d)))
        return _conv_large_kernel(win, wm, dtype).reshape((n, o) + out_sp)
    if all(st == 1 for st in stride):
        out = _conv_rows(xp, wm, kernel, dilation, out_sp, dtype)
        if out is not None:
            return out
    cols = np.empty((n, c) + tuple(kernel) + out_sp, dtype=dtype)     # im2col
    for offset, view in zip(np.ndindex(*kernel), _offset_views(xp, kernel, stride, dilation, out_sp)):
        cols[(slice(None), slice(None)) + offset] = view                # one block copy per kernel offset
    cols = cols.reshape(n, groups, cg * kk, p)
    return np.matmul(wm, cols).reshape((n, o) + out_sp)          # (N, g, O/g, P): already (N, O, *out)


def _conv_large_kernel(win, wm, dtype):
    """(N, g, O/g, P) from the windows ``win`` (N, g, *out, C/g, *K) and the weights ``wm`` (g, O/g, C/g * K):
    the windows copied a block at a time (of examples, or of groups when one example is over
    ``_CACHE_BLOCK`` bytes) and multiplied, transposed, while in cache."""
    n, groups = win.shape[:2]
    og, width = wm.shape[1:]
    p = math.prod(win.shape[2:]) // width
    one_group = p * width * np.dtype(dtype).itemsize
    nb = max(1, _CACHE_BLOCK // (groups * one_group))
    gb = groups if nb > 1 else max(1, min(groups, _CACHE_BLOCK // one_group))
    out = np.empty((n, groups, og, p), dtype=dtype)
    cols = np.empty((min(nb, n), gb) + win.shape[2:], dtype=dtype)
    for i in range(0, n, nb):
        for g in range(0, groups, gb):
            block = cols[:min(nb, n - i), :min(gb, groups - g)]
            block[...] = win[i:i + nb, g:g + gb]
            cm = block.reshape(block.shape[:2] + (p, width)).swapaxes(-1, -2)
            np.matmul(wm[g:g + gb], cm, out=out[i:i + nb, g:g + gb])
    return out


_CACHE_BLOCK = 1 << 19  # bytes of im2col columns made and multiplied at a time (well inside L2)


def _conv_rows(xp, wm, kernel, dilation, out_sp, dtype):
    """A stride-1 convolution whose im2col copies whole rows: each kernel offset's window is one
    contiguous run of the flattened spatial grid, from the offset to the last output position, so the
    matmul also computes the positions that wrap around a row's end (dropped after it). Returns None
    where that wastes more than it saves (the wrap longer than the output) or the grid is not contiguous.
    The batch goes in blocks of ``_CACHE_BLOCK`` bytes of columns."""
    n, c, *size = xp.shape
    item = xp.strides[-1]
    place = [math.prod(size[a + 1:]) for a in range(len(size))]    # row-major place values
    if any(xp.strides[2 + a] != place[a] * item for a in range(len(size))):
        return None
    run = sum((o - 1) * pv for o, pv in zip(out_sp, place)) + 1      # first to last output position
    p = math.prod(out_sp)
    if run > 2 * p:
        return None
    groups, og = wm.shape[:2]
    offsets = xp.strides[:2] + tuple(dl * pv * item for dl, pv in zip(dilation, place)) + (item,)
    per_example = c * math.prod(kernel) * run
    step = max(1, _CACHE_BLOCK // (per_example * np.dtype(dtype).itemsize))   # examples per block
    wide = np.empty((n, groups, og, run), dtype=dtype)
    cols = np.empty((min(step, n), c) + tuple(kernel) + (run,), dtype=dtype)
    view = as_strided(xp, (n, c) + tuple(kernel) + (run,), offsets, writeable=False)
    for start in range(0, n, step):  # a block's columns are still in cache when its matmul reads them
        m = min(step, n - start)
        cols[:m] = view[start:start + m]
        np.matmul(wm, cols[:m].reshape(m, groups, -1, run), out=wide[start:start + m])
    e = wide.strides[-1]
    out = as_strided(wide, (n, groups * og) + tuple(out_sp),  # distinct elements of our own buffer
                     (wide.strides[0], wide.strides[2]) + tuple(pv * e for pv in place))
    return np.ascontiguousarray(out)  # ``wide`` itself, viewed, where nothing wraps: fresh and writeable


def _conv_transpose_impl(y, w, stride=(1,), padding=((0, 0),), dilation=(1,), groups=1):
    """N-d transposed convolution, channels first (torch.nn.functional.conv_transpose2d)."""
    d = np.ndim(w) - 2
    if np.ndim(y) != d + 2:
        raise ValueError(f"conv_transpose: a {d}-d transposed convolution needs an input of shape (N, C, "
                         f"{d} spatial axes), got {np.shape(y)} for weight of shape {np.shape(w)}")
    (n, c), (ci, cog), kernel = y.shape[:2], w.shape[:2], w.shape[2:]
    if c != ci or c % groups:
        raise ValueError(f"conv_transpose: input of shape {y.shape} has {c} channels; weight of shape "
                         f"{w.shape} expects {ci} (divisible by groups={groups})")
    dtype = np.result_type(y, w)
    sp = y.shape[2:]
    p, kk, cig = math.prod(sp), math.prod(kernel), c // groups
    # col2im with the batch axis last: each kernel offset adds rows of (width * N) contiguous values;
    # each offset's columns come from their own matmul into one buffer, still in cache for the add
    wm = np.ascontiguousarray(w.reshape(groups, cig, cog, kk).transpose(3, 0, 2, 1), dtype=dtype)  # K,g,O,I
    ym = np.moveaxis(y, 0, -1).reshape(groups, cig, p * n).astype(dtype, copy=False)   # (g, C_in / g, P * N)
    full = [(s - 1) * st + (k - 1) * dl + 1 for s, st, k, dl in zip(sp, stride, kernel, dilation)]
    size = tuple(f + max(-hi, 0) for f, (lo, hi) in zip(full, padding))
    out = np.zeros((groups, cog) + size + (n,), dtype=dtype)
    cols = np.empty((groups, cog, p * n), dtype=dtype)
    shaped = cols.reshape((groups, cog) + sp + (n,))
    for j, offset in enumerate(np.ndindex(*kernel)):   # one matmul and one strided add per kernel offset
        where = tuple(slice(k * dl, k * dl + (s - 1) * st + 1, st)
                      for k, dl, s, st in zip(offset, dilation, sp, stride))
        np.matmul(wm[j], ym, out=cols)
        out[(slice(None), slice(None)) + where] += shaped
    crop = tuple(slice(lo, f - hi) for f, (lo, hi) in zip(full, padding))
    out = out.reshape((groups * cog,) + size + (n,))[(slice(None),) + crop]
    return np.ascontiguousarray(np.moveaxis(out, -1, 0))


def _conv_input_padding(x_shape, out_shape, kernel, stride, padding, dilation):
    """The padding pairs under which conv_transpose maps conv's output shape back to ``x_shape``."""
    pairs = []
    for s, o, k, st, (lo, _), dl in zip(x_shape[2:], out_shape[2:], kernel, stride, padding, dilation):
        full = (o - 1) * st + (k - 1) * dl + 1
        pairs.append((lo, full - lo - s))
    return tuple(pairs)


def _swap_batch_and_channels(a, groups):
    """(N, g * C, *S) -> (C, g * N, *S): each group's channels become a batch, N its channels."""
    s = tuple(_shape(a))
    d = len(s) - 2
    a = broadcasting.reshape(a, (s[0], groups, s[1] // groups) + s[2:])
    a = shape.transpose(a, (2, 1, 0) + tuple(range(3, 3 + d)))
    return broadcasting.reshape(a, (s[1] // groups, groups * s[0]) + s[2:])


def _weight_cotangent(x, g, w_shape, stride, padding, dilation, groups):
    """d<g, conv(x, w)>/dw: a conv of the input by the cotangent, batch and channel axes exchanged
    and stride and dilation exchanged, cropped to the kernel."""
    d = len(w_shape) - 2
    o = w_shape[0]
    xs = _swap_batch_and_channels(x, groups)                    # (C/g, g*N, *S)
    gs = tuple(_shape(g))
    gt = broadcasting.reshape(g, (gs[0], groups, o // groups) + gs[2:])
    gt = shape.transpose(gt, (1, 2, 0) + tuple(range(3, 3 + d)))
    gt = broadcasting.reshape(gt, (o, gs[0]) + gs[2:])          # (O, N, *o): O kernels over N channels
    r = conv(xs, gt, stride=tuple(dilation), padding=tuple(padding), dilation=tuple(stride), groups=groups)
    if tuple(_shape(r)[2:]) != tuple(w_shape[2:]):
        r = indexing.getitem(r, (slice(None), slice(None)) + tuple(slice(0, k) for k in w_shape[2:]))
    return shape.transpose(r, (1, 0) + tuple(range(2, 2 + d)))  # (O, C/g, *K)


def _conv_vjp_x(g, out, x, w, stride=(1,), padding=((0, 0),), dilation=(1,), groups=1):
    w_shape = tuple(_shape(w))
    pads = _conv_input_padding(_shape(x), _shape(g), w_shape[2:], stride, padding, dilation)
    return conv_transpose(g, w, stride=stride, padding=pads, dilation=dilation, groups=groups)


def _conv_vjp_w(g, out, x, w, stride=(1,), padding=((0, 0),), dilation=(1,), groups=1):
    return _weight_cotangent(x, g, tuple(_shape(w)), stride, padding, dilation, groups)


def _conv_transpose_vjp_y(g, out, y, w, stride=(1,), padding=((0, 0),), dilation=(1,), groups=1):
    return conv(g, w, stride=stride, padding=padding, dilation=dilation, groups=groups)


def _conv_transpose_vjp_w(g, out, y, w, stride=(1,), padding=((0, 0),), dilation=(1,), groups=1):
    # conv_transpose(y, w) is conv's input adjoint: <conv_transpose(y, w), g> = <y, conv(g, w)>
    return _weight_cotangent(g, y, tuple(_shape(w)), stride, padding, dilation, groups)


conv = Primitive(_conv_impl, name="conv")
defvjp(conv, _conv_vjp_x, _conv_vjp_w)
defjvp(conv,
       lambda t, out, x, w, **p: conv(t, w, **p),
       lambda t, out, x, w, **p: conv(x, t, **p))
facts(conv, linear=(0, 1), fresh=True, saves={0: (1,), 1: (0,)})

conv_transpose = Primitive(_conv_transpose_impl, name="conv_transpose")
defvjp(conv_transpose, _conv_transpose_vjp_y, _conv_transpose_vjp_w)
defjvp(conv_transpose,
       lambda t, out, y, w, **p: conv_transpose(t, w, **p),
       lambda t, out, y, w, **p: conv_transpose(y, t, **p))
facts(conv_transpose, linear=(0, 1), fresh=True, saves={0: (1,), 1: (0,)})


# -- max pooling ------------------------------------------------------------------------------------

def _offset_views(xp, kernel, stride, dilation, out_sp):
    """For each kernel offset (row-major), the strided view of ``xp`` that the windows read there."""
    for offset in np.ndindex(*kernel):
        where = tuple(slice(k * dl, k * dl + (o - 1) * st + 1, st)
                      for k, dl, o, st in zip(offset, dilation, out_sp, stride))
        yield xp[(slice(None), slice(None)) + where]


def _pool_out_shape(x, kernel, stride, padding, dilation):
    return tuple(conv_output_size(s, k, st, pad, dl)
                 for s, k, st, pad, dl in zip(x.shape[2:], kernel, stride, padding, dilation))


def _pool_index_impl(x, kernel, stride, padding, dilation):
    """For each window, the flat index (into the padded spatial grid) of its first maximum."""
    d = len(kernel)
    _check_fits("max_pool", x.shape, padding, kernel, dilation)
    xp = _padded(x, padding, fill=-np.inf)
    out_sp = _pool_out_shape(x, kernel, stride, padding, dilation)
    place = [math.prod(xp.shape[3 + a:]) for a in range(d)]       # row-major place values
    base = np.zeros((), dtype=np.intp)
    for a in range(d):
        base = base + (np.arange(out_sp[a]) * (stride[a] * place[a])).reshape((-1,) + (1,) * (d - 1 - a))
    offsets = [sum(k * dl * pv for k, dl, pv in zip(offset, dilation, place))
               for offset in np.ndindex(*kernel)]
    if tuple(stride) == tuple(kernel) and all(dl == 1 for dl in dilation):
        views = iter(_tiles(xp, kernel, out_sp))
    else:
        views = _offset_views(xp, kernel, stride, dilation, out_sp)
    best = next(views).copy()
    first = np.full(best.shape, offsets[0], dtype=np.int32)
    for off, view in zip(offsets[1:], views):  # a strictly greater value moves the index: the first maximum
        bigger = view > best
        first += bigger * (np.int32(off) - first)  # arithmetic, not a masked write: no branches per element
        np.maximum(best, view, out=best)
    return first + base


def _tiles(xp, kernel, out_sp):
    """Windows that tile the grid (stride == kernel, no dilation) as one contiguous copy (K, N, C, *out),
    kernel offsets row-major: the copy reads ``xp`` in order, and each offset's values are contiguous."""
    d = len(kernel)
    crop = xp[(slice(None), slice(None)) + tuple(slice(0, o * k) for o, k in zip(out_sp, kernel))]
    split = crop.reshape(xp.shape[:2] + tuple(x for o, k in zip(out_sp, kernel) for x in (o, k)))
    order = tuple(3 + 2 * a for a in range(d)) + (0, 1) + tuple(2 + 2 * a for a in range(d))
    return np.ascontiguousarray(split.transpose(order)).reshape((-1,) + xp.shape[:2] + tuple(out_sp))


pool_index = nondiff_primitive(_pool_index_impl, "pool_index")


def _window_gather_impl(h, index, padding):
    """``h`` (padded with zeros) at the flat spatial positions ``index`` (shape (N, C, *out))."""
    hp = _padded(h, padding)
    n, c = hp.shape[:2]
    flat = hp.reshape(n, c, -1)
    return np.take_along_axis(flat, index.reshape(n, c, -1), axis=-1).reshape(index.shape)


def _window_scatter_impl(g, index, padding, size, unique=False):
    """An array of spatial shape ``size`` holding ``g``'s values added at ``index`` (the adjoint of
    ``window_gather``). ``unique``: ``index`` names no position twice in one (n, c) plane (disjoint
    windows), so the values are written in place, with no sums."""
    n, c = g.shape[:2]
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(size, padding))
    cells = math.prod(padded)
    where = (index.reshape(n * c, -1) + (np.arange(n * c) * cells)[:, None]).ravel()
    if unique:
        out = np.zeros((n, c) + padded, dtype=g.dtype)
        out.reshape(-1)[where] = g.reshape(-1)
    else:
        total = np.bincount(where, weights=g.reshape(-1), minlength=n * c * cells)
        out = total.astype(g.dtype, copy=False).reshape((n, c) + padded)
    crop = tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, padding))
    return out[(slice(None), slice(None)) + crop]


window_gather = Primitive(_window_gather_impl, name="window_gather")
window_scatter = Primitive(_window_scatter_impl, name="window_scatter")
defvjp(window_gather,
       lambda g, out, h, index, padding: window_scatter(g, index, padding, _shape(h)[2:]), None)
defjvp(window_gather, lambda t, out, h, index, padding: window_gather(t, index, padding), None)
defvjp(window_scatter, lambda g, out, gg, index, padding, size, **p: window_gather(g, index, padding), None)
defjvp(window_scatter,
       lambda t, out, gg, index, padding, size, **p: window_scatter(t, index, padding, size, **p), None)
facts(window_gather, linear=(0,), fresh=True, saves={0: (1,)})
facts(window_scatter, linear=(0,), fresh=True, saves={0: (1,)})


def _max_pool_impl(x, kernel, stride, padding, dilation):
    """Maximum over each window, padded with -inf (torch.nn.functional.max_pool1d / max_pool2d)."""
    d = len(kernel)
    if np.ndim(x) != d + 2:
        raise ValueError(f"max_pool: a {d}-d pooling needs an input of shape (N, C, {d} spatial axes), "
                         f"got {np.shape(x)}")
    _check_fits("max_pool", x.shape, padding, kernel, dilation)
    xp = _padded(x, padding, fill=-np.inf)
    views = _offset_views(xp, kernel, stride, dilation, _pool_out_shape(x, kernel, stride, padding, dilation))
    out = next(views).copy()
    for view in views:  # one vectorised maximum per kernel offset
        np.maximum(out, view, out=out)
    return out


def _max_pool_vjp(g, out, x, kernel, stride, padding, dilation):
    index = pool_index(x, kernel, stride, padding, dilation)
    disjoint = all((k - 1) * dl + 1 <= st for k, st, dl in zip(kernel, stride, dilation))
    return window_scatter(g, index, padding, tuple(_shape(x)[2:]), unique=disjoint)


def _max_pool_jvp(t, out, x, kernel, stride, padding, dilation):
    return window_gather(t, pool_index(x, kernel, stride, padding, dilation), padding)


max_pool = Primitive(_max_pool_impl, name="max_pool")
defvjp(max_pool, _max_pool_vjp)
defjvp(max_pool, _max_pool_jvp)
facts(max_pool, fresh=True, saves=(0,))


# -- batching rules (wengert.engines.batching) ------------------------------------------------------

def _fold(a):
    """(B, N, ...) -> (B * N, ...)."""
    s = tuple(_shape(a))
    return broadcasting.reshape(a, (s[0] * s[1],) + s[2:])


def _unfold(a, b):
    s = tuple(_shape(a))
    return broadcasting.reshape(a, (b, s[0] // b) + s[1:])


def _batch_size(values, batched):
    return next(_shape(v)[0] for v, bt in zip(values, batched) if bt)


def _batch_pointwise_in_n(prim, values, batched, kwargs):
    """A primitive acting on each (n, c) independently along its array arguments (pooling, gather,
    scatter, index): the batch axis folds into N, the unbatched arrays broadcast over it."""
    b = _batch_size(values, batched)
    folded = []
    for i, (v, bt) in enumerate(zip(values, batched)):
        if i >= _ARRAY_ARGS[prim]:
            if bt:
                return NotImplemented
        elif _is_index(v):  # pool_index's result: integers, never traced
            v = v if bt else np.broadcast_to(v, (b,) + v.shape)
            v = v.reshape((-1,) + v.shape[2:])
        else:
            v = _fold(v if bt else broadcasting.broadcast_to(v, (b,) + tuple(_shape(v))))
        folded.append(v)
    return _unfold(prim(*folded, **kwargs), b)


def _is_index(v):
    return isinstance(v, np.ndarray) and v.dtype.kind in "iu"


def _batch_conv(prim, values, batched, kwargs):
    """conv / conv_transpose: the batch folds into N when only the input is batched; otherwise into
    the groups (batch b, group k becomes group b * groups + k), the input's batch into its channels."""
    x, w = values[:2]
    if len(values) > 2:
        return NotImplemented
    b = _batch_size(values, batched)
    if batched[0] and not batched[1]:
        return _unfold(prim(_fold(x), w, **kwargs), b)
    groups = kwargs.get("groups", 1)
    if not batched[0]:
        x = broadcasting.broadcast_to(x, (b,) + tuple(_shape(x)))
    xs = tuple(_shape(x))                                        # (B, N, C, *S)
    d = len(xs) - 3
    x = shape.transpose(x, (1, 0) + tuple(range(2, 3 + d)))
    x = broadcasting.reshape(x, (xs[1], b * xs[2]) + xs[3:])
    if not batched[1]:
        w = broadcasting.broadcast_to(w, (b,) + tuple(_shape(w)))
    out = prim(x, _fold(w), **{**kwargs, "groups": b * groups})   # (N, B * C_out, *o)
    os_ = tuple(_shape(out))
    out = broadcasting.reshape(out, (os_[0], b, os_[1] // b) + os_[2:])
    return shape.transpose(out, (1, 0) + tuple(range(2, 3 + d)))


_ARRAY_ARGS = {max_pool: 1, pool_index: 1, window_gather: 2, window_scatter: 2}
max_pool.batch = pool_index.batch = window_gather.batch = window_scatter.batch = _batch_pointwise_in_n
conv.batch = conv_transpose.batch = _batch_conv
