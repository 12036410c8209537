"""GPU engines: CuPy launchers for ``kernels/outer.cu`` (``gpu-outer``), ``kernels/flat.cu`` (``gpu-flat``) and
``kernels/wide.cu`` (trees too wide for a flat block); ``kernels/adjust.cu`` forward-adjusts the events'
amounts under each curve set before the pricing kernels run; ``kernels/risk.cu`` is the risk engine's
(:class:`GpuRisk`: trees kept on the device, rolled back under many curve bumps).

Rows whose trees share a forward pass (:mod:`~.groups`) are priced in two launches of their kernel: the
groups' leaders (each group's tallest tree, and every row alone in its group) run their forward and backward
passes as before; then their followers run the backward pass only, reading their leader's ``exp(-alpha_m dt)``
from the leaders' launch (:class:`RunLayout`). A follower of the outer or wide kernel computes bit for bit
what it would alone (its leader's forward pass is its own, step for step, in the same code); in the flat
kernel a forward pass's sums are split at the block's warps where its tree happens to lie, so a follower's
prices differ from its own forward pass's in the last bits. The outer engine prices every row alone unless
told to share (:data:`SHARES` says why).

The CUDA sources are compiled once per process, precision and build option (NVRTC, through
``cupy.RawModule``). The host layouts (sorting, padding, bin packing: :mod:`~.layouts`) are timed apart from
the kernels. Results come back as float64 arrays in the batch's row order. The arrays every kernel reads are
declared once, in :data:`KERNEL_ARGS`, in the order of the kernels' ``PORTFOLIO_PARAMS``, and what a launch
says of its leaders in :data:`LEADER_ARGS` (``LEADER_PARAMS``; a test holds each pair together).
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import numpy as np

from ..cuda import compile_module, require_cupy
from ..errors import Fp32OverflowError
from .batch import Batch
from .geometry import TreeGeometry
from .groups import TreeGroups, batch_groups, kept_states, node_steps, tree_groups
from .layouts import (FLAT_MAX_WIDTH, FLAT_NODES, WARP, choose_flat_shape, exclusive_cumsum, flat_layout,
                      flat_shared_bytes, outer_layout)
from .sweeps import Trees, cut_steps, start_steps

WIDE_THREADS = 1024
FLAT_REGISTERS = 64
"""Register cap per flat thread (through __launch_bounds__), so that 2048 threads fit a multiprocessor."""
OUTER_THREADS = 128
_MAX_EVENTS = 2**31 - 1

C_TYPES = {"int": np.int32, "long long": np.int64, "double": np.float64, "unsigned char": np.uint8, "real": None}
"""numpy dtype of each C type of the kernels' arguments; ``real`` is the batch's precision."""

KERNEL_ARGS = (
    ("jmax", "int"), ("height", "int"), ("dt", "double"), ("dr", "double"), ("M", "double"),
    ("is_call", "unsigned char"), ("curve", "int"), ("curve_offsets", "long long"), ("curve_t", "double"),
    ("curve_z", "double"), ("event_offsets", "long long"), ("event_step", "int"), ("event_kind", "unsigned char"),
    ("event_amount", "real"), ("option_from", "int"),
)
"""The arrays every pricing kernel reads (``PORTFOLIO_PARAMS`` of ``kernels/common.cuh``): name and C element
type. ``event_amount`` is computed on the device (:func:`adjust`) from the events' times and raw amounts."""
LEADER_ARGS = (("followers", "int"), ("leader_at", "long long"), ("leader_stride", "int"), ("leader_alphas", "real"))
"""What a pricing kernel reads after its own layout's arguments (``LEADER_PARAMS`` of ``kernels/common.cuh``):
whether its trees are followers, and where each follower finds its leader's ``exp(-alpha_m dt)`` (the first
is a scalar, the others arrays: :class:`RunLayout`)."""
ADJUST_ARGS = (("event_time", "double"), ("event_raw", "double"))
"""What only the adjustment kernel reads: each event's time (years) and raw amount."""
CURVE_ARGS = ("curve_offsets", "curve_t", "curve_z")
"""The arguments a market scenario replaces."""
ADJUST_THREADS = 128


@functools.cache
def _module(source: str, real: np.dtype, defines: tuple[tuple[str, int], ...] = ()):
    """The compiled module of ``kernels/<source>`` for a precision and extra ``-D`` options (cached)."""
    c_real = {np.dtype(np.float64): "double", np.dtype(np.float32): "float"}[np.dtype(real)]
    return compile_module(require_cupy(), source, ("-std=c++17", f"-DREAL={c_real}",
                                                  *(f"-D{k}={v}" for k, v in defines)))


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


