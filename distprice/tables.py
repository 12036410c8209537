"""Reading and writing tables by file extension (CSV or Parquet) or as a folder of Parquet parts; writes are
atomic.

CSV files are read by pyarrow in blocks (a portfolio costs its Arrow columns, not Python objects per cell):
the text columns distprice knows (``TEXT_COLUMNS``) are read as strings as written (``"007"`` stays
``"007"``), and only an empty cell is missing (``NA``, ``null`` or ``None`` are the text they spell). A
portfolio's label columns (``LABEL_COLUMNS``: instrument kinds, curve names, day counts...) are read as
categories from CSV and Parquet alike: each distinct name is decoded once, and validation and the priced
table's writer take their codes instead of hashing every row's text again. A new output file gets the mode
the umask gives a new file; a replaced one keeps its mode.

A *folder* (a name ending in ``/``, or a folder that exists) holds a table as Parquet parts, ``part-000000.parquet``,
``part-000001.parquet``..., whose rows follow one another in the order of their names (the order pyarrow, pandas
and Dask read them in). Its parts are encoded on several threads, or by the workers of a cluster job, each its
own; the folder is built beside its target and renamed into place once complete.

An output that cannot be written (a full disk, no permission) is an :class:`~distprice.errors.OutputError`
naming it and the cause; its temporary is removed and an earlier output under its name stays as it was. A
temporary is hidden beside its output and named for it, this host and the writing process
(``.priced.csv.HOST.PID.RANDOM.tmp``), so that the next run for that output removes those whose process has ended
(killed) on this host (:func:`remove_stale`).
"""

from __future__ import annotations

import collections
import contextlib
import difflib
import errno
import functools
import logging
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from .errors import DistpriceError, InvalidInputError, OptionError, OutputError, Problem, printable
from .join import join_parquet

log = logging.getLogger(__name__)

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
TEXT_COLUMNS = (
    "id",
    "instrument",
    "option_type",
    "exercise",
    "curve",
    "day_count",
    "calendar",
    "accrual_convention",
    "payment_convention",
    "maturity_date",
    "issue_date",
    "expiry_date",
    "first_exercise_date",
    "valuation_date",
    "market_price_type",
    "date",
    "price_type",
    "scenario",
    "model",
    "surface",
    "job",
    "contract",
    "directions",
    "precision",
    "volatility_type",
)
"""Columns read as text from CSV, whatever their cells look like."""
LABEL_COLUMNS = (
    "instrument",
    "option_type",
    "exercise",
    "curve",
    "day_count",
    "calendar",
    "accrual_convention",
    "payment_convention",
    "market_price_type",
    "model",
)
"""A portfolio's text columns of a few distinct names, read as categories (pandas Categorical)."""
LABEL_TYPE = pa.dictionary(pa.int32(), pa.string())
"""The Arrow type of a label column read from CSV."""
ROW_GROUP_ROWS = 65_536
"""Rows per Parquet row group written here: small enough that cluster workers can share a file's reading."""
FOLDER = "folder"
"""The format of a folder of Parquet parts."""
PART_ROWS = 4 * ROW_GROUP_ROWS
"""Rows per part of a folder written by this process (the last part of each table written may hold fewer)."""
PART_WRITERS = max(1, min(4, os.cpu_count() or 1))
"""Threads encoding a folder's parts at once."""
DISCARD_TRIES = 5
"""Attempts at removing a folder that failed to build, 0.1 s apart (a late writer may add a file meanwhile)."""


def is_folder(path) -> bool:
    """Whether ``path`` names a folder of Parquet parts: a name ending in ``/`` or a folder that exists."""
    return str(path).endswith(("/", os.sep)) or Path(path).is_dir()


def parquet_files(path) -> list[str]:
    """The Parquet files that hold a Parquet table, in the order its rows are read: the file itself, or a
    folder's files, names sorted and hidden ones left out, as pyarrow and pandas read them."""
    if table_format(path) != FOLDER:
        return [str(path)]
    return list(pq.ParquetDataset(path).files)


