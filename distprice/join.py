"""Parquet files of one schema joined into one file without decoding them: their row groups' bytes copied one
after the other, and one footer holding every row group, its offsets moved by where its bytes now lie.

A Parquet file is ``PAR1``, the row groups' pages, the footer (a Thrift compact-protocol ``FileMetaData``), the
footer's length (4 bytes, little-endian) and ``PAR1``. The footer is read here as a tree of fields, by number, as
the protocol spells them, so fields this module does not know travel unchanged; only the file offsets of the row
groups and their column chunks (data, dictionary and index pages, bloom filters) are moved, the row groups
renumbered and the rows summed. A part's :class:`Template` (its row groups encoded but for those fields) can be
made where the part was written, so that the joining process only copies bytes and fills in numbers. Files with
page indexes (offsets inside pages of their own) are not joined here: :func:`footer` names them.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"PAR1"
STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
"""Thrift compact-protocol types."""

# FileMetaData, RowGroup, ColumnChunk and ColumnMetaData fields, by number
SCHEMA, NUM_ROWS, ROW_GROUPS = 2, 3, 4
COLUMNS, GROUP_FILE_OFFSET, ORDINAL = 1, 5, 7
CHUNK_FILE_OFFSET, META_DATA, OFFSET_INDEX, COLUMN_INDEX = 2, 3, 4, 6
PAGE_OFFSETS = (9, 10, 11, 14)
"""ColumnMetaData: data_page_offset, index_page_offset, dictionary_page_offset, bloom_filter_offset."""


@dataclass
class Struct:
    """A Thrift struct: its fields in order, each ``[number, type, value]`` (a list: a struct's value, a
    :class:`List`, bytes, an int, a float or a bool)."""

    fields: list[list]

    def get(self, number: int):
        return next((f[2] for f in self.fields if f[0] == number), None)

    def set(self, number: int, value) -> None:
        for f in self.fields:
            if f[0] == number:
                f[2] = value
                return
        raise KeyError(number)


@dataclass
class List:
    kind: int
    items: list


@dataclass
class Encoded:
    """A struct already in the compact protocol (a list item written as it is)."""

    data: bytes


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def byte(self) -> int:
        self.at += 1
        return self.data[self.at - 1]

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, kind: int):
        if kind in (TRUE, FALSE):  # a bool in a list or map is a byte of its own
            return self.byte() == TRUE
        if kind == BYTE:
            return self.byte()
        if kind in (I16, I32, I64):
            return self.zigzag()
        if kind == DOUBLE:
            self.at += 8
            return struct.unpack_from("<d", self.data, self.at - 8)[0]
        if kind == BINARY:
            n = self.varint()
            self.at += n
            return self.data[self.at - n : self.at]
        if kind in (LIST, SET):
            head = self.byte()
            size, inner = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            return List(inner, [self.value(inner) for _ in range(size)])
        if kind == MAP:
            size = self.varint()
            types = self.byte() if size else 0
            pairs = [(self.value(types >> 4), self.value(types & 0x0F)) for _ in range(size)]
            return ("map", types, pairs)
        if kind == STRUCT:
            return self.struct()
        raise ValueError(f"unknown Thrift type {kind}")

    def struct(self) -> Struct:
        fields: list[list] = []
        last = 0
        while True:
            head = self.byte()
            kind = head & 0x0F
            if kind == STOP:
                return Struct(fields)
            delta = head >> 4
            number = last + delta if delta else self.zigzag()
            value = kind == TRUE if kind in (TRUE, FALSE) else self.value(kind)
            fields.append([number, kind, value])
            last = number


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


def _value(kind: int, value) -> bytes:
    if kind in (TRUE, FALSE):
        return bytes([TRUE if value else FALSE])
    if kind == BYTE:
        return bytes([value & 0xFF])
    if kind in (I16, I32, I64):
        return _zigzag(value)
    if kind == DOUBLE:
        return struct.pack("<d", value)
    if kind == BINARY:
        return _varint(len(value)) + bytes(value)
    if kind in (LIST, SET):
        size = len(value.items)
        head = bytes([(size << 4) | value.kind]) if size < 15 else bytes([0xF0 | value.kind]) + _varint(size)
        return head + b"".join(_value(value.kind, item) for item in value.items)
    if kind == MAP:
        _, types, pairs = value
        if not pairs:
            return b"\x00"
        body = b"".join(_value(types >> 4, k) + _value(types & 0x0F, v) for k, v in pairs)
        return _varint(len(pairs)) + bytes([types]) + body
    if kind == STRUCT:
        return value.data if isinstance(value, Encoded) else encode(value)
    raise ValueError(f"unknown Thrift type {kind}")


def encode(value: Struct) -> bytes:
    """A struct in the Thrift compact protocol."""
    out, last = bytearray(), 0
    for number, kind, item in value.fields:
        if kind in (TRUE, FALSE):
            kind = TRUE if item else FALSE
        delta = number - last
        out += bytes([(delta << 4) | kind]) if 0 < delta <= 15 else bytes([kind]) + _zigzag(number)
        if kind not in (TRUE, FALSE):
            out += _value(kind, item)
        last = number
    out.append(STOP)
    return bytes(out)


def decode(data: bytes) -> Struct:
    """A struct from its Thrift compact-protocol bytes."""
    return _Reader(data).struct()


@dataclass
class Footer:
    """A Parquet file's footer, decoded, and where its row groups' bytes lie: ``start`` to ``stop``."""

    meta: Struct
    start: int
    stop: int


OFFSET, NUMBER = "offset", "number"
SLOTS: dict[str | None, dict[int, str]] = {
    "group": {GROUP_FILE_OFFSET: OFFSET, ORDINAL: NUMBER},
    "chunk": {CHUNK_FILE_OFFSET: OFFSET, OFFSET_INDEX: OFFSET, COLUMN_INDEX: OFFSET},
    "meta": dict.fromkeys(PAGE_OFFSETS, OFFSET),
}
"""The fields a join changes, by struct: a row group's, a column chunk's, a column chunk's metadata's."""
INNER: dict[tuple[str | None, int], str] = {("group", COLUMNS): "chunk", ("chunk", META_DATA): "meta"}


@dataclass(frozen=True)
class Template:
    """A Parquet file made ready to join (:func:`template`, on the worker that wrote it, so that the joining
    client decodes nothing): its ``path``, where its row groups' bytes lie (``start`` to ``stop``), its ``rows``,
    its ``schema`` (encoded), its footer but the row groups (``meta``), and each row group encoded but for the
    fields a join changes: bytes, and between them ``(OFFSET, value)`` or ``(NUMBER, value)`` slots."""

    path: str
    start: int
    stop: int
    rows: int
    schema: bytes
    meta: Struct
    groups: list[list]


def _segments(value: Struct, level: str | None, out: list) -> None:
    """``value`` encoded onto ``out`` (its last item a bytearray being filled), the fields of :data:`SLOTS`
    left as slots."""
    last = 0
    for number, kind, item in value.fields:
        if kind in (TRUE, FALSE):
            kind = TRUE if item else FALSE
        delta = number - last
        out[-1] += bytes([(delta << 4) | kind]) if 0 < delta <= 15 else bytes([kind]) + _zigzag(number)
        inner = INNER.get((level, number))
        if number in SLOTS.get(level, {}):
            out += [(SLOTS[level][number], item), bytearray()]
        elif inner is not None and kind == STRUCT:
            _segments(item, inner, out)
        elif inner is not None and kind == LIST:
            size = len(item.items)
            out[-1] += bytes([(size << 4) | STRUCT]) if size < 15 else bytes([0xF0 | STRUCT]) + _varint(size)
            for element in item.items:
                _segments(element, inner, out)
        elif kind not in (TRUE, FALSE):
            out[-1] += _value(kind, item)
        last = number
    out[-1].append(STOP)


def template(path) -> Template:
    """The :class:`Template` of the Parquet file ``path`` (ValueError as :func:`footer`)."""
    part = footer(path)
    meta = part.meta
    groups = []
    for group in meta.get(ROW_GROUPS).items:
        out: list = [bytearray()]
        _segments(group, "group", out)
        groups.append([bytes(s) if isinstance(s, bytearray) else s for s in out])
    schema = encode(Struct([f for f in meta.fields if f[0] == SCHEMA]))
    rest = Struct([list(f) for f in meta.fields if f[0] != ROW_GROUPS])
    return Template(str(path), part.start, part.stop, meta.get(NUM_ROWS), schema, rest, groups)


def _filled(group: list, by: int, number: int) -> bytes:
    """A row group of a :class:`Template` with its offsets moved ``by`` bytes and its number ``number``."""
    return b"".join(s if isinstance(s, bytes) else _zigzag(s[1] + by if s[0] == OFFSET else number) for s in group)


def footer(path) -> Footer:
    """The footer of the Parquet file ``path``; ValueError for what is not one, or has page indexes."""
    size = os.path.getsize(path)
    with open(path, "rb") as file:
        if size < 12 or file.read(4) != MAGIC:
            raise ValueError(f"{path}: not a Parquet file")
        file.seek(size - 8)
        length, magic = struct.unpack("<I4s", file.read(8))
        if magic != MAGIC or length > size - 12:
            raise ValueError(f"{path}: not a Parquet file (its footer is missing)")
        file.seek(size - 8 - length)
        meta = decode(file.read(length))
    for group in meta.get(ROW_GROUPS).items:
        for chunk in group.get(COLUMNS).items:
            if chunk.get(OFFSET_INDEX) is not None or chunk.get(COLUMN_INDEX) is not None:
                raise ValueError(f"{path}: has page indexes, which are not joined")
    return Footer(meta, 4, size - 8 - length)


COPIERS = 4
"""Threads that copy parts' bytes into a joined file at once (each copy at its own offset, in the kernel)."""


