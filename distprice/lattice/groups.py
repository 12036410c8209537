"""Rows whose trees share one forward pass.

A tree's forward pass (the alphas fitted to the zero curve with Arrow-Debreu state prices, docs/model/tree.rst)
reads the tree's shape, ``jmax``, ``dt``, ``dr``, ``M`` and ``phase`` (its ``root`` follows from them), and the zero
curve its row is priced on as seen from its valuation date (a Batch's ``curve_index``: the curve id, and for a curve
with knots by date the valuation date, whose day count sets the curve's years); nothing else of the row, not its
events, not its height. Rows that agree on all of these, bit for bit, compute the same ``exp(-alpha_m dt)`` at every
step m they both reach. They form a *group*; the group's tallest row (the first of them, in row order) is its
*leader*, whose forward pass serves every other row of the group (its *followers*), which then run only their
backward pass. In a book of a few models (one Hull-White a, sigma, curve and steps a year per currency), this halves
the work.

Work is counted as the rest of the package counts it, over full rectangles: a forward pass of width x height
node-steps per group (its leader's) and a backward pass of width x height per row, where pricing every row
alone costs 2 x width x height per row (:func:`~.geometry.node_steps`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import pandas as pd
from numba import literal_unroll

from ..curves import ZeroCurve
from .batch import Batch
from .geometry import TreeGeometry, node_steps
from .instruments import Instruments


@dataclass(frozen=True)
class TreeGroups:
    """The groups of a batch's rows: ``group`` (per row, numbered in order of first appearance), ``leader``
    (per group, the row whose forward pass serves the group: the first of its tallest rows) and ``size`` (per
    group, its rows)."""

    group: np.ndarray
    leader: np.ndarray
    size: np.ndarray

    def __len__(self) -> int:
        return len(self.leader)

    @classmethod
    def alone(cls, rows: int) -> TreeGroups:
        """Every row its own group: what an engine prices with sharing off."""
        every = np.arange(rows, dtype=np.int64)
        return cls(every, every, np.ones(rows, dtype=np.int64))

    @property
    def is_leader(self) -> np.ndarray:
        """Per row: whether it runs its own forward pass."""
        mask = np.zeros(len(self.group), dtype=bool)
        mask[self.leader] = True
        return mask

    @property
    def leader_of(self) -> np.ndarray:
        """Per row: the row whose forward pass it uses (itself for a leader)."""
        return self.leader[self.group]

    def shared_node_steps(self, width, height) -> float:
        """:func:`shared_node_steps` of all the rows these groups hold (trees of ``width`` and ``height``): a backward
        pass per row and a forward pass per group, its leader's."""
        area = np.asarray(width, dtype=np.float64) * np.asarray(height, dtype=np.float64)
        return float(area.sum() + area[self.leader].sum())


def _combine(*keys: np.ndarray) -> np.ndarray:
    """Codes (order of first appearance) of the tuples of ``keys``, arrays of one value per row (integers, or
    labels of any type). One factorization of a 64-bit mix of the keys, checked against the keys themselves:
    rows whose mixes collide but whose keys differ (never seen, but possible) send it key by key."""
    columns = tuple(_integers(key) for key in keys)
    code = pd.factorize(_mix(columns))[0].astype(np.int64)
    first = np.empty(int(code.max(initial=-1)) + 1, dtype=np.int64)
    first[code[::-1]] = np.arange(len(code) - 1, -1, -1)  # each code's first row
    if _consistent(columns, code, first):
        return code
    code = columns[0]
    for column in columns[1:]:
        part = pd.factorize(column)[0].astype(np.int64)
        code = pd.factorize(pd.factorize(code)[0].astype(np.int64) * (int(part.max(initial=0)) + 1) + part)[0]
    return pd.factorize(code)[0].astype(np.int64)


@numba.njit(cache=True)
def _mix(columns):
    """A 64-bit mix per row of the int64 arrays ``columns``: multiply-xorshift steps, wrapping modulo 2**64, in
    one pass per column (no temporary arrays)."""
    mixed = np.zeros(len(columns[0]), dtype=np.uint64)
    for column in literal_unroll(columns):
        for i in range(len(mixed)):
            m = (mixed[i] ^ np.uint64(column[i])) * np.uint64(0x9E3779B97F4A7C15)
            mixed[i] = m ^ (m >> np.uint64(29))
    return mixed


@numba.njit(cache=True)
def _consistent(columns, code, first):
    """Whether every row's keys equal those of the first row of its code."""
    for column in literal_unroll(columns):
        for i in range(len(code)):
            if column[i] != column[first[code[i]]]:
                return False
    return True


def _integers(key: np.ndarray) -> np.ndarray:
    """A key as int64 values that are equal where the key's are: integers as they are, anything else by its
    codes."""
    key = np.asarray(key)
    if key.dtype.kind in "iub":
        return key.astype(np.int64, copy=False)
    return pd.factorize(key)[0].astype(np.int64)


@numba.njit(cache=True)
def _leaders(group: np.ndarray, height: np.ndarray) -> np.ndarray:
    """Per group (0 .. max), the first of its tallest rows."""
    groups = group.max() + 1 if len(group) else 0
    leader = np.full(groups, -1, dtype=np.int64)
    tallest = np.full(groups, -1, dtype=np.int64)
    for r in range(len(group)):
        if height[r] > tallest[group[r]]:
            tallest[group[r]], leader[group[r]] = height[r], r
    return leader


