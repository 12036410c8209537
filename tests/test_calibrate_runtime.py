"""Model calibration through the interfaces: the calibrate commands, distprice.calibrate_heston and
calibrate_hull_white, a cluster fitting surfaces and models at once, and a portfolio priced on fitted models."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from distributed import get_task_stream

import distprice
from distprice.cli import main
from distprice.cluster.pricer import Pricer
from distprice.models import read_quotes

from utils import HESTON_QUOTES as QUOTES, HULL_PUT, SWAPTIONS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_calibrate_heston_writes_surfaces_and_quotes(tmp_path):
    result = CliRunner().invoke(
        main,
        [
            "calibrate",
            "heston",
            "--quotes",
            str(QUOTES),
            "--max-evals",
            "200",
            "--output",
            str(tmp_path / "s.csv"),
            "--quotes-output",
            str(tmp_path / "q.csv"),
        ],
    )
    assert result.exit_code == 0, result.output
    surfaces, quotes = pd.read_csv(tmp_path / "s.csv"), pd.read_csv(tmp_path / "q.csv")
    expected, _ = distprice.calibrate_heston(QUOTES, max_evals=200)
    assert surfaces.loc[0, "rmse"] == pytest.approx(expected.loc[0, "rmse"], rel=1e-12)
    assert len(quotes) == 1062 and quotes["model_price"].notna().all()


def test_fitted_models_price_a_portfolio(tmp_path):
    SWAPTIONS.to_csv(tmp_path / "swaptions.csv", index=False)
    result = CliRunner().invoke(
        main,
        [
            "calibrate",
            "hull-white",
            "--quotes",
            str(tmp_path / "swaptions.csv"),
            "--output",
            str(tmp_path / "models.csv"),
        ],
    )
    assert result.exit_code == 0, result.output
    models = pd.read_csv(tmp_path / "models.csv")
    assert list(models["model"]) == ["USD"] and models.loc[0, "status"] == "converged"
    row = {k: v for k, v in HULL_PUT.items() if k not in ("mean_reversion", "volatility", "curve")}
    book = pd.DataFrame([dict(row, id="m", model="USD")])
    priced = distprice.price(book, models=models)
    direct = distprice.price(
        pd.DataFrame(
            [
                dict(
                    HULL_PUT,
                    id="m",
                    mean_reversion=models.loc[0, "mean_reversion"],
                    volatility=models.loc[0, "volatility"],
                )
            ]
        )
    )
    assert priced.loc[0, "price"] == direct.loc[0, "price"]
    with pytest.raises(distprice.InvalidInputError, match="column 'mean_reversion': give a model or"):
        distprice.price(pd.DataFrame([dict(HULL_PUT, id="both", model="USD")]), models=models)


@pytest.mark.parametrize("column, value", [("mean_reversion", "clean"), ("volatility", True)])
def test_a_model_table_parameter_that_is_not_a_number_is_named(column, value):
    """Before, a text parameter stopped the job with a ValueError and a traceback."""
    models = pd.DataFrame({"model": ["USD", "EUR"], "mean_reversion": [0.1, 0.05], "volatility": [0.01, 0.012]})
    models[column] = models[column].astype(object)
    models.loc[1, column] = value
    row = {k: v for k, v in HULL_PUT.items() if k not in ("mean_reversion", "volatility", "curve")}
    with pytest.raises(distprice.InvalidInputError) as caught:
        distprice.price(pd.DataFrame([dict(row, id="m", model="USD")]), models=models)
    assert [str(p) for p in caught.value.problems] == [f"model table row 2, column '{column}': must be a number"]


def test_a_cluster_fits_every_surface_and_model_at_once(local):
    quotes = read_quotes(QUOTES)
    two = pd.concat([quotes.assign(surface="a"), quotes.assign(surface="b")], ignore_index=True)
    here, _ = distprice.calibrate_heston(two, max_evals=120, seed=3)
    with Pricer(local) as pricer, get_task_stream(local) as stream:
        spread, fitted = pricer.calibrate_heston(two, max_evals=120, seed=3)
        models = pricer.calibrate_hull_white(SWAPTIONS, distprice.curves.builtin_curves())
    np.testing.assert_array_equal(
        spread[["v0", "theta", "rho", "kappa", "eta"]].to_numpy(),
        here[["v0", "theta", "rho", "kappa", "eta"]].to_numpy(),
    )
    assert len(fitted) == 2 * 1062 and list(models["model"]) == ["USD"]
    names = {task["key"].split("-")[0] for task in stream.data}
    assert {"fit_heston", "fit_hull_white"} <= names
