"""The Monte-Carlo contract's reference figures: FinPar's float64 prices, Futhark's float32 prints, the
Black-Scholes closed form of contract 1."""

from math import erf, exp, log, sqrt
from pathlib import Path

import numpy as np
import pytest

from distprice.montecarlo import cpu, price_mc, read_inputs, reference, validate, with_options

DATA = Path(__file__).parent / "data" / "optionpricing"


def job_of(name, **options):
    job = validate(read_inputs(DATA / name))[0]
    return with_options(job, **options) if options else job


def finpar_price(name):
    return float((DATA / name).read_text().split("]")[0].strip(" [\n"))


def futhark_price(name):
    return float((DATA / name).read_text().strip().strip("[]").removesuffix("f32"))


@pytest.mark.parametrize("stem", ["finpar_small", "finpar_medium"])
def test_cpu_engine_holds_finpar_prices_at_full_paths(stem):
    priced = price_mc(DATA / f"{stem}.input.data", engine="cpu")
    expected = finpar_price(f"{stem}.output.data")
    assert priced.paths[0] == {"finpar_small": 2**23, "finpar_medium": 2**20}[stem]
    assert abs(priced.price[0] / expected - 1) <= 1e-9
    assert 0 < priced.stderr_batches[0] < 1


@pytest.mark.parametrize("stem", ["finpar_small", "finpar_medium"])
def test_reference_engine_agrees_with_cpu_engine_path_by_path(stem):
    job = job_of(f"{stem}.input.data")
    first, count = 12345, 4096
    ours, theirs = cpu.path_payoffs(job, first, count), reference.path_payoffs(job, first, count)
    np.testing.assert_allclose(ours, theirs, rtol=1e-13, atol=1e-10)
    assert abs(reference.batch_sums(job, first, count).sum() / ours.sum() - 1) < 1e-13


@pytest.mark.parametrize("stem", ["finpar_small", "finpar_medium"])
def test_fp32_engine_within_1e_5_of_fp64(stem):
    fp32 = price_mc(DATA / f"{stem}.input.data", engine="cpu", precision="fp32").price[0]
    assert abs(fp32 / finpar_price(f"{stem}.output.data") - 1) <= 1e-5


@pytest.mark.parametrize("stem", ["small", "medium"])
def test_futhark_outputs_reproduced_by_sequential_float32_sum(stem):
    """Futhark's prints come from an f32 pipeline summed path after path in f32 (0.04-0.11 % biased)."""
    job = job_of(f"{stem}.in")
    assert job.precision == "fp32"
    payoffs = cpu.path_payoffs(job, 0, job.paths)[0].astype(np.float32)
    sequential = np.cumsum(payoffs, dtype=np.float32)[-1] / np.float32(job.paths)
    assert abs(float(sequential) / futhark_price(f"{stem}.out") - 1) < 5e-9
    fp64 = finpar_price(f"finpar_{stem}.output.data")
    assert 4e-4 < abs(float(sequential) / fp64 - 1) < 1.2e-3


def test_contract_1_against_black_scholes_closed_form():
    job = job_of("finpar_small.input.data")
    s0, strike = job.spots[0, 0], job.contract.strike
    detval, disc = job.detvals[0, 0], job.discounts[0, 0]
    sd = job.vol[0, 0, 0] * job.bridge.sd[0]
    forward = s0 * exp(job.drift[0, 0, 0] + sd * sd / 2)
    d1 = (log(forward / strike) + sd * sd / 2) / sd
    cdf = lambda x: 0.5 * (1 + erf(x / sqrt(2)))  # noqa: E731
    closed = detval * disc * (forward * cdf(d1) - strike * cdf(d1 - sd))
    assert abs(closed / 167.0560809 - 1) < 1e-9
    priced = price_mc(DATA / "finpar_small.input.data", engine="cpu").iloc[0]
    assert abs(priced.price / closed - 1) < 1e-5
    assert abs(priced.price - closed) < 3 * priced.stderr_batches
