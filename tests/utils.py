"""Helpers the tests share: a valid example instrument, random portfolios of every kind, the repository's
folders, price comparisons, closed forms, the compilers of the kernels' host checks."""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
import socket
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.optimize import brentq
from scipy.special import ndtr

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


def listening(port: int, process, seconds: float = 120.0) -> None:
    """Returns once a process started on the loopback interface accepts connections on ``port`` (its start takes
    seconds on a loaded machine); fails if it ends first or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while process.poll() is None and time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"no process listened on port {port} (its exit status: {process.poll()})")


def host_library(code: str, tmp_dir: Path, include: Path):
    """``code`` (C++ over the kernels' host-compilable headers in ``include``) built into a shared library with
    the machine's C++ compiler and loaded with ctypes (:func:`require_compiler`: a skip without one, a failure
    in CI)."""
    import ctypes
    import subprocess

    compiler = require_compiler("g++", shutil.which("g++") or shutil.which("c++"))
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
            issue_date=str(valuation - np.timedelta64(int(rng.integers(30, 900)), "D")),
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


def with_both_rights(portfolio: pd.DataFrame, schedule: pd.DataFrame, rng: np.random.Generator):
    """The rows of :func:`random_dated_bonds` priced by their schedule table, as callable_puttable_bonds: each
    date of the table a call (1 above its price) or a put (4 below), taking turns from a random first, and
    on about a third of the call dates a put too, at or below the call (the same price type)."""
    rows = portfolio[portfolio["id"].isin(schedule["id"])].assign(instrument="callable_puttable_bond")
    lines = []
    for _, group in schedule[schedule["id"].isin(rows["id"])].groupby("id", sort=False):
        turn = int(rng.integers(2))
        for k, line in enumerate(group.to_dict("records")):
            call = (k + turn) % 2 == 0
            lines.append(dict(line, price=line["price"] + (1.0 if call else -4.0), right="call" if call else "put"))
            if call and rng.random() < 0.35:
                lines.append(dict(line, price=line["price"] - rng.uniform(0.0, 4.0), right="put"))
    return rows.reset_index(drop=True), pd.DataFrame(lines)


def assert_engines_close(got: pd.DataFrame, expected: pd.DataFrame, rtol: float = 1e-12):
    """Two engines' pricings of the same rows agree: the same rows in error, and every price column (the dated
    ones too, where present) within ``rtol`` of the larger of the expected price and the row's face."""
    assert got["error"].isna().tolist() == expected["error"].isna().tolist()
    face = expected["face"] if "face" in expected else 100.0
    for column in [c for c in (*PRICES, "dirty_price", "clean_price") if c in expected]:
        scale = np.maximum(expected[column].abs().fillna(0.0), face)
        difference = (got[column] - expected[column]).abs().fillna(0.0)
        assert (difference <= rtol * scale).all(), (column, difference.max())


def jamshidian_bond_option(discount, a: float, sigma: float, expiry: float, times, amounts, strike: float, kind: str):
    """The Hull-White price of a European option, exercised at ``expiry`` (years), on the bond that pays
    ``amounts`` at ``times`` (years, none before the expiry), struck at ``strike`` (the whole amount paid, accrued
    included): Jamshidian's sum of options on zero-coupon bonds, each struck at the bond's value where the whole
    bond is worth ``strike``. ``discount(t)`` is the curve's ``P(0, t)``; a, sigma the model's mean reversion
    and volatility; ``kind`` ``call`` or ``put``.

    At the expiry T, ``P(T, t) = P(0, t) / P(0, T) exp(-B x - B^2 v / 2)``, ``B = (1 - exp(-a (t - T))) / a``,
    ``x`` normal with mean 0 and variance ``v = sigma^2 (1 - exp(-2 a T)) / (2 a)`` under the T-forward measure.
    """
    times, amounts = np.asarray(times, dtype=np.float64), np.asarray(amounts, dtype=np.float64)
    at_expiry = float(discount(expiry))
    now = times <= expiry  # paid at the expiry itself: certain, a part of the strike
    strike, times, amounts = strike - float(amounts[now].sum()), times[~now], amounts[~now]
    at_times = np.asarray(discount(times), dtype=np.float64)
    if strike <= 0 or len(times) == 0:  # exercised for certain (a call), or never (a put), or nothing left
        forward = float(np.sum(amounts * at_times)) - strike * at_expiry
        return max(forward, 0.0) if kind == "call" else max(-forward, 0.0)
    b = -np.expm1(-a * (times - expiry)) / a
    variance = sigma * sigma * -math.expm1(-2.0 * a * expiry) / (2.0 * a)
    forward = at_times / at_expiry * np.exp(-0.5 * b * b * variance)
    x = brentq(lambda x: float(np.sum(amounts * forward * np.exp(-b * x))) - strike, -10.0, 10.0, xtol=1e-15)
    strikes = forward * np.exp(-b * x)
    deviation = b * math.sqrt(variance)
    h = np.log(at_times / (strikes * at_expiry)) / deviation + 0.5 * deviation
    put = float(np.sum(amounts * (strikes * at_expiry * ndtr(deviation - h) - at_times * ndtr(-h))))
    return put if kind == "put" else put + float(np.sum(amounts * at_times)) - strike * at_expiry


