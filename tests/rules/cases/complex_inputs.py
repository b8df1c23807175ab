"""Systematic-test cases on complex inputs: the complex-part primitives (real, imag, conjugate), and
complex versions of the other primitives and composed functions (keys ``"<name> complex"``).

Convention (HIPS autograd's and JAX's, docs/complex.md): a holomorphic f has VJP ``g * f'(z)``;
``check_grads`` pairs cotangents with tangents by ``Re(sum(u * t))`` and perturbs complex inputs
along complex directions, so each case checks both modes against finite differences."""

import numpy as np

import wengert.numpy as wnp
from tests.support.rule_helpers import R
from wengert.rules import complex as cx
from wengert.rules import elementwise as E
from wengert.rules import indexing, products, reductions, shape


def C(*shape, lo=-1.0, hi=1.0):
    """A random complex array (a Python complex for shape ())."""
    z = np.asarray(R(*shape, lo=lo, hi=hi)) + 1j * np.asarray(R(*shape, lo=lo, hi=hi))
    return complex(z) if shape == () else z


def right(*shape):
    """Complex values in the right half-plane, away from 0 (clear of log's and sqrt's branch cut)."""
    z = np.asarray(R(*shape, lo=0.5, hi=1.5)) + 1j * np.asarray(R(*shape))
    return complex(z) if shape == () else z


def _real_loss(f):
    """|f|**2 summed: a real-valued function of complex inputs (what grad is asked of)."""
    def loss(*args):
        y = f(*args)
        return wnp.sum(wnp.real(y * wnp.conj(y)))
    loss.__name__ = f"abs2({getattr(f, '__name__', 'f')})"
    return loss


CASES = {
    "real": [(cx.real, (C(3),)), (cx.real, (C(),)), (cx.real, (R(2, 2),))],
    "imag": [(cx.imag, (C(2, 3),)), (lambda z: cx.imag(z) * z, (C(3),)), (cx.imag, (R(2),))],
    "conjugate": [(cx.conj, (C(3),)), (lambda z: cx.conj(z) * z, (C(2, 2),)), (cx.conj, (R(3),))],
}

_HOLOMORPHIC = {
    "exp": (E.exp, C), "log": (E.log, right), "sqrt": (E.sqrt, right), "sin": (E.sin, C),
    "cos": (E.cos, C), "tan": (E.tan, C), "sinh": (E.sinh, C), "cosh": (E.cosh, C),
    "tanh": (E.tanh, C), "arcsin": (E.arcsin, C), "arccos": (E.arccos, C), "arctan": (E.arctan, C),
    "arcsinh": (E.arcsinh, C), "arccosh": (E.arccosh, right), "arctanh": (E.arctanh, C),
    "log2": (E.log2, right), "log10": (E.log10, right), "log1p": (E.log1p, right),
    "expm1": (E.expm1, C), "exp2": (E.exp2, C), "square": (E.square, C),
    "reciprocal": (E.reciprocal, right), "negative": (E.negative, C), "positive": (E.positive, C),
}

COMPOSED = {f"{name} complex": [(f, (make(3),)), (_real_loss(f), (make(2, 2),))]
            for name, (f, make) in _HOLOMORPHIC.items()}
