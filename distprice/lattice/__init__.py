"""The lattice family: Hull-White one-factor trinomial trees for bond options, callable and puttable bonds.

A portfolio row is validated and put in canonical form by :func:`prepare` (which also computes its tree
geometry once); its valid rows (:class:`Instruments`) are priced by one of :data:`ENGINES`. Modules:
``instruments`` (schema and rules), ``geometry`` (tree shapes), ``events`` (coupons and exercises to tree
steps), ``batch`` (the arrays the fast engines read), ``reference`` / ``cpu`` / ``gpu`` (the engines),
``layouts`` (the GPU kernels' host layouts, without CuPy), ``engines`` (the registry), ``datasets`` (the
papers' synthetic portfolios) and ``quantlib`` (the QuantLib oracle of the tests).
"""
from ..cuda import gpu_available
from .engines import AUTO, ENGINE_NAMES, ENGINES, GPU_ENGINES, resolve
from .instruments import PORTFOLIO_COLUMNS, Instruments, Limits, Prepared, prepare

__all__ = ["AUTO", "ENGINE_NAMES", "ENGINES", "GPU_ENGINES", "PORTFOLIO_COLUMNS", "Instruments", "Limits",
           "Prepared", "gpu_available", "prepare", "resolve"]
