"""Operations: Ctrl-C and SIGTERM, no workers, a lost scheduler, job timeouts, exit statuses, logs a
scheduler can read, the progress bar only on a terminal, and TLS on the embedded cluster. Fault tests use a
scheduler and workers started as processes on loopback, and signals sent to a ``distprice run`` process."""

from __future__ import annotations

import io
import os
import platform
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import numba
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import distprice
from distprice.cli import main
from distprice.cluster.config import ClusterConfig, parse_config
from distprice.cluster.pricer import Pricer
from distprice.cluster.start import start
from distprice.cuda import gpu_available
from distprice.errors import ConfigError, JobTimeoutError, NoWorkersError, OptionError
from distprice.lattice import datasets
from distprice.progress import Bar

from utils import HULL_PUT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SLOW_ROWS = 300
"""R1 rows that the reference engine prices in tens of seconds: long enough to be interrupted."""


LONG_TREE = dict(
    instrument="callable_bond",
    exercise="bermudan",
    strike=100.0,
    expiry=100.0,
    first_exercise=5.0,
    exercise_frequency=1,
    maturity=100.0,
    coupon=0.05,
    coupon_frequency=2,
    face=100.0,
    mean_reversion=0.005,
    volatility=0.01,
    steps_per_year=365,
    curve="hull",
)
"""A 100-year callable bond on a tree of 365 steps a year and 26 871 nodes: about a second of a core's work."""
LONG_ROWS_PER_THREAD = 100
"""Rows of such trees per thread of the CPU engine in a book whose pricing takes minutes."""


@pytest.fixture(scope="module")
def slow_book(tmp_path_factory):
    path = tmp_path_factory.mktemp("slow") / "book.csv"
    datasets.generate("R1", SLOW_ROWS, seed=1).to_csv(path, index=False)
    return path


def long_book(rows: int) -> pd.DataFrame:
    return pd.DataFrame([dict(LONG_TREE, id=f"long-{i}") for i in range(rows)])


@pytest.fixture(scope="module")
def long_rows(tmp_path_factory):
    """A book of LONG_TREE rows, LONG_ROWS_PER_THREAD for each thread of the CPU engine, and the seconds a row on
    each thread takes here (the engine compiled first, for the processes the tests start). The book cannot be
    priced in less than about LONG_ROWS_PER_THREAD / 2 times that: each row has a backward pass of its own, about
    half of the rows-on-every-thread's time (which holds their shared forward pass too)."""
    threads = numba.get_num_threads()
    distprice.price(long_book(threads), engine="cpu")
    tick = time.monotonic()
    distprice.price(long_book(threads), engine="cpu")
    seconds = time.monotonic() - tick
    path = tmp_path_factory.mktemp("long") / "book.csv"
    long_book(LONG_ROWS_PER_THREAD * threads).to_csv(path, index=False)
    return path, seconds


class Run:
    """``distprice run`` in a process of its own, its stderr read line by line as it comes."""

    def __init__(self, *args: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "distprice.cli", "run", *args],
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stderr:
            self.stderr.append(line)
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if text in self.lines.get(timeout=0.5):
                    return
            except queue.Empty:
                assert self.process.poll() is None, "".join(self.stderr)
        raise AssertionError(f"{text!r} never came: {''.join(self.stderr)}")

    def ended(self, timeout: float) -> tuple[int, float]:
        """Exit status and the seconds it took to come."""
        tick = time.monotonic()
        try:
            status = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"still running {timeout} s later: {''.join(self.stderr)}") from None
        return status, time.monotonic() - tick


def running(client) -> int:
    """The tasks the workers' threads run, cancelled ones included (the scheduler forgets those at once)."""
    return sum(client.run(lambda dask_worker: len(dask_worker.active_threads)).values())


def left_behind(folder) -> list[str]:
    """Files in ``folder`` but the inputs: outputs, temporary files."""
    return sorted(p.name for p in folder.iterdir() if p.suffix not in (".csv", ".yaml") or p.name.startswith("."))


