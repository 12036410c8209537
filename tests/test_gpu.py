"""The GPU kernels against the reference and CPU engines (``-m gpu``; skipped where no GPU is visible)."""

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice.cuda import gpu_available
from distprice.curves import load_curves
from distprice.lattice import datasets
from distprice.lattice.batch import pack
from distprice.lattice.engines import ENGINES
from distprice.lattice.gpu import price_gpu
from distprice.lattice.instruments import prepare
from distprice.lattice.layouts import FLAT_MAX_WIDTH

from utils import HULL_PUT, random_portfolio

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")]

KERNELS = ("outer", "flat")
RTOL = 1e-12


def relative_errors(ours, ref):
    """Worst bond error relative to the bond, and worst option error relative to the bond (an option's
    rounding is that of the bond it is written on)."""
    bond = np.max(np.abs(ours.bond - ref[0]) / np.abs(ref[0]))
    option = np.max(np.abs(ours.option - ref[1]) / np.abs(ref[0]))
    return bond, option


def batch_of(table, curves=None):
    curves = load_curves(curves)
    prepared = prepare(table, curves)
    assert not prepared.problems
    return prepared.instruments(), curves


def assert_kernel_matches(kernel, table, engine="reference", rtol=RTOL, **options):
    instruments, curves = batch_of(table)
    ref = ENGINES[engine](instruments, curves, np.float64)
    run = price_gpu(pack(instruments, curves), kernel, **options)
    bond, option = relative_errors(run, ref)
    assert bond <= rtol and option <= rtol, (kernel, bond, option)
    return run, ref


@pytest.mark.parametrize("kernel", KERNELS)
def test_random_portfolio_of_every_kind_matches_reference(kernel, mixed_portfolio):
    run, ref = assert_kernel_matches(kernel, mixed_portfolio)
    big = np.abs(ref[1]) > 1e-6
    assert big.sum() > 50
    assert np.max(np.abs(run.option - ref[1])[big] / np.abs(ref[1][big])) < 1e-10


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", ["U1", "U2", "R1", "R2", "R3", "S1", "S2"])
def test_datasets_at_reduced_size_match_cpu_engine(kernel, name):
    table = datasets.generate(name, 1500, seed=7)
    assert_kernel_matches(kernel, table, engine="cpu")


@pytest.mark.parametrize("kernel", KERNELS)
def test_datasets_sample_matches_reference(kernel):
    table = pd.concat([datasets.generate(name, 25, seed=3) for name in ("U1", "R1", "S2")], ignore_index=True)
    table["id"] = np.arange(len(table))
    assert_kernel_matches(kernel, table)


WIDE = dict(
    maturity=2.0,
    expiry=1.5,
    exercise="bermudan",
    exercise_frequency=4,
    first_exercise=0.5,
    coupon=0.05,
    coupon_frequency=2,
    volatility=0.004,
)
EDGE_CASES = {
    "width 3": dict(mean_reversion=5.0, steps_per_year=1, maturity=4.0, expiry=2.0),
    "height 1": dict(maturity=1 / 12, expiry=1 / 12),
    "expiry at maturity": dict(maturity=5.0, expiry=5.0, coupon=0.05, coupon_frequency=2),
    "american with monthly coupons": dict(
        maturity=2.0, expiry=1.5, exercise="american", coupon=0.08, coupon_frequency=12, steps_per_year=4
    ),
    "just above 1024 (1027)": dict(WIDE, mean_reversion=0.00431),
    "just above 2048 (2057)": dict(WIDE, mean_reversion=0.00215),
    "widest flat (4017)": dict(WIDE, mean_reversion=0.0011),
    "wider than flat (4419)": dict(WIDE, mean_reversion=0.001),
    "daily steps, 13435 wide": dict(
        maturity=0.5,
        expiry=0.25,
        exercise="american",
        coupon=0.04,
        coupon_frequency=4,
        strike=101.0,
        steps_per_year=365,
        mean_reversion=0.01,
        volatility=0.01,
    ),
    "widest allowed (32763)": dict(maturity=2.0, expiry=1.0, strike=95.0, steps_per_year=52, mean_reversion=0.0005841),
    "tallest allowed (199980 steps)": dict(maturity=99.99, expiry=1.0, steps_per_year=2000, mean_reversion=20.0),
}


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", EDGE_CASES, ids=list(EDGE_CASES))
def test_edge_cases_alone_and_in_a_crowd(kernel, case):
    # rounding grows with the steps: over 2*10^5 steps flat's forward sums, in warp order, left 4.7e-12 (H200)
    rtol = 1e-11 if case.startswith("tallest") else RTOL
    row = {**HULL_PUT, "steps_per_year": 12, "id": "edge", **EDGE_CASES[case]}
    alone = pd.DataFrame([row])
    assert_kernel_matches(kernel, alone, rtol=rtol)
    crowd = pd.concat([random_portfolio(np.random.default_rng(5), 40), alone], ignore_index=True)
    assert_kernel_matches(kernel, crowd, rtol=rtol)


