"""Timing an engine on a synthetic dataset (``distprice bench``): node-steps per second (NS/s) of a lattice
engine on one of the papers' portfolios, path-date-underlyings per second (PDU/s) of a Monte-Carlo engine on a
FinPar set. Each run is timed after a warm-up (compilation, caches) and the median of the timed runs is kept;
the results come as the lines the command prints.
"""

from __future__ import annotations

import importlib.resources
import statistics
import time
from collections.abc import Iterator

from .cuda import device_name
from .curves import builtin_curves, load_curves
from .errors import InvalidInputError, OptionError
from .execute import price_plan
from .job import exercise_schedule
from .lattice import datasets
from .lattice.batch import pack
from .lattice.desk import desk
from .lattice.engines import AUTO, ENGINE_NAMES, ENGINES, GPU_ENGINES, resolve
from .lattice.gpu import price_gpu
from .lattice.instruments import prepare
from .montecarlo import (
    datasets as path_datasets,
    price_range,
    read_inputs,
    resolve_engine,
    stage_split,
    validate,
    with_options,
)
from .precision import real_dtype

PATH_SETS = {"small": "finpar_small.input.data", "medium": "finpar_medium.input.data"}
"""The FinPar sets shipped with distprice, beside ``large`` (a worst-of autocall made here)."""


def lattice_dataset(name: str) -> str:
    """``name``, a lattice dataset; :class:`OptionError` for any other."""
    if name not in datasets.DATASETS:
        raise OptionError(f"{name!r} is no lattice dataset; choose one of {', '.join(datasets.DATASETS)}")
    return name


def lattice_engine(name: str) -> str:
    """``name``, a lattice engine; :class:`OptionError` for any other."""
    if name not in ENGINE_NAMES:
        raise OptionError(f"{name!r} is no lattice engine; choose one of {', '.join(ENGINE_NAMES)}")
    return name


def path_set(name: str) -> str:
    """``name``, a Monte-Carlo set (``small``, ``medium`` or ``large``); :class:`OptionError` for any other."""
    if name != "large" and name not in PATH_SETS:
        raise OptionError(f"{name!r} is no Monte-Carlo set; choose small, medium or large")
    return name


