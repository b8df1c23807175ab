"""Random inputs for the systematic rule-table test, shared by ``tests/rules/test_rule_table.py`` and the
``tests/rules/cases/`` modules that hold the cases of further op families."""

import numpy as np

rng = np.random.default_rng(42)


def R(*shape, lo=-1.0, hi=1.0):
    """Random float64 array (a Python float for shape ()) uniform in [lo, hi)."""
    if shape == ():
        return float(rng.uniform(lo, hi))
    return rng.uniform(lo, hi, size=shape)


def away(*shape, gap=0.1):
    """Random values away from 0 and from integers (where piecewise functions jump)."""
    x = R(*shape, lo=-3, hi=3)
    frac = np.asarray(x) - np.floor(x)
    x = np.where(frac < gap, x + 2 * gap, np.where(frac > 1 - gap, x - 2 * gap, x))
    return float(x) if shape == () else x


UNARY_SHAPES = [(), (3,), (2, 3)]
BINARY_SHAPES = [((), ()), ((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 2)), ((4,), ())]


def unary(f, lo=-1.0, hi=1.0, make=None):
    return [(f, (make(*s) if make else R(*s, lo=lo, hi=hi),)) for s in UNARY_SHAPES]


def binary(f, lo=-1.0, hi=1.0, lo2=None, hi2=None):
    lo2 = lo if lo2 is None else lo2
    hi2 = hi if hi2 is None else hi2
    return [(f, (R(*a, lo=lo, hi=hi), R(*b, lo=lo2, hi=hi2))) for a, b in BINARY_SHAPES]


def distinct_pair(sa, sb):
    """Two arrays that are nowhere equal (max/min have a kink at ties)."""
    a = R(*sa)
    b = np.asarray(a) + np.where(rng.random(np.broadcast_shapes(np.shape(a), sb)) < 0.5, -0.5, 0.5)
    b = b[(0,) * (b.ndim - len(sb))] if b.ndim > len(sb) else b
    b = np.broadcast_to(b, sb).copy() if sb else float(np.ravel(b)[0])
    return a, b