def table_format(path) -> str:
    """``csv``, ``parquet`` (from the file extension) or ``folder`` (:func:`is_folder`); :class:`OptionError`
    for anything else."""
    if is_folder(path):
        return FOLDER
    suffix = Path(path).suffix.lower()
    try:
        return FORMATS[suffix]
    except KeyError:
        raise OptionError(
            f"{path}: unknown table format {suffix!r}; use one of {', '.join(FORMATS)}, or a folder "
            f"of Parquet parts (a name ending in /)"
        ) from None


def part_name(number: int) -> str:
    """The file name of a folder's part ``number`` (from 0): parts are read in the order of their names."""
    return f"part-{number:06d}.parquet"


NEAR = 0.8
"""How alike (``difflib``'s ratio, 0 to 1) a column's name and a known column's must be for the first to be read
as a misspelling of the second."""
_listed: set[tuple[str, tuple[str, ...]]] = set()


def _squashed(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.casefold())


def misspelled(column, known) -> str | None:
    """The known column that ``column`` (not one of them) misspells: the same but for case, spaces, hyphens and
    underscores (``Day-Count``, `` coupon``), or within :data:`NEAR` of it (``calender``, ``settlement_day``);
    None for a column like none of them."""
    name = str(column)
    if name in known:
        return None
    squashed = _squashed(name)
    same = [k for k in known if _squashed(k) == squashed]
    if same:
        return same[0]
    close = difflib.get_close_matches(name.strip().casefold(), list(known), n=1, cutoff=NEAR)
    return close[0] if close else None


def check_names(table: str, columns, known, log_unread: bool = True) -> list[Problem]:
    """The problems of a table's column names: a name given twice is an error (which of the two is meant?), and
    so is a column that misspells a known one (:func:`misspelled`), naming both (it would otherwise be ignored,
    and its rows priced on a default); the other columns distprice does not read pass through, listed once per
    process in the log."""
    problems, unread = duplicated(table, columns), []
    for column in dict.fromkeys(columns):
        meant = misspelled(column, known)
        if meant is not None:
            problems.append(
                Problem(None, table, str(column), f"is not a column distprice reads: did you mean {meant!r}?")
            )
        elif str(column) not in known:
            unread.append(str(column))
    key = (table, tuple(unread))
    if unread and log_unread and not problems and key not in _listed:
        _listed.add(key)
        log.info("%s: columns distprice does not read, passed through: %s", table, printable(", ".join(unread)))
    return problems


def duplicated(table: str, columns) -> list[Problem]:
    """A problem for each name of ``table``'s ``columns`` given to more than one column (which is meant?)."""
    counts = collections.Counter(str(c) for c in columns)
    return [
        Problem(None, table, name, f"is the name of {count} columns: keep one, or rename the others")
        for name, count in counts.items()
        if count > 1
    ]


def schema_names(schemas) -> list[str]:
    """The column names of a table held in Parquet files of ``schemas``, in order of first appearance, each as
    many times as one file names it (for :func:`duplicated` to find a name given twice)."""
    names: collections.Counter[str] = collections.Counter()
    for schema in schemas:
        names |= collections.Counter(schema.names)
    return list(names.elements())


def read_table(path, text: tuple[str, ...] = TEXT_COLUMNS, labels: tuple[str, ...] = ()) -> pd.DataFrame:
    """Read a CSV or Parquet file, or a folder of Parquet parts, into a DataFrame (:func:`to_pandas`), the
    ``text`` columns of a CSV file as strings and the ``labels`` columns (text) of either as categories;
    :class:`InvalidInputError` for a file that cannot be read as one."""
    fmt = table_format(path)
    try:
        if fmt == FOLDER and not any(Path(path).glob("part-*.parquet")):
            raise ValueError("the folder holds no part-*.parquet")
        if fmt == "csv":
            types = dict.fromkeys(text, pa.string()) | dict.fromkeys(labels, LABEL_TYPE)
            options = pcsv.ConvertOptions(
                null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=True, column_types=types
            )
            return to_pandas(pcsv.read_csv(path, convert_options=options))
        schema = pq.read_schema(parquet_files(path)[0])
        twice = duplicated(str(path), schema.names)  # pyarrow would refuse them in words of its own
        if not twice:
            return to_pandas(pq.read_table(path, read_dictionary=text_columns(schema, labels) or None))
    except (OSError, ValueError, pa.ArrowException) as error:
        where = (fmt == "csv" and isinstance(error, pa.ArrowInvalid) and _bad_row(path)) or str(error)
        raise InvalidInputError([Problem(None, str(path), None, f"cannot be read as {fmt}: {where}")]) from None
    raise InvalidInputError(twice)


