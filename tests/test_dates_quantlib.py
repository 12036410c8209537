"""The dated-bond machinery against QuantLib 1.44 on random bonds: schedules, payment dates, coupon amounts and
reference periods equal to ``FixedRateBond(...).cashflows()``, accrued equal to ``Bond.accruedAmount(d)`` at many
dates a bond, settlement dates equal to ``Bond.settlementDate(V)``, the live cash flows after settlement."""

import numpy as np
import pandas as pd
import pytest

from distprice.dates import (
    CALENDARS,
    CONVENTIONS,
    DAY_COUNTS,
    FREQUENCIES,
    accrued,
    cash_flows,
    coupons,
    day_numbers,
    last_business_days,
    parallel,
    quantlib_calendar,
    redemption_dates,
    schedule,
    settle,
    terms_from_frame,
)

ql = pytest.importorskip("QuantLib")

SERIAL = 25569
"""QuantLib's serial number of 1970-01-01 (day number 0)."""
TOLERANCE = 1e-12
"""Per 100 of face."""


def qdate(day) -> "ql.Date":
    return ql.Date(int(day) + SERIAL)


def day(date: "ql.Date") -> int:
    return date.serialNumber() - SERIAL


DAY_COUNTERS = {
    "ACT/360": lambda: ql.Actual360(),
    "ACT/365F": lambda: ql.Actual365Fixed(),
    "30/360": lambda: ql.Thirty360(ql.Thirty360.BondBasis),
    "30E/360": lambda: ql.Thirty360(ql.Thirty360.European),
    "ACT/ACT-ISDA": lambda: ql.ActualActual(ql.ActualActual.ISDA),
    "ACT/ACT-ICMA": lambda: ql.ActualActual(ql.ActualActual.ISMA),
}
QL_CONVENTIONS = {
    "unadjusted": ql.Unadjusted,
    "following": ql.Following,
    "modified_following": ql.ModifiedFollowing,
    "preceding": ql.Preceding,
}


