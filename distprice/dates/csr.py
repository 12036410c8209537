"""CSR tables: per-row variable-length results as ``offsets`` (rows + 1, int64) and flat arrays; row r owns
``[offsets[r], offsets[r + 1])``.

Kernels fill arrays that numpy allocated rather than arrays of their own: numpy asks the operating system for
huge pages, and a fresh array then takes a small fraction of the page faults."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DateTable:
    """Dates of every row: row r owns ``dates[offsets[r]:offsets[r + 1]]`` (day numbers, increasing)."""

    offsets: np.ndarray
    dates: np.ndarray

    def row(self, r: int) -> np.ndarray:
        """The dates of row ``r``."""
        return self.dates[self.offsets[r] : self.offsets[r + 1]]

    @property
    def counts(self) -> np.ndarray:
        """Dates per row."""
        return np.diff(self.offsets)


def offsets_of(counts) -> np.ndarray:
    """CSR offsets of per-row counts."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets
