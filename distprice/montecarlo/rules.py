"""The rules of the Monte-Carlo inputs, checked all at once: tables in, validated :class:`Job` values out.

Each problem names the table, the 1-based row and its job (``mc_spots row 3 (job 'a')``), the column and
the rule; a missing row names the table, the job and the key that is missing.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..errors import InvalidInputError, OptionError, Problem
from ..precision import PRECISIONS
from . import bridge as bridges, contracts, sobol
from .bridge import Bridge
from .inputs import complete
from .job import Job

MISSING_LISTED = 10
"""Missing rows spelled out per job and table; the rest are counted in one more problem."""
CORRELATION_TOLERANCE = 1e-6
"""How far a Cholesky row's squared norm (a correlation's diagonal) may be from 1, and a correlation from
symmetric."""


def _key(value) -> str:
    """A label as text, so that 0, 0.0 and '0' name the same model."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


class _Table:
    """One input table, its rows grouped by job, and the problems found in it."""

    def __init__(self, name: str, frame: pd.DataFrame, problems: list[Problem]):
        self.name, self.frame, self.problems = name, frame, problems
        self._numbers: dict[str, np.ndarray] = {}  # each column read as numbers once
        codes, labels = pd.factorize(frame["job"])  # each distinct label made a key once
        keys = [_key(v) for v in labels]
        self.jobs = [keys[c] if c >= 0 else None for c in codes]
        self.rows: dict[str, list[int]] = {}
        order = np.argsort(codes, kind="stable")  # rows grouped by label, each group in table order
        groups = np.split(order, np.flatnonzero(np.diff(codes[order])) + 1) if len(codes) else []
        for group in groups:
            code = codes[group[0]]
            if code < 0:
                for r in group.tolist():
                    self.flag(r, "job", "job is required")
            else:
                self.rows.setdefault(keys[code], []).extend(group.tolist())

    def where(self, r: int) -> str:
        job = self.jobs[r]
        return f"{self.name} row {r + 1}" + (f" (job '{job}')" if job is not None else "")

    def flag(self, r: int, column: str | None, rule: str):
        self.problems.append(Problem(r, self.where(r), column, rule))

    def flag_job(self, job: str, column: str | None, rule: str):
        self.problems.append(Problem(None, f"{self.name} (job '{job}')", column, rule))

    def numbers(self, rows: list[int], column: str, integer: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Values of ``column`` in ``rows`` as float64 and whether each is usable (finite, whole if
        ``integer``); unusable ones are flagged."""
        if column not in self._numbers:
            self._numbers[column] = pd.to_numeric(self.frame[column], errors="coerce").to_numpy(dtype=np.float64)
        values = self._numbers[column][np.asarray(rows, dtype=np.int64)]
        ok = np.isfinite(values)
        if integer:
            ok &= np.floor(values) == values
        for p in np.flatnonzero(~ok).tolist():
            self.flag(rows[p], column, "must be a whole number" if integer else "must be a finite number")
        return values, ok

    def grid(self, job: str, rows: list[int], keys: list[tuple[str, np.ndarray, int, int]]) -> tuple[list[int], tuple]:
        """Place rows on a dense grid: ``keys`` are (column, values, lowest, count) per axis. Rows out of
        range or repeated are flagged (values that are not whole numbers, which :meth:`numbers` named, are
        left out without a second problem); missing cells are flagged on the job. Returns the positions (in
        ``rows``) of the rows placed and their grid indices."""
        shape = tuple(count for _, _, _, count in keys)
        if rows:  # the common case, every row a whole number in range and no cell twice, at numpy's speed
            values = np.array([v for _, v, _, _ in keys], dtype=np.float64).reshape(len(keys), len(rows))
            lows = np.array([low for _, _, low, _ in keys], dtype=np.float64)[:, None]
            whole = np.isfinite(values) & (values == np.floor(values))
            inside = (values >= lows) & (values < lows + np.array(shape, dtype=np.float64)[:, None])
            if whole.all() and inside.all():
                cells = (values - lows).astype(np.int64)
                flat = np.ravel_multi_index(tuple(cells), shape)
                if len(np.unique(flat)) == len(flat):
                    if len(flat) < int(np.prod(shape)):
                        self._missing(job, keys, shape, {tuple(c) for c in cells.T.tolist()})
                    return np.arange(len(rows), dtype=np.int64), tuple(cells)
        placed, index = [], []
        seen = {}
        for p, r in enumerate(rows):
            cell = []
            for column, values, low, count in keys:
                v = values[p]
                if not (np.isfinite(v) and v == int(v)):
                    break
                if not low <= v < low + count:
                    self.flag(r, column, f"must be a whole number in {low}..{low + count - 1}")
                    break
                cell.append(int(v) - low)
            else:
                cell = tuple(cell)
                if cell in seen:
                    self.flag(r, None, f"repeats row {seen[cell] + 1} ({self._describe(keys, cell)})")
                    continue
                seen[cell] = r
                placed.append(p)
                index.append(cell)
        if len(seen) < int(np.prod(shape)):
            self._missing(job, keys, shape, seen)
        cells = (
            tuple(np.array(axis, dtype=np.int64) for axis in zip(*index))
            if index
            else tuple(np.zeros(0, dtype=np.int64) for _ in keys)
        )
        return np.array(placed, dtype=np.int64), cells

    def _missing(self, job: str, keys, shape: tuple, seen) -> None:
        """Flags the cells of the grid no row gave (``seen``: those given)."""
        present = np.zeros(shape, dtype=bool)
        for cell in seen:
            present[cell] = True
        absent = np.argwhere(~present)
        for cell in absent[:MISSING_LISTED]:
            self.flag_job(job, None, f"missing row for {self._describe(keys, tuple(cell))}")
        if len(absent) > MISSING_LISTED:
            self.flag_job(job, None, f"... and {len(absent) - MISSING_LISTED} more missing rows")

    @staticmethod
    def _describe(keys, cell) -> str:
        return ", ".join(f"{column} {low + c}" for (column, _, low, _), c in zip(keys, cell))


def validate(tables: dict[str, pd.DataFrame]) -> list[Job]:
    """Validated jobs from the tables (absent optional ones may be left out), in the order of ``mc_jobs``;
    InvalidInputError listing every problem otherwise."""
    problems: list[Problem] = []
    t = {name: _Table(name, frame, problems) for name, frame in complete(tables).items()}
    jobs = []
    listed = set()
    for r in range(len(t["mc_jobs"].frame)):
        job = t["mc_jobs"].jobs[r]
        if job is None:
            continue
        if job in listed:
            t["mc_jobs"].flag(r, "job", "job names must be unique")
            continue
        listed.add(job)
        built = _job(t, r, job)
        if built is not None:
            jobs.append(built)
    for name, table in t.items():
        for job, rows in table.rows.items():
            if name != "mc_jobs" and job not in listed:
                table.flag(rows[0], "job", f"job '{job}' is not in mc_jobs")
    if problems:
        raise InvalidInputError(problems)
    return jobs


def _job(t: dict[str, _Table], r: int, job: str) -> Job | None:
    """Check one job's rows in every table; the Job if all is well (problems are collected in the tables).
    A table is checked as far as the shapes it depends on (dates, models, underlyings, contract) are known."""
    before = sum(len(table.problems) for table in t.values())
    head = _head(t["mc_jobs"], r)
    T, dates = _dates(t["mc_dates"], job)
    models, spots = _spots(t["mc_spots"], job)
    if T is None or models is None:
        return None
    U = spots.shape[1]
    vol, drift = _diffusion(t["mc_diffusion"], job, models, T, U)
    cholesky = _cholesky(t, job, models, U)
    bridge = (
        _bridge(t["mc_bridge"], job, T)
        if job in t["mc_bridge"].rows
        else bridges.from_dates(dates)
        if dates is not None
        else None
    )
    if head is None:
        return None
    cls, paths, bits, source, precision = head
    contract = _contract(t["mc_terms"], t["mc_jobs"], r, job, cls, T, U)
    discounts = _per_model(t["mc_cashflows"], job, models, "discount", cls().cashflows(T), positive=True)
    detvals = _per_model(t["mc_detvals"], job, models, "value", 1 if cls().uses_detvals() else None)
    directions = _directions(t["mc_directions"], t["mc_jobs"], r, job, source, T * U, bits)
    if sum(len(table.problems) for table in t.values()) > before or spots.size == 0:
        return None
    return Job(
        job,
        contract,
        paths,
        bits,
        source,
        precision,
        dates,
        directions,
        bridge,
        models,
        spots,
        vol,
        drift,
        cholesky,
        discounts,
        detvals,
    )


def _head(jobs: _Table, r: int):
    """The mc_jobs row: contract class, paths, bits, direction source, precision (None if broken)."""
    frame = jobs.frame
    cls = contracts.kind(frame["contract"].iloc[r])
    if cls is None:
        jobs.flag(
            r,
            "contract",
            f"unknown contract {frame['contract'].iloc[r]!r}; use 1, 2, 3 or {', '.join(contracts.NAMES)}",
        )
    (paths,), ok_paths = jobs.numbers([r], "paths", integer=True)
    (bits,), ok_bits = jobs.numbers([r], "sobol_bits", integer=True)
    ok = cls is not None and ok_paths[0] and ok_bits[0]
    if ok_paths[0] and paths < 1:
        jobs.flag(r, "paths", "must be >= 1")
        ok = False
    if ok_bits[0] and not 1 <= bits <= sobol.MAX_BITS:
        jobs.flag(r, "sobol_bits", f"must be in 1..{sobol.MAX_BITS}")
        ok = False
    elif ok_bits[0] and ok_paths[0] and paths >= 2**bits:
        jobs.flag(
            r,
            "paths",
            f"must be < 2^sobol_bits = {2 ** int(bits)} (the Sobol sequence has 2^{int(bits)} - 1 nonzero points)",
        )
        ok = False
    source = str(frame["directions"].iloc[r]).strip()
    if source not in sobol.SOURCES:
        jobs.flag(r, "directions", f"must be one of {', '.join(sobol.SOURCES)}")
        ok = False
    precision = str(frame["precision"].iloc[r]).strip()
    if precision not in PRECISIONS:
        jobs.flag(r, "precision", f"must be one of {', '.join(PRECISIONS)}")
        ok = False
    return (cls, int(paths), int(bits), source, precision) if ok else None


def _dates(table: _Table, job: str):
    """The number of dates T (None if the rows do not say) and the dates (None if broken)."""
    rows = table.rows.get(job, [])
    if not rows:
        table.flag_job(job, None, "the job has no dates")
        return None, None
    index, _ = table.numbers(rows, "date_index", integer=True)
    t, ok = table.numbers(rows, "t")
    placed, (cell,) = table.grid(job, rows, [("date_index", index, 1, len(rows))])
    if len(placed) < len(rows):
        return None, None
    if not ok.all():
        return len(rows), None
    dates, row_of = np.empty(len(rows)), np.empty(len(rows), dtype=np.int64)
    dates[cell], row_of[cell] = t[placed], np.asarray(rows)[placed]
    broken = False
    if dates[0] < 0:
        table.flag(int(row_of[0]), "t", "must be >= 0 (years from the valuation date)")
        broken = True
    for i in np.flatnonzero(np.diff(dates) <= 0):
        table.flag(int(row_of[i + 1]), "t", "dates must be strictly increasing with date_index")
        broken = True
    return len(rows), None if broken else dates


def _spots(table: _Table, job: str):
    """Models (labels in order of first appearance) and spots [M, U] (None, None if the shape is broken;
    bad values are flagged and left in)."""
    rows = table.rows.get(job, [])
    if not rows:
        table.flag_job(job, None, "the job has no spots")
        return None, None
    labels = [table.frame["model"].iloc[r] for r in rows]
    keys = [_key(v) for v in labels]
    models = list(dict.fromkeys(keys))
    first = {k: labels[keys.index(k)] for k in models}
    model = np.array([models.index(k) for k in keys], dtype=np.float64)
    underlying, whole = table.numbers(rows, "underlying", integer=True)
    spot, ok = table.numbers(rows, "spot")
    per_model = len(rows) // len(models) if len(rows) % len(models) == 0 else None
    U = int(underlying[whole].max()) + 1 if whole.any() else 0  # the largest usable index (inf is flagged)
    if per_model is None or per_model != U:
        table.flag_job(job, "underlying", "every model must list the same underlyings 0..U-1, once each")
        return None, None
    placed, cell = table.grid(job, rows, [("model", model, 0, len(models)), ("underlying", underlying, 0, U)])
    if len(placed) < len(rows):
        return None, None
    for p, r in enumerate(rows):
        if ok[p] and spot[p] <= 0:
            table.flag(r, "spot", "must be > 0")
    spots = np.empty((len(models), U))
    spots[cell] = spot[placed]
    return tuple(_label(first[k]) for k in models), spots


def _label(value):
    """A model label for the output: a whole number as int, anything else as given."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    return value


def _model_axis(table: _Table, job: str, rows: list[int], models: tuple) -> np.ndarray:
    """Model index of each row (NaN, flagged, where the model has no spots)."""
    number = {}
    for i, model in enumerate(models):
        number.setdefault(_key(model), i)
    codes, labels = pd.factorize(table.frame["model"].iloc[rows], use_na_sentinel=False)
    keys = [_key(v) for v in labels]
    index = np.array([number.get(k, np.nan) for k in keys], dtype=np.float64)[codes]
    for p in np.flatnonzero(np.isnan(index)).tolist():
        table.flag(rows[p], "model", f"model '{keys[codes[p]]}' has no mc_spots rows for this job")
    return index


def _diffusion(table: _Table, job: str, models: tuple, T: int, U: int):
    rows = table.rows.get(job, [])
    model = _model_axis(table, job, rows, models)
    date, _ = table.numbers(rows, "date_index", integer=True)
    underlying, _ = table.numbers(rows, "underlying", integer=True)
    vol, ok_vol = table.numbers(rows, "vol")
    drift, ok_drift = table.numbers(rows, "drift")
    for p in np.flatnonzero(ok_vol & (vol < 0)).tolist():
        table.flag(rows[p], "vol", "must be >= 0")
        ok_vol[p] = False
    before = len(table.problems)
    placed, cell = table.grid(
        job, rows, [("model", model, 0, len(models)), ("date_index", date, 1, T), ("underlying", underlying, 0, U)]
    )
    if len(table.problems) > before or not (ok_vol.all() and ok_drift.all()):
        return None, None
    out = np.empty((2, len(models), T, U))
    out[(0,) + cell], out[(1,) + cell] = vol[placed], drift[placed]
    return out[0], out[1]


def _square(table: _Table, job: str, models: tuple, U: int):
    """The [M, U, U] values of a matrix table, NaN where not given (None if a row is broken)."""
    rows = table.rows.get(job, [])
    model = _model_axis(table, job, rows, models)
    i, _ = table.numbers(rows, "i", integer=True)
    j, _ = table.numbers(rows, "j", integer=True)
    value, ok = table.numbers(rows, "value")
    matrix = np.full((len(models), U, U), np.nan)
    broken = not ok.all()
    seen = {}
    for p, r in enumerate(rows):
        cell = (model[p], i[p], j[p])
        if not all(np.isfinite(c) for c in cell):
            broken = True
            continue
        if not (0 <= i[p] < U and 0 <= j[p] < U):
            table.flag(r, "i" if not 0 <= i[p] < U else "j", f"must be an underlying 0..{U - 1}")
            broken = True
            continue
        cell = tuple(int(c) for c in cell)
        if cell in seen:
            table.flag(r, None, f"repeats row {seen[cell] + 1} (i {cell[1]}, j {cell[2]})")
            broken = True
            continue
        seen[cell] = r
        matrix[cell] = value[p]
    return None if broken else matrix, rows


def _cholesky(t: dict[str, _Table], job: str, models: tuple, U: int):
    """Lower-triangular L [M, U, U] with L Lᵀ a correlation, from mc_cholesky or mc_correlation."""
    given = [name for name in ("mc_cholesky", "mc_correlation") if job in t[name].rows]
    if len(given) != 1:
        t["mc_cholesky"].flag_job(
            job,
            None,
            "give the job's correlation in exactly one of mc_cholesky "
            "or mc_correlation" + (", not both" if given else ""),
        )
        return None
    table = t[given[0]]
    matrix, rows = _square(table, job, models, U)
    if matrix is None:
        return None
    out = np.zeros_like(matrix)
    broken = False
    for m, label in enumerate(models):
        where = f"model '{_key(label)}'"
        if given[0] == "mc_cholesky":
            upper = np.triu(~np.isnan(matrix[m]), 1)
            lower = np.tril(np.isnan(matrix[m]))
            for i, j in np.argwhere(upper):
                table.flag_job(job, "j", f"{where}: entry i {i}, j {j} is above the diagonal (need j <= i)")
            for i, j in np.argwhere(lower):
                table.flag_job(job, None, f"{where}: missing row for i {i}, j {j}")
            if upper.any() or lower.any():
                broken = True
                continue
            L = np.tril(matrix[m])
            if np.any(np.diag(L) <= 0):
                table.flag_job(job, "value", f"{where}: the diagonal of L must be > 0 (L Lᵀ positive definite)")
                broken = True
            elif np.any(np.abs((L * L).sum(axis=1) - 1) > CORRELATION_TOLERANCE):
                table.flag_job(job, "value", f"{where}: each row of L must have unit norm (L Lᵀ a correlation)")
                broken = True
            out[m] = L
        else:
            c = matrix[m]
            c = np.where(np.isnan(c), c.T, c)
            if np.isnan(c).any():
                for i, j in np.argwhere(np.isnan(c)):
                    if i <= j:
                        table.flag_job(job, None, f"{where}: missing row for i {i}, j {j}")
                broken = True
                continue
            if np.any(np.abs(c - c.T) > CORRELATION_TOLERANCE):
                table.flag_job(job, "value", f"{where}: the correlation must be symmetric")
                broken = True
            elif np.any(np.abs(np.diag(c) - 1) > CORRELATION_TOLERANCE):
                table.flag_job(job, "value", f"{where}: the correlation's diagonal must be 1")
                broken = True
            else:
                try:
                    out[m] = np.linalg.cholesky(c)
                except np.linalg.LinAlgError:
                    table.flag_job(job, "value", f"{where}: the correlation is not positive definite")
                    broken = True
    return None if broken else out


def _per_model(table: _Table, job: str, models: tuple, column: str, count: int | None, positive: bool = False):
    """Values k = 0 … count−1 per model ([M, count]); ``count`` None: optional and unused (empty)."""
    rows = table.rows.get(job, [])
    if count is None:
        return np.zeros((len(models), 0))
    model = _model_axis(table, job, rows, models)
    k, _ = table.numbers(rows, "k", integer=True)
    value, ok = table.numbers(rows, column)
    for p, r in enumerate(rows):
        if ok[p] and positive and value[p] <= 0:
            table.flag(r, column, "must be > 0")
            ok[p] = False
    before = len(table.problems)
    placed, cell = table.grid(job, rows, [("model", model, 0, len(models)), ("k", k, 0, count)])
    if len(table.problems) > before or not ok.all():
        return None
    out = np.empty((len(models), count))
    out[cell] = value[placed]
    return out


def _directions(table: _Table, jobs: _Table, r: int, job: str, source: str, dims: int, bits: int):
    rows = table.rows.get(job, [])
    if source == sobol.JOE_KUO:
        if rows:
            table.flag(
                rows[0],
                None,
                "direction numbers are given but the job's directions are "
                f"{sobol.JOE_KUO} (set directions = {sobol.INPUT} to use them)",
            )
            return None
        if dims > sobol.JOE_KUO_DIMS:
            jobs.flag(
                r,
                "directions",
                f"{sobol.JOE_KUO} has {sobol.JOE_KUO_DIMS} dimensions; the job needs "
                f"{dims} (dates x underlyings): give directions = {sobol.INPUT}",
            )
            return None
        return sobol.joe_kuo(dims, bits)
    if not rows:
        table.flag_job(
            job, None, f"directions = {sobol.INPUT} needs mc_directions rows for dim 0..{dims - 1}, bit 0..{bits - 1}"
        )
        return None
    dim, _ = table.numbers(rows, "dim", integer=True)
    bit, _ = table.numbers(rows, "bit", integer=True)
    value, ok = table.numbers(rows, "value", integer=True)
    before = len(table.problems)
    placed, cell = table.grid(job, rows, [("dim", dim, 0, dims), ("bit", bit, 0, bits)])
    for p, r_ in enumerate(rows):
        if ok[p] and np.isfinite(bit[p]) and 0 <= bit[p] < bits:
            rule = sobol.direction_rule(int(value[p]), int(bit[p]), bits)
            if rule:
                table.flag(r_, "value", rule)
    if len(table.problems) > before or not ok.all():
        return None
    out = np.zeros((dims, bits), dtype=np.uint32)
    out[cell] = value[placed].astype(np.uint32)
    return out


def _bridge(table: _Table, job: str, T: int) -> Bridge | None:
    rows = table.rows[job]
    step, _ = table.numbers(rows, "step", integer=True)
    columns = {c: table.numbers(rows, c, integer=c in ("bi", "li", "ri")) for c in ("bi", "li", "ri", "sd", "lw", "rw")}
    before = len(table.problems)
    placed, (cell,) = table.grid(job, rows, [("step", step, 0, T)])
    if len(table.problems) > before or not all(ok.all() for _, ok in columns.values()):
        return None
    values = {}
    for c, (v, _) in columns.items():
        values[c] = np.empty(T)
        values[c][cell] = v[placed]
    ints = [values[c].astype(np.int32) for c in ("bi", "li", "ri")]
    built = Bridge(*ints, values["sd"], values["lw"], values["rw"])
    by_step = dict(zip(cell.tolist(), np.asarray(rows)[placed].tolist()))
    found = bridges.problems(built)
    for i, column, rule in found:
        table.flag(by_step[i], column, rule)
    return None if found else built


def _contract(terms: _Table, jobs: _Table, r: int, job: str, cls, T: int, U: int):
    """The contract with the job's mc_terms over the defaults; problems for unknown terms and bad shapes."""
    names = contracts.term_names(cls)
    given: dict[str, dict[int, float]] = {}
    rows = terms.rows.get(job, [])
    k, _ = terms.numbers(rows, "k", integer=True)
    value, ok = terms.numbers(rows, "value")
    broken = False
    for p, row in enumerate(rows):
        term = str(terms.frame["term"].iloc[row]).strip()
        if term not in names:
            terms.flag(row, "term", f"{cls.name} has no term {term!r}; its terms: {', '.join(names)}")
            broken = True
        elif ok[p] and np.isfinite(k[p]):
            vector = term in contracts.VECTOR_TERMS
            if (not vector and k[p] != 0) or k[p] < 0:
                terms.flag(row, "k", "must be 0 for a number" if not vector else "must be >= 0")
                broken = True
            elif int(k[p]) in given.setdefault(term, {}):
                terms.flag(row, "k", f"term {term} k {int(k[p])} is given twice")
                broken = True
            else:
                given[term][int(k[p])] = value[p]
        else:
            broken = True
    fields = {}
    for term, entries in given.items():
        if term in contracts.VECTOR_TERMS:
            if sorted(entries) != list(range(len(entries))):
                terms.flag_job(job, "k", f"term {term} must be given for k = 0..n-1 without gaps")
                broken = True
            fields[term] = tuple(entries[i] for i in sorted(entries))
        else:
            fields[term] = entries[0]
    if broken:
        return None
    contract = cls(**fields)
    for rule in contract.shape_rules(T, U):
        jobs.flag(r, "contract", rule)
    return contract


def check_options(job: Job, paths: int | None, precision: str | None) -> None:
    """OptionError if ``paths`` or ``precision`` cannot override the job's."""
    if paths is not None and not 1 <= int(paths) < 2**job.bits:
        raise OptionError(f"paths must be in 1..2^{job.bits} - 1 for job '{job.name}', not {paths}")
    if precision is not None and precision not in PRECISIONS:
        raise OptionError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")


def with_options(job: Job, *, paths: int | None = None, precision: str | None = None) -> Job:
    """The same job with another path count or precision."""
    check_options(job, paths, precision)
    return replace(
        job,
        paths=job.paths if paths is None else int(paths),
        precision=job.precision if precision is None else precision,
    )
