"""Row kernels on threads: a kernel ``kernel(lo, hi, *arrays)`` compiled with ``numba.njit(nogil=True)`` does rows
``lo <= r < hi``; :func:`over_rows` cuts the rows into blocks and runs them on ``numba.get_num_threads()``
threads (``NUMBA_NUM_THREADS`` or ``numba.set_num_threads`` set it; one thread in a worker that should use one
core). A nogil kernel compiles in a fraction of the time a ``parallel=True`` one takes, and several blocks a
thread balance rows of uneven cost."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import numba

BLOCKS_PER_THREAD = 8
SMALL = 20_000
"""Rows below which a kernel runs in the calling thread."""


@functools.cache
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(threads, thread_name_prefix="distprice-dates")


def over_rows(kernel, rows: int, *arrays) -> None:
    """``kernel(lo, hi, *arrays)`` over every row in ``range(rows)``, in blocks on threads."""
    threads = numba.get_num_threads()
    if threads == 1 or rows < SMALL:
        kernel(0, rows, *arrays)
        return
    blocks = threads * BLOCKS_PER_THREAD
    bounds = [rows * b // blocks for b in range(blocks + 1)]
    for done in [_pool(threads).submit(kernel, lo, hi, *arrays) for lo, hi in zip(bounds, bounds[1:])]:
        done.result()
