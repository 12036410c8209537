"""Coupon and principal schedules of dated rows, given by table: step-up (or step-down) coupons and sinking
funds (amortization).

- The coupon schedule (``id, date, coupon``): the coupons accruing from ``date`` on pay ``coupon`` (decimal a
  year); those before its first date pay the row's ``coupon``. QuantLib's ``FixedRateBond`` with one rate per
  coupon period.
- The principal schedule (``id, date, repaid``): on ``date``, ``repaid`` % of the original face is paid back, at
  the row's ``redemption`` % like the final redemption, with the coupon paid that day; the coupons after it
  accrue on the face outstanding, and what is left is redeemed at maturity. QuantLib's
  ``AmortizingFixedRateBond`` with one notional per coupon period.

A date is a coupon date of its row: the accrual end or the payment date of one of its coupons (a coupon step
may also fall on the issue date, where the first coupon starts). The face outstanding on a day d is the face
less the repayments paid on or before d; a row's exercise prices are % of it (as desks quote a sinking fund's
call), and its accrued interest at d is that of the first coupon paid after d, on the face it accrues on at
its own rate. Amounts are in face units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from ..dates import BondTerms, coupons
from ..dates.csr import offsets_of
from ..errors import Problem
from .geometry import consecutive


@dataclass(frozen=True)
class Steps:
    """Dated values given by table, per portfolio row (CSR, dates increasing): ``day`` (day numbers) and
    ``value`` (a coupon rate, or % of face repaid)."""

    offsets: np.ndarray
    day: np.ndarray
    value: np.ndarray

    @classmethod
    def empty(cls, rows: int) -> Steps:
        return cls(np.zeros(rows + 1, np.int64), np.zeros(0, np.int64), np.zeros(0))

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    def take(self, positions) -> Steps:
        """The steps of the rows at ``positions``."""
        offsets, index = _taken(self.offsets, positions)
        return Steps(offsets, self.day[index], self.value[index])


def _taken(offsets: np.ndarray, positions) -> tuple[np.ndarray, np.ndarray | slice]:
    """The offsets of the CSR rows at ``positions`` and where their items lie in the flat arrays."""
    positions = np.asarray(positions, dtype=np.int64)
    span = consecutive(positions)
    if isinstance(span, slice):
        lo, hi = offsets[span.start], offsets[span.stop]
        return offsets[span.start : span.stop + 1] - lo, slice(lo, hi)
    counts = np.diff(offsets)[positions]
    taken = offsets_of(counts)
    return taken, np.repeat(offsets[:-1][positions] - taken[:-1], counts) + np.arange(taken[-1])


@dataclass(frozen=True)
class Payments:
    """The coupon and principal schedules of dated rows (``coupon``, ``principal``: :class:`Steps`, as given)
    and, once :func:`resolve` has read them against each row's coupons, what they make of its live coupons (CSR
    ``offsets``: none for a row without schedules): ``accruing``, the face the coupon accrues on times its rate
    (its amount per year fraction), ``outstanding``, that face, and ``repaid``, the principal paid with it (face
    units, at the redemption %); per row ``left``, the face outstanding after the last coupon, redeemed at
    maturity."""

    coupon: Steps
    principal: Steps
    offsets: np.ndarray
    accruing: np.ndarray
    outstanding: np.ndarray
    repaid: np.ndarray
    left: np.ndarray

    @classmethod
    def of(cls, coupon: Steps | None, principal: Steps | None, rows: int) -> Payments:
        """Schedules as read (not yet resolved)."""
        return cls(
            coupon if coupon is not None else Steps.empty(rows),
            principal if principal is not None else Steps.empty(rows),
            np.zeros(rows + 1, np.int64),
            np.zeros(0),
            np.zeros(0),
            np.zeros(0),
            np.full(rows, np.nan),
        )

    @property
    def given(self) -> np.ndarray:
        """The rows with a coupon or principal schedule."""
        return (self.coupon.counts > 0) | (self.principal.counts > 0)

    @property
    def scheduled(self) -> np.ndarray:
        """The rows whose live coupons the schedules set (resolved rows with live coupons)."""
        return np.diff(self.offsets) > 0

    def take(self, positions) -> Payments:
        """The schedules of the rows at ``positions``."""
        offsets, index = _taken(self.offsets, positions)
        return Payments(
            self.coupon.take(positions),
            self.principal.take(positions),
            offsets,
            self.accruing[index],
            self.outstanding[index],
            self.repaid[index],
            self.left[np.asarray(positions, dtype=np.int64)],
        )

    def redeemed(self, terms: BondTerms) -> np.ndarray:
        """Each row's redemption amount (face units): the face left at maturity at the redemption %."""
        left = np.where(np.isnan(self.left), terms.face, self.left)
        return left * terms.redemption / 100.0


