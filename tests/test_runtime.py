"""Pricing on Dask clusters (CPU): a LocalCluster of 2 worker processes, a scheduler and 2 workers started
as separate processes on loopback, a worker killed mid-job, scenarios, the dashboard's task names and the
Prometheus metrics. Every result is compared with the in-process prices of the same rows."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from distributed import get_task_stream

import distprice
from distprice.cli import main
from distprice.cluster.pricer import Pricer
from distprice.errors import SchedulerUnreachableError
from distprice.families import lattice
from distprice.families.work import Workers
from distprice.job import JobOptions
from distprice.lattice import datasets
from distprice.tables import write_table

from utils import assert_same_prices, free_port

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_local_cluster_prices_like_this_process(local, book, in_process):
    with Pricer(local, task_seconds=0) as pricer:
        with get_task_stream(client=local) as stream:
            priced = pricer.price(book, engine="cpu")
    assert_same_prices(priced, in_process)
    assert (priced["engine"] == "cpu").all()
    chunks = [task for task in stream.data if task["key"].startswith("price_cpu_fp64")]
    assert len(chunks) == 4  # 4 chunks per worker would be 8, but no chunk is under MIN_CHUNK_ROWS
    assert len({task["worker"] for task in chunks}) == 2


def test_a_small_job_takes_one_task(local, book, in_process):
    # the book is predicted well under TASK_SECONDS of pricing: one worker prices it, the other is not disturbed
    with Pricer(local) as pricer:
        with get_task_stream(client=local) as stream:
            priced = pricer.price(book.head(2500), engine="cpu")
    assert_same_prices(priced, in_process.head(2500))
    assert len([task for task in stream.data if task["key"].startswith("price_cpu_fp64")]) == 1


def test_auto_on_the_cluster_follows_the_workers_plan(local, book, in_process):
    with Pricer(local) as pricer:
        priced = pricer.price(book.head(3000), engine="auto")
    assert_same_prices(priced, in_process.head(3000))
    assert (priced["engine"] == "cpu").all()  # the workers have no GPU


def test_shift_grid_forms_and_zero_shift_is_the_base(local, book, in_process):
    rows = book.head(6000)
    shifts = [-50, 0, 50]
    with Pricer(local, task_seconds=0) as pricer:  # several chunks, each priced under every shift
        long, wide, full = (
            pricer.price(rows, engine="cpu", shifts_bp=shifts, scenario_table=form) for form in ("long", "wide", "full")
        )
    # long (the default): each row's scenarios together, in input order; the inputs are not repeated
    assert list(long.columns) == ["id", "scenario", "price", "value", "bond_price", "option_price", "error"]
    assert long["id"].tolist() == np.repeat(rows["id"].to_numpy(), 3).tolist()
    assert long["scenario"].tolist() == ["-50bp", "+0bp", "+50bp"] * 6000
    here = distprice.price(rows, engine="cpu", shifts_bp="-50,0,50")
    pd.testing.assert_frame_equal(long, here, check_categorical=False, rtol=1e-13)
    base = long[long["scenario"] == "+0bp"].reset_index(drop=True)
    np.testing.assert_allclose(base["price"], in_process.head(6000)["price"], rtol=1e-13)
    # full: every column, every row under one scenario, then the next
    assert list(full.columns[:2]) == ["scenario", "id"]
    assert full["scenario"].tolist() == ["-50bp"] * 6000 + ["+0bp"] * 6000 + ["+50bp"] * 6000
    by = {name: frame.reset_index(drop=True) for name, frame in full.groupby("scenario", sort=False)}
    assert_same_prices(by["+0bp"].drop(columns="scenario"), in_process.head(6000))
    # wide: one row per row, a column per scenario
    assert len(wide) == 6000 and list(wide.columns[: len(rows.columns)]) == list(rows.columns)
    for name in ("-50bp", "+0bp", "+50bp"):
        np.testing.assert_array_equal(wide[f"price[{name}]"], by[name]["price"])
        np.testing.assert_array_equal(wide[f"value[{name}]"], by[name]["value"])
    np.testing.assert_array_equal(wide["engine"], by["+0bp"]["engine"])
    # rates up, zero-coupon bond values down, on every row
    assert (by["+50bp"]["bond_price"] < by["-50bp"]["bond_price"]).all()


def test_scenario_table_prices_each_scenario(local):
    rows = pd.DataFrame(
        [
            dict(
                id="p1",
                instrument="bond_option",
                option_type="put",
                strike=63.0,
                expiry=3.0,
                maturity=9.0,
                mean_reversion=0.1,
                volatility=0.01,
                curve="hull",
            )
        ]
    )

    def flat(rate):
        return pd.DataFrame({"curve": "hull", "t": [0.0, 30.0], "zero_rate": [rate, rate]})

    scenarios = pd.concat([flat(0.05).assign(scenario="flat5"), flat(0.07).assign(scenario="flat7")])
    with Pricer(local) as pricer:
        priced = pricer.price(rows, scenarios=scenarios, engine="cpu")
        alone = pricer.price(rows, scenarios=scenarios, engine="cpu", base_scenario=False)
    assert priced["scenario"].tolist() == ["base", "flat5", "flat7"]  # the base market first, unless left out
    assert alone["scenario"].tolist() == ["flat5", "flat7"]
    np.testing.assert_allclose(
        priced["price"].iloc[0], distprice.price(rows, engine="cpu")["price"].iloc[0], rtol=1e-14
    )
    with pytest.raises(distprice.InvalidInputError, match="'base' is the base market's"):
        distprice.price(rows, scenarios=flat(0.05).assign(scenario="base"))
    for name, rate in (("flat5", 0.05), ("flat7", 0.07)):
        curve = pd.DataFrame({"curve": "hull", "t": [0.0, 30.0], "zero_rate": [rate, rate]})
        alone = distprice.price(rows, curve, engine="reference")
        np.testing.assert_allclose(priced.loc[priced["scenario"] == name, "price"], alone["price"], rtol=1e-12)


def test_bad_input_fails_before_any_task_is_sent(local, book):
    bad = book.head(100).copy()
    bad.loc[7, "strike"] = -1.0
    with Pricer(local) as pricer:
        local.run_on_scheduler(_forget_tasks)
        with pytest.raises(distprice.InvalidInputError, match=r"row 8 .*strike"):
            pricer.price(bad)
        assert local.run_on_scheduler(_tasks_seen) == 0
        reported = pricer.price(bad, on_invalid="report", engine="cpu")
    assert len(reported) == 100 and reported["price"].isna().sum() == 1 and "strike" in reported.loc[7, "error"]


def _forget_tasks(dask_scheduler=None):
    dask_scheduler.distprice_seen = len(dask_scheduler.task_prefixes)


def _tasks_seen(dask_scheduler=None):
    return len(dask_scheduler.task_prefixes) - dask_scheduler.distprice_seen


def test_submit_returns_a_future_of_the_table(local, book, in_process):
    assert distprice.Pricer is Pricer
    with distprice.Pricer(local) as pricer:
        futures = [pricer.submit(book.head(n), engine="cpu") for n in (500, 700)]
        results = [f.result(timeout=120) for f in futures]
    assert_same_prices(results[0], in_process.head(500))
    assert_same_prices(results[1], in_process.head(700))


def test_metrics_endpoint_counts_what_each_worker_priced(local, book):
    with Pricer(local) as pricer:
        before = _metric_total(pricer.dashboard_link, "distprice_instruments_priced_total")
        pricer.price(book.head(3000), engine="cpu", shifts_bp=[0, 25])
        deadline = time.time() + 10
        while time.time() < deadline:
            text = _fetch_metrics(pricer.dashboard_link)
            if _metric_total(pricer.dashboard_link, "distprice_instruments_priced_total") - before == 6000:
                break
            time.sleep(0.2)
    assert _metric_total(pricer.dashboard_link, "distprice_instruments_priced_total") - before == 6000
    assert 'distprice_node_steps_per_second{worker="tcp://127.0.0.1:' in text
    kernel = _metric_total(pricer.dashboard_link, "distprice_kernel_seconds_total")
    assert 0 < kernel <= _metric_total(pricer.dashboard_link, "distprice_pricing_seconds_total")
    assert "dask_scheduler_workers" in text  # beside Dask's own


def _fetch_metrics(dashboard_link) -> str:
    """The Prometheus page beside the dashboard, over HTTP."""
    from urllib.request import urlopen

    with urlopen(dashboard_link.replace("/status", "/metrics"), timeout=10) as response:
        return response.read().decode()


def _metric_total(dashboard_link, name):
    import re

    text = _fetch_metrics(dashboard_link)
    return sum(float(v) for v in re.findall(rf"^{name}{{[^}}]*}} (\S+)$", text, flags=re.M))


def test_big_parquet_is_read_by_the_workers(local, book, in_process, tmp_path):
    path = tmp_path / "book.parquet"
    book.to_parquet(path, row_group_size=1500)
    with Pricer(local, read_on_workers_rows=1000) as pricer:
        with get_task_stream(client=local) as stream:
            priced = pricer.price(str(path), engine="cpu")
        # one Parquet file: each worker writes its slices' parts beside it, the client joins them undecoded
        summary = pricer.run(str(path), engine="cpu", output=tmp_path / "priced.parquet")
        # a folder output: each worker writes the priced table of its slices, one part each
        folder = pricer.run(str(path), engine="cpu", output=f"{tmp_path / 'priced'}/")
        # a table the client holds: the client writes the parts
        pricer.run(book, engine="cpu", output=f"{tmp_path / 'held'}/")
    assert_same_prices(priced, in_process)
    assert {"read-chunk", "inspect-chunk", "price_cpu_fp64"} <= {t["key"].rsplit("-", 2)[0] for t in stream.data}
    assert summary.priced == summary.rows == len(book)
    assert_same_prices(pd.read_parquet(tmp_path / "priced.parquet"), in_process)
    parts = sorted(p.name for p in (tmp_path / "priced").iterdir())
    assert parts == [f"part-{i:06d}.parquet" for i in range(len(parts))] and len(parts) > 1
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "priced"), pd.read_parquet(tmp_path / "priced.parquet"))
    assert (folder.rows, folder.priced, folder.engines, folder.values) == (
        summary.rows,
        summary.priced,
        summary.engines,
        pytest.approx(summary.values, rel=1e-12),
    )
    assert folder.node_steps == pytest.approx(summary.node_steps, rel=1e-12)
    assert_same_prices(pd.read_parquet(tmp_path / "held"), in_process)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book.parquet", "held", "priced", "priced.parquet"]
    joined = pq.ParquetFile(tmp_path / "priced.parquet").metadata.num_row_groups
    assert joined == sum(pq.ParquetFile(tmp_path / "priced" / p).metadata.num_row_groups for p in parts)


def test_a_big_file_is_checked_before_it_is_priced(book, tmp_path):
    """A worker's tasks of a big file: each slice's checks before any read, each read before any pricing, so
    that the whole file's checks reach the client while the slices are priced (the parts then joined meanwhile)."""
    path = tmp_path / "book.parquet"
    book.to_parquet(path, row_group_size=500)
    read = lattice.read(str(path), JobOptions.of().checked(), folder=str(tmp_path), read_on_workers_rows=1000)
    first = next(lattice.split(read, Workers(2, 3, False, "{}", 1, None)))
    by_kind = {}
    for chunk in (*first.chunks, *first.kept):
        by_kind.setdefault(chunk.name.split("-")[0].split("_")[0], []).append(chunk.priority)
    assert set(by_kind) == {"inspect", "read", "price"} and len(by_kind["read"]) == len(by_kind["inspect"]) > 1
    assert min(by_kind["inspect"]) > max(by_kind["read"]) and min(by_kind["read"]) > max(by_kind["price"])
    assert all(sorted(p, reverse=True) == p for p in by_kind.values())  # each in file order


