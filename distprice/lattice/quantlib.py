"""QuantLib peer: the independent oracle and speed baseline for distprice (every time-form engine agrees with it
to ~1e-13 where the two trees coincide).

Every row of a portfolio is priced with QuantLib's own Hull-White trinomial tree::

    model  = ql.HullWhite(curve, a, sigma)
    engine = ql.TreeCallableFixedRateBondEngine(model, round(maturity * steps_per_year), curve)

on a ``ql.CallableFixedRateBond`` (callability ``Call`` for calls, ``Put`` for puts, clean exercise price
= strike), and the straight bond with ``ql.DiscountingBondEngine``. The option value of a ``bond_option``
is ``|callable-or-puttable - straight|``.

Conventions (chosen so that every event lands on a whole day and QuantLib's year fractions are the
portfolio's times exactly):

- day count ``Actual360`` everywhere, no calendar (``NullCalendar``, ``Unadjusted``), settlement days 0;
- today is the fixed date :data:`TODAY_ISO` (2026-01-02); a time ``t`` in years maps to the date
  ``today + round(t * 360)`` days, so times that are whole numbers of days on a 360-day year are
  reproduced exactly, others are rounded to the nearest day (curve knots included);
- the curve is a ``ZeroCurve`` (``Linear`` in time, ``Continuous``) on the same knots, plus a knot at
  ``t = 0`` (the first rate) when the first knot is later, plus a flat knot at :data:`FAR_YEARS`
  (QuantLib dates end in 2199, so no date may lie more than ~170 years after today);
- coupon dates are ``maturity - k / coupon_frequency`` (the time form's coupon schedule) and the schedule runs back
  to the coupon date on or before today, so the first period accrues from the right date; a zero-coupon bond
  (``coupon == 0``) is one period from today to maturity at rate 0;
- QuantLib prices per 100 of face: ``faceAmount = face``, redemption 100 (percent), and a clean strike
  in face units is passed as ``100 * strike / face``. All outputs are in face units (currency).

Caveats of the QuantLib side (when it agrees with distprice to ~1e-13):

- QuantLib adds every coupon and exercise date to its time grid; off-grid dates (``t * steps_per_year``
  not whole, or ``t * 360`` not whole) make its grid non-uniform, so it then disagrees with distprice at
  the discretisation-error level;
- an exercise date at most 1/52 year (6.92 days on Act360) *before* a coupon date is moved onto that
  coupon date by QuantLib (with the exercise price scaled by the ratio of discount factors);
- QuantLib's tree does not truncate at ``jmax``: the trees agree while the probability beyond ``jmax`` is
  negligible (agreement needs ``a * dt <= 0.004``; seen: 3e-13 at a*dt = 0.008, 8e-4 at a*dt = 0.1, jmax = 2);
- on a date that is both an exercise and a coupon date, QuantLib decides exercise first and adds the
  coupon after (as distprice does), and the clean strike gets the accrued interest of the period that starts
  on that date (zero), as distprice does;
- cost: QuantLib rebuilds and refits its tree for every instrument, and its fitting grows about as
  steps**2 (measured: ~0.1 s at 600 steps, ~0.4 s at 1200, ~14 s at 3285 steps, one CPU core).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["price_quantlib", "TODAY_ISO", "FAR_YEARS", "DAYS_PER_YEAR"]

TODAY_ISO = (2026, 1, 2)
"""The fixed valuation date (year, month, day) used for every QuantLib object."""

DAYS_PER_YEAR = 360
"""Act360: one year of portfolio time is 360 calendar days."""

FAR_YEARS = 150
"""A flat knot this far out keeps QuantLib's curve flat beyond the last knot, as distprice's curves are."""


def _import_quantlib():
    try:
        import QuantLib as ql  # noqa: N813
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the QuantLib peer needs the QuantLib Python package; install it with "
            "`pip install 'distprice[test]'` or `pip install QuantLib`"
        ) from exc
    return ql


def _days(t: float) -> int:
    """Whole days from today for a time ``t`` in years on the 360-day basis."""
    return int(round(float(t) * DAYS_PER_YEAR))


def _coupon_days(maturity: float, coupon: float, frequency: int) -> list[int]:
    """Schedule dates (days from today, increasing) of the bond, running back to on or before today."""
    if coupon == 0.0 or frequency <= 0:
        return sorted({min(0, _days(maturity)), _days(maturity)})
    days = []
    k = 0
    while True:
        t = maturity - k / frequency
        days.append(_days(t))
        if t <= 0.0:
            break
        k += 1
    return sorted(set(days))


def _exercise_times(row) -> list[float]:
    """Exercise times in years of the time form, steps <= 0 dropped."""
    spy = int(row.steps_per_year)
    expiry = float(row.expiry)
    if row.exercise == "european":
        times = [expiry]
    elif row.exercise == "bermudan":
        times = []
        k = 0
        while True:
            t = expiry - k / int(row.exercise_frequency)
            if not (t >= float(row.first_exercise) and t > 0.0):
                break
            times.append(t)
            k += 1
    elif row.exercise == "american":
        first = max(1, int(round(float(row.first_exercise) * spy)))
        last = int(round(expiry * spy))
        times = [step / spy for step in range(first, last + 1)]
    else:
        raise ValueError(f"row {row.id!r}: exercise {row.exercise!r} is not european, bermudan or american")
    return [t for t in times if int(round(t * spy)) > 0 and _days(t) > 0]


def _option_type(row) -> str:
    if row.instrument == "callable_bond":
        return "call"
    if row.instrument == "puttable_bond":
        return "put"
    return str(row.option_type)


def price_quantlib(portfolio: pd.DataFrame, curves: dict[str, tuple[np.ndarray, np.ndarray]]) -> pd.DataFrame:
    """Price every row of ``portfolio`` with QuantLib's Hull-White tree.

    Parameters
    ----------
    portfolio:
        One row per instrument with every portfolio column present and defaults filled
        (times in years, ``strike`` clean in face units, ``coupon`` annual rate, ``face`` redemption amount).
    curves:
        Curve id -> ``(t, zero_rate)``: knot times in years (increasing, >= 0) and continuously
        compounded zero rates, linear in ``t`` between knots and flat outside.

    Returns
    -------
    pandas.DataFrame
        Same index as ``portfolio``, columns ``bond_price`` (straight bond, dirty, face units),
        ``option_price`` and ``price`` (the option for ``bond_option``, bond - option for
        ``callable_bond``, bond + option for ``puttable_bond``). ``quantity`` is not applied.
    """
    ql = _import_quantlib()
    today = ql.Date(TODAY_ISO[2], TODAY_ISO[1], TODAY_ISO[0])
    day_counter = ql.Actual360()
    calendar = ql.NullCalendar()

    settings = ql.Settings.instance()
    saved_date = settings.evaluationDate
    settings.evaluationDate = today
    try:
        handles: dict = {}
        models: dict = {}
        tree_engines: dict = {}
        bond_engines: dict = {}

        def curve_handle(curve_id):
            if curve_id not in handles:
                if curve_id not in curves:
                    raise KeyError(f"curve {curve_id!r} is not in the curves input")
                t, z = (np.asarray(a, dtype=float) for a in curves[curve_id])
                days = [_days(x) for x in t]
                rates = [float(r) for r in z]
                if days[0] > 0:
                    days, rates = [0] + days, [rates[0]] + rates
                far = FAR_YEARS * DAYS_PER_YEAR
                if days[-1] < far:
                    days, rates = days + [far], rates + [rates[-1]]
                zero_curve = ql.ZeroCurve(
                    [today + d for d in days], rates, day_counter, calendar, ql.Linear(), ql.Continuous
                )
                handles[curve_id] = ql.YieldTermStructureHandle(zero_curve)
                bond_engines[curve_id] = ql.DiscountingBondEngine(handles[curve_id])
            return handles[curve_id]

        n = len(portfolio)
        bond_price = np.empty(n)
        option_price = np.empty(n)
        price = np.empty(n)
        for i, row in enumerate(portfolio.itertuples(index=False)):
            handle = curve_handle(row.curve)
            a, sigma = float(row.mean_reversion), float(row.volatility)
            key = (row.curve, a, sigma)
            if key not in models:
                models[key] = ql.HullWhite(handle, a, sigma)
            steps = int(round(float(row.maturity) * int(row.steps_per_year)))
            engine_key = key + (steps,)
            if engine_key not in tree_engines:
                tree_engines[engine_key] = ql.TreeCallableFixedRateBondEngine(models[key], steps, handle)

            face = float(row.face)
            coupon = float(row.coupon)
            schedule = ql.Schedule(
                [today + d for d in _coupon_days(float(row.maturity), coupon, int(row.coupon_frequency))],
                calendar,
                ql.Unadjusted,
            )
            issue = schedule.dates()[0]

            straight = ql.FixedRateBond(0, face, schedule, [coupon], day_counter, ql.Unadjusted, 100.0, issue)
            straight.setPricingEngine(bond_engines[row.curve])
            straight_value = straight.NPV()

            kind = _option_type(row)
            ql_type = ql.Callability.Call if kind == "call" else ql.Callability.Put
            exercise_price = ql.BondPrice(100.0 * float(row.strike) / face, ql.BondPrice.Clean)
            callabilities = ql.CallabilitySchedule(
                [ql.Callability(exercise_price, ql_type, today + _days(t)) for t in _exercise_times(row)]
            )
            callable_bond = ql.CallableFixedRateBond(
                0, face, schedule, [coupon], day_counter, ql.Unadjusted, 100.0, issue, callabilities
            )
            callable_bond.setPricingEngine(tree_engines[engine_key])
            option_value = abs(callable_bond.NPV() - straight_value)

            bond_price[i] = straight_value
            option_price[i] = option_value
            if row.instrument == "callable_bond":
                price[i] = straight_value - option_value
            elif row.instrument == "puttable_bond":
                price[i] = straight_value + option_value
            else:
                price[i] = option_value
    finally:
        settings.evaluationDate = saved_date

    return pd.DataFrame({"bond_price": bond_price, "option_price": option_price, "price": price}, index=portfolio.index)
