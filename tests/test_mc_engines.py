"""Engines on data built here: contract 3 and its limiting cases, random market models, path ranges
priced apart and combined, the in-process entry point."""

import pickle

import numpy as np
import pandas as pd
import pytest

from distprice.errors import OptionError
from distprice.montecarlo import (
    EuropeanCall,
    combine,
    cpu,
    datasets,
    price_mc,
    price_range,
    reference,
    split,
    validate,
    with_options,
)
from distprice.montecarlo.bridge import increments
from distprice.montecarlo.contracts import INDEX_LEVELS
from distprice.montecarlo.job import BATCHES

COUPON, NOTIONAL, DISCOUNT = 100.0, 1000.0, datasets.ONE_YEAR_DISCOUNT


def large(paths=4096, **terms):
    tables = datasets.large(paths)
    if terms:
        rows = [(k, i, v) for k, values in terms.items() for i, v in enumerate(values)]
        tables["mc_terms"] = pd.DataFrame(rows, columns=["term", "k", "value"]).assign(job="large")
    return validate(tables)[0]


def random_job(contract, precision="fp64", paths=2048, seed=11):
    rng = np.random.default_rng(seed)
    models, dates, underlyings = 2, 7, 3
    t = np.cumsum(rng.uniform(0.05, 0.4, dates))
    a = rng.normal(size=(models, underlyings, underlyings))
    cov = a @ a.transpose(0, 2, 1) + 0.5 * np.eye(underlyings)
    scale = 1 / np.sqrt(np.einsum("mii->mi", cov))
    correlation = cov * scale[:, :, None] * scale[:, None, :]
    spots = np.array(INDEX_LEVELS) * rng.uniform(0.9, 1.1, (models, underlyings))
    vol = rng.uniform(0.1, 0.4, (models, dates, underlyings))
    drift = rng.uniform(-0.05, 0.05, (models, dates, underlyings)) * np.diff(np.concatenate([[0], t]))[:, None]
    terms = {"coupons": np.linspace(1100, 1400, dates - 1)} if contract == 2 else None
    cashflows = {1: 1, 2: dates, 3: 2}[contract]
    discounts = np.exp(-0.02 * rng.uniform(0.5, 2, (models, cashflows)))
    if contract == 1:
        spots, vol, drift, correlation = spots[:, :1], vol[..., :1], drift[..., :1], correlation[:, :1, :1]
    tables = datasets.tables(
        "random",
        contract,
        t,
        spots,
        vol,
        drift,
        correlation,
        discounts,
        paths=paths,
        detvals=np.full((models, 1), 0.999),
        precision=precision,
        terms=terms,
    )
    return validate(tables)[0]


def test_large_set_shape():
    job = large()
    assert (job.dates, job.underlyings, job.dims, job.contract.code) == (367, 3, 1101, 3)
    assert job.t[0] == 0 and job.vol[0, 0].tolist() == [0, 0, 0]
    np.testing.assert_allclose(job.cholesky[0], [[1, 0, 0], [0.6, 0.8, 0], [0.8, 0.15, 0.5809475]], atol=1e-7)


def test_contract_3_reference_and_cpu_engines_agree():
    job = large()
    ours, theirs = cpu.path_payoffs(job, 1000, 512), reference.path_payoffs(job, 1000, 512)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    # both outcomes occur on these paths: barrier touched and below, or the full notional
    redemption = (ours - COUPON * DISCOUNT) / DISCOUNT
    assert np.any(np.isclose(redemption, NOTIONAL)) and np.any(redemption < NOTIONAL - 1)


def test_contract_3_barrier_never_touched_pays_coupon_and_notional():
    job = large(barriers=[1e-6, 1e-6, 1e-6])
    price = combine([price_range(job, 0, job.paths, "cpu")]).price[0]
    assert price == pytest.approx(COUPON * DISCOUNT + NOTIONAL * DISCOUNT, rel=1e-14)


