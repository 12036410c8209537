"""The families as the runtime sees them (:mod:`~.work`): a job's inputs read on the client, cut into chunks
that workers run, and the chunks' results put together into the job's result. ``lattice`` (portfolios of rows),
``montecarlo`` (path ranges) and ``calibration`` (parameter fits) each give a :class:`~.work.Family`; a new
family adds its module here and its Family to :data:`FAMILIES`, and the runtime (:mod:`distprice.cluster`) runs
it unchanged.
"""

from .calibration import HESTON, HULL_WHITE
from .lattice import LATTICE
from .montecarlo import PATHS
from .work import Chunk, Family, Metered, Parts, Stages, Work, Workers

FAMILIES = (LATTICE, PATHS, HESTON, HULL_WHITE)
"""Every family: the dashboard's page counts the chunks they declare (``Family.counted``)."""

__all__ = [
    "FAMILIES",
    "HESTON",
    "HULL_WHITE",
    "LATTICE",
    "PATHS",
    "Chunk",
    "Family",
    "Metered",
    "Parts",
    "Stages",
    "Work",
    "Workers",
]
