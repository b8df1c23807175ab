"""Rule-table cases for the wengert.numpy functions that the classification calls differentiable
and that no other case file reaches by name: NumPy 2's additions, constructors with traced
arguments, splits, copies and casts (``tests/numpy/test_classification.py`` requires one per name)."""

import numpy as np

import wengert.numpy as wnp
from tests.support.rule_helpers import R

COMPOSED = {
    "divmod": [(lambda x, y: wnp.divmod(x, y)[1] * wnp.divmod(x, y)[0], (R(3, lo=2.2, hi=2.8), 1.0))],
    "angle": [(wnp.angle, (np.array([0.3 + 0.4j, -1.0 + 0.2j]),)), (wnp.angle, (R(3) + 2.0,))],
    "matvec": [(wnp.matvec, (R(2, 3), R(3))), (wnp.matvec, (R(4, 2, 3), R(4, 3)))],
    "vecmat": [(wnp.vecmat, (R(3), R(3, 2))), (wnp.vecmat, (R(2, 3), R(2, 3, 4)))],
    "vecdot": [(wnp.vecdot, (R(2, 3), R(3))), (lambda a, b: wnp.vecdot(a, b, axis=0), (R(3, 2), R(3, 2)))],
    "rollaxis": [(lambda x: wnp.rollaxis(x, 2), (R(2, 3, 4),)),
                 (lambda x: wnp.rollaxis(x, 0, 2), (R(2, 3, 4),))],
    "broadcast_arrays": [(lambda a, b: wnp.broadcast_arrays(a, b)[0] * wnp.broadcast_arrays(a, b)[1],
                          (R(2, 1), R(3)))],
    "unstack": [(lambda x: wnp.unstack(x, axis=1)[2], (R(2, 3),))],
    "array_split": [(lambda x: wnp.array_split(x, 3, axis=1)[0], (R(2, 4),))],
    "hsplit": [(lambda x: wnp.hsplit(x, 2)[1], (R(2, 4),)), (lambda x: wnp.hsplit(x, [1])[0], (R(3),))],
    "vsplit": [(lambda x: wnp.vsplit(x, 2)[1], (R(4, 2),))],
    "dsplit": [(lambda x: wnp.dsplit(x, [1])[1], (R(2, 2, 3),))],
    "fliplr": [(wnp.fliplr, (R(2, 3),))],
    "flipud": [(wnp.flipud, (R(3, 2),))],
    "asarray": [(lambda x, y: wnp.asarray([x, y]), (R(), R())), (wnp.asarray, (R(2),))],
    "ascontiguousarray": [(wnp.ascontiguousarray, (R(2, 3),)), (wnp.ascontiguousarray, (R(),)),
                          (lambda x: wnp.ascontiguousarray(x.T), (R(2, 3),))],
    "asfortranarray": [(wnp.asfortranarray, (R(2, 3),)), (lambda x: wnp.asfortranarray(x.T), (R(2, 3),))],
    "copy": [(wnp.copy, (R(2, 3),))],
    "full": [(lambda v: wnp.full((2, 3), v), (R(),)), (lambda v: wnp.full(3, v), (R(1),))],
    "linspace": [(lambda a, b: wnp.linspace(a, b, 5), (R(), R())),
                 (lambda a, b: wnp.linspace(a, b, 4, endpoint=False, axis=1), (R(2), R(2)))],
    "logspace": [(lambda a, b: wnp.logspace(a, b, 4, base=2.0), (R(), R()))],
    "fft.fftfreq": [(lambda d: wnp.fft.fftfreq(5, d), (R(lo=0.5, hi=1.5),))],
    "fft.rfftfreq": [(lambda d: wnp.fft.rfftfreq(6, d), (R(lo=0.5, hi=1.5),))],
    "linalg.eigvalsh": [(lambda a: wnp.linalg.eigvalsh(a + a.T), (R(3, 3),))],
    "linalg.svdvals": [(wnp.linalg.svdvals, (R(3, 2),))],
    "matrix_transpose": [(wnp.matrix_transpose, (R(2, 3),))],
    "linalg.matrix_transpose": [(wnp.linalg.matrix_transpose, (R(2, 3, 4),))],
}
