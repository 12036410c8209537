"""Running a plan in this process: each part of a portfolio priced by its engine, under every curve set.

A plan (:mod:`distprice.inspector`) is a list of parts, each a set of rows and the engine that prices them;
``auto`` asks the inspector for the cheapest plan on this machine, a named engine is a plan of one part.

A job stops between pieces of its work: host parts are priced in pieces of a fraction of a second's predicted
work (:func:`host_pieces`), GPU parts launch by launch. Python raises Ctrl-C (and SIGTERM, as the command line
handles it) there, once the engine's native code returns; a timeout or a cancelled task is a check the caller
hands in with :func:`stopped_by`, called at each such point (:func:`checkpoint`).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import math
import time
from collections.abc import Callable

import numba
import numpy as np

from .cuda import gpu_available, gpu_turn
from .curves import ZeroCurve
from .inspector import CostModel, Part, Plan, plan
from .lattice.batch import pack_parts
from .lattice.engines import AUTO, ENGINES, GPU_ENGINES, HOST, Engine
from .lattice.geometry import TreeGeometry, node_steps
from .lattice.gpu import layout_run, start_gpu, upload
from .lattice.instruments import Instruments
from .planner import cut_by_cost
from .precision import precision_name
from .tuning import current_model

PIECE_SECONDS = 0.4
"""Predicted seconds (the cost model of the machine that prices) of a piece of a host part: a stop waits for the
piece being priced, about this long at most (the cost model's default figures predict about twice the time the
CPU engine takes), and each piece's fixed costs (taking its rows, its event table and layout, its forward
passes: a few ms) stay small beside its pricing. A row predicted longer than this is priced with as few others
as the engine has threads."""
MEASURE_PIECE_SECONDS = 2.0
"""Predicted seconds of a piece of risk measures (:func:`measure_pieces`, all its passes): a piece pays for its
events, cash-flow placement, tree groups and forward passes once, 15-20 ms on the CPU (and its layout, uploads
and per-bump launches on a GPU), so measures come in pieces five times a pricing's: 4 000 desk rows under the
full set take 1.73-1.78 s in 8 pieces on two cores, against 1.53 s whole and 2.12 s in 38 pieces of
PIECE_SECONDS. The cost model's CPU figures predict the desk's measures about five times too long: a stop waits
about half a second."""
HOST_PIECE_MAX_ROWS = 1 << 18
"""Rows of a piece at most: each piece's event table and the engine's per-row arrays (a few tens of MB) reuse
the memory of the piece before instead of growing with the part, so a big table's first job does not pay for
that much new memory, and the arrays stay closer to the caches."""
GPU_IN_FLIGHT = 2
"""Launches queued on the GPU at once: enough to keep it busy while the host waits for the oldest, few
enough that a job under many scenarios holds the device memory of two runs, not of all."""


_STOP_CHECK: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar("distprice_stop", default=None)


@contextlib.contextmanager
def stopped_by(check: Callable[[], None]):
    """Within this block, pricing in this thread calls ``check()`` before each piece of a host part, each GPU
    launch and each piece of risk measures (:func:`checkpoint`): whatever it raises (a timeout, a cancelled
    task) stops the job there."""
    token = _STOP_CHECK.set(check)
    try:
        yield
    finally:
        _STOP_CHECK.reset(token)


def checkpoint() -> None:
    """A point where a job may stop: calls the check :func:`stopped_by` set, if any."""
    check = _STOP_CHECK.get()
    if check is not None:
        check()


def fixed_plan(engine: str, n: int, turns: bool = False) -> Plan:
    """The plan of a named engine: one part of all ``n`` rows, one wave (GPU engines: launched in turns with
    the GPU's other processes if ``turns``, :attr:`~distprice.inspector.Part.turns`)."""
    part = Part(engine, np.arange(n), float("nan"), "named by the caller", turns=turns and engine in GPU_ENGINES)
    return Plan([part] if n else [], float("nan"), None)


def choose_plan(
    instruments: Instruments,
    engine: str,
    real,
    model=None,
    gpu: bool | None = None,
    gpu_processes: int = 1,
    only: str | None = None,
) -> Plan:
    """The plan for ``instruments``: the inspector's for ``auto`` (with ``model``, or this machine's tuned
    model), else :func:`fixed_plan` with the named engine's predicted seconds (:func:`named_seconds`). ``gpu``
    says whether the pricing machine has one (default: this one), ``gpu_processes`` how many processes price on
    that GPU at once, ``only`` the one candidate ``auto`` makes (:func:`~distprice.inspector.plan`)."""
    gpu = gpu_available() if gpu is None else gpu
    if engine != AUTO:  # the model tells the time alone: tuned or not, it chooses nothing
        named = fixed_plan(engine, len(instruments), gpu_processes > 1)
        named.model = model or current_model(precision_name(real), gpu, quiet=True)
        named.seconds = named_seconds(instruments, engine, named.model, gpu)
        for part in named.parts:
            part.seconds = named.seconds
        return named
    geometry = instruments.geometry
    model = model or current_model(precision_name(real), gpu)
    return plan(geometry.width, geometry.height, model, gpu, gpu_processes, only)


def named_seconds(instruments: Instruments, engine: str, model: CostModel, gpu: bool) -> float:
    """The predicted seconds of ``engine`` pricing ``instruments`` alone under one curve set on a machine of
    ``model``: a host engine's :func:`row_seconds`, a GPU engine's candidate plan of the inspector (or its best
    plan, where it considers none of that engine alone)."""
    if not len(instruments):
        return 0.0
    if ENGINES[engine].kind == HOST:
        return float(row_seconds(instruments.geometry, slice(None), engine, model).sum())
    g = instruments.geometry
    chosen = plan(g.width, g.height, model, gpu)
    return chosen.considered.get(engine, chosen.seconds)


def _price_on_host(
    instruments: Instruments,
    part: Part,
    engine: Engine,
    curve_sets,
    real,
    bond: np.ndarray,
    option: np.ndarray,
    progress,
) -> float:
    """Prices a part on a host ``engine`` into ``bond`` and ``option`` under every curve set, piece by piece
    (:func:`host_pieces`; each piece prepared once: :attr:`~.lattice.engines.Engine.prepare`); returns the
    seconds spent in the engine, preparation excluded. ``progress`` is told the node-steps of each piece priced
    under a curve set."""
    seconds = 0.0
    for piece in host_pieces(instruments, part.rows, part.engine, this_model(real)):
        rows = instruments.take(piece)
        price = engine.prepare(rows, curve_sets[0], real)
        for s, curves in enumerate(curve_sets):
            checkpoint()
            tick = time.perf_counter()
            bond[s, piece], option[s, piece] = price(curves)
            seconds += time.perf_counter() - tick
            progress(float(rows.node_steps))
    return seconds


def this_model(real) -> CostModel:
    """The cost model of this machine (its GPU's, whose CPU figures are its host's; else its CPU's) in
    precision ``real``."""
    return current_model(precision_name(real), gpu_available(), quiet=True)


def row_seconds(geometry: TreeGeometry, rows, engine: str, model: CostModel) -> np.ndarray:
    """The predicted seconds of the host ``engine`` pricing each of ``rows`` (positions of ``geometry``'s trees)
    under one curve set on a machine of ``model``: the CPU engine's and its layout's
    (:meth:`~distprice.inspector.CostModel.cpu_rows`, :meth:`~distprice.inspector.CostModel.pack_rows`), or the
    engine's :attr:`~.lattice.engines.Engine.node_step_seconds`."""
    width, height = geometry.width[rows], geometry.height[rows]
    per_step = ENGINES[engine].node_step_seconds
    if per_step is not None:
        return node_steps(width, height) * per_step
    return model.cpu_rows(width, height) + model.pack_rows(height)


def host_pieces(
    instruments: Instruments,
    rows: np.ndarray,
    engine: str,
    model: CostModel,
    passes: int = 1,
    seconds: float = PIECE_SECONDS,
) -> list[np.ndarray]:
    """``rows`` cut into consecutive pieces of about ``seconds`` of ``engine``'s predicted work each
    (:func:`row_seconds` under ``model``, times ``passes``: risk measures price each piece once per measure),
    at least a row per thread of the engine and at most about HOST_PIECE_MAX_ROWS rows, so that a long job in
    this process shows its progress and stops between pieces, about ``seconds`` after it is asked to at most
    (a row predicted longer: the longest row's time)."""
    cost = row_seconds(instruments.geometry, rows, engine, model) * passes
    threads = numba.get_num_threads() if engine == "cpu" else 1
    pieces = max(
        min(math.ceil(cost.sum() / seconds), math.ceil(len(rows) / threads)),
        math.ceil(len(rows) / HOST_PIECE_MAX_ROWS),
    )
    return [rows[s] for s in cut_by_cost(cost, max(1, pieces))]


def measure_pieces(instruments: Instruments, engine: str, model: CostModel, passes: int) -> list[np.ndarray]:
    """The rows of ``instruments`` cut into the pieces ``engine``'s risk engine measures one at a time, ``passes``
    pricings each, of about MEASURE_PIECE_SECONDS of predicted work: a host engine's :func:`host_pieces`; a GPU
    engine's cut by node-steps (:func:`named_seconds` times ``passes``), at most about HOST_PIECE_MAX_ROWS rows."""
    rows = np.arange(len(instruments))
    if not len(rows):
        return [rows]
    if ENGINES[engine].kind == HOST:
        return host_pieces(instruments, rows, engine, model, passes, MEASURE_PIECE_SECONDS)
    g = instruments.geometry
    seconds = named_seconds(instruments, engine, model, True) * passes
    pieces = max(math.ceil(seconds / MEASURE_PIECE_SECONDS), math.ceil(len(rows) / HOST_PIECE_MAX_ROWS), 1)
    return [rows[s] for s in cut_by_cost(node_steps(g.width, g.height), pieces)]


def _finish(pending, bond: np.ndarray, option: np.ndarray, progress) -> float:
    """Waits for a launched run (rows, curve set, node-steps, :class:`~.lattice.gpu.PendingRun`), stores its
    prices and tells ``progress`` its node-steps; returns its kernel seconds."""
    rows, s, node_steps, launched = pending
    run = launched.finish()
    bond[s, rows], option[s, rows] = run.bond, run.option
    progress(node_steps)
    return run.seconds["kernel"]


def _unwatched(node_steps: float) -> None:
    """The progress of a job nobody watches."""


def price_parts(instruments: Instruments, curve_sets: list[dict[str, ZeroCurve]], parts, real, progress=_unwatched):
    """Prices each part (``engine``, ``rows`` of ``instruments``, ``waves``) with its engine under every curve
    set, in precision ``real``; returns bond and option prices, arrays of (curve sets, rows) in instrument
    order, and the kernel seconds: the GPU kernels' time (CUDA events) plus the time in the CPU engines'
    pricing loops, host layout excluded.

    The event tables are laid out once per wave and priced under each curve set in turn (only the curve knots
    differ between market scenarios; on the GPU the wave is uploaded and its blocks packed once, and each
    scenario copies only its knots). A GPU part in several waves is pipelined: host threads lay out
    (:func:`~.lattice.batch.pack_parts`) the next waves while the GPU prices wave k, so most of the host work
    hides behind the kernels; at most GPU_IN_FLIGHT launches wait on the GPU at once. Waves take every k-th
    row, so each is a sample of the whole part and packs into bins as well as the whole would. A part with
    ``turns`` (a GPU that other processes share) launches each scenario in its turn on the GPU
    (:func:`~.cuda.gpu_turn`), laid out and uploaded before it, and waits there for its kernels.

    ``progress(node_steps)`` is called as each piece (host parts) or launch (GPU parts) is priced; whatever
    it raises stops the pricing there, as does the check of :func:`stopped_by`, called before each.
    """
    shape = (len(curve_sets), len(instruments))
    bond, option = np.full(shape, np.nan), np.full(shape, np.nan)
    kernel_seconds = 0.0
    for part in parts:
        engine = ENGINES[part.engine]
        if engine.kind == HOST:
            kernel_seconds += _price_on_host(instruments, part, engine, curve_sets, real, bond, option, progress)
            continue
        kernel = engine.kernel
        block = {k: part.detail[k] for k in ("nodes", "threads") if k in part.detail and kernel == "flat"}
        waves = [part.rows[j :: part.waves] for j in range(part.waves)]
        in_flight = collections.deque()
        for rows, batch in zip(waves, pack_parts(instruments, waves, curve_sets[0], real)):
            on_device = upload(batch)
            layouts = layout_run(batch, kernel, **block) if part.turns else None  # laid out before the turn
            steps = float(batch.geometry.node_steps.sum())
            for s, curves in enumerate(curve_sets):
                scenario = batch.with_curves(curves) if s else batch
                device_batch = on_device.with_curves(scenario) if s else on_device
                checkpoint()
                with gpu_turn() if part.turns else contextlib.nullcontext():  # unchecked: the job names such rows
                    launched = start_gpu(
                        scenario, kernel, device_batch=device_batch, layouts=layouts, check_finite=False, **block
                    )
                    if part.turns:
                        launched.wait()
                layouts = launched.layouts
                in_flight.append((rows, s, steps, launched))
                while len(in_flight) > GPU_IN_FLIGHT:
                    kernel_seconds += _finish(in_flight.popleft(), bond, option, progress)
        while in_flight:
            kernel_seconds += _finish(in_flight.popleft(), bond, option, progress)
    return bond, option, kernel_seconds


def price_plan(
    instruments: Instruments, curve_sets: list[dict[str, ZeroCurve]], engine: str, real, progress=_unwatched
):
    """Prices ``instruments`` under each curve set with ``engine`` (``auto``: the inspector's plan); returns
    bond and option prices (curve sets x rows), the plan and the kernel seconds (``progress`` as for
    :func:`price_parts`)."""
    chosen = choose_plan(instruments, engine, real)
    bond, option, kernel_seconds = price_parts(instruments, curve_sets, chosen.parts, real, progress)
    return bond, option, chosen, kernel_seconds
