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

Engines read :meth:`Contract.terms`, a flat float64 array whose layout is given per contract below.
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
        return np.concatenate([np.atleast_1d(np.asarray(getattr(self, f.name), dtype=np.float64))
                               for f in dataclasses.fields(self)])

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
            rules.append(f"worst_of_autocall has {len(self.levels)} levels, one per underlying, "
                         f"but the job has {underlyings} underlyings (give 'levels' in mc_terms)")
        if len(self.coupons) != dates - 1:
            rules.append(f"worst_of_autocall has {len(self.coupons)} coupons, one per date but the last, "
                         f"but the job has {dates} dates (give 'coupons' in mc_terms)")
        return rules

    def payoff(self, s, disc, detval):
        real = s.dtype.type
        worst = np.min(s / np.asarray(self.levels, dtype=s.dtype), axis=2)
        called = worst[:, :-1] >= 1
        first = np.argmax(called, axis=1)
        final = worst[:, -1]
        notional = real(self.notional)
        at_end = np.where(final >= 1, real(self.final_coupon),
                          np.where(final > real(self.protection), notional, final * notional)) * disc[-1]
        coupons = np.asarray(self.coupons, dtype=s.dtype)
        early = coupons[first] * disc[first]
        return np.where(called.any(axis=1), early, at_end).astype(s.dtype)


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
        return [f"worst_of_daily_barrier has {len(values)} {term}, one per underlying, but the job has "
                f"{underlyings} underlyings (give '{term}' in mc_terms)"
                for term, values in (("levels", self.levels), ("barriers", self.barriers))
                if len(values) != underlyings]

    def payoff(self, s, disc, detval):
        real = s.dtype.type
        levels = np.asarray(self.levels, dtype=s.dtype)
        touched = np.any(s <= np.asarray(self.barriers, dtype=s.dtype), axis=(1, 2))
        below = np.any(s[:, -1] < levels, axis=1)
        worst = np.min(s[:, -1] / levels, axis=1)
        notional = real(self.notional)
        amount = np.where(touched & below, notional * worst, notional)
        return (real(self.coupon) * disc[0] + amount * disc[1]).astype(s.dtype)


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


@numba.njit(cache=True, inline="always")
def _worst(s, m, p, t, terms):
    w = s[m, p, t, 0] / terms[0]
    for j in range(1, s.shape[3]):
        w = min(w, s[m, p, t, j] / terms[j])
    return w


@numba.njit(cache=True)
def payoffs(code, terms, s, m, count, disc, detval, out):
    """out[p] = payoff of path s[m, p] ([T, U]) under model m, for p < count (float64 values of arithmetic
    in s's precision; ``terms``, ``disc`` [M, K] and ``detval`` [M, K'] in that precision too). A block of
    paths per call: a call costs more than a European call's payoff."""
    dates, underlyings = s.shape[2], s.shape[3]
    last = dates - 1
    for p in range(count):
        if code == 1:
            amount = (s[m, p, last, 0] - terms[0]) * detval[m, 0]
            value = float(amount * disc[m, 0]) if amount > 0 else 0.0
        elif code == 2:
            called = last
            for t in range(last):
                if _worst(s, m, p, t, terms) >= 1:
                    called = t
                    break
            if called < last:
                value = float(terms[underlyings + called] * disc[m, called])
            else:
                w = _worst(s, m, p, last, terms)
                notional = terms[underlyings + last + 1]
                if w >= 1:
                    amount = terms[underlyings + last]
                elif w > terms[underlyings + last + 2]:
                    amount = notional
                else:
                    amount = w * notional
                value = float(amount * disc[m, last])
        else:
            touched = False
            for t in range(dates):
                for j in range(underlyings):
                    if s[m, p, t, j] <= terms[underlyings + j]:
                        touched = True
            below = False
            for j in range(underlyings):
                if s[m, p, last, j] < terms[j]:
                    below = True
            notional = terms[2 * underlyings + 1]
            amount = notional * _worst(s, m, p, last, terms) if touched and below else notional
            value = float(terms[2 * underlyings] * disc[m, 0] + amount * disc[m, 1])
        out[p] = value
