"""The portfolio schema, its defaults and every validation rule of a portfolio row.

A portfolio is a table with one row per instrument, in one of two forms: the *time form* of the papers (times
in years from today: ``maturity``, ``expiry``, ``first_exercise``) and the *dated form* of real bonds (a row
with a ``maturity_date``: see :mod:`~.dated`); both mix in one portfolio. :func:`prepare` turns any such table
into the canonical, typed columns the engines read, lists every rule each row breaks and computes each row's
tree geometry once; :meth:`Prepared.instruments` hands the valid rows, with their geometry, to the engines.
Rates are decimals (0.05 = 5 %); time-form prices are in the units of ``face``, dated prices in % of face.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
import pandas as pd
import pyarrow as pa

from ..curves import MAX_RATE, ZeroCurve, builtin_curves, percent_slip
from ..dates import NO_DATE, parse_dates, to_iso
from ..dates.parallel import SMALL, over_rows
from ..errors import Problem
from ..stopwatch import stage
from ..tables import STR, factorized
from .dated import NO_EXERCISE, DatedRows, ExerciseSchedule, exercise_phases, read_dated
from .events import AMERICAN, BERMUDAN, EUROPEAN, EXERCISE_CODES
from .geometry import TreeGeometry, consecutive, tree_geometry, tree_height
from .payment_tables import with_payments
from .payments import Payments
from .placement import top_steps
from .swaptions import AS_BOND_OPTION, SWAPTION, SWAPTION_TYPES, swaption_rules

INSTRUMENTS = ("bond_option", "callable_bond", "puttable_bond", "bond", "callable_puttable_bond", SWAPTION)
OPTION_TYPES = ("call", "put")
"""A row's option on its bond, as the engines read it (a swaption's is that of :data:`~.swaptions.AS_BOND_OPTION`)."""
OPTION_ALONE = ("bond_option", SWAPTION)
"""Instruments whose price is their option alone (no bond is held)."""
EXERCISES = tuple(EXERCISE_CODES)
IMPLIED_OPTION_TYPE = {"callable_bond": "call", "puttable_bond": "put"}
OPTION_COLUMNS = (
    "option_type",
    "strike",
    "expiry",
    "first_exercise",
    "exercise_frequency",
    "expiry_date",
    "first_exercise_date",
)
"""Columns of an option; a plain ``bond`` leaves them empty."""
TIME_COLUMNS = ("maturity", "expiry", "first_exercise", "exercise_frequency")
"""Columns of time-form rows only."""
DATE_COLUMNS = ("expiry_date", "first_exercise_date")
"""Columns of dated rows only (besides their bond terms, read by :mod:`distprice.dates`)."""


@dataclass(frozen=True)
class Limits:
    """Guards against rows too large to price: the widest and tallest tree and the most events (coupons and
    exercise dates) of a row. A whole job is bounded by its predicted time (``max_seconds`` of
    :class:`~distprice.job.JobOptions`)."""

    max_width: int = 32769
    max_height: int = 200_000
    max_events: int = 100_000


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
    "notional": (None, None, False, 1e15),
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
    "option_type": (None, OPTION_TYPES + SWAPTION_TYPES),
    "exercise": ("european", EXERCISES),
}
PORTFOLIO_COLUMNS = (
    "id",
    "instrument",
    "option_type",
    "exercise",
    "strike",
    "expiry",
    "first_exercise",
    "exercise_frequency",
    "maturity",
    "coupon",
    "coupon_frequency",
    "face",
    "mean_reversion",
    "volatility",
    "steps_per_year",
    "curve",
    "quantity",
    "notional",
    "valuation",
)
"""The canonical columns; a dated row holds its redemption time (years of its tree) in ``maturity``;
``valuation`` is the day number of the row's valuation date (``NO_DATE`` for a time-form row priced without
one); ``notional`` is NaN where the row gives a ``quantity`` (or neither)."""


class _Checker:
    """Collects the rows each rule flags, rule by rule, and names them only at the end (:meth:`problems`):
    the messages are built for flagged rows alone, naming the row number and its id (``ids``: the raw id column,
    None when there is none)."""

    def __init__(self, ids: pd.Series | None, n: int, first_row: int = 0):
        self.ids = ids
        self.first_row = first_row
        self.invalid = np.zeros(n, dtype=bool)
        self._found: list[tuple[np.ndarray, str, str] | list[Problem]] = []

    def id_values(self, positions: np.ndarray) -> np.ndarray:
        """The ids at ``positions``, as ``to_numpy(dtype=object)`` gives them."""
        if self.ids is None:
            return np.full(len(positions), None, dtype=object)
        return self.ids.iloc[positions].to_numpy(dtype=object)

    def where(self, position: int) -> str:
        return _where(self.first_row + position, self.id_values(np.array([position]))[0])

    def flag(self, mask: np.ndarray, column: str, rule: str) -> None:
        mask = np.asarray(mask, dtype=bool)
        if mask.any():  # the usual case, no row flagged: one pass
            self.flag_at(np.flatnonzero(mask), column, rule)

    def flag_at(self, positions: np.ndarray, column: str, rule: str) -> None:
        """:meth:`flag` of the rows at ``positions`` (increasing)."""
        if len(positions):
            self.invalid[positions] = True
            self._found.append((positions, column, rule))

    def flag_each(self, mask: np.ndarray, values: np.ndarray, column: str, rule_of) -> None:
        """:meth:`flag` of the rows of ``mask``, each with the rule ``rule_of(value)`` of its value in ``values``
        (one message per distinct value)."""
        if not mask.any():
            return
        positions = np.flatnonzero(mask)
        distinct, which = np.unique(values[positions], return_inverse=True)
        order = np.argsort(which, kind="stable")
        for value, group in zip(distinct, np.split(positions[order], np.cumsum(np.bincount(which))[:-1])):
            self.flag_at(group, column, rule_of(value))

    def add(self, problems: list[Problem]) -> None:
        """Problems found elsewhere, unless this checker named the same row and column already."""
        if not problems:
            return
        flagged = {}
        for column in {p.column for p in problems}:
            rows = [found[0] for found in self._found if not isinstance(found, list) and found[1] == column]
            rows += [
                [q.position for q in found if q.column == column] for found in self._found if isinstance(found, list)
            ]
            flagged[column] = set(np.concatenate(rows).tolist()) if rows else set()
        kept = [p for p in problems if p.position not in flagged[p.column]]
        for p in kept:
            self.invalid[p.position] = True
        self._found.append(kept)

    def problems(self) -> list[Problem]:
        """Every problem found, by row, and within a row in the order the rules were checked."""
        positions = [
            found[0] if not isinstance(found, list) else np.array([p.position for p in found], np.int64)
            for found in self._found
        ]
        if not positions:
            return []
        chunk = np.repeat(np.arange(len(positions)), [len(p) for p in positions])
        inner = np.concatenate([np.arange(len(p)) for p in positions])
        position = np.concatenate(positions)
        order = np.argsort(position, kind="stable")
        rows, first = np.unique(position, return_inverse=True)
        labels = [_where(self.first_row + int(r), value) for r, value in zip(rows, self.id_values(rows))]
        problems = []
        for k in order.tolist():
            found = self._found[chunk[k]]
            if isinstance(found, list):
                problems.append(found[inner[k]])
            else:
                problems.append(Problem(int(position[k]), labels[first[k]], found[1], found[2]))
        return problems


def _where(row: int, id_value) -> str:
    return f"row {row + 1} (id {_id_label(id_value)})"


@dataclass(frozen=True)
class Prepared:
    """A portfolio in canonical form.

    ``table`` has the columns of :data:`PORTFOLIO_COLUMNS`, typed (the labels ``instrument``, ``option_type``,
    ``exercise`` and ``curve`` as Categoricals), defaults filled (invalid cells hold defaults or NaN); ``valid``
    marks rows that break no rule; ``problems`` lists what the others break;
    ``geometry`` is each row's tree (meaningful for valid rows only); ``dated`` the dated terms of every row
    (None when no row is dated) and ``is_dated`` which rows are dated.
    """

    table: pd.DataFrame
    valid: np.ndarray
    problems: list[Problem]
    geometry: TreeGeometry
    is_dated: np.ndarray
    dated: DatedRows | None = None

    def instruments(self) -> Instruments:
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

    def take(self, positions, columns=None) -> Instruments:
        """The rows at ``positions`` (an index array), renumbered from 0; all rows in order: these, no copy;
        consecutive rows: views. ``columns``: only these columns of the table when rows are taken (those a
        reader needs: taking the text of ids it does not read costs more than the rest)."""
        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) == len(self) and np.array_equal(positions, np.arange(len(self))):
            return self
        span = consecutive(positions)
        is_dated = self.is_dated[span]
        table = self.table if columns is None else self.table[list(columns)]
        return Instruments(
            table.iloc[span].reset_index(drop=True),
            self.geometry.take(positions),
            is_dated,
            self.dated.take(positions) if self.dated is not None and is_dated.any() else None,
        )


def _given_dates(column: pd.Series) -> np.ndarray:
    """Where a date column holds a value: a date, or something else that its reader names as not a date."""
    days, bad = parse_dates(column)
    given = days != NO_DATE
    given[bad] = True
    return given


def _labels(labels, codes: np.ndarray) -> pd.Categorical:
    """A column of ``labels[codes]`` as a Categorical: its readers (the engines' layout, the priced table) take
    the codes as they are instead of hashing a million strings again."""
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(labels)))


def _enum(raw: pd.Series | None, n: int, default, choices, column: str, check: _Checker) -> np.ndarray:
    """Codes (positions in ``choices``) of an enumerated column, read without case or surrounding spaces;
    missing and unknown values take ``default`` (-1 for None), unknown ones are flagged."""
    fallback = -1 if default is None else choices.index(default)
    if raw is None:
        return np.full(n, fallback, dtype=np.int64)
    codes, labels = factorized(raw)
    normal = pd.Series(labels, dtype="string").str.strip().str.lower().fillna("")
    known = np.array([value in choices for value in normal] + [True], dtype=bool)
    index = np.array(
        [choices.index(value) if ok else fallback for value, ok in zip(normal, known)] + [fallback], dtype=np.int64
    )
    check.flag(~known[codes], column, f"must be one of {', '.join(choices)}")
    return index[codes]


def _number(
    raw: pd.Series | None, n: int, default, column: str, check: _Checker, required, present: np.ndarray | None
) -> np.ndarray:
    """A numeric column as float64 (NaN where missing without a default): the column's own values when they are
    float64 and none is missing, else a new array; ``required`` marks the rows that need a value when the column
    has no default; ``present`` is ``raw.notna()``."""
    if raw is None:
        if default is None:
            check.flag(required, column, "is required")
        return np.full(n, np.nan if default is None else default, dtype=np.float64)
    if pd.api.types.is_bool_dtype(raw.dtype):
        check.flag(present, column, "must be a number, not true or false")
        return np.full(n, np.nan if default is None else default, dtype=np.float64)
    if raw.dtype == np.float64 and present.all():  # nothing to fill in: the column as read, not a copy
        values = raw.to_numpy()
        check.flag(np.isinf(values), column, "must be finite")
        return values
    if isinstance(raw.dtype, np.dtype) and raw.dtype.kind in "fiu":
        values = raw.to_numpy(dtype=np.float64, copy=True)
    else:
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
        check.flag(present & np.isnan(values), column, "must be a number")
    infinite, missing = _fill(values, present, np.nan if default is None else default, required)
    check.flag(infinite, column, "must be finite")
    if default is None:
        check.flag(missing, column, "is required")
    return values


@numba.njit(cache=True, nogil=True)
def _fill(values, present, default, required):
    """Sets the values not ``present`` to ``default`` (in place); returns the masks of the infinite values and
    of the ``required`` ones not present."""
    infinite = np.empty(len(values), np.bool_)
    missing = np.empty(len(values), np.bool_)
    for i in range(len(values)):
        infinite[i] = np.isinf(values[i])
        missing[i] = required[i] and not present[i]
        if not present[i]:
            values[i] = default
    return infinite, missing


@numba.njit(cache=True, nogil=True)
def _outside(values, bound, strict, top):
    """The values below ``bound`` (or at it, ``strict``) and those of magnitude above ``top``, as two masks
    (NaN is neither): one pass, no array of magnitudes."""
    low = np.empty(len(values), dtype=np.bool_)
    high = np.empty(len(values), dtype=np.bool_)
    for i in range(len(values)):
        v = values[i]
        low[i] = v <= bound if strict else v < bound
        high[i] = abs(v) > top
    return low, high


@numba.njit(cache=True, nogil=True)
def _whole(values, bound, top, fallback):
    """An integer column from ``values``: masks of the finite values that are not whole, below ``bound`` and
    above ``top``, and the values as int64 (``fallback`` where not finite, whole and in the bounds)."""
    n = len(values)
    fraction, low, high = np.empty(n, np.bool_), np.empty(n, np.bool_), np.empty(n, np.bool_)
    out = np.empty(n, np.int64)
    for i in range(n):
        v = values[i]
        finite = np.isfinite(v)
        fraction[i] = finite and v != np.floor(v)
        low[i] = finite and v < bound
        high[i] = finite and v > top
        out[i] = np.int64(v) if finite and not (fraction[i] or low[i] or high[i]) else fallback
    return fraction, low, high, out


def _present(raw: pd.Series | None, n: int) -> np.ndarray:
    """``raw.notna()`` as a numpy array (all False without a column)."""
    if raw is None:
        return np.zeros(n, dtype=bool)
    if isinstance(raw.dtype, np.dtype) and raw.dtype.kind == "f":
        return ~np.isnan(raw.to_numpy())
    return ~np.asarray(raw.isna().array, dtype=bool)


def _ids(raw: pd.Series | None, n: int, missing: np.ndarray):
    """The canonical id column: a column of pandas 3's ``str`` as it is, anything else as Python objects (from
    which the table infers its type, as for any object column)."""
    if raw is None:
        return np.full(n, None, dtype=object)
    if raw.dtype == STR and not missing.all():
        return raw.array
    return raw.to_numpy(dtype=object, copy=True)


def _duplicated(raw: pd.Series | None, missing: np.ndarray) -> np.ndarray:
    """Rows whose id (present) another row also holds."""
    if raw is None:
        return np.zeros(len(missing), dtype=bool)
    hashes = _text_hashes(raw)
    if hashes is not None:
        candidates = _same_hash(hashes)
    elif isinstance(raw.dtype, np.dtype) and raw.dtype.kind in "iu":
        candidates = _same_hash(raw.to_numpy())
    elif raw.dtype == object:
        return raw.duplicated(keep=False).to_numpy() & ~missing
    else:
        return pd.Series(raw.to_numpy(dtype=object)).duplicated(keep=False).to_numpy() & ~missing
    same = np.zeros(len(missing), dtype=bool)
    if len(candidates):
        same[candidates] = raw.iloc[candidates].reset_index(drop=True).duplicated(keep=False).to_numpy()
    return same & ~missing


def _same_hash(keys: np.ndarray) -> np.ndarray:
    """Positions (sorted) of the keys (64-bit integers) that another position also holds."""
    keys = np.ascontiguousarray(keys).view(np.uint64)
    if len(keys) < 2 or bool(np.all(keys[1:] > keys[:-1])):  # ascending (integer ids in order): none repeats
        return np.zeros(0, dtype=np.int64)
    bits = max(0, int(np.ceil(np.log2(max(len(keys), 1) / BUCKET_KEYS))))
    start, order, size = _buckets(keys, bits)
    out = np.zeros(len(keys), dtype=np.bool_)
    over_rows(_repeated, len(start) - 1, keys, start, order, size, out, small=SMALL // BUCKET_KEYS)
    return np.flatnonzero(out)


BUCKET_KEYS = 1024
"""Keys of a bucket of :func:`_repeated`, on average: its table (a few tens of KB) stays in the caches."""
_SPREAD = np.uint64(0x9E3779B97F4A7C15)
"""Fibonacci hashing's multiplier: a key's bits spread to the top of the product (sequential ids too)."""
_PROBE = np.uint64(0xC2B2AE3D27D4EB4F)
"""A second multiplier, for a key's slot in its bucket's table."""


@numba.njit(cache=True, nogil=True)
def _buckets(keys, bits):
    """The keys dealt into 2^bits buckets by the top bits of ``key * _SPREAD`` (one pass to count, one to place):
    ``(start, order, size)``, bucket b's keys at ``order[start[b]:start[b + 1]]``, and the size of the tables
    :func:`_repeated` puts a bucket's keys in (at least twice as many slots as the largest bucket's keys)."""
    n = len(keys)
    buckets = 1 << bits
    shift = np.uint64(64 - bits)
    start = np.zeros(buckets + 1, dtype=np.int64)
    home = np.zeros(n, dtype=np.int64)
    if bits > 0:
        for i in range(n):
            home[i] = np.int64((keys[i] * _SPREAD) >> shift)
    for i in range(n):
        start[home[i] + 1] += 1
    largest = 0
    for b in range(buckets):
        largest = max(largest, start[b + 1])
        start[b + 1] += start[b]
    at = start[:-1].copy()
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        order[at[home[i]]] = i
        at[home[i]] += 1
    size = 16
    while size < 2 * largest:
        size *= 2
    return start, order, size


@numba.njit(cache=True, nogil=True)
def _repeated(lo, hi, keys, start, order, size, out):
    """Whether another position holds each key of buckets ``lo .. hi`` (:func:`_buckets`), into ``out``: each
    bucket's keys put in an open-addressing table of its own (linear probing). One pass over the keys and
    tables that fit the caches, where a sort of a million keys goes over them twenty times."""
    slot = np.empty(size, dtype=np.int64)  # the position of the slot's key; -1: empty
    again = np.empty(size, dtype=np.bool_)  # the slot's key was met again
    for b in range(lo, hi):
        if start[b + 1] - start[b] < 2:
            continue
        slot[:] = -1
        again[:] = False
        for j in range(start[b], start[b + 1]):
            i = order[j]
            s = np.int64(((keys[i] * _PROBE) >> np.uint64(32)) & np.uint64(size - 1))
            while slot[s] >= 0 and keys[slot[s]] != keys[i]:
                s = (s + 1) & (size - 1)
            if slot[s] < 0:
                slot[s] = i
            else:
                again[s] = True
                out[i] = True
        for s in range(size):
            if again[s]:
                out[slot[s]] = True


def _text_hashes(raw: pd.Series) -> np.ndarray | None:
    """:func:`_string_hashes` of a column of text: Arrow-backed strings, or Python strings (pandas 2) once
    turned into Arrow's; None for any other column."""
    if isinstance(raw.dtype, pd.StringDtype) and raw.dtype.storage == "pyarrow":
        return _string_hashes(pa.chunked_array(pa.array(raw.array)))
    if raw.dtype == object:
        try:
            return _string_hashes(pa.chunked_array([pa.array(raw.values, type=pa.string(), from_pandas=True)]))
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # not all text
            return None
    return None


