"""Fast CPU engine: numba, parallel over instruments, node loops the compiler vectorises.

Per instrument the forward pass keeps only two rows of state prices Q and stores ``exp(-alpha_m dt)``
per step, computed without logarithms as ``P(0, (m+1) dt) / sum_j Q(m, j) exp(-j dr dt)``. The node
factor ``exp(-(alpha + j dr) dt)`` is strength-reduced to ``exp(-alpha dt) * exp(-j dr dt)`` and the
second factor folded into per-node branching coefficients computed once per instrument; interior nodes
are a gather with no branches, the two edge rows of the tree are handled apart. Only reachable nodes
``|j| <= min(i, jmax)`` are visited. Bond and option roll back in the same loop; above the last exercise
step the option is zero and only the bond rolls back. Each event's amount gets its forward adjustment
``P(0, t) / P(0, s dt)`` on the row's curve as it is applied (one for events on the tree's grid).

The roll-back stops at the row's first exercise (its *cut*, :func:`~.sweeps.cut_steps`): below it the option
is only discounted, so its value at the root is ``sum_j Q(cut, j) O(cut, j)`` with the state prices Q the
forward pass kept at that step; the bond's is the same sum over its values plus its cash flows below the cut
times ``P(0, t)``, which is what the tree gives for them (it reprices every discount bond). A row without an
exercise (a plain bond) is its cash flows alone: no pass at all. Bond values that left the float range (fp32)
at the cut make the sums infinite or NaN, as the whole pass would have made the root's.

Rows whose trees share a forward pass (:mod:`~.groups`: the same tree shape and curve) share it: the
forward passes of the groups' leaders (each group's tallest tree) run first, in parallel, into a table of
``exp(-alpha_m dt)``, keeping the state prices of their members' cut steps; then every row runs its backward
pass on its group's values (a row alone in its group runs its own forward pass there, as each row did before
sharing). A follower reads exactly the values its own
forward pass would have computed (the same arithmetic on the same numbers, step by step), so its prices are
bit for bit those of pricing it alone. The table holds at most about TABLE_REALS values at once: a batch of
many groups is priced in waves of groups.

Work is balanced over threads with the longest-processing-time rule on the node-steps of each tree; each
thread runs a kernel that releases the GIL on its rows (:func:`~distprice.dates.parallel.over_ranges`: numba's
``parallel=True`` loops compile several times slower, on every fresh install). Scratch rows are allocated once
per thread, never per node or step. The CPU risk engine (:mod:`~.cpu_risk`) runs the
same forward passes and step helpers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from ..dates.parallel import over_ranges
from .batch import Batch
from .events import CALL, EXERCISE, PUT, is_exercise, step_time
from .groups import TreeGroups, batch_groups, kept_states
from .sweeps import cut_steps

_FASTMATH = {"reassoc", "contract", "nsz"}  # lets sums vectorise and fuse multiply-adds: rounding-level effects only
# The functions called per row, step or event run without numba's runtime (``_nrt=False``): with it, every
# call that passes an array, every view taken and every swap of two rows updates the array's reference count,
# an atomic operation that cost more than the arithmetic of a small tree (trees of a few steps priced 2-3x
# slower). They allocate nothing and return no array; the range kernels that call them allocate each
# thread's scratch rows.


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _discount_bond(t, curve_t, curve_z, k):
    """``P(0, t)`` on a linear-in-t zero curve with flat ends; ``k`` is a search hint (t increasing)."""
    nk = len(curve_t)
    while k < nk and curve_t[k] < t:
        k += 1
    if k == 0:
        z = curve_z[0]
    elif k == nk:
        z = curve_z[nk - 1]
    else:
        z = curve_z[k - 1] + (curve_z[k] - curve_z[k - 1]) * (t - curve_t[k - 1]) / (curve_t[k] - curve_t[k - 1])
    return math.exp(-z * t), k


# Node loops index whole rows with unsigned integers: with signed indices numba adds a negative-index
# wraparound test to every access, which keeps the compiler from vectorising; slicing a view per step
# instead would cost reference counting on every step.
_1 = numba.uint64(1)
_2 = numba.uint64(2)


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _gather(e, fu, fm, fd, Q, Qn, ej, lo, hi):
    """``Qn[p] = e * (fu[p-1] Q[p-1] + fm[p] Q[p] + fd[p+1] Q[p+1])`` for lo <= p < hi; returns sum Qn ej."""
    s = 0.0
    for p in range(lo, hi):
        q = e * (fu[p - _1] * Q[p - _1] + fm[p] * Q[p] + fd[p + _1] * Q[p + _1])
        Qn[p] = q
        s += q * ej[p]
    return s


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _stencil(e, wu, wm, wd, V, Vn, lo, hi):
    """``Vn[p] = e * (wu[p] V[p+1] + wm[p] V[p] + wd[p] V[p-1])`` for lo <= p < hi."""
    for p in range(lo, hi):
        Vn[p] = e * (wu[p] * V[p + _1] + wm[p] * V[p] + wd[p] * V[p - _1])


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _stencil2(e, f, wu, wm, wd, B, Bn, O, On, lo, hi):
    """:func:`_stencil` on two rows at once, ``B`` with step factor ``e`` and ``O`` with ``f``: one sweep over
    the node weights serves both (a bond and its option share e; two bumps' rows have their own)."""
    for p in range(lo, hi):
        Bn[p] = e * (wu[p] * B[p + _1] + wm[p] * B[p] + wd[p] * B[p - _1])
        On[p] = f * (wu[p] * O[p + _1] + wm[p] * O[p] + wd[p] * O[p - _1])


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _exercise(is_call, K, B, O, lo, hi):
    """``O = max(O, payoff(B, K))`` for lo <= p < hi, payoff ``max(B - K, 0)`` (call) or ``max(K - B, 0)``."""
    if is_call:
        for p in range(lo, hi):
            O[p] = max(O[p], max(B[p] - K, 0.0))
    else:
        for p in range(lo, hi):
            O[p] = max(O[p], max(K - B[p], 0.0))


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _add(B, amount, lo, hi):
    for p in range(lo, hi):
        B[p] += amount


@numba.njit(cache=True, _nrt=False)
def _span(jmax, r):
    """Padded index range ``[lo, hi)`` of nodes ``|j| <= r`` as unsigned integers."""
    return numba.uint64(jmax + 1 - r), numba.uint64(jmax + 2 + r)


@numba.njit(cache=True, _nrt=False)
def _interior(jmax, i):
    """The nodes ``[lo, hi)`` that step i's stencil writes: ``|j| <= i``, or every node but the two edges once
    the edges are reached (``i >= jmax``; :func:`_edge_values` writes those)."""
    if i < jmax:
        return _span(jmax, i)
    return _2, numba.uint64(2 * jmax + 1)


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _coefficients(jmax, reach, dt, dr, M, coef):
    """Per-node factors of the nodes ``|j| <= reach`` (``reach = min(jmax, height)``: no step of the tree goes
    further) in rows padded by one zero each side of that span (index ``j + jmax + 1``).

    ``coef[0..2]``: ``pu, pm, pd`` of interior nodes times ``exp(-j dr dt)``, zero at the two edges (used
    as gather weights by the forward pass and as node weights by the backward pass); ``coef[3]``:
    ``exp(-j dr dt)``. Returns the branching probabilities of the top and bottom nodes.
    """
    w = 2 * jmax + 1
    lo, hi = jmax - reach, jmax + reach + 2
    for r in range(4):
        coef[r, lo] = 0.0
        coef[r, hi] = 0.0
    for p in range(lo + 1, hi):
        j = p - 1 - jmax
        x = j * M
        ej = math.exp(-j * dr * dt)
        coef[3, p] = ej
        if p == 1 or p == w:
            coef[0, p] = coef[1, p] = coef[2, p] = 0.0
            continue
        coef[0, p] = (1.0 / 6.0 + (x * x + x) / 2.0) * ej
        coef[1, p] = (2.0 / 3.0 - x * x) * ej
        coef[2, p] = (1.0 / 6.0 + (x * x - x) / 2.0) * ej
    xt = jmax * M
    xb = -jmax * M
    top = (7.0 / 6.0 + (xt * xt + 3.0 * xt) / 2.0, -1.0 / 3.0 - xt * xt - 2.0 * xt, 1.0 / 6.0 + (xt * xt + xt) / 2.0)
    bottom = (1.0 / 6.0 + (xb * xb - xb) / 2.0, -1.0 / 3.0 - xb * xb + 2.0 * xb, 7.0 / 6.0 + (xb * xb - 3.0 * xb) / 2.0)
    return top, bottom


@numba.njit(cache=True, _nrt=False)
def _clear(rows, jmax, reach):
    """Scratch ``rows`` zeroed over the nodes ``|j| <= reach + 1`` (the span a tree of that reach reads)."""
    for a in range(rows.shape[0]):
        for p in range(jmax - reach, jmax + reach + 3):
            rows[a, p] = 0.0


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _root_step(jmax, e, root, ej, Q):
    """The state prices of step 1 of a tree of a phase, into ``Q``: its root branches ``root / 6``, ``1 -
    root / 3`` and ``root / 6`` (the first step's own variance, :mod:`~.geometry`), discounted by ``e``; returns
    ``sum_j Q(1, j) exp(-j dr dt)``."""
    c = jmax + 1
    Q[c - 1] = Q[c + 1] = e * root / 6.0
    Q[c] = e * (1.0 - root / 3.0)
    return Q[c - 1] * ej[c - 1] + Q[c] * ej[c] + Q[c + 1] * ej[c + 1]


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _forward(jmax, n, dt, phase, root, curve_t, curve_z, coef, top, bottom, Q, Qn, ea, save_at, save_rows, saved):
    """Fill ``ea[m] = exp(-alpha_m dt)`` for m < n; ``Q, Qn`` are zeroed scratch rows of length w + 2. The state
    prices ``Q(m, .)`` of the steps ``save_at`` (increasing, < n), their nodes ``|j| <= min(m, jmax)``, are
    copied to the rows of ``saved`` at ``save_rows`` (node j of row c at ``saved[save_rows[c] + j + jmax + 1]``:
    :class:`~.groups.KeptStates`). On a tree of a ``phase`` the alphas fit the curve at the steps' times and the
    first step branches with the variance ratio ``root`` (:func:`_root_step`); ``ea[0]`` is then ``exp(-alpha_0
    h)`` over the first step's length h.

    ``s`` carries ``sum_j Q(m, j) exp(-j dr dt)``, accumulated while row m is written.
    """
    w = 2 * jmax + 1
    fu, fm, fd, ej = coef[0], coef[1], coef[2], coef[3]
    Q[jmax + 1] = 1.0
    s = ej[jmax + 1]
    k = 0
    c = 0
    for m in range(n):
        while c < len(save_at) and save_at[c] == m:
            lo, hi = _span(jmax, min(m, jmax))
            row = save_rows[c]
            for p in range(lo, hi):
                saved[row + p] = Q[p]
            c += 1
        P, k = _discount_bond(step_time(m + 1, dt, phase), curve_t, curve_z, k)
        ea[m] = P / s
        if m == n - 1:
            break
        e = ea[m]
        lo, hi = _span(jmax, min(m + 1, jmax))
        if m == 0 and phase != 0:
            s = _root_step(jmax, e, root, ej, Qn)
        else:
            s = _gather(e, fu, fm, fd, Q, Qn, ej, lo, hi)
        if m >= jmax:  # the edge nodes are reached: add their own branching
            flow = e * Q[w] * ej[w]
            for target, prob in ((w, top[0]), (w - 1, top[1]), (w - 2, top[2])):
                Qn[target] += flow * prob
                s += flow * prob * ej[target]
            flow = e * Q[1] * ej[1]
            for target, prob in ((3, bottom[0]), (2, bottom[1]), (1, bottom[2])):
                Qn[target] += flow * prob
                s += flow * prob * ej[target]
        Q, Qn = Qn, Q


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _edge_values(jmax, e, coef, top, bottom, V, Vn):
    w = 2 * jmax + 1
    ej = coef[3]
    Vn[w] = e * ej[w] * (top[0] * V[w] + top[1] * V[w - 1] + top[2] * V[w - 2])
    Vn[1] = e * ej[1] * (bottom[0] * V[3] + bottom[1] * V[2] + bottom[2] * V[1])


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _event_amount(amount, t, s, dt, phase, curve_t, curve_z):
    """An amount due at ``t`` applied at step ``s``: ``A * P(0, t) / P(0, tau_s)`` (exactly A on the grid;
    :func:`~.events.step_time`)."""
    tau = step_time(s, dt, phase)
    if t == tau:
        return amount
    return amount * (_discount_bond(t, curve_t, curve_z, 0)[0] / _discount_bond(tau, curve_t, curve_z, 0)[0])


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _root_roll(jmax, e, root, V, Vn):
    """The root's value on a tree of a phase into ``Vn`` (its one node) from step 1's values ``V``: its first
    step branches ``root / 6``, ``1 - root / 3``, ``root / 6`` (:func:`_root_step`), discounted by ``e``."""
    c = jmax + 1
    Vn[c] = e * (root / 6.0 * V[c - 1] + (1.0 - root / 3.0) * V[c] + root / 6.0 * V[c + 1])


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _roll_step(jmax, i, e, coef, top, bottom, B, Bn, O, On, option_from):
    """Rolls bond ``B`` back from step i + 1 to step i into ``Bn`` with the step's ``e = exp(-alpha_i dt)``, and
    option ``O`` into ``On`` below the last exercise step (above it the option is zero and not rolled back);
    returns whether the option was rolled."""
    lo, hi = _interior(jmax, i)
    option = i < option_from
    if option:
        _stencil2(e, e, coef[0], coef[1], coef[2], B, Bn, O, On, lo, hi)
    else:
        _stencil(e, coef[0], coef[1], coef[2], B, Bn, lo, hi)
    if i >= jmax:
        if option:
            _edge_values(jmax, e, coef, top, bottom, O, On)
        _edge_values(jmax, e, coef, top, bottom, B, Bn)
    return option


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _roll_pair(jmax, i, e, f, coef, top, bottom, B, Bn, O, On, C, Cn, P, Pn, option_from):
    """:func:`_roll_step` of two bumps' values at once, bond ``B`` and option ``O`` with ``e``, ``C`` and ``P``
    with ``f``: where the bonds roll alone, one sweep over the node weights serves both. Returns whether the
    options were rolled."""
    if i < option_from:
        _roll_step(jmax, i, e, coef, top, bottom, B, Bn, O, On, option_from)
        return _roll_step(jmax, i, f, coef, top, bottom, C, Cn, P, Pn, option_from)
    lo, hi = _interior(jmax, i)
    _stencil2(e, f, coef[0], coef[1], coef[2], B, Bn, C, Cn, lo, hi)
    if i >= jmax:
        _edge_values(jmax, e, coef, top, bottom, B, Bn)
        _edge_values(jmax, f, coef, top, bottom, C, Cn)
    return False


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _net_rights(K, B, O, cap, lo, hi):
    """A date of a bond with both rights (:data:`~.events.CALL`, :data:`~.events.PUT`) for lo <= p < hi: the
    holder's net rights ``O`` become ``min(O, K - B)`` at a call (``cap``), ``max(O, K - B)`` at a put."""
    if cap:
        for p in range(lo, hi):
            O[p] = min(O[p], K - B[p])
    else:
        for p in range(lo, hi):
            O[p] = max(O[p], K - B[p])


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _apply(kind, amount, is_call, B, O, lo, hi):
    """One event at the nodes ``[lo, hi)``: the redemption and coupons add to the bond, an exercise takes the
    larger of the option and its payoff (a call or put of a bond with both rights bounds it: :func:`_net_rights`)."""
    if kind == EXERCISE:
        _exercise(is_call, amount, B, O, lo, hi)
    elif kind == CALL or kind == PUT:
        _net_rights(amount, B, O, kind == CALL, lo, hi)
    else:
        _add(B, amount, lo, hi)


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _state_value(jmax, cut, V, Q):
    """The value at the root of the node values ``V`` at step ``cut``, paid there (only discounted below it):
    ``sum_j Q(cut, j) V(cut, j)`` with the state prices ``Q``, or ``V`` at the root at step 0."""
    if cut == 0:
        return V[jmax + 1]
    lo, hi = _span(jmax, min(cut, jmax))
    total = 0.0
    for p in range(lo, hi):
        total += Q[p] * V[p]
    return total


@numba.njit(cache=True, _nrt=False)
def _cash_flows(curve_t, curve_z, e_time, e_kind, e_amount):
    """The bond's value at the root, float64: its redemption and coupons times ``P(0, t)``, which is what its
    tree gives for them (the tree reprices every discount bond exactly)."""
    total = 0.0
    for e in range(len(e_time)):
        if not is_exercise(e_kind[e]):
            total += e_amount[e] * _discount_bond(e_time[e], curve_t, curve_z, 0)[0]
    return total


@numba.njit(cache=True, fastmath=_FASTMATH, _nrt=False)
def _backward(
    jmax,
    n,
    cut,
    dt,
    phase,
    root,
    is_call,
    ea,
    coef,
    top,
    bottom,
    B,
    Bn,
    O,
    On,
    Q,
    curve_t,
    curve_z,
    e_step,
    e_time,
    e_kind,
    e_amount,
    option_from,
):
    """Roll bond ``B`` and option ``O`` (zeroed rows) back from the tree's last step down to step ``cut`` (the
    first exercise, or 0); returns their values at the root: from their values at the cut and the state prices
    ``Q`` there (:func:`_state_value`), as below the first exercise the option is only discounted, and for the
    bond its cash flows below the cut at ``P(0, t)`` (what the tree gives for them).

    Step i covers nodes ``|j| <= min(i, jmax)``; after the roll-back to step i its events are applied in
    their table order: the redemption and coupons add to the bond, an exercise takes the larger of the option
    and its payoff.
    """
    real = B.dtype.type
    ei = 0
    for i in range(n, cut - 1, -1):
        if i == 0 and phase != 0:  # the root's first step of its own (an option not rolled is zero)
            _root_roll(jmax, ea[0], root, B, Bn)
            _root_roll(jmax, ea[0], root, O, On)
            B, Bn, O, On = Bn, B, On, O
        elif i < n:
            if _roll_step(jmax, i, ea[i], coef, top, bottom, B, Bn, O, On, option_from):
                O, On = On, O
            B, Bn = Bn, B
        lo, hi = _span(jmax, min(i, jmax))
        while ei < len(e_step) and e_step[ei] == i:
            _apply(
                e_kind[ei],
                real(_event_amount(e_amount[ei], e_time[ei], i, dt, phase, curve_t, curve_z)),
                is_call,
                B,
                O,
                lo,
                hi,
            )
            ei += 1
    bond = _state_value(jmax, cut, B, Q) + _cash_flows(curve_t, curve_z, e_time[ei:], e_kind[ei:], e_amount[ei:])
    return bond, _state_value(jmax, cut, O, Q)


@numba.njit(cache=True, nogil=True)
def _price_range(
    start,
    stop,
    order,
    jmax,
    height,
    dt,
    phase,
    root,
    dr,
    M,
    is_call,
    curve_index,
    curve_offsets,
    curve_t,
    curve_z,
    e_off,
    e_step,
    e_time,
    e_kind,
    e_amount,
    option_from,
    cut,
    alpha_at,
    table,
    q_at,
    states,
    max_width,
    max_height,
    bond_out,
    option_out,
):
    """Prices rows ``order[start:stop]`` (:func:`_price_rows`; a thread's, dealt by :func:`balance`) with scratch
    rows allocated once."""
    real = table.dtype
    scratch = np.zeros((11, max_width + 2), dtype=real)  # coefficients (4), bond and option rows (6), own state prices
    own = np.zeros(max_height + 1, dtype=real)
    step, at = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)  # its cut, kept at own_state's start
    _price_rows(
        start,
        stop,
        order,
        jmax,
        height,
        dt,
        phase,
        root,
        dr,
        M,
        is_call,
        curve_index,
        curve_offsets,
        curve_t,
        curve_z,
        e_off,
        e_step,
        e_time,
        e_kind,
        e_amount,
        option_from,
        cut,
        alpha_at,
        table,
        q_at,
        states,
        scratch,
        own,
        step,
        at,
        bond_out,
        option_out,
    )


