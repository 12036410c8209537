"""The CPU engine compiled in a side process while this one compiles a job's host stages.

On a job's first run after an install numba compiles, one after the other, the kernels that read and check the
rows and lay out their events, then the CPU engine's (about a third of it all). :func:`engine_aside` compiles the
engine's in another process meanwhile, on another core, into numba's cache; the job waits for it
(:meth:`Aside.wait`) before it prices, and loads the engine from the cache. Run as a module
(``python -m distprice.lattice.warm fp64``), this file prices two rows that share a tree with the CPU engine:
what compiles every kernel the engine calls.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from ..compiling import waiting_aside
from ..curves import builtin_curves
from ..precision import real_dtype
from .batch import pack
from .cpu import _forward_range, _price_range, run_cpu
from .datasets import generate
from .instruments import prepare

WAIT_SECONDS = 600.0
"""The longest a job waits for the side process (then it goes on and compiles what is missing itself)."""


class Aside:
    """The side process compiling the CPU engine (:func:`engine_aside`)."""

    def __init__(self, process: subprocess.Popen):
        self.process = process

    def wait(self) -> None:
        """Returns once the side process has ended (killed after :data:`WAIT_SECONDS`)."""
        try:
            with waiting_aside():
                self.process.wait(WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


def engine_aside(precision: str) -> Aside | None:
    """A side process compiling the CPU engine in ``precision`` into numba's cache, or None where the cache
    holds it already, where no core is to spare (the load average: another process would only slow this one),
    or where numba's cache cannot be read: this process compiles the engine then, if it must."""
    if all(_cached(kernel) for kernel in (_price_range, _forward_range)) or not _core_to_spare():
        return None
    environment = {**os.environ, "NUMBA_NUM_THREADS": "1"}
    command = [sys.executable, "-m", __name__, precision]
    quiet = subprocess.DEVNULL
    return Aside(subprocess.Popen(command, env=environment, stdin=quiet, stdout=quiet, stderr=quiet))


def _core_to_spare() -> bool:
    """Whether this machine's load leaves a core idle for a side process."""
    return os.getloadavg()[0] <= (os.cpu_count() or 1) - 1


def _cached(kernel) -> bool:
    """Whether numba's cache holds code of ``kernel`` for this machine and this source (any signature): numba's
    own test of a cache entry, through its cache's index. True where the index cannot be read (nothing to do
    aside then)."""
    try:
        cache = kernel._cache
        codegen = kernel.targetctx.codegen()
        return any(key == cache._index_key(key[0], codegen) for key in cache._cache_file._load_index())
    except Exception:  # numba's internals differ: leave it to this process
        return True


def compile_engine(precision: str) -> None:
    """Prices two rows of the papers' R1 that share a tree with the CPU engine in ``precision``: every kernel the
    engine calls compiles (the shared forward pass included)."""
    rows = generate("R1", 1)
    rows = rows.loc[np.zeros(2, dtype=np.int64)].assign(id=[0, 1]).reset_index(drop=True)
    curves = builtin_curves()
    run_cpu(pack(prepare(rows, curves).instruments(), curves, real_dtype(precision)))


if __name__ == "__main__":
    compile_engine(sys.argv[1])
