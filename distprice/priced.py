"""A priced table's columns (:class:`Priced`: some consecutive rows of a portfolio under some curve sets) and the
forms the table takes, all made from them without a copy per scenario of what a scenario does not change.

Under scenarios, ``scenario_table`` chooses the form (:data:`~distprice.choices.SCENARIO_TABLES`):

- ``long`` (the default): one row per (portfolio row, scenario), in the portfolio's order, each row's scenarios
  together in the order they were given: ``id``, ``scenario``, then the columns that a scenario changes
  (``price``, ``value``, ``bond_price``, ``option_price``, dated rows' ``dirty_price``, ``accrued``,
  ``clean_price``) and ``error``. The portfolio's columns and the tree's (``width``, ``height``, ``engine``) are
  not repeated: they are the portfolio's, joined on ``id``.
- ``wide``: one row per portfolio row: its columns once, then one column per scenario of each column a scenario
  changes, named ``price[<scenario>]``, then ``accrued``, ``width``, ``height``, ``engine`` and ``error``.
- ``full``: every column under every scenario, a ``scenario`` column first; every row under the first
  scenario, then every row under the second...
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .tables import STR

SCENARIO = "scenario"
PRICES = ("price", "value", "bond_price", "option_price")
DATED_PRICES = ("dirty_price", "accrued", "clean_price")
"""Columns of a portfolio with dated rows (after ``option_price``; NaN on time-form rows)."""
TREE = ("width", "height", "engine")


@dataclass(frozen=True)
class Priced:
    """Consecutive rows of a portfolio priced under ``k`` curve sets (``scenarios``: their names, None for a job
    without scenarios). ``inputs``: the portfolio's columns echoed (all, some or none), ``index`` the
    portfolio's index of the rows; ``changing``: the columns a scenario changes, each a (k, rows) array in the
    table's order (``accrued`` is one row of values: it does not change); ``measures``: the risk columns;
    ``tree``: ``width``, ``height``, ``engine``; ``errors``: the rows' errors by row (a few), and
    ``unpriced``: per curve set, the rows whose prices left the float range there. ``node_steps``: each row's
    (0 where not priced)."""

    inputs: pd.DataFrame
    index: pd.Index
    scenarios: list[str] | None
    changing: dict[str, np.ndarray]
    measures: dict[str, np.ndarray]
    tree: dict[str, object]
    errors: dict[int, str]
    unpriced: list[dict[int, str]]
    node_steps: np.ndarray

    def __len__(self) -> int:
        return len(self.index)

    @property
    def sets(self) -> int:
        return len(self.changing["price"])

    def frame(self, s: int) -> pd.DataFrame:
        """The full table of these rows under curve set ``s``: its ``scenario`` first (with scenarios), the
        portfolio's columns, the prices, the measures, the tree and ``error``."""
        columns: dict[str, object] = {}
        if self.scenarios is not None:
            columns[SCENARIO] = pd.Series(self.scenarios[s], index=range(len(self)), dtype=STR)
        columns.update({name: self.inputs[name] for name in self.inputs.columns})
        for name, values in self.changing.items():
            columns[name] = values[s] if values.ndim == 2 else values
        columns.update(self.measures)
        columns.update(self.tree)
        columns["error"] = messages(len(self), {**self.errors, **self.unpriced[s]})
        frame = pd.DataFrame(columns, copy=False)
        if self.scenarios is None:
            frame.index = self.index
        return frame

    def totals(self) -> tuple[np.ndarray, np.ndarray]:
        """Per curve set, the rows priced and the total value (priced rows)."""
        priced = np.isfinite(self.changing["price"])
        return priced.sum(axis=1), np.nansum(self.changing["value"], axis=1)


def long_table(priced: Priced) -> pd.DataFrame:
    """The ``long`` form of ``priced`` (its ``inputs`` must hold ``id``)."""
    n, k = len(priced), priced.sets
    rows = np.repeat(np.arange(n), k)
    columns: dict[str, object] = {
        "id": priced.inputs["id"].take(rows).reset_index(drop=True),
        SCENARIO: pd.Categorical.from_codes(np.tile(np.arange(k, dtype=np.int32), n), priced.scenarios),
    }
    for name, values in priced.changing.items():
        columns[name] = values[rows] if values.ndim == 1 else np.ascontiguousarray(values.T).reshape(-1)
    codes = np.full((n, k), -1, dtype=np.int64)
    said = list(priced.errors.values())
    codes[list(priced.errors)] = np.arange(len(said))[:, None]
    for s, unpriced in enumerate(priced.unpriced):
        for r, message in unpriced.items():
            codes[r, s] = len(said)
            said.append(message)
    columns["error"] = labels(codes.reshape(-1), said)
    return pd.DataFrame(columns, copy=False)


def wide_table(priced: Priced) -> pd.DataFrame:
    """The ``wide`` form of ``priced`` (its ``inputs``: the portfolio's columns; with scenarios)."""
    names = priced.scenarios or []
    columns: dict[str, object] = {name: priced.inputs[name] for name in priced.inputs.columns}
    for name, values in priced.changing.items():
        if values.ndim == 2:
            for scenario, row in zip(names, values):
                columns[f"{name}[{scenario}]"] = row
    if "accrued" in priced.changing:
        columns["accrued"] = priced.changing["accrued"]
    columns.update(priced.measures)
    columns.update(priced.tree)
    errors = dict(priced.errors)
    for r in sorted({r for unpriced in priced.unpriced for r in unpriced}):
        said = [f"{s}: {u[r]}" for s, u in zip(names, priced.unpriced) if r in u]
        errors[r] = "; ".join(([errors[r]] if r in errors else []) + said)
    columns["error"] = messages(len(priced), errors)
    return pd.DataFrame(columns, copy=False)


def full_of_wide(table: pd.DataFrame) -> pd.DataFrame:
    """The ``full`` form of a ``wide`` table (each row's one ``error`` under every scenario)."""
    names = [c[len("price[") : -1] for c in table.columns if c.startswith("price[") and c.endswith("]")]
    if not names:
        raise ValueError("not a wide scenario table: no price[<scenario>] column")
    changing = [c for c in (*PRICES, *DATED_PRICES) if f"{c}[{names[0]}]" in table.columns]
    per_scenario = {f"{c}[{n}]" for c in changing for n in names}
    own = [c for c in table.columns if c not in per_scenario]
    frames = []
    for name in names:
        frame = table[own].assign(**{c: table[f"{c}[{name}]"] for c in changing})
        frame.insert(0, SCENARIO, name)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def labels(codes: np.ndarray, names) -> pd.arrays.ArrowStringArray:
    """A ``string`` column whose row r is ``names[codes[r]]`` (missing where ``codes[r] < 0``), built in Arrow:
    one Python string per name, none per row."""
    codes = np.asarray(codes, dtype=np.int64)
    names = list(names)
    if not names:
        return pd.arrays.ArrowStringArray(pa.nulls(len(codes), pa.large_string()))
    return pd.arrays.ArrowStringArray(pc.take(pa.array(names, type=pa.large_string()), pa.array(codes, mask=codes < 0)))


def messages(n: int, by_row: dict[int, str]) -> pd.arrays.ArrowStringArray:
    """A ``string`` column of ``n`` rows holding the messages ``by_row``, missing elsewhere."""
    codes = np.full(n, -1, dtype=np.int64)
    codes[list(by_row)] = np.arange(len(by_row))
    return labels(codes, by_row.values())
