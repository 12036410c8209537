"""CPU risk engine (:class:`CpuRisk`, see :mod:`~.sweeps`): numba, parallel over trees, on the CPU engine's step
helpers (:mod:`~.cpu`).

The forward passes of a job's trees are kept (one per group, as for pricing), and each tree is rolled back
under every curve bump, one backward pass after another with the same step helpers, down to its first
exercise; where the row's cash flows above its last exercise fall at one step, from that exercise, on the
discount bond of that step rolled back there once per tree. Functions called per tree, step or event run
without numba's runtime, as the pricing engine's do (:mod:`~.cpu` says why).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..dates.parallel import over_ranges
from .batch import Batch
from .cpu import (
    _FASTMATH,
    _apply,
    _coefficients,
    _discount_bond,
    _event_amount,
    _forward_range,
    _roll_pair,
    _roll_step,
    _root_roll,
    _span,
    _state_value,
    balance,
)
from .events import CALL, EXERCISE, PUT, is_exercise, step_time
from .groups import kept_states, tree_groups
from .sweeps import Trees, bump_exponent, cut_steps, exponent_in, start_steps

DISCOUNT_SHARE = 0.2
"""A tree keeps a discount bond at its last exercise (w + 2 values, :class:`CpuRisk`) only where that spares
each of its passes at least this share of its steps: on the ``desk`` book two thirds of the option rows have
one, most of them a few steps above the last call, and keeping every one of them cost 2.7 KB a row against
0.6 KB, for 1.4 % fewer node-steps; on R1 the share leaves the count unchanged."""


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _bound(is_call, K, H, lo, hi):
    """An exercise on the holder's value ``H`` of a callable bond (``H = min(H, K)``) or a puttable one (``max``)
    at the nodes ``[lo, hi)``."""
    if is_call:
        for p in range(lo, hi):
            H[p] = min(H[p], K)
    else:
        for p in range(lo, hi):
            H[p] = max(H[p], K)


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _bumped_event(kind, adjusted, t, tau, here, grid, dz, is_call, embedded, B, O, lo, hi):
    """One event at step time ``tau`` under the bump ``dz``: its base-curve amount ``adjusted`` carries
    ``r(t) / r(tau)`` (``here`` = ``dz(tau) tau``); an exercise of an ``embedded`` option bounds the holder's
    value ``B`` (:func:`_bound`; a callable_puttable_bond's call caps it, its put floors it)."""
    if t != tau:
        adjusted *= math.exp(here - bump_exponent(t, grid, dz))
    if embedded and kind == EXERCISE:
        _bound(is_call, adjusted, B, lo, hi)
    elif embedded and (kind == CALL or kind == PUT):
        _bound(kind == CALL, adjusted, B, lo, hi)
    else:
        _apply(kind, adjusted, is_call, B, O, lo, hi)


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _backward_bumped(
    jmax,
    first,
    applied,
    cut,
    dt,
    phase,
    root,
    is_call,
    embedded,
    ea,
    coef,
    top,
    bottom,
    rows,
    grid,
    dz,
    dz2,
    pair,
    e_step,
    e_time,
    e_kind,
    e_adjusted,
    option_from,
    save_at,
    saved,
    exponents,
):
    """:func:`~.cpu._backward` under a bump ``dz`` on ``grid`` from step ``first`` down to step ``cut``, and with
    ``pair`` under a second bump ``dz2`` that starts at the same step, the two in one sweep per step
    (:func:`~.cpu._roll_pair`). ``rows``: the first bump's bond, its buffer, option and buffer (rows 0-3), the second's
    (4-7): zeroed to start at the height, or the values at step ``first``, before its events or (``applied``)
    after them. Step i's
    ``exp(-alpha_i dt)`` is ``ea[i] * r(t_{i+1}) / r(t_i)`` and an event's amount (``e_adjusted``:
    forward-adjusted on the base curve) carries ``r(t) / r(s dt)``, r(t) = ``exp(-dz(t) t)``. At the steps
    ``save_at`` (decreasing) the first bump's rows are copied to ``saved[c, 0 or 1]``. With ``embedded`` (a
    callable or puttable bond) the bond row is the holder's value, bond less call or plus put, exercised as
    :func:`_bound` says, and the option row stays zero: one row rolled back instead of two. Returns whether the
    values at step ``cut`` after its events are in the buffers (bond, option); ``exponents`` receives each
    bump's ``dz(t) t`` there."""
    B, Bn, O, On, C, Cn, P, Pn = rows[0], rows[1], rows[2], rows[3], rows[4], rows[5], rows[6], rows[7]
    b_moved, o_moved = False, False
    ei = 0
    while ei < len(e_step) and (e_step[ei] > first or (e_step[ei] == first and applied)):
        ei += 1
    c = 0
    top_time = step_time(first, dt, phase)
    above, above2 = bump_exponent(top_time, grid, dz), bump_exponent(top_time, grid, dz2)
    here, here2 = above, above2
    options = 0 if embedded else option_from
    j = len(grid) - 2  # the knot interval of the step's time, walked down with it
    for i in range(first, cut - 1, -1):
        tau = step_time(i, dt, phase)
        while j > 0 and grid[j] >= tau:
            j -= 1
        here = exponent_in(tau, grid, dz, j)
        if pair:
            here2 = exponent_in(tau, grid, dz2, j)
        if i < first and i == 0 and phase != 0:  # the root's first step of its own
            e, f = ea[0] * math.exp(here - above), ea[0] * math.exp(here2 - above2)
            _root_roll(jmax, e, root, B, Bn)
            _root_roll(jmax, e, root, O, On)
            _root_roll(jmax, f, root, C, Cn)
            _root_roll(jmax, f, root, P, Pn)
            B, Bn, O, On, C, Cn, P, Pn = Bn, B, On, O, Cn, C, Pn, P
            b_moved, o_moved = not b_moved, not o_moved
            above, above2 = here, here2
        elif i < first:
            e = ea[i] * math.exp(here - above)
            if pair:
                rolled = _roll_pair(
                    jmax, i, e, ea[i] * math.exp(here2 - above2), coef, top, bottom, B, Bn, O, On, C, Cn, P, Pn, options
                )
            else:
                rolled = _roll_step(jmax, i, e, coef, top, bottom, B, Bn, O, On, options)
            if rolled:
                O, On, P, Pn = On, O, Pn, P
                o_moved = not o_moved
            B, Bn, C, Cn = Bn, B, Cn, C
            b_moved = not b_moved
            above, above2 = here, here2
        lo, hi = _span(jmax, min(i, jmax))
        while ei < len(e_step) and e_step[ei] == i:
            _bumped_event(e_kind[ei], e_adjusted[ei], e_time[ei], tau, here, grid, dz, is_call, embedded, B, O, lo, hi)
            if pair:
                _bumped_event(
                    e_kind[ei], e_adjusted[ei], e_time[ei], tau, here2, grid, dz2, is_call, embedded, C, P, lo, hi
                )
            ei += 1
        while c < len(save_at) and save_at[c] == i:
            for p in range(len(B)):
                saved[c, 0, p] = B[p]
                saved[c, 1, p] = O[p]
            c += 1
    exponents[0], exponents[1] = here, here2
    return b_moved, o_moved


@numba.njit(cache=True, _nrt=False)
def _straight(grid, dz, e_time, e_kind, e_present, head):
    """The bond's value at the root under the bump, and that of its first ``head`` events' cash flows: its cash
    flows ``e_present`` (each amount times ``P(0, t)`` on the base curve) times ``r(t) = exp(-dz(t) t)``, which
    is what its tree gives (it reprices them)."""
    total = 0.0
    first = 0.0
    for e in range(len(e_time)):
        if not is_exercise(e_kind[e]):
            value = e_present[e] * math.exp(-bump_exponent(e_time[e], grid, dz))
            total += value
            if e < head:
                first += value
    return total, first


@numba.njit(cache=True, _nrt=False)
def _rows_from(rows, w, saved=None):
    """The rows (bond, option and their buffers, per bump: :func:`_backward_bumped`) zeroed over the ``w + 2``
    nodes, or each bump's bond and option set to ``saved[0]`` and ``saved[1]``."""
    for a in range(rows.shape[0]):
        for p in range(w + 2):
            rows[a, p] = 0.0
    if saved is not None:
        for a in range(0, rows.shape[0], 4):
            for p in range(w + 2):
                rows[a, p] = saved[0, p]
                rows[a + 2, p] = saved[1, p]


@numba.njit(cache=True, _nrt=False)
def _rows_discounted(rows, w, z, a, a2):
    """The rows (:func:`_backward_bumped`) zeroed over the ``w + 2`` nodes but each bump's bond: ``a`` and
    ``a2`` times the discount bond ``z``."""
    _rows_from(rows, w)
    for p in range(w + 2):
        rows[0, p] = a * z[p]
        rows[4, p] = a2 * z[p]


@numba.njit(cache=True, _nrt=False)
def _flows_at(tau, grid, dz, e_time, e_adjusted):
    """What the cash flows ``e_adjusted`` (forward-adjusted on the base curve to the one step they fall on)
    are worth at step time ``tau`` per unit of that step's discount bond there, under the bump ``dz``: their
    sum, each times ``r(t) / r(tau)``."""
    here = bump_exponent(tau, grid, dz)
    total = 0.0
    for e in range(len(e_time)):
        total += e_adjusted[e] * math.exp(here - bump_exponent(e_time[e], grid, dz))
    return total


@numba.njit(cache=True, parallel=True)
def _flow_steps(e_off, e_step, e_kind, last):
    """Per row, the one step above its last exercise ``last`` (> 0) at which all its later cash flows fall;
    -1 where they fall at several steps or none, or the row has no exercise."""
    out = np.full(len(e_off) - 1, -1, dtype=np.int64)
    for r in numba.prange(len(out)):
        if last[r] <= 0:
            continue
        s = -1
        for e in range(e_off[r], e_off[r + 1]):
            if e_step[e] <= last[r]:
                break
            if s == -1:
                s = e_step[e]
            elif e_step[e] != s or is_exercise(e_kind[e]):
                s = -1
                break
        out[r] = s
    return out


@numba.njit(cache=True, parallel=True, nogil=True)
def _discounts_all(
    order,
    thread_offsets,
    chosen,
    task_row,
    task_dr,
    alpha_at,
    ea_store,
    flow,
    jmax,
    height,
    dt,
    M,
    last,
    max_width,
    z_at,
    z_out,
):
    """For each tree ``chosen[k]``: the value at its row's last exercise step ``last`` (before that step's
    events) of 1 paid at the step ``flow`` over the nodes it reaches, rolled back on the tree's own
    ``exp(-alpha dt)``, into ``z_out[z_at[tree]:]`` (w + 2 values). Trees ``order[thread_offsets[t]:
    thread_offsets[t + 1]]`` run on thread t."""
    for t in numba.prange(len(thread_offsets) - 1):
        scratch = np.zeros((8, max_width + 2))  # coefficients (4), bond and buffer, unused option rows (2)
        _discount_trees(
            thread_offsets[t],
            thread_offsets[t + 1],
            order,
            chosen,
            task_row,
            task_dr,
            alpha_at,
            ea_store,
            flow,
            jmax,
            height,
            dt,
            M,
            last,
            z_at,
            z_out,
            scratch,
        )


@numba.njit(cache=True, _nrt=False)
def _discount_trees(
    start,
    stop,
    order,
    chosen,
    task_row,
    task_dr,
    alpha_at,
    ea_store,
    flow,
    jmax,
    height,
    dt,
    M,
    last,
    z_at,
    z_out,
    scratch,
):
    """:func:`_discounts_all`'s trees ``chosen[order[start:stop]]``."""
    coef, rows = scratch[0:4], scratch[4:8]
    for q in range(start, stop):
        k = chosen[order[q]]
        r = task_row[k]
        jm, n, s = jmax[r], height[r], flow[r]
        w = 2 * jm + 1
        top, bottom = _coefficients(jm, min(jm, n), dt[r], task_dr[k], M[r], coef)
        _rows_from(rows, w)
        B, Bn = rows[0], rows[1]
        lo, hi = _span(jm, min(s, jm))
        for p in range(lo, hi):
            B[p] = 1.0
        ea = ea_store[alpha_at[k] : alpha_at[k] + n]
        for i in range(s - 1, last[r] - 1, -1):
            _roll_step(jm, i, ea[i], coef, top, bottom, B, Bn, rows[2], rows[3], 0)
            B, Bn = Bn, B
        for p in range(w + 2):
            z_out[z_at[k] + p] = B[p]


@numba.njit(cache=True, parallel=True, nogil=True)
def _adjust_all(
    dt, phase, curve_index, curve_offsets, curve_t, curve_z, e_off, e_step, e_time, e_amount, adjusted, present
):
    """Per event: its amount forward-adjusted on its row's curve (:func:`~.cpu._event_amount`) and its amount times
    ``P(0, t)``."""
    for r in numba.prange(len(e_off) - 1):
        c = curve_index[r]
        ct = curve_t[curve_offsets[c] : curve_offsets[c + 1]]
        cz = curve_z[curve_offsets[c] : curve_offsets[c + 1]]
        for e in range(e_off[r], e_off[r + 1]):
            adjusted[e] = _event_amount(e_amount[e], e_time[e], e_step[e], dt[r], phase[r], ct, cz)
            present[e] = e_amount[e] * _discount_bond(e_time[e], ct, cz, 0)[0]


@numba.njit(cache=True)
def _scratch(rows, width):
    """Zeroed scratch rows for trees up to ``width`` nodes (padded by one each side), each row starting on a
    64-byte cache line and the rows one line more than whole lines apart. With rows of ``width + 2`` values
    from wherever the allocator put them, two bumps rolled in one sweep (:func:`~.cpu._roll_pair`) ran at speeds
    that varied from process to process by up to 1.7x."""
    size = (width + 2 + 7) // 8 * 8 + 8
    flat = np.zeros(rows * size + 8)
    skip = (-(flat.ctypes.data // 8)) % 8
    return flat[skip : skip + rows * size].reshape((rows, size))


@numba.njit(cache=True, parallel=True, nogil=True)
def _roll_all(
    order,
    thread_offsets,
    tasks,
    task_row,
    task_dr,
    alpha_at,
    ea_store,
    cut_at,
    q_at,
    q_store,
    z_at,
    z_store,
    start,
    grid,
    dz,
    jmax,
    height,
    dt,
    phase,
    root,
    M,
    is_call,
    embedded,
    e_off,
    e_step,
    e_time,
    e_kind,
    e_adjusted,
    e_present,
    option_from,
    max_width,
    bond_out,
    option_out,
):
    """Each task's tree under each of its bumps, down to the tree's cut step (:class:`CpuRisk`): bump 0 from
    the top, saving its rows at the steps above the cut where other bumps start; the others from the top or
    from those rows, two bumps that start at the same step in one backward pass (:func:`~.cpu._roll_pair`), or,
    starting at the cut or below it, from bump 0's values there. A tree with a discount bond (``z_at`` >= 0)
    starts bump 0, and every bump that starts at or above its last exercise, there, from that bond
    (:func:`_first_step`). The bond's value at the root is its discounted cash flows (:func:`_straight`); an
    ``embedded`` row's option is the difference of the bond's cash flows from the cut on and the holder's value
    there."""
    bumps = dz.shape[1]
    for t in numba.prange(len(thread_offsets) - 1):
        scratch = _scratch(12, max_width)  # coefficients (4), two bumps' bond and option rows (4 each)
        saved = np.zeros((bumps, 2, scratch.shape[1]))
        save_at = np.zeros(bumps, dtype=np.int64)
        done = np.zeros(bumps, dtype=np.bool_)
        exponents = np.zeros(2)
        _roll_trees(
            thread_offsets[t],
            thread_offsets[t + 1],
            order,
            tasks,
            task_row,
            task_dr,
            alpha_at,
            ea_store,
            cut_at,
            q_at,
            q_store,
            z_at,
            z_store,
            start,
            grid,
            dz,
            jmax,
            height,
            dt,
            phase,
            root,
            M,
            is_call,
            embedded,
            e_off,
            e_step,
            e_time,
            e_kind,
            e_adjusted,
            e_present,
            option_from,
            scratch,
            saved,
            save_at,
            done,
            exponents,
            bond_out,
            option_out,
        )


@numba.njit(cache=True, _nrt=False)
def _settle(value, exponent, grid, dz, is_call, embedded, e_time, e_kind, e_present, tail, bond_out, option_out, k, b):
    """Task k's bond and option under bump b at the root, from the rolled value at the cut (times
    ``exp(-dz(t) t)`` there) and the bond's cash flows (the first ``tail`` of them from the cut on)."""
    value *= math.exp(-exponent)
    bond, later = _straight(grid, dz, e_time, e_kind, e_present, tail)
    if embedded:
        value = later - value if is_call else value - later
    option_out[k, b] = value
    bond_out[k, b] = bond


@numba.njit(cache=True, _nrt=False)
def _first_step(starts, b, n, last, discounted):
    """The step bump ``b`` of a task rolls back from, and whether it starts there from the tree's discount bond
    (:func:`_roll_trees`): bump 0 from the height ``n``, the others from their ``starts``; with a discount bond
    (``discounted``) every bump that starts at or above the last exercise ``last`` from there."""
    first = starts[b] if b else n
    if discounted and first >= last:
        return last, True
    return first, False


@numba.njit(cache=True, _nrt=False)
def _roll_trees(
    first_task,
    stop,
    order,
    tasks,
    task_row,
    task_dr,
    alpha_at,
    ea_store,
    cut_at,
    q_at,
    q_store,
    z_at,
    z_store,
    start,
    grid,
    dz,
    jmax,
    height,
    dt,
    phase,
    root,
    M,
    is_call,
    embedded,
    e_off,
    e_step,
    e_time,
    e_kind,
    e_adjusted,
    e_present,
    option_from,
    scratch,
    saved,
    save_at,
    done,
    exponents,
    bond_out,
    option_out,
):
    """:func:`_roll_all`'s tasks ``order[first_task:stop]``."""
    bumps = dz.shape[1]
    coef, rows = scratch[0:4], scratch[4:12]
    for q in range(first_task, stop):
        k = order[q]
        tree = tasks[k]
        r = task_row[tree]
        jm, n = jmax[r], height[r]
        w = 2 * jm + 1
        cut = cut_at[tree]
        top, bottom = _coefficients(jm, min(jm, n), dt[r], task_dr[tree], M[r], coef)
        lo, hi = e_off[r], e_off[r + 1]
        ea = ea_store[alpha_at[tree] : alpha_at[tree] + n]
        Q = q_store[q_at[tree] : q_at[tree] + w + 2]
        starts = start[k]
        last, discounted = option_from[r], z_at[tree] >= 0
        z = z_store[z_at[tree] : z_at[tree] + w + 2] if discounted else z_store[:0]
        flows = 0  # the row's cash flows above its last exercise, all at one step where it has a discount bond
        while discounted and lo + flows < hi and e_step[lo + flows] > last:
            flows += 1
        saves = 0  # the distinct steps between the cut and bump 0's start where bumps start, decreasing
        for b in range(1, bumps):
            s, from_bond = _first_step(starts, b, n, last, discounted)
            if cut < s < n and not from_bond:
                i = saves
                while i > 0 and save_at[i - 1] < s:
                    i -= 1
                if i == 0 or save_at[i - 1] != s:
                    for m in range(saves, i, -1):
                        save_at[m] = save_at[m - 1]
                    save_at[i] = s
                    saves += 1
        tail = 0  # the row's events at the cut or above it (they come in decreasing steps)
        while lo + tail < hi and e_step[lo + tail] >= cut:
            tail += 1
        times, kinds, present = e_time[lo:hi], e_kind[lo:hi], e_present[lo:hi]
        base = 0.0
        done[:] = False
        for b in range(bumps):
            if done[b]:
                continue
            first, from_bond = _first_step(starts, b, n, last, discounted)
            if b and first <= cut and not from_bond:  # bump 0's values at the cut are this bump's
                _settle(
                    base,
                    bump_exponent(step_time(cut, dt[r], phase[r]), grid, dz[k, b]),
                    grid,
                    dz[k, b],
                    is_call[r],
                    embedded[r],
                    times,
                    kinds,
                    present,
                    tail,
                    bond_out,
                    option_out,
                    k,
                    b,
                )
                continue
            mate = b
            if b:  # a later bump from the same step rolls in the same pass
                for m in range(b + 1, bumps):
                    if not done[m] and _first_step(starts, m, n, last, discounted)[0] == first:
                        mate = m
                        break
            done[mate] = True
            if from_bond:
                tau = step_time(last, dt[r], phase[r])
                _rows_discounted(
                    rows,
                    w,
                    z,
                    _flows_at(tau, grid, dz[k, b], times[:flows], e_adjusted[lo : lo + flows]),
                    _flows_at(tau, grid, dz[k, mate], times[:flows], e_adjusted[lo : lo + flows]),
                )
            elif first == n:
                _rows_from(rows, w)
            else:
                at = 0
                while save_at[at] != first:
                    at += 1
                _rows_from(rows, w, saved[at])
            saves_here = save_at[:saves] if b == 0 else save_at[:0]
            b_moved, o_moved = _backward_bumped(
                jm,
                first,
                first < n and not from_bond,
                cut,
                dt[r],
                phase[r],
                root[r],
                is_call[r],
                embedded[r],
                ea,
                coef,
                top,
                bottom,
                rows,
                grid,
                dz[k, b],
                dz[k, mate],
                mate != b,
                e_step[lo:hi],
                times,
                kinds,
                e_adjusted[lo:hi],
                option_from[r],
                saves_here,
                saved,
                exponents,
            )
            for lane, bump in ((0, b), (1, mate)):
                held = rows[4 * lane + int(b_moved)] if embedded[r] else rows[4 * lane + 2 + int(o_moved)]
                value = _state_value(jm, cut, held, Q)
                if b == 0:
                    base = value
                _settle(
                    value,
                    exponents[lane],
                    grid,
                    dz[k, bump],
                    is_call[r],
                    embedded[r],
                    times,
                    kinds,
                    present,
                    tail,
                    bond_out,
                    option_out,
                    k,
                    bump,
                )
                if mate == b:
                    break


class CpuRisk:
    """The CPU engine's risk (see :mod:`~.sweeps` for the interface): forward passes once per group of trees
    that share one (:mod:`~.groups`), kept; each call of :meth:`roll` rolls its trees back under all its bumps,
    in parallel over trees.

    A tree's passes stop at its first exercise (its *cut*): below it the option is only discounted, so its value
    at the root is ``sum_j Q(cut, j) O(cut, j)`` with the state prices Q of the tree's forward pass, which a bump
    scales by ``r(t_cut)`` (:mod:`~.sweeps`). The bond's value at the root is its cash flows discounted on the
    bumped curve, which is what its tree gives (to rounding).

    ``embedded`` (per row, default none): the option is a callable or puttable bond's own, and only the price,
    bond less call or plus put, is wanted. Such a row rolls one row of values back, the holder's, instead of
    bond and option (an exercise caps it at the call price or floors it at the put price); its option value is
    then the difference of the holder's value and the bond's cash flows (absolute rounding of the bond's).

    Above a row's last exercise its tree holds the bond alone, and a bump changes every step's discount by one
    factor for all nodes (:mod:`~.sweeps`): where all of the row's cash flows above it fall at one step (a
    bond that pays no coupon after the last exercise date, or a bond option expiring in the last coupon
    period), a tree's values at the last exercise under any bump are one row, the value there of 1 paid at
    that step, times the cash flows' worth under the bump. :meth:`trees` rolls that row back once per tree
    (:attr:`bonded`: where it spares a DISCOUNT_SHARE of each pass); every bump that starts at or above the
    last exercise then starts there. On R1 half the trees have one, and the measure set's node-steps fall by a
    fifth."""

    def __init__(self, batch: Batch, embedded: np.ndarray | None = None):
        if batch.real != np.float64:
            raise ValueError("risk measures are computed in fp64")
        self.batch = batch
        self.embedded = np.zeros(len(batch), dtype=bool) if embedded is None else np.asarray(embedded, bool)
        events = batch.events
        self.adjusted, self.present = np.empty(len(events.amount)), np.empty(len(events.amount))
        """Each event's amount forward-adjusted on the batch's curves, and times P(0, t), once for every tree and
        bump."""
        _adjust_all(
            batch.geometry.dt,
            batch.geometry.phase,
            batch.curve_index,
            batch.curve_offsets,
            batch.curve_t,
            batch.curve_z,
            events.offsets,
            events.step,
            events.time,
            events.amount,
            self.adjusted,
            self.present,
        )
        self.cut = cut_steps(batch)
        """Each row's cut (:func:`~.sweeps.cut_steps`)."""
        self.flow = _flow_steps(events.offsets, events.step, events.kind, batch.option_from)
        """Each row's one step of cash flows above its last exercise (-1: none, or several)."""
        spared = self.flow - batch.option_from
        self.bonded = (spared > 0) & (spared >= DISCOUNT_SHARE * (batch.geometry.height - self.cut))
        """The rows whose trees start their bumps at the last exercise from a discount bond (DISCOUNT_SHARE)."""

    def trees(self, rows: np.ndarray, volatility: np.ndarray, dr: np.ndarray) -> Trees:
        b, g = self.batch, self.batch.geometry
        rows = np.asarray(rows, np.int64)
        dr = np.ascontiguousarray(dr, np.float64)
        shape = g.take(rows).with_dr(dr)
        groups = tree_groups(shape, b.curve_index[rows])
        leaders, heights = groups.leader, shape.height[groups.leader]
        alpha_offsets = np.zeros(len(leaders) + 1, dtype=np.int64)
        np.cumsum(heights, out=alpha_offsets[1:])
        ea = np.empty(alpha_offsets[-1])
        cut = self.cut[rows]
        kept = kept_states(groups.group, cut, shape.jmax[leaders])
        q = np.zeros(kept.size)
        if len(rows):
            order, thread_offsets = balance(
                (shape.width[leaders] * heights).astype(np.float64), numba.get_num_threads()
            )
            over_ranges(
                _forward_range,
                thread_offsets,
                order,
                rows[leaders],
                dr[leaders],
                g.jmax,
                g.height,
                g.dt,
                g.phase,
                g.root,
                g.M,
                b.curve_index,
                b.curve_offsets,
                b.curve_t,
                b.curve_z,
                int(shape.width.max()),
                alpha_offsets,
                ea,
                kept.offsets,
                kept.steps,
                kept.rows,
                q,
            )
        alpha_at = alpha_offsets[groups.group]
        chosen = np.flatnonzero(self.bonded[rows])
        z_at = np.full(len(rows), -1, dtype=np.int64)
        z_at[chosen] = np.cumsum(shape.width[chosen] + 2) - (shape.width[chosen] + 2)
        z = np.empty(int((shape.width[chosen] + 2).sum()))
        if len(chosen):
            at = rows[chosen]
            order, thread_offsets = balance(
                (g.width[at] * (self.flow[at] - b.option_from[at])).astype(np.float64), numba.get_num_threads()
            )
            _discounts_all(
                order,
                thread_offsets,
                chosen,
                rows,
                dr,
                alpha_at,
                ea,
                self.flow,
                g.jmax,
                g.height,
                g.dt,
                g.M,
                b.option_from,
                int(shape.width[chosen].max()),
                z_at,
                z,
            )
        state = (alpha_at, ea, cut, kept.row_at, q, z_at, z)
        return Trees(rows, np.asarray(volatility, np.float64), dr, state)

    def roll(self, trees: Trees, tasks: np.ndarray, grid: np.ndarray, dz: np.ndarray):
        b, g, events = self.batch, self.batch.geometry, self.batch.events
        tasks = np.asarray(tasks, np.int64)
        dz = np.ascontiguousarray(dz, np.float64)
        bond, option = np.full(dz.shape[:2], np.nan), np.full(dz.shape[:2], np.nan)
        if len(tasks) == 0:
            return bond, option
        rows = trees.rows[tasks]
        alpha_at, ea, cut, q_at, q, z_at, z = trees.state
        start = start_steps(grid, dz, g.dt[rows], g.height[rows], g.phase[rows])
        last = np.where(z_at[tasks] >= 0, b.option_from[rows], g.height[rows])[:, None]
        steps = np.maximum(np.where(start >= last, last, start) - cut[tasks, None], 0).sum(axis=1)
        order, thread_offsets = balance((g.width[rows] * steps).astype(np.float64), numba.get_num_threads())
        _roll_all(
            order,
            thread_offsets,
            tasks,
            trees.rows,
            trees.dr,
            alpha_at,
            ea,
            cut,
            q_at,
            q,
            z_at,
            z,
            start,
            np.ascontiguousarray(grid, np.float64),
            dz,
            g.jmax,
            g.height,
            g.dt,
            g.phase,
            g.root,
            g.M,
            b.is_call,
            self.embedded,
            events.offsets,
            events.step,
            events.time,
            events.kind,
            self.adjusted,
            self.present,
            b.option_from,
            int(g.width[rows].max()),
            bond,
            option,
        )
        return bond, option