def kill(workers) -> None:
    """Kills worker processes still busy with a cancelled task (a running task runs to its end)."""
    for worker in workers:
        worker.kill()
        worker.wait(timeout=30)


def address_config(folder, address: str, **cluster) -> str:
    lines = ["cluster:", "  kind: address", f"  address: {address}"] + [f"  {k}: {v}" for k, v in cluster.items()]
    path = folder / "cluster.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# ---- Ctrl-C and SIGTERM ----


STOPPED = {
    signal.SIGINT: (130, "distprice: interrupted; the job was stopped and nothing was written"),
    signal.SIGTERM: (143, "distprice: terminated; the job was stopped and nothing was written"),
    None: (6, "distprice: the job ran past its timeout of"),
}


@pytest.mark.parametrize("sent", list(STOPPED), ids=["ctrl-c", "sigterm", "timeout"])
def test_a_stop_ends_a_job_of_long_rows_in_this_process_long_before_it_could_end(tmp_path, long_rows, sent):
    """Ctrl-C, SIGTERM and --timeout take effect between pieces of a fraction of a second, even where every
    row's tree takes about a second: the job ends within a few rows' time (the book takes at least ~50 times
    a row on each thread), not at the end of a piece of hundreds of rows."""
    book, row_seconds = long_rows
    status, said = STOPPED[sent]
    output = tmp_path / "out" / "priced.parquet"
    output.parent.mkdir()
    timeout = ["--timeout", f"{10 * row_seconds + 5:.1f}"] if sent is None else []
    run = Run("--portfolio", str(book), "--output", str(output), "--engine", "cpu", "--in-process", *timeout)
    run.wait_for("predicted pricing time")
    if sent is None:
        code, seconds = run.ended(timeout=600)
        seconds -= 10 * row_seconds + 5  # past the timeout, counting from before the prediction was logged
    else:
        time.sleep(3 * row_seconds)  # well into the pricing
        run.process.send_signal(sent)
        code, seconds = run.ended(timeout=600)
    stderr = "".join(run.stderr)
    assert code == status and said in stderr and "Traceback" not in stderr, stderr
    assert seconds < 10 * row_seconds < LONG_ROWS_PER_THREAD / 5 * row_seconds
    assert list(output.parent.iterdir()) == []


def test_sigterm_cancels_a_cluster_job_and_its_workers_stop_long_before_a_chunk_could_end(
    tmp_path, long_rows, processes
):
    """The client returns at once and each worker stops its cancelled chunk between two pieces of its pricing:
    a chunk of 80 long rows on a single-threaded worker takes at least ~40 times a row's time."""
    address, _ = processes
    _, row_seconds = long_rows
    book, output = tmp_path / "book.csv", tmp_path / "out" / "priced.csv"
    long_book(640).to_csv(book, index=False)  # 8 chunks on 2 workers
    output.parent.mkdir()
    run = Run("--cluster", address, "--portfolio", str(book), "--output", str(output), "--engine", "cpu")
    run.wait_for("predicted pricing time")
    from distributed import Client

    with Client(address, timeout=10) as watcher:
        deadline = time.monotonic() + 120
        while not any(watcher.processing().values()):
            assert time.monotonic() < deadline and run.process.poll() is None, "".join(run.stderr)
            time.sleep(0.1)
        time.sleep(2 * row_seconds)  # well into the chunks
        run.process.send_signal(signal.SIGTERM)
        tick = time.monotonic()
        code, seconds = run.ended(timeout=120)
        assert code == 143 and "terminated" in "".join(run.stderr) and "Traceback" not in "".join(run.stderr)
        assert seconds < 10 * row_seconds and list(output.parent.iterdir()) == []
        while running(watcher):  # the job's chunks stopped with it, unfinished
            assert time.monotonic() - tick < 10 * row_seconds
            time.sleep(0.1)
    kill(processes[1])


# ---- no workers, a lost scheduler, timeouts ----


