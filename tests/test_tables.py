"""Writing tables: rows in order across pieces, and atomic (no file, no leftover on failure)."""
import numpy as np
import pandas as pd
import pytest

from distprice.tables import read_table, write_tables


def pieces(count, rows=1000, fail_at=None):
    for k in range(count):
        if k == fail_at:
            raise RuntimeError("the job failed")
        yield pd.DataFrame({"id": np.arange(k * rows, (k + 1) * rows), "price": np.random.default_rng(k).random(rows),
                            "engine": pd.array(["gpu-flat"] * rows, dtype="string")})


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_pieces_are_written_in_order_as_one_table(tmp_path, suffix):
    path = tmp_path / f"priced{suffix}"
    assert write_tables(pieces(5), path) == 5000
    written = read_table(path)
    expected = pd.concat(list(pieces(5)), ignore_index=True)
    ids = expected["id"] if suffix == ".parquet" else expected["id"].astype(str)  # CSV ids are text as written
    assert written["id"].tolist() == ids.tolist()
    np.testing.assert_array_equal(written["price"], expected["price"])
    assert list(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_a_failure_mid_way_leaves_no_file(tmp_path, suffix):
    path = tmp_path / f"priced{suffix}"
    with pytest.raises(RuntimeError, match="the job failed"):
        write_tables(pieces(5, fail_at=3), path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="no table to write"):
        write_tables(iter([]), path)
    assert list(tmp_path.iterdir()) == []
