"""The host stages of a job: validation, canonical form, geometry and events as they were before they were made
fast (frozen in ``tests/data/host_stages``), no per-call copy of whole columns, and :func:`job_stages`.

The frozen data was written by :func:`snapshot` from the code of 2026-11-24 (before the fast validation), on
noisy portfolios: time-form and dated rows with bad cells in every column, in the column types a user may hand
in (text as Python objects or as pandas strings, ids as text or numbers, numbers as text), with their curves,
exercise schedules and model tables. The books are deterministic for a seed and built from Python lists, so
that pandas infers each column's type as it would for a user's table (the frozen results are the same on
pandas 2.2 and 3.1 but for the type of text columns, ``object`` before pandas 3). The dated rows' heights and
events were frozen again on 2026-11-28, when cash flows between two steps came to be paid in parts at both
(``lattice/placement.py``); every other array is the first freeze's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import distprice
from distprice.curves import load_curves
from distprice.dates import parse_dates
from distprice.lattice.batch import pack
from distprice.lattice.dated import read_exercise_schedule
from distprice.lattice.instruments import Limits, prepare
from distprice.tables import LABEL_COLUMNS
from distprice.timing import STAGES, job_stages

FROZEN = Path(__file__).parent / "data" / "host_stages"

AS_OF = "2025-12-15"
LIMITS = Limits(max_width=401, max_height=3000, max_events=400)
"""Small enough that some rows break them."""


def curve_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The base curves (``flat`` and ``steep`` in years, ``usd`` and ``eur`` by date, ``hot`` with rates that a
    long row cannot bear) and a second curve set with every rate raised."""
    years = pd.DataFrame(
        {
            "curve": ["flat"] * 3 + ["steep"] * 3 + ["hot"] * 2,
            "t": [1, 5, 30, 0.5, 10, 40, 1, 50],
            "zero_rate": [0.03, 0.03, 0.03, 0.01, 0.05, 0.07, 50.0, 100.0],
        }
    )
    dated = pd.DataFrame(
        {
            "curve": ["usd"] * 3 + ["eur"] * 3,
            "date": ["2026-03-16", "2030-12-15", "2060-01-15"] * 2,
            "zero_rate": [0.031, 0.036, 0.043, 0.02, 0.025, 0.03],
            "day_count": ["ACT/365F"] * 3 + ["ACT/360"] * 3,
        }
    )
    return years, dated


def curve_sets():
    """The base curve set and a shifted one (``curve_sets`` of :func:`prepare`)."""
    years, dated = curve_tables()
    base = {**load_curves(years, allow_large_rates=True), **load_curves(dated)}
    up = {name: curve.shifted(0.5) for name, curve in base.items()}
    return base, [base, up]


def _pick(rng, values, n, p=None):
    return [values[i] for i in rng.choice(len(values), n, p=p)]


def _spoil(rng, column: list, bad: list, rate: float) -> list:
    """``column`` with a share ``rate`` of its cells replaced by values drawn from ``bad``."""
    out = list(column)
    for i in np.flatnonzero(rng.random(len(out)) < rate):
        out[i] = bad[rng.integers(len(bad))]
    return out


def time_rows(rng, n: int, spoil: float) -> dict[str, list]:
    spy = _pick(rng, [1, 4, 12, 52], n)
    height = [int(rng.integers(1, 15 * s + 1)) for s in spy]
    maturity = [h / s for h, s in zip(height, spy)]
    expiry = [float(rng.integers(1, h + 1)) / s for h, s in zip(height, spy)]
    coupon = _pick(rng, [0.0, 0.0, 0.03, 0.065], n)
    columns = {
        "instrument": _pick(
            rng,
            ["bond_option", "callable_bond", "puttable_bond", "bond", "Bond_Option ", " CALLABLE_BOND"],
            n,
            [0.4, 0.2, 0.15, 0.15, 0.05, 0.05],
        ),
        "option_type": _pick(rng, ["call", "put", None, " Put"], n),
        "exercise": _pick(rng, ["european", "bermudan", "american", "BERMUDAN"], n),
        "strike": [round(float(x), 2) for x in rng.uniform(40, 110, n)],
        "expiry": expiry,
        "first_exercise": [float(rng.uniform(0, e)) for e in expiry],
        "exercise_frequency": _pick(rng, [1, 2, 4, 12], n),
        "maturity": maturity,
        "coupon": coupon,
        "coupon_frequency": [int(rng.choice([1, 2, 4])) if c else 0 for c in coupon],
        "face": _pick(rng, [100.0, 1000.0], n),
        "mean_reversion": [float(x) for x in rng.uniform(0.01, 1.0, n)],
        "volatility": [float(x) for x in rng.uniform(0.003, 0.03, n)],
        "steps_per_year": spy,
        "curve": _pick(rng, ["hull", "flat", "steep", "usd", "hot"], n, [0.4, 0.2, 0.2, 0.1, 0.1]),
        "quantity": [float(x) for x in rng.integers(-5, 6, n)],
    }
    bad = {
        "instrument": ["swap", "", None, 3],
        "option_type": ["straddle", "", 1.0],
        "exercise": ["asian", None, "  ", True],
        "strike": [None, -1.0, "abc", np.inf, 2e12, "55.5", True],
        "expiry": [None, 0.0, -1.0, 2000.0, 40.0, "x"],
        "first_exercise": [None, -0.5, 30.0, np.nan],
        "exercise_frequency": [0, 1.5, None, 400, "2"],
        "maturity": [None, -2.0, 0.0, 900.0, 150.0, "9"],
        "coupon": [-0.01, 11.0, None, 0.05],
        "coupon_frequency": [-1, 0, 2.5, 500, None],
        "face": [0.0, -100.0, None, 1e13],
        "mean_reversion": [None, 0.0, 1e-5, 200.0, -np.inf],
        "volatility": [None, -0.01, 6.0, "vol"],
        "steps_per_year": [0, 3.5, None, 50_000, 2500],
        "curve": ["gbp", None, "Hull", "eur"],
        "quantity": ["many", np.inf, 2e15, None],
    }
    return {c: _spoil(rng, v, bad[c], spoil) for c, v in columns.items()}


