"""Pricing metrics on the scheduler's Prometheus endpoint (``/metrics`` on the dashboard port).

Each pricing task logs an event (rows, node-steps, seconds of pricing, kernel seconds, engine) under
:data:`TOPIC`; the scheduler plugin :class:`PricingMetrics` adds them up per worker and exports them beside
Dask's own:

- ``distprice_instruments_priced_total{worker}``: instruments priced (one per row and scenario);
- ``distprice_node_steps_total{worker}``: node-steps priced, Σ 2 · width · height per scenario;
- ``distprice_pricing_seconds_total{worker}``: seconds spent in the pricing tasks (host layout included);
- ``distprice_kernel_seconds_total{worker}``: of those, seconds in the GPU kernels (CUDA events) or the CPU
  engines' pricing loops;
- ``distprice_node_steps_per_second{worker}``: node-steps over pricing seconds, the worker's speed.
"""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict

from distributed.diagnostics.plugin import SchedulerPlugin

TOPIC = "distprice-pricing"
PLUGIN_NAME = "distprice-metrics"
_TOTALS = ("rows", "node_steps", "seconds", "kernel_seconds")


def log_pricing(rows: int, node_steps: float, seconds: float, kernel_seconds: float, engine: str) -> None:
    """Reports one priced chunk to the scheduler (a no-op outside a Dask worker)."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:
        return
    worker.log_event(
        TOPIC,
        {
            "worker": worker.address,
            "rows": int(rows),
            "node_steps": float(node_steps),
            "seconds": float(seconds),
            "kernel_seconds": float(kernel_seconds),
            "engine": engine,
        },
    )


class _Collector:
    """A Prometheus collector over the running totals of the plugins of this process (one per scheduler)."""

    plugins: weakref.WeakSet[PricingMetrics] = weakref.WeakSet()
    registered = False

    @classmethod
    def add(cls, plugin: PricingMetrics) -> None:
        try:
            from prometheus_client import REGISTRY
        except ImportError:  # the scheduler has no Prometheus endpoint either
            return
        cls.plugins.add(plugin)
        if not cls.registered:
            REGISTRY.register(cls())
            cls.registered = True

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        rows = CounterMetricFamily(
            "distprice_instruments_priced", "Instruments priced (rows x scenarios)", labels=["worker"]
        )
        steps = CounterMetricFamily("distprice_node_steps", "Tree node-steps priced", labels=["worker"])
        seconds = CounterMetricFamily("distprice_pricing_seconds", "Seconds spent in pricing tasks", labels=["worker"])
        kernel = CounterMetricFamily(
            "distprice_kernel_seconds",
            "Seconds of pricing tasks spent in the GPU kernels or the CPU engines' pricing loops",
            labels=["worker"],
        )
        speed = GaugeMetricFamily(
            "distprice_node_steps_per_second", "Node-steps per second of pricing", labels=["worker"]
        )
        for plugin in list(self.plugins):
            for worker, total in plugin.snapshot().items():
                rows.add_metric([worker], total["rows"])
                steps.add_metric([worker], total["node_steps"])
                seconds.add_metric([worker], total["seconds"])
                kernel.add_metric([worker], total["kernel_seconds"])
                speed.add_metric([worker], total["node_steps"] / total["seconds"] if total["seconds"] > 0 else 0.0)
        yield from (rows, steps, seconds, kernel, speed)


class PricingMetrics(SchedulerPlugin):
    """Adds up the pricing events of every worker and exports them to Prometheus (see the module docstring)."""

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self):
        self._totals = defaultdict(lambda: dict.fromkeys(_TOTALS, 0.0))
        self._lock = threading.Lock()

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.__init__()

    async def start(self, scheduler) -> None:
        _Collector.add(self)

    def log_event(self, topic: str, msg) -> None:
        if topic != TOPIC:
            return
        with self._lock:
            total = self._totals[msg["worker"]]
            for key in _TOTALS:
                total[key] += msg[key]

    def snapshot(self) -> dict[str, dict]:
        with self._lock:
            return {worker: dict(total) for worker, total in self._totals.items()}
