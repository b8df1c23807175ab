"""Banded structure: a batched derivative program computed on its diagonals, the dense array made once.

``wg.hessian`` and ``wg.jacfwd``/``jacrev`` trace a ``vmap`` over basis vectors: the program
multiplies, shifts and adds arrays such as the identity, a shifted identity or a one-hot row set,
whose nonzeros lie on a few diagonals of two of their axes. Such an array is full of zeros that
every statement computes again: ten 100 x 99 operations where the Hessian has three diagonals.

Contract. ``diagonalize(program)`` recognises those constants (a float64 array of at least
``band_values.MIN_SIZE`` elements, nonzeros on at most ``band_values.MAX_OFFSETS`` diagonals ``i_r - i_c = k``
of one pair of axes ``(r, c)``) and follows the values made from them (a :class:`Band`: shape, the
axes, a diagonal per offset) through the statements that keep the structure: ``*`` and ``/`` by a
value constant along ``r``, ``+``/``-`` of two such values, ``-x``, slicing with step 1, ``untake``
of such slices (kept as terms placed on other columns, ``band_values.Terms``, added in order when the
array is assembled), reshapes that insert or drop axes of length 1, and transposes. Each diagonal is
computed by the same floating-point operations as the element of the dense program it stands for,
so the values are the dense program's, but for the sign of a zero off the diagonals and, where the
dense program's own evaluation order differs (a reciprocal's diagonal), the last bit. A result of
the program that is such a value is assembled once, by one statement (``banded_dense``) that writes
its diagonals into zeros.

The dense program's zeros off the diagonals are ``0 * b`` and ``0 / b``, which are nan where ``b`` is
inf or nan (or 0, dividing): the values multiplied or divided into a banded one are checked at the
end, and where one is not finite (or a divisor is 0), the assembling statement runs the original
dense program instead: the same values as without this pass, nan included, at its cost.

Where a banded value reaches a statement of another kind (a product of two, a sum with a dense
value, a reduction, fancy indexing, a reshape that splits an axis), its dense array is assembled
there (the same statement, checks and fallback as for a result) and the statement reads that.
"""

import numpy as np

from wengert.program.band_values import Band, Terms, banded_constant, banded_dense
from wengert.program.band_values import shape_of as _shape
from wengert.program.ir import Statement, Variable
from wengert.program.passes import eliminate_dead_code
from wengert.rules.broadcasting import reshape
from wengert.rules.elementwise import add, multiply, negative, subtract, true_divide
from wengert.rules.indexing import getitem, untake
from wengert.rules.shape import transpose

__all__ = ["diagonalize"]

_F64 = np.dtype(np.float64)
_MUL, _ADD, _SUB, _DIV = multiply.primitive, add.primitive, subtract.primitive, true_divide.primitive
_NEG, _GETITEM = negative.primitive, getitem.primitive


class _Unsupported(Exception):
    """A banded value met a statement that does not keep the structure: the program stays as it is."""


