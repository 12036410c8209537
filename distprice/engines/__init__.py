"""Pricing engines. Each takes a canonical, valid table and a curve set and returns bond and option prices.

``reference``: one instrument at a time, literal; ``cpu``: numba, parallel over instruments;
``gpu-outer`` and ``gpu-flat``: CUDA kernels through CuPy (see :mod:`distprice.engines.gpu`).
``auto`` is no engine of its own: :func:`price_auto` follows the inspector's plan, which may give parts of a
portfolio to different engines.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from ..curves import ZeroCurve
from .batch import Fp32OverflowError, pack, pack_chunks, pack_rows
from .cpu import price_cpu
from .gpu import GpuUnavailableError, gpu_available, price_gpu, require_gpu, start_gpu
from .reference import price_reference

__all__ = ["AUTO", "ENGINES", "GPU_ENGINES", "Fp32OverflowError", "GpuUnavailableError", "gpu_available",
           "price_auto", "price_parts", "resolve"]

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


def price_parts(table: pd.DataFrame, curves: dict[str, ZeroCurve], parts, precision: str):
    """Prices each part (``engine``, ``rows`` of ``table``, ``chunks``) with its engine; returns bond and
    option prices in table order.

    A GPU part in several chunks is pipelined: host threads lay out (:func:`pack_chunks`) the next chunks
    while the GPU prices chunk k, so most of the host work hides behind the kernels. Chunks take every k-th
    row, so each is a sample of the whole part and packs into bins as well as the whole would.
    """
    n = len(table)
    bond, option = np.full(n, np.nan), np.full(n, np.nan)

    for part in parts:
        if part.engine == "cpu":
            b, o = price_cpu(pack_rows(table, part.rows, curves, precision), precision)
            bond[part.rows], option[part.rows] = b, o
            continue
        shape = {k: part.detail[k] for k in ("nodes", "threads") if k in part.detail and part.engine == "gpu-flat"}
        chunks = [part.rows[j::part.chunks] for j in range(part.chunks)]
        pending = [(rows, start_gpu(batch, part.engine.removeprefix("gpu-"), precision, **shape))
                   for rows, batch in zip(chunks, pack_chunks(table, chunks, curves, precision))]
        for rows, launched in pending:
            run = launched.finish()
            bond[rows], option[rows] = run.bond, run.option
    return bond, option


def price_auto(table: pd.DataFrame, curves: dict[str, ZeroCurve], precision: str):
    """Prices as the inspector's plan for this machine says; returns bond, option and the plan."""
    from ..calibration import current_model
    from ..inspector import plan
    from ..lattice import tree_geometry

    geometry = tree_geometry(table["mean_reversion"], table["volatility"], table["maturity"], table["steps_per_year"])
    gpu = gpu_available()
    chosen = plan(geometry.width, geometry.height, current_model(precision, gpu), gpu)
    bond, option = price_parts(table, curves, chosen.parts, precision)
    return bond, option, chosen
