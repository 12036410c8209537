"""The inspector's statistics and plans (no GPU needed)."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import distprice
from distprice import api
from distprice.cli import main
from distprice.cuda import gpu_available
from distprice.curves import load_curves
from distprice.execute import fixed_plan
from distprice.inspector import describe, plan
from distprice.lattice import datasets
from distprice.lattice.desk import AS_OF, desk
from distprice.lattice.instruments import prepare
from distprice.tuning import CPU_DEVICE, shipped_default

from utils import random_portfolio

H100 = "NVIDIA H100 80GB HBM3"


def shape(name, size=None, seed=0):
    geometry = prepare(datasets.generate(name, size, seed), load_curves(None)).geometry
    return geometry.width, geometry.height


def assert_partition(chosen, n):
    rows = np.concatenate([part.rows for part in chosen.parts])
    assert sorted(rows) == list(range(n))


def test_describe_counts_quantiles_and_skew():
    stats = describe(np.array([3, 5, 7, 101]), np.array([10, 10, 10, 10]))
    assert stats["rows"] == 4 and stats["node_steps"] == 2 * (3 + 5 + 7 + 101) * 10
    assert stats["width"]["min"] == 3 and stats["width"]["max"] == 101 and stats["width"]["p50"] == 6
    assert stats["width"]["skewness"] > 1 and stats["height"]["skewness"] == 0
    width, height = shape("S1", 20_000)
    assert describe(width, height)["width"]["skewness"] > 5  # 1 % wide trees: a long right tail


def test_without_a_gpu_everything_goes_to_the_cpu():
    width, height = shape("R1", 2000)
    chosen = plan(width, height, shipped_default(CPU_DEVICE, "fp64"), gpu=False)
    assert [p.engine for p in chosen.parts] == ["cpu"] and list(chosen.considered) == ["cpu"]
    assert_partition(chosen, 2000)


@pytest.mark.parametrize(
    "name,bulk",
    [
        ("U1", "gpu-flat"),
        ("U2", "gpu-flat"),
        ("R1", "gpu-flat"),
        ("S1", "gpu-flat"),
        ("S2", "gpu-flat"),
        ("B1", "gpu-flat"),
    ],
)
def test_on_an_h100_the_bulk_goes_where_measured_fastest(name, bulk):
    width, height = shape(name, 100_000 if name != "U1" else None)
    n = len(width)
    chosen = plan(width, height, shipped_default(H100, "fp64"), gpu=True)
    assert_partition(chosen, n)
    assert max(chosen.parts, key=lambda p: len(p.rows)).engine == bulk
    assert chosen.seconds == min(chosen.considered.values())
    assert chosen.considered["cpu"] > chosen.considered[bulk]


def test_a_model_where_outer_wins_on_cached_narrow_trees_splits_the_bimodal_mix():
    width, height = shape("B1", 20_000)
    cheap_outer = dataclasses.replace(
        shipped_default(H100, "fp64"),
        outer_cached_node_step=1e-13,
        outer_thread_node_step=1e-10,
        pack_row=1e-9,
        pack_step=0.0,
        gpu_wave=1e-6,
        flat_host=0.0,
    )
    chosen = plan(width, height, cheap_outer, gpu=True)
    engines = {p.engine: p for p in chosen.parts}
    assert {"gpu-outer", "gpu-flat"} <= set(engines)
    assert width[engines["gpu-outer"].rows].max() < width[engines["gpu-flat"].rows].min()
    assert_partition(chosen, 20_000)
    # a chunk of the job, planned with the job's choice: the same split by width, however its widths fall
    threshold = width[engines["gpu-outer"].rows].max()
    assert chosen.chosen == f"gpu-outer (width <= {threshold}) + gpu-flat"
    for chunk in (np.arange(0, 20_000, 7), np.flatnonzero(width <= threshold)[:50], np.flatnonzero(width > threshold)):
        part = plan(width[chunk], height[chunk], cheap_outer, gpu=True, only=chosen.chosen)
        assert list(part.considered) == [chosen.chosen] and part.chosen == chosen.chosen
        assert_partition(part, len(chunk))
        for p in part.parts:
            assert ((width[chunk][p.rows] <= threshold) == (p.engine == "gpu-outer")).all()
    with pytest.raises(ValueError, match="no plan 'gpu-flat' without a GPU"):
        plan(width, height, cheap_outer, gpu=False, only="gpu-flat")


def test_a_tiny_portfolio_stays_on_the_cpu_when_a_launch_costs_more():
    slow_launch = dataclasses.replace(shipped_default(H100, "fp64"), gpu_launch=1e-2)
    chosen = plan(np.array([3, 5]), np.array([1, 2]), slow_launch, gpu=True)
    assert [p.engine for p in chosen.parts] == ["cpu"]


def test_a_fast_cpu_takes_everything():
    width, height = shape("R1", 2000)
    fast_cpu = dataclasses.replace(shipped_default(H100, "fp64"), cpu_node_step=1e-14, cpu_step=0.0, cpu_row=0.0)
    assert [p.engine for p in plan(width, height, fast_cpu, gpu=True).parts] == ["cpu"]


def test_engine_of_rows_labels_every_row():
    width, height = shape("B1", 3000)
    cheap_outer = dataclasses.replace(
        shipped_default(H100, "fp64"), outer_cached_node_step=1e-13, outer_thread_node_step=1e-10
    )
    labels = plan(width, height, cheap_outer, gpu=True).engine_of_rows(3000)
    assert set(labels) <= {"gpu-outer", "gpu-flat", "cpu"} and not pd.isna(labels).any() and len(labels) == 3000


# ---- the command and the priced table ----


def test_inspect_prints_shape_and_plan(tmp_path):
    source = tmp_path / "s1.parquet"
    datasets.generate("S1", 3000, seed=2).to_parquet(source, index=False)
    result = CliRunner().invoke(main, ["inspect", str(source)])
    assert result.exit_code == 0, result.output
    assert "rows 3000 (0 invalid)" in result.output and "skewness" in result.output
    assert "plan: predicted" in result.output and "candidates:" in result.output
    result = CliRunner().invoke(main, ["inspect", str(source), "--json"])
    report = json.loads(result.output)
    assert report["shape"]["rows"] == 3000
    assert sum(part["rows"] for part in report["plan"]["parts"]) == 3000
    assert report["plan"]["predicted_seconds"] == min(report["candidates"].values())
    # the portfolio as `run` takes it, too; given twice or not at all, a usage error
    flagged = CliRunner().invoke(main, ["inspect", "--portfolio", str(source), "--json"])
    assert flagged.exit_code == 0 and json.loads(flagged.output) == report
    for args in (["inspect"], ["inspect", str(source), "--portfolio", str(source)]):
        refused = CliRunner().invoke(main, args)
        assert refused.exit_code == 2 and "give the portfolio once" in refused.output


def test_inspect_checks_dated_rows_as_run_does_and_says_why_rows_are_invalid(tmp_path):
    book = desk(60, seed=4)
    undated = book.portfolio.drop(columns="valuation_date")
    undated.to_csv(tmp_path / "book.csv", index=False)
    book.curves.to_csv(tmp_path / "curves.csv", index=False)
    book.exercise_schedule.to_csv(tmp_path / "calls.csv", index=False)
    common = ["inspect", str(tmp_path / "book.csv"), "--curves", str(tmp_path / "curves.csv")]
    # without a valuation date no dated row can be priced, and inspect says so, rule by rule
    result = CliRunner().invoke(main, common)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("rows 0 (60 invalid), node-steps 0.000e+00")
    first = undated["id"].iloc[0]
    assert lines[1] == (
        "  invalid: 60 rows, valuation_date: is required: give the job's valuation date (as_of) or this column "
        f"(first: row 1 (id '{first}'))"
    )
    # --as-of as run takes it: the bermudan rows whose dates the exercise schedule gives still lack them
    result = CliRunner().invoke(main, [*common, "--as-of", AS_OF, "--json"])
    figures = json.loads(result.stdout)
    scheduled = int(undated["id"].isin(book.exercise_schedule["id"]).sum())
    assert figures["invalid_rows"] == scheduled > 0
    assert [(rule["column"], rule["rows"]) for rule in figures["invalid_rules"]] == [
        ("expiry_date", scheduled),
        ("strike", scheduled),
    ]
    # with it every row is valid, and the shape is that of the book valued by its own column
    schedule = ["--exercise-schedule", str(tmp_path / "calls.csv")]
    result = CliRunner().invoke(main, [*common, "--as-of", AS_OF, *schedule])
    assert result.stdout.startswith("rows 60 (0 invalid)") and "invalid:" not in result.stdout
    result = CliRunner().invoke(main, [*common, "--as-of", AS_OF, *schedule, "--json"])
    own = api.inspect(book.portfolio, book.curves, exercise_schedule=book.exercise_schedule)
    assert json.loads(result.stdout)["shape"] == json.loads(json.dumps(own.figures["shape"]))
    assert own.figures["invalid_rules"] == [] and own.figures["shape"]["node_steps"] > 0
    refused = CliRunner().invoke(main, [*common, "--as-of", "2026-02-30"])
    assert refused.exit_code == 2 and "Invalid value for --as-of" in refused.output


def test_inspect_names_the_five_most_broken_rules_and_counts_the_others():
    book = random_portfolio(np.random.default_rng(1), 8, max_steps_per_year=12)
    broken = {"strike": -1.0, "volatility": -0.01, "mean_reversion": -0.1, "maturity": -1.0, "face": -5.0}
    for row, (column, value) in enumerate(broken.items()):
        book.loc[row, column] = value
    book.loc[5:6, "steps_per_year"] = 0
    lines = list(api.inspect(book).lines())
    assert lines[0].startswith("rows 1 (7 invalid)")
    assert lines[1] == "  invalid: 2 rows, steps_per_year: must be >= 1 (first: row 6 (id 'ins-5'))"
    assert lines[2] == "  invalid: 1 row, strike: must be >= 0 (first: row 1 (id 'ins-0'))"
    assert lines[6] == "  invalid: ... and 2 more rules (--json lists them all)" and lines[7].startswith("width")


def test_auto_records_the_engine_of_each_row(mixed_portfolio):
    priced = distprice.price(mixed_portfolio, engine="auto")
    expected = distprice.price(mixed_portfolio, engine="reference")
    np.testing.assert_allclose(priced["price"], expected["price"], rtol=1e-11, atol=1e-11)
    assert priced["engine"].notna().all()
    if not gpu_available():
        assert (priced["engine"] == "cpu").all()
    bad = pd.concat([mixed_portfolio.head(3), mixed_portfolio.head(1).assign(id="bad", strike=-1.0)])
    reported = distprice.price(bad, engine="auto", on_invalid="report")
    assert reported["engine"].isna().tolist() == [False, False, False, True]


def test_gpu_parts_are_pipelined_in_waves_when_the_host_work_is_large():
    width, height = shape("R1", 100_000)
    model = dataclasses.replace(shipped_default(H100, "fp64"), pack_row=4e-6)  # a host slower than the kernel
    chosen = plan(width, height, model, gpu=True)
    (part,) = chosen.parts
    assert part.engine == "gpu-flat" and part.waves > 1
    # pipelining hides the kernel behind the host's layout of the next wave
    assert chosen.seconds < model.pack(height) + len(width) * model.gpu_upload_row + part.seconds
    tiny = plan(width[:50], height[:50], model, gpu=True)
    assert tiny.parts[0].waves == 1
    # host threads that lay out waves at once shorten the pipeline and never favour fewer waves
    threaded = plan(width, height, dataclasses.replace(model, pack_parallel=3.0), gpu=True)
    assert threaded.seconds < 0.8 * chosen.seconds and threaded.parts[0].waves >= part.waves
    # a GPU that other processes keep busy meanwhile: one wave, the same engine, launched in turns with them
    (shared,) = plan(width, height, model, gpu=True, gpu_processes=8).parts
    assert shared.engine == part.engine and shared.waves == 1 and shared.turns and not part.turns
    assert fixed_plan("gpu-outer", 10, turns=True).parts[0].turns
    assert not fixed_plan("cpu", 10, turns=True).parts[0].turns


def test_the_planned_flat_shape_fits_a_rare_wide_tree():
    """The shape is judged on a sample; the widest tree must be in it, or the bins could not hold it."""
    from distprice.lattice.layouts import flat_layout

    width = np.full(20_001, 33)
    width[12_345] = 2047  # 2 nodes per thread, in a block of 1024 threads only
    height = np.full(20_001, 100)
    model = shipped_default(H100, "fp64")
    (part,) = plan(width, height, model, gpu=True).parts
    assert (part.detail["nodes"], part.detail["threads"]) == (2, 1024)
    flat_layout(width, height, part.detail["threads"], part.detail["nodes"])  # raises if the widest does not fit
    width[12_345] = 2057  # 4 nodes per thread: a launch of its own, the others' shape judged without it
    (part,) = plan(width, height, model, gpu=True).parts
    assert part.detail["nodes"] == 2 and part.detail["threads"] < 1024
    alone = model.flat(width[12_345:12_346], height[12_345:12_346])
    assert alone[1]["nodes"] == 4
    others = model.flat(np.delete(width, 12_345), np.delete(height, 12_345))[0]
    assert part.seconds == pytest.approx(others + alone[0] - model.flat_host, rel=1e-12)
