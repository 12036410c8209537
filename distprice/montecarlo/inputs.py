"""The Monte-Carlo input tables and where they come from: a folder, a dict, or one benchmark file.

Tables (CSV or Parquet, one file per table named after it, e.g. ``DIR/mc_jobs.csv``):

| table | columns |
| --- | --- |
| ``mc_jobs`` | job, contract, paths, [sobol_bits = 30], [directions = joe_kuo_6_21201], [precision = fp64] |
| ``mc_dates`` | job, date_index (1 … T), t (years) |
| ``mc_spots`` | job, model, underlying (0 … U−1), spot |
| ``mc_diffusion`` | job, model, date_index, underlying, vol, drift |
| ``mc_cholesky`` or ``mc_correlation`` | job, model, i, j, value |
| ``mc_cashflows`` | job, model, k, discount |
| ``mc_detvals`` | job, model, k, value |
| ``mc_directions`` (optional) | job, dim, bit, value |
| ``mc_bridge`` (optional) | job, step, bi, li, ri, sd, lw, rw |
| ``mc_terms`` (optional) | job, term, [k = 0], value: contract terms other than the defaults |
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..errors import InvalidInputError, Problem
from ..tables import FORMATS, TEXT_COLUMNS, check_names, read_table
from .finpar import read_benchmark

COLUMNS = {
    "mc_jobs": ("job", "contract", "paths"),
    "mc_dates": ("job", "date_index", "t"),
    "mc_spots": ("job", "model", "underlying", "spot"),
    "mc_diffusion": ("job", "model", "date_index", "underlying", "vol", "drift"),
    "mc_cholesky": ("job", "model", "i", "j", "value"),
    "mc_correlation": ("job", "model", "i", "j", "value"),
    "mc_cashflows": ("job", "model", "k", "discount"),
    "mc_detvals": ("job", "model", "k", "value"),
    "mc_directions": ("job", "dim", "bit", "value"),
    "mc_bridge": ("job", "step", "bi", "li", "ri", "sd", "lw", "rw"),
    "mc_terms": ("job", "term", "value"),
}
"""Required columns of each table."""
DEFAULTS = {"mc_jobs": {"sobol_bits": 30, "directions": "joe_kuo_6_21201", "precision": "fp64"}, "mc_terms": {"k": 0}}
REQUIRED = ("mc_jobs", "mc_dates", "mc_spots", "mc_diffusion", "mc_cashflows")
BENCHMARK_SUFFIXES = (".in", ".data")
MC_TEXT = tuple(c for c in TEXT_COLUMNS if c != "model")
"""Columns read as text from CSV tables: the known ones but ``model``, here a model's number."""


def read_inputs(source) -> dict[str, pd.DataFrame]:
    """The tables of ``source``: a folder of table files, a FinPar / Futhark data file, or a dict from
    table name to a DataFrame or a file path. Absent optional tables are empty. Unknown table names and
    missing required tables or columns raise InvalidInputError."""
    if isinstance(source, Mapping):
        unknown = [name for name in source if name not in COLUMNS]
        if unknown:
            raise InvalidInputError(
                [
                    Problem(None, f"table '{name}'", None, f"unknown table; known: {', '.join(COLUMNS)}")
                    for name in unknown
                ]
            )
        tables = {
            name: value if isinstance(value, pd.DataFrame) else read_table(value, MC_TEXT)
            for name, value in source.items()
        }
    else:
        path = Path(source)
        if path.is_dir():
            tables = {
                name: read_table(file, MC_TEXT)
                for name in COLUMNS
                for file in [_table_file(path, name)]
                if file is not None
            }
        elif path.suffix in BENCHMARK_SUFFIXES and path.is_file():
            tables = read_benchmark(path)
        else:
            rule = "inputs must be a folder of mc_* tables, a FinPar input.data or a Futhark .in file"
            raise InvalidInputError([Problem(None, str(path), None, rule)])
    return complete(tables)


def _table_file(folder: Path, name: str) -> Path | None:
    found = [folder / f"{name}{suffix}" for suffix in FORMATS if (folder / f"{name}{suffix}").is_file()]
    if len(found) > 1:
        raise InvalidInputError(
            [Problem(None, str(folder), None, f"table {name} is given twice: {', '.join(p.name for p in found)}")]
        )
    return found[0] if found else None


@functools.cache
def _empty(name: str) -> pd.DataFrame:
    """An absent table: its columns and no rows, made once (callers get shallow copies of it)."""
    return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS[name]})


def complete(tables: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Every table present (absent ones empty), defaults filled in; problems for missing tables and columns."""
    problems = [Problem(None, name, None, "required table is missing") for name in REQUIRED if name not in tables]
    if "mc_cholesky" not in tables and "mc_correlation" not in tables:
        problems.append(Problem(None, "mc_cholesky", None, "one of mc_cholesky or mc_correlation is required"))
    out = {}
    for name, columns in COLUMNS.items():
        frame = tables.get(name)
        if frame is None:
            frame = _empty(name).copy(deep=False)  # the caller's own frame: the shared one stays empty
        elif not frame.index.equals(pd.RangeIndex(len(frame))):
            frame = frame.reset_index(drop=True)
        problems += [Problem(None, name, c, "required column is missing") for c in columns if c not in frame]
        problems += check_names(name, frame.columns, (*columns, *DEFAULTS.get(name, {})))
        filled = {
            column: default
            for column, default in DEFAULTS.get(name, {}).items()
            if column not in frame or frame[column].isna().any()
        }
        if filled:
            frame = frame.copy(deep=False)  # the defaults go into a frame of its own, never the caller's
            for column, default in filled.items():
                frame[column] = frame[column].where(frame[column].notna(), default) if column in frame else default
        out[name] = frame
    if problems:
        raise InvalidInputError(problems)
    return out
