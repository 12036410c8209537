"""The CPU engine: numba, tasks of consecutive paths on threads, vector code across the paths of a block.

A range of paths is cut into tasks at batch boundaries and at multiples of :data:`TASK_PATHS` (counted
from path 0, so that ranges split there give the same tasks), which numba's number of threads take in
pieces as they come free. A task walks *blocks* of :func:`lanes` consecutive paths aligned to a multiple
of their number. A block's data are laid out [dimension or date] [underlying] [lane], so that each step of
the pipeline is a loop over the lanes that the compiler turns into SIMD code (4 doubles or 8 floats an
instruction with AVX2); the constants of AS241, exp and log are frozen into the instructions, and exp and
log are written out in arithmetic (:mod:`elementary`) so that they vectorise too. Block by block, a *chunk*
of bridge steps at a time (their normals stay in the L1 cache):

1. Sobol integers of the chunk's dimensions, x = the block's base point XOR a lane offset
   (:func:`sobol.lane_offsets`, :func:`sobol.leap`), and uniforms x · 2^-bits in the job's precision;
2. normals by AS241 (:func:`normal.fill`: the central rational and tail flags on all, the 15 % of tails
   gathered, computed in vector code and scattered back);
3. the Brownian bridge, W kept in a few registers per lane (:func:`bridge.schedule`, as in the CUDA
   kernel), and the increments dW of each date as soon as it is complete;
4. per model, ε = L·dW and the path: y += ε·vol + drift with y = log(S / S0) in fp64 jobs (no exp per date),
   S = S0 · Π exp(ε·vol + drift) in fp32 jobs (:attr:`Job.logarithmic`); the contract's observation of the
   date (:func:`contracts.observe`) and, after the last, the payoff (:func:`contracts.settle`).

Payoffs are summed in float64 per lane over a task's blocks, then over the lanes in order: a fixed order
that depends only on the task. Arithmetic is in the job's precision (exp and log in float64, rounded);
the CUDA kernel's device functions (``kernels/montecarlo.cuh``) repeat it operation by operation, and a
test holds the two to the same bits.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from . import contracts, elementary, normal, sobol
from .job import Job, batch_starts

TASK_PATHS = 2048
"""Paths per task: enough to pay for starting a Sobol point, few enough to balance the threads."""
PIECES_PER_THREAD = 8
"""Pieces of consecutive tasks per thread, taken as threads come free."""
MIN_LANES, MAX_LANES = 16, 256
"""The fewest and most paths of a block (powers of two dividing TASK_PATHS)."""
OFFSET_ENTRIES = 1 << 16
"""Sobol lane offsets held per job (dimensions × lanes, 256 KB): fewer lanes for many dimensions."""
CHUNK_NORMALS = 1024
"""Normals drawn at a time within a block (whole bridge steps, at least one): they stay in the L1 cache."""
STAGES = ("sobol", "inverse_normal", "bridge", "paths_payoff")
"""The pipeline's stages, in order; :func:`walk` may stop after any of them (for timing)."""


