"""Flat arrays that the fast engines (CPU and GPU) read: per-instrument tree parameters, event tables, curves.

One row per instrument of :class:`~.instruments.Instruments` (canonical, valid rows with their geometry).
Floating arrays that enter node arithmetic are in the batch's precision (``real``); tree parameters stay
float64 until an engine has derived its coefficients from them.
"""
from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pandas as pd

from ..curves import ZeroCurve
from .events import EXERCISE_CODES, EventTable, time_form_events
from .geometry import TreeGeometry
from .instruments import Instruments

PACK_THREADS = min(4, os.cpu_count() or 1)
"""Host threads that lay out parts of a portfolio at once (:func:`pack_parts`; numpy releases the GIL)."""


@dataclass(frozen=True)
class Batch:
    """A portfolio laid out for an engine; see the module docstring."""

    real: np.dtype
    """The precision of the node arithmetic (float64 or float32)."""
    geometry: TreeGeometry
    is_call: np.ndarray
    curve_index: np.ndarray
    events: EventTable
    """Redemption, coupons and exercises, raw amounts in float64 (engines apply the forward adjustment)."""
    option_from: np.ndarray
    """Last exercise step of each row: above it the option is worth nothing and is not rolled back."""
    curve_names: tuple[str, ...]
    """The curves ``curve_index`` points to; their knots follow, concatenated."""
    curve_offsets: np.ndarray
    curve_t: np.ndarray
    curve_z: np.ndarray

    def __len__(self) -> int:
        return len(self.is_call)

    def with_curves(self, curves: dict[str, ZeroCurve]) -> "Batch":
        """The same instruments on another curve set (a market scenario): only the knots change."""
        return dataclasses.replace(self, **_curve_knots(self.curve_names, curves))


def _curve_knots(names, curves: dict[str, ZeroCurve]) -> dict:
    knots = [curves[name] for name in names]
    curve_offsets = np.zeros(len(names) + 1, dtype=np.int64)
    np.cumsum([len(c.t) for c in knots], out=curve_offsets[1:])
    curve_t = np.concatenate([c.t for c in knots]) if knots else np.zeros(0)
    curve_z = np.concatenate([c.zero_rate for c in knots]) if knots else np.zeros(0)
    return {"curve_offsets": curve_offsets, "curve_t": curve_t.astype(np.float64),
            "curve_z": curve_z.astype(np.float64)}


def _codes(column: pd.Series, mapping: dict | None = None):
    """Integer codes of a column of labels, and the labels in order of first appearance (``mapping``: the
    code of each label instead)."""
    codes, labels = pd.factorize(column)
    if mapping is None:
        return codes.astype(np.int64), tuple(labels)
    return np.array([mapping[label] for label in labels], dtype=np.int64)[codes], tuple(labels)


def pack(instruments: Instruments, curves: dict[str, ZeroCurve], real=np.float64) -> Batch:
    """Lay out ``instruments`` for the fast engines in precision ``real`` (no Python loop per row)."""
    real = np.dtype(real)
    table = instruments.table
    number = {c: table[c].to_numpy() for c in ("maturity", "coupon", "coupon_frequency", "face", "steps_per_year",
                                               "expiry", "first_exercise", "exercise_frequency", "strike")}
    events = time_form_events(_codes(table["exercise"], EXERCISE_CODES)[0], number["expiry"],
                              number["first_exercise"], number["exercise_frequency"], number["strike"],
                              number["maturity"], number["coupon"], number["coupon_frequency"], number["face"],
                              number["steps_per_year"], (table["instrument"] != "bond").to_numpy())
    curve_index, names = _codes(table["curve"])
    return Batch(
        real=real,
        geometry=instruments.geometry,
        is_call=(table["option_type"] == "call").to_numpy(dtype=bool),
        curve_index=curve_index,
        events=events,
        option_from=events.last_exercise_step(),
        curve_names=names,
        **_curve_knots(names, curves),
    )


def pack_parts(instruments: Instruments, parts: Sequence[np.ndarray], curves: dict[str, ZeroCurve],
               real=np.float64, threads: int = PACK_THREADS) -> Iterator[Batch]:
    """Lays out parts of ``instruments`` (positions) on up to ``threads`` host threads at once and yields their
    batches in order, each as soon as it and those before it are ready (one part: in this thread)."""
    if len(parts) == 1:
        yield pack(instruments.take(parts[0]), curves, real)
        return
    with ThreadPoolExecutor(max(1, min(threads, len(parts)))) as host:
        yield from host.map(lambda rows: pack(instruments.take(rows), curves, real), parts)
