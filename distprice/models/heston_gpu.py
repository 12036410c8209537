"""The GPU Heston engine: a launcher for ``kernels/heston.cu`` (fp64, ``gl20``), through CuPy.

A surface is uploaded once (quotes sorted by maturity, the cos / sin table of the Gauss-Laguerre nodes);
each evaluation uploads the population (P x 5), runs ``heston_terms`` (a thread per maturity, member and point),
``heston_errors`` (one thread per quote and GROUP members, block sums in a fixed order) and ``heston_sums``,
and copies back P values. The kernels' arithmetic lives in ``kernels/heston.cuh``. The engine talks to the
device through a small interface (:class:`CupyDevice`) so that the tests can run the same launches on a host
build of the kernels.
"""

from __future__ import annotations

import numpy as np

from ..cuda import load_kernel, require_cupy
from .heston_quotes import Surface
from .heston_reference import GL_NODES
from .quadrature import laguerre

SOURCE = "heston.cu"
BLOCK = 256
"""Threads per block of heston_errors and heston_prices (a power of two: the block sum is a tree)."""
GROUP = 8
"""Members per thread of heston_errors and heston_prices: a table entry read once serves GROUP members."""
TERM_TASKS = 4
"""(maturity, member) tasks per block of heston_terms: a thread per point (4 control points and the nodes)."""
TERM_THREADS = TERM_TASKS * (4 + GL_NODES)
SUM_THREADS = 64
DEFINES = (f"-DBLOCK={BLOCK}", f"-DGROUP={GROUP}", f"-DNODES={GL_NODES}", f"-DTERM_TASKS={TERM_TASKS}")
OPTIONS = ("-std=c++17", *DEFINES)

_SURFACE = (
    ("term", "const int*"),
    ("cosines", "const double*"),
    ("sines", "const double*"),
    ("log_strike", "const double*"),
    ("strike", "const double*"),
)
_FACTORS = (
    ("variance", "const double*"),
    ("factor_re", "const double*"),
    ("factor_im", "const double*"),
    ("n_nodes", "int"),
)
KERNEL_ARGUMENTS = {
    "heston_terms": (
        ("params", "const double*"),
        ("members", "int"),
        ("times", "const double*"),
        ("terms", "int"),
        ("nodes", "const double*"),
        ("weights", "const double*"),
        ("variance", "double*"),
        ("factor_re", "double*"),
        ("factor_im", "double*"),
    ),
    "heston_errors": (
        ("members", "int"),
        ("quotes", "int"),
        _SURFACE[0],
        *_FACTORS,
        *_SURFACE[1:],
        ("market", "const double*"),
        ("vega", "const double*"),
        ("weight", "const double*"),
        ("partial", "double*"),
    ),
    "heston_sums": (("members", "int"), ("blocks", "int"), ("partial", "const double*"), ("objective", "double*")),
    "heston_prices": (
        ("members", "int"),
        ("quotes", "int"),
        _SURFACE[0],
        *_FACTORS,
        *_SURFACE[1:],
        ("prices", "double*"),
    ),
}
"""Each kernel's parameters in order with their C types, as ``kernels/heston.cu`` declares them: launches pass
arguments by name through these lists (and the tests build a host emulation of the kernels from them)."""


class CupyDevice:
    """The current CUDA device: arrays in and out, and launches of ``heston.cu``'s kernels by name."""

    def __init__(self):
        self.cupy = require_cupy()
        self.kernels = {name: load_kernel(SOURCE, name, OPTIONS) for name in KERNEL_ARGUMENTS}  # once per process

    def upload(self, array: np.ndarray):
        return self.cupy.asarray(np.ascontiguousarray(array))

    def empty(self, shape):
        return self.cupy.empty(shape, dtype=np.float64)

    def download(self, array) -> np.ndarray:
        return array.get()

    def rotations(self, nodes: np.ndarray, log_strike: np.ndarray):
        """:func:`~.quadrature.rotations` computed on the device (nodes x quotes cosines and sines: 16 bytes per
        node and quote, far quicker there than on the host and then copied)."""
        angle = self.cupy.outer(self.cupy.asarray(nodes), self.cupy.asarray(log_strike))
        return self.cupy.cos(angle), self.cupy.sin(angle)

    def launch(self, kernel: str, grid: tuple, block: int, values: dict) -> None:
        args = tuple(
            np.int32(values[name]) if kind == "int" else values[name] for name, kind in KERNEL_ARGUMENTS[kernel]
        )
        self.kernels[kernel](grid, (block,), args)


