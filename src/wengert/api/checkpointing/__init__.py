"""Checkpointing, in one package: schedules as data (``schedules``), reversing a loop or a call by
recomputation (``recompute``), and the transforms ``wg.checkpoint`` and ``wg.iterate``
(``transforms``)."""
