"""GPU risk engine (:class:`GpuRisk`, see :mod:`~.sweeps`): CuPy launchers for ``kernels/risk.cu``, trees kept on
the device and rolled back under many curve bumps. The batch is uploaded and the kernels compiled as the GPU
pricing engines' are (:mod:`~.gpu`).
"""

from __future__ import annotations

import numpy as np

from ..cuda import allow_shared, require_cupy
from .batch import Batch
from .gpu import KERNEL_ARGS, _Device, _kernel, upload
from .groups import kept_states, tree_groups
from .layouts import WARP, exclusive_cumsum, outer_layout
from .sweeps import Trees, cut_steps, start_steps

RISK_THREADS = 128
RISK_ROW_BYTES = 2**31
"""Device bytes of bump rows one roll launch may take; a larger call is rolled in parts."""
RISK_BLOCK_WIDTHS = (16, 1024)
"""Trees this wide (nodes, both ends included) roll a block per (tree, bump) (``risk_roll_block``); narrower
and wider ones a thread each (``risk_roll``): a narrow tree leaves most of a block's threads idle, a wider
one's rows outgrow shared memory."""
RISK_BLOCK_NODES = 128
"""Nodes per warp of the block kernels: a block has a warp per RISK_BLOCK_NODES nodes of its widest tree (1 to
8 warps), each thread at most RISK_BLOCK_NODES / 32 nodes, whose weights it keeps in registers."""
RISK_FORWARD_ROWS = 2
"""Rows of a block's forward pass in shared memory: the state prices, double-buffered."""
RISK_ROLL_ROWS = 4
"""Rows of a block roll in shared memory: bond and option, each double-buffered."""
RISK_EVENT_WINDOW = 256
"""Events whose bumped amounts a block roll computes at once, ahead of the steps that apply them."""


def _by_blocks(width: np.ndarray) -> np.ndarray:
    """Which trees of these widths the risk kernels run a block each (RISK_BLOCK_WIDTHS)."""
    return (width >= RISK_BLOCK_WIDTHS[0]) & (width <= RISK_BLOCK_WIDTHS[1])


