"""The job section of a lattice report: rows priced and invalid, scenarios, the whole job's wall time and its
phases, kernel time, node-steps per second (NS/s = Σ 2 · width · height over priced rows and scenarios / seconds),
workers, devices and the engine of each row."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from ..lattice.geometry import node_steps
from . import plots
from .document import Figure, Section, Table
from .inputs import PHASES, WORKER_TOTALS, JobRecord, invalid_mask, priced_mask


def priced_node_steps(frame: pd.DataFrame) -> float:
    """Node-steps (:func:`~distprice.lattice.geometry.node_steps`) of the priced rows of ``frame``, summed (every
    scenario's rows count)."""
    done = priced_mask(frame)
    width = pd.to_numeric(frame["width"], errors="coerce").to_numpy(dtype=np.float64, na_value=0.0)
    height = pd.to_numeric(frame["height"], errors="coerce").to_numpy(dtype=np.float64, na_value=0.0)
    return float(node_steps(width[done], height[done]).sum())


def wall_seconds(record: JobRecord) -> float | None:
    """The whole job's wall time: the sum of its phases when they are given (``distprice run`` gives them all,
    its cluster's start and stop included, so this is the total it prints), else the summary's, else None."""
    if record.timings:
        return float(sum(record.timings.values()))
    return float(record.summary.seconds) if record.summary is not None else None


def devices(workers: dict[str, dict]) -> str | None:
    """``2 × NVIDIA H100 80GB HBM3, 1 × cpu``: the workers' devices, counted."""
    named = Counter(str(w["device"]) for w in workers.values() if w.get("device"))
    return ", ".join(f"{n} × {name}" for name, n in named.items()) or None


def job_section(record: JobRecord) -> Section:
    book = record.book
    steps = priced_node_steps(record.priced)
    wall = wall_seconds(record)
    section = Section("job", "The job")
    figures = [
        Figure("rows", "rows", len(book)),
        Figure("rows_priced", "rows priced", int(priced_mask(book).sum())),
        Figure("rows_invalid", "rows invalid", int(invalid_mask(book).sum())),
        Figure("scenarios", "scenarios", max(1, len(record.scenarios))),
        Figure("node_steps", "node-steps", steps),
    ]
    if wall is not None:
        label = "wall time (the whole job)" if record.timings else "wall time (the job's summary)"
        figures.append(Figure("wall_seconds", label, wall, "s", style="seconds"))
    for phase, name in PHASES.items():
        if phase in record.timings:
            figures.append(Figure(f"{phase}_seconds", f"… {name}", record.timings[phase], "s", style="seconds"))
    workers = record.workers
    if workers:
        figures.append(
            Figure(
                "kernel_seconds",
                "kernel time (all workers)",
                sum(w["kernel_seconds"] for w in workers.values()),
                "s",
                style="seconds",
            )
        )
    timed = next((p for p in ("price", "job") if p in record.timings), None)
    pricing = record.timings[timed] if timed is not None else wall
    if pricing:
        basis = f"{timed} phase" if timed is not None else "wall time"
        figures.append(Figure("node_steps_per_second", f"node-steps per second ({basis})", steps / pricing))
    count = len(workers) or (record.summary.workers if record.summary is not None else None)
    if count is not None:
        figures.append(Figure("workers", "workers", int(count)))
    named = devices(workers)
    if named:
        figures.append(Figure("devices", "devices", named))
    section.figures = figures
    if record.timings:
        shown = [p for p in PHASES if p in record.timings]
        section.plots.append(
            plots.phases([PHASES[p] for p in shown], [record.timings[p] for p in shown], "Wall time by phase")
        )
    engines = book["engine"].dropna().astype(str).value_counts()
    if len(engines):
        section.plots.append(plots.bars(engines.index, engines.to_numpy(), "Rows by engine", "rows"))
        section.tables.append(
            Table.of("engines", "Engines per row", pd.DataFrame({"engine": engines.index, "rows": engines.to_numpy()}))
        )
    if workers:
        table = pd.DataFrame(
            [
                {"worker": name, "device": totals.get("device", ""), **{k: totals[k] for k in WORKER_TOTALS}}
                for name, totals in workers.items()
            ]
        )
        table["node_steps_per_second"] = table["node_steps"] / table["seconds"].where(table["seconds"] > 0)
        section.plots.append(
            plots.bars(
                table["worker"],
                table["node_steps_per_second"].fillna(0.0),
                "Node-steps per second of pricing, by worker",
                "node-steps / s",
            )
        )
        section.tables.append(
            Table.of(
                "workers",
                "Workers (seconds in pricing tasks; rows × scenarios)",
                table,
                {"seconds": "seconds", "kernel_seconds": "seconds"},
            )
        )
    section.notes.append(
        "Node-steps count Σ 2 · width · height over priced rows and scenarios. "
        "Kernel time is the part of pricing spent in the GPU kernels or the CPU engine's loops."
    )
    return section
