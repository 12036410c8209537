"""The job report: each section holds the job's own numbers (read back from the HTML by a parser), the
sections of a scenario run, of risk columns and of the Monte-Carlo family, the shape picture alone, bad
facts named, a report of 10⁶ rows under 10 MB, and the page in a real headless browser."""

from __future__ import annotations

import html
import io
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import distprice
from distprice.errors import OptionError
from distprice.inspector import CostModel, plan
from distprice.report import draw_shape, render_report, write_report
from distprice.report.browser import chromium, render_page
from distprice.report.document import shown
from distprice.report.problems import parse_problems
from distprice.report.shape import MAX_BINS, bins

DATA = Path(__file__).resolve().parent / "data" / "optionpricing"
needs_browser = pytest.mark.skipif(chromium() is None, reason="no Chromium installed (apt-get install chromium)")


class Page(HTMLParser):
    """What a report shows to a parser: its sections, each figure's exact value by key, each table's cells
    (``data-value``) by key."""

    def __init__(self, text: str):
        super().__init__()
        self.sections, self.figures, self.tables = [], {}, {}
        self._table = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.sections.append(attrs["id"])
            self.figures[attrs["id"]] = {}
        elif tag == "table" and "data-key" in attrs:
            self._table = self.tables.setdefault(f"{self.sections[-1]}/{attrs['data-key']}", [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag == "td" and "data-key" in attrs:
            self.figures[self.sections[-1]][attrs["data-key"]] = attrs["data-value"]
        elif tag == "td" and self._table is not None:
            self._table[-1].append(attrs["data-value"])

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None

    def table(self, key: str) -> list[list[str]]:
        return [row for row in self.tables[key] if row]  # the header row has no cells


@pytest.fixture(scope="module")
def job(small_book) -> pd.DataFrame:
    """``small_book`` with five invalid rows (two negative strikes, a missing volatility, a duplicated id)
    priced in report mode."""
    book = small_book.copy()
    book.loc[[5, 9], "strike"] = -1.0
    book.loc[12, "volatility"] = np.nan
    book.loc[20, "id"] = book.loc[21, "id"]
    return distprice.price(book, engine="cpu", on_invalid="report")


def _plan_of(priced: pd.DataFrame):
    valid = priced["price"].notna()
    width, height = (priced.loc[valid, c].to_numpy(dtype=np.int64) for c in ("width", "height"))
    return width, height, plan(width, height, CostModel("cpu"), gpu=False)


def test_each_section_holds_the_jobs_own_numbers(job, tmp_path):
    width, height, chosen = _plan_of(job)
    timings = {"start": 1.5, "read": 0.25, "checks": 0.125, "price": 2.0, "write": 0.5}
    workers = {
        "tcp://127.0.0.1:1": dict(rows=150, node_steps=2e6, seconds=1.0, kernel_seconds=0.75, device="cpu"),
        "tcp://127.0.0.1:2": dict(rows=145, node_steps=1e6, seconds=1.0, kernel_seconds=0.5, device="cpu"),
    }
    path = write_report(
        job,
        tmp_path / "report.html",
        portfolio="book.parquet",
        plan=chosen,
        plan_seconds=[0.5],
        chunks=4,
        timings=timings,
        workers=workers,
    )
    page = Page(path.read_text())
    assert page.sections == ["job", "shape", "values", "problems"]  # no measure columns: no risk section
    figures = page.figures["job"]
    assert int(figures["rows"]) == len(job) == 300
    assert int(figures["rows_priced"]) == job["price"].notna().sum() == 295
    assert int(figures["rows_invalid"]) == 5 and int(figures["scenarios"]) == 1
    steps = float((2 * job["width"].astype(float) * job["height"].astype(float)).sum())
    assert float(figures["node_steps"]) == pytest.approx(steps, rel=1e-15)
    assert float(figures["wall_seconds"]) == 4.375 and float(figures["start_seconds"]) == 1.5
    assert "plan_seconds" not in figures  # a phase not given is left out
    assert float(figures["kernel_seconds"]) == 1.25 and float(figures["node_steps_per_second"]) == steps / 2.0
    assert figures["workers"] == "2" and figures["devices"] == "2 × cpu"
    assert page.table("job/engines") == [["cpu", "295"]]
    shape = page.figures["shape"]
    assert int(shape["shape_rows"]) == 295 and int(shape["chunks"]) == 4
    assert float(shape["height_max"]) == job["height"].max()
    (part,) = page.table("shape/plan")
    assert part[1] == "cpu" and int(part[2]) == 295 and float(part[4]) == chosen.parts[0].seconds
    values = page.figures["values"]
    assert float(values["total_value"]) == pytest.approx(job["value"].sum(), rel=1e-13)
    by_instrument = {row[0]: (int(row[1]), float(row[2])) for row in page.table("values/value_by_instrument")}
    expected = job[job["price"].notna()].groupby("instrument")["value"].agg(["size", "sum"])
    for name, (rows, value) in by_instrument.items():
        assert rows == expected.loc[name, "size"] and value == pytest.approx(expected.loc[name, "sum"], rel=1e-12)
    largest = page.table("values/largest")
    biggest = job.loc[job["value"].abs().idxmax()]
    assert len(largest) == 10 and largest[0][0] == str(biggest["id"]) and float(largest[0][-1]) == biggest["value"]
    problems = page.figures["problems"]
    assert int(problems["invalid_rows"]) == 5 and int(problems["problems"]) == 5
    counts = {(row[0], row[1]): int(row[2]) for row in page.table("problems/problems")}
    assert counts == {("strike", "must be >= 0"): 2, ("volatility", "is required"): 1, ("id", "must be unique"): 2}
    text = path.read_text()
    assert "book.parquet" in text
    assert "<script src=" not in text and "<link " not in text  # self-contained: BokehJS inlined, nothing fetched


def test_an_in_process_run_reports_its_whole_time_and_the_plan_it_followed(small_book, tmp_path):
    from click.testing import CliRunner

    from distprice.cli import main

    small_book.to_csv(tmp_path / "book.csv", index=False)
    args = ["run", "--in-process", "--portfolio", str(tmp_path / "book.csv"), "--output", str(tmp_path / "out.csv")]
    done = CliRunner().invoke(main, [*args, "--report", str(tmp_path / "r.html")])
    assert done.exit_code == 0, done.output
    total = float(re.search(r"([0-9.]+) s in all", done.output).group(1))
    text = (tmp_path / "r.html").read_text()
    page = Page(text)
    job = page.figures["job"]
    assert f"{float(job['wall_seconds']):.2f}" == f"{total:.2f}"  # the CLI's total, to the digit it prints
    assert float(job["job_seconds"]) + float(job["other_seconds"]) == pytest.approx(float(job["wall_seconds"]))
    (part,) = page.table("shape/plan")
    assert part[1] == "cpu" and int(part[2]) == len(small_book) and float(part[4]) > 0
    assert '"plan part 0: cpu"' in text and "Solid boxes" in text and "Dashed boxes" not in text  # no chunks here


def test_the_chunks_are_drawn_with_their_predicted_and_actual_seconds(job):
    width, height, chosen = _plan_of(job)
    chunks = [np.arange(0, 100), np.arange(100, 200), np.arange(200, 295)]
    times = [(0.5, 0.75), (0.5, 0.5), (0.25, float("nan"))]
    text = render_report(job, plan=chosen, chunks=chunks, chunk_seconds=times)
    page = Page(text)
    shape = page.figures["shape"]
    assert int(shape["chunks"]) == 3 and float(shape["chunk_predicted_seconds"]) == 1.25
    assert float(shape["chunk_actual_seconds"]) == 1.25  # the chunk without its time is left out of the sum
    rows = page.table("shape/chunks")
    assert [int(r[1]) for r in rows] == [100, 100, 95]
    assert [r[4:] for r in rows] == [["0.5", "0.75", "1.5"], ["0.5", "0.5", "1.0"], ["0.25", "", ""]]
    assert '"chunks"' in text and '"plan part 0: cpu"' in text  # the legends of the outlines drawn
    assert "Dashed boxes" in text and "Solid boxes" in text and "predicted and actual seconds" in text
    with pytest.raises(OptionError, match="chunk_seconds has 2 pairs for 3 chunks"):
        render_report(job, chunks=chunks, chunk_seconds=times[:2])
    with pytest.raises(OptionError, match="chunk_seconds needs the chunks themselves"):
        render_report(job, chunks=3, chunk_seconds=times)


def test_the_shape_bins_sit_on_the_lattice_of_widths_and_heights():
    widths = np.arange(7, 512, 2)  # 253 widths, every other integer
    edges = bins(widths)
    assert len(edges) - 1 <= MAX_BINS
    counts, _ = np.histogram(widths, edges)
    per_bin = counts[0]  # 4 would leave one width in the last bin, 5 leaves three
    assert per_bin == 5 and (counts[:-1] == per_bin).all() and counts[-1] == 3  # no stripes
    assert np.allclose(np.diff(edges), 2 * per_bin) and edges[0] == 6.0
    assert not np.isin(widths, edges).any()  # each width inside a bin, never on an edge
    heights = np.arange(13, 1201)  # 1 188 heights: 15 a bin would leave 3 in the last, 17 leaves 15
    assert (np.histogram(heights, bins(heights))[0] == [17] * 69 + [15]).all()
    few = bins(np.array([3, 5, 9, 21]))
    assert np.array_equal(few, np.arange(2, 23, 2))  # one bin per lattice value when they are few


def test_values_carry_their_currency(job):
    def total(frame):
        text = render_report(frame)
        return Page(text).figures["values"], html.unescape(re.search(r'data-key="total_value[^>]*>([^<]*)<', text)[1])

    figures, shown = total(job)  # curve ``hull`` names no currency
    assert shown.endswith("(in the portfolio's currency)") and float(figures["total_value"]) == pytest.approx(
        job["value"].sum(), rel=1e-12
    )
    figures, shown = total(job.assign(curve="USD"))
    assert shown == f"{job['value'].sum():,.2f} USD"
    two = job.assign(currency=np.where(np.arange(len(job)) % 2, "EUR", "USD"))
    figures, _ = total(two)
    priced = two[two["price"].notna()]
    assert "total_value" not in figures
    for name in ("EUR", "USD"):
        mine = priced.loc[priced["currency"] == name, "value"].sum()
        assert float(figures[f"total_value_{name}"]) == pytest.approx(mine, rel=1e-12)


def test_one_formatter_shows_every_number():
    assert [shown(v) for v in (3.135e10, 5e5, 25_000_000, 0.0, 1.5, 1.23e-4)] == [
        "31,350,000,000",
        "500,000",
        "25,000,000",
        "0",
        "1.500",
        "1.230e-04",
    ]
    assert shown(5248020.112, "money") == "5,248,020.11" and shown(None) == "—" and shown("cpu") == "cpu"


def test_problem_texts_become_rows_columns_and_rules():
    errors = pd.Series(
        [
            "row 4 (id 'a'), column 'maturity': must be > 0; row 4 (id 'a'), column 'volatility': is required",
            None,
            "row 9 (id 7): the row's dates are not in order",
            "no pattern here",
        ]
    )
    problems = parse_problems(errors)
    assert problems["row"].tolist()[:3] == [4, 4, 9] and pd.isna(problems["row"].iloc[3])
    assert problems["column"].tolist() == ["maturity", "volatility", "(row)", "(row)"]
    assert problems["rule"].tolist() == [
        "must be > 0",
        "is required",
        "the row's dates are not in order",
        "no pattern here",
    ]
    assert problems["id"].tolist()[:3] == ["'a'", "'a'", "7"]


@pytest.mark.parametrize("form", ["wide", "full"])
def test_a_shift_run_gets_the_books_value_under_each_shift(small_book, form):
    priced = distprice.price(small_book.head(60), engine="cpu", shifts_bp=[-100, 0, 100], scenario_table=form)
    page = Page(render_report(priced))
    ladder = {row[0]: float(row[1]) for row in page.table("values/scenarios")}
    long = distprice.price(small_book.head(60), engine="cpu", shifts_bp=[-100, 0, 100])
    expected = long.groupby("scenario", observed=True)["value"].sum()
    assert list(ladder) == ["-100bp", "+0bp", "+100bp"]
    for name, value in ladder.items():
        assert value == pytest.approx(expected[name], rel=1e-12)
    assert float(page.figures["values"]["total_value"]) == pytest.approx(expected["+0bp"], rel=1e-12)
    assert int(page.figures["job"]["rows"]) == 60 and int(page.figures["job"]["scenarios"]) == 3
    with pytest.raises(distprice.OptionError, match="wide or full scenario table"):
        render_report(long)


def test_a_reported_risk_run_writes_the_wide_table(small_book, tmp_path):
    from click.testing import CliRunner

    from distprice.cli import main

    small_book.head(40).to_csv(tmp_path / "book.csv", index=False)
    args = ["run", "--in-process", "--portfolio", str(tmp_path / "book.csv"), "--shifts-bp=-10,0,10"]
    args += ["--output", str(tmp_path / "out.parquet"), "--report", str(tmp_path / "r.html")]
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    assert "the priced table of this risk run is wide" in done.stderr
    assert "price[+10bp]" in pd.read_parquet(tmp_path / "out.parquet").columns
    assert (tmp_path / "r.html").exists()
    refused = CliRunner().invoke(main, [*args, "--scenario-table", "long"])
    assert refused.exit_code == 2 and "give --scenario-table wide" in refused.output


def test_measure_columns_make_a_risk_section(job):
    rng = np.random.default_rng(3)
    risky = job.assign(
        dv01=rng.uniform(0, 0.1, len(job)),
        krd_2y=rng.uniform(0, 2, len(job)),
        krd_10y=rng.uniform(0, 5, len(job)),
        oas=rng.uniform(-0.01, 0.03, len(job)),
        effective_duration=rng.uniform(0, 8, len(job)),
    )
    risky.loc[::3, "curve"] = "usd"  # a label to the report: it never prices
    failed = risky.index[risky["price"].notna()][:2]
    risky.loc[failed, "oas"] = np.nan
    risky["error"] = risky["error"].astype(object)
    risky.loc[failed, "error"] = "OAS: no spread in [-20%, 20%] matches the market price"
    page = Page(render_report(risky))
    assert page.sections == ["job", "shape", "values", "risk", "problems"]
    priced = risky[risky["price"].notna()]
    risk = page.figures["risk"]
    assert float(risk["book_dv01"]) == pytest.approx((priced["quantity"] * priced["dv01"]).sum(), rel=1e-12)
    by_curve = {row[0]: float(row[1]) for row in page.table("risk/by_curve")}
    expected = (priced["quantity"] * priced["dv01"]).groupby(priced["curve"]).sum()
    assert list(by_curve) == ["hull", "usd", "(all curves)"]
    for curve in ("hull", "usd"):
        assert by_curve[curve] == pytest.approx(expected[curve], rel=1e-12)
    ladder = {row[0]: [float(v) for v in row[1:]] for row in page.table("risk/key_rates")}
    for i, tenor in enumerate(("krd_2y", "krd_10y")):
        assert ladder["(all curves)"][i] == pytest.approx((priced["value"] * priced[tenor]).sum() * 1e-4, rel=1e-12)
    assert float(risk["key_rate_dv01_sum"]) == pytest.approx(sum(ladder["(all curves)"]), rel=1e-12)
    assert float(risk["oas_median"]) == pytest.approx(priced["oas"].median() * 1e4, rel=1e-12)
    assert int(risk["oas_failed"]) == 2 and len(page.table("risk/oas_failed")) == 2
    assert int(page.figures["problems"]["invalid_rows"]) == 5  # a priced row whose OAS failed is not invalid


def test_the_monte_carlo_family_adds_its_own_section():
    priced = distprice.price_mc(DATA / "finpar_small.input.data", paths=512, engine="reference")
    page = Page(render_report(priced, family="montecarlo"))
    assert page.sections == ["paths"]
    (row,) = page.table("paths/prices")
    assert float(row[3]) == priced["price"].iloc[0] and int(row[5]) == 512
    assert float(row[-1]) == pytest.approx(512 / priced["seconds"].iloc[0], rel=1e-12)  # paths/s


def test_bad_facts_are_named(job, tmp_path, monkeypatch):
    with pytest.raises(OptionError, match="unknown phase 'pricing'"):
        render_report(job, timings={"pricing": 1.0})
    with pytest.raises(OptionError, match="family must be one of lattice, montecarlo"):
        render_report(job, family="heston")
    with pytest.raises(OptionError, match="a montecarlo report is drawn from a priced table; this one lacks job"):
        render_report(job, family="montecarlo")
    with pytest.raises(OptionError, match="lacks kernel_seconds"):
        render_report(job, workers={"w": dict(rows=1, node_steps=1.0, seconds=1.0)})
    width, height, chosen = _plan_of(job)
    with pytest.raises(OptionError, match="plan covers 40 rows, but 295 rows are valid"):
        render_report(job, plan=plan(width[:40], height[:40], CostModel("cpu"), gpu=False))
    with pytest.raises(OptionError, match=r"\.html or \.png, not '\.svg'"):
        draw_shape(tmp_path / "shape.svg", width, height)
    monkeypatch.setattr("distprice.report.browser.chromium", lambda: None)
    with pytest.raises(OptionError, match="no Chromium found .* apt-get install chromium"):
        draw_shape(tmp_path / "shape.png", width, height)
    assert not list(tmp_path.iterdir())  # nothing written


def test_the_shape_picture_alone_is_the_reports_section(job, tmp_path):
    width, height, chosen = _plan_of(job)
    page = Page(draw_shape(tmp_path / "shape.html", width, height, plan=chosen, chunks=4).read_text())
    assert page.sections == ["shape"]
    assert page.figures["shape"] == Page(render_report(job, plan=chosen, chunks=4)).figures["shape"]


@needs_browser
def test_the_shape_png_is_drawn_by_chromium(job, tmp_path):
    from PIL import Image

    width, height, chosen = _plan_of(job)
    png = draw_shape(tmp_path / "shape.png", width, height, plan=chosen, chunks=4)
    image = Image.open(png)
    assert image.width == 1280 and len(image.convert("RGB").getcolors(2**24)) > 50  # drawn, not blank


@needs_browser
def test_the_report_opens_in_chromium_without_errors(job, tmp_path):
    from PIL import Image

    path = write_report(job, tmp_path / "report.html", chunks=4)
    shown = render_page(path.as_uri())
    assert shown.errors == []
    assert "rows priced 295" in shown.text and "invalid rows 5" in shown.text
    image = Image.open(io.BytesIO(shown.png)).convert("RGB")
    colors = image.getcolors(2**24)
    assert image.height > 2000 and len(colors) > 100  # the plots are drawn: many colours, not a blank page


@pytest.mark.slow
def test_a_report_of_a_million_rows_stays_under_10_mb(job, tmp_path):
    big = pd.concat([job] * (10**6 // len(job) + 1), ignore_index=True).head(10**6)
    path = write_report(big, tmp_path / "big.html", chunks=64)
    assert path.stat().st_size < 10 * 2**20
    page = Page(path.read_text())
    assert int(page.figures["job"]["rows"]) == 10**6
    assert float(page.figures["values"]["total_value"]) == pytest.approx(big["value"].sum(), rel=1e-12)
