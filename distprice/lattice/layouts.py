"""Host layouts of the GPU kernels (the papers' names), without CuPy: the inspector predicts from them and
the launchers of :mod:`~.gpu` lay portfolios out with them.

- outer: one instrument per thread, instruments sorted by decreasing width, arrays padded per warp and
  transposed (V4); ``lanes`` and ``sort`` select the plain variants (V1: no interleave, V2: global
  padding) that the benchmarks compare against.
- flat: instruments sorted by decreasing height, packed into bins whose summed (padded) widths fit the
  block's ``nodes * threads`` nodes; one block per bin, ``nodes`` consecutive nodes per thread (FLAT_NODES,
  or FLAT_MAX_NODES for the trees too wide for that: :func:`flat_nodes`). Trees wider than FLAT_MAX_WIDTH
  take the wide kernel: one block per tree, rows in global memory.

A flat tree's forward pass sums its nodes a thread at a time, then over its lanes by a warp scan, then over
its warps: the grouping follows where the tree lies among the block's warps. A layout ``aligned`` for forward
passes puts each tree of at most 32 lanes within one warp and each wider one where the warps cut it at its
own places (:func:`_aligned_lane`), so that its sums, and so its prices, are the same bits in any batch
(:func:`flat_layout`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

WARP = 32
FLAT_THREADS = (256, 512, 1024)
"""Block sizes the flat engine chooses from (and multiples of a uniform width: see choose_flat_shape)."""
FLAT_NODES = 2
"""Nodes per thread of the flat kernel, where the widest tree allows (measured: benchmarks/RESULTS.md)."""
FLAT_MAX_NODES = 4
FLAT_WINDOW = 16
"""Open bins a tree may join when packing (first fit over the last ones): a bin's heights stay close."""
FLAT_MAX_WIDTH = FLAT_MAX_NODES * FLAT_THREADS[-1]
"""Wider trees take the wide kernel: four rows of them no longer fit a block's shared memory in fp64."""


def flat_nodes(width: np.ndarray) -> np.ndarray:
    """Nodes per thread of each flat tree: FLAT_NODES where a block holds it so, else FLAT_MAX_NODES. A tree's
    own, not its batch's: a batch's trees of each count are launched apart (their sums group differently)."""
    return np.where(np.asarray(width) > FLAT_NODES * FLAT_THREADS[-1], FLAT_MAX_NODES, FLAT_NODES)


# ---- outer ----


@dataclass(frozen=True)
class OuterLayout:
    """Instruments (``order``: kernel position -> batch row) grouped ``lanes`` at a time, padded per group."""

    order: np.ndarray
    lanes: int
    pitch: np.ndarray
    tallest: np.ndarray
    row_base: np.ndarray
    alpha_base: np.ndarray
    row_elements: int
    alpha_elements: int


