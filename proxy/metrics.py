"""Every Prometheus metric latchgate exports, and the one place events become counter moves.

Metrics are a product surface (operators watch refusal and retry rates in Grafana), so their names
and labels follow `spec/OBSERVABILITY.md` exactly and live here, not scattered through handlers.
Request-path stages never touch a counter: they record an `Event` on the request's
`RequestEvents`, and `Metrics.on_event` (registered as a listener) maps each kind to its counter.
The few measurements that are not decisions (durations, tokens, in-flight requests, latches held)
have plain methods the request's owner calls once.

Two labels come from outside and would let a client or a server grow the number of series without
bound: `model` (a client may invent model names) and `field` (a server names the field it refuses).
`model` keeps the first `model_cap` distinct names and folds the rest into "other"; `field` is
limited to the droppable set of BEHAVIOUR 2.5, anything else becomes "other".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    gc_collector,
    generate_latest,
    platform_collector,
    process_collector,
)

from proxy import events as ev
from proxy.events import Event, RequestEvents

OTHER = "other"

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
DROPPABLE_FAMILIES = (("mirostat", "mirostat*"), ("dry_", "dry_*"), ("xtc_", "xtc_*"))


def field_label(field: str, allowed: frozenset[str] = DROPPABLE_FIELDS) -> str:
    """The `field` label for a dropped field: itself if droppable, its family, or "other"."""
    if field in allowed:
        return field
    for prefix, family in DROPPABLE_FAMILIES:
        if field.startswith(prefix):
            return family
    return OTHER


def _bool_label(value: bool) -> str:
    return "true" if value else "false"


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
        self._models: set[str] = set()
        # Labelled children, cached: `labels()` costs ~1.5 µs (lock, validation), 9 per request.
        self._children: dict[tuple[Any, ...], Any] = {}
        # An upstream's config may add droppable names; they are bounded by config, not clients.
        self._droppable = DROPPABLE_FIELDS | frozenset(droppable)
        if own:
            _register_runtime_collectors(self.registry)
        self._define(self.registry)
        self._handlers: dict[str, Callable[[RequestEvents, Event], None]] = {
            ev.REFUSAL: self._on_refusal,
            ev.FIELD_DROPPED: self._on_field_dropped,
            ev.RETRY: self._on_retry,
            ev.SILENT: self._on_silent,
            ev.OVERFLOW: self._on_overflow,
            ev.TOOL_RECOVERED: self._on_tool_recovered,
            ev.ARGUMENTS: self._on_arguments,
            ev.SCHEMAS_RELAXED: self._on_schemas_relaxed,
            ev.CLIENT_DISCONNECT: self._on_client_disconnect,
        }

    def _define(self, r: CollectorRegistry) -> None:
        um = ("upstream", "model")
        self.requests = Counter(
            "latchgate_requests_total",
            "Client requests answered, by final HTTP status.",
            (*um, "route", "stream", "status"),
            registry=r,
        )
        self.request_duration = Histogram(
            "latchgate_request_duration_seconds",
            "Client request to last byte.",
            (*um, "stream"),
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.first_token_seconds = Histogram(
            "latchgate_time_to_first_token_seconds",
            "Streams: request to first content, reasoning or tool-call fragment.",
            um,
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.overhead = Histogram(
            "latchgate_overhead_seconds",
            "Time spent inside latchgate (total minus time waiting on the upstream).",
            ("route",),
            buckets=OVERHEAD_BUCKETS,
            registry=r,
        )
        self.upstream_requests = Counter(
            "latchgate_upstream_requests_total",
            "Every upstream attempt (resends and retries included), by status.",
            (*um, "status"),
            registry=r,
        )
        self.refusals = Counter(
            "latchgate_refusals_total",
            "Refusals recognised, by the capability learned.",
            (*um, "capability"),
            registry=r,
        )
        self.latches = Gauge(
            "latchgate_latches", "Latches currently held.", ("upstream", "capability"), registry=r
        )
        self.fields_dropped = Counter(
            "latchgate_fields_dropped_total",
            "Droppable fields removed from requests.",
            ("upstream", "field"),
            registry=r,
        )
        self.retries = Counter(
            "latchgate_retries_total", "Retries by reason.", ("upstream", "reason"), registry=r
        )
        self.endpoint_silent = Counter(
            "latchgate_endpoint_silent_total",
            "Watchdog firings, by phase.",
            ("upstream", "phase"),
            registry=r,
        )
        self.context_overflow = Counter(
            "latchgate_context_overflow_total",
            "Context overflows refused before sending (preflight) or reported by the upstream.",
            (*um, "where"),
            registry=r,
        )
        self.tool_calls_recovered = Counter(
            "latchgate_tool_calls_recovered_total",
            "Tool calls recovered from text, by format.",
            (*um, "format"),
            registry=r,
        )
        self.tool_arguments_repaired = Counter(
            "latchgate_tool_arguments_repaired_total",
            "Tool-call arguments repaired, unparseable or truncated.",
            (*um, "outcome"),
            registry=r,
        )
        self.schemas_relaxed = Counter(
            "latchgate_schemas_relaxed_total",
            "Requests sent with relaxed schemas.",
            ("upstream",),
            registry=r,
        )
        self.tokens_total = Counter(
            "latchgate_tokens_total",
            "Prompt, completion and cached tokens from upstream usage.",
            (*um, "kind"),
            registry=r,
        )
        self.inflight_requests = Gauge(
            "latchgate_inflight_requests", "Requests in flight.", ("upstream",), registry=r
        )
        self.client_disconnects = Counter(
            "latchgate_client_disconnects_total",
            "Clients that went away mid-request (upstream cancelled).",
            ("upstream",),
            registry=r,
        )

    # -- the cardinality guard ------------------------------------------------------------

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def model_label(self, model: str) -> str:
        """The `model` label: the first `model_cap` distinct names as they are, then "other"."""
        if model in self._models:
            return model
        if len(self._models) < self.model_cap:
            self._models.add(model)
            return model
        return OTHER

    # -- the event seam -------------------------------------------------------------------

    def on_event(self, req: RequestEvents, event: Event) -> None:
        """Count one event (the `RequestEvents` listener); kinds with no metric are ignored."""
        handler = self._handlers.get(event.kind)
        if handler is not None:
            handler(req, event)

    def _um(self, req: RequestEvents) -> tuple[str, str]:
        return req.upstream, self.model_label(req.model)

    def _on_refusal(self, req: RequestEvents, e: Event) -> None:
        capability = e.labels.get("capability", OTHER)
        self.refusals.labels(*self._um(req), capability).inc(e.count)

    def _on_field_dropped(self, req: RequestEvents, e: Event) -> None:
        field = field_label(e.labels.get("field", OTHER), self._droppable)
        self.fields_dropped.labels(req.upstream, field).inc(e.count)

    def _on_retry(self, req: RequestEvents, e: Event) -> None:
        self.retries.labels(req.upstream, e.labels.get("reason", OTHER)).inc(e.count)

    def _on_silent(self, req: RequestEvents, e: Event) -> None:
        self.endpoint_silent.labels(req.upstream, e.labels.get("phase", OTHER)).inc(e.count)

    def _on_overflow(self, req: RequestEvents, e: Event) -> None:
        where = e.labels.get("where", OTHER)
        self.context_overflow.labels(*self._um(req), where).inc(e.count)

    def _on_tool_recovered(self, req: RequestEvents, e: Event) -> None:
        fmt = e.labels.get("format", OTHER)
        self.tool_calls_recovered.labels(*self._um(req), fmt).inc(e.count)

    def _on_arguments(self, req: RequestEvents, e: Event) -> None:
        outcome = e.labels.get("outcome", OTHER)
        self.tool_arguments_repaired.labels(*self._um(req), outcome).inc(e.count)

    def _on_schemas_relaxed(self, req: RequestEvents, e: Event) -> None:
        self.schemas_relaxed.labels(req.upstream).inc(e.count)

    def _on_client_disconnect(self, req: RequestEvents, e: Event) -> None:
        self.client_disconnects.labels(req.upstream).inc(e.count)

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
        m = self.model_label(model)
        s = _bool_label(stream)
        self._child(self.requests, upstream, m, route, s, str(status)).inc()
        self._child(self.request_duration, upstream, m, s).observe(duration)
        # Clock jitter can make "total minus upstream wait" a hair negative; a negative sum
        # would corrupt the histogram, so it is clamped at zero.
        self._child(self.overhead, route).observe(max(overhead, 0.0))

    def first_token(self, *, upstream: str, model: str, seconds: float) -> None:
        """A stream's time from request to first content, reasoning or tool-call fragment."""
        self._child(self.first_token_seconds, upstream, self.model_label(model)).observe(seconds)

    def upstream_attempt(self, *, upstream: str, model: str, status: str) -> None:
        """One upstream attempt: its HTTP status as a string ("200", "502") or "error"."""
        self._child(self.upstream_requests, upstream, self.model_label(model), status).inc()

    def tokens(
        self, *, upstream: str, model: str, prompt: int, completion: int, cached: int
    ) -> None:
        """Token counts from the upstream's usage report; zeros still create the series."""
        m = self.model_label(model)
        for kind, n in (("prompt", prompt), ("completion", completion), ("cached", cached)):
            # A counter cannot go down; a server reporting a negative count is ignored.
            self._child(self.tokens_total, upstream, m, kind).inc(max(n, 0))

    def inflight(self, upstream: str, delta: int) -> None:
        """Move the in-flight gauge by `delta` (+1 on arrival, -1 when the answer is done)."""
        self._child(self.inflight_requests, upstream).inc(delta)

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


def _register_runtime_collectors(registry: CollectorRegistry) -> None:
    """Add the process, platform and GC collectors: cheap, and what every operator expects."""
    process_collector.ProcessCollector(registry=registry)
    platform_collector.PlatformCollector(registry=registry)
    gc_collector.GCCollector(registry=registry)
