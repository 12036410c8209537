"""The planner: sort order, chunk counts, cost-balanced cuts, scenario blocks and file slices."""
import numpy as np
import pytest

from distprice.planner import (MAX_CHUNK_ROWS, MIN_CHUNK_ROWS, chunk_count, cut_by_cost, partition,
                               sort_order, table_slices, work_grid)


def test_sort_order_is_tallest_then_widest_first():
    width = np.array([5, 9, 7, 9])
    height = np.array([10, 10, 30, 10])
    assert sort_order(width, height).tolist() == [2, 1, 3, 0]


@pytest.mark.parametrize("rows, workers, per_worker, expected", [
    (1_000_000, 4, 4, 16),          # as asked
    (10_000, 4, 4, 5),              # no chunk under MIN_CHUNK_ROWS
    (1_000, 8, 4, 1),
    (2_000_000, 1, 2, 8),           # no chunk over MAX_CHUNK_ROWS
    (0, 2, 4, 1),
])
def test_chunk_count_keeps_chunks_within_the_row_bounds(rows, workers, per_worker, expected):
    chunks = chunk_count(rows, workers, per_worker)
    assert chunks == expected
    if rows:
        assert rows / chunks <= MAX_CHUNK_ROWS
        assert chunks == 1 or rows / chunks >= MIN_CHUNK_ROWS


def test_cut_by_cost_balances_sums_and_covers_every_position_once():
    cost = np.random.default_rng(3).pareto(1.5, 10_000) + 1
    pieces = cut_by_cost(cost, 8)
    assert len(pieces) == 8
    assert pieces[0].start == 0 and pieces[-1].stop == len(cost)
    assert all(a.stop == b.start for a, b in zip(pieces, pieces[1:]))
    sums = np.array([cost[p].sum() for p in pieces])
    assert sums.max() - sums.min() <= 2 * cost.max()


def test_partition_is_a_permutation_of_sorted_chunks():
    rng = np.random.default_rng(5)
    width, height = rng.integers(3, 200, 5000), rng.integers(10, 2000, 5000)
    chunks = partition(width, height, 6)
    assert np.array_equal(np.sort(np.concatenate(chunks)), np.arange(5000))
    assert np.array_equal(np.concatenate(chunks), sort_order(width, height))


@pytest.mark.parametrize("rows, scenarios, workers, per_worker, row_chunks, blocks", [
    (100_000, 1, 4, 4, 16, [range(0, 1)]),                   # no scenarios: chunks of rows only
    (100_000, 50, 1, 4, 1, [range(0, 12), range(12, 25), range(25, 38), range(38, 50)]),
    (100_000, 5, 4, 4, 4, [range(i, i + 1) for i in range(5)]),
    (1_000_000, 50, 2, 4, 4, None),                          # rows still bound chunks to MAX_CHUNK_ROWS
])
def test_work_grid_cuts_scenarios_into_blocks_first(rows, scenarios, workers, per_worker, row_chunks, blocks):
    chunks, got = work_grid(rows, scenarios, workers, per_worker)
    assert chunks == row_chunks
    if blocks is not None:
        assert got == blocks
    assert [s for block in got for s in block] == list(range(scenarios))


def test_table_slices_stay_inside_row_groups_and_number_rows_across_files():
    files = [("part-000000.parquet", [65_536, 65_536, 10_000]), ("part-000001.parquet", [30_000])]
    slices = table_slices(files, 7)
    assert sum(s.rows for s in slices) == 65_536 * 2 + 10_000 + 30_000
    assert [s.first_row for s in slices] == np.cumsum([0] + [s.rows for s in slices[:-1]]).tolist()
    groups = dict(files)
    for s in slices:
        assert 0 <= s.start < s.stop <= groups[s.path][s.row_group]
    assert slices[-1].path == "part-000001.parquet" and slices[-1].first_row + slices[-1].rows == 171_072