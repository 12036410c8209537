"""An output that cannot be written (a full disk, no permission) is an OutputError naming it and the cause: exit
status 7, no traceback, nothing half-written under its name and an earlier output kept; temporaries that a
killed writer left beside an output are removed by the next write of it, and only those."""

import errno
import os
import socket
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import distprice.join
from distprice import api
from distprice.cli import main
from distprice.errors import OutputError
from distprice.tables import (
    HOST,
    check_output,
    read_table,
    remove_stale,
    write_joined,
    write_part,
    write_table,
    write_tables,
)

from utils import HULL_PUT

NO_SPACE = "No space left on device"


def pieces(count, rows=1000):
    return [
        pd.DataFrame({"id": np.arange(k * rows, (k + 1) * rows), "price": np.arange(rows) / 7}) for k in range(count)
    ]


def full_after(monkeypatch, owner, name, calls):
    """``owner.name`` does its work ``calls`` times, then writes nothing more: ENOSPC (after writing a few bytes
    to a file it was given, if any: the disk fills mid-write)."""
    original = getattr(owner, name)
    done = []

    def writing(*args, **kwargs):
        if len(done) >= calls:
            target = next((a for a in args if isinstance(a, (str, os.PathLike))), None)
            if target is not None and os.path.isfile(target):
                with open(target, "ab") as file:
                    file.write(b"half a row")
            raise OSError(errno.ENOSPC, NO_SPACE)
        done.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, writing)


def names(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("output", ["priced.csv", "priced.parquet", "priced/"])
def test_a_full_disk_mid_write_keeps_the_earlier_output_and_leaves_no_temporary(tmp_path, monkeypatch, output):
    target = f"{tmp_path}/{output}"
    write_tables(pieces(1, rows=3), target)
    before = read_table(target)
    listed = names(tmp_path)
    if output.endswith(".csv"):
        full_after(monkeypatch, pd.DataFrame, "to_csv", 2)
    else:
        full_after(monkeypatch, pq.ParquetWriter, "write_table", 2)
    with pytest.raises(OutputError) as caught:
        write_tables(pieces(5), target)
    assert caught.value.errno == errno.ENOSPC and isinstance(caught.value, OSError)
    assert str(caught.value).startswith(f"{target.rstrip('/')}: cannot write the output: {NO_SPACE} (free space")
    assert "nothing was written under its name" in str(caught.value)
    assert names(tmp_path) == listed
    pd.testing.assert_frame_equal(read_table(target), before)


def test_a_full_disk_while_joining_parts_keeps_the_earlier_file(tmp_path, monkeypatch):
    parts = tmp_path / "parts"
    parts.mkdir()
    for number, piece in enumerate(pieces(3)):
        write_part(piece, parts, number)
    target = tmp_path / "priced.parquet"
    write_table(pieces(1, rows=3)[0], target)
    full_after(monkeypatch, distprice.join, "_copy", 1)
    with pytest.raises(OutputError, match=f"priced.parquet: cannot write the output: {NO_SPACE}"):
        write_joined(sorted(parts.iterdir()), target)
    assert names(tmp_path) == ["parts", "priced.parquet"]
    assert read_table(target)["id"].tolist() == [0, 1, 2]


def test_a_part_that_cannot_be_written_is_named_as_the_output(tmp_path, monkeypatch):
    """A folder's parts are written by threads (or a cluster's workers) in a hidden folder: the error names the
    folder the user asked for."""
    full_after(monkeypatch, pq.ParquetWriter, "write_table", 0)
    with pytest.raises(OutputError) as caught:
        write_tables(pieces(2), f"{tmp_path}/priced/")
    assert str(caught.value).startswith(f"{tmp_path}/priced: cannot write the output: {NO_SPACE}")
    assert names(tmp_path) == []


def test_no_permission_to_put_the_output_in_place(tmp_path, monkeypatch):
    target = tmp_path / "priced.csv"
    target.write_text("id\nearlier\n")

    def denied(source, destination):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "replace", denied)
    with pytest.raises(OutputError) as caught:
        write_tables(pieces(1), target)
    assert caught.value.errno == errno.EACCES
    assert "cannot write the output: Permission denied (write where you may" in str(caught.value)
    assert names(tmp_path) == ["priced.csv"] and target.read_text() == "id\nearlier\n"


def test_an_error_of_what_is_written_is_not_the_outputs(tmp_path):
    """An OSError of producing the rows (reading an input, say) passes as it is: only writing's are the output's."""

    def failing():
        yield pieces(1)[0]
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "book.csv")

    with pytest.raises(FileNotFoundError) as caught:
        write_tables(failing(), tmp_path / "priced.parquet")
    assert not isinstance(caught.value, OutputError)
    assert names(tmp_path) == []


def test_a_full_disk_is_found_before_pricing(tmp_path, monkeypatch):
    monkeypatch.setattr("distprice.tables.shutil.disk_usage", lambda path: SimpleNamespace(total=1, used=1, free=0))
    with pytest.raises(OutputError, match=f"priced.csv: cannot write the output: {NO_SPACE}"):
        check_output(tmp_path / "priced.csv")


