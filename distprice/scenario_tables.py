"""The forms of a priced table under scenarios, made from the table of each scenario (every portfolio row
under that scenario: its ``scenario`` column, the portfolio's columns, the priced ones):

- ``long`` (the default): one row per (portfolio row, scenario), in the portfolio's order, each row's scenarios
  together in the order they were given: ``id``, ``scenario``, then the columns that a scenario changes
  (:data:`SCENARIO_COLUMNS`: ``price``, ``value``, ``bond_price``, ``option_price``, dated rows' ``dirty_price``,
  ``accrued``, ``clean_price``) and ``error``. The portfolio's columns and the tree's (``width``, ``height``,
  ``engine``) are not repeated: they are the portfolio's, joined on ``id``.
- ``wide``: one row per portfolio row: its columns once, then one column per scenario of each column a scenario
  changes, named ``price[<scenario>]``, then ``accrued``, ``width``, ``height``, ``engine`` and ``error``.
- ``full``: every column under every scenario, a ``scenario`` column first; every row under the first
  scenario, then every row under the second...
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SCENARIO_TABLES = ("long", "wide", "full")
"""The forms of a priced table under scenarios; the first is the default."""
SCENARIO = "scenario"
SCENARIO_COLUMNS = ("price", "value", "bond_price", "option_price", "dirty_price", "accrued", "clean_price", "error")
"""The priced columns a scenario may change, in the priced table's order (``accrued`` does not change, but
belongs beside the dirty and clean prices)."""


def scenario_names(frames: list[pd.DataFrame]) -> list[str]:
    """The scenario of each table (its ``scenario`` column holds one name)."""
    return [str(frame[SCENARIO].iloc[0]) if len(frame) else "" for frame in frames]


def long_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The ``long`` form of the tables of each scenario (the same rows in each)."""
    k, n = len(frames), len(frames[0])
    rows = np.repeat(np.arange(n), k)
    order = rows + n * np.tile(np.arange(k), n)  # row r under scenario s sits at s * n + r of the stack
    columns = {
        "id": frames[0]["id"].take(rows).reset_index(drop=True),
        SCENARIO: pd.Categorical.from_codes(np.tile(np.arange(k), n), scenario_names(frames)),
    }
    for name in SCENARIO_COLUMNS:
        if name in frames[0].columns:
            stacked = pd.concat([frame[name] for frame in frames], ignore_index=True)
            columns[name] = stacked.take(order).reset_index(drop=True)
    return pd.DataFrame(columns, copy=False)


def wide_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The ``wide`` form of the tables of each scenario (the same rows in each)."""
    names = scenario_names(frames)
    first = frames[0]
    once = ("accrued", "error")
    changing = [c for c in SCENARIO_COLUMNS if c in first.columns and c not in once]
    table = first.drop(columns=[SCENARIO, *changing, *once], errors="ignore")
    own = [c for c in table.columns if c not in ("width", "height", "engine")]
    columns = {c: table[c] for c in own}
    for name in changing:
        for scenario, frame in zip(names, frames):
            columns[f"{name}[{scenario}]"] = frame[name].to_numpy()
    if "accrued" in first.columns:
        columns["accrued"] = first["accrued"]
    for name in ("width", "height", "engine"):
        columns[name] = table[name]
    columns["error"] = _errors(frames, names)
    return pd.DataFrame(columns, index=first.index, copy=False)


def full_of_wide(table: pd.DataFrame) -> pd.DataFrame:
    """The ``full`` form of a ``wide`` table (the row's one ``error`` under every scenario)."""
    names = [c[len("price[") : -1] for c in table.columns if c.startswith("price[") and c.endswith("]")]
    if not names:
        raise ValueError("not a wide scenario table: no price[<scenario>] column")
    changing = [c for c in SCENARIO_COLUMNS if f"{c}[{names[0]}]" in table.columns]
    per_scenario = {f"{c}[{n}]" for c in changing for n in names}
    own = [c for c in table.columns if c not in per_scenario]
    frames = []
    for name in names:
        frame = table[own].assign(**{c: table[f"{c}[{name}]"] for c in changing})
        frame.insert(0, SCENARIO, name)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _errors(frames: list[pd.DataFrame], names: list[str]) -> pd.Series:
    """Each row's error: the one every scenario gives, or, where scenarios differ, each scenario's
    (``<scenario>: <error>``) joined by ``; ``."""
    error = frames[0]["error"]
    differ = np.zeros(len(error), dtype=bool)
    for frame in frames[1:]:
        other = frame["error"]
        differ |= (error.isna() != other.isna()).to_numpy() | (error.fillna("") != other.fillna("")).to_numpy()
    if not differ.any():
        return error
    error = error.copy()
    for r in np.flatnonzero(differ):
        said = [f"{s}: {f['error'].iloc[r]}" for s, f in zip(names, frames) if pd.notna(f["error"].iloc[r])]
        error.iloc[r] = "; ".join(said)
    return error
