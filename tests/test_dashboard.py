"""The distprice page on the Dask dashboard: a job's progress as the scheduler plugin follows it (chunks
credited once, the estimated end), and the page served on a loopback cluster during a job, priced by the
Pricer's own tasks under the Pricer's keys."""

from __future__ import annotations

import json
import uuid
from urllib.request import urlopen

import numpy as np
import pytest
from distributed import wait

from distprice.cluster.dashboard import (
    PAGE,
    PIECE_TOPIC,
    JobBoard,
    JobView,
    again_key,
    end_job,
    headline,
    job_workers,
    post_job,
    register,
    seconds_left,
)
from distprice.cluster.tasks import run_chunk
from distprice.curves import builtin_curves
from distprice.execute import fixed_plan
from distprice.families.lattice import price_chunk, task_name
from distprice.planner import spans
from distprice.report.browser import chromium, render_page

from utils import instruments_of

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _event(worker, rows, steps, engine="cpu"):
    return {
        "worker": worker,
        "rows": rows,
        "node_steps": steps,
        "seconds": 2.0,
        "kernel_seconds": 1.5,
        "engine": engine,
    }


def _ended(board, key, worker, state="memory"):
    board.transition(key, "processing", state, stimulus_id="test", worker=worker)


def test_a_chunk_priced_twice_counts_once_and_the_end_blends_prediction_and_pace():
    board = JobBoard()
    ticks = iter(range(100, 200))
    board.clock = lambda: float(next(ticks))
    board.log_event(
        "distprice-job",
        {
            "job": "j",
            "name": "book",
            "rows": 1000,
            "invalid": 10,
            "scenarios": 2,
            "chunks": 4,
            "node_steps": 4e6,
            "predicted_seconds": 10.0,
        },
    )
    job = board.jobs["j"]  # started at 100
    assert job.expected == 1980 and job.status() == "running"
    assert job.seconds_left(100.0) == 10.0  # nothing done: the inspector's prediction
    first = "price_cpu_fp64-0-0-j"
    board.transition(first, "waiting", "processing", stimulus_id="test")
    assert job.counts() == {"done": 0, "running": 1, "failed": 0, "waiting": 3}
    board.log_event("distprice-pricing", _event("w1", 495, 1e6))
    _ended(board, "gather-0-j", "w1")  # no pricing task: the event waits for the chunk's end
    _ended(board, first, "w1")
    assert job.done == [495.0, 1e6] and job.counts() == {"done": 1, "running": 0, "failed": 0, "waiting": 3}
    # a quarter done after 5 s of a predicted 10: the pace says 20 s in all, weighed 0.25 / 0.30 against the
    # prediction's 10 s, for the three quarters left
    whole = (0.25 / 0.30) * 20.0 + (0.05 / 0.30) * 10.0
    assert job.seconds_left(105.0) == pytest.approx(0.75 * whole)
    board.transition(first, "memory", "released", stimulus_id="test")  # the client took the result: still done
    board.transition(first, "released", "processing", stimulus_id="test")  # its worker was lost: priced again
    assert job.counts()["running"] == 1
    board.log_event("distprice-pricing", _event("w2", 495, 1e6))
    _ended(board, first, "w2")
    assert job.done == [495.0, 1e6] and job.counts()["done"] == 1
    assert job.workers[("w1", "cpu")]["rows"] == 495 and job.workers[("w2", "cpu")]["seconds"] == 2.0
    for _ in (1, 2):  # two chunks priced at once on a worker of two threads
        board.log_event("distprice-pricing", _event("w1", 495, 1e6, "gpu-flat"))
    for i in (1, 2):
        _ended(board, f"price_gpu_flat_fp64-0-{i}-j", "w1")
    assert job.workers[("w1", "gpu-flat")]["rows"] == 990 and job.status() == "running"
    board.remove_worker(None, "w1", stimulus_id="test")
    board.log_event("distprice-pricing", _event("w1", 495, 1e6))
    _ended(board, "price_cpu_fp64-0-3-j", "w1")
    assert job.status() == "done" and job.seconds_left(200.0) == 0.0 and job.share_done() == 1.0
    assert [round(p[1]) for p in job.history] == [0, 495, 495, 990, 1485, 1980]
    assert board.state()["jobs"][0]["elapsed"] == job.ended - 100.0
    again = again_key("price_gpu_flat_fp64-0-2-j")  # a slice written again, its duplicate ids marked: replaces it
    board.transition(again, "waiting", "processing", stimulus_id="test")
    board.log_event("distprice-pricing", _event("w2", 490, 1e6, "gpu-flat"))
    _ended(board, again, "w2")
    assert job.done == [1980 - 495 + 490, 4e6] and job.counts() == {"done": 4, "running": 0, "failed": 0, "waiting": 0}