@numba.njit(cache=True, _nrt=False)
def _price_rows(
    start,
    stop,
    order,
    jmax,
    height,
    dt,
    phase,
    root,
    dr,
    M,
    is_call,
    curve_index,
    curve_offsets,
    curve_t,
    curve_z,
    e_off,
    e_step,
    e_time,
    e_kind,
    e_amount,
    option_from,
    cut,
    alpha_at,
    table,
    q_at,
    states,
    scratch,
    own,
    step,
    at,
    bond_out,
    option_out,
):
    """Prices rows ``order[start:stop]``: a row's ``exp(-alpha_m dt)`` are ``table[alpha_at[r] + m]`` (its
    group's forward pass) and its state prices at its cut ``states[q_at[r]:...]``, or with ``alpha_at[r] < 0``
    its own forward pass's (into ``own`` and the last row of ``scratch``). A row without an exercise is its
    cash flows."""
    coef, rows, own_state = scratch[0:4], scratch[4:10], scratch[10]
    for q in range(start, stop):
        r = order[q]
        jm, n = jmax[r], height[r]
        w = 2 * jm + 1
        c = curve_index[r]
        ct = curve_t[curve_offsets[c] : curve_offsets[c + 1]]
        cz = curve_z[curve_offsets[c] : curve_offsets[c + 1]]
        lo, hi = e_off[r], e_off[r + 1]
        exercised = False
        for e in range(lo, hi):
            exercised |= is_exercise(e_kind[e])
        if not exercised:
            bond_out[r] = _cash_flows(ct, cz, e_time[lo:hi], e_kind[lo:hi], e_amount[lo:hi])
            option_out[r] = 0.0
            continue
        reach = min(jm, n)
        top, bottom = _coefficients(jm, reach, dt[r], dr[r], M[r], coef)
        _clear(rows, jm, reach)
        source, first = table, alpha_at[r]
        Q = states[q_at[r] : q_at[r] + w + 2]
        if first < 0:
            step[0] = cut[r]
            _forward(
                jm,
                n,
                dt[r],
                phase[r],
                root[r],
                ct,
                cz,
                coef,
                top,
                bottom,
                rows[0],
                rows[1],
                own,
                step[: int(cut[r] > 0)],
                at,
                own_state,
            )
            source, first, Q = own, 0, own_state
        b, o = _backward(
            jm,
            n,
            cut[r],
            dt[r],
            phase[r],
            root[r],
            is_call[r],
            source[first : first + n],
            coef,
            top,
            bottom,
            rows[2],
            rows[3],
            rows[4],
            rows[5],
            Q,
            ct,
            cz,
            e_step[lo:hi],
            e_time[lo:hi],
            e_kind[lo:hi],
            e_amount[lo:hi],
            option_from[r],
        )
        bond_out[r] = b
        option_out[r] = o


