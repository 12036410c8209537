"""Monte-Carlo jobs through the interfaces: the command line, distprice.price_mc, and a cluster that spreads
each job's paths over its workers, in as many ranges as the job's work pays for (the same bits as in this
process)."""

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
from distprice.families import Workers, montecarlo as family
from distprice.montecarlo import datasets, read_inputs, validate, with_options

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
    with get_task_stream(local) as stream:
        with Pricer(local, chunks_per_worker=3) as pricer:
            alone = pricer.price_mc(SMALL, paths=300_000, engine="cpu")  # 3e5 PDU: 2 ms of work, one range
        with Pricer(local, chunks_per_worker=3, task_seconds=0) as pricer:  # every range pays
            spread = pricer.price_mc(SMALL, paths=300_000, engine="cpu")
            far = pricer.price_mc(MEDIUM, paths=70_000, engine="cpu")
    assert alone.loc[0, "chunks"] == 1 and spread.loc[0, "chunks"] == 6 and set(spread["engine"]) == {"cpu"}
    assert spread.loc[0, "price"] == here.loc[0, "price"] == alone.loc[0, "price"]  # bit for bit
    assert far.loc[0, "price"] == pytest.approx(medium.loc[0, "price"], rel=1e-12)
    names = {task["key"].split("-")[0] for task in stream.data}
    assert "mc_paths_cpu_fp64" in names
    assert np.isfinite(spread["stderr_batches"]).all()


@pytest.fixture(scope="module")
def large():
    """The benchmark's large set (367 dates, 3 underlyings, one model), validated once."""
    return validate(read_inputs(datasets.large()))[0]


def gpus(n: int, per_gpu: int = 2, task_seconds: float | None = None) -> Workers:
    """``n`` GPUs with ``per_gpu`` worker processes each, 2 chunks a worker (a local-cuda cluster)."""
    addresses = tuple(tuple(f"tcp://gpu{g}:{p}" for p in range(per_gpu)) for g in range(n))
    return Workers(n * per_gpu, 2, True, "{}", per_gpu, task_seconds, gpus=addresses)


def cpus(n: int, chunks: int = 4, task_seconds: float | None = None) -> Workers:
    """``n`` CPU workers, ``chunks`` chunks a worker (a local cluster)."""
    return Workers(n, chunks, False, "{}", 1, task_seconds)


def ranges(job, workers: Workers, engine: str = "auto") -> list[tuple[int, int]]:
    """(first, count) of each range ``split`` cuts ``job``'s paths into for ``workers``."""
    return [chunk.args[1:3] for chunk in family.split(family.PathJobs([job], engine), workers).chunks]


def test_a_small_job_gets_the_ranges_its_work_pays_for(large):
    small = with_options(large, paths=2**21)  # 2.3e9 PDU: 64 ms on one GPU, two ranges' worth
    assert ranges(small, gpus(1)) == [(0, 2**21)]
    for workers in (gpus(2), gpus(4), gpus(8, per_gpu=4)):
        assert ranges(small, workers) == [(0, 2**20), (2**20, 2**20)]
    assert ranges(with_options(large, paths=2**20), gpus(16, per_gpu=1)) == [(0, 2**20)]
    tiny = validate(read_inputs(MEDIUM))[0]
    assert ranges(with_options(tiny, paths=2**14), cpus(64)) == [(0, 2**14)]


def test_a_big_job_gets_every_range(large):
    big = with_options(large, paths=2**25)  # 3.7e10 PDU: a second on one GPU
    for n in (1, 2, 4):
        assert len(ranges(big, gpus(n, per_gpu=1))) == n * 2
        assert len(ranges(big, cpus(n))) == n * 4
        assert len(ranges(big, cpus(n), engine="reference")) == n * 4
    # worker processes that share a GPU price in turns: one range a GPU
    assert len(ranges(big, gpus(1))) == 1
    assert len(ranges(big, gpus(2))) == 2 and len(ranges(big, gpus(4, per_gpu=4))) == 4


def test_ranges_on_shared_gpus_go_one_to_each_gpu_round_the_jobs(large):
    jobs = [with_options(large, paths=2**21), with_options(large, paths=2**16), with_options(large, paths=2**21)]
    work = family.split(family.PathJobs(jobs, "auto"), gpus(3, per_gpu=4))
    on = gpus(3, per_gpu=4).gpus
    # the first job's two ranges, the small job's one (anywhere), the last job's two on the next GPUs
    assert [chunk.workers for chunk in work.chunks] == [on[0], on[1], (), on[2], on[0]]
    assert [chunk.args[1:3] for chunk in work.chunks][2:4] == [(0, 2**16), (0, 2**20)]
    # one worker per GPU, or workers whose GPUs are not known: the scheduler places every range
    for workers in (gpus(3, per_gpu=1), Workers(12, 2, True, "{}", 4)):
        assert {chunk.workers for chunk in family.split(family.PathJobs(jobs, "auto"), workers).chunks} == {()}


def test_the_clusters_least_work_a_task_replaces_the_familys(large):
    small = with_options(large, paths=2**21)
    assert len(ranges(small, gpus(2, task_seconds=0))) == 8  # every range pays: chunks_per_worker per worker
    assert len(ranges(small, cpus(3, task_seconds=0))) == 12
    assert len(ranges(small, gpus(3, per_gpu=1, task_seconds=0.02))) == 3  # 64 ms of work
    assert len(ranges(small, gpus(4, per_gpu=1, task_seconds=0.03))) == 2
    assert len(ranges(small, gpus(2, per_gpu=1, task_seconds=1.0))) == 1


def test_ranges_pay_for_themselves_start_at_path_blocks_and_split_evenly(large):
    for paths in (2**16, 3 * 10**6, 2**23, 10**7 + 1):
        job = with_options(large, paths=paths)
        work = paths * job.dims / family.PDU_PER_SECOND["gpu"]
        for workers in (gpus(1, per_gpu=1), gpus(3, per_gpu=1), gpus(8, per_gpu=1)):
            cut = ranges(job, workers)
            assert [first for first, _ in cut] == list(np.cumsum([0] + [count for _, count in cut[:-1]]))
            assert sum(count for _, count in cut) == paths
            assert all(first % family.PATH_BLOCK == 0 for first, _ in cut)
            assert len(cut) == 1 or work / len(cut) >= family.MIN_RANGE_SECONDS
            assert len(cut) <= workers.count * workers.chunks_per_worker
            assert len(cut) < workers.count or len(cut) % workers.count == 0


def test_prices_are_the_same_bits_whatever_the_ranges():
    paths = 60 * family.PATH_BLOCK
    job = with_options(validate(read_inputs(MEDIUM))[0], paths=paths)
    here = distprice.price_mc(MEDIUM, paths=paths, engine="cpu")
    prices, counts = set(), set()
    for workers in (cpus(1, 1, 0), cpus(2, 4, 0), cpus(3, 2, 0), cpus(5, 3, 0)):  # every range pays
        work = family.split(family.PathJobs([job], "cpu"), workers)
        table = work.combine(iter([chunk.run(*chunk.args) for chunk in work.chunks]))
        prices.add(table.loc[0, "price"])
        counts.add(int(table.loc[0, "chunks"]))
    assert prices == {here.loc[0, "price"]}  # bit for bit
    assert counts == {1, 8, 6, 15}


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
