"""Differential evolution and Heston fits: the search's rules, determinism, the 1062-quote acceptance, polish,
and the tables of calibrate_heston."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_heston import DATA, X_OPT

from distprice.errors import OptionError
from distprice.models import calibrate_heston, fit_surface, heston_engine, heston_surfaces, read_benchmark
from distprice.models.evolution import evolve
from distprice.models.heston import LOWER, UPPER
from distprice.models.heston_synthetic import TRUE_PARAMS, synthetic_quotes


@pytest.fixture(scope="module")
def surface():
    return heston_surfaces(read_benchmark(DATA / "1062_quotes.in")[0])[0]


def sphere(points):
    return np.sum((points - 0.3) ** 2, axis=1)


def test_evolution_spends_its_budget_in_whole_generations():
    seen = []
    found = evolve(sphere, [-1.0] * 3, [1.0] * 3, population=40, max_evals=2000, seed=5, progress=seen.append)
    assert (found.n_evals, found.generations, found.status) == (2000, 49, "max_evals_reached")
    assert [g.n_evals for g in seen] == list(range(40, 2001, 40))
    values = [g.best_value for g in seen]
    assert values == sorted(values, reverse=True) and values[-1] == found.best_value
    np.testing.assert_allclose(found.best, 0.3, atol=1e-3)


def test_evolution_stops_at_its_target():
    found = evolve(sphere, [-1.0] * 2, [1.0] * 2, max_evals=4000, seed=1, target=1e-4)
    assert found.status == "target_reached" and found.best_value <= 1e-4 and found.n_evals < 4000


def test_evolution_is_determined_by_its_seed():
    runs = [evolve(sphere, [-1.0] * 4, [1.0] * 4, max_evals=400, seed=s) for s in (3, 3, 4)]
    assert np.array_equal(runs[0].best, runs[1].best) and runs[0].best_value == runs[1].best_value
    assert not np.array_equal(runs[0].best, runs[2].best)


def test_trials_leave_the_box_only_by_their_forced_coordinate():
    populations = []

    def recording(points):
        populations.append(points.copy())
        return sphere(points) + np.where(points[:, 0] > 0.9, np.nan, 0.0)  # NaN reads as +inf

    lower, upper = np.zeros(5), np.ones(5)
    found = evolve(recording, lower, upper, population=10, max_evals=100, seed=2)
    initial, first_trials = populations[0], populations[1]
    assert np.all((initial >= lower) & (initial <= upper))
    outside = (first_trials < lower) | (first_trials > upper)
    assert outside.any() and outside.sum(axis=1).max() == 1
    assert found.best[0] <= 0.9


@pytest.mark.slow
def test_fits_of_the_1062_quotes_meet_the_acceptance(surface):
    """The contract asks, over seeds: median RMSE <= 0.757 and 90 % of them <= 0.765. Twenty seeds (about 6 s)
    leave room for two stalled searches (4 % of 50 seeds stall above 0.765: the benchmark runs all 50)."""
    fits = [fit_surface(surface, seed=seed, engine="cpu") for seed in range(20)]
    rmse = np.array([f.rmse for f in fits])
    assert np.median(rmse) <= 0.757
    assert np.mean(rmse <= 0.765) >= 0.9
    assert rmse.min() >= 0.751553 - 1e-6  # nothing below the global optimum
    assert all(f.n_evals == 2000 and f.status == "max_evals_reached" and f.rmse == f.rmse_de for f in fits)


def test_fit_is_determined_by_its_seed(surface):
    a, b = (fit_surface(surface, seed=11, max_evals=400, engine="cpu") for _ in range(2))
    assert np.array_equal(a.params, b.params) and np.array_equal(a.prices, b.prices)
    assert a.objective == b.objective


def test_polish_reaches_the_global_optimum(surface):
    fit = fit_surface(surface, seed=0, polish=True, engine="cpu")
    assert fit.rmse == pytest.approx(0.751553, abs=1e-6)
    assert fit.rmse_de > fit.rmse and fit.n_evals == 2000 and fit.polish_evals > 0
    assert (fit.status, fit.status_de) == ("converged", "max_evals_reached")
    np.testing.assert_allclose(fit.params, X_OPT, rtol=2e-4)


def test_calibrate_heston_fits_every_surface_and_reports_every_quote(tmp_path):
    quotes = read_benchmark(DATA / "1062_quotes.in")[0].iloc[::3]
    scaled = quotes.assign(surface="spot 100", strike=quotes["strike"] * 100.0, spot=100.0)
    both = pd.concat([quotes, scaled], ignore_index=True)
    seen = []
    surfaces, priced = calibrate_heston(both, max_evals=400, engine="cpu", progress=seen.append)
    assert list(surfaces["surface"]) == ["default", "spot 100"]
    assert list(surfaces.columns[:11]) == [
        "surface",
        "v0",
        "theta",
        "rho",
        "kappa",
        "eta",
        "rmse",
        "objective",
        "n_evals",
        "seconds",
        "status",
    ]
    a, b = surfaces.iloc[0], surfaces.iloc[1]
    np.testing.assert_allclose(
        a[["v0", "theta", "rho", "kappa", "eta"]].to_numpy(float),
        b[["v0", "theta", "rho", "kappa", "eta"]].to_numpy(float),
        rtol=1e-9,
    )
    assert a["n_quotes"] == len(quotes) and a["n_evals"] == 400 and a["engine"] == "cpu"
    assert [(p.surface, p.generation, p.n_evals) for p in seen[:2]] == [("default", 0, 40), ("default", 1, 80)]
    assert len(seen) == 20 and seen[-1].rmse == pytest.approx(b["rmse"])
    assert len(priced) == len(both) and list(priced.columns[: len(both.columns)]) == list(both.columns)
    first, second = priced.iloc[: len(quotes)], priced.iloc[len(quotes) :]
    np.testing.assert_allclose(second["model_price"], 100.0 * first["model_price"].to_numpy(), rtol=1e-8)
    error = first["model_vol_error"].to_numpy()
    assert 100.0 * np.sqrt(np.mean(error**2)) == pytest.approx(a["rmse"], rel=1e-12)
    assert a["objective"] == pytest.approx(np.sum(error**2), rel=1e-12)

    path = tmp_path / "quotes.parquet"
    both.to_parquet(path)
    again, _ = calibrate_heston(path, max_evals=400, engine="cpu")
    np.testing.assert_array_equal(again["rmse"], surfaces["rmse"])


def test_bad_options_are_refused(surface):
    with pytest.raises(OptionError, match="quadrature must be one of gl20, accurate"):
        heston_engine(surface, "gl30")
    with pytest.raises(OptionError, match="engine must be one of"):
        heston_engine(surface, engine="fpga")
    with pytest.raises(OptionError, match="gl20 only"):
        heston_engine(surface, "accurate", "gpu")
    with pytest.raises(OptionError, match="population >= 4"):
        fit_surface(surface, population=3)
    assert heston_engine(surface).name in ("cpu", "gpu")


def test_box_is_the_contracts():
    np.testing.assert_array_equal(LOWER, [1e-6, 1e-6, -1.0, 1e-4, 1e-4])
    np.testing.assert_array_equal(UPPER, [1.0, 1.0, 0.0, 4.0, 2.0])


def test_synthetic_quotes_are_determined_by_their_seed_and_fit_back():
    quotes = synthetic_quotes(600, seed=3)
    assert quotes.equals(synthetic_quotes(600, seed=3)) and not quotes.equals(synthetic_quotes(600, seed=4))
    assert len(quotes) == 600 and quotes["maturity"].nunique() == 12
    years = (quotes["maturity"] - quotes["valuation_date"]).dt.days / 365.0
    assert years.min() >= 30 / 365 and years.max() <= 30.0
    fit = fit_surface(heston_surfaces(quotes)[0], seed=0, polish=True, engine="cpu")
    np.testing.assert_allclose(fit.params, TRUE_PARAMS, rtol=0.1)
    assert fit.rmse < 0.2  # the noise: 0.5 % of volatilities of ~0.25, 0.125 vol points
