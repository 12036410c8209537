"""The lattice engines by name. Each reads canonical, valid instruments and a curve set and returns bond and
option prices (float64 arrays, instrument order); an engine never picks another engine.

``reference``: one instrument at a time, literal (float64 only); ``cpu``: numba, parallel over instruments;
``gpu-outer`` and ``gpu-flat``: CUDA kernels through CuPy. ``auto`` is no engine of its own: the inspector's
plan (:mod:`distprice.execute`) may give parts of a portfolio to different engines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..choices import AUTO, ENGINE_NAMES
from ..cuda import gpu_available, require_cupy
from ..curves import ZeroCurve
from ..errors import GpuUnavailableError, OptionError
from .batch import pack
from .cpu import price_cpu
from .gpu import price_gpu
from .instruments import Instruments
from .reference import price_reference

HOST, GPU = "host", "gpu"
"""Where an engine runs: on the host's cores, or on a GPU (CUDA kernels)."""

Prices = tuple[np.ndarray, np.ndarray]
Prepared = Callable[[dict[str, ZeroCurve]], Prices]
"""Rows readied by a host engine: curve set -> their bond and option prices."""


@dataclass(frozen=True)
class Engine:
    """A lattice engine: its ``name``, where it runs (``kind``: HOST or GPU), and how it prices.

    A host engine's ``prepare(instruments, curves, real)`` readies rows for pricing once (the CPU engine packs
    them in precision ``real``) and returns them :data:`Prepared`: curve set -> bond and option prices, called once per
    market scenario (``curves``, the first curve set, must name every curve a scenario gives the rows). A GPU
    engine is its CUDA ``kernel`` (``outer`` or ``flat``), launched by :func:`~.gpu.start_gpu`. Calling an
    engine prices ``instruments`` on ``curves`` in precision ``real``. A host engine prices a part of a plan in
    this process piece by piece, pieces of a fraction of a second (:func:`distprice.execute.host_pieces`)."""

    name: str
    kind: str
    prepare: Callable[[Instruments, dict[str, ZeroCurve], np.dtype], Prepared] | None = None
    kernel: str | None = None
    node_step_seconds: float | None = None
    """Seconds per node-step (full rectangles) of a host engine the inspector's cost model does not predict (the
    reference engine, on one core of a 2-core machine); None: the cost model's figures."""

    def __call__(self, instruments: Instruments, curves: dict[str, ZeroCurve], real=np.float64) -> Prices:
        if self.kind == GPU:
            run = price_gpu(pack(instruments, curves, real), self.kernel)
            return run.bond, run.option
        return self.prepare(instruments, curves, real)(curves)


def _reference(instruments: Instruments, curves: dict[str, ZeroCurve], real) -> Prepared:
    """``instruments`` for the reference engine (float64 only: ``real`` is not read)."""
    return lambda scenario: price_reference(instruments, scenario)


def _cpu(instruments: Instruments, curves: dict[str, ZeroCurve], real) -> Prepared:
    """``instruments`` for the CPU engine, packed once."""
    batch = pack(instruments, curves, real)
    return lambda scenario: price_cpu(batch.with_curves(scenario))


ENGINES: dict[str, Engine] = {
    engine.name: engine
    for engine in (
        Engine("reference", HOST, prepare=_reference, node_step_seconds=4e-7),
        Engine("cpu", HOST, prepare=_cpu),
        Engine("gpu-outer", GPU, kernel="outer"),
        Engine("gpu-flat", GPU, kernel="flat"),
    )
}
GPU_ENGINES = tuple(name for name, engine in ENGINES.items() if engine.kind == GPU)


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
