"""The portfolio schema, its defaults and every validation rule of a portfolio row.

A portfolio is a table with one row per instrument. :func:`prepare` turns any such table into the
canonical, typed columns the engines read, lists every rule each row breaks and computes each row's tree
geometry once; :meth:`Prepared.instruments` hands the valid rows, with their geometry, to the engines.
Times are in years, rates are decimals (0.05 = 5 %), prices are in the units of ``face``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..curves import ZeroCurve
from ..errors import Problem
from .events import EXERCISE_CODES
from .geometry import TreeGeometry, tree_geometry

INSTRUMENTS = ("bond_option", "callable_bond", "puttable_bond")
OPTION_TYPES = ("call", "put")
EXERCISES = tuple(EXERCISE_CODES)
IMPLIED_OPTION_TYPE = {"callable_bond": "call", "puttable_bond": "put"}


@dataclass(frozen=True)
class Limits:
    """Guards against trees too large to price: widest and tallest tree accepted."""

    max_width: int = 32769
    max_height: int = 200_000


# name -> default (None: required). Numeric columns with their lower bound and whether it is strict.
FLOAT_COLUMNS = {
    "strike": (None, 0.0, False),
    "expiry": (None, 0.0, True),
    "first_exercise": (0.0, 0.0, False),
    "maturity": (None, 0.0, True),
    "coupon": (0.0, 0.0, False),
    "face": (100.0, 0.0, True),
    "mean_reversion": (None, 0.0, True),
    "volatility": (None, 0.0, True),
    "quantity": (1.0, None, False),
}
INT_COLUMNS = {
    "exercise_frequency": (1, 1),
    "coupon_frequency": (0, 0),
    "steps_per_year": (12, 1),
}
ENUM_COLUMNS = {
    "instrument": ("bond_option", INSTRUMENTS),
    "option_type": (None, OPTION_TYPES),
    "exercise": ("european", EXERCISES),
}
PORTFOLIO_COLUMNS = ("id", "instrument", "option_type", "exercise", "strike", "expiry", "first_exercise",
                     "exercise_frequency", "maturity", "coupon", "coupon_frequency", "face",
                     "mean_reversion", "volatility", "steps_per_year", "curve", "quantity")


class _Checker:
    """Collects problems for rows flagged by boolean masks, naming row number and id."""

    def __init__(self, ids: pd.Series, first_row: int = 0):
        self.ids = ids
        self.first_row = first_row
        self.problems: list[Problem] = []
        self.invalid = np.zeros(len(ids), dtype=bool)

    def flag(self, mask: np.ndarray, column: str, rule: str) -> None:
        mask = np.asarray(mask, dtype=bool)
        self.invalid |= mask
        ids = self.ids.to_numpy()
        for pos in np.flatnonzero(mask):
            label = _id_label(ids[pos])
            self.problems.append(Problem(int(pos), f"row {self.first_row + pos + 1} (id {label})", column, rule))


@dataclass(frozen=True)
class Prepared:
    """A portfolio in canonical form.

    ``table`` has the columns of :data:`PORTFOLIO_COLUMNS`, typed, defaults filled (invalid cells hold
    defaults or NaN); ``valid`` marks rows that break no rule; ``problems`` lists what the others break;
    ``geometry`` is each row's tree (meaningful for valid rows only).
    """

    table: pd.DataFrame
    valid: np.ndarray
    problems: list[Problem]
    geometry: TreeGeometry

    def instruments(self) -> "Instruments":
        """The valid rows, renumbered from 0, with their geometry: what the engines price."""
        valid = self.valid
        return Instruments(self.table[valid].reset_index(drop=True), self.geometry.take(valid))


@dataclass(frozen=True)
class Instruments:
    """Canonical, valid rows (the columns of :data:`PORTFOLIO_COLUMNS`, positions 0 .. n-1) and their tree
    geometry, computed once at validation and carried to the engines and the workers."""

    table: pd.DataFrame
    geometry: TreeGeometry

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
        return Instruments(self.table.iloc[positions].reset_index(drop=True), self.geometry.take(positions))


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


def _number(raw: pd.Series | None, n: int, default, column: str, check: _Checker) -> np.ndarray:
    if raw is None:
        if default is None:
            check.flag(np.ones(n, dtype=bool), column, "is required")
        return np.full(n, np.nan if default is None else default, dtype=np.float64)
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    present = raw.notna().to_numpy()
    check.flag(present & np.isnan(values), column, "must be a number")
    check.flag(np.isinf(values), column, "must be finite")
    if default is None:
        check.flag(~present, column, "is required")
    else:
        values = np.where(present, values, default)
    return values


def prepare(portfolio: pd.DataFrame, curves: dict[str, ZeroCurve], limits: Limits = Limits(), *,
            first_row: int = 0, unique_ids: bool = True) -> Prepared:
    """Canonical columns of ``portfolio``, every rule it breaks row by row, and each row's tree geometry.

    For a slice of a larger portfolio, ``first_row`` is the position of its first row there (problems name
    rows by their number in the whole portfolio), and ``unique_ids=False`` leaves the uniqueness of ids, a
    rule of the whole, to the caller (:func:`duplicated_ids`).
    """
    n = len(portfolio)
    raw = {c: portfolio[c] if c in portfolio.columns else None for c in PORTFOLIO_COLUMNS}
    if raw["id"] is None:
        ids = pd.Series([None] * n, dtype=object)
    else:
        ids = raw["id"].reset_index(drop=True)
    check = _Checker(ids, first_row)
    check.flag(ids.isna().to_numpy(), "id", "is required")
    if unique_ids:
        check.flag(ids.duplicated(keep=False).to_numpy() & ids.notna().to_numpy(), "id", DUPLICATE_ID)

    columns: dict[str, np.ndarray] = {"id": ids.to_numpy()}
    for name, (default, choices) in ENUM_COLUMNS.items():
        columns[name] = _enum(raw[name], n, default, choices, name, check)
    for name, (default, bound, strict) in FLOAT_COLUMNS.items():
        values = _number(raw[name], n, default, name, check)
        if bound is not None:
            check.flag(values <= bound if strict else values < bound, name,
                       f"must be {'>' if strict else '>='} {bound:g}")
        columns[name] = values
    for name, (default, bound) in INT_COLUMNS.items():
        values = _number(raw[name], n, default, name, check)
        finite = np.isfinite(values)
        check.flag(finite & (values != np.floor(values)), name, "must be a whole number")
        check.flag(finite & (values < bound), name, f"must be >= {bound}")
        usable = finite & (values == np.floor(values)) & (values >= bound)
        columns[name] = np.where(usable, values, max(default, bound)).astype(np.int64)
    curve = raw["curve"]
    names = np.full(n, "default", dtype=object) if curve is None else \
        curve.astype("string").fillna("default").to_numpy(dtype=object)
    check.flag(~pd.Series(names).isin(list(curves)).to_numpy(), "curve",
               "names no curve of the curves input" + ("" if curves else " (none given)"))
    columns["curve"] = names

    # option type: required for bond options, implied (and checked) for callable and puttable bonds
    instrument, option_type = columns["instrument"], columns["option_type"]
    given = option_type != None  # noqa: E711 (element-wise)
    for kind, implied in IMPLIED_OPTION_TYPE.items():
        is_kind = instrument == kind
        check.flag(is_kind & given & (option_type != implied), "option_type",
                   f"a {kind} implies option_type {implied}")
        option_type = np.where(is_kind, implied, option_type)
    check.flag((instrument == "bond_option") & _missing(raw["option_type"], n), "option_type",
               "is required for a bond_option")
    columns["option_type"] = np.where(option_type == None, "call", option_type)  # noqa: E711

    c = columns
    with np.errstate(invalid="ignore"):
        check.flag(c["expiry"] > c["maturity"], "expiry", "must be <= maturity")
        check.flag((c["coupon"] > 0) & (c["coupon_frequency"] < 1), "coupon_frequency",
                   "must be >= 1 when coupon > 0")
        check.flag((c["exercise"] != "european") & (c["first_exercise"] > c["expiry"]), "first_exercise",
                   "must be <= expiry")
        geometry = tree_geometry(np.where(c["mean_reversion"] > 0, c["mean_reversion"], 1.0),
                                 np.where(c["volatility"] > 0, c["volatility"], 1.0),
                                 np.nan_to_num(c["maturity"]), c["steps_per_year"])
        check.flag((c["mean_reversion"] > 0) & (c["volatility"] > 0) & (geometry.width > limits.max_width),
                   "mean_reversion", f"gives a tree wider than {limits.max_width} nodes "
                                     "(raise mean_reversion or lower steps_per_year)")
        check.flag(geometry.height > limits.max_height, "maturity",
                   f"gives a tree taller than {limits.max_height} steps (lower steps_per_year)")

    table = pd.DataFrame({name: columns[name] for name in PORTFOLIO_COLUMNS})
    problems = sorted(check.problems, key=lambda p: p.position)
    return Prepared(table=table, valid=~check.invalid, problems=problems, geometry=geometry)


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
