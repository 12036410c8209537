"""Calendars against QuantLib: the shipped holiday lists, business days over 1901-2199, the business-day
conventions, advancing by business days, last business days of months, business days between two dates."""

import numpy as np
import pytest

from distprice.dates import (
    CALENDARS,
    CONVENTIONS,
    FIRST_DAY,
    LAST_DAY,
    adjust_days,
    advance_days,
    business_days,
    business_table,
    calendars,
    holidays,
    is_business_day,
    last_business_days,
    quantlib_calendar,
)
from distprice.errors import OptionError

ql = pytest.importorskip("QuantLib")

SERIAL = 25569
"""QuantLib's serial number of 1970-01-01 (day number 0)."""
QL_CONVENTIONS = {
    "unadjusted": ql.Unadjusted,
    "following": ql.Following,
    "modified_following": ql.ModifiedFollowing,
    "preceding": ql.Preceding,
}
EVERY_DAY = np.arange(FIRST_DAY, LAST_DAY + 1)


def qdate(day) -> "ql.Date":
    return ql.Date(int(day) + SERIAL)


@pytest.mark.parametrize("name", holidays.LISTED)
def test_shipped_holidays_are_quantlibs(name):
    assert np.array_equal(holidays.shipped()[name], holidays.quantlib_holidays(name))


def test_the_export_writes_the_shipped_file(tmp_path):
    path = tmp_path / "holidays.csv"
    holidays.export(path)
    ours, theirs = holidays.HOLIDAYS_FILE.read_text().splitlines(), path.read_text().splitlines()
    assert ours[1:] == theirs[1:] and len(ours) > 10_000
    assert "US,2025-12-25" in ours and "JP,2019-05-01" in ours and "TARGET,2025-05-01" in ours


@pytest.mark.parametrize("name", CALENDARS.names)
def test_business_days_are_quantlibs_on_every_day(name):
    calendar = quantlib_calendar(name)
    # QuantLib's holidayList stops a day short of its last date
    holiday = set(
        d.serialNumber() - SERIAL
        for d in ql.Calendar.holidayList(calendar, qdate(FIRST_DAY), qdate(LAST_DAY - 1), True)
    )
    if not calendar.isBusinessDay(qdate(LAST_DAY)):
        holiday.add(LAST_DAY)
    want = ~np.isin(EVERY_DAY, np.array(sorted(holiday), dtype=np.int64))
    got = is_business_day(name, EVERY_DAY)
    assert np.array_equal(got, want)
    assert want.mean() > (0.95 if name == "none" else 0.6)


def test_beyond_the_lists_only_weekends_are_holidays():
    days = np.concatenate([np.arange(FIRST_DAY - 14, FIRST_DAY), np.arange(LAST_DAY + 1, LAST_DAY + 15)])
    weekday = (days + 3) % 7 < 5
    for name in CALENDARS.names:
        assert np.array_equal(is_business_day(name, days), weekday | (name == "none"))


@pytest.fixture(scope="module")
def sample():
    rng = np.random.default_rng(11)
    days = rng.integers(FIRST_DAY + 40, LAST_DAY - 40, 3000)
    ends = (days.view("datetime64[D]").astype("datetime64[M]") + 1).astype("datetime64[D]").view(np.int64) - 1
    days[::3] = ends[::3] - rng.integers(0, 4, len(ends[::3]))  # month ends, where modified following bites
    calendars = rng.integers(0, len(CALENDARS.names), len(days))
    return days, calendars


@pytest.mark.parametrize("convention", CONVENTIONS.names)
def test_adjust_is_quantlibs(sample, convention):
    days, calendars = sample
    got = adjust_days(calendars, days, convention)
    want = [
        quantlib_calendar(CALENDARS.name(c)).adjust(qdate(d), QL_CONVENTIONS[convention]).serialNumber() - SERIAL
        for d, c in zip(days, calendars)
    ]
    assert got.tolist() == want
    moved = (got != days).sum()
    assert moved == 0 if convention == "unadjusted" else moved > 300


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, -1, -3])
def test_advance_is_quantlibs(sample, n):
    days, calendars = sample
    got = advance_days(calendars, days, n)
    want = [
        quantlib_calendar(CALENDARS.name(c)).advance(qdate(d), n, ql.Days).serialNumber() - SERIAL
        for d, c in zip(days, calendars)
    ]
    assert got.tolist() == want


