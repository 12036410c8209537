"""Host side of the GPU engines (runs without a GPU): layouts, bin packing, packaging, engine resolution."""

import importlib.resources
import re
import subprocess

import numpy as np
import pytest

from distprice.cuda import gpu_available, kernel_dir
from distprice.errors import GpuUnavailableError
from distprice.lattice.engines import ENGINES, resolve
from distprice.lattice.gpu import C_TYPES, KERNEL_ARGS
from distprice.lattice.layouts import (
    FLAT_NODES,
    WARP,
    choose_flat_shape,
    flat_layout,
    flat_shared_bytes,
    flat_thread_steps,
    outer_layout,
    shape_sample,
)

from utils import nvcc, require_compiler


def shapes(seed=0, n=5000):
    rng = np.random.default_rng(seed)
    return 2 * rng.integers(1, 256, n) + 1, rng.integers(1, 1201, n)


@pytest.mark.parametrize("nodes,threads", [(1, 256), (1, 1024), (2, 256), (2, 512), (4, 256)])
def test_flat_bins_hold_every_row_once_and_fit(nodes, threads):
    width, height = shapes()
    capacity = nodes * threads
    width = np.minimum(width, capacity - 1)
    layout = flat_layout(width, height, threads, nodes)
    assert layout.capacity == capacity
    assert sorted(layout.order) == list(range(len(width)))
    first = layout.bin_first
    assert first[0] == 0 and first[-1] == len(width) and np.all(np.diff(first) >= 1)
    for b in range(layout.bins):
        members = layout.order[first[b] : first[b + 1]]
        padded = -(-width[members] // nodes) * nodes
        assert padded.sum() <= capacity
        np.testing.assert_array_equal(layout.node_offset[first[b] : first[b + 1]], np.cumsum(padded) - padded)
        assert np.all(layout.node_offset[first[b] : first[b + 1]] % nodes == 0)
        assert layout.bin_height[b] == height[members].max()
    counts = np.diff(first).astype(np.int64)
    np.testing.assert_array_equal(layout.alpha_base[1:], np.cumsum(layout.bin_height.astype(np.int64) * counts)[:-1])


@pytest.mark.parametrize("nodes,threads", [(2, 256), (2, 1024), (4, 544)])
def test_aligned_flat_bins_cut_each_tree_by_warps_at_its_own_places(nodes, threads):
    """A launch of forward passes: a tree of at most 32 lanes within one warp, a wider one from a warp's first
    lane or to a warp's last, by its lanes past its whole warps; trees one after another without overlap; every
    row once, as the plain layout holds it."""
    width, height = shapes(3)
    width = np.minimum(width, nodes * threads - 1)
    layout = flat_layout(width, height, threads, nodes, aligned=True)
    assert sorted(layout.order) == list(range(len(width)))
    first = layout.bin_first
    for b in range(layout.bins):
        members = layout.order[first[b] : first[b + 1]]
        lanes = -(-width[members] // nodes)
        start = layout.node_offset[first[b] : first[b + 1]] // nodes
        assert np.all(layout.node_offset[first[b] : first[b + 1]] % nodes == 0)
        assert np.all(start[1:] >= start[:-1] + lanes[:-1]) and start[-1] + lanes[-1] <= threads
        small = lanes <= WARP
        assert np.all(start[small] // WARP == (start[small] + lanes[small] - 1) // WARP)
        leading = lanes % WARP <= WARP // 2  # a wide tree of a short last warp starts on a warp, another ends on one
        assert np.all(start[~small & leading] % WARP == 0)
        assert np.all((start + lanes)[~small & ~leading] % WARP == 0)
        assert layout.bin_height[b] == height[members].max()
    plain = flat_layout(width, height, threads, nodes)
    assert layout.bins <= 1.2 * plain.bins  # the lanes skipped to reach a warp
    small = width % 60 + 3  # at most a warp's lanes: they fill the warps' rests
    assert (
        flat_layout(small, height, threads, nodes, aligned=True).bins
        <= 1.05 * flat_layout(small, height, threads, nodes).bins
    )


def forward_sum(values, start, nodes):
    """A tree's S~ as flat.cu sums it (node values already times their discounts, ``values[p]`` at node
    ``start + p`` of its bin): each thread its nodes in turn, a segmented Hillis-Steele scan by shuffles within
    each warp (a lane adds the value d lanes down, d = 1, 2, 4, 8, 16, if that lane is in its segment), the
    tree's last thread its own, then its earlier warps' last lanes, latest first."""
    lanes = -(-len(values) // nodes)
    first = start // nodes
    threads = -(-(first + lanes) // WARP) * WARP
    v = np.zeros(threads)
    for t in range(first, first + lanes):
        for u in range(nodes):
            p = (t - first) * nodes + u
            if p < len(values):
                v[t] = v[t] + values[p]
    segment = np.array([max(first - (t // WARP) * WARP, 0) for t in range(threads)])
    for d in (1, 2, 4, 8, 16):
        shifted = v.copy()
        lane = np.arange(threads) % WARP
        ok = lane - d >= 0
        shifted[ok] = v[np.arange(threads)[ok] - d]
        v = np.where(lane - d >= segment, v + shifted, v)
    last = first + lanes - 1
    total = v[last]
    for warp in range(last // WARP - 1, first // WARP - 1, -1):
        total = total + v[warp * WARP + WARP - 1]
    return total


def test_an_aligned_trees_forward_sums_are_the_same_bits_wherever_it_lies():
    """flat.cu's grouping of a tree's sums follows its lanes' place among the warps: in aligned layouts a tree
    is summed alike at every place they give it; at any place, a tree wider than a warp is not."""
    rng = np.random.default_rng(4)
    widths = shapes(5, 4000)[0]
    for tree in (
        9,
        41,
        63,
        121,
        201,
        511,
    ):  # node counts: within a warp's lanes, and across warps (61 lanes: to a warp's end)
        values = rng.lognormal(0.0, 3.0, tree)
        places, sums = set(), set()
        for _ in range(16):
            width = np.concatenate([rng.choice(widths, 40), [tree]])
            height = rng.integers(50, 60, 41)
            layout = flat_layout(width, height, 512, FLAT_NODES, aligned=True)
            place = int(layout.node_offset[np.flatnonzero(layout.order == 40)[0]])
            places.add(place)
            sums.add(forward_sum(values, place, FLAT_NODES))
        assert len(places) > 1 and len(sums) == 1, tree
        anywhere = {forward_sum(values, place, FLAT_NODES) for place in range(0, 4 * WARP * FLAT_NODES, FLAT_NODES)}
        assert len(anywhere) > 1 or tree <= WARP * FLAT_NODES, tree


def test_flat_packing_is_tight_and_keeps_heights_together():
    width, height = shapes(1, 20000)
    layout = flat_layout(width, height, 512, 2)
    useful = (2 * width * height).sum()
    assert useful / layout.thread_steps() > 0.93
    assert layout.bin_height[0] == height.max() and layout.bin_height[-1] <= np.sort(height)[len(height) // 10]


@pytest.mark.parametrize("seed", range(4))
def test_thread_steps_without_a_layout_equal_the_layouts(seed):
    width, height = shapes(seed, 3000)
    height[::7] = height[3]  # ties in height
    for nodes, threads in ((1, 512), (2, 256), (2, 416), (2, 1024), (4, 544)):
        assert (
            flat_thread_steps(width, height, threads, nodes)
            == flat_layout(width, height, threads, nodes).thread_steps()
        )
    assert flat_thread_steps(width[:0], height[:0], 256) == 0


@pytest.mark.parametrize("n", [1, 5, 4096, 4097, 10_000, 123_457])
def test_shape_sample_is_spread_and_holds_the_widest(n):
    width = np.random.default_rng(n).integers(1, 100, n)
    sample = shape_sample(width, 4096)
    assert np.all(np.diff(sample) > 0) and sample[0] == 0 and sample[-1] == n - 1
    assert len(sample) == min(n, 4096) + (np.argmax(width) not in np.linspace(0, n - 1, 4096).astype(int))
    assert np.argmax(width) in sample


def test_flat_refuses_trees_wider_than_the_bin():
    with pytest.raises(ValueError, match="width 301"):
        flat_layout(np.array([301, 7]), np.array([10, 10]), 128, 2)


def test_flat_shape_fits_the_widest_and_packs_uniform_widths():
    # 259-wide trees (260 padded) two or three to a block of 288 or 416 threads, >90% of the nodes busy;
    # at 256 threads one would fit (51% busy)
    width, height = np.full(300, 259), np.full(300, 606)
    nodes, threads = choose_flat_shape(width, height)
    assert nodes == FLAT_NODES and threads in (288, 416)
    assert (2 * width * height).sum() / flat_layout(width, height, threads, nodes).thread_steps() > 0.9
    width, height = shapes()
    assert choose_flat_shape(width, height)[0] == FLAT_NODES
    assert choose_flat_shape(np.array([2057]), np.array([5])) == (4, 544)
    assert choose_flat_shape(np.array([511]), np.array([5])) == (2, 256)
    assert choose_flat_shape(np.array([4017]), np.array([5])) == (4, 1024)
    with pytest.raises(ValueError, match="width 4419"):
        choose_flat_shape(np.array([4419]), np.array([5]))


def test_flat_shared_memory_fits_a_multiprocessor():
    width, height = shapes()
    layout = flat_layout(width, height, 1024, 4)
    assert flat_shared_bytes(layout, np.float64) <= 227 * 1024
    assert flat_shared_bytes(layout, np.float32) < flat_shared_bytes(layout, np.float64)


@pytest.mark.parametrize("lanes,sort", [(WARP, True), (WARP, False), (1, False), (None, False)])
def test_outer_layout_pads_per_group(lanes, sort):
    width, height = shapes(2, 1000)
    layout = outer_layout(width, height, lanes=lanes or len(width), sort=sort)
    assert sorted(layout.order) == list(range(len(width)))
    if sort:
        assert np.all(np.diff(width[layout.order]) <= 0)
    else:
        np.testing.assert_array_equal(layout.order, np.arange(len(width)))
    lanes = layout.lanes
    groups = -(-len(width) // lanes)
    assert len(layout.pitch) == groups
    for g in range(groups):
        members = layout.order[g * lanes : (g + 1) * lanes]
        assert layout.pitch[g] == width[members].max()
    assert layout.row_elements == int((2 * layout.pitch.astype(np.int64) * lanes).sum())
    # warp padding costs little over the exact footprint when sorted; global padding costs the most
    exact = 2 * width.sum()
    if lanes == WARP and sort:
        assert layout.row_elements < 1.05 * exact


def test_kernel_sources_are_found_and_ship_with_the_package():
    sources = {"outer.cu", "flat.cu", "wide.cu", "adjust.cu", "common.cuh", "curve.cuh", "events.cuh"}
    assert sources <= {p.name for p in kernel_dir().iterdir()}
    try:
        installed = importlib.resources.files("distprice.kernels")
    except ModuleNotFoundError:
        pytest.skip("distprice is imported from a source tree that is not installed")
    assert sources <= {p.name for p in installed.iterdir()}


def test_gpu_engines_are_listed_and_fail_clearly_without_a_gpu():
    assert {"gpu-outer", "gpu-flat"} <= set(ENGINES)
    if gpu_available():
        pytest.skip("a GPU is visible here")
    assert resolve("auto") == "auto"
    with pytest.raises(GpuUnavailableError, match="engine gpu-flat cannot run here"):
        resolve("gpu-flat")


def test_kernel_arguments_are_declared_once_for_the_launcher_and_the_kernels():
    """The launcher passes KERNEL_ARGS in order; the kernels' PORTFOLIO_PARAMS must list the same names and
    element types (``in_<name>``), and the Portfolio struct the same names in the same order."""
    source = (kernel_dir() / "common.cuh").read_text()
    macro = source[source.index("#define PORTFOLIO_PARAMS") : source.index("#define PORTFOLIO_ARGS")]
    declared = [
        (name, " ".join(ctype.split())) for ctype, name in re.findall(r"const\s+([a-z ]+?)\s*\*\s*in_(\w+)", macro)
    ]
    assert declared == list(KERNEL_ARGS)
    struct = source[source.index("struct Portfolio {") : source.index("};", source.index("struct Portfolio {"))]
    assert re.findall(r"\*\s*(\w+);", struct) == [name for name, _ in KERNEL_ARGS]
    assert all(ctype in C_TYPES for _, ctype in KERNEL_ARGS)


@pytest.mark.parametrize("source", ["outer.cu", "flat.cu", "wide.cu", "adjust.cu"])
def test_kernels_compile_in_both_precisions(tmp_path, source):
    """Without a GPU, nvcc still compiles the kernels to PTX: a syntax or type error is caught here, not on a
    GPU machine."""
    compiler = require_compiler("nvcc", nvcc())
    for real in ("double", "float"):
        result = subprocess.run(
            [
                compiler,
                "-std=c++17",
                "-arch=compute_90",
                "--ptx",
                f"-DREAL={real}",
                "-DFLAT_NODES=2",
                f"-I{kernel_dir()}",
                str(kernel_dir() / source),
                "-o",
                str(tmp_path / "k.ptx"),
            ],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr
