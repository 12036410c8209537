"""The lattice engines by name. Each reads canonical, valid instruments and a curve set and returns bond and
option prices (float64 arrays, instrument order); an engine never picks another engine.

``reference``: one instrument at a time, literal (float64 only); ``cpu``: numba, parallel over instruments;
``gpu-outer`` and ``gpu-flat``: CUDA kernels through CuPy. ``auto`` is no engine of its own: the inspector's
plan (:mod:`distprice.execute`) may give parts of a portfolio to different engines.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..cuda import gpu_available, require_cupy
from ..curves import ZeroCurve
from ..errors import GpuUnavailableError, OptionError
from .batch import pack
from .cpu import price_cpu
from .gpu import price_gpu
from .instruments import Instruments
from .reference import price_reference

Engine = Callable[[Instruments, dict[str, ZeroCurve], np.dtype], tuple[np.ndarray, np.ndarray]]


def _reference(instruments: Instruments, curves: dict[str, ZeroCurve], real):
    """The reference engine (float64 only)."""
    return price_reference(instruments, curves)


def _cpu(instruments: Instruments, curves: dict[str, ZeroCurve], real):
    """The CPU engine."""
    return price_cpu(pack(instruments, curves, real))


def _gpu(kernel: str) -> Engine:
    def engine(instruments: Instruments, curves: dict[str, ZeroCurve], real):
        run = price_gpu(pack(instruments, curves, real), kernel)
        return run.bond, run.option
    engine.__doc__ = f"The {kernel} CUDA kernel (needs a GPU and CuPy)."
    return engine


ENGINES: dict[str, Engine] = {"reference": _reference, "cpu": _cpu,
                              "gpu-outer": _gpu("outer"), "gpu-flat": _gpu("flat")}
GPU_ENGINES = ("gpu-outer", "gpu-flat")
AUTO = "auto"
ENGINE_NAMES = (AUTO, *ENGINES)
"""What a job may name: ``auto`` or an engine."""


def resolve(engine: str, real=np.float64) -> str:
    """Checks that ``engine`` (``auto`` or one of ENGINES) can price in precision ``real`` here; returns it.

    Raises :class:`OptionError` for an unknown name or the reference engine in fp32, and
    :class:`GpuUnavailableError` for a GPU engine without a GPU.
    """
    if engine == AUTO:
        return engine
    if engine not in ENGINES:
        raise OptionError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINE_NAMES)}")
    if engine == "reference" and np.dtype(real) != np.float64:
        raise OptionError("the reference engine computes in fp64 only")
    if engine in GPU_ENGINES and not gpu_available():
        try:
            require_cupy()
        except GpuUnavailableError as error:
            raise GpuUnavailableError(f"engine {engine} cannot run here: {error}") from None
    return engine