def test_a_big_file_on_shared_gpus_goes_round_the_gpus_in_slices_one_gpu_would_take(book, tmp_path):
    """On 4 GPUs of 8 worker processes each, a file's slices go round the GPUs; under scenarios the file is cut as
    one GPU's workers would take it (8 x 2 slices), not into 2 slices a worker, whose launches would be smaller."""
    big = pd.concat([book] * 16, ignore_index=True)  # 128 000 rows: 64 slices of 2 000
    big["id"] = np.arange(len(big))
    path = tmp_path / "book.parquet"
    big.to_parquet(path, row_group_size=8000)
    gpus = tuple(tuple(f"tcp://gpu{g}:{p}" for p in range(8)) for g in range(4))
    workers = Workers(32, 2, True, "{}", 8, None, gpus=gpus)
    for shifts, slices in ((None, 32 * 2), ([-10, 0, 10], 8 * 2)):
        options = JobOptions.of(shifts_bp=shifts).checked()
        read = lattice.read(str(path), options, folder=str(tmp_path), read_on_workers_rows=1000)
        first = next(lattice.split(read, workers))
        reads = [chunk.args[0] for chunk in first.chunks]
        assert len(reads) == slices and all(r.name.startswith("read-chunk") for r in reads)
        assert [r.workers for r in reads] == [gpus[i % 4] for i in range(slices)]
        assert sum(r.args[0].rows for r in reads) == len(big)
    one = Workers(8, 2, True, "{}", 8, None, gpus=gpus[:1])  # one GPU: any of its workers
    first = next(lattice.split(lattice.read(str(path), options, read_on_workers_rows=1000), one))
    assert {chunk.args[0].workers for chunk in first.chunks} == {()} and len(first.chunks) == 16


