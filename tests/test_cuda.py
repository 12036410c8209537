"""Compiling the CUDA sources: every module carries a digest of all the sources, headers included, so that
CuPy's disk cache (keyed by a module's own text and options) never serves code built from an older header."""
from __future__ import annotations

import shutil

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
    assert code_after == code                 # the module's own text is unchanged...
    assert options_after != options           # ...but its options, and so CuPy's cache key, are not


def test_the_digest_ignores_files_that_are_not_sources(sources):
    digest = cuda.sources_digest()
    (sources / "notes.txt").write_text("not compiled")
    cuda.sources_digest.cache_clear()
    assert cuda.sources_digest() == digest