@pytest.fixture
def book(tmp_path):
    path = tmp_path / "book.csv"
    pd.DataFrame([dict(HULL_PUT, id="a"), dict(HULL_PUT, id="b")]).to_csv(path, index=False)
    return path


def test_the_job_in_this_process_fails_cleanly(tmp_path, monkeypatch, book):
    target = tmp_path / "priced.parquet"
    write_table(pd.DataFrame({"id": ["earlier"]}), target)
    full_after(monkeypatch, pq.ParquetWriter, "write_table", 0)
    with pytest.raises(OutputError, match=NO_SPACE):
        api.run(str(book), output=str(target), in_process=True)
    assert names(tmp_path) == ["book.csv", "priced.parquet"]
    assert read_table(target)["id"].tolist() == ["earlier"]


@pytest.mark.parametrize("output", ["priced.csv", "priced.parquet", "priced/"])
def test_the_command_line_exits_7_with_the_cause_and_no_traceback(tmp_path, monkeypatch, book, output):
    target = f"{tmp_path}/{output}"
    if output.endswith(".csv"):
        full_after(monkeypatch, pd.DataFrame, "to_csv", 0)
    else:
        full_after(monkeypatch, pq.ParquetWriter, "write_table", 0)
    result = CliRunner().invoke(main, ["run", "--in-process", "--portfolio", str(book), "--output", target])
    assert result.exit_code == 7, result.output
    assert f"distprice: {target.rstrip('/')}: cannot write the output: {NO_SPACE}" in result.output
    assert "Traceback" not in result.output
    assert names(tmp_path) == ["book.csv"]


def test_a_disk_full_before_pricing_exits_7_and_prices_nothing(tmp_path, monkeypatch, book):
    monkeypatch.setattr("distprice.tables.shutil.disk_usage", lambda path: SimpleNamespace(total=1, used=1, free=0))
    monkeypatch.setattr("distprice.api._priced", lambda *args: pytest.fail("priced"))
    result = CliRunner().invoke(main, ["run", "--portfolio", str(book), "--output", str(tmp_path / "o.csv")])
    assert result.exit_code == 7 and NO_SPACE in result.output, result.output
    assert "Traceback" not in result.output


def ended_process() -> int:
    """The id of a process of this host that has ended."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_temporaries_a_killed_writer_left_are_removed_and_only_those(tmp_path, caplog):
    dead, alive = ended_process(), os.getpid()
    stale = [
        f".priced.parquet.{HOST}.{dead}.abc_1234.tmp",  # a file being written
        f".priced.parquet.{HOST}.{dead}.x1y2z3w4.parts.tmp",  # the parts of a one-file join
        f".priced.parquet.{HOST}.{dead}.k9k9k9k9.old",  # a folder being removed
    ]
    kept = [
        f".priced.parquet.{HOST}.{alive}.abcd1234.tmp",  # a running writer's (this process)
        f".priced.parquet.other-host.{dead}.abcd1234.tmp",  # another host's: its process cannot be asked
        ".priced.parquet.abcd1234.tmp",  # named by no process
        f".other.parquet.{HOST}.{dead}.abcd1234.tmp",  # another output's
        f".priced.parquet.{HOST}.{dead}.abcd1234.txt",  # not a temporary
        "priced.parquet",
    ]
    for name in stale + kept:
        if name.endswith("parts.tmp"):
            (tmp_path / name).mkdir()
            (tmp_path / name / "part-000000.parquet").write_bytes(b"PAR1")
        else:
            (tmp_path / name).write_bytes(b"PAR1")
    with caplog.at_level("INFO", logger="distprice.tables"):
        removed = remove_stale(tmp_path / "priced.parquet")
    assert sorted(p.name for p in removed) == sorted(stale)
    assert names(tmp_path) == sorted(kept)
    assert f"left by process {dead} of this host, which ended while writing" in caplog.text
    assert caplog.text.count("removed") == 3


def test_the_next_run_for_an_output_removes_what_a_killed_one_left(tmp_path, book):
    dead = ended_process()
    (tmp_path / f".priced.csv.{HOST}.{dead}.abcd1234.tmp").write_text("id,price\na,")
    result = CliRunner().invoke(
        main, ["run", "--in-process", "--portfolio", str(book), "--output", str(tmp_path / "priced.csv")]
    )
    assert result.exit_code == 0, result.output
    assert names(tmp_path) == ["book.csv", "priced.csv"]
    assert read_table(tmp_path / "priced.csv")["id"].tolist() == ["a", "b"]


def test_a_temporary_carries_the_output_this_host_and_this_process(tmp_path, monkeypatch):
    seen = []
    original = pq.ParquetWriter.write_table

    def write_table(self, *args, **kwargs):
        seen.extend(p.name for p in tmp_path.iterdir())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    write_tables(pieces(1), tmp_path / "priced.parquet")
    assert len(seen) == 1 and seen[0].startswith(f".priced.parquet.{HOST}.{os.getpid()}.")
    assert seen[0].endswith(".tmp") and HOST.split(".")[0] == socket.gethostname().split(".")[0]