def test_edge_case_widths_are_what_they_say():
    for case, expected in (
        ("just above 1024 (1027)", 1027),
        ("just above 2048 (2057)", 2057),
        ("widest flat (4017)", 4017),
        ("wider than flat (4419)", 4419),
        ("daily steps, 13435 wide", 13435),
        ("widest allowed (32763)", 32763),
    ):
        row = {**HULL_PUT, "steps_per_year": 12, "id": 1, **EDGE_CASES[case]}
        assert prepare(pd.DataFrame([row]), load_curves(None)).geometry.width[0] == expected
    assert 4017 <= FLAT_MAX_WIDTH < 4419


def test_wide_trees_take_the_kernel_they_fit():
    rows = [{**HULL_PUT, "steps_per_year": 12, "id": case, **EDGE_CASES[case]} for case in EDGE_CASES]
    instruments, curves = batch_of(pd.DataFrame(rows))
    run = price_gpu(pack(instruments, curves), "flat")
    assert run.detail["wide_rows"] == 3 and run.detail["flat_rows"] == len(rows) - 3
    assert run.detail["nodes"] == 2 and set(run.detail["shapes"]) == {2, 4}  # 2057 and 4017 wide: 4 a thread


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("real", [np.float64, np.float32])
def test_a_rows_price_is_the_same_bits_in_any_batch(kernel, real, mixed_portfolio):
    """Whatever else a batch holds and in whatever order (a job's chunks change with its workers), each row's
    prices are the same bits: the flat kernel's forward sums do not depend on where a tree lies in its block,
    nor on its batch's widest tree, and a follower's prices are its own."""
    widths = ("just above 1024 (1027)", "just above 2048 (2057)", "widest flat (4017)", "wider than flat (4419)")
    wide = [{**HULL_PUT, "steps_per_year": 12, "id": c, **EDGE_CASES[c]} for c in widths]
    few = datasets.generate("R1", 600, seed=3).assign(mean_reversion=0.1, volatility=0.01)  # shared trees
    table = pd.concat([mixed_portfolio, pd.DataFrame(wide), few], ignore_index=True)
    table = table.assign(id=np.arange(len(table)))
    instruments, curves = batch_of(table)
    whole = price_gpu(pack(instruments, curves, real), kernel, check_finite=False)
    rng = np.random.default_rng(8)
    order = rng.permutation(len(table))
    for rows in np.array_split(order, [7, 160, 900]):
        part = price_gpu(pack(instruments.take(rows), curves, real), kernel, check_finite=False)
        np.testing.assert_array_equal(part.bond, whole.bond[rows])
        np.testing.assert_array_equal(part.option, whole.option[rows])
    assert np.isfinite(whole.bond[: len(mixed_portfolio)]).all()


def test_outer_layouts_give_identical_prices():
    """V1, V2 and V4 only move data: each thread does the same arithmetic, so prices agree bit for bit."""
    instruments, curves = batch_of(datasets.generate("R1", 700, seed=11))
    batch = pack(instruments, curves)
    warp = price_gpu(batch, "outer")
    for options in (dict(lanes=None, sort=False), dict(lanes=1, sort=False), dict(lanes=32, sort=False)):
        other = price_gpu(batch, "outer", **options)
        np.testing.assert_array_equal(other.bond, warp.bond)
        np.testing.assert_array_equal(other.option, warp.option)


def test_flat_block_shapes_agree():
    """Block size and nodes per thread change only the order of the segmented sums: rounding apart, equal."""
    instruments, curves = batch_of(datasets.generate("S1", 800, seed=2))
    batch = pack(instruments, curves)
    shapes = [(1, 512), (1, 1024), (2, 256), (2, 512), (2, 1024), (4, 256)]
    runs = [price_gpu(batch, "flat", nodes=nodes, threads=threads) for nodes, threads in shapes]
    for run, (nodes, threads) in zip(runs, shapes):
        assert (run.detail["nodes"], run.detail["threads"]) == (nodes, threads)
        bond, option = relative_errors(run, (runs[0].bond, runs[0].option))
        assert bond < 1e-14 and option < 1e-14


