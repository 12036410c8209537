"""The CPU engine's vector code: exp and log in arithmetic, AS241 on blocks, blocks of any width, the
stage split."""

from pathlib import Path

import numba
import numpy as np
import pytest

from distprice.errors import OptionError
from distprice.montecarlo import cpu, datasets, elementary, normal, read_inputs, stage_split, validate
from distprice.montecarlo.contracts import INDEX_LEVELS

DATA = Path(__file__).parent / "data" / "optionpricing"


@numba.njit(cache=True, error_model="numpy")
def compiled_exp(x, out):
    for i in range(x.shape[0]):
        out[i] = elementary.exp(x[i])


@numba.njit(cache=True, error_model="numpy")
def compiled_log(x, out):
    for i in range(x.shape[0]):
        out[i] = elementary.log(x[i])


@numba.njit(cache=True, error_model="numpy")
def compiled_normals(u, z, one):
    normal.fill(u, z, u.shape[0], normal.scratch(u.shape[0], u))
    for i in range(u.shape[0]):
        one[i] = normal.ppnd16(u[i])


def ulps(ours, exact, dtype):
    """|ours − exact| in units in the last place of ``exact`` rounded to ``dtype``."""
    return np.abs(ours.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(dtype)).astype(np.float64)


def test_exp_and_log_within_a_few_ulps_compiled_as_in_numpy():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-700, 700, 20_000), rng.normal(0, 0.05, 20_000), [0.0, 1e-300, -1e-300]])
    p = np.concatenate([np.exp(rng.uniform(-700, 700, 20_000)), rng.uniform(0.5, 2, 20_000), [1.0, 2.0**-1022]])
    e, lg = elementary.exp(x), elementary.log(p)
    assert np.max(ulps(e, np.exp(x), np.float64)) <= 2
    assert np.max(np.abs(lg - np.log(p)) / np.spacing(np.maximum(np.abs(np.log(p)), 1.0))) <= 4
    tails = np.exp(rng.uniform(np.log(2.0**-32), np.log(0.075), 20_000))  # AS241's tails
    assert np.max(ulps(elementary.log(tails), np.log(tails), np.float64)) <= 1
    assert elementary.exp(np.array([0.0]))[0] == 1.0 and elementary.log(np.array([1.0]))[0] == 0.0
    for function, values, expected in ((compiled_exp, x, e), (compiled_log, p, lg)):
        out = np.empty_like(values)
        function(values, out)
        assert np.array_equal(out, expected)


def test_exp_clamps_to_the_normal_range_and_keeps_nan():
    x = np.array([1000.0, 709.0, -1000.0, -708.0, np.nan])
    e = elementary.exp(x)
    assert e[0] == e[1] == pytest.approx(np.exp(709.0), rel=1e-15) and e[2] == e[3] > 0 and np.isnan(e[4])


def test_float32_exp_and_log_are_the_rounded_float64():
    rng = np.random.default_rng(2)
    x = rng.normal(0, 0.05, 200_000).astype(np.float32)
    p = np.exp(rng.uniform(np.log(2.0**-32), np.log(0.075), 200_000)).astype(np.float32)
    for ours, exact in (
        (elementary.exp(x), np.exp(x.astype(np.float64))),
        (elementary.log(p), np.log(p.astype(np.float64))),
    ):
        assert ours.dtype == np.float32
        assert np.max(ulps(ours, exact, np.float32)) <= 0.5 + 1e-6  # the float32 nearest the value
        assert np.mean(ours != exact.astype(np.float32)) < 1e-4
    out = np.empty_like(x)
    compiled_exp(x, out)
    assert np.array_equal(out, elementary.exp(x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_as241_on_blocks_is_one_number_at_a_time_and_the_array_form(dtype):
    from scipy.special import ndtri

    rng = np.random.default_rng(3)
    far = [1e-12, 1 - 1e-12, 1e-200] if dtype == np.float64 else [1e-12, 1 - 2.0**-24, 1e-30]  # r > 5
    u = np.concatenate([rng.integers(1, 2**30, 4000) * 2.0**-30, far, [0.5, 0.075, 0.925, 0.0, 1.0]]).astype(dtype)
    z, one = np.empty_like(u), np.empty_like(u)
    compiled_normals(u, z, one)
    assert np.array_equal(z, one) and np.array_equal(z, normal.inverse_normal(u))
    assert z[-1] == np.inf and z[-2] == -np.inf and z[-5] == 0
    exact = ndtri(u[:-2].astype(np.float64))
    tolerance = 1e-14 if dtype == np.float64 else 2e-5
    assert np.all(np.abs(z[:-2] - exact) < tolerance * np.maximum(1, np.abs(exact)))
    assert 0.1 < np.mean(np.abs(u - 0.5) > 0.425) < 0.2  # both branches were taken


def random_barrier_job(paths=700):
    rng = np.random.default_rng(8)
    t = np.cumsum(rng.uniform(0.02, 0.1, 23))
    return validate(
        datasets.tables(
            "barrier",
            3,
            t,
            [[3800.0, 11500.0, 1180.0], [3600.0, 12100.0, 1220.0]],
            rng.uniform(0.1, 0.3, (2, 23, 3)),
            0.001,
            datasets.MEDIUM_CORRELATION,
            [[0.99, 0.97], [0.98, 0.96]],
            paths=paths,
            terms={"barriers": 0.9 * np.array(INDEX_LEVELS)},
        )
    )[0]


@pytest.mark.parametrize("name", ["medium", "barrier"])
def test_blocks_of_any_width_give_the_same_payoffs(name, monkeypatch):
    job = random_barrier_job() if name == "barrier" else validate(read_inputs(DATA / "finpar_medium.input.data"))[0]
    first, count = 77, 600
    widths = {}
    for lanes in (16, 64, 256):
        monkeypatch.setattr(cpu, "lanes", lambda job, lanes=lanes: lanes)
        widths[lanes] = cpu.path_payoffs(job, first, count)
    assert np.array_equal(widths[16], widths[64]) and np.array_equal(widths[16], widths[256])
    assert len(np.unique(widths[16])) > 50


def test_stage_split_names_the_stages_and_the_rate():
    job = validate(read_inputs(DATA / "finpar_medium.input.data"))[0]
    split = stage_split(job, 2048)
    assert list(split) == [*cpu.STAGES, "total", "pdu_per_s"]
    assert all(split[k] >= 0 for k in cpu.STAGES) and split["total"] > 0
    assert split["pdu_per_s"] == pytest.approx(2048 * 15 / split["total"], rel=1e-12)
    with pytest.raises(OptionError, match="paths must be"):
        stage_split(job, 0)