def kernel_arrays(batch: Batch, names=None) -> dict[str, np.ndarray]:
    """The host arrays of :data:`KERNEL_ARGS` and :data:`ADJUST_ARGS` (or of ``names`` of them) in their C
    types, but ``event_amount``, which the device computes."""
    g, events = batch.geometry, batch.events
    source = {
        "jmax": g.jmax, "height": g.height, "dt": g.dt, "dr": g.dr, "M": g.M, "is_call": batch.is_call,
        "curve": batch.curve_index, "curve_offsets": batch.curve_offsets, "curve_t": batch.curve_t,
        "curve_z": batch.curve_z, "event_offsets": events.offsets, "event_step": events.step,
        "event_kind": events.kind, "option_from": batch.option_from, "event_time": events.time,
        "event_raw": events.amount,
    }
    return {name: np.asarray(source[name]).astype(C_TYPES[ctype] or batch.real, copy=False)
            for name, ctype in (*KERNEL_ARGS, *ADJUST_ARGS)
            if name in source and (names is None or name in names)}


@dataclass(frozen=True)
class DeviceBatch:
    """A batch's :data:`KERNEL_ARGS` and :data:`ADJUST_ARGS` on the device, in batch order, the events'
    amounts adjusted under its curves."""

    args: dict
    real: np.dtype
    bytes: int
    rows: int

    def with_curves(self, batch: Batch) -> "DeviceBatch":
        """This device batch under the curves of ``batch`` (the same batch under another curve set, a market
        scenario: :meth:`Batch.with_curves`): the curve knots are copied and the events' amounts adjusted
        again on the device."""
        device = _Device(require_cupy())
        curves = {name: device.put(array) for name, array in kernel_arrays(batch, CURVE_ARGS).items()}
        return _adjusted(device, {**self.args, **curves}, self.real, self.rows, self.bytes)


