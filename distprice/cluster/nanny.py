"""What the nanny of a GPU batch job's worker runs as it starts (``--preload-nanny distprice.cluster.nanny``).

A job given several GPUs runs one ``dask worker --nworkers P`` command, whose P nannies share the job's GPUs:
each nanny, in turn, gives the worker process it starts one GPU of the job's ``CUDA_VISIBLE_DEVICES`` (round
robin), so that each GPU gets the same number of processes and each process sees only its own, as on a
``local-cuda`` cluster.
"""

from __future__ import annotations

import itertools

from ..cuda import visible_gpus
from ..errors import ClusterError

PRELOAD_NANNY = __name__
"""The module to name in a worker command's ``--preload-nanny``."""

_turn = itertools.count()
"""The nannies of this process in the order they start."""


def dask_setup(nanny) -> None:
    """Dask's nanny preload hook: the next of this job's GPUs for the worker process ``nanny`` starts."""
    gpus = visible_gpus()
    if not gpus:
        raise ClusterError("this GPU job sees no GPU: CUDA_VISIBLE_DEVICES is empty")
    nanny.env["CUDA_VISIBLE_DEVICES"] = gpus[next(_turn) % len(gpus)]
