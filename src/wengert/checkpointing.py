"""Checkpointing schedules as data (CTZ and Griewank's binomial schedule), and their statistics.

The public face of :mod:`wengert.api.checkpointing.schedules`; ``wg.checkpoint`` and ``wg.iterate``
execute these schedules.
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
