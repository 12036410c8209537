"""The shipped holiday lists: weekdays that are not business days, per calendar, 1901-01-01 to 2199-12-31.

The lists are QuantLib's calendars (the range of its dates) exported once by :func:`export` into
``holidays.csv`` beside this module, so that pricing needs no QuantLib; a test checks the file against the
installed QuantLib. Every calendar here has Saturday and Sunday as its weekend, which is a rule, not a list.
Re-export after a QuantLib release that changes a calendar (new public holidays are announced every year).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from .convert import EPOCH, day_numbers, to_iso
from .registry import CALENDARS

HOLIDAYS_FILE = Path(__file__).with_name("holidays.csv")
FIRST_DAY = int((np.datetime64("1901-01-01") - EPOCH).astype(np.int64))
"""Day number of 1901-01-01, the first date with known holidays (QuantLib's first date)."""
LAST_DAY = int((np.datetime64("2199-12-31") - EPOCH).astype(np.int64))
"""Day number of 2199-12-31, the last date with known holidays (QuantLib's last date)."""
LISTED = ("US", "TARGET", "UK", "JP")
"""Calendars with holiday lists; ``none`` has no holidays and ``weekends`` only the weekend."""


def quantlib_calendar(name: str):
    """The QuantLib calendar of a calendar name of :data:`~distprice.dates.registry.CALENDARS`."""
    import QuantLib as ql

    return {
        "none": ql.NullCalendar,
        "weekends": ql.WeekendsOnly,
        "US": lambda: ql.UnitedStates(ql.UnitedStates.GovernmentBond),
        "TARGET": ql.TARGET,
        "UK": lambda: ql.UnitedKingdom(ql.UnitedKingdom.Exchange),
        "JP": ql.Japan,
    }[CALENDARS.name(CALENDARS.code(name))]()


def quantlib_holidays(name: str) -> np.ndarray:
    """Day numbers of the weekday holidays of QuantLib's calendar ``name`` from 1901-01-01 to 2199-12-31."""
    import QuantLib as ql

    calendar = quantlib_calendar(name)
    weekend = [
        calendar.isWeekend(day)
        for day in (ql.Monday, ql.Tuesday, ql.Wednesday, ql.Thursday, ql.Friday, ql.Saturday, ql.Sunday)
    ]
    if weekend != [False] * 5 + [True] * 2:
        raise ValueError(f"QuantLib's calendar {name} does not have a Saturday-Sunday weekend")
    offset = ql.Date(1, 1, 1970).serialNumber()
    last = ql.Date(LAST_DAY + offset)
    # QuantLib's holidayList steps one day past its end date, so the last date is looked at apart
    days = [
        d.serialNumber() - offset
        for d in ql.Calendar.holidayList(calendar, ql.Date(FIRST_DAY + offset), last - 1, False)
    ]
    if calendar.isHoliday(last) and not calendar.isWeekend(last.weekday()):
        days.append(LAST_DAY)
    return np.array(days, dtype=np.int64)


def export(path=HOLIDAYS_FILE) -> None:
    """Write the holiday lists of the installed QuantLib to ``path`` (CSV: ``calendar,date``)."""
    import QuantLib as ql

    lines = [
        f"# weekday holidays 1901-01-01..2199-12-31 from QuantLib {ql.__version__}: distprice.dates.holidays.export",
        "calendar,date",
    ]
    for name in LISTED:
        lines += [f"{name},{iso}" for iso in to_iso(quantlib_holidays(name))]
    Path(path).write_text("\n".join(lines) + "\n")


@functools.cache
def shipped() -> dict[str, np.ndarray]:
    """The shipped lists: calendar name -> sorted day numbers of its weekday holidays."""
    rows = [line.split(",") for line in HOLIDAYS_FILE.read_text().splitlines()[2:] if line]
    names = np.array([r[0] for r in rows])
    days = day_numbers(np.array([r[1] for r in rows], dtype=object))
    return {name: np.sort(days[names == name]) for name in LISTED}
