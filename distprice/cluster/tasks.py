"""What runs on the workers: :func:`describe_worker`, :func:`can_write` and :func:`run_chunk`, the task of every
chunk a family cuts a job into (:class:`~distprice.families.Chunk`), on the worker's own threads and reporting what
its pricing did (:mod:`~.metrics`)."""

from __future__ import annotations

import tempfile

from ..cuda import device_name, device_place, gpu_available
from ..families import Metered
from ..tuning import current_model
from .metrics import log_pricing


def describe_worker(precision: str) -> dict:
    """The device of the worker this runs on, where it is (:func:`~distprice.cuda.device_place`; None without a
    GPU) and the inspector's model for it."""
    gpu = gpu_available()
    model = current_model(precision, gpu, quiet=True)
    return {
        "gpu": gpu,
        "device": device_name() if gpu else "cpu",
        "place": device_place() if gpu else None,
        "model": model.to_json(),
    }


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
    result = run(*args)
    if isinstance(result, Metered):
        log_pricing(result.rows, result.node_steps, result.seconds, result.kernel_seconds, result.engine)
        return result.result
    return result
