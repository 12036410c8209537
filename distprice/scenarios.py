"""The market a job is priced under: the base curves, and market scenarios for risk jobs (named curve sets,
each the base set with some curves replaced or shifted).

Curves follow the conventions of :mod:`distprice.curves`: ``t`` in years, continuously compounded zero
rates. A scenarios input is a ``scenario, curve, t, zero_rate`` table; shifts are in basis points
(1 bp = 1e-4 of zero rate).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .curves import ZeroCurve, curves_from_frame, load_curves
from .errors import InvalidInputError, OptionError, Problem, shown
from .tables import check_names, read_table

SCENARIO_COLUMNS = ("scenario", "curve", "t", "zero_rate")


def read_scenarios(
    source, base: dict[str, ZeroCurve], allow_large_rates: bool = False
) -> dict[str, dict[str, ZeroCurve]]:
    """Scenario name -> curve set from a path (CSV or Parquet) or DataFrame, in order of first appearance.

    Each set is ``base`` with the curves the scenario lists replacing (or adding) those of the same name;
    base curves the scenario does not list are kept as they are. Scenario names are cast with ``str``.
    Raises :class:`InvalidInputError` listing every problem, rows numbered 1-based in the scenarios input (zero
    rates are bounded as a curves input's, :func:`~distprice.curves.curves_from_frame`).
    """
    table = source if isinstance(source, pd.DataFrame) else read_table(source)
    missing = [c for c in SCENARIO_COLUMNS if c not in table.columns]
    misspelled = check_names("scenarios input", table.columns, SCENARIO_COLUMNS)
    if missing or misspelled:
        raise InvalidInputError(
            misspelled
            + [Problem(None, "scenarios input", col, "scenarios input must have this column") for col in missing]
        )
    if table.empty:
        raise InvalidInputError([Problem(None, "scenarios input", None, "scenarios input has no rows")])
    given = table["scenario"].astype(str)
    blank = (table["scenario"].isna() | given.str.strip().eq("")).to_numpy()
    names = given.to_numpy()
    found = [
        (r, Problem(None, f"scenarios row {r}", "scenario", "scenario name is required"))
        for r in np.flatnonzero(blank) + 1
    ]
    sets = {}
    for name in pd.unique(names[~blank]):
        positions = np.flatnonzero((names == name) & ~blank)
        group = table.iloc[positions].reset_index(drop=True)
        curves, problems = curves_from_frame(group, allow_large_rates)
        for p in problems:  # curves_from_frame labels rows "curves row r", r 1-based within the group
            r = positions[int(p.where.removeprefix("curves row ")) - 1] + 1
            found.append((r, Problem(None, f"scenarios row {r} (scenario '{name}')", p.column, p.rule)))
        if not problems:
            sets[name] = {**base, **{c: curves[c] for c in group["curve"].astype(str).unique()}}
    if found:
        raise InvalidInputError([p for _, p in sorted(found, key=lambda rp: rp[0])])
    return sets


def parse_list(value, what: str, example: str, kind: str = "a list") -> list:
    """The items of an option given as a comma-separated string (each stripped; a blank string: none) or as
    any other iterable but bytes or a mapping (its items as they are). :class:`OptionError` for anything else,
    saying that ``what`` must be ``kind`` or a string such as ``example``."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",")] if value.strip() else []
    if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        return list(value)
    raise OptionError(f"{what} must be {kind} or a string such as {example!r}, not {shown(value)}")


def parse_shifts(text_or_list) -> tuple[float, ...]:
    """Parallel curve shifts in basis points from ``"-100,-50,0,50,100"`` or a list of numbers.

    Raises :class:`OptionError` unless there is at least one shift and every shift is a finite number, given
    once.
    """
    items = parse_list(text_or_list, "shifts", "-100,0,100", "a list of numbers")
    if not items:
        raise OptionError("shifts must hold at least one shift")
    shifts = []
    for item in items:
        try:
            if isinstance(item, bool) or not isinstance(item, (str, numbers.Real)):
                raise ValueError
            shift = float(item)
        except ValueError:
            raise OptionError(f"shifts must be numbers of basis points, not {shown(item)}") from None
        if not math.isfinite(shift):
            raise OptionError(f"shifts must be finite, not {shown(item)}")
        if shift in shifts:
            raise OptionError(f"shifts must differ, but {shift:g} bp is given twice")
        shifts.append(shift)
    return tuple(shifts)


def shifted(base: dict[str, ZeroCurve], shifts: tuple[float, ...]) -> dict[str, dict[str, ZeroCurve]]:
    """One scenario per parallel shift (basis points, as :func:`parse_shifts` gives them), named like
    ``"-100bp"``, ``"+0bp"``, ``"+12.5bp"``: every curve of ``base`` (built-ins included) keeps its knots and
    has ``shift / 1e4`` added to its zero rates."""
    names = [f"{s + 0.0:+g}bp" for s in shifts]  # + 0.0 turns -0.0 into 0.0, named "+0bp"
    return {name: {c: curve.shifted(s / 1e4) for c, curve in base.items()} for name, s in zip(names, shifts)}


@dataclass(frozen=True)
class Market:
    """The curve sets a job prices under: the base set alone (``scenarios`` None), or one set per scenario.
    A plain value, shipped to the workers of a cluster as it is."""

    base: dict[str, ZeroCurve]
    """The base curves: instruments must name one of them. Every curve set holds them all by name."""
    curve_sets: list[dict[str, ZeroCurve]]
    scenarios: list[str] | None = None


BASE_SCENARIO = "base"
"""The name of the base market among the scenarios of a scenarios input."""


def market(
    curves=None,
    scenarios=None,
    shifts_bp: tuple[float, ...] | None = None,
    base_scenario: bool = True,
    allow_large_rates: bool = False,
) -> Market:
    """The market of a job: base ``curves`` (see :func:`~distprice.curves.load_curves`), and either
    ``scenarios`` (a ``scenario, curve, t, zero_rate`` table or path; with ``base_scenario`` the base curves
    come first as the scenario ``base``) or ``shifts_bp`` (parallel shifts of every base curve, basis points,
    as :func:`parse_shifts` gives them; the shift 0 is the base). The zero rates of the curves and scenarios
    inputs lie within ±1 unless ``allow_large_rates``; a shift is taken as given."""
    base = load_curves(curves, allow_large_rates)
    if scenarios is not None:
        sets = read_scenarios(scenarios, base, allow_large_rates)
        if base_scenario:
            if BASE_SCENARIO in sets:
                raise InvalidInputError(
                    [
                        Problem(
                            None,
                            "scenarios input",
                            "scenario",
                            f"the scenario name {BASE_SCENARIO!r} is the base market's: rename "
                            f"it, or leave the base out (base_scenario false, --no-base)",
                        )
                    ]
                )
            sets = {BASE_SCENARIO: base, **sets}
    elif shifts_bp is not None:
        sets = shifted(base, shifts_bp)
    else:
        return Market(base, [base])
    return Market(base, list(sets.values()), list(sets))
