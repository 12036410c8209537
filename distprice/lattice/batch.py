"""Flat arrays that the fast engines (CPU and GPU) read: per-instrument tree parameters, event tables, curves.

One row per instrument of :class:`~.instruments.Instruments` (canonical, valid rows with their geometry).
Floating arrays that enter node arithmetic are in the batch's precision (``real``); tree parameters stay
float64 until an engine has derived its coefficients from them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np
import pandas as pd

from ..curves import ZeroCurve
from ..dates import NO_DATE
from ..stopwatch import stage
from ..tables import factorized
from .dated import dated_events
from .events import EXERCISE_CODES, EventTable, time_form_events
from .geometry import TreeGeometry
from .instruments import Instruments
from .placement import spread_cash_flows

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
    curve_names: tuple[tuple[str, int], ...]
    """The curves ``curve_index`` points to, each a curve id and the valuation date it is seen from (``NO_DATE``
    for a curve with knots in years); their knots follow, concatenated."""
    curve_offsets: np.ndarray
    curve_t: np.ndarray
    curve_z: np.ndarray

    def __len__(self) -> int:
        return len(self.is_call)

    def with_curves(self, curves: dict[str, ZeroCurve]) -> Batch:
        """The same instruments on another curve set (a market scenario): only the knots change."""
        return dataclasses.replace(self, **_curve_knots(self.curve_names, curves))


def _curve_knots(keys, curves: dict[str, ZeroCurve]) -> dict:
    knots = [curves[name].at(valuation) for name, valuation in keys]
    curve_offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum([len(c.t) for c in knots], out=curve_offsets[1:])
    curve_t = np.concatenate([c.t for c in knots]) if knots else np.zeros(0)
    curve_z = np.concatenate([c.zero_rate for c in knots]) if knots else np.zeros(0)
    return {
        "curve_offsets": curve_offsets,
        "curve_t": curve_t.astype(np.float64),
        "curve_z": curve_z.astype(np.float64),
    }


def _mapped(column: pd.Series, mapping: dict) -> np.ndarray:
    """The code ``mapping`` gives each row's label (int64; every label present must have one; missing: -1). A
    label column of the canonical table is a Categorical: its codes are taken as they are, not hashed again."""
    codes, labels = factorized(column)
    used = np.bincount(codes[codes >= 0], minlength=len(labels)) > 0
    return np.array([mapping[label] if hit else -1 for label, hit in zip(labels, used)] + [-1], dtype=np.int64)[codes]


def _is(column: pd.Series, label: str) -> np.ndarray:
    """Where a column of labels holds ``label`` (missing: false)."""
    codes, labels = factorized(column)
    return np.array([value == label for value in labels] + [False], dtype=bool)[codes]


EVENT_COLUMNS = (
    "maturity",
    "coupon",
    "coupon_frequency",
    "face",
    "steps_per_year",
    "expiry",
    "first_exercise",
    "exercise_frequency",
    "strike",
)
"""The canonical number columns the event tables are built from."""
LAYOUT_COLUMNS = (*EVENT_COLUMNS, "exercise", "instrument", "option_type", "curve", "valuation")
"""The canonical columns :func:`pack` reads (not the ids, volatilities, quantities)."""


def events_of(instruments: Instruments) -> EventTable:
    """The events of every row of ``instruments`` (time-form and dated), in the order the engines apply them."""
    table = instruments.table
    number = {c: table[c].to_numpy() for c in EVENT_COLUMNS}
    exercise = _mapped(table["exercise"], EXERCISE_CODES)
    has_option = ~_is(table["instrument"], "bond")
    timed = np.flatnonzero(~instruments.is_dated)
    rows = slice(None) if len(timed) == len(table) else timed
    parts = (
        [
            (
                timed,
                time_form_events(
                    *(
                        v[rows]
                        for v in (
                            exercise,
                            number["expiry"],
                            number["first_exercise"],
                            number["exercise_frequency"],
                            number["strike"],
                            number["maturity"],
                            number["coupon"],
                            number["coupon_frequency"],
                            number["face"],
                            number["steps_per_year"],
                            has_option,
                        )
                    )
                ),
            )
        ]
        if len(timed)
        else []
    )
    if instruments.dated is not None:
        dated = np.flatnonzero(instruments.is_dated)
        phase = instruments.geometry.phase[dated]
        parts.append(
            (
                dated,
                spread_cash_flows(
                    dated_events(
                        instruments.dated.take(dated),
                        exercise[dated],
                        number["strike"][dated],
                        has_option[dated],
                        number["steps_per_year"][dated],
                        phase,
                    ),
                    number["steps_per_year"][dated],
                    phase,
                ),
            )
        )
    return EventTable.combine(len(table), parts)


def pack(instruments: Instruments, curves: dict[str, ZeroCurve], real=np.float64) -> Batch:
    """Lay out ``instruments`` for the fast engines in precision ``real`` (no Python loop per row): their
    events (:func:`events_of`), then the rest of the layout."""
    with stage("events"):
        events = events_of(instruments)
    with stage("layout"):
        table = instruments.table
        curve_index, keys = _curve_keys(table["curve"], table["valuation"].to_numpy(), curves)
        return Batch(
            real=np.dtype(real),
            geometry=instruments.geometry,
            is_call=_is(table["option_type"], "call"),
            curve_index=curve_index,
            events=events,
            option_from=events.last_exercise_step(),
            curve_names=keys,
            **_curve_knots(keys, curves),
        )


def _curve_keys(names: pd.Series, valuation: np.ndarray, curves: dict[str, ZeroCurve]):
    """Each row's curve as an index into the distinct (curve id, valuation date) pairs, in order of first
    appearance, and those pairs (the date only for curves with knots by date: other curves are the same on
    every date)."""
    codes, labels = factorized(names)
    codes, used = pd.factorize(codes)  # the labels present, in order of first appearance
    labels = [str(labels[k]) for k in used]
    by_date = np.array([curves[name].dates is not None for name in labels], dtype=bool)
    if not by_date.any():
        return codes.astype(np.int64), tuple((name, NO_DATE) for name in labels)
    day_codes, days = pd.factorize(np.where(by_date[codes], valuation, NO_DATE))
    index, pairs = pd.factorize(codes.astype(np.int64) * len(days) + day_codes)
    return index.astype(np.int64), tuple((labels[k // len(days)], int(days[k % len(days)])) for k in pairs)


def pack_parts(
    instruments: Instruments,
    parts: Sequence[np.ndarray],
    curves: dict[str, ZeroCurve],
    real=np.float64,
    threads: int = PACK_THREADS,
) -> Iterator[Batch]:
    """Lays out parts of ``instruments`` (positions) on up to ``threads`` host threads at once and yields their
    batches in order, each as soon as it and those before it are ready (one part: in this thread). Each of
    those threads runs numba's parallel loops on as many threads as this one (a Dask worker's own count, say,
    not every core of the machine)."""
    if len(parts) == 1:
        yield pack(instruments.take(parts[0], LAYOUT_COLUMNS), curves, real)
        return
    inner = numba.get_num_threads()  # numba's count is per thread: a new thread would start at every core

    def laid(rows):
        numba.set_num_threads(inner)
        return pack(instruments.take(rows, LAYOUT_COLUMNS), curves, real)

    with ThreadPoolExecutor(max(1, min(threads, len(parts)))) as host:
        yield from host.map(laid, parts)