NOT_COUPON_DATE, BEFORE_ISSUE, AFTER_REDEMPTION, SAME_COUPON, AT_ISSUE = 1, 2, 3, 4, 5
"""Why :func:`_resolve` refuses a step (0: it does not)."""
STEP_RULES = {
    NOT_COUPON_DATE: "is not a coupon date of this row: give the accrual end or payment date of one of its coupons",
    BEFORE_ISSUE: "is before the row's issue date",
    AFTER_REDEMPTION: "is after the row's last coupon date",
    SAME_COUPON: "is the coupon date of another line of this id (a coupon's accrual end and payment date are one "
    "coupon date)",
    AT_ISSUE: "is the issue date: a repayment falls on a coupon date after it (at issue, give a smaller face)",
}


@numba.njit(cache=True, inline="always")
def _boundary(k0, k1, start, end, payment, issue, day, at_issue):
    """The coupon date a step's ``day`` is, as the number of coupons paid by then (0: the issue date, where the
    first coupon starts, allowed where ``at_issue``), or minus the reason it is none."""
    if k1 == k0:
        return -NOT_COUPON_DATE
    if day == start[k0] or day == issue:
        return 0 if at_issue else -AT_ISSUE
    if day < start[k0]:
        return -BEFORE_ISSUE
    if day > max(end[k1 - 1], payment[k1 - 1]):
        return -AFTER_REDEMPTION
    i = k0 + np.searchsorted(end[k0:k1], day)
    if i < k1 and end[i] == day:
        return i - k0 + 1
    i = k0 + np.searchsorted(payment[k0:k1], day)
    if i < k1 and payment[i] == day:
        return i - k0 + 1
    return -NOT_COUPON_DATE


@numba.njit(cache=True)
def _marks(k0, k1, start, end, payment, issue, s_off, s_day, r, at_issue, status, boundary):
    """Each step of row r: its coupon date (:func:`_boundary`) into ``boundary``, its refusal into ``status``."""
    last = -1
    for s in range(s_off[r], s_off[r + 1]):
        b = _boundary(k0, k1, start, end, payment, issue, s_day[s], at_issue)
        if b < 0:
            status[s], boundary[s] = -b, -1
        elif b == last:
            status[s], boundary[s] = SAME_COUPON, -1
        else:
            boundary[s], last = b, b


@numba.njit(cache=True)
def _resolve(
    c_off,
    start,
    end,
    payment,
    issue,
    face,
    coupon,
    redemption,
    live,
    s_off,
    s_day,
    s_rate,
    p_off,
    p_day,
    p_repaid,
    l_off,
    s_status,
    p_status,
    total,
    accruing,
    outstanding,
    repaid,
    left,
):
    """Every row's coupons (all of them: ``c_off`` CSR of ``start``, ``end``, ``payment``) under its coupon steps
    (``s_*``) and repayments (``p_*``, % of face): each refused step's reason into ``s_status`` / ``p_status``,
    the % repaid in all into ``total``, and for the live coupons (the last ``live`` of each row, CSR ``l_off``)
    their ``accruing``, ``outstanding`` and ``repaid``; the face ``left`` at maturity."""
    s_at = np.full(len(s_day), -1, np.int64)
    p_at = np.full(len(p_day), -1, np.int64)
    for r in range(len(face)):
        k0, k1 = c_off[r], c_off[r + 1]
        _marks(k0, k1, start, end, payment, issue[r], s_off, s_day, r, True, s_status, s_at)
        _marks(k0, k1, start, end, payment, issue[r], p_off, p_day, r, False, p_status, p_at)
        rate, owed, paid_back = coupon[r], face[r], 0.0
        s, p = s_off[r], p_off[r]
        first = k1 - live[r]
        for k in range(k0, k1):  # coupon k - k0 + 1: the steps at the coupon dates before it set it
            while s < s_off[r + 1] and s_at[s] <= k - k0:
                if s_at[s] >= 0:
                    rate = s_rate[s]
                s += 1
            due = 0.0  # the repayments at its own date, paid with it
            while p < p_off[r + 1] and p_at[p] <= k - k0 + 1:
                if p_at[p] >= 0:
                    due += p_repaid[p]
                    paid_back += p_repaid[p]
                p += 1
            if k >= first:
                j = l_off[r] + k - first
                accruing[j], outstanding[j] = owed * rate, owed
                repaid[j] = face[r] * due / 100.0 * redemption[r] / 100.0
            owed = face[r] * (100.0 - paid_back) / 100.0
        total[r] = paid_back
        left[r] = owed