def dated_rows(rng, n: int, spoil: float) -> dict[str, list]:
    as_of = np.datetime64(AS_OF)
    maturity = as_of + rng.integers(-20, 12 * 365, n)
    issue = as_of - rng.integers(20, 900, n)
    frequency = _pick(rng, [1, 2, 4, 12], n)
    kind = _pick(rng, ["callable_bond", "puttable_bond", "bond", "bond_option"], n)
    exercise = [None if k == "bond" else str(rng.choice(["european", "bermudan", "american"])) for k in kind]
    first = [
        str(as_of + np.timedelta64(int(rng.integers(-30, 400)), "D")) if e not in (None, "european") else None
        for e in exercise
    ]
    expiry = [None if e is None else str(as_of + np.timedelta64(int(rng.integers(100, 1500)), "D")) for e in exercise]
    columns = {
        "instrument": kind,
        "option_type": [str(rng.choice(["call", "put"])) if k == "bond_option" else None for k in kind],
        "exercise": exercise,
        "strike": [None if e is None else round(float(rng.uniform(95, 105)), 2) for e in exercise],
        "first_exercise_date": first,
        "expiry_date": expiry,
        "coupon": [float(rng.integers(0, 33)) / 400 for _ in range(n)],
        "coupon_frequency": frequency,
        "issue_date": [str(d) for d in issue],
        "maturity_date": [str(d) for d in maturity],
        "day_count": _pick(rng, ["ACT/360", "ACT/365F", "30/360", "30E/360", "ACT/ACT-ISDA", "act/act-icma "], n),
        "calendar": _pick(rng, ["none", "weekends", "US", "TARGET", "UK", "JP"], n),
        "accrual_convention": _pick(rng, ["unadjusted", "following", "modified_following", "preceding", None], n),
        "payment_convention": _pick(rng, ["following", "modified_following", "preceding", None], n),
        "end_of_month": _pick(rng, [True, False, None], n),
        "settlement_days": _pick(rng, [0, 1, 2, 3], n),
        "face": _pick(rng, [100.0, 1000.0], n),
        "valuation_date": _pick(rng, [None, AS_OF, "2025-12-13"], n),
        "mean_reversion": [float(x) for x in rng.uniform(0.01, 0.5, n)],
        "volatility": [float(x) for x in rng.uniform(0.003, 0.02, n)],
        "steps_per_year": _pick(rng, [4, 12, 52], n),
        "curve": _pick(rng, ["usd", "eur", "flat"], n),
        "quantity": [float(x) for x in rng.integers(1, 6, n)],
    }
    bad = {
        "issue_date": ["2040-01-01", "2025-02-30", None, "soon"],
        "maturity_date": ["2025-12-01", "1800-01-01"],
        "expiry_date": ["2060-01-01", None, "2025-12-10", "x"],
        "first_exercise_date": ["2031-01-01", "nope"],
        "day_count": ["ACT/999", None, ""],
        "calendar": ["Mars", ""],
        "coupon_frequency": [3, None, 0],
        "coupon": [-0.01, None],
        "settlement_days": [-1, 1.5, "two"],
        "end_of_month": ["maybe", "yes", 0],
        "valuation_date": ["2025-13-01"],
        "strike": [None, -5.0],
        "redemption": [None],
    }
    return {c: _spoil(rng, v, bad.get(c, []), spoil) if c in bad else v for c, v in columns.items()}


