"""Dates as day numbers: int64 days since 1970-01-01, the integer behind ``numpy.datetime64[D]``.

``NO_DATE`` (the integer behind ``NaT``) marks a missing date. Dates come in as ``datetime64`` arrays (any
unit; times of day are dropped), pandas or Arrow date / timestamp columns, Python dates, or ISO 8601 strings
``YYYY-MM-DD``; integer arrays are taken as day numbers already. They go out as ``datetime64[D]``, ISO
strings or an Arrow ``date32`` column.
"""

from __future__ import annotations

import datetime

import numba
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numba import int64, uint64

from .civil import day_number, month_length

EPOCH = np.datetime64("1970-01-01", "D")
"""Day number 0."""
NO_DATE = np.iinfo(np.int64).min
"""A missing date (``NaT`` viewed as int64)."""


def parse_dates(values) -> tuple[np.ndarray, np.ndarray]:
    """Day numbers (int64, ``NO_DATE`` where missing) and the positions of the values that are present but
    are not dates (each of those is ``NO_DATE`` too). Missing: null, NaN, NaT or an empty string. A column of
    another type (numbers other than a numpy integer array, true/false) holds no date: each of its values
    present is not one."""
    if isinstance(values, (pd.Series, pd.Index)) and values.dtype.kind == "M":
        values = values.to_numpy()
    if isinstance(values, np.ndarray) and values.dtype.kind == "M":
        return values.astype("datetime64[D]").view(np.int64), np.zeros(0, np.int64)
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        return values.astype(np.int64), np.zeros(0, np.int64)
    arrow = _to_arrow(values)
    if pa.types.is_null(arrow.type):
        return np.full(len(arrow), NO_DATE, np.int64), np.zeros(0, np.int64)
    if pa.types.is_string(arrow.type) or pa.types.is_large_string(arrow.type):
        return _parse_iso(arrow)
    if pa.types.is_date(arrow.type) or pa.types.is_timestamp(arrow.type):
        return _from_date32(pc.cast(arrow, pa.date32())), np.zeros(0, np.int64)
    return np.full(len(arrow), NO_DATE, np.int64), np.flatnonzero(arrow.is_valid().to_numpy(zero_copy_only=False))


def day_numbers(values) -> np.ndarray:
    """Day numbers of ``values`` (see :func:`parse_dates`); ValueError naming the positions of non-dates."""
    days, bad = parse_dates(values)
    if len(bad):
        shown = ", ".join(str(p) for p in bad[:10]) + (", ..." if len(bad) > 10 else "")
        raise ValueError(f"{len(bad)} value(s) are not dates YYYY-MM-DD, at positions {shown}")
    return days


def to_datetime64(days) -> np.ndarray:
    """``datetime64[D]`` array of day numbers (``NO_DATE`` becomes ``NaT``); a view, no copy."""
    return np.ascontiguousarray(days, dtype=np.int64).view("datetime64[D]")


def to_iso(days) -> np.ndarray:
    """ISO strings ``YYYY-MM-DD`` of day numbers, as an object array with None for ``NO_DATE``."""
    days = np.asarray(days, dtype=np.int64)
    text = np.datetime_as_string(to_datetime64(days)).astype(object)
    text[days == NO_DATE] = None
    return text


def to_arrow(days) -> pa.Array:
    """Arrow ``date32`` column of day numbers, null for ``NO_DATE``."""
    days = np.asarray(days, dtype=np.int64)
    missing = days == NO_DATE
    return pa.array(np.where(missing, 0, days).astype(np.int32), type=pa.date32(), mask=missing)


