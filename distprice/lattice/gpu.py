"""GPU engines: CuPy launchers for ``kernels/outer.cu`` (``gpu-outer``), ``kernels/flat.cu`` (``gpu-flat``) and
``kernels/wide.cu`` (trees too wide for a flat block); ``kernels/adjust.cu`` forward-adjusts the events'
amounts under each curve set before the pricing kernels run. The GPU risk engine (:mod:`~.gpu_risk`) uploads
and compiles through the same functions.

Rows whose trees share a forward pass (:mod:`~.groups`) are priced in two launches of their kernel: the
groups' leaders (each group's tallest tree, and every row alone in its group) run their forward and backward
passes as before; then their followers run the backward pass only, reading their leader's ``exp(-alpha_m dt)``
from the leaders' launch (:class:`RunLayout`). A follower computes bit for bit what it would alone: its
leader's forward pass is its own, step for step, in the same code, and a flat launch of leaders lays its trees
out ``aligned`` (:func:`~.layouts.flat_layout`), so that a forward pass's sums do not depend on where its tree
lies in the block; a flat tree's nodes per thread are its own (:func:`~.layouts.flat_nodes`), its batch's trees
of each count launched apart. So a row's price is the same bits in any batch its engine prices it in. The
outer engine prices every row alone unless told to share (:data:`SHARES` says why).

The CUDA sources are compiled once per process, precision and build option (NVRTC, through
``cupy.RawModule``). The host layouts (sorting, padding, bin packing: :mod:`~.layouts`) are timed apart from
the kernels. Results come back as float64 arrays in the batch's row order. The arrays every kernel reads are
declared once, in :data:`KERNEL_ARGS`, in the order of the kernels' ``PORTFOLIO_PARAMS``, and what a launch
says of its leaders in :data:`LEADER_ARGS` (``LEADER_PARAMS``; a test holds each pair together).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..cuda import allow_shared, full, load_kernel, require_cupy
from ..errors import Fp32OverflowError
from .batch import Batch
from .groups import TreeGroups, batch_groups, shared_node_steps
from .layouts import (
    FLAT_MAX_WIDTH,
    WARP,
    choose_flat_shape,
    exclusive_cumsum,
    flat_layout,
    flat_nodes,
    flat_shared_bytes,
    outer_layout,
)

WIDE_THREADS = 1024
FLAT_REGISTERS = 64
"""Register cap per flat thread (through __launch_bounds__), so that 2048 threads fit a multiprocessor."""
OUTER_THREADS = 128
_MAX_EVENTS = 2**31 - 1

C_TYPES = {"int": np.int32, "long long": np.int64, "double": np.float64, "unsigned char": np.uint8, "real": None}
"""numpy dtype of each C type of the kernels' arguments; ``real`` is the batch's precision."""

KERNEL_ARGS = (
    ("jmax", "int"),
    ("height", "int"),
    ("dt", "double"),
    ("dr", "double"),
    ("M", "double"),
    ("phase", "int"),
    ("root", "double"),
    ("is_call", "unsigned char"),
    ("curve", "int"),
    ("curve_offsets", "long long"),
    ("curve_t", "double"),
    ("curve_z", "double"),
    ("event_offsets", "long long"),
    ("event_step", "int"),
    ("event_kind", "unsigned char"),
    ("event_amount", "real"),
    ("option_from", "int"),
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


def _kernel(source: str, real: np.dtype, name: str, defines: tuple[tuple[str, int], ...] = ()):
    """The kernel ``name`` of ``kernels/<source>`` for a precision and extra ``-D`` options
    (:func:`~distprice.cuda.load_kernel`: once per process)."""
    c_real = {np.dtype(np.float64): "double", np.dtype(np.float32): "float"}[np.dtype(real)]
    return load_kernel(source, name, ("-std=c++17", f"-DREAL={c_real}", *(f"-D{k}={v}" for k, v in defines)))


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

    def poisoned(self, n, dtype=np.float64):
        """``n`` elements of ``dtype`` filled with NaN, so that a value no kernel wrote cannot pass for one."""
        out = full(n, np.nan, dtype)
        self.bytes += out.nbytes
        return out


def kernel_arrays(batch: Batch, names=None) -> dict[str, np.ndarray]:
    """The host arrays of :data:`KERNEL_ARGS` and :data:`ADJUST_ARGS` (or of ``names`` of them) in their C
    types, but ``event_amount``, which the device computes."""
    g, events = batch.geometry, batch.events
    source = {
        "jmax": g.jmax,
        "height": g.height,
        "dt": g.dt,
        "dr": g.dr,
        "M": g.M,
        "phase": g.phase,
        "root": g.root,
        "is_call": batch.is_call,
        "curve": batch.curve_index,
        "curve_offsets": batch.curve_offsets,
        "curve_t": batch.curve_t,
        "curve_z": batch.curve_z,
        "event_offsets": events.offsets,
        "event_step": events.step,
        "event_kind": events.kind,
        "option_from": batch.option_from,
        "event_time": events.time,
        "event_raw": events.amount,
    }
    return {
        name: np.asarray(source[name]).astype(C_TYPES[ctype] or batch.real, copy=False)
        for name, ctype in (*KERNEL_ARGS, *ADJUST_ARGS)
        if name in source and (names is None or name in names)
    }


@dataclass(frozen=True)
class DeviceBatch:
    """A batch's :data:`KERNEL_ARGS` and :data:`ADJUST_ARGS` on the device, in batch order, the events'
    amounts adjusted under its curves."""

    args: dict
    real: np.dtype
    bytes: int
    rows: int

    def with_curves(self, batch: Batch) -> DeviceBatch:
        """This device batch under the curves of ``batch`` (the same batch under another curve set, a market
        scenario: :meth:`Batch.with_curves`): the curve knots are copied and the events' amounts adjusted
        again on the device."""
        device = _Device(require_cupy())
        curves = {name: device.put(array) for name, array in kernel_arrays(batch, CURVE_ARGS).items()}
        return _adjusted(device, {**self.args, **curves}, self.real, self.rows, self.bytes)


def _adjusted(device: _Device, args: dict, real, rows: int, previous_bytes: int = 0) -> DeviceBatch:
    """``args`` with ``event_amount`` computed by ``kernels/adjust.cu`` under their curves (NaN until written, so
    that an amount never written cannot pass for a cash flow of 0)."""
    amount = device.poisoned(max(len(args["event_time"]), 1), real)
    if rows:
        kernel = _kernel("adjust.cu", real, "adjust_amounts")
        kernel(
            (-(-rows // ADJUST_THREADS),),
            (ADJUST_THREADS,),
            (
                np.int32(rows),
                args["event_offsets"],
                args["event_step"],
                args["event_time"],
                args["event_raw"],
                args["dt"],
                args["phase"],
                args["curve"],
                args["curve_offsets"],
                args["curve_t"],
                args["curve_z"],
                amount,
            ),
        )
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

    @property
    def kind(self) -> tuple[str, int]:
        """What a launch of followers shares with its leaders' launch: the kernel and its nodes per thread."""
        return self.kernel, getattr(self.layout, "nodes", 1)


