"""Writing tables: rows in order across pieces, and atomic (no file, no leftover on failure); folders of
Parquet parts."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from distprice.errors import InvalidInputError, OptionError
from distprice.tables import check_output, read_portfolio, read_table, scratch_folder, write_tables


def pieces(count, rows=1000, fail_at=None):
    for k in range(count):
        if k == fail_at:
            raise RuntimeError("the job failed")
        yield pd.DataFrame(
            {
                "id": np.arange(k * rows, (k + 1) * rows),
                "price": np.random.default_rng(k).random(rows),
                "engine": pd.array(["gpu-flat"] * rows, dtype="string"),
            }
        )


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


def test_a_folder_holds_the_table_as_parts_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr("distprice.tables.PART_ROWS", 700)
    folder = tmp_path / "priced"
    assert write_tables(pieces(5), f"{folder}/") == 5000
    names = sorted(p.name for p in folder.iterdir())
    assert names == [f"part-{i:06d}.parquet" for i in range(10)]  # 700 + 300 rows of each piece
    expected = pd.concat(list(pieces(5)), ignore_index=True)
    pd.testing.assert_frame_equal(read_table(f"{folder}/"), expected, check_dtype=False)
    assert read_table(folder)["id"].tolist() == list(range(5000))  # an existing folder needs no slash
    # a folder of parts is replaced whole; the folder keeps no part of the older table
    assert write_tables(pieces(1), folder) == 1000
    assert sorted(p.name for p in folder.iterdir()) == ["part-000000.parquet", "part-000001.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["priced"]


def test_a_folder_is_atomic_and_replaces_only_parts(tmp_path):
    folder = tmp_path / "priced"
    with pytest.raises(RuntimeError, match="the job failed"):
        write_tables(pieces(5, fail_at=3), f"{folder}/")
    assert list(tmp_path.iterdir()) == []
    write_tables(pieces(2), f"{folder}/")
    with pytest.raises(RuntimeError, match="the job failed"):
        write_tables(pieces(5, fail_at=3), folder)
    assert read_table(folder)["id"].tolist() == list(range(2000))  # the older table, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["priced"]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    with pytest.raises(OptionError, match="holds files that are not parts of a table .todo.txt."):
        write_tables(pieces(1), tmp_path / "notes")
    assert (tmp_path / "notes" / "todo.txt").read_text() == "keep me"
    with pytest.raises(ValueError, match="no table to write"):
        write_tables(iter([]), f"{tmp_path / 'none'}/")
    empty = next(pieces(1)).head(0)
    assert write_tables([empty], f"{tmp_path / 'empty'}/") == 0
    assert list(read_table(tmp_path / "empty").columns) == ["id", "price", "engine"]
    with pytest.raises(InvalidInputError, match="holds no part"):
        read_table(tmp_path / "notes")


def test_parquet_encodes_repeated_columns_by_dictionary_and_leaves_distinct_numbers_plain(tmp_path):
    """Columns of few values (labels, terms, a Categorical) are dictionary-encoded and compressed; mostly distinct
    numbers (prices) are stored plain, uncompressed; columns of nulls alone or of lists are written as they
    are. Every value reads back."""
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    n = 10_000
    table = pd.DataFrame(
        {
            "id": pd.array([f"B{i}" for i in range(n)], dtype="string"),
            "curve": pd.array(rng.choice(["USD", "EUR"], n), dtype="string"),
            "kind": pd.Categorical(rng.choice(["call", "put"], n)),
            "coupon": rng.choice([0.02, 0.035, 0.05], n),
            "price": rng.normal(100, 5, n),
            "note": [None] * n,
            "knots": [[1.0, 2.0]] * n,
        }
    )
    path = tmp_path / "priced.parquet"
    write_tables([table], path)
    meta = pq.ParquetFile(path).metadata.row_group(0)
    chunk = {meta.column(i).path_in_schema.split(".")[0]: meta.column(i) for i in range(meta.num_columns)}
    for name in ("curve", "kind", "coupon"):
        assert chunk[name].has_dictionary_page and chunk[name].compression == "SNAPPY", name
    assert not chunk["price"].has_dictionary_page and chunk["price"].compression == "UNCOMPRESSED"
    assert not chunk["id"].has_dictionary_page and chunk["id"].compression == "SNAPPY"
    back = read_table(path)
    pd.testing.assert_frame_equal(back.drop(columns="knots"), table.drop(columns="knots"), check_dtype=False)
    assert [list(k) for k in back["knots"]] == [[1.0, 2.0]] * n


@pytest.mark.parametrize("suffix", [".csv", ".parquet", "/"])
def test_a_portfolio_reads_its_label_columns_as_categories(tmp_path, suffix):
    """read_portfolio: the label columns (text) are categories from CSV, Parquet and a folder alike, missing
    cells missing; ids and other text columns stay text, numbers numbers, and a label column of numbers is
    left as it is."""
    book = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "instrument": ["bond_option", "bond", None, "bond"],
            "curve": ["usd", "eur", "usd", "usd"],
            "desk": ["x", "y", "x", "x"],
            "strike": [63.0, np.nan, 70.0, 1.0],
            "exercise": [1, 2, 1, 1],
        }
    )
    path = f"{tmp_path / 'book'}{suffix}"
    write_tables([book.iloc[:2], book.iloc[2:]], path)
    read = read_portfolio(path)
    for column in ("instrument", "curve"):
        assert isinstance(read[column].dtype, pd.CategoricalDtype), column
        assert read[column].isna().tolist() == book[column].isna().tolist()
        assert read[column].dropna().tolist() == book[column].dropna().tolist()
    assert not isinstance(read["id"].dtype, pd.CategoricalDtype) and read["id"].tolist() == book["id"].tolist()
    assert not isinstance(read["desk"].dtype, pd.CategoricalDtype)
    if suffix == ".csv":  # a CSV cell of a label column is text, whatever it looks like
        assert read["exercise"].astype(str).tolist() == ["1", "2", "1", "1"]
    else:
        assert read["exercise"].tolist() == [1, 2, 1, 1]
    np.testing.assert_array_equal(read["strike"], book["strike"])


@pytest.mark.parametrize("suffix", [".csv", ".parquet", "/"])
def test_a_table_read_keeps_its_text_in_arrow(tmp_path, suffix):
    """read_table's text columns are pandas 3's ``str`` (Arrow-backed, missing as NaN) on pandas 2 as on pandas 3:
    no Python string per cell; missing cells missing, labels still categories."""
    table = pd.DataFrame(
        {
            "id": ["a", None, "c"],
            "date": ["2030-01-01", "2030-02-01", None],
            "price": [100.0, 101.0, 99.5],
            "price_type": ["clean", "dirty", None],
        }
    )
    path = f"{tmp_path / 'schedule'}{suffix}"
    write_tables([table], path)
    read = read_table(path, labels=("price_type",))
    for column in ("id", "date"):
        assert read[column].dtype == pd.StringDtype("pyarrow", na_value=np.nan), column
        assert read[column].isna().tolist() == table[column].isna().tolist()
        assert read[column].dropna().tolist() == table[column].dropna().tolist()
    assert isinstance(read["price_type"].dtype, pd.CategoricalDtype)
    np.testing.assert_array_equal(read["price"], table["price"])


@pytest.mark.parametrize("suffix", [".parquet", "/", ".csv"])
def test_tables_of_different_categories_write_as_one(tmp_path, suffix):
    """Slices of a portfolio read one by one hold different categories, and pandas codes 127 or fewer of them
    in int8, more in int16: written one after the other, they make one table of every value."""
    few = pd.DataFrame({"curve": pd.Categorical(["usd", "eur", "usd"]), "price": [1.0, 2.0, 3.0]})
    many = pd.DataFrame({"curve": pd.Categorical([f"c{i}" for i in range(200)]), "price": np.arange(200.0)})
    text = pd.DataFrame({"curve": pd.array(["gbp", "jpy"], dtype="string"), "price": [4.0, 5.0]})
    path = f"{tmp_path / 'priced'}{suffix}"
    write_tables([few, many, text, few], path)
    read = read_table(path)
    expected = pd.concat([t.astype({"curve": object}) for t in (few, many, text, few)], ignore_index=True)
    assert read["curve"].astype(object).tolist() == expected["curve"].tolist()
    np.testing.assert_array_equal(read["price"], expected["price"])


@pytest.mark.parametrize("given", [None, "mimalloc"])
def test_importing_distprice_puts_arrow_on_the_c_heap_unless_told(given):
    """Arrow's pool is the C library's heap (numpy's) in a process that imports distprice before pyarrow, unless
    ARROW_DEFAULT_MEMORY_POOL names another."""
    import pyarrow as pa

    if given is not None and given not in pa.supported_memory_backends():
        pytest.skip(f"this pyarrow has no {given} pool")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if given is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = given
    code = "import distprice, pyarrow; print(pyarrow.default_memory_pool().backend_name)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == (given or "system")


def test_an_output_may_not_be_one_of_the_jobs_inputs(tmp_path):
    """What Pricer.run and distprice run check first: the priced table must not replace an input."""
    (tmp_path / "book.csv").write_text("id\n1\n")
    (tmp_path / "parts").mkdir()
    with pytest.raises(OptionError, match=r"is the job's input \(portfolio\)"):
        check_output(tmp_path / "." / "book.csv", inputs={"portfolio": str(tmp_path / "book.csv")})
    with pytest.raises(OptionError, match=r"is the job's input \(curves\)"):
        check_output(f"{tmp_path}/parts/", inputs={"portfolio": None, "curves": tmp_path / "parts"})
    check_output(tmp_path / "priced.csv", inputs={"portfolio": str(tmp_path / "book.csv"), "models": object()})


def test_a_row_that_breaks_the_csv_form_is_named_and_shown_escaped(tmp_path):
    """The bad row's text is quoted with its control characters written out: a terminal shows an escape code or
    a bidirectional override, it does not obey it."""
    from click.testing import CliRunner

    from distprice.cli import main

    path = tmp_path / "book.csv"
    path.write_text("id,strike,expiry\na,63,3\n\nb,\x1b[31m64\u202e,3,9\n", encoding="utf-8")
    with pytest.raises(InvalidInputError) as caught:
        read_table(path)
    said = str(caught.value)
    assert (
        f"{path}: cannot be read as csv: row 2: 4 field(s) where the header has 3: 'b,\\x1b[31m64\\u202e,3,9'" in said
    )
    assert "\x1b" not in said and "\u202e" not in said
    result = CliRunner().invoke(main, ["run", "--portfolio", str(path), "--output", str(tmp_path / "o.csv")])
    assert result.exit_code == 2 and "row 2: 4 field(s)" in result.output and "\\x1b[31m64\\u202e" in result.output


def test_a_scratch_folder_is_removed_whether_left_empty_or_not(tmp_path):
    output = tmp_path / "priced.parquet"
    with scratch_folder(output) as folder:
        assert folder.is_dir() and folder.parent == tmp_path and folder.name.endswith(".parts.tmp")
    assert not folder.exists()
    with scratch_folder(output) as folder:
        (folder / "part.0.parquet").write_bytes(b"left")
    assert not folder.exists()
    with pytest.raises(KeyError), scratch_folder(output) as folder:
        (folder / "part.0.parquet").write_bytes(b"left")
        raise KeyError("a failed job")
    assert list(tmp_path.iterdir()) == []
