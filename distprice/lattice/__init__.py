"""The lattice family: Hull-White one-factor trinomial trees for bond options, callable and puttable bonds.

A portfolio row is validated and put in canonical form by :func:`prepare` (which also computes its tree
geometry once); its valid rows (:class:`Instruments`) are priced by one of :data:`ENGINES`. Modules:

- ``instruments``: the portfolio schema, its defaults and validation rules (:func:`prepare`);
- ``dated``: real bonds with dates, schedules, day counts and calendars, mapped to the tree's time;
- ``quotes``: market prices of rows (clean or dirty), the input of the OAS;
- ``geometry``: tree shapes (``dt``, ``dr``, ``jmax``, width, height) and their node-steps;
- ``events``: each row's redemption, coupons and exercises as tree steps, in backward-pass order;
- ``batch``: the flat arrays the fast engines read (tree parameters, event tables, curves);
- ``groups``: rows whose trees share one forward pass;
- ``reference``: the reference engine and its risk, one instrument at a time, written to be read;
- ``cpu``: the CPU engine (numba, parallel over instruments);
- ``gpu``: the GPU engines' CuPy launchers (``gpu-outer``, ``gpu-flat``);
- ``layouts``: the GPU kernels' host layouts, without CuPy;
- ``engines``: the registry of engines by name;
- ``sweeps``: curve bumps and the risk engines' interface;
- ``cpu_risk``: the CPU risk engine, kept trees rolled back under many curve bumps;
- ``gpu_risk``: the GPU risk engine, the same on the device;
- ``straight``: plain bonds under curve bumps, off the tree;
- ``oas``: batched root finding (secant, then Brent) for the OAS;
- ``measures``: the risk measures a job may ask for, their defaults and output columns;
- ``risk``: the risk measures of valid rows (OAS, parallel, key-rate and volatility bumps);
- ``datasets``: the papers' synthetic portfolios, Hull's example and mixtures;
- ``desk``: a realistic dated book with its curves and exercise schedule;
- ``quantlib``: the QuantLib peer, oracle of the tests and baseline of ``distprice bench --peer quantlib``;
- ``quantlib_dated``: the QuantLib peer of dated rows.
"""

from ..cuda import gpu_available
from .engines import AUTO, ENGINE_NAMES, ENGINES, GPU_ENGINES, resolve
from .instruments import PORTFOLIO_COLUMNS, Instruments, Limits, Prepared, prepare

__all__ = [
    "AUTO",
    "ENGINE_NAMES",
    "ENGINES",
    "GPU_ENGINES",
    "PORTFOLIO_COLUMNS",
    "Instruments",
    "Limits",
    "Prepared",
    "gpu_available",
    "prepare",
    "resolve",
]
