"""The Brownian bridge: standard normals of one path, step by step, into Wiener increments at the dates.

A bridge over T dates has T steps. Step i computes W at date ``index[i]`` (1-based; index 0 is time 0,
where W = 0) from the normal z_i of Sobol row i:

    W[index_0] = sd_0 · z_0
    W[index_i] = rw_i · W[right_i] + sd_i · z_i (+ lw_i · W[left_i] if left_i ≠ 0),   i = 1 … T−1

and the increments are dW[1] = W[1], dW[t] = W[t] − W[t−1]. The first Sobol dimensions so drive the last
date. :func:`from_dates` builds the bridge of Oancea et al.'s pricer from the dates (years).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Bridge:
    """Steps of a Brownian bridge: date indices (int32 [T], 1-based, 0 = time 0) and weights (float64 [T])."""

    index: np.ndarray
    left: np.ndarray
    right: np.ndarray
    sd: np.ndarray
    lw: np.ndarray
    rw: np.ndarray

    @property
    def dates(self) -> int:
        return len(self.index)

    @functools.cached_property
    def plan(self) -> Schedule:
        """:func:`schedule` of this bridge, computed once (every range a worker prices reuses it)."""
        return schedule(self)

    def astype(self, dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The weights (sd, lw, rw) in a working precision."""
        return self.sd.astype(dtype), self.lw.astype(dtype), self.rw.astype(dtype)


def from_dates(t: np.ndarray) -> Bridge:
    """The bridge over dates ``t`` (years, 0 ≤ t_1 < … < t_T): step 0 is date T with sd = √t_T; then a
    depth-first, left-first pre-order over date intervals (l, r) from (0, T) emits, where r − l ≥ 2, the
    middle m = ⌊(l + r)/2⌋ with sd = √((t_m − t_l)(t_r − t_m)/(t_r − t_l)), lw = (t_r − t_m)/(t_r − t_l),
    rw = (t_m − t_l)/(t_r − t_l), then visits (l, m) and (m, r)."""
    t = np.concatenate([[0.0], np.asarray(t, dtype=np.float64)])
    index, left, right = _order(len(t) - 1)
    m, l, r = index[1:], left[1:], right[1:]
    span = t[r] - t[l]
    sd = np.concatenate([[np.sqrt(t[-1])], np.sqrt((t[m] - t[l]) * (t[r] - t[m]) / span)])
    lw = np.concatenate([[0.0], (t[r] - t[m]) / span])
    rw = np.concatenate([[0.0], (t[m] - t[l]) / span])
    return Bridge(index, left, right, sd, lw, rw)


