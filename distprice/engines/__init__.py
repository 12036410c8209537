"""Pricing engines. Each takes a canonical, valid table and a curve set and returns bond and option prices.

``reference``: one instrument at a time, literal; ``cpu``: numba, parallel over instruments;
``gpu-outer`` and ``gpu-flat``: CUDA kernels through CuPy (see :mod:`distprice.engines.gpu`).
``auto`` is no engine of its own: :func:`price_auto` follows the inspector's plan, which may give parts of a
portfolio to different engines.
"""
from __future__ import annotations

import collections
import time
from typing import Callable

import numpy as np
import pandas as pd

from ..curves import ZeroCurve
from ..errors import Fp32OverflowError, GpuUnavailableError
from .batch import pack, pack_chunks, pack_rows
from .cpu import price_cpu
from .gpu import gpu_available, price_gpu, require_gpu, start_gpu, upload
from .reference import price_reference

__all__ = ["AUTO", "ENGINES", "GPU_ENGINES", "Fp32OverflowError", "GpuUnavailableError", "choose_plan",
           "fixed_plan", "gpu_available", "price_auto", "price_parts", "price_table", "resolve"]

Engine = Callable[[pd.DataFrame, dict, str], tuple[np.ndarray, np.ndarray]]


def _cpu(table: pd.DataFrame, curves: dict[str, ZeroCurve], precision: str):
    return price_cpu(pack(table, curves, precision), precision)


def _gpu(kernel: str) -> Engine:
    def engine(table: pd.DataFrame, curves: dict[str, ZeroCurve], precision: str):
        run = price_gpu(pack(table, curves, precision), kernel, precision)
        return run.bond, run.option
    engine.__doc__ = f"The {kernel} CUDA kernel (needs a GPU and CuPy)."
    return engine


ENGINES: dict[str, Engine] = {"reference": price_reference, "cpu": _cpu,
                              "gpu-outer": _gpu("outer"), "gpu-flat": _gpu("flat")}
GPU_ENGINES = ("gpu-outer", "gpu-flat")
AUTO = "auto"


def resolve(engine: str) -> str:
    """Checks an engine name (``auto`` or one of ENGINES) and returns it.

    Raises ValueError for an unknown name and :class:`GpuUnavailableError` for a GPU engine without a GPU.
    """
    if engine == AUTO:
        return engine
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join([AUTO, *ENGINES])}")
    if engine in GPU_ENGINES and not gpu_available():
        try:
            require_gpu()
        except GpuUnavailableError as error:
            raise GpuUnavailableError(f"engine {engine} cannot run here: {error}") from None
    return engine


def fixed_plan(engine: str, n: int):
    """The plan of a named engine: one part of all ``n`` rows, one chunk."""
    from ..inspector import Part, Plan

    return Plan([Part(engine, np.arange(n), float("nan"), "named by the caller")] if n else [], float("nan"), None)


def choose_plan(width, height, engine: str, precision: str, model=None, gpu: bool | None = None):
    """The plan for trees of these shapes: the inspector's for ``auto`` (with ``model``, or this machine's
    calibration), else :func:`fixed_plan`. ``gpu`` says whether the pricing machine has one (default: this one)."""
    from ..calibration import current_model
    from ..inspector import plan

    if engine != AUTO:
        return fixed_plan(engine, len(width))
    gpu = gpu_available() if gpu is None else gpu
    return plan(width, height, model or current_model(precision, gpu), gpu)


def _price_on_host(table: pd.DataFrame, part, curve_sets, precision: str, bond: np.ndarray,
                   option: np.ndarray) -> float:
    """Prices a ``reference`` or ``cpu`` part into ``bond`` and ``option`` under every curve set (the CPU
    engine's event tables laid out once); returns the seconds spent in the engine, layout excluded."""
    if part.engine == "reference":
        rows = table.iloc[part.rows].reset_index(drop=True)

        def engine(curves):
            return price_reference(rows, curves, precision)
    else:
        batch = pack_rows(table, part.rows, curve_sets[0], precision)

        def engine(curves):
            return price_cpu(batch.with_curves(curves), precision)
    seconds = 0.0
    for s, curves in enumerate(curve_sets):
        tick = time.perf_counter()
        bond[s, part.rows], option[s, part.rows] = engine(curves)
        seconds += time.perf_counter() - tick
    return seconds