def _bad_row(path) -> str | None:
    """The first row of the CSV file ``path`` whose fields the header's do not match, in words: its number
    (counting from 1 after the header, blank lines aside, as the row numbers of problems count) and its text,
    quoted as Python quotes text (``\\x1b`` for an escape code); None where every row matches."""
    found: list = []

    def bad(row) -> str:
        found.append(row)
        return "error"

    parse = pcsv.ParseOptions(invalid_row_handler=bad)
    with contextlib.suppress(OSError, ValueError, pa.ArrowException):
        pcsv.read_csv(path, read_options=pcsv.ReadOptions(use_threads=False), parse_options=parse)
    if not found:
        return None
    row = found[0]
    return (
        f"row {row.number - 1}: {row.actual_columns} field(s) where the header has {row.expected_columns}: {row.text!r}"
    )


def to_pandas(table: pa.Table | pa.Array | pa.ChunkedArray):
    """An Arrow table (or column) as pandas, its text as pandas 3's ``str`` (held in Arrow, missing as NaN) on
    pandas 2 too, where Arrow would make Python strings of it: each text cell is not made an object to be read,
    checked, echoed and written back to Arrow."""
    # a dtype compared with object (numpy's dtype('O') equals it), not a type
    return table.to_pandas(types_mapper=_ARROW_TEXT.get if text_dtype() == object else None)  # noqa: E721


STR = pd.StringDtype("pyarrow", na_value=np.nan)
"""pandas 3's ``str``: text held in Arrow, missing as NaN (pandas 2.3 has it too, though not as its default)."""
_ARROW_TEXT = dict.fromkeys((pa.string(), pa.large_string()), STR)


@functools.cache
def text_dtype():
    """The type pandas gives a column of text it makes: ``str`` (pandas 3, held in Arrow) or ``object`` (pandas
    2, Python strings)."""
    return pd.Series(np.array(["x"], dtype=object)).dtype


def read_portfolio(path) -> pd.DataFrame:
    """A portfolio table (:func:`read_table`), its LABEL_COLUMNS as categories."""
    return read_table(path, labels=LABEL_COLUMNS)


def factorized(raw: pd.Series) -> tuple[np.ndarray, list[str]]:
    """A column of labels ``raw`` by its distinct values, each converted to text once: codes (-1 where missing)
    into the labels, each as ``raw.astype("string")`` writes it (a Categorical of text: its codes and categories
    as they are)."""
    if isinstance(raw.dtype, pd.CategoricalDtype) and raw.dtype.categories.inferred_type in ("string", "empty"):
        return raw.array.codes.astype(np.int64), list(raw.dtype.categories)
    if isinstance(raw.dtype, pd.StringDtype):
        codes, uniques = pd.factorize(raw)
        return codes, list(uniques)
    if raw.dtype == object:
        codes, uniques = pd.factorize(raw)
        if all(type(u) is str for u in uniques):
            return codes, list(uniques)
    codes, uniques = pd.factorize(raw.astype("string"))
    return codes, list(uniques)


def text_columns(schema: pa.Schema, names) -> list[str]:
    """Those of ``names`` that ``schema`` holds as text (the columns a Parquet reader can return as categories)."""
    return [
        f.name for f in schema if f.name in names and (pa.types.is_string(f.type) or pa.types.is_large_string(f.type))
    ]


