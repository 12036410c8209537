"""Pricing on Dask: the only package of distprice that imports dask and distributed.

``config`` (cluster and job settings from YAML), ``start`` (clusters from a config), ``jobqueue`` (workers in
SLURM / PBS jobs), ``tasks`` (what runs on the workers), ``pricer`` (:class:`Pricer`, the client side of a
job) and ``metrics`` (pricing counters on the scheduler's Prometheus endpoint).
"""
from .pricer import Pricer

__all__ = ["Pricer"]
