"""The CPU engine: numba, parallel over tasks of consecutive paths.

A range of paths is cut into tasks at batch boundaries and at multiples of :data:`TASK_PATHS` (counted
from path 0, so that ranges split there give the same tasks). A task starts its Sobol point by the
independent formula and continues by the recurrence. It draws the normals of a block of paths at once
(the central branch of AS241 vectorised), takes the paths one by one through the bridge (once per path,
shared by the models) and each model's prices, then pays the block; payoffs are summed in float64 in
path order. The
arithmetic is in the job's precision (the constants, terms and market data cast to it).

The small stage functions are inlined into the path loop; the payoffs of a block are one call, because
numba, inlining the payoff, would count references to its array arguments (atomically) on every path.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from . import contracts, normal, sobol
from .job import Job, batch_starts

TASK_PATHS = 2048
"""Paths per task: enough to pay for the independent formula, few enough to balance the threads."""
BLOCK_NORMALS = 2048
"""Normals drawn at a time within a task (paths of a block × dimensions): they fit the L1 cache."""


@numba.njit(cache=True, inline="always")
def uniforms(x, scale, u, offset):
    """u[offset + d] = x[d] · scale for Sobol integers x, in u's precision (x is converted first)."""
    for d in range(x.shape[0]):
        u[offset + d] = x[d]
        u[offset + d] = u[offset + d] * scale


@numba.njit(cache=True, inline="always")
def bridge(z, offset, index, left, right, sd, lw, rw, w):
    """W[date, j] (w [T + 1, U], row 0 = time 0 = 0) from normals z[offset + i · U + j] (row i = step i)."""
    underlyings = w.shape[1]
    for j in range(underlyings):
        w[index[0], j] = sd[0] * z[offset + j]
    for i in range(1, index.shape[0]):
        for j in range(underlyings):
            step = rw[i] * w[right[i], j] + sd[i] * z[offset + i * underlyings + j]
            if left[i] != 0:
                step = step + lw[i] * w[left[i], j]
            w[index[i], j] = step


@numba.njit(cache=True, inline="always")
def black_scholes(w, m, spots, vol, drift, chol, dw, growth, s, p):
    """Prices s[m, p] ([T, U]) of model m from W (w [T + 1, U]): dW[t] = W[t] − W[t−1], ε = L dW
    (l ascending), growth *= exp(ε vol + drift), s = S0 · growth; ``dw`` and ``growth`` are scratch [U].
    (Arrays are indexed rather than sliced: a slice costs an atomic reference count per path.)"""
    dates, underlyings = s.shape[2], s.shape[3]
    for t in range(dates):
        for j in range(underlyings):
            dw[j] = w[t + 1, j] - w[t, j]
        for j in range(underlyings):
            eps = chol[m, j, 0] * dw[0]
            for l in range(1, j + 1):
                eps += chol[m, j, l] * dw[l]
            e = math.exp(eps * vol[m, t, j] + drift[m, t, j])
            growth[j] = e if t == 0 else growth[j] * e
            s[m, p, t, j] = spots[m, j] * growth[j]


@numba.njit(cache=True)
def _walk(directions, scale, constants, index, left, right, sd, lw, rw, spots, vol, drift, chol, disc, detval,
          code, terms, first, count, sums, row, payoffs):
    """Paths first … first + count − 1 (0-based k; Sobol index k + 1): adds each model's payoff to
    sums[row, m] and, if ``payoffs`` has columns, writes it to payoffs[m, p]."""
    dims, dates, underlyings = directions.shape[0], index.shape[0], spots.shape[1]
    block = max(1, BLOCK_NORMALS // dims)
    x = np.empty(dims, np.uint32)
    u = np.empty(block * dims, sd.dtype)
    z = np.empty(block * dims, sd.dtype)
    w = np.zeros((dates + 1, underlyings), sd.dtype)
    s = np.empty((spots.shape[0], block, dates, underlyings), sd.dtype)
    values = np.empty((spots.shape[0], block))
    dw = np.empty(underlyings, sd.dtype)
    growth = np.empty(underlyings, sd.dtype)
    total = np.zeros(spots.shape[0])          # summed here, not in ``sums``: threads share its lines
    keep = payoffs.shape[1] > 0
    sobol.start(directions, first + 1, x)
    for start in range(0, count, block):
        size = min(block, count - start)
        for b in range(size):
            if start + b:
                sobol.advance(directions, first + start + b, x)
            uniforms(x, scale, u, b * dims)
        normal.ppnd16_block(u, z, size * dims, constants)
        for b in range(size):
            bridge(z, b * dims, index, left, right, sd, lw, rw, w)
            for m in range(spots.shape[0]):
                black_scholes(w, m, spots, vol, drift, chol, dw, growth, s, b)
        for m in range(spots.shape[0]):
            contracts.payoffs(code, terms, s, m, size, disc, detval, values[m])
        for b in range(size):
            for m in range(spots.shape[0]):
                total[m] += values[m, b]
                if keep:
                    payoffs[m, start + b] = values[m, b]
    for m in range(spots.shape[0]):
        sums[row, m] += total[m]


@numba.njit(parallel=True, cache=True)
def _tasks(directions, scale, constants, index, left, right, sd, lw, rw, spots, vol, drift, chol, disc, detval,
           code, terms, task_first, task_count, sums):
    none = np.empty((0, 0))
    for i in numba.prange(task_first.shape[0]):
        _walk(directions, scale, constants, index, left, right, sd, lw, rw, spots, vol, drift, chol, disc, detval,
              code, terms, task_first[i], task_count[i], sums, i, none)


def arguments(job: Job) -> tuple:
    """The job's arrays as the compiled functions read them, in the job's precision."""
    real = job.dtype
    b = job.bridge
    return (job.directions, real(2.0**-job.bits), normal.constants(real), b.index, b.left, b.right,
            *b.astype(real), job.spots.astype(real), job.vol.astype(real), job.drift.astype(real),
            job.cholesky.astype(real), job.discounts.astype(real), job.detvals.astype(real),
            job.contract.code, job.contract.terms().astype(real))


def tasks(job: Job, first: int, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First path, path count and batch of each task of the range, in path order."""
    edges = np.union1d(batch_starts(job.paths), np.arange(0, job.paths + TASK_PATHS, TASK_PATHS))
    edges = np.unique(np.clip(edges, first, first + count))
    batch = np.searchsorted(batch_starts(job.paths), edges[:-1], side="right") - 1
    return edges[:-1], np.diff(edges), batch


def batch_sums(job: Job, first: int, count: int) -> np.ndarray:
    """Sums of the payoffs of paths first … first + count − 1 in each batch, float64 [M, BATCHES]."""
    task_first, task_count, batch = tasks(job, first, count)
    sums = np.zeros((len(task_first), len(job.models)))
    _tasks(*arguments(job), task_first, task_count, sums)
    out = np.zeros((len(job.models), len(batch_starts(job.paths)) - 1))
    for i, b in enumerate(batch):              # task order: a fixed order of addition
        out[:, b] += sums[i]
    return out


def path_payoffs(job: Job, first: int, count: int) -> np.ndarray:
    """Payoff of each path per model, float64 [M, count] (values of the job's precision); one thread."""
    payoffs = np.empty((len(job.models), count))
    _walk(*arguments(job), first, count, np.zeros((1, len(job.models))), 0, payoffs)
    return payoffs
