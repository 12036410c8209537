"""A pricing job: the validated portfolio, the market it is priced under, and the priced table it gives.

The same steps serve every way of running: in this process, on a cluster (the client validates and the
workers price), and on a worker that read a slice of a big file itself.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pandas as pd

from .curves import ZeroCurve, builtin_curves, curves_from_frame
from .engines import resolve
from .engines.batch import real_dtype
from .errors import Fp32OverflowError
from .instruments import Limits, Prepared, prepare
from .errors import InvalidInputError, Problem
from .tables import read_table

ON_INVALID = ("strict", "report")
PRICED_COLUMNS = ("price", "value", "bond_price", "option_price", "width", "height", "engine", "error")
SCENARIO_COLUMN = "scenario"
INSTRUMENT_SIGN = {"bond_option": 0.0, "callable_bond": -1.0, "puttable_bond": 1.0}
"""price = option (sign 0), bond - option (callable), bond + option (puttable)."""


def load_curves(curves) -> dict[str, ZeroCurve]:
    """A curve set from None (built-ins only), a path, a ``curve, t, zero_rate`` DataFrame or a dict.

    Raises :class:`InvalidInputError` when the curves input breaks a rule of SPEC §1.2.
    """
    if curves is None:
        return builtin_curves()
    if isinstance(curves, dict):
        return {**builtin_curves(), **curves}
    table = curves if isinstance(curves, pd.DataFrame) else read_table(curves)
    curve_set, problems = curves_from_frame(table)
    if problems:
        raise InvalidInputError(problems)
    return curve_set


@dataclass(frozen=True)
class Market:
    """The curve sets a job prices under: the base set alone (``scenarios`` None), or one set per scenario."""

    base: dict[str, ZeroCurve]
    """The base curves: instruments must name one of them. Every curve set holds them all by name."""
    curve_sets: list[dict[str, ZeroCurve]]
    scenarios: list[str] | None = None


def market(curves=None, scenarios=None, shifts_bp=None) -> Market:
    """The market of a job: base ``curves`` (see :func:`load_curves`), and either ``scenarios`` (a
    ``scenario, curve, t, zero_rate`` table or path) or ``shifts_bp`` (parallel shifts of every base curve,
    basis points: a sequence or a string such as ``"-100,-50,0,50,100"``)."""
    from .config import parse_shifts
    from .scenarios import read_scenarios, shifted

    base = load_curves(curves)
    if scenarios is not None and shifts_bp is not None:
        raise ValueError("give scenarios or shifts_bp, not both")
    if scenarios is not None:
        sets = read_scenarios(scenarios, base)
    elif shifts_bp is not None:
        sets = shifted(base, parse_shifts(shifts_bp))
    else:
        return Market(base, [base])
    return Market(base, list(sets.values()), list(sets))


@dataclass(frozen=True)
class Job:
    """A portfolio checked against the rules (SPEC §4) and the market it is priced under."""

    table: pd.DataFrame
    """The portfolio as given (its extra columns are carried through)."""
    prepared: Prepared
    market: Market
    precision: str = "fp64"

    @property
    def valid_rows(self) -> pd.DataFrame:
        """The canonical columns of the valid rows, renumbered from 0: what the engines price."""
        return self.prepared.table[self.prepared.valid].reset_index(drop=True)

    def with_problems(self, problems: Sequence[Problem]) -> "Job":
        """The job with more problems (rules of the whole portfolio found elsewhere); their rows become invalid."""
        if not problems:
            return self
        valid = self.prepared.valid.copy()
        valid[[p.position for p in problems]] = False
        merged = sorted([*self.prepared.problems, *problems], key=lambda p: p.position)
        return dataclasses.replace(self, prepared=dataclasses.replace(self.prepared, valid=valid, problems=merged))

    def priced(self, bond: np.ndarray, option: np.ndarray, engine_of_row: np.ndarray) -> pd.DataFrame:
        """The priced table (SPEC §3.4) from the prices of the valid rows: ``bond`` and ``option`` are arrays
        of (curve sets, valid rows), ``engine_of_row`` names what priced each valid row. With scenarios the
        table is long: a ``scenario`` column first, then every row of the portfolio under each scenario in
        turn. Raises :class:`Fp32OverflowError` when a priced row is not finite."""
        frames = list(self.priced_frames(bond, option, engine_of_row))
        if self.market.scenarios is None:
            frames[0].index = self.table.index
            return frames[0]
        return pd.concat(frames, ignore_index=True)

    def priced_frames(self, bond: np.ndarray, option: np.ndarray, engine_of_row: np.ndarray,
                      first_set: int = 0) -> Iterator[pd.DataFrame]:
        """The priced table of :meth:`priced` one curve set at a time, for the curve sets ``first_set``,
        ``first_set + 1``, ... that the rows of ``bond`` and ``option`` hold (rows numbered from 0)."""
        canonical, valid = self.prepared.table, self.prepared.valid
        bond, option = np.atleast_2d(bond), np.atleast_2d(option)
        overflowed = ~(np.isfinite(bond) & np.isfinite(option)).all(axis=0)
        if overflowed.any():
            first = canonical["id"].to_numpy()[np.flatnonzero(valid)[np.flatnonzero(overflowed)[0]]]
            raise Fp32OverflowError(f"{self.precision} overflowed on {int(overflowed.sum())} rows (first id "
                                    f"{first!r}); price them in fp64")
        n = len(canonical)
        errors = np.full(n, None, dtype=object)
        for p in self.prepared.problems:
            errors[p.position] = str(p) if errors[p.position] is None else f"{errors[p.position]}; {p}"
        engines = np.full(n, None, dtype=object)
        engines[valid] = engine_of_row
        geometry = self.prepared.geometry
        carried = self.table.drop(columns=[c for c in (*PRICED_COLUMNS, SCENARIO_COLUMN) if c in self.table.columns])
        carried = carried.reset_index(drop=True).assign(
            width=pd.Series(geometry.width, dtype="Int64").mask(~valid),
            height=pd.Series(geometry.height, dtype="Int64").mask(~valid),
            engine=pd.Series(engines, dtype="string"),
            error=pd.array(errors, dtype="string"))
        sign = canonical["instrument"].map(INSTRUMENT_SIGN).to_numpy(dtype=np.float64)
        quantity = canonical["quantity"].to_numpy()
        for s in range(len(bond)):
            b, o = np.full(n, np.nan), np.full(n, np.nan)
            b[valid], o[valid] = bond[s], option[s]
            price = np.where(sign == 0.0, o, b + sign * o)
            frame = carried.assign(price=price, value=price * quantity, bond_price=b, option_price=o)
            frame = frame[[*carried.columns[:-4], *PRICED_COLUMNS]]
            if self.market.scenarios is not None:
                frame.insert(0, SCENARIO_COLUMN, self.market.scenarios[first_set + s])
            yield frame


def prepare_job(portfolio, curves=None, *, scenarios=None, shifts_bp=None, engine: str = "auto",
                precision: str = "fp64", on_invalid: str = "strict", limits: Limits = Limits()) -> Job:
    """Reads and checks every input before anything is priced.

    Raises ValueError for a bad option, and :class:`InvalidInputError` (every problem, naming row, column and
    rule) for bad input when ``on_invalid`` is ``strict``.
    """
    if on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid must be one of {', '.join(ON_INVALID)}, not {on_invalid!r}")
    real_dtype(precision)
    resolve(engine)
    table = portfolio if isinstance(portfolio, pd.DataFrame) else read_table(portfolio)
    chosen = market(curves, scenarios, shifts_bp)
    prepared = prepare(table, chosen.base, limits)
    if prepared.problems and on_invalid == "strict":
        raise InvalidInputError(prepared.problems)
    return Job(table, prepared, chosen, precision)
