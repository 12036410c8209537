"""The live ``distprice`` page of the Dask dashboard: the current job's rows and node-steps done over time,
rows/s and node-steps/s per worker and engine, chunks done / running / waiting / failed, the rows that
failed the checks and the estimated end.

A scheduler plugin, :class:`JobBoard`, serves it from the scheduler's own web server (the dashboard's, so
it listens where the dashboard does: 127.0.0.1 unless the cluster config says otherwise) at

- ``/distprice``: a Bokeh page in Dask's frame (a ``Distprice`` link joins the dashboard's menu), redrawn
  every second;
- ``/distprice.json``: the same state for scripts.

Any cluster kind loads it: the client calls :func:`register` (local, ``address``, SLURM / PBS), or the
scheduler is started with ``--preload distprice.cluster.dashboard`` (Kubernetes, plain hosts).

What it shows comes from three streams:

- the client posts each job under :data:`JOB_TOPIC` with :func:`post_job`: ``{"job": id, "name": str,
  "rows": portfolio rows, "invalid": rows that failed the checks, "scenarios": curve sets, "chunks":
  pricing tasks, "node_steps": Σ 2 · width · height of the job (all scenarios), "predicted_seconds": the
  inspector's prediction of its pricing time on the cluster, "cost_model": where the prediction's figures
  come from (``default (...)``: the shipped, untuned ones; ``tuned <date>``)}``; a later post of the same id
  updates these figures (a big file's invalid rows are known once the workers have read it), and
  :func:`end_job` closes it;
- the scheduler's task transitions: the job's chunks are its tasks whose key starts as a family says its
  counted chunks' names do (``Family.counted`` of :data:`~distprice.families.FAMILIES`: ``price_``,
  ``mc_paths_``) and ends with ``-<job id>`` (the Pricer's keys);
- the pricing events each metered chunk logs (:mod:`~.metrics`: rows × scenarios, node-steps, seconds,
  kernel seconds, engine) just before it ends: each is credited to the next metered task (``Family.metered``:
  ``price_``) that ends on its worker (the event and the task's end travel on the same stream, in order), so
  a chunk priced again after its worker was lost, or run again (:func:`again_key`), counts once;
- while a chunk is priced, its worker tells how far it is, under :data:`PIECE_TOPIC` (``{"key": its task,
  "rows": rows × scenarios, "node_steps": node-steps priced so far}``, at most every
  :data:`PIECE_EVENT_SECONDS`), so the page moves within a chunk; the chunk's pricing event replaces these.

A chunk is *running* once the scheduler has sent it to a worker (pricing, or next in that worker's queue),
*waiting* before.

:func:`job_workers` and :func:`job_chunks` hand a job's per-worker totals and each chunk's seconds of pricing to the
job report (:mod:`distprice.report`).

Estimated end (:func:`seconds_left`): the job's measured pace, the share of its node-steps (else of its rows,
else of its chunks) done per second since its first progress, blended with the prediction early on. With f done
after e seconds, the pace says the whole job takes S = 1 / pace seconds of work and the prediction says P; the
time left is (1 - f) · (w · S + (1 - w) · P), where the pace's weight w = max(f / (f + PRIOR_SHARE), e / P), at
most 1, grows with the work done and with the time spent: once the prediction is overrun the pace alone tells.
Nothing done yet: P - e while e < P, else not known.
"""

from __future__ import annotations

import html
import logging
import math
import re
import time
from collections import OrderedDict, defaultdict, deque
from dataclasses import dataclass, field

from distributed.diagnostics.plugin import SchedulerPlugin

from ..families import FAMILIES
from .metrics import _TOTALS as PRICING_TOTALS, TOPIC as PRICING_TOPIC

PLUGIN_NAME = "distprice-dashboard"
JOB_TOPIC = "distprice-job"
PIECE_TOPIC = "distprice-piece"
"""A chunk's progress while it is priced (see the module docstring)."""
PIECE_EVENT_SECONDS = 0.5
"""A worker tells a chunk's progress at most this often."""
PRIOR_SHARE = 0.05
"""The share of a job done at which its measured pace weighs as much as the prediction (:func:`seconds_left`)."""
PAGE = "/distprice"
"""The page's path on the dashboard; the JSON state is at ``PAGE + ".json"``."""
CHUNK_PREFIXES = tuple(prefix for family in FAMILIES for prefix in family.counted)
"""Keys of the tasks the page counts as a job's chunks."""
METERED_PREFIXES = tuple(prefix for family in FAMILIES for prefix in family.metered)
"""Keys of the chunk tasks that each log one pricing event (:mod:`~.metrics`)."""
AGAIN = "-again-"
"""Marks the key of a chunk's second run (``Chunk.again``: a slice written again, its duplicate ids marked, after
its first writing): ``<name>-again-<chunk>-<job>``. The page counts it as the chunk it replaces."""


