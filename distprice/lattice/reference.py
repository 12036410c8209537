"""Reference engine: one instrument at a time, following the tree and event rules literally, written to be read.

It builds its own event schedule from the instrument's times, or for a dated row from its cash flows and
exercise dates (:mod:`distprice.dates`), not the vectorised tables of :mod:`~.events` and :mod:`~.dated`, so
that the fast engines, which use those tables, are checked against an independent reading of the rules.
Slow: numpy over the nodes of one time step at a time; float64 only. Its risk (:class:`ReferenceRisk`)
prices every bumped curve and volatility anew.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

import numpy as np

from ..curves import ZeroCurve
from ..dates import NO_DATE, accrued, cash_flows, coupons, is_business_day, year_fractions
from .dated import DatedRows
from .events import CALL as CALL_EVENT, PUT as PUT_EVENT
from .geometry import branching, tree_geometry
from .instruments import Instruments
from .payments import Payments
from .sweeps import BumpedCurve, Trees

REDEMPTION, EXERCISE, COUPON = "redemption", "exercise", "coupon"
CALL, PUT = "call", "put"
"""The dates of a callable_puttable_bond, whose option is the holder's rights net: a call caps the holder's value
(bond plus option) at its amount, a put floors it there."""
ORDER = {REDEMPTION: 0, EXERCISE: 1, CALL: 1, PUT: 1, COUPON: 2}
"""At equal times: the redemption, then the exercises, then the coupons."""


def _step(t: float, steps_per_year: int) -> int:
    """The step of time ``t``: ``max(1, round(t * spy))``, halves up."""
    return max(1, math.floor(t * steps_per_year + 0.5))


def _accrued(t: float, ins) -> float:
    """``face * coupon * (t - t_prev)``, ``t_prev`` the latest regular coupon time <= t."""
    if ins.coupon == 0:
        return 0.0
    t_prev = ins.maturity
    while t_prev > t + 1e-9 / ins.coupon_frequency:
        t_prev -= 1.0 / ins.coupon_frequency
    return ins.face * ins.coupon * max(t - t_prev, 0.0)


def _events(ins) -> list[tuple[float, str, float]]:
    """The row's events ``(time, kind, amount)``, all at times > 0: the redemption, the coupons and (options)
    the exercises, each exercise worth the strike plus the accrued interest at its own time."""
    events = [(ins.maturity, REDEMPTION, ins.face)]
    if ins.coupon > 0:
        k = 0
        while (t := ins.maturity - k / ins.coupon_frequency) > 1e-9 / ins.coupon_frequency:
            events.append((t, COUPON, ins.face * ins.coupon / ins.coupon_frequency))
            k += 1
    if ins.instrument == "bond":
        return events
    spy = ins.steps_per_year
    if ins.exercise == "european":
        times = [ins.expiry]
    elif ins.exercise == "bermudan":
        times, k, f = [], 0, ins.exercise_frequency
        while (t := ins.expiry - k / f) >= ins.first_exercise - 1e-9 / f and t > 1e-9 / f:
            times.append(t)
            k += 1
    else:
        first = max(1, math.floor(ins.first_exercise * spy + 0.5))
        times = [i / spy for i in range(first, _step(ins.expiry, spy) + 1)]
    return events + [(t, EXERCISE, ins.strike + _accrued(t, ins)) for t in times]


def _events_by_step(ins, curve: ZeroCurve) -> dict[int, list[tuple[str, float]]]:
    """Each step's events in the order they are applied (decreasing time; at equal times redemption,
    exercises, coupons), with their forward-adjusted amounts ``A * P(0, t) / P(0, s dt)``: exactly A for an
    event on the tree's grid."""
    spy = ins.steps_per_year
    by_step = defaultdict(list)
    for t, kind, amount in sorted(_events(ins), key=lambda e: (-round(e[0] * 1e9), ORDER[e[1]])):
        s = _step(t, spy)
        on_grid = abs(t * spy - s) <= 1e-9
        factor = 1.0 if on_grid else float(curve.discount(t) / curve.discount(s / spy))
        by_step[s].append((kind, amount * factor))
    return by_step


