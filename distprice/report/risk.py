"""The risk section, when the priced table has measure columns: the book's DV01 and vega (Σ quantity ×
measure over priced rows), by curve; the key-rate ladder; the spread of OAS, effective duration and
convexity over rows; the rows whose OAS failed.

Per row, ``dv01`` and ``vega`` are in price units per basis point (of zero rate, of sigma), ``oas`` is a
continuously compounded spread (shown in bp), ``effective_duration`` and ``krd_<k>y`` are durations and
``effective_convexity`` a convexity, all per unit of price. A key-rate duration is turned into the book's
key-rate DV01 as Σ value × krd_k × 1 bp, so that the ladder adds up to about the book's DV01 (the key-rate
durations of a row add up to its effective duration).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..lattice.measures import COLUMNS
from . import plots
from .document import Figure, Section, Table
from .inputs import JobRecord, priced_mask

MEASURE_COLUMNS = tuple(column for columns in COLUMNS.values() for column in columns)
"""The measure columns a priced table may have, but the key rates' (:data:`~distprice.lattice.measures.COLUMNS`)."""
KEY_RATE = re.compile(r"^krd_(\d+(?:\.\d+)?)y$")
BP = 1e-4
ALL = "(all curves)"
"""The label of the book's row in the tables by curve."""
FAILED_SHOWN = 20
"""Rows whose OAS failed, listed (all are counted)."""


def key_rates(columns) -> dict[str, float]:
    """``krd_<k>y`` columns and their tenor in years, shortest first."""
    found = {c: float(m.group(1)) for c in columns if (m := KEY_RATE.match(str(c)))}
    return dict(sorted(found.items(), key=lambda item: item[1]))


def has_measures(priced: pd.DataFrame) -> bool:
    return any(c in priced.columns for c in MEASURE_COLUMNS) or bool(key_rates(priced.columns))


def _by_curve(frame: pd.DataFrame, amounts: dict[str, np.ndarray]) -> pd.DataFrame:
    """Σ of each amount per curve (NaN skipped), and a last row of the totals (:data:`ALL`)."""
    curves = (
        frame["curve"].astype("string").fillna("(none)").to_numpy()
        if "curve" in frame.columns
        else np.full(len(frame), "(all)")
    )
    table = pd.DataFrame(amounts).groupby(curves, sort=True).sum(min_count=1)
    table.loc[ALL] = table.sum(min_count=1)
    return table.rename_axis("curve").reset_index()


def ladder_plot(table: pd.DataFrame, tenors: dict[str, float]):
    """Key-rate DV01 against tenor, one line per curve."""
    from bokeh.models import ColumnDataSource, HoverTool

    fig = plots.plot("Key-rate DV01 ladder of the book, by curve")
    x = list(tenors.values())
    for i, (_, row) in enumerate(table[table["curve"] != ALL].iterrows()):
        source = ColumnDataSource(dict(x=x, y=[row[c] for c in tenors], curve=[row["curve"]] * len(x)))
        color = plots.COLORS[i % len(plots.COLORS)]
        fig.line("x", "y", source=source, color=color, line_width=2, legend_label=str(row["curve"]))
        fig.scatter("x", "y", source=source, color=color, size=7)
    fig.xaxis.axis_label, fig.yaxis.axis_label = "key rate (years)", "value per bp"
    fig.add_tools(HoverTool(tooltips=[("curve", "@curve"), ("key rate", "@x{0.[0]} y"), ("DV01", "@y{0,0.00}")]))
    fig.legend.location = "top_right"
    return fig


def risk_section(record: JobRecord) -> Section | None:
    book = record.book
    if not has_measures(book):
        return None
    section = Section("risk", "Risk")
    priced = priced_mask(book)

    def measure(name: str) -> np.ndarray:
        """The column over priced rows, NaN elsewhere."""
        return np.where(priced, record.column(name), np.nan)

    quantity = measure("quantity") if "quantity" in book.columns else np.where(priced, 1.0, np.nan)
    amounts = {m: quantity * measure(m) for m in ("dv01", "vega") if m in book.columns}
    if amounts:
        table = _by_curve(book, amounts)
        book_row = table[table["curve"] == ALL].iloc[0]
        for m in amounts:
            section.figures.append(
                Figure(f"book_{m}", f"book {m} (Σ quantity × {m})", float(book_row[m]), "per bp", style="money")
            )
        section.tables.append(
            Table.of("by_curve", "DV01 and vega by curve (value per bp)", table, dict.fromkeys(amounts, "money"))
        )
    tenors = key_rates(book.columns)
    if tenors:
        value = measure("value")
        ladder = _by_curve(book, {c: value * measure(c) * BP for c in tenors})
        total = float(ladder.loc[ladder["curve"] == ALL, list(tenors)].sum(axis=1).iloc[0])
        section.figures.append(
            Figure("key_rate_dv01_sum", "Σ key-rate DV01 of the book", total, "per bp", style="money")
        )
        section.plots.append(ladder_plot(ladder, tenors))
        section.tables.append(
            Table.of(
                "key_rates",
                "Key-rate DV01 by curve (Σ value × krd × 1 bp)",
                ladder.rename(columns={c: f"{t:g}y" for c, t in tenors.items()}),
                {f"{t:g}y": "money" for t in tenors.values()},
            )
        )
    spreads = {
        "oas": ("OAS", "bp", 1 / BP),
        "effective_duration": ("effective duration", "years", 1.0),
        "effective_convexity": ("effective convexity", "years²", 1.0),
    }
    for column, (label, unit, scale) in spreads.items():
        if column not in book.columns:
            continue
        values = measure(column)
        finite = values[np.isfinite(values)] * scale
        if len(finite):
            section.figures.append(
                Figure(f"{column}_median", f"{label}, median over rows", float(np.median(finite)), unit)
            )
        section.plots.append(plots.histogram(finite, f"{label} over rows", f"{label} ({unit})"))
    if "oas" in book.columns:
        failed = book[priced & np.isnan(record.column("oas")) & book["error"].notna().to_numpy()]
        section.figures.append(Figure("oas_failed", "rows whose OAS failed", len(failed)))
        if len(failed):
            columns = [c for c in ("id", "instrument", "curve", "error") if c in failed.columns]
            shown = failed[columns].head(FAILED_SHOWN).astype(str)  # ids are labels, not numbers
            section.tables.append(Table.of("oas_failed", f"Rows whose OAS failed (first {FAILED_SHOWN})", shown))
    section.notes.append(
        "DV01 and vega: value per basis point (of zero rate, of sigma). Key-rate DV01: "
        "Σ value × krd_k × 1 bp, so the ladder adds up to about the book's DV01. OAS in bp."
    )
    return section
