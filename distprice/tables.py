"""Reading and writing tables by file extension (CSV or Parquet); writes are atomic.

CSV files are read by pyarrow in blocks (a portfolio costs its Arrow columns, not Python objects per cell):
the text columns distprice knows (``TEXT_COLUMNS``) are read as strings as written (``"007"`` stays
``"007"``), and only an empty cell is missing (``NA``, ``null`` or ``None`` are the text they spell). A new
output file gets the mode the umask gives a new file; a replaced one keeps its mode.
"""
from __future__ import annotations

import os
import stat
import tempfile
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import pyarrow.csv as pcsv

from .errors import InvalidInputError, OptionError, Problem

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
TEXT_COLUMNS = ("id", "instrument", "option_type", "exercise", "curve", "day_count", "calendar", "accrual_convention",
                "payment_convention", "maturity_date", "issue_date", "expiry_date", "first_exercise_date",
                "valuation_date", "market_price_type", "date", "price_type", "scenario", "model", "surface", "job",
                "contract", "directions", "precision", "volatility_type")
"""Columns read as text from CSV, whatever their cells look like."""
ROW_GROUP_ROWS = 65_536
"""Rows per Parquet row group written here: small enough that cluster workers can share a file's reading."""


def table_format(path) -> str:
    """``csv`` or ``parquet`` from the file extension; :class:`OptionError` for anything else."""
    suffix = Path(path).suffix.lower()
    try:
        return FORMATS[suffix]
    except KeyError:
        raise OptionError(f"{path}: unknown table format {suffix!r}; use one of {', '.join(FORMATS)}") from None


def read_table(path, text: tuple[str, ...] = TEXT_COLUMNS) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame, the ``text`` columns of a CSV file as strings;
    :class:`InvalidInputError` for a file that cannot be read as one."""
    fmt = table_format(path)
    try:
        if fmt == "parquet":
            return pd.read_parquet(path)
        options = pcsv.ConvertOptions(null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=True,
                                      column_types=dict.fromkeys(text, pa.string()))
        return pcsv.read_csv(path, convert_options=options).to_pandas()
    except (OSError, ValueError, pa.ArrowException) as error:
        raise InvalidInputError([Problem(None, str(path), None, f"cannot be read as {fmt}: {error}")]) from None


def check_output(path, create_dirs: bool = False) -> Path:
    """Checks, before any pricing, that an output table can be written at ``path``: a known format and
    :func:`check_place`."""
    table_format(path)
    return check_place(path, create_dirs)


def check_place(path, create_dirs: bool = False) -> Path:
    """Checks, before any pricing, that a file can be written at ``path``: a folder that exists (created with
    ``create_dirs``) and takes new files, and no folder in the way. :class:`OptionError` says what is wrong."""
    path = Path(path)
    parent = path.parent
    if not parent.exists() and create_dirs:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OptionError(f"{path}: cannot create its folder: {error.strerror}") from None
    if not parent.exists():
        raise OptionError(f"{path}: the folder {parent} does not exist (create it, or ask for it to be created)")
    if not parent.is_dir():
        raise OptionError(f"{path}: {parent} is not a folder")
    if path.is_dir():
        raise OptionError(f"{path}: is a folder, not a file")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise OptionError(f"{path}: cannot write in {parent}: {error.strerror}") from None
    return path


def _new_file_mode(path: Path) -> int:
    """The mode the output gets: the replaced file's, or what the umask gives a new file."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_file(content: str | bytes, path) -> Path:
    """``content`` (text as UTF-8) to ``path`` atomically: a temporary file in the same folder, then a rename;
    the file gets the mode of the file it replaces, or the one the umask gives a new file."""
    path = check_place(path)
    mode = _new_file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(content.encode("utf-8") if isinstance(content, str) else content)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def write_table(table: pd.DataFrame, path) -> None:
    """Write ``table`` to ``path`` atomically: a temporary file in the same folder, then a rename."""
    write_tables([table], path)


LABEL_SAMPLE = 4096
"""Rows of a text column read to tell labels (few values) from identifiers (mostly distinct)."""


def _is_text(field: pa.Field) -> bool:
    return pa.types.is_string(field.type) or pa.types.is_large_string(field.type) or pa.types.is_dictionary(field.type)


def _label_columns(table: pa.Table) -> list[str]:
    """The text columns that hold labels, worth dictionary encoding: at most half of their first LABEL_SAMPLE
    values distinct. Identifiers and numbers are mostly distinct, and encoding them so takes longer than it
    saves."""
    sample = table.slice(0, LABEL_SAMPLE)
    return [f.name for f in table.schema
            if _is_text(f) and 2 * pc.count_distinct(sample[f.name]).as_py() <= max(len(sample), 2)]


def _writer(path, table: pa.Table) -> pq.ParquetWriter:
    """A Parquet writer for tables of ``table``'s schema: labels dictionary-encoded, minimum and maximum kept for
    the columns that are not text (statistics of text columns cost about a third of the writing)."""
    return pq.ParquetWriter(path, table.schema, use_dictionary=_label_columns(table),
                            write_statistics=[f.name for f in table.schema if not _is_text(f)])


def write_tables(tables: Iterable[pd.DataFrame], path) -> int:
    """Write the rows of ``tables`` one after the other as one table at ``path``, atomically; returns the rows
    written. Every table has the columns and types of the first. Parquet is encoded and written on a second
    thread while the next table is produced (fetched, built), so at most two tables are held at a time."""
    path = check_output(path)
    fmt = table_format(path)
    mode = _new_file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    rows, writer, writing, first = 0, None, None, True
    with ThreadPoolExecutor(1, thread_name_prefix="distprice-write") as background:
        try:
            for table in tables:
                if fmt == "csv":
                    table.to_csv(tmp, index=False, mode="w" if first else "a", header=first)
                else:
                    arrow = pa.Table.from_pandas(table, schema=writer.schema if writer else None, preserve_index=False)
                    writer = writer or _writer(tmp, arrow)
                    if writing is not None:
                        writing.result()
                    writing = background.submit(writer.write_table, arrow, row_group_size=ROW_GROUP_ROWS)
                rows, first = rows + len(table), False
            if writing is not None:
                writing.result()
            if first:
                raise ValueError(f"{path}: no table to write")
            if writer is not None:
                writer.close()
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            if writing is not None:
                wait([writing])
            if writer is not None:
                writer.close()
            os.unlink(tmp)
            raise
    return rows
