"""Rows that share a model share a tree's forward pass (distprice/lattice/groups.py): the groups, the node-steps
they save, the CPU engine bit for bit against pricing every row alone and against the reference engine, the
outer kernel's per-tree arithmetic built on the host (followers on their leader's alphas), the GPU launches'
layout of leaders and followers, and (``-m gpu``) the GPU engines shared against alone."""

from __future__ import annotations

import ctypes
import dataclasses
import re

import numpy as np
import pandas as pd
import pytest

from distprice.cuda import gpu_available, kernel_dir
from distprice.curves import builtin_curves, load_curves
from distprice.job import exercise_schedule, valuation_day
from distprice.lattice import cpu, datasets
from distprice.lattice.batch import pack
from distprice.lattice.cpu import price_cpu, run_cpu
from distprice.lattice.desk import AS_OF, MODELS, desk
from distprice.lattice.gpu import C_TYPES, LEADER_ARGS, kernel_arrays, layout_run
from distprice.lattice.groups import (
    batch_groups,
    instrument_groups,
    kept_states,
    row_shared_node_steps,
    shared_node_steps,
)
from distprice.lattice.instruments import prepare
from distprice.lattice.reference import price_reference
from distprice.lattice.sweeps import cut_steps

from utils import HULL_PUT, host_library, instruments_of, random_dated_bonds, random_portfolio, with_both_rights


def few_models(table: pd.DataFrame, models: int, seed: int = 0) -> pd.DataFrame:
    """``table`` with each row's mean reversion and volatility drawn from ``models`` pairs of its own rows'
    values (a book of a few models: R1-like widths, one tree model per pair)."""
    rng = np.random.default_rng(seed)
    pairs = rng.choice(len(table), models, replace=False)
    pick = pairs[rng.integers(0, models, len(table))]
    return table.assign(
        mean_reversion=table["mean_reversion"].to_numpy()[pick], volatility=table["volatility"].to_numpy()[pick]
    )


def desk_book(size: int, seed: int = 0):
    """Valid instruments of the ``desk`` book and its curves."""
    book = desk(size, seed)
    curves = load_curves(book.curves)
    prepared = prepare(
        book.portfolio,
        curves,
        as_of=valuation_day(AS_OF),
        exercise_schedule=exercise_schedule(book.exercise_schedule, book.portfolio),
    )
    assert not prepared.problems
    return prepared.instruments(), curves


@pytest.fixture(scope="module")
def desk_rows():
    return desk_book(500, seed=4)


@pytest.fixture(scope="module")
def mixed_rows():
    """Random rows of every kind on five models of a, sigma and steps a year, on two curves."""
    table = random_portfolio(np.random.default_rng(3), 160)
    models = table.iloc[:5][["mean_reversion", "volatility", "steps_per_year"]].to_numpy()
    pick = np.random.default_rng(4).integers(0, 5, len(table))
    table[["mean_reversion", "volatility", "steps_per_year"]] = models[pick]
    table["steps_per_year"] = table["steps_per_year"].astype(int)
    table["curve"] = np.where(np.arange(len(table)) % 3 == 0, "flat", "hull")
    curves = load_curves(pd.DataFrame(dict(curve=["flat"] * 2, t=[0.0, 30.0], zero_rate=[0.03, 0.035])))
    return instruments_of(table, curves), curves


@pytest.fixture(scope="module")
def short_rows():
    """Trees of four steps on wide grids (mean reversions of 1-3 %: jmax 25-75) on three models, exercised from
    today: their cuts lie at steps 0-3, far inside their grids."""
    table = datasets.generate("R1", 120, seed=5)
    rng = np.random.default_rng(6)
    table = few_models(table.assign(mean_reversion=rng.uniform(0.01, 0.03, len(table))), 3)
    table = table.assign(
        maturity=1.0, expiry=rng.integers(1, 5, len(table)) / 4.0, first_exercise=0.0, steps_per_year=4
    )
    return instruments_of(table), builtin_curves()


# ---- the groups ----


