"""Compiling the CUDA sources: every module carries a digest of all the sources, headers included, so that
CuPy's disk cache (keyed by a module's own text and options) never serves code built from an older header."""

from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np
import pytest

from distprice import cuda


class Recorder:
    """Stands in for CuPy: keeps what RawModule was given."""

    def __init__(self):
        self.calls = []

    def RawModule(self, code, options):
        self.calls.append((code, options))
        return self


@pytest.fixture
def sources(tmp_path, monkeypatch):
    folder = tmp_path / "kernels"
    shutil.copytree(cuda.kernel_dir(), folder)
    monkeypatch.setattr(cuda, "kernel_dir", lambda: folder)
    cuda.sources_digest.cache_clear()
    yield folder
    cuda.sources_digest.cache_clear()


def test_a_header_change_changes_every_modules_options(sources):
    cupy = Recorder()
    cuda.compile_module(cupy, "risk.cu", ("-DREAL=double",))
    code, options = cupy.calls[-1]
    assert code == (sources / "risk.cu").read_text()
    assert options[0] == "-DREAL=double" and f"-I{sources}" in options
    before = [o for o in options if o.startswith("-DDISTPRICE_SOURCES=0x")]
    assert len(before) == 1 and len(before[0]) == len("-DDISTPRICE_SOURCES=0x") + 16

    header = sources / "bumps.cuh"
    header.write_text(header.read_text() + "\n// changed\n")
    cuda.sources_digest.cache_clear()
    cuda.compile_module(cupy, "risk.cu", ("-DREAL=double",))
    code_after, options_after = cupy.calls[-1]
    assert code_after == code  # the module's own text is unchanged...
    assert options_after != options  # ...but its options, and so CuPy's cache key, are not


def test_the_digest_ignores_files_that_are_not_sources(sources):
    digest = cuda.sources_digest()
    (sources / "notes.txt").write_text("not compiled")
    cuda.sources_digest.cache_clear()
    assert cuda.sources_digest() == digest


class OneGpu:
    """Stands in for CuPy: one device, at a PCI bus id."""

    class cuda:
        class Device:
            pci_bus_id = "0000:1B:00.0"


def test_turns_on_a_gpu_never_overlap(monkeypatch, tmp_path):
    """Four threads (each turn opens the device's lock file anew, as another process would) take three turns
    each: no two turns overlap, and the lock is a file named by the device's bus id."""
    import tempfile
    import threading
    import time

    monkeypatch.setattr(cuda, "require_cupy", lambda: OneGpu)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "no-mps"))
    held = []

    def turns():
        for _ in range(3):
            with cuda.gpu_turn():
                start = time.perf_counter()
                time.sleep(0.005)
                held.append((start, time.perf_counter()))

    threads = [threading.Thread(target=turns) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    held.sort()
    assert len(held) == 12
    assert all(end <= next_start for (_, end), (next_start, _) in zip(held, held[1:]))
    assert [p.name for p in tmp_path.iterdir()] == ["distprice-gpu-0000-1B-00.0.lock"]


def test_under_mps_turns_are_free(monkeypatch, tmp_path):
    """With MPS's control pipe in its folder, kernels of several processes run side by side: no lock is taken."""
    import tempfile

    monkeypatch.setattr(cuda, "require_cupy", lambda: OneGpu)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp"))
    (tmp_path / "mps").mkdir()
    (tmp_path / "mps" / "control").touch()
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "mps"))
    assert cuda.mps_running()
    with cuda.gpu_turn(), cuda.gpu_turn():  # no lock: the same thread may nest them
        pass
    assert not (tmp_path / "temp").exists()


class SlowCompiler:
    """Stands in for CuPy: one device, whose modules take 20 ms to compile and count their compilations."""

    def __init__(self):
        self.compiled = 0
        self.cuda = SimpleNamespace(Device=lambda: SimpleNamespace(id=0))

    def RawModule(self, code, options):
        self.compiled += 1
        time.sleep(0.02)
        return SimpleNamespace(get_function=self.kernel)

    @staticmethod
    def kernel(name):
        return SimpleNamespace(name=name, max_dynamic_shared_size_bytes=49152)


@pytest.fixture
def compiler(monkeypatch):
    cupy = SlowCompiler()
    monkeypatch.setattr(cuda, "require_cupy", lambda: cupy)
    monkeypatch.setattr(cuda, "_MODULES", {})
    monkeypatch.setattr(cuda, "_KERNELS", {})
    monkeypatch.setattr(cuda, "_FILLED", set())
    return cupy


def test_threads_asking_at_once_share_one_module(compiler):
    """Eight threads ask for a kernel at once: one compilation, one kernel object (a second module, loaded by a
    racing thread and dropped, would be unloaded with its kernels perhaps still queued)."""
    with ThreadPoolExecutor(8) as threads:
        kernels = list(threads.map(lambda _: cuda.load_kernel("risk.cu", "risk_roll", ("-DREAL=double",)), range(8)))
    assert compiler.compiled == 1 and all(k is kernels[0] for k in kernels) and kernels[0].name == "risk_roll"
    other = cuda.load_kernel("risk.cu", "risk_forward", ("-DREAL=double",))
    assert compiler.compiled == 1 and other.name == "risk_forward"
    cuda.load_kernel("risk.cu", "risk_roll", ("-DREAL=float",))
    assert compiler.compiled == 2


def test_a_kernels_shared_memory_limit_is_only_ever_raised(compiler):
    kernel = cuda.load_kernel("flat.cu", "flat_price")
    cuda.allow_shared(kernel, 65536)
    cuda.allow_shared(kernel, 30000)
    assert kernel.max_dynamic_shared_size_bytes == 65536


def test_the_first_fill_of_a_dtype_is_made_under_the_lock(compiler):
    """CuPy loads its fill kernel at the first fill: eight threads' first fills at once go one at a time, later
    fills at once."""
    inside, most = [], []

    def fill(n, value, dtype):
        inside.append(1)
        most.append(len(inside))
        time.sleep(0.05)
        inside.pop()
        return np.full(n, value, dtype=dtype)

    compiler.full = fill
    with ThreadPoolExecutor(8) as threads:
        filled = list(threads.map(lambda _: cuda.full(3, np.nan, np.float64), range(8)))
    assert max(most) == 1 and all(np.isnan(f).all() for f in filled)
    most.clear()
    with ThreadPoolExecutor(8) as threads:
        list(threads.map(lambda _: cuda.full(3, np.nan, np.float64), range(8)))
    assert max(most) > 1
