"""The fast CPU Heston engine (numba): the reference's arithmetic, one population per call, in parallel loops.

Work is split where it is shared. Per member: the maturity-free parts ``d0, d, g`` of the characteristic
function at the points where it is evaluated (4 for the control variate, the 20 nodes ``x_j - i``). Per
(maturity, member): the control variance and, for ``gl20``, the 20 strike-free factors of the integrand
(weights and 1/pi folded in). Per (quote, member): a 40-term dot product (vectorised) with the quote's row
of the parameter-independent table ``cos(x_j ln k), sin(x_j ln k)`` (computed once per surface), the
Black-Scholes control and the clamp. Quotes are sorted by maturity, so a task reads one block of the table.
``accurate`` runs the adaptive Gauss-Kronrod panels of the reference per (maturity, member). One parallel
loop over the (maturity, member) tasks does everything; its partial sums are added over maturities in order,
so a result does not depend on the thread count.
"""

from __future__ import annotations

import cmath
import math

import numba
import numpy as np
from numba import prange

from .heston import EPSILON
from .heston_quotes import Surface
from .heston_reference import GL_NODES
from .quadrature import (
    ADAPTIVE_DEPTH,
    ADAPTIVE_PANELS,
    ADAPTIVE_SCALE,
    ADAPTIVE_TOLERANCE,
    kronrod,
    laguerre,
    rotations,
)

TASKS_PER_CHUNK = 4
"""(maturity, member) tasks a thread takes at a time: the threads share the work dynamically."""

_jit = numba.njit(cache=True, error_model="numpy")
_parallel = numba.njit(cache=True, parallel=True, error_model="numpy")


@_jit
def _exp(z):
    m = math.exp(z.real)
    return complex(m * math.cos(z.imag), m * math.sin(z.imag))


@_jit
def _log(z):
    return complex(math.log(abs(z)), math.atan2(z.imag, z.real))


@_jit
def branches(xi, rho, kappa, eta):
    """The maturity-free parts ``d0, d, g`` of the characteristic function at ``xi``."""
    d0 = kappa - 1j * rho * eta * xi
    d = cmath.sqrt(d0 * d0 + eta * eta * xi * (xi + 1j))
    return d0, d, (d0 - d) / (d0 + d)


@_jit
def characteristic_at(t, d0, d, g, v0, theta, kappa, eta):
    """Heston characteristic function at maturity ``t`` from its maturity-free parts (see :func:`branches`)."""
    e = _exp(-d * t)
    ge = 1.0 - g * e
    eta2 = eta * eta
    return _exp(
        kappa * theta / eta2 * ((d0 - d) * t - 2.0 * _log(ge / (1.0 - g))) + v0 / eta2 * (d0 - d) * (1.0 - e) / ge
    )


@_jit
def characteristic(xi, t, v0, theta, rho, kappa, eta):
    d0, d, g = branches(xi, rho, kappa, eta)
    return characteristic_at(t, d0, d, g, v0, theta, kappa, eta)


CONTROL_POINTS = np.array([EPSILON - 1j, -EPSILON - 1j, 1j * (EPSILON - 1.0), -1j * (1.0 + EPSILON)])
"""Where the control variance differences the characteristic function; the first points of every member's
branch table (:func:`_branch_table`), the quadrature's ``x_j - i`` follow."""


@_jit
def _branch_table(params, points, d0, d, g):
    for p in range(params.shape[0]):
        for k in range(len(points)):
            d0[p, k], d[p, k], g[p, k] = branches(points[k], params[p, 2], params[p, 3], params[p, 4])


@_jit
def _psi(k, t, d0, d, g, p, v0, theta, kappa, eta):
    return characteristic_at(t, d0[p, k], d[p, k], g[p, k], v0, theta, kappa, eta)


@_jit
def control_variance(t, d0, d, g, p, v0, theta, kappa, eta):
    """The reference's central differences, from member ``p``'s branch table."""
    real_step = _psi(0, t, d0, d, g, p, v0, theta, kappa, eta) - _psi(1, t, d0, d, g, p, v0, theta, kappa, eta)
    imaginary_step = _psi(2, t, d0, d, g, p, v0, theta, kappa, eta) - _psi(3, t, d0, d, g, p, v0, theta, kappa, eta)
    return 0.5 * (real_step.imag - imaginary_step.real) / EPSILON


