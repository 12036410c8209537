"""A pricing job: its options, the validated portfolio, the market it is priced under, the priced table it
gives and the tally of what it did.

The same steps serve every way of running: in this process, on a cluster (the client validates and the
workers price), and on a worker that read a slice of a big file itself. :class:`JobOptions` is the one
value that says how a job is priced, whatever runs it (the config's ``job`` section, :func:`distprice.price`,
:class:`distprice.Pricer`, ``distprice run``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .choices import ON_INVALID, SCENARIO_TABLES
from .dates import NO_DATE, parse_dates
from .errors import InvalidInputError, JobTooLongError, OptionError, Problem
from .execute import checkpoint, measure_pieces, this_model
from .lattice.dated import (
    SCHEDULE_LABELS,
    TERM_COLUMNS,
    ExerciseSchedule,
    ScheduleRuns,
    read_exercise_schedule,
    schedule_lines,
)
from .lattice.engines import AUTO, resolve
from .lattice.geometry import node_steps
from .lattice.instruments import DATE_COLUMNS, OPTION_ALONE, PORTFOLIO_COLUMNS, Instruments, Limits, Prepared, prepare
from .lattice.measures import (
    DEFAULT_BUMP_BP,
    DEFAULT_KEY_RATES,
    check_bump,
    measure_columns,
    parse_key_rates,
    parse_measures,
)
from .lattice.payment_tables import TABLES, read_steps
from .lattice.payments import Payments, Steps
from .lattice.quotes import QUOTE_COLUMNS, Quotes, read_market_prices
from .lattice.risk import measured_by, price_measures, price_of
from .lattice.swaptions import SWAPTION_COLUMNS
from .models.hull_white_fit import MODEL_COLUMNS
from .precision import precision_name, real_dtype
from .priced import DATED_PRICES, PRICES, SCENARIO, TREE, Priced, labels, long_table, wide_table
from .scenarios import Market, market, parse_shifts
from .tables import check_names, read_portfolio, read_table

MAX_SECONDS = 3600.0
"""The most seconds of pricing a job may be predicted to take, unless its ``max_seconds`` says otherwise."""
PRICED_COLUMNS = (*PRICES, *TREE, "error")
SCENARIO_COLUMN = SCENARIO
log = logging.getLogger(__name__)
INSTRUMENT_SIGN = {
    "bond_option": 0.0,
    "callable_bond": -1.0,
    "puttable_bond": 1.0,
    "bond": 1.0,
    "callable_puttable_bond": 1.0,
    "swaption": 0.0,
}
"""price = option (sign 0: a bond option, a swaption), bond - option (callable), bond + option (puttable; with
both rights, the option is the holder's net: puts less calls), bond (a bond's option is 0)."""


@dataclass(frozen=True)
class JobOptions:
    """How a job is priced.

    ``curves``: the base zero curves (a ``curve, t, zero_rate`` table or path, a dict of curves, or None for
    the built-in ``hull`` curve alone). ``scenarios`` (a ``scenario, curve, t, zero_rate`` table or path) or
    ``shifts_bp`` (parallel shifts of every curve in basis points: a list, or a string such as
    ``"-100,0,100"``) price every instrument under every scenario. ``engine``: ``auto`` (the inspector's plan
    for the machine that prices) or a named engine; ``precision``: ``fp64`` or ``fp32``; ``on_invalid``:
    ``strict`` (any broken rule stops the job before pricing) or ``report`` (invalid rows come back with their
    ``error``); ``limits``: the widest and tallest tree accepted. Dated rows: ``as_of`` is the valuation date
    of the rows without a ``valuation_date`` (``YYYY-MM-DD``, a date, or a day number), and
    ``exercise_schedule`` the exercise dates given by table (``id, date, price, price_type``: a table or path);
    ``coupon_schedule`` step-up (or step-down) coupons (``id, date, coupon``) and ``principal_schedule`` sinking
    funds and amortization (``id, date, repaid``), tables or paths (:mod:`~.lattice.payments`).
    ``allow_empty`` prices a portfolio of no rows (else it is an error); ``max_invalid`` stops a ``report`` job
    before pricing when more rows than that are invalid. ``models``: a model table (or path) from which rows
    naming a ``model`` take their Hull-White a and sigma (see :func:`distprice.calibrate_hull_white`).
    ``base_scenario``: with ``scenarios``, the base curves are priced too, first, as the scenario ``base``.
    ``allow_large_rates`` takes zero rates beyond ±1 and coupons above 1 (100 % a year), else refused as
    percentages typed as numbers (3.86 for 3.86 %).
    ``measures`` (names of :data:`~distprice.lattice.measures.MEASURES`, a list or ``"dv01,duration,krd"``)
    adds risk columns, computed in fp64 on the base curves with bumps of ``bump_bp`` basis points and key
    rates at ``key_rates`` years; rows with a ``market_price`` are measured at their OAS.
    ``timeout``: seconds the job may take (reading and checking included); past it the job stops with
    :class:`~distprice.errors.JobTimeoutError` and nothing is written. None: no limit. ``max_seconds``: the
    most seconds of pricing the job may be predicted to take (by the cost model of what prices it: this
    machine, or a cluster's workers sharing the job) before it starts; a job predicted longer is refused with
    :class:`~distprice.errors.JobTooLongError`. None: no limit. ``scenario_table``: the
    form of a priced table under scenarios (:data:`~distprice.choices.SCENARIO_TABLES`): ``long`` (one
    row per row and scenario: ``id``, ``scenario``, the priced columns a scenario changes, ``error``), ``wide``
    (one row per row, a column per scenario of each of those) or ``full`` (every column under every scenario).
    """

    curves: object = None
    scenarios: object = None
    shifts_bp: object = None
    engine: str = AUTO
    precision: str = "fp64"
    on_invalid: str = "strict"
    limits: Limits = Limits()
    as_of: object = None
    exercise_schedule: object = None
    coupon_schedule: object = None
    principal_schedule: object = None
    allow_empty: bool = False
    max_invalid: int | None = None
    models: object = None
    timeout: float | None = None
    max_seconds: float | None = MAX_SECONDS
    base_scenario: bool = True
    measures: object = None
    bump_bp: float = DEFAULT_BUMP_BP
    key_rates: object = DEFAULT_KEY_RATES
    scenario_table: str = SCENARIO_TABLES[0]
    allow_large_rates: bool = False

    @classmethod
    def of(cls, **options) -> JobOptions:
        """Options from keywords; :class:`OptionError` names an unknown keyword and lists the known ones."""
        known = [f.name for f in dataclasses.fields(JobOptions)]
        unknown = [name for name in options if name not in known]
        if unknown:
            raise OptionError(f"unknown job option {unknown[0]!r}; the options are {', '.join(known)}")
        return cls(**options)

    def checked(self) -> JobOptions:
        """These options with the shifts parsed, once every option is known usable; raises
        :class:`OptionError` (or :class:`~distprice.errors.GpuUnavailableError` for a GPU engine without a
        GPU)."""
        if self.on_invalid not in ON_INVALID:
            raise OptionError(f"on_invalid must be one of {', '.join(ON_INVALID)}, not {self.on_invalid!r}")
        resolve(self.engine, real_dtype(self.precision))
        if self.scenarios is not None and self.shifts_bp is not None:
            raise OptionError("give scenarios or shifts_bp, not both")
        if self.scenario_table not in SCENARIO_TABLES:
            raise OptionError(
                f"scenario_table must be one of {', '.join(SCENARIO_TABLES)}, not {self.scenario_table!r}"
            )
        for name in ("timeout", "max_seconds"):
            seconds = getattr(self, name)
            if seconds is not None and not (
                isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 < seconds < np.inf
            ):
                raise OptionError(f"{name} must be a number of seconds > 0, not {seconds!r}")
        if self.max_invalid is not None and not (
            isinstance(self.max_invalid, (int, np.integer))
            and not isinstance(self.max_invalid, bool)
            and self.max_invalid >= 0
        ):
            raise OptionError(f"max_invalid must be an integer >= 0, not {self.max_invalid!r}")
        shifts = None if self.shifts_bp is None else parse_shifts(self.shifts_bp)
        measures = None if self.measures is None else parse_measures(self.measures)
        if measures and (self.scenarios is not None or self.shifts_bp is not None):
            raise OptionError("risk measures are of the base market: give measures or scenarios / shifts_bp, not both")
        return dataclasses.replace(
            self,
            shifts_bp=shifts,
            as_of=valuation_day(self.as_of),
            measures=measures,
            bump_bp=check_bump(self.bump_bp),
            key_rates=parse_key_rates(self.key_rates),
        )

    @property
    def risk(self) -> Risk | None:
        """The risk the (checked) options ask for, or None."""
        if not self.measures:
            return None
        return Risk(self.measures, self.bump_bp, self.key_rates, self.engine)

    @property
    def real(self) -> np.dtype:
        """The dtype of the precision."""
        return real_dtype(self.precision)

    def market(self) -> Market:
        """The market these options name (curves read and checked)."""
        return market(self.curves, self.scenarios, self.shifts_bp, self.base_scenario, self.allow_large_rates)


@dataclass(frozen=True)
class Risk:
    """The risk measures a job asks for, priced in fp64 on the base curves by ``engine`` (as the job's)."""

    measures: tuple[str, ...]
    bump_bp: float
    key_rates: tuple[float, ...]
    engine: str = AUTO

    @property
    def columns(self) -> tuple[str, ...]:
        return measure_columns(self.measures, self.key_rates)

    def measure(
        self, instruments: Instruments, curves, quotes: Quotes | None, bond=None, option=None, real=np.float64
    ) -> dict[str, np.ndarray]:
        """The measure columns of ``instruments`` (and ``error``, None or why a row's measures are NaN);
        ``bond`` and ``option``: their values on ``curves`` from the job's pricing in precision ``real``, which
        the OAS search starts from when they are float64. The rows are measured in pieces
        (:func:`~.execute.measure_pieces`) of about MEASURE_PIECE_SECONDS of predicted work on the engine that
        measures: a risk engine holds its rows' events, trees and bumped values at once, so a big book's
        memory stays that of a piece, and a stop waits for one piece at most; each row's measures are what they
        are measured whole."""
        base = None
        if bond is not None and np.dtype(real) == np.float64:
            base = price_of(instruments.table["instrument"].to_numpy(dtype=object), bond, option)
        rows = np.arange(len(instruments))
        pieces = measure_pieces(instruments, measured_by(self.engine), this_model(np.float64), len(self.columns))
        out = {}
        for piece in pieces:
            checkpoint()
            part = price_measures(
                instruments.take(piece),
                curves,
                np.float64,
                self.engine,
                self.measures,
                self.bump_bp,
                self.key_rates,
                None if quotes is None else quotes.take(piece),
                None if base is None else base[piece],
            )
            if len(pieces) == 1:
                return part
            for name, values in part.items():
                out.setdefault(name, np.empty(len(rows), dtype=values.dtype))[piece] = values
        return out


def read_risk(table: pd.DataFrame, prepared: Prepared, risk: Risk | None, first_row: int = 0):
    """The market prices a job with measures reads (``market_price``, ``market_price_type``), their problems
    joined to ``prepared``'s rows: the prepared rows and the quotes of every row (None without measures)."""
    if risk is None:
        return prepared, None
    quotes, problems = read_market_prices(table, first_row)
    if problems:
        valid = prepared.valid.copy()
        valid[[p.position for p in problems]] = False
        merged = sorted([*prepared.problems, *problems], key=lambda p: p.position)
        prepared = dataclasses.replace(prepared, valid=valid, problems=merged)
    return prepared, quotes


@dataclass(frozen=True)
class Job:
    """A portfolio checked against the rules and the market it is priced under."""

    table: pd.DataFrame
    """The portfolio as given (its extra columns are carried through)."""
    prepared: Prepared
    market: Market
    real: np.dtype = np.dtype(np.float64)
    """The precision of the node arithmetic."""
    on_invalid: str = "strict"
    """``strict``: a row that cannot be priced fails the job (its problem named); ``report``: it is that row's
    error."""
    risk: Risk | None = None
    quotes: Quotes | None = None
    """The market prices of every row (with measures), for the OAS."""
    scenario_table: str = SCENARIO_TABLES[0]
    """The form of the priced table under scenarios (:mod:`~distprice.scenario_tables`)."""

    def valid_quotes(self) -> Quotes | None:
        """The market prices of the valid rows (None without measures)."""
        return None if self.quotes is None else self.quotes.take(np.flatnonzero(self.prepared.valid))

    def measure(self, bond=None, option=None) -> dict[str, np.ndarray] | None:
        """The measure columns of the valid rows, in this process (None without measures); ``bond`` and
        ``option``: the valid rows' values on the base curves from the job's pricing, if done."""
        if self.risk is None:
            return None
        return self.risk.measure(self.instruments(), self.market.base, self.valid_quotes(), bond, option, self.real)

    def instruments(self) -> Instruments:
        """The valid rows with their geometry: what the engines price."""
        return self.prepared.instruments()

    def with_problems(self, problems: Sequence[Problem]) -> Job:
        """The job with more problems (rules of the whole portfolio found elsewhere); their rows become invalid."""
        if not problems:
            return self
        valid = self.prepared.valid.copy()
        valid[[p.position for p in problems]] = False
        merged = sorted([*self.prepared.problems, *problems], key=lambda p: p.position)
        return dataclasses.replace(self, prepared=dataclasses.replace(self.prepared, valid=valid, problems=merged))

    def priced(self, bond: np.ndarray, option: np.ndarray, engine_of_row, measured: dict | None = None) -> pd.DataFrame:
        """The priced table from the prices of the valid rows: ``bond`` and ``option`` are arrays
        of (curve sets, valid rows), ``engine_of_row`` names what priced each valid row (names, or a
        Categorical of them). With scenarios the table takes the job's ``scenario_table`` form
        (:mod:`~distprice.priced`). ``measured``: the risk columns of the valid rows (:meth:`measure`), put after
        the prices. Raises :class:`InvalidInputError` in strict mode when a priced row is not finite."""
        return self.table_of(self.priced_columns(bond, option, engine_of_row, measured=measured))

    @property
    def by_scenario(self) -> bool:
        """Whether the priced table holds every row under one scenario, then under the next (the ``full`` form),
        rather than each row's scenarios together (or no scenarios)."""
        return self.market.scenarios is not None and self.scenario_table == "full"

    def table_of(self, priced: Priced) -> pd.DataFrame:
        """The priced table of some rows in the job's form: without scenarios the one table, else the ``long``,
        ``wide`` or ``full`` form (the full form of these rows alone, scenario after scenario)."""
        if self.market.scenarios is None:
            return priced.frame(0)
        if self.scenario_table == "long":
            return long_table(priced)
        if self.scenario_table == "wide":
            return wide_table(priced)
        return pd.concat([priced.frame(s) for s in range(priced.sets)], ignore_index=True)

    def priced_columns(
        self,
        bond: np.ndarray,
        option: np.ndarray,
        engine_of_row,
        first_set: int = 0,
        measured: dict | None = None,
        echo: bool = True,
        rows: slice = slice(None),
    ) -> Priced:
        """The portfolio's ``rows`` (a range, a step of 1) priced under the curve sets ``first_set``,
        ``first_set + 1``, ... that the rows of ``bond`` and ``option`` hold (the valid rows of ``rows``, numbered
        from 0), as the columns every form of the table is made of. ``echo``: the portfolio's columns the table
        takes (only ``id`` for the ``long`` scenario table); without it, none (whoever holds the portfolio puts
        them back, :func:`echoed`)."""
        start, stop, _ = rows.indices(len(self.prepared.table))
        span = slice(start, stop)
        canonical, valid = self.prepared.table.iloc[span], self.prepared.valid[span]
        bond, option = np.atleast_2d(bond), np.atleast_2d(option)
        unpriced = ~(np.isfinite(bond) & np.isfinite(option))
        if unpriced.any() and self.on_invalid == "strict":
            rows_of = start + np.flatnonzero(valid)
            raise InvalidInputError(self._unpriced(rows_of[np.flatnonzero(unpriced.any(axis=0))]))
        n, k = len(canonical), len(bond)
        errors: dict[int, str] = {}  # by row of the span: the few rows in error
        for p in self.prepared.problems:
            if start <= p.position < stop:
                r = p.position - start
                errors[r] = f"{errors[r]}; {p}" if r in errors else str(p)
        measures = {}
        if measured is not None:
            for name in self.risk.columns:
                measures[name] = np.full(n, np.nan)
                measures[name][valid] = measured[name]
            for r, why in zip(np.flatnonzero(valid).tolist(), measured["error"]):
                if why is not None:
                    errors[r] = f"{errors[r]}; {why}" if r in errors else why
        named = engine_of_row if isinstance(engine_of_row, pd.Categorical) else np.asarray(engine_of_row, dtype=object)
        engine_codes, engine_names = pd.factorize(named)
        engines = np.full(n, -1, dtype=np.int64)
        engines[valid] = engine_codes
        geometry = self.prepared.geometry
        kinds, names = pd.factorize(canonical["instrument"])  # a few labels: map them, not the rows
        sign = np.array([INSTRUMENT_SIGN.get(name, np.nan) for name in names] + [np.nan])[kinds]
        b, o = np.full((k, n), np.nan), np.full((k, n), np.nan)
        b[:, valid], o[:, valid] = bond, option
        failed = [np.flatnonzero(valid)[unpriced[s]] for s in range(k)]
        for s, rows_failed in enumerate(failed):
            b[s, rows_failed] = o[s, rows_failed] = np.nan
        price = np.where(sign == 0.0, o, b + sign * o)
        notional = canonical["notional"].to_numpy()
        held = np.where(np.isnan(notional), canonical["quantity"].to_numpy(), notional / canonical["face"].to_numpy())
        changing = {
            "price": price,
            "value": price * held,
            "bond_price": b,
            "option_price": o,
        }
        if self.prepared.dated is not None:
            dated = [self._dated_prices(price[s], self.market.curve_sets[first_set + s], span) for s in range(k)]
            changing["dirty_price"] = np.stack([d["dirty_price"] for d in dated])
            changing["accrued"] = dated[0]["accrued"]
            changing["clean_price"] = np.stack([d["clean_price"] for d in dated])
        impossible = [self._impossible(changing, s, start) for s in range(k)]
        if any(impossible) and self.on_invalid == "strict":
            names = self.market.scenarios
            raise InvalidInputError(
                [
                    p if names is None else dataclasses.replace(p, where=f"{p.where} under scenario {names[s]!r}")
                    for s, found in enumerate(impossible, first_set)
                    for p in found
                ]
            )
        for s, found in enumerate(impossible):  # such a price is no output: the row's error under that curve set
            at = [p.position - start for p in found]
            for values in changing.values():
                if values.ndim == 2:
                    values[s, at] = np.nan
            for values in measures.values():  # measures come without scenarios: of curve set 0
                values[at] = np.nan
        long = self.market.scenarios is not None and self.scenario_table == "long"
        echoed = (["id"] if long else list(self.table.columns)) if echo else []
        steps = np.where(valid, node_steps(geometry.width[span], geometry.height[span]), 0.0)
        return Priced(
            inputs=self.table[echoed].iloc[span].reset_index(drop=True),
            index=self.table.index[span],
            scenarios=None if self.market.scenarios is None else list(self.market.scenarios[first_set : first_set + k]),
            changing=changing,
            measures=measures,
            tree={
                "width": pd.Series(geometry.width[span], dtype="Int64").mask(~valid),
                "height": pd.Series(geometry.height[span], dtype="Int64").mask(~valid),
                "engine": labels(engines, engine_names),
            },
            errors=errors,
            unpriced=[
                {
                    **{int(r): p.rule for r, p in zip(rows_failed, self._unpriced(start + rows_failed))},
                    **{p.position - start: str(p) for p in found},
                }
                for rows_failed, found in zip(failed, impossible)
            ],
            node_steps=steps,
        )

    def _unpriced(self, rows: np.ndarray) -> list[Problem]:
        """Problems of rows whose tree's values left the float range while they were priced."""
        fp = precision_name(self.real)
        rule = f"could not be priced: its tree's values left the {fp} range" + (
            " (price it in fp64)" if fp == "fp32" else ""
        )
        return [Problem(int(r), self._row(r), None, rule) for r in rows]

    def _row(self, r: int) -> str:
        """How a message names row ``r`` of the portfolio."""
        return f"row {r + 1} (id {self.prepared.table['id'].iat[r]!r})"

    def _impossible(self, changing: dict[str, np.ndarray], s: int, start: int) -> list[Problem]:
        """Problems of the rows of ``changing`` (some rows from ``start``, under their curve set ``s``) priced as no
        bond can be: a ``price``, or a dated row's ``clean_price`` (its dirty price less the accrued interest), below
        zero, which comes of zero rates or coupons too large, most likely percentages typed as numbers; or a
        ``bond_price`` of 0 or less, where coupons and a redemption to come are worth more than 0 (rates so large
        that every discount factor is 0, or an engine's fault)."""
        price, bond = changing["price"][s], changing["bond_price"][s]
        clean = changing["clean_price"][s] if "clean_price" in changing else price
        wrong = (price < 0) | (clean < 0) | (bond <= 0)
        if not wrong.any():  # the usual case: one pass over the prices
            return []
        hint = "a price is never below zero; check the curve's zero rates and the coupon (decimals: 0.05 is 5 %)"
        worthless = "coupons and a redemption to come are worth more than 0; check the curve's zero rates, or price "
        worthless += "the row again"
        problems = []
        for r in np.flatnonzero(wrong).tolist():
            if bond[r] <= 0:
                column, said = "bond_price", f"{bond[r]:.6g}: {worthless}"
            elif price[r] < 0:
                column, said = "price", f"{price[r]:.6g}: {hint}"
            else:
                dirty, accrued = changing["dirty_price"][s, r], changing["accrued"][r]
                column = "clean_price"
                said = f"{clean[r]:.6g} (dirty {dirty:.6g} less accrued {accrued:.6g}): {hint}"
            problems.append(Problem(start + r, self._row(start + r), column, said))
        return problems

    def _dated_prices(self, price: np.ndarray, curves, span: slice) -> dict[str, np.ndarray]:
        """``dirty_price = price / P(0, t(S))`` (the value at settlement), ``accrued`` (at settlement) and
        ``clean_price = dirty_price - accrued`` of the dated valid rows of ``span`` under ``curves`` (``price``:
        of the span's rows); NaN elsewhere, and ``accrued``, ``clean_price`` NaN for bond options and swaptions."""
        prepared = self.prepared
        dated = prepared.dated
        mask = (prepared.is_dated & prepared.valid)[span]
        rows = slice(None) if mask.all() else np.flatnonzero(mask)  # every row: views, no copies
        dirty, accrued = np.full(len(price), np.nan), np.full(len(price), np.nan)
        codes, names = pd.factorize(prepared.table["curve"].iloc[span])
        day, curve = dated.valuation[span][rows], codes[rows]
        settle = ((dated.settlement[span] - dated.valuation[span]) / dated.days_per_year[span])[rows]
        discount = np.empty(len(day))
        if len(day):  # rows grouped by (curve, valuation date), each group's curve seen from its date once
            offset = day - day.min()
            groups, keys = pd.factorize(curve * (offset.max() + 1) + offset)
            order = np.argsort(groups.astype(np.min_scalar_type(len(keys))), kind="stable")  # radix: small codes
            for here in np.split(order, np.cumsum(np.bincount(groups))[:-1]):
                name, valuation = str(names[curve[here[0]]]), int(day[here[0]])
                discount[here] = curves[name].at(valuation).discount(settle[here])
        dirty[rows] = price[rows] / discount
        option = prepared.table["instrument"].iloc[span].isin(OPTION_ALONE).to_numpy()[rows]
        accrued[rows] = np.where(option, np.nan, dated.accrued[span][rows])
        return {"dirty_price": dirty, "accrued": accrued, "clean_price": dirty - accrued}


def valuation_day(as_of) -> int:
    """The day number of a valuation date (``YYYY-MM-DD``, a date, a day number) or ``NO_DATE`` for None;
    :class:`OptionError` for anything else."""
    if as_of is None:
        return NO_DATE
    if isinstance(as_of, (int, np.integer)) and not isinstance(as_of, bool):
        return int(as_of)
    days, bad = parse_dates(pd.Series([as_of]).astype("string") if isinstance(as_of, str) else pd.Series([as_of]))
    if len(bad) or days[0] == NO_DATE:
        raise OptionError(f"as_of must be a date YYYY-MM-DD, not {as_of!r}")
    return int(days[0])


def model_table(source) -> pd.DataFrame | None:
    """A model table (a table or path, or None), its parameters as float64; :class:`InvalidInputError` when it
    lacks a column or a parameter given is not a number (true or false is not one)."""
    if source is None:
        return None
    table = source if isinstance(source, pd.DataFrame) else read_table(source)
    missing = [c for c in ("model", "mean_reversion", "volatility") if c not in table.columns]
    problems = check_names("model table", table.columns, MODEL_COLUMNS)
    if missing or problems:
        raise InvalidInputError(problems + [Problem(None, "model table", c, "must have this column") for c in missing])
    numbers: dict[str, np.ndarray] = {}
    for column in ("mean_reversion", "volatility"):
        raw = table[column]  # a short table: its values one by one
        flags = np.array([isinstance(v, (bool, np.bool_)) for v in raw], dtype=bool)
        values = pd.to_numeric(raw.astype(object).where(~flags), errors="coerce")
        numbers[column] = values.to_numpy(dtype=np.float64, na_value=np.nan)
        problems += [
            Problem(int(r), f"model table row {r + 1}", column, "must be a number")
            for r in np.flatnonzero(raw.notna().to_numpy() & np.isnan(numbers[column]))
        ]
    if problems:
        raise InvalidInputError(problems)
    return table.assign(**numbers)


def exercise_table(source) -> pd.DataFrame | None:
    """A job's exercise schedule table: ``source`` itself, or read from its path, once a process while the file
    is unchanged (each slice of a big file takes its own rows from it, :func:`exercise_lines`)."""
    if source is None or isinstance(source, pd.DataFrame):
        return source
    key = _file_key(source)
    return read_table(source, labels=SCHEDULE_LABELS) if key is None else _read_exercise_table(*key)


def exercise_lines(source, portfolio: pd.DataFrame) -> np.ndarray | None:
    """The rows of a job's exercise schedule table (a table or path, or None) whose id is one of ``portfolio``'s
    (:func:`~.lattice.dated.schedule_lines`); a file's runs of one id are found once a process while it is
    unchanged."""
    table = exercise_table(source)
    if table is None:
        return None
    key = None if isinstance(source, pd.DataFrame) or "id" not in table.columns else _file_key(source)
    return schedule_lines(table, portfolio_ids(portfolio), None if key is None else _exercise_runs(*key))


def _file_key(source) -> tuple[str, int, int] | None:
    """A file's path, modification time (ns) and size; None for a folder of parts (or nothing: its reader says
    so)."""
    path = Path(source)
    if not path.is_file():
        return None
    stat = path.stat()
    return str(path), stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=1)
def _read_exercise_table(path: str, modified: int, size: int) -> pd.DataFrame:
    """The table of ``path`` as it was when last modified at ``modified`` (ns) with ``size`` bytes."""
    return read_table(path, labels=SCHEDULE_LABELS)


@functools.lru_cache(maxsize=1)
def _exercise_runs(path: str, modified: int, size: int) -> ScheduleRuns:
    """The runs of one id of :func:`_read_exercise_table`'s table."""
    return ScheduleRuns.of(_read_exercise_table(path, modified, size))


def portfolio_ids(portfolio: pd.DataFrame):
    """The ``id`` column of a portfolio (missing ids where it has none)."""
    return portfolio["id"] if "id" in portfolio.columns else np.full(len(portfolio), None)


def exercise_schedule(source, portfolio: pd.DataFrame, lines=None) -> ExerciseSchedule | None:
    """The exercise schedule table (a table or path, or None) as the per-row schedules of ``portfolio``;
    :class:`InvalidInputError` for any problem of the table (it is market data of the whole job). With
    ``lines`` (a slice of a big portfolio: :func:`~.lattice.dated.schedule_lines`), only those rows of the table
    are read."""
    if source is None:
        return None
    schedule, problems = read_exercise_schedule(exercise_table(source), portfolio_ids(portfolio), lines)
    if problems:
        raise InvalidInputError(problems)
    return schedule


PAYMENT_OPTIONS = {"coupon schedule": "coupon_schedule", "principal schedule": "principal_schedule"}
"""The job option of each table of :data:`~.lattice.payments.TABLES`."""


def payment_tables(options: JobOptions) -> dict[str, pd.DataFrame]:
    """The coupon and principal schedule tables a job was given (read from their paths), by table name."""
    tables = {}
    for name, option in PAYMENT_OPTIONS.items():
        source = getattr(options, option)
        if source is not None:
            tables[name] = source if isinstance(source, pd.DataFrame) else read_table(source)
    return tables


def payment_lines(tables: dict[str, pd.DataFrame], portfolio: pd.DataFrame) -> dict[str, np.ndarray]:
    """The rows of each table of ``tables`` whose id is one of ``portfolio``'s (a slice of a big file)."""
    return {name: schedule_lines(table, portfolio_ids(portfolio)) for name, table in tables.items()}


def payments(tables: dict[str, pd.DataFrame], portfolio: pd.DataFrame, lines=None) -> Payments | None:
    """The coupon and principal schedule ``tables`` (:func:`payment_tables`) as the per-row schedules of
    ``portfolio`` (None without either); :class:`InvalidInputError` for any problem of a table's lines (market
    data of the whole job). With ``lines`` (by table: :func:`payment_lines`), only those rows are read."""
    if not tables:
        return None
    read: dict[str, Steps | None] = dict.fromkeys(TABLES)
    problems: list[Problem] = []
    for name, table in tables.items():
        read[name], found = read_steps(name, table, portfolio_ids(portfolio), None if lines is None else lines[name])
        problems += found
    if problems:
        raise InvalidInputError(problems)
    return Payments.of(read["coupon schedule"], read["principal schedule"], len(portfolio))


def prepare_job(portfolio, options: JobOptions) -> Job:
    """Reads and checks every input before anything is priced: ``portfolio`` (a DataFrame or a CSV/Parquet
    path) under ``options`` (checked already, :meth:`JobOptions.checked`).

    Raises :class:`InvalidInputError` (every problem, naming row, column and rule) for bad input when
    ``options.on_invalid`` is ``strict``.
    """
    table = portfolio if isinstance(portfolio, pd.DataFrame) else read_portfolio(portfolio)
    check_columns(table.columns, len(table), options)
    with ThreadPoolExecutor(1, thread_name_prefix="distprice-schedule") as beside:
        # the exercise schedule table is read while the portfolio's columns are checked
        schedule = beside.submit(exercise_schedule, options.exercise_schedule, table)
        chosen = options.market()
        prepared = prepare(
            table,
            chosen.base,
            options.limits,
            as_of=options.as_of,
            exercise_schedule=schedule.result,
            payments=payments(payment_tables(options), table),
            curve_sets=chosen.curve_sets,
            models=model_table(options.models),
            allow_large_rates=options.allow_large_rates,
        )
        schedule.result()  # its problems, also where no row is dated
    prepared, quotes = read_risk(table, prepared, options.risk)
    if prepared.problems and options.on_invalid == "strict":
        raise InvalidInputError(prepared.problems)
    invalid = int((~prepared.valid).sum())
    if options.max_invalid is not None and invalid > options.max_invalid:
        raise InvalidInputError(
            [
                Problem(
                    None,
                    "portfolio",
                    None,
                    f"{invalid} rows are invalid, more than max_invalid ({options.max_invalid}): nothing is priced",
                )
            ]
            + prepared.problems
        )
    return Job(table, prepared, chosen, options.real, options.on_invalid, options.risk, quotes, options.scenario_table)


PORTFOLIO_READ = tuple(
    dict.fromkeys((*PORTFOLIO_COLUMNS, *DATE_COLUMNS, *TERM_COLUMNS, *SWAPTION_COLUMNS, "model", *QUOTE_COLUMNS))
)
"""Every column of a portfolio distprice reads."""


def check_columns(columns, rows: int, options: JobOptions) -> None:
    """A portfolio's columns and size, before its rows are read: :class:`InvalidInputError` for a column named
    as one distprice writes (it would be overwritten), for one that misspells a column distprice reads
    (:func:`~distprice.tables.check_names`), and for no rows at all unless ``allow_empty``."""
    risk = options.risk.columns if options.risk is not None else ()
    written = (*PRICED_COLUMNS, *DATED_PRICES, *risk, SCENARIO_COLUMN)
    taken = [c for c in written if c in columns]
    problems = [
        Problem(None, "portfolio", c, "is a column distprice writes in the priced table: rename it") for c in taken
    ]
    problems += check_names("portfolio", [c for c in columns if c not in written], PORTFOLIO_READ)
    if rows == 0 and not options.allow_empty:
        problems.append(Problem(None, "portfolio", None, "has no rows (allow_empty prices an empty portfolio)"))
    if problems:
        raise InvalidInputError(problems)


def check_predicted(seconds: float, max_seconds: float | None, where: str, model) -> None:
    """Logs a job's predicted seconds of pricing (every scenario) ``where`` it is priced ("in this process",
    "on 4 workers") under the cost ``model`` that predicts them, before it starts; a job predicted past
    ``max_seconds`` (None: no limit) is refused: :class:`~distprice.errors.JobTooLongError`, saying both and how
    to raise the limit."""
    limit = "no limit" if max_seconds is None else f"limit {duration(max_seconds)}"
    log.info("predicted pricing time %s %s (%s cost model; %s)", duration(seconds), where, model.source, limit)
    if max_seconds is not None and seconds > max_seconds:
        raise JobTooLongError(
            f"the job is predicted to take {duration(seconds)} of pricing {where} ({model.device}, "
            f"{model.source} cost model), more than its limit of {duration(max_seconds)}; nothing was priced. "
            f"Raise the limit (--max-seconds, max_seconds= in Python or job.max_seconds in the config), price "
            f"it on more workers, or split the portfolio"
        )


def duration(seconds: float) -> str:
    """Seconds in words: ``42.5 s``, ``1377 s (23 min)``, ``9000 s (2.5 h)``."""
    if not math.isfinite(seconds) or seconds < 100:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds:.0f} s ({seconds / 60:.0f} min)"
    return f"{seconds:.0f} s ({seconds / 3600:.1f} h)"


