"""Reading and writing tables by file extension (CSV or Parquet); writes are atomic."""
from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import OptionError

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
ROW_GROUP_ROWS = 65_536
"""Rows per Parquet row group written here: small enough that cluster workers can share a file's reading."""


def table_format(path) -> str:
    """``csv`` or ``parquet`` from the file extension; :class:`OptionError` for anything else."""
    suffix = Path(path).suffix.lower()
    try:
        return FORMATS[suffix]
    except KeyError:
        raise OptionError(f"{path}: unknown table format {suffix!r}; use one of {', '.join(FORMATS)}") from None


def read_table(path) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame; :class:`OptionError` for a file that cannot be parsed."""
    fmt = table_format(path)
    try:
        return pd.read_csv(path) if fmt == "csv" else pd.read_parquet(path)
    except (ValueError, pa.ArrowException) as error:
        raise OptionError(f"{path}: cannot be read as {fmt}: {error}") from None


def write_table(table: pd.DataFrame, path) -> None:
    """Write ``table`` to ``path`` atomically: a temporary file in the same folder, then a rename."""
    write_tables([table], path)


def _label_columns(schema: pa.Schema) -> list[str]:
    """The string columns: labels with few values, worth dictionary encoding (numbers are mostly distinct,
    and encoding them so takes longer than it saves)."""
    return [f.name for f in schema
            if pa.types.is_string(f.type) or pa.types.is_large_string(f.type) or pa.types.is_dictionary(f.type)]


def write_tables(tables: Iterable[pd.DataFrame], path) -> int:
    """Write the rows of ``tables`` one after the other as one table at ``path``, atomically; returns the rows
    written. Every table has the columns and types of the first. Parquet is encoded and written on a second
    thread while the next table is produced (fetched, built), so at most two tables are held at a time."""
    path = Path(path)
    fmt = table_format(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
                    writer = writer or pq.ParquetWriter(tmp, arrow.schema, use_dictionary=_label_columns(arrow.schema))
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
            os.replace(tmp, path)
        except BaseException:
            if writing is not None:
                wait([writing])
            if writer is not None:
                writer.close()
            os.unlink(tmp)
            raise
    return rows
