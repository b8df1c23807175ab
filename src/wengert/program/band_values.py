"""The values of ``bands``: a banded array (:class:`Band`, its diagonals, :class:`Terms`), how a constant is
recognised as one (``banded_constant``), and the dense array made from one at run time (``assemble``,
``banded_dense``: the statement that ends a diagonalized program, with its check of the factors and
its fallback to the dense program).

Contract: ``assemble(shape, r, c, diags)`` is the array whose elements on the diagonals
``i_r - i_c = k`` are ``diags[k]``'s and whose others are 0; ``banded_constant(a)`` is a Band that
assembles back to ``a``, or None.
"""

import math

import numpy as np

from wengert.core.primitive import Primitive
from wengert.program.band_kernel import native_kernel
from wengert.program.ir import Variable
from wengert.program.passes import eliminate_dead_code

__all__ = ["Band", "Terms", "banded_constant", "assemble", "banded_dense", "Assembly", "MIN_SIZE",
           "MAX_OFFSETS"]

MIN_SIZE = 64
"""A constant smaller than this is left dense (its diagonals would cost about as much)."""

MAX_OFFSETS = 8
"""A constant with nonzeros on more diagonals than this is left dense."""

_F64 = np.dtype(np.float64)
_add_reduce = np.add.reduce


class Band:
    """An array of ``shape`` that is zero but where ``i_r - i_c`` is one of ``diags``' offsets; the
    diagonal of offset ``k`` is an array (a Variable or a constant) broadcastable to the shape
    without axis ``r``, holding at index ``j`` of axis ``c`` the element at ``i_r = j + k``. Only
    the columns where ``0 <= j + k < shape[r]`` are read (``valid``); the others hold anything."""

    __slots__ = ("shape", "r", "c", "diags")

    def __init__(self, shape, r, c, diags):
        self.shape, self.r, self.c = tuple(shape), r, c
        self.diags = dict(sorted(diags.items()))

    @property
    def sub(self):
        """The diagonals' shape: ``shape`` without axis ``r``."""
        return self.shape[:self.r] + self.shape[self.r + 1:]

    @property
    def c_sub(self):
        """Axis ``c`` among the diagonals' axes."""
        return self.c if self.c < self.r else self.c - 1

    def valid(self, k):
        """``(lo, hi)``: the columns where the diagonal of offset ``k`` lies inside the array."""
        return max(0, -k), min(self.shape[self.c], self.shape[self.r] - k)


class Terms(tuple):
    """A diagonal that is a sum of terms ``(start, stop, operand)``, added in order: ``operand`` on the
    columns ``[start, stop)`` of axis ``c`` (its axis ``c`` that long, or 1), zero on the others. What
    ``untake`` makes of a diagonal, kept so until the dense array is assembled (no zeros padded)."""

    __slots__ = ()


def shape_of(x):
    return x.shape if type(x) is Variable or isinstance(x, np.ndarray) else ()


def banded_constant(a):
    """The :class:`Band` of constant ``a`` (see the module's contract), or None."""
    if not isinstance(a, np.ndarray) or a.dtype != _F64 or a.ndim < 2 or a.size < MIN_SIZE:
        return None
    if not np.isfinite(a).all():
        return None
    nonzero = np.nonzero(a)
    if nonzero[0].size == 0 or nonzero[0].size * 4 > a.size:
        return None
    axes = [d for d in range(a.ndim) if a.shape[d] > 1]
    for r in axes:
        for c in axes:
            if r == c:
                continue
            offsets = np.unique(nonzero[r] - nonzero[c])
            if offsets.size > MAX_OFFSETS:
                continue
            band = Band(a.shape, r, c, {})
            moved = np.moveaxis(a, (r, c), (-2, -1))
            diags = {}
            for k in offsets.tolist():
                lo, hi = band.valid(k)
                d = np.zeros(moved.shape[:-2] + (a.shape[c],))
                d[..., lo:hi] = moved[..., np.arange(lo + k, hi + k), np.arange(lo, hi)]
                d = np.moveaxis(d, -1, band.c_sub)
                values = np.moveaxis(d, band.c_sub, -1)[..., lo:hi]
                first = values.flat[0]
                diags[k] = float(first) if (values == first).all() else np.ascontiguousarray(d)
            return Band(a.shape, r, c, diags)
    return None


def assemble(shape, r, c, diags):
    """The dense array of ``Band(shape, r, c, diags)`` (by offset: an array broadcastable to the
    diagonal's shape, or :class:`Terms`): zeros, the diagonals written in."""
    out = np.zeros(shape)
    band = Band(shape, r, c, {})
    moved = np.moveaxis(out, (r, c), (-2, -1))  # a view: writing it writes out
    sub = band.sub
    for k, d in diags.items():
        lo, hi = band.valid(k)
        terms = d if type(d) is Terms else ((0, shape[c], d),)
        for start, stop, value in terms:
            a, b = max(start, lo), min(stop, hi)
            if a >= b:
                continue
            cs = band.c_sub
            value = np.broadcast_to(value, sub[:cs] + (stop - start,) + sub[cs + 1:])
            value = np.moveaxis(value, cs, -1)[..., a - start:b - start]
            moved[..., np.arange(a + k, b + k), np.arange(a, b)] += value  # onto +0.0, as the dense sum
    return out