@numba.njit(cache=True, nogil=True)
def _forward_range(
    start,
    stop,
    order,
    task_row,
    task_dr,
    jmax,
    height,
    dt,
    phase,
    root,
    M,
    curve_index,
    curve_offsets,
    curve_t,
    curve_z,
    max_width,
    alpha_offsets,
    ea_out,
    save_offsets,
    save_at,
    save_rows,
    q_out,
):
    """The forward pass of every tree (batch row ``task_row[k]`` with rate step ``task_dr[k]``): its
    ``exp(-alpha_m dt)`` at ``ea_out[alpha_offsets[k] + m]``, in the precision of ``ea_out``; its state prices
    at the steps ``save_at[save_offsets[k]:save_offsets[k + 1]]`` (increasing) in the rows of ``q_out`` at
    ``save_rows`` of the same positions (:class:`~.groups.KeptStates`): of the trees ``order[start:stop]`` (a
    thread's, dealt by :func:`balance`)."""
    scratch = np.zeros((6, max_width + 2), dtype=ea_out.dtype)  # coefficients (4), state prices (2)
    _forward_trees(
        start,
        stop,
        order,
        task_row,
        task_dr,
        jmax,
        height,
        dt,
        phase,
        root,
        M,
        curve_index,
        curve_offsets,
        curve_t,
        curve_z,
        alpha_offsets,
        ea_out,
        save_offsets,
        save_at,
        save_rows,
        q_out,
        scratch,
    )