def check_output(path, create_dirs: bool = False, inputs: dict | None = None) -> Path:
    """Checks, before any pricing, that an output table can be written at ``path``: a known format and
    :func:`check_place`; a folder of parts may replace only a folder of parts (or an empty one); not one of the
    job's ``inputs`` (name -> path, or anything else, which is not checked)."""
    for name, source in (inputs or {}).items():
        if isinstance(source, (str, os.PathLike)) and _same_place(source, path):
            raise OptionError(f"{path}: is the job's input ({name}); write the priced table elsewhere")
    if table_format(path) != FOLDER:
        return check_place(path, create_dirs)
    path = Path(path)
    if path.is_dir():
        others = sorted(p.name for p in path.iterdir() if not (p.name.startswith("part-") and p.suffix == ".parquet"))
        if others:
            raise OptionError(
                f"{path}: the folder holds files that are not parts of a table ({', '.join(others[:3])}"
                f"{', ...' if len(others) > 3 else ''}); name a new folder, or one of parts to replace"
            )
    elif path.exists():
        raise OptionError(f"{path}: is a file, not a folder")
    return check_place(path, create_dirs, folder=True)


def _same_place(a, b) -> bool:
    """Whether two paths name one file or folder (a folder's trailing ``/`` aside)."""
    return os.path.realpath(os.fspath(a).rstrip("/") or "/") == os.path.realpath(os.fspath(b).rstrip("/") or "/")


def check_place(path, create_dirs: bool = False, folder: bool = False) -> Path:
    """Checks, before any pricing, that a file (or with ``folder`` a folder) can be written at ``path``: a
    folder that exists (created with ``create_dirs``) and takes new files, and no folder in the way of a file.
    :class:`OptionError` says what is wrong; :class:`OutputError` names a file system with no room left. Then
    removes the temporaries that killed writers of ``path`` left (:func:`remove_stale`)."""
    path = Path(path)
    parent = path.parent
    if not parent.exists() and create_dirs:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OptionError(f"{path}: cannot create its folder: {error.strerror}") from None
    if not parent.exists():
        raise OptionError(
            f"{path}: the folder {parent} does not exist (create it, or pass --create-dirs; create_dirs=True in Python)"
        )
    if not parent.is_dir():
        raise OptionError(f"{path}: {parent} is not a folder")
    if path.is_dir() and not folder:
        raise OptionError(f"{path}: is a folder, not a file")
    try:
        _beside(path, ".probe").unlink()
        full = shutil.disk_usage(parent).free == 0
    except OSError as error:
        if error.errno in NO_ROOM:
            raise output_error(path, error) from None
        raise OptionError(f"{path}: cannot write in {parent}: {error.strerror}") from None
    if full:
        raise output_error(path, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    remove_stale(path)
    return path


NO_ROOM = {
    errno.ENOSPC: "free space on its file system, or write elsewhere",
    errno.EDQUOT: "free space within your quota, or write elsewhere",
    errno.EFBIG: "its file system takes no file this large: write a folder of parts (a name ending in /)",
    errno.EROFS: "write elsewhere",
}
"""The errors (``errno``) that only writing causes, each with what to do."""
DENIED = "write where you may: see the owner and mode of its folder"
"""What to do about any other error of writing an output (no permission, mostly)."""


def output_error(path, error: OSError) -> OutputError:
    """The :class:`OutputError` of the output ``path`` for ``error``, naming its cause and what to do."""
    cause = os.strerror(error.errno) if error.errno else str(error)
    return OutputError(
        error.errno,
        f"{path}: cannot write the output: {cause} ({NO_ROOM.get(error.errno or 0, DENIED)}); nothing was written "
        "under its name, and an earlier output there is kept",
    )


@contextlib.contextmanager
def _writing(path, causes=None):
    """Raises an :class:`OSError` of writing the output ``path`` in the block as :func:`output_error`: only
    those of ``causes`` (errnos; every one when None), so that a failure of reading what is written passes as it
    is. An :class:`OutputError` of a part of the output (written by a worker or a thread) is named as the
    output's."""
    try:
        yield
    except OutputError as error:
        if error.errno is None:
            raise
        raise output_error(path, error) from error
    except DistpriceError:
        raise
    except OSError as error:
        if causes is not None and error.errno not in causes:
            raise
        raise output_error(path, error) from error


HOST = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()) or "host"
"""This host's name as the temporaries written here carry it."""
TEMPORARIES = (".tmp", ".parts.tmp", ".old", ".probe")
"""The endings of temporaries beside an output: a file or folder being written, a folder of parts to join, a
folder being removed, a probe of the folder."""
_STALE = re.compile(r"(?P<pid>[0-9]+)\.[a-z0-9_]+(" + "|".join(re.escape(t) for t in TEMPORARIES) + ")")