def noisy_book(
    seed: int, n: int = 160, dated_share: float = 0.3, spoil: float = 0.03, text: str = "str", ids: str = "text"
):
    """A portfolio of ``n`` rows (``dated_share`` of them dated) with ``spoil`` of their cells bad, ids and some
    time columns on the wrong kind of row, and its exercise schedule table.

    ``text``: ``str`` (pandas' string type where it has one) or ``object`` for text columns; ``ids``: ``text``,
    ``int`` or ``mixed``.
    """
    rng = np.random.default_rng([seed, 11])
    dated = rng.random(n) < dated_share
    rows = {c: [None] * n for c in ()}
    t, d = time_rows(rng, n, spoil), dated_rows(rng, n, spoil)
    columns = sorted(set(t) | set(d), key=lambda c: (c not in t, c))
    rows = {c: [(d if dated[i] else t).get(c, [None] * n)[i] for i in range(n)] for c in columns}
    # time columns on dated rows, and dated columns on time-form rows, now and then
    for column, wrong in (("expiry", "2.0"), ("maturity", 3.0), ("expiry_date", "2027-01-01")):
        for i in np.flatnonzero(rng.random(n) < spoil):
            if (column == "expiry_date") != bool(dated[i]):
                rows[column][i] = wrong
    if ids == "int":
        rows["id"] = [int(i) for i in rng.permutation(n)]
    elif ids == "mixed":
        rows["id"] = [int(i) if i % 3 else f"m{i}" for i in range(n)]
    else:
        rows["id"] = [f"r{i:04d}" for i in range(n)]
    for i in np.flatnonzero(rng.random(n) < spoil):
        rows["id"][i] = None if rng.random() < 0.5 else rows["id"][int(rng.integers(n))]
    frame = pd.DataFrame({"id": rows.pop("id"), **rows})
    if text == "object":
        frame = frame.astype(
            {c: object for c in frame.columns if frame[c].dtype != np.float64 and frame[c].dtype != np.int64}
        )
    else:
        frame = frame.infer_objects()
    schedule = _schedule(rng, frame, dated)
    return frame, schedule


def _schedule(rng, frame: pd.DataFrame, dated: np.ndarray) -> pd.DataFrame:
    """Exercise dates by table for a third of the dated bermudan rows (clean and dirty, some in the past)."""
    rows = []
    for i in np.flatnonzero(dated):
        if frame["exercise"].iloc[i] != "bermudan" or rng.random() < 0.66 or pd.isna(frame["id"].iloc[i]):
            continue
        start = np.datetime64(AS_OF) + np.timedelta64(int(rng.integers(-60, 300)), "D")
        for k in range(int(rng.integers(1, 5))):
            rows.append(
                dict(
                    id=str(frame["id"].iloc[i]),
                    date=str(start + np.timedelta64(91 * k, "D")),
                    price=round(float(rng.uniform(99, 103)), 3),
                    price_type=str(rng.choice(["clean", "dirty"])),
                )
            )
    rows += [
        dict(id="nobody", date=AS_OF, price=100.0, price_type="clean"),
        dict(id=None, date="2026-01-05", price=100.0, price_type="clean"),
        dict(id=rows[0]["id"] if rows else None, date="2026-02-30", price=-1.0, price_type="net"),
    ]
    if rows[:1]:
        rows.append(dict(rows[0]))
    return pd.DataFrame(rows, columns=["id", "date", "price", "price_type"])


def models_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": ["m1", "m2", "m3"],
            "mean_reversion": [0.05, 0.2, np.nan],
            "volatility": [0.01, 0.02, 0.015],
            "curve": ["flat", None, "steep"],
        }
    )


