"""The command line: run (CSV and Parquet round trips, bad input), generate, bench."""

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import distprice
from distprice.cli import main
from distprice.cuda import gpu_available

from utils import HULL_PUT


@pytest.fixture
def runner():
    return CliRunner()


@pytest.mark.parametrize("fmt_in,fmt_out", [("csv", "csv"), ("parquet", "parquet"), ("csv", "parquet")])
def test_run_round_trip(runner, tmp_path, mixed_portfolio, fmt_in, fmt_out):
    source, output = tmp_path / f"book.{fmt_in}", tmp_path / f"priced.{fmt_out}"
    portfolio = mixed_portfolio.head(40).assign(desk="rates")
    portfolio.to_csv(source, index=False) if fmt_in == "csv" else portfolio.to_parquet(source, index=False)
    result = runner.invoke(main, ["run", "--portfolio", str(source), "--output", str(output)])
    assert result.exit_code == 0, result.output
    assert "priced 40 of 40 rows" in result.output and "NS/s" in result.output
    priced = pd.read_csv(output) if fmt_out == "csv" else pd.read_parquet(output)
    expected = distprice.price(portfolio, engine="reference")
    assert list(priced["id"]) == list(portfolio["id"]) and (priced["desk"] == "rates").all()
    np.testing.assert_allclose(priced["price"], expected["price"], rtol=1e-12, atol=1e-12)
    assert set(priced["engine"]) <= {"cpu", "gpu-flat", "gpu-outer"}
    if not gpu_available():
        assert (priced["engine"] == "cpu").all()
    assert list(tmp_path.glob(".*.tmp")) == []


def test_run_with_curves_and_engine(runner, tmp_path):
    pd.DataFrame([dict(HULL_PUT, id=1, curve="flat")]).to_csv(tmp_path / "b.csv", index=False)
    pd.DataFrame(dict(curve=["flat"], t=[1.0], zero_rate=[0.05])).to_csv(tmp_path / "c.csv", index=False)
    result = runner.invoke(
        main,
        [
            "run",
            "--portfolio",
            str(tmp_path / "b.csv"),
            "--curves",
            str(tmp_path / "c.csv"),
            "--output",
            str(tmp_path / "o.csv"),
            "--engine",
            "reference",
        ],
    )
    assert result.exit_code == 0, result.output
    priced = pd.read_csv(tmp_path / "o.csv")
    assert priced.loc[0, "bond_price"] == pytest.approx(100 * np.exp(-0.05 * 9), rel=1e-13)
    assert priced.loc[0, "engine"] == "reference"


def test_invalid_input_strict_exits_2_and_writes_nothing(runner, tmp_path):
    pd.DataFrame([dict(HULL_PUT, id="a"), dict(HULL_PUT, id="b", strike=-5)]).to_csv(tmp_path / "b.csv", index=False)
    output = tmp_path / "o.csv"
    result = runner.invoke(main, ["run", "--portfolio", str(tmp_path / "b.csv"), "--output", str(output)])
    assert result.exit_code == 2
    assert "row 2 (id 'b'), column 'strike': must be >= 0" in result.output
    assert "Traceback" not in result.output
    assert not output.exists() and list(tmp_path.glob(".*")) == []


def test_invalid_input_report_prices_the_rest(runner, tmp_path):
    pd.DataFrame([dict(HULL_PUT, id="a"), dict(HULL_PUT, id="b", strike=-5)]).to_csv(tmp_path / "b.csv", index=False)
    result = runner.invoke(
        main,
        ["run", "--portfolio", str(tmp_path / "b.csv"), "--output", str(tmp_path / "o.csv"), "--on-invalid", "report"],
    )
    assert result.exit_code == 4, result.output
    assert "priced 1 of 2 rows (1 invalid)" in result.output and "1 rows have an error" in result.output
    priced = pd.read_csv(tmp_path / "o.csv")
    assert np.isfinite(priced.loc[0, "price"]) and np.isnan(priced.loc[1, "price"])
    assert "strike" in priced.loc[1, "error"]


def test_unknown_output_format_is_a_clear_error(runner, tmp_path):
    pd.DataFrame([dict(HULL_PUT, id="a")]).to_csv(tmp_path / "b.csv", index=False)
    result = runner.invoke(main, ["run", "--portfolio", str(tmp_path / "b.csv"), "--output", str(tmp_path / "o.xlsx")])
    assert result.exit_code == 2 and "Invalid value for --output" in result.output
    assert "unknown table format" in result.output


