"""Risk measures of valid instruments from their own trees (see :mod:`~.measures` for the definitions): the
OAS of rows with a market price, then at each row's base point the parallel bumps, the key-rate bumps and
the volatility bumps, on one risk engine (reference, CPU or GPU; see :mod:`~.sweeps`).

The work, per row (n steps, width w), on the CPU engine: one forward pass per group of rows that share a tree
model (:mod:`~.groups`), and again per volatility bump; every curve bump a backward pass (no refit:
:mod:`~.sweeps`), all of a row's bumps in one call, each down to the row's first exercise only (below it the
option is valued on the forward pass's state prices), two bumps that start at the same step (a +h and -h) in
one sweep; the OAS a backward pass per evaluation, all unfinished rows at once (:mod:`~.oas`); a key-rate bump
only below the top of its triangle; where a row's cash flows after its last exercise all fall at one step, every
bump only below that exercise, from that step's discount bond there (rolled back once per tree); a callable or
puttable bond rolls its holder's value back, one row of values where bond and option are two. The GPU engine
does the same but for the pairs and the discount bonds: each forward pass and every (tree, bump) a block of
threads (a thread per tree, each bump from the top, for the narrowest and widest trees: :class:`~.gpu_risk.GpuRisk`).
A plain bond has no option: its tree reprices its discounted cash flows exactly under every curve and sigma, so
it is valued off the tree (:mod:`~.straight`) and its vega is zero.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..cuda import gpu_available
from ..curves import ZeroCurve
from ..errors import OptionError
from .batch import pack
from .cpu_risk import CpuRisk
from .engines import AUTO, GPU_ENGINES, resolve
from .events import accrued
from .geometry import tree_geometry
from .gpu_risk import GpuRisk
from .instruments import OPTION_ALONE, Instruments
from .measures import (
    BP,
    DEFAULT_BUMP_BP,
    DEFAULT_KEY_RATES,
    MEASURES,
    OAS_BRACKET,
    OAS_TOLERANCE,
    VEGA_BUMP,
    check_bump,
    krd_column,
    measure_columns,
    parse_key_rates,
    parse_measures,
)
from .oas import find_roots
from .quotes import Quotes
from .reference import ReferenceRisk
from .straight import Straight
from .sweeps import key_rate_bumps

OAS_SECOND_POINT = 1e-3
"""The OAS search starts from spreads 0 and this (decimal)."""


def measured_by(engine: str) -> str:
    """The engine whose risk engine measures for a named one (``auto``: ``gpu-flat`` where there is a GPU, else
    ``cpu``); :class:`OptionError` for an unknown name, GpuUnavailableError for a GPU engine without a GPU."""
    engine = resolve(engine, np.float64)
    if engine == AUTO:
        return "gpu-flat" if gpu_available() else "cpu"
    return engine


def risk_engine(engine: str, instruments: Instruments, curves: dict[str, ZeroCurve]):
    """The risk engine of a named engine (:func:`measured_by`) for ``instruments`` on ``curves``."""
    engine = measured_by(engine)
    if engine == "reference":
        return ReferenceRisk(instruments, curves)
    batch = pack(instruments, curves, np.float64)
    embedded = ~instruments.table["instrument"].isin(OPTION_ALONE).to_numpy()
    return (GpuRisk if engine in GPU_ENGINES else CpuRisk)(batch, embedded)


def settlement(instruments: Instruments, curves: dict[str, ZeroCurve]):
    """Each row's settlement time ``t(S)`` (years of its tree), discount factor ``P(0, t(S))`` on its curve and
    accrued interest at S (units of face; 0 for bond options): dated rows as §8.2 says, rows in years settle
    at time 0 with the accrued interest of their regular schedule there."""
    table = instruments.table
    n = len(table)
    t = np.zeros(n)
    discount = np.ones(n)
    interest = np.zeros(n)
    timed = ~instruments.is_dated
    with np.errstate(invalid="ignore"):  # the ufunc's vector loop divides by the frequency 0 of zero coupons
        interest[timed] = accrued(
            np.zeros(timed.sum()),
            *(table[c].to_numpy(np.float64)[timed] for c in ("maturity", "coupon", "coupon_frequency", "face")),
        )
    dated = np.flatnonzero(instruments.is_dated)
    if len(dated):
        rows = instruments.dated.take(dated)
        t[dated] = rows.years(rows.settlement)
        interest[dated] = rows.accrued
        keys = pd.DataFrame({"curve": table["curve"].to_numpy()[dated], "valuation": rows.valuation})
        for (name, valuation), group in keys.groupby(["curve", "valuation"], sort=False):
            at = dated[group.index.to_numpy()]
            discount[at] = curves[name].at(int(valuation)).discount(t[at])
    interest[table["instrument"].isin(OPTION_ALONE).to_numpy()] = 0.0
    return t, discount, interest


def price_of(instrument: np.ndarray, bond: np.ndarray, option: np.ndarray) -> np.ndarray:
    """The price of each row from its bond and option values (arrays (rows, ...)): the option of a bond
    option, the bond less the call of a callable bond, plus the put of a puttable one (plus the holder's rights
    net, puts less calls, of a callable_puttable_bond), the bond of a bond."""
    held = (instrument == "puttable_bond") | (instrument == "callable_puttable_bond")
    sign = np.select([instrument == "callable_bond", held], [-1.0, 1.0], 0.0)
    sign = sign.reshape(sign.shape + (1,) * (bond.ndim - 1))
    plain = np.isin(instrument, OPTION_ALONE).reshape(sign.shape)
    return np.where(plain, option, bond + sign * option)


def price_measures(
    instruments: Instruments,
    curves: dict[str, ZeroCurve],
    real=np.float64,
    engine: str = "cpu",
    measures=MEASURES,
    bump_bp: float = DEFAULT_BUMP_BP,
    key_rates=DEFAULT_KEY_RATES,
    quotes: Quotes | None = None,
    base: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The risk measures of ``instruments`` (valid rows) on ``curves``: a dict of float64 columns, one per name
    of :func:`~.measures.measure_columns`, in row order, and ``error`` (object: None, or why the row's
    measures are NaN).

    ``measures``: names of :data:`~.measures.MEASURES` (a list or ``"dv01,krd"``); ``bump_bp``: h of the
    parallel and key-rate bumps (basis points); ``key_rates``: the key grid (years); ``quotes``: the rows'
    market prices (:func:`~.quotes.read_market_prices`, taken at the valid rows): a row with one is measured at its
    OAS, which the ``oas`` column reports; ``base``: each row's price on ``curves`` as a pricing in float64
    gave it (:func:`price_of`), which the OAS search takes as its value at spread 0 instead of rolling the
    tree back there once more. ``engine``: ``reference``, ``cpu``, ``gpu-outer``, ``gpu-flat`` or
    ``auto``. Measures are differences of prices: only ``real`` float64 is accepted.
    """
    if np.dtype(real) != np.float64:
        raise OptionError("risk measures are differences of prices: they are computed in fp64 only")
    measures, key_rates, h = parse_measures(measures), parse_key_rates(key_rates), check_bump(bump_bp) * BP
    n = len(instruments)
    table = instruments.table
    quotes = Quotes.none(n) if quotes is None else quotes
    if len(quotes.price) != n:
        raise ValueError(f"quotes hold {len(quotes.price)} rows for {n} instruments")
    errors = np.full(n, None, dtype=object)
    out = {name: np.full(n, np.nan) for name in measure_columns(measures, key_rates)}
    if n == 0:
        return {**out, "error": errors}
    instrument = table["instrument"].to_numpy(dtype=object)
    volatility = table["volatility"].to_numpy()
    values = _Values(engine, instruments, curves, instrument)
    spread = np.zeros(n)
    quoted = np.flatnonzero(np.isfinite(quotes.price))
    if len(quoted):
        known = None if base is None else np.asarray(base, np.float64)[quoted]
        oas = _oas(
            values,
            instruments,
            curves,
            quotes,
            quoted,
            known if known is not None and np.isfinite(known).all() else None,
        )
        spread[quoted] = oas
        for r in quoted[np.isnan(oas)]:
            errors[r] = (
                f"oas: no spread in [{OAS_BRACKET[0]:.0%}, {OAS_BRACKET[1]:+.0%}] matches the market "
                f"price {quotes.price[r]:g} ({'dirty' if quotes.dirty[r] else 'clean'})"
            )
        if "oas" in measures:
            out["oas"][quoted] = oas
    rows = np.flatnonzero(np.isfinite(spread))

    parallel = bool({"dv01", "duration", "convexity"} & set(measures))
    if parallel or "krd" in measures:
        grid = np.array(key_rates if "krd" in measures else (0.0,))
        bumps = [np.zeros(len(grid))]
        if parallel:
            bumps += [np.full(len(grid), h), np.full(len(grid), -h)]
        if "krd" in measures:
            unit = key_rate_bumps(len(grid))
            bumps += [h * b for b in unit] + [-h * b for b in unit]
        dz = spread[rows, None, None] + np.array(bumps)[None]
        prices = values.prices(rows, grid, dz)
        _relative(out, measures, key_rates, rows, prices, h, parallel)
    if "vega" in measures:
        _vega(values, instruments, rows, spread, instrument, volatility, out["vega"], errors)
    return {**out, "error": errors}