@dataclass(frozen=True)
class RunLayout:
    """What a run of a batch launches, in order (leaders first), and where each follower finds its leader's
    ``exp(-alpha_m dt)``: at ``leader_at[r] + m * leader_stride[r]`` of the alphas of its kernel's launch of
    leaders (batch row r). ``node_steps``: what the run computes (:func:`~.groups.shared_node_steps`)."""

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


def layout_run(
    batch: Batch,
    kernel: str,
    *,
    share: bool | None = None,
    lanes: int | None = WARP,
    sort: bool = True,
    threads: int | None = None,
    nodes: int | None = None,
) -> RunLayout:
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
    kinds: dict[tuple[str, int], np.ndarray] = {}  # (kernel, nodes per thread) -> rows
    if kernel == "flat":
        wide = width > FLAT_MAX_WIDTH
        flat_rows = rows_idx[~wide]
        per_thread = np.full(len(flat_rows), nodes) if nodes else flat_nodes(width[flat_rows])
        for k in np.unique(per_thread):
            kinds["flat", int(k)] = flat_rows[per_thread == k]
        kinds["wide", 1] = rows_idx[wide]
    else:
        kinds["outer", 1] = rows_idx

    def layout(kind: tuple[str, int], rows: np.ndarray, followers: bool):
        name, k = kind
        if name == "outer":
            return outer_layout(width[rows], height[rows], lanes=lanes or len(rows), sort=sort)
        if name == "flat":
            # the leaders' bins are laid out aligned, the followers' not: each launch its own shape
            shape = (k, threads) if threads else choose_flat_shape(width[rows], height[rows], k, not followers)
            return flat_layout(width[rows], height[rows], shape[1], k, aligned=not followers)
        return wide_layout(width[rows], height[rows])

    launches = []
    for followers in (False, True):
        for kind, rows in kinds.items():
            chosen = rows[leads[rows] != followers]
            if len(chosen):
                launches.append(Launch(kind[0], chosen, layout(kind, chosen, followers), followers))
    leader_at, leader_stride = np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int32)
    for launch in launches:
        if not launch.followers:
            leader_at[launch.rows], leader_stride[launch.rows] = _alpha_places(launch)
    leader_of = groups.leader_of
    leader_at, leader_stride = leader_at[leader_of], leader_stride[leader_of]
    detail = {"node_steps": groups.shared_node_steps(width, height), "leaders": int(leads.sum())}
    flat = [launch for launch in launches if launch.kernel == "flat"]
    if flat:
        flat_rows = np.concatenate([rows for (name, _), rows in kinds.items() if name == "flat"])
        run = sum(launch.layout.thread_steps() // (2 if launch.followers else 1) for launch in flat)
        computed = shared_node_steps(width[flat_rows], height[flat_rows], groups.group[flat_rows])
        most = max(flat, key=lambda launch: len(launch.rows)).layout
        detail.update(
            nodes=most.nodes,
            threads=most.threads,
            bins=sum(launch.layout.bins for launch in flat),
            flat_rows=len(flat_rows),
            occupancy=computed / max(run, 1),
        )
        threads_of = {launch.layout.nodes: launch.layout.threads for launch in flat}
        if len(threads_of) > 1:
            detail.update(shapes=threads_of)
    if ("outer", 1) in kinds:
        detail.update(outer_rows=n)
    if len(kinds.get(("wide", 1), ())):
        detail.update(wide_rows=len(kinds["wide", 1]))
    return RunLayout(tuple(launches), leader_at, leader_stride, detail["node_steps"], detail)


def _launch(device, leading, launch: Launch, real, leaders: tuple, bond, option, defines=()):
    """The launch of ``launch`` (a callable) and the alphas its trees write (a launch of leaders: NaN until
    written, so that a follower reading one its leader never wrote prices NaN, which the job names, not 0 or an
    old value) or one unused element (followers). ``leaders``: the values of LEADER_ARGS."""
    layout = launch.layout
    rows_idx = launch.rows
    if launch.followers:
        alphas = device.empty(1, real)
    else:
        alphas = device.poisoned(max(getattr(layout, "alpha_elements", 1), 1), real)
    if launch.kernel == "outer":
        kernel = _kernel("outer.cu", real, "outer_price", (("OUTER_THREADS", OUTER_THREADS), *defines))
        n = len(layout.order)
        args = (
            *leading,
            np.int32(n),
            device.put(rows_idx[layout.order]),
            np.int32(layout.lanes),
            device.put(layout.row_base),
            device.put(layout.pitch),
            device.put(layout.alpha_base),
            device.empty(max(layout.row_elements, 1), real),
            alphas,
            *leaders,
            bond,
            option,
        )
        return (lambda: kernel((-(-n // OUTER_THREADS),), (OUTER_THREADS,), args)), alphas
    if launch.kernel == "flat":
        build = {
            "FLAT_NODES": layout.nodes,
            "FLAT_MAX_THREADS": layout.threads,
            "FLAT_MIN_BLOCKS": max(1, 65536 // (FLAT_REGISTERS * layout.threads)),
            **dict(defines),
        }
        kernel = _kernel("flat.cu", real, "flat_price", tuple(sorted(build.items())))
        shared = flat_shared_bytes(layout, real)
        allow_shared(kernel, shared)
        args = (
            *leading,
            device.put(rows_idx[layout.order]),
            device.put(layout.bin_first),
            device.put(layout.node_offset),
            device.put(layout.bin_height),
            device.put(layout.alpha_base),
            alphas,
            *leaders,
            bond,
            option,
        )
        return (lambda: kernel((layout.bins,), (layout.threads,), args, shared_mem=shared)), alphas
    kernel = _kernel("wide.cu", real, "wide_price", (("WIDE_THREADS", WIDE_THREADS),))
    args = (
        *leading,
        device.put(rows_idx),
        device.put(layout.row_base),
        device.put(layout.alpha_base),
        device.empty(layout.row_elements, real),
        alphas,
        *leaders,
        bond,
        option,
    )
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
                raise Fp32OverflowError(
                    f"fp32 overflowed on {len(bad)} rows (first: batch row {bad[0]}); price them in fp64"
                )
            raise RuntimeError(f"the {self.kernel} kernel left {len(bad)} rows unpriced (first: batch row {bad[0]})")
        return GpuRun(bond, option, seconds, self.device_bytes, self.detail)


def start_gpu(
    batch: Batch,
    kernel: str,
    *,
    share: bool | None = None,
    lanes: int | None = WARP,
    sort: bool = True,
    threads: int | None = None,
    nodes: int | None = None,
    defines: tuple = (),
    check_finite: bool = True,
    device_batch: DeviceBatch | None = None,
    layouts: RunLayout | None = None,
    time_upload: bool = False,
) -> PendingRun:
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
        places = {
            name: device.put(getattr(layouts, name).astype(types[name], copy=False))
            for name in ("leader_at", "leader_stride")
        }
    launches, leader_alphas = [], {}
    for launch in layouts.launches:
        given = {**none, "followers": types["followers"](0)}
        if launch.followers:
            given.update(places, followers=types["followers"](1), leader_alphas=leader_alphas[launch.kind])
        leaders = tuple(given[name] for name, _ in LEADER_ARGS)
        run, alphas = _launch(device, leading, launch, real, leaders, bond, option, defines)
        if not launch.followers:
            leader_alphas[launch.kind] = alphas
        launches.append(run)
    if time_upload:
        cupy.cuda.Device().synchronize()
    seconds["upload"] = time.perf_counter() - tick

    started, stopped = cupy.cuda.Event(), cupy.cuda.Event()
    started.record()
    for launch in launches:
        launch()
    stopped.record()
    return PendingRun(
        cupy,
        kernel,
        real,
        bond,
        option,
        started,
        stopped,
        seconds,
        device.bytes,
        dict(layouts.detail),
        check_finite,
        layouts,
    )


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
