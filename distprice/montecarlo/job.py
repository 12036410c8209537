"""A validated Monte-Carlo job: one contract under M market models, as plain arrays that engines read."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..precision import PRECISIONS
from .bridge import Bridge
from .contracts import Contract

BATCHES = 32
"""Equal contiguous path batches of the ``stderr_batches`` estimate."""


@dataclass(frozen=True)
class Job:
    """One job. Models are in the order of ``models``; underlyings j = 0 … U−1; dates 1 … T.

    ``t``: float64 [T], years. ``directions``: uint32 [T·U, bits], row d = step · U + underlying.
    ``spots`` [M, U]; ``vol``, ``drift`` [M, T, U] (annual vol; log-drift of the increment ending at a date);
    ``cholesky`` [M, U, U] lower triangular; ``discounts`` [M, K]; ``detvals`` [M, K'] (all float64).
    """

    name: str
    contract: Contract
    paths: int
    bits: int
    directions_source: str
    precision: str
    t: np.ndarray
    directions: np.ndarray
    bridge: Bridge
    models: tuple
    spots: np.ndarray
    vol: np.ndarray
    drift: np.ndarray
    cholesky: np.ndarray
    discounts: np.ndarray
    detvals: np.ndarray

    @property
    def dates(self) -> int:
        return len(self.t)

    @property
    def underlyings(self) -> int:
        return self.spots.shape[1]

    @property
    def dims(self) -> int:
        """Sobol dimensions D = T · U."""
        return self.dates * self.underlyings

    @property
    def dtype(self):
        """The scalar type of the job's precision (``np.float64`` or ``np.float32``)."""
        return PRECISIONS[self.precision].type

    @property
    def logarithmic(self) -> bool:
        """Whether engines follow paths as y = log(S / S0), summing the log-increments (fp64: no exp per
        date), rather than as S = S0 · Π exp(…) (fp32: the contract's float32 arithmetic, which reproduces
        Futhark's float32 figures)."""
        return self.precision == "fp64"


def batch_starts(paths: int, batches: int = BATCHES) -> np.ndarray:
    """First path k (0-based) of each batch and, last, ``paths``: batch b holds k with k · batches // paths = b."""
    return -((-np.arange(batches + 1, dtype=np.int64) * paths) // batches)
