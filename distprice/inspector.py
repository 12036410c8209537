"""The inspector: a portfolio's shape, and the plan that prices it fastest on this machine.

A plan is a list of parts, each a set of rows, the engine that prices them and a predicted time. The
predictions come from a :class:`CostModel` whose few parameters are fitted per device by
``distprice tune`` (:mod:`distprice.tuning`); each engine's cost is a throughput term and a tail
(the longest single piece of work, which bounds the time when there is too little work to fill the
device):

- ``gpu-flat``: node-steps run (idle nodes and padded loop counts included, times the measured block-size
  factor) x ``flat_node_step``, or the tallest bin's 2 x height block-steps x ``flat_block_step``; trees
  wider than a flat block take one block each (``wide_node_step`` per node-step of a block). The share of
  idle nodes comes from packing a sample of the rows, not all of them, so that planning stays cheap.
- ``gpu-outer``: warp-padded node-steps (each warp runs to its widest and tallest tree) x
  ``outer_node_step``, or ``outer_cached_node_step`` for warps narrow enough that the rows of all resident
  threads fit in the L2 cache; the tail is the heaviest warp's node-steps x ``outer_thread_node_step``.
- ``cpu``: node-steps x ``cpu_node_step`` + tree steps (2 x height) x ``cpu_step`` + rows x ``cpu_row``.
- Every plan lays out the portfolio's coupons and exercises first: ``pack_row`` per row and ``pack_step``
  per tree step (a row's coupon and exercise dates grow with its maturity, hence with its height).
- Each GPU launch adds ``gpu_launch``, each GPU part its host layout (``flat_host`` to choose a block shape
  on a sample plus ``flat_host_row`` per row to pack the bins; ``outer_host_row`` per row: a sort), and a
  plan with any GPU part the copy of the portfolio to the device once (``gpu_upload_row`` per row).

A GPU part may be priced in waves, pipelined: host threads lay out the next waves while the GPU prices
wave k. With host work H and kernel time K per wave and k waves, a part takes about
H + (k - 1) max(H / s, K) + K, where s is the speedup of laying out waves on several threads at once
(``pack_parallel`` with ``PACK_THREADS`` threads, less with fewer waves), plus the copies to the device,
which wait for the kernel before them, and ``gpu_wave`` of fixed host work per wave (a pack and a launch
of a small table). The plan picks k from 1 to 8. Where several processes price on one GPU at once (the worker
processes of a ``local-cuda`` cluster), the others' kernels keep the GPU busy while one lays out its rows,
and waves would only cut its kernels smaller: fewer rows to share each tree, one more tail a launch (R1 on an
H200: 10⁶ rows in 64 launches take 0.87 s of kernels, in 16 launches 0.74 s). A GPU part is then one wave,
launched in turns with the other processes (:attr:`Part.turns`).

Candidate plans: every engine alone and, with a GPU, the narrowest trees on ``gpu-outer`` with the rest on
``gpu-flat`` at a few width thresholds (parts run one after the other). The cheapest plan wins. Plans with
``gpu-outer`` are not even predicted when its best node-step (rows in the L2 cache) costs twice flat's or
more: it cannot win then, and predicting costs host time (a sort).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields

import numba
import numpy as np
import pandas as pd

from .lattice.batch import PACK_THREADS
from .lattice.geometry import node_steps
from .lattice.groups import instrument_groups, shared_node_steps
from .lattice.instruments import Prepared
from .lattice.layouts import (
    FLAT_MAX_WIDTH,
    WARP,
    block_cost_factor,
    choose_flat_shape,
    flat_nodes,
    flat_thread_steps,
    shape_sample,
)

INVALID_RULES_SHOWN = 5
"""Rules of the invalid rows that ``distprice inspect`` names, the most broken first."""
FLAT_SAMPLE = 2048
"""Rows packed to estimate the flat kernel's share of idle nodes."""
OUTER_THREADS_PER_SM = 448
"""Outer threads resident on a multiprocessor (146 registers each): their rows are the working set."""