def _relative(out: dict, measures, key_rates, rows: np.ndarray, prices: np.ndarray, h: float, parallel: bool):
    """The measures of ``rows`` from their prices (rows, bumps: the base point, then +h and -h when
    ``parallel``, then the key rates +h and then -h); a price of 0 leaves the relative measures NaN."""
    P = prices[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        if parallel:
            up, down = prices[:, 1], prices[:, 2]
            if "dv01" in measures:
                out["dv01"][rows] = (down - up) / 2 * (BP / h)
            if "duration" in measures:
                out["effective_duration"][rows] = np.where(P != 0, (down - up) / (2 * P * h), np.nan)
            if "convexity" in measures:
                out["effective_convexity"][rows] = np.where(P != 0, (down + up - 2 * P) / (P * h * h), np.nan)
        if "krd" in measures:
            first, m = 1 + 2 * parallel, len(key_rates)
            for k, key in enumerate(key_rates):
                up, down = prices[:, first + k], prices[:, first + m + k]
                out[krd_column(key)][rows] = np.where(P != 0, (down - up) / (2 * P * h), np.nan)


class _Values:
    """Prices of rows under bumps: plain bonds off the tree (:class:`~.straight.Straight`), the others on the
    risk engine's trees of their own volatility (forward passes run once, at the first call)."""

    def __init__(self, engine: str, instruments: Instruments, curves, instrument: np.ndarray):
        self.instrument = instrument
        plain = instrument == "bond"
        self.plain, self.tree = np.flatnonzero(plain), np.flatnonzero(~plain)
        self.position = np.zeros(len(instrument), dtype=np.int64)
        self.position[self.plain] = np.arange(len(self.plain))
        self.position[self.tree] = np.arange(len(self.tree))
        self.straight = Straight(instruments.take(self.plain), curves) if len(self.plain) else None
        self.risk, self.base = None, None
        if len(self.tree):
            options = instruments.take(self.tree)
            self.risk = risk_engine(engine, options, curves)
            self.options = options

    def prices(self, rows: np.ndarray, grid: np.ndarray, dz: np.ndarray, volatility=None, dr=None) -> np.ndarray:
        """Prices (rows, bumps) of ``rows`` under the bumps ``dz`` (rows, bumps, knots) on ``grid``; with
        ``volatility`` and ``dr`` (one per row) on trees of that volatility instead (rows with an option)."""
        out = np.empty(dz.shape[:2])
        plain = self.instrument[rows] == "bond"
        if plain.any():
            out[plain] = self.straight.price(self.position[rows[plain]], grid, dz[plain])
        if (~plain).any():
            tasks = self.position[rows[~plain]]
            if volatility is not None:
                trees, tasks = self.risk.trees(tasks, volatility[~plain], dr[~plain]), np.arange(len(tasks))
            else:
                if self.base is None:
                    self.base = self.risk.trees(
                        np.arange(len(self.tree)), self.options.table["volatility"], self.options.geometry.dr
                    )
                trees = self.base
            bond, option = self.risk.roll(trees, tasks, grid, dz[~plain])
            out[~plain] = price_of(self.instrument[rows[~plain]], bond, option)
        return out


def _oas(
    values: _Values, instruments: Instruments, curves, quotes: Quotes, quoted: np.ndarray, base: np.ndarray | None
) -> np.ndarray:
    """The OAS of rows ``quoted``: the spread s with ``price(s) / (P(0, t(S)) exp(-s t(S)))`` equal to the
    market's dirty price at settlement (NaN where none in OAS_BRACKET); ``base``: their prices at s = 0, when
    a pricing gave them."""
    t, discount, interest = (v[quoted] for v in settlement(instruments, curves))
    target = quotes.price[quoted] + np.where(quotes.dirty[quoted], 0.0, interest)

    def evaluate(positions, spreads):
        price = values.prices(quoted[positions], np.zeros(1), spreads[:, :, None])
        return price / (discount[positions, None] * np.exp(-spreads * t[positions, None])) - target[positions, None]

    at_zero = None if base is None else base / discount - target  # evaluate's value at spread 0
    oas, _ = find_roots(
        evaluate, np.zeros(len(quoted)), np.full(len(quoted), OAS_SECOND_POINT), *OAS_BRACKET, OAS_TOLERANCE, at_zero
    )
    return oas


def _vega(
    values: _Values,
    instruments: Instruments,
    rows: np.ndarray,
    spread: np.ndarray,
    instrument: np.ndarray,
    volatility: np.ndarray,
    vega: np.ndarray,
    errors: np.ndarray,
) -> None:
    """``vega`` of ``rows`` at their spreads: the trees of sigma +- 1 bp (rows with an option; a plain bond's
    vega is 0). A volatility of 1 bp or less cannot be bumped down: an error for the row."""
    plain = instrument[rows] == "bond"
    vega[rows[plain]] = 0.0
    low = rows[~plain & (volatility[rows] <= VEGA_BUMP)]
    for r in low:
        errors[r] = "vega: volatility must be > 1 bp to be bumped down by 1 bp"
    rows = rows[~plain & (volatility[rows] > VEGA_BUMP)]
    if len(rows) == 0:
        return
    table = instruments.table.iloc[rows]
    both = np.r_[rows, rows]
    sigma = np.r_[volatility[rows] + VEGA_BUMP, volatility[rows] - VEGA_BUMP]
    geometry = tree_geometry(
        np.tile(table["mean_reversion"].to_numpy(), 2),
        sigma,
        np.tile(table["maturity"].to_numpy(), 2),
        np.tile(table["steps_per_year"].to_numpy(), 2),
        np.tile(instruments.geometry.height[rows], 2),
    )
    assert np.array_equal(geometry.jmax, np.tile(instruments.geometry.jmax[rows], 2))  # sigma leaves jmax alone
    price = values.prices(both, np.zeros(1), np.tile(spread[rows], 2)[:, None, None], sigma, geometry.dr)[:, 0]
    vega[rows] = (price[: len(rows)] - price[len(rows) :]) / 2