def test_the_desk_has_one_group_per_currency_and_phase_led_by_its_tallest_tree(desk_rows):
    """A currency's trees share their forward passes but for the phases their exercise dates give them: on 500
    rows, 41 forward passes serve 500 trees (on 10⁵ rows, 48: a pass saved 1.9987 times in 2)."""
    instruments, curves = desk_rows
    batch = pack(instruments, curves)
    groups = batch_groups(batch)
    currency = instruments.table["curve"].to_numpy()
    phase = batch.geometry.phase
    assert len(set(currency)) == len(MODELS) and len(set(phase)) == 16
    assert len(groups) == len(set(zip(currency, phase)))
    for g in range(len(groups)):
        members = np.flatnonzero(groups.group == g)
        assert len(set(currency[members])) == len(set(phase[members])) == 1 and groups.size[g] == len(members)
        assert groups.leader[g] == members[np.argmax(batch.geometry.height[members])]
    w, h = batch.geometry.width.astype(float), batch.geometry.height
    forward = sum(w[leader] * h[leader] for leader in groups.leader)
    assert shared_node_steps(w, h, groups.group) == (w * h).sum() + forward
    assert shared_node_steps(w, h) == 2 * (w * h).sum()
    assert 1.75 < shared_node_steps(w, h) / shared_node_steps(w, h, groups.group) < 2.0


def test_groups_key_on_what_the_forward_pass_reads():
    """a, sigma, steps a year and the curve each split a group; the option, the height and the coupons do not."""
    base = dict(HULL_PUT, steps_per_year=12)
    rows = [
        base,
        dict(base, maturity=5.0, expiry=2.0, coupon=0.04, coupon_frequency=2),
        dict(base, option_type="call", strike=70.0),
        dict(base, mean_reversion=0.11),
        dict(base, volatility=0.011),
        dict(base, steps_per_year=24),
        dict(base, curve="flat"),
    ]
    table = pd.DataFrame(rows).assign(id=range(len(rows)))
    curves = load_curves(pd.DataFrame(dict(curve=["flat"] * 2, t=[0.0, 30.0], zero_rate=[0.05, 0.05])))
    batch = pack(instruments_of(table, curves), curves)
    assert batch_groups(batch).group.tolist() == [0, 0, 0, 1, 2, 3, 4]


def test_dated_rows_group_by_the_valuation_date_their_curve_is_seen_from():
    """A curve with knots by date is seen from each row's valuation date: rows valued on two dates make two
    groups per model and phase. On the same curve given in years (its day count's years) they would share, and
    do. The groups before layout (:func:`instrument_groups`) are the batch's."""
    book = desk(90, seed=1)
    portfolio = book.portfolio.assign(valuation_date=np.where(np.arange(90) % 2, AS_OF, "2026-11-27"))
    days = (pd.to_datetime(book.curves["date"]) - pd.Timestamp(AS_OF)).dt.days
    in_years = book.curves.drop(columns="date").assign(
        t=days / np.where(book.curves["day_count"] == "ACT/360", 360, 365)
    )
    for table, by_date in ((book.curves, True), (in_years, False)):
        curves = load_curves(table)
        instruments = prepare(
            portfolio,
            curves,
            as_of=valuation_day(AS_OF),
            exercise_schedule=exercise_schedule(book.exercise_schedule, portfolio),
        ).instruments()
        groups = batch_groups(pack(instruments, curves))
        model, phase = instruments.table["curve"].to_numpy(), instruments.geometry.phase
        dated = set(zip(model, portfolio["valuation_date"], phase))
        shared = set(zip(model, phase))  # the rows of both dates together
        assert len(shared) < len(dated) and len(groups) == len(dated if by_date else shared)
        np.testing.assert_array_equal(instrument_groups(instruments, curves).group, groups.group)
        assert len(instrument_groups(instruments)) == len(dated)  # without the curves: split by date, as if by date


def test_a_chunks_node_steps_are_what_pricing_the_chunk_computes(mixed_rows):
    """The groups of the whole hold for any part of it: a chunk's rows share among themselves, each chunk
    with its own leaders."""
    instruments, curves = mixed_rows
    groups = batch_groups(pack(instruments, curves))
    g = instruments.geometry
    whole = shared_node_steps(g.width, g.height, groups.group)
    parts = np.array_split(np.random.default_rng(0).permutation(len(instruments)), 3)
    chunks = [shared_node_steps(g.width[p], g.height[p], groups.group[p]) for p in parts]
    assert whole < sum(chunks) < shared_node_steps(g.width, g.height)
    for part, expected in zip(parts, chunks):
        assert run_cpu(pack(instruments.take(part), curves)).node_steps == expected
    per_row = row_shared_node_steps(g.width, g.height, groups.group)
    leads = np.zeros(len(per_row), bool)
    leads[groups.leader] = True
    np.testing.assert_array_equal(per_row, np.where(leads, 2.0, 1.0) * g.width * g.height)


