"""Reading and writing tables by file extension (CSV or Parquet); writes are atomic."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def table_format(path) -> str:
    """``csv`` or ``parquet`` from the file extension; ValueError for anything else."""
    suffix = Path(path).suffix.lower()
    try:
        return FORMATS[suffix]
    except KeyError:
        raise ValueError(f"{path}: unknown table format {suffix!r}; use one of {', '.join(FORMATS)}") from None


def read_table(path) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame."""
    if table_format(path) == "csv":
        return pd.read_csv(path)
    return pd.read_parquet(path)


def write_table(table: pd.DataFrame, path) -> None:
    """Write ``table`` to ``path`` atomically: a temporary file in the same folder, then a rename."""
    path = Path(path)
    fmt = table_format(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        if fmt == "csv":
            table.to_csv(tmp, index=False)
        else:
            table.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
