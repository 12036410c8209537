"""Sobol points as integers, in Gray-code order (Bratley-Fox construction, Joe-Kuo direction numbers).

Direction numbers are a ``uint32`` array ``directions[d, b]`` = m_b · 2^(bits−1−b) for dimension d and bit
b < bits (m_b odd, m_b < 2^(b+1)). Sequence index n ≥ 1 (path k of a job uses n = k + 1; the all-zero point
n = 0 is never used) gives the integer vector

    x_n[d] = XOR over the set bits b of gray(n) of directions[d, b],   gray(n) = n XOR (n >> 1)

(the *independent* formula), and x_{n+1} = x_n XOR directions[:, c(n)] with c(n) the index of the lowest
zero bit of n (the *recurrence*). A range of indices is started by the first and continued by the second;
any split of [1, N] into ranges so gives the same integers. The uniform of x is x / 2^bits in (0, 1).

The CPU engine takes paths in *blocks* of L = 2^w consecutive paths k0 … k0 + L − 1, k0 a multiple of L,
and each dimension's integers of a block at once. Since n = k0 + t with t < L has gray(n) = gray(k0) XOR
gray(t), x_{k0+1+b} = x_{k0} XOR x_{b+1} for lanes b < L − 1 (:func:`lane_offsets`, a table per job), and
the last lane, x_{k0+L}, is the next block's base: gray(k0 + L) XOR gray(k0) has bits w − 1 and
w + c(k0 / L), so x_{k0+L} = x_{k0} XOR directions[:, w − 1] XOR directions[:, w + c(k0 / L)]
(:func:`leap`).
"""

from __future__ import annotations

import functools
import warnings

import numba
import numpy as np

JOE_KUO = "joe_kuo_6_21201"
"""Joe and Kuo's new-joe-kuo-6.21201 direction numbers (the default)."""
INPUT = "input"
"""Direction numbers given with the job (``mc_directions``)."""
SOURCES = (JOE_KUO, INPUT)
MAX_BITS = 32
JOE_KUO_DIMS = 21201


def gray(n: int) -> int:
    """The reflected binary Gray code of ``n``."""
    return n ^ (n >> 1)


@numba.njit(cache=True)
def lowest_zero_bit(n):
    """Index of the least-significant 0 bit of ``n`` ≥ 0 (c(n) of the recurrence)."""
    b = 0
    while n & 1:
        n >>= 1
        b += 1
    return b


def independent(directions: np.ndarray, n: int) -> np.ndarray:
    """x_n (uint32 per dimension) by the independent formula."""
    g = gray(int(n))
    x = np.zeros(directions.shape[0], dtype=np.uint32)
    for b in range(directions.shape[1]):
        if (g >> b) & 1:
            x ^= directions[:, b]
    return x


def points(directions: np.ndarray, first: int, count: int) -> np.ndarray:
    """x_n for n = first … first + count − 1 (uint32, shape [count, dims]): the independent formula for
    the first point, the recurrence (a running XOR of the directions c(n) selects) for the others."""
    steps = np.empty((count, directions.shape[0]), dtype=np.uint32)
    steps[0] = independent(directions, first)
    n = np.arange(first, first + count - 1, dtype=np.int64)
    lowest_zero = np.log2((n + 1) & ~n).astype(np.int64)  # (n + 1) & ~n = 2^c(n)
    steps[1:] = directions[:, lowest_zero].T
    return np.bitwise_xor.accumulate(steps, axis=0)


@numba.njit(cache=True)
def start(directions, n, x):
    """Write x_n into ``x`` (uint32[dims]) by the independent formula."""
    g = n ^ (n >> 1)
    for d in range(directions.shape[0]):
        x[d] = 0
    b = 0
    while g:
        if g & 1:
            for d in range(directions.shape[0]):
                x[d] ^= directions[d, b]
        g >>= 1
        b += 1


def lane_offsets(directions: np.ndarray, lanes: int) -> np.ndarray:
    """uint32 [dims, lanes]: x_{b+1} in lane b < lanes − 1 and 0 in the last lane (``lanes`` a power of two):
    x of path k0 + b of a block is x_{k0} XOR offsets[:, b], but for the last lane (see the module)."""
    offsets = np.zeros((directions.shape[0], lanes), dtype=np.uint32)
    if lanes > 1:
        offsets[:, :-1] = points(directions, 1, lanes - 1).T
    return offsets


@numba.njit(cache=True)
def leap_column(block, shift):
    """shift + c(block): the second column of :func:`leap` for a block of 2^shift paths (shift ≥ 1)."""
    return shift + lowest_zero_bit(block)


@numba.njit(cache=True)
def leap(directions, d, shift, column):
    """x_{(block+1)·2^shift} XOR x_{block·2^shift} in dimension d: directions[d, shift − 1] XOR
    directions[d, column] (``column`` from :func:`leap_column`; left out past the table, where the index
    2^bits is no path's)."""
    far = directions[d, column] if column < directions.shape[1] else np.uint32(0)
    return directions[d, shift - 1] ^ far


def joe_kuo(dims: int, bits: int) -> np.ndarray:
    """Joe-Kuo 6.21201 direction numbers for ``dims`` ≤ 21201 dimensions and ``bits`` ≤ 32 (uint32 [dims, bits]).

    Taken from SciPy's unscrambled ``scipy.stats.qmc.Sobol`` (its direction matrix, the one table SciPy
    ships), and checked against the points that SciPy's public ``random`` draws."""
    return _joe_kuo(int(dims), int(bits)).copy()


@functools.lru_cache(maxsize=16)
def _joe_kuo(dims: int, bits: int) -> np.ndarray:
    if not 1 <= dims <= JOE_KUO_DIMS or not 1 <= bits <= MAX_BITS:
        raise ValueError(
            f"Joe-Kuo directions exist for 1..{JOE_KUO_DIMS} dimensions and 1..{MAX_BITS} bits, not {dims} and {bits}"
        )
    from scipy.stats import qmc

    engine = qmc.Sobol(dims, scramble=False, bits=bits)
    directions = np.array(engine._sv, dtype=np.uint32)
    if directions.shape != (dims, bits):
        raise RuntimeError("scipy.stats.qmc.Sobol no longer keeps its direction numbers as expected")
    check = 8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        drawn = qmc.Sobol(dims, scramble=False, bits=bits).random(check + 1)[1:]
    ours = points(directions, 1, check) * 2.0**-bits
    if not np.array_equal(ours, drawn):
        raise RuntimeError("scipy.stats.qmc.Sobol's direction numbers do not give its own points")
    directions.setflags(write=False)
    return directions


def direction_rule(value: int, bit: int, bits: int) -> str | None:
    """Why ``value`` cannot be the direction number of ``bit`` in a ``bits``-bit table (None if it can):
    it must be m · 2^(bits−1−bit) with m odd and m < 2^(bit+1)."""
    shift = bits - 1 - bit
    if value < 0 or value >= 2**bits:
        return f"must be in 0 .. 2^{bits} - 1"
    if value % (1 << shift) or not (value >> shift) & 1:
        return f"must be an odd multiple of 2^{shift} (m * 2^(bits - 1 - bit) with m odd)"
    return None