def _beside(path: Path, ending: str, folder: bool = False) -> Path:
    """A new hidden temporary file (or empty folder) beside ``path``, named for it, this host and this process:
    ``.NAME.HOST.PID.RANDOM`` and ``ending`` (one of :data:`TEMPORARIES`)."""
    prefix = f".{path.name}.{HOST}.{os.getpid()}."
    if folder:
        return Path(tempfile.mkdtemp(prefix=prefix, suffix=ending, dir=path.parent))
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=ending, dir=path.parent)
    os.close(fd)
    return Path(name)


def _running(pid: int) -> bool:
    """Whether process ``pid`` of this host may be running (True where that cannot be told)."""
    if os.name != "posix" or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def remove_stale(path) -> list[Path]:
    """Removes the temporaries beside the output ``path`` that writers of it killed on this host left (their
    name carries this host and their process, which is no longer running: :func:`_beside`), each logged;
    returns them. A running writer's temporaries, another host's, and any not named so are left alone."""
    path = Path(path)
    prefix = f".{path.name}.{HOST}."
    removed: list[Path] = []
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix)]
    except OSError:
        return removed
    for name in names:
        found = _STALE.fullmatch(name[len(prefix) :])
        if found is None or _running(int(found["pid"])):
            continue
        stale = path.parent / name
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        if not os.path.lexists(stale):
            removed.append(stale)
            log.info(
                "removed %s, left by process %s of this host, which ended while writing %s", stale, found["pid"], path
            )
    return removed


def _read_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


_UMASK = _read_umask()
"""This process's umask, read once at import (reading it sets it for a moment: not from threads that write)."""


