"""What runs on the workers: :func:`describe_worker`, :func:`can_write` and :func:`run_chunk`, the task of every
chunk a family cuts a job into (:class:`~distprice.families.Chunk`), on the worker's own threads and reporting what
its pricing did (:mod:`~.metrics`). A chunk whose task is cancelled (its job stopped) stops between the pieces of
its pricing (:func:`~distprice.execute.stopped_by`), not at its end."""

from __future__ import annotations

import math
import os
import socket
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable

from ..cuda import device_name, device_place, gpu_available
from ..execute import stopped_by
from ..families import Metered
from ..families.work import watched_by
from ..tuning import current_model
from .dashboard import PIECE_EVENT_SECONDS, PIECE_TOPIC
from .metrics import log_pricing
from .watch import Cancelled


def describe_worker(precision: str, dask_worker=None) -> dict:
    """The device of ``dask_worker`` (``Client.run`` hands it over), where it is
    (:func:`~distprice.cuda.device_place`; None without a GPU), the inspector's model for it, its host, the cores
    its process may run on and its threads."""
    gpu = gpu_available()
    model = current_model(precision, gpu, quiet=True)
    return {
        "gpu": gpu,
        "device": device_name() if gpu else "cpu",
        "place": device_place() if gpu else None,
        "model": model.to_json(),
        "host": socket.gethostname(),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
        "threads": dask_worker.state.nthreads if dask_worker is not None else 1,
    }


def pricing_share(described: list[dict]) -> float:
    """What each of the workers :func:`describe_worker` described prices at once, on average, in pricings in one
    process on all of a machine (:attr:`~distprice.families.Workers.pricing_share`): with GPUs, the GPUs (each
    counted once, however many workers share it) over the workers; without, the share of each host's cores its
    workers' threads take, summed over the hosts, over the workers."""
    if not described:
        return 1.0
    if described[0]["gpu"]:
        return max(1, len({d["place"] for d in described if d["place"]})) / len(described)
    hosts: defaultdict[str, list[int]] = defaultdict(lambda: [0, 1])
    for d in described:
        hosts[d["host"]][0] += d["threads"]
        hosts[d["host"]][1] = max(hosts[d["host"]][1], d["cores"])
    return sum(min(1.0, threads / cores) for threads, cores in hosts.values()) / len(described)


def can_write(folder: str) -> bool:
    """Whether this worker can make (and remove) a file in ``folder``."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe."):
            return True
    except OSError:
        return False


def _use_worker_threads() -> None:
    """numba's parallel loops (the CPU engine, validation, layout) and Arrow's pool (Parquet reading, columns to
    and from pandas) use as many threads as this Dask worker has: not every core of the machine, and not the one
    thread that Dask's nannies leave Arrow (they start workers with ``OMP_NUM_THREADS=1``, which sizes Arrow's
    pool), which a worker's tasks would otherwise take turns on."""
    import numba
    import pyarrow as pa
    from distributed import get_worker

    try:
        threads = get_worker().state.nthreads
    except ValueError:  # not on a worker
        return
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    if pa.cpu_count() != threads:
        pa.set_cpu_count(threads)


def run_chunk(run, *args):
    """``run(*args)``, one chunk of a job, on this worker's threads; a :class:`~distprice.families.Metered`
    result is reported to the scheduler's metrics and handed on as its result alone."""
    _use_worker_threads()
    with stopped_by(_stop_if_cancelled), watched_by(_progress_teller()):
        result = run(*args)
    if isinstance(result, Metered):
        log_pricing(result.rows, result.node_steps, result.seconds, result.kernel_seconds, result.engine)
        return result.result
    return result


def _stop_if_cancelled() -> None:
    """Raises :class:`~.watch.Cancelled` in a task the worker no longer runs for anyone (cancelled, or gone)."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not on a worker
        return
    key = worker.active_threads.get(threading.get_ident())
    if key is None:  # not in a task
        return
    task = worker.state.tasks.get(key)
    if task is None or task.state == "cancelled":
        raise Cancelled("the job's task was cancelled")


def _progress_teller() -> Callable[[float, float], None] | None:
    """What tells the dashboard's page how far the chunk that this thread's task prices is
    (:data:`~.dashboard.PIECE_TOPIC`, at most every :data:`~.dashboard.PIECE_EVENT_SECONDS`); None outside a
    worker's task."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not on a worker
        return None
    key = worker.active_threads.get(threading.get_ident())
    if not isinstance(key, str):
        return None
    told = -math.inf

    def tell(rows: float, node_steps: float) -> None:
        nonlocal told
        now = time.monotonic()
        if now - told >= PIECE_EVENT_SECONDS:
            told = now
            worker.log_event(PIECE_TOPIC, {"key": key, "rows": float(rows), "node_steps": float(node_steps)})

    return tell