class _Diagonalizer:
    """One sweep over a program's statements, keeping a :class:`Band` per banded Variable."""

    def __init__(self, program):
        self.program = program
        self.bands = {}  # Variable -> Band
        self.constants = {}  # id(array) -> Band or None
        self.statements = []
        self.muls, self.divs = [], []  # Variables multiplied, divided into banded values
        self.negations = {}  # Variable -> the Variable it is the negation of (finite where that one is)
        self.assembled = {}  # banded Variable -> the Variable of its dense array
        self.names = None  # the names in use, gathered when the first new Variable is made
        self.count = 0

    # -- emitting ----------------------------------------------------------------------------------
    def fresh(self, base, shape):
        if self.names is None:
            program = self.program
            self.names = {v.name for v in program.inputs}
            self.names.update(o.name for s in program.statements for o in s.outs)
        while True:
            self.count += 1
            name = f"{base}_b{self.count}"
            if name not in self.names:
                self.names.add(name)
                return Variable(name, shape, _F64, "array")

    def apply(self, prim, args, shape, base):
        """``prim(*args)``: computed now where every argument is a constant, else a new statement."""
        if not any(type(a) is Variable for a in args):
            return _compact(prim.fun(*args))
        if shape == ():
            raise _Unsupported(prim)  # a diagonal of one number: a Python float or a NumPy scalar at run time
        out = self.fresh(base, shape)
        self.statements.append(Statement((out,), prim, args))
        return out

    def binary(self, prim, x, y, base):
        if prim is _MUL and type(x) is float and x == 1.0 and _shape(y) != ():
            return y  # 1.0 * y is y, bit for bit (float64 only here)
        if prim is _MUL and type(y) is float and y == 1.0 and _shape(x) != ():
            return x
        return self.apply(prim, (x, y), np.broadcast_shapes(_shape(x), _shape(y)), base)

    def full_rank(self, d, ndim, base):
        """Diagonal ``d`` with ``ndim`` axes (length-1 axes put in front), a float left as it is."""
        if type(d) is float or len(_shape(d)) == ndim:
            return d
        shape = (1,) * (ndim - len(_shape(d))) + _shape(d)
        return self.apply(reshape, (d, shape), shape, base)

    def each(self, d, fn):
        """``fn`` applied to diagonal ``d``, or to each of its terms' operands."""
        if type(d) is Terms:
            return Terms((start, stop, fn(value)) for start, stop, value in d)
        return fn(d)

    def materialize(self, d, band, base):
        """Diagonal ``d`` of ``band`` as one operand: :class:`Terms` added up (``untake`` of each)."""
        if type(d) is not Terms:
            return d
        sub, c_sub = band.sub, band.c_sub
        total = None
        for start, stop, value in d:
            if (start, stop) == (0, band.shape[band.c]):
                placed = value
            else:
                idx = tuple(slice(start, stop) if a == c_sub else slice(None) for a in range(len(sub)))
                placed = self.apply(untake, (value, idx, sub), sub, base)
            total = placed if total is None else self.binary(_ADD, total, placed, base)
        return total

    def plain(self, band, base):
        """``band`` with every diagonal one operand."""
        if not any(type(d) is Terms for d in band.diags.values()):
            return band
        return Band(band.shape, band.r, band.c,
                    {k: self.materialize(d, band, base) for k, d in band.diags.items()})

    def negated(self, d, base):
        """``-d``, term by term."""
        return self.each(d, lambda v: self.apply(_NEG, (v,), _shape(v), base))

    def check(self, value, divisor):
        """Record Variable ``value``, multiplied (``divisor``: divided) into a banded value, for the
        check of the result."""
        value = self.negations.get(value, value) if not divisor else value
        checks = self.divs if divisor else self.muls
        if not any(v is value for v in checks):
            checks.append(value)

    # -- the sweep ---------------------------------------------------------------------------------
    def band_of(self, x):
        if type(x) is Variable:
            return self.bands.get(x)
        if isinstance(x, np.ndarray):
            key = id(x)
            if key not in self.constants:
                self.constants[key] = (x, banded_constant(x))
            return self.constants[key][1]
        return None

    def run(self):
        for s in self.program.statements:
            if s.prim is _NEG and type(s.args[0]) is Variable:
                self.negations[s.out] = self.negations.get(s.args[0], s.args[0])
            if s.prim in _BINARY:
                bands = [self.band_of(a) for a in s.args]
            else:
                bands = [self.bands.get(a) if type(a) is Variable else None for a in s.args]
            banded_vars = [a for a, b in zip(s.args, bands) if b is not None and type(a) is Variable]
            # a banded value read inside an index or a keyword is not followed
            nested = bool(self.bands) and len(banded_vars) != sum(1 for v in s.uses() if v in self.bands)
            constant_band = s.prim in _BINARY and any(b is not None for b in bands)
            if not banded_vars and not nested and not constant_band:
                self.statements.append(s)
                continue
            band = None
            if not nested and len(s.outs) == 1 and s.out.dtype == _F64 and s.out.kind == "array":
                try:
                    band = self.transfer(s, bands)
                except _Unsupported:  # what it emitted is dead code
                    band = None
            if band is None:  # the statement as it was, reading the dense arrays of banded values
                if banded_vars or nested:
                    s = s.replaced(self.dense)
                self.statements.append(s)
                continue
            self.bands[s.out] = band
        return self.finish()

    def dense(self, v):
        """The dense array of Variable ``v`` (one statement, made once), or ``v`` where it is not banded."""
        band = self.bands.get(v)
        if band is None:
            return v
        made = self.assembled.get(v)
        if made is None:
            diag_vars = [d for diag in band.diags.values()
                         for _s, _e, d in (diag if type(diag) is Terms else ((0, 0, diag),))
                         if type(d) is Variable]
            prim = banded_dense(self.program, v, band, len(self.muls), len(self.divs))
            made = self.assembled[v] = self.fresh(v.name, band.shape)
            args = (*diag_vars, *self.muls, *self.divs, *self.program.inputs)
            self.statements.append(Statement((made,), prim, args))
        return made

    def transfer(self, s, bands):
        prim, args = s.prim, s.args
        base = s.out.name
        if prim in _BINARY and len(args) == 2 and not s.kwargs:
            return self.elementwise(prim, args, bands, s.out.shape, base)
        if s.kwargs or bands[0] is None or any(b is not None for b in bands[1:]):
            return None
        band = bands[0]
        if prim is _NEG:
            return Band(band.shape, band.r, band.c, {k: self.negated(d, base) for k, d in band.diags.items()})
        if prim is reshape:
            return self.reshaped(band, s.out.shape, base)
        if prim is transpose:
            n = len(band.shape)
            axes = args[1] if len(args) > 1 else None
            perm = tuple(range(n))[::-1] if axes is None else tuple(a % n for a in axes)
            return self.transposed(band, perm, base)
        if prim is _GETITEM:
            return self.sliced(self.plain(band, base), args[1], s.out.shape, base)
        if prim is untake:
            return self.untaken(band, args[1], tuple(args[2]), base)
        return None

    def elementwise(self, prim, args, bands, shape, base):
        x, y = args
        bx, by = bands
        if bx is not None and by is not None:
            if prim not in (_ADD, _SUB):
                return None
            bx, by = _aligned(bx, shape), _aligned(by, shape)
            if bx is None or by is None or (bx.r, bx.c) != (by.r, by.c):
                return None
            diags = {}
            n_c = shape[bx.c]

            def negated(d):
                return d if prim is _ADD else self.negated(d, base)

            for k in sorted(set(bx.diags) | set(by.diags)):
                dx, dy = bx.diags.get(k), by.diags.get(k)
                if dy is None:
                    diags[k] = dx
                elif dx is None:
                    diags[k] = negated(dy)
                elif type(dx) is not Terms and type(dy) is not Terms:
                    diags[k] = self.binary(prim, dx, dy, base)
                else:  # (x1 + x2 + ...) + y, added in that order at the end: y one term (else added up now)
                    if type(dy) is Terms and len(dy) > 1:
                        dy = self.materialize(dy, by, base)
                    left = dx if type(dx) is Terms else ((0, n_c, dx),)
                    right = dy if type(dy) is Terms else Terms(((0, n_c, dy),))
                    diags[k] = Terms(left + negated(right))
            return Band(shape, bx.r, bx.c, diags)
        if prim not in (_MUL, _DIV) or (prim is _DIV and by is not None):
            return None
        band = _aligned(bx if bx is not None else by, shape)
        band = None if band is None else self.plain(band, base)
        other = y if bx is not None else x
        if band is None or isinstance(other, bool) or (
                type(other) is not Variable and not isinstance(other, (int, float, np.ndarray, np.generic))):
            return None
        if type(other) is Variable and (other.dtype != _F64
                                        or other.kind not in ("array", "float", "scalar")):
            return None
        factor = self.along_r(other if type(other) is Variable else _compact(other), shape, band.r, base)
        if factor is None:
            return None
        if type(other) is not Variable:
            value = np.asarray(other)
            if value.dtype.kind not in "iuf" or not np.isfinite(value).all() \
                    or (prim is _DIV and not value.all()):
                return None
        else:
            self.check(other, prim is _DIV)
        diags = {}
        for k, d in band.diags.items():
            diags[k] = self.binary(prim, d, factor, base) if bx is not None \
                else self.binary(prim, factor, d, base)
        return Band(shape, band.r, band.c, diags)

    def along_r(self, b, shape, r, base):
        """Dense operand ``b`` as a factor of the diagonals (without axis ``r`` of the result of
        ``shape``), or None where it varies along that axis."""
        sb = _shape(b)
        pos = r - (len(shape) - len(sb))
        if pos < 0:
            return b
        if sb[pos] != 1:
            return None
        return self.apply(reshape, (b, sb[:pos] + sb[pos + 1:]), sb[:pos] + sb[pos + 1:], base)

    def reshaped(self, band, new, base):
        old = band.shape
        if [n for n in old if n != 1] != [n for n in new if n != 1]:
            return None
        old_axes = [d for d in range(len(old)) if old[d] != 1]
        new_axes = [d for d in range(len(new)) if new[d] != 1]
        where = dict(zip(old_axes, new_axes))  # an old axis of length > 1 -> its new place
        r, c = where[band.r], where[band.c]
        back = {n: o for o, n in where.items()}
        def moved(d):
            if type(d) is float:
                return d
            d = self.full_rank(d, len(band.sub), base)
            dshape = _shape(d)
            target = tuple(dshape[_sub_axis(back[a], band.r)] if a in back else 1
                           for a in range(len(new)) if a != r)
            return d if target == dshape else self.apply(reshape, (d, target), target, base)

        return Band(new, r, c, {k: self.each(d, moved) for k, d in band.diags.items()})

    def transposed(self, band, perm, base):
        r, c = perm.index(band.r), perm.index(band.c)
        sub_perm = tuple(_sub_axis(perm[a], band.r) for a in range(len(perm)) if a != r)
        def moved(d):
            if type(d) is float or sub_perm == tuple(range(len(sub_perm))):
                return d
            d = self.full_rank(d, len(band.sub), base)
            return self.apply(transpose, (d, sub_perm), tuple(_shape(d)[a] for a in sub_perm), base)

        shape = tuple(band.shape[a] for a in perm)
        return Band(shape, r, c, {k: self.each(d, moved) for k, d in band.diags.items()})

    def sliced(self, band, idx, new, base):
        spans = _spans(idx, band.shape)
        if spans is None:
            return None
        (ar, _), (ac, _) = spans[band.r], spans[band.c]
        sub_spans = spans[:band.r] + spans[band.r + 1:]
        result = Band(new, band.r, band.c, {})
        diags = {}
        for k, d in band.diags.items():
            k2 = k - ar + ac
            lo, hi = result.valid(k2)
            if lo >= hi:
                continue
            diags[k2] = self.cut(d, sub_spans, len(band.sub), base)
        if min(new[band.r], new[band.c]) < 2 or not diags:
            return None
        return Band(new, band.r, band.c, diags)

    def cut(self, d, spans, ndim, base):
        """Diagonal ``d`` sliced by ``spans`` (one ``(start, stop)`` per axis) where it is not broadcast."""
        if type(d) is float:
            return d
        d = self.full_rank(d, ndim, base)
        dshape = _shape(d)
        idx = tuple(slice(a, b) if dshape[i] > 1 and (a, b) != (0, dshape[i]) else slice(None)
                    for i, (a, b) in enumerate(spans))
        if all(p == slice(None) for p in idx):
            return d
        shape = tuple(len(range(dshape[i])[p]) for i, p in enumerate(idx))
        return self.apply(_GETITEM, (d, idx), shape, base)

    def untaken(self, band, idx, new, base):
        spans = _spans(idx, new)
        if spans is None or tuple(b - a for a, b in spans) != band.shape:
            return None
        (ar, _), (ac, _) = spans[band.r], spans[band.c]
        result = Band(new, band.r, band.c, {})
        sub_new, c_sub, ndim = result.sub, band.c_sub, len(band.sub)
        # placed along r and c only: each diagonal becomes terms at other columns, no zeros padded
        shifted = all(spans[a] == (0, new[a]) for a in range(len(new)) if a not in (band.r, band.c))
        if not shifted:
            band = self.plain(band, base)
        diags = {}
        for k, d in band.diags.items():
            lo, hi = band.valid(k)
            if lo >= hi:
                continue
            if shifted:
                terms = []
                for start, stop, value in (d if type(d) is Terms else ((0, band.shape[band.c], d),)):
                    a, b = max(start, lo), min(stop, hi)
                    if a >= b:
                        continue
                    value = self.full_rank(value, ndim, base)
                    if (a, b) != (start, stop) and _shape(value) and _shape(value)[c_sub] > 1:
                        cut = [(0, n) for n in _shape(value)]
                        cut[c_sub] = (a - start, b - start)
                        value = self.cut(value, cut, ndim, base)
                    terms.append((a + ac, b + ac, value))
                if terms:
                    diags[k + ar - ac] = Terms(terms)
                continue
            d = self.full_rank(d, ndim, base)
            if _shape(d) and _shape(d)[c_sub] > 1 and (lo, hi) != (0, band.shape[band.c]):
                sub_spans = [(0, n) for n in _shape(d)]
                sub_spans[c_sub] = (lo, hi)
                d = self.cut(d, sub_spans, ndim, base)
            placed = list(spans[:band.r] + spans[band.r + 1:])
            placed[c_sub] = (ac + lo, ac + hi)
            sub_idx = tuple(slice(a, b) for a, b in placed)
            diags[k + ar - ac] = self.apply(untake, (d, sub_idx, sub_new), sub_new, base)
        return Band(new, band.r, band.c, diags)

    # -- the results -------------------------------------------------------------------------------
    def finish(self):
        outputs = [self.dense(o) if type(o) is Variable else o for o in self.program.outputs]
        if not self.assembled:
            return self.program
        return eliminate_dead_code(self.program.with_statements(self.statements, outputs))


