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


def test_untuned_device_uses_the_default_and_says_so_once(config):
    with pytest.warns(UserWarning, match="no tuning for NVIDIA H100.*distprice tune"):
        assert load_model(H100, "fp64").source == "default (H100)"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_model(H100, "fp64")


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


def test_without_a_gpu_the_untuned_cpu_model_says_so(config):
    with pytest.warns(UserWarning, match="no tuning for cpu.*distprice tune"):
        assert tuning.current_model("fp64", gpu=False).source == "default (cpu)"
