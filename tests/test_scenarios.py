"""Market scenarios: reading a scenarios table onto a base curve set, and parallel shift grids."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice.curves import builtin_curves, curves_from_frame
from distprice.errors import InvalidInputError
from distprice.priced import PRICES
from distprice.scenarios import parse_shifts, read_scenarios, shifted


@pytest.fixture
def base():
    """Built-in ``hull`` plus two curves of the curves input, ``eur`` and ``usd``."""
    curves, problems = curves_from_frame(
        pd.DataFrame(
            dict(curve=["eur", "eur", "usd", "usd"], t=[1.0, 10.0, 0.5, 5.0], zero_rate=[0.02, 0.03, 0.04, 0.045])
        )
    )
    assert problems == []
    return curves


def two_scenarios():
    """``up`` shocks ``eur``; ``down`` shocks ``usd`` (3 knots). Rows 1-2 are ``up``, rows 3-5 ``down``."""
    return pd.DataFrame(
        dict(
            scenario=["up", "up", "down", "down", "down"],
            curve=["eur", "eur", "usd", "usd", "usd"],
            t=[1.0, 10.0, 0.5, 2.0, 5.0],
            zero_rate=[0.025, 0.035, 0.035, 0.038, 0.04],
        )
    )


def problems_of(table, base):
    with pytest.raises(InvalidInputError) as raised:
        read_scenarios(table, base)
    return [str(p) for p in raised.value.problems]


def test_scenarios_replace_listed_curves_and_keep_the_rest(base):
    sets = read_scenarios(two_scenarios(), base)
    assert list(sets) == ["up", "down"]
    assert set(sets["up"]) == set(sets["down"]) == {"hull", "eur", "usd"}
    np.testing.assert_array_equal(sets["up"]["eur"].t, [1.0, 10.0])
    np.testing.assert_array_equal(sets["up"]["eur"].zero_rate, [0.025, 0.035])
    np.testing.assert_array_equal(sets["down"]["usd"].t, [0.5, 2.0, 5.0])
    np.testing.assert_array_equal(sets["down"]["usd"].zero_rate, [0.035, 0.038, 0.04])
    assert sets["up"]["usd"] is base["usd"] and sets["down"]["eur"] is base["eur"]
    assert sets["up"]["hull"] is base["hull"]
    np.testing.assert_array_equal(sets["down"]["hull"].zero_rate, builtin_curves()["hull"].zero_rate)
    np.testing.assert_array_equal(base["eur"].zero_rate, [0.02, 0.03])  # the base set is left alone


def test_scenario_may_add_a_curve_and_names_are_strings(base):
    table = pd.DataFrame(dict(scenario=[7, 7], curve=["gbp", "gbp"], t=[1.0, 3.0], zero_rate=[0.05, 0.051]))
    sets = read_scenarios(table, base)
    assert list(sets) == ["7"]
    assert set(sets["7"]) == {"hull", "eur", "usd", "gbp"}
    assert sets["7"]["gbp"].rate(2.0) == pytest.approx(0.0505, rel=1e-14)
    assert "gbp" not in base


def test_reading_a_csv_file_equals_reading_the_frame(base, tmp_path):
    path = tmp_path / "scenarios.csv"
    two_scenarios().to_csv(path, index=False)
    from_file, from_frame = read_scenarios(path, base), read_scenarios(two_scenarios(), base)
    assert list(from_file) == list(from_frame)
    for name in from_frame:
        assert set(from_file[name]) == set(from_frame[name])
        for curve in from_frame[name]:
            np.testing.assert_array_equal(from_file[name][curve].t, from_frame[name][curve].t)
            np.testing.assert_array_equal(from_file[name][curve].zero_rate, from_frame[name][curve].zero_rate)


def test_missing_columns(base):
    assert problems_of(two_scenarios().drop(columns=["scenario", "t"]), base) == [
        "scenarios input, column 'scenario': scenarios input must have this column",
        "scenarios input, column 't': scenarios input must have this column",
    ]


def test_empty_table(base):
    assert problems_of(two_scenarios().iloc[:0], base) == ["scenarios input: scenarios input has no rows"]


@pytest.mark.parametrize("blank", [None, np.nan, "", "  "])
def test_blank_scenario_name(base, blank):
    table = two_scenarios()
    table.loc[3, "scenario"] = blank
    assert problems_of(table, base) == ["scenarios row 4, column 'scenario': scenario name is required"]


def test_rows_are_numbered_by_position_whatever_the_index(base):
    table = two_scenarios().set_axis([40, 30, 20, 10, 0])
    table.loc[10, "scenario"] = ""
    assert problems_of(table, base) == ["scenarios row 4, column 'scenario': scenario name is required"]


def test_non_increasing_t_names_the_scenarios_row_and_scenario(base):
    table = two_scenarios()
    table.loc[4, "t"] = 2.0  # row 5 of the input, row 3 of scenario 'down'
    assert problems_of(table, base) == [
        "scenarios row 5 (scenario 'down'), column 't': must be strictly increasing within curve 'usd'"
    ]


def test_negative_t(base):
    table = two_scenarios()
    table.loc[2, "t"] = -0.5
    assert problems_of(table, base) == ["scenarios row 3 (scenario 'down'), column 't': must be >= 0"]


@pytest.mark.parametrize("bad", [np.nan, np.inf, "x"])
def test_non_finite_zero_rate(base, bad):
    table = two_scenarios().astype({"zero_rate": object})
    table.loc[1, "zero_rate"] = bad
    assert problems_of(table, base) == ["scenarios row 2 (scenario 'up'), column 'zero_rate': must be a finite number"]


def test_every_problem_is_reported_in_row_order(base):
    table = two_scenarios()
    table.loc[4, "zero_rate"] = np.nan
    table.loc[2, "scenario"] = ""
    table.loc[0, "curve"] = None
    table.loc[3, "t"] = -1.0
    assert problems_of(table, base) == [
        "scenarios row 1 (scenario 'up'), column 'curve': curve id is required",
        "scenarios row 3, column 'scenario': scenario name is required",
        "scenarios row 4 (scenario 'down'), column 't': must be >= 0",
        "scenarios row 5 (scenario 'down'), column 'zero_rate': must be a finite number",
    ]


def test_shifted_grid(base):
    sets = shifted(base, [-100, 0, 50])
    assert list(sets) == ["-100bp", "+0bp", "+50bp"]
    for name, shift in zip(sets, (-100, 0, 50)):
        assert set(sets[name]) == {"hull", "eur", "usd"}
        for curve, original in base.items():
            moved = sets[name][curve]
            np.testing.assert_array_equal(moved.t, original.t)
            np.testing.assert_allclose(moved.zero_rate - original.zero_rate, shift * 1e-4, rtol=0, atol=1e-17)
    for curve, original in base.items():
        np.testing.assert_array_equal(sets["+0bp"][curve].zero_rate, original.zero_rate)


def test_shift_names():
    assert list(shifted(builtin_curves(), [12.5, -0.0, 1e3, -7])) == ["+12.5bp", "+0bp", "+1000bp", "-7bp"]


def test_parallel_shift_scales_discount_factors(base):
    up = shifted(base, [100])["+100bp"]
    for curve, original in base.items():
        assert up[curve].discount(5.0) == pytest.approx(original.discount(5.0) * np.exp(-0.01 * 5.0), rel=1e-15)


@pytest.mark.parametrize("shifts", [[], [50, -10, 50], [0, -0.0]])
def test_parse_shifts_rejects_empty_and_repeated_shifts(shifts):
    with pytest.raises(ValueError):
        parse_shifts(shifts)


def test_the_three_scenario_tables_of_a_dated_book_hold_the_same_prices():
    from distprice.lattice.desk import AS_OF, desk

    book = desk(120, seed=2)
    options = dict(curves=book.curves, exercise_schedule=book.exercise_schedule, as_of=AS_OF, shifts_bp=[-10, 0, 10])
    long, wide, full = (
        distprice.price(book.portfolio, scenario_table=form, **options) for form in ("long", "wide", "full")
    )
    assert list(long.columns) == ["id", "scenario", *PRICES, "dirty_price", "accrued", "clean_price", "error"]
    assert len(long) == len(full) == 3 * len(wide) == 3 * len(book.portfolio)
    for name in ("-10bp", "+0bp", "+10bp"):
        of_full = full[full["scenario"] == name].reset_index(drop=True)
        of_long = long[long["scenario"] == name].reset_index(drop=True)
        for column in ("price", "value", "dirty_price", "clean_price"):
            np.testing.assert_array_equal(of_long[column], of_full[column])
            np.testing.assert_array_equal(wide[f"{column}[{name}]"], of_full[column])
        np.testing.assert_array_equal(wide["accrued"], of_full["accrued"])
    assert np.isfinite(long["price"]).all() and long["error"].isna().all()