# ---- the CPU engine ----


@pytest.mark.parametrize("real", [np.float64, np.float32])
@pytest.mark.parametrize("book", ["desk_rows", "mixed_rows"])
def test_cpu_shared_equals_every_row_alone_bit_for_bit(book, real, request):
    instruments, curves = request.getfixturevalue(book)
    batch = pack(instruments, curves, real)
    shared, alone = run_cpu(batch), run_cpu(batch, share=False)
    np.testing.assert_array_equal(shared.bond, alone.bond)
    np.testing.assert_array_equal(shared.option, alone.option)
    g = batch.geometry
    assert alone.node_steps == shared_node_steps(g.width, g.height)
    assert shared.node_steps == shared_node_steps(g.width, g.height, batch_groups(batch).group) < 0.8 * alone.node_steps


def test_kept_state_rows_hold_the_nodes_their_step_reaches(short_rows):
    """A group keeps, per step m at which its trees' cuts lie, its nodes |j| <= min(m, jmax) alone: the rows'
    nodes fill the table between its two margins without overlap, and each tree finds its cut's row."""
    instruments, curves = short_rows
    batch = pack(instruments, curves)
    groups, g, cut = batch_groups(batch), batch.geometry, cut_steps(batch)
    jmax = g.jmax[groups.leader].astype(np.int64)
    assert (g.jmax > 6 * g.height).all() and set(cut) == {0, 1, 2, 3}
    kept = kept_states(groups.group, cut, jmax)
    save_group = np.repeat(np.arange(len(jmax)), np.diff(kept.offsets))
    reach = np.minimum(kept.steps, jmax[save_group])
    nodes = np.concatenate(
        [kept.rows[s] + jmax[k] + 1 + np.arange(-reach[s], reach[s] + 1) for s, k in enumerate(save_group)]
    )
    margin = jmax.max() + 1
    np.testing.assert_array_equal(nodes, np.arange(margin, margin + (2 * reach + 1).sum()))
    assert kept.size == 2 * margin + len(nodes)
    for r in np.flatnonzero(cut):
        at = kept.offsets[groups.group[r]] + np.searchsorted(
            kept.steps[kept.offsets[groups.group[r]] : kept.offsets[groups.group[r] + 1]], cut[r]
        )
        assert kept.steps[at] == cut[r] and kept.row_at[r] == kept.rows[at]


@pytest.mark.parametrize("real", [np.float64, np.float32])
def test_cpu_shared_short_trees_equal_every_row_alone_bit_for_bit(short_rows, real):
    instruments, curves = short_rows
    batch = pack(instruments, curves, real)
    shared, alone = run_cpu(batch), run_cpu(batch, share=False)
    np.testing.assert_array_equal(shared.bond, alone.bond)
    np.testing.assert_array_equal(shared.option, alone.option)
    assert len(batch_groups(batch)) == 3


def test_cpu_shared_matches_the_reference_engine(mixed_rows):
    instruments, curves = mixed_rows
    bond, option = price_cpu(pack(instruments, curves))
    ref_bond, ref_option = price_reference(instruments, curves)
    assert np.max(np.abs(bond - ref_bond) / np.abs(ref_bond)) < 1e-12
    assert np.max(np.abs(option - ref_option) / np.abs(ref_bond)) < 1e-12


def test_cpu_waves_of_small_tables_give_the_same_prices(mixed_rows, monkeypatch):
    """Groups whose forward passes do not fit one table are priced in waves: the same numbers."""
    instruments, curves = mixed_rows
    batch = pack(instruments, curves)
    whole = run_cpu(batch)
    monkeypatch.setattr(cpu, "TABLE_REALS", 50)
    waves = list(cpu._waves(batch_groups(batch), batch.geometry.height, cpu.TABLE_REALS))
    assert len(waves) > 3
    assert sorted(np.concatenate([rows for rows, *_ in waves])) == list(range(len(batch)))
    parts = run_cpu(batch)
    np.testing.assert_array_equal(parts.bond, whole.bond)
    np.testing.assert_array_equal(parts.option, whole.option)
    assert parts.node_steps == whole.node_steps


