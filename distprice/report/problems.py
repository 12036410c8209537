"""The problems section: the invalid rows counted by column and rule, with the first rows of each, from the
``error`` column. An error holds one or more problems joined by ``"; "``, each
``row N (id X), column 'c': rule`` (``row N (id X): rule`` for a rule of the whole row)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import plots
from .document import Figure, Section, Table
from .inputs import JobRecord, invalid_mask

PROBLEM = (
    r"row (?P<row>\d+) \(id (?P<id>.*?)\)(?:, column '(?P<column>[^']*)')?: "
    r"(?P<rule>.*?)(?=; row \d+ \(id |$)"
)
FIRST_ROWS = 5
"""Rows named per rule."""


def parse_problems(errors: pd.Series) -> pd.DataFrame:
    """One line per problem of each error text: ``row`` (1-based, as the text says), ``id``, ``column``,
    ``rule``; a text that does not follow the pattern is one problem whose rule is the text."""
    errors = errors.dropna().astype(str)
    found = errors.str.extractall(PROBLEM).reset_index(level=1, drop=True)
    found["row"] = pd.to_numeric(found["row"]).astype("Int64")
    loose = errors[~errors.index.isin(found.index)]
    if len(loose):
        found = pd.concat(
            [
                found,
                pd.DataFrame(
                    {"row": pd.array([pd.NA] * len(loose), dtype="Int64"), "id": "", "column": pd.NA, "rule": loose},
                    index=loose.index,
                ),
            ]
        )
    found["column"] = found["column"].fillna("(row)")
    return found


def count_problems(problems: pd.DataFrame) -> pd.DataFrame:
    """Problems per (column, rule), most first, with the rows (and ids) of the first few."""

    def first(group: pd.DataFrame) -> str:
        named = [
            f"{r} ({i})" for r, i in zip(group["row"].head(FIRST_ROWS), group["id"].head(FIRST_ROWS)) if pd.notna(r)
        ]
        return ", ".join(named) + (", …" if len(group) > FIRST_ROWS else "")

    grouped = problems.groupby(["column", "rule"], sort=False)
    table = pd.DataFrame({"rows": grouped.size(), "first rows (id)": grouped.apply(first, include_groups=False)})
    table = table.reset_index()
    return table.iloc[np.argsort(-table["rows"].to_numpy(), kind="stable")].reset_index(drop=True)


def problems_section(record: JobRecord) -> Section:
    book = record.book
    invalid = book[invalid_mask(book)]
    problems = parse_problems(invalid["error"])
    section = Section("problems", "Problems")
    section.figures = [
        Figure("invalid_rows", "invalid rows", len(invalid)),
        Figure("problems", "problems found", len(problems)),
    ]
    if len(problems):
        table = count_problems(problems)
        labels = [f"{c}: {r}" for c, r in zip(table["column"], table["rule"])]
        section.plots.append(
            plots.bars(labels, table["rows"], "Problems by column and rule", "problems", color=plots.COLORS[3])
        )
        section.tables.append(Table.of("problems", "Problems by column and rule", table))
        section.notes.append("A row may break several rules: each counts once per rule.")
    else:
        section.notes.append("Every row is valid.")
    return section
