"""Random programs over the rule table, as a Hypothesis strategy (``programs``).

A program is real Python source: NumPy statements (and a few loops) over its arguments (arrays,
Python floats, dicts and tuples of arrays; real or complex), written to a file under a temporary
folder and imported, so that ``wg.source_grad`` reads it as it reads a user's file. It is built
while being evaluated on its own inputs, so every statement knows its operands' shapes and values;
that is how it stays away from the points where a derivative does not exist: ``log``/``sqrt``/
division get positive operands, ``exp``/``cosh`` bounded ones, ``max``/``abs``/``maximum``/``clip``
a gap of at least ``GAP`` to any tie or kink (adding a constant with distinct entries, or leaving
the statement out), matrices to invert are diagonally dominant. Everything is drawn from Hypothesis
(the inputs through one integer), so a failure shrinks to a short program and replays exactly.

The module holds ``f(*ARGS)`` (a real scalar: the live results weighted by constants), ``f_vec``
(the same body, returning the live results themselves), ``ARGS`` and ``ARGNUMS``: a failing program
is a self-contained reproducer.
"""

import atexit
import hashlib
import importlib.util
import shutil
import sys
import tempfile

import numpy as np
from hypothesis import strategies as st

GAP = 0.05
"""The least distance kept between an operand and a kink or tie (the finite differences step 1e-5)."""

LIMIT = 1e3
"""A statement whose value exceeds this is left out (so float32 keeps its digits)."""

SHAPES = [(), (3,), (2, 3), (2, 1), (1, 3), (4,), (3, 3), (2, 2, 3)]
FAMILIES = ("elementwise", "reductions", "shape", "indexing", "products", "linalg", "control", "composites")
DTYPES = {"float64": np.float64, "float32": np.float32,
          "complex128": np.complex128, "complex64": np.complex64}
_DTYPE_TEXT = {np.float64: "np.float64", np.float32: "np.float32", np.complex128: "np.complex128",
               np.complex64: "np.complex64"}


# -- the statements ---------------------------------------------------------------------------------

class Builder:
    """One program being drawn: its statements, constants and live values (name -> value)."""

    def __init__(self, draw, dtype):
        self.draw = draw
        self.dtype = dtype
        self.pool = []  # (name, value) in order of definition
        self.consumed = set()
        self.consts = {}  # name -> source text
        self.const_values = {}
        self.lines = []
        self.features = set()
        self.arguments = []  # (name, value): arrays the steps pass as arguments of f (not constants)

    # operands
    def pick(self, pred=None):
        cands = [p for p in self.pool if pred is None or pred(p[1])]
        if not cands:
            return None
        k = self.draw(st.integers(0, len(cands) - 1))
        return cands[-1 - k]  # shrinks towards the newest value: chains

    def const(self, value, kind="float"):
        """A module-level constant (the program's dtype for floats); returns its name."""
        value = np.asarray(value, dtype=self.dtype if kind == "float" else value.dtype)
        name = f"C{len(self.consts)}"
        dt = _DTYPE_TEXT.get(value.dtype.type, f"np.{value.dtype}")
        self.consts[name] = f"np.array({value.tolist()!r}, dtype={dt})"
        self.const_values[name] = value
        return name

    def argument(self, value):
        """A new argument of ``f`` holding ``value`` (the program's dtype); returns its name. The
        steps use it where a constant would do: an argument is a program input, maybe differentiated."""
        name = f"A{len(self.arguments)}"
        value = np.asarray(value, dtype=self.dtype)
        self.arguments.append((name, value))
        self.pool.append((name, value))
        self.features.add("arg:passed")
        return name

    def distinct(self, shape):
        """A constant of ``shape`` whose entries differ pairwise by at least 0.2."""
        n = int(np.prod(shape))
        rng = np.random.default_rng(n)
        vals = (0.2 * rng.permutation(n) - 0.1 * n).reshape(shape)
        return self.const(np.round(vals, 2))

    def evaluate(self, expr):
        env = {"np": np, **self.const_values, **dict(self.pool)}
        try:
            with np.errstate(all="raise"):
                value = eval(expr, env)  # noqa: S307 - our own generated text
        except (FloatingPointError, ValueError, IndexError, TypeError, np.linalg.LinAlgError):
            return None
        arr = np.asarray(value)
        if (arr.dtype.kind not in "fc" or arr.size == 0 or not np.all(np.isfinite(arr))
                or np.max(np.abs(arr)) > LIMIT):
            return None
        return value

    def emit(self, expr, feature, operands):
        value = self.evaluate(expr)
        if value is None:
            return False
        name = f"v{len(self.lines)}"
        self.lines.append(f"{name} = {expr}")
        self.pool.append((name, value))
        self.consumed.update(operands)
        self.features.add(feature)
        return True

    # operand fixes that keep a statement away from its singular points
    def positive(self, name, v):
        if np.min(v) > 0.2:
            return name, v
        return f"({name} * {name} + 0.5)", v * v + 0.5

    def bounded(self, name, v, bound=3.0):
        if np.max(np.abs(v)) <= bound:
            return name, v
        return f"np.tanh({name})", np.tanh(v)

    def unit(self, name, v):
        if np.max(np.abs(v)) < 0.8:
            return name, v
        return f"(0.5 * np.tanh({name}))", 0.5 * np.tanh(v)

    def untied(self, name, v, gap_fn):
        """``name`` or ``name + distinct constant`` if that keeps ``gap_fn`` above GAP; else None."""
        if gap_fn(np.asarray(v)) > GAP:
            return name, v
        if np.ndim(v) == 0:
            return None
        c = self.distinct(np.shape(v))
        v2 = v + self.const_values[c]
        if gap_fn(v2) > GAP:
            return f"({name} + {c})", v2
        return None