def test_rows_alone_in_their_groups_are_priced_as_before():
    table = datasets.generate("R1", 60, seed=2)
    instruments = instruments_of(table.assign(volatility=table["volatility"] + 1e-7 * np.arange(60)))
    batch = pack(instruments, builtin_curves())
    assert len(batch_groups(batch)) == len(batch)
    assert run_cpu(batch).node_steps == run_cpu(batch, share=False).node_steps
    np.testing.assert_array_equal(price_cpu(batch)[1], price_cpu(batch, share=False)[1])


# ---- the outer kernel's arithmetic, built on the host ----

SHIM = """
#define REAL {real}
#include <vector>
#include "outer.cuh"
// Each row's tree as an outer thread prices it (outer.cu), rows one after the other, nodes side by side:
// leaders (leader[r] == r) with their own forward pass, then followers on their leader's alphas. The events'
// amounts are adjusted as adjust.cu does.
extern "C" void price(int n, const int* jmax, const int* height, const double* dt, const double* dr,
                      const double* M, const int* phase, const double* root, const unsigned char* is_call,
                      const int* curve, const long long* curve_offsets,
                      const double* curve_t, const double* curve_z, const long long* event_offsets,
                      const int* event_step, const unsigned char* event_kind, const double* event_time,
                      const double* event_raw, const int* option_from, const long long* leader, double* bond,
                      double* option)
{{
    std::vector<real> amount(event_offsets[n] > 0 ? event_offsets[n] : 1);
    for (int r = 0; r < n; ++r) {{
        const int c = curve[r];
        const int knots = int(curve_offsets[c + 1] - curve_offsets[c]);
        for (long long e = event_offsets[r]; e < event_offsets[r + 1]; ++e)
            amount[e] = real(event_raw[e] * forward_adjustment(event_time[e], step_time(event_step[e], dt[r], phase[r]),
                                                               curve_t + curve_offsets[c], curve_z + curve_offsets[c],
                                                               knots));
    }}
    const Portfolio book{{jmax, height, dt, dr, M, phase, root, is_call, curve, curve_offsets, curve_t, curve_z,
                         event_offsets, event_step, event_kind, amount.data(), option_from}};
    std::vector<std::vector<real>> alphas(n);
    for (int pass = 0; pass < 2; ++pass) {{
        for (int r = 0; r < n; ++r) {{
            const bool leads = leader[r] == r;
            if (leads != (pass == 0)) continue;
            const Tree tree(book, r);
            std::vector<real> rows(2 * tree.width);
            if (leads) {{
                alphas[r].resize(tree.height);
                forward(tree, rows.data(), alphas[r].data(), 1);
            }}
            backward(book, tree, r, rows.data(), rows.data() + tree.width, 1, alphas[leader[r]].data(), 1, bond[r],
                     option[r]);
        }}
    }}
}}
"""
HOST_ARGS = (
    "jmax",
    "height",
    "dt",
    "dr",
    "M",
    "phase",
    "root",
    "is_call",
    "curve",
    "curve_offsets",
    "curve_t",
    "curve_z",
    "event_offsets",
    "event_step",
    "event_kind",
    "event_time",
    "event_raw",
    "option_from",
)


@pytest.fixture(scope="module", params=["double", "float"])
def outer_on_host(request, tmp_path_factory):
    library = host_library(SHIM.format(real=request.param), tmp_path_factory.mktemp("outer"), kernel_dir())

    def price(batch, leader):
        arrays = kernel_arrays(batch, HOST_ARGS)
        n = len(batch)
        bond, option = np.full(n, np.nan), np.full(n, np.nan)
        held = [np.ascontiguousarray(arrays[name]) for name in HOST_ARGS]
        held += [np.ascontiguousarray(leader, np.int64), bond, option]
        library.price(ctypes.c_int(n), *(array.ctypes.data_as(ctypes.c_void_p) for array in held))
        return bond, option

    return request.param, price


