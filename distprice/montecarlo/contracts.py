"""The three contracts of the LexiFi benchmark, as data: terms with the benchmark's figures as defaults.

A contract reads a path S[t][j] (date t = 1 … T, underlying j), the discount factors ``disc[k]`` of its
payments (``mc_cashflows``) and, for the European call, the deterministic multiplier ``detval[0]``
(``mc_detvals``). ``worst(t) = min_j S[t][j] / levels[j]``. Prices are in the units of the terms.

- ``european_call`` (code 1, one underlying): max((S[T][0] − strike) · detval[0], 0) · disc[0].
- ``worst_of_autocall`` (code 2): the first date t < T with worst(t) ≥ 1 pays coupons[t−1] · disc[t−1];
  otherwise date T pays final_coupon if worst(T) ≥ 1, notional if protection < worst(T) < 1, and
  notional · worst(T) below, · disc[T−1].
- ``worst_of_daily_barrier`` (code 3): coupon · disc[0] plus A · disc[1], A = notional · worst(T) if some
  S[t][j] ≤ barriers[j] and some S[T][j] < levels[j], else A = notional.

Engines read :meth:`Contract.terms`, a flat float64 array whose layout is given per contract below. The
compiled engine's :func:`observe` (each date) and :func:`settle` (the payoff) take a block of paths at once
(lanes), in loops the compiler vectorises. They see a path's index levels S, or y = log(S / S0) where the
engine follows paths so, and compare them with :meth:`Contract.thresholds` in the same terms (S ≥ L ⇔
y ≥ log(L / S0); worst(t) ≥ 1 ⇔ S_j ≥ L_j for every j).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numba
import numpy as np

INDEX_LEVELS = (3758.05, 11840.0, 1200.0)
"""Initial levels of EuroStoxx 50, Nikkei 225 and S&P 500: the benchmark's strikes of the worst-of."""


@dataclass(frozen=True)
class Contract:
    """Base of the contracts: a code, its names, the terms as a flat array, the shape it needs."""

    code = 0
    name = ""

    def terms(self) -> np.ndarray:
        """The terms as engines read them (float64)."""
        return np.concatenate(
            [np.atleast_1d(np.asarray(getattr(self, f.name), dtype=np.float64)) for f in dataclasses.fields(self)]
        )

    def cashflows(self, dates: int) -> int:
        """The number of discount factors the contract reads."""
        raise NotImplementedError

    def uses_detvals(self) -> bool:
        return False

    def shape_rules(self, dates: int, underlyings: int) -> list[str]:
        """Why the contract cannot be priced on this many dates and underlyings (empty if it can)."""
        return []

    def payoff(self, s: np.ndarray, disc: np.ndarray, detval: np.ndarray) -> np.ndarray:
        """Payoffs of paths s [paths, T, U] (numpy, in s's dtype)."""
        raise NotImplementedError

    def observed(self) -> tuple:
        """The level per underlying that a path is compared with at every date (none for the call)."""
        return ()

    def thresholds(self, spots: np.ndarray, logarithmic: bool) -> np.ndarray:
        """:meth:`observed` per model and underlying (float64 [M, U], spots S0 [M, U]): the levels, or
        log(level / S0) for paths followed as log(S / S0); zeros if nothing is observed."""
        levels = np.broadcast_to(np.asarray(self.observed() or 0.0, dtype=np.float64), spots.shape)
        return np.log(levels / spots) if logarithmic and self.observed() else levels.copy()


@dataclass(frozen=True)
class EuropeanCall(Contract):
    """Terms: [strike]."""

    strike: float = 4000.0
    code = 1
    name = "european_call"

    def cashflows(self, dates):
        return 1

    def uses_detvals(self):
        return True

    def shape_rules(self, dates, underlyings):
        return [] if underlyings == 1 else [f"european_call has one underlying, not {underlyings}"]

    def payoff(self, s, disc, detval):
        amount = (s[:, -1, 0] - s.dtype.type(self.strike)) * detval[0]
        return np.where(amount > 0, amount * disc[0], 0).astype(s.dtype)


@dataclass(frozen=True)
class WorstOfAutocall(Contract):
    """Terms: [levels (U), coupons (T − 1), final_coupon, notional, protection]."""

    levels: tuple = INDEX_LEVELS
    coupons: tuple = (1150.0, 1300.0, 1450.0, 1600.0)
    final_coupon: float = 1750.0
    notional: float = 1000.0
    protection: float = 0.75
    code = 2
    name = "worst_of_autocall"

    def cashflows(self, dates):
        return dates

    def shape_rules(self, dates, underlyings):
        rules = []
        if len(self.levels) != underlyings:
            rules.append(
                f"worst_of_autocall has {len(self.levels)} levels, one per underlying, "
                f"but the job has {underlyings} underlyings (give 'levels' in mc_terms)"
            )
        if len(self.coupons) != dates - 1:
            rules.append(
                f"worst_of_autocall has {len(self.coupons)} coupons, one per date but the last, "
                f"but the job has {dates} dates (give 'coupons' in mc_terms)"
            )
        return rules

    def payoff(self, s, disc, detval):
        real = s.dtype.type
        worst = np.min(s / np.asarray(self.levels, dtype=s.dtype), axis=2)
        called = worst[:, :-1] >= 1
        first = np.argmax(called, axis=1)
        final = worst[:, -1]
        notional = real(self.notional)
        redeemed = np.where(final > real(self.protection), notional, final * notional)
        at_end = np.where(final >= 1, real(self.final_coupon), redeemed) * disc[-1]
        coupons = np.asarray(self.coupons, dtype=s.dtype)
        early = coupons[first] * disc[first]
        return np.where(called.any(axis=1), early, at_end).astype(s.dtype)

    def observed(self):
        return self.levels


