"""Reference engine: one instrument at a time, following the tree and event rules literally, written to be read.

It builds its own event schedule from the instrument's times (not the vectorised tables of
:mod:`~.events`) so that the fast engines, which use those tables, are checked against an independent
reading of the rules. Slow: numpy over the nodes of one time step at a time; float64 only.
"""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from ..curves import ZeroCurve
from .geometry import branching, tree_geometry
from .instruments import Instruments


def _step(t: float, steps_per_year: int) -> int:
    return math.floor(t * steps_per_year + 0.5)


def _accrued(t: float, ins) -> float:
    """``face * coupon * (t - t_prev)``, ``t_prev`` the latest regular coupon time <= t."""
    if ins.coupon == 0:
        return 0.0
    t_prev = ins.maturity
    while t_prev > t + 1e-9 / ins.coupon_frequency:
        t_prev -= 1.0 / ins.coupon_frequency
    return ins.face * ins.coupon * max(t - t_prev, 0.0)


def _events(ins):
    """Coupon amount per step and the exercise amounts K per step, steps >= 1."""
    spy = ins.steps_per_year
    coupons: dict[int, float] = defaultdict(float)
    if ins.coupon > 0:
        k = 0
        while ins.maturity - k / ins.coupon_frequency > 1e-9 / ins.coupon_frequency:
            coupons[_step(ins.maturity - k / ins.coupon_frequency, spy)] += ins.face * ins.coupon / ins.coupon_frequency
            k += 1
    if ins.exercise == "european":
        times = [ins.expiry]
    elif ins.exercise == "bermudan":
        times, k = [], 0
        while (t := ins.expiry - k / ins.exercise_frequency) >= ins.first_exercise - 1e-9 / ins.exercise_frequency \
                and t > 0:
            times.append(t)
            k += 1
    else:
        first = max(1, _step(ins.first_exercise, spy))
        times = [i / spy for i in range(first, _step(ins.expiry, spy) + 1)]
    exercises: dict[int, list[float]] = defaultdict(list)
    for t in times:
        exercises[_step(t, spy)].append(ins.strike + _accrued(t, ins))
    drop = [s for s in list(coupons) + list(exercises) if s <= 0]
    for s in drop:
        coupons.pop(s, None)
        exercises.pop(s, None)
    return coupons, exercises


def price_instrument(ins, curve: ZeroCurve) -> tuple[float, float]:
    """``(bond_price, option_price)`` of one instrument (a row with the canonical columns)."""
    g = tree_geometry(ins.mean_reversion, ins.volatility, ins.maturity, ins.steps_per_year)
    dt, dr, jmax, n = float(g.dt), float(g.dr), int(g.jmax), int(g.height)
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
        Q = (np.bincount(up, flow * pu, width) + np.bincount(mid, flow * pm, width)
             + np.bincount(down, flow * pd_, width))

    # backward: bond and option together; at each step exercise first, then coupon
    coupons, exercises = _events(ins)
    is_call = ins.option_type == "call"

    def apply_events(i: int, bond: np.ndarray, option: np.ndarray) -> None:
        for K in exercises.get(i, ()):
            payoff = np.maximum(bond - K, 0.0) if is_call else np.maximum(K - bond, 0.0)
            np.maximum(option, payoff, out=option)
        bond += coupons.get(i, 0.0)

    bond = np.full(width, float(ins.face))
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
    results = [price_instrument(ins, curves[ins.curve]) for ins in instruments.table.itertuples(index=False)]
    prices = np.array(results, dtype=np.float64).reshape(-1, 2)
    return prices[:, 0], prices[:, 1]
