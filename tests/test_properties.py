"""The model's invariants as properties of instruments that Hypothesis draws, in years and dated, so that a
failure shrinks to one instrument: volatility moves callable and puttable prices the right way; callable <=
straight <= puttable; European put-call parity; american >= bermudan >= european; convergence to the closed form;
the CPU engine equal to the reference engine.

The trees are small (a few years at 4 to 52 steps a year; 256 in the test of convergence) so that each property
runs in seconds; the ``ci`` profile of conftest.py makes the draws the same on every CI run."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import distprice
from distprice.dates import CALENDARS, CONVENTIONS, DAY_COUNTS, cash_flows, terms_from_frame, to_iso
from distprice.lattice import instruments

from utils import assert_engines_close, european_terms, jamshidian_bond_option

PROPERTY = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VALUATION = np.datetime64("2025-12-15")
KNOTS = np.array([0.0, 2.0, 10.0])
"""The years of the drawn curve's knots (flat beyond the last, linear between)."""


@st.composite
def curves(draw) -> pd.DataFrame:
    """A curve ``drawn`` with zero rates of -0.5 % to 7 % at :data:`KNOTS`, on ACT/365F (the curve years of
    :func:`~utils.european_terms`)."""
    rates = [draw(st.integers(-5, 70)) / 1000 for _ in KNOTS]
    return pd.DataFrame({"curve": "drawn", "t": KNOTS, "zero_rate": rates, "day_count": "ACT/365F"})


def _model(draw) -> dict:
    """The columns of a row's model and size: a 0.01-0.6, sigma 0.2-3 %, face 100 or 1 000, the drawn curve."""
    return dict(
        mean_reversion=draw(st.integers(1, 60)) / 100,
        volatility=draw(st.integers(2, 30)) / 1000,
        face=draw(st.sampled_from([100.0, 1000.0])),
        curve="drawn",
    )


@st.composite
def in_years(draw) -> dict:
    """A bond in years whose exercise dates lie on its tree's grid (every bermudan date is an american step and
    the european expiry a bermudan date); strike 85-115 % of face."""
    spy = draw(st.sampled_from([4, 12, 24]))
    height = draw(st.integers(2, 6 * spy))
    last = draw(st.integers(1, height))
    coupon = draw(st.sampled_from([0.0, 0.03, 0.06, 0.09]))
    row = dict(
        _model(draw),
        maturity=height / spy,
        expiry=last / spy,
        first_exercise=draw(st.integers(0, last)) / spy,
        exercise_frequency=draw(st.sampled_from([f for f in (1, 2, 4, 12) if spy % f == 0])),
        coupon=coupon,
        coupon_frequency=draw(st.sampled_from([1, 2, 4])) if coupon else 0,
        steps_per_year=spy,
    )
    return dict(row, strike=row["face"] * draw(st.integers(85, 115)) / 100)


@st.composite
def dated(draw) -> dict:
    """A dated bond of any day count, calendar, conventions, settlement and frequency, valued on any day of a
    week, 4 months to 4 years long; its exercise window from one coupon payment date to a later one (so the
    european expiry is a bermudan date, and every bermudan date a business day, an american date); strike
    85-115 (% of face)."""
    valuation = VALUATION + np.timedelta64(draw(st.integers(0, 6)), "D")
    calendar = draw(st.sampled_from(CALENDARS.names))
    row = dict(
        _model(draw),
        valuation_date=str(valuation),
        issue_date=str(valuation - np.timedelta64(draw(st.integers(0, 400)), "D")),
        maturity_date=str(valuation + np.timedelta64(draw(st.integers(120, 4 * 365)), "D")),
        coupon=draw(st.integers(1, 36)) / 400,
        coupon_frequency=draw(st.sampled_from([1, 2, 4, 12])),
        day_count=draw(st.sampled_from(DAY_COUNTS.names)),
        calendar=calendar,
        accrual_convention=draw(st.sampled_from(CONVENTIONS.names)),
        # an unadjusted payment on a holiday would be a bermudan date that no american day covers
        payment_convention=draw(
            st.sampled_from([c for c in CONVENTIONS.names if c != "unadjusted" or calendar == "none"])
        ),
        end_of_month=draw(st.booleans()),
        settlement_days=draw(st.integers(0, 3)),
        steps_per_year=draw(st.sampled_from([12, 52])),
        strike=float(draw(st.integers(85, 115))),
    )
    terms = terms_from_frame(pd.DataFrame([row]))
    flows = cash_flows(terms, np.array([valuation.astype(np.int64)]))
    last = min(int(flows.redemption_date[0]), int(terms.maturity[0]))
    payments = [int(d) for d in flows.coupons.payment if d <= last]
    assume(payments)
    expiry = draw(st.integers(0, len(payments) - 1))
    first = draw(st.integers(0, expiry))
    return dict(row, first_exercise_date=to_iso([payments[first]])[0], expiry_date=to_iso([payments[expiry]])[0])


