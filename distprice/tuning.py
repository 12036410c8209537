"""Tuning of the inspector's cost model: micro-benchmarks on this machine, fitted parameters, storage.

Tuned models live in the user's configuration directory (``$DISTPRICE_CONFIG_DIR``, else
``$XDG_CONFIG_HOME/distprice``, else ``~/.config/distprice``), under ``tuning/``, one small JSON file per
device name and precision. Without one, the shipped defaults (``tuning_defaults.json``: NVIDIA H100,
NVIDIA H200, CPU) are used, and the log says so once per process where the choice of engines depends on them
(a machine with a GPU).
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import logging
import os
import re
import statistics
import time
from pathlib import Path

import numpy as np

from .cuda import device_name
from .curves import builtin_curves
from .inspector import CostModel
from .lattice.batch import PACK_THREADS, pack, pack_parts
from .lattice.cpu import price_cpu
from .lattice.datasets import with_shapes
from .lattice.geometry import node_steps
from .lattice.instruments import prepare
from .precision import real_dtype

CPU_DEVICE = "cpu"
log = logging.getLogger(__name__)
_warned: set[str] = set()


def config_dir() -> Path:
    if "DISTPRICE_CONFIG_DIR" in os.environ:
        return Path(os.environ["DISTPRICE_CONFIG_DIR"])
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "distprice"


def model_path(device: str, precision: str) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    return config_dir() / "tuning" / f"{slug}-{precision}.json"


def save_model(model: CostModel) -> Path:
    """Writes ``model`` where :func:`load_model` finds it (atomically); returns the path."""
    path = model_path(model.device, model.precision)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(model.to_json())
    temporary.replace(path)
    return path


def shipped_default(device: str, precision: str) -> CostModel:
    """The shipped model whose device name is contained in ``device`` (H100, H200), else the CPU one."""
    table = json.loads((importlib.resources.files("distprice") / "tuning_defaults.json").read_text())
    entry = next((e for e in table if e["match"] != CPU_DEVICE and e["match"] in device), None)
    entry = entry or next(e for e in table if e["match"] == CPU_DEVICE)
    values = {**entry["common"], **entry[precision]}
    return CostModel(device=device, precision=precision, source=f"default ({entry['match']})", **values)


def load_model(device: str, precision: str = "fp64", tell: bool = True) -> CostModel:
    """The tuned model of ``device``, or the shipped default (logged as a warning, once per device and
    precision in a process, when ``tell``)."""
    path = model_path(device, precision)
    if path.exists():
        return CostModel.from_json(path.read_text())
    model = shipped_default(device, precision)
    if tell and (device, precision) not in _warned:
        _warned.add((device, precision))
        log.warning(
            "no tuning for %s (%s) in %s; the inspector uses the shipped %s figures to choose between engines. "
            "Run `distprice tune` to measure this machine.",
            device,
            precision,
            path.parent,
            model.source,
        )
    return model


def current_model(precision: str, gpu: bool, quiet: bool = False) -> CostModel:
    """The model for this machine: its GPU's, or without one its CPU's, as ``distprice tune`` measured it
    (else the shipped figures: said once, where the inspector's choice depends on them, on a machine with a GPU,
    unless ``quiet``)."""
    return load_model(device_name() if gpu else CPU_DEVICE, precision, tell=gpu and not quiet)


# ---- micro-benchmarks ----


def _median_seconds(run, repeat: int) -> float:
    run()
    return statistics.median(run() for _ in range(repeat))


def _instruments(width, height, seed: int = 0):
    """Valid instruments on trees of these shapes (on the built-in ``hull`` curve)."""
    return prepare(with_shapes(width, height, seed), builtin_curves()).instruments()


def _batch(width, height, real):
    return pack(_instruments(width, height), builtin_curves(), real)


def _r1_like(rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return 2 * rng.integers(3, 256, rows) + 1, rng.integers(13, 1201, rows)


def tune_cpu(model: CostModel, repeat: int = 3) -> CostModel:
    """Fits ``cpu_node_step``, ``cpu_step`` and ``cpu_row`` from three portfolios where each dominates in
    turn (R1-like trees, narrow short trees, trees of one step), the host layout's ``pack_row`` and
    ``pack_step`` from R1-like and short trees, and its ``pack_parallel`` on R1-like rows."""
    real = real_dtype(model.precision)
    curves = builtin_curves()
    shapes = [_r1_like(400), (np.full(5_000, 7), np.full(5_000, 60)), (np.full(20_000, 3), np.ones(20_000, np.int64))]
    work, seconds = [], []
    for width, height in shapes:
        batch = _batch(width, height, real)

        def run():
            tick = time.perf_counter()
            price_cpu(batch)
            return time.perf_counter() - tick

        seconds.append(_median_seconds(run, repeat))
        work.append([node_steps(width, height).sum(), 2.0 * height.sum(), len(width)])
    node_step, step, row = np.maximum(np.linalg.solve(np.array(work), np.array(seconds)), 0.0)

    # the host layout every plan starts with (event tables), per row and per tree step: from short trees
    # and from R1-like ones
    def pack_seconds(instruments):
        def run():
            tick = time.perf_counter()
            pack(instruments, curves, real)
            return time.perf_counter() - tick

        return _median_seconds(run, repeat)

    rng = np.random.default_rng(4)
    shapes = [(2 * rng.integers(3, 29, 20_000) + 1, rng.integers(12, 132, 20_000)), _r1_like(20_000, seed=2)]
    portfolios = [_instruments(width, height, seed=4) for width, height in shapes]
    pack_row, pack_step = np.maximum(
        np.linalg.solve(
            np.array([[len(height), height.sum()] for _, height in shapes], dtype=np.float64),
            np.array([pack_seconds(instruments) for instruments in portfolios]),
        ),
        0.0,
    )
    instruments = portfolios[1]
    # the same rows in PACK_THREADS parts, laid out one by one and then on as many threads at once
    parts = [np.arange(j, len(instruments), PACK_THREADS) for j in range(PACK_THREADS)]

    def run_parts(threads):
        def run():
            tick = time.perf_counter()
            for _ in pack_parts(instruments, parts, curves, real, threads):
                pass
            return time.perf_counter() - tick

        return _median_seconds(run, repeat)

    pack_parallel = max(run_parts(1) / run_parts(PACK_THREADS), 1.0)
    return dataclasses.replace(
        model,
        cpu_node_step=float(node_step),
        cpu_step=float(step),
        cpu_row=float(row),
        pack_row=float(pack_row),
        pack_step=float(pack_step),
        pack_parallel=pack_parallel,
    )


def tune_gpu(model: CostModel, repeat: int = 3) -> CostModel:
    """Fits the GPU parameters, each from a run where it dominates (see the inspector's module docstring)."""
    from .lattice.gpu import price_gpu, require_gpu
    from .lattice.layouts import block_cost_factor, choose_flat_shape, flat_thread_steps

    cupy = require_gpu()
    attributes = cupy.cuda.Device().attributes
    real = real_dtype(model.precision)

    def kernel_seconds(batch, kernel):
        return _median_seconds(lambda: price_gpu(batch, kernel, check_finite=False).seconds["kernel"], repeat)

    one = np.ones(1, dtype=np.int64)
    launch = kernel_seconds(_batch(3 * one, one, real), "flat")
    # flat: many alike trees (throughput), one tall tree (a lone block's step)
    width, height = np.full(20_000, 259), np.full(20_000, 606)
    nodes, threads = choose_flat_shape(width, height)
    run = flat_thread_steps(width, height, threads, nodes) * block_cost_factor(threads)
    uniform = _batch(width, height, real)
    flat_node_step = (kernel_seconds(uniform, "flat") - launch) / run
    flat_block_step = (kernel_seconds(_batch(259 * one, 1200 * one, real), "flat") - launch) / 2400
    wide_node_step = (kernel_seconds(_batch(4419 * one, 600 * one, real), "flat") - launch) / float(
        node_steps(4419, 600)
    )
    # outer: rows beyond the L2 cache, rows inside it, one lone thread
    outer_node_step = (kernel_seconds(uniform, "outer") - launch) / float(node_steps(width, height).sum())
    narrow = np.full(100_000, 7)
    outer_cached = (kernel_seconds(_batch(narrow, np.full(100_000, 600), real), "outer") - launch) / (
        2 * 7 * 600 * 100_000
    )
    outer_thread = (kernel_seconds(_batch(259 * one, 600 * one, real), "outer") - launch) / (2 * 259 * 600)
    # host work, on R1-like trees of two sizes: the copy to the device and each kernel's layout, per row
    # (and for flat a fixed part: the block shape is chosen on a sample)
    sizes = (5_000, 40_000)
    host = {}
    for rows in sizes:
        mixed = _batch(*_r1_like(rows, seed=1), real)
        for kernel in ("flat", "outer"):
            runs = [price_gpu(mixed, kernel, check_finite=False).seconds for _ in range(repeat + 1)][1:]
            host[kernel, rows] = {part: statistics.median(r[part] for r in runs) for part in ("layout", "upload")}

    def per_row(kernel, part):
        return (host[kernel, sizes[1]][part] - host[kernel, sizes[0]][part]) / (sizes[1] - sizes[0])

    flat_host = max(host["flat", sizes[0]]["layout"] - sizes[0] * per_row("flat", "layout"), 0.0)
    # fixed host work of one more wave: pack and price 16 rows
    small = _instruments(*_r1_like(16, seed=3))

    def wave():
        tick = time.perf_counter()
        price_gpu(pack(small, builtin_curves(), real), "flat", check_finite=False)
        return time.perf_counter() - tick

    return dataclasses.replace(
        model,
        gpu_launch=launch,
        flat_node_step=flat_node_step,
        flat_block_step=flat_block_step,
        wide_node_step=wide_node_step,
        outer_node_step=outer_node_step,
        outer_cached_node_step=outer_cached,
        outer_thread_node_step=outer_thread,
        multiprocessors=int(attributes["MultiProcessorCount"]),
        l2_bytes=int(attributes["L2CacheSize"]),
        gpu_upload_row=per_row("outer", "upload"),
        flat_host=flat_host,
        gpu_wave=_median_seconds(wave, repeat),
        flat_host_row=per_row("flat", "layout"),
        outer_host_row=per_row("outer", "layout"),
    )


def tune(device: str, precision: str = "fp64", gpu: bool = True, repeat: int = 3) -> CostModel:
    """Measures this machine (its GPU too, with ``gpu``) and returns the fitted model (not yet saved)."""
    model = dataclasses.replace(shipped_default(device, precision), source=f"tuned {time.strftime('%Y-%m-%d')}")
    model = tune_cpu(model, repeat)
    return tune_gpu(model, repeat) if gpu else model