def again_key(key: str) -> str:
    """The key of the run that replaces chunk task ``key`` (``<name>-<chunk>-<job>``)."""
    name, _, rest = key.partition("-")
    return f"{name}{AGAIN}{rest}"


def _chunk_of(key: str) -> str:
    """The chunk a task key prices: a second pricing's key is its first's."""
    return key.replace(AGAIN, "-", 1)


KEEP_JOBS = 20
"""Jobs remembered (the oldest are dropped)."""
MAX_POINTS = 2000
"""Points of a job's progress history kept (every other one is dropped past this)."""
REFRESH_MS = 1000
_JOB_FIELDS = {
    "name": str,
    "rows": int,
    "invalid": int,
    "scenarios": int,
    "chunks": int,
    "node_steps": float,
    "predicted_seconds": float,
    "cost_model": str,
}
_WAITING = ("released", "waiting", "queued", "no-worker")
log = logging.getLogger(__name__)


def register(client, link: str | None = None) -> str | None:
    """Loads the page on the scheduler of ``client`` (once: a second call, or a scheduler started with the
    preload, keeps the first) and returns its URL beside ``link``, the dashboard's URL (None: the one Dask
    gives), or None when the scheduler serves no dashboard."""
    client.register_plugin(JobBoard())
    if not client.scheduler_info().get("services", {}).get("dashboard"):
        return None
    return (link or client.dashboard_link).rsplit("/", 1)[0] + PAGE


def post_job(
    client,
    job: str,
    *,
    rows: int,
    chunks: int,
    predicted_seconds: float,
    node_steps: float = 0.0,
    scenarios: int = 1,
    invalid: int = 0,
    name: str | None = None,
    cost_model: str = "",
) -> None:
    """Tells the page that job ``job`` (the suffix of its task keys) starts, or updates its figures (see the
    module docstring). Call it before the job's tasks are submitted."""
    client.log_event(
        JOB_TOPIC,
        {
            "job": str(job),
            "name": name or str(job),
            "rows": int(rows),
            "invalid": int(invalid),
            "scenarios": int(scenarios),
            "chunks": int(chunks),
            "node_steps": float(node_steps),
            "predicted_seconds": float(predicted_seconds),
            "cost_model": str(cost_model),
        },
    )


def end_job(client, job: str, error: str | None = None) -> None:
    """Tells the page that job ``job`` is over: done, or failed with ``error``."""
    client.log_event(JOB_TOPIC, {"job": str(job), "end": True, "error": error})


def job_workers(client, job: str) -> dict[str, dict]:
    """Per worker, what it priced of job ``job`` (its engines together): the ``rows`` (× scenarios),
    ``node_steps``, ``seconds`` and ``kernel_seconds`` that :func:`distprice.report.write_report` takes as
    ``workers``; empty for a job the page does not know."""
    return client.run_on_scheduler(_job_workers, str(job))


def seconds_left(points: list[tuple[float, float]], elapsed: float, predicted: float) -> float | None:
    """The estimated seconds to a job's end from ``points``, (seconds since its start, share of it done) in time
    order, ``elapsed`` seconds after its start, and the ``predicted`` seconds of the whole job (0: none); None
    while nothing tells (see the module docstring)."""
    share = points[-1][1] if points else 0.0
    if share >= 1.0:
        return 0.0
    first = next(((t, f) for t, f in points if f > 0), None)
    if first is None or elapsed <= 0:
        return predicted - elapsed if predicted > elapsed else None
    since, at_first = first
    # the pace since the first progress, which leaves out the job's start (tasks sent, engines compiled)
    pace = (share - at_first) / (elapsed - since) if share > at_first and elapsed > since else share / elapsed
    whole = 1.0 / pace
    if predicted > 0:
        weight = min(1.0, max(share / (share + PRIOR_SHARE), elapsed / predicted))
        whole = weight * whole + (1.0 - weight) * predicted
    return (1.0 - share) * whole


