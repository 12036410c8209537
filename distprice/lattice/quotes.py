"""Market prices of portfolio rows, the input of the OAS: the columns ``market_price`` (units of ``face``, as
the ``price`` column; empty where the row has none) and ``market_price_type`` (``clean``, the default, or
``dirty``), read and checked like every other portfolio column.

A clean market price is the dirty price at settlement less the accrued interest there (dated rows: §8.2's
accrued at the settlement date; rows in years: the accrued interest of their regular schedule at time 0). A
bond option has no accrued interest: its market price is its dirty price, whatever the type says.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import Problem
from .measures import MARKET_COLUMNS, PRICE_TYPES

QUOTE_COLUMNS = ("market_price", "market_price_type")
"""The portfolio's columns of market prices."""


@dataclass(frozen=True)
class Quotes:
    """Market prices per row: ``price`` (NaN: none) and whether it is ``dirty`` (else clean)."""

    price: np.ndarray
    dirty: np.ndarray

    @classmethod
    def none(cls, rows: int) -> Quotes:
        return cls(np.full(rows, np.nan), np.zeros(rows, dtype=bool))

    def take(self, positions) -> Quotes:
        """The quotes of the rows at ``positions`` (e.g. a job's valid rows)."""
        return Quotes(self.price[positions], self.dirty[positions])


def _label(position: int, ident, first_row: int) -> str:
    if pd.isna(ident):
        shown = "missing"
    else:
        value = ident.item() if isinstance(ident, np.generic) else ident
        shown = repr(int(value) if isinstance(value, float) and value.is_integer() else value)
    return f"row {first_row + position + 1} (id {shown})"


def read_market_prices(portfolio: pd.DataFrame, first_row: int = 0) -> tuple[Quotes, list[Problem]]:
    """The market prices of every row of ``portfolio`` and the rules they break (``market_price`` a finite
    number > 0 where given; ``market_price_type`` one of ``clean``, ``dirty`` where given), each problem
    naming the row (numbered from ``first_row``), its id and the column."""
    n = len(portfolio)
    price_column, type_column = MARKET_COLUMNS
    ids = portfolio["id"].to_numpy(dtype=object) if "id" in portfolio.columns else np.full(n, None, dtype=object)
    problems: list[Problem] = []

    def flag(mask, column, rule):
        problems.extend(Problem(int(p), _label(int(p), ids[p], first_row), column, rule) for p in np.flatnonzero(mask))

    price = np.full(n, np.nan)
    if price_column in portfolio.columns:
        raw = portfolio[price_column]
        price = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        given = raw.notna().to_numpy()
        flag(given & np.isnan(price), price_column, "must be a number")
        flag(
            given & ~np.isnan(price) & ~(np.isfinite(price) & (price > 0)),
            price_column,
            "must be finite and > 0 (units of face)",
        )
        price = np.where(np.isfinite(price) & (price > 0), price, np.nan)
    dirty = np.zeros(n, dtype=bool)
    if type_column in portfolio.columns:
        text = portfolio[type_column].astype("string").str.strip().str.lower()
        flag(
            text.notna().to_numpy() & ~text.isin(PRICE_TYPES).to_numpy(),
            type_column,
            f"must be one of {', '.join(PRICE_TYPES)}",
        )
        dirty = (text == "dirty").fillna(False).to_numpy(dtype=bool)
    problems.sort(key=lambda p: p.position)
    return Quotes(price, dirty), problems
