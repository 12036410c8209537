"""The ways into a cluster besides :class:`distprice.Pricer`: the ``cluster=`` argument of ``price``, ``price_mc``,
``calibrate_heston`` and ``calibrate_hull_white``, and ``run --report`` on a cluster, each equal to this process's
result; and the dashboard's address, as the log names it and warns of it."""

from __future__ import annotations

import logging
import re
import socket
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from distributed import get_task_stream

import distprice
from distprice.cli import main
from distprice.cluster.config import ClusterConfig
from distprice.cluster.pricer import Pricer
from distprice.cluster.start import dashboard_host, on_loopback
from distprice.models import read_quotes

from utils import HESTON_QUOTES, SWAPTIONS, assert_same_prices

MC_JOBS = Path(__file__).parent / "data" / "optionpricing" / "finpar_small.input.data"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def ran(stream) -> set[str]:
    """The names of the tasks a task stream saw (their keys without the job's id)."""
    return {task["key"].split("-")[0] for task in stream.data}


def test_price_on_a_cluster_is_the_price_in_this_process(local, small_book, small_priced):
    with get_task_stream(client=local) as stream:
        priced = distprice.price(small_book, engine="cpu", cluster=local)
    assert_same_prices(priced, small_priced)
    assert (priced["engine"] == "cpu").all() and "price_cpu_fp64" in ran(stream)


def test_price_mc_on_a_cluster_gives_the_same_bits(local):
    here = distprice.price_mc(MC_JOBS, paths=200_000, engine="cpu")
    with get_task_stream(client=local) as stream:
        there = distprice.price_mc(MC_JOBS, paths=200_000, engine="cpu", cluster=local)
    assert "mc_paths_cpu_fp64" in ran(stream)
    assert there["price"].tolist() == here["price"].tolist()
    assert there["stderr_batches"].tolist() == here["stderr_batches"].tolist() and set(there["engine"]) == {"cpu"}


def test_calibrations_on_a_cluster_fit_what_this_process_fits(local):
    quotes = read_quotes(HESTON_QUOTES)
    here, here_quotes = distprice.calibrate_heston(quotes, max_evals=80, seed=5)
    with get_task_stream(client=local) as stream:
        there, there_quotes = distprice.calibrate_heston(quotes, max_evals=80, seed=5, cluster=local)
        models = distprice.calibrate_hull_white(SWAPTIONS, cluster=local)
    assert {"fit_heston", "fit_hull_white"} <= ran(stream)
    parameters = ["v0", "theta", "rho", "kappa", "eta", "rmse", "n_evals"]
    pd.testing.assert_frame_equal(there[parameters], here[parameters], check_exact=True)
    np.testing.assert_array_equal(there_quotes["model_price"], here_quotes["model_price"])
    pd.testing.assert_frame_equal(models, distprice.calibrate_hull_white(SWAPTIONS), check_exact=True)
    assert models.loc[0, "status"] == "converged" and models.loc[0, "rmse"] < 1e-3


def test_run_with_a_report_on_a_cluster(local, small_book, small_priced, tmp_path):
    small_book.to_csv(tmp_path / "book.csv", index=False)
    args = ["run", "--cluster", local.scheduler.address, "--portfolio", str(tmp_path / "book.csv")]
    args += ["--output", str(tmp_path / "priced.csv"), "--engine", "cpu", "--report", str(tmp_path / "r.html")]
    done = CliRunner().invoke(main, [*args, "--no-progress"])
    assert done.exit_code == 0, done.output
    assert "on 2 workers" in done.output and f"wrote the job report {tmp_path / 'r.html'}" in done.output
    assert_same_prices(pd.read_csv(tmp_path / "priced.csv"), small_priced)
    page = (tmp_path / "r.html").read_text()

    def figure(key: str) -> str:
        return re.search(rf'<td data-key="{key}" data-value="([^"]*)"', page).group(1)

    assert int(figure("rows")) == int(figure("rows_priced")) == len(small_book)
    assert float(figure("start_seconds")) > 0 and float(figure("kernel_seconds")) > 0  # the cluster's start and work
    assert float(figure("total_value")) == pytest.approx(small_priced["value"].sum(), rel=1e-12)
    total = float(re.search(r"([0-9.]+) s in all", done.output).group(1))
    phases = sum(float(figure(f"{p}_seconds")) for p in ("start", "job", "stop"))
    assert f"{float(figure('wall_seconds')):.2f}" == f"{total:.2f}" and phases == pytest.approx(total, abs=0.006)
    chunks = int(figure("chunks"))  # the chunks the client cut, each with its actual seconds on its worker
    assert chunks >= 1 and float(figure("chunk_actual_seconds")) > 0
    assert len(re.findall(r'<table class="data" data-key="chunks">', page)) == 1 and '"plan part 0: cpu"' in page


# ---- the dashboard's address ----


def test_loopback_and_the_host_a_dashboard_url_names():
    assert all(on_loopback(a) for a in (None, "127.0.0.1:8787", "127.0.0.2:0", "localhost:8787", "[::1]:8787"))
    assert not any(on_loopback(a) for a in ("0.0.0.0:8787", ":8787", "[::]:8787", "10.1.2.3:8787", "risk-host:80"))
    here = socket.gethostname()
    assert [dashboard_host(a) for a in ("0.0.0.0:8787", ":0", "[::]:8787")] == [here] * 3
    assert [dashboard_host(a) for a in ("127.0.0.1:0", "10.1.2.3:8787", "risk-host:80")] == [
        "127.0.0.1",
        "10.1.2.3",
        "risk-host",
    ]


def start_logged(dashboard_address: str, caplog) -> tuple[str, str]:
    """Starts and closes a one-worker threaded local cluster of this ``dashboard_address``: the pricer's dashboard
    link and page."""
    caplog.clear()
    config = ClusterConfig(kind="local", n_workers=1, processes=False, dashboard_address=dashboard_address)
    with caplog.at_level(logging.INFO, logger="distprice"), Pricer(config) as pricer:
        return pricer.dashboard_link, pricer.page


def test_a_dashboard_open_to_the_network_is_warned_of_and_named_as_it_listens(caplog):
    link, page = start_logged("0.0.0.0:0", caplog)
    port = int(re.fullmatch(rf"http://{re.escape(socket.gethostname())}:(\d+)/status", link).group(1))
    assert page == f"http://{socket.gethostname()}:{port}/distprice"
    assert f"dashboard: {link}, this job: {page}" in caplog.text
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("the dashboard listens on 0.0.0.0:0, beyond this machine: anyone who reaches it")
    assert "reverse proxy with authentication" in warning
    link, page = start_logged("127.0.0.1:0", caplog)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/status", link) and f"dashboard: {link}" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