def job_chunks(client, job: str) -> dict[str, float]:
    """The seconds of pricing of each metered chunk of job ``job`` (its pricing event's), by the chunk's name
    (:attr:`~distprice.families.Chunk.name`: its task key without the job's id); empty for a job the page does
    not know."""
    return client.run_on_scheduler(_job_chunks, str(job))


def _job_chunks(job: str, dask_scheduler=None) -> dict[str, float]:
    board = dask_scheduler.plugins.get(PLUGIN_NAME)
    progress = board.jobs.get(job) if board is not None else None
    timed = progress.timed.items() if progress is not None else ()
    return {key.removesuffix(f"-{job}"): seconds for key, seconds in timed}


def _job_workers(job: str, dask_scheduler=None) -> dict[str, dict]:
    board = dask_scheduler.plugins.get(PLUGIN_NAME)
    progress = board.jobs.get(job) if board is not None else None
    totals = defaultdict(lambda: dict.fromkeys(PRICING_TOTALS, 0.0))
    for (worker, _), priced in progress.workers.items() if progress is not None else ():
        for name in PRICING_TOTALS:
            totals[worker][name] += priced[name]
    return dict(totals)


def dask_setup(scheduler) -> None:
    """``--preload distprice.cluster.dashboard``: loads the page when the scheduler starts."""
    scheduler.add_plugin(JobBoard(), idempotent=True)