@numba.njit(cache=True, _nrt=False)
def _forward_trees(
    start,
    stop,
    order,
    task_row,
    task_dr,
    jmax,
    height,
    dt,
    phase,
    root,
    M,
    curve_index,
    curve_offsets,
    curve_t,
    curve_z,
    alpha_offsets,
    ea_out,
    save_offsets,
    save_at,
    save_rows,
    q_out,
    scratch,
):
    """:func:`_forward_range` with its scratch rows."""
    coef, rows = scratch[0:4], scratch[4:6]
    for q in range(start, stop):
        k = order[q]
        r = task_row[k]
        jm, n = jmax[r], height[r]
        reach = min(jm, n)
        top, bottom = _coefficients(jm, reach, dt[r], task_dr[k], M[r], coef)
        _clear(rows, jm, reach)
        c = curve_index[r]
        ct = curve_t[curve_offsets[c] : curve_offsets[c + 1]]
        cz = curve_z[curve_offsets[c] : curve_offsets[c + 1]]
        saves = slice(save_offsets[k], save_offsets[k + 1])
        _forward(
            jm,
            n,
            dt[r],
            phase[r],
            root[r],
            ct,
            cz,
            coef,
            top,
            bottom,
            rows[0],
            rows[1],
            ea_out[alpha_offsets[k] : alpha_offsets[k] + n],
            save_at[saves],
            save_rows[saves],
            q_out,
        )


