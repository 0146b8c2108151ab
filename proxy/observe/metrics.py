"""Every Prometheus metric latchgate exports, and the one place events become counter moves.

Metrics are a product surface (operators watch refusal and retry rates in Grafana), so their names
and labels follow `spec/OBSERVABILITY.md` exactly and live here, not scattered through handlers.
Request-path stages never touch a counter: they record an `Event` on the request's
`RequestEvents`, and `Metrics.on_event` (registered as a listener) maps each kind to its counter,
by the rules written here and counted by `proxy.observe.counting`.
The few measurements that are not decisions (durations, tokens, in-flight requests, latches held)
have plain methods the request's owner calls once. The metrics moved on every request, and the
counters events move (an agent's request moves them: a call recovered, arguments repaired), are
plain dict accumulators rendered at scrape time (`FastCounter`, `FastHistogram`, `FastGauge`), not
prometheus_client objects: they are on the proxy's hot path, where a microsecond is 1% of
throughput. Their names, help, labels and buckets are the same; only `_created` samples are gone.

Two labels come from outside and would let a client or a server grow the number of series without
bound: `model` (a client may invent model names) and `field` (a server names the field it refuses).
`model` keeps the first `model_cap` distinct names and folds the rest into "other"; `field` is
limited to the droppable set of BEHAVIOUR 2.5, anything else becomes "other".
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    gc_collector,
    generate_latest,
    platform_collector,
    process_collector,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from proxy.observe import counting
from proxy.observe import events as ev
from proxy.observe.counting import EventCounter, ModelLabels, Rule
from proxy.observe.events import Listener
from proxy.observe.logs import write_failures
from proxy.observe.managed_metrics import ManagedCollector

OTHER = counting.OTHER  # the label of a value left out, or one that would grow the series

# Client request to last byte: a cached 1-token answer takes a few ms, a long agent turn on a
# local model can take minutes, and a model load before it more.
DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    20.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
)
# latchgate's own cost per request is tens of microseconds when nothing needs repair; the upper
# buckets catch a pathological schema sanitise or a big tool-call recovery.
OVERHEAD_BUCKETS = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)

# BEHAVIOUR 2.5: the default droppable fields. The families `mirostat*`, `dry_*`, `xtc_*` are
# listed with their known members; an unknown member folds to the family name rather than to
# "other", so the dashboard still says which sampler the server disliked.
DROPPABLE_FIELDS = frozenset(
    {
        "min_p",
        "top_k",
        "top_a",
        "typical_p",
        "tfs_z",
        "repeat_penalty",
        "repetition_penalty",
        "mirostat",
        "mirostat_tau",
        "mirostat_eta",
        "mirostat_mode",
        "dry_multiplier",
        "dry_base",
        "dry_allowed_length",
        "dry_penalty_last_n",
        "dry_sequence_breakers",
        "xtc_probability",
        "xtc_threshold",
        "min_tokens",
        "ignore_eos",
        "n_probs",
        "samplers",
        "id_slot",
        "cache_prompt",
        "chat_template_kwargs",
        "reasoning_budget",
        "reasoning_format",
        "options",
        "keep_alive",
        "think",
        "num_ctx",
        "user",
        "metadata",
        "store",
        "service_tier",
        "prompt_cache_key",
        "seed",
        "parallel_tool_calls",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "presence_penalty",
        "frequency_penalty",
    }
)


def field_label(field: str, allowed: frozenset[str] = DROPPABLE_FIELDS) -> str:
    """The `field` label for a dropped field: itself if droppable, its family, or "other"."""
    return counting.field_label(field, allowed)


# `str(status)` for every status a server can send, built once: a dict lookup is cheaper than
# formatting an int on every request. Never mutated; an unlisted status falls back to `str()`.
_STATUS_LABEL = {code: str(code) for code in range(100, 600)}


# -- accumulators for the metrics moved on every request ---------------------------------------
#
# prometheus_client's Counter/Histogram/Gauge take a lock, check observability and resolve a child
# on every move (~80 Python calls per request for the hot metrics); at ~10k req/s on one core each
# microsecond is 1% of throughput. These keep plain dicts instead and are rendered at scrape time
# by `collect()`. No locks: every move and every scrape runs on the event loop thread. `collect()`
# still snapshots each dict with `list()` (one C call) so a scrape from another thread could at
# worst read a half-done observation, never fail with "dict changed size".
# Unlike prometheus_client's objects they export no `_created` samples (nothing reads them).


class _FastValues(Collector):
    """Label-value tuple -> number, in `values`, moved by its owner directly; `FAMILY` says what
    kind of Prometheus metric it is rendered as."""

    FAMILY: type[CounterMetricFamily] | type[GaugeMetricFamily]

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.values: dict[tuple[str, ...], float] = {}

    def _family(self) -> CounterMetricFamily | GaugeMetricFamily:
        return self.FAMILY(self.name, self.documentation, labels=self.labelnames)

    def describe(self) -> list[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for labels, value in list(self.values.items()):
            family.add_metric(labels, value)
        yield family


class FastCounter(_FastValues):
    """A labelled counter (rendered with `_total`)."""

    FAMILY = CounterMetricFamily

    def add(self, labels: tuple[str, ...], amount: float = 1.0) -> None:
        """Count `amount` for `labels` (never down, as `counting.count`: written out here, since
        this runs interpreted on every request and a call to it would cost more than it does)."""
        values = self.values
        values[labels] = values.get(labels, 0.0) + (amount if amount > 0 else 0)


def _counter(
    registry: CollectorRegistry, name: str, documentation: str, labelnames: tuple[str, ...]
) -> FastCounter:
    """A `FastCounter` registered with `registry`: every counter an event moves is one, since
    agent requests move them (a recovered call, a repaired argument) and a prometheus_client
    `labels().inc()` is some 80 interpreted calls."""
    counter = FastCounter(name, documentation, labelnames)
    registry.register(counter)
    return counter


class FastGauge(_FastValues):
    """A labelled gauge."""

    FAMILY = GaugeMetricFamily


class FastHistogram(Collector):
    """A labelled histogram: per label tuple, per-bucket (not cumulative) counts, then the sum.

    A series is a list of len(bounds) + 2 floats: one count per finite upper bound, the +Inf
    bucket, and the sum last. Counts become cumulative only in `collect()`, so an observation is
    one `bisect_left` and two list increments.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: tuple[str, ...],
        buckets: tuple[float, ...],
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.bounds = tuple(b for b in buckets if b != float("inf"))
        # `le` exactly as prometheus_client writes it ("0.005", "5e-05", "1.0", "+Inf").
        self.les = (*(floatToGoString(b) for b in self.bounds), "+Inf")
        self.series: dict[tuple[str, ...], list[float]] = {}

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        """Count `value` in its bucket; `le` is inclusive, so a value equal to a bound is in it."""
        series = self.series.get(labels)
        if series is None:
            series = self.series[labels] = [0.0] * (len(self.bounds) + 2)
        # bisect_left gives the first bound >= value; past the last bound it is the +Inf slot.
        series[bisect_left(self.bounds, value)] += 1.0
        series[-1] += value

    def _family(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def describe(self) -> list[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for labels, series in list(self.series.items()):
            cumulative = 0.0
            buckets = []
            # The last slot is the sum, not a bucket.
            for le, count in zip(self.les, series[:-1], strict=True):
                cumulative += count
                buckets.append((le, cumulative))
            family.add_metric(labels, buckets, series[-1])
        yield family


class Metrics:
    """The registry and every latchgate metric; `on_event` is the `RequestEvents` listener."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        model_cap: int = 200,
        droppable: Iterable[str] = (),
    ) -> None:
        # Its own registry by default rather than the global one: tests build many apps in one
        # process, and two apps on the global registry would collide on metric names.
        own = registry is None
        self.registry = CollectorRegistry() if registry is None else registry
        self.model_cap = model_cap
        self.models = ModelLabels(model_cap)
        # The names that are their own label, tested inline by the per-request metrics before
        # they call `model_label`: most requests name a model already seen.
        self._models = self.models.own
        # An upstream's config may add droppable names; they are bounded by config, not clients.
        self._droppable = DROPPABLE_FIELDS | frozenset(droppable)
        if own:
            _register_runtime_collectors(self.registry)
        self._define(self.registry)
        self.counter = EventCounter(self.models, self._rules())
        # The listener is the compiled counter's own method: a `Metrics` method calling it
        # would put an interpreted call back on every event.
        self.on_event: Listener = self.counter.on_event

    def _define(self, r: CollectorRegistry) -> None:
        um = ("upstream", "model")
        # The hot metrics are registered in the same order as the others so `/metrics` lists
        # families as it always did; `register` also runs the name-collision check (describe()).
        self.requests = FastCounter(
            "latchgate_requests_total",
            "Client requests answered, by final HTTP status.",
            (*um, "route", "stream", "status"),
        )
        self.request_duration = FastHistogram(
            "latchgate_request_duration_seconds",
            "Client request to last byte.",
            (*um, "stream"),
            DURATION_BUCKETS,
        )
        self.first_token_seconds = FastHistogram(
            "latchgate_time_to_first_token_seconds",
            "Streams: request to first content, reasoning or tool-call fragment.",
            um,
            DURATION_BUCKETS,
        )
        self.overhead = FastHistogram(
            "latchgate_overhead_seconds",
            "Time spent inside latchgate (total minus time waiting on the upstream).",
            ("route",),
            OVERHEAD_BUCKETS,
        )
        self.upstream_requests = FastCounter(
            "latchgate_upstream_requests_total",
            "Every upstream attempt (resends and retries included), by status.",
            (*um, "status"),
        )
        for fast in (
            self.requests,
            self.request_duration,
            self.first_token_seconds,
            self.overhead,
            self.upstream_requests,
        ):
            r.register(fast)
        self.refusals = _counter(
            r,
            "latchgate_refusals_total",
            "Refusals recognised, by the capability learned.",
            (*um, "capability"),
        )
        self.latches = Gauge(
            "latchgate_latches", "Latches currently held.", ("upstream", "capability"), registry=r
        )
        self.fields_dropped = _counter(
            r,
            "latchgate_fields_dropped_total",
            "Droppable fields removed from requests.",
            ("upstream", "field"),
        )
        self.retries = _counter(
            r, "latchgate_retries_total", "Retries by reason.", ("upstream", "reason")
        )
        self.endpoint_silent = _counter(
            r,
            "latchgate_endpoint_silent_total",
            "Watchdog firings, by phase.",
            ("upstream", "phase"),
        )
        self.context_overflow = _counter(
            r,
            "latchgate_context_overflow_total",
            "Context overflows refused before sending (preflight) or reported by the upstream.",
            (*um, "where"),
        )
        self._define_context(r)
        self._define_tools(r)
        self._define_scale(r)
        self.schemas_relaxed = _counter(
            r,
            "latchgate_schemas_relaxed_total",
            "Requests sent with relaxed schemas.",
            ("upstream",),
        )
        self.tokens_total = _counter(
            r,
            "latchgate_tokens_total",
            "Prompt, completion and cached tokens from upstream usage.",
            (*um, "kind"),
        )
        self.inflight_requests = FastGauge(
            "latchgate_inflight_requests", "Requests in flight.", ("upstream",)
        )
        r.register(self.inflight_requests)
        self.client_disconnects = _counter(
            r,
            "latchgate_client_disconnects_total",
            "Clients that went away mid-request (upstream cancelled).",
            ("upstream",),
        )
        r.register(
            _ReadCounter(
                "latchgate_log_write_failures",
                "Log lines that could not be written (disk full, a closed pipe); the requests "
                "that logged them were answered all the same.",
                _since(write_failures),
            )
        )

    # -- the cardinality guard ------------------------------------------------------------

    def _define_context(self, r: CollectorRegistry) -> None:
        """The context-rescue counters: rewrites by action and outcome, tokens taken out."""
        um = ("upstream", "model")
        self.context_rescues = _counter(
            r,
            "latchgate_context_rescues_total",
            "Requests over the window rewritten to fit it by pruning old tool results or "
            "compacting old turns: a new rewrite (new: the prompt cache is lost once), the same "
            "rewrite as the conversation's previous turn (repeated), a compaction that fell back "
            "(failed), or still too long (refused).",
            (*um, "action", "outcome"),
        )
        self.context_tokens_removed = _counter(
            r,
            "latchgate_context_tokens_removed_total",
            "Estimated prompt tokens context rescue took out of requests.",
            um,
        )

    def _define_scale(self, r: CollectorRegistry) -> None:
        """Shared state and upstream pools: the backend's health, and each member's load."""
        self.state_backend_up = Gauge(
            "latchgate_state_backend_up",
            "1 while the shared state backend (Redis) answers, 0 while latchgate serves from "
            "memory without it.",
            ("backend",),
            registry=r,
        )
        self.state_backend_errors = Counter(
            "latchgate_state_backend_errors_total",
            "Operations on the shared state backend that failed or timed out (the request went "
            "on from memory).",
            ("backend", "operation"),
            registry=r,
        )
        self.members = _MemberCollector()
        r.register(self.members)
        self.managed = ManagedCollector()
        r.register(self.managed)

    def state_backend(self, backend: str, up: bool) -> None:
        self.state_backend_up.labels(backend).set(1 if up else 0)

    def state_error(self, backend: str, operation: str) -> None:
        self.state_backend_errors.labels(backend, operation).inc()

    def _define_tools(self, r: CollectorRegistry) -> None:
        """The tool-call counters: recovery, repair, healing, tool_choice, emulation."""
        um = ("upstream", "model")
        self.tool_calls_recovered = _counter(
            r,
            "latchgate_tool_calls_recovered_total",
            "Tool calls recovered from text, by format.",
            (*um, "format"),
        )
        self.tool_arguments_repaired = _counter(
            r,
            "latchgate_tool_arguments_repaired_total",
            "Tool-call arguments repaired, unparseable or truncated.",
            (*um, "outcome"),
        )
        self.tool_calls_healed = _counter(
            r,
            "latchgate_tool_calls_healed_total",
            "Replies with unusable tool calls: asked again and healed, asked again and still "
            "unusable (failed), or passed on flagged.",
            (*um, "outcome"),
        )
        self.tool_choice_enforced = _counter(
            r,
            "latchgate_tool_choice_enforced_total",
            "Replies that did not honour tool_choice: re-asked (enforced, failed), passed on "
            "(flagged), or calls turned into text for tool_choice none (converted).",
            (*um, "choice", "outcome"),
        )
        self.tools_emulated = _counter(
            r,
            "latchgate_tools_emulated_total",
            "Requests whose tools were described in the prompt because the model refuses "
            "native tools.",
            um,
        )

    def _rules(self) -> dict[str, Rule]:
        """Which series each event kind moves, and with which of its labels."""
        removed = self.context_tokens_removed.values
        return {
            ev.REFUSAL: Rule(self.refusals.values, ("capability",)),
            ev.FIELD_DROPPED: Rule(
                self.fields_dropped.values, by_model=False, fields=self._droppable
            ),
            ev.RETRY: Rule(self.retries.values, ("reason",), by_model=False),
            ev.SILENT: Rule(self.endpoint_silent.values, ("phase",), by_model=False),
            ev.OVERFLOW: Rule(self.context_overflow.values, ("where",)),
            ev.CONTEXT_RESCUED: Rule(
                self.context_rescues.values, ("action", "outcome"), removed=removed
            ),
            ev.TOOL_RECOVERED: Rule(self.tool_calls_recovered.values, ("format",)),
            ev.ARGUMENTS: Rule(self.tool_arguments_repaired.values, ("outcome",)),
            ev.TOOL_HEALED: Rule(self.tool_calls_healed.values, ("outcome",)),
            ev.TOOL_CHOICE_ENFORCED: Rule(self.tool_choice_enforced.values, ("choice", "outcome")),
            ev.TOOLS_EMULATED: Rule(self.tools_emulated.values),
            ev.SCHEMAS_RELAXED: Rule(self.schemas_relaxed.values, by_model=False),
            ev.CLIENT_DISCONNECT: Rule(self.client_disconnects.values, by_model=False),
        }

    @property
    def mask(self) -> Callable[[str], str]:
        """Masks secrets in a model's name (set by the proxy to its masker's): clients do send
        a key where the model goes, and a label leaves latchgate on every scrape."""
        return self.models.mask

    @mask.setter
    def mask(self, mask: Callable[[str], str]) -> None:
        self.models.mask = mask

    def model_label(self, model: str) -> str:
        """The `model` label (`ModelLabels`): the first `model_cap` names, then "other"."""
        if model in self._models:
            return model  # the usual name, told without a call into ModelLabels
        return self.models.label(model)

    # -- measurements the request's owner reports -----------------------------------------

    def request_done(
        self,
        *,
        upstream: str,
        model: str,
        route: str,
        stream: bool,
        status: int,
        duration: float,
        overhead: float,
    ) -> None:
        """One client request answered: its count, its duration and latchgate's own share."""
        # Inlined `model_label` fast path (a method call per request is ~50 ns).
        m = model if model in self._models else self.model_label(model)
        s = "true" if stream else "false"
        key = (upstream, m, route, s, _STATUS_LABEL.get(status) or str(status))
        counts = self.requests.values
        counts[key] = counts.get(key, 0.0) + 1.0
        self.request_duration.observe((upstream, m, s), duration)
        # Clock jitter can make "total minus upstream wait" a hair negative; a negative sum
        # would corrupt the histogram, so it is clamped at zero.
        self.overhead.observe((route,), overhead if overhead > 0.0 else 0.0)

    def first_token(self, *, upstream: str, model: str, seconds: float) -> None:
        """A stream's time from request to first content, reasoning or tool-call fragment."""
        m = model if model in self._models else self.model_label(model)
        self.first_token_seconds.observe((upstream, m), seconds)

    def upstream_attempt(self, *, upstream: str, model: str, status: str) -> None:
        """One upstream attempt: its HTTP status as a string ("200", "502") or "error"."""
        m = model if model in self._models else self.model_label(model)
        key = (upstream, m, status)
        counts = self.upstream_requests.values
        counts[key] = counts.get(key, 0.0) + 1.0

    def tokens(
        self, *, upstream: str, model: str, prompt: int, completion: int, cached: int
    ) -> None:
        """Token counts from the upstream's usage report; zeros still create the series."""
        m = model if model in self._models else self.model_label(model)
        counts = self.tokens_total.values
        # Unrolled rather than a loop over (kind, n) pairs: no tuple-of-tuples per call. A counter
        # cannot go down, so a server reporting a negative count adds 0 (the series still exists).
        key = (upstream, m, "prompt")
        counts[key] = counts.get(key, 0.0) + (prompt if prompt > 0 else 0)
        key = (upstream, m, "completion")
        counts[key] = counts.get(key, 0.0) + (completion if completion > 0 else 0)
        key = (upstream, m, "cached")
        counts[key] = counts.get(key, 0.0) + (cached if cached > 0 else 0)

    def inflight(self, upstream: str, delta: int) -> None:
        """Move the in-flight gauge by `delta` (+1 on arrival, -1 when the answer is done)."""
        values = self.inflight_requests.values
        key = (upstream,)
        values[key] = values.get(key, 0.0) + delta

    def set_latches(self, held: Mapping[tuple[str, str], int]) -> None:
        """Replace the latches gauge with exactly `held`: (upstream, capability) -> count."""
        # clear() then set, rather than set-only: a latch that expired or was reset must
        # disappear from the gauge, not linger at its last value.
        self.latches.clear()
        for (upstream, capability), n in held.items():
            self.latches.labels(upstream, capability).set(n)

    def render(self) -> tuple[bytes, str]:
        """The body and content type for `GET /metrics` (Prometheus text format)."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class MemberStats(NamedTuple):
    """What a scrape shows of one member of an upstream pool (`proxy.upstreams.pool.Member`)."""

    upstream: str
    member: str
    requests: int
    failures: int
    in_flight: int
    healthy: bool
    slots: int | None
    affinity_hits: int
    affinity_misses: int
    prompt_tokens: int
    cached_tokens: int


# (name, type, help, value of a MemberStats) of every per-member family.
_MEMBER_FAMILIES: tuple[tuple[str, str, str, Callable[[MemberStats], float]], ...] = (
    ("latchgate_member_requests", "counter", "Attempts sent to each member of a pool.",
     lambda m: m.requests),
    ("latchgate_member_failures", "counter",
     "Attempts on a member that failed to connect or timed out (it is then skipped until its "
     "next good health check).", lambda m: m.failures),
    ("latchgate_member_in_flight", "gauge", "Requests in flight on each member.",
     lambda m: m.in_flight),
    ("latchgate_member_healthy", "gauge", "1 while the member passes its health checks.",
     lambda m: 1 if m.healthy else 0),
    ("latchgate_member_slots", "gauge",
     "Parallel slots the member has (llama.cpp total_slots), 0 while unknown.",
     lambda m: m.slots or 0),
    ("latchgate_member_prompt_tokens", "counter", "Prompt tokens the member was sent.",
     lambda m: m.prompt_tokens),
    ("latchgate_member_cached_prompt_tokens", "counter",
     "Prompt tokens the member took from its prompt cache (llama.cpp timings.cache_n, or "
     "the usage report's cached tokens).", lambda m: m.cached_tokens),
)  # fmt: skip


class _MemberCollector(Collector):
    """Per-member series, read from the pools at scrape time (`source`): nothing on the request
    path moves a metric for them, the pool's own counters are the truth."""

    def __init__(self) -> None:
        self.source: Callable[[], Iterable[MemberStats]] = list

    def describe(self) -> list[Metric]:
        return []  # read at scrape time: nothing to check for name collisions up front

    def collect(self) -> Iterator[Metric]:
        rows = list(self.source())
        if not rows:
            return  # no pool: no families at all, rather than empty ones
        labels = ("upstream", "member")
        for name, kind, documentation, value in _MEMBER_FAMILIES:
            family: Metric
            if kind == "counter":
                family = CounterMetricFamily(name, documentation, labels=labels)
            else:
                family = GaugeMetricFamily(name, documentation, labels=labels)
            for row in rows:
                family.add_metric((row.upstream, row.member), value(row))
            yield family
        affinity = CounterMetricFamily(
            "latchgate_affinity",
            "Requests of a known conversation: kept on the member of its previous turn (hit), or "
            "moved because that member was unhealthy, already tried or clearly busier (miss).",
            labels=("upstream", "member", "outcome"),
        )
        for row in rows:
            affinity.add_metric((row.upstream, row.member, "hit"), row.affinity_hits)
            affinity.add_metric((row.upstream, row.member, "miss"), row.affinity_misses)
        yield affinity


def _since(read: Callable[[], int]) -> Callable[[], float]:
    """`read`, counted from now on (for a process-wide count: since this registry was made)."""
    base = read()
    return lambda: float(read() - base)


class _ReadCounter(Collector):
    """A label-less counter whose value is read at scrape time from whoever keeps it."""

    def __init__(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        self._name, self._doc, self._read = name, documentation, read

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._doc, labels=())
        if value := self._read():  # like the other counters: no sample before the first move
            family.add_metric((), value)
        yield family


def _register_runtime_collectors(registry: CollectorRegistry) -> None:
    """Add the process, platform and GC collectors: cheap, and what every operator expects."""
    process_collector.ProcessCollector(registry=registry)
    platform_collector.PlatformCollector(registry=registry)
    gc_collector.GCCollector(registry=registry)