@dataclass
class JobProgress:
    """What the page knows of one job (figures as posted; see the module docstring)."""

    job: str
    started: float
    name: str = ""
    rows: int = 0
    invalid: int = 0
    scenarios: int = 1
    chunks: int = 0
    node_steps: float = 0.0
    predicted_seconds: float = 0.0
    cost_model: str = ""
    ended: float | None = None
    error: str | None = None
    chunk_states: dict[str, str] = field(default_factory=dict)
    credited: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Rows × scenarios and node-steps priced, per chunk key."""
    timed: dict[str, float] = field(default_factory=dict)
    """Seconds of pricing, per chunk key (its last pricing's)."""
    done: list[float] = field(default_factory=lambda: [0.0, 0.0])
    """Σ of ``credited``: rows × scenarios, node-steps."""
    workers: dict[tuple[str, str], dict[str, float]] = field(
        default_factory=lambda: defaultdict(lambda: dict.fromkeys(PRICING_TOTALS, 0.0))
    )
    """Totals of the pricing events per (worker, engine)."""
    history: list[tuple[float, float, float]] = field(default_factory=lambda: [(0.0, 0.0, 0.0)])
    """(seconds since the start, rows × scenarios done, node-steps done)."""

    @property
    def expected(self) -> int:
        """Rows × scenarios the job prices: its valid rows under every scenario."""
        return max(self.rows - self.invalid, 0) * max(self.scenarios, 1)

    def post(self, message: dict, now: float) -> None:
        for name, kind in _JOB_FIELDS.items():
            if name in message:
                setattr(self, name, kind(message[name]))
        if not math.isfinite(self.predicted_seconds):  # a plan of a named engine predicts nothing
            self.predicted_seconds = 0.0
        if message.get("end"):
            self.ended, self.error = now, message.get("error")

    def chunk(self, key: str, state: str, now: float) -> None:
        """A chunk task's transition to ``state``: done stays done unless the task runs again."""
        if state == "processing":
            self.chunk_states[key] = "running"
        elif state == "memory":
            self.chunk_states[key] = "done"
        elif state == "erred":
            self.chunk_states[key] = "failed"
        elif state in _WAITING and self.chunk_states.get(key) != "done":
            self.chunk_states[key] = "waiting"
        if self.ended is None and self.status() != "running":
            self.ended = now

    def credit(self, key: str, event: dict, now: float) -> None:
        """A pricing event of chunk ``key``; a chunk priced again replaces its earlier credit."""
        totals = self.workers[(str(event["worker"]), str(event["engine"]))]
        for name in totals:
            totals[name] += float(event[name])
        self.timed[key] = float(event["seconds"])
        self._priced(key, float(event["rows"]), float(event["node_steps"]), now)

    def piece(self, key: str, event: dict, now: float) -> None:
        """How far chunk ``key`` is, while it is priced (nothing once it is done)."""
        if self.chunk_states.get(key) != "done":
            self._priced(key, float(event["rows"]), float(event["node_steps"]), now)

    def _priced(self, key: str, rows: float, steps: float, now: float) -> None:
        old_rows, old_steps = self.credited.get(key, (0.0, 0.0))
        self.credited[key] = (rows, steps)
        self.done[0] += rows - old_rows
        self.done[1] += steps - old_steps
        self.history.append((now - self.started, self.done[0], self.done[1]))
        if len(self.history) > MAX_POINTS:
            self.history = self.history[:-1:2] + self.history[-1:]

    def counts(self) -> dict[str, int]:
        states = list(self.chunk_states.values())
        counts = {s: states.count(s) for s in ("done", "running", "failed")}
        counts["waiting"] = max(self.chunks - sum(counts.values()), states.count("waiting"))
        return counts

    def status(self) -> str:
        if self.error is not None or "failed" in self.chunk_states.values():
            return "failed"
        if self.ended is not None or (self.chunks and self.counts()["done"] >= self.chunks):
            return "done"
        return "running"

    def share_done(self) -> float:
        """The share of the job done: of its node-steps when they were posted, else of its chunks."""
        if self.node_steps > 0:
            return min(1.0, self.done[1] / self.node_steps)
        return min(1.0, self.counts()["done"] / self.chunks) if self.chunks else 0.0

    def shares(self, now: float) -> list[tuple[float, float]]:
        """(seconds since the start, share done) over time: of the job's node-steps when they were posted, else
        of its rows × scenarios, else (a job whose chunks tell nothing but their end) of its chunks, now."""
        if self.node_steps > 0:
            return [(t, min(1.0, steps / self.node_steps)) for t, _, steps in self.history]
        if self.expected > 0 and self.done[0] > 0:
            return [(t, min(1.0, rows / self.expected)) for t, rows, _ in self.history]
        return [(0.0, 0.0), (now - self.started, self.share_done())]

    def seconds_left(self, now: float) -> float | None:
        """The estimated seconds to the end (:func:`seconds_left`); 0 once the job is over, None while nothing
        tells."""
        if self.status() != "running":
            return 0.0
        return seconds_left(self.shares(now), now - self.started, self.predicted_seconds)

    def state(self, now: float) -> dict:
        """The job as plain values (the JSON of ``/distprice.json``)."""
        left = self.seconds_left(now)
        return dict(
            job=self.job,
            name=self.name,
            status=self.status(),
            rows=self.rows,
            invalid=self.invalid,
            scenarios=self.scenarios,
            expected=self.expected,
            chunks=self.chunks,
            node_steps=self.node_steps,
            predicted_seconds=self.predicted_seconds,
            cost_model=self.cost_model,
            started=self.started,
            elapsed=(self.ended or now) - self.started,
            done_rows=self.done[0],
            done_node_steps=self.done[1],
            share_done=self.share_done(),
            seconds_left=left,
            estimated_end=None if left is None else now + left,
            chunk_counts=self.counts(),
            error=self.error,
            workers=[dict(worker=w, engine=e, **totals) for (w, e), totals in sorted(self.workers.items())],
            history=[list(point) for point in self.history],
        )


class JobBoard(SchedulerPlugin):
    """Follows distprice jobs on the scheduler and serves their page (see the module docstring). Its state is
    touched only on the scheduler's event loop (plugin hooks, web handlers and page callbacks all run there)."""

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self):
        self.jobs: OrderedDict[str, JobProgress] = OrderedDict()
        self.clock = time.time
        """Seconds since the epoch, now."""
        self._pending: defaultdict[str, deque] = defaultdict(deque)
        """Pricing events per worker, each waiting for the end of the task that logged it."""

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.__init__()

    async def start(self, scheduler) -> None:
        _serve(scheduler, self)

    def job_of(self, key) -> JobProgress | None:
        """The job whose chunk task ``key`` is, or None."""
        if not isinstance(key, str) or not key.startswith(CHUNK_PREFIXES):
            return None
        return self.jobs.get(key.rpartition("-")[2])

    def log_event(self, topic: str, msg) -> None:
        if topic == JOB_TOPIC:
            job = self.jobs.get(msg["job"])
            if job is None:
                job = self.jobs[msg["job"]] = JobProgress(msg["job"], self.clock())
                while len(self.jobs) > KEEP_JOBS:
                    self.jobs.popitem(last=False)
            job.post(msg, self.clock())
        elif topic == PRICING_TOPIC:
            self._pending[msg["worker"]].append(msg)
        elif topic == PIECE_TOPIC:
            job = self.job_of(msg["key"])
            if job is not None:
                job.piece(_chunk_of(msg["key"]), msg, self.clock())

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if (
            start == "processing"
            and finish in ("memory", "erred")
            and isinstance(key, str)
            and key.startswith(METERED_PREFIXES)
        ):
            # a metered task logs its event just before it ends, on the stream that reports its end
            waiting = self._pending.get(kwargs.get("worker"))
            event = waiting.popleft() if waiting else None
            job = self.job_of(key)
            if job is not None and event is not None and finish == "memory":
                job.credit(_chunk_of(key), event, self.clock())
        job = self.job_of(key)
        if job is not None:
            job.chunk(_chunk_of(key), finish, self.clock())

    def remove_worker(self, scheduler, worker: str, **kwargs) -> None:
        self._pending.pop(worker, None)

    def current(self) -> JobProgress | None:
        """The latest job still running, else the latest job."""
        running = [job for job in self.jobs.values() if job.status() == "running"]
        return running[-1] if running else next(reversed(self.jobs.values()), None)

    def state(self) -> dict:
        now = self.clock()
        current = self.current()
        return {
            "current": current.job if current else None,
            "now": now,
            "jobs": [job.state(now) for job in reversed(self.jobs.values())],
        }


