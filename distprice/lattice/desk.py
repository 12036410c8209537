"""``desk``: a realistic book in the dated form, as a bond desk holds it, with its curves and exercise schedule.

Three models, one per currency, each with its curve (knots by date), calendar, conventions, Hull-White a and
sigma and tree resolution (rows of one model share a tree model: the same a, sigma, curve and steps a year):

======== ========= ============= ========== ============ ========== ======= ==================
currency calendar  day count     coupons    curve        a          sigma   steps a year
======== ========= ============= ========== ============ ========== ======= ==================
USD      US        30/360        semiannual ACT/365F     0.030      1.05 %  52 (weekly)
EUR      TARGET    ACT/ACT-ICMA  annual     ACT/360      0.020      0.85 %  26
GBP      UK        ACT/ACT-ICMA  semiannual ACT/365F     0.035      0.95 %  12 (monthly)
======== ========= ============= ========== ============ ========== ======= ==================

Rows (60 % USD, 25 % EUR, 15 % GBP) are valued on :data:`AS_OF`; maturities 1-30 years away on real schedules
(a fifth with an odd first coupon), coupons 1-7 % in eighths. Instruments: 45 % callable bonds (bermudan
calls on coupon dates after a 1-5 year lockout: six in ten at par, four in ten on a step-down schedule from
par plus half a coupon to par over three years, given in the exercise schedule table), 15 % puttable bonds
(half american puts at par over a window, half bermudan puts at par on coupon dates), 25 % plain bonds and 15 %
bond options (european or bermudan, calls and puts, struck near the bond's price). Deterministic for
``(size, seed)``; built with vectorised numpy over the whole book.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ..dates import cash_flows, day_numbers, terms_from_frame, to_iso

AS_OF = "2026-11-20"
"""The desk's valuation date (a Friday), in the ``valuation_date`` column of every row."""
TENORS = np.array([30, 91, 182, 365, 730, 1095, 1826, 2557, 3652, 5478, 7305, 10957, 14610])
"""The curves' knots, days after :data:`AS_OF`."""
MODELS = {
    "USD": dict(
        calendar="US",
        day_count="30/360",
        coupon_frequency=2,
        curve_day_count="ACT/365F",
        mean_reversion=0.03,
        volatility=0.0105,
        steps_per_year=52,
        share=0.60,
        rates=[0.0386, 0.0381, 0.0374, 0.0362, 0.0351, 0.0352, 0.0361, 0.0374, 0.0392, 0.0414, 0.0428, 0.0431, 0.0429],
    ),
    "EUR": dict(
        calendar="TARGET",
        day_count="ACT/ACT-ICMA",
        coupon_frequency=1,
        curve_day_count="ACT/360",
        mean_reversion=0.02,
        volatility=0.0085,
        steps_per_year=26,
        share=0.25,
        rates=[0.0193, 0.0195, 0.0198, 0.0202, 0.0211, 0.0222, 0.0241, 0.0258, 0.0276, 0.0297, 0.0305, 0.0301, 0.0296],
    ),
    "GBP": dict(
        calendar="UK",
        day_count="ACT/ACT-ICMA",
        coupon_frequency=2,
        curve_day_count="ACT/365F",
        mean_reversion=0.035,
        volatility=0.0095,
        steps_per_year=12,
        share=0.15,
        rates=[0.0398, 0.0392, 0.0383, 0.0371, 0.0366, 0.0372, 0.0389, 0.0408, 0.0431, 0.0458, 0.0471, 0.0468, 0.0455],
    ),
}
INSTRUMENT_SHARES = {"callable_bond": 0.45, "puttable_bond": 0.15, "bond": 0.25, "bond_option": 0.15}
ORIGINAL_TERMS = np.array([2, 3, 5, 7, 10, 15, 20, 30])
"""Years from issue to maturity the desk's bonds were issued with."""


class Desk(NamedTuple):
    portfolio: pd.DataFrame
    curves: pd.DataFrame
    exercise_schedule: pd.DataFrame


