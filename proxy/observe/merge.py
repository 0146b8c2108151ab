"""Summing the metrics of several workers into one exposition, so one scrape sees them all.

With `--workers N` every worker keeps its own counters (they are plain dicts on its hot path,
`proxy.observe.metrics`), and whichever worker a scrape reaches must answer for all of them.
prometheus_client's multiprocess mode does not apply: it works on its own value classes backed
by files, not on custom collectors like latchgate's. So the worker that is scraped fetches the
others' text expositions and merges them here: a pure function from texts to text, which the
tests run without any process.

Samples with the same name and labels are summed (counters, histogram buckets, `_sum` and
`_count`, and gauges such as memory or requests in flight), except for the few series where a
sum means nothing; see `RULES`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

Combine = Callable[[float, float], float]

# Family name (as prometheus_client's parser names it: a counter without `_total`) -> how two
# workers' values of one series combine, when summing would be wrong.
RULES: dict[str, Combine] = {
    # Every worker holds the same latches (they are shared between workers): a sum would count
    # each latch once per worker. Max, not any one worker's: one that just learned a latch has
    # it before the others heard.
    "latchgate_latches": max,
    # The shared state backend is up only if it is up for every worker.
    "latchgate_state_backend_up": min,
    # Each worker checks a pool's members itself: a member is healthy if every worker finds
    # it so, and its slots are what the server has, not a sum (in flight and counts do add up).
    "latchgate_member_healthy": min,
    "latchgate_member_slots": max,
    # The service started when its first process did.
    "process_start_time_seconds": min,
    # A limit each process has, not an amount they share.
    "process_max_fds": max,
    # A constant 1 per label set (the interpreter's version): one copy.
    "python_info": max,
}

WORKERS = "latchgate_workers"
_WORKERS_HELP = "Workers whose metrics this scrape sums (the one answering included)."

SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


def _rule(family: str) -> Combine | None:
    rule = RULES.get(family)
    if rule is None and family.endswith("_created"):
        return min  # when a series was created: the earliest worker's
    return rule


class _Merged:
    """One family being merged: its first description, and its series in first-seen order."""

    def __init__(self, first: Metric) -> None:
        self.metric = Metric(first.name, first.documentation, first.type, first.unit)
        self.combine: Combine | None = _rule(first.name)
        # dicts keep insertion order: a series stays where it was first seen
        self.index: dict[SeriesKey, int] = {}

    def add(self, family: Metric) -> None:
        samples = self.metric.samples
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            at = self.index.get(key)
            if at is None:
                self.index[key] = len(samples)
                samples.append(sample._replace(timestamp=None, exemplar=None))
                continue
            old = samples[at].value
            combine = self.combine
            value = old + sample.value if combine is None else combine(old, sample.value)
            samples[at] = samples[at]._replace(value=value)


class _Families(Collector):
    """Merged families as a collector, so prometheus_client's own writer renders them."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def merge_expositions(texts: Sequence[str]) -> str:
    """The Prometheus text expositions `texts` (one per worker) as one, plus `latchgate_workers`
    (how many were merged).

    Families and series come out in the order they were first seen, reading `texts` in order,
    so the same workers in the same order give the same layout. Raises ValueError on a text
    that is not an exposition.
    """
    merged: dict[str, _Merged] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            if family.name == WORKERS:
                continue  # a worker's own count (should it ever export one) is ours to give
            entry = merged.get(family.name)
            if entry is None:
                entry = merged[family.name] = _Merged(family)
            entry.add(family)
    workers = Metric(WORKERS, _WORKERS_HELP, "gauge")
    workers.add_sample(WORKERS, {}, float(len(texts)))
    families = [entry.metric for entry in merged.values()]
    return generate_latest(_Families([*families, workers])).decode()