class _Stepped:
    """A row's coupons under its coupon and principal schedules, read literally: coupon i accrues at the rate of
    the last coupon step on or before its start (or on the previous coupon's payment date), on the face less the
    repayments dated on or before then; a repayment is paid with the coupon whose accrual end or payment date it
    is, at the redemption %."""

    def __init__(self, row: DatedRows, payments: Payments):
        terms = row.terms
        face, self.redemption = float(terms.face[0]), float(terms.redemption[0]) / 100.0
        table = coupons(terms)
        self.start, self.end = table.accrual_start.tolist(), table.accrual_end.tolist()
        self.payment, self.reference = table.payment.tolist(), table.reference_start.tolist()
        self.day_count = int(terms.day_count[0])
        steps = list(zip(payments.coupon.day.tolist(), payments.coupon.value.tolist()))
        repaid = list(zip(payments.principal.day.tolist(), payments.principal.value.tolist()))
        self.rate, self.face, self.repaid = [], [], []
        for i, (start, end, paid) in enumerate(zip(self.start, self.end, self.payment)):
            since = max(start, self.payment[i - 1] if i else start)
            self.rate.append(([float(terms.coupon[0])] + [c for d, c in steps if d <= since])[-1])
            self.face.append(face * (1.0 - sum(x for d, x in repaid if d <= since) / 100.0))
            self.repaid.append(face * sum(x for d, x in repaid if d in (end, paid)) / 100.0 * self.redemption)
        self.left = face * (1.0 - sum(x for _, x in repaid) / 100.0)

    def next_coupon(self, day: int) -> int:
        """The first coupon paid after ``day`` (len: none)."""
        return next((i for i, paid in enumerate(self.payment) if paid > day), len(self.payment))

    def fraction(self, i: int, day: int) -> float:
        """Coupon i's year fraction from its start to ``day``."""
        return float(year_fractions(self.day_count, self.start[i], day, self.reference[i], self.end[i]))

    def flows(self, settlement: int) -> list[tuple[int, float]]:
        """The coupons paid after settlement (``(day, amount)``, each with its repayment)."""
        return [
            (paid, self.face[i] * self.rate[i] * self.fraction(i, self.end[i]) + self.repaid[i])
            for i, paid in enumerate(self.payment)
            if paid > settlement
        ]

    def outstanding(self, day: int) -> float:
        """The face outstanding on ``day``: less the repayments paid on or before it."""
        i = self.next_coupon(day)
        return self.face[i] if i < len(self.face) else self.left

    def accrued(self, day: int) -> float:
        """The accrued interest at ``day``: of the first coupon paid after it, on its face at its rate."""
        i = self.next_coupon(day)
        if i == len(self.payment) or day <= self.start[i]:
            return 0.0
        return self.face[i] * self.rate[i] * self.fraction(i, min(day, self.end[i]))


def _dated_events(ins, rows: DatedRows, r: int) -> list[tuple[int, str, float]]:
    """A dated row's events ``(day, kind, amount)``: its redemption and coupons paid after settlement and,
    for an option, its exercise dates after settlement with ``face * price / 100`` (plus the accrued interest
    at the date for a clean price); a row with coupon or principal schedules as :class:`_Stepped` reads them,
    its prices % of the face outstanding."""
    row = rows.take([r])
    terms, settlement = row.terms, int(row.settlement[0])
    flows = cash_flows(terms, row.valuation)
    coupons = flows.coupons
    stepped = _Stepped(row, row.payments) if row.payments is not None and row.payments.given[0] else None
    if stepped is None:
        events = [(int(flows.redemption_date[0]), REDEMPTION, float(flows.redemption_amount[0]))]
        events += [(int(d), COUPON, float(a)) for d, a in zip(coupons.payment, coupons.amount)]
    else:
        redeemed = stepped.left * stepped.redemption
        events = [(int(flows.redemption_date[0]), REDEMPTION, redeemed)]
        events += [(int(d), COUPON, a) for d, a in stepped.flows(settlement)]
    if ins.instrument == "bond":
        return events
    expiry = int(row.expiry[0])
    first = settlement + 1 if row.first[0] == NO_DATE else max(int(row.first[0]), settlement + 1)
    schedule = row.schedule
    if ins.exercise == "bermudan" and len(schedule.day):
        rights = {CALL_EVENT: CALL, PUT_EVENT: PUT}
        dates = [
            (int(d), float(x), bool(dirty), rights.get(int(kind), EXERCISE))
            for d, x, dirty, kind in zip(schedule.day, schedule.price, schedule.dirty, schedule.kind)
        ]
    elif ins.exercise == "bermudan":
        dates = [(int(d), ins.strike, False, EXERCISE) for d in coupons.payment if first <= d <= expiry]
    elif ins.exercise == "american":
        days = np.arange(first, expiry + 1)
        dates = [(int(d), ins.strike, False, EXERCISE) for d in days[is_business_day(terms.calendar[0], days)]]
    else:
        dates = [(expiry, ins.strike, False, EXERCISE)]
    face = float(terms.face[0])
    for day, price, dirty, kind in dates:
        if day <= settlement:
            continue
        if stepped is None:
            extra = 0.0 if dirty else float(accrued(terms, coupons, 0, day))
            events.append((day, kind, face * price / 100.0 + extra))
        else:
            extra = 0.0 if dirty else stepped.accrued(day)
            events.append((day, kind, stepped.outstanding(day) * price / 100.0 + extra))
    return events