def _serve(scheduler, board: JobBoard) -> None:
    """Adds the page and its JSON to the scheduler's web server, beside Dask's dashboard (nothing when the
    scheduler serves no dashboard)."""
    from tornado import web

    applications = getattr(getattr(scheduler, "http_application", None), "applications", [])
    dashboards = [app for app in applications if hasattr(app, "app_paths")]  # Dask's Bokeh server
    if not dashboards:
        return
    tornado_log = logging.getLogger("tornado.application")
    if not any(isinstance(f, RefusedSocket) for f in tornado_log.filters):
        tornado_log.addFilter(RefusedSocket())
    from distributed.dashboard.core import BokehApplication
    from distributed.dashboard.scheduler import template_variables
    from tornado.ioloop import IOLoop

    prefix = getattr(dashboards[0], "_prefix", "") or ""
    extra = template_variables(scheduler)  # shared by every Dask page: the menu gains a Distprice link
    pages = extra.get("pages")
    if isinstance(pages, list) and PAGE.strip("/") not in pages:
        pages.append(PAGE.strip("/"))
    page = BokehApplication({PAGE: _page}, scheduler, prefix=prefix, template_variables=extra)
    scheduler.http_application.add_application(page)
    page.initialize(IOLoop.current())
    page.start()

    class State(web.RequestHandler):
        def get(self):
            self.set_header("Cache-Control", "no-store")
            self.write(board.state())

    scheduler.http_application.add_handlers(r".*", [(rf"{prefix}{PAGE}\.json", State)])


class RefusedSocket(logging.Filter):
    """Bokeh refuses a websocket of a dashboard page that comes without a valid session token by raising in the
    socket's ``open``, which tornado logs as ``Uncaught exception GET /status/ws`` with a traceback, on the
    scheduler's stderr (a local cluster's is the job's). It happens to a page left open past its session's life
    (Bokeh's default: 5 minutes) that reconnects after its connection dropped, and to a client that is no
    Bokeh page; nothing on the scheduler is wrong, and the page only needs a reload. This filter of tornado's
    log turns exactly that record into one line on this module's log."""

    REQUEST = re.compile(r"Uncaught exception GET (\S*/ws)\b")

    def filter(self, record: logging.LogRecord) -> bool:
        from bokeh.protocol.exceptions import ProtocolError

        error = record.exc_info[1] if record.exc_info else None
        found = self.REQUEST.match(record.getMessage()) if isinstance(error, ProtocolError) else None
        if found is None:
            return True
        log.info("the dashboard refused a page's websocket %s (%s): reload the page", found.group(1), error)
        return False


def _page(scheduler, extra, doc) -> None:
    """The Bokeh document of one visitor of the page."""
    from distributed.dashboard.components.scheduler import BOKEH_THEME, env

    view = JobView(scheduler.plugins.get(PLUGIN_NAME))
    view.update()
    doc.add_periodic_callback(view.update, REFRESH_MS)
    doc.title = "Dask: distprice"
    doc.add_root(view.root)
    doc.template = env.get_template("simple.html")
    doc.template_variables.update(extra)
    doc.theme = BOKEH_THEME


