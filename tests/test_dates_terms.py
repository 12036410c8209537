"""Day numbers in and out, the registries of names, and reading and checking dated terms: every problem named
by table, row, id, column and rule."""

import datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings, strategies as st

from distprice.dates import (
    CALENDARS,
    CONVENTIONS,
    DAY_COUNTS,
    FIRST_DAY,
    LAST_DAY,
    NO_DATE,
    bond_terms,
    cash_flows,
    check_terms,
    day_numbers,
    parse_dates,
    schedule,
    terms_from_frame,
    to_arrow,
    to_datetime64,
    to_iso,
)
from distprice.errors import InvalidInputError, OptionError


def test_day_numbers_from_every_form_of_date():
    iso = ["1970-01-01", "2026-11-24", None, "1901-01-01"]
    want = [0, 20781, NO_DATE, -25202]
    assert day_numbers(iso).tolist() == want
    assert day_numbers(pd.Series(iso)).tolist() == want
    assert day_numbers(pd.Series(iso, dtype="string[pyarrow]")).tolist() == want
    assert day_numbers(np.array(iso, dtype="datetime64[D]")).tolist() == want
    assert day_numbers(pd.to_datetime(pd.Series(iso))).tolist() == want
    assert day_numbers(pa.array([0, 20781, None, -25202], pa.date32())).tolist() == want
    assert day_numbers([datetime.date(2026, 11, 24), datetime.datetime(2026, 11, 24, 23, 59)]).tolist() == [20781] * 2
    assert day_numbers(np.array(["2026-11-24T18:00"], dtype="datetime64[m]")).tolist() == [20781]
    assert day_numbers([" 2026-11-24 ", ""]).tolist() == [20781, NO_DATE]
    assert day_numbers(np.array([5, 6])).tolist() == [5, 6]  # integers are day numbers already


def test_non_dates_are_named_by_position():
    days, bad = parse_dates(["2026-11-24", "2026-02-30", None, "24/11/2026", "2026-1-5", "2026-11-24"])
    assert bad.tolist() == [1, 3, 4]
    assert days.tolist() == [20781, NO_DATE, NO_DATE, NO_DATE, NO_DATE, 20781]
    with pytest.raises(ValueError, match="3 value\\(s\\) are not dates YYYY-MM-DD, at positions 1, 3, 4"):
        day_numbers(["2026-11-24", "2026-02-30", None, "24/11/2026", "2026-1-5"])


def test_non_dates_are_named_in_a_column_read_in_chunks():
    """A text column as Parquet gives it (Arrow chunks, one per row group) names its non-dates by position too."""
    chunks = pa.chunked_array([["2026-11-24", "2026-02-30"], [None, " 2026-11-25", "24/11/2026", ""]])
    days, bad = parse_dates(pd.Series(pd.arrays.ArrowStringArray(chunks)))
    assert bad.tolist() == [1, 4]
    assert days.tolist() == [20781, NO_DATE, NO_DATE, 20782, NO_DATE, NO_DATE]


_TEXT = st.one_of(
    st.none(),
    st.dates(datetime.date(1, 1, 1), datetime.date(9999, 12, 31)).map(lambda d: d.isoformat()),
    st.sampled_from(
        [
            "",
            " 2026-11-24",
            "2026-11-24 ",
            "2026-1-05",
            "2026-02-30",
            "2026-13-01",
            "0000-03-01",
            "2026/11/24",
            "2026-11-2x",
            "2026-11-2/",
            "2026-11-2:",
            "2026-11-2 ",
            "20261124",
            "２０２６-11-24",
            "2026-11-24T00:00",
        ]
    ),
)


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.lists(_TEXT, max_size=6), min_size=1, max_size=3), large=st.booleans(), skip=st.integers(0, 2))
def test_text_dates_read_from_their_bytes_as_arrow_reads_them(parts, large, skip):
    """A text column of ISO dates and nulls is read straight from its Arrow buffers (chunks, slices, string or
    large_string); any other value sends the whole column the way Arrow's cast and the checks read it: the same
    day numbers and the same positions named either way."""
    kind = pa.large_string() if large else pa.string()
    chunks = [pa.array(p, kind).slice(min(skip, len(p))) for p in parts]
    text = pa.chunked_array(chunks, kind)
    days, bad = parse_dates(text)
    values = text.to_pylist()
    want = [NO_DATE if v is None or v.strip() == "" else _arrow_day(v.strip()) for v in values]
    assert days.tolist() == [NO_DATE if w is None else w for w in want]
    assert bad.tolist() == [i for i, w in enumerate(want) if w is None]