@dataclass(frozen=True)
class CostModel:
    """Seconds per unit of work on one device and precision (see the module docstring)."""

    device: str
    precision: str = "fp64"
    flat_node_step: float = 3.1e-12
    flat_block_step: float = 6.3e-7
    wide_node_step: float = 5.5e-10
    outer_node_step: float = 1.2e-11
    outer_cached_node_step: float = 1.2e-11
    outer_thread_node_step: float = 1.3e-7
    gpu_launch: float = 2e-5
    gpu_wave: float = 2e-3
    pack_row: float = 4e-6
    pack_step: float = 0.0
    pack_parallel: float = 1.0
    gpu_upload_row: float = 4e-7
    flat_host: float = 3e-3
    flat_host_row: float = 2e-7
    outer_host_row: float = 2e-7
    cpu_node_step: float = 7.7e-11
    cpu_step: float = 1e-8
    cpu_row: float = 1e-7
    multiprocessors: int = 132
    l2_bytes: int = 50 * 2**20
    source: str = "default"
    """Where the figures come from: 'default' (shipped) or 'tuned <date>'."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> CostModel:
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    # ---- predictions, seconds ----

    def flat(self, width: np.ndarray, height: np.ndarray) -> tuple[float, dict]:
        """``gpu-flat`` on these trees: flat blocks for trees up to FLAT_MAX_WIDTH (a launch for each count of
        nodes per thread), a block each beyond. ``nodes``, ``threads`` and ``busy_share`` in the detail are
        those of the flat launch of the most trees."""
        wide = width > FLAT_MAX_WIDTH
        seconds, detail = self.flat_host + len(width) * self.flat_host_row, {}
        per_thread = flat_nodes(width[~wide])
        for k in sorted(np.unique(per_thread), key=lambda k: -np.count_nonzero(per_thread == k)):
            w, h = width[~wide][per_thread == k], height[~wide][per_thread == k]
            sample = shape_sample(w, FLAT_SAMPLE)
            w_sample, h_sample = w[sample], h[sample]
            nodes, threads = choose_flat_shape(w_sample, h_sample, int(k))
            busy_share = node_steps(w_sample, h_sample).sum() / flat_thread_steps(w_sample, h_sample, threads, nodes)
            busy = node_steps(w, h).sum() / busy_share * block_cost_factor(threads) * self.flat_node_step
            seconds += self.gpu_launch + max(busy, 2 * int(h.max()) * self.flat_block_step)
            if "nodes" not in detail:
                detail.update(nodes=nodes, threads=threads, busy_share=round(float(busy_share), 3))
        if wide.any():
            work = node_steps(width[wide], height[wide])
            seconds += self.gpu_launch + max(work.sum() / self.multiprocessors, work.max()) * self.wide_node_step
            detail.update(wide_rows=int(wide.sum()))
        return seconds, detail

    def outer(self, width: np.ndarray, height: np.ndarray, itemsize: int = 8) -> tuple[float, dict]:
        """``gpu-outer`` on these trees, given in the kernel's order (decreasing width, then height)."""
        groups = -(-len(width) // WARP)
        padded = np.zeros((2, groups * WARP), dtype=np.int64)
        padded[0, : len(width)], padded[1, : len(width)] = width, height
        pitch, tallest = padded[0].reshape(groups, WARP)[:, 0], padded[1].reshape(groups, WARP).max(axis=1)
        warp_steps = node_steps(pitch, tallest)
        cached = 2 * pitch * itemsize * OUTER_THREADS_PER_SM * self.multiprocessors <= self.l2_bytes
        busy = WARP * (
            warp_steps[cached].sum() * self.outer_cached_node_step + warp_steps[~cached].sum() * self.outer_node_step
        )
        seconds = (
            len(width) * self.outer_host_row
            + self.gpu_launch
            + max(busy, warp_steps.max() * self.outer_thread_node_step)
        )
        return seconds, {"cached_share": round(float(cached.mean()), 3)}

    def pack(self, height: np.ndarray) -> float:
        """The host layout of trees of these heights (coupon and exercise tables)."""
        return float(self.pack_rows(height).sum())

    def pack_rows(self, height: np.ndarray) -> np.ndarray:
        """The host layout of each tree of these heights."""
        return np.asarray(height, dtype=np.float64) * self.pack_step + self.pack_row

    def cpu(self, width: np.ndarray, height: np.ndarray) -> tuple[float, dict]:
        """The CPU engine on these trees."""
        return float(self.cpu_rows(width, height).sum()), {}

    def cpu_rows(self, width: np.ndarray, height: np.ndarray) -> np.ndarray:
        """The CPU engine's time of each tree: its share of the engine's seconds with every thread busy."""
        return (
            node_steps(width, height) * self.cpu_node_step
            + 2.0 * np.asarray(height, dtype=np.float64) * self.cpu_step
            + self.cpu_row
        )


@dataclass
class Part:
    """Rows (positions in the portfolio) that one engine prices, with its predicted time."""

    engine: str
    rows: np.ndarray
    seconds: float
    reason: str
    detail: dict = field(default_factory=dict)
    """Figures behind the prediction (nodes per thread, share of busy nodes, ...)."""
    waves: int = 1
    """GPU parts: how many pipelined waves (see the module docstring)."""
    turns: bool = False
    """GPU parts: launches taken in turn with the other processes on the GPU (:func:`~distprice.cuda.gpu_turn`)."""


@dataclass
class Plan:
    parts: list[Part]
    seconds: float
    """Predicted, ``pack`` included: the parts one after the other, GPU parts pipelined in waves."""
    model: CostModel
    considered: dict[str, float] = field(default_factory=dict)
    """Predicted seconds of every candidate plan, by name."""
    chosen: str | None = None
    """The name of the candidate the plan is (None: a plan the inspector did not choose)."""

    def engine_of_rows(self, n: int) -> pd.Categorical:
        """The engine of each of the ``n`` rows the plan prices (codes of the parts' engines: no string per
        row)."""
        names = list(dict.fromkeys(part.engine for part in self.parts))
        codes = np.full(n, -1, dtype=np.int64)
        for part in self.parts:
            codes[part.rows] = names.index(part.engine)
        return pd.Categorical.from_codes(codes, categories=names)


def describe(width: np.ndarray, height: np.ndarray) -> dict:
    """Shape statistics: count, node-steps, width and height quantiles and skewness (Fisher)."""
    width, height = np.asarray(width, dtype=np.float64), np.asarray(height, dtype=np.float64)

    def spread(values):
        if len(values) == 0:
            return {}
        q = np.quantile(values, [0.0, 0.1, 0.5, 0.9, 0.99, 1.0])
        sd = values.std()
        skew = float(((values - values.mean()) ** 3).mean() / sd**3) if sd > 0 else 0.0
        return {
            "min": q[0],
            "p10": q[1],
            "p50": q[2],
            "p90": q[3],
            "p99": q[4],
            "max": q[5],
            "mean": float(values.mean()),
            "skewness": skew,
        }

    return {
        "rows": int(len(width)),
        "node_steps": float(node_steps(width, height).sum()),
        "width": spread(width),
        "height": spread(height),
    }


SPLIT_NAME = "gpu-outer (width <= {}) + gpu-flat"
"""The name of a candidate that prices trees up to a width on gpu-outer, the wider ones on gpu-flat."""
SPLIT = re.compile(re.escape(SPLIT_NAME).replace(r"\{\}", r"(\d+)"))


def plan(
    width: np.ndarray, height: np.ndarray, model: CostModel, gpu: bool, gpu_processes: int = 1, only: str | None = None
) -> Plan:
    """The cheapest plan for trees of these widths and heights (see the module docstring), for a process that
    shares its GPU with ``gpu_processes - 1`` others pricing at once; ``only``: the one candidate to make (a
    name in :attr:`Plan.considered`, e.g. a whole job's :attr:`Plan.chosen` for one of its chunks)."""
    width, height = np.asarray(width, dtype=np.int64), np.asarray(height, dtype=np.int64)
    rows = np.arange(len(width))
    if len(rows) == 0:
        return Plan([], 0.0, model)
    split = SPLIT.fullmatch(only or "")
    if only is None:  # every candidate; the outer kernel's where it may pay, split at the widths' quantiles
        wanted = (
            {"cpu", "gpu-flat", "gpu-outer"}
            if model.outer_cached_node_step < 2 * model.flat_node_step
            else {"cpu", "gpu-flat"}
        )
    else:
        wanted = {only}
    candidates: dict[str, list[Part]] = {}
    if "cpu" in wanted:
        cpu_seconds, _ = model.cpu(width, height)
        candidates["cpu"] = [Part("cpu", rows, cpu_seconds, "no GPU" if not gpu else "the CPU alone")]
    if gpu and "gpu-flat" in wanted:
        flat_seconds, flat_detail = model.flat(width, height)
        candidates["gpu-flat"] = [Part("gpu-flat", rows, flat_seconds, "bins of trees in shared memory", flat_detail)]
    if gpu and ("gpu-outer" in wanted or split):
        by_width = np.argsort(-(width * (int(height.max()) + 1) + height), kind="stable")  # the outer kernel's order
        if "gpu-outer" in wanted:
            outer_seconds, outer_detail = model.outer(width[by_width], height[by_width])
            candidates["gpu-outer"] = [Part("gpu-outer", rows, outer_seconds, "one tree per thread", outer_detail)]
        if split:
            thresholds = [int(split[1])]
        elif only is None:
            thresholds = np.unique(np.quantile(width, (0.25, 0.5, 0.75, 0.9)).astype(np.int64))
        else:
            thresholds = []
        for threshold in thresholds:
            narrow = width[by_width] <= threshold  # a tail of by_width
            if only is None and (narrow.all() or not narrow.any()):
                continue
            on_outer, on_flat = by_width[narrow], by_width[~narrow]
            parts = []
            if len(on_outer):
                o, od = model.outer(width[on_outer], height[on_outer])
                parts.append(
                    Part("gpu-outer", np.sort(on_outer), o, f"trees up to {threshold} wide, one per thread", od)
                )
            if len(on_flat):
                f, fd = model.flat(width[on_flat], height[on_flat])
                parts.append(
                    Part("gpu-flat", np.sort(on_flat), f, f"trees wider than {threshold}, in shared-memory bins", fd)
                )
            candidates[SPLIT_NAME.format(threshold)] = parts
    if not candidates:
        raise ValueError(f"no plan {only!r} {'with' if gpu else 'without'} a GPU")

    def total(parts):
        """Seconds of the parts one after the other, each GPU part pipelined with its layout and copies."""
        seconds = 0.0
        for part in parts:
            host = model.pack(height[part.rows])
            if part.engine == "cpu":
                seconds += host + part.seconds
                continue
            copies = len(part.rows) * model.gpu_upload_row
            part.turns = gpu_processes > 1
            best = None
            for waves in (1, 2, 3, 4, 6, 8) if gpu_processes == 1 else (1,):
                h, k = host / waves, part.seconds / waves
                threads = min(waves, PACK_THREADS)
                speedup = 1.0 + (model.pack_parallel - 1.0) * (threads - 1) / max(PACK_THREADS - 1, 1)
                pipelined = h + (waves - 1) * max(h / speedup, k) + k + copies + waves * model.gpu_wave
                if best is None or pipelined < best[0]:
                    best = (pipelined, waves)
            seconds += best[0]
            part.waves = best[1]
        return seconds

    considered = {name: total(parts) for name, parts in candidates.items()}
    best = min(considered, key=considered.get)
    return Plan(candidates[best], considered[best], model, considered, best)


@dataclass(frozen=True)
class Inspection:
    """A portfolio as the inspector sees it: the trees of its valid rows (``width``, ``height``), the ``plan``
    that prices them in this process, and ``figures``: its shape, invalid rows and the rules they break, where it
    would be priced, its trees shared, the model and the plan (what ``distprice inspect --json`` prints)."""

    width: np.ndarray
    height: np.ndarray
    plan: Plan
    figures: dict

    def lines(self) -> Iterator[str]:
        """The figures in words, as ``distprice inspect`` prints them."""
        shape, shared, chosen = self.figures["shape"], self.figures["shared"], self.plan
        yield (
            f"rows {shape['rows']} ({self.figures['invalid_rows']} invalid), node-steps {shape['node_steps']:.3e} "
            f"({shared['node_steps']:.3e} computed with shared trees, {shared['groups']} tree groups)"
        )
        broken = self.figures["invalid_rules"]
        for rule in broken[:INVALID_RULES_SHOWN]:
            column = f"{rule['column']}: " if rule["column"] else ""
            rows = rule["rows"]
            yield f"  invalid: {rows} row{'s' * (rows != 1)}, {column}{rule['rule']} (first: {rule['first']})"
        if len(broken) > INVALID_RULES_SHOWN:
            yield f"  invalid: ... and {len(broken) - INVALID_RULES_SHOWN} more rules (--json lists them all)"
        for name in ("width", "height"):
            q = shape[name]
            if q:
                yield f"{name:6} " + "  ".join(f"{k} {v:.4g}" for k, v in q.items())
        yield f"model: {chosen.model.device}, {chosen.model.precision}, {chosen.model.source}"
        yield (
            f"plan: predicted {chosen.seconds:.4g} s for pricing in {self.figures['execution']} (a cluster of n "
            f"such machines or GPUs prices it in about 1/n of that, plus its start; workers that share a machine's "
            f"cores or a GPU share its speed)"
        )
        for part in self.figures["plan"]["parts"]:
            extra = ", ".join(
                f"{k} {part[k]}" for k in ("nodes", "busy_share", "wide_rows", "cached_share") if k in part
            )
            yield (
                f"  {part['engine']:9} {part['rows']:>9} rows  {part['node_steps']:.3e} node-steps  "
                f"{part['predicted_seconds']:.4g} s  {part['reason']}" + (f" ({extra})" if extra else "")
            )
        yield "candidates: " + ", ".join(
            f"{k} {v:.4g} s" for k, v in sorted(chosen.considered.items(), key=lambda kv: kv[1])
        )


def invalid_rules(prepared: Prepared) -> list[dict]:
    """The rules a checked portfolio's invalid rows break, the most broken first: each rule's ``column``,
    ``rule``, the ``rows`` that break it and the ``first`` of them (a row breaking several rules counts in
    each)."""
    rules: dict[tuple, dict] = {}
    for problem in prepared.problems:
        rule = rules.setdefault(
            (problem.column, problem.rule), {"column": problem.column, "rule": problem.rule, "rows": 0}
        )
        rule["rows"] += 1
        rule.setdefault("first", problem.where)
    return sorted(rules.values(), key=lambda rule: -rule["rows"])


def inspect(prepared: Prepared, market, model: CostModel, gpu: bool) -> Inspection:
    """The inspection of a checked portfolio (:func:`~distprice.lattice.instruments.prepare`) on ``market``
    (curves by id): its valid rows' shape and trees shared, the rules its invalid rows break, and the plan that
    prices the valid rows in this process under ``model``, with or without a ``gpu``."""
    valid = prepared.valid
    width, height = prepared.geometry.width[valid], prepared.geometry.height[valid]
    groups = instrument_groups(prepared.instruments(), market)
    chosen = plan(width, height, model, gpu)
    ids = pd.Series(prepared.table["id"].to_numpy()[valid])
    execution = (
        f"this process: {chosen.model.device}"
        if gpu
        else f"this process: the CPU engine on {numba.get_num_threads()} threads"
    )
    figures = {
        "shape": describe(width, height),
        "invalid_rows": int((~valid).sum()),
        "invalid_rules": invalid_rules(prepared),
        "execution": execution,
        "shared": {"groups": len(groups), "node_steps": shared_node_steps(width, height, groups.group)},
        "model": {"device": chosen.model.device, "precision": chosen.model.precision, "source": chosen.model.source},
        "plan": {
            "predicted_seconds": chosen.seconds,
            "parts": [
                {
                    "engine": p.engine,
                    "rows": len(p.rows),
                    "node_steps": float(node_steps(width[p.rows], height[p.rows]).sum()),
                    "predicted_seconds": p.seconds,
                    "reason": p.reason,
                    **p.detail,
                    "first_ids": ids.iloc[p.rows[:3]].tolist(),
                }
                for p in chosen.parts
            ],
        },
        "candidates": chosen.considered,
    }
    return Inspection(width, height, chosen, figures)
