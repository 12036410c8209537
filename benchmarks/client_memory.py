"""The client's peak memory on a big job: the workers read the portfolio, the client holds the plan.

    python benchmarks/client_memory.py OUTPUT_DIR [--rows 10000000] [--dataset S2] [--workers 2]
        [--shift-count N] [--scenario-table long|wide|full] [--local]

Writes ``--rows`` rows of the dataset (copies at other seeds, ids renumbered) to
``OUTPUT_DIR/portfolio.parquet``, starts a ``dask scheduler`` and ``--workers`` single-threaded
``dask worker`` processes on loopback, and runs ``distprice run --cluster tcp://...`` as a child process;
its peak resident memory is what the operating system reports for it when it ends. With ``--local`` the child
starts its own local cluster instead (``distprice run`` alone: the scheduler then lives in the client's
process, and is counted with it). ``--shift-count N`` prices every row under N parallel shifts 10 bp apart,
centred on 0, in the ``--scenario-table`` form. Writes ``client_memory.json`` and ``client_memory.md``.
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
    parser.add_argument("--shift-count", type=int, default=0, help="N shifts 10 bp apart, centred on 0")
    parser.add_argument("--scenario-table", choices=("long", "wide", "full"), default=None)
    parser.add_argument("--local", action="store_true", help="the child starts a local cluster of its own")
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    path, output = args.output_dir / "portfolio.parquet", args.output_dir / "priced.parquet"
    write_copies(path, args.dataset, args.rows)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    job = []
    if args.shift_count:
        shifts = [10 * (k - (args.shift_count - 1) / 2) for k in range(args.shift_count)]
        job += [f"--shifts-bp={','.join(f'{s:g}' for s in shifts)}"]
    if args.scenario_table:
        job += ["--scenario-table", args.scenario_table]
    cluster = (
        []
        if args.local
        else [
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
    )
    cluster += [
        subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1", "--memory-limit", "0"],
            stderr=subprocess.DEVNULL,
        )
        for _ in range(0 if args.local else args.workers)
    ]
    try:
        time.sleep(0 if args.local else 5)
        tick = time.perf_counter()
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "distprice.cli",
                "run",
                *([] if args.local else ["--cluster", address]),
                *job,
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
        "workers": "local" if args.local else args.workers,
        "shifts": args.shift_count,
        "scenario_table": args.scenario_table,
        "seconds": seconds,
        "client_peak_mib": peak_mib,
        "file_mib": path.stat().st_size / 2**20,
        "output_mib": output.stat().st_size / 2**20,
        "summary": run.stdout.strip(),
        "date": time.strftime("%Y-%m-%d"),
    }
    lines = [
        "| rows | shifts | table | dataset | workers | job s | client peak MiB | portfolio MiB | priced MiB |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|",
        f"| {args.rows} | {args.shift_count} | {args.scenario_table or 'default'} | {args.dataset} | "
        f"{report['workers']} | {seconds:.1f} | {peak_mib:.0f} | {report['file_mib']:.0f} | "
        f"{report['output_mib']:.0f} |",
        "",
        run.stdout.strip(),
    ]
    save(args.output_dir, "client_memory", report, lines)


if __name__ == "__main__":
    main()