def _arrow_day(text: str):
    """Arrow's own reading of one text date (None: not a date)."""
    try:
        return pc.cast(pa.array([text]), pa.date32()).cast(pa.int32())[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


@pytest.mark.parametrize("values", [[20261124, None, 3], [3.5, np.nan, 20261124.0], [True, None, False]])
def test_a_column_of_numbers_or_booleans_holds_no_date(values):
    """A column of numbers (YYYYMMDD or Excel serials are not dates here) or booleans: each value present is named
    as not a date, none is taken for a day number; a missing one stays missing."""
    days, bad = parse_dates(pd.Series(values))
    assert bad.tolist() == [0, 2]
    assert days.tolist() == [NO_DATE] * 3


def test_a_column_of_several_kinds_names_what_is_not_a_date():
    """A DataFrame's object column of text, numbers and dates (Arrow takes no one type for it) is read value by
    value: dates and ISO text are dates, the rest is named."""
    values = pd.Series(["2030-01-01", 1e308, None, datetime.date(2031, 1, 2), True], dtype=object)
    days, bad = parse_dates(values)
    assert bad.tolist() == [1, 4]
    assert days.tolist() == [21915, NO_DATE, NO_DATE, 22281, NO_DATE]


def test_day_numbers_out():
    days = np.array([0, 20781, NO_DATE])
    assert to_iso(days).tolist() == ["1970-01-01", "2026-11-24", None]
    assert to_datetime64(days).astype(str).tolist() == ["1970-01-01", "2026-11-24", "NaT"]
    assert to_arrow(days).to_pylist() == [datetime.date(1970, 1, 1), datetime.date(2026, 11, 24), None]
    assert day_numbers(to_arrow(days)).tolist() == days.tolist()
    assert day_numbers(to_iso(days)).tolist() == days.tolist()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(FIRST_DAY - 1000, LAST_DAY + 1000) | st.just(NO_DATE), min_size=1, max_size=40))
def test_day_numbers_go_round_every_form(days):
    days = np.array(days, dtype=np.int64)
    assert day_numbers(to_iso(days)).tolist() == days.tolist()
    assert day_numbers(to_arrow(days)).tolist() == days.tolist()
    assert day_numbers(to_datetime64(days)).tolist() == days.tolist()
    assert day_numbers(pd.Series(to_arrow(days).to_pandas(types_mapper=pd.ArrowDtype))).tolist() == days.tolist()


def test_registries():
    assert DAY_COUNTS.code("act/act-icma") == 5 and CALENDARS.name(3) == "TARGET"
    assert len(DAY_COUNTS.meanings) == len(DAY_COUNTS.names) == 6
    codes, unknown = CONVENTIONS.encode(
        pd.Series(["Following", None, " preceding", "nearest", ""]), default="unadjusted"
    )
    assert codes.tolist() == [1, 0, 3, -1, 0] and unknown.tolist() == [3]
    codes, unknown = CONVENTIONS.encode(["following", None])
    assert unknown.tolist() == [1]  # no default: a missing name is unknown
    with pytest.raises(
        OptionError,
        match="unknown day count 'ACT/365': day count must be one of ACT/360, "
        "ACT/365F, 30/360, 30E/360, ACT/ACT-ISDA, ACT/ACT-ICMA",
    ):
        DAY_COUNTS.code("ACT/365")


def frame(**changes):
    rows = pd.DataFrame(
        dict(
            id=["a", "b", "c"],
            maturity_date=["2030-06-15", "2031-01-31", "2029-03-01"],
            issue_date=["2025-06-15", "2025-01-31", None],
            coupon=[0.05, 0.04, 0.0],
            coupon_frequency=[2, 4, 0],
            day_count=["ACT/ACT-ICMA", "30/360", None],
            calendar=["US", "TARGET", "JP"],
            accrual_convention=["unadjusted", "modified_following", None],
            payment_convention=[None, "following", None],
            end_of_month=[False, True, None],
            settlement_days=[2, 0, 1],
        )
    )
    for column, value in changes.items():
        rows[column] = value
    return rows


def test_terms_from_a_table_with_defaults():
    terms = terms_from_frame(frame())
    assert terms.maturity.tolist() == day_numbers(["2030-06-15", "2031-01-31", "2029-03-01"]).tolist()
    assert terms.issue[2] == NO_DATE and terms.frequency.tolist() == [2, 4, 0]
    assert terms.day_count.tolist() == [5, 2, 2]  # default 30/360
    assert terms.accrual_convention.tolist() == [0, 2, 0] and terms.payment_convention.tolist() == [1, 1, 1]
    assert terms.end_of_month.tolist() == [False, True, False]
    assert terms.face.tolist() == [100.0] * 3 and terms.redemption.tolist() == [100.0] * 3
    assert check_terms(terms) == []
    dates = schedule(terms)
    assert dates.counts.tolist() == [11, 25, 0]  # 10 half years + issue; zero coupon: none


