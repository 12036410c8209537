"""The names of day counts, calendars and business-day conventions, and their integer codes.

Kernels take the codes (int8, the position of the name in its registry); tables and users give names, matched
without regard to case or surrounding spaces.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import OptionError
from .convert import mixed_text


@dataclass(frozen=True)
class Registry:
    """One kind of convention: ``names[code]`` with a one-line meaning each (``meanings[code]``)."""

    kind: str
    names: tuple[str, ...]
    meanings: tuple[str, ...]
    _codes: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_codes", {n.upper(): c for c, n in enumerate(self.names)})

    def rule(self) -> str:
        """The rule a value of this kind obeys, for error messages."""
        return f"{self.kind} must be one of {', '.join(self.names)}"

    def code(self, name: str) -> int:
        """The code of ``name``; OptionError listing the allowed names for anything else."""
        code = self._codes.get(str(name).strip().upper())
        if code is None:
            raise OptionError(f"unknown {self.kind} {name!r}: {self.rule()}")
        return code

    def name(self, code: int) -> str:
        """The name of ``code``."""
        return self.names[code]

    def encode(self, values, default: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Codes (int8) of a column of names, and the positions of values that are not names of this kind
        (their code is -1). Missing values (null, NaN, empty) take ``default``; without one they are unknown."""
        encoded = _encoded(values)  # the distinct values, matched once each
        missing = -1 if default is None else self.code(default)
        table = np.array(
            [
                self._codes.get(v.strip().upper(), -1) if v and v.strip() else missing
                for v in encoded.dictionary.to_pylist()
            ]
            + [missing],
            dtype=np.int8,
        )
        codes = table[pc.fill_null(encoded.indices, len(encoded.dictionary)).to_numpy(zero_copy_only=False)]
        return codes, np.flatnonzero(codes < 0).astype(np.int64)

    def codes(self, values) -> np.ndarray:
        """Codes (int8 array; 0-d for one value) from a name or a code, or a column of either; OptionError
        naming the values that are not of this kind."""
        if isinstance(values, (int, np.integer)) or (isinstance(values, np.ndarray) and values.dtype.kind in "iu"):
            codes = np.asarray(values)
            bad = np.unique(codes[(codes < 0) | (codes >= len(self.names))])
            if len(bad):
                raise OptionError(f"unknown {self.kind} code(s) {bad.tolist()}: codes are 0..{len(self.names) - 1}")
            codes = codes.astype(np.int8)
        elif isinstance(values, str):
            codes = np.array(self.code(values), dtype=np.int8)
        else:
            codes, unknown = self.encode(values)
            if len(unknown):
                raise OptionError(f"unknown {self.kind} at position(s) {unknown[:10].tolist()}: {self.rule()}")
        return codes


def _encoded(values) -> pa.DictionaryArray:
    """``values`` (see :func:`_arrow`) by their distinct texts; a column of categories as it is."""
    arrow = _arrow(values)
    if pa.types.is_dictionary(arrow.type) and (
        pa.types.is_string(arrow.type.value_type) or pa.types.is_large_string(arrow.type.value_type)
    ):
        return arrow
    return _strings(arrow).dictionary_encode()


def _arrow(values) -> pa.Array:
    """``values`` (a pandas column, an Arrow or numpy array, a sequence or one value) as one Arrow array;
    pandas columns backed by Arrow are taken without a copy through Python objects."""
    if not isinstance(values, (pa.Array, pa.ChunkedArray)):
        if np.ndim(values) == 0:
            values = [values]
        try:
            values = pa.array(getattr(values, "array", values), from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # values of several kinds: no name reads the others
            values = mixed_text(values)
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _strings(values) -> pa.Array:
    """``values`` (see :func:`_arrow`) as one Arrow text array."""
    values = _arrow(values)
    if pa.types.is_null(values.type):
        return pa.nulls(len(values), pa.string())
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        return values
    return pc.cast(values, pa.string())


DAY_COUNTS = Registry(
    "day count",
    ("ACT/360", "ACT/365F", "30/360", "30E/360", "ACT/ACT-ISDA", "ACT/ACT-ICMA"),
    (
        "actual days / 360 (money markets)",
        "actual days / 365 (sterling and yen markets)",
        "30/360 US bond basis: D1 31 -> 30; D2 31 -> 30 when D1 is 30 (US corporate and agency bonds)",
        "30E/360 Eurobond basis: both 31sts -> 30 (eurobonds)",
        "actual/actual ISDA: days in each calendar year over that year's length (swaps)",
        "actual/actual ICMA: days over the reference period's days times its length in years (government bonds)",
    ),
)
ACT_360, ACT_365F, THIRTY_360, THIRTY_E_360, ACT_ACT_ISDA, ACT_ACT_ICMA = range(6)

CALENDARS = Registry(
    "calendar",
    ("none", "weekends", "US", "TARGET", "UK", "JP"),
    (
        "no holidays: every day is a business day",
        "Saturdays and Sundays only",
        "US government bond market (SIFMA)",
        "TARGET2, the euro's payment system",
        "London Stock Exchange",
        "Japan (Tokyo Stock Exchange)",
    ),
)
NO_CALENDAR, WEEKENDS, US, TARGET, UK, JP = range(6)

CONVENTIONS = Registry(
    "business-day convention",
    ("unadjusted", "following", "modified_following", "preceding"),
    (
        "the date as it is",
        "the first business day on or after the date",
        "following, unless that is in the next month: then preceding",
        "the last business day on or before the date",
    ),
)
UNADJUSTED, FOLLOWING, MODIFIED_FOLLOWING, PRECEDING = range(4)

FREQUENCIES = (1, 2, 4, 12)
"""Coupon payments a year; the schedule's tenor is ``12 / f`` months."""
