"""The names a job's options choose among: engines, precisions, datasets, scenario tables, invalid-row policies.

They live here, apart from the code behind them, so that offering them (``distprice --help``, a config's
schema) loads nothing: this module imports nothing, and the modules that implement the names take them from here.
"""

from __future__ import annotations

AUTO = "auto"
"""No engine of its own: the job chooses (the inspector's plan, or the GPU where there is one)."""
ENGINE_NAMES = (AUTO, "reference", "cpu", "gpu-outer", "gpu-flat")
"""What a lattice job may name: ``auto`` or an engine of :data:`distprice.lattice.engines.ENGINES`."""
PATH_ENGINE_NAMES = (AUTO, "reference", "cpu", "gpu")
"""What a Monte-Carlo job may name: ``auto`` or an engine of :data:`distprice.montecarlo.pricing.ENGINES`."""
HESTON_ENGINE_NAMES = (AUTO, "reference", "cpu", "gpu")
"""What a Heston fit may name: ``auto`` or an engine (:func:`distprice.models.heston_fit.heston_engine`)."""

PRECISION_NAMES = ("fp64", "fp32")
"""Floating-point precisions: ``fpNN`` is numpy's ``floatNN`` (:data:`distprice.precision.PRECISIONS`)."""

MIXTURES: dict[str, tuple[str, ...]] = {"U1+S1": ("U1", "S1"), "R1+S2": ("R1", "S2")}
"""Synthetic portfolios made of others, concatenated."""
DATASETS: tuple[str, ...] = ("U1", "U2", "R1", "R2", "R3", "S1", "S2", "B1", *MIXTURES, "book", "desk")
"""Synthetic portfolios :func:`distprice.lattice.datasets.generate` makes."""

SCENARIO_TABLES = ("long", "wide", "full")
"""The forms of a priced table under scenarios (:mod:`distprice.priced`); the first is the default."""
ON_INVALID = ("strict", "report")
"""What a job does with invalid rows: stop (``strict``), or price the others and flag them (``report``)."""
