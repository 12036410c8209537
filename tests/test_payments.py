"""Coupon and principal schedules of dated rows (step-up coupons, sinking funds): against QuantLib's
FixedRateBond with a coupon vector and AmortizingFixedRateBond (discounting), and its CallableFixedRateBond
with a coupon vector on its tree where every date is a node; callable amortizing bonds (which QuantLib's tree
does not price) against the reference engine and two cases QuantLib does price; the risk engine; the command
line; their bad input (docs/guide/dated.rst)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import distprice
from distprice import InvalidInputError
from distprice.cli import main
from distprice.cuda import gpu_available
from distprice.curves import load_curves
from distprice.dates import coupons, terms_from_frame, to_iso
from distprice.job import payments, valuation_day
from distprice.lattice.instruments import prepare
from distprice.lattice.quotes import read_market_prices
from distprice.lattice.risk import price_measures

from utils import assert_engines_close, random_dated_bonds, with_both_rights

ql = pytest.importorskip("QuantLib")
from distprice.lattice.quantlib_dated import price_dated_quantlib  # noqa: E402

AS_OF = "2025-12-15"
PRICES = ["price", "dirty_price", "clean_price", "accrued"]
CURVES = pd.DataFrame(
    {
        "curve": "usd",
        "date": ["2026-03-16", "2026-12-15", "2028-12-15", "2031-06-16", "2040-01-15"],
        "zero_rate": [0.031, 0.033, 0.036, 0.04, 0.043],
        "day_count": "ACT/360",
    }
)
OPTION_COLUMNS = ["exercise", "strike", "expiry_date", "first_exercise_date"]


def assert_within_face(got, expected, face, tol: float, column: str):
    """Each row's value within ``tol`` of its face."""
    worst = float(np.max(np.abs(np.asarray(got) - np.asarray(expected)) / np.asarray(face)))
    assert worst <= tol, (column, worst)


def assert_discounted_alike(ours, theirs, portfolio, tol: float) -> int:
    """Our prices and QuantLib's by discounting within ``tol`` of the face: dirty, clean and accrued of every
    row, ``price`` (the value at the valuation date) of the rows without a coupon paid by settlement, which
    QuantLib's NPV counts and ours not. Returns how many rows the prices were compared on."""
    for column in PRICES[1:]:
        assert_within_face(ours[column], theirs[column], portfolio["face"], tol, column)
    apart = ~paid_before_settlement(portfolio)
    assert_within_face(ours["price"][apart], theirs["price"][apart], portfolio["face"][apart], tol, "price")
    return int(apart.sum())