def _string_hashes(text: pa.ChunkedArray) -> np.ndarray:
    """A 64-bit FNV-1a hash of each string's UTF-8 bytes (missing strings hash as empty ones)."""
    out = np.empty(len(text), dtype=np.uint64)
    start = 0
    for chunk in text.chunks:
        if pa.types.is_large_string(chunk.type):
            chunk = chunk.cast(pa.large_string())
        else:
            chunk = chunk.cast(pa.string())
        _, offsets, data = chunk.buffers()
        width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = np.frombuffer(offsets, dtype=width)[chunk.offset : chunk.offset + len(chunk) + 1]
        data = np.frombuffer(data if data is not None else b"", dtype=np.uint8)
        data.flags.writeable = False  # Arrow's buffers are mutable or not by their origin: one kernel signature
        _fnv1a(offsets.astype(np.int64), data, out[start : start + len(chunk)])
        start += len(chunk)
    return out


@numba.njit(cache=True, nogil=True)
def _fnv1a(offsets, data, out):
    for r in range(len(out)):
        h = np.uint64(14695981039346656037)
        for i in range(offsets[r], offsets[r + 1]):
            h = (h ^ np.uint64(data[i])) * np.uint64(1099511628211)
        out[r] = h


def prepare(
    portfolio: pd.DataFrame,
    curves: dict[str, ZeroCurve],
    limits: Limits = Limits(),
    *,
    as_of: int = NO_DATE,
    exercise_schedule: ExerciseSchedule | Callable | None = None,
    payments: Payments | None = None,
    curve_sets=None,
    models: pd.DataFrame | None = None,
    first_row: int = 0,
    unique_ids: bool = True,
    allow_large_rates: bool = False,
) -> Prepared:
    """Canonical columns of ``portfolio``, every rule it breaks row by row, and each row's tree geometry.

    ``as_of`` is the valuation date of dated rows without a ``valuation_date`` (a day number), and
    ``exercise_schedule`` the exercise dates given by table, aligned with the portfolio's rows (see
    :func:`~.dated.read_exercise_schedule`), or a function returning them, called once the dated rows need them
    (a caller reads the table meanwhile); ``payments`` the coupon and principal schedules given by table,
    aligned with the portfolio's rows (:mod:`~.payments`); ``curve_sets`` the market scenarios the rows will be
    priced under (their zero rates are bounded too); ``models`` a model table (``model, mean_reversion,
    volatility[, curve]``, as Hull-White calibration writes it) from which rows naming a ``model`` take their a
    and sigma (and their curve, when they name none). For a slice of a larger portfolio, ``first_row`` is the position
    of its first row there (problems name rows by their number in the whole portfolio), and
    ``unique_ids=False`` leaves the uniqueness of ids, a rule of the whole, to the caller
    (:func:`duplicated_ids`). A coupon above :data:`~distprice.curves.MAX_RATE` (a percentage typed as a number)
    is refused unless ``allow_large_rates``; so is a row whose curve has knots by date none of which lies after
    the row's valuation date, or one before it (:func:`_check_knot_dates`).

    Each column is read once, as numpy or Arrow arrays; text columns are matched by their distinct values, and
    a problem's message is written for the rows that break a rule only.
    """
    n = len(portfolio)
    raw = {
        c: portfolio[c] if c in portfolio.columns else None
        for c in (*PORTFOLIO_COLUMNS, *DATE_COLUMNS, "maturity_date")
    }
    check = _Checker(raw["id"], n, first_row)
    if models is not None and "model" in portfolio.columns:
        _join_models(raw, portfolio["model"], models, check)
    present = {
        c: _present(raw[c], n)
        for c in dict.fromkeys(("id", *OPTION_COLUMNS, *TIME_COLUMNS, *FLOAT_COLUMNS, *INT_COLUMNS))
    }
    id_missing = ~present["id"]
    check.flag(id_missing, "id", "is required")
    if unique_ids:
        check.flag(_duplicated(raw["id"], id_missing), "id", DUPLICATE_ID)
    is_dated = np.zeros(n, dtype=bool) if raw["maturity_date"] is None else _given_dates(raw["maturity_date"])

    columns: dict[str, np.ndarray] = {"id": _ids(raw["id"], n, id_missing)}
    code = {}
    for name, (default, choices) in ENUM_COLUMNS.items():
        code[name] = _enum(raw[name], n, default, choices, name, check)
    instrument, exercise = code["instrument"], np.array(list(EXERCISE_CODES.values()))[code["exercise"]]
    has_option = instrument != INSTRUMENTS.index("bond")
    required = {
        "strike": has_option & ~is_dated,
        "expiry": has_option & ~is_dated,
        "maturity": ~is_dated,
        "notional": np.zeros(n, dtype=bool),
    }
    everywhere = np.ones(n, dtype=bool)
    for name, (default, bound, strict, top) in FLOAT_COLUMNS.items():
        values = _number(raw[name], n, default, name, check, required.get(name, everywhere), present[name])
        slip = name == "coupon" and not allow_large_rates  # a coupon above 1: most likely a percentage
        low, high = _outside(values, -np.inf if bound is None else bound, strict, MAX_RATE if slip else top)
        if bound is not None:
            check.flag(low, name, f"must be {'>' if strict else '>='} {bound:g}")
        if slip:
            check.flag_each(high & ~low, values, name, lambda coupon: percent_slip(coupon, "a coupon", "above 1"))
        else:
            check.flag(
                high, name, f"must be at most {top:g}" if bound is not None else f"must be between {-top:g} and {top:g}"
            )
        columns[name] = values
    check.flag(present["quantity"] & present["notional"], "notional", "give quantity or notional, not both")
    for name, (default, bound, top) in INT_COLUMNS.items():
        values = _number(raw[name], n, default, name, check, everywhere, present[name])
        fraction, low, high, columns[name] = _whole(values, bound, top, max(default, bound))
        check.flag(fraction, name, "must be a whole number")
        check.flag(low, name, f"must be >= {bound}")
        check.flag(high, name, f"must be at most {top}")
    curve = _curve_codes(raw["curve"], n)
    known_label = np.array([name in curves for name in curve.labels], dtype=bool)
    for j, name in enumerate(curve.labels):
        if name not in curves:
            check.flag(curve.codes == j, "curve", _unknown_curve(name, curves, given=raw["curve"] is not None))

    # option type: required for bond options, implied (and checked) for callable and puttable bonds
    option_type = code["option_type"]
    given = option_type >= 0
    for kind, implied in IMPLIED_OPTION_TYPE.items():
        is_kind = instrument == INSTRUMENTS.index(kind)
        implied = OPTION_TYPES.index(implied)
        check.flag(
            is_kind & given & (option_type != implied),
            "option_type",
            f"a {kind} implies option_type {OPTION_TYPES[implied]}",
        )
        option_type = np.where(is_kind, implied, option_type)
    check.flag(
        (instrument == INSTRUMENTS.index("bond_option")) & ~present["option_type"],
        "option_type",
        "is required for a bond_option",
    )
    swaption = instrument == INSTRUMENTS.index(SWAPTION)
    option_type = _swaption_types(option_type, swaption, check)
    if swaption.any() or any(c in portfolio.columns for c in ("start_date", "fixed_rate")):
        swaption_rules(portfolio, swaption, lambda column: _present(_column(portfolio, column), n), check.flag)
        check.flag(
            swaption & ~is_dated,
            "instrument",
            "a swaption is a dated row: give its maturity_date, start_date and fixed_rate",
        )
        check.flag(swaption & (exercise == AMERICAN), "exercise", "must be european or bermudan for a swaption")
    both_rights = instrument == INSTRUMENTS.index("callable_puttable_bond")
    check.flag(
        both_rights & given,
        "option_type",
        "must be empty for a callable_puttable_bond: its rights are the exercise schedule's right column",
    )
    check.flag(
        both_rights & ~is_dated,
        "instrument",
        "a callable_puttable_bond is a dated row: give its maturity_date and its dates in the exercise schedule, "
        "each with a right (call or put)",
    )
    # a bond with both rights values the holder's rights net, puts less calls (its rows roll the holder's value
    # back where a callable bond's roll the issuer's call)
    option_type = np.where(both_rights, OPTION_TYPES.index("put"), option_type)
    option_type = np.where(option_type < 0, OPTION_TYPES.index("call"), option_type)
    for name in OPTION_COLUMNS:
        check.flag(~has_option & present[name], name, "must be empty for a bond (it has no option)")
    for name in TIME_COLUMNS:
        check.flag(
            is_dated & present[name],
            name,
            "is for rows in years; a row with a maturity_date gives "
            + ("expiry_date" if name == "expiry" else "first_exercise_date" if name == "first_exercise" else "dates")
            + " instead",
        )
    for name in DATE_COLUMNS:
        check.flag(~is_dated & present[name], name, "is for dated rows (a row with a maturity_date)")
    if payments is not None:
        for steps, table in ((payments.coupon, "coupon schedule"), (payments.principal, "principal schedule")):
            check.flag(
                ~is_dated & (steps.counts > 0),
                "maturity_date",
                f"the {table} has dates for this row: only a dated row (with a maturity_date) takes one",
            )
            check.flag(
                swaption & (steps.counts > 0),
                "instrument",
                f"the {table} has dates for this row: a swaption takes none (its fixed leg is its fixed_rate on face)",
            )

    c = columns
    timed = ~is_dated
    with np.errstate(invalid="ignore"):
        check.flag(timed & has_option & (c["expiry"] > c["maturity"]), "expiry", "must be <= maturity")
        check.flag(
            timed & (c["coupon"] > 0) & (c["coupon_frequency"] < 1), "coupon_frequency", "must be >= 1 when coupon > 0"
        )
        check.flag(
            timed & has_option & (exercise != EUROPEAN) & (c["first_exercise"] > c["expiry"]),
            "first_exercise",
            "must be <= expiry",
        )

    dated = None
    days_per_year = np.array(
        [curves[name].days_per_year if name in curves else 365 for name in curve.labels], dtype=np.int64
    )[curve.codes]
    if is_dated.any():
        rows = np.flatnonzero(is_dated)

        def schedule() -> ExerciseSchedule:  # asked for once the dated terms are read: a caller reads it meanwhile
            given = exercise_schedule() if callable(exercise_schedule) else exercise_schedule
            return (given if given is not None else ExerciseSchedule.empty(n)).take(rows)

        with stage("schedules"):
            part, problems = read_dated(
                portfolio,
                rows,
                as_of,
                days_per_year[rows],
                schedule,
                exercise[rows],
                has_option[rows],
                c["strike"][rows],
                check.where,
                both_rights[rows],
                swaption[rows],
            )
        check.add(problems)
        if payments is not None and payments.given[rows].any():
            part, problems = with_payments(part, payments.take(rows), rows, check.where)
            check.add(problems)
        exercise = np.where(swaption, BERMUDAN, exercise)  # a european swaption: one date of its schedule
        code["exercise"] = np.where(swaption, EXERCISES.index("bermudan"), code["exercise"])
        dated = _aligned(n, rows, part)
        c["maturity"] = np.where(is_dated, dated.years(dated.redemption_day), c["maturity"])
    c["valuation"] = np.where(is_dated, dated.valuation, as_of) if dated is not None else np.full(n, as_of)
    by_date = np.array([name in curves and curves[name].dates is not None for name in curve.labels], dtype=bool)[
        curve.codes
    ]
    check.flag(
        by_date & ~is_dated & (as_of == NO_DATE),
        "curve",
        "has knots by date: give the job's valuation date (as_of) to price a row in years on it",
    )
    _check_knot_dates(check, curve, known_label, curves, curve_sets or [curves], c["valuation"])

    height = tree_height(np.nan_to_num(c["maturity"]), c["steps_per_year"])
    phase = np.zeros(n, dtype=np.int64)
    if dated is not None:
        known = (dated.redemption_day != NO_DATE) & (dated.valuation != NO_DATE)  # else: the row's error, 1 step
        redemption = np.where(known, dated.redemption_day - dated.valuation, 0)
        spy = np.where(c["steps_per_year"] >= 1, c["steps_per_year"], 1).astype(np.int64)
        phase = np.where(is_dated & known, exercise_phases(dated, np.where(has_option, exercise, NO_EXERCISE), spy), 0)
        height = np.where(is_dated, top_steps(redemption, c["steps_per_year"], dated.days_per_year, phase), height)
    geometry = tree_geometry(
        np.where(c["mean_reversion"] > 0, c["mean_reversion"], 1.0),
        np.where(c["volatility"] > 0, c["volatility"], 1.0),
        np.nan_to_num(c["maturity"]),
        c["steps_per_year"],
        height,
        phase,
    )
    check.flag(
        (c["mean_reversion"] > 0) & (c["volatility"] > 0) & (geometry.width > limits.max_width),
        "mean_reversion",
        f"gives a tree wider than {limits.max_width} nodes (raise mean_reversion or lower steps_per_year)",
    )
    check.flag(
        geometry.height > limits.max_height,
        "maturity",
        f"gives a tree taller than {limits.max_height} steps (lower steps_per_year)",
    )
    events = _event_counts(c, exercise, is_dated, dated, has_option)
    check.flag(
        events > limits.max_events,
        "exercise",
        f"gives more than {limits.max_events} events (coupons and "
        "exercise dates): lower a frequency or shorten the window",
    )
    _check_rates(check, curve, known_label, curve_sets or [curves], geometry)

    c["instrument"] = _labels(INSTRUMENTS, instrument)
    c["option_type"] = _labels(OPTION_TYPES, option_type)
    c["exercise"] = _labels(EXERCISES, code["exercise"])
    c["curve"] = _labels(curve.labels, curve.codes)
    table = pd.DataFrame({name: columns[name] for name in PORTFOLIO_COLUMNS}, copy=False)
    return Prepared(table, ~check.invalid, check.problems(), geometry, is_dated, dated)


