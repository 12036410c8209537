"""Bad Monte-Carlo inputs: every problem named by table, row, job and column, all at once."""

from pathlib import Path

import pandas as pd
import pytest

from distprice.errors import InvalidInputError
from distprice.montecarlo import datasets, read_benchmark, read_inputs, validate

DATA = Path(__file__).parent / "data" / "optionpricing"


@pytest.fixture
def medium():
    return read_benchmark(DATA / "finpar_medium.input.data")


def problems(tables):
    with pytest.raises(InvalidInputError) as caught:
        validate(tables)
    return [(p.where, p.column, p.rule) for p in caught.value.problems]


def has(found, where, column, rule_part):
    return any(w == where and c == column and rule_part in r for w, c, r in found)


def test_valid_tables_pass(medium):
    (job,) = validate(medium)
    assert (job.name, job.dates, job.underlyings, job.models) == ("finpar_medium", 5, 3, (0,))


def test_every_problem_is_listed_at_once(medium):
    medium["mc_spots"].loc[1, "spot"] = -5.0
    medium["mc_diffusion"].loc[4, "vol"] = -0.1
    medium["mc_dates"].loc[3, "t"] = medium["mc_dates"].t[1]
    medium["mc_jobs"]["contract"] = ["asian"]
    found = problems(medium)
    assert has(found, "mc_spots row 2 (job 'finpar_medium')", "spot", "must be > 0")
    assert has(found, "mc_diffusion row 5 (job 'finpar_medium')", "vol", "must be >= 0")
    assert has(found, "mc_dates row 4 (job 'finpar_medium')", "t", "strictly increasing")
    assert has(found, "mc_jobs row 1 (job 'finpar_medium')", "contract", "unknown contract 'asian'")


def test_paths_must_be_below_two_to_the_bits(medium):
    medium["mc_jobs"].loc[0, "paths"] = 2**30
    assert has(problems(medium), "mc_jobs row 1 (job 'finpar_medium')", "paths", "must be < 2^sobol_bits")
    medium["mc_jobs"].loc[0, ["paths", "sobol_bits"]] = [100, 33]
    assert has(problems(medium), "mc_jobs row 1 (job 'finpar_medium')", "sobol_bits", "1..32")


@pytest.mark.parametrize("index", [float("inf"), 1e308, -1.0])
def test_an_underlying_index_out_of_reach_is_named(medium, index):
    """An underlying index that is infinite or out of range is named (a whole one far out leaves the models'
    underlyings unequal), not taken for the count of underlyings."""
    medium["mc_spots"]["underlying"] = medium["mc_spots"]["underlying"].astype(float)
    medium["mc_spots"].loc[0, "underlying"] = index
    found = problems(medium)
    if index == 1e308:
        assert has(found, "mc_spots (job 'finpar_medium')", "underlying", "the same underlyings 0..U-1")
    else:
        named = [r for w, c, r in found if w == "mc_spots row 1 (job 'finpar_medium')" and c == "underlying"]
        assert len(named) == 1 and "whole number" in named[0]


def test_missing_and_extra_rows(medium):
    medium["mc_diffusion"] = medium["mc_diffusion"].drop(index=[7])
    medium["mc_cashflows"] = pd.concat(
        [medium["mc_cashflows"], medium["mc_cashflows"].iloc[[0]].assign(k=9)], ignore_index=True
    )
    found = problems(medium)
    assert has(found, "mc_diffusion (job 'finpar_medium')", None, "missing row for model 0, date_index 3, underlying 1")
    assert has(found, "mc_cashflows row 6 (job 'finpar_medium')", "k", "whole number in 0..4")
    extra = medium["mc_spots"].iloc[[0]].assign(model=1)
    medium["mc_spots"] = pd.concat([medium["mc_spots"], extra], ignore_index=True)
    assert has(problems(medium), "mc_spots (job 'finpar_medium')", "underlying", "same underlyings")


def test_dates_and_underlyings_out_of_range(medium):
    medium["mc_diffusion"].loc[0, "date_index"] = 6
    medium["mc_diffusion"].loc[4, "date_index"] = 1
    found = problems(medium)
    assert has(found, "mc_diffusion row 1 (job 'finpar_medium')", "date_index", "whole number in 1..5")
    assert has(found, "mc_diffusion row 5 (job 'finpar_medium')", None, "repeats row 2")


def test_correlation_not_positive_definite():
    tables = datasets.large(4096)
    corr = tables["mc_correlation"]
    corr.loc[(corr.i == 0) & (corr.j == 1), "value"] = 0.99
    corr.loc[(corr.i == 1) & (corr.j == 0), "value"] = 0.99
    corr.loc[(corr.i == 0) & (corr.j == 2), "value"] = -0.99
    corr.loc[(corr.i == 2) & (corr.j == 0), "value"] = -0.99
    assert has(problems(tables), "mc_correlation (job 'large')", "value", "not positive definite")
    tables = datasets.large(4096)
    tables["mc_correlation"].loc[1, "value"] = 0.3
    assert has(problems(tables), "mc_correlation (job 'large')", "value", "symmetric")


