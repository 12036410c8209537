"""GPU engines: CuPy launchers for ``kernels/outer.cu`` (``gpu-outer``) and ``kernels/flat.cu`` (``gpu-flat``).

The CUDA sources are compiled once per process, precision and build option (NVRTC, through
``cupy.RawModule``). Host preprocessing (sorting, padding, bin packing) is vectorised numpy or numba and
timed apart from the kernels. Results come back as float64 arrays in the batch's row order.

Layouts (the papers' names):
- outer: one instrument per thread, instruments sorted by decreasing width, arrays padded per warp and
  transposed (V4); ``lanes`` and ``sort`` select the plain variants (V1: no interleave, V2: global
  padding) that the benchmarks compare against.
- flat: instruments sorted by decreasing height, packed into bins whose summed (padded) widths fit the
  block's ``nodes * threads`` nodes; one block per bin, ``nodes`` consecutive nodes per thread. Trees
  wider than FLAT_MAX_WIDTH take ``kernels/wide.cu``: one block per tree, rows in global memory.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import time
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np

from ..errors import Fp32OverflowError, GpuUnavailableError
from .batch import Batch, real_dtype

WARP = 32
FLAT_THREADS = (256, 512, 1024)
"""Block sizes the flat engine chooses from (and multiples of a uniform width: see choose_flat_shape)."""
FLAT_NODES = 2
"""Nodes per thread of the flat kernel, where the widest tree allows (measured: benchmarks/RESULTS.md)."""
FLAT_MAX_NODES = 4
FLAT_WINDOW = 16
"""Open bins a tree may join when packing (first fit over the last ones): a bin's heights stay close."""
FLAT_MAX_WIDTH = FLAT_MAX_NODES * FLAT_THREADS[-1]
"""Wider trees take the wide kernel: four rows of them no longer fit a block's shared memory in fp64."""
WIDE_THREADS = 1024
FLAT_REGISTERS = 64
"""Register cap per flat thread (through __launch_bounds__), so that 2048 threads fit a multiprocessor."""
OUTER_THREADS = 128
_MAX_EVENTS = 2**31 - 1