def _is_array(v, ndim=1):
    return isinstance(v, np.ndarray) and v.ndim >= ndim


def _min_abs(v):
    return float(np.min(np.abs(v), initial=np.inf))


def _axis_gap(v, axis, largest=True):
    """The least gap between the extreme and the runner-up along ``axis`` (inf: no runner-up)."""
    v = np.asarray(v, dtype=np.float64)
    axes = tuple(range(v.ndim)) if axis is None else tuple(np.atleast_1d(axis) % max(v.ndim, 1))
    if v.ndim == 0:
        return np.inf
    moved = np.moveaxis(v, axes, tuple(range(-len(axes), 0)))
    flat = moved.reshape(moved.shape[:moved.ndim - len(axes)] + (-1,))
    if flat.shape[-1] < 2:
        return np.inf
    s = np.sort(flat, axis=-1)
    gaps = s[..., -1] - s[..., -2] if largest else s[..., 1] - s[..., 0]
    return float(np.min(gaps))


UNARY = {
    # name: (template, operand fix)
    "sin": ("np.sin({a})", None), "cos": ("np.cos({a})", None), "tanh": ("np.tanh({a})", None),
    "arctan": ("np.arctan({a})", None), "arcsinh": ("np.arcsinh({a})", None),
    "negative": ("-{a}", None), "square": ("np.square({a})", None), "pow2": ("{a} ** 2", None),
    "pow3": ("{a} ** 3", None), "sinc": ("np.sinc({a})", None), "scale": ("2.5 * {a} - 1.0", None),
    "exp": ("np.exp({a})", "bounded"), "expm1": ("np.expm1({a})", "bounded"),
    "sinh": ("np.sinh({a})", "bounded"), "cosh": ("np.cosh({a})", "bounded"),
    "logistic": ("1.0 / (1.0 + np.exp(-{a}))", "bounded"),
    "log": ("np.log({a})", "positive"), "log1p": ("np.log1p({a})", "positive"),
    "log2": ("np.log2({a})", "positive"), "log10": ("np.log10({a})", "positive"),
    "sqrt": ("np.sqrt({a})", "positive"), "cbrt": ("np.cbrt({a})", "positive"),
    "reciprocal": ("1.0 / {a}", "positive"), "rpow": ("{a} ** 0.5", "positive"),
    "pow_neg": ("{a} ** -1.5", "positive"), "tan": ("np.tan({a})", "unit"),
    "arcsin": ("np.arcsin({a})", "unit"), "arccos": ("np.arccos({a})", "unit"),
    "arctanh": ("np.arctanh({a})", "unit"),
    "abs": ("np.abs({a})", "away"), "relu": ("np.maximum({a}, 0.0)", "away"),
    "clip": ("np.clip({a}, -0.5, 0.5)", "clip"),
}

BINARY = {
    "add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "div": "{a} / {b}",
    "maximum": "np.maximum({a}, {b})", "minimum": "np.minimum({a}, {b})", "power": "{a} ** {b}",
    "arctan2": "np.arctan2({a}, {b})", "hypot": "np.hypot({a}, {b})", "logaddexp": "np.logaddexp({a}, {b})",
    "where_cmp": "np.where({a} > {b}, {a}, {b})", "where_const": "np.where({m}, {a}, {b})",
}


