"""Monte-Carlo jobs through the interfaces: the command line, distprice.price_mc, and a cluster that spreads
each job's paths over its workers (the same bits as in this process)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from distributed import get_task_stream

import distprice
from distprice.cli import main
from distprice.cluster.pricer import Pricer

DATA = Path(__file__).parent / "data" / "optionpricing"
SMALL, MEDIUM = DATA / "finpar_small.input.data", DATA / "finpar_medium.input.data"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_the_command_writes_one_row_per_job_and_model(tmp_path):
    output = tmp_path / "mc.csv"
    result = CliRunner().invoke(
        main, ["mc", "--input", str(MEDIUM), "--output", str(output), "--paths", "20000", "--engine", "cpu"]
    )
    assert result.exit_code == 0, result.output
    assert "priced 1 job (1 model) on 20000 paths" in result.output
    written = pd.read_csv(output)
    expected = distprice.price_mc(MEDIUM, paths=20000, engine="cpu")
    assert list(written.columns[:5]) == ["job", "model", "contract", "price", "stderr_batches"]
    assert written.loc[0, "price"] == pytest.approx(expected.loc[0, "price"], rel=1e-15)


def test_a_bad_input_exits_2_and_writes_nothing(tmp_path):
    broken = tmp_path / "jobs"
    broken.mkdir()
    pd.DataFrame({"job": ["a"], "contract": ["9"], "paths": [100]}).to_csv(broken / "mc_jobs.csv", index=False)
    result = CliRunner().invoke(main, ["mc", "--input", str(broken), "--output", str(tmp_path / "o.csv")])
    assert result.exit_code == 2 and "mc_dates: required table is missing" in result.output
    assert not (tmp_path / "o.csv").exists()


def test_paths_spread_over_the_cluster_give_the_same_bits(local):
    here = distprice.price_mc(SMALL, paths=300_000, engine="cpu")
    medium = distprice.price_mc(MEDIUM, paths=70_000, engine="cpu", chunks=3)
    with Pricer(local, chunks_per_worker=3) as pricer, get_task_stream(local) as stream:
        spread = pricer.price_mc(SMALL, paths=300_000, engine="cpu")
        far = pricer.price_mc(MEDIUM, paths=70_000, engine="cpu")
    assert spread.loc[0, "price"] == here.loc[0, "price"]  # bit for bit
    assert far.loc[0, "price"] == pytest.approx(medium.loc[0, "price"], rel=1e-12)
    assert spread.loc[0, "chunks"] == 6 and set(spread["engine"]) == {"cpu"}
    names = {task["key"].split("-")[0] for task in stream.data}
    assert "mc_paths_cpu_fp64" in names
    assert np.isfinite(spread["stderr_batches"]).all()


def test_bench_times_an_engine_and_splits_the_cpu_stages():
    result = CliRunner().invoke(
        main, ["bench", "--family", "mc", "--dataset", "medium", "--size", "8192", "--engine", "cpu", "--repeat", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "set medium  contract" in result.output and "paths 8192" in result.output and "PDU/s" in result.output
    stages = next(line for line in result.output.splitlines() if line.startswith("stages"))
    figures = dict(re.findall(r"(sobol|inverse_normal|bridge|paths_payoff) ([0-9.]+)", stages))
    # each stage is a difference of timings on 8192 paths: a short one may read 0.00 on a busy machine
    assert len(figures) == 4 and all(float(v) >= 0 for v in figures.values())
    assert sum(float(v) for v in figures.values()) > 0
    assert float(stages.rpartition("PDU/s ")[2]) > 1e6
