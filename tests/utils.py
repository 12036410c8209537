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
SLURM_CPU = {
    "kind": "slurm",
    "dashboard_address": None,
    "jobqueue": {"cores": 1, "memory": "2GiB", "interface": "lo", "start_timeout": 60},
}
"""A SLURM cluster config of one-core CPU jobs on the loopback interface, no dashboard."""
HESTON_QUOTES = ROOT / "tests" / "data" / "heston" / "1062_quotes.in"
"""The Heston benchmark's surface: 1062 option quotes."""
SWAPTIONS = pd.DataFrame(
    {
        "model": ["USD"] * 4,
        "curve": "hull",
        "expiry": [1.0, 2.0, 3.0, 5.0],
        "tenor": [5.0, 5.0, 4.0, 5.0],
        "fixed_frequency": 2,
        "volatility": [0.0095, 0.0092, 0.009, 0.0086],
        "volatility_type": "normal",
    }
)
"""Four normal-volatility swaption quotes of one Hull-White model on the built-in curve."""

HULL_PUT = dict(
    instrument="bond_option",
    option_type="put",
    exercise="european",
    strike=63.0,
    expiry=3.0,
    maturity=9.0,
    coupon=0.0,
    face=100.0,
    mean_reversion=0.1,
    volatility=0.01,
    curve="hull",
)


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
        rows.append(
            dict(
                id=f"ins-{i}",
                instrument=instrument,
                option_type=str(rng.choice(["call", "put"])) if instrument == "bond_option" else None,
                exercise=str(rng.choice(["european", "bermudan", "american"])),
                strike=float(rng.uniform(30, 110)),
                expiry=expiry,
                first_exercise=float(rng.uniform(0, expiry)),
                exercise_frequency=int(rng.choice([1, 2, 4, 12])),
                maturity=maturity,
                coupon=coupon,
                coupon_frequency=int(rng.choice([1, 2, 4])) if coupon else 0,
                face=float(rng.choice([100.0, 1000.0])),
                mean_reversion=float(rng.uniform(0.02, 1.5)),
                volatility=float(rng.uniform(0.002, 0.03)),
                steps_per_year=spy,
                curve="hull",
                quantity=float(rng.integers(-5, 6)),
            )
        )
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
    subprocess.run(
        [
            compiler,
            "-std=c++17",
            "-O2",
            "-ffp-contract=off",
            "-shared",
            "-fPIC",
            f"-I{include}",
            str(source),
            "-o",
            str(library),
        ],
        check=True,
        capture_output=True,
    )
    return ctypes.CDLL(str(library))


def random_dated_bonds(
    rng: np.random.Generator,
    n: int,
    steps_per_year: int = 360,
    years=(1, 3),
    american: bool = False,
    as_of: str = "2025-12-15",
):
    """``n`` dated callable and puttable bonds and their exercise schedule table: every day count, calendar,
    convention pair and frequency, front stubs, end of month, settlement 0-3 days, valuation dates on weekends
    too; bermudan on payment dates or by table (step-down and dirty prices, off-cycle dates, none in the week
    before a payment date, where QuantLib would move them); with ``american`` a quarter american."""
    from distprice.dates import CALENDARS, CONVENTIONS, DAY_COUNTS, cash_flows, terms_from_frame, to_iso

    base = np.datetime64(as_of)
    rows, table = [], []
    i = 0
    while len(rows) < n:
        frequency = int(rng.choice([1, 2, 4, 12]))
        valuation = base + np.timedelta64(int(rng.integers(-3, 4)), "D")
        maturity = valuation + np.timedelta64(int(rng.integers(int(years[0] * 365), int(years[1] * 365))), "D")
        row = dict(
            id=f"d{i}",
            instrument=str(rng.choice(["callable_bond", "puttable_bond"])),
            exercise="bermudan",
            coupon=float(rng.integers(4, 33)) / 400,
            coupon_frequency=frequency,
            issue_date=str(valuation - int(rng.integers(30, 900))),
            maturity_date=str(maturity),
            day_count=DAY_COUNTS.names[i % len(DAY_COUNTS.names)],
            calendar=CALENDARS.names[(i // 2) % len(CALENDARS.names)],
            accrual_convention=str(rng.choice(CONVENTIONS.names)),
            payment_convention=str(rng.choice(CONVENTIONS.names)),
            end_of_month=bool(rng.random() < 0.4),
            settlement_days=int(rng.integers(0, 4)),
            face=float(rng.choice([100.0, 1000.0])),
            valuation_date=str(valuation),
            mean_reversion=float(rng.uniform(0.01, 0.5)),
            volatility=float(rng.uniform(0.003, 0.02)),
            steps_per_year=steps_per_year,
            curve="usd",
        )
        i += 1
        frame = pd.DataFrame([row])
        terms = terms_from_frame(frame)
        flows = cash_flows(terms, np.array([valuation.astype(np.int64)]))
        payments = flows.coupons.payment
        last = min(int(flows.redemption_date[0]), int(terms.maturity[0]))
        candidates = [int(d) for d in payments if d <= last]
        off_cycle = [
            d for d in range(int(flows.settlement[0]) + 1, last + 1, 17) if not any(0 < p - d <= 7 for p in payments)
        ]
        if len(candidates) < 2 or not off_cycle:
            continue
        style = rng.random()
        if american and style < 0.25:
            window = sorted(rng.choice(candidates, 2, replace=False))
            row.update(
                exercise="american",
                strike=float(rng.uniform(95, 105)),
                first_exercise_date=str(to_iso([window[0]])[0]),
                expiry_date=str(to_iso([window[1]])[0]),
            )
        elif style < 0.55:
            window = sorted(rng.choice(candidates, 2, replace=False))
            row.update(
                strike=float(rng.uniform(95, 105)),
                first_exercise_date=str(to_iso([window[0]])[0]),
                expiry_date=str(to_iso([window[1]])[0]),
            )
        else:
            dates = sorted(
                set(rng.choice(candidates, min(3, len(candidates)), replace=False).tolist())
                | set(rng.choice(off_cycle, min(2, len(off_cycle)), replace=False).tolist())
            )
            start = float(rng.uniform(100, 104))
            for k, day in enumerate(dates):  # a step-down (or step-up for puts) to par
                table.append(
                    dict(
                        id=row["id"],
                        date=str(to_iso([day])[0]),
                        price=start + (100 - start) * k / max(len(dates) - 1, 1),
                        price_type="dirty" if rng.random() < 0.3 else "clean",
                    )
                )
        rows.append(row)
    return pd.DataFrame(rows), pd.DataFrame(table, columns=["id", "date", "price", "price_type"])