class Joined:
    """One Parquet file written part by part into the open binary ``file``: :meth:`add` places a part's row groups
    after the previous part's and fills in their footer entries, its bytes copied on one of ``copiers`` threads
    (and the part removed after, with ``remove``) while the next parts come; :meth:`close` waits for the copies
    and writes the footer. Every part must have the first part's schema (ValueError)."""

    def __init__(self, file, copiers: ThreadPoolExecutor, remove: bool = False):
        self.file, self.copiers, self.remove = file, copiers, remove
        self.first: Template | None = None
        self.groups: list[Encoded] = []
        self.copies: deque[Future] = deque()  # the copies not yet seen to end well, in order
        self.rows = 0
        file.write(MAGIC)
        file.flush()
        self.end = len(MAGIC)

    def add(self, part) -> None:
        """Adds a part: a :class:`Template`, or the path of a Parquet file (its template made here)."""
        part = part if isinstance(part, Template) else template(part)
        if self.first is None:
            self.first = part
        elif part.schema != self.first.schema:
            raise ValueError(f"{part.path}: its schema differs from the first part's")
        self._check()
        count = part.stop - part.start
        copy = self.copiers.submit(_copy, part.path, part.start, self.file.name, self.end, count, self.remove)
        self.copies.append(copy)
        for group in part.groups:
            self.groups.append(Encoded(_filled(group, self.end - part.start, len(self.groups))))
        self.end += count
        self.rows += part.rows

    def _check(self) -> None:
        """Raises the error of the first copy that failed among those ended (a full disk stops the join at the
        next part, not at its end)."""
        while self.copies and self.copies[0].done():
            self.copies.popleft().result()

    def close(self) -> None:
        if self.first is None:
            raise ValueError("no part to join")
        for copy in self.copies:
            copy.result()
        fields = [list(f) for f in self.first.meta.fields]
        fields.append([ROW_GROUPS, LIST, List(STRUCT, self.groups)])
        meta = Struct(sorted(fields, key=lambda f: f[0]))
        meta.set(NUM_ROWS, self.rows)
        data = encode(meta)
        self.file.seek(self.end)
        self.file.write(data + struct.pack("<I", len(data)) + MAGIC)


