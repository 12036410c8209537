"""The stages of a path: Sobol integers, AS241, the Brownian bridge."""

from pathlib import Path

import numpy as np
import pytest

from distprice.montecarlo import bridge, normal, read_inputs, sobol, validate

DATA = Path(__file__).parent / "data" / "optionpricing"


@pytest.fixture(scope="module")
def medium():
    return validate(read_inputs(DATA / "finpar_medium.input.data"))[0]


def independent_all(directions, n):
    """x_n for every n of an array, by the independent formula (vectorised over n)."""
    g = n ^ (n >> 1)
    x = np.zeros((len(n), directions.shape[0]), dtype=np.uint32)
    for b in range(directions.shape[1]):
        x ^= np.where(((g >> b) & 1)[:, None] == 1, directions[None, :, b], 0).astype(np.uint32)
    return x


def test_unit_vectors_of_the_medium_directions(medium):
    v = medium.directions
    expected = {
        1: [536870912] * 4,
        2: [805306368] + [268435456] * 3,
        3: [268435456] + [805306368] * 3,
        1000: [235929600, 103809024, 556793856, 491782144],
        1048576: [1536, 503324160, 729685504, 860824064],
    }
    for n, x in expected.items():
        assert sobol.independent(v, n)[:4].tolist() == x
    z = normal.inverse_normal(sobol.independent(v, 1000)[:4] / 2.0**30)
    np.testing.assert_allclose(z, [-0.77311703, -1.30070522, 0.04652648, -0.10545393], atol=5e-9)
    assert normal.inverse_normal(np.array([1536 / 2.0**30]))[0] == pytest.approx(-4.68055288, abs=5e-9)
    assert normal.inverse_normal(np.array([0.5]))[0] == 0.0


