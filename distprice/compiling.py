"""numba's compilations, watched: the first in a process is said once on the log, with what compiles and that it
happens once, and their seconds are counted so that a job's pricing figures leave them out (:class:`Compiling`).

numba compiles a kernel on its first call with given argument types and keeps the machine code in its cache
(:func:`cache_place`): after an install, in a new container or with an empty cache, the kernels a job uses compile
once (seconds to a minute on a small machine); every later process loads them in a moment.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from numba.core import event

log = logging.getLogger(__name__)

_said = threading.Event()
"""Set once this process has said that numba compiles."""
ASIDE = "distprice:compiling-aside"
"""The event of this process waiting for another that compiles for it (:func:`waiting_aside`): counted as
compilation, as numba's own ``numba:compile``."""
_KINDS = ("numba:compile", ASIDE)


def waiting_aside():
    """A context in which this process waits for another compiling kernels it needs (counted by
    :class:`Compiling`)."""
    return event.trigger_event(ASIDE)


def cache_place() -> str:
    """Where numba keeps what it compiles: ``NUMBA_CACHE_DIR`` when set, else the ``__pycache__`` folders beside
    distprice's sources (numba's user cache folder where those cannot be written)."""
    return os.environ.get("NUMBA_CACHE_DIR") or str(Path(__file__).parent / "__pycache__")


class Compiling:
    """While entered (``with Compiling(what) as compiling:``), the seconds numba spends compiling in any thread
    of this process, or this process waits for another that compiles for it (``seconds``; a kernel compiled
    inside another's compilation counted once), and the compilations (``kernels``). The first compilation of the
    process logs, once, that ``what`` compiles."""

    def __init__(self, what: str):
        self.what, self.seconds, self.kernels = what, 0.0, 0
        self._depth = threading.local()
        self._listener = _Listener(self)

    def __enter__(self) -> Compiling:
        for kind in _KINDS:
            event.register(kind, self._listener)
        return self

    def __exit__(self, *exc) -> None:
        for kind in _KINDS:
            event.unregister(kind, self._listener)

    def _started(self) -> None:
        depth = getattr(self._depth, "value", 0)
        if depth == 0:
            self._depth.start = time.perf_counter()
            if not _said.is_set():
                _said.set()
                log.info(
                    "compiling %s: numba compiles what a job uses on its first use after an install, once; the "
                    "compiled code is kept in %s for later runs",
                    self.what,
                    cache_place(),
                )
        self._depth.value = depth + 1

    def _ended(self) -> None:
        self._depth.value -= 1
        self.kernels += 1
        if self._depth.value == 0:
            self.seconds += time.perf_counter() - self._depth.start


class _Listener(event.Listener):
    """numba's compile events, told to a :class:`Compiling`."""

    def __init__(self, watch: Compiling):
        self.watch = watch

    def on_start(self, ev) -> None:
        self.watch._started()

    def on_end(self, ev) -> None:
        self.watch._ended()
