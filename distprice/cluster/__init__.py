"""Pricing on Dask: the only package of distprice that imports dask and distributed.

``config`` (cluster and job settings from YAML), ``start`` (clusters from a config), ``jobqueue`` (workers in
SLURM / PBS jobs), ``tasks`` (what runs on the workers), ``pricer`` (:class:`Pricer`, the client side of a
job), ``watch`` (waits that end on no workers, a timeout or a lost scheduler), ``progress`` (a stage's bar on
the terminal), ``metrics`` (pricing counters on the scheduler's Prometheus endpoint), ``dashboard`` (the
distprice page of the Dask dashboard) and ``worker`` (a worker's ``--preload``: the tasks imported, then frozen).
"""

from .pricer import Pricer

__all__ = ["Pricer"]