def with_models(rng, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a ``model`` column: a quarter of the rows name one (some unknown), some of those keep their
    own a and sigma."""
    n = len(frame)
    model = [str(rng.choice(["m1", "m2", "m3", "m9"])) if rng.random() < 0.25 else None for _ in range(n)]
    frame = frame.assign(model=model)
    named = frame["model"].notna().to_numpy() & (rng.random(n) < 0.7)
    frame.loc[named, ["mean_reversion", "volatility"]] = np.nan
    frame.loc[named & (rng.random(n) < 0.5), "curve"] = None
    return frame


def r1_with_problems(seed: int) -> pd.DataFrame:
    """Rows of the papers' R1 (numbers in numpy types, text in pandas strings) with a few rules broken."""
    from distprice.lattice import datasets

    frame = datasets.generate("R1", 200, seed=seed)
    frame.loc[3, "steps_per_year"] = 0
    frame.loc[7, "strike"] = -1.0
    frame.loc[11, "maturity"] = np.nan
    frame.loc[12, "expiry"] = 99.0
    frame.loc[13, "volatility"] = np.inf
    frame.loc[17, "id"] = frame.loc[18, "id"]
    frame.loc[19, "option_type"] = "straddle"
    frame.loc[23, "curve"] = "nowhere"
    return frame


def cases():
    """Name -> (portfolio, keywords of :func:`prepare` but the curves, schedule table or None, curve set)."""
    from distprice.curves import builtin_curves
    from distprice.dates import day_numbers
    from distprice.lattice.desk import desk

    base, sets = curve_sets()
    base = {**builtin_curves(), **base}
    sets = [{**builtin_curves(), **s} for s in sets]
    as_of = int(day_numbers([AS_OF])[0])
    book = desk(150, seed=3)
    # rates and coupons beyond 1 are taken, as when the data was frozen: its bounds are those of the float range
    common = dict(limits=LIMITS, as_of=as_of, curve_sets=sets, allow_large_rates=True)
    noisy = {
        name: noisy_book(seed, **options)
        for name, seed, options in (
            ("text", 1, {}),
            ("object", 2, dict(text="object", ids="int")),
            ("time", 3, dict(ids="mixed", dated_share=0.0)),
            ("models", 4, {}),
            ("slice", 5, dict(spoil=0.05)),
            ("clean", 6, dict(spoil=0.0, n=240)),
        )
    }
    out = {}
    for name, (frame, schedule) in noisy.items():
        keywords = dict(common)
        if name == "time":
            keywords.pop("as_of")
        if name == "models":
            frame = with_models(np.random.default_rng(4), frame)
            keywords["models"] = models_table()
            keywords.pop("as_of")
        if name == "slice":
            keywords.update(first_row=1000, unique_ids=False)
        out[name] = (frame, keywords, schedule, base)
    out["r1"] = (r1_with_problems(1), {}, None, builtin_curves())
    out["defaults"] = (
        r1_with_problems(2).drop(columns=["curve", "face", "exercise", "instrument", "first_exercise"]),
        {},
        None,
        {**builtin_curves(), "default": base["flat"]},
    )
    out["booleans"] = (r1_with_problems(3).head(20).assign(quantity=True), {}, None, builtin_curves())
    out["desk"] = (book.portfolio, {}, book.exercise_schedule, load_curves(book.curves))
    out["empty"] = (noisy["text"][0].iloc[:0], dict(common), None, base)
    return out


# ---- the frozen behaviour ----


def _plain(value):
    """A JSON value of a table cell (NaN and None: None)."""
    if value is None or (isinstance(value, (float, np.floating)) and np.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def outcome(frame: pd.DataFrame, keywords: dict, table: pd.DataFrame | None, curves) -> tuple[dict, dict]:
    """What the frozen data holds of one case: the problems, the canonical table, geometry, dated terms, the
    exercise schedule read, and the batch that :func:`pack` lays out of the valid rows (JSON and arrays)."""
    arrays, doc = {}, {}
    schedule = None
    if table is not None:
        schedule, found = read_exercise_schedule(table, frame["id"].to_numpy(dtype=object))
        doc["schedule_problems"] = [[p.position, p.where, p.column, p.rule] for p in found]
        arrays.update({f"schedule.{f}": getattr(schedule, f) for f in ("offsets", "day", "price", "dirty")})
    prepared = prepare(frame, curves, exercise_schedule=schedule, **keywords)
    doc["problems"] = [[p.position, p.where, p.column, p.rule] for p in prepared.problems]
    arrays.update(valid=prepared.valid, is_dated=prepared.is_dated)
    doc["dtypes"] = {c: str(prepared.table[c].dtype) for c in prepared.table.columns}
    doc["text"] = {
        c: [_plain(v) for v in prepared.table[c].to_numpy(dtype=object)]
        for c in prepared.table.columns
        if prepared.table[c].dtype.kind not in "fiub"
    }
    arrays.update(
        {
            f"table.{c}": prepared.table[c].to_numpy()
            for c in prepared.table.columns
            if prepared.table[c].dtype.kind in "fiub"
        }
    )
    arrays.update(
        {
            f"geometry.{f}": getattr(prepared.geometry, f)
            for f in ("dt", "dr", "M", "jmax", "width", "height", "phase", "root")
        }
    )
    if prepared.dated is not None:
        dated = prepared.dated
        arrays.update(
            {
                f"dated.{f}": getattr(dated, f)
                for f in ("valuation", "settlement", "expiry", "first", "redemption_day", "days_per_year", "accrued")
            }
        )
        arrays.update({f"terms.{f}": getattr(dated.terms, f) for f in dated.terms.__dataclass_fields__})
        arrays.update({f"dated_schedule.{f}": getattr(dated.schedule, f) for f in ("offsets", "day", "price", "dirty")})
    instruments = prepared.instruments()
    if len(instruments):
        batch = pack(instruments, curves)
        arrays.update({f"events.{f}": getattr(batch.events, f) for f in ("offsets", "step", "time", "kind", "amount")})
        arrays.update(
            {
                f"batch.{f}": getattr(batch, f)
                for f in ("is_call", "curve_index", "option_from", "curve_offsets", "curve_t", "curve_z")
            }
        )
        doc["curve_names"] = [list(k) for k in batch.curve_names]
    return doc, arrays


def snapshot(folder: Path = FROZEN) -> None:
    """Writes the frozen data of every case (``python tests/test_host_stages.py``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, case in cases().items():
        doc, arrays = outcome(*case)
        np.savez_compressed(folder / f"{name}.npz", **arrays)
        (folder / f"{name}.json").write_text(json.dumps(doc, indent=0))


TEXT_DTYPE = pd.Series(np.array(["x"], dtype=object)).dtype
LABELS = ("instrument", "option_type", "exercise", "curve")
"""The canonical columns held as Categoricals (frozen as text, before they were)."""


@pytest.fixture(scope="module")
def all_cases():
    return cases()


@pytest.mark.parametrize(
    "name", ["text", "object", "time", "models", "slice", "clean", "r1", "defaults", "booleans", "desk", "empty"]
)
def test_validation_layout_and_events_are_as_they_were(all_cases, name):
    assert_as_frozen(name, *outcome(*all_cases[name]))


@pytest.mark.parametrize("name", ["text", "object", "models", "desk"])
def test_label_columns_read_as_categories_validate_alike(all_cases, name):
    """A portfolio whose label columns are categories (as :func:`~distprice.tables.read_portfolio` reads them)
    has the same problems, canonical table, geometry, terms and events as the one of text columns."""
    frame, keywords, table, curves = all_cases[name]
    labels = [c for c in LABEL_COLUMNS if c in frame.columns]
    assert len(labels) >= 4
    assert_as_frozen(name, *outcome(frame.astype(dict.fromkeys(labels, "category")), keywords, table, curves))


def assert_as_frozen(name: str, doc: dict, arrays: dict) -> None:
    """``doc`` and ``arrays`` (:func:`outcome`) are the frozen data of case ``name``."""
    frozen = json.loads((FROZEN / f"{name}.json").read_text())
    expected = np.load(FROZEN / f"{name}.npz")
    notional = arrays.pop("table.notional")  # a canonical column added after the freeze: no case gives one
    assert np.isnan(notional).all()
    assert doc["problems"] == frozen["problems"]
    assert doc.get("schedule_problems") == frozen.get("schedule_problems")
    assert doc.get("curve_names") == frozen.get("curve_names")
    assert sorted(arrays) == sorted(expected.files)
    for key in expected.files:
        assert arrays[key].dtype == expected[key].dtype, key
        if arrays[key].dtype.kind == "f":  # exp and sqrt may differ in the last bits between machines' libm;
            # M = exp(-a dt) - 1 keeps exp's error near 1 (a few 1e-16 absolute), and dr's variance
            # (1 - exp(-2 a dt)) / 2a magnifies it by 1 / (a dt): ~1e-10 relative at a = 1e-4, daily steps
            rtol, atol = {"geometry.M": (1e-13, 1e-15), "geometry.dr": (1e-9, 0.0)}.get(key, (1e-13, 0.0))
            np.testing.assert_allclose(arrays[key], expected[key], rtol=rtol, atol=atol, err_msg=key, strict=True)
        else:
            np.testing.assert_array_equal(arrays[key], expected[key], err_msg=key, strict=True)
    for column, dtype in frozen["dtypes"].items():  # text columns: the type pandas gives Python strings
        want = "category" if column in LABELS else str(TEXT_DTYPE) if dtype == "str" else dtype
        assert doc["dtypes"][column] == want, column
    assert doc["text"] == frozen["text"]


def test_the_cases_break_every_rule(all_cases):
    """The frozen cases are worth comparing: dozens of distinct rules broken, valid rows of every kind left."""
    rules = set()
    for name in all_cases:
        frozen = json.loads((FROZEN / f"{name}.json").read_text())
        rules |= {
            (column, rule.split("'")[0])
            for _, _, column, rule in frozen["problems"] + frozen.get("schedule_problems", [])
        }
    assert len(rules) >= 85
    assert {"events.offsets", "dated.accrued"} <= set(np.load(FROZEN / "text.npz").files)


# ---- no whole-column copies per rule ----


class Conversions:
    """Counts the calls of pandas' conversions of a whole column (``to_numpy``, ``astype``, ``isna``,
    ``notna``) by column name while it is installed (boolean masks aside)."""

    METHODS = ("to_numpy", "astype", "isna", "notna")

    def __init__(self, monkeypatch, rows: int):
        self.calls: dict[str, int] = {}
        for method in self.METHODS:
            original = getattr(pd.Series, method)

            def counted(series, *args, _original=original, **kwargs):
                if (
                    len(series) == rows and series.dtype != bool
                ):  # not masks derived from a column (pandas 2 names them)
                    self.calls[series.name] = self.calls.get(series.name, 0) + 1
                return _original(series, *args, **kwargs)

            monkeypatch.setattr(pd.Series, method, counted)


def spoiled(rows: int, share: int = 3) -> pd.DataFrame:
    """Time-form rows (text ids) of which one in ``share`` breaks a rule or more (none with ``share`` 0)."""
    from distprice.lattice import datasets

    book = datasets.generate("R1", rows, seed=5)
    book = book.assign(id=pd.array([f"i{k}" for k in range(rows)], dtype=TEXT_DTYPE))
    if not share:
        return book
    bad = np.arange(0, rows, share)
    book.loc[bad, "strike"] = -1.0
    book.loc[bad[::2], "curve"] = "nowhere"
    book.loc[bad[::3], "option_type"] = "straddle"
    return book


def test_each_column_is_read_once_whatever_the_problems(monkeypatch):
    rows = 3000
    book = spoiled(rows)
    conversions = Conversions(monkeypatch, rows)
    prepared = prepare(book, load_curves(None))
    assert len(prepared.problems) >= rows // 3 and {"strike", "curve", "option_type"} <= {
        p.column for p in prepared.problems
    }
    assert conversions.calls.get("id", 0) <= 2, conversions.calls
    assert max(conversions.calls.values()) <= 3, conversions.calls


def python_calls(run) -> int:
    """Python function calls made by ``run()``."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        count += event == "call"

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.parametrize("dated", [False, True])
def test_validation_and_layout_do_no_python_work_per_row(dated):
    """Ten times the rows, about the same Python calls: the work per row is in numpy, Arrow and numba."""
    from distprice.lattice.desk import desk

    def calls(rows):
        if dated:
            book = desk(rows, seed=1)
            curves, table = load_curves(book.curves), book.exercise_schedule
            frame = book.portfolio
        else:
            frame, curves, table = spoiled(rows, share=0), load_curves(None), None

        def run():
            schedule = None if table is None else read_exercise_schedule(table, frame["id"].to_numpy(dtype=object))[0]
            prepared = prepare(frame, curves, exercise_schedule=schedule)
            assert not prepared.problems
            pack(prepared.instruments(), curves)

        run()
        return python_calls(run)

    small, large = calls(400), calls(4000)
    assert large <= small * 1.05 + 50, (small, large)


# ---- job_stages ----


def test_job_stages_measure_every_stage_of_the_same_job(tmp_path):
    from distprice.lattice.desk import desk

    book = desk(40, seed=2)
    timed = pd.DataFrame(
        [
            dict(
                id=f"t{k}",
                instrument="bond_option",
                option_type="put",
                exercise="bermudan",
                strike=60.0 + k,
                expiry=2.0,
                maturity=5.0,
                mean_reversion=0.1,
                volatility=0.01,
                curve="USD",
                steps_per_year=12,
            )
            for k in range(5)
        ]
    )
    portfolio = pd.concat([book.portfolio, timed], ignore_index=True)
    path = tmp_path / "book.parquet"
    portfolio.to_parquet(path)
    options = dict(curves=book.curves, exercise_schedule=book.exercise_schedule, engine="cpu", as_of="2026-11-20")
    stages = job_stages(str(path), output=tmp_path / "priced.parquet", repeat=2, **options)
    assert list(stages) == list(STAGES)
    assert all(seconds >= 0 for seconds in stages.values())
    assert stages["engine"] > 0 and stages["validate"] > 0 and stages["kernel"] == stages["transfer"] == 0
    assert stages["schedules"] > 0  # the dated rows' schedules and events, apart from the rest of validation
    assert job_stages(timed, curves=book.curves, as_of="2026-11-20", engine="cpu")["schedules"] == 0  # no dated row
    written = pd.read_parquet(tmp_path / "priced.parquet")
    expected = distprice.price(str(path), **options)
    for column in ("price", "bond_price", "option_price", "dirty_price", "accrued", "clean_price", "value"):
        np.testing.assert_array_equal(written[column].to_numpy(), expected[column].to_numpy(), err_msg=column)
    assert written["error"].isna().all() and np.isfinite(written["price"]).all()


if __name__ == "__main__":
    snapshot()


def test_exercise_schedule_reads_alike_in_any_row_order_and_with_no_usable_row():
    ids = np.array(["a", "b", "c"], dtype=object)
    table = pd.DataFrame(
        {
            "id": ["b", "a", "b", "a", "c", "a", "z"],
            "date": ["2031-06-01", "2030-06-01", "2030-06-01", "2031-06-01", "2030-01-01", "2030-06-01", "2030-01-01"],
            "price": [101.0, 102.0, 102.5, 101.5, 100.0, 99.0, 100.0],
        }
    )
    schedule, found = read_exercise_schedule(table, ids)
    assert schedule.offsets.tolist() == [0, 2, 4, 5]
    assert schedule.day.tolist() == list(
        parse_dates(pd.Series(["2030-06-01", "2031-06-01", "2030-06-01", "2031-06-01", "2030-01-01"]))[0]
    )
    assert [(p.where, p.column, p.rule) for p in found] == [
        ("exercise schedule row 6 (id 'a')", "date", "is given twice for this id"),
        ("exercise schedule row 7 (id 'z')", "id", "names no row of the portfolio"),
    ]
    ordered = table.iloc[[1, 5, 3, 2, 0, 4, 6]]  # sorted by id and date already: no sort needed
    again, _ = read_exercise_schedule(ordered.reset_index(drop=True), ids)
    assert again.offsets.tolist() == schedule.offsets.tolist() and again.day.tolist() == schedule.day.tolist()
    assert again.price.tolist() == [102.0, 101.5, 102.5, 101.0, 100.0]
    none, found = read_exercise_schedule(table.assign(id="z"), ids)
    assert none.offsets.tolist() == [0, 0, 0, 0] and len(none.day) == 0 and len(found) == 7


def test_exercise_schedule_by_slice_takes_the_rows_of_its_ids():
    """A slice of a big portfolio reads the schedule rows of its own ids (problems still name rows of the whole
    table); the rows no slice took are the job's "names no row" problems."""
    from distprice.lattice.dated import schedule_lines, unmatched_lines

    table = pd.DataFrame(
        {
            "id": ["b", "a", "b", "a", "c", "a", "z", None],
            "date": [
                "2031-06-01",
                "2030-06-01",
                "2030-06-01",
                "2031-06-31",
                "2030-01-01",
                "2030-06-01",
                "2030-01-01",
                "2030-01-01",
            ],
            "price": [101.0, 102.0, 102.5, 101.5, 100.0, 99.0, 100.0, 100.0],
        }
    )
    whole, _ = read_exercise_schedule(table.iloc[:6], np.array(["a", "b", "c"], dtype=object))
    slices = [np.array(["b", "c"], dtype=object), np.array(["a"], dtype=object)]
    lines = [schedule_lines(table, ids) for ids in slices]
    assert [x.tolist() for x in lines] == [[0, 2, 4], [1, 3, 5]]
    first, found = read_exercise_schedule(table, slices[0], lines[0])
    assert not found and first.offsets.tolist() == [0, 2, 3]
    assert first.day.tolist() == whole.day[1:].tolist() and first.price.tolist() == whole.price[1:].tolist()
    _, found = read_exercise_schedule(table, slices[1], lines[1])
    assert [(p.where, p.column, p.rule) for p in found] == [
        ("exercise schedule row 4 (id 'a')", "date", "must be a date YYYY-MM-DD"),
        ("exercise schedule row 6 (id 'a')", "date", "is given twice for this id"),
    ]
    assert [(p.where, p.column, p.rule) for p in unmatched_lines(table, np.concatenate(lines))] == [
        ("exercise schedule row 7 (id 'z')", "id", "names no row of the portfolio"),
        ("exercise schedule row 8", "id", "is required"),
    ]


@pytest.mark.parametrize("kind", ["int", "object int", "text", "object text"])
def test_id_hashes_find_the_ids_two_slices_share(kind):
    """Slices' id hashes, put together, give the rows whose id another row holds; integer ids held as Python
    objects (as the canonical table holds them) hash as the integers they are, without pandas' object hashing."""
    from distprice.lattice.instruments import duplicated_ids, id_hashes

    ids = np.array([7, 3, 11, 3, 5, 19, 7, 2])
    column = {
        "int": pd.Series(ids),
        "object int": pd.Series(ids.astype(object), dtype=object),
        "text": pd.Series([f"B{i}" for i in ids], dtype="string[pyarrow]"),
        "object text": pd.Series([f"B{i}" for i in ids], dtype=object),
    }[kind]
    hashes = np.concatenate([id_hashes(column.iloc[:4]), id_hashes(column.iloc[4:])])
    if "text" not in kind:
        np.testing.assert_array_equal(hashes, ids.astype(np.uint64))
    elif kind == "object text":  # Python strings hash as Arrow's do
        np.testing.assert_array_equal(hashes, id_hashes(column.astype("string[pyarrow]")))
    np.testing.assert_array_equal(duplicated_ids(hashes, lambda rows: column.iloc[rows].tolist()), [0, 1, 3, 6])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**64 - 1), max_size=300), st.integers(0, 5), st.integers(0, 2**32))
