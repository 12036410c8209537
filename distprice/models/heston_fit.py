"""Fitting Heston parameters to quote surfaces: differential evolution on the vega-scaled least-squares
objective, an optional bounded least-squares polish, and the result tables.

:func:`fit_surface` fits one surface and is pure (a surface in, a :class:`HestonFit` out; the same seed,
engine and quadrature give the same fit), so a cluster can run one task per surface;
:func:`calibrate_heston` fits every surface of a quotes table in this process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..choices import HESTON_ENGINE_NAMES as ENGINE_NAMES
from ..cuda import gpu_available
from ..errors import OptionError
from .evolution import Generation, evolve
from .heston import LOWER, PARAMETERS, UPPER
from .heston_quotes import Surface, heston_surfaces, read_quotes
from .heston_reference import QUADRATURES, ReferenceEngine

NOT_FINITE_RESIDUAL = 1e3
"""The polish reads a price the pricer could not compute as this residual (far worse than any fit)."""


@dataclass(frozen=True)
class Progress:
    """Reported once per generation: the surface, generation (0: the initial population), evaluations spent,
    and the best objective so far with its RMSE."""

    surface: str
    generation: int
    n_evals: int
    objective: float
    rmse: float


@dataclass(frozen=True)
class HestonFit:
    """One surface's fit. ``params`` are ``(v0, theta, rho, kappa, eta)``; ``prices`` are the normalised model
    calls of its quotes (surface order); ``rmse_de`` is the RMSE differential evolution reached before any
    polish. ``n_evals`` counts differential evolution's evaluations of the objective at one parameter vector
    (at most ``max_evals``), ``polish_evals`` the polish's. ``status`` says why the fit stopped: differential
    evolution's ``target_reached`` or ``max_evals_reached`` without a polish; with one, the polish's
    ``converged`` or ``polish_max_evals_reached`` (``status_de``: differential evolution's, always)."""

    surface: str
    params: np.ndarray
    objective: float
    rmse: float
    rmse_de: float
    n_evals: int
    seconds: float
    status: str
    engine: str
    quadrature: str
    prices: np.ndarray
    polish_evals: int = 0
    status_de: str = ""


def rmse(objective: float, n_quotes: int) -> float:
    """Vol points: ``sqrt(f * 10000 / n_quotes)``, 100 times the r.m.s. vega-scaled error."""
    return float(np.sqrt(objective * 10_000.0 / n_quotes))


def heston_engine(surface: Surface, quadrature: str = "gl20", engine: str = "auto"):
    """The engine that prices ``surface``: ``reference`` (numpy), ``cpu`` (numba), ``gpu`` (CUDA, ``gl20`` only);
    ``auto`` takes the GPU for ``gl20`` when one is usable, else the CPU."""
    if quadrature not in QUADRATURES:
        raise OptionError(f"quadrature must be one of {', '.join(QUADRATURES)}, not {quadrature!r}")
    if engine not in ENGINE_NAMES:
        raise OptionError(f"engine must be one of {', '.join(ENGINE_NAMES)}, not {engine!r}")
    if engine == "reference":
        return ReferenceEngine(surface, quadrature)
    from .heston_gpu import GpuEngine

    if engine == "auto":
        engine = "gpu" if quadrature == "gl20" and gpu_available() else "cpu"
    if engine == "gpu":
        if quadrature != "gl20":
            raise OptionError("the gpu engine integrates with gl20 only; use engine='cpu' for quadrature='accurate'")
        return GpuEngine(surface)
    from .heston_cpu import CpuEngine

    return CpuEngine(surface, quadrature)


def fit_surface(
    surface: Surface,
    *,
    seed: int = 0,
    max_evals: int = 2000,
    population: int = 40,
    quadrature: str = "gl20",
    polish: bool = False,
    engine: str = "auto",
    progress: Callable[[Progress], None] | None = None,
) -> HestonFit:
    """Fit one surface by differential evolution (``max_evals`` evaluations of a ``population``), then, with
    ``polish``, by bounded least squares (trust region reflective) from the best point, kept if it is better."""
    started = time.perf_counter()
    pricer = heston_engine(surface, quadrature, engine)

    def report(g: Generation) -> None:
        progress(Progress(surface.name, g.index, g.n_evals, g.best_value, rmse(g.best_value, surface.size)))

    found = evolve(
        pricer.objective,
        LOWER,
        UPPER,
        population=population,
        max_evals=max_evals,
        seed=seed,
        progress=report if progress else None,
    )
    params, objective, status, polish_evals = found.best, found.best_value, found.status, 0
    if polish and np.isfinite(objective):
        polished, polished_objective, polish_evals, converged = _polish(pricer, surface, params)
        status = "converged" if converged else "polish_max_evals_reached"
        if polished_objective < objective:
            params, objective = polished, polished_objective
    prices = pricer.prices(params[None, :])[0]
    return HestonFit(
        surface.name,
        params,
        objective,
        rmse(objective, surface.size),
        rmse(found.best_value, surface.size),
        found.n_evals,
        time.perf_counter() - started,
        status,
        pricer.name,
        quadrature,
        prices,
        polish_evals,
        found.status,
    )


def _polish(pricer, surface: Surface, start: np.ndarray) -> tuple[np.ndarray, float, int, bool]:
    """Bounded least squares on the residuals ``sqrt(w) (C - C_mkt) / vega`` from ``start`` (clipped into the
    box): the point, its objective, the evaluations spent and whether it converged (else it ran out of
    evaluations)."""
    from scipy.optimize import least_squares

    root_weight = np.sqrt(surface.weight)
    evaluations = 0

    def residuals(x):
        nonlocal evaluations
        evaluations += 1
        r = root_weight * (pricer.prices(x[None, :])[0] - surface.market) / surface.vega
        return np.where(np.isfinite(r), r, NOT_FINITE_RESIDUAL)

    result = least_squares(residuals, np.clip(start, LOWER, UPPER), bounds=(LOWER, UPPER), method="trf", x_scale="jac")
    r = residuals(result.x)
    return result.x, float(r @ r), evaluations, bool(result.status > 0)


def calibrate_heston(
    quotes,
    *,
    seed: int = 0,
    max_evals: int = 2000,
    population: int = 40,
    quadrature: str = "gl20",
    polish: bool = False,
    engine: str = "auto",
    progress: Callable[[Progress], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fit every surface of ``quotes`` (a DataFrame, or a CSV / Parquet / ``.in`` path) in this process.

    Returns the surfaces table (one row per surface: ``surface, v0, theta, rho, kappa, eta, rmse, objective,
    n_evals, seconds, status, rmse_de, polish_evals, status_de, n_quotes, engine, quadrature``: ``n_evals``
    differential evolution's evaluations, at most ``max_evals``; ``status`` why the fit stopped, see
    :class:`HestonFit`) and the quotes table (every input row and
    column, plus ``market_price``, ``model_price`` in the currency of spot, and ``model_vol_error``, the
    vega-scaled error in volatility units). Each surface is fitted with the same ``seed``.
    """
    table = read_quotes(quotes) if isinstance(quotes, (str, Path)) else quotes
    surfaces = heston_surfaces(table)
    fits = [
        fit_surface(
            s,
            seed=seed,
            max_evals=max_evals,
            population=population,
            quadrature=quadrature,
            polish=polish,
            engine=engine,
            progress=progress,
        )
        for s in surfaces
    ]
    return heston_tables(table, surfaces, fits)


def heston_tables(quotes: pd.DataFrame, surfaces: list[Surface], fits: list[HestonFit]):
    """The surfaces table and the quotes table (see :func:`calibrate_heston`) of fits to ``surfaces``."""
    rows = [
        {
            "surface": f.surface,
            **dict(zip(PARAMETERS, f.params.tolist())),
            "rmse": f.rmse,
            "objective": f.objective,
            "n_evals": f.n_evals,
            "seconds": f.seconds,
            "status": f.status,
            "rmse_de": f.rmse_de,
            "polish_evals": f.polish_evals,
            "status_de": f.status_de,
            "n_quotes": s.size,
            "engine": f.engine,
            "quadrature": f.quadrature,
        }
        for s, f in zip(surfaces, fits)
    ]
    out = quotes.reset_index(drop=True).copy()
    for column in ("market_price", "model_price", "model_vol_error"):
        out[column] = np.nan
    for s, f in zip(surfaces, fits):
        out.loc[s.rows, "market_price"] = s.scale * s.market
        out.loc[s.rows, "model_price"] = s.scale * f.prices
        out.loc[s.rows, "model_vol_error"] = (f.prices - s.market) / s.vega
    return pd.DataFrame(rows), out
