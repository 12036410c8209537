"""Dask workers in SLURM or PBS batch jobs through dask-jobqueue (cluster kinds ``slurm`` and ``pbs``).

The scheduler runs in the submitting process (a login node); each batch job starts workers that connect back
to it. Each job runs Dask's worker command with distprice's worker preload (:mod:`~.worker`), its cores and
memory shared evenly by its worker processes. A job with ``gpus_per_job`` runs several processes on each of its
GPUs, as a ``local-cuda`` cluster does: the nanny preload (:mod:`~.nanny`) gives each process one GPU. The
workers run the submitting process's Python, so distprice must be installed where the compute nodes see it too.
"""

from __future__ import annotations

import shutil

from dask.utils import parse_bytes

from ..errors import ClusterError, OptionError
from .config import ClusterConfig
from .nanny import PRELOAD_NANNY
from .worker import PRELOAD

SUBMIT_COMMANDS = {"slurm": "sbatch", "pbs": "qsub"}
JOB_NAME = "distprice"


def build_cluster(config: ClusterConfig):
    """A SLURMCluster or PBSCluster for ``config``, with no job submitted yet (``cluster.scale(jobs=n)``).

    Raises :class:`~distprice.errors.ClusterError` when dask-jobqueue is not installed or the batch system's
    submit command (``sbatch``, ``qsub``) is not on PATH; both are checked before the scheduler starts.
    """
    cls = _cluster_class(config.kind)
    submit = SUBMIT_COMMANDS[config.kind]
    if shutil.which(submit) is None:
        raise ClusterError(
            f"cluster kind {config.kind} submits its jobs with {submit}, which is not on PATH: run "
            f"this on a login node of the {config.kind} cluster (distprice cluster-script CONFIG "
            f"prints the job script anywhere)"
        )
    return cls(**_options(config))


def job_script(config: ClusterConfig) -> str:
    """The batch script each job of ``config`` runs, as dask-jobqueue renders it (its directives, then the
    worker command); needs no batch system. The worker's ``--name`` is a placeholder there."""
    with _cluster_class(config.kind)(**_options(config)) as cluster:
        return cluster.job_script()


def _cluster_class(kind: str):
    if kind not in SUBMIT_COMMANDS:
        raise OptionError(
            f"cluster kind {kind} runs no batch jobs; job scripts are for kinds {', '.join(SUBMIT_COMMANDS)}"
        )
    try:
        from dask_jobqueue import PBSCluster, SLURMCluster
    except ImportError:
        raise ClusterError(f"cluster kind {kind} needs dask-jobqueue: pip install 'distprice[jobqueue]'") from None
    return {"slurm": SLURMCluster, "pbs": PBSCluster}[kind]


def _options(config: ClusterConfig) -> dict:
    """The keyword arguments of the dask-jobqueue cluster for ``config``."""
    queue = config.jobqueue
    gpus = queue.gpus_per_job
    directives = list(queue.job_extra_directives)
    # without a dashboard the scheduler still serves /health and /metrics over HTTP: on loopback, then
    http = (
        {"dashboard_address": config.dashboard_address}
        if config.dashboard_address
        else {"dashboard": False, "dashboard_address": "127.0.0.1:0"}
    )
    options = dict(
        job_name=JOB_NAME,
        queue=queue.queue,
        account=queue.account,
        walltime=queue.walltime,
        cores=queue.cores,
        memory=queue.memory,
        processes=queue.worker_processes,
        interface=queue.interface,
        local_directory=queue.local_directory,
        job_script_prologue=list(queue.job_script_prologue),
        job_extra_directives=directives,
        security=config.dask_security(),
        scheduler_options=http,
        worker_extra_args=["--preload", PRELOAD],
    )
    if gpus:
        options["worker_extra_args"] += ["--preload-nanny", PRELOAD_NANNY]
        if config.kind == "slurm":
            directives.append(f"--gres=gpu:{gpus}")
        else:
            from dask_jobqueue.pbs import pbs_format_bytes_ceil

            memory = pbs_format_bytes_ceil(parse_bytes(queue.memory))
            options["resource_spec"] = f"select=1:ncpus={queue.cores}:ngpus={gpus}:mem={memory}"
    return options