@_jit
def correction(x, variance, psi):
    """``(psi_BS(x - i) - psi) / (x (x - i))`` with ``psi = psi_H(x - i)``; ``(x - i) x`` is the BS exponent."""
    black = _exp(complex(-0.5 * variance * x * x, 0.5 * variance * x))
    return (black - psi) / (x * (x - 1j))


@_jit
def _ndtr(x):
    return 0.5 * math.erfc(-x * 0.7071067811865476)


@_jit
def call(deviation, half_variance, integral, log_strike, strike):
    """The clamped normalised call from its control's deviation ``sqrt(s)``, ``s / 2`` and correction integral;
    NaN if not finite."""
    d1 = (half_variance - log_strike) / deviation
    raw = _ndtr(d1) - strike * _ndtr(d1 - deviation) + integral
    if not math.isfinite(raw):
        return np.nan
    return max(max(0.0, 1.0 - strike), min(1.0, raw))


@_jit
def _gl_integrals(t, s, p, v0, theta, kappa, eta, d0, d, g, nodes, weights, table, lo, hi, out):
    """Correction integrals over pi of quotes lo..hi-1 (one maturity) into ``out``: the 20 factors
    ``c_j W_j / pi`` as (re, im) pairs, dotted with each quote's row of the table."""
    factors = np.empty(2 * len(nodes))
    for j in range(len(nodes)):
        psi = _psi(len(CONTROL_POINTS) + j, t, d0, d, g, p, v0, theta, kappa, eta)
        c = correction(nodes[j], s, psi) * (weights[j] / math.pi)
        factors[2 * j], factors[2 * j + 1] = c.real, c.imag
    for q in range(lo, hi):
        out[q - lo] = _dot(factors, table[q])


