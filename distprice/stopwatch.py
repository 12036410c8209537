"""Seconds a job spends in named stages deep in its calls (the dated rows' schedules, the engines' layout),
summed over every thread, for whoever watches (:func:`watching`): the stage table of
:func:`distprice.timing.job_stages`. Nobody watching, a stage costs nothing."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager, nullcontext


class Stopwatch:
    """Seconds spent in each named stage, summed over every thread that runs one while it is :func:`watching`."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()

    @contextmanager
    def stage(self, name: str):
        tick = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - tick


_WATCHING: list[Stopwatch] = []


@contextmanager
def watching(stopwatch: Stopwatch):
    """Every :func:`stage` in this process reports to ``stopwatch`` meanwhile."""
    _WATCHING.append(stopwatch)
    try:
        yield stopwatch
    finally:
        _WATCHING.remove(stopwatch)


def stage(name: str):
    """A block timed as stage ``name`` for the stopwatch watching (none: not timed)."""
    return _WATCHING[-1].stage(name) if _WATCHING else nullcontext()