@dataclass(frozen=True)
class Summary:
    """What a job did: rows of the portfolio, rows priced under every scenario, scenarios, prices (row and
    scenario pairs priced), the total value under each scenario, node-steps (all scenarios), seconds of
    pricing, workers (0: this process), the rows each engine priced, and the seconds numba spent compiling the
    job's kernels on their first use (``compiled``: left out of ``seconds``, and of the node-steps per second)."""

    rows: int
    priced: int
    node_steps: float
    seconds: float
    workers: int
    engines: dict
    scenarios: int = 1
    prices: int = 0
    values: dict = dataclasses.field(default_factory=dict)
    compiled: float = 0.0

    def line(self, wall: float | None = None) -> str:
        """The summary in one line; ``wall``: the command's whole time (a cluster's start included)."""
        rate = self.node_steps / self.seconds if self.seconds > 0 else 0.0
        engines = ", ".join(f"{k} {v}" for k, v in self.engines.items()) or "none"
        where = f"on {self.workers} worker{'s' * (self.workers != 1)}" if self.workers else "in this process"
        under = f" under {self.scenarios} scenarios ({self.prices} prices)" if self.scenarios > 1 else ""
        totals = list(self.values.values())
        value = (
            f"total value {totals[0]:.10g}"
            if len(totals) == 1
            else f"total value {min(totals):.10g} to {max(totals):.10g} across scenarios"
            if totals
            else "no value"
        )
        wall = f", {wall:.2f} s in all" if wall is not None else ""
        compiled = f", compiled in {self.compiled:.2f} s (numba, once)" if self.compiled > 0 else ""
        return (
            f"priced {self.priced} of {self.rows} rows ({self.rows - self.priced} invalid){under}, {value}, "
            f"{self.node_steps:.3e} node-steps in {self.seconds:.2f} s ({rate:.3e} NS/s) {where}{wall}, "
            f"engines: {engines}{compiled}"
        )


