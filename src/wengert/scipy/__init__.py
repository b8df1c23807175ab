"""wengert.scipy: SciPy's names and signatures, differentiable by every wengert engine.

``special``, ``stats``, ``linalg``, ``signal`` and ``integrate`` mirror their ``scipy`` namesakes for
the functions listed in each module's ``__all__``. SciPy is an optional dependency of wengert:
install it with ``pip install scipy``, or ``pip install ".[scipy]"`` in a clone of wengert.
"""

try:
    import scipy as _scipy  # noqa: F401 - only to say clearly what is missing
except ModuleNotFoundError as _error:
    raise ImportError(
        "wengert.scipy needs SciPy, which is not installed. Install it with "
        "`pip install scipy` (or `pip install \".[scipy]\"` in a clone of wengert); the rest of wengert "
        "works without it."
    ) from _error

from wengert.scipy import integrate, linalg, signal, special, stats

__all__ = ["special", "stats", "linalg", "signal", "integrate"]