def _dated_events_by_step(ins, rows: DatedRows, r: int, curve: ZeroCurve) -> dict[int, list[tuple[str, float]]]:
    """:func:`_events_by_step` of a dated row: a day k days after valuation is ``k / D`` years, on the grid
    exactly when ``k * spy / D`` is whole. An exercise, or a flow before the first step, goes to step
    ``max(1, round(k * spy / D))`` (halves up, in integers). A cash flow between steps s0 >= 1 and s0 + 1 is paid
    in two parts, ``(1 - b) A`` at s0 and ``b A`` at s0 + 1 (``b = k * spy / D - s0``), unless an exercise date
    lies in ``[s0 dt, (s0 + 1) dt]``: then whole at its nearest step (docs/model/events.rst)."""
    spy, D, valuation = ins.steps_per_year, int(rows.days_per_year[r]), int(rows.valuation[r])
    seen = curve.at(valuation)
    events = sorted(_dated_events(ins, rows, r), key=lambda e: (-e[0], ORDER[e[1]]))
    exercised = [(day - valuation) * spy for day, kind, _ in events if kind not in (REDEMPTION, COUPON)]
    by_step = defaultdict(list)

    def add(s: int, kind: str, amount: float, k: int) -> None:
        factor = 1.0 if k * spy == s * D else float(seen.discount(k / D) / seen.discount(s / spy))
        by_step[s].append((kind, amount * factor))

    for day, kind, amount in events:  # each step's list fills in decreasing time
        k = day - valuation
        s0, rest = divmod(k * spy, D)
        spread = rest and s0 >= 1 and kind in (REDEMPTION, COUPON)
        if spread and not any(s0 * D <= x <= (s0 + 1) * D for x in exercised):
            add(s0 + 1, kind, amount * rest / D, k)
            add(s0, kind, amount * (D - rest) / D, k)
        else:
            add(max(1, (2 * k * spy + D) // (2 * D)), kind, amount, k)
    return by_step


def price_instrument(ins, curve: ZeroCurve, events: dict[int, list[tuple[str, float]]], n: int) -> tuple[float, float]:
    """``(bond_price, option_price)`` of one instrument (a row with the canonical columns) on a tree of ``n``
    steps, its ``events`` by step."""
    g = tree_geometry(ins.mean_reversion, ins.volatility, ins.maturity, ins.steps_per_year, n)
    dt, dr, jmax = float(g.dt), float(g.dr), int(g.jmax)
    j = np.arange(-jmax, jmax + 1)
    pu, pm, pd_ = branching(jmax, float(g.M))
    # targets of the up, middle and down branches of each node (as array indices j + jmax)
    up, mid, down = j + 1, j.copy(), j - 1
    up[-1], mid[-1], down[-1] = jmax, jmax - 1, jmax - 2
    up[0], mid[0], down[0] = -jmax + 2, -jmax + 1, -jmax
    up, mid, down = up + jmax, mid + jmax, down + jmax
    width = 2 * jmax + 1

    # forward: state prices Q and the displacements alpha fitted to P(0, (m+1) dt)
    Q = np.zeros(width)
    Q[jmax] = 1.0
    alphas = np.empty(n)
    for m in range(n):
        alphas[m] = (math.log(np.sum(Q * np.exp(-j * dr * dt))) - math.log(curve.discount((m + 1) * dt))) / dt
        flow = Q * np.exp(-(alphas[m] + j * dr) * dt)
        Q = (
            np.bincount(up, flow * pu, width)
            + np.bincount(mid, flow * pm, width)
            + np.bincount(down, flow * pd_, width)
        )

    # backward: bond and option together; after rolling back to a step, its events in order
    is_call = ins.option_type == "call"

    def apply_events(i: int, bond: np.ndarray, option: np.ndarray) -> None:
        for kind, amount in events.get(i, ()):
            if kind == EXERCISE:
                payoff = np.maximum(bond - amount, 0.0) if is_call else np.maximum(amount - bond, 0.0)
                np.maximum(option, payoff, out=option)
            elif kind == CALL:
                np.minimum(option, amount - bond, out=option)
            elif kind == PUT:
                np.maximum(option, amount - bond, out=option)
            else:
                bond += amount

    bond = np.zeros(width)
    option = np.zeros(width)
    apply_events(n, bond, option)
    for i in range(n - 1, -1, -1):
        discount = np.exp(-(alphas[i] + j * dr) * dt)
        bond = discount * (pu * bond[up] + pm * bond[mid] + pd_ * bond[down])
        option = discount * (pu * option[up] + pm * option[mid] + pd_ * option[down])
        apply_events(i, bond, option)
    return float(bond[jmax]), float(option[jmax])


def price_reference(instruments: Instruments, curves: dict[str, ZeroCurve]):
    """Bond and option prices (float64) of every instrument."""
    results = []
    for r, ins in enumerate(instruments.table.itertuples(index=False)):
        if instruments.is_dated[r]:
            dated = instruments.dated
            assert dated is not None  # a dated row comes with its dated terms
            events = _dated_events_by_step(ins, dated, r, curves[ins.curve])
            curve = curves[ins.curve].at(int(dated.valuation[r]))
            days, D = int(dated.redemption_day[r] - dated.valuation[r]), int(dated.days_per_year[r])
            n = max(1, -(-days * ins.steps_per_year // D))  # the step at or after the redemption
        else:
            curve = curves[ins.curve].at(ins.valuation) if curves[ins.curve].dates is not None else curves[ins.curve]
            events = _events_by_step(ins, curve)
            n = max(1, math.floor(ins.maturity * ins.steps_per_year + 0.5))
        results.append(price_instrument(ins, curve, events, n))
    prices = np.array(results, dtype=np.float64).reshape(-1, 2)
    return prices[:, 0], prices[:, 1]


class ReferenceRisk:
    """The reference engine's risk: every tree under every bump priced anew, literally, one row at a time (a
    new curve ``z(t) + dz(t)``, a new tree of the task's volatility, a new forward pass); see
    :mod:`~.sweeps` for the interface."""

    def __init__(self, instruments: Instruments, curves: dict[str, ZeroCurve]):
        self.instruments = instruments
        self.curves = curves

    def trees(self, rows: np.ndarray, volatility: np.ndarray, dr: np.ndarray) -> Trees:
        return Trees(np.asarray(rows, np.int64), np.asarray(volatility, np.float64), np.asarray(dr, np.float64))

    def roll(self, trees: Trees, tasks: np.ndarray, grid: np.ndarray, dz: np.ndarray):
        bond, option = np.empty(dz.shape[:2]), np.empty(dz.shape[:2])
        for k, task in enumerate(tasks):
            row = self.instruments.take([trees.rows[task]])
            row = dataclasses.replace(row, table=row.table.assign(volatility=trees.volatility[task]))
            name = row.table["curve"].iloc[0]
            for b in range(dz.shape[1]):
                bumped = {name: BumpedCurve(self.curves[name], grid, dz[k, b])}
                (bond[k, b],), (option[k, b],) = price_reference(row, bumped)
        return bond, option
