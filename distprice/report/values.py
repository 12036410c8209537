"""The values section: the book's total value (Σ ``value`` = Σ price × quantity over priced rows, in the units
of ``face``), its split by instrument type, exercise style and curve, the largest positions, and for
scenario runs the book's value under each scenario (a ladder when the scenarios are parallel shifts named
like ``-100bp``)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..job import SCENARIO_COLUMN
from . import plots
from .document import Figure, Section, Table
from .inputs import JobRecord, priced_mask

BREAKDOWNS = {"instrument": "instrument type", "exercise": "exercise style", "curve": "curve"}
LARGEST = 10
"""Positions listed, by absolute value."""
SHIFT = re.compile(r"^([+-]?\d+(?:\.\d+)?)bp$")
POSITION_COLUMNS = ("id", "instrument", "exercise", "curve", "quantity", "price", "value")
MONEY = ",.2f"


def by_label(labels: pd.Series, value: np.ndarray, column: str) -> pd.DataFrame:
    """Rows and Σ ``value`` per label (missing labels as ``(none)``), largest |value| first."""
    codes, names = pd.factorize(labels)
    names = [str(n) for n in names] + ["(none)"]
    codes = np.where(codes < 0, len(names) - 1, codes)
    rows = np.bincount(codes, minlength=len(names))
    table = pd.DataFrame(
        {column: names, "rows": rows, "value": np.bincount(codes, weights=value, minlength=len(names))}
    )[rows > 0]
    return table.iloc[np.argsort(-table["value"].abs().to_numpy(), kind="stable")].reset_index(drop=True)


def largest(book: pd.DataFrame, value: np.ndarray, count: int) -> pd.DataFrame:
    """The (at most) ``count`` rows of largest |value|, largest first; rows without a value are left out."""
    size = np.nan_to_num(np.abs(value), nan=-1.0)
    top = np.argpartition(-size, count - 1)[:count] if len(size) > count else np.arange(len(size))
    top = top[np.argsort(-size[top], kind="stable")]
    top = book.iloc[top[size[top] >= 0]][[c for c in POSITION_COLUMNS if c in book.columns]]
    return top.assign(id=top["id"].astype(str)) if "id" in top.columns else top


def scenario_values(priced: pd.DataFrame) -> pd.DataFrame:
    """The book's value under each scenario, in table order."""
    grouped = priced["value"].groupby(priced[SCENARIO_COLUMN].astype("string"), sort=False)
    return pd.DataFrame({"scenario": grouped.sum().index.astype(str), "value": grouped.sum().to_numpy()})


def values_section(record: JobRecord) -> Section:
    book = record.book
    total = float(np.nansum(record.column("value")))
    section = Section("values", "Values")
    section.figures.append(Figure("total_value", "total value (Σ value)", total, spec=MONEY))
    if record.scenarios:
        section.notes.append(f"Breakdowns and positions under the base scenario {record.base_scenario!r}.")
    priced = priced_mask(book)
    value = record.column("value")
    for column, label in BREAKDOWNS.items():
        if column not in book.columns:
            continue
        table = by_label(book[column][priced], value[priced], column)
        section.plots.append(
            plots.bars(
                table[column],
                table["value"],
                f"Value by {label}",
                "value",
                counts=table["rows"],
                color=plots.COLORS[len(section.plots)],
                money=True,
            )
        )
        section.tables.append(Table.of(f"value_by_{column}", f"Value by {label}", table, {"value": MONEY}))
    if priced.any():
        top = largest(book, np.where(priced, value, np.nan), LARGEST)
        section.tables.append(
            Table.of(
                "largest",
                f"The {len(top)} largest positions (by |value|)",
                top,
                {"price": ",.6g", "value": MONEY, "quantity": ",g"},
            )
        )
    if record.scenarios:
        ladder = scenario_values(record.priced)
        base = float(ladder.loc[ladder["scenario"] == record.base_scenario, "value"].iloc[0])
        ladder["change"] = ladder["value"] - base
        shifts = [SHIFT.match(s) for s in ladder["scenario"]]
        if all(shifts):
            bp = [float(m.group(1)) for m in shifts]
            section.plots.append(
                plots.ladder(bp, ladder["value"], "The book's value under parallel shifts", "shift (bp)", "value")
            )
        else:
            section.plots.append(
                plots.bars(ladder["scenario"], ladder["value"], "The book's value by scenario", "value", money=True)
            )
        section.tables.append(
            Table.of("scenarios", "The book's value by scenario", ladder, {"value": MONEY, "change": MONEY})
        )
    return section
