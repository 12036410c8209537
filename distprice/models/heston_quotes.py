"""Heston quotes: the ``heston_quotes`` table (CSV / Parquet, or LexiFi's benchmark ``.in`` file), its rules,
and the normalised surfaces the pricers read.

Table columns, one row per quote: ``maturity`` (date), ``strike`` (> 0, in the currency of ``spot``),
``implied_vol`` (> 0, Black-Scholes), optional ``weight`` (>= 0, default 1) and ``surface`` (id, default
``default``). Each surface's market is given by columns that hold one value per surface (repeated on its
rows): ``valuation_date`` (required), ``spot`` (> 0, default 1), ``rate`` and ``dividend`` (continuously
compounded annual rates, default 0). Times are ACT/365 from the valuation date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InvalidInputError, Problem
from ..tables import read_table
from .checks import Checks
from .heston import market_call

TABLE = "heston_quotes"
QUOTE_COLUMNS = ("maturity", "strike", "implied_vol")
MARKET_DEFAULTS = {"spot": 1.0, "rate": 0.0, "dividend": 0.0}
DAYS_PER_YEAR = 365.0


@dataclass(frozen=True)
class Surface:
    """One surface's quotes, normalised by the forward (see :mod:`distprice.models.heston`).

    Quotes keep the input order; ``rows`` are their positions in the quotes table. Quotes of one maturity share
    the characteristic function: ``times`` are the distinct maturities (years, increasing) and ``term`` gives
    each quote's index into them. Per quote: ``log_strike`` ``ln(K / F)``, ``market`` the normalised market
    call, ``vega`` its vega (per unit of volatility, floored at VEGA_FLOOR), ``weight`` its weight.
    """

    name: str
    rows: np.ndarray
    times: np.ndarray
    term: np.ndarray
    log_strike: np.ndarray
    market: np.ndarray
    vega: np.ndarray
    weight: np.ndarray
    scale: np.ndarray
    """Forward times discount factor per quote: price in currency = scale * normalised price."""

    @property
    def size(self) -> int:
        return len(self.log_strike)

    @property
    def strike(self) -> np.ndarray:
        """Normalised strikes ``k = K / F``."""
        return np.exp(self.log_strike)

    def by_maturity(self) -> tuple[np.ndarray, Surface]:
        """This surface with its quotes sorted by maturity (stable), and the order: sorted position -> position
        here (``prices_here[order] = prices_sorted``)."""
        order = np.argsort(self.term, kind="stable")
        fields = {
            f: getattr(self, f)[order] for f in ("rows", "term", "log_strike", "market", "vega", "weight", "scale")
        }
        return order, replace(self, **fields)


def make_surface(name: str, t, log_strike, vol, weight=None, scale=None, rows=None) -> Surface:
    """A surface from per-quote maturities ``t`` (years), normalised log-strikes and implied volatilities."""
    t = np.asarray(t, dtype=np.float64)
    log_strike = np.asarray(log_strike, dtype=np.float64)
    times, term = np.unique(t, return_inverse=True)
    market, vega = market_call(log_strike, t, np.asarray(vol, dtype=np.float64))
    n = len(t)
    return Surface(
        name=name,
        rows=np.arange(n) if rows is None else np.asarray(rows),
        times=times,
        term=term.astype(np.int64),
        log_strike=log_strike,
        market=market,
        vega=vega,
        weight=np.ones(n) if weight is None else np.asarray(weight, dtype=np.float64),
        scale=np.ones(n) if scale is None else np.asarray(scale, dtype=np.float64),
    )


def heston_surfaces(quotes: pd.DataFrame) -> list[Surface]:
    """The surfaces of a quotes table, in order of first appearance; InvalidInputError lists every bad cell."""
    checks = Checks(TABLE, quotes, "surface")
    if not checks.require((*QUOTE_COLUMNS, "valuation_date"), ("weight", "surface", *MARKET_DEFAULTS)):
        checks.raise_if_any()
    surface = checks.label("surface", "default")
    strike = checks.number("strike")
    vol = checks.number("implied_vol")
    weight = checks.number("weight", 1.0)
    market = {column: checks.number(column, default) for column, default in MARKET_DEFAULTS.items()}
    valuation = checks.date("valuation_date")
    maturity = checks.date("maturity")
    days = (maturity - valuation) / np.timedelta64(1, "D")

    numbers = {"strike": strike, "implied_vol": vol, "weight": weight, **market}
    for column, values in numbers.items():
        checks.flag(np.isinf(values), column, "must be finite")
    checks.flag(strike <= 0, "strike", "must be > 0")
    checks.flag(vol <= 0, "implied_vol", "must be > 0")
    checks.flag(weight < 0, "weight", "must be >= 0")
    checks.flag(market["spot"] <= 0, "spot", "must be > 0")
    checks.flag(days <= 0, "maturity", "must be after the valuation date")
    groups = {name: np.flatnonzero(surface == name) for name in dict.fromkeys(surface)}
    for name, rows in groups.items():
        for column, values in (("valuation_date", valuation), *market.items()):
            first = values[rows[0]]
            same = (values[rows] == first) | (pd.isna(values[rows]) & pd.isna(first))
            checks.flag_at(
                rows[~same], column, f"must be the same on every row of surface '{name}' (its first row has {first})"
            )
        if not np.any(weight[rows] > 0):
            checks.flag_at(rows[:1], "weight", f"surface '{name}' needs a quote with weight > 0")
    checks.raise_if_any()

    t = days / DAYS_PER_YEAR
    forward = market["spot"] * np.exp((market["rate"] - market["dividend"]) * t)
    scale = forward * np.exp(-market["rate"] * t)
    log_strike = np.log(strike) - np.log(forward)
    return [
        make_surface(name, t[rows], log_strike[rows], vol[rows], weight[rows], scale[rows], rows)
        for name, rows in groups.items()
    ]


@dataclass(frozen=True)
class BenchmarkSettings:
    """The settings line of a benchmark ``.in`` file."""

    max_evals: int
    nodes: int
    population: int


def read_benchmark(path) -> tuple[pd.DataFrame, BenchmarkSettings]:
    """LexiFi's benchmark file: ``max_global``, ``nb_points``, ``np``, ``today`` (yyyymmdd) one per line as
    ``value -- name``, then the lists ``[maturities yyyymmdd]``, ``[strikes]``, ``[implied vols]``. Returns a
    quotes table of one surface (spot 1, rates 0) and the settings."""
    where = f"{TABLE} file {path}"
    try:
        text = Path(path).read_text()
    except UnicodeDecodeError:
        raise InvalidInputError([Problem(None, where, None, "is not UTF-8 text")]) from None
    values = dict((name, value) for value, name in re.findall(r"^\s*(\S+)\s+--\s+(\w+)", text, re.MULTILINE))
    lists = re.findall(r"\[([^\]]*)\]", text)
    problems = [
        Problem(None, where, None, f"needs a line '<value> -- {name}'")
        for name in ("max_global", "nb_points", "np", "today")
        if name not in values
    ]
    problems += [
        Problem(None, where, None, f"{name} must be a whole number >= 1, not {values[name]!r}")
        for name in ("max_global", "nb_points", "np")
        if name in values and not _whole(values[name])
    ]
    today = pd.to_datetime(values.get("today"), format="%Y%m%d", errors="coerce")
    if "today" in values and pd.isna(today):
        problems.append(Problem(None, where, None, f"today must be a date yyyymmdd, not {values['today']!r}"))
    if len(lists) != 3:
        problems.append(
            Problem(None, where, None, f"needs 3 bracketed lists (maturities, strikes, quotes), found {len(lists)}")
        )
    if problems:
        raise InvalidInputError(problems)
    columns = [[item.strip() for item in body.split(",") if item.strip()] for body in lists]
    if len({len(c) for c in columns}) != 1:
        lengths = ", ".join(str(len(c)) for c in columns)
        raise InvalidInputError(
            [Problem(None, where, None, f"the three lists must have the same length, found {lengths}")]
        )
    table = pd.DataFrame(
        {
            "surface": "default",
            "valuation_date": today,
            "maturity": pd.to_datetime(columns[0], format="%Y%m%d", errors="coerce"),
            "strike": pd.to_numeric(pd.Series(columns[1]), errors="coerce"),
            "implied_vol": pd.to_numeric(pd.Series(columns[2]), errors="coerce"),
        }
    )
    settings = BenchmarkSettings(int(values["max_global"]), int(values["nb_points"]), int(values["np"]))
    return table, settings


def _whole(text: str) -> bool:
    """Whether ``text`` is a whole number >= 1 (digits only)."""
    return text.isdigit() and int(text) >= 1


def read_quotes(path) -> pd.DataFrame:
    """A quotes table from CSV, Parquet or a benchmark ``.in`` file (by extension)."""
    if Path(path).suffix.lower() == ".in":
        return read_benchmark(path)[0]
    return read_table(path)