@numba.njit(cache=True)
def _greedy_owner(by_cost, cost, n_threads):
    load = np.zeros(n_threads)
    owner = np.empty(len(cost), dtype=np.int64)
    for r in by_cost:
        t = np.argmin(load)
        owner[r] = t
        load[t] += cost[r]
    return owner


BLOCKS_PER_THREAD = 64
"""Runs of consecutive rows per thread that :func:`balance` deals out, when rows are that many."""


def balance(cost: np.ndarray, n_threads: int):
    """Longest-processing-time assignment of rows to threads: ``(order, thread_offsets)`` in CSR form.

    The rows are cut into runs of consecutive rows of about equal cost (BLOCKS_PER_THREAD per thread; a row
    each when there are fewer rows); runs are taken by decreasing cost, each given to the least-loaded thread.
    A thread prices its rows in increasing position, so it reads the portfolio's arrays in order.
    """
    cost = np.asarray(cost, dtype=np.float64)
    n, blocks = len(cost), BLOCKS_PER_THREAD * n_threads
    if n > blocks:
        total = np.cumsum(cost)
        cuts = np.unique(np.searchsorted(total, total[-1] * np.arange(1, blocks) / blocks, side="right"))
        starts = np.concatenate(([0], cuts[cuts < n]))
        run_cost = np.add.reduceat(cost, starts)
    else:
        starts, run_cost = np.arange(n), cost
    owner = _greedy_owner(np.argsort(-run_cost, kind="stable"), run_cost, n_threads)
    length = np.diff(np.append(starts, n))
    runs = np.lexsort((starts, owner))  # by thread, then position: each thread's rows in increasing position
    first = np.cumsum(length[runs]) - length[runs]
    order = np.arange(n, dtype=np.int64) + np.repeat(starts[runs] - first, length[runs])
    thread_offsets = np.zeros(n_threads + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, weights=length, minlength=n_threads).astype(np.int64), out=thread_offsets[1:])
    return order, thread_offsets