def resolve(payments: Payments, terms: BondTerms, live: np.ndarray, usable: np.ndarray, rows: np.ndarray, where):
    """``payments`` read against each row's coupons (``live`` of them paid after settlement), for the ``usable``
    rows (valid terms, settled, not redeemed): resolved (:class:`Payments`), the problems of the rows whose steps
    fall elsewhere than their coupon dates or repay more than the face, each that row's (``rows``: their
    positions in the portfolio, ``where(position)`` labels one), and which rows have such a problem."""
    n = len(live)
    given = np.flatnonzero(payments.given & usable)
    if len(given) == 0:
        return payments, []
    part = terms.take(given)
    flows = coupons(part)
    steps, principal = payments.coupon.take(given), payments.principal.take(given)
    l_off = offsets_of(live[given])
    s_status, p_status = np.zeros(len(steps.day), np.int8), np.zeros(len(principal.day), np.int8)
    total, left = np.zeros(len(given)), np.zeros(len(given))
    accruing, outstanding, repaid = (np.zeros(l_off[-1]) for _ in range(3))
    _resolve(
        flows.offsets,
        flows.accrual_start,
        flows.accrual_end,
        flows.payment,
        part.issue,
        part.face,
        part.coupon,
        part.redemption,
        live[given],
        steps.offsets,
        steps.day,
        steps.value,
        principal.offsets,
        principal.day,
        principal.value,
        l_off,
        s_status,
        p_status,
        total,
        accruing,
        outstanding,
        repaid,
        left,
    )
    problems = []

    no_coupons = flows.counts == 0

    def refused(table: str, column: str, got: Steps, status: np.ndarray):
        for s in np.flatnonzero(status):
            g = int(np.searchsorted(got.offsets, s, side="right") - 1)
            if no_coupons[g]:
                continue
            position = int(rows[given[g]])
            problems.append(Problem(position, where(position), column, f"the {table}'s {STEP_RULES[status[s]]}"))

    refused("coupon schedule", "date", steps, s_status)
    refused("principal schedule", "date", principal, p_status)
    for g in np.flatnonzero(no_coupons):
        position = int(rows[given[g]])
        problems.append(
            Problem(
                position,
                where(position),
                "coupon",
                "a row with a coupon or principal schedule pays coupons (coupon > 0): its dates are coupon dates",
            )
        )
    over = total > 100.0 + 1e-9
    for g in np.flatnonzero(over):
        position = int(rows[given[g]])
        problems.append(
            Problem(
                position,
                where(position),
                "repaid",
                f"the principal schedule repays {total[g]:.10g} % of the face in all: at most 100",
            )
        )
    counts = np.zeros(n, np.int64)
    counts[given[~no_coupons]] = live[given[~no_coupons]]
    everyone = np.full(n, np.nan)
    everyone[given] = left
    resolved = Payments(
        payments.coupon, payments.principal, offsets_of(counts), accruing, outstanding, repaid, everyone
    )
    return resolved, problems


def settled_accrued(payments: Payments, terms: BondTerms, accrued: np.ndarray) -> np.ndarray:
    """The accrued interest at settlement (``accrued``: of the row's own coupon on its face) of rows whose live
    coupons the schedules set: that of the first live coupon, on the face it accrues on at its own rate."""
    scheduled = np.flatnonzero(payments.scheduled)
    if len(scheduled) == 0:
        return accrued
    first = payments.offsets[scheduled]
    out = accrued.copy()
    out[scheduled] = accrued[scheduled] * payments.accruing[first] / (terms.face[scheduled] * terms.coupon[scheduled])
    return out