def lanes(job: Job) -> int:
    """Paths per block: a power of two, at most MAX_LANES, with dims × lanes ≤ OFFSET_ENTRIES where it can."""
    wanted = max(1, OFFSET_ENTRIES // job.dims)
    return int(min(MAX_LANES, max(MIN_LANES, 1 << (wanted.bit_length() - 1))))


@numba.njit(cache=True, error_model="numpy", inline="always")
def _uniforms(directions, offsets, base, block, shift, d0, rows, scale, u):
    """1. u[r · lanes + b] = x · scale (scale = 2^-bits) of dimensions d0 … d0 + rows − 1 of the block's
    lanes; ``base`` moves on to the next block's base point."""
    width = offsets.shape[1]
    column = sobol.leap_column(block, shift)
    for r in range(rows):
        d = d0 + r
        origin, leap = base[d], sobol.leap(directions, d, shift, column)
        for b in range(width):
            x = origin ^ offsets[d, b] ^ (leap if b == width - 1 else np.uint32(0))
            u[r * width + b] = elementary.to_real(x, scale) * scale
        base[d] = origin ^ leap


@numba.njit(cache=True, error_model="numpy", inline="always")
def _bridge_step(i, z, at, slot, left_slot, right_slot, sd, lw, rw, w):
    """3. W of bridge step i in register slot[i] (w [slots, U, lanes]) from the normals z[at + j · lanes + b]."""
    width = w.shape[2]
    s, right, left = slot[i], right_slot[i], left_slot[i]
    for j in range(w.shape[1]):
        row = at + j * width
        if i == 0:
            for b in range(width):
                w[s, j, b] = sd[0] * z[row + b]
        elif left != 0:
            for b in range(width):
                w[s, j, b] = rw[i] * w[right, j, b] + sd[i] * z[row + b] + lw[i] * w[left, j, b]
        else:
            for b in range(width):
                w[s, j, b] = rw[i] * w[right, j, b] + sd[i] * z[row + b]


@numba.njit(cache=True, error_model="numpy", inline="always")
def _increments(w, now, previous, dw):
    """3. dW = W[date] − W[date − 1] (W[date] in register ``now``), [U, lanes]."""
    for j in range(w.shape[1]):
        for b in range(w.shape[2]):
            dw[j, b] = w[now, j, b] - previous[j, b]
            previous[j, b] = w[now, j, b]


@numba.njit(cache=True, error_model="numpy", inline="always")
def _advance(m, date, dw, chol, vol, drift, spots, logarithmic, eps, growth, level):
    """4. Model m's paths over one date: ε = L dW (l ascending), and the level [M, U, lanes]: y += ε·vol +
    drift (logarithmic) or growth *= exp(ε·vol + drift), S = S0 · growth."""
    width = dw.shape[1]
    for j in range(dw.shape[0]):
        for b in range(width):
            eps[b] = chol[m, j, 0] * dw[0, b]
        for k in range(1, j + 1):
            for b in range(width):
                eps[b] = eps[b] + chol[m, j, k] * dw[k, b]
        v, mu, spot = vol[m, date, j], drift[m, date, j], spots[m, j]
        if logarithmic:
            for b in range(width):
                level[m, j, b] = level[m, j, b] + (eps[b] * v + mu)
        else:
            for b in range(width):
                growth[m, j, b] = growth[m, j, b] * elementary.exp(eps[b] * v + mu)
                level[m, j, b] = spot * growth[m, j, b]


@numba.njit(cache=True, error_model="numpy", inline="always")
def _prices(m, spots, logarithmic, level, prices):
    """4. The prices S [U, lanes] of model m from its level: S0 · e^y (logarithmic) or S itself."""
    for j in range(level.shape[1]):
        spot = spots[m, j]
        if logarithmic:
            for b in range(level.shape[2]):
                prices[j, b] = spot * elementary.exp(level[m, j, b])
        else:
            for b in range(level.shape[2]):
                prices[j, b] = level[m, j, b]


@numba.njit(cache=True, error_model="numpy")
def walk(
    directions,
    offsets,
    scale,
    slot,
    left_slot,
    right_slot,
    emit_start,
    emit_slots,
    sd,
    lw,
    rw,
    spots,
    vol,
    drift,
    chol,
    disc,
    detval,
    code,
    terms,
    logarithmic,
    thresholds,
    first,
    count,
    stages,
    sums,
    row,
    payoffs,
):
    """Paths first … first + count − 1 (0-based k; Sobol index k + 1), in blocks of as many paths as
    ``offsets`` has lanes: adds each model's payoff to sums[row, m] and, if ``payoffs`` has columns, writes
    it to payoffs[m, k − first]. ``stages`` < 4 stops the pipeline after that many :data:`STAGES` (payoffs
    are then not computed)."""
    dims, dates, models, underlyings = directions.shape[0], sd.shape[0], spots.shape[0], spots.shape[1]
    width = offsets.shape[1]
    shift = 0
    while (1 << shift) < width:
        shift += 1
    steps = max(1, CHUNK_NORMALS // (underlyings * width))  # bridge steps per chunk
    base = np.empty(dims, np.uint32)
    u = np.empty(steps * underlyings * width, sd.dtype)
    z = np.empty_like(u)
    spare = normal.scratch(u.shape[0], u)
    w = np.zeros((slot.max() + 1, underlyings, width), sd.dtype)
    previous, dw = np.empty((underlyings, width), sd.dtype), np.empty((underlyings, width), sd.dtype)
    eps, flags = np.empty(width, sd.dtype), np.empty(width, np.int32)
    growth = np.empty((models, underlyings, width), sd.dtype)
    level = np.empty_like(growth)
    state = np.empty((models, width), np.int32)
    prices = np.empty((underlyings + 1, width), sd.dtype)
    values, totals = np.zeros((models, width)), np.zeros((models, width))
    last, end = dates - 1, first + count
    block = first >> shift
    sobol.start(directions, block << shift, base)
    while (block << shift) < end:
        previous[:] = 0
        growth[:] = 1
        level[:] = 0
        state[:] = last if code == 2 else 0
        for i0 in range(0, dates, steps):
            i1 = min(dates, i0 + steps)
            rows = (i1 - i0) * underlyings
            _uniforms(directions, offsets, base, block, shift, i0 * underlyings, rows, scale, u)
            if stages < 2:
                continue
            normal.fill(u, z, rows * width, spare)
            if stages < 3:
                continue
            for i in range(i0, i1):
                _bridge_step(i, z, (i - i0) * underlyings * width, slot, left_slot, right_slot, sd, lw, rw, w)
                for date in range(emit_start[i], emit_start[i + 1]):  # dates complete after step i
                    _increments(w, emit_slots[date], previous, dw)
                    if stages < 4:
                        continue
                    for m in range(models):
                        _advance(m, date, dw, chol, vol, drift, spots, logarithmic, eps, growth, level)
                        contracts.observe(code, thresholds, date, last, level, state, m, flags, width)
                        if date == last:
                            _prices(m, spots, logarithmic, level, prices)
                            contracts.settle(code, terms, disc, detval, last, prices, state, m, values, width)
        if stages == len(STAGES):
            k0 = block << shift
            lo, hi = max(first - k0, 0), min(end - k0, width)
            for m in range(models):
                for b in range(width):
                    totals[m, b] += values[m, b] if lo <= b < hi else 0.0
                if payoffs.shape[1]:
                    for b in range(lo, hi):
                        payoffs[m, k0 + b - first] = values[m, b]
        block += 1
    for m in range(models):
        total = 0.0
        for b in range(width):
            total += totals[m, b]
        sums[row, m] += total


@numba.njit(cache=True, error_model="numpy", nogil=True)
def _walk_tasks(
    directions,
    offsets,
    scale,
    slot,
    left_slot,
    right_slot,
    emit_start,
    emit_slots,
    sd,
    lw,
    rw,
    spots,
    vol,
    drift,
    chol,
    disc,
    detval,
    code,
    terms,
    logarithmic,
    thresholds,
    task_first,
    task_count,
    stages,
    sums,
    lo,
    hi,
):
    """Tasks lo … hi − 1 (:func:`walk` each into its row of ``sums``), without the GIL."""
    none = np.empty((0, 0))
    for i in range(lo, hi):
        walk(
            directions,
            offsets,
            scale,
            slot,
            left_slot,
            right_slot,
            emit_start,
            emit_slots,
            sd,
            lw,
            rw,
            spots,
            vol,
            drift,
            chol,
            disc,
            detval,
            code,
            terms,
            logarithmic,
            thresholds,
            task_first[i],
            task_count[i],
            stages,
            sums,
            i,
            none,
        )


def _run_tasks(args: tuple, task_first: np.ndarray, task_count: np.ndarray, sums: np.ndarray) -> None:
    """Every task on numba's number of threads: pieces of consecutive tasks, taken by the threads as they
    come free (a core that other work slows takes fewer)."""
    count = len(task_first)
    threads = min(numba.get_num_threads(), count)

    def run(lo, hi):
        _walk_tasks(*args, task_first, task_count, len(STAGES), sums, lo, hi)

    if threads <= 1:
        run(0, count)
        return
    edges = np.linspace(0, count, min(count, PIECES_PER_THREAD * threads) + 1).round().astype(np.int64)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(run, edges[:-1], edges[1:]))


def arguments(job: Job) -> tuple:
    """The job's arrays as the compiled functions read them, in the job's precision."""
    real = job.dtype
    plan = job.bridge.plan
    return (
        job.directions,
        sobol.lane_offsets(job.directions, lanes(job)),
        real(2.0**-job.bits),
        plan.slot,
        plan.left_slot,
        plan.right_slot,
        plan.emit_start,
        plan.emit_slots,
        *job.bridge.astype(real),
        job.spots.astype(real),
        job.vol.astype(real),
        job.drift.astype(real),
        job.cholesky.astype(real),
        job.discounts.astype(real),
        job.detvals.astype(real),
        job.contract.code,
        job.contract.terms().astype(real),
        job.logarithmic,
        job.contract.thresholds(job.spots, job.logarithmic).astype(real),
    )


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
    _run_tasks(arguments(job), task_first, task_count, sums)
    out = np.zeros((len(job.models), len(batch_starts(job.paths)) - 1))
    for i, b in enumerate(batch):  # task order: a fixed order of addition
        out[:, b] += sums[i]
    return out


def path_payoffs(job: Job, first: int, count: int) -> np.ndarray:
    """Payoff of each path per model, float64 [M, count] (values of the job's precision); one thread."""
    payoffs = np.empty((len(job.models), count))
    walk(*arguments(job), first, count, len(STAGES), np.zeros((1, len(job.models))), 0, payoffs)
    return payoffs