def test_contract_3_barrier_always_touched_pays_the_worst_capped_at_one():
    job = large(barriers=[1e9, 1e9, 1e9])
    paths = reference.black_scholes(job, 0, increments(job.bridge, reference.normals(job, 0, 1024)))
    worst = np.min(paths[:, -1] / np.array(INDEX_LEVELS), axis=1)
    expected = COUPON * DISCOUNT + NOTIONAL * np.minimum(worst, 1) * DISCOUNT
    np.testing.assert_allclose(cpu.path_payoffs(job, 0, 1024)[0], expected, rtol=1e-12)
    assert np.any(worst < 1) and np.any(worst > 1)


@pytest.mark.parametrize("contract", [1, 2, 3])
@pytest.mark.parametrize("precision", ["fp64", "fp32"])
def test_cpu_engine_against_reference_on_random_models(contract, precision):
    job = random_job(contract, precision)
    ours, theirs = cpu.batch_sums(job, 0, job.paths), reference.batch_sums(job, 0, job.paths)
    assert ours.shape == (2, BATCHES)
    rtol = 1e-12 if precision == "fp64" else 1e-5
    np.testing.assert_allclose(ours.sum(axis=1), theirs.sum(axis=1), rtol=rtol)
    if precision == "fp64":
        np.testing.assert_allclose(cpu.path_payoffs(job, 0, 256), reference.path_payoffs(job, 0, 256), rtol=1e-12)
    assert np.all(ours.sum(axis=1) > 0) and not np.allclose(ours[0], ours[1])


def test_price_does_not_depend_on_how_paths_are_split():
    job = with_options(random_job(3), paths=10_000)
    whole = combine([price_range(job, 0, job.paths, "cpu")])
    for ranges in ([(0, 1000), (1000, 65), (1065, 8935)], split(job.paths, 7), split(job.paths, 3)[::-1]):
        partials = [price_range(job, first, count, "cpu") for first, count in ranges]
        again = combine(partials)
        np.testing.assert_allclose(again.price, whole.price, rtol=1e-12)
        np.testing.assert_allclose(again.stderr_batches, whole.stderr_batches, rtol=1e-9)
    aligned = [price_range(job, a, b, "cpu") for a, b in [(0, 2048), (2048, 4096), (6144, 3856)]]
    assert np.array_equal(combine(aligned).price, whole.price)  # splits at task edges: same bits
    blob = pickle.dumps(aligned[0])
    assert len(blob) < 2000 and pickle.loads(blob).batch_sums.tolist() == aligned[0].batch_sums.tolist()


def test_combine_refuses_gaps_and_overlaps():
    job = with_options(random_job(1), paths=4096)
    a, b = price_range(job, 0, 2000, "cpu"), price_range(job, 2100, 1996, "cpu")
    with pytest.raises(OptionError, match="missing or priced twice"):
        combine([a, b])
    with pytest.raises(OptionError, match="not priced"):
        combine([a])
    with pytest.raises(OptionError, match="cannot price"):
        price_range(job, 4000, 200, "cpu")


def test_price_mc_from_tables_in_a_folder(tmp_path):
    tables = datasets.tables(
        "call",
        "european_call",
        [1.0],
        [[100.0]],
        0.2,
        0.0,
        [[1.0]],
        [[1.0]],
        detvals=[[1.0]],
        paths=2**14,
        terms={"strike": 100.0},
    )
    for name, frame in tables.items():
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
    priced = price_mc(tmp_path, engine="cpu", chunks=4)
    assert list(priced.columns)[:5] == ["job", "model", "contract", "price", "stderr_batches"]
    row = priced.iloc[0]
    assert (row.job, row.model, row.paths, row.precision, row.directions, row.chunks) == (
        "call",
        0,
        2**14,
        "fp64",
        "joe_kuo_6_21201",
        4,
    )
    # at-the-money call, zero log-drift, sd 0.2: forward S0 e^0.02, d1 = 0.2, d2 = 0
    from math import erf, exp, sqrt

    closed = 100 * exp(0.02) * 0.5 * (1 + erf(0.2 / sqrt(2))) - 100 * 0.5
    assert row.price == pytest.approx(closed, rel=1e-3)
    assert validate(tables)[0].contract == EuropeanCall(strike=100.0)
    reference_row = price_mc(tables, engine="reference").iloc[0]
    assert reference_row.price == pytest.approx(row.price, rel=1e-12)