def echoed(portfolio: pd.DataFrame, priced: pd.DataFrame) -> pd.DataFrame:
    """The priced table of ``portfolio`` from the priced columns of its rows under one curve set
    (:meth:`Job.priced` without ``echo``): the ``scenario`` column if any, the portfolio's columns, then the
    priced ones; indexed as ``priced``."""
    parts = [portfolio.set_axis(priced.index), priced.drop(columns=[SCENARIO_COLUMN], errors="ignore")]
    if SCENARIO_COLUMN in priced.columns:
        parts.insert(0, priced[[SCENARIO_COLUMN]])
    return pd.concat(parts, axis=1)


class Tally:
    """Running totals of the pieces of a job's priced table (``rows`` of the portfolio, each under
    ``scenarios`` curve sets), for its :class:`Summary`."""

    def __init__(self, rows: int, scenarios: int = 1):
        self.rows, self.scenarios, self.prices, self.node_steps, self.engines = rows, scenarios, 0, 0.0, {}
        self.values: dict = {}

    def add(self, priced: Priced) -> Priced:
        """Counts some rows of the job priced under some of its curve sets (the prices and their node-steps, the
        rows each engine priced, the value under each scenario); returns them."""
        done = np.isfinite(priced.changing["price"])
        per_row = done.sum(axis=0)
        self.prices += int(per_row.sum())
        self.node_steps += float(priced.node_steps @ per_row)
        engine = priced.tree["engine"]
        codes, names = pd.factorize(engine)
        counts = np.bincount(codes[codes >= 0], weights=per_row[codes >= 0], minlength=len(names))
        for name, count in zip(names, counts):
            self.engines[name] = self.engines.get(name, 0) + int(count)
        totals = np.nansum(priced.changing["value"], axis=1)
        for name, total in zip(priced.scenarios or [None], totals):
            self.values[name] = self.values.get(name, 0.0) + float(total)
        return priced

    def absorb(self, other: Tally) -> None:
        """Adds the totals of ``other``, a tally of other rows of the same job (a slice a worker wrote)."""
        self.prices += other.prices
        self.node_steps += other.node_steps
        for name, count in other.engines.items():
            self.engines[name] = self.engines.get(name, 0) + count
        for name, total in other.values.items():
            self.values[name] = self.values.get(name, 0.0) + total

    def summary(self, seconds: float, workers: int) -> Summary:
        per_row = max(self.scenarios, 1)
        return Summary(
            self.rows,
            self.prices // per_row,
            self.node_steps,
            seconds,
            workers,
            {name: count // per_row for name, count in self.engines.items()},
            self.scenarios,
            self.prices,
            dict(self.values),
        )
