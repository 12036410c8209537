"""The plain baseline the CPU engine is measured against: a straightforward numba loop.

One instrument per ``prange`` iteration in input order (no sorting), rows allocated once per instrument,
full-width loops, a scatter forward step, ``exp(-(alpha + j dr) dt)`` evaluated per node and step as
the tree's rule writes it, bond and option rolled back in separate loops. Same inputs (a ``distprice`` batch) and
same prices.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from distprice.lattice.batch import Batch


@numba.njit(parallel=True)
def _plain(
    jmax,
    height,
    dt,
    dr,
    M,
    face,
    is_call,
    curve_index,
    curve_offsets,
    curve_t,
    curve_z,
    c_off,
    c_step,
    c_amount,
    x_off,
    x_step,
    x_amount,
    bond_out,
    option_out,
):
    for r in numba.prange(len(jmax)):
        jm, n, h, d = jmax[r], height[r], dt[r], dr[r]
        w = 2 * jm + 1
        pu, pm, pd = np.empty(w), np.empty(w), np.empty(w)
        up, mid, down = np.empty(w, np.int64), np.empty(w, np.int64), np.empty(w, np.int64)
        for c in range(w):
            x = (c - jm) * M[r]
            pu[c], pm[c], pd[c] = 1 / 6 + (x * x + x) / 2, 2 / 3 - x * x, 1 / 6 + (x * x - x) / 2
            up[c], mid[c], down[c] = c + 1, c, c - 1
        x = jm * M[r]
        pu[w - 1], pm[w - 1], pd[w - 1] = 7 / 6 + (x * x + 3 * x) / 2, -1 / 3 - x * x - 2 * x, 1 / 6 + (x * x + x) / 2
        up[w - 1], mid[w - 1], down[w - 1] = w - 1, w - 2, w - 3
        x = -jm * M[r]
        pu[0], pm[0], pd[0] = 1 / 6 + (x * x - x) / 2, -1 / 3 - x * x + 2 * x, 7 / 6 + (x * x - 3 * x) / 2
        up[0], mid[0], down[0] = 2, 1, 0
        ct = curve_t[curve_offsets[curve_index[r]] : curve_offsets[curve_index[r] + 1]]
        cz = curve_z[curve_offsets[curve_index[r]] : curve_offsets[curve_index[r] + 1]]
        Q, Qn = np.zeros(w), np.zeros(w)
        Q[jm] = 1.0
        alpha = np.empty(n)
        for m in range(n):
            t = (m + 1) * h
            s = 0.0
            for c in range(w):
                s += Q[c] * math.exp(-(c - jm) * d * h)
            alpha[m] = (math.log(s) + np.interp(t, ct, cz) * t) / h
            Qn[:] = 0.0
            for c in range(w):
                flow = Q[c] * math.exp(-(alpha[m] + (c - jm) * d) * h)
                Qn[up[c]] += flow * pu[c]
                Qn[mid[c]] += flow * pm[c]
                Qn[down[c]] += flow * pd[c]
            Q, Qn = Qn, Q
        B, Bn = np.full(w, face[r]), np.empty(w)
        O, On = np.zeros(w), np.empty(w)
        ci, xi = c_off[r], x_off[r]
        for i in range(n, -1, -1):
            if i < n:
                for c in range(w):
                    Bn[c] = math.exp(-(alpha[i] + (c - jm) * d) * h) * (
                        pu[c] * B[up[c]] + pm[c] * B[mid[c]] + pd[c] * B[down[c]]
                    )
                for c in range(w):
                    On[c] = math.exp(-(alpha[i] + (c - jm) * d) * h) * (
                        pu[c] * O[up[c]] + pm[c] * O[mid[c]] + pd[c] * O[down[c]]
                    )
                B, Bn, O, On = Bn, B, On, O
            while xi < x_off[r + 1] and x_step[xi] == i:
                for c in range(w):
                    payoff = B[c] - x_amount[xi] if is_call[r] else x_amount[xi] - B[c]
                    O[c] = max(O[c], payoff, 0.0)
                xi += 1
            while ci < c_off[r + 1] and c_step[ci] == i:
                for c in range(w):
                    B[c] += c_amount[ci]
                ci += 1
        bond_out[r], option_out[r] = B[jm], O[jm]


def price_plain(batch: Batch):
    """Bond and option prices of ``batch`` by the plain loop (float64)."""
    g = batch.geometry
    bond, option = np.empty(len(batch)), np.empty(len(batch))
    _plain(
        g.jmax,
        g.height,
        g.dt,
        g.dr,
        g.M,
        batch.face,
        batch.is_call,
        batch.curve_index,
        batch.curve_offsets,
        batch.curve_t,
        batch.curve_z,
        batch.coupons.offsets,
        batch.coupons.step,
        batch.coupons.value,
        batch.exercises.offsets,
        batch.exercises.step,
        batch.exercises.value,
        bond,
        option,
    )
    return bond, option
