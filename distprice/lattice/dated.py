"""Dated rows: real bonds with a valuation date, a schedule, day counts and calendars (:mod:`distprice.dates`),
their exercise dates, and their events in the tree's time.

A row is dated when it has a ``maturity_date``. Its tree lives in the years of its curve's day count: a date
d is ``t(d) = k / D`` with k the calendar days from the valuation date V to d and D = 365 or 360, and maps to
step ``max(1, round(t * spy))`` computed in integers, ``floor((2 k spy + D) / (2 D))``: exact. Its cash flows
are the coupons and the redemption paid after the settlement date S; its exercise dates, after S too:

- ``european``: ``expiry_date``;
- ``bermudan``: the dates of the exercise schedule table for its id (each with its price and price type),
  or, without one, every coupon payment date from ``first_exercise_date`` to ``expiry_date`` at ``strike``;
- ``american``: every business day of its calendar from ``first_exercise_date`` to ``expiry_date``.

Prices (``strike``, the table's ``price``) are in % of face, clean unless the table says ``dirty``: the
exercise amount is ``face * price / 100``, plus the accrued interest at the exercise date when clean.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, fields

import numba
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..dates import NO_DATE, BondTerms, adjust_days, parse_dates, settle
from ..dates.calendars import adjust, business_address, business_count, business_view, is_business
from ..dates.cashflows import coupon_period, first_live, payment_date
from ..dates.civil import day_before, ymd
from ..dates.csr import offsets_of
from ..dates.daycounts import accrual_anchor, accrual_fraction, thirty_anchor, thirty_fraction
from ..dates.parallel import over_rows
from ..dates.registry import THIRTY_360, THIRTY_E_360
from ..dates.schedules import schedule_date, shape
from ..dates.terms import read_terms
from ..errors import Problem
from ..tables import check_names, factorized
from .events import AMERICAN, BERMUDAN, CALL, COUPON, EUROPEAN, EXERCISE, PUT, REDEMPTION, EventTable, step_time
from .geometry import PHASES, consecutive
from .payments import Payments
from .swaptions import PAR, SWAPTION_COLUMNS, exercise_dates, fixed_leg, renamed

SCHEDULE_COLUMNS = ("id", "date", "price", "price_type", "right")
SCHEDULE_LABELS = ("price_type", "right")
"""The exercise schedule table's columns of a few distinct names, read as categories."""
NO_EXERCISE = -1
"""The exercise code of a row without an option (a plain bond): it has no exercise dates."""
PRICE_TYPES = ("clean", "dirty")
RIGHTS = ("call", "put")
"""The ``right`` of a date of a callable_puttable_bond: the issuer's call or the holder's put."""


