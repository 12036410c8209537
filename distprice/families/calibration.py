"""The calibration families on a cluster: every Heston surface (:func:`~distprice.models.fit_surface`) or
Hull-White model (:func:`~distprice.models.fit_hull_white`) of a quotes table fitted at once, one task each."""

from __future__ import annotations

import functools

import pandas as pd

from ..models import (
    fit_hull_white,
    fit_surface,
    heston_surfaces,
    heston_tables,
    model_table,
    read_quotes,
    swaption_sets,
)
from ..tables import read_table
from .work import Chunk, Family, Work, Workers


def read_heston(quotes, **options):
    """The quotes table (a table or path, as :func:`distprice.calibrate_heston` takes it), its surfaces, and the
    keywords of :func:`~distprice.models.fit_surface`."""
    table = read_quotes(quotes) if not isinstance(quotes, pd.DataFrame) else quotes
    return table, heston_surfaces(table), options


def split_heston(read, workers: Workers) -> Work:
    """One ``fit_heston`` task per surface; the work's result is the surfaces and quotes tables of
    :func:`distprice.calibrate_heston`."""
    table, surfaces, options = read
    fit = functools.partial(fit_surface, **options)
    chunks = [Chunk(f"fit_heston-{i}", fit, (surface,)) for i, surface in enumerate(surfaces)]
    return Work(chunks, lambda fits: heston_tables(table, surfaces, list(fits)), "fitting surfaces")


def read_hull_white(quotes, *, curves):
    """The swaption quotes table (a table or path) and the curves (id -> ZeroCurve) it is fitted on."""
    return (read_table(quotes) if not isinstance(quotes, pd.DataFrame) else quotes), curves


def split_hull_white(read, workers: Workers) -> Work:
    """One ``fit_hull_white`` task per model; the work's result is the model table of
    :func:`distprice.calibrate_hull_white`."""
    table, curves = read
    chunks = [
        Chunk(f"fit_hull_white-{i}", fit_hull_white, (swaptions,))
        for i, swaptions in enumerate(swaption_sets(table, curves))
    ]
    return Work(chunks, lambda fits: model_table(list(fits)), "fitting models")


HESTON = Family(read_heston, split_heston)
"""Heston's five parameters fitted to option quote surfaces by differential evolution."""
HULL_WHITE = Family(read_hull_white, split_hull_white)
"""Hull-White mean reversion and volatility fitted to European swaptions."""
