"""What a distprice worker process runs as it starts: ``--preload distprice.cluster.worker`` on ``dask worker``
(the local clusters, the batch jobs and the deployment files here pass it themselves).

It imports distprice's tasks, then keeps every object alive by then (pandas, numba, Dask, distprice) out of the
garbage collector's full passes for the life of the process (``gc.freeze``). A full pass over them took about
0.1 s of a task, once or twice a job, in each worker process.

It also lets the process reuse the memory it frees where its nanny started it with Dask's own
``MALLOC_TRIM_THRESHOLD_`` (:func:`keep_freed_memory`): the workers of ``dask worker``, batch jobs and pods. A
local cluster starts its workers without that setting (:mod:`~.start`).
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import os
import platform

PRELOAD = __name__
"""The module to name in a worker's ``--preload`` (or a Dask worker's ``preload`` option)."""
DASK_TRIM = 65536
"""Dask's own setting of glibc's trim threshold for the worker processes its nannies start (bytes)."""
HEAP_BLOCKS = 32 * 2**20
"""glibc's largest mmap threshold on 64-bit systems (bytes): the size up to which its sliding threshold lets
blocks come from the heap once blocks that big have been freed."""
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""``mallopt``'s parameters (glibc's malloc.h)."""


def keep_freed_memory() -> bool:
    """Where this process's environment holds Dask's ``MALLOC_TRIM_THRESHOLD_`` (:data:`DASK_TRIM`), which also
    turns glibc's sliding mmap threshold off, so that every block over 128 KiB is mapped afresh from the system
    and unmapped when freed (each chunk's arrays new memory, zeroed page by page as it is first touched): sets
    the thresholds glibc's own rule reaches, blocks up to :data:`HEAP_BLOCKS` from the heap and the heap trimmed
    past twice that (``mallopt``). Returns whether it did (not on other C libraries, nor where the setting is
    another)."""
    if os.environ.get("MALLOC_TRIM_THRESHOLD_") != str(DASK_TRIM) or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)
    return libc.mallopt(M_MMAP_THRESHOLD, HEAP_BLOCKS) == 1 and libc.mallopt(M_TRIM_THRESHOLD, 2 * HEAP_BLOCKS) == 1


def dask_setup(worker=None) -> None:
    """Dask's preload hook (``worker`` unused): freed memory kept for reuse (:func:`keep_freed_memory`), the
    tasks imported with the collector off, then frozen."""
    keep_freed_memory()
    gc.disable()  # the imports make objects that live as long as the worker: no collections over them meanwhile
    try:
        importlib.import_module("distprice.cluster.tasks")
    finally:
        gc.freeze()
        gc.enable()
