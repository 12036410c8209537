"""The GPU engine: CuPy launcher of ``kernels/montecarlo.cu`` (one path per thread; see the kernel's header).
CuPy is imported only when a launch or :func:`available` asks for it.

:func:`layout` (blocks, compile options, arguments) and :func:`fold` (block sums into batch sums) are plain
numpy, so that a host build of the kernel's arithmetic can be checked against the CPU engine without a
GPU; :func:`batch_sums` compiles (once per precision and shape, cached), uploads and launches.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from ..cuda import allow_shared, kernel_dir, load_kernel, require_cupy
from ..errors import OptionError
from . import elementary, normal
from .job import BATCHES, Job

SOURCE = "montecarlo.cu"
HEADER = "montecarlo.cuh"
MAX_THREADS = 256
MIN_THREADS = 32
MIN_PATHS = MIN_THREADS * BATCHES
"""The fewest paths the GPU engine prices: a block of MIN_THREADS paths must fit in a batch."""


@functools.cache
def fields() -> tuple[tuple[str, str], ...]:
    """(C type, name) of the kernel's arguments before ``sums``, read from the X-macro MC_FIELDS of the
    header, the one place they are declared."""
    text = (kernel_dir() / HEADER).read_text()
    block = re.search(r"#define MC_FIELDS\(X\)(.*?)\n\n", text, re.S).group(1)
    return tuple((kind.strip(), name) for kind, name in re.findall(r"X\(([^,]+),\s*(\w+)\)", block))


@dataclass(frozen=True)
class Launch:
    """One kernel launch over a path range: block size, blocks, compile-time shape, named arguments."""

    threads: int
    blocks: int
    defines: tuple[tuple[str, int], ...]
    arguments: dict
    precision: str

    @property
    def shared_bytes(self) -> int:
        """The block's Sobol tables: per dimension x_{n0} and the direction numbers of the log2(threads) low
        bits, 4 bytes each."""
        dims = len(self.arguments["directions"]) // int(self.arguments["bits"])
        return 4 * dims * self.threads.bit_length()


def layout(job: Job, first: int, count: int) -> Launch:
    """The launch pricing paths first … first + count − 1: blocks of ``threads`` Sobol indices aligned to
    multiples of ``threads`` and no longer than a batch; arguments in the job's precision."""
    shortest_batch = job.paths // BATCHES
    if shortest_batch < MIN_THREADS:
        raise OptionError(
            f"job '{job.name}': the GPU engine needs at least {MIN_PATHS} paths "
            f"(a block of {MIN_THREADS} must fit in one of {BATCHES} batches); use the cpu engine"
        )
    threads = min(MAX_THREADS, 1 << (shortest_batch.bit_length() - 1))
    real = job.dtype
    plan = job.bridge.plan
    sd, lw, rw = job.bridge.astype(real)
    blocks = (first + count) // threads - (first + 1) // threads + 1 if count else 0
    arguments = dict(
        directions=np.ascontiguousarray(job.directions, dtype=np.uint32).ravel(),
        bits=np.int32(job.bits),
        dates=np.int32(job.dates),
        slot=plan.slot,
        left_slot=plan.left_slot,
        right_slot=plan.right_slot,
        emit_start=plan.emit_start,
        emit_slots=plan.emit_slots,
        sd=sd,
        lw=lw,
        rw=rw,
        spots=job.spots.astype(real).ravel(),
        vol=job.vol.astype(real).ravel(),
        drift=job.drift.astype(real).ravel(),
        chol=job.cholesky.astype(real).ravel(),
        disc=job.discounts.astype(real).ravel(),
        cashflows=np.int32(job.discounts.shape[1]),
        detval=np.ascontiguousarray(job.detvals.astype(real).ravel()),
        detvals=np.int32(job.detvals.shape[1]),
        terms=job.contract.terms().astype(real),
        logarithmic=np.int32(job.logarithmic),
        thresholds=job.contract.thresholds(job.spots, job.logarithmic).astype(real).ravel(),
        elementary=elementary.CONSTANTS,
        constants=normal.constants(real),
        scale=real(2.0**-job.bits),
        first=np.int64(first),
        count=np.int64(count),
        paths=np.int64(job.paths),
    )
    if len(arguments["detval"]) == 0:
        arguments["detval"] = np.zeros(1, dtype=real)  # a valid pointer for contracts without detvals
    defines = (
        ("MC_UNDERLYINGS", job.underlyings),
        ("MC_SLOTS", plan.slots),
        ("MC_CONTRACT", job.contract.code),
        ("MC_THREADS", threads),
    )
    return Launch(threads, blocks, defines, arguments, job.precision)


def fold(job: Job, launch: Launch, sums: np.ndarray) -> np.ndarray:
    """Batch sums [M, BATCHES] from the kernel's block sums [M, blocks, 2], blocks added in order."""
    first = int(launch.arguments["first"])
    out = np.zeros((BATCHES + 1, len(job.models)))  # row BATCHES takes what spills past the last batch
    n0 = ((first + 1) // launch.threads + np.arange(launch.blocks)) * launch.threads
    batch = np.maximum(n0 - 1, first) * BATCHES // job.paths
    # Batches rise with the block, so a batch receives the second parts of the blocks that start in the batch
    # before it, then the first parts of its own blocks, each in block order: the order of a loop over blocks.
    np.add.at(out, batch + 1, sums[:, :, 1].T)
    np.add.at(out, batch, sums[:, :, 0].T)
    return np.ascontiguousarray(out[:BATCHES].T)


def _kernel(precision: str, defines: tuple[tuple[str, int], ...]):
    """The compiled kernel for a precision and shape (:func:`~distprice.cuda.load_kernel`: once per process; CuPy
    caches on disk too)."""
    real = {"fp64": "double", "fp32": "float"}[precision]
    return load_kernel(SOURCE, "mc_batch_sums", ("-std=c++17", f"-DREAL={real}", *(f"-D{k}={v}" for k, v in defines)))


def batch_sums(job: Job, first: int, count: int) -> np.ndarray:
    """Sums of the payoffs of paths first … first + count − 1 in each batch, float64 [M, BATCHES]."""
    launch = layout(job, first, count)
    if launch.blocks == 0:
        return np.zeros((len(job.models), BATCHES))
    cupy = require_cupy()
    kernel = _kernel(launch.precision, launch.defines)
    allow_shared(kernel, launch.shared_bytes)
    args = [
        cupy.asarray(value) if isinstance(value, np.ndarray) else value
        for value in (launch.arguments[name] for _, name in fields())
    ]
    sums = cupy.empty((len(job.models), launch.blocks, 2), dtype=cupy.float64)
    kernel((launch.blocks, len(job.models)), (launch.threads,), (*args, sums), shared_mem=launch.shared_bytes)
    return fold(job, launch, cupy.asnumpy(sums))
