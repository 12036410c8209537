"""distprice: pricing of large portfolios on many GPUs with Dask.

``distprice.price(portfolio, curves)`` prices bond options, callable and puttable bonds on Hull-White
trinomial trees and returns the priced table (see :mod:`distprice.api`); ``distprice.price_mc(inputs)`` prices
Monte-Carlo jobs (LexiFi's generic pricer);
``distprice.Pricer`` keeps one Dask cluster across pricing jobs (see :mod:`distprice.cluster`). Every error
distprice raises on purpose is a :class:`DistpriceError` (see :mod:`distprice.errors`).
"""

import os

# Arrow allocates from the C library's heap, as numpy does, unless the environment names its pool: with its own
# heap (mimalloc) neither reuses what the other frees, and a job in a fresh process (every command-line run,
# every worker of a local cluster, which inherit this) touches more new memory. Read once, when pyarrow loads.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

_HOMES = {
    "price": "api",
    "price_mc": "api",
    "calibrate_heston": "api",
    "calibrate_hull_white": "api",
    "Pricer": "cluster.pricer",
    "JobOptions": "job",
    "Limits": "lattice.instruments",
}
"""Where the package's names live, the errors (``distprice.errors``) aside: each is imported when first asked for,
so that ``import distprice`` does not load the engines, pandas and numba."""

__all__ = [
    "price",
    "price_mc",
    "calibrate_heston",
    "calibrate_hull_white",
    "Pricer",
    "JobOptions",
    "Limits",
    "ClusterError",
    "ConfigError",
    "DistpriceError",
    "Fp32OverflowError",
    "GpuUnavailableError",
    "InvalidInputError",
    "OptionError",
    "Problem",
    "SchedulerUnreachableError",
]


def __getattr__(name: str):
    if name in __all__:
        import importlib

        value = getattr(importlib.import_module(f".{_HOMES.get(name, 'errors')}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'distprice' has no attribute {name!r}")
