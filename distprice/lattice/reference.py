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
from .geometry import PHASES, branching, tree_geometry
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


def _dated_phase(ins, rows: DatedRows, r: int, days: list[int]) -> int:
    """The phase of a dated row's tree (sixteenths of a step): the circular mean of its exercise ``days``'
    places within a step, ``k spy / D mod 1`` for a day k days after valuation, each weighted by ``exp(-k / D)``,
    rounded to sixteenths, taken from -8 to 7 (american exercise: the last day's place alone); 0 without exercise
    dates or where the places spread evenly."""
    spy, D, valuation = ins.steps_per_year, int(rows.days_per_year[r]), int(rows.valuation[r])
    if not days or ins.instrument == "bond":
        return 0
    if ins.exercise == "american":  # every business day: the expiry's place alone
        days = [max(days)]
    angles = [2 * math.pi * ((day - valuation) * spy % D) / D for day in days]
    weights = [math.exp(-(day - valuation) / D) for day in days]
    x = sum(w * math.cos(a) for w, a in zip(weights, angles))
    y = sum(w * math.sin(a) for w, a in zip(weights, angles))
    if abs(x) + abs(y) < 1e-9:
        return 0
    q = round(PHASES * math.atan2(y, x) / (2 * math.pi)) % PHASES
    return q - PHASES if q >= PHASES // 2 else q


