"""Checkpointing schedules as data (CTZ and Griewank's binomial schedule), and their statistics.

The public face of :mod:`wengert.api.checkpointing.schedules`; ``wg.checkpoint``, ``wg.iterate`` and
``source_grad(f, checkpoint=...)`` execute these schedules. Every checkpointing code path is listed
in ``wengert.api.checkpointing``'s docstring.
"""

from wengert.api.checkpointing.schedules import (  # noqa: F401 - re-exported
    Action,
    Schedule,
    Stats,
    binomial,
    ctz,
    ctz_reverse_sweep,
    default_snapshots,
    render,
)

__all__ = ["Action", "Schedule", "binomial", "ctz", "ctz_reverse_sweep", "Stats"]
