"""The papers' synthetic portfolios (Pawlak et al.: U1, U2, R1, R2, R3, S1, S2), Hull's book example and mixtures.

distprice's own additions, for the inspector's benchmarks: ``B1`` (bimodal: half narrow and tall trees,
widths 7-15 and heights 900-1200; half wide and short, widths 401-511 and heights 13-131) and the
concatenations ``U1+S1`` and ``R1+S2`` (each part at its own default size unless ``size`` says otherwise:
then the parts share it in proportion).

Every dataset is a portfolio table with all the portfolio columns, deterministic for
``(name, size, seed)`` and built with vectorised numpy (no per-row Python work).

Conventions and units:

- Times (``expiry``, ``first_exercise``, ``maturity``) are in years. In the papers' datasets every time
  is a whole number of months, ``steps_per_year`` is 12 and the tree height is the maturity in months, so
  every coupon, exercise and maturity date falls exactly on a tree step.
- The target tree width ``w = 2 jmax + 1`` is reached through the mean reversion:
  ``M = -0.184 / (jmax - 0.5)`` and ``a = -ln(1 + M) * 12``; the tree's ``jmax = ceil(-0.184 / M)`` then
  gives back exactly ``jmax`` (``-0.184 / M`` sits half a step below it, far from any rounding edge).
- Rates are annual decimals (``coupon`` 0.05 = 5%); prices are in the units of ``face`` (100).
- Strikes are clean: the clean forward price at ``expiry`` of the bond on the ``hull`` curve (cash flows
  strictly after expiry, accrued interest subtracted), times a uniform factor in
  [0.95, 1.05], rounded to 0.01.
- Instruments: 80% ``bond_option`` (calls and puts 50/50), 10% ``callable_bond``, 10% ``puttable_bond``;
  all bermudan, with 1, 2, 4 or 12 exercise dates a year, ``expiry`` uniform in whole months over
  [1 month, maturity] and ``first_exercise`` 1 to 10 whole years before it (0 at the earliest, and
  computed as ``expiry - years`` so that the bermudan schedule reaches it exactly); half of the bonds pay a
  coupon (1, 2 or 4 a year, 2%–8% in steps of 0.25%), half are zero-coupon; ``volatility`` uniform in
  [0.005, 0.02]; ``quantity`` 1, 2, 5 or 10.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..choices import DATASETS, MIXTURES
from ..curves import builtin_curves
from ..errors import OptionError
from .desk import desk

DEFAULT_SIZES: dict[str, int] = {name: 100_000 for name in DATASETS} | {"U1": 3_000, "book": 6}
"""Number of rows of each dataset in the papers (``book``: one row per tree resolution)."""
DEFAULT_SIZES |= {name: sum(DEFAULT_SIZES[part] for part in parts) for name, parts in MIXTURES.items()}

MONTHS_PER_YEAR = 12
BOOK_STEPS_PER_YEAR = (1, 5, 10, 25, 100, 365)
"""Tree resolutions of Hull's published tree values, cycled through by the ``book`` dataset."""

_JMAX_RANGE = (3, 255)  # widths 7 .. 511
_JMAX_NARROW = (3, 28)  # widths 7 .. 57
_JMAX_WIDE = (230, 255)  # widths 461 .. 511
_HEIGHT_RANGE = (13, 1200)  # months
_HEIGHT_SHORT = (12, 131)
_HEIGHT_TALL = (1082, 1200)
_SKEWED_FRACTION = 0.01


def generate(name: str, size: int | None = None, seed: int = 0) -> pd.DataFrame:
    """Portfolio ``name`` (one of :data:`DATASETS`) with ``size`` rows (default :data:`DEFAULT_SIZES`).

    The same ``(name, size, seed)`` always gives the same table; ``seed`` is a non-negative integer.
    Rows come in random order; ``id`` is 0 .. size-1.
    """
    if name not in DATASETS:
        raise OptionError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    size = DEFAULT_SIZES[name] if size is None else int(size)
    if size < 0:
        raise OptionError(f"dataset size must be >= 0, got {size}")
    if name == "book":
        return _book(size)
    if name == "desk":
        return desk(size, seed).portfolio
    if name in MIXTURES:
        parts = MIXTURES[name]
        shares = np.array([DEFAULT_SIZES[part] for part in parts], dtype=np.float64)
        sizes = np.floor(size * shares / shares.sum()).astype(np.int64)
        sizes[-1] = size - sizes[:-1].sum()
        table = pd.concat([generate(part, int(n), seed) for part, n in zip(parts, sizes)], ignore_index=True)
        return table.assign(id=np.arange(size, dtype=np.int64))
    rng = np.random.default_rng([seed, DATASETS.index(name)])
    jmax, height = _SHAPES[name](rng, size)
    return _portfolio(rng, jmax, height)


