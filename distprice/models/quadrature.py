"""Quadrature rules of the Heston pricer: Gauss-Laguerre (the benchmark's fixed rule) and Gauss-Kronrod
(the adaptive, accurate mode).

A rule is a pair of float64 arrays ``(nodes, weights)``. Gauss-Laguerre integrates over ``[0, inf)`` a
function that is not weighted by ``exp(-x)``: its weights are ``w_j exp(x_j)``.
"""

from __future__ import annotations

import functools

import numpy as np

# fmt: off
KRONROD_NODES = np.array([
    0.991455371120812639206854697526329, 0.949107912342758524526189684047851,
    0.864864423359769072789712788640926, 0.741531185599394439863864773280788,
    0.586087235467691130294144845693013, 0.405845151377397166906606412076961,
    0.207784955007898467600689403773245, 0.0])
# fmt: on
"""Non-negative abscissae of the 15-point Kronrod rule on [-1, 1]; every other one (1, 3, 5, 7) is a node
of the 7-point Gauss rule."""
# fmt: off
KRONROD_WEIGHTS = np.array([
    0.022935322010529224963732008058970, 0.063092092629978553290700663189204,
    0.104790010322250183839876322541518, 0.140653259715525918745189590510238,
    0.169004726639267902826583426598550, 0.190350578064785409913256402421014,
    0.204432940075298892414161999234649, 0.209482141084727828012999174891714])
GAUSS_WEIGHTS = np.array([
    0.129484966168869693270611432679082, 0.279705391489276667901467771423780,
    0.381830050505118944950369775488975, 0.417959183673469387755102040816327])
# fmt: on
"""Weights of the 7-point Gauss rule at KRONROD_NODES[1], [3], [5], [7]."""


@functools.cache
def laguerre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n``-point Gauss-Laguerre rule for ``int_0^inf f(x) dx``: nodes x_j and weights w_j exp(x_j)."""
    nodes, weights = np.polynomial.laguerre.laggauss(n)
    return nodes, weights * np.exp(nodes)


def rotations(nodes: np.ndarray, log_strike: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The parameter-independent table ``cos(x_j ln k), sin(x_j ln k)``, each of shape (nodes, quotes)."""
    angle = np.outer(nodes, log_strike)
    return np.cos(angle), np.sin(angle)


@functools.cache
def kronrod() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 15-point Gauss-Kronrod pair on [-1, 1]: nodes (increasing), Kronrod weights, and the 7-point Gauss
    weights at the same nodes (zero where a node is Kronrod's only)."""
    nodes = np.concatenate([-KRONROD_NODES[:-1], KRONROD_NODES[::-1]])
    kronrod_weights = np.concatenate([KRONROD_WEIGHTS[:-1], KRONROD_WEIGHTS[::-1]])
    gauss_weights = np.zeros(15)
    gauss_weights[[1, 3, 5, 7, 9, 11, 13]] = np.concatenate([GAUSS_WEIGHTS, GAUSS_WEIGHTS[-2::-1]])
    return nodes, kronrod_weights, gauss_weights


ADAPTIVE_TOLERANCE = 1e-10
"""Accurate mode: a panel of width h (in the mapped variable u in [0, 1]) is accepted when the Kronrod and Gauss
sums differ by at most ADAPTIVE_TOLERANCE * h at every strike of its maturity (measured: prices then agree with
QuantLib's AnalyticHestonEngine to ~3e-13)."""
ADAPTIVE_PANELS = 5_000
"""Accurate mode: panels one maturity may use; beyond them (or on a non-finite integrand) its prices are NaN.
At the benchmark's optimum a maturity takes at most a few hundred."""
ADAPTIVE_DEPTH = 50
"""Accurate mode: a panel bisected this many times that still fails the test makes its maturity's prices NaN."""
ADAPTIVE_SCALE = 4.0
"""Accurate mode maps ``x = L u / (1 - u)`` with ``L = ADAPTIVE_SCALE / sqrt(s)``, s the control variate's
total variance: the integrand's width scales like 1 / sqrt(s)."""