def unary(b, name=None):
    name = name or b.draw(st.sampled_from(sorted(UNARY)))
    template, fix = UNARY[name]
    picked = b.pick()
    if picked is None:
        return
    a, v = picked
    operand = (a, v)
    if fix in ("bounded", "positive", "unit"):
        operand = getattr(b, fix)(a, v)
    elif fix == "away":
        operand = b.untied(a, v, _min_abs)
    elif fix == "clip":
        operand = b.untied(a, v, lambda w: min(_min_abs(w - 0.5), _min_abs(w + 0.5)))
    if operand is None:
        return
    b.emit(template.format(a=operand[0]), f"unary:{name}", [a])


def binary(b):
    name = b.draw(st.sampled_from(sorted(BINARY)))
    first = b.pick()
    if first is None:
        return
    second = b.pick(lambda w: _broadcasts(first[1], w))
    (a, va), (c, vc) = first, second
    if name in ("div",):
        c, vc = b.positive(c, vc)
    elif name == "power":
        a, va = b.positive(a, va)
        c, vc = b.bounded(c, vc, 2.0)
    elif name in ("arctan2", "hypot"):
        if min(_min_abs(va), _min_abs(vc)) < 0.2:
            a, va = b.positive(a, va)
    elif name in ("maximum", "minimum", "where_cmp"):
        shape = np.broadcast_shapes(np.shape(va), np.shape(vc))
        fixed = b.untied(a, np.broadcast_to(va, shape) if np.ndim(va) else va,
                         lambda w: _min_abs(w - vc))
        if fixed is None:
            return
        a, va = fixed
    mask = ""
    if name == "where_const":
        shape = np.broadcast_shapes(np.shape(va), np.shape(vc))
        rng = np.random.default_rng(len(b.lines))
        mask = "np.array(True)" if not shape else b.const(rng.random(shape) < 0.5, kind="bool")
    b.emit(BINARY[name].format(a=a, b=c, m=mask), f"binary:{name}", [first[0], second[0]])


def _broadcasts(v, w):
    try:
        np.broadcast_shapes(np.shape(v), np.shape(w))
        return True
    except ValueError:
        return False


CUNARY = {
    # complex-safe: entire functions, and the ones below with their operand kept off their poles
    "sin": "np.sin({a})", "cos": "np.cos({a})", "exp": "np.exp({a})", "square": "np.square({a})",
    "conj": "np.conj({a})", "negative": "-{a}", "times_i": "{a} * 1j", "real": "np.real({a})",
    "imag": "np.imag({a})", "abs2": "np.abs({a}) ** 2", "pow3": "{a} ** 3", "abs": "np.abs({a})",
    "reciprocal": "1.0 / {a}", "tanh": "np.tanh({a})",
}


def cunary(b):
    name = b.draw(st.sampled_from(sorted(CUNARY)))
    picked = b.pick()
    if picked is None:
        return
    a, v = picked
    if name in ("exp", "sin", "cos", "tanh"):
        a, v = b.bounded(a, v, 1.0)
    if name in ("abs", "reciprocal") and _min_abs(v) < 0.3:
        return
    b.emit(CUNARY[name].format(a=a), f"complex:{name}", [picked[0]])


def cbinary(b):
    name = b.draw(st.sampled_from(["add", "sub", "mul", "div"]))
    first = b.pick()
    if first is None:
        return
    second = b.pick(lambda w: _broadcasts(first[1], w))
    if name == "div" and _min_abs(second[1]) < 0.3:
        return
    b.emit(BINARY[name].format(a=first[0], b=second[0]), f"complex:{name}", [first[0], second[0]])


def _axis(b, v):
    nd = np.ndim(v)
    choices = [None] + list(range(-nd, nd)) + ([(0, nd - 1)] if nd >= 2 else [])
    return b.draw(st.sampled_from(choices))


REDUCTIONS = ("sum", "mean", "max", "min", "prod", "var", "std", "norm", "logsumexp")
COMPLEX_REDUCTIONS = ("sum", "mean", "prod", "var", "norm")


