"""Pricing on a local-cuda cluster, worker processes sharing each GPU (``-m gpu``; skipped without a GPU)."""

import collections

import numpy as np
import pandas as pd
import pytest
from distributed import get_task_stream

import distprice
from distprice.cluster.config import ClusterConfig
from distprice.cluster.pricer import Pricer
from distprice.cluster.start import default_cluster
from distprice.cluster.tasks import describe_worker
from distprice.cuda import gpu_available
from distprice.lattice import datasets

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")]


def gpus() -> int:
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


@pytest.fixture(scope="module")
def book():
    """A mixture of tall wide trees and many small ones, several chunks per GPU."""
    return datasets.generate("R1+S2", 24_000, seed=11)


@pytest.fixture(scope="module")
def expected(book):
    return distprice.price(book, engine="cpu")


@pytest.mark.parametrize("used, per_gpu", [(1, 1), (1, 3), (2, 2)])
def test_local_cuda_cluster_prices_like_the_cpu_engine(used, per_gpu, book, expected, tmp_path):
    if used > gpus():
        pytest.skip(f"needs {used} GPUs")
    assert default_cluster().kind == "local-cuda"
    workers = used * per_gpu
    config = ClusterConfig(kind="local-cuda", n_workers=used, workers_per_gpu=per_gpu, dashboard_address=None)
    with Pricer(config, task_seconds=0) as pricer:  # every job cut for every worker, however small
        assert pricer.workers == workers
        with get_task_stream(client=pricer.client) as stream:
            priced = pricer.price(book)
        # a big file read by the workers themselves, under three shifted curve sets
        path = tmp_path / "book.parquet"
        book.to_parquet(path, row_group_size=4_000)
        pricer.read_on_workers_rows = 1_000
        shifted = pricer.price(str(path), shifts_bp=[-25, 0, 25])
        # the same job written by the workers as a folder of parts
        pricer.run(str(path), shifts_bp=[-25, 0, 25], output=f"{tmp_path / 'parts'}/")
        # each GPU's worker processes know they share it: their chunks are planned in one wave
        places = collections.Counter(d["place"] for d in pricer.client.run(describe_worker, "fp64").values())
        assert sorted(places.values()) == [per_gpu] * used
        assert pricer._workers["fp64"]["gpu_processes"] == per_gpu
    scale = np.maximum(expected["bond_price"].abs(), 1.0)
    for column in ("price", "bond_price", "option_price"):
        assert (np.abs(priced[column] - expected[column]) <= 1e-12 * scale).all(), column
    assert priced["id"].tolist() == expected["id"].tolist()
    assert set(priced["engine"]) <= {"gpu-flat", "gpu-outer"}
    names = {task["key"].split("-")[0] for task in stream.data}
    assert "price_gpu_flat_fp64" in names
    assert len({task["worker"] for task in stream.data if task["key"].startswith("price_")}) == workers
    base = shifted[shifted["scenario"] == "+0bp"].reset_index(drop=True)
    assert (np.abs(base["price"] - expected["price"]) <= 1e-12 * scale).all()
    assert len(shifted) == 3 * len(book)
    parts = pd.read_parquet(tmp_path / "parts")
    assert parts["id"].tolist() == shifted["id"].tolist() and parts["scenario"].tolist() == shifted["scenario"].tolist()
    assert (np.abs(parts["price"] - shifted["price"].to_numpy()) <= 1e-12 * np.repeat(scale.to_numpy(), 3)).all()