def test_a_small_job_goes_to_the_same_workers_every_time(local, book):
    """A job of fewer chunks than workers sends chunk i to the i-th worker of ``Workers.order`` (a GPU, or a host,
    at a time), every time: a worker that ran it has its code loaded; a job that fills the workers, to any."""
    from distprice.tuning import shipped_default

    model = shipped_default("NVIDIA H200", "fp64").to_json()
    gpus = tuple(tuple(f"tcp://gpu{g}:{p}" for p in range(8)) for g in range(4))
    order = tuple(gpus[g][p] for p in range(8) for g in range(4))
    read = lattice.read(datasets.generate("R1", 30_000, seed=1), JobOptions.of().checked())
    whole = lattice.split(read, Workers(32, 2, True, model, 8, None, gpus=gpus, order=order))
    assert [chunk.workers for chunk in whole.chunks] == [("tcp://gpu0:0",)]
    cut = lattice.split(read, Workers(32, 2, True, model, 8, 1e-3, gpus=gpus, order=order)).chunks
    assert 4 < len(cut) < 32 and [c.workers for c in cut] == [(gpus[i % 4][i // 4],) for i in range(len(cut))]
    filled = Workers(4, 2, True, model, 8, 1e-3, gpus=gpus, order=order)
    assert {c.workers for c in lattice.split(read, filled).chunks} == {()}
    with Pricer(local) as pricer:  # two CPU workers of one host: a one-task job to the first, each time
        with get_task_stream(client=local) as stream:
            for _ in range(4):
                pricer.price(book.head(500), engine="cpu")
    first = min(local.scheduler_info()["workers"])
    assert [t["worker"] for t in stream.data if t["key"].startswith("price_cpu_fp64")] == [first] * 4


def test_a_big_file_to_one_file_where_the_workers_cannot_write(local, book, in_process, tmp_path, monkeypatch, caplog):
    from distprice.cluster.tasks import can_write

    assert can_write(str(tmp_path)) and not can_write(str(tmp_path / "missing"))
    path = tmp_path / "book.parquet"
    book.to_parquet(path, row_group_size=1500)
    monkeypatch.setattr(Pricer, "_workers_write", lambda self, folder: False)  # a read-only mount, say
    with caplog.at_level("INFO", logger="distprice.cluster.pricer"), Pricer(local, read_on_workers_rows=1000) as p:
        summary = p.run(str(path), engine="cpu", output=tmp_path / "priced.parquet")
    assert "the workers cannot write beside the output" in caplog.text and summary.priced == len(book)
    assert_same_prices(pd.read_parquet(tmp_path / "priced.parquet"), in_process)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book.parquet", "priced.parquet"]


@pytest.mark.parametrize("form, first, parts", [("long", ["id", "scenario"], 2), ("full", ["scenario", "id"], 6)])
def test_big_parquet_priced_table_is_the_whole_table_under_scenarios(local, book, tmp_path, form, first, parts):
    # the full table: workers send back the priced columns only; the client puts the slice's own columns back
    # in (and makes invalid the rows whose id another slice holds too)
    rows = book.head(4000).assign(extra=[f"x{i}" if i % 3 else None for i in range(4000)])
    rows.loc[3100, "id"] = rows.loc[20, "id"]
    rows.loc[3200, "volatility"] = -1.0
    path = tmp_path / "book.parquet"
    rows.to_parquet(path, row_group_size=1500)
    options = dict(engine="cpu", shifts_bp=[-50, 0, 50], on_invalid="report", scenario_table=form)
    with Pricer(local, read_on_workers_rows=10_000) as pricer:  # 4 000 rows, but 12 000 prices
        with get_task_stream(client=local) as stream:
            pricer.run(str(path), output=tmp_path / "priced.parquet", **options)
        summary = pricer.run(str(path), output=f"{tmp_path / 'parts'}/", **options)
    assert "read-chunk" in {t["key"].rsplit("-", 2)[0] for t in stream.data}  # the workers read the book
    write_table(distprice.price(str(path), **options), tmp_path / "here.parquet")
    got, expected = pd.read_parquet(tmp_path / "priced.parquet"), pd.read_parquet(tmp_path / "here.parquet")
    assert len(got) == 3 * len(rows) and list(got.columns[:2]) == first
    assert got["price"].isna().sum() == 3 * 3 and got["error"].str.contains("must be unique").sum() == 3 * 2
    pd.testing.assert_frame_equal(
        got.drop(columns="engine", errors="ignore"), expected.drop(columns="engine", errors="ignore"), rtol=1e-13
    )
    # the workers' parts, one per slice (and scenario, in the full table), read back in order: the same table
    # (two slices of 2 000 rows, each across row groups of 1 500)
    assert len(list((tmp_path / "parts").iterdir())) == parts
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "parts"), got)
    assert (summary.rows, summary.priced, summary.scenarios, summary.prices) == (4000, 3997, 3, 3 * 3997)


def test_big_parquet_problems_name_rows_of_the_whole_file(local, book, tmp_path):
    bad = book.copy()
    bad.loc[5000, "volatility"] = 0.0
    bad.loc[6500, "id"] = bad.loc[10, "id"]  # a duplicate in another slice
    path = tmp_path / "bad.parquet"
    bad.to_parquet(path, row_group_size=1500)
    parts = tmp_path / "parts"  # the same rows as a folder of three parts: rows numbered across them
    parts.mkdir()
    for k, start in enumerate((0, 3000, 6000)):
        bad.iloc[start : start + 3000].to_parquet(parts / f"part-{k:06d}.parquet", row_group_size=1500)
    with Pricer(local, read_on_workers_rows=1000) as pricer:
        with pytest.raises(distprice.InvalidInputError) as error:
            pricer.run(str(path), output=tmp_path / "out.parquet")
        with pytest.raises(distprice.InvalidInputError):
            pricer.run(str(path), output=f"{tmp_path / 'out'}/")
        with pytest.raises(distprice.InvalidInputError) as from_parts:
            pricer.run(str(parts), output=f"{tmp_path / 'out'}/")
        reported = pricer.price(str(path), engine="cpu", on_invalid="report")
        with get_task_stream(client=local) as stream:
            reported_parts = pricer.price(str(parts), engine="cpu", on_invalid="report")
    message = str(error.value)
    assert "row 5001" in message and "volatility" in message
    assert "row 11 " in message and "row 6501 " in message and "must be unique" in message
    assert str(from_parts.value) == message.replace(str(path), str(parts))
    assert "read-chunk" in {t["key"].rsplit("-", 2)[0] for t in stream.data}  # the workers read the parts
    pd.testing.assert_frame_equal(reported_parts, reported)
    assert not (tmp_path / "out.parquet").exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.parquet",
        "parts",
    ]
    assert reported["price"].isna().sum() == 3 and len(reported) == len(book)
    here = distprice.price(bad, engine="cpu", on_invalid="report")

    def echoed(frame):  # labels read from a file are categories, missing as NaN; the frame's own hold None
        frame = frame.reset_index(drop=True).drop(columns="engine")
        labels = frame["option_type"].astype(object)
        return frame.assign(option_type=labels.where(labels.notna(), None))

    pd.testing.assert_frame_equal(
        echoed(reported), echoed(here), rtol=1e-13, check_dtype=False, check_categorical=False
    )


