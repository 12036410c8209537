"""Running a plan in this process: each part of a portfolio priced by its engine, under every curve set.

A plan (:mod:`distprice.inspector`) is a list of parts, each a set of rows and the engine that prices them;
``auto`` asks the inspector for the cheapest plan on this machine, a named engine is a plan of one part.
"""
from __future__ import annotations

import collections
import time

import numpy as np

from .curves import ZeroCurve
from .inspector import Part, Plan, plan
from .lattice.batch import pack, pack_parts
from .lattice.cpu import price_cpu
from .lattice.engines import AUTO, GPU_ENGINES
from .lattice.gpu import gpu_available, start_gpu, upload
from .lattice.instruments import Instruments
from .lattice.reference import price_reference
from .precision import precision_name
from .tuning import current_model

GPU_IN_FLIGHT = 2
"""Launches queued on the GPU at once: enough to keep it busy while the host waits for the oldest, few
enough that a job under many scenarios holds the device memory of two runs, not of all."""


def fixed_plan(engine: str, n: int) -> Plan:
    """The plan of a named engine: one part of all ``n`` rows, one wave."""
    return Plan([Part(engine, np.arange(n), float("nan"), "named by the caller")] if n else [], float("nan"), None)


def choose_plan(instruments: Instruments, engine: str, real, model=None, gpu: bool | None = None) -> Plan:
    """The plan for ``instruments``: the inspector's for ``auto`` (with ``model``, or this machine's tuned
    model), else :func:`fixed_plan`. ``gpu`` says whether the pricing machine has one (default: this one)."""
    if engine != AUTO:
        return fixed_plan(engine, len(instruments))
    gpu = gpu_available() if gpu is None else gpu
    geometry = instruments.geometry
    return plan(geometry.width, geometry.height, model or current_model(precision_name(real), gpu), gpu)


def _price_on_host(instruments: Instruments, part: Part, curve_sets, real, bond: np.ndarray,
                   option: np.ndarray) -> float:
    """Prices a ``reference`` or ``cpu`` part into ``bond`` and ``option`` under every curve set (the CPU
    engine's event tables laid out once); returns the seconds spent in the engine, layout excluded."""
    rows = instruments.take(part.rows)
    if part.engine == "reference":
        def engine(curves):
            return price_reference(rows, curves)
    else:
        batch = pack(rows, curve_sets[0], real)

        def engine(curves):
            return price_cpu(batch.with_curves(curves))
    seconds = 0.0
    for s, curves in enumerate(curve_sets):
        tick = time.perf_counter()
        bond[s, part.rows], option[s, part.rows] = engine(curves)
        seconds += time.perf_counter() - tick
    return seconds


def _finish(pending, bond: np.ndarray, option: np.ndarray) -> float:
    """Waits for a launched run (rows, curve set, :class:`~.lattice.gpu.PendingRun`), stores its prices;
    returns its kernel seconds."""
    rows, s, launched = pending
    run = launched.finish()
    bond[s, rows], option[s, rows] = run.bond, run.option
    return run.seconds["kernel"]


def price_parts(instruments: Instruments, curve_sets: list[dict[str, ZeroCurve]], parts, real):
    """Prices each part (``engine``, ``rows`` of ``instruments``, ``waves``) with its engine under every curve
    set, in precision ``real``; returns bond and option prices, arrays of (curve sets, rows) in instrument
    order, and the kernel seconds: the GPU kernels' time (CUDA events) plus the time in the CPU engines'
    pricing loops, host layout excluded.

    The event tables are laid out once per wave and priced under each curve set in turn (only the curve knots
    differ between market scenarios; on the GPU the wave is uploaded and its blocks packed once, and each
    scenario copies only its knots). A GPU part in several waves is pipelined: host threads lay out
    (:func:`~.lattice.batch.pack_parts`) the next waves while the GPU prices wave k, so most of the host work
    hides behind the kernels; at most GPU_IN_FLIGHT launches wait on the GPU at once. Waves take every k-th
    row, so each is a sample of the whole part and packs into bins as well as the whole would.
    """
    shape = (len(curve_sets), len(instruments))
    bond, option = np.full(shape, np.nan), np.full(shape, np.nan)
    kernel_seconds = 0.0
    for part in parts:
        if part.engine not in GPU_ENGINES:
            kernel_seconds += _price_on_host(instruments, part, curve_sets, real, bond, option)
            continue
        kernel = part.engine.removeprefix("gpu-")
        block = {k: part.detail[k] for k in ("nodes", "threads") if k in part.detail and kernel == "flat"}
        waves = [part.rows[j::part.waves] for j in range(part.waves)]
        in_flight = collections.deque()
        for rows, batch in zip(waves, pack_parts(instruments, waves, curve_sets[0], real)):
            on_device, layouts = upload(batch), None
            for s, curves in enumerate(curve_sets):
                scenario = batch.with_curves(curves) if s else batch
                launched = start_gpu(scenario, kernel, device_batch=on_device.with_curves(scenario) if s else on_device,
                                     layouts=layouts, **block)
                layouts = launched.layouts
                in_flight.append((rows, s, launched))
                while len(in_flight) > GPU_IN_FLIGHT:
                    kernel_seconds += _finish(in_flight.popleft(), bond, option)
        while in_flight:
            kernel_seconds += _finish(in_flight.popleft(), bond, option)
    return bond, option, kernel_seconds


def price_plan(instruments: Instruments, curve_sets: list[dict[str, ZeroCurve]], engine: str, real):
    """Prices ``instruments`` under each curve set with ``engine`` (``auto``: the inspector's plan); returns
    bond and option prices (curve sets x rows), the plan and the kernel seconds."""
    chosen = choose_plan(instruments, engine, real)
    bond, option, kernel_seconds = price_parts(instruments, curve_sets, chosen.parts, real)
    return bond, option, chosen, kernel_seconds