def test_repeated_keys_are_found_as_a_sort_finds_them(values, copies, seed):
    """The bucketed hash tables of ``_same_hash`` flag exactly the keys a sort finds twice or more: any 64-bit
    keys (signed or not, sequential, all alike), repeated anywhere or in order, in books small and (with few keys a
    bucket) in many buckets."""
    from distprice.lattice import instruments

    rng = np.random.default_rng(seed)
    keys = np.array([v % 2**64 for v in values], dtype=np.uint64)
    keys = np.concatenate(
        [
            keys,
            rng.choice(keys, copies) if len(keys) else keys[:0],
            np.arange(50, dtype=np.uint64),
            np.full(copies, 7, dtype=np.uint64),
        ]
    )
    rng.shuffle(keys)
    ordered = np.sort(keys)
    twice = ordered[1:][ordered[1:] == ordered[:-1]]
    expected = np.flatnonzero(np.isin(keys, twice))
    for bucket_keys in (1024, 2):
        instruments.BUCKET_KEYS = bucket_keys
        try:
            np.testing.assert_array_equal(instruments._same_hash(keys), expected)
            np.testing.assert_array_equal(instruments._same_hash(keys.view(np.int64)), expected)
            # in order (ids ascending: no key repeats, found without the tables; else the tables find them)
            np.testing.assert_array_equal(instruments._same_hash(ordered), np.flatnonzero(np.isin(ordered, twice)))
        finally:
            instruments.BUCKET_KEYS = 1024