def exclusive_cumsum(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Start of each item when laid out one after the other, and the total."""
    out = np.zeros(len(values), dtype=np.int64)
    np.cumsum(values[:-1], out=out[1:])
    return out, int(values.sum())


def outer_layout(width: np.ndarray, height: np.ndarray, lanes: int = WARP, sort: bool = True) -> OuterLayout:
    """Group, pad and transpose for the outer kernel: ``lanes`` 32 is warp padding (V4), ``len`` global (V2), 1 none
    (V1).

    With ``sort`` the instruments are taken by decreasing width (then height), so a warp's trees are alike.
    """
    n = len(width)
    order = np.lexsort((-height, -width)) if sort else np.arange(n)
    groups = -(-n // lanes)
    padded = np.zeros(groups * lanes, dtype=np.int64)
    padded[:n] = width[order]
    pitch = padded.reshape(groups, lanes).max(axis=1)
    padded[:n] = height[order]
    tallest = padded.reshape(groups, lanes).max(axis=1)
    row_base, row_elements = exclusive_cumsum(2 * pitch * lanes)
    alpha_base, alpha_elements = exclusive_cumsum(tallest * lanes)
    return OuterLayout(
        order.astype(np.int64),
        lanes,
        pitch.astype(np.int32),
        tallest,
        row_base,
        alpha_base,
        row_elements,
        alpha_elements,
    )


# ---- flat ----


@numba.njit(cache=True)
def _first_fit(widths, capacity, window):
    """Bin of each item, placed in order into the first of the last ``window`` open bins it fits."""
    n = len(widths)
    bin_of = np.empty(n, dtype=np.int64)
    free = np.empty(n, dtype=np.int64)
    bins = 0
    for i in range(n):
        w = widths[i]
        placed = -1
        for b in range(max(0, bins - window), bins):
            if free[b] >= w:
                placed = b
                break
        if placed < 0:
            placed = bins
            free[bins] = capacity
            bins += 1
        free[placed] -= w
        bin_of[i] = placed
    return bin_of


@numba.njit(cache=True)
def _aligned_lane(free, b, w):
    """The first lane of an item of ``w`` lanes in bin ``b``, whose warps have ``free[b, k]`` lanes free at their
    end, or -1 where it does not fit; ``free`` is updated. An item of at most a warp goes into the first warp with
    room for it. A wider one of ``r = w % 32`` lanes past its whole warps starts on a warp where ``r`` is at most
    16 (its last warp's rest stays open), else ends on one: its first ``r`` lanes at the end of a warp with that
    room, its whole warps after. Either way where its warps cut it is its own, whatever the bin."""
    warps = free.shape[1]
    if w <= 32:
        for k in range(warps):
            if free[b, k] >= w:
                free[b, k] -= w
                return 32 * k + 32 - (free[b, k] + w)
        return -1
    r, whole = w % 32, w // 32
    need = whole + (r > 0) if r <= 16 else whole  # empty warps in a row
    run = 0
    for j in range(warps):
        run = run + 1 if free[b, j] == 32 else 0
        if run < need:
            continue
        if r <= 16:  # from warp j - need + 1, its last warp's rest open
            first = j - need + 1
            for k in range(first, j):
                free[b, k] = 0
            free[b, j] = 32 * need - w
            return 32 * first
        k = j - whole  # its first r lanes at the end of warp k, its whole warps after
        if k >= 0 and free[b, k] >= r:
            for m in range(k, j + 1):
                free[b, m] = 0
            return 32 * k + 32 - r
    return -1


@numba.njit(cache=True)
def _first_fit_aligned(lanes, threads, window):
    """Bin and first lane of each item (a tree's lanes), placed in order into the first of the last ``window``
    open bins it fits (:func:`_aligned_lane`), each bin's warps filled from their first lane."""
    n = len(lanes)
    bin_of = np.empty(n, dtype=np.int64)
    start = np.empty(n, dtype=np.int64)
    warps = threads // 32
    free = np.zeros((window, warps), dtype=np.int64)  # lanes free at the end of each warp of the open bins
    # each open bin's most free lanes in a warp and its empty warps: a bin without the room is passed over
    most = np.zeros(window, dtype=np.int64)
    empty = np.zeros(window, dtype=np.int64)
    bins = 0
    for i in range(n):
        w = lanes[i]
        least = min(w, 32) if w <= 32 or w % 32 <= 16 else w % 32  # the room one warp must have
        empties = 0 if w <= 32 else w // 32 + (0 < w % 32 <= 16)  # and the empty warps
        placed, at = -1, -1
        for b in range(max(0, bins - window), bins):
            if most[b % window] >= least and empty[b % window] >= empties:
                at = _aligned_lane(free, b % window, w)
                if at >= 0:
                    placed = b
                    break
        if placed < 0:
            placed = bins
            free[bins % window, :] = 32
            at = _aligned_lane(free, bins % window, w)
            bins += 1
        b = placed % window
        most[b], empty[b] = 0, 0
        for k in range(warps):
            most[b] = max(most[b], free[b, k])
            empty[b] += free[b, k] == 32
        bin_of[i] = placed
        start[i] = at
    return bin_of, start


@dataclass(frozen=True)
class FlatLayout:
    """Bins of instruments for the flat kernel: bin b holds kernel positions ``bin_first[b] .. bin_first[b+1]``;
    each tree takes its width rounded up to ``nodes`` nodes, starting at ``node_offset`` within its bin."""

    order: np.ndarray
    nodes: int
    threads: int
    bin_first: np.ndarray
    node_offset: np.ndarray
    bin_height: np.ndarray
    alpha_base: np.ndarray
    alpha_elements: int

    @property
    def capacity(self) -> int:
        return self.nodes * self.threads

    @property
    def bins(self) -> int:
        return len(self.bin_height)

    def thread_steps(self) -> int:
        """Node-steps the kernel runs, idle nodes and padded loop counts included (forward + backward)."""
        return int(2 * self.capacity * self.bin_height.astype(np.int64).sum())


def padded_width(width: np.ndarray, nodes: int) -> np.ndarray:
    return -(-width // nodes) * nodes


def _by_height(width: np.ndarray, height: np.ndarray, nodes: int):
    """Positions by decreasing height (then width), the order trees are packed in, and their padded widths."""
    by_height = np.lexsort((-width, -height))
    return by_height, padded_width(width.astype(np.int64), nodes)[by_height]


def _pack(padded: np.ndarray, nodes: int, threads: int, window: int, aligned: bool):
    """The bin of each tree of these padded widths, in packing order, and where ``aligned`` its first lane in
    its bin (else None)."""
    if aligned:
        return _first_fit_aligned(padded // nodes, threads, window)
    return _first_fit(padded, nodes * threads, window), None


def _thread_steps(
    padded: np.ndarray, height: np.ndarray, nodes: int, threads: int, window: int = FLAT_WINDOW, aligned: bool = False
) -> int:
    """:meth:`FlatLayout.thread_steps` of trees already in packing order, without laying the bins out: a
    bin is as tall as the tree that opened it (trees come tallest first)."""
    bin_of, _ = _pack(padded, nodes, threads, window, aligned)
    opened = np.ones(len(bin_of), dtype=bool)
    opened[1:] = bin_of[1:] > np.maximum.accumulate(bin_of)[:-1]
    return int(2 * nodes * threads * height[opened].astype(np.int64).sum())


def flat_thread_steps(
    width: np.ndarray,
    height: np.ndarray,
    threads: int,
    nodes: int = FLAT_NODES,
    window: int = FLAT_WINDOW,
    aligned: bool = False,
) -> int:
    """``flat_layout(width, height, threads, nodes, window, aligned).thread_steps()``, cheaper (the bins are not
    laid out)."""
    by_height, padded = _by_height(width, height, nodes)
    return _thread_steps(padded, height[by_height], nodes, threads, window, aligned)


def flat_layout(
    width: np.ndarray,
    height: np.ndarray,
    threads: int,
    nodes: int = FLAT_NODES,
    window: int = FLAT_WINDOW,
    aligned: bool = False,
) -> FlatLayout:
    """Sort by decreasing height (then width), pack into bins of ``nodes * threads`` nodes (first fit over the
    last ``window`` open bins, so a bin's heights stay close), and lay out the bins' alphas. ``aligned``: each
    tree's lanes within one warp, or cut by the warps at its own places (see the module's docstring), for
    launches that run forward passes; the lanes skipped idle as padding does."""
    capacity = nodes * threads
    by_height, sorted_padded = _by_height(width, height, nodes)
    if len(width) and sorted_padded.max() > capacity:
        raise ValueError(f"a tree of width {int(width.max())} does not fit a bin of {capacity} nodes")
    bin_of, lane = _pack(sorted_padded, nodes, threads, window, aligned)
    # a bin's trees by their first node, as the kernel looks them up
    grouped = np.lexsort((lane, bin_of)) if aligned else np.argsort(bin_of, kind="stable")
    order = by_height[grouped]
    bin_of = bin_of[grouped]
    bins = int(bin_of[-1]) + 1 if len(bin_of) else 0
    bin_first = np.searchsorted(bin_of, np.arange(bins + 1)).astype(np.int32)
    if aligned:
        node_offset = (lane[grouped] * nodes).astype(np.int32)
    else:
        starts, _ = exclusive_cumsum(sorted_padded[grouped])
        node_offset = (starts - starts[bin_first[:-1]][bin_of]).astype(np.int32)
    bin_height = np.maximum.reduceat(height[order], bin_first[:-1]) if bins else np.zeros(0, np.int64)
    alpha_base, alpha_elements = exclusive_cumsum(bin_height.astype(np.int64) * np.diff(bin_first))
    return FlatLayout(
        order.astype(np.int64),
        nodes,
        threads,
        bin_first,
        node_offset,
        bin_height.astype(np.int32),
        alpha_base,
        alpha_elements,
    )


def block_cost_factor(threads: int) -> float:
    """Relative cost of one node-step in blocks of ``threads`` threads (1 at 256 or fewer).

    Smaller blocks run faster per node-step: more of them share a multiprocessor, so one block's barrier
    waits overlap another's work. Measured on an H100 (benchmarks/RESULTS.md): per node-step run, 512
    threads cost 1.07-1.12x and 1024 threads 1.19-1.23x what 256 threads cost, on R1 and S1 alike.
    """
    return 1.0 + 0.22 * max(threads - 256, 0) / 768


FLAT_SHAPE_SAMPLE = 4096
"""Rows packed per candidate shape in :func:`choose_flat_shape` (evenly spaced over the portfolio)."""


def shape_sample(width: np.ndarray, size: int) -> np.ndarray:
    """Positions of about ``size`` trees evenly spaced over the portfolio, always with the widest (it decides
    which block shapes fit); every position when there are no more than ``size``."""
    n = len(width)
    if n <= size:
        return np.arange(n)
    sample = np.linspace(0, n - 1, size).astype(np.int64)  # increasing: the step is at least 1
    widest = int(np.argmax(width))
    at = int(np.searchsorted(sample, widest))
    return sample if at < size and sample[at] == widest else np.insert(sample, at, widest)


def choose_flat_shape(
    width: np.ndarray, height: np.ndarray, nodes: int | None = None, aligned: bool = False
) -> tuple[int, int]:
    """``(nodes, threads)`` of the flat blocks: the lowest predicted cost, i.e. node-steps run (idle nodes and
    padded loop counts included) times :func:`block_cost_factor`, judged on a sample of FLAT_SHAPE_SAMPLE rows
    (packing every row once per candidate would cost more host time than most kernels take), packed
    ``aligned`` or not (:func:`flat_layout`).

    ``nodes`` is the widest tree's :func:`flat_nodes` unless given. Thread counts: FLAT_THREADS and, for
    portfolios of one or a few widths, 1 to 4 of the widest tree in whole warps (U1's width 259, 260
    padded, packs two to a block of 288 threads with 10% of the nodes idle, but one to 256 threads).
    """
    widest = int(width.max())
    if nodes is None:
        nodes = int(flat_nodes(widest))
    per_thread = -(-int(padded_width(np.array([widest]), nodes)[0]) // nodes)
    multiples = {-(-m * per_thread // WARP) * WARP for m in range(1, 5)}
    fits = sorted(c for c in {*FLAT_THREADS, *multiples} if per_thread <= c <= FLAT_THREADS[-1])
    if not fits:
        raise ValueError(f"a tree of width {widest} does not fit a flat block of {nodes} nodes per thread")
    sample = shape_sample(width, FLAT_SHAPE_SAMPLE)
    by_height, padded = _by_height(width[sample], height[sample], nodes)
    tallest_first = height[sample][by_height]
    threads = min(
        fits,
        key=lambda c: _thread_steps(padded, tallest_first, nodes, c, aligned=aligned) * block_cost_factor(c),
    )
    return nodes, threads


def flat_shared_bytes(layout: FlatLayout, real) -> int:
    """Dynamic shared memory of a flat block in precision ``real`` (mirrors the carve-up in flat.cu)."""
    itemsize = np.dtype(real).itemsize
    return (4 * (layout.capacity + 4) + 64) * itemsize + (layout.capacity // 3 + 2) * 4
