"""Starting the cluster a config names: a local cluster (CPU workers, or worker processes sharing each GPU), a
scheduler already running, or workers in SLURM / PBS batch jobs (:mod:`~.jobqueue`)."""

from __future__ import annotations

import logging
import os
import socket
import sys

import dask

from ..cuda import gpu_available, visible_gpus
from ..errors import ClusterError, OptionError, SchedulerUnreachableError
from .config import JOBQUEUE_KINDS, WORKER_THREADS, WORKERS_PER_GPU, ClusterConfig, Config, load_config
from .worker import DASK_TRIM, PRELOAD

log = logging.getLogger(__name__)


def default_cluster() -> ClusterConfig:
    """The embedded default: a local cluster sized to this machine, worker processes sharing each GPU when GPUs
    are visible, else one single-threaded worker per core."""
    return ClusterConfig(kind="local-cuda" if gpu_available() else "local")


def workers_per_gpu(config: ClusterConfig, gpus: int) -> int:
    """The worker processes a ``local-cuda`` cluster gives each of its ``gpus`` GPUs."""
    if config.workers_per_gpu is not None:
        return config.workers_per_gpu
    return max(1, min(WORKERS_PER_GPU, (os.cpu_count() or 1) // (2 * max(gpus, 1))))


def gpu_worker_threads(config: ClusterConfig, gpus: int) -> int:
    """The threads of each worker of a ``local-cuda`` cluster on ``gpus`` GPUs: the cores its workers leave."""
    if config.threads_per_worker is not None:
        return config.threads_per_worker
    workers = workers_per_gpu(config, gpus) * max(gpus, 1)
    return max(1, min(WORKER_THREADS, (os.cpu_count() or 1) // workers))


CHUNKS_PER_WORKER = 4
"""Chunks a job is cut into per worker, by default: several a worker, so that a slow chunk holds up none."""
CHUNKS_PER_GPU_WORKER = 2
"""The same for worker processes that share a GPU (a ``local-cuda`` cluster's, and the several processes a GPU
that deploy/ and batch jobs start): their chunks already take turns on the GPU, and each chunk costs its own
reading, checks, launches and Parquet part."""


def default_chunks(gpu_processes: int) -> int:
    """Chunks a job is cut into per worker, unless the job says, on workers of which up to ``gpu_processes``
    share one GPU (1 for CPU workers)."""
    return CHUNKS_PER_GPU_WORKER if gpu_processes > 1 else CHUNKS_PER_WORKER


def gpu_cluster_spec(config: ClusterConfig, gpus: list[str], security) -> tuple[dict, dict]:
    """The scheduler's and the workers' specs of a ``local-cuda`` cluster (for :class:`distributed.SpecCluster`):
    :func:`workers_per_gpu` worker processes on each GPU, named ``gpu<name>-<k>``, each seeing only its GPU,
    sharing the machine's memory like a local cluster's; TLS on 127.0.0.1."""
    from distributed import Nanny, Scheduler
    from distributed.worker_memory import parse_memory_limit

    names = [(gpu, k) for k in range(workers_per_gpu(config, len(gpus))) for gpu in gpus]
    memory = parse_memory_limit(config.memory_limit, 1, len(names), logger=logging.getLogger(__name__))
    common = {"host": "127.0.0.1", "protocol": "tls://", "security": security}
    scheduler = {
        "cls": Scheduler,
        "options": {
            **common,
            "dashboard": config.dashboard_address is not None,
            "dashboard_address": config.dashboard_address,
        },
    }
    threads = gpu_worker_threads(config, len(gpus))
    workers = {
        f"gpu{gpu}-{k}": {
            "cls": Nanny,
            "options": {
                **common,
                "nthreads": threads,
                "memory_limit": memory,
                "preload": [PRELOAD],
                "env": {"CUDA_VISIBLE_DEVICES": gpu},
            },
        }
        for gpu, k in names
    }
    return scheduler, workers


def start(config: ClusterConfig):
    """A client on the cluster ``config`` describes, and what to close after it (a cluster it started or None).

    Raises :class:`SchedulerUnreachableError` when a scheduler address does not answer within
    ``config.timeout`` seconds. Batch kinds (``slurm``, ``pbs``) submit ``jobqueue.jobs`` jobs and wait for the
    first one's workers; :class:`~distprice.errors.ClusterError` when none joins within
    ``jobqueue.start_timeout`` seconds (the jobs are cancelled then). A local cluster without ``security``
    speaks TLS with temporary certificates, so no other process of the machine can join it or run code in it.
    """
    from distributed import Client, LocalCluster, SpecCluster

    security = config.dask_security()
    if config.kind == "address":
        try:
            return Client(config.address, security=security, timeout=config.timeout), None
        except (OSError, TimeoutError) as error:
            raise SchedulerUnreachableError(
                f"cannot reach the scheduler at {config.address} within {config.timeout:g} s: {error}"
            ) from None
    if not on_loopback(config.dashboard_address):
        log.warning(
            "the dashboard listens on %s, beyond this machine: anyone who reaches it sees the cluster's logs, "
            "workers and jobs, with no password. Keep it on 127.0.0.1 (reach it by SSH tunnel) or put it "
            "behind a reverse proxy with authentication (see the clusters guide)",
            config.dashboard_address,
        )
    if config.kind in JOBQUEUE_KINDS:
        from .jobqueue import build_cluster

        cluster = build_cluster(config)
        client = Client(cluster, security=security)
        cluster.scale(jobs=config.jobqueue.jobs)
        try:
            client.wait_for_workers(1, timeout=config.jobqueue.start_timeout)
        except TimeoutError:
            client.close()
            cluster.close()
            raise ClusterError(
                f"no {config.kind} job started its workers within {config.jobqueue.start_timeout:g} s; the jobs "
                f"were cancelled. They may have waited in the queue (raise cluster.jobqueue.start_timeout) or "
                f"failed (see their output files)"
            ) from None
        return client, cluster
    if security is None:  # a cluster of this machine speaks TLS with certificates of its own, made for it
        from distributed.security import Security

        security = Security.temporary()
    advice = (
        "In a script, start the cluster (distprice.Pricer, or cluster= of distprice.price) under "
        '`if __name__ == "__main__":`, since each worker process imports the script again'
    )
    if (config.kind == "local-cuda" or config.processes) and _importing_main_in_child():
        raise ClusterError(
            f"a worker process of the local cluster imported the script, which starts a cluster again. {advice}"
        )
    if config.kind == "local-cuda":
        gpus = visible_gpus() if gpu_available() else []
        if not gpus:
            raise ClusterError(
                "cluster kind local-cuda needs a usable CUDA GPU and CuPy (pip install "
                "'distprice[gpu]'); use kind local on this machine"
            )
        scheduler, workers = gpu_cluster_spec(config, gpus[: config.n_workers], security)

        def start():
            return SpecCluster(workers=workers, scheduler=scheduler, security=security, silence_logs=logging.WARNING)
    else:

        def start():
            return LocalCluster(
                n_workers=config.n_workers or os.cpu_count(),
                processes=config.processes,
                threads_per_worker=config.threads_per_worker or 1,
                memory_limit=config.memory_limit,
                dashboard_address=config.dashboard_address,
                security=security,
                protocol="tls",
                preload=[PRELOAD] if config.processes else [],
            )

    try:
        with dask.config.set(_freed_memory_kept()):
            cluster = start()
    except Exception as error:
        if config.kind != "local-cuda" and not config.processes:
            raise
        raise ClusterError(f"the local cluster's worker processes did not start ({error}). {advice}") from None
    return Client(cluster, security=security), cluster


def dashboard_host(address: str) -> str:
    """The host of a ``host:port`` dashboard address as a URL names it: the machine's hostname where it listens
    on every interface (``0.0.0.0``, ``::`` or no host)."""
    host = address.rpartition(":")[0].strip("[]")
    return socket.gethostname() if host in ("", "0.0.0.0", "::") else host


def on_loopback(address: str | None) -> bool:
    """Whether a dashboard at ``address`` (``host:port``; None: none) is reachable from this machine only."""
    if address is None:
        return True
    host = address.rpartition(":")[0].strip("[]")
    return host == "localhost" or host == "::1" or host.startswith("127.")


TRIM_SETTING = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"


def _freed_memory_kept() -> dict:
    """Dask config for the worker processes of a local cluster: without Dask's own ``MALLOC_TRIM_THRESHOLD_``
    (:data:`~.worker.DASK_TRIM`), which also makes glibc map every block over 128 KiB afresh from the system and unmap
    it when freed, so that each chunk's arrays were new memory (the system zeroing each page as it is first
    touched). A threshold that the environment or the Dask config sets otherwise is kept."""
    if "MALLOC_TRIM_THRESHOLD_" in os.environ or dask.config.get(TRIM_SETTING, None) != DASK_TRIM:
        return {}
    return {TRIM_SETTING: None}


def _importing_main_in_child() -> bool:
    """Whether this is a spawned child process, which runs its parent's script as ``__mp_main__``: what a
    worker process of a local cluster does with a script that starts the cluster outside ``if __name__ ==
    "__main__":``. While the script runs there, ``sys.modules["__mp_main__"]`` is the script's module and
    ``__main__`` still the child's own (``multiprocessing.parent_process()`` is not yet set); in a parent,
    distributed makes ``__mp_main__`` the same module as ``__main__``."""
    script = sys.modules.get("__mp_main__")
    return script is not None and script is not sys.modules.get("__main__")


def cluster_config(cluster) -> ClusterConfig:
    """The cluster config a ``cluster`` argument names: None (:func:`default_cluster`), a config file, a
    scheduler address (``tcp://host:8786``, ``tls://...``), a :class:`Config` or a :class:`ClusterConfig`."""
    if cluster is None:
        return default_cluster()
    if isinstance(cluster, Config):
        return cluster.cluster
    if isinstance(cluster, ClusterConfig):
        return cluster
    if isinstance(cluster, (str, os.PathLike)) and "://" in str(cluster):
        return ClusterConfig(kind="address", address=str(cluster))
    if isinstance(cluster, (str, os.PathLike)):
        return load_config(cluster).cluster
    raise OptionError(
        f"cluster must be None, a config file, an address, a Config or a distributed.Client, "
        f"not {type(cluster).__name__}"
    )


def one_line_logs() -> None:
    """Dask's log lines in this process without their tracebacks (each keeps its message), so that a job's
    log is one line per event for whoever reads it (a batch scheduler's log, a person)."""
    import distributed  # noqa: F401  (Dask sets up its log handlers on import)

    for handler in logging.getLogger("distributed").handlers:
        if _one_line not in handler.filters:
            handler.addFilter(_one_line)


def _one_line(record: logging.LogRecord) -> bool:
    if record.exc_info or record.exc_text or record.stack_info:
        cause = record.exc_info[1] if record.exc_info else None
        if cause is not None and not record.getMessage().strip():
            record.msg, record.args = f"{type(cause).__name__}: {cause}", ()
        record.exc_info = record.exc_text = record.stack_info = None
    return True