@dataclass(frozen=True)
class ExerciseSchedule:
    """Exercise dates given by table, per portfolio row (CSR, dates increasing): ``day`` (day numbers),
    ``price`` (% of face), ``dirty`` (the price includes the accrued interest) and ``kind``, the event each
    date is (:mod:`~.events`): EXERCISE, the row's own right, or by its ``right`` CALL or PUT (a date of a
    callable_puttable_bond; one date may have both, the call first)."""

    offsets: np.ndarray
    day: np.ndarray
    price: np.ndarray
    dirty: np.ndarray
    kind: np.ndarray

    @classmethod
    def empty(cls, rows: int) -> ExerciseSchedule:
        return cls(
            np.zeros(rows + 1, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, bool), np.zeros(0, np.uint8)
        )

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    def take(self, positions) -> ExerciseSchedule:
        """The schedules of the rows at ``positions``."""
        positions = np.asarray(positions, dtype=np.int64)
        span = consecutive(positions)
        if isinstance(span, slice):
            lo, hi = self.offsets[span.start], self.offsets[span.stop]
            return ExerciseSchedule(
                self.offsets[span.start : span.stop + 1] - lo,
                self.day[lo:hi],
                self.price[lo:hi],
                self.dirty[lo:hi],
                self.kind[lo:hi],
            )
        counts = self.counts[positions]
        offsets = np.zeros(len(positions) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        index = np.repeat(self.offsets[:-1][positions] - offsets[:-1], counts) + np.arange(offsets[-1])
        return ExerciseSchedule(offsets, self.day[index], self.price[index], self.dirty[index], self.kind[index])

    def with_dates(self, positions, offsets, day, price: float) -> ExerciseSchedule:
        """These schedules with the rows at ``positions`` given the dates ``day`` instead (CSR ``offsets``, a row
        per position), each of the row's own right at ``price`` (% of face, dirty)."""
        counts = self.counts.copy()
        counts[positions] = np.diff(offsets)
        source = self.offsets[:-1].copy()
        source[positions] = len(self.day) + offsets[:-1]
        new = offsets_of(counts)
        index = np.repeat(source - new[:-1], counts) + np.arange(new[-1])
        k = len(day)
        return ExerciseSchedule(
            new,
            np.concatenate([self.day, day])[index],
            np.concatenate([self.price, np.full(k, price)])[index],
            np.concatenate([self.dirty, np.ones(k, bool)])[index],
            np.concatenate([self.kind, np.full(k, EXERCISE, np.uint8)])[index],
        )

    def rights(self) -> tuple[np.ndarray, np.ndarray]:
        """Per row: whether a date of its schedule has a ``right``, and whether one has none."""
        row = np.repeat(np.arange(len(self.counts)), self.counts)
        given = np.bincount(row, weights=self.kind != EXERCISE, minlength=len(self.counts)) > 0
        bare = np.bincount(row, weights=self.kind == EXERCISE, minlength=len(self.counts)) > 0
        return given, bare


def read_exercise_schedule(table: pd.DataFrame, ids, lines=None) -> tuple[ExerciseSchedule, list[Problem]]:
    """The exercise schedule table (``id, date, price[, price_type][, right]``) as per-row schedules of a
    portfolio whose rows have ``ids`` (matched as text), and its problems, each naming its row of the table. With
    ``lines`` (positions in ``table``: a slice of a portfolio reads the rows of its own ids,
    :func:`schedule_lines`), only those rows are read; problems still name rows of the whole table."""
    missing = [c for c in SCHEDULE_COLUMNS[:3] if c not in table.columns]
    misspelled = check_names("exercise schedule", table.columns, SCHEDULE_COLUMNS)
    if missing or misspelled:
        return ExerciseSchedule.empty(len(ids)), misspelled + [
            Problem(None, "exercise schedule", c, "must have this column") for c in missing
        ]
    if lines is not None:
        table = table.take(lines)
    n = len(table)
    keys = _as_text(table["id"])
    days, not_dates = parse_dates(table["date"])
    price = pd.to_numeric(table["price"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    price_type = _label_index(table, "price_type", PRICE_TYPES)  # missing: clean
    known, dirty = price_type != UNKNOWN, price_type == PRICE_TYPES.index("dirty")
    right = _label_index(table, "right", RIGHTS)  # missing: the row's own right
    right_known = right != UNKNOWN
    kind = np.select([right == RIGHTS.index("call"), right == RIGHTS.index("put")], [CALL, PUT], EXERCISE)
    kind = kind.astype(np.uint8)
    rows = _positions_of(_as_text(pd.Series(ids)), keys)
    found: list[tuple[np.ndarray, str, str]] = []

    def flag(mask, column, rule):
        found.append((np.flatnonzero(mask), column, rule))

    absent = keys.isna().to_numpy()
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    if not absent.any() and not len(not_dates) and _in_order(rows, days, price, known & right_known, offsets[1:]):
        np.cumsum(offsets, out=offsets)  # every line is kept as it comes: nothing to flag
        return ExerciseSchedule(offsets, days, price, dirty, kind), []
    flag(absent, "id", "is required")
    flag(~absent & np.isnan(rows), "id", "names no row of the portfolio")
    flag((days == NO_DATE) | _mask(n, not_dates), "date", "must be a date YYYY-MM-DD")
    flag(~np.isfinite(price) | (price < 0), "price", "must be a number >= 0 (% of face)")
    flag(~known, "price_type", f"must be one of {', '.join(PRICE_TYPES)}")
    flag(~right_known, "right", f"must be one of {', '.join(RIGHTS)} (or empty: the row's own right)")
    good = np.flatnonzero(~np.isnan(rows) & (days != NO_DATE) & np.isfinite(price) & (price >= 0) & known & right_known)
    row, day, rank = rows[good].astype(np.int64), days[good], kind[good]
    step_row, step_day = np.diff(row), np.diff(day)
    if ((step_row < 0) | ((step_row == 0) & (step_day <= 0))).any():  # tables usually come sorted by id, date
        order = np.lexsort((rank, day, row))  # a date with a call and a put: the call first
        good, row, day, rank = good[order], row[order], day[order], rank[order]
        step_row, step_day = np.diff(row), np.diff(day)
    same = (step_row == 0) & (step_day == 0)
    both = same & (rank[:-1] == CALL) & (rank[1:] == PUT)
    above = both & ((price[good[1:]] > price[good[:-1]]) | (dirty[good[1:]] != dirty[good[:-1]]))
    repeated = np.zeros(len(good), dtype=bool)
    repeated[1:] = (same & ~both) | above
    flag(_mask(n, good[1:][same & ~both]), "date", "is given twice for this id")
    flag(
        _mask(n, good[1:][above]),
        "price",
        "a put on the date of a call must be priced at or below the call, with the same price_type",
    )
    keep = good[~repeated]
    np.cumsum(np.bincount(row[~repeated], minlength=len(ids)), out=offsets[1:])
    schedule = ExerciseSchedule(offsets, days[keep], price[keep], dirty[keep], kind[keep])
    return schedule, _schedule_problems(keys, found, lines)


UNKNOWN = -2
""":func:`_label_index` of a value that is none of the names (-1: a missing value)."""


def _label_index(table: pd.DataFrame, column: str, names: tuple[str, ...]) -> np.ndarray:
    """Each value of a column of a few names as its position in ``names`` (matched stripped, in lower case):
    -1 where it is missing (or the table has no such column), UNKNOWN where it is none of them."""
    if column not in table.columns:
        return np.full(len(table), -1, dtype=np.int64)
    codes, labels = factorized(table[column])  # distinct values; missing: -1
    labels = pd.Series(labels, dtype="string").str.strip().str.lower()
    index = np.array([names.index(label) if label in names else UNKNOWN for label in labels] + [-1], np.int64)
    return index[codes]


@dataclass(frozen=True)
class ScheduleRuns:
    """The runs of one id in an exercise schedule table's ``id`` column (a table sorted or grouped by id has one
    per id): ``starts``, each run's first line and then the table's length, and ``keys``, each run's id."""

    starts: np.ndarray
    keys: pa.Array

    @classmethod
    def of(cls, table: pd.DataFrame) -> ScheduleRuns:
        keys = _text(_as_text(table["id"]))
        starts = _run_starts(keys)
        return cls(starts, _take_sorted(keys, starts[:-1]))

    def lines(self, ids) -> np.ndarray:
        """The positions of the lines whose id is one of ``ids`` (matched as text; a missing id takes the lines
        without one), increasing."""
        ids = _text(_as_text(pd.Series(ids))).combine_chunks()
        hit = np.flatnonzero(pc.is_in(self.keys, value_set=ids, skip_nulls=False).to_numpy(zero_copy_only=False))
        first, sizes = self.starts[hit], self.starts[hit + 1] - self.starts[hit]
        offsets = np.zeros(len(hit) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return np.repeat(first - offsets[:-1], sizes) + np.arange(offsets[-1])


def schedule_lines(table: pd.DataFrame, ids, runs: ScheduleRuns | None = None) -> np.ndarray:
    """The positions of the rows of an exercise schedule table whose id is one of ``ids`` (matched as text;
    every row of a table without an ``id`` column, whose reader reports it), found through the table's runs of
    one id (``runs``: those of ``table``, kept by a caller that reads many slices' lines)."""
    if "id" not in table.columns:
        return np.arange(len(table))
    return (runs or ScheduleRuns.of(table)).lines(ids)


def unmatched_lines(table: pd.DataFrame, matched: np.ndarray, name: str = "exercise schedule") -> list[Problem]:
    """The rule a row of an exercise schedule table (or another schedule table: ``name``) breaks when no slice of
    the portfolio holds its id (the positions of the rows the slices ``matched``)."""
    if "id" not in table.columns:
        return []
    keys = _as_text(table["id"])
    rows = np.flatnonzero(~_mask(len(table), matched))
    absent = keys.iloc[rows].isna().to_numpy()
    return _schedule_problems(
        keys, [(rows[absent], "id", "is required"), (rows[~absent], "id", "names no row of the portfolio")], table=name
    )


def _mask(n: int, positions) -> np.ndarray:
    """A boolean array of ``n`` rows, true at ``positions``."""
    mask = np.zeros(n, dtype=bool)
    mask[positions] = True
    return mask


@numba.njit(cache=True)
def _in_order(rows, days, price, known, counts) -> bool:
    """Whether every line of an exercise schedule table names a row (``rows``: positions, NaN for none), a date
    and a known price type with a price >= 0, and the lines come in order of row and date, no date twice for a
    row; meanwhile ``counts[r]`` (zeros) counts the lines of row r."""
    row, day = -1, NO_DATE
    for i in range(len(rows)):
        if np.isnan(rows[i]) or days[i] == NO_DATE or not (0.0 <= price[i] < np.inf) or not known[i]:
            return False
        r = int(rows[i])
        if r < row or (r == row and days[i] <= day):
            return False
        row, day = r, days[i]
        counts[r] += 1
    return True


def _positions_of(ids: pd.Series, keys: pd.Series) -> np.ndarray:
    """The position of the first of ``ids`` equal to each key (NaN: none; a missing key matches a missing id),
    both columns of text. Keys many against the ids are looked up in a hash of the ids. A table of keys comes
    in runs of one id (sorted or grouped by id): when the runs are fewer than the ids, only each run's first
    key is hashed, and the ids are looked up in it."""
    ids, keys = _text(ids).combine_chunks(), _text(keys)  # the keys, many, stay in the chunks they were read in
    starts = _run_starts(keys) if 16 * len(ids) >= len(keys) else None
    if starts is None or len(starts) - 1 >= len(ids):
        return _as_positions(pc.index_in(keys, value_set=ids, skip_nulls=False))
    runs = _take_sorted(keys, starts[:-1])
    same = pc.index_in(runs, value_set=runs, skip_nulls=False).to_numpy()  # each run's first equal run
    at = _as_positions(pc.index_in(ids, value_set=runs, skip_nulls=False))  # each id's first equal run
    hit = np.flatnonzero(~np.isnan(at))
    first = np.full(len(runs), np.inf)
    np.minimum.at(first, at[hit].astype(np.int64), hit.astype(np.float64))
    first[np.isinf(first)] = np.nan
    return np.repeat(first[same], np.diff(starts))


def _run_starts(keys: pa.ChunkedArray) -> np.ndarray:
    """Where each run of equal keys starts, and then the keys' length."""
    new = np.ones(len(keys), dtype=bool)
    if len(keys) > 1:
        new[1:] = pc.fill_null(pc.not_equal(keys[1:], keys[:-1]), True).to_numpy(zero_copy_only=False)
    return np.append(np.flatnonzero(new), len(keys))


def _take_sorted(chunks: pa.ChunkedArray, positions: np.ndarray) -> pa.Array:
    """The values at increasing ``positions`` of ``chunks``, as one array: taken chunk by chunk (Arrow's take
    over chunks joins them into one array first)."""
    ends = np.cumsum([len(chunk) for chunk in chunks.chunks])
    cuts = np.searchsorted(positions, ends)
    return pa.concat_arrays(
        [
            chunk.take(positions[lo:hi] - (end - len(chunk)))
            for chunk, lo, hi, end in zip(chunks.chunks, np.r_[0, cuts[:-1]], cuts, ends)
        ]
        or [pa.array([], chunks.type)]
    )


def _as_text(column: pd.Series) -> pd.Series:
    """A column as text (``astype("string")``), as it is when it holds text already (kept in Arrow)."""
    return column if isinstance(column.dtype, pd.StringDtype) else column.astype("string")


def _text(column: pd.Series) -> pa.ChunkedArray:
    """A column of text as Arrow chunks (no copy of an Arrow-backed column)."""
    array = pa.array(column.array, from_pandas=True)
    return array if isinstance(array, pa.ChunkedArray) else pa.chunked_array([array])


def _as_positions(at) -> np.ndarray:
    """Arrow positions (null: none) as floats (NaN: none)."""
    return pc.fill_null(pc.cast(at, pa.float64()), np.nan).to_numpy(zero_copy_only=False)


def _schedule_problems(keys: pd.Series, found: list, lines=None, table: str = "exercise schedule") -> list[Problem]:
    """Problems of the rows of a schedule ``table`` each rule flagged, by row, and within a row in the order of
    the rules; positions in ``keys``, which are the table's rows ``lines`` when given."""
    if not any(len(positions) for positions, _, _ in found):
        return []
    rows = np.concatenate([positions for positions, _, _ in found])
    rule = np.repeat(np.arange(len(found)), [len(positions) for positions, _, _ in found])
    order = np.argsort(rows, kind="stable")
    labels = keys.iloc[rows[order]].to_numpy(dtype=object, na_value=None)
    numbers = rows[order] if lines is None else np.asarray(lines)[rows[order]]
    return [
        Problem(
            None,
            f"{table} row {r + 1}" + (f" (id {key!r})" if key is not None else ""),
            found[k][1],
            found[k][2],
        )
        for r, k, key in zip(numbers.tolist(), rule[order].tolist(), labels)
    ]


@dataclass(frozen=True)
class DatedRows:
    """The dated terms of rows: their bonds (``terms``), ``valuation``, ``settlement``, ``expiry`` and ``first``
    (exercise) dates and ``redemption_day`` (day numbers), ``days_per_year`` (D of the row's curve), the accrued
    interest at settlement (``accrued``, face units), the exercise dates given by table (``schedule``) and, once
    the rows are validated, how many coupons are paid after settlement (``live``) and how many exercise dates
    follow it (``exercises``; 0 for a row whose exercise dates were not checked): what :func:`dated_events`
    sizes the rows' events by; and their coupon and principal schedules (``payments``, :mod:`~.payments`;
    None: none)."""

    terms: BondTerms
    valuation: np.ndarray
    settlement: np.ndarray
    expiry: np.ndarray
    first: np.ndarray
    redemption_day: np.ndarray
    days_per_year: np.ndarray
    accrued: np.ndarray
    schedule: ExerciseSchedule
    live: np.ndarray
    exercises: np.ndarray
    payments: Payments | None = None

    def __len__(self) -> int:
        return len(self.valuation)

    def take(self, positions) -> DatedRows:
        """The rows at ``positions``; all rows in order: these; consecutive rows: views."""
        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) == len(self) and np.array_equal(positions, np.arange(len(self))):
            return self
        span = consecutive(positions)
        return DatedRows(
            **{
                f.name: (
                    value[span]
                    if isinstance(value, np.ndarray)
                    else None
                    if value is None
                    else value.take(span if f.name == "terms" else positions)
                )
                for f in fields(self)
                for value in [getattr(self, f.name)]
            }
        )

    def years(self, days) -> np.ndarray:
        """``t(d) = (d - V) / D`` of each row's day (years of its tree)."""
        return (np.asarray(days) - self.valuation) / self.days_per_year


TERM_COLUMNS = (
    "issue_date",
    "maturity_date",
    "coupon",
    "coupon_frequency",
    "day_count",
    "calendar",
    "accrual_convention",
    "payment_convention",
    "end_of_month",
    "settlement_days",
    "face",
    "redemption",
    "valuation_date",
    "expiry_date",
    "first_exercise_date",
)
"""The columns a dated row's terms and dates are read from."""


def read_dated(
    frame: pd.DataFrame,
    rows: np.ndarray,
    valuation,
    days_per_year,
    schedule: ExerciseSchedule | Callable[[], ExerciseSchedule],
    exercise: np.ndarray,
    has_option: np.ndarray,
    strike: np.ndarray,
    where,
    both_rights: np.ndarray | None = None,
    swaption: np.ndarray | None = None,
) -> tuple[DatedRows, list[Problem]]:
    """The :class:`DatedRows` of the rows at positions ``rows`` of ``frame`` and every rule they break.

    ``valuation`` (the job's valuation date, a day number or ``NO_DATE``), ``days_per_year`` (D of each row's
    curve), ``schedule`` (or a function returning it, called once the terms are read and settled: the caller
    may read it meanwhile), ``exercise`` (codes), ``has_option``, ``strike`` (% of face) and ``both_rights``
    (callable_puttable_bond rows, whose dates each give a ``right``; default none) and ``swaption`` (swaption
    rows, read as their fixed legs' bonds: :mod:`~.swaptions`; default none) are aligned with ``rows``;
    problems name rows by their position in ``frame`` (``where(position)`` labels one).
    """
    n = len(rows)
    swaption = np.zeros(n, bool) if swaption is None else np.asarray(swaption, bool)
    subset = frame[[c for c in (*TERM_COLUMNS, *SWAPTION_COLUMNS) if c in frame.columns]]
    if len(rows) != len(frame):
        subset = subset.iloc[rows]
    if swaption.any():
        subset = fixed_leg(subset, swaption)
    terms, found = read_terms(subset, lambda p: where(int(rows[p])))
    problems = [
        Problem(
            int(rows[p.position]), p.where, *(renamed(p.column, p.rule) if swaption[p.position] else (p.column, p.rule))
        )
        for p in found
    ]

    def flag(mask, column, rule):
        problems.extend(Problem(int(rows[p]), where(int(rows[p])), column, rule) for p in np.flatnonzero(mask))

    unreadable = {}  # by column: the rows whose value is not a date (named once, not also as missing)

    def dates(column):
        unreadable[column] = np.zeros(n, dtype=bool)
        if column not in subset.columns:
            return np.full(n, NO_DATE, dtype=np.int64)
        days, bad = parse_dates(subset[column])
        unreadable[column][bad] = True
        flag(unreadable[column], column, "must be a date YYYY-MM-DD")
        return days

    given = dates("valuation_date")
    valuation = np.where(given != NO_DATE, given, valuation)
    flag(
        (valuation == NO_DATE) & ~unreadable["valuation_date"],
        "valuation_date",
        "is required: give the job's valuation date (as_of) or this column",
    )
    expiry, first = dates("expiry_date"), dates("first_exercise_date")
    bad_terms = np.zeros(n, bool)
    bad_terms[[p.position for p in found]] = True
    usable = ~bad_terms & (valuation != NO_DATE)
    if usable.all():  # the usual case: no copy of the terms, no scatter of the results
        part = settle(terms, valuation)
        settlement, redemption_day, accrued_s, live = part.settlement, part.redemption_date, part.accrued, part.live
    else:
        good = np.flatnonzero(usable)
        settlement, redemption_day = np.full(n, NO_DATE, np.int64), np.full(n, NO_DATE, np.int64)
        accrued_s, live = np.zeros(n), np.zeros(n, np.int64)
        part = settle(terms.take(good), valuation[good])
        settlement[good], redemption_day[good], accrued_s[good], live[good] = (
            part.settlement,
            part.redemption_date,
            part.accrued,
            part.live,
        )
    if swaption.any():  # a swaption is valued and settled at its valuation date
        settlement = np.where(swaption, valuation, settlement)
    matured = usable & (redemption_day <= settlement)
    schedule = schedule() if callable(schedule) else schedule
    if swaption.any():
        flag(
            swaption & (expiry == NO_DATE) & ~unreadable["expiry_date"],
            "expiry_date",
            "is required (the last exercise date)",
        )
        schedule, exercise = _swaption_dates(
            terms, schedule, swaption & usable & ~matured, valuation, expiry, first, exercise, flag
        )
    flag(matured, "maturity_date", "is redeemed on or before the settlement date: nothing is left to price")
    dated = DatedRows(
        terms,
        valuation,
        settlement,
        expiry,
        first,
        redemption_day,
        np.asarray(days_per_year, np.int64),
        accrued_s,
        schedule,
        live,
        np.zeros(n, np.int64),
    )

    option = has_option & usable & ~matured
    tabled = schedule.counts > 0
    both = np.zeros(n, bool) if both_rights is None else np.asarray(both_rights, bool)
    given, bare = schedule.rights()
    flag(
        ~both & given,
        "right",
        "the exercise schedule gives a right (call or put) on a date of this row: only a callable_puttable_bond's "
        "dates have one (a callable or puttable bond's right is its instrument's, a bond option's its option_type)",
    )
    flag(
        both & bare,
        "right",
        "the exercise schedule has a date of this callable_puttable_bond without a right: give call or put",
    )
    flag(
        both & ~tabled,
        "exercise",
        "a callable_puttable_bond needs its dates in the exercise schedule table, each with a right (call or put)",
    )
    flag(
        both & (exercise != BERMUDAN),
        "exercise",
        "must be bermudan for a callable_puttable_bond (its dates are those of the exercise schedule)",
    )
    option &= ~(both & (~tabled | bare | (exercise != BERMUDAN))) & ~(swaption & ~tabled)
    by_table = option & (exercise == BERMUDAN) & tabled
    by_dates = option & ~by_table
    last_date = np.minimum(adjust_days(terms.calendar, terms.maturity, terms.accrual_convention), redemption_day)
    flag(
        by_dates & (expiry == NO_DATE) & ~unreadable["expiry_date"],
        "expiry_date",
        "is required (the last exercise date)",
    )
    flag(
        by_dates & (expiry != NO_DATE) & (expiry > last_date), "expiry_date", "must be on or before the redemption date"
    )
    flag(
        by_dates & (exercise != EUROPEAN) & (first != NO_DATE) & (expiry != NO_DATE) & (first > expiry),
        "first_exercise_date",
        "must be on or before expiry_date",
    )
    flag(by_dates & np.isnan(strike), "strike", "is required (a price in % of face)")
    last_tabled = np.full(n, NO_DATE, np.int64)
    last_tabled[tabled] = schedule.day[schedule.offsets[1:][tabled] - 1]
    flag(by_table & (last_tabled > last_date), "exercise", "the exercise schedule has a date after the redemption date")
    checked = (by_table & (last_tabled <= last_date)) | (
        by_dates
        & (expiry != NO_DATE)
        & (expiry <= last_date)
        & ~np.isnan(strike)
        & ~((exercise != EUROPEAN) & (first != NO_DATE) & (first > expiry))
    )
    exercises = exercise_counts(dated, np.where(checked, exercise, NO_EXERCISE)) if checked.any() else dated.exercises
    flag(checked & (exercises == 0), "exercise", "leaves no exercise date after the settlement date")
    problems.sort(key=lambda p: p.position)
    return dataclasses.replace(dated, exercises=exercises), problems


def _swaption_dates(terms: BondTerms, schedule: ExerciseSchedule, swaption, valuation, expiry, first, exercise, flag):
    """The exercise schedule with the dates of the ``swaption`` rows (settled ones) given, each at par dirty
    (:func:`~.swaptions.exercise_dates`), and the exercise codes with theirs bermudan (a european swaption's:
    its one date); flags a swaption given dates by table, and one left without a date."""
    flag(
        swaption & (schedule.counts > 0),
        "exercise",
        "the exercise schedule table gives dates to a swaption: its exercise dates are the start dates of its fixed "
        "coupon periods, from first_exercise_date to expiry_date",
    )
    european = exercise == EUROPEAN
    late = ~european & (first != NO_DATE) & (first > expiry)
    flag(swaption & (expiry != NO_DATE) & late, "first_exercise_date", "must be on or before expiry_date")
    rows = np.flatnonzero(swaption & (schedule.counts == 0) & (expiry != NO_DATE) & ~late & (exercise != AMERICAN))
    offsets, day, on_start = exercise_dates(
        terms.take(rows), valuation[rows], first[rows], expiry[rows], european[rows]
    )
    off = european[rows] & ~on_start
    flag(
        np.isin(np.arange(len(swaption)), rows[off]),
        "expiry_date",
        "must be the start date of a fixed coupon period (start_date or a fixed coupon's date) for a european swaption",
    )
    flag(
        np.isin(np.arange(len(swaption)), rows[~off & (np.diff(offsets) == 0)]),
        "exercise",
        "leaves no exercise date: no start date of a fixed coupon period lies after the valuation date from "
        "first_exercise_date to expiry_date",
    )
    return schedule.with_dates(rows, offsets, day, PAR), np.where(swaption, BERMUDAN, exercise)


NONE_DAY = -(2**62)
"""A day before every date: the end of a row's walk back through its exercise dates or coupons."""


@numba.njit(cache=True)
def _previous_exercise(
    r,
    code,
    tabled,
    expiry,
    start,
    settlement,
    cursor,
    schedule_offsets,
    schedule_day,
    business,
    calendar,
    row,
    issue,
    accrual,
    payment,
    first,
):
    """Row r's latest exercise date before ``cursor`` (where the walk back stands: a day for american rows, a
    position in the exercise schedule or a coupon's number for bermudan ones, 1 before a european row's date) as
    ``(day, cursor)``; day NONE_DAY once none is left. A row given by table is exercised at the schedule's
    price at the cursor, the others at their strike. ``row`` is the row's schedule :data:`Shape`, ``first``
    the number of its first live coupon, ``accrual`` and ``payment`` its conventions."""
    if code == EUROPEAN:
        if cursor == 1 and expiry > settlement:
            return expiry, 0
    elif code == BERMUDAN and tabled:
        i = cursor - 1
        if i >= schedule_offsets[r] and schedule_day[i] > settlement:
            return schedule_day[i], i
    elif code == BERMUDAN:
        i = cursor - 1
        while i >= first:
            paid = payment_date(business, row, i, issue, calendar, accrual, payment)
            if paid <= expiry:
                if paid >= start:
                    return paid, i
                break
            i -= 1
    elif code != NO_EXERCISE:
        d = cursor - 1
        while d >= start and not is_business(business, calendar, d):
            d -= 1
        if d >= start:
            return d, d
    return NONE_DAY, cursor


@numba.njit(cache=True, inline="always")
def _exercise_cursor(r, code, tabled, expiry, schedule_offsets, row):
    """Where row r's walk back through its exercise dates starts (see :func:`_previous_exercise`)."""
    if code == EUROPEAN:
        return 1
    if code == BERMUDAN and tabled:
        return schedule_offsets[r + 1]
    if code == BERMUDAN:
        return row.periods + 1
    return expiry + 1


@numba.njit(cache=True, nogil=True)
def _exercise_walk(
    lo,
    hi,
    code,
    tabled,
    expiry,
    start,
    settlement,
    schedule_offsets,
    schedule_day,
    address,
    issue,
    maturity,
    coupon,
    frequency,
    calendar,
    accrual,
    payment,
    end_of_month,
    live,
    valuation,
    days_per_year,
    spy,
    counts,
    phase,
):
    """Rows ``lo .. hi``'s exercise dates after settlement (:func:`_previous_exercise`'s walk): with ``spy[r]``
    0, how many into ``counts`` (an american row's business days counted in its calendar's bits; a bermudan row's
    coupons paid from its start to its expiry found by two binary searches, the payment dates increasing); else
    the tree's phase their places give (:func:`exercise_phases`) into ``phase``."""
    business = business_view(address)
    for r in range(lo, hi):
        if code[r] == NO_EXERCISE:
            continue
        wants_phase = spy[r] > 0
        if code[r] == AMERICAN and not wants_phase:  # every business day from start to expiry
            counts[r] = business_count(business, calendar[r], start[r], expiry[r])
            continue
        # only a bermudan row without a table walks its coupons: the others take the shape of no coupons
        on_coupons = code[r] == BERMUDAN and not tabled[r]
        row = shape(
            business,
            issue[r],
            maturity[r],
            coupon[r] if on_coupons else 0.0,
            frequency[r],
            calendar[r],
            accrual[r],
            end_of_month[r],
        )
        first = row.periods + 1 - live[r]
        if on_coupons and not wants_phase:  # the live coupons i with start <= payment(i) <= expiry
            lo = first_live(business, row, issue[r], calendar[r], accrual[r], payment[r], start[r] - 1)
            hi = first_live(business, row, issue[r], calendar[r], accrual[r], payment[r], expiry[r])
            counts[r] = max(hi - max(lo, first), 0)
            continue
        cursor = _exercise_cursor(r, code[r], tabled[r], expiry[r], schedule_offsets, row)
        D = days_per_year[r]
        cos_sum = sin_sum = 0.0
        while True:
            day, cursor = _previous_exercise(
                r,
                code[r],
                tabled[r],
                expiry[r],
                start[r],
                settlement[r],
                cursor,
                schedule_offsets,
                schedule_day,
                business,
                calendar[r],
                row,
                issue[r],
                accrual[r],
                payment[r],
                first,
            )
            if day == NONE_DAY:
                break
            counts[r] += 1
            if wants_phase:  # a date t years away weighs exp(-t)
                angle = 2.0 * np.pi * (((day - valuation[r]) * spy[r]) % D) / D
                weight = np.exp(-(day - valuation[r]) / D)
                cos_sum += weight * np.cos(angle)
                sin_sum += weight * np.sin(angle)
                if code[r] == AMERICAN:  # every business day: its expiry's place alone
                    break
        if wants_phase and abs(cos_sum) + abs(sin_sum) >= 1e-9:
            q = int(np.round(PHASES * np.arctan2(sin_sum, cos_sum) / (2.0 * np.pi))) % PHASES
            phase[r] = q - PHASES if q >= PHASES // 2 else q


def _exercise_inputs(rows: DatedRows, exercise: np.ndarray):
    """The exercise walk's per-row arguments (:func:`_exercise_walk`'s first eight after ``lo, hi``)."""
    start = np.maximum(np.where(rows.first == NO_DATE, rows.settlement + 1, rows.first), rows.settlement + 1)
    schedule = rows.schedule
    return (
        np.ascontiguousarray(exercise, np.int64),
        schedule.counts > 0,
        rows.expiry,
        start,
        rows.settlement,
        schedule.offsets,
        schedule.day,
        business_address(),
    )


def _schedule_inputs(rows: DatedRows):
    """The columns that fix each row's live coupons (:func:`_exercise_walk`'s nine after the first eight)."""
    terms = rows.terms
    return (
        terms.issue,
        terms.maturity,
        terms.coupon,
        terms.frequency,
        terms.calendar,
        terms.accrual_convention,
        terms.payment_convention,
        terms.end_of_month,
        rows.live,
    )


def exercise_counts(rows: DatedRows, exercise: np.ndarray) -> np.ndarray:
    """How many exercise dates after settlement each row has (``exercise`` codes; NO_EXERCISE: none)."""
    counts, no_phase = np.zeros(len(exercise), np.int64), np.zeros(len(exercise), np.int64)
    inputs = (*_exercise_inputs(rows, exercise), *_schedule_inputs(rows), rows.valuation, rows.days_per_year)
    over_rows(_exercise_walk, len(exercise), *inputs, no_phase, counts, no_phase)  # steps a year 0: counts only
    return counts


def exercise_phases(rows: DatedRows, exercise: np.ndarray, steps_per_year: np.ndarray) -> np.ndarray:
    """The phase of each row's tree (sixteenths of a step, -8 .. 7; :mod:`~.geometry`) that brings its exercise
    dates nearest to nodes: the circular mean of their places within a step, ``k spy / D mod 1`` for a date k
    days after the valuation date, each weighted by ``exp(-k / D)`` (the nearer dates, which decide more of an
    option's value, weigh more), rounded to sixteenths; an american row's, its expiry's place alone (its dates
    are every business day). 0 for rows without checked exercise dates (``rows.exercises``) and those whose dates
    spread evenly over a step."""
    wanted = (rows.exercises > 0) & (exercise != NO_EXERCISE)
    phase = np.zeros(len(exercise), np.int64)
    if wanted.any():
        codes = np.where(wanted, exercise, NO_EXERCISE)
        spy = np.ascontiguousarray(steps_per_year, np.int64)
        inputs = (*_exercise_inputs(rows, codes), *_schedule_inputs(rows), rows.valuation, rows.days_per_year)
        over_rows(_exercise_walk, len(codes), *inputs, spy, np.zeros(len(codes), np.int64), phase)
    return phase


@numba.njit(cache=True, inline="always")
def _step_of(k, spy, D, q):
    """The step of a day k days after the valuation date on a tree of phase q, ``max(1, round_half_up(u / (16
    D)))`` with ``u = 16 k spy - q D`` (the day's place in sixteenths of a step past the phase), and whether the
    day lies on a step s >= 1."""
    u = PHASES * k * spy - q * D
    return max((2 * u + PHASES * D) // (2 * PHASES * D), 1), u > 0 and u % (PHASES * D) == 0


@numba.njit(cache=True, inline="always")
def _placed(k, spy, D, per_step, q):
    """The step and tree time of a day k days after the valuation date (:func:`_step_of`; on the step's grid
    the step's own time, :func:`~.events.step_time`)."""
    if D == 365:  # the day counts' D as constants: divisions by them compile to multiplications
        s, on_grid = _step_of(k, spy, 365, q)
    elif D == 360:
        s, on_grid = _step_of(k, spy, 360, q)
    else:
        s, on_grid = _step_of(k, spy, D, q)
    return s, step_time(s, per_step, q) if on_grid else k / D


@numba.njit(cache=True)
def _american_run(
    e,
    end,
    dx,
    dc,
    start,
    business,
    calendar,
    at_strike,
    accruing,
    day_count,
    anchor,
    aux,
    n0,
    nb,
    n1,
    v,
    spy,
    D,
    per_step,
    q,
    step,
    time,
    kind,
    amount,
):
    """An american row's exercises from business day ``dx`` down to the payment date ``dc`` of its next coupon
    back (or its first exercise date ``start``), into events ``e`` on (before ``end``): each at the strike plus
    the accrued interest of the coupon paid after it (``accruing`` 0: none; its period ``n0 .. n1`` on the
    reference period ``(nb, n1)``, :func:`accrual_anchor` ``(anchor, aux)``). Returns the next event and the
    next exercise day (NONE_DAY: none). On the 30/360 counts the day's year, month and day are walked back with
    it (:func:`~distprice.dates.civil.day_before`), not computed anew each day."""
    thirty = accruing != 0.0 and (day_count == THIRTY_360 or day_count == THIRTY_E_360)
    y, m, d = ymd(dx) if thirty else (0, 0, 0)
    while True:
        paid = at_strike
        if accruing != 0.0 and dx > n0:
            if thirty and dx <= n1:
                paid += accruing * thirty_fraction(day_count, anchor, aux, y, m, d)
            else:
                paid += accruing * accrual_fraction(day_count, anchor, aux, n0, min(dx, n1), nb, n1)
        kind[e], amount[e] = EXERCISE, paid
        step[e], time[e] = _placed(dx - v, spy, D, per_step, q)
        e += 1
        dx -= 1
        if thirty:
            y, m, d = day_before(y, m, d)
        while dx >= start and not is_business(business, calendar, dx):
            dx -= 1
            if thirty:
                y, m, d = day_before(y, m, d)
        if dx < start:
            dx = NONE_DAY
        if dx == NONE_DAY or dx < dc or e == end:
            return e, dx


@numba.njit(cache=True, inline="always")
def _coupon_terms(i, periods, first, k, face, accruing, p_accruing, p_outstanding, p_left):
    """Coupon i's amount per year fraction and the face it accrues on (i > periods: none, on the face left at
    maturity); ``k``: where the row's live coupons start in the arrays of its coupon and principal schedules
    (:mod:`~.payments`; -1 for a row without: its own coupon, ``accruing``, on its ``face``)."""
    if i > periods:
        return 0.0, face if k < 0 else p_left
    if k < 0:
        return accruing, face
    return p_accruing[k + i - first], p_outstanding[k + i - first]


@numba.njit(cache=True, nogil=True)
def _merge(
    lo,
    hi,
    offsets,
    valuation,
    days_per_year,
    spy,
    phase,
    redemption_day,
    redemption_amount,
    strike,
    s_price,
    s_dirty,
    s_kind,
    day_count,
    face,
    code,
    tabled,
    expiry,
    start,
    settlement,
    s_off,
    s_day,
    address,
    issue,
    maturity,
    coupon,
    frequency,
    calendar,
    accrual,
    payment,
    end_of_month,
    live,
    p_off,
    p_accruing,
    p_outstanding,
    p_repaid,
    p_left,
    step,
    time,
    kind,
    amount,
):
    """The events of rows ``lo .. hi``, each row's into its slice ``offsets[r] .. offsets[r + 1]`` of ``step``,
    ``time``, ``kind`` and ``amount``, latest first (redemption, exercises, coupons at equal days), with their
    steps and tree times. The live coupons are made from the row's schedule as they are merged
    (:func:`coupon_period`), and its exercise dates walked back (:func:`_previous_exercise`), each amount
    ``face * price / 100`` plus, for a clean price, the accrued interest at its date, each of the kind its
    schedule gives (EXERCISE, or a callable_puttable_bond's CALL or PUT). A row with coupon or principal
    schedules (``p_*``: CSR of its live coupons, :class:`~.payments.Payments`) pays each coupon on the face
    outstanding at its rate, with the principal repaid that day, and is exercised at % of the face outstanding."""
    business = business_view(address)
    for r in range(lo, hi):
        row = shape(business, issue[r], maturity[r], coupon[r], frequency[r], calendar[r], accrual[r], end_of_month[r])
        first = row.periods + 1 - live[r]
        cursor = _exercise_cursor(r, code[r], tabled[r], expiry[r], s_off, row)
        dx, walk = NONE_DAY, True  # walk: the next exercise date is wanted
        by_table = code[r] == BERMUDAN and tabled[r]
        redeemed = False
        # the row's constants, read once: the compiler cannot keep them across the stores below
        D, sp, q, v, dc_r = days_per_year[r], spy[r], phase[r], valuation[r], day_count[r]
        per_step, face_r, accruing, strike_r = 1.0 / sp, face[r], face[r] * coupon[r], strike[r]
        k = p_off[r] if p_off[r + 1] > p_off[r] else -1  # the row's live coupons in the schedules' arrays
        # coupon i, the latest not merged yet (paid on dc; NONE_DAY once i < first), from d0 to d1 on the
        # reference period (b, d1); and coupon i + 1, merged last, from n0 to n1 on (nb, n1)
        # days start as np.int64(0), not a literal 0, for which numba would compile every callee once more
        i, dc = row.periods, NONE_DAY
        d0 = d1 = b = n0 = n1 = nb = np.int64(0)
        if i >= first:
            d1 = schedule_date(business, row, i, issue[r], calendar[r], accrual[r])
            d0, b = coupon_period(business, row, i, d1, issue[r], calendar[r], accrual[r], end_of_month[r])
            dc = adjust(business, calendar[r], d1, payment[r])
        period, anchor, aux = -1, np.int64(0), np.int64(0)  # the coupon whose accrual_anchor is at hand
        american = code[r] == AMERICAN
        thirty = dc_r == THIRTY_360 or dc_r == THIRTY_E_360
        y1 = m1 = a1 = np.int64(0)  # of the end of the coupon merged next, on the 30/360 counts
        e, end = offsets[r], offsets[r + 1]
        while e < end:
            if walk:
                dx, cursor = _previous_exercise(
                    r,
                    code[r],
                    tabled[r],
                    expiry[r],
                    start[r],
                    settlement[r],
                    cursor,
                    s_off,
                    s_day,
                    business,
                    calendar[r],
                    row,
                    issue[r],
                    accrual[r],
                    payment[r],
                    first,
                )
                walk = False
            if not redeemed and redemption_day[r] >= max(dc, dx):
                d, kind[e], amount[e] = redemption_day[r], REDEMPTION, redemption_amount[r]
                redeemed = True
            elif american and redeemed and dx != NONE_DAY and dx >= dc:
                # the business days down to coupon i's payment date, one after another: each an exercise at the
                # strike plus the accrued interest of coupon i + 1 at that day
                if i < row.periods and i + 1 != period:
                    period = i + 1
                    anchor, aux = accrual_anchor(dc_r, n0, nb, n1)
                after, owed = _coupon_terms(
                    i + 1, row.periods, first, k, face_r, accruing, p_accruing, p_outstanding, p_left[r]
                )
                e, dx = _american_run(
                    e,
                    end,
                    dx,
                    dc,
                    start[r],
                    business,
                    calendar[r],
                    owed * strike_r / 100.0,
                    after,
                    dc_r,
                    anchor,
                    aux,
                    n0,
                    nb,
                    n1,
                    v,
                    sp,
                    D,
                    per_step,
                    q,
                    step,
                    time,
                    kind,
                    amount,
                )
                cursor = dx + 1
                continue
            elif dx != NONE_DAY and dx >= dc:
                d, kind[e] = dx, s_kind[cursor] if by_table else EXERCISE
                after, owed = _coupon_terms(
                    i + 1, row.periods, first, k, face_r, accruing, p_accruing, p_outstanding, p_left[r]
                )
                paid = owed * (s_price[cursor] if by_table else strike_r) / 100.0
                # coupon i + 1 is the first paid after the exercise: a clean price adds its accrued interest
                if not (by_table and s_dirty[cursor]) and i < row.periods and d > n0:
                    if i + 1 != period:
                        period = i + 1
                        anchor, aux = accrual_anchor(dc_r, n0, nb, n1)
                    paid += after * accrual_fraction(dc_r, anchor, aux, n0, min(d, n1), nb, n1)
                amount[e] = paid
                walk = True
            else:
                # coupon i becomes the one merged last: its anchor serves the exercises before its end
                period = i
                if thirty:  # the start's year, month and day are those of coupon i - 1's end
                    y0, m0, a0 = ymd(d0)
                    anchor, aux = thirty_anchor(y0, m0, a0)
                    if i == row.periods:
                        y1, m1, a1 = ymd(d1)
                    fraction = thirty_fraction(dc_r, anchor, aux, y1, m1, a1)
                    y1, m1, a1 = y0, m0, a0
                else:
                    anchor, aux = accrual_anchor(dc_r, d0, b, d1)
                    fraction = accrual_fraction(dc_r, anchor, aux, d0, d1, b, d1)
                rate, _ = _coupon_terms(
                    i, row.periods, first, k, face_r, accruing, p_accruing, p_outstanding, p_left[r]
                )
                d, kind[e], amount[e] = dc, COUPON, rate * fraction + (p_repaid[k + i - first] if k >= 0 else 0.0)
                n0, n1, nb = d0, d1, b
                i -= 1
                dc = NONE_DAY
                if i >= first:  # coupon i ends where coupon i + 1 starts
                    d1 = n0
                    d0, b = coupon_period(business, row, i, d1, issue[r], calendar[r], accrual[r], end_of_month[r])
                    dc = adjust(business, calendar[r], d1, payment[r])
            step[e], time[e] = _placed(d - v, sp, D, per_step, q)
            e += 1


def dated_events(
    rows: DatedRows,
    exercise: np.ndarray,
    strike: np.ndarray,
    has_option: np.ndarray,
    steps_per_year: np.ndarray,
    phase: np.ndarray,
) -> EventTable:
    """The events of dated rows (validated: :func:`read_dated`): the redemption and the coupons paid after
    settlement, and (rows ``has_option`` whose exercise dates were checked) their exercise dates after
    settlement (see the module's notes); ``exercise`` codes, ``strike`` (% of face), ``steps_per_year`` and the
    tree's ``phase`` (:func:`exercise_phases`) per row."""
    codes = np.where(has_option & (rows.exercises > 0), exercise, NO_EXERCISE)
    offsets = offsets_of(1 + rows.live + np.where(codes == NO_EXERCISE, 0, rows.exercises))
    m = offsets[-1]
    table = EventTable(
        offsets, np.empty(m, np.int64), np.empty(m, np.float64), np.empty(m, np.uint8), np.empty(m, np.float64)
    )
    terms = rows.terms
    payments = rows.payments
    if payments is None:
        none = np.zeros(0)
        p_arrays = (np.zeros(len(codes) + 1, np.int64), none, none, none, np.zeros(len(codes)))
        redeemed = terms.face * terms.redemption / 100.0
    else:
        p_arrays = (payments.offsets, payments.accruing, payments.outstanding, payments.repaid, payments.left)
        redeemed = payments.redeemed(terms)
    over_rows(
        _merge,
        len(codes),
        offsets,
        rows.valuation,
        rows.days_per_year,
        np.ascontiguousarray(steps_per_year, np.int64),
        np.ascontiguousarray(phase, np.int64),
        rows.redemption_day,
        redeemed,
        np.nan_to_num(np.asarray(strike, np.float64)),
        rows.schedule.price,
        rows.schedule.dirty,
        rows.schedule.kind,
        terms.day_count,
        terms.face,
        *_exercise_inputs(rows, codes),
        *_schedule_inputs(rows),
        *p_arrays,
        table.step,
        table.time,
        table.kind,
        table.amount,
    )
    return table
