"""QuantLib peer of dated rows: the tests' oracle of the dated form.

Each row is priced with QuantLib's own objects, at its valuation date V (``Settings.evaluationDate``)::

    schedule = ql.Schedule(issue, maturity, Period(12 / f months), calendar, accrual, accrual, Backward, eom)
    bond     = ql.CallableFixedRateBond(settlement_days, face, schedule, [coupon], day_count, payment,
                                        redemption, issue, callabilities)     # FixedRateBond for the straight bond
    engine   = ql.TreeCallableFixedRateBondEngine(ql.HullWhite(curve, a, sigma), steps, curve)

on a ``ZeroCurve`` (``Linear``, ``Continuous``, the curve's day count) through the curve's knot dates, a knot
at V carrying the first rate and a flat knot far out. ``price`` is ``NPV()`` (the value at V), ``dirty_price``
and ``clean_price`` ``dirtyPrice()`` and ``cleanPrice()``, ``accrued`` ``accruedAmount()``, all converted
from QuantLib's per-100 quotes to face units. A callable_puttable_bond's callabilities take their type from the
exercise schedule's ``right``. A row with a coupon schedule has one rate per coupon period (the rate of its last
step on or before the period's start, or on the previous coupon's payment date); with a principal schedule it is
an ``AmortizingFixedRateBond`` of one notional per period (its repayments at the row's redemption %), whose
per-100 quotes are of the notional outstanding at settlement (QuantLib has no callable amortizing bond). A bond
option is ``|callable or puttable - straight|``; american
exercise has no QuantLib counterpart here. QuantLib moves an exercise date in the week before a coupon payment
onto the payment date, which distprice does not: keep such dates out of comparisons. Swaption rows are priced as
QuantLib's ``Swaption`` on ``TreeSwaptionEngine`` (:func:`price_swaptions_quantlib`).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd

from ..curves import ZeroCurve
from ..dates import day_numbers, quantlib_calendar

EPOCH_SERIAL = 25569
"""QuantLib's serial number of 1970-01-01 (day number 0)."""
FAR_DAYS = 150 * 365
"""A flat knot this far after V keeps QuantLib's curve flat beyond the last knot."""