INSTRUMENTS = st.one_of(in_years(), dated())


def _price(rows: list[dict], curve: pd.DataFrame, engine: str = "cpu") -> pd.DataFrame:
    priced = distprice.price(pd.DataFrame([dict(row, id=i) for i, row in enumerate(rows)]), curve, engine=engine)
    assert priced["error"].isna().all(), priced["error"].dropna().tolist()
    return priced


OPTION_TERMS = ("strike", "expiry", "first_exercise", "exercise_frequency", "expiry_date", "first_exercise_date")
"""The columns of an option's terms, which a plain bond leaves empty."""


def _plain(bond: dict) -> dict:
    """``bond`` without its option: instrument ``bond``."""
    return dict({k: v for k, v in bond.items() if k not in OPTION_TERMS}, instrument="bond")


def _rounding(row: dict) -> float:
    """What rounding may move a price of ``row`` by (face units)."""
    return 1e-11 * row["face"]


@PROPERTY
@given(bond=INSTRUMENTS, curve=curves(), exercise=st.sampled_from(["european", "bermudan", "american"]))
def test_volatility_lowers_a_callable_and_raises_a_puttable(bond, curve, exercise):
    """Doubling sigma: the embedded option is worth more, the callable less and the puttable more; the straight
    bond, which the tree reprices exactly, stays where it is."""
    rows = [
        dict(bond, instrument=kind, exercise=exercise, volatility=bond["volatility"] * scale)
        for scale in (1, 2)
        for kind in ("callable_bond", "puttable_bond")
    ]
    call, put, call_2, put_2 = _price(rows, curve)[["price", "bond_price", "option_price"]].to_numpy()
    tolerance = _rounding(bond)
    assert call_2[0] <= call[0] + tolerance and put_2[0] >= put[0] - tolerance
    assert call_2[2] >= call[2] - tolerance and put_2[2] >= put[2] - tolerance
    assert abs(call_2[1] - call[1]) <= tolerance and abs(put_2[1] - put[1]) <= tolerance


@PROPERTY
@given(bond=INSTRUMENTS, curve=curves(), exercise=st.sampled_from(["european", "bermudan", "american"]))
def test_callable_below_the_straight_bond_below_the_puttable(bond, curve, exercise):
    """The same bond plain, callable and puttable: the callable at most the plain bond, the puttable at least;
    the embedded bonds are that bond."""
    rows = [_plain(bond)] + [
        dict(bond, instrument=kind, exercise=exercise) for kind in ("callable_bond", "puttable_bond")
    ]
    straight, callable_bond, puttable = _price(rows, curve)[["price", "bond_price"]].to_numpy()
    tolerance = _rounding(bond)
    assert callable_bond[0] <= straight[0] + tolerance and straight[0] <= puttable[0] + tolerance
    assert abs(callable_bond[1] - straight[0]) <= tolerance and abs(puttable[1] - straight[0]) <= tolerance


def _discount(curve: pd.DataFrame):
    """``P(0, t)`` of a drawn curve, written out: zero rates linear between knots, flat outside."""
    return lambda t: np.exp(-np.interp(t, curve["t"], curve["zero_rate"]) * np.asarray(t))


