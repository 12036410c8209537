"""What the runtime knows of a family: its inputs read on the client, then cut into chunks, each a task that runs
on a worker, whose results, in chunk order, make the job's result.

A job may run in stages, with checks on the client between them: the family's ``split`` is then a generator that
yields a :class:`Work` per stage and is sent each stage's result, and returns the last stage, whose result is the
job's. A later stage's chunks may take an earlier stage's chunks as arguments: their results stay on the workers.

The runtime (:mod:`distprice.cluster`) sends the chunks, waits on them and hands their results to the family;
it never looks inside a chunk's arguments or results.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from ..inspector import Plan


@dataclass(frozen=True)
class Workers:
    """The cluster a job is cut for: ``count`` workers, ``chunks_per_worker`` chunks wanted of each, and what the
    first worker to answer said of them all: ``gpu`` (whether it has one), ``model`` (the inspector's cost model
    for its device and the job's precision, as JSON) and ``gpu_processes`` (the most workers that share a GPU).
    ``task_seconds``: the least predicted work worth a task (None: the family's own rule); 0 cuts every job
    into ``chunks_per_worker`` chunks per worker, whatever its size. ``pricing_share``: what a worker prices at
    once, in pricings in one process on all of its machine (what the cost model predicts): 1 for a worker with a
    GPU or a machine's cores of its own, 1/n for each of n workers that share them."""

    count: int
    chunks_per_worker: int
    gpu: bool
    model: str
    gpu_processes: int = 1
    task_seconds: float | None = None
    pricing_share: float = 1.0
    gpus: tuple[tuple[str, ...], ...] = ()
    """The addresses of the workers on each GPU, a tuple per GPU (empty without GPUs, or where not known)."""
    order: tuple[str, ...] = ()
    """The workers' addresses in the order a small job takes them (:meth:`home`): a GPU at a time (each GPU's
    first worker, then each one's second...), on CPU workers a host at a time (empty where not known)."""

    def on_gpu(self, i: int) -> tuple[str, ...]:
        """The workers of GPU ``i`` (counted round the GPUs), for a task sent there: where several worker processes
        share each of several GPUs, so that a job's tasks spread evenly over the GPUs, not over the workers;
        elsewhere none (any worker)."""
        if self.gpu_processes > 1 and len(self.gpus) > 1:
            return self.gpus[i % len(self.gpus)]
        return ()

    def home(self, i: int, chunks: int) -> tuple[str, ...]:
        """The worker chunk ``i`` of a job of ``chunks`` chunks goes to where the job leaves workers idle (fewer
        chunks than workers): the ``i``-th in :attr:`order`, the same for every such job, so that a small job run
        again finds workers that ran it (a worker's first chunk of a kind costs it more: on a GPU tenths of a
        second, its kernels loaded and memory pools filled; on a CPU worker tens of milliseconds, numba's code
        loaded); any other worker where that one is gone. Elsewhere none (any worker)."""
        if not self.order or chunks >= self.count:
            return ()
        return (self.order[i % len(self.order)],)

    def at_once(self, chunks: int) -> float:
        """The pricings in one process whose work the workers do at once on a job of ``chunks`` chunks: the cost
        model's seconds of the whole job over this are its predicted seconds on the cluster."""
        return self.pricing_share * max(1, min(self.count, chunks))


@dataclass(frozen=True, eq=False)
class Chunk:
    """One task of a job: ``run(*args)`` on a worker. ``name`` is its key without the job's id, the dashboard's
    task name first (``price_cpu_fp64-0-3``, ``mc_paths_gpu_fp64-large-0``, ``fit_heston-2``). An argument that is
    itself a Chunk stands for that chunk's result: its task is sent too (once per job), and runs first. Tasks of
    higher ``priority`` start first. A chunk run ``again`` is a second run of the chunk of the same name (a slice
    priced and written again once the whole job's checks have found more of its rows invalid): the dashboard
    counts the two as one."""

    name: str
    run: Callable
    args: tuple = ()
    priority: int = 0
    again: bool = False
    workers: tuple[str, ...] = ()
    """The workers it runs on (any: empty); where none of them is left, any other."""


@dataclass(frozen=True)
class Work:
    """A job, or a stage of one, cut into chunks. ``combine`` makes the stage's result of the chunks' results,
    handed to it in chunk order (an iterator: in the last stage they come as they are done, so that a big result
    can be written piece by piece while the rest is being priced; ``each(i, result)``, when given, is made of
    chunk ``i``'s result as it is fetched, while the one before is being used). ``label`` names the stage on the
    progress bar; ``figures`` are what the dashboard's page shows of the job (the keywords of
    :func:`~distprice.cluster.dashboard.post_job`), None to show nothing new.

    ``kept``: chunks sent with the stage's own, whose results later stages take: they stay on the
    workers until the job's last stage is sent. The results of an earlier stage's other chunks are let go once
    that stage is over. ``outline``: how the job's rows were cut and planned, for its report (None: not told).
    ``light``: each chunk's result is a few bytes (a tally, the templates of the parts a worker wrote), so those
    already done are fetched together, one message for a run of them. ``together``: the results are used only all
    at once (small partial sums, say), so they are fetched in one message once every chunk is done."""

    chunks: list[Chunk]
    combine: Callable[[Iterator], Any]
    label: str
    figures: dict | None = None
    each: Callable[[int, Any], Any] | None = None
    kept: tuple[Chunk, ...] = ()
    outline: Outline | None = None
    light: bool = False
    together: bool = False


@dataclass(frozen=True)
class Outline:
    """How a job's rows were cut and planned, for its report: ``plan``, the plans of its chunks joined (a
    :class:`~distprice.inspector.Plan` of the job's valid rows in table order, a part per engine); ``chunks``,
    each chunk of rows as positions among the valid rows; ``names``, the names of the chunks (:attr:`Chunk.name`)
    that price each chunk of rows (one per block of scenarios); ``predicted``, each chunk of rows' predicted
    seconds of pricing on its worker (every scenario; its plan's seconds over the worker's
    :attr:`~Workers.pricing_share`)."""

    plan: Plan
    chunks: list[np.ndarray]
    names: list[list[str]]
    predicted: list[float]

    def times(self, actual: dict[str, float]) -> list[tuple[float, float]]:
        """(predicted, actual) seconds of each chunk of rows, from ``actual``, the seconds each chunk's pricing
        took by name (NaN where one is missing)."""
        return [(p, sum(actual.get(n, math.nan) for n in names)) for p, names in zip(self.predicted, self.names)]


@dataclass(frozen=True)
class Metered:
    """A chunk's result with what its pricing did, for the cluster's metrics (:mod:`distprice.cluster.metrics`):
    ``rows`` priced (times the curve sets), ``node_steps`` (all curve sets), ``seconds`` of pricing (host layout
    included), of those ``kernel_seconds`` in the GPU kernels or the CPU engines' loops, and ``engine`` (names
    joined by ``+``). The runtime reports the figures and hands on ``result`` alone."""

    result: Any
    rows: int
    node_steps: float
    seconds: float
    kernel_seconds: float
    engine: str


@dataclass(frozen=True)
class Parts:
    """A result the workers wrote as parts of a folder being built: ``paths`` yields each part, in the table's
    order, as it is written: its :class:`~distprice.join.Template` (its path, and its footer ready to join; the
    job's tally is complete once it is exhausted)."""

    paths: Iterator[str]


Stages = Generator[Work, Any, Work]
"""A job of several stages: each yielded :class:`Work` is sent its result (its ``combine``'s), and the returned
one is the last stage, whose result is the job's."""


@dataclass(frozen=True)
class Family:
    """A family as the runtime runs it: ``read(inputs, **options)`` reads and checks a job's inputs on the client,
    before any task is sent; ``split(read, workers)`` cuts what it read into the :class:`Work` of ``workers``, or
    its :data:`Stages`.

    ``counted``: the task names (their beginnings) of the chunks the dashboard's page counts as the job's;
    ``metered``: of those, the ones whose results are :class:`Metered` (each logs one pricing event)."""

    read: Callable[..., Any]
    split: Callable[[Any, Workers], Work | Stages]
    counted: tuple[str, ...] = ()
    metered: tuple[str, ...] = ()


_WATCHER: contextvars.ContextVar[Callable[[float, float], None] | None] = contextvars.ContextVar(
    "distprice_chunk_watcher", default=None
)


@contextlib.contextmanager
def watched_by(tell: Callable[[float, float], None] | None):
    """Within this block, a chunk priced in this thread tells ``tell(rows, node_steps)`` how far it is as it goes
    (:func:`chunk_progress`): the rows (× curve sets) and node-steps priced so far (None: nobody watches)."""
    token = _WATCHER.set(tell)
    try:
        yield
    finally:
        _WATCHER.reset(token)


def chunk_progress(rows: float, node_steps: float) -> Callable[[float], None]:
    """The ``progress`` of pricing a chunk of ``rows`` (× curve sets) and ``node_steps``, told the node-steps of
    each piece as it is priced: tells the watcher of this thread (:func:`watched_by`) the node-steps priced so far
    and the rows in proportion; does nothing unwatched."""
    tell = _WATCHER.get()
    done = 0.0

    def priced(steps: float) -> None:
        nonlocal done
        done += steps
        if tell is not None:
            tell(rows * min(1.0, done / node_steps) if node_steps > 0 else 0.0, done)

    return priced