TABLE_REALS = 2**24
"""About the most ``exp(-alpha dt)`` values of shared forward passes held at once (128 MiB in fp64): groups
whose leaders' heights add up to more are priced in waves."""


@dataclass
class CpuRun:
    """Prices of one CPU engine call (float64 arrays, batch order) and the node-steps it computed (full
    rectangles: :func:`~.groups.shared_node_steps`)."""

    bond: np.ndarray
    option: np.ndarray
    node_steps: float


def _waves(groups: TreeGroups, height: np.ndarray, limit: int):
    """The waves a batch is priced in: per wave, its rows (batch positions) and each row's offset in the
    wave's table of forward passes (-1: a row alone in its group, which runs its own), and the leaders whose
    forward passes fill that table. Groups of two rows or more take turns, in order, filling tables of about
    ``limit`` values (a group taller than that, one alone); rows alone are priced in the first wave."""
    shared = np.flatnonzero(groups.size >= 2)
    tallest = height[groups.leader[shared]].astype(np.int64)
    start = np.cumsum(tallest) - tallest
    wave_of = np.zeros(len(groups), dtype=np.int64)
    wave_of[shared] = start // limit
    offset = np.full(len(groups), -1, dtype=np.int64)
    offset[shared] = start - wave_of[shared] * limit
    row_wave = wave_of[groups.group]
    for k in np.unique(row_wave):
        rows = np.flatnonzero(row_wave == k)
        leaders = shared[wave_of[shared] == k]
        yield rows, offset[groups.group[rows]], groups.leader[leaders], offset[leaders]


