"""Systematic-test cases for the fft family (``wengert.rules.fft``) and ``wengert.numpy.fft``.

Every transform is checked on real and complex inputs, odd and even lengths, with cropping and
zero-padding (``n``/``s``), on more than one axis and with each ``norm``. Complex inputs and
outputs are checked through their real and imaginary parts (``tests.support.complex_helpers.realified``)."""

import numpy as np

import wengert.numpy.fft as wfft
from tests.support.complex_helpers import realified_cases
from tests.support.rule_helpers import R
from wengert.rules import fft

rng = np.random.default_rng(7)


def C(*shape):
    """Random complex array."""
    return R(*shape) + 1j * R(*shape)


CASES_COMPLEX = {
    "fft.c2c": [
        (lambda x: fft.c2c(x, (0,), None, True), (R(5),)),
        (lambda x: fft.c2c(x, (1,), "ortho", False), (C(2, 4),)),
        (lambda x: fft.c2c(x, (0, 2), "forward", True), (C(3, 2, 4),)),
        (lambda x: fft.c2c(x, (0, 1), "backward", False), (R(3, 3),)),
    ],
    "fft.r2c": [
        (lambda x: fft.r2c(x, (0,), None), (R(6),)),
        (lambda x: fft.r2c(x, (0,), "ortho"), (R(7),)),
        (lambda x: fft.r2c(x, (1, 0), "forward"), (R(4, 5),)),
        (lambda x: fft.r2c(x, (2,), None), (R(2, 3, 1),)),
    ],
    "fft.c2r": [
        (lambda y: fft.c2r(y, 8, (0,), None), (C(5),)),
        (lambda y: fft.c2r(y, 7, (0,), "ortho"), (C(4),)),
        (lambda y: fft.c2r(y, 6, (0, 1), "forward"), (C(3, 4),)),
        (lambda y: fft.c2r(y, 1, (0,), None), (C(1),)),
        (lambda y: fft.c2r(y, 2, (-1,), None), (R(3, 2),)),
    ],
    "fft.fftshift": [
        (lambda x: fft.fftshift(x, (0,)), (R(5),)),
        (lambda x: fft.fftshift(x, (0, 1)), (C(3, 4),)),
    ],
    "fft.ifftshift": [
        (lambda x: fft.ifftshift(x, (1,)), (R(2, 5),)),
        (lambda x: fft.ifftshift(x, (0, 1)), (C(4, 3),)),
    ],
}

COMPOSED_COMPLEX = {
    "fft.fft": [(wfft.fft, (R(5),)), (lambda x: wfft.fft(x, n=7, axis=0), (C(4, 2),)),
                (lambda x: wfft.fft(x, n=3, norm="ortho"), (R(2, 6),))],
    "fft.ifft": [(wfft.ifft, (C(6),)), (lambda x: wfft.ifft(x, n=4, norm="forward"), (R(7),))],
    "fft.fft2": [(wfft.fft2, (R(3, 4),)), (lambda x: wfft.fft2(x, s=(2, 5)), (C(2, 3, 4),))],
    "fft.ifft2": [(lambda x: wfft.ifft2(x, axes=(0, 2)), (C(3, 2, 4),))],
    "fft.fftn": [(wfft.fftn, (R(2, 3, 2),)), (lambda x: wfft.fftn(x, s=(4, 2), axes=(1, 0)), (C(3, 3),))],
    "fft.ifftn": [(lambda x: wfft.ifftn(x, norm="ortho"), (C(3, 4),))],
    "fft.rfft": [(wfft.rfft, (R(8),)), (wfft.rfft, (R(7),)),
                 (lambda x: wfft.rfft(x, n=5, axis=0), (R(3, 2),)),
                 (lambda x: wfft.rfft(x, n=10, norm="ortho"), (R(2, 6),))],
    "fft.irfft": [(wfft.irfft, (C(5),)), (lambda y: wfft.irfft(y, n=7), (C(4),)),
                  (lambda y: wfft.irfft(y, n=4, axis=0, norm="forward"), (C(6, 2),)),
                  (lambda y: wfft.irfft(y, n=9), (C(3),)), (wfft.irfft, (R(4),))],
    "fft.rfft2": [(wfft.rfft2, (R(3, 4),)), (lambda x: wfft.rfft2(x, s=(4, 3)), (R(2, 5),))],
    "fft.irfft2": [(wfft.irfft2, (C(3, 3),)), (lambda y: wfft.irfft2(y, s=(4, 5), norm="ortho"), (C(2, 3),))],
    "fft.rfftn": [(wfft.rfftn, (R(2, 3, 4),)), (lambda x: wfft.rfftn(x, axes=(0,)), (R(5, 2),))],
    "fft.irfftn": [(wfft.irfftn, (C(2, 2, 3),)), (lambda y: wfft.irfftn(y, s=(3, 5), axes=(1, 0)),
                   (C(4, 2),))],
    "fft.fftshift": [(wfft.fftshift, (R(3, 4),)), (lambda x: wfft.fftshift(x, axes=-1), (C(2, 5),))],
    "fft.ifftshift": [(wfft.ifftshift, (R(5, 2),))],
    "fft.roundtrip": [(lambda x: wfft.irfft(wfft.rfft(x) * np.arange(4.0), n=7), (R(7),)),
                      (lambda x: wfft.ifft(wfft.fft(x)), (R(6),))],
}

CASES = {name: realified_cases(cases) for name, cases in CASES_COMPLEX.items()}
COMPOSED = {name: realified_cases(cases) for name, cases in COMPOSED_COMPLEX.items()}