def test_a_scheduler_without_workers_ends_with_exit_5(tmp_path, scheduler):
    address, _ = scheduler
    pd.DataFrame([dict(HULL_PUT, id="a")]).to_csv(tmp_path / "b.csv", index=False)
    tick = time.monotonic()
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--cluster",
            address_config(tmp_path, address, no_workers_timeout=2),
            "--portfolio",
            str(tmp_path / "b.csv"),
            "--output",
            str(tmp_path / "o.csv"),
        ],
    )
    assert result.exit_code == 5, result.output
    assert "no worker joined the cluster" in result.output and "cluster.no_workers_timeout" in result.output
    assert time.monotonic() - tick < 30 and left_behind(tmp_path) == []


def busy(pricer: Pricer) -> None:
    """Waits until a worker of ``pricer``'s cluster runs a task."""
    deadline = time.monotonic() + 120
    while not any(pricer.client.processing().values()):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_every_worker_lost_mid_job_ends_the_job_with_no_workers(processes):
    address, workers = processes
    config = parse_config({"cluster": {"kind": "address", "address": address, "no_workers_timeout": 2}})
    with Pricer(config) as pricer:
        pricer.client.wait_for_workers(2, timeout=60)
        job = pricer.submit(datasets.generate("R1", SLOW_ROWS, seed=1), engine="reference")
        busy(pricer)
        kill(workers)
        tick = time.monotonic()
        with pytest.raises(NoWorkersError, match="no worker for 2 s"):
            job.result(timeout=60)
        assert time.monotonic() - tick < 30


def test_a_lost_scheduler_ends_the_job_with_exit_3(tmp_path, slow_book, scheduler, processes):
    address, _ = processes
    output = tmp_path / "o.csv"
    run = Run("--cluster", address, "--portfolio", str(slow_book), "--output", str(output), "--engine", "reference")
    run.wait_for("cluster address:")
    from distributed import Client

    with Client(address, timeout=10) as watcher:
        deadline = time.monotonic() + 120
        while not any(watcher.processing().values()):
            assert time.monotonic() < deadline and run.process.poll() is None, "".join(run.stderr)
            time.sleep(0.1)
    scheduler[1].kill()
    code, _ = run.ended(timeout=90)
    assert code == 3, "".join(run.stderr)
    assert "lost the scheduler" in "".join(run.stderr) and "Traceback" not in "".join(run.stderr)
    assert left_behind(tmp_path) == []
    kill(processes[1])


def test_a_job_past_its_timeout_stops_and_its_tasks_are_cancelled(local, long_rows):
    _, row_seconds = long_rows
    with Pricer(local) as pricer:
        tick = time.monotonic()
        with pytest.raises(JobTimeoutError, match="timeout of 3 s"):
            pricer.price(long_book(640), engine="cpu", timeout=3)  # chunks of 80 rows: ~40 rows' time at least
        stopped = time.monotonic()
        assert stopped - tick < 3 + 10 * row_seconds
        while running(local):  # each worker stopped its chunk between two pieces
            assert time.monotonic() - stopped < 10 * row_seconds
            time.sleep(0.1)


def test_a_job_in_this_process_honours_its_timeout(tmp_path, slow_book):
    tick = time.monotonic()
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--portfolio",
            str(slow_book),
            "--output",
            str(tmp_path / "o.csv"),
            "--engine",
            "reference",
            "--in-process",
            "--timeout",
            "1",
        ],
    )
    assert result.exit_code == 6, result.output
    assert "timeout of 1 s" in result.output and time.monotonic() - tick < 20
    assert not (tmp_path / "o.csv").exists()
    with pytest.raises(JobTimeoutError):
        distprice.price(str(slow_book), engine="reference", timeout=0.5)


# ---- a job's predicted time: logged before it starts, refused past max_seconds ----


@pytest.fixture
def shipped_cpu(monkeypatch):
    """This process predicts with the shipped figures of a 2-core CPU machine, whatever this machine is or has
    measured (a GPU, a tuned model), so that predictions are the same everywhere: the seconds predicted of
    pricing ``book`` with ``engine``."""
    from distprice import execute
    from distprice.job import JobOptions, prepare_job
    from distprice.tuning import shipped_default

    monkeypatch.setattr(execute, "gpu_available", lambda: False)
    monkeypatch.setattr(execute, "current_model", lambda precision, gpu, quiet=False: shipped_default("cpu", precision))

    def predicted(book, engine: str = "cpu") -> float:
        instruments = prepare_job(book, JobOptions(engine=engine).checked()).instruments()
        return execute.choose_plan(instruments, engine, np.float64).seconds

    return predicted