@PROPERTY
@given(bond=INSTRUMENTS, curve=curves())
def test_european_put_call_parity(bond, curve):
    """European options on a coupon bond, exercised at t_e for K = strike + accrued(t_e):

        call - put = sum over the cash flows after t_e of A_i P(0, t_i)  -  K P(0, t_e)

    (a coupon at t_e itself belongs to the holder before exercise; the redemption is always after). The
    payoffs' difference ``B(t_e) - K`` is linear in the bond's cash flows, and the tree reprices every discount
    bond exactly, with an amount due between two steps carried to its step by ``P(0, t) / P(0, tau(s))``: so
    parity holds to rounding at any number of steps, exercise on the grid or off it."""
    rows = [dict(bond, instrument="bond_option", option_type=kind, exercise="european") for kind in ("call", "put")]
    call, put = _price(rows, curve)["price"]
    expiry, strike, times, amounts = european_terms(rows[0])
    discount = _discount(curve)
    parity = float(np.sum(amounts * discount(times))) - strike * float(discount(expiry))
    assert call - put == pytest.approx(parity, rel=1e-12, abs=_rounding(bond))


@PROPERTY
@given(bond=INSTRUMENTS, curve=curves(), kind=st.sampled_from(["call", "put"]))
def test_american_above_bermudan_above_european(bond, curve, kind):
    """Each style's exercise dates hold the next's (the drawn instruments make it so): more rights are worth
    at least as much, to rounding on one tree (every row's phase 0). Each style's own tree has the phase of its
    own dates (docs/model/tree.rst), so there the order holds within the trees' error, ``face / 50 /
    steps_per_year`` (Jamshidian's bound below; measured up to 0.12 per 100 at 12 steps a year)."""
    rows = [
        dict(bond, instrument="bond_option", option_type=kind, exercise=style)
        for style in ("european", "bermudan", "american")
    ]
    with mock.patch.object(instruments, "exercise_phases", lambda rows, exercise, spy: np.zeros(len(exercise), int)):
        european, bermudan, american = _price(rows, curve)["option_price"]
    tolerance = _rounding(bond)
    assert european <= bermudan + tolerance and bermudan <= american + tolerance
    european, bermudan, american = _price(rows, curve)["option_price"]
    tolerance = bond["face"] / 50 / bond["steps_per_year"]
    assert european <= bermudan + tolerance and bermudan <= american + tolerance


CONVERGENCE_STEPS = (4, 16, 64, 256)


@settings(PROPERTY, max_examples=12)
@given(bond=INSTRUMENTS, curve=curves(), kind=st.sampled_from(["call", "put"]))
def test_european_options_converge_to_jamshidians_closed_form(bond, curve, kind):
    """At 4, 16, 64 and 256 steps a year a European option is within ``face / 50 / steps_per_year`` of
    Jamshidian's closed form (first-order convergence: measured up to ``face / 175 / steps_per_year`` on 60
    random options; the error oscillates with the strike's place between nodes, so it is bounded, not
    monotone)."""
    row = dict(bond, instrument="bond_option", option_type=kind, exercise="european")
    expiry, strike, times, amounts = european_terms(row)
    closed = jamshidian_bond_option(
        _discount(curve), row["mean_reversion"], row["volatility"], expiry, times, amounts, strike, kind
    )
    priced = _price([dict(row, steps_per_year=spy) for spy in CONVERGENCE_STEPS], curve)["price"].to_numpy()
    bound = row["face"] / 50 / np.array(CONVERGENCE_STEPS)
    assert (np.abs(priced - closed) <= bound).all(), (closed, priced - closed, bound)


ANY_ROW = st.tuples(
    INSTRUMENTS,
    st.sampled_from(["bond", "bond_option", "callable_bond", "puttable_bond"]),
    st.sampled_from(["european", "bermudan", "american"]),
    st.sampled_from(["call", "put"]),
)


@PROPERTY
@given(drawn=st.lists(ANY_ROW, min_size=1, max_size=4), curve=curves())
def test_cpu_engine_equals_the_reference_engine(drawn, curve):
    """A few rows of any kind, in years and dated, mixed: the CPU engine's prices are the reference engine's
    to 1e-12 of the price or the face."""
    rows = []
    for bond, instrument, exercise, kind in drawn:
        if instrument == "bond":
            rows.append(_plain(bond))
        else:
            row = dict(bond, instrument=instrument, exercise=exercise)
            rows.append(dict(row, option_type=kind) if instrument == "bond_option" else row)
    assert_engines_close(_price(rows, curve, "cpu"), _price(rows, curve, "reference"))
