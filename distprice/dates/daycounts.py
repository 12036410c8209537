"""Year fractions ``yf(d1, d2; r1, r2)`` of the accrual day counts, d1 <= d2 day numbers, (r1, r2) the
reference period (used by ACT/ACT-ICMA only).

- ``ACT/360``, ``ACT/365F``: days / 360, days / 365.
- ``30/360`` (US bond basis, QuantLib ``Thirty360(BondBasis)``): D1 = 31 -> 30; then D2 = 31 -> 30 if D1 = 30;
  ``(360 (Y2 - Y1) + 30 (M2 - M1) + D2 - D1) / 360``.
- ``30E/360`` (QuantLib ``Thirty360(European)``): D1 = 31 -> 30, D2 = 31 -> 30; the same formula.
- ``ACT/ACT-ISDA``: ``Y2 - Y1 - 1 + days(d1, 1 Jan Y1+1) / diy(Y1) + days(1 Jan Y2, d2) / diy(Y2)``.
- ``ACT/ACT-ICMA`` (QuantLib ``ActualActual(ISMA)`` without a schedule): with ``m = round(12 days(r1, r2) / 365)``
  months in the reference period, ``(m / 12) days(d1, d2) / days(r1, r2)`` when r1 <= d1 <= d2 <= r2; a part
  before r1 (a long first period) is counted in the periods before, ``(r1 - m months, r1)`` and so on; a
  reference period of 15 days or less (m = 0) is replaced by the year from d1.
"""

from __future__ import annotations

import numba
import numpy as np

from .civil import add_months, day_number, is_leap, ymd
from .parallel import over_rows
from .registry import ACT_360, ACT_365F, ACT_ACT_ICMA, ACT_ACT_ISDA, DAY_COUNTS, THIRTY_360, THIRTY_E_360


@numba.njit(cache=True)
def _thirty(d1, d2, european):
    y1, m1, a = ymd(d1)
    y2, m2, b = ymd(d2)
    if a == 31:
        a = 30
    if b == 31 and (european or a == 30):
        b = 30
    return (360 * (y2 - y1) + 30 * (m2 - m1) + b - a) / 360.0


@numba.njit(cache=True)
def _isda(d1, d2):
    y1 = ymd(d1)[0]
    y2 = ymd(d2)[0]
    total = float(y2 - y1 - 1)
    total += (day_number(y1 + 1, 1, 1) - d1) / (366.0 if is_leap(y1) else 365.0)
    total += (d2 - day_number(y2, 1, 1)) / (366.0 if is_leap(y2) else 365.0)
    return total


@numba.njit(cache=True)
def _months(r1, r2):
    """Months in the reference period (r1, r2): ``round(12 days / 365)`` (never a tie: 365 is odd)."""
    return (24 * (r2 - r1) + 365) // 730


@numba.njit(cache=True)
def _earlier(r1, r2, m, j):
    """The reference period ``j`` periods before (r1, r2) of ``m`` months, and its months."""
    for _ in range(j):
        r2, r1 = r1, add_months(r1, -m)
        m = _months(r1, r2)
    return r1, r2, m


@numba.njit(cache=True)
def _icma(d1, d2, r1, r2):
    m = _months(r1, r2)
    if m == 0:  # a reference period of 15 days or less: one year from d1 instead
        r1, r2, m = d1, add_months(d1, 12), 12
    while d1 < r1 and d2 <= r1:  # the whole of (d1, d2) lies before the reference period
        r1, r2, m = _earlier(r1, r2, m, 1)
    back = 0  # periods before (r1, r2) that (d1, r1) reaches into
    a, b, k = r1, r2, m
    while d1 < a:
        a, b, k = _earlier(a, b, k, 1)
        back += 1
    # summed from the earliest period on, as QuantLib's recursion does: the same rounding
    total = 0.0
    for j in range(back, -1, -1):
        a, b, k = _earlier(r1, r2, m, j)
        total += k / 12.0 * (min(d2, b) - max(d1, a)) / (b - a)
    return total


@numba.njit(cache=True, inline="always")
def year_fraction(day_count, d1, d2, r1, r2):
    """``yf(d1, d2; r1, r2)`` for a day count code, d1 <= d2 (ACT/ACT-ICMA: d2 <= r2). Inlined: the actual/fixed
    counts are a division; the others call :func:`counted`."""
    if day_count == ACT_360:
        return (d2 - d1) / 360.0
    if day_count == ACT_365F:
        return (d2 - d1) / 365.0
    return counted(day_count, d1, d2, r1, r2)