def _dated_events_by_step(ins, rows: DatedRows, r: int, curve: ZeroCurve) -> tuple[dict, int, int]:
    """:func:`_events_by_step` of a dated row, its tree's height and phase q: a day k days after valuation is
    ``k / D`` years, its place ``u / (16 D)`` steps with ``u = 16 k spy - q D`` (step s >= 1 lies at ``(s + q /
    16) dt``), on the grid exactly when u is a positive multiple of 16 D. An exercise, or a flow before the first
    step, goes to step ``max(1, round(u / (16 D)))`` (halves up, in integers). A cash flow between steps s0 >= 1
    and s0 + 1 is paid in two parts, ``(1 - b) A`` at s0 and ``b A`` at s0 + 1 (``b = u / (16 D) - s0``), unless
    an exercise date lies between the two steps or on one: then whole at its nearest step
    (docs/model/events.rst). The height is the step at or after the redemption."""
    spy, D, valuation = ins.steps_per_year, int(rows.days_per_year[r]), int(rows.valuation[r])
    seen = curve.at(valuation)
    events = sorted(_dated_events(ins, rows, r), key=lambda e: (-e[0], ORDER[e[1]]))
    q = _dated_phase(ins, rows, r, [day for day, kind, _ in events if kind not in (REDEMPTION, COUPON)])
    unit = PHASES * D  # a step, in u

    def place(day: int) -> int:
        return PHASES * (day - valuation) * spy - q * D

    def tau(s: int) -> float:
        return (PHASES * s + q) / (PHASES * spy)

    exercised = [place(day) for day, kind, _ in events if kind not in (REDEMPTION, COUPON)]
    by_step = defaultdict(list)

    def add(s: int, kind: str, amount: float, u: int, k: int) -> None:
        factor = 1.0 if u == s * unit else float(seen.discount(k / D) / seen.discount(tau(s)))
        by_step[s].append((kind, amount * factor))

    for day, kind, amount in events:  # each step's list fills in decreasing time
        k, u = day - valuation, place(day)
        s0, rest = divmod(u, unit)
        spread = rest and s0 >= 1 and kind in (REDEMPTION, COUPON)
        if spread and not any(s0 * unit <= x <= (s0 + 1) * unit for x in exercised):
            add(s0 + 1, kind, amount * rest / unit, u, k)
            add(s0, kind, amount * (unit - rest) / unit, u, k)
        else:
            add(max(1, (2 * u + unit) // (2 * unit)), kind, amount, u, k)
    height = max(1, -(-place(int(rows.redemption_day[r])) // unit))
    return by_step, height, q


def price_instrument(
    ins, curve: ZeroCurve, events: dict[int, list[tuple[str, float]]], n: int, phase: int = 0
) -> tuple[float, float]:
    """``(bond_price, option_price)`` of one instrument (a row with the canonical columns) on a tree of ``n``
    steps of ``phase`` (its first step ``(1 + phase / 16) dt`` long, with the variance of that length on the
    tree's rate grid: the root branches ``r / 6``, ``1 - r / 3``, ``r / 6``, r its variance over a step's), its
    ``events`` by step."""
    g = tree_geometry(ins.mean_reversion, ins.volatility, ins.maturity, ins.steps_per_year, n)
    dt, dr, jmax = float(g.dt), float(g.dr), int(g.jmax)
    a, sigma = ins.mean_reversion, ins.volatility
    first = (PHASES + phase) * dt / PHASES
    lengths = [first] + [dt] * (n - 1)  # of the steps from 0 .. n - 1 to the next
    times = [0.0] + [(PHASES * s + phase) * dt / PHASES for s in range(1, n + 1)]

    def variance(h: float) -> float:
        return sigma**2 * (1 - math.exp(-2 * a * h)) / (2 * a)

    root = 1.0 if phase == 0 else variance(first) / variance(dt)
    j = np.arange(-jmax, jmax + 1)
    pu, pm, pd_ = branching(jmax, float(g.M))
    # targets of the up, middle and down branches of each node (as array indices j + jmax)
    up, mid, down = j + 1, j.copy(), j - 1
    up[-1], mid[-1], down[-1] = jmax, jmax - 1, jmax - 2
    up[0], mid[0], down[0] = -jmax + 2, -jmax + 1, -jmax
    up, mid, down = up + jmax, mid + jmax, down + jmax
    width = 2 * jmax + 1
    root_up, root_mid, root_down = np.zeros(width), np.zeros(width), np.zeros(width)
    root_up[jmax], root_mid[jmax], root_down[jmax] = root / 6, 1 - root / 3, root / 6

    def probabilities(m: int):
        return (root_up, root_mid, root_down) if m == 0 and phase else (pu, pm, pd_)

    # forward: state prices Q and the displacements alpha fitted to P(0, t_{m+1})
    Q = np.zeros(width)
    Q[jmax] = 1.0
    alphas = np.empty(n)
    for m in range(n):
        h = lengths[m]
        alphas[m] = (math.log(np.sum(Q * np.exp(-j * dr * h))) - math.log(curve.discount(times[m + 1]))) / h
        flow = Q * np.exp(-(alphas[m] + j * dr) * h)
        p_up, p_mid, p_down = probabilities(m)
        Q = (
            np.bincount(up, flow * p_up, width)
            + np.bincount(mid, flow * p_mid, width)
            + np.bincount(down, flow * p_down, width)
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
        discount = np.exp(-(alphas[i] + j * dr) * lengths[i])
        p_up, p_mid, p_down = probabilities(i)
        bond = discount * (p_up * bond[up] + p_mid * bond[mid] + p_down * bond[down])
        option = discount * (p_up * option[up] + p_mid * option[mid] + p_down * option[down])
        apply_events(i, bond, option)
    return float(bond[jmax]), float(option[jmax])


def price_reference(instruments: Instruments, curves: dict[str, ZeroCurve]):
    """Bond and option prices (float64) of every instrument."""
    results = []
    for r, ins in enumerate(instruments.table.itertuples(index=False)):
        if instruments.is_dated[r]:
            dated = instruments.dated
            assert dated is not None  # a dated row comes with its dated terms
            events, n, phase = _dated_events_by_step(ins, dated, r, curves[ins.curve])
            curve = curves[ins.curve].at(int(dated.valuation[r]))
        else:
            curve = curves[ins.curve].at(ins.valuation) if curves[ins.curve].dates is not None else curves[ins.curve]
            events = _events_by_step(ins, curve)
            n, phase = max(1, math.floor(ins.maturity * ins.steps_per_year + 0.5)), 0
        results.append(price_instrument(ins, curve, events, n, phase))
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
