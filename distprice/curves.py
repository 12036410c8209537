"""Zero curves: continuously compounded zero rates, linear in time between knots, flat outside.

Times are in years from today; ``P(0, t) = exp(-z(t) * t)``. A curve set maps a curve id to a
:class:`ZeroCurve`; the built-in curve ``hull`` (Hull's Table 30.2 example) is always available unless
the curves input defines a curve of that name itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import InvalidInputError, Problem
from .tables import read_table

_HULL_DAYS = np.array([3, 31, 62, 94, 185, 367, 731, 1096, 1461, 1826, 2194, 2558, 2922, 3287, 3653])
_HULL_RATES = np.array([0.0501772, 0.0498284, 0.0497234, 0.0496157, 0.0499058, 0.0509389, 0.0579733,
                        0.0630595, 0.0673464, 0.0694816, 0.0708807, 0.0727527, 0.0730852, 0.0739790,
                        0.0749015])
HULL_CURVE = (_HULL_DAYS / 365.0, _HULL_RATES)
"""Knots of the built-in ``hull`` curve: (t in years, zero rate continuously compounded)."""

CURVE_COLUMNS = ("curve", "t", "zero_rate")


@dataclass(frozen=True)
class ZeroCurve:
    """A zero curve given by knots ``t`` (years, strictly increasing, ≥ 0) and ``zero_rate``."""

    t: np.ndarray
    zero_rate: np.ndarray

    def rate(self, t):
        """Zero rate at ``t`` years: linear between knots, flat beyond the first and last knot."""
        return np.interp(t, self.t, self.zero_rate)

    def discount(self, t):
        """Discount factor ``P(0, t) = exp(-z(t) t)``."""
        t = np.asarray(t, dtype=np.float64)
        return np.exp(-self.rate(t) * t)


def builtin_curves() -> dict[str, ZeroCurve]:
    """The curves every job can name without a curves input: ``hull``."""
    return {"hull": ZeroCurve(*HULL_CURVE)}


def curves_from_frame(table: pd.DataFrame) -> tuple[dict[str, ZeroCurve], list[Problem]]:
    """Build a curve set (built-ins included) from a ``curve, t, zero_rate`` table, with the problems found.

    Problems name the 1-based row of the curves input, the column and the rule broken; curves with a
    problem are left out of the set so that instruments naming them are reported too.
    """
    curves = builtin_curves()
    missing = [c for c in CURVE_COLUMNS if c not in table.columns]
    if missing:
        return curves, [Problem(None, "curves input", col, "curves input must have this column") for col in missing]
    problems: list[Problem] = []
    rows = np.arange(1, len(table) + 1)
    ids = table["curve"]
    t = pd.to_numeric(table["t"], errors="coerce").to_numpy(dtype=np.float64)
    z = pd.to_numeric(table["zero_rate"], errors="coerce").to_numpy(dtype=np.float64)

    def flag(mask, column, rule):
        for r in rows[mask]:
            problems.append(Problem(None, f"curves row {r}", column, rule))

    flag(ids.isna().to_numpy(), "curve", "curve id is required")
    flag(~np.isfinite(t), "t", "must be a finite number")
    flag(np.isfinite(t) & (t < 0), "t", "must be >= 0")
    flag(~np.isfinite(z), "zero_rate", "must be a finite number")
    bad_curves = set(ids[~(np.isfinite(t) & (t >= 0) & np.isfinite(z))].dropna().astype(str))
    for name, group in table.assign(_t=t, _z=z, _row=rows).dropna(subset=["curve"]).groupby(
            table["curve"].dropna().astype(str), sort=False):
        steps = np.diff(group["_t"].to_numpy())
        for r in group["_row"].to_numpy()[1:][~(steps > 0)]:
            problems.append(Problem(None, f"curves row {r}", "t",
                                    f"must be strictly increasing within curve '{name}'"))
            bad_curves.add(name)
        if name not in bad_curves:
            curves[name] = ZeroCurve(group["_t"].to_numpy().copy(), group["_z"].to_numpy().copy())
    return curves, problems


def load_curves(curves) -> dict[str, ZeroCurve]:
    """A curve set from None (built-ins only), a path, a ``curve, t, zero_rate`` DataFrame or a dict of
    :class:`ZeroCurve` (built-ins added).

    Raises :class:`InvalidInputError` when the curves input breaks a rule (every problem, by row).
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