@functools.lru_cache(maxsize=64)
def _order(dates: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (index, left, right) of :func:`from_dates`'s steps over ``dates`` dates (int32, read-only): they
    depend on the number of dates alone."""
    steps = [(dates, 0, 0)]
    intervals = [(0, dates)]
    while intervals:
        l, r = intervals.pop()
        if r - l < 2:
            continue
        m = (l + r) // 2
        steps.append((m, l, r))
        intervals += [(m, r), (l, m)]  # (l, m) is popped first
    columns = np.array(steps, dtype=np.int32).T.copy()
    columns.flags.writeable = False
    return columns[0], columns[1], columns[2]


def problems(bridge: Bridge) -> list[tuple[int, str, str]]:
    """Broken rules of a given bridge as (step, column, rule): ``index`` is a permutation of 1 … T, each
    step reads only time 0 or dates computed at earlier steps, ``sd`` ≥ 0 and the weights are finite."""
    found = []
    dates = bridge.dates
    done = {0}
    for i in range(dates):
        b, l, r = (int(bridge.index[i]), int(bridge.left[i]), int(bridge.right[i]))
        if not 1 <= b <= dates or b in done:
            found.append((i, "bi", f"must be a date index 1..{dates} not computed at an earlier step"))
        for column, value in (("li", l), ("ri", r)):
            if i > 0 and value not in done:
                found.append((i, column, "must be 0 or a date index computed at an earlier step"))
        done.add(b)
    for column, values in (("sd", bridge.sd), ("lw", bridge.lw), ("rw", bridge.rw)):
        for i in np.flatnonzero(~np.isfinite(values)):
            found.append((int(i), column, "must be a finite number"))
    for i in np.flatnonzero(bridge.sd < 0):
        found.append((int(i), "sd", "must be >= 0"))
    return found


def increments(bridge: Bridge, z: np.ndarray) -> np.ndarray:
    """Wiener increments dW [..., T, U] from normals z [..., T, U] (row i of z feeds step i), in z's dtype."""
    sd, lw, rw = bridge.astype(z.dtype)
    w = np.zeros(z.shape[:-2] + (bridge.dates + 1,) + z.shape[-1:], dtype=z.dtype)
    w[..., bridge.index[0], :] = sd[0] * z[..., 0, :]
    for i in range(1, bridge.dates):
        step = rw[i] * w[..., bridge.right[i], :] + sd[i] * z[..., i, :]
        if bridge.left[i] != 0:
            step = step + lw[i] * w[..., bridge.left[i], :]
        w[..., bridge.index[i], :] = step
    return np.diff(w, axis=-2)


@dataclass(frozen=True)
class Schedule:
    """The bridge laid out for a path that keeps only a few W values (a GPU thread): after step i, the
    dates ``emit_dates[emit_start[i]:emit_start[i+1]]`` (ascending over the whole walk) are complete and
    their increments can be used. W of a step lives in register ``slot`` (0 holds time 0, always 0)."""

    slot: np.ndarray  # int32 [T]: where step i writes W[index_i]
    left_slot: np.ndarray  # int32 [T]: where W[left_i] is (0 for time 0)
    right_slot: np.ndarray  # int32 [T]
    emit_start: np.ndarray  # int32 [T + 1]
    emit_slots: np.ndarray  # int32 [T]: the slot of each emitted date, in date order
    slots: int  # registers needed, slot 0 included


def schedule(bridge: Bridge) -> Schedule:
    """Assign registers to W values so that each is kept from its step to its last use: as an end of a
    later step, or as W[t] when date t's increment is taken (dates in ascending order, as soon as all dates
    up to them are computed). A freed register is reused; the depth-first bridge needs about log2(T) + 2."""
    dates = bridge.dates
    step_of = np.empty(dates + 1, dtype=np.int64)
    step_of[0] = -1
    step_of[bridge.index] = np.arange(dates)
    emitted_after = np.maximum.accumulate(step_of[1:])  # date t is complete after this step
    last_use = emitted_after.copy()  # index t-1: last step reading W[t]
    for i in range(1, dates):
        for end in (bridge.left[i], bridge.right[i]):
            if end:
                last_use[end - 1] = max(last_use[end - 1], i)
    slot, left_slot, right_slot = (np.zeros(dates, dtype=np.int32) for _ in range(3))
    where = {0: 0}
    free: list[int] = []
    used = 1
    emit_start = np.searchsorted(emitted_after, np.arange(dates + 1), side="left").astype(np.int32)
    emit_slots = np.zeros(dates, dtype=np.int32)
    freed: list[list[int]] = [[] for _ in range(dates)]  # dates (t - 1) whose W is last used at step i
    for t, i in enumerate(last_use.tolist()):
        freed[i].append(t)
    for i in range(dates):
        left_slot[i] = where[int(bridge.left[i])] if i else 0
        right_slot[i] = where[int(bridge.right[i])] if i else 0
        if free:
            s = free.pop()
        else:
            s, used = used, used + 1
        date = int(bridge.index[i])
        where[date] = slot[i] = s
        for t in range(emit_start[i], emit_start[i + 1]):
            emit_slots[t] = where[t + 1]
        for t in freed[i]:
            free.append(where.pop(t + 1))
    return Schedule(slot, left_slot, right_slot, emit_start, emit_slots, used)