def test_failed_chunks_and_errors_fail_the_job_and_other_keys_are_not_its_chunks():
    board = JobBoard()
    board.log_event("distprice-job", {"job": "abc", "rows": 10, "chunks": 2, "predicted_seconds": 1.0})
    assert board.job_of("price_gpu_flat_fp64-0-1-abc") is board.jobs["abc"]
    assert board.job_of("mc_paths_cpu_fp64-large-0-abc") is board.jobs["abc"]
    assert board.job_of("gather-0-abc") is None and board.job_of(("x", 0)) is None
    _ended(board, "price_cpu_fp64-0-1-abc", "w", "erred")
    assert board.jobs["abc"].status() == "failed" and board.jobs["abc"].counts()["failed"] == 1
    board.log_event("distprice-job", {"job": "def", "rows": 10, "chunks": 2, "predicted_seconds": float("nan")})
    job = board.jobs["def"]  # a named engine's plan predicts nothing: the pace alone tells the end
    assert job.predicted_seconds == 0.0 and job.seconds_left(job.started + 5.0) is None
    _ended(board, "price_cpu_fp64-0-0-def", "w")
    assert job.seconds_left(job.started + 5.0) == pytest.approx(5.0)
    board.log_event("distprice-job", {"job": "def", "end": True, "error": "fp32 overflowed"})
    state = board.state()
    assert [j["status"] for j in state["jobs"]] == ["failed", "failed"] and state["current"] == "def"
    assert state["jobs"][0]["error"] == "fp32 overflowed"


def test_the_end_after_an_overrun_follows_the_measured_pace():
    # predicted 10 s; the job starts pricing after 2 s and ends at 60 s, at a steady pace
    def share(t):
        return max(0.0, (t - 2.0) / 58.0)

    def timeline(until):  # a point every half second, the last one now
        return [(0.0, 0.0)] + [(t, share(t)) for t in [*np.arange(2.5, until, 0.5), until]]

    for elapsed in (9.25, 16.5, 20.0, 40.0, 59.0):  # 12.5 % and 25 % done, then well past the prediction
        left = seconds_left(timeline(elapsed), elapsed, 10.0)
        assert left == pytest.approx(60.0 - elapsed, rel=0.1)
        assert seconds_left(timeline(elapsed), elapsed, 0.0) == pytest.approx(60.0 - elapsed, rel=1e-9)
    assert seconds_left(timeline(16.5), 16.5, 10.0) == pytest.approx(43.5, rel=1e-9)  # overrun: the pace alone
    assert seconds_left([(0.0, 0.0)], 4.0, 10.0) == 6.0  # nothing done yet: the prediction
    assert seconds_left([(0.0, 0.0)], 12.0, 10.0) is None  # nothing done past the prediction: not known
    assert seconds_left([(0.0, 0.0), (3.0, 1.0)], 3.0, 10.0) == 0.0


def test_workers_that_share_a_machine_are_predicted_as_one_pricing_in_this_process(book):
    from distprice.cluster.tasks import pricing_share
    from distprice.families import Workers, lattice
    from distprice.inspector import CostModel
    from distprice.job import JobOptions

    def cpu(host, threads=1, cores=2):
        return {"gpu": False, "place": None, "host": host, "threads": threads, "cores": cores}

    def gpu(place):
        return {"gpu": True, "place": place, "host": place.split("/")[0], "threads": 1, "cores": 16}

    assert pricing_share([cpu("a"), cpu("a")]) == 0.5  # two workers sharing the cores of one machine
    assert pricing_share([cpu("a", 2), cpu("b", 2)]) == 1.0  # a machine each
    assert pricing_share([cpu("a", 1, 4), cpu("a", 1, 4)]) == 0.25  # half of one machine's cores in all
    assert pricing_share([gpu("a/0"), gpu("a/0"), gpu("a/1"), gpu("a/1")]) == 0.5  # two processes a GPU
    model = CostModel("cpu")
    read = lattice.read(book, JobOptions.of(engine="auto").checked())
    one = Workers(2, 4, False, model.to_json(), task_seconds=0, pricing_share=0.5)  # 4 chunks of 2 000 rows
    work = lattice.split(read, one)
    plans = work.outline.predicted  # each chunk's seconds on its worker: its plan's over the worker's share
    assert len(plans) == 4
    in_process = sum(plans) * 0.5
    assert work.figures["predicted_seconds"] == pytest.approx(in_process, rel=1e-12)  # not halved by 2 workers
    assert work.figures["cost_model"] == "default"  # the model's own: CostModel's figures as they are
    lone = lattice.split(read, Workers(2, 1, False, model.to_json(), pricing_share=0.5))  # one chunk: one worker
    assert len(lone.chunks) == 1 and lone.figures["predicted_seconds"] == pytest.approx(2 * in_process, rel=1e-12)
    two = lattice.split(read, Workers(2, 4, False, model.to_json(), task_seconds=0, pricing_share=1.0))
    assert two.figures["predicted_seconds"] == pytest.approx(in_process / 2, rel=1e-12)  # two machines
    outline = work.outline
    assert np.array_equal(np.concatenate(outline.chunks), np.arange(len(book)))
    assert sorted(np.concatenate([p.rows for p in outline.plan.parts]).tolist()) == list(range(len(book)))
    assert outline.times({outline.names[0][0]: 1.5}) == [(plans[0], 1.5)] + [
        (p, pytest.approx(float("nan"), nan_ok=True)) for p in plans[1:]
    ]