def test_every_split_of_1_to_4096_gives_the_same_integers(medium):
    """A range started anywhere by the independent formula and continued by the recurrence gives the
    sequence, for every split, iff every start of the recurrence equals the independent formula: check
    the latter for all n (numpy recurrence, and the compiled engine's blocks: a base point by the
    independent formula, lane offsets, and a leap to the next block's base)."""
    v = medium.directions
    n = np.arange(1, 4097)
    walked = sobol.points(v, 1, 4096)
    assert np.array_equal(walked, independent_all(v, n))
    for lanes in (16, 256):
        offsets, shift = sobol.lane_offsets(v, lanes), lanes.bit_length() - 1
        base = np.empty(v.shape[0], dtype=np.uint32)
        sobol.start(v, 0, base)
        for block in range(4096 // lanes):
            fresh = np.empty_like(base)
            sobol.start(v, block * lanes, fresh)  # where a task starts
            assert np.array_equal(fresh, base)
            column = sobol.leap_column(block, shift)
            leap = np.array([sobol.leap(v, d, shift, column) for d in range(v.shape[0])], dtype=np.uint32)
            x = base[:, None] ^ offsets
            x[:, -1] = base ^ leap
            assert np.array_equal(x.T, walked[block * lanes : (block + 1) * lanes])
            base = base ^ leap
    rng = np.random.default_rng(7)
    for first in rng.integers(1, 4000, 20):
        count = int(rng.integers(1, 4097 - first))
        assert np.array_equal(sobol.points(v, int(first), count), walked[first - 1 : first - 1 + count])


def test_joe_kuo_directions_agree_with_scipy_and_quantlib():
    import QuantLib as ql
    from scipy.stats import qmc

    v = sobol.joe_kuo(50, 30)
    ours = sobol.points(v, 1, 1024) / 2.0**30
    drawn = qmc.Sobol(50, scramble=False, bits=30).random_base2(11)[1:1025]
    assert np.array_equal(ours, drawn)
    v32 = sobol.joe_kuo(50, 32)
    ql_points = ql.SobolRsg(50, 0, ql.SobolRsg.JoeKuoD6)
    quantlib = np.array([list(ql_points.nextInt32Sequence()) for _ in range(1024)], dtype=np.uint64)
    assert np.array_equal(sobol.points(v32, 1, 1024).astype(np.uint64), quantlib)
    m = v32 >> (31 - np.arange(32)).astype(np.uint32)
    assert np.all(m % 2 == 1) and np.all(m < 2 ** (np.arange(32) + 1))


def test_direction_rule():
    assert sobol.direction_rule(3 << 28, 1, 30) is None
    assert "odd multiple" in sobol.direction_rule(2 << 28, 1, 30)
    assert "odd multiple" in sobol.direction_rule(1, 1, 30)
    assert "0 .. 2^30" in sobol.direction_rule(2**30, 29, 30)


def test_as241_against_scipy_ndtri():
    from scipy.special import ndtri

    reachable = np.concatenate(
        [np.linspace(2.0**-32, 1 - 2.0**-32, 400_001), np.logspace(-10, -1, 2000), 1 - np.logspace(-9, -1, 2000)]
    )
    assert np.max(np.abs(normal.inverse_normal(reachable) - ndtri(reachable))) < 1e-14
    far = np.logspace(-300, -12, 500)
    z = normal.inverse_normal(far)
    assert np.max(np.abs(z / ndtri(far) - 1)) < 1e-15
    sample = reachable[::997]
    assert np.array_equal([normal.ppnd16(u) for u in sample], normal.inverse_normal(sample))
    single = normal.inverse_normal(sample.astype(np.float32))
    assert single.dtype == np.float32
    assert np.max(np.abs(single - ndtri(sample.astype(np.float32).astype(np.float64)))) < 2e-5


def test_bridge_from_dates_reproduces_the_shipped_bridges(medium):
    for name in ("finpar_small.input.data", "finpar_medium.input.data"):
        job = validate(read_inputs(DATA / name))[0]  # the shipped bridge, read from the file
        built = bridge.from_dates(job.t)
        for column in ("index", "left", "right"):
            assert np.array_equal(getattr(built, column), getattr(job.bridge, column))
        for column in ("sd", "lw", "rw"):
            np.testing.assert_allclose(getattr(built, column), getattr(job.bridge, column), rtol=0, atol=1e-16)
    assert medium.bridge.index.tolist() == [5, 2, 1, 3, 4]


def test_bridge_increments_have_the_variance_of_the_dates():
    t = np.sort(np.random.default_rng(3).uniform(0.01, 3.0, 37))
    b = bridge.from_dates(t)
    z = np.random.default_rng(4).standard_normal((200_000, 37, 1))
    dw = bridge.increments(b, z)[..., 0]
    np.testing.assert_allclose(dw.var(axis=0) / np.diff(np.concatenate([[0], t])), 1, atol=0.02)
    assert np.abs(np.corrcoef(dw[:, :5].T) - np.eye(5)).max() < 0.01


def test_bridge_schedule_matches_the_whole_bridge():
    for t in (np.array([0.5]), np.arange(5) + 1.0, np.arange(367) / 365.0, np.arange(1, 1000) / 250.0):
        b = bridge.from_dates(t)
        plan = bridge.schedule(b)
        assert plan.slots <= np.ceil(np.log2(len(t) + 1)) + 2
        z = np.random.default_rng(len(t)).standard_normal((len(t), 2))
        registers, previous, out = np.zeros((plan.slots, 2)), np.zeros(2), []
        for i in range(len(t)):
            value = b.sd[i] * z[i] if i == 0 else b.rw[i] * registers[plan.right_slot[i]] + b.sd[i] * z[i]
            if i and plan.left_slot[i]:
                value = value + b.lw[i] * registers[plan.left_slot[i]]
            registers[plan.slot[i]] = value
            for e in range(plan.emit_start[i], plan.emit_start[i + 1]):
                out.append(registers[plan.emit_slots[e]] - previous)
                previous = registers[plan.emit_slots[e]].copy()
        assert np.array_equal(np.array(out), bridge.increments(b, z[None])[0])
