"""What a distprice worker process runs as it starts: ``--preload distprice.cluster.worker`` on ``dask worker``
(the local clusters, the batch jobs and the deployment files here pass it themselves).

It imports distprice's tasks, then keeps every object alive by then (pandas, numba, Dask, distprice) out of the
garbage collector's full passes for the life of the process (``gc.freeze``). A full pass over them took about
0.1 s of a task, once or twice a job, in each worker process.
"""

from __future__ import annotations

import gc
import importlib

PRELOAD = __name__
"""The module to name in a worker's ``--preload`` (or a Dask worker's ``preload`` option)."""


def dask_setup(worker=None) -> None:
    """Dask's preload hook (``worker`` unused): the tasks imported with the collector off, then frozen."""
    gc.disable()  # the imports make objects that live as long as the worker: no collections over them meanwhile
    try:
        importlib.import_module("distprice.cluster.tasks")
    finally:
        gc.freeze()
        gc.enable()
