"""The Python entry point: ``distprice.price``."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .curves import ZeroCurve, builtin_curves, curves_from_frame
from .engines import AUTO, ENGINES, price_auto, resolve
from .engines.batch import Fp32OverflowError, real_dtype
from .instruments import Limits, prepare
from .problems import InvalidInputError
from .tables import read_table

ON_INVALID = ("strict", "report")
PRICED_COLUMNS = ("price", "value", "bond_price", "option_price", "width", "height", "engine", "error")


def load_curves(curves) -> dict[str, ZeroCurve]:
    """A curve set from None (built-ins only), a path, a ``curve, t, zero_rate`` DataFrame or a dict.

    Raises :class:`InvalidInputError` when the curves input breaks a rule of SPEC §1.2.
    """
    if curves is None:
        return builtin_curves()
    if isinstance(curves, dict):
        return {**builtin_curves(), **curves}
    table = curves if isinstance(curves, pd.DataFrame) else read_table(curves)
    curve_set, problems = curves_from_frame(table)
    if problems:
        raise InvalidInputError(problems)
    return curve_set


def price(portfolio, curves=None, *, engine: str = "auto", precision: str = "fp64",
          on_invalid: str = "strict", limits: Limits = Limits()) -> pd.DataFrame:
    """Price every instrument of ``portfolio`` (a DataFrame or a CSV/Parquet path) on its curve.

    Returns the priced table of SPEC §3.4: every input column and row in input order, plus ``price``,
    ``value`` (price * quantity), ``bond_price``, ``option_price``, ``width``, ``height``, ``engine`` (what
    priced the row: with ``engine="auto"`` the inspector may split the portfolio) and ``error``. Prices are
    in the units of ``face``. With ``on_invalid="strict"`` any broken rule raises
    :class:`InvalidInputError` (listing row, column and rule) before pricing; with ``"report"`` the valid
    rows are priced and the others come back with ``price`` NaN and ``error`` set.
    """
    if on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid must be one of {', '.join(ON_INVALID)}, not {on_invalid!r}")
    real_dtype(precision)
    engine = resolve(engine)
    table = portfolio if isinstance(portfolio, pd.DataFrame) else read_table(portfolio)
    curve_set = load_curves(curves)
    prepared = prepare(table, curve_set, limits)
    if prepared.problems and on_invalid == "strict":
        raise InvalidInputError(prepared.problems)

    canonical, valid = prepared.table, prepared.valid
    n = len(canonical)
    bond, option = np.full(n, np.nan), np.full(n, np.nan)
    engine_of_row = np.full(n, engine, dtype=object)
    if valid.any():
        rows = canonical[valid].reset_index(drop=True)
        if engine == AUTO:
            bond[valid], option[valid], plan = price_auto(rows, curve_set, precision)
            engine_of_row[valid] = plan.engine_of_rows(len(rows))
        else:
            bond[valid], option[valid] = ENGINES[engine](rows, curve_set, precision)
        overflowed = valid & ~(np.isfinite(bond) & np.isfinite(option))
        if overflowed.any():
            first = canonical["id"].to_numpy()[np.flatnonzero(overflowed)[0]]
            raise Fp32OverflowError(f"{precision} overflowed on {int(overflowed.sum())} rows (first id {first!r}); "
                                    "price them in fp64")
    sign = canonical["instrument"].map({"bond_option": 0.0, "callable_bond": -1.0, "puttable_bond": 1.0})
    sign = sign.to_numpy(dtype=np.float64)
    instrument_price = np.where(sign == 0.0, option, bond + sign * option)

    errors = np.full(n, None, dtype=object)
    for p in prepared.problems:
        errors[p.position] = str(p) if errors[p.position] is None else f"{errors[p.position]}; {str(p)}"
    geometry = prepared.geometry
    priced = table.drop(columns=[c for c in PRICED_COLUMNS if c in table.columns]).reset_index(drop=True)
    priced = priced.assign(
        price=instrument_price,
        value=instrument_price * canonical["quantity"].to_numpy(),
        bond_price=bond,
        option_price=option,
        width=pd.Series(geometry.width, dtype="Int64").mask(~valid),
        height=pd.Series(geometry.height, dtype="Int64").mask(~valid),
        engine=pd.Series(engine_of_row, index=priced.index, dtype="string").mask(~valid),
        error=pd.array(errors, dtype="string"),
    )
    priced.index = table.index
    return priced