def mine(table: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The lines of a schedule table of ``rows``' ids."""
    return table[table["id"].isin(rows["id"])]


def paid_before_settlement(portfolio: pd.DataFrame) -> np.ndarray:
    """Rows with a coupon paid within a week after their valuation date (settlement is at most 3 business days
    later)."""
    out = []
    for row in portfolio.to_dict("records"):
        _, _, pays = coupon_dates(row)
        valuation = np.datetime64(row["valuation_date"])
        out.append(any(valuation < np.datetime64(p) <= valuation + 7 for p in pays))
    return np.array(out)


def coupon_dates(row: dict):
    """A row's coupons: the first one's accrual start, and every coupon's accrual end and payment date (ISO)."""
    table = coupons(terms_from_frame(pd.DataFrame([row])))
    start = to_iso(table.accrual_start[:1])[0]
    return start, list(to_iso(table.accrual_end)), list(to_iso(table.payment))


def schedules(portfolio: pd.DataFrame, rng, coupon: bool = True, principal: bool = False, before=None):
    """Coupon steps (1-3 a row, on its issue date or a coupon's accrual end or payment date) and repayments
    (2-3 a row, 10-30 % of face each; with ``before``, only on coupon dates before it) of every row."""
    steps, repaid = [], []
    for row in portfolio.to_dict("records"):
        start, ends, pays = coupon_dates(row)
        n = len(ends)
        if coupon:
            for b in sorted(rng.choice(n, size=min(n, int(rng.integers(1, 4))), replace=False)):
                date = start if b == 0 else (ends[b - 1] if rng.random() < 0.5 else pays[b - 1])
                steps.append(dict(id=row["id"], date=date, coupon=float(rng.integers(0, 33)) / 400))
        if principal:
            allowed = [b for b in range(1, n + 1) if before is None or pays[b - 1] < before]
            for b in sorted(rng.choice(allowed, size=min(len(allowed), int(rng.integers(2, 4))), replace=False)):
                date = ends[b - 1] if rng.random() < 0.5 else pays[b - 1]
                repaid.append(dict(id=row["id"], date=date, repaid=float(rng.integers(10, 31))))
    return pd.DataFrame(steps, columns=["id", "date", "coupon"]), pd.DataFrame(repaid, columns=["id", "date", "repaid"])


def plain(portfolio: pd.DataFrame) -> pd.DataFrame:
    """The rows as plain bonds."""
    return portfolio.drop(columns=[c for c in OPTION_COLUMNS if c in portfolio]).assign(instrument="bond")


@pytest.fixture(scope="module")
def bonds():
    """Random dated bonds (every day count, calendar and convention pair; stubs, end of month, settlement 0-3
    days, faces of 100 and 1000) and their exercise schedule, on an ACT/360 curve at 360 steps a year: every
    date is a tree node."""
    return random_dated_bonds(np.random.default_rng(4), 40, steps_per_year=360, years=(0.5, 2.5))


@pytest.fixture(scope="module")
def plain_book(bonds):
    """Plain bonds with coupon steps, repayments or both (repayments before settlement too)."""
    portfolio = plain(bonds[0].head(24))
    rng = np.random.default_rng(5)
    steps, _ = schedules(portfolio.iloc[:16], rng)
    _, repaid = schedules(portfolio.iloc[8:], rng, coupon=False, principal=True)
    return portfolio, steps, repaid


def test_plain_bonds_equal_quantlibs_fixed_rate_and_amortizing_bonds(plain_book):
    """FixedRateBond with one rate per period, AmortizingFixedRateBond with one notional per period, priced by
    discounting: measured within 6e-16 of the face in every price (1e-13 asked); QuantLib's per-100 quotes of an
    amortizing bond are of the face outstanding at settlement, ours in units of face."""
    portfolio, steps, repaid = plain_book
    assert steps["id"].nunique() == 16 and repaid["id"].nunique() == 16
    ours = distprice.price(
        portfolio, CURVES, engine="cpu", as_of=AS_OF, coupon_schedule=steps, principal_schedule=repaid
    )
    assert ours["error"].isna().all(), ours["error"].dropna().head().tolist()
    theirs = price_dated_quantlib(
        portfolio, load_curves(CURVES), AS_OF, coupon_schedule=steps, principal_schedule=repaid
    )
    assert assert_discounted_alike(ours, theirs, portfolio, 1e-13) >= 16
    alone = distprice.price(portfolio, CURVES, engine="cpu", as_of=AS_OF)
    changed = (ours["price"] - alone["price"]).abs() > 1e-6 * portfolio["face"]
    assert changed.sum() >= 20  # the schedules matter
    assert (ours["accrued"] != alone["accrued"]).sum() >= 5  # a stepped rate or a repaid face today


def test_the_reference_engine_reads_the_schedules_alike(plain_book):
    portfolio, steps, repaid = plain_book
    some = portfolio.head(10)
    options = dict(as_of=AS_OF, coupon_schedule=mine(steps, some), principal_schedule=mine(repaid, some))
    reference = distprice.price(some, CURVES, engine="reference", **options)
    ours = distprice.price(some, CURVES, engine="cpu", **options)
    assert_engines_close(reference, ours, rtol=1e-12)


@pytest.fixture(scope="module")
def callable_book(bonds):
    """The callable and puttable bonds with coupon steps, and bonds with both rights with them."""
    portfolio, table = bonds
    rng = np.random.default_rng(6)
    both, rights = with_both_rights(portfolio.iloc[20:], table, rng)
    book = pd.concat([portfolio.iloc[:20], both], ignore_index=True)
    lines = pd.concat([table[table["id"].isin(portfolio["id"].iloc[:20])], rights], ignore_index=True)
    steps, _ = schedules(book, rng)
    ours = distprice.price(book, CURVES, engine="cpu", as_of=AS_OF, exercise_schedule=lines, coupon_schedule=steps)
    assert ours["error"].isna().all(), ours["error"].dropna().head().tolist()
    return book, lines, steps, ours


def test_step_up_callables_equal_quantlibs_tree_where_every_date_is_a_node(callable_book):
    """CallableFixedRateBond with one rate per period, calls and puts (clean and dirty, bermudan by table or on
    coupon dates; both on a date), on QuantLib's tree of the same steps: measured within 2e-15 relative in price,
    dirty and clean price on 29 bonds (1e-12 asked)."""
    book, lines, steps, ours = callable_book
    assert (book["instrument"] == "callable_puttable_bond").sum() >= 5
    assert (ours["option_price"].abs() > 0.01 * book["face"] / 100).sum() >= 10
    theirs = price_dated_quantlib(
        book, load_curves(CURVES), AS_OF, lines, steps=ours["height"].tolist(), coupon_schedule=steps
    )
    for column in PRICES:
        np.testing.assert_allclose(ours[column], theirs[column], rtol=1e-12, atol=1e-12, err_msg=column)


@pytest.fixture(scope="module")
def amortizing_callables(bonds):
    """Callable, puttable and american bonds with repayments (and coupon steps on some): what QuantLib's tree
    does not price."""
    portfolio, table = random_dated_bonds(
        np.random.default_rng(7), 12, steps_per_year=360, years=(0.5, 2), american=True
    )
    rng = np.random.default_rng(8)
    steps, _ = schedules(portfolio.iloc[::2], rng)
    _, repaid = schedules(portfolio, rng, coupon=False, principal=True)
    return portfolio, table, steps, repaid


def test_amortizing_callables_the_reference_engine_agrees(amortizing_callables):
    portfolio, table, steps, repaid = amortizing_callables
    assert (portfolio["exercise"] == "american").any()
    options = dict(as_of=AS_OF, exercise_schedule=table, coupon_schedule=steps, principal_schedule=repaid)
    ours = distprice.price(portfolio, CURVES, engine="cpu", **options)
    reference = distprice.price(portfolio, CURVES, engine="reference", **options)
    assert ours["error"].isna().all(), ours["error"].dropna().tolist()
    assert_engines_close(reference, ours, rtol=1e-12)
    assert (ours["option_price"].abs() > 0.01 * portfolio["face"] / 100).sum() >= 4


def test_an_amortizing_callable_never_worth_calling_is_the_amortizing_bond(amortizing_callables):
    """Calls at 1000 % of the face outstanding (puts at 0 %) are never exercised: the price is QuantLib's
    AmortizingFixedRateBond's, the option worth nothing."""
    portfolio, table, steps, repaid = amortizing_callables
    bermudan = portfolio[portfolio["exercise"] == "bermudan"]
    never = bermudan.assign(
        strike=np.where(bermudan["instrument"] == "callable_bond", 1000.0, 0.0), exercise="bermudan"
    )
    lines = table[table["id"].isin(never["id"])]
    lines = lines.assign(
        price=np.where(lines["id"].map(never.set_index("id")["instrument"]) == "callable_bond", 1000.0, 0.0)
    )
    steps, repaid = mine(steps, never), mine(repaid, never)
    options = dict(as_of=AS_OF, exercise_schedule=lines, coupon_schedule=steps, principal_schedule=repaid)
    ours = distprice.price(never, CURVES, engine="cpu", **options)
    theirs = price_dated_quantlib(
        plain(never), load_curves(CURVES), AS_OF, coupon_schedule=steps, principal_schedule=repaid
    )
    assert len(never) >= 6 and (np.abs(ours["option_price"]) < 1e-12 * never["face"]).all()
    assert assert_discounted_alike(ours, theirs, never, 1e-12) >= 3


def test_a_callable_repaid_in_part_before_settlement_is_the_callable_of_the_face_outstanding(bonds):
    """Repayments all paid before settlement leave a callable bond of a smaller face, called at % of it:
    QuantLib's CallableFixedRateBond of the face outstanding, on the same tree."""
    portfolio, table = bonds
    early = portfolio[pd.to_datetime(portfolio["issue_date"]) < pd.Timestamp("2025-03-01")].head(8)
    _, repaid = schedules(early, np.random.default_rng(9), coupon=False, principal=True, before="2025-12-01")
    early = early[early["id"].isin(repaid["id"])]
    table = mine(table, early)
    assert len(early) >= 4
    ours = distprice.price(early, CURVES, engine="cpu", as_of=AS_OF, exercise_schedule=table, principal_schedule=repaid)
    left = early["face"] * (1 - early["id"].map(repaid.groupby("id")["repaid"].sum()) / 100)
    smaller = early.assign(face=left)
    theirs = price_dated_quantlib(smaller, load_curves(CURVES), AS_OF, table, steps=ours["height"].tolist())
    for column in PRICES:
        np.testing.assert_allclose(ours[column], theirs[column], rtol=1e-12, atol=1e-12, err_msg=column)


def test_risk_of_scheduled_callables_cpu_equals_the_reference(amortizing_callables):
    """Duration, convexity, vega and the OAS of step-up and amortizing callables: the CPU risk engine (kept
    trees, bumped events) against the reference's trees priced anew."""
    portfolio, table, steps, repaid = amortizing_callables
    book = portfolio[portfolio["exercise"] == "bermudan"].head(3).assign(steps_per_year=60)
    table, steps, repaid = mine(table, book), mine(steps, book), mine(repaid, book)
    curves = load_curves(CURVES)
    stepped = payments({"coupon schedule": steps, "principal schedule": repaid}, book)
    from distprice.job import exercise_schedule

    prepared = prepare(
        book,
        curves,
        as_of=valuation_day(AS_OF),
        exercise_schedule=exercise_schedule(table, book),
        payments=stepped,
    )
    assert not prepared.problems, prepared.problems
    instruments = prepared.instruments()
    priced = distprice.price(
        book,
        CURVES,
        engine="cpu",
        as_of=AS_OF,
        exercise_schedule=table,
        coupon_schedule=steps,
        principal_schedule=repaid,
    )
    quotes, problems = read_market_prices(book.assign(market_price=priced["clean_price"].to_numpy() - 0.2))
    assert not problems
    measures = ["duration", "convexity", "oas", "vega"]
    ours = price_measures(instruments, curves, engine="cpu", measures=measures, quotes=quotes)
    reference = price_measures(instruments, curves, engine="reference", measures=measures, quotes=quotes)
    for column in ("oas", "effective_duration", "effective_convexity", "vega"):
        np.testing.assert_allclose(ours[column], reference[column], rtol=1e-8, atol=1e-12, err_msg=column)
    assert (ours["oas"] > 0).all()


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")
@pytest.mark.parametrize("engine", ["gpu-flat", "gpu-outer"])
def test_gpu_engines_price_the_schedules_as_the_cpu(amortizing_callables, engine):
    """The kernels read the events the host made (amounts per coupon, exercise prices on the face outstanding):
    the GPU engines equal the CPU engine."""
    portfolio, table, steps, repaid = amortizing_callables
    options = dict(as_of=AS_OF, exercise_schedule=table, coupon_schedule=steps, principal_schedule=repaid)
    gpu = distprice.price(portfolio, CURVES, engine=engine, **options)
    cpu = distprice.price(portfolio, CURVES, engine="cpu", **options)
    assert_engines_close(gpu, cpu, rtol=1e-12)


def test_the_command_line_takes_the_tables(tmp_path, plain_book):
    portfolio, steps, repaid = plain_book
    portfolio = portfolio.head(6)
    steps, repaid = mine(steps, portfolio), mine(repaid, portfolio)
    portfolio.to_csv(tmp_path / "book.csv", index=False)
    CURVES.to_csv(tmp_path / "curves.csv", index=False)
    steps.to_csv(tmp_path / "steps.csv", index=False)
    repaid.to_csv(tmp_path / "repaid.csv", index=False)
    args = ["run", "--portfolio", str(tmp_path / "book.csv"), "--curves", str(tmp_path / "curves.csv")]
    args += ["--as-of", AS_OF, "--coupon-schedule", str(tmp_path / "steps.csv")]
    args += ["--principal-schedule", str(tmp_path / "repaid.csv"), "--output", str(tmp_path / "out.csv")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    got = pd.read_csv(tmp_path / "out.csv")
    ours = distprice.price(portfolio, CURVES, as_of=AS_OF, coupon_schedule=steps, principal_schedule=repaid)
    np.testing.assert_allclose(got["price"], ours["price"], rtol=1e-15)


# ---- bad input ----

GOOD = dict(
    id="sf",
    instrument="callable_bond",
    exercise="bermudan",
    coupon=0.05,
    coupon_frequency=2,
    issue_date="2024-06-15",
    maturity_date="2030-06-15",
    day_count="30/360",
    calendar="US",
    mean_reversion=0.1,
    volatility=0.01,
    steps_per_year=12,
    curve="usd",
)
GOOD_CALLS = [dict(id="sf", date="2027-06-15", price=100.0)]
GOOD_STEPS = [dict(id="sf", date="2026-06-15", coupon=0.055), dict(id="sf", date="2028-06-15", coupon=0.06)]
GOOD_REPAID = [dict(id="sf", date="2027-06-15", repaid=20.0), dict(id="sf", date="2029-06-15", repaid=30.0)]


def problems_of(rows, steps=GOOD_STEPS, repaid=GOOD_REPAID, calls=GOOD_CALLS):
    with pytest.raises(InvalidInputError) as info:
        distprice.price(
            pd.DataFrame(rows),
            CURVES,
            as_of=AS_OF,
            exercise_schedule=pd.DataFrame(calls),
            coupon_schedule=pd.DataFrame(steps) if steps is not None else None,
            principal_schedule=pd.DataFrame(repaid) if repaid is not None else None,
        )
    return info.value.problems


def test_the_good_row_prices():
    priced = distprice.price(
        pd.DataFrame([GOOD]),
        CURVES,
        as_of=AS_OF,
        exercise_schedule=pd.DataFrame(GOOD_CALLS),
        coupon_schedule=pd.DataFrame(GOOD_STEPS),
        principal_schedule=pd.DataFrame(GOOD_REPAID),
    )
    assert priced["error"].isna().all()


@pytest.mark.parametrize(
    "steps,repaid,where,column,rule",
    [
        ([dict(GOOD_STEPS[0], id="nobody")], GOOD_REPAID, "coupon schedule row 1", "id", "names no row"),
        ([dict(GOOD_STEPS[0], date="2026-13-01")], GOOD_REPAID, "coupon schedule row 1", "date", "must be a date"),
        ([dict(GOOD_STEPS[0], coupon=-0.01)], GOOD_REPAID, "coupon schedule row 1", "coupon", "must be a number >= 0"),
        (GOOD_STEPS + GOOD_STEPS[:1], GOOD_REPAID, "coupon schedule row 3", "date", "is given twice for this id"),
        (GOOD_STEPS, [dict(GOOD_REPAID[0], repaid=120.0)], "principal schedule row 1", "repaid", "<= 100"),
        (GOOD_STEPS, [dict(GOOD_REPAID[0], repaid=0.0)], "principal schedule row 1", "repaid", "> 0"),
        (GOOD_STEPS, [dict(id="sf", date="2027-06-15", Repaid=20.0)], "principal schedule", "Repaid", "did you mean"),
        (GOOD_STEPS, [dict(id="sf", date="2027-06-15")], "principal schedule", "repaid", "must have this column"),
    ],
    ids=["unknown id", "not a date", "negative coupon", "date twice", "above 100", "zero", "misspelled", "missing"],
)
def test_a_bad_line_is_the_tables_error_naming_row_column_and_rule(steps, repaid, where, column, rule):
    problems = problems_of([GOOD], steps, repaid)
    assert any(p.where.startswith(where) and p.column == column and rule in p.rule for p in problems), problems


@pytest.mark.parametrize(
    "row,steps,repaid,column,rule",
    [
        (GOOD, [dict(GOOD_STEPS[0], date="2026-07-01")], GOOD_REPAID, "date", "coupon schedule's is not a coupon date"),
        (GOOD, [dict(GOOD_STEPS[0], date="2024-01-02")], GOOD_REPAID, "date", "is before the row's issue date"),
        (GOOD, [dict(GOOD_STEPS[0], date="2031-06-16")], GOOD_REPAID, "date", "is after the row's last coupon date"),
        (GOOD, GOOD_STEPS, [dict(GOOD_REPAID[0], date="2024-06-15")], "date", "is the issue date"),
        (GOOD, GOOD_STEPS, GOOD_REPAID + [dict(id="sf", date="2028-06-15", repaid=60.0)], "repaid", "at most 100"),
        (
            GOOD,
            GOOD_STEPS,
            # 15 June 2025 is a Sunday: its coupon is paid on the 16th, one coupon date
            [dict(id="sf", date="2025-06-15", repaid=10.0), dict(id="sf", date="2025-06-16", repaid=10.0)],
            "date",
            "is the coupon date of another line",
        ),
        (dict(GOOD, coupon=0.0), GOOD_STEPS, None, "coupon", "pays coupons (coupon > 0)"),
        (
            {k: v for k, v in GOOD.items() if k not in ("issue_date", "maturity_date")}
            | dict(maturity=5.0, strike=100.0, expiry=3.0),
            GOOD_STEPS,
            None,
            "maturity_date",
            "only a dated row",
        ),
    ],
    ids=[
        "off the cycle",
        "before issue",
        "after maturity",
        "repaid at issue",
        "above 100",
        "one date twice",
        "zero",
        "time form",
    ],
)
def test_a_schedule_that_does_not_fit_its_row_is_that_rows_error(row, steps, repaid, column, rule):
    other = dict(GOOD, id="other")
    calls = GOOD_CALLS if "maturity" not in row else []
    with pytest.raises(InvalidInputError) as info:
        distprice.price(
            pd.DataFrame([row, other]),
            CURVES,
            as_of=AS_OF,
            exercise_schedule=pd.DataFrame(calls + [dict(GOOD_CALLS[0], id="other")]),
            coupon_schedule=pd.DataFrame(steps),
            principal_schedule=pd.DataFrame(repaid) if repaid is not None else None,
        )
    problems = info.value.problems
    assert any(p.position == 0 and p.column == column and rule in p.rule for p in problems), problems
    assert all(p.position == 0 for p in problems), problems
    reported = distprice.price(
        pd.DataFrame([row, other]),
        CURVES,
        as_of=AS_OF,
        on_invalid="report",
        exercise_schedule=pd.DataFrame(calls + [dict(GOOD_CALLS[0], id="other")]),
        coupon_schedule=pd.DataFrame(steps),
        principal_schedule=pd.DataFrame(repaid) if repaid is not None else None,
    )
    assert reported["error"].notna().tolist() == [True, False]


def test_a_big_parquet_read_by_the_workers_takes_the_schedules_by_slice(local, bonds, tmp_path):
    """Each slice a worker reads takes the schedule lines of its own ids; a line no slice takes is the job's
    error, naming the table and its row."""
    from distprice.cluster.pricer import Pricer

    portfolio = plain(bonds[0])
    steps, repaid = schedules(portfolio, np.random.default_rng(10), principal=True)
    path = tmp_path / "book.parquet"
    portfolio.to_parquet(path, row_group_size=10)
    CURVES.to_csv(tmp_path / "curves.csv", index=False)
    steps.to_parquet(tmp_path / "steps.parquet")
    repaid.to_parquet(tmp_path / "repaid.parquet")
    stray = pd.concat([repaid, repaid.tail(1).assign(id="nobody")], ignore_index=True)
    stray.to_parquet(tmp_path / "stray.parquet")
    options = dict(curves=str(tmp_path / "curves.csv"), engine="cpu", as_of=AS_OF)
    tables = dict(coupon_schedule=str(tmp_path / "steps.parquet"), principal_schedule=str(tmp_path / "repaid.parquet"))
    with Pricer(local, read_on_workers_rows=20) as pricer:
        priced = pricer.price(str(path), **tables, **options)
        with pytest.raises(InvalidInputError) as unmatched:
            pricer.run(
                str(path),
                **dict(tables, principal_schedule=str(tmp_path / "stray.parquet")),
                output=f"{tmp_path / 'a'}/",
                **options,
            )
    here = distprice.price(
        portfolio, CURVES, engine="cpu", as_of=AS_OF, coupon_schedule=steps, principal_schedule=repaid
    )
    np.testing.assert_allclose(priced["price"], here["price"], rtol=1e-14)
    np.testing.assert_allclose(priced["clean_price"], here["clean_price"], rtol=1e-14)
    assert f"principal schedule row {len(stray)} (id 'nobody')" in str(unmatched.value)
