"""The Monte-Carlo family: Oancea et al.'s generic pricer (LexiFi's), from Sobol points to prices.

Sobol (Gray-code order) → inverse normal (AS241) → Brownian bridge → correlated Black-Scholes paths →
contract payoff, averaged over paths per market model. Engines: ``reference`` (numpy, one step at a time),
``cpu`` (numba, parallel over paths, SIMD across the paths of a block), ``gpu`` (CUDA through CuPy). Paths
are the parallel dimension: :func:`price_range` prices a range of them anywhere and :func:`combine` puts
ranges together; :func:`stage_split` times the CPU engine's stages.
"""

from .contracts import EuropeanCall, WorstOfAutocall, WorstOfDailyBarrier
from .estimate import Estimate, Partial, combine, split
from .finpar import read_benchmark
from .inputs import read_inputs
from .job import Job
from .pricing import ENGINES, price_mc, price_range, priced_rows, resolve_engine
from .rules import validate, with_options
from .stages import stage_split

__all__ = [
    "ENGINES",
    "Estimate",
    "EuropeanCall",
    "Job",
    "Partial",
    "WorstOfAutocall",
    "WorstOfDailyBarrier",
    "combine",
    "price_mc",
    "price_range",
    "priced_rows",
    "read_benchmark",
    "read_inputs",
    "resolve_engine",
    "split",
    "stage_split",
    "validate",
    "with_options",
]