def test_a_big_dated_parquet_takes_its_exercise_schedule_by_slice(local, tmp_path):
    # each slice a worker reads takes the schedule rows of its own ids; a row no slice takes is the job's error
    from distprice.lattice.desk import desk

    book = desk(3000, seed=4)
    path, curves, schedule = tmp_path / "desk.parquet", tmp_path / "curves.parquet", tmp_path / "exercise.parquet"
    book.portfolio.to_parquet(path, row_group_size=500)
    book.curves.to_parquet(curves)
    book.exercise_schedule.to_parquet(schedule)
    stray = pd.concat([book.exercise_schedule, book.exercise_schedule.tail(1).assign(id="nobody")], ignore_index=True)
    stray.to_parquet(tmp_path / "stray.parquet")
    bad = book.exercise_schedule.copy()
    bad.loc[len(bad) - 2, "date"] = "2031-02-30"
    bad.to_parquet(tmp_path / "bad.parquet")
    options = dict(curves=str(curves), engine="cpu")
    with Pricer(local, read_on_workers_rows=1000) as pricer:
        with get_task_stream(client=local) as stream:
            priced = pricer.price(str(path), exercise_schedule=str(schedule), **options)
        with pytest.raises(distprice.InvalidInputError) as unmatched:
            pricer.run(
                str(path), exercise_schedule=str(tmp_path / "stray.parquet"), output=f"{tmp_path / 'a'}/", **options
            )
        with pytest.raises(distprice.InvalidInputError) as wrong:
            pricer.run(
                str(path), exercise_schedule=str(tmp_path / "bad.parquet"), output=f"{tmp_path / 'b'}/", **options
            )
    assert "read-chunk" in {t["key"].rsplit("-", 2)[0] for t in stream.data}
    here = distprice.price(book.portfolio, book.curves, engine="cpu", exercise_schedule=book.exercise_schedule)
    assert_same_prices(priced, here)
    np.testing.assert_allclose(priced["clean_price"], here["clean_price"], rtol=1e-13)
    assert priced["error"].isna().all() and book.exercise_schedule["id"].nunique() > 300
    assert str(unmatched.value).count("names no row of the portfolio") == 1
    assert f"exercise schedule row {len(stray)} (id 'nobody')" in str(unmatched.value)
    assert f"exercise schedule row {len(bad) - 1} (id {bad['id'].iloc[-2]!r}), column 'date'" in str(wrong.value)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_folder_that_is_not_a_parquet_table_is_a_clear_error(local, book, tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    book.head(2000).to_parquet(parts / "part-000000.parquet")
    (parts / "notes.txt").write_text("not a part")
    with Pricer(local, read_on_workers_rows=1000) as pricer:
        with pytest.raises(distprice.InvalidInputError, match="cannot be read as folder.*notes.txt"):
            pricer.run(str(parts), engine="cpu", output=tmp_path / "out.parquet")
    assert not (tmp_path / "out.parquet").exists()


# ---- a scheduler and workers started as processes, as on a real cluster ----


def test_scheduler_and_worker_processes_price_like_this_process(processes, book, in_process):
    address, _ = processes
    with Pricer(address) as pricer:
        pricer.client.wait_for_workers(2, timeout=60)
        priced = pricer.price(book.head(4000), engine="cpu")
    assert_same_prices(priced, in_process.head(4000))


def kill_a_busy_worker(pricer, job, after: float) -> None:
    """SIGKILLs a worker that is running a task of ``job``, ``after`` seconds into its first tasks."""
    pids = pricer.client.run(os.getpid)
    deadline = time.time() + 60
    while not any(pricer.client.processing().values()) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(after)
    busy = [worker for worker, keys in pricer.client.processing().items() if keys]
    assert busy and not job.done()
    os.kill(pids[busy[0]], signal.SIGKILL)


def test_a_worker_killed_mid_job_loses_no_row(processes):
    address, _ = processes
    book = datasets.generate("R1", 30_000, seed=3)
    expected = distprice.price(book, engine="cpu")
    with Pricer(address) as pricer:
        pricer.client.wait_for_workers(2, timeout=60)
        job = pricer.submit(book, engine="cpu")
        kill_a_busy_worker(pricer, job, 0.3)
        priced = job.result(timeout=300)
        assert len(pricer.client.scheduler_info()["workers"]) == 1
    assert_same_prices(priced, expected)


@pytest.mark.parametrize("big", [False, True])
def test_a_worker_killed_mid_job_gives_each_row_and_scenario_once_in_the_file(processes, tmp_path, big):
    # the long table streamed by the client, or (big) the parts the workers write, joined by the client
    address, _ = processes
    book = datasets.generate("R1", 12_000, seed=3)
    path = tmp_path / "book.parquet"
    book.to_parquet(path, row_group_size=1000)
    options = dict(engine="cpu", shifts_bp=[-10, 0, 10])
    with Pricer(address, read_on_workers_rows=1000 if big else None, task_seconds=0) as pricer:
        pricer.client.wait_for_workers(2, timeout=60)
        job = pricer._submitted.submit(pricer.run, str(path), output=tmp_path / "priced.parquet", **options)
        kill_a_busy_worker(pricer, job, 0.5)
        summary = job.result(timeout=300)
    priced = pd.read_parquet(tmp_path / "priced.parquet")
    assert priced["id"].tolist() == np.repeat(book["id"].to_numpy(), 3).tolist()
    assert priced["scenario"].astype(str).tolist() == ["-10bp", "+0bp", "+10bp"] * len(book)
    expected = distprice.price(book, **options)
    np.testing.assert_allclose(priced["price"], expected["price"], rtol=1e-13)
    assert summary.prices == 3 * len(book) and sorted(p.name for p in tmp_path.iterdir()) == [
        "book.parquet",
        "priced.parquet",
    ]


def test_unreachable_scheduler_exits_3_within_the_timeout(tmp_path, book):
    config = tmp_path / "cluster.yaml"
    config.write_text(f"cluster:\n  kind: address\n  address: tcp://127.0.0.1:{free_port()}\n  timeout: 2\n")
    book.head(10).to_csv(tmp_path / "b.csv", index=False)
    tick = time.perf_counter()
    result = CliRunner().invoke(
        main,
        ["run", "--cluster", str(config), "--portfolio", str(tmp_path / "b.csv"), "--output", str(tmp_path / "o.csv")],
    )
    assert result.exit_code == 3, result.output
    assert "cannot reach the scheduler" in result.output and time.perf_counter() - tick < 20
    assert not (tmp_path / "o.csv").exists()
    with pytest.raises(SchedulerUnreachableError):
        Pricer(f"tcp://127.0.0.1:{free_port()}").close()


def test_cli_run_on_a_local_cluster_config(tmp_path, book, in_process):
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "cluster:\n  kind: local\n  n_workers: 2\n  dashboard_address: 127.0.0.1:0\n"
        "job:\n  engine: cpu\n  output: priced.csv\n"
    )
    book.head(1000).to_csv(tmp_path / "b.csv", index=False)
    result = CliRunner().invoke(
        main, ["run", "--cluster", str(config), "--portfolio", str(tmp_path / "b.csv"), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert "dashboard: http://127.0.0.1:" in result.output
    assert "priced 1000 of 1000 rows" in result.output and "on 2 workers" in result.output
    assert_same_prices(pd.read_csv(tmp_path / "priced.csv"), in_process.head(1000))


class _Done:
    """A future that is done, or not yet (``ready``), holding ``value``."""

    def __init__(self, value, ready=True):
        self.value, self.ready = value, ready

    def done(self):
        return self.ready


class _Fetching:
    """A watch whose waits make a future done and whose gathers are counted, each a message."""

    def __init__(self):
        self.messages = []

    def wait(self, futures):
        for f in futures:
            f.ready = True

    def gather(self, futures):
        self.messages.append([f.value for f in futures])
        return [f.value for f in futures]

    def cancel(self):
        pass


def test_light_results_already_done_come_in_one_message_in_order():
    futures = [_Done(i, ready=i not in (0, 5)) for i in range(8)]
    watch = _Fetching()
    results = list(Pricer._ordered(futures, watch, lambda i, r: (i, r * 10), run=4))
    assert results == [(i, i * 10) for i in range(8)]
    # the first waits for future 0, then takes 1-3 with it (a run of 4); 4 alone (5 not done); 5 waited for, 6, 7
    assert watch.messages == [[0, 1, 2, 3], [4], [5, 6, 7]]
    assert futures == [None] * 8  # each released once handed on


def test_results_of_a_stage_not_light_come_one_message_each():
    futures = [_Done(i) for i in range(3)]
    watch = _Fetching()
    assert list(Pricer._ordered(futures, watch)) == [0, 1, 2]
    assert watch.messages == [[0], [1], [2]]


def _after(seconds: float, value: int) -> int:
    time.sleep(seconds)
    return value


def test_a_stage_results_are_fetched_as_they_are_done_and_handed_on_in_order(local, monkeypatch):
    from distprice.cluster.watch import Watch

    watch = Watch(local, no_workers_timeout=30)
    futures = [local.submit(_after, s, i, pure=False) for i, s in enumerate((1.5, 0.0, 3.0))]
    messages = []
    gather = local.gather

    def counted(fs):
        messages.append(len(fs))
        return gather(fs)

    monkeypatch.setattr(local, "gather", counted)
    assert watch.gather(futures) == [0, 1, 2]
    assert len(messages) >= 2 and sum(messages) == 3  # the early ones fetched before the last ended
