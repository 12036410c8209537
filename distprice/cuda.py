"""CuPy and a CUDA device, as every GPU engine asks for them, and the CUDA C++ sources shipped with distprice
(``kernels/``, installed as ``distprice.kernels``) with their compilation by CuPy (NVRTC at run time; CuPy keeps
the compiled code on disk).

CuPy's disk cache is keyed by a module's own source text and options, not by the text of the headers it
includes: after an upgrade that changed only a header, a cached module would run the old code. Every module
is therefore compiled with a define naming a digest of every source in the folder (:func:`sources_digest`).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.resources
from pathlib import Path

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
    return cupy.RawModule(code=(kernels / source).read_text(),
                          options=(*options, f"-I{kernels}", f"-DDISTPRICE_SOURCES=0x{sources_digest()}"))