@numba.njit(cache=True)
def counted(day_count, d1, d2, r1, r2):
    """``yf`` of the 30/360 and actual/actual day counts."""
    if d1 == d2:
        return 0.0
    if day_count == THIRTY_360:
        return _thirty(d1, d2, False)
    if day_count == THIRTY_E_360:
        return _thirty(d1, d2, True)
    if day_count == ACT_ACT_ISDA:
        return _isda(d1, d2)
    return _icma(d1, d2, r1, r2)


@numba.njit(cache=True)
def accrual_anchor(day_count, d1, r1, r2):
    """What :func:`accrual_fraction` keeps of a period (d1 its start, (r1, r2) its reference period) for every
    day of it, ``(anchor, aux)``: for the 30/360 counts ``360 Y1 + 30 M1 + D1`` (D1 = 31 -> 30) and D1; for
    ACT/ACT-ICMA 0 and the reference period's months when d1 lies in it and it is longer than 15 days, else -1
    (the full count); for the others (0, 0)."""
    if day_count == THIRTY_360 or day_count == THIRTY_E_360:
        y1, m1, a = ymd(d1)
        return thirty_anchor(y1, m1, a)
    if day_count == ACT_ACT_ICMA:
        m = _months(r1, r2)
        return 0, m if m > 0 and d1 >= r1 else -1
    return 0, 0


@numba.njit(cache=True, inline="always")
def thirty_anchor(y1, m1, a):
    """:func:`accrual_anchor` of the 30/360 counts for a period starting on ``y1-m1-a`` (its year, month and day)."""
    if a == 31:
        a = 30
    return 360 * y1 + 30 * m1 + a, a


@numba.njit(cache=True, inline="always")
def thirty_fraction(day_count, anchor, aux, y2, m2, b):
    """:func:`accrual_fraction` of the 30/360 counts to the day ``y2-m2-b`` (its year, month and day)."""
    if b == 31 and (day_count == THIRTY_E_360 or aux == 30):
        b = 30
    return (360 * y2 + 30 * m2 + b - anchor) / 360.0


@numba.njit(cache=True, inline="always")
def accrual_fraction(day_count, anchor, aux, d1, d2, r1, r2):
    """``yf(d1, d2; r1, r2)`` for d1 < d2 <= r2 in a period whose :func:`accrual_anchor` is ``(anchor, aux)``:
    the double :func:`year_fraction` gives, with the period's own part computed once (a row's days walked
    through one coupon period)."""
    if day_count == ACT_360:
        return (d2 - d1) / 360.0
    if day_count == ACT_365F:
        return (d2 - d1) / 365.0
    if day_count == THIRTY_360 or day_count == THIRTY_E_360:
        y2, m2, b = ymd(d2)
        return thirty_fraction(day_count, anchor, aux, y2, m2, b)
    if day_count == ACT_ACT_ICMA and aux > 0:
        return aux / 12.0 * (min(d2, r2) - max(d1, r1)) / (r2 - r1)
    return counted(day_count, d1, d2, r1, r2)


@numba.njit(cache=True, nogil=True)
def _year_fractions(lo, hi, day_count, d1, d2, r1, r2, out):
    for i in range(lo, hi):
        out[i] = year_fraction(day_count[i], d1[i], d2[i], r1[i], r2[i])


def year_fractions(day_count, start, end, reference_start=None, reference_end=None) -> np.ndarray:
    """Year fractions from ``start`` to ``end`` (day numbers, start <= end) by ``day_count`` (a name or code,
    or one per date); the reference period defaults to (start, end). ValueError where the arguments are out
    of the day counts' domain."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    r1 = start if reference_start is None else np.asarray(reference_start, dtype=np.int64)
    r2 = end if reference_end is None else np.asarray(reference_end, dtype=np.int64)
    codes = DAY_COUNTS.codes(day_count)
    shape = np.broadcast_shapes(codes.shape, start.shape, end.shape, r1.shape, r2.shape)
    flat = [np.ascontiguousarray(np.broadcast_to(a, shape).ravel()) for a in (codes, start, end, r1, r2)]
    codes, start, end, r1, r2 = flat
    if np.any(end < start):
        raise ValueError("year fractions need start <= end")
    icma = codes == ACT_ACT_ICMA
    if np.any(icma & (end > r2) & (r2 - r1 > 15)):
        raise ValueError("ACT/ACT-ICMA needs end <= reference_end")
    out = np.empty(shape, dtype=np.float64)
    over_rows(_year_fractions, out.size, codes, start, end, r1, r2, out.reshape(-1))
    return out
