"""Checkpointing, in one package: schedules as data (``schedules``), reversing a loop or a call by
recomputation (``recompute``), and the transforms ``wg.checkpoint`` and ``wg.iterate``
(``transforms``); a loop's step run as a traced program (``fast``)."""
