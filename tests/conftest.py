"""Fixtures the tests share (helpers are in utils.py); the tests' numba cache and Hypothesis profiles.

numba refreshes a cached function when its own file changes, not when a function it inlines from another file
does: a cache kept beside the source can run stale code. The tests' cache is a folder named by a hash of the
Python files of the distprice package that the tests import, set below before anything imports numba
(pytest-xdist's workers compute the same folder, and the processes the tests start inherit it); folders unused
for a week are removed (docs/develop/testing.rst). With ``CI`` set, Hypothesis draws the same examples on every
run and keeps no database.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import settings

os.environ["NUMBA_CACHE_DIR"] = str(
    Path(tempfile.gettempdir())
    / "distprice-numba"
    / hashlib.sha256(
        b"".join(
            path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0"
            for package in [Path(importlib.util.find_spec("distprice").origin).parent]  # found, not imported
            for path in sorted(package.rglob("*.py"))
        )
    ).hexdigest()[:20]
)

import numba

import distprice
from distprice.planner import MIN_CHUNK_ROWS

from utils import CRD_FILES, DEPLOY, MANIFESTS, documents, free_port, listening, random_portfolio

NUMBA_CACHES = Path(os.environ["NUMBA_CACHE_DIR"]).parent
"""The tests' numba caches, one folder per state of the package's source."""
CACHE_DAYS = 7
"""A numba cache folder of another source state is removed once unused for this many days."""


def _tidy_numba_caches(keep: Path) -> None:
    """Marks ``keep`` as used now and removes the other folders of NUMBA_CACHES unused for CACHE_DAYS."""
    keep.mkdir(parents=True, exist_ok=True)
    os.utime(keep)
    for folder in NUMBA_CACHES.iterdir():
        if folder != keep and folder.stat().st_mtime < time.time() - CACHE_DAYS * 86400:
            shutil.rmtree(folder, ignore_errors=True)


if numba.config.CACHE_DIR != os.environ["NUMBA_CACHE_DIR"]:
    raise RuntimeError("numba was imported before tests/conftest.py set its cache folder (by a pytest plugin?)")
_tidy_numba_caches(Path(os.environ["NUMBA_CACHE_DIR"]))
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


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


STOP_SECONDS = 60.0
"""How long a test's scheduler or worker process may take to end once told to (a loaded machine is slow)."""


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
        terminate_timeout=STOP_SECONDS,
        **quiet,
    ) as process:
        listening(port, process)
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
                    terminate_timeout=STOP_SECONDS,
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