def tree_groups(geometry: TreeGeometry, curve: np.ndarray) -> TreeGroups:
    """The groups of rows with the tree shapes ``geometry`` on the curves ``curve`` (one integer per row that
    names the curve as the row's tree sees it: a Batch's ``curve_index``)."""
    shape = [np.asarray(getattr(geometry, name), dtype=np.float64).view(np.int64) for name in ("dt", "dr", "M")]
    integers = [np.asarray(getattr(geometry, name), dtype=np.int64) for name in ("jmax", "phase")]
    group = _combine(np.asarray(curve, dtype=np.int64), *integers, *shape)
    height = np.asarray(geometry.height, dtype=np.int64)
    leader = _leaders(group, height)
    return TreeGroups(group, leader, np.bincount(group, minlength=len(leader)))


def batch_groups(batch: Batch) -> TreeGroups:
    """The groups of a batch's rows (what the engines share)."""
    return tree_groups(batch.geometry, batch.curve_index)


def instrument_groups(instruments: Instruments, curves: dict[str, ZeroCurve] | None = None) -> TreeGroups:
    """The groups of valid rows before they are laid out (for planning): the groups their batch on ``curves``
    will have. Without ``curves`` every row's valuation date counts, as if every curve had knots by date: the
    groups are then at most split more finely (rows on a curve given in years that were valued on different
    dates share a tree, but are not grouped)."""
    table = instruments.table
    names = table["curve"].to_numpy(dtype=object)
    valuation = table["valuation"].to_numpy(dtype=np.int64)
    if curves is not None:
        codes, labels = pd.factorize(names)
        by_date = np.array([curves[str(name)].dates is not None for name in labels], dtype=bool)
        valuation = np.where(by_date[codes], valuation, 0)
    return tree_groups(instruments.geometry, _combine(names, valuation))


def row_shared_node_steps(width, height, group=None) -> np.ndarray:
    """Node-steps each of these rows costs with shared forward passes: its backward pass, ``width x height``,
    plus, for the leader of each group among these rows, the group's forward pass (``width x`` its height).
    ``group``: per row, its group (e.g. ``TreeGroups.group``, or its values at a chunk's rows: a chunk's rows
    share only among themselves); None: every row alone, :func:`~.geometry.node_steps`."""
    if group is None:
        return node_steps(width, height)
    width = np.asarray(width, dtype=np.float64)
    height = np.asarray(height, dtype=np.int64)
    backward = width * height
    local = pd.factorize(np.asarray(group))[0].astype(np.int64)
    leads = np.zeros(len(local), dtype=bool)
    leads[_leaders(local, height)] = True
    return np.where(leads, 2.0 * backward, backward)


def shared_node_steps(width, height, group=None) -> float:
    """Node-steps that pricing these rows computes, forward and backward passes (full rectangles), with the
    forward passes shared within each group (``group`` as for :func:`row_shared_node_steps`; None: every row
    alone, the sum of :func:`~.geometry.node_steps`, the figure the rest of the package quotes)."""
    return float(row_shared_node_steps(width, height, group).sum())


@dataclass(frozen=True)
class KeptStates:
    """The state prices the forward passes of groups keep: per group the steps (increasing) at which its
    trees' cuts lie, in CSR form (``offsets``, ``steps``); per such step m where its row lies (``rows``), and
    per tree the row of its cut (``row_at``; 0 for a cut of 0, which needs none); the table's ``size``.

    A row holds only the nodes ``|j| <= min(m, jmax)`` (every other state price at step m is zero), one after
    another, but is addressed as a whole row of ``2 jmax + 3`` values indexed ``j + jmax + 1`` (the CPU
    engine's padded rows): node j of a row at ``x`` is ``table[x + j + jmax + 1]``. The table starts and ends
    with ``max(jmax) + 1`` unused values, so every such address lies in it. Trees of a few steps on wide grids
    (a low mean reversion) keep a few values a row where whole rows would hold mostly zeros (250 000 trees of 4
    steps and jmax up to 84: 2.7 MB against 56 MB, which the backward passes read in row order, at random)."""

    offsets: np.ndarray
    steps: np.ndarray
    rows: np.ndarray
    row_at: np.ndarray
    size: int


def kept_states(group: np.ndarray, cut: np.ndarray, jmax: np.ndarray) -> KeptStates:
    """The state prices to keep for trees of groups ``group`` (numbered from 0) with cut steps ``cut``: a row
    per distinct step > 0 of each group's cuts (``jmax`` per group), laid out as :class:`KeptStates` says."""
    span = int(cut.max(initial=0)) + 1
    keep = cut > 0
    key = group[keep] * span + cut[keep]
    if len(jmax) * span <= 4 * len(cut):  # few (group, step) pairs: marked in a table, no sort
        marked = np.zeros(len(jmax) * span, dtype=bool)
        marked[key] = True
        saves = np.flatnonzero(marked)
        save_of = (np.cumsum(marked) - 1)[key]
    else:
        saves, save_of = np.unique(key, return_inverse=True)
    save_group, steps = np.divmod(saves, span)
    offsets = np.zeros(len(jmax) + 1, dtype=np.int64)
    np.cumsum(np.bincount(save_group, minlength=len(jmax)), out=offsets[1:])
    jmax = np.asarray(jmax, np.int64)
    reach = np.minimum(steps, jmax[save_group])
    pad = int(jmax.max(initial=0)) + 1
    length = 2 * reach + 1
    rows = pad + np.cumsum(length) - length - (jmax[save_group] + 1 - reach)  # node -reach at pad + the lengths before
    row_at = np.zeros(len(cut), dtype=np.int64)
    row_at[keep] = rows[save_of]
    return KeptStates(offsets, steps.astype(np.int64), rows, row_at, int(2 * pad + length.sum()))