@dataclass(frozen=True)
class WorstOfDailyBarrier(Contract):
    """Terms: [levels (U), barriers (U), coupon, notional]."""

    levels: tuple = INDEX_LEVELS
    barriers: tuple = (2630.635, 8288.0, 840.0)
    coupon: float = 100.0
    notional: float = 1000.0
    code = 3
    name = "worst_of_daily_barrier"

    def cashflows(self, dates):
        return 2

    def shape_rules(self, dates, underlyings):
        return [
            f"worst_of_daily_barrier has {len(values)} {term}, one per underlying, but the job has "
            f"{underlyings} underlyings (give '{term}' in mc_terms)"
            for term, values in (("levels", self.levels), ("barriers", self.barriers))
            if len(values) != underlyings
        ]

    def payoff(self, s, disc, detval):
        real = s.dtype.type
        levels = np.asarray(self.levels, dtype=s.dtype)
        touched = np.any(s <= np.asarray(self.barriers, dtype=s.dtype), axis=(1, 2))
        below = np.any(s[:, -1] < levels, axis=1)
        worst = np.min(s[:, -1] / levels, axis=1)
        notional = real(self.notional)
        amount = np.where(touched & below, notional * worst, notional)
        return (real(self.coupon) * disc[0] + amount * disc[1]).astype(s.dtype)

    def observed(self):
        return self.barriers


KINDS = {cls.code: cls for cls in (EuropeanCall, WorstOfAutocall, WorstOfDailyBarrier)}
NAMES = {cls.name: cls for cls in KINDS.values()}
VECTOR_TERMS = ("levels", "coupons", "barriers")


def kind(value) -> type[Contract] | None:
    """The contract class named by a code (1, 2, 3, also as text) or a name; None if there is none."""
    text = str(value).strip()
    if text in NAMES:
        return NAMES[text]
    try:
        number = float(text)
    except ValueError:
        return None
    return KINDS.get(int(number)) if number.is_integer() else None


def term_names(cls: type[Contract]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


@numba.njit(cache=True, error_model="numpy", inline="always")
def _worst(terms, prices, lanes):
    """prices[U, b] = worst = min_j S_j / levels_j of each lane b, from prices S [U + 1, lanes]."""
    underlyings = prices.shape[0] - 1
    for b in range(lanes):
        prices[underlyings, b] = prices[0, b] / terms[0]
    for j in range(1, underlyings):
        for b in range(lanes):
            v = prices[j, b] / terms[j]
            prices[underlyings, b] = v if v < prices[underlyings, b] else prices[underlyings, b]


@numba.njit(cache=True, error_model="numpy", inline="always")
def observe(code, thresholds, date, last, level, state, m, flags, lanes):
    """Date ``date`` of a block of paths of model m seen by the contract: ``level`` [M, U, lanes] holds each
    path's index levels S at the date, or log(S / S0), and ``thresholds`` [M, U] the contract's in the same
    terms (:meth:`Contract.thresholds`). ``state[m, b]`` is the date the autocall was called (``last`` if it
    was not; called where S_j ≥ threshold_j for every j, i.e. worst ≥ 1) or whether a barrier was touched
    (0 or 1); ``flags`` (int32 [lanes]) is scratch."""
    underlyings = level.shape[1]
    if code == 2 and date < last:
        for b in range(lanes):
            flags[b] = 1
        for j in range(underlyings):
            threshold = thresholds[m, j]
            for b in range(lanes):
                flags[b] &= level[m, j, b] >= threshold
        for b in range(lanes):
            state[m, b] = date if flags[b] and state[m, b] == last else state[m, b]
    elif code == 3:
        for j in range(underlyings):
            threshold = thresholds[m, j]
            for b in range(lanes):
                state[m, b] |= level[m, j, b] <= threshold


@numba.njit(cache=True, error_model="numpy", inline="always")
def settle(code, terms, disc, detval, last, prices, state, m, values, lanes):
    """values[m, b] = the payoff of each lane of model m (float64 of arithmetic in the prices' precision),
    from the prices S [U + 1, lanes] at the last date and the state :func:`observe` kept."""
    underlyings = prices.shape[0] - 1
    if code == 1:
        for b in range(lanes):
            amount = (prices[0, b] - terms[0]) * detval[m, 0]
            values[m, b] = float(amount * disc[m, 0]) if amount > 0 else 0.0
        return
    _worst(terms, prices, lanes)
    if code == 2:
        final, notional, protection = (
            terms[underlyings + last],
            terms[underlyings + last + 1],
            terms[underlyings + last + 2],
        )
        for b in range(lanes):
            called, w = state[m, b], prices[underlyings, b]
            if called < last:
                values[m, b] = float(terms[underlyings + called] * disc[m, called])
            else:
                amount = final if w >= 1 else (notional if w > protection else w * notional)
                values[m, b] = float(amount * disc[m, last])
        return
    notional = terms[2 * underlyings + 1]
    for b in range(lanes):
        below = prices[0, b] < terms[0]
        for j in range(1, underlyings):
            below |= prices[j, b] < terms[j]
        amount = notional * prices[underlyings, b] if state[m, b] and below else notional
        values[m, b] = float(terms[2 * underlyings] * disc[m, 0] + amount * disc[m, 1])