@dataclass(frozen=True)
class _Curves:
    """Each row's curve id as a code into ``labels`` (``default`` where none is named)."""

    codes: np.ndarray
    labels: list[str]


def _curve_codes(raw: pd.Series | None, n: int) -> _Curves:
    if raw is None:
        return _Curves(np.zeros(n, dtype=np.int64), ["default"])
    codes, labels = factorized(raw)
    if (codes < 0).any():
        if "default" not in labels:
            labels.append("default")
        codes = np.where(codes < 0, labels.index("default"), codes)
    return _Curves(codes.astype(np.int64), labels)


def _unknown_curve(name: str, curves: dict, given: bool) -> str:
    """The rule a row breaks when its curve (``default`` when the portfolio names none) is not in ``curves``."""
    rule = (
        f"names the curve {name!r}, which is not in the curves input"
        if given
        else f"names no curve, and the curves input has no curve {name!r}"
    )
    if set(curves) <= set(builtin_curves()):
        return rule + f": no curves were given (--curves, or curves=); the built-in curve is {', '.join(curves)!r}"
    return rule + f" ({', '.join(sorted(curves))})"


def _swaption_types(option_type: np.ndarray, swaption: np.ndarray, check: _Checker) -> np.ndarray:
    """Option types (codes of ``OPTION_TYPES + SWAPTION_TYPES``) as the engines read them: a swaption's payer or
    receiver as its bond option (:data:`~.swaptions.AS_BOND_OPTION`); a swaption without one, or with call or
    put, and a payer or receiver elsewhere, are flagged."""
    named = option_type >= len(OPTION_TYPES)
    check.flag(swaption & (option_type < 0), "option_type", "is required for a swaption: payer or receiver")
    check.flag(swaption & (option_type >= 0) & ~named, "option_type", "must be payer or receiver for a swaption")
    check.flag(
        ~swaption & named, "option_type", "payer and receiver are a swaption's: a bond's option is a call or a put"
    )
    mapped = np.array([OPTION_TYPES.index(AS_BOND_OPTION[name]) for name in SWAPTION_TYPES])
    return np.where(named, mapped[np.clip(option_type - len(OPTION_TYPES), 0, None)], option_type)