COMPOSED.update({
    "arccosh complex left half-plane": [(E.arccosh, (np.array([-1.5 + 0.5j, -0.3 - 0.8j]),))],
    "add complex": [(E.add, (C(2, 3), R(3))), (E.add, (R(2), C()))],
    "subtract complex": [(E.subtract, (C(3), C(2, 3)))],
    "multiply complex": [(E.multiply, (C(2, 3), R(3))), (E.multiply, (R(3), C())),
                         (_real_loss(E.multiply), (C(3), C(3)))],
    "true_divide complex": [(E.true_divide, (C(3), right(3))), (E.true_divide, (R(3), right(3)))],
    "power complex": [(E.power, (right(3), C(3))), (lambda z: E.power(z, 3), (C(3),)),
                      (lambda x: E.power(x, 0.5 + 1j), (R(3, lo=0.5, hi=1.5),))],
    "absolute complex": [(E.absolute, (C(3),)), (lambda z: E.absolute(z) * z, (C(2, 2),)),
                         (E.absolute, (C(),))],
    "where complex": [(lambda a, b: E.where(np.array([True, False, True]), a, b), (C(3), R(3)))],
    "sum complex": [(lambda z: reductions.sum(z, axis=0), (C(2, 3),)), (_real_loss(reductions.sum), (C(3),))],
    "prod complex": [(lambda z: reductions.prod(z, axis=1), (C(2, 3),))],
    "mean complex": [(wnp.mean, (C(2, 3),))],
    "var complex": [(lambda z: wnp.var(z, axis=0), (C(3, 2),)), (wnp.std, (C(4),))],
    "matmul complex": [(products.matmul, (C(2, 3), C(3, 2))), (products.matmul, (R(2, 3), C(3))),
                       (_real_loss(products.matmul), (C(2, 2), C(2)))],
    "tensordot complex": [(lambda a, b: products.tensordot(a, b, 1), (R(2, 3), C(3, 2)))],
    "einsum complex": [(lambda a, b: products.einsum("ij,jk->ik", a, b), (C(2, 3), R(3, 2)))],
    "getitem complex": [(lambda z: indexing.getitem(z, np.array([0, 2, 0])), (C(3),))],
    "concatenate complex": [(lambda a, b: shape.concatenate(a, b, axis=0), (R(2), C(3)))],
    "reshape complex": [(lambda z: shape.reshape(z, (3, 2)), (C(2, 3),))],
    "transpose complex": [(shape.transpose, (C(2, 3),))],
    "astype complex": [(lambda x: shape.astype(x, np.complex128) * (1 + 2j), (R(3),))],
    "broadcast_to complex": [(lambda z: E.multiply(z, np.ones((2, 3))), (C(3),))],
    "repeat complex": [(lambda z: shape.repeat(z, 2), (C(3),))],
    "angle complex": [(wnp.angle, (right(3),)), (lambda z: wnp.angle(z, deg=True), (C(2),))],
    "vdot complex": [(wnp.vdot, (C(3), C(3)))],
    "cumsum complex": [(wnp.cumsum, (C(4),))],
    "cumprod complex": [(wnp.cumprod, (C(4),))],
    "sort-free complex functions": [(lambda z: wnp.kron(wnp.diag(z), wnp.roll(z, 1)), (C(2),)),
                                    (lambda z: wnp.trace(wnp.outer(z, wnp.conj(z))), (C(3),))],
    "logaddexp complex-free input": [(lambda x: wnp.logaddexp(x, 0.0) * (1 - 1j), (R(3),))],
    "nansum complex": [(wnp.nansum, (C(3),))],
    "average complex": [(lambda z, w: wnp.average(z, weights=w), (C(3), R(3, lo=0.5, hi=1.5)))],
    "cross complex": [(wnp.cross, (C(3), C(3)))],
    "pad complex": [(lambda z: wnp.pad(z, 1, mode="edge"), (C(2, 2),))],
    "sinc complex": [(wnp.sinc, (C(3),)), (wnp.sinc, (np.array([0.001 + 0.002j, 0.0j]),))],
    "diff complex": [(lambda z: wnp.diff(z, n=2), (C(4),))],
    "roll complex": [(lambda z: wnp.roll(z, 1, axis=1), (C(2, 3),))],
    "diag complex": [(wnp.diag, (C(3),)), (wnp.trace, (C(3, 3),)), (wnp.tril, (C(3, 3),))],
    "kron complex": [(wnp.kron, (C(2), C(2, 2)))],
    "take complex": [(lambda z: wnp.take(z, [1, 1, 0]), (C(3),)),
                     (lambda z: wnp.take_along_axis(z, np.array([[1, 0]]), axis=1), (C(2, 2),))],
    "nanmean complex": [(wnp.nanmean, (C(3),)), (wnp.nanvar, (C(4),))],
    "select complex": [(lambda z: wnp.select([np.array([True, False, False])], [z], default=2.0 * z),
                        (C(3),))],
    "meshgrid complex": [(lambda a, b: wnp.meshgrid(a, b)[0] * wnp.meshgrid(a, b)[1], (C(2), C(3)))],
    "average complex weights": [(lambda z, w: wnp.average(z, weights=w), (C(3), C(3)))],
})
