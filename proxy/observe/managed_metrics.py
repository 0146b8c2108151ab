"""The managed llama-servers' series (`latchgate_managed_*`), read from them at scrape time.

Like the pool members' series, nothing on the request path moves these: each server's own
counters (`proxy.managed.process.ServerStats`) are the truth, and a collector turns them into
families when Prometheus scrapes. No managed upstream, no families.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class ManagedStats(NamedTuple):
    """What a scrape shows of one managed server."""

    upstream: str
    ready: bool
    running: bool  # holds one of the places `max_running` allows (loading, ready, restarting)
    leases: int
    starts: int
    restarts: int
    start_failures: int
    stops: dict[str, int]
    load_seconds: float


_FAMILIES: tuple[tuple[str, str, str, Callable[[ManagedStats], float]], ...] = (
    ("latchgate_managed_up", "gauge", "1 while the managed llama-server is ready to serve.",
     lambda m: 1 if m.ready else 0),
    ("latchgate_managed_running", "gauge",
     "1 while the managed llama-server holds a place (loading, ready or being restarted).",
     lambda m: 1 if m.running else 0),
    ("latchgate_managed_requests", "gauge",
     "Requests holding the managed llama-server (it is not stopped while any do).",
     lambda m: m.leases),
    ("latchgate_managed_starts", "counter", "Starts of the managed llama-server (restarts too).",
     lambda m: m.starts),
    ("latchgate_managed_restarts", "counter",
     "Restarts after the managed llama-server exited on its own.", lambda m: m.restarts),
    ("latchgate_managed_start_failures", "counter",
     "Starts that did not become ready (it exited, or start_timeout passed).",
     lambda m: m.start_failures),
    ("latchgate_managed_load_seconds", "gauge",
     "Seconds its last start took to be ready.", lambda m: m.load_seconds),
)  # fmt: skip


class ManagedCollector(Collector):
    """Per-managed-server series from `source`, read at scrape time."""

    def __init__(self) -> None:
        self.source: Callable[[], Iterable[ManagedStats]] = list

    def describe(self) -> list[Metric]:
        return []  # read at scrape time: nothing to check for name collisions up front

    def collect(self) -> Iterator[Metric]:
        rows = list(self.source())
        if not rows:
            return
        for name, kind, documentation, value in _FAMILIES:
            family: Metric
            if kind == "counter":
                family = CounterMetricFamily(name, documentation, labels=("upstream",))
            else:
                family = GaugeMetricFamily(name, documentation, labels=("upstream",))
            for row in rows:
                family.add_metric((row.upstream,), value(row))
            yield family
        stops = CounterMetricFamily(
            "latchgate_managed_stops",
            "Stops of the managed llama-server by reason: idle (idle_stop passed), swap (its "
            "place went to another model), shutdown.",
            labels=("upstream", "reason"),
        )
        for row in rows:
            for reason in ("idle", "swap", "shutdown"):
                stops.add_metric((row.upstream, reason), row.stops.get(reason, 0))
        yield stops