def _column(frame: pd.DataFrame, column: str) -> pd.Series | None:
    return frame[column] if column in frame.columns else None


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


def _event_counts(c: dict, exercise: np.ndarray, is_dated, dated, has_option) -> np.ndarray:
    """An upper bound of each row's events: coupons over its life, and its exercise dates (bermudan: a year's
    dates times the years of the window; american: a step, or a business day, each)."""
    years = np.nan_to_num(np.clip(c["maturity"], 0, 1000), copy=False)
    window = np.subtract(c["expiry"], c["first_exercise"])
    exercises = np.nan_to_num(np.clip(window, 0, 1000, out=window), copy=False)
    exercises *= np.where(exercise == AMERICAN, c["steps_per_year"], c["exercise_frequency"])
    exercises += 1
    exercises[exercise == EUROPEAN] = 1
    if dated is not None:
        dates = dated.expiry != NO_DATE
        span = np.where(
            dates, (np.where(dates, dated.expiry, 0) - np.maximum(dated.first, dated.settlement)) / 365.25, 0.0
        ).clip(0, 1000)
        exercises = np.where(is_dated, np.where(exercise == EUROPEAN, 1, span * 366 + 1), exercises)
    exercises[~has_option] = 0
    years *= c["coupon_frequency"]
    years += exercises
    years += 1
    return years