def reduction(b):
    picked = b.pick()
    if picked is None:
        return
    a, v = picked
    name = b.draw(st.sampled_from(REDUCTIONS if np.isrealobj(v) else COMPLEX_REDUCTIONS))
    axis = _axis(b, v)
    keepdims = b.draw(st.booleans())
    if name in ("max", "min"):
        fixed = b.untied(a, v, lambda w: _axis_gap(w, axis, largest=name == "max"))
        if fixed is None:
            return
        a, v = fixed
    elif name == "prod":
        a, v = b.bounded(a, v, 1.5)
    elif name in ("std", "norm"):
        var = np.var(v, axis=axis) if name == "std" else np.sum(np.square(v), axis=axis)
        if np.min(var, initial=np.inf) < 0.05:
            return
    kw = ("" if axis is None else f", axis={axis!r}") + (", keepdims=True" if keepdims else "")
    method = _is_array(v) and b.draw(st.booleans()) and name not in ("norm", "logsumexp")
    if name == "norm":
        expr = f"np.linalg.norm({a}{kw})"
    elif name == "logsumexp":
        a, v = b.bounded(a, v, 3.0)
        expr = f"np.log(np.sum(np.exp({a}){kw}))"
    elif method:
        expr = f"{a}.{name}({kw[2:]})"
        b.features.add(f"method:{name}")
    else:
        expr = f"np.{name}({a}{kw})"
    b.features.add(f"reduce-{np.ndim(v)}d:{name}")
    b.emit(expr, f"reduction:{name}", [picked[0]])


