"""Monte-Carlo jobs built from arrays, and the benchmark's large set (contract 3, 367 dates, 3 underlyings).

The FinPar large set is not shipped here; :func:`large` builds a set of its shape: daily dates 0 … 366
days (the first date is today, with vol 0 and drift 0), the medium set's three indices, vols, first-year
log-drifts (per year, times each day's length) and correlation, both payments discounted over one year.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import sobol
from .contracts import INDEX_LEVELS

MEDIUM_VOLS = (0.19, 0.19, 0.15)
MEDIUM_DRIFTS = (-0.0283491736871803, 0.0178771081725381, 0.0043096808044729)
"""Log-drifts of the medium set's first year (366 days), per underlying."""
MEDIUM_CORRELATION = ((1.0, 0.6, 0.8), (0.6, 1.0, 0.6 * 0.8 + 0.8 * 0.15), (0.8, 0.6 * 0.8 + 0.8 * 0.15, 1.0))
"""L Lᵀ of the medium set's Cholesky factor [[1, 0, 0], [0.6, 0.8, 0], [0.8, 0.15, 0.5809475]]."""
ONE_YEAR_DISCOUNT = 0.9797862861805930


def tables(
    job: str,
    contract,
    t,
    spots,
    vol,
    drift,
    correlation,
    discounts,
    *,
    paths: int,
    detvals=None,
    bits: int = 30,
    directions: str = sobol.JOE_KUO,
    precision: str = "fp64",
    terms=None,
) -> dict:
    """The input tables of one job. ``spots`` [M, U], ``vol`` and ``drift`` [M, T, U], ``correlation``
    [M, U, U], ``discounts`` [M, K] and ``detvals`` [M, K'] (arrays with fewer leading axes are one model);
    ``terms`` maps a term name to a number or a sequence (mc_terms)."""
    t = np.asarray(t, dtype=np.float64)
    spots = np.atleast_2d(spots)
    models, underlyings = spots.shape
    vol, drift = (np.broadcast_to(np.asarray(a, dtype=np.float64), (models, len(t), underlyings)) for a in (vol, drift))
    correlation = np.broadcast_to(np.asarray(correlation, dtype=np.float64), (models, underlyings, underlyings))
    discounts = np.atleast_2d(discounts)
    detvals = np.zeros((models, 0)) if detvals is None else np.atleast_2d(detvals)
    m, j = np.meshgrid(np.arange(models), np.arange(underlyings), indexing="ij")
    mm, tt, jj = np.meshgrid(np.arange(models), np.arange(len(t)), np.arange(underlyings), indexing="ij")
    ci = np.meshgrid(np.arange(models), np.arange(underlyings), np.arange(underlyings), indexing="ij")

    def per_k(values, column):
        mk, kk = np.meshgrid(np.arange(values.shape[0]), np.arange(values.shape[1]), indexing="ij")
        return pd.DataFrame(dict(job=job, model=mk.ravel(), k=kk.ravel(), **{column: values.ravel()}))

    rows = [(name, k, float(v)) for name, value in (terms or {}).items() for k, v in enumerate(np.atleast_1d(value))]
    return {
        "mc_jobs": pd.DataFrame(
            [dict(job=job, contract=contract, paths=paths, sobol_bits=bits, directions=directions, precision=precision)]
        ),
        "mc_dates": pd.DataFrame(dict(job=job, date_index=np.arange(1, len(t) + 1), t=t)),
        "mc_spots": pd.DataFrame(dict(job=job, model=m.ravel(), underlying=j.ravel(), spot=spots.ravel())),
        "mc_diffusion": pd.DataFrame(
            dict(
                job=job,
                model=mm.ravel(),
                date_index=tt.ravel() + 1,
                underlying=jj.ravel(),
                vol=vol.ravel(),
                drift=drift.ravel(),
            )
        ),
        "mc_correlation": pd.DataFrame(
            dict(job=job, model=ci[0].ravel(), i=ci[1].ravel(), j=ci[2].ravel(), value=correlation.ravel())
        ),
        "mc_cashflows": per_k(discounts, "discount"),
        "mc_detvals": per_k(detvals, "value"),
        "mc_terms": pd.DataFrame(rows, columns=["term", "k", "value"]).assign(job=job),
    }


def large(paths: int = 2**17, precision: str = "fp64", job: str = "large") -> dict:
    """The large set's shape: contract 3 over 367 daily dates and three indices (see the module)."""
    days = np.arange(367)
    t = days / 365.0
    dt = np.diff(np.concatenate([[0.0], t]))[:, None]
    vol = np.where(days[:, None] == 0, 0.0, np.array(MEDIUM_VOLS)[None, :])
    drift = np.array(MEDIUM_DRIFTS)[None, :] * 365.0 / 366.0 * dt
    return tables(
        job,
        3,
        t,
        np.array(INDEX_LEVELS),
        vol,
        drift,
        MEDIUM_CORRELATION,
        [ONE_YEAR_DISCOUNT, ONE_YEAR_DISCOUNT],
        paths=paths,
        precision=precision,
    )