def _check_rates(check: _Checker, curve: _Curves, known: np.ndarray, curve_sets, geometry) -> None:
    """A row whose curve's zero rates (in any curve set), times the years to its last step, leave the float
    range is refused (``known``: which of ``curve.labels`` the curves input has)."""
    years = geometry.height * geometry.dt + geometry.dt
    for j, name in enumerate(curve.labels):
        if not known[j]:
            continue
        rows = curve.codes == j
        rate = max(float(np.abs(curves[name].zero_rate).max()) for curves in curve_sets)
        with np.errstate(over="ignore"):  # a rate of 1e308: inf, refused
            reach = rate * years
        check.flag(
            rows & (reach > MAX_RATE_YEARS),
            "curve",
            f"has zero rates too large for the row's life: |rate| x years reaches more than {MAX_RATE_YEARS:g}",
        )


def _check_knot_dates(check: _Checker, curve: _Curves, known: np.ndarray, base, curve_sets, valuation) -> None:
    """A row priced on a curve with knots by date (``base``, or a scenario's in ``curve_sets``) is refused when
    the curve has no knot after the row's valuation date (a stale curve: it would be extrapolated flat over the
    row's whole life) or a knot before it (a curve is anchored on its valuation date: such a knot says it is an
    earlier day's curve); ``known``: which of ``curve.labels`` the curves input has."""
    valued = valuation != NO_DATE
    for j, name in enumerate(curve.labels):
        if not known[j]:
            continue
        spans = {}  # (first, last) knot day -> how the curve is named; the base curve first
        for curves in [base, *curve_sets]:
            dates = curves[name].dates
            if dates is not None:
                spans.setdefault((int(dates[0]), int(dates[-1])), "curve" if curves is base else "scenario curve")
        if not spans:
            continue
        rows = valued & (curve.codes == j)
        for (first, last), what in spans.items():
            stale = rows & (valuation >= last)
            early = rows & (valuation > first) & ~stale
            first_day, last_day = to_iso([first, last])
            check.flag_each(
                stale,
                valuation,
                "curve",
                lambda day: (
                    f"{what} {name!r} has no knot after the valuation date {to_iso([day])[0]}: its last "
                    f"knot is {last_day} (a stale curve; give the curve of the valuation date)"
                ),
            )
            check.flag_each(
                early,
                valuation,
                "curve",
                lambda day: (
                    f"{what} {name!r} has a knot before the valuation date {to_iso([day])[0]}: its first "
                    f"knot is {first_day} (a curve's knots start on its valuation date; give the curve of that date, "
                    "or leave out the knots before it)"
                ),
            )


