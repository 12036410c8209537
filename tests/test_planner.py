"""The planner: sort order, chunk counts, cost-balanced cuts, scenario blocks and file slices."""

import numpy as np
import pytest

from distprice.planner import (
    MAX_CHUNK_PRICES,
    MAX_CHUNK_ROWS,
    MIN_CHUNK_ROWS,
    TASK_SECONDS,
    chunk_count,
    cut_by_cost,
    spans,
    table_slices,
    task_count,
    work_grid,
)


@pytest.mark.parametrize(
    "rows, workers, per_worker, expected",
    [
        (1_000_000, 4, 4, 16),  # as asked
        (10_000, 4, 4, 5),  # no chunk under MIN_CHUNK_ROWS
        (1_000, 8, 4, 1),
        (2_000_000, 1, 2, 8),  # no chunk over MAX_CHUNK_ROWS
        (0, 2, 4, 1),
    ],
)
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


def test_spans_cover_every_row_in_order_and_each_holds_work():
    rng = np.random.default_rng(5)
    cost = rng.integers(10, 2000, 5000).astype(float)
    cost[:40] = 0  # rows not priced (invalid) at the start, in the middle and at the end
    cost[2000:2100] = 0
    cost[-30:] = 0
    cost[41] = 1e9  # one row holding most of the work
    runs = spans(cost, 6)
    assert runs[0].start == 0 and runs[-1].stop == len(cost)
    assert all(a.stop == b.start for a, b in zip(runs, runs[1:]))
    assert all(cost[r].sum() > 0 for r in runs)
    assert spans(np.zeros(7), 3) == [slice(0, 7)]


@pytest.mark.parametrize(
    "seconds, workers, per_worker, tasks",
    [
        (0.0, 8, 2, 1),  # nothing to price: one task
        (TASK_SECONDS * 0.9, 8, 2, 1),  # a small job takes one worker
        (TASK_SECONDS * 3.5, 8, 2, 3),
        (100.0, 8, 2, 16),  # a big one every worker, chunks_per_worker each
    ],
)
def test_task_count_makes_no_task_of_less_than_task_seconds(seconds, workers, per_worker, tasks):
    assert task_count(seconds, workers, per_worker) == tasks


@pytest.mark.parametrize(
    "rows, scenarios, tasks, by_scenario, row_chunks, blocks",
    [
        (100_000, 1, 16, False, 16, [range(0, 1)]),  # no scenarios: chunks of rows only
        (100_000, 50, 4, False, 4, [range(0, 50)]),  # each chunk under every scenario
        (1_000_000, 16, 4, False, 8, [range(0, 16)]),  # no chunk of more than MAX_CHUNK_PRICES prices
        (100_000, 50, 4, True, 1, [range(0, 12), range(12, 25), range(25, 38), range(38, 50)]),
        (100_000, 5, 16, True, 4, [range(i, i + 1) for i in range(5)]),
        (1_000_000, 50, 8, True, 4, None),  # rows still bound chunks to MAX_CHUNK_ROWS
        (3, 16, 8, False, 1, [range(0, 16)]),
    ],
)
def test_work_grid(rows, scenarios, tasks, by_scenario, row_chunks, blocks):
    chunks, got = work_grid(rows, scenarios, tasks, by_scenario)
    assert chunks == row_chunks
    if blocks is not None:
        assert got == blocks
    assert [s for block in got for s in block] == list(range(scenarios))
    if not by_scenario and chunks > 1:
        assert rows * scenarios / chunks <= MAX_CHUNK_PRICES


def slice_rows(files, slices) -> list[np.ndarray]:
    """Each slice's rows as positions in the whole table, from its file's row groups."""
    out, first, total = [], {}, 0
    for path, groups in files:
        first[path], total = total, total + sum(groups)
    for s in slices:
        groups = dict(files)[s.path]
        base = first[s.path] + sum(groups[: s.groups.start])
        assert 0 <= s.start < s.stop <= sum(groups[s.groups.start : s.groups.stop])
        assert s.groups.stop == s.groups.start + 1 or s.start < groups[s.groups.start]  # no group read for nothing
        assert s.stop > sum(groups[s.groups.start : s.groups.stop - 1])
        out.append(np.arange(base + s.start, base + s.stop))
    return out


