"""What a report is drawn from: the priced table and what the caller knows of the job that made it.

A row of the priced table is *priced* when its ``price`` is a number and *invalid* when it has no price and
its ``error`` says why (a priced row may carry an ``error`` too: a measure that failed, such as its OAS).
Scenario runs repeat every row under each scenario (a ``wide`` table is read as the ``full`` one it holds; a
``long`` one lacks the trees and the portfolio's columns the report draws); the book's breakdowns are drawn
from the base scenario (``+0bp`` or ``base`` when there is one, else the first).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import OptionError
from ..inspector import Plan
from ..job import SCENARIO_COLUMN, Summary
from ..priced import full_of_wide
from ..tables import read_table

PHASES = {
    "start": "start (the cluster's included)",
    "read": "read",
    "checks": "checks",
    "plan": "plan",
    "price": "price",
    "write": "write",
    "job": "the job (read, checks, plan, price, write)",
    "stop": "cluster stop",
    "other": "the rest (start-up, reading before the job)",
}
"""Phases of a job's wall time, in order: the keys of ``timings`` and their labels."""
WORKER_TOTALS = ("rows", "node_steps", "seconds", "kernel_seconds")
"""Per-worker totals of the pricing metrics (see :mod:`distprice.cluster.metrics`); ``device`` may come too."""
BASE_SCENARIOS = ("+0bp", "base")
CURRENCY_CODE = re.compile(r"^[A-Z]{3}$")
"""A curve id that names a currency (``USD``)."""


@dataclass(frozen=True)
class JobRecord:
    """A priced table and the job's facts. ``plan``: the inspector's plan of the valid rows in table order,
    ``plan_seconds``: the actual seconds of each of its parts; ``chunks``: the client's chunks, positions
    among the valid rows (or a count: cut here as the planner cuts), and ``chunk_seconds``, the predicted and
    actual seconds of pricing of each on its worker; ``timings``: seconds by phase (:data:`PHASES`), the whole
    job's; ``workers``: totals per worker (:data:`WORKER_TOTALS`, ``device``)."""

    priced: pd.DataFrame
    source: str | None = None
    plan: Plan | None = None
    plan_seconds: tuple[float, ...] | None = None
    chunks: list[np.ndarray] | int | None = None
    chunk_seconds: tuple[tuple[float, float], ...] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    summary: Summary | None = None
    workers: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        priced,
        *,
        portfolio=None,
        plan: Plan | None = None,
        plan_seconds: Sequence[float] | None = None,
        chunks=None,
        chunk_seconds: Sequence[tuple[float, float]] | None = None,
        timings: Mapping[str, float] | None = None,
        summary: Summary | None = None,
        workers: Mapping[str, Mapping] | None = None,
    ) -> JobRecord:
        """The record of a priced table (a DataFrame or a CSV / Parquet path) with the caller's facts checked;
        :class:`OptionError` names what cannot be used."""
        source = str(portfolio) if isinstance(portfolio, (str, Path)) else None
        if not isinstance(priced, pd.DataFrame):
            source = source or str(priced)
            priced = read_table(priced)
        if any(str(c).startswith("price[") for c in priced.columns):
            priced = full_of_wide(priced)
        timings = dict(timings or {})
        unknown = [k for k in timings if k not in PHASES]
        if unknown:
            raise OptionError(f"timings: unknown phase {unknown[0]!r}; the phases are {', '.join(PHASES)}")
        if plan is not None and plan_seconds is not None and len(plan_seconds) != len(plan.parts):
            raise OptionError(f"plan_seconds has {len(plan_seconds)} values for a plan of {len(plan.parts)} parts")
        if chunk_seconds is not None and (isinstance(chunks, (int, np.integer)) or chunks is None):
            raise OptionError("chunk_seconds needs the chunks themselves (their rows), not their count")
        if chunk_seconds is not None and len(chunk_seconds) != len(chunks):
            raise OptionError(f"chunk_seconds has {len(chunk_seconds)} pairs for {len(chunks)} chunks")
        workers = {str(w): dict(t) for w, t in (workers or {}).items()}
        for worker, totals in workers.items():
            missing = [k for k in WORKER_TOTALS if k not in totals]
            if missing:
                raise OptionError(
                    f"workers[{worker!r}] lacks {', '.join(missing)}; each worker needs {', '.join(WORKER_TOTALS)}"
                )
        return cls(
            priced,
            source,
            plan,
            None if plan_seconds is None else tuple(map(float, plan_seconds)),
            chunks,
            None if chunk_seconds is None else tuple((float(p), float(a)) for p, a in chunk_seconds),
            timings,
            summary,
            workers,
        )

    @cached_property
    def scenarios(self) -> list[str]:
        """Scenario names in table order (empty when the job had none)."""
        if SCENARIO_COLUMN not in self.priced.columns:
            return []
        return [str(s) for s in pd.unique(self.priced[SCENARIO_COLUMN])]

    @property
    def base_scenario(self) -> str | None:
        names = self.scenarios
        return next((b for b in BASE_SCENARIOS if b in names), names[0] if names else None)

    @cached_property
    def book(self) -> pd.DataFrame:
        """The rows of the portfolio once: under the base scenario in scenario runs."""
        if not self.scenarios:
            return self.priced
        return self.priced[self.priced[SCENARIO_COLUMN] == self.base_scenario]

    @cached_property
    def currencies(self) -> np.ndarray | None:
        """The currency of each row of the book: its ``currency`` column, else its curve's id where every id names a
        currency (three capital letters, as ``USD``); None when the rows do not say."""
        book = self.book
        for column in ("currency", "curve"):
            if column in book.columns:
                names = book[column].astype("string").fillna("").to_numpy(dtype=object)
                if column == "currency" or all(CURRENCY_CODE.match(n) for n in pd.unique(names)):
                    return names
        return None

    def column(self, name: str, frame: pd.DataFrame | None = None) -> np.ndarray | None:
        """A numeric column of ``frame`` (the book by default) as float64, NaN where missing; None if absent."""
        frame = self.book if frame is None else frame
        if name not in frame.columns:
            return None
        return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def priced_mask(frame: pd.DataFrame) -> np.ndarray:
    return np.isfinite(pd.to_numeric(frame["price"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan))


def invalid_mask(frame: pd.DataFrame) -> np.ndarray:
    return ~priced_mask(frame) & frame["error"].notna().to_numpy()