@numba.njit(cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
def _dot(a, b):
    """``sum_i a_i b_i``, summed in the order the compiler vectorises (the same on every call)."""
    total = 0.0
    for i in range(len(a)):
        total += a[i] * b[i]
    return total


@_jit
def _adaptive_integrals(
    t, s, v0, theta, rho, kappa, eta, nodes, kronrod_weights, gauss_weights, log_strike, lo, hi, out
):
    """The reference's adaptive Gauss-Kronrod panels for quotes lo..hi-1 (one maturity), over pi, into ``out``
    (NaN where the panels fail)."""
    count = hi - lo
    fine = np.empty(count)
    coarse = np.empty(count)
    lows = np.empty(ADAPTIVE_DEPTH + 2)
    highs = np.empty(ADAPTIVE_DEPTH + 2)
    depths = np.empty(ADAPTIVE_DEPTH + 2, dtype=np.int64)
    out[:] = 0.0
    failed = not (math.isfinite(s) and s > 0 and abs(rho) <= 1.0)
    length = ADAPTIVE_SCALE / math.sqrt(s) if not failed else 0.0
    lows[0], highs[0], depths[0], top, panels = 0.0, 1.0, 0, 1, 0
    while top > 0 and not failed:
        if panels == ADAPTIVE_PANELS:
            failed = True
            break
        panels += 1
        top -= 1
        a, b, depth = lows[top], highs[top], depths[top]
        half = 0.5 * (b - a)
        fine[:] = 0.0
        coarse[:] = 0.0
        for n in range(len(nodes)):
            u = a + half + half * nodes[n]
            x = length * u / (1.0 - u)
            psi = characteristic(x - 1j, t, v0, theta, rho, kappa, eta)
            c = correction(x, s, psi) * (length / ((1.0 - u) * (1.0 - u)))
            for k in range(count):
                angle = x * log_strike[lo + k]
                value = c.real * math.cos(angle) + c.imag * math.sin(angle)  # Re[c exp(-i angle)]
                fine[k] += kronrod_weights[n] * value
                coarse[k] += gauss_weights[n] * value
        error = 0.0
        for k in range(count):
            error = max(error, abs(half * (fine[k] - coarse[k])))
            if not math.isfinite(fine[k]):
                error = np.inf
        if error <= ADAPTIVE_TOLERANCE * (b - a):
            for k in range(count):
                out[k] += half * fine[k]
        elif math.isfinite(error) and depth < ADAPTIVE_DEPTH:
            lows[top], highs[top], depths[top] = a + half, b, depth + 1
            lows[top + 1], highs[top + 1], depths[top + 1] = a, a + half, depth + 1
            top += 2
        else:
            failed = True
    for k in range(count):
        out[k] = np.nan if failed else out[k] / math.pi


@_parallel
def _evaluate(
    params, d0, d, g, times, starts, log_strike, strike, adaptive, nodes, weights, table, market, scale, prices, partial
):
    """One task per (maturity, member): its control variance, its quotes' integrals and calls. With ``prices``
    of shape (P, quotes) the calls are written there; ``partial[m, p]`` receives the squared errors
    ``(scale (C - C_mkt))^2`` summed over the maturity's quotes (``scale = sqrt(w) / vega``)."""
    members = params.shape[0]
    write = prices.shape[1] > 0
    for i in prange(len(times) * members):
        m, p = i // members, i % members
        v0, theta, rho, kappa, eta = params[p, 0], params[p, 1], params[p, 2], params[p, 3], params[p, 4]
        t, lo, hi = times[m], starts[m], starts[m + 1]
        s = control_variance(t, d0, d, g, p, v0, theta, kappa, eta)
        integral = np.empty(hi - lo)
        if adaptive:
            _adaptive_integrals(
                t, s, v0, theta, rho, kappa, eta, nodes, weights[0], weights[1], log_strike, lo, hi, integral
            )
        else:
            _gl_integrals(t, s, p, v0, theta, kappa, eta, d0, d, g, nodes, weights[0], table, lo, hi, integral)
        deviation, half_variance, total = math.sqrt(s), 0.5 * s, 0.0
        for q in range(lo, hi):
            price = call(deviation, half_variance, integral[q - lo], log_strike[q], strike[q])
            if write:
                prices[p, q] = price
            error = (price - market[q]) * scale[q]
            total += error * error
        partial[m, p] = total


class CpuEngine:
    """Prices and objective of one surface for a population of parameter vectors ``(P, 5)`` (numba)."""

    name = "cpu"

    def __init__(self, surface: Surface, quadrature: str = "gl20"):
        self.surface = surface
        self.quadrature = quadrature
        self.order, self.sorted = surface.by_maturity()
        self.starts = np.searchsorted(self.sorted.term, np.arange(len(surface.times) + 1))
        self.strike = self.sorted.strike
        self.scale = np.sqrt(self.sorted.weight) / self.sorted.vega
        if quadrature == "gl20":
            self.nodes, weights = laguerre(GL_NODES)
            self.weights = weights[None, :]
            cosines, sines = rotations(self.nodes, self.sorted.log_strike)
            self.table = np.ascontiguousarray(np.stack([cosines.T, sines.T], axis=2).reshape(surface.size, -1))
            self.points = np.concatenate([CONTROL_POINTS, self.nodes - 1j])
        else:
            self.nodes, kronrod_weights, gauss_weights = kronrod()
            self.weights = np.stack([kronrod_weights, gauss_weights])
            self.table = np.empty((0, 0))
            self.points = CONTROL_POINTS

    def _run(self, params, prices) -> np.ndarray:
        params = np.ascontiguousarray(np.atleast_2d(params), dtype=np.float64)
        s = self.sorted
        d0, d, g = (np.empty((len(params), len(self.points)), dtype=np.complex128) for _ in range(3))
        _branch_table(params, self.points, d0, d, g)
        partial = np.empty((len(s.times), len(params)))
        with numba.parallel_chunksize(TASKS_PER_CHUNK):
            _evaluate(
                params,
                d0,
                d,
                g,
                s.times,
                self.starts,
                s.log_strike,
                self.strike,
                self.quadrature != "gl20",
                self.nodes,
                self.weights,
                self.table,
                s.market,
                self.scale,
                prices,
                partial,
            )
        return partial

    def prices(self, params) -> np.ndarray:
        """Normalised model calls ``(P, quotes)`` in the surface's quote order; NaN where the pricer broke down."""
        members = len(np.atleast_2d(params))
        prices = np.empty((members, self.surface.size))
        self._run(params, prices)
        out = np.empty_like(prices)
        out[:, self.order] = prices
        return out

    def objective(self, params) -> np.ndarray:
        """``f`` per member (+inf where a price is not finite); maturities summed in order."""
        f = self._run(params, np.empty((0, 0))).sum(axis=0)
        return np.where(np.isfinite(f), f, np.inf)
