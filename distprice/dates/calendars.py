"""Business days of the calendars: the business-day test, the conventions, advancing by business days, the last
business day of a month and the business days between two dates.

One table of bits (:func:`business_table`) holds every calendar's business days, built from the shipped holiday
lists and the Saturday-Sunday weekend; outside 1901-2199, where no holidays are known, a calendar other than
``none`` has only its weekend. Kernels take one date and the table (or :func:`business_view`); the functions
``is_business_day``, ``adjust_days``, ``advance_days``, ``last_business_days`` and ``business_days`` take calendar
names or codes (one, or one per date) and arrays of day numbers, and return arrays.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic

from .civil import month_end, weekday
from .csr import DateTable, offsets_of
from .holidays import FIRST_DAY, LAST_DAY, LISTED, shipped
from .parallel import over_rows
from .registry import CALENDARS, CONVENTIONS, MODIFIED_FOLLOWING, NO_CALENDAR, PRECEDING, UNADJUSTED, WEEKENDS

ROW_BYTES = (LAST_DAY - FIRST_DAY + 8) // 8
"""Bytes of one calendar's bits in the table."""
CALENDAR_COUNT = len(CALENDARS.names)
LONGEST_CLOSURE = 27
"""The most consecutive non-business days a calendar may have. Schedule dates a month or more apart then never
adjust to the same day (QuantLib's rule that drops such duplicates never applies), which the schedules rely on."""


@functools.cache
def business_table() -> np.ndarray:
    """Business days as bits: bit ``i % 8`` of ``table[calendar code, i // 8]`` is 1 where day ``FIRST_DAY + i``
    is a business day of the calendar (82 KB for all six calendars: it stays in a core's cache)."""
    days = np.arange(FIRST_DAY, LAST_DAY + 1, dtype=np.int64)
    workday = (days + 3) % 7 < 5
    table = np.empty((CALENDAR_COUNT, len(days)), dtype=bool)
    table[NO_CALENDAR] = True
    table[WEEKENDS] = workday
    assert set(shipped()) == set(LISTED)
    for name, holidays in shipped().items():
        row = workday.copy()
        row[holidays - FIRST_DAY] = False
        table[CALENDARS.code(name)] = row
    for code, row in enumerate(table):
        if longest_closure(row) > LONGEST_CLOSURE:
            raise ValueError(
                f"calendar {CALENDARS.name(code)} has more than {LONGEST_CLOSURE} non-business days "
                "in a row: its schedules would need QuantLib's rule for duplicate dates"
            )
    return np.packbits(table, axis=1, bitorder="little")


def longest_closure(business: np.ndarray) -> int:
    """The most consecutive False values in a row of business-day flags."""
    edges = np.diff(np.concatenate([[1], business.astype(np.int8), [1]]))
    return int(np.max(np.flatnonzero(edges == 1) - np.flatnonzero(edges == -1), initial=0))


def business_address() -> int:
    """The address of :func:`business_table`'s bits (kept alive by the cache), for :func:`business_view`."""
    return business_table().ctypes.data


@intrinsic
def _bytes_at(typingctx, address):
    def codegen(context, builder, signature, arguments):
        return builder.inttoptr(arguments[0], context.get_value_type(types.CPointer(types.uint8)))

    return types.CPointer(types.uint8)(types.intp), codegen


@numba.njit(cache=True)
def business_view(address):
    """:func:`business_table` seen from a kernel through its address: the same array, but one that no
    reference count follows. The row kernels here pass it on rather than the table itself, whose count every
    call would change, an atomic operation on a counter that every thread shares (costlier than the lookup)."""
    # numba's stubs count an intrinsic's typing context among its call's arguments
    return numba.carray(_bytes_at(address), (CALENDAR_COUNT, ROW_BYTES))  # type: ignore[call-arg, unused-ignore]


# ---- kernels: one date; ``business`` is :func:`business_table` or its :func:`business_view` ----


@numba.njit(cache=True, inline="always")
def is_business(business, calendar, day):
    """Whether ``day`` is a business day of ``calendar``."""
    i = numba.uint64(day - FIRST_DAY)
    if i <= numba.uint64(LAST_DAY - FIRST_DAY):
        return (business[calendar, i >> numba.uint64(3)] >> (i & numba.uint64(7))) & 1 != 0
    return calendar == NO_CALENDAR or weekday(day) < 5


@numba.njit(cache=True, inline="always")
def following(business, calendar, day):
    """The first business day on or after ``day``."""
    while not is_business(business, calendar, day):
        day += 1
    return day


@numba.njit(cache=True, inline="always")
def preceding(business, calendar, day):
    """The last business day on or before ``day``."""
    while not is_business(business, calendar, day):
        day -= 1
    return day


@numba.njit(cache=True, inline="always")
def adjust(business, calendar, day, convention):
    """``day`` moved by a business-day convention (a code of ``CONVENTIONS``). Inlined: the common case, a
    business day, costs a bit test; a holiday calls :func:`move`."""
    if convention == UNADJUSTED or is_business(business, calendar, day):
        return day
    return move(business, calendar, day, np.int64(convention))  # one compiled move for int8 and int64 codes


