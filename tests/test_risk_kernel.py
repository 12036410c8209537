"""The risk kernels (kernels/risk.cu): the bump arithmetic of kernels/bumps.cuh built on the host and held
against the CPU engine's, the kernels compiled by nvcc, and (``-m gpu``) the GPU risk engine against the CPU's."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from distprice.cuda import gpu_available, kernel_dir
from distprice.curves import builtin_curves
from distprice.lattice.batch import pack
from distprice.lattice.cpu_risk import CpuRisk
from distprice.lattice.sweeps import bump_exponent, key_rate_bumps, start_steps

from utils import host_library, instruments_of, nvcc, random_portfolio, require_compiler

SHIM = """
#include "bumps.cuh"
extern "C" double exponent(double t, const double* grid, const double* dz, int knots)
{
    return bump_exponent(t, grid, dz, knots);
}
extern "C" double rate_factor(double here, double above, const double* grid, const double* dz, int knots)
{
    return bump_rate_factor(here, above, grid, dz, knots);
}
extern "C" double event_factor(double t, double tau, const double* grid, const double* dz, int knots)
{
    return bump_event_factor(t, tau, grid, dz, knots);
}
"""
DOUBLES = np.ctypeslib.ndpointer(np.float64, flags="C_CONTIGUOUS")


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    library = host_library(SHIM, tmp_path_factory.mktemp("bumps"), kernel_dir())
    for name in ("exponent", "rate_factor", "event_factor"):
        function = getattr(library, name)
        function.restype = ctypes.c_double
        function.argtypes = [ctypes.c_double, ctypes.c_double, DOUBLES, DOUBLES, ctypes.c_int][
            (1 if name == "exponent" else 0) :
        ]
    return library


def test_bump_arithmetic_equals_the_cpu_engines(shim):
    """dz(t) t on the key grid (flat ends, knots included), the factor of a step's exp(-alpha dt) and of an
    event's amount: the CPU engine's formulas, and np.interp's dz to rounding."""
    grid = np.array([1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 20.0, 30.0])
    rng = np.random.default_rng(2)
    times = np.r_[rng.uniform(0, 45, 400), grid, 0.0]
    for dz in (0.01 + 1e-3 * key_rate_bumps(8)[3], np.full(8, -2e-3), rng.normal(0, 0.01, 8)):
        for t in times:
            device = shim.exponent(t, grid, dz, 8)
            assert device == bump_exponent(t, grid, dz)
            assert device == pytest.approx(np.interp(t, grid, dz) * t, rel=1e-14, abs=1e-16)
        for here in rng.uniform(0, 40, 50):
            above = here + 1 / 52
            expected = np.exp(bump_exponent(here, grid, dz) - bump_exponent(above, grid, dz))
            assert shim.rate_factor(here, above, grid, dz, 8) == pytest.approx(expected, rel=1e-15)
            t = here + 0.3 / 52
            assert shim.event_factor(t, here, grid, dz, 8) == pytest.approx(
                np.exp(bump_exponent(here, grid, dz) - bump_exponent(t, grid, dz)), rel=1e-15
            )
        assert shim.event_factor(4.0, 4.0, grid, dz, 8) == 1.0  # on the grid: exactly one


