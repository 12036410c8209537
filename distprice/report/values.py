"""The values section: the book's total value (Σ ``value`` over priced rows: price × quantity in the units of
``face``, or price / 100 × notional) in its currency, its split by instrument type, exercise style and curve, the
largest positions, and for scenario runs the book's value under each scenario (a ladder when the scenarios are
parallel shifts named like ``-100bp``).

A row's currency is its ``currency`` column, else its curve's id when every id names a currency (``USD``:
:attr:`~.inputs.JobRecord.currencies`); a book of rows that do not say is valued "in the portfolio's currency", and
a book of several currencies gets a total per currency, its breakdowns split by currency too."""

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
POSITION_COLUMNS = ("id", "instrument", "exercise", "curve", "currency", "quantity", "notional", "price", "value")
UNKNOWN = "in the portfolio's currency"
"""What a value is in when no row says its currency."""


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
    section = Section("values", "Values")
    priced = priced_mask(book)
    value = record.column("value")
    currency = record.currencies
    names = sorted(set(currency[priced])) if currency is not None else []
    unit = names[0] if len(names) == 1 else UNKNOWN if currency is None else "by currency"
    if len(names) > 1:
        for name in names:
            mine = priced & (currency == name)
            section.figures.append(
                Figure(
                    f"total_value_{name}", f"total value in {name} (Σ value)", float(value[mine].sum()), name, "money"
                )
            )
    else:
        total = float(np.nansum(value))
        section.figures.append(
            Figure("total_value", "total value (Σ value)", total, names[0] if names else f"({UNKNOWN})", "money")
        )
    said = {0: f"{UNKNOWN}: no row names one (a currency column, or curves named by currency code such as USD)"}
    section.notes.append(
        f"Values {said.get(len(names), 'in ' + ', '.join(names))}; a row's value is its price / 100 × its notional, "
        "or its price × its quantity in the units of its face."
    )
    if record.scenarios:
        section.notes.append(f"Breakdowns and positions under the base scenario {record.base_scenario!r}.")
    for column, label in BREAKDOWNS.items():
        if column not in book.columns:
            continue
        labels = book[column].astype("string")
        if len(names) > 1 and column != "curve":
            labels = labels + " (" + pd.Series(currency, index=book.index, dtype="string") + ")"
        table = by_label(labels[priced], value[priced], column)
        section.plots.append(
            plots.bars(
                table[column],
                table["value"],
                f"Value by {label}",
                f"value ({unit})",
                counts=table["rows"],
                color=plots.COLORS[len(section.plots)],
            )
        )
        section.tables.append(Table.of(f"value_by_{column}", f"Value by {label} ({unit})", table, {"value": "money"}))
    if priced.any():
        top = largest(book, np.where(priced, value, np.nan), LARGEST)
        section.tables.append(
            Table.of(
                "largest",
                f"The {len(top)} largest positions (by |value|; price per 100 of face, value {unit})",
                top,
                {"price": "price", "value": "money"},
            )
        )
    if record.scenarios and len(names) > 1:
        section.notes.append("The book's value by scenario is left out: its rows are in several currencies.")
    elif record.scenarios:
        ladder = scenario_values(record.priced)
        base = float(ladder.loc[ladder["scenario"] == record.base_scenario, "value"].iloc[0])
        ladder["change"] = ladder["value"] - base
        shifts = [SHIFT.match(s) for s in ladder["scenario"]]
        if all(shifts):
            bp = [float(m.group(1)) for m in shifts]
            section.plots.append(
                plots.ladder(
                    bp, ladder["value"], "The book's value under parallel shifts", "shift (bp)", f"value ({unit})"
                )
            )
        else:
            section.plots.append(
                plots.bars(ladder["scenario"], ladder["value"], "The book's value by scenario", f"value ({unit})")
            )
        section.tables.append(
            Table.of(
                "scenarios", f"The book's value by scenario ({unit})", ladder, {"value": "money", "change": "money"}
            )
        )
    return section