@pytest.mark.parametrize(
    "files, chunks, count",
    [
        ([("part-000000.parquet", [65_536, 65_536, 10_000]), ("part-000001.parquet", [30_000])], 7, 7),
        ([("book.parquet", [65_536, 34_464] * 10)], 16, 16),  # copies of 100 000 rows written one after the other
        ([("book.parquet", [1_000] * 1_000)], 16, 16),  # many small row groups: one task per slice, not per group
        ([("book.parquet", [0, 70_000, 0, 0, 30_000, 0])], 4, 4),
        ([("a.parquet", [10]), ("b.parquet", [0]), ("c.parquet", [5])], 8, 8),
    ],
)
def test_table_slices_are_equal_and_cover_every_row_once_in_order(files, chunks, count):
    """Slices of about equal rows, whatever the row groups (a slice spans groups or shares one), none across
    files, numbering the rows of the whole table in order."""
    slices = table_slices(files, chunks)
    rows = slice_rows(files, slices)
    total = sum(sum(g) for _, g in files)
    assert np.array_equal(np.concatenate(rows), np.arange(total))
    assert [s.first_row for s in slices] == [r[0] for r in rows]
    assert len(slices) == count
    sizes = [s.rows for s in slices]
    by_file = {}
    for s in slices:
        by_file.setdefault(s.path, []).append(s.rows)
    assert all(max(v) - min(v) <= 1 for v in by_file.values())
    if len(files) == 1:
        assert max(sizes) <= -(-total // chunks)


@pytest.mark.parametrize(
    "files, chunks, opening, sizes",
    [
        ([("book.parquet", [65_536, 34_464] * 10)], 16, 8, [31_250] * 8 + [93_750] * 8),
        ([("book.parquet", [65_536, 34_464] * 10)], 8, 8, [125_000] * 8),  # every slice opens: equal
        ([("book.parquet", [65_536, 34_464] * 10)], 4, 1, [125_000] + [291_667, 291_666, 291_667]),
        ([("a.parquet", [400]), ("b.parquet", [400])], 4, 3, [200, 200, 100, 300]),  # a's slices all open: equal
    ],
)
def test_opening_slices_hold_half_a_slice(files, chunks, opening, sizes):
    """The first ``opening`` slices hold half a slice's rows, the others of their file share the rest; every row
    is still read once, in order."""
    slices = table_slices(files, chunks, opening)
    assert [s.rows for s in slices] == sizes
    total = sum(sum(g) for _, g in files)
    assert np.array_equal(np.concatenate(slice_rows(files, slices)), np.arange(total))


def test_auto_gives_a_row_the_same_engine_however_many_workers_share_its_job(tmp_path):
    """On an H200's model, a 30 000-row S1 book is worth the GPU as a whole, but its chunks for many workers
    are each cheaper on the CPU: ``auto`` plans the whole job once and prices every chunk so. A big file,
    whose trees only the workers read, takes the GPU's flat engine in every slice."""
    from distprice.families import Workers, lattice
    from distprice.inspector import plan
    from distprice.job import JobOptions
    from distprice.lattice import datasets
    from distprice.tuning import shipped_default

    model = shipped_default("NVIDIA H200", "fp64")
    book = datasets.generate("S1", 30_000, seed=2)
    options = JobOptions.of(engine="auto").checked()
    read = lattice.read(book, options)
    engines, cuts, alone = [], set(), set()
    for count in (2, 6, 12):
        work = lattice.split(read, Workers(count, 2, True, model.to_json(), gpu_processes=6, task_seconds=0))
        outline = work.outline
        cuts.add(len(outline.chunks))
        engines.append(np.asarray(outline.plan.engine_of_rows(len(book)).astype(str)))
        width, height = read.job.instruments().geometry.width, read.job.instruments().geometry.height
        alone.update(plan(width[c], height[c], model, True, 6).chosen for c in outline.chunks)
    assert len(cuts) == 3 and alone == {"cpu", "gpu-flat"}  # what planning each chunk on its own would choose
    assert all(np.array_equal(e, engines[0]) for e in engines) and set(engines[0]) == {"gpu-flat"}

    path = tmp_path / "s1.parquet"
    book.to_parquet(path)
    big = lattice.read(str(path), options, read_on_workers_rows=1)
    first = next(lattice.split(big, Workers(12, 2, True, model.to_json(), gpu_processes=6)))
    slices = [chunk.args[0] for chunk in first.chunks]  # each inspect-chunk task takes its read-chunk task
    assert len(slices) > 1 and {chunk.args[-1] for chunk in slices} == {"gpu-flat"}
    assert {p.engine for p in slices[1].run(*slices[1].args).parts} == {"gpu-flat"}
