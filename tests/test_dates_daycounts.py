"""Gregorian arithmetic on day numbers against numpy, and the day counts against QuantLib (bit for bit) and
hand-worked values."""

import calendar

import numba
import numpy as np
import pytest

from distprice.dates import DAY_COUNTS, day_numbers, year_fractions
from distprice.dates.civil import add_months, day_number, month_end, weekday, ymd
from distprice.dates.daycounts import accrual_anchor, accrual_fraction, year_fraction
from distprice.errors import OptionError

ql = pytest.importorskip("QuantLib")

SERIAL = 25569
DAY_COUNTERS = {
    "ACT/360": ql.Actual360(),
    "ACT/365F": ql.Actual365Fixed(),
    "30/360": ql.Thirty360(ql.Thirty360.BondBasis),
    "30E/360": ql.Thirty360(ql.Thirty360.European),
    "ACT/ACT-ISDA": ql.ActualActual(ql.ActualActual.ISDA),
    "ACT/ACT-ICMA": ql.ActualActual(ql.ActualActual.ISMA),
}


def qdate(day) -> "ql.Date":
    return ql.Date(int(day) + SERIAL)


@numba.njit(cache=True)
def _civil(days, months):
    out = np.empty((len(days), 7), dtype=np.int64)
    for i in range(len(days)):
        y, m, d = ymd(days[i])
        out[i] = (y, m, d, day_number(y, m, d), add_months(days[i], months[i]), month_end(days[i]), weekday(days[i]))
    return out


def test_civil_arithmetic_equals_numpy_from_1600_to_2600():
    days = np.arange(day_numbers(["1600-01-01"])[0], day_numbers(["2600-12-31"])[0] + 1)
    months = (days * 7919) % 241 - 120  # -120 .. 120 months, scrambled
    got = _civil(days, months)
    dates = days.view("datetime64[D]")
    month = dates.astype("datetime64[M]")
    year = dates.astype("datetime64[Y]").astype(np.int64) + 1970
    assert np.array_equal(got[:, 0], year)
    assert np.array_equal(got[:, 1], month.astype(np.int64) % 12 + 1)
    assert np.array_equal(got[:, 2], (dates - month.astype("datetime64[D]")).astype(np.int64) + 1)
    assert np.array_equal(got[:, 3], days)
    assert np.array_equal(got[:, 5], ((month + 1).astype("datetime64[D]") - 1).view(np.int64))
    assert got[::997, 6].tolist() == [date.weekday() for date in dates[::997].astype(object)]
    target = month + months  # month arithmetic clamps the day of month
    length = ((target + 1).astype("datetime64[D]") - target.astype("datetime64[D]")).astype(np.int64)
    want = target.astype("datetime64[D]").view(np.int64) + np.minimum(got[:, 2], length) - 1
    assert np.array_equal(got[:, 4], want)
    assert calendar.monthrange(2000, 2)[1] == 29 and ymd(day_numbers(["2000-02-29"])[0]) == (2000, 2, 29)


def test_hand_worked_year_fractions():
    d = lambda *iso: day_numbers(list(iso))  # noqa: E731
    jan31, mar31, feb28, mar1 = d("2024-01-31", "2024-03-31", "2023-02-28", "2023-03-01")
    assert year_fractions("30/360", jan31, mar31) == 60 / 360  # D1 31 -> 30, then D2 31 -> 30
    assert year_fractions("30/360", d("2024-01-30")[0], mar31) == 60 / 360
    assert year_fractions("30/360", d("2024-01-29")[0], mar31) == 62 / 360  # D2 stays 31: D1 is 29
    assert year_fractions("30E/360", d("2024-01-29")[0], mar31) == 61 / 360
    assert year_fractions("30/360", feb28, mar1) == 3 / 360  # the one-day jump of 30/360 in February
    assert year_fractions("ACT/360", feb28, mar1) == 1 / 360
    assert year_fractions("ACT/365F", d("2024-01-01")[0], d("2025-01-01")[0]) == 366 / 365
    isda = year_fractions("ACT/ACT-ISDA", d("2023-12-01")[0], d("2024-03-01")[0])
    assert isda == pytest.approx(31 / 365 + 60 / 366, abs=1e-16)
    # ICMA: a half-year period counts 0.5 whatever its days; a part of it its share of the period's days
    start, end = d("2024-02-29", "2024-08-31")
    assert year_fractions("ACT/ACT-ICMA", start, end) == 0.5
    assert year_fractions("ACT/ACT-ICMA", start, d("2024-05-31")[0], start, end) == 0.5 * 92 / 184