def test_a_chunk_moves_the_page_as_it_is_priced_and_its_end_replaces_its_pieces():
    board = JobBoard()
    board.clock = lambda: 100.0
    post = {"job": "j", "rows": 1000, "chunks": 2, "node_steps": 4e6, "predicted_seconds": 8.0}
    board.log_event("distprice-job", {**post, "cost_model": "default (cpu)"})
    job = board.jobs["j"]
    key = "price_cpu_fp64-0-0-j"
    board.transition(key, "waiting", "processing", stimulus_id="test")
    for rows, steps in ((100.0, 4e5), (300.0, 1.2e6)):
        board.log_event(PIECE_TOPIC, {"key": key, "rows": rows, "node_steps": steps})
    assert job.done == [300.0, 1.2e6] and job.share_done() == pytest.approx(0.3)
    board.log_event(PIECE_TOPIC, {"key": "price_cpu_fp64-0-0-other", "rows": 5.0, "node_steps": 5.0})  # not this job
    board.log_event("distprice-pricing", _event("w1", 500, 2e6))
    _ended(board, key, "w1")
    assert job.done == [500.0, 2e6]
    board.log_event(PIECE_TOPIC, {"key": key, "rows": 400.0, "node_steps": 1.6e6})  # late: the chunk is done
    assert job.done == [500.0, 2e6] and [p[2] for p in job.history] == [0.0, 4e5, 1.2e6, 2e6]
    state = board.state()["jobs"][0]
    assert state["cost_model"] == "default (cpu)" and "untuned default cost model" in headline(state)
    board.log_event("distprice-job", {**post, "cost_model": "tuned 2026-11-20"})
    assert "untuned" not in headline(board.state()["jobs"][0])


def test_without_a_prediction_the_plot_draws_no_dashed_line():
    board = JobBoard()
    view = JobView(board)
    board.log_event("distprice-job", {"job": "a", "rows": 10, "chunks": 1, "predicted_seconds": 0.0})
    view.update()
    assert view.predicted.data == {"t": [], "rows": []} and "dashed" not in view.rows_plot.title.text
    assert "no prediction" in view.headline.text
    board.log_event("distprice-job", {"job": "b", "rows": 10, "chunks": 1, "predicted_seconds": 4.0})
    view.update()
    assert view.predicted.data == {"t": [0.0, 4.0], "rows": [0, 10]} and "dashed" in view.rows_plot.title.text


def test_a_page_refused_its_websocket_logs_one_line_not_a_traceback(local, caplog):
    import asyncio

    from bokeh.util.token import generate_jwt_token, generate_session_id
    from tornado.websocket import websocket_connect

    register(local)
    port = local.scheduler_info()["services"]["dashboard"]

    async def connect(subprotocols):
        connection = await websocket_connect(f"ws://127.0.0.1:{port}/status/ws", subprotocols=subprotocols)
        return await connection.read_message()  # refused: closed at once

    expired = generate_jwt_token(generate_session_id(), expiration=-10)  # a page open past its session's life
    with caplog.at_level("INFO"):
        assert asyncio.run(connect(["bokeh", expired])) is None
        assert asyncio.run(connect(None)) is None  # no Bokeh page at all
        local.run_on_scheduler(lambda: None)  # the scheduler has handled both
    assert not [r for r in caplog.records if r.name == "tornado.application"]
    told = [r.getMessage() for r in caplog.records if r.name == "distprice.cluster.dashboard"]
    assert len(told) == 2 and "Token is expired" in told[0] and "reload the page" in told[0]
    assert "/status/ws" in told[1] and "Subprotocol" in told[1]