def quantlib_example(
    a: float, sigma: float, steps_per_year: int = 365
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """QuantLib-SWIG's callable bond example (``callablebonds.py``) as a dated row: a 2.5 % quarterly ACT/ACT-ICMA
    bond to 2012-09-15, callable at 100 clean each quarter from 2006-09-15, valued on 2006-08-16, T+3 on the US
    calendar; its calls; its flat 4.65 % semiannual curve (read on ACT/365F years)."""
    row = dict(
        id="example",
        instrument="callable_bond",
        exercise="bermudan",
        coupon=0.025,
        coupon_frequency=4,
        issue_date="2004-09-16",
        maturity_date="2012-09-15",
        day_count="ACT/ACT-ICMA",
        calendar="US",
        accrual_convention="unadjusted",
        payment_convention="following",
        settlement_days=3,
        valuation_date="2006-08-16",
        mean_reversion=a,
        volatility=sigma,
        steps_per_year=steps_per_year,
        curve="flat",
    )
    dates = pd.date_range("2006-09-15", periods=24, freq=pd.DateOffset(months=3)).strftime("%Y-%m-%d")
    calls = pd.DataFrame(dict(id=row["id"], date=dates, price=100.0, price_type="clean"))
    curve = pd.DataFrame(dict(curve="flat", t=[1.0, 30.0], zero_rate=0.0465, compounding="semiannual"))
    return pd.DataFrame([row]), calls, curve


def day_counter(name: str):
    """QuantLib's day counter of a distprice day count name."""
    import QuantLib as ql

    return {
        "ACT/360": ql.Actual360,
        "ACT/365F": ql.Actual365Fixed,
        "30/360": lambda: ql.Thirty360(ql.Thirty360.BondBasis),
        "30E/360": lambda: ql.Thirty360(ql.Thirty360.European),
        "ACT/ACT-ISDA": lambda: ql.ActualActual(ql.ActualActual.ISDA),
        "ACT/ACT-ICMA": lambda: ql.ActualActual(ql.ActualActual.ISMA),
    }[name]()


def convention(name: str):
    """QuantLib's business-day convention of a distprice convention name."""
    import QuantLib as ql

    return {
        "unadjusted": ql.Unadjusted,
        "following": ql.Following,
        "modified_following": ql.ModifiedFollowing,
        "preceding": ql.Preceding,
    }[name]


def ql_date(day: int):
    import QuantLib as ql

    return ql.Date(int(day) + EPOCH_SERIAL)


def curve_handle(curve: ZeroCurve, valuation: int):
    """A QuantLib curve equal to ``curve`` seen from ``valuation`` (knots given in years are put on whole days:
    exact when ``t * D`` is whole)."""
    import QuantLib as ql

    curve = curve.at(valuation)  # quoted zero rates converted on the valuation date
    days = (curve.dates - valuation if curve.dates is not None else np.rint(curve.t * curve.days_per_year)).astype(
        np.int64
    )
    rates = list(curve.zero_rate)
    if days[0] > 0:
        days, rates = np.r_[0, days], [rates[0]] + rates
    if days[-1] < FAR_DAYS:
        days, rates = np.r_[days, FAR_DAYS], rates + [rates[-1]]
    counter = ql.Actual360() if curve.day_count == "ACT/360" else ql.Actual365Fixed()
    return ql.YieldTermStructureHandle(
        ql.ZeroCurve(
            [ql_date(valuation + d) for d in days], rates, counter, ql.NullCalendar(), ql.Linear(), ql.Continuous
        )
    )


def _value(frame: pd.Series, column: str, default):
    value = frame.get(column, default)
    return default if value is None or (isinstance(value, float) and np.isnan(value)) else value


@contextlib.contextmanager
def _evaluation_date_kept():
    """QuantLib's evaluation date as it was once the block ends (the functions here set it to each row's
    valuation date)."""
    import QuantLib as ql

    settings = ql.Settings.instance()
    saved = settings.evaluationDate
    try:
        yield
    finally:
        settings.evaluationDate = saved


def price_dated_quantlib(
    portfolio: pd.DataFrame,
    curves: dict[str, ZeroCurve],
    as_of=None,
    exercise_schedule: pd.DataFrame | None = None,
    steps=None,
    coupon_schedule: pd.DataFrame | None = None,
    principal_schedule: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """QuantLib's prices of dated rows (the portfolio's own columns, as a user gives them) on ``curves``.

    ``as_of`` is the valuation date of rows without a ``valuation_date``; ``exercise_schedule`` the table of
    exercise dates (``id, date, price, price_type``); ``coupon_schedule`` and ``principal_schedule`` the step-up
    coupons and repayments (``id, date, coupon``; ``id, date, repaid``); ``steps`` the tree's steps per row (a
    sequence; default: ``round(T * steps_per_year)`` with T the time of the last cash flow on the curve's day
    count). Returns, in
    the portfolio's index, ``price``, ``bond_price``, ``dirty_price``, ``clean_price`` and ``accrued`` (face
    units; ``clean_price`` and ``accrued`` NaN for bond options).
    """
    out = []
    with _evaluation_date_kept():
        for i, (_, row) in enumerate(portfolio.iterrows()):
            payments = (coupon_schedule, principal_schedule)
            built = _bonds(row, curves, as_of, exercise_schedule, None if steps is None else steps[i], payments)
            straight, bond = built["straight"], built["bond"]
            face = straight.notional(straight.settlementDate())  # the per-100 quotes' face
            instrument = _value(row, "instrument", "bond_option")
            result = dict(bond_price=straight.NPV(), accrued=straight.accruedAmount() * face / 100.0)
            if bond is None:
                result.update(
                    price=straight.NPV(),
                    dirty_price=straight.dirtyPrice() * face / 100.0,
                    clean_price=straight.cleanPrice() * face / 100.0,
                )
            elif instrument == "bond_option":
                option = abs(bond.NPV() - straight.NPV())
                result.update(price=option, dirty_price=np.nan, clean_price=np.nan, accrued=np.nan)
            else:
                result.update(
                    price=bond.NPV(),
                    dirty_price=bond.dirtyPrice() * face / 100.0,
                    clean_price=bond.cleanPrice() * face / 100.0,
                )
            out.append(result)
    return pd.DataFrame(out, index=portfolio.index)[["price", "bond_price", "dirty_price", "clean_price", "accrued"]]


WEEK = 1.0 / 52.0
"""How far before a coupon QuantLib's tree moves an exercise date onto the coupon's date (years)."""


def quantlib_steps(
    portfolio: pd.DataFrame,
    curves: dict[str, ZeroCurve],
    steps,
    as_of=None,
    exercise_schedule: pd.DataFrame | None = None,
) -> np.ndarray:
    """The steps of the time grid QuantLib's tree engine prices each row on, given ``steps`` (per row; the other
    arguments as :func:`price_dated_quantlib`; 0 for a plain bond, priced without a tree). Its grid puts every
    coupon payment, exercise date (moved onto a coupon up to a week after it) and the redemption on a node, each
    interval between two of them cut into the nearest whole number (at least one) of steps of ``T / steps``, T
    the last date's time: more or fewer steps than it is given (quarterly dates 1.52 steps apart take 2 each)."""
    import QuantLib as ql

    out = []
    with _evaluation_date_kept():
        for i, (_, row) in enumerate(portfolio.iterrows()):
            built = _bonds(row, curves, as_of, exercise_schedule, steps[i])
            bond, handle = built["bond"], built["handle"]
            if bond is None:
                out.append(0)
                continue
            settlement = bond.settlementDate()
            coupons = [handle.timeFromReference(c.date()) for c in bond.cashflows() if c.date() > settlement]
            exercises = []
            for c in bond.callability():
                t = handle.timeFromReference(c.date())
                exercises.append(next((u for u in coupons if t <= u <= t + WEEK), t))
            times = sorted({t for t in coupons + exercises if t >= 0.0})
            out.append(len(ql.TimeGrid(times, int(steps[i]))) - 1)
    return np.asarray(out, dtype=np.int64)


def risk_dated_quantlib(
    portfolio: pd.DataFrame,
    curves: dict[str, ZeroCurve],
    as_of=None,
    exercise_schedule: pd.DataFrame | None = None,
    steps=None,
    bump: float = 1e-3,
    market_clean=None,
    spread=None,
) -> pd.DataFrame:
    """QuantLib's risk of dated callable and puttable bonds (arguments as :func:`price_dated_quantlib`):
    ``CallableBond.OAS(market clean per 100, curve, curve's day count, Continuous, NoFrequency)`` where
    ``market_clean`` (a sequence, units of face) gives one, then at that spread (or 0)
    ``effectiveDuration`` and ``effectiveConvexity`` with spread bump ``bump`` (decimal), or at ``spread`` (a
    sequence, decimal) where given. QuantLib's OAS
    matches the value at the valuation date (``NPV``) to the market's dirty price, not the dirty price at
    settlement. Returns ``oas`` (NaN without a market price), ``effective_duration``, ``effective_convexity``
    in the portfolio's index."""
    import QuantLib as ql

    out = []
    with _evaluation_date_kept():
        for i, (_, row) in enumerate(portfolio.iterrows()):
            built = _bonds(row, curves, as_of, exercise_schedule, None if steps is None else steps[i])
            bond, handle, face = built["bond"], built["handle"], built["face"]
            counter = ql.Actual360() if built["curve"].day_count == "ACT/360" else ql.Actual365Fixed()
            clean = None if market_clean is None else market_clean[i]
            oas = np.nan
            if clean is not None and np.isfinite(clean):
                oas = bond.OAS(float(clean) * 100.0 / face, handle, counter, ql.Continuous, ql.NoFrequency)
            at = float(spread[i]) if spread is not None else 0.0 if np.isnan(oas) else oas
            out.append(
                dict(
                    oas=oas,
                    effective_duration=bond.effectiveDuration(at, handle, counter, ql.Continuous, ql.NoFrequency, bump),
                    effective_convexity=bond.effectiveConvexity(
                        at, handle, counter, ql.Continuous, ql.NoFrequency, bump
                    ),
                )
            )
    return pd.DataFrame(out, index=portfolio.index)


def _bonds(
    row: pd.Series, curves: dict[str, ZeroCurve], as_of, exercise_schedule, steps, payments=(None, None)
) -> dict:
    """QuantLib's objects of a dated row, at its valuation date (made QuantLib's evaluation date): the
    straight bond (``straight``, priced by discounting), the callable or puttable bond (``bond``, priced on
    the Hull-White tree; None for a plain bond), the curve (``handle``, and ``curve`` ours) and ``face``;
    ``payments`` the coupon and principal schedule tables (or None)."""
    import QuantLib as ql

    valuation = int(day_numbers([_value(row, "valuation_date", as_of)])[0])
    ql.Settings.instance().evaluationDate = ql_date(valuation)
    curve = curves[_value(row, "curve", "default")]
    handle = curve_handle(curve, valuation)
    face, coupon = float(_value(row, "face", 100.0)), float(_value(row, "coupon", 0.0))
    settle = int(_value(row, "settlement_days", 0))
    calendar = quantlib_calendar(_value(row, "calendar", "none"))
    payment = convention(_value(row, "payment_convention", "following"))
    accrual = convention(_value(row, "accrual_convention", "unadjusted"))
    maturity = ql.DateParser.parseISO(str(row["maturity_date"])[:10])
    issue = ql.DateParser.parseISO(str(row["issue_date"])[:10]) if coupon > 0 else None
    frequency = int(_value(row, "coupon_frequency", 0))
    redemption = float(_value(row, "redemption", 100.0))
    counter = day_counter(_value(row, "day_count", "30/360"))
    schedule = (
        ql.Schedule(
            issue,
            maturity,
            ql.Period(12 // frequency, ql.Months),
            calendar,
            accrual,
            accrual,
            ql.DateGeneration.Backward,
            bool(_value(row, "end_of_month", False)),
        )
        if coupon > 0
        else None
    )
    rates, notionals = _per_period(row, schedule, calendar, payment, coupon, face, *payments)
    if notionals is not None:
        straight = ql.AmortizingFixedRateBond(
            settle,
            notionals,
            schedule,
            rates,
            counter,
            payment,
            issue,
            ql.Period(),
            ql.NullCalendar(),
            ql.Unadjusted,
            False,
            [redemption],
        )
    elif schedule is not None:
        straight = ql.FixedRateBond(settle, face, schedule, rates, counter, payment, redemption, issue)
    else:
        straight = ql.ZeroCouponBond(settle, calendar, face, maturity, payment, redemption)
    straight.setPricingEngine(ql.DiscountingBondEngine(handle))
    built = dict(straight=straight, bond=None, handle=handle, curve=curve, face=face)
    instrument = _value(row, "instrument", "bond_option")
    if instrument == "bond":
        return built
    kind = {"callable_bond": "call", "puttable_bond": "put"}.get(instrument, _value(row, "option_type", "call"))
    # the dates after settlement only: QuantLib (1.44) pairs the i-th date still to come with the i-th right of
    # the whole schedule, wrong for calls and puts together once a date has passed
    settlement = straight.settlementDate()
    dates = [d for d in _exercise_dates(row, straight, exercise_schedule) if d[0] > settlement]
    callabilities = ql.CallabilitySchedule(
        [
            ql.Callability(
                ql.BondPrice(price, ql.BondPrice.Dirty if dirty else ql.BondPrice.Clean),
                ql.Callability.Call if (right or kind) == "call" else ql.Callability.Put,
                date,
            )
            for date, price, dirty, right in dates
        ]
    )
    if notionals is not None:
        raise ValueError("QuantLib has no callable or puttable amortizing bond")
    if schedule is not None:
        bond = ql.CallableFixedRateBond(
            settle, face, schedule, rates, counter, payment, redemption, issue, callabilities
        )
    else:
        bond = ql.CallableZeroCouponBond(
            settle, face, calendar, maturity, counter, payment, redemption, ql.Date(), callabilities
        )
    last = max(c.date() for c in straight.cashflows())
    n = (
        steps
        if steps is not None
        else round(counter_years(curve, valuation, last) * int(_value(row, "steps_per_year", 12)))
    )
    model = ql.HullWhite(handle, float(row["mean_reversion"]), float(row["volatility"]))
    bond.setPricingEngine(ql.TreeCallableFixedRateBondEngine(model, int(n), handle))
    return {**built, "bond": bond}


def _per_period(row, schedule, calendar, payment, coupon: float, face: float, steps, repaid):
    """A row's coupon rate per period and (with a principal schedule, else None) its notional per period, from
    the schedule tables' lines of its id: a line dated on or before the period's start, or on the previous
    coupon's payment date, sets it."""
    import QuantLib as ql

    dates = list(schedule) if schedule is not None else []
    periods = len(dates) - 1

    def lines(table, column):
        if table is None:
            return []
        mine = table[table["id"].astype(str) == str(row["id"])]
        return sorted((ql.DateParser.parseISO(str(d)[:10]), float(v)) for d, v in zip(mine["date"], mine[column]))

    rates, owed = [], []
    for i in range(periods):
        since = max(dates[i], calendar.adjust(dates[i], payment)) if i else dates[0]
        rates.append(([coupon] + [c for d, c in lines(steps, "coupon") if d <= since])[-1])
        owed.append(face * (1.0 - sum(x for d, x in lines(repaid, "repaid") if d <= since) / 100.0))
    return rates or [coupon], (owed if lines(repaid, "repaid") and periods else None)


def counter_years(curve: ZeroCurve, valuation: int, date) -> float:
    """Years from ``valuation`` to a QuantLib ``date`` on the curve's day count."""
    return (date.serialNumber() - EPOCH_SERIAL - valuation) / curve.days_per_year


def _exercise_dates(row, straight, table: pd.DataFrame | None) -> list:
    """(QuantLib date, price in % of face, dirty, right) of a row's exercise dates (european, bermudan), in
    the order given; ``right`` (``call``, ``put``) from the table's ``right`` column, else None (the row's)."""
    import QuantLib as ql

    ident = str(row["id"])
    if table is not None and (table["id"].astype(str) == ident).any():
        mine = table[table["id"].astype(str) == ident]
        types = mine["price_type"] if "price_type" in mine else pd.Series("clean", index=mine.index)
        rights = mine["right"] if "right" in mine else pd.Series(None, index=mine.index, dtype=object)
        return [
            (
                ql.DateParser.parseISO(str(d)[:10]),
                float(p),
                str(k).lower() == "dirty",
                None if pd.isna(r) else str(r).strip().lower(),
            )
            for d, p, k, r in zip(mine["date"], mine["price"], types.fillna("clean"), rights)
        ]
    strike = float(row["strike"])
    expiry = ql.DateParser.parseISO(str(row["expiry_date"])[:10])
    if _value(row, "exercise", "european") == "european":
        return [(expiry, strike, False, None)]
    first = _value(row, "first_exercise_date", None)
    first = ql.DateParser.parseISO(str(first)[:10]) if first is not None else ql.Date(1, 1, 1901)
    return [
        (c.date(), strike, False, None)
        for c in straight.cashflows()
        if ql.as_coupon(c) is not None and first <= c.date() <= expiry
    ]


def price_swaptions_quantlib(
    portfolio: pd.DataFrame, curves: dict[str, ZeroCurve], as_of=None, steps=None
) -> pd.Series:
    """QuantLib's values of swaption rows (the portfolio's own columns, with ``mean_reversion`` and
    ``volatility``) on ``curves``, in face units, in the portfolio's index::

        fixed    = ql.Schedule(start, maturity, Period(12 / f months), calendar, accrual, accrual, Backward, eom)
        floating = the same on Euribor's tenor (6 months, or the fixed period when shorter)
        swap     = ql.VanillaSwap(Payer | Receiver, face, fixed, fixed_rate, day_count, floating, euribor, 0, ...)
        option   = ql.Swaption(swap, ql.BermudanExercise(dates))
        engine   = ql.TreeSwaptionEngine(ql.HullWhite(curve, a, sigma), steps, curve)

    the exercise dates the fixed coupons' accrual start dates after V, from ``first_exercise_date`` to
    ``expiry_date`` (european: ``expiry_date``). ``steps``: the tree's steps per row (default
    ``round(T * steps_per_year)``, T the time of the swap's last payment on the curve's day count)."""
    import QuantLib as ql

    out = []
    with _evaluation_date_kept():
        for i, (_, row) in enumerate(portfolio.iterrows()):
            valuation = int(day_numbers([_value(row, "valuation_date", as_of)])[0])
            ql.Settings.instance().evaluationDate = ql_date(valuation)
            curve = curves[_value(row, "curve", "default")]
            handle = curve_handle(curve, valuation)
            calendar = quantlib_calendar(_value(row, "calendar", "none"))
            accrual = convention(_value(row, "accrual_convention", "unadjusted"))
            months = 12 // int(row["coupon_frequency"])
            start, maturity = (ql.DateParser.parseISO(str(row[c])[:10]) for c in ("start_date", "maturity_date"))
            eom = bool(_value(row, "end_of_month", False))

            def schedule(period: int):
                return ql.Schedule(
                    start, maturity, ql.Period(period, ql.Months), calendar, accrual, accrual,
                    ql.DateGeneration.Backward, eom,
                )  # fmt: skip

            index = ql.Euribor(ql.Period(min(6, months), ql.Months), handle)
            payer = str(row["option_type"]).strip().lower() == "payer"
            face = float(_value(row, "face", 100.0))
            swap = ql.VanillaSwap(
                ql.Swap.Payer if payer else ql.Swap.Receiver,
                face,
                schedule(months),
                float(row["fixed_rate"]),
                day_counter(_value(row, "day_count", "30/360")),
                schedule(min(6, months)),
                index,
                0.0,
                index.dayCounter(),
            )
            expiry = ql.DateParser.parseISO(str(row["expiry_date"])[:10])
            european = _value(row, "exercise", "european") == "european"
            first = _value(row, "first_exercise_date", None)
            first = expiry if european else ql.DateParser.parseISO(str(first)[:10]) if first else ql.Date(1, 1, 1901)
            starts = [ql.as_coupon(c).accrualStartDate() for c in swap.fixedLeg()]
            dates = [d for d in starts if d > ql_date(valuation) and first <= d <= expiry]
            option = ql.Swaption(swap, ql.BermudanExercise(dates))
            last = max(c.date() for c in swap.fixedLeg())
            n = (
                steps[i]
                if steps is not None
                else round(counter_years(curve, valuation, last) * int(_value(row, "steps_per_year", 12)))
            )
            model = ql.HullWhite(handle, float(row["mean_reversion"]), float(row["volatility"]))
            option.setPricingEngine(ql.TreeSwaptionEngine(model, int(n), handle))
            out.append(option.NPV())
    return pd.Series(out, index=portfolio.index, name="price")