def banded_dense(program, out_var, band, n_muls, n_divs):
    """The primitive that assembles ``band`` from its diagonals (the Variables among them, in order,
    are its first arguments; constants are kept here), or, where a value checked is not finite
    (arguments after those: ``n_muls`` factors, then ``n_divs`` divisors, which must not be 0 either),
    runs ``program`` for ``out_var`` on the program's inputs (the last arguments). Its implementation
    is :meth:`Assembly.banded_dense`, which brings its own Numba version (:meth:`Assembly.numba_kernel`)."""
    return Primitive(Assembly(program, out_var, band, n_muls, n_divs).banded_dense, name="banded_dense")


class Assembly:
    """One ``banded_dense`` statement: the band's terms, its plan of writes, the dense program."""

    def __init__(self, program, out_var, band, n_muls, n_divs):
        shape, r, c = band.shape, band.r, band.c
        self.program, self.out_var, self.shape, self.r, self.c = program, out_var, shape, r, c
        at = 0
        terms = {}  # offset -> [(start, stop, position among the arguments or None, constant)]
        diag_vars = []
        for k, d in band.diags.items():
            terms[k] = []
            for start, stop, value in (d if type(d) is Terms else ((0, shape[c], d),)):
                if type(value) is Variable:
                    terms[k].append((start, stop, at, value))
                    diag_vars.append(value)
                    at += 1
                else:
                    terms[k].append((start, stop, None, value))
        self.terms, self.diag_vars = terms, diag_vars
        self.n_diag, self.n_muls, self.n_divs = at, n_muls, n_divs
        # 2-d: every write in order, (flat window, first, argument position, its columns, or the constant)
        writes = [] if len(shape) == 2 else None
        strides = (shape[-1], 1)  # of a C-ordered 2-d array, in elements
        for k, ts in terms.items() if writes is not None else ():
            lo, hi = band.valid(k)
            for n, (start, stop, ref, value) in enumerate(ts):
                a, b = max(start, lo), min(stop, hi)
                if a >= b:
                    continue
                flat_start = (a + k) * strides[r] + a * strides[c]
                step = strides[r] + strides[c]
                window = slice(flat_start, flat_start + step * (b - a - 1) + 1, step)
                if ref is None:
                    value = np.broadcast_to(value, (stop - start,))[a - start:b - start]
                    writes.append((window, n == 0, None, None, value))
                else:
                    whole = (a, b) == (start, stop) or value.shape[-1] == 1  # no columns to cut off
                    writes.append((window, n == 0, ref, None if whole else slice(a - start, b - start), None))
        self.writes = writes
        self.base = np.zeros(shape)  # the constant first terms, written in once
        self.plan = None if writes is None else []
        for w in writes or ():
            window, first, ref, _, value = w
            if ref is None and first:
                self.base.reshape(-1)[window] += value  # onto +0.0: a -0.0 term gives +0.0, as the dense sum
            else:
                self.plan.append(w)
        self.blank = not self.base.any()
        self.dense = None  # the dense program, made at the first need
        self.native = None  # the Numba version: (module, function, leading arguments), or why none

    def dense_program(self):
        """``program`` for ``out_var`` alone: what runs where a value checked is not finite."""
        if self.dense is None:
            p = self.program
            self.dense = eliminate_dead_code(p.with_statements(p.statements, [self.out_var]))
        return self.dense

    def banded_dense(self, *args):
        """The dense array (see :func:`banded_dense`)."""
        n_diag, n_checks = self.n_diag, self.n_muls + self.n_divs
        checks = args[n_diag:n_diag + n_checks]
        total = 0.0  # inf or nan where an element is, or where the sum overflows
        for b in checks:
            total += _add_reduce(b, None)
        ok = math.isfinite(total) or all(np.isfinite(b).all() for b in checks)  # every element finite
        if self.n_divs:
            for b in args[n_diag + self.n_muls:n_diag + n_checks]:
                if not np.asarray(b).all():
                    ok = False
        if not ok:
            return self.dense_program().function(*args[n_diag + n_checks:])
        shape = self.shape
        if self.plan is None:
            return assemble(shape, self.r, self.c,
                            {k: Terms((start, stop, args[ref] if ref is not None else value)
                                      for start, stop, ref, value in ts) for k, ts in self.terms.items()})
        out = np.zeros(shape) if self.blank else self.base.copy()
        flat = out.reshape(-1)
        for window, _first, ref, columns, value in self.plan:
            if ref is not None:
                value = args[ref] if columns is None else args[ref][columns]
            flat[window] += value  # every term added onto +0.0 (a -0.0 term gives +0.0, as the dense sum)
        return out

    def numba_kernel(self, implementation):
        """What builds the Numba version of :meth:`banded_dense` (``native_build`` asks, and calls it with
        its ``native_function`` and a function importing a module's text): ``native_bands``."""
        return self.build_native

    def build_native(self, native_function, import_text):
        """``(module name, function name, leading arguments)`` of the Numba version, or why none."""
        if self.native is None:
            self.native = native_kernel(self, native_function, import_text)
        return self.native