def require_gpu():
    """CuPy, once a CUDA device is known to be usable; raises :class:`GpuUnavailableError` otherwise."""
    try:
        import cupy
    except ImportError as error:
        raise GpuUnavailableError(f"the GPU engines need CuPy (pip install 'distprice[gpu]'): {error}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as error:
        raise GpuUnavailableError(f"no usable CUDA device: {error}") from None
    if count == 0:
        raise GpuUnavailableError("no CUDA device is visible")
    return cupy


@functools.cache
def gpu_available() -> bool:
    """Whether a CUDA GPU and CuPy are usable in this process."""
    try:
        require_gpu()
    except GpuUnavailableError:
        return False
    return True


def device_name() -> str:
    """The name of the current CUDA device (e.g. ``NVIDIA H100 80GB HBM3``)."""
    return _device_name(require_gpu().cuda.Device().id)


@functools.cache
def _device_name(device_id: int) -> str:
    # cudaGetDeviceProperties reads every property, some slowly (milliseconds): once per device
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(device_id)["name"].decode()


def kernel_dir() -> Path:
    """The CUDA sources: the installed package data, or ``kernels/`` beside the package in a source checkout."""
    try:
        return Path(str(importlib.resources.files("distprice.kernels")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "kernels"


@functools.cache
def _module(source: str, precision: str, defines: tuple[tuple[str, int], ...] = ()):
    """The compiled module of ``kernels/<source>`` for a precision and extra ``-D`` options (cached)."""
    cupy = require_gpu()
    kernels = kernel_dir()
    real = {"fp64": "double", "fp32": "float"}[precision]
    options = ("-std=c++17", f"-DREAL={real}", f"-I{kernels}", *(f"-D{k}={v}" for k, v in defines))
    return cupy.RawModule(code=(kernels / source).read_text(), options=options)


@dataclass
class GpuRun:
    """Prices of one engine call with its timings (seconds) and device memory (bytes)."""

    bond: np.ndarray
    option: np.ndarray
    seconds: dict[str, float] = field(default_factory=dict)
    device_bytes: int = 0
    detail: dict = field(default_factory=dict)


class _Device:
    """Device arrays of one call; counts the bytes it allocates (the engine's footprint)."""

    def __init__(self, cupy):
        self.cupy = cupy
        self.bytes = 0

    def put(self, array):
        array = np.ascontiguousarray(array)
        self.bytes += array.nbytes
        return self.cupy.asarray(array)

    def empty(self, shape, dtype):
        out = self.cupy.empty(shape, dtype=dtype)
        self.bytes += out.nbytes
        return out

    def poisoned(self, n):
        """float64 outputs filled with NaN, so that a row the kernel never wrote cannot pass."""
        out = self.cupy.full(n, np.nan)
        self.bytes += out.nbytes
        return out


_CURVES_AT = 8
"""Position of the curve arrays (:func:`_curve_arrays`) among the kernels' leading PORTFOLIO_PARAMS."""


def _curve_arrays(batch: Batch) -> tuple:
    """The curve knots the kernels read: each curve's first knot, knot times, zero rates."""
    return batch.curve_offsets.astype(np.int64), batch.curve_t, batch.curve_z


@dataclass(frozen=True)
class DeviceBook:
    """A batch's arrays on the device: the kernels' leading PORTFOLIO_PARAMS, in batch order."""

    args: tuple
    precision: str
    bytes: int
    rows: int

    def with_curves(self, batch: Batch) -> "DeviceBook":
        """The book of ``batch``, the uploaded batch under other curves (a market scenario,
        :meth:`Batch.with_curves`): only the curve knots are copied."""
        device = _Device(require_gpu())
        curves = tuple(device.put(a) for a in _curve_arrays(batch))
        end = _CURVES_AT + len(curves)
        return dataclasses.replace(self, args=self.args[:_CURVES_AT] + curves + self.args[end:])


def upload(batch: Batch, precision: str) -> DeviceBook:
    """Copies what every kernel reads of ``batch`` to the device (once per batch; parts of it share it)."""
    device = _Device(require_gpu())
    real = real_dtype(precision)
    g = batch.geometry
    coupons, exercises = batch.coupons, batch.exercises
    if max(len(coupons.step), len(exercises.step)) > _MAX_EVENTS:
        raise ValueError("a GPU chunk holds at most 2^31 - 1 coupon or exercise events; price it in smaller chunks")
    leading = (g.jmax.astype(np.int32), g.height.astype(np.int32), g.dt.astype(np.float64), g.dr.astype(np.float64),
               g.M.astype(np.float64), batch.face.astype(real), batch.is_call.astype(np.uint8),
               batch.curve_index.astype(np.int32))
    assert len(leading) == _CURVES_AT
    args = tuple(device.put(a) for a in (
        *leading, *_curve_arrays(batch),
        coupons.offsets.astype(np.int64), coupons.step.astype(np.int32), coupons.value.astype(real),
        exercises.offsets.astype(np.int64), exercises.step.astype(np.int32), exercises.value.astype(real),
        batch.option_from.astype(np.int32),
    ))
    return DeviceBook(args, precision, device.bytes, len(batch))


# ---- outer: layout ----

@dataclass(frozen=True)
class OuterLayout:
    """Instruments (``order``: kernel position -> batch row) grouped ``lanes`` at a time, padded per group."""

    order: np.ndarray
    lanes: int
    pitch: np.ndarray
    tallest: np.ndarray
    row_base: np.ndarray
    alpha_base: np.ndarray
    row_elements: int
    alpha_elements: int


def _exclusive_cumsum(values: np.ndarray) -> tuple[np.ndarray, int]:
    out = np.zeros(len(values), dtype=np.int64)
    np.cumsum(values[:-1], out=out[1:])
    return out, int(values.sum())


def outer_layout(width: np.ndarray, height: np.ndarray, lanes: int = WARP, sort: bool = True) -> OuterLayout:
    """Group, pad and transpose for the outer kernel: ``lanes`` 32 is warp padding (V4), ``len`` global (V2), 1 none (V1).

    With ``sort`` the instruments are taken by decreasing width (then height), so a warp's trees are alike.
    """
    n = len(width)
    order = np.lexsort((-height, -width)) if sort else np.arange(n)
    groups = -(-n // lanes)
    padded = np.zeros(groups * lanes, dtype=np.int64)
    padded[:n] = width[order]
    pitch = padded.reshape(groups, lanes).max(axis=1)
    padded[:n] = height[order]
    tallest = padded.reshape(groups, lanes).max(axis=1)
    row_base, row_elements = _exclusive_cumsum(2 * pitch * lanes)
    alpha_base, alpha_elements = _exclusive_cumsum(tallest * lanes)
    return OuterLayout(order.astype(np.int64), lanes, pitch.astype(np.int32), tallest, row_base, alpha_base,
                       row_elements, alpha_elements)


# ---- flat: bin packing ----

@numba.njit(cache=True)
def _first_fit(widths, capacity, window):
    """Bin of each item, placed in order into the first of the last ``window`` open bins it fits."""
    n = len(widths)
    bin_of = np.empty(n, dtype=np.int64)
    free = np.empty(n, dtype=np.int64)
    bins = 0
    for i in range(n):
        w = widths[i]
        placed = -1
        for b in range(max(0, bins - window), bins):
            if free[b] >= w:
                placed = b
                break
        if placed < 0:
            placed = bins
            free[bins] = capacity
            bins += 1
        free[placed] -= w
        bin_of[i] = placed
    return bin_of


@dataclass(frozen=True)
class FlatLayout:
    """Bins of instruments for the flat kernel: bin b holds kernel positions ``bin_first[b] .. bin_first[b+1]``;
    each tree takes its width rounded up to ``nodes`` nodes, starting at ``node_offset`` within its bin."""

    order: np.ndarray
    nodes: int
    threads: int
    bin_first: np.ndarray
    node_offset: np.ndarray
    bin_height: np.ndarray
    alpha_base: np.ndarray
    alpha_elements: int

    @property
    def capacity(self) -> int:
        return self.nodes * self.threads

    @property
    def bins(self) -> int:
        return len(self.bin_height)

    def thread_steps(self) -> int:
        """Node-steps the kernel runs, idle nodes and padded loop counts included (forward + backward)."""
        return int(2 * self.capacity * self.bin_height.astype(np.int64).sum())


def padded_width(width: np.ndarray, nodes: int) -> np.ndarray:
    return -(-width // nodes) * nodes


def _by_height(width: np.ndarray, height: np.ndarray, nodes: int):
    """Positions by decreasing height (then width), the order trees are packed in, and their padded widths."""
    by_height = np.lexsort((-width, -height))
    return by_height, padded_width(width.astype(np.int64), nodes)[by_height]


def _thread_steps(padded: np.ndarray, height: np.ndarray, capacity: int, window: int = FLAT_WINDOW) -> int:
    """:meth:`FlatLayout.thread_steps` of trees already in packing order, without laying the bins out: a
    bin is as tall as the tree that opened it (trees come tallest first)."""
    bin_of = _first_fit(padded, capacity, window)
    opened = np.ones(len(bin_of), dtype=bool)
    opened[1:] = bin_of[1:] > np.maximum.accumulate(bin_of)[:-1]
    return int(2 * capacity * height[opened].astype(np.int64).sum())


def flat_thread_steps(width: np.ndarray, height: np.ndarray, threads: int, nodes: int = FLAT_NODES,
                      window: int = FLAT_WINDOW) -> int:
    """``flat_layout(width, height, threads, nodes).thread_steps()``, cheaper (the bins are not laid out)."""
    by_height, padded = _by_height(width, height, nodes)
    return _thread_steps(padded, height[by_height], nodes * threads, window)


def flat_layout(width: np.ndarray, height: np.ndarray, threads: int, nodes: int = FLAT_NODES,
                window: int = FLAT_WINDOW) -> FlatLayout:
    """Sort by decreasing height (then width), pack into bins of ``nodes * threads`` nodes (first fit over the
    last ``window`` open bins, so a bin's heights stay close), and lay out the bins' alphas."""
    capacity = nodes * threads
    by_height, sorted_padded = _by_height(width, height, nodes)
    if len(width) and sorted_padded.max() > capacity:
        raise ValueError(f"a tree of width {int(width.max())} does not fit a bin of {capacity} nodes")
    bin_of = _first_fit(sorted_padded, capacity, window)
    grouped = np.argsort(bin_of, kind="stable")
    order = by_height[grouped]
    bin_of = bin_of[grouped]
    bins = int(bin_of[-1]) + 1 if len(bin_of) else 0
    bin_first = np.searchsorted(bin_of, np.arange(bins + 1)).astype(np.int32)
    starts, _ = _exclusive_cumsum(sorted_padded[grouped])
    node_offset = (starts - starts[bin_first[:-1]][bin_of]).astype(np.int32)
    bin_height = np.maximum.reduceat(height[order], bin_first[:-1]) if bins else np.zeros(0, np.int64)
    alpha_base, alpha_elements = _exclusive_cumsum(bin_height.astype(np.int64) * np.diff(bin_first))
    return FlatLayout(order.astype(np.int64), nodes, threads, bin_first, node_offset, bin_height.astype(np.int32),
                      alpha_base, alpha_elements)


def block_cost_factor(threads: int) -> float:
    """Relative cost of one node-step in blocks of ``threads`` threads (1 at 256 or fewer).

    Smaller blocks run faster per node-step: more of them share a multiprocessor, so one block's barrier
    waits overlap another's work. Measured on an H100 (benchmarks/RESULTS.md): per node-step run, 512
    threads cost 1.07-1.12x and 1024 threads 1.19-1.23x what 256 threads cost, on R1 and S1 alike.
    """
    return 1.0 + 0.22 * max(threads - 256, 0) / 768


FLAT_SHAPE_SAMPLE = 4096
"""Rows packed per candidate shape in :func:`choose_flat_shape` (evenly spaced over the portfolio)."""


def shape_sample(width: np.ndarray, size: int) -> np.ndarray:
    """Positions of about ``size`` trees evenly spaced over the portfolio, always with the widest (it decides
    which block shapes fit); every position when there are no more than ``size``."""
    n = len(width)
    if n <= size:
        return np.arange(n)
    sample = np.linspace(0, n - 1, size).astype(np.int64)  # increasing: the step is at least 1
    widest = int(np.argmax(width))
    at = int(np.searchsorted(sample, widest))
    return sample if at < size and sample[at] == widest else np.insert(sample, at, widest)


def choose_flat_shape(width: np.ndarray, height: np.ndarray, nodes: int | None = None) -> tuple[int, int]:
    """``(nodes, threads)`` of the flat blocks: the lowest predicted cost, i.e. node-steps run (idle nodes and
    padded loop counts included) times :func:`block_cost_factor`, judged on a sample of FLAT_SHAPE_SAMPLE rows
    (packing every row once per candidate would cost more host time than most kernels take).

    ``nodes`` is FLAT_NODES unless the widest tree needs more. Thread counts: FLAT_THREADS and, for
    portfolios of one or a few widths, 1 to 4 of the widest tree in whole warps (U1's width 259, 260
    padded, packs two to a block of 288 threads with 10% of the nodes idle, but one to 256 threads).
    """
    widest = int(width.max())
    if nodes is None:
        nodes = FLAT_NODES
        while nodes * FLAT_THREADS[-1] < widest and nodes < FLAT_MAX_NODES:
            nodes *= 2
    per_thread = -(-int(padded_width(np.array([widest]), nodes)[0]) // nodes)
    multiples = {-(-m * per_thread // WARP) * WARP for m in range(1, 5)}
    fits = sorted(c for c in {*FLAT_THREADS, *multiples} if per_thread <= c <= FLAT_THREADS[-1])
    if not fits:
        raise ValueError(f"a tree of width {widest} does not fit a flat block of {nodes} nodes per thread")
    sample = shape_sample(width, FLAT_SHAPE_SAMPLE)
    by_height, padded = _by_height(width[sample], height[sample], nodes)
    tallest_first = height[sample][by_height]
    threads = min(fits, key=lambda c: _thread_steps(padded, tallest_first, nodes * c) * block_cost_factor(c))
    return nodes, threads


def flat_shared_bytes(layout: FlatLayout, precision: str) -> int:
    """Dynamic shared memory of a flat block (mirrors the carve-up in flat.cu)."""
    real = np.dtype(real_dtype(precision)).itemsize
    return (4 * (layout.capacity + 4) + 64) * real + (layout.capacity // 3 + 2) * 4


# ---- launches ----

def _launch_outer(cupy, device, book, rows_idx, layout: OuterLayout, precision, bond, option, defines=()):
    kernel = _module("outer.cu", precision, (("OUTER_THREADS", OUTER_THREADS), *defines)).get_function("outer_price")
    real = real_dtype(precision)
    order = device.put(rows_idx[layout.order])
    rows = device.empty(max(layout.row_elements, 1), real)
    alphas = device.empty(max(layout.alpha_elements, 1), real)
    n = len(layout.order)
    args = (*book, np.int32(n), order, np.int32(layout.lanes), device.put(layout.row_base),
            device.put(layout.pitch), device.put(layout.alpha_base), rows, alphas, bond, option)
    return lambda: kernel((-(-n // OUTER_THREADS),), (OUTER_THREADS,), args)


def _launch_flat(cupy, device, book, rows_idx, layout: FlatLayout, precision, bond, option, defines=()):
    build = {"FLAT_NODES": layout.nodes, "FLAT_MAX_THREADS": layout.threads,
             "FLAT_MIN_BLOCKS": max(1, 65536 // (FLAT_REGISTERS * layout.threads)), **dict(defines)}
    kernel = _module("flat.cu", precision, tuple(sorted(build.items()))).get_function("flat_price")
    real = real_dtype(precision)
    shared = flat_shared_bytes(layout, precision)
    kernel.max_dynamic_shared_size_bytes = shared
    args = (*book, device.put(rows_idx[layout.order]), device.put(layout.bin_first), device.put(layout.node_offset),
            device.put(layout.bin_height), device.put(layout.alpha_base),
            device.empty(max(layout.alpha_elements, 1), real), bond, option)
    return lambda: kernel((layout.bins,), (layout.threads,), args, shared_mem=shared)


def _launch_wide(cupy, device, book, rows_idx, width, height, precision, bond, option):
    kernel = _module("wide.cu", precision, (("WIDE_THREADS", WIDE_THREADS),)).get_function("wide_price")
    real = real_dtype(precision)
    row_base, row_elements = _exclusive_cumsum(5 * (width.astype(np.int64) + 4))
    alpha_base, alpha_elements = _exclusive_cumsum(height.astype(np.int64))
    args = (*book, device.put(rows_idx), device.put(row_base), device.put(alpha_base),
            device.empty(row_elements, real), device.empty(alpha_elements, real), bond, option)
    return lambda: kernel((len(rows_idx),), (WIDE_THREADS,), args)


@dataclass
class PendingRun:
    """Kernels launched and not waited for; :meth:`finish` waits, downloads and checks."""

    cupy: object
    kernel: str
    precision: str
    rows: np.ndarray
    bond: object
    option: object
    started: object
    stopped: object
    seconds: dict
    device_bytes: int
    detail: dict
    check_finite: bool
    layouts: dict
    """The layouts launched, for another run of the same rows (:func:`start_gpu`'s ``layouts``)."""

    def finish(self) -> GpuRun:
        self.stopped.synchronize()
        seconds = dict(self.seconds, kernel=self.cupy.cuda.get_elapsed_time(self.started, self.stopped) / 1e3)
        tick = time.perf_counter()
        bond, option = self.cupy.asnumpy(self.bond), self.cupy.asnumpy(self.option)
        seconds["download"] = time.perf_counter() - tick
        rows = self.rows
        bad = rows[~np.isfinite(bond[rows]) | ~np.isfinite(option[rows])]
        if self.check_finite and len(bad):
            if self.precision == "fp32":
                raise Fp32OverflowError(f"fp32 overflowed on {len(bad)} rows (first: batch row {bad[0]}); "
                                        "price them in fp64")
            raise RuntimeError(f"the {self.kernel} kernel left {len(bad)} rows unpriced (first: batch row {bad[0]})")
        return GpuRun(bond, option, seconds, self.device_bytes, self.detail)


def start_gpu(batch: Batch, kernel: str, precision: str = "fp64", *, lanes: int | None = WARP, sort: bool = True,
              threads: int | None = None, nodes: int | None = None, defines: tuple = (),
              check_finite: bool = True, rows: np.ndarray | None = None, book: DeviceBook | None = None,
              layouts: dict | None = None, time_upload: bool = False) -> PendingRun:
    """Lays out, uploads and launches as :func:`price_gpu` does, without waiting for the kernels, so that
    the host can prepare the next batch meanwhile. ``layouts`` (a :class:`PendingRun`'s, for the same batch
    rows and kernel) skips the layout; ``time_upload`` waits for the copies to time them."""
    cupy = require_gpu()
    n = len(batch)
    seconds = {}
    tick = time.perf_counter()
    width, height = batch.geometry.width, batch.geometry.height
    rows_idx = np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    outer_rows, flat_rows, wide_rows = rows_idx, rows_idx[:0], rows_idx[:0]
    if kernel == "flat":
        wide = width[rows_idx] > FLAT_MAX_WIDTH
        outer_rows, flat_rows, wide_rows = rows_idx[:0], rows_idx[~wide], rows_idx[wide]
    elif kernel != "outer":
        raise ValueError(f"kernel must be 'outer' or 'flat', not {kernel!r}")
    if layouts is None:
        layouts = {}
        if len(outer_rows):
            layouts["outer"] = outer_layout(width[outer_rows], height[outer_rows],
                                            lanes=lanes or len(outer_rows), sort=sort)
        if len(flat_rows):
            shape = choose_flat_shape(width[flat_rows], height[flat_rows], nodes) if threads is None else (
                nodes or FLAT_NODES, threads)
            layouts["flat"] = flat_layout(width[flat_rows], height[flat_rows], shape[1], shape[0])
    seconds["layout"] = time.perf_counter() - tick

    tick = time.perf_counter()
    device = _Device(cupy)
    if book is None:
        book = upload(batch, precision)
        device.bytes += book.bytes
    elif book.precision != precision or book.rows != n:
        raise ValueError("the uploaded book is of another batch or precision")
    book = book.args
    bond, option = device.poisoned(n), device.poisoned(n)
    launches = []
    if "outer" in layouts:
        launches.append(_launch_outer(cupy, device, book, outer_rows, layouts["outer"], precision, bond, option,
                                      defines))
    if "flat" in layouts:
        launches.append(_launch_flat(cupy, device, book, flat_rows, layouts["flat"], precision, bond, option,
                                     defines))
    if len(wide_rows):
        launches.append(_launch_wide(cupy, device, book, wide_rows, width[wide_rows], height[wide_rows], precision,
                                     bond, option))
    if time_upload:
        cupy.cuda.Device().synchronize()
    seconds["upload"] = time.perf_counter() - tick

    started, stopped = cupy.cuda.Event(), cupy.cuda.Event()
    started.record()
    for launch in launches:
        launch()
    stopped.record()
    detail = {}
    if "flat" in layouts:
        flat = layouts["flat"]
        detail.update(nodes=flat.nodes, threads=flat.threads, bins=flat.bins, flat_rows=len(flat_rows),
                      occupancy=float((2 * width[flat_rows] * height[flat_rows]).sum() / max(flat.thread_steps(), 1)))
    if "outer" in layouts:
        detail.update(outer_rows=len(outer_rows))
    if len(wide_rows):
        detail.update(wide_rows=len(wide_rows))
    return PendingRun(cupy, kernel, precision, rows_idx, bond, option, started, stopped, seconds, device.bytes,
                      detail, check_finite, layouts)


def price_gpu(batch: Batch, kernel: str, precision: str = "fp64", **options) -> GpuRun:
    """Price ``batch`` (or only its ``rows``) with the ``outer`` or ``flat`` kernel; see the module docstring
    for the layouts. Prices come back for every batch row, NaN for the rows not asked for.

    Options (keywords of :func:`start_gpu`): ``lanes`` (outer: 32 warp padding, None global padding, 1
    none) and ``sort`` select the outer layout; ``threads`` and ``nodes`` fix the flat block's shape
    (default: :func:`choose_flat_shape`); ``defines`` adds ``-D`` build options (register caps and the like,
    for the benchmarks); ``rows``; ``book``: the batch already on the device (see :func:`upload`), whose
    bytes then do not count in this call's footprint or upload time; ``check_finite``.

    Outputs start as NaN, so a row a kernel never wrote cannot pass: with ``check_finite`` a non-finite
    price raises (in fp32 it is an overflow: see :class:`Fp32OverflowError`). Layout, upload, kernel
    (CUDA events) and download are timed apart.
    """
    return start_gpu(batch, kernel, precision, time_upload=True, **options).finish()