class JobView:
    """The page's plots over a :class:`JobBoard`'s current job."""

    COLORS = {"done": "#2ca02c", "running": "#1f77b4", "waiting": "#bbbbbb", "failed": "#d62728"}

    def __init__(self, board: JobBoard | None):
        from bokeh.layouts import column, row
        from bokeh.models import (
            BasicTickFormatter,
            ColumnDataSource,
            DataTable,
            Div,
            HoverTool,
            NumberFormatter,
            NumeralTickFormatter,
            ScientificFormatter,
            TableColumn,
        )
        from bokeh.plotting import figure

        self.board = board
        self.headline = Div(text="", sizing_mode="stretch_width")
        self.progress = ColumnDataSource(dict(t=[], rows=[], node_steps=[]))
        self.predicted = ColumnDataSource(dict(t=[], rows=[]))
        self.chunks = ColumnDataSource(dict(state=list(self.COLORS), count=[0] * 4, color=list(self.COLORS.values())))
        self.workers = ColumnDataSource(
            dict(
                label=[],
                worker=[],
                engine=[],
                rows=[],
                node_steps=[],
                seconds=[],
                rows_per_second=[],
                node_steps_per_second=[],
            )
        )
        self.rows_plot = done = figure(
            title=progress_title(False),
            height=300,
            sizing_mode="stretch_width",
            tools="pan,wheel_zoom,box_zoom,reset",
            x_axis_label="seconds",
        )
        done.line("t", "rows", source=self.progress, line_width=2)
        done.line("t", "rows", source=self.predicted, line_dash="dashed", color="gray")
        done.yaxis.formatter = NumeralTickFormatter(format="0,0")
        done.add_tools(
            HoverTool(
                tooltips=[("seconds", "@t{0.0}"), ("rows", "@rows{0,0}"), ("node-steps", "@node_steps{0.000e+0}")]
            )
        )
        chunks = figure(title="Chunks", height=300, width=320, x_range=list(self.COLORS), tools="")
        chunks.vbar(x="state", top="count", color="color", width=0.7, source=self.chunks)
        chunks.yaxis.ticker.min_interval = 1
        self.speed = figure(
            title="Node-steps per second of pricing, by worker and engine",
            height=260,
            sizing_mode="stretch_width",
            y_range=[],
            tools="",
            x_axis_label="node-steps / s",
        )
        self.speed.hbar(y="label", right="node_steps_per_second", height=0.7, source=self.workers)
        self.speed.xaxis.formatter = BasicTickFormatter(precision=1)
        self.speed.add_tools(
            HoverTool(
                tooltips=[
                    ("", "@label"),
                    ("rows/s", "@rows_per_second{0,0}"),
                    ("node-steps/s", "@node_steps_per_second{0.000e+0}"),
                ]
            )
        )
        number = NumberFormatter(format="0,0")
        table = DataTable(
            source=self.workers,
            height=200,
            sizing_mode="stretch_width",
            index_position=None,
            columns=[
                TableColumn(field="worker", title="worker"),
                TableColumn(field="engine", title="engine"),
                TableColumn(field="rows", title="rows × scenarios", formatter=number),
                TableColumn(field="rows_per_second", title="rows/s", formatter=number),
                TableColumn(
                    field="node_steps_per_second", title="node-steps/s", formatter=ScientificFormatter(precision=3)
                ),
                TableColumn(field="seconds", title="seconds pricing", formatter=NumberFormatter(format="0.00")),
            ],
        )
        self.jobs = Div(text="", sizing_mode="stretch_width")
        self.root = column(
            self.headline,
            row(done, chunks, sizing_mode="stretch_width"),
            self.speed,
            table,
            self.jobs,
            sizing_mode="stretch_width",
        )

    def update(self) -> None:
        state = self.board.state() if self.board is not None else {"jobs": [], "current": None}
        job = next((j for j in state["jobs"] if j["job"] == state["current"]), None)
        if job is None:
            self.headline.text = "<h2>distprice</h2><p>No distprice job yet.</p>"
            return
        self.headline.text = headline(job)
        t, rows, steps = zip(*job["history"])
        self.progress.data = dict(t=list(t), rows=list(rows), node_steps=list(steps))
        predicted = job["predicted_seconds"] > 0
        self.rows_plot.title.text = progress_title(predicted)
        self.predicted.data = (
            dict(t=[0.0, job["predicted_seconds"]], rows=[0, job["expected"]]) if predicted else dict(t=[], rows=[])
        )
        self.chunks.data = dict(self.chunks.data, count=[job["chunk_counts"][s] for s in self.COLORS])
        workers = job["workers"]
        labels = [f"{w['worker']} {w['engine']}" for w in workers]

        def per_second(name):
            return [w[name] / w["seconds"] if w["seconds"] > 0 else 0.0 for w in workers]

        self.workers.data = dict(
            label=labels,
            worker=[w["worker"] for w in workers],
            engine=[w["engine"] for w in workers],
            rows=[w["rows"] for w in workers],
            node_steps=[w["node_steps"] for w in workers],
            seconds=[w["seconds"] for w in workers],
            rows_per_second=per_second("rows"),
            node_steps_per_second=per_second("node_steps"),
        )
        self.speed.y_range.factors = labels
        self.jobs.text = jobs_table(state["jobs"])