def desk_curves() -> pd.DataFrame:
    """The desk's curves: ``curve, date, zero_rate, day_count``, one curve per currency."""
    dates = to_iso(day_numbers([AS_OF])[0] + TENORS)
    return pd.concat(
        [
            pd.DataFrame(
                {"curve": name, "date": dates, "zero_rate": model["rates"], "day_count": model["curve_day_count"]}
            )
            for name, model in MODELS.items()
        ],
        ignore_index=True,
    )


def desk(size: int = 100_000, seed: int = 0) -> Desk:
    """The desk book of ``size`` rows, its curves and its exercise schedule table (see the module docstring)."""
    rng = np.random.default_rng([seed, 2026])
    names = list(MODELS)
    currency = np.array(names)[rng.choice(len(names), size, p=[MODELS[n]["share"] for n in names])]
    model = {
        key: np.array([MODELS[c][key] for c in names])[pd.Index(names).get_indexer(currency)]
        for key in ("calendar", "day_count", "coupon_frequency", "mean_reversion", "volatility", "steps_per_year")
    }
    as_of = day_numbers([AS_OF])[0]
    remaining = rng.integers(365, 30 * 365 + 1, size)
    maturity = (as_of + remaining).astype("datetime64[D]").astype("datetime64[M]") + np.timedelta64(14, "D")
    maturity = maturity.astype("datetime64[D]").astype(np.int64)
    original = ORIGINAL_TERMS[np.minimum(np.searchsorted(ORIGINAL_TERMS * 365, remaining), len(ORIGINAL_TERMS) - 1)]
    issue = (maturity.astype("datetime64[D]").astype("datetime64[M]") - original * 12).astype(
        "datetime64[D]"
    ) + np.timedelta64(14, "D")
    issue = issue.astype(np.int64)
    odd = rng.random(size) < 0.2
    issue[odd] -= rng.integers(10, 120, odd.sum())
    issue = np.minimum(issue, as_of - 1)
    coupon = rng.integers(8, 57, size) / 800.0
    instrument = np.array(list(INSTRUMENT_SHARES))[
        rng.choice(len(INSTRUMENT_SHARES), size, p=list(INSTRUMENT_SHARES.values()))
    ]
    frame = pd.DataFrame(
        {
            "id": pd.Series(currency).str.cat(pd.Series(np.arange(size)).astype(str).str.zfill(7), sep="-").to_numpy(),
            "instrument": instrument,
            "currency": currency,
            "coupon": coupon,
            "coupon_frequency": model["coupon_frequency"],
            "issue_date": to_iso(issue),
            "maturity_date": to_iso(maturity),
            "day_count": model["day_count"],
            "calendar": model["calendar"],
            "payment_convention": "following",
            "valuation_date": AS_OF,
            "mean_reversion": model["mean_reversion"],
            "volatility": model["volatility"],
            "steps_per_year": model["steps_per_year"],
            "curve": currency,
            "quantity": rng.choice([1_000.0, 5_000.0, 10_000.0, 50_000.0], size),
        }
    )
    flows = cash_flows(terms_from_frame(frame), as_of)
    payments = flows.coupons.payment
    offsets = flows.coupons.offsets
    counts = np.diff(offsets)
    frame["exercise"], frame["option_type"], frame["strike"] = None, None, np.nan
    frame["first_exercise_date"], frame["expiry_date"] = None, None

    def nth_payment(rows, k):
        """The k-th (0-based, clipped to the row's last but one) live payment date of each row."""
        k = np.clip(k, 0, np.maximum(counts[rows] - 2, 0))
        return payments[offsets[rows] + k]

    per_year = model["coupon_frequency"]
    callable_rows = np.flatnonzero((instrument == "callable_bond") & (counts >= 3))
    lockout = rng.integers(1, 6, len(callable_rows)) * per_year[callable_rows]
    first_call = nth_payment(callable_rows, lockout)
    last_call = payments[offsets[callable_rows + 1] - 2]
    stepped = rng.random(len(callable_rows)) < 0.4
    frame.loc[callable_rows, "exercise"] = "bermudan"
    par = callable_rows[~stepped]
    frame.loc[par, "strike"] = 100.0
    frame.loc[par, "first_exercise_date"] = to_iso(first_call[~stepped])
    frame.loc[par, "expiry_date"] = to_iso(last_call[~stepped])
    owner = np.repeat(np.arange(size), counts)
    window_first, window_last = np.full(size, -1), np.full(size, -2)
    window_first[callable_rows[stepped]], window_last[callable_rows[stepped]] = first_call[stepped], last_call[stepped]
    calls = np.flatnonzero((payments >= window_first[owner]) & (payments <= window_last[owner]))
    years = (payments[calls] - window_first[owner[calls]]) / 365.25
    premium = 100 * coupon[owner[calls]] / 2 * np.clip(1 - years / 3, 0, 1)
    schedule = pd.DataFrame(
        {
            "id": frame["id"].to_numpy()[owner[calls]],
            "date": to_iso(payments[calls]),
            "price": np.round(100 + premium, 3),
            "price_type": "clean",
        }
    )
    puttable_rows = np.flatnonzero((instrument == "puttable_bond") & (counts >= 3))
    american = rng.random(len(puttable_rows)) < 0.5
    start = nth_payment(puttable_rows, rng.integers(1, 4, len(puttable_rows)) * per_year[puttable_rows])
    end = np.minimum(start + rng.integers(365, 3 * 365, len(puttable_rows)), payments[offsets[puttable_rows + 1] - 2])
    frame.loc[puttable_rows, "exercise"] = np.where(american, "american", "bermudan")
    frame.loc[puttable_rows, "strike"] = 100.0
    frame.loc[puttable_rows, "first_exercise_date"] = to_iso(start)
    frame.loc[puttable_rows, "expiry_date"] = to_iso(np.maximum(end, start))
    option_rows = np.flatnonzero((instrument == "bond_option") & (counts >= 2))
    expiry = np.minimum(as_of + rng.integers(91, 5 * 365, len(option_rows)), payments[offsets[option_rows + 1] - 2])
    bermudan = rng.random(len(option_rows)) < 0.3
    expiry = np.where(bermudan, np.maximum(expiry, payments[offsets[option_rows]]), expiry)  # a coupon date inside
    frame.loc[option_rows, "exercise"] = np.where(bermudan, "bermudan", "european")
    frame.loc[option_rows, "option_type"] = np.where(rng.random(len(option_rows)) < 0.5, "call", "put")
    clean = _clean_price(flows, currency, coupon)
    frame.loc[option_rows, "strike"] = np.round(clean[option_rows] * rng.uniform(0.97, 1.03, len(option_rows)), 2)
    frame.loc[option_rows, "first_exercise_date"] = np.where(
        bermudan, to_iso(np.full(len(option_rows), as_of + 1)), None
    )
    frame.loc[option_rows, "expiry_date"] = to_iso(np.maximum(expiry, as_of + 7))
    # rows too short for their option become plain bonds
    unusable = (instrument != "bond") & frame["exercise"].isna()
    frame.loc[unusable, "instrument"] = "bond"
    return Desk(frame, desk_curves(), schedule)


def _clean_price(flows, currency: np.ndarray, coupon: np.ndarray) -> np.ndarray:
    """Each row's clean price on its currency's curve (% of face 100), to strike bond options near it."""
    curves = desk_curves()
    as_of = day_numbers([AS_OF])[0]
    coupons = flows.coupons
    owner = np.repeat(np.arange(len(currency)), np.diff(coupons.offsets))
    value = np.zeros(len(currency))
    for name, model in MODELS.items():
        knots = TENORS / (365 if model["curve_day_count"] == "ACT/365F" else 360)
        rates = curves.loc[curves["curve"] == name, "zero_rate"].to_numpy()
        mine = currency[owner] == name
        t = (coupons.payment[mine] - as_of) / (365 if model["curve_day_count"] == "ACT/365F" else 360)
        np.add.at(value, owner[mine], coupons.amount[mine] * np.exp(-np.interp(t, knots, rates) * t))
        rows = currency == name
        t = (flows.redemption_date[rows] - as_of) / (365 if model["curve_day_count"] == "ACT/365F" else 360)
        value[rows] += flows.redemption_amount[rows] * np.exp(-np.interp(t, knots, rates) * t)
    return value - flows.accrued
