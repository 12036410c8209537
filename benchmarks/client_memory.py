"""The client's peak memory on a big job: the workers read the portfolio, the client holds the plan.

    python benchmarks/client_memory.py OUTPUT_DIR [--rows 10000000] [--dataset S2] [--workers 2]

Writes ``--rows`` rows of the dataset (copies at other seeds, ids renumbered) to
``OUTPUT_DIR/portfolio.parquet``, starts a ``dask scheduler`` and ``--workers`` single-threaded
``dask worker`` processes on loopback, and runs ``distprice run --cluster tcp://...`` as a child process;
its peak resident memory is what the operating system reports for it when it ends. Writes
``client_memory.json`` and ``client_memory.md``.
"""

from __future__ import annotations

import argparse
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

from common import save, write_copies


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--dataset", default="S2")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    path, output = args.output_dir / "portfolio.parquet", args.output_dir / "priced.parquet"
    write_copies(path, args.dataset, args.rows)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    cluster = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--dashboard-address",
                ":0",
            ],
            stderr=subprocess.DEVNULL,
        )
    ]
    cluster += [
        subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1", "--memory-limit", "0"],
            stderr=subprocess.DEVNULL,
        )
        for _ in range(args.workers)
    ]
    try:
        time.sleep(5)
        tick = time.perf_counter()
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "distprice.cli",
                "run",
                "--cluster",
                address,
                "--portfolio",
                str(path),
                "--output",
                str(output),
                "--no-progress",
            ],
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - tick
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the client: the only child ended
    finally:
        for process in cluster:
            process.kill()
    if run.returncode:
        sys.exit(run.stderr)
    report = {
        "rows": args.rows,
        "dataset": args.dataset,
        "workers": args.workers,
        "seconds": seconds,
        "client_peak_mib": peak_mib,
        "file_mib": path.stat().st_size / 2**20,
        "output_mib": output.stat().st_size / 2**20,
        "summary": run.stdout.strip(),
        "date": time.strftime("%Y-%m-%d"),
    }
    lines = [
        "| rows | dataset | workers | job s | client peak MiB | portfolio file MiB | priced file MiB |",
        "|---:|---|---:|---:|---:|---:|---:|",
        f"| {args.rows} | {args.dataset} | {args.workers} | {seconds:.1f} | {peak_mib:.0f} | "
        f"{report['file_mib']:.0f} | {report['output_mib']:.0f} |",
        "",
        run.stdout.strip(),
    ]
    save(args.output_dir, "client_memory", report, lines)


if __name__ == "__main__":
    main()