CURVE_DAYS = 365
"""Days of a curve year on the curves of :func:`european_terms`' dated rows (``ACT/365F``)."""


def european_terms(row: dict) -> tuple[float, float, np.ndarray, np.ndarray]:
    """What a European option of ``row`` exchanges at its expiry, as the tree's events are defined: the expiry
    t_e (years), the amount paid on exercise (the strike plus the accrued interest at t_e) and the times and
    amounts of the bond's cash flows after t_e (a coupon at t_e is not among them; the redemption always is).

    A row in years: coupons at ``maturity - k / coupon_frequency`` (> 0), accrued from the latest time of that
    schedule run back before today, written out here. A dated row (``maturity_date``; its own
    ``valuation_date``; curve years of :data:`CURVE_DAYS` days): cash flows and accrued from distprice.dates,
    which test_dates_quantlib.py holds to QuantLib's.
    """
    face, coupon = float(row.get("face", 100.0)), float(row.get("coupon", 0.0))
    if "maturity_date" not in row:
        maturity, expiry, frequency = float(row["maturity"]), float(row["expiry"]), int(row.get("coupon_frequency", 0))
        times, amounts = np.array([maturity]), np.array([face])
        paid = 0.0
        if coupon > 0:
            schedule = maturity - np.arange(int(maturity * frequency) + 2) / frequency
            later = schedule[(schedule > expiry + 1e-9) & (schedule > 0)]
            times, amounts = np.r_[later, maturity], np.r_[np.full(len(later), face * coupon / frequency), face]
            previous = maturity - math.ceil((maturity - expiry) * frequency - 1e-9) / frequency
            paid = face * coupon * max(expiry - previous, 0.0)
        return expiry, float(row["strike"]) + paid, times, amounts
    from distprice.dates import accrued, cash_flows, day_numbers, terms_from_frame

    terms = terms_from_frame(pd.DataFrame([row]))
    valuation, expiry = (int(day_numbers([row[c]])[0]) for c in ("valuation_date", "expiry_date"))
    flows = cash_flows(terms, np.array([valuation]))
    payment, amount = flows.coupons.payment, flows.coupons.amount
    days = np.r_[payment[payment > expiry], flows.redemption_date[0]]
    amounts = np.r_[amount[payment > expiry], flows.redemption_amount[0]]
    paid = float(accrued(terms, flows.coupons, [0], [expiry])[0])
    return (
        (expiry - valuation) / CURVE_DAYS,
        face * float(row["strike"]) / 100.0 + paid,
        (days - valuation) / CURVE_DAYS,
        amounts,
    )


def nvcc() -> str | None:
    """The CUDA compiler: ``nvcc`` on the PATH, else the one of NVIDIA's ``nvidia-cuda-nvcc`` wheel (which
    .ci/run installs where there is none); None without either."""
    found = shutil.which("nvcc")
    spec = importlib.util.find_spec("nvidia")
    roots = [] if found or spec is None else list(spec.submodule_search_locations or [])
    wheels = [str(p) for root in roots for p in sorted(Path(root).glob("cu*/bin/nvcc"))]
    return found or next(iter(wheels), None)


def require_compiler(name: str, found: str | None) -> str:
    """``found``, the path of compiler ``name``; without it a skip, or a failure where the environment variable
    ``CI`` is set (as .ci/run sets it): the checks of the CUDA kernels' sources never pass unseen in CI."""
    if found is None:
        message = f"no {name} on this machine: the test builds the CUDA kernels' sources with it"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI is set: install it, see docs/develop/testing.rst)")
        pytest.skip(message)
    return found
