"""The inverse standard normal distribution function by Wichura's AS241 (PPND16, about 1e-16 relative).

For q = u − 0.5: if |q| ≤ 0.425, z = q · A(r) / B(r) with r = 0.180625 − q²; otherwise
r = √(−ln min(u, 1 − u)) and z = ±C(r − 1.6) / D(r − 1.6) for r ≤ 5, ±E(r − 5) / F(r − 5) beyond, with the
sign of q; ±∞ at u = 0 and 1. A … F are polynomials of degree 7 evaluated by Horner's rule from the highest
power; ln is :func:`distprice.montecarlo.elementary.log` (float64 arithmetic, vectorisable).

One table of constants, cast to the working precision, serves every form, so that an fp32 engine computes
in float32 throughout (but for ln): arrays (:func:`inverse_normal`, the reference engine), one number
(:func:`ppnd16`) and blocks of numbers (:func:`fill`: the central rational on all of them in vector code,
then the tails, 15 % of them, gathered, computed in vector code and scattered back), bit for bit the same.
In compiled code the table is frozen into the instructions (:data:`table`).
"""

from __future__ import annotations

import numba
import numpy as np

from . import elementary

# fmt: off
_A = (3.3871328727963666080e0, 1.3314166789178437745e2, 1.9715909503065514427e3, 1.3731693765509461125e4,
      4.5921953931549871457e4, 6.7265770927008700853e4, 3.3430575583588128105e4, 2.5090809287301226727e3)
_B = (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
      2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4, 5.2264952788528545610e3)
_C = (1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0, 3.64784832476320460504e0,
      1.27045825245236838258e0, 2.41780725177450611770e-1, 2.27238449892691845833e-2, 7.74545014278341407640e-4)
_D = (1.0, 2.05319162663775882187e0, 1.67638483018380384940e0, 6.89767334985100004550e-1,
      1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4, 1.05075007164441684324e-9)
_E = (6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0, 2.96560571828504891230e-1,
      2.65321895265761230930e-2, 1.24266094738807843860e-3, 2.71155556874348757815e-5, 2.01033439929228813265e-7)
_F = (1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1, 1.48753612908506148525e-2,
      7.86869131145613259100e-4, 1.84631831751005468180e-5, 1.42151175831644588870e-7, 2.04426310338993978564e-15)
# fmt: on
_SPLITS = (0.5, 0.425, 0.180625, 1.6, 5.0, 1.0)

CENTRAL, NEAR, FAR = 0, 16, 32
"""Offsets of the rational functions A/B, C/D, E/F in :data:`CONSTANTS` (numerator then denominator)."""
HALF, SPLIT_Q, CENTRAL_SHIFT, NEAR_SHIFT, FAR_SPLIT, ONE = range(48, 54)
"""Offsets of 0.5, 0.425, 0.180625, 1.6, 5.0 and 1.0 in :data:`CONSTANTS`."""
CONSTANTS = np.array(_A + _B + _C + _D + _E + _F + _SPLITS, dtype=np.float64)
CONSTANTS.setflags(write=False)


def constants(dtype) -> np.ndarray:
    """:data:`CONSTANTS` in the working precision."""
    return CONSTANTS.astype(dtype)


table = elementary.by_precision(constants)
""":data:`CONSTANTS` in the precision of a value (frozen into compiled code)."""


def _ratio(c, k, x):
    """P(x) / Q(x) for the degree-7 numerator c[k:k+8] and denominator c[k+8:k+16] (ascending powers)."""
    top = c[k + 7] * x + c[k + 6]
    bottom = c[k + 15] * x + c[k + 14]
    for i in range(5, -1, -1):
        top = top * x + c[k + i]
        bottom = bottom * x + c[k + 8 + i]
    return top / bottom


_ratio_compiled = numba.njit(cache=True, error_model="numpy")(_ratio)