def progress_title(predicted: bool) -> str:
    """The title of the plot of rows priced over time (the dashed line is drawn only with a prediction)."""
    return "Rows × scenarios priced" + (" (dashed: the inspector's prediction)" if predicted else "")


def headline(job: dict) -> str:
    """The job's figures as HTML."""
    counts = job["chunk_counts"]
    rate = job["done_rows"] / job["elapsed"] if job["elapsed"] > 0 else 0.0
    per = f" × {job['scenarios']} scenarios" if job["scenarios"] > 1 else ""
    if job["predicted_seconds"] > 0:
        at = time.strftime("%H:%M:%S", time.localtime(job["started"] + job["predicted_seconds"]))
        over = ", overrun" if job["status"] == "running" and job["elapsed"] > job["predicted_seconds"] else ""
        predicted = f"predicted {job['predicted_seconds']:.1f} s (end {at}{over})"
        if str(job.get("cost_model", "")).startswith("default"):
            predicted += (
                " by the untuned default cost model (<code>distprice tune</code> on the workers' machine "
                "measures its own)"
            )
    else:
        predicted = "no prediction"
    if job["status"] != "running":
        end = f"took {job['elapsed']:.1f} s"
    elif job["seconds_left"] is None:
        end = "end not known until some work is done"
    else:
        at = time.strftime("%H:%M:%S", time.localtime(job["estimated_end"]))
        end = f"estimated end {at} (in {job['seconds_left']:.1f} s)"
    lines = [
        f"<h2>distprice job {_escape(job['name'])}: {job['status']}</h2>",
        f"<p><b>{int(job['done_rows']):,}</b> of <b>{job['expected']:,}</b> rows{per} priced "
        f"({100 * job['share_done']:.1f} % of {job['node_steps']:.3e} node-steps); "
        f"portfolio <b>{job['rows']:,}</b> rows, <b>{job['invalid']:,}</b> failed the checks</p>",
        f"<p>chunks: {counts['done']} done, {counts['running']} running, {counts['waiting']} waiting, "
        f"{counts['failed']} failed of {job['chunks']}; {rate:,.0f} rows/s, "
        f"{job['done_node_steps'] / max(job['elapsed'], 1e-9):.3e} node-steps/s</p>",
        f"<p>{job['elapsed']:.1f} s elapsed; {predicted}; {end}</p>",
    ]
    if job["error"]:
        lines.append(f"<p>error: {_escape(job['error'])}</p>")
    return "".join(lines)


def jobs_table(jobs: list[dict]) -> str:
    """The recent jobs, newest first, as an HTML table."""
    cell = '<td style="padding: 2px 12px; text-align: {}">{}</td>'
    rows = "".join(
        "<tr>"
        + "".join(
            cell.format(align, value)
            for align, value in (
                ("left", _escape(j["name"])),
                ("left", j["status"]),
                ("right", f"{j['rows']:,}"),
                ("right", j["chunks"]),
                ("right", f"{j['elapsed']:.1f}"),
                ("right", f"{j['predicted_seconds']:.1f}"),
            )
        )
        + "</tr>"
        for j in jobs
    )
    head = "".join(
        cell.format(align, f"<b>{name}</b>")
        for align, name in (
            ("left", "job"),
            ("left", "status"),
            ("right", "rows"),
            ("right", "chunks"),
            ("right", "seconds"),
            ("right", "predicted s"),
        )
    )
    return f"<h3>Recent jobs</h3><table><tr>{head}</tr>{rows}</table>"


def _escape(text) -> str:
    return html.escape(str(text))
