"""The CUDA kernel's arithmetic, built for the host with g++ and compared with the CPU engine bit for bit;
the kernel itself on a GPU (``-m gpu``; skipped without CuPy and a GPU)."""

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from distprice.cuda import gpu_available, kernel_dir
from distprice.montecarlo import cpu, datasets, gpu, read_inputs, validate, with_options

from utils import require_compiler

DATA = Path(__file__).parent / "data" / "optionpricing"

SHIM = r"""
#include "montecarlo.cuh"
#include <vector>

// Payoffs of paths first .. first + count - 1 under `model`, as the kernel's threads compute them.
extern "C" void mc_host_payoffs(MC_FIELDS(MC_PARAM) int threads, int model, double* out)
{
    const McJob job{MC_FIELDS(MC_NAME)};
    std::vector<unsigned int> base(dates * MC_UNDERLYINGS), low(dates * MC_UNDERLYINGS * MC_LOW_BITS);
    for (long long k = first; k < first + count; ++k) {
        const long long n = k + 1, n0 = n / threads * threads;
        if (k == first || n == n0)
            for (int d = 0; d < dates * MC_UNDERLYINGS; ++d)
                sobol_block_row(directions, bits, n0, d, base.data(), low.data());
        out[k - first] = path_payoff(job, model, base.data(), low.data(), (unsigned int)(n - n0));
    }
}

// The kernel's grid run block after block: sums [models][blocks][2] as mc_batch_sums writes them.
extern "C" void mc_host_sums(MC_FIELDS(MC_PARAM) int threads, int blocks, int models, double* sums)
{
    const McJob job{MC_FIELDS(MC_NAME)};
    std::vector<unsigned int> base(dates * MC_UNDERLYINGS), low(dates * MC_UNDERLYINGS * MC_LOW_BITS);
    std::vector<double> part(2 * threads);
    for (int m = 0; m < models; ++m)
        for (int block = 0; block < blocks; ++block) {
            const long long n0 = ((first + 1) / threads + block) * (long long)threads;
            for (int d = 0; d < dates * MC_UNDERLYINGS; ++d)
                sobol_block_row(directions, bits, n0, d, base.data(), low.data());
            const long long lowest = n0 - 1 > first ? n0 - 1 : first;
            for (int t = 0; t < threads; ++t) {
                const long long k = n0 + t - 1;
                const bool active = k >= first && k < first + count;
                const double value = active ? path_payoff(job, m, base.data(), low.data(), t) : 0.0;
                const bool later = active && batch_of(k, paths) != batch_of(lowest, paths);
                part[t] = later ? 0.0 : value;
                part[threads + t] = later ? value : 0.0;
            }
            for (int half = threads / 2; half > 0; half /= 2)
                for (int t = 0; t < half; ++t) {
                    part[t] += part[t + half];
                    part[threads + t] += part[threads + t + half];
                }
            sums[2 * (m * blocks + block)] = part[0];
            sums[2 * (m * blocks + block) + 1] = part[threads];
        }
}
"""

_BUILT = {}


def host_library(launch, tmp_path_factory):
    """The shim built for the launch's precision and shape (once per shape in the session)."""
    key = (launch.precision, launch.defines)
    if key not in _BUILT:
        folder = tmp_path_factory.mktemp("mc_host")
        (folder / "shim.cpp").write_text(SHIM)
        real = {"fp64": "double", "fp32": "float"}[launch.precision]
        defines = [f"-D{k}={v}" for k, v in launch.defines if k != "MC_THREADS"]
        library = folder / "shim.so"
        subprocess.run(
            [
                require_compiler("g++", shutil.which("g++")),
                "-O2",
                "-std=c++17",
                "-ffp-contract=off",
                "-shared",
                "-fPIC",
                f"-DREAL={real}",
                *defines,
                f"-I{kernel_dir()}",
                str(folder / "shim.cpp"),
                "-o",
                str(library),
            ],
            check=True,
        )
        _BUILT[key] = ctypes.CDLL(str(library))
    return _BUILT[key]


def c_arguments(launch):
    """The launch's arguments as ctypes values, in the order of the header's MC_FIELDS."""
    real = ctypes.c_double if launch.precision == "fp64" else ctypes.c_float
    scalars = {"int": ctypes.c_int, "long long": ctypes.c_longlong, "real": real}
    out = []
    for kind, name in gpu.fields():
        value = launch.arguments[name]
        if kind.endswith("*"):
            out.append(ctypes.c_void_p(np.ascontiguousarray(value).ctypes.data))
        else:
            out.append(scalars[kind](value.item()))
    return out