def _aligned(n: int, rows: np.ndarray, part: DatedRows) -> DatedRows:
    """``part`` (the dated terms of ``rows``) spread over all n rows, the others repeating the first without
    exercise dates."""
    index = np.zeros(n, dtype=np.int64)
    index[rows] = np.arange(len(rows))
    spread = part.take(index)
    exercises = np.zeros(n, dtype=np.int64)
    exercises[rows] = part.exercises
    return dataclasses.replace(spread, exercises=exercises)


DUPLICATE_ID = "must be unique"


def id_hashes(ids: pd.Series) -> np.ndarray:
    """A 64-bit hash of each id (missing ids hash too): what :func:`duplicated_ids` compares across slices.
    Text ids hash their UTF-8 bytes (:func:`_text_hashes`), integer ids (also held as Python objects, as the
    canonical table holds them) are their own hash."""
    if isinstance(ids.dtype, np.dtype) and ids.dtype.kind in "iu":
        return ids.to_numpy().astype(np.uint64)
    if ids.dtype == object and pd.api.types.infer_dtype(ids, skipna=False) == "integer":
        return ids.to_numpy(dtype=np.int64).astype(np.uint64)
    hashes = _text_hashes(ids)
    if hashes is not None:
        return hashes
    return pd.util.hash_pandas_object(ids.reset_index(drop=True), index=False).to_numpy()


def duplicated_ids(hashes: np.ndarray, ids_at) -> np.ndarray:
    """Positions (sorted) of the rows whose id another row also holds, from every row's :func:`id_hashes`.

    ``ids_at(positions)`` returns the ids at those positions: rows whose hashes collide are compared by
    value, so a hash collision never flags a row.
    """
    candidates = _same_hash(hashes)
    if len(candidates) == 0:  # the usual case: one sort, no positions
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