def priced_at_once(monkeypatch) -> list:
    """Pricing in this process made instant (every bond 100, every option 1); the calls it had."""
    calls = []

    def instant(instruments, curve_sets, parts, real, progress=None):
        calls.append(len(instruments))
        shape = (len(curve_sets), len(instruments))
        return np.full(shape, 100.0), np.ones(shape), 0.0

    monkeypatch.setattr("distprice.api.price_parts", instant)
    return calls


def test_a_job_predicted_past_an_hour_is_refused_unless_max_seconds_raises_it(monkeypatch, caplog, shipped_cpu):
    from distprice.errors import JobTooLongError
    from distprice.job import MAX_SECONDS, duration

    book = long_book(6_000)  # 6 000 rows of 100-year daily trees: about 69 minutes on these figures
    seconds = shipped_cpu(book)
    assert MAX_SECONDS == 3600 and 1.1 * MAX_SECONDS < seconds < 1.3 * MAX_SECONDS
    calls = priced_at_once(monkeypatch)
    with caplog.at_level("INFO", logger="distprice"):
        with pytest.raises(JobTooLongError) as refused:
            distprice.price(book, engine="cpu")
        assert calls == []  # refused before anything is priced
        message = str(refused.value)
        assert f"predicted to take {duration(seconds)} of pricing in this process (cpu, default (cpu)" in message
        assert "more than its limit of 3600 s (60 min); nothing was priced" in message
        assert "--max-seconds" in message and "max_seconds=" in message and "job.max_seconds" in message
        assert refused.value.exit_status == 2
        assert f"predicted pricing time {duration(seconds)} in this process" in caplog.text
        priced = distprice.price(book, engine="cpu", max_seconds=1.5 * MAX_SECONDS)
        assert calls == [len(book)] and (priced["price"] == 99.0).all()
        assert "limit 5400 s (90 min)" in caplog.text
        distprice.price(book, engine="cpu", max_seconds=None)
        assert "no limit" in caplog.text
    # scenarios count: a job of 1/3 as many rows under 3 scenarios is as long as the whole book under one
    with pytest.raises(JobTooLongError, match=re.escape(f"predicted to take {duration(seconds)}")):
        distprice.price(book.iloc[:2_000], engine="cpu", shifts_bp=[-10, 0, 10])
    for bad in (0, -1.0, True, "1h", float("inf")):
        with pytest.raises(OptionError, match="max_seconds must be a number of seconds > 0"):
            distprice.price(book, max_seconds=bad)


def test_run_logs_the_predicted_time_and_max_seconds_or_the_config_sets_the_limit(tmp_path, monkeypatch, shipped_cpu):
    from distprice.job import duration

    book = long_book(100)
    book.to_csv(tmp_path / "book.csv", index=False)
    seconds = shipped_cpu(book)
    args = ["run", "--portfolio", str(tmp_path / "book.csv"), "--output", str(tmp_path / "o.csv"), "--engine", "cpu"]
    calls = priced_at_once(monkeypatch)
    limit = f"{seconds / 2:.0f}"
    refused = CliRunner().invoke(main, [*args, "--in-process", "--max-seconds", limit])
    assert refused.exit_code == 2 and calls == [] and not (tmp_path / "o.csv").exists(), refused.output
    assert f"predicted pricing time {duration(seconds)} in this process" in refused.output
    assert (
        f"distprice: the job is predicted to take {duration(seconds)} of pricing in this process "
        f"(cpu, default (cpu) cost model), more than its limit of {duration(float(limit))}; nothing was priced. "
        "Raise the limit (--max-seconds" in refused.output
    )
    assert "Traceback" not in refused.output
    ran = CliRunner().invoke(main, [*args, "--in-process"])
    assert ran.exit_code == 0 and calls == [100], ran.output
    assert f"predicted pricing time {duration(seconds)} in this process (default (cpu) cost model; limit 3600 s" in (
        ran.output
    )
    config = parse_config({"job": {"max_seconds": 7200}})
    assert config.job.max_seconds == 7200.0
    with pytest.raises(ConfigError, match="x.yaml: job.max_seconds: must be a number of seconds > 0, not 0"):
        parse_config({"job": {"max_seconds": 0}}, source="x.yaml")
    bad = CliRunner().invoke(main, [*args, "--in-process", "--max-seconds", "0"])
    assert bad.exit_code == 2 and "--max-seconds" in bad.output


