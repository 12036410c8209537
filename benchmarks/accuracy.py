"""Accuracy per node: the error of dated prices against the tree's steps, distprice beside QuantLib's tree engine;
writes ``accuracy.json`` and ``accuracy.md`` to OUTPUT_DIR.

    python benchmarks/accuracy.py OUTPUT_DIR [--rows 36] [--seed 3] [--years 10] [--grids 4,6,8,12,16,24,26,32,52]

``--grids`` takes numbers and ranges (``4-64``: every number of steps a year from 4 to 64).

Two books: rows of the ``desk`` dataset (callable, puttable and plain bonds and bond options in three currencies;
``--rows`` of them maturing within ``--years``, a third per currency, options first), and QuantLib's callable bond
example (QuantLib-SWIG's ``callablebonds.py``: a 2.5 % quarterly bond to 15 September 2012, callable at 100 clean
every quarter from 15 September 2006, valued on 16 August 2006 at a = 0.06, sigma = 0.20 and at a = 0.03, sigma =
0.15), its flat 4.65 % semiannual curve read as distprice reads rates (ACT/365F years), and QuantLib priced on that
same curve.

The truth is each row's price where every date is a node (one step a day of its curve's year: 365 or 360), where
distprice and QuantLib agree to rounding (the script reports how close; QuantLib moves a call in the week before a
coupon onto the coupon's date, so QuantLib's own daily price is its truth). At each number of steps a year:
distprice on a ``uniform`` grid (every tree of phase 0, its exercise dates rounded to their nearest steps, as
distprice priced until 2026-11-29), distprice as it prices (``phase``: each dated tree's steps shifted to put its
exercise dates on nodes, :mod:`distprice.lattice.geometry`), ``richardson`` (``2 P(2n) - P(n)`` of ``phase`` where
the grid of twice the steps is measured too; its cost both grids' node-steps) and QuantLib's
``TreeCallableFixedRateBondEngine`` given ``round(T * spy)`` steps, which it spreads over a time grid with every
coupon and exercise date on a node. Every column measures the same rows: american rows have no QuantLib counterpart
and are left out of the book (the table says how many). Errors are per 100 of face: the root mean square and the
largest over the rows. Node-steps are distprice's (``2 width
height``); QuantLib's are estimated as ``2 width n`` for the n steps of the time grid it builds
(:func:`~distprice.lattice.quantlib_dated.quantlib_steps`: each interval between two of its dates takes the
nearest whole number of the steps it is given, so n may be more or fewer) and the width of distprice's tree of
that mean step.

A tree's error oscillates with its steps (an exercise boundary crossing nodes), by a factor of 2 to 10 from one
grid to the next, and distprice's and QuantLib's grids oscillate apart; one grid says little of either. Below each
table, *per node over the grids*: ``log(error)`` fitted as one slope in ``log(node-steps)`` with an intercept per
engine, over the grids up to 16 steps a year and over all of them; the ratio of the intercepts is distprice's
error over QuantLib's at equal node-steps (below 1: distprice ahead), and the share of grids where distprice's
error, brought to QuantLib's node-steps by that slope, is at or below QuantLib's.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

import distprice
from distprice.curves import load_curves
from distprice.lattice import instruments
from distprice.lattice.desk import AS_OF, desk
from distprice.lattice.geometry import tree_geometry
from distprice.lattice.quantlib_dated import price_dated_quantlib, quantlib_example, quantlib_steps

from common import save

EXAMPLE_MODELS = ((0.06, 0.20), (0.03, 0.15))


def desk_rows(rows: int, seed: int, years: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``rows`` rows of the desk maturing within ``years``, a third per currency: options first (callable,
    puttable, bond options), then plain bonds."""
    book = desk(max(20 * rows, 200), seed=seed)
    p = book.portfolio
    p = p[pd.to_datetime(p["maturity_date"]) <= pd.Timestamp(AS_OF) + pd.DateOffset(years=years)]
    order = p.assign(plain=p["instrument"] == "bond").sort_values(["plain"], kind="stable")
    pick = pd.concat([order[order["currency"] == c].head(rows // 3) for c in ("USD", "EUR", "GBP")])
    pick = pick.reset_index(drop=True)
    return pick, book.exercise_schedule[book.exercise_schedule["id"].isin(pick["id"])], book.curves


@contextmanager
def uniform_grid():
    """distprice as it priced before its trees had phases: every tree's steps at ``s dt``."""
    phases = instruments.exercise_phases
    instruments.exercise_phases = lambda rows, exercise, steps_per_year: np.zeros(len(exercise), np.int64)
    try:
        yield
    finally:
        instruments.exercise_phases = phases


def node_steps(a, sigma, spy, height) -> np.ndarray:
    g = tree_geometry(np.asarray(a), np.asarray(sigma), np.zeros(len(height)), np.asarray(spy), np.asarray(height))
    return g.node_steps


def measure(portfolio, schedule, curves_table, grids, as_of=None) -> dict:
    """Errors against the steps of one book's rows that QuantLib prices too (see the module's notes)."""
    american = (portfolio.get("exercise", pd.Series(index=portfolio.index)) == "american").to_numpy()
    portfolio = portfolio[~american].reset_index(drop=True)
    if schedule is not None:
        schedule = schedule[schedule["id"].isin(portfolio["id"])]
    curves = load_curves(curves_table)
    D = np.array([curves[c].days_per_year for c in portfolio["curve"]])
    fine = portfolio.assign(steps_per_year=D)
    truth = distprice.price(fine, curves_table, engine="cpu", as_of=as_of, exercise_schedule=schedule)
    _say(f"truth: {len(fine)} rows")
    assert truth["error"].isna().all(), truth["error"].dropna().tolist()
    ql_truth = price_dated_quantlib(fine, curves, as_of, schedule, steps=truth["height"].tolist())["price"].to_numpy()
    true = truth["price"].to_numpy()
    _say("QuantLib's truth")
    gap = float(np.abs(ql_truth - true).max())
    result: dict[str, object] = dict(rows=len(portfolio), american_left_out=int(american.sum()), daily_gap=gap)
    per_grid = {}
    for spy in grids:
        rows = portfolio.assign(steps_per_year=spy)
        started = time.perf_counter()
        phase = distprice.price(rows, curves_table, engine="cpu", as_of=as_of, exercise_schedule=schedule)
        with uniform_grid():
            uniform = distprice.price(rows, curves_table, engine="cpu", as_of=as_of, exercise_schedule=schedule)
        years = truth["height"].to_numpy() / D
        given = np.maximum(np.round(years * spy).astype(int), 1).tolist()  # QuantLib's steps: round(T * spy)
        theirs = price_dated_quantlib(rows, curves, as_of, schedule, steps=given)
        grid = quantlib_steps(rows, curves, given, as_of, schedule)
        treed = grid > 0  # a plain bond: no tree
        per_grid[spy] = dict(
            uniform=uniform["price"].to_numpy() - true,
            phase=phase["price"].to_numpy() - true,
            phase_price=phase["price"].to_numpy(),
            quantlib=theirs["price"].to_numpy() - ql_truth,
            node_steps=float((2.0 * phase["width"] * phase["height"]).sum()),
            node_steps_uniform=float((2.0 * uniform["width"] * uniform["height"]).sum()),
            quantlib_node_steps=float(
                node_steps(
                    rows["mean_reversion"][treed], rows["volatility"][treed], grid[treed] / years[treed], grid[treed]
                ).sum()
            ),
            quantlib_steps_given=int(np.sum(np.asarray(given)[treed])),
            quantlib_steps=int(grid[treed].sum()),
            seconds=time.perf_counter() - started,
        )
        _say(f"{spy} steps a year")
    for spy in grids:
        if 2 * spy in per_grid:
            per_grid[spy]["richardson"] = 2 * per_grid[2 * spy]["phase_price"] - per_grid[spy]["phase_price"] - true
            per_grid[spy]["richardson_node_steps"] = per_grid[spy]["node_steps"] + per_grid[2 * spy]["node_steps"]
    result["grids"] = {
        spy: {
            key: (
                dict(rms=float(np.sqrt(np.mean(v**2))), max=float(np.abs(v).max())) if isinstance(v, np.ndarray) else v
            )
            for key, v in values.items()
            if key != "phase_price"
        }
        for spy, values in per_grid.items()
    }
    return result


def _say(what: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {what}", file=sys.stderr, flush=True)


def table(name: str, result: dict) -> list[str]:
    lines = [
        f"### {name}",
        "",
        f"Rows: {result['rows']}; american rows left out (QuantLib has no counterpart): {result['american_left_out']}; "
        f"distprice and QuantLib where every date is a node: within {result['daily_gap']:.1e} per 100.",
        "",
        "| steps a year | node-steps | uniform: rms, max | phase: rms, max | Richardson (n, 2n): rms, max, node-steps "
        "| QuantLib (est. node-steps): rms, max |",
        "|---|---|---|---|---|---|",
    ]
    for spy, g in result["grids"].items():
        rich = (
            f"{g['richardson']['rms']:.4f}, {g['richardson']['max']:.4f}, {g['richardson_node_steps']:.3g}"
            if "richardson" in g
            else ""
        )
        lines.append(
            f"| {spy} | {g['node_steps']:.3g} | {g['uniform']['rms']:.4f}, {g['uniform']['max']:.4f} "
            f"| {g['phase']['rms']:.4f}, {g['phase']['max']:.4f} | {rich} "
            f"| ({g['quantlib_node_steps']:.3g}) {g['quantlib']['rms']:.4f}, {g['quantlib']['max']:.4f} |"
        )
    return lines + [""]


def parse_grids(text: str) -> list[int]:
    """Steps a year from ``4,6,8`` or ``4-64`` (every number between, both ends in), or both mixed; in order,
    each once."""
    grids: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        grids.update(range(int(low), int(high or low) + 1))
    return sorted(grids)


def per_node(result: dict, engine: str, most: int | None = None) -> dict:
    """distprice's ``engine`` (``phase`` or ``uniform``) against QuantLib over the grids of ``result`` up to
    ``most`` steps a year (every grid: None): ``ratio``, distprice's rms error over QuantLib's at equal node-steps
    (one slope in log node-steps, an intercept each), ``ahead``, the share of grids where distprice's error at
    QuantLib's node-steps is at or below QuantLib's, ``slope`` and ``grids``."""
    picked = [g for spy, g in result["grids"].items() if most is None or int(spy) <= most]
    ours = np.log([[g["node_steps"], g[engine]["rms"]] for g in picked])
    theirs = np.log([[g["quantlib_node_steps"], g["quantlib"]["rms"]] for g in picked])
    n = len(picked)
    design = np.column_stack(
        [np.r_[ours[:, 0], theirs[:, 0]], np.r_[np.ones(n), np.zeros(n)], np.r_[np.zeros(n), np.ones(n)]]
    )
    (slope, mine, quantlib), *_ = np.linalg.lstsq(design, np.r_[ours[:, 1], theirs[:, 1]], rcond=None)
    at_theirs = ours[:, 1] + slope * (theirs[:, 0] - ours[:, 0])
    return dict(
        ratio=float(np.exp(mine - quantlib)),
        ahead=float(np.mean(at_theirs <= theirs[:, 1])),
        slope=float(slope),
        grids=n,
    )


def summary(result: dict) -> list[str]:
    """The lines of :func:`per_node` under a book's table."""
    lines = []
    for most, which in ((16, "up to 16 steps a year"), (None, "over every grid")):
        phase, uniform = per_node(result, "phase", most), per_node(result, "uniform", most)
        lines.append(
            f"Per node, {which} ({phase['grids']} grids): error over QuantLib's at equal node-steps "
            f"{phase['ratio']:.2f} (uniform {uniform['ratio']:.2f}), at or below QuantLib's on "
            f"{100 * phase['ahead']:.0f} % of them "
            f"(slope {phase['slope']:.2f})."
        )
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--rows", type=int, default=36)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--years", type=int, default=10, help="the desk rows' longest maturity (QuantLib's daily tree)")
    parser.add_argument("--grids", default="4,6,8,12,16,24,26,32,52")
    args = parser.parse_args()
    grids = parse_grids(args.grids)
    report, lines = {}, ["## Accuracy per node: error (per 100 of face) against steps a year", ""]
    for a, sigma in EXAMPLE_MODELS:
        portfolio, calls, curve = quantlib_example(a, sigma)
        name = f"QuantLib's callable bond example, a = {a}, sigma = {sigma}"
        report[name] = measure(portfolio, calls, curve, grids)
        lines += table(name, report[name]) + summary(report[name])
    portfolio, schedule, curves = desk_rows(args.rows, args.seed, args.years)
    name = f"desk rows maturing within {args.years} years (seed {args.seed})"
    report[name] = measure(portfolio, schedule, curves, grids)
    lines += table(name, report[name]) + summary(report[name])
    save(args.output_dir, "accuracy", report, lines)


if __name__ == "__main__":
    main()