def test_integers_out_of_any_range_are_named_at_once():
    """Settlement 10^9 business days away used to be walked day by day (seconds a row); an infinite or 1e308
    integer column used to be cast to int64 with a warning."""
    bad = frame(coupon=[0.05, 0.04, 0.0], coupon_frequency=[1e308, 2, 2], settlement_days=[0, 1e9, float("inf")])
    with pytest.raises(InvalidInputError) as caught:
        terms_from_frame(bad, table="bonds")
    assert {(p.position, p.column, p.rule) for p in caught.value.problems} == {
        (0, "coupon_frequency", "must be one of 1, 2, 4, 12 when coupon > 0"),
        (1, "settlement_days", "must be between 0 and 365"),
        (2, "settlement_days", "must be an integer"),
    }


def test_every_problem_is_named_by_row_id_column_and_rule():
    bad = frame(
        issue_date=["2030-07-01", "2025-13-01", None],
        day_count=["ACT/365", "30/360", None],
        calendar=["US", "NYSE", "JP"],
        coupon=[0.05, 0.04, 0.03],
        coupon_frequency=[3, 4, 0],
        end_of_month=["maybe", True, False],
        settlement_days=[-1, 0, 1.5],
    )
    with pytest.raises(InvalidInputError) as caught:
        terms_from_frame(bad, table="bonds")
    found = {(p.position, p.column, p.rule) for p in caught.value.problems}
    assert found == {
        (0, "day_count", "day count must be one of ACT/360, ACT/365F, 30/360, 30E/360, ACT/ACT-ISDA, ACT/ACT-ICMA"),
        (0, "end_of_month", "must be true or false"),
        (0, "settlement_days", "must be between 0 and 365"),
        (0, "coupon_frequency", "must be one of 1, 2, 4, 12 when coupon > 0"),
        (0, "issue_date", "must be before maturity_date"),
        (1, "issue_date", "must be a date YYYY-MM-DD"),
        (1, "calendar", "calendar must be one of none, weekends, US, TARGET, UK, JP"),
        (2, "issue_date", "is required when coupon > 0"),
        (2, "coupon_frequency", "must be one of 1, 2, 4, 12 when coupon > 0"),
        (2, "settlement_days", "must be an integer"),
    }
    assert str(caught.value.problems[0]).startswith("bonds row 1 (id 'a'), column ")
    assert [p.position for p in caught.value.problems] == sorted(p.position for p in caught.value.problems)


def test_rules_of_dates_and_schedules():
    terms = bond_terms(
        ["2030-06-15", "2200-01-03", "2026-01-04", None, "2026-01-04"],
        ["2025-06-15", "2025-06-15", "2026-01-03", None, "2026-01-03"],
        coupon=0.05,
        frequency=2,
        calendar="weekends",
        accrual_convention=["following"] * 4 + ["unadjusted"],
    )
    problems = check_terms(
        terms,
        valuation=day_numbers(["2026-11-24", "2026-11-24", "1900-12-31", None, None]),
        where=lambda p: f"book row {p}",
    )
    assert [(p.position, p.column, p.rule) for p in problems] == [
        (1, "maturity_date", "must lie in 1901-01-01 .. 2199-12-31"),
        # Saturday 3 to Sunday 4 January 2026, both paid on Monday: no coupon period (but fine unadjusted)
        (2, "maturity_date", "adjusts to the same business day as issue_date: the bond has no coupon period"),
        (2, "valuation_date", "must lie in 1901-01-01 .. 2199-12-31"),
        (3, "maturity_date", "is required"),
        (3, "issue_date", "is required when coupon > 0"),
        (3, "valuation_date", "is required"),
        (4, "valuation_date", "is required"),
    ]
    assert problems[0].where == "book row 1"


def test_a_table_without_maturities_is_refused_at_once():
    with pytest.raises(InvalidInputError, match="portfolio, column 'maturity_date': portfolio must have this column"):
        terms_from_frame(frame().drop(columns="maturity_date"))


def test_zero_coupon_bonds_pay_their_redemption_on_the_adjusted_maturity():
    terms = bond_terms(
        ["2031-05-31", "2031-05-31"],
        coupon=0.0,
        calendar="US",
        payment_convention=["following", "modified_following"],
        face=1000.0,
        redemption=101.0,
        settlement_days=2,
    )
    flows = cash_flows(terms, day_numbers(["2026-11-27"]))  # Friday after Thanksgiving: a business day
    assert to_iso(flows.redemption_date).tolist() == ["2031-06-02", "2031-05-30"]
    assert flows.redemption_amount.tolist() == [1010.0, 1010.0]
    assert to_iso(flows.settlement).tolist() == ["2026-12-01"] * 2
    assert flows.accrued.tolist() == [0.0, 0.0] and flows.coupons.counts.tolist() == [0, 0]
