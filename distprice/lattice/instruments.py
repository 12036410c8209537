"""The portfolio schema, its defaults and every validation rule of a portfolio row.

A portfolio is a table with one row per instrument, in one of two forms: the *time form* of the papers (times
in years from today: ``maturity``, ``expiry``, ``first_exercise``) and the *dated form* of real bonds (a row
with a ``maturity_date``: see :mod:`~.dated`); both mix in one portfolio. :func:`prepare` turns any such table
into the canonical, typed columns the engines read, lists every rule each row breaks and computes each row's
tree geometry once; :meth:`Prepared.instruments` hands the valid rows, with their geometry, to the engines.
Rates are decimals (0.05 = 5 %); time-form prices are in the units of ``face``, dated prices in % of face.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..curves import ZeroCurve, builtin_curves
from ..dates import NO_DATE, parse_dates
from ..errors import Problem
from .dated import DatedRows, ExerciseSchedule, read_dated
from .events import EXERCISE_CODES
from .geometry import TreeGeometry, tree_geometry

INSTRUMENTS = ("bond_option", "callable_bond", "puttable_bond", "bond")
OPTION_TYPES = ("call", "put")
EXERCISES = tuple(EXERCISE_CODES)
IMPLIED_OPTION_TYPE = {"callable_bond": "call", "puttable_bond": "put"}
OPTION_COLUMNS = ("option_type", "strike", "expiry", "first_exercise", "exercise_frequency", "expiry_date",
                  "first_exercise_date")
"""Columns of an option; a plain ``bond`` leaves them empty."""
TIME_COLUMNS = ("maturity", "expiry", "first_exercise", "exercise_frequency")
"""Columns of time-form rows only."""
DATE_COLUMNS = ("expiry_date", "first_exercise_date")
"""Columns of dated rows only (besides their bond terms, read by :mod:`distprice.dates`)."""


@dataclass(frozen=True)
class Limits:
    """Guards against work too large to price: the widest and tallest tree and the most events (coupons and
    exercise dates) of a row, and the node-steps of a whole job (every scenario)."""

    max_width: int = 32769
    max_height: int = 200_000
    max_events: int = 100_000
    max_node_steps: float = 1e15


# name -> default (None: required where the row needs it). Numeric columns with their lower bound, whether it
# is strict, and their upper bound (beyond it the tree's values would leave the float range).
FLOAT_COLUMNS = {
    "strike": (None, 0.0, False, 1e12),
    "expiry": (None, 0.0, True, 1000.0),
    "first_exercise": (0.0, 0.0, False, 1000.0),
    "maturity": (None, 0.0, True, 1000.0),
    "coupon": (0.0, 0.0, False, 10.0),
    "face": (100.0, 0.0, True, 1e12),
    "mean_reversion": (None, 0.0, True, 100.0),
    "volatility": (None, 0.0, True, 5.0),
    "quantity": (1.0, None, False, 1e15),
}
INT_COLUMNS = {
    "exercise_frequency": (1, 1, 366),
    "coupon_frequency": (0, 0, 366),
    "steps_per_year": (12, 1, 36_500),
}
MAX_RATE_YEARS = 600.0
"""The most ``|zero rate| * years`` a row's curve may reach by its last step: beyond ~700, discount factors
leave the float range."""
ENUM_COLUMNS = {
    "instrument": ("bond_option", INSTRUMENTS),
    "option_type": (None, OPTION_TYPES),
    "exercise": ("european", EXERCISES),
}
PORTFOLIO_COLUMNS = ("id", "instrument", "option_type", "exercise", "strike", "expiry", "first_exercise",
                     "exercise_frequency", "maturity", "coupon", "coupon_frequency", "face",
                     "mean_reversion", "volatility", "steps_per_year", "curve", "quantity", "valuation")
"""The canonical columns; a dated row holds its redemption time (years of its tree) in ``maturity``;
``valuation`` is the day number of the row's valuation date (``NO_DATE`` for a time-form row priced without
one)."""


class _Checker:
    """Collects problems for rows flagged by boolean masks, naming row number and id."""

    def __init__(self, ids: np.ndarray, first_row: int = 0):
        self.ids = ids
        self.first_row = first_row
        self.problems: list[Problem] = []
        self.invalid = np.zeros(len(ids), dtype=bool)

    def where(self, position: int) -> str:
        return f"row {self.first_row + position + 1} (id {_id_label(self.ids[position])})"

    def flag(self, mask: np.ndarray, column: str, rule: str) -> None:
        mask = np.asarray(mask, dtype=bool)
        self.invalid |= mask
        for pos in np.flatnonzero(mask):
            self.problems.append(Problem(int(pos), self.where(pos), column, rule))

    def add(self, problems: list[Problem]) -> None:
        """Problems found elsewhere, unless this checker named the same row and column already."""
        seen = {(p.position, p.column) for p in self.problems}
        for p in problems:
            if (p.position, p.column) not in seen:
                self.problems.append(p)
                self.invalid[p.position] = True


@dataclass(frozen=True)
class Prepared:
    """A portfolio in canonical form.

    ``table`` has the columns of :data:`PORTFOLIO_COLUMNS`, typed, defaults filled (invalid cells hold
    defaults or NaN); ``valid`` marks rows that break no rule; ``problems`` lists what the others break;
    ``geometry`` is each row's tree (meaningful for valid rows only); ``dated`` the dated terms of every row
    (None when no row is dated) and ``is_dated`` which rows are dated.
    """

    table: pd.DataFrame
    valid: np.ndarray
    problems: list[Problem]
    geometry: TreeGeometry
    is_dated: np.ndarray
    dated: DatedRows | None = None

    def instruments(self) -> "Instruments":
        """The valid rows, renumbered from 0, with their geometry: what the engines price."""
        return Instruments(self.table, self.geometry, self.is_dated, self.dated).take(np.flatnonzero(self.valid))


@dataclass(frozen=True)
class Instruments:
    """Canonical, valid rows (the columns of :data:`PORTFOLIO_COLUMNS`, positions 0 .. n-1), their tree
    geometry and their dated terms (``dated``, aligned with the rows, None when no row is dated), computed once
    at validation and carried to the engines and the workers."""

    table: pd.DataFrame
    geometry: TreeGeometry
    is_dated: np.ndarray
    dated: DatedRows | None = None

    def __len__(self) -> int:
        return len(self.table)

    @property
    def node_steps(self) -> float:
        """Node-steps of pricing every row once (forward and backward passes, full rectangles)."""
        return float(self.geometry.node_steps.sum())

    def take(self, positions) -> "Instruments":
        """The rows at ``positions`` (an index array), renumbered from 0; all rows in order: these, no copy."""
        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) == len(self) and np.array_equal(positions, np.arange(len(self))):
            return self
        is_dated = self.is_dated[positions]
        return Instruments(self.table.iloc[positions].reset_index(drop=True), self.geometry.take(positions),
                           is_dated, self.dated.take(positions) if self.dated is not None and is_dated.any() else None)


def _enum(raw: pd.Series | None, n: int, default, choices, column: str, check: _Checker) -> np.ndarray:
    if raw is None:
        return np.full(n, default, dtype=object)
    text = raw.astype("string").str.strip().str.lower()
    present = text.notna().to_numpy()
    known = text.isin(choices).to_numpy()
    check.flag(present & ~known, column, f"must be one of {', '.join(choices)}")
    values = text.to_numpy(dtype=object, na_value=None)
    values[~known] = default
    return values


def _number(raw: pd.Series | None, n: int, default, column: str, check: _Checker, required) -> np.ndarray:
    """A numeric column (NaN where missing without a default); ``required`` marks the rows that need a
    value when the column has no default."""
    if raw is None:
        if default is None:
            check.flag(required, column, "is required")
        return np.full(n, np.nan if default is None else default, dtype=np.float64)
    present = raw.notna().to_numpy()
    if pd.api.types.is_bool_dtype(raw.dtype):
        check.flag(present, column, "must be a number, not true or false")
        return np.full(n, np.nan if default is None else default, dtype=np.float64)
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    check.flag(present & np.isnan(values), column, "must be a number")
    check.flag(np.isinf(values), column, "must be finite")
    if default is None:
        check.flag(required & ~present, column, "is required")
    else:
        values = np.where(present, values, default)
    return values


def prepare(portfolio: pd.DataFrame, curves: dict[str, ZeroCurve], limits: Limits = Limits(), *,
            as_of: int = NO_DATE, exercise_schedule: ExerciseSchedule | None = None, curve_sets=None,
            models: pd.DataFrame | None = None, first_row: int = 0, unique_ids: bool = True) -> Prepared:
    """Canonical columns of ``portfolio``, every rule it breaks row by row, and each row's tree geometry.

    ``as_of`` is the valuation date of dated rows without a ``valuation_date`` (a day number), and
    ``exercise_schedule`` the exercise dates given by table, aligned with the portfolio's rows (see
    :func:`~.dated.read_exercise_schedule`); ``curve_sets`` the market scenarios the rows will be priced under
    (their zero rates are bounded too); ``models`` a model table (``model, mean_reversion, volatility[, curve]``,
    as Hull-White calibration writes it) from which rows naming a ``model`` take their a and sigma (and their
    curve, when they name none). For a slice of a larger portfolio, ``first_row`` is the position
    of its first row there (problems name rows by their number in the whole portfolio), and
    ``unique_ids=False`` leaves the uniqueness of ids, a rule of the whole, to the caller
    (:func:`duplicated_ids`).
    """
    n = len(portfolio)
    raw = {c: portfolio[c] if c in portfolio.columns else None for c in
           (*PORTFOLIO_COLUMNS, *DATE_COLUMNS, "maturity_date")}
    ids = np.full(n, None, dtype=object) if raw["id"] is None else raw["id"].to_numpy(dtype=object)
    check = _Checker(ids, first_row)
    if models is not None and "model" in portfolio.columns:
        _join_models(raw, portfolio["model"], models, check)
    id_missing = pd.isna(ids)
    check.flag(id_missing, "id", "is required")
    if unique_ids:
        check.flag(pd.Series(ids).duplicated(keep=False).to_numpy() & ~id_missing, "id", DUPLICATE_ID)
    is_dated = np.zeros(n, dtype=bool) if raw["maturity_date"] is None else \
        parse_dates(raw["maturity_date"])[0] != NO_DATE
    present = {c: np.zeros(n, bool) if raw[c] is None else raw[c].notna().to_numpy()
               for c in (*OPTION_COLUMNS, *TIME_COLUMNS)}

    columns: dict[str, np.ndarray] = {"id": ids}
    for name, (default, choices) in ENUM_COLUMNS.items():
        columns[name] = _enum(raw[name], n, default, choices, name, check)
    instrument = columns["instrument"]
    has_option = instrument != "bond"
    required = {"strike": has_option & ~is_dated, "expiry": has_option & ~is_dated, "maturity": ~is_dated}
    for name, (default, bound, strict, top) in FLOAT_COLUMNS.items():
        values = _number(raw[name], n, default, name, check, required.get(name, np.ones(n, bool)))
        if bound is not None:
            check.flag(values <= bound if strict else values < bound, name,
                       f"must be {'>' if strict else '>='} {bound:g}")
        check.flag(np.abs(values) > top, name, f"must be at most {top:g}" if bound is not None else
                   f"must be between {-top:g} and {top:g}")
        columns[name] = values
    for name, (default, bound, top) in INT_COLUMNS.items():
        values = _number(raw[name], n, default, name, check, np.ones(n, bool))
        finite = np.isfinite(values)
        check.flag(finite & (values != np.floor(values)), name, "must be a whole number")
        check.flag(finite & (values < bound), name, f"must be >= {bound}")
        check.flag(finite & (values > top), name, f"must be at most {top}")
        usable = finite & (values == np.floor(values)) & (values >= bound) & (values <= top)
        columns[name] = np.where(usable, values, max(default, bound)).astype(np.int64)
    curve = raw["curve"]
    names = np.full(n, "default", dtype=object) if curve is None else \
        curve.astype("string").fillna("default").to_numpy(dtype=object)
    known_curve = pd.Series(names).isin(list(curves)).to_numpy()
    for name in pd.unique(names[~known_curve]):
        check.flag(~known_curve & (names == name), "curve", _unknown_curve(name, curves, given=curve is not None))
    columns["curve"] = names

    # option type: required for bond options, implied (and checked) for callable and puttable bonds
    option_type = columns["option_type"]
    given = option_type != None  # noqa: E711 (element-wise)
    for kind, implied in IMPLIED_OPTION_TYPE.items():
        is_kind = instrument == kind
        check.flag(is_kind & given & (option_type != implied), "option_type",
                   f"a {kind} implies option_type {implied}")
        option_type = np.where(is_kind, implied, option_type)
    check.flag((instrument == "bond_option") & _missing(raw["option_type"], n), "option_type",
               "is required for a bond_option")
    columns["option_type"] = np.where(option_type == None, "call", option_type)  # noqa: E711
    for name in OPTION_COLUMNS:
        check.flag(~has_option & present[name], name, "must be empty for a bond (it has no option)")
    for name in TIME_COLUMNS:
        check.flag(is_dated & present[name], name, "is for rows in years; a row with a maturity_date gives "
                                                   + ("expiry_date" if name == "expiry" else "first_exercise_date"
                                                      if name == "first_exercise" else "dates") + " instead")
    for name in DATE_COLUMNS:
        check.flag(~is_dated & present[name], name, "is for dated rows (a row with a maturity_date)")

    c = columns
    timed = ~is_dated
    with np.errstate(invalid="ignore"):
        check.flag(timed & has_option & (c["expiry"] > c["maturity"]), "expiry", "must be <= maturity")
        check.flag(timed & (c["coupon"] > 0) & (c["coupon_frequency"] < 1), "coupon_frequency",
                   "must be >= 1 when coupon > 0")
        check.flag(timed & has_option & (c["exercise"] != "european") & (c["first_exercise"] > c["expiry"]),
                   "first_exercise", "must be <= expiry")

    dated = None
    days_per_year = np.array([curves[name].days_per_year if ok else 365 for name, ok in zip(names, known_curve)])
    if is_dated.any():
        rows = np.flatnonzero(is_dated)
        schedule = exercise_schedule if exercise_schedule is not None else ExerciseSchedule.empty(n)
        part, problems = read_dated(portfolio, rows, as_of, days_per_year[rows], schedule.take(rows),
                                    np.array([EXERCISE_CODES[e] for e in c["exercise"][rows]]), has_option[rows],
                                    c["strike"][rows], check.where)
        check.add(problems)
        dated = _aligned(n, rows, part)
        c["maturity"] = np.where(is_dated, dated.years(dated.redemption_day), c["maturity"])
    c["valuation"] = np.where(is_dated, dated.valuation, as_of) if dated is not None else np.full(n, as_of)
    _check_curve_dates(check, names, known_curve, curves, as_of, is_dated, dated)

    geometry = tree_geometry(np.where(c["mean_reversion"] > 0, c["mean_reversion"], 1.0),
                             np.where(c["volatility"] > 0, c["volatility"], 1.0),
                             np.nan_to_num(c["maturity"]), c["steps_per_year"])
    if dated is not None:
        heights = dated.steps(dated.redemption_day, c["steps_per_year"])
        geometry = TreeGeometry(geometry.dt, geometry.dr, geometry.M, geometry.jmax, geometry.width,
                                np.where(is_dated, heights, geometry.height))
    check.flag((c["mean_reversion"] > 0) & (c["volatility"] > 0) & (geometry.width > limits.max_width),
               "mean_reversion", f"gives a tree wider than {limits.max_width} nodes "
                                 "(raise mean_reversion or lower steps_per_year)")
    check.flag(geometry.height > limits.max_height, "maturity",
               f"gives a tree taller than {limits.max_height} steps (lower steps_per_year)")
    events = _event_counts(c, is_dated, dated, has_option)
    check.flag(events > limits.max_events, "exercise", f"gives more than {limits.max_events} events (coupons and "
                                                       "exercise dates): lower a frequency or shorten the window")
    _check_rates(check, names, known_curve, curve_sets or [curves], geometry)

    table = pd.DataFrame({name: columns[name] for name in PORTFOLIO_COLUMNS})
    problems = sorted(check.problems, key=lambda p: p.position)
    return Prepared(table, ~check.invalid, problems, geometry, is_dated, dated)


def _unknown_curve(name: str, curves: dict, given: bool) -> str:
    """The rule a row breaks when its curve (``default`` when the portfolio names none) is not in ``curves``."""
    rule = f"names the curve {name!r}, which is not in the curves input" if given else \
        f"names no curve, and the curves input has no curve {name!r}"
    if set(curves) <= set(builtin_curves()):
        return rule + f": no curves were given (--curves, or curves=); the built-in curve is {', '.join(curves)!r}"
    return rule + f" ({', '.join(sorted(curves))})"


def _join_models(raw: dict, model: pd.Series, models: pd.DataFrame, check: _Checker) -> None:
    """Rows naming a ``model`` take ``mean_reversion`` and ``volatility`` (and ``curve``, when they name none)
    from the model table; a row giving both a model and its own parameters, or naming an unknown model, is
    flagged."""
    names = model.astype("string").to_numpy(dtype=object, na_value=None)
    named = pd.notna(names)
    table = models.assign(model=models["model"].astype("string")).drop_duplicates("model").set_index("model")
    found = named & pd.Series(names).isin(table.index).to_numpy()
    check.flag(named & ~found, "model", "names no model of the model table")
    for column in ("mean_reversion", "volatility"):
        given = raw[column].notna().to_numpy() if raw[column] is not None else np.zeros(len(names), bool)
        check.flag(named & given, column, "give a model or mean_reversion and volatility, not both")
        values = table[column].reindex(names).to_numpy(dtype=np.float64, na_value=np.nan)
        base = raw[column].to_numpy(dtype=object) if raw[column] is not None else np.full(len(names), None)
        raw[column] = pd.Series(np.where(found & ~given, values, base), dtype=object)
    if "curve" in table.columns:
        curve = raw["curve"].to_numpy(dtype=object) if raw["curve"] is not None else np.full(len(names), None)
        model_curve = table["curve"].astype(object).reindex(names).to_numpy()
        raw["curve"] = pd.Series(np.where(found & pd.isna(curve), model_curve, curve), dtype=object)


def _event_counts(c: dict, is_dated, dated, has_option) -> np.ndarray:
    """An upper bound of each row's events: coupons over its life, and its exercise dates (bermudan: a year's
    dates times the years of the window; american: a step, or a business day, each)."""
    years = np.nan_to_num(np.clip(c["maturity"], 0, 1000))
    window = np.nan_to_num(np.clip(c["expiry"] - c["first_exercise"], 0, 1000))
    per_year = np.where(c["exercise"] == "american", c["steps_per_year"], c["exercise_frequency"])
    exercises = np.where(c["exercise"] == "european", 1, window * per_year + 1)
    if dated is not None:
        dates = dated.expiry != NO_DATE
        span = np.where(dates, (np.where(dates, dated.expiry, 0) - np.maximum(dated.first, dated.settlement)) / 365.25,
                        0.0).clip(0, 1000)
        exercises = np.where(is_dated, np.where(c["exercise"] == "european", 1, span * 366 + 1), exercises)
    return years * c["coupon_frequency"] + np.where(has_option, exercises, 0) + 1


def _check_rates(check: _Checker, names, known, curve_sets, geometry) -> None:
    """A row whose curve's zero rates (in any curve set), times the years to its last step, leave the float
    range is refused."""
    for name in pd.unique(names[known]):
        rate = max(float(np.abs(curves[name].zero_rate).max()) for curves in curve_sets)
        rows = known & (names == name)
        years = (geometry.height * geometry.dt + geometry.dt)[rows]
        top = rate * years
        check.flag(np.isin(np.arange(len(names)), np.flatnonzero(rows)[top > MAX_RATE_YEARS]), "curve",
                   f"has zero rates too large for the row's life: |rate| x years reaches more than {MAX_RATE_YEARS:g}")


def _aligned(n: int, rows: np.ndarray, part: DatedRows) -> DatedRows:
    """``part`` (the dated terms of ``rows``) spread over all n rows, the others repeating the first."""
    index = np.zeros(n, dtype=np.int64)
    index[rows] = np.arange(len(rows))
    return part.take(index)


def _check_curve_dates(check: _Checker, names, known, curves, as_of: int, is_dated, dated) -> None:
    """A curve with knots by date needs the row's valuation date: a time-form row takes the job's."""
    by_date = np.array([ok and curves[name].dates is not None for name, ok in zip(names, known)], dtype=bool)
    check.flag(by_date & ~is_dated & (as_of == NO_DATE), "curve",
               "has knots by date: give the job's valuation date (as_of) to price a row in years on it")


DUPLICATE_ID = "must be unique"


def id_hashes(ids: pd.Series) -> np.ndarray:
    """A 64-bit hash of each id (missing ids hash too): what :func:`duplicated_ids` compares across slices."""
    return pd.util.hash_pandas_object(ids.reset_index(drop=True), index=False).to_numpy()


def duplicated_ids(hashes: np.ndarray, ids_at) -> np.ndarray:
    """Positions (sorted) of the rows whose id another row also holds, from every row's :func:`id_hashes`.

    ``ids_at(positions)`` returns the ids at those positions: rows whose hashes collide are compared by
    value, so a hash collision never flags a row.
    """
    order = np.argsort(hashes, kind="stable")
    sorted_hashes = hashes[order]
    same = np.zeros(len(hashes), dtype=bool)
    same[1:] = sorted_hashes[1:] == sorted_hashes[:-1]
    same[:-1] |= same[1:].copy()
    candidates = np.sort(order[same])
    if len(candidates) == 0:
        return candidates
    ids = pd.Series(ids_at(candidates)).reset_index(drop=True)
    return candidates[(ids.duplicated(keep=False) & ids.notna()).to_numpy()]


def _id_label(value) -> str:
    """An id as a user wrote it: ``'abc'``, ``42`` (not ``np.float64(42.0)``), or ``missing``."""
    if pd.isna(value):
        return "missing"
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return repr(value)


def _missing(raw: pd.Series | None, n: int) -> np.ndarray:
    return np.ones(n, dtype=bool) if raw is None else raw.isna().to_numpy()