def run_cpu(batch: Batch, share: bool = True) -> CpuRun:
    """Prices every instrument of ``batch`` in the batch's precision; with ``share`` each group of rows that
    share a tree (:mod:`~.groups`) runs one forward pass, else every row runs its own."""
    real = batch.real
    g = batch.geometry
    n = len(batch)
    bond = np.full(n, np.nan, dtype=real)
    option = np.full(n, np.nan, dtype=real)
    groups = batch_groups(batch) if share else TreeGroups.alone(n)
    if n == 0:
        return CpuRun(bond.astype(np.float64, copy=False), option.astype(np.float64, copy=False), 0.0)
    threads = numba.get_num_threads()
    events = batch.events
    cut = cut_steps(batch)
    max_width = int(g.width.max())
    for rows, row_offset, leaders, leader_offset in _waves(groups, g.height, TABLE_REALS):
        table = np.zeros(max(int((leader_offset + g.height[leaders]).max(initial=0)), 1), dtype=real)
        # the state prices of each shared row's cut, kept by its group's forward pass
        local = np.full(len(groups), -1, dtype=np.int64)
        local[groups.group[leaders]] = np.arange(len(leaders))
        shared = rows[row_offset >= 0]
        kept = kept_states(local[groups.group[shared]], cut[shared], g.jmax[leaders])
        states = np.zeros(max(kept.size, 1), dtype=real)
        q_at = np.zeros(n, dtype=np.int64)
        q_at[shared] = kept.row_at
        if len(leaders):
            order, thread_offsets = balance((g.width[leaders] * g.height[leaders]).astype(np.float64), threads)
            over_ranges(
                _forward_range,
                thread_offsets,
                order,
                leaders,
                g.dr[leaders],
                g.jmax,
                g.height,
                g.dt,
                g.phase,
                g.root,
                g.M,
                batch.curve_index,
                batch.curve_offsets,
                batch.curve_t,
                batch.curve_z,
                max_width,
                leader_offset,
                table,
                kept.offsets,
                kept.steps,
                kept.rows,
                states,
            )
        alpha_at = np.full(n, -1, dtype=np.int64)
        alpha_at[rows] = row_offset
        passes = np.where(row_offset < 0, 2.0, 1.0)
        order, thread_offsets = balance(passes * g.width[rows] * (g.height[rows] - cut[rows]), threads)
        over_ranges(
            _price_range,
            thread_offsets,
            rows[order],
            g.jmax,
            g.height,
            g.dt,
            g.phase,
            g.root,
            g.dr,
            g.M,
            batch.is_call,
            batch.curve_index,
            batch.curve_offsets,
            batch.curve_t,
            batch.curve_z,
            events.offsets,
            events.step,
            events.time,
            events.kind,
            events.amount,
            batch.option_from,
            cut,
            alpha_at,
            table,
            q_at,
            states,
            max_width,
            int(g.height[rows].max()),
            bond,
            option,
        )
    return CpuRun(
        bond.astype(np.float64, copy=False),
        option.astype(np.float64, copy=False),
        groups.shared_node_steps(g.width, g.height),
    )


def price_cpu(batch: Batch, share: bool = True):
    """Bond and option prices (float64 arrays, batch order) of every instrument of ``batch``, computed in the
    batch's precision (``share``: as for :func:`run_cpu`)."""
    run = run_cpu(batch, share)
    return run.bond, run.option
