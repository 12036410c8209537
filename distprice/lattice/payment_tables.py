"""The coupon and principal schedule tables (:mod:`~.payments`) read, line by line, and fitted to the dated rows
they name."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ..dates import NO_DATE, parse_dates
from ..dates.csr import offsets_of
from ..errors import Problem
from ..tables import check_names
from .dated import DatedRows, _as_text, _positions_of, _schedule_problems
from .payments import Payments, Steps, resolve, settled_accrued

COUPON_COLUMNS = ("id", "date", "coupon")
PRINCIPAL_COLUMNS = ("id", "date", "repaid")
TABLES = {"coupon schedule": COUPON_COLUMNS, "principal schedule": PRINCIPAL_COLUMNS}
"""Each table's name in messages and its columns: the id, the date and the value."""
RULES = {
    "coupon schedule": "must be a number >= 0 (decimal a year: 0.05 is 5 %)",
    "principal schedule": "must be a number > 0 and <= 100 (% of the original face)",
}


def read_steps(name: str, table: pd.DataFrame, ids, lines=None) -> tuple[Steps, list[Problem]]:
    """A coupon or principal schedule table (``name``: a key of :data:`TABLES`) as per-row steps of a portfolio
    whose rows have ``ids`` (matched as text), and the problems of its lines, each naming its row of the table
    (with ``lines``, positions in ``table``, only those rows are read, as for the exercise schedule)."""
    columns = TABLES[name]
    missing = [c for c in columns if c not in table.columns]
    misspelled = check_names(name, table.columns, columns)
    if missing or misspelled:
        return Steps.empty(len(ids)), misspelled + [Problem(None, name, c, "must have this column") for c in missing]
    if lines is not None:
        table = table.take(lines)
    keys = _as_text(table["id"])
    days, not_dates = parse_dates(table["date"])
    value = pd.to_numeric(table[columns[2]], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    rows = _positions_of(_as_text(pd.Series(ids)), keys)
    bad_date = days == NO_DATE
    bad_date[not_dates] = True
    if name == "coupon schedule":
        bad_value = ~(np.isfinite(value) & (value >= 0))
    else:
        bad_value = ~(np.isfinite(value) & (value > 0) & (value <= 100))
    absent = keys.isna().to_numpy()
    good = np.flatnonzero(~np.isnan(rows) & ~bad_date & ~bad_value)
    order = np.lexsort((days[good], rows[good]))
    good = good[order]
    row, day = rows[good].astype(np.int64), days[good]
    twice = np.zeros(len(good), dtype=bool)
    twice[1:] = (np.diff(row) == 0) & (np.diff(day) == 0)
    found = [
        (np.flatnonzero(absent), "id", "is required"),
        (np.flatnonzero(~absent & np.isnan(rows)), "id", "names no row of the portfolio"),
        (np.flatnonzero(bad_date), "date", "must be a date YYYY-MM-DD"),
        (np.flatnonzero(bad_value), columns[2], RULES[name]),
        (good[twice], "date", "is given twice for this id"),
    ]
    keep = good[~twice]
    steps = Steps(offsets_of(np.bincount(row[~twice], minlength=len(ids))), days[keep], value[keep])
    return steps, _schedule_problems(keys, found, lines, table=name)


def with_payments(dated: DatedRows, payments: Payments, rows: np.ndarray, where) -> tuple[DatedRows, list[Problem]]:
    """Dated rows (:func:`~.dated.read_dated`'s, at positions ``rows`` of the portfolio) with their coupon and
    principal schedules resolved (:func:`resolve`) and their accrued interest at settlement under them, and
    the problems of the rows whose schedules do not fit their coupons."""
    usable = (dated.settlement != NO_DATE) & (dated.redemption_day > dated.settlement)
    resolved, problems = resolve(payments, dated.terms, dated.live, usable, rows, where)
    accrued = settled_accrued(resolved, dated.terms, dated.accrued)
    return dataclasses.replace(dated, payments=resolved, accrued=accrued), problems
