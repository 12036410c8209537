"""Where one whole job's time goes on a local cluster: Dask's task stream beside the client's own calls at the end
of the job (each part's copy into the joined file and its removal, the footer, the rename, the hidden folder's
removal), for each of ``--repeat`` runs after a warm-up run.

    python benchmarks/trace_job.py OUTPUT_DIR [--dataset R1] [--copies 10] [--workers 1] [--cpu]
        [--workers-per-gpu K] [--chunks-per-worker C] [--repeat 3] [--folder]

The portfolio is ``--copies`` copies of the dataset (``OUTPUT_DIR/portfolio.parquet``, as in ``dask_scaling.py``),
priced by ``Pricer.run`` into one Parquet file (``OUTPUT_DIR/priced.parquet``), or with ``--folder`` into a folder
of parts, on a ``local-cuda`` cluster of ``--workers`` GPUs, or ``--workers`` CPU workers with ``--cpu``. Writes
``trace_job.csv``, a row per task or call: ``run``, ``what`` (the task's key prefix, or the client's call),
``worker`` (``client`` for a call), ``start`` and ``stop`` in seconds from the start of the run's job, and ``job``
(the run's job seconds); and ``trace_job.md``, per run: the job's seconds, when its first read, check and pricing
task started, when its last pricing task ended, the tail after it, and the client's calls in that tail (copies
and removals of parts, in seconds summed, the footer's end and the hidden folder's removal). A call's time is its
wall time, waits included.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import threading
import time
from pathlib import Path

import pandas as pd
from distributed import get_task_stream

from distprice import join
from distprice.cluster.config import ClusterConfig
from distprice.cluster.pricer import Pricer
from distprice.lattice.datasets import DEFAULT_SIZES

from common import save, write_copies

PRICING = "price_"
"""The beginning of a pricing task's key."""


class Calls:
    """The client's calls of interest, each timed as ``(what, start, stop)`` in seconds from ``origin`` (the
    wrapped functions are put back on :meth:`close`)."""

    def __init__(self):
        self.origin, self.records, self._lock, self._restore = 0.0, [], threading.Lock(), []
        self._wrap(join, "_copy", "copy")  # a part's copy into the joined file, and its removal
        self._wrap(join.Joined, "close", "footer")
        self._wrap(os, "replace", "rename")
        self._wrap(Path, "rmdir", "rmdir")

    def _wrap(self, owner, name: str, what: str) -> None:
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.time()
            try:
                return original(*args, **kwargs)
            finally:
                with self._lock:
                    self.records.append((what, start - self.origin, time.time() - self.origin))

        setattr(owner, name, timed)
        self._restore.append((owner, name, original))

    def start(self, origin: float) -> None:
        self.origin, self.records = origin, []

    def close(self) -> None:
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)


def prefix(key) -> str:
    """A task's key prefix (``read-chunk-...`` → ``read``)."""
    return (key[0] if isinstance(key, tuple) else str(key)).split("-")[0]


def summary(rows: pd.DataFrame) -> dict:
    """One run's phases from its rows (seconds from the job's start)."""
    tasks, calls = rows[rows["worker"] != "client"], rows[rows["worker"] == "client"]
    pricing = tasks[tasks["what"].str.startswith(PRICING)]
    last = float(pricing["stop"].max())
    tail = calls[calls["stop"] > last]

    def first(what: str) -> float:
        started = tasks.loc[tasks["what"] == what, "start"]
        return float(started.min()) if len(started) else float("nan")

    def spent(what: str) -> float:
        chosen = tail[tail["what"] == what]
        return float((chosen["stop"] - chosen["start"].clip(lower=last)).sum())

    footer = calls.loc[calls["what"] == "footer", "stop"]
    rmdir = calls[calls["what"] == "rmdir"]
    return {
        "job_s": float(rows["job"].iloc[0]),
        "first_read_s": first("read"),
        "first_check_s": first("inspect"),
        "first_pricing_s": float(pricing["start"].min()),
        "last_pricing_s": last,
        "tail_s": float(rows["job"].iloc[0]) - last,
        "tail_copies_s": spent("copy"),
        "footer_after_s": float(footer.max()) - last if len(footer) else float("nan"),
        "rmdir_s": float((rmdir["stop"] - rmdir["start"]).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--dataset", default="R1")
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--workers", type=int, default=1, help="GPUs, or CPU workers with --cpu")
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--workers-per-gpu", type=int)
    parser.add_argument("--chunks-per-worker", type=int)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--folder", action="store_true")
    args = parser.parse_args()
    args.output_dir.mkdir(parents=True, exist_ok=True)
    path = args.output_dir / "portfolio.parquet"
    rows = write_copies(path, args.dataset, args.copies * DEFAULT_SIZES[args.dataset], DEFAULT_SIZES[args.dataset])
    output = args.output_dir / ("priced" if args.folder else "priced.parquet")
    target = f"{output}/" if args.folder else str(output)
    config = ClusterConfig(
        kind="local" if args.cpu else "local-cuda",
        n_workers=args.workers,
        workers_per_gpu=None if args.cpu else args.workers_per_gpu,
        dashboard_address=None,
    )
    calls, records = Calls(), []
    try:
        with Pricer(config, chunks_per_worker=args.chunks_per_worker) as pricer:
            pricer.run(str(path), output=target)  # warm-up: kernels compiled, caches filled
            for run in range(args.repeat):
                if args.folder:
                    shutil.rmtree(output)
                else:
                    output.unlink()
                with get_task_stream(pricer.client) as stream:
                    gc.freeze()
                    start = time.time()
                    calls.start(start)
                    pricer.run(str(path), output=target)
                    job = time.time() - start
                    gc.unfreeze()
                for task in stream.data:
                    for part in task["startstops"]:
                        if part["action"] == "compute":
                            what = prefix(task["key"])
                            records.append(
                                (run, what, task["worker"], part["start"] - start, part["stop"] - start, job)
                            )
                records += [(run, what, "client", a, b, job) for what, a, b in calls.records]
    finally:
        calls.close()
    table = pd.DataFrame(records, columns=["run", "what", "worker", "start", "stop", "job"])
    runs = [{"run": run, **summary(table[table["run"] == run])} for run in range(args.repeat)]
    table.round(5).to_csv(args.output_dir / "trace_job.csv", index=False)
    kind = f"{args.workers} CPU workers" if args.cpu else f"{args.workers} GPU(s)"
    lines = [
        f"{args.copies}x{args.dataset} ({rows} rows) to {'a folder of parts' if args.folder else 'one file'}, {kind}, "
        f"{time.strftime('%Y-%m-%d')}; seconds from the job's start",
        "",
        "| run | job s | first read | first check | first pricing | last pricing ends | tail s | copies in the tail s "
        "| footer after last pricing s | rmdir s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['run']} | {r['job_s']:.3f} | {r['first_read_s']:.3f} | {r['first_check_s']:.3f} | "
        f"{r['first_pricing_s']:.3f} | {r['last_pricing_s']:.3f} | {r['tail_s']:.3f} | {r['tail_copies_s']:.3f} | "
        f"{r['footer_after_s']:.3f} | {r['rmdir_s']:.4f} |"
        for r in runs
    ]
    save(args.output_dir, "trace_job", {"rows": rows, "runs": runs}, lines)


if __name__ == "__main__":
    main()
