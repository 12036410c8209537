"""Plain bonds under curve bumps, off the tree: a row without an option is worth its cash flows discounted on
its curve, ``sum_e A_e P(0, t_e)``, which its tree reprices exactly (the forward adjustment of every amount
to its step); under a bump dz (see :mod:`~.sweeps`) ``sum_e A_e P(0, t_e) exp(-dz(t_e) t_e)``. The risk of
a plain bond thus needs no tree at all.
"""

from __future__ import annotations

import numba
import numpy as np

from ..curves import ZeroCurve
from .batch import pack
from .instruments import Instruments
from .sweeps import exponent_in, knot_interval


class Straight:
    """The cash flows of plain-bond rows (``instruments``, every row a ``bond``), each discounted on its
    curve once: :meth:`price` values them under bumps."""

    def __init__(self, instruments: Instruments, curves: dict[str, ZeroCurve]):
        batch = pack(instruments, curves)
        events = batch.events
        self.offsets = events.offsets
        self.time = events.time
        owner = np.repeat(np.arange(len(instruments)), np.diff(events.offsets))
        curve = batch.curve_index[owner]
        self.present = np.empty(len(events.time))
        for c in np.unique(curve):
            here = curve == c
            knots = slice(batch.curve_offsets[c], batch.curve_offsets[c + 1])
            zero = np.interp(events.time[here], batch.curve_t[knots], batch.curve_z[knots])
            self.present[here] = events.amount[here] * np.exp(-zero * events.time[here])

    def price(self, rows: np.ndarray, grid: np.ndarray, dz: np.ndarray) -> np.ndarray:
        """Values (rows, bumps) of ``rows`` under the bumps ``dz`` (rows, bumps, knots) on ``grid``."""
        dz = np.ascontiguousarray(dz, np.float64)
        out = np.zeros(dz.shape[:2])
        _price(np.asarray(rows, np.int64), self.offsets, self.time, self.present, np.asarray(grid, np.float64), dz, out)
        return out


@numba.njit(cache=True, _nrt=False)  # per event and bump: no reference counts (cpu.py)
def _price(rows, offsets, time, present, grid, dz, out):
    """``out[k, b] = sum_e present[e] exp(-dz_kb(t_e) t_e)`` over row ``rows[k]``'s events, in their order
    (:func:`~.sweeps.exponent_in`, each event's knot interval searched once for all bumps)."""
    for k in range(len(rows)):
        for e in range(offsets[rows[k]], offsets[rows[k] + 1]):
            t = time[e]
            j = knot_interval(t, grid)
            for b in range(dz.shape[1]):
                out[k, b] += present[e] * np.exp(-exponent_in(t, grid, dz[k, b], j))