def _chunked(values: list, cuts: list[int]) -> pd.Series:
    """Text ``values`` as an Arrow-backed column read in chunks, cut at ``cuts`` (positions, any order)."""
    edges = sorted({0, len(values), *(min(c, len(values)) for c in cuts)})
    chunks = pa.chunked_array([pa.array(values[a:b], pa.string()) for a, b in zip(edges[:-1], edges[1:])], pa.string())
    return pd.Series(pd.arrays.ArrowStringArray(chunks))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.sampled_from([None, "a", "b", "c", "d", " a", "é"]), max_size=40),
    st.lists(st.sampled_from([None, "a", "b", "c", "d", " a", "é", "z"]), max_size=120),
    st.booleans(),
    st.lists(st.integers(0, 120), max_size=4),
)
def test_schedule_keys_find_the_first_equal_id(ids, keys, grouped, cuts):
    """Each key of an exercise schedule table finds the first portfolio id equal to it (a missing key the first
    missing id), whether the table comes grouped by id (runs looked up once each) or not, with ids repeated,
    and whatever chunks its column was read in."""
    from distprice.lattice.dated import _positions_of

    if grouped:
        keys = sorted(keys, key=lambda k: (k is None, k or ""))
    first = {}
    for position, name in enumerate(ids):
        first.setdefault(name, position)
    expected = np.array([first.get(k, np.nan) for k in keys], dtype=float)
    got = _positions_of(pd.Series(ids, dtype="string"), _chunked(keys, cuts))
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.sampled_from([None, "a", "b", "c", "d", " a", "é"]), max_size=20),
    st.lists(st.sampled_from([None, "a", "b", "c", "d", " a", "é", "z"]), max_size=120),
    st.booleans(),
    st.lists(st.integers(0, 120), max_size=4),
)
def test_a_slices_schedule_lines_are_those_with_its_ids(ids, keys, grouped, cuts):
    """The lines of an exercise schedule table a slice takes, found through the table's runs of one id, are the
    lines whose id is one of the slice's (a missing id the lines without one), grouped by id or not, in any
    chunks."""
    from distprice.lattice.dated import ScheduleRuns, schedule_lines

    if grouped:
        keys = sorted(keys, key=lambda k: (k is None, k or ""))
    table = pd.DataFrame({"id": _chunked(keys, cuts)})
    expected = [line for line, key in enumerate(keys) if key in set(ids)]
    runs = ScheduleRuns.of(table)
    assert runs.lines(pd.Series(ids, dtype="string")).tolist() == expected
    assert schedule_lines(table, pd.Series(ids, dtype=object)).tolist() == expected
    assert len(runs.keys) == len(runs.starts) - 1 <= len(keys)