def random_bonds(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Dated bonds covering every day count, calendar, convention pair and frequency; maturities on month ends
    and on last business days, issue dates on the backward grid (no stub), near it (short and long first
    periods) or anywhere; a few zero-coupon rows; valuation dates anywhere in the bond's life (weekends too)."""
    rows = []
    for i in range(n):
        name = str(rng.choice(CALENDARS.names))
        calendar = quantlib_calendar(name)
        frequency = int(rng.choice(FREQUENCIES))
        tenor = ql.Period(12 // frequency, ql.Months)
        end_of_month = bool(rng.random() < 0.5)
        maturity = qdate(rng.integers(day(ql.Date(1, 1, 2000)), day(ql.Date(31, 12, 2060))))
        shape = rng.random()
        if shape < 0.25:
            maturity = ql.Date.endOfMonth(maturity)
        elif shape < 0.55:
            maturity = calendar.endOfMonth(maturity)
        periods = int(rng.integers(1, (60 if frequency == 12 else 4 * frequency) + 1))
        long_first = rng.random() < 0.1
        if long_first:  # the first regular date on a Saturday, the issue a day after the grid date before it
            maturity = ql.Date(int(rng.integers(1, 22)), maturity.month(), maturity.year())
            first = maturity - (periods - 1) * tenor
            maturity += (ql.Saturday - first.weekday()) % 7
        grid = ql.NullCalendar().advance(maturity, -periods * tenor, ql.Unadjusted, end_of_month)
        shape = rng.random()
        if shape < 0.25 and not long_first:
            issue = grid
        elif shape < 0.6 or long_first:  # near the grid: a day or two after it gives long first periods
            issue = grid + (1 if long_first else int(rng.choice([-3, -1, 1, 1, 1, 2, 2, 3])))
        else:
            issue = maturity - int(rng.integers(20, maturity - grid + 1))
        issue = min(issue, maturity - 1)
        zero = rng.random() < 0.05
        valuation = qdate(rng.integers(day(issue) - 40, day(maturity) + 10))
        rows.append(
            dict(
                id=f"b{i}",
                maturity_date=maturity.ISO(),
                issue_date=issue.ISO(),
                coupon=0.0 if zero else float(rng.uniform(0.001, 0.1)),
                coupon_frequency=0 if zero else frequency,
                day_count="ACT/ACT-ICMA" if long_first and rng.random() < 0.5 else str(rng.choice(DAY_COUNTS.names)),
                calendar=name,
                accrual_convention="following" if long_first else str(rng.choice(CONVENTIONS.names)),
                payment_convention=str(rng.choice(CONVENTIONS.names)),
                end_of_month=end_of_month,
                settlement_days=int(rng.integers(0, 4)),
                face=float(rng.choice([100.0, 1000.0, 25.0])),
                redemption=float(rng.choice([100.0, 101.5])),
                valuation_date=valuation.ISO(),
            )
        )
    return pd.DataFrame(rows)


def quantlib_bond(row):
    """QuantLib's bond of one row, and its schedule (None for a zero-coupon bond)."""
    calendar = quantlib_calendar(row.calendar)
    maturity, issue = ql.DateParser.parseISO(row.maturity_date), ql.DateParser.parseISO(row.issue_date)
    payment = QL_CONVENTIONS[row.payment_convention]
    if row.coupon == 0:
        return ql.ZeroCouponBond(
            row.settlement_days, calendar, row.face, maturity, payment, row.redemption, issue
        ), None
    accrual = QL_CONVENTIONS[row.accrual_convention]
    schedule = ql.Schedule(
        issue,
        maturity,
        ql.Period(12 // row.coupon_frequency, ql.Months),
        calendar,
        accrual,
        accrual,
        ql.DateGeneration.Backward,
        bool(row.end_of_month),
    )
    bond = ql.FixedRateBond(
        row.settlement_days,
        row.face,
        schedule,
        [row.coupon],
        DAY_COUNTERS[row.day_count](),
        payment,
        row.redemption,
        issue,
    )
    return bond, schedule


def accrual_dates(rng, schedule_days, low, high):
    """Dates to take the accrued at: random ones and every schedule date with its neighbours."""
    days = set(rng.integers(low, high + 1, 12).tolist())
    for d in schedule_days:
        days.update((d - 1, d, d + 1))
    return sorted(days)


@pytest.fixture(scope="module")
def book():
    """2 000 random bonds with QuantLib's view of each (schedule, coupons, redemption, accrued, settlement)."""
    rng = np.random.default_rng(20261124)
    frame = random_bonds(rng, 2000)
    expected = []
    for row in frame.itertuples():
        bond, ql_schedule = quantlib_bond(row)
        flows = [(day(c.date()), c.amount(), ql.as_coupon(c)) for c in bond.cashflows()]
        coupons_ = [
            (
                d,
                a,
                day(c.accrualStartDate()),
                day(c.accrualEndDate()),
                day(c.referencePeriodStart()),
                day(c.referencePeriodEnd()),
            )
            for d, a, c in flows
            if c is not None
        ]
        redemption = [(d, a) for d, a, c in flows if c is None]
        assert len(redemption) == 1
        schedule_days = [day(d) for d in ql_schedule] if ql_schedule is not None else []
        maturity = day(ql.DateParser.parseISO(row.maturity_date))
        dates = accrual_dates(rng, schedule_days or [maturity], maturity - 1900, maturity + 5)
        valuation = ql.DateParser.parseISO(row.valuation_date)
        expected.append(
            dict(
                schedule=schedule_days,
                coupons=coupons_,
                redemption=redemption[0],
                dates=dates,
                accrued=[bond.accruedAmount(qdate(d)) * row.face / 100 for d in dates],
                settlement=day(bond.settlementDate(valuation)),
            )
        )
    return frame, terms_from_frame(frame), expected


def test_the_sample_covers_every_case(book):
    frame, terms, _ = book
    coupon = frame[frame.coupon > 0]
    assert set(coupon.day_count) == set(DAY_COUNTS.names)
    assert set(coupon.calendar) == set(CALENDARS.names)
    assert len(coupon.groupby(["accrual_convention", "payment_convention"])) == 16
    assert set(coupon.coupon_frequency) == set(FREQUENCIES)
    assert set(frame.settlement_days) == {0, 1, 2, 3}
    weekday = pd.to_datetime(frame.valuation_date).dt.day_of_week
    assert (weekday >= 5).sum() > 200
    coupon = terms.coupon > 0
    dates, table = schedule(terms), coupons(terms)
    stub = ~dates.regular & coupon
    assert stub.sum() > 500 and (~stub & coupon).sum() > 300
    month_end = (terms.maturity.view("datetime64[D]").astype("datetime64[M]") + 1).astype("datetime64[D]").view(
        np.int64
    ) - 1
    eom_rule = coupon & terms.end_of_month & (terms.maturity == month_end)
    business_eom = (
        coupon & terms.end_of_month & ~eom_rule & (terms.maturity >= last_business_days(terms.calendar, terms.maturity))
    )
    assert eom_rule.sum() > 300 and business_eom.sum() > 40
    first = table.offsets[:-1][table.counts > 0]
    long_first = table.accrual_start[first] < table.reference_start[first]  # stretched past its reference start
    assert long_first.sum() > 50 and (long_first & (terms.day_count[table.counts > 0] == 5)).sum() > 25


def test_schedules_equal_quantlib(book):
    _, terms, expected = book
    dates = schedule(terms)
    for r, e in enumerate(expected):
        assert dates.row(r).tolist() == e["schedule"], r


def test_coupons_equal_quantlib(book):
    _, terms, expected = book
    table = coupons(terms)
    payment = redemption_dates(terms)
    for r, e in enumerate(expected):
        lo, hi = table.offsets[r], table.offsets[r + 1]
        want = np.array([c[:1] + c[2:] for c in e["coupons"]], dtype=np.int64).reshape(-1, 5)
        got = np.stack(
            [
                table.payment[lo:hi],
                table.accrual_start[lo:hi],
                table.accrual_end[lo:hi],
                table.reference_start[lo:hi],
                table.accrual_end[lo:hi],
            ],
            axis=1,
        )
        assert np.array_equal(got, want), r
        amounts = np.array([c[1] for c in e["coupons"]])
        assert np.abs(table.amount[lo:hi] - amounts).max(initial=0) <= TOLERANCE * terms.face[r] / 100, r
        assert payment[r] == e["redemption"][0], r
        assert abs(terms.face[r] * terms.redemption[r] / 100 - e["redemption"][1]) <= 1e-13 * terms.face[r], r


def test_accrued_equals_quantlib(book):
    _, terms, expected = book
    table = coupons(terms)
    rows = np.concatenate([np.full(len(e["dates"]), r) for r, e in enumerate(expected)])
    days = np.concatenate([e["dates"] for e in expected])
    want = np.concatenate([e["accrued"] for e in expected])
    got = accrued(terms, table, rows, days)
    assert len(days) > 40_000 and (want > 0).mean() > 0.5
    assert np.abs(got - want).max() <= TOLERANCE * terms.face.max() / 100
    assert np.all(np.abs(got - want) <= TOLERANCE * terms.face[rows] / 100)


def test_live_cash_flows_after_settlement(book):
    frame, terms, expected = book
    flows = cash_flows(terms, day_numbers(frame.valuation_date))
    assert flows.settlement.tolist() == [e["settlement"] for e in expected]
    live = flows.coupons
    for r, e in enumerate(expected):
        s = e["settlement"]
        lo, hi = live.offsets[r], live.offsets[r + 1]
        want = [(c[0], c[2], c[3]) for c in e["coupons"] if c[0] > s]
        assert (
            list(
                zip(live.payment[lo:hi].tolist(), live.accrual_start[lo:hi].tolist(), live.accrual_end[lo:hi].tolist())
            )
            == want
        ), r
        assert flows.matured[r] == (e["redemption"][0] <= s), r
    # accrued from the live table equals accrued from the whole one, at settlement and after it
    whole = coupons(terms)
    rows = np.repeat(np.arange(len(terms)), 5)
    days = np.repeat(flows.settlement, 5) + np.tile([0, 1, 40, 200, 900], len(terms))
    assert np.array_equal(accrued(terms, live, rows, days), accrued(terms, whole, rows, days))
    assert np.array_equal(flows.accrued, accrued(terms, whole, np.arange(len(terms)), flows.settlement))
    assert float(accrued(terms, live, 3, flows.settlement[3])) == flows.accrued[3]  # one row, one date
    # the counts and accrued interest made without a table (settle) equal the table's, at any dates
    for shift in (0, 40, 900):
        at = flows.settlement + shift
        settled = settle(terms, after=at)
        assert np.array_equal(settled.live, coupons(terms, at).counts), shift
        assert np.array_equal(settled.accrued, accrued(terms, whole, np.arange(len(terms)), at)), shift
    with pytest.raises(ValueError, match="not both"):
        settle(terms)
    assert (flows.accrued > 0).sum() > 1000 and flows.matured.sum() > 10
    with pytest.raises(ValueError, match="precede"):
        accrued(terms, live, [0], [flows.settlement[0] - 1])


def test_schedules_and_coupon_tables_agree(book):
    """The whole schedule and the coupon table are two views of the same dates."""
    _, terms, _ = book
    dates, table = schedule(terms), coupons(terms)
    assert np.array_equal(np.maximum(dates.counts - 1, 0), table.counts)
    first = dates.offsets[:-1][dates.counts > 0]
    inner = np.ones(len(dates.dates), dtype=bool)
    inner[first] = False
    assert np.array_equal(table.accrual_end, dates.dates[inner])
    assert np.array_equal(table.accrual_start, dates.dates[np.flatnonzero(inner) - 1])
    assert np.all(np.diff(dates.dates)[np.diff(np.repeat(np.arange(len(terms)), dates.counts)) == 0] > 0)


def test_rows_on_threads_give_the_same_tables(book, monkeypatch):
    frame, terms, _ = book
    valuation = day_numbers(frame.valuation_date)
    alone = cash_flows(terms, valuation)
    monkeypatch.setattr(parallel, "SMALL", 1)  # blocks of rows on two threads
    monkeypatch.setattr(parallel.numba, "get_num_threads", lambda: 2)
    shared = cash_flows(terms, valuation)
    for name in ("settlement", "accrued", "redemption_date"):
        assert np.array_equal(getattr(alone, name), getattr(shared, name)), name
    for name in ("offsets", "accrual_start", "accrual_end", "payment", "amount", "reference_start"):
        assert np.array_equal(getattr(alone.coupons, name), getattr(shared.coupons, name)), name
