"""Pricing engines. Each takes a canonical, valid table and a curve set and returns bond and option prices.

``reference``: one instrument at a time, literal; ``cpu``: numba, parallel over instruments;
``gpu-outer`` and ``gpu-flat``: CUDA kernels through CuPy (see :mod:`distprice.engines.gpu`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from ..curves import ZeroCurve
from .batch import Fp32OverflowError, pack
from .cpu import price_cpu
from .gpu import GpuUnavailableError, gpu_available, price_gpu, require_gpu
from .reference import price_reference

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
    """The engine a name stands for: ``auto`` is ``gpu-flat`` where a GPU is visible, else ``cpu``.

    Raises ValueError for an unknown name and :class:`GpuUnavailableError` for a GPU engine without a GPU.
    """
    if engine == AUTO:
        return "gpu-flat" if gpu_available() else "cpu"
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join([AUTO, *ENGINES])}")
    if engine in GPU_ENGINES and not gpu_available():
        try:
            require_gpu()
        except GpuUnavailableError as error:
            raise GpuUnavailableError(f"engine {engine} cannot run here: {error}") from None
    return engine
