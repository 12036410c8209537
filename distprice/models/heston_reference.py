"""The reference Heston engine: numpy, written to be read, vectorised over the population (and the quotes).

It follows :mod:`distprice.models.heston` literally. ``gl20`` evaluates the strike-free factor of the
integrand at the 20 Gauss-Laguerre nodes once per (member, maturity) and combines it with the
parameter-independent rotations ``exp(-i x_j ln k)``; ``accurate`` integrates the same integrand adaptively
(15-point Gauss-Kronrod panels on ``x = L u / (1 - u)``, one panel sequence per member and maturity, shared by
its strikes).
"""

from __future__ import annotations

import numpy as np

from .heston import black_call, clamp, control_variance, correction, unpack
from .heston_quotes import Surface
from .quadrature import ADAPTIVE_DEPTH, ADAPTIVE_PANELS, ADAPTIVE_SCALE, ADAPTIVE_TOLERANCE, kronrod, laguerre

QUADRATURES = ("gl20", "accurate")
GL_NODES = 20


class ReferenceEngine:
    """Prices and objective of one surface for a population of parameter vectors ``(P, 5)``."""

    name = "reference"

    def __init__(self, surface: Surface, quadrature: str = "gl20"):
        self.surface = surface
        self.quadrature = quadrature
        if quadrature == "gl20":
            self.nodes, weights = laguerre(GL_NODES)
            self.rotation = weights * np.exp(-1j * np.outer(surface.log_strike, self.nodes)) / np.pi

    def integrals(self, params) -> tuple[np.ndarray, np.ndarray]:
        """Control variances ``(P, maturities)`` and the correction integrals over pi ``(P, quotes)``."""
        with np.errstate(all="ignore"):  # members out of the box may overflow: their prices become NaN
            return self._integrals(params)

    def _integrals(self, params) -> tuple[np.ndarray, np.ndarray]:
        s = self.surface
        model = unpack(params)
        variance = control_variance(s.times[None, :], *model)
        if self.quadrature == "gl20":
            per_node = [m[:, :, None] for m in model]
            factor = correction(self.nodes, s.times[None, :, None], variance[:, :, None], *per_node)
            return variance, np.einsum("pqj,qj->pq", factor[:, s.term, :], self.rotation).real
        integral = np.empty((len(variance), s.size))
        for p in range(len(variance)):
            for m, t in enumerate(s.times):
                quotes = np.flatnonzero(s.term == m)
                member = tuple(float(v[p, 0]) for v in model)
                integral[p, quotes] = adaptive_integral(t, variance[p, m], member, s.log_strike[quotes]) / np.pi
        return variance, integral

    def prices(self, params) -> np.ndarray:
        """Normalised model calls ``(P, quotes)``; NaN where the pricer broke down (non-finite)."""
        variance, integral = self.integrals(params)
        s = self.surface
        with np.errstate(invalid="ignore"):
            return clamp(black_call(s.log_strike, variance[:, s.term]) + integral, s.strike)

    def objective(self, params) -> np.ndarray:
        """``f = sum_q w_q ((C_q - C_mkt,q) / vega_q)^2`` per member; +inf where a price is not finite."""
        s = self.surface
        error = (self.prices(params) - s.market) / s.vega
        f = np.sum(s.weight * error * error, axis=1)
        return np.where(np.isfinite(f), f, np.inf)


def adaptive_integral(t: float, variance: float, params: tuple, log_strike: np.ndarray) -> np.ndarray:
    """``int_0^inf Re[correction(x) exp(-i x ln k)] dx`` for the strikes of one maturity, by Gauss-Kronrod panels
    bisected (depth first, left half first) until every strike meets ADAPTIVE_TOLERANCE; NaN if the integrand is
    not finite, the panels run out (ADAPTIVE_PANELS, ADAPTIVE_DEPTH) or ``|rho| > 1`` (a correlation out of its
    range: the characteristic function no longer decays and the integral does not converge absolutely)."""
    failed = np.full(len(log_strike), np.nan)
    if not (np.isfinite(variance) and variance > 0 and abs(params[2]) <= 1.0):
        return failed
    nodes, kronrod_weights, gauss_weights = kronrod()
    length = ADAPTIVE_SCALE / np.sqrt(variance)
    total = np.zeros(len(log_strike))
    panels = [(0.0, 1.0, 0)]
    for _ in range(ADAPTIVE_PANELS):
        if not panels:
            return total
        a, b, depth = panels.pop()
        half = 0.5 * (b - a)
        u = a + half + half * nodes
        x = length * u / (1.0 - u)
        jacobian = length / ((1.0 - u) * (1.0 - u))
        values = (correction(x, t, variance, *params) * jacobian * np.exp(-1j * np.outer(log_strike, x))).real
        fine, coarse = half * (values @ kronrod_weights), half * (values @ gauss_weights)
        error = np.max(np.abs(fine - coarse))
        if error <= ADAPTIVE_TOLERANCE * (b - a):
            total += fine
        elif np.isfinite(error) and depth < ADAPTIVE_DEPTH:
            panels += [(a + half, b, depth + 1), (a, a + half, depth + 1)]
        else:
            return failed
    return total if not panels else failed