_BINARY = (_MUL, _ADD, _SUB, _DIV)


def _compact(value):
    """A constant as a diagonal: a float where every element is the same (it broadcasts as well)."""
    value = np.asarray(value)
    if value.dtype.kind in "iuf" and value.size and (value == value.flat[0]).all():
        return float(value.flat[0])
    return value


def _sub_axis(a, r):
    return a if a < r else a - 1


def _aligned(band, shape):
    """``band`` broadcast to ``shape`` (axes put in front), or None where its axes ``r``, ``c`` would be."""
    off = len(shape) - len(band.shape)
    if off < 0:
        return None
    r, c = band.r + off, band.c + off
    if shape[r] != band.shape[band.r] or shape[c] != band.shape[band.c]:
        return None
    return Band(shape, r, c, band.diags)


def _spans(idx, shape):
    """``(start, stop)`` per axis of an index of slices with step 1 into an array of ``shape``, or None."""
    parts = idx if type(idx) is tuple else (idx,)
    if len(parts) > len(shape) or any(type(p) is not slice for p in parts):
        return None
    if any(type(b) not in (int, type(None)) for p in parts for b in (p.start, p.stop, p.step)):
        return None  # a bound known only at run time
    spans = []
    for p, n in zip(parts + (slice(None),) * (len(shape) - len(parts)), shape):
        start, stop, step = p.indices(n)
        if step != 1 or stop < start:
            return None
        spans.append((start, stop))
    return spans


def diagonalize(program):
    """``program`` with its banded values computed on their diagonals (see the module's contract), or
    ``program`` itself where it has none."""
    primitives, arrays = program.census()
    if not arrays or not (primitives & set(_BINARY)):
        return program
    return _Diagonalizer(program).run()