def with_shapes(width, height, seed: int = 0) -> pd.DataFrame:
    """A portfolio like the papers' (see the module docstring) on trees of the given odd ``width`` (≥ 3)
    and ``height`` (months ≥ 1), one row per pair."""
    width, height = np.asarray(width, dtype=np.int64), np.asarray(height, dtype=np.int64)
    return _portfolio(np.random.default_rng([seed, len(DATASETS)]), (width - 1) // 2, height)


def mean_reversion_for_width(width) -> np.ndarray:
    """Mean reversion ``a`` (per year) that gives tree width ``width`` (odd, ≥ 3) at 12 steps a year."""
    jmax = (np.asarray(width, dtype=np.int64) - 1) // 2
    m = -0.184 / (jmax - 0.5)
    return -np.log1p(m) * MONTHS_PER_YEAR


def _uniform(rng, bounds, size):
    """Integers uniform in the closed interval ``bounds``."""
    return rng.integers(bounds[0], bounds[1], size=size, endpoint=True)


def _shape_constant(rng, size):
    """U1, U2: width 259, height 606."""
    return np.full(size, 129, dtype=np.int64), np.full(size, 606, dtype=np.int64)


def _shape_r1(rng, size):
    """R1: widths uniform odd in [7, 511], heights uniform in [13, 1200]."""
    return _uniform(rng, _JMAX_RANGE, size), _uniform(rng, _HEIGHT_RANGE, size)


def _shape_r2(rng, size):
    """R2: widths uniform odd in [7, 511], heights normal (606.5, 197.8) rounded, clipped to [13, 1200]."""
    jmax = _uniform(rng, _JMAX_RANGE, size)
    height = np.clip(np.rint(rng.normal(606.5, 197.8, size)), *_HEIGHT_RANGE).astype(np.int64)
    return jmax, height


def _shape_r3(rng, size):
    """R3: widths normal (259, 84) rounded to the nearest odd, clipped to [7, 511]; heights uniform."""
    jmax = np.clip(np.rint((rng.normal(259.0, 84.0, size) - 1) / 2), *_JMAX_RANGE).astype(np.int64)
    return jmax, _uniform(rng, _HEIGHT_RANGE, size)


def _shape_s1(rng, size):
    """S1: a random 1% of rows wide [461, 511] and tall [1082, 1200]; the rest [7, 57] x [12, 131]."""
    jmax, height = _uniform(rng, _JMAX_NARROW, size), _uniform(rng, _HEIGHT_SHORT, size)
    skewed = rng.choice(size, _skewed_count(size), replace=False)
    jmax[skewed] = _uniform(rng, _JMAX_WIDE, skewed.size)
    height[skewed] = _uniform(rng, _HEIGHT_TALL, skewed.size)
    return jmax, height


def _shape_s2(rng, size):
    """S2: a random 1% of rows wide only, another 1% tall only; the rest as S1's rest."""
    jmax, height = _uniform(rng, _JMAX_NARROW, size), _uniform(rng, _HEIGHT_SHORT, size)
    count = _skewed_count(size)
    skewed = rng.choice(size, 2 * count, replace=False)
    wide, tall = skewed[:count], skewed[count:]
    jmax[wide] = _uniform(rng, _JMAX_WIDE, count)
    height[tall] = _uniform(rng, _HEIGHT_TALL, count)
    return jmax, height


def _shape_b1(rng, size):
    """B1: half narrow and tall (widths [7, 15], heights [900, 1200]), half wide and short ([401, 511] x
    [13, 131]), in random order."""
    narrow = rng.random(size) < 0.5
    jmax = np.where(narrow, _uniform(rng, (3, 7), size), _uniform(rng, (200, 255), size))
    height = np.where(narrow, _uniform(rng, (900, 1200), size), _uniform(rng, (13, 131), size))
    return jmax, height


def _skewed_count(size):
    """1% of ``size`` rows, rounded half up."""
    return int(size * _SKEWED_FRACTION + 0.5)


_SHAPES = {
    "U1": _shape_constant,
    "U2": _shape_constant,
    "R1": _shape_r1,
    "R2": _shape_r2,
    "R3": _shape_r3,
    "S1": _shape_s1,
    "S2": _shape_s2,
    "B1": _shape_b1,
}


def _strings(values, codes):
    """A pandas ``str`` column holding ``values[codes]``."""
    return pd.array(list(values), dtype="str").take(np.asarray(codes, dtype=np.int64))


def _portfolio(rng, jmax, height):
    """Bermudan options, callable and puttable bonds on trees of half-width ``jmax`` and ``height`` months."""
    size = jmax.size
    instrument = rng.choice(3, size, p=[0.8, 0.1, 0.1])  # bond_option, callable, puttable
    is_put = np.where(instrument == 0, rng.integers(0, 2, size), instrument == 2)
    expiry = rng.integers(1, height, endpoint=True)  # months, 1 .. height
    # A lockout of whole years, subtracted in years: ``expiry - k / exercise_frequency`` then reaches
    # ``first_exercise`` bit for bit, so a floating-point ``>=`` test keeps that exercise date.
    lockout = rng.integers(1, 10, size, endpoint=True)
    first_exercise = np.maximum(expiry / MONTHS_PER_YEAR - lockout, 0.0)
    pays_coupon = rng.random(size) < 0.5
    coupon = np.where(pays_coupon, np.rint(rng.uniform(0.02, 0.08, size) / 0.0025) * 0.0025, 0.0)
    coupon_frequency = np.where(pays_coupon, rng.choice([1, 2, 4], size), 0)
    face = 100.0
    forward = _clean_forward_hull(height, expiry, coupon, coupon_frequency, face)
    strike = np.round(forward * rng.uniform(0.95, 1.05, size), 2)
    return pd.DataFrame(
        {
            "id": np.arange(size, dtype=np.int64),
            "instrument": _strings(["bond_option", "callable_bond", "puttable_bond"], instrument),
            "option_type": _strings(["call", "put"], is_put),
            "exercise": _strings(["bermudan"], np.zeros(size)),
            "strike": strike,
            "expiry": expiry / MONTHS_PER_YEAR,
            "first_exercise": first_exercise,
            "exercise_frequency": rng.choice([1, 2, 4, 12], size),
            "maturity": height / MONTHS_PER_YEAR,
            "coupon": coupon,
            "coupon_frequency": coupon_frequency.astype(np.int64),
            "face": np.full(size, face),
            "mean_reversion": mean_reversion_for_width(2 * jmax + 1),
            "volatility": np.round(rng.uniform(0.005, 0.02, size), 4),
            "steps_per_year": np.full(size, MONTHS_PER_YEAR, dtype=np.int64),
            "curve": _strings(["hull"], np.zeros(size)),
            "quantity": rng.choice([1.0, 2.0, 5.0, 10.0], size),
        }
    )


def _clean_forward_hull(maturity, expiry, coupon, coupon_frequency, face):
    """Clean forward price at ``expiry`` of the bond maturing at ``maturity``, on the ``hull`` curve.

    ``maturity`` and ``expiry`` are whole months, so every coupon date is a whole month too. The coupons
    strictly after expiry are summed in O(1) per row with running sums of ``P(0, n/12)`` taken every
    3, 6 and 12 months: ``sum_{k<K} P(maturity - k*step) = S[maturity] - S[maturity - K*step]``.
    """
    months = np.arange(int(maturity.max(initial=0)) + 1)
    discount = builtin_curves()["hull"].discount(months / MONTHS_PER_YEAR)  # P(0, n months)
    frequency = np.maximum(coupon_frequency, 1)  # zero-coupon rows: coupon is 0 anyway
    step = MONTHS_PER_YEAR // frequency  # months between coupons
    coupons_left = -((expiry - maturity) // step)  # ceil((maturity - expiry) / step)
    last_coupon = maturity - coupons_left * step  # latest coupon date <= expiry (may be < 0)
    annuity = np.zeros(maturity.shape)
    for stride in (3, 6, 12):
        rows = step == stride
        running = _running_sums(discount, stride)
        before = np.where(last_coupon[rows] >= 0, running[np.maximum(last_coupon[rows], 0)], 0.0)
        annuity[rows] = running[maturity[rows]] - before
    dirty = (face * coupon / frequency * annuity + face * discount[maturity]) / discount[expiry]
    accrued = face * coupon * (expiry - last_coupon) / MONTHS_PER_YEAR
    return dirty - accrued


def _running_sums(values, stride):
    """``out[n] = values[n] + values[n - stride] + values[n - 2 stride] + ...`` (indices ≥ 0)."""
    padded = np.zeros(-(-values.size // stride) * stride)
    padded[: values.size] = values
    return padded.reshape(-1, stride).cumsum(axis=0).ravel()[: values.size]


def _book(size):
    """Hull's example: a 3-year European put, strike 63, on a 9-year zero-coupon bond (a = 0.1, sigma = 0.01)."""
    steps_per_year = np.resize(np.array(BOOK_STEPS_PER_YEAR, dtype=np.int64), size)
    zeros = np.zeros(size, dtype=np.int64)
    return pd.DataFrame(
        {
            "id": np.arange(size, dtype=np.int64),
            "instrument": _strings(["bond_option"], zeros),
            "option_type": _strings(["put"], zeros),
            "exercise": _strings(["european"], zeros),
            "strike": np.full(size, 63.0),
            "expiry": np.full(size, 3.0),
            "first_exercise": np.zeros(size),
            "exercise_frequency": np.ones(size, dtype=np.int64),
            "maturity": np.full(size, 9.0),
            "coupon": np.zeros(size),
            "coupon_frequency": zeros,
            "face": np.full(size, 100.0),
            "mean_reversion": np.full(size, 0.1),
            "volatility": np.full(size, 0.01),
            "steps_per_year": steps_per_year,
            "curve": _strings(["hull"], zeros),
            "quantity": np.ones(size),
        }
    )