def inverse_normal(u: np.ndarray) -> np.ndarray:
    """Φ⁻¹(u) for an array of u in [0, 1], in u's precision (float32 or float64); ±∞ at 0 and 1."""
    c = constants(u.dtype)
    q = u - c[HALF]
    z = np.empty_like(u)
    central = np.abs(q) <= c[SPLIT_Q]
    qc = q[central]
    z[central] = qc * _ratio(c, CENTRAL, c[CENTRAL_SHIFT] - qc * qc)
    tail = ~central
    ut = u[tail]
    r = np.sqrt(-elementary.log(np.where(q[tail] < 0, ut, c[ONE] - ut)))
    near = r <= c[FAR_SPLIT]
    zt = np.empty_like(r)
    zt[near] = _ratio(c, NEAR, r[near] - c[NEAR_SHIFT])
    far = ~near
    zt[far] = np.where((ut[far] == 0) | (ut[far] == c[ONE]), np.inf, _ratio(c, FAR, r[far] - c[FAR_SPLIT]))
    z[tail] = np.where(q[tail] < 0, -zt, zt)
    return z


@numba.njit(cache=True, error_model="numpy")
def central(u):
    """The central rational of AS241 at u (Φ⁻¹(u) where |u − 0.5| ≤ 0.425)."""
    c = table(u)
    q = u - c[HALF]
    return q * _ratio_compiled(c, CENTRAL, c[CENTRAL_SHIFT] - q * q)


@numba.njit(cache=True, error_model="numpy")
def is_tail(u):
    """Whether u takes a tail rational (|u − 0.5| > 0.425)."""
    c = table(u)
    return abs(u - c[HALF]) > c[SPLIT_Q]


@numba.njit(cache=True, error_model="numpy")
def radius(u):
    """r = √(−ln min(u, 1 − u)) of a tail u: beyond 5 (:func:`beyond`) where min(u, 1 − u) < 1.4e-11, which
    Sobol points of at most 32 bits never are, or is 0 (whose logarithm is finite here; :func:`tail` knows it)."""
    c = table(u)
    return np.sqrt(-elementary.log(u if u < c[HALF] else c[ONE] - u))


@numba.njit(cache=True, error_model="numpy")
def beyond(r):
    """Whether a tail's radius takes the far rational."""
    return r > table(r)[FAR_SPLIT]


@numba.njit(cache=True, error_model="numpy")
def tail(u, r):
    """Φ⁻¹(u) of a tail u from its radius r (:func:`radius`); ±∞ at u = 0 and 1 (which fp32 reaches where
    a Sobol integer rounds to 2^bits)."""
    c = table(u)
    if not beyond(r):
        z = _ratio_compiled(c, NEAR, r - c[NEAR_SHIFT])
    elif u == 0 or u == c[ONE]:
        z = np.inf
    else:
        z = _ratio_compiled(c, FAR, r - c[FAR_SPLIT])
    return -z if u < c[HALF] else z


@numba.njit(cache=True, error_model="numpy")
def near(u, r):
    """:func:`tail` where not :func:`beyond`: the near rational alone, for loops the compiler vectorises."""
    c = table(u)
    z = _ratio_compiled(c, NEAR, r - c[NEAR_SHIFT])
    return -z if u < c[HALF] else z


@numba.njit(cache=True, error_model="numpy")
def ppnd16(u):
    """Φ⁻¹(u) for one u in [0, 1], in u's precision."""
    return tail(u, radius(u)) if is_tail(u) else central(u)


@numba.njit(cache=True, error_model="numpy")
def scratch(count, like):
    """Scratch of :func:`fill` for ``count`` values of ``like``'s dtype: tail positions, flags and spares."""
    return (
        np.empty(count, np.int64),
        np.empty(count, np.uint8),
        np.empty(count, like.dtype),
        np.empty(count, like.dtype),
        np.empty(count, like.dtype),
    )


@numba.njit(cache=True, error_model="numpy")
def fill(u, z, count, scratch):
    """z[i] = Φ⁻¹(u[i]) for i < count, as :func:`ppnd16` bit for bit: the central rational and the tail
    flags of every value (vector code); the tails' positions listed (branch-free), their u gathered,
    radius and near rational in vector code, and scattered back (the far rational where it is needed)."""
    index, flags, spare_u, spare_r, spare_z = scratch
    for i in range(count):
        z[i] = central(u[i])
        flags[i] = is_tail(u[i])
    tails = 0
    for i in range(count):
        index[tails] = i
        tails += flags[i]
    for t in range(tails):
        spare_u[t] = u[index[t]]
    for t in range(tails):
        r = radius(spare_u[t])
        spare_r[t] = r
        spare_z[t] = near(spare_u[t], r)
    for t in range(tails):
        z[index[t]] = tail(spare_u[t], spare_r[t]) if beyond(spare_r[t]) else spare_z[t]
