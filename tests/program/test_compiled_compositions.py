"""Random compositions of the constructs that once made ``wg.compile``'s gradient wrong (issue 28:
found by differential fuzzing against PyTorch): reductions with ``keepdims`` then indexed or sorted,
``abs``, ``maximum`` with a constant, concatenations of equal pieces or of a piece and a constant,
zero-derivative sub-programs (``x - x``, ``floor``, ``sign``), ``einsum``, ``diagonal`` and ``hypot``.
The faults were in the in-place accumulation of an indexed adjoint (``a[i] += e`` into a buffer of
another shape, where the indexed cotangent broadcasts) and in concatenate's VJP (two concatenations
sharing a piece shared one derivative cache); each generated program is checked: tape = central
differences, compiled gradient = tape, compiled value = plain call.
"""

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

import wengert as wg

# Each piece of source maps a (n, m) matrix ``v`` to one of the same shape: values carried through.
SAME_SHAPE = [
    "np.abs({v})",
    "np.maximum({c}, {v})",
    "np.maximum({v}, {c})",
    "({v} - {v}) + {v} * {c}",  # a zero-derivative part beside a live one
    "np.floor({v}) + {v}",
    "np.sign({v}) * {c} + {v}",
    "np.hypot({v}, {c} + 2.0)",
    "{v} * 0.5 + np.sum({v}, axis={axis}, keepdims=True)",
    "{v} - np.mean({v}, axis={axis}, keepdims=True)",
    "{v} * np.max({v}, axis={axis}, keepdims=True)",
    "np.sort({v}, axis={axis})",
]

# Each maps ``v`` to an array of any shape, read by the loss through a weight of that shape.
ENDS = [
    "{v}",
    "np.sum({v}, axis={axis}, keepdims=True)",
    "np.sum({v}, axis={axis}, keepdims=True){index}",
    "np.sort(np.sum({v}, axis={axis}, keepdims=True), axis=-1)",
    "np.abs(np.sort(np.sum({v}, axis={axis}, keepdims=True), axis=-1))",
    "np.mean({v}, axis={axis}, keepdims=True){index}",
    "np.max({v}, axis={axis}, keepdims=True){index}",
    "np.concatenate([{v}, {v}])",
    "np.concatenate([{v} - {v}, {v} - {v}])",
    "np.concatenate([{v}, C])",
    "np.concatenate([{v}, C[:2]])",
    "np.concatenate([{v} - {v}, C[:1]])",
    "np.einsum('ij,ij->i', {v}, {v})",
    "np.diagonal({v} @ {v}.T)",
    "np.floor({v})",
]
INDEXES = ["", "[::2]", "[:1]", "[-1:]", "[..., ::2]", "[0]", "[::-1]"]


@st.composite
def programs(draw):
    """The terms of ``f(x, C, *W)``, a sum of ``np.sum(end * W_k)``: the ends read one or two values
    made from x, shared between terms (two concatenations beginning with the same value, say)."""
    values = []
    for _ in range(draw(st.integers(1, 2))):
        v = "x"
        for _ in range(draw(st.integers(0, 2))):
            c, axis = draw(st.sampled_from(["-1.5", "0.0", "0.5"])), draw(st.sampled_from(["0", "-1"]))
            v = "(" + draw(st.sampled_from(SAME_SHAPE)).format(v=v, c=c, axis=axis) + ")"
        values.append(v)
    return [draw(st.sampled_from(ENDS)).format(v=draw(st.sampled_from(values)),
                                               index=draw(st.sampled_from(INDEXES)),
                                               axis=draw(st.sampled_from(["0", "-1", "None"])))
            for _ in range(draw(st.integers(1, 3)))]


def _function(terms):
    ws = [f"W{k}" for k in range(len(terms))]
    body = " + ".join(f"np.sum({t} * {w})" for t, w in zip(terms, ws))
    namespace = {"np": np}
    exec(f"def f(x, C, {', '.join(ws)}):\n    return {body}\n", namespace)  # noqa: S102 - our own text
    return namespace["f"]


def central_grad(f, args, eps=1e-6):
    x = args[0]
    out = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[k] += eps
        lo[k] -= eps
        out[k] = (f(hi, *args[1:]) - f(lo, *args[1:])) / (2 * eps)
    return out


@settings(max_examples=150, deadline=None, derandomize=True)
@example(["np.abs(np.sort(np.sum(x, axis=0, keepdims=True), axis=-1))", "np.maximum(-1.5, x)"], (2, 3), 1)
@example(["np.concatenate([(x - x), (x - x)])", "np.concatenate([(x - x), C[:2]])"], (3,), 1)  # the issue's
@given(programs(), st.sampled_from([(1,), (2,), (3,), (4,), (1, 2), (2, 3), (3, 2)]), st.integers(0, 2 ** 16))
def test_compiled_gradient_of_random_compositions_equals_the_tape(terms, shape, seed):
    """x a vector or a matrix, C a constant of x's width (a row, for a matrix) passed as an argument."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    x[np.abs(x) < 0.2] += 0.7  # away from abs's kink and maximum's constants
    x = np.round(x, 3) + rng.uniform(1e-4, 9e-4, x.shape)  # no ties, no integers (floor, sort)
    C = rng.standard_normal(shape[-1:] if len(shape) == 1 else (1, shape[-1]))
    ns = {"np": np, "x": x, "C": C}
    try:
        ends = [np.asarray(eval(t, ns)) for t in terms]  # noqa: S307 - our own text
    except (ValueError, IndexError):  # C of another width than an end's rows: no such program
        return
    ws = [rng.standard_normal(e.shape) for e in ends]
    f, args = _function(terms), (x, C, *ws)
    want, text = wg.grad(f)(*args), " + ".join(terms)
    np.testing.assert_allclose(want, central_grad(f, args), rtol=1e-6, atol=1e-7, err_msg=text)
    compiled = wg.compile(f)
    np.testing.assert_allclose(compiled(*args), f(*args), rtol=1e-12, atol=1e-12, err_msg=text)
    np.testing.assert_allclose(compiled.grad(0)(*args), want, rtol=1e-11, atol=1e-12, err_msg=text)
