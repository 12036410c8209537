"""Helpers the tests share: a valid example instrument, random portfolios of every kind, the repository's
folders, price comparisons."""
from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from distprice.curves import builtin_curves
from distprice.lattice.instruments import prepare

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
CONFIGS = ROOT / "configs"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
CRD_FILES = {"DaskCluster": "daskcluster.yaml", "DaskWorkerGroup": "daskworkergroup.yaml", "DaskJob": "daskjob.yaml"}
"""The Dask operator's custom resources, and the file of dask-kubernetes that defines each."""
PRICES = ["price", "bond_price", "option_price"]
SLURM_CPU = {"kind": "slurm", "dashboard_address": None,
             "jobqueue": {"cores": 1, "memory": "2GiB", "interface": "lo", "start_timeout": 60}}
"""A SLURM cluster config of one-core CPU jobs on the loopback interface, no dashboard."""

HULL_PUT = dict(instrument="bond_option", option_type="put", exercise="european", strike=63.0, expiry=3.0,
                maturity=9.0, coupon=0.0, face=100.0, mean_reversion=0.1, volatility=0.01, curve="hull")


def random_portfolio(rng: np.random.Generator, n: int, max_steps_per_year: int = 52) -> pd.DataFrame:
    """``n`` valid instruments on the ``hull`` curve with small trees (fast under the reference engine)."""
    rows = []
    for i in range(n):
        spy = int(rng.choice([s for s in (1, 2, 4, 12, 24, 52) if s <= max_steps_per_year]))
        height = int(rng.integers(1, min(30 * spy, 240) + 1))
        maturity = height / spy
        expiry = int(rng.integers(1, height + 1)) / spy
        coupon = float(rng.choice([0.0, 0.03, 0.07]))
        instrument = str(rng.choice(["bond_option", "callable_bond", "puttable_bond"]))
        rows.append(dict(
            id=f"ins-{i}", instrument=instrument,
            option_type=str(rng.choice(["call", "put"])) if instrument == "bond_option" else None,
            exercise=str(rng.choice(["european", "bermudan", "american"])),
            strike=float(rng.uniform(30, 110)), expiry=expiry, first_exercise=float(rng.uniform(0, expiry)),
            exercise_frequency=int(rng.choice([1, 2, 4, 12])), maturity=maturity, coupon=coupon,
            coupon_frequency=int(rng.choice([1, 2, 4])) if coupon else 0, face=float(rng.choice([100.0, 1000.0])),
            mean_reversion=float(rng.uniform(0.02, 1.5)), volatility=float(rng.uniform(0.002, 0.03)),
            steps_per_year=spy, curve="hull", quantity=float(rng.integers(-5, 6))))
    return pd.DataFrame(rows)


def instruments_of(portfolio: pd.DataFrame, curves=None):
    """The valid instruments of a portfolio that breaks no rule (on the built-in curves by default)."""
    prepared = prepare(portfolio, curves or builtin_curves())
    assert not prepared.problems, prepared.problems
    return prepared.instruments()


def assert_same_prices(got: pd.DataFrame, expected: pd.DataFrame):
    """Every row once, in input order, with the same prices (1e-13 relative) and the same rows in error."""
    assert list(got["id"]) == list(expected["id"])
    for column in PRICES:
        np.testing.assert_allclose(got[column], expected[column], rtol=1e-13, atol=0, err_msg=column)
    assert got["error"].isna().tolist() == expected["error"].isna().tolist()


def documents(path: Path) -> list[dict]:
    """The YAML documents of a file (empty ones left out)."""
    with open(path) as file:
        return [d for d in yaml.safe_load_all(file) if d is not None]


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_library(code: str, tmp_dir: Path, include: Path):
    """``code`` (C++ over the kernels' host-compilable headers in ``include``) built into a shared library with
    the machine's C++ compiler and loaded with ctypes; None when no compiler is installed."""
    import ctypes
    import shutil
    import subprocess

    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        return None
    source, library = tmp_dir / "shim.cpp", tmp_dir / "shim.so"
    source.write_text(code)
    subprocess.run([compiler, "-std=c++17", "-O2", "-ffp-contract=off", "-shared", "-fPIC", f"-I{include}",
                    str(source), "-o", str(library)], check=True, capture_output=True)
    return ctypes.CDLL(str(library))
