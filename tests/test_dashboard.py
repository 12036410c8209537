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

from distprice.cluster.dashboard import PAGE, JobBoard, again_key, end_job, job_workers, post_job, register
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
    # a quarter done after 5 s of a predicted 10: 0.75 * 5 (prediction) + 0.25 * 5 * 0.75 / 0.25 (pace)
    assert job.seconds_left(105.0) == pytest.approx(7.5)
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