def shape_op(b):
    picked = b.pick()
    if picked is None:
        return
    a, v = picked
    nd, shape = np.ndim(v), np.shape(v)
    choices = ["reshape", "ravel", "expand_dims", "newaxis", "stack", "broadcast_to"]
    if nd >= 1:
        choices += ["flip", "reverse", "cumsum", "concatenate", "repeat", "tile", "roll"]
    if nd >= 2:
        choices += ["T", "swapaxes", "transpose"]
    if 1 in shape:
        choices += ["squeeze"]
    name = b.draw(st.sampled_from(choices))
    ax = b.draw(st.integers(-nd, nd - 1)) if nd else 0
    other = b.pick(lambda w: np.shape(w) == shape) or picked
    if name == "reshape":
        size = int(np.prod(shape))
        shapes = [(-1,), (size, 1), (1, size)] + [(k, size // k) for k in (2, 3) if size % k == 0]
        expr = f"np.reshape({a}, {b.draw(st.sampled_from(shapes))!r})"
        if _is_array(v) and b.draw(st.booleans()):
            expr = f"{a}.reshape({b.draw(st.sampled_from(shapes))!r})"
    elif name == "ravel":
        expr = f"np.ravel({a})"
    elif name == "expand_dims":
        expr = f"np.expand_dims({a}, {b.draw(st.integers(-nd - 1, nd))})"
    elif name == "newaxis":
        expr = b.draw(st.sampled_from([f"{a}[None]", f"{a}[..., None]"]))
    elif name == "stack":
        expr = f"np.stack([{a}, {other[0]}], axis={b.draw(st.integers(-nd - 1, nd))})"
    elif name == "broadcast_to":
        target = (2,) + tuple(3 if n == 1 else n for n in shape)
        expr = f"np.broadcast_to({a}, {target!r})"
    elif name == "flip":
        expr = f"np.flip({a}, axis={ax})"
    elif name == "reverse":
        expr = f"{a}[::-1]"
    elif name == "cumsum":
        expr = f"np.cumsum({a}, axis={ax})"
    elif name == "concatenate":
        expr = f"np.concatenate([{a}, {other[0]}], axis={ax})"
    elif name == "repeat":
        expr = f"np.repeat({a}, 2, axis={ax})"
    elif name == "tile":
        expr = f"np.tile({a}, 2)"
    elif name == "roll":
        expr = f"np.roll({a}, 1, axis={ax})"
    elif name == "T":
        expr = f"{a}.T"
    elif name == "swapaxes":
        expr = f"np.swapaxes({a}, 0, -1)"
    elif name == "transpose":
        expr = f"np.transpose({a}, {tuple(reversed(range(nd)))!r})"
    else:  # squeeze
        expr = f"np.squeeze({a})"
    if nd == 0:
        b.features.add(f"0d:{name}")
    b.emit(expr, f"shape:{name}", [a, other[0]])


def indexing(b):
    picked = b.pick(lambda w: np.ndim(w) >= 1)
    if picked is None:
        return
    a, v = picked
    shape = np.shape(v)
    n = shape[0]
    choices = ["int", "slice", "step", "reverse", "ellipsis", "fancy", "mask", "take"]
    if len(shape) >= 2:
        choices += ["column", "fancy2", "slice2"]
    name = b.draw(st.sampled_from(choices))
    if name == "int":
        expr = f"{a}[{b.draw(st.integers(-n, n - 1))}]"
    elif name == "slice":
        expr = b.draw(st.sampled_from([f"{a}[1:]", f"{a}[:-1]", f"{a}[:1]"]))
    elif name == "step":
        expr = f"{a}[::2]"
    elif name == "reverse":
        expr = f"{a}[::-1]"
    elif name == "ellipsis":
        expr = f"{a}[..., 0]"
    elif name == "fancy":
        idx = b.const(np.array([0, n - 1, 0]), kind="int")
        expr = f"{a}[{idx}]"
    elif name == "mask":
        rng = np.random.default_rng(len(b.lines) + 1)
        m = rng.random(shape) < 0.6
        m.flat[0] = True
        expr = f"{a}[{b.const(m, kind='bool')}]"
    elif name == "take":
        idx = b.const(np.array([n - 1, 0, n - 1]), kind="int")
        expr = f"np.take({a}, {idx}, axis=0)"
    elif name == "column":
        expr = f"{a}[:, {b.draw(st.integers(-shape[1], shape[1] - 1))}]"
    elif name == "fancy2":
        i = b.const(np.array([0, n - 1, 0]), kind="int")
        j = b.const(np.array([shape[1] - 1, 0, shape[1] - 1]), kind="int")
        expr = f"{a}[{i}, {j}]"
    else:
        expr = f"{a}[1:, ::-1]"
    b.emit(expr, f"indexing:{name}", [a])


def _matmul_ok(v, w):
    try:
        np.matmul(np.asarray(v), np.asarray(w))
        return np.ndim(v) >= 1 and np.ndim(w) >= 1
    except ValueError:
        return False


def product(b):
    picked = b.pick(lambda w: np.ndim(w) >= 1)
    if picked is None:
        return
    a, v = picked
    name = b.draw(st.sampled_from(["matmul", "dot", "outer", "inner", "einsum", "tensordot", "trace",
                                   "vdot"]))
    other = b.pick(lambda w: _matmul_ok(v, w))
    if other is None:
        c = f"{a}.T" if np.ndim(v) >= 2 else a
    else:
        c = other[0]
    if name == "matmul":
        expr = f"{a} @ {c}"
    elif name == "dot":
        expr = f"np.dot({a}, {c})"
    elif name == "outer":
        expr = f"np.outer({a}, {b.pick()[0]})"
    elif name == "inner":
        last = b.pick(lambda w: np.ndim(w) >= 1 and np.shape(w)[-1] == np.shape(v)[-1])
        expr = f"np.inner({a}, {last[0]})"
    elif name == "einsum":
        if np.ndim(v) == 2:
            expr = b.draw(st.sampled_from([f"np.einsum('ij->j', {a})", f"np.einsum('ij,ij->i', {a}, {a})"]))
        else:
            expr = f"np.einsum('...i,...i->...', {a}, {a})"
    elif name == "tensordot":
        expr = f"np.tensordot({a}, {c}, axes=1)"
    elif name == "vdot":
        expr = f"np.vdot({a}, {a})"
    else:
        if np.ndim(v) < 2:
            return
        expr = f"np.trace({a})"
    b.emit(expr, f"product:{name}", [a])


def linalg(b):
    picked = b.pick(lambda w: np.ndim(w) == 2 and np.shape(w)[0] == np.shape(w)[1] and np.shape(w)[0] > 1)
    if picked is None:
        return
    a, v = picked
    n = np.shape(v)[0]
    a, v = b.bounded(a, v, 1.0)
    eye = b.const(4.0 * np.eye(n))
    m = f"({a} + {eye})"
    name = b.draw(st.sampled_from(["inv", "det", "slogdet", "solve", "norm", "cholesky", "eigvalsh",
                                   "matrix_power", "qr", "svdvals", "eigh"]))
    if name == "inv":
        expr = f"np.linalg.inv({m})"
    elif name == "det":
        expr = f"np.linalg.det({m})"
    elif name == "slogdet":
        expr = f"np.linalg.slogdet({m})[1]"
    elif name == "solve":
        rhs = b.pick(lambda w: np.ndim(w) in (1, 2) and np.shape(w)[0] == n)
        expr = f"np.linalg.solve({m}, {rhs[0]})" if rhs else f"np.linalg.solve({m}, {a}[0])"
    elif name == "norm":
        expr = f"np.linalg.norm({m})"
    elif name == "cholesky":
        expr = f"np.linalg.cholesky({m} @ {m}.T)"
    elif name == "eigvalsh":
        sym = f"({m} + {m}.T)"
        w = np.linalg.eigvalsh(np.asarray(b.evaluate(sym), dtype=np.float64))
        if np.min(np.diff(w)) < 0.1:
            return
        expr = f"np.linalg.eigvalsh({sym})"
    elif name == "qr":
        expr = f"np.linalg.qr({m})[1]"
    elif name == "svdvals":
        sv = np.linalg.svd(np.asarray(b.evaluate(m), dtype=np.float64), compute_uv=False)
        if np.min(-np.diff(sv)) < 0.1:
            return
        expr = f"np.linalg.svd({m}, compute_uv=False)"
    elif name == "eigh":
        sym = f"({m} + {m}.T)"
        w = np.linalg.eigvalsh(np.asarray(b.evaluate(sym), dtype=np.float64))
        if np.min(np.diff(w)) < 0.1:
            return
        expr = f"np.linalg.eigh({sym})[0]"
    else:
        expr = f"np.linalg.matrix_power({m}, 2)"
    b.emit(expr, f"linalg:{name}", [picked[0]])


def control(b):
    """A loop: an update carried through iterations, or values appended to a list and combined."""
    first = b.pick()
    if first is None:
        return
    a, v = first
    second = b.pick(lambda w: _broadcasts(v, w)
                    and np.broadcast_shapes(np.shape(v), np.shape(w)) == np.shape(v))
    n = b.draw(st.integers(1, 3))
    name = f"v{len(b.lines)}"
    kind = b.draw(st.sampled_from(["carry", "while", "append_sum", "append_stack", "append_last"]))
    if kind == "carry":
        lines = [f"{name} = {a}", f"for i in range({n}):",
                 f"    {name} = np.tanh({name}) * 0.9 + {second[0]} * i"]
    elif kind == "while":
        lines = [f"{name} = {a}", "i = 0", f"while i < {n}:",
                 f"    {name} = np.sin({name}) + 0.5 * {second[0]}", "    i += 1"]
    else:
        combine = {"append_sum": "sum(acc)", "append_stack": "np.stack(acc)",
                   "append_last": "acc[-1] + acc[0]"}
        lines = ["acc = []", f"for i in range({n}):",
                 f"    acc.append(np.sin({a}) * (i + 1.0) + {second[0]})", f"{name} = {combine[kind]}"]
    env = {"np": np, **b.const_values, **dict(b.pool)}
    try:
        with np.errstate(all="raise"):
            exec("\n".join(lines), env)  # noqa: S102 - our own generated text
    except (FloatingPointError, ValueError):
        return
    value = env[name]
    arr = np.asarray(value)
    if arr.dtype.kind not in "fc" or not np.all(np.isfinite(arr)) or np.max(np.abs(arr)) > LIMIT:
        return
    b.lines.extend(lines)
    b.pool.append((name, value))
    b.consumed.update([a, second[0]])
    b.features.add(f"control:{kind}")


KEEPDIMS_INDEX = ("[::2]", "[:1]", "[-1:]", "[..., ::2]", "[0]", "[::-1]", "[..., :1]")
COMPOSITES = ("keepdims-index", "sort-abs", "maximum-const", "maximum-arg", "concat-equal", "concat-shared",
              "zero", "scale-arg")


def _sorted_gap(v):
    """The least gap between neighbours along the last axis (inf: none)."""
    v = np.asarray(v, dtype=np.float64)
    if v.ndim == 0 or v.shape[-1] < 2:
        return np.inf
    return float(np.min(np.diff(np.sort(v, axis=-1), axis=-1)))


def composite(b):
    """Compositions whose adjoints meet in one buffer: small reduced arrays (keepdims) indexed,
    sorted absolute values, maximum with a constant or an argument, concatenations of equal pieces
    or sharing their first piece, zero-derivative values (``x - x``), products with arguments."""
    name = b.draw(st.sampled_from(COMPOSITES))
    picked = b.pick(lambda w: np.ndim(w) >= 1) if name in ("keepdims-index", "sort-abs", "concat-equal",
                                                             "concat-shared") else b.pick()
    if picked is None:
        return
    a, v = picked
    nd, rng = np.ndim(v), np.random.default_rng(len(b.lines) + 7)
    if name == "keepdims-index":
        axis = b.draw(st.sampled_from([None] + list(range(-nd, nd))))
        op = b.draw(st.sampled_from(["sum", "mean"]))
        kw = "" if axis is None else f", axis={axis}"
        if not b.emit(f"np.{op}({a}{kw}, keepdims=True)", "composite:keepdims", [a]):
            return
        r, rv = b.pool[-1]
        index = b.draw(st.sampled_from(KEEPDIMS_INDEX))
        if not b.emit(f"{r}{index}", f"composite:keepdims-index{index}", [r]):
            return
        if b.draw(st.booleans()):
            s, sv = b.pool[-1]
            arg = b.argument(np.round(rng.standard_normal(np.shape(sv)), 2))
            b.emit(f"{s} * {arg}", "composite:scale-arg", [s])
    elif name == "sort-abs":
        fixed = b.untied(a, v, _sorted_gap)
        if fixed is None or not b.emit(f"np.sort({fixed[0]}, axis=-1)", "composite:sort", [a]):
            return
        s, sv = b.pool[-1]
        fixed = b.untied(s, sv, _min_abs)
        if fixed is not None:
            b.emit(f"np.abs({fixed[0]})", "composite:sort-abs", [s])
    elif name == "maximum-const":
        c = b.draw(st.sampled_from([-1.5, -0.25, 0.0, 0.5]))
        fixed = b.untied(a, v, lambda w: _min_abs(w - c))
        if fixed is not None:
            expr = b.draw(st.sampled_from([f"np.maximum({c}, {fixed[0]})", f"np.minimum({fixed[0]}, {c})"]))
            b.emit(expr, "composite:maximum-const", [a])
    elif name == "maximum-arg":  # an argument at least 0.2 away from every entry
        offset = rng.choice([-1.0, 1.0], size=np.shape(v)) * (0.2 + rng.random(np.shape(v)))
        arg = b.argument(np.round(np.asarray(v, dtype=np.float64) + offset, 2))
        b.emit(f"np.maximum({a}, {arg})", "composite:maximum-arg", [a])
    elif name == "concat-equal":
        ax = b.draw(st.integers(-nd, nd - 1))
        b.emit(f"np.concatenate([{a}, {a}], axis={ax})", "composite:concat-equal", [a])
    elif name == "concat-shared":  # two concatenations beginning with the same piece, the rest differing
        other = b.pick(lambda w: np.ndim(w) == nd and np.shape(w)[1:] == np.shape(v)[1:]) or picked
        k = b.draw(st.integers(1, np.shape(other[1])[0]))
        if b.emit(f"np.concatenate([{a}, {a}], axis=0)", "composite:concat-equal", [a]):
            b.emit(f"np.concatenate([{a}, {other[0]}[:{k}]], axis=0)", "composite:concat-shared",
                   [a, other[0]])
    elif name == "zero":
        expr = b.draw(st.sampled_from([f"{a} - {a}", f"0.0 * {a}", f"({a} - {a}) * {a}"]))
        b.emit(expr, "composite:zero", [a])
    else:  # scale-arg: a product with an argument of the operand's shape, or of a shape it broadcasts to
        shape = b.draw(st.sampled_from([np.shape(v), (1,) * nd, np.shape(v)[-1:]]))
        arg = b.argument(np.round(rng.standard_normal(shape), 2))
        b.emit(f"{a} * {arg}", "composite:scale-arg", [a])


STEPS = {"elementwise": (unary, binary), "reductions": (reduction,), "shape": (shape_op,),
         "indexing": (indexing,), "products": (product,), "linalg": (linalg,), "complex": (cunary, cbinary),
         "control": (control,), "composites": (composite,)}


# -- the program ------------------------------------------------------------------------------------

ARG_KINDS = ("array", "float", "dict", "tuple")


class Program:
    """A generated program: its source, and the module it was imported as (``f``, ``f_vec``, ``ARGS``)."""

    _dir = None

    def __init__(self, source, args, argnums, dtype, features, pytree, weights):
        self.source = source
        self.weights = weights  # the names of the constants f weights f_vec's results with
        self.args = args
        self.argnums = argnums
        self.dtype = dtype
        self.features = frozenset(features)
        self.pytree = pytree
        self._module = None

    def __repr__(self):
        return f"Program(dtype={np.dtype(self.dtype).name}, source=\n{self.source})"

    @property
    def module(self):
        if self._module is None:
            self._module = load(self.source)
        return self._module

    @property
    def f(self):
        return self.module.f

    @property
    def f_vec(self):
        return self.module.f_vec


def load(source):
    """``source`` imported from a file under a temporary folder (so ``inspect`` can read it)."""
    if Program._dir is None:
        Program._dir = tempfile.mkdtemp(prefix="wengert-fuzz-")
        atexit.register(shutil.rmtree, Program._dir, True)
    name = "fuzzprog_" + hashlib.sha1(source.encode()).hexdigest()[:16]
    if name in sys.modules:
        return sys.modules[name]
    path = f"{Program._dir}/{name}.py"
    with open(path, "w") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _leaf_text(x):
    if isinstance(x, (float, complex)):
        return repr(x)
    return f"np.array({x.tolist()!r}, dtype={_DTYPE_TEXT[x.dtype.type]})"


def _arg_text(a):
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k!r}: {_leaf_text(v)}" for k, v in a.items()) + "}"
    if isinstance(a, tuple):
        return "(" + ", ".join(_leaf_text(v) for v in a) + ",)"
    return _leaf_text(a)


