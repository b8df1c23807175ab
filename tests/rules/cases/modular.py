"""Rule-table cases for modular arithmetic (``wengert.rules.modular``): ``remainder`` and ``fmod``,
at points where x / y is at least 0.09 away from an integer (both jump there)."""

import numpy as np

from tests.support.rule_helpers import BINARY_SHAPES, R, rng
from wengert.rules import modular


def _away_from_jumps(sa, sb):
    """x of either sign with |x| in [2.2, 2.8], y of either sign with |y| in [0.95, 1.05]:
    |x / y| then lies in [2.09, 2.95], never within 0.09 of an integer."""
    x = R(*sa, lo=2.2, hi=2.8) * np.where(rng.random(sa) < 0.5, -1.0, 1.0)
    y = R(*sb, lo=0.95, hi=1.05) * np.where(rng.random(sb) < 0.5, -1.0, 1.0)
    return (float(x) if sa == () else x), (float(y) if sb == () else y)


CASES = {
    "remainder": [(modular.remainder, _away_from_jumps(a, b)) for a, b in BINARY_SHAPES]
    + [(lambda y: modular.remainder(2.5, y), (np.array([0.7, -0.9, 1.3]),))],
    "fmod": [(modular.fmod, _away_from_jumps(a, b)) for a, b in BINARY_SHAPES],
}