GPU_IN_FLIGHT = 2
"""Launches queued on the GPU at once: enough to keep it busy while the host waits for the oldest, few
enough that a job under many scenarios holds the device memory of two runs, not of all."""


def _finish(pending, bond: np.ndarray, option: np.ndarray) -> float:
    """Waits for a launched run (rows of the table, curve set, :class:`PendingRun`), stores its prices;
    returns its kernel seconds."""
    rows, s, launched = pending
    run = launched.finish()
    bond[s, rows], option[s, rows] = run.bond, run.option
    return run.seconds["kernel"]


def price_parts(table: pd.DataFrame, curve_sets: list[dict[str, ZeroCurve]], parts, precision: str):
    """Prices each part (``engine``, ``rows`` of ``table``, ``chunks``) with its engine under every curve set;
    returns bond and option prices, arrays of (curve sets, rows) in table order, and the kernel seconds: the
    GPU kernels' time (CUDA events) plus the time in the CPU engines' pricing loops, host layout excluded.

    The event tables are laid out once per chunk and priced under each curve set in turn (only the curve
    knots differ between market scenarios; on the GPU the chunk is uploaded and its blocks packed once, and
    each scenario copies only its knots). A GPU part in several chunks is pipelined: host threads lay out
    (:func:`pack_chunks`) the next chunks while the GPU prices chunk k, so most of the host work hides behind
    the kernels; at most GPU_IN_FLIGHT launches wait on the GPU at once. Chunks take every k-th row, so each
    is a sample of the whole part and packs into bins as well as the whole would.
    """
    shape = (len(curve_sets), len(table))
    bond, option = np.full(shape, np.nan), np.full(shape, np.nan)
    kernel_seconds = 0.0
    for part in parts:
        if part.engine not in GPU_ENGINES:
            kernel_seconds += _price_on_host(table, part, curve_sets, precision, bond, option)
            continue
        kernel = part.engine.removeprefix("gpu-")
        block = {k: part.detail[k] for k in ("nodes", "threads") if k in part.detail and kernel == "flat"}
        chunks = [part.rows[j::part.chunks] for j in range(part.chunks)]
        in_flight = collections.deque()
        for rows, batch in zip(chunks, pack_chunks(table, chunks, curve_sets[0], precision)):
            book, layouts = upload(batch, precision), None
            for s, curves in enumerate(curve_sets):
                scenario = batch.with_curves(curves) if s else batch
                launched = start_gpu(scenario, kernel, precision, book=book.with_curves(scenario) if s else book,
                                     layouts=layouts, **block)
                layouts = launched.layouts
                in_flight.append((rows, s, launched))
                while len(in_flight) > GPU_IN_FLIGHT:
                    kernel_seconds += _finish(in_flight.popleft(), bond, option)
        while in_flight:
            kernel_seconds += _finish(in_flight.popleft(), bond, option)
    return bond, option, kernel_seconds


def price_table(table: pd.DataFrame, curve_sets: list[dict[str, ZeroCurve]], engine: str, precision: str):
    """Prices a canonical, valid table under each curve set with ``engine`` (``auto``: the inspector's
    plan); returns bond and option prices (curve sets x rows) and the plan."""
    from ..lattice import tree_geometry

    geometry = tree_geometry(table["mean_reversion"], table["volatility"], table["maturity"], table["steps_per_year"])
    chosen = choose_plan(geometry.width, geometry.height, engine, precision)
    bond, option, _ = price_parts(table, curve_sets, chosen.parts, precision)
    return bond, option, chosen


def price_auto(table: pd.DataFrame, curves: dict[str, ZeroCurve], precision: str):
    """Prices as the inspector's plan for this machine says; returns bond, option and the plan."""
    bond, option, chosen = price_table(table, [curves], AUTO, precision)
    return bond[0], option[0], chosen
