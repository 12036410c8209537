"""Fixtures the tests share (helpers are in utils.py)."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice.planner import MIN_CHUNK_ROWS

from utils import CRD_FILES, DEPLOY, MANIFESTS, documents, free_port, random_portfolio


@pytest.fixture(scope="session")
def mixed_portfolio() -> pd.DataFrame:
    """150 valid instruments of every kind, exercise style and coupon shape, with small trees."""
    return random_portfolio(np.random.default_rng(20261122), 150)


@pytest.fixture(scope="session")
def small_book() -> pd.DataFrame:
    """300 random instruments of monthly trees at most."""
    return random_portfolio(np.random.default_rng(7), 300, max_steps_per_year=12)


@pytest.fixture(scope="session")
def small_priced(small_book) -> pd.DataFrame:
    """``small_book`` priced in this process by the CPU engine."""
    return distprice.price(small_book, engine="cpu")


@pytest.fixture(scope="module")
def book() -> pd.DataFrame:
    """8 000 random instruments (several chunks per worker of a two-worker cluster)."""
    return random_portfolio(np.random.default_rng(5), 4 * MIN_CHUNK_ROWS, max_steps_per_year=12)


@pytest.fixture(scope="module")
def in_process(book) -> pd.DataFrame:
    """``book`` priced in this process by the CPU engine."""
    return distprice.price(book, engine="cpu")


@pytest.fixture(scope="module")
def local():
    """A client of a LocalCluster of 2 single-threaded worker processes, dashboard on a free loopback port."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0") as cluster,
        Client(cluster) as client,
    ):
        yield client


@pytest.fixture
def scheduler():
    """A ``dask scheduler`` process on loopback, with no worker; yields its address and its process."""
    from distributed.utils_test import popen

    port = free_port()
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dashboard-address",
            ":0",
        ],
        **quiet,
    ) as process:
        yield f"tcp://127.0.0.1:{port}", process


@pytest.fixture
def processes(scheduler):
    """Two ``dask worker`` processes of :func:`scheduler` (no nanny: a killed worker stays dead); yields the
    scheduler's address and the workers' processes."""
    from distributed.utils_test import popen

    address, _ = scheduler
    with contextlib.ExitStack() as started:
        quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        workers = [
            started.enter_context(
                popen(
                    [
                        sys.executable,
                        "-m",
                        "distributed.cli.dask_worker",
                        address,
                        "--nthreads",
                        "1",
                        "--no-nanny",
                        "--host",
                        "127.0.0.1",
                    ],
                    **quiet,
                )
            )
            for _ in range(2)
        ]
        yield address, workers


@pytest.fixture(scope="session")
def compose() -> dict:
    """deploy/docker/compose.yaml."""
    (spec,) = documents(DEPLOY / "docker" / "compose.yaml")
    return spec


@pytest.fixture(scope="session")
def manifests() -> dict[str, dict]:
    """The Kubernetes manifests of deploy/, by kind."""
    found = {}
    for path in MANIFESTS:
        for document in documents(path):
            assert document["apiVersion"] == "kubernetes.dask.org/v1" and document["kind"] in CRD_FILES
            found[document["kind"]] = document
    assert set(found) == set(CRD_FILES)
    return found
