"""Start-up: ``import distprice``, ``import distprice.cli`` and ``distprice --help`` load none of the heavy
libraries (the engines load when a command runs), and the names the command line offers are the engines'."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from distprice import choices
from distprice.lattice.engines import ENGINES
from distprice.montecarlo.pricing import ENGINES as PATH_ENGINES
from distprice.precision import PRECISIONS

HEAVY = {"numpy", "pandas", "pyarrow", "numba", "scipy", "dask", "distributed", "bokeh", "yaml", "cupy"}
"""Libraries that take from a tenth of a second to seconds to import."""


def loaded_after(code: str) -> tuple[set[str], str]:
    """The top-level packages loaded in a fresh interpreter after ``code``, and what ``code`` printed."""
    report = "import sys; print('\\n' + ' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    done = subprocess.run([sys.executable, "-c", f"{code}\n{report}"], capture_output=True, text=True, check=True)
    printed, _, modules = done.stdout.rstrip("\n").rpartition("\n")
    return set(modules.split()), printed


@pytest.mark.parametrize("module", ["distprice", "distprice.cli"])
def test_importing_loads_nothing_heavy(module):
    loaded, _ = loaded_after(f"import {module}")
    assert "distprice" in loaded
    assert not loaded & HEAVY, f"import {module} loads {sorted(loaded & HEAVY)}"


def help_of(args: list[str]) -> tuple[set[str], str]:
    """The packages loaded by ``distprice ARGS --help`` in a fresh interpreter, and the help it printed."""
    code = (
        "from distprice.cli import main\n"
        "try:\n"
        f"    main({[*args, '--help']!r}, prog_name='distprice')\n"
        "except SystemExit as end:\n"
        "    assert end.code == 0, end.code\n"
    )
    return loaded_after(code)


@pytest.mark.parametrize("args", [[], ["run"], ["mc"], ["bench"], ["calibrate", "heston"]])
def test_help_loads_nothing_heavy(args):
    loaded, printed = help_of(args)
    assert printed.startswith(f"Usage: distprice {' '.join(args)}".rstrip())
    assert not loaded & HEAVY, f"distprice {' '.join(args)} --help loads {sorted(loaded & HEAVY)}"


def test_run_help_offers_the_engines_and_precisions():
    flat = " ".join(help_of(["run"])[1].split())
    assert "[auto|reference|cpu|gpu-outer|gpu-flat]" in flat
    assert "[fp64|fp32]" in flat and "[long|wide|full]" in flat and "[strict|report]" in flat


def test_the_names_are_the_engines():
    assert choices.ENGINE_NAMES == (choices.AUTO, *ENGINES)
    assert choices.PATH_ENGINE_NAMES == (choices.AUTO, *PATH_ENGINES)
    assert PRECISIONS == {"fp64": np.dtype(np.float64), "fp32": np.dtype(np.float32)}
    assert set(choices.MIXTURES) < set(choices.DATASETS)
    assert all(set(parts) < set(choices.DATASETS) for parts in choices.MIXTURES.values())