def _to_arrow(values) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    if isinstance(values, pa.Array):
        return values
    if isinstance(values, (pd.Series, pd.Index)):
        values = values.to_numpy(dtype=object) if values.dtype == object else values
    elif np.ndim(values) == 0:
        values = np.asarray([values], dtype=object)
    else:
        values = np.asarray(values, dtype=object)
    try:
        return pa.array(values, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # values of several kinds (text and numbers, say)
        return mixed_text(values)


def mixed_text(values) -> pa.Array:
    """A column of values of several kinds (text and numbers, say: a DataFrame's object column), which Arrow
    cannot take as one type, as one Arrow text array: text as it is, a date as its ISO form, anything else as
    text in angle brackets that no date or name reads; missing values stay missing."""
    return pa.array([_text(v) for v in values], type=pa.string())


def _text(value) -> str | None:
    """One value of :func:`mixed_text`."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NaT:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (datetime.date, np.datetime64)):
        return str(pd.Timestamp(value).date())
    return f"<{value!r}>"


def _from_date32(dates: pa.Array) -> np.ndarray:
    days = pc.fill_null(pc.cast(dates, pa.int32()), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    days[dates.is_null().to_numpy(zero_copy_only=False)] = NO_DATE
    return days


@numba.njit(cache=True, nogil=True, inline="always")
def _number(data, at, n):
    """The number written by the ``n`` bytes ``data[at:at + n]``, -1 if one is not a digit (``at`` unsigned:
    numba checks signed indices for wraparound)."""
    value = 0
    for k in range(n):
        digit = int64(data[at + uint64(k)]) - 48  # "0"
        if digit < 0 or digit > 9:
            return -1
        value = value * 10 + digit
    return value


@numba.njit(cache=True, nogil=True)
def _iso_days(offsets, data, valid, days) -> bool:
    """Day numbers into ``days`` of an Arrow text array's values (``offsets`` into the bytes ``data``; ``valid``
    per value, or empty: all valid), each ``YYYY-MM-DD`` of a real date from year 1 on; False at the first value
    of any other form."""
    for i in range(len(days)):
        if len(valid) and not valid[i]:
            days[i] = NO_DATE
            continue
        lo = uint64(offsets[i])
        if offsets[i + 1] - offsets[i] != 10 or data[lo + uint64(4)] != 45 or data[lo + uint64(7)] != 45:  # "-"
            return False
        y, m, d = _number(data, lo, 4), _number(data, lo + uint64(5), 2), _number(data, lo + uint64(8), 2)
        if y < 1 or not 1 <= m <= 12 or not 1 <= d <= month_length(y, m):
            return False
        days[i] = day_number(y, m, d)
    return True


def _strict_iso(text) -> np.ndarray | None:
    """Day numbers of a text column (Arrow, string or large_string, chunked or not) whose values are all
    ``YYYY-MM-DD`` dates or null, read from its buffers (no string objects); None when any value is otherwise
    (:func:`_parse_iso` then reads it as Arrow does)."""
    chunks = text.chunks if isinstance(text, pa.ChunkedArray) else [text]
    days = np.empty(len(text), dtype=np.int64)
    start = 0
    for chunk in chunks:
        n = len(chunk)
        _, offsets, data = chunk.buffers()
        width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = np.frombuffer(offsets, dtype=width)[chunk.offset : chunk.offset + n + 1] if n else np.zeros(1, width)
        offsets = offsets.astype(np.int64, copy=False)  # one compiled kernel for both widths
        data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
        valid = chunk.is_valid().to_numpy(zero_copy_only=False) if chunk.null_count else np.zeros(0, dtype=bool)
        if not _iso_days(offsets, data, valid, days[start : start + n]):
            return None
        start += n
    return days


def _parse_iso(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    days = _strict_iso(text)  # the usual column: dates and nulls only, read straight from its bytes
    if days is not None:
        return days, np.zeros(0, np.int64)
    try:  # a clean column that Arrow reads in other forms too, without the trimmed copies below
        return _from_date32(pc.cast(text, pa.date32())), np.zeros(0, np.int64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    text = pc.utf8_trim_whitespace(text)
    text = pc.if_else(pc.equal(text, ""), pa.scalar(None, text.type), text)
    try:
        return _from_date32(pc.cast(text, pa.date32())), np.zeros(0, np.int64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # some values are not dates: find them among the distinct values, then their positions
    text = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text  # as read from Parquet: chunks
    encoded = text.dictionary_encode()
    distinct = encoded.dictionary
    good = np.ones(len(distinct), dtype=bool)
    for i, value in enumerate(distinct.to_pylist()):
        try:
            pc.cast(pa.array([value]), pa.date32())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            good[i] = False
    index = pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False)
    present = text.is_valid().to_numpy(zero_copy_only=False)
    bad = present & ~good[index]
    days = _from_date32(pc.cast(pc.if_else(pa.array(bad), pa.scalar(None, text.type), text), pa.date32()))
    return days, np.flatnonzero(bad).astype(np.int64)
