"""Plain bonds under curve bumps, off the tree: a row without an option is worth its cash flows discounted on
its curve, ``sum_e A_e P(0, t_e)``, which its tree reprices exactly (the forward adjustment of every amount
to its step); under a bump dz (see :mod:`~.sweeps`) ``sum_e A_e P(0, t_e) exp(-dz(t_e) t_e)``. The risk of
a plain bond thus needs no tree at all.
"""
from __future__ import annotations

import numpy as np

from ..curves import ZeroCurve
from .batch import pack
from .instruments import Instruments


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
        counts = np.diff(self.offsets)[rows]
        events = np.repeat(self.offsets[rows] - np.r_[0, np.cumsum(counts)[:-1]], counts) + np.arange(counts.sum())
        t = self.time[events]
        owner = np.repeat(np.arange(len(rows)), counts)
        upper = np.clip(np.searchsorted(grid, t), 1, max(len(grid) - 1, 1))
        lower = upper - 1
        if len(grid) == 1:
            weight = np.zeros(len(t))
            upper = lower = np.zeros(len(t), dtype=np.int64)
        else:
            weight = np.clip((t - grid[lower]) / (grid[upper] - grid[lower]), 0.0, 1.0)
        bumped = dz[owner, :, lower] * (1 - weight[:, None]) + dz[owner, :, upper] * weight[:, None]
        values = self.present[events, None] * np.exp(-bumped * t[:, None])
        if len(rows) == 0:
            return np.zeros((0, dz.shape[1]))
        return np.add.reduceat(values, np.r_[0, np.cumsum(counts)[:-1]], axis=0)  # every bond has a redemption