def test_a_cluster_job_past_max_seconds_is_refused_before_a_task_is_sent(tmp_path, local, caplog):
    """On a cluster, the workers' cost model predicts the job shared among the workers that price it; a job
    predicted past its limit is refused before any task is sent, and a big file read by the workers once its
    slices are read and checked, before they are priced."""
    from distprice.errors import JobTooLongError

    book = long_book(40)
    book.to_parquet(tmp_path / "book.parquet")
    with Pricer(local) as pricer, caplog.at_level("INFO", logger="distprice"):
        with pytest.raises(JobTooLongError, match="of pricing on 1 worker .*more than its limit of 0.001 s"):
            pricer.price(book, engine="cpu", max_seconds=0.001)
        assert "predicted pricing time" in caplog.text and "on 1 worker" in caplog.text
        assert not any(local.processing().values()) and running(local) == 0
    with Pricer(local, read_on_workers_rows=10) as pricer:
        with pytest.raises(JobTooLongError, match="more than its limit of 0.001 s"):
            pricer.run(str(tmp_path / "book.parquet"), output=str(tmp_path / "o.parquet"), max_seconds=0.001)
    assert not (tmp_path / "o.parquet").exists()


# ---- exit statuses and options of run ----


@pytest.fixture
def two_rows(tmp_path):
    pd.DataFrame([dict(HULL_PUT, id="a"), dict(HULL_PUT, id="b", strike=-5)]).to_csv(tmp_path / "b.csv", index=False)
    return str(tmp_path / "b.csv")


def test_report_mode_with_invalid_rows_exits_4_and_max_invalid_stops_it(tmp_path, two_rows):
    output = str(tmp_path / "o.csv")
    result = CliRunner().invoke(main, ["run", "--portfolio", two_rows, "--output", output, "--on-invalid", "report"])
    assert result.exit_code == 4 and pd.read_csv(output)["error"].notna().sum() == 1
    os.remove(output)
    result = CliRunner().invoke(
        main, ["run", "--portfolio", two_rows, "--output", output, "--on-invalid", "report", "--max-invalid", "0"]
    )
    assert result.exit_code == 2 and "more than max_invalid (0)" in result.output and not os.path.exists(output)
    result = CliRunner().invoke(
        main, ["run", "--portfolio", two_rows, "--output", output, "--on-invalid", "report", "--max-invalid", "1"]
    )
    assert result.exit_code == 4


