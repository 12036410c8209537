"""The reference engine: the contract's steps one at a time over arrays of paths (numpy), written to be read.

Paths k = first … first + count − 1 use Sobol indices n = k + 1. Arithmetic is in the job's precision;
sums are in float64.
"""

from __future__ import annotations

import numpy as np

from . import normal, sobol
from .bridge import increments
from .job import Job, batch_starts

BLOCK_NORMALS = 1 << 22
"""Normals held at a time (paths per block × dimensions): about 32 MB of float64 per stage."""


def normals(job: Job, first: int, count: int) -> np.ndarray:
    """Standard normals z [count, T, U] of paths first …: Sobol integers, uniforms x / 2^bits, Φ⁻¹."""
    x = sobol.points(job.directions, first + 1, count)
    u = x.astype(job.dtype) * job.dtype(2.0**-job.bits)
    return normal.inverse_normal(u).reshape(count, job.dates, job.underlyings)


def black_scholes(job: Job, model: int, dw: np.ndarray) -> np.ndarray:
    """Prices S [paths, T, U] of ``model`` from Wiener increments dW [paths, T, U]:
    ε[t][j] = Σ_{l ≤ j} L[j][l] dW[t][l],  S[t][j] = S0[j] · Π_{s ≤ t} exp(ε[s][j] vol[s][j] + drift[s][j])."""
    real = job.dtype
    chol = job.cholesky[model].astype(real)
    eps = np.empty_like(dw)
    for j in range(job.underlyings):
        eps[..., j] = chol[j, 0] * dw[..., 0]
        for l in range(1, j + 1):
            eps[..., j] += chol[j, l] * dw[..., l]
    growth = np.exp(eps * job.vol[model].astype(real) + job.drift[model].astype(real))
    return job.spots[model].astype(real) * np.cumprod(growth, axis=1)


def path_payoffs(job: Job, first: int, count: int) -> np.ndarray:
    """Payoff of each path per model, float64 [M, count] (values of the job's precision)."""
    out = np.empty((len(job.models), count))
    block = max(1, BLOCK_NORMALS // job.dims)
    real = job.dtype
    for start in range(0, count, block):
        size = min(block, count - start)
        dw = increments(job.bridge, normals(job, first + start, size))
        for m in range(len(job.models)):
            s = black_scholes(job, m, dw)
            out[m, start : start + size] = job.contract.payoff(
                s, job.discounts[m].astype(real), job.detvals[m].astype(real)
            )
    return out


def batch_sums(job: Job, first: int, count: int) -> np.ndarray:
    """Sums of the payoffs of paths first … first + count − 1 in each batch, float64 [M, BATCHES]."""
    payoffs = path_payoffs(job, first, count)
    edges = np.clip(batch_starts(job.paths) - first, 0, count)
    return np.stack([[payoffs[m, a:b].sum() for a, b in zip(edges[:-1], edges[1:])] for m in range(len(job.models))])