def _copy(path, offset: int, target, at: int, count: int, remove: bool) -> None:
    """``count`` bytes of the file ``path`` from ``offset`` into the file ``target`` at ``at`` (through handles of
    this copy's own), in the kernel where it can (``copy_file_range``), else through memory; then, with
    ``remove``, the file removed."""
    done = 0
    with open(path, "rb") as source, open(target, "r+b") as out:
        if hasattr(os, "copy_file_range"):  # Linux
            try:
                while done < count:
                    sent = os.copy_file_range(source.fileno(), out.fileno(), count - done, offset + done, at + done)
                    if not sent:
                        break
                    done += sent
            except OSError:  # another file system, or a kernel without it: the rest through memory
                pass
        source.seek(offset + done)
        out.seek(at + done)
        while done < count:
            block = source.read(min(count - done, 1 << 24))
            if not block:
                raise ValueError(f"{path}: shorter than its footer says")
            out.write(block)
            done += len(block)
    if remove:
        os.unlink(path)


def join_parquet(parts, path, remove: bool = False) -> int:
    """The Parquet files ``parts`` (paths or :class:`Template` values, in order) joined into one file at
    ``path``; returns its rows. With ``remove`` each part is deleted once its bytes are copied; all are copied
    (and removed) when this returns."""
    with open(Path(path), "wb") as file, ThreadPoolExecutor(COPIERS, thread_name_prefix="distprice-join") as copiers:
        joined = Joined(file, copiers, remove)  # the copies end (the executor's exit) before the file closes
        for part in parts:
            joined.add(part)
        joined.close()
    return joined.rows
