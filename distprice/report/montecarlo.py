"""The Monte-Carlo family's section: a table of ``price_mc`` rows (one per job and market model) with each
price, its standard error (from batches), paths and speed, and the prices with ±2 standard errors.

Speed is path-date-underlyings per second (PDU/s = paths · dates · underlyings · models of the job / its
seconds) when the table has ``dates`` and ``underlyings`` columns, else paths per second.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..montecarlo.job import BATCHES
from . import plots
from .document import Figure, Section, Table
from .inputs import JobRecord

COLUMNS = ("job", "model", "price", "stderr_batches", "paths", "seconds")
"""The columns of ``distprice.price_mc``'s table this section reads."""


def speed(table: pd.DataFrame) -> tuple[str, pd.Series]:
    """The name and value per row of the job's speed (see the module docstring)."""
    models = table.groupby("job")["job"].transform("size")
    if {"dates", "underlyings"} <= set(table.columns):
        return "PDU/s", table["paths"] * table["dates"] * table["underlyings"] * models / table["seconds"]
    return "paths/s", table["paths"] / table["seconds"]


def paths_section(record: JobRecord) -> Section:
    table = record.priced
    section = Section("paths", "Monte-Carlo prices")
    per_job = table.drop_duplicates("job")
    section.figures = [
        Figure("jobs", "jobs", len(per_job)),
        Figure("rows", "prices (job × model)", len(table)),
        Figure("paths", "paths (all jobs)", int(per_job["paths"].sum())),
        Figure("seconds", "seconds (all jobs)", float(per_job["seconds"].sum()), "s", style="seconds"),
    ]
    name, rate = speed(table)
    shown = table[
        [
            c
            for c in ("job", "model", "contract", "price", "stderr_batches", "paths", "precision", "engine", "seconds")
            if c in table.columns
        ]
    ].assign(**{name: rate})
    section.tables.append(Table.of("prices", "Prices", shown, {"price": "precise", "seconds": "seconds"}))
    section.plots.append(price_plot(table))
    section.notes.append(
        f"Standard errors from {BATCHES} equal batches of paths; the whiskers span ±2 standard errors. Speed: {name}."
    )
    return section


def price_plot(table: pd.DataFrame):
    """Each price as a dot with whiskers of ±2 standard errors, one line per (job, model)."""
    from bokeh.models import ColumnDataSource, Whisker

    labels = [f"{j} / {m}" for j, m in zip(table["job"], table["model"])]
    price, error = table["price"].to_numpy(dtype=np.float64), table["stderr_batches"].to_numpy(dtype=np.float64)
    source = ColumnDataSource(dict(label=labels, price=price, lower=price - 2 * error, upper=price + 2 * error))
    fig = plots.plot(
        "Prices with ±2 standard errors",
        height=max(140, 60 + plots.BAR_HEIGHT * len(labels)),
        y_range=list(reversed(labels)),
    )
    fig.scatter("price", "label", source=source, size=8, color=plots.COLORS[0])
    fig.add_layout(Whisker(source=source, base="label", lower="lower", upper="upper", dimension="width"))
    fig.xaxis.axis_label = "price"
    return fig