@pytest.mark.parametrize("flag", ["--portfolio", "--curves"])
def test_an_output_that_is_an_input_is_refused(runner, tmp_path, flag):
    """The priced table would replace the job's own input: refused before anything is read, the file kept."""
    pd.DataFrame([HULL_PUT]).to_csv(tmp_path / "book.csv", index=False)
    pd.DataFrame({"curve": "usd", "t": [0.0, 10.0], "zero_rate": [0.03, 0.04]}).to_csv(
        tmp_path / "usd.csv", index=False
    )
    target = tmp_path / ("book.csv" if flag == "--portfolio" else "usd.csv")
    before = target.read_bytes()
    result = runner.invoke(
        main,
        [
            "run",
            "--in-process",
            "--portfolio",
            str(tmp_path / "book.csv"),
            "--curves",
            str(tmp_path / "usd.csv"),
            "--output",
            str(tmp_path / "." / target.name),
        ],
    )
    assert result.exit_code == 2 and f"is the job's input ({flag})" in result.output, result.output
    assert target.read_bytes() == before


def test_a_job_runs_with_the_objects_of_its_setup_out_of_full_garbage_collections(runner, tmp_path, monkeypatch):
    """A full pass of the garbage collector over every object of the process (modules, a local cluster's
    scheduler) stalled a job for 0.1-0.2 s: run keeps the objects alive when the job starts frozen while it runs,
    and no longer."""
    import gc

    import distprice.api

    pd.DataFrame([dict(HULL_PUT, id="a")]).to_csv(tmp_path / "book.csv", index=False)
    frozen = []

    priced = distprice.api._priced

    def price(*args, **kwargs):
        frozen.append(gc.get_freeze_count())
        return priced(*args, **kwargs)

    monkeypatch.setattr(distprice.api, "_priced", price)
    assert gc.get_freeze_count() == 0
    result = runner.invoke(
        main,
        ["run", "--in-process", "--portfolio", str(tmp_path / "book.csv"), "--output", str(tmp_path / "priced.csv")],
    )
    assert result.exit_code == 0, result.output
    assert len(frozen) == 1 and frozen[0] > 1000
    assert gc.get_freeze_count() == 0


def test_generate_and_price(runner, tmp_path):
    output = tmp_path / "s1.parquet"
    result = runner.invoke(main, ["generate", "S1", "--size", "300", "--seed", "4", "--output", str(output)])
    assert result.exit_code == 0, result.output
    table = pd.read_parquet(output)
    assert len(table) == 300 and table["id"].is_unique
    result = runner.invoke(main, ["run", "--portfolio", str(output), "--output", str(tmp_path / "p.csv")])
    assert result.exit_code == 0 and "priced 300 of 300 rows" in result.output


def test_bench_prints_node_steps_and_peer(runner):
    result = runner.invoke(
        main, ["bench", "--dataset", "U1", "--size", "20", "--repeat", "1", "--peer", "quantlib", "--peer-size", "2"]
    )
    assert result.exit_code == 0, result.output
    assert f"node-steps {2 * 259 * 606 * 20:.4e}" in result.output
    assert "peer quantlib  rows 2" in result.output and "ratio" in result.output


@pytest.mark.skipif(gpu_available(), reason="a GPU is visible here")
def test_gpu_engine_without_a_gpu_is_a_clear_error(runner, tmp_path, mixed_portfolio):
    mixed_portfolio.to_csv(tmp_path / "b.csv", index=False)
    output = tmp_path / "o.csv"
    result = runner.invoke(
        main, ["run", "--portfolio", str(tmp_path / "b.csv"), "--output", str(output), "--engine", "gpu-outer"]
    )
    assert result.exit_code == 1
    assert "engine gpu-outer cannot run here" in result.output and not output.exists()


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")
def test_bench_reports_the_kernel_alone_on_a_gpu(runner):
    result = runner.invoke(
        main, ["bench", "--dataset", "S1", "--size", "2000", "--repeat", "1", "--engine", "gpu-flat"]
    )
    assert result.exit_code == 0, result.output
    assert "engine gpu-flat" in result.output and "kernel " in result.output and "device memory" in result.output