def _new_file_mode(path: Path, new: int = 0o666) -> int:
    """The mode the output gets: the replaced file's (or folder's), or what the umask gives a new one (``new``
    before the umask)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return new & ~_UMASK


@contextlib.contextmanager
def _replacing(path: Path):
    """Yields the name of an empty temporary file beside ``path``, which replaces ``path`` (with the mode of
    :func:`_new_file_mode`) when the block ends, or is removed when it raises (an error of writing it as
    :class:`OutputError`, :func:`_writing`)."""
    mode = _new_file_mode(path)
    with _writing(path):
        tmp = str(_beside(path, ".tmp"))
    try:
        with _writing(path, NO_ROOM):
            yield tmp
        with _writing(path):
            os.chmod(tmp, mode)
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_file(content: str | bytes, path) -> Path:
    """``content`` (text as UTF-8) to ``path`` atomically: a temporary file in the same folder, then a rename;
    the file gets the mode of the file it replaces, or the one the umask gives a new file."""
    path = check_place(path)
    with _replacing(path) as tmp, open(tmp, "wb") as file:
        file.write(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def write_table(table: pd.DataFrame, path) -> None:
    """Write ``table`` to ``path`` atomically: a temporary file in the same folder, then a rename."""
    write_tables([table], path)


REPEAT_SAMPLE = 4096
"""Rows of a column read to tell columns of few values (labels, terms) from mostly distinct ones (ids, prices)."""


def _is_text(field: pa.Field) -> bool:
    return pa.types.is_string(field.type) or pa.types.is_large_string(field.type) or pa.types.is_dictionary(field.type)


def _repeated_columns(table: pa.Table) -> list[str]:
    """The columns of few values, worth dictionary encoding: at most half of their first REPEAT_SAMPLE values
    distinct. Mostly distinct columns (ids, prices) take longer to encode so than they save."""
    sample = table.slice(0, REPEAT_SAMPLE)
    return [f.name for f in table.schema if _repeated(sample[f.name])]


def _repeated(sample: pa.ChunkedArray) -> bool:
    """Whether at most half of the ``sample``'s values are distinct (a Categorical's are; a column of nulls
    alone or of nested values is not counted)."""
    kind = sample.type
    if pa.types.is_dictionary(kind):
        return True
    if pa.types.is_null(kind) or pa.types.is_nested(kind):
        return False
    return 2 * pc.count_distinct(sample).as_py() <= max(len(sample), 2)


def _writer(path, table: pa.Table) -> pq.ParquetWriter:
    """A Parquet writer for tables of ``table``'s schema: columns of few values dictionary-encoded; numbers
    of many values left uncompressed (Snappy finds nothing to gain in them and costs ~40 % of their writing and
    reading); minimum and maximum kept for the columns that are not text (statistics of text columns cost about
    a third of the writing)."""
    repeated = _repeated_columns(table)
    compression = {f.name: "snappy" if f.name in repeated or _is_text(f) else "none" for f in table.schema}
    return pq.ParquetWriter(
        path,
        table.schema,
        use_dictionary=repeated,
        compression=compression,
        write_statistics=[f.name for f in table.schema if not _is_text(f)],
    )


def write_tables(tables: Iterable[pd.DataFrame], path) -> int:
    """Write the rows of ``tables`` one after the other as one table at ``path``, atomically; returns the rows
    written. Every table has the columns and types of the first. Parquet is encoded and written on a second
    thread while the next table is produced (fetched, built), so at most two tables are held at a time; a
    folder's parts on PART_WRITERS threads (:func:`write_parts`)."""
    if table_format(path) == FOLDER:
        with new_folder(path) as folder:
            return write_parts(tables, folder)
    path = check_output(path)
    fmt = table_format(path)
    rows, writer, writing, first = 0, None, None, True
    with _replacing(path) as tmp, ThreadPoolExecutor(1, thread_name_prefix="distprice-write") as background:
        try:
            for table in tables:
                if fmt == "csv":
                    table.to_csv(tmp, index=False, mode="w" if first else "a", header=first)
                else:
                    arrow = to_arrow(table, writer.schema if writer else None)
                    writer = writer or _writer(tmp, arrow)
                    if writing is not None:
                        writing.result()
                    writing = background.submit(writer.write_table, arrow, row_group_size=ROW_GROUP_ROWS)
                rows, first = rows + len(table), False
            if writing is not None:
                writing.result()
            if first:
                raise ValueError(f"{path}: no table to write")
        finally:
            if writing is not None:
                wait([writing])
            if writer is not None:
                writer.close()
    return rows


@contextlib.contextmanager
def scratch_folder(path):
    """An empty hidden folder beside ``path`` for the time of the block, then removed with what it holds (an
    error of writing in it as :class:`OutputError`, :func:`_writing`): at once where the block left it empty
    (its parts joined and removed), else as :func:`_discard` removes a folder late writers may still fill."""
    path = check_output(path)
    with _writing(path):
        folder = _beside(path, ".parts.tmp", folder=True)
    try:
        with _writing(path, NO_ROOM):
            yield folder
    except BaseException:
        _discard(folder, path)
        raise
    try:
        folder.rmdir()
    except OSError:
        _discard(folder, path)


def write_joined(parts: Iterable, path) -> int:
    """The Parquet files ``parts`` (paths, or their :class:`~distprice.join.Template`, in order; taken as they
    come) joined into one file at ``path``, atomically, without decoding them (:mod:`distprice.join`), each
    removed once joined; returns its rows."""
    path = check_output(path)
    with _replacing(path) as tmp:
        return join_parquet(parts, tmp, remove=True)