@pytest.mark.parametrize("book", ["desk_rows", "mixed_rows"])
def test_outer_followers_on_their_leaders_alphas_equal_their_own_bit_for_bit(outer_on_host, book, request):
    """The outer kernel's forward pass and backward pass (kernels/outer.cuh), built on the host: a follower
    priced on its leader's exp(-alpha dt) gets exactly the prices of its own forward pass, and both agree
    with the CPU engine."""
    real, price = outer_on_host
    instruments, curves = request.getfixturevalue(book)
    if book == "desk_rows":
        instruments = instruments.take(np.arange(0, len(instruments), 4))
    batch = pack(instruments, curves, np.float64 if real == "double" else np.float32)
    groups = batch_groups(batch)
    assert (groups.size > 1).any()
    shared = price(batch, groups.leader_of)
    alone = price(batch, np.arange(len(batch)))
    np.testing.assert_array_equal(shared[0], alone[0])
    np.testing.assert_array_equal(shared[1], alone[1])
    bond, option = price_cpu(batch)
    tolerance = 1e-13 if real == "double" else 1e-4
    assert np.max(np.abs(shared[0] - bond) / np.abs(bond)) < tolerance
    assert np.max(np.abs(shared[1] - option) / np.abs(bond)) < tolerance


def test_outer_kernel_prices_trees_never_cut_as_the_cpu_engine(outer_on_host):
    """A mean reversion near zero (the Ho-Lee limit): trees that fan out to their last step (jmax = height),
    in the outer kernel built on the host, as the CPU engine prices them; rows of one model but different
    heights are trees of different widths, each its own group."""
    real, price = outer_on_host
    rows = random_portfolio(np.random.default_rng(55), 24).assign(mean_reversion=1e-12)
    instruments = instruments_of(rows)
    assert (instruments.geometry.jmax == instruments.geometry.height).all()
    batch = pack(instruments, builtin_curves(), np.float64 if real == "double" else np.float32)
    bond, option = price(batch, batch_groups(batch).leader_of)
    cpu_bond, cpu_option = price_cpu(batch)
    tolerance = 1e-13 if real == "double" else 1e-4
    assert np.max(np.abs(bond - cpu_bond) / np.abs(cpu_bond)) < tolerance
    assert np.max(np.abs(option - cpu_option) / np.abs(cpu_bond)) < tolerance
    assert (cpu_option > 1e-3).sum() > 10


def test_outer_kernel_prices_bonds_with_calls_and_puts_as_the_cpu_engine(outer_on_host):
    """Dated bonds with both rights (a call or a put per date, both on some): the outer kernel built on the host
    (kernels/events.cuh bounds the holder's net rights) prices them as the CPU engine, on the rows' own trees
    and, bit for bit, on their leaders' alphas."""
    real, price = outer_on_host
    portfolio, schedule = random_dated_bonds(np.random.default_rng(57), 40, steps_per_year=24, years=(1, 4))
    portfolio, table = with_both_rights(portfolio, schedule, np.random.default_rng(58))
    curves = load_curves(pd.DataFrame(dict(curve="usd", t=[0.0, 30.0], zero_rate=[0.03, 0.045])))
    prepared = prepare(
        portfolio.assign(mean_reversion=0.05, volatility=0.01),
        curves,
        as_of=valuation_day("2025-12-15"),
        exercise_schedule=exercise_schedule(table, portfolio),
    )
    assert not prepared.problems, prepared.problems
    batch = pack(prepared.instruments(), curves, np.float64 if real == "double" else np.float32)
    shared = price(batch, batch_groups(batch).leader_of)
    alone = price(batch, np.arange(len(batch)))
    np.testing.assert_array_equal(shared[1], alone[1])
    bond, option = price_cpu(batch)
    tolerance = 1e-13 if real == "double" else 1e-4
    assert np.max(np.abs(shared[0] - bond) / np.abs(bond)) < tolerance
    assert np.max(np.abs(shared[1] - option) / np.abs(bond)) < tolerance
    assert (option > 0.05).sum() >= 2 and (option < -0.05).sum() >= 3  # puts worth more, calls worth more


# ---- the GPU launches, laid out on the host ----


def test_leader_arguments_are_declared_once_for_the_launcher_and_the_kernels():
    source = (kernel_dir() / "common.cuh").read_text()
    macro = source[
        source.index("#define LEADER_PARAMS") + len("#define LEADER_PARAMS") : source.index("#define LEADER_ARGS")
    ].replace("\\", " ")
    declared = []
    for parameter in macro.split(","):
        ctype, name = re.fullmatch(r"(?:const\s+)?([a-z ]+?)\s*\*?\s*in_(\w+)", parameter.strip()).groups()
        declared.append((name, " ".join(ctype.split())))
    assert declared == list(LEADER_ARGS)
    assert all(ctype in C_TYPES for _, ctype in LEADER_ARGS)
    for kernel in ("outer.cu", "flat.cu", "wide.cu"):
        assert "LEADER_PARAMS" in (kernel_dir() / kernel).read_text()