def bench_lattice(
    dataset: str,
    size: int | None,
    seed: int,
    engine: str,
    precision: str,
    repeat: int,
    peer: str | None = None,
    peer_size: int = 200,
) -> Iterator[str]:
    """Times a lattice engine on ``size`` rows of ``dataset`` (None: its own size): node-steps, median seconds,
    NS/s; with ``auto`` the plan followed; GPU engines also the kernel alone (CUDA events), the host layout and
    transfer times and the device memory; with ``peer`` (``quantlib``) a peer library's time on the first
    ``peer_size`` rows, scaled to ours."""
    real = real_dtype(precision)
    engine = resolve(engine, real)
    if dataset == "desk":
        book = desk(datasets.DEFAULT_SIZES[dataset] if size is None else size, seed)
        curve_set = load_curves(book.curves)
        prepared = prepare(
            book.portfolio, curve_set, exercise_schedule=exercise_schedule(book.exercise_schedule, book.portfolio)
        )
    else:
        curve_set = builtin_curves()
        prepared = prepare(datasets.generate(dataset, size, seed), curve_set)
    if prepared.problems:
        raise InvalidInputError(prepared.problems)
    instruments = prepared.instruments()
    node_steps = int(instruments.node_steps)
    run_engine = ENGINES.get(engine) or (lambda rows, curves, real: price_plan(rows, [curves], AUTO, real)[:2])
    # warm-up: compilation and caches (GPU kernels are built per block shape, so warm up on the same rows)
    run_engine(
        instruments if engine in (*GPU_ENGINES, AUTO) else instruments.take(range(min(8, len(instruments)))),
        curve_set,
        real,
    )
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run_engine(instruments, curve_set, real)
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    start = time.perf_counter()
    batch = pack(instruments, curve_set, real)
    layout = time.perf_counter() - start
    yield f"dataset {dataset}  rows {len(instruments)}  engine {engine}  precision {precision}"
    yield (
        f"node-steps {node_steps:.4e}  seconds {seconds:.4f} (median of {repeat}; layout {layout:.4f})"
        f"  NS/s {node_steps / seconds:.4e}"
    )
    if engine == AUTO:
        plan = price_plan(instruments, [curve_set], AUTO, real)[2]
        yield (
            "plan: "
            + "; ".join(f"{p.engine} {len(p.rows)} rows" for p in plan.parts)
            + f" (predicted {plan.seconds:.4f} s, {plan.model.source})"
        )
    if engine in GPU_ENGINES:
        runs = [price_gpu(batch, ENGINES[engine].kernel) for _ in range(repeat)]
        part = {name: statistics.median(r.seconds[name] for r in runs) for name in runs[0].seconds}
        yield (
            f"device {device_name()}  kernel {part['kernel']:.4f} s  NS/s {node_steps / part['kernel']:.4e}"
            f"  kernel layout {part['layout']:.4f} s  upload {part['upload']:.4f} s"
            f"  download {part['download']:.4f} s  device memory {runs[0].device_bytes / 2**20:.1f} MiB"
            + "".join(f"  {k} {v}" for k, v in runs[0].detail.items() if k in ("nodes", "threads", "bins"))
        )
    if peer:
        from .lattice.quantlib import price_quantlib

        rows = instruments.table.head(peer_size)
        peer_steps = int(instruments.geometry.node_steps[: len(rows)].sum())
        start = time.perf_counter()
        price_quantlib(rows, {name: (c.t, c.zero_rate) for name, c in curve_set.items()})
        peer_seconds = time.perf_counter() - start
        ours = peer_steps / (node_steps / seconds)
        yield (
            f"peer quantlib  rows {len(rows)}  seconds {peer_seconds:.4f}  NS/s {peer_steps / peer_seconds:.4e}"
            f"  ratio {peer_seconds / ours:.1f}x (distprice faster)"
        )


def bench_paths(dataset: str, paths: int | None, engine: str, precision: str, repeat: int) -> Iterator[str]:
    """Times a Monte-Carlo engine on set ``dataset`` (``paths``: None, the set's own): path-date-underlyings,
    median seconds, PDU/s; the CPU engine also each stage's CPU nanoseconds per PDU on one thread."""
    if dataset == "large":
        job = validate(path_datasets.large(paths or 2**17))[0]
    else:
        job = validate(read_inputs(importlib.resources.files("distprice.montecarlo") / "data" / PATH_SETS[dataset]))[0]
    job = with_options(job, paths=paths, precision=precision)
    engine = resolve_engine(engine, job)
    times = [price_range(job, 0, job.paths, engine).seconds for _ in range(repeat + 1)][1:]
    seconds = statistics.median(times)
    units = job.paths * len(job.t) * job.spots.shape[1] * len(job.models)
    yield (
        f"set {dataset}  contract {job.contract.name}  paths {job.paths}  dates {len(job.t)}  underlyings "
        f"{job.spots.shape[1]}  models {len(job.models)}  engine {engine}  precision {job.precision}"
    )
    yield f"path-date-underlyings {units:.4e}  seconds {seconds:.4f} (median of {repeat})  PDU/s {units / seconds:.4e}"
    if engine == "cpu":
        n = min(job.paths, max(4096, 2**21 // job.dims))
        split = stage_split(job, n)
        per_unit = n * job.dims * len(job.models)
        yield (
            "stages (1 thread, CPU ns per PDU): "
            + "  ".join(
                f"{k} {split[k] / per_unit * 1e9:.2f}" for k in ("sobol", "inverse_normal", "bridge", "paths_payoff")
            )
            + f"  one thread's PDU/s {split['pdu_per_s']:.4e}"
        )