@numba.njit(cache=True)
def move(business, calendar, day, convention):
    """A holiday ``day`` moved by ``convention`` (following, modified following or preceding)."""
    if convention == PRECEDING:
        return preceding(business, calendar, day)
    moved = following(business, calendar, day)
    if convention == MODIFIED_FOLLOWING and moved > month_end(day):
        return preceding(business, calendar, day)
    return moved


@numba.njit(cache=True)
def advance(business, calendar, day, n):
    """``n`` business days after ``day`` (before it for n < 0), stepping a calendar day at a time and skipping
    holidays; for n = 0, ``day`` if it is a business day, else the next one."""
    if n == 0:
        return following(business, calendar, day)
    step = 1 if n > 0 else -1
    for _ in range(abs(n)):
        day += step
        while not is_business(business, calendar, day):
            day += step
    return day


@numba.njit(cache=True)
def last_business_day(business, calendar, day):
    """The last business day of ``day``'s month."""
    return preceding(business, calendar, month_end(day))


_BYTE_BITS = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)
"""Set bits of each byte value."""


@numba.njit(cache=True)
def business_count(business, calendar, lo, hi):
    """How many business days of ``calendar`` lie in ``lo <= d <= hi`` (0 when lo > hi): the table's bits
    counted a byte at a time, days outside its years one by one."""
    count = 0
    while lo <= hi and not FIRST_DAY <= lo <= LAST_DAY:
        count += is_business(business, calendar, lo)
        lo += 1
    while lo <= hi and not FIRST_DAY <= hi <= LAST_DAY:
        count += is_business(business, calendar, hi)
        hi -= 1
    if lo > hi:
        return count
    i, j = lo - FIRST_DAY, hi - FIRST_DAY
    a, b = i >> 3, j >> 3
    last = np.int64(business[calendar, b]) & ((2 << (j & 7)) - 1)  # the bits up to hi's
    if a == b:
        return count + _BYTE_BITS[last >> (i & 7)]
    count += _BYTE_BITS[np.int64(business[calendar, a]) >> (i & 7)] + _BYTE_BITS[last]
    for k in range(a + 1, b):
        count += _BYTE_BITS[business[calendar, k]]
    return count


# ---- vectorised ----


@numba.njit(cache=True, nogil=True)
def _apply(lo, hi, address, calendars, days, arguments, what, out):
    business = business_view(address)
    for i in range(lo, hi):
        c, d, a = calendars[i], days[i], arguments[i]
        if what == 0:
            out[i] = is_business(business, c, d)
        elif what == 1:
            out[i] = adjust(business, c, d, a)
        elif what == 2:
            out[i] = advance(business, c, d, a)
        else:
            out[i] = last_business_day(business, c, d)


def _vectorised(calendar, days, argument, what) -> np.ndarray:
    codes = CALENDARS.codes(calendar)
    days = np.asarray(days, dtype=np.int64)
    shape = np.broadcast_shapes(codes.shape, days.shape, np.shape(argument))
    flat = [
        np.ascontiguousarray(np.broadcast_to(a, shape).ravel())
        for a in (codes, days, np.asarray(argument, dtype=np.int64))
    ]
    out = np.empty(shape, dtype=np.int64)
    over_rows(_apply, out.size, business_address(), *flat, what, out.reshape(-1))
    return out


def is_business_day(calendar, days) -> np.ndarray:
    """Whether each day is a business day of ``calendar`` (bool array)."""
    return _vectorised(calendar, days, 0, 0).astype(bool)


def adjust_days(calendar, days, convention) -> np.ndarray:
    """Each day moved by ``convention`` (a name or code of ``CONVENTIONS``, or one per day)."""
    return _vectorised(calendar, days, CONVENTIONS.codes(convention), 1)


def advance_days(calendar, days, n) -> np.ndarray:
    """Each day advanced by ``n`` business days (see :func:`advance`; 0 days: the day or the next business day)."""
    return _vectorised(calendar, days, n, 2)


def last_business_days(calendar, days) -> np.ndarray:
    """The last business day of each day's month."""
    return _vectorised(calendar, days, 0, 3)


@numba.njit(cache=True, nogil=True)
def _business_days(lo, hi, address, calendars, start, end, offsets, days):
    business = business_view(address)
    for r in range(lo, hi):
        k = offsets[r]
        for d in range(start[r], end[r] + 1):
            if is_business(business, calendars[r], d):
                days[k] = d
                k += 1


@numba.njit(cache=True, nogil=True)
def _business_counts(lo, hi, address, calendars, start, end, counts):
    business = business_view(address)
    for r in range(lo, hi):
        counts[r] = business_count(business, calendars[r], start[r], end[r])


def business_days(calendar, start, end) -> DateTable:
    """The business days ``start <= d <= end`` of each row (a CSR table; empty where end < start)."""
    start, end = np.broadcast_arrays(np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64))
    start, end = np.ascontiguousarray(start.ravel()), np.ascontiguousarray(end.ravel())
    codes = np.ascontiguousarray(np.broadcast_to(CALENDARS.codes(calendar), start.shape))
    business = business_address()
    counts = np.zeros(len(start), dtype=np.int64)
    over_rows(_business_counts, len(start), business, codes, start, end, counts)
    offsets = offsets_of(counts)
    days = np.empty(offsets[-1], dtype=np.int64)
    over_rows(_business_days, len(start), business, codes, start, end, offsets, days)
    return DateTable(offsets, days)