def kernel_alphas(launch, height):
    """What a launch of leaders leaves in its alphas, by the kernels' own layouts (outer.cu, flat.cu, wide.cu):
    tree t's step m holds 1000 t + m (t: the batch row)."""
    layout, rows = launch.layout, launch.rows
    alphas = np.full(max(layout.alpha_elements, 1), np.nan)
    if launch.kernel == "outer":
        for k, position in enumerate(layout.order):
            row = rows[position]
            m = np.arange(height[row])
            alphas[layout.alpha_base[k // layout.lanes] + m * layout.lanes + k % layout.lanes] = 1000 * row + m
    elif launch.kernel == "flat":
        for b in range(layout.bins):
            count = layout.bin_first[b + 1] - layout.bin_first[b]
            for k in range(count):
                row = rows[layout.order[layout.bin_first[b] + k]]
                m = np.arange(height[row])
                alphas[layout.alpha_base[b] + m * count + k] = 1000 * row + m
    else:
        for b, row in enumerate(rows):
            alphas[layout.alpha_base[b] + np.arange(height[row])] = 1000 * row + np.arange(height[row])
    return alphas


@pytest.mark.parametrize(
    "kernel,options",
    [("outer", {}), ("outer", dict(lanes=1, sort=False)), ("flat", {}), ("flat", dict(nodes=4, threads=1024))],
)
def test_every_follower_finds_its_leaders_alphas(mixed_rows, kernel, options):
    """Leaders first, every row in one launch; a follower's (leader_at, leader_stride) reads, in the alphas of
    its kernel's launch of leaders, its leader's values at each of its own steps. Trees too wide for a flat
    block, two models of them, take the wide kernel, leaders and followers alike."""
    instruments, curves = mixed_rows
    wide = dict(HULL_PUT, steps_per_year=12, maturity=2.0, expiry=1.5, volatility=0.004)
    extra = pd.DataFrame(
        [dict(wide, id=f"w{i}", mean_reversion=(0.001, 0.0011)[i % 2], maturity=2.0 - i / 12) for i in range(5)]
    )
    table = pd.concat([instruments.table.drop(columns="valuation"), extra], ignore_index=True)
    batch = pack(instruments_of(table, curves), curves)
    run = layout_run(batch, kernel, share=True, **options)
    height = batch.geometry.height
    launched = np.concatenate([launch.rows for launch in run.launches])
    assert sorted(launched) == list(range(len(batch)))
    followers = [launch.followers for launch in run.launches]
    assert followers == sorted(followers) and any(followers)
    if kernel == "flat":
        assert {launch.kernel for launch in run.launches if launch.followers} == {"flat", "wide"}
    groups = batch_groups(batch)
    alphas = {launch.kind: kernel_alphas(launch, height) for launch in run.launches if not launch.followers}
    for launch in run.launches:
        for row in launch.rows:
            m = np.arange(height[row])
            read = alphas[launch.kind][run.leader_at[row] + m * run.leader_stride[row]]
            np.testing.assert_array_equal(read, 1000 * groups.leader_of[row] + m)
        assert launch.followers == bool((groups.leader_of[launch.rows] != launch.rows).all())
    assert run.node_steps == run.detail["node_steps"] == shared_node_steps(batch.geometry.width, height, groups.group)
    alone = layout_run(batch, kernel, share=False, **options)
    assert [launch.followers for launch in alone.launches] == [False] * len(alone.launches)
    assert alone.node_steps == shared_node_steps(batch.geometry.width, height)
    default = layout_run(batch, kernel, **options)  # the flat engine shares unless told, the outer does not
    assert default.node_steps == (run if kernel == "flat" else alone).node_steps


def test_rows_alone_launch_as_before():
    """Without followers a run is one launch per kernel, of every row, with the layouts of pricing alone."""
    table = datasets.generate("R1", 300, seed=5)
    batch = pack(instruments_of(table.assign(volatility=table["volatility"] + 1e-7 * np.arange(300))), builtin_curves())
    assert len(batch_groups(batch)) == len(batch)
    for kernel in ("outer", "flat"):
        shared, alone = layout_run(batch, kernel), layout_run(batch, kernel, share=False)
        assert len(shared.launches) == len(alone.launches) == 1
        np.testing.assert_array_equal(shared.launches[0].layout.order, alone.launches[0].layout.order)
        assert shared.detail == alone.detail | {"leaders": len(batch)}


# ---- the GPU engines ----


def r1_few(size: int, models: int = 6):
    table = few_models(datasets.generate("R1", size, seed=9), models)
    return instruments_of(table), builtin_curves()


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")
@pytest.mark.parametrize("kernel", ["outer", "flat"])
@pytest.mark.parametrize("book", ["desk", "r1", "mixed"])
@pytest.mark.parametrize("real", [np.float64, np.float32])
def test_gpu_shared_equals_every_row_alone(kernel, book, real, mixed_rows):
    """Followers on their leaders' alphas against every row alone on the same kernel, bit for bit; both
    against the CPU engine as the other GPU tests hold them."""
    from distprice.lattice.gpu import price_gpu

    instruments, curves = {"desk": lambda: desk_book(3000), "r1": lambda: r1_few(3000), "mixed": lambda: mixed_rows}[
        book
    ]()
    batch = pack(instruments, curves, real)
    shared = price_gpu(batch, kernel, share=True, check_finite=real == np.float64)
    alone = price_gpu(batch, kernel, share=False, check_finite=real == np.float64)
    assert shared.detail["leaders"] < len(batch) / 10
    assert shared.detail["node_steps"] < 0.6 * alone.detail["node_steps"]
    # fp32 overflows on the longest trees (NaN), the same rows whatever their neighbours in a flat block
    np.testing.assert_array_equal(shared.bond, alone.bond)
    np.testing.assert_array_equal(shared.option, alone.option)
    if real == np.float64:
        bond, option = price_cpu(batch)
        assert np.max(np.abs(shared.bond - bond) / np.abs(bond)) <= 1e-12
        assert np.max(np.abs(shared.option - option) / np.abs(bond)) <= 1e-12


def test_inspect_counts_the_node_steps_shared_trees_compute(tmp_path):
    """``distprice inspect`` gives the node-steps every row alone would cost and those the engines compute with
    each group's one forward pass (R1 on 4 models: about half, and exactly the groups' count)."""
    import json

    from click.testing import CliRunner

    from distprice.cli import main

    table = few_models(datasets.generate("R1", 400, seed=4), 4)
    table.to_parquet(tmp_path / "few.parquet")
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "few.parquet"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{") :])
    instruments, curves = instruments_of(table), builtin_curves()
    groups = batch_groups(pack(instruments, curves))
    g = instruments.geometry
    assert report["shared"] == {"groups": len(groups), "node_steps": shared_node_steps(g.width, g.height, groups.group)}
    assert len(groups) < len(table) / 10
    assert 0.5 <= report["shared"]["node_steps"] / report["shape"]["node_steps"] < 0.6


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")
@pytest.mark.parametrize("kernel", ["outer", "flat"])
def test_a_follower_reading_alphas_no_leader_wrote_is_named_not_priced(kernel):
    """The leaders' alphas start as NaN: followers sent past what their leaders write (a bigger buffer, read
    from its unwritten tail) price NaN, and the run names them, where memory never written would give 0 or an
    old value."""
    from distprice.lattice.gpu import price_gpu

    instruments, curves = r1_few(500)
    batch = pack(instruments, curves)
    run = layout_run(batch, kernel, share=True)
    leading = next(launch for launch in run.launches if not launch.followers)
    written = leading.layout.alpha_elements
    tail = int(batch.geometry.height.max())
    grown = dataclasses.replace(leading, layout=dataclasses.replace(leading.layout, alpha_elements=written + tail))
    follows = ~batch_groups(batch).is_leader & np.isin(batch_groups(batch).leader_of, leading.rows)
    broken = dataclasses.replace(
        run,
        launches=tuple(grown if launch is leading else launch for launch in run.launches),
        leader_at=np.where(follows, written, run.leader_at),
        leader_stride=np.where(follows, 1, run.leader_stride).astype(run.leader_stride.dtype),
    )
    assert follows.sum() > 100
    with pytest.raises(RuntimeError, match=rf"left {follows.sum()} rows unpriced"):
        price_gpu(batch, kernel, layouts=broken)
    unchecked = price_gpu(batch, kernel, layouts=broken, check_finite=False)
    assert np.isnan(unchecked.bond[follows]).all() and np.isfinite(unchecked.bond[~follows]).all()