@st.composite
def programs(draw, families=FAMILIES, dtypes=("float64", "float32"), pytrees=True, max_steps=6,
             min_steps=1, weights_as_args=False):
    """A ``Program`` whose statements come from ``families`` (names of ``STEPS``); with
    ``weights_as_args``, the weights of ``f``'s sum may be passed as arguments (``W0``, ...) rather
    than read as module constants."""
    dtype = DTYPES[draw(st.sampled_from(dtypes))]
    nargs = draw(st.integers(1, 3))
    kinds = ARG_KINDS if pytrees else ARG_KINDS[:2]
    cplx = np.dtype(dtype).kind == "c"
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    b = Builder(draw, dtype)
    args, params, unpack = [], [], []
    for i in range(nargs):
        kind = draw(st.sampled_from(kinds))
        if kind == "float" and dtype in (np.float32, np.complex64):
            kind = "array"

        def leaf(kind=kind):
            if kind == "float":
                re, im = np.round(rng.standard_normal(2), 3)
                return (complex(re, im) if cplx else float(re)) or 0.5
            shape = draw(st.sampled_from(SHAPES))
            x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if cplx else 0)
            return np.asarray(x).astype(dtype)

        if kind in ("array", "float"):
            x = leaf()
            name = f"x{i}"
            args.append(x)
            b.pool.append((name, x))
        else:
            name = f"p{i}"
            keys = ("w", "b") if kind == "dict" else (0, 1)
            leaves = [leaf("array") for _ in keys]
            args.append(dict(zip(keys, leaves)) if kind == "dict" else tuple(leaves))
            for k, x in zip(keys, leaves):
                v = f"v{len(b.lines)}"
                b.lines.append(f"{v} = {name}[{k!r}]")
                unpack.append(v)
                b.pool.append((v, x))
        params.append(name)
    steps = [s for fam in families for s in STEPS[fam]]
    for _ in range(draw(st.integers(min_steps, max_steps))):
        draw(st.sampled_from(steps))(b)
    for name, x in b.arguments:  # the arrays the steps made arguments
        params.append(name)
        args.append(x)
    nargs = len(params)
    inputs = set(params) | set(unpack)
    live = [n for n, _ in b.pool if n not in b.consumed and n not in inputs] or [b.pool[-1][0]]
    values = dict(b.pool)
    weights = []
    for n in live:
        wrng = np.random.default_rng(len(weights))
        w = np.round(wrng.standard_normal(np.shape(values[n])), 2)
        if cplx:
            w = w + 1j * np.round(wrng.standard_normal(np.shape(values[n])), 2)
        weights.append(b.const(w))
    total_names = list(weights)
    if weights_as_args and draw(st.booleans()):  # not differentiated: f_vec does not read them
        for k, w in enumerate(weights):
            total_names[k] = f"W{k}"
            params.append(f"W{k}")
            args.append(b.const_values[w])
    if nargs == 1:
        argnums = 0
    else:
        chosen = draw(st.lists(st.integers(0, nargs - 1), min_size=1, max_size=nargs, unique=True))
        argnums = chosen[0] if len(chosen) == 1 and draw(st.booleans()) else tuple(sorted(chosen))
    sig = ", ".join(params)
    body = "".join(f"    {line}\n" for line in b.lines)
    total = " + ".join((f"np.sum(np.real({n} * {w}))" if cplx else f"np.sum({n} * {w})")
                       for n, w in zip(live, total_names))
    outs = ", ".join(live) + ("," if len(live) == 1 else "")
    source = (
        "import numpy as np\n\n"
        + "".join(f"{k} = {v}\n" for k, v in b.consts.items())
        + f"ARGS = ({', '.join(_arg_text(a) for a in args)},)\n"
        + f"ARGNUMS = {argnums!r}\n\n\n"
        + f"def f({sig}):\n{body}    return {total}\n\n\n"
        + f"def f_vec({sig}):\n{body}    return ({outs})\n"
    )
    pytree = any(isinstance(a, (dict, tuple)) for a in args)
    features = b.features | {f"arg:{type(a).__name__}" for a in args} | {f"dtype:{np.dtype(dtype).name}"}
    return Program(source, tuple(args), argnums, dtype, features, pytree, tuple(weights))