def test_exercise_lines_of_a_file_are_found_through_its_runs_once(tmp_path):
    """A job's slices take their lines of an exercise schedule file through the file's runs, found once a
    process while the file is unchanged."""
    from distprice.job import _exercise_runs, exercise_lines
    from distprice.tables import write_table

    table = pd.DataFrame({"id": ["a", "a", "b", "c", "c", "a"], "date": ["2030-01-01"] * 6, "price": [100.0] * 6})
    write_table(table, tmp_path / "schedule.parquet")
    path = str(tmp_path / "schedule.parquet")
    _exercise_runs.cache_clear()
    assert exercise_lines(path, pd.DataFrame({"id": ["c", "a"]})).tolist() == [0, 1, 3, 4, 5]
    assert exercise_lines(path, pd.DataFrame({"id": ["b"]})).tolist() == [2]
    assert _exercise_runs.cache_info().misses == 1 and _exercise_runs.cache_info().hits == 1
    assert exercise_lines(table, pd.DataFrame({"id": ["b", "z"]})).tolist() == [2]
    assert exercise_lines(None, table) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 5),
            st.integers(0, 40),
            st.sampled_from([99.5, 100.0, 101.25]),
            st.sampled_from([None, "clean", "dirty", " Dirty"]),
        ),
        min_size=1,
        max_size=60,
    ),
    st.integers(0, 2**32),
    st.lists(st.integers(0, 60), max_size=3),
)
def test_exercise_schedule_in_order_reads_as_in_any_order(lines, seed, cuts):
    """A clean table in order of id and date (each line kept as it comes, one pass) reads as the same table in
    any other order (sorted first), chunked or not."""
    from distprice.lattice.dated import _in_order

    lines = sorted({(row, day): (row, day, price, kind) for row, day, price, kind in lines}.values())
    ids = np.array([f"B{i}" for i in range(6)], dtype=object)
    table = pd.DataFrame(
        {
            "id": _chunked([f"B{row}" for row, *_ in lines], cuts),
            "date": [
                (pd.Timestamp("2030-01-01") + pd.Timedelta(days=7 * day)).strftime("%Y-%m-%d") for _, day, *_ in lines
            ],
            "price": [price for *_, price, _ in lines],
            "price_type": pd.Series([kind for *_, kind in lines], dtype="string"),
        }
    )
    days = parse_dates(table["date"])[0]
    assert _in_order(
        np.array([row for row, *_ in lines], float),
        days,
        table["price"].to_numpy(),
        np.ones(len(lines), bool),
        np.zeros(len(ids), np.int64),
    )
    schedule, found = read_exercise_schedule(table, ids)
    shuffled = table.sample(frac=1.0, random_state=seed % 2**32).reset_index(drop=True)
    again, found_again = read_exercise_schedule(shuffled, ids)
    assert found == found_again == []
    for field in ("offsets", "day", "price", "dirty"):
        np.testing.assert_array_equal(getattr(schedule, field), getattr(again, field), err_msg=field)
    np.testing.assert_array_equal(
        schedule.dirty, [kind is not None and kind.strip().lower() == "dirty" for *_, kind in lines]
    )
