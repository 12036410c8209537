"""The CUDA Heston kernels. On the host: kernels/heston.cu built with a C++ compiler over stand-ins of CUDA's
built-ins (each block's threads are OS threads meeting at __syncthreads), driven by the GPU engine's own
launcher, against the CPU engine. On a GPU (marked ``gpu``): the same comparisons through CuPy."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess

import numpy as np
import pytest
from test_heston import DATA, X_OPT, random_population

from distprice.cuda import gpu_available, kernel_dir
from distprice.models import fit_surface, heston_surfaces, read_benchmark
from distprice.models.heston_cpu import CpuEngine
from distprice.models.heston_gpu import DEFINES, KERNEL_ARGUMENTS, SOURCE, GpuEngine
from distprice.models.quadrature import rotations

from utils import require_compiler

EMULATION = """
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
#define __global__
#define __shared__ static
#define __launch_bounds__(n)
struct Dim { unsigned x, y, z; };
static Dim blockIdx, blockDim, gridDim;
static thread_local Dim threadIdx;
class Barrier {
    std::mutex mutex;
    std::condition_variable arrived;
    unsigned count, waiting = 0, generation = 0;
public:
    explicit Barrier(unsigned n) : count(n) {}
    void wait() {
        std::unique_lock<std::mutex> lock(mutex);
        const unsigned current = generation;
        if (++waiting == count) { waiting = 0; ++generation; arrived.notify_all(); }
        else arrived.wait(lock, [&] { return current != generation; });
    }
};
static Barrier* barrier;
inline void __syncthreads() { barrier->wait(); }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, sizeof d); return d; }
#include "heston.cu"
template <class Body> void launch(unsigned gx, unsigned gy, unsigned bx, Body body) {
    gridDim = {gx, gy, 1};
    blockDim = {bx, 1, 1};
    for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x) {
            blockIdx = {x, y, 0};
            Barrier block(bx);
            barrier = &block;
            std::vector<std::thread> threads;
            for (unsigned t = 0; t < bx; ++t) threads.emplace_back([=] { threadIdx = {t, 0, 0}; body(); });
            for (auto& thread : threads) thread.join();
        }
}
"""


def emulation_source() -> str:
    """The host emulation: one ``launch_<kernel>(grid x, grid y, block x, arguments...)`` per kernel, its
    arguments in the launcher's declared order and types."""
    wrappers = []
    for kernel, arguments in KERNEL_ARGUMENTS.items():
        parameters = ", ".join(f"{kind} {name}" for name, kind in arguments)
        names = ", ".join(name for name, _ in arguments)
        wrappers.append(
            f'extern "C" void launch_{kernel}(unsigned gx, unsigned gy, unsigned bx, {parameters}) '
            f"{{ launch(gx, gy, bx, [=] {{ {kernel}({names}); }}); }}"
        )
    return EMULATION + "\n".join(wrappers) + "\n"


class HostDevice:
    """The launcher's device interface over the host emulation: numpy arrays, launches through ctypes."""

    def __init__(self, library):
        self.library = library

    def upload(self, array):
        return np.ascontiguousarray(array).copy()

    def empty(self, shape):
        return np.full(shape, np.nan)  # anything a kernel fails to write stays NaN

    def download(self, array):
        return array.copy()

    def rotations(self, nodes, log_strike):
        return rotations(nodes, log_strike)

    def launch(self, kernel, grid, block, values):
        grid = (*grid, 1)[:2]
        args = [
            ctypes.c_int(values[name]) if kind == "int" else values[name].ctypes.data_as(ctypes.c_void_p)
            for name, kind in KERNEL_ARGUMENTS[kernel]
        ]
        getattr(self.library, f"launch_{kernel}")(
            ctypes.c_uint(grid[0]), ctypes.c_uint(grid[1]), ctypes.c_uint(block), *args
        )


@pytest.fixture(scope="module")
def surface():
    return heston_surfaces(read_benchmark(DATA / "1062_quotes.in")[0])[0]


@pytest.fixture(scope="module")
def host_device(tmp_path_factory):
    folder = tmp_path_factory.mktemp("heston_host")
    (folder / "emulation.cpp").write_text(emulation_source())
    library = folder / "heston_host.so"
    subprocess.run(
        [
            require_compiler("g++", shutil.which("g++") or shutil.which("c++")),
            "-O2",
            "-std=c++17",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-shared",
            "-fPIC",
            "-pthread",
            *DEFINES,
            f"-I{kernel_dir()}",
            str(folder / "emulation.cpp"),
            "-o",
            str(library),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return HostDevice(ctypes.CDLL(str(library)))


def test_launcher_arguments_are_the_kernels_parameters():
    source = (kernel_dir() / SOURCE).read_text()
    declared = re.findall(r'extern "C" __global__ void(?: __launch_bounds__\(\w+\))?\s+(\w+)\(([^)]*)\)', source)
    assert {name for name, _ in declared} == set(KERNEL_ARGUMENTS)
    for name, parameters in declared:
        found = [tuple(p.strip().rsplit(" ", 1)) for p in parameters.split(",")]
        assert [(n, kind) for kind, n in found] == list(KERNEL_ARGUMENTS[name])


def test_kernels_on_the_host_match_the_cpu_engine(host_device, surface):
    """21 members: three groups of GROUP, the last one partly empty; 1062 quotes: five blocks, the last partly
    empty."""
    params = random_population(4, 21)
    engine, cpu = GpuEngine(surface, device=host_device), CpuEngine(surface)
    f, expected = engine.objective(params), cpu.objective(params)
    assert np.isinf(f[3]) and np.isinf(expected[3])
    np.testing.assert_allclose(f, expected, rtol=1e-10)
    assert f[0] == pytest.approx(0.0599851151124, rel=1e-10)
    assert np.array_equal(f, engine.objective(params))
    prices, expected_prices = engine.prices(params), cpu.prices(params)
    np.testing.assert_array_equal(np.isnan(prices), np.isnan(expected_prices))
    np.testing.assert_allclose(prices[0], expected_prices[0], rtol=0, atol=1e-13)
    np.testing.assert_allclose(prices, expected_prices, rtol=0, atol=1e-10)


def test_kernels_on_the_host_price_a_single_member(host_device, surface):
    engine = GpuEngine(surface, device=host_device)
    assert engine.objective(np.array([X_OPT]))[0] == pytest.approx(0.0599851151124, rel=1e-10)
    prices = engine.prices(np.array([X_OPT]))[0]
    assert prices[[0, 500, 1061]] == pytest.approx([0.850386776221, 0.101243559015, 0.135127493566], rel=1e-10)


gpu = pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")


@pytest.mark.gpu
@gpu
def test_gpu_engine_matches_cpu_engine(surface):
    params = random_population(9, 40)
    engine, cpu = GpuEngine(surface), CpuEngine(surface)
    f = engine.objective(params)
    np.testing.assert_allclose(f, cpu.objective(params), rtol=1e-10)
    assert np.array_equal(f, engine.objective(params))
    prices, expected = engine.prices(params), cpu.prices(params)
    np.testing.assert_array_equal(np.isnan(prices), np.isnan(expected))
    np.testing.assert_allclose(prices, expected, rtol=0, atol=1e-10)


@pytest.mark.gpu
@gpu
def test_gpu_fit_meets_the_acceptance_and_repeats(surface):
    fits = [fit_surface(surface, seed=seed, engine="gpu") for seed in (0, 0, 1, 2)]
    assert np.array_equal(fits[0].params, fits[1].params)
    assert max(f.rmse for f in fits) <= 0.765 and fits[0].engine == "gpu"
