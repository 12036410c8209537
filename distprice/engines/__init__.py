"""Pricing engines. Each takes a canonical, valid table and a curve set and returns bond and option prices.

``reference``: one instrument at a time, literal; ``cpu``: numba, parallel over instruments.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from ..curves import ZeroCurve
from .batch import pack
from .cpu import price_cpu
from .reference import price_reference

Engine = Callable[[pd.DataFrame, dict, str], tuple[np.ndarray, np.ndarray]]


def _cpu(table: pd.DataFrame, curves: dict[str, ZeroCurve], precision: str):
    return price_cpu(pack(table, curves, precision), precision)


ENGINES: dict[str, Engine] = {"reference": price_reference, "cpu": _cpu}
AUTO = "auto"


def resolve(engine: str) -> str:
    """The engine a name stands for: ``auto`` is the fastest one available on this machine."""
    if engine == AUTO:
        return "cpu"
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join([AUTO, *ENGINES])}")
    return engine
