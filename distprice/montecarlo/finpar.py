"""Reading the benchmark's data files into the Monte-Carlo tables.

Two formats hold the same sets: FinPar's ``input.data`` (``//`` comments, six header scalars: contract,
paths, dates T, underlyings U, models M, Sobol bits) and Futhark's ``.in`` (``--`` comments, ``i32`` /
``f32`` suffixes, two header scalars: contract, paths). Both continue with nine arrays:

    dir_vs [T·U][bits]  md_cs [M][U][U] (lower triangle read)  md_vols, md_drifts [M][T][U]
    md_starts [M][U]    md_detvals [M][k]   md_discts [M][k]   bb_inds [3][T]   bb_data [3][T]

Numbers are read at full decimal precision (float64). The dates are recovered from the bridge
(t_T = sd_0², then each step's date from its ends and weights) and rounded to whole days / 365 where they
are whole days. A FinPar set is priced in fp64, a Futhark set (whose outputs are float32) in fp32.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InvalidInputError, Problem
from . import sobol

_TOKEN = re.compile(r"\[|\]|,|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?:[iuf](?:8|16|32|64))?")
_SUFFIX = re.compile(r"[iuf](?:8|16|32|64)$")
DAYS_PER_YEAR = 365.0


def _values(text: str) -> list:
    """The top-level values of a data file: numbers and nested lists of numbers."""
    text = re.sub(r"(//|--).*", "", text)
    stack: list[list] = [[]]
    for token in _TOKEN.findall(text):
        if token == "[":
            stack.append([])
        elif token == "]":
            if len(stack) == 1:
                raise ValueError("unbalanced ']'")
            done = stack.pop()
            stack[-1].append(done)
        elif token != ",":
            stack[-1].append(float(_SUFFIX.sub("", token)))
    if len(stack) != 1:
        raise ValueError("unbalanced '['")
    return stack[0]


def _dates(index, left, right, sd, lw, rw) -> np.ndarray:
    """Dates (years) that a bridge was built from: t_T = sd_0², t_m = t_l + rw · (t_r − t_l)."""
    dates = len(index)
    t = np.zeros(dates + 1)
    t[index[0]] = sd[0] ** 2
    for i in range(1, dates):
        t[index[i]] = t[left[i]] + rw[i] * (t[right[i]] - t[left[i]])
    days = np.rint(t * DAYS_PER_YEAR)
    whole = np.abs(t * DAYS_PER_YEAR - days) < 1e-6
    return np.where(whole, days / DAYS_PER_YEAR, t)[1:]


def read_benchmark(path) -> dict[str, pd.DataFrame]:
    """The tables of a FinPar ``input.data`` or Futhark ``.in`` file; the job is named after the file
    (``finpar_small.input.data`` → ``finpar_small``). InvalidInputError if the file does not parse."""
    path = Path(path)
    name = path.name.split(".")[0]
    futhark = path.suffix == ".in"
    try:
        values = _values(path.read_text())
        header = 2 if futhark else 6
        if len(values) != header + 9:
            raise ValueError(f"expected {header} scalars and 9 arrays, found {len(values)} values")
        contract, paths = (int(v) for v in values[:2])
        dir_vs, md_cs, vols, drifts, starts, detvals, discts, bb_inds, bb_data = values[header:]
        directions = np.array(dir_vs, dtype=np.int64)
        cholesky = np.array(md_cs, dtype=np.float64)
        vols, drifts = np.array(vols, dtype=np.float64), np.array(drifts, dtype=np.float64)
        starts, discts = np.array(starts, dtype=np.float64), np.array(discts, dtype=np.float64)
        index, left, right = np.array(bb_inds, dtype=np.int64)
        sd, lw, rw = np.array(bb_data, dtype=np.float64)
        models, dates, underlyings = vols.shape
        bits = directions.shape[1]
        if not futhark and [int(v) for v in values[2:6]] != [dates, underlyings, models, bits]:
            raise ValueError("the header's dates, underlyings, models and bits disagree with the arrays")
        job = dict(job=name)
        return {
            "mc_jobs": pd.DataFrame(
                [
                    dict(
                        job=name,
                        contract=contract,
                        paths=paths,
                        sobol_bits=bits,
                        directions=sobol.INPUT,
                        precision="fp32" if futhark else "fp64",
                    )
                ]
            ),
            "mc_dates": pd.DataFrame(
                dict(job, date_index=np.arange(1, dates + 1), t=_dates(index, left, right, sd, lw, rw))
            ),
            "mc_spots": _long(job, starts, ("model", "underlying"), "spot"),
            "mc_diffusion": _long(
                job,
                np.stack([vols, drifts], axis=-1),
                ("model", "date_index", "underlying", None),
                ("vol", "drift"),
                date_axis=1,
            ),
            "mc_cholesky": _long(job, cholesky, ("model", "i", "j"), "value").query("j <= i").reset_index(drop=True),
            "mc_cashflows": _long(job, discts, ("model", "k"), "discount"),
            "mc_detvals": _long(job, np.array(detvals, dtype=np.float64).reshape(models, -1), ("model", "k"), "value"),
            "mc_directions": _long(job, directions, ("dim", "bit"), "value"),
            "mc_bridge": pd.DataFrame(
                dict(job, step=np.arange(dates), bi=index, li=left, ri=right, sd=sd, lw=lw, rw=rw)
            ),
        }
    except (ValueError, TypeError, OverflowError, IndexError) as error:  # UnicodeDecodeError is a ValueError
        raise InvalidInputError(
            [Problem(None, str(path), None, f"not a FinPar or Futhark data file: {error}")]
        ) from None


def _long(job: dict, array: np.ndarray, axes: tuple, value, date_axis: int | None = None) -> pd.DataFrame:
    """A long table of ``array``: one column per axis (the date axis counted from 1), then the values."""
    keys = [axis for axis in axes if axis is not None]
    names = (value,) if isinstance(value, str) else value
    if array.size == 0:
        return pd.DataFrame(
            {column: pd.Series(dtype=object if column == "job" else np.float64) for column in (*job, *keys, *names)}
        )
    shape = array.shape[: len(keys)]
    grid = np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")
    columns = {axis: g.ravel() + (1 if i == date_axis else 0) for i, (axis, g) in enumerate(zip(keys, grid))}
    values = array.reshape(int(np.prod(shape)), -1)
    columns.update({n: values[:, i] for i, n in enumerate(names)})
    return pd.DataFrame({**job, **columns})
