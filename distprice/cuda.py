"""CuPy and a CUDA device, as every GPU engine asks for them, and the CUDA C++ sources shipped with distprice
(``kernels/``, installed as ``distprice.kernels``) with their compilation by CuPy (NVRTC at run time; CuPy keeps
the compiled code on disk).

CuPy's disk cache is keyed by a module's own source text and options, not by the text of the headers it
includes: after an upgrade that changed only a header, a cached module would run the old code. Every module
is therefore compiled with a define naming a digest of every source in the folder (:func:`sources_digest`).

A process loads each module once, whatever its threads (:func:`load_kernel`): CuPy unloads a module as soon as
nothing refers to it, and a second copy loaded by a thread racing another would be unloaded when that thread let
go of it, its kernels perhaps still queued on the device. CuPy loads its own kernels the same way: the one
distprice launches, the fill of :func:`full`, is loaded under the same lock.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.resources
import os
import threading
from pathlib import Path
from typing import Any

from .errors import GpuUnavailableError


def require_cupy():
    """CuPy, once a CUDA device is known to be usable; raises :class:`GpuUnavailableError` otherwise."""
    try:
        import cupy
    except ImportError as error:
        raise GpuUnavailableError(f"the GPU engines need CuPy (pip install 'distprice[gpu]'): {error}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as error:
        raise GpuUnavailableError(f"no usable CUDA device: {error}") from None
    if count == 0:
        raise GpuUnavailableError("no CUDA device is visible")
    return cupy


def visible_gpus() -> list[str]:
    """This process's GPUs as ``CUDA_VISIBLE_DEVICES`` names them (indices or UUIDs), or by index."""
    names = os.environ.get("CUDA_VISIBLE_DEVICES")
    if names is not None:
        return [name.strip() for name in names.split(",") if name.strip()]
    import cupy

    return [str(i) for i in range(cupy.cuda.runtime.getDeviceCount())]


@functools.cache
def gpu_available() -> bool:
    """Whether CuPy and a CUDA device are usable in this process."""
    try:
        require_cupy()
    except GpuUnavailableError:
        return False
    return True


def device_place() -> str:
    """Where the current CUDA device is: this host's name and the device's PCI bus id (``host/0000:1B:00.0``),
    the same for every process that uses that device, whatever ``CUDA_VISIBLE_DEVICES`` numbers it."""
    import socket

    return f"{socket.gethostname()}/{require_cupy().cuda.Device().pci_bus_id}"


def mps_running() -> bool:
    """Whether NVIDIA's Multi-Process Service serves this host's GPUs: its control daemon's pipe is in
    ``CUDA_MPS_PIPE_DIRECTORY`` (default ``/tmp/nvidia-mps``)."""
    return (Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or "/tmp/nvidia-mps") / "control").exists()


@contextlib.contextmanager
def gpu_turn():
    """This process's turn on the current CUDA device, held by one process (and thread) of this host at a time: a
    lock on a file named by the device's PCI bus id in the temporary folder. Processes that share a GPU and
    launch in turns, each waiting for its kernels before it lets go, run their kernels whole, one after another;
    launched at once, they would share the GPU by time slices (10⁶ R1 rows on an H200 shared by eight processes:
    the GPU busy 0.84 s, against 0.75 s in turns). Under MPS (:func:`mps_running`) their kernels run side by side, and
    every turn is free."""
    import fcntl
    import tempfile

    if mps_running():
        yield
        return
    bus = require_cupy().cuda.Device().pci_bus_id.replace(":", "-")
    with open(Path(tempfile.gettempdir()) / f"distprice-gpu-{bus}.lock", "a") as lock:  # a file of its own per turn
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def device_name() -> str:
    """The name of the current CUDA device (e.g. ``NVIDIA H100 80GB HBM3``)."""
    return _device_name(require_cupy().cuda.Device().id)


@functools.cache
def _device_name(device_id: int) -> str:
    # cudaGetDeviceProperties reads every property, some slowly (milliseconds): once per device
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(device_id)["name"].decode()


def kernel_dir() -> Path:
    """The CUDA sources: the installed package data, or ``kernels/`` beside the package in a source checkout."""
    try:
        return Path(str(importlib.resources.files("distprice.kernels")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[1] / "kernels"


@functools.cache
def sources_digest() -> str:
    """A digest of the names and texts of every ``.cu`` and ``.cuh`` source (16 hex digits; once per process)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in kernel_dir().iterdir() if p.suffix in (".cu", ".cuh")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def compile_module(cupy, source: str, options: tuple[str, ...] = ()):
    """``cupy.RawModule`` of ``kernels/<source>`` with ``options``, the sources' folder on the include path and
    the sources' digest defined (``DISTPRICE_SOURCES``)."""
    kernels = kernel_dir()
    return cupy.RawModule(
        code=(kernels / source).read_text(),
        options=(*options, f"-I{kernels}", f"-DDISTPRICE_SOURCES=0x{sources_digest()}"),
    )


_LOADING = threading.Lock()
_MODULES: dict[tuple, Any] = {}
_KERNELS: dict[tuple, Any] = {}


def load_kernel(source: str, name: str, options: tuple[str, ...] = ()):
    """The kernel ``name`` of ``kernels/<source>`` compiled with ``options`` (:func:`compile_module`) on the current
    device: each module compiled and loaded once per process and device, under a lock, and kept for the life of
    the process (see the module's notes)."""
    cupy = require_cupy()
    device = cupy.cuda.Device().id
    with _LOADING:
        key = (source, options, device)
        if key not in _MODULES:
            _MODULES[key] = compile_module(cupy, source, options)
        if key + (name,) not in _KERNELS:
            _KERNELS[key + (name,)] = _MODULES[key].get_function(name)
        return _KERNELS[key + (name,)]


def allow_shared(kernel, shared: int) -> None:
    """Lets ``kernel`` take ``shared`` bytes of dynamic shared memory a block: its limit only ever raised, under the
    lock (a thread lowering it between another's raising it and launching would fail that launch)."""
    with _LOADING:
        if shared > kernel.max_dynamic_shared_size_bytes:
            kernel.max_dynamic_shared_size_bytes = shared


_FILLED: set[tuple] = set()


def full(n: int, value: float, dtype):
    """``cupy.full(n, value, dtype)`` on the current device; the first of each dtype in this process under the lock
    of :func:`load_kernel`, which CuPy's fill kernel is loaded by."""
    cupy = require_cupy()
    key = (str(dtype), cupy.cuda.Device().id)
    if key in _FILLED:
        return cupy.full(n, value, dtype=dtype)
    with _LOADING:
        out = cupy.full(n, value, dtype=dtype)
        _FILLED.add(key)
        return out
