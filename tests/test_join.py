"""Parquet files joined without decoding them: the same table, row group by row group, as pyarrow reads it."""

import errno
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distprice.join import decode, encode, footer, join_parquet, template
from distprice.tables import write_part


def _part(rng, n, first):
    return pd.DataFrame(
        {
            "id": [f"ins-{first + i}" for i in range(n)],
            "scenario": pd.Categorical.from_codes(rng.integers(0, 3, n), ["-10bp", "+0bp", "+10bp"]),
            "price": rng.normal(100, 5, n),
            "width": pd.array(rng.integers(3, 99, n), dtype="Int64"),
            "ok": rng.random(n) > 0.5,
            "error": pd.array([None if i % 7 else f"bad {i}" for i in range(n)], dtype="string"),
        }
    )


def test_joined_parts_read_back_as_their_concatenation(tmp_path):
    rng = np.random.default_rng(7)
    sizes = [70_000, 5, 140_001, 1]  # several row groups, and parts of one row
    frames, first = [], 0
    for k, n in enumerate(sizes):
        frames.append(_part(rng, n, first))
        first += n
        write_part(frames[-1], tmp_path, k)
    parts = sorted(tmp_path.glob("part-*.parquet"))
    rows = join_parquet(parts, tmp_path / "joined.parquet")
    assert rows == sum(sizes)
    joined = pq.ParquetFile(tmp_path / "joined.parquet")
    assert joined.metadata.num_row_groups == sum(pq.ParquetFile(p).metadata.num_row_groups for p in parts)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "joined.parquet"), pd.concat(frames, ignore_index=True))
    # each row group still reads alone, at its moved offsets
    group = joined.read_row_group(joined.metadata.num_row_groups - 1).to_pandas()
    pd.testing.assert_frame_equal(group, frames[-1].reset_index(drop=True))
    # the parts' templates, made where the parts were written, join into the same bytes
    join_parquet([template(p) for p in parts], tmp_path / "templated.parquet")
    assert (tmp_path / "templated.parquet").read_bytes() == (tmp_path / "joined.parquet").read_bytes()


def test_the_footer_codec_gives_back_its_bytes(tmp_path):
    write_part(_part(np.random.default_rng(1), 1000, 0), tmp_path, 0)
    path = tmp_path / "part-000000.parquet"
    data = path.read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    raw = data[-8 - length : -8]
    assert encode(decode(raw)) == raw


def test_parts_of_another_schema_or_not_parquet_are_refused(tmp_path):
    write_part(_part(np.random.default_rng(1), 10, 0), tmp_path, 0)
    write_part(_part(np.random.default_rng(1), 10, 10).drop(columns="ok"), tmp_path, 1)
    with pytest.raises(ValueError, match="schema differs"):
        join_parquet(sorted(tmp_path.glob("part-*.parquet")), tmp_path / "joined.parquet")
    (tmp_path / "text.parquet").write_text("not parquet at all")
    with pytest.raises(ValueError, match="not a Parquet file"):
        footer(tmp_path / "text.parquet")
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "indexed.parquet", write_page_index=True)
    with pytest.raises(ValueError, match="page indexes"):
        footer(tmp_path / "indexed.parquet")


def test_parts_joined_with_remove_are_all_gone_when_the_join_returns(tmp_path):
    rng = np.random.default_rng(3)
    frames = [_part(rng, n, 100 * k) for k, n in enumerate([40, 1, 77])]
    for k, frame in enumerate(frames):
        write_part(frame, tmp_path, k)
    parts = [template(p) for p in sorted(tmp_path.glob("part-*.parquet"))]
    assert join_parquet(parts, tmp_path / "joined.parquet", remove=True) == 118
    assert sorted(p.name for p in tmp_path.iterdir()) == ["joined.parquet"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "joined.parquet"), pd.concat(frames, ignore_index=True))


@pytest.mark.parametrize("kernel", ["refuses", "absent"])
def test_parts_are_copied_through_memory_where_the_kernel_cannot_copy(tmp_path, monkeypatch, kernel):
    rng = np.random.default_rng(5)
    frames = [_part(rng, n, 1000 * k) for k, n in enumerate([70_000, 3, 900])]
    for k, frame in enumerate(frames):
        write_part(frame, tmp_path, k)
    parts = sorted(tmp_path.glob("part-*.parquet"))
    join_parquet(parts, tmp_path / "kernel.parquet")

    def unsupported(*args):
        raise OSError("copy_file_range: not supported here")

    if kernel == "absent":  # not Linux
        monkeypatch.delattr("os.copy_file_range")
    else:
        monkeypatch.setattr("os.copy_file_range", unsupported)
    join_parquet(parts, tmp_path / "memory.parquet")
    assert (tmp_path / "memory.parquet").read_bytes() == (tmp_path / "kernel.parquet").read_bytes()
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "memory.parquet"), pd.concat(frames, ignore_index=True))


def test_a_copy_that_fails_stops_the_join_at_the_next_part(tmp_path, monkeypatch):
    """A full disk found by one part's copy ends the join when the next part comes, not after the last."""
    for k in range(5):
        write_part(_part(np.random.default_rng(k), 10, 10 * k), tmp_path, k)

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("distprice.join._copy", full)
    handed = []

    def parts():
        for path in sorted(tmp_path.glob("part-*.parquet")):
            handed.append(path)
            yield path
            time.sleep(0.2)  # the failed copy has ended before the next part comes

    with pytest.raises(OSError, match="No space left"):
        join_parquet(parts(), tmp_path / "joined.parquet", remove=True)
    assert len(handed) == 2
