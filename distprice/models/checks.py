"""Checking a quotes table: every broken rule is collected with its row, id and column, then raised at once."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import InvalidInputError, Problem
from ..tables import check_names


class Checks:
    """The problems found in one input table (``name``, e.g. ``heston_quotes``) whose rows are labelled by the
    values of ``id_column`` (e.g. ``surface``); rows are numbered from 1 in messages, from 0 in positions."""

    def __init__(self, name: str, table: pd.DataFrame, id_column: str):
        self.name = name
        self.table = table
        self.id_column = id_column
        self.problems: list[Problem] = []

    def where(self, position: int) -> str:
        label = ""
        if self.id_column in self.table.columns:
            value = self.table[self.id_column].iloc[position]
            label = "" if pd.isna(value) else f" ({self.id_column} '{value}')"
        return f"{self.name} row {position + 1}{label}"

    def flag(self, mask, column: str | None, rule: str) -> None:
        """One problem per row where ``mask`` is true."""
        for position in np.flatnonzero(np.asarray(mask, dtype=bool)):
            self.problems.append(Problem(int(position), self.where(int(position)), column, rule))

    def flag_at(self, positions, column: str | None, rule: str) -> None:
        """One problem per row position in ``positions``."""
        mask = np.zeros(len(self.table), dtype=bool)
        mask[np.asarray(positions, dtype=np.int64)] = True
        self.flag(mask, column, rule)

    def require(self, columns, known=()) -> bool:
        """Whether every column in ``columns`` is present (a problem for each one missing) and no column misspells
        one of them or of the optional ``known`` (:func:`~distprice.tables.check_names`)."""
        missing = [c for c in columns if c not in self.table.columns]
        for column in missing:
            self.problems.append(Problem(None, self.name, column, f"{self.name} must have this column"))
        misspelled = check_names(self.name, self.table.columns, (*columns, *known))
        self.problems += misspelled
        return not missing and not misspelled

    def number(self, column: str, default: float | None = None) -> np.ndarray:
        """The column as float64: empty cells take ``default`` (a problem if there is none); text that is not a
        number is a problem and reads as NaN."""
        if column not in self.table.columns:
            return np.full(len(self.table), np.nan if default is None else default)
        raw = self.table[column]
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
        empty = raw.isna().to_numpy()
        self.flag(~empty & np.isnan(values), column, "must be a number")
        if default is None:
            self.flag(empty, column, "is required")
        else:
            values[empty] = default
        return values

    def label(self, column: str, default: str | None = None) -> np.ndarray:
        """The column as an object array of str: empty cells take ``default`` (a problem if there is none)."""
        if column not in self.table.columns:
            return np.full(len(self.table), default, dtype=object)
        raw = self.table[column]
        empty = raw.isna().to_numpy()
        if default is None:
            self.flag(empty, column, "is required")
        return np.array([default if e else str(v) for v, e in zip(raw, empty)], dtype=object)

    def date(self, column: str) -> np.ndarray:
        """The column as datetime64[D] (``YYYY-MM-DD`` text, dates, or ``yyyymmdd`` integers); a problem where a
        cell is empty or not a date."""
        raw = self.table[column]
        if pd.api.types.is_numeric_dtype(raw):
            text = pd.to_numeric(raw, errors="coerce").astype("Int64").astype("string")
            parsed = pd.to_datetime(text, format="%Y%m%d", errors="coerce")
        else:
            parsed = pd.to_datetime(raw, errors="coerce")
        empty = raw.isna().to_numpy()
        self.flag(empty, column, "is required")
        self.flag(~empty & parsed.isna().to_numpy(), column, "must be a date (YYYY-MM-DD)")
        return parsed.to_numpy(dtype="datetime64[ns]").astype("datetime64[D]")

    def raise_if_any(self) -> None:
        if self.problems:
            raise InvalidInputError(self.problems)
