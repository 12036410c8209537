"""Tuning the inspector's cost model: shipped defaults, stored files, the tune command (no GPU needed)."""

import dataclasses
import json
import warnings

import numba
import numpy as np
import pytest
from click.testing import CliRunner

from distprice import tuning
from distprice.cli import main
from distprice.cuda import gpu_available
from distprice.inspector import CostModel
from distprice.lattice import datasets
from distprice.tuning import CPU_DEVICE, load_model, model_path, save_model, shipped_default

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTPRICE_CONFIG_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "_warned", set())
    return tmp_path


def test_shipped_defaults_by_device_name():
    assert shipped_default(H100, "fp64").source == "default (H100)"
    assert shipped_default("NVIDIA H200", "fp32").source == "default (H200)"
    assert shipped_default("Some Other GPU", "fp64").source == "default (cpu)"
    assert shipped_default(H100, "fp32").flat_node_step < shipped_default(H100, "fp64").flat_node_step


def test_tuning_file_round_trip(config):
    model = dataclasses.replace(shipped_default(H100, "fp64"), flat_node_step=1.5e-12, source="tuned today")
    path = save_model(model)
    assert path == model_path(H100, "fp64") and path.parent == config / "tuning"
    assert path.name == "nvidia-h100-80gb-hbm3-fp64.json"
    assert load_model(H100, "fp64") == model
    assert CostModel.from_json(path.read_text()) == model
    assert json.loads(path.read_text())["flat_node_step"] == 1.5e-12


def test_untuned_device_uses_the_default_and_says_so_once(config, caplog):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a log line, not a warning showing where in distprice it was raised
        assert load_model(H100, "fp64").source == "default (H100)"
        load_model(H100, "fp64")
    said = [r.getMessage() for r in caplog.records if "no tuning" in r.getMessage()]
    assert len(said) == 1 and "no tuning for NVIDIA H100" in said[0] and "distprice tune" in said[0]


def test_tune_on_the_cpu_fits_and_stores(config):
    # medians of 3: single timings on a busy machine can fit a step cost of 0
    result = CliRunner().invoke(main, ["tune", "--repeat", "3"])
    assert result.exit_code == 0, result.output
    if gpu_available():
        pytest.skip("a GPU is visible: the CPU-only path is not taken")
    model = load_model(CPU_DEVICE, "fp64")
    assert model.source.startswith("tuned")
    assert 1e-13 < model.cpu_node_step < 1e-8 and model.cpu_row >= 0
    # the layout of a row's coupon and exercise tables grows with its maturity
    assert model.pack_step > 0 and model.pack(np.array([1200])) > model.pack(np.array([12]))
    # the measured CPU model is the one the inspector and inspect use on a machine without a GPU
    assert tuning.current_model("fp64", gpu=False) == model
    datasets.generate("R1", 50).to_csv(config / "book.csv", index=False)
    inspected = CliRunner().invoke(main, ["inspect", str(config / "book.csv"), "--json"])
    shown = json.loads(inspected.output)
    assert shown["model"]["source"] == model.source
    assert shown["execution"] == f"this process: the CPU engine on {numba.get_num_threads()} threads"


def test_without_a_gpu_the_untuned_cpu_model_is_used_silently(config, caplog, monkeypatch):
    # without a GPU the inspector has one engine to choose: its figures change no choice, so nothing is said
    assert tuning.current_model("fp64", gpu=False).source == "default (cpu)"
    assert "no tuning" not in caplog.text
    # with one, they choose between the engines: said once, unless quiet (the workers' description)
    monkeypatch.setattr(tuning, "device_name", lambda: H100)
    assert tuning.current_model("fp64", gpu=True, quiet=True).source == "default (H100)"
    assert "no tuning" not in caplog.text
    tuning.current_model("fp64", gpu=True)
    tuning.current_model("fp64", gpu=True)
    assert caplog.text.count("no tuning for NVIDIA H100") == 1