def _json(url):
    with urlopen(url + ".json", timeout=10) as response:
        return json.loads(response.read())


def test_the_page_follows_a_job_on_a_loopback_cluster(local, book):
    url = register(local)
    assert url.startswith("http://127.0.0.1:") and url.endswith(PAGE)
    assert register(local) == url  # the plugin is loaded once
    instruments = instruments_of(book)
    geometry = instruments.geometry
    chunks = [np.arange(r.start, r.stop) for r in spans(geometry.width * geometry.height, 4)]
    pieces = [instruments.take(c) for c in chunks]
    token = uuid.uuid4().hex
    post_job(
        local,
        token,
        rows=len(book),
        invalid=0,
        chunks=len(pieces),
        node_steps=instruments.node_steps,
        predicted_seconds=30.0,
        name="book of 8000",
    )

    def submit(i):
        piece = pieces[i]
        return local.submit(
            run_chunk,
            price_chunk,
            piece,
            [builtin_curves()],
            fixed_plan("cpu", len(piece)).parts,
            np.dtype(np.float64),
            key=f"{task_name(['cpu'], np.float64)}-0-{i}-{token}",
        )

    first = [submit(0), submit(1)]
    wait(first)
    done_rows = len(pieces[0]) + len(pieces[1])
    job = next(j for j in _json(url)["jobs"] if j["job"] == token)
    assert job["status"] == "running" and job["rows"] == len(book) == 8000
    assert job["done_rows"] == done_rows and job["chunk_counts"] == {"done": 2, "running": 0, "failed": 0, "waiting": 2}
    assert job["done_node_steps"] == pytest.approx(sum(p.node_steps for p in pieces[:2]))
    assert 0 < job["seconds_left"] and {w["engine"] for w in job["workers"]} == {"cpu"}
    # each chunk told its first piece before its end: the page moved within it
    assert len(job["history"]) >= 1 + 2 * 2 and job["history"] == sorted(job["history"], key=lambda p: p[2])
    for page in (url, url.replace(PAGE, "/status")):  # in Dask's frame, whose menu links the page
        with urlopen(page, timeout=10) as response:
            assert response.status == 200 and 'href="distprice"' in response.read().decode()
    if chromium() is not None:
        shown = render_page(
            url,
            ready="document.body.innerText.length > 0 && window.Bokeh !== undefined "
            "&& Object.keys(Bokeh.index).length > 0",
        )
        assert "book of 8000" in shown.text and f"{done_rows:,}" in shown.text and "8,000" in shown.text
        assert shown.errors == []
    rest = [submit(2), submit(3)]
    wait(rest)
    end_job(local, token)
    job = next(j for j in _json(url)["jobs"] if j["job"] == token)
    assert job["status"] == "done" and job["done_rows"] == 8000 and job["seconds_left"] == 0.0
    assert job["done_node_steps"] == pytest.approx(instruments.node_steps)
    assert sum(w["rows"] for w in job["workers"]) == 8000
    workers = job_workers(local, token)  # what the job report takes as its workers' totals
    assert set(workers) <= set(local.scheduler_info()["workers"]) and sum(w["rows"] for w in workers.values()) == 8000
    assert sum(w["node_steps"] for w in workers.values()) == pytest.approx(instruments.node_steps)
    assert job_workers(local, "no such job") == {}
    del first, rest


@pytest.mark.slow
def test_a_scheduler_started_with_the_preload_serves_the_page():
    import subprocess
    import sys

    from distributed import Client
    from distributed.utils_test import popen

    from utils import free_port

    port = free_port()
    with (
        popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--dashboard-address",
                "127.0.0.1:0",
                "--preload",
                "distprice.cluster.dashboard",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        Client(f"tcp://127.0.0.1:{port}", timeout=30) as client,
    ):
        url = client.dashboard_link.rsplit("/", 1)[0] + PAGE
        assert url.startswith("http://127.0.0.1:")
        post_job(client, "nightly", rows=10, chunks=1, predicted_seconds=1.0)
        (job,) = _json(url)["jobs"]
        assert job["job"] == "nightly" and job["status"] == "running" and job["expected"] == 10
        assert register(client) == url  # the client's registration keeps the preloaded plugin
        assert len(_json(url)["jobs"]) == 1