@pytest.mark.parametrize("name", DAY_COUNTS.names)
def test_year_fractions_equal_quantlib(name):
    rng = np.random.default_rng(DAY_COUNTS.code(name))
    d1 = rng.integers(day_numbers(["1950-01-01"])[0], day_numbers(["2150-01-01"])[0], 4000)
    ends = (d1.view("datetime64[D]").astype("datetime64[M]") + 1).astype("datetime64[D]").view(np.int64) - 1
    d1[::4] = ends[::4]  # month ends and 30ths for the 30/360 rules
    d1[1::4] = ends[1::4] - 1
    d2 = d1 + rng.integers(0, 1200, len(d1))
    d2[::5] = (d2[::5].view("datetime64[D]").astype("datetime64[M]") + 1).astype("datetime64[D]").view(np.int64) - 1
    d2 = np.maximum(d1, d2)
    counter = DAY_COUNTERS[name]
    got = year_fractions(name, d1, d2)
    want = np.array([counter.yearFraction(qdate(a), qdate(b)) for a, b in zip(d1, d2)])
    assert np.array_equal(got, want)


def test_icma_reference_periods_and_long_first_periods_equal_quantlib():
    rng = np.random.default_rng(3)
    n = 4000
    months = rng.choice([1, 3, 6, 12], n)
    r2 = rng.integers(day_numbers(["1950-01-01"])[0], day_numbers(["2150-01-01"])[0], n)
    r1 = np.array([add_months(int(e), -int(m)) for e, m in zip(r2, months)])
    d2 = r2 - rng.integers(0, 40, n) * (rng.random(n) < 0.5)
    d1 = np.minimum(d2, r1 + rng.integers(-500, 300, n))  # some start before the reference period, some by years
    got = year_fractions("ACT/ACT-ICMA", d1, d2, r1, r2)
    counter = DAY_COUNTERS["ACT/ACT-ICMA"]
    want = np.array(
        [counter.yearFraction(qdate(a), qdate(b), qdate(c), qdate(e)) for a, b, c, e in zip(d1, d2, r1, r2)]
    )
    assert np.array_equal(got, want)
    assert (d1 < r1).sum() > 1000 and (d1 < r1 - 400).sum() > 100


@numba.njit  # not cached: numba would keep it when only daycounts.py changes
def _both(code, d1, d2, r1, r2):
    out = np.empty((len(d1), 2))
    for i in range(len(d1)):
        anchor, aux = accrual_anchor(code, d1[i], r1[i], r2[i])
        out[i, 0] = accrual_fraction(code, anchor, aux, d1[i], d2[i], r1[i], r2[i])
        out[i, 1] = year_fraction(code, d1[i], d2[i], r1[i], r2[i])
    return out


@pytest.mark.parametrize("name", list(DAY_COUNTERS))
def test_accrual_fractions_are_the_year_fractions_bit_for_bit(name):
    """A period's anchor kept while its days are walked gives the very doubles of the full count: regular
    periods, short and long first periods (reference start after or before the accrual start), periods of
    15 days or less, month ends and the 31st, days up to the reference end."""
    rng = np.random.default_rng(7)
    n = 20_000
    r2 = day_numbers(["2000-01-31"])[0] + rng.integers(0, 12_000, n)
    r2[::7] = np.array([month_end(d) for d in r2[::7]])
    length = rng.choice([7, 15, 30, 91, 182, 183, 365, 366], n)
    r1 = r2 - length
    d1 = r1 + np.where(rng.random(n) < 0.3, rng.integers(-200, length), 0)  # stubs both ways
    d1 = np.minimum(d1, r2 - 1)
    d2 = d1 + 1 + (rng.random(n) * (r2 - d1)).astype(np.int64)
    d2 = np.minimum(d2, r2)
    got = _both(int(DAY_COUNTS.codes(name)), d1, d2, r1, r2)
    assert np.array_equal(got[:, 0], got[:, 1])


def test_bad_arguments_are_refused():
    with pytest.raises(OptionError, match="day count must be one of ACT/360, ACT/365F, 30/360, 30E/360"):
        year_fractions("ACT/365", [0], [1])
    with pytest.raises(ValueError, match="start <= end"):
        year_fractions("ACT/360", [5], [1])
    with pytest.raises(ValueError, match="reference_end"):
        year_fractions("ACT/ACT-ICMA", [0], [200], [0], [100])