def test_an_empty_portfolio_needs_allow_empty(tmp_path):
    pd.DataFrame(columns=list(HULL_PUT) + ["id"]).to_csv(tmp_path / "b.csv", index=False)
    args = ["run", "--portfolio", str(tmp_path / "b.csv"), "--output", str(tmp_path / "o.csv")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "has no rows" in result.output
    result = CliRunner().invoke(main, [*args, "--allow-empty"])
    assert result.exit_code == 0, result.output
    assert len(pd.read_csv(tmp_path / "o.csv")) == 0


def test_usage_errors_name_the_flag_and_exit_2(tmp_path, two_rows):
    base = ["run", "--portfolio", two_rows]
    cases = [
        (
            [*base, "--output", str(tmp_path / "o.csv"), "--shifts-bp", "0,50", "--scenarios", two_rows],
            "give --scenarios or --shifts-bp",
        ),
        ([*base, "--output", str(tmp_path / "o.csv"), "--as-of", "2026-13-01"], "Invalid value for --as-of"),
        ([*base, "--output", str(tmp_path / "o.csv"), "--shifts-bp", "0,0"], "Invalid value for --shifts-bp"),
        ([*base, "--output", str(tmp_path / "missing" / "o.csv")], "does not exist (create it, or pass --create-dirs"),
    ]
    for args, said in cases:
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2 and said in result.output, (args, result.output)
    result = CliRunner().invoke(
        main, [*base, "--output", str(tmp_path / "made" / "o.csv"), "--create-dirs", "--on-invalid", "report"]
    )
    assert result.exit_code == 4 and (tmp_path / "made" / "o.csv").exists()


def test_the_summary_counts_scenarios_prices_and_value(tmp_path, two_rows):
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--portfolio",
            two_rows,
            "--output",
            str(tmp_path / "o.csv"),
            "--on-invalid",
            "report",
            "--shifts-bp",
            "-100,0,100",
        ],
    )
    assert result.exit_code == 4, result.output
    priced = pd.read_csv(tmp_path / "o.csv")
    values = priced.groupby("scenario")["value"].sum()
    assert "priced 1 of 2 rows (1 invalid) under 3 scenarios (3 prices)" in result.output
    assert f"total value {values.min():.10g} to {values.max():.10g} across scenarios" in result.output
    assert " s in all" in result.output


# ---- logs and the progress bar ----


