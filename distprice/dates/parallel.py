"""Row kernels on threads: a kernel ``kernel(lo, hi, *arrays)`` compiled with ``numba.njit(nogil=True)`` does rows
``lo <= r < hi``; :func:`over_rows` cuts the rows into blocks and runs them on ``numba.get_num_threads()``
threads (``NUMBA_NUM_THREADS`` or ``numba.set_num_threads`` set it; one thread in a worker that should use one
core); :func:`over_ranges` runs ranges given (the CPU engines', balanced by cost). A nogil kernel compiles in a
fraction of the time a ``parallel=True`` one takes, and several blocks a thread balance rows of uneven cost."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import numba

BLOCKS_PER_THREAD = 8
SMALL = 20_000
"""Rows below which a kernel runs in the calling thread."""


@functools.cache
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(threads, thread_name_prefix="distprice-rows")


def over_rows(kernel, rows: int, *arrays, small: int = SMALL) -> None:
    """``kernel(lo, hi, *arrays)`` over every row in ``range(rows)``, in blocks on threads (below ``small`` rows,
    in this thread)."""
    threads = numba.get_num_threads()
    if threads == 1 or rows < small:
        kernel(0, rows, *arrays)
        return
    blocks = threads * BLOCKS_PER_THREAD
    over_ranges(kernel, [rows * b // blocks for b in range(blocks + 1)], *arrays)


def over_ranges(kernel, bounds, *arrays) -> None:
    """``kernel(bounds[k], bounds[k + 1], *arrays)`` for every range k, on ``numba.get_num_threads()`` threads
    (one range, or one thread: in this thread)."""
    threads = numba.get_num_threads()
    if len(bounds) <= 2 or threads == 1:
        for lo, hi in zip(bounds, bounds[1:]):
            kernel(lo, hi, *arrays)
        return
    for done in [_pool(threads).submit(kernel, lo, hi, *arrays) for lo, hi in zip(bounds, bounds[1:])]:
        done.result()