def _block_launches(width: np.ndarray, height: np.ndarray, chosen: np.ndarray):
    """The launches of a block kernel over trees ``chosen`` (positions into ``width`` and ``height``): per warp
    count (a warp per RISK_BLOCK_NODES nodes), ``(span, threads, positions)`` with the launch's widest tree and
    its positions, tallest trees first."""
    warps = -(-width[chosen].astype(np.int64) // RISK_BLOCK_NODES)
    for count in np.unique(warps):
        mine = chosen[warps == count]
        mine = mine[np.argsort(-height[mine], kind="stable")]
        yield int(width[mine].max()), int(count) * WARP, mine


def _launch_blocks(kernel, blocks: np.ndarray, threads: int, shared: int, arguments: tuple) -> None:
    """``kernel`` on a block per entry of ``blocks`` with ``shared`` bytes of dynamic shared memory each."""
    allow_shared(kernel, shared)
    kernel((len(blocks),), (threads,), arguments, shared_mem=shared)


def _kept_rows(top: np.ndarray, height: np.ndarray):
    """The rows bump 0 keeps for the other bumps of its task (:meth:`GpuRisk._roll_blocks`): for each (task,
    step) some bump starts from (``top`` below the task's ``height``), by task and steps decreasing, its task and
    step, and for each such (task, bump) in row-major order the position of its entry."""
    taken = top < height[:, None]
    rank = int(top.max(initial=0)) + 1
    key = np.nonzero(taken)[0] * rank + (rank - 1 - top[taken])  # by task, then steps decreasing
    keys, entry = np.unique(key, return_inverse=True)
    return keys // rank, rank - 1 - keys % rank, entry


def _risk_kernel(name: str):
    """A kernel of ``kernels/risk.cu`` (fp64; one module for all three)."""
    defines = (
        ("RISK_THREADS", RISK_THREADS),
        ("RISK_EVENT_WINDOW", RISK_EVENT_WINDOW),
        ("RISK_BLOCK_NODES", RISK_BLOCK_NODES),
    )
    return _kernel("risk.cu", np.dtype(np.float64), name, defines)


class GpuRisk:
    """The GPU risk engine (see :mod:`~.sweeps` for the interface): ``kernels/risk.cu``. Its forward passes run
    once (kept on the device with each tree's state prices at its cut step, :func:`~.sweeps.cut_steps`); each
    call of :meth:`roll` rolls its trees back under all its bumps down to their cuts. Trees RISK_BLOCK_WIDTHS
    wide run blocks: a forward pass per group of trees that share one (:mod:`~.groups`), a roll per (tree,
    bump), the threads sharing each step's nodes in shared memory (a bump that agrees with the tree's bump 0
    from some step up starts there from bump 0's rows); the others a thread each, every bump from the top, on
    two rows per (tree, bump) in global memory, in parts of at most RISK_ROW_BYTES of rows. The batch is
    uploaded once, its events' amounts adjusted under its curves. ``embedded`` (per row, default none): as for
    :class:`~.cpu_risk.CpuRisk`, a callable or puttable bond whose price alone is wanted rolls its holder's value back
    alone."""

    def __init__(self, batch: Batch, embedded: np.ndarray | None = None):
        if batch.real != np.float64:
            raise ValueError("risk measures are computed in fp64")
        self.batch = batch
        self.device = upload(batch)
        self.cut = cut_steps(batch)
        held = np.zeros(len(batch), dtype=bool) if embedded is None else np.asarray(embedded, bool)
        self.embedded = require_cupy().asarray(held.astype(np.uint8))

    def _leading(self):
        return tuple(self.device.args[name] for name, _ in KERNEL_ARGS)

    def trees(self, rows: np.ndarray, volatility: np.ndarray, dr: np.ndarray) -> Trees:
        cupy = require_cupy()
        g = self.batch.geometry
        rows = np.asarray(rows, np.int64)
        dr = np.asarray(dr, np.float64)
        width, height, cut = g.width[rows], g.height[rows], self.cut[rows]
        alone, shared = np.flatnonzero(~_by_blocks(width)), np.flatnonzero(_by_blocks(width))
        # trees a thread runs: transposed a warp at a time, first in the tables
        layout = outer_layout(width[alone], height[alone], lanes=WARP)
        slots = np.arange(len(alone))
        alpha_at = np.empty(len(rows), dtype=np.int64)
        alpha_at[alone[layout.order]] = layout.alpha_base[slots // WARP] + slots % WARP
        q_at = np.zeros(len(rows), dtype=np.int64)  # where each tree's state prices at its cut start
        q_at[alone[layout.order]] = layout.row_base[slots // WARP] + slots % WARP
        # trees blocks run: a forward pass per group of trees that share one, after them in the tables
        r = rows[shared]
        groups = tree_groups(g.take(r).with_dr(dr[shared]), self.batch.curve_index[r])
        leaders = shared[groups.leader]
        kept = kept_states(groups.group, cut[shared], g.jmax[rows[leaders]])
        runs, alpha_total = exclusive_cumsum(height[leaders].astype(np.int64))
        alpha_at[shared] = layout.alpha_elements + runs[groups.group]
        # the kernels index nodes j + jmax, the kept rows j + jmax + 1 (KeptStates): their rows start one later
        q_at[shared] = layout.row_elements + kept.row_at + 1
        keep = np.zeros((2, len(rows)), dtype=np.int64)  # per leader: its group's kept steps
        keep[:, leaders] = kept.offsets[:-1], kept.offsets[1:]
        device = _Device(cupy)
        alphas = device.empty(max(layout.alpha_elements + alpha_total, 1), np.float64)
        state = {
            "alphas": alphas,
            "alpha_at": device.put(alpha_at),
            "rows": device.put(rows),
            "dr": device.put(dr),
            "cut": device.put(cut),
            "q_at": device.put(q_at),
            "saved": device.empty(max(layout.row_elements + kept.size, 1), np.float64),
        }
        if len(alone):
            _risk_kernel("risk_forward")(
                (-(-len(alone) // RISK_THREADS),),
                (RISK_THREADS,),
                (
                    *self._leading(),
                    np.int32(len(alone)),
                    device.put(alone[layout.order]),
                    state["rows"],
                    state["dr"],
                    np.int32(WARP),
                    device.put(layout.row_base),
                    state["alpha_at"],
                    device.empty(max(layout.row_elements, 1), np.float64),
                    alphas,
                    state["cut"],
                    state["saved"],
                ),
            )
        kernel = _risk_kernel("risk_forward_block")
        keeping = (
            device.put(keep[0]),
            device.put(keep[1]),
            device.put(kept.steps),
            device.put(layout.row_elements + kept.rows + 1),
        )
        for span, threads, chosen in _block_launches(width, height, leaders):
            _launch_blocks(
                kernel,
                chosen,
                threads,
                RISK_FORWARD_ROWS * span * 8,
                (
                    *self._leading(),
                    device.put(chosen),
                    np.int32(span),
                    state["rows"],
                    state["dr"],
                    state["alpha_at"],
                    alphas,
                    *keeping,
                    state["saved"],
                ),
            )
        return Trees(rows, np.asarray(volatility, np.float64), np.asarray(dr, np.float64), state)

    def roll(self, trees: Trees, tasks: np.ndarray, grid: np.ndarray, dz: np.ndarray):
        g = self.batch.geometry
        tasks = np.asarray(tasks, np.int64)
        dz = np.ascontiguousarray(dz, np.float64)
        bond, option = np.full(dz.shape[:2], np.nan), np.full(dz.shape[:2], np.nan)
        blocks = _by_blocks(g.width[trees.rows[tasks]])
        for chosen, roll in (
            (np.flatnonzero(blocks), self._roll_blocks),
            (np.flatnonzero(~blocks), self._roll_threads),
        ):
            if len(chosen):
                bond[chosen], option[chosen] = roll(trees, tasks[chosen], grid, dz[chosen])
        return bond, option

    def _arguments(
        self, trees: Trees, device: _Device, tasks: np.ndarray, grid: np.ndarray, dz: np.ndarray, lanes: int
    ):
        """What both roll kernels read after the batch's arrays, up to their own layout's arguments (``lanes``:
        the stride of the trees' exp(-alpha dt) values, WARP for trees a thread ran forward, 1 for a block's)."""
        state = trees.state
        return {
            "tasks": device.put(tasks),
            "tree_row": state["rows"],
            "tree_dr": state["dr"],
            "alpha_at": state["alpha_at"],
            "alpha_lanes": np.int32(lanes),
            "bumps": np.int32(dz.shape[1]),
            "knots": np.int32(len(grid)),
            "grid": device.put(np.asarray(grid, np.float64)),
            "dz": device.put(dz),
        }

    def _roll_blocks(self, trees: Trees, tasks: np.ndarray, grid: np.ndarray, dz: np.ndarray):
        """``risk_roll_block``: a block per (task, bump), launched per warp count, longest trees first; each
        task's bump 0 first, keeping its rows where the other bumps take them over (:func:`~.sweeps.start_steps`:
        above a key rate's triangle, or at the cut), in parts of at most RISK_ROW_BYTES of kept rows."""
        g = self.batch.geometry
        rows = trees.rows[tasks]
        height, cut = g.height[rows].astype(np.int64), self.cut[rows]
        start = start_steps(grid, dz, g.dt[rows], height, g.phase[rows])
        top = np.where(start < height[:, None], np.maximum(start, cut[:, None]), height[:, None])
        top[:, 0] = height
        # at most a kept row pair per bump that takes one (bumps of one key rate share theirs)
        kept_bytes = (top < height[:, None]).sum(axis=1) * 2 * g.width[rows].astype(np.int64) * 8
        part_of = (np.cumsum(kept_bytes) - 1) // RISK_ROW_BYTES
        bond, option = np.full(dz.shape[:2], np.nan), np.full(dz.shape[:2], np.nan)
        for p in np.unique(part_of):
            part = np.flatnonzero(part_of == p)
            bond[part], option[part] = self._roll_part(trees, tasks[part], grid, dz[part], top[part])
        return bond, option

    def _roll_part(self, trees: Trees, tasks: np.ndarray, grid: np.ndarray, dz: np.ndarray, top: np.ndarray):
        """One part of :meth:`_roll_blocks`: bump b of task k starts at step ``top[k, b]``, from bump 0's rows
        after that step when below the tree's height."""
        cupy = require_cupy()
        g = self.batch.geometry
        rows = trees.rows[tasks]
        width, height = g.width[rows].astype(np.int64), g.height[rows].astype(np.int64)
        bumps = dz.shape[1]
        kept_task, kept_step, entry = _kept_rows(top, height)
        kept_at, kept_total = exclusive_cumsum(2 * width[kept_task])
        save_offsets = np.searchsorted(kept_task, np.arange(len(tasks) + 1))
        item_from = np.full(top.shape, -1, dtype=np.int64)
        item_from[top < height[:, None]] = kept_at[entry]
        device = _Device(cupy)
        common = self._arguments(trees, device, tasks, grid, dz, 1)
        out_bond, out_option = device.poisoned(len(tasks) * bumps), device.poisoned(len(tasks) * bumps)
        snapshots = device.empty(max(int(kept_total), 1), np.float64)
        keeping = (
            device.put(top.astype(np.int32)),
            device.put(item_from),
            device.put(save_offsets),
            device.put(kept_step.astype(np.int32)),
            device.put(kept_at),
            snapshots,
        )
        kernel = _risk_kernel("risk_roll_block")
        state = trees.state
        for first in (True, False):  # bump 0 of every task, then the bumps that take its rows
            for span, threads, mine in _block_launches(width, g.height[rows], np.arange(len(tasks))):
                items = (mine[:, None] * bumps + (np.arange(1) if first else np.arange(1, bumps))).ravel()
                if not len(items):
                    continue
                _launch_blocks(
                    kernel,
                    items,
                    threads,
                    (RISK_ROLL_ROWS * span + threads + RISK_EVENT_WINDOW) * 8,
                    (
                        *self._leading(),
                        self.device.args["event_time"],
                        device.put(items),
                        np.int32(span),
                        common["tasks"],
                        common["tree_row"],
                        common["tree_dr"],
                        common["alpha_at"],
                        common["alpha_lanes"],
                        common["bumps"],
                        common["knots"],
                        common["grid"],
                        common["dz"],
                        state["alphas"],
                        out_bond,
                        out_option,
                        state["cut"],
                        state["q_at"],
                        np.int32(1),
                        state["saved"],
                        self.embedded,
                        *keeping,
                    ),
                )
        return cupy.asnumpy(out_bond).reshape(-1, bumps), cupy.asnumpy(out_option).reshape(-1, bumps)

    def _roll_threads(self, trees: Trees, tasks: np.ndarray, grid: np.ndarray, dz: np.ndarray):
        """``risk_roll``: a thread per (task, bump), in parts of at most RISK_ROW_BYTES of rows."""
        cupy = require_cupy()
        g = self.batch.geometry
        bumps = dz.shape[1]
        bond, option = np.full(dz.shape[:2], np.nan), np.full(dz.shape[:2], np.nan)
        rows = trees.rows[tasks]
        part_of = (np.cumsum(2 * bumps * g.width[rows].astype(np.int64) * 8) - 1) // RISK_ROW_BYTES
        kernel = _risk_kernel("risk_roll")
        state = trees.state
        for p in np.unique(part_of):
            part = np.flatnonzero(part_of == p)
            items = len(part) * bumps  # item k * bumps + b: task part[k] under bump b
            device = _Device(cupy)
            common = self._arguments(trees, device, tasks[part], grid, dz[part], WARP)
            layout = outer_layout(
                np.repeat(g.width[rows[part]], bumps), np.repeat(g.height[rows[part]], bumps), lanes=WARP
            )
            out_bond, out_option = device.poisoned(items), device.poisoned(items)
            kernel(
                (-(-items // RISK_THREADS),),
                (RISK_THREADS,),
                (
                    *self._leading(),
                    self.device.args["event_time"],
                    np.int32(items),
                    device.put(layout.order),
                    common["tasks"],
                    common["tree_row"],
                    common["tree_dr"],
                    common["alpha_at"],
                    common["alpha_lanes"],
                    common["bumps"],
                    common["knots"],
                    common["grid"],
                    common["dz"],
                    np.int32(WARP),
                    device.put(layout.row_base),
                    device.put(layout.pitch),
                    device.empty(max(layout.row_elements, 1), np.float64),
                    state["alphas"],
                    out_bond,
                    out_option,
                    state["cut"],
                    state["q_at"],
                    np.int32(WARP),
                    state["saved"],
                    self.embedded,
                ),
            )
            bond[part] = cupy.asnumpy(out_bond).reshape(len(part), bumps)
            option[part] = cupy.asnumpy(out_option).reshape(len(part), bumps)
        return bond, option
