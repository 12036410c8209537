"""Roots of many rows' functions at once, each evaluation of every unfinished row one batched call: the
secant method while it converges, else Brent's method (zeroin: bisection, secant and inverse quadratic
interpolation within a bracket) after a search for the bracket. The OAS of :mod:`~.risk` is its user: one
call rolls every unfinished row's tree back at its next spread, so every evaluation saved is a backward
pass saved.

Each row starts from two points (the first call evaluates both) and takes secant steps. It is done when a
step is at most half the one before and either at most ``xtol / 2`` itself or, after two secant steps the
second at most half the first, at most ``xtol / 2`` once shrunk again by its ratio to the one before (the next
step if convergence went on only linearly at that rate; a secant converges faster): it returns the point that
step reaches, without evaluating it. A secant step that leaves ``[lo, hi]``,
is not finite or does not shrink |f| within a few steps hands the row to the bracket search: secant steps
from the last two points, made a fifth longer so that they pass the root, until it holds a sign change (a
bracket) or reaches an end of ``[lo, hi]`` without one (no root: the row fails). Within its bracket it runs
Brent's method until the bracket's half width is at most ``2 eps |x| + xtol / 2``: the root it returns lies
within ``xtol`` of a true root.
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

SECANT, SEARCH, BRENT, DONE, FAILED = 0, 1, 2, 3, 4
"""Phases of a row."""
MAX_EVALUATIONS = 100
SECANT_EVALUATIONS = 8
"""A row still in the secant phase after this many evaluations goes to the bracket search."""
_EPS = np.finfo(np.float64).eps


@numba.njit(cache=True, error_model="numpy")  # x / 0 is inf or NaN, as the logic expects
def _search(x0, f0, x1, f1, lo, hi):
    """The next point of the bracket search from the last two, or NaN when ``x1`` is an end of [lo, hi]
    already (no root in it on that side)."""
    step = -f1 * (x1 - x0) / (f1 - f0)
    if not np.isfinite(step) or step == 0.0:  # flat: take the function as decreasing (a price in its spread)
        step = (hi - lo) if f1 > 0 else -(hi - lo)
    x = min(max(x1 + 1.5 * step, lo), hi)
    return np.nan if x == x1 else x


@numba.njit(cache=True, error_model="numpy")  # x / 0 is inf or NaN, as the logic expects
def _advance(rows, fnew, phase, x, a, b, c, fa, fb, fc, d, e, prior, count, lo, hi, xtol):
    """Takes the value ``fnew[k]`` of row ``rows[k]`` at its pending point ``x`` and sets its next point (or
    finishes it); ``prior``: per row, the distance between its two points before the last (secant phase)."""
    for k in range(len(rows)):
        i = rows[k]
        f = fnew[k]
        count[i] += 1
        if not np.isfinite(f) or count[i] > MAX_EVALUATIONS:
            phase[i] = FAILED
            continue
        if f == 0.0:
            phase[i] = DONE
            continue
        if phase[i] == SECANT:
            step = -f * (x[i] - b[i]) / (f - fb[i])
            before = abs(x[i] - b[i])
            nxt = x[i] + step
            if (
                np.isfinite(step)
                and lo <= nxt <= hi
                and (abs(f) < abs(fb[i]) or count[i] <= 3)
                and count[i] < SECANT_EVALUATIONS
            ):
                b[i], fb[i] = x[i], f
                x[i] = nxt
                if abs(step) <= 0.5 * before and (
                    abs(step) <= 0.5 * xtol
                    or (count[i] >= 4 and before <= 0.5 * prior[i] and step * step <= 0.5 * xtol * before)
                ):
                    phase[i] = DONE
                prior[i] = before
                continue
            phase[i] = SEARCH
        if phase[i] == SEARCH:
            if f == 0.0:
                phase[i], x[i] = DONE, x[i]
                continue
            if f * fb[i] < 0.0:  # bracketed between the last point (b) and this one
                a[i], fa[i] = b[i], fb[i]
                b[i], fb[i] = x[i], f
                c[i], fc[i] = a[i], fa[i]
                d[i] = e[i] = b[i] - a[i]
                phase[i] = BRENT
            else:
                nxt = _search(b[i], fb[i], x[i], f, lo, hi)
                b[i], fb[i] = x[i], f
                if np.isnan(nxt):
                    phase[i] = FAILED
                else:
                    x[i] = nxt
                continue
        else:  # BRENT: the point evaluated becomes b
            a[i], fa[i] = b[i], fb[i]
            b[i], fb[i] = x[i], f
            if (fb[i] > 0.0) == (fc[i] > 0.0):
                c[i], fc[i] = a[i], fa[i]
                d[i] = e[i] = b[i] - a[i]
        # Brent (zeroin): keep b the best point, c on the other side of the root
        if abs(fc[i]) < abs(fb[i]):
            a[i], b[i], c[i] = b[i], c[i], b[i]
            fa[i], fb[i], fc[i] = fb[i], fc[i], fb[i]
        tol = 2.0 * _EPS * abs(b[i]) + 0.5 * xtol
        m = 0.5 * (c[i] - b[i])
        if abs(m) <= tol or fb[i] == 0.0:
            phase[i], x[i] = DONE, b[i]
            continue
        if abs(e[i]) < tol or abs(fa[i]) <= abs(fb[i]):
            d[i] = e[i] = m  # bisection
        else:
            s = fb[i] / fa[i]
            if a[i] == c[i]:  # secant
                p = 2.0 * m * s
                q = 1.0 - s
            else:  # inverse quadratic interpolation
                q = fa[i] / fc[i]
                r = fb[i] / fc[i]
                p = s * (2.0 * m * q * (q - r) - (b[i] - a[i]) * (r - 1.0))
                q = (q - 1.0) * (r - 1.0) * (s - 1.0)
            if p > 0.0:
                q = -q
            else:
                p = -p
            if 2.0 * p < min(3.0 * m * q - abs(tol * q), abs(e[i] * q)):
                e[i] = d[i]
                d[i] = p / q
            else:
                d[i] = e[i] = m
        x[i] = b[i] + (d[i] if abs(d[i]) > tol else (tol if m > 0 else -tol))


def find_roots(
    evaluate: Callable[[np.ndarray, np.ndarray], np.ndarray],
    first: np.ndarray,
    second: np.ndarray,
    lo: float,
    hi: float,
    xtol: float,
    at_first: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Roots in ``[lo, hi]`` of rows' functions: ``evaluate(rows, points)`` returns the values (rows, points)
    of rows ``rows`` at ``points`` (rows, points); the first call evaluates ``first`` and ``second`` (only
    ``second`` when the values at ``first`` are given, ``at_first``), every later call one point per unfinished
    row. Returns each row's root (NaN where none was found) and the evaluations it took (a value given
    counts as none)."""
    n = len(first)
    phase = np.full(n, SECANT, dtype=np.int64)
    count = np.ones(n, dtype=np.int64)
    a, c, fa, fc, d, e = (np.zeros(n) for _ in range(6))
    prior = np.full(n, np.inf)
    if at_first is None:
        values = evaluate(np.arange(n), np.stack([first, second], axis=1)) if n else np.zeros((0, 2))
    else:
        later = evaluate(np.arange(n), np.asarray(second, np.float64)[:, None]) if n else np.zeros((0, 1))
        values = np.stack([np.asarray(at_first, np.float64), later[:, 0]], axis=1)
    b, fb = np.asarray(first, np.float64).copy(), values[:, 0].copy()
    x = np.asarray(second, np.float64).copy()
    phase[~np.isfinite(fb)] = FAILED
    phase[fb == 0.0], x[fb == 0.0] = DONE, b[fb == 0.0]
    rows = np.flatnonzero(phase == SECANT)
    fresh = values[rows, 1]
    while len(rows):
        _advance(rows, fresh, phase, x, a, b, c, fa, fb, fc, d, e, prior, count, lo, hi, xtol)
        rows = np.flatnonzero(phase < DONE)
        if len(rows):
            fresh = evaluate(rows, x[rows, None])[:, 0]
    return np.where(phase == DONE, x, np.nan), count - (at_first is not None)  # count: the iteration's index