def test_stdout_holds_the_summary_and_stderr_the_logs_with_no_bar_off_a_terminal(tmp_path):
    pd.DataFrame([dict(HULL_PUT, id="a")]).to_csv(tmp_path / "b.csv", index=False)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "distprice.cli",
            "run",
            "--portfolio",
            str(tmp_path / "b.csv"),
            "--output",
            str(tmp_path / "o.csv"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and done.stdout.startswith("priced 1 of 1 rows")
    assert " INFO distprice.api: pricing in this process" in done.stderr
    assert "\r" not in done.stdout + done.stderr and "[#" not in done.stderr


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_bar_draws_on_a_terminal_only():
    screen = Terminal()
    with Bar(4, "pricing", stream=screen) as bar:
        for done in range(1, 5):
            bar.update(done)
    assert screen.getvalue().startswith("\rpricing [") and "100%" in screen.getvalue()
    assert screen.getvalue().endswith("\n")
    quiet = io.StringIO()
    with Bar(4, "pricing", stream=quiet) as bar:
        bar.update(4)
    with Bar(4, "pricing", shown=False, stream=Terminal()) as hidden:
        hidden.update(4)
    assert quiet.getvalue() == "" and hidden.stream.getvalue() == ""


def test_pricing_in_this_process_draws_its_bar_on_a_terminal(monkeypatch):
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    book = datasets.generate("R1", 2000, seed=2)
    priced = distprice.price(book, engine="cpu", progress=True)
    assert priced["error"].isna().all()
    assert screen.getvalue().startswith("\rpricing") and "100%" in screen.getvalue()


# ---- the embedded cluster speaks TLS ----


def test_the_embedded_local_cluster_speaks_tls_only(tmp_path):
    from distributed import Client
    from distributed.security import Security

    client, cluster = start(ClusterConfig(kind="local", n_workers=1, processes=False, dashboard_address=None))
    try:
        address = client.scheduler.address
        assert address.startswith("tls://127.0.0.1:")
        assert client.submit(sum, [1, 2]).result(timeout=30) == 3
        with pytest.raises((OSError, TimeoutError)):
            Client(address.replace("tls://", "tcp://"), timeout=2)
        with pytest.raises((OSError, TimeoutError)):
            Client(address, security=Security.temporary(), timeout=2)  # TLS, with another CA's certificate
    finally:
        client.close()
        cluster.close()


@pytest.mark.parametrize("given", [None, "1048576"])
def test_local_worker_processes_keep_freed_memory_unless_told_otherwise(monkeypatch, given):
    """Dask's nannies set glibc's trim threshold to 64 KiB in their workers, which maps every array over 128 KiB
    afresh; a local cluster's workers start without it, unless the environment sets it."""
    if given is None:
        monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    else:
        monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", given)
    client, cluster = start(ClusterConfig(kind="local", n_workers=1, processes=True, dashboard_address=None))
    try:
        seen = client.run(lambda: __import__("os").environ.get("MALLOC_TRIM_THRESHOLD_"))
        assert list(seen.values()) == [given]
        assert os.environ.get("MALLOC_TRIM_THRESHOLD_") == given
    finally:
        client.close()
        cluster.close()


_REUSE = """
import resource, sys
import numpy as np
from distprice.cluster.worker import dask_setup
if sys.argv[1] == "preloaded":
    dask_setup()
np.ones(1 << 20)  # 8 MiB made and freed once
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    block = np.ones(1 << 20)
    del block
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc")
def test_workers_started_with_dasks_trim_threshold_reuse_what_they_free_once_preloaded():
    """A worker that ``dask worker``'s nanny starts (batch jobs, pods, workers started apart) gets Dask's
    ``MALLOC_TRIM_THRESHOLD_``, under which glibc maps every block over 128 KiB afresh: ten 8 MiB arrays made and
    freed in turn fault their pages in each time (about 5 000 faults here). distprice's worker preload sets
    glibc's own thresholds back: the same arrays then reuse the heap."""
    faults = {
        how: int(
            subprocess.run(
                [sys.executable, "-c", _REUSE, how],
                env={**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"},
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for how in ("plain", "preloaded")
    }
    assert faults["plain"] > 2_000 and faults["preloaded"] < faults["plain"] / 20, faults


@pytest.mark.parametrize("processes", [True, False])
def test_local_worker_processes_start_with_their_objects_out_of_full_garbage_collections(processes):
    """A full pass of the garbage collector over a worker's objects (pandas, numba, Dask) took ~0.1 s of a task:
    a local cluster's worker processes import distprice's tasks and freeze what they hold as they start; workers
    that are threads of this process leave its collector alone."""
    import gc

    client, cluster = start(ClusterConfig(kind="local", n_workers=1, processes=processes, dashboard_address=None))
    try:
        frozen = client.run(lambda: (gc.get_freeze_count(), "distprice.cluster.tasks" in __import__("sys").modules))
        ((count, imported),) = frozen.values()
        assert imported
        assert (count > 10_000) == processes
        assert gc.get_freeze_count() == 0
    finally:
        client.close()
        cluster.close()


def test_a_workers_tasks_read_parquet_on_as_many_arrow_threads_as_the_worker_has():
    """Dask's nannies start workers with OMP_NUM_THREADS=1, which sizes Arrow's thread pool at one thread; the
    tasks of a two-thread worker give it two, as they give numba's parallel loops."""
    client, cluster = start(
        ClusterConfig(kind="local", n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None)
    )
    try:

        def in_a_task():
            import numba
            import pyarrow

            from distprice.cluster.tasks import _use_worker_threads

            _use_worker_threads()  # what every reading, pricing and fitting task does first
            return pyarrow.cpu_count(), numba.get_num_threads()

        assert client.submit(in_a_task, pure=False).result(timeout=60) == (2, 2)
    finally:
        client.close()
        cluster.close()


@pytest.mark.parametrize(
    "kind",
    [
        "local",
        pytest.param(
            "local-cuda",
            marks=[pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")],
        ),
    ],
)
def test_a_script_that_starts_a_cluster_without_the_main_guard_is_told_what_to_do(tmp_path, kind):
    script = tmp_path / "job.py"
    script.write_text(
        "import distprice\nfrom distprice.cluster.config import ClusterConfig\n\n"
        f"with distprice.Pricer(ClusterConfig(kind={kind!r}, n_workers=1, dashboard_address=None)) as p:\n"
        "    print(p.workers)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode != 0
    assert "ClusterError: the local cluster's worker processes did not start" in done.stderr
    assert 'under `if __name__ == "__main__":`' in done.stderr
