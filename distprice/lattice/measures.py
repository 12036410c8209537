"""The risk measures a job can ask for: their names, defaults and the output columns they fill.

Conventions (one row at a time, from its own tree): ``P`` is the row's ``price`` (the value at the valuation
date, in the units of ``face``), taken at the base point: spread ``s = 0``, or ``s = oas`` when the row has a
market price. A bump of ``h`` adds ``h`` (decimal) to the continuously compounded zero rate ``z(t)`` of the
row's curve at every time t (parallel), or ``h * b_k(t)`` (key rate k: a triangle on the key grid, see
:func:`~.sweeps.key_rate_bumps`); the tree is refitted to the bumped curve.

=================== ===================================================== ==========================
column              definition                                            unit
=================== ===================================================== ==========================
dv01                ``(P(-h) - P(+h)) / 2 * (1bp / h)``                    price per 1 bp
effective_duration  ``(P(-h) - P(+h)) / (2 P h)``                         years
effective_convexity ``(P(-h) + P(+h) - 2 P) / (P h^2)``                   years squared
krd_<K>y            ``(P(-h b_k) - P(+h b_k)) / (2 P h)``                 years; a plain bond's sum to
                                                                          the duration, to O(h²)
vega                ``(P(sigma + 1bp) - P(sigma - 1bp)) / 2``              price per 1 bp of sigma
oas                 ``s`` with dirty price at settlement = market's       decimal (0.01 = 100 bp)
=================== ===================================================== ==========================
"""

from __future__ import annotations

import math
import numbers

from ..errors import OptionError, shown
from ..scenarios import parse_list

MEASURES = ("dv01", "duration", "convexity", "krd", "vega", "oas")
"""What a job may ask for (``--measures``)."""
DEFAULT_BUMP_BP = 10.0
"""The bump h of the parallel and key-rate measures, in basis points. Tree prices have kinks where a node
enters or leaves the exercise region: second differences over 1-2 bp are noise, over 10 bp they are not."""
DEFAULT_KEY_RATES = (1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 20.0, 30.0)
"""The key grid, years of the row's curve."""
VEGA_BUMP = 1e-4
"""sigma moves by +-1 bp (absolute) for vega."""
OAS_BRACKET = (-0.2, 0.2)
"""The OAS is searched in this interval (decimal); a row whose market price no spread in it matches gets an
error instead."""
OAS_TOLERANCE = 1e-10
"""The OAS is within this distance of the spread that matches the market price exactly (decimal)."""
BP = 1e-4

COLUMNS = {
    "dv01": ("dv01",),
    "duration": ("effective_duration",),
    "convexity": ("effective_convexity",),
    "vega": ("vega",),
    "oas": ("oas",),
}
"""The output column of each measure but ``krd`` (one column per key rate: :func:`krd_column`)."""
MARKET_COLUMNS = ("market_price", "market_price_type")
"""Portfolio columns the OAS reads: the market price (units of ``face``) and whether it is ``clean``
(default) or ``dirty``."""
PRICE_TYPES = ("clean", "dirty")


def krd_column(key: float) -> str:
    """The column of the key-rate duration at ``key`` years: ``krd_1y``, ``krd_0.5y``."""
    return f"krd_{key:g}y"


def measure_columns(measures, key_rates=DEFAULT_KEY_RATES) -> tuple[str, ...]:
    """The output columns of ``measures`` (names of :data:`MEASURES`), in the order of :data:`MEASURES`."""
    columns = []
    for name in MEASURES:
        if name in measures:
            columns += [krd_column(k) for k in key_rates] if name == "krd" else list(COLUMNS[name])
    return tuple(columns)


def parse_measures(value) -> tuple[str, ...]:
    """Measure names from ``"dv01,duration,krd"`` or a list; :class:`OptionError` for an unknown or repeated
    name or none at all."""
    items = [str(item).strip().lower() for item in parse_list(value, "measures", "dv01,duration,convexity")]
    if not items:
        raise OptionError(f"measures must name at least one of {', '.join(MEASURES)}")
    for item in items:
        if item not in MEASURES:
            raise OptionError(f"unknown measure {item!r}; choose from {', '.join(MEASURES)}")
    if len(set(items)) < len(items):
        raise OptionError("measures must name each measure once")
    return tuple(name for name in MEASURES if name in items)


def parse_key_rates(value) -> tuple[float, ...]:
    """Key times (years) from ``"1,2,5,10"`` or a list: finite, > 0, strictly increasing; :class:`OptionError`
    otherwise."""
    items = parse_list(value, "key rates", "1,2,3,5,7,10,20,30")
    if not items:
        raise OptionError("key rates must hold at least one time")
    keys = []
    for item in items:
        try:
            if isinstance(item, bool) or not isinstance(item, (str, numbers.Real)):
                raise ValueError
            key = float(item)
        except ValueError:
            raise OptionError(f"key rates must be numbers of years, not {shown(item)}") from None
        if not math.isfinite(key) or key <= 0:
            raise OptionError(f"key rates must be finite and > 0, not {shown(item)}")
        if keys and key <= keys[-1]:
            raise OptionError(f"key rates must be strictly increasing, but {key:g} follows {keys[-1]:g}")
        keys.append(key)
    return tuple(keys)


def check_bump(bump_bp) -> float:
    """The bump in basis points, a finite number > 0 and at most 1000; :class:`OptionError` otherwise."""
    try:
        if isinstance(bump_bp, bool):
            raise ValueError
        bump = float(bump_bp)
    except (TypeError, ValueError):
        raise OptionError(f"the bump must be a number of basis points, not {shown(bump_bp)}") from None
    if not (math.isfinite(bump) and 0 < bump <= 1000):
        raise OptionError(f"the bump must be > 0 and <= 1000 bp, not {shown(bump_bp)}")
    return bump
