"""numba's compilations watched: counted in seconds and kernels, said once a process on the log, and left out of
a job's pricing seconds (reported apart in its summary)."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import numba
import pandas as pd
import pytest

from distprice import api
from distprice.compiling import Compiling
from distprice.job import Summary
from distprice.lattice import datasets


def fresh_kernel():
    """A kernel numba has not compiled yet (no cache: a new function object each call)."""

    @numba.njit(cache=False)
    def kernel(x):
        total = 0.0
        for i in range(x.shape[0]):
            total += x[i] * i
        return total

    return kernel


def test_compiling_counts_the_compilations_inside_it():
    import numpy as np

    kernel = fresh_kernel()
    with Compiling("a kernel") as compiling:
        assert kernel(np.arange(3.0)) == 5.0
    assert compiling.kernels >= 1 and compiling.seconds > 0
    with Compiling("a kernel") as again:
        kernel(np.arange(4.0))  # compiled already: nothing to count
    assert again.kernels == 0 and again.seconds == 0.0


def test_the_log_says_it_once_a_process():
    code = (
        "import logging, sys, numba, numpy as np\n"
        "logging.basicConfig(stream=sys.stdout, level=logging.INFO, format='%(name)s: %(message)s')\n"
        "from distprice.compiling import Compiling\n"
        "for n in range(3):\n"
        "    f = numba.njit(cache=False)(lambda x: x + n)\n"
        "    with Compiling('the test kernels'):\n"
        "        f(np.float64(1.0))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    said = [line for line in out.splitlines() if line.startswith("distprice.compiling")]
    assert len(said) == 1
    assert "compiling the test kernels" in said[0] and "once" in said[0]


def test_the_summary_reports_compilation_apart():
    summary = Summary(4, 4, 1e6, 2.0, 0, {"cpu": 4}, values={None: 100.0}, compiled=12.5)
    line = summary.line(wall=15.0)
    assert "1.000e+06 node-steps in 2.00 s (5.000e+05 NS/s)" in line
    assert line.endswith("engines: cpu 4, compiled in 12.50 s (numba, once)")
    assert "compiled" not in Summary(4, 4, 1e6, 2.0, 0, {"cpu": 4}, values={None: 1.0}).line()


def test_a_job_leaves_its_compilation_out_of_its_pricing_seconds(tmp_path, monkeypatch):
    """A job that compiles (here: a kernel of its own before pricing) reports the compilation's seconds apart,
    and its pricing seconds without them."""
    priced = api._priced

    def compiling_first(*args, **kwargs):
        import numpy as np

        fresh_kernel()(np.arange(3.0))
        time.sleep(0.2)  # not compilation: stays in the pricing seconds
        return priced(*args, **kwargs)

    monkeypatch.setattr(api, "_priced", compiling_first)
    datasets.generate("R1", 20).to_parquet(tmp_path / "r1.parquet")
    start = time.perf_counter()
    ran = api.run(str(tmp_path / "r1.parquet"), output=str(tmp_path / "out.csv"), in_process=True, engine="cpu")
    total = time.perf_counter() - start
    assert ran.summary.compiled > 0
    assert 0.2 < ran.summary.seconds < total - ran.summary.compiled + 1e-6


def test_local_clusters_are_warmed_here():
    from distprice.cluster.config import ClusterConfig, Config

    assert api._local(None)
    assert not api._local("tcp://127.0.0.1:8786")
    assert api._local(Config(ClusterConfig(kind="local")))
    assert not api._local(Config(ClusterConfig(kind="address", address="tcp://127.0.0.1:8786")))


@pytest.mark.parametrize("ids", ["numbers", "text"])
def test_warming_prices_the_first_rows_and_leaves_their_problems_to_the_job(ids):
    book = datasets.generate("R1", 5)
    if ids == "text":
        book["id"] = pd.array([f"R{i}" for i in range(5)], dtype="str")
    book.loc[1, "volatility"] = -1.0  # an invalid row: the job reports it, warming does not
    assert api._warmed(book, None, {}) >= 0.0
    assert api._head(book, 3).equals(book.head(3))


def test_warm_compiles_what_a_first_job_from_files_uses(tmp_path):
    """``distprice warm`` compiles ahead what a job read from files compiles on its first run: a dated job from
    CSV files compiles nothing after it (in an empty cache, as on a fresh install, this is the warm command's
    whole point; in a warm one it holds as well)."""
    from click.testing import CliRunner

    from distprice.cli import main
    from distprice.lattice.desk import AS_OF, desk

    done = CliRunner().invoke(main, ["warm"])
    assert done.exit_code == 0, done.output
    assert re.fullmatch(r"(compiled in \d+\.\d s|nothing to compile); numba's cache: \S.*\n", done.output)
    book = desk(5, seed=3)
    for name, table in (("book", book.portfolio), ("curves", book.curves), ("calls", book.exercise_schedule)):
        table.to_csv(tmp_path / f"{name}.csv", index=False)
    ran = api.run(
        str(tmp_path / "book.csv"),
        output=str(tmp_path / "priced.csv"),
        in_process=True,
        curves=str(tmp_path / "curves.csv"),
        exercise_schedule=str(tmp_path / "calls.csv"),
        as_of=AS_OF,
    )
    assert ran.summary.priced == 5 and ran.summary.compiled == 0.0