@pytest.mark.parametrize("kernel", KERNELS)
def test_fp32_error_is_reported_and_small(kernel, mixed_portfolio, record_property):
    instruments, curves = batch_of(mixed_portfolio)
    ref = ENGINES["reference"](instruments, curves, np.float64)
    run = price_gpu(pack(instruments, curves, np.float32), kernel)
    bond, option = relative_errors(run, ref)
    record_property("fp32_bond_error", bond)
    record_property("fp32_option_error", option)
    print(f"{kernel} fp32: bond {bond:.2e}, option {option:.2e} (relative to the bond)")
    assert 0 < bond < 1e-4 and option < 1e-3


def test_engines_through_the_api_and_auto(mixed_portfolio):
    ref = distprice.price(mixed_portfolio, engine="reference")
    for engine in ("gpu-outer", "gpu-flat", "auto"):
        priced = distprice.price(mixed_portfolio, engine=engine)
        assert list(priced["id"]) == list(mixed_portfolio["id"])
        np.testing.assert_allclose(priced["price"], ref["price"], rtol=1e-11, atol=1e-11)
    assert set(priced["engine"]) <= {"gpu-flat", "gpu-outer", "cpu"}


def test_single_instrument_hull_example_on_gpu():
    for engine in ("gpu-outer", "gpu-flat"):
        priced = distprice.price(pd.DataFrame([dict(HULL_PUT, id=1, steps_per_year=365)]), engine=engine)
        assert priced.loc[0, "width"] == 1345
        assert abs(priced.loc[0, "price"] - 1.8096889) < 5e-8


@pytest.mark.parametrize("engine", ["gpu-outer", "gpu-flat"])
def test_fp32_overflow_is_a_clear_error(engine):
    row = dict(
        HULL_PUT, id="long", maturity=97.0, expiry=40.0, mean_reversion=0.009, volatility=0.0194, steps_per_year=12
    )
    assert np.isfinite(distprice.price(pd.DataFrame([row]), engine=engine)["price"]).all()
    with pytest.raises(distprice.InvalidInputError, match="could not be priced: .* fp32 range"):
        distprice.price(pd.DataFrame([row]), engine=engine, precision="fp32")


@pytest.mark.parametrize("name,size", [("U1", None), ("S1", 20_000), ("R1", 20_000)])
def test_auto_puts_the_bulk_on_the_faster_kernel(name, size):
    """The measured gap between the kernels on these shapes is 5x or more, far above timing noise."""
    from distprice.inspector import plan
    from distprice.tuning import current_model

    instruments, curves = batch_of(datasets.generate(name, size, seed=1))
    batch = pack(instruments, curves)
    kernel = {k: min(price_gpu(batch, k).seconds["kernel"] for _ in range(3)) for k in KERNELS}
    chosen = plan(batch.geometry.width, batch.geometry.height, current_model("fp64", True), gpu=True)
    bulk = max(chosen.parts, key=lambda p: len(p.rows))
    assert bulk.engine == "gpu-" + min(kernel, key=kernel.get), (kernel, chosen.considered)


@pytest.mark.parametrize("engine, turns", [("gpu-flat", False), ("gpu-outer", False), ("gpu-flat", True)])
def test_scenarios_in_pipelined_waves_match_the_cpu_engine(engine, turns):
    """One upload and layout per wave, each scenario's curve knots swapped in: every (scenario, row) equals
    the CPU engine's price under that scenario, with more launches than are ever in flight at once (or each
    launch in its turn on the GPU, waited for there)."""
    from distprice.execute import GPU_IN_FLIGHT, price_parts
    from distprice.inspector import Part
    from distprice.lattice.cpu import price_cpu
    from distprice.scenarios import shifted

    instruments, curves = batch_of(datasets.generate("R1+S2", 3000, seed=3))
    curve_sets = list(shifted(curves, (-50.0, 0.0, 35.0, 100.0)).values())
    part = Part(engine, np.arange(len(instruments)), float("nan"), "test", waves=3, turns=turns)
    assert part.waves * len(curve_sets) > GPU_IN_FLIGHT
    bond, option, kernel_seconds = price_parts(instruments, curve_sets, [part], np.float64)
    assert kernel_seconds > 0
    batch = pack(instruments, curves)
    for s, scenario in enumerate(curve_sets):
        ref_bond, ref_option = price_cpu(batch.with_curves(scenario))
        np.testing.assert_allclose(bond[s], ref_bond, rtol=RTOL, atol=0)
        assert np.max(np.abs(option[s] - ref_option) / ref_bond) <= RTOL
    assert not np.allclose(bond[0], bond[1])  # the scenarios differ
