"""CSR tables: per-row variable-length results as ``offsets`` (rows + 1, int64) and flat arrays; row r owns
``[offsets[r], offsets[r + 1])``.

Kernels fill arrays allocated here by numpy, not arrays of their own: numpy asks the kernel for huge pages,
which take a five-hundredth of the page faults of a fresh array of the same size."""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np


@dataclass(frozen=True)
class DateTable:
    """Dates of every row: row r owns ``dates[offsets[r]:offsets[r + 1]]`` (day numbers, increasing)."""

    offsets: np.ndarray
    dates: np.ndarray

    def row(self, r: int) -> np.ndarray:
        """The dates of row ``r``."""
        return self.dates[self.offsets[r]:self.offsets[r + 1]]

    @property
    def counts(self) -> np.ndarray:
        """Dates per row."""
        return np.diff(self.offsets)


def offsets_of(counts) -> np.ndarray:
    """CSR offsets of per-row counts."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


@numba.njit(cache=True, parallel=True)
def _compact(values, slots, counts, offsets, out):
    for r in numba.prange(len(counts)):
        out[offsets[r]:offsets[r] + counts[r]] = values[slots[r]:slots[r] + counts[r]]


def compact(values: np.ndarray, slots: np.ndarray, counts: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Rows written into ``values[slots[r]:slots[r] + counts[r]]``, packed at ``offsets``."""
    out = np.empty(offsets[-1], dtype=values.dtype)
    _compact(values, slots, counts, offsets, out)
    return out
