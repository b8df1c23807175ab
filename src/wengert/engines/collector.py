"""Cyclic garbage while a trace grows: young garbage collected where it pays.

While a derivative is recorded the collector is paused (``wengert.core.trace.gc_paused``): the graph
is freed by reference counting, and rescanning its nodes would cost more than recording them. But the
user's function may make cyclic garbage meanwhile, which would pile up until the call ends. So when a
reverse-mode trace starts inside a pause (:func:`trace_started`), the pause turns the young
generation's collections back on, one per :data:`WINDOW` objects the collector tracks (the older
generations' stay off), and :func:`_vet`, called by Python as each begins, either lets it run --
every object made since the last one is scanned once -- or first freezes those objects
(``gc.freeze``: never scanned during the pause; its end unfreezes them), which leaves it nothing to
do. A collection that finds garbage makes the next one run too; one that finds none doubles the
collections skipped before the next (up to :data:`MAX_SKIP`): a program that makes no cyclic garbage
pays for one scan in that many, one that does has it collected every window, and nothing is done per
recorded operation. Not where the collector was off, or the program froze objects itself.
"""

import gc

from wengert.core.trace import GC_LOCK, GC_PAUSES

__all__ = ["WINDOW", "MAX_SKIP", "trace_started"]

WINDOW = 50_000
"""Tracked objects made between two looks (the young generation's threshold during a pause)."""

MAX_SKIP = 16
"""The most windows skipped between two collections while none finds garbage."""

_schedule = [0, 1]  # [windows since the last collection, windows between collections]


def trace_started():
    """A trace starts: inside a pause of a collector that was on, run vetted young collections."""
    if GC_PAUSES[0] and GC_PAUSES[1] and GC_PAUSES[2] is None:
        with GC_LOCK:
            if GC_PAUSES[0] and GC_PAUSES[1] and GC_PAUSES[2] is None and gc.get_freeze_count() == 0:
                GC_PAUSES[2] = gc.get_threshold()
                gc.set_threshold(WINDOW, 1 << 30, 1 << 30)
                gc.enable()


def _vet(phase, info):
    """``gc.callbacks`` entry: inside a pause, let a young collection run when due, else freeze first."""
    if GC_PAUSES[2] is None or not GC_PAUSES[0] or info["generation"] != 0:
        return
    schedule = _schedule
    if phase == "start":
        schedule[0] += 1
        if schedule[0] < schedule[1]:
            gc.freeze()  # the collection about to run finds nothing to scan
    elif schedule[0] >= schedule[1]:  # "stop" of a collection that ran
        schedule[0] = 0
        found = info["collected"] + info["uncollectable"]
        schedule[1] = 1 if found else min(2 * schedule[1], MAX_SKIP)


gc.callbacks.append(_vet)