def test_last_business_day_of_the_month_is_quantlibs(sample):
    days, calendars = sample
    got = last_business_days(calendars, days)
    want = [
        quantlib_calendar(CALENDARS.name(c)).endOfMonth(qdate(d)).serialNumber() - SERIAL
        for d, c in zip(days, calendars)
    ]
    assert got.tolist() == want


def test_business_days_between_two_dates(sample):
    days, calendars = sample
    ends = days + np.arange(len(days)) % 45 - 5  # some windows empty, some one day long
    table = business_days(calendars, days, ends)
    assert table.offsets[-1] == len(table.dates) and (table.counts == 0).sum() > 50
    for r in range(0, len(days), 7):
        calendar = quantlib_calendar(CALENDARS.name(calendars[r]))
        want = (
            [d.serialNumber() - SERIAL for d in calendar.businessDayList(qdate(days[r]), qdate(ends[r]))]
            if ends[r] >= days[r]
            else []
        )
        assert table.row(r).tolist() == want, r


@pytest.mark.parametrize("name", CALENDARS.names)
def test_business_days_are_counted_as_the_days_are_tested(name):
    """The count of business days in a window (a byte of the calendar's bits at a time) is the count of days the
    business-day test passes: windows of every length up to years, within a byte, across the table's first and
    last day and wholly outside its years."""
    rng = np.random.default_rng(CALENDARS.code(name))
    code, business = CALENDARS.code(name), business_table()
    for base in (FIRST_DAY, LAST_DAY, *rng.integers(FIRST_DAY, LAST_DAY, 6)):
        for lo in base + rng.integers(-40, 40, 25):
            for hi in (lo - 1, lo, lo + 3, *(lo + rng.integers(0, 2000, 3))):
                want = int(is_business_day(name, np.arange(lo, hi + 1)).sum())
                assert calendars.business_count(business, code, lo, hi) == want, (lo, hi)


def test_names_and_codes_of_calendars():
    days = np.array([20454])  # 2026-01-01, a holiday everywhere but none/weekends
    assert is_business_day("us", days).tolist() == [False]  # names are matched without regard to case
    assert is_business_day(CALENDARS.code("weekends"), days).tolist() == [True]
    with pytest.raises(OptionError, match="calendar must be one of none, weekends, US, TARGET, UK, JP"):
        is_business_day("NYSE", days)
    with pytest.raises(OptionError, match="business-day convention"):
        adjust_days("US", days, "nearest")
    with pytest.raises(OptionError, match="codes are 0..5"):
        is_business_day(np.array([7]), days)
    with pytest.raises(OptionError, match="code\\(s\\) \\[258\\]"):  # not wrapped round to a valid code
        is_business_day(np.array([258]), days)


def test_no_calendar_closes_for_four_weeks(monkeypatch):
    """Schedules rely on it: dates a month apart never adjust to the same day."""
    table = np.unpackbits(business_table(), axis=1, bitorder="little")[:, : LAST_DAY - FIRST_DAY + 1].astype(bool)
    assert [calendars.longest_closure(row) for row in table] == [0, 2, 3, 4, 4, 10]  # JP: Golden Week 2019
    closed = dict(holidays.shipped())
    closed["UK"] = np.union1d(closed["UK"], np.arange(21974, 22002))  # March 2030, 28 days
    monkeypatch.setattr(calendars, "shipped", lambda: closed)
    with pytest.raises(ValueError, match="calendar UK has more than 27 non-business days in a row"):
        calendars.business_table.__wrapped__()