@contextlib.contextmanager
def new_folder(path):
    """A folder of parts built for ``path``: yields an empty hidden folder beside it, which replaces ``path``
    once the block ends (an older folder of parts there is removed), or is removed with whatever it holds when
    the block raises (an error of writing it as :class:`OutputError`, :func:`_writing`; the older folder kept)."""
    path = check_output(path)
    mode = _new_file_mode(path, 0o777)
    with _writing(path):
        building = _beside(path, ".tmp", folder=True)
    try:
        with _writing(path, NO_ROOM):
            yield building
        with _writing(path):
            os.chmod(building, mode)
            _put_folder(building, path)
    except BaseException:
        _discard(building, path)
        raise


def _put_folder(building: Path, path: Path) -> None:
    """The folder ``building`` renamed to ``path``, in place of the folder there (removed), which is put back
    when the rename fails."""
    if not path.exists():
        os.replace(building, path)
        return
    old = _beside(path, ".old", folder=True)
    os.replace(path, old)
    try:
        os.replace(building, path)
    except BaseException:
        os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _discard(folder: Path, path: Path) -> None:
    """Removes a folder being built for the output ``path``, also while late writers (the tasks of a job that
    failed) still add parts to it: it is renamed away first, so that no part can be put at its name any more."""
    try:
        trash = _beside(path, ".old", folder=True)
    except OSError:
        trash = folder
    else:
        try:
            os.replace(folder, trash)
        except OSError:
            trash.rmdir()
            trash = folder
    for _ in range(DISCARD_TRIES):
        shutil.rmtree(trash, ignore_errors=True)
        if not trash.exists():
            return
        time.sleep(0.1)


def to_arrow(table: pd.DataFrame, schema: pa.Schema | None = None) -> pa.Table:
    """``table`` as an Arrow table, of ``schema`` when given. Categories become dictionaries with int32 indices
    whatever their count (pandas codes 127 categories or fewer as int8), so that tables of different
    categories, such as a file's slices read one by one, make one file or folder of one schema."""
    if schema is not None:
        return pa.Table.from_pandas(table, schema=schema, preserve_index=False)
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    fields = [
        f.with_type(pa.dictionary(pa.int32(), f.type.value_type)) if pa.types.is_dictionary(f.type) else f
        for f in arrow.schema
    ]
    wide = pa.schema(fields, metadata=arrow.schema.metadata)
    return arrow if wide.equals(arrow.schema) else arrow.cast(wide)


def write_part(table: pa.Table | pd.DataFrame, folder, number: int) -> None:
    """Part ``number`` of a folder being built: written beside its name and renamed, so a part is whole or
    absent (a task run again after a lost worker writes it again)."""
    if isinstance(table, pd.DataFrame):
        table = to_arrow(table)
    with _replacing(Path(folder) / part_name(number)) as tmp, _writer(tmp, table) as writer:
        writer.write_table(table, row_group_size=ROW_GROUP_ROWS)


def write_parts(tables: Iterable[pd.DataFrame], folder) -> int:
    """The rows of ``tables`` as parts 0, 1... of ``folder`` (PART_ROWS rows or fewer each,
    in order; one empty part when every table is empty), encoded on PART_WRITERS threads while the next tables
    are produced; returns the rows written. Every table has the columns and types of the first."""
    rows, number, schema, empty = 0, 0, None, None
    with ThreadPoolExecutor(PART_WRITERS, thread_name_prefix="distprice-write") as pool:
        pending: list[Future[None]] = []

        def put(table: pd.DataFrame) -> None:
            nonlocal number, schema
            arrow = to_arrow(table, schema)
            schema = arrow.schema
            while len(pending) >= 2 * PART_WRITERS:  # at most this many parts held at once
                pending.pop(0).result()
            pending.append(pool.submit(write_part, arrow, folder, number))
            number += 1

        try:
            for table in tables:
                empty = table if not len(table) else empty
                for start in range(0, len(table), PART_ROWS):
                    put(table.iloc[start : start + PART_ROWS])
                rows += len(table)
            if number == 0 and empty is not None:
                put(empty)
            for part in pending:
                part.result()
        except BaseException:
            wait(pending)
            raise
    if number == 0:
        raise ValueError(f"{folder}: no table to write")
    return rows