def surface_arrays(surface: Surface) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """What the kernels read of a surface but the rotations (built on the device: :meth:`CupyDevice.rotations`),
    as contiguous host arrays in the layouts of ``kernels/heston.cuh`` (quotes sorted by maturity), and the sort
    order (see :meth:`Surface.by_maturity`)."""
    order, s = surface.by_maturity()
    nodes, weights = laguerre(GL_NODES)
    host = {
        "times": s.times,
        "term": s.term.astype(np.int32),
        "log_strike": s.log_strike,
        "strike": s.strike,
        "market": s.market,
        "vega": s.vega,
        "weight": s.weight,
        "nodes": nodes,
        "weights": weights,
    }
    return order, {name: np.ascontiguousarray(array) for name, array in host.items()}


def _blocks(n: int, threads: int) -> int:
    return (n + threads - 1) // threads


class GpuEngine:
    """Prices and objective of one surface for a population ``(P, 5)`` on a device (default: CUDA via CuPy).
    The work arrays of a population size are allocated once and reused by every evaluation."""

    name = "gpu"
    quadrature = "gl20"

    def __init__(self, surface: Surface, device=None):
        self.device = device or CupyDevice()
        self.surface = surface
        self.order, host = surface_arrays(surface)
        self.arrays = {name: self.device.upload(array) for name, array in host.items()}
        self.arrays["cosines"], self.arrays["sines"] = self.device.rotations(host["nodes"], host["log_strike"])
        self.arrays.update(terms=len(surface.times), quotes=surface.size, n_nodes=GL_NODES)
        self._work: dict[int, dict] = {}

    def _values(self, members: int) -> dict:
        """The launch values for a population of ``members``: the surface's arrays and the work arrays."""
        if members not in self._work:
            terms, quotes = self.arrays["terms"], self.arrays["quotes"]
            blocks = _blocks(quotes, BLOCK)
            self._work[members] = {
                **self.arrays,
                "members": members,
                "blocks": blocks,
                "variance": self.device.empty((terms, members)),
                "factor_re": self.device.empty((terms, GL_NODES, members)),
                "factor_im": self.device.empty((terms, GL_NODES, members)),
                "partial": self.device.empty((members, blocks)),
                "objective": self.device.empty(members),
                "prices": self.device.empty((members, quotes)),
            }
        return self._work[members]

    def _terms(self, params) -> dict:
        """Uploads the population and runs heston_terms: the launch values of the later kernels."""
        params = np.ascontiguousarray(np.atleast_2d(params), dtype=np.float64)
        values = {**self._values(len(params)), "params": self.device.upload(params)}
        tasks = values["terms"] * values["members"]
        self.device.launch("heston_terms", (_blocks(tasks, TERM_TASKS),), TERM_THREADS, values)
        return values

    def objective(self, params) -> np.ndarray:
        """``f`` per member (+inf where a price is not finite)."""
        values = self._terms(params)
        members = values["members"]
        self.device.launch("heston_errors", (values["blocks"], _blocks(members, GROUP)), BLOCK, values)
        self.device.launch("heston_sums", (_blocks(members, SUM_THREADS),), SUM_THREADS, values)
        return self.device.download(values["objective"])

    def prices(self, params) -> np.ndarray:
        """Normalised model calls ``(P, quotes)`` in the surface's quote order; NaN where the pricer broke down."""
        values = self._terms(params)
        members = values["members"]
        self.device.launch("heston_prices", (values["blocks"], _blocks(members, GROUP)), BLOCK, values)
        out = np.empty((members, self.surface.size))
        out[:, self.order] = self.device.download(values["prices"])
        return out