@pytest.mark.parametrize("real", ["double", "float"])
def test_risk_kernels_compile(tmp_path, real):
    result = subprocess.run(
        [
            require_compiler("nvcc", nvcc()),
            "-std=c++17",
            "-arch=compute_90",
            "--ptx",
            f"-DREAL={real}",
            f"-I{kernel_dir()}",
            str(kernel_dir() / "risk.cu"),
            "-o",
            str(tmp_path / "k.ptx"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    kernels = ("risk_forward", "risk_forward_block", "risk_roll", "risk_roll_block")
    assert all(f".entry {name}" in ptx for name in kernels)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")
@pytest.mark.parametrize("held", [False, True])
def test_gpu_risk_engine_equals_the_cpus(held):
    """Forward passes kept on the device, then every tree rolled back under a base bump, a parallel shift and
    the key-rate bumps (the CPU starts some from bump 0's rows, the GPU runs each from the top), down to each
    row's first exercise, and trees of another volatility; ``held``: callable and puttable bonds roll their
    holder's value back alone."""
    instruments = instruments_of(random_portfolio(np.random.default_rng(11), 120))
    batch = pack(instruments, builtin_curves())
    embedded = (instruments.table["instrument"] != "bond_option").to_numpy() if held else None
    grid = np.array([1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 20.0, 30.0])
    bumps = np.concatenate(
        [np.zeros((1, 8)), np.full((1, 8), 1e-3), 1e-3 * key_rate_bumps(8), -1e-3 * key_rate_bumps(8)]
    )
    n = len(instruments)
    dz = np.broadcast_to(0.002 + bumps, (n, *bumps.shape))
    engines_agree(instruments, batch, embedded, grid, [(np.arange(n), dz), (np.arange(n, 2 * n)[::2], dz[::2, :3])])


def engines_agree(instruments, batch, embedded, grid, rolls):
    """The CPU and GPU risk engines' trees of every row, and of every row at a volatility 1 bp higher (tasks n
    and up), rolled back as ``rolls`` say (``(tasks, dz)`` each): the same prices."""
    from distprice.lattice.gpu_risk import GpuRisk

    n = len(instruments)
    rows = np.r_[np.arange(n), np.arange(n)]
    sigma = np.r_[instruments.table["volatility"], instruments.table["volatility"] + 1e-4]
    dr = np.r_[instruments.geometry.dr, instruments.geometry.dr * sigma[n:] / sigma[:n]]
    results = []
    for engine in (CpuRisk(batch, embedded), GpuRisk(batch, embedded)):
        trees = engine.trees(rows, sigma, dr)
        results.append([value for tasks, dz in rolls for value in engine.roll(trees, tasks, grid, dz)])
    for cpu, gpu in zip(*results):
        assert np.isfinite(gpu).all()
        np.testing.assert_allclose(gpu, cpu, rtol=1e-11, atol=1e-11)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")
@pytest.mark.parametrize("held", [False, True])
@pytest.mark.parametrize("window, part_bytes", [(256, 2**31), (2, 50_000)])
def test_block_kernels_equal_thread_kernels(monkeypatch, held, window, part_bytes):
    """A block per tree forward and per (tree, bump) back (``risk_forward_block``, ``risk_roll_block``)
    computes what a thread per tree and per (tree, bump) does (``risk_forward``, ``risk_roll``), on trees of
    every width the random portfolios have, under a parallel shift and key-rate bumps, with and without a cut,
    by blocks of one to several warps; with a window of 2 events, steps of more events than it holds compute
    the rest in place; parts of 50 kB of rows (kept rows of bump 0, or the threads' rows) roll a few tasks
    each. The same values to the last bits of a price of ~100: the block's forward pass adds a
    step's state prices up by warps, and the compiler may fuse a multiply and an add in one kernel and not in
    the other (a held bond's option is a difference of two such values)."""
    import distprice.lattice.gpu_risk as gpu_risk

    monkeypatch.setattr(gpu_risk, "RISK_EVENT_WINDOW", window)
    monkeypatch.setattr(gpu_risk, "RISK_ROW_BYTES", part_bytes)
    rng = np.random.default_rng(12)
    instruments = instruments_of(random_portfolio(rng, 150))
    batch = pack(instruments, builtin_curves())
    embedded = (instruments.table["instrument"] != "bond_option").to_numpy() if held else None
    grid = np.array([1.0, 2.0, 5.0, 10.0, 30.0])
    bumps = np.concatenate([np.zeros((1, 5)), np.full((1, 5), -1e-3), 1e-3 * key_rate_bumps(5)])
    n = len(instruments)
    dz = np.broadcast_to(0.001 + bumps, (n, *bumps.shape))
    width = instruments.geometry.width
    assert width.min() < 32 and width.max() > gpu_risk.RISK_BLOCK_NODES  # one and several warps a block
    starts = start_steps(grid, dz, instruments.geometry.dt, instruments.geometry.height, instruments.geometry.phase)
    assert (starts[:, 1:] < instruments.geometry.height[:, None]).mean() > 0.3  # bumps taking bump 0's rows
    row = np.repeat(np.arange(n), np.diff(batch.events.offsets))
    assert np.unique(np.c_[row, batch.events.step], axis=0, return_counts=True)[1].max() > 2  # a step of 3+
    results = []
    for widths in ((1, 10**9), (10**9, 10**9)):  # every tree by blocks, then every tree by threads
        monkeypatch.setattr(gpu_risk, "RISK_BLOCK_WIDTHS", widths)
        engine = gpu_risk.GpuRisk(batch, embedded)
        trees = engine.trees(np.arange(n), instruments.table["volatility"].to_numpy(), instruments.geometry.dr)
        results.append(engine.roll(trees, np.arange(n), grid, dz))
    for blocks, threads in zip(*results):
        assert np.isfinite(blocks).all()
        np.testing.assert_allclose(blocks, threads, rtol=1e-13, atol=1e-12)


def test_kept_rows_list_each_task_and_step_once_in_the_order_bump_0_meets_them():
    """Where bump 0 keeps its rows for the block rolls: one entry per (task, step) some other bump starts
    from, by task and steps decreasing (bump 0 rolls down), and each such bump pointed at its entry."""
    from distprice.lattice.gpu_risk import _kept_rows

    height = np.array([10, 7, 12])
    top = np.array(
        [
            [10, 4, 4, 10, 2],  # bumps 1 and 2 take step 4, bump 4 step 2
            [7, 7, 7, 7, 7],  # every bump from the top: nothing kept
            [12, 0, 9, 9, 12],
        ]
    )  # step 0 (the root) and step 9
    task, step, entry = _kept_rows(top, height)
    assert task.tolist() == [0, 0, 2, 2] and step.tolist() == [4, 2, 9, 0]
    assert entry.tolist() == [0, 0, 1, 3, 2, 2]  # (0,1) (0,2) (0,4) (2,1) (2,2) (2,3), row-major


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")
def test_gpu_risk_engine_shares_forward_passes_as_the_cpus():
    """The desk book's trees share forward passes (a few models, many rows): a block runs each group's once,
    keeping the state prices at every member's cut, and each member rolls back on its group's; its measures'
    prices equal the CPU engine's, base and volatility-bumped trees, under a parallel shift and key rates."""
    from distprice.curves import load_curves
    from distprice.job import exercise_schedule, valuation_day
    from distprice.lattice.desk import AS_OF, desk
    from distprice.lattice.groups import tree_groups
    from distprice.lattice.instruments import prepare

    book = desk(400, seed=5)
    curves = load_curves(book.curves)
    prepared = prepare(
        book.portfolio,
        curves,
        as_of=valuation_day(AS_OF),
        exercise_schedule=exercise_schedule(book.exercise_schedule, book.portfolio),
    )
    instruments = prepared.instruments()
    instruments = instruments.take(np.flatnonzero((instruments.table["instrument"] != "bond").to_numpy()))
    batch = pack(instruments, curves)
    embedded = (instruments.table["instrument"] != "bond_option").to_numpy()
    n = len(instruments)
    groups = tree_groups(instruments.geometry, batch.curve_index)
    assert groups.size.max() > 20 and len(np.unique(CpuRisk(batch).cut[groups.group == 0])) > 3
    grid = np.array([1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 20.0, 30.0])
    bumps = np.concatenate([np.zeros((1, 8)), np.full((1, 8), 1e-3), 1e-3 * key_rate_bumps(8)])
    engines_agree(
        instruments,
        batch,
        embedded,
        grid,
        [
            (np.arange(2 * n), np.broadcast_to(bumps[:2], (2 * n, 2, 8))),
            (np.arange(n), np.broadcast_to(bumps, (n, *bumps.shape))),
        ],
    )