def jobs():
    small = validate(read_inputs(DATA / "finpar_small.input.data"))[0]
    medium = validate(read_inputs(DATA / "finpar_medium.input.data"))[0]
    large = validate(datasets.large(2**14))[0]
    rng = np.random.default_rng(5)
    t = np.cumsum(rng.uniform(0.1, 0.3, 9))
    two_models = validate(
        datasets.tables(
            "two",
            3,
            t,
            [[3700.0, 12000.0, 1150.0], [3900.0, 11000.0, 1250.0]],
            rng.uniform(0.1, 0.3, (2, 9, 3)),
            0.01,
            datasets.MEDIUM_CORRELATION,
            [[0.99, 0.97], [0.98, 0.96]],
            paths=2**13,
        )
    )[0]
    return {"small": small, "medium": medium, "large": large, "two_models": two_models}


@pytest.fixture(scope="module")
def all_jobs():
    return jobs()


@pytest.mark.parametrize("name", ["small", "medium", "large", "two_models"])
@pytest.mark.parametrize("precision", ["fp64", "fp32"])
def test_host_build_gives_the_cpu_engine_payoffs_bit_for_bit(all_jobs, name, precision, tmp_path_factory):
    job = with_options(all_jobs[name], precision=precision)
    first, count = 1000, 700
    launch = gpu.layout(job, first, count)
    library = host_library(launch, tmp_path_factory)
    expected = cpu.path_payoffs(job, first, count)
    for m in range(len(job.models)):
        out = np.empty(count)
        library.mc_host_payoffs(
            *c_arguments(launch), ctypes.c_int(launch.threads), ctypes.c_int(m), ctypes.c_void_p(out.ctypes.data)
        )
        assert np.array_equal(out, expected[m])


@pytest.mark.parametrize("name", ["medium", "two_models"])
def test_host_grid_and_fold_give_the_cpu_engine_batch_sums(all_jobs, name, tmp_path_factory):
    job = with_options(all_jobs[name], paths=2**13)
    first, count = 777, 6000  # blocks straddle batch edges (batches of 256 paths)
    launch = gpu.layout(job, first, count)
    assert launch.threads == 256 and launch.blocks == (first + count) // 256 - (first + 1) // 256 + 1
    library = host_library(launch, tmp_path_factory)
    sums = np.empty((len(job.models), launch.blocks, 2))
    library.mc_host_sums(
        *c_arguments(launch),
        ctypes.c_int(launch.threads),
        ctypes.c_int(launch.blocks),
        ctypes.c_int(len(job.models)),
        ctypes.c_void_p(sums.ctypes.data),
    )
    np.testing.assert_allclose(gpu.fold(job, launch, sums), cpu.batch_sums(job, first, count), rtol=1e-13, atol=1e-9)


def test_kernel_fields_and_layout(all_jobs):
    names = [name for _, name in gpu.fields()]
    assert names[:3] == ["directions", "bits", "dates"] and names[-3:] == ["first", "count", "paths"]
    launch = gpu.layout(all_jobs["large"], 0, 2**14)
    assert set(names) == set(launch.arguments)
    assert dict(launch.defines) == {"MC_UNDERLYINGS": 3, "MC_SLOTS": 10, "MC_CONTRACT": 3, "MC_THREADS": 256}
    assert launch.shared_bytes == 4 * 1101 * (1 + 8)  # x_{n0} and the direction numbers of 8 low bits per dimension
    tiny = with_options(all_jobs["medium"], paths=1000)
    with pytest.raises(Exception, match="at least 1024 paths"):
        gpu.layout(tiny, 0, 1000)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")
@pytest.mark.parametrize("name", ["small", "medium", "large", "two_models"])
@pytest.mark.parametrize("precision", ["fp64", "fp32"])
def test_gpu_engine_against_cpu_engine(all_jobs, name, precision):
    job = with_options(all_jobs[name], precision=precision, paths=2**14)
    first, count = 333, 2**14 - 333
    ours, theirs = gpu.batch_sums(job, first, count), cpu.batch_sums(job, first, count)
    rtol = 1e-12 if precision == "fp64" else 1e-5
    np.testing.assert_allclose(ours.sum(axis=1), theirs.sum(axis=1), rtol=rtol)
    np.testing.assert_allclose(ours, theirs, rtol=rtol * 10, atol=1e-6 * np.abs(theirs).max())