def test_cholesky_rules(medium):
    chol = medium["mc_cholesky"]
    chol.loc[chol.index[-1], "value"] = 0.7
    assert has(problems(medium), "mc_cholesky (job 'finpar_medium')", "value", "unit norm")
    medium = read_benchmark(DATA / "finpar_medium.input.data")
    medium["mc_cholesky"] = pd.concat([medium["mc_cholesky"], medium["mc_cholesky"].iloc[[1]].assign(i=0, j=1)])
    assert has(problems(medium), "mc_cholesky (job 'finpar_medium')", "j", "above the diagonal")
    medium["mc_correlation"] = datasets.large(8)["mc_correlation"].assign(job="finpar_medium")
    assert has(problems(medium), "mc_cholesky (job 'finpar_medium')", None, "not both")


def test_directions(medium):
    medium["mc_directions"] = medium["mc_directions"].iloc[1:]
    medium["mc_directions"].loc[5, "value"] = 2**28
    found = problems(medium)
    assert has(found, "mc_directions (job 'finpar_medium')", None, "missing row for dim 0, bit 0")
    assert has(found, "mc_directions row 5 (job 'finpar_medium')", "value", "odd multiple of 2^24")
    medium["mc_directions"] = medium["mc_directions"].iloc[:0]
    assert has(problems(medium), "mc_directions (job 'finpar_medium')", None, "directions = input needs")
    medium = read_benchmark(DATA / "finpar_medium.input.data")
    medium["mc_jobs"]["directions"] = "joe_kuo_6_21201"
    assert has(problems(medium), "mc_directions row 1 (job 'finpar_medium')", None, "set directions = input")


def test_bridge_rules(medium):
    medium["mc_bridge"].loc[2, "ri"] = 4  # date 4 is computed later
    medium["mc_bridge"].loc[3, "sd"] = -1.0
    found = problems(medium)
    assert has(found, "mc_bridge row 3 (job 'finpar_medium')", "ri", "computed at an earlier step")
    assert has(found, "mc_bridge row 4 (job 'finpar_medium')", "sd", "must be >= 0")


def test_contract_shapes_and_terms():
    tables = datasets.large(4096)
    tables["mc_jobs"]["contract"] = "worst_of_autocall"
    found = problems(tables)
    assert has(found, "mc_jobs row 1 (job 'large')", "contract", "4 coupons")
    assert has(found, "mc_cashflows (job 'large')", None, "missing row for model 0, k 2")
    tables = datasets.large(4096)
    tables["mc_terms"] = pd.DataFrame(dict(job="large", term=["strike", "levels"], k=[0, 5], value=[1.0, 2.0]))
    found = problems(tables)
    assert has(found, "mc_terms row 1 (job 'large')", "term", "has no term 'strike'")
    assert has(found, "mc_terms (job 'large')", "k", "without gaps")


def test_unknown_jobs_tables_and_columns(medium, tmp_path):
    medium["mc_spots"].loc[0, "job"] = "ghost"
    assert has(problems(medium), "mc_spots row 1 (job 'ghost')", "job", "not in mc_jobs")
    with pytest.raises(InvalidInputError, match="unknown table"):
        read_inputs({"mc_jobz": pd.DataFrame()})
    del medium["mc_dates"]
    medium["mc_spots"] = medium["mc_spots"].drop(columns="spot")
    found = problems(medium)
    assert ("mc_dates", None, "required table is missing") in found
    assert ("mc_spots", "spot", "required column is missing") in found
    (tmp_path / "prices.txt").write_text("1")
    with pytest.raises(InvalidInputError, match="inputs must be a folder"):
        read_inputs(tmp_path / "prices.txt")
    (tmp_path / "bad.in").write_text("1 2 [[3]")
    with pytest.raises(InvalidInputError, match="not a FinPar or Futhark data file"):
        read_inputs(tmp_path / "bad.in")


@pytest.mark.parametrize(
    "edit",
    [(b"536870912", b"99999999999999999999"), (b"3758.05", b"37\xff58.05"), (b"[ 1 ],\t//bb_bi", b"[ 77 ],\t//bb_bi")],
)
def test_a_data_file_with_a_number_out_of_range_or_bad_bytes_is_named(tmp_path, edit):
    """A direction number beyond int64, bytes that are not UTF-8, a bridge index beyond the dates: each is named
    (before: OverflowError, UnicodeDecodeError, IndexError and a traceback)."""
    text = (DATA / "finpar_small.input.data").read_bytes()
    assert edit[0] in text
    (tmp_path / "bad.input.data").write_bytes(text.replace(edit[0], edit[1], 1))
    with pytest.raises(InvalidInputError, match="not a FinPar or Futhark data file"):
        read_inputs(tmp_path / "bad.input.data")


def test_read_tables_are_the_callers_own(medium):
    """Defaults go into tables of their own, never the caller's; an absent table comes back empty each time, whatever
    a caller did to the one it got before."""
    given = {name: frame.copy() for name, frame in medium.items() if name != "mc_detvals"}
    jobs_before = given["mc_jobs"].copy()
    first = read_inputs(given)
    pd.testing.assert_frame_equal(given["mc_jobs"], jobs_before)
    assert first["mc_jobs"]["sobol_bits"].notna().all()
    first["mc_detvals"]["value"] = [] if first["mc_detvals"].empty else 0.0
    first["mc_detvals"]["extra"] = []
    second = read_inputs(given)
    assert second["mc_detvals"].empty and list(second["mc_detvals"].columns) == ["job", "model", "k", "value"]
