"""Market scenarios for risk jobs: named curve sets, each the base set with some curves replaced.

Curves follow the conventions of :mod:`distprice.curves`: ``t`` in years, continuously compounded zero
rates. A scenarios input is a ``scenario, curve, t, zero_rate`` table; shifts are in basis points
(1 bp = 1e-4 of zero rate).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .curves import ZeroCurve, curves_from_frame
from .errors import InvalidInputError, Problem
from .tables import read_table

SCENARIO_COLUMNS = ("scenario", "curve", "t", "zero_rate")


def read_scenarios(source, base: dict[str, ZeroCurve]) -> dict[str, dict[str, ZeroCurve]]:
    """Scenario name -> curve set from a path (CSV or Parquet) or DataFrame, in order of first appearance.

    Each set is ``base`` with the curves the scenario lists replacing (or adding) those of the same name;
    base curves the scenario does not list are kept as they are. Scenario names are cast with ``str``.
    Raises :class:`InvalidInputError` listing every problem, rows numbered 1-based in the scenarios input.
    """
    table = source if isinstance(source, pd.DataFrame) else read_table(source)
    missing = [c for c in SCENARIO_COLUMNS if c not in table.columns]
    if missing:
        raise InvalidInputError([Problem(None, "scenarios input", col, "scenarios input must have this column")
                                 for col in missing])
    if table.empty:
        raise InvalidInputError([Problem(None, "scenarios input", None, "scenarios input has no rows")])
    given = table["scenario"].astype(str)
    blank = (table["scenario"].isna() | given.str.strip().eq("")).to_numpy()
    names = given.to_numpy()
    found = [(r, Problem(None, f"scenarios row {r}", "scenario", "scenario name is required"))
             for r in np.flatnonzero(blank) + 1]
    sets = {}
    for name in pd.unique(names[~blank]):
        positions = np.flatnonzero((names == name) & ~blank)
        group = table.iloc[positions].reset_index(drop=True)
        curves, problems = curves_from_frame(group)
        for p in problems:    # curves_from_frame labels rows "curves row r", r 1-based within the group
            r = positions[int(p.where.removeprefix("curves row ")) - 1] + 1
            found.append((r, Problem(None, f"scenarios row {r} (scenario '{name}')", p.column, p.rule)))
        if not problems:
            sets[name] = {**base, **{c: curves[c] for c in group["curve"].astype(str).unique()}}
    if found:
        raise InvalidInputError([p for _, p in sorted(found, key=lambda rp: rp[0])])
    return sets


def shifted(base: dict[str, ZeroCurve], shifts_bp) -> dict[str, dict[str, ZeroCurve]]:
    """One scenario per parallel shift (basis points), named like ``"-100bp"``, ``"+0bp"``, ``"+12.5bp"``.

    Every curve of ``base`` (built-ins included) keeps its knots and has ``shift / 1e4`` added to its zero
    rates. Raises ValueError for no shifts or for shifts that repeat (that is, give the same name).
    """
    shifts = [float(s) + 0.0 for s in shifts_bp]    # + 0.0 turns -0.0 into 0.0, named "+0bp"
    names = [f"{s:+g}bp" for s in shifts]
    if not names:
        raise ValueError("shifts_bp must hold at least one shift")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"shifts_bp must differ, but {', '.join(repeated)} is given more than once")
    return {name: {c: ZeroCurve(curve.t, curve.zero_rate + s / 1e4) for c, curve in base.items()}
            for name, s in zip(names, shifts)}