def _adjusted(device: "_Device", args: dict, real, rows: int, previous_bytes: int = 0) -> DeviceBatch:
    """``args`` with ``event_amount`` computed by ``kernels/adjust.cu`` under their curves."""
    amount = device.empty(max(len(args["event_time"]), 1), real)
    if rows:
        kernel = _module("adjust.cu", real).get_function("adjust_amounts")
        kernel((-(-rows // ADJUST_THREADS),), (ADJUST_THREADS,),
               (np.int32(rows), args["event_offsets"], args["event_step"], args["event_time"], args["event_raw"],
                args["dt"], args["curve"], args["curve_offsets"], args["curve_t"], args["curve_z"], amount))
    return DeviceBatch({**args, "event_amount": amount}, real, previous_bytes + device.bytes, rows)


def upload(batch: Batch) -> DeviceBatch:
    """Copies what the kernels read of ``batch`` to the device and adjusts the events' amounts there (once per
    batch; parts of it share it)."""
    device = _Device(require_cupy())
    if len(batch.events.step) > _MAX_EVENTS:
        raise ValueError("a GPU batch holds at most 2^31 - 1 events; price it in smaller parts")
    args = {name: device.put(array) for name, array in kernel_arrays(batch).items()}
    return _adjusted(device, args, batch.real, len(batch))


# ---- layouts and launches ----

@dataclass(frozen=True)
class WideLayout:
    """Trees of the wide kernel, one block each: tree b's five rows start at ``row_base[b]`` of the scratch
    rows, its ``exp(-alpha_m dt)`` at ``alpha_base[b]``."""

    row_base: np.ndarray
    alpha_base: np.ndarray
    row_elements: int
    alpha_elements: int


def wide_layout(width: np.ndarray, height: np.ndarray) -> WideLayout:
    """The wide kernel's layout of trees of these widths and heights, in their order."""
    row_base, row_elements = exclusive_cumsum(5 * (width.astype(np.int64) + 4))
    alpha_base, alpha_elements = exclusive_cumsum(height.astype(np.int64))
    return WideLayout(row_base, alpha_base, row_elements, alpha_elements)


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a run: ``kernel`` (outer, flat or wide) on batch rows ``rows`` laid out by
    ``layout``; a launch of ``followers`` runs no forward passes (their leaders' launches come first)."""

    kernel: str
    rows: np.ndarray
    layout: object
    followers: bool


@dataclass(frozen=True)
class RunLayout:
    """What a run of a batch launches, in order (leaders first), and where each follower finds its leader's
    ``exp(-alpha_m dt)``: at ``leader_at[r] + m * leader_stride[r]`` of the alphas of its kernel's launch of
    leaders (batch row r). ``node_steps``: what the run computes (:func:`~.groups.node_steps`)."""

    launches: tuple[Launch, ...]
    leader_at: np.ndarray
    leader_stride: np.ndarray
    node_steps: float
    detail: dict


def _alpha_places(launch: Launch) -> tuple[np.ndarray, np.ndarray]:
    """Where each tree of a launch of leaders (in ``launch.rows`` order) keeps its ``exp(-alpha_m dt)``: the
    offset of step 0 in the launch's alphas and the stride between steps (the kernels' layouts)."""
    layout, n = launch.layout, len(launch.rows)
    at, stride = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int32)
    if launch.kernel == "outer":
        k = np.arange(n)
        at[layout.order] = layout.alpha_base[k // layout.lanes] + k % layout.lanes
        stride[:] = layout.lanes
    elif launch.kernel == "flat":
        count = np.diff(layout.bin_first)
        bin_of = np.repeat(np.arange(layout.bins), count)
        at[layout.order] = layout.alpha_base[bin_of] + np.arange(n) - layout.bin_first[bin_of]
        stride[layout.order] = count[bin_of]
    else:
        at[:] = layout.alpha_base
        stride[:] = 1
    return at, stride


SHARES = {"flat": True, "outer": False}
"""Whether each engine shares forward passes unless told (``share=None``). The flat kernel's time follows its
node-steps, and sharing halves them on a book of few models (H100, 20 000 desk rows: 2.08x faster). The outer
kernel's time is its longest trees' (one tree per thread): a second launch for the followers adds a second tail
that costs more than the forward passes it saves (same book: 0.90x), so it prices every row alone."""


def layout_run(batch: Batch, kernel: str, *, share: bool | None = None, lanes: int | None = WARP, sort: bool = True,
               threads: int | None = None, nodes: int | None = None) -> RunLayout:
    """The launches of a run of ``batch`` on the ``outer`` or ``flat`` engine (flat: trees wider than
    FLAT_MAX_WIDTH on the wide kernel). With ``share`` each group of rows that share a tree (:mod:`~.groups`)
    has one leader, its tallest row, priced first with its forward pass; the others follow in a second launch
    of the same kernel, on the leader's alphas. Without, every row leads (one launch per kernel, as before
    sharing). ``share=None``: the kernel's :data:`SHARES`. The other options are :func:`start_gpu`'s."""
    if kernel not in SHARES:
        raise ValueError(f"kernel must be 'outer' or 'flat', not {kernel!r}")
    share = SHARES[kernel] if share is None else share
    n = len(batch)
    width, height = batch.geometry.width, batch.geometry.height
    groups = batch_groups(batch) if share else TreeGroups.alone(n)
    leads = groups.is_leader
    rows_idx = np.arange(n, dtype=np.int64)
    if kernel == "flat":
        wide = width > FLAT_MAX_WIDTH
        kinds = {"flat": rows_idx[~wide], "wide": rows_idx[wide]}
    else:
        kinds = {"outer": rows_idx}
    shape = None
    if len(kinds.get("flat", ())):
        flat_rows = kinds["flat"]
        shape = choose_flat_shape(width[flat_rows], height[flat_rows], nodes) if threads is None else (
            nodes or FLAT_NODES, threads)

    def layout(kind: str, rows: np.ndarray):
        if kind == "outer":
            return outer_layout(width[rows], height[rows], lanes=lanes or len(rows), sort=sort)
        if kind == "flat":
            return flat_layout(width[rows], height[rows], shape[1], shape[0])
        return wide_layout(width[rows], height[rows])

    launches = []
    for followers in (False, True):
        for kind, rows in kinds.items():
            chosen = rows[leads[rows] != followers]
            if len(chosen):
                launches.append(Launch(kind, chosen, layout(kind, chosen), followers))
    leader_at, leader_stride = np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int32)
    for launch in launches:
        if not launch.followers:
            leader_at[launch.rows], leader_stride[launch.rows] = _alpha_places(launch)
    leader_of = groups.leader_of
    leader_at, leader_stride = leader_at[leader_of], leader_stride[leader_of]
    detail = {"node_steps": groups.node_steps(width, height), "leaders": int(leads.sum())}
    flat = [launch for launch in launches if launch.kernel == "flat"]
    if flat:
        flat_rows = kinds["flat"]
        run = sum(launch.layout.thread_steps() // (2 if launch.followers else 1) for launch in flat)
        detail.update(nodes=shape[0], threads=shape[1], bins=sum(launch.layout.bins for launch in flat),
                      flat_rows=len(flat_rows),
                      occupancy=node_steps(width[flat_rows], height[flat_rows], groups.group[flat_rows]) / max(run, 1))
    if "outer" in kinds:
        detail.update(outer_rows=n)
    if len(kinds.get("wide", ())):
        detail.update(wide_rows=len(kinds["wide"]))
    return RunLayout(tuple(launches), leader_at, leader_stride, detail["node_steps"], detail)


def _launch(device, leading, launch: Launch, real, leaders: tuple, bond, option, defines=()):
    """The launch of ``launch`` (a callable) and the alphas its trees write (a launch of leaders) or one
    unused element (followers). ``leaders``: the values of LEADER_ARGS."""
    layout = launch.layout
    rows_idx = launch.rows
    elements = 1 if launch.followers else max(getattr(layout, "alpha_elements", 1), 1)
    alphas = device.empty(elements, real)
    if launch.kernel == "outer":
        kernel = _module("outer.cu", real, (("OUTER_THREADS", OUTER_THREADS), *defines)).get_function("outer_price")
        n = len(layout.order)
        args = (*leading, np.int32(n), device.put(rows_idx[layout.order]), np.int32(layout.lanes),
                device.put(layout.row_base), device.put(layout.pitch), device.put(layout.alpha_base),
                device.empty(max(layout.row_elements, 1), real), alphas, *leaders, bond, option)
        return (lambda: kernel((-(-n // OUTER_THREADS),), (OUTER_THREADS,), args)), alphas
    if launch.kernel == "flat":
        build = {"FLAT_NODES": layout.nodes, "FLAT_MAX_THREADS": layout.threads,
                 "FLAT_MIN_BLOCKS": max(1, 65536 // (FLAT_REGISTERS * layout.threads)), **dict(defines)}
        kernel = _module("flat.cu", real, tuple(sorted(build.items()))).get_function("flat_price")
        shared = flat_shared_bytes(layout, real)
        kernel.max_dynamic_shared_size_bytes = shared
        args = (*leading, device.put(rows_idx[layout.order]), device.put(layout.bin_first),
                device.put(layout.node_offset), device.put(layout.bin_height), device.put(layout.alpha_base),
                alphas, *leaders, bond, option)
        return (lambda: kernel((layout.bins,), (layout.threads,), args, shared_mem=shared)), alphas
    kernel = _module("wide.cu", real, (("WIDE_THREADS", WIDE_THREADS),)).get_function("wide_price")
    args = (*leading, device.put(rows_idx), device.put(layout.row_base), device.put(layout.alpha_base),
            device.empty(layout.row_elements, real), alphas, *leaders, bond, option)
    return (lambda: kernel((len(rows_idx),), (WIDE_THREADS,), args)), alphas


@dataclass
class PendingRun:
    """Kernels launched and not waited for; :meth:`finish` waits, downloads and checks."""

    cupy: object
    kernel: str
    real: np.dtype
    bond: object
    option: object
    started: object
    stopped: object
    seconds: dict
    device_bytes: int
    detail: dict
    check_finite: bool
    layouts: RunLayout
    """The launches, for another run of the same batch (:func:`start_gpu`'s ``layouts``)."""

    def wait(self) -> None:
        """Waits for the kernels."""
        self.stopped.synchronize()

    def finish(self) -> GpuRun:
        self.wait()
        seconds = dict(self.seconds, kernel=self.cupy.cuda.get_elapsed_time(self.started, self.stopped) / 1e3)
        tick = time.perf_counter()
        bond, option = self.cupy.asnumpy(self.bond), self.cupy.asnumpy(self.option)
        seconds["download"] = time.perf_counter() - tick
        bad = np.flatnonzero(~np.isfinite(bond) | ~np.isfinite(option))
        if self.check_finite and len(bad):
            if self.real == np.float32:
                raise Fp32OverflowError(f"fp32 overflowed on {len(bad)} rows (first: batch row {bad[0]}); "
                                        "price them in fp64")
            raise RuntimeError(f"the {self.kernel} kernel left {len(bad)} rows unpriced (first: batch row {bad[0]})")
        return GpuRun(bond, option, seconds, self.device_bytes, self.detail)


def start_gpu(batch: Batch, kernel: str, *, share: bool | None = None, lanes: int | None = WARP, sort: bool = True,
              threads: int | None = None, nodes: int | None = None, defines: tuple = (),
              check_finite: bool = True, device_batch: DeviceBatch | None = None,
              layouts: RunLayout | None = None, time_upload: bool = False) -> PendingRun:
    """Lays out, uploads and launches as :func:`price_gpu` does, without waiting for the kernels, so that
    the host can prepare the next batch meanwhile. ``layouts`` (a :class:`PendingRun`'s, for the same batch
    and kernel) skips the layout; ``time_upload`` waits for the copies to time them."""
    cupy = require_cupy()
    n = len(batch)
    real = batch.real
    seconds = {}
    tick = time.perf_counter()
    if layouts is None:
        layouts = layout_run(batch, kernel, share=share, lanes=lanes, sort=sort, threads=threads, nodes=nodes)
    seconds["layout"] = time.perf_counter() - tick

    tick = time.perf_counter()
    device = _Device(cupy)
    if device_batch is None:
        device_batch = upload(batch)
        device.bytes += device_batch.bytes
    elif device_batch.real != real or device_batch.rows != n:
        raise ValueError("the device batch is of another batch or precision")
    leading = tuple(device_batch.args[name] for name, _ in KERNEL_ARGS)
    bond, option = device.poisoned(n), device.poisoned(n)
    types = {name: C_TYPES[ctype] or real for name, ctype in LEADER_ARGS}
    none = {name: device.empty(1, types[name]) for name in ("leader_at", "leader_stride", "leader_alphas")}
    places = {}
    if any(launch.followers for launch in layouts.launches):
        places = {name: device.put(getattr(layouts, name).astype(types[name], copy=False))
                  for name in ("leader_at", "leader_stride")}
    launches, leader_alphas = [], {}
    for launch in layouts.launches:
        given = {**none, "followers": types["followers"](0)}
        if launch.followers:
            given.update(places, followers=types["followers"](1), leader_alphas=leader_alphas[launch.kernel])
        leaders = tuple(given[name] for name, _ in LEADER_ARGS)
        run, alphas = _launch(device, leading, launch, real, leaders, bond, option, defines)
        if not launch.followers:
            leader_alphas[launch.kernel] = alphas
        launches.append(run)
    if time_upload:
        cupy.cuda.Device().synchronize()
    seconds["upload"] = time.perf_counter() - tick

    started, stopped = cupy.cuda.Event(), cupy.cuda.Event()
    started.record()
    for launch in launches:
        launch()
    stopped.record()
    return PendingRun(cupy, kernel, real, bond, option, started, stopped, seconds, device.bytes,
                      dict(layouts.detail), check_finite, layouts)


def price_gpu(batch: Batch, kernel: str, **options) -> GpuRun:
    """Price ``batch`` with the ``outer`` or ``flat`` kernel in the batch's precision; see :mod:`~.layouts`
    for the layouts.

    Options (keywords of :func:`start_gpu`): ``share`` prices each group of rows that share a tree
    (:mod:`~.groups`) with one forward pass, its leader's, in two launches (leaders, then followers); None (the
    default): as :data:`SHARES` says for the kernel (flat shares, outer does not);
    ``lanes`` (outer: 32 warp padding, None global padding, 1 none) and ``sort`` select the outer layout;
    ``threads`` and ``nodes`` fix the flat block's shape (default: :func:`~.layouts.choose_flat_shape` on every
    flat row); ``defines`` adds ``-D`` build options (register caps and the like, for the benchmarks);
    ``device_batch``: the batch already on the device (see :func:`upload`), whose bytes then do not count in
    this call's footprint or upload time; ``check_finite``.

    Outputs start as NaN, so a row a kernel never wrote cannot pass: with ``check_finite`` a non-finite
    price raises (in fp32 it is an overflow: see :class:`~distprice.errors.Fp32OverflowError`). Layout,
    upload, kernel (CUDA events, every launch) and download are timed apart; ``detail["node_steps"]`` is
    what the run computed (full rectangles).
    """
    return start_gpu(batch, kernel, time_upload=True, **options).finish()


# ---- risk (kernels/risk.cu): trees kept on the device, rolled back under many curve bumps ----

RISK_THREADS = 128
RISK_ROW_BYTES = 2**31
"""Device bytes of bump rows one roll launch may take; a larger call is rolled in parts."""
RISK_BLOCK_WIDTHS = (16, 1024)
"""Trees this wide (nodes, both ends included) roll a block per (tree, bump) (``risk_roll_block``); narrower
and wider ones a thread each (``risk_roll``): a narrow tree leaves most of a block's threads idle, a wider
one's rows outgrow shared memory."""
RISK_BLOCK_NODES = 128
"""Nodes per warp of the block kernels: a block has a warp per RISK_BLOCK_NODES nodes of its widest tree (1 to
8 warps), each thread at most RISK_BLOCK_NODES / 32 nodes, whose weights it keeps in registers."""
RISK_FORWARD_ROWS = 2
"""Rows of a block's forward pass in shared memory: the state prices, double-buffered."""
RISK_ROLL_ROWS = 4
"""Rows of a block roll in shared memory: bond and option, each double-buffered."""
RISK_EVENT_WINDOW = 256
"""Events whose bumped amounts a block roll computes at once, ahead of the steps that apply them."""


def _by_blocks(width: np.ndarray) -> np.ndarray:
    """Which trees of these widths the risk kernels run a block each (RISK_BLOCK_WIDTHS)."""
    return (width >= RISK_BLOCK_WIDTHS[0]) & (width <= RISK_BLOCK_WIDTHS[1])


def _block_launches(width: np.ndarray, height: np.ndarray, chosen: np.ndarray):
    """The launches of a block kernel over trees ``chosen`` (positions into ``width`` and ``height``): per warp
    count (a warp per RISK_BLOCK_NODES nodes), ``(span, threads, positions)`` with the launch's widest tree and
    its positions, tallest trees first."""
    warps = -(-width[chosen].astype(np.int64) // RISK_BLOCK_NODES)
    for count in np.unique(warps):
        mine = chosen[warps == count]
        mine = mine[np.argsort(-height[mine], kind="stable")]
        yield int(width[mine].max()), int(count) * WARP, mine


def _launch_blocks(kernel, blocks: np.ndarray, threads: int, shared: int, arguments: tuple) -> None:
    """``kernel`` on a block per entry of ``blocks`` with ``shared`` bytes of dynamic shared memory each."""
    if shared > kernel.max_dynamic_shared_size_bytes:
        kernel.max_dynamic_shared_size_bytes = shared
    kernel((len(blocks),), (threads,), arguments, shared_mem=shared)


def _kept_rows(top: np.ndarray, height: np.ndarray):
    """The rows bump 0 keeps for the other bumps of its task (:meth:`GpuRisk._roll_blocks`): for each (task,
    step) some bump starts from (``top`` below the task's ``height``), by task and steps decreasing, its task and
    step, and for each such (task, bump) in row-major order the position of its entry."""
    taken = top < height[:, None]
    rank = int(top.max(initial=0)) + 1
    key = np.nonzero(taken)[0] * rank + (rank - 1 - top[taken])  # by task, then steps decreasing
    keys, entry = np.unique(key, return_inverse=True)
    return keys // rank, rank - 1 - keys % rank, entry


def _risk_kernel(name: str):
    """A kernel of ``kernels/risk.cu`` (fp64; one module for all three)."""
    defines = (("RISK_THREADS", RISK_THREADS), ("RISK_EVENT_WINDOW", RISK_EVENT_WINDOW),
               ("RISK_BLOCK_NODES", RISK_BLOCK_NODES))
    return _module("risk.cu", np.dtype(np.float64), defines).get_function(name)


class GpuRisk:
    """The GPU risk engine (see :mod:`~.sweeps` for the interface): ``kernels/risk.cu``. Its forward passes run
    once (kept on the device with each tree's state prices at its cut step, :func:`~.sweeps.cut_steps`); each
    call of :meth:`roll` rolls its trees back under all its bumps down to their cuts. Trees RISK_BLOCK_WIDTHS
    wide run blocks: a forward pass per group of trees that share one (:mod:`~.groups`), a roll per (tree,
    bump), the threads sharing each step's nodes in shared memory (a bump that agrees with the tree's bump 0
    from some step up starts there from bump 0's rows); the others a thread each, every bump from the top, on
    two rows per (tree, bump) in global memory, in parts of at most RISK_ROW_BYTES of rows. The batch is
    uploaded once, its events' amounts adjusted under its curves. ``embedded`` (per row, default none): as for
    :class:`~.cpu.CpuRisk`, a callable or puttable bond whose price alone is wanted rolls its holder's value back
    alone."""

    def __init__(self, batch: Batch, embedded: np.ndarray | None = None):
        if batch.real != np.float64:
            raise ValueError("risk measures are computed in fp64")
        self.batch = batch
        self.device = upload(batch)
        self.cut = cut_steps(batch)
        held = np.zeros(len(batch), dtype=bool) if embedded is None else np.asarray(embedded, bool)
        self.embedded = require_cupy().asarray(held.astype(np.uint8))

    def _leading(self):
        return tuple(self.device.args[name] for name, _ in KERNEL_ARGS)

    def trees(self, rows: np.ndarray, volatility: np.ndarray, dr: np.ndarray) -> Trees:
        cupy = require_cupy()
        g = self.batch.geometry
        rows = np.asarray(rows, np.int64)
        dr = np.asarray(dr, np.float64)
        width, height, cut = g.width[rows], g.height[rows], self.cut[rows]
        alone, shared = np.flatnonzero(~_by_blocks(width)), np.flatnonzero(_by_blocks(width))
        # trees a thread runs: transposed a warp at a time, first in the tables
        layout = outer_layout(width[alone], height[alone], lanes=WARP)
        slots = np.arange(len(alone))
        alpha_at = np.empty(len(rows), dtype=np.int64)
        alpha_at[alone[layout.order]] = layout.alpha_base[slots // WARP] + slots % WARP
        q_at = np.zeros(len(rows), dtype=np.int64)  # where each tree's state prices at its cut start
        q_at[alone[layout.order]] = layout.row_base[slots // WARP] + slots % WARP
        # trees blocks run: a forward pass per group of trees that share one, after them in the tables
        r = rows[shared]
        groups = tree_groups(TreeGeometry(g.dt[r], dr[shared], g.M[r], g.jmax[r], g.width[r], g.height[r]),
                             self.batch.curve_index[r])
        leaders = shared[groups.leader]
        kept = kept_states(groups.group, cut[shared], g.jmax[rows[leaders]])
        runs, alpha_total = exclusive_cumsum(height[leaders].astype(np.int64))
        alpha_at[shared] = layout.alpha_elements + runs[groups.group]
        # the kernels index nodes j + jmax, the kept rows j + jmax + 1 (KeptStates): their rows start one later
        q_at[shared] = layout.row_elements + kept.row_at + 1
        keep = np.zeros((2, len(rows)), dtype=np.int64)  # per leader: its group's kept steps
        keep[:, leaders] = kept.offsets[:-1], kept.offsets[1:]
        device = _Device(cupy)
        alphas = device.empty(max(layout.alpha_elements + alpha_total, 1), np.float64)
        state = {"alphas": alphas, "alpha_at": device.put(alpha_at), "rows": device.put(rows),
                 "dr": device.put(dr), "cut": device.put(cut), "q_at": device.put(q_at),
                 "saved": device.empty(max(layout.row_elements + kept.size, 1), np.float64)}
        if len(alone):
            _risk_kernel("risk_forward")(
                (-(-len(alone) // RISK_THREADS),), (RISK_THREADS,),
                (*self._leading(), np.int32(len(alone)), device.put(alone[layout.order]), state["rows"], state["dr"],
                 np.int32(WARP), device.put(layout.row_base), state["alpha_at"],
                 device.empty(max(layout.row_elements, 1), np.float64), alphas, state["cut"], state["saved"]))
        kernel = _risk_kernel("risk_forward_block")
        keeping = (device.put(keep[0]), device.put(keep[1]), device.put(kept.steps),
                   device.put(layout.row_elements + kept.rows + 1))
        for span, threads, chosen in _block_launches(width, height, leaders):
            _launch_blocks(kernel, chosen, threads, RISK_FORWARD_ROWS * span * 8,
                           (*self._leading(), device.put(chosen), np.int32(span), state["rows"], state["dr"],
                            state["alpha_at"], alphas, *keeping, state["saved"]))
        return Trees(rows, np.asarray(volatility, np.float64), np.asarray(dr, np.float64), state)

    def roll(self, trees: Trees, tasks: np.ndarray, grid: np.ndarray, dz: np.ndarray):
        g = self.batch.geometry
        tasks = np.asarray(tasks, np.int64)
        dz = np.ascontiguousarray(dz, np.float64)
        bond, option = np.full(dz.shape[:2], np.nan), np.full(dz.shape[:2], np.nan)
        blocks = _by_blocks(g.width[trees.rows[tasks]])
        for chosen, roll in ((np.flatnonzero(blocks), self._roll_blocks),
                             (np.flatnonzero(~blocks), self._roll_threads)):
            if len(chosen):
                bond[chosen], option[chosen] = roll(trees, tasks[chosen], grid, dz[chosen])
        return bond, option

    def _arguments(self, trees: Trees, device: "_Device", tasks: np.ndarray, grid: np.ndarray, dz: np.ndarray,
                   lanes: int):
        """What both roll kernels read after the batch's arrays, up to their own layout's arguments (``lanes``:
        the stride of the trees' exp(-alpha dt) values, WARP for trees a thread ran forward, 1 for a block's)."""
        state = trees.state
        return {"tasks": device.put(tasks), "tree_row": state["rows"], "tree_dr": state["dr"],
                "alpha_at": state["alpha_at"], "alpha_lanes": np.int32(lanes), "bumps": np.int32(dz.shape[1]),
                "knots": np.int32(len(grid)), "grid": device.put(np.asarray(grid, np.float64)), "dz": device.put(dz)}

    def _roll_blocks(self, trees: Trees, tasks: np.ndarray, grid: np.ndarray, dz: np.ndarray):
        """``risk_roll_block``: a block per (task, bump), launched per warp count, longest trees first; each
        task's bump 0 first, keeping its rows where the other bumps take them over (:func:`~.sweeps.start_steps`:
        above a key rate's triangle, or at the cut), in parts of at most RISK_ROW_BYTES of kept rows."""
        g = self.batch.geometry
        rows = trees.rows[tasks]
        height, cut = g.height[rows].astype(np.int64), self.cut[rows]
        start = start_steps(grid, dz, g.dt[rows], height)
        top = np.where(start < height[:, None], np.maximum(start, cut[:, None]), height[:, None])
        top[:, 0] = height
        # at most a kept row pair per bump that takes one (bumps of one key rate share theirs)
        kept_bytes = (top < height[:, None]).sum(axis=1) * 2 * g.width[rows].astype(np.int64) * 8
        part_of = (np.cumsum(kept_bytes) - 1) // RISK_ROW_BYTES
        bond, option = np.full(dz.shape[:2], np.nan), np.full(dz.shape[:2], np.nan)
        for p in np.unique(part_of):
            part = np.flatnonzero(part_of == p)
            bond[part], option[part] = self._roll_part(trees, tasks[part], grid, dz[part], top[part])
        return bond, option

    def _roll_part(self, trees: Trees, tasks: np.ndarray, grid: np.ndarray, dz: np.ndarray, top: np.ndarray):
        """One part of :meth:`_roll_blocks`: bump b of task k starts at step ``top[k, b]``, from bump 0's rows
        after that step when below the tree's height."""
        cupy = require_cupy()
        g = self.batch.geometry
        rows = trees.rows[tasks]
        width, height = g.width[rows].astype(np.int64), g.height[rows].astype(np.int64)
        bumps = dz.shape[1]
        kept_task, kept_step, entry = _kept_rows(top, height)
        kept_at, kept_total = exclusive_cumsum(2 * width[kept_task])
        save_offsets = np.searchsorted(kept_task, np.arange(len(tasks) + 1))
        item_from = np.full(top.shape, -1, dtype=np.int64)
        item_from[top < height[:, None]] = kept_at[entry]
        device = _Device(cupy)
        common = self._arguments(trees, device, tasks, grid, dz, 1)
        out_bond, out_option = device.poisoned(len(tasks) * bumps), device.poisoned(len(tasks) * bumps)
        snapshots = device.empty(max(int(kept_total), 1), np.float64)
        keeping = (device.put(top.astype(np.int32)), device.put(item_from), device.put(save_offsets),
                   device.put(kept_step.astype(np.int32)), device.put(kept_at), snapshots)
        kernel = _risk_kernel("risk_roll_block")
        state = trees.state
        for first in (True, False):  # bump 0 of every task, then the bumps that take its rows
            for span, threads, mine in _block_launches(width, g.height[rows], np.arange(len(tasks))):
                items = (mine[:, None] * bumps + (np.arange(1) if first else np.arange(1, bumps))).ravel()
                if not len(items):
                    continue
                _launch_blocks(kernel, items, threads, (RISK_ROLL_ROWS * span + threads + RISK_EVENT_WINDOW) * 8,
                               (*self._leading(), self.device.args["event_time"], device.put(items), np.int32(span),
                                common["tasks"], common["tree_row"], common["tree_dr"], common["alpha_at"],
                                common["alpha_lanes"], common["bumps"], common["knots"], common["grid"], common["dz"],
                                state["alphas"], out_bond, out_option, state["cut"], state["q_at"], np.int32(1),
                                state["saved"], self.embedded, *keeping))
        return cupy.asnumpy(out_bond).reshape(-1, bumps), cupy.asnumpy(out_option).reshape(-1, bumps)

    def _roll_threads(self, trees: Trees, tasks: np.ndarray, grid: np.ndarray, dz: np.ndarray):
        """``risk_roll``: a thread per (task, bump), in parts of at most RISK_ROW_BYTES of rows."""
        cupy = require_cupy()
        g = self.batch.geometry
        bumps = dz.shape[1]
        bond, option = np.full(dz.shape[:2], np.nan), np.full(dz.shape[:2], np.nan)
        rows = trees.rows[tasks]
        part_of = (np.cumsum(2 * bumps * g.width[rows].astype(np.int64) * 8) - 1) // RISK_ROW_BYTES
        kernel = _risk_kernel("risk_roll")
        state = trees.state
        for p in np.unique(part_of):
            part = np.flatnonzero(part_of == p)
            items = len(part) * bumps   # item k * bumps + b: task part[k] under bump b
            device = _Device(cupy)
            common = self._arguments(trees, device, tasks[part], grid, dz[part], WARP)
            layout = outer_layout(np.repeat(g.width[rows[part]], bumps), np.repeat(g.height[rows[part]], bumps),
                                  lanes=WARP)
            out_bond, out_option = device.poisoned(items), device.poisoned(items)
            kernel((-(-items // RISK_THREADS),), (RISK_THREADS,),
                   (*self._leading(), self.device.args["event_time"], np.int32(items), device.put(layout.order),
                    common["tasks"], common["tree_row"], common["tree_dr"], common["alpha_at"], common["alpha_lanes"],
                    common["bumps"], common["knots"], common["grid"], common["dz"], np.int32(WARP),
                    device.put(layout.row_base), device.put(layout.pitch),
                    device.empty(max(layout.row_elements, 1), np.float64), state["alphas"], out_bond, out_option,
                    state["cut"], state["q_at"], np.int32(WARP), state["saved"], self.embedded))
            bond[part] = cupy.asnumpy(out_bond).reshape(len(part), bumps)
            option[part] = cupy.asnumpy(out_option).reshape(len(part), bumps)
        return bond, option
